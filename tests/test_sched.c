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

    /* softmax: the exp that two kernels read is computed once */
    begin(ctx);
    y = kn_softmax(ctx, x, 1);
    check_schedule(ctx, &y->node, 1,
                   "%2 reduce_max <-\n"
                   "%5 exp <- %3 expand %4 sub\n"
                   "%6 sum <-\n"
                   "%8 div <- %7 expand\n");
    end(ctx);

    /* linear + relu: the transposed weight is index arithmetic; relu fuses after the dot */
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
        dots += ctx->trace->nodes[s.kernels[k]].op == OP_DOT;
        perm_kernels += ctx->trace->nodes[s.kernels[k]].op == OP_PERMUTE;
    }
    CHECK(dots == 1 && perm_kernels == 0 && s.nkernels == 3);
    arena_free(&a);
    end(ctx);

    kn_ctx_free(ctx);
    TEST_END("sched");
}
