/*
 * autodiff.c — reverse mode on primitives: the tape, one VJP rule per
 * differentiable primitive, custom rules for composites, and backward.
 *
 * Every prim() whose sources need grad appends an entry to the context's
 * tape: the op, its parameters, and tape-owned handles of its sources and
 * result (sharing their storage, so a scope end cannot free what backward
 * needs). Entries are appended in execution order, which is a topological
 * order, so backward is one reverse walk over the tape.
 *
 * The VJP rules are written with prim(). Run eagerly they compute gradients;
 * run while tracing (ctx->trace) they append the backward to the graph being
 * recorded, which is how the joint forward/backward graph is built, as
 * AOTAutograd does. Composites with a hand-written backward compute their
 * forward with grad off and record one custom entry.
 *
 * Requires: prim() calling autodiff_record. Produces: gradients (eager: in
 * each leaf's .grad; traced: symbolic tensors through autodiff_grads).
 */
#include <math.h>
#include <string.h>

#include "core.h"

typedef struct {
    uint16_t op;
    uint8_t custom, region;
    int nsrc;
    Params p;
    kn_tensor **src;      /* tape-owned handles of the sources */
    uint32_t *src_seq;    /* 1 + index of the entry that made source i; 0 if none */
    kn_tensor **leaf;     /* the user's leaf behind source i when it requires grad */
    kn_tensor *src3[3], *leaf3[3]; /* their storage for up to 3 sources */
    uint32_t seq3[3];
    kn_tensor *out;       /* tape-owned handle of the result */
    CustomVjp fn;         /* custom entries: the backward and what it saved */
    kn_tensor *saved[4];
    int nsaved;
    int64_t args[6];
    RegionVjp rfn;        /* region entries (a compiled function): every grad at once */
    void (*rfree)(kn_ctx *ctx, void *user);
    void *ruser;
    kn_tensor **rg;       /* a region of several outputs: the cotangent of each (nout entries) */
    int nout;
    uint32_t rseq;        /* an output of such a region (region 2): 1 + the index of its entry; */
    int rk;               /* and which output it is */
    kn_tensor *g;         /* the cotangent accumulated during backward */
} Entry;

struct Tape {
    Arena arena;
    Entry **e;
    uint32_t n, cap;
};

/* ---- recording ---- */

static int needs_grad(const kn_tensor *t) { return t && (t->flags & TF_REQGRAD); }

int autodiff_wants(const kn_ctx *ctx, int n, kn_tensor *const *src)
{
    if (!ctx->grad_enabled) return 0;
    for (int i = 0; i < n; i++)
        if (needs_grad(src[i])) return 1;
    return 0;
}

static Entry *new_entry(kn_ctx *ctx)
{
    if (!ctx->tape) {
        Arena a;
        arena_init(&a, ctx);
        struct Tape *t = arena_alloc(&a, sizeof *t);
        if (!t) return kn_err(ctx, KN_ENOMEM, "out of memory for the autodiff tape");
        t->arena = a;
        ctx->tape = t;
    }
    struct Tape *t = ctx->tape;
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? 2 * t->cap : 64;
        Entry **e = arena_grow(&t->arena, t->e, t->cap * sizeof *e, cap * sizeof *e);
        if (!e) return kn_err(ctx, KN_ENOMEM, "out of memory for the autodiff tape");
        t->e = e;
        t->cap = cap;
    }
    Entry *e = arena_alloc(&t->arena, sizeof *e);
    if (!e) return kn_err(ctx, KN_ENOMEM, "out of memory for the autodiff tape");
    e->src = e->src3;
    e->src_seq = e->seq3;
    e->leaf = e->leaf3;
    t->e[t->n++] = e;
    return e;
}

static void free_entry(kn_ctx *ctx, Entry *e)
{
    for (int i = 0; i < e->nsrc; i++) tensor_unhold(ctx, e->src[i]);
    for (int i = 0; i < e->nsaved; i++) tensor_unhold(ctx, e->saved[i]);
    tensor_unhold(ctx, e->out);
    if (e->rfree) e->rfree(ctx, e->ruser);
    e->rfree = NULL;
}

/* Fills the sources of e and marks out as produced by it. */
static kn_status link_entry(kn_ctx *ctx, Entry *e, int n, kn_tensor *const *src, kn_tensor *out)
{
    e->nsrc = n;
    for (int i = 0; i < n; i++) {
        kn_tensor *s = src[i];
        if (!(e->src[i] = tensor_hold(ctx, s))) return ctx->status;
        if (!needs_grad(s)) continue;
        if (s->tape_seq && s->tape_epoch == ctx->tape_epoch) e->src_seq[i] = s->tape_seq;
        else if (!s->tape_seq) e->leaf[i] = s;
        /* else: made by a tape already released; backward reports it */
    }
    if (!(e->out = tensor_hold(ctx, out))) return ctx->status;
    out->flags |= TF_REQGRAD;
    out->tape_seq = ctx->tape->n;
    out->tape_epoch = ctx->tape_epoch;
    return KN_OK;
}

/* Comparisons and creation have no gradient; integer results neither. */
static int differentiable(Op op, const kn_tensor *out)
{
    OpClass c = kn_opinfo[op].cls;
    return c != OC_COMPARE && c != OC_CREATE && c != OC_LEAF && dt_is_float((kn_dtype)out->dtype);
}

kn_status autodiff_record(kn_ctx *ctx, Op op, kn_tensor *const *src, const Params *p, kn_tensor *out)
{
    if (!differentiable(op, out)) return KN_OK;
    Entry *e = new_entry(ctx);
    if (!e) return ctx->status;
    e->op = (uint16_t)op;
    memcpy(&e->p, p, sizeof e->p);
    return link_entry(ctx, e, kn_opinfo[op].nsrc, src, out);
}

int autodiff_custom_wanted(kn_ctx *ctx, kn_tensor *x)
{
    return x && !ctx->no_custom_vjp && autodiff_wants(ctx, 1, &x);
}

kn_tensor *autodiff_custom(kn_ctx *ctx, kn_tensor *out, int nin, kn_tensor *const *in, int nsaved,
                           kn_tensor *const *saved, const int64_t *args, int nargs, CustomVjp fn)
{
    if (!out || !autodiff_wants(ctx, nin, in)) return out;
    KN_ASSERT(nin <= 3 && nsaved <= 4 && nargs <= 6);
    for (int i = 0; i < nsaved; i++)
        if (!saved[i]) return NULL; /* a failed forward piece: its error is set */
    Entry *e = new_entry(ctx);
    if (!e) return NULL;
    e->custom = 1;
    e->fn = fn;
    for (int i = 0; i < nargs; i++) e->args[i] = args[i];
    for (int i = 0; i < nsaved; i++, e->nsaved++)
        if (!(e->saved[i] = tensor_hold(ctx, saved[i]))) return NULL;
    return link_entry(ctx, e, nin, in, out) == KN_OK ? out : NULL;
}

/* A region of several outputs is one entry that holds the sources and
 * computes every gradient, followed by one entry per output (region 2) that
 * has no sources and hands the output's cotangent over to it: backward
 * visits the latter first, since they are newer. */
kn_status autodiff_region(kn_ctx *ctx, int nout, kn_tensor *const *out, int nin, kn_tensor *const *in, RegionVjp fn,
                          void (*release)(kn_ctx *ctx, void *user), void *user)
{
    if (nout < 1 || !autodiff_wants(ctx, nin, in)) {
        if (release) release(ctx, user);
        return ctx->status;
    }
    Entry *e = new_entry(ctx);
    if (!e) {
        if (release) release(ctx, user);
        return ctx->status;
    }
    e->region = 1;
    e->rfn = fn;
    e->rfree = release;
    e->ruser = user;
    e->nout = nout;
    uint32_t seq = ctx->tape->n;
    Arena *a = &ctx->tape->arena;
    if (nin > 3) {
        e->src = arena_alloc(a, (size_t)nin * sizeof *e->src);
        e->leaf = arena_alloc(a, (size_t)nin * sizeof *e->leaf);
        e->src_seq = arena_alloc(a, (size_t)nin * sizeof *e->src_seq);
        if (!e->src || !e->leaf || !e->src_seq) {
            e->src = e->src3, e->leaf = e->leaf3, e->src_seq = e->seq3;
            return kn_errs(ctx, KN_ENOMEM, "out of memory for the autodiff tape");
        }
    }
    if (!(e->rg = arena_alloc(a, (size_t)nout * sizeof *e->rg)))
        return kn_errs(ctx, KN_ENOMEM, "out of memory for the autodiff tape");
    if (nout == 1) return link_entry(ctx, e, nin, in, out[0]);
    kn_status s = link_entry(ctx, e, nin, in, out[0]);
    for (int k = 0; k < nout && !s; k++) {
        Entry *o = new_entry(ctx);
        if (!o) return ctx->status;
        o->region = 2;
        o->rseq = seq;
        o->rk = k;
        s = link_entry(ctx, o, 0, NULL, out[k]);
    }
    return s;
}

/* ---- VJP rules: the cotangent of source i from g, the cotangent of out ---- */

static kn_tensor *zeros_like(kn_ctx *ctx, const kn_tensor *x)
{
    return p_full(ctx, (kn_dtype)x->dtype, x->ndim, x->shape, 0.0);
}

static kn_tensor *mulc(kn_ctx *ctx, kn_tensor *x, double v) { return binc(ctx, OP_MUL, x, v); }

/* the last two dims swapped: (..., M, K) -> (..., K, M) */
static kn_tensor *swap_last(kn_ctx *ctx, kn_tensor *x)
{
    int perm[KN_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) perm[d] = d;
    perm[x->ndim - 2] = x->ndim - 1;
    perm[x->ndim - 1] = x->ndim - 2;
    return p_permute(ctx, x, perm);
}

/* Whether x is another tensor with its last two dims swapped, as x W^T reads a linear layer's weight: a
 * permute node while tracing, a view of swapped strides in eager mode. */
static int transposed_last(const kn_ctx *ctx, const kn_tensor *x)
{
    int nd = x->ndim;
    if (nd < 2) return 0;
    if (!x->st) { /* traced */
        if (!ctx->trace || !x->node || x->trace_serial != ctx->trace->serial) return 0;
        const Node *n = &ctx->trace->nodes[x->node];
        int swap = n->op == OP_PERMUTE && n->p.i[nd - 2] == nd - 1 && n->p.i[nd - 1] == nd - 2;
        for (int d = 0; d < nd - 2 && swap; d++) swap = n->p.i[d] == d;
        return swap;
    }
    return x->shape[nd - 2] > 1 && x->shape[nd - 1] > 1 && x->stride[nd - 2] == 1 &&
           x->stride[nd - 1] == x->shape[nd - 2];
}

/* dot's cotangent of its second operand y: x^T g, or, where y is W with its last two dims swapped (a
 * linear layer's weight), (g^T x)^T: the product is then made in W's own layout, and W's gradient is
 * that buffer as it is, not a transposed copy of it (the mlp's weight gradients, each read again by
 * Adam's update) */
static kn_tensor *vjp_dot_b(kn_ctx *ctx, kn_tensor *x, kn_tensor *y, kn_tensor *g)
{
    if (transposed_last(ctx, y)) return swap_last(ctx, p_dot(ctx, swap_last(ctx, g), x));
    return p_dot(ctx, swap_last(ctx, x), g);
}

/* max/min as torch.maximum/minimum: the winner takes g, a tie splits it, and where either side is NaN
 * both take g (the loser, strictly less for max, gets 0; an unordered pair has none) */
static kn_tensor *vjp_extreme(kn_ctx *ctx, Op op, kn_tensor *x, kn_tensor *y, kn_tensor *g, int i)
{
    kn_tensor *me = i == 0 ? x : y, *other = i == 0 ? y : x;
    kn_tensor *loses = op == OP_MAX ? prim2(ctx, OP_CMPLT, me, other) : prim2(ctx, OP_CMPLT, other, me);
    kn_tensor *tie = prim2(ctx, OP_CMPEQ, me, other);
    kn_tensor *zero = zeros_like(ctx, g);
    /* g once, not in both branches: in a chain of maxima each step's g is
     * the next one's, and a fused kernel renders it at each use */
    kn_tensor *half = p_full(ctx, (kn_dtype)g->dtype, g->ndim, g->shape, 0.5);
    kn_tensor *share = p_where(ctx, tie, half, p_full(ctx, (kn_dtype)g->dtype, g->ndim, g->shape, 1.0));
    return p_where(ctx, loses, zero, prim2(ctx, OP_MUL, g, share));
}

/* pow, as torch: d/dx = y x^(y-1) (0 where y == 0); d/dy = out log x (0 where x == 0 and y >= 0) */
static kn_tensor *vjp_pow(kn_ctx *ctx, kn_tensor *x, kn_tensor *y, kn_tensor *out, kn_tensor *g, int i)
{
    kn_tensor *zero = zeros_like(ctx, g);
    if (i == 0) {
        kn_tensor *d = prim2(ctx, OP_MUL, y, prim2(ctx, OP_POW, x, binc(ctx, OP_SUB, y, 1.0)));
        return p_where(ctx, binc(ctx, OP_CMPEQ, y, 0.0), zero, prim2(ctx, OP_MUL, g, d));
    }
    kn_tensor *x0 = binc(ctx, OP_CMPEQ, x, 0.0);
    kn_tensor *yneg = bin(ctx, OP_CMPLT, y, c_scalar(ctx, (kn_dtype)y->dtype, 0.0), (kn_dtype)y->dtype);
    kn_tensor *skip = prim2(ctx, OP_MIN, x0, binc(ctx, OP_CMPEQ, yneg, 0.0)); /* x == 0 and y >= 0 */
    return p_where(ctx, skip, zero, prim2(ctx, OP_MUL, g, prim2(ctx, OP_MUL, out, prim1(ctx, OP_LOG, x))));
}

/* reduce_max: g shared evenly among the elements equal to the max */
static kn_tensor *vjp_rmax(kn_ctx *ctx, Entry *e, kn_tensor *x, kn_tensor *g)
{
    kn_tensor *hit = p_cast(ctx, prim2(ctx, OP_CMPEQ, x, p_expand(ctx, e->out, x->ndim, x->shape)),
                            (kn_dtype)x->dtype);
    kn_tensor *count = prim(ctx, OP_SUM, &hit, &e->p);
    kn_tensor *share = prim2(ctx, OP_DIV, g, count);
    return prim2(ctx, OP_MUL, hit, p_expand(ctx, share, x->ndim, x->shape));
}

/* expand: sum over the dims that were broadcast, keeping them */
static kn_tensor *vjp_expand(kn_ctx *ctx, kn_tensor *x, kn_tensor *g)
{
    int dims[KN_MAX_DIMS], n = 0;
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != g->shape[d]) dims[n++] = d;
    return n ? p_reduce(ctx, OP_SUM, g, dims, n) : g;
}

/* slice: g back at positions start + k * step along the dim, zeros between
 * and around, made of views and pads (which fuse) rather than a scatter_add
 * (which runs on the interpreter): a negative step is the positive one from
 * the last element, over g reversed; a step s > 1 interleaves s - 1 zeros
 * after each element, as a pad of a new unit dim after the sliced one. */
static kn_tensor *vjp_slice(kn_ctx *ctx, const Params *p, kn_tensor *x, kn_tensor *g)
{
    int dim = (int)p->i[0];
    int64_t start = p->i[1], n = p->i[2], step = p->i[3], size = x->shape[dim];
    if (DIM_IS_SYM(size) || n == 0 || (g->ndim == KN_MAX_DIMS && (step > 1 || step < -1))) {
        kn_tensor *k = p_iota(ctx, KN_I64, g->ndim, g->shape, dim);
        kn_tensor *idx = binc(ctx, OP_ADD, mulc(ctx, k, (double)step), (double)start);
        return p_scatter_add(ctx, zeros_like(ctx, x), dim, idx, g);
    }
    if (step < 0) { /* the same elements, first to last */
        start += (n - 1) * step, step = -step;
        g = p_slice(ctx, g, dim, n - 1, n, -1);
    }
    if (step > 1 && g) {
        int64_t sh[KN_MAX_DIMS + 1], hi[KN_MAX_DIMS + 1] = {0};
        for (int d = 0, j = 0; d < g->ndim; d++) {
            sh[j++] = g->shape[d];
            if (d == dim) sh[j++] = 1;
        }
        hi[dim + 1] = step - 1;
        kn_tensor *spread = p_pad(ctx, p_reshape(ctx, g, g->ndim + 1, sh), NULL, hi, 0.0); /* (.., n, step, ..) */
        int64_t flat[KN_MAX_DIMS];
        memcpy(flat, g->shape, (size_t)g->ndim * sizeof *flat);
        flat[dim] = n * step;
        g = p_slice(ctx, p_reshape(ctx, spread, g->ndim, flat), dim, 0, (n - 1) * step + 1, 1);
    }
    if (!g) return NULL;
    int64_t before[KN_MAX_DIMS] = {0}, after[KN_MAX_DIMS] = {0};
    before[dim] = start;
    after[dim] = size - start - g->shape[dim];
    return p_pad(ctx, g, before, after, 0.0);
}

static kn_tensor *vjp_pad(kn_ctx *ctx, const Params *p, kn_tensor *x, kn_tensor *g)
{
    for (int d = 0; d < x->ndim && g; d++) g = p_slice(ctx, g, d, p->i[2 * d], x->shape[d], 1);
    return g;
}

/* scatter_add's src: the part of g the index reached, zero beyond the index's extent */
static kn_tensor *vjp_scatter_src(kn_ctx *ctx, Entry *e, kn_tensor *g)
{
    kn_tensor *idx = e->src[1], *src = e->src[2];
    kn_tensor *part = p_gather(ctx, g, (int)e->p.i[0], idx);
    int64_t after[KN_MAX_DIMS];
    for (int d = 0; d < src->ndim; d++) after[d] = src->shape[d] - idx->shape[d];
    return p_pad(ctx, part, NULL, after, 0.0);
}

static kn_tensor *vjp_unary(kn_ctx *ctx, Op op, kn_tensor *x, kn_tensor *out, kn_tensor *g)
{
    switch (op) {
    case OP_NEG: return prim1(ctx, OP_NEG, g);
    case OP_EXP: return prim2(ctx, OP_MUL, g, out);
    case OP_LOG: return prim2(ctx, OP_DIV, g, x);
    case OP_SQRT: return prim2(ctx, OP_DIV, g, mulc(ctx, out, 2.0));
    case OP_RECIP: return prim1(ctx, OP_NEG, prim2(ctx, OP_MUL, g, prim2(ctx, OP_MUL, out, out)));
    case OP_SIN: return prim2(ctx, OP_MUL, g, prim1(ctx, OP_COS, x));
    case OP_COS: return prim1(ctx, OP_NEG, prim2(ctx, OP_MUL, g, prim1(ctx, OP_SIN, x)));
    case OP_TANH: {
        kn_tensor *one = p_full(ctx, (kn_dtype)out->dtype, out->ndim, out->shape, 1.0);
        return prim2(ctx, OP_MUL, g, prim2(ctx, OP_SUB, one, prim2(ctx, OP_MUL, out, out)));
    }
    case OP_ERF: { /* 2 / sqrt(pi) exp(-x^2) */
        kn_tensor *e = prim1(ctx, OP_EXP, prim1(ctx, OP_NEG, prim2(ctx, OP_MUL, x, x)));
        return prim2(ctx, OP_MUL, g, mulc(ctx, e, 1.1283791670955126));
    }
    case OP_ABS: return prim2(ctx, OP_MUL, g, kn_sign(ctx, x));
    default: return zeros_like(ctx, x); /* floor */
    }
}

static kn_tensor *vjp(kn_ctx *ctx, Entry *e, int i, kn_tensor *g)
{
    if (e->custom) return e->fn(ctx, g, e->saved, e->args, i);
    Op op = (Op)e->op;
    kn_tensor *x = e->src[0], *y = e->nsrc > 1 ? e->src[1] : NULL, *out = e->out;
    switch (op) {
    case OP_ADD: return g;
    case OP_SUB: return i == 0 ? g : prim1(ctx, OP_NEG, g);
    case OP_MUL: return prim2(ctx, OP_MUL, g, i == 0 ? y : x);
    case OP_DIV:
        if (i == 0) return prim2(ctx, OP_DIV, g, y);
        return prim1(ctx, OP_NEG, prim2(ctx, OP_DIV, prim2(ctx, OP_MUL, g, out), y));
    case OP_MAX:
    case OP_MIN: return vjp_extreme(ctx, op, x, y, g, i);
    case OP_POW: return vjp_pow(ctx, x, y, out, g, i);
    case OP_WHERE: {
        kn_tensor *zero = zeros_like(ctx, g);
        return i == 1 ? p_where(ctx, x, g, zero) : p_where(ctx, x, zero, g);
    }
    case OP_CAST: return p_cast(ctx, g, (kn_dtype)x->dtype);
    case OP_SUM: return p_expand(ctx, g, x->ndim, x->shape);
    case OP_RMAX: return vjp_rmax(ctx, e, x, g);
    case OP_RESHAPE: return p_reshape(ctx, g, x->ndim, x->shape);
    case OP_PERMUTE: {
        int inv[KN_MAX_DIMS];
        for (int d = 0; d < x->ndim; d++) inv[e->p.i[d]] = d;
        return p_permute(ctx, g, inv);
    }
    case OP_EXPAND: return vjp_expand(ctx, x, g);
    case OP_SLICE: return vjp_slice(ctx, &e->p, x, g);
    case OP_PAD: return vjp_pad(ctx, &e->p, x, g);
    case OP_GATHER: return p_scatter_add(ctx, zeros_like(ctx, x), (int)e->p.i[0], y, g);
    case OP_SCATTER_ADD: return i == 0 ? g : vjp_scatter_src(ctx, e, g);
    case OP_DOT: return i == 0 ? p_dot(ctx, g, swap_last(ctx, y)) : vjp_dot_b(ctx, x, y, g);
    default: return vjp_unary(ctx, op, x, out, g);
    }
}

/* ---- backward ---- */

static kn_tensor *accumulate(kn_ctx *ctx, kn_tensor *acc, kn_tensor *g)
{
    return acc ? prim2(ctx, OP_ADD, acc, g) : g;
}

static kn_status check_loss(kn_ctx *ctx, kn_tensor *loss)
{
    if (!tensor_check(ctx, loss, "loss")) return ctx->status;
    if (tensor_numel(loss->ndim, loss->shape) != 1)
        return kn_errs(ctx, KN_ESHAPE, "loss has %lld elements; backward needs a single value",
                       (long long)tensor_numel(loss->ndim, loss->shape));
    if (!needs_grad(loss)) return kn_errs(ctx, KN_EINVAL, "loss does not require grad: nothing it depends on is a parameter");
    if (loss->tape_seq && loss->tape_epoch != ctx->tape_epoch)
        return kn_errs(ctx, KN_EINVAL, "the graph of loss was released by an earlier backward (pass keep_graph)");
    return KN_OK;
}

/* A backward's walk: the gradients of leaves[0..n) go to grads; entries before stop are not visited, a
 * value one of them made counts as a leaf (listed in leaves, matched by the entry that made it). */
typedef struct {
    int n;
    kn_tensor *const *leaves;
    kn_tensor **grads;
    uint32_t stop;
} Walk;

/* Hands g for source i of e to the entry that made it, or to the leaf. */
static kn_status pass_back(kn_ctx *ctx, Entry *e, int i, kn_tensor *g, const Walk *w)
{
    uint32_t seq = e->src_seq[i];
    if (seq > w->stop) {
        Entry *from = ctx->tape->e[seq - 1];
        from->g = accumulate(ctx, from->g, g);
        return from->g ? KN_OK : ctx->status;
    }
    for (int j = 0; j < w->n; j++) {
        const kn_tensor *l = w->leaves[j];
        if (seq ? l->tape_seq == seq && l->tape_epoch == ctx->tape_epoch : l == e->leaf[i]) {
            w->grads[j] = accumulate(ctx, w->grads[j], g);
            if (!w->grads[j]) return ctx->status;
        }
    }
    return KN_OK;
}

/* A region hands back every source's cotangent from one call. */
static kn_status region_back(kn_ctx *ctx, Entry *e, const Walk *w)
{
    size_t bytes = (size_t)e->nsrc * sizeof(kn_tensor *);
    kn_tensor **gs = kn_alloc(ctx, bytes);
    if (!gs) return kn_errs(ctx, KN_ENOMEM, "out of memory for %d gradients", e->nsrc);
    memset(gs, 0, bytes);
    if (e->nout == 1) e->rg[0] = e->g;
    kn_status s = e->rfn(ctx, e->ruser, e->rg, gs);
    for (int i = 0; i < e->nsrc && !s; i++)
        if (gs[i] && (e->src_seq[i] || e->leaf[i])) s = pass_back(ctx, e, i, gs[i], w);
    kn_dealloc(ctx, gs, bytes);
    return s;
}

static kn_status walk_back(kn_ctx *ctx, uint32_t last, const Walk *w)
{
    for (uint32_t k = last + 1; k-- > w->stop;) {
        Entry *e = ctx->tape->e[k];
        if (!e->g) continue;
        if (e->region == 2) { /* an output of a region of several: its cotangent goes to the region */
            Entry *r = ctx->tape->e[e->rseq - 1];
            if (!(r->rg[e->rk] = accumulate(ctx, r->rg[e->rk], e->g))) return ctx->status;
            r->g = r->rg[e->rk];
            continue;
        }
        if (e->region) {
            if (region_back(ctx, e, w)) return ctx->status;
            continue;
        }
        for (int i = 0; i < e->nsrc; i++) {
            if (!e->src_seq[i] && !e->leaf[i]) {
                if (needs_grad(e->src[i]) && e->src[i]->tape_seq)
                    return kn_errs(ctx, KN_EINVAL, "backward reached a value whose graph was already released");
                continue;
            }
            kn_tensor *gi = vjp(ctx, e, i, e->g);
            if (!gi) return ctx->status ? ctx->status : kn_errs(ctx, KN_EINVAL, "no gradient from %s", kn_opinfo[e->op].name);
            if (pass_back(ctx, e, i, gi, w)) return ctx->status;
        }
    }
    return KN_OK;
}

kn_status autodiff_grads(kn_ctx *ctx, kn_tensor *loss, int n, kn_tensor *const *leaves, kn_tensor **grads)
{
    return autodiff_grads_since(ctx, loss, 0, n, leaves, grads);
}

kn_status autodiff_grads_since(kn_ctx *ctx, kn_tensor *loss, uint32_t stop, int n, kn_tensor *const *leaves,
                               kn_tensor **grads)
{
    if (check_loss(ctx, loss)) return ctx->status;
    for (int j = 0; j < n; j++) grads[j] = NULL;
    kn_tensor *seed = p_full(ctx, (kn_dtype)loss->dtype, loss->ndim, loss->shape, 1.0);
    if (!seed) return ctx->status;
    if (!loss->tape_seq) { /* the loss is itself a leaf */
        for (int j = 0; j < n; j++) grads[j] = leaves[j] == loss ? seed : NULL;
        return KN_OK;
    }
    int was = ctx->grad_enabled;
    ctx->grad_enabled = 0;
    uint32_t last = loss->tape_seq - 1;
    ctx->tape->e[last]->g = seed;
    Walk w = {n, leaves, grads, stop};
    kn_status s = walk_back(ctx, last, &w);
    for (uint32_t k = 0; k <= last; k++) {
        Entry *e = ctx->tape->e[k];
        e->g = NULL;
        for (int i = 0; e->region == 1 && i < e->nout; i++) e->rg[i] = NULL;
    }
    ctx->grad_enabled = was;
    return s;
}

/* The distinct leaves the tape up to entry `last` reaches. */
static int tape_leaves(kn_ctx *ctx, uint32_t last, kn_tensor **out, int cap)
{
    int n = 0;
    for (uint32_t k = 0; ctx->tape && k <= last; k++)
        for (int i = 0; i < ctx->tape->e[k]->nsrc; i++) {
            kn_tensor *l = ctx->tape->e[k]->leaf[i];
            int seen = !l;
            for (int j = 0; j < n && !seen; j++) seen = out[j] == l;
            if (!seen && n < cap) out[n++] = l;
            else if (!seen) return -1;
        }
    return n;
}

/* Adds g into leaf->grad as a dense tensor of its own. */
static kn_status add_grad(kn_ctx *ctx, kn_tensor *leaf, kn_tensor *g)
{
    Params p;
    memset(&p, 0, sizeof p);
    p.dtype = leaf->dtype;
    kn_tensor *sum = leaf->grad ? prim2(ctx, OP_ADD, leaf->grad, g) : prim(ctx, OP_CAST, &g, &p); /* a copy */
    if (!sum) return ctx->status;
    if (ctx->capture) return ctx->capture->set_grad(ctx, leaf, sum, 1);
    if (leaf->grad) {
        leaf->grad->flags &= (uint8_t)~TF_GRAD;
        kn_free(ctx, leaf->grad);
    }
    leaf->grad = kn_keep(ctx, sum);
    sum->flags |= TF_GRAD;
    return KN_OK;
}

#define MAX_LEAVES 4096

kn_status kn_backward(kn_ctx *ctx, kn_tensor *loss, int keep_graph)
{
    if (!ctx) return KN_EINVAL;
    const char *saved = op_enter(ctx, "kn_backward");
    kn_status s = KN_OK;
    kn_tensor **leaves = NULL, **grads = NULL;
    size_t bytes = MAX_LEAVES * sizeof *leaves;
    uint32_t keep = ctx->capture ? ctx->capture->tape_start(ctx) : 0;
    if (ctx->trace && !ctx->capture) s = kn_errs(ctx, KN_EUNSUPPORTED, "backward while tracing is done by kn_compile");
    else if (check_loss(ctx, loss)) s = ctx->status;
    else if (!(leaves = kn_alloc(ctx, bytes)) || !(grads = kn_alloc(ctx, bytes)))
        s = kn_errs(ctx, KN_ENOMEM, "out of memory for the list of leaves");
    int n = s ? 0 : loss->tape_seq ? tape_leaves(ctx, loss->tape_seq - 1, leaves, MAX_LEAVES) : 0;
    if (!s && !loss->tape_seq) leaves[n++] = loss;
    if (!s && n < 0) s = kn_errs(ctx, KN_EUNSUPPORTED, "more than %d leaves require grad", MAX_LEAVES);
    if (!s) {
        kn_scope_begin(ctx);
        s = autodiff_grads(ctx, loss, n, leaves, grads);
        for (int j = 0; j < n && !s; j++)
            if (grads[j]) s = add_grad(ctx, leaves[j], grads[j]);
        kn_scope_end(ctx);
    }
    if (!s && !keep_graph) autodiff_truncate(ctx, keep); /* 0 outside kn_call: the whole tape */
    kn_dealloc(ctx, leaves, bytes);
    kn_dealloc(ctx, grads, bytes);
    op_leave(ctx, saved);
    return s;
}

/* ---- the tape's lifetime ---- */

static void trim(kn_ctx *ctx, uint32_t keep)
{
    struct Tape *t = ctx->tape;
    if (!t) return;
    for (uint32_t k = keep; k < t->n; k++) free_entry(ctx, t->e[k]);
    t->n = keep;
    if (keep == 0) {
        Arena a = t->arena;
        arena_free(&a);
        ctx->tape = NULL;
        ctx->tape_epoch++;
    }
}

void autodiff_release(kn_ctx *ctx) { trim(ctx, 0); }

void autodiff_truncate(kn_ctx *ctx, uint32_t len)
{
    if (ctx->tape && len < ctx->tape->n) trim(ctx, len);
}

uint32_t autodiff_tape_len(const kn_ctx *ctx) { return ctx->tape ? ctx->tape->n : 0; }

void autodiff_forget_leaf(kn_ctx *ctx, kn_tensor *leaf)
{
    for (uint32_t k = 0; ctx->tape && k < ctx->tape->n; k++)
        for (int i = 0; i < ctx->tape->e[k]->nsrc; i++)
            if (ctx->tape->e[k]->leaf[i] == leaf) ctx->tape->e[k]->leaf[i] = NULL;
}

void autodiff_scope_begin(kn_ctx *ctx)
{
    if (ctx->scope >= 32) return;
    ctx->scope_mark[ctx->scope] = ctx->tape ? ctx->tape->n : 0;
    ctx->scope_epoch[ctx->scope] = ctx->tape_epoch;
}

/* Entries recorded inside a scope whose results no live tensor refers to
 * can never be reached by a backward: drop them, so an eager loop that
 * never calls backward (evaluation) does not grow the tape. */
void autodiff_scope_end(kn_ctx *ctx)
{
    if (ctx->scope >= 32 || !ctx->tape) return;
    uint32_t mark = ctx->scope_epoch[ctx->scope] == ctx->tape_epoch ? ctx->scope_mark[ctx->scope] : 0;
    for (kn_tensor *t = ctx->live; t; t = t->next)
        if (t->tape_seq > mark && t->tape_epoch == ctx->tape_epoch) return;
    trim(ctx, mark);
}

/* ---- the public leaf API ---- */

static kn_tensor *make_leaf(kn_ctx *ctx, kn_tensor *t, int on)
{
    if (!tensor_check(ctx, t, "t")) return NULL;
    if (on && !dt_is_float((kn_dtype)t->dtype))
        return kn_err(ctx, KN_EDTYPE, "only float tensors can require grad, got %s", kn_dtype_name((kn_dtype)t->dtype));
    if (t->tape_seq)
        return kn_err(ctx, KN_EINVAL, "t was computed from tensors that require grad: only leaves can (use kn_detach)");
    if (on) t->flags |= TF_REQGRAD;
    else t->flags &= (uint8_t)~TF_REQGRAD;
    return t;
}

kn_tensor *kn_requires_grad(kn_ctx *ctx, kn_tensor *t, int on)
{
    ENTER(ctx, "kn_requires_grad");
    return LEAVE(ctx, make_leaf(ctx, t, on));
}

kn_tensor *kn_param(kn_ctx *ctx, kn_tensor *t)
{
    ENTER(ctx, "kn_param");
    if (!make_leaf(ctx, t, 1)) return LEAVE(ctx, NULL);
    t->flags |= TF_PARAM;
    return LEAVE(ctx, kn_keep(ctx, t));
}

int kn_is_requires_grad(const kn_tensor *t) { return needs_grad(t); }

kn_tensor *kn_grad(kn_ctx *ctx, kn_tensor *t)
{
    (void)ctx;
    return t ? t->grad : NULL;
}

void kn_zero_grad(kn_ctx *ctx, kn_tensor *const *params, int n)
{
    if (!ctx || !params) return;
    for (int i = 0; i < n; i++)
        if (ctx->capture && params[i]) ctx->capture->set_grad(ctx, params[i], NULL, 0);
        else if (params[i] && params[i]->grad) {
            params[i]->grad->flags &= (uint8_t)~TF_GRAD;
            kn_free(ctx, params[i]->grad);
            params[i]->grad = NULL;
        }
}

int kn_set_grad_enabled(kn_ctx *ctx, int on)
{
    if (!ctx) return 0;
    int was = ctx->grad_enabled;
    ctx->grad_enabled = on != 0;
    return was;
}

kn_tensor *kn_detach(kn_ctx *ctx, kn_tensor *t)
{
    ENTER(ctx, "kn_detach");
    if (!tensor_check(ctx, t, "t")) return LEAVE(ctx, NULL);
    return LEAVE(ctx, tensor_view(ctx, t, t->ndim, t->shape, t->stride, t->offset));
}
