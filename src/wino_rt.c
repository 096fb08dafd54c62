/*
 * wino_rt.c — kn_rt_wino (gemm_rt.h): a 3x3, stride-1 convolution's product
 * C = A . window(X) by Winograd F(4x4, 3x3), for the dots of backend tcc
 * (whose units call the library, as for kn_rt_gemm). Per 4x4 tile of
 * outputs, 36 multiplies instead of 144 (Lavin and Gray, "Fast Algorithms
 * for Convolutional Neural Networks", CVPR 2016):
 *
 *   U[xi][c][k] = (G g G^T)[xi]       g: the 3x3 weights A[k][c*9 ..]
 *   V[xi][c][t] = (B^T d B)[xi]       d: the 6x6 input patch of tile t
 *   M[xi] = U[xi]^T . V[xi]           36 GEMMs (kn_rt_gemm, one batch)
 *   C[k][4x4 of t] = A^T M[..][k][t] A
 *
 * with
 *   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1],
 *   G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1],
 *   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1].
 *
 * Tiles (a ceil(OH/4) x ceil(OW/4) grid per image; patches read the padding
 * and what lies past the input as zeros, outputs past OH, OW are dropped) are
 * numbered across all images and taken in chunks, so that V and M of a chunk
 * stay near 2 MB. Each transform is two passes of the 1-D one on L tiles at
 * a time (vectors along the tiles), the weights' on L output channels at a
 * time; they run in tasks split by channel (parallel_for, as the GEMM's).
 * On x86-64 there are three copies of them (SSE2, AVX2, AVX-512), picked per
 * call by CPU detection as in vec_rt.c.
 *
 * Error: the transforms' coefficients reach 8 and 1/24, so the rounding
 * error is some ten times the direct product's (tests/test_gemm_rt.c
 * measures it against a double reference); PyTorch's oneDNN uses the same
 * F(4x4, 3x3) for f32.
 *
 * Scratch: U, V and M live in g->work (kn_rt_wino_work bytes); the GEMM
 * inside packs on its tasks' stacks. Where F(4x4, 3x3) does not pay or
 * cannot run (see kn_rt_wino_work), the product is computed directly by
 * kn_rt_gemm.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "fp-contract=off")
#endif

#include <string.h>

#include "gemm_rt.h"
#include "target.h"

typedef ptrdiff_t Ix;

enum { L = 16, MAXT = 16, MAXW = 1024 /* a tile row's input columns, at most */ };
#define CHUNK_ELEMS (1LL << 19) /* V (or M) of a chunk at most, in elements: 2 MB of f32 */

/* The window (KnRtGemm.win, 19 numbers) by name, as in gemm_rt.c */
enum { W_T, W_N, W_C, W_H, W_W, W_KH, W_KW, W_OH, W_OW, W_SH, W_SW, W_DH, W_DW, W_PH, W_PW, W_SXN, W_SXC, W_SXH, W_SXW };

/* One call: the geometry, the scratch and the chunk in hand. */
typedef struct {
    const KnRtGemm *g;
    Ix C, K, N, h, w, oh, ow, ph, pw, sxn, sxc, sxh, sxw;
    Ix th, tw, tiles; /* tile grid of an image; tiles of all images */
    Ix tb;            /* tiles a chunk holds (a multiple of L): V's row length */
    Ix su, sv;        /* U's and V's planes apart, in elements: a multiple of L, and not of 1024 */
    float *U, *V, *M; /* [36][C][K], [36][C][tb], [36][K][nt] */
    Ix t0, nt;        /* the chunk: its first tile, its tiles */
    int tasks;
} Job;

static Ix cdiv(Ix a, Ix b) { return (a + b - 1) / b; }

/* The geometry; 0 where F(4x4, 3x3) does not apply or does not pay. It pays where there is at least a
 * column per channel in (as backend c's F(2x2, 3x3), src/compile.c wino_pays: the weights'
 * transform, per channel pair, costs what the GEMM saves per column). */
static int geometry(const KnRtGemm *g, Job *j)
{
    const int64_t *w = g->win;
    if (!w || g->dtype != GEMM_F32 || g->batch != 1 || (g->act != GEMM_ACT_NONE && g->act != GEMM_ACT_RELU)) return 0;
    if (w[W_T] || w[W_KH] != 3 || w[W_KW] != 3 || w[W_SH] != 1 || w[W_SW] != 1 || w[W_DH] != 1 || w[W_DW] != 1)
        return 0;
    memset(j, 0, sizeof *j);
    j->g = g;
    j->C = (Ix)w[W_C], j->K = (Ix)g->M, j->N = (Ix)g->N, j->h = (Ix)w[W_H], j->w = (Ix)w[W_W];
    j->oh = (Ix)w[W_OH], j->ow = (Ix)w[W_OW], j->ph = (Ix)w[W_PH], j->pw = (Ix)w[W_PW];
    j->sxn = (Ix)w[W_SXN], j->sxc = (Ix)w[W_SXC], j->sxh = (Ix)w[W_SXH], j->sxw = (Ix)w[W_SXW];
    if (g->K != 9 * j->C || j->N != (Ix)w[W_N] * j->oh * j->ow || j->N < j->C) return 0;
    j->th = cdiv(j->oh, 4), j->tw = cdiv(j->ow, 4), j->tiles = (Ix)w[W_N] * j->th * j->tw;
    if (4 * j->tw + 2 > MAXW) return 0;
    Ix most = CHUNK_ELEMS / (36 * (j->C > j->K ? j->C : j->K)) / L * L;
    if (most < L) most = L;
    Ix chunks = cdiv(j->tiles, most);
    j->tb = cdiv(cdiv(j->tiles, chunks), L) * L; /* balanced chunks */
    /* planes a power of two apart share their cache sets: the weights' pass, which writes 36 of them
     * a row at a time, took 3 ms for 256 -> 256 channels (their stores the half of it) */
    j->su = cdiv(j->C * j->K, L) * L + L, j->sv = j->C * j->tb + L;
    return 1;
}

/* U, V, M (each from a multiple of L floats; M with L more, which the output transform's last vector may
 * read past its last row), in floats */
static Ix scratch_floats(const Job *j, Ix *nu, Ix *nv)
{
    *nu = 36 * j->su, *nv = 36 * j->sv;
    return *nu + *nv + 36 * j->K * j->tb + L;
}

size_t kn_rt_wino_work(const KnRtGemm *g)
{
    Job j;
    Ix nu, nv;
    return geometry(g, &j) ? (size_t)scratch_floats(&j, &nu, &nv) * sizeof(float) + 64 : 0;
}

#define INLINE static inline __attribute__((always_inline))

/* The 1-D transforms on L lanes: out[i * os + l] = sum_k T[i][k] in[k * is + l], T = B^T, G or A^T */
INLINE void bt6(const float *restrict in, Ix is, float *restrict out, Ix os)
{
    for (int l = 0; l < L; l++) {
        float d0 = in[l], d1 = in[is + l], d2 = in[2 * is + l], d3 = in[3 * is + l], d4 = in[4 * is + l],
              d5 = in[5 * is + l];
        float a = d4 - 4 * d2, b = d3 - 4 * d1, c = d4 - d2, e = 2 * (d3 - d1);
        out[l] = 4 * d0 - 5 * d2 + d4;
        out[os + l] = a + b;
        out[2 * os + l] = a - b;
        out[3 * os + l] = c + e;
        out[4 * os + l] = c - e;
        out[5 * os + l] = 4 * d1 - 5 * d3 + d5;
    }
}

INLINE void g6(const float *restrict in, Ix is, float *restrict out, Ix os)
{
    for (int l = 0; l < L; l++) {
        float g0 = in[l], g1 = in[is + l], g2 = in[2 * is + l];
        float a = g0 + g2, b = g0 * (1.0f / 24) + g2 * (1.0f / 6), c = g1 * (1.0f / 12);
        out[l] = g0 * 0.25f;
        out[os + l] = (a + g1) * (-1.0f / 6);
        out[2 * os + l] = (a - g1) * (-1.0f / 6);
        out[3 * os + l] = b + c;
        out[4 * os + l] = b - c;
        out[5 * os + l] = g2;
    }
}

INLINE void at6(const float *restrict in, Ix is, float *restrict out, Ix os)
{
    for (int l = 0; l < L; l++) {
        float m0 = in[l], m1 = in[is + l], m2 = in[2 * is + l], m3 = in[3 * is + l], m4 = in[4 * is + l],
              m5 = in[5 * is + l];
        float a = m1 + m2, b = m1 - m2, c = m3 + m4, d = m3 - m4;
        out[l] = m0 + a + c;
        out[os + l] = b + 2 * d;
        out[2 * os + l] = a + 4 * c;
        out[3 * os + l] = b + 8 * d + m5;
    }
}

/* U for output channels [k0, k1): L at a time (A's elements gathered into lanes), U written as runs of L
 * along k, each of U's rows in order (with k outer, the stores that hop from row to row were half the
 * pass); the last group's lanes past k1 are computed on a copy of its first channel and not stored */
INLINE void weights(const Job *j, Ix k0, Ix k1)
{
    const KnRtGemm *g = j->g;
    const float *A = g->A;
    float f[9 * L], p[18 * L], u[36 * L];
    for (Ix c = 0; c < j->C; c++)
        for (Ix k = k0; k < k1; k += L) {
            int n = k1 - k < L ? (int)(k1 - k) : L;
            for (int e = 0; e < 9; e++)
                for (int l = 0; l < L; l++)
                    f[e * L + l] = A[(k + (l < n ? l : 0)) * (Ix)g->sa_m + (c * 9 + e) * (Ix)g->sa_k];
            for (int e = 0; e < 3; e++) g6(f + e * L, 3 * L, p + e * L, 3 * L);  /* G g: p[i][e] */
            for (int i = 0; i < 6; i++) g6(p + i * 3 * L, L, u + i * 6 * L, L); /* (G g) G^T: u[i][x] */
            for (int xi = 0; xi < 36; xi++) {
                float *to = j->U + xi * j->su + c * j->K + k;
                if (n == L)
                    for (int l = 0; l < L; l++) to[l] = u[xi * L + l];
                else
                    for (int l = 0; l < n; l++) to[l] = u[xi * L + l];
            }
        }
}

/* The six input rows of tile row r (image r / th) of channel c, from column -pw on, with zeros where
 * they leave the input: rows[e][x] for x < 4 tw + 2 */
INLINE void tile_rows(const Job *j, Ix c, Ix r, float *rows, Ix width)
{
    Ix nn = r / j->th, y0 = r % j->th * 4 - j->ph, lo = j->pw < 0 ? 0 : j->pw;
    Ix hi = j->w + j->pw < width ? j->w + j->pw : width; /* [lo, hi): columns inside the input */
    if (hi < lo) hi = lo;
    const float *x = (const float *)j->g->B + nn * j->sxn + c * j->sxc;
    for (int e = 0; e < 6; e++) {
        float *o = rows + e * width;
        Ix y = y0 + e, i = 0;
        if (y >= 0 && y < j->h) {
            const float *src = x + y * j->sxh + (lo - j->pw) * j->sxw;
            for (; i < lo; i++) o[i] = 0;
            if (j->sxw == 1) {
                memcpy(o + lo, src, (size_t)(hi - lo) * sizeof *o);
                i = hi;
            } else
                for (; i < hi; i++) o[i] = src[(i - lo) * j->sxw];
        }
        for (; i < width; i++) o[i] = 0;
    }
}

/* V of the chunk for input channels [c0, c1): per L tiles, their 6x6 patches into lanes (d[(6 e + k) L +
 * l], from the rows of their tile row), d B by rows, B^T (d B) by columns straight into V's 36 planes */
INLINE void input(const Job *j, Ix c0, Ix c1)
{
    float d[36 * L], p[36 * L];
    Ix width = 4 * j->tw + 2;
    float rows[6 * MAXW];
    for (Ix c = c0; c < c1; c++) {
        Ix have = -1; /* the tile row in rows */
        for (Ix t = 0; t < j->nt; t += L) {
            for (int l = 0; l < L; l++) {
                Ix tt = j->t0 + t + l, r = tt / j->tw, x0 = 4 * (tt % j->tw);
                if (t + l >= j->nt) {
                    for (int e = 0; e < 36; e++) d[e * L + l] = 0;
                    continue;
                }
                if (r != have) tile_rows(j, c, have = r, rows, width);
                for (int e = 0; e < 6; e++)
                    for (int k = 0; k < 6; k++) d[(6 * e + k) * L + l] = rows[e * width + x0 + k];
            }
            for (int e = 0; e < 6; e++) bt6(d + e * 6 * L, L, p + e * 6 * L, L);
            for (int k = 0; k < 6; k++) bt6(p + k * L, 6 * L, j->V + k * j->sv + c * j->tb + t, 6 * j->sv);
        }
    }
}

/* C of the chunk for output channels [k0, k1): per L tiles, M A by rows, A^T (M A) by columns, then each
 * tile's 4x4 outputs (those inside OH x OW) with bias and act into C */
INLINE void output(const Job *j, Ix k0, Ix k1)
{
    const KnRtGemm *g = j->g;
    const float *bias = g->bias;
    float *C = g->C;
    float p[24 * L], y[16 * L];
    Ix per = j->th * j->tw, ms = j->K * j->nt;
    for (Ix k = k0; k < k1; k++)
        for (Ix t = 0; t < j->nt; t += L) {
            for (int e = 0; e < 6; e++) at6(j->M + 6 * e * ms + k * j->nt + t, ms, p + e * 4 * L, L);
            for (int b = 0; b < 4; b++) at6(p + b * L, 4 * L, y + b * L, 4 * L);
            for (int l = 0; l < L && t + l < j->nt; l++) {
                Ix tt = j->t0 + t + l, nn = tt / per, ty = tt % per / j->tw, tx = tt % j->tw;
                for (int a = 0; a < 4 && 4 * ty + a < j->oh; a++) {
                    Ix col = (nn * j->oh + 4 * ty + a) * j->ow + 4 * tx;
                    float *out = C + k * j->N + col;
                    for (int b = 0; b < 4 && 4 * tx + b < j->ow; b++) {
                        float v = y[(4 * a + b) * L + l];
                        if (bias) v += bias[col + b];
                        if (g->act == GEMM_ACT_RELU) v = v < 0 ? 0 : v;
                        out[b] = v;
                    }
                }
            }
        }
}

/* Each pass in copies for the instruction sets; a task's range of channels, i of tasks */
#define RANGE(all) Ix lo = i * (all) / j->tasks, hi = (i + 1) * (all) / j->tasks
#define DEFINE_PASSES(sfx, ATTR)                                                                                       \
    ATTR static void weights_##sfx(void *arg, int i)                                                                   \
    {                                                                                                                  \
        const Job *j = arg;                                                                                            \
        RANGE(cdiv(j->K, L));                                                                                          \
        weights(j, lo * L, hi * L < j->K ? hi * L : j->K);                                                             \
    }                                                                                                                  \
    ATTR static void input_##sfx(void *arg, int i)                                                                     \
    {                                                                                                                  \
        const Job *j = arg;                                                                                            \
        RANGE(j->C);                                                                                                   \
        input(j, lo, hi);                                                                                              \
    }                                                                                                                  \
    ATTR static void output_##sfx(void *arg, int i)                                                                    \
    {                                                                                                                  \
        const Job *j = arg;                                                                                            \
        RANGE(j->K);                                                                                                   \
        output(j, lo, hi);                                                                                             \
    }

DEFINE_PASSES(base, )

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
DEFINE_PASSES(avx2, __attribute__((target("avx2"))))
DEFINE_PASSES(avx512, __attribute__((target("avx512f"))))

typedef void (*Pass)(void *, int);

/* the passes of the best copy the CPU runs: 2 AVX-512, 1 AVX2, 0 the baseline */
static const Pass *passes(void)
{
    static const Pass all[3][3] = {{weights_base, input_base, output_base}, {weights_avx2, input_avx2, output_avx2},
                                   {weights_avx512, input_avx512, output_avx512}};
    __builtin_cpu_init();
    int f = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
    return all[f];
}
#else
typedef void (*Pass)(void *, int);
static const Pass *passes(void)
{
    static const Pass all[3] = {weights_base, input_base, output_base};
    return all;
}
#endif

static void run(const Job *j, Pass fn)
{
    if (j->tasks > 1) j->g->parallel_for(j->tasks, fn, (void *)j);
    else fn((void *)j, 0);
}

void kn_rt_wino(const KnRtGemm *g)
{
    Job j;
    Ix nu, nv;
    if (!geometry(g, &j) || !g->work || g->work_bytes < (size_t)scratch_floats(&j, &nu, &nv) * sizeof(float) + 64) {
        KnRtGemm d = *g;
        d.work = NULL, d.work_bytes = 0; /* on the stack: the caller's block was sized for this */
        kn_rt_gemm(&d);
        return;
    }
    j.U = (float *)((char *)g->work + (64 - (uintptr_t)g->work % 64) % 64);
    j.V = j.U + nu, j.M = j.V + nv;
    j.tasks = g->parallel_for && g->threads > 1 ? (g->threads < MAXT ? g->threads : MAXT) : 1;
    const Pass *pass = passes();
    run(&j, pass[0]);
    KnRtGemm m;
    memset(&m, 0, sizeof m);
    m.dtype = GEMM_F32, m.act = GEMM_ACT_NONE, m.batch = 36, m.M = j.K, m.K = j.C;
    m.A = j.U, m.sa_b = j.su, m.sa_m = 1, m.sa_k = j.K; /* U[xi][c][k] as (K, C) */
    m.B = j.V, m.sb_b = j.sv, m.sb_k = j.tb, m.sb_n = 1;
    m.parallel_for = g->parallel_for, m.threads = g->threads;
    for (j.t0 = 0; j.t0 < j.tiles; j.t0 += j.tb) {
        j.nt = j.tiles - j.t0 < j.tb ? j.tiles - j.t0 : j.tb;
        run(&j, pass[1]);
        m.C = j.M, m.N = j.nt;
        kn_rt_gemm(&m);
        run(&j, pass[2]);
    }
}
