/*
 * loopopt_tile.c — pass 5 of the loop passes (loopopt_int.h): tiling of the nests whose accesses
 * stride through memory (a sum over a tensor's outer dim, a transposing copy).
 */
#include <string.h>

#include "loopopt_int.h"

/* ---- pass 5: tile ----
 * Two loop nests whose accesses stride through memory become tiles that
 * the marks then run well (T = TILE, which must divide the extents tiled):
 *
 * 1. a sum over the outer dim of a row-major tensor (a bias's gradient:
 *    the sum of each column), stored as it is:
 *
 *        for o in Eo                   for o in Eo/T
 *          acc a sum                     for z in T
 *          for i in Ei           =>        b[e(o*T+z)] = 0
 *            a += v(o, i)                for i in Ei
 *          b[e(o)] = a                     for w in T
 *                                            b[e(o*T+w)] = add(b[e(o*T+w)], v(o*T+w, i))
 *
 *    b holds T columns' sums, each added in the accumulator's order from
 *    the same 0 (the same bits: b's dtype is the accumulator's, f32 or
 *    f64), and the loop over w reads T adjacent elements of a row: a vector
 *    loop, where the accumulator waited on each of its additions and read
 *    one element per row. It applies when e is unit-stride in o, v does not
 *    read b, v's loads are unit-stride or invariant in o (so the w loop is
 *    a vector loop), and one of them is strided in i (a row reduction,
 *    unit-stride in i, is better as it is).
 *
 * 2. a transposing copy, whose stores are unit-stride in i and a load
 *    unit-stride in o and strided by T or more in i:
 *
 *        for o in Eo                   for o in Eo/T
 *          for i in Ei           =>      for i in Ei/T
 *            stores(o, i)                  for z in T
 *                                            for w in T
 *                                              stores(o*T+z, i*T+w)
 *
 *    so the T lines a tile loads are all used while in L1, where a row of
 *    the untiled loop touched Ei lines. The iterations run in another
 *    order, so each store's index must be one-to-one and no store may read
 *    what another iteration writes: the stores write buffers the nest does
 *    not load.
 */

/* e with s_v replaced by by. */
ExprId opt_expr_subst(ExprTable *t, ExprId e, int v, ExprId by)
{
    const ExprNode *x = expr_node(t, e);
    if (!x || !expr_has_sym(t, e, v)) return e;
    if (x->kind == EX_SYM) return by;
    int kind = x->kind, n = x->n;
    int64_t c = x->c;
    ExprId a[EXPR_MAX_ARGS], r;
    memcpy(a, x->args, (size_t)n * sizeof *a); /* x may move as the table grows */
    for (int i = 0; i < n; i++)
        if (!(a[i] = opt_expr_subst(t, a[i], v, by))) return 0;
    switch (kind) {
    case EX_ADD:
    case EX_MUL:
        r = expr_const(t, c);
        for (int i = 0; i < n && r; i++) r = kind == EX_ADD ? expr_add(t, r, a[i]) : expr_mul(t, r, a[i]);
        return r;
    case EX_FLOORDIV: return expr_floordiv(t, a[0], a[1]);
    case EX_MOD: return expr_mod(t, a[0], a[1]);
    case EX_MAX: return expr_max(t, a[0], a[1]);
    case EX_MIN: return expr_min(t, a[0], a[1]);
    default: return 0;
    }
}

/* s_o*T + s_z for s_o (and s_i*T + s_w for s_i, when tile_i >= 0) */
ExprId opt_tile_fx(Opt *o, ExprId e)
{
    ExprTable *t = o->ex;
    ExprId by = expr_add(t, expr_mul(t, expr_sym(t, o->tile_o), expr_const(t, o->tile_t)), expr_sym(t, o->tile_z));
    e = by ? opt_expr_subst(t, e, o->tile_o, by) : 0;
    if (!e || o->tile_i < 0) return e;
    by = expr_add(t, expr_mul(t, expr_sym(t, o->tile_i), expr_const(t, o->tile_t)), expr_sym(t, o->tile_w));
    return by ? opt_expr_subst(t, e, o->tile_i, by) : 0;
}

/* The coefficient of s_v in e when e is affine in it: 1, else 0. */
static int coef_of(Opt *o, ExprId e, int v, int64_t *c)
{
    ExprId rest;
    return opt_affine(o->ex, e, v, c, &rest);
}

/* What the loads below value r are, for the tile rules: any load not
 * affine in s_o or s_i, or with a data-dependent offset, sets *odd; a load
 * of buffer avoid sets *odd; *lanes stays 1 while every load is unit-stride
 * or invariant in s_o; *strided is set by a load unit-stride in s_o and
 * strided by T or more in s_i. */
typedef struct {
    int odd, lanes, strided, accval;
} TileFacts;

static void tile_facts(Opt *o, IrRef r, int avoid, uint8_t *seen, TileFacts *f)
{
    const IrNode *x = &o->k->nodes[r];
    int64_t co, ci;
    if (seen[r]) return;
    seen[r] = 1;
    if (x->kind == IR_ACCVAL) f->accval = 1;
    if (x->kind == IR_LOAD) {
        if (x->a || x->buf == avoid || !coef_of(o, x->index, o->tile_o, &co) || !coef_of(o, x->index, o->tile_i, &ci))
            f->odd = 1;
        else {
            if (co != 0 && co != 1) f->lanes = 0;
            if (co == 1 && (ci >= TILE || ci <= -TILE)) f->strided = 1;
        }
    }
    if (x->kind == IR_CHECK || (x->kind == IR_LOAD && x->a)) tile_facts(o, x->a, avoid, seen, f);
    if (x->kind == IR_OP || x->kind == IR_RAND) /* rand's key and counter: loads too */
        for (int i = 0; i < ir_nsrc(x); i++) tile_facts(o, i == 0 ? x->a : i == 1 ? x->b : x->c, avoid, seen, f);
}

/* The facts of value r in a fresh walk; 0, or KN_ENOMEM. */
static int value_facts(Opt *o, IrRef r, int avoid, TileFacts *f)
{
    uint8_t *seen = kn_alloc(o->ctx, o->k->n);
    if (!seen) return KN_ENOMEM;
    memset(seen, 0, o->k->n);
    tile_facts(o, r, avoid, seen, f);
    kn_dealloc(o->ctx, seen, o->k->n);
    return 0;
}

/* Value r rebuilt with o->fx applied to its indices (rw_value's memo for
 * one call): the new value, or 0 out of memory. */
IrRef opt_rebuild(Opt *o, IrRef r, IndexFn fx)
{
    Kernel *k = o->k;
    size_t bytes = (size_t)k->n * (sizeof *o->memo + sizeof *o->stamp);
    void *mem = kn_alloc(o->ctx, bytes);
    if (!mem) return 0;
    memset(mem, 0, bytes);
    o->memo = mem, o->stamp = (uint32_t *)(o->memo + k->n), o->n0 = k->n, o->gen = 1, o->fx = fx;
    IrRef y = opt_rw_value(o, r);
    kn_dealloc(o->ctx, mem, bytes);
    o->memo = NULL, o->stamp = NULL, o->n0 = 0;
    return o->oom ? 0 : y;
}

int opt_const_extent(Opt *o, IrRef l, int64_t *e) { return expr_as_const(o->ex, o->k->nodes[l].index, e); }

/* Rule 1 on loop l: 1 done, 0 not, -1 out of memory. */
static int tile_colsum(Opt *o, IrRef l)
{
    Kernel *k = o->k;
    IrRef acc = k->nodes[l].child, in = acc ? k->nodes[acc].next : 0, st = in ? k->nodes[in].next : 0;
    IrRef up = in ? k->nodes[in].child : 0;
    int64_t eo, ei, co;
    if (!acc || !in || !st || k->nodes[st].next || !up || k->nodes[up].next) return 0;
    IrNode A = k->nodes[acc], I = k->nodes[in], S = k->nodes[st], U = k->nodes[up];
    if (A.kind != IR_ACC || A.op != OP_SUM || (A.dtype != KN_F32 && A.dtype != KN_F64) || I.kind != IR_LOOP ||
        I.dtype != LOOP_SERIAL || U.kind != IR_UPDATE || U.var != A.var || S.kind != IR_STORE || S.op || S.b ||
        k->bufs[S.buf].dtype != A.dtype || k->nodes[S.a].kind != IR_ACCVAL || k->nodes[S.a].var != A.var)
        return 0;
    if (!opt_const_extent(o, l, &eo) || !opt_const_extent(o, in, &ei) || eo % TILE || eo < 2 * TILE || ei < 2 ||
        !coef_of(o, S.index, I.var, &co) || co != 0 || !coef_of(o, S.index, k->nodes[l].var, &co) || co != 1)
        return 0;
    o->tile_o = k->nodes[l].var, o->tile_i = I.var, o->tile_t = TILE;
    TileFacts f = {0, 1, 0, 0};
    if (value_facts(o, U.a, S.buf, &f)) return -1;
    if (f.odd || !f.lanes || !f.strided || f.accval) return 0;
    /* the zeroing loop, first in l's body */
    IrBlock top = {l, 0};
    IrRef z = ir_loop(k, &top, expr_const(o->ex, TILE), LOOP_SERIAL, 1);
    if (!z) return -1;
    o->tile_z = k->nodes[z].var, o->tile_i = -1;
    ExprId ez = opt_tile_fx(o, S.index);
    IrBlock zb = {z, 0};
    if (!ez || !ir_store(k, &zb, S.buf, ez, ir_const(k, (kn_dtype)A.dtype, 0))) return -1;
    if (ei > CASCADE_RUN) { /* rows in cascaded blocks */
        if (opt_colsum_cascade(o, l, z, &I, &S, &U, (kn_dtype)A.dtype, ei)) return -1;
        k->nodes[l].index = expr_const(o->ex, eo / TILE);
        return 1;
    }
    /* the sum loop, the only statement of i's body */
    IrBlock ib = {in, 0};
    IrRef w = ir_loop(k, &ib, expr_const(o->ex, TILE), LOOP_SERIAL, 1);
    if (!w) return -1;
    o->tile_z = k->nodes[w].var;
    ExprId ew = opt_tile_fx(o, S.index);
    IrRef v = ew ? opt_rebuild(o, U.a, opt_tile_fx) : 0;
    IrRef sum = v ? ir_op(k, OP_ADD, (kn_dtype)A.dtype, ir_load(k, S.buf, ew), v, 0) : 0;
    IrBlock wb = {w, 0};
    IrRef ns = sum ? ir_store(k, &wb, S.buf, ew, sum) : 0;
    if (!ns) return -1;
    k->nodes[ns].next = 0;
    k->nodes[w].next = 0; /* the update drops out */
    k->nodes[z].next = in; /* the accumulator and the store drop out */
    k->nodes[in].next = 0;
    k->nodes[l].index = expr_const(o->ex, eo / TILE);
    return 1;
}

/* Rule 2 on loop l: 1 done, 0 not, -1 out of memory. */
static int tile_transpose(Opt *o, IrRef l)
{
    Kernel *k = o->k;
    IrRef in = k->nodes[l].child;
    int64_t eo, ei, c;
    if (!in || k->nodes[in].kind != IR_LOOP || k->nodes[in].next || k->nodes[in].dtype != LOOP_SERIAL) return 0;
    if (!opt_const_extent(o, l, &eo) || !opt_const_extent(o, in, &ei) || eo % TILE || ei % TILE || eo < 2 * TILE ||
        ei < 2 * TILE)
        return 0;
    o->tile_o = k->nodes[l].var, o->tile_i = k->nodes[in].var, o->tile_t = TILE;
    uint8_t *stored = kn_alloc(o->ctx, (size_t)k->nbufs + 1);
    if (!stored) return -1;
    memset(stored, 0, (size_t)k->nbufs + 1);
    int ok = 1, strided = 0;
    for (IrRef s = k->nodes[in].child; s && ok; s = k->nodes[s].next) {
        const IrNode *x = &k->nodes[s];
        int64_t co;
        ok = x->kind == IR_STORE && !x->op && !x->b && !stored[x->buf] && coef_of(o, x->index, o->tile_i, &c) && c == 1 &&
             coef_of(o, x->index, o->tile_o, &co) && (co >= ei || co <= -ei); /* one element per iteration */
        if (ok) stored[x->buf] = 1;
    }
    for (IrRef s = k->nodes[in].child; s && ok; s = k->nodes[s].next) {
        TileFacts f = {0, 1, 0, 0};
        for (int b = 0; b < k->nbufs && !f.odd; b++)
            if (stored[b] && value_facts(o, k->nodes[s].a, b, &f)) ok = -1;
        if (ok > 0) ok = !f.odd && !f.accval, strided |= f.strided;
    }
    kn_dealloc(o->ctx, stored, (size_t)k->nbufs + 1);
    if (ok <= 0 || !strided) return ok;
    IrRef body = k->nodes[in].child;
    IrBlock ib = {in, 0};
    IrRef z = ir_loop(k, &ib, expr_const(o->ex, TILE), LOOP_SERIAL, 1);
    IrBlock zb = {z, 0};
    IrRef w = z ? ir_loop(k, &zb, expr_const(o->ex, TILE), LOOP_SERIAL, 1) : 0;
    if (!w) return -1;
    k->nodes[z].next = 0, k->nodes[w].next = 0, k->nodes[w].child = body;
    o->tile_z = k->nodes[z].var, o->tile_w = k->nodes[w].var;
    if (opt_rewrite(o, w, opt_tile_fx)) return -1;
    k->nodes[l].index = expr_const(o->ex, eo / TILE);
    k->nodes[in].index = expr_const(o->ex, ei / TILE);
    return 1;
}

/* Both rules on every serial loop of the block from s, outermost first. */
int opt_tile_block(Opt *o, IrRef s)
{
    for (; s; s = o->k->nodes[s].next) {
        if (o->k->nodes[s].kind != IR_LOOP || o->k->nodes[s].dtype != LOOP_SERIAL) continue;
        int r = tile_colsum(o, s);
        if (!r) r = tile_transpose(o, s);
        if (r < 0) return KN_ENOMEM;
        if (!r && opt_tile_block(o, o->k->nodes[s].child)) return KN_ENOMEM;
    }
    return 0;
}
