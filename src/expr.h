/*
 * expr.h — the index-expression language: integer expressions over the
 * symbols s0, s1, ... that serve symbolic shapes, views and the loop IR.
 *
 * Expressions live in an ExprTable as small interned nodes named by an
 * ExprId. The constructors canonicalise as they build, so two expressions
 * that the rules below prove equal are one node, and equality is id
 * equality:
 *
 *     ExprTable t;
 *     expr_init(&t, ctx);
 *     ExprId s0 = expr_sym(&t, 0);
 *     ExprId a = expr_add(&t, expr_mul(&t, s0, expr_const(&t, 4)), expr_const(&t, 1));
 *     ExprId b;
 *     expr_parse(&t, "1 + 4*s0", &b);           // b == a
 *     char text[64];
 *     expr_print(&t, a, text, sizeof text);      // "s0*4+1"
 *     expr_free(&t);                              // every node at once
 *
 * Canonical form, kept by every constructor:
 * - constants fold; x+0, x*1, x*0, x//1 and x%1 vanish;
 * - a sum is flat: a constant plus terms coef*product, like terms combined
 *   (s0+s0 is s0*2, s0-s0 is 0), terms in a fixed structural order;
 * - a product is flat: a coefficient times factors in that order; a
 *   constant times a sum is distributed, a symbol times a sum is not, so
 *   s1*(s0+1) and s0*s1+s1 stay different (the rules are sound, not
 *   complete); a sum inside a product is divided by its content (the gcd
 *   of its coefficients, signed like its first term), so (-2*s0-2)*s1 is
 *   (s0+1)*s1*-2;
 * - for a positive constant c: (c*q + r)//c is q + r//c and (c*q + r)%c is
 *   r%c (so (a*c)//c is a and (a*c)%c is 0), (x//a)//b is x//(a*b) and
 *   (x%(c*k))%c is x%c;
 * - max and min order their operands and pick one when the two differ by
 *   a constant: max(s0, s0+1) is s0+1.
 * The order is structural, not by id, so the printed form of an expression
 * is the same in every table whatever was built before it.
 *
 * Semantics: 64-bit integers, symbols of any sign. // is floor division and
 * % takes the sign of the divisor, as Python's and PyTorch's; a target that
 * renders C must emit the floor forms, not / and %.
 *
 * Text form (what expr_print writes and expr_parse reads):
 *     expr    = term (("+" | "-") term)*
 *     term    = unary (("*" | "//" | "%") unary)*
 *     unary   = "-" unary | primary           ("-" before digits: a literal)
 *     primary = number | "s" number | ("max" | "min") "(" expr "," expr ")"
 *             | "(" expr ")"
 * Spaces are allowed between tokens; expr_print writes none.
 *
 * Dims (core.h): a Dim >= 0 is a concrete size; a Dim < 0 names expression
 * -(d+1). dim_of writes every non-negative constant as a concrete Dim, so
 * Dims made by dim_of and the dim_ helpers compare with dim_eq (==).
 *
 * Failure: a constructor returns 0 (EX_NONE) when memory runs out, a
 * constant overflows int64, a node would nest deeper than EXPR_MAX_DEPTH or
 * take more than EXPR_MAX_ARGS operands. Each constructor given 0 returns 0
 * and each dim_ helper given DIM_NONE returns DIM_NONE, so calls nest and
 * the failure is checked once. Nothing here prints, exits or uses globals.
 */
#ifndef KN_EXPR_H
#define KN_EXPR_H

#include "core.h"

#define EXPR_MAX_DEPTH 64 /* nesting limit, which bounds every recursion here */
#define EXPR_MAX_ARGS 32  /* terms of a sum, factors of a product */
#define DIM_NONE ((Dim)-1) /* the Dim of expression 0: a failure */

typedef uint32_t ExprId; /* 0 is "none" */

typedef enum {
    EX_NONE,     /* id 0 only: the failure sentinel */
    EX_CONST,    /* c: the value */
    EX_SYM,      /* c: k, for the symbol sk */
    EX_MUL,      /* c * args[0] * ... ; >= 1 factors, none CONST or MUL, c != 0 */
    EX_ADD,      /* c + args[0] + ... ; >= 1 terms, none CONST or ADD, nonzero */
    EX_FLOORDIV, /* floor(args[0] / args[1]) */
    EX_MOD,      /* args[0] - args[1] * floor(args[0] / args[1]) */
    EX_MAX,      /* max(args[0], args[1]), args in structural order */
    EX_MIN       /* min(args[0], args[1]), args in structural order */
} ExprKind;

/* One node. Readers may walk nodes (renderers do) but never change them. */
typedef struct {
    uint8_t kind;        /* ExprKind */
    uint8_t n;           /* operands in args */
    uint8_t depth;       /* 1 for CONST and SYM */
    uint32_t hash;
    int64_t c;           /* see ExprKind */
    const ExprId *args;  /* n operands, in the arena; NULL when n == 0 */
} ExprNode;

typedef struct {
    Arena arena;         /* nodes, operand lists and the hash table */
    ExprNode *nodes;     /* nodes[0] is the "none" node */
    uint32_t n, cap;
    uint32_t *slots;     /* open addressing over ids, 0 = empty */
    uint32_t hcap;       /* a power of two */
    const char *err;     /* why the last expr_parse failed, NULL if it did not */
    size_t errpos;       /* and the byte offset where it noticed */
} ExprTable;

/* ---- the table ---- */
void expr_init(ExprTable *t, kn_ctx *ctx); /* cannot fail; memory comes on first use */
void expr_free(ExprTable *t);              /* every node at once; expr_init to reuse */
const ExprNode *expr_node(const ExprTable *t, ExprId e); /* NULL for 0 or a stranger */
int expr_as_const(const ExprTable *t, ExprId e, int64_t *v); /* 1 and *v if constant */
int expr_has_sym(const ExprTable *t, ExprId e, int k);         /* 1 if sk occurs in e (0 for 0) */

/* ---- constructors: canonical, interned, 0 on failure ---- */
ExprId expr_const(ExprTable *t, int64_t v);
ExprId expr_sym(ExprTable *t, int k);       /* sk, k >= 0 */
ExprId expr_add(ExprTable *t, ExprId a, ExprId b);
ExprId expr_sub(ExprTable *t, ExprId a, ExprId b);
ExprId expr_mul(ExprTable *t, ExprId a, ExprId b);
ExprId expr_floordiv(ExprTable *t, ExprId a, ExprId b); /* b == 0 stays, eval reports it */
ExprId expr_mod(ExprTable *t, ExprId a, ExprId b);
ExprId expr_max(ExprTable *t, ExprId a, ExprId b);
ExprId expr_min(ExprTable *t, ExprId a, ExprId b);

/* Value of e with sk = symvals[k] (symvals must cover every symbol in e).
 * Division by zero, int64 overflow, e == 0 or a symbol with symvals NULL
 * set *err to 1 and return 0; *err is never cleared, so one flag can
 * cover many calls. err may be NULL. */
int64_t expr_eval(const ExprTable *t, ExprId e, const int64_t *symvals, int *err);

/* Text form into buf, as snprintf: writes at most cap bytes including the
 * NUL and returns the length the whole text needs. Expression 0 is "?". */
size_t expr_print(const ExprTable *t, ExprId e, char *buf, size_t cap);

/* Parse the whole NUL-terminated text. 0 with *out set, or -1 with *out = 0
 * and t->err, t->errpos saying why and where. Any bytes are safe input;
 * expr_parse(expr_print(e)) gives back e itself. */
int expr_parse(ExprTable *t, const char *text, ExprId *out);

/* ---- Dims: concrete sizes or expressions (see the top) ---- */
Dim dim_of(const ExprTable *t, ExprId e);  /* the value if a constant >= 0, else -(1+e) */
ExprId dim_expr(ExprTable *t, Dim d);      /* the expression of d; 0 for a stranger */
Dim dim_add(ExprTable *t, Dim a, Dim b);
Dim dim_sub(ExprTable *t, Dim a, Dim b);
Dim dim_mul(ExprTable *t, Dim a, Dim b);
Dim dim_floordiv(ExprTable *t, Dim a, Dim b);
Dim dim_mod(ExprTable *t, Dim a, Dim b);
Dim dim_max(ExprTable *t, Dim a, Dim b);
Dim dim_min(ExprTable *t, Dim a, Dim b);
int dim_eq(Dim a, Dim b);                  /* same size; DIM_NONE equals nothing */
int64_t dim_eval(const ExprTable *t, Dim d, const int64_t *symvals, int *err);
size_t dim_print(const ExprTable *t, Dim d, char *buf, size_t cap);

#endif
