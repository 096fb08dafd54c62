/*
 * wino_rt.c — kn_rt_wino (gemm_rt.h): a 3x3, stride-1 convolution's product
 * C = A . window(X) by Winograd F(4x4, 3x3), for the dots of backend tcc
 * (whose units call the library, as for kn_rt_gemm). Per 4x4 tile of
 * outputs, 36 multiplies instead of 144 (Lavin and Gray, "Fast Algorithms
 * for Convolutional Neural Networks", CVPR 2016):
 *
 *   U[xi][c][k] = (G g G^T)[xi]       g: the 3x3 weights A[k][c*9 ..]
 *   V[xi][c][t] = (B^T d B)[xi]       d: the 6x6 input patch of tile t
 *   M[xi] = U[xi]^T . V[xi]           36 GEMMs
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
 * stay within L2. U is computed first, its output channels split among the
 * tasks (parallel_for); then each task takes whole chunks, input transform,
 * GEMMs and output transform on one thread in V and M of its own. Each
 * transform is two passes of the 1-D one on vectors of L tiles (the weights':
 * of L output channels). U is written in panels of MR output channels and V
 * in panels of L tiles, the operands of the GEMMs' kernel as they are, so
 * nothing is packed (kn_rt_gemm here, repacking U for every chunk, made the
 * GEMMs of a 64 -> 64 channel convolution half its time). On x86-64 there
 * are three copies of all this (SSE2, AVX2, AVX-512), picked per call by CPU
 * detection as in vec_rt.c.
 *
 * Error: the transforms' coefficients reach 8 and 1/24, so the rounding
 * error exceeds the direct product's (tests/test_gemm_rt.c measures it
 * against a double reference: up to 2.7 times the classical bound); oneDNN's
 * f32 Winograd is F(4x4, 3x3) too.
 *
 * Scratch: U, and V and M per task, live in g->work (kn_rt_wino_work bytes,
 * which depend on the threads). Where
 * F(4x4, 3x3) does not pay or cannot run (see kn_rt_wino_work), the product
 * is computed directly by kn_rt_gemm.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "fp-contract=off")
#endif

#include <string.h>

#include "gemm_rt.h"
#include "dot.h"

typedef ptrdiff_t Ix;

/* L: lanes of a vector (tiles of a V panel); MR: output channels of a U panel; MAXW: a tile row's input
 * columns, at most; TBMAX: a chunk's tiles, at most */
enum { L = 16, MR = 8 /* products() names its accumulators */, MAXT = 16, MAXW = 1024, TBMAX = 256 };
#define CHUNK_ELEMS (1LL << 17) /* V and M of a task's chunk at most, in elements: 512 KB of f32, in L2 */

/* The window (KnRtGemm.win, 19 numbers) by name, as in gemm_rt.c */
enum { W_T, W_N, W_C, W_H, W_W, W_KH, W_KW, W_OH, W_OW, W_SH, W_SW, W_DH, W_DW, W_PH, W_PW, W_SXN, W_SXC, W_SXH, W_SXW };

/* One call: the geometry, the scratch and the chunk in hand. */
typedef struct {
    const KnRtGemm *g;
    Ix C, K, N, h, w, oh, ow, ph, pw, sxn, sxc, sxh, sxw;
    Ix th, tw, tiles; /* tile grid of an image; tiles of all images */
    Ix tb;            /* tiles a chunk holds (a multiple of L): M's row length */
    Ix kp;            /* K rounded up to whole panels of MR */
    Ix su, sv, sm;    /* U's, V's and M's planes apart, in elements: not multiples of 1024 */
    Ix chunks;        /* of tb tiles (the last fewer) */
    float *U, *V, *M; /* U [36][kp / MR][C][MR]; each task's V [36][tb / L][C][L] and M [36][K][tb] */
    Ix t0, nt;        /* the chunk in hand: its first tile, its tiles */
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
    j->tasks = g->parallel_for && g->threads > 1 ? (g->threads < MAXT ? g->threads : MAXT) : 1;
    if (j->tasks > cdiv(j->tiles, L)) j->tasks = (int)cdiv(j->tiles, L);
    /* chunks within L2 where the tiles go round the tasks more than once; no more chunks than tasks
     * where that would not fill L lanes (each chunk's GEMMs read all of U) */
    Ix most = CHUNK_ELEMS / (36 * (j->C + j->K)) / L * L, fair = cdiv(cdiv(j->tiles, j->tasks), L) * L;
    most = most < L ? L : most > TBMAX ? TBMAX : most;
    j->tb = most < fair ? most : fair > TBMAX ? TBMAX : fair;
    j->chunks = cdiv(j->tiles, j->tb);
    j->kp = cdiv(j->K, MR) * MR;
    /* planes a power of two apart share their cache sets, and the weights' pass writes 36 of them a
     * row at a time: each plane's stride is padded by L so that they do not */
    j->su = j->kp * j->C + L, j->sv = j->C * j->tb + L, j->sm = j->K * j->tb + L;
    return 1;
}

/* U, and each task's V and M, in floats (*nu, *nv: U's and a V's) */
static Ix scratch_floats(const Job *j, Ix *nu, Ix *nv)
{
    *nu = 36 * j->su, *nv = 36 * j->sv;
    return *nu + j->tasks * (*nv + 36 * j->sm);
}

size_t kn_rt_wino_work(const KnRtGemm *g)
{
    Job j;
    Ix nu, nv;
    return geometry(g, &j) ? (size_t)scratch_floats(&j, &nu, &nv) * sizeof(float) + 64 : 0;
}

#define INLINE static inline __attribute__((always_inline))

/* L floats as one value (GNU C vectors: the copies for each instruction set below compile them to that
 * set's registers; a loop over lanes, left to the vectoriser, stayed scalar where its strides were
 * not constants) */
typedef float VF __attribute__((vector_size(4 * L)));
#define LD(v, p) memcpy(&(v), (p), sizeof(VF))
#define ST(p, v) memcpy((p), &(v), sizeof(VF))

/* The 1-D transforms: o[i * os] = sum_k T[i][k] d[k * is], T = B^T (6x6), G (6x3) or A^T (4x6) */
INLINE void bt6(const VF *d, int is, VF *o, int os)
{
    VF a = d[4 * is] - 4 * d[2 * is], b = d[3 * is] - 4 * d[is], c = d[4 * is] - d[2 * is], e = 2 * (d[3 * is] - d[is]);
    o[0] = 4 * d[0] - 5 * d[2 * is] + d[4 * is];
    o[os] = a + b;
    o[2 * os] = a - b;
    o[3 * os] = c + e;
    o[4 * os] = c - e;
    o[5 * os] = 4 * d[is] - 5 * d[3 * is] + d[5 * is];
}

INLINE void g6(const VF *d, int is, VF *o, int os)
{
    VF a = d[0] + d[2 * is], b = d[0] * (1.0f / 24) + d[2 * is] * (1.0f / 6), c = d[is] * (1.0f / 12);
    o[0] = d[0] * 0.25f;
    o[os] = (a + d[is]) * (-1.0f / 6);
    o[2 * os] = (a - d[is]) * (-1.0f / 6);
    o[3 * os] = b + c;
    o[4 * os] = b - c;
    o[5 * os] = d[2 * is];
}

INLINE void at6(const VF *d, int is, VF *o, int os)
{
    VF a = d[is] + d[2 * is], b = d[is] - d[2 * is], c = d[3 * is] + d[4 * is], e = d[3 * is] - d[4 * is];
    o[0] = d[0] + a + c;
    o[os] = b + 2 * e;
    o[2 * os] = a + 4 * c;
    o[3 * os] = b + 8 * e + d[5 * is];
}

/* U for output channels [k0, k1): L at a time (A's elements gathered into lanes), each lane group into
 * two panels of MR, channel in by channel in (with the output channels outer, the stores that hopped
 * from row to row were half the pass); the last group's lanes past k1 are computed on a copy of its
 * first channel and stored as zeros where they pad the last panel */
INLINE void weights(const Job *j, Ix k0, Ix k1)
{
    const KnRtGemm *g = j->g;
    const float *A = g->A;
    float f[9 * L], u[36 * L];
    VF fv[9], p[18], uv[36];
    for (Ix c = 0; c < j->C; c++)
        for (Ix k = k0; k < k1; k += L) {
            int n = k1 - k < L ? (int)(k1 - k) : L;
            for (int e = 0; e < 9; e++) {
                for (int l = 0; l < L; l++)
                    f[e * L + l] = A[(k + (l < n ? l : 0)) * (Ix)g->sa_m + (c * 9 + e) * (Ix)g->sa_k];
                LD(fv[e], f + e * L);
            }
            for (int e = 0; e < 3; e++) g6(fv + e, 3, p + e, 3); /* G g: p[3 i + e] */
            for (int i = 0; i < 6; i++) g6(p + 3 * i, 1, uv + 6 * i, 1); /* (G g) G^T: uv[6 i + x] */
            for (int xi = 0; xi < 36; xi++) { /* lanes l into panel (k + l) / MR, row c, at (k + l) % MR */
                ST(u, uv[xi]);
                for (int l = n; l < L; l++) u[l] = 0; /* the padding of the last panel */
                for (int l = 0; l < L && k + l < j->kp; l += MR)
                    memcpy(j->U + xi * j->su + ((k + l) / MR * j->C + c) * MR, u + l, MR * sizeof *u);
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

/* V of the chunk for input channels [c0, c1), in two passes per channel (as backend c's F(2x2, 3x3),
 * targets/c/wino.c): the patches first, element (e, k) of each tile into row 6 e + k of v (from the
 * rows of the tile's tile row: a run of strided copies per element and tile row); then B^T d B, L
 * tiles at a time in vectors (zeros in the lanes past the chunk's tiles), each into its panel of V */
INLINE void input(const Job *j, Ix c0, Ix c1)
{
    float rows[6 * MAXW], v[36 * TBMAX];
    Ix width = 4 * j->tw + 2, end = cdiv(j->nt, L) * L, sv = TBMAX;
    VF d[36], p[36];
    for (Ix c = c0; c < c1; c++) {
        for (Ix t = 0, n; t < j->nt; t += n) { /* the chunk's part of one tile row: tiles [x0, x0 + n) */
            Ix tt = j->t0 + t, x0 = tt % j->tw;
            n = j->tw - x0 < j->nt - t ? j->tw - x0 : j->nt - t;
            tile_rows(j, c, tt / j->tw, rows, width);
            for (int e = 0; e < 6; e++) { /* the six elements of a tile's row e, tile by tile */
                const float *src = rows + e * width + 4 * x0;
                float *dst = v + 6 * e * sv + t;
                for (Ix x = 0; x < n; x++, src += 4)
                    for (int k = 0; k < 6; k++) dst[k * sv + x] = src[k];
            }
        }
        for (int i = 0; i < 36; i++)
            for (Ix t = j->nt; t < end; t++) v[i * sv + t] = 0;
        for (Ix t = 0; t < end; t += L) {
            for (int i = 0; i < 36; i++) LD(d[i], v + i * sv + t);
            for (int e = 0; e < 6; e++) bt6(d + 6 * e, 1, p + 6 * e, 1); /* d B, row e */
            for (int k = 0; k < 6; k++) bt6(p + k, 6, d + k, 6);         /* B^T (d B), column k */
            for (int i = 0; i < 36; i++) ST(j->V + i * j->sv + (t / L * j->C + c) * L, d[i]);
        }
    }
}

/* C of the chunk for output channels [k0, k1), in two passes per channel: A^T M A in place, L tiles at
 * a time in vectors, y[a][b] of each tile into M's plane 4 a + b; then each tile row's part of the
 * chunk, its four output rows interleaved from those planes into C (bias and act on the way) */
INLINE void output(const Job *j, Ix k0, Ix k1)
{
    const KnRtGemm *g = j->g;
    const float *bias = g->bias;
    VF m[36], q[24], y[16];
    Ix ms = j->sm;
    int plain = !bias && g->act == GEMM_ACT_NONE;
    for (Ix k = k0; k < k1; k++) {
        float *mk = j->M + k * j->tb;
        for (Ix t = 0; t < j->nt; t += L) {
            for (int i = 0; i < 36; i++) LD(m[i], mk + i * ms + t);
            for (int e = 0; e < 6; e++) at6(m + 6 * e, 1, q + 4 * e, 1); /* M A, row e */
            for (int b = 0; b < 4; b++) at6(q + b, 4, y + b, 4);       /* A^T (M A), column b */
            for (int i = 0; i < 16; i++) ST(mk + i * ms + t, y[i]);
        }
        for (Ix t = 0, n; t < j->nt; t += n) { /* the chunk's part of one tile row: tiles [x0, x0 + n) */
            Ix tt = j->t0 + t, r = tt / j->tw, x0 = tt % j->tw, nn = r / j->th, ty = r % j->th;
            n = j->tw - x0 < j->nt - t ? j->tw - x0 : j->nt - t;
            Ix whole = 4 * (x0 + n) <= j->ow ? n : n - 1; /* tiles with all four columns inside */
            for (int a = 0; a < 4 && 4 * ty + a < j->oh; a++) {
                Ix col = (nn * j->oh + 4 * ty + a) * j->ow + 4 * x0;
                float *out = (float *)g->C + k * j->N + col;
                const float *y0 = mk + 4 * a * ms + t, *y1 = y0 + ms, *y2 = y1 + ms, *y3 = y2 + ms;
                Ix x = 0;
                if (plain)
                    for (; x < whole; x++) {
                        out[4 * x] = y0[x];
                        out[4 * x + 1] = y1[x];
                        out[4 * x + 2] = y2[x];
                        out[4 * x + 3] = y3[x];
                    }
                for (; x < n; x++) {
                    for (int b = 0; b < 4 && 4 * (x0 + x) + b < j->ow; b++) {
                        float v = mk[(4 * a + b) * ms + t + x];
                        if (bias) v += bias[col + 4 * x + b];
                        if (g->act == GEMM_ACT_RELU) v = v < 0 ? 0 : v;
                        out[4 * x + b] = v;
                    }
                }
            }
        }
    }
}

/* M = U^T V of the chunk, plane by plane: for each panel of L tiles and MR output channels, MR x L
 * sums over the channels in, in MR vectors (U and V already in panels: nothing to pack). Multiply,
 * then add, as the rest of this file (on a core whose adds have pipes of their own, as fast as a
 * fused multiply-add here). */
INLINE void products(const Job *j)
{
    Ix panels = cdiv(j->nt, L), C = j->C;
    for (int xi = 0; xi < 36; xi++)
        for (Ix tp = 0; tp < panels; tp++) {
            const float *v = j->V + xi * j->sv + tp * C * L;
            for (Ix k = 0; k < j->K; k += MR) {
                const float *u = j->U + xi * j->su + k * C;
                /* eight named accumulators: an array of them, its loop not unrolled at -O2, lived in memory */
                VF a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0}, x;
                for (Ix c = 0; c < C; c++, u += MR) {
                    LD(x, v + c * L);
                    a0 += x * u[0], a1 += x * u[1], a2 += x * u[2], a3 += x * u[3];
                    a4 += x * u[4], a5 += x * u[5], a6 += x * u[6], a7 += x * u[7];
                }
                VF acc[MR] = {a0, a1, a2, a3, a4, a5, a6, a7};
                float *out = j->M + xi * j->sm + k * j->tb + tp * L;
                for (int r = 0; r < MR && k + r < j->K; r++) ST(out + r * j->tb, acc[r]);
            }
        }
}

/* Chunk t0 of tiles, whole, on one thread: its V, M and C. (The passes of a chunk split among tasks,
 * by channel in, tile, channel out, moved V and M from core to core at every pass: two threads ran
 * ResNet-18's 64 -> 64 channel convolution no faster than one.) */
INLINE void chunk(Job *j, Ix t0)
{
    j->t0 = t0, j->nt = j->tiles - t0 < j->tb ? j->tiles - t0 : j->tb;
    input(j, 0, j->C);
    products(j);
    output(j, 0, j->K);
}

/* The passes in copies for the instruction sets: the weights' for task i of tasks (output channels),
 * then task i's chunks: i, i + tasks, ... in the V and M of its own */
#define DEFINE_PASSES(sfx, ATTR)                                                                                       \
    ATTR static void weights_##sfx(void *arg, int i)                                                                   \
    {                                                                                                                  \
        const Job *j = arg;                                                                                            \
        Ix groups = cdiv(j->K, L), lo = i * groups / j->tasks * L, hi = (i + 1) * groups / j->tasks * L;              \
        weights(j, lo, hi < j->K ? hi : j->K);                                                                         \
    }                                                                                                                  \
    ATTR static void chunks_##sfx(void *arg, int i)                                                                    \
    {                                                                                                                  \
        Job j = *(const Job *)arg;                                                                                     \
        j.V += i * (36 * j.sv + 36 * j.sm), j.M = j.V + 36 * j.sv;                                           \
        for (Ix c = i; c < j.chunks; c += j.tasks) chunk(&j, c * j.tb);                                                \
    }

DEFINE_PASSES(base, )

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
DEFINE_PASSES(avx2, __attribute__((target("avx2"))))
DEFINE_PASSES(avx512, __attribute__((target("avx512f"))))

typedef void (*Pass)(void *, int);

/* the passes of the copy kn_rt_isa picks: 2 AVX-512, 1 AVX2, 0 the baseline */
static const Pass *passes(void)
{
    static const Pass all[3][2] = {{weights_base, chunks_base}, {weights_avx2, chunks_avx2},
                                   {weights_avx512, chunks_avx512}};
    return all[kn_rt_isa()];
}
#else
typedef void (*Pass)(void *, int);
static const Pass *passes(void)
{
    static const Pass all[2] = {weights_base, chunks_base};
    return all;
}
#endif

static void run(const Job *j, Pass fn)
{
    if (j->tasks > 1) j->g->parallel_for(j->tasks, fn, (void *)j);
    else fn((void *)j, 0);
}

size_t kn_rt_wino_upack(const KnRtGemm *g, void *dst)
{
    Job j;
    if (!geometry(g, &j)) return 0;
    if (dst) {
        j.U = dst, j.tasks = 1;
        passes()[0](&j, 0);
    }
    return (size_t)(36 * j.su) * sizeof(float);
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
    j.V = j.U + nu;
    const Pass *pass = passes();
    if (g->wino_u) j.U = (float *)g->wino_u; /* kn_rt_wino_upack's */
    else run(&j, pass[0]);
    run(&j, pass[1]);
}
