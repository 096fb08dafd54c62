/*
 * opslist.c — `kiln ops`: the primitive table, then every composite with
 * the primitives it decomposes into.
 *
 * The decomposition is not written down anywhere: each composite is traced
 * on small example inputs (the same mechanism capture uses) and the
 * distinct primitives of the recorded graph are listed. So the listing is
 * always what the code does.
 */
#include <stdio.h>
#include <string.h>

#include "core.h"

/* The composites, in DESIGN.md's order; example() below calls each one. */
static const char *const composites[] = {
    "linear", "matmul", "bmm", "conv1d", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d",
    "adaptive_avg_pool2d", "batch_norm", "layer_norm", "group_norm", "rms_norm", "relu", "leaky_relu",
    "gelu", "silu", "sigmoid", "tanh", "softplus", "hardswish", "elu", "softmax", "log_softmax",
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "embedding", "dropout", "scaled_dot_product_attention", "mean",
    "var", "std", "sum", "prod", "amax", "amin", "argmax", "argmin", "logsumexp", "cumsum", "clamp",
    "square", "rsqrt", "reciprocal", "transpose", "view", "reshape", "flatten", "squeeze", "unsqueeze",
    "cat", "stack", "split", "chunk", "narrow", "index_select", "where", "masked_fill", "triu", "tril",
    "one_hot", "arange", "zeros", "ones", "full", "randn", "rand", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_xor", "logical_not", "abs", "sign", "minimum", "maximum",
    "pow", "fmod", "floor", "ceil", "round", "add", "sub", "mul", "div", "neg", "exp", "log", "sqrt",
    "sin", "cos", "erf", "permute", "expand", "contiguous", "slice", "pad", "gather", "scatter_add",
    "to",
};
#define NCOMPOSITES ((int)(sizeof composites / sizeof *composites))

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

static kn_tensor *example(kn_ctx *ctx, const char *name, const Examples *e)
{
    kn_conv_opts co = {{1, 1}, {1, 1}, {1, 1}, {0, 0}, 1};
    kn_pool_opts po = {{2, 2}, {2, 2}, {0, 0}, {1, 1}, 0, 0, 0};
    int d1 = 1, d01[2] = {0, 1}, perm[2] = {1, 0};
    int64_t s34[2] = {3, 4}, s12[1] = {12}, s4[1] = {4}, pad2[2] = {1, 1};
    kn_tensor *pieces[4];
#define IS(s) (!strcmp(name, s))
    if (IS("linear")) return kn_linear(ctx, e->m, e->wt, NULL);
    if (IS("matmul")) return kn_matmul(ctx, e->m, e->m2);
    if (IS("bmm")) return kn_bmm(ctx, e->b3, e->bt);
    if (IS("conv1d")) return kn_conv1d(ctx, e->b3, e->w1, NULL, &co);
    if (IS("conv2d")) return kn_conv2d(ctx, e->x4, e->w2, NULL, &co);
    if (IS("conv_transpose2d"))
        return kn_conv_transpose2d(ctx, e->x4, e->wT, NULL, &co);
    if (IS("max_pool2d")) return kn_max_pool2d(ctx, e->x4, &po);
    if (IS("avg_pool2d")) return kn_avg_pool2d(ctx, e->x4, &po);
    if (IS("adaptive_avg_pool2d")) return kn_adaptive_avg_pool2d(ctx, e->x4, 3, 2);
    if (IS("batch_norm")) return kn_batch_norm(ctx, e->x4, NULL, NULL, NULL, NULL, 1, 0, 0);
    if (IS("layer_norm")) return kn_layer_norm(ctx, e->m, 1, s4, NULL, NULL, 0);
    if (IS("group_norm")) return kn_group_norm(ctx, e->x4, 3, NULL, NULL, 0);
    if (IS("rms_norm")) return kn_rms_norm(ctx, e->m, 1, s4, NULL, 0);
    if (IS("relu")) return kn_relu(ctx, e->m);
    if (IS("leaky_relu")) return kn_leaky_relu(ctx, e->m, 0.01);
    if (IS("gelu")) return kn_gelu(ctx, e->m, 1);
    if (IS("silu")) return kn_silu(ctx, e->m);
    if (IS("sigmoid")) return kn_sigmoid(ctx, e->m);
    if (IS("tanh")) return kn_tanh(ctx, e->m);
    if (IS("softplus")) return kn_softplus(ctx, e->m, 0, 0);
    if (IS("hardswish")) return kn_hardswish(ctx, e->m);
    if (IS("elu")) return kn_elu(ctx, e->m, 1.0);
    if (IS("softmax")) return kn_softmax(ctx, e->m, -1);
    if (IS("log_softmax")) return kn_log_softmax(ctx, e->m, -1);
    if (IS("cross_entropy")) return kn_cross_entropy(ctx, e->cls, e->idx, NULL);
    if (IS("nll_loss")) return kn_nll_loss(ctx, e->cls, e->idx, NULL);
    if (IS("mse_loss")) return kn_mse_loss(ctx, e->m, e->m, KN_REDUCE_MEAN);
    if (IS("l1_loss")) return kn_l1_loss(ctx, e->m, e->m, KN_REDUCE_MEAN);
    if (IS("binary_cross_entropy")) return kn_binary_cross_entropy(ctx, e->p, e->p, NULL, 0);
    if (IS("binary_cross_entropy_with_logits")) return kn_binary_cross_entropy_with_logits(ctx, e->m, e->m, NULL, NULL, 0);
    if (IS("embedding")) return kn_embedding(ctx, e->m, e->idx);
    if (IS("dropout")) return kn_dropout(ctx, e->m, 0.5, 1);
    if (IS("scaled_dot_product_attention")) return kn_scaled_dot_product_attention(ctx, e->b3, e->b3, e->b3, NULL, 1, 0);
    if (IS("mean")) return kn_mean(ctx, e->m, &d1, 1, 0);
    if (IS("var")) return kn_var(ctx, e->m, &d1, 1, 1, 0);
    if (IS("std")) return kn_std(ctx, e->m, &d1, 1, 1, 0);
    if (IS("sum")) return kn_sum(ctx, e->m, d01, 2, 0);
    if (IS("prod")) return kn_prod(ctx, e->m, 1, 0);
    if (IS("amax")) return kn_amax(ctx, e->m, &d1, 1, 0);
    if (IS("amin")) return kn_amin(ctx, e->m, &d1, 1, 0);
    if (IS("argmax")) return kn_argmax(ctx, e->m, 1, 0);
    if (IS("argmin")) return kn_argmin(ctx, e->m, 1, 0);
    if (IS("logsumexp")) return kn_logsumexp(ctx, e->m, &d1, 1, 0);
    if (IS("cumsum")) return kn_cumsum(ctx, e->m, 1);
    if (IS("clamp")) return kn_clamp(ctx, e->m, -1, 1);
    if (IS("square")) return kn_square(ctx, e->m);
    if (IS("rsqrt")) return kn_rsqrt(ctx, e->m);
    if (IS("reciprocal")) return kn_reciprocal(ctx, e->m);
    if (IS("transpose")) return kn_transpose(ctx, e->m, 0, 1);
    if (IS("view")) return kn_view(ctx, e->m, 1, s12);
    if (IS("reshape")) return kn_reshape(ctx, e->mt, 1, s12);
    if (IS("flatten")) return kn_flatten(ctx, e->x4, 1, -1);
    if (IS("squeeze")) return kn_squeeze(ctx, e->m1, 0);
    if (IS("unsqueeze")) return kn_unsqueeze(ctx, e->m, 1);
    if (IS("cat")) return kn_cat(ctx, (kn_tensor *[]){e->m, e->m}, 2, 0);
    if (IS("stack")) return kn_stack(ctx, (kn_tensor *[]){e->m, e->m}, 2, 0);
    if (IS("split")) return kn_split(ctx, e->m, 2, 1, pieces, 4) > 0 ? pieces[1] : NULL;
    if (IS("chunk")) return kn_chunk(ctx, e->m, 2, 1, pieces, 4) > 0 ? pieces[1] : NULL;
    if (IS("narrow")) return kn_narrow(ctx, e->m, 1, 1, 2);
    if (IS("index_select")) return kn_index_select(ctx, e->m, 0, e->idx);
    if (IS("where")) return kn_where(ctx, e->mask, e->m, e->p);
    if (IS("masked_fill")) return kn_masked_fill(ctx, e->m, e->mask, 0.0);
    if (IS("triu")) return kn_triu(ctx, e->m, 0);
    if (IS("tril")) return kn_tril(ctx, e->m, 0);
    if (IS("one_hot")) return kn_one_hot(ctx, e->idx, 3);
    if (IS("arange")) return kn_arange(ctx, KN_F32, 0, 5, 1);
    if (IS("zeros")) return kn_zeros(ctx, KN_F32, 2, s34);
    if (IS("ones")) return kn_ones(ctx, KN_F32, 2, s34);
    if (IS("full")) return kn_full(ctx, KN_F32, 2, s34, 2.5);
    if (IS("randn")) return kn_randn(ctx, KN_F32, 2, s34);
    if (IS("rand")) return kn_rand(ctx, KN_F32, 2, s34);
    if (IS("eq")) return kn_eq(ctx, e->m, e->m);
    if (IS("ne")) return kn_ne(ctx, e->m, e->m);
    if (IS("lt")) return kn_lt(ctx, e->m, e->m);
    if (IS("le")) return kn_le(ctx, e->m, e->m);
    if (IS("gt")) return kn_gt(ctx, e->m, e->m);
    if (IS("ge")) return kn_ge(ctx, e->m, e->m);
    if (IS("logical_and")) return kn_logical_and(ctx, e->mask, e->mask);
    if (IS("logical_or")) return kn_logical_or(ctx, e->mask, e->mask);
    if (IS("logical_xor")) return kn_logical_xor(ctx, e->mask, e->mask);
    if (IS("logical_not")) return kn_logical_not(ctx, e->mask);
    if (IS("abs")) return kn_abs(ctx, e->m);
    if (IS("sign")) return kn_sign(ctx, e->m);
    if (IS("minimum")) return kn_minimum(ctx, e->m, e->m);
    if (IS("maximum")) return kn_maximum(ctx, e->m, e->m);
    if (IS("pow")) return kn_pow(ctx, e->m, e->two);
    if (IS("fmod")) return kn_fmod(ctx, e->m, e->two);
    if (IS("floor")) return kn_floor(ctx, e->m);
    if (IS("ceil")) return kn_ceil(ctx, e->m);
    if (IS("round")) return kn_round(ctx, e->m);
    if (IS("add")) return kn_add(ctx, e->m, e->m);
    if (IS("sub")) return kn_sub(ctx, e->m, e->m);
    if (IS("mul")) return kn_mul(ctx, e->m, e->m);
    if (IS("div")) return kn_div(ctx, e->m, e->m);
    if (IS("neg")) return kn_neg(ctx, e->m);
    if (IS("exp")) return kn_exp(ctx, e->m);
    if (IS("log")) return kn_log(ctx, e->m);
    if (IS("sqrt")) return kn_sqrt(ctx, e->m);
    if (IS("sin")) return kn_sin(ctx, e->m);
    if (IS("cos")) return kn_cos(ctx, e->m);
    if (IS("erf")) return kn_erf(ctx, e->m);
    if (IS("permute")) return kn_permute(ctx, e->m, perm);
    if (IS("expand")) return kn_expand(ctx, e->m1, 3, (int64_t[]){2, 3, 4});
    if (IS("contiguous")) return kn_contiguous(ctx, e->mt);
    if (IS("slice")) return kn_slice(ctx, e->m, 1, 0, 4, 2);
    if (IS("pad")) return kn_pad(ctx, e->m, 2, pad2, 0.0);
    if (IS("gather")) return kn_gather(ctx, e->m, 1, e->i31);
    if (IS("scatter_add"))
        return kn_scatter_add(ctx, e->m, 1, e->i31, e->m);
    if (IS("to")) return kn_to(ctx, e->m, KN_F64);
#undef IS
    return kn_err(ctx, KN_EINVAL, "no example for composite '%s'", name);
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
static int decompose(kn_ctx *ctx, const char *name, char *out, size_t cap)
{
    Examples e;
    kn_scope_begin(ctx);
    make_examples(ctx, &e); /* concrete, made before tracing: they enter the graph as inputs */
    ctx->trace = graph_new(ctx);
    int ok = ctx->trace != NULL;
    if (ok) ok = example(ctx, name, &e) != NULL;
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

/* The i-th composite's name, in `kiln ops` order; NULL past the end. */
const char *opslist_composite(int i) { return i >= 0 && i < NCOMPOSITES ? composites[i] : NULL; }

int opslist_find(const char *public_op)
{
    if (!public_op || strncmp(public_op, "kn_", 3) != 0) return 0;
    for (int i = 0; i < NCOMPOSITES; i++)
        if (!strcmp(public_op + 3, composites[i])) return i + 1;
    return 0;
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
    for (int i = 0; i < NCOMPOSITES; i++, (*ncomp)++) {
        char prims[512];
        int ok = decompose(ctx, composites[i], prims, sizeof prims);
        failed += !ok;
        if (print) printf("  %-33s %s\n", composites[i], prims);
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
