/*
 * test_capture.c — kn_compile: compiled results equal eager ones, guards
 * and recompiles, the recompile limit, graph breaks and fullgraph (a read of
 * an input is guarded too), an f16/bf16 matmul that equals eager's to the
 * bit, a failed call that leaves out[] alone, training through a compiled
 * region and as one compiled step (with values read before the backward),
 * and random numbers drawn as eager draws them.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "test.h"
#include "../src/cli/models.h"

static kn_backend backends[3] = {KN_BACKEND_INTERP, KN_BACKEND_TCC, KN_BACKEND_C};
static const char *bname[3] = {"interp", "tcc", "c"};

/* the last log lines, for recompile and guard messages */
static char logbuf[8192];
static void sink(void *user, const char *line)
{
    (void)user;
    size_t n = strlen(logbuf);
    snprintf(logbuf + n, sizeof logbuf - n, "%s\n", line);
}

static double max_diff(kn_ctx *ctx, kn_tensor *a, kn_tensor *b) { return test_rel_diff(ctx, a, ctx, b); }

/* ---- inference: f(x, y) = relu(x w^T + b) + y ---- */

typedef struct {
    kn_tensor *p[2];
} Lin;

static kn_status lin_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Lin *l = user;
    (void)nin;
    (void)nout;
    out[0] = kn_add(ctx, kn_relu(ctx, kn_linear(ctx, in[0], l->p[0], l->p[1])), in[1]);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_inference(int bi)
{
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 7});
    int64_t ws[2] = {5, 3}, bs[1] = {5};
    Lin l = {{kn_param(ctx, kn_randn(ctx, KN_F32, 2, ws)), kn_param(ctx, kn_randn(ctx, KN_F32, 1, bs))}};
    kn_set_log(ctx, sink, NULL);
    kn_set_logs(ctx, "recompiles");
    kn_compile_opts o = {.backend = backends[bi], .dynamic = KN_DYNAMIC_OFF, .params = l.p, .nparams = 2,
                         .recompile_limit = 3, .name = "lin"}; /* off: every size recompiles, up to the limit */
    kn_fn *f = kn_compile(ctx, lin_body, &l, &o);
    CHECK(f != NULL);
    int sizes[5] = {4, 4, 6, 9, 11};
    kn_set_grad_enabled(ctx, 0);
    for (int c = 0; c < 5; c++) {
        int64_t xs[2] = {sizes[c], 3}, ys[2] = {sizes[c], 5};
        kn_scope_begin(ctx);
        kn_tensor *in[2] = {kn_randn(ctx, KN_F32, 2, xs), kn_randn(ctx, KN_F32, 2, ys)}, *out[1], *want[1];
        logbuf[0] = 0;
        CHECK_MSG(kn_call(f, in, 2, out, 1) == KN_OK, "%s call %d: %s", bname[bi], c, kn_last_error(ctx));
        CHECK(lin_body(ctx, &l, in, 2, want, 1) == KN_OK);
        CHECK_MSG(max_diff(ctx, out[0], want[0]) < 1e-5, "%s: compiled differs from eager", bname[bi]);
        if (c == 2) CHECK_MSG(strstr(logbuf, "in[0] dim 0: expected 4, got 6") != NULL, "log: %s", logbuf);
        if (c == 4) CHECK_MSG(strstr(logbuf, "recompile limit") != NULL, "log: %s", logbuf);
        kn_scope_end(ctx);
    }
    kn_fn_info info;
    CHECK(kn_fn_stats(f, &info) == KN_OK);
    CHECK_MSG(info.calls == 5 && info.entries == 3 && info.recompiles == 2 && info.eager_calls == 1,
              "calls %d entries %d recompiles %d eager %d", info.calls, info.entries, info.recompiles, info.eager_calls);
    if (bi > 0 && info.backend) CHECK(strcmp(info.backend, bname[bi]) == 0 || strcmp(info.backend, "interp") == 0);

    /* a swapped parameter is caught by its identity guard */
    kn_fn *g = kn_compile(ctx, lin_body, &l, &o);
    int64_t xs[2] = {4, 3}, ys[2] = {4, 5};
    kn_tensor *in[2] = {kn_keep(ctx, kn_randn(ctx, KN_F32, 2, xs)), kn_keep(ctx, kn_randn(ctx, KN_F32, 2, ys))};
    kn_tensor *out[1], *want[1];
    CHECK(kn_call(g, in, 2, out, 1) == KN_OK);
    kn_tensor *old = l.p[0];
    l.p[0] = kn_param(ctx, kn_randn(ctx, KN_F32, 2, ws));
    logbuf[0] = 0;
    CHECK(kn_call(g, in, 2, out, 1) == KN_OK);
    CHECK_MSG(strstr(logbuf, "params[0]: a different tensor") != NULL, "log: %s", logbuf);
    CHECK(lin_body(ctx, &l, in, 2, want, 1) == KN_OK);
    CHECK(max_diff(ctx, out[0], want[0]) < 1e-5);
    CHECK(kn_fn_stats(g, &info) == KN_OK && info.entries == 2);
    kn_free(ctx, old);
    kn_fn_free(g);
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* ---- graph breaks ---- */

static kn_status branch_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user;
    (void)nin;
    (void)nout;
    kn_tensor *h = kn_mul(ctx, in[0], in[0]);
    double s;
    if (kn_item(ctx, kn_sum(ctx, kn_sub(ctx, in[0], kn_scalar(ctx, 0.5)), NULL, 0, 0), &s) != KN_OK)
        return kn_last_status(ctx);
    out[0] = s > 0 ? kn_add(ctx, h, in[0]) : kn_sub(ctx, h, in[0]);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_breaks(int bi)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    kn_set_grad_enabled(ctx, 0);
    kn_set_log(ctx, sink, NULL);
    kn_set_logs(ctx, "graph_breaks,recompiles");
    kn_compile_opts o = {.backend = backends[bi], .name = "branch"};
    kn_fn *f = kn_compile(ctx, branch_body, NULL, &o);
    int64_t xs[1] = {7};
    float up[7] = {1, 2, 3, 4, 5, 6, 7}, down[7] = {-1, -2, -3, -4, -5, -6, -7};
    const float *data[4] = {up, up, down, up};
    for (int c = 0; c < 4; c++) {
        kn_scope_begin(ctx);
        kn_tensor *x = kn_tensor_from(ctx, KN_F32, 1, xs, data[c]), *out[1], *want[1];
        logbuf[0] = 0;
        CHECK_MSG(kn_call(f, &x, 1, out, 1) == KN_OK, "%s: %s", bname[bi], kn_last_error(ctx));
        CHECK(branch_body(ctx, NULL, &x, 1, want, 1) == KN_OK);
        CHECK_MSG(max_diff(ctx, out[0], want[0]) < 1e-6, "%s: call %d differs", bname[bi], c);
        if (c == 0) CHECK_MSG(strstr(logbuf, "graph break 1: kn_item reads a traced value") != NULL, "log: %s", logbuf);
        if (c == 2) CHECK_MSG(strstr(logbuf, "differs from the traced one") != NULL, "log: %s", logbuf);
        kn_scope_end(ctx);
    }
    kn_fn_info info;
    kn_fn_stats(f, &info);
    CHECK_MSG(info.entries == 2 && info.recompiles == 1 && info.graph_breaks == 2 && info.graphs == 2,
              "entries %d recompiles %d breaks %d graphs %d", info.entries, info.recompiles, info.graph_breaks,
              info.graphs);
    kn_fn_free(f);

    o.fullgraph = 1;
    f = kn_compile(ctx, branch_body, NULL, &o);
    kn_tensor *x = kn_tensor_from(ctx, KN_F32, 1, xs, up), *out[1] = {NULL};
    CHECK(kn_call(f, &x, 1, out, 1) != KN_OK);
    CHECK_ERR(ctx, "kn_item reads the value of a traced tensor (a graph break) and fullgraph is set");
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* A read of an input before any op (no graph yet): the value is guarded all the same, so a call
 * with other data traces again instead of replaying the first call's. */
static kn_status reread_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    float v[3];
    (void)user;
    (void)nin;
    (void)nout;
    if (kn_read(ctx, in[0], v, sizeof v) != KN_OK) return kn_last_status(ctx);
    out[0] = kn_mul(ctx, in[1], kn_tensor_from(ctx, KN_F32, 1, (int64_t[]){3}, v));
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_read_input(int bi)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    kn_compile_opts o = {.backend = backends[bi], .name = "reread"};
    kn_fn *f = kn_compile(ctx, reread_body, NULL, &o);
    float data[2][3] = {{1, 2, 3}, {-4, 5, 0.5f}};
    for (int c = 0; c < 2; c++) {
        kn_scope_begin(ctx);
        kn_tensor *in[2] = {kn_tensor_from(ctx, KN_F32, 1, (int64_t[]){3}, data[c]),
                            kn_full(ctx, KN_F32, 1, (int64_t[]){3}, c + 2)};
        kn_tensor *out[1] = {NULL}, *want[1] = {NULL};
        CHECK_MSG(kn_call(f, in, 2, out, 1) == KN_OK, "%s: %s", bname[bi], kn_last_error(ctx));
        CHECK(reread_body(ctx, NULL, in, 2, want, 1) == KN_OK);
        CHECK_MSG(max_diff(ctx, out[0], want[0]) == 0, "%s: call %d differs from eager by %g", bname[bi], c,
                  max_diff(ctx, out[0], want[0]));
        kn_scope_end(ctx);
    }
    kn_fn_info info;
    kn_fn_stats(f, &info);
    CHECK_MSG(info.entries == 2, "%s: %d entries", bname[bi], info.entries);
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* An f16 or bf16 matmul sums exact products in f32, as the interpreter does (in double): on data
 * whose products and sums are exact in f32, compiled and eager agree to the bit. */
static kn_status half_dot_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user;
    (void)nin;
    (void)nout;
    out[0] = kn_matmul(ctx, in[0], in[1]);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_half_dot(int bi)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    double a[3 * 17], b[17 * 2];
    for (int i = 0; i < 3 * 17; i++) a[i] = ((i * 37) % 257 - 128) / 32.0;
    for (int i = 0; i < 17 * 2; i++) b[i] = ((i * 91 + 5) % 257 - 128) / 32.0;
    for (int dt = KN_F16; dt <= KN_BF16; dt++) {
        kn_compile_opts o = {.backend = backends[bi], .name = "half_dot"};
        kn_fn *f = kn_compile(ctx, half_dot_body, NULL, &o);
        kn_tensor *in[2] = {kn_to(ctx, kn_tensor_from(ctx, KN_F64, 2, (int64_t[]){3, 17}, a), (kn_dtype)dt),
                            kn_to(ctx, kn_tensor_from(ctx, KN_F64, 2, (int64_t[]){17, 2}, b), (kn_dtype)dt)};
        kn_tensor *out[1] = {NULL}, *want[1] = {NULL};
        CHECK_MSG(kn_call(f, in, 2, out, 1) == KN_OK, "%s: %s", bname[bi], kn_last_error(ctx));
        CHECK(half_dot_body(ctx, NULL, in, 2, want, 1) == KN_OK);
        CHECK_MSG(max_diff(ctx, out[0], want[0]) == 0, "%s %s: differs from eager by %g", bname[bi],
                  kn_dtype_name((kn_dtype)dt), max_diff(ctx, out[0], want[0]));
        kn_fn_free(f);
    }
    kn_ctx_free(ctx);
}

/* A call that fails in its graph (an index out of range) hands out no outputs and leaves what the
 * caller had in out[] alone: out[] is output only, and may hold anything. */
static kn_status gather_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user;
    (void)nin;
    (void)nout;
    out[0] = kn_gather(ctx, in[0], 0, in[1]);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_failed_call(int bi)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    kn_compile_opts o = {.backend = backends[bi], .name = "gather"};
    kn_fn *f = kn_compile(ctx, gather_body, NULL, &o);
    int64_t good[2] = {0, 3}, bad[2] = {0, 4};
    kn_tensor *x = kn_ones(ctx, KN_F32, 1, (int64_t[]){4}), *keep = kn_keep(ctx, kn_zeros(ctx, KN_F32, 1, (int64_t[]){2}));
    for (int c = 0; c < 2; c++) {
        kn_tensor *in[2] = {x, kn_tensor_from(ctx, KN_I64, 1, (int64_t[]){2}, c ? bad : good)}, *out[1] = {keep};
        size_t live = kn_live_tensors(ctx);
        kn_status s = kn_call(f, in, 2, out, 1);
        CHECK_MSG(c ? s == KN_EINDEX : s == KN_OK, "%s call %d: %s", bname[bi], c, kn_last_error(ctx));
        if (c)
            CHECK_MSG(kn_live_tensors(ctx) == live && out[0] == NULL, "%s: %zu tensors live, %zu before, out[0] %p",
                      bname[bi], kn_live_tensors(ctx), live, (void *)out[0]);
        kn_clear_error(ctx);
    }
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* ---- training ---- */

typedef struct {
    Model *m;
} Net;

static kn_status fwd_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Net *n = user;
    (void)nin;
    (void)nout;
    out[0] = model_forward(ctx, n->m, in[0], 1);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

typedef struct {
    Model *m;
    kn_optim *opt;
    int reads;       /* values the body reads before its backward (graph breaks): 0, 1 (the loss) or 2 (and a
                        value in the middle of the forward) */
    double logged;   /* the loss the body read at its last run */
    int runs;        /* runs of the body's C code (traces, and eager calls) */
} Step;

static kn_status step_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Step *st = user;
    (void)nin;
    (void)nout;
    st->runs++;
    kn_optim_zero_grad(st->opt);
    kn_tensor *x = in[0], *reg = NULL;
    double v;
    if (st->reads > 1) { /* a break before the loss: the graph before it is a region of its own, which the
                            backward goes through (a weight decay term of the first parameter) */
        kn_tensor *p = model_params(st->m)[0];
        reg = kn_mul(ctx, kn_sum(ctx, kn_mul(ctx, p, p), NULL, 0, 0), kn_scalar(ctx, 1e-3));
        if (kn_item(ctx, reg, &v) != KN_OK) return kn_last_status(ctx);
    }
    kn_tensor *loss = model_loss(ctx, st->m, x, in[1], 1);
    if (reg) loss = kn_add(ctx, loss, reg);
    if (st->reads && (!loss || kn_item(ctx, loss, &st->logged) != KN_OK)) return kn_last_status(ctx);
    if (!loss || kn_backward(ctx, loss, 0) != KN_OK || kn_optim_step(st->opt) != KN_OK) return kn_last_status(ctx);
    out[0] = loss;
    return KN_OK;
}

static double param_diff(kn_ctx *ctx, Model *a, Model *b)
{
    double m = 0;
    for (int i = 0; i < model_nparams(a); i++) {
        double d = max_diff(ctx, model_params(a)[i], model_params(b)[i]);
        if (!(d <= m)) m = d;
    }
    for (int i = 0; i < model_nbuffers(a); i++) {
        double d = max_diff(ctx, model_buffers(a)[i], model_buffers(b)[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

/* (a) a compiled forward inside an eager loop: grads through the compiled backward */
static void test_region(int bi, const char *name, ModelCfg cfg)
{
    kn_ctx *ca = kn_ctx_new(&(kn_ctx_opts){.seed = 3}), *cb = kn_ctx_new(&(kn_ctx_opts){.seed = 3});
    Model *ma = model_new(ca, name, &cfg), *mb = model_new(cb, name, &cfg);
    kn_tensor *x, *y, *x2, *y2;
    CHECK(model_batch(ca, ma, 6, &x, &y) == KN_OK && model_batch(cb, mb, 6, &x2, &y2) == KN_OK);
    Net na = {ma};
    kn_compile_opts o = {.backend = backends[bi], .params = model_params(ma), .nparams = model_nparams(ma),
                         .name = name};
    kn_fn *f = kn_compile(ca, fwd_body, &na, &o);
    for (int step = 0; step < 2; step++) {
        kn_scope_begin(ca);
        kn_scope_begin(cb);
        kn_tensor *logits[1];
        kn_status s = kn_call(f, &x, 1, logits, 1);
        CHECK_MSG(s == KN_OK, "%s %s: %s", bname[bi], name, kn_last_error(ca));
        kn_tensor *la = s ? NULL : kn_cross_entropy(ca, name[0] == 'g' ? kn_flatten(ca, logits[0], 0, 1) : logits[0],
                                                    name[0] == 'g' ? kn_flatten(ca, y, 0, 1) : y, NULL);
        kn_tensor *lb = model_loss(cb, mb, x2, y2, 1);
        CHECK(la && kn_backward(ca, la, 0) == KN_OK);
        CHECK(lb && kn_backward(cb, lb, 0) == KN_OK);
        double worst = 0;
        for (int i = 0; la && lb && i < model_nparams(ma); i++) {
            kn_tensor *ga = kn_grad(ca, model_params(ma)[i]), *gb = kn_grad(cb, model_params(mb)[i]);
            double d;
            if (!ga || !gb) {
                worst = INFINITY;
                continue;
            }
            float *buf = malloc((size_t)kn_numel(gb) * 4);
            kn_read(cb, gb, buf, (size_t)kn_numel(gb) * 4);
            kn_tensor *gb_in_a = kn_tensor_from(ca, KN_F32, kn_ndim(gb), kn_shape(gb), buf);
            free(buf);
            d = max_diff(ca, ga, gb_in_a);
            if (!(d <= worst)) worst = d;
        }
        CHECK_MSG(worst < 1e-4, "%s %s step %d: grads differ by %g", bname[bi], name, step, worst);
        kn_zero_grad(ca, model_params(ma), model_nparams(ma));
        kn_zero_grad(cb, model_params(mb), model_nparams(mb));
        kn_scope_end(ca);
        kn_scope_end(cb);
    }
    kn_fn_info info;
    kn_fn_stats(f, &info);
    CHECK_MSG(info.entries == 1 && info.graphs == 2, "%s: entries %d graphs %d", name, info.entries, info.graphs);
    kn_fn_free(f);
    model_free(ca, ma);
    model_free(cb, mb);
    kn_ctx_free(ca);
    kn_ctx_free(cb);
}

/* (a') a compiled forward that reads a value in its middle (a graph break) and whose backward runs later:
 * the gradients of its parameters and of its input go through both of its graphs */
static kn_status read_fwd(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    kn_tensor **p = user;
    (void)nin;
    (void)nout;
    kn_tensor *h = kn_relu(ctx, kn_linear(ctx, in[0], p[0], p[1]));
    double v;
    if (kn_item(ctx, kn_sum(ctx, h, NULL, 0, 0), &v) != KN_OK) return kn_last_status(ctx);
    out[0] = kn_linear(ctx, kn_tanh(ctx, h), p[2], p[3]);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_region_break(int bi)
{
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 11});
    int64_t s0[2] = {16, 8}, s1[1] = {16}, s2[2] = {3, 16}, s3[1] = {3}, xs[2] = {5, 8};
    kn_tensor *p[4] = {kn_param(ctx, kn_randn(ctx, KN_F32, 2, s0)), kn_param(ctx, kn_randn(ctx, KN_F32, 1, s1)),
                       kn_param(ctx, kn_randn(ctx, KN_F32, 2, s2)), kn_param(ctx, kn_randn(ctx, KN_F32, 1, s3))};
    kn_tensor *x = kn_requires_grad(ctx, kn_keep(ctx, kn_randn(ctx, KN_F32, 2, xs)), 1), *want[5] = {0}, *got[5];
    kn_compile_opts o = {.backend = backends[bi], .params = p, .nparams = 4, .name = "read_fwd"};
    kn_fn *f = kn_compile(ctx, read_fwd, p, &o);
    for (int c = 0; c < 3; c++) { /* c 0: eager; 1, 2: compiled (a trace, then the cached entry); graphs: the
                                     forward's two and the backward */
        kn_scope_begin(ctx);
        kn_tensor *y = NULL;
        kn_status s = c ? kn_call(f, &x, 1, &y, 1) : read_fwd(ctx, p, &x, 1, &y, 1);
        CHECK_MSG(s == KN_OK, "%s call %d: %s", bname[bi], c, kn_last_error(ctx));
        kn_tensor *l = s ? NULL : kn_sum(ctx, kn_mul(ctx, y, y), NULL, 0, 0);
        CHECK_MSG(l && kn_backward(ctx, l, 0) == KN_OK, "%s call %d: %s", bname[bi], c, kn_last_error(ctx));
        kn_tensor **keep = c ? got : want;
        for (int i = 0; i < 5; i++) keep[i] = kn_keep(ctx, kn_to(ctx, kn_grad(ctx, i < 4 ? p[i] : x), KN_F64)); /* a copy */
        double worst = 0;
        for (int i = 0; c && i < 5; i++) {
            double d = max_diff(ctx, got[i], want[i]);
            if (!(d <= worst)) worst = d;
        }
        CHECK_MSG(worst < 1e-5, "%s call %d: gradients differ from eager's by %g", bname[bi], c, worst);
        kn_zero_grad(ctx, p, 4);
        kn_zero_grad(ctx, &x, 1);
        kn_scope_end(ctx);
    }
    kn_fn_info info;
    kn_fn_stats(f, &info);
    CHECK_MSG(info.entries == 1 && info.graphs == 3 && info.recompiles == 0, "%s: entries %d graphs %d recompiles %d",
              bname[bi], info.entries, info.graphs, info.recompiles);
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* (a'') a value live at a break that the loss never reads gets no gradient, as in eager: its backward
 * (here 1 / 0 from log's) is left out, not run on a zero cotangent (0 * inf: NaN in the parameter's) */
static kn_status unused_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    kn_tensor *p = *(kn_tensor **)user;
    (void)nin;
    (void)nout;
    kn_tensor *u = kn_log(ctx, kn_mul(ctx, p, in[0])), *w = kn_mul(ctx, p, kn_scalar(ctx, 2.0));
    double v;
    if (!u || kn_item(ctx, kn_sum(ctx, w, NULL, 0, 0), &v) != KN_OK) return kn_last_status(ctx);
    kn_tensor *loss = kn_sum(ctx, kn_mul(ctx, w, w), NULL, 0, 0);
    if (!loss || kn_backward(ctx, loss, 0) != KN_OK) return kn_last_status(ctx);
    out[0] = kn_mul(ctx, kn_grad(ctx, p), kn_scalar(ctx, 1.0));
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_break_unused(int bi)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t n = 3;
    float z[3] = {0, 1, 2}, pv[3] = {1, 2, 3};
    kn_tensor *p = kn_param(ctx, kn_tensor_from(ctx, KN_F32, 1, &n, pv)), *x = kn_tensor_from(ctx, KN_F32, 1, &n, z);
    kn_compile_opts o = {.backend = backends[bi], .params = &p, .nparams = 1, .name = "unused"};
    kn_fn *f = kn_compile(ctx, unused_body, &p, &o);
    for (int c = 0; c < 2; c++) {
        kn_tensor *g = NULL;
        kn_zero_grad(ctx, &p, 1);
        CHECK_MSG(kn_call(f, &x, 1, &g, 1) == KN_OK, "%s: %s", bname[bi], kn_last_error(ctx));
        float gv[3] = {0, 0, 0};
        CHECK(g && kn_read(ctx, g, gv, sizeof gv) == KN_OK);
        CHECK_MSG(gv[0] == 8 && gv[1] == 16 && gv[2] == 24, "%s call %d: grad %g %g %g, eager's 8 16 24", bname[bi], c,
                  gv[0], gv[1], gv[2]);
    }
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* A compiled forward that returns a value it read (a loss logged in the body) and leaves the backward
 * to the caller: the value is an earlier graph's, concrete since its break, and the backward outside
 * runs through that graph's region (it said "loss does not require grad"). p's grad equals eager's */
static kn_status logged_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    kn_tensor *p = *(kn_tensor **)user;
    double v;
    (void)nin, (void)nout;
    kn_tensor *h = kn_tanh(ctx, kn_mul(ctx, in[0], p));
    out[0] = kn_sum(ctx, kn_mul(ctx, h, h), NULL, 0, 0);
    return kn_item(ctx, out[0], &v);
}

static void test_break_output(int bi)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t n = 3;
    float xv[3] = {0.5f, -1, 2}, pv[3] = {1, 2, -0.5f};
    kn_tensor *p = kn_param(ctx, kn_tensor_from(ctx, KN_F32, 1, &n, pv));
    kn_compile_opts o = {.backend = backends[bi], .params = &p, .nparams = 1, .name = "logged"};
    kn_fn *f = kn_compile(ctx, logged_body, &p, &o);
    for (int c = 0; c < 3; c++) {
        xv[1] += 0.25f; /* another value read at every call: the body is traced again each time */
        kn_tensor *x = kn_tensor_from(ctx, KN_F32, 1, &n, xv), *loss = NULL, *want = NULL;
        float ga[3] = {0}, gb[3] = {0};
        kn_zero_grad(ctx, &p, 1);
        CHECK(logged_body(ctx, &p, &x, 1, &want, 1) == KN_OK && kn_backward(ctx, want, 0) == KN_OK);
        CHECK(kn_grad(ctx, p) && kn_read(ctx, kn_grad(ctx, p), gb, sizeof gb) == KN_OK);
        kn_zero_grad(ctx, &p, 1);
        CHECK_MSG(kn_call(f, &x, 1, &loss, 1) == KN_OK, "%s: %s", bname[bi], kn_last_error(ctx));
        CHECK_MSG(loss && kn_backward(ctx, loss, 0) == KN_OK, "%s call %d: backward: %s", bname[bi], c,
                  kn_last_error(ctx));
        CHECK(kn_grad(ctx, p) && kn_read(ctx, kn_grad(ctx, p), ga, sizeof ga) == KN_OK);
        for (int i = 0; i < 3; i++)
            CHECK_MSG(fabsf(ga[i] - gb[i]) <= 1e-5f * (1 + fabsf(gb[i])), "%s call %d: grad[%d] %g, eager %g",
                      bname[bi], c, i, ga[i], gb[i]);
    }
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* An output that is another handle of a value made before a graph break (kn_detach's shares its
 * storage): it is that value of this call, not the one the trace computed (which every later call
 * returned) */
static kn_status detached_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    kn_tensor *p = *(kn_tensor **)user;
    double v;
    (void)nin, (void)nout;
    kn_tensor *h = kn_relu(ctx, kn_mul(ctx, in[0], p));
    if (kn_item(ctx, kn_mean(ctx, p, NULL, 0, 0), &v)) return kn_last_status(ctx);
    out[0] = kn_detach(ctx, h);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_break_detached(int bi)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t n = 3;
    float xv[3] = {1, -1, 2}, pv[3] = {1, 2, -0.5f};
    kn_tensor *p = kn_keep(ctx, kn_tensor_from(ctx, KN_F32, 1, &n, pv));
    kn_compile_opts o = {.backend = backends[bi], .params = &p, .nparams = 1, .name = "detached"};
    kn_fn *f = kn_compile(ctx, detached_body, &p, &o);
    for (int c = 0; c < 3; c++) {
        for (int i = 0; i < 3; i++) xv[i] = -xv[i] + 0.5f * (float)c;
        kn_tensor *x = kn_tensor_from(ctx, KN_F32, 1, &n, xv), *got = NULL, *want = NULL;
        CHECK(detached_body(ctx, &p, &x, 1, &want, 1) == KN_OK);
        CHECK_MSG(kn_call(f, &x, 1, &got, 1) == KN_OK, "%s: %s", bname[bi], kn_last_error(ctx));
        CHECK_MSG(got && max_diff(ctx, got, want) == 0, "%s call %d: the detached output differs from eager's",
                  bname[bi], c);
    }
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* A read of a parameter itself (concrete while tracing, not a traced value) inside a compiled step:
 * the value read is each call's, not the traced call's (it is guarded on like any read) */
typedef struct {
    kn_tensor *p;
    kn_optim *opt;
} ReadParam;

static kn_status readparam_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    ReadParam *u = user;
    int64_t n = 3;
    float v[3];
    (void)nin, (void)nout;
    kn_optim_zero_grad(u->opt);
    if (kn_read(ctx, u->p, v, sizeof v)) return kn_last_status(ctx);
    out[0] = kn_tensor_from(ctx, KN_F32, 1, &n, v);
    out[1] = kn_sum(ctx, kn_mul(ctx, u->p, in[0]), NULL, 0, 0);
    if (!out[0] || !out[1] || kn_backward(ctx, out[1], 0)) return kn_last_status(ctx);
    return kn_optim_step(u->opt);
}

static void test_read_param(int bi)
{
    kn_ctx *ce = kn_ctx_new(NULL), *cc = kn_ctx_new(NULL);
    int64_t n = 3;
    float xv[3] = {1, -1, 2}, pv[3] = {1, 2, -0.5f};
    kn_sgd_opts so = {.lr = 0.1, .momentum = 0.9};
    ReadParam ue = {kn_param(ce, kn_tensor_from(ce, KN_F32, 1, &n, pv)), NULL};
    ReadParam uc = {kn_param(cc, kn_tensor_from(cc, KN_F32, 1, &n, pv)), NULL};
    ue.opt = kn_sgd(ce, &ue.p, 1, &so), uc.opt = kn_sgd(cc, &uc.p, 1, &so);
    kn_compile_opts o = {.backend = backends[bi], .params = &uc.p, .nparams = 1, .name = "readparam"};
    kn_fn *f = kn_compile(cc, readparam_body, &uc, &o);
    for (int c = 0; c < 4; c++) {
        kn_tensor *xe = kn_tensor_from(ce, KN_F32, 1, &n, xv), *xc = kn_tensor_from(cc, KN_F32, 1, &n, xv);
        kn_tensor *want[2] = {0}, *got[2] = {0};
        CHECK(readparam_body(ce, &ue, &xe, 1, want, 2) == KN_OK);
        CHECK_MSG(kn_call(f, &xc, 1, got, 2) == KN_OK, "%s: %s", bname[bi], kn_last_error(cc));
        for (int k = 0; k < 2; k++)
            CHECK_MSG(got[k] && want[k] && test_rel_diff(cc, got[k], ce, want[k]) <= 1e-6,
                      "%s call %d: out[%d] differs from eager's", bname[bi], c, k);
    }
    kn_fn_free(f);
    kn_optim_free(ue.opt);
    kn_optim_free(uc.opt);
    kn_ctx_free(cc);
    kn_ctx_free(ce);
}

/* A compiled forward whose only differentiable part comes after a graph break (nothing before the break
 * requires grad, so no region ends there), with its backward after the call: the tape region of the last
 * graph saves that graph's values (the matmul's, which the partitioner does not recompute), not the
 * first graph's (a, b, c, the sum: what it read before, the wrong tensors or past their end) */
static kn_status late_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    kn_tensor *p = *(kn_tensor **)user;
    double v;
    (void)nin, (void)nout;
    kn_tensor *a = kn_mul(ctx, in[0], kn_scalar(ctx, 3.0)), *b = kn_exp(ctx, in[0]), *c = kn_neg(ctx, in[0]);
    if (!a || !b || !c || kn_item(ctx, kn_sum(ctx, a, NULL, 0, 0), &v) != KN_OK) return kn_last_status(ctx);
    kn_tensor *h = kn_tanh(ctx, kn_linear(ctx, a, p, in[1])); /* (2, 3) */
    out[0] = kn_sum(ctx, kn_mul(ctx, kn_mul(ctx, h, h), kn_add(ctx, b, c)), NULL, 0, 0);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_break_late_grad(int bi)
{
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 4});
    int64_t xs[2] = {2, 3}, ps[2] = {3, 3}, n = 3;
    kn_tensor *p = kn_param(ctx, kn_randn(ctx, KN_F32, 2, ps)), *x = kn_keep(ctx, kn_randn(ctx, KN_F32, 2, xs));
    kn_tensor *y = kn_keep(ctx, kn_requires_grad(ctx, kn_randn(ctx, KN_F32, 1, &n), 1)), *in[2] = {x, y};
    kn_compile_opts o = {.backend = backends[bi], .params = &p, .nparams = 1, .name = "late"};
    kn_fn *f = kn_compile(ctx, late_body, &p, &o);
    for (int c = 0; c < 2; c++) { /* a trace, then the cached entry */
        kn_scope_begin(ctx);
        kn_tensor *want = NULL, *got = NULL, *gw[2], *gg[2];
        kn_zero_grad(ctx, &p, 1);
        kn_zero_grad(ctx, &y, 1);
        CHECK(late_body(ctx, &p, in, 2, &want, 1) == KN_OK && kn_backward(ctx, want, 0) == KN_OK);
        gw[0] = kn_to(ctx, kn_grad(ctx, p), KN_F64), gw[1] = kn_to(ctx, kn_grad(ctx, y), KN_F64); /* copies */
        kn_zero_grad(ctx, &p, 1);
        kn_zero_grad(ctx, &y, 1);
        CHECK_MSG(kn_call(f, in, 2, &got, 1) == KN_OK, "%s: %s", bname[bi], kn_last_error(ctx));
        CHECK_MSG(got && kn_backward(ctx, got, 0) == KN_OK, "%s call %d: backward: %s", bname[bi], c,
                  kn_last_error(ctx));
        CHECK_MSG(got && max_diff(ctx, got, want) < 1e-6, "%s call %d: the output differs from eager's", bname[bi], c);
        gg[0] = kn_grad(ctx, p), gg[1] = kn_grad(ctx, y);
        for (int i = 0; i < 2; i++)
            CHECK_MSG(gg[i] && max_diff(ctx, kn_to(ctx, gg[i], KN_F64), gw[i]) < 1e-5,
                      "%s call %d: the grad of %s differs from eager's", bname[bi], c, i ? "in[1]" : "p");
        kn_scope_end(ctx);
    }
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* After a graph break the inputs' stand-ins are concrete: another handle of one (kn_detach's) is that
 * call's input, as an output and as a graph input, not the tensor the trace was given (which every later
 * call returned and read) */
static kn_status detach_in_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    double v;
    (void)user, (void)nin, (void)nout;
    if (kn_item(ctx, kn_sum(ctx, in[1], NULL, 0, 0), &v) != KN_OK) return kn_last_status(ctx);
    out[0] = kn_detach(ctx, in[0]);
    out[1] = kn_add(ctx, kn_detach(ctx, in[0]), kn_scalar(ctx, 1.0));
    return out[1] ? KN_OK : kn_last_status(ctx);
}

static void test_break_detach_input(int bi)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t n = 3;
    float xv[3] = {1, -1, 2}, yv[3] = {0.5f, 1, 1.5f};
    kn_compile_opts o = {.backend = backends[bi], .name = "detach_in"};
    kn_fn *f = kn_compile(ctx, detach_in_body, NULL, &o);
    for (int c = 0; c < 3; c++) { /* in[1]'s value the same each call, in[0]'s not */
        for (int i = 0; i < 3; i++) xv[i] = -xv[i] + 0.5f * (float)c;
        kn_scope_begin(ctx);
        kn_tensor *in[2] = {kn_tensor_from(ctx, KN_F32, 1, &n, xv), kn_tensor_from(ctx, KN_F32, 1, &n, yv)};
        kn_tensor *got[2] = {0}, *want[2] = {0};
        CHECK(detach_in_body(ctx, NULL, in, 2, want, 2) == KN_OK);
        CHECK_MSG(kn_call(f, in, 2, got, 2) == KN_OK, "%s: %s", bname[bi], kn_last_error(ctx));
        for (int k = 0; k < 2; k++)
            CHECK_MSG(max_diff(ctx, got[k], want[k]) == 0, "%s call %d: out[%d] differs from eager's", bname[bi], c, k);
        kn_scope_end(ctx);
    }
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* A read of a concrete tensor while tracing is guarded as a traced one is: an input once a break made it
 * concrete, a value of an earlier graph, a parameter. The body branches on each; a call where one of
 * them reads otherwise traces again (each was read unguarded: a later call took the traced branch) */
static kn_status read_concrete_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out,
                                    int nout)
{
    kn_tensor *p = *(kn_tensor **)user;
    double v, pv;
    float r[3], hv[3];
    (void)nin, (void)nout;
    kn_tensor *h = kn_mul(ctx, in[0], kn_scalar(ctx, 2.0));
    if (!h || kn_item(ctx, kn_sum(ctx, in[1], NULL, 0, 0), &v) != KN_OK) return kn_last_status(ctx);
    if (kn_read(ctx, in[0], r, sizeof r) || kn_read(ctx, h, hv, sizeof hv) || kn_item(ctx, p, &pv))
        return kn_last_status(ctx);
    double k = (hv[1] > 0 ? 10 : -10) + (pv > 0 ? 100 : -100);
    out[0] = kn_add(ctx, kn_mul(ctx, in[0], kn_scalar(ctx, r[0] > 0 ? 1.0 : -1.0)), kn_scalar(ctx, k));
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_break_read_concrete(int bi)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t n = 3, one = 1;
    float xs[4][3] = {{1, 2, 3}, {-1, 2, 3}, {-1, -2, 3}, {-1, -2, 3}}, yv[3] = {0.5f, 1, 1.5f}, pv = 0.5f;
    kn_tensor *p = kn_param(ctx, kn_tensor_from(ctx, KN_F32, 1, &one, &pv));
    kn_optim *sgd = kn_sgd(ctx, &p, 1, &(kn_sgd_opts){.lr = 1});
    kn_compile_opts o = {.backend = backends[bi], .params = &p, .nparams = 1, .name = "read_concrete"};
    kn_fn *f = kn_compile(ctx, read_concrete_body, &p, &o);
    for (int c = 0; c < 4; c++) { /* in[0][0] turns negative, then in[0][1], then p (by an eager step) */
        kn_scope_begin(ctx);
        if (c == 3) {
            kn_optim_zero_grad(sgd);
            CHECK(kn_backward(ctx, kn_sum(ctx, p, NULL, 0, 0), 0) == KN_OK && kn_optim_step(sgd) == KN_OK);
        }
        kn_tensor *in[2] = {kn_tensor_from(ctx, KN_F32, 1, &n, xs[c]), kn_tensor_from(ctx, KN_F32, 1, &n, yv)};
        kn_tensor *got = NULL, *want = NULL;
        CHECK(read_concrete_body(ctx, &p, in, 2, &want, 1) == KN_OK);
        CHECK_MSG(kn_call(f, in, 2, &got, 1) == KN_OK, "%s: %s", bname[bi], kn_last_error(ctx));
        CHECK_MSG(max_diff(ctx, got, want) == 0, "%s call %d: the output differs from eager's", bname[bi], c);
        kn_scope_end(ctx);
    }
    kn_fn_free(f);
    kn_optim_free(sgd);
    kn_ctx_free(ctx);
}

/* (b) the whole step compiled: losses, params and buffers follow eager; reads: values the body reads before
 * its backward (a loss logged with kn_item), graph breaks the backward runs through */
static void test_step(int bi, const char *name, ModelCfg cfg, int sgd, int reads)
{
    kn_ctx *ca = kn_ctx_new(&(kn_ctx_opts){.seed = 5}), *cb = kn_ctx_new(&(kn_ctx_opts){.seed = 5});
    Model *ma = model_new(ca, name, &cfg), *mb = model_new(cb, name, &cfg);
    kn_tensor *x, *y, *x2, *y2;
    CHECK(model_batch(ca, ma, 4, &x, &y) == KN_OK && model_batch(cb, mb, 4, &x2, &y2) == KN_OK);
    kn_sgd_opts so = {.lr = 0.05, .momentum = 0.9};
    Step sa = {ma, sgd ? kn_sgd(ca, model_params(ma), model_nparams(ma), &so)
                       : kn_adam(ca, model_params(ma), model_nparams(ma), NULL), reads, 0, 0};
    Step sb = {mb, sgd ? kn_sgd(cb, model_params(mb), model_nparams(mb), &so)
                       : kn_adam(cb, model_params(mb), model_nparams(mb), NULL), reads, 0, 0};
    kn_compile_opts o = {.backend = backends[bi], .params = model_params(ma), .nparams = model_nparams(ma),
                         .name = name};
    kn_fn *f = kn_compile(ca, step_body, &sa, &o);
    double worst_loss = 0;
    for (int step = 0; step < 4; step++) {
        kn_scope_begin(ca);
        kn_scope_begin(cb);
        kn_tensor *in[2] = {x, y}, *la[1], *lb[1], *in2[2] = {x2, y2};
        kn_status s = kn_call(f, in, 2, la, 1);
        CHECK_MSG(s == KN_OK, "%s %s step %d: %s", bname[bi], name, step, kn_last_error(ca));
        CHECK(step_body(cb, &sb, in2, 2, lb, 1) == KN_OK);
        double a = 0, b = 0;
        if (!s) kn_item(ca, la[0], &a);
        kn_item(cb, lb[0], &b);
        double d = fabs(a - b) / fabs(b);
        if (!(d <= worst_loss)) worst_loss = d;
        /* the body ran again (a traced value changed), so what it logged is this call's loss */
        if (reads) CHECK_MSG(sa.runs == step + 1 && sa.logged == a, "%s %s step %d: %d runs, logged %g, loss %g",
                             bname[bi], name, step, sa.runs, sa.logged, a);
        kn_scope_end(ca);
        kn_scope_end(cb);
    }
    /* the params and buffers of the two contexts, compared through bytes */
    double worst = 0;
    for (int i = 0; i < model_nparams(ma) + model_nbuffers(ma); i++) {
        int pi = i < model_nparams(ma);
        kn_tensor *ta = pi ? model_params(ma)[i] : model_buffers(ma)[i - model_nparams(ma)];
        kn_tensor *tb = pi ? model_params(mb)[i] : model_buffers(mb)[i - model_nparams(mb)];
        float *buf = malloc((size_t)kn_numel(tb) * 4 + 4);
        kn_read(cb, tb, buf, (size_t)kn_numel(tb) * 4);
        kn_tensor *tb_in_a = kn_tensor_from(ca, KN_F32, kn_ndim(tb), kn_shape(tb), buf);
        free(buf);
        double d = max_diff(ca, ta, tb_in_a);
        kn_free(ca, tb_in_a);
        if (!(d <= worst)) worst = d;
    }
    (void)param_diff;
    CHECK_MSG(worst_loss < 1e-4 && worst < 1e-4, "%s %s%s reads %d: loss rel err %g, params/buffers %g", bname[bi],
              name, sgd ? " sgd" : "", reads, worst_loss, worst);
    kn_fn_info info;
    kn_fn_stats(f, &info);
    /* SGD with momentum recompiles once: its first step has no buffer yet. A read value that changes
     * traces the body again, but its graphs are the same: no recompile, and nothing compiled again.
     * Without a compiler (wasm) the backend is interp and nothing compiles */
    int compiled = info.backend && strcmp(info.backend, "interp") != 0;
    CHECK_MSG(info.entries == 1 + sgd && info.eager_calls == 0 && info.recompiles == sgd &&
                  info.graphs == 1 + reads &&
                  (!compiled || (info.compiles >= 1 + reads && info.compiles <= (1 + sgd) * (1 + reads))),
              "%s %s reads %d: entries %d recompiles %d graphs %d compiles %d eager calls %d", bname[bi], name, reads,
              info.entries, info.recompiles, info.graphs, info.compiles, info.eager_calls);
    /* a compiled backend runs every node as a kernel (gpt: the embedding's gather and scatter_add too) */
    CHECK_MSG(info.interp_steps == 0, "%s %s: %d nodes ran on the interpreter", bname[bi], name, info.interp_steps);
    kn_fn_free(f);
    kn_optim_free(sa.opt);
    kn_optim_free(sb.opt);
    model_free(ca, ma);
    model_free(cb, mb);
    kn_ctx_free(ca);
    kn_ctx_free(cb);
}

/* ---- writes in place: a step stores its weights and Adam's state over the old ones ---- */

typedef struct {
    kn_tensor *p[2];
    kn_optim *opt;
    int embed; /* 1: p[0] is an embedding table indexed by in[0] */
} Fit;

/* least squares of x p0 + p1 against y (or of the embedding's rows against y), one Adam step */
static kn_status fit_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Fit *t = user;
    (void)nin;
    (void)nout;
    kn_tensor *pred = t->embed ? kn_add(ctx, kn_embedding(ctx, t->p[0], in[0]), t->p[1])
                               : kn_add(ctx, kn_matmul(ctx, in[0], t->p[0]), t->p[1]);
    kn_tensor *loss = kn_mse_loss(ctx, pred, in[1], KN_REDUCE_MEAN);
    if (!loss) return kn_last_status(ctx);
    kn_optim_zero_grad(t->opt);
    kn_status s = kn_backward(ctx, loss, 0);
    if (s) return s;
    kn_optim_step(t->opt);
    out[0] = loss;
    return KN_OK;
}

static Fit fit_new(kn_ctx *ctx, int embed)
{
    int64_t ws[2] = {7, 13}, bs[1] = {13};
    Fit t = {{kn_param(ctx, kn_randn(ctx, KN_F32, 2, ws)), kn_param(ctx, kn_randn(ctx, KN_F32, 1, bs))}, NULL, embed};
    t.opt = kn_adam(ctx, t.p, 2, NULL);
    return t;
}

/* max relative difference of a's params (and a view of the first) from b's */
static double fit_diff(kn_ctx *ca, const Fit *a, kn_tensor *view, kn_ctx *cb, const Fit *b)
{
    double d = fmax(test_rel_diff(ca, a->p[0], cb, b->p[0]), test_rel_diff(ca, a->p[1], cb, b->p[1]));
    return fmax(d, test_rel_diff(ca, view, cb, kn_transpose(cb, b->p[0], 0, 1)));
}

static void test_in_place(int bi)
{
    for (int embed = 0; embed < 2; embed++) {
        kn_ctx *ca = kn_ctx_new(&(kn_ctx_opts){.seed = 3}), *cb = kn_ctx_new(&(kn_ctx_opts){.seed = 3});
        Fit a = fit_new(ca, embed), b = fit_new(cb, embed);
        int64_t xs[2] = {9, 7}, ys[2] = {9, 13}, is[1] = {9};
        kn_tensor *x[2], *y[2], *idx[2];
        int64_t rows[9] = {0, 3, 6, 1, 1, 5, 2, 4, 6}, bad[9] = {0, 3, 6, 1, 7, 5, 2, 4, 6};
        for (int c = 0; c < 2; c++) {
            kn_ctx *ctx = c ? cb : ca;
            x[c] = kn_randn(ctx, KN_F32, 2, xs), y[c] = kn_randn(ctx, KN_F32, 2, ys);
            idx[c] = kn_tensor_from(ctx, KN_I64, 1, is, rows);
        }
        kn_tensor *view = kn_transpose(ca, a.p[0], 0, 1); /* held by the caller across the steps */
        kn_compile_opts o = {.backend = backends[bi], .params = a.p, .nparams = 2, .name = "fit"};
        kn_fn *f = kn_compile(ca, fit_body, &a, &o);
        double worst = 0;
        for (int step = 0; step < 4; step++) {
            kn_tensor *in[2] = {embed ? idx[0] : x[0], y[0]}, *inb[2] = {embed ? idx[1] : x[1], y[1]}, *l[1];
            kn_scope_begin(ca), kn_scope_begin(cb);
            CHECK_MSG(kn_call(f, in, 2, l, 1) == KN_OK, "%s fit: %s", bname[bi], kn_last_error(ca));
            CHECK(fit_body(cb, &b, inb, 2, l, 1) == KN_OK);
            kn_scope_end(ca), kn_scope_end(cb);
            worst = fmax(worst, fit_diff(ca, &a, view, cb, &b));
        }
        kn_fn_info info;
        kn_fn_stats(f, &info);
        /* the weight, the bias, their two moments (each step count too: a scalar of its own) */
        int compiled = info.backend && strcmp(info.backend, "interp") != 0; /* wasm: no compiler, interp */
        int want = compiled ? 6 : 0;
        CHECK_MSG(worst < 1e-5 && info.in_place >= want && (compiled || info.in_place == 0),
                  "%s fit%s: params and a view of them off by %g, %d writes in place", bname[bi],
                  embed ? " (embedding)" : "", worst, info.in_place);
        if (embed) { /* an index out of range fails the step, and nothing it would write has changed */
            float before[7 * 13], after[7 * 13];
            kn_tensor *in[2] = {kn_tensor_from(ca, KN_I64, 1, is, bad), y[0]}, *l[1];
            kn_read(ca, a.p[0], before, sizeof before);
            kn_scope_begin(ca);
            CHECK_MSG(kn_call(f, in, 2, l, 1) == KN_EINDEX, "%s: a bad index: %s", bname[bi], kn_last_error(ca));
            kn_scope_end(ca);
            kn_read(ca, a.p[0], after, sizeof after);
            CHECK_MSG(!memcmp(before, after, sizeof before), "%s: a failed step changed the weight", bname[bi]);
            CHECK(fit_diff(ca, &a, view, cb, &b) < 1e-5);
        } else { /* the weight passed as an input too (a new entry; the inputs then share its storage) */
            kn_tensor *in[3] = {x[0], y[0], a.p[0]}, *inb[2] = {x[1], y[1]}, *l[1];
            kn_scope_begin(ca), kn_scope_begin(cb);
            CHECK_MSG(kn_call(f, in, 3, l, 1) == KN_OK, "%s fit, weight as input: %s", bname[bi], kn_last_error(ca));
            CHECK(fit_body(cb, &b, inb, 2, l, 1) == KN_OK);
            kn_scope_end(ca), kn_scope_end(cb);
            double d = fit_diff(ca, &a, view, cb, &b);
            CHECK_MSG(d < 1e-5, "%s fit, weight as input: params off by %g", bname[bi], d);
        }
        kn_fn_free(f);
        kn_optim_free(a.opt), kn_optim_free(b.opt);
        kn_ctx_free(ca), kn_ctx_free(cb);
    }
}

/* ---- random numbers: a compiled draw is eager's, fresh at every call ----
 * Each case runs a body compiled in context ca and eagerly in context cb of
 * the same seed, call after call: every uniform and dropout mask must be
 * eager's bit for bit (so a call draws fresh numbers, as eager does), and an
 * eager draw in between must agree too (the calls advanced the generator
 * exactly as eager). */

enum { RN = 37 }; /* elements a draw: not a multiple of 4, so draws start inside a Philox block */

static int same_bits(kn_ctx *ca, kn_tensor *a, kn_ctx *cb, kn_tensor *b)
{
    float x[RN], y[RN];
    return a && b && kn_numel(a) == RN && kn_numel(b) == RN && kn_read(ca, a, x, sizeof x) == KN_OK &&
           kn_read(cb, b, y, sizeof y) == KN_OK && memcmp(x, y, sizeof x) == 0;
}

/* an eager draw in each context: the same bits when their generators agree */
static int same_state(kn_ctx *ca, kn_ctx *cb)
{
    int64_t n = RN;
    return same_bits(ca, kn_rand(ca, KN_F32, 1, &n), cb, kn_rand(cb, KN_F32, 1, &n));
}

static kn_tensor *ones_of(kn_ctx *ctx, int64_t n)
{
    float v[64];
    for (int i = 0; i < 64; i++) v[i] = 1.0f + (float)i / 64;
    return kn_keep(ctx, kn_tensor_from(ctx, KN_F32, 1, &n, v));
}

/* x + rand, randn, dropout(x): four draws a call */
static kn_status rand_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    int64_t n = RN;
    (void)user, (void)nin, (void)nout;
    out[0] = kn_add(ctx, in[0], kn_rand(ctx, KN_F32, 1, &n));
    out[1] = kn_randn(ctx, KN_F32, 1, &n);
    out[2] = kn_dropout(ctx, in[0], 0.5, 1);
    return out[0] && out[1] && out[2] ? KN_OK : kn_last_status(ctx);
}

/* five calls, kn_manual_seed before the fourth (no recompile) */
static void test_rand_calls(int bi, kn_mode mode)
{
    const char *mn = mode == KN_MODE_REDUCE_OVERHEAD ? "reduce-overhead" : "default";
    kn_ctx *ca = kn_ctx_new(&(kn_ctx_opts){.seed = 11}), *cb = kn_ctx_new(&(kn_ctx_opts){.seed = 11});
    kn_set_grad_enabled(ca, 0), kn_set_grad_enabled(cb, 0);
    kn_tensor *xa = ones_of(ca, RN), *xb = ones_of(cb, RN);
    kn_compile_opts o = {.backend = backends[bi], .mode = mode, .name = "rand"};
    kn_fn *f = kn_compile(ca, rand_body, NULL, &o);
    float prev[RN] = {0}, cur[RN];
    int same = 1, state = 1, fresh = 1;
    double worst = 0;
    for (int c = 0; c < 5; c++) {
        kn_scope_begin(ca), kn_scope_begin(cb);
        if (c == 3) kn_manual_seed(ca, 99), kn_manual_seed(cb, 99);
        kn_tensor *oa[3] = {0}, *ob[3] = {0};
        CHECK_MSG(kn_call(f, &xa, 1, oa, 3) == KN_OK, "%s %s: %s", bname[bi], mn, kn_last_error(ca));
        CHECK(rand_body(cb, NULL, &xb, 1, ob, 3) == KN_OK);
        same &= same_bits(ca, oa[0], cb, ob[0]) && same_bits(ca, oa[2], cb, ob[2]);
        worst = fmax(worst, test_rel_diff(ca, oa[1], cb, ob[1])); /* log and cos: each backend's own */
        if (oa[0] && kn_read(ca, oa[0], cur, sizeof cur) == KN_OK) fresh &= !c || memcmp(cur, prev, sizeof cur);
        memcpy(prev, cur, sizeof cur);
        state &= same_state(ca, cb);
        kn_scope_end(ca), kn_scope_end(cb);
    }
    kn_fn_info info;
    kn_fn_stats(f, &info);
    CHECK_MSG(same && worst < 1e-5 && state && fresh, "%s %s: eager's bits %d (randn off by %g), the same state after "
              "each call %d, fresh numbers each call %d", bname[bi], mn, same, worst, state, fresh);
    CHECK_MSG(info.entries == 1 && info.recompiles == 0 && info.eager_calls == 0, "%s %s: %d entries, %d recompiles",
              bname[bi], mn, info.entries, info.recompiles);
    kn_fn_free(f);
    kn_ctx_free(ca), kn_ctx_free(cb);
}

/* kn_manual_seed inside the body: every call replays it, so every call draws the same numbers */
static kn_status seeded_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    int64_t n = RN;
    (void)user, (void)nin, (void)nout;
    kn_tensor *a = kn_rand(ctx, KN_F32, 1, &n);
    kn_manual_seed(ctx, 77);
    out[0] = kn_add(ctx, kn_add(ctx, in[0], a), kn_rand(ctx, KN_F32, 1, &n));
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_rand_seeded(int bi)
{
    kn_ctx *ca = kn_ctx_new(&(kn_ctx_opts){.seed = 16}), *cb = kn_ctx_new(&(kn_ctx_opts){.seed = 16});
    kn_set_grad_enabled(ca, 0), kn_set_grad_enabled(cb, 0);
    kn_tensor *xa = ones_of(ca, RN), *xb = ones_of(cb, RN);
    kn_compile_opts o = {.backend = backends[bi], .name = "seeded"};
    kn_fn *f = kn_compile(ca, seeded_body, NULL, &o);
    int same = 1;
    for (int c = 0; c < 3; c++) {
        kn_scope_begin(ca), kn_scope_begin(cb);
        kn_tensor *oa[1] = {0}, *ob[1] = {0};
        CHECK_MSG(kn_call(f, &xa, 1, oa, 1) == KN_OK, "%s: %s", bname[bi], kn_last_error(ca));
        CHECK(seeded_body(cb, NULL, &xb, 1, ob, 1) == KN_OK);
        same &= same_bits(ca, oa[0], cb, ob[0]) && same_state(ca, cb);
        kn_scope_end(ca), kn_scope_end(cb);
    }
    kn_fn_info info;
    kn_fn_stats(f, &info);
    CHECK_MSG(same && info.entries == 1, "%s kn_manual_seed in the body: eager's bits %d; %d entries", bname[bi], same,
              info.entries);
    kn_fn_free(f);
    kn_ctx_free(ca), kn_ctx_free(cb);
}

/* a draw, a read of a traced value (a graph break), another draw */
static kn_status rand_break_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    int64_t n = RN;
    double v;
    (void)user, (void)nin, (void)nout;
    out[0] = kn_add(ctx, in[0], kn_rand(ctx, KN_F32, 1, &n));
    if (kn_item(ctx, kn_sum(ctx, kn_mul(ctx, in[0], in[0]), NULL, 0, 0), &v) != KN_OK) return kn_last_status(ctx);
    out[1] = kn_dropout(ctx, kn_add(ctx, in[0], kn_scalar(ctx, v)), 0.25, 1);
    return out[0] && out[1] ? KN_OK : kn_last_status(ctx);
}

static void test_rand_break(int bi)
{
    kn_ctx *ca = kn_ctx_new(&(kn_ctx_opts){.seed = 12}), *cb = kn_ctx_new(&(kn_ctx_opts){.seed = 12});
    kn_set_grad_enabled(ca, 0), kn_set_grad_enabled(cb, 0);
    kn_tensor *xa = ones_of(ca, RN), *xb = ones_of(cb, RN);
    kn_compile_opts o = {.backend = backends[bi], .name = "rand_break"};
    kn_fn *f = kn_compile(ca, rand_break_body, NULL, &o);
    int same = 1;
    for (int c = 0; c < 4; c++) {
        kn_scope_begin(ca), kn_scope_begin(cb);
        kn_tensor *oa[2] = {0}, *ob[2] = {0};
        CHECK_MSG(kn_call(f, &xa, 1, oa, 2) == KN_OK, "%s: %s", bname[bi], kn_last_error(ca));
        CHECK(rand_break_body(cb, NULL, &xb, 1, ob, 2) == KN_OK);
        same &= same_bits(ca, oa[0], cb, ob[0]) && same_bits(ca, oa[1], cb, ob[1]) && same_state(ca, cb);
        kn_scope_end(ca), kn_scope_end(cb);
    }
    kn_fn_info info;
    kn_fn_stats(f, &info);
    CHECK_MSG(same && info.entries == 1 && info.graph_breaks == 1 && info.graphs == 2,
              "%s break between draws: eager's bits %d; %d entries, %d breaks", bname[bi], same, info.entries,
              info.graph_breaks);
    kn_fn_free(f);
    kn_ctx_free(ca), kn_ctx_free(cb);
}

/* The recompile limit's eager fallback: calls of a new size run the body eagerly, the compiled entry
 * runs the old size; all draw from one generator in order. */
static kn_status rand_like_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    out[0] = kn_dropout(ctx, kn_add(ctx, in[0], kn_rand(ctx, KN_F32, kn_ndim(in[0]), kn_shape(in[0]))), 0.5, 1);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_rand_fallback(int bi)
{
    kn_ctx *ca = kn_ctx_new(&(kn_ctx_opts){.seed = 13}), *cb = kn_ctx_new(&(kn_ctx_opts){.seed = 13});
    kn_set_grad_enabled(ca, 0), kn_set_grad_enabled(cb, 0);
    kn_set_log(ca, sink, NULL);
    kn_tensor *xa[2] = {ones_of(ca, RN), ones_of(ca, 5)}, *xb[2] = {ones_of(cb, RN), ones_of(cb, 5)};
    kn_compile_opts o = {.backend = backends[bi], .dynamic = KN_DYNAMIC_OFF, .recompile_limit = 1, .name = "fallback"};
    kn_fn *f = kn_compile(ca, rand_like_body, NULL, &o);
    int same = 1;
    for (int c = 0; c < 5; c++) {
        kn_scope_begin(ca), kn_scope_begin(cb);
        kn_tensor *oa[1] = {0}, *ob[1] = {0};
        float x[RN], y[RN];
        int64_t n = c % 2 ? 5 : RN;
        CHECK_MSG(kn_call(f, &xa[c % 2], 1, oa, 1) == KN_OK, "%s: %s", bname[bi], kn_last_error(ca));
        CHECK(rand_like_body(cb, NULL, &xb[c % 2], 1, ob, 1) == KN_OK);
        same &= oa[0] && kn_read(ca, oa[0], x, (size_t)n * 4) == KN_OK &&
                kn_read(cb, ob[0], y, (size_t)n * 4) == KN_OK && memcmp(x, y, (size_t)n * 4) == 0 && same_state(ca, cb);
        kn_scope_end(ca), kn_scope_end(cb);
    }
    kn_fn_info info;
    kn_fn_stats(f, &info);
    CHECK_MSG(same && info.entries == 1 && info.eager_calls == 2, "%s fallback: eager's bits %d; %d entries, %d eager "
              "calls", bname[bi], same, info.entries, info.eager_calls);
    kn_fn_free(f);
    kn_ctx_free(ca), kn_ctx_free(cb);
}

/* A compiled forward with dropout whose backward runs later (the partitioner's split): two calls before
 * one kn_backward, so each backward must use its own call's mask, not redraw one. */
static kn_status drop_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    kn_tensor *w = user;
    (void)nin, (void)nout;
    out[0] = kn_dropout(ctx, kn_mul(ctx, in[0], w), 0.5, 1);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_rand_region(int bi)
{
    kn_ctx *ca = kn_ctx_new(&(kn_ctx_opts){.seed = 14}), *cb = kn_ctx_new(&(kn_ctx_opts){.seed = 14});
    kn_tensor *xa = ones_of(ca, RN), *xb = ones_of(cb, RN);
    kn_tensor *wa = kn_param(ca, ones_of(ca, RN)), *wb = kn_param(cb, ones_of(cb, RN));
    kn_compile_opts o = {.backend = backends[bi], .params = &wa, .nparams = 1, .name = "drop"};
    kn_fn *f = kn_compile(ca, drop_body, wa, &o);
    int same = 1;
    double worst = 0;
    for (int step = 0; step < 3; step++) {
        kn_scope_begin(ca), kn_scope_begin(cb);
        kn_tensor *ya[2] = {0}, *yb[2] = {0};
        for (int c = 0; c < 2; c++) {
            CHECK_MSG(kn_call(f, &xa, 1, &ya[c], 1) == KN_OK, "%s: %s", bname[bi], kn_last_error(ca));
            CHECK(drop_body(cb, wb, &xb, 1, &yb[c], 1) == KN_OK);
            same &= same_bits(ca, ya[c], cb, yb[c]);
        }
        /* loss = sum(y0) + 3 sum(y1): w's gradient mixes both masks */
        kn_tensor *l[2];
        for (int c = 0; c < 2; c++) {
            kn_ctx *ctx = c ? cb : ca;
            kn_tensor **y = c ? yb : ya;
            kn_tensor *three = kn_mul(ctx, kn_sum(ctx, y[1], NULL, 0, 0), kn_scalar(ctx, 3));
            l[c] = kn_add(ctx, kn_sum(ctx, y[0], NULL, 0, 0), three);
        }
        CHECK(l[0] && kn_backward(ca, l[0], 0) == KN_OK && l[1] && kn_backward(cb, l[1], 0) == KN_OK);
        worst = fmax(worst, test_rel_diff(ca, kn_grad(ca, wa), cb, kn_grad(cb, wb)));
        kn_zero_grad(ca, &wa, 1), kn_zero_grad(cb, &wb, 1);
        kn_scope_end(ca), kn_scope_end(cb);
    }
    kn_fn_info info;
    kn_fn_stats(f, &info);
    CHECK_MSG(same && worst < 1e-6 && info.entries == 1 && info.graphs == 2, "%s: eager's masks %d, grads off by %g; "
              "%d entries, %d graphs", bname[bi], same, worst, info.entries, info.graphs);
    kn_fn_free(f);
    kn_ctx_free(ca), kn_ctx_free(cb);
}

/* A training step with dropout, compiled whole: the losses follow eager's step after step. */
typedef struct {
    kn_tensor *p[4]; /* w1 (8, 16), b1 (16), w2 (16, 4), b2 (4) */
    kn_optim *opt;
} DropNet;

static kn_status drop_step(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    DropNet *n = user;
    (void)nin, (void)nout;
    kn_optim_zero_grad(n->opt);
    kn_tensor *h = kn_dropout(ctx, kn_relu(ctx, kn_add(ctx, kn_matmul(ctx, in[0], n->p[0]), n->p[1])), 0.3, 1);
    kn_tensor *loss = kn_cross_entropy(ctx, kn_add(ctx, kn_matmul(ctx, h, n->p[2]), n->p[3]), in[1], NULL);
    if (!loss || kn_backward(ctx, loss, 0) != KN_OK || kn_optim_step(n->opt) != KN_OK) return kn_last_status(ctx);
    out[0] = loss;
    return KN_OK;
}

static DropNet dropnet_new(kn_ctx *ctx)
{
    int64_t s[4][2] = {{8, 16}, {16, 0}, {16, 4}, {4, 0}};
    DropNet n;
    for (int i = 0; i < 4; i++)
        n.p[i] = kn_param(ctx, kn_mul(ctx, kn_randn(ctx, KN_F32, s[i][1] ? 2 : 1, s[i]), kn_scalar(ctx, 0.3)));
    kn_sgd_opts so = {.lr = 0.1, .momentum = 0.9};
    n.opt = kn_sgd(ctx, n.p, 4, &so);
    return n;
}

static void test_rand_train(int bi)
{
    kn_ctx *ca = kn_ctx_new(&(kn_ctx_opts){.seed = 15}), *cb = kn_ctx_new(&(kn_ctx_opts){.seed = 15});
    DropNet a = dropnet_new(ca), b = dropnet_new(cb);
    int64_t xs[2] = {6, 8}, ys[1] = {6}, labels[6] = {0, 1, 2, 3, 1, 2};
    kn_tensor *in[2][2];
    for (int c = 0; c < 2; c++) {
        kn_ctx *ctx = c ? cb : ca;
        in[c][0] = kn_keep(ctx, kn_randn(ctx, KN_F32, 2, xs));
        in[c][1] = kn_keep(ctx, kn_tensor_from(ctx, KN_I64, 1, ys, labels));
    }
    kn_compile_opts o = {.backend = backends[bi], .params = a.p, .nparams = 4, .name = "drop_step"};
    kn_fn *f = kn_compile(ca, drop_step, &a, &o);
    double worst = 0;
    for (int step = 0; step < 6; step++) {
        kn_scope_begin(ca), kn_scope_begin(cb);
        kn_tensor *la[1] = {0}, *lb[1] = {0};
        double x = NAN, y = NAN;
        CHECK_MSG(kn_call(f, in[0], 2, la, 1) == KN_OK, "%s step %d: %s", bname[bi], step, kn_last_error(ca));
        CHECK(drop_step(cb, &b, in[1], 2, lb, 1) == KN_OK);
        if (la[0]) kn_item(ca, la[0], &x);
        kn_item(cb, lb[0], &y);
        worst = fmax(worst, isnan(x) ? INFINITY : fabs(x - y) / fabs(y));
        kn_scope_end(ca), kn_scope_end(cb);
    }
    double pw = 0;
    for (int i = 0; i < 4; i++) pw = fmax(pw, test_rel_diff(ca, a.p[i], cb, b.p[i]));
    kn_fn_info info;
    kn_fn_stats(f, &info);
    /* SGD with momentum recompiles once: its first step has no buffer yet */
    CHECK_MSG(worst < 1e-5 && pw < 1e-5 && info.entries == 2 && info.eager_calls == 0,
              "%s dropout step: losses off by %g, params by %g; %d entries", bname[bi], worst, pw, info.entries);
    kn_fn_free(f);
    kn_optim_free(a.opt), kn_optim_free(b.opt);
    kn_ctx_free(ca), kn_ctx_free(cb);
}

static void test_errors(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    CHECK(kn_compile(ctx, NULL, NULL, NULL) == NULL);
    CHECK_ERR(ctx, "operand 'body' is NULL");
    kn_compile_opts o = {.nparams = 2};
    CHECK(kn_compile(ctx, lin_body, NULL, &o) == NULL);
    CHECK_ERR(ctx, "params: 2 given with a NULL array");
    kn_fn *f = kn_compile(ctx, lin_body, NULL, NULL);
    CHECK(kn_call(f, NULL, 2, NULL, 1) != KN_OK);
    CHECK_ERR(ctx, "operand 'in' is NULL");
    CHECK(kn_call(NULL, NULL, 0, NULL, 0) == KN_EINVAL);
    kn_fn_free(f);
    kn_fn_free(NULL);
    kn_ctx_free(ctx);
}

/* ---- no compiler ----
 * With no cc (KILN_CC names none), kn_compile on backend c says so once per
 * context, whatever KILN_LOGS asks, and its functions run on the
 * interpreter with eager's results; tcc, which is here, still compiles. On
 * wasm neither compiler is: both backends say so, once each, and fall back. */
static int nojit_lines;
static void nojit_sink(void *user, const char *line)
{
    (void)user;
    nojit_lines += strstr(line, "has no compiler here") != NULL;
}

static void test_no_compiler(void)
{
#ifdef __wasi__
    static const char *const ran[3] = {"interp", "interp", "interp"};
    const int said = 2; /* c and tcc */
#else
    static const char *const ran[3] = {"interp", "interp", "tcc"};
    const int said = 1;
    const char *was = getenv("KILN_CC");
    char *saved = was ? strdup(was) : NULL;
    setenv("KILN_CC", "/nonexistent/kiln-cc", 1);
#endif
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = 3});
    int64_t ws[2] = {5, 3}, bs[1] = {5}, xs[2] = {4, 3}, ys[2] = {4, 5};
    Lin l = {{kn_param(ctx, kn_randn(ctx, KN_F32, 2, ws)), kn_param(ctx, kn_randn(ctx, KN_F32, 1, bs))}};
    kn_set_log(ctx, nojit_sink, NULL);
    kn_set_logs(ctx, "");
    kn_tensor *in[2] = {kn_keep(ctx, kn_randn(ctx, KN_F32, 2, xs)), kn_keep(ctx, kn_randn(ctx, KN_F32, 2, ys))};
    kn_tensor *want[1];
    CHECK(lin_body(ctx, &l, in, 2, want, 1) == KN_OK);
    for (int i = 0; i < 3; i++) {
        kn_compile_opts o = {.backend = i < 2 ? KN_BACKEND_C : KN_BACKEND_TCC, .params = l.p, .nparams = 2};
        kn_fn *f = kn_compile(ctx, lin_body, &l, &o);
        kn_tensor *out[1] = {NULL};
        kn_fn_info info;
        CHECK_MSG(f && kn_call(f, in, 2, out, 1) == KN_OK && kn_fn_stats(f, &info) == KN_OK, "%s", kn_last_error(ctx));
        CHECK_MSG(out[0] && max_diff(ctx, out[0], want[0]) < 1e-5, "no compiler: fn %d differs from eager", i);
        CHECK_MSG(f && info.backend && !strcmp(info.backend, ran[i]), "no compiler: fn %d ran on %s, expected %s", i,
                  f ? info.backend : "?", ran[i]);
        kn_fn_free(f);
    }
    CHECK_MSG(nojit_lines == said, "no compiler: said %d times, expected %d", nojit_lines, said);
    kn_ctx_free(ctx);
#ifndef __wasi__
    if (saved) setenv("KILN_CC", saved, 1);
    else unsetenv("KILN_CC");
    free(saved);
#endif
}

int main(void)
{
#ifndef __wasi__ /* a fresh cache, so that backend c's compiles are cold (wasm has no compiler) */
    char dir[] = "/tmp/kiln-capture-XXXXXX";
    if (mkdtemp(dir)) setenv("KILN_CACHE_DIR", dir, 1);
#endif
    test_errors();
    test_no_compiler();
    ModelCfg mlp = {0};
    ModelCfg cnn = {.width = 4, .side = 8};
    ModelCfg gpt = {.vocab = 32, .context = 8, .d = 16, .layers = 1, .heads = 2};
    ModelCfg small = {.width = 4};
    for (int bi = 0; bi < 3; bi++) {
        test_inference(bi);
        test_breaks(bi);
        test_read_input(bi);
        test_half_dot(bi);
        test_failed_call(bi);
        test_region(bi, "mlp", mlp);
        test_region(bi, "gpt", gpt);
        test_region_break(bi);
        test_break_unused(bi);
        test_break_output(bi);
        test_break_detached(bi);
        test_read_param(bi);
        test_break_late_grad(bi);
        test_break_detach_input(bi);
        test_break_read_concrete(bi);
        test_step(bi, "gpt", gpt, 0, 0);
        test_in_place(bi);
        test_step(bi, "smallcnn", small, 1, 0);
        if (bi < 2) test_step(bi, "cnn", cnn, 0, 0);
        test_step(bi, "mlp", mlp, 0, 1);
        test_step(bi, "gpt", gpt, 0, 2);
        test_step(bi, "smallcnn", small, 1, 1);
        test_rand_calls(bi, KN_MODE_DEFAULT);
        test_rand_calls(bi, KN_MODE_REDUCE_OVERHEAD);
        test_rand_seeded(bi);
        test_rand_break(bi);
        test_rand_fallback(bi);
        test_rand_region(bi);
        test_rand_train(bi);
    }
    TEST_END("capture");
}
