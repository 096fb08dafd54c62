/*
 * prim.c — the primitive layer: the op table, one shape rule per op class,
 * and prim(), through which every composite reaches computation.
 *
 * prim() checks its sources, applies the shape rule, then either records a
 * node in the graph being traced (ctx->trace) or runs the op eagerly: the
 * movement ops reshape, permute, expand and slice make views of the source's
 * storage; everything else gets a fresh contiguous tensor from the
 * interpreter, or from a compiled kernel when the context's eager backend
 * is tcc or c (eager.c).
 *
 * Requires: sources of the dtypes and shapes each rule names (composites
 * cast and broadcast first). Produces: a tensor, or NULL with the error set.
 */
#include <string.h>

#include "core.h"

const OpInfo kn_opinfo[OP_COUNT] = {
#define X(e, name, nsrc, cls) {name, nsrc, cls},
    KN_PRIMS(X)
#undef X
};

/* ---- shape rules ---- */

typedef struct {
    uint8_t dt, ndim;
    const Dim *shape;
} Sig;

static kn_status same_shape(kn_ctx *ctx, const char *op, const Sig *a, const Sig *b)
{
    if (a->ndim != b->ndim || memcmp(a->shape, b->shape, a->ndim * sizeof(Dim)) != 0)
        return kn_errs(ctx, KN_ESHAPE, "%s: operand shapes differ (%d dims vs %d dims)", op, a->ndim, b->ndim);
    return KN_OK;
}

static kn_status rule_elementwise(kn_ctx *ctx, Op op, const Sig *s, uint8_t *odt)
{
    const char *name = kn_opinfo[op].name;
    OpClass cls = kn_opinfo[op].cls;
    int first = cls == OC_WHERE ? 1 : 0, n = kn_opinfo[op].nsrc;
    if (cls == OC_WHERE && s[0].dt != KN_BOOL)
        return kn_errs(ctx, KN_EDTYPE, "%s: condition must be bool, got %s", name, kn_dtype_name(s[0].dt));
    for (int i = 1; i < n; i++) {
        if (same_shape(ctx, name, &s[0], &s[i])) return ctx->status;
        if (i > first && s[i].dt != s[first].dt)
            return kn_errs(ctx, KN_EDTYPE, "%s: operand dtypes differ (%s vs %s)", name,
                           kn_dtype_name(s[first].dt), kn_dtype_name(s[i].dt));
    }
    kn_dtype dt = (kn_dtype)s[first].dt;
    int transcendental = op >= OP_EXP && op <= OP_ERF;
    if (transcendental && !dt_is_float(dt))
        return kn_errs(ctx, KN_EDTYPE, "%s: needs a float operand, got %s", name, kn_dtype_name(dt));
    if ((op == OP_NEG || op == OP_POW) && dt == KN_BOOL)
        return kn_errs(ctx, KN_EDTYPE, "%s: bool operands are not supported", name);
    *odt = cls == OC_COMPARE ? KN_BOOL : dt;
    return KN_OK;
}

static kn_status rule_move(kn_ctx *ctx, Op op, const Sig *s, const Params *p, uint8_t *ondim, Dim *osh)
{
    int nd = s->ndim;
    switch (op) {
    case OP_RESHAPE: {
        int64_t a = 1, b = 1;
        int sym = 0;
        for (int i = 0; i < nd; i++) { sym |= DIM_IS_SYM(s->shape[i]); a *= s->shape[i]; }
        for (int i = 0; i < p->n; i++) { sym |= DIM_IS_SYM(p->i[i]); b *= p->i[i]; osh[i] = p->i[i]; }
        if (!sym && a != b)
            return kn_errs(ctx, KN_ESHAPE, "reshape: %lld elements cannot become %lld", (long long)a, (long long)b);
        *ondim = p->n;
        return KN_OK;
    }
    case OP_PERMUTE: {
        int seen = 0;
        for (int i = 0; i < nd; i++) {
            int64_t d = p->i[i];
            if (d < 0 || d >= nd || (seen >> d & 1))
                return kn_errs(ctx, KN_EINVAL, "permute: entry %d (%lld) makes no permutation of %d dims", i,
                               (long long)d, nd);
            seen |= 1 << d;
            osh[i] = s->shape[d];
        }
        *ondim = (uint8_t)nd;
        return KN_OK;
    }
    case OP_EXPAND:
        if (p->n != nd) return kn_errs(ctx, KN_ESHAPE, "expand: %d dims cannot expand to %d", nd, p->n);
        for (int i = 0; i < nd; i++) {
            if (s->shape[i] != p->i[i] && s->shape[i] != 1)
                return kn_errs(ctx, KN_ESHAPE, "expand: dim %d of size %lld cannot expand to %lld", i,
                               (long long)s->shape[i], (long long)p->i[i]);
            osh[i] = p->i[i];
        }
        *ondim = (uint8_t)nd;
        return KN_OK;
    case OP_SLICE: {
        int64_t d = p->i[0], start = p->i[1], count = p->i[2], step = p->i[3];
        if (d < 0 || d >= nd) return kn_errs(ctx, KN_EINVAL, "slice: dim %lld out of range", (long long)d);
        int64_t size = s->shape[d], last = start + (count - 1) * step;
        if (step == 0 || count < 0 || (count > 0 && !DIM_IS_SYM(size) &&
                                       (start < 0 || start >= size || last < 0 || last >= size)))
            return kn_errs(ctx, KN_EINVAL, "slice: start %lld, count %lld, step %lld do not fit dim %lld of size %lld",
                           (long long)start, (long long)count, (long long)step, (long long)d, (long long)size);
        memcpy(osh, s->shape, nd * sizeof(Dim));
        osh[d] = count;
        *ondim = (uint8_t)nd;
        return KN_OK;
    }
    default: /* OP_PAD */
        for (int i = 0; i < nd; i++) {
            int64_t lo = p->i[2 * i], hi = p->i[2 * i + 1], n = s->shape[i];
            if (lo < 0 || hi < 0) return kn_errs(ctx, KN_EINVAL, "pad: negative padding on dim %d", i);
            if (DIM_IS_SYM(n) && (lo || hi))
                return kn_errs(ctx, KN_EUNSUPPORTED, "pad: padding symbolic dim %d is not supported yet", i);
            if (lo > INT64_MAX - n || hi > INT64_MAX - n - lo)
                return kn_errs(ctx, KN_ENOMEM, "pad: dim %d of size %lld padded by (%lld, %lld) overflows", i,
                               (long long)n, (long long)lo, (long long)hi);
            osh[i] = n + lo + hi;
        }
        *ondim = (uint8_t)nd;
        return KN_OK;
    }
}

static kn_status rule_index(kn_ctx *ctx, Op op, const Sig *s, const Params *p, uint8_t *ondim, Dim *osh)
{
    const char *name = kn_opinfo[op].name;
    int nd = s[0].ndim, d = (int)p->i[0];
    if (s[1].dt != KN_I64 && s[1].dt != KN_I32)
        return kn_errs(ctx, KN_EDTYPE, "%s: index must be i64 or i32, got %s", name, kn_dtype_name(s[1].dt));
    if (s[1].ndim != nd)
        return kn_errs(ctx, KN_ESHAPE, "%s: index has %d dims, input has %d", name, s[1].ndim, nd);
    if (d < 0 || d >= (nd ? nd : 1)) return kn_errs(ctx, KN_EINVAL, "%s: dim %d out of range", name, d);
    if (op == OP_SCATTER_ADD) {
        if (s[2].dt != s[0].dt || s[2].ndim != nd)
            return kn_errs(ctx, KN_ESHAPE, "%s: src must match input in dtype and dims", name);
        for (int i = 0; i < nd; i++)
            if (s[1].shape[i] > s[2].shape[i] || (i != d && s[1].shape[i] > s[0].shape[i]))
                return kn_errs(ctx, KN_ESHAPE, "%s: index dim %d (%lld) exceeds src or input", name, i,
                               (long long)s[1].shape[i]);
        memcpy(osh, s[0].shape, nd * sizeof(Dim));
    } else {
        for (int i = 0; i < nd; i++)
            if (i != d && s[1].shape[i] > s[0].shape[i])
                return kn_errs(ctx, KN_ESHAPE, "%s: index dim %d has size %lld, input only %lld", name, i,
                               (long long)s[1].shape[i], (long long)s[0].shape[i]);
        memcpy(osh, s[1].shape, nd * sizeof(Dim));
    }
    *ondim = (uint8_t)nd;
    return KN_OK;
}

static kn_status rule_dot(kn_ctx *ctx, const Sig *a, const Sig *b, uint8_t *ondim, Dim *osh)
{
    int nd = a->ndim;
    if (nd < 2 || b->ndim != nd)
        return kn_errs(ctx, KN_ESHAPE, "dot: operands need equal ranks >= 2, got %d and %d", nd, b->ndim);
    if (a->dt != b->dt)
        return kn_errs(ctx, KN_EDTYPE, "dot: dtypes differ (%s vs %s)", kn_dtype_name(a->dt), kn_dtype_name(b->dt));
    if (a->dt == KN_BOOL) return kn_errs(ctx, KN_EDTYPE, "dot: bool operands are not supported");
    for (int i = 0; i < nd - 2; i++)
        if (a->shape[i] != b->shape[i])
            return kn_errs(ctx, KN_ESHAPE, "dot: batch dim %d differs (%lld vs %lld)", i, (long long)a->shape[i],
                           (long long)b->shape[i]);
    if (a->shape[nd - 1] != b->shape[nd - 2])
        return kn_errs(ctx, KN_ESHAPE, "dot: contraction sizes differ (%lld vs %lld)", (long long)a->shape[nd - 1],
                       (long long)b->shape[nd - 2]);
    memcpy(osh, a->shape, nd * sizeof(Dim));
    osh[nd - 1] = b->shape[nd - 1];
    *ondim = (uint8_t)nd;
    return KN_OK;
}

kn_status prim_shape(kn_ctx *ctx, Op op, int nsrc, const uint8_t *dts, const uint8_t *ndims,
                     const Dim *const *shapes, const Params *p, uint8_t *odt, uint8_t *ondim, Dim *oshape)
{
    Sig s[3];
    for (int i = 0; i < nsrc; i++) s[i] = (Sig){dts[i], ndims[i], shapes[i]};
    if (nsrc) {
        *odt = s[0].dt;
        *ondim = s[0].ndim;
        memcpy(oshape, s[0].shape, s[0].ndim * sizeof(Dim));
    }
    switch (kn_opinfo[op].cls) {
    case OC_LEAF:
    case OC_CREATE:
        if (p->n > KN_MAX_DIMS || p->dtype >= KN_NDTYPES) return kn_errs(ctx, KN_EINVAL, "bad create parameters");
        *odt = p->dtype;
        *ondim = p->n;
        for (int i = 0; i < p->n; i++) oshape[i] = p->i[i];
        if (op == OP_IOTA && (p->axis < 0 || p->axis >= (p->n ? p->n : 1)))
            return kn_errs(ctx, KN_EINVAL, "iota: axis %d out of range", (int)p->axis);
        for (int i = 0; i < nsrc; i++) /* rand's key and counter */
            if (s[i].dt != KN_I64 || s[i].ndim != 0)
                return kn_errs(ctx, KN_EINVAL, "rand: source %d must be a 0-d i64 (the generator's %s)", i,
                               i ? "counter" : "key");
        if (op == OP_RAND && !dt_is_float((kn_dtype)p->dtype))
            return kn_errs(ctx, KN_EDTYPE, "rand: needs a float dtype, got %s", kn_dtype_name((kn_dtype)p->dtype));
        return KN_OK;
    case OC_UNARY:
    case OC_BINARY:
    case OC_COMPARE:
    case OC_WHERE: return rule_elementwise(ctx, op, s, odt);
    case OC_CAST:
        if (p->dtype >= KN_NDTYPES) return kn_errs(ctx, KN_EDTYPE, "cast: bad dtype code %d", p->dtype);
        *odt = p->dtype;
        return KN_OK;
    case OC_REDUCE:
        if (p->n != s[0].ndim) return kn_errs(ctx, KN_EINVAL, "reduce: axis mask has %d entries for %d dims", p->n, s[0].ndim);
        for (int i = 0; i < s[0].ndim; i++)
            if (p->i[i]) oshape[i] = 1;
        if (s[0].dt == KN_BOOL) return kn_errs(ctx, KN_EDTYPE, "%s: bool input", kn_opinfo[op].name);
        return KN_OK;
    case OC_MOVE: return rule_move(ctx, op, &s[0], p, ondim, oshape);
    case OC_INDEX: return rule_index(ctx, op, s, p, ondim, oshape);
    case OC_DOT: return rule_dot(ctx, &s[0], &s[1], ondim, oshape);
    }
    return KN_OK;
}

/* ---- tracing ---- */

/* A concrete tensor met while tracing enters the graph as an input leaf. */
static uint32_t trace_node_of(kn_ctx *ctx, kn_tensor *t)
{
    if (t->node && t->trace_serial == ctx->trace->serial) return t->node;
    if (!t->st) {
        kn_err(ctx, KN_EINVAL, "a tensor from an earlier trace was used in this one");
        return 0;
    }
    Node n;
    memset(&n, 0, sizeof n);
    n.op = OP_INPUT;
    n.dtype = t->dtype;
    n.ndim = t->ndim;
    memcpy(n.shape, t->shape, t->ndim * sizeof(Dim));
    Graph *g = ctx->trace;
    t->node = graph_input(g, &n);
    t->trace_serial = g->serial;
    if (t->node) g->input_vals[n.p.i[0]] = t;
    return t->node;
}

static kn_tensor *trace(kn_ctx *ctx, Op op, kn_tensor *const *src, const Params *p, uint8_t odt,
                        uint8_t ondim, const Dim *osh)
{
    Node n;
    memset(&n, 0, sizeof n);
    n.op = (uint16_t)op;
    n.dtype = odt;
    n.ndim = ondim;
    n.nsrc = (uint8_t)kn_opinfo[op].nsrc;
    memcpy(n.shape, osh, ondim * sizeof(Dim));
    for (int i = 0; i < n.nsrc; i++)
        if (!(n.src[i] = trace_node_of(ctx, src[i])))
            return ctx->status ? NULL : kn_err(ctx, KN_ENOMEM, "out of memory tracing");
    memcpy(&n.p, p, sizeof n.p); /* padding too: nodes are compared bytewise */
    uint32_t id = graph_add(ctx->trace, &n);
    if (!id) return kn_err(ctx, KN_ENOMEM, "out of memory tracing");
    kn_tensor *t = tensor_symbolic(ctx, (kn_dtype)odt, ondim, osh, id);
    if (t) t->trace_serial = ctx->trace->serial;
    return t;
}

/* ---- eager views ---- */

/* Strides that let x be viewed with a new shape without copying, as
 * PyTorch's view does. Walk x's dims from the last, cutting them into runs
 * that are contiguous among themselves; each run must be covered exactly by
 * a run of new dims, which get strides based on the run's innermost stride.
 * Returns 0 if some run cannot be covered. */
static int view_strides(const kn_tensor *x, int nd, const int64_t *shape, int64_t *stride)
{
    if (tensor_numel(x->ndim, x->shape) == 0 || x->ndim == 0) {
        tensor_contig_strides(nd, shape, stride);
        return 1;
    }
    int vd = nd - 1;
    int64_t base = x->stride[x->ndim - 1], run = 1, vrun = 1;
    for (int td = x->ndim - 1; td >= 0; td--) {
        run *= x->shape[td];
        int cut = td == 0 || (x->shape[td - 1] != 1 && x->stride[td - 1] != run * base);
        if (!cut) continue;
        while (vd >= 0 && (vrun < run || shape[vd] == 1)) {
            stride[vd] = vrun * base;
            vrun *= shape[vd];
            vd--;
        }
        if (vrun != run) return 0;
        if (td > 0) {
            base = x->stride[td - 1];
            run = vrun = 1;
        }
    }
    return vd == -1;
}

/* The strides and offset of movement op's result as a view of x (x's own
 * layout: a concrete tensor's, or the one a traced tensor tracks); 0 when
 * a reshape cannot view x and eager copies. */
static int view_layout(Op op, const kn_tensor *x, const Params *p, int nd, const int64_t *shape, int64_t *st,
                       int64_t *off)
{
    *off = x->offset;
    switch (op) {
    case OP_RESHAPE: return view_strides(x, nd, shape, st);
    case OP_PERMUTE:
        for (int i = 0; i < nd; i++) st[i] = x->stride[p->i[i]];
        return 1;
    case OP_EXPAND:
        for (int i = 0; i < nd; i++) st[i] = x->shape[i] == shape[i] ? x->stride[i] : 0;
        return 1;
    default: /* OP_SLICE */
        memcpy(st, x->stride, KN_MAX_DIMS * sizeof *st);
        *off += p->i[1] * x->stride[p->i[0]];
        st[p->i[0]] *= p->i[3];
        return 1;
    }
}

/* A view for a movement op; *copy is set instead when reshape needs one. */
static kn_tensor *eager_view(kn_ctx *ctx, Op op, kn_tensor *x, const Params *p, int nd, const int64_t *shape,
                             int *copy)
{
    int64_t st[KN_MAX_DIMS], off;
    if (!view_layout(op, x, p, nd, shape, st, &off)) {
        *copy = 1;
        return NULL;
    }
    return tensor_view(ctx, x, nd, shape, st, off);
}

static int has_sym(int nd, const Dim *shape)
{
    for (int i = 0; i < nd; i++)
        if (DIM_IS_SYM(shape[i])) return 1;
    return 0;
}

/* While tracing, the result t of a movement op of x takes the layout that
 * eager's would have: x's view (strides, offset, and under kn_call the root
 * whose storage it shares: the tracer's root hook), or, where eager's reshape copies,
 * a fresh contiguous tensor as tensor_symbolic made it. So kn_view refuses
 * what eager refuses, and kn_compile hands out a view where eager does. */
static void trace_layout(kn_ctx *ctx, Op op, kn_tensor *x, const Params *p, kn_tensor *t)
{
    int64_t st[KN_MAX_DIMS], off;
    if (has_sym(x->ndim, x->shape) || has_sym(t->ndim, t->shape) || !view_layout(op, x, p, t->ndim, t->shape, st, &off))
        return;
    memcpy(t->stride, st, sizeof t->stride);
    t->offset = off;
    t->view_root = x->st ? (ctx->capture ? ctx->capture->root(ctx, x) : 0) : x->view_root;
}

int prim_view_strides(const kn_tensor *x, int nd, const int64_t *shape, int64_t *stride)
{
    return view_strides(x, nd, shape, stride);
}

int prim_can_view(const kn_tensor *x, int nd, const int64_t *shape)
{
    int64_t st[KN_MAX_DIMS];
    return view_strides(x, nd, shape, st);
}

/* Every tensor, views included, has a byte size that fits: element counts
 * and offsets are then safe int64 arithmetic everywhere. Symbolic dims are
 * checked when they are bound. */
static int shape_fits(kn_ctx *ctx, kn_dtype dt, int nd, const Dim *shape)
{
    size_t bytes;
    for (int i = 0; i < nd; i++)
        if (DIM_IS_SYM(shape[i])) return 1;
    return tensor_check_size(ctx, dt, nd, shape, &bytes);
}

/* Records the op while tracing; otherwise a view, or a fresh tensor that
 * the context's eager kernels (eager.c) or the interpreter fill. */
static kn_tensor *run(kn_ctx *ctx, Op op, kn_tensor *const *src, const Params *p, uint8_t odt, uint8_t ond,
                      const Dim *osh)
{
    int traced = 0;
    for (int i = 0; i < kn_opinfo[op].nsrc; i++) traced |= src[i]->st == NULL;
    if (ctx->trace || traced) {
        if (!ctx->trace) return kn_err(ctx, KN_EINVAL, "a traced tensor was used outside its trace");
        kn_tensor *t = trace(ctx, op, src, p, odt, ond, osh);
        if (t && kn_opinfo[op].cls == OC_MOVE && op != OP_PAD) trace_layout(ctx, op, src[0], p, t);
        return t;
    }
    if (kn_opinfo[op].cls == OC_MOVE && op != OP_PAD) {
        int copy = 0;
        kn_tensor *v = eager_view(ctx, op, src[0], p, ond, osh, &copy);
        if (!copy) return v;
    }
    kn_tensor *out = NULL;
    if (ctx->eager_backend != KN_BACKEND_INTERP && ctx->eager_hooks &&
        ctx->eager_hooks->run(ctx, op, src, p, odt, ond, osh, &out))
        return out;
    out = tensor_new(ctx, (kn_dtype)odt, ond, osh);
    if (!out) return NULL;
    if (interp_run(ctx, op, out, src, p) != KN_OK) {
        kn_free(ctx, out);
        return NULL;
    }
    return out;
}

kn_tensor *prim(kn_ctx *ctx, Op op, kn_tensor *const *src, const Params *p)
{
    static const char *names[3] = {"a", "b", "c"};
    int n = kn_opinfo[op].nsrc;
    uint8_t dts[3] = {0}, nds[3] = {0}, odt = 0, ond = 0;
    const Dim *shs[3] = {NULL, NULL, NULL};
    Dim osh[KN_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        if (!src[i]) return kn_err_null(ctx, names[i]);
        dts[i] = src[i]->dtype;
        nds[i] = src[i]->ndim;
        shs[i] = src[i]->shape;
    }
    if (prim_shape(ctx, op, n, dts, nds, shs, p, &odt, &ond, osh)) return NULL;
    if (!shape_fits(ctx, (kn_dtype)odt, ond, osh)) return NULL;
    Params made;
    if (kn_opinfo[op].cls == OC_INDEX && !p->origin) { /* the public op running, for an index out of range */
        made = *p;
        made.origin = (uint8_t)composite_find(ctx->op);
        p = &made;
    }
    kn_tensor *out = run(ctx, op, src, p, odt, ond, osh);
    if (out && autodiff_wants(ctx, n, src) && autodiff_record(ctx, op, src, p, out) != KN_OK) {
        kn_free(ctx, out);
        return NULL;
    }
    return out;
}

/* ---- constructors for composites ---- */

kn_tensor *prim1(kn_ctx *ctx, Op op, kn_tensor *a)
{
    Params p;
    memset(&p, 0, sizeof p);
    return prim(ctx, op, &a, &p);
}

kn_tensor *prim2(kn_ctx *ctx, Op op, kn_tensor *a, kn_tensor *b)
{
    Params p;
    memset(&p, 0, sizeof p);
    kn_tensor *s[2] = {a, b};
    return prim(ctx, op, s, &p);
}

static Params shape_params(int ndim, const int64_t *shape)
{
    Params p;
    memset(&p, 0, sizeof p);
    p.n = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) p.i[i] = shape[i];
    return p;
}

kn_tensor *p_reshape(kn_ctx *ctx, kn_tensor *x, int ndim, const int64_t *shape)
{
    if (x && x->ndim == ndim && (ndim == 0 || memcmp(x->shape, shape, ndim * sizeof *shape) == 0)) return x;
    Params p = shape_params(ndim, shape);
    return prim(ctx, OP_RESHAPE, &x, &p);
}

kn_tensor *p_permute(kn_ctx *ctx, kn_tensor *x, const int *perm)
{
    if (!x) return kn_err_null(ctx, "x");
    Params p;
    memset(&p, 0, sizeof p);
    p.n = x->ndim;
    int ident = 1;
    for (int i = 0; i < x->ndim; i++) {
        p.i[i] = perm[i];
        ident &= perm[i] == i;
    }
    return ident ? x : prim(ctx, OP_PERMUTE, &x, &p);
}

kn_tensor *p_expand(kn_ctx *ctx, kn_tensor *x, int ndim, const int64_t *shape)
{
    if (x && x->ndim == ndim && (ndim == 0 || memcmp(x->shape, shape, ndim * sizeof *shape) == 0)) return x;
    Params p = shape_params(ndim, shape);
    return prim(ctx, OP_EXPAND, &x, &p);
}

kn_tensor *p_slice(kn_ctx *ctx, kn_tensor *x, int dim, int64_t start, int64_t count, int64_t step)
{
    if (x && dim >= 0 && dim < x->ndim && start == 0 && step == 1 && count == x->shape[dim]) return x;
    Params p;
    memset(&p, 0, sizeof p);
    p.i[0] = dim, p.i[1] = start, p.i[2] = count, p.i[3] = step, p.n = 4;
    return prim(ctx, OP_SLICE, &x, &p);
}

kn_tensor *p_pad(kn_ctx *ctx, kn_tensor *x, const int64_t *before, const int64_t *after, double value)
{
    if (!x) return kn_err_null(ctx, "x");
    Params p;
    memset(&p, 0, sizeof p);
    int any = 0;
    for (int i = 0; i < x->ndim; i++) {
        p.i[2 * i] = before ? before[i] : 0;
        p.i[2 * i + 1] = after ? after[i] : 0;
        any |= p.i[2 * i] != 0 || p.i[2 * i + 1] != 0;
    }
    p.n = (uint8_t)(2 * x->ndim);
    p.f = value;
    return any ? prim(ctx, OP_PAD, &x, &p) : x;
}

kn_tensor *p_reduce(kn_ctx *ctx, Op op, kn_tensor *x, const int *dims, int ndims)
{
    if (!x) return kn_err_null(ctx, "x");
    Params p;
    memset(&p, 0, sizeof p);
    p.n = x->ndim;
    for (int i = 0; i < ndims; i++) p.i[dims[i]] = 1;
    return prim(ctx, op, &x, &p);
}

kn_tensor *p_cast(kn_ctx *ctx, kn_tensor *x, kn_dtype dt)
{
    if (x && x->dtype == dt) return x;
    Params p;
    memset(&p, 0, sizeof p);
    p.dtype = (uint8_t)dt;
    return prim(ctx, OP_CAST, &x, &p);
}

kn_tensor *p_full(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, double v)
{
    Params p = shape_params(ndim, shape);
    p.dtype = (uint8_t)dt;
    p.f = v;
    return prim(ctx, OP_FULL, NULL, &p);
}

kn_tensor *p_iota(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, int axis)
{
    Params p = shape_params(ndim, shape);
    p.dtype = (uint8_t)dt;
    p.axis = axis;
    return prim(ctx, OP_IOTA, NULL, &p);
}

/* rand reads the generator's state as its sources (ctx->rng_t) and the
 * counter then advances by the draw's numel, so each draw is fresh and the
 * advance is affine in the sizes (a draw of s0 elements stays generic in
 * s0: capture.c). Eagerly the counter is bumped in place. While tracing,
 * the advance is a traced write of the counter: under kn_call a write the
 * program replays after every run (the tracer's write hook, as an optimizer's
 * state), so compiled draws read and advance the state exactly as eager
 * ones; in a bare trace it only makes the trace's later draws read it. */
kn_tensor *p_rand(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape)
{
    for (int d = 0; d < ndim; d++)
        if (DIM_IS_SYM(shape[d]))
            return kn_err(ctx, KN_EUNSUPPORTED, "rand: dim %d is symbolic: a draw needs sizes", d);
    Params p = shape_params(ndim, shape);
    p.dtype = (uint8_t)dt;
    kn_tensor *const *rng = ctx_rng(ctx);
    if (!rng) return NULL;
    kn_tensor *ctr = rng[1], *t = prim(ctx, OP_RAND, rng, &p), *next;
    int64_t n = t ? tensor_numel(ndim, shape) : 0;
    if (!n) return t;
    if (!ctx->trace) {
        ctx->rng[1] += (uint64_t)n;
        storage_stamp(ctx, ctr->st);
        return t;
    }
    if (!(next = prim2(ctx, OP_ADD, ctr, p_full(ctx, KN_I64, 0, NULL, (double)n)))) return NULL;
    if (ctx->capture) return ctx->capture->write(ctx, ctr, next) ? NULL : t;
    ctr->node = next->node;
    ctr->trace_serial = next->trace_serial;
    return t;
}

kn_tensor *p_gather(kn_ctx *ctx, kn_tensor *x, int dim, kn_tensor *idx) { return p_gather_for(ctx, x, dim, idx, IX_INDEX); }

kn_tensor *p_gather_for(kn_ctx *ctx, kn_tensor *x, int dim, kn_tensor *idx, IndexUse use)
{
    Params p;
    memset(&p, 0, sizeof p);
    p.i[0] = dim, p.n = 1;
    p.ix = (uint8_t)use;
    kn_tensor *s[2] = {x, idx};
    return prim(ctx, OP_GATHER, s, &p);
}

kn_tensor *p_scatter_add(kn_ctx *ctx, kn_tensor *x, int dim, kn_tensor *idx, kn_tensor *src)
{
    Params p;
    memset(&p, 0, sizeof p);
    p.i[0] = dim, p.n = 1;
    kn_tensor *s[3] = {x, idx, src};
    return prim(ctx, OP_SCATTER_ADD, s, &p);
}

kn_tensor *p_where(kn_ctx *ctx, kn_tensor *c, kn_tensor *a, kn_tensor *b)
{
    Params p;
    memset(&p, 0, sizeof p);
    kn_tensor *s[3] = {c, a, b};
    return prim(ctx, OP_WHERE, s, &p);
}

kn_tensor *p_dot(kn_ctx *ctx, kn_tensor *a, kn_tensor *b) { return prim2(ctx, OP_DOT, a, b); }
