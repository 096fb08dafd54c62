/*
 * test_gemm_rt.c — src/gemm_rt.c: kn_rt_gemm against a naive loop
 * accumulated in double. Sizes 1 to 257 (odd ones, edges of every tile
 * and block), operands row-major, transposed, with padded rows, and
 * broadcast over the batch (stride 0); bias and each activation; f32 and
 * f64; batches of 1 to 3. Accuracy: |C - ref| <= (K + 2) u sum_k |a b| +
 * |bias| (the classical bound, u the unit roundoff) plus a few ulp for the
 * activation. Guard values either side of C must survive, C's old contents
 * must not leak in. Scratch from work or from the stack, one thread or 2
 * and 3 tasks: bitwise the same C. Each copy of the micro-kernel the CPU
 * has (kn_rt_gemm_cap; kn_rt_wino's and kn_rt_conv's copies too). The interpreter's dot, which runs it,
 * on views (broadcast, permuted and transposed operands) too.
 */
#include <stdlib.h>

#include "../port/port.h"
#include "../src/gemm_rt.h"
#include "../src/target.h"
#include "test.h"

enum { GUARD = 19 };
static const double SENTINEL = 4321.0;

static unsigned rng = 777u;
static double rnd(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (double)(rng >> 8) / (double)(1u << 24) * 2.0 - 1.0;
}

/* operand [batch][R][Cc] with layout 0 row-major, 1 transposed, 2 padded rows and batches,
 * 3 broadcast over the batch; returns its element count */
static int64_t layout(int lay, int64_t batch, int64_t R, int64_t Cc, int64_t *sb, int64_t *sr, int64_t *sc)
{
    switch (lay) {
    case 1: *sr = 1, *sc = R, *sb = R * Cc; return batch * R * Cc;
    case 2: *sr = Cc + 3, *sc = 1, *sb = R * (Cc + 3) + 5; return batch * *sb;
    case 3: *sr = Cc, *sc = 1, *sb = 0; return R * Cc;
    default: *sr = Cc, *sc = 1, *sb = R * Cc; return batch * R * Cc;
    }
}

static double get(const void *p, int dt, int64_t i)
{
    return dt == GEMM_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static void set(void *p, int dt, int64_t i, double v)
{
    if (dt == GEMM_F32) ((float *)p)[i] = (float)v;
    else ((double *)p)[i] = v;
}

static double act_ref(int act, double x)
{
    if (act == GEMM_ACT_RELU) return x < 0 ? 0 : x;
    if (act == GEMM_ACT_GELU_TANH) return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    return x;
}

typedef struct {
    KnRtGemm g;
    void *A, *B, *bias, *Cg; /* Cg: C with GUARD elements either side */
    double *ref, *mag;
    size_t es;
    void (*fn)(const KnRtGemm *); /* what computes C: kn_rt_gemm, kn_rt_wino or kn_rt_conv */
    double slack;                 /* its error bound over the classical one */
} Case;

static void case_ref(Case *c);

static void case_init(Case *c, int dt, int64_t batch, int64_t M, int64_t N, int64_t K, int la, int lb, int bias, int act)
{
    KnRtGemm *g = &c->g;
    memset(c, 0, sizeof *c);
    c->es = dt == GEMM_F32 ? 4 : 8;
    c->fn = kn_rt_gemm, c->slack = 1;
    g->dtype = dt, g->act = act;
    g->batch = batch, g->M = M, g->N = N, g->K = K;
    int64_t na = layout(la, batch, M, K, &g->sa_b, &g->sa_m, &g->sa_k);
    int64_t nb = layout(lb, batch, K, N, &g->sb_b, &g->sb_k, &g->sb_n), nc = batch * M * N;
    c->A = malloc((size_t)na * c->es);
    c->B = malloc((size_t)nb * c->es);
    c->bias = bias ? malloc((size_t)N * c->es) : NULL;
    c->Cg = malloc((size_t)(nc + 2 * GUARD) * c->es);
    c->ref = malloc((size_t)nc * sizeof(double));
    c->mag = malloc((size_t)nc * sizeof(double));
    for (int64_t i = 0; i < na; i++) set(c->A, dt, i, rnd());
    for (int64_t i = 0; i < nb; i++) set(c->B, dt, i, rnd());
    for (int64_t i = 0; bias && i < N; i++) set(c->bias, dt, i, rnd());
    g->A = c->A, g->B = c->B, g->bias = c->bias;
    g->C = (char *)c->Cg + GUARD * c->es;
    case_ref(c);
}

/* the reference C of the case's A, B and bias */
static void case_ref(Case *c)
{
    const KnRtGemm *g = &c->g;
    int dt = g->dtype, act = g->act;
    int64_t batch = g->batch, M = g->M, N = g->N, K = g->K;
    for (int64_t t = 0; t < batch; t++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double acc = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) {
                    double p = get(c->A, dt, t * g->sa_b + m * g->sa_m + k * g->sa_k) *
                               get(c->B, dt, t * g->sb_b + k * g->sb_k + n * g->sb_n);
                    acc += p, mag += fabs(p);
                }
                if (c->bias) acc += get(c->bias, dt, n), mag += fabs(get(c->bias, dt, n));
                c->ref[(t * M + m) * N + n] = act_ref(act, acc);
                c->mag[(t * M + m) * N + n] = mag;
            }
}

static void case_free(Case *c) { free(c->A), free(c->B), free(c->bias), free(c->Cg), free(c->ref), free(c->mag); }

/* runs the case into C prefilled with SENTINEL; 1 if C and its guards are right */
static int case_run(Case *c, const char *what)
{
    const KnRtGemm *g = &c->g;
    int dt = g->dtype;
    int64_t nc = g->batch * g->M * g->N;
    double u = dt == GEMM_F32 ? 0x1p-24 : 0x1p-53, worst = 0;
    int64_t bad = -1;
    for (int64_t i = 0; i < nc + 2 * GUARD; i++) set(c->Cg, dt, i, SENTINEL);
    c->fn(g);
    for (int64_t i = 0; i < nc; i++) {
        double x = get(g->C, dt, i), r = c->ref[i];
        double tol = c->slack * (g->K + 2) * u * c->mag[i] + 8 * u * fabs(r) + 1e-300;
        double e = fabs(x - r) / tol;
        if (!(e <= 1)) {
            if (bad < 0) bad = i;
            worst = e > worst || e != e ? e : worst;
        }
    }
    int guards = 1;
    for (int64_t i = 0; i < GUARD; i++)
        guards = guards && get(c->Cg, dt, i) == SENTINEL && get(c->Cg, dt, GUARD + nc + i) == SENTINEL;
    CHECK_MSG(bad < 0 && guards, "%s: %s batch %lld, %lldx%lldx%lld (M N K), strides A (%lld %lld %lld) B (%lld %lld %lld), bias %d, act %d: "
              "element %lld off by %.3g of its bound, guards %s", what, dt == GEMM_F32 ? "f32" : "f64", (long long)g->batch,
              (long long)g->M, (long long)g->N, (long long)g->K, (long long)g->sa_b, (long long)g->sa_m, (long long)g->sa_k,
              (long long)g->sb_b, (long long)g->sb_k, (long long)g->sb_n, g->bias != NULL, g->act, (long long)bad, worst,
              guards ? "intact" : "overwritten");
    return bad < 0 && guards;
}

static const int64_t sizes[] = {1, 2, 3, 5, 7, 17, 33, 67, 129, 257};
enum { NS = sizeof sizes / sizeof sizes[0] };

/* every size as M, N and K (with the others spread over the list), each layout pair */
static void test_shapes(void)
{
    for (int dt = GEMM_F32; dt <= GEMM_F64; dt++)
        for (int i = 0; i < NS; i++)
            for (int lay = 0; lay < 4; lay++) {
                Case c;
                int64_t M = sizes[i], N = sizes[(i + 3) % NS], K = sizes[(i + 7) % NS];
                int la = lay, lb = (lay + 1 + i) % 4, batch = 1 + (i + lay) % 3;
                case_init(&c, dt, batch, M, N, K, la, lb, (i + lay) % 2, (i + lay + dt) % 3);
                case_run(&c, "shapes");
                case_free(&c);
            }
}

/* squares and edges of the f32 tiles (4 x 8, 6 x 16, 8 x 32) and blocks (KC 256, 128, MC 96, NC 256) */
static void test_edges(void)
{
    static const int64_t e[][3] = {{1, 1, 1}, {6, 16, 1}, {7, 17, 255}, {95, 257, 256}, {97, 255, 257},
                                   {96, 256, 513}, {13, 300, 129}, {200, 9, 300}, {8, 32, 3}, {9, 33, 65},
                                   {64, 96, 200}, {65, 63, 17}};
    for (int dt = GEMM_F32; dt <= GEMM_F64; dt++)
        for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
            for (int act = 0; act < 3; act++) {
                Case c;
                case_init(&c, dt, 1, e[i][0], e[i][1], e[i][2], (int)i % 3, act, act != 1, act);
                case_run(&c, "edges");
                case_free(&c);
            }
}

/* work or stack, one thread or several, folded batch or not: bitwise the same C */
static void test_same_bits(void)
{
    static const int64_t e[][5] = {
        /* batch, M, N, K, B's layout */
        {1, 129, 257, 67, 0}, /* split by columns */
        {1, 257, 5, 1000, 1}, /* narrow: split by rows */
        {3, 67, 129, 70, 3},  /* broadcast B, contiguous A: one 201-row product */
        {2, 70, 33, 300, 2},
    };
    for (int dt = GEMM_F32; dt <= GEMM_F64; dt++)
        for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) {
            Case c;
            case_init(&c, dt, e[i][0], e[i][1], e[i][2], e[i][3], 0, (int)e[i][4], 1, GEMM_ACT_GELU_TANH);
            size_t bytes = (size_t)(c.g.batch * c.g.M * c.g.N) * c.es;
            void *one = malloc(bytes);
            if (!CHECK(case_run(&c, "one thread, stack"))) goto next;
            memcpy(one, c.g.C, bytes);
            for (int th = 1; th <= 3; th++)
                for (int w = 0; w < 2; w++) {
                    c.g.parallel_for = th > 1 ? port_parallel_for : NULL;
                    c.g.threads = th;
                    c.g.work_bytes = w ? kn_rt_gemm_work(&c.g) : 0;
                    c.g.work = w ? malloc(c.g.work_bytes) : NULL;
                    CHECK(case_run(&c, "threads, work"));
                    CHECK_MSG(!memcmp(one, c.g.C, bytes), "case %zu, %s, %d threads, %s: differs from one thread", i,
                              dt == GEMM_F32 ? "f32" : "f64", th, w ? "work" : "stack");
                    free(c.g.work);
                    c.g.work = NULL;
                }
            if (c.g.sb_b == 0) { /* the same product batch by batch, unfolded */
                Case d = c;
                for (int64_t t = 0; t < c.g.batch; t++) {
                    d.g.batch = 1;
                    d.g.A = (const char *)c.A + (size_t)(t * c.g.sa_b) * c.es;
                    d.g.C = (char *)c.g.C + (size_t)(t * c.g.M * c.g.N) * c.es;
                    kn_rt_gemm(&d.g);
                }
                CHECK_MSG(!memcmp(one, c.g.C, bytes), "case %zu: folded batch differs from batch by batch", i);
            }
        next:
            free(one);
            case_free(&c);
        }
}

/* too little work given: the stack, not a write past it */
static void test_small_work(void)
{
    Case c;
    case_init(&c, GEMM_F32, 1, 40, 50, 60, 0, 0, 0, 0);
    char buf[64 + 16];
    memset(buf, 0x5a, sizeof buf);
    c.g.work = buf, c.g.work_bytes = 64;
    CHECK(kn_rt_gemm_work(&c.g) > 64);
    CHECK(case_run(&c, "small work"));
    int intact = 1;
    for (size_t i = 0; i < sizeof buf; i++) intact = intact && buf[i] == 0x5a;
    CHECK(intact);
    case_free(&c);
}

/* The interpreter's dot (eager kn_matmul) on views: A (2, 3, M, K) contiguous times B (K, N) broadcast (one
 * call, folded), and A stored (3, 2, M, K) permuted times B stored (3, N, K) transposed, broadcast over the
 * first dim (batch dims that do not flatten: a call per batch index). */
static void test_interp(void)
{
    enum { D0 = 2, D1 = 3, M = 33, K = 70, N = 17 };
    kn_ctx *ctx = kn_ctx_new(NULL);
    double *a = malloc(sizeof(double) * D0 * D1 * M * K), *b = malloc(sizeof(double) * D1 * N * K);
    double *got = malloc(sizeof(double) * D0 * D1 * M * N);
    float *af = malloc(sizeof(float) * D0 * D1 * M * K), *bf = malloc(sizeof(float) * D1 * N * K);
    float *gotf = malloc(sizeof(float) * D0 * D1 * M * N);
    for (int i = 0; i < D0 * D1 * M * K; i++) af[i] = (float)rnd(), a[i] = af[i];
    for (int i = 0; i < D1 * N * K; i++) bf[i] = (float)rnd(), b[i] = bf[i];
    for (int dt = 0; dt < 2; dt++)
        for (int views = 0; views < 2; views++) {
            kn_dtype kd = dt ? KN_F64 : KN_F32;
            int64_t sa[4] = {views ? D1 : D0, views ? D0 : D1, M, K}, sb2[2] = {K, N}, sb3[3] = {D1, N, K};
            kn_tensor *A = kn_tensor_from(ctx, kd, 4, sa, dt ? (void *)a : (void *)af);
            kn_tensor *B = views ? kn_tensor_from(ctx, kd, 3, sb3, dt ? (void *)b : (void *)bf)
                                 : kn_tensor_from(ctx, kd, 2, sb2, dt ? (void *)b : (void *)bf);
            static const int perm[4] = {1, 0, 2, 3};
            if (views) A = kn_permute(ctx, A, perm), B = kn_transpose(ctx, B, 1, 2);
            kn_tensor *C = kn_matmul(ctx, A, B);
            size_t bytes = (size_t)(D0 * D1 * M * N) * (dt ? 8 : 4);
            int ok = C && kn_read(ctx, C, dt ? (void *)got : (void *)gotf, bytes) == KN_OK;
            CHECK_MSG(ok, "%s", kn_last_error(ctx));
            if (!ok) continue;
            double u = dt ? 0x1p-53 : 0x1p-24;
            int64_t bad = -1;
            for (int i0 = 0; i0 < D0; i0++)
                for (int i1 = 0; i1 < D1; i1++)
                    for (int m = 0; m < M; m++)
                        for (int n = 0; n < N; n++) {
                            double acc = 0, mag = 0;
                            for (int k = 0; k < K; k++) {
                                double x = views ? a[((i1 * D0 + i0) * M + m) * K + k] : a[((i0 * D1 + i1) * M + m) * K + k];
                                double y = views ? b[(i1 * N + n) * K + k] : b[k * N + n];
                                acc += x * y, mag += fabs(x * y);
                            }
                            int64_t o = ((i0 * D1 + i1) * M + m) * N + n;
                            double v = dt ? got[o] : gotf[o];
                            if (!(fabs(v - acc) <= (K + 2) * u * mag) && bad < 0) bad = o;
                        }
            CHECK_MSG(bad < 0, "interp dot %s, %s: element %lld wrong", dt ? "f64" : "f32",
                      views ? "permuted A, transposed B" : "broadcast B", (long long)bad);
        }
    free(a), free(b), free(got), free(af), free(bf), free(gotf);
    kn_ctx_free(ctx);
}

/* B (each of c's batch, groups of win[W_C] channels of x) set to the window win of x written out, and
 * the reference of that product */
static void write_window(Case *c, const int64_t *win, const void *x)
{
    int64_t t0 = win[0], ch = win[2], h = win[3], w = win[4], kh = win[5], kw = win[6], oh = win[7];
    int64_t ow = win[8], sh = win[9], sw = win[10], dh = win[11], dw = win[12], ph = win[13], pw = win[14];
    int64_t sxn = win[15], sxc = win[16], sxh = win[17], sxw = win[18], K = c->g.K, N = c->g.N;
    int dt = c->g.dtype;
    for (int64_t t = 0; t < c->g.batch; t++) /* B[t][k][i], row-major */
        for (int64_t k = 0; k < K; k++)
            for (int64_t col = 0; col < N; col++) {
                int64_t r = t0 ? col : k, j = t0 ? k : col;
                int64_t y = j / ow % oh * sh + r / kw % kh * dh - ph, xx = j % ow * sw + r % kw * dw - pw;
                int in = y >= 0 && y < h && xx >= 0 && xx < w;
                int64_t at = t * ch * sxc + j / (oh * ow) * sxn + r / (kh * kw) * sxc + y * sxh + xx * sxw;
                set(c->B, dt, (t * K + k) * N + col, in ? get(x, dt, at) : 0.0);
            }
    case_ref(c);
}

/* B as a convolution's window view (KnRtGemm.win) against the same product on that window written out
 * (im2col, the GemmWindow contract of src/target.h): within the bound of the reference, and bitwise the
 * same C (the packed panels must be the same), on one thread and on 3 tasks. Odd sizes: padding wider
 * than the kernel (whole rows and runs of zeros), a negative offset (a crop), stride 2 and 3, dilation,
 * groups, 1x1, an input with padded strides, runs crossing output rows and panels, several K and N
 * blocks, and the transposed view (the weight gradient's) likewise. */
static void test_windows(void)
{
    static const int64_t v[][15] = {
        /* t, n, groups, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, M */
        {0, 2, 2, 3, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 5},     {0, 1, 1, 5, 11, 10, 3, 2, 2, 1, 0, 2, 1, 2, 17},
        {0, 2, 1, 40, 9, 13, 3, 3, 1, 1, 1, 1, 1, 1, 7},   {0, 3, 1, 4, 19, 23, 3, 3, 2, 3, 4, 5, 1, 1, 9},
        {0, 2, 3, 2, 8, 8, 3, 3, 1, 1, -1, -1, 1, 1, 4},   {0, 4, 1, 3, 9, 9, 1, 1, 2, 2, 0, 0, 1, 1, 3},
        {0, 1, 1, 2, 33, 37, 2, 3, 1, 1, 0, 1, 3, 2, 2},   {1, 2, 2, 3, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 4},
        {1, 4, 1, 8, 17, 17, 3, 3, 2, 2, 1, 1, 1, 1, 9},   {1, 3, 1, 5, 13, 11, 3, 3, 1, 1, 1, 1, 2, 1, 6},
        {1, 1, 3, 2, 5, 6, 1, 1, 1, 1, 0, 0, 1, 1, 3},     {1, 2, 1, 3, 10, 12, 3, 2, 3, 2, 3, 2, 1, 1, 5},
        {1, 2, 2, 2, 8, 8, 3, 3, 1, 1, -1, -1, 1, 1, 4},
    };
    for (int dt = GEMM_F32; dt <= GEMM_F64; dt++)
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
            const int64_t *p = v[i];
            int64_t n = p[1], groups = p[2], ch = p[3], h = p[4], w = p[5], kh = p[6], kw = p[7], sh = p[8];
            int64_t sw = p[9], ph = p[10], pw = p[11], dh = p[12], dw = p[13], M = p[14];
            int64_t oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1, ow = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
            int64_t sxw = 2, sxh = 2 * w + 1, sxc = h * sxh, sxn = groups * ch * sxc + 3;
            int64_t R = ch * kh * kw, J = n * oh * ow, K = p[0] ? J : R, N = p[0] ? R : J;
            int64_t nx = (n - 1) * sxn + (groups * ch - 1) * sxc + (h - 1) * sxh + (w - 1) * sxw + 1;
            int64_t win[19] = {p[0], n, ch, h, w, kh, kw, oh, ow, sh, sw, dh, dw, ph, pw, sxn, sxc, sxh, sxw};
            Case c;
            case_init(&c, dt, groups, M, N, K, (int)i % 3, 0, (int)i % 2, (int)(i % 3));
            void *x = malloc((size_t)nx * c.es);
            for (int64_t e = 0; e < nx; e++) set(x, dt, e, rnd());
            write_window(&c, win, x);
            size_t bytes = (size_t)(groups * M * N) * c.es;
            void *im2col = malloc(bytes);
            char what[64];
            snprintf(what, sizeof what, "window %zu written out", i);
            if (!CHECK(case_run(&c, what))) goto next;
            memcpy(im2col, c.g.C, bytes);
            c.g.B = x, c.g.win = win, c.g.sb_b = ch * sxc, c.g.sb_k = c.g.sb_n = 0;
            for (int th = 1; th <= 3; th += 2) {
                c.g.parallel_for = th > 1 ? port_parallel_for : NULL, c.g.threads = th;
                snprintf(what, sizeof what, "window %zu, %d threads", i, th);
                CHECK(case_run(&c, what));
                CHECK_MSG(!memcmp(im2col, c.g.C, bytes), "window %zu (%s, t %d), %d threads: C differs from the "
                          "written-out window's", i, dt == GEMM_F32 ? "f32" : "f64", (int)p[0], th);
            }
        next:
            free(x), free(im2col);
            case_free(&c);
        }
}

/* The worst error of the case's C as a fraction of the classical bound over K terms (for the slacks'
 * comments) */
static double worst_error(const Case *c, int64_t K)
{
    double worst = 0;
    for (int64_t e = 0; e < c->g.M * c->g.N; e++) {
        double d = fabs(((const float *)c->g.C)[e] - c->ref[e]) / ((K + 2) * 0x1p-24 * c->mag[e] + 1e-300);
        worst = d > worst ? d : worst;
    }
    return worst;
}

/* With a byte less work than work() asks for on one thread, the case's routine computes as kn_rt_gemm
 * does: the same C bitwise (one: room for C). Leaves the case on kn_rt_gemm with no work. */
static void short_work_is_gemm(Case *c, size_t (*work)(const KnRtGemm *), void *one, const char *what, size_t i)
{
    size_t bytes = (size_t)(c->g.M * c->g.N) * sizeof(float);
    char msg[64];
    c->g.parallel_for = NULL, c->g.threads = 1; /* the work depends on the threads */
    c->g.work_bytes = work(&c->g) - 1;
    snprintf(msg, sizeof msg, "%s, work short", what);
    CHECK(case_run(c, msg));
    memcpy(one, c->g.C, bytes);
    c->fn = kn_rt_gemm, c->g.work = NULL, c->g.work_bytes = 0;
    snprintf(msg, sizeof msg, "%s case by kn_rt_gemm", what);
    CHECK(case_run(c, msg));
    CHECK_MSG(!memcmp(one, c->g.C, bytes), "%s %zu: with work short, C differs from kn_rt_gemm's", what, i);
}

/* kn_rt_wino (F(4x4, 3x3)) against the double reference of the window written out: within WINO_SLACK
 * times the classical bound (measured: at most 2.7 times it over these cases; with one coefficient of
 * B^T or G off by 1e-4 of itself, 30 and 263 times: KILN_TEST_VERBOSE=1 prints the worst), on
 * one thread and on 3 tasks, bitwise the same C, also with the weights' transform kept
 * (kn_rt_wino_upack, A overwritten after); with a byte of work short, kn_rt_gemm's C bitwise.
 * Tiles cut by the output's edge (sizes not multiples of 4, one 3 wide), padding 0, 1 and 2 and a crop,
 * an input with padded strides, channels in and out not multiples of the 16 lanes, bias, relu, and
 * tiles enough for two chunks. */
enum { WINO_SLACK = 8 };
static void test_wino(void)
{
    static const int64_t v[][9] = {
        /* n, c, h, w, ph, pw, M (channels out), sxw, bias + 2 relu */
        {1, 3, 7, 9, 1, 1, 5, 1, 0},  {2, 17, 8, 8, 1, 1, 17, 2, 1},  {1, 1, 13, 5, 0, 0, 33, 1, 2},
        {2, 5, 6, 11, 2, 2, 16, 1, 3}, {1, 4, 10, 10, -1, 0, 3, 1, 0}, {4, 64, 33, 33, 1, 1, 64, 1, 3},
    };
    double worst_all = 0;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        const int64_t *p = v[i];
        int64_t n = p[0], ch = p[1], h = p[2], w = p[3], ph = p[4], pw = p[5], M = p[6], sxw = p[7];
        int64_t oh = h + 2 * ph - 2, ow = w + 2 * pw - 2, sxh = w * sxw + 3, sxc = h * sxh, sxn = ch * sxc + 1;
        int64_t nx = (n - 1) * sxn + (ch - 1) * sxc + (h - 1) * sxh + (w - 1) * sxw + 1, N = n * oh * ow;
        int64_t win[19] = {0, n, ch, h, w, 3, 3, oh, ow, 1, 1, 1, 1, ph, pw, sxn, sxc, sxh, sxw};
        Case c;
        case_init(&c, GEMM_F32, 1, M, N, 9 * ch, (int)i % 3, 0, (int)(p[8] & 1), p[8] & 2 ? GEMM_ACT_RELU : 0);
        float *x = malloc((size_t)nx * sizeof *x);
        for (int64_t e = 0; e < nx; e++) x[e] = (float)rnd();
        write_window(&c, win, x);
        c.g.B = x, c.g.win = win, c.g.sb_b = c.g.sb_k = c.g.sb_n = 0;
        c.g.parallel_for = port_parallel_for, c.g.threads = 3; /* the most work: each task has its V and M */
        size_t need = kn_rt_wino_work(&c.g), bytes = (size_t)(M * N) * sizeof(float);
        CHECK_MSG(need > 0, "wino %zu: kn_rt_wino_work is 0, so it would compute directly", i);
        void *work = malloc(need), *one = malloc(bytes);
        c.fn = kn_rt_wino, c.slack = WINO_SLACK, c.g.work = work, c.g.work_bytes = need;
        char what[64];
        for (int th = 1; th <= 3; th += 2) {
            c.g.parallel_for = th > 1 ? port_parallel_for : NULL, c.g.threads = th;
            snprintf(what, sizeof what, "wino %zu, %d threads", i, th);
            CHECK(case_run(&c, what));
            if (th == 1) memcpy(one, c.g.C, bytes);
            else CHECK_MSG(!memcmp(one, c.g.C, bytes), "wino %zu: C on 3 tasks differs from one thread's", i);
        }
        /* the weights' transform kept (kn_rt_wino_upack), A then overwritten: the same C bitwise */
        int64_t lb, lr, lc, na = layout((int)i % 3, 1, M, 9 * ch, &lb, &lr, &lc); /* A's elements */
        size_t ub = kn_rt_wino_upack(&c.g, NULL);
        char *ubuf = malloc(ub + 64), *a0 = malloc((size_t)na * sizeof(float));
        float *u = ubuf ? (float *)(ubuf + (64 - (uintptr_t)ubuf % 64) % 64) : NULL;
        if (CHECK(ub > 0 && u && a0) && CHECK(kn_rt_wino_upack(&c.g, u) == ub)) {
            memcpy(a0, c.A, (size_t)na * sizeof(float));
            for (int64_t e = 0; e < na; e++) ((float *)c.A)[e] = 1e30f;
            c.g.wino_u = u;
            for (int th = 1; th <= 3; th += 2) {
                c.g.parallel_for = th > 1 ? port_parallel_for : NULL, c.g.threads = th;
                CHECK(case_run(&c, "wino, U kept"));
                CHECK_MSG(!memcmp(one, c.g.C, bytes), "wino %zu, U kept, %d threads: C differs", i, th);
            }
            c.g.wino_u = NULL;
            memcpy(c.A, a0, (size_t)na * sizeof(float));
        }
        free(ubuf), free(a0);
        double worst = worst_error(&c, 9 * ch);
        worst_all = worst > worst_all ? worst : worst_all;
        short_work_is_gemm(&c, kn_rt_wino_work, one, "wino", i);
        free(work), free(one), free(x);
        case_free(&c);
    }
    if (getenv("KILN_TEST_VERBOSE")) printf("wino: worst error %.3g of the classical bound\n", worst_all);
}

/* kn_rt_conv on a weights' gradient (a transposed 3x3 stride-1 window, t 1; src/conv_rt.c: the images
 * in the lanes) against the double reference of the window written out, within the classical bound (it
 * sums in another order, not beyond it: KILN_TEST_VERBOSE=1 prints the worst); on one thread and on 3
 * tasks, bitwise the same C; with a byte of work short, kn_rt_gemm's C bitwise. A batch of 16, of 13
 * (lanes left empty) and of 29 (two vectors of images), padding 0, 1 and 2 and crops, an input with
 * padded strides (one with columns 2 apart), A row-major, transposed and with padded rows, output
 * channels odd (the last block of two half empty), channels enough for two groups (products of 2^20
 * multiply-adds at least: it leaves smaller ones to kn_rt_gemm). Then the geometry it
 * declines (images of fewer than 32 positions, a batch of 12 in a vector of 16, a bias, relu), which
 * asks no work and computes as kn_rt_gemm, and a forward window, which goes to kn_rt_wino. */
static void test_conv(void)
{
    static const int64_t v[][8] = {
        /* n, c, h, w, ph, pw, M (channels out), sxw */
        {16, 3, 7, 9, 1, 1, 65, 1},   {13, 5, 10, 8, 0, 0, 41, 2},   {29, 4, 6, 7, 2, 2, 19, 1},
        {16, 2, 9, 9, -1, 0, 105, 1}, {16, 41, 12, 12, 1, 1, 33, 1}, {16, 2, 9, 11, 0, -1, 105, 2},
    };
    double worst_all = 0;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        const int64_t *p = v[i];
        int64_t n = p[0], ch = p[1], h = p[2], w = p[3], ph = p[4], pw = p[5], M = p[6], sxw = p[7];
        int64_t oh = h + 2 * ph - 2, ow = w + 2 * pw - 2, sxh = w * sxw + 3, sxc = h * sxh, sxn = ch * sxc + 1;
        int64_t nx = (n - 1) * sxn + (ch - 1) * sxc + (h - 1) * sxh + (w - 1) * sxw + 1, K = n * oh * ow;
        int64_t win[19] = {1, n, ch, h, w, 3, 3, oh, ow, 1, 1, 1, 1, ph, pw, sxn, sxc, sxh, sxw};
        Case c;
        case_init(&c, GEMM_F32, 1, M, 9 * ch, K, (int)i % 3, 0, 0, 0);
        float *x = malloc((size_t)nx * sizeof *x);
        for (int64_t e = 0; e < nx; e++) x[e] = (float)rnd();
        write_window(&c, win, x);
        c.g.B = x, c.g.win = win, c.g.sb_b = c.g.sb_k = c.g.sb_n = 0;
        size_t need = kn_rt_conv_work(&c.g), bytes = (size_t)(M * 9 * ch) * sizeof(float);
        CHECK_MSG(need > 0, "conv %zu: kn_rt_conv_work is 0, so it would compute as kn_rt_gemm", i);
        void *work = malloc(need), *one = malloc(bytes);
        c.fn = kn_rt_conv, c.g.work = work, c.g.work_bytes = need;
        char what[64];
        for (int th = 1; th <= 3; th += 2) {
            c.g.parallel_for = th > 1 ? port_parallel_for : NULL, c.g.threads = th;
            snprintf(what, sizeof what, "conv %zu, %d threads", i, th);
            CHECK(case_run(&c, what));
            if (th == 1) memcpy(one, c.g.C, bytes);
            else CHECK_MSG(!memcmp(one, c.g.C, bytes), "conv %zu: C on 3 tasks differs from one thread's", i);
        }
        double worst = worst_error(&c, K);
        worst_all = worst > worst_all ? worst : worst_all;
        short_work_is_gemm(&c, kn_rt_conv_work, one, "conv", i);
        free(work), free(one), free(x);
        case_free(&c);
    }
    if (getenv("KILN_TEST_VERBOSE")) printf("conv: worst error %.3g of the classical bound\n", worst_all);
    static const int64_t d[][7] = {
        /* t, n, h (= w), pad, bias, relu, M: declined, or (t 0) Winograd's */
        {1, 16, 4, 1, 0, 0, 8}, {1, 12, 8, 1, 0, 0, 8}, {1, 16, 8, 1, 1, 0, 8}, {1, 16, 8, 1, 0, 1, 8}, {0, 2, 8, 1, 1, 1, 8},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        const int64_t *p = d[i];
        int64_t t = p[0], n = p[1], h = p[2], ch = 4, M = p[6], oh = h + 2 * p[3] - 2, cols = n * oh * oh;
        int64_t win[19] = {t, n, ch, h, h, 3, 3, oh, oh, 1, 1, 1, 1, p[3], p[3], ch * h * h, h * h, h, 1};
        Case c;
        case_init(&c, GEMM_F32, 1, M, t ? 9 * ch : cols, t ? cols : 9 * ch, 0, 0, (int)p[4], p[5] ? GEMM_ACT_RELU : 0);
        float *x = malloc((size_t)(n * ch * h * h) * sizeof *x);
        for (int64_t e = 0; e < n * ch * h * h; e++) x[e] = (float)rnd();
        write_window(&c, win, x);
        c.g.B = x, c.g.win = win, c.g.sb_b = c.g.sb_k = c.g.sb_n = 0;
        size_t need = kn_rt_conv_work(&c.g), bytes = (size_t)(c.g.M * c.g.N) * sizeof(float);
        CHECK_MSG(t ? need == 0 : need == kn_rt_wino_work(&c.g), "conv declined %zu: kn_rt_conv_work %zu", i, need);
        void *work = malloc(need ? need : 1), *one = malloc(bytes);
        c.fn = kn_rt_conv, c.g.work = need ? work : NULL, c.g.work_bytes = need, c.slack = t ? 1 : WINO_SLACK;
        char what_buf[48];
        snprintf(what_buf, sizeof what_buf, "conv declined %zu", i);
        CHECK(case_run(&c, what_buf));
        memcpy(one, c.g.C, bytes);
        c.fn = t ? kn_rt_gemm : kn_rt_wino;
        CHECK(case_run(&c, what_buf));
        CHECK_MSG(!memcmp(one, c.g.C, bytes), "conv declined %zu: C differs from %s's", i, t ? "kn_rt_gemm" : "kn_rt_wino");
        free(work), free(one), free(x);
        case_free(&c);
    }
}

int main(void)
{
    for (int cap = 0; cap <= 2; cap++) { /* each copy of the micro-kernel this CPU has (the rest: the best below) */
        kn_rt_gemm_cap(cap);
        test_shapes();
        test_edges();
        test_same_bits();
        test_windows();
        test_conv();
        test_wino();
    }
    test_small_work();
    test_interp();
    TEST_END("gemm_rt");
}
