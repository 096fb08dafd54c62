/*
 * decomp_nn.c — neural-network composites as decompositions into
 * primitives: activations, softmax and log_softmax, the losses, embedding,
 * dropout and scaled dot-product attention, with PyTorch 1.13's semantics
 * (attention: PyTorch 2.0's, where it first appeared).
 *
 * Like decomp.c, every public op opens with ENTER, checks its operands with
 * messages naming the operand and dim, and then calls only prim()/p_*(),
 * decomp.c's helpers (bin, binc, c_scalar, ...) and public pointwise ops, so
 * the same code runs eagerly and is traced. It builds on primitives directly
 * rather than on the reductions and shape ops of decomp_shape.c.
 *
 * Numerics. Float ops compute in the input's dtype, except f16 and bf16,
 * which compute in f32 and are rounded once at the end. Every formula is
 * chosen to stay finite and accurate where the naive one is not: softmax
 * shifts by the row max; sigmoid and softplus never take exp of a positive
 * number; log1p and expm1, which have no primitive, are built with
 * Goldberg's and Kahan's corrections (see log1p_ and expm1_). Branches of a
 * where() are kept finite as well, so that the VJPs autodiff derives from
 * them do not turn 0 * inf into NaN.
 *
 * Integer inputs: relu keeps them (as torch), sigmoid promotes them to f32
 * (as torch); every other op here rejects them, as torch's kernels do.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

#define SQRT1_2 0.70710678118654752440    /* 1 / sqrt(2) */
#define SQRT_2_PI 0.79788456080286535588  /* sqrt(2 / pi) */

/* ---- helpers ---- */

/* The dtype a float op computes in: f16 and bf16 widen to f32. */
static kn_dtype compute_dt(kn_dtype dt) { return dt == KN_F16 || dt == KN_BF16 ? KN_F32 : dt; }

static kn_tensor *scalar_like(kn_ctx *ctx, kn_tensor *x, double v)
{
    return x ? c_scalar(ctx, (kn_dtype)x->dtype, v) : NULL;
}

/* Checks that operand x is a float tensor. */
static int need_float(kn_ctx *ctx, kn_tensor *x, const char *operand)
{
    if (!tensor_check(ctx, x, operand)) return 0;
    if (dt_is_float((kn_dtype)x->dtype)) return 1;
    kn_err(ctx, KN_EDTYPE, "operand '%s' must be a float tensor, got %s", operand,
           kn_dtype_name((kn_dtype)x->dtype));
    return 0;
}

/* Checks that x's sizes are concrete where they enter arithmetic here
 * (a mean's count, a flattened index, a default scale): symbolic dims need
 * index expressions this file does not build yet. */
static int concrete(kn_ctx *ctx, const kn_tensor *x, const char *operand)
{
    for (int d = 0; x && d < x->ndim; d++)
        if (DIM_IS_SYM(x->shape[d])) {
            kn_err(ctx, KN_EUNSUPPORTED, "operand '%s' dim %d is symbolic; this op needs concrete sizes", operand, d);
            return 0;
        }
    return 1;
}

/* Keepdim sum and max over dim d; a 0-d x has no dim to reduce. */
static kn_tensor *rsum(kn_ctx *ctx, kn_tensor *x, int d) { return p_reduce(ctx, OP_SUM, x, &d, x && x->ndim ? 1 : 0); }
static kn_tensor *rmax(kn_ctx *ctx, kn_tensor *x, int d) { return p_reduce(ctx, OP_RMAX, x, &d, x && x->ndim ? 1 : 0); }

/* Sum of every element, as a 0-d tensor. */
static kn_tensor *sum_all(kn_ctx *ctx, kn_tensor *x)
{
    if (!x) return NULL;
    int dims[KN_MAX_DIMS];
    int64_t none[1] = {0}; /* a 0-d shape, never NULL: p_reshape memcmps it */
    for (int i = 0; i < x->ndim; i++) dims[i] = i;
    return p_reshape(ctx, p_reduce(ctx, OP_SUM, x, dims, x->ndim), 0, none);
}

/* where(c, a, b) after broadcasting all three; a and b share a dtype. */
static kn_tensor *where_b(kn_ctx *ctx, kn_tensor *c, kn_tensor *a, kn_tensor *b)
{
    if (!c || !a || !b) return kn_err_null(ctx, !c ? "cond" : !a ? "a" : "b");
    kn_tensor *xs[3] = {c, a, b};
    int64_t shape[KN_MAX_DIMS];
    int nd = broadcast_shapes(ctx, 3, xs, shape);
    if (nd < 0) return NULL;
    return p_where(ctx, broadcast_to(ctx, c, nd, shape), broadcast_to(ctx, a, nd, shape),
                   broadcast_to(ctx, b, nd, shape));
}

/* x < 0 and x > 0 as bool (false for NaN) */
static kn_tensor *is_neg(kn_ctx *ctx, kn_tensor *x) { return bin(ctx, OP_CMPLT, x, scalar_like(ctx, x, 0), x ? (kn_dtype)x->dtype : KN_F32); }
static kn_tensor *is_pos(kn_ctx *ctx, kn_tensor *x) { return bin(ctx, OP_CMPLT, scalar_like(ctx, x, 0), x, x ? (kn_dtype)x->dtype : KN_F32); }

/* x <= v as bool: x < v or x == v, false for NaN (not(v < x) would be true) */
static kn_tensor *is_at_most(kn_ctx *ctx, kn_tensor *x, double v)
{
    return prim2(ctx, OP_MAX, binc(ctx, OP_CMPLT, x, v), binc(ctx, OP_CMPEQ, x, v));
}

/* log(1 + u) for u >= -1, accurate where 1 + u rounds. Goldberg, "What
 * every computer scientist should know about floating-point arithmetic"
 * (1991), Theorem 4: with w = fl(1 + u), u * log(w) / (w - 1) is within
 * 5 ulps of log1p(u) for 0 <= u < 3/4, because w - 1 is exact and
 * log(w) / (w - 1) varies slowly; the same holds for -1/2 <= u < 0 (w - 1
 * is exact by Sterbenz), and for u < -1/2 or u >= 3/4 nothing cancels.
 * Where w == 1, log1p(u) = u to within u / 2. The denominator is kept
 * nonzero in the branch not taken so that it stays finite. */
static kn_tensor *log1p_(kn_ctx *ctx, kn_tensor *u)
{
    kn_tensor *w = binc(ctx, OP_ADD, u, 1.0);
    kn_tensor *one = binc(ctx, OP_CMPEQ, w, 1.0);
    kn_tensor *den = where_b(ctx, one, scalar_like(ctx, u, 1.0), binc(ctx, OP_SUB, w, 1.0));
    kn_tensor *r = prim2(ctx, OP_MUL, prim1(ctx, OP_LOG, w), prim2(ctx, OP_DIV, u, den));
    return p_where(ctx, one, u, r);
}

/* exp(x) - 1, accurate near 0. Kahan's correction (Higham, "Accuracy and
 * Stability of Numerical Algorithms", 2nd ed., 1.14.1): with u = fl(exp x),
 * (u - 1) * x / log(u) is within a few ulps; u == 1 gives x, and u - 1 == -1
 * (x very negative) gives -1. Callers pass x <= 0, so exp never overflows. */
static kn_tensor *expm1_(kn_ctx *ctx, kn_tensor *x)
{
    kn_tensor *u = prim1(ctx, OP_EXP, x);
    kn_tensor *um1 = binc(ctx, OP_SUB, u, 1.0);
    kn_tensor *one = binc(ctx, OP_CMPEQ, u, 1.0);
    kn_tensor *lg = where_b(ctx, one, scalar_like(ctx, x, 1.0), prim1(ctx, OP_LOG, u));
    kn_tensor *r = p_where(ctx, one, x, prim2(ctx, OP_MUL, um1, prim2(ctx, OP_DIV, x, lg)));
    kn_tensor *floor1 = binc(ctx, OP_CMPEQ, um1, -1.0);
    return where_b(ctx, floor1, scalar_like(ctx, x, -1.0), r);
}

/* log(1 + exp(z)) = max(z, 0) + log1p(exp(-|z|)): exp never overflows, and
 * log1p_ keeps the tail for very negative z (softplus(-20) = 2.06e-9, where
 * log(1 + exp(z)) in f32 gives 0). */
static kn_tensor *softplus_core(kn_ctx *ctx, kn_tensor *z)
{
    kn_tensor *e = prim1(ctx, OP_EXP, prim1(ctx, OP_NEG, prim1(ctx, OP_ABS, z)));
    return prim2(ctx, OP_ADD, binc(ctx, OP_MAX, z, 0.0), log1p_(ctx, e));
}

/* sigmoid with e = exp(-|x|) in (0, 1]: 1 / (1 + e) for x >= 0 and
 * e / (1 + e) for x < 0. Neither branch overflows, and the tail for x < 0
 * keeps full relative accuracy (1 / (1 + exp(-x)) would round to 0 first). */
static kn_tensor *sigmoid_core(kn_ctx *ctx, kn_tensor *x)
{
    /* -|x| as where(x < 0, x, -x): abs's derived gradient at 0 is 0, which would give sigmoid'(0) = 0 */
    kn_tensor *e = prim1(ctx, OP_EXP, p_where(ctx, is_neg(ctx, x), x, prim1(ctx, OP_NEG, x)));
    kn_tensor *d = binc(ctx, OP_ADD, e, 1.0);
    return p_where(ctx, is_neg(ctx, x), prim2(ctx, OP_DIV, e, d), prim1(ctx, OP_RECIP, d));
}

/* softmax or log_softmax along d, shifted by the row max m:
 * softmax = exp(x - m) / sum exp(x - m), log_softmax = (x - m) - log sum.
 * A row of -inf has m = -inf and gives NaN, as in torch. */
static kn_tensor *softmax_fwd(kn_ctx *ctx, kn_tensor *x, int d, int log)
{
    kn_tensor *z = bin(ctx, OP_SUB, x, rmax(ctx, x, d), (kn_dtype)x->dtype);
    kn_tensor *e = prim1(ctx, OP_EXP, z);
    kn_tensor *s = rsum(ctx, e, d); /* (..., 1, ...) */
    if (log) return bin(ctx, OP_SUB, z, prim1(ctx, OP_LOG, s), (kn_dtype)x->dtype);
    return bin(ctx, OP_DIV, e, s, (kn_dtype)x->dtype);
}

/* log_softmax's hand-written backward: dx = g - exp(y) * sum(g) along d.
 * The derived one goes through the max shift and log-sum: more ops, and
 * the max's tie-splitting mask, for the same value. */
static kn_tensor *log_softmax_vjp(kn_ctx *ctx, kn_tensor *g, kn_tensor *const *saved, const int64_t *args, int which)
{
    (void)which;
    kn_tensor *y = saved[0];
    kn_tensor *sg = rsum(ctx, g, (int)args[0]);
    return bin(ctx, OP_SUB, g, bin(ctx, OP_MUL, prim1(ctx, OP_EXP, y), sg, (kn_dtype)y->dtype), (kn_dtype)y->dtype);
}

static kn_tensor *softmax_core(kn_ctx *ctx, kn_tensor *x, int d, int log)
{
    if (!x) return NULL;
    if (!log || !autodiff_custom_wanted(ctx, x)) return softmax_fwd(ctx, x, d, log);
    int was = kn_set_grad_enabled(ctx, 0);
    kn_tensor *y = softmax_fwd(ctx, x, d, 1);
    kn_set_grad_enabled(ctx, was);
    int64_t arg = d;
    return autodiff_custom(ctx, y, 1, &x, 1, &y, &arg, 1, log_softmax_vjp);
}

/* ---- operand shape checks ---- */

/* The broadcast of the leading dims of n operands (all but their last
 * `tail`), with an error naming the operand and dim that does not fit.
 * Returns the rank, or -1. */
static int bcast_named(kn_ctx *ctx, int n, kn_tensor *const *xs, const char *const *names, int tail,
                       int64_t *out)
{
    int nd = 0;
    for (int i = 0; i < n; i++)
        if (xs[i] && xs[i]->ndim - tail > nd) nd = xs[i]->ndim - tail;
    for (int d = 0; d < nd; d++) out[d] = 1;
    for (int i = 0; i < n; i++) {
        int lead = xs[i] ? xs[i]->ndim - tail : 0;
        for (int d = 0; d < lead; d++) {
            int o = nd - lead + d;
            int64_t s = xs[i]->shape[d];
            if (s == out[o] || s == 1) continue;
            if (out[o] != 1) {
                char b[96];
                kn_err(ctx, KN_ESHAPE, "operand '%s' %s does not broadcast at dim %d (size %lld vs %lld)",
                       names[i], fmt_shape(b, sizeof b, xs[i]), d, (long long)s, (long long)out[o]);
                return -1;
            }
            out[o] = s;
        }
    }
    return nd;
}

/* Checks that operand x broadcasts to `to`'s shape without growing it. */
static int fits(kn_ctx *ctx, kn_tensor *x, const char *name, const kn_tensor *to, const char *toname)
{
    char b0[96], b1[96];
    int off = to->ndim - x->ndim;
    for (int d = x->ndim - 1; d >= 0; d--) {
        int64_t s = x->shape[d], want = d + off >= 0 ? to->shape[d + off] : 1;
        if (s != 1 && s != want) {
            kn_err(ctx, KN_ESHAPE, "operand '%s' %s does not broadcast to %s %s at dim %d (size %lld vs %lld)", name,
                   fmt_shape(b0, sizeof b0, x), toname, fmt_shape(b1, sizeof b1, to), d - x->ndim, (long long)s,
                   (long long)want);
            return 0;
        }
    }
    if (off >= 0) return 1;
    kn_err(ctx, KN_ESHAPE, "operand '%s' %s has more dims than %s %s", name, fmt_shape(b0, sizeof b0, x), toname,
           fmt_shape(b1, sizeof b1, to));
    return 0;
}

/* Checks that operand b has exactly a's shape, as torch's BCE losses want. */
static int same_shape(kn_ctx *ctx, kn_tensor *a, const char *an, kn_tensor *b, const char *bn)
{
    char b0[96], b1[96];
    int ok = a->ndim == b->ndim;
    for (int d = 0; ok && d < a->ndim; d++) ok = a->shape[d] == b->shape[d];
    if (!ok)
        kn_err(ctx, KN_ESHAPE, "operand '%s' %s must have the shape of %s %s", bn, fmt_shape(b0, sizeof b0, b), an,
               fmt_shape(b1, sizeof b1, a));
    return ok;
}

/* ---- activations ---- */

kn_tensor *kn_relu(kn_ctx *ctx, kn_tensor *x)
{
    ENTER(ctx, "kn_relu");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL);
    if (x->dtype == KN_BOOL) return LEAVE(ctx, kn_err(ctx, KN_EDTYPE, "operand 'x' is bool; relu needs numbers"));
    /* where(0 < x, x, 0), with NaN kept: the gradient is g where x > 0 and 0
     * elsewhere, x == 0 included, as torch's threshold_backward (max(x, 0)
     * would split it at 0). Integers stay integers. */
    kn_dtype dt = (kn_dtype)x->dtype;
    kn_tensor *zero = c_scalar(ctx, dt, 0.0);
    kn_tensor *pos = bin(ctx, OP_CMPLT, zero, x, dt);
    kn_tensor *rest = dt_is_float(dt) ? where_b(ctx, prim2(ctx, OP_CMPEQ, x, x), zero, x) : zero; /* NaN: x */
    return LEAVE(ctx, where_b(ctx, pos, x, rest));
}

/* Opens a float-only activation: x checked and widened to its compute
 * dtype (NULL on error). */
static kn_tensor *act_in(kn_ctx *ctx, kn_tensor *x)
{
    if (!need_float(ctx, x, "x")) return NULL;
    return p_cast(ctx, x, compute_dt((kn_dtype)x->dtype));
}

/* leaky_relu = x > 0 ? x : slope * x */
kn_tensor *kn_leaky_relu(kn_ctx *ctx, kn_tensor *x, double slope)
{
    ENTER(ctx, "kn_leaky_relu");
    kn_tensor *xf = act_in(ctx, x);
    if (!xf) return LEAVE(ctx, NULL);
    kn_tensor *y = p_where(ctx, is_pos(ctx, xf), xf, binc(ctx, OP_MUL, xf, slope));
    return LEAVE(ctx, p_cast(ctx, y, (kn_dtype)x->dtype));
}

/* exact: x/2 (1 + erf(x / sqrt 2)); tanh: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
kn_tensor *kn_gelu(kn_ctx *ctx, kn_tensor *x, int tanh_approx)
{
    ENTER(ctx, "kn_gelu");
    kn_tensor *xf = act_in(ctx, x);
    if (!xf) return LEAVE(ctx, NULL);
    kn_tensor *t;
    if (tanh_approx) {
        kn_tensor *x3 = prim2(ctx, OP_MUL, prim2(ctx, OP_MUL, xf, xf), xf);
        kn_tensor *inner = prim2(ctx, OP_ADD, xf, binc(ctx, OP_MUL, x3, 0.044715));
        t = prim1(ctx, OP_TANH, binc(ctx, OP_MUL, inner, SQRT_2_PI));
    } else {
        t = prim1(ctx, OP_ERF, binc(ctx, OP_MUL, xf, SQRT1_2));
    }
    kn_tensor *y = prim2(ctx, OP_MUL, binc(ctx, OP_MUL, xf, 0.5), binc(ctx, OP_ADD, t, 1.0));
    return LEAVE(ctx, p_cast(ctx, y, (kn_dtype)x->dtype));
}

/* silu = x * sigmoid(x) */
kn_tensor *kn_silu(kn_ctx *ctx, kn_tensor *x)
{
    ENTER(ctx, "kn_silu");
    kn_tensor *xf = act_in(ctx, x);
    if (!xf) return LEAVE(ctx, NULL);
    return LEAVE(ctx, p_cast(ctx, prim2(ctx, OP_MUL, xf, sigmoid_core(ctx, xf)), (kn_dtype)x->dtype));
}

/* Integers and bool promote to f32, as torch.sigmoid does. */
kn_tensor *kn_sigmoid(kn_ctx *ctx, kn_tensor *x)
{
    ENTER(ctx, "kn_sigmoid");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL);
    kn_dtype dt = float_of((kn_dtype)x->dtype);
    kn_tensor *y = sigmoid_core(ctx, p_cast(ctx, x, compute_dt(dt)));
    return LEAVE(ctx, p_cast(ctx, y, dt));
}

/* softplus = beta x > threshold ? x : log(1 + exp(beta x)) / beta.
 * beta 0 means torch's 1 (torch itself would divide by zero), and
 * threshold 0 means 20 when beta is 0 too; a threshold of 0 with a nonzero
 * beta is used as given. */
kn_tensor *kn_softplus(kn_ctx *ctx, kn_tensor *x, double beta, double threshold)
{
    ENTER(ctx, "kn_softplus");
    if (beta != beta || threshold != threshold)
        return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "beta (%g) and threshold (%g) must not be NaN", beta, threshold));
    if (beta == 0) {
        if (threshold == 0) threshold = 20;
        beta = 1;
    }
    kn_tensor *xf = act_in(ctx, x);
    if (!xf) return LEAVE(ctx, NULL);
    kn_tensor *z = binc(ctx, OP_MUL, xf, beta);
    kn_tensor *soft = binc(ctx, OP_DIV, softplus_core(ctx, z), beta);
    kn_tensor *lin = bin(ctx, OP_CMPLT, scalar_like(ctx, xf, threshold), z, (kn_dtype)xf->dtype);
    return LEAVE(ctx, p_cast(ctx, p_where(ctx, lin, xf, soft), (kn_dtype)x->dtype));
}

/* hardswish = x * min(max(x + 3, 0), 6) / 6, by pieces: 0 below -3, x (x + 3) / 6 up to 3, x above and
 * at NaN. Their derived gradient is torch's (its decomposition's, and its scalar loop's): the middle
 * piece's (2x + 3) / 6 at -3 and at 3 themselves, g at NaN. The middle piece sees 0 beyond 3 (and at
 * NaN), so that its gradient there is 0, not 0 * NaN. */
kn_tensor *kn_hardswish(kn_ctx *ctx, kn_tensor *x)
{
    ENTER(ctx, "kn_hardswish");
    kn_tensor *xf = act_in(ctx, x);
    if (!xf) return LEAVE(ctx, NULL);
    kn_tensor *upto3 = is_at_most(ctx, xf, 3.0);
    kn_tensor *xm = where_b(ctx, upto3, xf, scalar_like(ctx, xf, 0.0));
    kn_tensor *mid = binc(ctx, OP_DIV, prim2(ctx, OP_MUL, xm, binc(ctx, OP_ADD, xm, 3.0)), 6.0);
    kn_tensor *y = p_where(ctx, upto3, mid, xf);
    y = where_b(ctx, binc(ctx, OP_CMPLT, xf, -3.0), scalar_like(ctx, xf, 0.0), y);
    return LEAVE(ctx, p_cast(ctx, y, (kn_dtype)x->dtype));
}

/* elu = x > 0 ? x : alpha * expm1(x); alpha is used as given (0 is legal).
 * The negative piece takes x <= 0, so that the derived gradient at 0 is
 * torch's alpha, and the positive piece NaN, whose gradient torch gives g.
 * expm1 sees x there and 0 elsewhere, so the branch not taken cannot
 * overflow. */
kn_tensor *kn_elu(kn_ctx *ctx, kn_tensor *x, double alpha)
{
    ENTER(ctx, "kn_elu");
    kn_tensor *xf = act_in(ctx, x);
    if (!xf) return LEAVE(ctx, NULL);
    kn_tensor *le0 = is_at_most(ctx, xf, 0.0);
    kn_tensor *neg = binc(ctx, OP_MUL, expm1_(ctx, where_b(ctx, le0, xf, scalar_like(ctx, xf, 0.0))), alpha);
    return LEAVE(ctx, p_cast(ctx, p_where(ctx, le0, neg, xf), (kn_dtype)x->dtype));
}

static kn_tensor *softmax_op(kn_ctx *ctx, const char *name, kn_tensor *x, int dim, int log)
{
    ENTER(ctx, name);
    if (!need_float(ctx, x, "x")) return LEAVE(ctx, NULL);
    int d = tensor_norm_dim(ctx, dim, x->ndim, "dim");
    if (d < 0) return LEAVE(ctx, NULL);
    kn_tensor *y = softmax_core(ctx, p_cast(ctx, x, compute_dt((kn_dtype)x->dtype)), d, log);
    return LEAVE(ctx, p_cast(ctx, y, (kn_dtype)x->dtype));
}

kn_tensor *kn_softmax(kn_ctx *ctx, kn_tensor *x, int dim) { return softmax_op(ctx, "kn_softmax", x, dim, 0); }
kn_tensor *kn_log_softmax(kn_ctx *ctx, kn_tensor *x, int dim) { return softmax_op(ctx, "kn_log_softmax", x, dim, 1); }

/* ---- losses ---- */

static int check_reduction(kn_ctx *ctx, kn_reduction r)
{
    if ((unsigned)r <= KN_REDUCE_NONE) return 1;
    kn_err(ctx, KN_EINVAL, "reduction %d is not a kn_reduction (mean, sum or none)", (int)r);
    return 0;
}

/* none: the loss itself; sum: its sum; mean: sum / numel (NaN when empty,
 * as torch). */
static kn_tensor *reduce_loss(kn_ctx *ctx, kn_tensor *loss, kn_reduction r)
{
    if (!loss || r == KN_REDUCE_NONE) return loss;
    if (r == KN_REDUCE_MEAN && !concrete(ctx, loss, "input")) return NULL;
    kn_tensor *s = sum_all(ctx, loss);
    if (r == KN_REDUCE_SUM) return s;
    return binc(ctx, OP_DIV, s, (double)tensor_numel(loss->ndim, loss->shape));
}

/* Checks input and target of an elementwise regression loss; on success
 * both are broadcast to one shape in the compute dtype (in xs) and *dt is
 * the dtype of the result. */
static int regression_in(kn_ctx *ctx, kn_tensor *input, kn_tensor *target, kn_reduction r, kn_tensor **xs,
                         kn_dtype *dt)
{
    static const char *names[2] = {"input", "target"};
    if (!tensor_check(ctx, input, "input") || !tensor_check(ctx, target, "target") || !check_reduction(ctx, r))
        return 0;
    xs[0] = input, xs[1] = target;
    *dt = result_type(2, xs);
    if (!dt_is_float(*dt)) {
        kn_err(ctx, KN_EDTYPE, "operands 'input' (%s) and 'target' (%s) must promote to a float dtype",
               kn_dtype_name((kn_dtype)input->dtype), kn_dtype_name((kn_dtype)target->dtype));
        return 0;
    }
    int64_t shape[KN_MAX_DIMS];
    int nd = bcast_named(ctx, 2, xs, names, 0, shape);
    if (nd < 0) return 0;
    for (int i = 0; i < 2; i++) xs[i] = broadcast_to(ctx, p_cast(ctx, xs[i], compute_dt(*dt)), nd, shape);
    return xs[0] && xs[1];
}

/* mse = reduce((input - target)^2), shapes broadcast as torch does */
kn_tensor *kn_mse_loss(kn_ctx *ctx, kn_tensor *input, kn_tensor *target, kn_reduction r)
{
    ENTER(ctx, "kn_mse_loss");
    kn_tensor *xs[2];
    kn_dtype dt;
    if (!regression_in(ctx, input, target, r, xs, &dt)) return LEAVE(ctx, NULL);
    kn_tensor *d = prim2(ctx, OP_SUB, xs[0], xs[1]);
    return LEAVE(ctx, p_cast(ctx, reduce_loss(ctx, prim2(ctx, OP_MUL, d, d), r), dt));
}

/* l1 = reduce(|input - target|) */
kn_tensor *kn_l1_loss(kn_ctx *ctx, kn_tensor *input, kn_tensor *target, kn_reduction r)
{
    ENTER(ctx, "kn_l1_loss");
    kn_tensor *xs[2];
    kn_dtype dt;
    if (!regression_in(ctx, input, target, r, xs, &dt)) return LEAVE(ctx, NULL);
    kn_tensor *d = prim1(ctx, OP_ABS, prim2(ctx, OP_SUB, xs[0], xs[1]));
    return LEAVE(ctx, p_cast(ctx, reduce_loss(ctx, d, r), dt));
}

/* Checks the optional weight of a BCE loss and casts it to dt (NULL stays
 * NULL; returns 0 on error). */
static int bce_weight(kn_ctx *ctx, kn_tensor **w, const char *name, kn_tensor *input, kn_dtype dt)
{
    if (!*w) return 1;
    if (!need_float(ctx, *w, name) || !fits(ctx, *w, name, input, "input")) return 0;
    *w = p_cast(ctx, *w, dt);
    return *w != NULL;
}

/* The checks both BCE losses share; returns the compute dtype, or -1. */
static int bce_in(kn_ctx *ctx, kn_tensor *x, const char *xname, kn_tensor *target, kn_reduction r,
                  kn_dtype *out_dt)
{
    if (!need_float(ctx, x, xname) || !need_float(ctx, target, "target") || !check_reduction(ctx, r)) return -1;
    if (!same_shape(ctx, x, xname, target, "target")) return -1;
    *out_dt = promote_types((kn_dtype)x->dtype, (kn_dtype)target->dtype);
    return (int)compute_dt(*out_dt);
}

/* bce = -w (y log p + (1 - y) log(1 - p)), each log clamped at -100 as
 * torch does, so that p = 0 or 1 gives a finite loss. torch raises for p
 * outside [0, 1]; a traced graph cannot read values, so here such elements
 * give NaN (log of a negative number) and so does the reduced loss. */
/* binary_cross_entropy's hand-written backward, as torch's: d/dp =
 * (p - y) / max(p (1 - p), 1e-12) and d/dy = log(1 - p) - log(p) (both logs
 * clamped at -100). The derived one divides by p through log's rule and
 * gives NaN where a saturated sigmoid makes p exactly 0 or 1. */
static kn_tensor *bce_vjp(kn_ctx *ctx, kn_tensor *g, kn_tensor *const *saved, const int64_t *args, int which)
{
    (void)args;
    kn_tensor *p = saved[0], *y = saved[1], *lp = saved[2], *lq = saved[3];
    if (which == 1) return prim2(ctx, OP_MUL, g, prim2(ctx, OP_SUB, lq, lp));
    kn_tensor *pq = prim2(ctx, OP_MUL, p, binc(ctx, OP_SUB, prim1(ctx, OP_NEG, p), -1.0)); /* p (1 - p) */
    kn_tensor *d = prim2(ctx, OP_DIV, prim2(ctx, OP_SUB, p, y), binc(ctx, OP_MAX, pq, 1e-12));
    return prim2(ctx, OP_MUL, g, d);
}

kn_tensor *kn_binary_cross_entropy(kn_ctx *ctx, kn_tensor *p, kn_tensor *target, kn_tensor *weight, kn_reduction r)
{
    ENTER(ctx, "kn_binary_cross_entropy");
    if (!optional_ok(ctx, weight)) return LEAVE(ctx, NULL);
    kn_dtype dt;
    int cdt = bce_in(ctx, p, "p", target, r, &dt);
    if (cdt < 0 || !bce_weight(ctx, &weight, "weight", p, (kn_dtype)cdt)) return LEAVE(ctx, NULL);
    kn_tensor *pf = p_cast(ctx, p, (kn_dtype)cdt), *y = p_cast(ctx, target, (kn_dtype)cdt);
    kn_tensor *in[2] = {pf, y};
    int custom = !ctx->no_custom_vjp && autodiff_wants(ctx, 2, in);
    int was = custom ? kn_set_grad_enabled(ctx, 0) : 0;
    kn_tensor *lp = binc(ctx, OP_MAX, prim1(ctx, OP_LOG, pf), -100.0);
    kn_tensor *lq = binc(ctx, OP_MAX, log1p_(ctx, prim1(ctx, OP_NEG, pf)), -100.0);
    kn_tensor *loss = prim2(ctx, OP_SUB, prim2(ctx, OP_MUL, binc(ctx, OP_SUB, y, 1.0), lq), prim2(ctx, OP_MUL, y, lp));
    if (custom) {
        kn_set_grad_enabled(ctx, was);
        loss = autodiff_custom(ctx, loss, 2, in, 4, (kn_tensor *[]){pf, y, lp, lq}, NULL, 0, bce_vjp);
    }
    if (weight) loss = bin(ctx, OP_MUL, loss, weight, (kn_dtype)cdt);
    return LEAVE(ctx, p_cast(ctx, reduce_loss(ctx, loss, r), dt));
}

/* bce_with_logits = w ((1 - y) x + (1 + (pw - 1) y) softplus(-x)), the
 * form torch uses, with softplus(-x) = max(-x, 0) + log1p(exp(-|x|)) so
 * that no exp overflows and the tail stays accurate. pos_weight
 * broadcasts against the last (class) dim. */
kn_tensor *kn_binary_cross_entropy_with_logits(kn_ctx *ctx, kn_tensor *x, kn_tensor *target, kn_tensor *weight,
                                               kn_tensor *pos_weight, kn_reduction r)
{
    ENTER(ctx, "kn_binary_cross_entropy_with_logits");
    if (!optional_ok(ctx, weight) || !optional_ok(ctx, pos_weight)) return LEAVE(ctx, NULL);
    kn_dtype dt;
    int cdt = bce_in(ctx, x, "x", target, r, &dt);
    if (cdt < 0 || !bce_weight(ctx, &weight, "weight", x, (kn_dtype)cdt) ||
        !bce_weight(ctx, &pos_weight, "pos_weight", x, (kn_dtype)cdt))
        return LEAVE(ctx, NULL);
    kn_tensor *xf = p_cast(ctx, x, (kn_dtype)cdt), *y = p_cast(ctx, target, (kn_dtype)cdt);
    kn_tensor *sp = softplus_core(ctx, prim1(ctx, OP_NEG, xf)); /* -log sigmoid(x) */
    if (pos_weight) {
        kn_tensor *lw = binc(ctx, OP_ADD, bin(ctx, OP_MUL, binc(ctx, OP_SUB, pos_weight, 1.0), y, (kn_dtype)cdt), 1.0);
        sp = prim2(ctx, OP_MUL, lw, sp);
    }
    kn_tensor *one_minus_y = bin(ctx, OP_SUB, scalar_like(ctx, y, 1.0), y, (kn_dtype)cdt);
    kn_tensor *loss = prim2(ctx, OP_ADD, prim2(ctx, OP_MUL, one_minus_y, xf), sp);
    if (weight) loss = bin(ctx, OP_MUL, loss, weight, (kn_dtype)cdt);
    return LEAVE(ctx, p_cast(ctx, reduce_loss(ctx, loss, r), dt));
}

/* ---- nll_loss and cross_entropy ---- */

/* Per-element pieces of nll_loss over the target's shape (T). */
typedef struct {
    kn_tensor *loss; /* (T) -w[t] logp[t], 0 where ignored */
    kn_tensor *w;    /* (T) w[t], 0 where ignored: the mean's denominator */
    kn_tensor *ign;  /* (T) bool: target == ignore_index */
} Nll;

static int class_dim(const kn_tensor *x) { return x->ndim == 1 ? 0 : 1; }

/* torch's rules: input (C) with target (), or input (N, C, d...) with
 * target (N, d...) of i64/i32; weight (C) or none. KN_OK if they hold. */
static kn_status nll_check(kn_ctx *ctx, kn_tensor *input, const char *iname, kn_tensor *target, const kn_loss_opts *o)
{
    char b0[96], b1[96];
    if (!need_float(ctx, input, iname) || !tensor_check(ctx, target, "target")) return ctx->status;
    if (!concrete(ctx, input, iname) || !concrete(ctx, target, "target")) return ctx->status;
    if (input->ndim == 0) return kn_errs(ctx, KN_ESHAPE, "operand '%s' is 0-d; expected (C) or (N, C, d...)", iname);
    if (target->dtype != KN_I64 && target->dtype != KN_I32)
        return kn_errs(ctx, KN_EDTYPE, "operand 'target' must hold class indices (i64 or i32), got %s",
                       kn_dtype_name((kn_dtype)target->dtype));
    int nd = input->ndim, tnd = nd == 1 ? 0 : nd - 1;
    if (target->ndim != tnd)
        return kn_errs(ctx, KN_ESHAPE, "operand 'target' %s has %d dims; %s %s needs %d", fmt_shape(b0, sizeof b0, target),
                       target->ndim, iname, fmt_shape(b1, sizeof b1, input), tnd);
    for (int d = 0; d < tnd; d++) {
        int id = d == 0 ? 0 : d + 1; /* the input dim it matches: the class dim is skipped */
        if (target->shape[d] != input->shape[id])
            return kn_errs(ctx, KN_ESHAPE, "operand 'target' dim %d has size %lld, expected %lld (%s dim %d)", d,
                           (long long)target->shape[d], (long long)input->shape[id], iname, id);
    }
    kn_tensor *w = o ? o->weight : NULL;
    int64_t C = input->shape[class_dim(input)];
    if (w && !need_float(ctx, w, "weight")) return ctx->status;
    if (w && (w->ndim != 1 || w->shape[0] != C))
        return kn_errs(ctx, KN_ESHAPE, "operand 'weight' %s must be (%lld): one weight per class",
                       fmt_shape(b0, sizeof b0, w), (long long)C);
    if (o && !check_reduction(ctx, o->reduction)) return ctx->status;
    return KN_OK;
}

/* ignore_index as an i64 constant. Beyond +-2^53 it cannot equal a valid
 * class, and the constant goes through a double, so it is clamped there:
 * an out-of-range target then fails the gather instead of being ignored. */
static kn_tensor *ignore_const(kn_ctx *ctx, const kn_loss_opts *o)
{
    double v = o && o->has_ignore_index ? (double)o->ignore_index : -100.0;
    v = v > 9007199254740992.0 ? 9007199254740992.0 : v < -9007199254740992.0 ? -9007199254740992.0 : v;
    return c_scalar(ctx, KN_I64, v);
}

/* nll_loss's per-element terms for logp (compute dtype) and weight (C) in
 * the same dtype or NULL. Ignored entries gather class 0 and are then
 * masked with where(), not multiplied, so a -inf there cannot make NaN.
 * An out-of-range class fails in the gather kernel with KN_EINDEX ("target
 * class ... out of range"). */
static Nll nll_terms(kn_ctx *ctx, kn_tensor *logp, kn_tensor *target, kn_tensor *weight, const kn_loss_opts *o)
{
    Nll n = {NULL, NULL, NULL};
    if (!logp) return n;
    kn_dtype dt = (kn_dtype)logp->dtype;
    int cd = class_dim(logp), nd = logp->ndim, tnd = target->ndim;
    int64_t ishape[KN_MAX_DIMS], flat = tensor_numel(tnd, target->shape);
    memcpy(ishape, logp->shape, sizeof ishape);
    ishape[cd] = 1;                                                  /* (N, 1, d...) */
    kn_tensor *t = p_cast(ctx, target, KN_I64);                      /* (T) */
    n.ign = bin(ctx, OP_CMPEQ, t, ignore_const(ctx, o), KN_I64);
    kn_tensor *zero = c_scalar(ctx, dt, 0.0);
    kn_tensor *safe = where_b(ctx, n.ign, c_scalar(ctx, KN_I64, 0.0), t);
    kn_tensor *lp = p_gather_for(ctx, logp, cd, p_reshape(ctx, safe, nd, ishape), IX_CLASS);
    lp = p_reshape(ctx, lp, tnd, target->shape);                     /* (T) logp[t] */
    kn_tensor *wt = weight ? p_reshape(ctx, p_gather_for(ctx, weight, 0, p_reshape(ctx, safe, 1, &flat), IX_CLASS),
                                       tnd, target->shape)
                           : c_scalar(ctx, dt, 1.0);
    n.w = where_b(ctx, n.ign, zero, wt);
    kn_tensor *wlp = weight ? bin(ctx, OP_MUL, lp, wt, dt) : lp;
    n.loss = where_b(ctx, n.ign, zero, prim1(ctx, OP_NEG, wlp));
    return n;
}

/* The reduced nll terms: none, sum, or sum / sum of weights (torch's
 * weighted mean; NaN when every entry is ignored). */
static kn_tensor *nll_reduce(kn_ctx *ctx, kn_tensor *terms, const Nll *n, kn_reduction r)
{
    if (r == KN_REDUCE_NONE) return terms;
    kn_tensor *s = sum_all(ctx, terms);
    return r == KN_REDUCE_SUM ? s : prim2(ctx, OP_DIV, s, sum_all(ctx, n->w));
}

kn_tensor *kn_nll_loss(kn_ctx *ctx, kn_tensor *logp, kn_tensor *target, const kn_loss_opts *o)
{
    ENTER(ctx, "kn_nll_loss");
    if (!optional_ok(ctx, o ? o->weight : NULL)) return LEAVE(ctx, NULL);
    if (nll_check(ctx, logp, "logp", target, o)) return LEAVE(ctx, NULL);
    kn_dtype dt = (kn_dtype)logp->dtype, cdt = compute_dt(dt);
    kn_tensor *w = o && o->weight ? p_cast(ctx, o->weight, cdt) : NULL;
    if (o && o->weight && !w) return LEAVE(ctx, NULL); /* the cast failed: not "no weight" */
    Nll n = nll_terms(ctx, p_cast(ctx, logp, cdt), target, w, o);
    return LEAVE(ctx, p_cast(ctx, nll_reduce(ctx, n.loss, &n, o ? o->reduction : KN_REDUCE_MEAN), dt));
}

/* cross_entropy = (1 - eps) nll(log_softmax(x)) + eps / C * smooth, as
 * torch 1.13's cross_entropy_loss_label_smoothing: smooth_i =
 * -sum_c w_c logp[i, c] (0 where ignored), reduced like the nll term, the
 * mean dividing both by the sum of the target weights of kept entries. */
/* cross_entropy's hand-written backward (no label smoothing): with p the
 * softmax of x, t the target class and w_t its weight (0 where ignored),
 * dx = (p - onehot(t)) * w_t * g, divided by the sum of w_t for a mean. One
 * fused expression instead of log_softmax's and nll's gather/scatter. */
static kn_tensor *ce_vjp(kn_ctx *ctx, kn_tensor *g, kn_tensor *const *saved, const int64_t *args, int which)
{
    (void)which;
    kn_tensor *p = saved[0], *safe = saved[1], *w = saved[2], *denom = saved[3];
    int cd = (int)args[0], nd = p->ndim;
    kn_dtype dt = (kn_dtype)p->dtype;
    int64_t ishape[KN_MAX_DIMS];
    memcpy(ishape, p->shape, sizeof ishape);
    ishape[cd] = 1;                                                   /* (N, 1, d...) */
    kn_tensor *coef = bin(ctx, OP_MUL, w, g, dt);                     /* (T) */
    if (args[1] == KN_REDUCE_MEAN) /* ignored entries (w 0) get 0, even when all are: no 0/0 */
        coef = where_b(ctx, binc(ctx, OP_CMPEQ, w, 0.0), c_scalar(ctx, dt, 0.0), bin(ctx, OP_DIV, coef, denom, dt));
    coef = p_reshape(ctx, coef, nd, ishape);
    kn_tensor *cls = p_iota(ctx, KN_I64, nd, p->shape, cd);
    kn_tensor *hot = p_cast(ctx, bin(ctx, OP_CMPEQ, cls, p_reshape(ctx, safe, nd, ishape), KN_I64), dt);
    return bin(ctx, OP_MUL, prim2(ctx, OP_SUB, p, hot), coef, dt);
}

/* The forward with grad off, then one custom entry for x. */
static kn_tensor *ce_custom(kn_ctx *ctx, kn_tensor *x, kn_tensor *target, kn_tensor *w, const kn_loss_opts *o,
                            kn_reduction r)
{
    int cd = class_dim(x), was = kn_set_grad_enabled(ctx, 0);
    kn_dtype dt = (kn_dtype)x->dtype;
    kn_tensor *logp = softmax_core(ctx, x, cd, 1);
    Nll n = nll_terms(ctx, logp, target, w, o);
    kn_tensor *loss = nll_reduce(ctx, n.loss, &n, r);
    kn_tensor *denom = r == KN_REDUCE_MEAN ? sum_all(ctx, n.w) : c_scalar(ctx, dt, 1.0);
    kn_tensor *safe = where_b(ctx, n.ign, c_scalar(ctx, KN_I64, 0.0), p_cast(ctx, target, KN_I64));
    kn_tensor *p = prim1(ctx, OP_EXP, logp);
    kn_set_grad_enabled(ctx, was);
    int64_t args[2] = {cd, r};
    return autodiff_custom(ctx, loss, 1, &x, 4, (kn_tensor *[]){p, safe, n.w, denom}, args, 2, ce_vjp);
}

kn_tensor *kn_cross_entropy(kn_ctx *ctx, kn_tensor *input, kn_tensor *target, const kn_loss_opts *o)
{
    ENTER(ctx, "kn_cross_entropy");
    if (!optional_ok(ctx, o ? o->weight : NULL)) return LEAVE(ctx, NULL);
    if (nll_check(ctx, input, "input", target, o)) return LEAVE(ctx, NULL);
    double eps = o ? o->label_smoothing : 0.0;
    if (!(eps >= 0 && eps <= 1))
        return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "label_smoothing must be between 0.0 and 1.0, got %g", eps));
    kn_reduction r = o ? o->reduction : KN_REDUCE_MEAN;
    kn_dtype dt = (kn_dtype)input->dtype, cdt = compute_dt(dt);
    int cd = class_dim(input), nd = input->ndim;
    int64_t C = input->shape[cd];
    kn_tensor *w = o && o->weight ? p_cast(ctx, o->weight, cdt) : NULL;
    if (o && o->weight && !w) return LEAVE(ctx, NULL); /* the cast failed: not "no weight" */
    kn_tensor *xin = p_cast(ctx, input, cdt);
    if (eps == 0 && autodiff_custom_wanted(ctx, xin))
        return LEAVE(ctx, p_cast(ctx, ce_custom(ctx, xin, target, w, o, r), dt));
    kn_tensor *logp = softmax_core(ctx, xin, cd, 1); /* (N, C, d...) */
    Nll n = nll_terms(ctx, logp, target, w, o);
    kn_tensor *nll = nll_reduce(ctx, n.loss, &n, r);
    if (eps == 0) return LEAVE(ctx, p_cast(ctx, nll, dt));
    if (w) {
        int64_t wshape[KN_MAX_DIMS];
        for (int d = 0; d < nd; d++) wshape[d] = d == cd ? C : 1;   /* (1, C, 1...) */
        logp = bin(ctx, OP_MUL, logp, p_reshape(ctx, w, nd, wshape), cdt);
    }
    kn_tensor *sm = p_reshape(ctx, prim1(ctx, OP_NEG, rsum(ctx, logp, cd)), target->ndim, target->shape);
    sm = where_b(ctx, n.ign, c_scalar(ctx, cdt, 0.0), sm);              /* (T) */
    kn_tensor *a = binc(ctx, OP_MUL, nll, 1.0 - eps);
    kn_tensor *b = binc(ctx, OP_MUL, nll_reduce(ctx, sm, &n, r), C ? eps / (double)C : 0.0);
    return LEAVE(ctx, p_cast(ctx, prim2(ctx, OP_ADD, a, b), dt));
}

/* ---- layers ---- */

/* weight (V, D), index (...) -> (..., D): the index flattened to (n, 1),
 * expanded to (n, D) and gathered along dim 0. An index outside [0, V)
 * fails in the gather kernel with KN_EINDEX naming the value. */
kn_tensor *kn_embedding(kn_ctx *ctx, kn_tensor *weight, kn_tensor *index)
{
    ENTER(ctx, "kn_embedding");
    if (!tensor_check(ctx, weight, "weight") || !tensor_check(ctx, index, "index") || !concrete(ctx, index, "index"))
        return LEAVE(ctx, NULL);
    char b[96];
    if (weight->ndim != 2)
        return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'weight' %s must be 2-D (V, D)", fmt_shape(b, sizeof b, weight)));
    if (index->dtype != KN_I64 && index->dtype != KN_I32)
        return LEAVE(ctx, kn_err(ctx, KN_EDTYPE, "operand 'index' must be i64 or i32, got %s",
                                 kn_dtype_name((kn_dtype)index->dtype)));
    if (index->ndim >= KN_MAX_DIMS)
        return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'index' has %d dims; the result would exceed %d", index->ndim,
                                 KN_MAX_DIMS));
    int64_t D = weight->shape[1], n = tensor_numel(index->ndim, index->shape);
    int64_t col[2] = {n, 1}, rows[2] = {n, D}, oshape[KN_MAX_DIMS];
    memcpy(oshape, index->shape, (size_t)index->ndim * sizeof *oshape);
    oshape[index->ndim] = D;
    kn_tensor *idx = p_expand(ctx, p_reshape(ctx, index, 2, col), 2, rows); /* (n, D) */
    return LEAVE(ctx, p_reshape(ctx, p_gather(ctx, weight, 0, idx), index->ndim + 1, oshape));
}

/* training: x * (u >= p) / (1 - p) with u ~ U[0, 1) drawn in f32 whatever
 * x's dtype, so one seed gives one mask; p == 1 gives x * 0 as torch does.
 * Not training, or p == 0: x itself (torch returns its input object). */
kn_tensor *kn_dropout(kn_ctx *ctx, kn_tensor *x, double p, int training)
{
    ENTER(ctx, "kn_dropout");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL);
    if (!(p >= 0 && p <= 1))
        return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "dropout probability has to be between 0 and 1, but got %g", p));
    if (!training || p == 0) return LEAVE(ctx, x);
    if (!need_float(ctx, x, "x")) return LEAVE(ctx, NULL);
    if (p == 1) return LEAVE(ctx, binc(ctx, OP_MUL, x, 0.0));
    kn_dtype dt = (kn_dtype)x->dtype;
    kn_tensor *u = p_rand(ctx, KN_F32, x->ndim, x->shape);
    kn_tensor *drop = binc(ctx, OP_CMPLT, u, p);
    kn_tensor *scale = where_b(ctx, drop, c_scalar(ctx, dt, 0.0), c_scalar(ctx, dt, 1.0 / (1.0 - p)));
    return LEAVE(ctx, prim2(ctx, OP_MUL, x, scale));
}

static kn_status sdpa_check_one(kn_ctx *ctx, kn_tensor *x, const char *name, const char *dims, kn_tensor *q)
{
    if (!need_float(ctx, x, name)) return ctx->status;
    if (x->ndim < 2) return kn_errs(ctx, KN_ESHAPE, "operand '%s' is %d-D; expected (..., %s)", name, x->ndim, dims);
    if (x->dtype != q->dtype)
        return kn_errs(ctx, KN_EDTYPE, "operand '%s' is %s but q is %s; q, k and v need one dtype", name,
                       kn_dtype_name((kn_dtype)x->dtype), kn_dtype_name((kn_dtype)q->dtype));
    return KN_OK;
}

/* Checks q, k, v and mask for attention and fills the broadcast batch
 * shape and its rank *nb. */
static kn_status sdpa_check(kn_ctx *ctx, kn_tensor *q, kn_tensor *k, kn_tensor *v, kn_tensor *mask, int is_causal,
                            int64_t *batch, int *nb)
{
    static const char *names[4] = {"q", "k", "v", "mask"};
    if (sdpa_check_one(ctx, q, "q", "L, E", q) || sdpa_check_one(ctx, k, "k", "S, E", q) ||
        sdpa_check_one(ctx, v, "v", "S, Ev", q))
        return ctx->status;
    int64_t L = q->shape[q->ndim - 2], E = q->shape[q->ndim - 1], S = k->shape[k->ndim - 2];
    if (k->shape[k->ndim - 1] != E)
        return kn_errs(ctx, KN_ESHAPE, "operand 'k' dim -1 has size %lld, expected E = %lld from q",
                       (long long)k->shape[k->ndim - 1], (long long)E);
    if (v->shape[v->ndim - 2] != S)
        return kn_errs(ctx, KN_ESHAPE, "operand 'v' dim -2 has size %lld, expected S = %lld from k",
                       (long long)v->shape[v->ndim - 2], (long long)S);
    if (mask && is_causal) return kn_errs(ctx, KN_EINVAL, "an explicit mask should not be set when is_causal is true");
    if (mask && mask->dtype != KN_BOOL && !dt_is_float((kn_dtype)mask->dtype))
        return kn_errs(ctx, KN_EDTYPE, "operand 'mask' must be bool or float, got %s",
                       kn_dtype_name((kn_dtype)mask->dtype));
    for (int j = 0; mask && j < 2 && j < mask->ndim; j++) {
        int64_t s = mask->shape[mask->ndim - 1 - j], want = j ? L : S;
        if (s != 1 && s != want)
            return kn_errs(ctx, KN_ESHAPE, "operand 'mask' dim %d has size %lld, expected 1 or %s = %lld", -1 - j,
                           (long long)s, j ? "L" : "S", (long long)want);
    }
    kn_tensor *xs[4] = {q, k, v, mask && mask->ndim > 2 ? mask : NULL};
    *nb = bcast_named(ctx, 4, xs, names, 2, batch);
    if (*nb < 0) return ctx->status;
    if (*nb + 2 > KN_MAX_DIMS)
        return kn_errs(ctx, KN_ESHAPE, "the broadcast batch has %d dims; at most %d fit", *nb, KN_MAX_DIMS - 2);
    return KN_OK;
}

/* softmax(q k^T * scale + bias) v over batch dims B broadcast from q, k, v
 * and mask: q (B, L, E), k (B, S, E), v (B, S, Ev) -> (B, L, Ev). A bool
 * mask keeps its true entries (false ones get -inf), a float mask is added,
 * is_causal keeps s <= l. A fully masked row is NaN, as torch 2.0. */
kn_tensor *kn_scaled_dot_product_attention(kn_ctx *ctx, kn_tensor *q, kn_tensor *k, kn_tensor *v, kn_tensor *mask,
                                           int is_causal, double scale)
{
    ENTER(ctx, "kn_scaled_dot_product_attention");
    if (!optional_ok(ctx, mask)) return LEAVE(ctx, NULL);
    int64_t shape[KN_MAX_DIMS];
    int nb = 0;
    if (sdpa_check(ctx, q, k, v, mask, is_causal, shape, &nb)) return LEAVE(ctx, NULL);
    if (scale != scale) return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "scale must not be NaN"));
    kn_dtype dt = (kn_dtype)q->dtype, cdt = compute_dt(dt);
    int64_t L = q->shape[q->ndim - 2], E = q->shape[q->ndim - 1], S = k->shape[k->ndim - 2];
    if (scale == 0 && DIM_IS_SYM(E))
        return LEAVE(ctx, kn_err(ctx, KN_EUNSUPPORTED, "operand 'q' dim -1 is symbolic; pass scale explicitly"));
    if (scale == 0) scale = 1.0 / sqrt((double)E);
    int nd = nb + 2;
    int perm[KN_MAX_DIMS];
    for (int i = 0; i < nd; i++) perm[i] = i;
    perm[nd - 2] = nd - 1, perm[nd - 1] = nd - 2;
    shape[nb] = L, shape[nb + 1] = E;
    kn_tensor *qs = broadcast_to(ctx, binc(ctx, OP_MUL, p_cast(ctx, q, cdt), scale), nd, shape); /* (B, L, E) */
    shape[nb] = S;
    kn_tensor *kt = p_permute(ctx, broadcast_to(ctx, p_cast(ctx, k, cdt), nd, shape), perm);    /* (B, E, S) */
    shape[nb + 1] = v->shape[v->ndim - 1];
    kn_tensor *ve = broadcast_to(ctx, p_cast(ctx, v, cdt), nd, shape);                          /* (B, S, Ev) */
    kn_tensor *sc = p_dot(ctx, qs, kt);                                                          /* (B, L, S) */
    kn_tensor *ninf = c_scalar(ctx, cdt, -INFINITY);
    if (is_causal) {
        int64_t ls[2] = {L, S};
        kn_tensor *above = bin(ctx, OP_CMPLT, p_iota(ctx, KN_I64, 2, ls, 0), p_iota(ctx, KN_I64, 2, ls, 1), KN_I64);
        sc = where_b(ctx, above, ninf, sc);
    } else if (mask && mask->dtype == KN_BOOL) {
        sc = where_b(ctx, mask, sc, ninf);
    } else if (mask) {
        sc = bin(ctx, OP_ADD, sc, mask, cdt);
    }
    kn_tensor *a = softmax_core(ctx, sc, nd - 1, 0);
    return LEAVE(ctx, p_cast(ctx, p_dot(ctx, a, ve), dt));
}
