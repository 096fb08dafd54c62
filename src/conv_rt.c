/*
 * conv_rt.c — kn_rt_conv (gemm_rt.h): the library's products of a
 * convolution, for the dots of backend tcc and those backend c lends. A
 * window read as is (KnRtGemm.win, t = 0: the forward product and the
 * input's gradient) goes to Winograd, kn_rt_wino (wino_rt.c); a transposed
 * one (t = 1: the weights' gradient) of a 3x3, stride-1 window is computed
 * here:
 *
 *   C[k][c*9 + 3*ky + kx] = sum over n, oy, ox of
 *                           A[k][(n*oh + oy)*ow + ox] * X[n][c][oy + ky - ph][ox + kx - pw]
 *
 * (A the output's gradient, X the input, zero outside it). As a GEMM both
 * operands run along the sum, so each is transposed as it is packed, and
 * for ResNet-18's weight gradients (64 x 576 x 16384: nine times as many
 * window elements to pack as multiply-adds per element) packing the window
 * costs a large part of the product, which then runs well below the rate of
 * the forward products of the same layers.
 * Here the images go in the lanes: X and A are copied once, L images to a
 * vector,
 *
 *   Xp [c][n / L][oh + 2][ow + 2][L]   X zero-padded around each image
 *   Ap [k][n / L][oh][ow][L]
 *
 * (lanes past the last image zero), so that every tap at every position is
 * an aligned vector load, and a block of R output channels by one channel
 * in keeps its R x 9 sums in vector accumulators over all the positions,
 * summed across the lanes at the end: no packing per block, no padding
 * tested per element. Each sum is made in one order whatever the tasks
 * (blocks split among them), so C is the same on any number of threads.
 * For ResNet-18's weight gradients this beats backend c's SIMD GEMM unit,
 * copies included. It declines (the product is kn_rt_gemm's) where lanes
 * would go to waste, a batch filling whole vectors less than 4/5ths full, and where
 * images are small (MIN_PLANE).
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "fp-contract=off")
#endif

#include <string.h>

#include "gemm_rt.h"
#include "dot.h"

typedef ptrdiff_t Ix;

enum { L = 16, MAXT = 16 };
#define MIN_MACS (1LL << 20) /* below this, kn_rt_gemm */
/* positions of an image below which kn_rt_gemm: on small images (ResNet-18's stage 4, 4 x 4) a
 * block's sums (two channels out by one in) take longer to add across the lanes than to make, and
 * backend c's unit is the faster */
#define MIN_PLANE 32
#define GROUP_FLOATS (1 << 16) /* Xp's planes a block goes over before the next block: 256 KB, in L2 */

/* The window (KnRtGemm.win, 19 numbers) by name, as in gemm_rt.c */
enum { W_T, W_N, W_C, W_H, W_W, W_KH, W_KW, W_OH, W_OW, W_SH, W_SW, W_DH, W_DW, W_PH, W_PW, W_SXN, W_SXC, W_SXH, W_SXW };

typedef struct {
    const KnRtGemm *g;
    Ix C, K, n, nb, h, w, oh, ow, hp, wp, ph, pw, sxn, sxc, sxh, sxw;
    Ix xs, as;        /* an image block's plane of Xp, a row's run of Ap, in floats */
    Ix group;         /* channels in whose planes of Xp fit in L2 with room to spare */
    float *X, *A;     /* Xp [C][nb][hp][wp][L], Ap [K][nb][oh][ow][L] */
    int tasks;
} Job;

static Ix cdiv(Ix a, Ix b) { return (a + b - 1) / b; }

/* The geometry; 0 where this file does not compute g's product */
static int geometry(const KnRtGemm *g, Job *j)
{
    const int64_t *w = g->win;
    if (!w || !w[W_T] || g->dtype != GEMM_F32 || g->batch != 1 || g->act != GEMM_ACT_NONE || g->bias) return 0;
    if (w[W_KH] != 3 || w[W_KW] != 3 || w[W_SH] != 1 || w[W_SW] != 1 || w[W_DH] != 1 || w[W_DW] != 1) return 0;
    memset(j, 0, sizeof *j);
    j->g = g;
    j->C = (Ix)w[W_C], j->K = (Ix)g->M, j->n = (Ix)w[W_N], j->h = (Ix)w[W_H], j->w = (Ix)w[W_W];
    j->oh = (Ix)w[W_OH], j->ow = (Ix)w[W_OW], j->ph = (Ix)w[W_PH], j->pw = (Ix)w[W_PW];
    j->sxn = (Ix)w[W_SXN], j->sxc = (Ix)w[W_SXC], j->sxh = (Ix)w[W_SXH], j->sxw = (Ix)w[W_SXW];
    if (g->N != 9 * j->C || g->K != j->n * j->oh * j->ow) return 0;
    if ((double)g->M * (double)g->N * (double)g->K < (double)MIN_MACS) return 0;
    j->nb = cdiv(j->n, L);
    if (4 * j->nb * L > 5 * j->n) return 0; /* lanes less than 4/5ths used */
    if (j->oh * j->ow < MIN_PLANE) return 0;
    j->hp = j->oh + 2, j->wp = j->ow + 2;
    j->xs = j->hp * j->wp * L, j->as = j->nb * j->oh * j->ow * L;
    j->group = GROUP_FLOATS / (j->nb * j->xs);
    if (j->group < 1) j->group = 1;
    j->tasks = g->parallel_for && g->threads > 1 ? (g->threads < MAXT ? g->threads : MAXT) : 1;
    return 1;
}

static Ix scratch_floats(const Job *j) { return j->C * j->nb * j->xs + j->K * j->as; }

#define INLINE static inline __attribute__((always_inline))

typedef float VF __attribute__((vector_size(4 * L)));
#define LD(v, p) memcpy(&(v), (p), sizeof(VF))

/* Images l < nl of a run of cnt elements each, src(l)[e * step], into the lanes of d[e * L + l] (zeros
 * in lanes nl..L-1), L elements at a time: each run of d (1 KB) written in L1 (lane by lane over a
 * whole plane, each store a cache line of its own, the pass took a third of the product's time) */
INLINE void lanes_in(const float *const *src, Ix step, int nl, Ix cnt, float *d)
{
    for (Ix e0 = 0; e0 < cnt; e0 += L) {
        Ix m = cnt - e0 < L ? cnt - e0 : L;
        float *o = d + e0 * L;
        for (int l = 0; l < L; l++) {
            const float *x = src[l < nl ? l : 0] + e0 * step;
            if (l >= nl)
                for (Ix e = 0; e < m; e++) o[e * L + l] = 0;
            else if (step == 1)
                for (Ix e = 0; e < m; e++) o[e * L + l] = x[e];
            else
                for (Ix e = 0; e < m; e++) o[e * L + l] = x[e * step];
        }
    }
}

/* Xp for channels [c0, c1) */
INLINE void pack_x(const Job *j, Ix c0, Ix c1)
{
    const float *X = j->g->B, *src[L];
    Ix lo = j->pw < 0 ? 0 : j->pw, hi = j->w + j->pw < j->wp ? j->w + j->pw : j->wp; /* columns inside */
    if (hi < lo) hi = lo;
    for (Ix c = c0; c < c1; c++)
        for (Ix b = 0; b < j->nb; b++) {
            float *d = j->X + (c * j->nb + b) * j->xs;
            int nl = j->n - b * L < L ? (int)(j->n - b * L) : L;
            for (Ix y = 0; y < j->hp; y++) {
                float *row = d + y * j->wp * L;
                Ix iy = y - j->ph;
                if (iy < 0 || iy >= j->h || hi == lo) {
                    memset(row, 0, (size_t)(j->wp * L) * sizeof *row);
                    continue;
                }
                memset(row, 0, (size_t)(lo * L) * sizeof *row);
                memset(row + hi * L, 0, (size_t)((j->wp - hi) * L) * sizeof *row);
                for (int l = 0; l < nl; l++) src[l] = X + (b * L + l) * j->sxn + c * j->sxc + iy * j->sxh + (lo - j->pw) * j->sxw;
                lanes_in(src, j->sxw, nl, hi - lo, row + lo * L);
            }
        }
}

/* Ap for output channels [k0, k1) */
INLINE void pack_a(const Job *j, Ix k0, Ix k1)
{
    const KnRtGemm *g = j->g;
    const float *src[L];
    Ix plane = j->oh * j->ow;
    for (Ix k = k0; k < k1; k++)
        for (Ix b = 0; b < j->nb; b++) {
            int nl = j->n - b * L < L ? (int)(j->n - b * L) : L;
            for (int l = 0; l < nl; l++) src[l] = (const float *)g->A + k * (Ix)g->sa_m + (b * L + l) * plane * (Ix)g->sa_k;
            lanes_in(src, (Ix)g->sa_k, nl, plane, j->A + k * j->as + b * plane * L);
        }
}

/* The sum of *pv's lanes: halves added twice, then four in order (one order everywhere) */
INLINE float lanes(const VF *pv)
{
    typedef float V8 __attribute__((vector_size(32)));
    typedef float V4 __attribute__((vector_size(16)));
    V8 h0, h1;
    V4 q0, q1;
    memcpy(&h0, pv, sizeof h0), memcpy(&h1, (const char *)pv + sizeof h0, sizeof h1);
    h0 += h1;
    memcpy(&q0, &h0, sizeof q0), memcpy(&q1, (char *)&h0 + sizeof q0, sizeof q1);
    q0 += q1;
    return (q0[0] + q0[1]) + (q0[2] + q0[3]);
}

/* Nine accumulators per row, by name (an array of them lived in memory) */
#define ACC9(r) VF r##0 = {0}, r##1 = {0}, r##2 = {0}, r##3 = {0}, r##4 = {0}, r##5 = {0}, r##6 = {0}, r##7 = {0}, r##8 = {0}
#define PUT9(r, row)                                                                                                   \
    do {                                                                                                               \
        float *o_ = (float *)j->g->C + (row) * 9 * j->C + c * 9;                                                       \
        o_[0] = lanes(&r##0), o_[1] = lanes(&r##1), o_[2] = lanes(&r##2), o_[3] = lanes(&r##3);                       \
        o_[4] = lanes(&r##4), o_[5] = lanes(&r##5), o_[6] = lanes(&r##6), o_[7] = lanes(&r##7);                       \
        o_[8] = lanes(&r##8);                                                                                          \
    } while (0)

/* C's rows k .. k+R-1 (those below K) at channel in c: R x 9 sums over every position. x0, x1, x2 walk
 * the three padded rows a position's taps read; q0.. the rows of Ap. R is 2 in the AVX-512 copy (18
 * accumulators of its 32 registers; at 3, gcc spills some of the 27 and the blocks run slower) or 1. MAC(acc, v, t) adds v * t to acc. */
#define TAP1(MAC, i, p, o) LD(t, p + (o)), MAC(a##i, v0, t);
#define TAP2(MAC, i, p, o) LD(t, p + (o)), MAC(a##i, v0, t), MAC(b##i, v1, t);
#define TAPS(TAP, MAC)                                                                                                 \
    TAP(MAC, 0, x0, 0) TAP(MAC, 1, x0, L) TAP(MAC, 2, x0, 2 * L) TAP(MAC, 3, x1, 0) TAP(MAC, 4, x1, L)                 \
        TAP(MAC, 5, x1, 2 * L) TAP(MAC, 6, x2, 0) TAP(MAC, 7, x2, L) TAP(MAC, 8, x2, 2 * L)
#define POSITIONS(BODY)                                                                                                \
    for (Ix bb = 0; bb < j->nb; bb++)                                                                                  \
        for (Ix y = 0; y < j->oh; y++) {                                                                               \
            const float *x0 = j->X + (c * j->nb + bb) * j->xs + y * j->wp * L, *x1 = x0 + j->wp * L,                  \
                        *x2 = x1 + j->wp * L;                                                                          \
            Ix at = (bb * j->oh + y) * j->ow * L;                                                                      \
            for (Ix xx = 0; xx < j->ow; xx++, x0 += L, x1 += L, x2 += L, at += L) {                                    \
                BODY                                                                                                   \
            }                                                                                                          \
        }
#define DEFINE_BLOCK1(sfx, ATTR, MAC)                                                                                  \
    ATTR static void block1_##sfx(const Job *j, Ix k, Ix c)                                                            \
    {                                                                                                                  \
        const float *q0 = j->A + k * j->as;                                                                            \
        ACC9(a);                                                                                                       \
        VF v0, t;                                                                                                      \
        POSITIONS(LD(v0, q0 + at); TAPS(TAP1, MAC))                                                                    \
        PUT9(a, k);                                                                                                    \
    }
#define DEFINE_BLOCK2(sfx, ATTR, MAC)                                                                                  \
    ATTR static void block2_##sfx(const Job *j, Ix k, Ix c)                                                            \
    {                                                                                                                  \
        Ix k1 = k + 1 < j->K ? k + 1 : k;                                                                              \
        const float *q0 = j->A + k * j->as, *q1 = j->A + k1 * j->as;                                                   \
        ACC9(a);                                                                                                       \
        ACC9(b);                                                                                                       \
        VF v0, v1, t;                                                                                                  \
        POSITIONS(LD(v0, q0 + at); LD(v1, q1 + at); TAPS(TAP2, MAC))                                                   \
        PUT9(a, k);                                                                                                    \
        if (k + 1 < j->K) PUT9(b, k + 1);                                                                              \
    }
#define MADD(acc, v, t) (acc += (v) * (t))

/* The passes in copies for the instruction sets: task i's share of Xp and Ap, then of the blocks of R
 * output channels (each with every channel in, Ap's R rows staying in cache while Xp goes by) */
#define DEFINE_PASSES(sfx, ATTR, R)                                                                                    \
    ATTR static void pack_##sfx(void *arg, int i)                                                                      \
    {                                                                                                                  \
        const Job *j = arg;                                                                                            \
        pack_x(j, i * j->C / j->tasks, (i + 1) * j->C / j->tasks);                                                     \
        pack_a(j, i * j->K / j->tasks, (i + 1) * j->K / j->tasks);                                                     \
    }                                                                                                                  \
    ATTR static void blocks_##sfx(void *arg, int i)                                                                    \
    {                                                                                                                  \
        const Job *j = arg;                                                                                            \
        Ix n = cdiv(j->K, R), lo = i * n / j->tasks, hi = (i + 1) * n / j->tasks;                                      \
        for (Ix c0 = 0; c0 < j->C; c0 += j->group)                                                                     \
            for (Ix b = lo; b < hi; b++)                                                                               \
                for (Ix c = c0; c < j->C && c < c0 + j->group; c++) block##R##_##sfx(j, b * R, c);                     \
    }

DEFINE_BLOCK1(base, , MADD)
DEFINE_PASSES(base, , 1)

typedef void (*Pass)(void *, int);

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>
/* AVX-512 fuses its multiply-adds (as gemm_rt.c's AVX-512 copy: within the reference's bound of the
 * others, not bit for bit) */
#define FMA512(acc, v, t) (acc = (VF)_mm512_fmadd_ps((__m512)(v), (__m512)(t), (__m512)(acc)))
DEFINE_BLOCK1(avx2, __attribute__((target("avx2"))), MADD)
DEFINE_PASSES(avx2, __attribute__((target("avx2"))), 1)
DEFINE_BLOCK2(avx512, __attribute__((target("avx512f"))), FMA512)
DEFINE_PASSES(avx512, __attribute__((target("avx512f"))), 2)

/* the passes of the copy kn_rt_isa picks: 2 AVX-512, 1 AVX2, 0 the baseline */
static const Pass *passes(void)
{
    static const Pass all[3][2] = {{pack_base, blocks_base}, {pack_avx2, blocks_avx2}, {pack_avx512, blocks_avx512}};
    return all[kn_rt_isa()];
}
#else
static const Pass *passes(void)
{
    static const Pass all[2] = {pack_base, blocks_base};
    return all;
}
#endif

static void run(const Job *j, Pass fn)
{
    if (j->tasks > 1) j->g->parallel_for(j->tasks, fn, (void *)j);
    else fn((void *)j, 0);
}

static size_t wgrad_work(const KnRtGemm *g)
{
    Job j;
    return geometry(g, &j) ? (size_t)scratch_floats(&j) * sizeof(float) + 64 : 0;
}

size_t kn_rt_conv_work(const KnRtGemm *g)
{
    size_t w = kn_rt_wino_work(g);
    return w ? w : wgrad_work(g);
}

void kn_rt_conv(const KnRtGemm *g)
{
    Job j;
    if (!g->win || !g->win[W_T]) {
        kn_rt_wino(g);
        return;
    }
    if (!geometry(g, &j) || !g->work || g->work_bytes < (size_t)scratch_floats(&j) * sizeof(float) + 64) {
        KnRtGemm d = *g;
        d.work = NULL, d.work_bytes = 0; /* on the stack: the caller's block was sized for this */
        kn_rt_gemm(&d);
        return;
    }
    j.X = (float *)((char *)g->work + (64 - (uintptr_t)g->work % 64) % 64);
    j.A = j.X + j.C * j.nb * j.xs;
    const Pass *pass = passes();
    run(&j, pass[0]);
    run(&j, pass[1]);
}
