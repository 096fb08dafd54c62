/*
 * train.c — `kiln train`, the main job: fit a model to Fashion-MNIST read
 * from its IDX files, the whole step (forward, loss, backward, optimizer)
 * compiled with kn_compile, with a progress bar, test accuracy after each
 * epoch and safetensors checkpoints (kn_save / kn_load).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core.h"
#include "train.h"
#include "data.h"
#include "models.h"
#include "../../port/port.h"

typedef struct {
    Model *m;
    kn_optim *opt;
} Trainer;

/* one training step: out[0] the loss, out[1] the number of right answers */
static kn_status step_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Trainer *t = user;
    (void)nin;
    (void)nout;
    kn_optim_zero_grad(t->opt);
    kn_tensor *logits = model_forward(ctx, t->m, in[0], 1);
    kn_tensor *loss = kn_cross_entropy(ctx, logits, in[1], NULL);
    if (!loss || kn_backward(ctx, loss, 0) != KN_OK || kn_optim_step(t->opt) != KN_OK) return kn_last_status(ctx);
    out[0] = loss;
    out[1] = kn_sum(ctx, kn_eq(ctx, kn_argmax(ctx, kn_detach(ctx, logits), 1, 0), in[1]), NULL, 0, 0);
    return out[1] ? KN_OK : kn_last_status(ctx);
}

/* evaluation: the number of right answers */
static kn_status eval_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Trainer *t = user;
    (void)nin;
    (void)nout;
    kn_tensor *logits = model_forward(ctx, t->m, in[0], 0);
    out[0] = kn_sum(ctx, kn_eq(ctx, kn_argmax(ctx, logits, 1, 0), in[1]), NULL, 0, 0);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

typedef struct {
    const char *model, *data, *save, *resume, *optim;
    int epochs, threads, limit, quiet;
    int64_t batch;
    double lr;
    uint64_t seed;
    kn_backend backend;
} TrainOpts;

static int bad(const char *what, const char *arg)
{
    fprintf(stderr, "kiln train: %s '%s'\n", what, arg);
    return 2;
}

static int parse(int argc, char **argv, TrainOpts *o)
{
    *o = (TrainOpts){"smallcnn", NULL, NULL, NULL, "adam", 2, 2, 0, 0, 64, 1e-3, 0, KN_BACKEND_C};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--quiet")) {
            o->quiet = 1;
            continue;
        }
        if (!v) return bad("missing a value after", a);
        i++;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--save")) o->save = v;
        else if (!strcmp(a, "--resume")) o->resume = v;
        else if (!strcmp(a, "--optim")) o->optim = v;
        else if (!strcmp(a, "--backend")) {
            if (!strcmp(v, "c")) o->backend = KN_BACKEND_C;
            else if (!strcmp(v, "tcc")) o->backend = KN_BACKEND_TCC;
            else if (!strcmp(v, "interp")) o->backend = KN_BACKEND_INTERP;
            else return bad("unknown backend (c, tcc, interp)", v);
        } else if (!strcmp(a, "--epochs")) o->epochs = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--threads")) o->threads = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--limit")) o->limit = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--batch")) o->batch = strtoll(v, &end, 10);
        else if (!strcmp(a, "--lr")) o->lr = strtod(v, &end);
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, &end, 10);
        else return bad("unknown option", a);
        if (end && (*end || end == v)) return bad("not a number:", v);
    }
    if (strcmp(o->model, "mlp") && strcmp(o->model, "smallcnn")) return bad("unknown model (mlp, smallcnn)", o->model);
    if (strcmp(o->optim, "adam") && strcmp(o->optim, "sgd")) return bad("unknown optimizer (adam, sgd)", o->optim);
    if (o->epochs < 1 || o->batch < 2 || o->batch > 60000 || !(o->lr > 0) || o->threads < 1 || o->limit < 0)
        return bad("epochs >= 1, batch in 2..60000, lr > 0, threads >= 1 and limit >= 0 are needed; got", "options");
    return 0;
}

/* rows idx[0..n) of x (N, ...) */
static kn_tensor *rows(kn_ctx *ctx, kn_tensor *x, const int64_t *idx, int64_t n)
{
    if (!kn_is_contiguous(x) || x->ndim < 1 || ctx->capture) { /* the general way */
        kn_tensor *i = kn_tensor_from(ctx, KN_I64, 1, &n, idx);
        return kn_contiguous(ctx, kn_index_select(ctx, x, 0, i));
    }
    Dim sh[KN_MAX_DIMS];
    memcpy(sh, x->shape, (size_t)x->ndim * sizeof *sh);
    sh[0] = n;
    kn_tensor *r = tensor_new(ctx, (kn_dtype)x->dtype, x->ndim, sh);
    if (!r) return NULL;
    int64_t row = x->shape[0] ? tensor_numel(x->ndim, x->shape) / x->shape[0] : 0;
    size_t bytes = (size_t)row * kn_dtype_size((kn_dtype)x->dtype);
    for (int64_t i = 0; i < n; i++) memcpy(tensor_ptr(r, i * row), tensor_ptr(x, x->offset + idx[i] * row), bytes);
    return r;
}

static void bar(const TrainOpts *o, int epoch, int64_t step, int64_t steps, double loss, double acc, double rate)
{
    if (o->quiet) return;
    int w = 30, done = (int)(w * step / steps);
    fprintf(stderr, "\repoch %d/%d [", epoch, o->epochs);
    for (int i = 0; i < w; i++) fputc(i < done ? '#' : '.', stderr);
    fprintf(stderr, "] %3d%%  loss %.4f  acc %5.1f%%  %6.1f steps/s", (int)(100 * step / steps), loss, 100 * acc, rate);
    fflush(stderr);
}

/* test accuracy over the whole test set, compiled */
static int evaluate(kn_ctx *ctx, kn_fn *ev, kn_tensor *x, kn_tensor *y, double *acc)
{
    int64_t n = kn_shape(x)[0], chunk = 1000, right = 0;
    int was = kn_set_grad_enabled(ctx, 0);
    for (int64_t s = 0; s + chunk <= n; s += chunk) {
        kn_scope_begin(ctx);
        kn_tensor *in[2] = {kn_narrow(ctx, x, 0, s, chunk), kn_narrow(ctx, y, 0, s, chunk)}, *out[1];
        double r = 0;
        int ok = in[0] && in[1] && kn_call(ev, in, 2, out, 1) == KN_OK && kn_item(ctx, out[0], &r) == KN_OK;
        kn_scope_end(ctx);
        if (!ok) return kn_set_grad_enabled(ctx, was), 1;
        right += (int64_t)r;
    }
    kn_set_grad_enabled(ctx, was);
    *acc = (double)right / (double)(n - n % chunk);
    return 0;
}

/* the median time of a few eager steps, for the eager vs compiled line */
static double eager_step_ms(kn_ctx *ctx, Trainer *t, kn_tensor *x, kn_tensor *y, int64_t b)
{
    double best[3];
    for (int i = 0; i < 3; i++) {
        kn_scope_begin(ctx);
        kn_tensor *in[2] = {kn_narrow(ctx, x, 0, i * b, b), kn_narrow(ctx, y, 0, i * b, b)}, *out[2];
        double t0 = port_now_ms();
        kn_status s = step_body(ctx, t, in, 2, out, 2);
        best[i] = port_now_ms() - t0;
        kn_scope_end(ctx);
        if (s) return -1;
    }
    double lo = best[0] < best[1] ? best[0] : best[1], hi = best[0] < best[1] ? best[1] : best[0];
    return best[2] < lo ? lo : best[2] > hi ? hi : best[2]; /* the median of three */
}

static int fail(kn_ctx *ctx)
{
    fprintf(stderr, "\nkiln train: %s\n", kn_last_error(ctx));
    return 1;
}

int cli_train(int argc, char **argv)
{
    TrainOpts o;
    if (parse(argc, argv, &o)) return 2;
    port_set_threads(o.threads);
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = o.seed});
    if (!ctx) return 1;
    kn_tensor *xtr, *ytr, *xte, *yte;
    const char *dir = o.data ? o.data : FASHION_MNIST_DIR;
    if (fmnist_load(ctx, dir, 1, &xtr, &ytr) != KN_OK || fmnist_load(ctx, dir, 0, &xte, &yte) != KN_OK) {
        fprintf(stderr, "kiln train: %s\n", kn_last_error(ctx));
        fprintf(stderr, "(Fashion-MNIST: Debian package dataset-fashion-mnist, or --data DIR with the four IDX files)\n");
        kn_ctx_free(ctx);
        return 1;
    }
    if (!strcmp(o.model, "mlp")) { /* the mlp reads flat rows */
        int64_t s[2] = {kn_shape(xtr)[0], 784}, t[2] = {kn_shape(xte)[0], 784};
        xtr = kn_keep(ctx, kn_reshape(ctx, xtr, 2, s));
        xte = kn_keep(ctx, kn_reshape(ctx, xte, 2, t));
    }
    ModelCfg cfg = {0};
    Model *m = model_new(ctx, o.model, &cfg);
    if (!m) return fail(ctx);
    int np = model_nparams(m), nb = model_nbuffers(m);
    kn_tensor *state[512];
    const char *names[512];
    for (int i = 0; i < np; i++) state[i] = model_params(m)[i], names[i] = model_param_names(m)[i];
    for (int i = 0; i < nb; i++) state[np + i] = model_buffers(m)[i], names[np + i] = model_buffer_names(m)[i];
    if (o.resume) {
        if (kn_load(ctx, o.resume, names, state, np + nb) != KN_OK) return fail(ctx);
        fprintf(stderr, "resumed from %s\n", o.resume);
    }
    kn_sgd_opts so = {.lr = o.lr, .momentum = 0.9};
    kn_adam_opts ao = {.lr = o.lr};
    Trainer t = {m, !strcmp(o.optim, "sgd") ? kn_sgd(ctx, model_params(m), np, &so) : kn_adam(ctx, model_params(m), np, &ao)};
    if (!t.opt) return fail(ctx);
    kn_compile_opts co = {.backend = o.backend, .params = model_params(m), .nparams = np, .name = "train_step"};
    kn_fn *step = kn_compile(ctx, step_body, &t, &co);
    co.name = "eval";
    kn_fn *ev = kn_compile(ctx, eval_body, &t, &co);
    if (!step || !ev) return fail(ctx);

    int64_t n = kn_shape(xtr)[0];
    if (o.limit && o.limit < n) n = o.limit;
    int64_t steps = n / o.batch, b = o.batch;
    if (steps < 1) return bad("the batch is larger than the data:", "--batch");
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    if (!perm) return 1;
    printf("kiln train: %s on Fashion-MNIST (%lld images, batch %lld, %s lr %g, %d threads, backend %s)\n", o.model,
           (long long)n, (long long)b, o.optim, o.lr, o.threads,
           o.backend == KN_BACKEND_C ? "c" : o.backend == KN_BACKEND_TCC ? "tcc" : "interp");
    double eager_ms = eager_step_ms(ctx, &t, xtr, ytr, b); /* three real steps, eagerly */
    uint64_t rng = o.seed * 6364136223846793005ULL + 1442695040888963407ULL;
    double acc = 0, first_ms = 0, compiled_ms = 0;
    for (int epoch = 1; epoch <= o.epochs; epoch++) {
        for (int64_t i = 0; i < n; i++) perm[i] = i;
        for (int64_t i = n - 1; i > 0; i--) { /* Fisher-Yates with a 64-bit LCG */
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            int64_t j = (int64_t)((rng >> 33) % (uint64_t)(i + 1)), tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
        }
        double t0 = port_now_ms(), loss_avg = 0, right = 0, seen = 0;
        for (int64_t s = 0; s < steps; s++) {
            kn_scope_begin(ctx);
            kn_tensor *in[2] = {rows(ctx, xtr, perm + s * b, b), rows(ctx, ytr, perm + s * b, b)}, *out[2];
            double ts = port_now_ms();
            double loss = 0, r = 0;
            int ok = in[0] && in[1] && kn_call(step, in, 2, out, 2) == KN_OK;
            if (epoch == 1 && s == 0) first_ms = port_now_ms() - ts;
            else if (epoch == 1 && s >= steps / 2 && s < steps / 2 + 20) compiled_ms += (port_now_ms() - ts) / 20;
            ok = ok && kn_item(ctx, out[0], &loss) == KN_OK && kn_item(ctx, out[1], &r) == KN_OK;
            kn_scope_end(ctx);
            if (!ok) return fail(ctx);
            loss_avg = s ? 0.98 * loss_avg + 0.02 * loss : loss;
            right += r;
            seen += (double)b;
            if (s % 10 == 0 || s == steps - 1) bar(&o, epoch, s + 1, steps, loss_avg, right / seen, (double)(s + 1) * 1e3 / (port_now_ms() - t0));
        }
        if (evaluate(ctx, ev, xte, yte, &acc)) return fail(ctx);
        if (!o.quiet) fputc('\n', stderr);
        printf("epoch %d: train loss %.4f, train accuracy %.1f%%, test accuracy %.2f%%, %.1f s\n", epoch, loss_avg,
               100 * right / seen, 100 * acc, (port_now_ms() - t0) / 1e3);
        fflush(stdout);
        if (o.save && kn_save(ctx, o.save, names, state, np + nb) != KN_OK) return fail(ctx);
    }
    if (steps >= steps / 2 + 20 && eager_ms > 0)
        printf("step time: eager %.1f ms, compiled %.1f ms (%.1fx); first step with compile %.0f ms\n", eager_ms,
               compiled_ms, eager_ms / compiled_ms, first_ms);
    if (o.save) printf("weights saved to %s\n", o.save);
    printf("test accuracy: %.2f%%\n", 100 * acc);
    free(perm);
    kn_fn_free(step);
    kn_fn_free(ev);
    kn_optim_free(t.opt);
    model_free(ctx, m);
    kn_ctx_free(ctx);
    return 0;
}
