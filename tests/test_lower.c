/*
 * test_lower.c — lowering scheduled kernels to loop IR: golden dumps for a
 * pointwise chain, softmax, matmul+bias+gelu (the transposed weight is index
 * arithmetic) and conv2d, each verified.
 */
#include "test.h"
#include "../src/core.h"
#include "../src/lower.h"

/* Traces f, schedules, lowers every kernel; returns the dump of all kernels. */
static int lower_all(kn_ctx *ctx, kn_tensor *y, char *buf, size_t cap, int *nk)
{
    Arena a;
    arena_init(&a, ctx);
    Schedule s;
    ExprTable ex;
    expr_init(&ex, ctx);
    int ok = sched_build(ctx, ctx->trace, &y->node, 1, &a, &s) == 0;
    size_t len = 0;
    buf[0] = 0;
    *nk = 0;
    for (int i = 0; ok && i < s.nkernels; i++) {
        Kernel k;
        int r = lower_kernel(ctx, ctx->trace, &s, s.kernels[i], &ex, &a, &k);
        if (r == LOWER_INTERP) continue;
        ok = r == 0 && ir_verify(ctx, &k) == 0;
        if (ok) len += ir_print(&k, buf + len, len < cap ? cap - len : 0), (*nk)++;
    }
    expr_free(&ex);
    arena_free(&a);
    return ok;
}

static void golden(kn_ctx *ctx, kn_tensor *y, const char *want)
{
    char buf[8192];
    int nk;
    CHECK_MSG(lower_all(ctx, y, buf, sizeof buf, &nk), "lowering failed: %s", kn_last_error(ctx));
    CHECK_MSG(strcmp(buf, want) == 0, "lowered:\n%s", buf);
    graph_free(ctx->trace);
    ctx->trace = NULL;
}

int main(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t s48[2] = {4, 8}, s8 = 8, s4 = 4;
    kn_tensor *x = kn_randn(ctx, KN_F32, 2, s48), *w = kn_randn(ctx, KN_F32, 2, s48);
    kn_tensor *b = kn_randn(ctx, KN_F32, 1, &s4);
    (void)s8;

    ctx->trace = graph_new(ctx);
    golden(ctx, kn_exp(ctx, kn_add(ctx, kn_transpose(ctx, x, 0, 1), kn_scalar(ctx, 1.0))),
           "kernel k8_exp(out b0 f32[32], in b1 f32[32], in b2 f64[1])\n"
           "  for s0 in 8\n"
           "    for s1 in 4\n"
           "      b0[s0*4+s1] = exp(add(b1[s0+s1*8], cast.f32(b2[0])))\n");

    ctx->trace = graph_new(ctx);
    golden(ctx, kn_softmax(ctx, x, 1),
           "kernel k2_reduce_max(out b0 f32[4], in b1 f32[32])\n"
           "  for s0 in 4\n"
           "    acc a0 f32 max\n"
           "    for s1 in 8\n"
           "      a0 max= b1[s0*8+s1]\n"
           "    b0[s0] = a0\n"
           "kernel k5_exp(out b0 f32[32], in b1 f32[32], in b2 f32[4])\n"
           "  for s0 in 4\n"
           "    for s1 in 8\n"
           "      b0[s0*8+s1] = exp(sub(b1[s0*8+s1], b2[s0]))\n"
           "kernel k6_sum(out b0 f32[4], in b1 f32[32])\n"
           "  for s0 in 4\n"
           "    acc a0 f32 sum\n"
           "    for s1 in 8\n"
           "      a0 += b1[s0*8+s1]\n"
           "    b0[s0] = a0\n"
           "kernel k8_div(out b0 f32[32], in b1 f32[32], in b2 f32[4])\n"
           "  for s0 in 4\n"
           "    for s1 in 8\n"
           "      b0[s0*8+s1] = div(b1[s0*8+s1], b2[s0])\n");

    ctx->trace = graph_new(ctx);
    golden(ctx, kn_relu(ctx, kn_linear(ctx, x, w, b)),
           "kernel k4_dot(out b0 f32[16], in b1 f32[32], in b2 f32[32])\n"
           "  for s0 in 4\n"
           "    for s1 in 4\n"
           "      acc a0 f32 sum\n"
           "      for s2 in 8\n"
           "        a0 += mul(b1[s0*8+s2], b2[s1*8+s2])\n" /* w transposed: index arithmetic */
           "      b0[s0*4+s1] = a0\n"
           /* the bias through reshape (1, 4) and expand: s1%4 stays until index
            * simplification knows s1 < 4 */
           "kernel k15_where(out b0 f32[16], in b1 f32[16], in b2 f32[4])\n"
           "  for s0 in 4\n"
           "    for s1 in 4\n"
           "      b0[s0*4+s1] = where(cmplt(0, add(b1[s0*4+s1], b2[s1%4])), add(b1[s0*4+s1], b2[s1%4]), "
           "where(cmpeq(add(b1[s0*4+s1], b2[s1%4]), add(b1[s0*4+s1], b2[s1%4])), 0, add(b1[s0*4+s1], b2[s1%4])))\n");

    /* conv2d: the window slices and padding are index arithmetic feeding a dot */
    int64_t sx[4] = {1, 2, 5, 5}, sw[4] = {3, 2, 3, 3};
    kn_tensor *cx = kn_randn(ctx, KN_F32, 4, sx), *cw = kn_randn(ctx, KN_F32, 4, sw);
    kn_conv_opts co = {{2, 2}, {1, 1}, {1, 1}, {0, 0}, 1};
    ctx->trace = graph_new(ctx);
    kn_tensor *cy = kn_conv2d(ctx, cx, cw, NULL, &co);
    char buf[16384];
    int nk = 0;
    CHECK_MSG(cy && lower_all(ctx, cy, buf, sizeof buf, &nk), "conv2d: %s", kn_last_error(ctx));
    CHECK(nk >= 2 && strstr(buf, "_dot(") != NULL); /* the im2col operand, then the dot */
    graph_free(ctx->trace);
    ctx->trace = NULL;

    kn_ctx_free(ctx);
    TEST_END("lower");
}
