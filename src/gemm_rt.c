/*
 * gemm_rt.c — the library's own GEMM (gemm_rt.h), in plain C99 that the
 * build's compiler vectorises: the interpreter's dot and backend tcc's dot
 * units run it. It lives in src/ rather than targets/c because the
 * interpreter, which every target is checked against, needs it too.
 *
 * Blocking as in BLIS (Van Zee and van de Geijn, "BLIS: A Framework for
 * Rapidly Instantiating BLAS Functionality", ACM TOMS 41(3), 2015): for
 * each column block of NC, K block of KC: B's block is packed into
 * NR-wide column panels (L2/L3), then for each row block of MC, A's block
 * into MR-tall row panels (L2), both zero-padded to whole panels; an MR x NR
 * micro-kernel runs over them into a small tile, which is merged into C
 * (added on every K block but the first; bias and activation on the last).
 * Edge tiles run the same micro-kernel and merge only their valid part.
 *
 * The micro-kernel is fixed-size loops over NR contiguous columns of
 * restrict-qualified panels, one per row of the tile; gcc -O2 and clang
 * -O2 keep its MR x NR accumulators in vector registers. A whole tile goes
 * straight into C (stored, or added on later K blocks); an edge tile goes
 * through a small buffer. Three copies (Kit): the baseline, built for
 * whatever the compiler targets (SSE2, NEON, wasm SIMD, or scalar on a
 * Cortex-M), and on x86-64 under GNU C an AVX2 one with a larger tile and
 * an AVX-512 one with a larger still, picked at run time with
 * __builtin_cpu_supports (no -march flags). The first two multiply, then
 * add (no FMA: -std=c99 turns contraction off, as backend c's
 * -ffp-contract=off does for its template's base copy), each element
 * summed in k order within a K block, so they agree bit for bit, and with
 * that base copy wherever their K blocks are the same (FMA was no faster
 * there: the 2-core Zen 3 ran 55 GFLOP/s either way). The AVX-512 copy
 * fuses its multiply-adds, as the template's AVX2 and AVX-512 copies do:
 * within the reference's bound, not bit for bit with the other two.
 *
 * K blocks are balanced (K = 300 is two of 150, not 256 + 44), the same in
 * every task; M and N blocks shrink to the problem, so a small product
 * needs little scratch. A batch whose B is broadcast (stride 0) and whose
 * A rows run on from one batch to the next is one taller product.
 */
#include <math.h>
#include <string.h>

#include "gemm_rt.h"
#include "dot.h"

typedef ptrdiff_t Ix;

/* Blocks: f32 KC 256, f64 KC 128; so one task's panels, (MC + NC) * KC
 * elements, are STACK_DOUBLES doubles (352 KiB) at most in either type. */
enum { MC = 96, NC = 256, KC32 = 256, KC64 = 128, STACK_DOUBLES = (MC + NC) * KC64, MAXTILE = 128, MAXT = 16 };
#define PAR_WORK (1LL << 20) /* multiply-adds below which one thread is faster (as in targets/c/gemm.c) */

typedef struct Kit {
    int mr, nr;
    size_t es;
    /* c (mr x nr, row stride ldc) = a-panel (kc x mr) . b-panel (kc x nr), added to c's own if add */
    void (*ukr)(Ix kc, const void *a, const void *b, void *c, Ix ldc, int add);
    /* rows [i0, i0+h) and k [p0, p0+kc) of A into mr-row panels: ap[p*kc + k*mr + i] */
    void (*pack_a)(const KnRtGemm *g, const void *A, Ix i0, Ix h, Ix p0, Ix kc, int mr, void *ap);
    /* k [p0, p0+kc) and columns [j0, j0+w) of B into nr-column panels: bp[q*kc + k*nr + j] */
    void (*pack_b)(const KnRtGemm *g, const void *B, Ix p0, Ix kc, Ix j0, Ix w, int nr, void *bp);
    /* the valid h x w of a tile into C (row stride ldc): see merge_* */
    void (*merge)(const void *tile, int nr, void *c, Ix ldc, int h, int w, int first, int last, const void *bias,
                  int act);
    /* bias and activation on h x w of C in place (what merge does on the last K block) */
    void (*finish)(void *c, Ix ldc, int h, int w, const void *bias, int act);
} Kit;

#define MADD(x, y, z) ((z) + (x) * (y))

/* The window (KnRtGemm.win, 19 numbers) by name */
enum { W_T, W_N, W_C, W_H, W_W, W_KH, W_KW, W_OH, W_OW, W_SH, W_SW, W_DH, W_DW, W_PH, W_PW, W_SXN, W_SXC, W_SXH, W_SXW };

static Ix ceil_div(Ix a, Ix b) { return (a + b - 1) / b; }
static Ix round_up(Ix a, Ix b) { return ceil_div(a, b) * b; }
static Ix min_ix(Ix a, Ix b) { return a < b ? a : b; }
static Ix clamp_ix(Ix v, Ix lo, Ix hi) { return v < lo ? lo : v > hi ? hi : v; }

/* A run of a window view's row r = (c, ky, kx) from column j = (n, oy, ox) on, cut at each output row
 * (and where the caller asks): in every piece the window's columns [lo, hi) read the input along x
 * (stride step) from src, and the rest are zeros of the padding. So packing tests no element and
 * divides only once per run, where reading one element at a time through the index arithmetic
 * (the slow path this replaced) cost half of backend tcc's cnn training step. */
typedef struct {
    const int64_t *w;
    Ix hb, wb, xlo, xhi, nn, oy, ox; /* y = oy*sh + hb, x = ox*sw + wb; x in [0, W) for ox in [xlo, xhi) */
    const char *x;                   /* the input of this batch, channel c (bytes) */
    size_t es;
} WinRun;

static void winrun_start(WinRun *u, const int64_t *w, const void *X, size_t es, Ix r, Ix j)
{
    Ix kh = (Ix)w[W_KH], kw = (Ix)w[W_KW], sw = (Ix)w[W_SW], W = (Ix)w[W_W];
    u->w = w, u->es = es;
    u->hb = r / kw % kh * (Ix)w[W_DH] - (Ix)w[W_PH];
    u->wb = r % kw * (Ix)w[W_DW] - (Ix)w[W_PW];
    u->nn = j / ((Ix)w[W_OH] * (Ix)w[W_OW]), u->oy = j / (Ix)w[W_OW] % (Ix)w[W_OH], u->ox = j % (Ix)w[W_OW];
    u->xlo = u->wb >= 0 ? 0 : (-u->wb + sw - 1) / sw;
    u->xhi = W - u->wb <= 0 ? 0 : (W - u->wb + sw - 1) / sw;
    u->xhi = u->xhi < (Ix)w[W_OW] ? u->xhi : (Ix)w[W_OW];
    u->xlo = u->xlo < u->xhi ? u->xlo : u->xhi;
    u->x = (const char *)X + r / (kh * kw) * (Ix)w[W_SXC] * (Ix)es;
}

/* The next piece, at most max long: its length, valid part [*lo, *hi) and, if that is not empty, the
 * input of its element *lo in *src; moves the run past it. */
static Ix winrun_next(WinRun *u, Ix max, Ix *lo, Ix *hi, const void **src)
{
    const int64_t *w = u->w;
    Ix ow = (Ix)w[W_OW], seg = min_ix(max, ow - u->ox), y = u->oy * (Ix)w[W_SH] + u->hb;
    if (y < 0 || y >= (Ix)w[W_H]) *lo = *hi = seg;
    else {
        *lo = clamp_ix(u->xlo - u->ox, 0, seg), *hi = clamp_ix(u->xhi - u->ox, *lo, seg);
        Ix at = u->nn * (Ix)w[W_SXN] + y * (Ix)w[W_SXH] + ((u->ox + *lo) * (Ix)w[W_SW] + u->wb) * (Ix)w[W_SXW];
        if (*hi > *lo) *src = u->x + at * (Ix)u->es;
    }
    u->ox += seg;
    if (u->ox == ow) {
        u->ox = 0;
        if (++u->oy == (Ix)w[W_OH]) u->oy = 0, u->nn++;
    }
    return seg;
}

/* gcc is told to unroll the row loop: at -O2 it unrolls no loop that grows the code, and with the row
 * loop rolled it keeps the accumulators in memory. clang unrolls it unasked (and told to, spills). */
#if defined(__GNUC__) && !defined(__clang__)
#define UNROLL_ROWS _Pragma("GCC unroll 8")
#else
#define UNROLL_ROWS
#endif
#define DEFINE_UKR(NAME, ATTR, T, MR, NR, MUL_ADD)                                                                     \
    ATTR static void NAME(Ix kc, const void *pa, const void *pb, void *pc, Ix ldc, int add)                            \
    {                                                                                                                  \
        const T *restrict a = pa, *restrict b = pb;                                                                    \
        T *restrict c = pc;                                                                                            \
        T acc[MR][NR];                                                                                                 \
        Ix k;                                                                                                          \
        int i, j;                                                                                                      \
        for (i = 0; i < MR; i++)                                                                                       \
            for (j = 0; j < NR; j++) acc[i][j] = 0;                                                                    \
        for (k = 0; k < kc; k++, a += MR, b += NR) {                                                                   \
            UNROLL_ROWS for (i = 0; i < MR; i++)                                                                       \
                for (j = 0; j < NR; j++) acc[i][j] = MUL_ADD(a[i], b[j], acc[i][j]);                                   \
        }                                                                                                              \
        if (add)                                                                                                       \
            for (i = 0; i < MR; i++)                                                                                   \
                for (j = 0; j < NR; j++) c[i * ldc + j] += acc[i][j];                                                  \
        else                                                                                                           \
            for (i = 0; i < MR; i++)                                                                                   \
                for (j = 0; j < NR; j++) c[i * ldc + j] = acc[i][j];                                                   \
    }

/* A whole panel of MR rows, k by k: MR loads (MR sequential streams when A's rows are contiguous, one
 * when its columns are) and MR contiguous stores, the row loop unrolled (the rolled loops over a
 * run-time mr, one element per trip, made packing A a fifth of the GEMM's time in the cnn's step) */
#define PACK_A_PANEL(T, MR)                                                                                            \
    do {                                                                                                               \
        for (Ix k = 0; k < kc; k++) {                                                                                  \
            T *o = d + k * (MR);                                                                                       \
            const T *s = src + k * sk;                                                                                 \
            UNROLL_ROWS for (i = 0; i < (MR); i++) o[i] = s[i * sm];                                                   \
        }                                                                                                              \
    } while (0)

/* Packing reads along whichever of the operand's two strides is the
 * smaller, so a transposed operand is read contiguously too. The merge
 * applies the activation of targets/c/gemm.c's put_act, in T. */
#define DEFINE_TYPED(T, SFX, TANH)                                                                                     \
    static void pack_a_##SFX(const KnRtGemm *g, const void *pA, Ix i0, Ix h, Ix p0, Ix kc, int mr, void *pd)          \
    {                                                                                                                  \
        const T *A = pA;                                                                                               \
        T *d = pd;                                                                                                     \
        Ix sm = (Ix)g->sa_m, sk = (Ix)g->sa_k;                                                                         \
        for (Ix p = 0; p < h; p += mr, d += mr * kc) {                                                                 \
            int m = h - p < mr ? (int)(h - p) : mr, i;                                                                 \
            const T *src = A + (i0 + p) * sm + p0 * sk;                                                                \
            if (m == 8 && mr == 8) PACK_A_PANEL(T, 8);                                                                 \
            else if (m == 6 && mr == 6) PACK_A_PANEL(T, 6);                                                            \
            else if (m == 4 && mr == 4) PACK_A_PANEL(T, 4);                                                            \
            else if ((sk < 0 ? -sk : sk) <= (sm < 0 ? -sm : sm))                                                       \
                for (i = 0; i < m; i++)                                                                                \
                    for (Ix k = 0; k < kc; k++) d[k * mr + i] = src[i * sm + k * sk];                                  \
            else                                                                                                       \
                for (Ix k = 0; k < kc; k++)                                                                            \
                    for (i = 0; i < m; i++) d[k * mr + i] = src[i * sm + k * sk];                                      \
            for (i = m; i < mr; i++)                                                                                   \
                for (Ix k = 0; k < kc; k++) d[k * mr + i] = 0;                                                         \
        }                                                                                                              \
    }                                                                                                                  \
    /* pack_b's panels of a window view: along each row k (across the panels) or down each column */                   \
    static void pack_bw_##SFX(const KnRtGemm *g, const T *B, Ix p0, Ix kc, Ix j0, Ix w, int nr, T *d)                  \
    {                                                                                                                  \
        const Ix step = (Ix)(g->win[W_SW] * g->win[W_SXW]);                                                            \
        WinRun u;                                                                                                      \
        Ix lo, hi, i, k, e, seg;                                                                                       \
        const void *sv = NULL;                                                                                         \
        if (!g->win[W_T])                                                                                              \
            for (k = 0; k < kc; k++) {                                                                                 \
                winrun_start(&u, g->win, B, sizeof(T), p0 + k, j0);                                                    \
                for (e = 0; e < w; e += seg) {                                                                         \
                    T *o = d + e / nr * nr * kc + k * nr + e % nr;                                                     \
                    seg = winrun_next(&u, min_ix(w - e, nr - e % nr), &lo, &hi, &sv);                                  \
                    const T *src = sv;                                                                                 \
                    for (i = 0; i < lo; i++) o[i] = 0;                                                                 \
                    if (step == 1 && hi > lo) /* a call, for gcc -O2 copies no unknown-length loop by vector */        \
                        memcpy(o + lo, src, (size_t)(hi - lo) * sizeof(T)), i = hi;                                    \
                    else                                                                                               \
                        for (; i < hi; i++) o[i] = src[(i - lo) * step];                                               \
                    for (; i < seg; i++) o[i] = 0;                                                                     \
                }                                                                                                      \
            }                                                                                                          \
        else                                                                                                           \
            for (Ix j = 0; j < w; j++) {                                                                               \
                T *o = d + j / nr * nr * kc + j % nr;                                                                  \
                winrun_start(&u, g->win, B, sizeof(T), j0 + j, p0);                                                    \
                for (e = 0; e < kc; e += seg, o += seg * nr) {                                                         \
                    seg = winrun_next(&u, kc - e, &lo, &hi, &sv);                                                      \
                    const T *src = sv;                                                                                 \
                    for (i = 0; i < lo; i++) o[i * nr] = 0;                                                            \
                    for (; i < hi; i++) o[i * nr] = src[(i - lo) * step];                                              \
                    for (; i < seg; i++) o[i * nr] = 0;                                                                \
                }                                                                                                      \
            }                                                                                                          \
        if (w % nr) /* the last panel's columns past w */                                                              \
            for (k = 0; k < kc; k++)                                                                                   \
                for (i = w % nr; i < nr; i++) d[w / nr * nr * kc + k * nr + i] = 0;                                    \
    }                                                                                                                  \
    static void pack_b_##SFX(const KnRtGemm *g, const void *pB, Ix p0, Ix kc, Ix j0, Ix w, int nr, void *pd)          \
    {                                                                                                                  \
        const T *B = pB;                                                                                               \
        T *d = pd;                                                                                                     \
        Ix sk = (Ix)g->sb_k, sn = (Ix)g->sb_n;                                                                         \
        if (g->win) {                                                                                                  \
            pack_bw_##SFX(g, B, p0, kc, j0, w, nr, d);                                                                 \
            return;                                                                                                    \
        }                                                                                                              \
        for (Ix q = 0; q < w; q += nr, d += nr * kc) {                                                                 \
            int n = w - q < nr ? (int)(w - q) : nr, j;                                                                 \
            const T *src = B + p0 * sk + (j0 + q) * sn;                                                                \
            if ((sn < 0 ? -sn : sn) <= (sk < 0 ? -sk : sk))                                                            \
                for (Ix k = 0; k < kc; k++) {                                                                          \
                    for (j = 0; j < n; j++) d[k * nr + j] = src[k * sk + j * sn];                                      \
                    for (; j < nr; j++) d[k * nr + j] = 0;                                                             \
                }                                                                                                      \
            else {                                                                                                     \
                for (j = 0; j < n; j++)                                                                                \
                    for (Ix k = 0; k < kc; k++) d[k * nr + j] = src[k * sk + j * sn];                                  \
                for (j = n; j < nr; j++)                                                                               \
                    for (Ix k = 0; k < kc; k++) d[k * nr + j] = 0;                                                     \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    static void merge_##SFX(const void *pt, int nr, void *pc, Ix ldc, int h, int w, int first, int last,               \
                            const void *pbias, int act)                                                                \
    {                                                                                                                  \
        const T *t = pt, *bias = pbias;                                                                                \
        T *c = pc;                                                                                                     \
        for (int i = 0; i < h; i++, t += nr, c += ldc)                                                                 \
            for (int j = 0; j < w; j++) {                                                                              \
                T x = t[j];                                                                                            \
                if (!first) x += c[j];                                                                                 \
                if (last) {                                                                                            \
                    if (bias) x += bias[j];                                                                            \
                    if (act == GEMM_ACT_RELU) x = x < 0 ? (T)0 : x;                                                    \
                    else if (act == GEMM_ACT_GELU_TANH)                                                                \
                        x = (T)0.5 * x * ((T)1 + TANH((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x)));         \
                }                                                                                                      \
                c[j] = x;                                                                                              \
            }                                                                                                          \
    }                                                                                                                  \
    static void finish_##SFX(void *pc, Ix ldc, int h, int w, const void *pbias, int act)                               \
    {                                                                                                                  \
        merge_##SFX(pc, (int)ldc, pc, ldc, h, w, 1, 1, pbias, act);                                                    \
    }

DEFINE_TYPED(float, f32, tanhf)
DEFINE_TYPED(double, f64, tanh)

/* baseline: 4 x 8 f32 (8 SSE vectors), 4 x 4 f64 */
DEFINE_UKR(ukr_f32_base, , float, 4, 8, MADD)
DEFINE_UKR(ukr_f64_base, , double, 4, 4, MADD)
static const Kit kit_base[2] = {
    {4, 8, 4, ukr_f32_base, pack_a_f32, pack_b_f32, merge_f32, finish_f32},
    {4, 4, 8, ukr_f64_base, pack_a_f64, pack_b_f64, merge_f64, finish_f64},
};

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__TINYC__)
#define KN_RT_AVX2 1
/* AVX2: 6 x 16 f32 and 6 x 8 f64, twelve 256-bit accumulators */
#define AVX2 __attribute__((target("avx2"))) /* no "fma": clang would contract the multiply-add */
DEFINE_UKR(ukr_f32_avx2, AVX2, float, 6, 16, MADD)
DEFINE_UKR(ukr_f64_avx2, AVX2, double, 6, 8, MADD)
static const Kit kit_avx2[2] = {
    {6, 16, 4, ukr_f32_avx2, pack_a_f32, pack_b_f32, merge_f32, finish_f32},
    {6, 8, 8, ukr_f64_avx2, pack_a_f64, pack_b_f64, merge_f64, finish_f64},
};
#endif

#ifdef KN_RT_AVX2
/* AVX-512: 8 x 32 f32 and 8 x 16 f64, sixteen 512-bit accumulators, fused multiply-adds (the builtins are
 * fused whatever the contraction setting). On the 2-core Zen 4, one thread: 64 x 4096 x 576 (a conv of the
 * cnn's first stage, where 6-row tiles leave an edge) 60-68 GFLOP/s against the AVX2 copy's 37-42, 512^3
 * 85-92 either way; multiply, then add, at this tile ran 43 and 64-66. A fused product is rounded once,
 * so this copy agrees with the others within the bound of the reference, not bit for bit (as backend c's
 * AVX2 and AVX-512 copies do not); it still equals itself across threads. */
#define AVX512 __attribute__((target("avx512f,fma")))
#define FMA32(x, y, z) __builtin_fmaf(x, y, z)
#define FMA64(x, y, z) __builtin_fma(x, y, z)
DEFINE_UKR(ukr_f32_avx512, AVX512, float, 8, 32, FMA32)
DEFINE_UKR(ukr_f64_avx512, AVX512, double, 8, 16, FMA64)
static const Kit kit_avx512[2] = {
    {8, 32, 4, ukr_f32_avx512, pack_a_f32, pack_b_f32, merge_f32, finish_f32},
    {8, 16, 8, ukr_f64_avx512, pack_a_f64, pack_b_f64, merge_f64, finish_f64},
};
#endif

static int kit_cap = 2; /* kn_rt_gemm_cap */

int kn_rt_gemm_cap(int cap)
{
    int old = kit_cap;
    kit_cap = cap < 0 ? 0 : cap > 2 ? 2 : cap;
    return old;
}

int kn_rt_isa(void)
{
#ifdef KN_RT_AVX2
    __builtin_cpu_init();
    if (kit_cap >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) return 2;
    if (kit_cap >= 1 && __builtin_cpu_supports("avx2")) return 1;
#endif
    return 0;
}

static const Kit *pick_kit(int dtype)
{
#ifdef KN_RT_AVX2
    int isa = kn_rt_isa();
    if (isa == 2) return &kit_avx512[dtype];
    if (isa == 1) return &kit_avx2[dtype];
#endif
    return &kit_base[dtype];
}

/* One call's plan: the (possibly folded) product, its blocks and its split. */
typedef struct {
    KnRtGemm g;
    const Kit *kit;
    Ix kc, mc, nc;
    int tasks, by_rows; /* split over tasks NR-column blocks, or MR-row blocks */
    Ix nblocks;
    size_t slot;        /* one task's scratch, bytes (a multiple of 64) */
    char *work;         /* 64-byte aligned, or NULL: the stack */
} Plan;

static void plan(const KnRtGemm *g, Plan *p)
{
    p->g = *g;
    if (g->batch > 1 && g->sb_b == 0 && g->sa_b == g->M * g->sa_m) p->g.M = g->batch * g->M, p->g.batch = 1;
    const KnRtGemm *h = &p->g;
    const Kit *k = p->kit = pick_kit(h->dtype);
    Ix kcmax = h->dtype == GEMM_F32 ? KC32 : KC64;
    p->kc = ceil_div((Ix)h->K, ceil_div((Ix)h->K, kcmax));
    p->mc = round_up(ceil_div((Ix)h->M, ceil_div((Ix)h->M, MC)), k->mr);
    p->nc = min_ix(NC, round_up((Ix)h->N, k->nr));
    p->slot = (size_t)round_up((p->mc + p->nc) * p->kc * (Ix)k->es, 64);
    p->tasks = 1, p->by_rows = 0, p->nblocks = ceil_div((Ix)h->N, k->nr);
    double work = (double)h->batch * (double)h->M * (double)h->N * (double)h->K;
    if (h->parallel_for && h->threads > 1 && work >= (double)PAR_WORK) {
        Ix rows = ceil_div((Ix)h->M, k->mr), want = h->threads < MAXT ? h->threads : MAXT;
        if (p->nblocks < want && rows > p->nblocks) p->by_rows = 1, p->nblocks = rows;
        p->tasks = (int)min_ix(want, p->nblocks);
    }
    p->work = NULL;
}

size_t kn_rt_gemm_work(const KnRtGemm *g)
{
    Plan p;
    plan(g, &p);
    return p.slot * (size_t)p.tasks + 64;
}

/* C rows [m0, m1), columns [n0, n1) of every batch, with panels ap and bp */
static void run_rect(const Plan *p, Ix m0, Ix m1, Ix n0, Ix n1, char *ap, char *bp)
{
    const KnRtGemm *g = &p->g;
    const Kit *kt = p->kit;
    size_t es = kt->es;
    Ix M = (Ix)g->M, N = (Ix)g->N, K = (Ix)g->K, mr = kt->mr, nr = kt->nr;
    double tile[MAXTILE];
    for (Ix t = 0; t < (Ix)g->batch; t++) {
        const char *A = (const char *)g->A + (size_t)(t * (Ix)g->sa_b) * es;
        const char *B = (const char *)g->B + (size_t)(t * (Ix)g->sb_b) * es;
        char *C = (char *)g->C + (size_t)(t * M * N) * es;
        for (Ix jc = n0; jc < n1; jc += p->nc) {
            Ix w = min_ix(p->nc, n1 - jc);
            for (Ix pc = 0; pc < K; pc += p->kc) {
                Ix kb = min_ix(p->kc, K - pc);
                kt->pack_b(g, B, pc, kb, jc, w, (int)nr, bp);
                for (Ix ic = m0; ic < m1; ic += p->mc) {
                    Ix h = min_ix(p->mc, m1 - ic);
                    kt->pack_a(g, A, ic, h, pc, kb, (int)mr, ap);
                    for (Ix jr = 0; jr < w; jr += nr)
                        for (Ix ir = 0; ir < h; ir += mr) {
                            const char *a = ap + (size_t)(ir * kb) * es, *b = bp + (size_t)(jr * kb) * es;
                            const void *bias = g->bias ? (const char *)g->bias + (size_t)(jc + jr) * es : NULL;
                            char *c = C + (size_t)((ic + ir) * N + jc + jr) * es;
                            int th = (int)min_ix(mr, h - ir), tw = (int)min_ix(nr, w - jr), last = pc + kb == K;
                            if (th < mr || tw < nr) { /* an edge: the tile, then its valid part */
                                kt->ukr(kb, a, b, tile, nr, 0);
                                kt->merge(tile, (int)nr, c, N, th, tw, pc == 0, last, bias, g->act);
                                continue;
                            }
                            kt->ukr(kb, a, b, c, N, pc != 0);
                            if (last && (bias || g->act)) kt->finish(c, N, th, tw, bias, g->act);
                        }
                }
            }
        }
    }
}

static void run_on_stack(const Plan *p, Ix m0, Ix m1, Ix n0, Ix n1)
{
    double buf[STACK_DOUBLES];
    run_rect(p, m0, m1, n0, n1, (char *)buf, (char *)buf + (size_t)(p->mc * p->kc) * p->kit->es);
}

/* task i: blocks [i nblocks / tasks, (i+1) nblocks / tasks) of the split dimension */
static void task(void *arg, int i)
{
    const Plan *p = arg;
    Ix unit = p->by_rows ? p->kit->mr : p->kit->nr, all = p->by_rows ? (Ix)p->g.M : (Ix)p->g.N;
    Ix lo = unit * (i * p->nblocks / p->tasks), hi = min_ix(all, unit * ((i + 1) * p->nblocks / p->tasks));
    Ix m0 = p->by_rows ? lo : 0, m1 = p->by_rows ? hi : (Ix)p->g.M;
    Ix n0 = p->by_rows ? 0 : lo, n1 = p->by_rows ? (Ix)p->g.N : hi;
    if (!p->work) {
        run_on_stack(p, m0, m1, n0, n1);
        return;
    }
    char *ap = p->work + p->slot * (size_t)i;
    run_rect(p, m0, m1, n0, n1, ap, ap + (size_t)(p->mc * p->kc) * p->kit->es);
}

void kn_rt_gemm(const KnRtGemm *g)
{
    Plan p;
    plan(g, &p);
    if (g->work && g->work_bytes >= p.slot * (size_t)p.tasks + 64) {
        uintptr_t a = (uintptr_t)g->work;
        p.work = (char *)g->work + ((64 - a % 64) % 64);
    }
    if (p.tasks > 1) p.g.parallel_for(p.tasks, task, &p);
    else task(&p, 0);
}
