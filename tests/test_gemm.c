/*
 * test_gemm.c — targets/c/gemm.c: the GEMM template against a naive
 * double-precision loop. Odd shapes (1x1x1, 7x13x5, 65x33x129, 67x517x41,
 * 128^3, batches of 2 and 3, a broadcast B), operands row-major, transposed and with padded
 * leading dimensions (strides), B as a convolution's window view (implicit
 * GEMM: stride, padding, dilation, groups, 1x1, the transposed view of the
 * weight gradient), with and without the epilogue (bias, relu,
 * gelu_tanh); the scalar and runtime (kn_rt_gemm) dialects through TinyCC, the SIMD dialect through cc,
 * every ISA copy this CPU can run (NAME_isa). Accuracy: max |err| <=
 * 1e-4 * sqrt(K) * max |ref| (f32 accumulation); guard values around C
 * must survive and C's old contents must not leak in. A tile epilogue
 * (b[5]: C = C / 2 + residual) must see every tile once, after the rest. Threaded runs (b[4],
 * 2 and 3 tasks over port_parallel_for) must equal one thread bitwise, and
 * those of at least 2^20 multiply-adds must really split. Where a compiler is
 * not available (wasm, arm builds) a SKIP line is printed. No timing.
 */
#include <stdlib.h>

#include "../port/port.h"
#include "../src/gemm_rt.h"
#include "../targets/c/gemm.h"
#include "../targets/c/render.h"
#include "test.h"

enum { GUARD = 37 };
static const double SENTINEL = 12345.0;

typedef void (*Kern)(void **);
typedef int (*KernIsa)(void **, int);

static unsigned rng = 12345u;
static double rnd(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (double)(rng >> 8) / (double)(1u << 24) * 2.0 - 1.0;
}

/* an operand [batch][R][Cc] stored with layout: 0 row-major, 1 transposed, 2 row-major with
 * padded rows and batches, 3 broadcast over the batch (stride 0); returns the element count */
static int64_t layout(int lay, int64_t batch, int64_t R, int64_t Cc, int64_t *sb, int64_t *sr, int64_t *sc)
{
    switch (lay) {
    case 1: *sr = 1; *sc = R; *sb = R * Cc; return batch * R * Cc;
    case 2: *sr = Cc + 3; *sc = 1; *sb = R * (Cc + 3) + 5; return batch * *sb;
    case 3: *sr = Cc; *sc = 1; *sb = 0; return R * Cc;
    default: *sr = Cc; *sc = 1; *sb = R * Cc; return batch * R * Cc;
    }
}

static double act_ref(int act, double x)
{
    if (act == GEMM_ACT_RELU) return x < 0 ? 0 : x;
    if (act == GEMM_ACT_GELU_TANH) return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    return x;
}

typedef struct {
    GemmSpec s;
    void *A, *B, *bias, *Cg; /* Cg: C with GUARD elements either side */
    double *ref;
    int64_t na, nb, nc;
    void *res, *eb[2];       /* an epilogue's residual, and its buffers: C, res */
} Case;

static double get(const void *p, int dt, int64_t i)
{
    return dt == GEMM_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static void set(void *p, int dt, int64_t i, double v)
{
    if (dt == GEMM_F32) ((float *)p)[i] = (float)v;
    else ((double *)p)[i] = v;
}

static int g_kc, g_mc; /* cache blocks of the cases made (0: the template's defaults) */
static GemmWindow g_win; /* B of the cases made as a convolution's window view (on), or strided */

/* Where B[t][k][i] of a window case is in B, or -1 for a zero of the padding: the GemmWindow
 * contract of src/target.h, written out */
static int64_t win_index(const GemmSpec *s, int64_t t, int64_t k, int64_t i)
{
    const GemmWindow *w = &s->win;
    int64_t r = w->t ? i : k, j = w->t ? k : i;
    int64_t c = r / (w->kh * w->kw), ky = r / w->kw % w->kh, kx = r % w->kw;
    int64_t n = j / (w->oh * w->ow), oy = j / w->ow % w->oh, ox = j % w->ow;
    int64_t y = oy * w->sh + ky * w->dh - w->ph, x = ox * w->sw + kx * w->dw - w->pw;
    if (y < 0 || y >= w->h || x < 0 || x >= w->w) return -1;
    return t * s->sb_b + n * w->sx_n + c * w->sx_c + y * w->sx_h + x * w->sx_w;
}

/* g_win for x (n, groups * c, h, w) stored with padded strides (every other column, padded rows and
 * images), kernel kh x kw, stride, padding (before) and dilation; M rows of A; t: the transposed
 * view. Sets *batch, *N, *K of the product. */
static void win_geometry(int t, int64_t n, int64_t groups, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw,
                         int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t *batch,
                         int64_t *N, int64_t *K)
{
    GemmWindow *g = &g_win;
    memset(g, 0, sizeof *g);
    g->on = 1, g->t = t, g->n = n, g->c = c, g->h = h, g->w = w, g->kh = kh, g->kw = kw;
    g->sh = sh, g->sw = sw, g->ph = ph, g->pw = pw, g->dh = dh, g->dw = dw;
    g->oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1, g->ow = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
    g->sx_w = 2, g->sx_h = 2 * w + 1, g->sx_c = h * g->sx_h, g->sx_n = groups * c * g->sx_c + 3;
    *batch = groups;
    *K = t ? n * g->oh * g->ow : c * kh * kw;
    *N = t ? c * kh * kw : n * g->oh * g->ow;
}

static void case_init(Case *c, int dt, int64_t batch, int64_t M, int64_t N, int64_t K, int la, int lb, int bias,
                      int act)
{
    GemmSpec *s = &c->s;
    size_t es = dt == GEMM_F32 ? 4 : 8;
    int64_t i, t, m, n, k;
    memset(c, 0, sizeof *c);
    s->name = "kgemm";
    s->dtype = dt;
    s->batch = batch, s->M = M, s->N = N, s->K = K;
    s->bias = bias, s->act = act;
    s->kc = g_kc, s->mc = g_mc;
    c->na = layout(la, batch, M, K, &s->sa_b, &s->sa_m, &s->sa_k);
    if (g_win.on) {
        s->win = g_win;
        s->sb_b = g_win.c * g_win.sx_c;
        c->nb = (batch - 1) * s->sb_b + (g_win.n - 1) * g_win.sx_n + (g_win.c - 1) * g_win.sx_c +
                (g_win.h - 1) * g_win.sx_h + (g_win.w - 1) * g_win.sx_w + 1;
    } else
        c->nb = layout(lb, batch, K, N, &s->sb_b, &s->sb_k, &s->sb_n);
    c->nc = batch * M * N;
    c->A = malloc((size_t)c->na * es);
    c->B = malloc((size_t)c->nb * es);
    c->bias = malloc((size_t)N * es);
    c->Cg = malloc((size_t)(c->nc + 2 * GUARD) * es);
    c->ref = malloc((size_t)c->nc * sizeof(double));
    for (i = 0; i < c->na; i++) set(c->A, dt, i, rnd());
    for (i = 0; i < c->nb; i++) set(c->B, dt, i, rnd());
    for (i = 0; i < N; i++) set(c->bias, dt, i, rnd());
    for (t = 0; t < batch; t++)
        for (m = 0; m < M; m++)
            for (n = 0; n < N; n++) {
                double acc = 0;
                for (k = 0; k < K; k++) {
                    int64_t at = g_win.on ? win_index(s, t, k, n) : t * s->sb_b + k * s->sb_k + n * s->sb_n;
                    acc += get(c->A, dt, t * s->sa_b + m * s->sa_m + k * s->sa_k) * (at < 0 ? 0 : get(c->B, dt, at));
                }
                if (bias) acc += get(c->bias, dt, n);
                c->ref[(t * M + m) * N + n] = act_ref(act, acc);
            }
}

static void case_free(Case *c)
{
    free(c->A), free(c->B), free(c->bias), free(c->Cg), free(c->ref), free(c->res);
}

/* An epilogue kepi of the case's unit: C = C / 2 + res on each tile it is given. */
static void case_epilogue(Case *c)
{
    c->s.epilogue = "kepi";
    c->res = malloc((size_t)c->nc * (c->s.dtype == GEMM_F32 ? 4 : 8));
    for (int64_t i = 0; i < c->nc; i++) {
        set(c->res, c->s.dtype, i, rnd());
        c->ref[i] = c->ref[i] * 0.5 + get(c->res, c->s.dtype, i);
    }
}

/* the epilogue's definition, after the template's text */
static char *with_epilogue(const Case *c, char *src)
{
    char tail[512];
    const char *t = c->s.dtype == GEMM_F32 ? "float" : "double";
    if (!src || !c->s.epilogue) return src;
    snprintf(tail, sizeof tail,
             "void kepi(void **b, int64_t t, int64_t m0, int64_t m1, int64_t n0, int64_t n1)\n{\n"
             "    %s *c = (%s *)b[0];\n    const %s *r = (const %s *)b[1];\n"
             "    for (int64_t m = m0; m < m1; m++)\n        for (int64_t n = n0; n < n1; n++) {\n"
             "            int64_t i = (t * %lld + m) * %lld + n;\n            c[i] = c[i] * 0.5 + r[i];\n        }\n}\n",
             t, t, t, t, (long long)c->s.M, (long long)c->s.N);
    char *all = malloc(strlen(src) + strlen(tail) + 1);
    if (all) strcpy(all, src), strcat(all, tail);
    free(src);
    return all;
}

static void **case_bufs(Case *c, void **b)
{
    b[4] = NULL;
    b[5] = c->s.epilogue ? c->eb : NULL;
    b[6] = NULL; /* the epilogue by its name */
    size_t es = c->s.dtype == GEMM_F32 ? 4 : 8;
    int64_t i;
    for (i = 0; i < c->nc + 2 * GUARD; i++) set(c->Cg, c->s.dtype, i, SENTINEL);
    b[0] = (char *)c->Cg + GUARD * es;
    b[1] = c->A;
    b[2] = c->B;
    b[3] = c->s.bias ? c->bias : NULL;
    c->eb[0] = b[0], c->eb[1] = c->res;
    return b;
}

/* checks C against the reference and the guards; what names the run in messages */
static void case_check(Case *c, const char *what)
{
    const GemmSpec *s = &c->s;
    double maxref = 0, maxerr = 0, tol;
    int64_t i, bad_guard = 0, worst = 0;
    for (i = 0; i < c->nc; i++)
        if (fabs(c->ref[i]) > maxref) maxref = fabs(c->ref[i]);
    for (i = 0; i < c->nc; i++) {
        double e = fabs(get(c->Cg, s->dtype, GUARD + i) - c->ref[i]);
        if (!(e <= maxerr)) maxerr = e, worst = i; /* NaN counts as the worst */
    }
    for (i = 0; i < GUARD; i++) {
        if (get(c->Cg, s->dtype, i) != SENTINEL) bad_guard++;
        if (get(c->Cg, s->dtype, GUARD + c->nc + i) != SENTINEL) bad_guard++;
    }
    tol = 1e-4 * sqrt((double)s->K) * (maxref > 0 ? maxref : 1);
    CHECK_MSG(maxerr <= tol, "%s %s batch %lld %lldx%lldx%lld strides A (%lld,%lld,%lld) B (%lld,%lld,%lld) bias %d "
              "act %d: max err %g at %lld (tol %g)",
              what, s->dtype == GEMM_F32 ? "f32" : "f64", (long long)s->batch, (long long)s->M, (long long)s->N,
              (long long)s->K, (long long)s->sa_b, (long long)s->sa_m, (long long)s->sa_k, (long long)s->sb_b,
              (long long)s->sb_k, (long long)s->sb_n, s->bias, s->act, maxerr, (long long)worst, tol);
    CHECK_MSG(bad_guard == 0, "%s: %lld guard values overwritten", what, (long long)bad_guard);
}

static char *render(const GemmSpec *s, int dialect)
{
    size_t n = gemm_render(s, dialect, NULL, 0);
    char *src;
    if (!CHECK(n > 0)) return NULL;
    src = malloc(n + 1);
    CHECK(gemm_render(s, dialect, src, n + 1) == n);
    CHECK(strlen(src) == n);
    return src;
}

static int isa_runs[3], par_runs, par_calls, shared_runs, unshared_runs, row_runs;

/* port_parallel_for, counted */
static int counted_for(int n, void (*fn)(void *, int), void *arg)
{
    par_calls++;
    return port_parallel_for(n, fn, arg);
}

/* A lender of KnParallel.scratch: one buffer, grown as asked, filled with NaN bytes at every ask (a
 * unit may count on nothing in it); its asks and the most asked for are counted. */
typedef struct {
    void *raw;
    size_t bytes, most;
    int asks;
} Lender;

static void *lend(void *owner, size_t bytes)
{
    Lender *l = owner;
    l->asks++;
    if (bytes > l->most) l->most = bytes;
    if (bytes > l->bytes) {
        free(l->raw);
        l->bytes = (l->raw = malloc(bytes + 64)) ? bytes : 0;
        if (!l->raw) return NULL;
    }
    char *p = (char *)l->raw + (64 - (uintptr_t)l->raw % 64) % 64;
    memset(p, 0xff, bytes);
    return p;
}

static Lender lender;
static int lent_runs;

/* Runs ISA isa with 1, 2 and 3 tasks on as many threads, packing into its own scratch and into what
 * a lender gives (one ask a call), and checks C (guards included) against one thread's, Cg1.
 * shared: the copy packs A once, in a first parallel_for (NAME_<isa>_pack_task in its text), before
 * the tasks that split N read it. */
static void run_threaded(Case *c, KernIsa fi, int isa, const void *Cg1, int shared)
{
    size_t bytes = (size_t)(c->nc + 2 * GUARD) * (c->s.dtype == GEMM_F32 ? 4 : 8);
    /* the template's tiles (gemm.c, Isa): one NR-column block splits its MR-row panels instead, when its
     * padded product, M x NR x K, is big enough (ROWS) */
    static const int64_t nr32[3] = {8, 16, 32}, mr[3] = {6, 6, 8};
    int64_t nr = nr32[isa] / (c->s.dtype == GEMM_F32 ? 1 : 2);
    int rows = c->s.N <= nr && c->s.M > mr[isa];
    int big = c->s.batch * c->s.M * (rows ? nr : c->s.N) * c->s.K >= (1 << 20), th;
    for (th = 1; th <= 3; th++)
        for (int lent = 0; lent < 2; lent++) {
            void *bufs[7];
            KnParallel par;
            int calls = par_calls, asks = lender.asks;
            memset(&par, 0, sizeof par);
            par.parallel_for = counted_for;
            par.threads = th;
            if (lent) par.scratch = lend, par.owner = &lender;
            port_set_threads(th);
            case_bufs(c, bufs);
            bufs[4] = &par;
            CHECK(fi(bufs, isa) == isa);
            CHECK_MSG(memcmp(c->Cg, Cg1, bytes) == 0, "isa %d, %d threads, scratch %s, %lldx%lldx%lld batch %lld: C "
                      "differs from one thread's", isa, th, lent ? "lent" : "its own", (long long)c->s.M,
                      (long long)c->s.N, (long long)c->s.K, (long long)c->s.batch);
            CHECK_MSG(lender.asks - asks == lent, "isa %d, %d threads: %d asks for scratch", isa, th,
                      lender.asks - asks);
            lent_runs += lent;
            if (th == 1) continue;
            CHECK_MSG(par_calls - calls == big * (1 + shared), "isa %d, %d threads, %lld multiply-adds, A shared %d: "
                      "%d parallel_for calls", isa, th, (long long)(c->s.batch * c->s.M * c->s.N * c->s.K), shared,
                      par_calls - calls);
            par_runs += big;
            row_runs += big && rows;
            if (big) *(shared ? &shared_runs : &unshared_runs) += 1;
        }
    port_set_threads(0);
}

/* an epilogue given by pointer (b[6]): counts its calls, runs the unit's own */
typedef void (*Epi)(void **, int64_t, int64_t, int64_t, int64_t, int64_t);
static Epi epi_inner;
static int epi_calls;
static void epi_counting(void **b, int64_t t, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    epi_calls++;
    epi_inner(b, t, m0, m1, n0, n1);
}

/* GEMM_SIMD_HOST: one ISA copy (this machine's best), shorter than
 * GEMM_SIMD's three, and the same results */
static void host_case(int dt, int64_t batch, int64_t M, int64_t N, int64_t K, int la, int lb, int bias, int act,
                      int epi)
{
    Case c;
    void *bufs[7];
    char why[256];
    case_init(&c, dt, batch, M, N, K, la, lb, bias, act);
    if (epi) case_epilogue(&c);
    char *all = render(&c.s, GEMM_SIMD), *src = render(&c.s, GEMM_SIMD_HOST);
    CHECK_MSG(all && src && strlen(src) * 2 < strlen(all), "host text %zu bytes, all ISAs %zu",
              src ? strlen(src) : 0, all ? strlen(all) : 0);
    src = with_epilogue(&c, src);
    PortModule *m = src ? c_jit(PORT_CC, src, NULL, why) : NULL;
    CHECK_MSG(m != NULL, "cc host: %s", src ? why : "render");
    void *p = m ? port_jit_sym(m, "kgemm") : NULL;
    Kern f = NULL;
    if (m && CHECK(p != NULL)) {
        memcpy(&f, &p, sizeof p);
        f(case_bufs(&c, bufs));
        case_check(&c, "simd/host");
        if (epi) { /* the epilogue given as b[6], as dots sharing a unit give theirs */
            void *q = port_jit_sym(m, c.s.epilogue);
            Epi counting = epi_counting;
            case_bufs(&c, bufs);
            memcpy(&bufs[6], &counting, sizeof counting);
            if (CHECK(q != NULL)) {
                memcpy(&epi_inner, &q, sizeof q);
                epi_calls = 0;
                f(bufs);
                case_check(&c, "simd/host, epilogue by pointer");
                CHECK(epi_calls > 0);
            }
        }
    }
    port_jit_free(m);
    free(src);
    free(all);
    case_free(&c);
}

typedef size_t (*Bpack)(const void *, void *);
static int keep_runs;

/* B kept packed (spec.bkeep) in dialect (GEMM_SIMD or _SIMD_HOST): NAME_bpack's copy as b[7] gives C
 * bitwise equal to packing B in the call (b[7] NULL), with one thread and two; B overwritten after
 * the packing must not change C (b[7] is what is read); every other ISA copy ignores b[7]. */
static void keep_case(int dialect, int dt, int64_t batch, int64_t M, int64_t N, int64_t K, int la, int lb, int bias,
                      int act, int epi)
{
    Case c;
    void *bufs[8];
    char why[256];
    size_t es = dt == GEMM_F32 ? 4 : 8, cbytes;
    case_init(&c, dt, batch, M, N, K, la, lb, bias, act);
    if (epi) case_epilogue(&c);
    c.s.bkeep = 1;
    cbytes = (size_t)(c.nc + 2 * GUARD) * es;
    char *src = with_epilogue(&c, render(&c.s, dialect));
    PortModule *m = src ? c_jit(PORT_CC, src, NULL, why) : NULL;
    CHECK_MSG(m != NULL, "cc kept B: %s", src ? why : "render");
    void *p = m ? port_jit_sym(m, "kgemm") : NULL, *q = m ? port_jit_sym(m, "kgemm_isa") : NULL;
    void *r = m ? port_jit_sym(m, "kgemm_bpack") : NULL;
    Kern f = NULL;
    KernIsa fi = NULL;
    Bpack bp = NULL;
    if (m && CHECK(p != NULL && q != NULL && r != NULL)) {
        memcpy(&f, &p, sizeof p), memcpy(&fi, &q, sizeof q), memcpy(&bp, &r, sizeof r);
        size_t bytes = bp(c.B, NULL);
        CHECK(bytes >= (size_t)(N * K) * es);
        void *mem = malloc(bytes + 64), *Cg1 = malloc(cbytes), *B0 = malloc((size_t)c.nb * es);
        void *kept = mem ? (char *)mem + (64 - (uintptr_t)mem % 64) % 64 : NULL;
        if (CHECK(mem && Cg1 && B0)) {
            memset(kept, 0xff, bytes); /* NaNs: what bpack leaves unwritten shows */
            CHECK(bp(c.B, kept) == bytes);
            case_bufs(&c, bufs);
            bufs[7] = NULL;
            f(bufs);
            case_check(&c, "kept B: packing in the call");
            memcpy(Cg1, c.Cg, cbytes);
            memcpy(B0, c.B, (size_t)c.nb * es);
            for (int64_t i = 0; i < c.nb; i++) set(c.B, dt, i, 1e30); /* b[7] is B now */
            for (int th = 1; th <= 2; th++) {
                KnParallel par = {port_parallel_for, th, NULL, NULL, NULL, NULL, NULL};
                port_set_threads(th);
                case_bufs(&c, bufs);
                bufs[4] = &par, bufs[7] = kept;
                f(bufs);
                CHECK_MSG(memcmp(c.Cg, Cg1, cbytes) == 0, "kept B, %d threads, %lldx%lldx%lld batch %lld: C differs "
                          "from packing in the call", th, (long long)M, (long long)N, (long long)K, (long long)batch);
                keep_runs++;
            }
            port_set_threads(0);
            memcpy(c.B, B0, (size_t)c.nb * es);
            for (int isa = 0; isa < 3; isa++) { /* any copy but the one bpack packed for packs B itself */
                case_bufs(&c, bufs);
                bufs[7] = kept;
                if (fi(bufs, isa) >= 0) case_check(&c, "kept B, every ISA copy");
            }
        }
        free(mem), free(Cg1), free(B0);
    }
    port_jit_free(m);
    free(src);
    case_free(&c);
}

/* GEMM_RUNTIME through tcc (the unit calls the library's kn_rt_gemm): one thread, then 2 tasks through b[4]
 * (bitwise the same), then the epilogue by pointer */
static void runtime_case(Case *c)
{
    void *bufs[7];
    char why[256];
    char *src = with_epilogue(c, render(&c->s, GEMM_RUNTIME));
    PortModule *m = src ? c_jit(PORT_TCC, src, NULL, why) : NULL;
    CHECK_MSG(m != NULL, "tcc runtime: %s", src ? why : "render");
    void *p = m ? port_jit_sym(m, "kgemm") : NULL;
    Kern f = NULL;
    if (m && CHECK(p != NULL)) {
        size_t bytes = (size_t)(c->nc + 2 * GUARD) * (c->s.dtype == GEMM_F32 ? 4 : 8);
        void *Cg1 = malloc(bytes);
        KnParallel par = {port_parallel_for, 2, NULL, NULL, NULL, NULL, NULL};
        memcpy(&f, &p, sizeof p);
        f(case_bufs(c, bufs));
        case_check(c, "runtime/tcc");
        memcpy(Cg1, c->Cg, bytes);
        case_bufs(c, bufs);
        bufs[4] = &par;
        f(bufs);
        CHECK_MSG(memcmp(c->Cg, Cg1, bytes) == 0, "runtime/tcc, 2 threads: C differs from one thread's");
        free(Cg1);
        if (c->s.epilogue) {
            void *q = port_jit_sym(m, c->s.epilogue);
            Epi counting = epi_counting;
            case_bufs(c, bufs);
            memcpy(&bufs[6], &counting, sizeof counting);
            if (CHECK(q != NULL)) {
                memcpy(&epi_inner, &q, sizeof q);
                epi_calls = 0;
                f(bufs);
                case_check(c, "runtime/tcc, epilogue by pointer");
                CHECK(epi_calls == c->s.batch);
            }
        }
    }
    port_jit_free(m);
    free(src);
}

static void run_case(int avail_tcc, int avail_cc, int dt, int64_t batch, int64_t M, int64_t N, int64_t K, int la,
                     int lb, int bias, int act, int epi)
{
    Case c;
    void *bufs[7];
    char why[256];
    case_init(&c, dt, batch, M, N, K, la, lb, bias, act);
    if (epi) case_epilogue(&c);
    if (avail_tcc) runtime_case(&c);
    if (avail_tcc && dt == GEMM_F32) {
        char *src = with_epilogue(&c, render(&c.s, GEMM_SCALAR));
        PortModule *m = src ? c_jit(PORT_TCC, src, NULL, why) : NULL;
        CHECK_MSG(m != NULL, "tcc: %s", src ? why : "render");
        if (m) {
            void *p = port_jit_sym(m, "kgemm");
            Kern f = NULL;
            if (CHECK(p != NULL)) {
                memcpy(&f, &p, sizeof p);
                f(case_bufs(&c, bufs));
                case_check(&c, "scalar/tcc");
            }
        }
        port_jit_free(m);
        free(src);
    }
    if (avail_cc) {
        char *src = with_epilogue(&c, render(&c.s, GEMM_SIMD));
        PortModule *m = src ? c_jit(PORT_CC, src, NULL, why) : NULL;
        CHECK_MSG(m != NULL, "cc: %s", src ? why : "render");
        if (m) {
            void *p = port_jit_sym(m, "kgemm"), *q = port_jit_sym(m, "kgemm_isa");
            Kern f = NULL;
            KernIsa fi = NULL;
            int isa;
            if (CHECK(p != NULL && q != NULL)) {
                static const char *names[3] = {"simd/base", "simd/avx2", "simd/avx512"};
                memcpy(&f, &p, sizeof p);
                memcpy(&fi, &q, sizeof q);
                f(case_bufs(&c, bufs));
                case_check(&c, "simd/auto");
                for (isa = 0; isa < 3; isa++) {
                    int got = fi(case_bufs(&c, bufs), isa);
                    if (got < 0) continue;
                    CHECK(got == isa);
                    isa_runs[isa]++;
                    case_check(&c, names[isa]);
                    void *Cg1 = malloc((size_t)(c.nc + 2 * GUARD) * (dt == GEMM_F32 ? 4 : 8));
                    if (CHECK(Cg1 != NULL)) {
                        memcpy(Cg1, c.Cg, (size_t)(c.nc + 2 * GUARD) * (dt == GEMM_F32 ? 4 : 8));
                        static const char *sap[3] = {"kgemm_base_pack_task", "kgemm_avx2_pack_task", "kgemm_avx512_pack_task"};
                        run_threaded(&c, fi, isa, Cg1, strstr(src, sap[isa]) != NULL);
                    }
                    free(Cg1);
                }
            }
        }
        port_jit_free(m);
        free(src);
    }
    /* the scalar dialect compiled by cc too (for f64, which the tcc run above skips) */
    if (avail_cc && dt == GEMM_F64) {
        char *src = with_epilogue(&c, render(&c.s, GEMM_SCALAR));
        PortModule *m = src ? c_jit(PORT_CC, src, NULL, why) : NULL;
        CHECK_MSG(m != NULL, "cc scalar: %s", src ? why : "render");
        if (m) {
            void *p = port_jit_sym(m, "kgemm");
            Kern f = NULL;
            if (CHECK(p != NULL)) {
                memcpy(&f, &p, sizeof p);
                f(case_bufs(&c, bufs));
                case_check(&c, "scalar/cc");
            }
        }
        port_jit_free(m);
        free(src);
    }
    case_free(&c);
}

/* Winograd F(2x2, 3x3) (GemmSpec.wino, wino.c) on a 3x3 stride-1 window: GEMM_SIMD_HOST and
 * GEMM_SIMD against the double reference at the same tolerance, one thread and 2 and 3 tasks (the same
 * C bitwise: every element is computed by one task in the same order), the epilogue (by name and by
 * pointer) on every column once; odd output sizes (partial tiles), padding 0 and 1, channels not
 * multiples of the vector width, several chunks of tile rows. The scalar and runtime dialects compute
 * the same spec directly. GEMM_SIMD_HOST's unit keeps the weights' transform (spec.ukeep): NAME_upack's
 * U as b[7] gives C bitwise equal to transforming A in the call (b[7] NULL), with one thread and two,
 * and A overwritten after the transform must not change C (b[7] is what is read). */
static int wino_cases, ukeep_runs;

/* the unit's NAME_upack(A) as b[7], A then overwritten: C must be Cg1 (bytes), with 1 and 2 threads */
static void ukeep_check(Case *cs, PortModule *m, Kern f, const void *Cg1, size_t bytes)
{
    void *r = port_jit_sym(m, "kgemm_upack"), *bufs[8];
    Bpack up = NULL;
    size_t es = cs->s.dtype == GEMM_F32 ? 4 : 8;
    if (!CHECK(r != NULL)) return;
    memcpy(&up, &r, sizeof r);
    size_t ub = up(cs->A, NULL);
    CHECK(ub == (size_t)(16 * cs->s.M * cs->s.win.c) * es);
    void *mem = malloc(ub + 64), *A0 = malloc((size_t)cs->na * es);
    void *kept = mem ? (char *)mem + (64 - (uintptr_t)mem % 64) % 64 : NULL;
    if (CHECK(mem && A0)) {
        memset(kept, 0xff, ub); /* NaNs: what upack leaves unwritten shows */
        CHECK(up(cs->A, kept) == ub);
        memcpy(A0, cs->A, (size_t)cs->na * es);
        for (int64_t i = 0; i < cs->na; i++) set(cs->A, cs->s.dtype, i, 1e30); /* b[7] is the weights now */
        for (int th = 1; th <= 2; th++) {
            KnParallel par = {counted_for, th, NULL, NULL, NULL, NULL, NULL};
            port_set_threads(th);
            case_bufs(cs, bufs);
            bufs[4] = &par, bufs[7] = kept;
            f(bufs);
            CHECK_MSG(memcmp(cs->Cg, Cg1, bytes) == 0, "winograd, U kept, %d threads: C differs from transforming "
                      "A in the call", th);
            ukeep_runs++;
        }
        port_set_threads(0);
        memcpy(cs->A, A0, (size_t)cs->na * es);
    }
    free(mem);
    free(A0);
}

/* cs: a 3x3, stride-1 convolution of n images (c channels, h x w, padding pad) to M channels, as the
 * Winograd cases take it (A's layout alternating with M) */
static void conv3x3_case(Case *cs, int dt, int64_t n, int64_t c, int64_t h, int64_t w, int64_t pad, int64_t M,
                         int bias, int act, int epi)
{
    int64_t batch, N, K;
    win_geometry(0, n, 1, c, h, w, 3, 3, 1, 1, pad, pad, 1, 1, &batch, &N, &K);
    case_init(cs, dt, batch, M, N, K, (int)(M % 2), 0, bias, act);
    memset(&g_win, 0, sizeof g_win);
    if (epi) case_epilogue(cs);
}

static void wino_case(int dt, int64_t n, int64_t c, int64_t h, int64_t w, int64_t pad, int64_t M, int bias, int act,
                      int epi)
{
    Case cs;
    void *bufs[8];
    char why[256];
    conv3x3_case(&cs, dt, n, c, h, w, pad, M, bias, act, epi);
    cs.s.wino = 1;
    for (int d = 0; d < 2; d++) {
        cs.s.ukeep = !d;
        char *src = with_epilogue(&cs, render(&cs.s, d ? GEMM_SIMD : GEMM_SIMD_HOST));
        CHECK(src && strstr(src, "winograd") != NULL);
        PortModule *m = src ? c_jit(PORT_CC, src, NULL, why) : NULL;
        CHECK_MSG(m != NULL, "cc winograd: %s", src ? why : "render");
        void *p = m ? port_jit_sym(m, "kgemm") : NULL;
        Kern f = NULL;
        if (m && CHECK(p != NULL)) {
            size_t bytes = (size_t)(cs.nc + 2 * GUARD) * (dt == GEMM_F32 ? 4 : 8);
            void *Cg1 = malloc(bytes);
            memcpy(&f, &p, sizeof p);
            case_bufs(&cs, bufs);
            bufs[7] = NULL; /* with ukeep: transform A in the call */
            f(bufs);
            case_check(&cs, d ? "winograd/simd" : "winograd/host");
            if (Cg1) memcpy(Cg1, cs.Cg, bytes);
            for (int th = 1; th <= 3 && Cg1; th++)
                for (int lent = th == 1; lent < 2; lent++) { /* U, V and M in its own scratch, or lent */
                    KnParallel par = {counted_for, th, lent ? lend : NULL, &lender, NULL, NULL, NULL};
                    int asks = lender.asks;
                    port_set_threads(th);
                    case_bufs(&cs, bufs);
                    bufs[4] = &par;
                    f(bufs);
                    CHECK_MSG(memcmp(cs.Cg, Cg1, bytes) == 0, "winograd %d threads, scratch %s: C differs from one "
                              "thread's", th, lent ? "lent" : "its own");
                    CHECK_MSG(lender.asks - asks == lent, "winograd %d threads: %d asks for scratch (the GEMM inside "
                              "packs into its own)", th, lender.asks - asks);
                    lent_runs += lent;
                }
            port_set_threads(0);
            if (cs.s.ukeep && Cg1) ukeep_check(&cs, m, f, Cg1, bytes);
            if (epi) {
                void *q = port_jit_sym(m, cs.s.epilogue);
                Epi counting = epi_counting;
                case_bufs(&cs, bufs);
                memcpy(&bufs[6], &counting, sizeof counting);
                if (CHECK(q != NULL)) {
                    memcpy(&epi_inner, &q, sizeof q);
                    epi_calls = 0;
                    f(bufs);
                    case_check(&cs, "winograd, epilogue by pointer");
                    CHECK(epi_calls > 0);
                }
            }
            free(Cg1);
            wino_cases++;
        }
        port_jit_free(m);
        free(src);
    }
    case_free(&cs);
}

/* spec.wino 2 (the library's kn_rt_conv: F(4x4, 3x3), src/wino_rt.c, or with t a weights' gradient,
 * src/conv_rt.c) in GEMM_SIMD_HOST: the unit calls what b[4] lends (KnParallel.conv), in scratch from
 * the lender (NaN bytes at every ask, one ask a call), on one thread and 3 tasks with the same C
 * bitwise; with b[4] NULL, or a KnParallel lending no conv, its scalar product (NAME_direct) instead,
 * asking for nothing; within the reference's tolerance each time, the epilogue run as the runtime
 * dialect runs it. A forward spec keeps the weights' transform (spec.ukeep): b[7] NULL transforms A in
 * the call; kn_rt_wino_upack's as b[7], A then overwritten, the same C. */
static int lib_conv_runs;
static void lib_conv_case(int t, int64_t n, int64_t c, int64_t h, int64_t w, int64_t pad, int64_t M, int bias,
                          int act, int epi)
{
    Case cs;
    void *bufs[8];
    char why[256];
    if (t) { /* the weights' gradient of that convolution */
        int64_t batch, N, K;
        win_geometry(1, n, 1, c, h, w, 3, 3, 1, 1, pad, pad, 1, 1, &batch, &N, &K);
        case_init(&cs, GEMM_F32, batch, M, N, K, (int)(M % 2), 0, bias, act);
        memset(&g_win, 0, sizeof g_win);
        if (epi) case_epilogue(&cs);
    } else conv3x3_case(&cs, GEMM_F32, n, c, h, w, pad, M, bias, act, epi);
    cs.s.wino = 2, cs.s.ukeep = !t;
    char *src = with_epilogue(&cs, render(&cs.s, GEMM_SIMD_HOST));
    CHECK(src && strstr(src, "kn_rt_conv, lent") != NULL);
    PortModule *m = src ? c_jit(PORT_CC, src, NULL, why) : NULL;
    CHECK_MSG(m != NULL, "cc library winograd: %s", src ? why : "render");
    void *p = m ? port_jit_sym(m, "kgemm") : NULL;
    size_t bytes = (size_t)(cs.nc + 2 * GUARD) * 4;
    void *Cg1 = malloc(bytes);
    if (m && CHECK(p != NULL) && Cg1) {
        Kern f;
        memcpy(&f, &p, sizeof p);
        KnParallel none = {counted_for, 2, lend, &lender, NULL, NULL, NULL};
        for (int i = 0; i < 2; i++) { /* nothing lent, then no wino lent: the scalar product */
            int asks = lender.asks;
            case_bufs(&cs, bufs);
            bufs[4] = i ? &none : NULL, bufs[7] = NULL;
            f(bufs);
            case_check(&cs, i ? "library conv, none lent" : "library conv, b[4] NULL");
            CHECK(lender.asks == asks);
        }
        for (int th = 1; th <= 3; th += 2) {
            KnParallel par = {counted_for, th, lend, &lender, kn_rt_conv, kn_rt_conv_work, NULL};
            int asks = lender.asks;
            port_set_threads(th);
            case_bufs(&cs, bufs);
            bufs[4] = &par, bufs[7] = NULL;
            f(bufs);
            case_check(&cs, t ? "library weights' gradient" : "library winograd");
            CHECK_MSG(lender.asks - asks == 1, "library conv (t %d), %d threads: %d asks for scratch (kn_rt_conv "
                      "declined?)", t, th, lender.asks - asks);
            if (th == 1) memcpy(Cg1, cs.Cg, bytes);
            else CHECK_MSG(memcmp(cs.Cg, Cg1, bytes) == 0, "library conv (t %d): C on 3 tasks differs from one "
                           "thread's", t);
            lib_conv_runs++;
        }
        port_set_threads(0);
        if (!t) { /* the transform kept */
            const GemmWindow *gw = &cs.s.win;
            int64_t win[19] = {gw->t, gw->n, gw->c, gw->h, gw->w, gw->kh, gw->kw, gw->oh, gw->ow, gw->sh,
                               gw->sw, gw->dh, gw->dw, gw->ph, gw->pw, gw->sx_n, gw->sx_c, gw->sx_h, gw->sx_w};
            KnRtGemm g = {0};
            g.A = cs.A, g.dtype = GEMM_F32, g.act = act, g.batch = 1, g.M = M, g.N = cs.s.N, g.K = cs.s.K, g.win = win;
            g.sa_m = cs.s.sa_m, g.sa_k = cs.s.sa_k;
            size_t ub = kn_rt_wino_upack(&g, NULL);
            char *mem = malloc(ub + 64);
            void *kept = mem ? mem + (64 - (uintptr_t)mem % 64) % 64 : NULL, *A0 = malloc((size_t)cs.na * 4);
            if (CHECK(ub > 0 && kept && A0) && CHECK(kn_rt_wino_upack(&g, kept) == ub)) {
                KnParallel par = {counted_for, 2, lend, &lender, kn_rt_conv, kn_rt_conv_work, NULL};
                memcpy(A0, cs.A, (size_t)cs.na * 4);
                for (int64_t i = 0; i < cs.na; i++) set(cs.A, GEMM_F32, i, 1e30); /* b[7] is the weights now */
                port_set_threads(2);
                case_bufs(&cs, bufs);
                bufs[4] = &par, bufs[7] = kept;
                f(bufs);
                CHECK_MSG(memcmp(cs.Cg, Cg1, bytes) == 0, "library winograd, U kept: C differs from transforming A");
                port_set_threads(0);
                memcpy(cs.A, A0, (size_t)cs.na * 4);
                lib_conv_runs++;
            }
            free(mem), free(A0);
        }
    }
    free(Cg1);
    port_jit_free(m);
    free(src);
    case_free(&cs);
}

/* GEMM_LENT (backend c's small products): the unit calls the kn_rt_gemm b[4] lends (KnParallel.gemm), on
 * one thread and 3, and with b[4] NULL or lending no gemm its scalar product (NAME_direct); against the
 * reference each time: plain, transposed and batched operands, a convolution's window (forward and
 * the weight gradient's), bias, each act, the epilogue. */
static int lent_gemm_runs;
static void lent_case(int dt, int64_t batch, int64_t M, int64_t N, int64_t K, int la, int lb, int bias, int act, int epi)
{
    Case cs;
    void *bufs[8];
    char why[256];
    case_init(&cs, dt, batch, M, N, K, la, lb, bias, act);
    memset(&g_win, 0, sizeof g_win);
    if (epi) case_epilogue(&cs);
    char *src = with_epilogue(&cs, render(&cs.s, GEMM_LENT));
    CHECK(src && strstr(src, "kn_rt_gemm, lent") != NULL);
    PortModule *m = src ? c_jit(PORT_CC, src, NULL, why) : NULL;
    CHECK_MSG(m != NULL, "cc lent gemm: %s", src ? why : "render");
    void *p = m ? port_jit_sym(m, "kgemm") : NULL;
    if (m && CHECK(p != NULL)) {
        Kern f;
        memcpy(&f, &p, sizeof p);
        KnParallel none = {counted_for, 2, NULL, NULL, NULL, NULL, NULL};
        for (int i = 0; i < 4; i++) { /* b[4] NULL, no gemm lent, then kn_rt_gemm on one thread and 3 */
            KnParallel par = {counted_for, i == 3 ? 3 : 1, NULL, NULL, NULL, NULL, kn_rt_gemm};
            port_set_threads(i == 3 ? 3 : 1);
            case_bufs(&cs, bufs);
            bufs[4] = i == 0 ? NULL : i == 1 ? &none : &par, bufs[7] = NULL;
            f(bufs);
            case_check(&cs, i < 2 ? "lent gemm, none lent" : "lent gemm");
            lent_gemm_runs++;
        }
        port_set_threads(0);
    }
    port_jit_free(m);
    free(src);
    case_free(&cs);
}

static void test_render_api(void)
{
    GemmSpec s = {"g", GEMM_F32, 1, 4, 4, 4, 16, 4, 1, 16, 4, 1, 0, GEMM_ACT_NONE, NULL, 0, 0, {0}, 0, 0, 0};
    char small[16];
    size_t n = gemm_render(&s, GEMM_SIMD, NULL, 0);
    CHECK(n > 100);
    CHECK(gemm_render(&s, GEMM_SIMD, small, sizeof small) == n);
    CHECK(strlen(small) == sizeof small - 1);
    s.M = 0;
    CHECK(gemm_render(&s, GEMM_SCALAR, NULL, 0) == 0);
    s.M = 4, s.name = "1bad";
    CHECK(gemm_render(&s, GEMM_SCALAR, NULL, 0) == 0);
    s.name = "g", s.act = 7;
    CHECK(gemm_render(&s, GEMM_SCALAR, NULL, 0) == 0);
    s.act = 0;
    s.ukeep = 1; /* the weights' transform kept: only with wino */
    CHECK(gemm_render(&s, GEMM_SIMD, NULL, 0) == 0);
    s.ukeep = 0;
    s.wino = 3; /* 0, 1 or 2 */
    CHECK(gemm_render(&s, GEMM_SIMD, NULL, 0) == 0);
    s.wino = 0;
    s.bkeep = 1; /* B kept packed: one strided B for every batch index */
    CHECK(gemm_render(&s, GEMM_SIMD, NULL, 0) > n);
    s.batch = 2;
    CHECK(gemm_render(&s, GEMM_SIMD, NULL, 0) == 0);
    s.sb_b = 0;
    CHECK(gemm_render(&s, GEMM_SIMD, NULL, 0) > 0);
    s.batch = 1, s.win.on = 1;
    CHECK(gemm_render(&s, GEMM_SIMD, NULL, 0) == 0);
    s.win.on = 0, s.bkeep = 0, s.sb_b = 16;
    CHECK(gemm_render(&s, 9, NULL, 0) == 0);
}

int main(void)
{
    static const struct {
        int64_t batch, M, N, K;
    } shapes[] = {{1, 1, 1, 1}, {1, 7, 13, 5}, {1, 65, 33, 129}, {1, 128, 128, 128}, {3, 17, 40, 33}, {2, 9, 70, 300},
                  {1, 67, 517, 41}, {2, 33, 70, 300}};
    /* (layout A, layout B, bias, act) per shape */
    static const int variants[][4] = {
        {0, 0, 0, GEMM_ACT_NONE}, {1, 0, 1, GEMM_ACT_RELU}, {0, 1, 1, GEMM_ACT_GELU_TANH},
        {1, 1, 0, GEMM_ACT_RELU}, {2, 2, 1, GEMM_ACT_NONE}, {0, 3, 0, GEMM_ACT_GELU_TANH},
    };
    int tcc = port_jit_available(PORT_TCC), cc = port_jit_available(PORT_CC);
    size_t i, j;
    int64_t i64b, i64n, i64k;

    test_render_api();
    if (!tcc) printf("SKIP gemm scalar dialect: no TinyCC JIT in this build\n");
    if (!cc) printf("SKIP gemm SIMD dialect: no system C compiler JIT here\n");
    if (tcc || cc) {
        for (i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (j = 0; j < sizeof variants / sizeof variants[0]; j++)
                run_case(tcc, cc, GEMM_F32, shapes[i].batch, shapes[i].M, shapes[i].N, shapes[i].K, variants[j][0],
                         variants[j][1], variants[j][2], variants[j][3], 0);
        run_case(tcc, cc, GEMM_F64, 1, 7, 13, 5, 0, 0, 1, GEMM_ACT_RELU, 0);
        run_case(tcc, cc, GEMM_F64, 2, 65, 33, 129, 1, 2, 1, GEMM_ACT_GELU_TANH, 0);
        /* an epilogue on every tile: edge tiles, batches, K blocks, threads */
        for (i = 1; i < sizeof shapes / sizeof shapes[0]; i++)
            run_case(tcc, cc, GEMM_F32, shapes[i].batch, shapes[i].M, shapes[i].N, shapes[i].K, 0, 1, 1,
                     GEMM_ACT_RELU, 1);
        run_case(tcc, cc, GEMM_F64, 2, 65, 33, 129, 1, 2, 0, GEMM_ACT_NONE, 1);
        if (cc) { /* backend c's text: this machine's copy only */
            host_case(GEMM_F32, 2, 33, 70, 300, 1, 0, 1, GEMM_ACT_GELU_TANH, 1);
            host_case(GEMM_F32, 1, 67, 517, 41, 0, 1, 0, GEMM_ACT_RELU, 0);
            host_case(GEMM_F64, 3, 17, 40, 33, 2, 2, 1, GEMM_ACT_NONE, 0);
        }
        /* other cache blocks (what max-autotune tries): more K and M blocks, uneven ones */
        g_kc = 64, g_mc = 18;
        run_case(tcc, cc, GEMM_F32, 2, 33, 70, 300, 0, 1, 1, GEMM_ACT_GELU_TANH, 1);
        g_kc = 100, g_mc = 7;
        run_case(tcc, cc, GEMM_F32, 1, 128, 128, 128, 2, 0, 0, GEMM_ACT_NONE, 0);
        g_kc = g_mc = 0;
        /* B as a convolution's window (implicit GEMM): the forward's (C*KH*KW, N*OH*OW) and the weight
         * gradient's transpose, odd sizes, stride, padding, dilation, groups, a strided input, threads */
        static const int64_t wins[][15] = {
            /* t, n, groups, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, M */
            {0, 2, 2, 3, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 5},   {0, 1, 1, 5, 11, 10, 3, 2, 2, 1, 0, 2, 1, 2, 17},
            {1, 2, 2, 3, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 4},   {1, 4, 1, 8, 17, 17, 3, 3, 2, 2, 1, 1, 1, 1, 9},
            {0, 2, 1, 16, 33, 33, 3, 3, 1, 1, 1, 1, 1, 1, 64}, {1, 1, 3, 2, 5, 6, 1, 1, 1, 1, 0, 0, 1, 1, 3},
            {0, 3, 1, 4, 9, 9, 1, 1, 2, 2, 0, 0, 1, 1, 7},
        };
        for (i = 0; i < sizeof wins / sizeof wins[0]; i++) {
            const int64_t *v = wins[i];
            int64_t batch, N, K;
            win_geometry((int)v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13],
                         &batch, &N, &K);
            run_case(tcc, cc, GEMM_F32, batch, v[14], N, K, (int)(i % 2), 0, (int)(i % 2), GEMM_ACT_NONE, 0);
            if (cc && i == 1) host_case(GEMM_F32, batch, v[14], N, K, 0, 0, 1, GEMM_ACT_RELU, 1);
        }
        /* several K blocks of uneven starts: the forward's rows (kernel offsets) and the weight
         * gradient's (output positions) begin mid-row in each */
        g_kc = 40;
        for (i = 0; i < 2; i++) {
            int64_t batch, N, K;
            win_geometry((int)i, 2, 1, 7, 13, 11, 3, 3, 1 + (int64_t)i, 1, 1, 1, 1, 1, &batch, &N, &K);
            run_case(tcc, cc, GEMM_F32, batch, 9, N, K, (int)i, 0, 1, GEMM_ACT_NONE, 0);
        }
        g_kc = 0;
        win_geometry(1, 2, 1, 3, 6, 5, 2, 2, 1, 2, 1, 0, 2, 1, &i64b, &i64n, &i64k);
        run_case(tcc, cc, GEMM_F64, i64b, 6, i64n, i64k, 0, 0, 0, GEMM_ACT_NONE, 0);
        memset(&g_win, 0, sizeof g_win);
        /* few columns per task, so the tasks pack A once, together (SHARE_COLS): odd M (edge row panels
         * split between the packing tasks), one K block and several, uneven ones, f64, a late
         * convolution stage's window (M = channels out > N = columns) */
        run_case(tcc, cc, GEMM_F32, 1, 203, 37, 300, 0, 0, 1, GEMM_ACT_RELU, 0);
        run_case(tcc, cc, GEMM_F32, 1, 131, 61, 150, 1, 2, 0, GEMM_ACT_NONE, 1);
        g_kc = 64, g_mc = 18;
        run_case(tcc, cc, GEMM_F32, 1, 203, 37, 300, 2, 1, 1, GEMM_ACT_GELU_TANH, 0);
        g_kc = g_mc = 0;
        run_case(tcc, cc, GEMM_F64, 1, 75, 29, 500, 0, 1, 1, GEMM_ACT_NONE, 0);
        /* one column block (N <= NR): the tasks split the rows (ROWS), edge row panels, K blocks, epilogues */
        run_case(tcc, cc, GEMM_F32, 1, 203, 10, 600, 0, 1, 1, GEMM_ACT_RELU, 1);
        run_case(tcc, cc, GEMM_F32, 1, 128, 10, 512, 1, 0, 1, GEMM_ACT_NONE, 0);
        run_case(tcc, cc, GEMM_F64, 2, 61, 3, 3000, 2, 3, 0, GEMM_ACT_GELU_TANH, 0);
        win_geometry(0, 2, 1, 19, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, &i64b, &i64n, &i64k);
        run_case(tcc, cc, GEMM_F32, i64b, 131, i64n, i64k, 0, 0, 1, GEMM_ACT_RELU, 1);
        if (cc) host_case(GEMM_F32, i64b, 131, i64n, i64k, 1, 0, 0, GEMM_ACT_NONE, 0);
        memset(&g_win, 0, sizeof g_win);
        if (cc) { /* B kept packed: edge panels, K blocks (even and uneven), a broadcast B, threads, epilogues */
            keep_case(GEMM_SIMD, GEMM_F32, 1, 128, 10, 512, 0, 1, 1, GEMM_ACT_NONE, 0);
            keep_case(GEMM_SIMD_HOST, GEMM_F32, 1, 67, 517, 600, 0, 1, 1, GEMM_ACT_RELU, 1);
            keep_case(GEMM_SIMD_HOST, GEMM_F32, 3, 17, 40, 33, 1, 3, 0, GEMM_ACT_GELU_TANH, 0);
            keep_case(GEMM_SIMD_HOST, GEMM_F64, 1, 65, 33, 300, 2, 0, 1, GEMM_ACT_NONE, 0);
            g_kc = 64, g_mc = 18;
            keep_case(GEMM_SIMD_HOST, GEMM_F32, 1, 203, 37, 300, 0, 1, 1, GEMM_ACT_RELU, 1);
            g_kc = g_mc = 0;
            CHECK(keep_runs == 10);
        }
        if (cc) {
            /* n, c, h, w, pad, M (channels out), bias, act, epilogue */
            wino_case(GEMM_F32, 1, 17, 9, 11, 1, 19, 0, GEMM_ACT_NONE, 0);
            wino_case(GEMM_F32, 3, 5, 7, 5, 0, 33, 1, GEMM_ACT_RELU, 1);
            wino_case(GEMM_F32, 3, 33, 13, 15, 1, 7, 0, GEMM_ACT_GELU_TANH, 1);
            wino_case(GEMM_F32, 2, 1100, 15, 15, 1, 64, 0, GEMM_ACT_NONE, 1); /* 3 chunks (cut mid-image), transposed GEMM */
            wino_case(GEMM_F32, 1, 3, 3, 3, 0, 2, 0, GEMM_ACT_NONE, 0);    /* one output */
            wino_case(GEMM_F32, 2, 9, 32, 32, 1, 18, 1, GEMM_ACT_RELU, 0); /* 16 tiles a row: a vector each */
            wino_case(GEMM_F64, 3, 17, 6, 7, 1, 21, 1, GEMM_ACT_NONE, 1);
            /* t (a weights' gradient), n, c, h, w, pad, M (channels out), bias, act, epilogue */
            lib_conv_case(0, 1, 17, 9, 11, 1, 19, 0, GEMM_ACT_NONE, 0);
            lib_conv_case(0, 3, 5, 7, 5, 0, 33, 1, GEMM_ACT_RELU, 1);
            lib_conv_case(0, 2, 40, 16, 16, 1, 24, 0, GEMM_ACT_NONE, 1);
            lib_conv_case(1, 16, 5, 8, 8, 1, 24, 0, GEMM_ACT_NONE, 0);
            lib_conv_case(1, 14, 3, 9, 10, 0, 53, 0, GEMM_ACT_NONE, 1);
            CHECK(lib_conv_runs == 13);
            /* dt, batch, M, N, K, layout A, layout B, bias, act, epilogue */
            lent_case(GEMM_F32, 1, 16, 10, 512, 0, 0, 1, GEMM_ACT_NONE, 0);
            lent_case(GEMM_F32, 3, 17, 33, 65, 1, 1, 0, GEMM_ACT_RELU, 1);
            lent_case(GEMM_F64, 2, 9, 40, 7, 2, 3, 1, GEMM_ACT_GELU_TANH, 0);
            int64_t wb, wn, wk; /* a window: conv forward, then the weight gradient's */
            win_geometry(0, 2, 1, 3, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, &wb, &wn, &wk);
            lent_case(GEMM_F32, wb, 8, wn, wk, 0, 0, 0, GEMM_ACT_NONE, 1);
            win_geometry(1, 2, 1, 3, 9, 11, 3, 3, 2, 2, 1, 1, 1, 1, &wb, &wn, &wk);
            lent_case(GEMM_F32, wb, 8, wn, wk, 1, 0, 0, GEMM_ACT_NONE, 0);
            CHECK(lent_gemm_runs == 20);
            printf("gemm: winograd %d units run, %d runs with the weights' transform kept\n", wino_cases, ukeep_runs);
            printf("gemm: SIMD ISA copies run: base %d, avx2 %d, avx512 %d cases; %d threaded runs split, "
                   "%d of them with A packed once, shared, %d by rows\n",
                   isa_runs[0], isa_runs[1], isa_runs[2], par_runs, shared_runs, row_runs);
            CHECK(shared_runs > 0 && unshared_runs > 0 && row_runs > 0); /* every threaded path ran */
            printf("gemm: %d runs in lent scratch (the most asked for %zu bytes)\n", lent_runs, lender.most);
            CHECK(lent_runs > 0);
            free(lender.raw);
        }
    }
    TEST_END("gemm");
}
