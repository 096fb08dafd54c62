/*
 * loopopt.c — loop-IR passes (loopopt.h): index simplification with loop
 * ranges, splitting of loops at divisors and at their masks' points,
 * collapsing of perfectly nested loops, tiling of strided nests, parallel
 * and vector marks, the cascade of long float sums, unroll marks.
 *
 * Values are interned and immutable, so a pass rewrites an index by
 * building the value again (ir_load, ir_op, ...) and re-pointing the
 * statement that uses it; the old nodes stay behind, unreachable. A rewrite
 * is one walk over the statements with a function from index to index (fx)
 * and a memo from old value to new, stamped with a generation that changes
 * whenever the loop ranges in scope do, so a shared subvalue is rebuilt
 * once per scope and a DAG never unfolds into a tree.
 *
 * Bounds come from interval arithmetic over expr.h's canonical form, with
 * every loop var s_k in [0, extent_k - 1] for a constant extent_k >= 1; any
 * step that could overflow, or an unknown symbol, gives no bound, and no
 * bound means no rewrite. Affine forms: e = coef*s_v + rest, where s_v
 * occurs in e only as a term s_v or c*s_v of a sum (the canonical form
 * combines like terms, so there is at most one).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loopopt.h"

#define DEFAULT_PAR_THRESHOLD 32768
#define CASCADE_RUN 16                   /* values an accumulator adds in sequence (pass 7, cascade) */
#define CASCADE_LANES 32                 /* a vector loop's accumulator lanes its blocks count on */
#define CASCADE_COVER ((int64_t)1 << 31) /* values the levels of a symbolic extent cover */
#define CASCADE_ACCS 128                 /* accumulators past which a kernel gains no more */
#define DEFAULT_VECTOR_WIDTH 8
#define BIG ((int64_t)1 << 62) /* bounds stay within +-BIG, so sums of two never overflow */

typedef struct Opt Opt;
typedef ExprId (*IndexFn)(Opt *o, ExprId e);

struct Opt {
    kn_ctx *ctx;
    Kernel *k;
    ExprTable *ex;
    int64_t *lo, *hi;  /* per var: its range while a loop binds it */
    uint8_t *known;    /* per var: 1 while lo, hi hold */
    ExprId *ext;       /* per var: the extent of the loop binding it (any expression), 0 if none; or NULL */
    IrRef *memo;       /* per old value: its rewrite, valid when stamp == gen */
    uint32_t *stamp;
    uint32_t gen, n0;  /* n0: nodes when the rewrite began (memo covers these) */
    IndexFn fx;
    int var_o, var_i;  /* collapse: the outer and inner vars */
    int64_t ext_i;     /* collapse: the inner extent */
    int64_t ext_o;     /* collapse: the outer extent (0: shape symbols) */
    int tile_o, tile_i, tile_z, tile_w; /* tile: the vars replaced (o, i) and their new inner vars */
    int64_t tile_t;    /* tile: the tile's side */
    int sub_v;         /* subst: s_v becomes s_v*sub_mul + sub_add */
    int64_t sub_mul;
    ExprId sub_add;
    int split_r;       /* split: the new inner loop's var */
    int splits;        /* split: loops split so far */
    uint32_t guard_max; /* guards: the nodes past which no loop is cut */
    int cs_v;          /* cascade: copies replace s_cs_v by cs_by, accumulator j by cs_map[j] (j < cs_nmap, if >= 0) */
    ExprId cs_by;
    int *cs_map, cs_nmap;
    int vcap;          /* vars lo, hi, known and ext hold */
    int64_t hint;      /* LoopOptions.hint */
    int hinting;       /* range() takes shape symbols as hint (marks' work and widths only) */
    int oom;
};

/* ---- checked integer steps ---- */

static int64_t clamp_big(int64_t v) { return v > BIG ? BIG : v < -BIG ? -BIG : v; }
static int in_big(int64_t v) { return v < BIG && v > -BIG; }

static int mul_ok(int64_t a, int64_t b, int64_t *r)
{
    double d = (double)a * (double)b;
    if (d >= (double)BIG || d <= -(double)BIG) return 0;
    *r = a * b;
    return 1;
}

static int64_t fdiv(int64_t a, int64_t c) /* floor(a / c), c > 0 */
{
    int64_t q = a / c;
    return (a % c != 0 && a < 0) ? q - 1 : q;
}

static int positive_const(const ExprTable *t, ExprId e, int64_t *c)
{
    return expr_as_const(t, e, c) && *c > 0;
}

/* ---- ranges ---- */

/* [*lo, *hi] bounds every value of e with the vars in scope: 1, or 0 when
 * nothing is known. */
static int range(const Opt *o, ExprId e, int64_t *lo, int64_t *hi)
{
    const ExprNode *x = expr_node(o->ex, e);
    int64_t l, h, l2, h2, c;
    if (!x) return 0;
    switch (x->kind) {
    case EX_CONST: *lo = *hi = x->c; return in_big(x->c);
    case EX_SYM:
        if (x->c >= IR_SHAPE_SYM && o->hinting && o->hint > 0) {
            *lo = *hi = o->hint;
            return 1;
        }
        if (x->c >= o->k->nvars || x->c >= o->vcap || !o->known[x->c]) return 0;
        *lo = o->lo[x->c], *hi = o->hi[x->c];
        return 1;
    case EX_ADD:
        l = h = x->c;
        if (!in_big(l)) return 0;
        for (int i = 0; i < x->n; i++) {
            if (!range(o, x->args[i], &l2, &h2)) return 0;
            l += l2, h += h2;
            if (!in_big(l) || !in_big(h)) return 0;
        }
        break;
    case EX_MUL:
        l = h = x->c;
        if (!in_big(l)) return 0;
        for (int i = 0; i < x->n; i++) {
            int64_t p[4];
            if (!range(o, x->args[i], &l2, &h2)) return 0;
            if (!mul_ok(l, l2, &p[0]) || !mul_ok(l, h2, &p[1]) || !mul_ok(h, l2, &p[2]) || !mul_ok(h, h2, &p[3]))
                return 0;
            l = h = p[0];
            for (int j = 1; j < 4; j++) l = p[j] < l ? p[j] : l, h = p[j] > h ? p[j] : h;
        }
        break;
    case EX_FLOORDIV:
        if (!positive_const(o->ex, x->args[1], &c) || !range(o, x->args[0], &l, &h)) return 0;
        l = fdiv(l, c), h = fdiv(h, c);
        break;
    case EX_MOD:
        if (!positive_const(o->ex, x->args[1], &c)) return 0;
        if (range(o, x->args[0], &l, &h) && fdiv(l, c) == fdiv(h, c)) l -= fdiv(l, c) * c, h -= fdiv(h, c) * c;
        else l = 0, h = c - 1;
        break;
    case EX_MAX:
    case EX_MIN:
        if (!range(o, x->args[0], &l, &h) || !range(o, x->args[1], &l2, &h2)) return 0;
        if (x->kind == EX_MAX) l = l > l2 ? l : l2, h = h > h2 ? h : h2;
        else l = l < l2 ? l : l2, h = h < h2 ? h : h2;
        break;
    default: return 0;
    }
    *lo = l, *hi = h;
    return 1;
}

/* Extent e's value: a constant, or with shape symbols at the hint (a size
 * that decides only how a loop runs): 1, or 0 if unknown. */
static int extent_at_hint(Opt *o, ExprId e, int64_t *v)
{
    int64_t hi;
    if (expr_as_const(o->ex, e, v)) return 1;
    o->hinting = 1;
    int ok = range(o, e, v, &hi) && *v == hi;
    o->hinting = 0;
    return ok;
}

/* ---- pass 1: simplify ----
 * x//c = q and x%c = x - q*c when c > 0 and x stays in [q*c, q*c + c);
 * a sum splits as below; max and min pick the operand that always wins.
 * Rebuilt bottom-up. */

static int64_t gcd64(int64_t a, int64_t b)
{
    a = a < 0 ? -a : a, b = b < 0 ? -b : b;
    while (b) {
        int64_t r = a % b;
        a = b, b = r;
    }
    return a;
}

/* The coefficient of a term of a canonical sum: c of a product, else 1. */
static int64_t term_coef(const ExprTable *t, ExprId e)
{
    const ExprNode *x = expr_node(t, e);
    return x && x->kind == EX_MUL ? x->c : 1;
}

/* a//c or a%c (kind) for a sum a = g*A + R, c > 0, where g divides c and
 * every coefficient of A's terms, and R stays in [0, g): then a//c is
 * A//(c/g) and a%c is g*(A%(c/g)) + R, because floor((g*A + R)/(g*b)) =
 * floor((A + R/g)/b) = floor(A/b) for an integer A and 0 <= R/g < 1. (A
 * flattened index read back through a reshape, (s0*1024 + s1)//131072 with
 * s1 < 1024, is s0//128 and leaves the inner loop free of division.) A
 * takes the terms of largest |coefficient| first; 0 when no split holds. */
static ExprId split_div(Opt *o, int kind, ExprId a, int64_t c)
{
    ExprTable *t = o->ex;
    const ExprNode *x = expr_node(t, a);
    ExprId terms[EXPR_MAX_ARGS];
    int n = x ? x->n : 0;
    int64_t k0 = x ? x->c : 0, g = c, l, h;
    if (!x || x->kind != EX_ADD) return 0;
    memcpy(terms, x->args, (size_t)n * sizeof *terms); /* x may move as the table grows */
    for (int i = 1; i < n; i++) /* insertion sort by |coefficient|, largest first */
        for (int j = i; j > 0; j--) {
            int64_t p = term_coef(t, terms[j - 1]), q = term_coef(t, terms[j]);
            if ((p < 0 ? -p : p) >= (q < 0 ? -q : q)) break;
            ExprId s = terms[j];
            terms[j] = terms[j - 1], terms[j - 1] = s;
        }
    for (int j = 0; j < n; j++) {
        g = gcd64(g, term_coef(t, terms[j]));
        if (g <= 1) return 0;
        ExprId r = expr_const(t, k0), big = expr_const(t, 0);
        for (int i = j + 1; i < n; i++) r = expr_add(t, r, terms[i]);
        if (!r || !range(o, r, &l, &h) || l < 0 || h >= g) continue;
        for (int i = 0; i <= j; i++) big = expr_add(t, big, terms[i]);
        ExprId q = expr_floordiv(t, big, expr_const(t, g)), b = expr_const(t, c / g); /* exact */
        if (kind == EX_FLOORDIV) return expr_floordiv(t, q, b);
        return expr_add(t, expr_mul(t, expr_mod(t, q, b), expr_const(t, g)), r);
    }
    return 0;
}

/* k*(x%c) + k*c*(x//c) is k*x, for any integer x and c > 0: the sum e
 * with every pair of terms so joined. What split_div leaves of a flattened
 * index, (s0//128)*131072 + (s0%128)*1024, is s0*1024 again. */
static ExprId rejoin(ExprTable *t, ExprId e)
{
    const ExprNode *x = expr_node(t, e);
    ExprId a[EXPR_MAX_ARGS];
    int n = x ? x->n : 0, joined = 0;
    int64_t k0 = x ? x->c : 0;
    if (!x || x->kind != EX_ADD) return e;
    memcpy(a, x->args, (size_t)n * sizeof *a); /* x may move as the table grows */
    for (int i = 0; i < n; i++) {
        const ExprNode *m = expr_node(t, a[i]);
        int64_t k = 1, c, kc;
        if (m && m->kind == EX_MUL && m->n == 1) k = m->c, m = expr_node(t, m->args[0]);
        if (!m || m->kind != EX_MOD || !positive_const(t, m->args[1], &c) || !mul_ok(k, c, &kc)) continue;
        ExprId num = m->args[0], quo = expr_mul(t, expr_floordiv(t, num, m->args[1]), expr_const(t, kc));
        for (int j = 0; j < n; j++)
            if (j != i && quo && a[j] == quo) {
                ExprId y = expr_mul(t, num, expr_const(t, k));
                if (y) a[i] = y, a[j] = expr_const(t, 0), joined = 1;
                break;
            }
    }
    if (!joined) return e;
    ExprId r = expr_const(t, k0);
    for (int i = 0; i < n; i++) r = expr_add(t, r, a[i]);
    return r;
}

/* Whether a is in [0, b) for an extent b of shape symbols (no range): a is
 * the var of a loop of extent b, plus terms that are 0 (a loop of one). */
static int below_extent(Opt *o, ExprId a, ExprId b)
{
    const ExprNode *x = expr_node(o->ex, a);
    int64_t l, h;
    if (!x || !o->ext) return 0;
    if (x->kind == EX_SYM) return x->c < o->k->nvars && x->c < o->vcap && o->ext[x->c] == b;
    if (x->kind != EX_ADD || x->c != 0) return 0;
    int vars = 0;
    for (int i = 0; i < x->n; i++) {
        const ExprNode *y = expr_node(o->ex, x->args[i]);
        if (y && y->kind == EX_SYM && y->c < o->k->nvars && y->c < o->vcap && o->ext[y->c] == b && !vars) vars = 1;
        else if (!range(o, x->args[i], &l, &h) || l != 0 || h != 0) return 0;
    }
    return vars;
}

static ExprId simplify(Opt *o, ExprId e)
{
    const ExprNode *x = expr_node(o->ex, e);
    ExprTable *t = o->ex;
    ExprId args[EXPR_MAX_ARGS], r;
    int64_t l, h, l2, h2, c;
    if (!x || x->kind == EX_CONST || x->kind == EX_SYM) return e;
    int kind = x->kind, n = x->n;
    int64_t k0 = x->c;
    memcpy(args, x->args, (size_t)n * sizeof *args); /* x may move as the table grows */
    for (int i = 0; i < n; i++) args[i] = simplify(o, args[i]);
    switch (kind) {
    case EX_ADD:
        r = expr_const(t, k0);
        for (int i = 0; i < n; i++) r = expr_add(t, r, args[i]);
        return rejoin(t, r);
    case EX_MUL:
        r = expr_const(t, k0);
        for (int i = 0; i < n; i++) r = expr_mul(t, r, args[i]);
        return r;
    case EX_FLOORDIV:
    case EX_MOD:
        if (positive_const(t, args[1], &c) && range(o, args[0], &l, &h) && fdiv(l, c) == fdiv(h, c))
            return kind == EX_FLOORDIV ? expr_const(t, fdiv(l, c))
                                       : expr_sub(t, args[0], expr_const(t, fdiv(l, c) * c));
        if (positive_const(t, args[1], &c) && (r = split_div(o, kind, args[0], c))) return r;
        if (!expr_as_const(t, args[1], &c) && below_extent(o, args[0], args[1]))
            return kind == EX_FLOORDIV ? expr_const(t, 0) : args[0];
        return kind == EX_FLOORDIV ? expr_floordiv(t, args[0], args[1]) : expr_mod(t, args[0], args[1]);
    case EX_MAX:
    case EX_MIN:
        if (range(o, args[0], &l, &h) && range(o, args[1], &l2, &h2) && (h <= l2 || h2 <= l))
            return (h <= l2) == (kind == EX_MAX) ? args[1] : args[0];
        return kind == EX_MAX ? expr_max(t, args[0], args[1]) : expr_min(t, args[0], args[1]);
    default: return e;
    }
}

/* ---- rewriting values and statements ---- */

/* [*lo, *hi] bounds integer value r (a constant or an index): 1, or 0. */
static int int_range(Opt *o, IrRef r, int64_t *lo, int64_t *hi)
{
    const IrNode *x = &o->k->nodes[r];
    if (x->kind == IR_CONST && !x->index && (x->dtype == KN_I64 || x->dtype == KN_I32 || x->dtype == KN_BOOL)) {
        *lo = *hi = (int64_t)x->imm;
        return in_big(*lo);
    }
    return x->kind == IR_INDEX && range(o, x->index, lo, hi);
}

/* A bool constant's value (0 or 1), or -1 if r is not one. */
static int bool_const(const Kernel *k, IrRef r)
{
    const IrNode *x = &k->nodes[r];
    return x->kind == IR_CONST && x->dtype == KN_BOOL ? x->imm != 0 : -1;
}

/* Value y (just built) folded where the ranges decide it: an index of one
 * value is that constant; a compare of integer indices and constants whose
 * ranges decide it is a bool constant; min and max of bools with a constant
 * operand and a where with a constant mask are the operand they pick, and
 * where(c, 1, 0) of bools is c. Integer and bool steps only, exact in every
 * target: a float keeps its every operation (x + 0 is not x for x = -0). A
 * pad's or a phase's mask is so decided once its loops are split where it
 * changes (pass guards). */
static IrRef fold(Opt *o, IrRef y)
{
    Kernel *k = o->k;
    IrNode x = k->nodes[y];
    int64_t l, h, l2, h2;
    int a, b;
    if (x.kind == IR_INDEX && range(o, x.index, &l, &h) && l == h) return ir_const(k, KN_I64, (double)l);
    if (x.kind != IR_OP) return y;
    switch (x.op) {
    case OP_CMPLT:
    case OP_CMPEQ:
        if (!int_range(o, x.a, &l, &h) || !int_range(o, x.b, &l2, &h2)) return y;
        if (x.op == OP_CMPLT && (h < l2 || l >= h2)) return ir_const(k, KN_BOOL, h < l2);
        if (x.op == OP_CMPEQ && ((l == h && l2 == h2) || h < l2 || h2 < l))
            return ir_const(k, KN_BOOL, l == h && l2 == h2 && l == l2);
        return y;
    case OP_MIN:
    case OP_MAX:
        if (x.dtype != KN_BOOL) return y;
        a = bool_const(k, x.a), b = bool_const(k, x.b);
        if (a == (x.op == OP_MAX) || b == (x.op == OP_MAX)) return ir_const(k, KN_BOOL, x.op == OP_MAX);
        return a >= 0 ? x.b : b >= 0 ? x.a : y;
    case OP_WHERE:
        if ((a = bool_const(k, x.a)) >= 0) return a ? x.b : x.c;
        if (x.dtype == KN_BOOL && bool_const(k, x.b) == 1 && bool_const(k, x.c) == 0) return x.a;
        return y;
    default: return y;
    }
}

static IrRef rw_value(Opt *o, IrRef r)
{
    Kernel *k = o->k;
    if (r < o->n0 && o->stamp[r] == o->gen) return o->memo[r];
    IrNode x = k->nodes[r]; /* a copy: building moves the array */
    IrRef y = r;
    switch (x.kind) {
    case IR_LOAD: {
        IrRef off = x.a ? rw_value(o, x.a) : 0;
        y = ir_load_at(k, x.buf, o->fx(o, x.index), off);
        break;
    }
    case IR_CHECK: y = ir_check(k, rw_value(o, x.a), x.index); break; /* a bound has no loop var (collapse checks) */
    case IR_INDEX: y = ir_index(k, o->fx(o, x.index)); break;
    case IR_RAND: {
        IrRef key = rw_value(o, x.a), ctr = rw_value(o, x.b);
        y = ir_rand(k, key, ctr, o->fx(o, x.index));
        break;
    }
    case IR_OP: {
        IrRef a = x.a ? rw_value(o, x.a) : 0, b = x.b ? rw_value(o, x.b) : 0, c = x.c ? rw_value(o, x.c) : 0;
        y = ir_op(k, (Op)x.op, (kn_dtype)x.dtype, a, b, c);
        break;
    }
    default: break; /* constants and accumulator values have no index */
    }
    if (y) y = fold(o, y);
    if (!y) o->oom = 1, y = r;
    if (r < o->n0) o->memo[r] = y, o->stamp[r] = o->gen;
    return y;
}

/* on: binds the loop's var to [0, extent-1] when the extent is a positive
 * constant; off: unbinds it (vars are bound once on any path). Either way
 * the ranges change, so a new memo scope starts. */
static void bind(Opt *o, const IrNode *loop, int on)
{
    int64_t e = 0; /* set where expr_as_const says so; gcc sees no such link once inlined */
    int v = loop->var;
    if (v >= o->vcap) return; /* a var made since the arrays were (a tile's): unknown */
    o->known[v] = (uint8_t)(on && expr_as_const(o->ex, loop->index, &e) && e >= 1);
    if (o->ext) o->ext[v] = on ? loop->index : 0;
    if (o->known[v]) o->lo[v] = 0, o->hi[v] = clamp_big(e - 1);
    o->gen++;
}

/* Applies o->fx to every index in the block of loop (0: the top level)
 * from first on. A statement whose value is rebuilt is built again after
 * it, in its place, so that values stay older than the statements using
 * them (as the renderers read them). */
static void rw_block(Opt *o, IrRef loop, IrRef first)
{
    Kernel *k = o->k;
    IrRef prev = 0;
    for (IrRef s = first; s && !o->oom; prev = s, s = k->nodes[s].next) {
        IrNode x = k->nodes[s];
        if (x.kind == IR_LOOP) {
            bind(o, &x, 1);
            rw_block(o, s, x.child);
            bind(o, &x, 0);
        }
        if (x.kind != IR_STORE && x.kind != IR_UPDATE) continue;
        ExprId e = x.kind == IR_STORE ? o->fx(o, x.index) : 0;
        IrRef v = rw_value(o, x.a), off = x.kind == IR_STORE && x.b ? rw_value(o, x.b) : 0, t;
        if (x.kind == IR_STORE && !e) o->oom = 1;
        if (o->oom || (v == x.a && e == x.index && off == x.b)) continue;
        IrBlock b = {loop, prev};
        t = x.kind == IR_STORE ? ir_store_at(k, &b, x.buf, e, off, v, x.op == OP_SUM) : ir_update(k, &b, x.var, v);
        if (!t) o->oom = 1;
        else k->nodes[t].next = x.next, s = t; /* the old statement drops out */
    }
}

/* One rewrite with fx of the body of loop (0: the kernel): 0 or KN_ENOMEM. */
static int rewrite(Opt *o, IrRef loop, IndexFn fx)
{
    Kernel *k = o->k;
    size_t bytes = (size_t)k->n * (sizeof *o->memo + sizeof *o->stamp);
    void *mem = kn_alloc(o->ctx, bytes ? bytes : 1);
    if (!mem) return KN_ENOMEM;
    memset(mem, 0, bytes);
    o->memo = mem;
    o->stamp = (uint32_t *)(o->memo + k->n);
    o->n0 = k->n;
    o->gen = 1;
    o->fx = fx;
    rw_block(o, loop, loop ? k->nodes[loop].child : k->body);
    kn_dealloc(o->ctx, mem, bytes ? bytes : 1);
    o->memo = NULL, o->stamp = NULL, o->n0 = 0;
    return o->oom ? KN_ENOMEM : 0;
}

/* ---- affine forms ---- */

/* Whether value r may change with s_v: an index below it names s_v (a
 * data-dependent offset is opaque: it changes with whatever it reads at). */
static int depends(const Kernel *k, IrRef r, int v, int depth)
{
    const IrNode *x = &k->nodes[r];
    if (depth > IR_MAX_DEPTH) return 1;
    if ((x->kind == IR_LOAD || x->kind == IR_INDEX || x->kind == IR_RAND || x->kind == IR_CHECK) &&
        expr_has_sym(k->ex, x->index, v))
        return 1;
    for (int i = 0; i < ir_nsrc(x); i++)
        if (depends(k, i == 0 ? x->a : i == 1 ? x->b : x->c, v, depth + 1)) return 1;
    return 0;
}

/* The coefficient c of s_v in a term that is s_v or c*s_v: 1, else 0. */
static int linear_term(const ExprTable *t, ExprId e, int v, int64_t *c)
{
    const ExprNode *x = expr_node(t, e), *f;
    if (x && x->kind == EX_SYM && x->c == v) return *c = 1, 1;
    if (!x || x->kind != EX_MUL || x->n != 1) return 0;
    f = expr_node(t, x->args[0]);
    if (!f || f->kind != EX_SYM || f->c != v) return 0;
    *c = x->c;
    return 1;
}

/* e = *coef * s_v + *rest with s_v not in rest: 1, or 0 when s_v occurs
 * otherwise (or memory ran out building rest). */
static int affine(ExprTable *t, ExprId e, int v, int64_t *coef, ExprId *rest)
{
    const ExprNode *x = expr_node(t, e);
    int64_t c = 0, ci;
    if (!x) return 0;
    if (!expr_has_sym(t, e, v)) {
        *coef = 0, *rest = e;
        return 1;
    }
    if (!linear_term(t, e, v, &c)) {
        if (x->kind != EX_ADD) return 0;
        for (int i = 0; i < x->n; i++) {
            if (!expr_has_sym(t, x->args[i], v)) continue;
            if (c || !linear_term(t, x->args[i], v, &ci)) return 0;
            c = ci;
        }
    }
    *coef = c;
    *rest = expr_sub(t, e, expr_mul(t, expr_const(t, c), expr_sym(t, v)));
    return *rest != 0;
}

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

enum { SPLIT_MAX = 16, SPLIT_CANDS = 8 }; /* splits in one kernel; divisors tried per loop */

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

static ExprId split_fx(Opt *o, ExprId e) { return simplify(o, subst(o, e)); }

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
        positive_const(o->ex, x->args[1], &c) && (c = gcd64(c, E)) > 1 && c < E) {
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
            bind(o, &x, 1);
            scan_block(o, sc, x.child);
            bind(o, &x, 0);
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
    bind(o, &x, 1);
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
    if (x.kind != IR_LOOP || x.dtype != LOOP_SERIAL || !positive_const(o->ex, x.index, &E) || E < 4 ||
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
    int err = rewrite(o, r, split_fx);
    bind_split(o, l, best, 0);
    k->nodes[l].index = outer;
    o->splits++;
    return err ? -1 : 1;
}

/* Splits the loops of the block from s, outer first (depth: loops around). */
static int split_block(Opt *o, IrRef s, int depth)
{
    for (; s; s = o->k->nodes[s].next) {
        if (o->k->nodes[s].kind != IR_LOOP) continue;
        int r;
        while ((r = split_once(o, s, depth)) == 1) {}
        if (r < 0) return KN_ENOMEM;
        IrNode x = o->k->nodes[s];
        bind(o, &x, 1);
        r = split_block(o, x.child, depth + 1);
        bind(o, &x, 0);
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
    if (!d || !affine(t, d, v, &c, &rest) || !c || !range(o, rest, &l, &h)) return;
    if (c < 0 && x->op == OP_CMPEQ) { /* -c*v - rest == 0 */
        int64_t l0 = l;
        c = -c, l = -h, h = -l0;
    }
    if (c > 0) /* decided true (<) or false (==) below the first point, false from the second on */
        p[np++] = fdiv(-h + c - 1, c), p[np++] = x->op == OP_CMPLT ? fdiv(-l + c - 1, c) : fdiv(-l, c) + 1;
    else /* c*v + rest < 0: false up to the first point, true from the second on */
        p[np++] = fdiv(l, -c) + 1, p[np++] = fdiv(h, -c) + 1;
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
            bind(o, &x, 1);
            guard_scan(o, g, x.child);
            bind(o, &x, 0);
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
    if (x.kind != IR_LOOP || x.dtype != LOOP_SERIAL || !positive_const(o->ex, x.index, &E) || E < 2 ||
        k->n > o->guard_max)
        return 0;
    GuardScan g = {x.var, 0, E, {0}, 0, kn_alloc(o->ctx, k->n)};
    if (!g.seen) return -1;
    memset(g.seen, 0, k->n);
    bind(o, &x, 1);
    guard_scan(o, &g, x.child);
    bind(o, &x, 0);
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
        bind(o, &y, 1);
        int err = rewrite(o, piece[i], split_fx);
        bind(o, &y, 0);
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
        bind(o, &x, 1);
        r = guard_block(o, s, x.child, cut);
        bind(o, &x, 0);
        if (r) return r;
        s = o->k->nodes[s].next;
    }
    return 0;
}

/* Cuts until no loop is (a cut may let an outer loop's masks depend on it alone). */
static int guards(Opt *o)
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
    return affine(o->ex, e, o->var_o, &a, &r1) && affine(o->ex, r1, o->var_i, &b, &r2) && mul_ok(b, o->ext_i, &b) &&
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
    if (!affine(o->ex, e, o->var_o, &a, &r1) || !affine(o->ex, r1, o->var_i, &b, &r2)) return 0;
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
    if ((!sym && !positive_const(o->ex, k->nodes[l].index, &eo)) || !positive_const(o->ex, k->nodes[in].index, &ei) ||
        (!sym && !mul_ok(eo, ei, &e)))
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
    if (rewrite(o, in, collapse_index)) return -1;
    ExprId ext = sym ? expr_mul(o->ex, k->nodes[l].index, expr_const(o->ex, ei)) : expr_const(o->ex, e);
    if (!ext) return -1;
    k->nodes[l].index = ext;
    k->nodes[l].child = k->nodes[in].child;
    return 1;
}

static int collapse_block(Opt *o, IrRef s)
{
    for (; s; s = o->k->nodes[s].next) {
        if (o->k->nodes[s].kind != IR_LOOP) continue;
        int r;
        while ((r = collapse_once(o, s)) == 1) {}
        if (r < 0 || collapse_block(o, o->k->nodes[s].child)) return KN_ENOMEM;
    }
    return 0;
}

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
#define TILE 16

/* e with s_v replaced by by. */
static ExprId expr_subst(ExprTable *t, ExprId e, int v, ExprId by)
{
    const ExprNode *x = expr_node(t, e);
    if (!x || !expr_has_sym(t, e, v)) return e;
    if (x->kind == EX_SYM) return by;
    int kind = x->kind, n = x->n;
    int64_t c = x->c;
    ExprId a[EXPR_MAX_ARGS], r;
    memcpy(a, x->args, (size_t)n * sizeof *a); /* x may move as the table grows */
    for (int i = 0; i < n; i++)
        if (!(a[i] = expr_subst(t, a[i], v, by))) return 0;
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
static ExprId tile_fx(Opt *o, ExprId e)
{
    ExprTable *t = o->ex;
    ExprId by = expr_add(t, expr_mul(t, expr_sym(t, o->tile_o), expr_const(t, o->tile_t)), expr_sym(t, o->tile_z));
    e = by ? expr_subst(t, e, o->tile_o, by) : 0;
    if (!e || o->tile_i < 0) return e;
    by = expr_add(t, expr_mul(t, expr_sym(t, o->tile_i), expr_const(t, o->tile_t)), expr_sym(t, o->tile_w));
    return by ? expr_subst(t, e, o->tile_i, by) : 0;
}

/* The coefficient of s_v in e when e is affine in it: 1, else 0. */
static int coef_of(Opt *o, ExprId e, int v, int64_t *c)
{
    ExprId rest;
    return affine(o->ex, e, v, c, &rest);
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
static IrRef rebuild(Opt *o, IrRef r, IndexFn fx)
{
    Kernel *k = o->k;
    size_t bytes = (size_t)k->n * (sizeof *o->memo + sizeof *o->stamp);
    void *mem = kn_alloc(o->ctx, bytes);
    if (!mem) return 0;
    memset(mem, 0, bytes);
    o->memo = mem, o->stamp = (uint32_t *)(o->memo + k->n), o->n0 = k->n, o->gen = 1, o->fx = fx;
    IrRef y = rw_value(o, r);
    kn_dealloc(o->ctx, mem, bytes);
    o->memo = NULL, o->stamp = NULL, o->n0 = 0;
    return o->oom ? 0 : y;
}

static int const_extent(Opt *o, IrRef l, int64_t *e) { return expr_as_const(o->ex, o->k->nodes[l].index, e); }

static int colsum_cascade(Opt *o, IrRef l, IrRef z, const IrNode *I, const IrNode *S, const IrNode *U, kn_dtype dt,
                          int64_t ei);

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
    if (!const_extent(o, l, &eo) || !const_extent(o, in, &ei) || eo % TILE || eo < 2 * TILE || ei < 2 ||
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
    ExprId ez = tile_fx(o, S.index);
    IrBlock zb = {z, 0};
    if (!ez || !ir_store(k, &zb, S.buf, ez, ir_const(k, (kn_dtype)A.dtype, 0))) return -1;
    if (ei > CASCADE_RUN) { /* rows in cascaded blocks */
        if (colsum_cascade(o, l, z, &I, &S, &U, (kn_dtype)A.dtype, ei)) return -1;
        k->nodes[l].index = expr_const(o->ex, eo / TILE);
        return 1;
    }
    /* the sum loop, the only statement of i's body */
    IrBlock ib = {in, 0};
    IrRef w = ir_loop(k, &ib, expr_const(o->ex, TILE), LOOP_SERIAL, 1);
    if (!w) return -1;
    o->tile_z = k->nodes[w].var;
    ExprId ew = tile_fx(o, S.index);
    IrRef v = ew ? rebuild(o, U.a, tile_fx) : 0;
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
    if (!const_extent(o, l, &eo) || !const_extent(o, in, &ei) || eo % TILE || ei % TILE || eo < 2 * TILE ||
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
    if (rewrite(o, w, tile_fx)) return -1;
    k->nodes[l].index = expr_const(o->ex, eo / TILE);
    k->nodes[in].index = expr_const(o->ex, ei / TILE);
    return 1;
}

/* Both rules on every serial loop of the block from s, outermost first. */
static int tile_block(Opt *o, IrRef s)
{
    for (; s; s = o->k->nodes[s].next) {
        if (o->k->nodes[s].kind != IR_LOOP || o->k->nodes[s].dtype != LOOP_SERIAL) continue;
        int r = tile_colsum(o, s);
        if (!r) r = tile_transpose(o, s);
        if (r < 0) return KN_ENOMEM;
        if (!r && tile_block(o, o->k->nodes[s].child)) return KN_ENOMEM;
    }
    return 0;
}

/* ---- pass 6: marks ---- */

/* Elements of work in loop l: its extent times the statements below,
 * loops counted by their work (an extent that is a min of a constant, a
 * cascade's level, by that constant); -1 when an extent is not constant. */
static int min_bound(const ExprTable *t, ExprId e, int64_t *c) /* e is min(c, ...): 1 and *c */
{
    const ExprNode *x = expr_node(t, e);
    return x && x->kind == EX_MIN && (expr_as_const(t, x->args[0], c) || expr_as_const(t, x->args[1], c));
}

static int64_t work(Opt *o, IrRef l)
{
    int64_t e, sum = 0, w;
    if (!min_bound(o->ex, o->k->nodes[l].index, &e) && (!extent_at_hint(o, o->k->nodes[l].index, &e) || e < 0))
        return -1;
    for (IrRef s = o->k->nodes[l].child; s; s = o->k->nodes[s].next) {
        w = o->k->nodes[s].kind == IR_LOOP ? work(o, s) : 1;
        if (w < 0) return -1;
        sum = clamp_big(sum + w);
    }
    return mul_ok(e, sum, &w) ? w : BIG;
}

/* What a subtree does, for the marks. */
typedef struct {
    uint8_t *stored, *loaded, *declared; /* per buffer, buffer, accumulator */
    uint8_t *seen;                       /* per node: value visited */
    ExprId *at;                          /* per buffer: the index of its first load or store */
    uint8_t *mixed;                      /* per buffer: loaded or stored at two indices */
    int var;                             /* loads must have stride 0 or 1 in s_var; -1: any */
    int nstores, nloops, outside_acc, decls, updates, dup_store, strided;
} Facts;

static void note_index(Facts *f, int buf, ExprId e)
{
    if (f->at[buf] && f->at[buf] != e) f->mixed[buf] = 1;
    f->at[buf] = e;
}

static void facts_value(Opt *o, IrRef r, Facts *f)
{
    const IrNode *x = &o->k->nodes[r];
    int64_t a;
    ExprId rest;
    if (f->seen[r]) return;
    f->seen[r] = 1;
    if (x->kind == IR_LOAD) {
        f->loaded[x->buf] = 1;
        note_index(f, x->buf, x->index);
        if (f->var >= 0 && !(affine(o->ex, x->index, f->var, &a, &rest) && (a == 0 || a == 1))) f->strided = 1;
        if (x->a && f->var >= 0 && depends(o->k, x->a, f->var, 0)) f->strided = 1; /* a gather across lanes */
        if (x->a) facts_value(o, x->a, f);
    }
    if (x->kind == IR_CHECK) facts_value(o, x->a, f);
    if (x->kind == IR_ACCVAL && !f->declared[x->var]) f->outside_acc = 1;
    if (x->kind == IR_OP || x->kind == IR_RAND) {
        if (x->a) facts_value(o, x->a, f);
        if (x->b) facts_value(o, x->b, f);
        if (x->c) facts_value(o, x->c, f);
    }
}

static void facts_block(Opt *o, IrRef s, Facts *f)
{
    for (; s; s = o->k->nodes[s].next) {
        const IrNode *x = &o->k->nodes[s];
        switch (x->kind) {
        case IR_LOOP: f->nloops++, facts_block(o, x->child, f); break;
        case IR_ACC: f->decls++, f->declared[x->var] = 1; break;
        case IR_UPDATE:
            f->updates++;
            if (!f->declared[x->var]) f->outside_acc = 1;
            facts_value(o, x->a, f);
            break;
        default:
            f->nstores++;
            if (f->stored[x->buf]) f->dup_store = 1;
            f->stored[x->buf] = 1;
            note_index(f, x->buf, x->index);
            facts_value(o, x->a, f);
            if (x->b) facts_value(o, x->b, f);
            if (x->b && f->var >= 0 && depends(o->k, x->b, f->var, 0)) f->strided = 1; /* lanes may collide */
            if (x->op == OP_SUM) f->loaded[x->buf] = 1; /* += reads where it writes */
        }
    }
}

static size_t facts_bytes(const Kernel *k)
{
    return (size_t)k->nbufs * sizeof(ExprId) + 3 * (size_t)k->nbufs + (size_t)k->naccs + k->n + 1;
}

/* Facts of the block from s, loads checked against s_var (-1: not); 0 or
 * KN_ENOMEM. facts_free releases them. */
static int facts(Opt *o, IrRef s, int var, Facts *f)
{
    size_t n = facts_bytes(o->k);
    memset(f, 0, sizeof *f);
    void *mem = kn_alloc(o->ctx, n);
    if (!mem) return KN_ENOMEM;
    memset(mem, 0, n);
    f->at = mem; /* first: aligned for ExprId */
    f->stored = (uint8_t *)(f->at + o->k->nbufs);
    f->loaded = f->stored + o->k->nbufs, f->mixed = f->loaded + o->k->nbufs;
    f->declared = f->mixed + o->k->nbufs;
    f->seen = f->declared + o->k->naccs;
    f->var = var;
    facts_block(o, s, f);
    return 0;
}

static void facts_free(Opt *o, Facts *f) { kn_dealloc(o->ctx, f->at, facts_bytes(o->k)); }

/* The elements of each stored buffer that one iteration of s_v touches:
 * every store, and every load of a buffer that is stored, at rest + a*s_v
 * with one a != 0 per buffer and the rests' union spanning less than |a|,
 * so distinct iterations touch disjoint elements (an iteration may read
 * back what it wrote). The loops between bind their ranges as the walk goes. */
typedef struct {
    int64_t a, lo, hi;
    uint8_t any, bad;
} Region;

static void region_add(Opt *o, Region *r, ExprId index, int v)
{
    int64_t a, l, h;
    ExprId rest;
    if (!affine(o->ex, index, v, &a, &rest) || a == 0 || !range(o, rest, &l, &h) || (r->any && r->a != a)) {
        r->bad = 1;
        return;
    }
    if (!r->any || l < r->lo) r->lo = l;
    if (!r->any || h > r->hi) r->hi = h;
    r->a = a, r->any = 1;
}

static void region_value(Opt *o, IrRef r, int v, const uint8_t *stored, uint8_t *seen, Region *reg)
{
    const IrNode *x = &o->k->nodes[r];
    if (seen[r]) return;
    seen[r] = 1;
    if (x->kind == IR_LOAD && stored[x->buf]) region_add(o, &reg[x->buf], x->index, v);
    if (x->kind == IR_LOAD && stored[x->buf] && x->a) reg[x->buf].bad = 1; /* where it reads depends on data */
    if (x->kind == IR_LOAD && x->a) region_value(o, x->a, v, stored, seen, reg);
    if (x->kind == IR_CHECK) region_value(o, x->a, v, stored, seen, reg);
    if (x->kind != IR_OP && x->kind != IR_RAND) return;
    if (x->a) region_value(o, x->a, v, stored, seen, reg);
    if (x->b) region_value(o, x->b, v, stored, seen, reg);
    if (x->c) region_value(o, x->c, v, stored, seen, reg);
}

static void region_block(Opt *o, IrRef s, int v, const uint8_t *stored, uint8_t *seen, Region *reg)
{
    for (; s; s = o->k->nodes[s].next) {
        IrNode x = o->k->nodes[s];
        if (x.kind == IR_LOOP) {
            bind(o, &x, 1);
            region_block(o, x.child, v, stored, seen, reg);
            bind(o, &x, 0);
            continue;
        }
        if (x.kind == IR_STORE) region_add(o, &reg[x.buf], x.index, v);
        if (x.kind == IR_STORE && x.b) reg[x.buf].bad = 1, region_value(o, x.b, v, stored, seen, reg); /* scatter */
        if (x.kind == IR_STORE || x.kind == IR_UPDATE) region_value(o, x.a, v, stored, seen, reg);
    }
}

/* 1 if the iterations of loop l touch disjoint parts of what it stores, 0
 * if not, -1 out of memory. */
static int disjoint(Opt *o, IrRef l, const uint8_t *stored)
{
    size_t bytes = (size_t)o->k->nbufs * sizeof(Region) + o->k->n;
    Region *reg = kn_alloc(o->ctx, bytes);
    if (!reg) return -1;
    memset(reg, 0, bytes);
    uint8_t *seen = (uint8_t *)(reg + o->k->nbufs);
    region_block(o, o->k->nodes[l].child, o->k->nodes[l].var, stored, seen, reg);
    int ok = 1;
    for (int b = 0; b < o->k->nbufs && ok; b++)
        ok = !stored[b] || o->k->bufs[b].role == BUF_TMP || /* each run writes its tmp before reading it (ir.h) */
             (!reg[b].bad && reg[b].any && reg[b].hi - reg[b].lo < (reg[b].a < 0 ? -reg[b].a : reg[b].a));
    kn_dealloc(o->ctx, reg, bytes);
    return ok;
}

static int parallel_ok(Opt *o, IrRef l, int64_t threshold, int *ok)
{
    Facts f;
    int64_t w = work(o, l);
    *ok = 0;
    if (o->k->nodes[l].dtype != LOOP_SERIAL || w <= threshold) return 0;
    if (facts(o, o->k->nodes[l].child, -1, &f)) return KN_ENOMEM;
    int clean = f.nstores > 0 && !f.outside_acc;
    int d = clean ? disjoint(o, l, f.stored) : 0;
    facts_free(o, &f);
    if (d < 0) return KN_ENOMEM;
    *ok = d;
    return 0;
}

static int vector_ok(Opt *o, IrRef l, uint32_t width, int *ok)
{
    Facts f;
    int64_t e, a;
    ExprId rest;
    const IrNode *x = &o->k->nodes[l];
    *ok = 0;
    if (x->dtype != LOOP_SERIAL || !extent_at_hint(o, x->index, &e) || e < (int64_t)width) return 0;
    int v = x->var;
    IrRef body = x->child;
    if (facts(o, body, v, &f)) return KN_ENOMEM;
    int clean = f.nstores + f.updates > 0 && !f.nloops && !f.decls && !f.dup_store && !f.strided;
    for (int b = 0; b < o->k->nbufs && clean; b++) clean = !(f.stored[b] && f.loaded[b] && f.mixed[b]);
    facts_free(o, &f);
    for (IrRef s = body; s && clean; s = o->k->nodes[s].next) /* stores and updates, as checked */
        clean = o->k->nodes[s].kind == IR_UPDATE || (affine(o->ex, o->k->nodes[s].index, v, &a, &rest) && a == 1);
    *ok = clean;
    return 0;
}

/* Vector marks on the innermost loops of the block from s. */
static int mark_vector(Opt *o, IrRef s, uint32_t width)
{
    for (; s; s = o->k->nodes[s].next) {
        int ok;
        if (o->k->nodes[s].kind != IR_LOOP) continue;
        if (mark_vector(o, o->k->nodes[s].child, width) || vector_ok(o, s, width, &ok)) return KN_ENOMEM;
        if (ok) o->k->nodes[s].dtype = LOOP_VECTOR, o->k->nodes[s].width = width;
    }
    return 0;
}

static int mark(Opt *o, const LoopOptions *opt)
{
    int64_t threshold = opt->parallel_threshold > 0 ? opt->parallel_threshold : DEFAULT_PAR_THRESHOLD;
    uint32_t width = opt->vector_width ? opt->vector_width : DEFAULT_VECTOR_WIDTH;
    for (IrRef s = o->k->body; s; s = o->k->nodes[s].next) {
        int ok;
        if (o->k->nodes[s].kind != IR_LOOP) continue;
        if (parallel_ok(o, s, threshold, &ok)) return KN_ENOMEM;
        if (ok) o->k->nodes[s].dtype = LOOP_PARALLEL;
    }
    return mark_vector(o, o->k->body, width);
}

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
        else sum = clamp_big(sum + n);
    }
    if (!sum && !sym) return 0;
    if (!expr_as_const(k->ex, x->index, &e)) return -1;
    if (sym) return e ? -1 : 0;
    return mul_ok(e, sum, &w) ? w : BIG;
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

static ExprId cs_fx(Opt *o, ExprId e) { return expr_subst(o->ex, e, o->cs_v, o->cs_by); }

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
    ExprId zw = expr_sym(o->ex, o->tile_z), e = dst >= 0 ? zw : tile_fx(o, S->index);
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
    IrRef v = rebuild(o, U->a, tile_fx);
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
static int colsum_cascade(Opt *o, IrRef l, IrRef z, const IrNode *I, const IrNode *S, const IrNode *U, kn_dtype dt,
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
        n++, w = u < 0 || w < 0 ? -1 : clamp_big(w + u);
        if (k->nodes[c].kind != IR_UPDATE) direct = 0;
        else if (k->nodes[k->nodes[c].a].kind != IR_ACCVAL) raw = 1;
    }
    if (direct && raw && x.dtype == LOOP_VECTOR) run *= x.width > CASCADE_LANES ? x.width : CASCADE_LANES;
    int known = expr_as_const(o->ex, x.index, &e);
    if (!n || (known && w >= 0 && mul_ok(e, w, &total) && total <= run)) return 0;
    if (direct) return cs_split(o, parent, l, acc, dt, run / n > 1 ? run / n : 1, depth);
    if (n == 1 && w > 1 && w <= CASCADE_RUN / 2) return cs_split(o, parent, l, acc, dt, CASCADE_RUN / w, depth);
    for (IrRef c = x.child, next; c; c = next) { /* an accumulator per iteration for each nest */
        int64_t u = cs_count(k, c, acc);
        next = k->nodes[c].next;
        if (k->nodes[c].kind == IR_LOOP && (u < 0 || u > 1) && cs_wrap(o, l, c, acc, dt, depth + 1)) return -1;
    }
    if (known && mul_ok(e, n, &total) && total <= CASCADE_RUN) return 0;
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

static int cascade(Opt *o) { return cs_block(o, 0, 0, o->k->naccs) || o->oom ? KN_ENOMEM : 0; }

/* ---- pass 8: unroll ----
 * An innermost loop the marks left serial, of constant extent 2 to
 * UNROLL_MAX, whose body is stores and updates of at most UNROLL_NODES
 * value nodes times its extent, becomes unroll(extent): a target writes its
 * iterations out one after the other (the C target: a block each, the var
 * a constant there), so no loop control is left and each copy's index
 * arithmetic folds where the compiler folds constants. The iterations and
 * their operations keep their order. */
#define UNROLL_MAX 8
#define UNROLL_NODES 512

/* Value nodes below r not seen yet, counted up to limit. */
static int64_t count_nodes(const Kernel *k, IrRef r, uint8_t *seen, int64_t limit)
{
    if (seen[r] || limit <= 0) return 0;
    seen[r] = 1;
    const IrNode *x = &k->nodes[r];
    int64_t n = 1;
    for (int i = 0; i < ir_nsrc(x) && n < limit; i++)
        n += count_nodes(k, i == 0 ? x->a : i == 1 ? x->b : x->c, seen, limit - n);
    return n;
}

/* 1 if loop l qualifies, 0 if not, -1 out of memory. */
static int unroll_ok(Opt *o, IrRef l)
{
    const Kernel *k = o->k;
    int64_t e, nodes = 0;
    if (k->nodes[l].dtype != LOOP_SERIAL || !const_extent(o, l, &e) || e < 2 || e > UNROLL_MAX) return 0;
    for (IrRef s = k->nodes[l].child; s; s = k->nodes[s].next)
        if (k->nodes[s].kind != IR_STORE && k->nodes[s].kind != IR_UPDATE) return 0;
    uint8_t *seen = kn_alloc(o->ctx, k->n);
    if (!seen) return -1;
    memset(seen, 0, k->n);
    for (IrRef s = k->nodes[l].child; s; s = k->nodes[s].next) {
        const IrNode *x = &k->nodes[s];
        nodes += count_nodes(k, x->a, seen, UNROLL_NODES + 1);
        if (x->kind == IR_STORE && x->b) nodes += count_nodes(k, x->b, seen, UNROLL_NODES + 1);
    }
    kn_dealloc(o->ctx, seen, k->n);
    return nodes * e <= UNROLL_NODES;
}

static int unroll_block(Opt *o, IrRef s)
{
    for (; s; s = o->k->nodes[s].next) {
        if (o->k->nodes[s].kind != IR_LOOP) continue;
        if (unroll_block(o, o->k->nodes[s].child)) return KN_ENOMEM;
        int ok = unroll_ok(o, s);
        if (ok < 0) return KN_ENOMEM;
        if (ok) {
            int64_t e = 0; /* unroll_ok found it constant */
            const_extent(o, s, &e);
            o->k->nodes[s].dtype = LOOP_UNROLL, o->k->nodes[s].width = (uint32_t)e;
        }
    }
    return 0;
}

/* ---- the passes in order ---- */

static ExprId simplify_fx(Opt *o, ExprId e) { return simplify(o, e); }

/* ---- ranges for targets ---- */

enum { RANGE_VARS = 64 }; /* vars loopopt_range knows; kernels have a handful */

/* Binds the var of every loop reachable from s to the union of its ranges. */
static int bind_all(const Kernel *k, IrRef s, int64_t *hi, uint8_t *known, int depth)
{
    int64_t e;
    for (; s; s = k->nodes[s].next) {
        const IrNode *x = &k->nodes[s];
        if (x->kind != IR_LOOP) continue;
        if (depth > IR_MAX_NEST || x->var < 0 || x->var >= RANGE_VARS || !expr_as_const(k->ex, x->index, &e) || e < 1)
            return 0;
        if (!known[x->var] || clamp_big(e - 1) > hi[x->var]) hi[x->var] = clamp_big(e - 1);
        known[x->var] = 1;
        if (!bind_all(k, x->child, hi, known, depth + 1)) return 0;
    }
    return 1;
}

int loopopt_range(const Kernel *k, ExprId e, int64_t *lo, int64_t *hi)
{
    int64_t vlo[RANGE_VARS] = {0}, vhi[RANGE_VARS] = {0};
    uint8_t known[RANGE_VARS] = {0};
    if (!k || k->nvars > RANGE_VARS || !bind_all(k, k->body, vhi, known, 0)) return 0;
    Opt o;
    memset(&o, 0, sizeof o);
    o.k = (Kernel *)k, o.ex = k->ex, o.lo = vlo, o.hi = vhi, o.known = known, o.vcap = RANGE_VARS;
    return range(&o, e, lo, hi);
}

/* The per-var arrays of o for k's vars now (*mem, *bytes: the block, which
 * this frees and replaces): 1, or 0 out of memory. */
static int opt_vars(Opt *o, void **mem, size_t *bytes)
{
    kn_dealloc(o->ctx, *mem, *bytes);
    size_t nv = (size_t)o->k->nvars + SPLIT_MAX + 1; /* split adds up to SPLIT_MAX vars */
    *bytes = nv * (2 * sizeof(int64_t) + sizeof(ExprId) + 1);
    if (!(*mem = kn_alloc(o->ctx, *bytes))) return *bytes = 0, 0;
    memset(*mem, 0, *bytes);
    o->lo = *mem, o->hi = o->lo + nv, o->ext = (ExprId *)(o->hi + nv), o->known = (uint8_t *)(o->ext + nv);
    o->vcap = (int)nv;
    return 1;
}

int loopopt_run(kn_ctx *ctx, Kernel *k, const LoopOptions *opt)
{
    LoopOptions none;
    Opt o;
    int err = 0;
    if (!opt) memset(&none, 0, sizeof none), opt = &none;
    memset(&o, 0, sizeof o);
    o.ctx = ctx, o.k = k, o.ex = k->ex, o.hint = opt->hint;
    void *mem = NULL;
    size_t bytes = 0;
    if (!opt_vars(&o, &mem, &bytes)) return kn_errs(ctx, KN_ENOMEM, "loopopt: kernel %.31s: out of memory", k->name);
    if (!(opt->skip & LOOPOPT_NO_SIMPLIFY)) err = rewrite(&o, 0, simplify_fx);
    if (!err && !(opt->skip & LOOPOPT_NO_SPLIT)) err = split_block(&o, k->body, 0);
    if (!err && !(opt->skip & LOOPOPT_NO_GUARDS)) err = guards(&o);
    if (!err && !(opt->skip & LOOPOPT_NO_COLLAPSE)) err = collapse_block(&o, k->body);
    int nv = k->nvars;
    if (!err && !(opt->skip & LOOPOPT_NO_TILE)) err = tile_block(&o, k->body);
    if (!err && k->nvars != nv && !(opt->skip & LOOPOPT_NO_SIMPLIFY)) /* the tiles' loops: new vars, new indices */
        err = !opt_vars(&o, &mem, &bytes) || rewrite(&o, 0, simplify_fx);
    else if (!err && k->nvars != nv) err = !opt_vars(&o, &mem, &bytes);
    if (!err && !(opt->skip & LOOPOPT_NO_MARK)) err = mark(&o, opt);
    if (!err && !(opt->skip & LOOPOPT_NO_CASCADE)) err = cascade(&o);
    if (!err && !(opt->skip & LOOPOPT_NO_UNROLL)) err = unroll_block(&o, k->body);
    kn_dealloc(ctx, mem, bytes);
    return err ? kn_errs(ctx, KN_ENOMEM, "loopopt: kernel %.31s: out of memory", k->name) : 0;
}
