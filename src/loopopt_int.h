/*
 * loopopt_int.h — what the files of the loop passes share (loopopt.h is their interface): the
 * pass state Opt and the helpers one pass file calls in another, each named opt_ after the state
 * it takes. loopopt.c holds the common machinery (integer steps, ranges, simplification, the
 * rewrite walk, affine forms) and runs the passes in order; each pass, or pair of passes that
 * belong together, has a file of its own:
 *
 *     loopopt_split.c    pass 2 split (at divisors), 3 guards (at masks' points), 4 collapse
 *     loopopt_tile.c     pass 5 tile (column sums, transposing copies)
 *     loopopt_mark.c     pass 6 marks (parallel, vector), 8 unroll
 *     loopopt_cascade.c  pass 7 cascade (long float sums)
 */
#ifndef KN_LOOPOPT_INT_H
#define KN_LOOPOPT_INT_H

#include <stdint.h>

#include "loopopt.h"

#define CASCADE_RUN 16                   /* values an accumulator adds in sequence (pass 7, cascade) */
#define BIG ((int64_t)1 << 62) /* bounds stay within +-BIG, so sums of two never overflow */
#define TILE 16 /* pass 5: a tile's side; pass 7 cascades a tiled column sum by tiles */
enum { SPLIT_MAX = 16 }; /* pass 2: loops split in one kernel, each adding a var */

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

/* loopopt.c (checked integer steps, ranges, simplification, rewriting, affine forms) */
int opt_range(const Opt *o, ExprId e, int64_t *lo, int64_t *hi);
int64_t opt_clamp_big(int64_t v);
int opt_mul_ok(int64_t a, int64_t b, int64_t *r);
int64_t opt_fdiv(int64_t a, int64_t c);
int opt_positive_const(const ExprTable *t, ExprId e, int64_t *c);
int opt_extent_at_hint(Opt *o, ExprId e, int64_t *v);
int64_t opt_gcd64(int64_t a, int64_t b);
ExprId opt_simplify(Opt *o, ExprId e);
IrRef opt_rw_value(Opt *o, IrRef r);
void opt_bind(Opt *o, const IrNode *loop, int on);
int opt_rewrite(Opt *o, IrRef loop, IndexFn fx);
int opt_depends(const Kernel *k, IrRef r, int v, int depth);
int opt_affine(ExprTable *t, ExprId e, int v, int64_t *coef, ExprId *rest);

/* loopopt_split.c (pass 2 split, pass 3 guards, pass 4 collapse) */
int opt_split_block(Opt *o, IrRef s, int depth);
int opt_guards(Opt *o);
int opt_collapse_block(Opt *o, IrRef s);

/* loopopt_tile.c (pass 5 tile) */
ExprId opt_expr_subst(ExprTable *t, ExprId e, int v, ExprId by);
ExprId opt_tile_fx(Opt *o, ExprId e);
IrRef opt_rebuild(Opt *o, IrRef r, IndexFn fx);
int opt_const_extent(Opt *o, IrRef l, int64_t *e);
int opt_tile_block(Opt *o, IrRef s);

/* loopopt_mark.c (pass 6 marks, pass 8 unroll) */
int opt_mark(Opt *o, const LoopOptions *opt);
int opt_unroll_block(Opt *o, IrRef s);

/* loopopt_cascade.c (pass 7 cascade) */
int opt_colsum_cascade(Opt *o, IrRef l, IrRef z, const IrNode *I, const IrNode *S, const IrNode *U, kn_dtype dt, int64_t ei);
int opt_cascade(Opt *o);

#endif
