/*
 * opslist.c — `kiln ops`: the primitive table, then every composite with
 * the primitives it decomposes into.
 *
 * The decomposition is not written down anywhere: each composite is traced
 * on small example inputs (the same mechanism capture uses) and the
 * distinct primitives of the recorded graph are listed. So the listing is
 * always what the code does. The composites and their example calls are
 * composite.h's table.
 */
#include <stdio.h>
#include <string.h>

#include "../core.h"
#include "opslist.h"

typedef struct {
    kn_tensor *x4;  /* (2, 3, 4, 5) f32 */
    kn_tensor *m;   /* (3, 4) f32 */
    kn_tensor *m2;  /* (4, 5) f32 */
    kn_tensor *b3;  /* (2, 3, 4) f32 */
    kn_tensor *idx; /* (3) i64, values 0..2 */
    kn_tensor *cls; /* (3, 4) logits for 3 samples */
    kn_tensor *mask;/* (3, 4) bool */
    kn_tensor *mt;  /* (4, 3) f32, a transposed view: non-contiguous */
    kn_tensor *wt;  /* (5, 4) f32, m2 transposed */
    kn_tensor *w1;  /* (4, 3, 1) conv1d weight */
    kn_tensor *w2;  /* (2, 3, 3, 3) conv2d weight */
    kn_tensor *wT;  /* (3, 2, 3, 3) conv_transpose2d weight */
    kn_tensor *p;   /* (3, 4) f32 in (0, 1) */
    kn_tensor *bt;  /* (2, 4, 3) b3 transposed */
    kn_tensor *m1;  /* (1, 3, 4) */
    kn_tensor *i31; /* (3, 1) i64 */
    kn_tensor *two; /* a Python number 2.0 */
} Examples;

/* Composite i on the examples: composite.h's EXAMPLE column. */
static kn_tensor *example(kn_ctx *ctx, int i, const Examples *e)
{
    kn_conv_opts co = {{1, 1}, {1, 1}, {1, 1}, {0, 0}, 1};
    kn_pool_opts po = {{2, 2}, {2, 2}, {0, 0}, {1, 1}, 0, 0, 0};
    int d1 = 1, d01[2] = {0, 1}, perm[2] = {1, 0};
    int64_t s34[2] = {3, 4}, s12[1] = {12}, s4[1] = {4}, pad2[2] = {1, 1};
    kn_tensor *pieces[4];
    switch ((Composite)i) {
#define EXAMPLE_(name, example, grad) \
    case COMP_##name: return example;
        KN_COMPOSITES(EXAMPLE_)
#undef EXAMPLE_
    case COMP_COUNT: break;
    }
    return kn_err(ctx, KN_EINVAL, "no composite %d", i);
}

static void make_examples(kn_ctx *ctx, Examples *e)
{
    int64_t s4[4] = {2, 3, 4, 5}, s34[2] = {3, 4}, s45[2] = {4, 5}, s234[3] = {2, 3, 4}, s3 = 3;
    int64_t idx[3] = {0, 2, 1};
    e->x4 = kn_randn(ctx, KN_F32, 4, s4);
    e->m = kn_randn(ctx, KN_F32, 2, s34);
    e->m2 = kn_randn(ctx, KN_F32, 2, s45);
    e->b3 = kn_randn(ctx, KN_F32, 3, s234);
    e->idx = kn_tensor_from(ctx, KN_I64, 1, &s3, idx);
    e->cls = kn_randn(ctx, KN_F32, 2, s34);
    e->mask = kn_gt(ctx, e->m, kn_scalar(ctx, 0.0));
    e->mt = kn_transpose(ctx, e->m, 0, 1);
    e->wt = kn_transpose(ctx, e->m2, 0, 1);
    e->w1 = kn_randn(ctx, KN_F32, 3, (int64_t[]){4, 3, 1});
    e->w2 = kn_randn(ctx, KN_F32, 4, (int64_t[]){2, 3, 3, 3});
    e->wT = kn_randn(ctx, KN_F32, 4, (int64_t[]){3, 2, 3, 3});
    e->p = kn_rand(ctx, KN_F32, 2, s34);
    e->bt = kn_transpose(ctx, e->b3, 1, 2);
    e->m1 = kn_unsqueeze(ctx, e->m, 0);
    e->i31 = kn_reshape(ctx, e->idx, 2, (int64_t[]){3, 1});
    e->two = kn_scalar(ctx, 2.0);
}

/* Traces one composite; writes the names of the primitives it used. */
static int decompose(kn_ctx *ctx, int i, char *out, size_t cap)
{
    Examples e;
    kn_scope_begin(ctx);
    make_examples(ctx, &e); /* concrete, made before tracing: they enter the graph as inputs */
    ctx->trace = graph_new(ctx);
    int ok = ctx->trace != NULL;
    if (ok) ok = example(ctx, i, &e) != NULL;
    int used[OP_COUNT] = {0};
    size_t len = 0;
    out[0] = 0;
    for (uint32_t i = 1; ok && i < ctx->trace->n; i++) used[ctx->trace->nodes[i].op] = 1;
    for (int op = 1; ok && op < OP_COUNT; op++)
        if (used[op] && len < cap) len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? " " : "", kn_opinfo[op].name);
    if (ok && !len) snprintf(out, cap, "(none: a layout change, free in a graph)");
    if (!ok) snprintf(out, cap, "(trace failed: %.300s)", ctx->err);
    kn_clear_error(ctx);
    kn_scope_end(ctx);
    graph_free(ctx->trace);
    ctx->trace = NULL;
    return ok;
}

static const char *class_name(OpClass c)
{
    static const char *const names[] = {"leaf", "unary", "binary", "compare", "where", "cast",
                                        "reduce", "movement", "index", "dot", "create"};
    return names[c];
}

/* Traces every composite; prints the listing when print is set. Returns
 * how many composites failed to trace, and the counts through nprim/ncomp. */
int opslist_run(int print, int *nprim, int *ncomp)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    if (!ctx) return -1;
    int failed = 0;
    *nprim = *ncomp = 0;
    if (print) printf("primitives:\n");
    for (int op = 1; op < OP_COUNT; op++, (*nprim)++)
        if (print)
            printf("  %-12s %-8s %d source%s\n", kn_opinfo[op].name, class_name(kn_opinfo[op].cls),
                   kn_opinfo[op].nsrc, kn_opinfo[op].nsrc == 1 ? "" : "s");
    if (print) printf("composites:\n");
    for (int i = 0; i < COMP_COUNT; i++, (*ncomp)++) {
        char prims[512];
        int ok = decompose(ctx, i, prims, sizeof prims);
        failed += !ok;
        if (print) printf("  %-33s %s\n", composite_name(i), prims);
    }
    if (print) printf("primitives: %d, composites: %d\n", *nprim, *ncomp);
    kn_ctx_free(ctx);
    return failed;
}

int kn_cli_ops(void)
{
    int np, nc;
    return opslist_run(1, &np, &nc) != 0;
}
