/*
 * expr.c — the index-expression language (see expr.h for the contract).
 *
 * Requires: an Arena (arena.c). Produces: interned, canonical expression
 * nodes in an ExprTable, their values, their text form and back.
 *
 * Every constructor funnels into intern(), which hashes (kind, c, args) and
 * returns the existing node when there is one, so canonicalisation is all
 * in the constructors: a sum or product is gathered into a flat list, the
 * list is sorted by structural order (cmp) and like entries merge, then the
 * result is interned. Because interning makes structurally equal nodes one
 * node, cmp(a, b) == 0 exactly when a == b, and it only descends into the
 * first operands that differ, so it costs O(depth * width).
 *
 * Pointers into t->nodes die when intern() grows the array: read what you
 * need from a node into locals before building anything. Operand lists
 * live in their own arena blocks and stay put.
 */
#include "expr.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define NODES_MIN 64
#define SLOTS_MIN 128
#define MAX_NODES (1u << 26)
#define PARSE_MAX_DEPTH (4 * EXPR_MAX_DEPTH) /* printing nests <= 2 levels per node */

/* ---- checked int64 arithmetic: 1 on overflow, *r then untouched ---- */

static int add_ov(int64_t a, int64_t b, int64_t *r)
{
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return 1;
    *r = a + b;
    return 0;
}

/* The CERT INT32-C test, which never computes the overflowing product. */
static int mul_ov(int64_t a, int64_t b, int64_t *r)
{
    int over;
    if (a > 0) over = b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a;
    else over = b > 0 ? a < INT64_MIN / b : (a != 0 && b < INT64_MAX / a);
    if (over) return 1;
    *r = a * b;
    return 0;
}

/* Floor division, b != 0: rounds toward -inf. Overflows only for MIN // -1. */
static int fdiv_ov(int64_t a, int64_t b, int64_t *r)
{
    if (b == -1) return mul_ov(a, -1, r);
    int64_t q = a / b;
    if (a % b != 0 && (a < 0) != (b < 0)) q--;
    *r = q;
    return 0;
}

/* The remainder that goes with fdiv_ov, b != 0: sign of b, |result| < |b|. */
static int64_t fmod_i(int64_t a, int64_t b)
{
    if (b == -1) return 0; /* MIN % -1 traps in C */
    int64_t m = a % b;
    if (m != 0 && (m < 0) != (b < 0)) m += b;
    return m;
}

/* ---- the table: node array, hash, intern ---- */

void expr_init(ExprTable *t, kn_ctx *ctx)
{
    memset(t, 0, sizeof *t);
    arena_init(&t->arena, ctx);
}

void expr_free(ExprTable *t)
{
    arena_free(&t->arena);
    memset(t, 0, sizeof *t);
}

static int valid(const ExprTable *t, ExprId e)
{
    return e != 0 && e < t->n;
}

const ExprNode *expr_node(const ExprTable *t, ExprId e)
{
    return valid(t, e) ? &t->nodes[e] : NULL;
}

int expr_as_const(const ExprTable *t, ExprId e, int64_t *v)
{
    if (!valid(t, e) || t->nodes[e].kind != EX_CONST) return 0;
    *v = t->nodes[e].c;
    return 1;
}

int expr_has_sym(const ExprTable *t, ExprId e, int k)
{
    if (!valid(t, e)) return 0;
    const ExprNode *x = &t->nodes[e];
    if (x->kind == EX_SYM) return x->c == k;
    for (int i = 0; i < x->n; i++)
        if (expr_has_sym(t, x->args[i], k)) return 1;
    return 0;
}

/* The first node sets up both arrays, so expr_init has nothing to fail. */
static int table_ready(ExprTable *t)
{
    if (t->nodes) return 1;
    ExprNode *nodes = arena_alloc(&t->arena, NODES_MIN * sizeof *nodes);
    uint32_t *slots = arena_alloc(&t->arena, SLOTS_MIN * sizeof *slots);
    if (!nodes || !slots) return 0;
    t->nodes = nodes; /* zeroed: nodes[0] is EX_NONE */
    t->slots = slots;
    t->n = 1;
    t->cap = NODES_MIN;
    t->hcap = SLOTS_MIN;
    return 1;
}

/* At most MAX_NODES nodes, so that the node array (24 bytes each) and the
 * slots (at most 4 per node) stay under 4 GiB even where size_t has 32 bits. */
static int grow_nodes(ExprTable *t)
{
    if (t->n < t->cap) return 1;
    if (t->cap >= MAX_NODES) return 0;
    size_t o = (size_t)t->cap * sizeof *t->nodes;
    ExprNode *p = arena_grow(&t->arena, t->nodes, o, 2 * o);
    if (!p) return 0;
    t->nodes = p;
    t->cap *= 2;
    return 1;
}

/* Keeps the load under 1/2 so probes stay short; the old slots stay in
 * the arena until expr_free, a geometric and so bounded waste. */
static int grow_hash(ExprTable *t)
{
    if ((size_t)t->n * 2 < t->hcap) return 1;
    uint32_t cap = t->hcap * 2;
    uint32_t *s = arena_alloc(&t->arena, (size_t)cap * sizeof *s);
    if (!s) return 0;
    for (uint32_t i = 1; i < t->n; i++) {
        uint32_t j = t->nodes[i].hash & (cap - 1);
        while (s[j]) j = (j + 1) & (cap - 1);
        s[j] = i;
    }
    t->slots = s;
    t->hcap = cap;
    return 1;
}

static uint64_t mix(uint64_t h)
{
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

static uint32_t hash_node(int kind, int64_t c, const ExprId *a, int n)
{
    uint64_t h = mix(0x9e3779b97f4a7c15ULL ^ (uint64_t)kind);
    h = mix(h ^ (uint64_t)c);
    for (int i = 0; i < n; i++) h = mix(h ^ a[i]);
    return (uint32_t)(h ^ (h >> 32));
}

static int same_node(const ExprNode *x, uint32_t h, int kind, int64_t c, const ExprId *a, int n)
{
    if (x->hash != h || x->kind != kind || x->c != c || x->n != n) return 0;
    return n == 0 || memcmp(x->args, a, (size_t)n * sizeof *a) == 0;
}

static uint32_t find_slot(const ExprTable *t, uint32_t h, int kind, int64_t c, const ExprId *a, int n)
{
    uint32_t j = h & (t->hcap - 1);
    while (t->slots[j] && !same_node(&t->nodes[t->slots[j]], h, kind, c, a, n))
        j = (j + 1) & (t->hcap - 1);
    return j;
}

static ExprId make_node(ExprTable *t, uint32_t h, int kind, int64_t c, const ExprId *a, int n)
{
    int depth = 0;
    for (int i = 0; i < n; i++)
        if (t->nodes[a[i]].depth > depth) depth = t->nodes[a[i]].depth;
    if (depth >= EXPR_MAX_DEPTH || !grow_nodes(t)) return 0;
    ExprId *args = NULL;
    if (n > 0 && !(args = arena_alloc(&t->arena, (size_t)n * sizeof *args))) return 0;
    if (n > 0) memcpy(args, a, (size_t)n * sizeof *args);
    ExprNode *x = &t->nodes[t->n];
    x->kind = (uint8_t)kind;
    x->n = (uint8_t)n;
    x->depth = (uint8_t)(depth + 1);
    x->hash = h;
    x->c = c;
    x->args = args;
    return t->n++;
}

/* The one way to make a node: the existing one if any. A 0 operand (an
 * earlier failure) makes the result 0 too. */
static ExprId intern(ExprTable *t, int kind, int64_t c, const ExprId *a, int n)
{
    for (int i = 0; i < n; i++)
        if (!valid(t, a[i])) return 0;
    if (n > EXPR_MAX_ARGS || !table_ready(t) || !grow_hash(t)) return 0;
    uint32_t h = hash_node(kind, c, a, n);
    uint32_t j = find_slot(t, h, kind, c, a, n);
    if (!t->slots[j]) t->slots[j] = make_node(t, h, kind, c, a, n);
    return t->slots[j];
}

static ExprId intern2(ExprTable *t, int kind, ExprId a, ExprId b)
{
    ExprId args[2];
    args[0] = a;
    args[1] = b;
    return intern(t, kind, 0, args, 2);
}

ExprId expr_const(ExprTable *t, int64_t v)
{
    return intern(t, EX_CONST, v, NULL, 0);
}

ExprId expr_sym(ExprTable *t, int k)
{
    return k < 0 ? 0 : intern(t, EX_SYM, k, NULL, 0);
}

/* ---- structural order: kind, c, operand count, operands ---- */

static int cmp(const ExprTable *t, ExprId a, ExprId b);

static int cmp_list(const ExprTable *t, const ExprId *a, int na, const ExprId *b, int nb)
{
    if (na != nb) return na < nb ? -1 : 1;
    for (int i = 0; i < na; i++) {
        int r = cmp(t, a[i], b[i]);
        if (r) return r;
    }
    return 0;
}

static int cmp(const ExprTable *t, ExprId a, ExprId b)
{
    if (a == b) return 0;
    const ExprNode *x = &t->nodes[a], *y = &t->nodes[b];
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    if (x->c != y->c) return x->c < y->c ? -1 : 1;
    return cmp_list(t, x->args, x->n, y->args, y->n);
}

/* Insertion sort: lists hold at most EXPR_MAX_ARGS ids. */
static void sort_ids(const ExprTable *t, ExprId *a, int n)
{
    for (int i = 1; i < n; i++) {
        ExprId x = a[i];
        int j = i;
        for (; j > 0 && cmp(t, a[j - 1], x) > 0; j--) a[j] = a[j - 1];
        a[j] = x;
    }
}

/* ---- sums: k + sum of coef * (product of factors) ---- */

/* One term. A term that is not a product is its own single factor, held
 * in atom; f is read through item_f so that items can be copied. */
typedef struct {
    int64_t coef;
    ExprId atom;       /* the factor, or 0 when f holds a product's factors */
    const ExprId *f;   /* a MUL node's args (arena memory, stable) */
    int n;             /* factors */
} Item;

typedef struct {
    int64_t k;
    Item it[EXPR_MAX_ARGS];
    int n;
    int bad;           /* an overflow or too many terms: the sum fails */
} Sum;

static void sum_init(Sum *s)
{
    s->k = 0;
    s->n = 0;
    s->bad = 0;
}

static const ExprId *item_f(const Item *x)
{
    return x->atom ? &x->atom : x->f;
}

/* Terms are ordered, and alike, by their factors alone. */
static int item_cmp(const ExprTable *t, const Item *x, const Item *y)
{
    return cmp_list(t, item_f(x), x->n, item_f(y), y->n);
}

static void sum_push(Sum *s, Item it)
{
    if (s->n == EXPR_MAX_ARGS) s->bad = 1;
    else s->it[s->n++] = it;
}

/* Adds scale * e, where e is a term: neither CONST nor ADD. */
static void sum_term(const ExprTable *t, Sum *s, int64_t scale, ExprId e)
{
    const ExprNode *x = &t->nodes[e];
    Item it;
    it.coef = scale;
    it.atom = e;
    it.f = NULL;
    it.n = 1;
    if (x->kind == EX_MUL) {
        it.atom = 0;
        it.f = x->args;
        it.n = x->n;
        s->bad |= mul_ov(x->c, scale, &it.coef);
    }
    sum_push(s, it);
}

/* Adds scale * e for any expression e. */
static void sum_expr(const ExprTable *t, Sum *s, int64_t scale, ExprId e)
{
    const ExprNode *x = &t->nodes[e];
    int64_t v;
    if (x->kind != EX_CONST && x->kind != EX_ADD) {
        sum_term(t, s, scale, e);
        return;
    }
    s->bad |= mul_ov(x->c, scale, &v) || add_ov(s->k, v, &s->k);
    for (int i = 0; i < x->n; i++) sum_term(t, s, scale, x->args[i]);
}

static void sort_items(const ExprTable *t, Item *it, int n)
{
    for (int i = 1; i < n; i++) {
        Item x = it[i];
        int j = i;
        for (; j > 0 && item_cmp(t, &it[j - 1], &x) > 0; j--) it[j] = it[j - 1];
        it[j] = x;
    }
}

/* Sorts the terms, adds up like ones and drops those that cancel. */
static void sum_merge(const ExprTable *t, Sum *s)
{
    int n = 0;
    sort_items(t, s->it, s->n);
    for (int i = 0; i < s->n; i++) {
        if (n > 0 && item_cmp(t, &s->it[n - 1], &s->it[i]) == 0) {
            s->bad |= add_ov(s->it[n - 1].coef, s->it[i].coef, &s->it[n - 1].coef);
            if (s->it[n - 1].coef == 0) n--;
        } else if (s->it[i].coef != 0) {
            s->it[n++] = s->it[i];
        }
    }
    s->n = n;
}

/* coef * (product of f[0..n)) as a node; coef != 0. A lone factor with
 * coefficient 1 is the factor itself. */
static ExprId product(ExprTable *t, int64_t coef, const ExprId *f, int n)
{
    if (coef == 1 && n == 1) return f[0];
    return intern(t, EX_MUL, coef, f, n);
}

static ExprId sum_build(ExprTable *t, Sum *s)
{
    ExprId terms[EXPR_MAX_ARGS];
    sum_merge(t, s);
    if (s->bad) return 0;
    for (int i = 0; i < s->n; i++) {
        terms[i] = product(t, s->it[i].coef, item_f(&s->it[i]), s->it[i].n);
        if (!terms[i]) return 0;
    }
    if (s->n == 0) return expr_const(t, s->k);
    if (s->n == 1 && s->k == 0) return terms[0];
    return intern(t, EX_ADD, s->k, terms, s->n);
}

/* a + scale * b */
static ExprId add_scaled(ExprTable *t, ExprId a, ExprId b, int64_t scale)
{
    Sum s;
    if (!valid(t, a) || !valid(t, b)) return 0;
    sum_init(&s);
    sum_expr(t, &s, 1, a);
    sum_expr(t, &s, scale, b);
    return sum_build(t, &s);
}

ExprId expr_add(ExprTable *t, ExprId a, ExprId b)
{
    return add_scaled(t, a, b, 1);
}

ExprId expr_sub(ExprTable *t, ExprId a, ExprId b)
{
    return add_scaled(t, a, b, -1);
}

/* 1 and *d = a - b when the difference is a constant; builds nothing. */
static int const_diff(const ExprTable *t, ExprId a, ExprId b, int64_t *d)
{
    Sum s;
    sum_init(&s);
    sum_expr(t, &s, 1, a);
    sum_expr(t, &s, -1, b);
    sum_merge(t, &s);
    if (s.bad || s.n > 0) return 0;
    *d = s.k;
    return 1;
}

/* ---- products ---- */

/* k * x, distributing over a sum so that 2*(s0+1) is s0*2+2. */
static ExprId scale(ExprTable *t, ExprId x, int64_t k)
{
    const ExprNode *e = &t->nodes[x];
    int64_t v;
    if (k == 0) return expr_const(t, 0);
    if (k == 1) return x;
    if (e->kind == EX_ADD) return add_scaled(t, expr_const(t, 0), x, k);
    if (e->kind != EX_CONST && e->kind != EX_MUL) return intern(t, EX_MUL, k, &x, 1);
    if (mul_ov(e->c, k, &v)) return 0;
    if (e->kind == EX_CONST) return expr_const(t, v);
    return product(t, v, e->args, e->n);
}

static uint64_t magnitude(int64_t v)
{
    return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* The content of a sum: the gcd of its coefficients and constant, signed
 * like its first term's coefficient; 0 when that magnitude is 2^63. */
static int64_t content(const ExprTable *t, ExprId e)
{
    const ExprNode *x = &t->nodes[e];
    uint64_t g = magnitude(x->c);
    int64_t first = 0;
    for (int i = 0; i < x->n; i++) {
        const ExprNode *y = &t->nodes[x->args[i]];
        int64_t c = y->kind == EX_MUL ? y->c : 1;
        if (i == 0) first = c;
        g = gcd(g, magnitude(c));
    }
    if (g > (uint64_t)INT64_MAX) return 0;
    return first < 0 ? -(int64_t)g : (int64_t)g;
}

/* e / g for a sum e that g divides exactly. */
static ExprId divide_exact(ExprTable *t, ExprId e, int64_t g)
{
    Sum s;
    sum_init(&s);
    sum_expr(t, &s, 1, e);
    s.bad |= fdiv_ov(s.k, g, &s.k);
    for (int i = 0; i < s.n; i++) s.bad |= fdiv_ov(s.it[i].coef, g, &s.it[i].coef);
    return sum_build(t, &s);
}

/* Appends e's factors to f[*n], folding a product's coefficient into *coef.
 * A sum goes in divided by its content, the content joining *coef, so that
 * -(s0+1)*s1 and (-s0-1)*s1 are one product. */
static int gather_factors(ExprTable *t, ExprId e, ExprId *f, int *n, int64_t *coef)
{
    const ExprNode *x = &t->nodes[e];
    const ExprId *a = x->kind == EX_MUL ? x->args : &e;
    int na = x->kind == EX_MUL ? x->n : 1;
    int64_t g = x->kind == EX_MUL ? x->c : x->kind == EX_ADD ? content(t, e) : 1;
    if (g == 0 || mul_ov(*coef, g, coef) || *n + na > EXPR_MAX_ARGS) return 0;
    if (x->kind == EX_ADD && g != 1) return (f[(*n)++] = divide_exact(t, e, g)) != 0;
    memcpy(f + *n, a, (size_t)na * sizeof *a);
    *n += na;
    return 1;
}

ExprId expr_mul(ExprTable *t, ExprId a, ExprId b)
{
    ExprId f[EXPR_MAX_ARGS];
    int n = 0;
    int64_t coef = 1;
    if (!valid(t, a) || !valid(t, b)) return 0;
    if (t->nodes[a].kind == EX_CONST) return scale(t, b, t->nodes[a].c);
    if (t->nodes[b].kind == EX_CONST) return scale(t, a, t->nodes[b].c);
    if (!gather_factors(t, a, f, &n, &coef) || !gather_factors(t, b, f, &n, &coef)) return 0;
    sort_ids(t, f, n);
    return intern(t, EX_MUL, coef, f, n);
}

/* ---- floor division and remainder ---- */

/* Splits a = d*q + r for d > 0, moving into q every term whose coefficient
 * d divides and floor(k/d) of the constant; r keeps k mod d. Returns
 * whether q is nonzero, that is whether a rule applies at all. */
static int split_sum(const ExprTable *t, ExprId a, int64_t d, Sum *q, Sum *r)
{
    Sum s;
    sum_init(&s);
    sum_init(q);
    sum_init(r);
    sum_expr(t, &s, 1, a);
    for (int i = 0; i < s.n; i++) {
        Item it = s.it[i];
        if (it.coef % d != 0) {
            sum_push(r, it);
            continue;
        }
        it.coef /= d;
        sum_push(q, it);
    }
    fdiv_ov(s.k, d, &q->k);
    r->k = fmod_i(s.k, d);
    q->bad |= s.bad;
    return q->n > 0 || q->k != 0;
}

/* a // d for a constant d > 0 and a not constant. */
static ExprId floordiv_pos(ExprTable *t, ExprId a, ExprId b, int64_t d)
{
    const ExprNode *x = &t->nodes[a];
    int64_t inner;
    Sum q, r;
    if (x->kind == EX_FLOORDIV && expr_as_const(t, x->args[1], &inner) && inner > 0
        && !mul_ov(inner, d, &inner)) {
        ExprId num = x->args[0];
        return expr_floordiv(t, num, expr_const(t, inner)); /* (x//a)//b = x//(a*b) */
    }
    if (!split_sum(t, a, d, &q, &r)) return intern2(t, EX_FLOORDIV, a, b);
    ExprId quo = sum_build(t, &q);
    return expr_add(t, quo, expr_floordiv(t, sum_build(t, &r), b));
}

ExprId expr_floordiv(ExprTable *t, ExprId a, ExprId b)
{
    int64_t d, v;
    if (!valid(t, a) || !valid(t, b)) return 0;
    if (!expr_as_const(t, b, &d) || d == 0) return intern2(t, EX_FLOORDIV, a, b);
    if (d == 1) return a;
    if (expr_as_const(t, a, &v)) return fdiv_ov(v, d, &v) ? 0 : expr_const(t, v);
    if (d < 0) return intern2(t, EX_FLOORDIV, a, b);
    return floordiv_pos(t, a, b, d);
}

/* a % d for a constant d > 0 and a not constant. */
static ExprId mod_pos(ExprTable *t, ExprId a, ExprId b, int64_t d)
{
    const ExprNode *x = &t->nodes[a];
    int64_t inner;
    Sum q, r;
    if (x->kind == EX_MOD && expr_as_const(t, x->args[1], &inner) && inner > 0
        && inner % d == 0)
        return expr_mod(t, x->args[0], b); /* (x % (c*k)) % c = x % c */
    if (!split_sum(t, a, d, &q, &r)) return intern2(t, EX_MOD, a, b);
    if (q.bad) return 0;
    return expr_mod(t, sum_build(t, &r), b);
}

ExprId expr_mod(ExprTable *t, ExprId a, ExprId b)
{
    int64_t d, v;
    if (!valid(t, a) || !valid(t, b)) return 0;
    if (!expr_as_const(t, b, &d) || d == 0) return intern2(t, EX_MOD, a, b);
    if (d == 1 || d == -1) return expr_const(t, 0);
    if (expr_as_const(t, a, &v)) return expr_const(t, fmod_i(v, d));
    if (d < 0) return intern2(t, EX_MOD, a, b);
    return mod_pos(t, a, b, d);
}

/* ---- max and min ---- */

static ExprId minmax(ExprTable *t, int kind, ExprId a, ExprId b)
{
    int64_t d;
    if (!valid(t, a) || !valid(t, b)) return 0;
    if (a == b) return a;
    if (const_diff(t, a, b, &d)) return (d >= 0) == (kind == EX_MAX) ? a : b;
    if (cmp(t, a, b) > 0) {
        ExprId s = a;
        a = b;
        b = s;
    }
    return intern2(t, kind, a, b);
}

ExprId expr_max(ExprTable *t, ExprId a, ExprId b)
{
    return minmax(t, EX_MAX, a, b);
}

ExprId expr_min(ExprTable *t, ExprId a, ExprId b)
{
    return minmax(t, EX_MIN, a, b);
}

/* ---- Dims ---- */

Dim dim_of(const ExprTable *t, ExprId e)
{
    int64_t v;
    if (!valid(t, e)) return DIM_NONE;
    if (expr_as_const(t, e, &v) && v >= 0) return v;
    return -(Dim)e - 1;
}

ExprId dim_expr(ExprTable *t, Dim d)
{
    if (d >= 0) return expr_const(t, d);
    uint64_t e = (uint64_t)(-(d + 1));
    return e < t->n ? (ExprId)e : 0;
}

static Dim dim_op(ExprTable *t, ExprId (*op)(ExprTable *, ExprId, ExprId), Dim a, Dim b)
{
    if (a == DIM_NONE || b == DIM_NONE) return DIM_NONE;
    return dim_of(t, op(t, dim_expr(t, a), dim_expr(t, b)));
}

Dim dim_add(ExprTable *t, Dim a, Dim b) { return dim_op(t, expr_add, a, b); }
Dim dim_sub(ExprTable *t, Dim a, Dim b) { return dim_op(t, expr_sub, a, b); }
Dim dim_mul(ExprTable *t, Dim a, Dim b) { return dim_op(t, expr_mul, a, b); }
Dim dim_floordiv(ExprTable *t, Dim a, Dim b) { return dim_op(t, expr_floordiv, a, b); }
Dim dim_mod(ExprTable *t, Dim a, Dim b) { return dim_op(t, expr_mod, a, b); }
Dim dim_max(ExprTable *t, Dim a, Dim b) { return dim_op(t, expr_max, a, b); }
Dim dim_min(ExprTable *t, Dim a, Dim b) { return dim_op(t, expr_min, a, b); }

int dim_eq(Dim a, Dim b)
{
    return a == b && a != DIM_NONE;
}

/* A negative Dim names an expression that already exists, so the const
 * readers below need not build anything. */
static ExprId dim_id(const ExprTable *t, Dim d)
{
    uint64_t e = (uint64_t)(-(d + 1));
    return e < t->n ? (ExprId)e : 0;
}

int64_t dim_eval(const ExprTable *t, Dim d, const int64_t *symvals, int *err)
{
    return d >= 0 ? d : expr_eval(t, dim_id(t, d), symvals, err);
}

size_t dim_print(const ExprTable *t, Dim d, char *buf, size_t cap)
{
    if (d < 0) return expr_print(t, dim_id(t, d), buf, cap);
    int n = snprintf(buf, cap, "%lld", (long long)d);
    return n < 0 ? 0 : (size_t)n;
}

/* ---- evaluation ---- */

static int64_t eval(const ExprTable *t, ExprId e, const int64_t *sv, int *err);

static int64_t eval_nary(const ExprTable *t, const ExprNode *x, const int64_t *sv, int *err)
{
    int64_t acc = x->c;
    for (int i = 0; i < x->n; i++) {
        int64_t v = eval(t, x->args[i], sv, err);
        int over = x->kind == EX_ADD ? add_ov(acc, v, &acc) : mul_ov(acc, v, &acc);
        if (over) *err = 1;
    }
    return acc;
}

static int64_t eval_binary(const ExprTable *t, const ExprNode *x, const int64_t *sv, int *err)
{
    int64_t a = eval(t, x->args[0], sv, err), b = eval(t, x->args[1], sv, err), q = 0;
    switch (x->kind) {
    case EX_MAX: return a > b ? a : b;
    case EX_MIN: return a < b ? a : b;
    default: break;
    }
    if (b == 0) {
        *err = 1; /* division by zero */
        return 0;
    }
    if (x->kind == EX_MOD) return fmod_i(a, b);
    if (fdiv_ov(a, b, &q)) *err = 1;
    return q;
}

static int64_t eval(const ExprTable *t, ExprId e, const int64_t *sv, int *err)
{
    const ExprNode *x = &t->nodes[e];
    switch (x->kind) {
    case EX_CONST: return x->c;
    case EX_SYM:
        if (sv) return sv[x->c];
        *err = 1;
        return 0;
    case EX_ADD: case EX_MUL: return eval_nary(t, x, sv, err);
    default: return eval_binary(t, x, sv, err);
    }
}

int64_t expr_eval(const ExprTable *t, ExprId e, const int64_t *symvals, int *err)
{
    int ignored = 0;
    if (!err) err = &ignored;
    if (!valid(t, e)) {
        *err = 1;
        return 0;
    }
    int before = *err;
    *err = 0;
    int64_t v = eval(t, e, symvals, err);
    if (*err) return 0;
    *err = before;
    return v;
}

/* ---- printing ----
 * Parentheses only where the grammar needs them: a sum inside a product
 * or a division, anything but an atom as a divisor, and a division that
 * is a factor after another factor or after a unary minus (-s0//2 would
 * read as (-s0)//2, s1*s0//2 as (s1*s0)//2). */

typedef struct {
    char *buf;
    size_t cap, len; /* len counts what would be written, as snprintf */
} Out;

static void put(Out *o, const char *s)
{
    for (; *s; s++, o->len++)
        if (o->len + 1 < o->cap) o->buf[o->len] = *s;
}

static void put_int(Out *o, int64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%lld", (long long)v);
    put(o, b);
}

static void print_node(Out *o, const ExprTable *t, ExprId e);

static void print_wrapped(Out *o, const ExprTable *t, ExprId e, int paren)
{
    if (paren) put(o, "(");
    print_node(o, t, e);
    if (paren) put(o, ")");
}

/* One product coef*f[0]*...: "-s0*2" when negative, "+" before it unless
 * first. MIN keeps its sign in the coefficient since -MIN overflows. */
static void print_prod(Out *o, const ExprTable *t, int64_t coef, const ExprId *f, int n, int first)
{
    int neg = coef < 0 && coef != INT64_MIN;
    if (neg) put(o, "-");
    else if (!first) put(o, "+");
    for (int i = 0; i < n; i++) {
        int kind = t->nodes[f[i]].kind;
        int guard = i > 0 || (neg && first);
        if (i > 0) put(o, "*");
        print_wrapped(o, t, f[i], kind == EX_ADD || ((kind == EX_FLOORDIV || kind == EX_MOD) && guard));
    }
    if (coef != 1 && coef != -1) {
        put(o, "*");
        put_int(o, neg ? -coef : coef);
    }
}

static void print_sum(Out *o, const ExprTable *t, const ExprNode *x)
{
    for (int i = 0; i < x->n; i++) {
        const ExprNode *y = &t->nodes[x->args[i]];
        if (y->kind == EX_MUL) print_prod(o, t, y->c, y->args, y->n, i == 0);
        else print_prod(o, t, 1, &x->args[i], 1, i == 0);
    }
    if (x->c > 0 || x->c == INT64_MIN) put(o, "+"); /* "+-9223372036854775808" */
    if (x->c != 0) put_int(o, x->c);
}

static void print_div(Out *o, const ExprTable *t, const ExprNode *x)
{
    int rk = t->nodes[x->args[1]].kind;
    print_wrapped(o, t, x->args[0], t->nodes[x->args[0]].kind == EX_ADD);
    put(o, x->kind == EX_MOD ? "%" : "//");
    print_wrapped(o, t, x->args[1], rk != EX_CONST && rk != EX_SYM && rk != EX_MAX && rk != EX_MIN);
}

static void print_node(Out *o, const ExprTable *t, ExprId e)
{
    const ExprNode *x = &t->nodes[e];
    switch (x->kind) {
    case EX_CONST: put_int(o, x->c); break;
    case EX_SYM: put(o, "s"); put_int(o, x->c); break;
    case EX_MUL: print_prod(o, t, x->c, x->args, x->n, 1); break;
    case EX_ADD: print_sum(o, t, x); break;
    case EX_FLOORDIV: case EX_MOD: print_div(o, t, x); break;
    default:
        put(o, x->kind == EX_MAX ? "max(" : "min(");
        print_node(o, t, x->args[0]);
        put(o, ",");
        print_node(o, t, x->args[1]);
        put(o, ")");
    }
}

size_t expr_print(const ExprTable *t, ExprId e, char *buf, size_t cap)
{
    Out o;
    o.buf = buf;
    o.cap = buf ? cap : 0;
    o.len = 0;
    if (valid(t, e)) print_node(&o, t, e);
    else put(&o, "?");
    if (o.cap > 0) o.buf[o.len < o.cap ? o.len : o.cap - 1] = '\0';
    return o.len;
}

/* ---- parsing: recursive descent over the grammar in expr.h ----
 * Every recursion passes through p_unary, which counts depth, so hostile
 * input such as "((((..." ends in an error rather than a blown stack. */

typedef struct {
    ExprTable *t;
    const char *s;   /* NUL-terminated */
    size_t pos;
    int depth;
    const char *err; /* the first error; later ones are consequences */
    size_t errpos;
} Parser;

static ExprId p_expr(Parser *p);

static ExprId p_fail(Parser *p, const char *why)
{
    if (!p->err) {
        p->err = why;
        p->errpos = p->pos;
    }
    return 0;
}

/* A constructor's result: 0 there without a syntax error is a resource
 * or range failure. */
static ExprId p_check(Parser *p, ExprId e)
{
    return e ? e : p_fail(p, "out of memory, overflow or nesting too deep");
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static void skip_ws(Parser *p)
{
    while (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' || p->s[p->pos] == '\r')
        p->pos++;
}

/* The next character after spaces, not consumed. */
static char peek(Parser *p)
{
    skip_ws(p);
    return p->s[p->pos];
}

static int accept(Parser *p, const char *tok)
{
    size_t n = strlen(tok);
    skip_ws(p);
    if (strncmp(p->s + p->pos, tok, n) != 0) return 0;
    p->pos += n;
    return 1;
}

static int expect(Parser *p, const char *tok, const char *why)
{
    if (accept(p, tok)) return 1;
    p_fail(p, why);
    return 0;
}

/* Digits at pos as a magnitude <= limit; 0 on overflow (errors set). */
static int p_digits(Parser *p, uint64_t limit, uint64_t *out)
{
    uint64_t v = 0;
    if (!is_digit(peek(p))) {
        p_fail(p, "expected a number");
        return 0;
    }
    for (; is_digit(p->s[p->pos]); p->pos++) {
        unsigned d = (unsigned)(p->s[p->pos] - '0');
        if (v > (limit - d) / 10) {
            p_fail(p, "number out of range");
            return 0;
        }
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

/* A literal; negative ones may reach INT64_MIN, which has no positive twin. */
static ExprId p_number(Parser *p, int neg)
{
    uint64_t v;
    if (!p_digits(p, neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, &v)) return 0;
    if (!neg) return p_check(p, expr_const(p->t, (int64_t)v));
    if (v == (uint64_t)INT64_MAX + 1) return p_check(p, expr_const(p->t, INT64_MIN));
    return p_check(p, expr_const(p->t, -(int64_t)v));
}

static ExprId p_sym(Parser *p)
{
    uint64_t k;
    if (!p_digits(p, INT_MAX, &k)) return 0;
    return p_check(p, expr_sym(p->t, (int)k));
}

/* "max" or "min" is read; "(" expr "," expr ")" follows. */
static ExprId p_minmax(Parser *p, ExprId (*op)(ExprTable *, ExprId, ExprId))
{
    ExprId a, b;
    if (!expect(p, "(", "expected '(' after max or min")) return 0;
    if (!(a = p_expr(p)) || !expect(p, ",", "expected ','")) return 0;
    if (!(b = p_expr(p)) || !expect(p, ")", "expected ')'")) return 0;
    return p_check(p, op(p->t, a, b));
}

/* primary = number | "s" number | ("max" | "min") "(" expr "," expr ")" | "(" expr ")" */
static ExprId p_primary(Parser *p)
{
    ExprId e;
    if (is_digit(peek(p))) return p_number(p, 0);
    if (p->s[p->pos] == 's' && is_digit(p->s[p->pos + 1])) {
        p->pos++;
        return p_sym(p);
    }
    if (accept(p, "max")) return p_minmax(p, expr_max);
    if (accept(p, "min")) return p_minmax(p, expr_min);
    if (!accept(p, "(")) return p_fail(p, "expected a number, a symbol, max, min or '('");
    if (!(e = p_expr(p)) || !expect(p, ")", "expected ')'")) return 0;
    return e;
}

/* unary = "-" unary | primary */
static ExprId p_unary(Parser *p)
{
    ExprId e;
    if (++p->depth > PARSE_MAX_DEPTH) return p_fail(p, "nested too deeply");
    if (!accept(p, "-")) e = p_primary(p);
    else if (is_digit(peek(p))) e = p_number(p, 1);
    else if ((e = p_unary(p)) != 0) e = p_check(p, expr_sub(p->t, expr_const(p->t, 0), e));
    p->depth--;
    return e;
}

/* term = unary (("*" | "//" | "%") unary)* */
static ExprId p_term(Parser *p)
{
    ExprId e = p_unary(p), b;
    while (e) {
        ExprId (*op)(ExprTable *, ExprId, ExprId);
        if (accept(p, "*")) op = expr_mul;
        else if (accept(p, "//")) op = expr_floordiv;
        else if (accept(p, "%")) op = expr_mod;
        else break;
        e = (b = p_unary(p)) ? p_check(p, op(p->t, e, b)) : 0;
    }
    return e;
}

/* expr = term (("+" | "-") term)* */
static ExprId p_expr(Parser *p)
{
    ExprId e = p_term(p), b;
    while (e) {
        ExprId (*op)(ExprTable *, ExprId, ExprId);
        if (accept(p, "+")) op = expr_add;
        else if (accept(p, "-")) op = expr_sub;
        else break;
        e = (b = p_term(p)) ? p_check(p, op(p->t, e, b)) : 0;
    }
    return e;
}

int expr_parse(ExprTable *t, const char *text, ExprId *out)
{
    Parser p;
    ExprId e = 0;
    memset(&p, 0, sizeof p);
    p.t = t;
    p.s = text ? text : "";
    if (!text) p_fail(&p, "no text");
    else if ((e = p_expr(&p)) != 0 && peek(&p) != '\0')
        p_fail(&p, "unexpected text after the expression");
    if (!e) p_fail(&p, "no expression"); /* every 0 above has set an error; a guard */
    t->err = p.err;
    t->errpos = p.errpos;
    if (out) *out = p.err ? 0 : e;
    return p.err ? -1 : 0;
}
