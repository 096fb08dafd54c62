/*
 * lower.h — lowering one scheduled kernel to loop IR (lower.c).
 */
#ifndef KN_LOWER_H
#define KN_LOWER_H

#include "ir.h"
#include "sched.h"

#define LOWER_INTERP 1 /* lower_kernel's answer for a node left to the interpreter */

/* Lowers the kernel that writes node v into k (initialised here): 0, LOWER_INTERP, or an error status.
 * A dot fused into v's kernel (s->dot[v]) is an accumulator per element there. */
int lower_kernel(kn_ctx *ctx, const Graph *g, const Schedule *s, uint32_t v, ExprTable *ex, Arena *a, Kernel *k);
/* For a target that runs that dot through its template instead: v's kernel
 * as the template's epilogue, a tile kernel (Kernel.tile) over (batch, M, N)
 * whose output buffer already holds the dot's values. 0 or an error status. */
int lower_epilogue(kn_ctx *ctx, const Graph *g, const Schedule *s, uint32_t v, ExprTable *ex, Arena *a, Kernel *k);

#endif
