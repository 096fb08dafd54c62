/*
 * eager.h — eager ops through compiled single-op kernels (eager.c): the
 * counters tests and `kiln explain` read, and the cache's size for tests.
 */
#ifndef KN_EAGER_H
#define KN_EAGER_H

#include "core.h"

typedef struct {
    uint64_t runs;      /* ops run through a kernel */
    uint64_t hits;      /* of which the kernel was in the cache */
    uint64_t compiles;  /* signatures compiled (or tried) */
    uint64_t failures;  /* signatures that did not compile: they run on the interpreter */
    uint64_t evictions; /* kernels dropped to stay within the cache's size */
    int entries;        /* kernels cached now */
    int failed;         /* the backend has no compiler here: everything runs on the interpreter */
    kn_backend backend; /* the context's eager backend */
} EagerStats;

void eager_stats(const kn_ctx *ctx, EagerStats *st);
void eager_set_capacity(kn_ctx *ctx, int cap); /* tests: at most cap kernels (1..512) */

#endif
