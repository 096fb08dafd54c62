#!/usr/bin/python3
"""gen.py -- PyTorch fixtures for kiln's composite ops (the outside oracle).

Run from anywhere with Debian's interpreter, which sees python3-torch:

    /usr/bin/python3 tests/ref/gen.py

It rewrites tests/ref/data/*.bin and tests/ref/data/MANIFEST. Output is
deterministic: every family reseeds its own generator, so regenerating gives
identical bytes. tests/test_ref.c (with tests/ref/fixture.h) replays every case.

Binary format (all integers little-endian; one file per op family)
------------------------------------------------------------------
    file   := magic "KNREF002" (8 bytes), u32 ncases, case * ncases
    case   := str name, str op,
              u32 nint, i64 * nint,          integer arguments (meaning per op, below)
              u32 nflt, f64 * nflt,          float arguments
              u32 nin,  tensor * nin,        inputs, in the kn_ call's order
              u32 nout, tensor * nout,       expected outputs
              u32 ncot, tensor * ncot,       gradient part (KNREF002 only; both counts 0
              u32 ngrad, tensor * ngrad        for a case without one), below
    str    := u16 length, bytes (no terminator)
    tensor := u8 code, u8 ndim, u8 nsteps, u8 0, i64 shape[ndim], step * nsteps, data
              code: kn_dtype (F32 0, F64 1, F16 2, BF16 3, I32 4, I64 5, BOOL 6, U8 7),
                    254 a Python number (kn_scalar; ndim 0, data one f64),
                    255 absent (pass NULL; no shape, no data).
              data: numel * dtype size bytes, row-major, contiguous.
    step   := u8 kind, u8 nargs, i64 * nargs   a view applied, in order, to the
              stored contiguous tensor to build a non-contiguous input:
              1 transpose(d0, d1)   2 permute(perm...)
              3 slice(dim, start, stop, step)   4 expand(shape...)
    MANIFEST: one line per file, "NAME NCASES".
    KNREF001 files (no gradient part in any case) are still read by fixture.h.

Gradient part: ncot == nout cotangents, one per output: a tensor of the
output's dtype and shape, or absent (255) for an output that takes no part
(integer results, batch_norm's running stats). ngrad == nin gradients, one per
input: d(sum_i sum(out_i * cot_i)) / d(stored base) for an f32/f64 tensor
input, with the stored base's dtype and (contiguous) shape and no view steps,
so a transposed, sliced or expanded input gets its gradient through the view;
absent for the rest (Python numbers, integer and bool tensors, f16/bf16, absent
inputs, and the inputs PyTorch does not differentiate: batch_norm's running
stats, the class weights of cross_entropy/nll_loss, the weights of
binary_cross_entropy(_with_logits)). Like outputs, gradients are computed with
every floating input and the cotangents widened to f64, then rounded. A case
gets no gradient part when no output is floating, no input is differentiable,
or the f64 gradient is not finite everywhere (NaN inputs, log(0), 0/0: the
value there is a convention, not a derivative). Kinks and ties are kept out
of the gradient cases of every family but one (relu/leaky_relu/hardswish/abs
at their break points, clamp at its bounds, l1_loss at x == y,
maximum/minimum/amax/amin/max_pool2d ties; abs_neg_zero and amin_inf sit on
one for the forward and have no gradient part). The ties family puts its
inputs on them on purpose, NaN included, and pins PyTorch's conventions
there, which kiln shares: maximum/minimum and amax/amin split a tie evenly
(maximum and minimum give a NaN pair the whole gradient on both sides;
amax/amin give a row with a NaN a NaN gradient), max_pool2d gives a window's
gradient to its first maximum (to its last NaN; never to padding), clamp
passes the gradient at both bounds and stops it at NaN, relu stops it at 0,
leaky_relu and elu take their negative side at 0 and their positive side at
NaN, hardswish takes its middle piece at -3 and 3, softplus its soft side at
the threshold. kiln's sign keeps NaN (PyTorch gives 0, its issue #41245), so
sign, abs and l1_loss are pinned at 0 but not at NaN. The PyTorch
conventions the gradients do rely on: floor, ceil, round and sign have zero
gradients; prod with a zero entry gives it the product of the others;
softmax/log_softmax give a -inf input a zero gradient; exp's overflow gives
an infinite gradient. Cotangents come from a generator seeded by the case's
name, so adding a case changes no other.

`op` is the kn_ function without its prefix. Argument conventions by op:
    reductions sum/mean/amax/amin/logsumexp: ints = keepdim, dims...  (no dims: all)
    var/std: ints = keepdim, correction, dims...
    prod/argmax/argmin: ints = dim (KN_NODIM = -2^31: all), keepdim;  cumsum: dim
    clamp: flts = lo, hi (+-inf: no bound);  masked_fill: flts = value;  to: ints = dtype
    reshape/view/expand/permute: ints = shape or perm;  flatten: start, end
    squeeze/unsqueeze: dim;  transpose: d0, d1;  slice: dim, start, stop, step
    narrow: dim, start, length;  pad: ints = pads, flts = value
    cat/stack: ints = dim (inputs: the list);  split: size, dim;  chunk: chunks, dim
    index_select/gather/scatter_add: ints = dim;  triu/tril: diagonal;  one_hot: classes
    conv1d/conv2d/conv_transpose2d: ints = stride[2], padding[2], dilation[2],
        output_padding[2], groups  (kn_conv_opts order)
    max_pool2d/avg_pool2d: ints = kernel[2], stride[2], padding[2], dilation[2],
        ceil_mode, exclude_pad, divisor  (kn_pool_opts order)
    adaptive_avg_pool2d: out_h, out_w
    batch_norm: ints = training; flts = momentum, eps; in = x, rmean, rvar, w, b;
        out = y, then rmean and rvar after the call (when given)
    layer_norm/rms_norm: ints = normalized_shape; flts = eps;  group_norm: groups; eps
    leaky_relu: slope;  elu: alpha;  gelu: ints = tanh;  softplus: flts = beta, threshold
    softmax/log_softmax: dim
    cross_entropy/nll_loss: ints = reduction, has_ignore_index, ignore_index;
        flts = label_smoothing; in = input, target, weight
    mse_loss/l1_loss/binary_cross_entropy(_with_logits): ints = reduction
    scaled_dot_product_attention: ints = is_causal; flts = scale; in = q, k, v, mask
    reduction codes: 0 mean, 1 sum, 2 none (kn_reduction)

Expected values: for floating outputs the case is evaluated twice, once as
PyTorch runs it (this gives the dtype and shape) and once with every floating
input widened to f64; the f64 result rounded to the output dtype is stored.
So the reference is (nearly) correctly rounded, and kiln is judged by its own
error only. Integer and bool outputs are PyTorch's own. The generator warns
when PyTorch's own result is further from the reference than the C test's
tolerance, to catch ill-conditioned cases.
"""

import math
import os
import struct
import sys
import zlib

import torch
import torch.nn.functional as F

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
I32, I64, BOOL, U8 = torch.int32, torch.int64, torch.bool, torch.uint8
DTYPES = [F32, F64, F16, BF16, I32, I64, BOOL, U8]  # kn_dtype order
CODE_SCALAR, CODE_NONE = 254, 255
NODIM = -2147483648
INF = float("inf")
NAN = float("nan")
MEAN, SUM, NONE_RED = 0, 1, 2
RED_NAMES = {MEAN: "mean", SUM: "sum", NONE_RED: "none"}
TOL = {F32: (1e-5, 1e-6), F64: (1e-10, 1e-12), F16: (1e-3, 1e-5), BF16: (8e-3, 1e-4)}  # as test_ref.c

# ---------------------------------------------------------------- inputs

G = torch.Generator()


def seed(n):
    G.manual_seed(n)


def rn(*shape, dtype=F32, scale=1.0):
    """Normal values, drawn in f64 then rounded, so dtype never changes the stream."""
    return (torch.randn(shape, generator=G, dtype=F64) * scale).to(dtype)


def away(x, points, gap=0.05):
    """Moves values within gap of any kink point by 2 * gap (keeps fixtures off kinks)."""
    x = x.clone()
    for p in points:
        near = (x - p).abs() < gap
        x[near] = x[near] + 2 * gap
    return x


def nz(*shape, dtype=F32, lo=0.2):
    """Normal values pushed at least lo away from zero."""
    x = rn(*shape, dtype=F64)
    return (x.sign() * (x.abs() + lo)).to(dtype)


def pos(*shape, dtype=F32, lo=0.1):
    return (rn(*shape, dtype=F64).abs() + lo).to(dtype)


def uni(*shape, lo=0.0, hi=1.0, dtype=F32):
    return (torch.rand(shape, generator=G, dtype=F64) * (hi - lo) + lo).to(dtype)


def ri(lo, hi, *shape, dtype=I64):
    return torch.randint(lo, hi, shape, generator=G, dtype=I64).to(dtype)


def rb(*shape):
    return torch.rand(shape, generator=G) < 0.5


def ft(values, dtype=F32):
    return torch.tensor(values, dtype=dtype)


class T:
    """An input tensor: a stored contiguous base and a view recipe applied to it."""

    def __init__(self, base, *steps):
        self.base = base.contiguous()
        self.steps = steps

    def value(self):
        return self.view_of(self.base.clone())

    def view_of(self, x):
        """The view recipe applied to x (the base, or a copy of it that requires grad)."""
        for s in self.steps:
            if s[0] == "t":
                x = x.transpose(s[1], s[2])
            elif s[0] == "p":
                x = x.permute(*s[1])
            elif s[0] == "s":
                idx = [slice(None)] * s[1] + [slice(s[2], s[3], s[4])]
                x = x[tuple(idx)]
            elif s[0] == "e":
                x = x.expand(*s[1])
        return x


class S:
    """A Python number (kn_scalar)."""

    def __init__(self, v):
        self.v = float(v)

    def value(self):
        return self.v


class Absent:
    def value(self):
        return None


NONE = Absent()


def tr(base):
    """base (.., a, b) stored, the input is its transpose (.., b, a)."""
    return T(base, ("t", -2, -1))


# ---------------------------------------------------------------- encoding

def enc_str(s):
    b = s.encode()
    return struct.pack("<H", len(b)) + b


def enc_data(t):
    t = t.contiguous()
    if t.dtype in (F16, BF16):
        return t.view(torch.int16).numpy().tobytes()
    if t.dtype == BOOL:
        return t.to(U8).numpy().tobytes()
    return t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()


STEP_KIND = {"t": 1, "p": 2, "s": 3, "e": 4}


def enc_step(s):
    args = []
    for a in s[1:]:
        args.extend(a if isinstance(a, (list, tuple)) else [a])
    return struct.pack("<BB", STEP_KIND[s[0]], len(args)) + struct.pack("<%dq" % len(args), *args)


def enc_tensor(t, steps=()):
    code = DTYPES.index(t.dtype)
    head = struct.pack("<BBBB", code, t.dim(), len(steps), 0)
    head += struct.pack("<%dq" % t.dim(), *t.shape)
    return head + b"".join(enc_step(s) for s in steps) + enc_data(t)


def enc_optional(t):
    return struct.pack("<BBBB", CODE_NONE, 0, 0, 0) if t is None else enc_tensor(t)


def enc_input(a):
    if isinstance(a, Absent):
        return struct.pack("<BBBB", CODE_NONE, 0, 0, 0)
    if isinstance(a, S):
        return struct.pack("<BBBBd", CODE_SCALAR, 0, 0, 0, a.v)
    return enc_tensor(a.base, a.steps)


# ---------------------------------------------------------------- cases

class Family:
    def __init__(self, name, seed_value):
        self.name = name
        self.cases = []
        self.names = set()
        self.warnings = 0
        self.grad_cases = 0
        self.grad_ops = set()
        self.grad_skipped = []
        seed(seed_value)

    def case(self, name, op, inputs, fn, ints=(), flts=(), grad=True, nan_grad=False):
        """Records one case: fn(*input values) gives PyTorch's output(s).
        grad=False: no gradient part. nan_grad=True: a gradient part even with NaN inputs or a
        gradient that is not finite (the ties family pins PyTorch's NaN conventions)."""
        assert name not in self.names, name
        self.names.add(name)
        inputs = [a if isinstance(a, (T, S, Absent)) else T(a) for a in inputs]
        outs = expected(name, inputs, fn, self)
        cots, grads = gradients(name, op, inputs, fn, outs, self, nan_grad) if grad else ([], [])
        self.cases.append((name, op, list(ints), list(flts), inputs, outs, cots, grads))

    def encode(self):
        out = [b"KNREF002", struct.pack("<I", len(self.cases))]
        for name, op, ints, flts, inputs, outs, cots, grads in self.cases:
            out.append(enc_str(name) + enc_str(op))
            out.append(struct.pack("<I%dq" % len(ints), len(ints), *ints))
            out.append(struct.pack("<I%dd" % len(flts), len(flts), *flts))
            out.append(struct.pack("<I", len(inputs)) + b"".join(enc_input(a) for a in inputs))
            out.append(struct.pack("<I", len(outs)) + b"".join(enc_tensor(t) for t in outs))
            out.append(struct.pack("<I", len(cots)) + b"".join(enc_optional(t) for t in cots))
            out.append(struct.pack("<I", len(grads)) + b"".join(enc_optional(t) for t in grads))
        return b"".join(out)


def as_list(r):
    return list(r) if isinstance(r, (list, tuple)) else [r]


def widen(v):
    if isinstance(v, torch.Tensor) and v.is_floating_point():
        return v.to(F64)
    return v


def expected(name, inputs, fn, fam):
    native = as_list(fn(*[a.value() for a in inputs]))
    wide = as_list(fn(*[widen(a.value()) for a in inputs]))
    outs = []
    for n, w in zip(native, wide):
        assert n.shape == w.shape, name
        if not n.is_floating_point():
            outs.append(n.contiguous())
            continue
        ref = w.to(n.dtype).contiguous()
        rtol, atol = TOL[n.dtype]
        if not close(n, ref, rtol, atol):
            fam.warnings += 1
            print("warning: %s: PyTorch's own %s result is off the f64 reference by more "
                  "than the test tolerance" % (name, n.dtype), file=sys.stderr)
        outs.append(ref)
    return outs


# ---------------------------------------------------------------- gradients

GTOL = {F32: (1e-4, 1e-5), F64: (1e-9, 1e-10)}  # as test_ref.c's gradient check
GRAD_DTYPES = (F32, F64)
# Float inputs PyTorch does not differentiate (it refuses a grad for them): buffers and weights.
NOGRAD_INPUTS = {"batch_norm": (1, 2), "cross_entropy": (2,), "nll_loss": (2,),
                 "binary_cross_entropy": (2,), "binary_cross_entropy_with_logits": (2, 3)}


def grad_tol(out_dtypes):
    """A gradient is judged at the loosest tolerance of its own dtype and the outputs' dtypes
    it flows back from (an f64 input of an f32 result has an f32-accurate gradient)."""
    def tol(dt):
        ts = [GTOL.get(d, TOL.get(d)) for d in list(out_dtypes) + [dt]]
        return max(t[0] for t in ts), max(t[1] for t in ts)
    return tol


def grad_of(inputs, fn, cots, diff, wide):
    """d(sum_i sum(out_i * cot_i)) / d(base) for the inputs in diff, in f64 when wide."""
    bases, args = {}, []
    for i, a in enumerate(inputs):
        if i in diff:
            b = a.base.detach().clone().to(F64 if wide else a.base.dtype).requires_grad_(True)
            bases[i] = b
            args.append(a.view_of(b))
        else:
            v = a.value()
            args.append(widen(v) if wide else v)
    outs = as_list(fn(*args))
    terms = [(o * c.to(o.dtype)).sum() for o, c in zip(outs, cots) if c is not None and o.requires_grad]
    if not terms:
        return {i: torch.zeros_like(b) for i, b in bases.items()}
    gs = torch.autograd.grad(sum(terms), [bases[i] for i in diff], allow_unused=True)
    return {i: (g if g is not None else torch.zeros_like(bases[i])).detach() for i, g in zip(diff, gs)}


def gradients(name, op, inputs, fn, outs, fam, nan_grad=False):
    """The case's cotangents (one per output) and reference gradients (one per input),
    or ([], []) when the case has no gradient part."""
    diff = [i for i, a in enumerate(inputs) if isinstance(a, T) and a.base.dtype in GRAD_DTYPES
            and i not in NOGRAD_INPUTS.get(op, ())]
    if not diff or not any(o.is_floating_point() for o in outs):
        return [], []
    if not nan_grad and any(inputs[i].base.isnan().any() for i in diff):
        fam.grad_skipped.append(name)
        return [], []
    g = torch.Generator()
    g.manual_seed(zlib.crc32(name.encode()))
    skip_outs = {1, 2} if op == "batch_norm" else set()  # running stats: state, not results
    cots = [torch.randn(o.shape, generator=g, dtype=F64).to(o.dtype)
            if o.is_floating_point() and j not in skip_outs else None for j, o in enumerate(outs)]
    tol = grad_tol([o.dtype for o, c in zip(outs, cots) if c is not None])
    ref = grad_of(inputs, fn, cots, diff, True)
    if not nan_grad and not all(bool(r.isfinite().all()) for r in ref.values()):
        fam.grad_skipped.append(name)
        return [], []
    native = grad_of(inputs, fn, cots, diff, False)
    grads = []
    for i in range(len(inputs)):
        if i not in diff:
            grads.append(None)
            continue
        dt = inputs[i].base.dtype
        r = ref[i].to(dt).contiguous()
        if not close(native[i], r, *tol(dt)):
            fam.warnings += 1
            print("warning: %s: PyTorch's own %s gradient of input %d is off the f64 reference by more "
                  "than the test tolerance" % (name, dt, i), file=sys.stderr)
        grads.append(r)
    fam.grad_cases += 1
    fam.grad_ops.add(op)
    return cots, grads


def close(a, b, rtol, atol):
    a, b = a.to(F64), b.to(F64)
    both_nan = a.isnan() & b.isnan()
    same_inf = a.isinf() & (a == b)
    near = (a - b).abs() <= atol + rtol * b.abs()
    return bool((both_nan | same_inf | near).all())


# ---------------------------------------------------------------- pointwise

UNARY = {
    "neg": torch.neg, "abs": torch.abs, "sign": torch.sign, "exp": torch.exp,
    "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "reciprocal": torch.reciprocal, "square": torch.square, "sin": torch.sin,
    "cos": torch.cos, "tanh": torch.tanh, "erf": torch.erf, "floor": torch.floor,
    "ceil": torch.ceil, "round": torch.round,
}
POSITIVE_DOMAIN = {"log", "sqrt", "rsqrt"}


def unary_input(op, *shape, dtype=F32):
    if op in POSITIVE_DOMAIN:
        return pos(*shape, dtype=dtype)
    if op == "reciprocal":
        return nz(*shape, dtype=dtype)
    if op in ("floor", "ceil", "round"):
        return rn(*shape, dtype=dtype, scale=3.0)
    return rn(*shape, dtype=dtype)


def gen_unary(fam):
    for op, fn in UNARY.items():
        fam.case(op + "_f32", op, [unary_input(op, 3, 4)], fn)
        fam.case(op + "_f64", op, [unary_input(op, 5, dtype=F64)], fn)
        fam.case(op + "_transposed", op, [tr(unary_input(op, 4, 3))], fn)
        fam.case(op + "_0d", op, [unary_input(op)], fn)
        lo = 1 if op in POSITIVE_DOMAIN or op == "reciprocal" else -5
        fam.case(op + "_i32", op, [ri(lo, 6, 2, 3, dtype=I32)], fn)
    fam.case("sin_empty", "sin", [rn(0, 3)], torch.sin)
    fam.case("exp_bool", "exp", [rb(5)], torch.exp)
    fam.case("sign_bool", "sign", [rb(5)], torch.sign)
    fam.case("sqrt_i64", "sqrt", [ri(0, 50, 6)], torch.sqrt)
    fam.case("abs_i64_sliced", "abs", [T(ri(-9, 9, 4, 6), ("s", 1, 1, 6, 2))], torch.abs)
    fam.case("neg_expanded", "neg", [T(rn(3, 1), ("e", [3, 4]))], torch.neg)
    fam.case("log_edges", "log", [ft([0.0, -1.0, 1.0, INF, 2.0])], torch.log)
    fam.case("sqrt_edges", "sqrt", [ft([-1.0, 0.0, 4.0, INF])], torch.sqrt)
    fam.case("reciprocal_zeros", "reciprocal", [ft([0.0, -0.0, 4.0])], torch.reciprocal)
    fam.case("exp_overflow", "exp", [ft([100.0, -200.0, 0.0])], torch.exp)
    halves = [-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, 2.6, -2.6, -0.0]
    fam.case("round_half_even", "round", [ft(halves)], torch.round)
    fam.case("round_half_even_f64", "round", [ft(halves, F64)], torch.round)
    fam.case("floor_negatives", "floor", [ft([-2.5, -2.0, -0.1, 0.0, 0.1, 1.9])], torch.floor)
    fam.case("ceil_negatives", "ceil", [ft([-2.5, -2.0, -0.1, 0.0, 0.1, 1.9])], torch.ceil)
    fam.case("sign_zeros", "sign", [ft([-2.0, 0.0, 3.0, -0.0, -INF])], torch.sign)
    fam.case("sign_i32_zero", "sign", [ft([-7, 0, 3], I32)], torch.sign)
    fam.case("abs_neg_zero", "abs", [ft([-0.0, -1.5, 2.0])], torch.abs, grad=False)  # on the kink
    # PyTorch 1.13 has no CPU exp for f16; kiln computes f16 in f32, which this mirrors.
    fam.case("exp_f16", "exp", [rn(6, dtype=F16)], lambda x: torch.exp(x.to(F64)).to(x.dtype))
    fam.case("sin_bf16", "sin", [rn(6, dtype=BF16)], torch.sin)


def number_as_tensor(fn):
    """fn for ops whose PyTorch form takes no Python number: the number becomes a 0-d
    tensor that promotes exactly as the number would against a dimensioned tensor."""
    def wrap(v, other):
        if not isinstance(v, float):
            return v
        return torch.tensor(v, dtype=F64 if other.is_floating_point() else F32)
    return lambda a, b: fn(wrap(a, b), wrap(b, a))


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: a ** b,
    "fmod": number_as_tensor(torch.fmod), "minimum": number_as_tensor(torch.minimum),
    "maximum": number_as_tensor(torch.maximum),
}


def binary_pair(op, sa, sb, dtype=F32):
    """Operands in the op's comfortable domain."""
    if op == "pow":
        return pos(*sa, dtype=dtype, lo=0.2), rn(*sb, dtype=dtype)
    if op in ("div", "fmod"):
        return rn(*sa, dtype=dtype, scale=3.0), nz(*sb, dtype=dtype, lo=0.3)
    return rn(*sa, dtype=dtype), rn(*sb, dtype=dtype)


def int_pair(op, n, dtype=I32):
    if op == "pow":
        return ri(-3, 4, n, dtype=dtype), ri(0, 4, n, dtype=dtype)
    b = ri(1, 5, n, dtype=dtype) * (ri(0, 2, n, dtype=dtype) * 2 - 1)
    return ri(-9, 10, n, dtype=dtype), b


def gen_binary(fam):
    for op, fn in BINARY.items():
        a, b = binary_pair(op, (3, 4), (3, 4))
        fam.case(op + "_f32", op, [a, b], fn)
        a, b = binary_pair(op, (5,), (5,), F64)
        fam.case(op + "_f64", op, [a, b], fn)
        a, b = binary_pair(op, (3, 1), (1, 4))
        fam.case(op + "_bcast_outer", op, [a, b], fn)
        a, b = binary_pair(op, (2, 3, 4), (4,))
        fam.case(op + "_bcast_rank", op, [a, b], fn)
        a, b = binary_pair(op, (4, 3), (3, 8))
        fam.case(op + "_noncontig", op, [tr(a), T(b, ("s", 1, 0, 8, 2))], fn)
        a, _ = binary_pair(op, (3, 4), (1,))
        fam.case(op + "_pyfloat", op, [a, S(1.5)], fn)
        _, b = binary_pair(op, (1,), (3, 4))
        fam.case(op + "_pyfloat_left", op, [S(1.5), b], fn)
        a, b = int_pair(op, 6)
        fam.case(op + "_i32", op, [a, b], fn)
        if op == "pow":
            a = ri(1, 4, 6, dtype=I32)  # a negative base with a fractional exponent is NaN
        fam.case(op + "_i32_f32", op, [a, binary_pair(op, (6,), (6,))[1]], fn)
        a, b = binary_pair(op, (), ())
        fam.case(op + "_0d", op, [a, b], fn)
    fam.case("add_i64_bool", "add", [ri(-5, 5, 2, 3), rb(2, 3)], torch.add)
    fam.case("add_bool_bool", "add", [rb(6), rb(6)], torch.add)
    fam.case("mul_bool_f32", "mul", [rb(2, 3), rn(2, 3)], torch.mul)
    fam.case("add_u8_i32", "add", [ri(0, 200, 4, dtype=U8), ri(-50, 50, 4, dtype=I32)], torch.add)
    fam.case("add_u8_u8_wrap", "add", [ft([200, 100, 3], U8), ft([100, 200, 4], U8)], torch.add)
    fam.case("add_f16", "add", [rn(5, dtype=F16), rn(5, dtype=F16)], torch.add)
    fam.case("mul_bf16", "mul", [rn(5, dtype=BF16), rn(5, dtype=BF16)], torch.mul)
    fam.case("add_f16_f32", "add", [rn(5, dtype=F16), rn(5)], torch.add)
    fam.case("add_bf16_f16", "add", [rn(5, dtype=BF16), rn(5, dtype=F16)], torch.add)
    fam.case("add_f16_0d_f32", "add", [rn(5, dtype=F16), rn()], torch.add)
    fam.case("add_i32_0d_f32", "add", [ri(-5, 5, 4, dtype=I32), rn()], torch.add)
    fam.case("add_f32_0d_f64", "add", [rn(4), rn(dtype=F64)], torch.add)
    fam.case("add_0d_i64_f32", "add", [ri(-5, 5), rn(3)], torch.add)
    fam.case("add_i32_i64", "add", [ri(-5, 5, 4, dtype=I32), ri(-5, 5, 4)], torch.add)
    fam.case("add_i32_pyfloat", "add", [ri(-5, 5, 4, dtype=I32), S(2.5)], torch.add)
    fam.case("mul_i64_pyfloat", "mul", [ri(-5, 5, 4), S(0.5)], torch.mul)
    fam.case("add_bool_pyfloat", "add", [rb(4), S(1.5)], torch.add)
    fam.case("add_0d_i32_pyfloat", "add", [ri(-5, 5, dtype=I32), S(0.25)], torch.add)
    fam.case("add_f16_pyfloat", "add", [rn(4, dtype=F16), S(1.5)], torch.add)
    fam.case("add_f64_pyfloat", "add", [rn(4, dtype=F64), S(0.1)], torch.add)
    fam.case("add_empty", "add", [rn(0, 4), rn(4)], torch.add)
    fam.case("add_expanded", "add", [T(rn(1, 4), ("e", [3, 4])), T(rn(3, 1), ("e", [3, 4]))], torch.add)
    fam.case("add_permuted", "add", [T(rn(2, 3, 4), ("p", [2, 0, 1])), rn(4, 2, 3)], torch.add)
    fam.case("sub_i64_neg", "sub", [ri(-9, 9, 5), ri(-9, 9, 5)], torch.sub)
    fam.case("div_i32_true", "div", [ft([7, -7, 1, 0], I32), ft([2, 2, 3, 5], I32)], torch.div)
    fam.case("div_by_zero", "div", [ft([1.0, -1.0, 0.0]), ft([0.0, 0.0, 0.0])], torch.div)
    fam.case("pow_neg_base_int_exp", "pow", [ft([-2.0, -1.5, 3.0, -0.5]), ft([3.0, 2.0, -1.0, -2.0])], torch.pow)
    fam.case("pow_pyfloat_sqrt", "pow", [pos(5), S(0.5)], torch.pow)
    fam.case("pow_pyfloat_two", "pow", [rn(5), S(2.0)], torch.pow)
    fam.case("pow_zero_exp", "pow", [ft([0.0, -3.0, 2.0]), ft([0.0, 0.0, 0.0])], torch.pow)
    fam.case("fmod_signs", "fmod", [ft([5.5, -5.5, 5.5, -5.5, 0.0]), ft([2.0, 2.0, -2.0, -2.0, 3.0])], torch.fmod)
    fam.case("fmod_i32_signs", "fmod", [ft([7, -7, 7, -7], I32), ft([3, 3, -3, -3], I32)], torch.fmod)
    nan_a = ft([NAN, 1.0, NAN, -2.0, 3.0, -INF])
    nan_b = ft([0.0, NAN, NAN, -1.0, INF, 0.0])
    fam.case("minimum_nan", "minimum", [nan_a, nan_b], torch.minimum)
    fam.case("maximum_nan", "maximum", [nan_a, nan_b], torch.maximum)
    fam.case("maximum_i32_i64", "maximum", [ri(-9, 9, 5, dtype=I32), ri(-9, 9, 5)], torch.maximum)
    fam.case("minimum_bool", "minimum", [rb(6), rb(6)], torch.minimum)


def gen_clamp(fam):
    def clamp(lo, hi):
        return lambda x: torch.clamp(x, None if lo == -INF else lo, None if hi == INF else hi)

    cases = [
        ("clamp_both", rn(3, 4), -0.5, 0.7),
        ("clamp_lo_only", rn(3, 4), -0.2, INF),
        ("clamp_hi_only", rn(3, 4), -INF, 0.3),
        ("clamp_f64", rn(6, dtype=F64), -1.0, 0.25),
        ("clamp_transposed", tr(rn(4, 3)), -0.5, 0.5),
        ("clamp_i32_int_bounds", ri(-9, 9, 8, dtype=I32), -2, 3),
        ("clamp_i64_lo_only", ri(-9, 9, 8), 0, INF),
        ("clamp_0d", rn(), -0.1, 0.1),
        ("clamp_nan", ft([NAN, 2.0, -2.0]), -1.0, 1.0),
    ]
    for name, x, lo, hi in cases:
        fam.case(name, "clamp", [x], clamp(lo, hi), flts=[lo, hi])


def gen_pointwise():
    fam = Family("pointwise", 1)
    gen_unary(fam)
    gen_binary(fam)
    gen_clamp(fam)
    return fam


# ---------------------------------------------------------------- comparisons and selection

COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}
LOGICAL = {"logical_and": torch.logical_and, "logical_or": torch.logical_or,
           "logical_xor": torch.logical_xor}


def with_ties(a, b):
    """b with about a third of its entries equal to a's, so eq/le/ge see ties."""
    mask = torch.rand(a.shape, generator=G) < 0.33
    return torch.where(mask, a, b)


def gen_compare(fam):
    for op, fn in COMPARE.items():
        a = rn(3, 4)
        fam.case(op + "_f32", op, [a, with_ties(a, rn(3, 4))], fn)
        fam.case(op + "_bcast", op, [rn(3, 1), rn(1, 4)], fn)
        fam.case(op + "_pyfloat", op, [ft([-1.0, 0.0, 0.5, 2.0]), S(0.5)], fn)
        fam.case(op + "_i32_f32", op, [ft([1, 2, 3, -1], I32), ft([1.0, 2.5, 2.0, -1.0])], fn)
        fam.case(op + "_i64", op, [ft([1, 2, 3, -1], I64), ft([1, 3, 2, -1], I64)], fn)
        fam.case(op + "_nan", op, [ft([NAN, NAN, 1.0, INF]), ft([NAN, 1.0, NAN, INF])], fn)
        a = rn(4, 3, dtype=F64)
        fam.case(op + "_f64_transposed", op, [tr(a), with_ties(a.t(), rn(3, 4, dtype=F64))], fn)
        fam.case(op + "_bool", op, [rb(6), rb(6)], fn)
    for op, fn in LOGICAL.items():
        fam.case(op + "_bool", op, [rb(2, 5), rb(2, 5)], fn)
        fam.case(op + "_f32", op, [ft([0.0, 1.5, 0.0, -2.0, NAN]), ft([0.0, 0.0, 3.0, -1.0, 0.0])], fn)
        fam.case(op + "_i32_bool_bcast", op, [ft([[0], [2], [-1]], I32), rb(4)], fn)
        fam.case(op + "_noncontig", op, [tr(rb(4, 3)), T(rb(3, 8), ("s", 1, 1, 8, 2))], fn)
    fam.case("logical_not_bool", "logical_not", [rb(2, 5)], torch.logical_not)
    fam.case("logical_not_f32", "logical_not", [ft([0.0, -0.0, 1.5, NAN, -INF])], torch.logical_not)
    fam.case("logical_not_i64", "logical_not", [ft([0, 3, -1], I64)], torch.logical_not)
    fam.case("logical_not_transposed", "logical_not", [tr(rb(3, 2))], torch.logical_not)


def gen_where(fam):
    w = torch.where
    fam.case("where_f32", "where", [rb(3, 4), rn(3, 4), rn(3, 4)], w)
    fam.case("where_bcast", "where", [rb(3, 1), rn(1, 4), rn(3, 4)], w)
    fam.case("where_cond_bcast_rank", "where", [rb(4), rn(2, 3, 4), rn(2, 3, 4)], w)
    fam.case("where_mixed_f32_i32", "where", [rb(5), rn(5), ri(-5, 5, 5, dtype=I32)], w)
    fam.case("where_i64", "where", [rb(5), ri(-5, 5, 5), ri(-5, 5, 5)], w)
    fam.case("where_f64", "where", [rb(5), rn(5, dtype=F64), rn(5, dtype=F64)], w)
    fam.case("where_pyfloat", "where", [rb(2, 3), rn(2, 3), S(0.0)], w)
    fam.case("where_noncontig", "where", [tr(rb(4, 3)), tr(rn(4, 3)), T(rn(3, 1), ("e", [3, 4]))], w)
    fam.case("where_0d_cond", "where", [torch.tensor(True), rn(3), rn(3)], w)
    mf = torch.Tensor.masked_fill
    fam.case("masked_fill_f32", "masked_fill", [rn(3, 4), rb(3, 4)], lambda x, m: mf(x, m, 2.5), flts=[2.5])
    fam.case("masked_fill_bcast", "masked_fill", [rn(3, 4), rb(1, 4)], lambda x, m: mf(x, m, -1.0), flts=[-1.0])
    fam.case("masked_fill_neg_inf", "masked_fill", [rn(2, 4), rb(2, 4)], lambda x, m: mf(x, m, -INF), flts=[-INF])
    fam.case("masked_fill_i32", "masked_fill", [ri(-5, 5, 6, dtype=I32), rb(6)], lambda x, m: mf(x, m, 7), flts=[7.0])
    fam.case("masked_fill_f64", "masked_fill", [rn(5, dtype=F64), rb(5)], lambda x, m: mf(x, m, 0.1), flts=[0.1])
    fam.case("masked_fill_transposed", "masked_fill", [tr(rn(4, 3)), rb(3, 4)], lambda x, m: mf(x, m, 0.0), flts=[0.0])


def gen_to(fam):
    def to(dt):
        return lambda x: x.to(dt)

    mixed = ft([-2.7, -0.5, 0.0, 0.4, 1.5, 3.99, 100.25])
    cases = [
        ("to_f32_i32", mixed, I32), ("to_f32_i64", mixed, I64),
        ("to_f32_bool", ft([0.0, -0.0, 0.1, -3.0, NAN, INF]), BOOL),
        ("to_f32_f64", rn(5), F64), ("to_f64_f32", rn(5, dtype=F64), F32),
        ("to_f32_f16", rn(8), F16), ("to_f32_bf16", rn(8), BF16),
        ("to_f16_f32", rn(8, dtype=F16), F32), ("to_bf16_f32", rn(8, dtype=BF16), F32),
        ("to_f16_overflow", ft([70000.0, -70000.0, 65504.0, 1e-8]), F16),
        ("to_i64_f32", ri(-1000, 1000, 6), F32), ("to_bool_f32", rb(6), F32),
        ("to_bool_i64", rb(6), I64), ("to_i32_u8", ri(0, 200, 6, dtype=I32), U8),
        ("to_u8_i32", ri(0, 255, 6, dtype=U8), I32), ("to_f32_u8", ft([0.0, 1.9, 200.5, 255.0]), U8),
        ("to_i32_bool", ft([0, 3, -1, 0], I32), BOOL), ("to_i64_i32", ri(-99, 99, 5), I32),
        ("to_f32_f32", rn(4), F32), ("to_transposed_f64", tr(rn(4, 3)), F64),
        ("to_sliced_i32", T(rn(8, scale=4.0), ("s", 0, 1, 8, 3)), I32),
        ("to_0d_i64", rn(), I64),
    ]
    for name, x, dt in cases:
        fam.case(name, "to", [x], to(dt), ints=[DTYPES.index(dt)])


def gen_compare_family():
    fam = Family("compare", 2)
    gen_compare(fam)
    gen_where(fam)
    gen_to(fam)
    return fam


# ---------------------------------------------------------------- reductions

DIMS_REDUCE = {
    "sum": lambda x, d, k: torch.sum(x, d, keepdim=k) if d else torch.sum(x),
    "mean": lambda x, d, k: torch.mean(x, d, keepdim=k) if d else torch.mean(x),
    "amax": lambda x, d, k: torch.amax(x, d, keepdim=k),
    "amin": lambda x, d, k: torch.amin(x, d, keepdim=k),
    "logsumexp": lambda x, d, k: torch.logsumexp(x, d if d else tuple(range(x.dim())), keepdim=k),
}


def reduce_case(fam, name, op, x, dims=(), keepdim=False, grad=True, nan_grad=False):
    fn = DIMS_REDUCE[op]
    if keepdim and not dims:
        dims_all = tuple(range(x.value().dim() if isinstance(x, T) else x.dim()))
        f = lambda v: fn(v, dims_all, True)
    else:
        f = lambda v: fn(v, tuple(dims), keepdim)
    fam.case(name, op, [x], f, ints=[int(keepdim)] + list(dims), grad=grad, nan_grad=nan_grad)


def gen_dims_reductions(fam):
    for op in DIMS_REDUCE:
        reduce_case(fam, op + "_all", op, rn(3, 4))
        reduce_case(fam, op + "_last", op, rn(3, 4), [-1])
        reduce_case(fam, op + "_first_keepdim", op, rn(3, 4), [0], True)
        reduce_case(fam, op + "_two_dims", op, rn(2, 3, 4), [0, 2])
        reduce_case(fam, op + "_neg_dims_keepdim", op, rn(2, 3, 4), [-1, -3], True)
        reduce_case(fam, op + "_all_keepdim", op, rn(2, 3), [], True)
        reduce_case(fam, op + "_f64", op, rn(4, 5, dtype=F64), [1])
        reduce_case(fam, op + "_transposed", op, tr(rn(5, 3)), [1])
        reduce_case(fam, op + "_sliced", op, T(rn(4, 9), ("s", 1, 1, 9, 2)), [-1])
        reduce_case(fam, op + "_expanded", op, T(rn(3, 1), ("e", [3, 5])), [0])
        reduce_case(fam, op + "_long_row", op, rn(2, 64), [1])
        reduce_case(fam, op + "_0d", op, rn())
    for op in ("sum", "amax", "amin"):
        reduce_case(fam, op + "_i32", op, ri(-9, 9, 3, 4, dtype=I32), [1])
        reduce_case(fam, op + "_i64_all", op, ri(-9, 9, 3, 4))
    reduce_case(fam, "sum_bool", "sum", rb(3, 5), [1])
    reduce_case(fam, "sum_bool_all", "sum", rb(3, 5))
    reduce_case(fam, "sum_u8", "sum", ri(0, 255, 6, dtype=U8))
    reduce_case(fam, "sum_empty_dim", "sum", rn(3, 0), [1])
    reduce_case(fam, "sum_empty_all", "sum", rn(0, 4))
    reduce_case(fam, "mean_empty_dim", "mean", rn(3, 0), [1])
    reduce_case(fam, "sum_f16", "sum", rn(8, dtype=F16), [0])
    reduce_case(fam, "amax_nan", "amax", ft([[1.0, NAN, 3.0], [1.0, 2.0, 0.0]]), [1])
    reduce_case(fam, "amin_inf", "amin", ft([[1.0, -INF, 3.0], [INF, INF, INF]]), [1], grad=False)  # a tie
    big = rn(2, 5) * 30 + 1000
    reduce_case(fam, "logsumexp_large", "logsumexp", big, [1])
    reduce_case(fam, "logsumexp_neg_large", "logsumexp", -big, [1])
    reduce_case(fam, "logsumexp_neg_inf_row", "logsumexp", ft([[-INF, -INF], [-INF, 0.0]]), [1])


def gen_var_std(fam):
    def vs(op):
        f = torch.var if op == "var" else torch.std
        return lambda dims, corr, k: lambda x: f(x, dims if dims else None, correction=corr, keepdim=k)

    for op in ("var", "std"):
        mk = vs(op)
        cases = [
            ("all", rn(3, 4), (), 1, False), ("last_c0", rn(3, 5), (-1,), 0, False),
            ("last_c1", rn(3, 5), (-1,), 1, False), ("last_c2", rn(3, 5), (1,), 2, False),
            ("dims_keepdim", rn(2, 3, 4), (0, 2), 1, True), ("all_c0", rn(4, 4), (), 0, False),
            ("f64", rn(4, 6, dtype=F64), (1,), 1, False), ("transposed", tr(rn(5, 3)), (0,), 1, True),
            ("offset", rn(3, 8) + 100.0, (1,), 1, False), ("long_row", rn(2, 64), (1,), 0, False),
        ]
        for name, x, dims, corr, k in cases:
            keep_dims = dims if dims or not k else tuple(range(2))
            fam.case("%s_%s" % (op, name), op, [x], mk(keep_dims, corr, k),
                     ints=[int(k), corr] + list(dims))


def gen_dim_reductions(fam):
    cases = [
        ("dim1", rn(3, 4), 1, False), ("dim0_keepdim", rn(3, 4), 0, True),
        ("neg_dim", rn(2, 3, 4), -2, False), ("all", rn(3, 4), NODIM, False),
        ("f64", rn(4, 5, dtype=F64), 1, False), ("transposed", tr(rn(5, 3)), 1, True),
        ("0d", rn(), NODIM, False),
    ]
    for op in ("argmax", "argmin", "prod"):
        fn = getattr(torch, op)
        for name, x, dim, k in cases:
            if op == "prod":
                x = prod_friendly(x)
            f = (lambda d, kk: (lambda v: fn(v) if d == NODIM else fn(v, d, keepdim=kk)))(dim, k)
            fam.case("%s_%s" % (op, name), op, [x], f, ints=[dim, int(k)])
    ties = ft([[1, 3, 3, 0], [2, 2, -1, -1], [5, 5, 5, 5]], I32)
    for op in ("argmax", "argmin"):
        fn = getattr(torch, op)
        fam.case(op + "_ties_i32", op, [ties], lambda v, fn=fn: fn(v, 1), ints=[1, 0])
        fam.case(op + "_ties_all", op, [ties], lambda v, fn=fn: fn(v), ints=[NODIM, 0])
    fam.case("prod_i32", "prod", [ri(-3, 4, 3, 4, dtype=I32)], lambda v: torch.prod(v, 1), ints=[1, 0])
    fam.case("prod_bool_all", "prod", [rb(5)], lambda v: torch.prod(v), ints=[NODIM, 0])
    fam.case("prod_with_zero", "prod", [ft([[1.5, 0.0, 2.0], [1.5, -2.0, 2.0]])],
             lambda v: torch.prod(v, 1), ints=[1, 0])
    fam.case("prod_empty_dim", "prod", [rn(2, 0)], lambda v: torch.prod(v, 1), ints=[1, 0])


def prod_friendly(x):
    """Values near +-1 so products neither vanish nor overflow."""
    if isinstance(x, T):
        return T(prod_friendly(x.base), *x.steps)
    return (x.sign() * (0.5 + x.abs().clamp(max=1.5))).to(x.dtype)


def gen_cumsum(fam):
    cases = [
        ("dim0", rn(4, 3), 0), ("last", rn(3, 5), -1), ("3d_mid", rn(2, 4, 3), 1),
        ("f64", rn(6, dtype=F64), 0), ("i32", ri(-9, 9, 3, 4, dtype=I32), 1),
        ("bool", rb(2, 6), 1), ("transposed", tr(rn(5, 3)), 1), ("0d", rn(), 0),
        ("empty", rn(0, 3), 0), ("long", rn(64), 0),
    ]
    for name, x, dim in cases:
        fam.case("cumsum_" + name, "cumsum", [x], (lambda d: lambda v: torch.cumsum(v, d))(dim), ints=[dim])


def gen_reduce():
    fam = Family("reduce", 3)
    gen_dims_reductions(fam)
    gen_var_std(fam)
    gen_dim_reductions(fam)
    gen_cumsum(fam)
    return fam


# ---------------------------------------------------------------- shape and indexing

def gen_views(fam):
    def shape_op(op, fn, name, x, *args):
        fam.case(name, op, [x], lambda v: fn(v, *args), ints=list(flat(args)))

    r, v = torch.reshape, torch.Tensor.view
    shape_op("reshape", r, "reshape_2d", rn(2, 3, 4), (6, 4))
    shape_op("reshape", r, "reshape_infer", rn(2, 3, 4), (4, -1, 2))
    shape_op("reshape", r, "reshape_transposed", tr(rn(4, 3)), (12,))
    shape_op("reshape", r, "reshape_to_0d", rn(1, 1), ())
    shape_op("reshape", r, "reshape_from_0d", rn(), (1, 1, 1))
    shape_op("reshape", r, "reshape_empty", rn(0, 4), (4, 0, 3))
    shape_op("reshape", r, "reshape_i64", ri(0, 9, 2, 6), (3, 4))
    shape_op("reshape", r, "reshape_expanded", T(rn(3, 1), ("e", [3, 4])), (2, 6))
    shape_op("view", v, "view_2d", rn(2, 3, 4), (3, 8))
    shape_op("view", v, "view_infer", rn(2, 3, 4), (-1,))
    shape_op("view", v, "view_row_slice", T(rn(5, 4), ("s", 0, 1, 4, 1)), (12,))
    shape_op("view", v, "view_split_dim", rn(6, 4), (2, 3, 4))
    fl = torch.flatten
    shape_op("flatten", fl, "flatten_inner", rn(2, 3, 4, 5), 1, -1)
    shape_op("flatten", fl, "flatten_all", rn(2, 3, 4), 0, -1)
    shape_op("flatten", fl, "flatten_middle", rn(2, 3, 4, 5), 1, 2)
    shape_op("flatten", fl, "flatten_0d", rn(), 0, -1)
    shape_op("flatten", fl, "flatten_transposed", tr(rn(2, 4, 3)), 0, 1)
    sq = torch.squeeze
    shape_op("squeeze", sq, "squeeze_dim", rn(1, 3, 1, 4), 2)
    shape_op("squeeze", sq, "squeeze_neg_dim", rn(1, 3, 1, 4), -4)
    shape_op("squeeze", sq, "squeeze_not_one", rn(1, 3, 1, 4), 1)
    fam.case("squeeze_all", "squeeze", [rn(1, 3, 1, 4)], lambda v: torch.squeeze(v), ints=[NODIM])
    fam.case("squeeze_all_to_0d", "squeeze", [rn(1, 1)], lambda v: torch.squeeze(v), ints=[NODIM])
    un = torch.unsqueeze
    shape_op("unsqueeze", un, "unsqueeze_front", rn(3, 4), 0)
    shape_op("unsqueeze", un, "unsqueeze_back", rn(3, 4), -1)
    shape_op("unsqueeze", un, "unsqueeze_middle", rn(3, 4), 1)
    shape_op("unsqueeze", un, "unsqueeze_neg_middle", rn(3, 4), -2)
    shape_op("unsqueeze", un, "unsqueeze_0d", rn(), 0)
    t = torch.transpose
    shape_op("transpose", t, "transpose_outer", rn(2, 3, 4), 0, 2)
    shape_op("transpose", t, "transpose_neg", rn(2, 3, 4), -1, -2)
    shape_op("transpose", t, "transpose_same", rn(2, 3), 1, 1)
    shape_op("transpose", t, "transpose_i32", ri(0, 9, 3, 4, dtype=I32), 0, 1)
    shape_op("transpose", t, "transpose_of_transposed", tr(rn(4, 3)), 0, 1)
    p = torch.permute
    shape_op("permute", p, "permute_cycle", rn(2, 3, 4), (2, 0, 1))
    shape_op("permute", p, "permute_neg", rn(2, 3, 4), (-1, 0, 1))
    shape_op("permute", p, "permute_4d", rn(2, 3, 4, 5), (0, 2, 3, 1))
    shape_op("permute", p, "permute_identity", rn(2, 3), (0, 1))
    e = torch.Tensor.expand
    shape_op("expand", e, "expand_col", rn(3, 1), (3, 4))
    shape_op("expand", e, "expand_keep", rn(3, 1), (-1, 5))
    shape_op("expand", e, "expand_new_dims", rn(3, 1), (2, -1, 4))
    shape_op("expand", e, "expand_0d", rn(), (2, 3))
    shape_op("expand", e, "expand_bool", rb(1, 3), (2, 3))


def flat(args):
    for a in args:
        if isinstance(a, (tuple, list)):
            yield from a
        else:
            yield a


def gen_slicing(fam):
    c = torch.Tensor.contiguous
    fam.case("contiguous_transposed", "contiguous", [tr(rn(4, 3))], c)
    fam.case("contiguous_sliced", "contiguous", [T(rn(3, 8), ("s", 1, 1, 8, 3))], c)
    fam.case("contiguous_expanded", "contiguous", [T(rn(1, 3), ("e", [2, 3]))], c)
    fam.case("contiguous_already", "contiguous", [rn(2, 3)], c)

    def sl(name, x, dim, start, stop, step):
        idx = (lambda v: [slice(None)] * (dim % v.dim()) + [slice(start, stop, step)])
        fam.case(name, "slice", [x], lambda v: v[tuple(idx(v))], ints=[dim, start, stop, step])

    sl("slice_rows", rn(5, 3), 0, 1, 4, 1)
    sl("slice_step", rn(3, 9), -1, 0, 9, 2)
    sl("slice_step3_offset", rn(2, 10), 1, 2, 9, 3)
    sl("slice_neg_start", rn(3, 5), 1, -3, 5, 1)
    sl("slice_stop_clamped", rn(3, 5), 1, 2, 100, 1)
    sl("slice_empty", rn(3, 5), 1, 2, 2, 1)
    sl("slice_of_transposed", tr(rn(6, 3)), 1, 1, 6, 2)
    nw = torch.narrow
    fam.case("narrow_dim0", "narrow", [rn(5, 3)], lambda v: nw(v, 0, 1, 2), ints=[0, 1, 2])
    fam.case("narrow_last", "narrow", [rn(2, 3, 6)], lambda v: nw(v, -1, 2, 3), ints=[-1, 2, 3])
    fam.case("narrow_neg_start", "narrow", [rn(7)], lambda v: nw(v, 0, -3, 2), ints=[0, -3, 2])
    fam.case("narrow_zero_len", "narrow", [rn(4, 3)], lambda v: nw(v, 0, 2, 0), ints=[0, 2, 0])

    def pad(name, x, pads, value):
        fam.case(name, "pad", [x], lambda v: F.pad(v, pads, value=value), ints=list(pads), flts=[value])

    pad("pad_last", rn(2, 3), (1, 2), 0.0)
    pad("pad_two_dims", rn(2, 3, 4), (1, 1, 2, 0), -1.5)
    pad("pad_three_dims", rn(2, 2, 3), (0, 1, 1, 0, 2, 1), 0.5)
    pad("pad_negative_crop", rn(2, 5), (-1, 2), 0.0)
    pad("pad_i32", ri(-5, 5, 2, 3, dtype=I32), (2, 1), 7.0)
    pad("pad_transposed", tr(rn(4, 3)), (1, 1, 1, 1), 0.0)
    pad("pad_f64", rn(3, dtype=F64), (2, 0), 1.0)
    pad("pad_empty", rn(0, 2), (1, 1), 3.0)


def gen_join(fam):
    def cat(name, xs, dim, op="cat"):
        f = torch.cat if op == "cat" else torch.stack
        fam.case(name, op, xs, lambda *vs: f(vs, dim), ints=[dim])

    cat("cat_dim0", [rn(2, 3), rn(4, 3)], 0)
    cat("cat_dim1_three", [rn(2, 1), rn(2, 3), rn(2, 2)], 1)
    cat("cat_neg_dim", [rn(2, 3, 2), rn(2, 3, 1)], -1)
    cat("cat_with_empty", [rn(0, 3), rn(2, 3)], 0)
    cat("cat_mixed_dtype", [rn(2), ri(-5, 5, 3, dtype=I32)], 0)
    cat("cat_noncontig", [tr(rn(3, 2)), T(rn(2, 6), ("s", 1, 0, 6, 2))], 0)
    cat("cat_one", [rn(2, 3)], 1)
    cat("cat_i64", [ri(0, 9, 2), ri(0, 9, 3)], 0)
    cat("cat_f64", [rn(1, 2, dtype=F64), rn(1, 2, dtype=F64)], 0)
    cat("stack_dim0", [rn(2, 3), rn(2, 3), rn(2, 3)], 0, "stack")
    cat("stack_last", [rn(2, 3), rn(2, 3)], -1, "stack")
    cat("stack_middle", [rn(2, 3), rn(2, 3)], 1, "stack")
    cat("stack_0d", [rn(), rn(), rn()], 0, "stack")
    cat("stack_noncontig", [tr(rn(3, 2)), rn(2, 3)], 0, "stack")
    cat("stack_bool", [rb(3), rb(3)], 0, "stack")

    def split(name, x, size, dim, op="split"):
        f = torch.split if op == "split" else torch.chunk
        fam.case(name, op, [x], lambda v: list(f(v, size, dim)), ints=[size, dim])

    split("split_uneven", rn(5, 3), 2, 0)
    split("split_last_ones", rn(2, 3), 1, -1)
    split("split_bigger", rn(3, 2), 5, 0)
    split("split_even", rn(2, 6), 3, 1)
    split("split_transposed", tr(rn(5, 4)), 2, 1)
    split("chunk_uneven", rn(5, 3), 3, 0, "chunk")
    split("chunk_fewer", rn(6, 2), 4, 0, "chunk")
    split("chunk_last", rn(2, 7), 2, -1, "chunk")
    split("chunk_more_than_size", rn(2, 2), 5, 0, "chunk")


def gen_indexing(fam):
    isel = torch.index_select
    fam.case("index_select_dim0", "index_select", [rn(5, 3), ft([4, 0, 2], I64)], lambda x, i: isel(x, 0, i), ints=[0])
    fam.case("index_select_repeat", "index_select", [rn(3, 5), ft([1, 1, 4, 0], I64)], lambda x, i: isel(x, 1, i), ints=[1])
    fam.case("index_select_neg_dim", "index_select", [rn(2, 3, 4), ft([3, 0], I64)], lambda x, i: isel(x, -1, i), ints=[-1])
    fam.case("index_select_i32_index", "index_select", [rn(4, 2), ft([3, 1], I32)], lambda x, i: isel(x, 0, i), ints=[0])
    fam.case("index_select_transposed", "index_select", [tr(rn(4, 3)), ft([2, 0], I64)], lambda x, i: isel(x, 1, i), ints=[1])
    fam.case("index_select_i64_data", "index_select", [ri(0, 99, 4, 2), ft([0, 3], I64)], lambda x, i: isel(x, 0, i), ints=[0])
    g = torch.gather
    fam.case("gather_dim1", "gather", [rn(3, 4), ri(0, 4, 3, 2)], lambda x, i: g(x, 1, i), ints=[1])
    fam.case("gather_dim0", "gather", [rn(3, 4), ri(0, 3, 2, 4)], lambda x, i: g(x, 0, i), ints=[0])
    fam.case("gather_smaller_index", "gather", [rn(4, 5), ri(0, 5, 2, 3)], lambda x, i: g(x, 1, i), ints=[1])
    fam.case("gather_3d_neg", "gather", [rn(2, 3, 4), ri(0, 4, 2, 3, 5)], lambda x, i: g(x, -1, i), ints=[-1])
    fam.case("gather_transposed", "gather", [tr(rn(4, 3)), ri(0, 4, 3, 2)], lambda x, i: g(x, 1, i), ints=[1])
    sa = torch.scatter_add
    fam.case("scatter_add_dim0", "scatter_add", [rn(3, 4), ri(0, 3, 2, 4), rn(2, 4)],
             lambda x, i, s: sa(x, 0, i, s), ints=[0])
    fam.case("scatter_add_dups", "scatter_add", [rn(2, 5), ft([[0, 0, 4, 0], [1, 1, 1, 3]], I64), rn(2, 4)],
             lambda x, i, s: sa(x, 1, i, s), ints=[1])
    # src cut to the index's shape first: the same values, but PyTorch 1.13's backward for a src
    # larger than the index fails on the shape; the elements beyond it get a zero gradient
    fam.case("scatter_add_small_index", "scatter_add", [rn(3, 4), ri(0, 4, 2, 2), rn(3, 3)],
             lambda x, i, s: sa(x, 1, i, s[:i.shape[0], :i.shape[1]]), ints=[1])
    fam.case("scatter_add_3d_neg", "scatter_add", [rn(2, 3, 4), ri(0, 4, 2, 3, 6), rn(2, 3, 6)],
             lambda x, i, s: sa(x, -1, i, s), ints=[-1])
    fam.case("scatter_add_i64", "scatter_add", [ri(0, 9, 5), ft([0, 0, 2], I64), ri(0, 9, 3)],
             lambda x, i, s: sa(x, 0, i, s), ints=[0])
    for op in ("triu", "tril"):
        fn = getattr(torch, op)
        for name, x, d in [("square", rn(4, 4), 0), ("above", rn(4, 4), 1), ("below", rn(4, 4), -1),
                           ("wide", rn(3, 5), 2), ("tall", rn(5, 3), -2), ("batched", rn(2, 3, 4), 0),
                           ("i32", ri(-9, 9, 3, 3, dtype=I32), 0), ("transposed", tr(rn(4, 3)), 0),
                           ("far", rn(3, 3), 5), ("bool", rb(3, 3), -1)]:
            fam.case("%s_%s" % (op, name), op, [x], (lambda dd: lambda v: fn(v, dd))(d), ints=[d])
    oh = F.one_hot
    fam.case("one_hot_classes", "one_hot", [ft([0, 3, 1], I64)], lambda i: oh(i, 5), ints=[5])
    fam.case("one_hot_infer", "one_hot", [ft([0, 3, 1], I64)], lambda i: oh(i, -1), ints=[-1])
    fam.case("one_hot_2d", "one_hot", [ri(0, 4, 2, 3)], lambda i: oh(i, 4), ints=[4])
    fam.case("one_hot_0d", "one_hot", [ft(2, I64)], lambda i: oh(i, 3), ints=[3])


def gen_shape():
    fam = Family("shape", 4)
    gen_views(fam)
    gen_slicing(fam)
    gen_join(fam)
    gen_indexing(fam)
    return fam


# ---------------------------------------------------------------- linear algebra

def gen_linalg():
    fam = Family("linalg", 5)
    mm = torch.matmul
    for name, a, b in [
        ("1d_1d", rn(4), rn(4)), ("1d_2d", rn(3), rn(3, 5)), ("2d_1d", rn(4, 3), rn(3)),
        ("2d_2d", rn(3, 4), rn(4, 5)), ("batched_bcast", rn(2, 1, 3, 4), rn(5, 4, 2)),
        ("3d_2d", rn(2, 3, 4), rn(4, 2)), ("2d_3d", rn(3, 4), rn(2, 4, 5)),
        ("3d_1d", rn(2, 3, 4), rn(4)), ("1d_3d", rn(4), rn(2, 4, 3)),
        ("transposed_b", rn(3, 4), tr(rn(5, 4))), ("transposed_a", tr(rn(4, 3)), rn(4, 2)),
        ("f64", rn(3, 5, dtype=F64), rn(5, 2, dtype=F64)), ("i64", ri(-5, 5, 2, 3), ri(-5, 5, 3, 2)),
        ("k_zero", rn(2, 0), rn(0, 3)), ("long_k", rn(2, 48), rn(48, 3)),
        ("expanded", T(rn(1, 3, 4), ("e", [2, 3, 4])), rn(2, 4, 2)),
    ]:
        fam.case("matmul_" + name, "matmul", [a, b], mm)
    for name, a, b in [("basic", rn(2, 3, 4), rn(2, 4, 5)), ("transposed", tr(rn(2, 4, 3)), tr(rn(2, 5, 4))),
                       ("f64", rn(3, 2, 2, dtype=F64), rn(3, 2, 3, dtype=F64)), ("one", rn(1, 1, 5), rn(1, 5, 1))]:
        fam.case("bmm_" + name, "bmm", [a, b], torch.bmm)
    for name, x, w, b in [
        ("2d", rn(4, 3), rn(2, 3), rn(2)), ("3d", rn(2, 3, 5), rn(4, 5), rn(4)),
        ("no_bias", rn(4, 3), rn(2, 3), NONE), ("1d", rn(3), rn(2, 3), rn(2)),
        ("f64", rn(3, 4, dtype=F64), rn(2, 4, dtype=F64), rn(2, dtype=F64)),
        ("weight_transposed", rn(4, 3), tr(rn(3, 2)), rn(2)),
    ]:
        fam.case("linear_" + name, "linear", [x, w, b], F.linear)
    return fam


# ---------------------------------------------------------------- convolution and pooling

def conv_ints(stride=(1, 1), padding=(0, 0), dilation=(1, 1), output_padding=(0, 0), groups=1):
    return list(stride) + list(padding) + list(dilation) + list(output_padding) + [groups]


def gen_conv():
    fam = Family("conv", 6)
    for name, x, w, b, s, p, d, g in [
        ("basic", rn(2, 3, 10), rn(4, 3, 3), rn(4), 1, 0, 1, 1),
        ("stride_pad", rn(2, 3, 10), rn(4, 3, 3), rn(4), 2, 1, 1, 1),
        ("dilation", rn(1, 2, 12), rn(3, 2, 3), rn(3), 1, 2, 2, 1),
        ("groups", rn(2, 6, 8), rn(6, 2, 3), rn(6), 1, 1, 1, 3),
        ("no_bias", rn(1, 3, 7), rn(2, 3, 2), NONE, 1, 0, 1, 1),
        ("f64", rn(2, 2, 6, dtype=F64), rn(3, 2, 3, dtype=F64), rn(3, dtype=F64), 1, 1, 1, 1),
        ("transposed", T(rn(2, 8, 3), ("t", 1, 2)), rn(4, 3, 3), rn(4), 1, 0, 1, 1),
    ]:
        fam.case("conv1d_" + name, "conv1d", [x, w, b],
                 (lambda s, p, d, g: lambda x, w, b: F.conv1d(x, w, b, s, p, d, g))(s, p, d, g),
                 ints=conv_ints((s, 0), (p, 0), (d, 1), (0, 0), g))
    for name, x, w, b, s, p, d, g in [
        ("basic", rn(2, 3, 7, 7), rn(4, 3, 3, 3), rn(4), (1, 1), (0, 0), (1, 1), 1),
        ("stride_pad", rn(2, 3, 7, 8), rn(4, 3, 3, 3), rn(4), (2, 1), (1, 2), (1, 1), 1),
        ("dilation", rn(1, 2, 9, 9), rn(3, 2, 3, 3), rn(3), (1, 1), (2, 2), (2, 2), 1),
        ("groups", rn(2, 4, 6, 6), rn(6, 2, 3, 3), rn(6), (1, 1), (1, 1), (1, 1), 2),
        ("depthwise", rn(1, 4, 5, 5), rn(4, 1, 3, 3), rn(4), (1, 1), (1, 1), (1, 1), 4),
        ("pointwise", rn(2, 5, 4, 4), rn(3, 5, 1, 1), rn(3), (1, 1), (0, 0), (1, 1), 1),
        ("asym_kernel", rn(1, 2, 6, 7), rn(3, 2, 2, 3), rn(3), (1, 2), (1, 0), (1, 1), 1),
        ("no_bias", rn(1, 3, 5, 5), rn(2, 3, 3, 3), NONE, (1, 1), (0, 0), (1, 1), 1),
        ("all_options", rn(2, 4, 9, 8), rn(4, 2, 3, 2), rn(4), (2, 3), (2, 1), (2, 1), 2),
        ("f64", rn(1, 2, 5, 5, dtype=F64), rn(2, 2, 3, 3, dtype=F64), rn(2, dtype=F64), (1, 1), (1, 1), (1, 1), 1),
        ("nhwc_input", T(rn(2, 6, 6, 3), ("p", [0, 3, 1, 2])), rn(4, 3, 3, 3), rn(4), (1, 1), (1, 1), (1, 1), 1),
        ("kernel_eq_input", rn(2, 3, 3, 3), rn(2, 3, 3, 3), rn(2), (1, 1), (0, 0), (1, 1), 1),
    ]:
        fam.case("conv2d_" + name, "conv2d", [x, w, b],
                 (lambda s, p, d, g: lambda x, w, b: F.conv2d(x, w, b, s, p, d, g))(s, p, d, g),
                 ints=conv_ints(s, p, d, (0, 0), g))
    for name, x, w, b, s, p, op, d, g in [
        ("basic", rn(2, 3, 4, 4), rn(3, 2, 3, 3), rn(2), (1, 1), (0, 0), (0, 0), (1, 1), 1),
        ("stride2", rn(1, 2, 3, 3), rn(2, 3, 3, 3), rn(3), (2, 2), (1, 1), (1, 1), (1, 1), 1),
        ("asym", rn(1, 2, 3, 4), rn(2, 2, 2, 3), rn(2), (2, 3), (0, 1), (1, 2), (1, 1), 1),
        ("groups", rn(2, 4, 3, 3), rn(4, 3, 3, 3), rn(6), (2, 2), (1, 1), (0, 1), (1, 1), 2),
        ("dilation", rn(1, 2, 4, 4), rn(2, 2, 3, 3), rn(2), (1, 1), (1, 1), (0, 0), (2, 2), 1),
        ("no_bias", rn(1, 3, 3, 3), rn(3, 2, 2, 2), NONE, (2, 2), (0, 0), (0, 0), (1, 1), 1),
        ("f64", rn(1, 2, 3, 3, dtype=F64), rn(2, 2, 3, 3, dtype=F64), rn(2, dtype=F64), (2, 2), (1, 1), (1, 1), (1, 1), 1),
    ]:
        fam.case("conv_transpose2d_" + name, "conv_transpose2d", [x, w, b],
                 (lambda s, p, op, d, g: lambda x, w, b: F.conv_transpose2d(x, w, b, s, p, op, g, d))(s, p, op, d, g),
                 ints=conv_ints(s, p, d, op, g))
    return fam


def pool_ints(k, s=(0, 0), p=(0, 0), d=(1, 1), ceil=False, exclude=False, divisor=0):
    return list(k) + list(s) + list(p) + list(d) + [int(ceil), int(exclude), divisor]


def gen_pool():
    fam = Family("pool", 7)
    for name, x, k, s, p, d, ceil in [
        ("k2", rn(2, 3, 6, 6), (2, 2), (0, 0), (0, 0), (1, 1), False),
        ("k3_s2_p1", rn(1, 2, 7, 7), (3, 3), (2, 2), (1, 1), (1, 1), False),
        ("ceil", rn(1, 2, 7, 7), (2, 2), (2, 2), (0, 0), (1, 1), True),
        ("ceil_pad", rn(1, 1, 8, 8), (3, 3), (2, 2), (1, 1), (1, 1), True),
        ("dilation", rn(1, 2, 8, 8), (2, 2), (1, 1), (0, 0), (2, 2), False),
        ("asym", rn(2, 1, 6, 9), (2, 3), (1, 2), (1, 1), (1, 1), False),
        ("unbatched", rn(3, 5, 5), (2, 2), (0, 0), (0, 0), (1, 1), False),
        ("f64", rn(1, 2, 5, 5, dtype=F64), (3, 3), (1, 1), (1, 1), (1, 1), False),
        ("nhwc_input", T(rn(1, 6, 6, 3), ("p", [0, 3, 1, 2])), (2, 2), (0, 0), (0, 0), (1, 1), False),
        ("negative_input", -pos(1, 1, 4, 4), (3, 3), (1, 1), (1, 1), (1, 1), False),
    ]:
        stride = s if s != (0, 0) else None
        fam.case("max_pool2d_" + name, "max_pool2d", [x],
                 (lambda k, st, p, d, c: lambda v: F.max_pool2d(v, k, st, p, d, c))(k, stride, p, d, ceil),
                 ints=pool_ints(k, s, p, d, ceil))
    for name, x, k, s, p, ceil, exclude, div in [
        ("k2", rn(2, 3, 6, 6), (2, 2), (0, 0), (0, 0), False, False, 0),
        ("pad_include", rn(1, 2, 7, 7), (3, 3), (2, 2), (1, 1), False, False, 0),
        ("pad_exclude", rn(1, 2, 7, 7), (3, 3), (2, 2), (1, 1), False, True, 0),
        ("ceil_include", rn(1, 2, 6, 6), (3, 3), (2, 2), (1, 1), True, False, 0),
        ("ceil_exclude", rn(1, 2, 6, 6), (3, 3), (2, 2), (1, 1), True, True, 0),
        ("ceil_no_pad", rn(1, 1, 7, 5), (2, 2), (2, 2), (0, 0), True, False, 0),
        ("divisor", rn(1, 2, 6, 6), (2, 2), (2, 2), (1, 1), False, False, 3),
        ("asym", rn(2, 1, 5, 8), (2, 3), (1, 2), (0, 1), False, False, 0),
        ("unbatched", rn(2, 4, 4), (2, 2), (0, 0), (0, 0), False, False, 0),
        ("f64", rn(1, 1, 5, 5, dtype=F64), (3, 3), (2, 2), (1, 1), False, True, 0),
    ]:
        stride = s if s != (0, 0) else None
        fam.case("avg_pool2d_" + name, "avg_pool2d", [x],
                 (lambda k, st, p, c, e, dv: lambda v: F.avg_pool2d(v, k, st, p, c, not e, dv or None))(
                     k, stride, p, ceil, exclude, div),
                 ints=pool_ints(k, s, p, (0, 0), ceil, exclude, div))
    for name, x, oh, ow in [
        ("non_divisible", rn(2, 3, 5, 7), 3, 4), ("divisible", rn(1, 2, 6, 6), 2, 3),
        ("global", rn(2, 3, 4, 5), 1, 1), ("identity", rn(1, 1, 3, 3), 3, 3),
        ("upsample", rn(1, 2, 3, 3), 5, 4), ("unbatched", rn(2, 7, 5), 3, 2),
        ("f64", rn(1, 1, 5, 5, dtype=F64), 2, 2), ("transposed", tr(rn(1, 2, 6, 5)), 2, 3),
    ]:
        fam.case("adaptive_avg_pool2d_" + name, "adaptive_avg_pool2d", [x],
                 (lambda o: lambda v: F.adaptive_avg_pool2d(v, o))((oh, ow)), ints=[oh, ow])
    return fam


# ---------------------------------------------------------------- normalisation

def batch_norm_fn(training, momentum, eps):
    def f(x, rm, rv, w, b):
        rm = None if rm is None else rm.clone()
        rv = None if rv is None else rv.clone()
        y = F.batch_norm(x, rm, rv, w, b, training, momentum, eps)
        return [y] + ([rm, rv] if rm is not None else [])
    return f


def gen_batch_norm(fam):
    for name, x, stats, affine, training, momentum, eps in [
        ("train_4d", rn(4, 3, 2, 2), True, True, True, 0.1, 1e-5),
        ("train_2d", rn(6, 4), True, True, True, 0.1, 1e-5),
        ("train_3d_momentum", rn(3, 2, 5), True, True, True, 0.3, 1e-3),
        ("train_no_stats", rn(4, 3, 2, 2), False, True, True, 0.1, 1e-5),
        ("train_no_affine", rn(5, 2, 3), True, False, True, 0.1, 1e-5),
        ("eval_4d", rn(2, 3, 3, 3), True, True, False, 0.1, 1e-5),
        ("eval_no_affine", rn(4, 3), True, False, False, 0.1, 1e-2),
        ("train_f64", rn(4, 3, 2, dtype=F64), True, True, True, 0.1, 1e-5),
        ("train_nhwc_input", T(rn(2, 3, 3, 4), ("p", [0, 3, 1, 2])), True, True, True, 0.1, 1e-5),
        ("train_offset", rn(8, 2) * 3 + 5, True, True, True, 0.2, 1e-5),
    ]:
        v = x.value() if isinstance(x, T) else x
        c, dt = v.shape[1], v.dtype
        rm = rn(c, dtype=dt, scale=0.5) if stats else NONE
        rv = pos(c, dtype=dt, lo=0.5) if stats else NONE
        w = rn(c, dtype=dt) if affine else NONE
        b = rn(c, dtype=dt) if affine else NONE
        fam.case("batch_norm_" + name, "batch_norm", [x, rm, rv, w, b],
                 batch_norm_fn(training, momentum, eps), ints=[int(training)], flts=[momentum, eps])


def gen_layer_norms(fam):
    ln = F.layer_norm
    for name, x, ns, affine, bias, eps in [
        ("last", rn(3, 5), (5,), True, True, 1e-5), ("last_two", rn(2, 3, 4), (3, 4), True, True, 1e-5),
        ("no_affine", rn(4, 6), (6,), False, False, 1e-5), ("weight_only", rn(2, 5), (5,), True, False, 1e-3),
        ("f64", rn(3, 4, dtype=F64), (4,), True, True, 1e-5), ("transposed", tr(rn(2, 6, 3)), (6,), True, True, 1e-5),
        ("offset", rn(3, 8) * 0.5 + 5.0, (8,), True, True, 1e-5), ("long_row", rn(2, 64), (64,), True, True, 1e-5),
    ]:
        dt = (x.base if isinstance(x, T) else x).dtype
        w = rn(*ns, dtype=dt) if affine else NONE
        b = rn(*ns, dtype=dt) if bias else NONE
        fam.case("layer_norm_" + name, "layer_norm", [x, w, b],
                 (lambda ns, eps: lambda x, w, b: ln(x, ns, w, b, eps))(ns, eps), ints=list(ns), flts=[eps])
    for name, x, groups, affine, eps in [
        ("g3", rn(2, 6, 4, 4), 3, True, 1e-5), ("g1", rn(2, 4, 3, 3), 1, True, 1e-5),
        ("per_channel", rn(2, 4, 3, 3), 4, True, 1e-5), ("no_affine", rn(2, 4, 2, 2), 2, False, 1e-5),
        ("3d", rn(3, 6, 5), 2, True, 1e-3), ("f64", rn(2, 4, 3, 3, dtype=F64), 2, True, 1e-5),
        ("2d", rn(3, 6), 3, True, 1e-5),
    ]:
        c, dt = x.shape[1], x.dtype
        w = rn(c, dtype=dt) if affine else NONE
        b = rn(c, dtype=dt) if affine else NONE
        fam.case("group_norm_" + name, "group_norm", [x, w, b],
                 (lambda g, eps: lambda x, w, b: F.group_norm(x, g, w, b, eps))(groups, eps),
                 ints=[groups], flts=[eps])


def rms_norm_ref(ns, eps, dtype):
    """x / sqrt(mean(x^2) + eps) * w; eps 0 means the input dtype's machine epsilon."""
    e = eps if eps else torch.finfo(dtype).eps

    def f(x, w):
        dims = tuple(range(-len(ns), 0))
        y = x / torch.sqrt(torch.mean(x * x, dims, keepdim=True) + e)
        return y * w if w is not None else y
    return f


def gen_rms_norm(fam):
    for name, x, ns, affine, eps in [
        ("last", rn(3, 5), (5,), True, 1e-6), ("last_two", rn(2, 3, 4), (3, 4), True, 1e-5),
        ("no_weight", rn(4, 6), (6,), False, 1e-6), ("eps_default", rn(3, 4), (4,), True, 0.0),
        ("f64_eps_default", rn(3, 4, dtype=F64), (4,), True, 0.0), ("transposed", tr(rn(2, 6, 3)), (6,), True, 1e-6),
        ("tiny_values", rn(2, 4) * 1e-3, (4,), True, 0.0),
    ]:
        dt = (x.base if isinstance(x, T) else x).dtype
        w = rn(*ns, dtype=dt) if affine else NONE
        fam.case("rms_norm_" + name, "rms_norm", [x, w], rms_norm_ref(ns, eps, dt), ints=list(ns), flts=[eps])


def gen_norm():
    fam = Family("norm", 8)
    gen_batch_norm(fam)
    gen_layer_norms(fam)
    gen_rms_norm(fam)
    return fam


# ---------------------------------------------------------------- activations

def gen_activation():
    fam = Family("activation", 9)

    def act(name, op, x, fn, ints=(), flts=()):
        fam.case(name, op, [x], fn, ints=ints, flts=flts)

    for op, fn in [("relu", F.relu), ("silu", F.silu), ("sigmoid", torch.sigmoid), ("tanh", torch.tanh),
                   ("hardswish", F.hardswish)]:
        kinks = [-3.0, 0.0, 3.0]
        act(op + "_f32", op, away(rn(3, 4, scale=2.5), kinks), fn)
        act(op + "_f64", op, away(rn(6, dtype=F64, scale=2.5), kinks), fn)
        act(op + "_transposed", op, tr(away(rn(4, 3, scale=2.5), kinks)), fn)
        act(op + "_wide_range", op, ft([-40.0, -10.0, -2.9, -0.5, 0.5, 2.9, 10.0, 40.0]), fn)
    act("relu_i32", "relu", ri(-5, 5, 6, dtype=I32), F.relu)
    act("relu_0d", "relu", rn(), F.relu)
    act("relu_empty", "relu", rn(2, 0), F.relu)
    act("sigmoid_i32", "sigmoid", ri(-5, 5, 6, dtype=I32), torch.sigmoid)
    for slope in (0.01, 0.2):
        act("leaky_relu_%g" % slope, "leaky_relu", away(rn(3, 4), [0.0]),
            (lambda s: lambda v: F.leaky_relu(v, s))(slope), flts=[slope])
    act("leaky_relu_f64", "leaky_relu", away(rn(5, dtype=F64), [0.0]), lambda v: F.leaky_relu(v, 0.1), flts=[0.1])
    for approx in (0, 1):
        mode = "tanh" if approx else "none"
        f = (lambda m: lambda v: F.gelu(v, approximate=m))(mode)
        act("gelu_%s" % mode, "gelu", rn(3, 4, scale=2.0), f, ints=[approx])
        act("gelu_%s_f64" % mode, "gelu", rn(6, dtype=F64, scale=2.0), f, ints=[approx])
        act("gelu_%s_wide" % mode, "gelu", ft([-30.0, -6.0, -1.0, 1.0, 6.0, 30.0]), f, ints=[approx])
    for name, x, beta, thr in [("defaults", rn(3, 4, scale=3.0), 0.0, 0.0),
                               ("beta2_thr1", away(rn(3, 4), [0.5]), 2.0, 1.0),
                               ("large", ft([-30.0, -5.0, 19.0, 21.0, 50.0]), 0.0, 0.0),
                               ("f64", rn(5, dtype=F64), 0.5, 10.0)]:
        b, t = beta or 1.0, thr or 20.0
        act("softplus_" + name, "softplus", x, (lambda b, t: lambda v: F.softplus(v, b, t))(b, t), flts=[beta, thr])
    for alpha in (1.0, 0.5):
        act("elu_%g" % alpha, "elu", rn(3, 4), (lambda a: lambda v: F.elu(v, a))(alpha), flts=[alpha])
    act("elu_f64", "elu", rn(5, dtype=F64), lambda v: F.elu(v, 1.5), flts=[1.5])
    for op, fn in [("softmax", F.softmax), ("log_softmax", F.log_softmax)]:
        sm = lambda d, fn=fn: lambda v: fn(v, d)
        act(op + "_last", op, rn(3, 5), sm(-1), ints=[-1])
        act(op + "_dim0", op, rn(3, 5), sm(0), ints=[0])
        act(op + "_3d_mid", op, rn(2, 4, 3), sm(1), ints=[1])
        act(op + "_f64", op, rn(3, 4, dtype=F64), sm(1), ints=[1])
        act(op + "_large", op, rn(2, 5) * 50 + 1000, sm(1), ints=[1])
        act(op + "_neg_inf", op, ft([[0.5, -INF, 1.0], [-INF, 2.0, -INF]]), sm(1), ints=[1])
        act(op + "_transposed", op, tr(rn(5, 3)), sm(-1), ints=[-1])
        act(op + "_1d", op, rn(7), sm(0), ints=[0])
        act(op + "_long_row", op, rn(2, 64), sm(1), ints=[1])
    return fam


# ---------------------------------------------------------------- losses

def ce_fn(op, red, ignore, smoothing):
    def f(x, t, w):
        kw = dict(weight=w, reduction=RED_NAMES[red], ignore_index=ignore)
        t = t.long()
        if op == "cross_entropy":
            return F.cross_entropy(x, t, label_smoothing=smoothing, **kw)
        return F.nll_loss(x, t, **kw)
    return f


def gen_ce(fam):
    for op in ("cross_entropy", "nll_loss"):
        def inp(*shape, dtype=F32):
            x = rn(*shape, dtype=dtype)
            return F.log_softmax(x.to(F64), 1).to(dtype) if op == "nll_loss" else x

        cases = [
            ("mean", inp(4, 5), ri(0, 5, 4), MEAN, False, None, 0.0),
            ("sum", inp(4, 5), ri(0, 5, 4), SUM, False, None, 0.0),
            ("none", inp(4, 5), ri(0, 5, 4), NONE_RED, False, None, 0.0),
            ("weight_mean", inp(6, 3), ri(0, 3, 6), MEAN, True, None, 0.0),
            ("weight_none", inp(6, 3), ri(0, 3, 6), NONE_RED, True, None, 0.0),
            ("default_ignore", inp(5, 4), ft([0, -100, 3, -100, 1], I64), MEAN, False, None, 0.0),
            ("ignore_index", inp(5, 4), ft([0, 2, 3, 2, 1], I64), MEAN, False, 2, 0.0),
            ("ignore_weight_sum", inp(5, 4), ft([0, 2, 3, 2, 1], I64), SUM, True, 2, 0.0),
            ("nd_mean", inp(2, 4, 3), ri(0, 4, 2, 3), MEAN, False, None, 0.0),
            ("nd2_none", inp(2, 3, 2, 2), ri(0, 3, 2, 2, 2), NONE_RED, False, None, 0.0),
            ("nd_weight", inp(2, 4, 3), ri(0, 4, 2, 3), MEAN, True, None, 0.0),
            ("i32_target", inp(4, 5), ri(0, 5, 4, dtype=I32), MEAN, False, None, 0.0),
            ("f64", inp(4, 5, dtype=F64), ri(0, 5, 4), MEAN, True, None, 0.0),
            ("transposed", tr(inp(5, 3)), ri(0, 5, 3), MEAN, False, None, 0.0),
            ("all_ignored_mean", inp(3, 4), ft([-100, -100, -100], I64), MEAN, False, None, 0.0),
            ("all_ignored_sum", inp(3, 4), ft([-100, -100, -100], I64), SUM, True, None, 0.0),
        ]
        if op == "cross_entropy":
            cases += [
                ("smooth_mean", inp(4, 5), ri(0, 5, 4), MEAN, False, None, 0.1),
                ("smooth_sum", inp(4, 5), ri(0, 5, 4), SUM, False, None, 0.2),
                ("smooth_none", inp(4, 5), ri(0, 5, 4), NONE_RED, False, None, 0.1),
                ("smooth_weight", inp(6, 3), ri(0, 3, 6), MEAN, True, None, 0.15),
                ("smooth_ignore", inp(5, 4), ft([0, 2, 3, 2, 1], I64), MEAN, False, 2, 0.1),
                ("smooth_weight_ignore_nd", inp(2, 4, 3), ft([[0, 1, 3], [3, 2, 0]], I64), MEAN, True, 3, 0.3),
                ("large_logits", inp(3, 4) * 40, ri(0, 4, 3), MEAN, False, None, 0.0),
            ]
        for name, x, t, red, weighted, ignore, smooth in cases:
            c = (x.value() if isinstance(x, T) else x).shape[1]
            dt = (x.base if isinstance(x, T) else x).dtype
            w = pos(c, dtype=dt, lo=0.2) if weighted else NONE
            ig = -100 if ignore is None else ignore
            fam.case("%s_%s" % (op, name), op, [x, t, w], ce_fn(op, red, ig, smooth),
                     ints=[red, int(ignore is not None), ig], flts=[smooth])


def gen_regression(fam):
    for op, fn in [("mse_loss", F.mse_loss), ("l1_loss", F.l1_loss)]:
        for name, a, b, red in [("mean", rn(3, 4), rn(3, 4), MEAN), ("sum", rn(3, 4), rn(3, 4), SUM),
                                ("none", rn(3, 4), rn(3, 4), NONE_RED), ("f64", rn(5, dtype=F64), rn(5, dtype=F64), MEAN),
                                ("transposed", tr(rn(4, 3)), rn(3, 4), MEAN), ("0d", rn(), rn(), MEAN)]:
            fam.case("%s_%s" % (op, name), op, [a, b],
                     (lambda r, fn=fn: lambda x, y: fn(x, y, reduction=RED_NAMES[r]))(red), ints=[red])


def gen_bce(fam):
    def prob(*shape, dtype=F32):
        return torch.sigmoid(rn(*shape, dtype=F64)).to(dtype)

    bce = F.binary_cross_entropy
    for name, p, t, w, red in [
        ("mean", prob(3, 4), uni(3, 4), NONE, MEAN), ("sum", prob(3, 4), uni(3, 4), NONE, SUM),
        ("none", prob(3, 4), uni(3, 4), NONE, NONE_RED), ("hard_targets", prob(6), rb(6).to(F32), NONE, MEAN),
        ("weight", prob(3, 4), uni(3, 4), pos(4), MEAN), ("weight_none", prob(2, 3), uni(2, 3), pos(2, 3), NONE_RED),
        ("f64", prob(5, dtype=F64), uni(5, dtype=F64), NONE, MEAN),
        ("saturated", ft([0.0, 1.0, 1e-30, 0.5]), ft([0.0, 1.0, 1.0, 0.5]), NONE, NONE_RED),
    ]:
        fam.case("binary_cross_entropy_" + name, "binary_cross_entropy", [p, t, w],
                 (lambda r: lambda p, t, w: bce(p, t, w, reduction=RED_NAMES[r]))(red), ints=[red])
    bcel = F.binary_cross_entropy_with_logits
    for name, x, t, w, pw, red in [
        ("mean", rn(3, 4), uni(3, 4), NONE, NONE, MEAN), ("none", rn(3, 4), uni(3, 4), NONE, NONE, NONE_RED),
        ("sum", rn(3, 4), uni(3, 4), NONE, NONE, SUM), ("weight", rn(3, 4), uni(3, 4), pos(4), NONE, MEAN),
        ("pos_weight", rn(3, 4), uni(3, 4), NONE, pos(4), MEAN),
        ("both_weights", rn(2, 3), uni(2, 3), pos(2, 1), pos(3), NONE_RED),
        ("large_logits", ft([-80.0, -30.0, 30.0, 80.0]), ft([1.0, 0.0, 0.0, 1.0]), NONE, NONE, NONE_RED),
        ("large_pos_weight", ft([-80.0, -30.0, 30.0, 80.0]), ft([1.0, 0.5, 0.0, 1.0]), NONE, ft([2.0]), NONE_RED),
        ("f64", rn(5, dtype=F64), uni(5, dtype=F64), NONE, pos(5, dtype=F64), MEAN),
        ("transposed", tr(rn(4, 3)), uni(3, 4), NONE, NONE, MEAN),
    ]:
        fam.case("binary_cross_entropy_with_logits_" + name, "binary_cross_entropy_with_logits", [x, t, w, pw],
                 (lambda r: lambda x, t, w, pw: bcel(x, t, w, reduction=RED_NAMES[r], pos_weight=pw))(red),
                 ints=[red])


def gen_loss():
    fam = Family("loss", 10)
    gen_ce(fam)
    gen_regression(fam)
    gen_bce(fam)
    return fam


# ---------------------------------------------------------------- layers

def sdpa_ref(causal, scale):
    """softmax(q k^T * scale + mask) v; a bool mask marks the positions that take part."""
    def f(q, k, v, mask):
        s = scale if scale else 1.0 / math.sqrt(q.shape[-1])
        att = torch.matmul(q, k.transpose(-2, -1)) * s
        if causal:
            L, S_ = q.shape[-2], k.shape[-2]
            keep = torch.ones(L, S_, dtype=BOOL).tril()
            att = att.masked_fill(~keep, -INF)
        if mask is not None and mask.dtype == BOOL:
            att = att.masked_fill(~mask, -INF)
        elif mask is not None:
            att = att + mask
        return torch.matmul(torch.softmax(att, -1), v)
    return f


def gen_layer():
    fam = Family("layer", 11)
    emb = lambda w, i: F.embedding(i.long(), w)
    for name, w, i in [("2d_index", rn(10, 4), ri(0, 10, 2, 3)), ("1d_index", rn(6, 3), ft([5, 0, 5, 2], I64)),
                       ("i32_index", rn(6, 3), ft([1, 4], I32)), ("0d_index", rn(5, 2), ft(3, I64)),
                       ("f64", rn(4, 3, dtype=F64), ft([3, 1], I64)), ("transposed_weight", tr(rn(3, 5)), ft([4, 0], I64)),
                       ("empty_index", rn(4, 3), torch.zeros(0, dtype=I64))]:
        fam.case("embedding_" + name, "embedding", [w, i], emb)
    bool_mask = torch.tensor([[1, 0, 1, 1, 0], [1, 1, 0, 0, 0], [0, 1, 1, 1, 1]], dtype=BOOL)
    for name, q, k, v, mask, causal, scale in [
        ("basic", rn(2, 3, 4), rn(2, 5, 4), rn(2, 5, 4), NONE, 0, 0.0),
        ("4d", rn(2, 2, 3, 4), rn(2, 2, 3, 4), rn(2, 2, 3, 4), NONE, 0, 0.0),
        ("causal_square", rn(2, 4, 3), rn(2, 4, 3), rn(2, 4, 3), NONE, 1, 0.0),
        ("causal_rect", rn(1, 3, 4), rn(1, 5, 4), rn(1, 5, 2), NONE, 1, 0.0),
        ("bool_mask", rn(2, 3, 4), rn(2, 5, 4), rn(2, 5, 4), bool_mask, 0, 0.0),
        ("float_mask", rn(2, 3, 4), rn(2, 5, 4), rn(2, 5, 4), rn(3, 5), 0, 0.0),
        ("float_mask_batched", rn(2, 3, 4), rn(2, 5, 4), rn(2, 5, 4), rn(2, 3, 5), 0, 0.0),
        ("scale", rn(2, 3, 4), rn(2, 3, 4), rn(2, 3, 4), NONE, 0, 0.3),
        ("value_dim", rn(2, 3, 4), rn(2, 5, 4), rn(2, 5, 6), NONE, 0, 0.0),
        ("f64_causal", rn(2, 3, 4, dtype=F64), rn(2, 3, 4, dtype=F64), rn(2, 3, 4, dtype=F64), NONE, 1, 0.0),
        ("transposed_k", rn(2, 3, 4), tr(rn(2, 4, 5)), rn(2, 5, 4), NONE, 0, 0.0),
        ("unbatched", rn(3, 4), rn(5, 4), rn(5, 4), NONE, 0, 0.0),
    ]:
        fam.case("scaled_dot_product_attention_" + name, "scaled_dot_product_attention", [q, k, v, mask],
                 sdpa_ref(causal, scale), ints=[causal], flts=[scale])
    return fam


# ---------------------------------------------------------------- ties, kinks and NaN

def relu_like(*shape, dtype=F32):
    """Normal values with the negatives set to 0, as a ReLU leaves them: many exact ties at 0."""
    return F.relu(rn(*shape, dtype=F64)).to(dtype)


def small_ints(*shape, dtype=F32):
    """Whole numbers from -1 to 2 as floats: neighbours tie often."""
    return ri(-1, 3, *shape).to(dtype)


def gen_tie_binary(c):
    a = ft([[1.0, 2.0, -1.5, 0.0], [3.0, -0.0, 0.5, 2.0], [-1.0, 4.0, 4.0, 0.0]])
    b = ft([[1.0, 1.0, -1.5, -0.0], [3.0, 0.0, 0.25, 2.5], [-1.0, 4.0, 5.0, 0.0]])
    nan_a = ft([NAN, 1.0, NAN, -2.0, 2.0, -INF, INF, 0.5])
    nan_b = ft([0.0, NAN, NAN, -2.0, 2.0, -INF, INF, -0.5])
    for op in ("maximum", "minimum"):
        fn = BINARY[op]
        c(op + "_ties", op, [a, b], fn)
        c(op + "_ties_f64", op, [a.to(F64), b.to(F64)], fn)
        c(op + "_ties_bcast", op, [small_ints(3, 4), small_ints(3, 1)], fn)
        c(op + "_ties_transposed", op, [tr(small_ints(4, 3)), small_ints(3, 4)], fn)
        c(op + "_relu_like", op, [relu_like(3, 4), relu_like(3, 4)], fn)
        c(op + "_pyfloat_zero", op, [relu_like(3, 4), S(0.0)], fn)
        c(op + "_nan_grad", op, [nan_a, nan_b], fn)
    c("l1_loss_ties", "l1_loss", [a, b], lambda x, y: F.l1_loss(x, y, reduction="none"), ints=[NONE_RED])
    c("l1_loss_ties_mean", "l1_loss", [small_ints(3, 4), small_ints(3, 4)], F.l1_loss, ints=[MEAN])


def gen_tie_reductions(fam):
    rows = ft([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [-1.0, 5.0, -1.0, 5.0], [0.0, -0.0, -1.0, 0.0]])
    nan_rows = ft([[1.0, NAN, 3.0], [1.0, 2.0, 0.0], [NAN, NAN, 1.0], [2.0, 2.0, NAN]])
    inf_rows = ft([[1.0, -INF, 3.0], [INF, INF, INF], [-INF, -INF, 0.0]])
    for op in ("amax", "amin"):
        reduce_case(fam, op + "_ties_rows", op, rows, [1])
        reduce_case(fam, op + "_ties_cols_keepdim", op, rows, [0], True)
        reduce_case(fam, op + "_ties_all", op, rows)
        reduce_case(fam, op + "_ties_two_dims", op, small_ints(2, 3, 4), [0, 2])
        reduce_case(fam, op + "_ties_transposed", op, tr(small_ints(5, 3)), [1])
        reduce_case(fam, op + "_ties_f64", op, small_ints(4, 5, dtype=F64), [1])
        reduce_case(fam, op + "_relu_like", op, relu_like(5, 4), [1])
        reduce_case(fam, op + "_nan_rows", op, nan_rows, [1], nan_grad=True)
        reduce_case(fam, op + "_inf_rows", op, inf_rows, [1])
    reduce_case(fam, "logsumexp_ties", "logsumexp", ft([[1.0, 1.0, 0.0], [2.0, 2.0, 2.0], [-INF, 0.0, 0.0]]), [1])
    for op, fn in [("softmax", F.softmax), ("log_softmax", F.log_softmax)]:
        fam.case(op + "_ties", op, [ft([[1.0, 1.0, 0.0], [2.0, 2.0, 2.0], [0.0, 0.0, 0.0]])],
                 lambda v, fn=fn: fn(v, 1), ints=[1])


def gen_tie_pool(c):
    def pool(name, x, k, s=(0, 0), p=(0, 0), d=(1, 1), ceil=False):
        stride = s if s != (0, 0) else None
        c("max_pool2d_" + name, "max_pool2d", [x],
          (lambda k, st, p, d, cm: lambda v: F.max_pool2d(v, k, st, p, d, cm))(k, stride, p, d, ceil),
          ints=pool_ints(k, s, p, d, ceil))

    pool("tie_first", ft([[[[1.0, 1.0], [1.0, 0.0]]]]), (2, 2))
    pool("relu_like", relu_like(2, 3, 6, 6), (2, 2))
    pool("relu_like_k3_s2_p1", relu_like(1, 2, 7, 7), (3, 3), (2, 2), (1, 1))
    pool("ties_overlapping", small_ints(1, 2, 5, 6), (3, 3), (1, 1), (1, 1))
    pool("ties_dilation", small_ints(1, 1, 7, 7), (2, 2), (1, 1), (0, 0), (2, 2))
    pool("ties_ceil", small_ints(1, 1, 6, 6), (3, 3), (2, 2), (1, 1), ceil=True)
    pool("ties_asym", small_ints(2, 1, 5, 7), (2, 3), (1, 2), (1, 1))
    pool("ties_f64", small_ints(1, 2, 5, 5, dtype=F64), (3, 3), (2, 2), (1, 1))
    pool("ties_nhwc", T(small_ints(1, 6, 6, 3), ("p", [0, 3, 1, 2])), (2, 2))
    pool("ties_unbatched", small_ints(2, 4, 4), (2, 2), (1, 1))
    pool("constant_padded", torch.full((1, 1, 4, 4), -2.0), (3, 3), (2, 2), (1, 1))
    pool("neg_inf_padded", torch.full((1, 1, 2, 3), -INF), (3, 3), (1, 1), (1, 1))
    pool("nan", ft([[[[1.0, NAN], [NAN, 0.0]]]]), (2, 2))
    x = small_ints(1, 1, 5, 5)
    x[0, 0, 1, 2] = x[0, 0, 3, 0] = x[0, 0, 3, 1] = NAN
    pool("nan_overlapping", x, (3, 3), (1, 1), (1, 1))


def gen_tie_pointwise(c):
    # At most 7 elements a tensor: PyTorch's vectorised hardswish and elu backward loops (8 doubles,
    # 16 floats at a time) take x == 3 and NaN the other way from their scalar loops, which agree
    # with torch._decomp's formulas (hardswish: where(x < -3, 0, where(x <= 3, g (x/3 + 1/2), g)),
    # elu: where(x <= 0, g alpha exp(x), g)); kiln follows those, so these cases stay on them.
    kinks = ft([-4.0, -3.0, -0.0, 0.0, 0.5, 3.0, NAN])
    finite = ft([-3.0, -1.0, -0.0, 0.0, 1.0, 3.0])
    for name, x in [("kinks", kinks), ("kinks_f64", kinks.to(F64)),
                    ("kinks_transposed", tr(ft([[-3.0, 0.0, 3.0], [-0.0, NAN, 1.0]])))]:
        c("relu_" + name, "relu", [x], F.relu)
        c("hardswish_" + name, "hardswish", [x], F.hardswish)
        c("elu_" + name, "elu", [x], lambda v: F.elu(v, 0.5), flts=[0.5])
        c("leaky_relu_" + name, "leaky_relu", [x], lambda v: F.leaky_relu(v, 0.2), flts=[0.2])
    c("elu_kinks_alpha1", "elu", [kinks], F.elu, flts=[1.0])
    c("relu_relu_like", "relu", [relu_like(3, 4)], F.relu)
    for op, fn in [("abs", torch.abs), ("sign", torch.sign)]:
        c(op + "_kinks", op, [finite], fn)
        c(op + "_kinks_f64", op, [finite.to(F64)], fn)
    c("sigmoid_kinks", "sigmoid", [kinks], torch.sigmoid)
    c("sigmoid_kinks_f64", "sigmoid", [kinks.to(F64)], torch.sigmoid)
    c("silu_kinks", "silu", [kinks], F.silu)
    c("gelu_kinks", "gelu", [kinks], F.gelu, ints=[0])
    # beta x == threshold exactly: x = 0.5 for beta 2, threshold 1; x = 20 for the defaults
    c("softplus_at_threshold", "softplus", [ft([0.5, 0.25, 0.0, -0.5, 1.0, NAN])],
      lambda v: F.softplus(v, 2.0, 1.0), flts=[2.0, 1.0])
    c("softplus_at_default_threshold", "softplus", [ft([20.0, 19.5, 0.0, 21.0])], F.softplus, flts=[0.0, 0.0])

    def clamp(lo, hi):
        return lambda x: torch.clamp(x, None if lo == -INF else lo, None if hi == INF else hi)

    bounds = ft([-1.0, -0.0, 0.0, 0.25, 1.0, 1.5, NAN])
    for name, x, lo, hi in [
        ("at_bounds", bounds, 0.0, 1.0), ("at_bounds_f64", bounds.to(F64), 0.0, 1.0),
        ("at_bounds_transposed", tr(ft([[-1.0, 0.0, 1.0], [0.5, 1.0, 0.0]])), 0.0, 1.0),
        ("lo_at_bound", bounds, 0.0, INF), ("hi_at_bound", bounds, -INF, 1.0),
        ("equal_bounds", bounds, 1.0, 1.0), ("crossed_bounds", bounds, 1.0, 0.0),
        ("at_bounds_i32", ft([-2, -1, 0, 1, 2, 3], I32), -1, 2),
    ]:
        c("clamp_" + name, "clamp", [x], clamp(lo, hi), flts=[lo, hi])


def gen_ties():
    fam = Family("ties", 12)

    def c(name, op, inputs, fn, ints=(), flts=()):
        fam.case(name, op, inputs, fn, ints=ints, flts=flts, nan_grad=True)

    gen_tie_binary(c)
    gen_tie_reductions(fam)
    gen_tie_pool(c)
    gen_tie_pointwise(c)
    return fam


# ---------------------------------------------------------------- main

FAMILIES = [gen_pointwise, gen_compare_family, gen_reduce, gen_shape, gen_linalg, gen_conv,
            gen_pool, gen_norm, gen_activation, gen_loss, gen_layer, gen_ties]


def main():
    torch.set_default_dtype(F32)
    os.makedirs(DATA, exist_ok=True)
    manifest, total, grads, size, warnings, ops, skipped = [], 0, 0, 0, 0, set(), []
    for gen in FAMILIES:
        fam = gen()
        blob = fam.encode()
        with open(os.path.join(DATA, fam.name + ".bin"), "wb") as f:
            f.write(blob)
        manifest.append("%s.bin %d\n" % (fam.name, len(fam.cases)))
        total, size, warnings = total + len(fam.cases), size + len(blob), warnings + fam.warnings
        grads, ops, skipped = grads + fam.grad_cases, ops | fam.grad_ops, skipped + fam.grad_skipped
        print("%-11s %4d cases (%3d with gradients) %8d bytes" % (fam.name, len(fam.cases), fam.grad_cases,
                                                                  len(blob)))
    with open(os.path.join(DATA, "MANIFEST"), "w") as f:
        f.writelines(manifest)
    print("total       %4d cases (%3d with gradients, %d ops) %8d bytes, %d warnings"
          % (total, grads, len(ops), size, warnings))
    print("no gradient part (non-finite gradient or NaN input): %s" % " ".join(skipped))


if __name__ == "__main__":
    main()
