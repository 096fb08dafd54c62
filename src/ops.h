/*
 * ops.h — the closed set of primitives, one row each.
 *
 * Every later stage indexes its per-op facts by this table: the shape rule
 * and interpreter kernel (prim.c, interp.c), the VJP rule (autodiff.c), the
 * lowering (lower.c) and each target's rendering. Adding a row is a design
 * decision: the count is guarded below.
 *
 * Columns: X(ENUM, name, nsrc, class)
 *   class  OC_LEAF     graph input, no computation
 *          OC_UNARY    elementwise, one source, same dtype out
 *          OC_BINARY   elementwise, two sources of equal shape and dtype
 *          OC_COMPARE  as binary, bool out
 *          OC_WHERE    cond (bool), a, b of equal shape
 *          OC_CAST     dtype change (params.dtype)
 *          OC_REDUCE   over params.i[d] != 0 axes, keeping them as size 1
 *          OC_MOVE     a view: reshape, permute, expand, slice; pad copies
 *          OC_INDEX    gather / scatter_add along params.i[0]
 *          OC_DOT      (..., M, K) x (..., K, N) -> (..., M, N), equal batch dims
 *          OC_CREATE   shape in params.i, dtype in params.dtype; no sources but
 *                      rand's: the generator's key and counter (0-d i64), so
 *                      the state a draw reads is dataflow, not a constant
 */
#ifndef KN_OPS_H
#define KN_OPS_H

#define KN_PRIMS(X)                          \
    X(INPUT,       "input",       0, OC_LEAF)    \
    X(NEG,         "neg",         1, OC_UNARY)   \
    X(EXP,         "exp",         1, OC_UNARY)   \
    X(LOG,         "log",         1, OC_UNARY)   \
    X(SQRT,        "sqrt",        1, OC_UNARY)   \
    X(RECIP,       "recip",       1, OC_UNARY)   \
    X(SIN,         "sin",         1, OC_UNARY)   \
    X(COS,         "cos",         1, OC_UNARY)   \
    X(TANH,        "tanh",        1, OC_UNARY)   \
    X(ERF,         "erf",         1, OC_UNARY)   \
    X(ABS,         "abs",         1, OC_UNARY)   \
    X(FLOOR,       "floor",       1, OC_UNARY)   \
    X(ADD,         "add",         2, OC_BINARY)  \
    X(SUB,         "sub",         2, OC_BINARY)  \
    X(MUL,         "mul",         2, OC_BINARY)  \
    X(DIV,         "div",         2, OC_BINARY)  /* integers: truncating */ \
    X(MAX,         "max",         2, OC_BINARY)  /* NaN propagates */ \
    X(MIN,         "min",         2, OC_BINARY)  \
    X(POW,         "pow",         2, OC_BINARY)  \
    X(CMPLT,       "cmplt",       2, OC_COMPARE) \
    X(CMPEQ,       "cmpeq",       2, OC_COMPARE) \
    X(WHERE,       "where",       3, OC_WHERE)   \
    X(CAST,        "cast",        1, OC_CAST)    \
    X(SUM,         "sum",         1, OC_REDUCE)  \
    X(RMAX,        "reduce_max",  1, OC_REDUCE)  \
    X(RESHAPE,     "reshape",     1, OC_MOVE)    \
    X(PERMUTE,     "permute",     1, OC_MOVE)    \
    X(EXPAND,      "expand",      1, OC_MOVE)    \
    X(SLICE,       "slice",       1, OC_MOVE)    \
    X(PAD,         "pad",         1, OC_MOVE)    \
    X(GATHER,      "gather",      2, OC_INDEX)   \
    X(SCATTER_ADD, "scatter_add", 3, OC_INDEX)   \
    X(DOT,         "dot",         2, OC_DOT)     \
    X(FULL,        "full",        0, OC_CREATE)  \
    X(IOTA,        "iota",        0, OC_CREATE)  \
    X(RAND,        "rand",        2, OC_CREATE)  /* key, counter */

typedef enum {
#define X(e, name, nsrc, cls) OP_##e,
    KN_PRIMS(X)
#undef X
    OP_COUNT
} Op;

typedef enum {
    OC_LEAF,    /* graph input */
    OC_UNARY,   /* elementwise, one source */
    OC_BINARY,  /* elementwise, two sources */
    OC_COMPARE, /* elementwise, bool result */
    OC_WHERE,   /* select */
    OC_CAST,    /* dtype change */
    OC_REDUCE,  /* reduction over marked axes */
    OC_MOVE,    /* view or pad */
    OC_INDEX,   /* gather, scatter_add */
    OC_DOT,     /* batched matmul */
    OC_CREATE   /* made from parameters (rand: and the generator's state) */
} OpClass;

typedef struct {
    const char *name;
    int nsrc;
    OpClass cls;
} OpInfo;

extern const OpInfo kn_opinfo[OP_COUNT];

/* C99 static assertion: the primitive set is closed at 40 */
typedef char kn_assert_op_count[(OP_COUNT <= 40) ? 1 : -1];

#endif
