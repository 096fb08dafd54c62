/*
 * interp.c — the reference interpreter: one kernel per primitive, run on
 * concrete tensors. It is the oracle every generated kernel is checked
 * against, so it favours plain loops over speed: floats are computed in
 * double and rounded once on store, integers in int64. One exception: an
 * f32 or f64 dot runs the library's GEMM (gemm_rt.c, accumulated in the
 * element type, like every compiled target's), as the plain loop made
 * eager training crawl; tests/test_gemm_rt.c checks it against a plain
 * loop in double.
 *
 * Requires: `out` contiguous, of the shape and dtype the shape rule gave;
 * sources any strided views. Produces: out filled, or KN_EINDEX for an
 * index out of range (gather, scatter_add).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../port/port.h"
#include "core.h"
#include "gemm_rt.h"
#include "dot.h"

/* ---- strided iteration over an output shape ---- */

typedef struct {
    int ndim, nops;
    const int64_t *shape;
    int64_t idx[KN_MAX_DIMS];
    int64_t off[4];                  /* current element offset of each operand */
    int64_t stride[4][KN_MAX_DIMS];  /* operand strides, 0 on broadcast dims */
} Iter;

static void iter_init(Iter *it, int ndim, const int64_t *shape)
{
    memset(it, 0, sizeof *it);
    it->ndim = ndim;
    it->shape = shape;
}

/* Adds an operand read with the given strides starting at offset. */
static void iter_add(Iter *it, const int64_t *stride, int64_t offset)
{
    int k = it->nops++;
    if (stride) memcpy(it->stride[k], stride, (size_t)it->ndim * sizeof *stride);
    it->off[k] = offset;
}

static void iter_next(Iter *it)
{
    for (int d = it->ndim - 1; d >= 0; d--) {
        for (int k = 0; k < it->nops; k++) it->off[k] += it->stride[k][d];
        if (++it->idx[d] < it->shape[d]) return;
        for (int k = 0; k < it->nops; k++) it->off[k] -= it->stride[k][d] * it->shape[d];
        it->idx[d] = 0;
    }
}

#define LD(t, o) dt_load((kn_dtype)(t)->dtype, tensor_ptr((t), (o)))
#define LDI(t, o) dt_load_i((kn_dtype)(t)->dtype, tensor_ptr((t), (o)))
#define ST(t, o, v) dt_store((kn_dtype)(t)->dtype, tensor_ptr((t), (o)), (v))
#define STI(t, o, v) dt_store_i((kn_dtype)(t)->dtype, tensor_ptr((t), (o)), (v))

/* ---- elementwise ---- */

static double unary_f(Op op, double x)
{
    switch (op) {
    case OP_NEG: return -x;
    case OP_EXP: return exp(x);
    case OP_LOG: return log(x);
    case OP_SQRT: return sqrt(x);
    case OP_RECIP: return 1.0 / x;
    case OP_SIN: return sin(x);
    case OP_COS: return cos(x);
    case OP_TANH: return tanh(x);
    case OP_ERF: return erf(x);
    case OP_ABS: return fabs(x);
    case OP_FLOOR: return floor(x);
    default: KN_ASSERT(0); return 0;
    }
}

static int64_t unary_i(Op op, int64_t x)
{
    switch (op) {
    case OP_NEG: return (int64_t)(0 - (uint64_t)x);
    case OP_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case OP_RECIP: return x == 1 ? 1 : x == -1 ? -1 : 0;
    default: return x; /* floor */
    }
}

static double binary_f(Op op, double a, double b)
{
    switch (op) {
    case OP_ADD: return a + b;
    case OP_SUB: return a - b;
    case OP_MUL: return a * b;
    case OP_DIV: return a / b;
    case OP_MAX: return a != a || b != b ? NAN : a > b ? a : b;
    case OP_MIN: return a != a || b != b ? NAN : a < b ? a : b;
    case OP_POW: return pow(a, b);
    case OP_CMPLT: return a < b;
    case OP_CMPEQ: return a == b;
    default: KN_ASSERT(0); return 0;
    }
}

static int64_t ipow(int64_t a, int64_t b)
{
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
    uint64_t r = 1, x = (uint64_t)a;
    for (; b; b >>= 1, x *= x)
        if (b & 1) r *= x;
    return (int64_t)r;
}

/* Integer arithmetic wraps like two's complement, as PyTorch's does;
 * division truncates and division by zero gives 0 rather than trapping. */
static int64_t binary_i(Op op, int64_t a, int64_t b)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case OP_ADD: return (int64_t)(ua + ub);
    case OP_SUB: return (int64_t)(ua - ub);
    case OP_MUL: return (int64_t)(ua * ub);
    case OP_DIV: return b == 0 || (a == INT64_MIN && b == -1) ? 0 : a / b;
    case OP_MAX: return a > b ? a : b;
    case OP_MIN: return a < b ? a : b;
    case OP_POW: return ipow(a, b);
    case OP_CMPLT: return a < b;
    case OP_CMPEQ: return a == b;
    default: KN_ASSERT(0); return 0;
    }
}

static void run_elementwise(Op op, kn_tensor *out, kn_tensor *const *src, const Params *p)
{
    (void)p;
    int n = kn_opinfo[op].nsrc;
    Iter it;
    iter_init(&it, out->ndim, out->shape);
    for (int i = 0; i < n; i++) iter_add(&it, src[i]->stride, src[i]->offset);
    kn_dtype in = (kn_dtype)src[n - 1]->dtype;
    int fl = dt_is_float(in);
    int64_t numel = tensor_numel(out->ndim, out->shape);
    for (int64_t k = 0; k < numel; k++, iter_next(&it)) {
        switch (kn_opinfo[op].cls) {
        case OC_UNARY:
            if (fl) ST(out, k, unary_f(op, LD(src[0], it.off[0])));
            else STI(out, k, unary_i(op, LDI(src[0], it.off[0])));
            break;
        case OC_CAST:
            if (dt_is_float(in) || dt_is_float((kn_dtype)out->dtype)) ST(out, k, LD(src[0], it.off[0]));
            else STI(out, k, LDI(src[0], it.off[0]));
            break;
        case OC_WHERE: {
            int c = LDI(src[0], it.off[0]) != 0;
            if (fl) ST(out, k, LD(src[c ? 1 : 2], it.off[c ? 1 : 2]));
            else STI(out, k, LDI(src[c ? 1 : 2], it.off[c ? 1 : 2]));
            break;
        }
        default: /* binary, compare */
            if (fl) ST(out, k, binary_f(op, LD(src[0], it.off[0]), LD(src[1], it.off[1])));
            else STI(out, k, binary_i(op, LDI(src[0], it.off[0]), LDI(src[1], it.off[1])));
        }
    }
}

/* ---- reductions: accumulate in double (floats) or int64 ---- */

static kn_status run_reduce(kn_ctx *ctx, Op op, kn_tensor *out, kn_tensor *x)
{
    int64_t n_out = tensor_numel(out->ndim, out->shape), n_in = tensor_numel(x->ndim, x->shape);
    if (n_out == 0) return KN_OK;
    int fl = dt_is_float((kn_dtype)x->dtype);
    size_t bytes = (size_t)n_out * 8;
    void *acc = kn_alloc(ctx, bytes);
    if (!acc) return kn_errs(ctx, KN_ENOMEM, "out of memory for a reduction buffer");
    double *af = acc;
    int64_t *ai = acc;
    for (int64_t k = 0; k < n_out; k++) {
        if (fl) af[k] = op == OP_SUM ? 0.0 : -INFINITY;
        else ai[k] = op == OP_SUM ? 0 : INT64_MIN;
    }
    int64_t ostride[KN_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) ostride[d] = out->shape[d] == x->shape[d] ? out->stride[d] : 0;
    Iter it;
    iter_init(&it, x->ndim, x->shape);
    iter_add(&it, x->stride, x->offset);
    iter_add(&it, ostride, 0);
    for (int64_t k = 0; k < n_in; k++, iter_next(&it)) {
        int64_t o = it.off[1];
        if (fl) {
            double v = LD(x, it.off[0]);
            if (op == OP_SUM) af[o] += v;
            else if (af[o] == af[o] && (v != v || v > af[o])) af[o] = v; /* NaN wins and stays */
        } else {
            int64_t v = LDI(x, it.off[0]);
            if (op == OP_SUM) ai[o] = (int64_t)((uint64_t)ai[o] + (uint64_t)v);
            else if (v > ai[o]) ai[o] = v;
        }
    }
    for (int64_t k = 0; k < n_out; k++) {
        if (fl) ST(out, k, af[k]);
        else STI(out, k, ai[k]);
    }
    kn_dealloc(ctx, acc, bytes);
    return KN_OK;
}

/* ---- movement that copies ---- */

/* Copies src (any strides) row-major into the contiguous out: reshape of a
 * tensor that cannot be viewed, and the interior of pad. */
static void copy_into(kn_tensor *out, int64_t out_off, const int64_t *out_stride, const kn_tensor *src)
{
    size_t es = kn_dtype_size((kn_dtype)src->dtype);
    int64_t n = tensor_numel(src->ndim, src->shape), contig[KN_MAX_DIMS];
    tensor_contig_strides(src->ndim, src->shape, contig);
    int dense = kn_is_contiguous(src);
    for (int d = 0; d < src->ndim && dense; d++) dense = src->shape[d] == 1 || out_stride[d] == contig[d];
    if (dense) { /* both sides one block: a scatter_add's copy of its zeros, a pad's interior rows */
        if (n > 0) memcpy(tensor_ptr(out, out_off), tensor_ptr(src, src->offset), (size_t)n * es);
        return;
    }
    Iter it;
    iter_init(&it, src->ndim, src->shape);
    iter_add(&it, src->stride, src->offset);
    iter_add(&it, out_stride, out_off);
    for (int64_t k = 0; k < n; k++, iter_next(&it))
        memcpy(tensor_ptr(out, it.off[1]), tensor_ptr(src, it.off[0]), es);
}

static void run_pad(kn_tensor *out, kn_tensor *x, const Params *p)
{
    int64_t n = tensor_numel(out->ndim, out->shape), off = 0;
    size_t es = kn_dtype_size((kn_dtype)out->dtype);
    if (n > 0) {
        ST(out, 0, p->f);
        for (int64_t k = 1; k < n; k++) memcpy(tensor_ptr(out, k), tensor_ptr(out, 0), es);
    }
    for (int d = 0; d < x->ndim; d++) off += p->i[2 * d] * out->stride[d];
    copy_into(out, off, out->stride, x);
}

/* ---- indexing ---- */

kn_status interp_bad_index(kn_ctx *ctx, Op op, const Params *p, int64_t v, int64_t size)
{
    const char *made = p->origin ? composite_name(p->origin - 1) : NULL;
    char by[64] = ""; /* ctx->op prefixes the message: eager, the op itself; compiled, kn_call */
    if (!made) snprintf(by, sizeof by, "%s: ", kn_opinfo[op].name);
    else if (!ctx->op || strncmp(ctx->op, "kn_", 3) != 0 || strcmp(ctx->op + 3, made) != 0)
        snprintf(by, sizeof by, "kn_%s: ", made);
    if (p->ix == IX_DIVISOR) return kn_errs(ctx, KN_EINVAL, "%sinteger division by zero", by);
    if (p->ix == IX_CLASS)
        return kn_errs(ctx, KN_EINDEX, "%starget class %lld out of range for %lld classes", by, (long long)v,
                       (long long)size);
    return kn_errs(ctx, KN_EINDEX, "%sindex %lld out of range for dim %d of size %lld", by, (long long)v,
                   (int)p->i[0], (long long)size);
}

static kn_status run_gather(kn_ctx *ctx, kn_tensor *out, kn_tensor *x, kn_tensor *idx, const Params *p)
{
    int dim = (int)p->i[0];
    size_t es = kn_dtype_size((kn_dtype)x->dtype);
    int64_t n = tensor_numel(out->ndim, out->shape);
    int64_t xs[KN_MAX_DIMS];
    memcpy(xs, x->stride, sizeof xs);
    xs[dim] = 0; /* the gathered dim's offset comes from the index */
    Iter it;
    iter_init(&it, out->ndim, out->shape);
    iter_add(&it, idx->stride, idx->offset);
    iter_add(&it, xs, x->offset);
    for (int64_t k = 0; k < n; k++, iter_next(&it)) {
        int64_t v = LDI(idx, it.off[0]);
        if (v < 0 || v >= x->shape[dim]) return interp_bad_index(ctx, OP_GATHER, p, v, x->shape[dim]);
        memcpy(tensor_ptr(out, k), tensor_ptr(x, it.off[1] + v * x->stride[dim]), es);
    }
    return KN_OK;
}

static kn_status run_scatter_add(kn_ctx *ctx, kn_tensor *out, kn_tensor *const *src, const Params *p)
{
    int dim = (int)p->i[0];
    kn_tensor *x = src[0], *idx = src[1], *s = src[2];
    copy_into(out, 0, out->stride, x);
    int64_t n = tensor_numel(idx->ndim, idx->shape), os[KN_MAX_DIMS];
    memcpy(os, out->stride, sizeof os);
    os[dim] = 0;
    int fl = dt_is_float((kn_dtype)out->dtype);
    Iter it;
    iter_init(&it, idx->ndim, idx->shape);
    iter_add(&it, idx->stride, idx->offset);
    iter_add(&it, s->stride, s->offset);
    iter_add(&it, os, 0);
    for (int64_t k = 0; k < n; k++, iter_next(&it)) {
        int64_t v = LDI(idx, it.off[0]);
        if (v < 0 || v >= out->shape[dim]) return interp_bad_index(ctx, OP_SCATTER_ADD, p, v, out->shape[dim]);
        int64_t o = it.off[2] + v * out->stride[dim];
        if (fl) ST(out, o, LD(out, o) + LD(s, it.off[1]));
        else STI(out, o, (int64_t)((uint64_t)LDI(out, o) + (uint64_t)LDI(s, it.off[1])));
    }
    return KN_OK;
}

/* ---- dot: (..., M, K) x (..., K, N) ---- */

/* The stride that steps the flattened index of dims [0, nb) (shape), if one
 * does: size-1 dims are skipped, the rest must nest. */
static int flat_stride(int nb, const int64_t *shape, const int64_t *stride, int64_t *s)
{
    int64_t inner = 1;
    int seen = 0;
    *s = 0;
    for (int d = nb - 1; d >= 0; d--) {
        if (shape[d] == 1) continue;
        if (!seen) *s = stride[d], seen = 1;
        else if (stride[d] != *s * inner) return 0;
        inner *= shape[d];
    }
    return 1;
}

/* f32 and f64 through the library's GEMM (gemm_rt.c), accumulated in the
 * element type as every compiled target does, split over the port's
 * threads (bitwise the one-thread result): one call when each operand's
 * batch dims flatten to one stride, else one per batch index. 0 when it
 * cannot (other dtypes, K = 0): run_dot then
 * runs the plain loop; -1 (KN_ENOMEM set) when its scratch cannot be
 * had: falling back would change the result's bits. */
static int dot_rt(kn_ctx *ctx, kn_tensor *out, kn_tensor *a, kn_tensor *b)
{
    int nd = out->ndim;
    kn_dtype dt = (kn_dtype)out->dtype;
    if ((dt != KN_F32 && dt != KN_F64) || a->dtype != dt || b->dtype != dt) return 0;
    int64_t M = a->shape[nd - 2], K = a->shape[nd - 1], N = b->shape[nd - 1];
    int64_t batch = tensor_numel(nd - 2, out->shape);
    if (K == 0) return 0;
    if (batch == 0 || M == 0 || N == 0) return 1;
    KnRtGemm g;
    memset(&g, 0, sizeof g);
    g.dtype = dt == KN_F32 ? GEMM_F32 : GEMM_F64;
    g.M = M, g.N = N, g.K = K;
    g.sa_m = a->stride[nd - 2], g.sa_k = a->stride[nd - 1], g.sb_k = b->stride[nd - 2], g.sb_n = b->stride[nd - 1];
    g.parallel_for = port_parallel_for, g.threads = port_threads();
    int one = flat_stride(nd - 2, out->shape, a->stride, &g.sa_b) && flat_stride(nd - 2, out->shape, b->stride, &g.sb_b);
    g.batch = one ? batch : 1;
    g.work_bytes = kn_rt_gemm_work(&g);
    if (!(g.work = kn_alloc(ctx, g.work_bytes))) {
        kn_errs(ctx, KN_ENOMEM, "out of memory for a dot's packing buffer (%zu bytes)", g.work_bytes);
        return -1;
    }
    Iter it;
    iter_init(&it, nd - 2, out->shape);
    iter_add(&it, a->stride, a->offset);
    iter_add(&it, b->stride, b->offset);
    for (int64_t bi = 0; bi < (one ? 1 : batch); bi++, iter_next(&it)) {
        g.A = tensor_ptr(a, it.off[0]), g.B = tensor_ptr(b, it.off[1]);
        g.C = tensor_ptr(out, bi * M * N);
        kn_rt_gemm(&g);
    }
    kn_dealloc(ctx, g.work, g.work_bytes);
    return 1;
}

/* the plain loop, accumulated in double or int64 */
static kn_status run_dot(kn_ctx *ctx, kn_tensor *out, kn_tensor *a, kn_tensor *b)
{
    int rt = dot_rt(ctx, out, a, b);
    if (rt) return rt < 0 ? KN_ENOMEM : KN_OK;
    int nd = out->ndim;
    int64_t M = a->shape[nd - 2], K = a->shape[nd - 1], N = b->shape[nd - 1];
    int64_t batch = tensor_numel(nd - 2, out->shape);
    int fl = dt_is_float((kn_dtype)out->dtype);
    Iter it;
    iter_init(&it, nd - 2, out->shape);
    iter_add(&it, a->stride, a->offset);
    iter_add(&it, b->stride, b->offset);
    const int64_t *as = a->stride + nd - 2, *bs = b->stride + nd - 2;
    for (int64_t bi = 0; bi < batch; bi++, iter_next(&it)) {
        int64_t obase = bi * M * N;
        for (int64_t m = 0; m < M; m++)
            for (int64_t j = 0; j < N; j++) {
                double sf = 0;
                int64_t si = 0;
                for (int64_t k = 0; k < K; k++) {
                    int64_t ao = it.off[0] + m * as[0] + k * as[1], bo = it.off[1] + k * bs[0] + j * bs[1];
                    if (fl) sf += LD(a, ao) * LD(b, bo);
                    else si = (int64_t)((uint64_t)si + (uint64_t)LDI(a, ao) * (uint64_t)LDI(b, bo));
                }
                if (fl) ST(out, obase + m * N + j, sf);
                else STI(out, obase + m * N + j, si);
            }
    }
    return KN_OK;
}

/* ---- creation ---- */

/* Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as
 * 1, 2, 3", SC'11): a counter-based generator, so a number depends only on
 * (key, counter) and every target gives the same ones. The stream of key
 * is its blocks in order, four 32-bit lanes each: position c is block
 * c / 4, lane c % 4, whose top 24 bits give a uniform in [0, 1). */
void interp_philox(uint64_t key, uint64_t ctr, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* rand: element k is the stream of key src[0] at position src[1] + k */
static void run_rand(kn_tensor *out, kn_tensor *const *src)
{
    uint64_t key = (uint64_t)dt_load_i(KN_I64, tensor_ptr(src[0], 0));
    uint64_t pos = (uint64_t)dt_load_i(KN_I64, tensor_ptr(src[1], 0));
    int64_t n = tensor_numel(out->ndim, out->shape);
    uint32_t r[4];
    for (int64_t k = 0; k < n; k++, pos++) {
        if (k == 0 || pos % 4 == 0) interp_philox(key, pos / 4, r);
        ST(out, k, (double)(r[pos % 4] >> 8) * (1.0 / 16777216.0)); /* f32 and f64 alike */
    }
}

static void run_create(Op op, kn_tensor *out, const Params *p)
{
    int64_t n = tensor_numel(out->ndim, out->shape);
    if (n == 0) return; /* the other dims of an empty tensor may not multiply safely */
    int64_t inner = 1;
    for (int d = p->axis + 1; d < out->ndim; d++) inner *= out->shape[d];
    int64_t axis_size = out->ndim ? out->shape[p->axis] : 1;
    if (op == OP_FULL) { /* one element stored (dt_store saturates integers), then copied in doubling runs */
        size_t es = kn_dtype_size((kn_dtype)out->dtype), have = es, all = (size_t)n * es;
        char *base = tensor_ptr(out, 0);
        ST(out, 0, p->f);
        for (; have < all; have *= 2) memcpy(base + have, base, have < all - have ? have : all - have);
        return;
    }
    for (int64_t k = 0; k < n; k++) STI(out, k, (k / inner) % (axis_size ? axis_size : 1)); /* iota */
}

kn_status interp_run(kn_ctx *ctx, Op op, kn_tensor *out, kn_tensor *const *src, const Params *p)
{
    switch (kn_opinfo[op].cls) {
    case OC_LEAF: return kn_errs(ctx, KN_EINVAL, "input: a graph leaf has no kernel");
    case OC_UNARY:
    case OC_BINARY:
    case OC_COMPARE:
    case OC_WHERE:
    case OC_CAST: run_elementwise(op, out, src, p); return KN_OK;
    case OC_REDUCE: return run_reduce(ctx, op, out, src[0]);
    case OC_MOVE:
        if (op == OP_PAD) run_pad(out, src[0], p);
        else { /* a reshape that needs a copy: element k of src goes to k of out */
            int64_t cs[KN_MAX_DIMS];
            tensor_contig_strides(src[0]->ndim, src[0]->shape, cs);
            copy_into(out, 0, cs, src[0]);
        }
        return KN_OK;
    case OC_INDEX:
        if (op == OP_GATHER) return run_gather(ctx, out, src[0], src[1], p);
        return run_scatter_add(ctx, out, src, p);
    case OC_DOT: return run_dot(ctx, out, src[0], src[1]);
    case OC_CREATE:
        if (op == OP_RAND) run_rand(out, src);
        else run_create(op, out, p);
        return KN_OK;
    }
    return KN_OK;
}
