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
 * reduce_max, over k for dot. gather is a load at a data-dependent offset
 * (the index read, checked against the dim's size, times its stride);
 * scatter_add a copy of its input and then an accumulating store at such
 * an offset (lower_scatter).
 *
 * Requires: a Schedule of a verified graph with concrete shapes.
 * Produces: a Kernel whose buffer 0 is the output; other buffers are the
 * materialised nodes it reads (Kernel.bufs[i].node). LOWER_INTERP for
 * nodes this lowering leaves to the interpreter (a 0-d gather or
 * scatter_add).
 */
#include <stdio.h>
#include <stdlib.h>
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
    /* a row kernel: its fused reductions, their accumulators, and the row
     * index (the outer loops' vars, 0 in reduced and unit dims) */
    uint32_t rnode[SCHED_MAX_ROW];
    int racc[SCHED_MAX_ROW], nr;
    ExprId row[KN_MAX_DIMS];
    int bad_row; /* a fused reduction was read away from its row: a scheduler bug */
    uint32_t reuse; /* a row kernel's node whose values the output buffer holds (0: none) */
    int row_final;  /* lowering a row kernel's last loop: x / (a value of the row) is x * (1 / it) */
    /* a group (lower_group): its nodes, the values of those stored so far, their one index */
    const uint32_t *group;
    IrRef gval[LOWER_GROUP_MAX];
    int ngroup, gdone;
    ExprId glin;
    int self_read; /* a node of the group read away from its own element (or before it is stored) */
} Lower;

static ExprId cst(Lower *l, int64_t v) { return expr_const(l->ex, v); }

/* The row-major linear index of position idx in a node of this shape. */
static ExprId linear_index(Lower *l, int nd, const Dim *shape, const ExprId *idx)
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
        ExprId lin = linear_index(l, n->ndim, n->shape, idx);
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
/* A value of the row alone (constants, accumulators and arithmetic on
 * them: no load, index or random number), the same at every element. */
static int row_invariant(const Lower *l, IrRef r, int depth)
{
    const IrNode *x = &l->k->nodes[r];
    if (x->kind == IR_CONST || x->kind == IR_ACCVAL) return 1;
    if (x->kind != IR_OP || depth > 16) return 0;
    return (!x->a || row_invariant(l, x->a, depth + 1)) && (!x->b || row_invariant(l, x->b, depth + 1)) &&
           (!x->c || row_invariant(l, x->c, depth + 1));
}

/* The offset of index value iv along dim of a buffer of this shape:
 * check(iv, shape[dim]) times the dim's stride, so it stays in bounds. */
static IrRef index_offset(Lower *l, IrRef iv, int nd, const Dim *shape, int dim)
{
    int64_t stride = tensor_numel(nd - dim - 1, shape + dim + 1);
    IrRef c = iv ? ir_check(l->k, iv, cst(l, shape[dim])) : 0;
    return stride == 1 || !c ? c : ir_op(l->k, OP_MUL, KN_I64, c, ir_const(l->k, KN_I64, (double)stride), 0);
}

/* gather at idx: x[idx with idx[dim] replaced by index[idx]]; x is a
 * buffer (the scheduler materialises it), the index any value */
static IrRef gather_value(Lower *l, const Node *n, const ExprId *idx)
{
    const Node *x = &l->g->nodes[n->src[0]];
    int dim = (int)n->p.i[0];
    ExprId xi[KN_MAX_DIMS];
    KN_ASSERT(l->s->materialised[n->src[0]]);
    memcpy(xi, idx, (size_t)n->ndim * sizeof *idx);
    xi[dim] = cst(l, 0);
    IrRef off = index_offset(l, value(l, n->src[1], idx), x->ndim, x->shape, dim);
    int b = buffer_of(l, n->src[0]);
    return b < 0 || !off ? 0 : ir_load_at(l->k, b, linear_index(l, x->ndim, x->shape, xi), off);
}

/* Node u is x - expand(reduce_max(x)) (softmax's, log_softmax's): at every
 * element x minus the max of its row, so <= 0 or NaN. The reduction keeps
 * its dims as size 1 and sub's operands have one shape, so the expand
 * broadcasts exactly the reduced dims. */
static int below_own_max(const Graph *g, uint32_t u)
{
    const Node *s = &g->nodes[u], *e, *m;
    if (s->op != OP_SUB) return 0;
    e = &g->nodes[s->src[1]];
    if (e->op != OP_EXPAND) return 0;
    m = &g->nodes[e->src[0]];
    return m->op == OP_RMAX && m->src[0] == s->src[0];
}

static IrRef compute(Lower *l, uint32_t u, const ExprId *idx)
{
    const Node *n = &l->g->nodes[u];
    kn_dtype dt = (kn_dtype)n->dtype;
    OpClass c = kn_opinfo[n->op].cls;
    if (n->op == OP_GATHER) return gather_value(l, n, idx);
    if (c == OC_MOVE) {
        ExprId src[KN_MAX_DIMS];
        view_index(l, n, idx, src);
        return n->op == OP_PAD ? pad_value(l, n, src) : value(l, n->src[0], src);
    }
    if (n->op == OP_FULL) return stored_const(l, dt, n->p.f);
    if (n->op == OP_IOTA) return ir_op(l->k, OP_CAST, dt, ir_index(l->k, idx[n->p.axis]), 0, 0);
    if (n->op == OP_RAND) { /* element k of the draw: the key's stream at counter + k (its sources are 0-d) */
        IrRef key = value(l, n->src[0], idx), ctr = value(l, n->src[1], idx);
        IrRef r = key && ctr ? ir_rand(l->k, key, ctr, linear_index(l, n->ndim, n->shape, idx)) : 0;
        return dt == KN_F32 || !r ? r : ir_op(l->k, OP_CAST, dt, r, 0, 0);
    }
    IrRef a[3] = {0, 0, 0};
    for (int s = 0; s < n->nsrc; s++) a[s] = value(l, n->src[s], idx);
    if (n->op == OP_DIV && l->row_final && (dt == KN_F32 || dt == KN_F64) && a[0] && a[1] && row_invariant(l, a[1], 0) &&
        !row_invariant(l, a[0], 0)) /* per element by a value of the row */
        return ir_op(l->k, OP_MUL, dt, a[0], ir_op(l->k, OP_RECIP, dt, a[1], 0, 0), 0);
    /* exp(x - max): exp(min(x - max, 0)), the same value (min(-0, 0) is +0, and e^-0 = e^+0), which
     * tells a target the argument's range (targets/c: one power of two where a general exp takes two) */
    if (n->op == OP_EXP && dt == KN_F32 && a[0] && below_own_max(l->g, n->src[0]))
        a[0] = ir_op(l->k, OP_MIN, dt, a[0], ir_const(l->k, dt, 0), 0);
    return ir_op(l->k, (Op)n->op, dt, a[0], a[1], a[2]);
}

static IrRef acc_out(Lower *l, const Node *n, int acc, kn_dtype adt);
static kn_dtype acc_dtype(const Node *n);

/* A fused reduction's value: its accumulator, read at the row's own index. */
static IrRef row_value(Lower *l, uint32_t u, const ExprId *idx)
{
    const Node *n = &l->g->nodes[u];
    for (int i = 0; i < l->nr; i++) {
        if (l->rnode[i] != u) continue;
        for (int d = 0; d < n->ndim; d++)
            if (idx[d] != l->row[d]) l->bad_row = 1;
        return l->bad_row ? 0 : acc_out(l, n, l->racc[i], acc_dtype(n));
    }
    l->bad_row = 1;
    return 0;
}

static IrRef value(Lower *l, uint32_t u, const ExprId *idx)
{
    const Node *n = &l->g->nodes[u];
    if (u && u == l->reuse) return ir_load(l->k, 0, linear_index(l, n->ndim, n->shape, idx)); /* stored there before */
    for (int j = 0; j < l->ngroup; j++) /* a node of the group: its value, at its own element only */
        if (l->group[j] == u) {
            if (j < l->gdone && linear_index(l, n->ndim, n->shape, idx) == l->glin) return l->gval[j];
            l->self_read = 1;
            return 0;
        }
    if (!l->s->materialised[u] && l->s->fused && l->s->fused[u]) return row_value(l, u, idx);
    if (!l->s->materialised[u]) return compute(l, u, idx);
    int b = buffer_of(l, u);
    return b < 0 ? 0 : ir_load(l->k, b, linear_index(l, n->ndim, n->shape, idx));
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
    return body && ir_store(l->k, body, 0, linear_index(l, n->ndim, n->shape, idx), compute(l, v, idx)) ? 0 : -1;
}

static void find_fused(Lower *l, uint32_t v, uint8_t *seen);

/* Whether v's kernel would be lower_pointwise's: a pointwise op or a view
 * (not gather or scatter_add), no dot and no reduction fused into it. */
static int plain(const Graph *g, const Schedule *s, uint32_t v)
{
    const Node *n = &g->nodes[v];
    OpClass c = kn_opinfo[n->op].cls;
    if (c == OC_REDUCE || c == OC_DOT || c == OC_INDEX || (s->dot && s->dot[v])) return 0;
    for (int d = 0; d < n->ndim; d++)
        if (DIM_IS_SYM(n->shape[d])) return 0;
    return 1;
}

int lower_group(kn_ctx *ctx, const Graph *g, const Schedule *s, const uint32_t *vs, int nv, ExprTable *ex, Arena *a,
                Kernel *k)
{
    const Node *n = &g->nodes[vs[0]];
    if (nv < 1 || nv > LOWER_GROUP_MAX) return LOWER_NOGROUP;
    for (int i = 0; i < nv; i++) {
        const Node *m = &g->nodes[vs[i]];
        if (!plain(g, s, vs[i]) || m->ndim != n->ndim || memcmp(m->shape, n->shape, n->ndim * sizeof *n->shape))
            return LOWER_NOGROUP;
    }
    Lower l;
    memset(&l, 0, sizeof l);
    l.ctx = ctx, l.g = g, l.s = s, l.k = k, l.ex = ex;
    uint8_t *seen = kn_alloc(ctx, g->n);
    if (!seen) return kn_errs(ctx, KN_ENOMEM, "out of memory lowering");
    for (int i = 0; i < nv && !l.nr; i++) { /* a row reduction fused into a node: not a pointwise kernel */
        memset(seen, 0, g->n);
        if (s->fused) find_fused(&l, vs[i], seen);
    }
    kn_dealloc(ctx, seen, g->n);
    if (l.nr) return LOWER_NOGROUP;
    char name[32];
    snprintf(name, sizeof name, "k%" PRIu32 "_%s_%d", vs[0], kn_opinfo[n->op].name, nv);
    ir_init(k, a, ex, name);
    l.group = vs, l.ngroup = nv;
    int ok = 1;
    for (int i = 0; i < nv && ok; i++) {
        const Node *m = &g->nodes[vs[i]];
        ok = ir_buf(k, (kn_dtype)m->dtype, BUF_OUT, cst(&l, tensor_numel(m->ndim, m->shape)), vs[i]) == i;
    }
    ExprId idx[KN_MAX_DIMS];
    IrBlock top = {0, 0}, *body = ok ? loops(&l, &top, n->ndim, n->shape, NULL, idx) : NULL;
    if (body) l.glin = linear_index(&l, n->ndim, n->shape, idx);
    for (ok = body != NULL; l.gdone < nv && ok; l.gdone++) {
        l.gval[l.gdone] = compute(&l, vs[l.gdone], idx);
        ok = l.gval[l.gdone] && ir_store(l.k, body, l.gdone, l.glin, l.gval[l.gdone]);
    }
    if (l.self_read) return LOWER_NOGROUP;
    return ok ? 0 : kn_errs(ctx, KN_ENOMEM, "out of memory lowering %s", name);
}

/* scatter_add: the output is a copy of x, then src[i] is added at i with
 * i[dim] replaced by index[i], for every position i of the index in order
 * (the interpreter's order, so floats round alike). Two loop nests; the
 * second's accumulating store has a data-dependent offset, so the passes
 * keep every loop around it serial but for a vector loop over a dim the
 * offset does not depend on (an embedding's row). */
static int lower_scatter(Lower *l, uint32_t v)
{
    const Node *n = &l->g->nodes[v], *ind = &l->g->nodes[n->src[1]];
    int dim = (int)n->p.i[0], nd = n->ndim;
    ExprId idx[KN_MAX_DIMS], oi[KN_MAX_DIMS];
    IrBlock top = {0, 0}, *body = loops(l, &top, nd, n->shape, NULL, idx);
    if (!body || !ir_store(l->k, body, 0, linear_index(l, nd, n->shape, idx), value(l, n->src[0], idx))) return -1;
    if (!(body = loops(l, &top, nd, ind->shape, NULL, idx))) return -1;
    memcpy(oi, idx, sizeof oi);
    oi[dim] = cst(l, 0);
    IrRef off = index_offset(l, value(l, n->src[1], idx), nd, n->shape, dim), src = value(l, n->src[2], idx);
    return off && src && ir_store_at(l->k, body, 0, linear_index(l, nd, n->shape, oi), off, src, 1) ? 0 : -1;
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
    return ir_store(l->k, outer, 0, linear_index(l, n->ndim, n->shape, oidx), acc_out(l, n, acc, adt)) ? 0 : -1;
}

/* dot: (..., M, K) x (..., K, N): loops over (..., M, N), a sum over K;
 * the store is the dot's value, or that of node v, the kernel's node, when
 * the dot is fused into v's kernel as its epilogue. */
static int lower_dot(Lower *l, uint32_t d, uint32_t v)
{
    const Node *n = &l->g->nodes[d], *a = &l->g->nodes[n->src[0]];
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
    if (adt != n->dtype) { /* f16 and bf16: each product in f32, exact, as the interpreter's (in double) */
        x = ir_op(l->k, OP_CAST, adt, x, 0, 0);
        y = ir_op(l->k, OP_CAST, adt, y, 0, 0);
    }
    IrRef prod = ir_op(l->k, OP_MUL, adt, x, y, 0);
    IrBlock body = {kl, 0};
    if (!ir_update(l->k, &body, acc, prod)) return -1;
    if (v == d) return ir_store(l->k, outer, 0, linear_index(l, nd, n->shape, idx), acc_out(l, n, acc, adt)) ? 0 : -1;
    l->rnode[0] = d, l->racc[0] = acc, l->nr = 1; /* read at its own element only */
    memcpy(l->row, idx, sizeof l->row);
    return ir_store(l->k, outer, 0, linear_index(l, nd, n->shape, idx), compute(l, v, idx)) ? 0 : -1;
}

/* ---- row kernels: reductions fused into their reader ----
 *
 *     for each row (the dims no reduction reduces)
 *       acc r1; for the row: r1 op= r1's input      each fused reduction, in order
 *       acc r2; for the row: r2 op= ... r1 ...
 *       for the row: out = ... r1 ... r2 ...        or the kernel's own reduction
 *
 * The scheduler guarantees each fused reduction is read only at the row's
 * own position, and that all reduce the same trailing dims of X, the shape
 * the kernel iterates. Dims of size 1 get no loop: their index is 0. In the
 * last loop, a float division by a value of the row alone (softmax's sum)
 * is a multiplication by its reciprocal, computed once per row: within an
 * ulp or two of the division (as PyTorch's softmax), and the divisor is an
 * accumulation, rounded differently from the interpreter's anyway. A dim of
 * size 0 is no unit: it gets a loop, which runs no pass. */

/* The fused reductions node v's kernel computes, in id (topological) order. */
static void find_fused(Lower *l, uint32_t v, uint8_t *seen)
{
    const Node *n = &l->g->nodes[v];
    for (int i = 0; i < n->nsrc; i++) {
        uint32_t u = n->src[i];
        if (l->s->materialised[u] || seen[u]) continue;
        seen[u] = 1;
        find_fused(l, u, seen);
        if (l->s->fused[u] && kn_opinfo[l->g->nodes[u].op].cls == OC_REDUCE && l->nr < SCHED_MAX_ROW)
            l->rnode[l->nr++] = u;
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Loops over the dims of x (nd) in mask, nested in blk; their vars into idx. */
static IrBlock *row_loops(Lower *l, IrBlock *blk, int nd, const Dim *x, uint32_t mask, ExprId *idx)
{
    uint8_t skip[KN_MAX_DIMS];
    for (int d = 0; d < nd; d++) skip[d] = !(mask >> d & 1);
    return loops(l, blk, nd, x, skip, idx);
}

static int expensive(Op op)
{
    return (op >= OP_EXP && op <= OP_ERF) || op == OP_POW || op == OP_DIV || op == OP_RAND;
}

/* Whether reduction input u may be kept in the output buffer of pointwise
 * kernel v (then its values are stored as the reduction reads them and
 * loaded back, not computed again): u is unmaterialised, costs an
 * expensive op, has the output's dtype, and v reaches it only through
 * pointwise ops of the same shape, so at the output's own index. */
static int reusable(Lower *l, uint32_t v, uint32_t u, uint8_t *seen)
{
    const Node *n = &l->g->nodes[v], *un = &l->g->nodes[u];
    int found = 0, cost = 0;
    if (l->s->materialised[u] || un->dtype != n->dtype || kn_opinfo[n->op].cls == OC_REDUCE) return 0;
    /* depth first from v: seen 1 = reached at the full index, 2 = elsewhere */
    uint32_t stack[256];
    int depth = 0;
    stack[depth++] = v;
    memset(seen, 0, l->g->n);
    while (depth) {
        uint32_t w = stack[--depth];
        const Node *x = &l->g->nodes[w];
        int full = w == v || seen[w] == 1;
        int pw = kn_opinfo[x->op].cls != OC_MOVE && x->ndim == n->ndim &&
                 !memcmp(x->shape, n->shape, n->ndim * sizeof(Dim));
        if (w == u) {
            if (!full) return 0;
            found = 1;
            continue;
        }
        for (int i = 0; i < x->nsrc; i++) {
            uint32_t c = x->src[i];
            if (l->s->materialised[c] || l->s->fused[c]) continue;
            uint8_t st = full && pw && x->op != OP_IOTA && x->op != OP_RAND ? 1 : 2; /* rand's 0-d sources */
            if (seen[c] == st || seen[c] == 2) continue;
            if (seen[c] == 1 && c == u) return 0; /* reached both ways */
            if (seen[c] == 1) st = 2;
            seen[c] = st;
            if (depth == 256) return 0;
            stack[depth++] = c;
        }
    }
    /* its own subtree holds an expensive op */
    depth = 0;
    stack[depth++] = u;
    while (depth && !cost) {
        const Node *x = &l->g->nodes[stack[--depth]];
        cost = expensive((Op)x->op);
        for (int i = 0; i < x->nsrc && depth < 256; i++)
            if (!l->s->materialised[x->src[i]] && !l->s->fused[x->src[i]]) stack[depth++] = x->src[i];
    }
    return found && cost;
}

/* acc over the row of reduction node r (input at the full index), into
 * blk; keep: its input is also stored in the output buffer, by a loop
 * before the reduction's, which loads it back. */
static int row_reduce(Lower *l, IrBlock *outer, uint32_t r, int nd, const Dim *x, uint32_t red, int *acc, int keep)
{
    const Node *n = &l->g->nodes[r], *in = &l->g->nodes[n->src[0]];
    ExprId idx[KN_MAX_DIMS];
    kn_dtype adt = acc_dtype(n);
    int nb = l->nblocks;
    memcpy(idx, l->row, sizeof idx);
    *acc = ir_acc(l->k, outer, (Op)n->op, adt);
    IrBlock *inner = *acc < 0 ? NULL : row_loops(l, outer, nd, x, red, idx);
    if (!inner) return -1;
    IrRef v = value(l, n->src[0], idx);
    if (keep && v) {
        /* stored by a loop of its own, then reduced as loaded back (the row is in L1): alone, the store
         * loop vectorises plainly, where beside the lane accumulators of a reduction gcc reloaded exp's
         * constants every group (softmax 4096x1024, one thread: 0.55 -> 0.51 ns/element) */
        if (!ir_store(l->k, inner, 0, linear_index(l, nd, x, idx), v)) return -1;
        memcpy(idx, l->row, sizeof idx);
        l->nblocks = nb;
        inner = row_loops(l, outer, nd, x, red, idx);
        v = inner ? ir_load(l->k, 0, linear_index(l, nd, x, idx)) : 0;
    }
    if (v && in->dtype != adt) v = ir_op(l->k, OP_CAST, adt, v, 0, 0);
    IrRef u = v ? ir_update(l->k, inner, *acc, v) : 0;
    l->nblocks = nb; /* the row's loops are done with */
    return u ? 0 : -1;
}

static int lower_row(Lower *l, uint32_t v)
{
    const Node *n = &l->g->nodes[v];
    int is_red = kn_opinfo[n->op].cls == OC_REDUCE;
    const Node *xn = is_red ? &l->g->nodes[n->src[0]] : n;
    int nd = xn->ndim;
    const Dim *x = xn->shape;
    const Node *r0 = &l->g->nodes[l->rnode[0]];
    uint32_t red = 0, kept = 0;
    for (int d = 0; d < nd; d++) {
        if (x[d] != 1 && r0->p.i[d]) red |= 1u << d;
        else if (x[d] != 1) kept |= 1u << d;
        l->row[d] = cst(l, 0);
    }
    IrBlock top = {0, 0}, *outer = row_loops(l, &top, nd, x, kept, l->row);
    if (!outer) return -1;
    /* the last reduction whose input the output could hold (softmax: exp);
     * a reduction after it whose input reaches that value only at the full
     * index loads it back too (softmax's backward: sum(g * exp) after the sum
     * of exp), as the last loop does: the whole row is stored by then */
    int keep = -1, rc = 0;
    uint32_t kv = 0;
    uint8_t *seen = kn_alloc(l->ctx, l->g->n);
    if (!seen) return -1;
    for (int i = l->nr - 1; i >= 0 && keep < 0; i--)
        if (reusable(l, v, l->g->nodes[l->rnode[i]].src[0], seen)) keep = i;
    if (keep >= 0) kv = l->g->nodes[l->rnode[keep]].src[0];
    for (int i = 0; i < l->nr && !rc; i++) {
        l->reuse = keep >= 0 && i > keep && reusable(l, l->g->nodes[l->rnode[i]].src[0], kv, seen) ? kv : 0;
        rc = row_reduce(l, outer, l->rnode[i], nd, x, red, &l->racc[i], i == keep);
    }
    kn_dealloc(l->ctx, seen, l->g->n);
    if (rc) return -1;
    l->reuse = kv;
    if (is_red) { /* the kernel's own reduction over the same row */
        int acc;
        if (row_reduce(l, outer, v, nd, x, red, &acc, 0)) return -1;
        return ir_store(l->k, outer, 0, linear_index(l, n->ndim, n->shape, l->row), acc_out(l, n, acc, acc_dtype(n))) ? 0 : -1;
    }
    ExprId idx[KN_MAX_DIMS];
    memcpy(idx, l->row, sizeof idx);
    IrBlock *inner = row_loops(l, outer, nd, x, red, idx);
    l->row_final = 1;
    return inner && ir_store(l->k, inner, 0, linear_index(l, nd, x, idx), compute(l, v, idx)) ? 0 : -1;
}

/* The epilogue of the dot fused into node v's kernel, for a target's dot
 * template: a tile kernel over (batch, M, N) (the batch dims collapsed into
 * one loop) that reads the dot's value from its own output buffer, where
 * the template has put it, and stores v's. */
int lower_epilogue(kn_ctx *ctx, const Graph *g, const Schedule *s, uint32_t v, ExprTable *ex, Arena *a, Kernel *k)
{
    const Node *n = &g->nodes[v];
    uint32_t d = s->dot ? s->dot[v] : 0;
    int nd = n->ndim;
    if (!d || nd < 2 || g->nodes[d].dtype != n->dtype) return kn_errs(ctx, KN_EINVAL, "lower: no dot epilogue in %%%" PRIu32, v);
    char name[32];
    snprintf(name, sizeof name, "e%" PRIu32 "_%s", v, kn_opinfo[n->op].name);
    ir_init(k, a, ex, name);
    Lower l;
    memset(&l, 0, sizeof l);
    l.ctx = ctx, l.g = g, l.s = s, l.k = k, l.ex = ex;
    l.reuse = d;
    ExprId idx[KN_MAX_DIMS];
    IrRef loop[3];
    IrBlock blk[4] = {{0, 0}};
    int64_t batch = tensor_numel(nd - 2, n->shape);
    int ok = ir_buf(k, (kn_dtype)n->dtype, BUF_OUT, cst(&l, tensor_numel(nd, n->shape)), v) == 0;
    for (int i = 0; i < 3 && ok; i++) {
        loop[i] = ir_loop(k, &blk[i], cst(&l, i == 0 ? batch : n->shape[nd - 3 + i]), LOOP_SERIAL, 1);
        blk[i + 1] = (IrBlock){loop[i], 0};
        ok = loop[i] != 0;
    }
    if (ok) {
        ExprId t = expr_sym(ex, 0);
        int64_t stride = 1;
        for (int i = nd - 3; i >= 0; i--) { /* the batch index t, unravelled */
            idx[i] = expr_mod(ex, expr_floordiv(ex, t, cst(&l, stride)), cst(&l, n->shape[i]));
            stride *= n->shape[i];
        }
        idx[nd - 2] = expr_sym(ex, 1), idx[nd - 1] = expr_sym(ex, 2);
        ok = ir_store(k, &blk[3], 0, linear_index(&l, nd, n->shape, idx), compute(&l, v, idx)) != 0;
    }
    k->tile = 1;
    if (l.bad_row) return kn_errs(ctx, KN_EINVAL, "lower: %s reads its dot away from its element", name);
    return ok ? 0 : kn_errs(ctx, KN_ENOMEM, "out of memory lowering %s", name);
}

int lower_kernel(kn_ctx *ctx, const Graph *g, const Schedule *s, uint32_t v, ExprTable *ex, Arena *a, Kernel *k)
{
    const Node *n = &g->nodes[v];
    if (kn_opinfo[n->op].cls == OC_INDEX && n->ndim == 0) return LOWER_INTERP; /* a 0-d index: the interpreter's */
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
    uint8_t *seen = s->fused && c != OC_DOT ? kn_alloc(ctx, g->n) : NULL;
    if (seen) {
        memset(seen, 0, g->n);
        find_fused(&l, v, seen);
        kn_dealloc(ctx, seen, g->n);
        qsort(l.rnode, (size_t)l.nr, sizeof *l.rnode, cmp_u32);
    } else if (s->fused && c != OC_DOT) {
        return kn_errs(ctx, KN_ENOMEM, "out of memory lowering %s", name);
    }
    uint32_t d = s->dot ? s->dot[v] : 0;
    int r = d ? lower_dot(&l, d, v) : l.nr ? lower_row(&l, v) : c == OC_REDUCE ? lower_reduce(&l, v)
          : c == OC_DOT ? lower_dot(&l, v, v) : n->op == OP_SCATTER_ADD ? lower_scatter(&l, v) : lower_pointwise(&l, v);
    if (l.bad_row) return kn_errs(ctx, KN_EINVAL, "lower: %s reads a fused reduction away from its row", name);
    return r ? kn_errs(ctx, KN_ENOMEM, "out of memory lowering %s", name) : 0;
}
