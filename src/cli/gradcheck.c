/*
 * gradcheck.c — `kiln gradcheck`: every differentiable primitive and
 * composite against central finite differences in f64, as
 * torch.autograd.gradcheck does.
 *
 * A check runs a few cases. A case makes its inputs as f64 leaves that
 * require grad, computes y = op(inputs) and the loss sum(y * w) for a fixed
 * random cotangent w, and runs kn_backward. The numeric gradient of the same
 * loss comes from perturbing each input element in place by +-eps and
 * running the forward again with grad off. They agree when
 *
 *     |analytic - numeric| <= atol + rtol * |numeric|
 *
 * with torch's eps 1e-6, atol 1e-5, rtol 1e-3.
 *
 * Inputs come from the case's own generator, never from the context, so the
 * context can be reseeded before every forward (dropout then draws one mask
 * each time). They stay away from kinks, ties and domain edges (Dist below).
 * Each family has a non-contiguous case (in_t: a transposed view of a leaf,
 * so the gradient must land on the base) and a broadcast case.
 *
 * Coverage is checked, not trusted: every differentiable primitive of ops.h
 * needs a "prim.NAME" check; every composite has one, or says why it has
 * none, in the GRAD column of its row in composite.h.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core.h"
#include "gradcheck.h"

#define EPS 1e-6
#define ATOL 1e-5
#define RTOL 1e-3
#define SCALAR 1.5     /* the Python number of the scalar cases */
#define FWD_SEED 1234  /* the context's seed before every forward */
#define GAP 0.01       /* D_KINK values keep this far from kinks and from each other */
#define MAX_LEAVES GRADCHECK_MAX_LEAVES

typedef enum {
    D_NORMAL, /* N(0, 1) */
    D_KINK,   /* 2.5 N(0, 1), GAP away from 0, +-1, +-3, SCALAR and every other D_KINK value of the
                 case: max, min, abs, relu, clamp, pooling and hardswish see no tie or kink */
    D_POS,    /* U[0.5, 2): log, sqrt, reciprocal, a pow base, a divisor */
    D_PROB,   /* U[0.1, 0.9): probabilities */
    D_FRAC,   /* an integer in [-3, 3] plus U[0.1, 0.4): floor, ceil, round and fmod jump far away */
    D_SMALL   /* 1e-3 N(0, 1): through f32 and back, the rounding stays far below the tolerance */
} Dist;

typedef struct {
    kn_ctx *ctx;
    uint64_t rng;                /* splitmix64: input values and the cotangent */
    int n, k;                    /* leaves made; leaves handed out in this forward */
    kn_tensor *leaf[MAX_LEAVES]; /* contiguous f64, requiring grad, kept */
    uint8_t dist[MAX_LEAVES], transposed[MAX_LEAVES];
} Case;

typedef kn_tensor *(*Unary)(kn_ctx *, kn_tensor *);
typedef kn_tensor *(*Binary)(kn_ctx *, kn_tensor *, kn_tensor *);
typedef kn_tensor *(*Body)(kn_ctx *, Case *, int v); /* case v of a check */

/* One check. Unary and binary ops (composites through un or bin, primitives
 * through op) get the standard cases of their family, dist giving their
 * inputs; any other op has a body with ncases cases. */
typedef struct {
    const char *name;
    Unary un;
    Binary bin;
    Op op;
    Body body;
    int ncases;
    uint8_t dist[2];
    uint8_t zero; /* the gradient must be exactly 0 (floor, sign, ...) */
    const char *none; /* why there is no gradient to check (integer results, ...); NULL: check it */
} Check;

/* ---- inputs ---- */

static uint64_t next64(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { return (double)(next64(s) >> 11) / 9007199254740992.0; }

static double normal(uint64_t *s) /* Box-Muller */
{
    double u = uniform(s), v = uniform(s);
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

/* element j of t in row-major order, whatever its strides */
static double elem(const kn_tensor *t, int64_t j)
{
    int64_t off = t->offset;
    for (int d = t->ndim; d-- > 0;) {
        off += j % t->shape[d] * t->stride[d];
        j /= t->shape[d];
    }
    return dt_load((kn_dtype)t->dtype, tensor_ptr(t, off));
}

/* x within GAP of a kink, of an earlier D_KINK leaf's value, or of the
 * first n values of t */
static int near_kink(const Case *c, double x, const kn_tensor *t, int64_t n)
{
    static const double kinks[] = {0, 1, -1, 3, -3, SCALAR};
    for (size_t i = 0; i < sizeof kinks / sizeof *kinks; i++)
        if (fabs(x - kinks[i]) < GAP) return 1;
    for (int i = 0; i < c->n; i++)
        for (int64_t j = 0; c->dist[i] == D_KINK && j < kn_numel(c->leaf[i]); j++)
            if (fabs(x - elem(c->leaf[i], j)) < GAP) return 1;
    for (int64_t j = 0; j < n; j++)
        if (fabs(x - elem(t, j)) < GAP) return 1;
    return 0;
}

static double draw(Case *c, Dist d, const kn_tensor *t, int64_t j)
{
    double x;
    switch (d) {
    case D_KINK:
        for (x = 2.5 * normal(&c->rng); near_kink(c, x, t, j);) x += 3 * GAP;
        return x;
    case D_POS: return 0.5 + 1.5 * uniform(&c->rng);
    case D_PROB: return 0.1 + 0.8 * uniform(&c->rng);
    case D_FRAC: return floor(7 * uniform(&c->rng)) - 3 + 0.1 + 0.3 * uniform(&c->rng);
    case D_SMALL: return 1e-3 * normal(&c->rng);
    default: return normal(&c->rng);
    }
}

/* The next input of the case. The first forward makes the leaf (shape from
 * the dims in ap); later forwards hand out the same leaf, so the inputs of a
 * body must be taken in a fixed order. transposed: a view of the given
 * shape onto a leaf whose last two dims are swapped. */
static kn_tensor *inputv(Case *c, Dist d, int transposed, int ndim, va_list ap)
{
    kn_ctx *ctx = c->ctx;
    if (c->k == c->n) {
        int64_t shape[KN_MAX_DIMS];
        KN_ASSERT(c->n < MAX_LEAVES && ndim >= 1 && ndim <= KN_MAX_DIMS && (!transposed || ndim >= 2));
        for (int i = 0; i < ndim; i++) shape[i] = va_arg(ap, int);
        if (transposed) {
            int64_t s = shape[ndim - 1];
            shape[ndim - 1] = shape[ndim - 2];
            shape[ndim - 2] = s;
        }
        kn_tensor *t = kn_zeros(ctx, KN_F64, ndim, shape);
        if (!t) return NULL;
        for (int64_t j = 0; j < kn_numel(t); j++) dt_store(KN_F64, tensor_ptr(t, j), draw(c, d, t, j));
        kn_keep(ctx, t);
        if (!kn_requires_grad(ctx, t, 1)) return NULL;
        c->leaf[c->n] = t;
        c->dist[c->n] = (uint8_t)d;
        c->transposed[c->n++] = (uint8_t)transposed;
    }
    kn_tensor *t = c->leaf[c->k++];
    return transposed ? kn_transpose(ctx, t, -2, -1) : t;
}

static kn_tensor *in(Case *c, Dist d, int ndim, ...) /* contiguous */
{
    va_list ap;
    va_start(ap, ndim);
    kn_tensor *t = inputv(c, d, 0, ndim, ap);
    va_end(ap);
    return t;
}

static kn_tensor *in_t(Case *c, Dist d, int ndim, ...) /* a transposed view */
{
    va_list ap;
    va_start(ap, ndim);
    kn_tensor *t = inputv(c, d, 1, ndim, ap);
    va_end(ap);
    return t;
}

static kn_tensor *input(Case *c, Dist d, int transposed, int ndim, ...) /* either */
{
    va_list ap;
    va_start(ap, ndim);
    kn_tensor *t = inputv(c, d, transposed, ndim, ap);
    va_end(ap);
    return t;
}

/* Inputs that need no gradient: indices, masks, constants; the same in every forward. */

static kn_tensor *ints(kn_ctx *ctx, int ndim, const int64_t *shape, const int64_t *v)
{
    return kn_tensor_from(ctx, KN_I64, ndim, shape, v);
}

static kn_tensor *mask(kn_ctx *ctx, int ndim, const int64_t *shape) /* every third element false */
{
    uint8_t v[64];
    int64_t n = tensor_numel(ndim, shape);
    KN_ASSERT(n <= 64);
    for (int64_t j = 0; j < n; j++) v[j] = (j * 5 + 2) % 3 != 0;
    return kn_tensor_from(ctx, KN_BOOL, ndim, shape, v);
}

static kn_tensor *fixed(kn_ctx *ctx, int ndim, const int64_t *shape, double lo, double hi) /* in [lo, hi) */
{
    double v[64];
    int64_t n = tensor_numel(ndim, shape);
    KN_ASSERT(n <= 64);
    for (int64_t j = 0; j < n; j++) v[j] = lo + (hi - lo) * fmod(0.5 + 0.6180339887 * (double)j, 1.0);
    return kn_tensor_from(ctx, KN_F64, ndim, shape, v);
}

static const int64_t S4[1] = {4}, S5[1] = {5}, S34[2] = {3, 4}, S35[2] = {3, 5};

/* ---- primitives with parameters ---- */

static kn_tensor *cast_to(kn_ctx *ctx, kn_tensor *x, kn_dtype dt) /* p_cast skips a cast to x's own dtype */
{
    Params p;
    memset(&p, 0, sizeof p);
    p.dtype = (uint8_t)dt;
    return prim(ctx, OP_CAST, &x, &p);
}

/* a binary primitive on operands broadcast by expand, as composites do */
static kn_tensor *prim_bin(kn_ctx *ctx, Op op, kn_tensor *a, kn_tensor *b)
{
    kn_tensor *xs[2] = {a, b};
    int64_t shape[KN_MAX_DIMS];
    if (!a || !b) return NULL;
    int nd = broadcast_shapes(ctx, 2, xs, shape);
    return nd < 0 ? NULL : prim2(ctx, op, broadcast_to(ctx, a, nd, shape), broadcast_to(ctx, b, nd, shape));
}

static kn_tensor *tp_where(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *a = in(c, D_NORMAL, 2, 3, 4);
    kn_tensor *b = v == 0 ? in_t(c, D_NORMAL, 2, 3, 4) : broadcast_to(ctx, in(c, D_NORMAL, 1, 4), 2, S34);
    return p_where(ctx, mask(ctx, 2, S34), a, b);
}

static kn_tensor *tp_cast(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return cast_to(ctx, in_t(c, D_NORMAL, 2, 3, 4), KN_F64); /* a copy */
    return cast_to(ctx, cast_to(ctx, in(c, D_SMALL, 2, 3, 4), KN_F32), KN_F64);
}

static kn_tensor *reduce_case(Case *c, int v, Op op, Dist d)
{
    kn_ctx *ctx = c->ctx;
    if (v == 0) return p_reduce(ctx, op, in(c, d, 3, 2, 3, 4), (int[]){1}, 1);
    if (v == 1) return p_reduce(ctx, op, in_t(c, d, 3, 2, 3, 4), (int[]){0, 2}, 2);
    return p_reduce(ctx, op, in(c, d, 2, 3, 4), (int[]){0, 1}, 2); /* to one element */
}

static kn_tensor *tp_sum(kn_ctx *ctx, Case *c, int v) { (void)ctx; return reduce_case(c, v, OP_SUM, D_NORMAL); }
static kn_tensor *tp_reduce_max(kn_ctx *ctx, Case *c, int v) { (void)ctx; return reduce_case(c, v, OP_RMAX, D_KINK); }

static kn_tensor *tp_reshape(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return p_reshape(ctx, in(c, D_NORMAL, 2, 3, 4), 3, (int64_t[]){2, 3, 2});
    return p_reshape(ctx, in_t(c, D_NORMAL, 2, 3, 4), 2, (int64_t[]){2, 6}); /* a copy */
}

static kn_tensor *tp_permute(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *x = input(c, D_NORMAL, v != 0, 3, 2, 3, 4);
    return p_permute(ctx, x, (int[]){2, 0, 1});
}

static kn_tensor *tp_expand(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return p_expand(ctx, in(c, D_NORMAL, 2, 3, 1), 2, S34);
    return p_expand(ctx, in_t(c, D_NORMAL, 3, 1, 3, 1), 3, (int64_t[]){2, 3, 4});
}

/* steps 1, 2, -2 and -1 (a reversal, on a transposed view) */
static kn_tensor *tp_slice(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return p_slice(ctx, in(c, D_NORMAL, 2, 4, 5), 1, 1, 3, 1);
    if (v == 1) return p_slice(ctx, in(c, D_NORMAL, 2, 4, 5), 1, 0, 3, 2);
    if (v == 2) return p_slice(ctx, in(c, D_NORMAL, 2, 4, 5), 1, 4, 3, -2);
    return p_slice(ctx, in_t(c, D_NORMAL, 2, 4, 5), 0, 3, 4, -1);
}

static kn_tensor *tp_pad(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *x = input(c, D_NORMAL, v != 0, 2, 3, 4);
    return p_pad(ctx, x, (int64_t[]){1, 0}, (int64_t[]){0, 2}, 0.5);
}

/* repeated indices (the gradient accumulates); an index smaller than x */
static kn_tensor *tp_gather(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0)
        return p_gather(ctx, in(c, D_NORMAL, 2, 3, 4), 1,
                        ints(ctx, 2, (int64_t[]){3, 3}, (int64_t[]){0, 3, 3, 1, 1, 2, 2, 0, 1}));
    return p_gather(ctx, in_t(c, D_NORMAL, 2, 3, 4), 0, ints(ctx, 2, (int64_t[]){2, 3}, (int64_t[]){2, 0, 1, 1, 0, 2}));
}

/* src of the index's shape, then larger than it */
static kn_tensor *tp_scatter_add(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *x = in(c, D_NORMAL, 2, 3, 4);
    kn_tensor *src = v == 0 ? in(c, D_NORMAL, 2, 3, 2) : in_t(c, D_NORMAL, 2, 3, 3);
    return p_scatter_add(ctx, x, 1, ints(ctx, 2, (int64_t[]){3, 2}, (int64_t[]){0, 3, 1, 1, 2, 0}), src);
}

static kn_tensor *tp_dot(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) {
        kn_tensor *a = in(c, D_NORMAL, 3, 2, 3, 4), *b = in(c, D_NORMAL, 3, 2, 4, 5);
        return p_dot(ctx, a, b);
    }
    kn_tensor *a = in_t(c, D_NORMAL, 2, 3, 4), *b = in_t(c, D_NORMAL, 2, 4, 2);
    return p_dot(ctx, a, b);
}

/* ---- composites: linear algebra, convolution, pooling ---- */

static kn_tensor *t_linear(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) {
        kn_tensor *x = in(c, D_NORMAL, 2, 3, 4), *w = in(c, D_NORMAL, 2, 5, 4), *b = in(c, D_NORMAL, 1, 5);
        return kn_linear(ctx, x, w, b);
    }
    if (v == 1) {
        kn_tensor *x = in_t(c, D_NORMAL, 2, 3, 4), *w = in_t(c, D_NORMAL, 2, 5, 4);
        return kn_linear(ctx, x, w, NULL);
    }
    kn_tensor *x = in(c, D_NORMAL, 3, 2, 3, 4), *w = in(c, D_NORMAL, 2, 2, 4), *b = in(c, D_NORMAL, 1, 2);
    return kn_linear(ctx, x, w, b);
}

/* matrix, batch broadcast, vector-matrix, matrix-vector, vector-vector */
static kn_tensor *t_matmul(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *a, *b;
    switch (v) {
    case 0: a = in(c, D_NORMAL, 2, 3, 4), b = in_t(c, D_NORMAL, 2, 4, 5); break;
    case 1: a = in(c, D_NORMAL, 3, 2, 3, 4), b = in(c, D_NORMAL, 2, 4, 2); break;
    case 2: a = in(c, D_NORMAL, 1, 4), b = in(c, D_NORMAL, 3, 2, 4, 3); break;
    case 3: a = in_t(c, D_NORMAL, 2, 3, 4), b = in(c, D_NORMAL, 1, 4); break;
    default: a = in(c, D_NORMAL, 1, 4), b = in(c, D_NORMAL, 1, 4); break;
    }
    return kn_matmul(ctx, a, b);
}

static kn_tensor *t_bmm(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *a = in(c, D_NORMAL, 3, 2, 3, 4);
    kn_tensor *b = input(c, D_NORMAL, v != 0, 3, 2, 4, 5);
    return kn_bmm(ctx, a, b);
}

static kn_tensor *t_conv1d(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) {
        kn_tensor *x = in(c, D_NORMAL, 3, 2, 3, 6), *w = in(c, D_NORMAL, 3, 4, 3, 3), *b = in(c, D_NORMAL, 1, 4);
        return kn_conv1d(ctx, x, w, b, &(kn_conv_opts){.padding = {1}});
    }
    kn_tensor *x = in_t(c, D_NORMAL, 3, 1, 4, 7), *w = in(c, D_NORMAL, 3, 2, 2, 3);
    return kn_conv1d(ctx, x, w, NULL, &(kn_conv_opts){.stride = {2}, .padding = {2}, .dilation = {2}, .groups = 2});
}

static kn_tensor *t_conv2d(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) {
        kn_tensor *x = in(c, D_NORMAL, 4, 1, 2, 4, 4), *w = in(c, D_NORMAL, 4, 3, 2, 3, 3), *b = in(c, D_NORMAL, 1, 3);
        return kn_conv2d(ctx, x, w, b, &(kn_conv_opts){.padding = {1, 1}});
    }
    if (v == 1) { /* groups, stride, a transposed input */
        kn_tensor *x = in_t(c, D_NORMAL, 4, 1, 4, 5, 5), *w = in(c, D_NORMAL, 4, 4, 2, 3, 3);
        kn_tensor *b = in(c, D_NORMAL, 1, 4);
        return kn_conv2d(ctx, x, w, b, &(kn_conv_opts){.stride = {2, 2}, .padding = {1, 1}, .groups = 2});
    }
    if (v == 2) {
        kn_tensor *x = in(c, D_NORMAL, 4, 2, 1, 5, 5), *w = in(c, D_NORMAL, 4, 2, 1, 2, 2);
        return kn_conv2d(ctx, x, w, NULL, &(kn_conv_opts){.stride = {1, 2}, .padding = {0, 1}, .dilation = {2, 2}});
    }
    if (v == 3) { /* stride 1 (the hand-written backward): groups, dilation, padding beyond dilation * (k - 1)
                   * in H (its transposed convolution crops) and none in W */
        kn_tensor *x = in_t(c, D_NORMAL, 4, 1, 4, 5, 6), *w = in(c, D_NORMAL, 4, 4, 2, 2, 3), *b = in(c, D_NORMAL, 1, 4);
        return kn_conv2d(ctx, x, w, b, &(kn_conv_opts){.padding = {3, 0}, .dilation = {2, 1}, .groups = 2});
    }
    if (v == 4) { /* stride 3 by 2 (x's gradient by phases), dilation coprime to the stride in H */
        kn_tensor *x = in_t(c, D_NORMAL, 4, 2, 2, 8, 7), *w = in(c, D_NORMAL, 4, 2, 2, 3, 2);
        return kn_conv2d(ctx, x, w, NULL, &(kn_conv_opts){.stride = {3, 2}, .padding = {2, 1}, .dilation = {2, 3}});
    }
    /* a padded 1x1 at stride 2: phases no tap reaches */
    kn_tensor *x = in(c, D_NORMAL, 4, 2, 2, 5, 4), *w = in(c, D_NORMAL, 4, 3, 2, 1, 1), *b = in(c, D_NORMAL, 1, 3);
    return kn_conv2d(ctx, x, w, b, &(kn_conv_opts){.stride = {2, 2}, .padding = {1, 0}});
}

static kn_tensor *t_conv_transpose2d(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) {
        kn_tensor *x = in(c, D_NORMAL, 4, 1, 2, 3, 3), *w = in(c, D_NORMAL, 4, 2, 3, 2, 2), *b = in(c, D_NORMAL, 1, 3);
        return kn_conv_transpose2d(ctx, x, w, b, &(kn_conv_opts){.stride = {2, 2}});
    }
    if (v == 1) {
        kn_tensor *x = in_t(c, D_NORMAL, 4, 1, 2, 3, 3), *w = in(c, D_NORMAL, 4, 2, 1, 3, 3);
        return kn_conv_transpose2d(ctx, x, w, NULL, &(kn_conv_opts){.stride = {2, 2}, .padding = {1, 1},
                                                                    .output_padding = {1, 1}, .groups = 2});
    }
    kn_tensor *x = in(c, D_NORMAL, 4, 1, 1, 3, 3), *w = in(c, D_NORMAL, 4, 1, 2, 2, 2);
    return kn_conv_transpose2d(ctx, x, w, NULL, &(kn_conv_opts){.padding = {1, 1}, .dilation = {2, 2}});
}

static kn_tensor *t_max_pool2d(kn_ctx *ctx, Case *c, int v)
{
    switch (v) {
    case 0: return kn_max_pool2d(ctx, in(c, D_KINK, 4, 1, 2, 4, 4), &(kn_pool_opts){.kernel = {2, 2}});
    case 1: /* overlapping windows, padding */
        return kn_max_pool2d(ctx, in_t(c, D_KINK, 4, 1, 2, 5, 5),
                             &(kn_pool_opts){.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}});
    case 2:
        return kn_max_pool2d(ctx, in(c, D_KINK, 4, 1, 1, 5, 5),
                             &(kn_pool_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = 1});
    default:
        return kn_max_pool2d(ctx, in(c, D_KINK, 4, 1, 1, 5, 5),
                             &(kn_pool_opts){.kernel = {2, 2}, .stride = {1, 1}, .dilation = {2, 2}});
    }
}

static kn_tensor *t_avg_pool2d(kn_ctx *ctx, Case *c, int v)
{
    switch (v) {
    case 0: return kn_avg_pool2d(ctx, in(c, D_NORMAL, 4, 1, 2, 4, 4), &(kn_pool_opts){.kernel = {2, 2}});
    case 1:
        return kn_avg_pool2d(ctx, in_t(c, D_NORMAL, 4, 1, 2, 5, 5),
                             &(kn_pool_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = 1});
    case 2:
        return kn_avg_pool2d(ctx, in(c, D_NORMAL, 4, 1, 1, 5, 5),
                             &(kn_pool_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .exclude_pad = 1});
    default:
        return kn_avg_pool2d(ctx, in(c, D_NORMAL, 4, 1, 1, 4, 4),
                             &(kn_pool_opts){.kernel = {2, 2}, .stride = {1, 1}, .divisor = 3});
    }
}

static kn_tensor *t_adaptive_avg_pool2d(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_adaptive_avg_pool2d(ctx, in(c, D_NORMAL, 4, 1, 2, 5, 4), 3, 2);
    if (v == 1) return kn_adaptive_avg_pool2d(ctx, in_t(c, D_NORMAL, 4, 1, 2, 5, 7), 2, 3);
    return kn_adaptive_avg_pool2d(ctx, in(c, D_NORMAL, 4, 1, 2, 3, 3), 1, 1);
}

/* ---- composites: normalisation ---- */

static kn_tensor *t_batch_norm(kn_ctx *ctx, Case *c, int v)
{
    int64_t s3 = 3;
    kn_tensor *x = v == 0   ? in(c, D_NORMAL, 2, 4, 3)
                   : v == 1 ? in_t(c, D_NORMAL, 4, 2, 3, 2, 2)
                            : in(c, D_NORMAL, 3, 2, 3, 4);
    kn_tensor *w = in(c, D_NORMAL, 1, 3), *b = in(c, D_NORMAL, 1, 3);
    if (v == 0) return kn_batch_norm(ctx, x, NULL, NULL, w, b, 1, 0, 0);
    /* running statistics, updated in place when training */
    kn_tensor *mean = fixed(ctx, 1, &s3, -0.5, 0.5), *var = fixed(ctx, 1, &s3, 0.5, 2);
    return kn_batch_norm(ctx, x, mean, var, w, b, v == 1, 0.2, 1e-3);
}

static kn_tensor *t_layer_norm(kn_ctx *ctx, Case *c, int v)
{
    if (v == 1) {
        kn_tensor *x = in_t(c, D_NORMAL, 3, 2, 3, 4), *w = in(c, D_NORMAL, 2, 3, 4);
        return kn_layer_norm(ctx, x, 2, S34, w, NULL, 1e-3);
    }
    if (v == 2) return kn_layer_norm(ctx, in(c, D_NORMAL, 2, 3, 4), 1, S4, NULL, NULL, 0);
    ctx->no_custom_vjp = v == 3; /* the backward derived from primitives */
    kn_tensor *x = in(c, D_NORMAL, 2, 3, 4), *w = in(c, D_NORMAL, 1, 4), *b = in(c, D_NORMAL, 1, 4);
    return kn_layer_norm(ctx, x, 1, S4, w, b, 0);
}

static kn_tensor *t_group_norm(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) {
        kn_tensor *x = in(c, D_NORMAL, 3, 2, 4, 3), *w = in(c, D_NORMAL, 1, 4), *b = in(c, D_NORMAL, 1, 4);
        return kn_group_norm(ctx, x, 2, w, b, 0);
    }
    return kn_group_norm(ctx, in_t(c, D_NORMAL, 4, 1, 6, 2, 2), 3, NULL, NULL, 1e-3);
}

static kn_tensor *t_rms_norm(kn_ctx *ctx, Case *c, int v)
{
    if (v == 1) return kn_rms_norm(ctx, in_t(c, D_NORMAL, 3, 2, 3, 4), 2, S34, NULL, 1e-6);
    ctx->no_custom_vjp = v == 2;
    kn_tensor *x = in(c, D_NORMAL, 2, 3, 4), *w = in(c, D_NORMAL, 1, 4);
    return kn_rms_norm(ctx, x, 1, S4, w, 0);
}

/* ---- composites: activations ---- */

static kn_tensor *t_leaky_relu(kn_ctx *ctx, Case *c, int v)
{
    return kn_leaky_relu(ctx, input(c, D_KINK, v == 1, 2, 3, 4), v == 0 ? 0.1 : 0.01);
}

static kn_tensor *t_gelu(kn_ctx *ctx, Case *c, int v)
{
    return kn_gelu(ctx, input(c, D_NORMAL, v == 1, 2, 3, 4), v == 1);
}

static kn_tensor *t_softplus(kn_ctx *ctx, Case *c, int v)
{
    return kn_softplus(ctx, input(c, D_NORMAL, v == 1, 2, 3, 4), v == 1 ? 2 : 0, v == 1 ? 3 : 0);
}

static kn_tensor *t_elu(kn_ctx *ctx, Case *c, int v)
{
    return kn_elu(ctx, input(c, D_KINK, v == 1, 2, 3, 4), v == 0 ? 1.0 : 0.5);
}

/* softmax and log_softmax: the last dim, dim 0 of a transposed view, the middle dim */
static kn_tensor *softmax_case(Case *c, int v, kn_tensor *(*fn)(kn_ctx *, kn_tensor *, int))
{
    kn_ctx *ctx = c->ctx;
    if (v == 1) return fn(ctx, in_t(c, D_NORMAL, 2, 3, 4), 0);
    if (v == 2) return fn(ctx, in(c, D_NORMAL, 3, 2, 3, 4), 1);
    ctx->no_custom_vjp = v == 3;
    return fn(ctx, in(c, D_NORMAL, 2, 3, 4), -1);
}

static kn_tensor *t_softmax(kn_ctx *ctx, Case *c, int v) { (void)ctx; return softmax_case(c, v, kn_softmax); }
static kn_tensor *t_log_softmax(kn_ctx *ctx, Case *c, int v) { (void)ctx; return softmax_case(c, v, kn_log_softmax); }

/* ---- composites: losses ---- */

static kn_tensor *t_cross_entropy(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *t3 = ints(ctx, 1, (int64_t[]){3}, (int64_t[]){0, 4, 2});
    kn_tensor *w = fixed(ctx, 1, S5, 0.5, 2);
    switch (v) {
    case 1:
        return kn_cross_entropy(ctx, in_t(c, D_NORMAL, 2, 3, 5), t3,
                                &(kn_loss_opts){.reduction = KN_REDUCE_SUM, .weight = w});
    case 2:
        return kn_cross_entropy(ctx, in(c, D_NORMAL, 2, 3, 5), t3,
                                &(kn_loss_opts){.weight = w, .label_smoothing = 0.2});
    case 3:
        return kn_cross_entropy(ctx, in(c, D_NORMAL, 2, 3, 5), ints(ctx, 1, (int64_t[]){3}, (int64_t[]){1, 3, 0}),
                                &(kn_loss_opts){.has_ignore_index = 1, .ignore_index = 1});
    case 4: /* (N, C, d) */
        return kn_cross_entropy(ctx, in(c, D_NORMAL, 3, 2, 3, 4),
                                ints(ctx, 2, (int64_t[]){2, 4}, (int64_t[]){0, 2, 1, 1, 2, 0, 0, 1}),
                                &(kn_loss_opts){.reduction = KN_REDUCE_NONE});
    default:
        ctx->no_custom_vjp = v == 5;
        return kn_cross_entropy(ctx, in(c, D_NORMAL, 2, 3, 5), t3, NULL);
    }
}

static kn_tensor *t_nll_loss(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *t3 = ints(ctx, 1, (int64_t[]){3}, (int64_t[]){0, 4, 4});
    if (v == 0) return kn_nll_loss(ctx, in(c, D_NORMAL, 2, 3, 5), t3, NULL);
    if (v == 1)
        return kn_nll_loss(ctx, in_t(c, D_NORMAL, 2, 3, 5), t3,
                           &(kn_loss_opts){.reduction = KN_REDUCE_SUM, .weight = fixed(ctx, 1, S5, 0.5, 2),
                                           .has_ignore_index = 1, .ignore_index = 0});
    return kn_nll_loss(ctx, in(c, D_NORMAL, 3, 2, 3, 2), ints(ctx, 2, (int64_t[]){2, 2}, (int64_t[]){2, 0, 1, 1}),
                       &(kn_loss_opts){.reduction = KN_REDUCE_NONE});
}

/* mse_loss and l1_loss: mean, sum (on a transposed view), none; the target needs grad too */
typedef kn_tensor *(*PairLoss)(kn_ctx *, kn_tensor *, kn_tensor *, kn_reduction);

static kn_tensor *pair_loss_case(Case *c, int v, Dist d, PairLoss fn)
{
    static const kn_reduction r[3] = {KN_REDUCE_MEAN, KN_REDUCE_SUM, KN_REDUCE_NONE};
    kn_tensor *x = input(c, d, v == 1, 2, 3, 4), *t = in(c, d, 2, 3, 4);
    return fn(c->ctx, x, t, r[v]);
}

static kn_tensor *t_mse_loss(kn_ctx *ctx, Case *c, int v)
{
    (void)ctx;
    return pair_loss_case(c, v, D_NORMAL, kn_mse_loss);
}

static kn_tensor *t_l1_loss(kn_ctx *ctx, Case *c, int v)
{
    (void)ctx;
    return pair_loss_case(c, v, D_KINK, kn_l1_loss);
}

static kn_tensor *t_binary_cross_entropy(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *p = input(c, D_PROB, v == 1, 2, 3, 4), *t = in(c, D_PROB, 2, 3, 4);
    if (v == 0) return kn_binary_cross_entropy(ctx, p, t, NULL, KN_REDUCE_MEAN);
    return kn_binary_cross_entropy(ctx, p, t, fixed(ctx, 2, S34, 0.5, 2), v == 1 ? KN_REDUCE_SUM : KN_REDUCE_NONE);
}

static kn_tensor *t_binary_cross_entropy_with_logits(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *x = input(c, D_NORMAL, v == 2, 2, 3, 4), *t = in(c, D_PROB, 2, 3, 4);
    if (v == 0) return kn_binary_cross_entropy_with_logits(ctx, x, t, NULL, NULL, KN_REDUCE_MEAN);
    if (v == 1) /* pos_weight (4) broadcast over the rows */
        return kn_binary_cross_entropy_with_logits(ctx, x, t, fixed(ctx, 2, S34, 0.5, 2), fixed(ctx, 1, S4, 0.5, 3),
                                                   KN_REDUCE_SUM);
    return kn_binary_cross_entropy_with_logits(ctx, x, t, NULL, NULL, KN_REDUCE_NONE);
}

/* ---- composites: layers ---- */

static kn_tensor *t_embedding(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_embedding(ctx, in(c, D_NORMAL, 2, 5, 3), ints(ctx, 1, S4, (int64_t[]){0, 2, 2, 4}));
    return kn_embedding(ctx, in_t(c, D_NORMAL, 2, 5, 3), ints(ctx, 2, (int64_t[]){2, 2}, (int64_t[]){4, 1, 1, 0}));
}

static kn_tensor *t_dropout(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_dropout(ctx, in(c, D_NORMAL, 2, 3, 4), 0.3, 1);
    if (v == 1) return kn_dropout(ctx, in_t(c, D_NORMAL, 2, 3, 4), 0.5, 1);
    return kn_dropout(ctx, in(c, D_NORMAL, 2, 3, 4), 0.5, 0); /* eval: the identity */
}

static kn_tensor *t_scaled_dot_product_attention(kn_ctx *ctx, Case *c, int v)
{
    if (v == 1) { /* causal */
        kn_tensor *q = in(c, D_NORMAL, 3, 1, 4, 3), *k = in(c, D_NORMAL, 3, 1, 4, 3);
        kn_tensor *val = in(c, D_NORMAL, 3, 1, 4, 2);
        return kn_scaled_dot_product_attention(ctx, q, k, val, NULL, 1, 0);
    }
    kn_tensor *q = input(c, D_NORMAL, v == 2, 3, 2, 3, 4);
    kn_tensor *k = in(c, D_NORMAL, 3, 2, 5, 4), *val = in(c, D_NORMAL, 3, 2, 5, 3);
    kn_tensor *m = v == 2 ? fixed(ctx, 2, S35, -1, 1) : v == 3 ? mask(ctx, 2, S35) : NULL;
    return kn_scaled_dot_product_attention(ctx, q, k, val, m, 0, v == 2 ? 0.5 : 0);
}

/* ---- composites: reductions ---- */

typedef kn_tensor *(*Reduce)(kn_ctx *, kn_tensor *, const int *, int, int);      /* dims, n, keepdim */
typedef kn_tensor *(*Moment)(kn_ctx *, kn_tensor *, const int *, int, int, int); /* ..., correction, keepdim */

/* dim 1; every dim of a transposed view (correction 0), keepdim; dims 0
 * and 2 of a 3-D input, keepdim. Through r, or m where r is NULL. */
static kn_tensor *dims_case(Case *c, int v, Dist d, Reduce r, Moment m)
{
    static const int one[1] = {1}, two[2] = {0, 2};
    kn_tensor *x = v == 0 ? in(c, d, 2, 3, 4) : v == 1 ? in_t(c, d, 2, 3, 4) : in(c, d, 3, 2, 3, 4);
    const int *dims = v == 0 ? one : v == 1 ? NULL : two;
    int n = v == 0 ? 1 : v == 1 ? 0 : 2, keep = v != 0;
    return r ? r(c->ctx, x, dims, n, keep) : m(c->ctx, x, dims, n, v != 1, keep);
}

static kn_tensor *t_mean(kn_ctx *ctx, Case *c, int v) { (void)ctx; return dims_case(c, v, D_NORMAL, kn_mean, NULL); }
static kn_tensor *t_sum(kn_ctx *ctx, Case *c, int v) { (void)ctx; return dims_case(c, v, D_NORMAL, kn_sum, NULL); }
static kn_tensor *t_amax(kn_ctx *ctx, Case *c, int v) { (void)ctx; return dims_case(c, v, D_KINK, kn_amax, NULL); }
static kn_tensor *t_amin(kn_ctx *ctx, Case *c, int v) { (void)ctx; return dims_case(c, v, D_KINK, kn_amin, NULL); }
static kn_tensor *t_logsumexp(kn_ctx *ctx, Case *c, int v)
{
    (void)ctx;
    return dims_case(c, v, D_NORMAL, kn_logsumexp, NULL);
}
static kn_tensor *t_var(kn_ctx *ctx, Case *c, int v) { (void)ctx; return dims_case(c, v, D_NORMAL, NULL, kn_var); }
static kn_tensor *t_std(kn_ctx *ctx, Case *c, int v) { (void)ctx; return dims_case(c, v, D_NORMAL, NULL, kn_std); }

static kn_tensor *t_prod(kn_ctx *ctx, Case *c, int v) /* no zeros: D_KINK */
{
    if (v == 0) return kn_prod(ctx, in(c, D_KINK, 2, 3, 4), 1, 0);
    if (v == 1) return kn_prod(ctx, in_t(c, D_KINK, 2, 2, 3), KN_NODIM, 0);
    return kn_prod(ctx, in(c, D_KINK, 3, 2, 3, 2), 0, 1);
}

static kn_tensor *t_cumsum(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_cumsum(ctx, in(c, D_NORMAL, 2, 3, 4), 1);
    if (v == 1) return kn_cumsum(ctx, in_t(c, D_NORMAL, 2, 3, 4), 0);
    return kn_cumsum(ctx, in(c, D_NORMAL, 3, 2, 3, 4), -1);
}

static kn_tensor *t_clamp(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_clamp(ctx, in(c, D_KINK, 2, 3, 4), -1, 1);
    if (v == 1) return kn_clamp(ctx, in_t(c, D_KINK, 2, 3, 4), -1, INFINITY);
    return kn_clamp(ctx, in(c, D_KINK, 2, 3, 4), -INFINITY, 1);
}

/* ---- composites: shape and indexing ---- */

static kn_tensor *t_transpose(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_transpose(ctx, in(c, D_NORMAL, 3, 2, 3, 4), 0, 2);
    return kn_transpose(ctx, in_t(c, D_NORMAL, 2, 3, 4), 0, 1);
}

static kn_tensor *t_view(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_view(ctx, in(c, D_NORMAL, 2, 3, 4), 2, (int64_t[]){2, 6});
    return kn_view(ctx, in(c, D_NORMAL, 3, 2, 3, 4), 2, (int64_t[]){6, 4});
}

static kn_tensor *t_reshape(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_reshape(ctx, in_t(c, D_NORMAL, 2, 3, 4), 1, (int64_t[]){12}); /* a copy */
    return kn_reshape(ctx, in(c, D_NORMAL, 3, 2, 3, 4), 2, (int64_t[]){4, -1});
}

static kn_tensor *t_flatten(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_flatten(ctx, in(c, D_NORMAL, 3, 2, 3, 4), 1, -1);
    return kn_flatten(ctx, in_t(c, D_NORMAL, 2, 3, 4), 0, -1);
}

static kn_tensor *t_squeeze(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *x = in(c, D_NORMAL, 4, 1, 3, 1, 4);
    return kn_squeeze(ctx, x, v == 0 ? 0 : KN_NODIM);
}

static kn_tensor *t_unsqueeze(kn_ctx *ctx, Case *c, int v)
{
    return kn_unsqueeze(ctx, input(c, D_NORMAL, v == 1, 2, 3, 4), v == 0 ? 1 : -1);
}

static kn_tensor *t_cat(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) {
        kn_tensor *a = in(c, D_NORMAL, 2, 3, 4), *b = in(c, D_NORMAL, 2, 2, 4);
        return kn_cat(ctx, (kn_tensor *[]){a, b}, 2, 0);
    }
    kn_tensor *a = in_t(c, D_NORMAL, 2, 3, 4), *b = in(c, D_NORMAL, 2, 3, 2), *d = in(c, D_NORMAL, 2, 3, 1);
    return kn_cat(ctx, (kn_tensor *[]){a, b, d}, 3, 1);
}

static kn_tensor *t_stack(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *a = in(c, D_NORMAL, 2, 3, 4), *b = in_t(c, D_NORMAL, 2, 3, 4);
    return kn_stack(ctx, (kn_tensor *[]){a, b}, 2, v == 0 ? 0 : -1);
}

/* the pieces joined again in reverse order, so that each gets a gradient of its own */
static kn_tensor *rejoin(kn_ctx *ctx, int n, kn_tensor **pieces, int dim)
{
    kn_tensor *rev[8];
    if (n < 1 || n > 8) return n < 1 ? NULL : kn_err(ctx, KN_EINVAL, "%d pieces", n);
    for (int i = 0; i < n; i++) rev[i] = pieces[n - 1 - i];
    return kn_cat(ctx, rev, n, dim);
}

static kn_tensor *t_split(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *p[8];
    if (v == 0) return rejoin(ctx, kn_split(ctx, in(c, D_NORMAL, 2, 3, 5), 2, 1, p, 8), p, 1);
    return rejoin(ctx, kn_split(ctx, in_t(c, D_NORMAL, 2, 4, 3), 3, 0, p, 8), p, 0);
}

static kn_tensor *t_chunk(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *p[8];
    if (v == 0) return rejoin(ctx, kn_chunk(ctx, in(c, D_NORMAL, 2, 3, 5), 2, 1, p, 8), p, 1);
    return rejoin(ctx, kn_chunk(ctx, in_t(c, D_NORMAL, 2, 4, 3), 3, 0, p, 8), p, 0);
}

static kn_tensor *t_narrow(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_narrow(ctx, in(c, D_NORMAL, 2, 3, 5), 1, 1, 3);
    return kn_narrow(ctx, in_t(c, D_NORMAL, 2, 4, 3), 0, -2, 2);
}

static kn_tensor *t_index_select(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0)
        return kn_index_select(ctx, in(c, D_NORMAL, 2, 4, 3), 0, ints(ctx, 1, (int64_t[]){3}, (int64_t[]){3, 1, 1}));
    return kn_index_select(ctx, in_t(c, D_NORMAL, 2, 3, 4), 1, ints(ctx, 1, (int64_t[]){2}, (int64_t[]){2, 0}));
}

static kn_tensor *t_where(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) {
        kn_tensor *a = in(c, D_NORMAL, 2, 3, 4), *b = in(c, D_NORMAL, 1, 4);
        return kn_where(ctx, mask(ctx, 2, S34), a, b);
    }
    if (v == 1) { /* the condition broadcast */
        kn_tensor *a = in_t(c, D_NORMAL, 2, 3, 4), *b = in(c, D_NORMAL, 2, 3, 4);
        return kn_where(ctx, mask(ctx, 1, S4), a, b);
    }
    return kn_where(ctx, mask(ctx, 2, S34), in(c, D_NORMAL, 2, 3, 4), kn_scalar(ctx, SCALAR));
}

static kn_tensor *t_masked_fill(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_masked_fill(ctx, in(c, D_NORMAL, 2, 3, 4), mask(ctx, 2, S34), -1.0);
    return kn_masked_fill(ctx, in_t(c, D_NORMAL, 2, 3, 4), mask(ctx, 1, S4), 2.0);
}

static kn_tensor *tri_case(Case *c, int v, kn_tensor *(*fn)(kn_ctx *, kn_tensor *, int64_t))
{
    if (v == 0) return fn(c->ctx, in(c, D_NORMAL, 2, 3, 4), 0);
    if (v == 1) return fn(c->ctx, in_t(c, D_NORMAL, 2, 3, 4), 1);
    return fn(c->ctx, in(c, D_NORMAL, 3, 2, 3, 4), -1);
}

static kn_tensor *t_triu(kn_ctx *ctx, Case *c, int v) { (void)ctx; return tri_case(c, v, kn_triu); }
static kn_tensor *t_tril(kn_ctx *ctx, Case *c, int v) { (void)ctx; return tri_case(c, v, kn_tril); }

static kn_tensor *t_permute(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_permute(ctx, in(c, D_NORMAL, 3, 2, 3, 4), (int[]){2, 0, 1});
    return kn_permute(ctx, in_t(c, D_NORMAL, 3, 2, 3, 4), (int[]){1, 2, 0});
}

static kn_tensor *t_expand(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_expand(ctx, in(c, D_NORMAL, 2, 3, 1), 3, (int64_t[]){2, 3, 4}); /* a new leading dim */
    return kn_expand(ctx, in_t(c, D_NORMAL, 2, 1, 4), 2, (int64_t[]){3, -1});
}

static kn_tensor *t_slice(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_slice(ctx, in(c, D_NORMAL, 2, 4, 5), 1, 0, 5, 2);
    if (v == 1) return kn_slice(ctx, in_t(c, D_NORMAL, 2, 4, 5), 0, 1, 4, 1);
    return kn_slice(ctx, in(c, D_NORMAL, 2, 4, 5), -1, -3, 100, 2); /* bounds clamped */
}

static kn_tensor *t_pad(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_pad(ctx, in(c, D_NORMAL, 2, 3, 4), 2, (int64_t[]){1, 2}, 0.0);
    return kn_pad(ctx, in_t(c, D_NORMAL, 2, 3, 4), 4, (int64_t[]){1, 0, 2, 1}, 0.5);
}

static kn_tensor *t_gather(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0)
        return kn_gather(ctx, in(c, D_NORMAL, 2, 3, 4), 1,
                         ints(ctx, 2, (int64_t[]){3, 2}, (int64_t[]){0, 3, 1, 1, 2, 0}));
    return kn_gather(ctx, in_t(c, D_NORMAL, 2, 3, 4), 0,
                     ints(ctx, 2, (int64_t[]){2, 3}, (int64_t[]){2, 0, 1, 1, 0, 2}));
}

static kn_tensor *t_scatter_add(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *x = input(c, D_NORMAL, v != 0, 2, 3, 4), *src = in(c, D_NORMAL, 2, 3, 3);
    return kn_scatter_add(ctx, x, 1, ints(ctx, 2, (int64_t[]){3, 2}, (int64_t[]){0, 3, 1, 1, 2, 0}), src);
}

static kn_tensor *t_to(kn_ctx *ctx, Case *c, int v)
{
    if (v == 0) return kn_to(ctx, kn_to(ctx, in(c, D_SMALL, 2, 3, 4), KN_F32), KN_F64);
    return kn_to(ctx, in_t(c, D_NORMAL, 2, 3, 4), KN_F64);
}

/* ---- the table ---- */

static const Check prims[] = {
    {"prim.neg", .op = OP_NEG, .dist = {D_NORMAL}},
    {"prim.exp", .op = OP_EXP, .dist = {D_NORMAL}},
    {"prim.log", .op = OP_LOG, .dist = {D_POS}},
    {"prim.sqrt", .op = OP_SQRT, .dist = {D_POS}},
    {"prim.recip", .op = OP_RECIP, .dist = {D_POS}},
    {"prim.sin", .op = OP_SIN, .dist = {D_NORMAL}},
    {"prim.cos", .op = OP_COS, .dist = {D_NORMAL}},
    {"prim.tanh", .op = OP_TANH, .dist = {D_NORMAL}},
    {"prim.erf", .op = OP_ERF, .dist = {D_NORMAL}},
    {"prim.abs", .op = OP_ABS, .dist = {D_KINK}},
    {"prim.floor", .op = OP_FLOOR, .dist = {D_FRAC}, .zero = 1},
    {"prim.add", .op = OP_ADD, .dist = {D_NORMAL, D_NORMAL}},
    {"prim.sub", .op = OP_SUB, .dist = {D_NORMAL, D_NORMAL}},
    {"prim.mul", .op = OP_MUL, .dist = {D_NORMAL, D_NORMAL}},
    {"prim.div", .op = OP_DIV, .dist = {D_NORMAL, D_POS}},
    {"prim.max", .op = OP_MAX, .dist = {D_KINK, D_KINK}},
    {"prim.min", .op = OP_MIN, .dist = {D_KINK, D_KINK}},
    {"prim.pow", .op = OP_POW, .dist = {D_POS, D_NORMAL}},
    {"prim.where", .body = tp_where, .ncases = 2},
    {"prim.cast", .body = tp_cast, .ncases = 2},
    {"prim.sum", .body = tp_sum, .ncases = 3},
    {"prim.reduce_max", .body = tp_reduce_max, .ncases = 3},
    {"prim.reshape", .body = tp_reshape, .ncases = 2},
    {"prim.permute", .body = tp_permute, .ncases = 2},
    {"prim.expand", .body = tp_expand, .ncases = 2},
    {"prim.slice", .body = tp_slice, .ncases = 4},
    {"prim.pad", .body = tp_pad, .ncases = 2},
    {"prim.gather", .body = tp_gather, .ncases = 2},
    {"prim.scatter_add", .body = tp_scatter_add, .ncases = 2},
    {"prim.dot", .body = tp_dot, .ncases = 2},

};
#define NPRIMS ((int)(sizeof prims / sizeof *prims))

/* composite.h's GRAD column */
#define UN(fn, d) .un = fn, .dist = {d}
#define UN0(fn, d) .un = fn, .dist = {d}, .zero = 1
#define BIN(fn, d0, d1) .bin = fn, .dist = {d0, d1}
#define BODY(fn, n) .body = fn, .ncases = n
#define NONE(why) .none = why
static const Check composites[COMP_COUNT] = {
#define CHECK_(name, example, grad) {#name, grad},
    KN_COMPOSITES(CHECK_)
#undef CHECK_
};
#undef UN
#undef UN0
#undef BIN
#undef BODY
#undef NONE

/* The i-th check: the primitives', then the composites' with a gradient. */
static const Check *nth(int i)
{
    if (i >= 0 && i < NPRIMS) return &prims[i];
    for (int j = 0, n = NPRIMS; i >= 0 && j < COMP_COUNT; j++)
        if (!composites[j].none && n++ == i) return &composites[j];
    return NULL;
}

/* ---- running a check ---- */

static int unary(const Check *k) { return k->un || (k->op && kn_opinfo[k->op].nsrc == 1); }

static int ncases(const Check *k) { return k->body ? k->ncases : unary(k) ? 3 : k->bin ? 5 : 3; }

static kn_tensor *forward(const Check *k, Case *c, int v)
{
    kn_ctx *ctx = c->ctx;
    Dist d0 = (Dist)k->dist[0], d1 = (Dist)k->dist[1];
    if (k->body) return k->body(ctx, c, v);
    if (unary(k)) { /* unary: contiguous, a transposed view, a (1, 4) leaf broadcast to (3, 4) */
        kn_tensor *x = v == 0 ? in(c, d0, 2, 3, 4) : v == 1 ? in_t(c, d0, 2, 3, 4) : in(c, d0, 2, 1, 4);
        if (v == 2) x = k->un ? kn_expand(ctx, x, 2, S34) : p_expand(ctx, x, 2, S34);
        return k->un ? k->un(ctx, x) : prim1(ctx, k->op, x);
    }
    kn_tensor *a, *b;
    switch (v) {
    case 0: a = in(c, d0, 2, 3, 4), b = in_t(c, d1, 2, 3, 4); break;   /* b a transposed view */
    case 1: a = in(c, d0, 2, 3, 4), b = in(c, d1, 1, 4); break;        /* b broadcast */
    case 2: a = in(c, d0, 3, 2, 1, 4), b = in(c, d1, 2, 3, 1); break;  /* both broadcast to (2, 3, 4) */
    case 3: a = in(c, d0, 2, 3, 4), b = kn_scalar(ctx, SCALAR); break; /* a Python number */
    default: a = kn_scalar(ctx, SCALAR), b = in(c, d1, 2, 3, 4); break;
    }
    return k->bin ? k->bin(ctx, a, b) : prim_bin(ctx, k->op, a, b);
}

/* One forward from a reseeded context and the loss sum(y * w); the first
 * call makes w, a random cotangent of y's shape. */
static kn_tensor *loss_of(const Check *k, Case *c, int v, kn_tensor **w)
{
    kn_ctx *ctx = c->ctx;
    kn_manual_seed(ctx, FWD_SEED);
    c->k = 0;
    kn_tensor *y = forward(k, c, v);
    if (!y) return NULL;
    if (y->dtype != KN_F64)
        return kn_err(ctx, KN_EDTYPE, "the result is %s, not f64", kn_dtype_name((kn_dtype)y->dtype));
    if (!*w) {
        if (!(*w = kn_keep(ctx, kn_zeros(ctx, KN_F64, y->ndim, y->shape)))) return NULL;
        for (int64_t j = 0; j < kn_numel(y); j++) dt_store(KN_F64, tensor_ptr(*w, j), normal(&c->rng));
    }
    return kn_sum(ctx, kn_mul(ctx, y, *w), NULL, 0, 0);
}

/* (loss(x + eps) - loss(x - eps)) / 2 eps with *x perturbed in place, grad off */
static int numeric(const Check *k, Case *c, int v, kn_tensor *w, double *x, double *out)
{
    double x0 = *x, f[2];
    int ok = 1;
    for (int s = 0; s < 2 && ok; s++) {
        *x = s == 0 ? x0 + EPS : x0 - EPS;
        kn_scope_begin(c->ctx);
        kn_tensor *L = loss_of(k, c, v, &w);
        ok = L && kn_item(c->ctx, L, &f[s]) == KN_OK;
        kn_scope_end(c->ctx);
    }
    *x = x0;
    *out = ok ? (f[0] - f[1]) / (2 * EPS) : NAN;
    return ok;
}

typedef struct {
    int inputs, failed;
    int64_t elems;
    double max_err; /* over every element compared */
    double worst;   /* err / tolerance of the worst failure so far */
    char why[400];  /* that failure */
} Tally;

static void fail(Tally *t, double badness, const char *fmt, ...)
{
    t->failed = 1;
    if (!(badness > t->worst) && t->why[0]) return;
    t->worst = badness;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->why, sizeof t->why, fmt, ap);
    va_end(ap);
}

/* Input i's analytic gradient (in its leaf's .grad) against the numeric one, element by element. */
static void compare_input(const Check *k, Case *c, int v, int i, kn_tensor *w, Tally *t)
{
    kn_ctx *ctx = c->ctx;
    kn_tensor *x = c->leaf[i], *g = kn_grad(ctx, x);
    char shape[64], at[64];
    fmt_shape(shape, sizeof shape, x);
    const char *view = c->transposed[i] ? ", seen transposed" : "";
    t->inputs++;
    if (g && (g->dtype != KN_F64 || g->ndim != x->ndim || memcmp(g->shape, x->shape, x->ndim * sizeof *x->shape))) {
        char gs[64];
        fail(t, INFINITY, "case %d, input %d %s%s: its gradient is %s %s", v, i, shape, view,
             kn_dtype_name((kn_dtype)g->dtype), fmt_shape(gs, sizeof gs, g));
        return;
    }
    for (int64_t j = 0; j < kn_numel(x); j++) {
        double a = g ? elem(g, j) : 0.0, n;
        if (!numeric(k, c, v, w, tensor_ptr(x, x->offset + j), &n)) {
            fail(t, INFINITY, "case %d: %s", v, kn_last_error(ctx));
            return;
        }
        t->elems++;
        double err = fabs(a - n), tol = ATOL + RTOL * fabs(n);
        if (!(err <= t->max_err)) t->max_err = err; /* NaN sticks */
        int bad = !(err <= tol), nonzero = k->zero && a != 0;
        if (!bad && !nonzero) continue;
        int64_t idx[KN_MAX_DIMS], r = j;
        for (int d = x->ndim; d-- > 0; r /= x->shape[d]) idx[d] = r % x->shape[d];
        fmt_dims(at, sizeof at, x->ndim, idx);
        if (bad)
            fail(t, err == err ? err / tol : INFINITY,
                 "case %d, input %d %s%s, element %s: analytic %.6g, numeric %.6g", v, i, shape, view, at, a, n);
        else
            fail(t, INFINITY, "case %d, input %d %s%s, element %s: analytic %.6g, expected exactly 0", v, i, shape,
                 view, at, a);
    }
}

static uint64_t seed_of(const char *name, int v) { return kn_hash_more(kn_hash(name, strlen(name)), &v, sizeof v); }

static void check_case(const Check *k, int v, Tally *t)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    if (!ctx) {
        fail(t, INFINITY, "out of memory");
        return;
    }
    Case c;
    memset(&c, 0, sizeof c);
    c.ctx = ctx;
    c.rng = seed_of(k->name, v);
    kn_tensor *w = NULL;
    kn_scope_begin(ctx);
    kn_tensor *L = loss_of(k, &c, v, &w);
    kn_status s = !L ? KN_EINVAL : kn_is_requires_grad(L) ? kn_backward(ctx, L, 0) : KN_OK;
    kn_scope_end(ctx);
    if (s != KN_OK) fail(t, INFINITY, "case %d: %s", v, ctx->err[0] ? ctx->err : "no result");
    else if (c.n == 0) fail(t, INFINITY, "case %d: no input needs a gradient", v);
    kn_set_grad_enabled(ctx, 0);
    for (int i = 0; i < c.n && s == KN_OK; i++) compare_input(k, &c, v, i, w, t);
    kn_ctx_free(ctx);
}

static void report(const char *name, const Tally *t, int print)
{
    if (print >= 2 && !t->failed)
        printf("  %-34s ok    (max abs err %.0e, %d inputs, %lld elements)\n", name, t->max_err, t->inputs,
               (long long)t->elems);
    else if (print >= 1 && t->failed && t->elems)
        printf("%s%-34s FAIL  (%s; max abs err %.0e over %lld elements)\n", print >= 2 ? "  " : "    ", name, t->why,
               t->max_err, (long long)t->elems);
    else if (print >= 1 && t->failed)
        printf("%s%-34s FAIL  (%s)\n", print >= 2 ? "  " : "    ", name, t->why);
}

static int run_check(const Check *k, int print)
{
    Tally t;
    memset(&t, 0, sizeof t);
    for (int v = 0; v < ncases(k); v++) check_case(k, v, &t);
    report(k->name, &t, print);
    return t.failed;
}

static const Check *find(const char *name)
{
    for (int i = 0; nth(i); i++)
        if (!strcmp(nth(i)->name, name)) return nth(i);
    return NULL;
}

/* A line for a gap in coverage; returns 1. */
static int gap(const char *name, const char *why, int print)
{
    Tally t;
    memset(&t, 0, sizeof t);
    fail(&t, INFINITY, "%s", why);
    report(name, &t, print);
    return 1;
}

/* A check for every differentiable primitive, and no check of a primitive
 * that does not exist. Returns the number of gaps. */
static int coverage(int print)
{
    int gaps = 0;
    char name[64];
    for (int op = 1; op < OP_COUNT; op++) {
        OpClass cls = kn_opinfo[op].cls;
        snprintf(name, sizeof name, "prim.%s", kn_opinfo[op].name);
        if (cls != OC_LEAF && cls != OC_COMPARE && cls != OC_CREATE && !find(name))
            gaps += gap(name, "a differentiable primitive with no check", print);
    }
    for (int i = 0; i < NPRIMS; i++) {
        const char *n = prims[i].name;
        int known = 0;
        for (int op = 1; op < OP_COUNT && !strncmp(n, "prim.", 5); op++) known |= !strcmp(n + 5, kn_opinfo[op].name);
        if (!known) gaps += gap(n, "no primitive of this name", print);
    }
    return gaps;
}

int gradcheck_run(const char *only_op, int print, int *npass, int *nfail)
{
    *npass = *nfail = 0;
    if (only_op && !find(only_op)) return -1;
    for (int i = 0; nth(i); i++)
        if (!only_op || !strcmp(only_op, nth(i)->name)) ++*(run_check(nth(i), print) ? nfail : npass);
    if (!only_op) *nfail += coverage(print);
    if (print >= 2) printf("gradcheck: %d passed, %d failed\n", *npass, *nfail);
    return *nfail != 0;
}

const char *gradcheck_name(int i) { return nth(i) ? nth(i)->name : NULL; }

/* ---- one case, run another way ---- */

struct GradcheckCase {
    const Check *k;
    int v;
    Case c;
};

int gradcheck_ncases(int i) { return nth(i) ? ncases(nth(i)) : 0; }

GradcheckCase *gradcheck_case(kn_ctx *ctx, int i, int v)
{
    if (v < 0 || v >= gradcheck_ncases(i)) return kn_err(ctx, KN_EINVAL, "gradcheck: no case %d of check %d", v, i);
    GradcheckCase *g = kn_alloc(ctx, sizeof *g);
    if (!g) return kn_err(ctx, KN_ENOMEM, "out of memory for a gradcheck case");
    memset(g, 0, sizeof *g);
    g->k = nth(i);
    g->v = v;
    g->c.ctx = ctx;
    g->c.rng = seed_of(g->k->name, v);
    return g;
}

kn_tensor *gradcheck_forward(GradcheckCase *g)
{
    kn_manual_seed(g->c.ctx, FWD_SEED);
    g->c.k = 0;
    return forward(g->k, &g->c, g->v);
}

int gradcheck_leaves(const GradcheckCase *g, kn_tensor **leaves)
{
    memcpy(leaves, g->c.leaf, (size_t)g->c.n * sizeof *leaves);
    return g->c.n;
}

void gradcheck_case_free(GradcheckCase *g)
{
    if (g) kn_dealloc(g->c.ctx, g, sizeof *g);
}

/* ---- the checker checked: gradients wrong on purpose ----
 * Each body computes one function while grad is on (the analytic pass) and
 * another while it is off (the numeric pass). */

static kn_tensor *t_other_function(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *x = in(c, D_NORMAL, 2, 3, 4);
    (void)v;
    return ctx->grad_enabled ? kn_sin(ctx, x) : kn_cos(ctx, x);
}

static kn_tensor *scaled(kn_ctx *ctx, Case *c, double numeric_scale)
{
    kn_tensor *x = in(c, D_NORMAL, 2, 3, 4), *y = in_t(c, D_NORMAL, 2, 3, 4);
    kn_tensor *z = kn_mul(ctx, x, y);
    return ctx->grad_enabled ? z : kn_mul(ctx, z, kn_scalar(ctx, numeric_scale));
}

static kn_tensor *t_one_percent(kn_ctx *ctx, Case *c, int v) { (void)v; return scaled(ctx, c, 1.01); }
static kn_tensor *t_within_tolerance(kn_ctx *ctx, Case *c, int v) { (void)v; return scaled(ctx, c, 1 + 1e-4); }

static kn_tensor *t_lost_input(kn_ctx *ctx, Case *c, int v)
{
    kn_tensor *x = in(c, D_NORMAL, 2, 3, 4), *y = in(c, D_NORMAL, 1, 4);
    (void)v;
    return kn_mul(ctx, ctx->grad_enabled ? kn_detach(ctx, x) : x, y);
}

static const struct {
    Check k;
    int wrong;
} selftests[] = {
    {{"selftest.other_function", .body = t_other_function, .ncases = 1}, 1},
    {{"selftest.one_percent", .body = t_one_percent, .ncases = 1}, 1},
    {{"selftest.lost_input", .body = t_lost_input, .ncases = 1}, 1},
    {{"selftest.not_zero", .un = kn_exp, .zero = 1}, 1},
    {{"selftest.within_tolerance", .body = t_within_tolerance, .ncases = 1}, 0},
};

int gradcheck_selftest(int print, int *nwrong, int *ncaught)
{
    int surprises = 0;
    *nwrong = *ncaught = 0;
    for (size_t i = 0; i < sizeof selftests / sizeof *selftests; i++) {
        int failed = run_check(&selftests[i].k, print >= 2 ? 2 : 0);
        *nwrong += selftests[i].wrong;
        *ncaught += selftests[i].wrong && failed;
        if (failed != selftests[i].wrong) {
            surprises++;
            if (print)
                printf("    %s: %s\n", selftests[i].k.name,
                       failed ? "failed, but it is within tolerance" : "passed, but its gradient is wrong");
        }
    }
    return surprises != 0;
}
