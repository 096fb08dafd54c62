/*
 * sched.h — the scheduler's result: which graph nodes are materialised and
 * the kernels, one per materialised node, in topological order. A kernel
 * computes its node and every unmaterialised node it reads (views and
 * pointwise ops inline, fused reductions as row accumulators).
 */
#ifndef KN_SCHED_H
#define KN_SCHED_H

#include "core.h"
#include "target.h" /* GemmWindow */

#define SCHED_MAX_ROW 16 /* reductions fused into one kernel, at most */
#define SCHED_MANY_READS 4 /* a pointwise value of 4 ops or more read at this many places (through views) is materialised */
#define SCHED_LONG 32      /* so is one of this many ops read by two */
#define SCHED_WIDE 4       /* so is a cheap value read by two kernels or more that reads this many buffers of its size */

typedef struct {
    uint8_t *materialised; /* per graph node: 1 if it has a buffer of its own */
    uint8_t *fused;        /* per graph node: 1 for a reduction computed row by row, or a dot element by
                              element, inside its one reader's kernel */
    uint32_t *dot;         /* per kernel node: the dot fused into its kernel, or 0 */
    uint32_t *kernels;     /* the node each kernel writes, in id (topological) order */
    int nkernels;
} Schedule;

int sched_build(kn_ctx *ctx, const Graph *g, const uint32_t *outs, int nouts, Arena *a, Schedule *out); /* 0 ok */
/* The same, where hint is g's nodes at other sizes (a graph generic in a size, at one probe size),
 * whose element counts the size heuristics (what is worth a buffer of its own) read instead of g's:
 * the probes of a generic program then decide alike, each for its own shapes where legality asks. */
int sched_build_hint(kn_ctx *ctx, const Graph *g, const Graph *hint, const uint32_t *outs, int nouts, Arena *a,
                     Schedule *out);
/* One line per kernel: what it writes and the nodes fused into it (a fused
 * reduction marked "(row)", a fused dot "(epilogue)"). */
size_t sched_dump(const Graph *g, const Schedule *s, char *buf, size_t cap);

/* The buffer (a materialised node, mat[root]) that node u is a view of, with
 * u's element strides and offset over it, following permute, expand, slice
 * and reshape: 1, or 0 if u is not such a view. */
int sched_view(const Graph *g, const uint8_t *mat, uint32_t u, uint32_t *root, int64_t *stride, int64_t *off);
/* Whether dot operand u (B, (G, C*KH*KW, N*OH*OW), or its transpose) is
 * decomp_conv.c's stack of convolution windows over an input x (N, G*C, H,
 * W), zero-padded or not: 1 with x and the window's geometry in w (x's
 * strides left 0), else 0. */
int sched_window(const Graph *g, const uint8_t *mat, uint32_t u, uint32_t *x, GemmWindow *w);
/* The one stride of the batch dims [0, nb) (a dot's), or 0 if they do not collapse. */
int sched_batch_stride(int nb, const Dim *shape, const int64_t *stride, int64_t *out);

#endif
