/*
 * loop_scalar.c — targets/c: the scalar dialect's innermost loops (loop.c writes every other form
 * of a loop). TinyCC compiles what the text says, so an innermost loop is written out for it:
 * accesses through stream pointers, the body copied a few times a group, chains of updates in
 * registers, invariants computed once (put_unrolled); or it becomes a memcpy or memset
 * (put_copy), or blocks through the library's vector helpers (put_blocks). Each form keeps the
 * bits of the plain loop. loop_put_scalar chooses; the value emitter asks how a copy of an
 * unrolled body names an access, a hoisted value or a chain's accumulator (loop_put_access,
 * loop_put_hoisted, loop_put_chain).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "render_int.h"
#include "../../src/loopopt.h" /* loopopt_range */
#include "../../src/vec_rt.h"  /* KN_VBLOCK */

/* ---- the scalar dialect's innermost loops ----
 * TinyCC computes what the text says, each time it says it: an index like
 * b1[s0*65536 + s1*1024 + s2] costs its multiplies and adds at every access
 * of every iteration, locals live in memory, and an accumulator goes
 * through memory at every update, whose next update waits on that store. So
 * the scalar dialect writes an innermost loop out for it (put_unrolled):
 * - an access whose index is a*s_v + rest + k (rest's terms free of the
 *   loop's var s_v, k a constant) goes through the pointer of its stream
 *   (its buffer, rest and a), set at each group of iterations to the
 *   element that an access of the stream makes at the group's first
 *   iteration, from rest's value computed once before the loop: the access
 *   is then p[k' + u*a], a constant offset. A stream's pointer comes from
 *   an access that every iteration makes (a store, or a load that is
 *   evaluated unconditionally or stays in bounds over the loops' ranges),
 *   so no pointer points outside its buffer; a load under a where's branch
 *   joins a stream but never starts one;
 * - the body is copied for UNROLL iterations a group (all of them when the
 *   extent is a constant up to UNROLL; one when the body is large), the
 *   copies in order; the rest of the extent runs one iteration at a time;
 * - a body of updates only, whose values read none of the accumulators it
 *   updates, updates each accumulator once a group by one expression that
 *   chains the copies' values in order, ((a + x0) + x1) + ...: the same
 *   operations in the same order, so the same bits, with the partial sums
 *   in registers;
 * - values the loop does not change (a row's scale, a mask of outer
 *   indices) are computed once before it, where that is safe whatever the
 *   loop does (un_hoist);
 * - a loop that only copies another buffer's elements, or stores +0, is a
 *   memcpy or memset (copy_src).
 * The SIMD dialect's loops are cc's to optimise and stay as they were. */

#define UNROLL 4             /* iterations a group */
#define UNROLL_CHAIN 8       /* iterations a group of a small chain of updates: half the trips of its
                                accumulator through memory */
#define UNROLL_MAX_VALUES 40 /* a body of more values is not copied: its loop's overhead is small beside it */
#define MAX_STREAMS 24
#define MAX_ACCESSES 64
#define MAX_HOISTS 16

typedef struct {
    int buf;
    ExprId index;  /* an access's index, for rest's terms */
    int64_t a, k0; /* the stride in s_v; the constant of the access the pointer points at */
    int rest;      /* the stream whose s<v>_r<rest> holds rest + k0 (the first with both); -1: none, 0 */
} Stream;

typedef struct {
    int buf;
    ExprId index;
    int stream, safe; /* stream -1 until one takes it; safe: made at every iteration */
    int64_t k;
} Access;

typedef struct Unroll {
    int v, u;        /* the loop's var; copies a group */
    int need_v;      /* the body names s_v outside its streams' accesses */
    int decl;        /* the body declares an accumulator: each copy in braces of its own */
    int chain;       /* updates only: chained (put_chain) */
    Stream st[MAX_STREAMS];
    Access ac[MAX_ACCESSES];
    int nst, nac;
    IrRef h[MAX_HOISTS], hs[MAX_HOISTS]; /* values the loop does not change, computed before it; their statements */
    int nh;
    uint8_t stored[MAX_BUFS], acc[MAX_ACCS]; /* buffers the body stores; accumulators it declares or updates */
} Unroll;

/* Term e of a sum: c*s_v (1, *c = c) or free of s_v (1, *c = 0); 0 otherwise. */
static int lin_term(const ExprTable *t, ExprId e, int v, int64_t *c)
{
    const ExprNode *x = expr_node(t, e), *f;
    *c = 0;
    if (!x) return 0;
    if (x->kind == EX_SYM && x->c == v) return *c = 1, 1;
    if (x->kind == EX_MUL && x->n == 1 && (f = expr_node(t, x->args[0])) && f->kind == EX_SYM && f->c == v)
        return *c = x->c, 1;
    return !expr_has_sym(t, e, v);
}

/* e = a*s_v + rest + k with rest's terms free of s_v: 1 (*a, *k), or 0. */
int loop_lin(const ExprTable *t, ExprId e, int v, int64_t *a, int64_t *k)
{
    const ExprNode *x = expr_node(t, e);
    *a = 0, *k = 0;
    if (!x) return 0;
    if (x->kind == EX_CONST) return *k = x->c, 1;
    if (x->kind != EX_ADD) return lin_term(t, e, v, a);
    *k = x->c;
    for (int i = 0; i < x->n; i++) {
        int64_t c;
        if (!lin_term(t, x->args[i], v, &c)) return 0;
        if (c && *a) return 0;
        if (c) *a = c;
    }
    return 1;
}

/* The terms of e free of s_v and not constant (rest), into out; their count. */
static int rest_terms(const ExprTable *t, ExprId e, int v, ExprId *out)
{
    const ExprNode *x = expr_node(t, e);
    int n = 0;
    if (!x || x->kind == EX_CONST) return 0;
    if (x->kind != EX_ADD) {
        if (!expr_has_sym(t, e, v)) out[n++] = e;
        return n;
    }
    for (int i = 0; i < x->n; i++)
        if (!expr_has_sym(t, x->args[i], v)) out[n++] = x->args[i];
    return n;
}

static int same_rest(const ExprTable *t, ExprId e1, ExprId e2, int v)
{
    ExprId a[EXPR_MAX_ARGS], b[EXPR_MAX_ARGS];
    int n = rest_terms(t, e1, v, a);
    if (n != rest_terms(t, e2, v, b)) return 0;
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return 0; /* canonical sums order their terms */
    return 1;
}

/* rest + k of index e, as put_index writes a sum */
static void put_rest_index(Out *o, const ExprTable *t, ExprId e, int v, int64_t k)
{
    ExprId a[EXPR_MAX_ARGS];
    int n = rest_terms(t, e, v, a);
    for (int i = 0; i < n; i++) {
        const ExprNode *y = expr_node(t, a[i]);
        if (y && y->kind == EX_MUL) render_put_term(o, t, y->c, y->args, y->n, i == 0);
        else render_put_term(o, t, 1, &a[i], 1, i == 0);
    }
    if (!n) render_put_int(o, k, 0);
    else if (k > 0) put(o, " + %lld", (long long)k);
    else if (k == INT64_MIN) put_str(o, " + INT64_MIN");
    else if (k < 0) put(o, " - %lld", -(long long)k);
}

/* The access of buffer buf at index, if the body's plan has one. */
static Access *un_find(Unroll *un, int buf, ExprId index)
{
    for (int i = 0; i < un->nac; i++)
        if (un->ac[i].buf == buf && un->ac[i].index == index) return &un->ac[i];
    return NULL;
}

/* Notes an access of the body; 0 when the plan has no room for it. */
static int un_note(Unroll *un, const ExprTable *t, int buf, ExprId index, int safe)
{
    int64_t a, k;
    Access *x = un_find(un, buf, index);
    if (x) return x->safe |= safe, 1;
    if (!loop_lin(t, index, un->v, &a, &k)) return un->need_v |= expr_has_sym(t, index, un->v), 1; /* as written */
    if (un->nac == MAX_ACCESSES) return 0;
    x = &un->ac[un->nac++];
    x->buf = buf, x->index = index, x->safe = safe, x->k = k, x->stream = -1;
    return 1;
}

/* Whether value ref (of the DAG built) is the same at every iteration of
 * the loop and may be computed once before it: indices without s_v, rand
 * without it (of an invariant key and counter), accumulators the body
 * neither declares nor updates, loads without s_v of buffers the body does
 * not store, in bounds over every loop's range (so safe whether or not the
 * loop's iterations would read them, and however many there are), and ops
 * of such values; never a check, which reports. */
static int invariant(const R *r, const Unroll *un, IrRef ref, IrRef user, int depth)
{
    const Kernel *k = r->k;
    const IrNode *x = value_at(k, ref, user);
    int64_t lo, hi, size;
    if (!x || depth > IR_MAX_DEPTH) return 0;
    switch (x->kind) {
    case IR_CONST: return !x->index;
    case IR_ACCVAL: return x->var >= 0 && x->var < MAX_ACCS && !un->acc[x->var];
    case IR_INDEX: return !expr_has_sym(k->ex, x->index, un->v);
    case IR_RAND:
        return !expr_has_sym(k->ex, x->index, un->v) && invariant(r, un, x->a, ref, depth + 1) &&
               invariant(r, un, x->b, ref, depth + 1);
    case IR_LOAD:
        return !x->a && x->buf >= 0 && x->buf < MAX_BUFS && x->buf < k->nbufs && !un->stored[x->buf] &&
               !expr_has_sym(k->ex, x->index, un->v) && expr_as_const(k->ex, k->bufs[x->buf].size, &size) &&
               loopopt_range(k, x->index, &lo, &hi) && lo >= 0 && hi < size;
    case IR_OP:
        for (int i = 0; i < nops(x); i++)
            if (!invariant(r, un, operand(x, i), ref, depth + 1)) return 0;
        return 1;
    default: return 0;
    }
}

/* From ref (used by user, in statement s) down: the largest invariant
 * values worth a variable (loads and ops) go into the plan's hoisted ones;
 * what stays in the loop is marked live. */
static void un_hoist(R *r, Unroll *un, IrRef ref, IrRef user, IrRef s, int depth)
{
    const IrNode *x = value_at(r->k, ref, user);
    Val *v = x ? render_dag_find(r->d, ref, 0) : NULL;
    if (!v || v->live || depth > IR_MAX_DEPTH) return;
    if ((x->kind == IR_LOAD || x->kind == IR_OP) && invariant(r, un, ref, user, 0)) {
        int seen = 0;
        for (int i = 0; i < un->nh; i++) seen |= un->h[i] == ref;
        if (!seen && un->nh < MAX_HOISTS) un->hs[un->nh] = s, un->h[un->nh++] = ref;
        if (seen || un->nh <= MAX_HOISTS) return;
    }
    v->live = 1;
    for (int i = 0; i < nops(x); i++) un_hoist(r, un, operand(x, i), ref, s, depth + 1);
}

/* The hoisted value ref's number, or -1. */
static int un_hoisted(const Unroll *un, IrRef ref)
{
    for (int i = 0; un && i < un->nh; i++)
        if (un->h[i] == ref) return i;
    return -1;
}

int loop_is_hoisted(const R *r, IrRef ref) { return un_hoisted(r->un, ref) >= 0; }

/* A hoisted value, in a copy of the body, by the name of its variable: 1, or 0 if ref is none. */
int loop_put_hoisted(R *r, IrRef ref)
{
    int h = un_hoisted(r->un, ref);
    if (h >= 0) put(r->o, "s%d_h%d", r->un->v, h);
    return h >= 0;
}

/* Loads of statement s's value into the plan (the DAG built), and whether
 * the body names s_v elsewhere; 0 when the plan has no room. */
static int un_loads(R *r, Unroll *un)
{
    const Kernel *k = r->k;
    for (int i = 0; i < r->d->n; i++) {
        const IrNode *x = &k->nodes[r->d->v[i].ref];
        int64_t lo, hi, size;
        if (!r->d->v[i].live) continue; /* hoisted, or only below a hoisted value */
        if (x->kind == IR_LOAD && !x->a) {
            int safe = r->d->v[i].uncond ||
                       (x->buf >= 0 && x->buf < k->nbufs && expr_as_const(k->ex, k->bufs[x->buf].size, &size) &&
                        loopopt_range(k, x->index, &lo, &hi) && lo >= 0 && hi < size);
            if (!un_note(un, k->ex, x->buf, x->index, safe)) return 0;
        } else if ((x->kind == IR_LOAD || x->kind == IR_INDEX || x->kind == IR_RAND) &&
                   expr_has_sym(k->ex, x->index, un->v)) {
            un->need_v = 1;
        }
    }
    return 1;
}

/* Plans the scalar dialect's writing of innermost loop x (above): 1, or 0
 * to write it as it is (nothing goes through a pointer, or the plan has no
 * room). */
static int un_plan(R *r, const IrNode *x, Unroll *un)
{
    const Kernel *k = r->k;
    int64_t e, a, kk;
    int values = 0, updates = 0, stores = 0;
    memset(un, 0, sizeof *un);
    un->v = x->var;
    for (IrRef s = x->child; s; s = k->nodes[s].next) { /* what the body changes */
        const IrNode *y = stmt_at(r, s);
        if (!y || (y->kind != IR_STORE && y->kind != IR_UPDATE && y->kind != IR_ACC)) return 0;
        if (y->kind == IR_STORE && (y->buf < 0 || y->buf >= MAX_BUFS)) return 0;
        if (y->kind != IR_STORE && (y->var < 0 || y->var >= MAX_ACCS)) return 0;
        if (y->kind == IR_STORE) un->stored[y->buf] = 1;
        else un->acc[y->var] = 1;
    }
    for (IrRef s = x->child; s; s = k->nodes[s].next) {
        const IrNode *y = stmt_at(r, s);
        if (y->kind == IR_ACC) {
            updates = stores = 1 << 20; /* a declaration in the body: no chain */
            un->decl = 1;
            continue;
        }
        if (y->kind == IR_STORE) {
            stores++;
            if (!y->b && !un_note(un, k->ex, y->buf, y->index, 1)) return 0;
            if (y->b || !loop_lin(k->ex, y->index, un->v, &a, &kk)) un->need_v |= expr_has_sym(k->ex, y->index, un->v);
            if (y->b && (!render_dag_build(r, y->b, s) || (un_hoist(r, un, y->b, s, s, 0), !un_loads(r, un)))) return 0;
        } else {
            updates++;
        }
        if (!render_dag_build(r, y->a, s)) return 0;
        un_hoist(r, un, y->a, s, s, 0);
        if (!un_loads(r, un)) return 0;
        values += r->d->n;
        for (int i = 0; y->kind == IR_UPDATE && i < r->d->n; i++) { /* a chain reads no accumulator it updates */
            const IrNode *v = &k->nodes[r->d->v[i].ref];
            for (IrRef t = x->child; v->kind == IR_ACCVAL && t; t = k->nodes[t].next)
                if (k->nodes[t].kind == IR_UPDATE && k->nodes[t].var == v->var) stores = 1 << 20;
        }
        const IrNode *z = stmt_at(r, y->next);
        if (z && (z->kind == IR_STORE || z->kind == IR_UPDATE) && z->a == y->a) stores = 1 << 20; /* a shared value */
    }
    for (int i = 0; i < un->nac; i++) { /* streams: started by safe accesses, joined by any */
        Access *c = &un->ac[i];
        loop_lin(k->ex, c->index, un->v, &a, &kk);
        for (int j = 0; j < un->nst && c->stream < 0; j++)
            if (un->st[j].buf == c->buf && un->st[j].a == a && same_rest(k->ex, un->st[j].index, c->index, un->v))
                c->stream = j;
        if (c->stream < 0 && c->safe && un->nst < MAX_STREAMS) {
            Stream *st = &un->st[un->nst];
            st->buf = c->buf, st->index = c->index, st->a = a, st->k0 = c->k;
            ExprId terms[EXPR_MAX_ARGS];
            st->rest = rest_terms(k->ex, c->index, un->v, terms) || c->k ? un->nst : -1;
            for (int j = 0; j < un->nst && st->rest == un->nst; j++)
                if (un->st[j].rest == j && un->st[j].k0 == c->k && same_rest(k->ex, un->st[j].index, c->index, un->v))
                    st->rest = j;
            c->stream = un->nst++;
        }
    }
    for (int i = 0; i < un->nac; i++) /* an access no stream took is written as it was */
        if (un->ac[i].stream < 0) un->need_v |= expr_has_sym(k->ex, un->ac[i].index, un->v);
    if (!un->nst && !un->nh) return 0;
    int chain = updates && !stores && !un->need_v; /* a chain is one expression: no s_v to declare */
    un->u = values > UNROLL_MAX_VALUES ? 1 : chain && values <= UNROLL_MAX_VALUES / 2 ? UNROLL_CHAIN : UNROLL;
    if (x->var != r->range && expr_as_const(k->ex, x->index, &e) && e < un->u) un->u = e > 1 ? (int)e : 1;
    un->chain = un->u > 1 && chain;
    return 1;
}

/* The access of buffer buf at index in the copy being written, as its
 * stream's pointer: 1, or 0 when it has none (written as it was). */
int loop_put_access(R *r, int buf, ExprId index)
{
    Access *c = r->un ? un_find((Unroll *)r->un, buf, index) : NULL;
    if (!c || c->stream < 0) return 0;
    const Stream *st = &r->un->st[c->stream];
    put(r->o, "s%d_q%d[", r->un->v, c->stream);
    render_put_int(r->o, c->k - st->k0 + (int64_t)r->un_u * st->a, 0);
    put_char(r->o, ']');
    return 1;
}

/* The update expression of copy u of the chain (r->chain), its
 * accumulator the chain of the copies before it. */
void loop_put_chain(R *r, int u)
{
    IrRef s = r->chain;
    const IrNode *x = &r->k->nodes[s], *v = value_at(r->k, x->a, s);
    kn_dtype dt = (kn_dtype)(v ? v->dtype : KN_F32);
    int fl = dt_is_float(dt), saved = r->un_u;
    const OpFmt *f = &render_ops[x->op == OP_RMAX ? OP_RMAX : OP_SUM];
    IrNode self = *x;
    self.dtype = (uint8_t)dt;
    r->un_u = u;
    int wrap = fl && f->wrap;
    if (wrap) render_put_part(r->o, render_dts[dt].wrap, 0);
    render_put_tmpl(r, fl ? f->flt : f->integer, &self, s, 0, x->var, 0);
    if (wrap) render_put_part(r->o, render_dts[dt].wrap, 1);
    r->un_u = saved;
}

/* One group of n copies of x's body from iteration `base` (a C name; the
 * loop's var itself if own, else each copy declares it where the body names
 * it): the streams' pointers, then the copies. */
/* The streams' pointers at iteration `base` (a C name). */
static void put_streams(R *r, const Unroll *un, const char *base, int level)
{
    const Kernel *k = r->k;
    int v = un->v;
    for (int i = 0; i < un->nst; i++) {
        const Stream *st = &un->st[i];
        const IrBuf *b = &k->bufs[st->buf];
        int rest = st->rest >= 0;
        indent(r->o, level);
        put(r->o, "%s%s *s%d_q%d = b%d", b->role == BUF_IN ? "const " : "", render_dts[b->dtype].store, v, i, st->buf);
        if (rest || st->a) put_str(r->o, " + (");
        if (rest) put(r->o, "s%d_r%d", v, st->rest);
        if (st->a) put(r->o, "%s%s", st->a < 0 ? (rest ? " - " : "-") : rest ? " + " : "", base);
        if (st->a != 1 && st->a != -1 && st->a) put(r->o, "*%lld", st->a < 0 ? -(long long)st->a : (long long)st->a);
        put_str(r->o, rest || st->a ? ");\n" : ";\n");
    }
}

static void put_group(R *r, const IrNode *x, Unroll *un, const char *base, int own, int n, int level)
{
    const Kernel *k = r->k;
    int v = x->var;
    put_streams(r, un, base, level);
    r->un = un;
    if (un->chain) {
        for (IrRef s = x->child; s; s = k->nodes[s].next) {
            const IrNode *y = &k->nodes[s];
            if (!render_dag_build(r, y->a, s)) continue; /* planned: cannot fail */
            r->tsuffix = 1;
            for (int u = 0; u < n; u++) {
                for (int i = 0; i < r->d->n; i++) r->d->v[i].visited = 0;
                r->un_u = u;
                render_put_temps(r, y->a, s, level);
            }
            indent(r->o, level);
            put(r->o, "a%d = ", (int)y->var);
            r->chain = s;
            loop_put_chain(r, n - 1);
            r->chain = 0, r->tsuffix = 0;
            put_str(r->o, ";\n");
        }
    } else {
        int decl = un->need_v && !own, braces = decl || (un->decl && n > 1);
        for (int u = 0; u < n; u++) {
            r->un_u = u;
            if (braces) indent(r->o, level), put_str(r->o, "{");
            if (decl) put(r->o, " const int64_t s%d = %s + %d;", v, base, u);
            if (braces) put_char(r->o, '\n');
            render_put_block(r, x->child, level + braces);
            if (braces) indent(r->o, level), put_str(r->o, "}\n");
        }
    }
    r->un = NULL, r->un_u = 0;
}

/* An innermost loop of the scalar dialect whose body is one store, at
 * stride 1, of a load of another buffer of the same dtype at stride 1 (or
 * of that load cast to its own dtype), or of a constant whose bits are all
 * 0: libc's memcpy or memset of the extent, the same bytes (f32, f64 and
 * integers other than bool, which the scalar code copies bit for bit; a
 * bool is normalised, an f16 NaN quieted) where TinyCC's loop moves an
 * element in a dozen instructions (a parameter Adam writes back is
 * megabytes). Its source, or 0 for memset;
 * -1 if not.
 * A loop shorter than COPY_MIN is not worth the call. */
#define COPY_MIN 16
static int copy_src(const R *r, const IrNode *x, IrRef *src)
{
    const Kernel *k = r->k;
    const IrNode *y = stmt_at(r, x->child), *v;
    int64_t a, kk;
    if (!y || y->next || y->kind != IR_STORE || y->op || y->b || y->buf < 0 || y->buf >= k->nbufs) return -1;
    if (x->var != r->range && expr_as_const(k->ex, x->index, &a) && a < COPY_MIN) return -1;
    kn_dtype dt = (kn_dtype)k->bufs[y->buf].dtype;
    if (dt == KN_BOOL || dt == KN_F16 || dt == KN_BF16 || !loop_lin(k->ex, y->index, x->var, &a, &kk) || a != 1) return -1;
    if (!(v = value_at(k, y->a, x->child))) return -1;
    if (v->kind == IR_OP && v->op == OP_CAST && v->dtype == dt) v = value_at(k, v->a, y->a);
    if (v && v->kind == IR_CONST && !v->index && v->imm == 0 && !signbit(v->imm)) return *src = 0, 0;
    if (!v || v->kind != IR_LOAD || v->a || v->buf == y->buf || v->dtype != dt || !loop_lin(k->ex, v->index, x->var, &a, &kk) ||
        a != 1)
        return -1;
    *src = (IrRef)(v - k->nodes);
    return 0;
}

static void put_copy(R *r, const IrNode *x, IrRef src, int level)
{
    const Kernel *k = r->k;
    const IrNode *y = stmt_at(r, x->child);
    int v = x->var, range = x->var == r->range;
    int64_t e;
    int sized = range || !expr_as_const(k->ex, x->index, &e) || e < 1; /* an extent that may be 0 */
    indent(r->o, level);
    put(r->o, "{ /* s%d: %s */\n", v, src ? "a copy" : "zeros");
    indent(r->o, level + 1);
    put(r->o, "const int64_t s%d = %s, n_ = ", v, range ? "lo" : "0");
    if (range) put_str(r->o, "hi - lo");
    else render_put_index(r->o, k->ex, x->index, 0);
    put_str(r->o, ";\n");
    indent(r->o, level + 1);
    if (sized) put_str(r->o, "if (n_ > 0) ");
    put(r->o, "%s(&b%d[", src ? "memcpy" : "memset", (int)y->buf);
    render_put_index(r->o, k->ex, y->index, 0);
    if (src) {
        put(r->o, "], &b%d[", (int)k->nodes[src].buf);
        render_put_index(r->o, k->ex, k->nodes[src].index, 0);
        put(r->o, "], (size_t)n_ * sizeof *b%d);\n", (int)y->buf);
    } else {
        put(r->o, "], 0, (size_t)n_ * sizeof *b%d);\n", (int)y->buf);
    }
    indent(r->o, level);
    put_str(r->o, "}\n");
}

/* What a planned loop computes once before it: the streams' rests, the hoisted values. */
static void put_invariants(R *r, const Unroll *un, int level)
{
    const Kernel *k = r->k;
    int v = un->v;
    for (int i = 0; i < un->nst; i++) {
        const Stream *st = &un->st[i];
        if (st->rest != i) continue;
        indent(r->o, level);
        put(r->o, "const int64_t s%d_r%d = ", v, i);
        put_rest_index(r->o, k->ex, st->index, v, st->k0);
        put_str(r->o, ";\n");
    }
    for (int i = 0; i < un->nh; i++) { /* what the loop does not change, once */
        const IrNode *h = &k->nodes[un->h[i]];
        if (!render_dag_build(r, un->h[i], un->hs[i])) continue; /* planned: cannot fail */
        indent(r->o, level);
        put(r->o, "const %s s%d_h%d = ", render_dts[h->dtype].value, v, i);
        render_put_value(r, un->h[i], un->hs[i], 0, 1); /* r->un unset: as the loop would write it */
        put_str(r->o, ";\n");
    }
}

/* Innermost loop x of the scalar dialect as planned (un_plan): rest's
 * values, whole groups, then the iterations left one by one. */
static void put_unrolled(R *r, const IrNode *x, Unroll *un, int level)
{
    const Kernel *k = r->k;
    int v = x->var, range = x->var == r->range;
    int64_t e = 0;
    int whole = un->u > 1 && !range && expr_as_const(k->ex, x->index, &e) && e % un->u == 0; /* none left */
    char base[32];
    indent(r->o, level);
    put(r->o, "{ /* s%d: %d iterations a group through pointers (scalar dialect) */\n", v, un->u);
    put_invariants(r, un, level + 1);
    if (un->u > 1) {
        indent(r->o, level + 1);
        put(r->o, "int64_t s%d_o = %s;\n", v, range ? "lo" : "0");
        indent(r->o, level + 1);
        put(r->o, "for (; s%d_o + %d <= ", v, un->u);
        if (range) put_str(r->o, "hi");
        else render_put_index(r->o, k->ex, x->index, 1);
        put(r->o, "; s%d_o += %d) {\n", v, un->u);
        snprintf(base, sizeof base, "s%d_o", v);
        put_group(r, x, un, base, 0, un->u, level + 2);
        indent(r->o, level + 1);
        put_str(r->o, "}\n");
    }
    if (!whole) {
        indent(r->o, level + 1);
        if (un->u > 1) put(r->o, "for (int64_t s%d = s%d_o; s%d < ", v, v, v);
        else put(r->o, "for (int64_t s%d = %s; s%d < ", v, range ? "lo" : "0", v);
        if (range) put_str(r->o, "hi");
        else render_put_index(r->o, k->ex, x->index, 0);
        put(r->o, "; s%d++) {\n", v);
        snprintf(base, sizeof base, "s%d", v);
        Unroll one = *un;
        one.chain = 0;
        put_group(r, x, &one, base, 1, 1, level + 2);
        indent(r->o, level + 1);
        put_str(r->o, "}\n");
    }
    indent(r->o, level);
    put_str(r->o, "}\n");
}

/* ---- blocks: backend tcc's innermost loops through the library's vector helpers ----
 * An innermost loop of the scalar dialect planned as above (un_plan), of
 * at least r->blocks iterations, whose every value is an f32 or bool the
 * helpers of src/vec_rt.h compute, runs KN_VBLOCK iterations at a time: a
 * helper call per value and statement on a block of its elements, which
 * the library's compiler vectorised, where TinyCC's own code takes an
 * element at a time through memory (the cnn's training step under tcc:
 * a ReLU's backward where, Adam's update). The values of a block are
 * computed in statement order, each before the first statement that needs
 * it, so a body that reads an element another of its statements wrote
 * (an in-place update) reads it as the scalar loop does, as long as it is
 * the same element: the vector loops of the SIMD dialect assume as much.
 * Every value is computed for every element, whatever a where picks, so
 * every load must be safe (Access.safe); pointwise results are the scalar
 * dialect's bits (vec_rt.h), sums are added in lanes. */
#define BLK_VALUES 40 /* values of one loop's blocks, each a block of stack at most */

enum { BV_STREAM, BV_FILL, BV_TEMP };

typedef struct {
    IrRef ref, user;
    uint8_t kind, dt; /* BV_*; KN_F32 or KN_BOOL */
    int stream;       /* BV_STREAM: its stream, the element off from the pointer, every stride-th */
    int64_t off, stride;
    int done;         /* put_blocks: computed in the block being written */
} BVal;

typedef struct {
    BVal v[BLK_VALUES];
    int n;
    int val[BLK_VALUES]; /* statement i of the body (in order): its value's BVal */
    BVal place[BLK_VALUES]; /* and, a store, the place it writes (its stream, offset, stride) */
    int nst;
} Blk;

static int bv_add(Blk *bk, IrRef ref, IrRef user, int kind, int dt)
{
    if (bk->n == BLK_VALUES) return -1;
    BVal *b = &bk->v[bk->n];
    memset(b, 0, sizeof *b);
    b->ref = ref, b->user = user, b->kind = (uint8_t)kind, b->dt = (uint8_t)dt, b->stream = -1;
    return bk->n++;
}

/* The access of buffer buf at index through its stream, into b's stream, off, stride and dt (a load's
 * value, or a store's place): 1, or 0 when it has no stream, may fault (not safe), or is of a dtype the
 * helpers lack. */
static int bv_stream(const R *r, const Unroll *un, int buf, ExprId index, BVal *b)
{
    Access *c = un_find((Unroll *)un, buf, index);
    if (!c || c->stream < 0 || !c->safe || buf < 0 || buf >= r->k->nbufs) return 0;
    const Stream *st = &un->st[c->stream];
    int dt = r->k->bufs[buf].dtype;
    if ((dt != KN_F32 && dt != KN_BOOL) || st->a == 0) return 0;
    b->stream = c->stream, b->off = c->k - st->k0, b->stride = st->a, b->dt = (uint8_t)dt;
    return 1;
}

/* Value ref (used by user) as a BVal of the plan, its operands first: its number, or -1 when the helpers
 * cannot compute it. */
static int bv_of(const R *r, Blk *bk, const Unroll *un, IrRef ref, IrRef user, int depth)
{
    const IrNode *x = value_at(r->k, ref, user);
    if (!x || depth > IR_MAX_DEPTH) return -1;
    for (int i = 0; i < bk->n; i++)
        if (bk->v[i].ref == ref) return i;
    if (un_hoisted(un, ref) >= 0 || x->kind == IR_CONST) /* the same every iteration: a block filled once */
        return x->dtype == KN_F32 ? bv_add(bk, ref, user, BV_FILL, KN_F32) : -1;
    if (x->kind == IR_LOAD) { /* not of a buffer the body stores: a block reads ahead of the stores before it */
        BVal at;
        if (x->a || x->buf < 0 || x->buf >= r->k->nbufs || x->buf >= MAX_BUFS || un->stored[x->buf] ||
            x->dtype != r->k->bufs[x->buf].dtype || !bv_stream(r, un, x->buf, x->index, &at))
            return -1;
        int i = bv_add(bk, ref, user, BV_STREAM, at.dt);
        if (i >= 0) bk->v[i].stream = at.stream, bk->v[i].off = at.off, bk->v[i].stride = at.stride;
        return i;
    }
    if (x->kind != IR_OP) return -1; /* an index, an accumulator the loop updates, rand, a check */
    int a[3], n = nops(x);
    for (int i = 0; i < n; i++)
        if ((a[i] = bv_of(r, bk, un, operand(x, i), ref, depth + 1)) < 0) return -1;
    kn_dtype d0 = (kn_dtype)bk->v[a[0]].dt, dl = (kn_dtype)bk->v[a[n - 1]].dt;
    switch (x->op) {
    case OP_CAST:
        if (x->dtype == d0) return a[0]; /* (float) of a float */
        return (x->dtype == KN_F32 && d0 == KN_BOOL) || (x->dtype == KN_BOOL && d0 == KN_F32)
                   ? bv_add(bk, ref, user, BV_TEMP, x->dtype) : -1;
    case OP_CMPLT:
    case OP_CMPEQ: return d0 == KN_F32 && dl == KN_F32 ? bv_add(bk, ref, user, BV_TEMP, KN_BOOL) : -1;
    case OP_WHERE:
        return x->dtype == KN_F32 && d0 == KN_BOOL && bk->v[a[1]].dt == KN_F32 && dl == KN_F32
                   ? bv_add(bk, ref, user, BV_TEMP, KN_F32) : -1;
    default:
        if (x->dtype != KN_F32 || d0 != KN_F32 || dl != KN_F32) return -1;
        if ((x->op >= OP_NEG && x->op <= OP_FLOOR) || (x->op >= OP_ADD && x->op <= OP_POW))
            return bv_add(bk, ref, user, BV_TEMP, KN_F32);
        return -1;
    }
}

/* Plans loop x (planned by un_plan) as blocks: 1, or 0 to write it otherwise. */
static int blk_plan(R *r, const IrNode *x, const Unroll *un, Blk *bk)
{
    const Kernel *k = r->k;
    int64_t e;
    bk->n = bk->nst = 0;
    if (!r->blocks || un->need_v || un->decl) return 0;
    if (x->var != r->range && (!expr_as_const(k->ex, x->index, &e) || e < r->blocks)) return 0;
    for (IrRef s = x->child; s; s = k->nodes[s].next) {
        const IrNode *y = stmt_at(r, s);
        int v = y && bk->nst < BLK_VALUES ? bv_of(r, bk, un, y->a, s, 0) : -1;
        if (v < 0) return 0;
        BVal *at = &bk->place[bk->nst];
        bk->val[bk->nst++] = v;
        if (y->kind == IR_STORE) {
            if (y->b || y->op || !bv_stream(r, un, y->buf, y->index, at) || at->dt != bk->v[v].dt) return 0;
            if (bk->v[v].dt == KN_BOOL && bk->v[v].kind == BV_STREAM) return 0; /* stored as read: not normalised */
        } else if (y->kind != IR_UPDATE || bk->v[v].dt != KN_F32 || (y->op != OP_SUM && y->op != OP_RMAX)) {
            return 0;
        }
    }
    return 1;
}

static void put_bptr(R *r, const Unroll *un, const BVal *b)
{
    put(r->o, "s%d_q%d", un->v, b->stream);
    if (b->off) put(r->o, " %c %lld", b->off < 0 ? '-' : '+', (long long)(b->off < 0 ? -b->off : b->off));
}

/* Value i's block as an operand: its block of the stack, or where its stream points */
static void put_bval(R *r, const Unroll *un, const Blk *bk, int i)
{
    const BVal *b = &bk->v[i];
    if (b->kind == BV_STREAM && b->stride == 1) put_bptr(r, un, b);
    else put(r->o, "s%d_w%d", un->v, i);
}

/* The BVal of value ref, through casts of a float to its own dtype; -1 if none. */
static int bv_find(const R *r, const Blk *bk, IrRef ref, IrRef user)
{
    for (int depth = 0; depth <= IR_MAX_DEPTH; depth++) {
        for (int i = 0; i < bk->n; i++)
            if (bk->v[i].ref == ref) return i;
        const IrNode *x = value_at(r->k, ref, user);
        if (!x || x->kind != IR_OP || x->op != OP_CAST) return -1;
        user = ref, ref = x->a;
    }
    return -1;
}

/* The calls that compute value i in the block, the values it needs first. */
static void put_bcalls(R *r, const Unroll *un, Blk *bk, int i, int level)
{
    BVal *b = &bk->v[i];
    const IrNode *x = &r->k->nodes[b->ref];
    int v = un->v, ops[3] = {0, 0, 0};
    if (b->done || b->kind == BV_FILL || (b->kind == BV_STREAM && b->stride == 1)) return;
    b->done = 1;
    if (b->kind == BV_STREAM) { /* a strided load: gathered */
        indent(r->o, level);
        put(r->o, "kn_rt_vcopy(s%d_w%d, 1, ", v, i);
        put_bptr(r, un, b);
        put(r->o, ", %lld, s%d_n, %d);\n", (long long)b->stride, v, b->dt == KN_F32 ? 4 : 1);
        return;
    }
    for (int j = 0; j < nops(x); j++) {
        ops[j] = bv_find(r, bk, operand(x, j), b->ref);
        if (ops[j] < 0) ops[j] = i; /* planned: cannot happen */
        if (ops[j] != i) put_bcalls(r, un, bk, ops[j], level);
    }
    const char *fn = x->op == OP_CAST                        ? (b->dt == KN_F32 ? "vmask" : "vnonzero")
                     : x->op == OP_WHERE                     ? "vwhere"
                     : x->op == OP_CMPLT || x->op == OP_CMPEQ ? "vcompare"
                     : nops(x) == 1                          ? "vunary"
                                                             : "vbinary";
    indent(r->o, level);
    put(r->o, "kn_rt_%s(", fn);
    if (x->op != OP_CAST && x->op != OP_WHERE) put(r->o, "%d /* %s */, ", (int)x->op, kn_opinfo[x->op].name);
    put(r->o, "s%d_w%d", v, i);
    for (int j = 0; j < nops(x); j++) put_str(r->o, ", "), put_bval(r, un, bk, ops[j]);
    put(r->o, ", s%d_n);\n", v);
}

/* Loop x as blocks (blk_plan): the invariants, the filled blocks, then a block at a time. */
static void put_blocks(R *r, const IrNode *x, const Unroll *un, Blk *bk, int level)
{
    const Kernel *k = r->k;
    int v = x->var, range = x->var == r->range;
    char base[32];
    indent(r->o, level);
    put(r->o, "{ /* s%d: blocks of %d through the library's vector helpers (src/vec_rt.h) */\n", v, KN_VBLOCK);
    put_invariants(r, un, level + 1);
    for (int i = 0; i < bk->n; i++) {
        const BVal *b = &bk->v[i];
        if (b->kind == BV_STREAM && b->stride == 1) continue;
        indent(r->o, level + 1);
        put(r->o, "%s s%d_w%d[%d];\n", b->dt == KN_F32 ? "float" : "uint8_t", v, i, KN_VBLOCK);
    }
    for (int i = 0; i < bk->n; i++) {
        const BVal *b = &bk->v[i];
        int h = un_hoisted(un, b->ref);
        if (b->kind != BV_FILL) continue;
        indent(r->o, level + 1);
        put(r->o, "kn_rt_vfill(s%d_w%d, ", v, i);
        if (h >= 0) put(r->o, "s%d_h%d", v, h);
        else render_put_value(r, b->ref, b->user, 0, 1);
        put(r->o, ", %d);\n", KN_VBLOCK);
    }
    indent(r->o, level + 1);
    put(r->o, "for (int64_t s%d_o = %s; s%d_o < ", v, range ? "lo" : "0", v);
    if (range) put_str(r->o, "hi");
    else render_put_index(r->o, k->ex, x->index, 1);
    put(r->o, "; s%d_o += %d) {\n", v, KN_VBLOCK);
    indent(r->o, level + 2);
    put(r->o, "const int64_t s%d_n = ", v);
    for (int twice = 0; twice < 2; twice++) {
        if (range) put_str(r->o, "hi");
        else render_put_index(r->o, k->ex, x->index, 1);
        if (twice) put(r->o, " - s%d_o : %d;\n", v, KN_VBLOCK);
        else put(r->o, " - s%d_o < %d ? ", v, KN_VBLOCK);
    }
    snprintf(base, sizeof base, "s%d_o", v);
    put_streams(r, un, base, level + 2);
    for (int i = 0; i < bk->n; i++) bk->v[i].done = 0;
    int j = 0;
    for (IrRef s = x->child; s && j < bk->nst; s = k->nodes[s].next, j++) {
        const IrNode *y = &k->nodes[s];
        int i = bk->val[j];
        put_bcalls(r, un, bk, i, level + 2);
        indent(r->o, level + 2);
        if (y->kind == IR_STORE) {
            put_str(r->o, "kn_rt_vcopy(");
            put_bptr(r, un, &bk->place[j]);
            put(r->o, ", %lld, ", (long long)bk->place[j].stride);
            put_bval(r, un, bk, i);
            put(r->o, ", 1, s%d_n, %d);\n", v, bk->v[i].dt == KN_F32 ? 4 : 1);
        } else if (y->op == OP_SUM) {
            put(r->o, "a%d = a%d + kn_rt_vsum(", (int)y->var, (int)y->var);
            put_bval(r, un, bk, i);
            put(r->o, ", s%d_n);\n", v);
        } else {
            put(r->o, "a%d = kn_rt_vaccmax(a%d, ", (int)y->var, (int)y->var);
            put_bval(r, un, bk, i);
            put(r->o, ", s%d_n);\n", v);
        }
    }
    indent(r->o, level + 1);
    put_str(r->o, "}\n");
    indent(r->o, level);
    put_str(r->o, "}\n");
}

/* The scalar dialect's form of innermost loop x, where one applies: a memcpy or memset, blocks
 * through the library's vector helpers, or the loop written out. 1 if it wrote x, else 0. */
int loop_put_scalar(R *r, const IrNode *x, int level)
{
    Unroll un;
    IrRef src;
    if (r->isa || r->un || level > IR_MAX_NEST || !innermost(r, x)) return 0;
    if (copy_src(r, x, &src) == 0) {
        put_copy(r, x, src, level);
        return 1;
    }
    if (!un_plan(r, x, &un)) return 0;
    Blk bk;
    if (blk_plan(r, x, &un, &bk)) put_blocks(r, x, &un, &bk, level);
    else put_unrolled(r, x, &un, level);
    return 1;
}
