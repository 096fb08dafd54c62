/*
 * loopopt.h — loop-IR passes that change how a kernel runs, never what it
 * computes (loopopt.c):
 *
 *     LoopOptions o = {0};                 // zeroed: every pass, default thresholds
 *     if (loopopt_run(ctx, &k, &o)) ...    // kn_last_error says why
 *
 *     for s0 in 4                           for s0 in 32
 *       for s1 in 8                  =>       b0[s0] = exp(b1[s0])
 *         b0[s0*8+s1] = exp(b1[s0*8+s1])
 *
 * 1. simplify: with each loop var s_k in [0, extent_k), x%c becomes x and
 *    x//c becomes 0 when 0 <= x < c provably (interval arithmetic; more
 *    generally both fold whenever x stays inside one period of c);
 * 2. split: a loop of constant extent E whose indices divide or reduce its
 *    var by c becomes two, of extents E/c and c (c dividing E), when that
 *    leaves fewer divisions and moduli of loop vars in its indices:
 *    (v*c + r)//c is v and (v*c + r)%c is r (a reshape of a permute read
 *    back through a flat loop);
 * 3. guards: a loop of constant extent becomes pieces, one after another,
 *    cut where a compare of indices in its body changes value and is
 *    decided in each piece (a pad's, a phase's, a cat's mask); the compare
 *    folds to a constant there, and with it the wheres it picks between;
 *    a piece of one iteration becomes its body;
 * 4. collapse: a loop whose body is exactly one loop becomes one loop of
 *    the product extent when every index is rest + b*(E_inner*outer + inner);
 * 5. mark: an outermost loop that does more than parallel_threshold
 *    elements of work, whose iterations touch disjoint parts of every buffer
 *    it stores (an iteration may read back what it wrote: a row kernel's
 *    output) and which uses no accumulator declared outside it, becomes
 *    LOOP_PARALLEL; an innermost loop of at least vector_width iterations
 *    with unit-stride stores, unit-stride or invariant loads, no buffer
 *    loaded and stored at different indices, and no accumulator declared
 *    inside becomes LOOP_VECTOR(vector_width) (updates of accumulators
 *    declared outside are allowed: targets give them lanes).
 * Between collapse and mark, tile: a sum over the outer dim of a row-major
 * tensor (a column's sum) becomes tiles of 16 columns summed into the
 * output a row of the tile at a time (a vector loop); a transposing copy
 * becomes 16 x 16 tiles (then simplify again over the tiles' indices).
 * After mark, cascade: a float sum that would add more than 16 values in
 * sequence (a vector loop's accumulator: 512, 16 a lane of 32) is fed by blocks
 * of that many, each summed into an accumulator of its own that is added
 * into one a level up, at most 16 to a level, so its rounding error grows
 * with the log of the count (PyTorch's cascade sum); the only pass that
 * changes a result's bits. Then unroll: an innermost loop left serial, of
 * extent 2 to 8 and a small body, becomes LOOP_UNROLL(extent). loopopt.c
 * has each rule.
 * Only serial loops are split, cut, collapsed, tiled or marked; kinds set before are kept
 * (a cascade's blocks keep their loop's).
 * Symbolic extents (shape symbols, IR_SHAPE_SYM) give no ranges, so
 * simplification never relies on a size's value, only on the one fact that
 * holds at every size: the var of a loop of extent E is in [0, E), so v%E is
 * v and v//E is 0 (a gather's index read back through its shape); collapse
 * takes an outer loop of symbolic extent over an inner one of constant
 * extent.
 */
#ifndef KN_LOOPOPT_H
#define KN_LOOPOPT_H

#include "ir.h"

enum {
    LOOPOPT_NO_SIMPLIFY = 1, /* skip index simplification */
    LOOPOPT_NO_COLLAPSE = 2, /* skip loop collapsing */
    LOOPOPT_NO_MARK = 4,     /* skip parallel and vector marking */
    LOOPOPT_NO_TILE = 8,     /* skip tiling */
    LOOPOPT_NO_UNROLL = 16,  /* skip unroll marking */
    LOOPOPT_NO_SPLIT = 32,   /* skip loop splitting */
    LOOPOPT_NO_GUARDS = 64,  /* skip cutting loops at their masks' points */
    LOOPOPT_NO_CASCADE = 128 /* skip cascading long float sums */
};

typedef struct {
    int64_t parallel_threshold; /* elements of work above which the outer loop goes parallel; 0: 32768 */
    uint32_t vector_width;      /* lanes of a vector loop; 0: 8 */
    unsigned skip;              /* LOOPOPT_NO_* bits */
    int64_t hint;               /* > 0: the value assumed for shape symbols (ir.h IR_SHAPE_SYM) where a size
                                   only decides how a loop runs (its work, against parallel_threshold; its
                                   extent, against vector_width), never what is valid (ranges, disjointness):
                                   so the marks stay right at every size. 0: symbolic loops stay serial */
} LoopOptions;

/* Rewrites k in place (new value nodes are appended; old ones become
 * unreachable): 0, or KN_ENOMEM with a message naming the kernel. o may be
 * NULL (defaults). The result passes ir_verify when k did. */
int loopopt_run(kn_ctx *ctx, Kernel *k, const LoopOptions *o);

/* [*lo, *hi] bounds index e of a statement of k wherever it stands: every
 * loop var ranges over [0, extent) of the loop that binds it (the widest,
 * if several reachable loops do). 1, or 0 when nothing is known (a var
 * bound by no loop or by a symbolic extent, a possible overflow). For a
 * target deciding whether a load is in bounds without its guard. */
int loopopt_range(const Kernel *k, ExprId e, int64_t *lo, int64_t *hi);

#endif
