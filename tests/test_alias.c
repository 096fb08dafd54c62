/*
 * test_alias.c — kn_compile's outputs share storage where eager's do, on
 * every backend: an output that is a view of a parameter shows what the
 * body's optimizer step (or a later one) wrote, one that eager copies does
 * not; a traced kn_view refuses what eager's refuses (a non-contiguous
 * view, of a traced value, an input or a parameter).
 *
 * Each case runs a body eagerly (the oracle) and compiled, in contexts made
 * alike, and compares what each call handed out after the step.
 */
#include "test.h"

static kn_backend backends[3] = {KN_BACKEND_INTERP, KN_BACKEND_TCC, KN_BACKEND_C};
static const char *bname[3] = {"interp", "tcc", "c"};

/* ---- outputs that view a parameter the body's step writes ---- */

enum { V_TRANSPOSE, V_RESHAPE, V_SLICE, V_DETACH, V_SELF, V_COPY, V_NCOPY, NVIEW };
static const char *vname[NVIEW] = {"transpose", "reshape", "slice", "detach", "the param", "contiguous copy",
                                   "reshape copy"};

typedef struct {
    kn_tensor *p[1];
    kn_optim *opt;
    int kind;
} Step;

static kn_tensor *view_of(kn_ctx *ctx, kn_tensor *p, int kind)
{
    switch (kind) {
    case V_TRANSPOSE: return kn_transpose(ctx, p, 0, 1);
    case V_RESHAPE: return kn_reshape(ctx, p, 1, (const int64_t[]){6});
    case V_SLICE: return kn_slice(ctx, p, 1, 1, 3, 1);
    case V_DETACH: return kn_detach(ctx, p);
    case V_SELF: return p;
    case V_COPY: return kn_contiguous(ctx, kn_transpose(ctx, p, 0, 1)); /* eager copies: the old values */
    default: return kn_reshape(ctx, kn_transpose(ctx, p, 0, 1), 1, (const int64_t[]){6});
    }
}

/* out[0]: a view (or copy) of p taken before the step; out[1]: the loss */
static kn_status step_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Step *u = user;
    (void)in, (void)nin, (void)nout;
    kn_zero_grad(ctx, u->p, 1);
    out[0] = view_of(ctx, u->p[0], u->kind);
    kn_tensor *loss = kn_sum(ctx, kn_square(ctx, u->p[0]), NULL, 0, 0);
    if (!out[0] || !loss || kn_backward(ctx, loss, 0) != KN_OK || kn_optim_step(u->opt) != KN_OK)
        return kn_last_status(ctx);
    out[1] = loss;
    return KN_OK;
}

static void step_setup(kn_ctx *ctx, Step *u, int kind)
{
    static const double v[6] = {1, -2, 3, 0.5, -1.5, 2.5};
    u->kind = kind;
    u->p[0] = kn_param(ctx, kn_tensor_from(ctx, KN_F64, 2, (const int64_t[]){2, 3}, v));
    u->opt = kn_sgd(ctx, u->p, 1, &(kn_sgd_opts){.lr = 0.1, .momentum = 0.9});
    kn_set_grad_enabled(ctx, 1);
}

static void test_step_views(int bi, int kind)
{
    kn_ctx *ce = kn_ctx_new(NULL), *cc = kn_ctx_new(NULL);
    Step ue, uc;
    step_setup(ce, &ue, kind);
    step_setup(cc, &uc, kind);
    kn_fn *f = kn_compile(cc, step_body, &uc, &(kn_compile_opts){.params = uc.p, .nparams = 1, .backend = backends[bi]});
    for (int call = 0; call < 3; call++) {
        kn_tensor *oe[2] = {NULL, NULL}, *oc[2] = {NULL, NULL};
        kn_status se = step_body(ce, &ue, NULL, 0, oe, 2), sc = kn_call(f, NULL, 0, oc, 2);
        CHECK_MSG(se == KN_OK && sc == KN_OK, "%s, %s, call %d: eager %d, compiled %d: %s", bname[bi], vname[kind],
                  call, (int)se, (int)sc, kn_last_error(cc));
        double d = test_rel_diff(cc, oc[0], ce, oe[0]);
        CHECK_MSG(d < 1e-12, "%s, %s, call %d: out[0] differs from eager's by %g", bname[bi], vname[kind], call, d);
        /* a step outside the body: eager's view shows it too */
        kn_zero_grad(ce, ue.p, 1), kn_zero_grad(cc, uc.p, 1);
        kn_backward(ce, kn_sum(ce, ue.p[0], NULL, 0, 0), 0);
        kn_backward(cc, kn_sum(cc, uc.p[0], NULL, 0, 0), 0);
        kn_optim_step(ue.opt), kn_optim_step(uc.opt);
        d = test_rel_diff(cc, oc[0], ce, oe[0]);
        CHECK_MSG(d < 1e-12, "%s, %s, call %d: after a step outside, out[0] differs from eager's by %g", bname[bi],
                  vname[kind], call, d);
    }
    kn_fn_free(f);
    kn_optim_free(ue.opt), kn_optim_free(uc.opt);
    kn_ctx_free(ce), kn_ctx_free(cc);
}

/* ---- an output that views an input: the view eager's is, at every size of a dynamic dim ---- */

static kn_status tr_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    out[0] = kn_slice(ctx, kn_transpose(ctx, in[0], 0, 1), 0, 1, 3, 1);
    out[1] = kn_neg(ctx, in[0]);
    return out[0] && out[1] ? KN_OK : kn_last_status(ctx);
}

static void test_input_views(int bi, kn_dynamic dyn, int transposed)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    kn_fn *f = kn_compile(ctx, tr_body, NULL, &(kn_compile_opts){.backend = backends[bi], .dynamic = dyn});
    for (int64_t n = 3; n < 7; n++) {
        kn_tensor *x = kn_reshape(ctx, kn_arange(ctx, KN_F32, 0, (double)(4 * n), 1), 2,
                                  transposed ? (const int64_t[]){4, n} : (const int64_t[]){n, 4});
        if (transposed) x = kn_transpose(ctx, x, 0, 1); /* (n, 4), strides (1, n) */
        kn_tensor *oe[2] = {NULL, NULL}, *oc[2] = {NULL, NULL};
        kn_status se = tr_body(ctx, NULL, &x, 1, oe, 2), sc = kn_call(f, &x, 1, oc, 2);
        CHECK_MSG(se == KN_OK && sc == KN_OK, "%s, n %lld: %s", bname[bi], (long long)n, kn_last_error(ctx));
        CHECK_MSG(oc[0] && kn_ndim(oc[0]) == 2 && kn_shape(oc[0])[0] == 2 && kn_shape(oc[0])[1] == n &&
                      memcmp(kn_strides(oc[0]), kn_strides(oe[0]), 2 * sizeof(int64_t)) == 0,
                  "%s, n %lld%s: out[0] is not eager's view", bname[bi], (long long)n,
                  transposed ? ", transposed" : "");
        CHECK_MSG(test_rel_diff(ctx, oc[0], ctx, oe[0]) == 0 && test_rel_diff(ctx, oc[1], ctx, oe[1]) == 0,
                  "%s, n %lld: values differ", bname[bi], (long long)n);
    }
    kn_fn_info info;
    kn_fn_stats(f, &info);
    CHECK_MSG(dyn != KN_DYNAMIC_ON || info.entries == 1, "%s%s: %d entries for 4 sizes, dynamic on", bname[bi],
              transposed ? ", transposed" : "", info.entries);
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* ---- kn_view of a traced tensor: refused where eager's is ---- */

enum { NC_TRANSPOSED, NC_INPUT, NC_PARAM, NC_COPY, NC_SLICE, NNC };
static const char *ncname[NNC] = {"view of a transpose", "view of a non-contiguous input",
                                  "view of a transposed parameter", "view of a contiguous copy",
                                  "view of a row slice"};

typedef struct {
    kn_tensor *p[1];
    int kind;
} Nc;

static kn_status nc_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Nc *u = user;
    (void)nin, (void)nout;
    const int64_t flat[1] = {12};
    kn_tensor *x = kn_add(ctx, in[0], kn_scalar(ctx, 1)); /* (3, 4), fresh */
    switch (u->kind) {
    case NC_TRANSPOSED: x = kn_transpose(ctx, x, 0, 1); break;              /* eager refuses */
    case NC_INPUT: x = in[1]; break;                                           /* (4, 3) transposed: refuses */
    case NC_PARAM: x = kn_transpose(ctx, u->p[0], 0, 1); break;                /* refuses */
    case NC_COPY: x = kn_contiguous(ctx, kn_transpose(ctx, x, 0, 1)); break; /* views */
    default: x = kn_slice(ctx, x, 0, 1, 3, 1); break;                          /* rows: views */
    }
    out[0] = kn_view(ctx, x, 1, u->kind == NC_SLICE ? (const int64_t[]){8} : flat);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static void test_view_nc(int bi, int kind)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    Nc u = {{kn_param(ctx, kn_reshape(ctx, kn_arange(ctx, KN_F32, 0, 12, 1), 2, (const int64_t[]){4, 3}))}, kind};
    kn_fn *f = kn_compile(ctx, nc_body, &u, &(kn_compile_opts){.backend = backends[bi], .params = u.p, .nparams = 1});
    kn_tensor *x = kn_reshape(ctx, kn_arange(ctx, KN_F32, 0, 12, 1), 2, (const int64_t[]){3, 4});
    kn_tensor *in[2] = {x, kn_transpose(ctx, x, 0, 1)};
    for (int call = 0; call < 2; call++) {
        kn_tensor *oe = NULL, *oc = NULL;
        kn_status se = nc_body(ctx, &u, in, 2, &oe, 1);
        kn_clear_error(ctx);
        kn_status sc = kn_call(f, in, 2, &oc, 1);
        CHECK_MSG(se == sc, "%s, %s, call %d: eager %d, compiled %d (%s)", bname[bi], ncname[kind], call, (int)se,
                  (int)sc, kn_last_error(ctx));
        kn_clear_error(ctx);
        CHECK_MSG(se || test_rel_diff(ctx, oc, ctx, oe) == 0, "%s, %s: values differ", bname[bi], ncname[kind]);
    }
    kn_fn_free(f);
    kn_ctx_free(ctx);
}

/* ---- a compiled forward that returns a leaf itself, its backward outside ---- */

typedef struct {
    kn_tensor *p[1];
    int which; /* 0: the parameter, 1: the input, 2: both and a product */
} Leaf;

static kn_status leaf_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Leaf *u = user;
    (void)nin, (void)nout;
    out[0] = u->which == 1 ? in[0] : u->p[0];
    out[1] = u->which == 2 ? in[0] : kn_mul(ctx, in[0], u->p[0]);
    return out[0] && out[1] ? KN_OK : kn_last_status(ctx);
}

static void test_leaf_out(int bi, int which)
{
    kn_ctx *ce = kn_ctx_new(NULL), *cc = kn_ctx_new(NULL);
    kn_ctx *cs[2] = {ce, cc};
    Leaf u[2];
    kn_tensor *x[2], *g[2][2];
    for (int i = 0; i < 2; i++) {
        kn_ctx *c = cs[i];
        kn_set_grad_enabled(c, 1);
        u[i].which = which;
        u[i].p[0] = kn_param(c, kn_reshape(c, kn_arange(c, KN_F32, 1, 7, 1), 2, (const int64_t[]){2, 3}));
        x[i] = kn_requires_grad(c, kn_reshape(c, kn_arange(c, KN_F32, -3, 3, 1), 2, (const int64_t[]){2, 3}), 1);
    }
    kn_fn *f = kn_compile(cc, leaf_body, &u[1], &(kn_compile_opts){.backend = backends[bi], .params = u[1].p, .nparams = 1});
    for (int call = 0; call < 2; call++) {
        for (int i = 0; i < 2; i++) {
            kn_ctx *c = cs[i];
            kn_tensor *o[2] = {NULL, NULL};
            kn_zero_grad(c, u[i].p, 1), kn_zero_grad(c, &x[i], 1);
            kn_status s = i ? kn_call(f, &x[i], 1, o, 2) : leaf_body(c, &u[i], &x[i], 1, o, 2);
            kn_tensor *w = kn_reshape(c, kn_arange(c, KN_F32, 0, 6, 1), 2, (const int64_t[]){2, 3});
            kn_tensor *loss = s ? NULL : kn_sum(c, kn_add(c, kn_mul(c, o[0], w), kn_square(c, o[1])), NULL, 0, 0);
            s = s ? s : kn_backward(c, loss, 0);
            CHECK_MSG(s == KN_OK, "%s, leaf %d, call %d, %s: %s", bname[bi], which, call, i ? "compiled" : "eager",
                      kn_last_error(c));
            g[i][0] = kn_grad(c, u[i].p[0]), g[i][1] = kn_grad(c, x[i]);
        }
        for (int j = 0; j < 2; j++)
            CHECK_MSG(test_rel_diff(cc, g[1][j], ce, g[0][j]) < 1e-6, "%s, leaf %d, call %d: the grad of %s differs",
                      bname[bi], which, call, j ? "the input" : "the parameter");
    }
    kn_fn_free(f);
    kn_ctx_free(ce), kn_ctx_free(cc);
}

int main(void)
{
    for (int bi = 0; bi < 3; bi++) {
        for (int k = 0; k < NVIEW; k++) test_step_views(bi, k);
        for (int k = 0; k < NNC; k++) test_view_nc(bi, k);
        for (int k = 0; k < 3; k++) test_leaf_out(bi, k);
        for (int tr = 0; tr < 2; tr++) {
            test_input_views(bi, KN_DYNAMIC_OFF, tr);
            test_input_views(bi, KN_DYNAMIC_ON, tr);
        }
    }
    TEST_END("alias");
}
