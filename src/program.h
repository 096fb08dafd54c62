/*
 * program.h — what a Program holds: its steps, memory plan, module and
 * run-time state. Private to the two files that see inside one: compile.c,
 * which makes programs, and program.c, which runs and frees them; the rest
 * of kiln holds compile.h's opaque handle.
 */
#ifndef KN_PROGRAM_H
#define KN_PROGRAM_H

#include "compile.h"
#include "target.h"
#include "../targets/c/gemm.h" /* KnParallel */

typedef struct {
    uint32_t node;      /* the node it writes */
    int interp;         /* 1: the interpreter runs the node's primitive */
    Kernel *k;          /* compiled: its kernel and entry */
    void *fn;
    GemmSpec *gemm;     /* or a dot through the target's template (k: its epilogue, if any): */
    uint32_t dot;       /* the dot node (node itself, or the dot fused into node's kernel) */
    uint32_t root[2];   /* the buffers A and B are views of */
    int64_t off[2];     /* and where the views start, in elements */
    struct Tune *tune;  /* max-autotune: its candidates, or NULL */
    int shares;         /* a dot whose spec an earlier step's has (names aside): that step, else -1 */
    int same;           /* a loop kernel equal to an earlier step's but for its name and the nodes its buffers
                           hold: that step, whose code it runs, else -1 */
    void *epi;          /* a dot's epilogue entry, handed to the template (so it can share a unit) */
    void *bpack;        /* a dot whose spec keeps its weights (bkeep: B packed, ukeep: A's Winograd transform):
                           the unit's NAME_bpack or NAME_upack, where it has one, else NULL; for the
                           library's Winograd (spec.wino 2) kn_rt_wino_upack, which kept_b calls with
                           the spec's geometry (not as the units' (B, dst)) */
    ExprId *gx;         /* a generic program's dot whose sizes depend on z0: batch, M, N, K, sa_b, sa_m, sa_k,
                           sb_b, sb_k, sb_n, off[0], off[1] and a convolution's window n, c, h, w, kh, kw, oh,
                           ow, sh, sw, dh, dw, ph, pw, sx_n, sx_c, sx_h, sx_w as expressions (GX_N), run
                           through the library's GEMM (gemm_rt.h) at each size's values; NULL: the spec's */
} Step;

enum { GX_WIN = 12, GX_N = 30, GEN_PROBES = 4 };

struct Program {
    kn_ctx *ctx;
    Arena arena;
    const Graph *g;
    const Target *t;
    void *module;
    Step *steps;
    int nsteps;
    uint32_t *outs;
    int nouts;
    uint32_t *all;      /* backend interp: every node to run */
    int nall;
    int64_t *offset;    /* per node: arena offset, -1 for inputs and outputs */
    size_t arena_bytes;
    void *mem;          /* the arena: its first 64-byte boundary in mem_raw */
    void *mem_raw;      /* the arena's allocation, arena_bytes + 64 */
    size_t code_bytes;
    int nkernels, ninterp;
    int tuned, tune_cached;
    double render_ns;   /* of load_kernels' time, rendering (KILN_LOGS=perf) */
    const char *src;    /* the generated source (in the arena), NULL if none */
    int from_cache;     /* made from a program cache entry */
    int keep_packed;    /* CompileOpts.keep_packed */
    int *donate;        /* per output: the input it is written over in place, or -1 ("outputs in place") */
    /* dynamic shapes: a generic program (compile_generic) holds kernels that read the size symbol z0 at
       run time, and no plan; an instance of it at one size (program_at) plans that size's graph and runs
       the generic program's steps and module, passing z0 */
    ExprTable *gex;     /* generic: the table of its kernels' and steps' expressions */
    uint32_t gn;        /* generic: the node count of its graphs at every size */
    const Program *base; /* an instance: the generic program whose steps it runs */
    int64_t shape[1];   /* an instance: z0's value */
    int64_t *gv;        /* an instance: per step, its gx at z0 (GX_N each) */
    /* run time: made at the first run (run_init), reused by every later one */
    int reuse;          /* PROGRAM_FRESH, _POOL or _STATIC (compile.h) */
    kn_tensor **vals;   /* per node: its tensor during a run (inputs, outputs) */
    kn_tensor **view;   /* per node: a handle over its arena bytes, for interpreter steps */
    kn_tensor **pool;   /* per output i: pool[2i], pool[2i + 1], handles holding its storages */
    uint8_t *fresh;     /* per output: a handle made by this run, for the caller */
    uint8_t *older;     /* per output: the pool slot used less recently */
    struct Packed *packed; /* per step: its B kept packed (program.c, "B kept packed") */
    uint64_t *prof_ns;  /* KILN_LOGS=perf: per step, its time over every run but the first (logged by
                           program_free) */
    int prof_runs, runs;
    int refs;           /* holders besides the first (program_share): program_free drops one */
};

/* g (its pointers but A unset) and win (19 numbers) for the product spec s, for the library's GEMM and
 * Winograd (src/gemm_rt.h; compile.c) */
void spec_rt_gemm(const GemmSpec *s, struct KnRtGemm *g, int64_t *win);
/* What a program's units are lent in b[4] (gemm.h): the port's threads, its context's scratch and the
 * library's GEMM and kn_rt_conv (program.c) */
KnParallel program_lends(const Program *p);

/* A node's bytes: its arena block, or its storage. */
static inline size_t node_bytes(const Node *n)
{
    return (size_t)tensor_numel(n->ndim, n->shape) * kn_dtype_size((kn_dtype)n->dtype);
}

#endif
