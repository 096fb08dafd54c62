/*
 * test_optim.c — optimizers against PyTorch, initialisers, tensor_assign.
 *
 * The PyTorch part replays tests/ref/data/optim.bin (written by
 * tests/ref/gen_optim.py; the format is at its top): for each configuration,
 * two parameters get a fixed grad before each of 5 steps (set by hand, as a
 * backward would leave it), and after every step both must equal PyTorch's
 * within rtol 1e-5 / atol 1e-6 (f32) or 1e-10 / 1e-12 (f64). A missing file
 * fails. Then: option and parameter errors, a failed step that changes
 * nothing, memory flat over 100 steps, a step after a real kn_backward,
 * initialiser bounds and statistics, and tensor_assign into views.
 *
 * Run from the repository root: build/tests/test_optim
 */
#include <stdlib.h>

#include "test.h"
#include "ref/fixture.h"
#include "../src/core.h"

#define STEPS 5
#define OPTIM_FILE FX_DATA_DIR "/optim.bin"
#define OPTIM_CASES 21

/* ---- helpers ---- */

/* Sets p's grad as a backward leaves it: kept and owned by p (NULL: none). */
static void set_grad(kn_ctx *ctx, kn_tensor *p, kn_tensor *g)
{
    kn_zero_grad(ctx, &p, 1);
    if (!g) return;
    p->grad = kn_keep(ctx, g);
    g->flags |= TF_GRAD;
}

static kn_tensor *from_f64(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, const double *v)
{
    kn_tensor *t = kn_tensor_from(ctx, KN_F64, ndim, shape, v);
    return dt == KN_F64 ? t : kn_to(ctx, t, dt);
}

/* All elements of t as doubles (malloc'd; NULL on failure). */
static double *values(kn_ctx *ctx, kn_tensor *t)
{
    int64_t n = kn_numel(t);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    kn_tensor *w = kn_to(ctx, t, KN_F64);
    if (!v || !w || kn_read(ctx, w, v, (size_t)n * sizeof *v) != KN_OK) {
        free(v);
        return NULL;
    }
    return v;
}

static double fx_elem(const FxTensor *t, int64_t i)
{
    if (t->code == KN_F32) {
        float f;
        memcpy(&f, t->data + i * 4, 4);
        return f;
    }
    double d;
    memcpy(&d, t->data + i * 8, 8);
    return d;
}

/* A fixture tensor with its view recipe (transposes only: all optim.bin uses). */
static kn_tensor *build(kn_ctx *ctx, const FxTensor *f)
{
    if (f->code == FX_ABSENT) return NULL;
    kn_tensor *t = kn_tensor_from(ctx, (kn_dtype)f->code, f->ndim, f->shape, f->data);
    for (int s = 0; s < f->nsteps; s++)
        t = f->steps[s].kind == FX_TRANSPOSE
                ? kn_transpose(ctx, t, (int)f->steps[s].args[0], (int)f->steps[s].args[1]) : NULL;
    return t;
}

/* t equals the fixture tensor want (same shape, values within tolerance);
 * else 0 with the first difference in why. */
static int matches(kn_ctx *ctx, kn_tensor *t, const FxTensor *want, char *why, size_t cap)
{
    double rtol = want->code == KN_F64 ? 1e-10 : 1e-5, atol = want->code == KN_F64 ? 1e-12 : 1e-6;
    if (kn_ndim(t) != want->ndim || kn_numel(t) != want->numel || kn_dtype_of(t) != (kn_dtype)want->code) {
        snprintf(why, cap, "dtype or shape differs");
        return 0;
    }
    double *v = values(ctx, t);
    if (!v) {
        snprintf(why, cap, "cannot read: %s", kn_last_error(ctx));
        return 0;
    }
    int ok = 1;
    for (int64_t i = 0; i < want->numel && ok; i++)
        if (!test_close(v[i], fx_elem(want, i), rtol, atol)) {
            snprintf(why, cap, "element %lld is %.9g, PyTorch %.9g", (long long)i, v[i], fx_elem(want, i));
            ok = 0;
        }
    free(v);
    return ok;
}

static kn_optim *make_optim(kn_ctx *ctx, const FxCase *c, kn_tensor **p)
{
    if (strcmp(c->op, "sgd") == 0 && c->nflt == 4 && c->nint == 2) {
        kn_sgd_opts o = {c->flts[0], c->flts[1], c->flts[2], c->flts[3], (int)c->ints[0], (int)c->ints[1]};
        return kn_sgd(ctx, p, 2, &o);
    }
    if ((strcmp(c->op, "adam") == 0 || strcmp(c->op, "adamw") == 0) && c->nflt == 5 && c->nint == 2) {
        kn_adam_opts o = {c->flts[0], c->flts[1], c->flts[2], c->flts[3], c->flts[4], (int)c->ints[0],
                          (int)c->ints[1]};
        return (c->op[4] == 'w' ? kn_adamw : kn_adam)(ctx, p, 2, &o);
    }
    return NULL;
}

/* ---- against PyTorch ---- */

static void run_case(const FxCase *c)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    kn_tensor *p[2] = {NULL, NULL};
    if (c->nin != 2 + 2 * STEPS || c->nout != 2 * STEPS) {
        CHECK_MSG(0, "%s: %d inputs and %d outputs, expected %d and %d", c->name, c->nin, c->nout,
                  2 + 2 * STEPS, 2 * STEPS);
        kn_ctx_free(ctx);
        return;
    }
    for (int j = 0; j < 2; j++) p[j] = kn_param(ctx, build(ctx, &c->in[j]));
    kn_optim *o = p[0] && p[1] ? make_optim(ctx, c, p) : NULL;
    CHECK_MSG(o != NULL, "%s: %s", c->name, kn_last_error(ctx));
    for (int k = 0; o && k < STEPS; k++) {
        for (int j = 0; j < 2; j++) set_grad(ctx, p[j], build(ctx, &c->in[2 + j * STEPS + k]));
        kn_status s = kn_optim_step(o);
        CHECK_MSG(s == KN_OK, "%s step %d: %s", c->name, k + 1, kn_last_error(ctx));
        for (int j = 0; j < 2; j++) {
            char why[256] = "";
            kn_scope_begin(ctx);
            CHECK_MSG(matches(ctx, p[j], &c->out[2 * k + j], why, sizeof why), "%s step %d param %d: %s",
                      c->name, k + 1, j, why);
            kn_scope_end(ctx);
        }
    }
    kn_optim_free(o);
    kn_ctx_free(ctx);
}

static void test_pytorch(void)
{
    FxFile f;
    FxCase c;
    int n = 0, r;
    if (fx_open(&f, OPTIM_FILE) != 0) {
        CHECK_MSG(0, "%s (run from the repo root; regenerate with /usr/bin/python3 tests/ref/gen_optim.py)",
                  f.error);
        fx_close(&f);
        return;
    }
    while ((r = fx_next(&f, &c)) == 1) {
        run_case(&c);
        fx_case_free(&c);
        n++;
    }
    CHECK_MSG(r == 0, "%s: %s", OPTIM_FILE, f.error);
    CHECK_MSG(n == OPTIM_CASES, "%s: %d cases, expected %d", OPTIM_FILE, n, OPTIM_CASES);
    fx_close(&f);
}

/* ---- errors ---- */

static void test_option_errors(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t sh[2] = {2, 3};
    kn_tensor *p = kn_param(ctx, kn_zeros(ctx, KN_F32, 2, sh));
    kn_tensor *q = kn_param(ctx, kn_zeros(ctx, KN_F32, 1, sh));
    kn_tensor *ps[2] = {p, q};
    const double nan = NAN;

    CHECK(kn_sgd(ctx, ps, 2, NULL) == NULL);
    CHECK_ERR(ctx, "kn_sgd: option 'lr' is 0: SGD has no default");
    kn_sgd_opts so = {-0.1, 0, 0, 0, 0, 0};
    CHECK(kn_sgd(ctx, ps, 2, &so) == NULL);
    CHECK_ERR(ctx, "kn_sgd: option 'lr' is -0.1");
    so = (kn_sgd_opts){0.1, -0.5, 0, 0, 0, 0};
    CHECK(kn_sgd(ctx, ps, 2, &so) == NULL);
    CHECK_ERR(ctx, "option 'momentum' is -0.5");
    so = (kn_sgd_opts){0.1, 0.9, 0, -1, 0, 0};
    CHECK(kn_sgd(ctx, ps, 2, &so) == NULL);
    CHECK_ERR(ctx, "option 'weight_decay' is -1");
    so = (kn_sgd_opts){0.1, 0, 0, 0, 1, 0};
    CHECK(kn_sgd(ctx, ps, 2, &so) == NULL);
    CHECK_ERR(ctx, "option 'nesterov' requires momentum > 0 and dampening 0");
    so = (kn_sgd_opts){0.1, 0.9, 0.1, 0, 1, 0};
    CHECK(kn_sgd(ctx, ps, 2, &so) == NULL);
    CHECK_ERR(ctx, "dampening 0.1");
    so = (kn_sgd_opts){nan, 0, 0, 0, 0, 0};
    CHECK(kn_sgd(ctx, ps, 2, &so) == NULL);
    CHECK_ERR(ctx, "option 'lr' is nan");

    kn_adam_opts ao = {-1, 0, 0, 0, 0, 0, 0};
    CHECK(kn_adam(ctx, ps, 2, &ao) == NULL);
    CHECK_ERR(ctx, "kn_adam: option 'lr' is -1");
    ao = (kn_adam_opts){0, 0, 0, -1e-8, 0, 0, 0};
    CHECK(kn_adam(ctx, ps, 2, &ao) == NULL);
    CHECK_ERR(ctx, "option 'eps' is -1e-08");
    ao = (kn_adam_opts){0, 1.0, 0, 0, 0, 0, 0};
    CHECK(kn_adam(ctx, ps, 2, &ao) == NULL);
    CHECK_ERR(ctx, "option 'beta1' is 1: must be in [0, 1)");
    ao = (kn_adam_opts){0, 0, -0.5, 0, 0, 0, 0};
    CHECK(kn_adamw(ctx, ps, 2, &ao) == NULL);
    CHECK_ERR(ctx, "kn_adamw: option 'beta2' is -0.5");
    ao = (kn_adam_opts){0, 0, nan, 0, 0, 0, 0};
    CHECK(kn_adam(ctx, ps, 2, &ao) == NULL);
    CHECK_ERR(ctx, "option 'beta2' is nan");
    ao = (kn_adam_opts){0, 0, 0, 0, -0.01, 0, 0};
    CHECK(kn_adamw(ctx, ps, 2, &ao) == NULL);
    CHECK_ERR(ctx, "kn_adamw: option 'weight_decay' is -0.01");

    /* zeroed options are valid for Adam and AdamW */
    kn_optim *o = kn_adam(ctx, ps, 2, NULL);
    CHECK_MSG(o != NULL, "%s", kn_last_error(ctx));
    kn_optim_free(o);
    o = kn_adamw(ctx, ps, 2, NULL);
    CHECK_MSG(o != NULL, "%s", kn_last_error(ctx));
    kn_optim_free(o);
    kn_ctx_free(ctx);
}

static void test_param_errors(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t sh[2] = {2, 3};
    kn_tensor *p = kn_param(ctx, kn_zeros(ctx, KN_F32, 2, sh));
    kn_tensor *ints = kn_keep(ctx, kn_zeros(ctx, KN_I64, 2, sh));
    kn_sgd_opts so = {0.1, 0, 0, 0, 0, 0};

    CHECK(kn_sgd(ctx, NULL, 1, &so) == NULL);
    CHECK_ERR(ctx, "kn_sgd: optimizer got an empty parameter list");
    kn_tensor *one[1] = {p};
    CHECK(kn_adam(ctx, one, 0, NULL) == NULL);
    CHECK_ERR(ctx, "kn_adam: optimizer got an empty parameter list");
    kn_tensor *withnull[2] = {p, NULL};
    CHECK(kn_sgd(ctx, withnull, 2, &so) == NULL);
    CHECK_ERR(ctx, "kn_sgd: operand 'params[1]' is NULL");
    kn_tensor *withint[2] = {ints, p};
    CHECK(kn_adamw(ctx, withint, 2, NULL) == NULL);
    CHECK_ERR(ctx, "kn_adamw: params[0] is i64: optimizers need floating-point parameters");
    kn_tensor *dup[3] = {p, ints, p};
    dup[1] = kn_param(ctx, kn_zeros(ctx, KN_F32, 1, sh));
    CHECK(kn_sgd(ctx, dup, 3, &so) == NULL);
    CHECK_ERR(ctx, "params[0] and params[2] are the same tensor");

    /* a NULL made by an earlier failure keeps that failure's message */
    kn_tensor *failed[1] = {kn_zeros(ctx, KN_F32, -1, sh)};
    CHECK(kn_sgd(ctx, failed, 1, &so) == NULL);
    CHECK_ERR(ctx, "kn_zeros:");

    CHECK(kn_optim_step(NULL) == KN_EINVAL);
    kn_optim_zero_grad(NULL);
    kn_optim_free(NULL);
    CHECK(kn_sgd(NULL, one, 1, &so) == NULL);
    kn_ctx_free(ctx);
}

/* A step whose second grad has the wrong shape fails and changes nothing:
 * not the first parameter, not the momentum state (the retry is a first step). */
static void test_failed_step_changes_nothing(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t sa[2] = {2, 3}, sb[1] = {4}, bad[1] = {5};
    double v0[6] = {1, 2, 3, 4, 5, 6}, g0[6] = {0.5, -1, 2, 0, 1, -3};
    double v1[4] = {1, -1, 2, -2}, g1[4] = {1, 1, -1, 2};
    kn_tensor *p[2] = {kn_param(ctx, from_f64(ctx, KN_F32, 2, sa, v0)),
                       kn_param(ctx, from_f64(ctx, KN_F32, 1, sb, v1))};
    kn_sgd_opts so = {0.1, 0.9, 0.5, 0.01, 0, 0}; /* dampening: a first step differs from a later one */
    kn_optim *o = kn_sgd(ctx, p, 2, &so);
    set_grad(ctx, p[0], from_f64(ctx, KN_F32, 2, sa, g0));
    set_grad(ctx, p[1], kn_ones(ctx, KN_F32, 1, bad));
    size_t tensors = kn_live_tensors(ctx);
    CHECK(kn_optim_step(o) == KN_ESHAPE);
    CHECK_ERR(ctx, "kn_optim_step: the grad of params[1] has shape (5), the parameter (4)");
    /* the momentum buffer made for params[0] stays (not yet "started"); no temporary does */
    CHECK_MSG(kn_live_tensors(ctx) == tensors + 1, "%zu tensors, %zu before", kn_live_tensors(ctx), tensors);
    double *now = values(ctx, p[0]);
    CHECK(now && memcmp(now, v0, sizeof v0) == 0);
    free(now);

    set_grad(ctx, p[1], from_f64(ctx, KN_F32, 1, sb, g1));
    CHECK_MSG(kn_optim_step(o) == KN_OK, "%s", kn_last_error(ctx));
    /* first step: buf = g + wd * p (no dampening), p -= lr * buf */
    now = values(ctx, p[0]);
    int ok = now != NULL;
    for (int i = 0; ok && i < 6; i++) ok = test_close(now[i], v0[i] - 0.1 * (g0[i] + 0.01 * v0[i]), 1e-6, 1e-6);
    CHECK_MSG(ok, "params[0] after the retried first step");
    free(now);
    kn_optim_free(o);
    kn_ctx_free(ctx);
}

/* ---- behaviour ---- */

static void test_zero_grad_and_skip(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t sh[1] = {3};
    double v[3] = {1, 2, 3}, g[3] = {1, 1, 1};
    kn_tensor *p[2] = {kn_param(ctx, from_f64(ctx, KN_F32, 1, sh, v)), kn_param(ctx, from_f64(ctx, KN_F32, 1, sh, v))};
    kn_optim *o = kn_adam(ctx, p, 2, NULL);
    set_grad(ctx, p[0], from_f64(ctx, KN_F32, 1, sh, g));
    set_grad(ctx, p[1], from_f64(ctx, KN_F32, 1, sh, g));
    kn_optim_zero_grad(o);
    CHECK(kn_grad(ctx, p[0]) == NULL && kn_grad(ctx, p[1]) == NULL);
    CHECK(kn_optim_step(o) == KN_OK); /* nothing has a grad: nothing moves */
    set_grad(ctx, p[1], from_f64(ctx, KN_F32, 1, sh, g));
    CHECK(kn_optim_step(o) == KN_OK);
    double *a = values(ctx, p[0]), *b = values(ctx, p[1]);
    CHECK(a && memcmp(a, (double[3]){1, 2, 3}, sizeof v) == 0);
    /* Adam's first step moves each element by lr (1e-3) against the grad's sign */
    CHECK(b && test_close(b[0], 1 - 1e-3, 1e-6, 1e-7) && test_close(b[2], 3 - 1e-3, 1e-6, 1e-7));
    free(a);
    free(b);
    /* the step records nothing for autodiff: parameters stay leaves */
    CHECK(p[1]->tape_seq == 0 && kn_is_requires_grad(p[1]));
    kn_optim_free(o);
    kn_ctx_free(ctx);
}

/* After the first step made the state, a step allocates and frees only temporaries. */
static void memory_flat(kn_optim *(*make)(kn_ctx *, kn_tensor **), const char *what)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t sa[2] = {3, 5}, sb[1] = {7};
    kn_tensor *p[2] = {kn_param(ctx, kn_randn(ctx, KN_F32, 2, sa)), kn_param(ctx, kn_randn(ctx, KN_F32, 1, sb))};
    set_grad(ctx, p[0], kn_randn(ctx, KN_F32, 2, sa));
    set_grad(ctx, p[1], kn_randn(ctx, KN_F32, 1, sb));
    size_t t0 = kn_live_tensors(ctx), b0 = kn_live_bytes(ctx);
    kn_optim *o = make(ctx, p);
    CHECK(kn_optim_step(o) == KN_OK);
    size_t t1 = kn_live_tensors(ctx), b1 = kn_live_bytes(ctx);
    int flat = 1, ok = 1;
    for (int k = 0; k < 100; k++) {
        ok &= kn_optim_step(o) == KN_OK;
        flat &= kn_live_tensors(ctx) == t1 && kn_live_bytes(ctx) == b1;
    }
    CHECK_MSG(ok && flat, "%s: %zu tensors / %zu bytes after 101 steps, %zu / %zu after the first", what,
              kn_live_tensors(ctx), kn_live_bytes(ctx), t1, b1);
    kn_optim_free(o);
    CHECK_MSG(kn_live_tensors(ctx) == t0 && kn_live_bytes(ctx) == b0, "%s: the optimizer's state outlived it", what);
    kn_ctx_free(ctx);
}

static kn_optim *make_sgd(kn_ctx *ctx, kn_tensor **p)
{
    kn_sgd_opts o = {0.01, 0.9, 0, 1e-4, 1, 0};
    return kn_sgd(ctx, p, 2, &o);
}

static kn_optim *make_adam(kn_ctx *ctx, kn_tensor **p)
{
    kn_adam_opts o = {0, 0, 0, 0, 0.1, 1, 0};
    return kn_adam(ctx, p, 2, &o);
}

static kn_optim *make_adamw(kn_ctx *ctx, kn_tensor **p) { return kn_adamw(ctx, p, 2, NULL); }

static void test_memory(void)
{
    memory_flat(make_sgd, "sgd");
    memory_flat(make_adam, "adam");
    memory_flat(make_adamw, "adamw");
}

/* loss = sum((w - t)^2): grad 2 (w - t); SGD moves w to w - lr * 2 (w - t). */
static void test_with_backward(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t sh[1] = {4};
    double w0[4] = {1, -2, 0.5, 3}, t[4] = {0, 1, 1, 1};
    kn_tensor *w = kn_param(ctx, from_f64(ctx, KN_F32, 1, sh, w0));
    kn_tensor *target = kn_keep(ctx, from_f64(ctx, KN_F32, 1, sh, t));
    kn_sgd_opts so = {0.25, 0, 0, 0, 0, 0};
    kn_optim *o = kn_sgd(ctx, &w, 1, &so);
    double want[4];
    memcpy(want, w0, sizeof want);
    int ok = 1;
    size_t tensors = 0;
    for (int k = 0; k < 3; k++) {
        kn_scope_begin(ctx);
        kn_tensor *loss = kn_sum(ctx, kn_square(ctx, kn_sub(ctx, w, target)), NULL, 0, 0);
        ok &= kn_backward(ctx, loss, 0) == KN_OK && kn_optim_step(o) == KN_OK;
        kn_optim_zero_grad(o);
        kn_scope_end(ctx);
        for (int i = 0; i < 4; i++) want[i] -= 0.25 * 2 * (want[i] - t[i]);
        if (k == 0) tensors = kn_live_tensors(ctx);
        ok &= kn_live_tensors(ctx) == tensors;
    }
    CHECK_MSG(ok, "%s", kn_last_error(ctx));
    double *v = values(ctx, w);
    ok = v != NULL;
    for (int i = 0; ok && i < 4; i++) ok = test_close(v[i], want[i], 1e-6, 1e-6);
    CHECK_MSG(ok, "w after 3 steps: %g %g %g %g", v ? v[0] : 0, v ? v[1] : 0, v ? v[2] : 0, v ? v[3] : 0);
    free(v);
    CHECK(kn_grad(ctx, w) == NULL);
    kn_optim_free(o);
    kn_ctx_free(ctx);
}

/* An f16 parameter steps in f16 (within f16 rounding of the f32 result). */
static void test_f16(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t sh[1] = {3};
    double v[3] = {1, -0.5, 2}, g[3] = {0.5, 1, -2};
    kn_tensor *p = kn_param(ctx, from_f64(ctx, KN_F16, 1, sh, v));
    kn_optim *o = kn_adam(ctx, &p, 1, &(kn_adam_opts){0.01, 0, 0, 0, 0, 0, 0});
    set_grad(ctx, p, from_f64(ctx, KN_F16, 1, sh, g));
    CHECK_MSG(kn_optim_step(o) == KN_OK, "%s", kn_last_error(ctx));
    double *r = values(ctx, p);
    CHECK(r && kn_dtype_of(p) == KN_F16 && test_close(r[0], 0.99, 2e-3, 0) && test_close(r[1], -0.51, 2e-3, 0) &&
          test_close(r[2], 2.01, 2e-3, 0));
    free(r);
    kn_optim_free(o);
    kn_ctx_free(ctx);
}

/* ---- initialisers ---- */

static void stats(const double *v, int64_t n, double *mean, double *var, double *lo, double *hi)
{
    double s = 0, ss = 0;
    *lo = INFINITY, *hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        s += v[i];
        *lo = v[i] < *lo ? v[i] : *lo;
        *hi = v[i] > *hi ? v[i] : *hi;
    }
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    *var = ss / (double)(n - 1);
}

/* Values within [lo, hi] reaching near both ends; mean and variance of U(lo, hi) within ~5 sigma. */
static void check_uniform(kn_ctx *ctx, kn_tensor *t, double lo, double hi, const char *what)
{
    int64_t n = kn_numel(t);
    double *v = values(ctx, t), mean, var, mn, mx, w = hi - lo;
    if (!v) {
        CHECK_MSG(0, "%s: %s", what, kn_last_error(ctx));
        return;
    }
    stats(v, n, &mean, &var, &mn, &mx);
    CHECK_MSG(mn >= lo && mx <= hi && mn < lo + 0.01 * w && mx > hi - 0.01 * w, "%s: range [%g, %g]", what, mn, mx);
    CHECK_MSG(fabs(mean - (lo + hi) / 2) < 5 * w / sqrt(12.0 * (double)n), "%s: mean %g", what, mean);
    CHECK_MSG(fabs(var / (w * w / 12) - 1) < 5 * sqrt(0.8 / (double)n), "%s: variance %g, expected %g", what, var,
              w * w / 12);
    free(v);
}

static void test_init(void)
{
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){NULL, NULL, 42});
    int64_t sh[2] = {200, 100}, conv[4] = {64, 32, 3, 3}, lin[2] = {50, 40}, empty[2] = {0, 5};
    kn_tensor *u = kn_uniform(ctx, KN_F32, 2, sh, -2, 3);
    CHECK(u && kn_dtype_of(u) == KN_F32 && kn_numel(u) == 20000);
    check_uniform(ctx, u, -2, 3, "uniform f32");
    check_uniform(ctx, kn_uniform(ctx, KN_F64, 2, sh, 0.5, 0.75), 0.5, 0.75, "uniform f64");

    /* nn.Conv2d(32, 64, 3)'s default: a = sqrt(5), bound = 1 / sqrt(fan_in) with fan_in 32 * 3 * 3 */
    kn_tensor *k = kn_kaiming_uniform(ctx, KN_F32, 4, conv, sqrt(5.0));
    CHECK(k && kn_ndim(k) == 4 && kn_numel(k) == 64 * 32 * 9);
    double b = 1 / sqrt(288.0);
    check_uniform(ctx, k, -b, b, "kaiming conv");
    b = sqrt(2.0) * sqrt(3.0 / 40); /* a = 0: gain sqrt(2) */
    check_uniform(ctx, kn_kaiming_uniform(ctx, KN_F64, 2, lin, 0), -b, b, "kaiming a=0");
    kn_tensor *e = kn_kaiming_uniform(ctx, KN_F32, 2, empty, sqrt(5.0));
    CHECK(e && kn_numel(e) == 0);

    /* the context's seed decides the values */
    kn_manual_seed(ctx, 7);
    double *x = values(ctx, kn_uniform(ctx, KN_F32, 1, sh, -1, 1));
    kn_manual_seed(ctx, 7);
    double *y = values(ctx, kn_uniform(ctx, KN_F32, 1, sh, -1, 1));
    CHECK(x && y && memcmp(x, y, 200 * sizeof *x) == 0);
    free(x);
    free(y);

    CHECK(kn_kaiming_uniform(ctx, KN_F32, 1, sh, 0) == NULL);
    CHECK_ERR(ctx, "kn_kaiming_uniform: fan_in needs at least 2 dims");
    CHECK(kn_kaiming_uniform(ctx, KN_F32, 2, sh, NAN) == NULL);
    CHECK_ERR(ctx, "kn_kaiming_uniform: negative slope");
    CHECK(kn_kaiming_uniform(ctx, KN_I32, 2, sh, 0) == NULL);
    CHECK_ERR(ctx, "kn_kaiming_uniform:");
    CHECK(kn_uniform(ctx, KN_F32, 2, sh, 1, 0) == NULL);
    CHECK_ERR(ctx, "kn_uniform: bounds lo 1 and hi 0");
    CHECK(kn_uniform(ctx, KN_I64, 2, sh, 0, 1) == NULL);
    CHECK_ERR(ctx, "kn_uniform:");
    kn_ctx_free(ctx);
}

/* ---- tensor_assign ---- */

static void test_assign(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t s43[2] = {4, 3}, s34[2] = {3, 4}, s26[2] = {2, 6}, s23[2] = {2, 3}, s14[2] = {1, 4}, s35[2] = {3, 5};
    double src[12], got[12];
    for (int i = 0; i < 12; i++) src[i] = i + 0.5;

    /* into a transposed view: base[j][i] = src[i][j], cast f64 -> f32 */
    kn_tensor *base = kn_zeros(ctx, KN_F32, 2, s43), *dst = kn_transpose(ctx, base, 0, 1);
    CHECK(!kn_is_contiguous(dst));
    CHECK(tensor_assign(ctx, dst, kn_tensor_from(ctx, KN_F64, 2, s34, src)) == KN_OK);
    double *b = values(ctx, base);
    int ok = b != NULL;
    for (int j = 0; ok && j < 4; j++)
        for (int i = 0; i < 3; i++) ok &= b[j * 3 + i] == src[i * 4 + j];
    CHECK_MSG(ok, "assign into a transposed view");
    free(b);

    /* into a strided slice, from i32: columns 1, 3, 5 written, the rest untouched */
    int32_t iv[6] = {-1, -2, -3, 4, 5, 6};
    base = kn_full(ctx, KN_F32, 2, s26, 9);
    dst = kn_slice(ctx, base, 1, 1, 6, 2);
    CHECK(tensor_assign(ctx, dst, kn_tensor_from(ctx, KN_I32, 2, s23, iv)) == KN_OK);
    b = values(ctx, base);
    CHECK(b && memcmp(b, (double[12]){9, -1, 9, -2, 9, -3, 9, 4, 9, 5, 9, 6}, sizeof got) == 0);
    free(b);

    /* from an expanded (stride 0) source; float to int truncates */
    double row[4] = {1.9, -2.7, 3, 0.2};
    kn_tensor *di = kn_zeros(ctx, KN_I32, 2, s34);
    CHECK(tensor_assign(ctx, di, kn_expand(ctx, kn_tensor_from(ctx, KN_F64, 2, s14, row), 2, s34)) == KN_OK);
    b = values(ctx, di);
    CHECK(b && b[0] == 1 && b[1] == -2 && b[2] == 3 && b[3] == 0 && b[8] == 1 && b[11] == 0);
    free(b);

    /* dst and src share storage: x = x^T reads all of x first */
    for (int i = 0; i < 9; i++) got[i] = i;
    int64_t s33[2] = {3, 3};
    kn_tensor *x = kn_tensor_from(ctx, KN_F64, 2, s33, got);
    CHECK(tensor_assign(ctx, x, kn_transpose(ctx, x, 0, 1)) == KN_OK);
    b = values(ctx, x);
    CHECK(b && memcmp(b, (double[9]){0, 3, 6, 1, 4, 7, 2, 5, 8}, 9 * sizeof *b) == 0);
    free(b);
    CHECK(tensor_assign(ctx, x, x) == KN_OK);

    /* errors leave dst as it was */
    kn_tensor *d = kn_zeros(ctx, KN_F32, 2, s34);
    CHECK(tensor_assign(ctx, d, kn_ones(ctx, KN_F32, 2, s35)) == KN_ESHAPE);
    CHECK_ERR(ctx, "tensor_assign: dst (3, 4) and src (3, 5) differ at dim 1 (4 vs 5)");
    CHECK(tensor_assign(ctx, d, kn_ones(ctx, KN_F32, 1, s34)) == KN_ESHAPE);
    CHECK_ERR(ctx, "differ in rank (2 vs 1 dims)");
    CHECK(tensor_assign(ctx, d, NULL) == KN_EINVAL);
    CHECK_ERR(ctx, "operand 'src' is NULL");
    kn_tensor *sym = tensor_symbolic(ctx, KN_F32, 2, s34, 0);
    CHECK(tensor_assign(ctx, sym, d) == KN_EUNSUPPORTED);
    CHECK_ERR(ctx, "operand 'dst' is symbolic");
    CHECK(tensor_assign(ctx, d, sym) == KN_EUNSUPPORTED);
    CHECK_ERR(ctx, "operand 'src' is symbolic");
    b = values(ctx, d);
    ok = b != NULL;
    for (int i = 0; ok && i < 12; i++) ok = b[i] == 0;
    CHECK(ok);
    free(b);
    kn_ctx_free(ctx);
}

int main(void)
{
    (void)fx_scalar_value; /* fixture.h's reader for Python-number inputs: optim.bin has none */
    test_pytorch();
    test_option_errors();
    test_param_errors();
    test_failed_step_changes_nothing();
    test_zero_grad_and_skip();
    test_memory();
    test_with_backward();
    test_f16();
    test_init();
    test_assign();
    TEST_END("optim");
}
