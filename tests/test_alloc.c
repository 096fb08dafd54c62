/*
 * test_alloc.c — allocation-failure injection, as Lua's ltests.h does it.
 *
 * An allocator hook counts every allocation and fails the Nth (only that one,
 * or that one and every later one), and tracks the blocks and bytes the
 * context holds. Each representative op is run once without failures to
 * count its allocations A; then, for every N in 1..A, in a fresh context
 * whose hook fails at N, the inputs are built and the op is called. It must
 * return either the right tensor or NULL with KN_ENOMEM and a message naming
 * an op; the context must still work afterwards; and once the context is
 * freed, the hook must hold no block and no byte: no leak on any path.
 */
#include <stdint.h>
#include <stdlib.h>

#include "test.h"

/* ---- the hook ---- */

typedef struct {
    long n;          /* allocations so far, reallocations included */
    long fail_at;    /* the allocation to fail, 1-based; 0: none */
    int sticky;      /* fail every allocation from fail_at on */
    long failures;   /* allocations refused */
    long blocks;     /* held now */
    size_t bytes;    /* held now */
    int bad_size;    /* a free or realloc named another size than the block's */
} Hook;

#define HDR 16 /* keeps the caller's pointer 16-aligned */

static void *hook_alloc(void *user, void *ptr, size_t osize, size_t nsize)
{
    Hook *h = user;
    char *p = ptr ? (char *)ptr - HDR : NULL;
    if (p) {
        size_t old;
        memcpy(&old, p, sizeof old);
        if (old != osize) h->bad_size = 1;
    }
    if (nsize == 0) {
        if (p) {
            h->blocks--;
            h->bytes -= osize;
            free(p);
        }
        return NULL;
    }
    h->n++;
    if (h->fail_at && (h->n == h->fail_at || (h->sticky && h->n > h->fail_at))) {
        h->failures++;
        return NULL;
    }
    if (nsize > SIZE_MAX - HDR) return NULL;
    char *q = realloc(p, nsize + HDR);
    if (!q) return NULL;
    if (!p) h->blocks++;
    h->bytes += nsize - (p ? osize : 0);
    memcpy(q, &nsize, sizeof nsize);
    return q + HDR;
}

/* ---- inputs ---- */

#define SH(...) ((const int64_t[]){__VA_ARGS__})
#define ND(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define T(...) mk(ctx, ND(__VA_ARGS__), SH(__VA_ARGS__))

/* An f32 tensor of the given shape with small distinct values. */
static kn_tensor *mk(kn_ctx *ctx, int nd, const int64_t *shape)
{
    static float buf[256];
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    for (int64_t i = 0; i < n && i < 256; i++) buf[i] = (float)((i * 5) % 11) * 0.2f - 1.0f;
    return kn_tensor_from(ctx, KN_F32, nd, shape, buf);
}

static kn_tensor *idx(kn_ctx *ctx, int n, const int64_t *v)
{
    int64_t s = n;
    return kn_tensor_from(ctx, KN_I64, 1, &s, v);
}

/* ---- the ops under test: each builds its inputs and returns the op's result ---- */

static kn_tensor *run_add(kn_ctx *ctx) { return kn_add(ctx, T(3, 1, 4), T(2, 1)); }

static kn_tensor *run_matmul(kn_ctx *ctx) { return kn_matmul(ctx, T(2, 3, 4), T(4, 5)); }

static kn_tensor *run_softmax(kn_ctx *ctx) { return kn_softmax(ctx, T(3, 5), 1); }

static kn_tensor *run_conv2d(kn_ctx *ctx)
{
    kn_conv_opts o = {{2, 1}, {1, 1}, {1, 1}, {0, 0}, 1};
    return kn_conv2d(ctx, T(1, 2, 5, 5), T(3, 2, 3, 3), T(3), &o);
}

static kn_tensor *run_cross_entropy(kn_ctx *ctx)
{
    return kn_cross_entropy(ctx, T(4, 3), idx(ctx, 4, SH(0, 2, 1, -100)), NULL);
}

static kn_tensor *run_layer_norm(kn_ctx *ctx)
{
    return kn_layer_norm(ctx, T(2, 3, 4), 1, SH(4), T(4), T(4), 0);
}

static kn_tensor *run_cat(kn_ctx *ctx)
{
    kn_tensor *xs[3] = {T(2, 3), T(2, 1), T(2, 2)};
    return kn_cat(ctx, xs, 3, 1);
}

static kn_tensor *run_embedding(kn_ctx *ctx) { return kn_embedding(ctx, T(5, 3), idx(ctx, 4, SH(4, 0, 2, 4))); }

static kn_tensor *run_max_pool(kn_ctx *ctx)
{
    kn_pool_opts o = {{3, 3}, {2, 2}, {1, 1}, {0, 0}, 0, 0, 0};
    return kn_max_pool2d(ctx, T(1, 2, 5, 5), &o);
}

static kn_tensor *run_attention(kn_ctx *ctx)
{
    return kn_scaled_dot_product_attention(ctx, T(2, 3, 4), T(2, 5, 4), T(2, 5, 2), NULL, 1, 0);
}

static kn_tensor *run_conv_transpose(kn_ctx *ctx)
{
    kn_conv_opts o = {{2, 2}, {1, 0}, {1, 1}, {1, 0}, 2};
    return kn_conv_transpose2d(ctx, T(1, 4, 3, 3), T(4, 1, 3, 3), T(2), &o);
}

static kn_tensor *run_avg_pool(kn_ctx *ctx)
{
    kn_pool_opts o = {{3, 2}, {2, 2}, {1, 0}, {0, 0}, 1, 1, 0};
    return kn_avg_pool2d(ctx, T(2, 5, 4), &o);
}

static kn_tensor *run_batch_norm(kn_ctx *ctx)
{
    return kn_batch_norm(ctx, T(4, 3, 2), T(3), kn_ones(ctx, KN_F32, 1, SH(3)), T(3), T(3), 1, 0, 0);
}

static kn_tensor *run_group_norm(kn_ctx *ctx) { return kn_group_norm(ctx, T(2, 4, 3), 2, T(4), T(4), 0); }

static kn_tensor *run_var(kn_ctx *ctx) { return kn_var(ctx, T(3, 4, 2), (int[]){0, 2}, 2, 1, 1); }

static kn_tensor *run_split(kn_ctx *ctx)
{
    kn_tensor *out[3];
    int n = kn_split(ctx, T(7, 2), 3, 0, out, 3);
    return n == 3 ? kn_cat(ctx, out, 3, 0) : NULL;
}

static kn_tensor *run_smoothed_ce(kn_ctx *ctx)
{
    kn_loss_opts o = {KN_REDUCE_MEAN, NULL, 1, 1, 0.1};
    o.weight = T(3);
    return kn_cross_entropy(ctx, T(2, 3, 2), kn_tensor_from(ctx, KN_I64, 2, SH(2, 2), SH(0, 1, 2, 1)), &o);
}

static kn_tensor *run_masked_attention(kn_ctx *ctx)
{
    kn_tensor *mask = kn_gt(ctx, T(3, 5), kn_scalar(ctx, -0.5));
    return kn_scaled_dot_product_attention(ctx, T(2, 3, 4), T(2, 5, 4), T(2, 5, 2), mask, 0, 0.5);
}

/* The first draw makes the generator's state tensors; seeded, so a rerun draws the same mask. */
static kn_tensor *run_dropout(kn_ctx *ctx)
{
    kn_manual_seed(ctx, 1);
    return kn_dropout(ctx, T(3, 5), 0.5, 1);
}

/* Five ops in a scope; only the kept result may outlive it. */
static kn_tensor *run_chain(kn_ctx *ctx)
{
    kn_tensor *x = T(3, 4), *b = T(4), *w = T(4, 2);
    size_t tensors = kn_live_tensors(ctx), bytes = kn_live_bytes(ctx);
    kn_scope_begin(ctx);
    kn_tensor *h = kn_relu(ctx, kn_matmul(ctx, kn_add(ctx, x, b), w));
    kn_tensor *y = kn_keep(ctx, kn_sum(ctx, kn_softmax(ctx, h, 1), (int[]){0}, 1, 0));
    kn_scope_end(ctx);
    size_t want_bytes = bytes + (y ? (size_t)kn_numel(y) * sizeof(float) : 0);
    CHECK_MSG(kn_live_tensors(ctx) == tensors + (y != NULL) && kn_live_bytes(ctx) == want_bytes,
              "scope left %zu tensors, %zu bytes; expected %zu, %zu", kn_live_tensors(ctx), kn_live_bytes(ctx),
              tensors + (y != NULL), want_bytes);
    return y;
}

typedef struct {
    const char *name;
    kn_tensor *(*run)(kn_ctx *ctx);
} Case;

static const Case cases[] = {
    {"add", run_add},
    {"matmul", run_matmul},
    {"softmax", run_softmax},
    {"conv2d", run_conv2d},
    {"cross_entropy", run_cross_entropy},
    {"layer_norm", run_layer_norm},
    {"cat", run_cat},
    {"embedding", run_embedding},
    {"max_pool2d", run_max_pool},
    {"attention", run_attention},
    {"conv_transpose2d", run_conv_transpose},
    {"avg_pool2d", run_avg_pool},
    {"batch_norm", run_batch_norm},
    {"group_norm", run_group_norm},
    {"var", run_var},
    {"split", run_split},
    {"smoothed cross_entropy", run_smoothed_ce},
    {"masked attention", run_masked_attention},
    {"dropout", run_dropout},
    {"chain", run_chain},
};

/* ---- the driver ---- */

typedef struct {
    unsigned char bytes[1024];
    size_t n;
} Result;

/* Reads t back; 0 if that fails. */
static int read_back(kn_ctx *ctx, kn_tensor *t, Result *r)
{
    int64_t n = kn_numel(t);
    r->n = n < 0 ? 0 : (size_t)n * kn_dtype_size(kn_dtype_of(t));
    return r->n <= sizeof r->bytes && kn_read(ctx, t, r->bytes, sizeof r->bytes) == KN_OK;
}

static int same(const Result *a, const Result *b) { return a->n == b->n && memcmp(a->bytes, b->bytes, a->n) == 0; }

static void leak_free(const Case *c, const Hook *h, long at, int sticky)
{
    CHECK_MSG(h->blocks == 0 && h->bytes == 0 && !h->bad_size, "%s, failing at %ld%s: %ld blocks, %zu bytes left%s",
              c->name, at, sticky ? "+" : "", h->blocks, h->bytes, h->bad_size ? ", a free named the wrong size" : "");
}

/* One run with allocation `at` failing (and all later ones if sticky). */
static void run_failing(const Case *c, const Result *want, long at, int sticky)
{
    Hook h = {0, at, sticky, 0, 0, 0, 0};
    kn_ctx_opts opts = {hook_alloc, &h, 0};
    kn_ctx *ctx = kn_ctx_new(&opts);
    if (!ctx) {
        CHECK_MSG(at == 1 && h.blocks == 0, "%s: kn_ctx_new failed at allocation %ld", c->name, at);
        return;
    }
    kn_tensor *t = c->run(ctx);
    Result got;
    if (t) {
        /* a failed allocation was recovered from: then the values must be right and no error left behind */
        CHECK_MSG(read_back(ctx, t, &got) && same(&got, want), "%s, failing at %ld%s: a WRONG result, status %d \"%s\"",
                  c->name, at, sticky ? "+" : "", (int)kn_last_status(ctx), kn_last_error(ctx));
        CHECK_MSG(kn_last_status(ctx) == KN_OK, "%s, failing at %ld%s: a result, yet status %d \"%s\"", c->name, at,
                  sticky ? "+" : "", (int)kn_last_status(ctx), kn_last_error(ctx));
    } else {
        const char *m = kn_last_error(ctx);
        CHECK_MSG(kn_last_status(ctx) == KN_ENOMEM && strncmp(m, "kn_", 3) == 0 && strstr(m, "memory"),
                  "%s, failing at %ld%s: NULL with status %d \"%s\"", c->name, at, sticky ? "+" : "",
                  (int)kn_last_status(ctx), m);
    }
    /* The context survives: the op-name stack is clean and the op works once memory is back. */
    kn_clear_error(ctx);
    h.fail_at = 0;
    kn_tensor *ok = kn_add(ctx, NULL, NULL);
    CHECK_MSG(!ok && strncmp(kn_last_error(ctx), "kn_add:", 7) == 0, "%s, failing at %ld%s: then \"%s\"",
              c->name, at, sticky ? "+" : "", kn_last_error(ctx));
    kn_clear_error(ctx);
    t = c->run(ctx);
    CHECK_MSG(t && read_back(ctx, t, &got) && same(&got, want), "%s, after failing at %ld%s: \"%s\"", c->name,
              at, sticky ? "+" : "", kn_last_error(ctx));
    kn_ctx_free(ctx);
    leak_free(c, &h, at, sticky);
}

static void test_case(const Case *c)
{
    Hook h = {0, 0, 0, 0, 0, 0, 0};
    kn_ctx_opts opts = {hook_alloc, &h, 0};
    kn_ctx *ctx = kn_ctx_new(&opts);
    if (!CHECK(ctx != NULL)) return;
    Result want;
    kn_tensor *t = c->run(ctx);
    int ok = t && read_back(ctx, t, &want);
    CHECK_MSG(ok, "%s: \"%s\"", c->name, kn_last_error(ctx));
    long allocs = h.n;
    kn_ctx_free(ctx);
    leak_free(c, &h, 0, 0);
    if (!ok) return;
    for (int sticky = 0; sticky <= 1; sticky++)
        for (long at = 1; at <= allocs; at++) run_failing(c, &want, at, sticky);
}

static void test_ctx_new(void)
{
    Hook h = {0, 1, 0, 0, 0, 0, 0};
    kn_ctx_opts opts = {hook_alloc, &h, 0};
    CHECK(kn_ctx_new(&opts) == NULL);
    CHECK(h.failures == 1 && h.blocks == 0);
    CHECK(kn_last_status(NULL) != KN_OK && kn_last_error(NULL)[0] != 0);

    /* every allocation after the context's own fails: creation reports, nothing leaks */
    Hook h2 = {0, 2, 1, 0, 0, 0, 0};
    kn_ctx_opts o2 = {hook_alloc, &h2, 0};
    kn_ctx *ctx = kn_ctx_new(&o2);
    if (!CHECK(ctx != NULL)) return;
    CHECK(kn_zeros(ctx, KN_F32, 1, SH(4)) == NULL && kn_last_status(ctx) == KN_ENOMEM);
    CHECK(strncmp(kn_last_error(ctx), "kn_zeros:", 9) == 0);
    kn_clear_error(ctx);
    CHECK(kn_scalar(ctx, 1.0) == NULL && kn_last_status(ctx) == KN_ENOMEM);
    kn_ctx_free(ctx);
    CHECK(h2.blocks == 0 && h2.bytes == 0 && !h2.bad_size);
}

int main(void)
{
    test_ctx_new();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) test_case(&cases[i]);
    TEST_END("alloc");
}
