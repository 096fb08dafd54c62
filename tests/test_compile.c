/*
 * test_compile.c — whole programs through the pipeline (schedule, lower,
 * render, JIT, memory plan) against eager mode, for backends tcc and c:
 * forward composites on odd sizes and non-contiguous inputs, and the
 * backward of a small network (a joint graph); the same composites big
 * enough for parallel loops, on one thread and on three (the same bytes);
 * max-autotune (candidates timed, winners remembered).
 */
#if defined(__unix__) && !defined(__wasi__)
#define _POSIX_C_SOURCE 200809L /* mkdtemp, setenv, strdup */
#include <dirent.h>
#include <unistd.h>
#endif
#include <stdlib.h>

#include "test.h"
#include "../src/core.h"
#include "../src/compile.h"
#include "../port/port.h"

#define MAXIN 8

typedef kn_tensor *(*Case)(kn_ctx *ctx, kn_tensor *const *in);

static kn_tensor *c_chain(kn_ctx *c, kn_tensor *const *in)
{
    return kn_tanh(c, kn_add(c, kn_mul(c, in[0], kn_scalar(c, 1.5)), kn_exp(c, in[6])));
}
static kn_tensor *c_softmax(kn_ctx *c, kn_tensor *const *in) { return kn_softmax(c, in[0], 1); }
static kn_tensor *c_log_softmax(kn_ctx *c, kn_tensor *const *in) { return kn_log_softmax(c, in[0], 0); }
static kn_tensor *c_layer_norm(kn_ctx *c, kn_tensor *const *in)
{
    int64_t s = kn_shape(in[0])[1];
    return kn_layer_norm(c, in[0], 1, &s, NULL, NULL, 1e-5);
}
static kn_tensor *c_linear_gelu(kn_ctx *c, kn_tensor *const *in)
{
    return kn_gelu(c, kn_linear(c, in[0], in[1], in[3]), 1);
}
static kn_tensor *c_reduce(kn_ctx *c, kn_tensor *const *in)
{
    int d = 0;
    return kn_add(c, kn_amax(c, in[0], &d, 1, 1), kn_mean(c, in[0], &d, 1, 1));
}
static kn_tensor *c_conv(kn_ctx *c, kn_tensor *const *in)
{
    kn_conv_opts o = {{2, 1}, {1, 2}, {1, 1}, {0, 0}, 1};
    return kn_relu(c, kn_conv2d(c, in[4], in[5], NULL, &o));
}
static kn_tensor *c_pool(kn_ctx *c, kn_tensor *const *in)
{
    kn_pool_opts o = {{3, 3}, {2, 2}, {1, 1}, {1, 1}, 0, 0, 0};
    return kn_max_pool2d(c, in[4], &o);
}
static kn_tensor *c_ce(kn_ctx *c, kn_tensor *const *in) { return kn_cross_entropy(c, in[0], in[2], NULL); }
static kn_tensor *c_embedding(kn_ctx *c, kn_tensor *const *in) { return kn_embedding(c, in[1], in[7]); }
static kn_tensor *c_ints(kn_ctx *c, kn_tensor *const *in)
{
    kn_tensor *i = kn_to(c, kn_mul(c, in[0], kn_scalar(c, 10.0)), KN_I32);
    return kn_fmod(c, kn_add(c, i, kn_scalar_int(c, 7)), kn_scalar_int(c, 3));
}
static kn_tensor *c_where_pad(kn_ctx *c, kn_tensor *const *in)
{
    int64_t pad[4] = {1, 2, 0, 1};
    return kn_where(c, kn_gt(c, in[0], kn_scalar(c, 0.0)), kn_pad(c, kn_slice(c, in[0], 1, 0, 13, 1), 0, pad, 0), in[0]);
}

static const struct { const char *name; Case f; } cases[] = {
    {"chain", c_chain}, {"softmax", c_softmax}, {"log_softmax", c_log_softmax}, {"layer_norm", c_layer_norm},
    {"linear_gelu", c_linear_gelu}, {"reduce", c_reduce}, {"conv_relu", c_conv}, {"max_pool", c_pool},
    {"cross_entropy", c_ce}, {"embedding", c_embedding}, {"ints", c_ints}, {"where_pad", c_where_pad},
};

static double max_diff(kn_ctx *ctx, kn_tensor *a, kn_tensor *b, int *same_shape)
{
    int64_t n = kn_numel(a);
    *same_shape = kn_ndim(a) == kn_ndim(b) && n == kn_numel(b) && kn_dtype_of(a) == kn_dtype_of(b);
    if (!*same_shape) return INFINITY;
    double worst = 0;
    kn_tensor *x = kn_contiguous(ctx, kn_to(ctx, a, KN_F64)), *y = kn_contiguous(ctx, kn_to(ctx, b, KN_F64));
    for (int64_t i = 0; i < n; i++) { /* (kn_to of an f64 view is the view itself: its order is not i's) */
        double u = dt_load(KN_F64, tensor_ptr(x, x->offset + i)), v = dt_load(KN_F64, tensor_ptr(y, y->offset + i));
        double d = fabs(u - v) / (1e-6 + fabs(v));
        if (d > worst || d != d) worst = d != d ? INFINITY : d;
    }
    return worst;
}

/* max |a - b| over max |b|: for products, whose elements may cancel to near zero where a rounding
 * difference (an FMA, another summation order) is large against the element but not against the
 * terms; a wrong element is still off by about the scale of b */
static double max_diff_scaled(kn_ctx *ctx, kn_tensor *a, kn_tensor *b, int *same_shape)
{
    int64_t n = kn_numel(a);
    *same_shape = kn_ndim(a) == kn_ndim(b) && n == kn_numel(b) && kn_dtype_of(a) == kn_dtype_of(b);
    if (!*same_shape) return INFINITY;
    double worst = 0, scale = 0;
    kn_tensor *x = kn_contiguous(ctx, kn_to(ctx, a, KN_F64)), *y = kn_contiguous(ctx, kn_to(ctx, b, KN_F64));
    for (int64_t i = 0; i < n; i++) { /* (kn_to of an f64 view is the view itself: its order is not i's) */
        double u = dt_load(KN_F64, tensor_ptr(x, x->offset + i)), v = dt_load(KN_F64, tensor_ptr(y, y->offset + i));
        double d = fabs(u - v);
        if (d > worst || d != d) worst = d != d ? INFINITY : d;
        if (fabs(v) > scale) scale = fabs(v);
    }
    return worst / (1e-6 + scale);
}

static void run_case(kn_ctx *ctx, int c, CompileBackend backend, kn_tensor *const *in, int nin)
{
    kn_scope_begin(ctx);
    kn_tensor *want = cases[c].f(ctx, in);
    ctx->trace = graph_new(ctx);
    kn_tensor *y = cases[c].f(ctx, in);
    Graph *g = ctx->trace;
    ctx->trace = NULL;
    CompileOpts o = {backend, KN_MODE_DEFAULT, 0, NULL};
    Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
    kn_tensor *ins[MAXIN * 2], *got = NULL;
    int n = 0;
    for (uint32_t k = 0; k < g->ninputs; k++) ins[n++] = g->input_vals[k];
    (void)nin;
    int ok = p && program_run(p, ins, n, &got) == KN_OK;
    int same = 0;
    double d = ok ? max_diff(ctx, got, want, &same) : INFINITY;
    ProgramStats st = {0, 0, 0, 0, "?", 0, 0, 0, 0, 0};
    if (p) program_stats(p, &st);
    CHECK_MSG(ok && same && d < 2e-5, "%s on %s (%s): %s, max rel diff %g", cases[c].name,
              backend == BACKEND_TCC ? "tcc" : "c", st.backend, ok ? "ran" : kn_last_error(ctx), d);
    /* where the compiler exists it is used; where none can (wasm, a board) the
     * program falls back to the interpreter and still computes the same */
    int can = port_jit_available(backend == BACKEND_TCC ? PORT_TCC : PORT_CC);
    const char *expect = !can ? "interp" : backend == BACKEND_TCC ? "tcc" : "c";
    CHECK_MSG(!p || strcmp(st.backend, expect) == 0, "%s ran on %s, expected %s", cases[c].name, st.backend, expect);
    kn_clear_error(ctx);
    program_free(p);
    graph_free(g);
    kn_scope_end(ctx);
}

/* Big enough for parallel loops: each program runs on one thread and on
 * three, which must give the same bytes, and equals eager within 1e-5 of
 * the output's largest magnitude (sums of a thousand terms). */
static void run_threads(kn_ctx *ctx, int c, CompileBackend backend, kn_tensor *const *in)
{
    kn_scope_begin(ctx);
    kn_tensor *want = cases[c].f(ctx, in);
    ctx->trace = graph_new(ctx);
    kn_tensor *y = cases[c].f(ctx, in);
    Graph *g = ctx->trace;
    ctx->trace = NULL;
    CompileOpts o = {backend, KN_MODE_DEFAULT, 0, NULL};
    Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
    kn_tensor *got[2] = {NULL, NULL};
    int ok = p != NULL;
    for (int t = 0; t < 2 && ok; t++) {
        port_set_threads(t ? 3 : 1);
        ok = program_run(p, g->input_vals, (int)g->ninputs, &got[t]) == KN_OK;
    }
    port_set_threads(0);
    int same = ok && kn_numel(got[1]) == kn_numel(want);
    double d = 0, scale = 0; /* big sums: relative to the output's scale */
    kn_tensor *u = same ? kn_to(ctx, got[1], KN_F64) : NULL, *v = same ? kn_to(ctx, want, KN_F64) : NULL;
    for (int64_t i = 0; u && v && i < kn_numel(u); i++) {
        double a = dt_load(KN_F64, tensor_ptr(u, u->offset + i)), b = dt_load(KN_F64, tensor_ptr(v, v->offset + i));
        scale = fabs(b) > scale ? fabs(b) : scale;
        d = fabs(a - b) > d || a != a ? (a != a ? INFINITY : fabs(a - b)) : d;
    }
    d = same ? d / (scale + 1e-30) : INFINITY;
    size_t bytes = ok ? (size_t)kn_numel(got[0]) * kn_dtype_size(kn_dtype_of(got[0])) : 0;
    CHECK_MSG(ok && same && d < 2e-5, "%s, big, on %s: %s, max rel diff %g", cases[c].name,
              backend == BACKEND_TCC ? "tcc" : "c", ok ? "ran" : kn_last_error(ctx), d);
    CHECK_MSG(ok && memcmp(tensor_ptr(got[0], got[0]->offset), tensor_ptr(got[1], got[1]->offset), bytes) == 0,
              "%s, big, on %s: 3 threads differ from 1", cases[c].name, backend == BACKEND_TCC ? "tcc" : "c");
    kn_clear_error(ctx);
    program_free(p);
    graph_free(g);
    kn_scope_end(ctx);
}

/* gather (dim 0 of a transposed (5, 7)) or scatter_add (dim 1, src (5, 6)) with an index of dtype it
 * read at run time: the program equals eager bit for bit with no interpreter step, and an index out
 * of range (-1, or the dim's size) fails as eager does: KN_EINDEX and eager's very message. */
static kn_tensor *index_op(kn_ctx *c, int scatter, kn_tensor *x, kn_tensor *idx, kn_tensor *src)
{
    return scatter ? kn_scatter_add(c, x, 1, idx, src) : kn_gather(c, x, 0, idx);
}

static void index_case(kn_ctx *ctx, int scatter, kn_dtype it, CompileBackend be)
{
    const char *bn = be == BACKEND_TCC ? "tcc" : "c", *op = scatter ? "scatter_add" : "gather";
    int64_t xs[2] = {7, 5}, ss[2] = {5, 6}, is[2] = {scatter ? 5 : 3, scatter ? 4 : 7}, iv[35];
    int64_t n = is[0] * is[1], size = scatter ? 7 : 5;
    kn_scope_begin(ctx);
    for (int64_t i = 0; i < n; i++) iv[i] = (i * 3 + 1) % size; /* repeats: scatter_add adds twice */
    kn_tensor *x = kn_transpose(ctx, kn_randn(ctx, KN_F32, 2, xs), 0, 1), *src = kn_randn(ctx, KN_F32, 2, ss);
    kn_tensor *idx = kn_to(ctx, kn_tensor_from(ctx, KN_I64, 2, is, iv), it);
    kn_tensor *want = index_op(ctx, scatter, x, idx, src), *got = NULL;
    ctx->trace = graph_new(ctx);
    kn_tensor *y = index_op(ctx, scatter, x, idx, src);
    Graph *g = ctx->trace;
    ctx->trace = NULL;
    CompileOpts o = {be, KN_MODE_DEFAULT, 0, NULL};
    Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
    kn_tensor *ins[MAXIN];
    int at = -1, same = 0;
    for (uint32_t k = 0; k < g->ninputs && k < MAXIN; k++) at = g->input_vals[k] == idx ? (int)k : at, ins[k] = g->input_vals[k];
    int ok = p && at >= 0 && program_run(p, ins, (int)g->ninputs, &got) == KN_OK;
    double d = ok ? max_diff(ctx, got, want, &same) : INFINITY;
    ProgramStats st = {0};
    if (p) program_stats(p, &st);
    CHECK_MSG(ok && same && d == 0, "%s %s index on %s: %s, max rel diff %g", op, kn_dtype_name(it), bn,
              ok ? "ran" : kn_last_error(ctx), d);
    CHECK_MSG(!port_jit_available(be == BACKEND_TCC ? PORT_TCC : PORT_CC) || st.interp_steps == 0,
              "%s on %s: %d interpreter steps", op, bn, st.interp_steps);
    for (int b = 0; b < 2 && ok; b++) {
        char eager[256];
        iv[n - 2] = b ? size : -1;
        kn_tensor *bad = kn_to(ctx, kn_tensor_from(ctx, KN_I64, 2, is, iv), it);
        kn_status es = index_op(ctx, scatter, x, bad, src) ? KN_OK : kn_last_status(ctx);
        snprintf(eager, sizeof eager, "%s", kn_last_error(ctx));
        ins[at] = bad;
        kn_status cs = program_run(p, ins, (int)g->ninputs, &got);
        /* eager's message less its "kn_OP: ", at the end (the interpreter, where no JIT is, adds "graph_run: ") */
        const char *want = eager + strlen("kn_: ") + strlen(op), *msg = kn_last_error(ctx);
        size_t lw = strlen(want), lm = strlen(msg);
        CHECK_MSG(es == KN_EINDEX && cs == KN_EINDEX && lm >= lw && strcmp(msg + lm - lw, want) == 0,
                  "%s index %lld on %s: eager %d '%s', compiled %d '%s'", op, (long long)iv[n - 2], bn, (int)es, eager,
                  (int)cs, kn_last_error(ctx));
        kn_clear_error(ctx);
        iv[n - 2] = (n - 2) * 3 % size;
    }
    program_free(p);
    graph_free(g);
    kn_scope_end(ctx);
}

/* max-autotune: a dot with an epilogue and a row kernel are tuned (their
 * candidates timed), the program equals eager, and compiling it again finds
 * both winners remembered. In a fresh $KILN_CACHE_DIR, whose autotune.txt
 * then holds them. */
#if defined(__unix__) && !defined(__wasi__)
/* $KILN_CACHE_DIR made a fresh directory from the template dir (its old
 * value in *saved): 0 where there is no cc or no directory. */
static int cache_dir_begin(char *dir, char **saved)
{
    const char *old = getenv("KILN_CACHE_DIR");
    if (!port_jit_available(PORT_CC) || !mkdtemp(dir)) return 0;
    *saved = old ? strdup(old) : NULL;
    setenv("KILN_CACHE_DIR", dir, 1);
    return 1;
}

/* The directory emptied and removed, $KILN_CACHE_DIR as it was. */
static void cache_dir_end(const char *dir, char *saved)
{
    DIR *dd = opendir(dir);
    for (struct dirent *e; dd && (e = readdir(dd));) {
        char f[512];
        if (e->d_name[0] == '.') continue;
        snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
        remove(f);
    }
    if (dd) closedir(dd);
    rmdir(dir);
    if (saved) setenv("KILN_CACHE_DIR", saved, 1);
    else unsetenv("KILN_CACHE_DIR");
    free(saved);
}
#endif

static void test_autotune(kn_ctx *ctx)
{
#if defined(__unix__) && !defined(__wasi__)
    char dir[] = "/tmp/kiln-test-autotune-XXXXXX", path[64];
    char *saved;
    if (!cache_dir_begin(dir, &saved)) return;
    int64_t sx[2] = {67, 129}, sw[2] = {33, 129}, sb = 33;
    kn_tensor *x = kn_randn(ctx, KN_F32, 2, sx), *w = kn_randn(ctx, KN_F32, 2, sw), *b = kn_randn(ctx, KN_F32, 1, &sb);
    kn_tensor *want = kn_softmax(ctx, kn_gelu(ctx, kn_linear(ctx, x, w, b), 1), 1);
    for (int pass = 0; pass < 2; pass++) {
        kn_scope_begin(ctx);
        ctx->trace = graph_new(ctx);
        kn_tensor *y = kn_softmax(ctx, kn_gelu(ctx, kn_linear(ctx, x, w, b), 1), 1);
        Graph *g = ctx->trace;
        ctx->trace = NULL;
        CompileOpts o = {BACKEND_C, KN_MODE_MAX_AUTOTUNE, 0, NULL};
        Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
        kn_tensor *got = NULL;
        ProgramStats st = {0, 0, 0, 0, "?", 0, 0, 0, 0, 0};
        if (p) program_stats(p, &st);
        int same = 0;
        double d = p && program_run(p, g->input_vals, (int)g->ninputs, &got) == KN_OK ? max_diff(ctx, got, want, &same)
                                                                                      : INFINITY;
        CHECK_MSG(same && d < 2e-5, "autotune pass %d: %s, max rel diff %g", pass, kn_last_error(ctx), d);
        CHECK_MSG(pass ? st.tuned == 0 && st.tune_cached == 2 : st.tuned == 2 && st.tune_cached == 0,
                  "autotune pass %d: %d tuned, %d remembered", pass, st.tuned, st.tune_cached);
        program_free(p);
        graph_free(g);
        kn_scope_end(ctx);
    }
    void *data = NULL;
    size_t size = 0;
    char why[256];
    snprintf(path, sizeof path, "%s/autotune.txt", dir);
    CHECK(port_read_file(path, &data, &size, why) == 0 && size == 2 * 19); /* two "key winner" lines */
    free(data);
    cache_dir_end(dir, saved);
#else
    (void)ctx;
#endif
}

/* counts the dot template units in the generated code */
static void count_units(void *user, const char *line)
{
    for (const char *q = line; (q = strstr(q, "/* kiln gemm ")) != NULL; q++) ++*(int *)user;
}

/* Two dots of one spec, each with its own epilogue (bias + relu, bias +
 * gelu): one template unit, each dot calling its own epilogue through it. */
static void test_shared_dots(kn_ctx *ctx)
{
    int64_t sx[2] = {7, 16}, sw[2] = {16, 16}, sb = 16;
    kn_tensor *x = kn_randn(ctx, KN_F32, 2, sx), *w = kn_randn(ctx, KN_F32, 2, sw), *b = kn_randn(ctx, KN_F32, 1, &sb);
    for (int be = 0; be < 2; be++) {
        kn_scope_begin(ctx);
        kn_tensor *want = kn_gelu(ctx, kn_linear(ctx, kn_relu(ctx, kn_linear(ctx, x, w, b)), w, b), 1);
        ctx->trace = graph_new(ctx);
        kn_tensor *y = kn_gelu(ctx, kn_linear(ctx, kn_relu(ctx, kn_linear(ctx, x, w, b)), w, b), 1);
        Graph *g = ctx->trace;
        ctx->trace = NULL;
        int units = 0;
        kn_set_log(ctx, count_units, &units);
        kn_set_logs(ctx, "output_code");
        CompileOpts o = {be ? BACKEND_C : BACKEND_TCC, KN_MODE_DEFAULT, 0, NULL};
        Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
        kn_set_logs(ctx, "");
        kn_set_log(ctx, NULL, NULL);
        kn_tensor *got = NULL;
        int same = 0;
        double d = p && program_run(p, g->input_vals, (int)g->ninputs, &got) == KN_OK
                       ? max_diff_scaled(ctx, got, want, &same)
                       : INFINITY;
        ProgramStats st = {0, 0, 0, 0, "?", 0, 0, 0, 0, 0};
        if (p) program_stats(p, &st);
        CHECK_MSG(same && d < 2e-5, "shared dots on %s: %s, max diff over max %g", st.backend, kn_last_error(ctx), d);
        if (strcmp(st.backend, "interp") != 0) CHECK_MSG(units == 1, "%s: %d dot units for two dots of one spec", st.backend, units);
        if (be && !strcmp(st.backend, "c")) /* the SIMD dots packed into the scratch the context lends */
            CHECK_MSG(ctx->scratch && ctx->scratch_bytes > 0, "c: the dots asked the context for no scratch");
        program_free(p);
        graph_free(g);
        kn_scope_end(ctx);
    }
}

/* definitions of kernel entries: "void NAME(void **b)" lines (the declarations end in ';') */
static void count_entries(void *user, const char *line)
{
    const char *q = strstr(line, "void ");
    if (q && strstr(q, "(void **b)") && !strchr(q, ';') && !strncmp(q + 5, "k", 1)) ++*(int *)user;
}

/* Three outputs: tanh(x * 1.5 + 1) of two inputs of one shape, the second
 * transposed (copied contiguous when bound: two kernels equal but for their
 * names and buffers, one function that both steps run on their own
 * buffers), and of an input of another size (a function of its own). Each
 * equals eager. */
static void test_shared_kernels(kn_ctx *ctx)
{
    int64_t s[2] = {7, 13}, st13[2] = {13, 7}, s5[2] = {5, 13};
    kn_tensor *in[3] = {kn_randn(ctx, KN_F32, 2, s), kn_transpose(ctx, kn_randn(ctx, KN_F32, 2, st13), 0, 1),
                        kn_randn(ctx, KN_F32, 2, s5)};
    for (int be = 0; be < 2; be++) {
        kn_scope_begin(ctx);
        kn_tensor *want[3], *y[3], *got[3] = {NULL, NULL, NULL};
        for (int i = 0; i < 3; i++)
            want[i] = kn_tanh(ctx, kn_add(ctx, kn_mul(ctx, in[i], kn_scalar(ctx, 1.5)), kn_scalar(ctx, 1)));
        ctx->trace = graph_new(ctx);
        for (int i = 0; i < 3; i++)
            y[i] = kn_tanh(ctx, kn_add(ctx, kn_mul(ctx, in[i], kn_scalar(ctx, 1.5)), kn_scalar(ctx, 1)));
        Graph *g = ctx->trace;
        ctx->trace = NULL;
        uint32_t outs[3] = {y[0] ? y[0]->node : 0, y[1] ? y[1]->node : 0, y[2] ? y[2]->node : 0};
        int fns = 0;
        kn_set_log(ctx, count_entries, &fns);
        kn_set_logs(ctx, "output_code");
        CompileOpts o = {be ? BACKEND_C : BACKEND_TCC, KN_MODE_DEFAULT, 0, NULL};
        Program *p = y[0] && y[1] && y[2] ? compile_graph(ctx, g, outs, 3, &o) : NULL;
        kn_set_logs(ctx, "");
        kn_set_log(ctx, NULL, NULL);
        ProgramStats ps = {0, 0, 0, 0, "?", 0, 0, 0, 0, 0};
        if (p) program_stats(p, &ps);
        int ok = p && program_run(p, g->input_vals, (int)g->ninputs, got) == KN_OK;
        for (int i = 0; i < 3; i++) {
            int same = 0;
            double d = ok ? max_diff(ctx, got[i], want[i], &same) : INFINITY;
            CHECK_MSG(same && d < 2e-5, "shared kernels on %s, output %d: %s, max rel diff %g", ps.backend, i,
                      kn_last_error(ctx), d);
        }
        if (strcmp(ps.backend, "interp") != 0)
            CHECK_MSG(ps.kernels == 3 && fns == 2, "%s: %d kernels in %d functions, expected 3 in 2", ps.backend,
                      ps.kernels, fns);
        program_free(p);
        graph_free(g);
        kn_scope_end(ctx);
    }
}

/* A dot with a transposed residual: one kernel, the residual an epilogue
 * that reads C in place and the residual at a stride of M in the N loop
 * (a tile kernel, whose three loops the template runs over each tile, so
 * the loop passes only simplify its indices), equal to eager's. */
static void test_epilogue_loops(kn_ctx *ctx)
{
    int64_t sx[2] = {32, 40}, sw[2] = {40, 48}, sr[2] = {48, 32};
    kn_tensor *x = kn_randn(ctx, KN_F32, 2, sx), *w = kn_randn(ctx, KN_F32, 2, sw), *r = kn_randn(ctx, KN_F32, 2, sr);
    for (int be = 0; be < 2; be++) {
        kn_scope_begin(ctx);
        kn_tensor *want = kn_add(ctx, kn_matmul(ctx, x, w), kn_transpose(ctx, r, 0, 1));
        ctx->trace = graph_new(ctx);
        kn_tensor *y = kn_add(ctx, kn_matmul(ctx, x, w), kn_transpose(ctx, r, 0, 1));
        Graph *g = ctx->trace;
        ctx->trace = NULL;
        CompileOpts o = {be ? BACKEND_C : BACKEND_TCC, KN_MODE_DEFAULT, 0, NULL};
        Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
        kn_tensor *got = NULL;
        int same = 0, ok = p && program_run(p, g->input_vals, (int)g->ninputs, &got) == KN_OK;
        double d = ok ? max_diff_scaled(ctx, got, want, &same) : INFINITY;
        ProgramStats st = {0, 0, 0, 0, "?", 0, 0, 0, 0, 0};
        if (p) program_stats(p, &st);
        CHECK_MSG(ok && same && d < 1e-5, "dot + transposed residual on %s: %s, max diff %g", be ? "c" : "tcc",
                  kn_last_error(ctx), d);
        CHECK_MSG(!p || !strcmp(st.backend, "interp") || st.kernels == 1, "dot + transposed residual on %s: %d kernels",
                  st.backend, st.kernels);
        kn_clear_error(ctx);
        program_free(p);
        graph_free(g);
        kn_scope_end(ctx);
    }
}

/* The memory plan: every intermediate at an offset in the one arena, by
 * liveness with reuse. A chain of six products of 64 x 64 floats has five
 * intermediates of 16 KiB, each read by the next product only: two are
 * live at once, so the arena is two of them, and the result equals eager's. */
static void test_plan(kn_ctx *ctx)
{
    int64_t s[2] = {64, 64};
    for (int be = 0; be < 2; be++) {
        kn_scope_begin(ctx);
        kn_tensor *x = kn_randn(ctx, KN_F32, 2, s), *w[6];
        for (int i = 0; i < 6; i++) w[i] = kn_mul(ctx, kn_randn(ctx, KN_F32, 2, s), kn_scalar(ctx, 0.125));
        kn_tensor *want = x;
        for (int i = 0; i < 6; i++) want = kn_matmul(ctx, want, w[i]);
        ctx->trace = graph_new(ctx);
        kn_tensor *y = x;
        for (int i = 0; i < 6; i++) y = kn_matmul(ctx, y, w[i]);
        Graph *g = ctx->trace;
        ctx->trace = NULL;
        CompileOpts o = {be ? BACKEND_C : BACKEND_TCC, KN_MODE_DEFAULT, 0, NULL};
        Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
        ProgramStats st = {0, 0, 0, 0, "?", 0, 0, 0, 0, 0};
        if (p) program_stats(p, &st);
        kn_tensor *got = NULL;
        int same = 0, ok = p && program_run(p, g->input_vals, (int)g->ninputs, &got) == KN_OK;
        double d = ok ? max_diff_scaled(ctx, got, want, &same) : INFINITY;
        CHECK_MSG(ok && same && d < 1e-5, "plan on %s: %s, max diff %g", st.backend, kn_last_error(ctx), d);
        if (strcmp(st.backend, "interp") != 0)
            CHECK_MSG(st.arena_bytes == 2 * 64 * 64 * sizeof(float),
                      "plan on %s: an arena of %zu bytes for 5 intermediates of 16 KiB, 2 live at once", st.backend,
                      st.arena_bytes);
        program_free(p);
        graph_free(g);
        kn_scope_end(ctx);
    }
}

/* Groups (compile.c, lower_group): pointwise kernels of one shape that read
 * the same buffers run as one kernel with a store per node. Each case builds
 * outputs with the body, compiles them on tcc and c, and checks each output
 * against eager and the program's kernel count. */
typedef int (*GroupBody)(kn_ctx *ctx, kn_tensor *const *in, kn_tensor **out); /* outputs made */

/* a 0-d f32 constant (a full node, a literal in the kernel; a scalar would be an input buffer) */
static kn_tensor *cf(kn_ctx *ctx, double v) { return kn_full(ctx, KN_F32, 0, NULL, v); }

/* Adam's update of one weight: the moments and the weight read the gradient (and the moments), so one
 * kernel of three stores; the moments' values are computed once there, not again for the weight. */
static int adam_body(kn_ctx *ctx, kn_tensor *const *in, kn_tensor **out)
{
    kn_tensor *g = in[0], *m = in[1], *v = in[2], *p = in[3];
    out[0] = kn_add(ctx, kn_mul(ctx, m, cf(ctx, 0.9)), kn_mul(ctx, g, cf(ctx, 0.1)));
    out[1] = kn_add(ctx, kn_mul(ctx, v, cf(ctx, 0.999)), kn_mul(ctx, kn_mul(ctx, g, g), cf(ctx, 0.001)));
    out[2] = kn_sub(ctx, p, kn_div(ctx, kn_mul(ctx, out[0], cf(ctx, 0.01)),
                                   kn_add(ctx, kn_sqrt(ctx, out[1]), cf(ctx, 1e-8))));
    return 3;
}

/* Adam with its bias correction: a scalar of the step count (in[5]'s first element here), made after the
 * moments' kernel is traced; it moves up (compile.c, hoist_scalars), so the weight's update still joins
 * the moments' group: two kernels */
static int corrected_body(kn_ctx *ctx, kn_tensor *const *in, kn_tensor **out)
{
    kn_tensor *g = in[0], *m = in[1], *v = in[2], *p = in[3];
    out[0] = kn_add(ctx, kn_mul(ctx, m, cf(ctx, 0.9)), kn_mul(ctx, g, cf(ctx, 0.1)));
    out[1] = kn_add(ctx, kn_mul(ctx, v, cf(ctx, 0.999)), kn_mul(ctx, kn_mul(ctx, g, g), cf(ctx, 0.001)));
    kn_tensor *t = kn_add(ctx, kn_to(ctx, kn_narrow(ctx, in[5], 0, 0, 1), KN_F32), cf(ctx, 1));
    kn_tensor *lr = kn_div(ctx, cf(ctx, 0.01), kn_sub(ctx, cf(ctx, 1), kn_pow(ctx, cf(ctx, 0.9), t)));
    out[2] = kn_sub(ctx, p, kn_div(ctx, kn_mul(ctx, out[0], lr), kn_add(ctx, kn_sqrt(ctx, out[1]), cf(ctx, 1e-8))));
    return 3;
}

/* batch norm's affine and ReLU: each later node reads the one before at its own element */
static int chain_body(kn_ctx *ctx, kn_tensor *const *in, kn_tensor **out)
{
    out[0] = kn_add(ctx, kn_mul(ctx, in[0], in[1]), cf(ctx, 0.25));
    out[1] = kn_relu(ctx, out[0]);
    out[2] = kn_to(ctx, kn_gt(ctx, out[0], cf(ctx, 0.4375)), KN_F32);
    return 3;
}

/* b reads a transposed (another element of a): two kernels */
static int transposed_body(kn_ctx *ctx, kn_tensor *const *in, kn_tensor **out)
{
    out[0] = kn_mul(ctx, in[4], cf(ctx, 2));
    out[1] = kn_add(ctx, kn_transpose(ctx, out[0], 0, 1), in[4]);
    return 2;
}

/* a reads a square x transposed (13 elements apart along its innermost loop), b reads a at its element:
 * kept apart, so b's loop stays one that a target vectorises (two kernels) */
static int strided_body(kn_ctx *ctx, kn_tensor *const *in, kn_tensor **out)
{
    kn_tensor *sq = kn_contiguous(ctx, kn_transpose(ctx, in[4], 0, 1));
    out[0] = kn_mul(ctx, kn_transpose(ctx, sq, 0, 1), cf(ctx, 2));
    out[1] = kn_add(ctx, kn_mul(ctx, out[0], cf(ctx, 0.5)), sq);
    return 2;
}

/* c reads x and a sum written after a's kernel: c cannot move up into a's, so three kernels */
static int after_sum_body(kn_ctx *ctx, kn_tensor *const *in, kn_tensor **out)
{
    out[0] = kn_mul(ctx, in[0], cf(ctx, 3));
    out[1] = kn_sum(ctx, in[0], (int[]){1}, 1, 1);
    out[2] = kn_sub(ctx, in[0], out[1]);
    return 3;
}

/* output_code lines: how many times each needle occurs in them */
typedef struct {
    const char *needle[2];
    int n[2];
} Needles;

static void count_needles(void *user, const char *line)
{
    Needles *nd = user;
    for (int i = 0; i < 2; i++)
        for (const char *q = line; nd->needle[i] && (q = strstr(q, nd->needle[i])); q++) nd->n[i]++;
}

/* shared: a constant of a value that several of the group's stores use; single: one that only one of them
 * uses. Each copy of the loop's body in the source (the scalar dialect writes an innermost loop out a few
 * iterations at a time, then its rest) names both once if the stores share values through temporaries,
 * the first more often if each store computes its own (NULL: not checked). */
static void check_group(kn_ctx *ctx, const char *what, GroupBody body, kn_tensor *const *in, int kernels,
                        const char *shared, const char *single)
{
    for (int be = 0; be < 2; be++) {
        kn_scope_begin(ctx);
        kn_tensor *want[4], *y[4], *got[4] = {NULL, NULL, NULL, NULL};
        int n = body(ctx, in, want);
        ctx->trace = graph_new(ctx);
        body(ctx, in, y);
        Graph *g = ctx->trace;
        ctx->trace = NULL;
        uint32_t outs[4] = {0, 0, 0, 0};
        for (int i = 0; i < n; i++) outs[i] = y[i] ? y[i]->node : 0;
        CompileOpts o = {be ? BACKEND_C : BACKEND_TCC, KN_MODE_DEFAULT, 0, NULL};
        Needles nd = {{shared, single}, {0, 0}};
        kn_set_log(ctx, count_needles, &nd);
        kn_set_logs(ctx, "output_code");
        Program *p = compile_graph(ctx, g, outs, n, &o);
        kn_set_logs(ctx, "");
        kn_set_log(ctx, NULL, NULL);
        ProgramStats ps = {0, 0, 0, 0, "?", 0, 0, 0, 0, 0};
        if (p) program_stats(p, &ps);
        if (shared && strcmp(ps.backend, "interp") != 0)
            CHECK_MSG(nd.n[1] > 0 && nd.n[0] == nd.n[1], "group %s on %s: %s occurs %d times in the source, %s %d",
                      what, ps.backend, shared, nd.n[0], single, nd.n[1]);
        for (int r = 0; r < 2 && p; r++) { /* twice: the second run's outputs reuse the first's storage */
            int ok = program_run(p, g->input_vals, (int)g->ninputs, got) == KN_OK;
            for (int i = 0; i < n; i++) {
                int same = 0;
                double d = ok ? max_diff_scaled(ctx, got[i], want[i], &same) : INFINITY;
                CHECK_MSG(same && d < 1e-6, "group %s on %s, output %d: %s, max diff over max %g", what, ps.backend, i,
                          kn_last_error(ctx), d);
            }
        }
        if (strcmp(ps.backend, "interp") != 0)
            CHECK_MSG(ps.kernels == kernels, "group %s on %s: %d kernels, expected %d", what, ps.backend, ps.kernels,
                      kernels);
        program_free(p);
        graph_free(g);
        kn_scope_end(ctx);
    }
}

static void test_groups(kn_ctx *ctx)
{
    int64_t s[2] = {7, 37}, sq[2] = {13, 13};
    int64_t ni[1] = {4}, steps[4] = {3, 0, 0, 0};
    kn_tensor *in[6];
    for (int i = 0; i < 4; i++) in[i] = kn_randn(ctx, KN_F32, 2, s);
    in[2] = kn_abs(ctx, in[2]); /* v >= 0 */
    in[4] = kn_transpose(ctx, kn_randn(ctx, KN_F32, 2, sq), 0, 1); /* a view: not contiguous */
    in[5] = kn_tensor_from(ctx, KN_I64, 1, ni, steps);
    check_group(ctx, "adam", adam_body, in, 1, "0.999f", "0.01f"); /* the second moment's, used by the weight's */
    check_group(ctx, "chain", chain_body, in, 1, "0.25f", "0.4375f");
    check_group(ctx, "corrected", corrected_body, in, 2, NULL, NULL);
    check_group(ctx, "transposed", transposed_body, in, 2, NULL, NULL);
    check_group(ctx, "strided", strided_body, in, 2, NULL, NULL);
    check_group(ctx, "after a sum", after_sum_body, in, 3, NULL, NULL);
}

/* Outputs in place (CompileOpts.donate): the caller names, for an output, the
 * input whose value it replaces; the program stores it over that input
 * where nothing can tell, and the output is then a view of the input's
 * storage holding the new values. Each case lists its donations and how
 * many the program takes. */
typedef struct {
    const char *what;
    GroupBody body;
    int donate[4]; /* per output: the in[] index it replaces, or -1 */
    int want;      /* outputs written in place */
} DonateCase;

/* o = u + u^T, a square u read at another element than the one written: not in place */
static int transpose_body(kn_ctx *ctx, kn_tensor *const *in, kn_tensor **out)
{
    out[0] = kn_add(ctx, in[4], kn_transpose(ctx, in[4], 0, 1));
    return 1;
}

/* u * 2, then u read again by a later kernel (a sum over its rows): not in place */
static int read_after_body(kn_ctx *ctx, kn_tensor *const *in, kn_tensor **out)
{
    out[0] = kn_mul(ctx, in[0], cf(ctx, 2));
    out[1] = kn_sum(ctx, kn_exp(ctx, in[0]), (int[]){1}, 1, 0);
    return 2;
}

/* u * 2 and a gather after it, which may fail with an index out of range: not in place */
static int fail_after_body(kn_ctx *ctx, kn_tensor *const *in, kn_tensor **out)
{
    out[0] = kn_mul(ctx, in[1], cf(ctx, 2));
    out[1] = kn_index_select(ctx, kn_exp(ctx, in[0]), 0, in[5]);
    return 2;
}

static void test_donate(kn_ctx *ctx)
{
    static const DonateCase cases[] = {
        {"adam", adam_body, {1, 2, 3, -1}, 3}, /* the weight's store first: it reads both moments */
        {"chain", chain_body, {0, -1, -1, -1}, 1},
        {"transposed", transpose_body, {4, -1, -1, -1}, 0},
        {"read after", read_after_body, {0, -1, -1, -1}, 0},
        {"fail after", fail_after_body, {1, -1, -1, -1}, 0},
    };
    int64_t s[2] = {7, 37}, sq[2] = {13, 13}, ni[1] = {4}, rows[4] = {6, 0, 3, 3};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int be = 0; be < 2; be++) {
            const DonateCase *dc = &cases[c];
            kn_scope_begin(ctx);
            kn_tensor *in[6], *want[4], *y[4], *got[4] = {NULL, NULL, NULL, NULL};
            for (int i = 0; i < 4; i++) in[i] = kn_randn(ctx, KN_F32, 2, s);
            in[2] = kn_abs(ctx, in[2]);
            in[4] = kn_randn(ctx, KN_F32, 2, sq);
            in[5] = kn_tensor_from(ctx, KN_I64, 1, ni, rows);
            int n = dc->body(ctx, in, want);
            ctx->trace = graph_new(ctx);
            dc->body(ctx, in, y);
            Graph *g = ctx->trace;
            ctx->trace = NULL;
            uint32_t outs[4] = {0, 0, 0, 0};
            int donate[4] = {-1, -1, -1, -1};
            for (int i = 0; i < n; i++) {
                outs[i] = y[i] ? y[i]->node : 0;
                for (uint32_t k = 0; dc->donate[i] >= 0 && k < g->ninputs; k++)
                    if (g->input_vals[k] == in[dc->donate[i]]) donate[i] = (int)k;
            }
            CompileOpts o = {be ? BACKEND_C : BACKEND_TCC, KN_MODE_DEFAULT, 0, donate};
            Program *p = compile_graph(ctx, g, outs, n, &o);
            ProgramStats ps = {0, 0, 0, 0, "?", 0, 0, 0, 0, 0};
            if (p) {
                program_stats(p, &ps);
                program_set_reuse(p, PROGRAM_POOL);
            }
            int ok = p && program_run(p, g->input_vals, (int)g->ninputs, got) == KN_OK, nplaced = 0;
            for (int i = 0; i < n; i++) {
                int same = 0;
                double d = ok ? max_diff_scaled(ctx, got[i], want[i], &same) : INFINITY;
                int placed = ok && got[i] && dc->donate[i] >= 0 && got[i]->st == in[dc->donate[i]]->st;
                CHECK_MSG(same && d < 1e-6, "in place, %s on %s, output %d: %s, max diff over max %g", dc->what,
                          ps.backend, i, kn_last_error(ctx), d);
                if (placed) CHECK(max_diff_scaled(ctx, in[dc->donate[i]], want[i], &same) < 1e-6);
                nplaced += placed;
            }
            if (strcmp(ps.backend, "interp") != 0)
                CHECK_MSG(ps.in_place == dc->want && nplaced == dc->want, "in place, %s on %s: %d outputs (%d run so), "
                          "expected %d", dc->what, ps.backend, ps.in_place, nplaced, dc->want);
            program_free(p);
            graph_free(g);
            kn_scope_end(ctx);
        }
}

/* KILN_LOGS=perf profiles a program's runs but the first: a total line
 * with the runs and steps, then the steps of each kind (dots, loop kernels)
 * by their time, slowest first, the dot under its unit's name (a matmul, a
 * tanh, a sum: 1 dot among them). A program the interpreter runs (no
 * compiler: the wasm leg) logs none. */
typedef struct {
    int runs, nsteps, steps, dot, sorted, lastdot;
    double last;
} Profile;

static void read_profile(void *user, const char *line)
{
    Profile *pr = user;
    const char *q = strstr(line, "profile: ");
    if (!q) return;
    q += 9;
    int runs, steps;
    if (sscanf(q, "%d runs, %*f ms a run in %d steps", &runs, &steps) == 2) {
        pr->runs = runs, pr->nsteps = steps;
        return;
    }
    double ms;
    char kind[16];
    if (sscanf(q, "%15s", kind) != 1) return;
    int dot = !strcmp(kind, "dots");
    q += strlen(kind) + strspn(q + strlen(kind), " ");
    if (!dot && !strncmp(q, "kernels ", 8)) q += 8 + strspn(q + 8, " "); /* "loop kernels" */
    if (sscanf(q, "%lf ms", &ms) != 1) return;
    pr->sorted &= pr->steps == 0 || dot != pr->lastdot || ms <= pr->last; /* each kind slowest first */
    pr->last = ms, pr->lastdot = dot;
    pr->steps++;
    pr->dot += dot && strstr(q, "_dot") != NULL;
}

static void test_profile(kn_ctx *ctx)
{
    int64_t xs[2] = {9, 13}, ws[2] = {13, 6};
    kn_tensor *x = kn_randn(ctx, KN_F32, 2, xs), *w = kn_randn(ctx, KN_F32, 2, ws);
    for (int be = 0; be < 2; be++) {
        kn_scope_begin(ctx);
        ctx->trace = graph_new(ctx);
        kn_tensor *y = kn_sum(ctx, kn_tanh(ctx, kn_matmul(ctx, x, w)), (int[]){0}, 1, 0);
        Graph *g = ctx->trace;
        ctx->trace = NULL;
        Profile pr = {0, 0, 0, 0, 1, 0, 0};
        kn_set_log(ctx, read_profile, &pr);
        kn_set_logs(ctx, "perf");
        CompileOpts o = {be ? BACKEND_C : BACKEND_TCC, KN_MODE_DEFAULT, 0, NULL};
        Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
        ProgramStats st = {0, 0, 0, 0, "?", 0, 0, 0, 0, 0};
        if (p) program_stats(p, &st);
        kn_tensor *got = NULL;
        for (int r = 0; r < 3 && p; r++) CHECK(program_run(p, g->input_vals, (int)g->ninputs, &got) == KN_OK);
        program_free(p); /* logs the profile */
        kn_set_logs(ctx, "");
        kn_set_log(ctx, NULL, NULL);
        if (!strcmp(st.backend, "interp")) /* no compiler (the wasm leg): nothing to profile, nothing logged */
            CHECK_MSG(pr.runs == 0 && pr.steps == 0, "interp: a profile of %d runs, %d step lines", pr.runs, pr.steps);
        else CHECK_MSG(pr.runs == 2 && pr.nsteps == st.kernels && pr.steps == st.kernels && pr.dot == 1 && pr.sorted,
                  "%s: a profile of %d runs (2 expected) and %d steps (%d kernels), %d step lines (%d dots), sorted %d",
                  st.backend, pr.runs, pr.nsteps, st.kernels, pr.steps, pr.dot, pr.sorted);
        graph_free(g);
        kn_scope_end(ctx);
    }
}

/* A convolution is implicit GEMM: the dot template packs its windows
 * straight from the input, so the planned arena holds no im2col buffer
 * (N, C*KH*KW, OH*OW), and the result equals eager's. */
static void test_conv_window(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, int pad, int wino)
{
    kn_conv_opts co = {{1, 1}, {pad, pad}, {1, 1}, {0, 0}, 1};
    int64_t oh = x->shape[2] + 2 * pad - 2, ow = x->shape[3] + 2 * pad - 2;
    size_t cols = (size_t)(x->shape[0] * x->shape[1] * 9 * oh * ow) * kn_dtype_size((kn_dtype)x->dtype);
    for (int be = 0; be < 2; be++) {
        kn_scope_begin(ctx);
        kn_tensor *want = kn_conv2d(ctx, x, w, NULL, &co);
        ctx->trace = graph_new(ctx);
        kn_tensor *y = kn_conv2d(ctx, x, w, NULL, &co);
        Graph *g = ctx->trace;
        ctx->trace = NULL;
        CompileOpts o = {be ? BACKEND_C : BACKEND_TCC, KN_MODE_DEFAULT, 0, NULL};
        Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
        kn_tensor *got = NULL;
        int same = 0;
        double d = p && program_run(p, g->input_vals, (int)g->ninputs, &got) == KN_OK
                       ? max_diff_scaled(ctx, got, want, &same)
                       : INFINITY;
        ProgramStats st = {0, 0, 0, 0, "?", 0, 0, 0, 0, 0};
        if (p) program_stats(p, &st);
        CHECK_MSG(same && d < 2e-5, "conv window x (%lld, %lld, %lld, %lld) pad %d on %s: %s, max diff over max %g",
                  (long long)x->shape[0], (long long)x->shape[1], (long long)x->shape[2], (long long)x->shape[3], pad,
                  st.backend, kn_last_error(ctx), d);
        if (strcmp(st.backend, "interp") != 0) {
            CHECK_MSG(st.arena_bytes < cols, "conv on %s: arena %zu bytes holds an im2col buffer (%zu bytes)", st.backend,
                      st.arena_bytes, cols);
            CHECK_MSG(st.wino == wino, "conv on %s: %d dots by Winograd, want %d", st.backend, st.wino, wino);
        }
        program_free(p);
        graph_free(g);
        kn_scope_end(ctx);
    }
}

/* A stride-1 convolution's backward (decomp_conv.c's conv_vjp): x's gradient
 * is the transposed convolution of the output's, an implicit GEMM like the
 * forward, so the step's arena holds no columns' gradient (C*KH*KW,
 * N*OH*OW); both gradients equal eager's. */
typedef struct {
    kn_tensor *x, *w, *r;
} ConvGrad;

static kn_status conv_grad_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    ConvGrad *cg = user;
    kn_conv_opts co = {{1, 1}, {1, 1}, {1, 1}, {0, 0}, 1};
    kn_tensor *params[2] = {cg->x, cg->w};
    (void)in, (void)nin, (void)nout;
    kn_zero_grad(ctx, params, 2);
    kn_tensor *loss = kn_sum(ctx, kn_mul(ctx, kn_conv2d(ctx, cg->x, cg->w, NULL, &co), cg->r), NULL, 0, 0);
    if (!loss || kn_backward(ctx, loss, 0) != KN_OK) return kn_last_status(ctx);
    out[0] = kn_grad(ctx, cg->x), out[1] = kn_grad(ctx, cg->w);
    return out[0] && out[1] ? KN_OK : kn_last_status(ctx);
}

static void test_conv_backward_window(kn_ctx *ctx, kn_tensor *x, kn_tensor *w)
{
    size_t cols = (size_t)(x->shape[1] * 9 * x->shape[0] * x->shape[2] * x->shape[3]) * sizeof(float);
    int64_t sr[4] = {x->shape[0], w->shape[0], x->shape[2], x->shape[3]};
    ConvGrad cg = {kn_param(ctx, kn_add(ctx, x, kn_scalar(ctx, 0))), kn_param(ctx, kn_add(ctx, w, kn_scalar(ctx, 0))),
                   kn_keep(ctx, kn_randn(ctx, KN_F32, 4, sr))};
    kn_tensor *want[2] = {NULL, NULL};
    CHECK(conv_grad_body(ctx, &cg, NULL, 0, want, 2) == KN_OK);
    for (int i = 0; i < 2; i++) want[i] = kn_keep(ctx, kn_add(ctx, want[i], kn_scalar(ctx, 0))); /* a copy */
    static const kn_backend bes[2] = {KN_BACKEND_TCC, KN_BACKEND_C};
    for (int be = 0; be < 2; be++) {
        kn_tensor *params[2] = {cg.x, cg.w}, *got[2] = {NULL, NULL};
        kn_compile_opts o = {.backend = bes[be], .params = params, .nparams = 2};
        kn_fn *f = kn_compile(ctx, conv_grad_body, &cg, &o);
        kn_scope_begin(ctx);
        int ok = kn_call(f, NULL, 0, got, 2) == KN_OK;
        kn_fn_info info;
        memset(&info, 0, sizeof info);
        if (f) kn_fn_stats(f, &info);
        for (int i = 0; i < 2; i++) {
            int same = 0;
            double d = ok ? max_diff_scaled(ctx, got[i], want[i], &same) : INFINITY;
            CHECK_MSG(same && d < 2e-5, "conv backward on %s, gradient %d: %s, max diff over max %g",
                      info.backend ? info.backend : "?", i, kn_last_error(ctx), d);
        }
        if (info.backend && strcmp(info.backend, "interp") != 0)
            CHECK_MSG(info.arena_bytes < cols, "conv backward on %s: arena %zu bytes holds a columns' gradient (%zu bytes)",
                      info.backend, info.arena_bytes, cols);
        kn_scope_end(ctx);
        kn_fn_free(f);
    }
    for (int i = 0; i < 2; i++) kn_free(ctx, want[i]);
    kn_free(ctx, cg.x), kn_free(ctx, cg.w), kn_free(ctx, cg.r);
}

/* Convolutions that Winograd F(2x2, 3x3) computes on backend c (compile.c's wino_pays: 3x3, stride
 * 1, >= 32 channels, >= 256 columns): odd output sizes (partial tiles), padding 1 and 0, channels
 * not multiples of a vector, batch 3 and 1, f64; each equal to eager's (the direct product), one
 * Winograd dot each (a program of few columns has none); the backward of one, whose input gradient
 * is such a convolution too (of the output's gradient, 37 -> 35 channels), equal to eager's. */
static void test_conv_winograd(kn_ctx *ctx)
{
    static const int64_t cases[][9] = {
        /* x (n, c, h, w), channels out, padding, f64, dots by Winograd */
        {3, 35, 19, 21, 37, 1, 0, 1},
        {1, 33, 35, 35, 34, 0, 0, 1},
        {3, 32, 17, 21, 33, 1, 1, 1},
        {1, 40, 13, 15, 40, 1, 0, 0}, /* 195 columns: directly */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const int64_t *c = cases[i];
        int64_t sx[4] = {c[0], c[1], c[2], c[3]}, sw[4] = {c[4], c[1], 3, 3};
        kn_dtype dt = c[6] ? KN_F64 : KN_F32;
        kn_scope_begin(ctx);
        test_conv_window(ctx, kn_randn(ctx, dt, 4, sx), kn_randn(ctx, dt, 4, sw), (int)c[5], (int)c[7]);
        kn_scope_end(ctx);
    }
    int64_t sx[4] = {3, 35, 19, 21}, sw[4] = {37, 35, 3, 3};
    kn_scope_begin(ctx);
    test_conv_backward_window(ctx, kn_randn(ctx, KN_F32, 4, sx), kn_randn(ctx, KN_F32, 4, sw));
    kn_scope_end(ctx);
}

/* The program cache (backends c and tcc): in a fresh $KILN_CACHE_DIR a program (a dot
 * with its epilogue, loop kernels, a gather with its index check) is compiled,
 * then taken from its entry, equal to eager both times; an entry that is
 * corrupt (a flipped byte), truncated, of another key, or whole by its
 * checksum but with a field out of range is never trusted: the program is
 * compiled afresh, still equal, and the entry written again. */
#if defined(__unix__) && !defined(__wasi__)
/* A dot with epilogues, a softmax, an embedding (its gather is a kernel with
 * an index check) and a strided convolution (a dot reading its windows). */
static kn_tensor *c_cached(kn_ctx *c, kn_tensor *const *in)
{
    int one = 1;
    kn_conv_opts co = {{2, 1}, {1, 0}, {1, 1}, {0, 0}, 1};
    kn_tensor *e = kn_sum(c, kn_embedding(c, in[1], in[7]), &one, 1, 1); /* (7, 1) */
    kn_tensor *conv = kn_sum(c, kn_square(c, kn_conv2d(c, in[4], in[5], NULL, &co)), NULL, 0, 0); /* () */
    return kn_add(c, kn_add(c, kn_softmax(c, kn_gelu(c, kn_linear(c, in[0], in[1], in[3]), 1), 1), e), conv);
}

/* The one .prog file in dir (its path in path), read into *data. */
static int read_prog(const char *dir, char *path, size_t cap, unsigned char **data, size_t *size)
{
    DIR *dd = opendir(dir);
    int found = 0;
    for (struct dirent *e; dd && (e = readdir(dd));)
        if (strstr(e->d_name, ".prog")) snprintf(path, cap, "%s/%s", dir, e->d_name), found++;
    if (dd) closedir(dd);
    char why[256];
    return found == 1 && port_read_file(path, (void **)data, size, why) == 0;
}

/* One compile and run of c_cached: whether it came from the cache (-1: failed). */
static int cached_pass(kn_ctx *ctx, CompileBackend be, kn_tensor *const *in, kn_tensor *want, const char *what)
{
    kn_scope_begin(ctx);
    ctx->trace = graph_new(ctx);
    kn_tensor *y = c_cached(ctx, in);
    Graph *g = ctx->trace;
    ctx->trace = NULL;
    CompileOpts o = {be, KN_MODE_DEFAULT, 0, NULL};
    Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
    kn_tensor *got = NULL;
    ProgramStats st = {0, 0, 0, 0, "?", 0, 0, 0, 0, 0};
    if (p) program_stats(p, &st);
    int same = 0;
    double d = p && program_run(p, g->input_vals, (int)g->ninputs, &got) == KN_OK ? max_diff(ctx, got, want, &same)
                                                                                  : INFINITY;
    const char *bn = be == BACKEND_C ? "c" : "tcc";
    CHECK_MSG(same && d < 2e-5, "program cache, %s, %s: %s, max rel diff %g", bn, what, kn_last_error(ctx), d);
    CHECK_MSG(st.interp_steps == 0 && st.kernels >= 2 && !strcmp(st.backend, bn), "program cache, %s, %s: %d "
              "kernels, %d on the interpreter, backend %s", bn, what, st.kernels, st.interp_steps, st.backend);
    kn_clear_error(ctx);
    program_free(p);
    graph_free(g);
    kn_scope_end(ctx);
    return p ? st.from_cache : -1;
}
#endif

static void test_program_cache(kn_ctx *ctx, kn_tensor *const *in)
{
#if defined(__unix__) && !defined(__wasi__)
    for (int b = 0; b < 2; b++) {
        CompileBackend be = b ? BACKEND_TCC : BACKEND_C;
        if (!port_jit_available(b ? PORT_TCC : PORT_CC)) continue;
        char dir[] = "/tmp/kiln-test-progcache-XXXXXX", path[512], why[256];
        char *saved;
        if (!cache_dir_begin(dir, &saved)) return;
        kn_scope_begin(ctx);
        kn_tensor *want = c_cached(ctx, in);
        CHECK(cached_pass(ctx, be, in, want, "cold") == 0);
        CHECK(cached_pass(ctx, be, in, want, "warm") == 1);
        unsigned char *data = NULL;
        size_t size = 0;
        CHECK(read_prog(dir, path, sizeof path, &data, &size) && size > 64);
        for (int bad = 0; bad < 4 && data; bad++) {
            unsigned char *d = malloc(size);
            size_t n = size;
            memcpy(d, data, size);
            if (bad == 0) d[size / 2] ^= 0x40;                 /* corrupt: the checksum disagrees */
            if (bad == 1) n = size / 3;                        /* truncated */
            if (bad == 2) d[8] ^= 1;                           /* another key */
            if (bad == 3) {                                    /* whole, but the first step's node out of range */
                uint64_t v = 0xffffffffull, sum;
                size_t at = 32 + 8 * 3;
                uint64_t nodes = 0;
                for (int i = 0; i < 8; i++) nodes |= (uint64_t)d[32 + i] << 8 * i;
                at += 8 * (size_t)nodes + 8; /* past the offsets and the step count */
                for (int i = 0; i < 8; i++) d[at + i] = (unsigned char)(v >> 8 * i);
                sum = kn_hash(d + 32, size - 32); /* the checksum of the changed body */
                for (int i = 0; i < 8; i++) d[24 + i] = (unsigned char)(sum >> 8 * i);
            }
            CHECK(port_write_file(path, d, n, why) == 0);
            CHECK_MSG(cached_pass(ctx, be, in, want, "a bad entry") == 0, "bad entry %d trusted (%s)", bad, b ? "tcc" : "c");
            CHECK_MSG(cached_pass(ctx, be, in, want, "rewritten") == 1, "bad entry %d not rewritten (%s)", bad,
                      b ? "tcc" : "c");
            free(d);
        }
        free(data);
        kn_scope_end(ctx);
        cache_dir_end(dir, saved);
    }
#else
    (void)ctx;
    (void)in;
#endif
}

/* Rows with special values through softmax (dim 1), log_softmax (dim 1),
 * layer_norm and amax (dim 1) of a (9, 1000) tensor, compiled against eager
 * (a NaN where eager has one, infinities equal, else within 2e-5): a row
 * with a NaN (+NaN in a vector group, -NaN first, a NaN in the tail: the
 * row's max redoes its lanes), -inf entries (0 in softmax), all -inf and a
 * +inf (NaN rows, as torch), a max of -0 and +0, and magnitudes of 1e30. */
static void test_specials(kn_ctx *ctx, CompileBackend backend)
{
    enum { R = 9, C = 1000 };
    static float v[R * C];
    uint32_t mnan = 0xffc00000u;
    for (int i = 0; i < R * C; i++) v[i] = (float)((i * 7919 % 2003) - 1001) / 250.0f;
    v[1 * C + 517] = NAN;
    memcpy(&v[2 * C + 0], &mnan, 4), v[2 * C + 600] = NAN;
    v[3 * C + 0] = v[3 * C + 100] = v[3 * C + 999] = -INFINITY;
    for (int c = 0; c < C; c++) v[4 * C + c] = -INFINITY;
    v[5 * C + 40] = INFINITY;
    for (int c = 0; c < C; c++) v[6 * C + c] = -1.0f - (float)c;
    v[6 * C + 5] = -0.0f, v[6 * C + 700] = 0.0f;
    for (int c = 0; c < C; c++) v[7 * C + c] *= 1e29f;
    v[8 * C + 997] = NAN;
    int64_t shape[2] = {R, C}, d = C;
    int dim = 1;
    for (int k = 0; k < 4; k++) {
        kn_scope_begin(ctx);
        kn_tensor *x = kn_tensor_from(ctx, KN_F32, 2, shape, v), *y = NULL, *want = NULL;
        for (int pass = 0; pass < 2; pass++) {
            if (pass) ctx->trace = graph_new(ctx);
            kn_tensor *r = k == 0   ? kn_softmax(ctx, x, 1)
                           : k == 1 ? kn_log_softmax(ctx, x, 1)
                           : k == 2 ? kn_layer_norm(ctx, x, 1, &d, NULL, NULL, 1e-5)
                                    : kn_amax(ctx, x, &dim, 1, 0);
            if (pass) y = r;
            else want = r;
        }
        Graph *g = ctx->trace;
        ctx->trace = NULL;
        CompileOpts o = {backend, KN_MODE_DEFAULT, 0, NULL};
        Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
        kn_tensor *got = NULL;
        int ok = p && program_run(p, g->input_vals, (int)g->ninputs, &got) == KN_OK && want &&
                 kn_numel(got) == kn_numel(want);
        int64_t bad = -1, n = ok ? kn_numel(want) : 0;
        kn_tensor *a = ok ? kn_to(ctx, got, KN_F64) : NULL, *b = ok ? kn_to(ctx, want, KN_F64) : NULL;
        for (int64_t i = 0; a && b && i < n && bad < 0; i++) {
            double u = dt_load(KN_F64, tensor_ptr(a, a->offset + i)), w = dt_load(KN_F64, tensor_ptr(b, b->offset + i));
            int same = w != w ? u != u : isinf(w) ? u == w : fabs(u - w) <= 1e-6 + 2e-5 * fabs(w);
            if (!same) bad = i;
        }
        CHECK_MSG(ok && bad < 0, "specials case %d on %s: %s; first differing element %lld", k,
                  backend == BACKEND_TCC ? "tcc" : "c", ok ? "ran" : kn_last_error(ctx), (long long)bad);
        kn_clear_error(ctx);
        program_free(p);
        graph_free(g);
        kn_scope_end(ctx);
    }
}

int main(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t s7x13[2] = {7, 13}, s13x7[2] = {13, 7}, s5x26[2] = {5, 26}, s7 = 7, s5 = 5;
    int64_t sx[4] = {2, 3, 9, 11}, sw[4] = {4, 3, 3, 3};
    int64_t cls[7] = {0, 3, 12, 5, 5, 1, 9}, rows[7] = {0, 3, 4, 2, 2, 1, 4};
    kn_tensor *in[MAXIN];
    in[0] = kn_randn(ctx, KN_F32, 2, s7x13);                                  /* x (7, 13) */
    in[1] = kn_slice(ctx, kn_randn(ctx, KN_F32, 2, s5x26), 1, 0, 26, 2);      /* w (5, 13), strided */
    in[2] = kn_tensor_from(ctx, KN_I64, 1, &s7, cls);                         /* classes of 13 */
    in[3] = kn_randn(ctx, KN_F32, 1, &s5);                                    /* bias (5) */
    in[4] = kn_randn(ctx, KN_F32, 4, sx);                                     /* image (2, 3, 9, 11) */
    in[5] = kn_randn(ctx, KN_F32, 4, sw);                                     /* filters (4, 3, 3, 3) */
    in[6] = kn_transpose(ctx, kn_randn(ctx, KN_F32, 2, s13x7), 0, 1);         /* (7, 13), transposed */
    in[7] = kn_tensor_from(ctx, KN_I64, 1, &s7, rows);                        /* rows of 5 */
    if (!port_jit_available(PORT_TCC) || !port_jit_available(PORT_CC))
        printf("SKIP compile: a JIT is missing on this platform (%s): programs run on the interpreter\n", port_name());
    test_shared_dots(ctx);
    test_shared_kernels(ctx);
    test_profile(ctx);
    test_plan(ctx);
    test_epilogue_loops(ctx);
    test_groups(ctx);
    test_donate(ctx);
    test_program_cache(ctx, in);
    test_conv_window(ctx, in[4], in[5], 1, 0);
    test_conv_backward_window(ctx, in[4], in[5]);
    test_conv_winograd(ctx);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        run_case(ctx, (int)c, BACKEND_TCC, in, MAXIN);
        run_case(ctx, (int)c, BACKEND_C, in, MAXIN);
    }
    /* the same shapes' roles, large: rows of 1031 (not a multiple of any width) */
    int64_t b7[2] = {67, 1031}, b13x7[2] = {1031, 67}, b5x26[2] = {5, 2062}, bx[4] = {2, 3, 61, 67};
    int64_t bcls[67], brows[67], b67 = 67;
    for (int i = 0; i < 67; i++) bcls[i] = (i * 37) % 1031, brows[i] = i % 5;
    kn_tensor *big[MAXIN];
    big[0] = kn_randn(ctx, KN_F32, 2, b7);
    big[1] = kn_slice(ctx, kn_randn(ctx, KN_F32, 2, b5x26), 1, 0, 2062, 2);
    big[2] = kn_tensor_from(ctx, KN_I64, 1, &b67, bcls);
    big[3] = in[3];
    big[4] = kn_randn(ctx, KN_F32, 4, bx);
    big[5] = in[5];
    big[6] = kn_transpose(ctx, kn_randn(ctx, KN_F32, 2, b13x7), 0, 1);
    big[7] = kn_tensor_from(ctx, KN_I64, 1, &b67, brows);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        if (!strcmp(cases[c].name, "embedding") || !strcmp(cases[c].name, "where_pad"))
            continue; /* fixed sizes */
        run_threads(ctx, (int)c, BACKEND_TCC, big);
        run_threads(ctx, (int)c, BACKEND_C, big);
    }
    for (int sc = 0; sc < 2; sc++)
        for (int it = 0; it < 2; it++) {
            index_case(ctx, sc, it ? KN_I32 : KN_I64, BACKEND_TCC);
            index_case(ctx, sc, it ? KN_I32 : KN_I64, BACKEND_C);
        }
    test_specials(ctx, BACKEND_TCC);
    test_specials(ctx, BACKEND_C);
    test_autotune(ctx);
    kn_ctx_free(ctx);
    TEST_END("compile");
}
