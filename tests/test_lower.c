/*
 * test_lower.c — lowering scheduled kernels to loop IR: golden dumps for a
 * pointwise chain, softmax, layer_norm (reductions fused into the row
 * kernel; a value the output keeps is loaded back by later reductions at
 * their own index only), matmul+bias+relu (the transposed weight is index arithmetic) and
 * conv2d + relu (a dot over the input's window view, the ReLU its tile epilogue), an f16 matmul
 * (products in f32), each verified.
 */
#include "test.h"
#include "../src/core.h"
#include "../src/lower.h"
#include "../src/loopopt.h"
#include "../src/sched.h"

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

/* A convolution's lowering, kernel by kernel: a dot as the window that
 * sched_window reads in its B operand, any other kernel as its loop IR
 * after the loop passes. */
static int conv_golden(kn_ctx *ctx, kn_tensor *y, kn_tensor *x, const char *want)
{
    Arena a;
    arena_init(&a, ctx);
    Schedule s;
    ExprTable ex;
    expr_init(&ex, ctx);
    char buf[4096];
    int ok = sched_build(ctx, ctx->trace, &y->node, 1, &a, &s) == 0;
    size_t len = 0;
    for (int i = 0; ok && i < s.nkernels; i++) {
        uint32_t k = s.kernels[i], xn = 0;
        const Node *n = &ctx->trace->nodes[k];
        GemmWindow w;
        if (n->op == OP_DOT) {
            ok = sched_window(ctx->trace, s.materialised, n->src[1], &xn, &w) && xn == x->node;
            const Node *xv = &ctx->trace->nodes[xn];
            if (ok)
                len += (size_t)snprintf(buf + len, sizeof buf - len,
                                        "dot %%%u: B the windows of x (%lld, %lld, %lld, %lld): kernel %lldx%lld, "
                                        "output %lldx%lld, stride %lldx%lld, dilation %lldx%lld, start %lldx%lld, "
                                        "transposed %d\n",
                                        (unsigned)k, (long long)xv->shape[0], (long long)xv->shape[1], (long long)xv->shape[2],
                                        (long long)xv->shape[3], (long long)w.kh, (long long)w.kw, (long long)w.oh,
                                        (long long)w.ow, (long long)w.sh, (long long)w.sw, (long long)w.dh,
                                        (long long)w.dw, (long long)-w.ph, (long long)-w.pw, w.t);
            continue;
        }
        Kernel e;
        ok = lower_kernel(ctx, ctx->trace, &s, k, &ex, &a, &e) == 0 && ir_verify(ctx, &e) == 0 &&
             loopopt_run(ctx, &e, NULL) == 0 && ir_verify(ctx, &e) == 0;
        if (ok && len < sizeof buf) len += ir_print(&e, buf + len, sizeof buf - len);
    }
    CHECK_MSG(!ok || strcmp(buf, want) == 0, "lowered:\n%s", buf);
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

    ctx->trace = graph_new(ctx);
    golden(ctx, kn_exp(ctx, kn_add(ctx, kn_transpose(ctx, x, 0, 1), kn_scalar(ctx, 1.0))),
           "kernel k8_exp(out b0 f32[32], in b1 f32[32], in b2 f64[1])\n"
           "  for s0 in 8\n"
           "    for s1 in 4\n"
           "      b0[s0*4+s1] = exp(add(b1[s0+s1*8], cast.f32(b2[0])))\n");

    ctx->trace = graph_new(ctx);
    /* softmax: one kernel: the max of each row, exp stored in the output, its sum loaded back, the
     * row; the exp's argument x - max is <= 0 (or NaN), which the min with 0 tells the target */
    golden(ctx, kn_softmax(ctx, x, 1),
           "kernel k8_div(out b0 f32[32], in b1 f32[32])\n"
           "  for s0 in 4\n"
           "    acc a0 f32 max\n"
           "    for s1 in 8\n"
           "      a0 max= b1[s0*8+s1]\n"
           "    acc a1 f32 sum\n"
           "    for s2 in 8\n"
           "      b0[s0*8+s2] = exp(min(sub(b1[s0*8+s2], a0), 0))\n"
           "    for s3 in 8\n"
           "      a1 += b0[s0*8+s3]\n"
           "    for s4 in 8\n"
           "      b0[s0*8+s4] = mul(b0[s0*8+s4], recip(a1))\n");

    /* x minus another tensor's max may be positive: no min */
    {
        int d1 = 1;
        ctx->trace = graph_new(ctx);
        golden(ctx, kn_exp(ctx, kn_sub(ctx, x, kn_amax(ctx, w, &d1, 1, 1))),
               "kernel k6_exp(out b0 f32[32], in b1 f32[32], in b2 f32[32])\n"
               "  for s0 in 4\n"
               "    acc a0 f32 max\n"
               "    for s1 in 8\n"
               "      a0 max= b1[s0*8+s1]\n"
               "    for s2 in 8\n"
               "      b0[s0*8+s2] = exp(sub(b2[s0*8+s2], a0))\n");
    }

    /* softmax's backward shape: y = exp(x - max) kept in the output by the
     * sum of y; the later sum of w * y loads it back, as the last loop does */
    {
        int d1 = 1;
        kn_tensor *e, *se, *swe;
        ctx->trace = graph_new(ctx);
        e = kn_exp(ctx, kn_sub(ctx, x, kn_amax(ctx, x, &d1, 1, 1)));
        se = kn_sum(ctx, e, &d1, 1, 1);
        swe = kn_sum(ctx, kn_mul(ctx, w, e), &d1, 1, 1);
        golden(ctx, kn_add(ctx, kn_div(ctx, e, se), swe),
               "kernel k13_add(out b0 f32[32], in b1 f32[32], in b2 f32[32])\n"
               "  for s0 in 4\n"
               "    acc a0 f32 max\n"
               "    for s1 in 8\n"
               "      a0 max= b1[s0*8+s1]\n"
               "    acc a1 f32 sum\n"
               "    for s2 in 8\n"
               "      b0[s0*8+s2] = exp(min(sub(b1[s0*8+s2], a0), 0))\n"
               "    for s3 in 8\n"
               "      a1 += b0[s0*8+s3]\n"
               "    acc a2 f32 sum\n"
               "    for s4 in 8\n"
               "      a2 += mul(b2[s0*8+s4], b0[s0*8+s4])\n"
               "    for s5 in 8\n"
               "      b0[s0*8+s5] = add(mul(b0[s0*8+s5], recip(a1)), a2)\n");
        /* a later sum that reads y at another row computes it: that row of
         * the output is not stored yet (or is another thread's) */
        int64_t s88[2] = {8, 8};
        kn_tensor *q = kn_randn(ctx, KN_F32, 2, s88);
        ctx->trace = graph_new(ctx);
        e = kn_exp(ctx, kn_sub(ctx, q, kn_amax(ctx, q, &d1, 1, 1)));
        se = kn_sum(ctx, e, &d1, 1, 1);
        swe = kn_sum(ctx, kn_mul(ctx, q, kn_transpose(ctx, e, 0, 1)), &d1, 1, 1);
        golden(ctx, kn_add(ctx, kn_div(ctx, e, se), swe),
               "kernel k2_reduce_max(out b0 f32[8], in b1 f32[64])\n"
               "  for s0 in 8\n"
               "    acc a0 f32 max\n"
               "    for s1 in 8\n"
               "      a0 max= b1[s0*8+s1]\n"
               "    b0[s0] = a0\n"
               "kernel k13_add(out b0 f32[64], in b1 f32[64], in b2 f32[8])\n"
               "  for s0 in 8\n"
               "    acc a0 f32 sum\n"
               "    for s1 in 8\n"
               "      b0[s0*8+s1] = exp(min(sub(b1[s0*8+s1], b2[s0]), 0))\n"
               "    for s2 in 8\n"
               "      a0 += b0[s0*8+s2]\n"
               "    acc a1 f32 sum\n"
               "    for s3 in 8\n"
               "      a1 += mul(b1[s0*8+s3], exp(min(sub(b1[s0+s3*8], b2[s3]), 0)))\n"
               "    for s4 in 8\n"
               "      b0[s0*8+s4] = add(mul(b0[s0*8+s4], recip(a0)), a1)\n");
    }

    /* layer_norm with weight and bias: mean, then the variance of the
     * centred row, then the row; (4, 1, 8) has a unit dim, which gets no loop */
    int64_t s418[3] = {4, 1, 8};
    kn_tensor *x3 = kn_randn(ctx, KN_F32, 3, s418), *g8 = kn_randn(ctx, KN_F32, 1, &s8);
    ctx->trace = graph_new(ctx);
    golden(ctx, kn_layer_norm(ctx, x3, 1, &s8, g8, g8, 1e-5),
           "kernel k24_add(out b0 f32[32], in b1 f32[32], in b2 f32[8])\n"
           "  for s0 in 4\n"
           "    acc a0 f32 sum\n"
           "    for s1 in 8\n"
           "      a0 += b1[s0*8+s1]\n"
           "    acc a1 f32 sum\n"
           "    for s2 in 8\n"
           "      a1 += mul(sub(b1[s0*8+s2], div(a0, 8)), sub(b1[s0*8+s2], div(a0, 8)))\n"
           "    for s3 in 8\n"
           "      b0[s0*8+s3] = add(mul(mul(sub(b1[s0*8+s3], div(a0, 8)), recip(sqrt(add(div(a1, 8), "
           "9.999999747378752e-06)))), b2[s3%8]), b2[s3%8])\n");

    ctx->trace = graph_new(ctx);
    golden(ctx, kn_relu(ctx, kn_linear(ctx, x, w, b)), /* one kernel: the dot and its epilogue */
           "kernel k15_where(out b0 f32[16], in b1 f32[32], in b2 f32[32], in b3 f32[4])\n"
           "  for s0 in 4\n"
           "    for s1 in 4\n"
           "      acc a0 f32 sum\n"
           "      for s2 in 8\n"
           "        a0 += mul(b1[s0*8+s2], b2[s1*8+s2])\n" /* w transposed: index arithmetic */
           /* the bias through reshape (1, 4) and expand: s1%4 stays until index
            * simplification knows s1 < 4 */
           "      b0[s0*4+s1] = where(cmplt(0, add(a0, b3[s1%4])), add(a0, b3[s1%4]), "
           "where(cmpeq(add(a0, b3[s1%4]), add(a0, b3[s1%4])), 0, add(a0, b3[s1%4])))\n");

    /* matmul + bias + gelu (tanh): one kernel, the gelu an epilogue of the dot's accumulator */
    ctx->trace = graph_new(ctx);
    golden(ctx, kn_gelu(ctx, kn_add(ctx, kn_matmul(ctx, x, kn_transpose(ctx, w, 0, 1)), b), 1),
           "kernel k29_mul(out b0 f32[16], in b1 f32[32], in b2 f32[32], in b3 f32[4])\n"
           "  for s0 in 4\n"
           "    for s1 in 4\n"
           "      acc a0 f32 sum\n"
           "      for s2 in 8\n"
           "        a0 += mul(b1[s0*8+s2], b2[s1*8+s2])\n"
           "      b0[s0*4+s1] = mul(mul(add(a0, b3[s1%4]), 0.5), add(tanh(mul(add(add(a0, b3[s1%4]), "
           "mul(mul(mul(add(a0, b3[s1%4]), add(a0, b3[s1%4])), add(a0, b3[s1%4])), 0.044714998453855515)), "
           "0.7978845834732056)), 1))\n");

    /* an f16 matmul: each product in f32 (exact, as the interpreter's), summed in f32, rounded once */
    {
        kn_tensor *hx = kn_to(ctx, x, KN_F16), *hw = kn_to(ctx, w, KN_F16);
        ctx->trace = graph_new(ctx);
        golden(ctx, kn_matmul(ctx, hx, kn_transpose(ctx, hw, 0, 1)),
               "kernel k4_dot(out b0 f16[16], in b1 f16[32], in b2 f16[32])\n"
               "  for s0 in 4\n"
               "    for s1 in 4\n"
               "      acc a0 f32 sum\n"
               "      for s2 in 8\n"
               "        a0 += mul(cast.f32(b1[s0*8+s2]), cast.f32(b2[s1*8+s2]))\n"
               "      b0[s0*4+s1] = cast.f16(a0)\n");
    }

    /* conv2d, an implicit GEMM: a kernel for the dot of the weights (3, 2*3*3) and the window
     * view of x, which sched_window reads as x's 3x3 windows (stride 2, padding 1: the first
     * window starts at -1), so no im2col buffer; a second kernel writes the dot's (C, N*OH*OW)
     * out as (N, C, OH, OW) */
    int64_t sx[4] = {1, 2, 5, 5}, sw[4] = {3, 2, 3, 3};
    kn_tensor *cx = kn_randn(ctx, KN_F32, 4, sx), *cw = kn_randn(ctx, KN_F32, 4, sw);
    kn_conv_opts co = {{2, 2}, {1, 1}, {1, 1}, {0, 0}, 1};
    ctx->trace = graph_new(ctx);
    kn_tensor *cy = kn_conv2d(ctx, cx, cw, NULL, &co);
    CHECK_MSG(cy && conv_golden(ctx, cy, cx,
                                "dot %53: B the windows of x (1, 2, 5, 5): kernel 3x3, output 3x3, stride 2x2, "
                                "dilation 1x1, start -1x-1, transposed 0\n"
                                "kernel k56_reshape(out b0 f32[27], in b1 f32[27])\n"
                                "  for s0 in 27 vector(8)\n"
                                "    b0[s0] = b1[s0]\n"),
              "conv2d: %s", kn_last_error(ctx));
    graph_free(ctx->trace);
    ctx->trace = NULL;
    /* two images, dilation 2, no padding: the output kernel permutes (C, N, OH*OW) to (N, C, OH*OW) */
    int64_t sx2[4] = {2, 2, 6, 5};
    kn_tensor *cx2 = kn_randn(ctx, KN_F32, 4, sx2);
    kn_conv_opts co2 = {{1, 1}, {0, 0}, {2, 1}, {0, 0}, 1};
    ctx->trace = graph_new(ctx);
    cy = kn_conv2d(ctx, cx2, cw, NULL, &co2);
    CHECK_MSG(cy && conv_golden(ctx, cy, cx2,
                                "dot %52: B the windows of x (2, 2, 6, 5): kernel 3x3, output 2x3, stride 1x1, "
                                "dilation 2x1, start 0x0, transposed 0\n"
                                "kernel k55_reshape(out b0 f32[36], in b1 f32[36])\n"
                                "  for s0 in 2\n"
                                "    for s1 in 3\n"
                                "      for s2 in 6 unroll(6)\n"
                                "        b0[s0*18+s1*6+s2] = b1[s0*6+s1*12+s2]\n"),
              "conv2d: %s", kn_last_error(ctx));
    graph_free(ctx->trace);
    ctx->trace = NULL;

    kn_ctx_free(ctx);
    TEST_END("lower");
}
