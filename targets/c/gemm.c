/*
 * gemm.c — targets/c: the GEMM template (gemm.h). Renders one spec to one C
 * unit, with every size and stride a literal so the compiler folds them.
 *
 * GEMM_SCALAR is TinyCC-safe C99. GEMM_SIMD is GNU C (vector extensions,
 * target attributes, __builtin_cpu_supports): one copy of the packing
 * routines, micro-kernel and column-range driver per ISA (Isa below), the
 * micro-kernel rendered fully unrolled over its MR x NV vector accumulators.
 *
 * Blocking (per ISA, f32; f64 halves the lanes, not the blocks): KC = 256
 * (a KC x NR micro-panel of B is 16 KiB with AVX2: L1), MC 96-128 rows (an
 * MC x KC block of A is ~100-128 KiB: L2; on the shared 2-core Zen 3, MC
 * from 48 to 240 and KC 256 to 512 were within noise of each other),
 * NC = 4096 (B's packed block 4 MiB: L3). The C tile is prefetched before
 * the K loop (a few % at 1024-2048). K and M blocks are balanced (K = 300
 * gives two blocks of 150, not 256 + 44), then shrunk to the problem, so
 * small GEMMs have small scratch.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gemm.h"

void gemm_put(GemmOut *o, const char *fmt, ...)
{
    va_list ap;
    char *dst = o->len < o->cap ? o->buf + o->len : NULL;
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (n > 0) o->len += (size_t)n;
}

typedef long long ll;

static ll ceil_div(ll a, ll b) { return (a + b - 1) / b; }
static ll round_up(ll a, ll b) { return ceil_div(a, b) * b; }
static ll min_ll(ll a, ll b) { return a < b ? a : b; }
static ll abs_ll(ll a) { return a < 0 ? -a : a; }

/* the epilogue's activation as a scalar statement on x (x of type T) */
void gemm_put_act(GemmOut *o, const GemmSpec *s, const char *x)
{
    const char *f = s->dtype == GEMM_F32 ? "f" : "";
    if (s->act == GEMM_ACT_RELU)
        gemm_put(o, "%s = %s < 0 ? (T)0 : %s;", x, x, x);
    else if (s->act == GEMM_ACT_GELU_TANH)
        gemm_put(o, "%s = (T)0.5 * %s * ((T)1 + tanh%s((T)0.7978845608028654 * (%s + (T)0.044715 * %s * %s * %s)));",
            x, x, f, x, x, x, x);
}

static void put_head(GemmOut *o, const GemmSpec *s, const char *dialect)
{
    gemm_put(o, "/* kiln gemm %s (%s): C[%lld][%lld][%lld] = A . B, A strides (%lld, %lld, %lld), "
           "B strides (%lld, %lld, %lld)%s%s */\n",
        s->name, dialect, (ll)s->batch, (ll)s->M, (ll)s->N, (ll)s->sa_b, (ll)s->sa_m, (ll)s->sa_k,
        (ll)s->sb_b, (ll)s->sb_k, (ll)s->sb_n, s->bias ? ", + bias[N]" : "",
        s->act == GEMM_ACT_RELU ? ", relu" : s->act == GEMM_ACT_GELU_TANH ? ", gelu_tanh" : "");
    gemm_put(o, "#include <math.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <string.h>\n");
    gemm_put(o, "typedef %s T;\n", s->dtype == GEMM_F32 ? "float" : "double");
    if (!s->epilogue) return;
    gemm_put(o, "void %s(void **b, int64_t t, int64_t m0, int64_t m1, int64_t n0, int64_t n1);\n", s->epilogue);
    gemm_put(o, "typedef void (*%s_epi_t)(void **, int64_t, int64_t, int64_t, int64_t, int64_t);\n", s->name);
    gemm_put(o, "static %s_epi_t %s_epi; /* this call's: b[6], or %s */\n", s->name, s->name, s->epilogue);
}

/* the entry's epilogue: b[6] when the caller gives one (dots of one shape
 * sharing a unit, each with its own epilogue), else the named one */
static void put_epi(GemmOut *o, const GemmSpec *s)
{
    if (s->epilogue) gemm_put(o, "    %s_epi = b[6] ? (%s_epi_t)b[6] : %s;\n", s->name, s->name, s->epilogue);
}

/* ---- B as a convolution's window view (GemmWindow, src/target.h) ----
 * im2col on the fly: the packing reads the input x through the window's
 * index arithmetic, so no im2col buffer exists. */

/* NAME_bw(X, k, i): B[k][i] of the window over X (this batch's x) */
static void put_win_elem(GemmOut *o, const GemmSpec *s, const char *at)
{
    const GemmWindow *w = &s->win;
    gemm_put(o, "%sstatic inline T %s_bw(const T *X, ptrdiff_t k, ptrdiff_t i)\n{\n", at, s->name);
    gemm_put(o, "    const ptrdiff_t r = %s, j = %s; /* r: (c, ky, kx), j: (n, oy, ox) */\n", w->t ? "i" : "k",
        w->t ? "k" : "i");
    gemm_put(o, "    const ptrdiff_t y = j / %lld %% %lld * %lld + r / %lld %% %lld * %lld - %lld;\n", (ll)w->ow, (ll)w->oh,
        (ll)w->sh, (ll)w->kw, (ll)w->kh, (ll)w->dh, (ll)w->ph);
    gemm_put(o, "    const ptrdiff_t x = j %% %lld * %lld + r %% %lld * %lld - %lld;\n", (ll)w->ow, (ll)w->sw, (ll)w->kw,
        (ll)w->dw, (ll)w->pw);
    gemm_put(o, "    if (y < 0 || y >= %lld || x < 0 || x >= %lld) return 0;\n", (ll)w->h, (ll)w->w);
    gemm_put(o, "    return X[j / %lld * %lld + r / %lld * %lld + y * %lld + x * %lld];\n}\n", (ll)(w->oh * w->ow),
        (ll)w->sx_n, (ll)(w->kh * w->kw), (ll)w->sx_c, (ll)w->sx_h, (ll)w->sx_w);
}

/* NAME_ISA_wseg(X, d, ds, cnt, j, r): d[e*ds] = window(r, j + e) for e < cnt,
 * a run of columns cut at each output row: the zeros of the padding are
 * stored as zeros and the rest is a strided copy (a contiguous one at
 * stride 1), with no test per element. */
static void put_win_seg(GemmOut *o, const GemmSpec *s, const char *n, const char *id, const char *at)
{
    const GemmWindow *w = &s->win;
    gemm_put(o, "%sstatic inline void %s_%s_wseg(const T *X, T *d, ptrdiff_t ds, ptrdiff_t cnt, ptrdiff_t j, ptrdiff_t r)\n{\n",
        at, n, id);
    gemm_put(o, "    const ptrdiff_t hb = r / %lld %% %lld * %lld - %lld, wb = r %% %lld * %lld - %lld;\n", (ll)w->kw,
        (ll)w->kh, (ll)w->dh, (ll)w->ph, (ll)w->kw, (ll)w->dw, (ll)w->pw);
    gemm_put(o, "    ptrdiff_t nn = j / %lld, oy = j / %lld %% %lld, ox = j %% %lld, e;\n", (ll)(w->oh * w->ow), (ll)w->ow,
        (ll)w->oh, (ll)w->ow);
    /* ox*sw + wb in [0, w) for ox in [xlo, xhi): the valid columns of every row */
    gemm_put(o, "    ptrdiff_t xlo = wb >= 0 ? 0 : (-wb + %lld) / %lld, xhi = %lld - wb <= 0 ? 0 : (%lld - wb + %lld) / %lld;\n",
        (ll)(w->sw - 1), (ll)w->sw, (ll)w->w, (ll)(w->w - 1), (ll)w->sw, (ll)w->sw);
    gemm_put(o, "    X += r / %lld * %lld;\n", (ll)(w->kh * w->kw), (ll)w->sx_c);
    gemm_put(o, "    if (xhi > %lld) xhi = %lld;\n    if (xlo > xhi) xlo = xhi;\n", (ll)w->ow, (ll)w->ow);
    gemm_put(o, "    while (cnt > 0) {\n");
    gemm_put(o, "        const ptrdiff_t seg = cnt < %lld - ox ? cnt : %lld - ox, y = oy * %lld + hb;\n", (ll)w->ow,
        (ll)w->ow, (ll)w->sh);
    gemm_put(o, "        if (y < 0 || y >= %lld)\n            for (e = 0; e < seg; e++) d[e * ds] = 0;\n", (ll)w->h);
    gemm_put(o, "        else {\n");
    gemm_put(o, "            const T *src = X + nn * %lld + y * %lld;\n", (ll)w->sx_n, (ll)w->sx_h);
    gemm_put(o, "            ptrdiff_t lo = xlo - ox, hi = xhi - ox;\n");
    gemm_put(o, "            lo = lo < 0 ? 0 : lo > seg ? seg : lo;\n            hi = hi < lo ? lo : hi > seg ? seg : hi;\n");
    gemm_put(o, "            for (e = 0; e < lo; e++) d[e * ds] = 0;\n");
    gemm_put(o, "            for (e = lo; e < hi; e++) d[e * ds] = src[((ox + e) * %lld + wb) * %lld];\n", (ll)w->sw,
        (ll)w->sx_w);
    gemm_put(o, "            for (e = hi; e < seg; e++) d[e * ds] = 0;\n        }\n");
    gemm_put(o, "        d += seg * ds, cnt -= seg, ox += seg;\n");
    gemm_put(o, "        if (ox == %lld) {\n            ox = 0;\n            if (++oy == %lld) oy = 0, nn++;\n        }\n    }\n}\n",
        (ll)w->ow, (ll)w->oh);
}

/* ---- scalar dialect ---- */

enum { SMR = 4, SNR = 8 };

static void render_scalar(GemmOut *o, const GemmSpec *s)
{
    put_head(o, s, "scalar");
    if (s->win.on) put_win_elem(o, s, "");
    gemm_put(o, "void %s(void **b)\n{\n", s->name);
    gemm_put(o, "    T *C = (T *)b[0];\n    const T *A = (const T *)b[1];\n    const T *B = (const T *)b[2];\n");
    if (s->epilogue) gemm_put(o, "    void **eb = (void **)b[5];\n");
    put_epi(o, s);
    if (s->bias) gemm_put(o, "    const T *bias = (const T *)b[3];\n");
    gemm_put(o, "    ptrdiff_t t, i, j, k, ii, jj, mi, nj;\n    T acc[%d][%d];\n", SMR, SNR);
    gemm_put(o, "    for (t = 0; t < %lld; t++) {\n", (ll)s->batch);
    gemm_put(o, "        const T *a = A + t * %lld;\n        const T *bb = B + t * %lld;\n"
           "        T *c = C + t * %lld;\n",
        (ll)s->sa_b, (ll)s->sb_b, (ll)s->M * s->N);
    gemm_put(o, "        for (i = 0; i < %lld; i += %d) {\n", (ll)s->M, SMR);
    gemm_put(o, "            mi = %lld - i < %d ? %lld - i : %d;\n", (ll)s->M, SMR, (ll)s->M, SMR);
    gemm_put(o, "            for (j = 0; j < %lld; j += %d) {\n", (ll)s->N, SNR);
    gemm_put(o, "                nj = %lld - j < %d ? %lld - j : %d;\n", (ll)s->N, SNR, (ll)s->N, SNR);
    gemm_put(o, "                for (ii = 0; ii < %d; ii++)\n"
           "                    for (jj = 0; jj < %d; jj++) acc[ii][jj] = 0;\n", SMR, SNR);
    gemm_put(o, "                for (k = 0; k < %lld; k++) {\n", (ll)s->K);
    gemm_put(o, "                    const T *brow = bb + k * %lld + j * %lld;\n", (ll)s->sb_k, (ll)s->sb_n);
    if (s->win.on) gemm_put(o, "                    (void)brow;\n");
    gemm_put(o, "                    for (ii = 0; ii < mi; ii++) {\n");
    gemm_put(o, "                        const T av = a[(i + ii) * %lld + k * %lld];\n", (ll)s->sa_m, (ll)s->sa_k);
    if (s->win.on)
        gemm_put(o, "                        for (jj = 0; jj < nj; jj++) acc[ii][jj] += av * %s_bw(bb, k, j + jj);\n",
            s->name);
    else
        gemm_put(o, "                        for (jj = 0; jj < nj; jj++) acc[ii][jj] += av * brow[jj * %lld];\n",
            (ll)s->sb_n);
    gemm_put(o, "                    }\n                }\n");
    gemm_put(o, "                for (ii = 0; ii < mi; ii++)\n                    for (jj = 0; jj < nj; jj++) {\n");
    gemm_put(o, "                        T x = acc[ii][jj];\n");
    if (s->bias) gemm_put(o, "                        x += bias[j + jj];\n");
    if (s->act) {
        gemm_put(o, "                        ");
        gemm_put_act(o, s, "x");
        gemm_put(o, "\n");
    }
    gemm_put(o, "                        c[(i + ii) * %lld + j + jj] = x;\n", (ll)s->N);
    gemm_put(o, "                    }\n");
    if (s->epilogue) gemm_put(o, "                %s_epi(eb, t, i, i + mi, j, j + nj);\n", s->name);
    gemm_put(o, "            }\n        }\n    }\n}\n");
}

/* ---- runtime dialect: a call into the library's GEMM (src/gemm_rt.h) ---- */

/* The unit declares KnRtGemm itself, once per source (it includes nothing of kiln's); it must match
 * src/gemm_rt.h field for field, and KnRtPar KnParallel (gemm.h). The epilogue runs once per batch on
 * the whole of C, after the GEMM: every tile is final by then.
 *
 * lent (GEMM_LENT, and spec.wino 2 in the SIMD dialects: backend c): the product is the library's
 * GEMM, or its kn_rt_conv, through the function b[4] lends (KnParallel.gemm, .conv), since a unit
 * compiled by cc links nothing of kiln's; without it, NAME_direct, the scalar dialect's product
 * (rendered first). */
static void render_runtime(GemmOut *o, const GemmSpec *s, int lent)
{
    const char *n = s->name;
    if (lent) {
        GemmSpec d = *s;
        char name[64];
        snprintf(name, sizeof name, "%s_direct", n);
        d.name = name, d.wino = 0;
        render_scalar(o, &d);
    }
    gemm_put(o, "/* kiln gemm %s (runtime): C[%lld][%lld][%lld] = A . B through %s%s */\n", n, (ll)s->batch, (ll)s->M,
        (ll)s->N, lent ? (s->wino ? "the library's kn_rt_conv, lent" : "the library's kn_rt_gemm, lent")
                       : s->wino ? "kn_rt_conv" : "kn_rt_gemm",
        s->win.on && s->win.t ? " (a weights' gradient)" : "");
    gemm_put(o, "#include <stddef.h>\n#include <stdint.h>\n");
    gemm_put(o, "#ifndef KN_RT_GEMM\n#define KN_RT_GEMM\n"
           "typedef struct KnRtGemm {\n    void *C;\n    const void *A, *B, *bias;\n    int64_t batch, M, N, K;\n"
           "    int64_t sa_b, sa_m, sa_k;\n    int64_t sb_b, sb_k, sb_n;\n    int dtype, act;\n"
           "    int (*parallel_for)(int n, void (*fn)(void *arg, int i), void *arg);\n    int threads;\n"
           "    void *work;\n    size_t work_bytes;\n    const int64_t *win;\n    const void *wino_u;\n} KnRtGemm;\n"
           "typedef struct {\n    int (*parallel_for)(int, void (*)(void *, int), void *);\n    int threads;\n"
           "    void *(*scratch)(void *, size_t);\n    void *owner;\n    void (*conv)(const KnRtGemm *);\n"
           "    size_t (*conv_work)(const KnRtGemm *);\n    void (*gemm)(const KnRtGemm *);\n"
           "} KnRtPar; /* KnParallel */\n"
           "typedef void (*KnRtEpi)(void **, int64_t, int64_t, int64_t, int64_t, int64_t);\n"
           "void kn_rt_gemm(const KnRtGemm *g);\nsize_t kn_rt_conv_work(const KnRtGemm *g);\n"
           "void kn_rt_conv(const KnRtGemm *g);\n#endif\n");
    if (s->epilogue) gemm_put(o, "void %s(void **b, int64_t t, int64_t m0, int64_t m1, int64_t n0, int64_t n1);\n", s->epilogue);
    if (lent) gemm_put(o, "void %s_direct(void **b);\n", n);
    gemm_put(o, "void %s(void **b)\n{\n    KnRtGemm g;\n    const KnRtPar *par = (const KnRtPar *)b[4];\n", n);
    if (lent)
        gemm_put(o, "    if (!par || !par->%s) {\n        %s_direct(b);\n        return;\n    }\n", s->wino ? "conv" : "gemm", n);
    if (s->win.on) {
        const GemmWindow *w = &s->win;
        gemm_put(o, "    static const int64_t win[19] = {%d, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, "
               "%lld, %lld, %lld, %lld, %lld, %lld, %lld};\n",
            w->t, (ll)w->n, (ll)w->c, (ll)w->h, (ll)w->w, (ll)w->kh, (ll)w->kw, (ll)w->oh, (ll)w->ow, (ll)w->sh,
            (ll)w->sw, (ll)w->dh, (ll)w->dw, (ll)w->ph, (ll)w->pw, (ll)w->sx_n, (ll)w->sx_c, (ll)w->sx_h, (ll)w->sx_w);
    }
    gemm_put(o, "    g.C = b[0], g.A = b[1], g.B = b[2], g.bias = %s;\n", s->bias ? "b[3]" : "0");
    gemm_put(o, "    g.batch = %lld, g.M = %lld, g.N = %lld, g.K = %lld;\n", (ll)s->batch, (ll)s->M, (ll)s->N, (ll)s->K);
    gemm_put(o, "    g.sa_b = %lld, g.sa_m = %lld, g.sa_k = %lld;\n", (ll)s->sa_b, (ll)s->sa_m, (ll)s->sa_k);
    gemm_put(o, "    g.sb_b = %lld, g.sb_k = %lld, g.sb_n = %lld;\n", (ll)s->sb_b, (ll)s->sb_k, (ll)s->sb_n);
    gemm_put(o, "    g.dtype = %d, g.act = %d;\n", s->dtype, s->act);
    gemm_put(o, "    g.parallel_for = par ? par->parallel_for : 0, g.threads = par ? par->threads : 1;\n");
    gemm_put(o, "    g.work = 0, g.work_bytes = 0, g.win = %s, g.wino_u = %s;\n", s->win.on ? "win" : "0",
        s->ukeep ? "b[7]" : "0"); /* b[7]: the weights' transform kept (kn_rt_wino_upack), or NULL */
    if (lent && s->wino) /* kn_rt_conv in the scratch b[4] lends (computing directly without it) */
        gemm_put(o, "    g.work_bytes = par->conv_work(&g);\n"
               "    if (g.work_bytes && par->scratch) g.work = par->scratch(par->owner, g.work_bytes);\n"
               "    par->conv(&g);\n");
    else if (lent) gemm_put(o, "    par->gemm(&g);\n");
    else if (s->wino)
        gemm_put(o, "    g.work_bytes = kn_rt_conv_work(&g);\n"
               "    if (g.work_bytes && par && par->scratch) g.work = par->scratch(par->owner, g.work_bytes);\n"
               "    kn_rt_conv(&g);\n");
    else gemm_put(o, "    kn_rt_gemm(&g);\n");
    if (s->epilogue)
        gemm_put(o, "    {\n        KnRtEpi epi = b[6] ? (KnRtEpi)b[6] : %s;\n        int64_t t;\n"
               "        for (t = 0; t < %lld; t++) epi((void **)b[5], t, 0, %lld, 0, %lld);\n    }\n",
            s->epilogue, (ll)s->batch, (ll)s->M, (ll)s->N);
    gemm_put(o, "}\n");
}

/* ---- SIMD dialect ---- */

typedef struct {
    const char *id;   /* suffix of every name of this copy */
    const char *attr; /* function attribute text, "" for none */
    int vbytes;       /* vector size */
    int mr, nv;       /* tile: mr rows x nv vectors */
    int mc, kc, nc;   /* cache blocks (before shrinking to the problem) */
    const char *fma32, *fma64; /* the micro-kernel's fused multiply-add, a macro body on (a, b, c) for
                                * c + a * b, or NULL: a multiply, then an add */
} Isa;

/* The micro-kernel fuses its multiply-adds where the ISA has FMA, through the compiler's builtins
 * (gcc and clang name them alike; immintrin.h would add ~0.25 s to every unit's compile). The unit
 * is compiled with -ffp-contract=off (targets/c/c.c), so without them each multiply-add is two
 * instructions: on the 2-core Zen 4 the cnn's forward, ~85% in these kernels, took 1.35x the CPU
 * time with AVX-512 multiply, then add. A fused product is rounded once, so these copies no longer
 * agree bit for bit with the base copy or the library's GEMM (src/gemm_rt.c); each is within the
 * tolerance of the reference, and each still equals itself across thread counts. */
static const Isa isa_avx512 = {"avx512", "__attribute__((target(\"avx512f\"))) ", 64, 8, 2, 128, 256, 4096,
                               "__builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)-1, 4)",
                               "__builtin_ia32_vfmaddpd512_mask(a, b, c, (unsigned char)-1, 4)"};
static const Isa isa_avx2 = {"avx2", "__attribute__((target(\"avx2,fma\"))) ", 32, 6, 2, 96, 256, 4096,
                             "__builtin_ia32_vfmaddps256(a, b, c)", "__builtin_ia32_vfmaddpd256(a, b, c)"};
static const Isa isa_base = {"base", "", 16, 6, 2, 96, 256, 4096, NULL, NULL};

/* Threads (b[4]): a task per run of whole NR-column blocks, at most MAXT
 * tasks, and only for batch * M * N * K >= PAR_WORK: below that waking
 * the pool costs more than it saves (2 threads on the 2-core Zen 3: 64^3
 * took 0.024 ms against 0.010 on one, 128^3 0.047 against 0.056). */
enum { MAXT = 16 };
#define PAR_WORK (1LL << 20)

/* A threaded run splits N, so each task packs all of A for its columns alone: with few columns per
 * task, packing A is a large part of its work (ResNet-18's stage 4: M = 512 channels, K = 4608, N =
 * 256 columns, 128 per thread; each thread packed all 9.4 MB of the weights, from memory). So when a
 * task of a 2-task split would have at most SHARE_COLS columns, the tasks first pack A together,
 * each a run of its row panels, into one buffer of every K block (NAME_<isa>_sap, at most SHARE_MAX
 * elements), and then split N reading it: A is packed once per call. Only where A is the same for
 * every batch index (batch 1 or batch stride 0), and only where A's rows run along K (|sa_k| <=
 * |sa_m|, as a convolution's weights and a linear's input do): that packing stores one element at a
 * time across the panel, the costly part. A stored the other way (a transposed operand: the input
 * gradient's W^T) packs with contiguous loads and stores, and the tasks reading the same A at once
 * hit in the shared cache; there the extra buffer's traffic made the call slower (M 4608, K 512, N
 * 256 at 2 threads: 0.84x), where the row-major shapes gained 1.02-1.27x. */
/* SHARE_COLS: packing stores one element per element of A where the micro-kernel does one vector
 * FMA per NR columns of it, so packing A costs about lanes / columns of a task's work (16 / 128 =
 * 12% for stage 4, 1/2 of it saved at 2 threads); beyond 256 columns the saving (< 3%) is within
 * what the second parallel_for and the buffer's traffic cost: M 64, K 16384, N 576 (a weight
 * gradient's, 288 columns) ran 0.88-0.95x shared on the loaded 2-core machine. */
enum { SHARE_COLS = 256 };
#define SHARE_MAX (1LL << 24)

/* ROWS: a product of one NR-column block (N <= NR: a classifier's last layer, 512 -> 10) has no
 * columns to split, and ran on one thread: the mlp's 10 columns padded to 32 took ~4% of its
 * one-thread time, ~8% of its wall time on 2 threads. There the tasks split the MR-row panels
 * instead, each packing its own A and all of B (NR columns), when the padded product (M x NR x K, the
 * work the tiles do) is at least PAR_WORK. As a column split, bitwise the one-thread result. */
typedef struct {
    int lanes, mr, nr;
    ll kc, mc, nc;      /* balanced, shrunk blocks */
    ll apack, bpack;    /* scratch elements */
    ll nb;              /* NR-column blocks */
    ll papack, pbpack;  /* threaded scratch: one slot per task, 64-byte aligned */
    ll mp;              /* MR-row panels */
    ll sapack;          /* threaded runs pack A once, into this many elements (SHARE_COLS), or 0 */
    ll npad;            /* N rounded up to whole NR-column panels: a K row of B kept packed (spec.bkeep) */
    ll rt;              /* one column block: threaded runs split the rows into at most rt tasks (ROWS), or 0 */
} Blocks;

static ll round16(ll a) { return round_up(a, 16); }

/* The packing scratch, in elements: one thread's ap and bp, or the threaded runs' pap, pbp and sap
 * from the same start (a call uses one or the other) */
static ll scratch_elems(const Blocks *b)
{
    ll one = round16(b->apack) + round16(b->bpack), par = b->papack + b->pbpack + b->sapack;
    return one > par ? one : par;
}

/* a task's B scratch when the column blocks are split over tasks tasks */
static ll task_bpack(const Blocks *b, ll tasks) { return round16(min_ll(b->nc, b->nr * ceil_div(b->nb, tasks)) * b->kc); }

static Blocks blocks(const GemmSpec *s, const Isa *isa)
{
    Blocks b;
    int es = s->dtype == GEMM_F32 ? 4 : 8;
    b.lanes = isa->vbytes / es;
    b.mr = isa->mr;
    b.nr = isa->nv * b.lanes;
    b.kc = ceil_div(s->K, ceil_div(s->K, s->kc > 0 ? s->kc : isa->kc));
    b.mc = round_up(ceil_div(s->M, ceil_div(s->M, s->mc > 0 ? s->mc : isa->mc)), b.mr);
    b.nc = min_ll(isa->nc, round_up(s->N, b.nr));
    b.apack = b.mc * b.kc;
    b.bpack = b.nc * b.kc;
    b.nb = ceil_div(s->N, b.nr);
    b.papack = round16(b.apack) * min_ll(MAXT, b.nb);
    b.pbpack = 16; /* no zero-sized arrays */
    for (ll t = 2; t <= min_ll(MAXT, b.nb); t++) b.pbpack = t * task_bpack(&b, t) > b.pbpack ? t * task_bpack(&b, t) : b.pbpack;
    b.mp = ceil_div(s->M, b.mr);
    b.npad = b.nb * b.nr;
    b.rt = b.nb == 1 && b.mp >= 2 ? min_ll(MAXT, b.mp) : 0;
    if (b.rt) { /* each row task packs its own A blocks and all of B's one block */
        b.papack = round16(b.apack) * b.rt;
        b.pbpack = round16(b.bpack) * b.rt;
    }
    b.sapack = 0;
    if ((s->batch == 1 || s->sa_b == 0) && abs_ll(s->sa_k) <= abs_ll(s->sa_m) && b.nb >= 2 &&
        b.nr * ceil_div(b.nb, 2) <= SHARE_COLS && b.mp * b.mr * s->K <= SHARE_MAX)
        b.sapack = round16(b.mp * b.mr * s->K);
    return b;
}

/* Task i of a threaded run computes the column blocks [i nb / tasks, (i+1) nb / tasks) with slot i of
 * the threaded scratch (and A from the shared pack, when bk->sapack: the same panels it would pack); NAME_<isa>_mt runs the tasks through b[4] and returns 1, or returns 0 (and does
 * nothing) when b[4] asks for one thread or the problem is too small to split. Tiles start at the same
 * multiples of NR and K is blocked the same as in one thread, so every element of C is computed by one
 * task with the same operations in the same order: the result is bitwise that of one thread. */
static void render_par(GemmOut *o, const GemmSpec *s, const Isa *isa, const Blocks *bk)
{
    const char *n = s->name, *id = isa->id, *at = isa->attr;
    ll work = (ll)s->batch * s->M * s->N * s->K;
    if (bk->sapack) {
        /* task i packs the row panels [i mp / tasks, (i+1) mp / tasks) of every K block into the shared
         * buffer: block (ic, pc) at pc * MP + ic * kc (MP = mp * MR), laid out as NAME_<isa>_cols packs it */
        gemm_put(o, "%sstatic void %s_%s_pack_task(void *arg, int i)\n{\n", at, n, id);
        gemm_put(o, "    const %s_job *j = (const %s_job *)arg;\n", n, n);
        gemm_put(o, "    ptrdiff_t r0 = %d * (i * (ptrdiff_t)%lld / j->tasks), r1 = %d * ((i + 1) * (ptrdiff_t)%lld / j->tasks), pc;\n",
            bk->mr, bk->mp, bk->mr, bk->mp);
        gemm_put(o, "    if (r1 > %lld) r1 = %lld;\n", (ll)s->M, (ll)s->M);
        gemm_put(o, "    for (pc = 0; r0 < r1 && pc < %lld; pc += %lld) {\n", (ll)s->K, bk->kc);
        gemm_put(o, "        const ptrdiff_t kc = %lld - pc < %lld ? %lld - pc : %lld;\n", (ll)s->K, bk->kc, (ll)s->K, bk->kc);
        gemm_put(o, "        %s_%s_pack_a(j->A, r0, r1 - r0, pc, kc, j->sap + pc * %lld + r0 * kc);\n    }\n}\n", n, id,
            bk->mp * bk->mr);
    }
    if (bk->rt) { /* one column block: task i computes the row panels [i mp / tasks, (i+1) mp / tasks) (ROWS) */
        ll padwork = (ll)s->batch * s->M * bk->npad * s->K;
        gemm_put(o, "%sstatic void %s_%s_rtask(void *arg, int i)\n{\n", at, n, id);
        gemm_put(o, "    const %s_job *j = (const %s_job *)arg;\n", n, n);
        gemm_put(o, "    ptrdiff_t m0 = %d * (i * (ptrdiff_t)%lld / j->tasks), "
               "m1 = %d * ((i + 1) * (ptrdiff_t)%lld / j->tasks);\n", bk->mr, bk->mp, bk->mr, bk->mp);
        gemm_put(o, "    %s_%s_cols(j->C, j->A, j->B, j->bias, 0, %lld, m0, m1 < %lld ? m1 : %lld, j->pap + i * %lld, "
               "j->pbp + i * %lld, 0, j->bk, j->eb);\n}\n",
            n, id, (ll)s->N, (ll)s->M, (ll)s->M, round16(bk->apack), round16(bk->bpack));
        gemm_put(o, "static int %s_%s_mt(T *C, const T *A, const T *B, const T *bias, const T *bk, const %s_par *par, "
               "void **eb, T *scr)\n{\n", n, id, n);
        gemm_put(o, "    %s_job j;\n", n);
        gemm_put(o, "    if (!par || !par->parallel_for || par->threads < 2 || %lld < %lld) return 0;\n", padwork, PAR_WORK);
        gemm_put(o, "    j.tasks = par->threads < %lld ? par->threads : %lld;\n", bk->rt, bk->rt);
        gemm_put(o, "    j.C = C, j.A = A, j.B = B, j.bias = bias, j.bk = bk, j.eb = eb, j.slot = 0;\n");
        gemm_put(o, "    j.pap = scr, j.pbp = scr + %lld, j.sap = 0;\n", bk->papack);
        gemm_put(o, "    par->parallel_for(j.tasks, %s_%s_rtask, &j);\n    return 1;\n}\n", n, id);
        return;
    }
    gemm_put(o, "%sstatic void %s_%s_task(void *arg, int i)\n{\n", at, n, id);
    gemm_put(o, "    const %s_job *j = (const %s_job *)arg;\n", n, n);
    gemm_put(o, "    ptrdiff_t n0 = %d * (i * (ptrdiff_t)%lld / j->tasks), n1 = %d * ((i + 1) * (ptrdiff_t)%lld / j->tasks);\n",
        bk->nr, bk->nb, bk->nr, bk->nb);
    gemm_put(o, "    %s_%s_cols(j->C, j->A, j->B, j->bias, n0, n1 < %lld ? n1 : %lld, 0, %lld, j->pap + i * %lld, "
           "j->pbp + i * j->slot, j->sap, j->bk, j->eb);\n}\n",
        n, id, (ll)s->N, (ll)s->N, (ll)s->M, round16(bk->apack));
    gemm_put(o, "static int %s_%s_mt(T *C, const T *A, const T *B, const T *bias, const T *bk, const %s_par *par, "
           "void **eb, T *scr)\n{\n", n, id, n);
    gemm_put(o, "    %s_job j;\n    ptrdiff_t cols;\n", n);
    gemm_put(o, "    if (!par || !par->parallel_for || par->threads < 2 || %lld < %lld) return 0;\n", work, PAR_WORK);
    gemm_put(o, "    j.tasks = par->threads < %lld ? par->threads : %lld;\n", min_ll(MAXT, bk->nb), min_ll(MAXT, bk->nb));
    gemm_put(o, "    if (j.tasks < 2) return 0;\n");
    gemm_put(o, "    cols = %d * ((%lld + j.tasks - 1) / j.tasks);\n", bk->nr, bk->nb);
    gemm_put(o, "    j.slot = ((cols < %lld ? cols : %lld) * %lld + 15) / 16 * 16;\n", bk->nc, bk->nc, bk->kc);
    gemm_put(o, "    j.C = C, j.A = A, j.B = B, j.bias = bias, j.bk = bk, j.eb = eb;\n");
    gemm_put(o, "    j.pap = scr, j.pbp = scr + %lld, j.sap = ", bk->papack);
    if (bk->sapack) gemm_put(o, "scr + %lld;\n", bk->papack + bk->pbpack);
    else gemm_put(o, "0;\n");
    if (bk->sapack) gemm_put(o, "    par->parallel_for(j.tasks, %s_%s_pack_task, &j);\n", n, id);
    gemm_put(o, "    par->parallel_for(j.tasks, %s_%s_task, &j);\n    return 1;\n}\n", n, id);
}

static void render_isa(GemmOut *o, const GemmSpec *s, const Isa *isa)
{
    Blocks bk = blocks(s, isa);
    const char *n = s->name, *id = isa->id, *at = isa->attr;
    const char *vi = s->dtype == GEMM_F32 ? "int32_t" : "int64_t";
    int mr = bk.mr, nr = bk.nr, nv = isa->nv, L = bk.lanes, i, v;
    const char *fma = s->dtype == GEMM_F32 ? isa->fma32 : isa->fma64;
    ll M = s->M, N = s->N, K = s->K;

    gemm_put(o, "\n/* ---- %s: %dx%d tile of %d-lane vectors; KC %lld, MC %lld, NC %lld ---- */\n", id, mr, nr, L,
        bk.kc, bk.mc, bk.nc);
    gemm_put(o, "#define %s_%s_APACK %lld\n#define %s_%s_BPACK %lld\n", n, id, bk.apack, n, id, bk.bpack);
    gemm_put(o, "typedef T %s_%s_v __attribute__((vector_size(%d)));\n", n, id, isa->vbytes);
    gemm_put(o, "typedef %s %s_%s_vi __attribute__((vector_size(%d)));\n", vi, n, id, isa->vbytes);
    if (fma) gemm_put(o, "#define %s_%s_fma(a, b, c) %s\n", n, id, fma);
    /* the packing scratch: ap and bp from its start in one thread, else pap, pbp and sap; lent by the
     * caller (KnParallel.scratch) or, where it lends none, this copy's own */
    gemm_put(o, "#define %s_%s_SCRATCH %lld\n#define %s_%s_BP %lld\n", n, id, scratch_elems(&bk), n, id, round16(bk.apack));
    gemm_put(o, "static T %s_%s_own[%s_%s_SCRATCH] __attribute__((aligned(64)));\n", n, id, n, id);
    gemm_put(o, "static T *%s_%s_scratch(const %s_par *par)\n{\n", n, id, n);
    gemm_put(o, "    T *s = par && par->scratch ? (T *)par->scratch(par->owner, sizeof(T) * %s_%s_SCRATCH) : 0;\n", n, id);
    gemm_put(o, "    return s ? s : %s_%s_own;\n}\n", n, id);

    /* pack A rows [ic, ic+mc), k [pc, pc+kc) into mr-row panels: ap[p*kc + k*mr + i] */
    gemm_put(o, "%sstatic void %s_%s_pack_a(const T *A, ptrdiff_t ic, ptrdiff_t mc, ptrdiff_t pc, ptrdiff_t kc, T *ap)\n{\n",
        at, n, id);
    gemm_put(o, "    ptrdiff_t p, i, k;\n    for (p = 0; p < mc; p += %d) {\n", mr);
    gemm_put(o, "        T *d = ap + p * kc;\n        ptrdiff_t m = mc - p < %d ? mc - p : %d;\n", mr, mr);
    if (abs_ll(s->sa_k) <= abs_ll(s->sa_m)) {
        gemm_put(o, "        for (i = 0; i < m; i++) {\n"
               "            const T *src = A + (ic + p + i) * %lld + pc * %lld;\n"
               "            for (k = 0; k < kc; k++) d[k * %d + i] = src[k * %lld];\n        }\n",
            (ll)s->sa_m, (ll)s->sa_k, mr, (ll)s->sa_k);
    } else {
        gemm_put(o, "        for (k = 0; k < kc; k++) {\n"
               "            const T *src = A + (ic + p) * %lld + (pc + k) * %lld;\n"
               "            for (i = 0; i < m; i++) d[k * %d + i] = src[i * %lld];\n        }\n",
            (ll)s->sa_m, (ll)s->sa_k, mr, (ll)s->sa_m);
    }
    gemm_put(o, "        for (i = m; i < %d; i++)\n            for (k = 0; k < kc; k++) d[k * %d + i] = 0;\n    }\n}\n",
        mr, mr);

    /* pack B k [pc, pc+kc), columns [jc, jc+nc) into nr-column panels: bp[q*kc + k*nr + j] */
    if (s->win.on) put_win_seg(o, s, n, id, at);
    gemm_put(o, "%sstatic void %s_%s_pack_b(const T *B, ptrdiff_t pc, ptrdiff_t kc, ptrdiff_t jc, ptrdiff_t nc, T *bp)\n{\n",
        at, n, id);
    gemm_put(o, "    ptrdiff_t q, j, k;\n    for (q = 0; q < nc; q += %d) {\n", nr);
    gemm_put(o, "        T *d = bp + q * kc;\n        ptrdiff_t w = nc - q < %d ? nc - q : %d;\n", nr, nr);
    if (s->win.on && !s->win.t) { /* row k: the window of kernel offset pc + k, along its columns */
        gemm_put(o, "        for (k = 0; k < kc; k++) {\n"
               "            %s_%s_wseg(B, d + k * %d, 1, w, jc + q, pc + k);\n"
               "            for (j = w; j < %d; j++) d[k * %d + j] = 0;\n        }\n",
            n, id, nr, nr, nr);
    } else if (s->win.on) { /* column j: the window of kernel offset jc + q + j, down its rows */
        gemm_put(o, "        for (j = 0; j < w; j++) %s_%s_wseg(B, d + j, %d, kc, pc, jc + q + j);\n"
               "        for (j = w; j < %d; j++)\n            for (k = 0; k < kc; k++) d[k * %d + j] = 0;\n",
            n, id, nr, nr, nr);
    } else if (s->sb_n == 1) { /* rows of B contiguous: a whole panel row is one copy (gcc -O2 left the
                                 * element loop scalar: 84% of a batched GEMM's packing, 9% of its time) */
        gemm_put(o, "        for (k = 0; k < kc; k++) {\n"
               "            const T *src = B + (pc + k) * %lld + jc + q;\n"
               "            if (w == %d)\n                memcpy(d + k * %d, src, sizeof(T) * %d);\n"
               "            else {\n                for (j = 0; j < w; j++) d[k * %d + j] = src[j];\n"
               "                for (; j < %d; j++) d[k * %d + j] = 0;\n            }\n        }\n",
            (ll)s->sb_k, nr, nr, nr, nr, nr, nr);
    } else if (abs_ll(s->sb_n) <= abs_ll(s->sb_k)) {
        gemm_put(o, "        for (k = 0; k < kc; k++) {\n"
               "            const T *src = B + (pc + k) * %lld + (jc + q) * %lld;\n"
               "            if (w == %d)\n                for (j = 0; j < %d; j++) d[k * %d + j] = src[j * %lld];\n"
               "            else {\n                for (j = 0; j < w; j++) d[k * %d + j] = src[j * %lld];\n"
               "                for (; j < %d; j++) d[k * %d + j] = 0;\n            }\n        }\n",
            (ll)s->sb_k, (ll)s->sb_n, nr, nr, nr, (ll)s->sb_n, nr, (ll)s->sb_n, nr, nr);
    } else {
        gemm_put(o, "        for (j = 0; j < w; j++) {\n"
               "            const T *src = B + pc * %lld + (jc + q + j) * %lld;\n"
               "            for (k = 0; k < kc; k++) d[k * %d + j] = src[k * %lld];\n        }\n"
               "        for (j = w; j < %d; j++)\n            for (k = 0; k < kc; k++) d[k * %d + j] = 0;\n",
            (ll)s->sb_k, (ll)s->sb_n, nr, (ll)s->sb_k, nr, nr);
    }
    gemm_put(o, "    }\n}\n");
    if (s->bkeep) {
        /* all of B kept packed: K block pc at pc * NPAD, its panel of columns [q, q + NR) at q * kc, each
         * laid out as pack_b lays out a block, so a column range's block is a pointer into it */
        gemm_put(o, "#define %s_%s_BKEEP %lld\n", n, id, (ll)s->K * bk.npad);
        gemm_put(o, "%sstatic void %s_%s_bpack(const T *B, T *d)\n{\n    ptrdiff_t pc;\n", at, n, id);
        gemm_put(o, "    for (pc = 0; pc < %lld; pc += %lld)\n", (ll)s->K, bk.kc);
        gemm_put(o, "        %s_%s_pack_b(B, pc, %lld - pc < %lld ? %lld - pc : %lld, 0, %lld, d + pc * %lld);\n}\n", n, id,
            (ll)s->K, bk.kc, (ll)s->K, bk.kc, (ll)s->N, bk.npad);
    }

    /* micro-kernel: c[mr x nr] (row stride ldc) = (first ? 0 : c) + a-panel . b-panel; on last,
     * + bias[0..nr) if bias, relu if the spec says so (gelu is applied by the caller). Not
     * inlined: its two calls (whole tiles, edge tiles) would be two copies of the largest code of
     * the unit, 15% of cc's time on a unit, for one call per kc multiply-adds of a tile. */
    gemm_put(o, "%s__attribute__((noinline)) static void %s_%s_ukr(ptrdiff_t kc, const T *a, const T *b, T *c, "
           "ptrdiff_t ldc, int first, int last, const T *bias)\n{\n",
        at, n, id);
    gemm_put(o, "    typedef %s_%s_v V;\n", n, id);
    gemm_put(o, "    ptrdiff_t k;\n    V");
    for (i = 0; i < mr; i++)
        for (v = 0; v < nv; v++) gemm_put(o, "%s c%d_%d = {0}", i || v ? "," : "", i, v);
    gemm_put(o, ";\n");
    /* the C tile is read or written after the loop: start fetching its lines now */
    for (i = 0; i < mr; i++)
        gemm_put(o, "    __builtin_prefetch(c + %d * ldc, 1);\n    __builtin_prefetch(c + %d * ldc + %d, 1);\n", i, i, nr - 1);
    gemm_put(o, "    for (k = 0; k < kc; k++) {\n");
    for (v = 0; v < nv; v++) gemm_put(o, "        const V b%d = *(const V *)(b + %d);\n", v, v * L);
    for (i = 0; i < mr; i++) {
        gemm_put(o, "        { const T a%d = a[%d];", i, i);
        if (fma) { /* the scalar broadcast to a vector: an embedded broadcast of the FMA's operand */
            gemm_put(o, " const V av%d = {", i);
            for (v = 0; v < L; v++) gemm_put(o, "%sa%d", v ? ", " : "", i);
            gemm_put(o, "};");
        }
        for (v = 0; v < nv; v++) {
            if (fma) gemm_put(o, " c%d_%d = %s_%s_fma(av%d, b%d, c%d_%d);", i, v, n, id, i, v, i, v);
            else gemm_put(o, " c%d_%d += a%d * b%d;", i, v, i, v);
        }
        gemm_put(o, " }\n");
    }
    gemm_put(o, "        a += %d;\n        b += %d;\n    }\n", mr, nr);
    gemm_put(o, "    if (!first) {\n        V t;\n");
    for (i = 0; i < mr; i++)
        for (v = 0; v < nv; v++)
            gemm_put(o, "        memcpy(&t, c + %d * ldc + %d, sizeof t); c%d_%d += t;\n", i, v * L, i, v);
    gemm_put(o, "    }\n");
    if (s->bias || s->act == GEMM_ACT_RELU) {
        gemm_put(o, "    if (last) {\n");
        if (s->bias) {
            gemm_put(o, "        if (bias) {\n");
            for (v = 0; v < nv; v++) {
                gemm_put(o, "            V bb%d;\n            memcpy(&bb%d, bias + %d, sizeof bb%d);\n", v, v, v * L, v);
                for (i = 0; i < mr; i++) gemm_put(o, "            c%d_%d += bb%d;\n", i, v, v);
            }
            gemm_put(o, "        }\n");
        }
        if (s->act == GEMM_ACT_RELU) {
            gemm_put(o, "        {\n            const V z = {0};\n");
            for (i = 0; i < mr; i++)
                for (v = 0; v < nv; v++)
                    gemm_put(o, "            c%d_%d = (V)((%s_%s_vi)c%d_%d & ~(%s_%s_vi)(c%d_%d < z));\n", i, v, n, id, i,
                        v, n, id, i, v);
            gemm_put(o, "        }\n");
        }
        gemm_put(o, "    }\n");
    } else {
        gemm_put(o, "    (void)last;\n    (void)bias;\n");
    }
    for (i = 0; i < mr; i++)
        for (v = 0; v < nv; v++) gemm_put(o, "    memcpy(c + %d * ldc + %d, &c%d_%d, sizeof c%d_%d);\n", i, v * L, i, v, i, v);
    gemm_put(o, "}\n");

    /* the column-range driver */
    /* sa: A packed whole (NAME_<isa>_sap, filled by the pack tasks), or 0: pack each block into ap;
     * bk: B kept packed (NAME_<isa>_bpack's layout, spec.bkeep), or 0: pack each block into bp */
    gemm_put(o, "%sstatic void %s_%s_cols(T *C, const T *A, const T *B, const T *bias, ptrdiff_t n0, ptrdiff_t n1, "
           "ptrdiff_t m0, ptrdiff_t m1, T *ap, T *bp, const T *sa, const T *bk, void **eb)\n{\n",
        at, n, id);
    if (!s->epilogue) gemm_put(o, "    (void)eb;\n");
    gemm_put(o, "    ptrdiff_t t, jc, pc, ic, jr, ir, i, j;\n");
    gemm_put(o, "    T tile[%d] __attribute__((aligned(64)));\n", mr * nr);
    gemm_put(o, "    (void)bias;\n");
    if (!s->bkeep) gemm_put(o, "    (void)bk;\n");
    gemm_put(o, "    for (t = 0; t < %lld; t++) {\n", (ll)s->batch);
    gemm_put(o, "        const T *At = A + t * %lld, *Bt = B + t * %lld;\n        T *Ct = C + t * %lld;\n", (ll)s->sa_b,
        (ll)s->sb_b, M * N);
    gemm_put(o, "        for (jc = n0; jc < n1; jc += %lld) {\n", bk.nc);
    gemm_put(o, "            const ptrdiff_t nc = n1 - jc < %lld ? n1 - jc : %lld;\n", bk.nc, bk.nc);
    gemm_put(o, "            for (pc = 0; pc < %lld; pc += %lld) {\n", K, bk.kc);
    gemm_put(o, "                const ptrdiff_t kc = %lld - pc < %lld ? %lld - pc : %lld;\n", K, bk.kc, K, bk.kc);
    gemm_put(o, "                const int first = pc == 0, last = pc + kc == %lld;\n", K);
    if (s->bkeep) {
        gemm_put(o, "                const T *bq = bk ? bk + pc * %lld + jc * kc : bp;\n", bk.npad);
        gemm_put(o, "                if (!bk) %s_%s_pack_b(Bt, pc, kc, jc, nc, bp);\n", n, id);
    } else {
        gemm_put(o, "                const T *bq = bp;\n");
        gemm_put(o, "                %s_%s_pack_b(Bt, pc, kc, jc, nc, bp);\n", n, id);
    }
    gemm_put(o, "                for (ic = m0; ic < m1; ic += %lld) {\n", bk.mc);
    gemm_put(o, "                    const ptrdiff_t mc = m1 - ic < %lld ? m1 - ic : %lld;\n", bk.mc, bk.mc);
    if (bk.sapack) {
        gemm_put(o, "                    const T *aq = sa ? sa + pc * %lld + ic * kc : ap;\n", bk.mp * bk.mr);
        gemm_put(o, "                    if (!sa) %s_%s_pack_a(At, ic, mc, pc, kc, ap);\n", n, id);
    } else {
        gemm_put(o, "                    const T *aq = ap;\n                    (void)sa;\n");
        gemm_put(o, "                    %s_%s_pack_a(At, ic, mc, pc, kc, ap);\n", n, id);
    }
    gemm_put(o, "                    for (jr = 0; jr < nc; jr += %d) {\n", nr);
    gemm_put(o, "                        const ptrdiff_t w = nc - jr < %d ? nc - jr : %d;\n", nr, nr);
    gemm_put(o, "                        for (ir = 0; ir < mc; ir += %d) {\n", mr);
    gemm_put(o, "                            const ptrdiff_t h = mc - ir < %d ? mc - ir : %d;\n", mr, mr);
    gemm_put(o, "                            T *c = Ct + (ic + ir) * %lld + jc + jr;\n", N);
    gemm_put(o, "                            const T *pa = aq + ir * kc, *pb = bq + jr * kc;\n");
    gemm_put(o, "                            if (h == %d && w == %d) {\n", mr, nr);
    gemm_put(o, "                                %s_%s_ukr(kc, pa, pb, c, %lld, first, last, %s);\n", n, id, N,
        s->bias ? "bias + jc + jr" : "0");
    if (s->act == GEMM_ACT_GELU_TANH) {
        gemm_put(o, "                                if (last)\n"
               "                                    for (i = 0; i < %d; i++)\n"
               "                                        for (j = 0; j < %d; j++) {\n"
               "                                            T x = c[i * %lld + j];\n"
               "                                            ",
            mr, nr, N);
        gemm_put_act(o, s, "x");
        gemm_put(o, "\n                                            c[i * %lld + j] = x;\n"
               "                                        }\n",
            N);
    }
    gemm_put(o, "                            } else {\n");
    gemm_put(o, "                                %s_%s_ukr(kc, pa, pb, tile, %d, 1, 0, 0);\n", n, id, nr);
    gemm_put(o, "                                for (i = 0; i < h; i++)\n"
           "                                    for (j = 0; j < w; j++) {\n"
           "                                        T x = tile[i * %d + j];\n"
           "                                        if (!first) x += c[i * %lld + j];\n"
           "                                        if (last) {\n",
        nr, N);
    if (s->bias) gemm_put(o, "                                            x += bias[jc + jr + j];\n");
    if (s->act) {
        gemm_put(o, "                                            ");
        gemm_put_act(o, s, "x");
        gemm_put(o, "\n");
    }
    if (!s->bias && !s->act) gemm_put(o, "                                            (void)x;\n");
    gemm_put(o, "                                        }\n"
           "                                        c[i * %lld + j] = x;\n"
           "                                    }\n"
           "                            }\n",
        N);
    if (s->epilogue)
        gemm_put(o, "                            if (last) %s_epi(eb, t, ic + ir, ic + ir + h, jc + jr, jc + jr + w);\n", s->name);
    gemm_put(o, "                        }\n                    }\n                }\n            }\n        }\n    }\n}\n");
    render_par(o, s, isa, &bk);
}

/* The best ISA copy this machine runs: 2 avx512f, 1 avx2+fma, 0 base. */
static int host_isa(void)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(__TINYC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 2;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 1;
#endif
    return 0;
}

/* only: -1 renders every copy; 0..2 that one alone (GEMM_SIMD_HOST) */
static void render_simd(GemmOut *o, const GemmSpec *s, int only)
{
    static const Isa *const isas[3] = {&isa_base, &isa_avx2, &isa_avx512};
    static const char *const ids[3] = {"base", "avx2", "avx512"};
    const char *n = s->name;
    put_head(o, s, "simd");
    gemm_put(o, "typedef struct { int (*parallel_for)(int, void (*)(void *, int), void *); int threads; "
           "void *(*scratch)(void *, size_t); void *owner; } %s_par; /* KnParallel */\n", n);
    gemm_put(o, "typedef struct { T *C; const T *A, *B, *bias, *bk; ptrdiff_t slot; int tasks; void **eb; T *pap, *pbp, *sap; } "
           "%s_job;\n", n);
    gemm_put(o, "#if defined(__x86_64__) || defined(__i386__)\n#define %s_X86 1\n", n);
    for (int i = 2; i >= 1; i--)
        if (only < 0 || only == i) render_isa(o, s, isas[i]);
    gemm_put(o, "#endif\n");
    if (only <= 0) render_isa(o, s, isas[0]);

    /* NAME_best(): the best ISA copy this CPU runs, 0 base, 1 avx2+fma, 2 avx512f (found once) */
    gemm_put(o, "\nstatic int %s_best(void)\n{\n    static int best = -1;\n", n);
    gemm_put(o, "    if (best < 0) {\n        int found = 0;\n#ifdef %s_X86\n", n);
    gemm_put(o, "        __builtin_cpu_init();\n"
           "        if (__builtin_cpu_supports(\"avx512f\")) found = 2;\n"
           "        else if (__builtin_cpu_supports(\"avx2\") && __builtin_cpu_supports(\"fma\")) found = 1;\n"
           "#endif\n        best = found;\n    }\n    return best;\n}\n");

    /* NAME_isa(b, isa): runs with ISA isa (0 base, 1 avx2+fma, 2 avx512f; -1 the best there is) and
     * returns it, or returns -1 without running when this CPU lacks it or the unit has no copy of it.
     * b[7] (spec.bkeep) is B as NAME_bpack packed it: for the ISA NAME runs, so another is given none */
    gemm_put(o, "\nint %s_isa(void **b, int isa)\n{\n", n);
    gemm_put(o, "    const int best = %s_best();\n", n);
    gemm_put(o, "    T *C = (T *)b[0];\n    const T *A = (const T *)b[1], *B = (const T *)b[2];\n");
    gemm_put(o, "    const T *bias = %s;\n", s->bias ? "(const T *)b[3]" : "0");
    gemm_put(o, "    const T *bk = %s;\n", s->bkeep ? "(const T *)b[7]" : "0");
    gemm_put(o, "    const %s_par *par = (const %s_par *)b[4];\n", n, n);
    gemm_put(o, "    void **eb = %s;\n", s->epilogue ? "(void **)b[5]" : "0");
    put_epi(o, s);
    if (only < 0) gemm_put(o, "    if (isa < 0) isa = best;\n    if (isa != best) bk = 0;\n");
    else gemm_put(o, "    if (isa < 0) isa = %d;\n", only);
    gemm_put(o, "    if (isa > best) return -1;\n");
    gemm_put(o, "#ifdef %s_X86\n", n);
    for (int i = 2; i >= 0; i--) {
        if (i == 0) gemm_put(o, "#endif\n");
        if (only >= 0 && only != i) continue;
        gemm_put(o, "    if (isa == %d) {\n        T *scr = %s_%s_scratch(par);\n"
               "        if (!%s_%s_mt(C, A, B, bias, bk, par, eb, scr))\n"
               "            %s_%s_cols(C, A, B, bias, 0, %lld, 0, %lld, scr, scr + %s_%s_BP, 0, bk, eb);\n"
               "        return %d;\n    }\n",
            i, n, ids[i], n, ids[i], n, ids[i], (ll)s->N, (ll)s->M, n, ids[i], i);
    }
    gemm_put(o, "    return -1;\n}\n");
    if (s->bkeep) { /* NAME_bpack(B, dst): the bytes B packed takes (and with dst, packs it there), or 0 */
        gemm_put(o, "\nsize_t %s_bpack(const void *B, void *dst)\n{\n", n);
        if (only < 0) gemm_put(o, "    const int isa = %s_best();\n", n);
        else gemm_put(o, "    const int isa = %s_best() >= %d ? %d : -1;\n", n, only, only);
        gemm_put(o, "#ifdef %s_X86\n", n);
        for (int i = 2; i >= 0; i--) {
            if (i == 0) gemm_put(o, "#endif\n");
            if (only >= 0 && only != i) continue;
            gemm_put(o, "    if (isa == %d) {\n        if (dst) %s_%s_bpack((const T *)B, (T *)dst);\n"
                   "        return %s_%s_BKEEP * sizeof(T);\n    }\n", i, n, ids[i], n, ids[i]);
        }
        gemm_put(o, "    return 0;\n}\n");
    }
    if (only < 0) gemm_put(o, "\nvoid %s(void **b)\n{\n    (void)%s_isa(b, -1);\n}\n", n, n);
    else /* rendered here for here: a CPU without the copy never loads this text */
        gemm_put(o, "\nvoid %s(void **b)\n{\n    if (%s_isa(b, %d) < 0) __builtin_trap();\n}\n", n, n, only);
}

static int valid_name(const char *p)
{
    if (!p || !*p || (*p >= '0' && *p <= '9')) return 0;
    for (; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return 0;
    return 1;
}

size_t gemm_render(const GemmSpec *s, int dialect, char *buf, size_t cap)
{
    GemmOut o;
    if (!s || !valid_name(s->name) || s->batch < 1 || s->M < 1 || s->N < 1 || s->K < 1) return 0;
    if (s->epilogue && !valid_name(s->epilogue)) return 0;
    if (s->kc < 0 || s->mc < 0 || s->kc > 4096 || s->mc > 4096) return 0;
    if (s->dtype != GEMM_F32 && s->dtype != GEMM_F64) return 0;
    if (s->act < GEMM_ACT_NONE || s->act > GEMM_ACT_GELU_TANH) return 0;
    if (dialect < GEMM_SCALAR || dialect > GEMM_LENT) return 0;
    if (s->bkeep && (s->win.on || (s->batch > 1 && s->sb_b != 0))) return 0; /* B kept must be one strided B */
    if (s->win.on) { /* a window: positive sizes that match the product's K and N */
        const GemmWindow *w = &s->win;
        int64_t rows = w->c * w->kh * w->kw, cols = w->n * w->oh * w->ow;
        if (w->n < 1 || w->c < 1 || w->h < 1 || w->w < 1 || w->kh < 1 || w->kw < 1 || w->oh < 1 || w->ow < 1 ||
            w->sh < 1 || w->sw < 1 || w->dh < 1 || w->dw < 1 || s->K != (w->t ? cols : rows) ||
            s->N != (w->t ? rows : cols))
            return 0;
    }
    if ((s->wino == 1 && !wino_valid(s)) || (s->ukeep && !s->wino) || s->wino < 0 || s->wino > 2) return 0;
    if (s->wino == 2 && (s->dtype != GEMM_F32 || !s->win.on || s->batch != 1 || (s->ukeep && !wino_valid(s))))
        return 0;
    int simd = dialect == GEMM_SIMD || dialect == GEMM_SIMD_HOST;
    if (s->wino == 1 && simd) return wino_render(s, dialect, buf, cap);
    o.buf = buf;
    o.cap = buf ? cap : 0;
    o.len = 0;
    if (o.cap) o.buf[0] = 0;
    if (dialect == GEMM_SCALAR) render_scalar(&o, s);
    else if (dialect == GEMM_RUNTIME || dialect == GEMM_LENT || s->wino == 2)
        render_runtime(&o, s, dialect == GEMM_LENT || (s->wino == 2 && simd));
    else render_simd(&o, s, dialect == GEMM_SIMD ? -1 : host_isa());
    return o.len;
}
