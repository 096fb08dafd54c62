/*
 * test_expr.c — the index-expression language (src/expr.c).
 *
 * Interning and the canonical forms, evaluation with floor semantics,
 * golden text, print/parse round trips, parse errors on garbage, and a
 * fixed-seed generator of random trees checked against a reference
 * evaluator written here, independent of the simplifier: for every tree,
 * eval(e) == the reference, parse(print(e)) is e itself, and a fresh table
 * parses the text to the same value and the same text. Allocation-failure
 * injection checks that running out of memory gives 0, never a crash.
 */
#include <stdlib.h>

#include "test.h"
#include "../src/expr.h"

static kn_ctx *ctx;

/* ---- helpers ---- */

static ExprId P(ExprTable *t, const char *s)
{
    ExprId e = 0;
    CHECK_MSG(expr_parse(t, s, &e) == 0, "parse \"%s\": %s at %d", s, t->err ? t->err : "", (int)t->errpos);
    return e;
}

static const char *S(const ExprTable *t, ExprId e, char *buf)
{
    expr_print(t, e, buf, 256);
    return buf;
}

/* Checks that text parses and prints as want. */
static void golden(ExprTable *t, const char *text, const char *want)
{
    char buf[256];
    ExprId e = P(t, text);
    CHECK_MSG(strcmp(S(t, e, buf), want) == 0, "\"%s\" printed \"%s\", want \"%s\"", text, buf, want);
}

static void same(ExprTable *t, const char *a, const char *b)
{
    CHECK_MSG(P(t, a) == P(t, b), "\"%s\" and \"%s\" should be one node", a, b);
}

static int64_t ev(const ExprTable *t, ExprId e, const int64_t *sv, int *err)
{
    *err = 0;
    return expr_eval(t, e, sv, err);
}

/* ---- interning and Dims ---- */

static void test_interning(void)
{
    ExprTable t;
    expr_init(&t, ctx);
    ExprId s0 = expr_sym(&t, 0), s1 = expr_sym(&t, 1);
    CHECK(s0 != 0 && s1 != 0 && s0 != s1);
    CHECK(expr_sym(&t, 0) == s0);
    CHECK(expr_const(&t, 5) == expr_const(&t, 5));
    CHECK(expr_const(&t, 5) != expr_const(&t, 6));
    ExprId a = expr_add(&t, expr_mul(&t, s0, expr_const(&t, 4)), expr_const(&t, 1));
    ExprId b = expr_add(&t, expr_const(&t, 1), expr_mul(&t, expr_const(&t, 4), s0));
    CHECK(a == b);
    CHECK(P(&t, "1 + 4*s0") == a);
    CHECK(P(&t, "s0*4+1") == a);
    CHECK(expr_sym(&t, -1) == 0);
    CHECK(expr_node(&t, 0) == NULL && expr_node(&t, a)->kind == EX_ADD);
    CHECK(expr_node(&t, 1u << 30) == NULL);
    expr_free(&t);
}

static void test_dims(void)
{
    ExprTable t;
    int64_t v, sv[2] = {5, 7};
    int err = 0;
    char buf[64];
    expr_init(&t, ctx);
    Dim s0 = dim_of(&t, expr_sym(&t, 0)), s1 = dim_of(&t, expr_sym(&t, 1));
    CHECK(DIM_IS_SYM(s0) && DIM_IS_SYM(s1) && s0 != s1);
    CHECK(dim_of(&t, expr_const(&t, 12)) == 12);
    CHECK(DIM_IS_SYM(dim_of(&t, expr_const(&t, -3))));
    CHECK(expr_as_const(&t, dim_expr(&t, dim_of(&t, expr_const(&t, -3))), &v) && v == -3);
    CHECK(dim_add(&t, 3, 4) == 7 && dim_mul(&t, 3, 4) == 12 && dim_floordiv(&t, 7, 2) == 3);
    CHECK(dim_mod(&t, 7, 4) == 3 && dim_max(&t, 3, 9) == 9 && dim_min(&t, 3, 9) == 3);
    CHECK(dim_sub(&t, dim_add(&t, s0, 3), s0) == 3); /* symbolic back to concrete */
    Dim d = dim_add(&t, dim_mul(&t, s0, 4), 1);
    CHECK(dim_eq(d, dim_add(&t, 1, dim_mul(&t, 4, s0))));
    CHECK(!dim_eq(d, dim_add(&t, dim_mul(&t, s1, 4), 1)));
    CHECK(dim_eval(&t, d, sv, &err) == 21 && !err && dim_eval(&t, 8, NULL, &err) == 8);
    CHECK(dim_print(&t, d, buf, sizeof buf) == 6 && strcmp(buf, "s0*4+1") == 0);
    CHECK(dim_print(&t, 42, buf, sizeof buf) == 2 && strcmp(buf, "42") == 0);
    CHECK(dim_add(&t, DIM_NONE, 3) == DIM_NONE && dim_mul(&t, s0, DIM_NONE) == DIM_NONE);
    CHECK(!dim_eq(DIM_NONE, DIM_NONE));
    CHECK(dim_expr(&t, -1000000) == 0 && dim_add(&t, -1000000, 1) == DIM_NONE);
    CHECK(dim_add(&t, INT64_MAX, 1) == DIM_NONE); /* overflow */
    expr_free(&t);
}

/* ---- canonical forms ---- */

static void test_identities(void)
{
    ExprTable t;
    expr_init(&t, ctx);
    ExprId x = P(&t, "s0*s1+3"), zero = expr_const(&t, 0), one = expr_const(&t, 1);
    CHECK(expr_add(&t, x, zero) == x && expr_add(&t, zero, x) == x);
    CHECK(expr_mul(&t, x, one) == x && expr_mul(&t, one, x) == x);
    CHECK(expr_mul(&t, x, zero) == zero);
    CHECK(expr_floordiv(&t, x, one) == x && expr_mod(&t, x, one) == zero);
    CHECK(expr_sub(&t, x, x) == zero);
    CHECK(expr_max(&t, x, x) == x && expr_min(&t, x, x) == x);
    same(&t, "3+4*5", "23");
    same(&t, "7//2", "3");
    same(&t, "-7//2", "-4");
    same(&t, "-7%3", "2");
    same(&t, "7%-3", "-2");
    same(&t, "7//-2", "-4");
    same(&t, "max(3,9)", "9");
    same(&t, "min(3,-9)", "-9");
    expr_free(&t);
}

static void test_canonical(void)
{
    ExprTable t;
    expr_init(&t, ctx);
    same(&t, "s0+s0", "s0*2");
    same(&t, "s0+s1", "s1+s0");
    same(&t, "s0*s1", "s1*s0");
    same(&t, "(s0*s1)*s2", "s0*(s1*s2)");
    same(&t, "(s0+s1)+s2", "s0+(s1+s2)");
    same(&t, "2*(s0+1)", "s0*2+2");
    same(&t, "s0*3-s0*3+s1", "s1");
    same(&t, "s0*s1*2+s1*s0", "s0*s1*3");
    same(&t, "(s0*4)//4", "s0");
    same(&t, "(s0*4)%4", "0");
    same(&t, "(s0*4+s1*8)//4", "s0+s1*2");
    same(&t, "(s0*4+5)//4", "s0+1");
    same(&t, "(s0*4+5)%4", "1");
    same(&t, "(s0*4+s1)//4", "s0+s1//4");
    same(&t, "(s0*4+s1)%4", "s1%4");
    same(&t, "(s0+5)//4", "(s0+1)//4+1");
    same(&t, "(s0//2)//3", "s0//6");
    same(&t, "(s0%12)%4", "s0%4");
    same(&t, "((s0+s1)*6)//3", "s0*2+s1*2");
    same(&t, "max(s0,s0+1)", "s0+1");
    same(&t, "min(s0,s0+1)", "s0");
    same(&t, "max(s0,s1)", "max(s1,s0)");
    same(&t, "min(s0-1,s0-3)", "s0-3");
    same(&t, "--s0", "s0");
    CHECK(P(&t, "s1*(s0+1)") != P(&t, "s0*s1+s1")); /* not distributed: sound, not complete */
    CHECK(P(&t, "max(s0,s1)") != P(&t, "min(s0,s1)"));
    CHECK(P(&t, "s0//s1") != P(&t, "s0%s1"));
    expr_free(&t);
}

/* ---- evaluation ---- */

static void test_eval(void)
{
    ExprTable t;
    int64_t sv[3] = {3, -7, 0};
    int err = 0;
    expr_init(&t, ctx);
    CHECK(ev(&t, P(&t, "s0*4+1"), sv, &err) == 13 && !err);
    CHECK(ev(&t, P(&t, "s1//2"), sv, &err) == -4 && !err);
    CHECK(ev(&t, P(&t, "s1%2"), sv, &err) == 1 && !err);
    CHECK(ev(&t, P(&t, "s1%-2"), sv, &err) == -1 && !err);
    CHECK(ev(&t, P(&t, "max(s0,s1)*min(s0,s1)"), sv, &err) == -21 && !err);
    CHECK(ev(&t, P(&t, "s0//s2"), sv, &err) == 0 && err);  /* division by zero */
    CHECK(ev(&t, P(&t, "s0%s2"), sv, &err) == 0 && err);
    CHECK(ev(&t, P(&t, "5//0"), sv, &err) == 0 && err);    /* kept, not folded */
    CHECK(ev(&t, P(&t, "s0"), NULL, &err) == 0 && err);     /* no values */
    CHECK(ev(&t, 0, sv, &err) == 0 && err);
    CHECK(ev(&t, P(&t, "s0*4611686018427387904"), sv, &err) == 0 && err); /* overflow */
    err = 1;
    CHECK(expr_eval(&t, P(&t, "s0+1"), sv, &err) == 4 && err == 1); /* sticky */
    CHECK(expr_eval(&t, P(&t, "s0+1"), sv, NULL) == 4);
    expr_free(&t);
}

static void test_has_sym(void)
{
    ExprTable t;
    expr_init(&t, ctx);
    CHECK(expr_has_sym(&t, P(&t, "s0*4+1"), 0) && !expr_has_sym(&t, P(&t, "s0*4+1"), 1));
    CHECK(expr_has_sym(&t, P(&t, "max(s2,(s1+3)//s0)%7"), 1)); /* under every kind of node */
    CHECK(!expr_has_sym(&t, P(&t, "max(s2,(s1+3)//s0)%7"), 3));
    CHECK(!expr_has_sym(&t, P(&t, "12"), 0) && !expr_has_sym(&t, 0, 0));
    expr_free(&t);
}

/* ---- text ---- */

static void test_golden(void)
{
    ExprTable t;
    expr_init(&t, ctx);
    golden(&t, "1 + 4 * s0", "s0*4+1");
    golden(&t, "(1+s0)//2", "(s0+1)//2");
    golden(&t, "s1 - s0", "-s0+s1");
    golden(&t, "s0 - 1", "s0-1");
    golden(&t, "-s0", "-s0");
    golden(&t, "s0 * -3", "-s0*3");
    golden(&t, "-(s0//2)", "-(s0//2)");
    golden(&t, "(s0//2)*s1", "s1*(s0//2)");
    golden(&t, "s0 // (s1*2)", "s0//(s1*2)");
    golden(&t, "s0 % max(s1, 4)", "s0%max(4,s1)");
    golden(&t, "(s0+1)*(s1+2)", "(s0+1)*(s1+2)");
    golden(&t, "s0 // -2", "s0//-2");
    golden(&t, "-9223372036854775808", "-9223372036854775808");
    golden(&t, "s0 - 9223372036854775807 - 1", "s0+-9223372036854775808");
    golden(&t, "s10 + s2", "s2+s10");
    expr_free(&t);
}

static const char *round_trip_cases[] = {
    "0", "7", "-7", "s0", "s3", "s0+1", "s0*4+1", "(s0+1)//2", "s0%3", "-s0+s1",
    "s0*s1", "s0*s0*s1", "s0*s1+s0+s1+1", "(s0+1)*(s1-1)", "-(s0+1)*s1",
    "s0//2*3", "-(s0//2)*3", "s1-s0//2", "s1-(s0//2)*3", "-(s0%5)+s1",
    "s0//(s1+1)", "s0%(s1*2)", "max(s0,s1)+1", "min(s0*2,s1)//3", "max(-s0,s1)",
    "(s0+s1)//(s0-s1)", "(s0*s1+1)%7", "max(min(s0,s1),s2)", "-max(s0,1)*2",
    "s0*-9223372036854775808", "s0+-9223372036854775808", "9223372036854775807",
    "(s0//3)%4", "s0//3//s1", "(s0%s1)%s2", "5//0", "s0%-3", "s0//-3*s1",
    "-s0*s1*s2+s0*s1*s2*2",
};

static void test_round_trip(void)
{
    ExprTable t;
    char buf[256];
    expr_init(&t, ctx);
    for (size_t i = 0; i < sizeof round_trip_cases / sizeof *round_trip_cases; i++) {
        ExprId e = P(&t, round_trip_cases[i]), back = 0;
        S(&t, e, buf);
        CHECK_MSG(expr_parse(&t, buf, &back) == 0 && back == e, "\"%s\" printed \"%s\"",
                  round_trip_cases[i], buf);
    }
    expr_free(&t);
}

static void test_print_cap(void)
{
    ExprTable t;
    char buf[8];
    expr_init(&t, ctx);
    ExprId e = P(&t, "s0*4+s1*2+1"); /* "s0*4+s1*2+1": 11 characters */
    memset(buf, 'x', sizeof buf);
    CHECK(expr_print(&t, e, buf, 5) == 11 && strcmp(buf, "s0*4") == 0);
    CHECK(expr_print(&t, e, buf, 1) == 11 && buf[0] == '\0');
    CHECK(expr_print(&t, e, NULL, 0) == 11);
    CHECK(expr_print(&t, 0, buf, sizeof buf) == 1 && strcmp(buf, "?") == 0);
    expr_free(&t);
}

static const char *bad_cases[] = {
    "", " ", "s", "s0+", "+s0", "(s0", "s0)", "max(s0)", "max(s0,)", "min(,)", "max s0",
    "1/2", "s0**2", "x", "s0 s1", "--", "s-1", "s0//", "%3", "()", "maxx(1,2)",
    "9223372036854775808", "-9223372036854775809", "99999999999999999999", "s99999999999",
    "s0+1)", "s0 = 1", "\xff", "s0\x01", "1e3", "0x10", "s0 + (s1 * (s2 - 1)",
};

static void test_parse_errors(void)
{
    ExprTable t;
    char deep[2048];
    ExprId e = 1;
    expr_init(&t, ctx);
    for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
        e = 1;
        CHECK_MSG(expr_parse(&t, bad_cases[i], &e) == -1 && e == 0 && t.err != NULL,
                  "\"%s\" should not parse", bad_cases[i]);
    }
    CHECK(expr_parse(&t, NULL, &e) == -1 && e == 0);
    CHECK(expr_parse(&t, "s0 + )", &e) == -1 && t.errpos == 5);
    CHECK(expr_parse(&t, "s0+1", &e) == 0 && t.err == NULL);
    memset(deep, '(', sizeof deep - 1); /* deep nesting: an error, not a blown stack */
    deep[sizeof deep - 1] = '\0';
    CHECK(expr_parse(&t, deep, &e) == -1);
    memset(deep, '-', sizeof deep - 3);
    strcpy(deep + sizeof deep - 3, "s0");
    CHECK(expr_parse(&t, deep, &e) == -1);
    expr_free(&t);
}

/* ---- random trees against a reference evaluator ---- */

static uint64_t rng_state;

static uint32_t rnd(uint32_t n) /* xorshift64*, uniform enough for tests */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ULL) >> 33) % n;
}

enum { R_CONST, R_SYM, R_ADD, R_SUB, R_MUL, R_DIV, R_MOD, R_MAX, R_MIN, R_NEG, R_NOPS };

typedef struct {
    int op;
    int64_t c;
    int a, b;
} Tree;

static int gen(Tree *tr, int *n, int depth)
{
    int i = (*n)++;
    tr[i].op = depth == 0 || rnd(4) == 0 ? (int)rnd(2) : (int)(R_ADD + rnd(R_NOPS - R_ADD));
    tr[i].c = tr[i].op == R_CONST ? (int64_t)rnd(11) - 3 : (int64_t)rnd(3);
    if (tr[i].op < R_ADD) return i;
    tr[i].a = gen(tr, n, depth - 1);
    if (tr[i].op == R_NEG) return i;
    /* divisors: mostly small positive constants, sometimes anything */
    if ((tr[i].op == R_DIV || tr[i].op == R_MOD) && rnd(4) != 0) {
        tr[i].b = (*n)++;
        tr[tr[i].b].op = R_CONST;
        tr[tr[i].b].c = 1 + rnd(6);
        return i;
    }
    tr[i].b = gen(tr, n, depth - 1);
    return i;
}

static int64_t ref_floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Straight from the definitions; trees are small enough not to overflow. */
static int64_t ref(const Tree *tr, int i, const int64_t *sv, int *err)
{
    const Tree *x = &tr[i];
    if (x->op == R_CONST) return x->c;
    if (x->op == R_SYM) return sv[x->c];
    int64_t a = ref(tr, x->a, sv, err);
    if (x->op == R_NEG) return -a;
    int64_t b = ref(tr, x->b, sv, err);
    switch (x->op) {
    case R_ADD: return a + b;
    case R_SUB: return a - b;
    case R_MUL: return a * b;
    case R_MAX: return a > b ? a : b;
    case R_MIN: return a < b ? a : b;
    default: break;
    }
    if (b == 0) {
        *err = 1;
        return 0;
    }
    return x->op == R_DIV ? ref_floordiv(a, b) : a - b * ref_floordiv(a, b);
}

static ExprId build(ExprTable *t, const Tree *tr, int i)
{
    const Tree *x = &tr[i];
    if (x->op == R_CONST) return expr_const(t, x->c);
    if (x->op == R_SYM) return expr_sym(t, (int)x->c);
    ExprId a = build(t, tr, x->a);
    if (x->op == R_NEG) return expr_sub(t, expr_const(t, 0), a);
    ExprId b = build(t, tr, x->b);
    switch (x->op) {
    case R_ADD: return expr_add(t, a, b);
    case R_SUB: return expr_sub(t, a, b);
    case R_MUL: return expr_mul(t, a, b);
    case R_DIV: return expr_floordiv(t, a, b);
    case R_MOD: return expr_mod(t, a, b);
    case R_MAX: return expr_max(t, a, b);
    default: return expr_min(t, a, b);
    }
}

/* eval(e) equals the tree's value wherever the tree has one (the
 * simplifier may drop a division by zero, as in (s0//s1)*0, never add one). */
static void check_values(const ExprTable *t, ExprId e, const Tree *tr, const char *text)
{
    for (int k = 0; k < 6; k++) {
        int64_t sv[3];
        int rerr = 0, err = 0;
        for (int j = 0; j < 3; j++) sv[j] = (int64_t)rnd(19) - 9;
        int64_t want = ref(tr, 0, sv, &rerr);
        if (rerr) continue;
        int64_t got = ev(t, e, sv, &err);
        CHECK_MSG(!err && got == want, "%s at (%d,%d,%d): got %lld want %lld", text,
                  (int)sv[0], (int)sv[1], (int)sv[2], (long long)got, (long long)want);
    }
}

/* The same text in a table with a different history: same value, same text. */
static void check_fresh(const ExprTable *t, ExprId e, const char *text)
{
    ExprTable u;
    ExprId f = 0;
    char buf[1024];
    expr_init(&u, ctx);
    expr_parse(&u, "max(s2*s1, s0//7) + s1%3", &f); /* unrelated nodes first */
    CHECK_MSG(expr_parse(&u, text, &f) == 0, "fresh parse of %s", text);
    expr_print(&u, f, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, text) == 0, "fresh table printed %s, first %s", buf, text);
    for (int k = 0; k < 3; k++) {
        int64_t sv[3] = {(int64_t)rnd(19) - 9, (int64_t)rnd(19) - 9, (int64_t)rnd(19) - 9};
        int e1 = 0, e2 = 0;
        int64_t v1 = ev(t, e, sv, &e1), v2 = ev(&u, f, sv, &e2);
        CHECK(e1 == e2 && v1 == v2);
    }
    expr_free(&u);
}

static void test_random(void)
{
    ExprTable t;
    Tree tr[64];
    char buf[1024];
    expr_init(&t, ctx);
    rng_state = 0x2545F4914F6CDD1DULL;
    for (int i = 0; i < 400; i++) {
        int n = 0;
        ExprId back = 0;
        gen(tr, &n, 4);
        ExprId e = build(&t, tr, 0);
        CHECK(e != 0);
        size_t len = expr_print(&t, e, buf, sizeof buf);
        CHECK(len < sizeof buf);
        CHECK_MSG(expr_parse(&t, buf, &back) == 0 && back == e, "round trip of %s", buf);
        check_values(&t, e, tr, buf);
        check_fresh(&t, e, buf);
    }
    expr_free(&t);
}

/* Random strings over the language's own alphabet: never a crash, and
 * whatever parses round-trips. */
static void test_fuzz(void)
{
    static const char alphabet[] = "s0123+-*/%()maxin, ";
    ExprTable t;
    char text[24], buf[512];
    int parsed = 0, ok = 1;
    expr_init(&t, ctx);
    for (int i = 0; i < 20000; i++) {
        int n = 1 + (int)rnd(sizeof text - 1);
        ExprId e, back;
        for (int j = 0; j < n; j++) text[j] = alphabet[rnd(sizeof alphabet - 1)];
        text[n] = '\0';
        if (expr_parse(&t, text, &e) != 0) continue;
        parsed++;
        expr_print(&t, e, buf, sizeof buf);
        if (expr_parse(&t, buf, &back) != 0 || back != e) {
            ok = 0;
            printf("    fuzz: %s printed %s\n", text, buf);
        }
    }
    CHECK(ok);
    CHECK(parsed > 100);
    expr_free(&t);
}

/* ---- limits and allocation failure ---- */

static void test_limits(void)
{
    ExprTable t;
    ExprId e, s1;
    int i;
    expr_init(&t, ctx);
    e = expr_sym(&t, 0);
    s1 = expr_sym(&t, 1);
    for (i = 0; i < 2 * EXPR_MAX_DEPTH && e; i++) e = expr_floordiv(&t, e, s1);
    CHECK(e == 0 && i == EXPR_MAX_DEPTH); /* depth limit: a clean 0 */
    CHECK(expr_add(&t, 0, s1) == 0 && expr_mul(&t, s1, 0) == 0 && expr_max(&t, 0, 0) == 0);
    e = expr_sym(&t, 0);
    for (i = 1; i <= 2 * EXPR_MAX_ARGS && e; i++) e = expr_add(&t, e, expr_sym(&t, i));
    CHECK(e == 0 && i == EXPR_MAX_ARGS + 1); /* too many terms */
    e = P(&t, "s0*4611686018427387904");
    CHECK(expr_mul(&t, e, expr_const(&t, 2)) == 0);  /* coefficient overflow */
    CHECK(expr_add(&t, expr_const(&t, INT64_MAX), expr_const(&t, 1)) == 0);
    CHECK(expr_floordiv(&t, expr_const(&t, INT64_MIN), expr_const(&t, -1)) == 0);
    CHECK(P(&t, "-9223372036854775808%-1") == expr_const(&t, 0));
    for (i = 0; i < 5000; i++) e = expr_add(&t, expr_sym(&t, i), expr_const(&t, i));
    CHECK(e != 0 && t.n > 10000); /* many nodes: the table grows */
    CHECK(P(&t, "s4999+4999") == e && P(&t, "s17+17") == expr_add(&t, expr_sym(&t, 17), expr_const(&t, 17)));
    expr_free(&t);
}

typedef struct {
    long fail_at; /* index of the first allocation that fails; < 0 none */
    long count;   /* allocations asked for so far */
    int once;     /* fail only that one, not every one after it */
} Budget;

static void *failing_alloc(void *user, void *p, size_t o, size_t n)
{
    Budget *b = user;
    (void)o;
    if (n == 0) {
        free(p);
        return NULL;
    }
    long i = b->count++;
    if (b->fail_at >= 0 && (b->once ? i == b->fail_at : i >= b->fail_at)) return NULL;
    return realloc(p, n);
}

/* A workload that grows the node array and the hash several times, with
 * allocation fail_at failing: every result must be 0 or right. Returns
 * whether all results were right; *parsed says whether the last one built. */
static int oom_workload(ExprTable *t, int *parsed)
{
    int64_t sv[3] = {5, 3, 2};
    int err = 0, ok = 1;
    ExprId e;
    for (int i = 0; i < 200; i++) { /* (s[i%3]*i + s[(i+1)%3]) // 2 */
        ExprId m = expr_mul(t, expr_sym(t, i % 3), expr_const(t, i));
        ExprId x = expr_floordiv(t, expr_add(t, m, expr_sym(t, (i + 1) % 3)), expr_const(t, 2));
        if (x) ok &= expr_eval(t, x, sv, &err) == (sv[i % 3] * i + sv[(i + 1) % 3]) / 2 && !err;
    }
    *parsed = expr_parse(t, "max(s0*4+1, (s1+7)//2) % s2", &e) == 0;
    if (*parsed) ok &= expr_eval(t, e, sv, &err) == 1 && !err;
    return ok;
}

/* Fails allocation k, or every one from k, then checks the results and,
 * after a single failure, that the table still works. */
static void oom_round(kn_ctx *c, Budget *b, long k, int once)
{
    ExprTable t;
    ExprId e = 0;
    int parsed, ok;
    int64_t sv[2] = {4, 9};
    b->fail_at = k;
    b->once = once;
    b->count = 0;
    expr_init(&t, c);
    ok = oom_workload(&t, &parsed);
    CHECK_MSG(ok, "allocation %ld failing%s gave a wrong value", k, once ? " once" : "");
    if (once) CHECK_MSG(expr_parse(&t, "s1*s0+s1%4", &e) == 0 && expr_eval(&t, e, sv, NULL) == 37,
                        "no recovery after allocation %ld failed", k);
    expr_free(&t);
    b->fail_at = -1;
}

static void test_oom(void)
{
    Budget b = {-1, 0, 0};
    kn_ctx_opts opts;
    ExprTable t;
    int parsed;
    memset(&opts, 0, sizeof opts);
    opts.alloc = failing_alloc;
    opts.alloc_user = &b;
    kn_ctx *c = kn_ctx_new(&opts);
    CHECK(c != NULL);
    if (!c) return;
    b.count = 0; /* how many allocations the workload makes when none fail */
    expr_init(&t, c);
    CHECK(oom_workload(&t, &parsed) && parsed);
    expr_free(&t);
    long total = b.count;
    CHECK(total > 0);
    for (long k = 0; k < total; k++) {
        oom_round(c, &b, k, 0);
        oom_round(c, &b, k, 1);
    }
    kn_ctx_free(c);
}

int main(void)
{
    ctx = kn_ctx_new(NULL);
    if (!ctx) {
        printf("expr: no context\n");
        return 1;
    }
    test_interning();
    test_dims();
    test_identities();
    test_canonical();
    test_eval();
    test_has_sym();
    test_golden();
    test_round_trip();
    test_print_cap();
    test_parse_errors();
    test_random();
    test_fuzz();
    test_limits();
    test_oom();
    kn_ctx_free(ctx);
    TEST_END("expr");
}
