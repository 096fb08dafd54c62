/*
 * test_sched.c — the scheduler's decisions, as golden dumps: which nodes
 * get a kernel and what each kernel fuses.
 */
#include "test.h"
#include "../src/core.h"
#include "../src/sched.h"

static void check_schedule(kn_ctx *ctx, const uint32_t *outs, int n, const char *want)
{
    Arena a;
    arena_init(&a, ctx);
    Schedule s;
    char buf[4096];
    CHECK(sched_build(ctx, ctx->trace, outs, n, &a, &s) == 0);
    sched_dump(ctx->trace, &s, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, want) == 0, "schedule was:\n%s", buf);
    arena_free(&a);
}

static void begin(kn_ctx *ctx) { ctx->trace = graph_new(ctx); }

static void end(kn_ctx *ctx)
{
    graph_free(ctx->trace);
    ctx->trace = NULL;
}

int main(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t s48[2] = {4, 8};
    kn_tensor *x = kn_randn(ctx, KN_F32, 2, s48), *w = kn_randn(ctx, KN_F32, 2, s48);

    /* a pointwise chain with views: one kernel */
    begin(ctx);
    kn_tensor *y = kn_mul(ctx, kn_exp(ctx, kn_transpose(ctx, x, 0, 1)), kn_scalar(ctx, 2.0));
    check_schedule(ctx, &y->node, 1, "%8 mul <- %2 permute %3 exp %5 cast %6 reshape %7 expand\n");
    end(ctx);

    /* softmax: one kernel; max and sum are row accumulators of the output's kernel */
    begin(ctx);
    y = kn_softmax(ctx, x, 1);
    check_schedule(ctx, &y->node, 1, "%8 div <- %2 reduce_max(row) %3 expand %4 sub %5 exp %6 sum(row) %7 expand\n");
    end(ctx);

    /* softmax over the first dim: rows are not contiguous, so max and sum
     * are kernels of their own, and the exp both read is computed once */
    begin(ctx);
    y = kn_softmax(ctx, x, 0);
    check_schedule(ctx, &y->node, 1,
                   "%2 reduce_max <-\n"
                   "%5 exp <- %3 expand %4 sub\n"
                   "%6 sum <-\n"
                   "%8 div <- %7 expand\n");
    end(ctx);

    /* layer_norm: mean and variance in the output's kernel */
    begin(ctx);
    int64_t d8 = 8;
    y = kn_layer_norm(ctx, x, 1, &d8, NULL, NULL, 1e-5);
    check_schedule(ctx, &y->node, 1,
                   "%19 mul <- %2 sum(row) %3 full %4 reshape %5 expand %6 div %7 expand %8 sub %9 mul %10 sum(row) "
                   "%11 div %12 full %13 reshape %14 expand %15 add %16 sqrt %17 recip %18 expand\n");
    end(ctx);

    /* a row reduction read by two kernels is a kernel of its own */
    begin(ctx);
    {
        int one = 1;
        kn_tensor *m = kn_amax(ctx, x, &one, 1, 1);
        kn_tensor *o2[2] = {kn_sub(ctx, x, m), kn_add(ctx, x, m)};
        uint32_t on[2] = {o2[0]->node, o2[1]->node};
        check_schedule(ctx, on, 2, "%2 reduce_max <-\n%4 sub <- %3 expand\n%5 add <- %3 expand\n");
    }
    end(ctx);

    /* linear + relu: the transposed weight is index arithmetic; the dot
     * fuses into the relu's kernel (its epilogue) */
    begin(ctx);
    y = kn_relu(ctx, kn_linear(ctx, x, w, NULL));
    kn_tensor *z = kn_tanh(ctx, kn_add(ctx, x, x)); /* two outputs, cheap shared add fused twice */
    uint32_t outs[2] = {y->node, z->node};
    Arena a;
    arena_init(&a, ctx);
    Schedule s;
    CHECK(sched_build(ctx, ctx->trace, outs, 2, &a, &s) == 0);
    int dots = 0, perm_kernels = 0;
    for (int k = 0; k < s.nkernels; k++) {
        dots += s.dot[s.kernels[k]] != 0;
        perm_kernels += ctx->trace->nodes[s.kernels[k]].op == OP_PERMUTE;
    }
    CHECK(dots == 1 && perm_kernels == 0 && s.nkernels == 2);
    arena_free(&a);
    end(ctx);

    /* linear + bias + gelu (tanh): one kernel; a dot two kernels read stays a kernel of its own */
    begin(ctx);
    int64_t s4 = 4;
    kn_tensor *b4 = kn_randn(ctx, KN_F32, 1, &s4);
    y = kn_gelu(ctx, kn_linear(ctx, x, w, b4), 1);
    Schedule s2;
    Arena a2;
    arena_init(&a2, ctx);
    CHECK(sched_build(ctx, ctx->trace, &y->node, 1, &a2, &s2) == 0 && s2.nkernels == 1 && s2.dot[y->node] != 0);
    arena_free(&a2);
    kn_tensor *d = kn_matmul(ctx, x, kn_transpose(ctx, w, 0, 1));
    kn_tensor *o3[2] = {kn_exp(ctx, d), kn_neg(ctx, d)};
    uint32_t on3[2] = {o3[0]->node, o3[1]->node};
    arena_init(&a2, ctx);
    CHECK(sched_build(ctx, ctx->trace, on3, 2, &a2, &s2) == 0 && s2.nkernels == 3 && !s2.dot[o3[0]->node] &&
          s2.materialised[d->node]);
    arena_free(&a2);
    end(ctx);

    /* a residual stream x + a1 + a2 + a3 + a4, each partial sum read by a
     * kernel of its own: the first that reads four buffers is computed
     * once (the later ones read it), the earlier ones are recomputed */
    {
        kn_tensor *r = x, *o[4], *in[4];
        uint32_t on[4];
        for (int k = 0; k < 4; k++) in[k] = kn_randn(ctx, KN_F32, 2, s48);
        begin(ctx);
        for (int k = 0; k < 4; k++) {
            r = kn_add(ctx, r, in[k]);
            o[k] = kn_exp(ctx, r);
            on[k] = o[k]->node;
        }
        check_schedule(ctx, on, 4, "%4 exp <- %3 add\n%7 exp <- %3 add %6 add\n%9 add <- %3 add %6 add\n%10 exp <-\n"
                                   "%13 exp <- %12 add\n");
    }
    end(ctx);

    /* layer_norm over the rows of (2, 3, 8), flattened to (6, 8) for a
     * linear: one row kernel of the normalised value's own shape, which the
     * dot reads through the reshape */
    {
        int64_t s238[3] = {2, 3, 8}, s68[2] = {6, 8};
        kn_tensor *x3 = kn_randn(ctx, KN_F32, 3, s238);
        kn_tensor *lw = kn_randn(ctx, KN_F32, 1, &d8), *lb = kn_randn(ctx, KN_F32, 1, &d8);
        begin(ctx);
        kn_tensor *wt = kn_transpose(ctx, w, 0, 1); /* first: node numbers in this order */
        kn_tensor *h = kn_reshape(ctx, kn_layer_norm(ctx, x3, 1, &d8, lw, lb, 1e-5), 2, s68);
        y = kn_matmul(ctx, h, wt);
        check_schedule(ctx, &y->node, 1,
                       "%29 add <- %4 sum(row) %5 full %6 reshape %7 expand %8 div %9 expand %10 sub %11 mul %12 sum(row) "
                       "%13 div %14 full %15 reshape %16 expand %17 add %18 sqrt %19 recip %20 expand %21 mul %23 reshape "
                       "%24 expand %25 mul %27 reshape %28 expand\n"
                       "%31 dot <- %30 reshape %2 permute\n");
    }
    end(ctx);

    /* a value of four ops read at five places through views (a conv's
     * windows): computed once; read at two, recomputed in its reader */
    begin(ctx);
    kn_tensor *v = kn_sub(ctx, kn_mul(ctx, kn_add(ctx, kn_mul(ctx, x, kn_scalar(ctx, 3.0)), kn_scalar(ctx, 1.0)), x),
                          kn_scalar(ctx, 2.0));
    y = kn_slice(ctx, v, 1, 0, 4, 1);
    for (int k = 1; k < 5; k++) y = kn_add(ctx, y, kn_slice(ctx, v, 1, k, k + 4, 1));
    check_schedule(ctx, &y->node, 1, "%17 sub <- %2 cast %3 reshape %4 expand %6 mul %8 cast %9 reshape %10 expand %11 add %12 mul %14 cast "
                   "%15 reshape %16 expand\n"
                   "%26 add <- %18 slice %19 slice %20 add %21 slice %22 add %23 slice %24 add %25 slice\n");
    end(ctx);
    begin(ctx);
    v = kn_sub(ctx, kn_mul(ctx, kn_add(ctx, kn_mul(ctx, x, kn_scalar(ctx, 3.0)), kn_scalar(ctx, 1.0)), x),
               kn_scalar(ctx, 2.0));
    kn_tensor *left = kn_slice(ctx, v, 1, 0, 4, 1), *right = kn_slice(ctx, v, 1, 4, 8, 1); /* in this order */
    y = kn_add(ctx, left, right);
    check_schedule(ctx, &y->node, 1, "%20 add <- %2 cast %3 reshape %4 expand %6 mul %8 cast %9 reshape %10 expand %11 add %12 mul "
                   "%14 cast %15 reshape %16 expand %17 sub %18 slice %19 slice\n");
    end(ctx);

    /* the same value under a relu, which reads it at one place three
     * times (where(v < 0, 0, where(v == v, v, 0))): one kernel */
    begin(ctx);
    v = kn_sub(ctx, kn_mul(ctx, kn_add(ctx, kn_mul(ctx, x, kn_scalar(ctx, 3.0)), kn_scalar(ctx, 1.0)), x),
               kn_scalar(ctx, 2.0));
    y = kn_relu(ctx, v);
    check_schedule(ctx, &y->node, 1, "%24 where <- %18 full %19 reshape %20 expand %2 cast %3 reshape %4 expand %6 mul "
                   "%8 cast %9 reshape %10 expand %11 add %12 mul %14 cast %15 reshape %16 expand %17 sub %21 cmplt "
                   "%22 cmpeq %23 where\n");
    end(ctx);

    /* a pow of scalars broadcast into a larger kernel (Adam's bias
     * correction): computed once, not at each element */
    begin(ctx);
    kn_tensor *t = kn_full(ctx, KN_F32, 0, NULL, 3.0);
    kn_tensor *c = kn_sub(ctx, kn_scalar(ctx, 1.0), kn_pow(ctx, kn_full(ctx, KN_F32, 0, NULL, 0.9), t));
    y = kn_div(ctx, x, c);
    check_schedule(ctx, &y->node, 1, "%6 sub <- %5 cast %2 full %1 full %3 pow\n"
                   "%10 div <- %7 reshape %8 expand\n");
    end(ctx);

    /* attention's heads: (B, T, H, D) permuted to (B, H, T, D) has batch dims
     * (B, H) of no single stride, so the dot reads a contiguous copy; a
     * plain transpose of the last two dims is read in place */
    int64_t s4d[4] = {2, 3, 4, 5};
    kn_tensor *q = kn_randn(ctx, KN_F32, 4, s4d); /* concrete: an input of the graph */
    begin(ctx);
    kn_tensor *qh = kn_permute(ctx, q, (int[]){0, 2, 1, 3});
    kn_tensor *kt = kn_transpose(ctx, qh, 2, 3);
    y = kn_matmul(ctx, qh, kt);
    Arena a3;
    Schedule s3;
    arena_init(&a3, ctx);
    CHECK(sched_build(ctx, ctx->trace, &y->node, 1, &a3, &s3) == 0 && s3.materialised[qh->node] &&
          !s3.materialised[kt->node]);
    arena_free(&a3);
    end(ctx);

    /* layer_norm over rows 16 times wider than the row count: 1/sqrt(var + eps)
     * stays in the row kernel (not computed apart as a broadcast value) */
    int64_t s2x64[2] = {2, 64}, d64 = 64;
    kn_tensor *wide = kn_randn(ctx, KN_F32, 2, s2x64);
    begin(ctx);
    y = kn_layer_norm(ctx, wide, 1, &d64, NULL, NULL, 1e-5);
    Arena a5;
    Schedule s5;
    arena_init(&a5, ctx);
    CHECK_MSG(sched_build(ctx, ctx->trace, &y->node, 1, &a5, &s5) == 0 && s5.nkernels == 1, "layer_norm: %d kernels",
              s5.nkernels);
    arena_free(&a5);
    end(ctx);

    /* a BatchNorm's x_hat = (x - mean) * 1/sqrt(var + eps), read by two kernels: the per-channel
     * 1/sqrt is a buffer of its own (8 values), x_hat (512) is recomputed by each reader */
    int64_t s64x8[2] = {64, 8};
    int d0 = 0;
    kn_tensor *bx = kn_randn(ctx, KN_F32, 2, s64x8);
    begin(ctx);
    kn_tensor *dev = kn_sub(ctx, bx, kn_mean(ctx, bx, &d0, 1, 1));
    kn_tensor *rs = kn_rsqrt(ctx, kn_add(ctx, kn_mean(ctx, kn_mul(ctx, dev, dev), &d0, 1, 1), kn_scalar(ctx, 1e-5)));
    kn_tensor *xh = kn_mul(ctx, dev, rs);
    kn_tensor *bo[2] = {kn_sum(ctx, xh, &d0, 1, 0), kn_mul(ctx, xh, kn_scalar(ctx, 2.0))};
    uint32_t bon[2] = {bo[0]->node, bo[1]->node};
    Arena a6;
    Schedule s6;
    arena_init(&a6, ctx);
    CHECK(sched_build(ctx, ctx->trace, bon, 2, &a6, &s6) == 0);
    CHECK_MSG(!s6.materialised[xh->node] && s6.materialised[rs->node], "x_hat a buffer %d, 1/sqrt(var + eps) %d",
              s6.materialised[xh->node], s6.materialised[rs->node]);
    arena_free(&a6);
    end(ctx);

    /* a row sum below a small value whose fused subtree counts over 250 ops (paths counted
     * apart: 2^9 here) and that is broadcast into a larger kernel: if that value gets a kernel
     * of its own, of shape (1, 1), the sum over (16, 1) must get one too (once the count
     * saturated, the fused sum further on was not seen, and the kernel summed one element) */
    int64_t s16x1[2] = {16, 1};
    int dall[2] = {0, 1};
    kn_tensor *cx = kn_randn(ctx, KN_F32, 2, s16x1), *cz = kn_randn(ctx, KN_F32, 2, (int64_t[]){1, 1});
    begin(ctx);
    kn_tensor *tv = cz, *sum;
    for (int i = 0; i < 9; i++) tv = kn_add(ctx, kn_tanh(ctx, tv), tv);
    sum = kn_sum(ctx, cx, dall, 2, 1);
    tv = kn_div(ctx, kn_scalar(ctx, 1.0), kn_add(ctx, tv, sum)); /* the long operand first */
    kn_tensor *cy = kn_mul(ctx, cx, tv);
    Arena a7;
    Schedule s7;
    arena_init(&a7, ctx);
    CHECK(sched_build(ctx, ctx->trace, &cy->node, 1, &a7, &s7) == 0);
    CHECK_MSG(!s7.materialised[tv->node] || s7.materialised[sum->node],
              "a (1, 1) kernel holds the sum over (16, 1): value a buffer %d, sum a buffer %d",
              s7.materialised[tv->node], s7.materialised[sum->node]);
    arena_free(&a7);
    end(ctx);

    kn_ctx_free(ctx);
    TEST_END("sched");
}
