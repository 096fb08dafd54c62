/*
 * loopopt.c — loop-IR passes (loopopt.h): index simplification with loop
 * ranges, splitting of loops at divisors and at their masks' points,
 * collapsing of perfectly nested loops, tiling of strided nests, parallel
 * and vector marks, the cascade of long float sums, unroll marks. This file
 * holds what the passes share and runs them in order (loopopt_run); the
 * passes after simplification have files of their own (loopopt_int.h).
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
#include <string.h>

#include "loopopt_int.h"

/* ---- checked integer steps ---- */

int64_t opt_clamp_big(int64_t v) { return v > BIG ? BIG : v < -BIG ? -BIG : v; }
static int in_big(int64_t v) { return v < BIG && v > -BIG; }

int opt_mul_ok(int64_t a, int64_t b, int64_t *r)
{
    double d = (double)a * (double)b;
    if (d >= (double)BIG || d <= -(double)BIG) return 0;
    *r = a * b;
    return 1;
}

int64_t opt_fdiv(int64_t a, int64_t c) /* floor(a / c), c > 0 */
{
    int64_t q = a / c;
    return (a % c != 0 && a < 0) ? q - 1 : q;
}

int opt_positive_const(const ExprTable *t, ExprId e, int64_t *c)
{
    return expr_as_const(t, e, c) && *c > 0;
}

/* ---- ranges ---- */

/* [*lo, *hi] bounds every value of e with the vars in scope: 1, or 0 when
 * nothing is known. */
int opt_range(const Opt *o, ExprId e, int64_t *lo, int64_t *hi)
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
            if (!opt_range(o, x->args[i], &l2, &h2)) return 0;
            l += l2, h += h2;
            if (!in_big(l) || !in_big(h)) return 0;
        }
        break;
    case EX_MUL:
        l = h = x->c;
        if (!in_big(l)) return 0;
        for (int i = 0; i < x->n; i++) {
            int64_t p[4];
            if (!opt_range(o, x->args[i], &l2, &h2)) return 0;
            if (!opt_mul_ok(l, l2, &p[0]) || !opt_mul_ok(l, h2, &p[1]) || !opt_mul_ok(h, l2, &p[2]) || !opt_mul_ok(h, h2, &p[3]))
                return 0;
            l = h = p[0];
            for (int j = 1; j < 4; j++) l = p[j] < l ? p[j] : l, h = p[j] > h ? p[j] : h;
        }
        break;
    case EX_FLOORDIV:
        if (!opt_positive_const(o->ex, x->args[1], &c) || !opt_range(o, x->args[0], &l, &h)) return 0;
        l = opt_fdiv(l, c), h = opt_fdiv(h, c);
        break;
    case EX_MOD:
        if (!opt_positive_const(o->ex, x->args[1], &c)) return 0;
        if (opt_range(o, x->args[0], &l, &h) && opt_fdiv(l, c) == opt_fdiv(h, c)) l -= opt_fdiv(l, c) * c, h -= opt_fdiv(h, c) * c;
        else l = 0, h = c - 1;
        break;
    case EX_MAX:
    case EX_MIN:
        if (!opt_range(o, x->args[0], &l, &h) || !opt_range(o, x->args[1], &l2, &h2)) return 0;
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
int opt_extent_at_hint(Opt *o, ExprId e, int64_t *v)
{
    int64_t hi;
    if (expr_as_const(o->ex, e, v)) return 1;
    o->hinting = 1;
    int ok = opt_range(o, e, v, &hi) && *v == hi;
    o->hinting = 0;
    return ok;
}

/* ---- pass 1: simplify ----
 * x//c = q and x%c = x - q*c when c > 0 and x stays in [q*c, q*c + c);
 * a sum splits as below; max and min pick the operand that always wins.
 * Rebuilt bottom-up. */

int64_t opt_gcd64(int64_t a, int64_t b)
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
        g = opt_gcd64(g, term_coef(t, terms[j]));
        if (g <= 1) return 0;
        ExprId r = expr_const(t, k0), big = expr_const(t, 0);
        for (int i = j + 1; i < n; i++) r = expr_add(t, r, terms[i]);
        if (!r || !opt_range(o, r, &l, &h) || l < 0 || h >= g) continue;
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
        if (!m || m->kind != EX_MOD || !opt_positive_const(t, m->args[1], &c) || !opt_mul_ok(k, c, &kc)) continue;
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
        else if (!opt_range(o, x->args[i], &l, &h) || l != 0 || h != 0) return 0;
    }
    return vars;
}

ExprId opt_simplify(Opt *o, ExprId e)
{
    const ExprNode *x = expr_node(o->ex, e);
    ExprTable *t = o->ex;
    ExprId args[EXPR_MAX_ARGS], r;
    int64_t l, h, l2, h2, c;
    if (!x || x->kind == EX_CONST || x->kind == EX_SYM) return e;
    int kind = x->kind, n = x->n;
    int64_t k0 = x->c;
    memcpy(args, x->args, (size_t)n * sizeof *args); /* x may move as the table grows */
    for (int i = 0; i < n; i++) args[i] = opt_simplify(o, args[i]);
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
        if (opt_positive_const(t, args[1], &c) && opt_range(o, args[0], &l, &h) && opt_fdiv(l, c) == opt_fdiv(h, c))
            return kind == EX_FLOORDIV ? expr_const(t, opt_fdiv(l, c))
                                       : expr_sub(t, args[0], expr_const(t, opt_fdiv(l, c) * c));
        if (opt_positive_const(t, args[1], &c) && (r = split_div(o, kind, args[0], c))) return r;
        if (!expr_as_const(t, args[1], &c) && below_extent(o, args[0], args[1]))
            return kind == EX_FLOORDIV ? expr_const(t, 0) : args[0];
        return kind == EX_FLOORDIV ? expr_floordiv(t, args[0], args[1]) : expr_mod(t, args[0], args[1]);
    case EX_MAX:
    case EX_MIN:
        if (opt_range(o, args[0], &l, &h) && opt_range(o, args[1], &l2, &h2) && (h <= l2 || h2 <= l))
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
    return x->kind == IR_INDEX && opt_range(o, x->index, lo, hi);
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
    if (x.kind == IR_INDEX && opt_range(o, x.index, &l, &h) && l == h) return ir_const(k, KN_I64, (double)l);
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

IrRef opt_rw_value(Opt *o, IrRef r)
{
    Kernel *k = o->k;
    if (r < o->n0 && o->stamp[r] == o->gen) return o->memo[r];
    IrNode x = k->nodes[r]; /* a copy: building moves the array */
    IrRef y = r;
    switch (x.kind) {
    case IR_LOAD: {
        IrRef off = x.a ? opt_rw_value(o, x.a) : 0;
        y = ir_load_at(k, x.buf, o->fx(o, x.index), off);
        break;
    }
    case IR_CHECK: y = ir_check(k, opt_rw_value(o, x.a), x.index); break; /* a bound has no loop var (collapse checks) */
    case IR_INDEX: y = ir_index(k, o->fx(o, x.index)); break;
    case IR_RAND: {
        IrRef key = opt_rw_value(o, x.a), ctr = opt_rw_value(o, x.b);
        y = ir_rand(k, key, ctr, o->fx(o, x.index));
        break;
    }
    case IR_OP: {
        IrRef a = x.a ? opt_rw_value(o, x.a) : 0, b = x.b ? opt_rw_value(o, x.b) : 0, c = x.c ? opt_rw_value(o, x.c) : 0;
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
void opt_bind(Opt *o, const IrNode *loop, int on)
{
    int64_t e = 0; /* set where expr_as_const says so; gcc sees no such link once inlined */
    int v = loop->var;
    if (v >= o->vcap) return; /* a var made since the arrays were (a tile's): unknown */
    o->known[v] = (uint8_t)(on && expr_as_const(o->ex, loop->index, &e) && e >= 1);
    if (o->ext) o->ext[v] = on ? loop->index : 0;
    if (o->known[v]) o->lo[v] = 0, o->hi[v] = opt_clamp_big(e - 1);
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
            opt_bind(o, &x, 1);
            rw_block(o, s, x.child);
            opt_bind(o, &x, 0);
        }
        if (x.kind != IR_STORE && x.kind != IR_UPDATE) continue;
        ExprId e = x.kind == IR_STORE ? o->fx(o, x.index) : 0;
        IrRef v = opt_rw_value(o, x.a), off = x.kind == IR_STORE && x.b ? opt_rw_value(o, x.b) : 0, t;
        if (x.kind == IR_STORE && !e) o->oom = 1;
        if (o->oom || (v == x.a && e == x.index && off == x.b)) continue;
        IrBlock b = {loop, prev};
        t = x.kind == IR_STORE ? ir_store_at(k, &b, x.buf, e, off, v, x.op == OP_SUM) : ir_update(k, &b, x.var, v);
        if (!t) o->oom = 1;
        else k->nodes[t].next = x.next, s = t; /* the old statement drops out */
    }
}

/* One rewrite with fx of the body of loop (0: the kernel): 0 or KN_ENOMEM. */
int opt_rewrite(Opt *o, IrRef loop, IndexFn fx)
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
int opt_depends(const Kernel *k, IrRef r, int v, int depth)
{
    const IrNode *x = &k->nodes[r];
    if (depth > IR_MAX_DEPTH) return 1;
    if ((x->kind == IR_LOAD || x->kind == IR_INDEX || x->kind == IR_RAND || x->kind == IR_CHECK) &&
        expr_has_sym(k->ex, x->index, v))
        return 1;
    for (int i = 0; i < ir_nsrc(x); i++)
        if (opt_depends(k, i == 0 ? x->a : i == 1 ? x->b : x->c, v, depth + 1)) return 1;
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
int opt_affine(ExprTable *t, ExprId e, int v, int64_t *coef, ExprId *rest)
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

/* ---- the passes in order ---- */

static ExprId simplify_fx(Opt *o, ExprId e) { return opt_simplify(o, e); }

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
        if (!known[x->var] || opt_clamp_big(e - 1) > hi[x->var]) hi[x->var] = opt_clamp_big(e - 1);
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
    return opt_range(&o, e, lo, hi);
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
    if (!(opt->skip & LOOPOPT_NO_SIMPLIFY)) err = opt_rewrite(&o, 0, simplify_fx);
    if (!err && !(opt->skip & LOOPOPT_NO_SPLIT)) err = opt_split_block(&o, k->body, 0);
    if (!err && !(opt->skip & LOOPOPT_NO_GUARDS)) err = opt_guards(&o);
    if (!err && !(opt->skip & LOOPOPT_NO_COLLAPSE)) err = opt_collapse_block(&o, k->body);
    int nv = k->nvars;
    if (!err && !(opt->skip & LOOPOPT_NO_TILE)) err = opt_tile_block(&o, k->body);
    if (!err && k->nvars != nv && !(opt->skip & LOOPOPT_NO_SIMPLIFY)) /* the tiles' loops: new vars, new indices */
        err = !opt_vars(&o, &mem, &bytes) || opt_rewrite(&o, 0, simplify_fx);
    else if (!err && k->nvars != nv) err = !opt_vars(&o, &mem, &bytes);
    if (!err && !(opt->skip & LOOPOPT_NO_MARK)) err = opt_mark(&o, opt);
    if (!err && !(opt->skip & LOOPOPT_NO_CASCADE)) err = opt_cascade(&o);
    if (!err && !(opt->skip & LOOPOPT_NO_UNROLL)) err = opt_unroll_block(&o, k->body);
    kn_dealloc(ctx, mem, bytes);
    return err ? kn_errs(ctx, KN_ENOMEM, "loopopt: kernel %.31s: out of memory", k->name) : 0;
}
