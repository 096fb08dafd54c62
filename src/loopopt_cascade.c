/*
 * loopopt_cascade.c — pass 7 of the loop passes (loopopt_int.h): the cascade of long float sums,
 * which regroups an accumulator's additions into blocks and levels so that its rounding error
 * grows with the log of the count.
 */
#include <string.h>

#include "loopopt_int.h"

#define CASCADE_LANES 32                 /* a vector loop's accumulator lanes its blocks count on */
#define CASCADE_COVER ((int64_t)1 << 31) /* values the levels of a symbolic extent cover */
#define CASCADE_ACCS 128                 /* accumulators past which a kernel gains no more */

/* ---- pass 7: cascade ----
 * A float sum adds its values one after another, so its rounding error
 * grows with their count: 10^7 additions of 0.1 into an f32 end 0.3% off.
 * Where an accumulator would take more than a run of values in sequence,
 * the loop that feeds it becomes blocks, each summed into an accumulator of
 * its own that is added into one a level up, at most CASCADE_RUN to a
 * level (PyTorch's cascade sum), so the error grows with the log of the
 * count:
 *
 *     acc a0 f32 sum                       acc a0 f32 sum
 *     for s0 in 4000 vector(8)             for s1 in 7
 *       a0 += b1[s0]                 =>      acc a1 f32 sum
 *                                            for s0 in 512 vector(8)
 *                                              a1 += b1[s0+s1*512]
 *                                            a0 += a1
 *                                          acc a2 f32 sum
 *                                          for s0 in 416 vector(8)
 *                                            a2 += b1[s0+3584]
 *                                          a0 += a2
 *
 * A run is CASCADE_RUN values; in a vector loop, whose accumulators
 * targets give lanes, CASCADE_RUN*CASCADE_LANES: CASCADE_RUN a lane where
 * they are 32 (the C target on AVX-512; tcc's blocks add 64 at a time in 8
 * lanes of 8), 32 a lane on AVX2's 16, 64 on the 8 of SSE2, NEON and WASM
 * SIMD. Blocks of CASCADE_RUN*8 made a row sum in cache a third slower
 * (each block folds its lanes: 4 groups of 32 lanes to a fold on AVX-512).
 * A block is the iterations of a run (whole iterations, where each adds a
 * few values: a window's rows). More than a run of blocks take levels,
 * loops of at most CASCADE_RUN iterations, each with an accumulator added
 * into the one above: the extent of a level is CASCADE_RUN where the
 * blocks divide evenly, else the min of it and the blocks left; the
 * iterations past the last whole block run as before, into an accumulator
 * of their own. A loop whose iterations each add a long sum (a reduction
 * over dims that did not collapse into one loop) first gets an accumulator
 * per iteration, which is cascaded in turn. An extent of shape symbols
 * (a generic kernel) takes the levels that CASCADE_COVER values need.
 *
 * The values and the order of the iterations stay; only the additions
 * regroup, so the sum differs from the plain one by rounding: the one pass
 * that changes bits. f32 and f64 sums are cascaded (f16 and bf16 ones
 * accumulate in f32); integer sums are exact, and a max is not a sum. A
 * sum whose value is read while it accumulates stays as it is. It runs
 * after the marks, so it knows the vector loops; the blocks keep their
 * loop's kind, the levels are serial.
 */

/* Updates of accumulator acc that one run of statement s makes: a loop's
 * extent times its body's (capped at BIG); -1 when shape symbols decide. */
static int64_t cs_count(const Kernel *k, IrRef s, int acc)
{
    const IrNode *x = &k->nodes[s];
    int64_t sum = 0, e, w;
    int sym = 0;
    if (x->kind == IR_UPDATE) return x->var == acc;
    if (x->kind != IR_LOOP) return 0;
    for (IrRef c = x->child; c; c = k->nodes[c].next) {
        int64_t n = cs_count(k, c, acc);
        if (n < 0) sym = 1;
        else sum = opt_clamp_big(sum + n);
    }
    if (!sum && !sym) return 0;
    if (!expr_as_const(k->ex, x->index, &e)) return -1;
    if (sym) return e ? -1 : 0;
    return opt_mul_ok(e, sum, &w) ? w : BIG;
}

/* Whether value r, or one below it not seen yet, reads accumulator acc. */
static int cs_value_reads(const Kernel *k, IrRef r, int acc, uint8_t *seen)
{
    const IrNode *x = &k->nodes[r];
    if (seen[r]) return 0;
    seen[r] = 1;
    if (x->kind == IR_ACCVAL) return x->var == acc;
    for (int i = 0; i < ir_nsrc(x); i++)
        if (cs_value_reads(k, i == 0 ? x->a : i == 1 ? x->b : x->c, acc, seen)) return 1;
    return 0;
}

/* Whether statement s or one below it reads accumulator acc. */
static int cs_reads(const Kernel *k, IrRef s, int acc, uint8_t *seen)
{
    const IrNode *x = &k->nodes[s];
    if (x->kind == IR_LOOP) {
        for (IrRef c = x->child; c; c = k->nodes[c].next)
            if (cs_reads(k, c, acc, seen)) return 1;
        return 0;
    }
    if (x->kind == IR_STORE && x->b && cs_value_reads(k, x->b, acc, seen)) return 1;
    return (x->kind == IR_STORE || x->kind == IR_UPDATE) && cs_value_reads(k, x->a, acc, seen);
}

/* The updates of accumulator from in statement s and below update to instead. */
static void cs_rename(Kernel *k, IrRef s, int from, int to)
{
    IrNode *x = &k->nodes[s];
    if (x->kind == IR_UPDATE && x->var == from) x->var = to;
    for (IrRef c = x->kind == IR_LOOP ? x->child : 0; c; c = k->nodes[c].next) cs_rename(k, c, from, to);
}

/* Loops nested in statement s, itself included. */
static int cs_depth(const Kernel *k, IrRef s)
{
    int d = 0;
    if (k->nodes[s].kind != IR_LOOP) return 0;
    for (IrRef c = k->nodes[s].child; c; c = k->nodes[c].next) {
        int e = cs_depth(k, c);
        d = e > d ? e : d;
    }
    return d + 1;
}

/* A copy (cs_copy) starts: s_v becomes by in its indices, accumulator from
 * becomes to, and each accumulator it declares a new one; 0 or -1. */
static int cs_begin(Opt *o, int v, ExprId by, int from, int to)
{
    Kernel *k = o->k;
    size_t bytes = (size_t)k->n * (sizeof *o->memo + sizeof *o->stamp) + (size_t)k->naccs * sizeof *o->cs_map;
    void *mem = by ? kn_alloc(o->ctx, bytes) : NULL;
    if (!mem) return -1;
    memset(mem, 0, bytes);
    o->memo = mem, o->stamp = (uint32_t *)(o->memo + k->n), o->cs_map = (int *)(o->stamp + k->n);
    o->n0 = k->n, o->gen = 1, o->cs_nmap = k->naccs;
    for (int j = 0; j < k->naccs; j++) o->cs_map[j] = j == from ? to : -1;
    o->cs_v = v, o->cs_by = by;
    return 0;
}

static void cs_end(Opt *o)
{
    kn_dealloc(o->ctx, o->memo, (size_t)o->n0 * (sizeof *o->memo + sizeof *o->stamp) + (size_t)o->cs_nmap * sizeof *o->cs_map);
    o->memo = NULL, o->stamp = NULL, o->cs_map = NULL, o->n0 = 0, o->cs_nmap = 0;
}

static ExprId cs_fx(Opt *o, ExprId e) { return opt_expr_subst(o->ex, e, o->cs_v, o->cs_by); }

static int cs_acc_of(const Opt *o, int acc) { return acc >= 0 && acc < o->cs_nmap && o->cs_map[acc] >= 0 ? o->cs_map[acc] : acc; }

/* Value r in the copy. */
static IrRef cs_value(Opt *o, IrRef r)
{
    Kernel *k = o->k;
    if (r < o->n0 && o->stamp[r] == o->gen) return o->memo[r];
    IrNode x = k->nodes[r]; /* a copy: building moves the array */
    IrRef y = r, a = 0, b = 0, c = 0;
    switch (x.kind) {
    case IR_LOAD: y = ir_load_at(k, x.buf, cs_fx(o, x.index), x.a ? cs_value(o, x.a) : 0); break;
    case IR_CHECK: y = ir_check(k, cs_value(o, x.a), x.index); break;
    case IR_INDEX: y = ir_index(k, cs_fx(o, x.index)); break;
    case IR_RAND: y = ir_rand(k, cs_value(o, x.a), cs_value(o, x.b), cs_fx(o, x.index)); break;
    case IR_ACCVAL: y = cs_acc_of(o, x.var) == x.var ? r : ir_accval(k, cs_acc_of(o, x.var)); break;
    case IR_OP:
        a = x.a ? cs_value(o, x.a) : 0, b = x.b ? cs_value(o, x.b) : 0, c = x.c ? cs_value(o, x.c) : 0;
        y = ir_op(k, (Op)x.op, (kn_dtype)x.dtype, a, b, c);
        break;
    default: break; /* a constant */
    }
    if (!y) o->oom = 1, y = r;
    if (r < o->n0) o->memo[r] = y, o->stamp[r] = o->gen;
    return y;
}

/* Appends to block b the copies of the statements from s on (cs_begin);
 * loops bind the same vars. 0 or -1. */
static int cs_copy(Opt *o, IrBlock *b, IrRef s)
{
    Kernel *k = o->k;
    for (; s && !o->oom; s = k->nodes[s].next) {
        IrNode x = k->nodes[s];
        IrRef r = 0;
        if (x.kind == IR_LOOP) {
            ExprId e = cs_fx(o, x.index);
            if ((r = e ? ir_loop(k, b, e, (LoopKind)x.dtype, x.width) : 0)) {
                IrBlock in = {r, 0};
                k->nodes[r].var = x.var, k->nvars--;
                if (cs_copy(o, &in, x.child)) return -1;
            }
        } else if (x.kind == IR_ACC) {
            int a = ir_acc(k, b, (Op)x.op, (kn_dtype)x.dtype);
            if (a >= 0 && x.var >= 0 && x.var < o->cs_nmap) o->cs_map[x.var] = a;
            r = a >= 0;
        } else if (x.kind == IR_UPDATE) {
            r = ir_update(k, b, cs_acc_of(o, x.var), cs_value(o, x.a));
        } else if (x.kind == IR_STORE) {
            IrRef off = x.b ? cs_value(o, x.b) : 0, v = cs_value(o, x.a);
            ExprId e = cs_fx(o, x.index);
            r = e ? ir_store_at(k, b, x.buf, e, off, v, x.op == OP_SUM) : 0;
        }
        if (!r) o->oom = 1;
    }
    return o->oom ? -1 : 0;
}

/* Appends to block b a copy of the body of loop x, with s_v (x's var)
 * replaced by by and accumulator from by to, as the body of a loop of
 * extent e and kind kind: 0 or -1. */
static int cs_piece(Opt *o, IrBlock *b, const IrNode *x, ExprId e, LoopKind kind, ExprId by, int from, int to)
{
    Kernel *k = o->k;
    IrRef l = e ? ir_loop(k, b, e, kind, x->width) : 0;
    if (!l) return -1;
    k->nodes[l].var = x->var, k->nvars--;
    IrBlock in = {l, 0};
    if (cs_begin(o, x->var, by, from, to)) return -1;
    int err = cs_copy(o, &in, x->child);
    cs_end(o);
    return err;
}

static void cs_unlink(Kernel *k, IrRef parent, IrRef s)
{
    IrRef *at = parent ? &k->nodes[parent].child : &k->body;
    while (*at && *at != s) at = &k->nodes[*at].next;
    if (*at) *at = k->nodes[s].next;
}

/* The levels over the blocks of b iterations of a loop of extent E. */
typedef struct {
    int m, sym;               /* levels; E of shape symbols */
    int64_t nb, rem, top;     /* a constant E: whole blocks, iterations past them; RUN^(m-1) */
    ExprId enb;               /* whole blocks */
    ExprId done;              /* the block at the levels' vars, sum of q_j*RUN^j (as they are made) */
    IrBlock in[IR_MAX_NEST];  /* level j's body */
} Levels;

/* Plans the levels of extent E in blocks of b: 1, or 0 when E is at most b. */
static int cs_plan(Opt *o, ExprId E, int64_t b, Levels *lv)
{
    int64_t e;
    memset(lv, 0, sizeof *lv);
    lv->m = 1, lv->top = 1, lv->sym = !expr_as_const(o->ex, E, &e);
    if (!lv->sym && e <= b) return 0;
    if (lv->sym) /* levels for CASCADE_COVER values */
        for (int64_t c = b * CASCADE_RUN; c < CASCADE_COVER; c *= CASCADE_RUN) lv->m++, lv->top *= CASCADE_RUN;
    else
        for (lv->nb = e / b, lv->rem = e % b; lv->top * CASCADE_RUN < lv->nb && lv->top <= BIG / CASCADE_RUN;
             lv->top *= CASCADE_RUN)
            lv->m++;
    lv->enb = lv->sym ? expr_floordiv(o->ex, E, expr_const(o->ex, b)) : expr_const(o->ex, lv->nb);
    lv->done = expr_const(o->ex, 0);
    return 1;
}

/* Level j's loop (levels m-1 first), placed in cur; its body is lv->in[j]. 0 or -1. */
static int cs_level(Opt *o, Levels *lv, IrBlock *cur, int j)
{
    ExprTable *t = o->ex;
    int64_t top = 1;
    for (int i = 0; i < j; i++) top *= CASCADE_RUN;
    ExprId left = expr_sub(t, lv->enb, lv->done), ext = expr_const(t, CASCADE_RUN);
    ExprId ceil = expr_floordiv(t, expr_add(t, left, expr_const(t, top - 1)), expr_const(t, top));
    if (j == lv->m - 1) ext = ceil;
    else if (lv->sym || lv->nb % (top * CASCADE_RUN)) ext = expr_min(t, ext, ceil);
    IrRef l = ext ? ir_loop(o->k, cur, ext, LOOP_SERIAL, 1) : 0;
    if (!l) return -1;
    lv->done = expr_add(t, lv->done, expr_mul(t, expr_sym(t, o->k->nodes[l].var), expr_const(t, top)));
    lv->in[j] = (IrBlock){l, 0};
    return lv->done ? 0 : -1;
}

/* Loop l (in the block of loop parent, under depth loops), whose updates
 * of accumulator acc of dtype dt are all that reach it, as blocks of b
 * iterations under levels, then the rest (above); 0 or -1. */
static int cs_split(Opt *o, IrRef parent, IrRef l, int acc, kn_dtype dt, int64_t b, int depth)
{
    Kernel *k = o->k;
    ExprTable *t = o->ex;
    IrNode x = k->nodes[l];
    Levels lv;
    int tacc[IR_MAX_NEST];
    if (!cs_plan(o, x.index, b, &lv)) return 0;
    if (depth + lv.m + cs_depth(k, l) > IR_MAX_NEST || k->naccs + lv.m >= CASCADE_ACCS) return 0;
    IrBlock at = {parent, l}, *cur = &at;
    for (int j = lv.m - 1; j >= 0; j--, cur = &lv.in[j + 1])
        if (cs_level(o, &lv, cur, j) || (tacc[j] = ir_acc(k, &lv.in[j], OP_SUM, dt)) < 0) return -1;
    ExprId by = expr_add(t, expr_mul(t, lv.done, expr_const(t, b)), expr_sym(t, x.var));
    if (cs_piece(o, &lv.in[0], &x, expr_const(t, b), (LoopKind)x.dtype, by, acc, tacc[0])) return -1;
    for (int j = 0; j < lv.m; j++) {
        IrRef v = ir_accval(k, tacc[j]);
        if (!v || !ir_update(k, &lv.in[j], j + 1 < lv.m ? tacc[j + 1] : acc, v)) return -1;
    }
    if (lv.sym || lv.rem) { /* the rest: a short vector loop runs serially */
        LoopKind kind = x.dtype == LOOP_VECTOR && !lv.sym && lv.rem < (int64_t)x.width ? LOOP_SERIAL : (LoopKind)x.dtype;
        ExprId erem = lv.sym ? expr_mod(t, x.index, expr_const(t, b)) : expr_const(t, lv.rem);
        int r = ir_acc(k, &at, OP_SUM, dt);
        by = expr_add(t, expr_mul(t, lv.enb, expr_const(t, b)), expr_sym(t, x.var));
        if (r < 0 || cs_piece(o, &at, &x, erem, kind, by, acc, r)) return -1;
        IrRef v = ir_accval(k, r);
        if (!v || !ir_update(k, &at, acc, v)) return -1;
    }
    cs_unlink(k, parent, l);
    return 0;
}

/* For rule 1 (tile): a loop of TILE columns s_w at block b that adds tmp buffer src's element s_w into
 * tmp buffer dst's, or (dst < 0) into S's output at its column o*T+w; 0 or -1. */
static int colsum_add(Opt *o, IrBlock *b, int dst, const IrNode *S, int src, kn_dtype dt)
{
    Kernel *k = o->k;
    IrRef w = ir_loop(k, b, expr_const(o->ex, TILE), LOOP_SERIAL, 1);
    if (!w) return -1;
    IrBlock in = {w, 0};
    o->tile_z = k->nodes[w].var, o->tile_i = -1;
    ExprId zw = expr_sym(o->ex, o->tile_z), e = dst >= 0 ? zw : opt_tile_fx(o, S->index);
    int buf = dst >= 0 ? dst : S->buf;
    IrRef sum = e && zw ? ir_op(k, OP_ADD, dt, ir_load(k, buf, e), ir_load(k, src, zw), 0) : 0;
    return sum && ir_store(k, &in, buf, e, sum) ? 0 : -1;
}

/* A zeroing loop of tmp buffer tb at block b; 0 or -1. */
static int colsum_zero(Opt *o, IrBlock *b, int tb, kn_dtype dt)
{
    IrRef z = ir_loop(o->k, b, expr_const(o->ex, TILE), LOOP_SERIAL, 1);
    IrBlock in = {z, 0};
    return z && ir_store(o->k, &in, tb, expr_sym(o->ex, o->k->nodes[z].var), ir_const(o->k, dt, 0)) ? 0 : -1;
}

/* Rows r0*CASCADE_RUN + s_i (i's var), s_i in [0, n), summed into tmp buffer tb a row of the tile at a
 * time (U's value at column o*T+w); 0 or -1. */
static int colsum_rows(Opt *o, IrBlock *b, const IrNode *I, const IrNode *U, ExprId r0, ExprId n, int tb, kn_dtype dt)
{
    Kernel *k = o->k;
    IrRef r = ir_loop(k, b, n, LOOP_SERIAL, 1);
    if (!r) return -1;
    k->nodes[r].var = I->var, k->nvars--;
    IrBlock rb = {r, 0};
    IrRef w = ir_loop(k, &rb, expr_const(o->ex, TILE), LOOP_SERIAL, 1);
    if (!w) return -1;
    o->tile_z = k->nodes[w].var, o->tile_i = -1;
    IrRef v = opt_rebuild(o, U->a, opt_tile_fx);
    ExprId by = expr_add(o->ex, expr_mul(o->ex, r0, expr_const(o->ex, CASCADE_RUN)), expr_sym(o->ex, I->var));
    if (!v || cs_begin(o, I->var, by, -1, -1)) return -1;
    v = cs_value(o, v);
    cs_end(o);
    ExprId e = expr_sym(o->ex, o->tile_z);
    IrRef sum = o->oom ? 0 : ir_op(k, OP_ADD, dt, ir_load(k, tb, e), v, 0);
    IrBlock wb = {w, 0};
    return sum && ir_store(k, &wb, tb, e, sum) ? 0 : -1;
}

/* Rule 1's sum of ei rows (in loop l, after the output's zeroing loop z) as blocks of CASCADE_RUN rows,
 * each summed a row of the tile at a time into a tmp buffer of TILE elements (the lanes of a vector
 * loop: a column each), which is added into the next level's, and the last level's into the output:
 * the accumulators of pass 7 as rows of tmp buffers, the output the outermost. The accumulator, its
 * loop and its store leave l's body. 0 or -1. */
int opt_colsum_cascade(Opt *o, IrRef l, IrRef z, const IrNode *I, const IrNode *S, const IrNode *U, kn_dtype dt,
                       int64_t ei)
{
    Kernel *k = o->k;
    Levels lv;
    int tb[IR_MAX_NEST];
    cs_plan(o, expr_const(o->ex, ei), CASCADE_RUN, &lv); /* m <= 14: ei < 2^62 */
    for (int j = 0; j < lv.m; j++)
        if ((tb[j] = ir_buf(k, dt, BUF_TMP, expr_const(o->ex, TILE), 0)) < 0) return -1;
    IrBlock at = {l, z}, *cur = &at;
    for (int j = lv.m - 1; j >= 0; j--, cur = &lv.in[j + 1])
        if (cs_level(o, &lv, cur, j) || colsum_zero(o, &lv.in[j], tb[j], dt)) return -1;
    if (colsum_rows(o, &lv.in[0], I, U, lv.done, expr_const(o->ex, CASCADE_RUN), tb[0], dt)) return -1;
    for (int j = 0; j < lv.m; j++)
        if (colsum_add(o, &lv.in[j], j + 1 < lv.m ? tb[j + 1] : -1, S, tb[j], dt)) return -1;
    if (lv.rem && (colsum_zero(o, &at, tb[0], dt) ||
                   colsum_rows(o, &at, I, U, lv.enb, expr_const(o->ex, lv.rem), tb[0], dt) ||
                   colsum_add(o, &at, -1, S, tb[0], dt)))
        return -1;
    k->nodes[at.tail].next = 0; /* the accumulator, its loop and its store drop out */
    return 0;
}

static int cs_loop(Opt *o, IrRef parent, IrRef l, int acc, kn_dtype dt, int depth);

/* Loop c (in the block of loop l, 0: the top level; under depth loops)
 * gets an accumulator of its own for the updates of acc below it, added
 * into acc after it, and that one is cascaded; 0 or -1. */
static int cs_wrap(Opt *o, IrRef l, IrRef c, int acc, kn_dtype dt, int depth)
{
    Kernel *k = o->k;
    IrRef prev = 0;
    if (k->naccs + 1 >= CASCADE_ACCS) return 0;
    for (IrRef s = l ? k->nodes[l].child : k->body; s && s != c; s = k->nodes[s].next) prev = s;
    IrBlock before = {l, prev}, after = {l, c};
    int t = ir_acc(k, &before, OP_SUM, dt);
    IrRef v = t >= 0 ? ir_accval(k, t) : 0;
    if (!v || !ir_update(k, &after, acc, v)) return -1;
    cs_rename(k, c, acc, t);
    return cs_loop(o, l, c, t, dt, depth);
}

/* Cascades the updates of accumulator acc (of dtype dt) that loop l makes,
 * all that reach acc (l in the block of loop parent, under depth loops). */
static int cs_loop(Opt *o, IrRef parent, IrRef l, int acc, kn_dtype dt, int depth)
{
    Kernel *k = o->k;
    IrNode x = k->nodes[l];
    int64_t e = 0, w = 0, total, run = CASCADE_RUN;
    int n = 0, direct = 1, raw = 0;
    for (IrRef c = x.child; c; c = k->nodes[c].next) {
        int64_t u = cs_count(k, c, acc);
        if (!u) continue;
        n++, w = u < 0 || w < 0 ? -1 : opt_clamp_big(w + u);
        if (k->nodes[c].kind != IR_UPDATE) direct = 0;
        else if (k->nodes[k->nodes[c].a].kind != IR_ACCVAL) raw = 1;
    }
    if (direct && raw && x.dtype == LOOP_VECTOR) run *= x.width > CASCADE_LANES ? x.width : CASCADE_LANES;
    int known = expr_as_const(o->ex, x.index, &e);
    if (!n || (known && w >= 0 && opt_mul_ok(e, w, &total) && total <= run)) return 0;
    if (direct) return cs_split(o, parent, l, acc, dt, run / n > 1 ? run / n : 1, depth);
    if (n == 1 && w > 1 && w <= CASCADE_RUN / 2) return cs_split(o, parent, l, acc, dt, CASCADE_RUN / w, depth);
    for (IrRef c = x.child, next; c; c = next) { /* an accumulator per iteration for each nest */
        int64_t u = cs_count(k, c, acc);
        next = k->nodes[c].next;
        if (k->nodes[c].kind == IR_LOOP && (u < 0 || u > 1) && cs_wrap(o, l, c, acc, dt, depth + 1)) return -1;
    }
    if (known && opt_mul_ok(e, n, &total) && total <= CASCADE_RUN) return 0;
    return cs_split(o, parent, l, acc, dt, CASCADE_RUN / n > 1 ? CASCADE_RUN / n : 1, depth);
}

/* Accumulator declaration d (in the block of loop parent, under depth
 * loops): the statements after it that update it, cascaded. 0 or -1. */
static int cs_acc(Opt *o, IrRef parent, IrRef d, int depth)
{
    Kernel *k = o->k;
    int acc = k->nodes[d].var, n = 0, reads = 0;
    kn_dtype dt = (kn_dtype)k->nodes[d].dtype;
    IrRef only = 0;
    uint8_t *seen = kn_alloc(o->ctx, k->n);
    if (!seen) return -1;
    memset(seen, 0, k->n);
    for (IrRef s = k->nodes[d].next; s; s = k->nodes[s].next)
        if (cs_count(k, s, acc)) n++, only = s, reads |= cs_reads(k, s, acc, seen);
    kn_dealloc(o->ctx, seen, k->n);
    if (!n || reads) return 0;
    if (n == 1) return k->nodes[only].kind == IR_LOOP ? cs_loop(o, parent, only, acc, dt, depth) : 0;
    for (IrRef s = k->nodes[d].next, next; s; s = next) { /* several: each long one on its own */
        int64_t u = cs_count(k, s, acc);
        next = k->nodes[s].next;
        if (k->nodes[s].kind == IR_LOOP && (u < 0 || u > CASCADE_RUN) && cs_wrap(o, parent, s, acc, dt, depth)) return -1;
    }
    return 0;
}

/* The float sums declared in the block of loop parent (under depth loops),
 * those of the loops in it first; accumulators from naccs on are the
 * pass's own. 0 or -1. */
static int cs_block(Opt *o, IrRef parent, int depth, int naccs)
{
    Kernel *k = o->k;
    for (IrRef s = parent ? k->nodes[parent].child : k->body; s; s = k->nodes[s].next)
        if (k->nodes[s].kind == IR_LOOP && cs_block(o, s, depth + 1, naccs)) return -1;
    for (IrRef s = parent ? k->nodes[parent].child : k->body; s; s = k->nodes[s].next) {
        const IrNode *x = &k->nodes[s];
        if (x->kind == IR_ACC && x->op == OP_SUM && (x->dtype == KN_F32 || x->dtype == KN_F64) && x->var < naccs &&
            cs_acc(o, parent, s, depth))
            return -1;
    }
    return 0;
}

int opt_cascade(Opt *o) { return cs_block(o, 0, 0, o->k->naccs) || o->oom ? KN_ENOMEM : 0; }
