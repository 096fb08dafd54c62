/*
 * compile.h — compiling a primitive graph into a program (compile.c), and
 * running it (program.c). Capture (kn_compile) builds on this.
 */
#ifndef KN_COMPILE_H
#define KN_COMPILE_H

#include "core.h"

typedef enum {
    BACKEND_C,      /* system cc, cached shared objects (the default) */
    BACKEND_TCC,    /* libtcc in the process */
    BACKEND_INTERP  /* no code: the reference interpreter */
} CompileBackend;

typedef struct {
    CompileBackend backend; /* an unavailable compiler falls back to interp */
    kn_mode mode;           /* KN_MODE_MAX_AUTOTUNE: time candidate GEMM blockings and vector widths on this
                               machine, remember the winners (KN_MODE_DEFAULT, _REDUCE_OVERHEAD: defaults) */
    int keep_packed;        /* 1: a dot whose B is a graph input keeps B packed across runs while its storage
                               is unchanged (program.c, "B kept packed"): kn_compile's programs, whose weights
                               come back call after call; not eager's one-op programs */
    const int *donate;      /* per output (NULL: none): the input whose storage it may be written into, in
                               place, or -1: the caller replaces that input's value by the output's after
                               each run (a step's weights and optimizer state; compile.c, "outputs in place") */
} CompileOpts;

typedef struct {
    int kernels, interp_steps;
    size_t arena_bytes, code_bytes;
    const char *backend;
    int tuned, tune_cached;  /* max-autotune: steps whose candidates were timed / whose winner was known */
    int from_cache;          /* 1: steps, plan and module came from the program cache (backend c) */
    int wino;                /* dots whose spec allows Winograd (GemmSpec.wino); backend c computes them so */
    int in_place;            /* outputs the program may write over the input CompileOpts.donate names */
} ProgramStats;

typedef struct Program Program;

Program *compile_graph(kn_ctx *ctx, const Graph *g, const uint32_t *outs, int nouts, const CompileOpts *o);
/* How a program hands out its outputs (program_set_reuse). */
enum {
    PROGRAM_FRESH,  /* new tensors each run (the default: eager's single-op programs keep nothing) */
    PROGRAM_POOL,   /* new handles over storage the program keeps, reused once no other handle refers to it */
    PROGRAM_STATIC  /* the program's own handles (TF_OWNED: kn_free ignores them); the next run overwrites them */
};
/* inputs[k] is the tensor for graph input k; outs get tensors in the
 * caller's scope as the reuse mode says. A run on contiguous inputs with no
 * interpreter step allocates nothing after the first but, unless STATIC,
 * the outputs' handles (and, if FRESH, their storage). */
kn_status program_run(Program *p, kn_tensor *const *inputs, int ninputs, kn_tensor **outs);
void program_set_reuse(Program *p, int mode);

/* Dynamic shapes (see compile.c, "programs generic in a size"): gs[j] is a
 * graph at size sv[j] of its one size symbol z0 (j < np, 3 <= np <= 4; the
 * same nodes but for sizes, outs the same nodes in each), sv[0] the size
 * that hints how loops run. One program whose kernels read z0 at run time,
 * compiled once; NULL with the reason in why (cap bytes) where the graphs
 * do not lower to one, the error cleared: the caller specialises. It keeps
 * no graph and runs nothing itself: program_at gives a program that runs g
 * (the graph at z0 = s, of the probes' node count) planned for that size,
 * with gen's code; gen must outlive it. */
Program *compile_generic(kn_ctx *ctx, const Graph *const *gs, const int64_t *sv, int np, const uint32_t *outs,
                         int nouts, const CompileOpts *o, char *why, size_t cap);
Program *program_at(kn_ctx *ctx, const Program *gen, const Graph *g, int64_t s);
void program_stats(const Program *p, ProgramStats *st);
/* One more holder of p (a body traced again that made the same graph): program_free drops one; the
 * last frees it. Calls of its holders must not overlap (none do: kn_call runs one at a time). */
Program *program_share(Program *p);
void program_free(Program *p);

#endif
