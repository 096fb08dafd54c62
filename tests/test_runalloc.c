/*
 * test_runalloc.c — what a compiled program allocates when it runs.
 *
 * An allocator hook counts allocations. A whole training step (zero_grad,
 * forward, cross-entropy, kn_backward, Adam) and an inference forward of the
 * mlp, gpt and cnn models (small sizes) run eagerly, compiled in mode
 * default and compiled in mode reduce-overhead, each in its own context from
 * the same seed. After two warm-up calls, every reduce-overhead call must
 * allocate nothing; the default mode's count per call is printed. Losses,
 * logits, parameters and running statistics must equal eager's (1e-4), and
 * reduce-overhead's must equal the default mode's exactly (the same kernels
 * on the same values).
 *
 * Then the two output contracts: a default call's output keeps its values
 * after later calls, reduce-overhead's is the same handle every call and
 * shows the latest call's values. And writes that move storage instead of
 * copying: a view of a parameter and an output that is a written value
 * still follow eager.
 */
#include <stdlib.h>

#include "test.h"
#include "../src/cli/models.h"

static kn_backend backends[2] = {KN_BACKEND_TCC, KN_BACKEND_C};
static const char *bname[2] = {"tcc", "c"};

typedef struct {
    long n; /* allocations so far, reallocations included */
} Hook;

static void *hook_alloc(void *user, void *ptr, size_t osize, size_t nsize)
{
    (void)osize;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    ((Hook *)user)->n++;
    return realloc(ptr, nsize);
}

/* Every element of a and b as f32, the largest |a - b| / (1 + |b|); exact: 0 only if equal bits. */
static double diff(kn_ctx *ca, kn_tensor *a, kn_ctx *cb, kn_tensor *b)
{
    int64_t n = kn_numel(a);
    if (n != kn_numel(b)) return INFINITY;
    float *x = malloc((size_t)n * 4 + 4), *y = malloc((size_t)n * 4 + 4);
    double m = 0;
    if (kn_read(ca, a, x, (size_t)n * 4) || kn_read(cb, b, y, (size_t)n * 4)) m = INFINITY;
    for (int64_t i = 0; i < n && m != INFINITY; i++) {
        double d = fabs((double)x[i] - y[i]) / (1 + fabs((double)y[i]));
        if (!(d <= m)) m = isnan(d) ? INFINITY : d;
    }
    free(x);
    free(y);
    return m;
}

typedef struct {
    Model *m;
    kn_optim *opt;
    int train;
} Run;

static kn_status body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Run *r = user;
    (void)nin;
    (void)nout;
    if (!r->train) {
        out[0] = model_forward(ctx, r->m, in[0], 0);
        return out[0] ? KN_OK : kn_last_status(ctx);
    }
    kn_optim_zero_grad(r->opt);
    kn_tensor *loss = model_loss(ctx, r->m, in[0], in[1], 1);
    if (!loss || kn_backward(ctx, loss, 0) != KN_OK || kn_optim_step(r->opt) != KN_OK) return kn_last_status(ctx);
    out[0] = loss;
    return KN_OK;
}

enum { EAGER, DEFAULT, RO, NRUN };
#define STEPS 6
#define WARM 2

static void test_model(int bi, const char *name, ModelCfg cfg, int train)
{
    Hook h[NRUN] = {{0}};
    kn_ctx *c[NRUN];
    Run r[NRUN];
    kn_tensor *x[NRUN], *y[NRUN];
    kn_fn *f[NRUN] = {NULL};
    long allocs[NRUN] = {0};
    double worst_e = 0, worst_d = 0;
    for (int k = 0; k < NRUN; k++) {
        c[k] = kn_ctx_new(&(kn_ctx_opts){.seed = 11, .alloc = hook_alloc, .alloc_user = &h[k]});
        r[k].m = model_new(c[k], name, &cfg);
        r[k].opt = train ? kn_adam(c[k], model_params(r[k].m), model_nparams(r[k].m), NULL) : NULL;
        r[k].train = train;
        CHECK(model_batch(c[k], r[k].m, 4, &x[k], &y[k]) == KN_OK);
        if (!train) kn_set_grad_enabled(c[k], 0);
        kn_compile_opts o = {.backend = backends[bi], .mode = k == RO ? KN_MODE_REDUCE_OVERHEAD : KN_MODE_DEFAULT,
                             .params = model_params(r[k].m), .nparams = model_nparams(r[k].m), .name = name};
        if (k != EAGER) f[k] = kn_compile(c[k], body, &r[k], &o);
    }
    for (int step = 0; step < STEPS; step++) {
        kn_tensor *out[NRUN] = {NULL};
        for (int k = 0; k < NRUN; k++) {
            kn_scope_begin(c[k]);
            kn_tensor *in[2] = {x[k], y[k]};
            long n0 = h[k].n;
            kn_status s = k == EAGER ? body(c[k], &r[k], in, 2, &out[k], 1) : kn_call(f[k], in, 2, &out[k], 1);
            if (step >= WARM) allocs[k] += h[k].n - n0;
            CHECK_MSG(s == KN_OK, "%s %s %s step %d: %s", bname[bi], name, train ? "train" : "infer", step,
                      kn_last_error(c[k]));
        }
        if (out[EAGER] && out[DEFAULT] && out[RO]) {
            double e = diff(c[DEFAULT], out[DEFAULT], c[EAGER], out[EAGER]);
            double d = diff(c[RO], out[RO], c[DEFAULT], out[DEFAULT]);
            if (!(e <= worst_e)) worst_e = e;
            if (!(d <= worst_d)) worst_d = d;
        }
        for (int k = 0; k < NRUN; k++) kn_scope_end(c[k]);
    }
    for (int i = 0; i < model_nparams(r[0].m) + model_nbuffers(r[0].m); i++) {
        int pi = i < model_nparams(r[0].m);
        kn_tensor *t[NRUN];
        for (int k = 0; k < NRUN; k++)
            t[k] = pi ? model_params(r[k].m)[i] : model_buffers(r[k].m)[i - model_nparams(r[k].m)];
        double e = diff(c[DEFAULT], t[DEFAULT], c[EAGER], t[EAGER]), d = diff(c[RO], t[RO], c[DEFAULT], t[DEFAULT]);
        if (!(e <= worst_e)) worst_e = e;
        if (!(d <= worst_d)) worst_d = d;
    }
    const char *what = train ? "train step" : "inference";
    kn_fn_info ri;
    kn_fn_stats(f[RO], &ri);
    int compiled = ri.backend && strcmp(ri.backend, "interp") != 0; /* no compiler here (wasm): the interpreter */
    CHECK_MSG(worst_e < 1e-4, "%s %s %s: default differs from eager by %g", bname[bi], name, what, worst_e);
    CHECK_MSG(worst_d == 0, "%s %s %s: reduce-overhead differs from default by %g", bname[bi], name, what, worst_d);
    CHECK_MSG(allocs[RO] == 0 || !compiled, "%s %s %s: reduce-overhead allocated %ld times in %d calls", bname[bi],
              name, what, allocs[RO], STEPS - WARM);
    printf("    %s %s %s: allocations per call: eager %ld, default %ld, reduce-overhead %ld\n", bname[bi], name, what,
           allocs[EAGER] / (STEPS - WARM), allocs[DEFAULT] / (STEPS - WARM), allocs[RO] / (STEPS - WARM));
    for (int k = 0; k < NRUN; k++) {
        kn_fn_info info;
        if (f[k]) {
            kn_fn_stats(f[k], &info);
            CHECK_MSG(info.entries == 1 && info.eager_calls == 0, "%s %s: %d entries", bname[bi], name, info.entries);
        }
        kn_fn_free(f[k]);
        kn_optim_free(r[k].opt);
        model_free(c[k], r[k].m);
        kn_ctx_free(c[k]);
    }
}

/* ---- the output contracts ---- */

static kn_tensor *w_;

static kn_status lin(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user;
    (void)nin;
    (void)nout;
    out[0] = kn_gelu(ctx, kn_linear(ctx, in[0], w_, NULL), 1);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_contract(int bi, kn_mode mode)
{
    Hook h = {0};
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 3, .alloc = hook_alloc, .alloc_user = &h});
    int64_t ws[2] = {7, 5}, xs[2] = {3, 5};
    w_ = kn_param(ctx, kn_randn(ctx, KN_F32, 2, ws));
    kn_tensor *x1 = kn_randn(ctx, KN_F32, 2, xs), *x2 = kn_randn(ctx, KN_F32, 2, xs);
    kn_set_grad_enabled(ctx, 0); /* with grad, a compiled forward's outputs are the tape's: always new */
    kn_compile_opts o = {.backend = backends[bi], .mode = mode, .params = &w_, .nparams = 1, .name = "lin"};
    kn_fn *f = kn_compile(ctx, lin, NULL, &o);
    kn_tensor *want1, *want2, *o1 = NULL, *o2 = NULL;
    CHECK(lin(ctx, NULL, &x1, 1, &want1, 1) == KN_OK && lin(ctx, NULL, &x2, 1, &want2, 1) == KN_OK);
    CHECK(kn_call(f, &x1, 1, &o1, 1) == KN_OK);
    CHECK(o1 && diff(ctx, o1, ctx, want1) < 1e-5);
    kn_tensor *v1 = o1 ? kn_reshape(ctx, o1, 1, (int64_t[]){21}) : NULL; /* a view of call 1's output */
    CHECK(kn_call(f, &x2, 1, &o2, 1) == KN_OK);
    CHECK(o2 && diff(ctx, o2, ctx, want2) < 1e-5);
    kn_fn_info info;
    kn_fn_stats(f, &info);
    if (!info.backend || !strcmp(info.backend, "interp")) { /* no compiler here (wasm): every mode is default's */
        CHECK(o1 != o2 && diff(ctx, o1, ctx, want1) < 1e-5);
    } else if (mode == KN_MODE_REDUCE_OVERHEAD) {
        /* the same handle, and its storage, now hold call 2's values */
        CHECK(o1 == o2);
        CHECK(v1 && diff(ctx, v1, ctx, kn_reshape(ctx, want2, 1, (int64_t[]){21})) < 1e-5);
        kn_free(ctx, o2); /* ignored: the program owns it */
        CHECK(kn_call(f, &x1, 1, &o2, 1) == KN_OK && o2 == o1 && diff(ctx, o1, ctx, want1) < 1e-5);
    } else {
        /* call 1's output and a view of it keep their values */
        CHECK(o1 != o2 && diff(ctx, o1, ctx, want1) < 1e-5);
        CHECK(v1 && diff(ctx, v1, ctx, kn_reshape(ctx, want1, 1, (int64_t[]){21})) < 1e-5);
        /* once nothing refers to an output, the next call reuses its storage: one handle per call */
        kn_free(ctx, o1);
        kn_free(ctx, v1);
        long n0 = h.n;
        kn_tensor *o3 = NULL;
        CHECK(kn_call(f, &x1, 1, &o3, 1) == KN_OK && diff(ctx, o3, ctx, want1) < 1e-5);
        CHECK(diff(ctx, o2, ctx, want2) < 1e-5);
        CHECK_MSG(h.n - n0 <= 2, "a default call allocated %ld times", h.n - n0);
    }
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* ---- writes move storage instead of copying: views and outputs of a written tensor ---- */

typedef struct {
    kn_tensor *w[2];
    kn_optim *opt;
} Sgd;

static kn_status sgd_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Sgd *st = user;
    (void)nin;
    kn_optim_zero_grad(st->opt);
    kn_tensor *loss = kn_mean(ctx, kn_square(ctx, kn_linear(ctx, in[0], st->w[0], st->w[1])), NULL, 0, 0);
    if (!loss || kn_backward(ctx, loss, 0) != KN_OK || kn_optim_step(st->opt) != KN_OK) return kn_last_status(ctx);
    out[0] = loss;
    if (nout > 1) out[1] = st->w[1]; /* the bias after the step: also a write's value */
    return KN_OK;
}

static void test_writes(int bi, kn_mode mode)
{
    kn_ctx *c[2];
    Sgd st[2];
    kn_tensor *x[2], *view[2];
    kn_fn *f = NULL;
    int64_t ws[2] = {6, 5}, bs[1] = {6}, xs[2] = {4, 5};
    for (int k = 0; k < 2; k++) { /* 0: eager, 1: compiled */
        c[k] = kn_ctx_new(&(kn_ctx_opts){.seed = 9});
        st[k].w[0] = kn_param(c[k], kn_randn(c[k], KN_F32, 2, ws));
        st[k].w[1] = kn_param(c[k], kn_randn(c[k], KN_F32, 1, bs));
        x[k] = kn_randn(c[k], KN_F32, 2, xs);
        st[k].opt = kn_adam(c[k], st[k].w, 2, NULL);
        view[k] = kn_keep(c[k], kn_transpose(c[k], st[k].w[0], 0, 1)); /* the user's view of w: (5, 6) */
    }
    kn_compile_opts o = {.backend = backends[bi], .mode = mode, .params = st[1].w, .nparams = 2, .name = "sgd"};
    f = kn_compile(c[1], sgd_body, &st[1], &o);
    double worst = 0;
    for (int step = 0; step < 4; step++) {
        kn_tensor *out[2][2] = {{NULL, NULL}, {NULL, NULL}};
        kn_scope_begin(c[0]);
        kn_scope_begin(c[1]);
        CHECK(sgd_body(c[0], &st[0], &x[0], 1, out[0], 2) == KN_OK);
        CHECK_MSG(kn_call(f, &x[1], 1, out[1], 2) == KN_OK, "%s", kn_last_error(c[1]));
        double d[5] = {out[1][0] ? diff(c[1], out[1][0], c[0], out[0][0]) : INFINITY,
                       out[1][1] ? diff(c[1], out[1][1], c[0], st[0].w[1]) : INFINITY,
                       diff(c[1], st[1].w[0], c[0], st[0].w[0]), diff(c[1], st[1].w[1], c[0], st[0].w[1]),
                       diff(c[1], view[1], c[0], view[0])};
        for (int i = 0; i < 5; i++) worst = d[i] > worst || d[i] != d[i] ? d[i] : worst;
        kn_scope_end(c[0]);
        kn_scope_end(c[1]);
    }
    CHECK_MSG(worst < 1e-5, "%s %s: params, a view of one, or an output that is a written value differ from eager "
              "by %g", bname[bi], mode ? "reduce-overhead" : "default", worst);
    kn_fn_free(f);
    for (int k = 0; k < 2; k++) {
        kn_optim_free(st[k].opt);
        kn_ctx_free(c[k]);
    }
}

int main(void)
{
    ModelCfg mlp = {0}, gpt = {.vocab = 37, .context = 9, .d = 16, .layers = 2, .heads = 2};
    ModelCfg cnn = {.width = 4, .side = 8};
    for (int bi = 0; bi < 2; bi++) {
        for (int train = 1; train >= 0; train--) {
            test_model(bi, "mlp", mlp, train);
            test_model(bi, "gpt", gpt, train);
            test_model(bi, "cnn", cnn, train);
        }
        test_contract(bi, KN_MODE_DEFAULT);
        test_contract(bi, KN_MODE_REDUCE_OVERHEAD);
        test_writes(bi, KN_MODE_DEFAULT);
        test_writes(bi, KN_MODE_REDUCE_OVERHEAD);
    }
    TEST_END("runalloc");
}
