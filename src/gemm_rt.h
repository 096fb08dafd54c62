/*
 * gemm_rt.h — a batched matrix product compiled into the library by the
 * build's compiler (gcc or clang -O2), for whoever cannot render a good one:
 * the interpreter's dot, and backend tcc (TinyCC's own code for a GEMM is
 * scalar and slow, so its dot units call this; port/jit_tcc.c hands libtcc
 * the symbol).
 *
 *     KnRtGemm g = {0};
 *     g.C = c, g.A = a, g.B = b;                 // C (batch, M, N) contiguous
 *     g.dtype = GEMM_F32, g.batch = 1, g.M = m, g.N = n, g.K = k;
 *     g.sa_m = k, g.sa_k = 1, g.sb_k = n, g.sb_n = 1;
 *     kn_rt_gemm(&g);
 *
 * computes, for every t < batch,
 *
 *     C[t][m][n] = act( sum_k A[t][m][k] * B[t][k][n]  +  bias[n] )
 *
 * with A[t][m][k] = A[t*sa_b + m*sa_m + k*sa_k] (elements, any sign, 0 to
 * broadcast) and B likewise: the GemmSpec of src/target.h, at run time.
 * dtype is GEMM_F32 or GEMM_F64 (0, 1), act GEMM_ACT_NONE, _RELU or
 * _GELU_TANH (0, 1, 2) with the formulas of targets/c/gemm.c. Accumulation
 * is in the element type.
 *
 * Scratch (packed panels): work, if work_bytes >= kn_rt_gemm_work(g);
 * otherwise each task's own stack, at most 352 KiB of it. Nothing is
 * allocated and nothing static is written, so calls are reentrant.
 * Threads: with parallel_for (port_parallel_for's contract) and threads >
 * 1, a problem of at least 2^20 multiply-adds is split into up to 16
 * tasks by columns (or rows, when N is narrow). Every element is computed
 * by one task with the same operations in the same order, so C is bitwise
 * the one-thread result.
 *
 * Generated code declares this struct itself (targets/c/gemm.c,
 * GEMM_RUNTIME): change the two together.
 */
#ifndef KN_GEMM_RT_H
#define KN_GEMM_RT_H

#include <stddef.h>
#include <stdint.h>

typedef struct KnRtGemm {
    void *C;                  /* (batch, M, N), contiguous */
    const void *A, *B, *bias; /* bias: N elements, or NULL */
    int64_t batch, M, N, K;   /* each >= 1 */
    int64_t sa_b, sa_m, sa_k; /* A[t][m][k] is A[t*sa_b + m*sa_m + k*sa_k] */
    int64_t sb_b, sb_k, sb_n; /* B[t][k][n] is B[t*sb_b + k*sb_k + n*sb_n] */
    int dtype, act;           /* GEMM_F32 / GEMM_F64, GEMM_ACT_* */
    int (*parallel_for)(int n, void (*fn)(void *arg, int i), void *arg); /* or NULL: one thread */
    int threads;
    void *work;               /* or NULL: scratch on the stack */
    size_t work_bytes;
    const int64_t *win;       /* or NULL; else B is a convolution's window view (src/target.h GemmWindow) of
                                 the input at B + t*sb_b, given as the 19 numbers t, n, c, h, w, kh, kw, oh,
                                 ow, sh, sw, dh, dw, ph, pw, sx_n, sx_c, sx_h, sx_w; sb_k, sb_n unused */
    const void *wino_u;       /* kn_rt_wino only: the weights' transform kn_rt_wino_upack wrote for this A
                                 (read instead of A), or NULL */
} KnRtGemm;

/* bytes of work that g (with its threads) uses, 64 of them for alignment */
size_t kn_rt_gemm_work(const KnRtGemm *g);
void kn_rt_gemm(const KnRtGemm *g);
/* The same product where B is a 3x3, stride-1, dilation-1 window (win, batch 1, f32), by Winograd
 * F(4x4, 3x3) (src/wino_rt.c): U, V and M in work, which must hold kn_rt_wino_work(g) bytes (for g's
 * threads: each task has its own V and M). Where
 * that is 0 (another window, f64, act GELU, fewer output columns than channels in: F(4x4, 3x3) would
 * not pay) or work is short, kn_rt_wino computes the product as kn_rt_gemm does. Within a few times
 * kn_rt_gemm's rounding error (tests/test_gemm_rt.c), not bit for bit; the same C on any number of
 * threads. */
size_t kn_rt_wino_work(const KnRtGemm *g);
void kn_rt_wino(const KnRtGemm *g);
/* The bytes of the weights' transform of g's A (0 where kn_rt_wino would compute directly), and with
 * dst (64-byte aligned), the transform written there, on one thread: a later call given it as
 * g->wino_u skips that pass (inference, whose weights come back unchanged) */
size_t kn_rt_wino_upack(const KnRtGemm *g, void *dst);
/* A convolution's product (win set, batch 1) by the library's fastest way: a window read as is
 * (win t = 0) by kn_rt_wino; a transposed one (t = 1, a weights' gradient) of a 3x3, stride-1 window
 * with the images in a vector's lanes (src/conv_rt.c), its input and A copied into work, which must
 * hold kn_rt_conv_work(g) bytes. Where that is 0 (or work is short) the product is kn_rt_gemm's.
 * Within kn_rt_gemm's rounding bound, not bit for bit; the same C on any number of threads. */
size_t kn_rt_conv_work(const KnRtGemm *g);
void kn_rt_conv(const KnRtGemm *g);
/* For tests: the best copy of the micro-kernel calls may pick, 0 the baseline, 1 AVX2, 2 AVX-512 (the
 * default; a copy the CPU lacks is never picked); returns the cap before. Not for concurrent use with
 * calls: it is the one static the GEMM reads. */
int kn_rt_gemm_cap(int cap);
/* The copy that cap and the CPU leave kn_rt_gemm, kn_rt_wino and kn_rt_conv (0, 1 or 2) */
int kn_rt_isa(void);

#endif
