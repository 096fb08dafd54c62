/*
 * decomp_shape.c — reductions, shape and indexing ops, and matrix products,
 * as decompositions into primitives with PyTorch 1.13's semantics.
 *
 * The contract is decomp.c's: every public op opens with ENTER and returns
 * through LEAVE, checks its operands with messages naming the operand and
 * dim, and then reaches computation only through prim()/p_*() and other
 * public ops, so the same code runs eagerly and traced. Views stay views:
 * reshape, permute, expand and slice become the view primitives, and only a
 * RESHAPE of a tensor that cannot be viewed copies (inside prim()).
 *
 * The reduction primitives (SUM, RMAX) keep reduced dims as size 1; the
 * composites drop them afterwards unless keepdim. What has no primitive is
 * built exactly: amin by an order-reversing flip around RMAX, argmax as a
 * max over "n - position where the element hits the extreme", prod by
 * pairwise halving, cumsum by a Hillis-Steele scan, cat by selecting between
 * padded inputs. These compute with sizes, so symbolic dims are refused
 * (KN_EUNSUPPORTED) until they learn index expressions.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

/* ---- helpers ---- */

/* "[2, 3]": a requested shape in a message (fmt_shape formats tensors). */
static const char *fmt_list(char *buf, size_t cap, int n, const int64_t *v)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)v[i]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
    return buf;
}

/* A non-NULL operand with concrete sizes (the decompositions compute with
 * them). Returns 0 with the error set otherwise. */
static int operand(kn_ctx *ctx, kn_tensor *t, const char *name)
{
    if (!tensor_check(ctx, t, name)) return 0;
    for (int d = 0; d < t->ndim; d++)
        if (DIM_IS_SYM(t->shape[d])) {
            kn_err(ctx, KN_EUNSUPPORTED, "operand '%s' dim %d is symbolic: this op needs concrete sizes", name, d);
            return 0;
        }
    return 1;
}

static int float_operand(kn_ctx *ctx, const kn_tensor *x, const char *name)
{
    if (dt_is_float((kn_dtype)x->dtype)) return 1;
    kn_err(ctx, KN_EDTYPE, "operand '%s' is %s: a float dtype is needed (convert with kn_to)", name,
           kn_dtype_name((kn_dtype)x->dtype));
    return 0;
}

static int index_operand(kn_ctx *ctx, kn_tensor *t, const char *name)
{
    if (!operand(ctx, t, name)) return 0;
    if (t->dtype == KN_I64 || t->dtype == KN_I32) return 1;
    kn_err(ctx, KN_EDTYPE, "operand '%s' is %s: indices must be i64 or i32", name, kn_dtype_name((kn_dtype)t->dtype));
    return 0;
}

static int dim_of(kn_ctx *ctx, int dim, int ndim) { return tensor_norm_dim(ctx, dim, ndim, "dim"); }

/* A position for a new dim in an ndim-dim tensor: -ndim-1 to ndim. */
static int insert_pos(kn_ctx *ctx, int dim, int ndim)
{
    if (dim >= -ndim - 1 && dim <= ndim) return dim < 0 ? dim + ndim + 1 : dim;
    return kn_err(ctx, KN_EINVAL, "dim %d out of range for a new dim in a %d-dim tensor (expected %d to %d)", dim,
                  ndim, -ndim - 1, ndim), -1;
}

/* Halves accumulate in f32, as PyTorch's kernels do; other dtypes in their own. */
static kn_dtype acc_of(kn_dtype dt) { return dt == KN_F16 || dt == KN_BF16 ? KN_F32 : dt; }

/* What sum, prod and cumsum return: floats keep their dtype, the rest i64. */
static kn_dtype sum_type(kn_dtype dt) { return dt_is_float(dt) ? dt : KN_I64; }

/* x without the dims marked in drop (each of size 1): a view. */
static kn_tensor *drop_dims(kn_ctx *ctx, kn_tensor *x, const uint8_t *drop)
{
    if (!x) return NULL;
    int64_t s[KN_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < x->ndim; d++)
        if (!drop[d]) s[n++] = x->shape[d];
    return p_reshape(ctx, x, n, s);
}

/* x with a size-1 dim inserted before dim d (0 <= d <= ndim < KN_MAX_DIMS): a view. */
static kn_tensor *insert_dim(kn_ctx *ctx, kn_tensor *x, int d)
{
    if (!x) return NULL;
    int64_t s[KN_MAX_DIMS];
    for (int i = 0, j = 0; i <= x->ndim; i++) s[i] = i == d ? 1 : x->shape[j++];
    return p_reshape(ctx, x, x->ndim + 1, s);
}

/* The 0-d constant v broadcast to shape: a view. */
static kn_tensor *filled(kn_ctx *ctx, kn_dtype dt, double v, int ndim, const int64_t *shape)
{
    return broadcast_to(ctx, c_scalar(ctx, dt, v), ndim, shape);
}

/* A scratch array of n handles from the context's allocator. */
static kn_tensor **handles(kn_ctx *ctx, int n)
{
    kn_tensor **a = kn_alloc(ctx, (size_t)n * sizeof *a);
    if (!a) kn_err(ctx, KN_ENOMEM, "out of memory for %d tensor handles", n);
    return a;
}

/* ---- reductions ---- */

typedef struct {
    uint8_t on[KN_MAX_DIMS]; /* on[d]: dim d is reduced */
    int64_t count;           /* elements folded into each result */
} Axes;

/* Reads dims/ndims (ndims 0: every dim) into ax. A 0-d x accepts 0 and -1
 * and reduces nothing, as PyTorch. Returns 0 on error. */
static int axes_of(kn_ctx *ctx, const kn_tensor *x, const int *dims, int ndims, Axes *ax)
{
    uint8_t seen[KN_MAX_DIMS] = {0};
    memset(ax, 0, sizeof *ax);
    if (ndims < 0 || ndims > KN_MAX_DIMS)
        return kn_err(ctx, KN_EINVAL, "operand 'dims' has %d entries (expected 0 to %d)", ndims, KN_MAX_DIMS), 0;
    if (ndims > 0 && !dims) return kn_err(ctx, KN_EINVAL, "operand 'dims' is NULL for %d entries", ndims), 0;
    for (int i = 0; i < ndims; i++) {
        char what[48];
        snprintf(what, sizeof what, "operand 'dims' entry %d: dim", i);
        int d = tensor_norm_dim(ctx, dims[i], x->ndim, what);
        if (d < 0) return 0;
        if (seen[d]) return kn_err(ctx, KN_EINVAL, "operand 'dims' entry %d: dim %d appears twice", i, dims[i]), 0;
        seen[d] = 1;
    }
    ax->count = 1;
    for (int d = 0; d < x->ndim; d++) {
        ax->on[d] = ndims == 0 || seen[d];
        if (ax->on[d]) ax->count *= x->shape[d];
    }
    return 1;
}

static Axes one_axis(const kn_tensor *x, int d)
{
    Axes ax;
    memset(&ax, 0, sizeof ax);
    ax.on[d] = 1;
    ax.count = x->shape[d];
    return ax;
}

/* max and min have no identity: reducing a size-0 dim is an error. */
static int nonempty_axes(kn_ctx *ctx, const kn_tensor *x, const Axes *ax)
{
    for (int d = 0; d < x->ndim; d++)
        if (ax->on[d] && x->shape[d] == 0)
            return kn_err(ctx, KN_ESHAPE, "operand 'x' dim %d has size 0: the reduction has no identity", d), 0;
    return 1;
}

/* The reduction primitive over ax, reduced dims kept as size 1. */
static kn_tensor *reduce(kn_ctx *ctx, Op op, kn_tensor *x, const Axes *ax)
{
    if (!x) return NULL;
    Params p;
    memset(&p, 0, sizeof p);
    p.n = x->ndim;
    int any = 0;
    for (int d = 0; d < x->ndim; d++) any |= (p.i[d] = ax->on[d]) != 0;
    return any ? prim(ctx, op, &x, &p) : x;
}

static kn_tensor *finish(kn_ctx *ctx, kn_tensor *r, const Axes *ax, int keepdim)
{
    return keepdim ? r : drop_dims(ctx, r, ax->on);
}

/* min = c - max(c - x), with c - x exact and order-reversing: -x for floats
 * (NaN stays NaN), -1 - x (bitwise not, no overflow) for signed integers,
 * 255 - x for u8. Bool is the caller's (as u8). */
static kn_tensor *reduce_min(kn_ctx *ctx, kn_tensor *x, const Axes *ax)
{
    if (!x) return NULL;
    kn_dtype dt = (kn_dtype)x->dtype;
    if (dt_is_float(dt)) return prim1(ctx, OP_NEG, reduce(ctx, OP_RMAX, prim1(ctx, OP_NEG, x), ax));
    kn_tensor *c = c_scalar(ctx, dt, dt == KN_U8 ? 255.0 : -1.0);
    return bin(ctx, OP_SUB, c, reduce(ctx, OP_RMAX, bin(ctx, OP_SUB, c, x, dt), ax), dt);
}

/* sum / count; an empty reduction is 0 / 0 = NaN, as torch.mean. */
static kn_tensor *mean_keep(kn_ctx *ctx, kn_tensor *x, const Axes *ax)
{
    return binc(ctx, OP_DIV, reduce(ctx, OP_SUM, x, ax), (double)ax->count);
}

/* Two passes: the mean, then squared deviations summed and divided by
 * max(0, count - correction), as torch.var (0 gives inf or NaN). */
static kn_tensor *var_keep(kn_ctx *ctx, kn_tensor *x, const Axes *ax, int correction)
{
    if (!x) return NULL;
    kn_tensor *dev = bin(ctx, OP_SUB, x, mean_keep(ctx, x, ax), (kn_dtype)x->dtype);
    kn_tensor *ss = reduce(ctx, OP_SUM, prim2(ctx, OP_MUL, dev, dev), ax);
    return binc(ctx, OP_DIV, ss, ax->count > correction ? (double)(ax->count - correction) : 0.0);
}

/* log(sum(exp(x - m))) + m with m the max taken as 0 where infinite, so
 * all -inf rows give -inf rather than NaN (torch.logsumexp); an empty
 * reduction gives log(0) = -inf. */
static kn_tensor *lse_keep(kn_ctx *ctx, kn_tensor *x, const Axes *ax)
{
    if (!x) return NULL;
    kn_dtype dt = (kn_dtype)x->dtype;
    kn_tensor *m = reduce(ctx, OP_RMAX, x, ax);
    if (!m) return NULL;
    kn_tensor *inf = bin(ctx, OP_CMPEQ, prim1(ctx, OP_ABS, m), c_scalar(ctx, dt, INFINITY), dt);
    m = p_where(ctx, inf, filled(ctx, dt, 0.0, m->ndim, m->shape), m);
    kn_tensor *e = prim1(ctx, OP_EXP, bin(ctx, OP_SUB, x, m, dt));
    return prim2(ctx, OP_ADD, prim1(ctx, OP_LOG, reduce(ctx, OP_SUM, e, ax)), m);
}

kn_tensor *kn_sum(kn_ctx *ctx, kn_tensor *x, const int *dims, int ndims, int keepdim)
{
    ENTER(ctx, "kn_sum");
    Axes ax;
    if (!operand(ctx, x, "x") || !axes_of(ctx, x, dims, ndims, &ax)) return LEAVE(ctx, NULL);
    kn_tensor *s = reduce(ctx, OP_SUM, p_cast(ctx, x, sum_type((kn_dtype)x->dtype)), &ax);
    return LEAVE(ctx, finish(ctx, s, &ax, keepdim));
}

kn_tensor *kn_mean(kn_ctx *ctx, kn_tensor *x, const int *dims, int ndims, int keepdim)
{
    ENTER(ctx, "kn_mean");
    Axes ax;
    if (!operand(ctx, x, "x") || !float_operand(ctx, x, "x") || !axes_of(ctx, x, dims, ndims, &ax))
        return LEAVE(ctx, NULL);
    kn_tensor *m = mean_keep(ctx, p_cast(ctx, x, acc_of((kn_dtype)x->dtype)), &ax);
    return LEAVE(ctx, finish(ctx, p_cast(ctx, m, (kn_dtype)x->dtype), &ax, keepdim));
}

static kn_tensor *var_std(kn_ctx *ctx, const char *name, kn_tensor *x, const int *dims, int ndims, int correction,
                          int keepdim, int root)
{
    ENTER(ctx, name);
    Axes ax;
    if (!operand(ctx, x, "x") || !float_operand(ctx, x, "x") || !axes_of(ctx, x, dims, ndims, &ax))
        return LEAVE(ctx, NULL);
    kn_tensor *v = var_keep(ctx, p_cast(ctx, x, acc_of((kn_dtype)x->dtype)), &ax, correction);
    if (root) v = prim1(ctx, OP_SQRT, v);
    return LEAVE(ctx, finish(ctx, p_cast(ctx, v, (kn_dtype)x->dtype), &ax, keepdim));
}

kn_tensor *kn_var(kn_ctx *ctx, kn_tensor *x, const int *dims, int ndims, int correction, int keepdim)
{
    return var_std(ctx, "kn_var", x, dims, ndims, correction, keepdim, 0);
}

kn_tensor *kn_std(kn_ctx *ctx, kn_tensor *x, const int *dims, int ndims, int correction, int keepdim)
{
    return var_std(ctx, "kn_std", x, dims, ndims, correction, keepdim, 1);
}

/* Integer and bool inputs compute in f32, as later PyTorch versions do. */
kn_tensor *kn_logsumexp(kn_ctx *ctx, kn_tensor *x, const int *dims, int ndims, int keepdim)
{
    ENTER(ctx, "kn_logsumexp");
    Axes ax;
    if (!operand(ctx, x, "x") || !axes_of(ctx, x, dims, ndims, &ax)) return LEAVE(ctx, NULL);
    kn_dtype dt = float_of((kn_dtype)x->dtype);
    kn_tensor *r = lse_keep(ctx, p_cast(ctx, x, acc_of(dt)), &ax);
    return LEAVE(ctx, finish(ctx, p_cast(ctx, r, dt), &ax, keepdim));
}

static kn_tensor *extreme(kn_ctx *ctx, const char *name, kn_tensor *x, const int *dims, int ndims, int keepdim,
                          int is_min)
{
    ENTER(ctx, name);
    Axes ax;
    if (!operand(ctx, x, "x") || !axes_of(ctx, x, dims, ndims, &ax) || !nonempty_axes(ctx, x, &ax))
        return LEAVE(ctx, NULL);
    kn_dtype dt = (kn_dtype)x->dtype;
    kn_tensor *y = p_cast(ctx, x, dt == KN_BOOL ? KN_U8 : dt); /* the max primitive takes no bool */
    y = is_min ? reduce_min(ctx, y, &ax) : reduce(ctx, OP_RMAX, y, &ax);
    return LEAVE(ctx, finish(ctx, p_cast(ctx, y, dt), &ax, keepdim));
}

kn_tensor *kn_amax(kn_ctx *ctx, kn_tensor *x, const int *dims, int ndims, int keepdim)
{
    return extreme(ctx, "kn_amax", x, dims, ndims, keepdim, 0);
}

kn_tensor *kn_amin(kn_ctx *ctx, kn_tensor *x, const int *dims, int ndims, int keepdim)
{
    return extreme(ctx, "kn_amin", x, dims, ndims, keepdim, 1);
}

/* The first position of the extreme along d (size n > 0), kept as size 1:
 * score n - position where x hits the extreme or is NaN (which torch
 * counts as both max and min), else 0; n minus the best score is the
 * first hit. */
static kn_tensor *first_extreme(kn_ctx *ctx, kn_tensor *x, int d, int is_min)
{
    if (x && x->dtype == KN_BOOL) x = p_cast(ctx, x, KN_U8);
    if (!x) return NULL;
    kn_dtype dt = (kn_dtype)x->dtype;
    Axes ax = one_axis(x, d);
    double n = (double)x->shape[d];
    kn_tensor *e = is_min ? reduce_min(ctx, x, &ax) : reduce(ctx, OP_RMAX, x, &ax);
    kn_tensor *hit = bin(ctx, OP_CMPEQ, x, e, dt);
    if (dt_is_float(dt)) hit = prim2(ctx, OP_MAX, hit, binc(ctx, OP_CMPEQ, prim2(ctx, OP_CMPEQ, x, x), 0.0));
    kn_tensor *pos = p_iota(ctx, KN_I64, x->ndim, x->shape, d);
    kn_tensor *score = bin(ctx, OP_SUB, c_scalar(ctx, KN_I64, n), pos, KN_I64);
    score = p_where(ctx, hit, score, filled(ctx, KN_I64, 0.0, x->ndim, x->shape));
    return bin(ctx, OP_SUB, c_scalar(ctx, KN_I64, n), reduce(ctx, OP_RMAX, score, &ax), KN_I64);
}

/* KN_NODIM (or a 0-d x) flattens and gives a 0-d result; keepdim is then
 * ignored, as in PyTorch 1.13. */
static kn_tensor *arg_extreme(kn_ctx *ctx, const char *name, kn_tensor *x, int dim, int keepdim, int is_min)
{
    ENTER(ctx, name);
    if (!operand(ctx, x, "x")) return LEAVE(ctx, NULL);
    int64_t numel = tensor_numel(x->ndim, x->shape);
    if (dim == KN_NODIM || x->ndim == 0) {
        if (dim != KN_NODIM && dim_of(ctx, dim, 0) < 0) return LEAVE(ctx, NULL);
        if (numel == 0) return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'x' has no elements to pick from"));
        kn_tensor *r = first_extreme(ctx, p_reshape(ctx, x, 1, &numel), 0, is_min);
        return LEAVE(ctx, p_reshape(ctx, r, 0, NULL));
    }
    int d = dim_of(ctx, dim, x->ndim);
    if (d < 0) return LEAVE(ctx, NULL);
    if (x->shape[d] == 0)
        return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'x' dim %d has size 0: no element to pick", d));
    Axes ax = one_axis(x, d);
    return LEAVE(ctx, finish(ctx, first_extreme(ctx, x, d, is_min), &ax, keepdim));
}

kn_tensor *kn_argmax(kn_ctx *ctx, kn_tensor *x, int dim, int keepdim)
{
    return arg_extreme(ctx, "kn_argmax", x, dim, keepdim, 0);
}

kn_tensor *kn_argmin(kn_ctx *ctx, kn_tensor *x, int dim, int keepdim)
{
    return arg_extreme(ctx, "kn_argmin", x, dim, keepdim, 1);
}

/* The longest dim a scan in a graph generic in its size covers: 2^SCAN_STEPS. */
enum { SCAN_STEPS = 16 };
static kn_tensor *scan_generic(kn_ctx *ctx, kn_tensor *y, int d, int op);

/* Product along d by halving: element i pairs with i + n/2, an odd n first
 * gets a partner 1 by padding. log2(n) steps of O(n) work, exact for
 * integers (wrapping multiplication is associative), and zeros, signs and
 * infinities come out as a sequential product's. An empty dim pads to a
 * single 1. Returns y with dim d of size 1. A graph generic in n
 * (the tracer's generic hook) takes the last element of the product scan instead, a
 * form that does not depend on n (the same products in another order). */
static kn_tensor *prod_along(kn_ctx *ctx, kn_tensor *y, int d)
{
    int64_t after[KN_MAX_DIMS] = {0};
    after[d] = 1;
    if (y && ctx->trace && ctx->capture && ctx->capture->generic(ctx) && y->shape[d] >= 2 && y->shape[d] < ((int64_t)1 << SCAN_STEPS))
        return p_slice(ctx, scan_generic(ctx, y, d, OP_MUL), d, y->shape[d] - 1, 1, 1);
    while (y && y->shape[d] != 1) {
        if (y->shape[d] % 2 || y->shape[d] == 0) {
            y = p_pad(ctx, y, NULL, after, 1.0);
            continue;
        }
        int64_t h = y->shape[d] / 2;
        y = prim2(ctx, OP_MUL, p_slice(ctx, y, d, 0, h, 1), p_slice(ctx, y, d, h, h, 1));
    }
    return y;
}

/* dim KN_NODIM: the product of every element; keepdim then keeps every dim
 * as size 1, else the result is 0-d. */
kn_tensor *kn_prod(kn_ctx *ctx, kn_tensor *x, int dim, int keepdim)
{
    ENTER(ctx, "kn_prod");
    if (!operand(ctx, x, "x")) return LEAVE(ctx, NULL);
    kn_dtype dt = sum_type((kn_dtype)x->dtype);
    kn_tensor *y = p_cast(ctx, x, acc_of(dt));
    if (dim == KN_NODIM) {
        int64_t n = tensor_numel(x->ndim, x->shape), ones[KN_MAX_DIMS] = {1, 1, 1, 1, 1, 1, 1, 1};
        y = prod_along(ctx, p_reshape(ctx, y, 1, &n), 0);
        return LEAVE(ctx, p_reshape(ctx, p_cast(ctx, y, dt), keepdim ? x->ndim : 0, ones));
    }
    int d = dim_of(ctx, dim, x->ndim);
    if (d < 0) return LEAVE(ctx, NULL);
    if (x->ndim == 0) return LEAVE(ctx, p_cast(ctx, y, dt));
    Axes ax = one_axis(x, d);
    return LEAVE(ctx, finish(ctx, p_cast(ctx, prod_along(ctx, y, d), dt), &ax, keepdim));
}

/* x, plus -0 read at offset bound - n of a constant expanded to bound - n + 1
 * elements: x unchanged (x + -0 is x, -0 too), through views whose sizes hold
 * only while n <= bound. A graph generic in n's size (capture.c) then holds
 * only up to bound, and a longer dim traces anew. */
static kn_tensor *holds_up_to(kn_ctx *ctx, kn_tensor *x, int64_t n, int64_t bound)
{
    int64_t one = 1, len = bound - n + 1;
    kn_tensor *c = p_expand(ctx, p_reshape(ctx, c_scalar(ctx, (kn_dtype)x->dtype, -0.0), 1, &one), 1, &len);
    return bin(ctx, OP_ADD, x, p_slice(ctx, c, 0, bound - n, 1, 1), (kn_dtype)x->dtype);
}

/* The scan of y along d by op (OP_ADD, or OP_MUL for prod) in a form that
 * does not depend on n = its size, for a graph generic in n
 * (the tracer's generic hook): SCAN_STEPS steps y = y op (y shifted by s = 1, 2, 4,
 * ...), each shift a gather at max(i - s, 0) kept where i >= s (else op's
 * identity), which cover any n <= 2^SCAN_STEPS; the graph holds up to that
 * (holds_up_to). The additions are the eager scan's, then 0s (which make a
 * -0 +0, as torch's cumsum does). It runs along the last dim (d swapped
 * there and back: views), where a gather's offset is the index itself,
 * whatever the other sizes. */
static kn_tensor *scan_generic(kn_ctx *ctx, kn_tensor *y, int d, int op)
{
    int last = y->ndim - 1, perm[KN_MAX_DIMS] = {0};
    for (int e = 0; e <= last; e++) perm[e] = e == d ? last : e == last ? d : e;
    y = p_permute(ctx, y, perm);
    int64_t n = y ? y->shape[last] : 0, line[KN_MAX_DIMS];
    for (int e = 0; e <= last; e++) line[e] = e == last ? n : 1;
    kn_tensor *i = p_reshape(ctx, p_iota(ctx, KN_I64, 1, &n, 0), last + 1, line); /* (1, ..., 1, n) */
    kn_tensor *zero = c_scalar(ctx, y ? (kn_dtype)y->dtype : KN_F32, op == OP_MUL ? 1.0 : 0.0);
    y = y ? holds_up_to(ctx, y, n, (int64_t)1 << SCAN_STEPS) : NULL;
    for (int k = 0; k < SCAN_STEPS && y; k++) {
        double s = (double)((int64_t)1 << k);
        kn_tensor *at = p_expand(ctx, binc(ctx, OP_MAX, binc(ctx, OP_SUB, i, s), 0.0), y->ndim, y->shape);
        y = prim2(ctx, op, y, kn_where(ctx, binc(ctx, OP_CMPLT, i, s), zero, p_gather(ctx, y, last, at)));
    }
    return p_permute(ctx, y, perm);
}

/* Hillis-Steele inclusive scan (Hillis and Steele, "Data parallel
 * algorithms", CACM 1986): y += y shifted by s along d, s = 1, 2, 4, ...;
 * the shift is a slice padded with zeros in front. log2(n) steps of O(n);
 * exact for integers, a tree order of additions for floats. A graph generic
 * in the dim's size takes a form of SCAN_STEPS steps whatever n
 * (scan_generic). */
kn_tensor *kn_cumsum(kn_ctx *ctx, kn_tensor *x, int dim)
{
    ENTER(ctx, "kn_cumsum");
    if (!operand(ctx, x, "x")) return LEAVE(ctx, NULL);
    int d = dim_of(ctx, dim, x->ndim);
    if (d < 0) return LEAVE(ctx, NULL);
    kn_dtype dt = sum_type((kn_dtype)x->dtype);
    kn_tensor *y = p_cast(ctx, x, acc_of(dt));
    int64_t n = x->ndim ? x->shape[d] : 1, before[KN_MAX_DIMS] = {0};
    if (ctx->trace && ctx->capture && ctx->capture->generic(ctx) && x->ndim && n < ((int64_t)1 << SCAN_STEPS))
        return LEAVE(ctx, p_cast(ctx, scan_generic(ctx, y, d, OP_ADD), dt));
    for (int64_t s = 1; s < n && y; s *= 2) {
        before[d] = s;
        y = prim2(ctx, OP_ADD, y, p_pad(ctx, p_slice(ctx, y, d, 0, n - s, 1), before, NULL, 0.0));
    }
    return LEAVE(ctx, p_cast(ctx, y, dt));
}

/* ---- reshaping ---- */

static int check_shape_arg(kn_ctx *ctx, int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > KN_MAX_DIMS)
        return kn_err(ctx, KN_EINVAL, "operand 'shape' has %d dims (expected 0 to %d)", ndim, KN_MAX_DIMS), 0;
    if (ndim > 0 && !shape) return kn_err(ctx, KN_EINVAL, "operand 'shape' is NULL for %d dims", ndim), 0;
    return 1;
}

/* Copies shape into out with its one -1 inferred from x's element count.
 * Returns 0 with the error set if no such shape holds x's elements. */
static int infer_shape(kn_ctx *ctx, const kn_tensor *x, int ndim, const int64_t *shape, int64_t *out)
{
    char b0[128], b1[96];
    if (!check_shape_arg(ctx, ndim, shape)) return 0;
    int64_t known = 1, numel = tensor_numel(x->ndim, x->shape);
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1 && infer >= 0)
            return kn_err(ctx, KN_EINVAL, "operand 'shape' dims %d and %d are both -1: only one can be inferred",
                          infer, i), 0;
        if (shape[i] == -1) infer = i;
        else if (shape[i] < 0)
            return kn_err(ctx, KN_EINVAL, "operand 'shape' dim %d has invalid size %lld", i, (long long)shape[i]), 0;
        else if (shape[i] > 0 && known > INT64_MAX / shape[i])
            return kn_err(ctx, KN_ESHAPE, "operand 'shape' %s has too many elements",
                          fmt_list(b0, sizeof b0, ndim, shape)), 0;
        else known *= shape[i];
    }
    if (infer >= 0 && known == 0)
        return kn_err(ctx, KN_ESHAPE, "operand 'shape' %s: dim %d (-1) is ambiguous when the other sizes multiply to 0",
                      fmt_list(b0, sizeof b0, ndim, shape), infer), 0;
    if (infer >= 0 && numel % known == 0) out[infer] = numel / known;
    else if (infer >= 0 || known != numel)
        return kn_err(ctx, KN_ESHAPE, "operand 'shape' %s is invalid for x %s of %lld elements",
                      fmt_list(b0, sizeof b0, ndim, shape), fmt_shape(b1, sizeof b1, x), (long long)numel), 0;
    return 1;
}

kn_tensor *kn_reshape(kn_ctx *ctx, kn_tensor *x, int ndim, const int64_t *shape)
{
    ENTER(ctx, "kn_reshape");
    int64_t s[KN_MAX_DIMS];
    if (!operand(ctx, x, "x") || !infer_shape(ctx, x, ndim, shape, s)) return LEAVE(ctx, NULL);
    return LEAVE(ctx, p_reshape(ctx, x, ndim, s));
}

static int sym_shape(const kn_tensor *x)
{
    for (int d = 0; d < x->ndim; d++)
        if (DIM_IS_SYM(x->shape[d])) return 1;
    return 0;
}

/* A view or an error, never a copy: as eager's for a traced x too, whose
 * layout is the one eager's would have (prim.c). */
kn_tensor *kn_view(kn_ctx *ctx, kn_tensor *x, int ndim, const int64_t *shape)
{
    ENTER(ctx, "kn_view");
    int64_t s[KN_MAX_DIMS];
    if (!operand(ctx, x, "x") || !infer_shape(ctx, x, ndim, shape, s)) return LEAVE(ctx, NULL);
    if (ctx->capture && !ctx->capture->layout_known(ctx, x))
        return LEAVE(ctx, kn_err(ctx, KN_EUNSUPPORTED, "x is a view of an input whose strides change with the "
                                 "dynamic size: whether it can be viewed is not known for every size"));
    if (!sym_shape(x) && !prim_can_view(x, ndim, s)) {
        char b0[96], b1[128], b2[128];
        return LEAVE(ctx, kn_err(ctx, KN_ESHAPE,
                                 "x %s with strides %s cannot be viewed as %s: a new dim would span memory that "
                                 "is not contiguous; use kn_reshape (which copies)",
                                 fmt_shape(b0, sizeof b0, x), fmt_list(b1, sizeof b1, x->ndim, x->stride),
                                 fmt_list(b2, sizeof b2, ndim, s)));
    }
    return LEAVE(ctx, p_reshape(ctx, x, ndim, s));
}

kn_tensor *kn_flatten(kn_ctx *ctx, kn_tensor *x, int start_dim, int end_dim)
{
    ENTER(ctx, "kn_flatten");
    if (!operand(ctx, x, "x")) return LEAVE(ctx, NULL);
    int s = tensor_norm_dim(ctx, start_dim, x->ndim, "start_dim");
    int e = s < 0 ? -1 : tensor_norm_dim(ctx, end_dim, x->ndim, "end_dim");
    if (e < 0) return LEAVE(ctx, NULL);
    if (x->ndim == 0) return LEAVE(ctx, p_reshape(ctx, x, 1, (const int64_t[]){1}));
    if (s > e)
        return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "start_dim %d comes after end_dim %d", start_dim, end_dim));
    int64_t shape[KN_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d <= s || d > e) shape[n++] = x->shape[d];
        else shape[n - 1] *= x->shape[d];
    }
    return LEAVE(ctx, p_reshape(ctx, x, n, shape));
}

kn_tensor *kn_squeeze(kn_ctx *ctx, kn_tensor *x, int dim)
{
    ENTER(ctx, "kn_squeeze");
    if (!operand(ctx, x, "x")) return LEAVE(ctx, NULL);
    uint8_t drop[KN_MAX_DIMS] = {0};
    if (dim == KN_NODIM) {
        for (int d = 0; d < x->ndim; d++) drop[d] = x->shape[d] == 1;
    } else {
        int d = dim_of(ctx, dim, x->ndim);
        if (d < 0) return LEAVE(ctx, NULL);
        if (x->ndim) drop[d] = x->shape[d] == 1; /* other sizes: x unchanged, as torch */
    }
    return LEAVE(ctx, drop_dims(ctx, x, drop));
}

kn_tensor *kn_unsqueeze(kn_ctx *ctx, kn_tensor *x, int dim)
{
    ENTER(ctx, "kn_unsqueeze");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL); /* no sizes used: symbolic dims pass */
    int d = insert_pos(ctx, dim, x->ndim);
    if (d < 0) return LEAVE(ctx, NULL);
    if (x->ndim == KN_MAX_DIMS)
        return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "operand 'x' has %d dims already, the most kiln supports", x->ndim));
    return LEAVE(ctx, insert_dim(ctx, x, d));
}

kn_tensor *kn_transpose(kn_ctx *ctx, kn_tensor *x, int dim0, int dim1)
{
    ENTER(ctx, "kn_transpose");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL); /* no sizes used: symbolic dims pass */
    int a = tensor_norm_dim(ctx, dim0, x->ndim, "dim0");
    int b = a < 0 ? -1 : tensor_norm_dim(ctx, dim1, x->ndim, "dim1");
    if (b < 0) return LEAVE(ctx, NULL);
    int perm[KN_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) perm[d] = d == a ? b : d == b ? a : d;
    return LEAVE(ctx, x->ndim ? p_permute(ctx, x, perm) : x);
}

kn_tensor *kn_permute(kn_ctx *ctx, kn_tensor *x, const int *perm)
{
    ENTER(ctx, "kn_permute");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL); /* no sizes used: symbolic dims pass */
    if (x->ndim > 0 && !perm)
        return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "operand 'perm' is NULL for a %d-dim x", x->ndim));
    int p[KN_MAX_DIMS], seen[KN_MAX_DIMS] = {0};
    for (int i = 0; i < x->ndim; i++) {
        char what[48];
        snprintf(what, sizeof what, "operand 'perm' entry %d: dim", i);
        if ((p[i] = tensor_norm_dim(ctx, perm[i], x->ndim, what)) < 0) return LEAVE(ctx, NULL);
        if (seen[p[i]]++)
            return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "operand 'perm' entry %d: dim %d appears twice", i, perm[i]));
    }
    return LEAVE(ctx, x->ndim ? p_permute(ctx, x, p) : x);
}

/* Sizes of -1 keep x's; new leading dims take any size >= 0 but not -1. */
kn_tensor *kn_expand(kn_ctx *ctx, kn_tensor *x, int ndim, const int64_t *shape)
{
    ENTER(ctx, "kn_expand");
    if (!operand(ctx, x, "x") || !check_shape_arg(ctx, ndim, shape)) return LEAVE(ctx, NULL);
    if (ndim < x->ndim)
        return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'shape' has %d dims, fewer than x's %d", ndim, x->ndim));
    int lead = ndim - x->ndim;
    int64_t s[KN_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        int64_t have = i < lead ? -1 : x->shape[i - lead];
        s[i] = shape[i] == -1 ? have : shape[i];
        if (s[i] < 0)
            return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "operand 'shape' dim %d: size %lld is invalid%s", i,
                                     (long long)shape[i], i < lead ? " for a new leading dim" : ""));
        if (i >= lead && have != 1 && s[i] != have)
            return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'shape' dim %d: cannot expand x dim %d of size %lld "
                                     "to %lld", i, i - lead, (long long)have, (long long)s[i]));
    }
    return LEAVE(ctx, broadcast_to(ctx, x, ndim, s));
}

/* x itself when contiguous; else a copy by a CAST to x's own dtype, the
 * elementwise primitive that is an exact identity for every dtype (x + 0
 * would turn -0.0 into +0.0). RESHAPE cannot serve: it views whatever it
 * can. A traced x has the layout eager's would have (prim.c), so a trace
 * copies where eager does: the copy is fresh, not a view of x's storage
 * (kn_compile's outputs alias what eager's do). Symbolic dims have no
 * layout to go by: x itself. */
kn_tensor *kn_contiguous(kn_ctx *ctx, kn_tensor *x)
{
    ENTER(ctx, "kn_contiguous");
    if (!tensor_check(ctx, x, "x")) return LEAVE(ctx, NULL); /* no sizes used: symbolic dims pass */
    if (sym_shape(x) || (kn_is_contiguous(x) && (!ctx->capture || ctx->capture->layout_known(ctx, x)))) return LEAVE(ctx, x);
    Params p;
    memset(&p, 0, sizeof p);
    p.dtype = x->dtype;
    return LEAVE(ctx, prim(ctx, OP_CAST, &x, &p));
}

/* ---- slicing ---- */

/* A Python slice bound: negative counts from the end, then clamped to [0, n]. */
static int64_t clamp_bound(int64_t v, int64_t n)
{
    if (v < 0) v += n;
    return v < 0 ? 0 : v > n ? n : v;
}

static int sliceable(kn_ctx *ctx, const kn_tensor *x)
{
    if (x->ndim > 0) return 1;
    return kn_err(ctx, KN_EINVAL, "operand 'x' is 0-d: there is no dim to slice"), 0;
}

kn_tensor *kn_slice(kn_ctx *ctx, kn_tensor *x, int dim, int64_t start, int64_t stop, int64_t step)
{
    ENTER(ctx, "kn_slice");
    if (!operand(ctx, x, "x") || !sliceable(ctx, x)) return LEAVE(ctx, NULL);
    int d = dim_of(ctx, dim, x->ndim);
    if (d < 0) return LEAVE(ctx, NULL);
    if (step <= 0) return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "step %lld: slice step must be positive", (long long)step));
    int64_t n = x->shape[d];
    start = clamp_bound(start, n);
    stop = clamp_bound(stop, n);
    int64_t count = stop > start ? (stop - start - 1) / step + 1 : 0;
    return LEAVE(ctx, p_slice(ctx, x, d, count ? start : 0, count, step));
}

kn_tensor *kn_narrow(kn_ctx *ctx, kn_tensor *x, int dim, int64_t start, int64_t length)
{
    ENTER(ctx, "kn_narrow");
    if (!operand(ctx, x, "x") || !sliceable(ctx, x)) return LEAVE(ctx, NULL);
    int d = dim_of(ctx, dim, x->ndim);
    if (d < 0) return LEAVE(ctx, NULL);
    int64_t n = x->shape[d];
    if (start < -n || start > n)
        return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "start %lld out of range for dim %d of size %lld (expected %lld "
                                 "to %lld)", (long long)start, d, (long long)n, (long long)-n, (long long)n));
    if (start < 0) start += n;
    if (length < 0 || length > n - start)
        return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "start %lld + length %lld does not fit dim %d of size %lld",
                                 (long long)start, (long long)length, d, (long long)n));
    return LEAVE(ctx, p_slice(ctx, x, d, start, length, 1));
}

/* F.pad, constant mode: pad holds (before, after) pairs from the last dim
 * backwards. Positive amounts pad first (one PAD), then negative ones crop
 * with slices, so a crop may also eat padding, as PyTorch's pad-then-narrow. */
kn_tensor *kn_pad(kn_ctx *ctx, kn_tensor *x, int npad, const int64_t *pad, double value)
{
    ENTER(ctx, "kn_pad");
    if (!operand(ctx, x, "x")) return LEAVE(ctx, NULL);
    if (npad < 0 || npad % 2 || npad / 2 > x->ndim)
        return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "operand 'pad' has %d entries: needs an even number, at most 2 per "
                                 "dim of x (%d dims)", npad, x->ndim));
    if (npad > 0 && !pad) return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "operand 'pad' is NULL for %d entries", npad));
    int64_t lo[KN_MAX_DIMS] = {0}, hi[KN_MAX_DIMS] = {0}, plo[KN_MAX_DIMS] = {0}, phi[KN_MAX_DIMS] = {0};
    const int64_t lim = (int64_t)1 << 62;
    for (int j = 0; j < npad / 2; j++) {
        int d = x->ndim - 1 - j;
        lo[d] = pad[2 * j], hi[d] = pad[2 * j + 1];
        if (lo[d] < -lim || lo[d] > lim || hi[d] < -lim || hi[d] > lim || (double)x->shape[d] + (double)lo[d] + (double)hi[d] < 0)
            return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'pad' entries %d, %d: padding dim %d of size %lld by "
                                     "(%lld, %lld) gives no valid size", 2 * j, 2 * j + 1, d,
                                     (long long)x->shape[d], (long long)lo[d], (long long)hi[d]));
        plo[d] = lo[d] > 0 ? lo[d] : 0;
        phi[d] = hi[d] > 0 ? hi[d] : 0;
    }
    kn_tensor *y = p_pad(ctx, x, plo, phi, value);
    for (int d = 0; d < x->ndim && y; d++) {
        int64_t start = lo[d] < 0 ? -lo[d] : 0, size = x->shape[d] + lo[d] + hi[d];
        y = p_slice(ctx, y, d, size ? start : 0, size, 1);
    }
    return LEAVE(ctx, y);
}

/* ---- joining and splitting ---- */

/* cat skips 1-D tensors of size 0, as PyTorch's legacy rule. */
static int legacy_empty(const kn_tensor *t) { return t->ndim == 1 && t->shape[0] == 0; }

/* Checks every xs[i]: present, concrete, not 0-d. Returns 0 on error. */
static int check_list(kn_ctx *ctx, kn_tensor *const *xs, int n)
{
    if (n <= 0) return kn_err(ctx, KN_EINVAL, "operand 'xs' has %d tensors: at least one is needed", n), 0;
    if (!xs) return kn_err(ctx, KN_EINVAL, "operand 'xs' is NULL for %d tensors", n), 0;
    for (int i = 0; i < n; i++) {
        char name[24];
        snprintf(name, sizeof name, "xs[%d]", i);
        if (!operand(ctx, xs[i], name)) return 0;
    }
    return 1;
}

/* Every non-skipped tensor matches ref (xs[r]) except along d. */
static int check_cat_shapes(kn_ctx *ctx, kn_tensor *const *xs, int n, int r, int d)
{
    const kn_tensor *ref = xs[r];
    for (int i = 0; i < n; i++) {
        if (legacy_empty(xs[i])) continue;
        if (xs[i]->ndim != ref->ndim)
            return kn_err(ctx, KN_ESHAPE, "operand 'xs[%d]' has %d dims, xs[%d] has %d", i, xs[i]->ndim, r,
                          ref->ndim), 0;
        for (int e = 0; e < ref->ndim; e++)
            if (e != d && xs[i]->shape[e] != ref->shape[e])
                return kn_err(ctx, KN_ESHAPE, "operand 'xs[%d]' dim %d: expected %lld (xs[%d] dim %d), got %lld", i, e,
                              (long long)ref->shape[e], r, e, (long long)xs[i]->shape[e]), 0;
    }
    return 1;
}

/* a ++ b along d: both padded to the joint length, then picked by position,
 * where(i < len(a), a, b). No arithmetic, so exact for every dtype. */
static kn_tensor *join2(kn_ctx *ctx, kn_tensor *a, kn_tensor *b, int d)
{
    if (!a || !b) return NULL;
    int64_t la = a->shape[d], lb = b->shape[d], before[KN_MAX_DIMS] = {0}, after[KN_MAX_DIMS] = {0};
    if (la == 0 || lb == 0) return la ? a : b;
    after[d] = lb, before[d] = la;
    kn_tensor *pa = p_pad(ctx, a, NULL, after, 0.0), *pb = p_pad(ctx, b, before, NULL, 0.0);
    if (!pa || !pb) return NULL;
    int64_t line[KN_MAX_DIMS];
    for (int e = 0; e < pa->ndim; e++) line[e] = e == d ? pa->shape[d] : 1;
    kn_tensor *first = bin(ctx, OP_CMPLT, p_iota(ctx, KN_I64, pa->ndim, line, d), c_scalar(ctx, KN_I64, (double)la),
                           KN_I64);
    return p_where(ctx, p_expand(ctx, first, pa->ndim, pa->shape), pa, pb);
}

/* A balanced tree of joins: O(total * log n) work, depth log n. */
static kn_tensor *join_range(kn_ctx *ctx, kn_tensor **xs, int lo, int hi, int d)
{
    if (hi - lo == 1) return xs[lo];
    int mid = lo + (hi - lo) / 2;
    return join2(ctx, join_range(ctx, xs, lo, mid, d), join_range(ctx, xs, mid, hi, d), d);
}

static kn_tensor *cat_checked(kn_ctx *ctx, kn_tensor *const *xs, int n, int dim)
{
    int r = 0;
    while (r < n && legacy_empty(xs[r])) r++;
    kn_dtype dt = result_type(n, xs);
    if (r == n) return p_full(ctx, dt, 1, (const int64_t[]){0}, 0.0); /* all skipped */
    int d = dim_of(ctx, dim, xs[r]->ndim);
    if (d < 0 || !check_cat_shapes(ctx, xs, n, r, d)) return NULL;
    kn_tensor **ys = handles(ctx, n), *out = NULL;
    if (!ys) return NULL;
    int m = 0, ok = 1;
    for (int i = 0; i < n && ok; i++)
        if (!legacy_empty(xs[i])) ok = (ys[m++] = p_cast(ctx, xs[i], dt)) != NULL;
    if (ok) out = join_range(ctx, ys, 0, m, d);
    kn_dealloc(ctx, ys, (size_t)n * sizeof *ys);
    return out;
}

kn_tensor *kn_cat(kn_ctx *ctx, kn_tensor *const *xs, int n, int dim)
{
    ENTER(ctx, "kn_cat");
    if (!check_list(ctx, xs, n)) return LEAVE(ctx, NULL);
    for (int i = 0; i < n; i++)
        if (xs[i]->ndim == 0)
            return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "operand 'xs[%d]' is 0-d: cat needs 1 dim or more (kn_stack "
                                     "takes 0-d tensors)", i));
    return LEAVE(ctx, cat_checked(ctx, xs, n, dim));
}

kn_tensor *kn_stack(kn_ctx *ctx, kn_tensor *const *xs, int n, int dim)
{
    ENTER(ctx, "kn_stack");
    if (!check_list(ctx, xs, n)) return LEAVE(ctx, NULL);
    char b0[96], b1[96];
    for (int i = 1; i < n; i++)
        if (xs[i]->ndim != xs[0]->ndim || memcmp(xs[i]->shape, xs[0]->shape, xs[0]->ndim * sizeof(int64_t)))
            return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'xs[%d]' has shape %s but xs[0] has %s: stack needs "
                                     "equal shapes", i, fmt_shape(b0, sizeof b0, xs[i]),
                                     fmt_shape(b1, sizeof b1, xs[0])));
    int d = insert_pos(ctx, dim, xs[0]->ndim);
    if (d < 0) return LEAVE(ctx, NULL);
    if (xs[0]->ndim == KN_MAX_DIMS)
        return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "operands have %d dims: stacking makes one more than kiln supports",
                                 KN_MAX_DIMS));
    kn_tensor **ys = handles(ctx, n), *out = NULL;
    if (!ys) return LEAVE(ctx, NULL);
    int ok = 1;
    for (int i = 0; i < n && ok; i++) ok = (ys[i] = insert_dim(ctx, xs[i], d)) != NULL;
    if (ok) out = cat_checked(ctx, ys, n, d);
    kn_dealloc(ctx, ys, (size_t)n * sizeof *ys);
    return LEAVE(ctx, out);
}

/* Writes count narrow views of x along d, each `size` long but the last,
 * which holds what is left; returns count, or -1 on error. More pieces
 * than max_out: nothing written. */
static int split_pieces(kn_ctx *ctx, kn_tensor *x, int d, int64_t size, int64_t count, kn_tensor **out, int max_out)
{
    if (max_out < 0) return kn_err(ctx, KN_EINVAL, "max_out is %d: must be >= 0", max_out), -1;
    if (max_out > 0 && !out) return kn_err(ctx, KN_EINVAL, "operand 'out' is NULL for max_out %d", max_out), -1;
    if (count > 0x7fffffff)
        return kn_err(ctx, KN_EINVAL, "dim %d would split into %lld pieces, more than an int counts", d,
                      (long long)count), -1;
    if (count > max_out) return (int)count;
    int64_t n = x->shape[d];
    for (int64_t i = 0; i < count; i++) {
        int64_t start = i * size, len = i < count - 1 ? size : n - start;
        if (!(out[i] = p_slice(ctx, x, d, start, len, 1))) return -1;
    }
    return (int)count;
}

static int split_impl(kn_ctx *ctx, kn_tensor *x, int64_t split_size, int dim, kn_tensor **out, int max_out)
{
    if (!operand(ctx, x, "x") || !sliceable(ctx, x)) return -1;
    int d = dim_of(ctx, dim, x->ndim);
    if (d < 0) return -1;
    int64_t n = x->shape[d];
    if (split_size < 0 || (split_size == 0 && n > 0))
        return kn_err(ctx, KN_EINVAL, "split_size %lld is invalid for dim %d of size %lld (needs > 0, or 0 for an "
                      "empty dim)", (long long)split_size, d, (long long)n), -1;
    int64_t count = n == 0 ? 1 : (n - 1) / split_size + 1;
    return split_pieces(ctx, x, d, split_size, count, out, max_out);
}

/* torch.chunk: pieces of ceil(n / chunks), so possibly fewer than chunks;
 * an empty dim gives chunks empty pieces. */
static int chunk_impl(kn_ctx *ctx, kn_tensor *x, int chunks, int dim, kn_tensor **out, int max_out)
{
    if (!operand(ctx, x, "x") || !sliceable(ctx, x)) return -1;
    int d = dim_of(ctx, dim, x->ndim);
    if (d < 0) return -1;
    if (chunks <= 0) return kn_err(ctx, KN_EINVAL, "chunks is %d: must be greater than 0", chunks), -1;
    int64_t n = x->shape[d], size = (n + chunks - 1) / chunks;
    return split_pieces(ctx, x, d, size, n == 0 ? chunks : (n - 1) / size + 1, out, max_out);
}

int kn_split(kn_ctx *ctx, kn_tensor *x, int64_t split_size, int dim, kn_tensor **out, int max_out)
{
    if (!ctx) return -1;
    const char *saved = op_enter(ctx, "kn_split");
    int r = split_impl(ctx, x, split_size, dim, out, max_out);
    op_leave(ctx, saved);
    return r;
}

int kn_chunk(kn_ctx *ctx, kn_tensor *x, int chunks, int dim, kn_tensor **out, int max_out)
{
    if (!ctx) return -1;
    const char *saved = op_enter(ctx, "kn_chunk");
    int r = chunk_impl(ctx, x, chunks, dim, out, max_out);
    op_leave(ctx, saved);
    return r;
}

/* ---- indexing ---- */

/* The gather/scatter primitives need 1 dim or more: a 0-d operand goes
 * through as (1). */
static kn_tensor *as_1d(kn_ctx *ctx, kn_tensor *t)
{
    return t && t->ndim == 0 ? p_reshape(ctx, t, 1, (const int64_t[]){1}) : t;
}

/* out[..., i, ...] = x[..., index[i], ...] along d: the 1-D index reshaped
 * to (1, ..., L, ..., 1) and expanded to the output, then GATHER. Indices
 * out of range fail in the gather kernel with KN_EINDEX. */
kn_tensor *kn_index_select(kn_ctx *ctx, kn_tensor *x, int dim, kn_tensor *index)
{
    ENTER(ctx, "kn_index_select");
    if (!operand(ctx, x, "x") || !index_operand(ctx, index, "index")) return LEAVE(ctx, NULL);
    if (index->ndim > 1)
        return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'index' has %d dims: index_select needs 1 (or 0)",
                                 index->ndim));
    int d = dim_of(ctx, dim, x->ndim);
    if (d < 0) return LEAVE(ctx, NULL);
    int64_t len = tensor_numel(index->ndim, index->shape);
    if (x->ndim == 0) {
        if (len != 1)
            return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'index' has %lld elements: a 0-d x takes exactly 1",
                                     (long long)len));
        return LEAVE(ctx, p_reshape(ctx, p_gather(ctx, as_1d(ctx, x), 0, as_1d(ctx, index)), 0, NULL));
    }
    int64_t line[KN_MAX_DIMS], oshape[KN_MAX_DIMS];
    for (int e = 0; e < x->ndim; e++) {
        line[e] = e == d ? len : 1;
        oshape[e] = e == d ? len : x->shape[e];
    }
    kn_tensor *idx = p_expand(ctx, p_reshape(ctx, index, x->ndim, line), x->ndim, oshape);
    return LEAVE(ctx, p_gather(ctx, x, d, idx));
}

/* index matches x in dims, and no dim of it but d exceeds x's. */
static int check_index_dims(kn_ctx *ctx, const kn_tensor *x, const kn_tensor *index, int d)
{
    if (index->ndim != x->ndim)
        return kn_err(ctx, KN_ESHAPE, "operand 'index' has %d dims, x has %d: they must match", index->ndim,
                      x->ndim), 0;
    for (int e = 0; e < x->ndim; e++)
        if (e != d && index->shape[e] > x->shape[e])
            return kn_err(ctx, KN_ESHAPE, "operand 'index' dim %d: size %lld exceeds x's %lld", e,
                          (long long)index->shape[e], (long long)x->shape[e]), 0;
    return 1;
}

kn_tensor *kn_gather(kn_ctx *ctx, kn_tensor *x, int dim, kn_tensor *index)
{
    ENTER(ctx, "kn_gather");
    if (!operand(ctx, x, "x") || !index_operand(ctx, index, "index")) return LEAVE(ctx, NULL);
    int d = dim_of(ctx, dim, x->ndim);
    if (d < 0 || !check_index_dims(ctx, x, index, d)) return LEAVE(ctx, NULL);
    kn_tensor *r = p_gather(ctx, as_1d(ctx, x), d, as_1d(ctx, index));
    return LEAVE(ctx, x->ndim ? r : p_reshape(ctx, r, 0, NULL));
}

/* x with src[i][j] added at x[index[i][j]][j] (dim 0 shown); a new tensor,
 * x untouched. src must cover index in every dim. */
kn_tensor *kn_scatter_add(kn_ctx *ctx, kn_tensor *x, int dim, kn_tensor *index, kn_tensor *src)
{
    ENTER(ctx, "kn_scatter_add");
    if (!operand(ctx, x, "x") || !index_operand(ctx, index, "index") || !operand(ctx, src, "src"))
        return LEAVE(ctx, NULL);
    if (src->dtype != x->dtype)
        return LEAVE(ctx, kn_err(ctx, KN_EDTYPE, "operand 'src' is %s, x is %s: they must match",
                                 kn_dtype_name((kn_dtype)src->dtype), kn_dtype_name((kn_dtype)x->dtype)));
    int d = dim_of(ctx, dim, x->ndim);
    if (d < 0 || !check_index_dims(ctx, x, index, d)) return LEAVE(ctx, NULL);
    if (src->ndim != x->ndim)
        return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'src' has %d dims, x has %d: they must match", src->ndim,
                                 x->ndim));
    for (int e = 0; e < x->ndim; e++)
        if (index->shape[e] > src->shape[e])
            return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'index' dim %d: size %lld exceeds src's %lld", e,
                                     (long long)index->shape[e], (long long)src->shape[e]));
    kn_tensor *r = p_scatter_add(ctx, as_1d(ctx, x), d, as_1d(ctx, index), as_1d(ctx, src));
    return LEAVE(ctx, x->ndim ? r : p_reshape(ctx, r, 0, NULL));
}

/* Keeps x[..., i, j] where j - i >= k (triu) or j - i <= k (tril), else 0:
 * the (M, N) mask from two iotas, broadcast over the batch, applied with
 * where. k is clamped to [-M, N], beyond which the mask no longer changes. */
static kn_tensor *triangle(kn_ctx *ctx, const char *name, kn_tensor *x, int64_t k, int lower)
{
    ENTER(ctx, name);
    if (!operand(ctx, x, "x")) return LEAVE(ctx, NULL);
    int nd = x->ndim;
    if (nd < 2) return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'x' has %d dims: needs 2 or more (..., M, N)", nd));
    int64_t m = x->shape[nd - 2], n = x->shape[nd - 1], mn[2] = {m, n}, line[KN_MAX_DIMS];
    k = k < -m ? -m : k > n ? n : k;
    kn_tensor *diag = bin(ctx, OP_SUB, p_iota(ctx, KN_I64, 2, mn, 1), p_iota(ctx, KN_I64, 2, mn, 0), KN_I64);
    kn_tensor *keep = lower ? bin(ctx, OP_CMPLT, diag, c_scalar(ctx, KN_I64, (double)(k + 1)), KN_I64)
                            : bin(ctx, OP_CMPLT, c_scalar(ctx, KN_I64, (double)(k - 1)), diag, KN_I64);
    for (int d = 0; d < nd; d++) line[d] = d < nd - 2 ? 1 : x->shape[d];
    keep = p_expand(ctx, p_reshape(ctx, keep, nd, line), nd, x->shape);
    return LEAVE(ctx, p_where(ctx, keep, x, filled(ctx, (kn_dtype)x->dtype, 0.0, nd, x->shape)));
}

kn_tensor *kn_triu(kn_ctx *ctx, kn_tensor *x, int64_t diagonal) { return triangle(ctx, "kn_triu", x, diagonal, 0); }
kn_tensor *kn_tril(kn_ctx *ctx, kn_tensor *x, int64_t diagonal) { return triangle(ctx, "kn_tril", x, diagonal, 1); }

/* Reads the smallest and largest class of a concrete, non-empty index. */
static int class_range(kn_ctx *ctx, kn_tensor *index, double *lo, double *hi)
{
    return kn_item(ctx, kn_amin(ctx, index, NULL, 0, 0), lo) == KN_OK &&
           kn_item(ctx, kn_amax(ctx, index, NULL, 0, 0), hi) == KN_OK;
}

/* Checks the class values of a concrete index and fills in num_classes -1
 * as max + 1 (a data read). A traced index cannot be read: -1 is then an
 * error, and a given num_classes is trusted (out-of-range rows stay 0). */
static int check_classes(kn_ctx *ctx, kn_tensor *index, int64_t *num_classes)
{
    int64_t c = *num_classes;
    if (c < -1) return kn_err(ctx, KN_EINVAL, "num_classes %lld: must be >= 0, or -1 to infer it", (long long)c), 0;
    int concrete = index->st && !ctx->trace, empty = tensor_numel(index->ndim, index->shape) == 0;
    if (c == -1 && !concrete)
        return kn_err(ctx, KN_EUNSUPPORTED, "num_classes -1 needs the index values, which a traced tensor does "
                      "not have; pass num_classes"), 0;
    if (c == -1 && empty) return kn_err(ctx, KN_EINVAL, "operand 'index' is empty: cannot infer num_classes"), 0;
    if (!concrete || empty) return 1;
    double lo, hi;
    if (!class_range(ctx, index, &lo, &hi)) return 0;
    if (lo < 0) return kn_err(ctx, KN_EINDEX, "operand 'index' holds %.0f: class values must be >= 0", lo), 0;
    if (c >= 0 && hi >= (double)c)
        return kn_err(ctx, KN_EINDEX, "operand 'index' holds %.0f: class values must be < num_classes %lld", hi,
                      (long long)c), 0;
    if (c < 0) *num_classes = (int64_t)hi + 1;
    return 1;
}

/* (..., C) i64: index[..., None] == arange(C). */
kn_tensor *kn_one_hot(kn_ctx *ctx, kn_tensor *index, int64_t num_classes)
{
    ENTER(ctx, "kn_one_hot");
    if (!operand(ctx, index, "index")) return LEAVE(ctx, NULL);
    if (index->dtype != KN_I64)
        return LEAVE(ctx, kn_err(ctx, KN_EDTYPE, "operand 'index' is %s: one_hot needs i64 class indices",
                                 kn_dtype_name((kn_dtype)index->dtype)));
    if (index->ndim == KN_MAX_DIMS)
        return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "operand 'index' has %d dims: the result would have one more than "
                                 "kiln supports", index->ndim));
    if (!check_classes(ctx, index, &num_classes)) return LEAVE(ctx, NULL);
    kn_tensor *classes = p_iota(ctx, KN_I64, 1, &num_classes, 0);
    kn_tensor *hot = bin(ctx, OP_CMPEQ, insert_dim(ctx, index, index->ndim), classes, KN_I64);
    return LEAVE(ctx, p_cast(ctx, hot, KN_I64));
}

/* ---- matrix products ---- */

static int same_dtype(kn_ctx *ctx, const kn_tensor *a, const kn_tensor *b, const char *na, const char *nb)
{
    if (a->dtype != b->dtype)
        return kn_err(ctx, KN_EDTYPE, "operand '%s' is %s, %s is %s: they must match", nb,
                      kn_dtype_name((kn_dtype)b->dtype), na, kn_dtype_name((kn_dtype)a->dtype)), 0;
    if (a->dtype == KN_BOOL) return kn_err(ctx, KN_EDTYPE, "operand '%s' is bool: products need numbers", na), 0;
    return 1;
}

/* Broadcasts the batch dims (all but the last two) of a and b into batch;
 * returns their count, or -1 with the error set. */
static int batch_shape(kn_ctx *ctx, const kn_tensor *a, const kn_tensor *b, const char *na, const char *nb,
                       int64_t *batch)
{
    int ba = a->ndim - 2, bb = b->ndim - 2, n = ba > bb ? ba : bb;
    if (n < 0) n = 0; /* 1-D operands have no batch */
    for (int i = 0; i < n; i++) {
        int ia = i - (n - ba), ib = i - (n - bb);
        int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            return kn_err(ctx, KN_ESHAPE, "operand '%s' dim %d: batch size %lld does not broadcast with %s dim %d "
                          "(%lld)", nb, ib, (long long)sb, na, ia, (long long)sa), -1;
        batch[i] = sa == 1 ? sb : sa;
    }
    return n;
}

/* torch.matmul for checked operands of one dtype. A 1-D a becomes (1, K)
 * and b (K, 1), and those dims are dropped from the result. A stack of a
 * against a matrix b folds into one (B*M, K) @ (K, N); otherwise the batch
 * dims broadcast by expand, since DOT needs equal batch dims. */
static kn_tensor *matmul_impl(kn_ctx *ctx, kn_tensor *a, kn_tensor *b, const char *na, const char *nb)
{
    int64_t k = a->shape[a->ndim - 1], kb = b->shape[b->ndim == 1 ? 0 : b->ndim - 2];
    if (k != kb)
        return kn_err(ctx, KN_ESHAPE, "operand '%s' dim %d: expected %lld (%s dim -1), got %lld", nb,
                      b->ndim == 1 ? 0 : b->ndim - 2, (long long)k, na, (long long)kb);
    int64_t oshape[KN_MAX_DIMS], batch[KN_MAX_DIMS], s[KN_MAX_DIMS];
    int nbatch = batch_shape(ctx, a, b, na, nb, batch);
    if (nbatch < 0) return NULL;
    int64_t m = a->ndim == 1 ? 1 : a->shape[a->ndim - 2], n = b->ndim == 1 ? 1 : b->shape[b->ndim - 1];
    int no = nbatch;
    memcpy(oshape, batch, (size_t)nbatch * sizeof *batch);
    if (a->ndim > 1) oshape[no++] = m;
    if (b->ndim > 1) oshape[no++] = n;
    kn_tensor *b2 = b->ndim == 1 ? p_reshape(ctx, b, 2, (const int64_t[]){k, 1}) : b, *r;
    if (a->ndim > 2 && b->ndim <= 2) {
        int64_t rows[2] = {tensor_numel(a->ndim - 1, a->shape), k};
        r = p_dot(ctx, p_reshape(ctx, a, 2, rows), b2);
    } else {
        kn_tensor *a2 = a->ndim == 1 ? p_reshape(ctx, a, 2, (const int64_t[]){1, k}) : a;
        memcpy(s, batch, (size_t)nbatch * sizeof *batch);
        s[nbatch] = m, s[nbatch + 1] = k;
        a2 = broadcast_to(ctx, a2, nbatch + 2, s);
        s[nbatch] = k, s[nbatch + 1] = n;
        r = p_dot(ctx, a2, broadcast_to(ctx, b2, nbatch + 2, s));
    }
    return p_reshape(ctx, r, no, oshape);
}

kn_tensor *kn_matmul(kn_ctx *ctx, kn_tensor *a, kn_tensor *b)
{
    ENTER(ctx, "kn_matmul");
    if (!operand(ctx, a, "a") || !operand(ctx, b, "b")) return LEAVE(ctx, NULL);
    if (a->ndim == 0 || b->ndim == 0)
        return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand '%s' is 0-d: matmul needs 1 dim or more",
                                 a->ndim ? "b" : "a"));
    if (!same_dtype(ctx, a, b, "a", "b")) return LEAVE(ctx, NULL);
    return LEAVE(ctx, matmul_impl(ctx, a, b, "a", "b"));
}

/* (B, M, K) @ (B, K, N), no broadcasting. */
kn_tensor *kn_bmm(kn_ctx *ctx, kn_tensor *a, kn_tensor *b)
{
    ENTER(ctx, "kn_bmm");
    if (!operand(ctx, a, "a") || !operand(ctx, b, "b") || !same_dtype(ctx, a, b, "a", "b")) return LEAVE(ctx, NULL);
    if (a->ndim != 3 || b->ndim != 3)
        return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand '%s' has %d dims: bmm needs 3 (B, M, K)",
                                 a->ndim != 3 ? "a" : "b", a->ndim != 3 ? a->ndim : b->ndim));
    if (b->shape[0] != a->shape[0] || b->shape[1] != a->shape[2]) {
        int e = b->shape[0] != a->shape[0] ? 0 : 1;
        return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'b' dim %d: expected %lld (a dim %d), got %lld", e,
                                 (long long)a->shape[e ? 2 : 0], e ? 2 : 0, (long long)b->shape[e]));
    }
    return LEAVE(ctx, p_dot(ctx, a, b));
}

/* x (..., in) @ w^T + b with w (out, in) (or (in): one output, dropped)
 * and b broadcasting against (..., out); b NULL: no bias. */
kn_tensor *kn_linear(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b)
{
    ENTER(ctx, "kn_linear");
    if (!optional_ok(ctx, b)) return LEAVE(ctx, NULL);
    if (!operand(ctx, x, "x") || !operand(ctx, w, "w") || (b && !operand(ctx, b, "b")) ||
        !same_dtype(ctx, x, w, "x", "w") || (b && !same_dtype(ctx, x, b, "x", "b")))
        return LEAVE(ctx, NULL);
    if (x->ndim == 0) return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'x' is 0-d: linear needs (..., in)"));
    if (w->ndim != 1 && w->ndim != 2)
        return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'w' has %d dims: linear needs (out, in)", w->ndim));
    int64_t in = x->shape[x->ndim - 1], win = w->shape[w->ndim - 1];
    if (win != in)
        return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "operand 'w' dim %d: expected %lld (x dim -1), got %lld", w->ndim - 1,
                                 (long long)in, (long long)win));
    kn_tensor *wt = w->ndim == 2 ? p_permute(ctx, w, (const int[]){1, 0}) : w; /* (in, out) */
    kn_tensor *y = wt ? matmul_impl(ctx, x, wt, "x", "w") : NULL;
    return LEAVE(ctx, b ? bin(ctx, OP_ADD, y, b, (kn_dtype)x->dtype) : y);
}
