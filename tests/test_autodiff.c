/*
 * test_autodiff.c — the tape and backward: gradients of small expressions
 * checked by hand, accumulation, keep_graph, views and broadcasting,
 * leaves freed early, the tape trimmed by scopes, and the same backward
 * run while tracing (the joint graph).
 */
#include "test.h"
#include "../src/core.h"

static kn_tensor *vec(kn_ctx *ctx, kn_dtype dt, int n, const double *v)
{
    int64_t s = n;
    kn_tensor *t = kn_zeros(ctx, dt, 1, &s);
    for (int i = 0; i < n; i++) dt_store(dt, tensor_ptr(t, i), v[i]);
    return t;
}

static int grad_is(kn_ctx *ctx, kn_tensor *x, const double *want, int n)
{
    kn_tensor *g = kn_grad(ctx, x);
    if (!g || kn_numel(g) != n) return 0;
    for (int i = 0; i < n; i++)
        if (!test_close(dt_load((kn_dtype)g->dtype, tensor_ptr(g, g->offset + i)), want[i], 1e-6, 1e-9)) return 0;
    return 1;
}

static void test_basic(kn_ctx *ctx)
{
    double xv[3] = {1, -2, 3}, yv[3] = {0.5, 4, -1};
    kn_tensor *x = kn_param(ctx, vec(ctx, KN_F64, 3, xv));
    kn_tensor *y = kn_param(ctx, vec(ctx, KN_F64, 3, yv));
    /* L = sum(x * y + exp(x) / y) */
    kn_tensor *L = kn_sum(ctx, kn_add(ctx, kn_mul(ctx, x, y), kn_div(ctx, kn_exp(ctx, x), y)), NULL, 0, 0);
    CHECK(kn_backward(ctx, L, 0) == KN_OK);
    double gx[3], gy[3];
    for (int i = 0; i < 3; i++) {
        gx[i] = yv[i] + exp(xv[i]) / yv[i];
        gy[i] = xv[i] - exp(xv[i]) / (yv[i] * yv[i]);
    }
    CHECK(grad_is(ctx, x, gx, 3));
    CHECK(grad_is(ctx, y, gy, 3));
    /* a second backward adds into .grad */
    L = kn_sum(ctx, kn_mul(ctx, x, y), NULL, 0, 0);
    CHECK(kn_backward(ctx, L, 0) == KN_OK);
    for (int i = 0; i < 3; i++) gx[i] += yv[i];
    CHECK(grad_is(ctx, x, gx, 3));
    kn_zero_grad(ctx, (kn_tensor *[]){x, y}, 2);
    CHECK(kn_grad(ctx, x) == NULL);
    /* the graph is released: a second backward through it is an error */
    CHECK(kn_backward(ctx, L, 0) != KN_OK);
    CHECK_ERR(ctx, "released");
    /* keep_graph allows it */
    L = kn_sum(ctx, kn_square(ctx, x), NULL, 0, 0);
    CHECK(kn_backward(ctx, L, 1) == KN_OK && kn_backward(ctx, L, 0) == KN_OK);
    double g4[3] = {4 * xv[0], 4 * xv[1], 4 * xv[2]};
    CHECK(grad_is(ctx, x, g4, 3));
    kn_zero_grad(ctx, (kn_tensor *[]){x}, 1);
}

static void test_matmul_views(kn_ctx *ctx)
{
    /* L = sum(A^T @ B) with A (3, 2) given transposed, B (3, 4) broadcast-added to a bias (4) */
    int64_t s32[2] = {3, 2}, s34[2] = {3, 4}, s4 = 4;
    kn_tensor *A = kn_param(ctx, kn_randn(ctx, KN_F64, 2, s32));
    kn_tensor *B = kn_param(ctx, kn_randn(ctx, KN_F64, 2, s34));
    kn_tensor *b = kn_param(ctx, kn_randn(ctx, KN_F64, 1, &s4));
    kn_tensor *Y = kn_add(ctx, kn_matmul(ctx, kn_transpose(ctx, A, 0, 1), B), b); /* (2, 4) */
    CHECK(kn_backward(ctx, kn_sum(ctx, Y, NULL, 0, 0), 0) == KN_OK);
    /* dL/dA[i][j] = sum_k B[i][k]; dL/dB[i][k] = sum_j A[i][j]; dL/db = 2 */
    double ga[6], gb[12], gbias[4] = {2, 2, 2, 2};
    for (int i = 0; i < 3; i++) {
        double rb = 0, ra = 0;
        for (int k = 0; k < 4; k++) rb += dt_load(KN_F64, tensor_ptr(B, i * 4 + k));
        for (int j = 0; j < 2; j++) ra += dt_load(KN_F64, tensor_ptr(A, i * 2 + j));
        for (int j = 0; j < 2; j++) ga[i * 2 + j] = rb;
        for (int k = 0; k < 4; k++) gb[i * 4 + k] = ra;
    }
    CHECK(grad_is(ctx, A, ga, 6));
    CHECK(grad_is(ctx, B, gb, 12));
    CHECK(grad_is(ctx, b, gbias, 4));
}

static void test_errors(kn_ctx *ctx)
{
    int64_t s3 = 3;
    kn_tensor *x = kn_param(ctx, kn_ones(ctx, KN_F32, 1, &s3));
    CHECK(kn_backward(ctx, kn_mul(ctx, x, x), 0) != KN_OK);
    CHECK_ERR(ctx, "kn_backward: loss has 3 elements");
    CHECK(kn_backward(ctx, kn_sum(ctx, kn_ones(ctx, KN_F32, 1, &s3), NULL, 0, 0), 0) != KN_OK);
    CHECK_ERR(ctx, "does not require grad");
    CHECK(kn_param(ctx, kn_zeros(ctx, KN_I64, 1, &s3)) == NULL);
    CHECK_ERR(ctx, "kn_param: only float tensors");
    CHECK(kn_requires_grad(ctx, kn_mul(ctx, x, x), 1) == NULL);
    CHECK_ERR(ctx, "only leaves");
    CHECK(kn_backward(ctx, NULL, 0) != KN_OK);
    CHECK_ERR(ctx, "'loss' is NULL");
    autodiff_release(ctx);
}

static void test_lifetime(kn_ctx *ctx)
{
    int64_t s[2] = {8, 8};
    kn_tensor *w = kn_param(ctx, kn_randn(ctx, KN_F32, 2, s));
    /* a loop that never calls backward: scopes trim the tape */
    for (int i = 0; i < 50; i++) {
        kn_scope_begin(ctx);
        kn_tanh(ctx, kn_matmul(ctx, w, w));
        kn_scope_end(ctx);
    }
    CHECK(ctx->tape == NULL);
    /* a training-like loop holds memory flat */
    size_t tensors = 0, bytes = 0;
    for (int i = 0; i < 30; i++) {
        kn_scope_begin(ctx);
        kn_tensor *L = kn_sum(ctx, kn_tanh(ctx, kn_matmul(ctx, w, w)), NULL, 0, 0);
        CHECK(kn_backward(ctx, L, 0) == KN_OK);
        kn_scope_end(ctx);
        if (i == 1) tensors = kn_live_tensors(ctx), bytes = kn_live_bytes(ctx);
    }
    CHECK(kn_live_tensors(ctx) == tensors && kn_live_bytes(ctx) == bytes);
    /* a requires-grad leaf freed before backward: no gradient, no crash */
    kn_tensor *v = kn_requires_grad(ctx, kn_randn(ctx, KN_F32, 2, s), 1);
    kn_tensor *L = kn_sum(ctx, kn_add(ctx, kn_mul(ctx, v, w), w), NULL, 0, 0);
    kn_free(ctx, v);
    kn_zero_grad(ctx, &w, 1);
    CHECK(kn_backward(ctx, L, 0) == KN_OK && kn_grad(ctx, w) != NULL);
}

/* The same backward, run while tracing, appends the backward to the graph. */
static void test_traced(kn_ctx *ctx)
{
    double xv[3] = {0.5, -1, 2};
    kn_tensor *x = kn_param(ctx, vec(ctx, KN_F64, 3, xv));
    ctx->trace = graph_new(ctx);
    kn_tensor *L = kn_sum(ctx, kn_mul(ctx, kn_sin(ctx, x), x), NULL, 0, 0);
    uint32_t nfwd = ctx->trace->n;
    kn_tensor *g = NULL;
    CHECK(autodiff_grads(ctx, L, 1, &x, &g) == KN_OK);
    CHECK(g && g->st == NULL && g->node >= nfwd);  /* symbolic, appended after the forward */
    CHECK(graph_verify(ctx, ctx->trace) == 0);
    CHECK(kn_grad(ctx, x) == NULL);                 /* .grad untouched */
    autodiff_release(ctx);
    graph_free(ctx->trace);
    ctx->trace = NULL;
}

/* A linear layer's weight W (4, 3), read as x W^T: its gradient R^T x is made
 * in W's own layout (the dot of g^T and x, whose transpose the VJP of x W^T
 * takes, then transposed back: strides of W), eagerly and while tracing
 * (the views above the gradient's node lead to a dot of W's shape), so
 * neither stores a transposed copy. */
static void test_linear_grad_layout(kn_ctx *ctx)
{
    int64_t xs[2] = {5, 3}, ws[2] = {4, 3}, rs[2] = {5, 4};
    kn_tensor *x = kn_randn(ctx, KN_F64, 2, xs), *r = kn_randn(ctx, KN_F64, 2, rs);
    kn_tensor *w = kn_param(ctx, kn_randn(ctx, KN_F64, 2, ws));
    CHECK(kn_backward(ctx, kn_sum(ctx, kn_mul(ctx, kn_linear(ctx, x, w, NULL), r), NULL, 0, 0), 0) == KN_OK);
    double want[12];
    for (int o = 0; o < 4; o++)
        for (int i = 0; i < 3; i++) {
            want[o * 3 + i] = 0;
            for (int b = 0; b < 5; b++)
                want[o * 3 + i] += dt_load(KN_F64, tensor_ptr(r, b * 4 + o)) * dt_load(KN_F64, tensor_ptr(x, b * 3 + i));
        }
    kn_tensor *g = kn_grad(ctx, w);
    CHECK(grad_is(ctx, w, want, 12));
    CHECK_MSG(g && g->stride[0] == 3 && g->stride[1] == 1, "eager: W's gradient has strides (%lld, %lld)",
              g ? (long long)g->stride[0] : 0, g ? (long long)g->stride[1] : 0);
    ctx->trace = graph_new(ctx);
    kn_tensor *L = kn_sum(ctx, kn_mul(ctx, kn_linear(ctx, x, w, NULL), r), NULL, 0, 0), *gt = NULL;
    CHECK(autodiff_grads(ctx, L, 1, &w, &gt) == KN_OK && gt);
    const Node *n = gt ? &ctx->trace->nodes[gt->node] : NULL;
    while (n && n->op == OP_PERMUTE) n = &ctx->trace->nodes[n->src[0]];
    CHECK_MSG(n && n->op == OP_DOT && n->ndim == 2 && n->shape[0] == 4 && n->shape[1] == 3,
              "traced: W's gradient is not a dot of W's shape");
    autodiff_release(ctx);
    graph_free(ctx->trace);
    ctx->trace = NULL;
}

/* ---- hand-written backward rules equal the derived ones ---- */

typedef kn_tensor *(*Fn)(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b);

static kn_tensor *f_log_softmax(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b)
{
    (void)b;
    return kn_sum(ctx, kn_mul(ctx, kn_log_softmax(ctx, x, 1), w), NULL, 0, 0);
}

static kn_tensor *f_ce(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_reduction r, int weighted)
{
    int64_t t[4] = {2, 0, 4, 2}, s4 = 4;
    double cw[5] = {0.5, 1, 2, 1.5, 0.25};
    kn_loss_opts o = {r, NULL, 1, 4, 0}; /* class 4 is ignored */
    if (weighted) o.weight = vec(ctx, KN_F64, 5, cw);
    kn_tensor *l = kn_cross_entropy(ctx, x, kn_tensor_from(ctx, KN_I64, 1, &s4, t), &o);
    if (r == KN_REDUCE_NONE) l = kn_sum(ctx, kn_mul(ctx, l, kn_slice(ctx, kn_reshape(ctx, w, 1, (int64_t[]){20}), 0, 0, 4, 1)), NULL, 0, 0);
    (void)b;
    return l;
}
static kn_tensor *f_ce_mean(kn_ctx *c, kn_tensor *x, kn_tensor *w, kn_tensor *b) { return f_ce(c, x, w, b, KN_REDUCE_MEAN, 1); }
static kn_tensor *f_ce_sum(kn_ctx *c, kn_tensor *x, kn_tensor *w, kn_tensor *b) { return f_ce(c, x, w, b, KN_REDUCE_SUM, 0); }
static kn_tensor *f_ce_none(kn_ctx *c, kn_tensor *x, kn_tensor *w, kn_tensor *b) { return f_ce(c, x, w, b, KN_REDUCE_NONE, 1); }

static kn_tensor *f_layer_norm(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b)
{
    int64_t s5 = 5;
    kn_tensor *gamma = kn_reshape(ctx, kn_narrow(ctx, w, 0, 0, 1), 1, &s5); /* row 0 of w */
    kn_tensor *y = kn_layer_norm(ctx, x, 1, &s5, gamma, b, 1e-5);
    return kn_sum(ctx, kn_mul(ctx, y, w), NULL, 0, 0);
}

/* The gradient of x (4, 5) and of the parameter b (5) through fn, with the
 * hand-written rules on (custom 1) or derived from primitives (custom 0). */
static int grads_of(kn_ctx *ctx, Fn fn, int custom, double *gx, double *gb)
{
    kn_manual_seed(ctx, 7);
    int64_t s45[2] = {4, 5}, s5 = 5;
    kn_tensor *x = kn_requires_grad(ctx, kn_randn(ctx, KN_F64, 2, s45), 1);
    kn_tensor *w = kn_randn(ctx, KN_F64, 2, s45);
    kn_tensor *b = kn_requires_grad(ctx, kn_randn(ctx, KN_F64, 1, &s5), 1);
    ctx->no_custom_vjp = !custom;
    int ok = kn_backward(ctx, fn(ctx, x, w, b), 0) == KN_OK && kn_grad(ctx, x);
    ctx->no_custom_vjp = 0;
    if (ok) kn_read(ctx, kn_grad(ctx, x), gx, 20 * sizeof *gx);
    if (ok && gb) {
        if (kn_grad(ctx, b)) kn_read(ctx, kn_grad(ctx, b), gb, 5 * sizeof *gb);
        else for (int i = 0; i < 5; i++) gb[i] = 0;
    }
    kn_free(ctx, x);
    kn_free(ctx, b);
    return ok;
}

static void test_custom_equals_derived(kn_ctx *ctx)
{
    static const struct { const char *name; Fn fn; } cases[] = {
        {"log_softmax", f_log_softmax}, {"cross_entropy mean, weights, ignore_index", f_ce_mean},
        {"cross_entropy sum", f_ce_sum}, {"cross_entropy none, weights", f_ce_none},
        {"layer_norm", f_layer_norm},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        double a[20], d[20], ab[5], db[5], worst = 0;
        kn_scope_begin(ctx);
        int ok = grads_of(ctx, cases[c].fn, 1, a, ab) && grads_of(ctx, cases[c].fn, 0, d, db);
        kn_scope_end(ctx);
        for (int i = 0; ok && i < 20; i++) worst = fmax(worst, fabs(a[i] - d[i]));
        for (int i = 0; ok && i < 5; i++) worst = fmax(worst, fabs(ab[i] - db[i]));
        CHECK_MSG(ok && worst < 1e-12, "%s: hand-written vs derived gradient differ by %g (%s)", cases[c].name, worst,
                  kn_last_error(ctx));
    }
    /* the hand-written rule is what eager backward uses: the tape holds one entry for it */
    int64_t s45[2] = {4, 5};
    kn_tensor *x = kn_requires_grad(ctx, kn_randn(ctx, KN_F64, 2, s45), 1);
    kn_log_softmax(ctx, x, 1);
    CHECK(autodiff_tape_len(ctx) == 1);
    autodiff_release(ctx);
}

/* binary_cross_entropy at a saturated p (exactly 0 or 1): torch's finite
 * gradients, not the NaN of d log(p) / dp */
static void test_bce_saturated(kn_ctx *ctx)
{
    float pv[4] = {0, 1, 1e-30f, 0.5f}, tv[4] = {0, 1, 1, 0.5f}, g[4] = {1, 1, 1, 1};
    int64_t s = 4;
    kn_tensor *p = kn_requires_grad(ctx, kn_tensor_from(ctx, KN_F32, 1, &s, pv), 1);
    kn_tensor *t = kn_tensor_from(ctx, KN_F32, 1, &s, tv);
    kn_tensor *l = kn_sum(ctx, kn_binary_cross_entropy(ctx, p, t, NULL, KN_REDUCE_NONE), NULL, 0, 0);
    CHECK(kn_backward(ctx, l, 0) == KN_OK && kn_read(ctx, kn_grad(ctx, p), g, sizeof g) == KN_OK);
    CHECK_MSG(g[0] == 0 && g[1] == 0 && test_close(g[2], -1e12, 1e-6, 0) && g[3] == 0, "got %g %g %g %g", g[0], g[1],
              g[2], g[3]);
}

int main(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    test_basic(ctx);
    test_matmul_views(ctx);
    test_errors(ctx);
    test_lifetime(ctx);
    test_traced(ctx);
    test_linear_grad_layout(ctx);
    test_custom_equals_derived(ctx);
    test_bce_saturated(ctx);
    kn_ctx_free(ctx);
    TEST_END("autodiff");
}
