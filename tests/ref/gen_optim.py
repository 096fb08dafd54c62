#!/usr/bin/python3
"""gen_optim.py -- PyTorch fixtures for kiln's optimizers (SGD, Adam, AdamW).

Run from anywhere with Debian's interpreter, which sees python3-torch:

    /usr/bin/python3 tests/ref/gen_optim.py

It rewrites tests/ref/data/optim.bin (deterministic bytes: one fixed seed).
tests/test_optim.c replays it. The file is not in tests/ref/data/MANIFEST, so
test_ref.c does not read it.

Format: KNREF001, as documented at the top of gen.py (its tensor encoders are
reused; no gradient part), read by tests/ref/fixture.h. One case per
optimizer configuration:

    op     "sgd", "adam" or "adamw" (the kn_ constructor without its prefix)
    sgd:   flts = lr, momentum, dampening, weight_decay;  ints = nesterov, maximize
    adam, adamw:
           flts = lr, beta1, beta2, eps, weight_decay;    ints = amsgrad, maximize
           The floats are the kn_adam_opts fields exactly as the C test passes
           them: 0 means kiln's default, and the PyTorch side then passes
           nothing, so the defaults of both are checked against each other.
    in     p0, p1 (initial parameters; p0 may carry a view recipe, e.g. stored
           transposed), then the grads g0[0..5), g1[0..5): the grad each
           parameter has before step k; an absent grad (code 255) means
           .grad = None at that step, so the step skips the parameter
    out    p0, p1 after step 1, p0, p1 after step 2, ... (10 tensors)

Expected values are computed as gen.py computes them: the whole 5-step run is
done twice, once as PyTorch runs it in the inputs' dtype and once with every
input widened to f64; the f64 trajectory rounded to the parameters' dtype is
stored, and a warning is printed if PyTorch's own result is further from it
than the C test's tolerance.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import struct  # noqa: E402

import gen  # noqa: E402  (gen.py's tensor encoders, expected() and input helpers)
from gen import F32, F64, NONE, T, rn  # noqa: E402

import torch  # noqa: E402

STEPS = 5
SCALES = [1.0, 3.0, 0.2, 1.5, 0.05]  # grad size per step: v rises and falls, so amsgrad matters
SGD_FIELDS = ["lr", "momentum", "dampening", "weight_decay"]
ADAM_FIELDS = ["lr", "beta1", "beta2", "eps", "weight_decay"]


def torch_kwargs(op, o):
    """kiln's options (0 = default) as PyTorch keyword arguments (absent = default)."""
    if op == "sgd":
        kw = {k: o[k] for k in SGD_FIELDS if o.get(k, 0) != 0}
        kw.update(nesterov=bool(o.get("nesterov", 0)), maximize=bool(o.get("maximize", 0)))
        return kw
    kw = {k: o[k] for k in ("lr", "eps", "weight_decay") if o.get(k, 0) != 0}
    if o.get("beta1", 0) or o.get("beta2", 0):
        kw["betas"] = (o.get("beta1") or 0.9, o.get("beta2") or 0.999)
    kw.update(amsgrad=bool(o.get("amsgrad", 0)), maximize=bool(o.get("maximize", 0)))
    return kw


def run(op, o):
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[op]
    kw = torch_kwargs(op, o)

    def f(p0, p1, *grads):
        ps = [p0.clone().requires_grad_(True), p1.clone().requires_grad_(True)]
        opt = cls(ps, foreach=False, **kw)
        outs = []
        for k in range(STEPS):
            for j, p in enumerate(ps):
                g = grads[j * STEPS + k]
                p.grad = None if g is None else g.clone()
            opt.step()
            outs += [p.detach().clone() for p in ps]
        return outs
    return f


class Cases:
    """The cases of optim.bin, written as KNREF001 (no gradient part) with gen.py's encoders."""

    def __init__(self, seed_value):
        self.name = "optim"
        self.cases = []
        self.warnings = 0  # gen.expected() counts PyTorch results off the f64 reference here
        gen.seed(seed_value)

    def case(self, name, op, inputs, fn, ints, flts):
        assert name not in [c[0] for c in self.cases], name
        inputs = [a if isinstance(a, (T, gen.Absent)) else T(a) for a in inputs]
        self.cases.append((name, op, ints, flts, inputs, gen.expected(name, inputs, fn, self)))

    def encode(self):
        out = [b"KNREF001", struct.pack("<I", len(self.cases))]
        for name, op, ints, flts, inputs, outs in self.cases:
            out.append(gen.enc_str(name) + gen.enc_str(op))
            out.append(struct.pack("<I%dq" % len(ints), len(ints), *ints))
            out.append(struct.pack("<I%dd" % len(flts), len(flts), *flts))
            out.append(struct.pack("<I", len(inputs)) + b"".join(gen.enc_input(a) for a in inputs))
            out.append(struct.pack("<I", len(outs)) + b"".join(gen.enc_tensor(t) for t in outs))
        return b"".join(out)


def case(fam, name, op, o, dtype=F32, transpose_p0=False, skip=()):
    """skip: (param, step) pairs whose grad is absent."""
    p0 = T(rn(5, 3, dtype=dtype), ("t", 0, 1)) if transpose_p0 else T(rn(3, 5, dtype=dtype))
    p1 = T(rn(7, dtype=dtype))
    grads = []
    for j, shape in enumerate([(3, 5), (7,)]):
        for k in range(STEPS):
            g = rn(*shape, dtype=F64, scale=SCALES[k]).to(dtype)
            grads.append(NONE if (j, k) in skip else g)
    fields = SGD_FIELDS if op == "sgd" else ADAM_FIELDS
    flags = ("nesterov", "maximize") if op == "sgd" else ("amsgrad", "maximize")
    fam.case(name, op, [p0, p1] + grads, run(op, o),
             ints=[int(o.get(k, 0)) for k in flags], flts=[float(o.get(k, 0)) for k in fields])


def gen_optim():
    fam = Cases(2024)
    case(fam, "sgd_plain", "sgd", dict(lr=0.1))
    case(fam, "sgd_momentum", "sgd", dict(lr=0.1, momentum=0.9))
    case(fam, "sgd_dampening", "sgd", dict(lr=0.1, momentum=0.9, dampening=0.3))
    case(fam, "sgd_nesterov", "sgd", dict(lr=0.05, momentum=0.8, nesterov=1))
    case(fam, "sgd_weight_decay", "sgd", dict(lr=0.1, momentum=0.5, weight_decay=0.1))
    case(fam, "sgd_maximize", "sgd", dict(lr=0.1, momentum=0.9, weight_decay=0.01, maximize=1))
    case(fam, "sgd_f64", "sgd", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.05), dtype=F64)
    case(fam, "sgd_skip", "sgd", dict(lr=0.1, momentum=0.9, dampening=0.5), skip=((1, 0), (1, 2), (0, 3)))
    case(fam, "sgd_transposed_param", "sgd", dict(lr=0.1, momentum=0.9, nesterov=1), transpose_p0=True)
    case(fam, "adam_default", "adam", dict())
    case(fam, "adam_betas_eps", "adam", dict(lr=0.01, beta1=0.8, beta2=0.99, eps=1e-6))
    case(fam, "adam_weight_decay", "adam", dict(lr=0.01, weight_decay=0.1))
    case(fam, "adam_amsgrad", "adam", dict(lr=0.01, amsgrad=1))
    case(fam, "adam_maximize", "adam", dict(lr=0.01, weight_decay=0.05, maximize=1))
    case(fam, "adam_amsgrad_f64", "adam", dict(lr=0.02, weight_decay=0.1, amsgrad=1), dtype=F64)
    case(fam, "adam_skip", "adam", dict(lr=0.01), skip=((1, 0), (1, 3)))
    case(fam, "adam_transposed_param", "adam", dict(lr=0.01, amsgrad=1), transpose_p0=True)
    case(fam, "adamw_default", "adamw", dict())
    case(fam, "adamw_wd_amsgrad", "adamw", dict(lr=0.01, weight_decay=0.1, amsgrad=1))
    case(fam, "adamw_maximize_betas", "adamw", dict(lr=0.01, beta1=0.5, beta2=0.9, maximize=1))
    case(fam, "adamw_f64", "adamw", dict(lr=0.02, weight_decay=0.2), dtype=F64)
    return fam


def main():
    torch.set_default_dtype(F32)
    fam = gen_optim()
    blob = fam.encode()
    os.makedirs(gen.DATA, exist_ok=True)
    with open(os.path.join(gen.DATA, "optim.bin"), "wb") as f:
        f.write(blob)
    print("%-11s %4d cases %8d bytes, %d warnings" % (fam.name, len(fam.cases), len(blob), fam.warnings))


if __name__ == "__main__":
    main()
