/*
 * target.h — what a code generator is: one struct of function pointers that
 * turns loop-IR kernels into something a machine runs. src/compile.c drives
 * it and src/program.c runs what it loaded; nothing else in the compiler
 * knows which target is in use.
 *
 * The C target (targets/c) fills it twice, for its two compile-and-load
 * paths: "tcc" renders the scalar dialect and compiles it in the process
 * with libtcc (milliseconds); "c" renders the same text for the system
 * compiler, built into a shared object through port_jit's content-hash
 * cache. Both run a kernel as a call fn(bufs).
 *
 * How the next targets fill the same struct:
 * - targets/wasm: render emits WebAssembly module bytes directly (one
 *   exported function per kernel, SIMD128 for vector loops, buffers as
 *   offsets into the one linear memory); load instantiates the module
 *   through the port (the browser's WebAssembly.instantiate, or node's);
 *   sym returns an export; run calls it with the buffer offsets.
 * - targets/cuda: render emits the CUDA C dialect of the C renderer
 *   (extern "C" __global__ kernels, gpu_block/gpu_thread loops mapped to
 *   blockIdx/threadIdx); load compiles it with NVRTC to a cubin and loads
 *   it with cuModuleLoadData (both opened with dlopen); sym is
 *   cuModuleGetFunction; run is cuLaunchKernel with the grid the kernel's
 *   gpu loops give, buffers being device pointers.
 * So a target is at most these eight entries (and an optional dot template); each new one must earn its place.
 */
#ifndef KN_TARGET_H
#define KN_TARGET_H

#include "dot.h"
#include "ir.h"

typedef struct GemmSpec {
    const char *name;         /* the C identifier of the entry point */
    int dtype;                /* GEMM_F32 or GEMM_F64 */
    int64_t batch, M, N, K;   /* each >= 1 */
    int64_t sa_b, sa_m, sa_k; /* A[t][m][k] is A[t*sa_b + m*sa_m + k*sa_k] (elements) */
    int64_t sb_b, sb_k, sb_n; /* B[t][k][n] is B[t*sb_b + k*sb_k + n*sb_n] */
    int bias;                 /* 1: b[3] is a bias of N elements added to every row */
    int act;                  /* GEMM_ACT_* applied last */
    const char *epilogue;     /* or NULL: a tile kernel of the same unit (Kernel.tile), NAME(b[5], t, m0, m1,
                                 n0, n1), called on each tile of C once it is final (after bias and act) */
    int kc, mc;               /* cache blocks of K and M (a template's tunables), 0: its defaults; <= 4096 */
    GemmWindow win;           /* B as a convolution's window view (win.on), or not */
    int bkeep;                /* 1 (B strided and the same for every batch index): the SIMD dialects also
                                 define NAME_bpack, which packs the whole of B once into a buffer that later
                                 calls take as b[7] instead of packing B themselves (targets/c/gemm.h) */
    int wino;                 /* 1: B is a 3x3, stride-1, dilation-1 window (win.on, !win.t, batch 1) and the
                                 product may be computed by Winograd F(2x2, 3x3): a target renders it so
                                 (targets/c/wino.c; same entry, buffers and epilogue contract, within
                                 rounding of the direct product) or ignores the flag (computes directly);
                                 2: f32, by the library's kn_rt_conv (src/gemm_rt.h), which a unit reaches
                                 through what b[4] lends: the same window by F(4x4, 3x3), or a transposed
                                 one (win.t: a weights' gradient) of a 3x3 stride-1 window with the images
                                 in a vector's lanes */
    int ukeep;                /* 1 (with wino): the Winograd rendering also defines NAME_upack, which writes
                                 the weights' transform U (from A) into a buffer that later calls take as
                                 b[7] instead of transforming A themselves (targets/c/gemm.h); a rendering
                                 that computes directly ignores it */
} GemmSpec;

/* Renders the unit for s in dialect GEMM_SCALAR or GEMM_SIMD, as snprintf:
 * writes at most cap bytes including the NUL and returns the length the
 * whole text needs (buf may be NULL when cap is 0); 0 if the spec is
 * invalid (no name, a size < 1, an unknown dtype, act or dialect). */
typedef struct Target {
    const char *name;
    int (*available)(void);                                            /* usable on this machine? */
    size_t (*render)(const Kernel *const *ks, int nk, char *buf, size_t cap); /* source, snprintf-style */
    void *(*load)(const char *src, char *why);                         /* compile and load; why >= 256 */
    void *(*sym)(void *module, const char *name);                      /* a kernel's entry */
    void (*unload)(void *module);
    void (*run)(void *fn, void **bufs, const Kernel *k);               /* run one kernel */
    /* optional: a dot as a tuned template, b[0] = C, b[1] = A, b[2] = B, b[3] = bias, b[4] = thread pool,
     * b[5] = the epilogue's buffers, b[6] = the epilogue's entry (NULL: the one the spec names); snprintf-style */
    size_t (*render_dot)(const GemmSpec *s, char *buf, size_t cap);
    /* optional: what the rendered text depends on besides the kernels (the instruction set); compile.c
     * then caches whole programs (their steps and source) under a key that includes it, so that a later
     * process skips scheduling, lowering and rendering (load still runs: cc's through its own cache of
     * shared objects, TinyCC's compiling the text). NULL: programs are compiled afresh in each process. */
    const char *(*cache_tag)(void);
} Target;

extern const Target kn_target_c;   /* system cc, cached shared objects */
extern const Target kn_target_tcc; /* libtcc, in memory */

#endif
