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
static kn_tensor *c_embedding(kn_ctx *c, kn_tensor *const *in) { return kn_embedding(c, in[1], in[7]); } /* gather: interp step */
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
    kn_tensor *x = kn_to(ctx, a, KN_F64), *y = kn_to(ctx, b, KN_F64);
    for (int64_t i = 0; i < n; i++) {
        double u = dt_load(KN_F64, tensor_ptr(x, x->offset + i)), v = dt_load(KN_F64, tensor_ptr(y, y->offset + i));
        double d = fabs(u - v) / (1e-6 + fabs(v));
        if (d > worst || d != d) worst = d != d ? INFINITY : d;
    }
    return worst;
}

static void run_case(kn_ctx *ctx, int c, CompileBackend backend, kn_tensor *const *in, int nin)
{
    kn_scope_begin(ctx);
    kn_tensor *want = cases[c].f(ctx, in);
    ctx->trace = graph_new(ctx);
    kn_tensor *y = cases[c].f(ctx, in);
    Graph *g = ctx->trace;
    ctx->trace = NULL;
    CompileOpts o = {backend, KN_MODE_DEFAULT};
    Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
    kn_tensor *ins[MAXIN * 2], *got = NULL;
    int n = 0;
    for (uint32_t k = 0; k < g->ninputs; k++) ins[n++] = g->input_vals[k];
    (void)nin;
    int ok = p && program_run(p, ins, n, &got) == KN_OK;
    int same = 0;
    double d = ok ? max_diff(ctx, got, want, &same) : INFINITY;
    ProgramStats st = {0, 0, 0, 0, "?", 0, 0};
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
    CompileOpts o = {backend, KN_MODE_DEFAULT};
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

/* max-autotune: a dot with an epilogue and a row kernel are tuned (their
 * candidates timed), the program equals eager, and compiling it again finds
 * both winners remembered. In a fresh $KILN_CACHE_DIR, whose autotune.txt
 * then holds them. */
static void test_autotune(kn_ctx *ctx)
{
#if defined(__unix__) && !defined(__wasi__)
    char dir[] = "/tmp/kiln-test-autotune-XXXXXX", path[64];
    const char *old = getenv("KILN_CACHE_DIR");
    char *saved = old ? strdup(old) : NULL;
    if (!port_jit_available(PORT_CC) || !mkdtemp(dir)) return;
    setenv("KILN_CACHE_DIR", dir, 1);
    int64_t sx[2] = {67, 129}, sw[2] = {33, 129}, sb = 33;
    kn_tensor *x = kn_randn(ctx, KN_F32, 2, sx), *w = kn_randn(ctx, KN_F32, 2, sw), *b = kn_randn(ctx, KN_F32, 1, &sb);
    kn_tensor *want = kn_softmax(ctx, kn_gelu(ctx, kn_linear(ctx, x, w, b), 1), 1);
    for (int pass = 0; pass < 2; pass++) {
        kn_scope_begin(ctx);
        ctx->trace = graph_new(ctx);
        kn_tensor *y = kn_softmax(ctx, kn_gelu(ctx, kn_linear(ctx, x, w, b), 1), 1);
        Graph *g = ctx->trace;
        ctx->trace = NULL;
        CompileOpts o = {BACKEND_C, KN_MODE_MAX_AUTOTUNE};
        Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
        kn_tensor *got = NULL;
        ProgramStats st = {0, 0, 0, 0, "?", 0, 0};
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
        CompileOpts o = {be ? BACKEND_C : BACKEND_TCC, KN_MODE_DEFAULT};
        Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
        kn_set_logs(ctx, "");
        kn_set_log(ctx, NULL, NULL);
        kn_tensor *got = NULL;
        int same = 0;
        double d = p && program_run(p, g->input_vals, (int)g->ninputs, &got) == KN_OK ? max_diff(ctx, got, want, &same)
                                                                                      : INFINITY;
        ProgramStats st = {0, 0, 0, 0, "?", 0, 0};
        if (p) program_stats(p, &st);
        CHECK_MSG(same && d < 2e-5, "shared dots on %s: %s, max rel diff %g", st.backend, kn_last_error(ctx), d);
        if (strcmp(st.backend, "interp") != 0) CHECK_MSG(units == 1, "%s: %d dot units for two dots of one spec", st.backend, units);
        program_free(p);
        graph_free(g);
        kn_scope_end(ctx);
    }
}

/* A convolution is implicit GEMM: the dot template packs its windows
 * straight from the input, so the planned arena holds no im2col buffer
 * (N, C*KH*KW, OH*OW), and the result equals eager's. */
static void test_conv_window(kn_ctx *ctx, kn_tensor *x, kn_tensor *w)
{
    kn_conv_opts co = {{1, 1}, {1, 1}, {1, 1}, {0, 0}, 1};
    size_t cols = (size_t)(2 * 3 * 3 * 3 * 9 * 11) * sizeof(float); /* x (2, 3, 9, 11), w (4, 3, 3, 3) */
    for (int be = 0; be < 2; be++) {
        kn_scope_begin(ctx);
        kn_tensor *want = kn_conv2d(ctx, x, w, NULL, &co);
        ctx->trace = graph_new(ctx);
        kn_tensor *y = kn_conv2d(ctx, x, w, NULL, &co);
        Graph *g = ctx->trace;
        ctx->trace = NULL;
        CompileOpts o = {be ? BACKEND_C : BACKEND_TCC, KN_MODE_DEFAULT};
        Program *p = y ? compile_graph(ctx, g, &y->node, 1, &o) : NULL;
        kn_tensor *got = NULL;
        int same = 0;
        double d = p && program_run(p, g->input_vals, (int)g->ninputs, &got) == KN_OK ? max_diff(ctx, got, want, &same)
                                                                                      : INFINITY;
        ProgramStats st = {0, 0, 0, 0, "?", 0, 0};
        if (p) program_stats(p, &st);
        CHECK_MSG(same && d < 2e-5, "conv window on %s: %s, max rel diff %g", st.backend, kn_last_error(ctx), d);
        if (strcmp(st.backend, "interp") != 0)
            CHECK_MSG(st.arena_bytes < cols, "conv on %s: arena %zu bytes holds an im2col buffer (%zu bytes)", st.backend,
                      st.arena_bytes, cols);
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
    test_conv_window(ctx, in[4], in[5]);
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
    test_autotune(ctx);
    kn_ctx_free(ctx);
    TEST_END("compile");
}
