/*
 * wino.c — targets/c: a convolution's dot by Winograd F(2x2, 3x3) (gemm.h,
 * GemmSpec.wino). Renders one spec to one GNU C unit with the entry of the
 * GEMM template, NAME(void **b), computing the same C = A . window(x) (plus
 * bias, act, epilogue) with 2.25x fewer multiplies than the direct product:
 *
 *   U[xi][c][k] = (G g G^T)[xi]      the weights g = A[k][c*9 ..], per call
 *   V[xi][c][t] = (B^T d B)[xi]      d: the 4x4 input patch of output tile t
 *   M[xi] = U[xi] . V[xi]            16 GEMMs, xi < 16: the GEMM template
 *   C[k][2x2 of t] = A^T M[..][k][t] A
 *
 * with (Lavin and Gray, 2015)
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
 *   A^T = [1 1 1 0; 0 1 -1 -1].
 *
 * The tiles (2x2 outputs each, a ceil(OH/2) x ceil(OW/2) grid per image; the
 * last row and column are partial when OH, OW are odd: their patches read the
 * padding as zeros and their extra outputs are dropped) are taken in chunks
 * of whole tile rows, so that V and M of a chunk stay near 2 MB (L2-L3) and the
 * columns of C a chunk completes are one contiguous range: the epilogue runs
 * on each row of it (t 0, m k, n that range) once the chunk's output
 * transform has written it. The 16 GEMMs are one batched GEMM unit rendered
 * by gemm.c (NAME_wg, this host's ISA copy), so packing, micro-kernel and
 * threading are the template's; where a chunk has fewer tiles than output
 * channels it runs transposed (M^T = V^T . U^T: threads split the channels,
 * and no thread packs all of U for a few columns). The transforms run in
 * tasks through b[4] (the weights and outputs split by channel out, the
 * input by channel in). Scratch (U, V, M: at most 16 x channels x ~CHUNK_ELEMS / 16 each) is
 * allocated at the first call and kept, as the template's static packing buffers are (freed when the
 * unit is unloaded: a fresh block per call cost 10% of a call in page faults); if that
 * fails the unit computes the product directly, in scalar loops.
 *
 * Error: F(2x2, 3x3)'s transforms have coefficients 0, +-1, +-1/2, so its
 * rounding error is a small multiple of the direct product's (measured in
 * tests/test_gemm.c against a double reference).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gemm.h"

typedef long long ll;

/* V (or M) of a chunk holds at most about this many elements, 2 MB of f32: as fast on one thread as 1
 * MB and 4 MB (each within 3% of the other, ResNet-18 stages 1-3), with half the chunks of 1 MB, each
 * three rounds of the thread pool (input, GEMM, output), and half the scratch kept of 4 MB */
#define CHUNK_ELEMS (1LL << 19)
enum { MAXT = 16 };

/* The geometry of one unit, every value a literal of the text. */
typedef struct {
    ll C, K, N, n, h, w, oh, ow, ph, pw; /* channels in, out; columns of C; x's sizes; padding */
    ll th, tw, rows;                     /* tile grid of an image; tile rows of all images */
    ll rpc, tb;                          /* tile rows per chunk; columns of V (tiles, padded) */
    int tr;                              /* GEMM transposed: M^T = V^T . U^T */
} Geo;

static ll cdiv(ll a, ll b) { return (a + b - 1) / b; }

static Geo geometry(const GemmSpec *s)
{
    const GemmWindow *w = &s->win;
    Geo g;
    g.C = w->c, g.K = s->M, g.N = s->N, g.n = w->n, g.h = w->h, g.w = w->w, g.oh = w->oh, g.ow = w->ow;
    g.ph = w->ph, g.pw = w->pw;
    g.th = cdiv(g.oh, 2), g.tw = cdiv(g.ow, 2), g.rows = g.n * g.th;
    ll most = CHUNK_ELEMS / (16 * (g.C > g.K ? g.C : g.K)) / g.tw; /* tile rows per chunk, at most */
    ll rpc = most < 1 ? 1 : most;
    rpc = cdiv(g.rows, cdiv(g.rows, rpc)); /* balanced chunks */
    g.rpc = rpc;
    g.tb = cdiv(rpc * g.tw, 16) * 16;
    g.tr = g.tb < g.K;
    return g;
}

/* the product's spec for the 16 GEMMs of a chunk, named name */
static GemmSpec inner_spec(const GemmSpec *s, const Geo *g, const char *name)
{
    GemmSpec b;
    memset(&b, 0, sizeof b);
    b.name = name, b.dtype = s->dtype, b.batch = 16, b.K = g->C, b.act = GEMM_ACT_NONE;
    b.kc = s->kc, b.mc = s->mc;
    if (!g->tr) { /* M[xi][k][t] = U[xi][c][k]^T . V[xi][c][t] */
        b.M = g->K, b.N = g->tb;
        b.sa_b = g->K * g->C, b.sa_m = 1, b.sa_k = g->K;
        b.sb_b = g->C * g->tb, b.sb_k = g->tb, b.sb_n = 1;
    } else { /* M[xi][t][k] = V[xi][c][t]^T . U[xi][c][k] */
        b.M = g->tb, b.N = g->K;
        b.sa_b = g->C * g->tb, b.sa_m = 1, b.sa_k = g->tb;
        b.sb_b = g->C * g->K, b.sb_k = g->K, b.sb_n = 1;
    }
    return b;
}

/* the job the tasks share, the task runner, the final value of an element (bias, act) */
static void put_common(GemmOut *o, const GemmSpec *s)
{
    const char *n = s->name;
    gemm_put(o, "\n/* ---- winograd F(2x2, 3x3) around %s_wg ---- */\n#include <stdlib.h>\n", n);
    gemm_put(o, "typedef struct { int (*parallel_for)(int, void (*)(void *, int), void *); int threads; "
           "void *(*scratch)(void *, size_t); void *owner; } %s_wpar; /* KnParallel */\n", n);
    if (s->epilogue) {
        gemm_put(o, "void %s(void **b, int64_t t, int64_t m0, int64_t m1, int64_t n0, int64_t n1);\n", s->epilogue);
        gemm_put(o, "typedef void (*%s_epi_t)(void **, int64_t, int64_t, int64_t, int64_t, int64_t);\n", n);
    }
    gemm_put(o, "typedef struct {\n    const T *A, *X, *bias;\n    T *C, *U, *V, *M;\n    void **eb;\n");
    if (s->epilogue) gemm_put(o, "    %s_epi_t epi;\n", n);
    gemm_put(o, "    ptrdiff_t r0, r1;\n    int tasks;\n} %s_wjob;\n", n);
    gemm_put(o, "static void %s_wrun(const %s_wpar *par, %s_wjob *j, void (*fn)(void *, int))\n{\n", n, n, n);
    gemm_put(o, "    if (j->tasks > 1) par->parallel_for(j->tasks, fn, j);\n    else fn(j, 0);\n}\n");
    gemm_put(o, "static inline __attribute__((always_inline)) T %s_fin(const %s_wjob *j, T x, ptrdiff_t col)\n{\n", n, n);
    if (s->bias) gemm_put(o, "    x += j->bias[col];\n");
    else gemm_put(o, "    (void)j, (void)col;\n");
    if (s->act) {
        gemm_put(o, "    ");
        gemm_put_act(o, s, "x");
        gemm_put(o, "\n");
    }
    gemm_put(o, "    return x;\n}\n");
}

/* the transform of one (c, k) pair, or of 16 along k (V: vectors of 16 elements, f gathered from A's
 * rows, u stored as one run per plane) */
static void put_weight_pair(GemmOut *o, const GemmSpec *s, const Geo *g, const char *V)
{
    ll ux = g->K * g->C, sa_m = s->sa_m, sa_k = s->sa_k;
    for (int e = 0; e < 9; e++) {
        if (!*V) {
            gemm_put(o, "            const T f%d = f[%lld];\n", e, e * sa_k);
            continue;
        }
        gemm_put(o, "            const %s f%d = {", V, e);
        for (int l = 0; l < 16; l++) gemm_put(o, "%sf[%lld]", l ? ", " : "", l * sa_m + e * sa_k);
        gemm_put(o, "};\n");
    }
    const char *t = *V ? V : "T";
    for (int e = 0; e < 3; e++) /* G g, column e */
        gemm_put(o, "            const %s q0%d = f%d, q1%d = (T)0.5 * (f%d + f%d + f%d), q2%d = (T)0.5 * (f%d - f%d + f%d), "
               "q3%d = f%d;\n",
            t, e, e, e, e, 3 + e, 6 + e, e, e, 3 + e, 6 + e, e, 6 + e);
    for (int a = 0; a < 4; a++) { /* (G g) G^T, row a */
        gemm_put(o, "            { const %s r0 = q%d0, r1 = (T)0.5 * (q%d0 + q%d1 + q%d2), r2 = (T)0.5 * (q%d0 - q%d1 + q%d2), "
               "r3 = q%d2;\n",
            t, a, a, a, a, a, a, a, a);
        for (int b = 0; b < 4; b++) {
            if (*V) gemm_put(o, "              memcpy(u + %lld, &r%d, sizeof r%d);\n", (4 * a + b) * ux, b, b);
            else gemm_put(o, "              u[%lld] = r%d;\n", (4 * a + b) * ux, b);
        }
        gemm_put(o, "            }\n");
    }
}

/* U = G g G^T for the output channels of task i, in the order U is stored, [xi][c][k] (so that the
 * GEMM packs it with contiguous loads, as A or as B): for each c, 16 channels out at a time in
 * vectors (A's elements gathered, U's written a run of 16 per plane), the rest one by one */
static void put_weights(GemmOut *o, const GemmSpec *s, const Geo *g)
{
    const char *n = s->name;
    gemm_put(o, "static void %s_wt(void *arg, int i)\n{\n    const %s_wjob *j = (const %s_wjob *)arg;\n", n, n, n);
    gemm_put(o, "    const ptrdiff_t k0 = i * (ptrdiff_t)%lld / j->tasks, k1 = (i + 1) * (ptrdiff_t)%lld / j->tasks;\n", g->K,
        g->K);
    gemm_put(o, "    typedef T V __attribute__((vector_size(%d)));\n", 16 * (s->dtype == GEMM_F32 ? 4 : 8));
    gemm_put(o, "    ptrdiff_t k, c;\n");
    gemm_put(o, "    for (c = 0; c < %lld; c++) {\n", g->C);
    gemm_put(o, "        for (k = k0; k + 16 <= k1; k += 16) {\n");
    gemm_put(o, "            T *u = j->U + k + c * %lld;\n", g->K);
    gemm_put(o, "            const T *f = j->A + k * %lld + c * %lld;\n", (ll)s->sa_m, 9 * (ll)s->sa_k);
    put_weight_pair(o, s, g, "V");
    gemm_put(o, "        }\n        for (; k < k1; k++) {\n");
    gemm_put(o, "            T *u = j->U + k + c * %lld;\n", g->K);
    gemm_put(o, "            const T *f = j->A + k * %lld + c * %lld;\n", (ll)s->sa_m, 9 * (ll)s->sa_k);
    put_weight_pair(o, s, g, "");
    gemm_put(o, "        }\n    }\n}\n");
}

/* [lo, hi): the x in [0, cnt) with 0 <= 2 x + off < w (a run: 2 x + off increases) */
static void valid_run(ll cnt, ll off, ll w, ll *lo, ll *hi)
{
    ll x = 0;
    while (x < cnt && 2 * x + off < 0) x++;
    *lo = x;
    while (x < cnt && 2 * x + off < w) x++;
    *hi = x;
}

/* V = B^T d B of the chunk's tiles for the input channels of task i, in two passes per channel:
 * the patches d first, element (e, b) of tile t into V[e * 4 + b][c][t] (each tile row's four input
 * rows copied into ev (even columns) and od (odd columns), zeros outside x, so that element (e, b)
 * of the row's tiles is a contiguous run of ev[e] or od[e]); then the transform in place, one
 * vector loop over the chunk's tiles (16 loads and 16 stores along t), however few tiles a row has */
/* B^T d B of the tiles in vectors d0..d15 (d[4 e + k]: row e, column k), of vector type vt; plane
 * 4 a + b of the result stored at dst + (4 a + b) * xs + x */
static void put_tile_transform(GemmOut *o, const char *ind, const char *vt, const char *dst, ll xs)
{
    static const char *const op[4] = {"h0%d - h2%d", "h1%d + h2%d", "h2%d - h1%d", "h1%d - h3%d"};
    for (int e = 0; e < 4; e++) /* d B, row e */
        gemm_put(o, "%sconst %s h%d0 = d%d - d%d, h%d1 = d%d + d%d, h%d2 = d%d - d%d, h%d3 = d%d - d%d;\n", ind, vt, e,
            4 * e, 4 * e + 2, e, 4 * e + 1, 4 * e + 2, e, 4 * e + 2, 4 * e + 1, e, 4 * e + 1, 4 * e + 3);
    for (int b = 0; b < 4; b++) /* B^T (d B), column b */
        for (int a = 0; a < 4; a++) {
            char ex[32];
            snprintf(ex, sizeof ex, op[a], b, b);
            gemm_put(o, "%s{ const %s q = %s; memcpy(%s + %lld + x, &q, sizeof q); }\n", ind, vt, ex, dst, (4 * a + b) * xs);
        }
}

static void put_input(GemmOut *o, const GemmSpec *s, const Geo *g)
{
    const char *n = s->name;
    const GemmWindow *w = &s->win;
    ll tw1 = g->tw + 1, xs = g->C * g->tb, lo[2], hi[2];
    gemm_put(o, "static void %s_win(void *arg, int i)\n{\n    const %s_wjob *j = (const %s_wjob *)arg;\n", n, n, n);
    gemm_put(o, "    ptrdiff_t c = i * (ptrdiff_t)%lld / j->tasks, c1 = (i + 1) * (ptrdiff_t)%lld / j->tasks, r, e, x;\n",
        g->C, g->C);
    gemm_put(o, "    T ev[4][%lld], od[4][%lld];\n", tw1, tw1);
    /* wl: tiles a row holds in whole vectors of 16, 8 or 4 (transformed a row at a time), else 0 */
    int es = s->dtype == GEMM_F32 ? 4 : 8, wl = g->tw % 16 == 0 ? 16 : g->tw % 8 == 0 ? 8 : g->tw % 4 == 0 ? 4 : 0;
    if (wl) gemm_put(o, "    typedef T W __attribute__((vector_size(%d)));\n", wl * es);
    else gemm_put(o, "    typedef T V __attribute__((vector_size(%d)));\n", 16 * es);
    gemm_put(o, "    for (; c < c1; c++) {\n        T *v = j->V + c * %lld;\n", g->tb);
    gemm_put(o, "        for (r = j->r0; r < j->r1; r++) {\n");
    gemm_put(o, "            const ptrdiff_t nn = r / %lld, ty = r %% %lld;\n", g->th, g->th);
    gemm_put(o, "            const T *xc = j->X + nn * %lld + c * %lld;\n", (ll)w->sx_n, (ll)w->sx_c);
    gemm_put(o, "            T *vr = v + (r - j->r0) * %lld;\n", g->tw);
    gemm_put(o, "            for (e = 0; e < 4; e++) {\n");
    gemm_put(o, "                const ptrdiff_t y = 2 * ty + e - %lld;\n", g->ph);
    gemm_put(o, "                const T *row = xc + y * %lld;\n", (ll)w->sx_h);
    gemm_put(o, "                if (y < 0 || y >= %lld) {\n"
           "                    for (x = 0; x < %lld; x++) ev[e][x] = od[e][x] = 0;\n"
           "                    continue;\n                }\n",
        g->h, tw1);
    for (int par = 0; par < 2; par++) { /* column 2 x + par - pw */
        const char *a = par ? "od" : "ev";
        ll off = par - g->pw;
        valid_run(tw1, off, g->w, &lo[par], &hi[par]);
        gemm_put(o, "                for (x = 0; x < %lld; x++) %s[e][x] = 0;\n", lo[par], a);
        gemm_put(o, "                for (x = %lld; x < %lld; x++) %s[e][x] = row[(2 * x + %lld) * %lld];\n", lo[par],
            hi[par], a, off, (ll)w->sx_w);
        gemm_put(o, "                for (x = %lld; x < %lld; x++) %s[e][x] = 0;\n", hi[par], tw1, a);
    }
    gemm_put(o, "            }\n");
    if (wl) {
        /* a tile row whose tiles are whole vectors of W: transformed from ev and od straight into V,
         * W tiles at a time (stage 1 of ResNet-18 on 32x32: the raw tiles' round trip through V,
         * which a 2 MB chunk takes out of the caches, would dominate this pass) */
        gemm_put(o, "            for (x = 0; x < %lld; x += %d) {\n", g->tw, wl);
        for (int e = 0; e < 4; e++) /* row e of the tiles: ev[e][x], od[e][x], ev[e][x + 1], od[e][x + 1] */
            for (int k = 0; k < 4; k++)
                gemm_put(o, "                W d%d;\n                memcpy(&d%d, &%s[%d][x%s], sizeof d%d);\n", 4 * e + k,
                    4 * e + k, k % 2 ? "od" : "ev", e, k < 2 ? "" : " + 1", 4 * e + k);
        put_tile_transform(o, "                ", "W", "vr", xs);
        gemm_put(o, "            }\n");
    } else {
        for (int e = 0; e < 4; e++) {
            gemm_put(o, "            for (x = 0; x < %lld; x++) vr[%lld + x] = ev[%d][x];\n", g->tw, (4 * e + 0) * xs, e);
            gemm_put(o, "            for (x = 0; x < %lld; x++) vr[%lld + x] = od[%d][x];\n", g->tw, (4 * e + 1) * xs, e);
            gemm_put(o, "            for (x = 0; x < %lld; x++) vr[%lld + x] = ev[%d][x + 1];\n", g->tw, (4 * e + 2) * xs, e);
            gemm_put(o, "            for (x = 0; x < %lld; x++) vr[%lld + x] = od[%d][x + 1];\n", g->tw, (4 * e + 3) * xs, e);
        }
    }
    gemm_put(o, "        }\n");
    /* the padding tiles of the chunk: zeros, so the GEMM reads no uninitialised memory */
    gemm_put(o, "        for (e = 0; e < 16; e++)\n            for (x = (j->r1 - j->r0) * %lld; x < %lld; x++) v[e * %lld + x] = 0;\n",
        g->tw, g->tb, xs);
    if (!wl) {
        /* the raw tiles transformed in place, in straight-line code on vectors of 16 (gcc -O2 neither
         * unrolls the small loops nor vectorises around them, and took 16-byte vectors for this
         * loop); tb is a multiple of 16 */
        gemm_put(o, "        for (x = 0; x < %lld; x += 16) {\n", g->tb);
        for (int e = 0; e < 16; e++)
            gemm_put(o, "            V d%d;\n            memcpy(&d%d, v + %lld + x, sizeof d%d);\n", e, e, e * xs, e);
        put_tile_transform(o, "            ", "V", "v", xs);
        gemm_put(o, "        }\n");
    }
    gemm_put(o, "    }\n}\n");
}

/* pass 1 of the output transform on the element (k, t) of M (vt "T") or on 16 along M's rows (vt "V") */
static void put_out_a(GemmOut *o, const Geo *g, ll ms_k, ll ms_t, ll mx, const char *vt)
{
    (void)g;
    gemm_put(o, "            T *m = j->M + k * %lld + t * %lld;\n", ms_k, ms_t);
    for (int e = 0; e < 16; e++)
        gemm_put(o, "            %s m%d;\n            memcpy(&m%d, m + %lld, sizeof m%d);\n", vt, e, e, e * mx, e);
    for (int b = 0; b < 4; b++) /* A^T M, column b */
        gemm_put(o, "            const %s q0%d = m%d + m%d + m%d, q1%d = m%d - m%d - m%d;\n", vt, b, b, 4 + b, 8 + b, b, 4 + b,
            8 + b, 12 + b);
    for (int a = 0; a < 2; a++) { /* (A^T M) A, row a */
        gemm_put(o, "            { const %s y = q%d0 + q%d1 + q%d2; memcpy(m + %lld, &y, sizeof y); }\n", vt, a, a, a, 2 * a * mx);
        gemm_put(o, "            { const %s y = q%d1 - q%d2 - q%d3; memcpy(m + %lld, &y, sizeof y); }\n", vt, a, a, a,
            (2 * a + 1) * mx);
    }
}

/* C = A^T M A of the chunk's tiles for the output channels of task i, in two passes: the 2x2
 * outputs y of each (channel, tile) into M's planes 0-3 in place (one vector loop along M's
 * contiguous dim: tiles, or channels where the GEMM ran transposed); then per channel and tile row
 * its two output rows, interleaved from the planes, into C with bias and act; then the epilogue on
 * the channel's columns of the chunk */
static void put_output(GemmOut *o, const GemmSpec *s, const Geo *g)
{
    const char *n = s->name;
    ll ms_k = g->tr ? 1 : g->tb, ms_t = g->tr ? g->K : 1, mx = g->K * g->tb;
    gemm_put(o, "static void %s_wout(void *arg, int i)\n{\n    const %s_wjob *j = (const %s_wjob *)arg;\n", n, n, n);
    gemm_put(o, "    const ptrdiff_t k0 = i * (ptrdiff_t)%lld / j->tasks, k1 = (i + 1) * (ptrdiff_t)%lld / j->tasks;\n", g->K,
        g->K);
    gemm_put(o, "    const ptrdiff_t nt = (j->r1 - j->r0) * %lld;\n    ptrdiff_t k, t, r, x;\n", g->tw);
    /* the columns of C the chunk's tile rows [r0, r1) complete: output rows 2 ty (clipped) of image r / th */
    gemm_put(o, "    const ptrdiff_t col0 = j->r0 / %lld * %lld + (2 * (j->r0 %% %lld) < %lld ? 2 * (j->r0 %% %lld) : %lld) * %lld;\n",
        g->th, g->oh * g->ow, g->th, g->oh, g->th, g->oh, g->ow);
    gemm_put(o, "    const ptrdiff_t col1 = j->r1 / %lld * %lld + (2 * (j->r1 %% %lld) < %lld ? 2 * (j->r1 %% %lld) : %lld) * %lld;\n",
        g->th, g->oh * g->ow, g->th, g->oh, g->th, g->oh, g->ow);
    if (!s->epilogue) gemm_put(o, "    (void)col0, (void)col1;\n");
    gemm_put(o, "    typedef T V __attribute__((vector_size(%d)));\n", 16 * (s->dtype == GEMM_F32 ? 4 : 8));
    if (g->tr) { /* along k: 16 at a time, then one by one */
        gemm_put(o, "    for (t = 0; t < nt; t++) {\n        for (k = k0; k + 16 <= k1; k += 16) {\n");
        put_out_a(o, g, ms_k, ms_t, mx, "V");
        gemm_put(o, "        }\n        for (; k < k1; k++) {\n");
        put_out_a(o, g, ms_k, ms_t, mx, "T");
        gemm_put(o, "        }\n    }\n");
    } else { /* along t, 16 at a time: M's rows are tb long, a multiple of 16 */
        gemm_put(o, "    for (k = k0; k < k1; k++)\n        for (t = 0; t < nt; t += 16) {\n");
        put_out_a(o, g, ms_k, ms_t, mx, "V");
        gemm_put(o, "        }\n");
    }
    gemm_put(o, "    for (k = k0; k < k1; k++) {\n");
    gemm_put(o, "        for (r = j->r0; r < j->r1; r++) {\n");
    gemm_put(o, "            const ptrdiff_t nn = r / %lld, oy = 2 * (r %% %lld), col = nn * %lld + oy * %lld;\n", g->th,
        g->th, g->oh * g->ow, g->ow);
    gemm_put(o, "            const T *y = j->M + k * %lld + (r - j->r0) * %lld;\n", ms_k, g->tw * ms_t);
    gemm_put(o, "            T *c0 = j->C + k * %lld + col;\n", g->N);
    gemm_put(o, "            for (x = 0; x < %lld; x++) {\n", g->ow / 2);
    gemm_put(o, "                c0[2 * x] = %s_fin(j, y[x * %lld], col + 2 * x);\n", n, ms_t);
    gemm_put(o, "                c0[2 * x + 1] = %s_fin(j, y[%lld + x * %lld], col + 2 * x + 1);\n            }\n", n, mx, ms_t);
    if (g->ow % 2) gemm_put(o, "            c0[%lld] = %s_fin(j, y[%lld], col + %lld);\n", g->ow - 1, n, (g->tw - 1) * ms_t, g->ow - 1);
    gemm_put(o, "            if (oy + 1 < %lld) {\n", g->oh);
    gemm_put(o, "                for (x = 0; x < %lld; x++) {\n", g->ow / 2);
    gemm_put(o, "                    c0[%lld + 2 * x] = %s_fin(j, y[%lld + x * %lld], col + %lld + 2 * x);\n", g->ow, n, 2 * mx,
        ms_t, g->ow);
    gemm_put(o, "                    c0[%lld + 2 * x + 1] = %s_fin(j, y[%lld + x * %lld], col + %lld + 2 * x + 1);\n                }\n",
        g->ow, n, 3 * mx, ms_t, g->ow);
    if (g->ow % 2)
        gemm_put(o, "                c0[%lld] = %s_fin(j, y[%lld], col + %lld);\n", 2 * g->ow - 1, n, 2 * mx + (g->tw - 1) * ms_t,
            2 * g->ow - 1);
    gemm_put(o, "            }\n        }\n");
    if (s->epilogue) gemm_put(o, "        j->epi(j->eb, 0, k, k + 1, col0, col1);\n");
    gemm_put(o, "    }\n}\n");
}

/* C directly, in scalar loops: when the scratch cannot be had */
static void put_direct(GemmOut *o, const GemmSpec *s, const Geo *g)
{
    const char *n = s->name;
    const GemmWindow *w = &s->win;
    gemm_put(o, "static void %s_wdirect(const %s_wjob *j)\n{\n    ptrdiff_t k, col, c, a;\n", n, n);
    gemm_put(o, "    for (k = 0; k < %lld; k++)\n        for (col = 0; col < %lld; col++) {\n", g->K, g->N);
    gemm_put(o, "            const ptrdiff_t nn = col / %lld, oy = col / %lld %% %lld, ox = col %% %lld;\n", g->oh * g->ow,
        g->ow, g->oh, g->ow);
    gemm_put(o, "            T acc = 0;\n            for (c = 0; c < %lld; c++)\n                for (a = 0; a < 9; a++) {\n",
        g->C);
    gemm_put(o, "                    const ptrdiff_t y = oy + a / 3 - %lld, x = ox + a %% 3 - %lld;\n", g->ph, g->pw);
    gemm_put(o, "                    if (y >= 0 && y < %lld && x >= 0 && x < %lld)\n", g->h, g->w);
    gemm_put(o, "                        acc += j->A[k * %lld + (c * 9 + a) * %lld] * j->X[nn * %lld + c * %lld + y * %lld + x * %lld];\n",
        (ll)s->sa_m, (ll)s->sa_k, (ll)w->sx_n, (ll)w->sx_c, (ll)w->sx_h, (ll)w->sx_w);
    gemm_put(o, "                }\n            j->C[k * %lld + col] = %s_fin(j, acc, col);\n        }\n", g->N, n);
    if (s->epilogue) gemm_put(o, "    j->epi(j->eb, 0, 0, %lld, 0, %lld);\n", g->K, g->N);
    gemm_put(o, "}\n");
}

static void put_entry(GemmOut *o, const GemmSpec *s, const Geo *g)
{
    const char *n = s->name;
    size_t es = s->dtype == GEMM_F32 ? 4 : 8;
    /* U, V and M: in the scratch the caller lends (KnParallel.scratch), else in this unit's own, kept
     * from call to call and freed on unload (its allocation NAME_raw, from its first 64-byte boundary) */
    gemm_put(o, "static T *%s_scratch;\n", n);
    gemm_put(o, "static char *%s_raw;\n", n);
    gemm_put(o, "__attribute__((destructor)) static void %s_free(void)\n{\n    free(%s_raw);\n}\n", n, n);
    gemm_put(o, "void %s(void **b)\n{\n    %s_wjob j;\n", n, n);
    gemm_put(o, "    const %s_wpar *par = (const %s_wpar *)b[4];\n    %s_wpar inner;\n    void *g[5];\n    ptrdiff_t r0;\n"
           "    T *scr;\n", n, n, n);
    gemm_put(o, "    j.C = (T *)b[0], j.A = (const T *)b[1], j.X = (const T *)b[2], j.bias = %s;\n",
        s->bias ? "(const T *)b[3]" : "0");
    gemm_put(o, "    j.eb = %s;\n", s->epilogue ? "(void **)b[5]" : "0");
    if (s->epilogue) gemm_put(o, "    j.epi = b[6] ? (%s_epi_t)b[6] : %s;\n", n, s->epilogue);
    gemm_put(o, "    j.tasks = par && par->parallel_for && par->threads > 1 ? (par->threads < %d ? par->threads : %d) : 1;\n",
        MAXT, MAXT);
    /* one block: U, V, M (each from a multiple of 16 elements) */
    ll nu = (16 * g->K * g->C + 15) / 16 * 16, nv = (16 * g->C * g->tb + 15) / 16 * 16, nm = 16 * g->K * g->tb;
    unsigned long long bytes = (unsigned long long)((nu + nv + nm + 15) / 16 * 16 * (ll)es);
    gemm_put(o, "    scr = par && par->scratch ? (T *)par->scratch(par->owner, %lluu) : 0;\n", bytes);
    gemm_put(o, "    if (!scr && !%s_raw && (%s_raw = (char *)malloc(%lluu + 64)))\n", n, n, bytes);
    gemm_put(o, "        %s_scratch = (T *)(%s_raw + (64 - (size_t)%s_raw %% 64) %% 64);\n", n, n, n);
    gemm_put(o, "    if (!scr && !(scr = %s_scratch)) {\n        %s_wdirect(&j);\n        return;\n    }\n", n, n);
    gemm_put(o, "    j.U = scr, j.V = j.U + %lld, j.M = j.V + %lld;\n", nu, nv);
    if (s->ukeep) /* b[7]: U as NAME_upack wrote it, or NULL */
        gemm_put(o, "    if (b[7]) j.U = (T *)b[7];\n    else %s_wrun(par, &j, %s_wt);\n", n, n);
    else gemm_put(o, "    %s_wrun(par, &j, %s_wt);\n", n, n);
    /* the GEMM inside packs into scratch of its own: the lent one holds U, V and M */
    gemm_put(o, "    if (par) inner = *par, inner.scratch = 0;\n");
    gemm_put(o, "    g[0] = j.M, g[1] = %s, g[2] = %s, g[3] = 0, g[4] = par ? (void *)&inner : 0;\n", g->tr ? "j.V" : "j.U",
        g->tr ? "j.U" : "j.V");
    gemm_put(o, "    for (r0 = 0; r0 < %lld; r0 += %lld) {\n", g->rows, g->rpc);
    gemm_put(o, "        j.r0 = r0, j.r1 = r0 + %lld < %lld ? r0 + %lld : %lld;\n", g->rpc, g->rows, g->rpc, g->rows);
    gemm_put(o, "        %s_wrun(par, &j, %s_win);\n        %s_wg(g);\n        %s_wrun(par, &j, %s_wout);\n    }\n", n, n,
        n, n, n);
    gemm_put(o, "}\n");
    if (!s->ukeep) return;
    /* NAME_upack(A, dst): U's bytes (and with dst, U of A written there), one task as in a call's */
    gemm_put(o, "\nsize_t %s_upack(const void *A, void *dst)\n{\n    %s_wjob j;\n", n, n);
    gemm_put(o, "    if (dst) {\n        memset(&j, 0, sizeof j);\n");
    gemm_put(o, "        j.A = (const T *)A, j.U = (T *)dst, j.tasks = 1;\n        %s_wt(&j, 0);\n    }\n", n);
    gemm_put(o, "    return %lluu * sizeof(T);\n}\n", (unsigned long long)(16 * g->K * g->C));
}

int wino_valid(const GemmSpec *s)
{
    const GemmWindow *w = &s->win;
    return w->on && !w->t && w->kh == 3 && w->kw == 3 && w->sh == 1 && w->sw == 1 && w->dh == 1 && w->dw == 1 &&
           s->batch == 1 && s->K == 9 * w->c && s->N == w->n * w->oh * w->ow && strlen(s->name) < 40;
}

size_t wino_render(const GemmSpec *s, int dialect, char *buf, size_t cap)
{
    Geo g = geometry(s);
    char name[64];
    GemmOut o;
    snprintf(name, sizeof name, "%s_wg", s->name);
    GemmSpec in = inner_spec(s, &g, name);
    size_t head = gemm_render(&in, dialect, buf, cap);
    if (!head) return 0;
    o.buf = buf, o.cap = buf ? cap : 0, o.len = head;
    gemm_put(&o, "/* kiln winograd F(2x2,3x3) %s: C[%lld][%lld] = A . window, %lld -> %lld channels, %lld x %lld tiles "
            "of %lld images, %lld tile rows a chunk%s%s%s */\n",
        s->name, g.K, g.N, g.C, g.K, g.th, g.tw, g.n, g.rpc, g.tr ? ", transposed GEMM" : "",
        s->bias ? ", + bias[N]" : "", s->act == GEMM_ACT_RELU ? ", relu" : s->act ? ", gelu_tanh" : "");
    put_common(&o, s);
    put_weights(&o, s, &g);
    put_input(&o, s, &g);
    put_output(&o, s, &g);
    put_direct(&o, s, &g);
    put_entry(&o, s, &g);
    return o.len;
}
