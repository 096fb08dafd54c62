/*
 * dot.h — the words a dot is described in, below every layer that computes
 * one: the interpreter, the runtime kernels (gemm_rt.c, conv_rt.c,
 * wino_rt.c) and the targets' templates (target.h GemmSpec) read the same
 * dtype, activation and window view.
 */
#ifndef KN_DOT_H
#define KN_DOT_H

#include <stdint.h>

/* A batched matrix product C = A B (+ bias, activation) over strided
 * operands: what a target's dot template renders. C is contiguous
 * (batch, M, N); A[t][m][k] is A[t*sa_b + m*sa_m + k*sa_k] in elements. */
enum { GEMM_F32 = 0, GEMM_F64 = 1 };
enum { GEMM_ACT_NONE = 0, GEMM_ACT_RELU = 1, GEMM_ACT_GELU_TANH = 2 };

/* B read as a convolution's window view of an input x (N, C, H, W), so no
 * im2col buffer is materialised (implicit GEMM): with a column index
 * j = (n, oy, ox) over (n, oh, ow) and a row index r = (c, ky, kx) over
 * (c, kh, kw), B[b][k][i] (batch b, row k, column i) is window(k, i), or
 * window(i, k) for the transposed view (t = 1: the weight gradient's):
 *
 *     window(r, j) = x[n*sx_n + c*sx_c + y*sx_h + x*sx_w]   where y = oy*sh + ky*dh - ph,
 *                    (0 outside 0 <= y < h, 0 <= x < w)         x = ox*sw + kx*dw - pw
 *
 * from B + b*sb_b (the batch is a group of c channels); sb_k and sb_n are
 * unused. ph and pw are the padding before, less the first window's start. */
typedef struct GemmWindow {
    int on;                         /* 0: B is strided (sb_k, sb_n) */
    int t;                          /* 1: rows (k) are (n, oy, ox), columns (c, ky, kx) */
    int64_t n, c, h, w;             /* x's sizes: batch, channels of a group, height, width */
    int64_t kh, kw, oh, ow;         /* kernel and output sizes */
    int64_t sh, sw, dh, dw, ph, pw; /* strides, dilations, offsets */
    int64_t sx_n, sx_c, sx_h, sx_w; /* x's element strides */
} GemmWindow;

#endif
