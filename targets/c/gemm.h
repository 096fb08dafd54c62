/*
 * gemm.h — targets/c: the GEMM template. One spec in, one self-contained C
 * translation unit out, defining
 *
 *     void NAME(void **b);   // b[0] = C, b[1] = A, b[2] = B, b[3] = bias (if any),
 *                            // b[4] = const KnParallel * or NULL (b has 5 entries),
 *                            // b[5] = the epilogue's buffers (with spec.epilogue),
 *                            // b[6] = the epilogue to call, or NULL for EPILOGUE
 *                            //        (b has 7 entries with spec.epilogue)
 *
 * that computes, for every batch index t < batch,
 *
 *     C[t][m][n] = act( sum_k A[t][m][k] * B[t][k][n]  +  bias[n] )
 *
 * and then, with spec.epilogue, EPILOGUE(b[5], t, m0, m1, n0, n1) (or
 * b[6]'s function, so dots of one spec can share one unit) once on
 * each tile of C when it is final (a tile kernel of the same unit, which
 * reads C back and rewrites it: a fused bias, activation, residual, ...).
 *
 * A and B are read through arbitrary element strides (a transposed operand
 * is only a swap of its strides; broadcasting a batch is stride 0), or B
 * as a convolution's window view of its input (spec.win, src/target.h:
 * implicit GEMM, the packing of B reads the input through the window's
 * index arithmetic, so no im2col buffer exists); C is
 * contiguous, [batch][M][N]; bias is N contiguous elements. Elements are
 * float (GEMM_F32) or double (GEMM_F64). Accumulation is in the element type.
 *
 *     size_t n = gemm_render(&spec, GEMM_SIMD, NULL, 0);
 *     char *src = malloc(n + 1);
 *     gemm_render(&spec, GEMM_SIMD, src, n + 1);
 *     PortModule *m = port_jit(PORT_CC, src, NULL, why);   // SIMD: cc only
 *
 * Dialects:
 * - GEMM_SCALAR: C99 that TinyCC compiles (and cc): loops i-k-j over a 4x8
 *   register tile of scalar accumulators, K unblocked. For tcc and for
 *   tiny problems.
 * - GEMM_SIMD: GNU C (cc -std=gnu99; gcc or clang). BLIS-style blocking:
 *   for each column block of NC, K block of KC: B's block is packed into
 *   NR-wide column panels, then for each row block of MC A's block is
 *   packed into MR-tall row panels (both zero-padded to whole panels), and
 *   an MR x NR micro-kernel of vector-extension accumulators runs over
 *   them. The epilogue (bias, activation) is applied on the last K block
 *   while the tile is in registers (bias, relu) or in L1 (gelu). Edge tiles
 *   run the same micro-kernel into a local tile and copy the valid part, so
 *   nothing is written past C. The unit holds one copy per ISA:
 *     x86: avx512f (16-lane f32, 8x32 tile), avx2+fma (8 lanes, 6x16),
 *          baseline SSE2 (4 lanes, 6x8), picked once, at the first call,
 *          with __builtin_cpu_supports;
 *     elsewhere (aarch64, wasm32 -msimd128, ...): one 16-byte-vector copy
 *          (6x8 f32) with no target attributes.
 *   No -march flags are needed (none should be passed).
 * - GEMM_RUNTIME: C99 for tcc: NAME fills a KnRtGemm and calls
 *   kn_rt_gemm (src/gemm_rt.h: the library's packed GEMM, built by the
 *   system compiler), so the unit must be linked against the library
 *   (port/jit_tcc.c gives libtcc the symbol). Threads through b[4], as
 *   GEMM_SIMD; the epilogue runs once per batch index on the whole of C,
 *   after the product. Reentrant: scratch is on the stack, but for a
 *   spec.wino unit's, which calls kn_rt_conv (Winograd F(4x4, 3x3), or a
 *   weights' gradient with the images in lanes) with
 *   the scratch b[4] lends.
 * - GEMM_LENT: GEMM_RUNTIME for code that links nothing of kiln's (backend
 *   c's units, compiled by cc): the library's GEMM (or kn_rt_conv, for
 *   spec.wino 2, which the SIMD dialects render so too) through the
 *   function b[4] lends (KnParallel.gemm, .conv), and where none is lent
 *   NAME_direct, the scalar dialect's product, rendered with it. A fraction
 *   of the SIMD dialects' text: for products too small for their speed to
 *   repay their compile.
 * - GEMM_SIMD_HOST: GEMM_SIMD with only the copy this machine runs best
 *   (chosen when rendering): a third of the text, so a third of the
 *   compile, for code compiled where it runs (backend c's JIT; its cache
 *   is keyed by the text, so another machine renders and caches its own).
 *   NAME_isa(b, isa) runs that copy only. Packing scratch is
 *   what b[4] lends (KnParallel.scratch), else a static, 64-byte-aligned
 *   buffer per ISA copy sized for this spec's blocks (zero-filled bss:
 *   untouched copies cost no memory), so no malloc on any path; NAME is
 *   therefore not reentrant (nor are its threaded runs). The column-range worker
 *
 *       static void NAME_<isa>_cols(T *C, const T *A, const T *B, const T *bias,
 *                                   long n0, long n1, T *apack, T *bpack);
 *
 *   computes columns [n0, n1) of every batch with the scratch it is given
 *   (NAME_<ISA>_APACK / _BPACK elements, as the #defines in the text say),
 *   so threads can split N (n0 a multiple of NR) each with its own scratch.
 *   Threads: when b[4] is a KnParallel with threads > 1 and batch * M * N
 *   * K >= 2^20, the NR-column blocks are split into min(threads, 16,
 *   blocks) runs, one task each, run through b[4]->parallel_for; each task
 *   has its own slot of the threaded scratch (pap / pbp in the job, from
 *   the same start as one thread's, sized at render time for the worst split). With
 *   one column block (N <= NR) the MR-row panels are split instead, into
 *   min(threads, 16, panels) tasks, when batch * M * NR * K >= 2^20. When
 *   a task of a 2-task split would get at most 256 columns (and A is the
 *   same for every batch index, its rows along K), a first parallel_for packs all of A, once,
 *   into scratch the tasks then share (sap, after pbp: each task a
 *   run of the row panels; gemm.c, SHARE_COLS), instead of every task
 *   packing all of A for its few columns. C is
 *   bitwise the one-thread result: each element is computed by one task,
 *   with the same tiles, the same packed panels and the same K order. The scalar dialect ignores b[4].
 *   Compile with FMA contraction on (gnu99's default): -std=c99 turns it off.
 *
 * B kept packed (spec.bkeep; B strided and the same for every batch index):
 * the SIMD dialects also define
 *
 *     size_t NAME_bpack(const void *B, void *dst);
 *
 * which returns the bytes all of B takes packed into the NR-column panels
 * of the copy NAME runs (0 if this CPU has none) and, with dst (64-byte
 * aligned), packs it there. NAME then reads b[7] (b has 8 entries): that
 * buffer, holding B as it is now, or NULL to pack B itself, as without
 * bkeep. So a caller that knows B is unchanged since it packed it (a
 * weight, between inference calls) skips the packing of every call: ~17%
 * of the mlp's inference (src/program.c, "B kept packed"). The product is
 * bitwise the same either way. The scalar and runtime dialects define no
 * NAME_bpack and ignore bkeep.
 */
#ifndef KN_TARGETS_C_GEMM_H
#define KN_TARGETS_C_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "../../src/target.h" /* GemmSpec */

/* How a GEMM may run in parallel (b[4]): parallel_for(n, fn, arg) must run
 * fn(arg, i) once for every i in [0, n) and return when all have returned
 * (port_parallel_for does); threads is how many tasks to split into. The
 * generated code declares a struct of the same layout (it includes nothing
 * of kiln's); a loop kernel's reads the first two fields only.
 *
 * scratch, if not NULL, lends the SIMD dialects' GEMM and Winograd units
 * their packing scratch for one call: scratch(owner, bytes) returns at
 * least bytes, 64-byte aligned, that nothing else uses until the call
 * returns (a GEMM asks once a call, before its tasks start), or NULL; the
 * units then use scratch of their own, a static buffer per unit (GEMM) or
 * one malloc kept until unload (Winograd). So the units of one program, or
 * of every program of one context, can share one buffer, warm in the
 * caches, where each would otherwise fault in its own (cnn's step: 72
 * units, 160 MB). */
struct KnRtGemm;
typedef struct KnParallel {
    int (*parallel_for)(int n, void (*fn)(void *arg, int i), void *arg);
    int threads;
    void *(*scratch)(void *owner, size_t bytes);
    void *owner;
    /* kn_rt_conv, kn_rt_conv_work and kn_rt_gemm (src/gemm_rt.h), for GEMM_LENT units (and spec.wino
     * 2 ones) of backend c, which link nothing of kiln's; NULL: such a unit computes in scalar loops */
    void (*conv)(const struct KnRtGemm *g);
    size_t (*conv_work)(const struct KnRtGemm *g);
    void (*gemm)(const struct KnRtGemm *g);
} KnParallel;

/* The renderers' output buffer (gemm.c, wino.c): text is appended as snprintf
 * would; len counts every byte asked for, so a render into too small a buffer
 * (or none) returns the size it needs. */
typedef struct {
    char *buf;
    size_t cap, len;
} GemmOut;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void gemm_put(GemmOut *o, const char *fmt, ...);
/* x = act(x) in C, for spec s's act (nothing for none); T is the element type */
void gemm_put_act(GemmOut *o, const GemmSpec *s, const char *x);

/* spec.wino (src/target.h): GEMM_SIMD and GEMM_SIMD_HOST render the product
 * by Winograd F(2x2, 3x3) (wino.c: the same entry NAME(b), b[0..6] as
 * above; epilogue called on each output channel's run of columns, t 0;
 * a batched GEMM unit NAME_wg of the dialect inside; no NAME_isa);
 * GEMM_RUNTIME calls the library's F(4x4, 3x3) (kn_rt_conv, src/wino_rt.c),
 * which computes directly where it would not pay; GEMM_SCALAR computes the
 * product directly. A spec with wino 1 but not wino_valid (3x3 stride-1
 * dilation-1 forward window, batch 1) is invalid. spec.wino 2 is f32 and
 * also takes a transposed window (a weights' gradient: kn_rt_conv computes
 * it with the images in a vector's lanes, src/conv_rt.c, or as kn_rt_gemm).
 *
 * The weights' transform kept (spec.ukeep, with wino): the Winograd
 * rendering also defines
 *
 *     size_t NAME_upack(const void *A, void *dst);
 *
 * which returns the bytes of U = G g G^T for all of A (16 x channels out x
 * channels in) and, with dst (64-byte aligned), writes it there. NAME then
 * reads b[7] (b has 8 entries): that buffer, holding U of A as it is now,
 * or NULL to transform A itself, as without ukeep. The product is bitwise
 * the same either way (the same transform code, one task per output
 * channel). The renderings that compute directly ignore ukeep; a spec with
 * ukeep but not wino is invalid. */
int wino_valid(const GemmSpec *s);
size_t wino_render(const GemmSpec *s, int dialect, char *buf, size_t cap);

enum { GEMM_SCALAR = 0, GEMM_SIMD = 1, GEMM_SIMD_HOST = 2, GEMM_RUNTIME = 3, GEMM_LENT = 4 };
size_t gemm_render(const GemmSpec *s, int dialect, char *buf, size_t cap);

#endif
