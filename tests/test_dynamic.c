/*
 * test_dynamic.c — dynamic shapes in kn_compile: a batch sweep recompiles
 * as dynamic=auto, on and off say, every call equal to eager, and backends
 * tcc and c compile a generic entry once (kn_fn_info.compiles); what cannot
 * be generic specialises (and says why); the guards of a symbolic dim;
 * random draws of a dynamic size, generic and eager's bits.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "test.h"
#include "../src/cli/models.h"
#include "../port/port.h"

static kn_backend backends[3] = {KN_BACKEND_INTERP, KN_BACKEND_TCC, KN_BACKEND_C};
static const char *bname[3] = {"interp", "tcc", "c"};
static const char *dname[3] = {"auto", "on", "off"};

static char logbuf[16384];
static void sink(void *user, const char *line)
{
    (void)user;
    size_t n = strlen(logbuf);
    snprintf(logbuf + n, sizeof logbuf - n, "%s\n", line);
}

static const int64_t sweep[5] = {8, 16, 24, 5, 33};

/* the entries a sweep of 5 sizes makes, per dynamic setting: auto, a static one and a generic one; on,
 * one generic; off, one per size (on every backend: tcc and c compile a generic entry once) */
static int want_entries(int dyn) { return dyn == 2 ? 5 : dyn == 0 ? 2 : 1; }

/* Programs compiled with code, for f's entries of graphs graphs each (compiled backends, where a compiler
 * is here: the wasm leg has none and runs on the interpreter). */
static int want_compiles(int bi, int entries, int graphs)
{
    int code = (bi == 1 && port_jit_available(PORT_TCC)) || (bi == 2 && port_jit_available(PORT_CC));
    return code ? entries * graphs : 0;
}

/* ---- inference: logits and the mean loss of mlp ---- */

typedef struct {
    Model *m;
} Net;

static kn_status infer_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Net *n = user;
    (void)nin;
    (void)nout;
    out[0] = model_forward(ctx, n->m, in[0], 0);
    out[1] = out[0] ? kn_cross_entropy(ctx, out[0], in[1], NULL) : NULL;
    return out[1] ? KN_OK : kn_last_status(ctx);
}

/* x as a transposed view of a (784, B) tensor when strided: not contiguous */
static kn_tensor *features(kn_ctx *ctx, kn_tensor *x, int strided)
{
    if (!strided) return x;
    return kn_transpose(ctx, kn_contiguous(ctx, kn_transpose(ctx, x, 0, 1)), 0, 1);
}

static void test_infer_sweep(int bi, int dyn, int strided)
{
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 11});
    ModelCfg cfg = {0};
    Model *m = model_new(ctx, "mlp", &cfg);
    Net n = {m};
    kn_set_log(ctx, sink, NULL);
    kn_set_logs(ctx, "recompiles");
    kn_set_grad_enabled(ctx, 0);
    kn_compile_opts o = {.backend = backends[bi], .dynamic = (kn_dynamic)dyn, .params = model_params(m),
                         .nparams = model_nparams(m), .name = "mlp_infer"};
    kn_fn *f = kn_compile(ctx, infer_body, &n, &o);
    CHECK(f != NULL);
    logbuf[0] = 0;
    for (int c = 0; c < 5; c++) {
        kn_scope_begin(ctx);
        kn_tensor *x, *y, *out[2] = {0}, *want[2] = {0};
        CHECK(model_batch(ctx, m, sweep[c], &x, &y) == KN_OK);
        kn_tensor *in[2] = {features(ctx, x, strided), y};
        kn_status s = kn_call(f, in, 2, out, 2);
        CHECK_MSG(s == KN_OK, "%s %s B=%lld: %s", bname[bi], dname[dyn], (long long)sweep[c], kn_last_error(ctx));
        CHECK(infer_body(ctx, &n, in, 2, want, 2) == KN_OK);
        for (int k = 0; k < 2 && s == KN_OK; k++) {
            double d = test_rel_diff(ctx, out[k], ctx, want[k]);
            CHECK_MSG(d < 1e-5, "%s %s%s B=%lld out[%d]: differs from eager by %g", bname[bi], dname[dyn],
                      strided ? " strided" : "", (long long)sweep[c], k, d);
        }
        kn_free(ctx, x);
        kn_free(ctx, y);
        kn_scope_end(ctx);
    }
    kn_fn_info info;
    CHECK(kn_fn_stats(f, &info) == KN_OK);
    CHECK_MSG(info.calls == 5 && info.entries == want_entries(dyn) && info.eager_calls == 0 &&
              info.compiles == want_compiles(bi, info.entries, 1),
              "%s %s: %d calls, %d entries, %d eager, %d compiles; log: %s", bname[bi], dname[dyn], info.calls,
              info.entries, info.eager_calls, info.compiles, logbuf);
    if (dyn == 0) {
        CHECK_MSG(strstr(logbuf, "in[0] dim 0: expected 8, got 16") != NULL, "log: %s", logbuf);
        CHECK_MSG(strstr(logbuf, "in[0] dim 0 changed (8, then 16): dynamic from now on") != NULL, "log: %s", logbuf);
    }
    if (dyn != 2) {
        /* x's and y's batch dims are s0; the arena is a formula in it */
        CHECK_MSG(info.symbolic_dims == 2, "%s %s: %d symbolic dims", bname[bi], dname[dyn], info.symbolic_dims);
        CHECK_MSG(strstr(logbuf, "is generic in s0 = in[0] dim 0") != NULL, "log: %s", logbuf);
    }
    if (dyn == 2) CHECK_MSG(strstr(logbuf, "dynamic from now on") == NULL && info.symbolic_dims == 0, "log: %s", logbuf);
    kn_fn_free(f);
    model_free(ctx, m);
    kn_ctx_free(ctx);
}

/* ---- a whole training step with Adam, in two contexts ---- */

typedef struct {
    Model *m;
    kn_optim *opt;
} Step;

static kn_status step_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Step *st = user;
    (void)nin;
    (void)nout;
    kn_optim_zero_grad(st->opt);
    kn_tensor *loss = model_loss(ctx, st->m, in[0], in[1], 1);
    if (!loss || kn_backward(ctx, loss, 0) != KN_OK || kn_optim_step(st->opt) != KN_OK) return kn_last_status(ctx);
    out[0] = loss;
    return KN_OK;
}

/* b's tensor t as a tensor of a */
static kn_tensor *across(kn_ctx *a, kn_ctx *b, kn_tensor *t)
{
    float *buf = malloc((size_t)kn_numel(t) * 4 + 4);
    kn_read(b, t, buf, (size_t)kn_numel(t) * 4);
    kn_tensor *r = kn_tensor_from(a, KN_F32, kn_ndim(t), kn_shape(t), buf);
    free(buf);
    return r;
}

/* sgd: SGD with momentum, whose first step (no buffer yet) traces another
 * graph; want: the entries expected (0: want_entries), why: a log line expected */
static void test_train_sweep(int bi, int dyn, const char *model, ModelCfg cfg, int sgd, int want, const char *why)
{
    kn_ctx *ca = kn_ctx_new(&(kn_ctx_opts){.seed = 5}), *cb = kn_ctx_new(&(kn_ctx_opts){.seed = 5});
    Model *ma = model_new(ca, model, &cfg), *mb = model_new(cb, model, &cfg);
    kn_sgd_opts so = {.lr = 0.05, .momentum = 0.9};
    Step sa = {ma, sgd ? kn_sgd(ca, model_params(ma), model_nparams(ma), &so)
                       : kn_adam(ca, model_params(ma), model_nparams(ma), NULL)};
    Step sb = {mb, sgd ? kn_sgd(cb, model_params(mb), model_nparams(mb), &so)
                       : kn_adam(cb, model_params(mb), model_nparams(mb), NULL)};
    kn_set_log(ca, sink, NULL);
    kn_set_logs(ca, "recompiles");
    logbuf[0] = 0;
    kn_compile_opts o = {.backend = backends[bi], .dynamic = (kn_dynamic)dyn, .params = model_params(ma),
                         .nparams = model_nparams(ma), .name = model};
    kn_fn *f = kn_compile(ca, step_body, &sa, &o);
    double worst_loss = 0, worst = 0;
    for (int c = 0; c < 5; c++) {
        kn_scope_begin(ca);
        kn_scope_begin(cb);
        kn_tensor *x = NULL, *y = NULL, *x2 = NULL, *y2 = NULL, *la[1] = {0}, *lb[1] = {0};
        CHECK(model_batch(ca, ma, sweep[c], &x, &y) == KN_OK && model_batch(cb, mb, sweep[c], &x2, &y2) == KN_OK);
        kn_tensor *in[2] = {x, y}, *in2[2] = {x2, y2};
        kn_status s = kn_call(f, in, 2, la, 1);
        CHECK_MSG(s == KN_OK, "%s %s %s B=%lld: %s", bname[bi], dname[dyn], model, (long long)sweep[c],
                  kn_last_error(ca));
        CHECK(step_body(cb, &sb, in2, 2, lb, 1) == KN_OK);
        double a = 0, b = 0;
        if (!s) kn_item(ca, la[0], &a);
        kn_item(cb, lb[0], &b);
        double d = fabs(a - b) / fabs(b);
        if (!(d <= worst_loss)) worst_loss = d;
        for (int i = 0; i < model_nparams(ma); i++) {
            kn_tensor *t = across(ca, cb, model_params(mb)[i]);
            double pd = test_rel_diff(ca, model_params(ma)[i], ca, t);
            kn_free(ca, t);
            if (!(pd <= worst)) worst = pd;
        }
        kn_free(ca, x), kn_free(ca, y), kn_free(cb, x2), kn_free(cb, y2);
        kn_scope_end(ca);
        kn_scope_end(cb);
    }
    CHECK_MSG(worst_loss < 1e-4 && worst < 1e-4, "%s %s %s: loss rel err %g, params %g", bname[bi], dname[dyn], model,
              worst_loss, worst);
    kn_fn_info info;
    kn_fn_stats(f, &info);
    CHECK_MSG(info.entries == (want ? want : want_entries(dyn)) && info.eager_calls == 0 &&
              info.compiles == want_compiles(bi, info.entries, 1),
              "%s %s %s: %d entries, %d compiles; log: %s", bname[bi], dname[dyn], model, info.entries, info.compiles,
              logbuf);
    if (why) CHECK_MSG(strstr(logbuf, why) != NULL, "%s %s %s: log: %s", bname[bi], dname[dyn], model, logbuf);
    kn_fn_free(f);
    kn_optim_free(sa.opt);
    kn_optim_free(sb.opt);
    model_free(ca, ma);
    model_free(cb, mb);
    kn_ctx_free(ca);
    kn_ctx_free(cb);
}

/* ---- a compiled forward whose backward runs later (a tape region) ---- */

static kn_status fwd_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Net *n = user;
    (void)nin;
    (void)nout;
    out[0] = model_forward(ctx, n->m, in[0], 1);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_region_sweep(int bi, int dyn)
{
    kn_ctx *ca = kn_ctx_new(&(kn_ctx_opts){.seed = 3}), *cb = kn_ctx_new(&(kn_ctx_opts){.seed = 3});
    ModelCfg cfg = {0};
    Model *ma = model_new(ca, "mlp", &cfg), *mb = model_new(cb, "mlp", &cfg);
    Net na = {ma};
    kn_set_log(ca, sink, NULL);
    kn_set_logs(ca, "recompiles");
    logbuf[0] = 0;
    kn_compile_opts o = {.backend = backends[bi], .dynamic = (kn_dynamic)dyn, .params = model_params(ma),
                         .nparams = model_nparams(ma), .name = "mlp_fwd"};
    kn_fn *f = kn_compile(ca, fwd_body, &na, &o);
    double worst = 0;
    for (int c = 0; c < 5; c++) {
        kn_scope_begin(ca);
        kn_scope_begin(cb);
        kn_tensor *x = NULL, *y = NULL, *x2 = NULL, *y2 = NULL, *logits[1] = {0};
        CHECK(model_batch(ca, ma, sweep[c], &x, &y) == KN_OK && model_batch(cb, mb, sweep[c], &x2, &y2) == KN_OK);
        kn_status s = kn_call(f, &x, 1, logits, 1);
        CHECK_MSG(s == KN_OK, "%s %s region B=%lld: %s", bname[bi], dname[dyn], (long long)sweep[c], kn_last_error(ca));
        kn_tensor *la = s ? NULL : kn_cross_entropy(ca, logits[0], y, NULL), *lb = model_loss(cb, mb, x2, y2, 1);
        CHECK(la && kn_backward(ca, la, 0) == KN_OK);
        CHECK(lb && kn_backward(cb, lb, 0) == KN_OK);
        for (int i = 0; la && lb && i < model_nparams(ma); i++) {
            kn_tensor *ga = kn_grad(ca, model_params(ma)[i]), *gb = kn_grad(cb, model_params(mb)[i]);
            kn_tensor *t = gb ? across(ca, cb, gb) : NULL;
            double d = ga && t ? test_rel_diff(ca, ga, ca, t) : INFINITY;
            if (!(d <= worst)) worst = d;
        }
        kn_zero_grad(ca, model_params(ma), model_nparams(ma));
        kn_zero_grad(cb, model_params(mb), model_nparams(mb));
        kn_free(ca, x), kn_free(ca, y), kn_free(cb, x2), kn_free(cb, y2);
        kn_scope_end(ca);
        kn_scope_end(cb);
    }
    CHECK_MSG(worst < 1e-4, "%s %s region: grads differ from eager by %g", bname[bi], dname[dyn], worst);
    kn_fn_info info;
    kn_fn_stats(f, &info);
    CHECK_MSG(info.entries == want_entries(dyn) && info.graphs == 2 && info.compiles == want_compiles(bi, info.entries, 2),
              "%s %s region: %d entries, %d graphs, %d compiles; log: %s", bname[bi], dname[dyn], info.entries,
              info.graphs, info.compiles, logbuf);
    kn_fn_free(f);
    model_free(ca, ma);
    model_free(cb, mb);
    kn_ctx_free(ca);
    kn_ctx_free(cb);
}

/* ---- one program for every size: backends tcc and c compile a generic entry once ---- */

/* x (S, 12), w (12, 7): a dot with s0 as M and a gelu epilogue; a softmax along s0 (its innermost
 * loops of s0 iterations); dots with s0 as K, and as M and N; a mean over s0 (a divisor in s0) */
static kn_status mix_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    kn_tensor *x = in[0], *a = kn_gelu(ctx, kn_matmul(ctx, x, in[1]), 1);   /* (S, 7) */
    kn_tensor *b = kn_softmax(ctx, kn_transpose(ctx, a, 0, 1), 1);          /* (7, S) */
    kn_tensor *g = kn_matmul(ctx, x, kn_transpose(ctx, x, 0, 1));           /* (S, S) */
    out[0] = kn_add(ctx, kn_matmul(ctx, b, x), kn_mean(ctx, x, (int[]){0}, 1, 1)); /* (7, 12) */
    out[1] = kn_add(ctx, kn_amax(ctx, kn_matmul(ctx, kn_exp(ctx, kn_mul(ctx, g, kn_scalar(ctx, 0.1))), x), (int[]){0}, 1, 0),
                    kn_sum(ctx, a, NULL, 0, 0)); /* (12) */
    return out[0] && out[1] ? KN_OK : kn_last_status(ctx);
}

static void test_generic_sweep(int bi, int dyn)
{
    static const int64_t sizes[9] = {6, 13, 2, 3, 9, 17, 64, 7, 33}; /* odd ones, and not multiples of 8 */
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 9});
    kn_set_log(ctx, sink, NULL);
    kn_set_logs(ctx, "recompiles");
    logbuf[0] = 0;
    kn_compile_opts o = {.backend = backends[bi], .dynamic = (kn_dynamic)dyn, .name = "mix"};
    kn_fn *f = kn_compile(ctx, mix_body, NULL, &o);
    int64_t ws[2] = {12, 7};
    kn_tensor *w = kn_keep(ctx, kn_randn(ctx, KN_F32, 2, ws));
    for (int c = 0; c < 9; c++) {
        kn_scope_begin(ctx);
        int64_t xs[2] = {sizes[c], 12};
        kn_tensor *in[2] = {kn_randn(ctx, KN_F32, 2, xs), w}, *out[2] = {0}, *want[2] = {0};
        kn_status s = kn_call(f, in, 2, out, 2);
        CHECK_MSG(s == KN_OK, "%s %s mix S=%lld: %s", bname[bi], dname[dyn], (long long)sizes[c], kn_last_error(ctx));
        CHECK(mix_body(ctx, NULL, in, 2, want, 2) == KN_OK);
        for (int k = 0; k < 2 && s == KN_OK; k++) {
            double d = test_rel_diff(ctx, out[k], ctx, want[k]);
            CHECK_MSG(d < 1e-5, "%s %s mix S=%lld out[%d]: differs from eager by %g", bname[bi], dname[dyn],
                      (long long)sizes[c], k, d);
        }
        kn_scope_end(ctx);
    }
    kn_fn_info info;
    CHECK(kn_fn_stats(f, &info) == KN_OK);
    int entries = dyn == 0 ? 2 : 1; /* auto: 6 static, then one generic entry from 13 on */
    CHECK_MSG(info.entries == entries && info.compiles == want_compiles(bi, entries, 1) && info.symbolic_dims == 1,
              "%s %s mix: %d entries, %d compiles, %d symbolic dims; log: %s", bname[bi], dname[dyn], info.entries,
              info.compiles, info.symbolic_dims, logbuf);
    CHECK_MSG(strstr(logbuf, "is generic in s0") && !strstr(logbuf, "specialised") && !strstr(logbuf, "compiled for it"),
              "%s %s mix: log: %s", bname[bi], dname[dyn], logbuf);
    kn_free(ctx, w);
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* ---- random numbers in a dynamic dim: generic, and eager's bits ---- */

/* x (B, 3) plus a draw of its shape, and dropout(x): the generator advances by 3B twice a call, a size
 * affine in B, so the entry stays generic */
static kn_status rand_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    out[0] = kn_add(ctx, in[0], kn_rand(ctx, KN_F32, kn_ndim(in[0]), kn_shape(in[0])));
    out[1] = kn_dropout(ctx, in[0], 0.5, 1);
    return out[0] && out[1] ? KN_OK : kn_last_status(ctx);
}

/* t of ca and u of cb hold the same bytes (f32) */
static int same_bits(kn_ctx *ca, kn_tensor *t, kn_ctx *cb, kn_tensor *u)
{
    int64_t n = t && u ? kn_numel(t) : 0;
    float *x = malloc((size_t)n * 4 + 4), *y = malloc((size_t)n * 4 + 4);
    int same = n && n == kn_numel(u) && x && y && kn_read(ca, t, x, (size_t)n * 4) == KN_OK &&
               kn_read(cb, u, y, (size_t)n * 4) == KN_OK && memcmp(x, y, (size_t)n * 4) == 0;
    free(x), free(y);
    return same;
}

static void test_rand_sweep(int bi, int dyn)
{
    kn_ctx *ca = kn_ctx_new(&(kn_ctx_opts){.seed = 21}), *cb = kn_ctx_new(&(kn_ctx_opts){.seed = 21});
    kn_set_grad_enabled(ca, 0), kn_set_grad_enabled(cb, 0);
    kn_set_log(ca, sink, NULL);
    kn_set_logs(ca, "recompiles");
    logbuf[0] = 0;
    kn_compile_opts o = {.backend = backends[bi], .dynamic = (kn_dynamic)dyn, .name = "rand"};
    kn_fn *f = kn_compile(ca, rand_body, NULL, &o);
    int same = 1;
    for (int c = 0; c < 10; c++) { /* the sweep twice: the second time, every size has its entry */
        kn_scope_begin(ca), kn_scope_begin(cb);
        int64_t xs[2] = {sweep[c % 5], 3}, one = 1;
        kn_tensor *xa = kn_ones(ca, KN_F32, 2, xs), *xb = kn_ones(cb, KN_F32, 2, xs), *oa[2] = {0}, *ob[2] = {0};
        CHECK_MSG(kn_call(f, &xa, 1, oa, 2) == KN_OK, "%s %s rand B=%lld: %s", bname[bi], dname[dyn],
                  (long long)xs[0], kn_last_error(ca));
        CHECK(rand_body(cb, NULL, &xb, 1, ob, 2) == KN_OK);
        same &= same_bits(ca, oa[0], cb, ob[0]) && same_bits(ca, oa[1], cb, ob[1]);
        same &= same_bits(ca, kn_rand(ca, KN_F32, 1, &one), cb, kn_rand(cb, KN_F32, 1, &one)); /* the state too */
        kn_scope_end(ca), kn_scope_end(cb);
    }
    kn_fn_info info;
    CHECK(kn_fn_stats(f, &info) == KN_OK);
    int entries = want_entries(dyn);
    CHECK_MSG(same && info.entries == entries && info.compiles == want_compiles(bi, entries, 1),
              "%s %s rand: eager's bits %d; %d entries, %d compiles; log: %s", bname[bi], dname[dyn], same,
              info.entries, info.compiles, logbuf);
    CHECK_MSG(dyn == 2 || (strstr(logbuf, "is generic in s0") && !strstr(logbuf, "specialised") &&
                           !strstr(logbuf, "compiled for it")),
              "%s %s rand: log: %s", bname[bi], dname[dyn], logbuf);
    kn_fn_free(f);
    kn_ctx_free(ca), kn_ctx_free(cb);
}

/* ---- scans: generic in the size of the dim they run along ---- */

/* x (4, S) and a weight w (4, 1): cumsum of x * w along S, of an i32 of it, and along the 4 (a dim
 * that stays static; S is never 4, where nodes of the two scans would be one and compile for it); with grad, the loss is the sum of their squares and w's gradient an output */
static kn_status scan_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    kn_tensor *w = *(kn_tensor **)user, *x = kn_mul(ctx, in[0], w);
    (void)nin;
    kn_tensor *i = kn_to(ctx, kn_to(ctx, kn_mul(ctx, x, kn_scalar(ctx, 4.0)), KN_I32), KN_F32);
    kn_tensor *y = kn_add(ctx, kn_add(ctx, kn_cumsum(ctx, x, 1), kn_cumsum(ctx, i, -1)), kn_cumsum(ctx, x, 0));
    if (nout == 1) {
        out[0] = y;
        return y ? KN_OK : kn_last_status(ctx);
    }
    out[0] = kn_sum(ctx, kn_mul(ctx, y, y), NULL, 0, 0);
    if (!out[0] || kn_backward(ctx, out[0], 0) != KN_OK) return kn_last_status(ctx);
    out[1] = kn_grad(ctx, w);
    return out[1] ? KN_OK : kn_last_status(ctx);
}

/* A sweep of S under dynamic=auto: the second size makes the generic entry, and no later size up to
 * 2^16 compiles or recompiles anything (kn_fn_stats), each equal to eager bit for bit (the generic scan
 * adds what eager's does, then -0s). S = 70000 passes the generic graph's limit: a static entry, and
 * the next small size is generic again. grad: the whole step, forward and backward, in the body (one
 * program an entry), its loss and w's gradient (sums, in another order) within 1e-5 of eager's. */
static void test_scan_sweep(int bi, int grad)
{
    static const int64_t sizes[11] = {6, 13, 2, 3, 9, 17, 64, 1000, 33, 70000, 5};
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 12});
    kn_set_log(ctx, sink, NULL);
    kn_set_logs(ctx, "recompiles");
    logbuf[0] = 0;
    int64_t ws[2] = {4, 1};
    kn_tensor *w = kn_keep(ctx, kn_randn(ctx, KN_F32, 2, ws));
    if (grad) w = kn_requires_grad(ctx, w, 1);
    kn_compile_opts o = {.backend = backends[bi], .params = &w, .nparams = 1, .name = "scan"};
    kn_fn *f = kn_compile(ctx, scan_body, &w, &o);
    kn_fn_info made = {0}, info;
    int nout = grad ? 2 : 1;
    for (int c = 0; c < 11; c++) {
        kn_scope_begin(ctx);
        int64_t xs[2] = {4, sizes[c]};
        kn_tensor *x = kn_randn(ctx, KN_F32, 2, xs), *out[2] = {0}, *want[2] = {0};
        kn_status s = kn_call(f, &x, 1, out, nout);
        CHECK_MSG(s == KN_OK, "%s scan%s S=%lld: %s", bname[bi], grad ? " (grad)" : "", (long long)sizes[c],
                  kn_last_error(ctx));
        if (grad) { /* a copy: eagerly (past a recompile limit) out[1] would be w's grad, which the next line frees */
            out[1] = s == KN_OK ? kn_to(ctx, out[1], KN_F64) : NULL;
            kn_zero_grad(ctx, &w, 1);
        }
        CHECK(scan_body(ctx, &w, &x, 1, want, nout) == KN_OK);
        for (int k = 0; k < nout && s == KN_OK; k++) { /* with grad, the loss and w's gradient are sums */
            double d = test_rel_diff(ctx, out[k], ctx, want[k]);
            CHECK_MSG(grad ? d < 1e-5 : d == 0, "%s scan%s S=%lld out[%d]: differs from eager by %g", bname[bi],
                      grad ? " (grad)" : "", (long long)sizes[c], k, d);
        }
        if (grad) kn_zero_grad(ctx, &w, 1);
        kn_scope_end(ctx);
        CHECK(kn_fn_stats(f, &info) == KN_OK);
        if (c == 1 || c == 9) made = info; /* the generic entry, then the static one of S = 70000 */
        if (c >= 2 && c != 9) /* the generic entry's: nothing new */
            CHECK_MSG(info.entries == made.entries && info.compiles == made.compiles && info.recompiles == made.recompiles &&
                      info.symbolic_dims == (c < 9),
                      "%s scan%s S=%lld: %d entries, %d compiles, %d recompiles (before: %d, %d, %d); log: %s", bname[bi],
                      grad ? " (grad)" : "", (long long)sizes[c], info.entries, info.compiles, info.recompiles,
                      made.entries, made.compiles, made.recompiles, logbuf);
    }
    CHECK_MSG(info.entries == 3 && info.recompiles == 2 && info.compiles == want_compiles(bi, 3, 1),
              "%s scan%s: %d entries, %d compiles, %d recompiles", bname[bi], grad ? " (grad)" : "", info.entries,
              info.compiles, info.recompiles);
    CHECK_MSG(strstr(logbuf, "is generic in s0 = in[0] dim 1 (now 13)") && strstr(logbuf, "up to s0 = 65536") &&
              strstr(logbuf, "in[0] dim 1: expected a size <= 65536 (s0: the generic graph holds up to it), got 70000"),
              "%s scan%s: log: %s", bname[bi], grad ? " (grad)" : "", logbuf);
    kn_fn_free(f);
    kn_free(ctx, w);
    kn_ctx_free(ctx);
}

/* ---- ops that stay generic in s0: one entry for every size, as torch's automatic dynamic ---- */

/* x (S, 5): the product along s0 (the product scan's last element) and along the static dim */
static kn_status prod_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    kn_tensor *x = kn_add(ctx, kn_mul(ctx, kn_tanh(ctx, in[0]), kn_scalar(ctx, 0.25)), kn_scalar(ctx, 1.0));
    out[0] = kn_prod(ctx, x, 0, 0);
    out[1] = kn_add(ctx, kn_prod(ctx, x, 1, 1), kn_prod(ctx, x, KN_NODIM, 0));
    return out[0] && out[1] ? KN_OK : kn_last_status(ctx);
}

/* x (S, 5) times exp of its column sums: an expensive value of 5 elements broadcast into a kernel of
 * 5S, which a static schedule computes once in a buffer of its own from S = 16 on (16 times fewer
 * elements) and fuses below; the probes of a generic entry (13, 14, 16, 2) decide alike */
static kn_status bcast_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    kn_tensor *x = in[0];
    out[0] = kn_mul(ctx, x, kn_exp(ctx, kn_mul(ctx, kn_sum(ctx, x, (int[]){0}, 1, 1), kn_scalar(ctx, 0.1))));
    return out[0] ? KN_OK : kn_last_status(ctx);
}

/* x (S, 5): means over S and over the 5 columns, whose divisors are equal where S is 5 (one node) */
static kn_status means_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    kn_tensor *x = in[0];
    out[0] = kn_add(ctx, kn_mean(ctx, x, (int[]){0}, 1, 1), kn_mean(ctx, x, (int[]){1}, 1, 1));
    return out[0] ? KN_OK : kn_last_status(ctx);
}

/* x (S, 5): rows 2 and 3 (a slice whose end clamps where S < 4: empty at S = 2) plus the column sums */
static kn_status clamp_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    kn_tensor *x = in[0];
    out[0] = kn_add(ctx, kn_slice(ctx, x, 0, 2, 4, 1), kn_sum(ctx, x, (int[]){0}, 1, 1));
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static const int64_t sweep6[6] = {6, 13, 2, 3, 9, 40};
static const int64_t sweep6_near5[6] = {6, 4, 2, 3, 9, 40}; /* generic from S = 4: a probe at 5 would clash */
static const int64_t sweep6_up[6] = {6, 4, 9, 40, 13, 5};    /* generic from S = 4 on */

/* body called with x (S, 5), S over sizes (and any inputs it makes itself), compiled dynamic=auto on
 * backend bi: every output within tol of eager's, one static entry then one generic entry for the
 * rest, and nothing specialised (the log says why where it does) */
static void test_stays_generic(int bi, kn_body_fn body, const char *name, int nout, double tol, const int64_t *sizes)
{
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 31});
    kn_set_log(ctx, sink, NULL);
    kn_set_logs(ctx, "recompiles");
    logbuf[0] = 0;
    kn_set_grad_enabled(ctx, 0);
    kn_compile_opts o = {.backend = backends[bi], .name = name};
    kn_fn *f = kn_compile(ctx, body, NULL, &o);
    for (int c = 0; c < 6; c++) {
        kn_scope_begin(ctx);
        int64_t xs[2] = {sizes[c], 5};
        kn_tensor *x = kn_randn(ctx, KN_F32, 2, xs), *out[4] = {0}, *want[4] = {0};
        kn_status s = kn_call(f, &x, 1, out, nout);
        CHECK_MSG(s == KN_OK, "%s %s S=%lld: %s", bname[bi], name, (long long)sizes[c], kn_last_error(ctx));
        CHECK(body(ctx, NULL, &x, 1, want, nout) == KN_OK);
        for (int k = 0; k < nout && s == KN_OK; k++) {
            double d = test_rel_diff(ctx, out[k], ctx, want[k]);
            CHECK_MSG(d <= tol, "%s %s S=%lld out[%d]: differs from eager by %g", bname[bi], name,
                      (long long)sizes[c], k, d);
        }
        kn_scope_end(ctx);
    }
    kn_fn_info info;
    CHECK(kn_fn_stats(f, &info) == KN_OK);
    CHECK_MSG(info.entries == 2 && info.recompiles == 1 && info.symbolic_dims == 1 && !strstr(logbuf, "specialised"),
              "%s %s: %d entries, %d recompiles, %d symbolic dims; log: %s", bname[bi], name, info.entries,
              info.recompiles, info.symbolic_dims, logbuf);
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* ---- what cannot be generic specialises ---- */

/* x * B*B: a constant that is not affine in the batch */
static kn_status square_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    int64_t b = kn_shape(in[0])[0];
    out[0] = kn_mul(ctx, in[0], kn_scalar(ctx, (double)(b * b)));
    return out[0] ? KN_OK : kn_last_status(ctx);
}

/* the outer product of x's first column, flattened: a size B*B */
static kn_status outer_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    int64_t b = kn_shape(in[0])[0], flat[1] = {b * b};
    kn_tensor *c = kn_slice(ctx, in[0], 1, 0, 1, 1);
    out[0] = kn_reshape(ctx, kn_mul(ctx, c, kn_transpose(ctx, c, 0, 1)), 1, flat);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

/* reads a value: a graph break */
static kn_status read_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    double v = 0;
    kn_tensor *s = kn_sum(ctx, in[0], NULL, 0, 0);
    if (!s || kn_item(ctx, s, &v) != KN_OK) return kn_last_status(ctx);
    out[0] = kn_add(ctx, in[0], kn_scalar(ctx, v > 0 ? 1.0 : -1.0));
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_specialise(kn_body_fn body, const char *name, const char *why)
{
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 2});
    kn_set_log(ctx, sink, NULL);
    kn_set_logs(ctx, "recompiles");
    logbuf[0] = 0;
    kn_compile_opts o = {.backend = KN_BACKEND_INTERP, .name = name};
    kn_fn *f = kn_compile(ctx, body, NULL, &o);
    for (int c = 0; c < 4; c++) {
        kn_scope_begin(ctx);
        int64_t xs[2] = {sweep[c], 3};
        kn_tensor *x = kn_randn(ctx, KN_F32, 2, xs), *out[1] = {0}, *want[1] = {0};
        CHECK_MSG(kn_call(f, &x, 1, out, 1) == KN_OK, "%s B=%lld: %s", name, (long long)sweep[c], kn_last_error(ctx));
        CHECK(body(ctx, NULL, &x, 1, want, 1) == KN_OK);
        CHECK_MSG(out[0] && test_rel_diff(ctx, out[0], ctx, want[0]) < 1e-6, "%s B=%lld: differs from eager", name,
                  (long long)sweep[c]);
        kn_scope_end(ctx);
    }
    kn_fn_info info;
    kn_fn_stats(f, &info);
    CHECK_MSG(info.entries == 4 && info.symbolic_dims == 0, "%s: %d entries", name, info.entries);
    CHECK_MSG(strstr(logbuf, "in[0] dim 0 specialised to 16: ") != NULL && strstr(logbuf, why) != NULL, "%s log: %s",
              name, logbuf);
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* ---- guards of a symbolic dim ---- */

static kn_status add_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    out[0] = kn_add(ctx, kn_relu(ctx, in[0]), kn_mean(ctx, in[1], (int[]){1}, 1, 1));
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_guards(void)
{
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 4});
    kn_set_log(ctx, sink, NULL);
    kn_set_logs(ctx, "recompiles,guards");
    logbuf[0] = 0;
    kn_compile_opts o = {.backend = KN_BACKEND_INTERP, .name = "addm"};
    kn_fn *f = kn_compile(ctx, add_body, NULL, &o);
    /* x (B, 4) and z (B, 6): after one change both batch dims are s0; the
     * two dims apart, or a size 1, fail the generic entry's guards (a size
     * 1 then compiles a static entry) */
    int64_t calls[6][2] = {{3, 3}, {7, 7}, {9, 9}, {5, 6}, {1, 1}, {2, 2}};
    int want_entries[6] = {1, 2, 2, 2, 3, 3};
    const char *want_log[6] = {NULL, "in[0]: f32 (s0>=2, 4), contiguous", NULL,
                               "in[1] dim 0: expected s0 = 5 (in[0] dim 0), got 6",
                               "in[0] dim 0: expected a size >= 2 (s0), got 1", NULL};
    for (int c = 0; c < 6; c++) {
        kn_scope_begin(ctx);
        logbuf[0] = 0;
        int64_t xs[2] = {calls[c][0], 4}, zs[2] = {calls[c][1], 6};
        kn_tensor *in[2] = {kn_randn(ctx, KN_F32, 2, xs), kn_randn(ctx, KN_F32, 2, zs)}, *out[1] = {0}, *want[1];
        kn_status s = kn_call(f, in, 2, out, 1);
        if (calls[c][0] != calls[c][1]) { /* eager fails too: the broadcast of 5 against 6 */
            CHECK(s != KN_OK && strstr(kn_last_error(ctx), "broadcast") != NULL);
            kn_clear_error(ctx);
        } else {
            CHECK_MSG(s == KN_OK, "call %d: %s", c, kn_last_error(ctx));
            CHECK(add_body(ctx, NULL, in, 2, want, 1) == KN_OK);
            CHECK(out[0] && test_rel_diff(ctx, out[0], ctx, want[0]) < 1e-6);
        }
        kn_fn_info info;
        kn_fn_stats(f, &info);
        CHECK_MSG(info.entries == want_entries[c], "call %d: %d entries", c, info.entries);
        if (want_log[c]) CHECK_MSG(strstr(logbuf, want_log[c]) != NULL, "call %d: log: %s", c, logbuf);
        kn_scope_end(ctx);
    }
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* ---- every guard of an input: each dim at every rank, dtype, layout, requires_grad, grad mode ---- */

/* out[0] = x * x + amax(x) along x's last dim (x's shape), out[1] = the sum of y: any ranks and dtypes */
static kn_status guard_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    int last = kn_ndim(in[0]) - 1;
    out[0] = kn_add(ctx, kn_mul(ctx, in[0], in[0]), kn_amax(ctx, in[0], &last, 1, 1));
    out[1] = kn_sum(ctx, in[1], NULL, 0, 0);
    return out[0] && out[1] ? KN_OK : kn_last_status(ctx);
}

enum { G_DIM, G_DTYPE, G_LAYOUT, G_REQGRAD, G_GRADMODE };

/* One input of a guard call: its shape, f64 instead of f32, a strided view of the same shape (a
 * transpose of its last two dims, or every other element of a vector), requiring grad. */
typedef struct {
    int ndim;
    int64_t shape[4];
    int f64, strided, reqgrad;
} GIn;

static kn_tensor *guard_input(kn_ctx *ctx, const GIn *g)
{
    int64_t st[4];
    int n = g->ndim;
    memcpy(st, g->shape, sizeof st);
    if (g->strided && n >= 2) st[n - 2] = g->shape[n - 1], st[n - 1] = g->shape[n - 2];
    if (g->strided && n == 1) st[0] = 2 * g->shape[0];
    kn_tensor *t = kn_randn(ctx, g->f64 ? KN_F64 : KN_F32, n, st);
    if (g->reqgrad) t = kn_requires_grad(ctx, t, 1);
    if (g->strided) t = n >= 2 ? kn_transpose(ctx, t, n - 2, n - 1) : kn_slice(ctx, t, 0, 0, st[0], 2);
    return t;
}

/* Leaf x's gradient from loss = sum(out0) (a copy), with x's .grad cleared after; the tape is kept for
 * the next loss. */
static kn_tensor *guard_grad(kn_ctx *ctx, kn_tensor *x, kn_tensor *out0)
{
    kn_tensor *g;
    if (kn_backward(ctx, kn_sum(ctx, out0, NULL, 0, 0), 1) != KN_OK || !(g = kn_grad(ctx, x))) return NULL;
    g = kn_mul(ctx, g, kn_scalar(ctx, 1.0));
    kn_zero_grad(ctx, &x, 1);
    return g;
}

/* One call of f on inputs gi[0..2), in grad mode gm, checked against eager: outputs, and x's gradient
 * where x requires grad (x is then a leaf: a change of requires_grad keeps x contiguous). */
static void guard_call(kn_ctx *ctx, kn_fn *f, const GIn *gi, int gm, const char *what)
{
    kn_scope_begin(ctx);
    kn_set_grad_enabled(ctx, gm);
    kn_tensor *in[2] = {guard_input(ctx, &gi[0]), guard_input(ctx, &gi[1])}, *out[2] = {0}, *want[2] = {0};
    kn_status s = kn_call(f, in, 2, out, 2);
    CHECK_MSG(s == KN_OK, "%s: %s", what, kn_last_error(ctx));
    CHECK(guard_body(ctx, NULL, in, 2, want, 2) == KN_OK);
    for (int k = 0; k < 2 && s == KN_OK; k++) {
        double d = test_rel_diff(ctx, out[k], ctx, want[k]); /* out[1] sums y in the target's order */
        CHECK_MSG(d < (k ? 1e-5 : 1e-6), "%s: out[%d] differs from eager by %g", what, k, d);
    }
    int wants = gm && gi[0].reqgrad;
    CHECK_MSG(s != KN_OK || kn_is_requires_grad(out[0]) == wants, "%s: out[0] %s grad", what,
              wants ? "does not require" : "requires");
    if (s == KN_OK && wants) {
        kn_tensor *gc = guard_grad(ctx, in[0], out[0]), *ge = guard_grad(ctx, in[0], want[0]);
        CHECK_MSG(gc && ge && test_rel_diff(ctx, gc, ctx, ge) < 1e-6, "%s: x's gradient differs from eager's: %s", what,
                  kn_last_error(ctx));
    }
    kn_clear_error(ctx);
    kn_set_grad_enabled(ctx, 1);
    kn_scope_end(ctx);
}

/* A new function, called on x (rank r) and y (another rank), then on inputs that differ in one guarded
 * property, then a third time: a dim changed again (off: a third entry; auto: the generic entry of the
 * second call), or the first inputs again (the first entry). Each change recompiles with its reason;
 * under auto a dim goes generic; every call equals eager. */
static void guard_case(kn_ctx *ctx, int bi, int dyn, int r, int kind, int k, int d)
{
    static const int64_t xs[4] = {3, 4, 5, 2}, ys[4] = {4, 2, 3, 5};
    char what[320], want[160];
    GIn g0[2] = {{r, {0}, 0, 0, 0}, {r % 4 + 1, {0}, 0, 0, 0}}, g1[2], g2[2];
    memcpy(g0[0].shape, xs, sizeof xs);
    memcpy(g0[1].shape, ys, sizeof ys);
    memcpy(g1, g0, sizeof g1);
    memcpy(g2, g0, sizeof g2);
    int gm1 = kind != G_GRADMODE;
    switch (kind) {
    case G_DIM:
        g1[k].shape[d] += 3, g2[k].shape[d] += 5;
        snprintf(want, sizeof want, "in[%d] dim %d: expected %lld, got %lld", k, d, (long long)g0[k].shape[d],
                 (long long)g1[k].shape[d]);
        break;
    case G_DTYPE: g1[0].f64 = 1, snprintf(want, sizeof want, "in[0] dtype: expected f32, got f64"); break;
    case G_LAYOUT: g1[0].strided = 1, snprintf(want, sizeof want, "in[0]: expected a contiguous tensor"); break;
    case G_REQGRAD: g1[0].reqgrad = 1, snprintf(want, sizeof want, "in[0] requires_grad: expected false"); break;
    default: snprintf(want, sizeof want, "grad mode: expected enabled"); break;
    }
    snprintf(what, sizeof what, "%s %s, ranks %d and %d, %s", bname[bi], dname[dyn], g0[0].ndim, g0[1].ndim, want);
    kn_compile_opts o = {.backend = backends[bi], .dynamic = (kn_dynamic)dyn, .name = "guarded"};
    kn_fn *f = kn_compile(ctx, guard_body, NULL, &o);
    kn_fn_info info;
    logbuf[0] = 0;
    guard_call(ctx, f, g0, 1, what);
    guard_call(ctx, f, g1, gm1, what);
    char line[400];
    snprintf(line, sizeof line, "guarded: recompiling (entry 2): %s\n", want);
    CHECK_MSG(strstr(logbuf, line) != NULL, "%s: no recompile with that reason; log: %s", what, logbuf);
    if (kind == G_DIM && dyn == 0) {
        snprintf(line, sizeof line, "in[%d] dim %d changed (%lld, then %lld): dynamic from now on", k, d,
                 (long long)g0[k].shape[d], (long long)g1[k].shape[d]);
        CHECK_MSG(strstr(logbuf, line) != NULL, "%s: log: %s", what, logbuf);
        snprintf(line, sizeof line, "entry 2 is generic in s0 = in[%d] dim %d", k, d);
        CHECK_MSG(strstr(logbuf, line) != NULL, "%s: not generic; log: %s", what, logbuf);
    }
    logbuf[0] = 0;
    guard_call(ctx, f, kind == G_DIM ? g2 : g0, 1, what);
    CHECK(kn_fn_stats(f, &info) == KN_OK);
    int entries = kind == G_DIM && dyn == 2 ? 3 : 2;
    CHECK_MSG(info.calls == 3 && info.entries == entries && info.eager_calls == 0,
              "%s: %d calls, %d entries (want %d), %d eager; log of the third call: %s", what, info.calls,
              info.entries, entries, info.eager_calls, logbuf);
    kn_fn_free(f);
}

/* Every guard of every input at ranks 1 to 4 (y's rank r % 4 + 1), on backend bi under dynamic auto (0)
 * or off (2); ranks only r on backend c, whose every program is a run of the system compiler. */
static void test_guard_changes(int bi, int dyn, int rlo, int rhi)
{
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 13});
    kn_set_log(ctx, sink, NULL);
    kn_set_logs(ctx, "recompiles");
    for (int r = rlo; r <= rhi; r++) {
        int ranks[2] = {r, r % 4 + 1};
        for (int k = 0; k < 2; k++)
            for (int d = 0; d < ranks[k]; d++) guard_case(ctx, bi, dyn, r, G_DIM, k, d);
        for (int kind = G_DTYPE; kind <= G_GRADMODE; kind++) guard_case(ctx, bi, dyn, r, kind, 0, 0);
    }
    kn_ctx_free(ctx);
}

/* ---- allocation failure on the dynamic path: an error, never a crash or a leak ---- */

typedef struct {
    long n, fail_at, blocks;
    size_t bytes;
} Hook;

#define HDR 16

static void *hook_alloc(void *user, void *ptr, size_t osize, size_t nsize)
{
    Hook *h = user;
    char *p = ptr ? (char *)ptr - HDR : NULL;
    if (nsize == 0) {
        if (p) h->blocks--, h->bytes -= osize, free(p);
        return NULL;
    }
    if (++h->n == h->fail_at) return NULL;
    char *q = realloc(p, nsize + HDR);
    if (!q) return NULL;
    if (!p) h->blocks++;
    h->bytes += nsize - (p ? osize : 0);
    return q + HDR;
}

/* Sizes 3, 7 (the generic entry is made), 9 and 7 (planned per size) with
 * allocation fail_at failing: returns the allocations made, and counts
 * calls that failed otherwise than KN_ENOMEM or gave a wrong result.
 * region: x requires grad, and a backward through the compiled one follows;
 * dyn: the dynamic setting (off: every size a static entry). */
static long alloc_run(long fail_at, int region, int dyn, int *bad, int *leak)
{
    Hook h = {0, fail_at, 0, 0};
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 4, .alloc = hook_alloc, .alloc_user = &h});
    if (!ctx) return h.n;
    kn_compile_opts o = {.backend = KN_BACKEND_INTERP, .dynamic = (kn_dynamic)dyn, .name = "addm"};
    kn_fn *f = kn_compile(ctx, add_body, NULL, &o);
    int64_t sizes[4] = {3, 7, 9, 7};
    for (int c = 0; c < 4 && f; c++) {
        kn_scope_begin(ctx);
        int64_t xs[2] = {sizes[c], 4}, zs[2] = {sizes[c], 6};
        kn_tensor *in[2] = {kn_ones(ctx, KN_F32, 2, xs), kn_ones(ctx, KN_F32, 2, zs)}, *out[1] = {0};
        if (region && in[0]) in[0] = kn_requires_grad(ctx, in[0], 1);
        if (in[0] && in[1]) {
            kn_status s = kn_call(f, in, 2, out, 1);
            float v[1] = {0}, gv[1] = {0};
            if (s == KN_OK && (kn_read(ctx, kn_slice(ctx, kn_flatten(ctx, out[0], 0, 1), 0, 0, 1, 1), v, 4) != KN_OK ||
                               v[0] != 2.0f))
                s = kn_last_status(ctx) ? kn_last_status(ctx) : KN_EINVAL;
            if (s == KN_OK && region) { /* relu's grad at 1 is 1 */
                kn_tensor *g = kn_backward(ctx, kn_sum(ctx, out[0], NULL, 0, 0), 0) == KN_OK ? kn_grad(ctx, in[0]) : NULL;
                if (!g || kn_read(ctx, kn_slice(ctx, kn_flatten(ctx, g, 0, 1), 0, 0, 1, 1), gv, 4) != KN_OK || gv[0] != 1.0f)
                    s = kn_last_status(ctx) ? kn_last_status(ctx) : KN_EINVAL;
            }
            if (s != KN_OK && s != KN_ENOMEM) {
                (*bad)++;
                printf("    fail_at %ld, call %d: %s\n", fail_at, c, kn_last_error(ctx));
            }
        }
        kn_clear_error(ctx);
        kn_scope_end(ctx);
    }
    kn_fn_free(f);
    kn_ctx_free(ctx);
    if (h.blocks || h.bytes) {
        (*leak)++;
        printf("    fail_at %ld: %ld blocks, %zu bytes left\n", fail_at, h.blocks, h.bytes);
    }
    return h.n;
}

static void test_alloc_failures(int region, int dyn)
{
    int bad = 0, leak = 0;
    long n = alloc_run(0, region, dyn, &bad, &leak);
    CHECK(bad == 0 && leak == 0 && n > 100);
    for (long i = 1; i <= n; i++) alloc_run(i, region, dyn, &bad, &leak);
    CHECK_MSG(bad == 0 && leak == 0, "over %ld allocations (%s%s): %d calls failed otherwise than out of memory, "
              "%d leaks", n, dname[dyn], region ? ", region" : "", bad, leak);
}

int main(void)
{
    for (int bi = 0; bi < 3; bi++)
        for (int dyn = 0; dyn < 3; dyn++) test_infer_sweep(bi, dyn, 0);
    test_infer_sweep(0, 0, 1);
    for (int bi = 0; bi < 3; bi++) test_train_sweep(bi, 0, "mlp", (ModelCfg){0}, 0, 0, NULL);
    test_train_sweep(0, 1, "mlp", (ModelCfg){0}, 0, 0, NULL);
    test_train_sweep(0, 2, "mlp", (ModelCfg){0}, 0, 0, NULL);
    test_train_sweep(0, 0, "mlp", (ModelCfg){0}, 1, 0, NULL);
    /* on: the first step of SGD with momentum has no buffer; the probes
     * after it read it: not one graph, so it specialises; the next is generic */
    test_train_sweep(0, 1, "mlp", (ModelCfg){0}, 1, 2, "in[0] dim 0 specialised to 8: the trace at size 9 has other inputs (");
    /* gpt's tokens (B, T): the batch dim is generic */
    ModelCfg gpt = {.vocab = 50, .context = 7, .d = 16, .layers = 2, .heads = 2};
    test_train_sweep(0, 0, "gpt", gpt, 0, 0, "generic in s0 = in[0] dim 0");
    test_train_sweep(0, 1, "gpt", gpt, 0, 0, NULL);
    /* on, with B = T = 8 at the first call: both are s0, but T cannot pass the
     * context; both specialise, and the next size makes the batch generic */
    gpt.context = 8;
    test_train_sweep(0, 1, "gpt", gpt, 0, 2, "in[0] dim 0 specialised to 8: tracing at size 9: model_loss: gpt: tokens "
                     "have T = 9 positions, more than the context 8");
    for (int bi = 0; bi < 3; bi++) test_region_sweep(bi, 0);
    for (int bi = 0; bi < 3; bi++) test_generic_sweep(bi, 0), test_generic_sweep(bi, 1);
    for (int bi = 1; bi < 3; bi++) test_train_sweep(bi, 1, "mlp", (ModelCfg){0}, 0, 0, NULL);
    test_train_sweep(2, 0, "gpt", gpt, 0, 0, NULL);
    /* a convolution's windows (forward, and the weight's and input's gradients) in the batch */
    test_train_sweep(1, 0, "smallcnn", (ModelCfg){0}, 0, 0, NULL);
    test_train_sweep(2, 0, "smallcnn", (ModelCfg){0}, 0, 0, NULL);
    test_region_sweep(0, 1);
    for (int bi = 0; bi < 3; bi++)
        for (int dyn = 0; dyn < 3; dyn++) test_rand_sweep(bi, dyn);
    for (int bi = 0; bi < 3; bi++) test_scan_sweep(bi, 0), test_scan_sweep(bi, 1);
    for (int bi = 0; bi < 3; bi++) test_stays_generic(bi, prod_body, "prod", 2, 1e-5, sweep6);
    for (int bi = 0; bi < 3; bi++) test_stays_generic(bi, bcast_body, "bcast", 1, 1e-5, sweep6);
    for (int bi = 0; bi < 3; bi++) test_stays_generic(bi, means_body, "means", 1, 1e-6, sweep6_near5);
    for (int bi = 0; bi < 3; bi++) test_stays_generic(bi, clamp_body, "clamp", 1, 1e-6, sweep6_up);
    test_specialise(square_body, "square", "makes constants of other values");
    test_specialise(outer_body, "outer", "not affine in the size");
    test_specialise(read_body, "read", "reads a value");
    test_guards();
    for (int dyn = 0; dyn < 3; dyn += 2) {
        test_guard_changes(0, dyn, 1, 4);
        test_guard_changes(1, dyn, 1, 4);
        test_guard_changes(2, dyn, 2, 2);
    }
    test_alloc_failures(0, 0);
    test_alloc_failures(1, 0);
    test_alloc_failures(1, 2); /* the static region path too */
    TEST_END("test_dynamic");
}
