/*
 * lower.h — lowering one scheduled kernel to loop IR (lower.c).
 */
#ifndef KN_LOWER_H
#define KN_LOWER_H

#include "ir.h"
#include "sched.h"

#define LOWER_INTERP 1 /* lower_kernel's answer for a node left to the interpreter */

/* Lowers the kernel that writes node v into k (initialised here): 0, LOWER_INTERP, or an error status. */
int lower_kernel(kn_ctx *ctx, const Graph *g, const Schedule *s, uint32_t v, ExprTable *ex, Arena *a, Kernel *k);

#endif
