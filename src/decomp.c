/*
 * decomp.c — composite ops as decompositions into primitives: the shared
 * helpers (broadcasting, type promotion, constants), creation, and the
 * pointwise ops. Reductions and shape ops are in decomp_shape.c, neural
 * network ops in decomp_nn.c.
 *
 * Every public op opens with ENTER and returns through LEAVE, checks its
 * operands with messages naming the operand and dim, applies PyTorch's type
 * promotion and broadcasting, and then calls only prim()/p_*() or other
 * public ops. That is what lets the same code run eagerly and be traced.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

/* ---- helpers shared by the decomposition files ---- */

const char *fmt_dims(char *buf, size_t cap, int n, const int64_t *dims)
{
    size_t len = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (len < cap) snprintf(buf + len, cap - len, ")");
    return buf;
}

const char *fmt_shape(char *buf, size_t cap, const kn_tensor *t) { return fmt_dims(buf, cap, t->ndim, t->shape); }

int broadcast_shapes(kn_ctx *ctx, int n, kn_tensor *const *xs, int64_t *out)
{
    static const char *names[4] = {"a", "b", "c", "d"};
    int nd = 0;
    for (int i = 0; i < n; i++) nd = xs[i]->ndim > nd ? xs[i]->ndim : nd;
    for (int d = 0; d < nd; d++) out[d] = 1;
    for (int i = 0; i < n; i++) {
        for (int d = 0; d < xs[i]->ndim; d++) {
            int o = nd - xs[i]->ndim + d;
            int64_t s = xs[i]->shape[d];
            if (s == out[o] || s == 1) continue;
            if (out[o] != 1) {
                char b0[96], b1[96];
                kn_err(ctx, KN_ESHAPE, "operand '%s' %s does not broadcast with %s at dim %d (%lld vs %lld)",
                       names[i < 4 ? i : 3], fmt_shape(b0, sizeof b0, xs[i]), fmt_shape(b1, sizeof b1, xs[0]),
                       o - nd, (long long)s, (long long)out[o]);
                return -1;
            }
            out[o] = s;
        }
    }
    return nd;
}

kn_tensor *broadcast_to(kn_ctx *ctx, kn_tensor *x, int ndim, const int64_t *shape)
{
    if (!x) return NULL;
    if (x->ndim < ndim) {
        int64_t s[KN_MAX_DIMS];
        int lead = ndim - x->ndim;
        for (int i = 0; i < ndim; i++) s[i] = i < lead ? 1 : x->shape[i - lead];
        x = p_reshape(ctx, x, ndim, s);
    }
    return p_expand(ctx, x, ndim, shape);
}

/* Broadcasts n tensors (in place in xs) to their common shape and casts
 * them to dt. Returns 0 on error. */
int broadcast_cast(kn_ctx *ctx, int n, kn_tensor **xs, kn_dtype dt)
{
    int64_t shape[KN_MAX_DIMS];
    int nd = broadcast_shapes(ctx, n, xs, shape);
    if (nd < 0) return 0;
    for (int i = 0; i < n; i++) {
        xs[i] = broadcast_to(ctx, p_cast(ctx, xs[i], dt), nd, shape);
        if (!xs[i]) return 0;
    }
    return 1;
}

/* A 0-d constant of dtype dt; binary ops broadcast it for free. */
kn_tensor *c_scalar(kn_ctx *ctx, kn_dtype dt, double v) { return p_full(ctx, dt, 0, NULL, v); }

/* The float dtype an op on x computes in: x's own if float, else f32. */
kn_dtype float_of(kn_dtype dt) { return dt_is_float(dt) ? dt : KN_F32; }

/* a op b after broadcasting both to a common shape and dtype dt. */
kn_tensor *bin(kn_ctx *ctx, Op op, kn_tensor *a, kn_tensor *b, kn_dtype dt)
{
    kn_tensor *xs[2] = {a, b};
    if (!a || !b) return kn_err_null(ctx, a ? "b" : "a");
    if (!broadcast_cast(ctx, 2, xs, dt)) return NULL;
    return prim2(ctx, op, xs[0], xs[1]);
}

/* x op constant, in x's dtype. */
kn_tensor *binc(kn_ctx *ctx, Op op, kn_tensor *x, double v)
{
    if (!x) return kn_err_null(ctx, "x");
    return bin(ctx, op, x, c_scalar(ctx, (kn_dtype)x->dtype, v), (kn_dtype)x->dtype);
}

static kn_dtype type2(kn_tensor *a, kn_tensor *b)
{
    kn_tensor *xs[2] = {a, b};
    return result_type(2, xs);
}

static int both(kn_ctx *ctx, kn_tensor *a, kn_tensor *b)
{
    return tensor_check(ctx, a, "a") && tensor_check(ctx, b, "b");
}

/* ---- creation ---- */

kn_tensor *kn_full(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, double value)
{
    ENTER(ctx, "kn_full");
    size_t bytes;
    if (!tensor_check_size(ctx, dt, ndim, shape, &bytes)) return LEAVE(ctx, NULL);
    return LEAVE(ctx, p_full(ctx, dt, ndim, shape, value));
}

kn_tensor *kn_zeros(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape)
{
    ENTER(ctx, "kn_zeros");
    if (!ctx->trace) { /* eager: zeroed memory (untouched pages until written), all bits 0 is 0 in every dtype */
        kn_tensor *t = tensor_new_zeroed(ctx, dt, ndim, shape);
        return LEAVE(ctx, t);
    }
    return LEAVE(ctx, kn_full(ctx, dt, ndim, shape, 0.0));
}

kn_tensor *kn_ones(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape)
{
    ENTER(ctx, "kn_ones");
    return LEAVE(ctx, kn_full(ctx, dt, ndim, shape, 1.0));
}

kn_tensor *kn_arange(kn_ctx *ctx, kn_dtype dt, double start, double end, double step)
{
    ENTER(ctx, "kn_arange");
    if (step == 0 || step != step || start != start || end != end)
        return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "step must be nonzero and bounds finite (start %g, end %g, step %g)",
                                 start, end, step));
    if ((end - start) / step < 0)
        return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "end %g is not reachable from start %g with step %g", end, start, step));
    double count = ceil((end - start) / step);
    if (count > 9e15) return LEAVE(ctx, kn_err(ctx, KN_ENOMEM, "%g elements is too many", count));
    int64_t n = (int64_t)count;
    size_t bytes;
    if (!tensor_check_size(ctx, dt, 1, &n, &bytes)) return LEAVE(ctx, NULL);
    kn_tensor *i = p_iota(ctx, KN_F64, 1, &n, 0);
    kn_tensor *v = binc(ctx, OP_ADD, binc(ctx, OP_MUL, i, step), start);
    return LEAVE(ctx, p_cast(ctx, v, dt));
}

static kn_tensor *random_like(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape)
{
    size_t bytes;
    if (!tensor_check_size(ctx, dt, ndim, shape, &bytes)) return NULL;
    if (!dt_is_float(dt)) return kn_err(ctx, KN_EDTYPE, "random values need a float dtype, got %s", kn_dtype_name(dt));
    return p_rand(ctx, dt, ndim, shape);
}

kn_tensor *kn_rand(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape)
{
    ENTER(ctx, "kn_rand");
    return LEAVE(ctx, random_like(ctx, dt, ndim, shape));
}

/* Box-Muller: sqrt(-2 log(1 - u1)) * cos(2 pi u2), u1, u2 in [0, 1). */
kn_tensor *kn_randn(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape)
{
    ENTER(ctx, "kn_randn");
    kn_tensor *u1 = random_like(ctx, dt, ndim, shape), *u2 = random_like(ctx, dt, ndim, shape);
    if (!u1 || !u2) return LEAVE(ctx, NULL);
    kn_tensor *one_minus = bin(ctx, OP_SUB, c_scalar(ctx, dt, 1.0), u1, dt);
    kn_tensor *r = prim1(ctx, OP_SQRT, binc(ctx, OP_MUL, prim1(ctx, OP_LOG, one_minus), -2.0));
    kn_tensor *c = prim1(ctx, OP_COS, binc(ctx, OP_MUL, u2, 6.283185307179586));
    return LEAVE(ctx, prim2(ctx, OP_MUL, r, c));
}

/* ---- binary arithmetic ---- */

kn_tensor *kn_add(kn_ctx *ctx, kn_tensor *a, kn_tensor *b)
{
    ENTER(ctx, "kn_add");
    if (!both(ctx, a, b)) return LEAVE(ctx, NULL);
    return LEAVE(ctx, bin(ctx, OP_ADD, a, b, type2(a, b)));
}

kn_tensor *kn_sub(kn_ctx *ctx, kn_tensor *a, kn_tensor *b)
{
    ENTER(ctx, "kn_sub");
    if (!both(ctx, a, b)) return LEAVE(ctx, NULL);
    kn_dtype dt = type2(a, b);
    if (dt == KN_BOOL) return LEAVE(ctx, kn_err(ctx, KN_EDTYPE, "subtracting bool tensors is not supported"));
    return LEAVE(ctx, bin(ctx, OP_SUB, a, b, dt));
}

kn_tensor *kn_mul(kn_ctx *ctx, kn_tensor *a, kn_tensor *b)
{
    ENTER(ctx, "kn_mul");
    if (!both(ctx, a, b)) return LEAVE(ctx, NULL);
    kn_dtype dt = type2(a, b);
    Op op = dt == KN_BOOL ? OP_MIN : OP_MUL; /* logical and */
    return LEAVE(ctx, bin(ctx, op, a, b, dt));
}

kn_tensor *kn_div(kn_ctx *ctx, kn_tensor *a, kn_tensor *b)
{
    ENTER(ctx, "kn_div");
    if (!both(ctx, a, b)) return LEAVE(ctx, NULL);
    return LEAVE(ctx, bin(ctx, OP_DIV, a, b, float_of(type2(a, b))));
}

kn_tensor *kn_pow(kn_ctx *ctx, kn_tensor *a, kn_tensor *b)
{
    ENTER(ctx, "kn_pow");
    if (!both(ctx, a, b)) return LEAVE(ctx, NULL);
    kn_dtype dt = type2(a, b);
    if (dt == KN_BOOL) dt = KN_I64;
    return LEAVE(ctx, bin(ctx, OP_POW, a, b, dt));
}

/* x (f64) as hi + lo, each of at most 26 significant bits (Veltkamp's
 * split), so that a product of two halves is exact; |x| below 2^996. */
static void split26(kn_ctx *ctx, kn_tensor *x, kn_tensor **hi, kn_tensor **lo)
{
    kn_tensor *c = binc(ctx, OP_MUL, x, 134217729.0); /* 2^27 + 1 */
    *hi = prim2(ctx, OP_SUB, c, prim2(ctx, OP_SUB, c, x));
    *lo = prim2(ctx, OP_SUB, x, *hi);
}

/* fmod of floats a and b (broadcast, of one dtype), as C's: a - trunc(a / b)
 * * b with a's sign, exact wherever |a / b| < 2^53. On A = |a| and B = |b| in
 * f64: t = floor(A / B), and A - t B from p = t B rounded and its error e,
 * exact by Dekker's product of split halves ("A floating-point technique for
 * extending the available precision", 1971): A - p is exact (Sterbenz), and
 * so the sign of the remainder is right, which a rounded t B alone gets
 * wrong (5 fmod 0.1 in f64: t = 50, and 50 * 0.1 rounds to 5). A remainder
 * below 0 means A / B rounded up to t: it gets B back. A and B are scaled by
 * 2^-600 where B > 2^500, so that the split cannot overflow (powers of two
 * scale exactly). |a| < |b| (an infinite b among them) gives a itself, -0
 * kept; an infinite a, a zero b and NaN give NaN through the arithmetic. */
static kn_tensor *fmod_float(kn_ctx *ctx, kn_tensor *a, kn_tensor *b)
{
    kn_tensor *x = p_cast(ctx, a, KN_F64), *ax = prim1(ctx, OP_ABS, x), *ay = prim1(ctx, OP_ABS, p_cast(ctx, b, KN_F64));
    kn_tensor *s = kn_where(ctx, binc(ctx, OP_CMPLT, ay, 0x1p500), c_scalar(ctx, KN_F64, 1.0),
                            c_scalar(ctx, KN_F64, 0x1p-600));
    kn_tensor *A = prim2(ctx, OP_MUL, ax, s), *B = prim2(ctx, OP_MUL, ay, s), *th, *tl, *bh, *bl;
    kn_tensor *t = prim1(ctx, OP_FLOOR, prim2(ctx, OP_DIV, A, B)), *p = prim2(ctx, OP_MUL, t, B);
    split26(ctx, t, &th, &tl);
    split26(ctx, B, &bh, &bl);
    kn_tensor *e = prim2(ctx, OP_SUB, prim2(ctx, OP_MUL, th, bh), p);
    e = prim2(ctx, OP_ADD, prim2(ctx, OP_ADD, e, prim2(ctx, OP_MUL, th, bl)), prim2(ctx, OP_MUL, tl, bh));
    e = prim2(ctx, OP_ADD, e, prim2(ctx, OP_MUL, tl, bl));
    kn_tensor *r = prim2(ctx, OP_SUB, prim2(ctx, OP_SUB, A, p), e);
    r = prim2(ctx, OP_DIV, p_where(ctx, binc(ctx, OP_CMPLT, r, 0.0), prim2(ctx, OP_ADD, r, B), r), s);
    r = p_where(ctx, binc(ctx, OP_CMPLT, x, 0.0), prim1(ctx, OP_NEG, r), r);
    return p_cast(ctx, p_where(ctx, prim2(ctx, OP_CMPLT, ax, ay), x, r), (kn_dtype)a->dtype);
}

/* Integer b, or where an element of it is 0 an error when the graph runs
 * ("integer division by zero", as PyTorch raises): b plus a gather from a
 * table of one 0 at index (b == 0), which is out of range there. */
static kn_tensor *nonzero_divisor(kn_ctx *ctx, kn_tensor *b)
{
    int64_t n = tensor_numel(b->ndim, b->shape), one = 1;
    kn_tensor *flat = p_reshape(ctx, b, 1, &n);
    kn_tensor *at = p_cast(ctx, binc(ctx, OP_CMPEQ, flat, 0.0), KN_I64);
    kn_tensor *zero = p_gather_for(ctx, p_full(ctx, (kn_dtype)b->dtype, 1, &one, 0.0), 0, at, IX_DIVISOR);
    return p_reshape(ctx, prim2(ctx, OP_ADD, flat, zero), b->ndim, b->shape);
}

/* C's fmod: the sign of a. Integers: a - (a / b) * b, division truncating, b
 * checked for 0; a signed divisor of -1 gives 0, where INT64_MIN / -1 would
 * wrap (PyTorch traps there). */
kn_tensor *kn_fmod(kn_ctx *ctx, kn_tensor *a, kn_tensor *b)
{
    ENTER(ctx, "kn_fmod");
    if (!both(ctx, a, b)) return LEAVE(ctx, NULL);
    kn_dtype dt = type2(a, b);
    if (dt == KN_BOOL) return LEAVE(ctx, kn_err(ctx, KN_EDTYPE, "fmod of bool tensors is not supported"));
    kn_tensor *xs[2] = {a, dt_is_float(dt) ? b : nonzero_divisor(ctx, p_cast(ctx, b, dt))};
    if (!xs[1] || !broadcast_cast(ctx, 2, xs, dt)) return LEAVE(ctx, NULL);
    if (dt_is_float(dt)) return LEAVE(ctx, fmod_float(ctx, xs[0], xs[1]));
    kn_tensor *q = prim2(ctx, OP_DIV, xs[0], xs[1]);
    kn_tensor *r = prim2(ctx, OP_SUB, xs[0], prim2(ctx, OP_MUL, q, xs[1]));
    if (dt == KN_I32 || dt == KN_I64)
        r = p_where(ctx, binc(ctx, OP_CMPEQ, xs[1], -1.0), p_full(ctx, dt, r ? r->ndim : 0, r ? r->shape : NULL, 0.0), r);
    return LEAVE(ctx, r);
}

kn_tensor *kn_minimum(kn_ctx *ctx, kn_tensor *a, kn_tensor *b)
{
    ENTER(ctx, "kn_minimum");
    if (!both(ctx, a, b)) return LEAVE(ctx, NULL);
    return LEAVE(ctx, bin(ctx, OP_MIN, a, b, type2(a, b)));
}

kn_tensor *kn_maximum(kn_ctx *ctx, kn_tensor *a, kn_tensor *b)
{
    ENTER(ctx, "kn_maximum");
    if (!both(ctx, a, b)) return LEAVE(ctx, NULL);
    return LEAVE(ctx, bin(ctx, OP_MAX, a, b, type2(a, b)));
}

/* ---- unary ---- */

/* Ops like exp compute in float: integer and bool inputs become f32. */
static kn_tensor *unary_float(kn_ctx *ctx, const char *name, Op op, kn_tensor *x)
{
    ENTER(ctx, name);
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL);
    return LEAVE(ctx, prim1(ctx, op, p_cast(ctx, x, float_of((kn_dtype)x->dtype))));
}

kn_tensor *kn_exp(kn_ctx *ctx, kn_tensor *x) { return unary_float(ctx, "kn_exp", OP_EXP, x); }
kn_tensor *kn_log(kn_ctx *ctx, kn_tensor *x) { return unary_float(ctx, "kn_log", OP_LOG, x); }
kn_tensor *kn_sqrt(kn_ctx *ctx, kn_tensor *x) { return unary_float(ctx, "kn_sqrt", OP_SQRT, x); }
kn_tensor *kn_sin(kn_ctx *ctx, kn_tensor *x) { return unary_float(ctx, "kn_sin", OP_SIN, x); }
kn_tensor *kn_cos(kn_ctx *ctx, kn_tensor *x) { return unary_float(ctx, "kn_cos", OP_COS, x); }
kn_tensor *kn_tanh(kn_ctx *ctx, kn_tensor *x) { return unary_float(ctx, "kn_tanh", OP_TANH, x); }
kn_tensor *kn_erf(kn_ctx *ctx, kn_tensor *x) { return unary_float(ctx, "kn_erf", OP_ERF, x); }
kn_tensor *kn_reciprocal(kn_ctx *ctx, kn_tensor *x) { return unary_float(ctx, "kn_reciprocal", OP_RECIP, x); }

kn_tensor *kn_rsqrt(kn_ctx *ctx, kn_tensor *x)
{
    ENTER(ctx, "kn_rsqrt");
    return LEAVE(ctx, prim1(ctx, OP_RECIP, kn_sqrt(ctx, x)));
}

kn_tensor *kn_neg(kn_ctx *ctx, kn_tensor *x)
{
    ENTER(ctx, "kn_neg");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL);
    if (x->dtype == KN_BOOL) return LEAVE(ctx, kn_err(ctx, KN_EDTYPE, "negation of a bool tensor is not supported"));
    return LEAVE(ctx, prim1(ctx, OP_NEG, x));
}

kn_tensor *kn_abs(kn_ctx *ctx, kn_tensor *x)
{
    ENTER(ctx, "kn_abs");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL);
    return LEAVE(ctx, x->dtype == KN_BOOL ? x : prim1(ctx, OP_ABS, x));
}

/* sign = (0 < x) - (x < 0), in x's dtype; NaN stays NaN */
kn_tensor *kn_sign(kn_ctx *ctx, kn_tensor *x)
{
    ENTER(ctx, "kn_sign");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL);
    kn_dtype dt = (kn_dtype)x->dtype;
    if (dt == KN_BOOL) return LEAVE(ctx, x);
    kn_tensor *zero = c_scalar(ctx, dt, 0.0);
    kn_tensor *pos = p_cast(ctx, bin(ctx, OP_CMPLT, zero, x, dt), dt);
    kn_tensor *neg = p_cast(ctx, bin(ctx, OP_CMPLT, x, zero, dt), dt);
    kn_tensor *s = prim2(ctx, OP_SUB, pos, neg);
    if (dt_is_float(dt)) s = p_where(ctx, prim2(ctx, OP_CMPEQ, x, x), s, x); /* NaN stays NaN */
    return LEAVE(ctx, s);
}

kn_tensor *kn_square(kn_ctx *ctx, kn_tensor *x)
{
    ENTER(ctx, "kn_square");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL);
    if (x->dtype == KN_BOOL) x = p_cast(ctx, x, KN_I64);
    return LEAVE(ctx, prim2(ctx, OP_MUL, x, x));
}

kn_tensor *kn_floor(kn_ctx *ctx, kn_tensor *x)
{
    ENTER(ctx, "kn_floor");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL);
    return LEAVE(ctx, dt_is_float((kn_dtype)x->dtype) ? prim1(ctx, OP_FLOOR, x) : x);
}

kn_tensor *kn_ceil(kn_ctx *ctx, kn_tensor *x)
{
    ENTER(ctx, "kn_ceil");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL);
    if (!dt_is_float((kn_dtype)x->dtype)) return LEAVE(ctx, x);
    return LEAVE(ctx, prim1(ctx, OP_NEG, prim1(ctx, OP_FLOOR, prim1(ctx, OP_NEG, x))));
}

/* Half to even: r = floor(x + 1/2); on a tie with r odd, r - 1. Values at
 * or beyond 2^mantissa are integers already and pass through. */
kn_tensor *kn_round(kn_ctx *ctx, kn_tensor *x)
{
    ENTER(ctx, "kn_round");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL);
    kn_dtype dt = (kn_dtype)x->dtype;
    if (!dt_is_float(dt)) return LEAVE(ctx, x);
    double big = dt == KN_F64 ? 4503599627370496.0 : dt == KN_F32 ? 8388608.0 : 256.0;
    kn_tensor *r = prim1(ctx, OP_FLOOR, binc(ctx, OP_ADD, x, 0.5));
    kn_tensor *tie = binc(ctx, OP_CMPEQ, prim2(ctx, OP_SUB, r, x), 0.5);
    kn_tensor *half = prim1(ctx, OP_FLOOR, binc(ctx, OP_MUL, r, 0.5));
    kn_tensor *odd = kn_ne(ctx, binc(ctx, OP_MUL, half, 2.0), r);
    kn_tensor *fix = p_where(ctx, kn_logical_and(ctx, tie, odd), binc(ctx, OP_SUB, r, 1.0), r);
    kn_tensor *small = bin(ctx, OP_CMPLT, prim1(ctx, OP_ABS, x), c_scalar(ctx, dt, big), dt);
    return LEAVE(ctx, p_where(ctx, small, fix, x));
}

/* clamp's backward, torch's clamp_backward: g where lo <= x <= hi, bounds
 * included, else 0, NaN too (the one derived from the forward's max and
 * min would give g/2 at a bound and g at NaN). args: the bits of lo and hi,
 * each +-inf where absent. */
static kn_tensor *clamp_vjp(kn_ctx *ctx, kn_tensor *g, kn_tensor *const *saved, const int64_t *args, int which)
{
    (void)which;
    kn_tensor *x = saved[0];
    double lo, hi;
    memcpy(&lo, &args[0], sizeof lo);
    memcpy(&hi, &args[1], sizeof hi);
    kn_dtype dt = (kn_dtype)x->dtype;
    kn_tensor *from_lo = prim2(ctx, OP_MAX, bin(ctx, OP_CMPLT, c_scalar(ctx, dt, lo), x, dt),
                               binc(ctx, OP_CMPEQ, x, lo)); /* lo <= x */
    kn_tensor *to_hi = prim2(ctx, OP_MAX, binc(ctx, OP_CMPLT, x, hi), binc(ctx, OP_CMPEQ, x, hi)); /* x <= hi */
    return p_where(ctx, prim2(ctx, OP_MIN, from_lo, to_hi), g, p_full(ctx, dt, g->ndim, g->shape, 0.0));
}

/* clamp = min(max(x, lo), hi), as torch: hi wins where lo > hi, NaN stays NaN. */
kn_tensor *kn_clamp(kn_ctx *ctx, kn_tensor *x, double lo, double hi)
{
    ENTER(ctx, "kn_clamp");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL);
    if (lo != lo || hi != hi) return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "bounds must not be NaN"));
    kn_dtype dt = (kn_dtype)x->dtype;
    int integral = (isinf(lo) || lo == floor(lo)) && (isinf(hi) || hi == floor(hi));
    if (!dt_is_float(dt) && !integral) dt = KN_F32;
    if (dt == KN_BOOL) dt = KN_I64;
    x = p_cast(ctx, x, dt);
    int has_lo = !isinf(lo) || lo > 0, has_hi = !isinf(hi) || hi < 0;
    int custom = (has_lo || has_hi) && autodiff_custom_wanted(ctx, x);
    int was = custom ? kn_set_grad_enabled(ctx, 0) : 0;
    kn_tensor *y = x;
    if (has_lo) y = binc(ctx, OP_MAX, y, lo);
    if (has_hi) y = binc(ctx, OP_MIN, y, hi);
    if (!custom) return LEAVE(ctx, y);
    kn_set_grad_enabled(ctx, was);
    int64_t args[2];
    memcpy(&args[0], &lo, sizeof lo);
    memcpy(&args[1], &hi, sizeof hi);
    return LEAVE(ctx, autodiff_custom(ctx, y, 1, &x, 1, &x, args, 2, clamp_vjp));
}

/* ---- comparisons and logic (bool results) ---- */

static kn_tensor *compare(kn_ctx *ctx, const char *name, Op op, kn_tensor *a, kn_tensor *b, int swap, int not)
{
    ENTER(ctx, name);
    if (!both(ctx, a, b)) return LEAVE(ctx, NULL);
    kn_dtype dt = type2(a, b);
    kn_tensor *r = swap ? bin(ctx, op, b, a, dt) : bin(ctx, op, a, b, dt);
    if (not) r = binc(ctx, OP_CMPEQ, r, 0.0);
    return LEAVE(ctx, r);
}

kn_tensor *kn_eq(kn_ctx *ctx, kn_tensor *a, kn_tensor *b) { return compare(ctx, "kn_eq", OP_CMPEQ, a, b, 0, 0); }
kn_tensor *kn_ne(kn_ctx *ctx, kn_tensor *a, kn_tensor *b) { return compare(ctx, "kn_ne", OP_CMPEQ, a, b, 0, 1); }
kn_tensor *kn_lt(kn_ctx *ctx, kn_tensor *a, kn_tensor *b) { return compare(ctx, "kn_lt", OP_CMPLT, a, b, 0, 0); }
kn_tensor *kn_gt(kn_ctx *ctx, kn_tensor *a, kn_tensor *b) { return compare(ctx, "kn_gt", OP_CMPLT, a, b, 1, 0); }

/* a <= b is (a < b) or (a == b): with NaN both are false, as IEEE wants */
static kn_tensor *less_equal(kn_ctx *ctx, const char *name, kn_tensor *a, kn_tensor *b)
{
    ENTER(ctx, name);
    if (!both(ctx, a, b)) return LEAVE(ctx, NULL);
    kn_dtype dt = type2(a, b);
    return LEAVE(ctx, prim2(ctx, OP_MAX, bin(ctx, OP_CMPLT, a, b, dt), bin(ctx, OP_CMPEQ, a, b, dt)));
}

kn_tensor *kn_le(kn_ctx *ctx, kn_tensor *a, kn_tensor *b) { return less_equal(ctx, "kn_le", a, b); }
kn_tensor *kn_ge(kn_ctx *ctx, kn_tensor *a, kn_tensor *b) { return less_equal(ctx, "kn_ge", b, a); }

/* x != 0 as bool */
kn_tensor *truth(kn_ctx *ctx, kn_tensor *x)
{
    if (!x) return NULL;
    if (x->dtype == KN_BOOL) return x;
    return binc(ctx, OP_CMPEQ, binc(ctx, OP_CMPEQ, x, 0.0), 0.0);
}

static kn_tensor *logical(kn_ctx *ctx, const char *name, Op op, kn_tensor *a, kn_tensor *b, int not)
{
    ENTER(ctx, name);
    if (!both(ctx, a, b)) return LEAVE(ctx, NULL);
    kn_tensor *r = bin(ctx, op, truth(ctx, a), truth(ctx, b), KN_BOOL);
    if (not) r = binc(ctx, OP_CMPEQ, r, 0.0);
    return LEAVE(ctx, r);
}

kn_tensor *kn_logical_and(kn_ctx *ctx, kn_tensor *a, kn_tensor *b) { return logical(ctx, "kn_logical_and", OP_MIN, a, b, 0); }
kn_tensor *kn_logical_or(kn_ctx *ctx, kn_tensor *a, kn_tensor *b) { return logical(ctx, "kn_logical_or", OP_MAX, a, b, 0); }
kn_tensor *kn_logical_xor(kn_ctx *ctx, kn_tensor *a, kn_tensor *b) { return logical(ctx, "kn_logical_xor", OP_CMPEQ, a, b, 1); }

kn_tensor *kn_logical_not(kn_ctx *ctx, kn_tensor *x)
{
    ENTER(ctx, "kn_logical_not");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL);
    return LEAVE(ctx, binc(ctx, OP_CMPEQ, truth(ctx, x), 0.0));
}

kn_tensor *kn_where(kn_ctx *ctx, kn_tensor *cond, kn_tensor *a, kn_tensor *b)
{
    ENTER(ctx, "kn_where");
    if (!tensor_check(ctx, cond, "cond") || !both(ctx, a, b)) return LEAVE(ctx, NULL);
    if (cond->dtype != KN_BOOL && cond->dtype != KN_U8)
        return LEAVE(ctx, kn_err(ctx, KN_EDTYPE, "operand 'cond' must be bool, got %s", kn_dtype_name((kn_dtype)cond->dtype)));
    kn_tensor *xs[3] = {truth(ctx, cond), a, b};
    int64_t shape[KN_MAX_DIMS];
    int nd = broadcast_shapes(ctx, 3, xs, shape);
    if (nd < 0) return LEAVE(ctx, NULL);
    kn_dtype dt = type2(a, b);
    kn_tensor *c = broadcast_to(ctx, xs[0], nd, shape);
    a = broadcast_to(ctx, p_cast(ctx, a, dt), nd, shape);
    b = broadcast_to(ctx, p_cast(ctx, b, dt), nd, shape);
    return LEAVE(ctx, p_where(ctx, c, a, b));
}

kn_tensor *kn_masked_fill(kn_ctx *ctx, kn_tensor *x, kn_tensor *mask, double value)
{
    ENTER(ctx, "kn_masked_fill");
    if (!tensor_check(ctx, x, "x") || !tensor_check(ctx, mask, "mask")) return LEAVE(ctx, NULL);
    if (mask->dtype != KN_BOOL)
        return LEAVE(ctx, kn_err(ctx, KN_EDTYPE, "operand 'mask' must be bool, got %s", kn_dtype_name((kn_dtype)mask->dtype)));
    kn_tensor *xs[2] = {x, mask};
    int64_t shape[KN_MAX_DIMS];
    int nd = broadcast_shapes(ctx, 2, xs, shape);
    if (nd < 0) return LEAVE(ctx, NULL);
    if (nd != x->ndim || memcmp(shape, x->shape, (size_t)nd * sizeof *shape) != 0) {
        char b0[96], b1[96];
        return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'mask' %s must broadcast to x %s without growing it",
                                 fmt_shape(b0, sizeof b0, mask), fmt_shape(b1, sizeof b1, x)));
    }
    kn_tensor *v = broadcast_to(ctx, c_scalar(ctx, (kn_dtype)x->dtype, value), nd, shape);
    return LEAVE(ctx, p_where(ctx, broadcast_to(ctx, mask, nd, shape), v, x));
}

kn_tensor *kn_to(kn_ctx *ctx, kn_tensor *x, kn_dtype dt)
{
    ENTER(ctx, "kn_to");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL);
    if ((unsigned)dt >= KN_NDTYPES) return LEAVE(ctx, kn_err(ctx, KN_EDTYPE, "dtype code %d is not a kn_dtype", (int)dt));
    return LEAVE(ctx, p_cast(ctx, x, dt));
}
