/*
 * sched.h — the scheduler's result: which graph nodes are materialised and
 * the kernels, one per materialised node, in topological order.
 */
#ifndef KN_SCHED_H
#define KN_SCHED_H

#include "core.h"

typedef struct {
    uint8_t *materialised; /* per graph node: 1 if it has a buffer of its own */
    uint32_t *kernels;     /* the node each kernel writes, in id (topological) order */
    int nkernels;
} Schedule;

int sched_build(kn_ctx *ctx, const Graph *g, const uint32_t *outs, int nouts, Arena *a, Schedule *out); /* 0 ok */
/* One line per kernel: what it writes and the nodes fused into it. */
size_t sched_dump(const Graph *g, const Schedule *s, char *buf, size_t cap);

#endif
