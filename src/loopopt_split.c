/*
 * loopopt_split.c — the loop passes that split and join loops (loopopt_int.h): pass 2 splits a
 * loop at a divisor its indices divide it by, pass 3 cuts a loop at the points where a mask's
 * condition changes (guards), pass 4 collapses perfectly nested loops back into one where no
 * index needs them apart.
 */
#include <stdlib.h>
#include <string.h>

#include "loopopt_int.h"

/* ---- pass 2: split ----
 * for v in E { body }  =>  for v in E/c { for r in c { body[v := v*c + r] } }
 * when c divides E and the body's indices divide or reduce v by a multiple
 * of c: with r in [0, c), (v*c + r)//c is v and (v*c + r)%c is r, so a
 * flattened index read back through a reshape or a permute ((s1//1024)*65536
 * + s1%1024 over a loop of 16384) becomes affine in each of the two loops.
 * The iterations run in the same order, so nothing computes differently; a
 * target pays for the division and modulo in every iteration of the inner
 * loop (a real division under TinyCC; a strided gather instead of a vector
 * load for cc). Candidates are the divisors c of such divisions whose gcd
 * with E is neither 1 nor E; the one that leaves the fewest divisions and
 * moduli of loop vars in the body's indices wins, if it leaves fewer than
 * there were, and the two loops are split again while one does. Collapse,
 * which runs after, joins back the loops an index does not need apart. */

enum { SPLIT_CANDS = 8 }; /* divisors tried per loop */

/* e with s_v replaced by s_v*sub_mul + sub_add (v: sub_v) */
static ExprId subst(Opt *o, ExprId e)
{
    const ExprNode *x = expr_node(o->ex, e);
    ExprTable *t = o->ex;
    ExprId args[EXPR_MAX_ARGS], r;
    if (!x || !expr_has_sym(t, e, o->sub_v)) return e;
    if (x->kind == EX_SYM) return expr_add(t, expr_mul(t, e, expr_const(t, o->sub_mul)), o->sub_add);
    int kind = x->kind, n = x->n;
    int64_t k0 = x->c;
    memcpy(args, x->args, (size_t)n * sizeof *args); /* x may move as the table grows */
    for (int i = 0; i < n; i++) args[i] = subst(o, args[i]);
    switch (kind) {
    case EX_ADD:
        r = expr_const(t, k0);
        for (int i = 0; i < n; i++) r = expr_add(t, r, args[i]);
        return r;
    case EX_MUL:
        r = expr_const(t, k0);
        for (int i = 0; i < n; i++) r = expr_mul(t, r, args[i]);
        return r;
    case EX_FLOORDIV: return expr_floordiv(t, args[0], args[1]);
    case EX_MOD: return expr_mod(t, args[0], args[1]);
    case EX_MAX: return expr_max(t, args[0], args[1]);
    case EX_MIN: return expr_min(t, args[0], args[1]);
    default: return e;
    }
}

static ExprId split_fx(Opt *o, ExprId e) { return opt_simplify(o, subst(o, e)); }

/* Divisions and moduli in e whose numerator names a loop var. */
static int divisions(const Opt *o, ExprId e)
{
    const ExprNode *x = expr_node(o->ex, e);
    int n = 0;
    if (!x || x->kind == EX_CONST || x->kind == EX_SYM) return 0;
    if (x->kind == EX_FLOORDIV || x->kind == EX_MOD) {
        for (int v = 0; v < o->k->nvars && !n; v++) n = expr_has_sym(o->ex, x->args[0], v);
    }
    for (int i = 0; i < x->n; i++) n += divisions(o, x->args[i]);
    return n;
}

/* Adds to cands (up to SPLIT_CANDS) gcd(c, E) of each division or modulo
 * of e by a positive constant c whose numerator names s_v. */
static void note_divisors(const Opt *o, ExprId e, int v, int64_t E, int64_t *cands, int *n)
{
    const ExprNode *x = expr_node(o->ex, e);
    int64_t c;
    if (!x || x->kind == EX_CONST || x->kind == EX_SYM) return;
    if ((x->kind == EX_FLOORDIV || x->kind == EX_MOD) && expr_has_sym(o->ex, x->args[0], v) &&
        opt_positive_const(o->ex, x->args[1], &c) && (c = opt_gcd64(c, E)) > 1 && c < E) {
        int seen = 0;
        for (int i = 0; i < *n; i++) seen |= cands[i] == c;
        if (!seen && *n < SPLIT_CANDS) cands[(*n)++] = c;
    }
    for (int i = 0; i < x->n; i++) note_divisors(o, x->args[i], v, E, cands, n);
}

/* What the indices below a loop make of a split: the divisions they hold
 * (with fx NULL), or would hold after it (fx split_fx, the split's ranges
 * bound), and the divisors they offer (cands non-NULL). */
typedef struct {
    IndexFn fx;
    int v;
    int64_t E, *cands;
    int ncands, divs, bad;
    uint8_t *seen; /* per node */
} SplitScan;

static void scan_index(Opt *o, SplitScan *sc, ExprId e)
{
    ExprId y = sc->fx ? sc->fx(o, e) : e;
    if (!y) sc->bad = 1;
    sc->divs += divisions(o, y);
    if (sc->cands) note_divisors(o, e, sc->v, sc->E, sc->cands, &sc->ncands);
}

static void scan_value(Opt *o, SplitScan *sc, IrRef r)
{
    const IrNode *x = &o->k->nodes[r];
    if (sc->seen[r]) return;
    sc->seen[r] = 1;
    if (x->kind == IR_LOAD || x->kind == IR_INDEX || x->kind == IR_RAND) scan_index(o, sc, x->index);
    for (int i = 0; i < ir_nsrc(x); i++) scan_value(o, sc, i == 0 ? x->a : i == 1 ? x->b : x->c);
}

static void scan_block(Opt *o, SplitScan *sc, IrRef s)
{
    for (; s; s = o->k->nodes[s].next) {
        IrNode x = o->k->nodes[s];
        if (x.kind == IR_LOOP) {
            if (expr_has_sym(o->ex, x.index, sc->v)) sc->bad = 1; /* an extent that changes with s_v */
            opt_bind(o, &x, 1);
            scan_block(o, sc, x.child);
            opt_bind(o, &x, 0);
        }
        if (x.kind == IR_STORE) scan_index(o, sc, x.index);
        if (x.kind == IR_STORE && x.b) scan_value(o, sc, x.b);
        if (x.kind == IR_STORE || x.kind == IR_UPDATE) scan_value(o, sc, x.a);
    }
}

/* Scans the body of loop l; 0 or KN_ENOMEM. */
static int split_scan(Opt *o, IrRef l, SplitScan *sc)
{
    sc->seen = kn_alloc(o->ctx, o->k->n);
    if (!sc->seen) return KN_ENOMEM;
    memset(sc->seen, 0, o->k->n);
    scan_block(o, sc, o->k->nodes[l].child);
    kn_dealloc(o->ctx, sc->seen, o->k->n);
    sc->seen = NULL;
    return 0;
}

/* Binds s_v to [0, E/c) and the new var s_r to [0, c) for a split of loop
 * l by c (on), or back to l's own range (off). */
static void bind_split(Opt *o, IrRef l, int64_t c, int on)
{
    IrNode x = o->k->nodes[l];
    opt_bind(o, &x, 1);
    int64_t e;
    if (on && o->known[x.var] && expr_as_const(o->ex, x.index, &e)) {
        o->hi[x.var] = e / c - 1;
        o->known[o->split_r] = 1, o->lo[o->split_r] = 0, o->hi[o->split_r] = c - 1;
    } else {
        o->known[o->split_r] = 0;
    }
    o->gen++;
}

/* Splits loop l (bound, with the loops around it) by its best divisor, if
 * one pays: 1 split, 0 not, -1 out of memory. */
static int split_once(Opt *o, IrRef l, int depth)
{
    Kernel *k = o->k;
    IrNode x = k->nodes[l];
    int64_t E, cands[SPLIT_CANDS], best = 0;
    if (x.kind != IR_LOOP || x.dtype != LOOP_SERIAL || !opt_positive_const(o->ex, x.index, &E) || E < 4 ||
        depth >= IR_MAX_NEST || o->splits >= SPLIT_MAX)
        return 0;
    SplitScan sc = {NULL, x.var, E, cands, 0, 0, 0, NULL};
    if (split_scan(o, l, &sc)) return -1;
    if (sc.bad || !sc.ncands || !sc.divs) return 0;
    int fewest = sc.divs;
    o->sub_v = x.var, o->split_r = k->nvars++; /* the trials' s_r, a var for range() */
    o->sub_add = expr_sym(o->ex, o->split_r);
    if (!o->sub_add) return k->nvars--, -1;
    for (int i = 0; i < sc.ncands; i++) {
        SplitScan t = {split_fx, x.var, E, NULL, 0, 0, 0, NULL};
        o->sub_mul = cands[i];
        bind_split(o, l, cands[i], 1);
        int err = split_scan(o, l, &t);
        bind_split(o, l, cands[i], 0);
        if (err) return k->nvars--, -1;
        if (!t.bad && t.divs < fewest) fewest = t.divs, best = cands[i];
    }
    k->nvars--; /* ir_loop takes it */
    if (!best) return 0;
    IrBlock in = {l, 0};
    ExprId outer = expr_const(o->ex, E / best);
    IrRef r = outer ? ir_loop(k, &in, expr_const(o->ex, best), LOOP_SERIAL, 1) : 0; /* var o->split_r */
    if (!r) return -1;
    k->nodes[r].child = x.child, k->nodes[r].next = 0;
    k->nodes[l].child = r;
    o->sub_mul = best, o->sub_add = expr_sym(o->ex, k->nodes[r].var);
    bind_split(o, l, best, 1);
    int err = opt_rewrite(o, r, split_fx);
    bind_split(o, l, best, 0);
    k->nodes[l].index = outer;
    o->splits++;
    return err ? -1 : 1;
}

/* Splits the loops of the block from s, outer first (depth: loops around). */
int opt_split_block(Opt *o, IrRef s, int depth)
{
    for (; s; s = o->k->nodes[s].next) {
        if (o->k->nodes[s].kind != IR_LOOP) continue;
        int r;
        while ((r = split_once(o, s, depth)) == 1) {}
        if (r < 0) return KN_ENOMEM;
        IrNode x = o->k->nodes[s];
        opt_bind(o, &x, 1);
        r = opt_split_block(o, x.child, depth + 1);
        opt_bind(o, &x, 0);
        if (r) return r;
    }
    return 0;
}

/* ---- pass 3: guards ----
 * for v in E { body }  =>  for v in t1 { body } for v in t2-t1 { body[v := v + t1] } ...
 * at the points t where a compare of indices in the body, c*s_v + rest < 0
 * (or == 0) with rest in [l, h] over the loops below and around, changes
 * its value, for a compare that the points decide in every piece: a pad's
 * mask (s2-1 in [0, 32)), a phase's (s4 < 1 over a loop of 2), a cat's
 * (s2*256+s3 in [256, 512) with s3 < 256), not a causal mask's (s2 < s3,
 * undecided for s3 >= 1). In each piece the compare folds away (fold), and
 * the ranges, narrower, simplify the indices under it: (s3+3)%4 is s3-1
 * where s3 >= 1; a piece of one iteration is its body, s_v a constant in
 * it. The pieces run one after another, each iteration as before, so
 * nothing computes differently. Outer loops first, in rounds until none is
 * cut (a phase decided inside may leave its outer loop's masks decided by
 * its cuts in the next round); a loop whose body declares an accumulator
 * keeps it whole (a copy would declare it twice), and a kernel stops being
 * cut once it has grown GUARD_GROWTH times (a product's backward compares
 * at every element). */

enum { GUARD_POINTS = 3, GUARD_MAX_NODES = 1 << 16 }; /* points a loop is cut at; nodes a kernel may grow to */
#define GUARD_GROWTH 4 /* a kernel stops being cut at this many times its nodes before the pass (and 4096) */

/* The points in (0, E) where compare x (of integer indices and constants) changes with s_v, into pts. */
static void guard_points(Opt *o, const IrNode *x, int v, int64_t E, int64_t *pts, int *n)
{
    const IrNode *a = &o->k->nodes[x->a], *b = &o->k->nodes[x->b];
    ExprTable *t = o->ex;
    ExprId ea, eb, rest;
    int64_t c, l, h, p[2];
    int np = 0;
    if (a->kind == IR_CONST && !a->index && dt_is_int((kn_dtype)a->dtype)) ea = expr_const(t, (int64_t)a->imm);
    else if (a->kind == IR_INDEX) ea = a->index;
    else return;
    if (b->kind == IR_CONST && !b->index && dt_is_int((kn_dtype)b->dtype)) eb = expr_const(t, (int64_t)b->imm);
    else if (b->kind == IR_INDEX) eb = b->index;
    else return;
    ExprId d = expr_sub(t, ea, eb); /* the compare is c*v + rest < 0, or == 0, with rest in [l, h] */
    if (!d || !opt_affine(t, d, v, &c, &rest) || !c || !opt_range(o, rest, &l, &h)) return;
    if (c < 0 && x->op == OP_CMPEQ) { /* -c*v - rest == 0 */
        int64_t l0 = l;
        c = -c, l = -h, h = -l0;
    }
    if (c > 0) /* decided true (<) or false (==) below the first point, false from the second on */
        p[np++] = opt_fdiv(-h + c - 1, c), p[np++] = x->op == OP_CMPLT ? opt_fdiv(-l + c - 1, c) : opt_fdiv(-l, c) + 1;
    else /* c*v + rest < 0: false up to the first point, true from the second on */
        p[np++] = opt_fdiv(l, -c) + 1, p[np++] = opt_fdiv(h, -c) + 1;
    if (x->op == OP_CMPLT ? p[0] != p[1] : l != h) return; /* undecided between: a causal mask's s2 < s3 */
    for (int i = 0; i < np; i++) {
        int seen = p[i] <= 0 || p[i] >= E;
        for (int j = 0; j < *n && !seen; j++) seen = pts[j] == p[i];
        if (!seen && *n < GUARD_POINTS) pts[(*n)++] = p[i];
        else if (!seen) *n = GUARD_POINTS + 1; /* too many: the loop stays whole */
    }
}

typedef struct {
    int v, decl;
    int64_t E, pts[GUARD_POINTS + 1];
    int npts;
    uint8_t *seen;
} GuardScan;

static void guard_value(Opt *o, GuardScan *g, IrRef r)
{
    const IrNode *x = &o->k->nodes[r];
    if (g->seen[r]) return;
    g->seen[r] = 1;
    if (x->kind == IR_OP && (x->op == OP_CMPLT || x->op == OP_CMPEQ)) guard_points(o, x, g->v, g->E, g->pts, &g->npts);
    for (int i = 0; i < ir_nsrc(x); i++) guard_value(o, g, i == 0 ? x->a : i == 1 ? x->b : x->c);
}

static void guard_scan(Opt *o, GuardScan *g, IrRef s)
{
    for (; s; s = o->k->nodes[s].next) {
        IrNode x = o->k->nodes[s];
        if (x.kind == IR_ACC) g->decl = 1;
        if (x.kind == IR_LOOP) {
            opt_bind(o, &x, 1);
            guard_scan(o, g, x.child);
            opt_bind(o, &x, 0);
        }
        if (x.kind == IR_STORE && x.b) guard_value(o, g, x.b);
        if (x.kind == IR_STORE || x.kind == IR_UPDATE) guard_value(o, g, x.a);
    }
}

/* Appends to block b a copy of the statements from s (loops copied whole,
 * binding the same vars; values shared, as interned); 0 or -1. */
static int clone_block(Opt *o, IrBlock *b, IrRef s)
{
    Kernel *k = o->k;
    for (; s; s = k->nodes[s].next) {
        IrNode x = k->nodes[s];
        IrRef r = 0;
        if (x.kind == IR_LOOP) {
            r = ir_loop(k, b, x.index, (LoopKind)x.dtype, x.width);
            if (!r) return -1;
            k->nodes[r].var = x.var, k->nvars--; /* the copy binds the same var */
            IrBlock in = {r, 0};
            if (clone_block(o, &in, x.child)) return -1;
        } else if (x.kind == IR_STORE) {
            r = ir_store_at(k, b, x.buf, x.index, x.b, x.a, x.op == OP_SUM);
        } else if (x.kind == IR_UPDATE) {
            r = ir_update(k, b, x.var, x.a);
        }
        if (!r) return -1;
    }
    return 0;
}

/* Puts the body of loop l (in the block of loop parent; its var no longer
 * named in it) in its place. */
static void unwrap(Kernel *k, IrRef parent, IrRef l)
{
    IrRef *at = parent ? &k->nodes[parent].child : &k->body, last = 0;
    while (*at && *at != l) at = &k->nodes[*at].next;
    if (!*at) return;
    for (IrRef s = k->nodes[l].child; s; s = k->nodes[s].next) last = s;
    if (!last) {
        *at = k->nodes[l].next;
        return;
    }
    k->nodes[last].next = k->nodes[l].next;
    *at = k->nodes[l].child;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Cuts loop l (in the block of loop parent) at its guards' points, the
 * loops around it bound: 1 cut, 0 not, -1 out of memory. */
static int guard_once(Opt *o, IrRef parent, IrRef l)
{
    Kernel *k = o->k;
    IrNode x = k->nodes[l];
    int64_t E;
    if (x.kind != IR_LOOP || x.dtype != LOOP_SERIAL || !opt_positive_const(o->ex, x.index, &E) || E < 2 ||
        k->n > o->guard_max)
        return 0;
    GuardScan g = {x.var, 0, E, {0}, 0, kn_alloc(o->ctx, k->n)};
    if (!g.seen) return -1;
    memset(g.seen, 0, k->n);
    opt_bind(o, &x, 1);
    guard_scan(o, &g, x.child);
    opt_bind(o, &x, 0);
    kn_dealloc(o->ctx, g.seen, k->n);
    if (g.decl || !g.npts || g.npts > GUARD_POINTS) return 0;
    qsort(g.pts, (size_t)g.npts, sizeof *g.pts, cmp_i64);
    g.pts[g.npts] = E;
    IrRef piece[GUARD_POINTS + 1];
    piece[0] = l;
    for (int i = 1; i <= g.npts; i++) { /* copies of the whole loop after it, in order */
        IrBlock after = {parent, piece[i - 1]};
        IrRef r = ir_loop(k, &after, expr_const(o->ex, g.pts[i] - g.pts[i - 1]), LOOP_SERIAL, 1);
        if (!r) return -1;
        k->nodes[r].var = x.var, k->nvars--;
        IrBlock in = {r, 0};
        if (clone_block(o, &in, x.child)) return -1;
        piece[i] = r;
    }
    k->nodes[l].index = expr_const(o->ex, g.pts[0]);
    for (int i = 0; i <= g.npts; i++) { /* each piece's body: s_v from its first point, folded */
        IrNode y = k->nodes[piece[i]];
        int64_t from = i ? g.pts[i - 1] : 0;
        int one = g.pts[i] - from == 1;
        o->sub_v = x.var, o->sub_mul = !one, o->sub_add = expr_const(o->ex, from); /* one iteration: s_v is from */
        opt_bind(o, &y, 1);
        int err = opt_rewrite(o, piece[i], split_fx);
        opt_bind(o, &y, 0);
        if (err) return -1;
        if (one) unwrap(k, parent, piece[i]);
    }
    return 1;
}

/* The guards of the loops of the block from s (in the body of loop parent),
 * outer loops first (a cut of one may fold away an inner loop's masks);
 * *cut counts the loops cut. */
static int guard_block(Opt *o, IrRef parent, IrRef s, int *cut)
{
    while (s) {
        IrNode x = o->k->nodes[s];
        if (x.kind != IR_LOOP) {
            s = x.next;
            continue;
        }
        int r = guard_once(o, parent, s);
        if (r < 0) return KN_ENOMEM;
        *cut += r;
        if (r) { /* past the pieces, which may be unwrapped: the next round's */
            s = x.next;
            continue;
        }
        opt_bind(o, &x, 1);
        r = guard_block(o, s, x.child, cut);
        opt_bind(o, &x, 0);
        if (r) return r;
        s = o->k->nodes[s].next;
    }
    return 0;
}

/* Cuts until no loop is (a cut may let an outer loop's masks depend on it alone). */
int opt_guards(Opt *o)
{
    o->guard_max = GUARD_GROWTH * o->k->n < GUARD_MAX_NODES ? GUARD_GROWTH * o->k->n : GUARD_MAX_NODES;
    if (o->guard_max < 4096) o->guard_max = 4096;
    for (int round = 0; round < 8; round++) {
        int cut = 0;
        if (guard_block(o, 0, o->k->body, &cut)) return KN_ENOMEM;
        if (!cut) break;
    }
    return 0;
}

/* ---- pass 4: collapse ----
 * for o in Eo { for i in Ei { body } }  =>  for o in Eo*Ei { body' } when
 * every index of body is rest + b*Ei*o + b*i: then it is rest + b*o' where
 * o' = o*Ei + i runs over the same iterations in the same order. Where Eo is
 * 1, o is 0 and any coefficient of it will do: a unit loop (a batch or
 * group dim of 1) would otherwise stay outermost, and the parallel mark,
 * which only the outermost loops get, would split it over one thread. */

/* Whether index e is rest + b*Ei*s_o + b*i (rest + a*s_o + b*i with Eo 1). */
static int collapsible_expr(Opt *o, ExprId e)
{
    int64_t a, b;
    ExprId r1, r2;
    return opt_affine(o->ex, e, o->var_o, &a, &r1) && opt_affine(o->ex, r1, o->var_i, &b, &r2) && opt_mul_ok(b, o->ext_i, &b) &&
           (a == b || o->ext_o == 1);
}

static int collapsible_value(Opt *o, IrRef r)
{
    const IrNode *x = &o->k->nodes[r];
    if (r < o->n0 && o->stamp[r] == o->gen) return 1; /* checked already */
    if (r < o->n0) o->stamp[r] = o->gen;
    switch (x->kind) {
    case IR_LOAD: return collapsible_expr(o, x->index) && (!x->a || collapsible_value(o, x->a));
    case IR_CHECK:
        return !expr_has_sym(o->ex, x->index, o->var_o) && !expr_has_sym(o->ex, x->index, o->var_i) && collapsible_value(o, x->a);
    case IR_INDEX: return collapsible_expr(o, x->index);
    case IR_RAND: return collapsible_expr(o, x->index) && collapsible_value(o, x->a) && collapsible_value(o, x->b);
    case IR_OP:
        return (!x->a || collapsible_value(o, x->a)) && (!x->b || collapsible_value(o, x->b)) &&
               (!x->c || collapsible_value(o, x->c));
    default: return 1;
    }
}

static int collapsible_block(Opt *o, IrRef s)
{
    for (; s; s = o->k->nodes[s].next) {
        const IrNode *x = &o->k->nodes[s];
        if (x->kind == IR_LOOP) {
            if (expr_has_sym(o->ex, x->index, o->var_o) || expr_has_sym(o->ex, x->index, o->var_i) ||
                !collapsible_block(o, x->child))
                return 0;
        } else if (x->kind == IR_STORE && (!collapsible_expr(o, x->index) || (x->b && !collapsible_value(o, x->b)))) {
            return 0;
        }
        if ((x->kind == IR_STORE || x->kind == IR_UPDATE) && !collapsible_value(o, x->a)) return 0;
    }
    return 1;
}

static ExprId collapse_index(Opt *o, ExprId e)
{
    int64_t a, b;
    ExprId r1, r2;
    if (!opt_affine(o->ex, e, o->var_o, &a, &r1) || !opt_affine(o->ex, r1, o->var_i, &b, &r2)) return 0;
    return expr_add(o->ex, r2, expr_mul(o->ex, expr_const(o->ex, b), expr_sym(o->ex, o->var_o)));
}

/* Collapses loop l with the single loop of its body when allowed: 1 done,
 * 0 not, -1 out of memory. */
static int collapse_once(Opt *o, IrRef l)
{
    Kernel *k = o->k;
    IrRef in = k->nodes[l].child;
    int64_t eo = 0, ei, e = 0;
    if (!in || k->nodes[in].kind != IR_LOOP || k->nodes[in].next) return 0;
    if (k->nodes[l].dtype != LOOP_SERIAL || k->nodes[in].dtype != LOOP_SERIAL) return 0;
    int sym = !expr_as_const(o->ex, k->nodes[l].index, &eo); /* an outer extent of shape symbols */
    if ((!sym && !opt_positive_const(o->ex, k->nodes[l].index, &eo)) || !opt_positive_const(o->ex, k->nodes[in].index, &ei) ||
        (!sym && !opt_mul_ok(eo, ei, &e)))
        return 0;
    o->var_o = k->nodes[l].var, o->var_i = k->nodes[in].var, o->ext_i = ei, o->ext_o = eo;
    size_t bytes = (size_t)k->n * (sizeof *o->memo + sizeof *o->stamp);
    void *mem = kn_alloc(o->ctx, bytes);
    if (!mem) return -1;
    memset(mem, 0, bytes);
    o->memo = mem, o->stamp = (uint32_t *)(o->memo + k->n), o->n0 = k->n, o->gen = 1;
    int ok = collapsible_block(o, k->nodes[in].child);
    kn_dealloc(o->ctx, mem, bytes);
    if (!ok) return 0;
    if (opt_rewrite(o, in, collapse_index)) return -1;
    ExprId ext = sym ? expr_mul(o->ex, k->nodes[l].index, expr_const(o->ex, ei)) : expr_const(o->ex, e);
    if (!ext) return -1;
    k->nodes[l].index = ext;
    k->nodes[l].child = k->nodes[in].child;
    return 1;
}

int opt_collapse_block(Opt *o, IrRef s)
{
    for (; s; s = o->k->nodes[s].next) {
        if (o->k->nodes[s].kind != IR_LOOP) continue;
        int r;
        while ((r = collapse_once(o, s)) == 1) {}
        if (r < 0 || opt_collapse_block(o, o->k->nodes[s].child)) return KN_ENOMEM;
    }
    return 0;
}
