/*
 * lower.h — lowering one scheduled kernel to loop IR (lower.c).
 */
#ifndef KN_LOWER_H
#define KN_LOWER_H

#include "ir.h"
#include "sched.h"

#define LOWER_INTERP 1  /* lower_kernel's answer for a node left to the interpreter */
#define LOWER_NOGROUP 2 /* lower_group's for nodes that are not one pointwise kernel */
#define LOWER_GROUP_MAX 8

/* Lowers the kernel that writes node v into k (initialised here): 0, LOWER_INTERP, or an error status.
 * A dot fused into v's kernel (s->dot[v]) is an accumulator per element there. */
int lower_kernel(kn_ctx *ctx, const Graph *g, const Schedule *s, uint32_t v, ExprTable *ex, Arena *a, Kernel *k);
/* For a target that runs that dot through its template instead: v's kernel
 * as the template's epilogue, a tile kernel (Kernel.tile) over (batch, M, N)
 * whose output buffer already holds the dot's values. 0 or an error status. */
int lower_epilogue(kn_ctx *ctx, const Graph *g, const Schedule *s, uint32_t v, ExprTable *ex, Arena *a, Kernel *k);

/* Nodes vs[0..nv) of one shape, each a pointwise (or view) kernel of its own
 * (no fused reduction or dot, no gather), in topological order, as one
 * kernel: one loop nest, a store into each node's buffer (buffers 0 .. nv-1,
 * out), every node read by a later one at its own element taken from the
 * store's value instead of its buffer (so no value is computed twice in the
 * kernel, and a target's loop reads each input once for all of them).
 * 0, LOWER_NOGROUP (a node is not such a kernel, the shapes differ, or a
 * later node reads an earlier one at another element), or an error status. */
int lower_group(kn_ctx *ctx, const Graph *g, const Schedule *s, const uint32_t *vs, int nv, ExprTable *ex, Arena *a,
                Kernel *k);

#endif
