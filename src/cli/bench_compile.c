/*
 * bench_compile.c — the compile-time part of `kiln bench ops` (bench.c has the method): the
 * joint forward+backward graph of an MLP 784->512->10 at batch 128 through compile_graph, and
 * the training steps of the three workloads through kn_compile, each compiled cold (a fresh
 * $KILN_CACHE_DIR) and warm (the second compile).
 */
#if (defined(__unix__) || defined(__APPLE__)) && !defined(__wasi__) && !defined(__EMSCRIPTEN__)
#define BENCH_POSIX 1
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <unistd.h>
#else
#define BENCH_POSIX 0
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_int.h"
#include "models.h"
#include "../core.h"
#include "../../port/port.h"

/* ---- compile time: the joint graph of an MLP ---- */

typedef struct {
    kn_tensor *x, *target, *p[4]; /* W1 (H, I), b1 (H), W2 (O, H), b2 (O) */
} Mlp;

static kn_tensor *mlp_loss(kn_ctx *ctx, const Mlp *m)
{
    kn_tensor *h = kn_relu(ctx, kn_linear(ctx, m->x, m->p[0], m->p[1]));
    return kn_cross_entropy(ctx, kn_linear(ctx, h, m->p[2], m->p[3]), m->target, NULL);
}

#if BENCH_POSIX
/* A fresh empty directory as $KILN_CACHE_DIR; path into dir. 0 or -1. */
static int fresh_cache(char *dir, size_t cap)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, cap, "%s/kiln-bench-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) return -1;
    return setenv("KILN_CACHE_DIR", dir, 1);
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[1024];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path)) remove_dir(path);
    }
    if (d) closedir(d);
    rmdir(dir);
}
#endif

/* max |got - want| / max |want| over the tensor */
static double tensor_err(kn_ctx *ctx, kn_tensor *got, kn_tensor *want)
{
    int64_t n = got && want ? kn_numel(want) : -1;
    if (n < 0 || kn_numel(got) != n) return INFINITY;
    float *g = malloc((size_t)(n ? n : 1) * sizeof *g), *w = malloc((size_t)(n ? n : 1) * sizeof *w);
    double d = 0, m = 0;
    if (!g || !w || kn_read(ctx, got, g, (size_t)n * sizeof *g) || kn_read(ctx, want, w, (size_t)n * sizeof *w))
        d = INFINITY;
    for (int64_t i = 0; d == 0 && i < n; i++) m = fabs(w[i]) > m ? fabs(w[i]) : m;
    for (int64_t i = 0; d != INFINITY && i < n; i++) {
        double e = fabs((double)g[i] - w[i]);
        if (!(e <= d)) d = e;
    }
    free(g);
    free(w);
    return d == INFINITY ? d : d / (m + 1e-30);
}

void bench_compile_mlp(B *b, kn_ctx *ctx)
{
    const char *S = "ops";
    int64_t I = 784, H = 512, O = 10, N = 128;
    if (b->o->smoke) I = 32, H = 16, N = 8;
    char what[96], note[320], cse[64];
    snprintf(what, sizeof what, "mlp %lld->%lld->%lld b%lld fwd+bwd", (long long)I, (long long)H, (long long)O,
             (long long)N);
    kn_scope_begin(ctx);
    Mlp m;
    int64_t sx[2] = {N, I}, s[4][2] = {{H, I}, {H, 0}, {O, H}, {O, 0}};
    int64_t *tv = malloc((size_t)N * sizeof *tv);
    for (int64_t i = 0; tv && i < N; i++) tv[i] = (i * 7) % O;
    m.x = kn_randn(ctx, KN_F32, 2, sx);
    m.target = tv ? kn_tensor_from(ctx, KN_I64, 1, &N, tv) : NULL;
    free(tv);
    for (int i = 0; i < 4; i++) {
        double bound = 1.0 / sqrt((double)(i < 2 ? I : H));
        m.p[i] = kn_param(ctx, i % 2 == 0 ? kn_kaiming_uniform(ctx, KN_F32, 2, s[i], sqrt(5.0))
                                          : kn_uniform(ctx, KN_F32, 1, s[i], -bound, bound));
    }
    /* eager reference: loss and .grad */
    kn_tensor *eloss = mlp_loss(ctx, &m);
    Graph *g = NULL;
    kn_tensor *loss = NULL, *grads[4] = {NULL, NULL, NULL, NULL};
    int ok = eloss && kn_backward(ctx, eloss, 0) == KN_OK;
    if (ok && (g = graph_new(ctx))) {
        ctx->trace = g;
        loss = mlp_loss(ctx, &m);
        ok = loss && autodiff_grads(ctx, loss, 4, m.p, grads) == KN_OK;
        ctx->trace = NULL;
        for (int i = 0; i < 4; i++) ok = ok && grads[i];
    }
    if (!ok || !g) {
        bench_report_err(b, S, "mlp-joint", "kiln", "ms", g ? kn_last_error(ctx) : "out of memory", 1);
        kn_clear_error(ctx);
        goto done;
    }
    uint32_t outs[5] = {loss->node, grads[0]->node, grads[1]->node, grads[2]->node, grads[3]->node};
#if BENCH_POSIX
    const char *old = getenv("KILN_CACHE_DIR");
    char *saved = old ? malloc(strlen(old) + 1) : NULL;
    if (saved) strcpy(saved, old);
#endif
    static const CompileBackend bes[2] = {BACKEND_TCC, BACKEND_C};
    for (int bi = 0; bi < 2; bi++) {
        CompileBackend be = bes[bi];
        const char *impl = bench_be_name(be);
        CompileOpts co;
        memset(&co, 0, sizeof co);
        co.backend = be;
        int ncold = b->o->smoke ? 1 : b->o->quick ? 2 : 3, nwarm = b->o->smoke ? 1 : 5;
        double cold[MAX_SAMPLES], warm[MAX_SAMPLES];
        char dir[512] = "";
        (void)dir;
        int bad = 0, checked = 0, kernels = 0;
        const char *ran = "?";
        double err = 0;
        for (int r = 0; r < ncold + nwarm && !bad; r++) {
#if BENCH_POSIX
            if (r < ncold) {
                if (dir[0]) remove_dir(dir);
                if (fresh_cache(dir, sizeof dir)) {
                    bench_report_err(b, S, "mlp-joint", impl, "ms", "cannot make a temporary cache directory", 1);
                    bad = 1, dir[0] = 0;
                    break;
                }
            }
#endif
            double t0 = port_now_ms();
            Program *p = compile_graph(ctx, g, outs, 5, &co);
            double t = port_now_ms() - t0;
            if (!p) {
                bench_report_err(b, S, "mlp-joint", impl, "ms", kn_last_error(ctx), 1);
                kn_clear_error(ctx);
                bad = 1;
                break;
            }
            if (r < ncold) cold[r] = t;
            else warm[r - ncold] = t;
            if (!checked) { /* the compiled step against eager: loss and every gradient */
                ProgramStats st;
                program_stats(p, &st);
                kernels = st.kernels, ran = st.backend;
                kn_tensor *got[5] = {NULL};
                kn_scope_begin(ctx);
                if (program_run(p, g->input_vals, (int)g->ninputs, got) != KN_OK) err = INFINITY;
                else {
                    err = tensor_err(ctx, got[0], eloss);
                    for (int i = 0; i < 4; i++) {
                        double e = tensor_err(ctx, got[i + 1], kn_grad(ctx, m.p[i]));
                        if (!(e <= err)) err = e;
                    }
                }
                kn_scope_end(ctx);
                checked = 1;
                if (!(err <= TOL)) {
                    char msg[200];
                    snprintf(msg, sizeof msg, "result check failed: loss/grads vs eager max err %.3g > %g (%s)", err,
                             TOL, kn_last_error(ctx));
                    kn_clear_error(ctx);
                    bench_report_err(b, S, "mlp-joint", impl, "ms", msg, 1);
                    bad = 1;
                }
            }
            program_free(p);
        }
#if BENCH_POSIX
        if (dir[0]) remove_dir(dir);
#endif
        if (bad) continue;
        for (int w = 0; w < 2; w++) {
            double *t = w ? warm : cold;
            int n = w ? nwarm : ncold;
            Stat st;
            qsort(t, (size_t)n, sizeof *t, bench_cmp_double);
            st.min = t[0], st.max = t[n - 1], st.n = n;
            st.med = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
            snprintf(cse, sizeof cse, "mlp-joint/%s", w ? "warm" : "cold");
            snprintf(note, sizeof note, "%s: %u nodes, %d kernels on %s; checked vs eager (max err %.2g); %s", what,
                     (unsigned)(g->n - 1), kernels, ran, err,
                     !BENCH_POSIX ? "no cache directory on this platform"
                     : be == BACKEND_TCC ? (w ? "tcc has no disk cache: a second compile" : "first compile")
                     : (w ? "second compile: cache hit" : "fresh KILN_CACHE_DIR"));
            bench_report(b, S, cse, impl, &st, "ms", 0, NULL, NULL, 0, note);
        }
    }
#if BENCH_POSIX
    if (saved) setenv("KILN_CACHE_DIR", saved, 1);
    else unsetenv("KILN_CACHE_DIR");
    free(saved);
#endif
done:
    autodiff_release(ctx);
    graph_free(g);
    for (int i = 0; i < 4; i++) kn_free(ctx, m.p[i]);
    kn_scope_end(ctx);
}

/* ---- compile time: the workloads' training steps ----
 * For mlp, gpt and cnn (docs/BENCHMARKS.md, the 2-core machine's batches): a
 * whole training step (zero_grad, forward, cross-entropy, backward, Adam)
 * through kn_compile on each backend, its trace + compile time as
 * kn_fn_stats reports it: cold (a fresh $KILN_CACHE_DIR) and warm (a new
 * kn_fn compiling the same step again: backend c finds its program cache,
 * tcc has none). Every compiled step's loss is checked against the eager
 * step's on the same parameters (a fresh model from the same seed). */

typedef struct {
    Model *m;
    kn_optim *opt;
} Step;

static kn_status step_fn(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Step *w = user;
    (void)nin;
    (void)nout;
    kn_optim_zero_grad(w->opt);
    kn_tensor *loss = model_loss(ctx, w->m, in[0], in[1], 1);
    if (!loss || kn_backward(ctx, loss, 0) != KN_OK || kn_optim_step(w->opt) != KN_OK) return kn_last_status(ctx);
    out[0] = loss;
    return KN_OK;
}

/* A fresh model of the workload from seed, with its Adam: 0, or -1. */
static int step_new(kn_ctx *ctx, const char *name, const ModelCfg *cfg, Step *w)
{
    kn_manual_seed(ctx, 11);
    w->m = model_new(ctx, name, cfg);
    w->opt = w->m ? kn_adam(ctx, model_params(w->m), model_nparams(w->m), NULL) : NULL;
    return w->opt ? 0 : -1;
}

static void step_free(kn_ctx *ctx, Step *w)
{
    kn_optim_free(w->opt);
    model_free(ctx, w->m);
}

/* One compile of the step on be; its trace + compile ms in *ms, its loss in *loss: 0, or -1. */
static int step_compile(kn_ctx *ctx, const char *name, const ModelCfg *cfg, kn_backend be, kn_tensor **in,
                        double *ms, double *loss, const char **ran)
{
    Step w;
    int bad = step_new(ctx, name, cfg, &w);
    kn_compile_opts co = {.backend = be, .params = w.m ? model_params(w.m) : NULL,
                          .nparams = w.m ? model_nparams(w.m) : 0, .name = name};
    kn_fn *f = bad ? NULL : kn_compile(ctx, step_fn, &w, &co);
    kn_tensor *out[1] = {NULL};
    kn_fn_info info;
    kn_scope_begin(ctx);
    bad = !f || kn_call(f, in, 2, out, 1) != KN_OK || kn_fn_stats(f, &info) != KN_OK ||
          kn_item(ctx, out[0], loss) != KN_OK;
    kn_scope_end(ctx);
    if (!bad) *ms = info.compile_ms, *ran = be == KN_BACKEND_C && !strcmp(info.backend, "c") ? "c"
                                                : be == KN_BACKEND_TCC && !strcmp(info.backend, "tcc") ? "tcc" : "interp";
    kn_fn_free(f);
    step_free(ctx, &w);
    return bad ? -1 : 0;
}

static void stat_of(double *t, int n, Stat *st)
{
    qsort(t, (size_t)n, sizeof *t, bench_cmp_double);
    st->min = t[0], st->max = t[n - 1], st->n = n;
    st->med = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

void bench_compile_steps(B *b, kn_ctx *ctx)
{
    static const char *const names[3] = {"mlp", "gpt", "cnn"};
    static const int64_t batch[3] = {128, 4, 16};
    for (int mi = 0; mi < 3; mi++) {
        const char *name = names[mi];
        ModelCfg cfg;
        memset(&cfg, 0, sizeof cfg);
        if (b->o->smoke && mi == 1) cfg.vocab = 64, cfg.context = 8, cfg.d = 16, cfg.layers = 1, cfg.heads = 2;
        if (b->o->smoke && mi == 2) cfg.width = 4, cfg.side = 8;
        int64_t nb = b->o->smoke ? 4 : batch[mi];
        char cse[64], note[320], what[96];
        snprintf(what, sizeof what, "%s train step (forward, cross-entropy, backward, Adam), batch %lld%s", name,
                 (long long)nb, b->o->smoke ? ", smoke sizes" : "");
        kn_scope_begin(ctx);
        Step ref;
        kn_tensor *x = NULL, *y = NULL;
        double want = NAN;
        int ok = step_new(ctx, name, &cfg, &ref) == 0 && model_batch(ctx, ref.m, nb, &x, &y) == KN_OK;
        kn_tensor *in[2] = {x, y}, *out[1] = {NULL};
        ok = ok && step_fn(ctx, &ref, in, 2, out, 1) == KN_OK && kn_item(ctx, out[0], &want) == KN_OK;
        if (ref.m || ref.opt) step_free(ctx, &ref);
        snprintf(cse, sizeof cse, "%s-step", name);
        if (!ok) {
            bench_report_err(b, "ops", cse, "kiln", "ms", kn_last_error(ctx), 1);
            kn_clear_error(ctx);
        }
        static const kn_backend bes[2] = {KN_BACKEND_TCC, KN_BACKEND_C};
        for (int bi = 0; bi < 2 && ok; bi++) {
            const char *impl = bi ? "kiln-c" : "kiln-tcc";
            int slow = bi && mi > 0; /* cc on gpt and cnn: seconds a compile */
            int ncold = b->o->smoke || (slow && b->o->quick) ? 1 : slow ? 2 : 3, nwarm = b->o->smoke ? 1 : 3;
            double cold[MAX_SAMPLES], warm[MAX_SAMPLES], worst = 0;
            const char *ran = "?";
            int bad = 0;
#if BENCH_POSIX
            char dir[512] = "";
            const char *old = getenv("KILN_CACHE_DIR");
            char *saved = old ? malloc(strlen(old) + 1) : NULL;
            if (saved) strcpy(saved, old);
#endif
            for (int r = 0; r < ncold + nwarm && !bad; r++) {
#if BENCH_POSIX
                if (r < ncold) {
                    if (dir[0]) remove_dir(dir);
                    if (fresh_cache(dir, sizeof dir)) {
                        bench_report_err(b, "ops", cse, impl, "ms", "cannot make a temporary cache directory", 1);
                        dir[0] = 0, bad = 1;
                        break;
                    }
                }
#endif
                double ms = 0, loss = NAN;
                if (step_compile(ctx, name, &cfg, bes[bi], in, &ms, &loss, &ran)) {
                    bench_report_err(b, "ops", cse, impl, "ms", kn_last_error(ctx), 1);
                    kn_clear_error(ctx);
                    bad = 1;
                    break;
                }
                double e = fabs(loss - want) / (fabs(want) + 1e-30);
                if (!(e <= worst)) worst = e;
                if (r < ncold) cold[r] = ms;
                else warm[r - ncold] = ms;
            }
#if BENCH_POSIX
            if (dir[0]) remove_dir(dir);
            if (saved) setenv("KILN_CACHE_DIR", saved, 1);
            else unsetenv("KILN_CACHE_DIR");
            free(saved);
#endif
            if (bad) continue;
            if (!(worst <= TOL)) {
                char msg[160];
                snprintf(msg, sizeof msg, "result check failed: the compiled step's loss vs eager's, rel err %.3g > %g",
                         worst, TOL);
                bench_report_err(b, "ops", cse, impl, "ms", msg, 1);
                continue;
            }
            for (int w = 0; w < 2; w++) {
                Stat st;
                stat_of(w ? warm : cold, w ? nwarm : ncold, &st);
                snprintf(cse, sizeof cse, "%s-step/%s", name, w ? "warm" : "cold");
                snprintf(note, sizeof note, "trace + compile (kn_fn_stats) of the %s on %s; loss checked vs eager "
                         "(rel err %.2g); %s", what, ran, worst,
                         !BENCH_POSIX ? "no cache directory on this platform"
                         : bi == 0 ? (w ? "tcc has no disk cache: a new kn_fn compiles again" : "a new kn_fn")
                         : (w ? "a new kn_fn: the program cache's entry" : "fresh KILN_CACHE_DIR"));
                bench_report(b, "ops", cse, impl, &st, "ms", 0, NULL, NULL, 0, note);
            }
            snprintf(cse, sizeof cse, "%s-step", name);
        }
        kn_free(ctx, x);
        kn_free(ctx, y);
        kn_scope_end(ctx);
    }
}
