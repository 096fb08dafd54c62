/*
 * explain.c — `kiln explain mlp|cnn|gpt` (what kn_compile made of a whole
 * training step, as torch._dynamo.explain) and `kiln bench train|infer|
 * dispatch` (the workloads of docs/BENCHMARKS.md, eager vs each backend, every
 * loss checked against eager before it is timed).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "train.h"
#include "models.h"
#include "../../port/port.h"

typedef struct {
    Model *m;
    kn_optim *opt;
    int train;
} Work;

static kn_status step_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Work *w = user;
    (void)nin;
    (void)nout;
    if (!w->train) {
        out[0] = model_forward(ctx, w->m, in[0], 0);
        return out[0] ? KN_OK : kn_last_status(ctx);
    }
    kn_optim_zero_grad(w->opt);
    kn_tensor *loss = model_loss(ctx, w->m, in[0], in[1], 1);
    if (!loss || kn_backward(ctx, loss, 0) != KN_OK || kn_optim_step(w->opt) != KN_OK) return kn_last_status(ctx);
    out[0] = loss;
    return KN_OK;
}

static int64_t cpu_batch(const char *name) { return !strcmp(name, "mlp") ? 128 : !strcmp(name, "cnn") ? 16 : 4; }

/* ---- explain ---- */

typedef struct {
    int lines, breaks, guards;
    char text[1 << 16];
} Sink;

static void sink(void *user, const char *line)
{
    Sink *s = user;
    size_t n = strlen(s->text);
    if (strstr(line, "[graph_breaks]")) s->breaks++;
    if (strstr(line, "[guards]")) s->guards++;
    if (n + strlen(line) + 2 < sizeof s->text) snprintf(s->text + n, sizeof s->text - n, "%s\n", line);
    s->lines++;
}

int cli_explain(int argc, char **argv)
{
    const char *name = argc > 2 ? argv[2] : NULL;
    kn_backend be = KN_BACKEND_TCC;
    if (!name || (strcmp(name, "mlp") && strcmp(name, "cnn") && strcmp(name, "gpt"))) {
        fprintf(stderr, "kiln explain: expected mlp, cnn or gpt\n");
        return 2;
    }
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            const char *b = argv[++i];
            be = !strcmp(b, "c") ? KN_BACKEND_C : !strcmp(b, "interp") ? KN_BACKEND_INTERP : KN_BACKEND_TCC;
        } else {
            fprintf(stderr, "kiln explain: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    kn_ctx *ctx = kn_ctx_new(NULL);
    Sink *s = calloc(1, sizeof *s);
    if (!ctx || !s) return 1;
    kn_set_log(ctx, sink, s);
    char topics[512]; /* what explain reads, and whatever $KILN_LOGS asks for besides */
    const char *env = getenv("KILN_LOGS");
    snprintf(topics, sizeof topics, "graph_breaks,guards,recompiles,partition,perf%s%.400s", env && *env ? "," : "",
             env ? env : "");
    kn_set_logs(ctx, topics);
    ModelCfg cfg = {0};
    Model *m = model_new(ctx, name, &cfg);
    kn_tensor *x, *y;
    Work w = {m, m ? kn_adam(ctx, model_params(m), model_nparams(m), NULL) : NULL, 1};
    int rc = 1;
    if (w.opt && model_batch(ctx, m, cpu_batch(name), &x, &y) == KN_OK) {
        kn_compile_opts o = {.backend = be, .params = model_params(m), .nparams = model_nparams(m), .name = name};
        kn_fn *f = kn_compile(ctx, step_body, &w, &o);
        kn_tensor *in[2] = {x, y}, *out[1];
        if (f && kn_call(f, in, 2, out, 1) == KN_OK) {
            kn_fn_info info;
            kn_fn_stats(f, &info);
            printf("kiln explain %s: a training step (forward, cross-entropy, backward, Adam), batch %lld\n", name,
                   (long long)cpu_batch(name));
            printf("  graphs: %d    graph breaks: %d\n", info.graphs, info.graph_breaks);
            printf("  ops traced (public calls): %d    primitive nodes compiled (forward + backward + step): %d\n",
                   info.ops, info.nodes);
            printf("  kernels after fusion: %d    arena: %zu bytes    generated code: %zu bytes (backend %s)\n",
                   info.kernels, info.arena_bytes, info.code_bytes, info.backend ? info.backend : "none");
            printf("  nodes left to the interpreter: %d    writes stored in place over the old values: %d\n",
                   info.interp_steps, info.in_place);
            printf("  trace + compile: %.1f ms\n", info.compile_ms);
            printf("%s", s->text);
            rc = 0;
        }
        kn_fn_free(f);
    }
    if (rc) fprintf(stderr, "kiln explain: %s\n", kn_last_error(ctx));
    kn_optim_free(w.opt);
    model_free(ctx, m);
    kn_ctx_free(ctx);
    free(s);
    return rc;
}

/* ---- bench train | infer | dispatch ---- */


static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void emit(int json, const char *suite, const char *cse, const char *impl, const char *metric, double *v,
                 int n, int64_t batch)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    double med = n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : NAN;
    if (json) {
        char line[1400];
        double v3[3] = {med, n ? v[0] : NAN, n ? v[n - 1] : NAN};
        bench_json(&(BenchRecord){suite, cse, impl, metric, n ? v3 : NULL, n, .batch = batch, .threads = port_threads()},
                   line, sizeof line);
        puts(line);
    } else
        printf("%-8s %-18s %-12s %-6s median %10.4g  min %10.4g  max %10.4g  n %d\n", suite, cse, impl, metric, med,
               n ? v[0] : NAN, n ? v[n - 1] : NAN, n);
    fflush(stdout);
}

static kn_status dispatch_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user;
    (void)nout;
    kn_tensor *s = in[0];
    for (int k = 1; k < nin; k++) s = kn_add(ctx, s, in[k]);
    out[0] = s;
    return s ? KN_OK : kn_last_status(ctx);
}

static int bench_dispatch(int json)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    kn_set_grad_enabled(ctx, 0);
    kn_tensor *in[10];
    int64_t one = 1;
    for (int k = 0; k < 10; k++) in[k] = kn_keep(ctx, kn_full(ctx, KN_F32, 1, &one, k));
    static const kn_backend bes[2] = {KN_BACKEND_C, KN_BACKEND_TCC};
    static const char *names[2] = {"kiln-c", "kiln-tcc"};
    int rc = 0;
    for (int b = 0; b < 4; b++) { /* c, tcc; then each under reduce-overhead */
        kn_compile_opts o = {.backend = bes[b % 2], .mode = b < 2 ? KN_MODE_DEFAULT : KN_MODE_REDUCE_OVERHEAD};
        kn_fn *f = kn_compile(ctx, dispatch_body, NULL, &o);
        kn_tensor *out[1];
        double got = 0, v[31];
        if (kn_call(f, in, 10, out, 1) || kn_item(ctx, out[0], &got) || got != 45) {
            fprintf(stderr, "bench dispatch: wrong result %g (%s)\n", got, kn_last_error(ctx));
            rc = 1;
        }
        for (int r = 0; r < 31 && !rc; r++) { /* each sample: the mean of 2000 calls */
            double t0 = port_now_ms();
            for (int i = 0; i < 2000; i++) {
                kn_scope_begin(ctx);
                kn_call(f, in, 10, out, 1);
                kn_scope_end(ctx);
            }
            v[r] = (port_now_ms() - t0) * 1e3 / 2000;
        }
        if (!rc) emit(json, "dispatch", b < 2 ? "10-input add" : "10-input add/ro", names[b % 2], "us", v, 31, 1);
        kn_fn_free(f);
    }
    kn_ctx_free(ctx);
    return rc;
}

/* the workload's loss (train) or logits' sum (infer) from out */
static double value_of(kn_ctx *ctx, kn_tensor *t)
{
    double v = NAN;
    kn_item(ctx, kn_sum(ctx, kn_to(ctx, t, KN_F64), NULL, 0, 0), &v);
    return v;
}

static int bench_one(const char *suite, const char *name, int json, int quick, const char *only_impl)
{
    int train = !strcmp(suite, "train");
    int64_t batch = cpu_batch(name);
    static const kn_backend bes[3] = {KN_BACKEND_INTERP, KN_BACKEND_C, KN_BACKEND_TCC};
    static const char *impls[3] = {"kiln-eager", "kiln-c", "kiln-tcc"};
    double ref = NAN;
    int rc = 0;
    for (int b = 0; b < 3; b++) {
        /* eager always runs: its first step's result is every backend's check */
        if (b && only_impl && strcmp(only_impl, impls[b] + 5)) continue;
        kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 1});
        ModelCfg cfg = {0};
        Model *m = model_new(ctx, name, &cfg);
        kn_tensor *x, *y;
        Work w = {m, m && train ? kn_adam(ctx, model_params(m), model_nparams(m), NULL) : NULL, train};
        if (!m || (train && !w.opt) || model_batch(ctx, m, batch, &x, &y)) {
            fprintf(stderr, "bench %s %s: %s\n", suite, name, kn_last_error(ctx));
            kn_ctx_free(ctx);
            return 1;
        }
        kn_set_grad_enabled(ctx, train);
        if (b == 0) kn_set_eager_backend(ctx, KN_BACKEND_C); /* kiln's eager mode at its best: cached op kernels */
        kn_compile_opts o = {.backend = bes[b], .params = model_params(m), .nparams = model_nparams(m), .name = name};
        kn_fn *f = b ? kn_compile(ctx, step_body, &w, &o) : NULL;
        kn_tensor *in[2] = {x, y}, *out[1];
        char cse[64];
        snprintf(cse, sizeof cse, "%s/%s", name, suite);
        double v[64], first = 0;
        int n = 0, steps = quick ? 5 : 30, warm = quick ? 1 : 5;
        double budget = quick ? 20e3 : 120e3, start = port_now_ms();
        for (int s = 0; s < warm + steps && (s <= warm || port_now_ms() - start < budget); s++) {
            kn_scope_begin(ctx);
            double t0 = port_now_ms();
            kn_status st = f ? kn_call(f, in, 2, out, 1) : step_body(ctx, &w, in, 2, out, 1);
            double dt = port_now_ms() - t0;
            double val = st ? NAN : value_of(ctx, out[0]);
            kn_scope_end(ctx);
            if (s == 0) { /* the check: the first step's loss against eager's */
                first = dt;
                if (b == 0) ref = val;
                if (st || !(fabs(val - ref) <= 1e-3 * fabs(ref) + 1e-4)) {
                    fprintf(stderr, "bench %s %s %s: result %.9g, eager %.9g: %s\n", suite, name, impls[b], val, ref,
                            st ? kn_last_error(ctx) : "mismatch, not timed");
                    rc = 1;
                    break;
                }
            } else if (s >= warm) v[n++] = dt;
        }
        if (n) {
            char fc[64];
            snprintf(fc, sizeof fc, "%s/%s-first", name, suite);
            emit(json, suite, cse, impls[b], "ms", v, n, batch);
            emit(json, suite, fc, impls[b], "ms", &first, 1, batch);
            if (f) {
                kn_fn_info info;
                kn_fn_stats(f, &info);
                double bytes = (double)info.arena_bytes;
                emit(json, suite, cse, impls[b], "bytes", &bytes, 1, batch);
            }
        }
        kn_fn_free(f);
        kn_optim_free(w.opt);
        model_free(ctx, m);
        kn_ctx_free(ctx);
    }
    return rc;
}

int bench_models(const char *suite, int json, int quick, const char *model, const char *backend)
{
    if (!strcmp(suite, "dispatch")) return bench_dispatch(json);
    if (strcmp(suite, "train") && strcmp(suite, "infer")) return -1;
    static const char *names[3] = {"mlp", "gpt", "cnn"};
    if (model && strcmp(model, "mlp") && strcmp(model, "gpt") && strcmp(model, "cnn")) {
        fprintf(stderr, "kiln bench: unknown --model '%s' (mlp, gpt, cnn)\n", model);
        return 2;
    }
    if (backend && strcmp(backend, "c") && strcmp(backend, "tcc")) {
        fprintf(stderr, "kiln bench: unknown --backend '%s' (c, tcc; eager always runs as the check)\n", backend);
        return 2;
    }
    int rc = 0;
    for (int i = 0; i < 3; i++)
        if (!model || !strcmp(model, names[i])) rc |= bench_one(suite, names[i], json, quick, backend);
    return rc;
}
