/*
 * lower.c — lowering: one scheduled kernel (a materialised graph node and
 * the nodes fused into it) to a loop-IR kernel.
 *
 * The value of a fused node at an output position is built recursively:
 *   - a materialised node (or graph input) is a load from its buffer at the
 *     row-major index of the position;
 *   - views rewrite the position: permute reorders it, expand pins broadcast
 *     dims to 0, slice scales and shifts, reshape goes through the linear
 *     index; pad tests the bounds and selects its value outside them;
 *   - pointwise ops apply their op to their sources' values.
 * The kernel itself is a loop nest over its node's shape: a store for a
 * pointwise node, an accumulator over the reduced dims for sum and
 * reduce_max, over k for dot.
 *
 * Requires: a Schedule of a verified graph with concrete shapes.
 * Produces: a Kernel whose buffer 0 is the output; other buffers are the
 * materialised nodes it reads (Kernel.bufs[i].node). LOWER_INTERP for
 * nodes this lowering leaves to the interpreter (gather, scatter_add).
 */
#include <stdio.h>
#include <string.h>

#include "lower.h"

typedef struct {
    kn_ctx *ctx;
    const Graph *g;
    const Schedule *s;
    Kernel *k;
    ExprTable *ex;
    IrBlock blocks[2 * KN_MAX_DIMS + 2]; /* the bodies of the loops made so far */
    int nblocks;
} Lower;

static ExprId cst(Lower *l, int64_t v) { return expr_const(l->ex, v); }

/* The row-major linear index of position idx in a node of this shape. */
static ExprId linear(Lower *l, int nd, const Dim *shape, const ExprId *idx)
{
    ExprId lin = cst(l, 0);
    for (int d = 0; d < nd; d++) lin = expr_add(l->ex, expr_mul(l->ex, lin, cst(l, shape[d])), idx[d]);
    return lin;
}

/* The buffer that holds node u in this kernel, added on first use. */
static int buffer_of(Lower *l, uint32_t u)
{
    for (int b = 0; b < l->k->nbufs; b++)
        if (l->k->bufs[b].node == u) return b;
    const Node *n = &l->g->nodes[u];
    return ir_buf(l->k, (kn_dtype)n->dtype, BUF_IN, cst(l, tensor_numel(n->ndim, n->shape)), u);
}

static IrRef value(Lower *l, uint32_t u, const ExprId *idx);

/* A constant as the interpreter stores it in dt: integers truncate and
 * saturate, bools become 0 or 1, narrow floats round. */
static IrRef stored_const(Lower *l, kn_dtype dt, double v)
{
    unsigned char cell[8];
    dt_store(dt, cell, v);
    return ir_const(l->k, dt, dt_load(dt, cell));
}

/* Source positions of a view: how each view maps an output position back. */
static void view_index(Lower *l, const Node *n, const ExprId *idx, ExprId *src)
{
    const Node *m = &l->g->nodes[n->src[0]];
    switch (n->op) {
    case OP_PERMUTE:
        for (int d = 0; d < n->ndim; d++) src[n->p.i[d]] = idx[d];
        break;
    case OP_EXPAND:
        for (int d = 0; d < n->ndim; d++) src[d] = m->shape[d] == 1 ? cst(l, 0) : idx[d];
        break;
    case OP_SLICE:
        memcpy(src, idx, n->ndim * sizeof *idx);
        src[n->p.i[0]] = expr_add(l->ex, cst(l, n->p.i[1]), expr_mul(l->ex, idx[n->p.i[0]], cst(l, n->p.i[3])));
        break;
    case OP_PAD:
        for (int d = 0; d < n->ndim; d++) src[d] = expr_sub(l->ex, idx[d], cst(l, n->p.i[2 * d]));
        break;
    default: { /* OP_RESHAPE: through the linear index */
        ExprId lin = linear(l, n->ndim, n->shape, idx);
        int64_t stride = 1;
        for (int d = m->ndim - 1; d >= 0; d--) {
            src[d] = expr_mod(l->ex, expr_floordiv(l->ex, lin, cst(l, stride)), cst(l, m->shape[d]));
            stride *= m->shape[d];
        }
    }
    }
}

/* pad: where(every source index is in bounds, the source, the pad value) */
static IrRef pad_value(Lower *l, const Node *n, const ExprId *src)
{
    const Node *m = &l->g->nodes[n->src[0]];
    IrRef inside = 0;
    for (int d = 0; d < n->ndim; d++) {
        if (n->p.i[2 * d] == 0 && n->p.i[2 * d + 1] == 0) continue;
        IrRef i = ir_index(l->k, src[d]);
        IrRef lo = ir_op(l->k, OP_CMPLT, KN_BOOL, i, ir_const(l->k, KN_I64, 0), 0);          /* i < 0 */
        IrRef hi = ir_op(l->k, OP_CMPLT, KN_BOOL, i, ir_const(l->k, KN_I64, (double)m->shape[d]), 0);
        IrRef ok = ir_op(l->k, OP_MIN, KN_BOOL, hi, ir_op(l->k, OP_CMPEQ, KN_BOOL, lo, ir_const(l->k, KN_BOOL, 0), 0), 0);
        inside = inside ? ir_op(l->k, OP_MIN, KN_BOOL, inside, ok, 0) : ok;
    }
    IrRef v = value(l, n->src[0], src);
    if (!inside) return v;
    return ir_op(l->k, OP_WHERE, (kn_dtype)n->dtype, inside, v, stored_const(l, (kn_dtype)n->dtype, n->p.f));
}

/* A node's own value at idx, computed here (not loaded). */
static IrRef compute(Lower *l, uint32_t u, const ExprId *idx)
{
    const Node *n = &l->g->nodes[u];
    kn_dtype dt = (kn_dtype)n->dtype;
    OpClass c = kn_opinfo[n->op].cls;
    if (c == OC_MOVE) {
        ExprId src[KN_MAX_DIMS];
        view_index(l, n, idx, src);
        return n->op == OP_PAD ? pad_value(l, n, src) : value(l, n->src[0], src);
    }
    if (n->op == OP_FULL) return stored_const(l, dt, n->p.f);
    if (n->op == OP_IOTA) return ir_op(l->k, OP_CAST, dt, ir_index(l->k, idx[n->p.axis]), 0, 0);
    if (n->op == OP_RAND) {
        /* element c of the stream is Philox block c / 4, lane c % 4: the
         * interpreter's element k of a draw at counter ctr is c = 4 ctr + k */
        ExprId c = expr_add(l->ex, cst(l, (int64_t)(n->p.ctr * 4)), linear(l, n->ndim, n->shape, idx));
        IrRef r = ir_rand(l->k, n->p.seed, c);
        return dt == KN_F32 ? r : ir_op(l->k, OP_CAST, dt, r, 0, 0);
    }
    IrRef a[3] = {0, 0, 0};
    for (int s = 0; s < n->nsrc; s++) a[s] = value(l, n->src[s], idx);
    return ir_op(l->k, (Op)n->op, dt, a[0], a[1], a[2]);
}

static IrRef value(Lower *l, uint32_t u, const ExprId *idx)
{
    const Node *n = &l->g->nodes[u];
    if (!l->s->materialised[u]) return compute(l, u, idx);
    int b = buffer_of(l, u);
    return b < 0 ? 0 : ir_load(l->k, b, linear(l, n->ndim, n->shape, idx));
}

/* Loops over the dims of shape not skipped, nested, the outermost appended
 * to blk; their vars into idx. Returns the innermost body (blk itself if no
 * loop was made), or NULL. */
static IrBlock *loops(Lower *l, IrBlock *blk, int nd, const Dim *shape, const uint8_t *skip, ExprId *idx)
{
    for (int d = 0; d < nd; d++) {
        if (skip && skip[d]) continue;
        IrRef loop = ir_loop(l->k, blk, cst(l, shape[d]), LOOP_SERIAL, 1);
        if (!loop || l->nblocks == (int)(sizeof l->blocks / sizeof *l->blocks)) return NULL;
        idx[d] = expr_sym(l->ex, l->k->nvars - 1);
        blk = &l->blocks[l->nblocks++];
        *blk = (IrBlock){loop, 0};
    }
    return blk;
}

static int lower_pointwise(Lower *l, uint32_t v)
{
    const Node *n = &l->g->nodes[v];
    ExprId idx[KN_MAX_DIMS];
    IrBlock top = {0, 0}, *body = loops(l, &top, n->ndim, n->shape, NULL, idx);
    return body && ir_store(l->k, body, 0, linear(l, n->ndim, n->shape, idx), compute(l, v, idx)) ? 0 : -1;
}

/* The accumulator's dtype: f32 for the narrow floats, else the node's. */
static kn_dtype acc_dtype(const Node *n)
{
    return n->dtype == KN_F16 || n->dtype == KN_BF16 ? KN_F32 : (kn_dtype)n->dtype;
}

/* acc's value as node n's dtype */
static IrRef acc_out(Lower *l, const Node *n, int acc, kn_dtype adt)
{
    IrRef out = ir_accval(l->k, acc);
    return adt == n->dtype ? out : ir_op(l->k, OP_CAST, (kn_dtype)n->dtype, out, 0, 0);
}

/* sum / reduce_max: kept dims outside, an accumulator, reduced dims inside */
static int lower_reduce(Lower *l, uint32_t v)
{
    const Node *n = &l->g->nodes[v], *x = &l->g->nodes[n->src[0]];
    uint8_t red[KN_MAX_DIMS] = {0}, kept[KN_MAX_DIMS] = {0};
    for (int d = 0; d < x->ndim; d++) red[d] = n->p.i[d] != 0, kept[d] = !red[d];
    ExprId idx[KN_MAX_DIMS], oidx[KN_MAX_DIMS];
    IrBlock top = {0, 0}, *outer = loops(l, &top, x->ndim, x->shape, red, idx);
    if (!outer) return -1;
    kn_dtype adt = acc_dtype(n);
    int acc = ir_acc(l->k, outer, (Op)n->op, adt);
    IrBlock *inner = loops(l, outer, x->ndim, x->shape, kept, idx);
    if (acc < 0 || !inner) return -1;
    IrRef in = value(l, n->src[0], idx);
    if (x->dtype != adt) in = ir_op(l->k, OP_CAST, adt, in, 0, 0);
    if (!ir_update(l->k, inner, acc, in)) return -1;
    for (int d = 0; d < x->ndim; d++) oidx[d] = red[d] ? cst(l, 0) : idx[d];
    return ir_store(l->k, outer, 0, linear(l, n->ndim, n->shape, oidx), acc_out(l, n, acc, adt)) ? 0 : -1;
}

/* dot: (..., M, K) x (..., K, N): loops over (..., M, N), a sum over K */
static int lower_dot(Lower *l, uint32_t v)
{
    const Node *n = &l->g->nodes[v], *a = &l->g->nodes[n->src[0]];
    int nd = n->ndim;
    ExprId idx[KN_MAX_DIMS], ai[KN_MAX_DIMS], bi[KN_MAX_DIMS];
    IrBlock top = {0, 0}, *outer = loops(l, &top, nd, n->shape, NULL, idx);
    if (!outer) return -1;
    kn_dtype adt = acc_dtype(n);
    int acc = ir_acc(l->k, outer, OP_SUM, adt);
    IrRef kl = ir_loop(l->k, outer, cst(l, a->shape[nd - 1]), LOOP_SERIAL, 1);
    if (acc < 0 || !kl) return -1;
    ExprId k = expr_sym(l->ex, l->k->nvars - 1);
    memcpy(ai, idx, sizeof ai);
    memcpy(bi, idx, sizeof bi);
    ai[nd - 1] = k;
    bi[nd - 2] = k;
    IrRef x = value(l, n->src[0], ai), y = value(l, n->src[1], bi); /* in this order: buffer numbers */
    IrRef prod = ir_op(l->k, OP_MUL, (kn_dtype)n->dtype, x, y, 0);
    if (adt != n->dtype) prod = ir_op(l->k, OP_CAST, adt, prod, 0, 0);
    IrBlock body = {kl, 0};
    if (!ir_update(l->k, &body, acc, prod)) return -1;
    return ir_store(l->k, outer, 0, linear(l, nd, n->shape, idx), acc_out(l, n, acc, adt)) ? 0 : -1;
}

int lower_kernel(kn_ctx *ctx, const Graph *g, const Schedule *s, uint32_t v, ExprTable *ex, Arena *a, Kernel *k)
{
    const Node *n = &g->nodes[v];
    if (n->op == OP_GATHER || n->op == OP_SCATTER_ADD) return LOWER_INTERP;
    for (int d = 0; d < n->ndim; d++)
        if (DIM_IS_SYM(n->shape[d])) return kn_errs(ctx, KN_EUNSUPPORTED, "lower: symbolic shapes are not lowered yet");
    char name[32];
    snprintf(name, sizeof name, "k%" PRIu32 "_%s", v, kn_opinfo[n->op].name);
    ir_init(k, a, ex, name);
    Lower l;
    memset(&l, 0, sizeof l);
    l.ctx = ctx, l.g = g, l.s = s, l.k = k, l.ex = ex;
    if (ir_buf(k, (kn_dtype)n->dtype, BUF_OUT, cst(&l, tensor_numel(n->ndim, n->shape)), v) != 0)
        return kn_errs(ctx, KN_ENOMEM, "out of memory lowering");
    OpClass c = kn_opinfo[n->op].cls;
    int r = c == OC_REDUCE ? lower_reduce(&l, v) : c == OC_DOT ? lower_dot(&l, v) : lower_pointwise(&l, v);
    return r ? kn_errs(ctx, KN_ENOMEM, "out of memory lowering %s", name) : 0;
}
