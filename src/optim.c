/*
 * optim.c — training-side helpers: tensor_assign (the one in-place write),
 * parameter initialisers as PyTorch's nn.init, and the optimizers SGD, Adam
 * and AdamW with PyTorch 1.13's update rules (the single-tensor, non-capturable
 * code paths of torch.optim).
 *
 * An optimizer keeps the parameter handles it was given and, per parameter,
 * the state torch keeps: SGD's momentum buffer; Adam's step count, exp_avg,
 * exp_avg_sq and max_exp_avg_sq. State is made lazily at the first step that
 * reaches a parameter, as torch does, and is kept (kn_keep) until
 * kn_optim_free. A step computes every new value with primitives, grad off,
 * inside a scope (so the math can be traced into a graph later: no loops over
 * data here), and only when all of them exist writes them into the existing
 * tensors with tensor_assign. So a step that fails (a bad grad, out of memory)
 * changes no parameter and no state value; state it made on the way stays, at
 * its initial value, and counts as not yet stepped.
 *
 * Scalars that torch computes as Python floats (bias corrections, step size)
 * are 0-d f64 tensors computed from the step-count tensor, so a traced step
 * does not bake the count into the graph; they are cast to the parameter's
 * dtype where they meet it, as torch casts a Python scalar.
 *
 * Requires: concrete (eager) parameters and grads of the parameters' shapes.
 * Produces: parameters and state updated in place.
 */
#include <math.h>
#include <string.h>

#include "core.h"

/* ---- tensor_assign ---- */

/* One element from sp (dtype sd) to dp (dtype dd), cast as kn_to casts. */
static void convert(kn_dtype dd, void *dp, kn_dtype sd, const void *sp)
{
    if (dd == sd) memcpy(dp, sp, kn_dtype_size(dd));
    else if (!dt_is_float(dd) && !dt_is_float(sd)) dt_store_i(dd, dp, dt_load_i(sd, sp));
    else dt_store(dd, dp, dt_load(sd, sp));
}

/* Steps a row-major multi-index over t's shape, keeping *off t's element offset. */
static void advance(const kn_tensor *t, int64_t *idx, int64_t *off)
{
    for (int d = t->ndim - 1; d >= 0; d--) {
        *off += t->stride[d];
        if (++idx[d] < t->shape[d]) return;
        *off -= t->stride[d] * t->shape[d];
        idx[d] = 0;
    }
}

/* Copies src's elements, cast to dtype dt, row-major into buf (contiguous)
 * or, with buf NULL, into dst's storage at dst's strides. */
static void copy_elems(kn_tensor *dst, const kn_tensor *src, char *buf)
{
    kn_dtype dd = (kn_dtype)dst->dtype, sd = (kn_dtype)src->dtype;
    size_t es = kn_dtype_size(dd);
    int64_t n = tensor_numel(src->ndim, src->shape);
    if (n == 0) return;
    if (dd == sd && kn_is_contiguous(src) && (buf || kn_is_contiguous(dst))) { /* one block (a step's parameters) */
        memmove(buf ? (void *)buf : tensor_ptr(dst, dst->offset), tensor_ptr(src, src->offset), (size_t)n * es);
        return;
    }
    int64_t si[KN_MAX_DIMS] = {0}, di[KN_MAX_DIMS] = {0}, so = src->offset, dof = dst->offset;
    for (int64_t k = 0; k < n; k++) {
        void *dp = buf ? (void *)(buf + (size_t)k * es) : tensor_ptr(dst, dof);
        convert(dd, dp, sd, tensor_ptr(src, so));
        advance(src, si, &so);
        if (!buf) advance(dst, di, &dof);
    }
}

/* Copies buf (contiguous, dst's dtype) into dst's storage at dst's strides. */
static void copy_from_buf(kn_tensor *dst, const char *buf)
{
    size_t es = kn_dtype_size((kn_dtype)dst->dtype);
    int64_t n = tensor_numel(dst->ndim, dst->shape), di[KN_MAX_DIMS] = {0}, dof = dst->offset;
    for (int64_t k = 0; k < n; k++) {
        memcpy(tensor_ptr(dst, dof), buf + (size_t)k * es, es);
        advance(dst, di, &dof);
    }
}

static kn_status assign_checks(kn_ctx *ctx, kn_tensor *dst, kn_tensor *src)
{
    if (!tensor_check(ctx, dst, "dst") || !tensor_check(ctx, src, "src")) return ctx->status;
    if (!dst->st || (!src->st && !ctx->capture))
        return kn_errs(ctx, KN_EUNSUPPORTED, "operand '%s' is symbolic (being traced): in-place assignment "
                       "works on concrete tensors only", dst->st ? "src" : "dst");
    char b0[96], b1[96];
    if (dst->ndim != src->ndim)
        return kn_errs(ctx, KN_ESHAPE, "dst %s and src %s differ in rank (%d vs %d dims)",
                       fmt_shape(b0, sizeof b0, dst), fmt_shape(b1, sizeof b1, src), dst->ndim, src->ndim);
    for (int d = 0; d < dst->ndim; d++)
        if (dst->shape[d] != src->shape[d])
            return kn_errs(ctx, KN_ESHAPE, "dst %s and src %s differ at dim %d (%lld vs %lld)",
                           fmt_shape(b0, sizeof b0, dst), fmt_shape(b1, sizeof b1, src), d,
                           (long long)dst->shape[d], (long long)src->shape[d]);
    return KN_OK;
}

/* When src and dst share storage (src a transpose of dst, say), src is read
 * whole into a buffer first, so no element is overwritten before it is read.
 * dst may be any view, expanded ones aside (their elements alias). */
kn_status tensor_assign(kn_ctx *ctx, kn_tensor *dst, kn_tensor *src)
{
    if (!ctx) return KN_EINVAL;
    const char *saved = op_enter(ctx, "tensor_assign");
    kn_status s = assign_checks(ctx, dst, src);
    if (s == KN_OK && ctx->capture) {
        s = ctx->capture->write(ctx, dst, src); /* kn_call is tracing: a write the program replays */
        op_leave(ctx, saved);
        return s;
    }
    if (s == KN_OK && src->st == dst->st && !tensor_same_layout(dst, src)) {
        size_t bytes = (size_t)tensor_numel(dst->ndim, dst->shape) * kn_dtype_size((kn_dtype)dst->dtype);
        char *buf = kn_alloc(ctx, bytes);
        if (bytes && !buf) s = kn_errs(ctx, KN_ENOMEM, "out of memory for a %zu-byte copy of src", bytes);
        else {
            copy_elems(dst, src, buf);
            copy_from_buf(dst, buf);
            kn_dealloc(ctx, buf, bytes);
        }
    } else if (s == KN_OK && src->st != dst->st) {
        copy_elems(dst, src, NULL);
    }
    if (s == KN_OK) storage_stamp(ctx, dst->st);
    op_leave(ctx, saved);
    return s;
}

/* ---- initialisers ---- */

static kn_tensor *uniform(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, double lo, double hi)
{
    if (!(lo <= hi) || !isfinite(lo) || !isfinite(hi))
        return kn_err(ctx, KN_EINVAL, "bounds lo %g and hi %g must be finite with lo <= hi", lo, hi);
    kn_tensor *u = kn_rand(ctx, dt, ndim, shape);
    return binc(ctx, OP_ADD, binc(ctx, OP_MUL, u, hi - lo), lo);
}

kn_tensor *kn_uniform(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, double lo, double hi)
{
    ENTER(ctx, "kn_uniform");
    return LEAVE(ctx, uniform(ctx, dt, ndim, shape, lo, hi));
}

/* torch.nn.init.kaiming_uniform_(mode='fan_in', nonlinearity='leaky_relu'):
 * std = gain / sqrt(fan_in), bound = sqrt(3) * std, computed in that order. */
kn_tensor *kn_kaiming_uniform(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, double a)
{
    ENTER(ctx, "kn_kaiming_uniform");
    size_t bytes;
    if (!tensor_check_size(ctx, dt, ndim, shape, &bytes)) return LEAVE(ctx, NULL);
    if (ndim < 2)
        return LEAVE(ctx, kn_err(ctx, KN_ESHAPE, "fan_in needs at least 2 dims (shape[1] * prod(shape[2:])), "
                                 "got %d", ndim));
    if (!isfinite(a)) return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "negative slope a = %g is not finite", a));
    if (tensor_numel(ndim, shape) == 0) return LEAVE(ctx, kn_zeros(ctx, dt, ndim, shape)); /* torch: a no-op */
    double fan_in = 1;
    for (int d = 1; d < ndim; d++) fan_in *= (double)shape[d];
    double gain = sqrt(2.0 / (1.0 + a * a)), bound = sqrt(3.0) * (gain / sqrt(fan_in));
    return LEAVE(ctx, uniform(ctx, dt, ndim, shape, -bound, bound));
}

/* ---- optimizers ---- */

typedef enum { OPT_SGD, OPT_ADAM, OPT_ADAMW } OptKind;

enum { ST_BUF, ST_STEP, ST_EXP_AVG, ST_EXP_AVG_SQ, ST_MAX_EXP_AVG_SQ, ST_COUNT };

/* A parameter's state: the tensors its optimizer uses (NULL until made). */
typedef struct {
    kn_tensor *t[ST_COUNT]; /* SGD: buf; Adam(W): step (0-d f64), exp_avg, exp_avg_sq, max_exp_avg_sq */
    int started;            /* SGD: a step has filled buf (torch: buf is not None) */
} ParamState;

struct kn_optim {
    kn_ctx *ctx;
    OptKind kind;
    kn_sgd_opts sgd;   /* OPT_SGD, as given (zeros are meaningful) */
    kn_adam_opts adam; /* OPT_ADAM(W), with defaults applied */
    int n;
    kn_tensor **params; /* not owned */
    ParamState *state;
};

/* A write that commits a step: dst gets src's values. */
typedef struct {
    kn_tensor *dst, *src;
} Write;

typedef struct {
    Write *w;
    int n;
} Writes;

static const char *kind_name[] = {"kn_sgd", "kn_adam", "kn_adamw"};

static int bad_option(kn_ctx *ctx, const char *name, double v, const char *want)
{
    kn_err(ctx, KN_EINVAL, "option '%s' is %g: %s", name, v, want);
    return 0;
}

/* torch.optim.SGD's checks; lr has no default there, so 0 ("not given") is refused. */
static int sgd_options(kn_ctx *ctx, const kn_sgd_opts *o)
{
    if (o->lr == 0) return bad_option(ctx, "lr", 0, "SGD has no default learning rate (0 means not given)");
    if (!(o->lr > 0)) return bad_option(ctx, "lr", o->lr, "the learning rate must be > 0");
    if (!(o->momentum >= 0)) return bad_option(ctx, "momentum", o->momentum, "must be >= 0");
    if (!(o->weight_decay >= 0)) return bad_option(ctx, "weight_decay", o->weight_decay, "must be >= 0");
    if (!isfinite(o->dampening)) return bad_option(ctx, "dampening", o->dampening, "must be finite");
    if (o->nesterov && (o->momentum <= 0 || o->dampening != 0)) {
        kn_err(ctx, KN_EINVAL, "option 'nesterov' requires momentum > 0 and dampening 0 (got momentum %g, "
               "dampening %g)", o->momentum, o->dampening);
        return 0;
    }
    return 1;
}

/* Applies the zero-means-default rules, then torch.optim.Adam's checks. */
static int adam_options(kn_ctx *ctx, OptKind kind, kn_adam_opts *o)
{
    if (o->lr == 0) o->lr = 1e-3;
    if (o->beta1 == 0) o->beta1 = 0.9;
    if (o->beta2 == 0) o->beta2 = 0.999;
    if (o->eps == 0) o->eps = 1e-8;
    if (kind == OPT_ADAMW && o->weight_decay == 0) o->weight_decay = 1e-2;
    if (!(o->lr >= 0)) return bad_option(ctx, "lr", o->lr, "the learning rate must be >= 0");
    if (!(o->eps >= 0)) return bad_option(ctx, "eps", o->eps, "must be >= 0");
    if (!(o->beta1 >= 0 && o->beta1 < 1)) return bad_option(ctx, "beta1", o->beta1, "must be in [0, 1)");
    if (!(o->beta2 >= 0 && o->beta2 < 1)) return bad_option(ctx, "beta2", o->beta2, "must be in [0, 1)");
    if (!(o->weight_decay >= 0)) return bad_option(ctx, "weight_decay", o->weight_decay, "must be >= 0");
    return 1;
}

static int check_params(kn_ctx *ctx, kn_tensor *const *params, int n)
{
    if (!params || n <= 0) {
        kn_err(ctx, KN_EINVAL, "optimizer got an empty parameter list (params %s, n = %d)",
               params ? "given" : "NULL", n);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        kn_tensor *p = params[i];
        if (!p) {
            if (ctx->status == KN_OK) kn_err(ctx, KN_EINVAL, "operand 'params[%d]' is NULL", i);
            return 0;
        }
        if (!dt_is_float((kn_dtype)p->dtype)) {
            kn_err(ctx, KN_EDTYPE, "params[%d] is %s: optimizers need floating-point parameters", i,
                   kn_dtype_name((kn_dtype)p->dtype));
            return 0;
        }
        if (!p->st) {
            kn_err(ctx, KN_EUNSUPPORTED, "params[%d] is symbolic (being traced): make optimizers outside "
                   "kn_compile", i);
            return 0;
        }
        for (int j = 0; j < i; j++)
            if (params[j] == p) {
                kn_err(ctx, KN_EINVAL, "params[%d] and params[%d] are the same tensor", j, i);
                return 0;
            }
    }
    return 1;
}

static kn_optim *optim_new(kn_ctx *ctx, OptKind kind, kn_tensor *const *params, int n)
{
    if (!check_params(ctx, params, n)) return NULL;
    kn_optim *o = kn_alloc(ctx, sizeof *o);
    size_t pb = (size_t)n * sizeof *o->params, sb = (size_t)n * sizeof *o->state;
    if (o) memset(o, 0, sizeof *o);
    if (o && !(o->params = kn_alloc(ctx, pb))) { kn_dealloc(ctx, o, sizeof *o); o = NULL; }
    if (o && !(o->state = kn_alloc(ctx, sb))) {
        kn_dealloc(ctx, o->params, pb);
        kn_dealloc(ctx, o, sizeof *o);
        o = NULL;
    }
    if (!o) return kn_err(ctx, KN_ENOMEM, "out of memory for an optimizer of %d parameters", n);
    o->ctx = ctx;
    o->kind = kind;
    o->n = n;
    memcpy(o->params, params, pb);
    memset(o->state, 0, sb);
    return o;
}

kn_optim *kn_sgd(kn_ctx *ctx, kn_tensor *const *params, int n, const kn_sgd_opts *opts)
{
    if (!ctx) return NULL;
    const char *saved = op_enter(ctx, kind_name[OPT_SGD]);
    kn_sgd_opts o;
    memset(&o, 0, sizeof o);
    if (opts) o = *opts;
    kn_optim *opt = sgd_options(ctx, &o) ? optim_new(ctx, OPT_SGD, params, n) : NULL;
    if (opt) opt->sgd = o;
    op_leave(ctx, saved);
    return opt;
}

static kn_optim *adam_new(kn_ctx *ctx, OptKind kind, kn_tensor *const *params, int n, const kn_adam_opts *opts)
{
    if (!ctx) return NULL;
    const char *saved = op_enter(ctx, kind_name[kind]);
    kn_adam_opts o;
    memset(&o, 0, sizeof o);
    if (opts) o = *opts;
    kn_optim *opt = adam_options(ctx, kind, &o) ? optim_new(ctx, kind, params, n) : NULL;
    if (opt) opt->adam = o;
    op_leave(ctx, saved);
    return opt;
}

kn_optim *kn_adam(kn_ctx *ctx, kn_tensor *const *params, int n, const kn_adam_opts *o)
{
    return adam_new(ctx, OPT_ADAM, params, n, o);
}

kn_optim *kn_adamw(kn_ctx *ctx, kn_tensor *const *params, int n, const kn_adam_opts *o)
{
    return adam_new(ctx, OPT_ADAMW, params, n, o);
}

/* ---- the step: every new value first, then the writes ---- */

/* y + alpha * x, as torch's y.add(x, alpha=alpha): alpha in y's dtype. */
static kn_tensor *add_scaled(kn_ctx *ctx, kn_tensor *y, double alpha, kn_tensor *x)
{
    if (!y) return NULL;
    kn_tensor *ax = alpha == 1 ? x : binc(ctx, OP_MUL, x, alpha);
    return bin(ctx, OP_ADD, y, ax, (kn_dtype)y->dtype);
}

/* A 0-d f64 scalar s cast to x's dtype and combined: x op s. */
static kn_tensor *with_scalar(kn_ctx *ctx, Op op, kn_tensor *x, kn_tensor *s)
{
    if (!x || !s) return NULL;
    return bin(ctx, op, x, p_cast(ctx, s, (kn_dtype)x->dtype), (kn_dtype)x->dtype);
}

static int push(Writes *ws, kn_tensor *dst, kn_tensor *src)
{
    if (!src) return 0;
    ws->w[ws->n].dst = dst;
    ws->w[ws->n].src = src;
    ws->n++;
    return 1;
}

/* State slot k of parameter i, made (zeros, kept) if absent: 0-d f64 for the
 * step count, else the parameter's dtype and shape. */
static kn_tensor *state(kn_optim *o, int i, int k)
{
    kn_tensor **t = &o->state[i].t[k], *p = o->params[i];
    if (!*t) { /* concrete even while kn_call traces: state outlives the trace */
        Graph *tr = o->ctx->trace;
        o->ctx->trace = NULL;
        *t = k == ST_STEP ? kn_zeros(o->ctx, KN_F64, 0, NULL) : kn_zeros(o->ctx, (kn_dtype)p->dtype, p->ndim, p->shape);
        kn_keep(o->ctx, *t);
        o->ctx->trace = tr;
    }
    return *t;
}

/* The grad as the update sees it: in p's dtype, negated under maximize. */
static kn_tensor *grad_of(kn_ctx *ctx, kn_tensor *p, kn_tensor *g, int maximize)
{
    g = p_cast(ctx, g, (kn_dtype)p->dtype);
    return maximize ? prim1(ctx, OP_NEG, g) : g;
}

/* torch.optim.SGD (1.13, _single_tensor_sgd):
 *   d = maximize ? -g : g;  d += wd * p
 *   buf = first step ? d : momentum * buf + (1 - dampening) * d
 *   d = nesterov ? d + momentum * buf : buf;  p -= lr * d */
static int sgd_update(kn_optim *o, int i, kn_tensor *g, Writes *ws)
{
    kn_ctx *ctx = o->ctx;
    const kn_sgd_opts *s = &o->sgd;
    kn_tensor *p = o->params[i];
    kn_tensor *d = grad_of(ctx, p, g, s->maximize);
    if (s->weight_decay != 0) d = add_scaled(ctx, d, s->weight_decay, p);
    if (s->momentum != 0) {
        kn_tensor *buf = state(o, i, ST_BUF);
        if (!buf) return 0;
        if (ctx->capture) ctx->capture->guard_flag(ctx, &o->state[i].started, "SGD momentum buffer started");
        kn_tensor *nb = o->state[i].started ? add_scaled(ctx, binc(ctx, OP_MUL, buf, s->momentum),
                                                         1 - s->dampening, d)
                                            : d;
        if (!push(ws, buf, nb)) return 0;
        d = s->nesterov ? add_scaled(ctx, d, s->momentum, nb) : nb;
    }
    return push(ws, p, add_scaled(ctx, p, -s->lr, d));
}

/* torch.optim.Adam / AdamW (1.13, _single_tensor_adam(w)):
 *   step += 1;  d = maximize ? -g : g
 *   Adam: d += wd * p            AdamW: p *= 1 - lr * wd
 *   m = beta1 * m + (1 - beta1) * d;  v = beta2 * v + (1 - beta2) * d * d
 *   amsgrad: vmax = max(vmax, v), used in place of v
 *   p -= (lr / (1 - beta1^step)) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps) */
static int adam_update(kn_optim *o, int i, kn_tensor *g, Writes *ws)
{
    kn_ctx *ctx = o->ctx;
    const kn_adam_opts *a = &o->adam;
    kn_tensor *p = o->params[i], *base = p;
    kn_tensor *step = state(o, i, ST_STEP), *m = state(o, i, ST_EXP_AVG), *v = state(o, i, ST_EXP_AVG_SQ);
    kn_tensor *vmax = a->amsgrad ? state(o, i, ST_MAX_EXP_AVG_SQ) : NULL;
    if (!step || !m || !v || (a->amsgrad && !vmax)) return 0;
    kn_tensor *d = grad_of(ctx, p, g, a->maximize);
    kn_tensor *nstep = binc(ctx, OP_ADD, step, 1.0);
    if (o->kind == OPT_ADAMW) base = binc(ctx, OP_MUL, p, 1 - a->lr * a->weight_decay);
    else if (a->weight_decay != 0) d = add_scaled(ctx, d, a->weight_decay, p);
    kn_tensor *nm = add_scaled(ctx, binc(ctx, OP_MUL, m, a->beta1), 1 - a->beta1, d);
    kn_tensor *dd = d ? prim2(ctx, OP_MUL, binc(ctx, OP_MUL, d, 1 - a->beta2), d) : NULL;
    kn_tensor *nv = add_scaled(ctx, binc(ctx, OP_MUL, v, a->beta2), 1, dd);
    if (!push(ws, step, nstep) || !push(ws, m, nm) || !push(ws, v, nv)) return 0;
    if (a->amsgrad) {
        nv = bin(ctx, OP_MAX, vmax, nv, (kn_dtype)p->dtype);
        if (!push(ws, vmax, nv)) return 0;
    }
    kn_tensor *one = c_scalar(ctx, KN_F64, 1.0);
    kn_tensor *bc1 = bin(ctx, OP_SUB, one, bin(ctx, OP_POW, c_scalar(ctx, KN_F64, a->beta1), nstep, KN_F64), KN_F64);
    kn_tensor *bc2 = bin(ctx, OP_SUB, one, bin(ctx, OP_POW, c_scalar(ctx, KN_F64, a->beta2), nstep, KN_F64), KN_F64);
    kn_tensor *step_size = bin(ctx, OP_DIV, c_scalar(ctx, KN_F64, a->lr), bc1, KN_F64);
    kn_tensor *denom = binc(ctx, OP_ADD, with_scalar(ctx, OP_DIV, prim1(ctx, OP_SQRT, nv), prim1(ctx, OP_SQRT, bc2)),
                            a->eps);
    kn_tensor *upd = nm ? prim2(ctx, OP_DIV, with_scalar(ctx, OP_MUL, nm, step_size), denom) : NULL;
    return push(ws, p, upd ? bin(ctx, OP_SUB, base, upd, (kn_dtype)p->dtype) : NULL);
}

static kn_status check_grad(kn_ctx *ctx, int i, kn_tensor *p, kn_tensor *g)
{
    char b0[96], b1[96];
    if (!g->st && !ctx->capture)
        return kn_errs(ctx, KN_EUNSUPPORTED, "the grad of params[%d] is symbolic: trace the step through kn_compile", i);
    if (g->ndim != p->ndim || memcmp(g->shape, p->shape, p->ndim * sizeof *p->shape) != 0)
        return kn_errs(ctx, KN_ESHAPE, "the grad of params[%d] has shape %s, the parameter %s", i,
                       fmt_shape(b0, sizeof b0, g), fmt_shape(b1, sizeof b1, p));
    return KN_OK;
}

/* Every new value of the step, into ws; 0 on error (nothing written yet). */
static int compute(kn_optim *o, Writes *ws)
{
    kn_ctx *ctx = o->ctx;
    for (int i = 0; i < o->n; i++) {
        kn_tensor *p = o->params[i], *g = kn_grad(ctx, p);
        if (!g) continue;
        if (check_grad(ctx, i, p, g) != KN_OK) return 0;
        if (!(o->kind == OPT_SGD ? sgd_update(o, i, g, ws) : adam_update(o, i, g, ws))) {
            if (ctx->status == KN_OK) kn_err(ctx, KN_ENOMEM, "out of memory updating params[%d]", i);
            return 0;
        }
    }
    return 1;
}

/* No write reads another write's destination: every src is a fresh result
 * (or, for SGD's first buf, the grad), so the order of writes is free. */
static kn_status commit(kn_optim *o, const Writes *ws)
{
    for (int k = 0; k < ws->n; k++)
        if (tensor_assign(o->ctx, ws->w[k].dst, ws->w[k].src) != KN_OK) return o->ctx->status;
    if (o->kind == OPT_SGD)
        for (int i = 0; i < o->n; i++)
            if (o->state[i].t[ST_BUF]) o->state[i].started = 1;
    return KN_OK;
}

kn_status kn_optim_step(kn_optim *o)
{
    if (!o) return KN_EINVAL;
    kn_ctx *ctx = o->ctx;
    const char *saved = op_enter(ctx, "kn_optim_step");
    kn_status s = KN_OK;
    if (ctx->trace && !ctx->capture) {
        s = kn_errs(ctx, KN_EUNSUPPORTED, "optimizer steps are traced through kn_compile only");
        op_leave(ctx, saved);
        return s;
    }
    size_t bytes = (size_t)o->n * ST_COUNT * sizeof(Write);
    Writes ws = {kn_alloc(ctx, bytes), 0};
    if (!ws.w) {
        s = kn_errs(ctx, KN_ENOMEM, "out of memory for the step's %zu-byte write list", bytes);
        op_leave(ctx, saved);
        return s;
    }
    int grad_was = kn_set_grad_enabled(ctx, 0);
    kn_scope_begin(ctx);
    s = compute(o, &ws) ? commit(o, &ws) : ctx->status;
    kn_scope_end(ctx);
    kn_set_grad_enabled(ctx, grad_was);
    kn_dealloc(ctx, ws.w, bytes);
    op_leave(ctx, saved);
    return s;
}

void kn_optim_zero_grad(kn_optim *o)
{
    if (o) kn_zero_grad(o->ctx, o->params, o->n);
}

void kn_optim_free(kn_optim *o)
{
    if (!o) return;
    for (int i = 0; i < o->n; i++)
        for (int k = 0; k < ST_COUNT; k++) kn_free(o->ctx, o->state[i].t[k]);
    kn_dealloc(o->ctx, o->state, (size_t)o->n * sizeof *o->state);
    kn_dealloc(o->ctx, o->params, (size_t)o->n * sizeof *o->params);
    kn_dealloc(o->ctx, o, sizeof *o);
}
