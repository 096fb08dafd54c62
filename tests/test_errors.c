/*
 * test_errors.c — bad input never crashes. Each case feeds one op a bad
 * operand (shapes that do not match, dims out of range, wrong dtypes, NULL
 * handles, indices out of range, bad conv/pool parameters, sizes that
 * overflow) and checks that the op returns NULL or a status, with the right
 * status and a message that starts with the op's name and names the operand
 * or dim at fault. Then the context must still work and, once the scope that
 * held the cases ends, hold no more than before; every byte must go back to
 * the allocator when the context is freed.
 *
 * An index out of range inside a compiled program names the public op that
 * read it, as eager does (test_index_origin).
 */
#include <stdint.h>
#include <stdlib.h>

#include "test.h"
#include "../port/port.h"

/* ---- a counting allocator: every block the context holds, by size ---- */

typedef struct {
    long blocks;
    size_t bytes;
    int bad_size; /* a free or realloc named a size other than the block's */
} Count;

#define HDR 16 /* keeps the caller's pointer 16-aligned */

static void *count_alloc(void *user, void *ptr, size_t osize, size_t nsize)
{
    Count *c = user;
    char *p = ptr ? (char *)ptr - HDR : NULL;
    if (p) {
        size_t old;
        memcpy(&old, p, sizeof old);
        if (old != osize) c->bad_size = 1;
    }
    if (nsize == 0) {
        if (p) {
            c->blocks--;
            c->bytes -= osize;
            free(p);
        }
        return NULL;
    }
    if (nsize > SIZE_MAX - HDR) return NULL;
    char *q = realloc(p, nsize + HDR);
    if (!q) return NULL;
    if (!p) c->blocks++;
    c->bytes += nsize - (p ? osize : 0);
    memcpy(q, &nsize, sizeof nsize);
    return q + HDR;
}

/* ---- building inputs ---- */

#define SH(...) ((const int64_t[]){__VA_ARGS__})
#define ND(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* T(2, 3): an f32 tensor of shape (2, 3) with small distinct values */
#define T(...) mk(ctx, KN_F32, ND(__VA_ARGS__), SH(__VA_ARGS__))
#define TD(dt, ...) mk(ctx, dt, ND(__VA_ARGS__), SH(__VA_ARGS__))

static kn_tensor *mk(kn_ctx *ctx, kn_dtype dt, int nd, const int64_t *shape)
{
    static double store[4096]; /* aligned for every dtype */
    char *buf = (char *)store;
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    if (n > 4096) return NULL;
    for (int64_t i = 0; i < n; i++) {
        double v = (double)(i % 7) * 0.25 - 0.5;
        switch (dt) {
        case KN_F64: ((double *)buf)[i] = v; break;
        case KN_I32: ((int32_t *)buf)[i] = (int32_t)(i % 3); break;
        case KN_I64: ((int64_t *)buf)[i] = i % 3; break;
        case KN_BOOL:
        case KN_U8: ((uint8_t *)buf)[i] = (uint8_t)(i % 2); break;
        default: ((float *)buf)[i] = (float)v; break;
        }
    }
    return kn_tensor_from(ctx, dt, nd, shape, buf);
}

/* A 1-d index tensor holding the given values. */
static kn_tensor *idx64(kn_ctx *ctx, int n, const int64_t *v)
{
    int64_t s = n;
    return kn_tensor_from(ctx, KN_I64, 1, &s, v);
}

/* ---- the check: failed, with the status wanted and a message naming the op and the culprit ---- */

#define S(st) (1 << (st))
#define ANY (~S(KN_OK))

static const char *status_name(kn_status s)
{
    static const char *n[] = {"KN_OK", "KN_EINVAL", "KN_ESHAPE", "KN_EDTYPE", "KN_EINDEX", "KN_ENOMEM", "KN_EIO",
                               "KN_EUNSUPPORTED"};
    return (unsigned)s < sizeof n / sizeof *n ? n[s] : "?";
}

/* Does m contain one of the '|'-separated alternatives in alts? */
static int has_any(const char *m, const char *alts)
{
    char buf[256];
    while (*alts) {
        size_t n = strcspn(alts, "|");
        if (n >= sizeof buf) n = sizeof buf - 1;
        memcpy(buf, alts, n);
        buf[n] = 0;
        if (strstr(m, buf)) return 1;
        alts += n;
        if (*alts == '|') alts++;
    }
    return 0;
}

static void expect_err_(kn_ctx *ctx, int failed, int want, const char *op, const char *alts, int line,
                        const char *what)
{
    const char *m = kn_last_error(ctx);
    kn_status s = kn_last_status(ctx);
    size_t n = strlen(op);
    int named = strncmp(m, op, n) == 0 && m[n] == ':';
    int ok = failed && s != KN_OK && (want & S(s)) && named && has_any(m, alts);
    if (!test_check_(ok, __FILE__, line, what))
        printf("    wanted a failure, \"%s: ...\" naming [%s]; got %s, %s: \"%s\"\n", op, alts,
               failed ? "failed" : "SUCCESS", status_name(s), m);
    kn_clear_error(ctx);
}

/* ERR(call == NULL, wanted statuses, "kn_op", "culprit|or another wording") */
#define ERR(cond, want, op, alts) expect_err_(ctx, (cond), (want), (op), (alts), __LINE__, #cond)
#define FAILS(call, want, op, alts) expect_err_(ctx, (call) == NULL, (want), (op), (alts), __LINE__, #call)

/* An op that may either succeed or refuse, but must not crash or fail silently. */
#define EITHER(call) \
    do { \
        kn_tensor *r_ = (call); \
        CHECK_MSG(r_ != NULL || (kn_last_status(ctx) != KN_OK && kn_last_error(ctx)[0] == 'k'), \
                  "NULL with status %s, message \"%s\"", status_name(kn_last_status(ctx)), kn_last_error(ctx)); \
        kn_clear_error(ctx); \
    } while (0)

/* ---- shapes that do not match ---- */

static void test_shapes(kn_ctx *ctx)
{
    FAILS(kn_add(ctx, T(3), T(2)), S(KN_ESHAPE), "kn_add", "operand 'b'");
    FAILS(kn_add(ctx, T(2, 3), T(4, 1)), S(KN_ESHAPE), "kn_add", "dim -2");
    FAILS(kn_mul(ctx, T(2, 3, 4), T(3, 3, 1)), S(KN_ESHAPE), "kn_mul", "dim -3");
    FAILS(kn_where(ctx, TD(KN_BOOL, 5), T(3), T(3)), S(KN_ESHAPE), "kn_where", "operand|dim");

    FAILS(kn_matmul(ctx, T(2, 3), T(4, 5)), S(KN_ESHAPE), "kn_matmul", "dim|'b'|other");
    FAILS(kn_matmul(ctx, T(3), T(4)), S(KN_ESHAPE), "kn_matmul", "dim|'b'|other");
    FAILS(kn_matmul(ctx, T(2, 2, 3), T(3, 3, 4)), S(KN_ESHAPE), "kn_matmul", "dim|batch");
    FAILS(kn_bmm(ctx, T(2, 3), T(3, 4)), S(KN_ESHAPE) | S(KN_EINVAL), "kn_bmm", "3-d|3 dims|dims");
    FAILS(kn_bmm(ctx, T(2, 2, 3), T(3, 3, 4)), S(KN_ESHAPE), "kn_bmm", "dim|batch");

    FAILS(kn_linear(ctx, T(4, 3), T(2, 5), NULL), S(KN_ESHAPE), "kn_linear", "weight|'w'");
    FAILS(kn_linear(ctx, T(4, 3), T(2, 3, 1), NULL), S(KN_ESHAPE) | S(KN_EINVAL), "kn_linear", "weight|'w'");
    FAILS(kn_linear(ctx, T(4, 3), T(2, 3), T(3)), S(KN_ESHAPE), "kn_linear", "bias|'b'");

    kn_tensor *xs[3] = {T(2, 3), T(2, 4), T(2, 3)};
    FAILS(kn_cat(ctx, xs, 3, 0), S(KN_ESHAPE), "kn_cat", "dim 1");
    kn_tensor *ys[2] = {T(2, 3), T(3)};
    FAILS(kn_cat(ctx, ys, 2, 0), S(KN_ESHAPE), "kn_cat", "dims|rank");
    FAILS(kn_cat(ctx, xs, 0, 0), S(KN_EINVAL), "kn_cat", "empty|0 tensors|n");
    kn_tensor *zs[2] = {T(2, 3), T(3, 2)};
    FAILS(kn_stack(ctx, zs, 2, 0), S(KN_ESHAPE), "kn_stack", "shape|dim");

    FAILS(kn_reshape(ctx, T(2, 3), 1, SH(4)), S(KN_ESHAPE), "kn_reshape", "6|shape");
    FAILS(kn_reshape(ctx, T(2, 3), 2, SH(-1, -1)), S(KN_EINVAL) | S(KN_ESHAPE), "kn_reshape", "-1");
    FAILS(kn_reshape(ctx, T(2, 3), 2, SH(-1, 4)), S(KN_ESHAPE), "kn_reshape", "6|shape");
    FAILS(kn_reshape(ctx, T(2, 3), 2, SH(-2, -3)), S(KN_EINVAL) | S(KN_ESHAPE), "kn_reshape", "dim|size");
    FAILS(kn_view(ctx, kn_transpose(ctx, T(2, 3), 0, 1), 1, SH(6)), ANY, "kn_view", "contiguous|stride|view");
    FAILS(kn_expand(ctx, T(2, 3), 2, SH(4, 3)), S(KN_ESHAPE), "kn_expand", "dim 0");
    FAILS(kn_expand(ctx, T(2, 3), 1, SH(3)), S(KN_ESHAPE) | S(KN_EINVAL), "kn_expand", "dims");

    FAILS(kn_layer_norm(ctx, T(2, 3), 1, SH(4), NULL, NULL, 0), S(KN_ESHAPE), "kn_layer_norm",
          "normalized_shape");
    FAILS(kn_layer_norm(ctx, T(2, 3), 1, SH(3), T(4), NULL, 0), S(KN_ESHAPE), "kn_layer_norm", "weight");
    FAILS(kn_batch_norm(ctx, T(2, 3, 4), T(4), T(3), NULL, NULL, 0, 0, 0), S(KN_ESHAPE), "kn_batch_norm",
          "running_mean");
    FAILS(kn_group_norm(ctx, T(2, 6, 4), 4, NULL, NULL, 0), S(KN_EINVAL) | S(KN_ESHAPE), "kn_group_norm",
          "group");
    FAILS(kn_cross_entropy(ctx, T(4, 3), TD(KN_I64, 5), NULL), S(KN_ESHAPE), "kn_cross_entropy", "target");
    FAILS(kn_mse_loss(ctx, T(4, 3), T(4, 2), KN_REDUCE_MEAN), S(KN_ESHAPE), "kn_mse_loss", "target|dim");
    FAILS(kn_scaled_dot_product_attention(ctx, T(2, 4, 8), T(2, 5, 6), T(2, 5, 8), NULL, 0, 0), S(KN_ESHAPE),
          "kn_scaled_dot_product_attention", "'k'|key|dim");
    FAILS(kn_masked_fill(ctx, T(3), TD(KN_BOOL, 2, 3), 0), S(KN_ESHAPE), "kn_masked_fill", "mask");
}

/* ---- dims out of range and bad parameters ---- */

static void test_dims(kn_ctx *ctx)
{
    FAILS(kn_transpose(ctx, T(2, 3), 0, 2), S(KN_EINVAL), "kn_transpose", "dim");
    FAILS(kn_transpose(ctx, T(2, 3), -3, 0), S(KN_EINVAL), "kn_transpose", "dim");
    FAILS(kn_sum(ctx, T(2, 3), (int[]){2}, 1, 0), S(KN_EINVAL), "kn_sum", "dim");
    FAILS(kn_sum(ctx, T(2, 3), (int[]){0, -2}, 2, 0), S(KN_EINVAL), "kn_sum", "dim");   /* repeated */
    FAILS(kn_mean(ctx, T(2, 3), (int[]){-3}, 1, 1), S(KN_EINVAL), "kn_mean", "dim");
    FAILS(kn_amax(ctx, T(2, 3), (int[]){7}, 1, 0), S(KN_EINVAL), "kn_amax", "dim");
    FAILS(kn_argmax(ctx, T(2, 3), 2, 0), S(KN_EINVAL), "kn_argmax", "dim");
    FAILS(kn_cumsum(ctx, T(2, 3), -3), S(KN_EINVAL), "kn_cumsum", "dim");
    FAILS(kn_prod(ctx, T(2, 3), 9, 0), S(KN_EINVAL), "kn_prod", "dim");
    FAILS(kn_softmax(ctx, T(2, 3), 2), S(KN_EINVAL), "kn_softmax", "dim");
    FAILS(kn_softmax(ctx, T(2, 3), -3), S(KN_EINVAL), "kn_softmax", "dim");
    FAILS(kn_log_softmax(ctx, T(4), 1), S(KN_EINVAL), "kn_log_softmax", "dim");
    FAILS(kn_squeeze(ctx, T(2, 1), 2), S(KN_EINVAL), "kn_squeeze", "dim");
    FAILS(kn_unsqueeze(ctx, T(2, 3), 4), S(KN_EINVAL), "kn_unsqueeze", "dim");
    FAILS(kn_flatten(ctx, T(2, 3, 4), 2, 1), S(KN_EINVAL), "kn_flatten", "dim");
    FAILS(kn_permute(ctx, T(2, 3, 4), (int[]){0, 0, 1}), S(KN_EINVAL), "kn_permute", "perm|dim");
    FAILS(kn_permute(ctx, T(2, 3), (int[]){0, 2}), S(KN_EINVAL), "kn_permute", "perm|dim");
    kn_tensor *xs[2] = {T(2, 3), T(2, 3)};
    FAILS(kn_cat(ctx, xs, 2, 2), S(KN_EINVAL), "kn_cat", "dim");
    FAILS(kn_stack(ctx, xs, 2, 4), S(KN_EINVAL), "kn_stack", "dim");
    FAILS(kn_slice(ctx, T(5), 0, 0, 5, 0), S(KN_EINVAL), "kn_slice", "step");
    FAILS(kn_slice(ctx, T(5), 1, 0, 5, 1), S(KN_EINVAL), "kn_slice", "dim");
    FAILS(kn_narrow(ctx, T(5), 0, 3, 4), S(KN_EINVAL), "kn_narrow", "length|start");
    FAILS(kn_index_select(ctx, T(3, 4), 2, idx64(ctx, 1, SH(0))), S(KN_EINVAL), "kn_index_select", "dim");
    FAILS(kn_gather(ctx, T(3, 4), -3, TD(KN_I64, 3, 4)), S(KN_EINVAL), "kn_gather", "dim");
    FAILS(kn_pad(ctx, T(2, 3), 6, SH(1, 1, 1, 1, 1, 1), 0), S(KN_EINVAL), "kn_pad", "pad");
    FAILS(kn_pad(ctx, T(2, 3), 1, SH(1), 0), S(KN_EINVAL), "kn_pad", "pad");
    FAILS(kn_pad(ctx, T(2, 3), 2, SH(-4, 0), 0), S(KN_EINVAL) | S(KN_ESHAPE), "kn_pad", "pad");

    kn_tensor *out[4];
    ERR(kn_split(ctx, T(6), 0, 0, out, 4) == -1, S(KN_EINVAL), "kn_split", "split_size");
    ERR(kn_split(ctx, T(6), 2, 1, out, 4) == -1, S(KN_EINVAL), "kn_split", "dim");
    ERR(kn_chunk(ctx, T(6), 0, 0, out, 4) == -1, S(KN_EINVAL), "kn_chunk", "chunks");
    ERR(kn_chunk(ctx, T(6), 2, -2, out, 4) == -1, S(KN_EINVAL), "kn_chunk", "dim");

    FAILS(kn_dropout(ctx, T(4), 1.5, 1), S(KN_EINVAL), "kn_dropout", "probability|'p'");
    FAILS(kn_dropout(ctx, T(4), -0.1, 1), S(KN_EINVAL), "kn_dropout", "probability|'p'");
    FAILS(kn_mse_loss(ctx, T(4), T(4), (kn_reduction)9), S(KN_EINVAL), "kn_mse_loss", "reduction");
    kn_loss_opts bad_red = {(kn_reduction)-1, NULL, 0, 0, 0}, bad_eps = {KN_REDUCE_MEAN, NULL, 0, 0, 2.0};
    FAILS(kn_cross_entropy(ctx, T(2, 3), idx64(ctx, 2, SH(0, 1)), &bad_red), S(KN_EINVAL), "kn_cross_entropy",
          "reduction");
    FAILS(kn_cross_entropy(ctx, T(2, 3), idx64(ctx, 2, SH(0, 1)), &bad_eps), S(KN_EINVAL), "kn_cross_entropy",
          "label_smoothing");
    FAILS(kn_arange(ctx, KN_F32, 0, 10, 0), S(KN_EINVAL), "kn_arange", "step");
    FAILS(kn_arange(ctx, KN_F32, 0, 10, -1), S(KN_EINVAL), "kn_arange", "step|end");
    FAILS(kn_one_hot(ctx, idx64(ctx, 2, SH(0, 1)), 0), S(KN_EINVAL) | S(KN_EINDEX), "kn_one_hot",
          "num_classes|class");
    FAILS(kn_adaptive_avg_pool2d(ctx, T(1, 1, 4, 4), -3, 2), S(KN_EINVAL), "kn_adaptive_avg_pool2d",
          "out_h|output");
    FAILS(kn_adaptive_avg_pool2d(ctx, T(1, 1, 4, 4), 2, -1), S(KN_EINVAL), "kn_adaptive_avg_pool2d",
          "out_w|output");
}

/* ---- dtypes the op does not accept, and codes that are no dtype ---- */

static void test_dtypes(kn_ctx *ctx)
{
    FAILS(kn_where(ctx, T(3), T(3), T(3)), S(KN_EDTYPE), "kn_where", "cond");
    FAILS(kn_where(ctx, TD(KN_I64, 3), T(3), T(3)), S(KN_EDTYPE), "kn_where", "cond");
    FAILS(kn_masked_fill(ctx, T(3), T(3), 1), S(KN_EDTYPE), "kn_masked_fill", "mask");
    FAILS(kn_gather(ctx, T(3, 4), 1, T(3, 2)), S(KN_EDTYPE), "kn_gather", "index");
    FAILS(kn_index_select(ctx, T(3, 4), 0, T(2)), S(KN_EDTYPE), "kn_index_select", "index");
    FAILS(kn_embedding(ctx, T(5, 4), T(3)), S(KN_EDTYPE), "kn_embedding", "index");
    FAILS(kn_scatter_add(ctx, T(3), 0, T(3), T(3)), S(KN_EDTYPE), "kn_scatter_add", "index");
    FAILS(kn_one_hot(ctx, T(3), 4), S(KN_EDTYPE), "kn_one_hot", "index");
    FAILS(kn_rand(ctx, KN_I32, 1, SH(3)), S(KN_EDTYPE), "kn_rand", "dtype|i32");
    FAILS(kn_randn(ctx, KN_BOOL, 1, SH(3)), S(KN_EDTYPE), "kn_randn", "dtype|bool");
    FAILS(kn_sub(ctx, TD(KN_BOOL, 3), TD(KN_BOOL, 3)), S(KN_EDTYPE), "kn_sub", "bool");
    FAILS(kn_neg(ctx, TD(KN_BOOL, 3)), S(KN_EDTYPE), "kn_neg", "bool");
    FAILS(kn_cross_entropy(ctx, T(2, 3), T(2), NULL), S(KN_EDTYPE), "kn_cross_entropy", "target");
    FAILS(kn_nll_loss(ctx, TD(KN_I64, 2, 3), idx64(ctx, 2, SH(0, 1)), NULL), S(KN_EDTYPE), "kn_nll_loss", "logp");

    /* i32 indices are as good as i64 */
    int32_t i32[3] = {2, 0, 1};
    kn_tensor *g = kn_gather(ctx, T(1, 3), 1, kn_tensor_from(ctx, KN_I32, 2, SH(1, 3), i32));
    float gv[3];
    CHECK(g && kn_read(ctx, g, gv, sizeof gv) == KN_OK && gv[0] == 0.0f && gv[1] == -0.5f && gv[2] == -0.25f);

    kn_dtype bad = (kn_dtype)99;
    FAILS(kn_zeros(ctx, bad, 1, SH(3)), S(KN_EDTYPE), "kn_zeros", "dtype");
    FAILS(kn_ones(ctx, (kn_dtype)-1, 1, SH(3)), S(KN_EDTYPE), "kn_ones", "dtype");
    FAILS(kn_full(ctx, KN_NDTYPES, 0, NULL, 1), S(KN_EDTYPE), "kn_full", "dtype");
    FAILS(kn_tensor_from(ctx, bad, 1, SH(3), "abc"), S(KN_EDTYPE), "kn_tensor_from", "dtype");
    FAILS(kn_to(ctx, T(3), bad), S(KN_EDTYPE), "kn_to", "dtype");
    FAILS(kn_arange(ctx, bad, 0, 3, 1), S(KN_EDTYPE), "kn_arange", "dtype");
    FAILS(kn_rand(ctx, bad, 1, SH(3)), S(KN_EDTYPE), "kn_rand", "dtype");
    FAILS(kn_randn(ctx, bad, 1, SH(3)), S(KN_EDTYPE), "kn_randn", "dtype");
    CHECK(strcmp(kn_dtype_name(bad), "?") == 0 && kn_dtype_size(bad) == 0);
    CHECK(kn_dtype_size((kn_dtype)-5) == 0);
}

/* ---- indices out of range ---- */

static void test_indices(kn_ctx *ctx)
{
    int64_t i3[2] = {0, 3}, neg[2] = {1, -1};
    FAILS(kn_gather(ctx, T(2, 3), 1, kn_tensor_from(ctx, KN_I64, 2, SH(2, 1), SH(1, 3))), S(KN_EINDEX),
          "kn_gather", "index 3");
    FAILS(kn_gather(ctx, T(2, 3), 1, kn_tensor_from(ctx, KN_I64, 2, SH(2, 1), SH(-1, 0))), S(KN_EINDEX),
          "kn_gather", "index -1");
    FAILS(kn_gather(ctx, T(2, 3), 0, kn_tensor_from(ctx, KN_I64, 2, SH(1, 3), SH(0, 2, 1))), S(KN_EINDEX),
          "kn_gather", "index 2");
    FAILS(kn_gather(ctx, T(2, 3), 1, TD(KN_I64, 3, 3)), S(KN_ESHAPE), "kn_gather", "index");
    FAILS(kn_index_select(ctx, T(3, 4), 0, idx64(ctx, 2, i3)), S(KN_EINDEX), "kn_index_select", "index 3");
    FAILS(kn_index_select(ctx, T(3, 4), 1, idx64(ctx, 2, SH(4, 0))), S(KN_EINDEX), "kn_index_select", "index 4");
    FAILS(kn_index_select(ctx, T(3, 4), 0, idx64(ctx, 2, neg)), S(KN_EINDEX), "kn_index_select", "index -1");
    FAILS(kn_index_select(ctx, T(3, 4), 0, TD(KN_I64, 2, 2)), S(KN_ESHAPE) | S(KN_EINVAL), "kn_index_select",
          "index");
    FAILS(kn_embedding(ctx, T(3, 4), idx64(ctx, 2, i3)), S(KN_EINDEX), "kn_embedding", "index 3");
    FAILS(kn_embedding(ctx, T(3, 4), idx64(ctx, 2, neg)), S(KN_EINDEX), "kn_embedding", "index -1");
    FAILS(kn_embedding(ctx, T(3, 4), kn_tensor_from(ctx, KN_I64, 2, SH(1, 2), SH(0, 100))), S(KN_EINDEX),
          "kn_embedding", "index 100");
    FAILS(kn_embedding(ctx, T(12), idx64(ctx, 2, SH(0, 1))), S(KN_ESHAPE) | S(KN_EINVAL), "kn_embedding",
          "weight");
    FAILS(kn_scatter_add(ctx, T(3), 0, idx64(ctx, 2, i3), T(2)), S(KN_EINDEX), "kn_scatter_add", "index 3");
    FAILS(kn_one_hot(ctx, idx64(ctx, 2, i3), 3), S(KN_EINDEX) | S(KN_EINVAL), "kn_one_hot", "3");
    FAILS(kn_one_hot(ctx, idx64(ctx, 2, neg), 3), S(KN_EINDEX) | S(KN_EINVAL), "kn_one_hot", "-1");

    /* class indices: out of range either way; the default ignore_index (-100) is not an error */
    FAILS(kn_cross_entropy(ctx, T(2, 3), idx64(ctx, 2, i3), NULL), S(KN_EINDEX), "kn_cross_entropy",
          "target|index 3|class");
    FAILS(kn_cross_entropy(ctx, T(2, 3), idx64(ctx, 2, neg), NULL), S(KN_EINDEX), "kn_cross_entropy",
          "target|index -1|class");
    kn_loss_opts none = {KN_REDUCE_NONE, NULL, 0, 0, 0};
    FAILS(kn_cross_entropy(ctx, T(2, 3, 2), kn_tensor_from(ctx, KN_I64, 2, SH(2, 2), SH(0, 1, 2, 5)), &none),
          S(KN_EINDEX), "kn_cross_entropy", "target|index 5|class");
    FAILS(kn_nll_loss(ctx, T(2, 3), idx64(ctx, 2, i3), NULL), S(KN_EINDEX), "kn_nll_loss", "target|index 3|class");
    kn_tensor *ce = kn_cross_entropy(ctx, T(2, 3), idx64(ctx, 2, SH(-100, 2)), NULL);
    CHECK_MSG(ce != NULL, "ignore_index -100 refused: %s", kn_last_error(ctx));
    kn_clear_error(ctx);
}

/* ---- an index out of range names the public op, compiled as eager ---- */

/* P (4, 3), a parameter, read through the op at the indices in[0]: (4) with the last out of range;
 * the result squared and summed (fused with the op's gather into one program) */
static int ix_which;
static kn_tensor *ix_param;

static kn_status ix_body(kn_ctx *c, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    kn_tensor *p = ix_param, *y = ix_which == 0   ? kn_embedding(c, p, in[0])
                                 : ix_which == 1 ? kn_index_select(c, p, 0, in[0])
                                 : ix_which == 2 ? kn_cross_entropy(c, p, in[0], NULL)
                                                 : kn_nll_loss(c, kn_log_softmax(c, p, 1), in[0], NULL);
    out[0] = kn_sum(c, kn_mul(c, y, y), NULL, 0, 0);
    return out[0] ? KN_OK : kn_last_status(c);
}

static char ix_log[4096];
static void ix_sink(void *user, const char *line)
{
    (void)user;
    size_t n = strlen(ix_log);
    snprintf(ix_log + n, sizeof ix_log - n, "%s\n", line);
}

/* Eager on each eager backend says want; a compiled call on each backend (with the parameter
 * requiring grad: a joint graph, partitioned) says "kn_call: " and want; and so does backend c's
 * program loaded from the program cache by a second context. */
static void test_index_origin(void)
{
    static const char *want[4] = {"kn_embedding: index 5 out of range for dim 0 of size 4",
                                  "kn_index_select: index 5 out of range for dim 0 of size 4",
                                  "kn_cross_entropy: target class -7 out of range for 3 classes",
                                  "kn_nll_loss: target class 3 out of range for 3 classes"};
    static const int64_t bad[4] = {5, 5, -7, 3};
    static const kn_backend be[3] = {KN_BACKEND_INTERP, KN_BACKEND_TCC, KN_BACKEND_C};
    static const char *bn[3] = {"interp", "tcc", "c"};
    char full[256];
    for (ix_which = 0; ix_which < 4; ix_which++) {
        for (int b = 0; b < 4; b++) { /* b 3: backend c again, in a second context: from the program cache */
            kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 5});
            int64_t good[4] = {0, 2, 1, 2}, worse[4] = {0, 2, 1, bad[ix_which]};
            ix_param = kn_param(ctx, kn_randn(ctx, KN_F32, 2, SH(4, 3)));
            kn_tensor *in[1] = {idx64(ctx, 4, good)}, *out[1];
            if (b < 3) { /* eager */
                CHECK(kn_set_eager_backend(ctx, be[b]) == KN_OK);
                in[0] = idx64(ctx, 4, worse);
                kn_status s = ix_body(ctx, NULL, in, 1, out, 1);
                CHECK_MSG(s == KN_EINDEX && !strcmp(kn_last_error(ctx), want[ix_which]),
                          "eager on %s: expected \"%s\", got %d \"%s\"", bn[b], want[ix_which], (int)s,
                          kn_last_error(ctx));
                kn_clear_error(ctx);
                CHECK(kn_set_eager_backend(ctx, KN_BACKEND_INTERP) == KN_OK);
                in[0] = idx64(ctx, 4, good);
            }
            ix_log[0] = 0;
            kn_set_log(ctx, ix_sink, NULL);
            kn_set_logs(ctx, "perf");
            kn_compile_opts o = {.backend = be[b < 3 ? b : 2], .params = &ix_param, .nparams = 1, .name = "ix"};
            kn_fn *f = kn_compile(ctx, ix_body, NULL, &o);
            CHECK_MSG(kn_call(f, in, 1, out, 1) == KN_OK, "%s: %s", bn[b < 3 ? b : 2], kn_last_error(ctx));
            in[0] = idx64(ctx, 4, worse);
            kn_status s = kn_call(f, in, 1, out, 1);
            snprintf(full, sizeof full, "kn_call: %s", want[ix_which]);
            CHECK_MSG(s == KN_EINDEX && !strcmp(kn_last_error(ctx), full), "compiled on %s%s: expected \"%s\", got %d \"%s\"",
                      bn[b < 3 ? b : 2], b == 3 ? " (program cache)" : "", full, (int)s, kn_last_error(ctx));
            kn_clear_error(ctx);
            if (b == 3 && port_jit_available(PORT_CC))
                CHECK_MSG(strstr(ix_log, "from the program cache") != NULL, "not from the program cache: %s", ix_log);
            kn_fn_free(f);
            kn_ctx_free(ctx);
        }
    }
}

/* ---- convolution and pooling parameters ---- */

static void test_conv_pool(kn_ctx *ctx)
{
    kn_conv_opts o = {{1, 1}, {0, 0}, {1, 1}, {0, 0}, 1};
    kn_tensor *x = T(1, 4, 5, 5);
    FAILS(kn_conv2d(ctx, x, T(2, 3, 3, 3), NULL, &o), S(KN_ESHAPE), "kn_conv2d", "channel|weight");
    kn_conv_opts g3 = o;
    g3.groups = 3;
    FAILS(kn_conv2d(ctx, x, T(3, 1, 3, 3), NULL, &g3), S(KN_ESHAPE) | S(KN_EINVAL), "kn_conv2d", "group");
    kn_conv_opts g2 = o;
    g2.groups = 2;
    FAILS(kn_conv2d(ctx, x, T(3, 2, 3, 3), NULL, &g2), S(KN_ESHAPE) | S(KN_EINVAL), "kn_conv2d", "group");
    FAILS(kn_conv2d(ctx, x, T(2, 4, 3, 3), NULL, &g2), S(KN_ESHAPE), "kn_conv2d", "channel|weight");
    kn_conv_opts gn = o;
    gn.groups = -1;
    FAILS(kn_conv2d(ctx, x, T(2, 4, 3, 3), NULL, &gn), S(KN_EINVAL), "kn_conv2d", "group");
    FAILS(kn_conv2d(ctx, x, T(2, 4, 3), NULL, &o), S(KN_ESHAPE) | S(KN_EINVAL), "kn_conv2d", "weight");
    FAILS(kn_conv2d(ctx, T(5, 5), T(2, 4, 3, 3), NULL, &o), S(KN_ESHAPE) | S(KN_EINVAL), "kn_conv2d",
          "input|'x'"); /* (C, H, W) is fine, (H, W) is not */
    FAILS(kn_conv2d(ctx, x, T(2, 4, 3, 3), T(3), &o), S(KN_ESHAPE), "kn_conv2d", "bias|'b'");
    kn_conv_opts sn = o;
    sn.stride[1] = -1;
    FAILS(kn_conv2d(ctx, x, T(2, 4, 3, 3), NULL, &sn), S(KN_EINVAL), "kn_conv2d", "stride");
    kn_conv_opts pn = o;
    pn.padding[0] = -2;
    FAILS(kn_conv2d(ctx, x, T(2, 4, 3, 3), NULL, &pn), S(KN_EINVAL), "kn_conv2d", "padding");
    kn_conv_opts dn = o;
    dn.dilation[0] = -1;
    FAILS(kn_conv2d(ctx, x, T(2, 4, 3, 3), NULL, &dn), S(KN_EINVAL), "kn_conv2d", "dilation");
    FAILS(kn_conv2d(ctx, T(1, 1, 3, 3), T(1, 1, 5, 5), NULL, &o), S(KN_ESHAPE) | S(KN_EINVAL), "kn_conv2d",
          "kernel|input");
    kn_conv_opts big = o;
    big.dilation[0] = big.dilation[1] = 3; /* effective kernel 7 > 5 */
    FAILS(kn_conv2d(ctx, x, T(2, 4, 3, 3), NULL, &big), S(KN_ESHAPE) | S(KN_EINVAL), "kn_conv2d",
          "kernel|input|dilation");
    /* stride 0 means the default 1 (zeroed options are PyTorch's defaults) */
    kn_conv_opts s0 = o;
    s0.stride[0] = s0.stride[1] = 0;
    kn_tensor *y = kn_conv2d(ctx, x, T(2, 4, 3, 3), NULL, &s0);
    CHECK_MSG(y && kn_shape(y)[2] == 3 && kn_shape(y)[3] == 3, "%s", kn_last_error(ctx));
    kn_clear_error(ctx);

    FAILS(kn_conv1d(ctx, T(1, 4, 5, 5), T(2, 4, 3), NULL, &o), S(KN_ESHAPE) | S(KN_EINVAL), "kn_conv1d",
          "input|'x'");
    FAILS(kn_conv1d(ctx, T(1, 4, 2), T(2, 4, 3), NULL, &o), S(KN_ESHAPE) | S(KN_EINVAL), "kn_conv1d",
          "kernel|input");
    kn_conv_opts tp = o;
    tp.stride[0] = tp.stride[1] = 2;
    tp.output_padding[0] = 2; /* must be smaller than the stride */
    FAILS(kn_conv_transpose2d(ctx, x, T(4, 2, 3, 3), NULL, &tp), S(KN_EINVAL), "kn_conv_transpose2d",
          "output_padding");
    FAILS(kn_conv_transpose2d(ctx, x, T(3, 2, 3, 3), NULL, &o), S(KN_ESHAPE), "kn_conv_transpose2d",
          "channel|weight");

    kn_pool_opts p = {{2, 2}, {0, 0}, {2, 2}, {1, 1}, 0, 0, 0}; /* padding 2 > kernel 2 / 2 */
    FAILS(kn_max_pool2d(ctx, x, &p), S(KN_EINVAL), "kn_max_pool2d", "pad");
    FAILS(kn_avg_pool2d(ctx, x, &p), S(KN_EINVAL), "kn_avg_pool2d", "pad");
    kn_pool_opts k0 = {{0, 2}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0};
    FAILS(kn_max_pool2d(ctx, x, &k0), S(KN_EINVAL), "kn_max_pool2d", "kernel");
    FAILS(kn_avg_pool2d(ctx, x, &k0), S(KN_EINVAL), "kn_avg_pool2d", "kernel");
    kn_pool_opts sn2 = {{2, 2}, {-1, 1}, {0, 0}, {0, 0}, 0, 0, 0};
    FAILS(kn_max_pool2d(ctx, x, &sn2), S(KN_EINVAL), "kn_max_pool2d", "stride");
    kn_pool_opts k6 = {{6, 6}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0}; /* window larger than the 5x5 input */
    FAILS(kn_max_pool2d(ctx, x, &k6), S(KN_EINVAL) | S(KN_ESHAPE), "kn_max_pool2d", "kernel|input|output|size");
    FAILS(kn_avg_pool2d(ctx, x, &k6), S(KN_EINVAL) | S(KN_ESHAPE), "kn_avg_pool2d", "kernel|input|output|size");
    kn_pool_opts ok = {{2, 2}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0};
    FAILS(kn_max_pool2d(ctx, T(5, 5), &ok), S(KN_EINVAL) | S(KN_ESHAPE), "kn_max_pool2d", "input|'x'|dims");
    kn_pool_opts dn2 = {{2, 2}, {0, 0}, {0, 0}, {-1, 1}, 0, 0, 0};
    FAILS(kn_max_pool2d(ctx, x, &dn2), S(KN_EINVAL), "kn_max_pool2d", "dilation");
    kn_tensor *m = kn_max_pool2d(ctx, x, &ok);
    CHECK_MSG(m && kn_shape(m)[2] == 2 && kn_shape(m)[3] == 2, "%s", kn_last_error(ctx));
    kn_clear_error(ctx);
}

/* ---- NULL handles, NULL contexts, NULL arrays ---- */

static void test_nulls(kn_ctx *ctx)
{
    kn_tensor *a = T(2, 3), *w = T(4, 3), *x4 = T(1, 2, 4, 4), *k = T(2, 2, 3, 3);
    kn_conv_opts co = {{1, 1}, {0, 0}, {1, 1}, {0, 0}, 1};
    FAILS(kn_add(ctx, NULL, a), S(KN_EINVAL), "kn_add", "operand 'a' is NULL");
    FAILS(kn_add(ctx, a, NULL), S(KN_EINVAL), "kn_add", "operand 'b' is NULL");
    FAILS(kn_exp(ctx, NULL), S(KN_EINVAL), "kn_exp", "NULL");
    FAILS(kn_where(ctx, NULL, a, a), S(KN_EINVAL), "kn_where", "'cond'");
    FAILS(kn_matmul(ctx, a, NULL), S(KN_EINVAL), "kn_matmul", "'b'");
    FAILS(kn_matmul(ctx, NULL, a), S(KN_EINVAL), "kn_matmul", "'a'");
    FAILS(kn_linear(ctx, a, NULL, NULL), S(KN_EINVAL), "kn_linear", "'w'|weight");
    FAILS(kn_linear(ctx, NULL, w, NULL), S(KN_EINVAL), "kn_linear", "'x'|input");
    FAILS(kn_softmax(ctx, NULL, 0), S(KN_EINVAL), "kn_softmax", "NULL");
    FAILS(kn_sum(ctx, NULL, NULL, 0, 0), S(KN_EINVAL), "kn_sum", "NULL");
    FAILS(kn_transpose(ctx, NULL, 0, 1), S(KN_EINVAL), "kn_transpose", "NULL");
    FAILS(kn_reshape(ctx, NULL, 1, SH(6)), S(KN_EINVAL), "kn_reshape", "NULL");
    FAILS(kn_conv2d(ctx, x4, NULL, NULL, &co), S(KN_EINVAL), "kn_conv2d", "'w'|weight");
    FAILS(kn_conv2d(ctx, NULL, k, NULL, &co), S(KN_EINVAL), "kn_conv2d", "'x'|input");
    FAILS(kn_max_pool2d(ctx, NULL, &(kn_pool_opts){{2, 2}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0}), S(KN_EINVAL),
          "kn_max_pool2d", "NULL");
    FAILS(kn_layer_norm(ctx, NULL, 1, SH(3), NULL, NULL, 0), S(KN_EINVAL), "kn_layer_norm", "NULL");
    FAILS(kn_cross_entropy(ctx, a, NULL, NULL), S(KN_EINVAL), "kn_cross_entropy", "'target'");
    FAILS(kn_cross_entropy(ctx, NULL, idx64(ctx, 2, SH(0, 1)), NULL), S(KN_EINVAL), "kn_cross_entropy",
          "'input'");
    FAILS(kn_embedding(ctx, NULL, idx64(ctx, 1, SH(0))), S(KN_EINVAL), "kn_embedding", "'weight'");
    FAILS(kn_embedding(ctx, w, NULL), S(KN_EINVAL), "kn_embedding", "'index'");
    FAILS(kn_gather(ctx, a, 0, NULL), S(KN_EINVAL), "kn_gather", "'index'");
    FAILS(kn_scaled_dot_product_attention(ctx, T(2, 3), NULL, T(2, 3), NULL, 0, 0), S(KN_EINVAL),
          "kn_scaled_dot_product_attention", "'k'");
    kn_tensor *one_null[2] = {a, NULL};
    FAILS(kn_cat(ctx, one_null, 2, 0), S(KN_EINVAL), "kn_cat", "NULL");
    FAILS(kn_cat(ctx, NULL, 2, 0), S(KN_EINVAL), "kn_cat", "NULL");
    FAILS(kn_stack(ctx, one_null, 2, 0), S(KN_EINVAL), "kn_stack", "NULL");
    kn_tensor *out[2];
    ERR(kn_split(ctx, NULL, 1, 0, out, 2) == -1, S(KN_EINVAL), "kn_split", "NULL");
    ERR(kn_split(ctx, a, 1, 0, NULL, 2) == -1, S(KN_EINVAL), "kn_split", "out");

    /* NULL arrays with a nonzero count */
    FAILS(kn_zeros(ctx, KN_F32, 2, NULL), S(KN_EINVAL), "kn_zeros", "shape");
    FAILS(kn_full(ctx, KN_F32, 1, NULL, 2), S(KN_EINVAL), "kn_full", "shape");
    FAILS(kn_rand(ctx, KN_F32, 3, NULL), S(KN_EINVAL), "kn_rand", "shape");
    FAILS(kn_tensor_from(ctx, KN_F32, 2, NULL, "data"), S(KN_EINVAL), "kn_tensor_from", "shape");
    FAILS(kn_tensor_from(ctx, KN_F32, 1, SH(2), NULL), S(KN_EINVAL), "kn_tensor_from", "data");
    FAILS(kn_reshape(ctx, a, 2, NULL), S(KN_EINVAL), "kn_reshape", "shape");
    FAILS(kn_view(ctx, a, 1, NULL), S(KN_EINVAL), "kn_view", "shape");
    FAILS(kn_expand(ctx, a, 2, NULL), S(KN_EINVAL), "kn_expand", "shape");
    FAILS(kn_permute(ctx, a, NULL), S(KN_EINVAL), "kn_permute", "perm");
    FAILS(kn_sum(ctx, a, NULL, 1, 0), S(KN_EINVAL), "kn_sum", "dims");
    FAILS(kn_mean(ctx, a, NULL, 2, 0), S(KN_EINVAL), "kn_mean", "dims");
    FAILS(kn_pad(ctx, a, 2, NULL, 0), S(KN_EINVAL), "kn_pad", "pad");
    FAILS(kn_layer_norm(ctx, a, 1, NULL, NULL, NULL, 0), S(KN_EINVAL), "kn_layer_norm", "normalized_shape");
    FAILS(kn_rms_norm(ctx, a, 1, NULL, NULL, 0), S(KN_EINVAL), "kn_rms_norm", "normalized_shape");
    FAILS(kn_zeros(ctx, KN_F32, -1, NULL), S(KN_EINVAL), "kn_zeros", "dims");
    FAILS(kn_reshape(ctx, a, -1, SH(6)), S(KN_EINVAL), "kn_reshape", "dims|ndim");

    /* reading back */
    float small[5];
    ERR(kn_read(ctx, a, small, sizeof small) == KN_EINVAL, S(KN_EINVAL), "kn_read", "bytes");
    ERR(kn_read(ctx, a, NULL, 24) == KN_EINVAL, S(KN_EINVAL), "kn_read", "dst");
    ERR(kn_read(ctx, NULL, small, sizeof small) == KN_EINVAL, S(KN_EINVAL), "kn_read", "NULL");
    double v;
    ERR(kn_item(ctx, a, &v) == KN_ESHAPE, S(KN_ESHAPE), "kn_item", "6 elements");
    ERR(kn_item(ctx, kn_zeros(ctx, KN_F32, 1, SH(0)), &v) == KN_ESHAPE, S(KN_ESHAPE), "kn_item", "0 elements");
    ERR(kn_item(ctx, NULL, &v) == KN_EINVAL, S(KN_EINVAL), "kn_item", "NULL");
    ERR(kn_item(ctx, kn_scalar(ctx, 1), NULL) == KN_EINVAL, S(KN_EINVAL), "kn_item", "out");

    /* a NULL context: NULL or a status back, nothing touched */
    CHECK(kn_zeros(NULL, KN_F32, 1, SH(3)) == NULL);
    CHECK(kn_tensor_from(NULL, KN_F32, 1, SH(1), small) == NULL);
    CHECK(kn_scalar(NULL, 1.0) == NULL);
    CHECK(kn_add(NULL, a, a) == NULL);
    CHECK(kn_exp(NULL, a) == NULL);
    CHECK(kn_matmul(NULL, a, kn_transpose(ctx, a, 0, 1)) == NULL);
    CHECK(kn_linear(NULL, a, w, NULL) == NULL);
    CHECK(kn_softmax(NULL, a, 1) == NULL);
    CHECK(kn_sum(NULL, a, NULL, 0, 0) == NULL);
    CHECK(kn_reshape(NULL, a, 1, SH(6)) == NULL);
    CHECK(kn_cat(NULL, (kn_tensor *[]){a, a}, 2, 0) == NULL);
    CHECK(kn_conv2d(NULL, x4, k, NULL, &co) == NULL);
    CHECK(kn_layer_norm(NULL, a, 1, SH(3), NULL, NULL, 0) == NULL);
    CHECK(kn_cross_entropy(NULL, a, idx64(ctx, 2, SH(0, 1)), NULL) == NULL);
    CHECK(kn_embedding(NULL, w, idx64(ctx, 1, SH(0))) == NULL);
    CHECK(kn_split(NULL, a, 1, 0, out, 2) == -1);
    CHECK(kn_chunk(NULL, a, 2, 0, out, 2) == -1);
    CHECK(kn_read(NULL, a, small, sizeof small) == KN_EINVAL);
    CHECK(kn_item(NULL, a, &v) == KN_EINVAL);
    CHECK(kn_last_status(NULL) != KN_OK && strstr(kn_last_error(NULL), "NULL") != NULL);
    kn_scope_begin(NULL);
    kn_scope_end(NULL);
    kn_clear_error(NULL);
    kn_set_log(NULL, NULL, NULL);
    kn_manual_seed(NULL, 1);
    kn_free(NULL, a); /* without a context nothing is freed: a stays usable */
    kn_free(ctx, NULL);
    kn_ctx_free(NULL);
    CHECK(kn_keep(NULL, a) == a && kn_live_bytes(NULL) == 0 && kn_live_tensors(NULL) == 0);
    CHECK(kn_ndim(NULL) == -1 && kn_shape(NULL) == NULL && kn_strides(NULL) == NULL && kn_numel(NULL) == -1);
    CHECK(!kn_is_contiguous(NULL));
    CHECK(kn_last_status(ctx) == KN_OK); /* none of that set an error on ctx */

    /* an error inside a nested call survives the NULL it produces */
    FAILS(kn_softmax(ctx, kn_matmul(ctx, a, a), 0), S(KN_ESHAPE), "kn_matmul", "dim|'b'|other");
}

/* ---- an optional operand (bias, weight, mask) that is NULL because its
 * own call failed: the op must fail too, keeping the first message, and not
 * quietly compute as if the operand had been left out ---- */

static kn_tensor *failed(kn_ctx *ctx) { return kn_zeros(ctx, KN_F32, 1, SH(-1)); }

#define PENDING(call) expect_err_(ctx, (call) == NULL, S(KN_ESHAPE), "kn_zeros", "negative size", __LINE__, #call)

static void test_pending(kn_ctx *ctx)
{
    kn_conv_opts co = {{1, 1}, {0, 0}, {1, 1}, {0, 0}, 1};
    PENDING(kn_linear(ctx, T(4, 3), T(2, 3), failed(ctx)));
    PENDING(kn_conv2d(ctx, T(1, 2, 4, 4), T(3, 2, 3, 3), failed(ctx), &co));
    PENDING(kn_conv1d(ctx, T(1, 2, 4), T(3, 2, 3), failed(ctx), &co));
    PENDING(kn_conv_transpose2d(ctx, T(1, 2, 4, 4), T(2, 3, 3, 3), failed(ctx), &co));
    PENDING(kn_layer_norm(ctx, T(2, 3), 1, SH(3), failed(ctx), NULL, 0));
    PENDING(kn_layer_norm(ctx, T(2, 3), 1, SH(3), T(3), failed(ctx), 0));
    PENDING(kn_rms_norm(ctx, T(2, 3), 1, SH(3), failed(ctx), 0));
    PENDING(kn_group_norm(ctx, T(2, 4, 3), 2, failed(ctx), NULL, 0));
    PENDING(kn_batch_norm(ctx, T(2, 3, 4), failed(ctx), NULL, NULL, NULL, 1, 0, 0));
    PENDING(kn_batch_norm(ctx, T(2, 3, 4), NULL, NULL, NULL, failed(ctx), 1, 0, 0));
    kn_loss_opts lo = {KN_REDUCE_MEAN, NULL, 0, 0, 0};
    lo.weight = failed(ctx);
    PENDING(kn_cross_entropy(ctx, T(2, 3), idx64(ctx, 2, SH(0, 1)), &lo));
    lo.weight = failed(ctx);
    PENDING(kn_nll_loss(ctx, T(2, 3), idx64(ctx, 2, SH(0, 1)), &lo));
    PENDING(kn_binary_cross_entropy(ctx, kn_sigmoid(ctx, T(4)), T(4), failed(ctx), KN_REDUCE_MEAN));
    PENDING(kn_binary_cross_entropy_with_logits(ctx, T(4), T(4), NULL, failed(ctx), KN_REDUCE_MEAN));
    PENDING(kn_scaled_dot_product_attention(ctx, T(2, 3, 4), T(2, 5, 4), T(2, 5, 4), failed(ctx), 0, 0));
}

/* ---- sizes: negative, too many dims, byte sizes that overflow ---- */

static void test_sizes(kn_ctx *ctx)
{
    int64_t big = (int64_t)1 << 40;
    FAILS(kn_zeros(ctx, KN_F32, 2, SH(3, -1)), S(KN_ESHAPE) | S(KN_EINVAL), "kn_zeros", "dim 1");
    FAILS(kn_ones(ctx, KN_F32, 1, SH(INT64_MIN)), S(KN_ESHAPE) | S(KN_EINVAL), "kn_ones", "dim 0");
    FAILS(kn_zeros(ctx, KN_F32, 9, SH(1, 1, 1, 1, 1, 1, 1, 1, 1)), S(KN_EINVAL), "kn_zeros", "9 dims");
    FAILS(kn_tensor_from(ctx, KN_F32, 9, SH(1, 1, 1, 1, 1, 1, 1, 1, 1), "xxxx"), S(KN_EINVAL), "kn_tensor_from",
          "9 dims");
    FAILS(kn_zeros(ctx, KN_F32, 3, SH(big, big, big)), S(KN_ENOMEM), "kn_zeros", "overflow");
    FAILS(kn_full(ctx, KN_F64, 3, SH((int64_t)1 << 31, (int64_t)1 << 31, 4), 1), S(KN_ENOMEM), "kn_full",
          "overflow");
    FAILS(kn_ones(ctx, KN_BOOL, 2, SH(INT64_MAX, 2)), S(KN_ENOMEM), "kn_ones", "overflow");
    FAILS(kn_rand(ctx, KN_F32, 2, SH(INT64_MAX, INT64_MAX)), S(KN_ENOMEM), "kn_rand", "overflow");
    FAILS(kn_randn(ctx, KN_F32, 2, SH(big, big)), S(KN_ENOMEM), "kn_randn", "overflow");
    FAILS(kn_tensor_from(ctx, KN_I64, 2, SH(big, big), "x"), S(KN_ENOMEM), "kn_tensor_from", "overflow");
    FAILS(kn_arange(ctx, KN_F32, 0, 1e300, 1), S(KN_ENOMEM), "kn_arange", "too many|overflow");
    FAILS(kn_reshape(ctx, T(2, 3), 3, SH(big, big, big)), S(KN_ESHAPE) | S(KN_ENOMEM), "kn_reshape", "6|overflow");
    FAILS(kn_one_hot(ctx, idx64(ctx, 2, SH(0, 1)), (int64_t)1 << 62), S(KN_ENOMEM), "kn_one_hot", "overflow|too many");
    /* empty tensors are fine */
    kn_tensor *z = kn_zeros(ctx, KN_F32, 2, SH(0, 3));
    CHECK(z && kn_numel(z) == 0 && kn_read(ctx, z, NULL, 0) == KN_OK);
    kn_clear_error(ctx);
}

/* ---- sizes whose arithmetic wraps: kept apart and last, since a
 * sanitizer build stops at the first signed overflow ---- */

static void test_wrapping(kn_ctx *ctx)
{
    int64_t big = (int64_t)1 << 40;
    FAILS(kn_pad(ctx, T(2, 3), 2, SH(INT64_MAX / 2, INT64_MAX / 2), 0), S(KN_ENOMEM) | S(KN_ESHAPE), "kn_pad",
          "pad");
    FAILS(kn_pad(ctx, T(2, 3), 2, SH((int64_t)1 << 62, (int64_t)1 << 62), 0), S(KN_ENOMEM) | S(KN_ESHAPE), "kn_pad",
          "pad");
    /* a broadcast view that big is harmless; materialising it is not */
    kn_tensor *e = kn_expand(ctx, T(1, 1, 1), 3, SH(big, big, big));
    if (e) {
        float f;
        FAILS(kn_contiguous(ctx, e), S(KN_ENOMEM), "kn_contiguous", "overflow");
        ERR(kn_read(ctx, e, &f, sizeof f) != KN_OK, S(KN_ENOMEM) | S(KN_EINVAL), "kn_read", "overflow|bytes");
        FAILS(kn_exp(ctx, e), S(KN_ENOMEM), "kn_exp", "overflow");
    } else {
        CHECK_ERR(ctx, "kn_expand");
    }
    /* zero elements, whatever the other dims: empty, or refused, never a wrapped size */
    EITHER(kn_zeros(ctx, KN_F32, 3, SH(0, (int64_t)1 << 62, (int64_t)1 << 62)));
    EITHER(kn_expand(ctx, kn_zeros(ctx, KN_F32, 2, SH(0, 1)), 2, SH(0, INT64_MAX)));
}

/* ---- after all of that the context still works ---- */

static void test_still_works(kn_ctx *ctx)
{
    CHECK(kn_last_status(ctx) == KN_OK && kn_last_error(ctx)[0] == 0);
    float av[3] = {1, 2, 3}, bv[1] = {10}, out[3];
    kn_tensor *a = kn_tensor_from(ctx, KN_F32, 1, SH(3), av), *b = kn_tensor_from(ctx, KN_F32, 1, SH(1), bv);
    CHECK(kn_read(ctx, kn_add(ctx, a, b), out, sizeof out) == KN_OK && out[0] == 11 && out[2] == 13);
    kn_tensor *m = kn_matmul(ctx, kn_reshape(ctx, a, 2, SH(1, 3)), kn_reshape(ctx, a, 2, SH(3, 1)));
    double v = 0;
    CHECK(m && kn_item(ctx, m, &v) == KN_OK && v == 14.0);
    CHECK(kn_last_status(ctx) == KN_OK);
}

int main(void)
{
    Count c = {0, 0, 0};
    kn_ctx_opts opts = {count_alloc, &c, 0};
    kn_ctx *ctx = kn_ctx_new(&opts);
    CHECK(ctx != NULL);
    if (!ctx) TEST_END("errors");
    kn_tensor *keep = kn_keep(ctx, kn_ones(ctx, KN_F32, 1, SH(4)));
    size_t tensors = kn_live_tensors(ctx), bytes = kn_live_bytes(ctx);

    kn_scope_begin(ctx);
    test_shapes(ctx);
    test_dims(ctx);
    test_dtypes(ctx);
    test_indices(ctx);
    test_conv_pool(ctx);
    test_nulls(ctx);
    test_pending(ctx);
    test_sizes(ctx);
    test_still_works(ctx);
    kn_scope_end(ctx);
    CHECK_MSG(kn_live_tensors(ctx) == tensors && kn_live_bytes(ctx) == bytes,
              "after the scope: %zu tensors, %zu bytes; before: %zu, %zu", kn_live_tensors(ctx), kn_live_bytes(ctx),
              tensors, bytes);

    kn_scope_begin(ctx);
    test_wrapping(ctx);
    kn_scope_end(ctx);
    test_index_origin();
    CHECK(kn_live_tensors(ctx) == tensors && kn_live_bytes(ctx) == bytes);
    kn_scope_end(ctx); /* unbalanced: does nothing */
    float k[4];
    CHECK(kn_read(ctx, keep, k, sizeof k) == KN_OK && k[3] == 1.0f && kn_live_tensors(ctx) == tensors);
    kn_ctx_free(ctx);
    CHECK_MSG(c.blocks == 0 && c.bytes == 0, "%ld blocks, %zu bytes never freed", c.blocks, c.bytes);
    CHECK(!c.bad_size);
    TEST_END("errors");
}
