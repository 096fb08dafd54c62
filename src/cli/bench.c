/*
 * bench.c — `kiln bench gemm` and `kiln bench ops` (see bench.h).
 *
 * Method (docs/BENCHMARKS.md): kiln and its peer side by side in one run,
 * same thread count: port_threads() (KILN_NUM_THREADS, else the cores), which
 * kiln's GEMMs (kiln-c's template, the library GEMM kiln-tcc's and the
 * interpreter's dots call) and the parallel loops of kiln-c's and kiln-tcc's
 * kernels split over, and OpenBLAS is told (openblas_set_num_threads);
 * every result is checked before it is timed, and a wrong one is reported
 * as an error, never timed. A measurement: the check run (which warms up),
 * then n timed samples (n from 5 to 30, about 1 s in all; one sample may
 * repeat a very short run so it lasts ~0.5 ms), median with min and max.
 * Every impl of a case is checked first, then all are timed in alternating
 * rounds (one sample of each in turn), and a ratio to the peer is the
 * median of the rounds' ratios, with its quartiles in the note: a shared
 * machine's speed drifts by tens of percent within seconds, which timing
 * one impl after the other put into the ratios.
 * A run over 2 s is reported once (n 1) and larger cases of that impl are
 * skipped, as is any case whose predicted run exceeds 2 s.
 *
 * gemm: f32 C = A B, A (M, K), B (K, N), case "MxKxN". Square 64..1024
 *   (2048 unless quick), the gpt qkv and MLP-up linears at B*T = 2048, a
 *   ResNet-18 conv3x3 as implicit GEMM. impls: openblas (cblas_sgemm through
 *   dlopen, so kiln builds without it), kiln-c, kiln-tcc (compile_graph of
 *   kn_matmul), kiln-eager (the interpreter, small sizes). Checked against a
 *   double-precision loop (every row, or 64 sampled rows of a big case):
 *   max |c - ref| / sum_k |a_ik b_kj| <= 1e-4.
 * ops: a fused elementwise chain gelu(x * 1.5 + 0.25) over 16M floats,
 *   softmax and layer_norm over rows of (4096, 1024), each against memcpy of
 *   the same bytes (read + write) cut into the same pieces on the same
 *   threads (memcpy-1t: on one, for reference), in GB/s; each run's output is
 *   a new tensor, freed before the next run, whose storage the program
 *   reuses as kn_compile's programs do (PROGRAM_POOL: no page faults, as
 *   memcpy's destination, touched before timing, has none); compile time,
 *   cold (a fresh $KILN_CACHE_DIR) and warm (the second compile), of the joint
 *   forward+backward graph of an MLP 784->512->10 at batch 128, and of the
 *   training steps of the three workloads through kn_compile (both in
 *   bench_compile.c).
 *
 * OS calls (dlopen, a temporary cache directory) are POSIX-only, behind
 * BENCH_POSIX; elsewhere (wasm, a board) those parts say they are missing.
 */
#if (defined(__unix__) || defined(__APPLE__)) && !defined(__wasi__) && !defined(__EMSCRIPTEN__)
#define BENCH_POSIX 1
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>
#else
#define BENCH_POSIX 0
#endif

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_int.h"
#include "../compile.h"
#include "models.h"
#include "../core.h"
#include "../../port/port.h"

#define SLOW_MS 2000.0  /* one run longer than this: reported once, bigger cases skipped */
#define TOTAL_MS 1000.0 /* about this long for the timed samples */

/* ---- output ---- */

static void out_line(B *b, const char *s)
{
    if (b->o->emit) b->o->emit(b->o->user, s);
    else {
        fputs(s, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
}

static void outf(B *b, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    out_line(b, buf);
}

/* appends s to buf as a JSON string */
static void json_str(char *buf, size_t cap, const char *s)
{
    size_t n = strlen(buf);
    if (n + 2 >= cap) return;
    buf[n++] = '"';
    for (; *s && n + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') buf[n++] = '\\', buf[n++] = (char)c;
        else if (c < 0x20) n += (size_t)snprintf(buf + n, cap - n, "\\u%04x", c);
        else buf[n++] = (char)c;
    }
    buf[n++] = '"';
    buf[n] = 0;
}

static void cat(char *buf, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    if (n < cap) vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

void bench_json(const BenchRecord *r, char *buf, size_t cap)
{
    buf[0] = 0;
    cat(buf, cap, "{\"suite\":");
    json_str(buf, cap, r->suite);
    cat(buf, cap, ",\"case\":");
    json_str(buf, cap, r->cse);
    cat(buf, cap, ",\"impl\":");
    json_str(buf, cap, r->impl);
    cat(buf, cap, ",\"metric\":");
    json_str(buf, cap, r->metric);
    if (r->v) cat(buf, cap, ",\"median\":%.6g,\"min\":%.6g,\"max\":%.6g,\"n\":%d", r->v[0], r->v[1], r->v[2], r->n);
    else cat(buf, cap, ",\"median\":null,\"min\":null,\"max\":null,\"n\":0");
    if (r->vs && r->ratio > 0) {
        cat(buf, cap, ",\"vs\":");
        json_str(buf, cap, r->vs);
        cat(buf, cap, ",\"ratio\":%.4g", r->ratio);
    }
    if (r->skipped) cat(buf, cap, ",\"skipped\":true");
    else if (r->error) {
        cat(buf, cap, ",\"error\":");
        json_str(buf, cap, r->error);
    }
    if (r->note && *r->note) {
        cat(buf, cap, ",\"note\":");
        json_str(buf, cap, r->note);
    }
    if (r->batch > 0) cat(buf, cap, ",\"batch\":%lld", r->batch);
    if (r->threads > 0) cat(buf, cap, ",\"threads\":%d", r->threads);
    cat(buf, cap, "}");
}

static void json_line(B *b, const BenchRecord *r)
{
    char buf[1400];
    bench_json(r, buf, sizeof buf);
    out_line(b, buf);
}

/* A measurement: ms, and where work > 0 the rate (dmetric: gflops or gbps;
 * work in flops or bytes), with the speed ratio to a peer (peer time /
 * this time: > 1 is faster than the peer): pair, the median of the rounds'
 * ratios (paired_ratio), where it is > 0, else the ratio of the medians. */
void bench_report(B *b, const char *suite, const char *cse, const char *impl, const Stat *s,
                  const char *dmetric, double work, const char *peer, const Stat *ps, double pair, const char *note)
{
    double ratio = !peer ? 0 : pair > 0 ? pair : ps && ps->n > 0 && s->med > 0 ? ps->med / s->med : 0;
    if (b->o->json) {
        double v[3] = {s->med, s->min, s->max};
        json_line(b, &(BenchRecord){suite, cse, impl, "ms", v, s->n, .vs = peer, .ratio = ratio, .note = note});
        if (work > 0 && s->min > 0) {
            double r[3] = {work / (s->med * 1e6), work / (s->max * 1e6), work / (s->min * 1e6)};
            json_line(b, &(BenchRecord){suite, cse, impl, dmetric, r, s->n, .vs = peer, .ratio = ratio, .note = note});
        }
        return;
    }
    char rate[48] = "", rat[48] = "", range[64];
    snprintf(range, sizeof range, "(%.3f..%.3f)", s->min, s->max);
    if (work > 0 && s->med > 0)
        snprintf(rate, sizeof rate, "%9.2f %s", work / (s->med * 1e6), !strcmp(dmetric, "gflops") ? "GFLOP/s" : "GB/s   ");
    if (ratio > 0) snprintf(rat, sizeof rat, "%7.3fx %s", ratio, peer);
    outf(b, "%-5s %-22s %-11s %10.3f ms %-22s n=%-2d %-18s %-18s %s", suite, cse, impl, s->med, range, s->n, rate,
         rat, note ? note : "");
}

void bench_report_err(B *b, const char *suite, const char *cse, const char *impl, const char *metric,
                      const char *msg, int counts)
{
    if (counts) b->failed = 1;
    if (b->o->json) json_line(b, &(BenchRecord){suite, cse, impl, metric, .error = msg ? msg : ""});
    else outf(b, "%-5s %-22s %-11s ERROR: %s", suite, cse, impl, msg);
}

static void report_skip(B *b, const char *suite, const char *cse, const char *impl, const char *metric,
                        const char *why)
{
    if (b->o->json) json_line(b, &(BenchRecord){suite, cse, impl, metric, .skipped = 1, .note = why});
    else outf(b, "%-5s %-22s %-11s skipped: %s", suite, cse, impl, why);
}

/* ---- timing ---- */

typedef int (*RunFn)(void *arg); /* 0 ok */

int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One side of a side-by-side measurement: what it runs, its check run's
 * time t1 (ms; it served as warm-up), then its samples and statistics. */
typedef struct {
    RunFn f;
    void *arg;
    double t1;
    int n, reps; /* samples, runs per sample */
    double t[MAX_SAMPLES];
    Stat s;
    int bad;     /* a run failed */
} Side;

/* The samples of sd from its check run: one over SLOW_MS is the only one;
 * a cheap one is run once more to warm up, and a sample repeats a very
 * short run so it lasts ~0.5 ms; n samples make about TOTAL_MS. */
static void side_plan(B *b, Side *sd)
{
    double t1 = sd->t1;
    sd->n = 0, sd->reps = 1;
    if (b->o->smoke) sd->n = 1;
    else if (t1 > SLOW_MS) {
        sd->s.med = sd->s.min = sd->s.max = t1;
        sd->s.n = 1;
    } else {
        if (t1 < 50 && sd->f(sd->arg)) sd->bad = 1;
        if (t1 < 0.5) sd->reps = t1 > 1e-4 ? (int)(0.5 / t1) + 1 : 1000;
        if (sd->reps > 1000) sd->reps = 1000;
        double per = t1 * sd->reps;
        int n = per > 0 ? (int)(TOTAL_MS / per) : MAX_SAMPLES;
        sd->n = n < 5 ? 5 : n > MAX_SAMPLES ? MAX_SAMPLES : n;
    }
}

/* Times every side after its check run, in rounds: round i takes sample i
 * of each side that has one, in turn. A shared machine's speed drifts by
 * tens of percent over seconds; so it slows every side alike, and a ratio
 * of two sides' medians compares times of the same seconds. 0, or -1 if a
 * side's run failed (its bad set). */
static int measure_sides(B *b, Side *sd, int ns)
{
    int rounds = 0, failed = 0;
    for (int j = 0; j < ns; j++) {
        side_plan(b, &sd[j]);
        rounds = sd[j].n > rounds ? sd[j].n : rounds;
    }
    for (int i = 0; i < rounds; i++)
        for (int j = 0; j < ns; j++) {
            Side *d = &sd[j];
            if (i >= d->n || d->bad) continue;
            double t0 = port_now_ms();
            for (int r = 0; r < d->reps && !d->bad; r++) d->bad = d->f(d->arg) != 0;
            d->t[i] = (port_now_ms() - t0) / d->reps;
        }
    for (int j = 0; j < ns; j++) {
        Side *d = &sd[j];
        failed |= d->bad;
        if (d->bad || !d->n) continue;
        double t[MAX_SAMPLES];
        memcpy(t, d->t, (size_t)d->n * sizeof *t);
        qsort(t, (size_t)d->n, sizeof *t, bench_cmp_double);
        d->s.min = t[0];
        d->s.max = t[d->n - 1];
        d->s.med = d->n % 2 ? t[d->n / 2] : (t[d->n / 2 - 1] + t[d->n / 2]) / 2;
        d->s.n = d->n;
    }
    return failed ? -1 : 0;
}

/* The median over the rounds both sides sampled of peer time / side time,
 * with its quartiles in q[0], q[1]; 0 if they share fewer than 5 rounds. */
static double paired_ratio(const Side *side, const Side *peer, double q[2])
{
    double r[MAX_SAMPLES];
    int n = 0;
    for (int i = 0; i < side->n && i < peer->n; i++)
        if (side->t[i] > 0) r[n++] = peer->t[i] / side->t[i];
    if (n < 5) return 0;
    qsort(r, (size_t)n, sizeof *r, bench_cmp_double);
    q[0] = r[n / 4], q[1] = r[(3 * n) / 4];
    return n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
}

static const float *fdata(const kn_tensor *t) { return (const float *)tensor_ptr(t, t->offset); }

/* ---- runners ---- */

typedef struct {
    kn_ctx *ctx;
    Program *p;
    Graph *g;
    int nouts;
    float *keep;         /* check run: a copy of output 0 */
    size_t keep_n;
} ProgRun;

static int run_prog(void *arg)
{
    ProgRun *r = arg;
    kn_tensor *outs[8] = {NULL};
    kn_scope_begin(r->ctx);
    int bad = program_run(r->p, r->g->input_vals, (int)r->g->ninputs, outs) != KN_OK;
    if (!bad && r->keep) bad = kn_read(r->ctx, outs[0], r->keep, r->keep_n * sizeof(float)) != KN_OK;
    kn_scope_end(r->ctx);
    return bad;
}

typedef kn_tensor *(*Build)(kn_ctx *ctx, kn_tensor *const *in);

/* Traces f on concrete inputs and compiles the graph; *ms the compile time. */
static Program *trace_compile(kn_ctx *ctx, Build f, kn_tensor *const *in, CompileBackend be, Graph **g, double *ms)
{
    *g = graph_new(ctx);
    if (!*g) return NULL;
    ctx->trace = *g;
    kn_tensor *y = f(ctx, in);
    ctx->trace = NULL;
    if (!y) return NULL;
    CompileOpts o;
    memset(&o, 0, sizeof o);
    o.backend = be;
    double t0 = port_now_ms();
    Program *p = compile_graph(ctx, *g, &y->node, 1, &o);
    *ms = port_now_ms() - t0;
    return p;
}

const char *bench_be_name(CompileBackend be) { return be == BACKEND_TCC ? "kiln-tcc" : "kiln-c"; }

/* ---- OpenBLAS through dlopen ---- */

typedef void (*SgemmFn)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, float beta, float *c, int ldc);
static SgemmFn blas_sgemm;
static int blas_threads_set; /* openblas_set_num_threads(blas_threads_set) was called; 0: not */
static char blas_why[160];

static int blas_open(void)
{
    static int tried;
    if (tried) return blas_sgemm != NULL;
    tried = 1;
#if BENCH_POSIX
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libopenblas.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(blas_why, sizeof blas_why, "not available (apt-get install libopenblas-dev)");
        return 0;
    }
    void *p = dlsym(h, "cblas_sgemm"), *q = dlsym(h, "openblas_set_num_threads");
    if (!p) {
        snprintf(blas_why, sizeof blas_why, "libopenblas.so.0 has no cblas_sgemm");
        return 0;
    }
    memcpy(&blas_sgemm, &p, sizeof p);
    if (q) {
        void (*set)(int);
        memcpy(&set, &q, sizeof q);
        blas_threads_set = port_threads();
        set(blas_threads_set);
    }
    return 1;
#else
    snprintf(blas_why, sizeof blas_why, "not available on this platform (%s)", port_name());
    return 0;
#endif
}

/* ---- gemm ---- */

typedef struct {
    int64_t m, k, n;
    const char *what;
} Shape;

typedef struct {
    const float *a, *b;
    float *c;
    int m, k, n;
} BlasRun;

static int run_blas(void *arg)
{
    BlasRun *r = arg;
    blas_sgemm(101 /* CblasRowMajor */, 111 /* CblasNoTrans */, 111, r->m, r->n, r->k, 1.0f, r->a, r->k, r->b,
               r->n, 0.0f, r->c, r->n);
    return 0;
}

typedef struct {
    kn_ctx *ctx;
    kn_tensor *a, *b;
    float *keep;
    size_t keep_n;
} EagerRun;

static int run_eager(void *arg)
{
    EagerRun *r = arg;
    kn_scope_begin(r->ctx);
    kn_tensor *y = kn_matmul(r->ctx, r->a, r->b);
    int bad = !y || (r->keep && kn_read(r->ctx, y, r->keep, r->keep_n * sizeof(float)) != KN_OK);
    kn_scope_end(r->ctx);
    return bad;
}

static kn_tensor *build_matmul(kn_ctx *c, kn_tensor *const *in) { return kn_matmul(c, in[0], in[1]); }

/* The reference for the rows in rows[0..nr): ref and sum |a b| in double. */
typedef struct {
    int64_t *rows;
    int nr;
    double *ref, *mag;
} GemmRef;

static double gemm_err(const GemmRef *r, const float *c, int64_t n)
{
    double worst = 0;
    for (int i = 0; i < r->nr; i++)
        for (int64_t j = 0; j < n; j++) {
            double d = fabs((double)c[r->rows[i] * n + j] - r->ref[i * n + j]) / (r->mag[i * n + j] + 1e-30);
            if (!(d <= worst)) worst = d; /* NaN wins */
        }
    return worst;
}

enum { I_BLAS, I_C, I_TCC, I_EAGER, NIMPL };
static const char *const impl_names[NIMPL] = {"openblas", "kiln-c", "kiln-tcc", "kiln-eager"};

/* rate: the best flop/ms each impl reached so far (predicts the next run);
 * slow: the flops of a case whose one run exceeded SLOW_MS (0: none) */
static void gemm_case(B *b, kn_ctx *ctx, const Shape *sh, double rate[NIMPL], double slow[NIMPL])
{
    const char *S = "gemm";
    char cse[64];
    snprintf(cse, sizeof cse, "%lldx%lldx%lld", (long long)sh->m, (long long)sh->k, (long long)sh->n);
    int64_t M = sh->m, K = sh->k, N = sh->n;
    double flops = 2.0 * (double)M * (double)N * (double)K;
    int64_t sa[2] = {M, K}, sb[2] = {K, N};
    kn_scope_begin(ctx);
    kn_tensor *A = kn_randn(ctx, KN_F32, 2, sa), *Bm = kn_randn(ctx, KN_F32, 2, sb);
    size_t cn = (size_t)(M * N);
    float *C = malloc(cn * sizeof *C);
    GemmRef ref;
    ref.nr = (double)M * N * K <= (double)(1 << 27) || M <= 64 ? (int)M : 64;
    ref.rows = malloc((size_t)ref.nr * sizeof *ref.rows);
    ref.ref = calloc((size_t)ref.nr * (size_t)N, sizeof(double));
    ref.mag = calloc((size_t)ref.nr * (size_t)N, sizeof(double));
    if (!A || !Bm || !C || !ref.rows || !ref.ref || !ref.mag) {
        bench_report_err(b, S, cse, "kiln", "ms", !A || !Bm ? kn_last_error(ctx) : "out of memory", 1);
        kn_clear_error(ctx);
        goto done;
    }
    const float *a = fdata(A), *bb = fdata(Bm);
    for (int i = 0; i < ref.nr; i++) {
        int64_t row = ref.nr == M ? i : (int64_t)i * M / ref.nr;
        ref.rows[i] = row;
        double *rr = ref.ref + (size_t)i * N, *mm = ref.mag + (size_t)i * N;
        for (int64_t k = 0; k < K; k++) {
            double x = a[row * K + k];
            const float *brow = bb + k * N;
            for (int64_t j = 0; j < N; j++) {
                double p = x * brow[j];
                rr[j] += p;
                mm[j] += fabs(p);
            }
        }
    }
    char checked[64];
    if (ref.nr == M) snprintf(checked, sizeof checked, "checked all rows");
    else snprintf(checked, sizeof checked, "checked %d sampled rows", ref.nr);

    /* each impl set up and checked, then all timed side by side */
    Side sd[NIMPL];
    char notes[NIMPL][256];
    int live[NIMPL] = {0};
    BlasRun br;
    EagerRun er;
    ProgRun pr[2];
    Program *p[2] = {NULL, NULL};
    Graph *g[2] = {NULL, NULL};
    memset(sd, 0, sizeof sd);
    for (int im = 0; im < NIMPL; im++) {
        const char *impl = impl_names[im];
        char *note = notes[im];
        if (im == I_BLAS && !blas_open()) {
            bench_report_err(b, S, cse, impl, "ms", blas_why, 0);
            continue;
        }
        if (im == I_EAGER && (M > 256 || N > 256 || K > 256)) continue; /* the interpreter: small sizes only */
        double pred = rate[im] > 0 ? flops / rate[im] : 0;
        if (!b->o->smoke && ((slow[im] > 0 && flops >= slow[im]) || pred > SLOW_MS)) {
            if (pred > SLOW_MS) snprintf(note, 256, "predicted %.1f s per run (over %.0f s)", pred / 1e3, SLOW_MS / 1e3);
            else snprintf(note, 256, "a smaller case took over %.0f s per run", SLOW_MS / 1e3);
            report_skip(b, S, cse, impl, "ms", note);
            continue;
        }
        double t0, cms = 0;
        RunFn fn;
        void *arg;
        note[0] = 0;
        memset(C, 0, cn * sizeof *C);
        if (im == I_BLAS) {
            br.a = a, br.b = bb, br.c = C, br.m = (int)M, br.k = (int)K, br.n = (int)N;
            fn = run_blas, arg = &br;
            if (blas_threads_set)
                snprintf(note, 256, "%d thread%s (openblas_set_num_threads(%d)); %s", blas_threads_set,
                         blas_threads_set > 1 ? "s" : "", blas_threads_set, checked);
            else snprintf(note, 256, "no openblas_set_num_threads: its default threads; %s", checked);
        } else if (im == I_EAGER) {
            er.ctx = ctx, er.a = A, er.b = Bm, er.keep = C, er.keep_n = cn;
            fn = run_eager, arg = &er;
            snprintf(note, 256, "interpreter; %s", checked);
        } else {
            int i = im == I_TCC;
            CompileBackend be = i ? BACKEND_TCC : BACKEND_C;
            kn_tensor *in[2] = {A, Bm};
            p[i] = trace_compile(ctx, build_matmul, in, be, &g[i], &cms);
            if (!p[i]) {
                bench_report_err(b, S, cse, impl, "ms", kn_last_error(ctx), 1);
                kn_clear_error(ctx);
                continue;
            }
            ProgramStats st;
            program_stats(p[i], &st);
            pr[i].ctx = ctx, pr[i].p = p[i], pr[i].g = g[i], pr[i].nouts = 1, pr[i].keep = C, pr[i].keep_n = cn;
            fn = run_prog, arg = &pr[i];
            int th = port_threads(); /* tcc's dots call the library GEMM, threaded too */
            snprintf(note, 256, "compile %.1f ms; %d kernels on %s; %d thread%s; %s", cms, st.kernels,
                     st.backend, th, th > 1 ? "s" : "", checked);
        }
        t0 = port_now_ms();
        int bad = fn(arg);
        double t1 = port_now_ms() - t0;
        if (bad) {
            bench_report_err(b, S, cse, impl, "ms", kn_last_error(ctx), 1);
            kn_clear_error(ctx);
            continue;
        }
        double e = gemm_err(&ref, C, N);
        if (!(e <= TOL)) {
            char msg[160];
            snprintf(msg, sizeof msg, "result check failed: max rel err %.3g > %g", e, TOL);
            bench_report_err(b, S, cse, impl, "ms", msg, 1);
            continue;
        }
        if (im == I_EAGER) er.keep = NULL;
        else if (im != I_BLAS) pr[im == I_TCC].keep = NULL;
        sd[im] = (Side){fn, arg, t1, 0, 0, {0}, {0, 0, 0, 0}, 0};
        live[im] = 1;
    }
    int idx[NIMPL], nrun = 0;
    Side packed[NIMPL]; /* the live impls, timed together */
    for (int im = 0; im < NIMPL; im++)
        if (live[im]) idx[nrun] = im, packed[nrun++] = sd[im];
    measure_sides(b, packed, nrun);
    for (int k = 0; k < nrun; k++) sd[idx[k]] = packed[k];
    int peer = live[I_BLAS] && !sd[I_BLAS].bad;
    for (int im = 0; im < NIMPL; im++) {
        if (!live[im]) continue;
        if (sd[im].bad) {
            bench_report_err(b, S, cse, impl_names[im], "ms", kn_last_error(ctx), 1);
            kn_clear_error(ctx);
            continue;
        }
        const Stat *s = &sd[im].s;
        if (s->n == 1 && sd[im].t1 > SLOW_MS) {
            slow[im] = flops;
            cat(notes[im], sizeof notes[im], "; one run (over %.0f s): larger sizes skipped", SLOW_MS / 1e3);
        }
        if (flops / s->med > rate[im]) rate[im] = flops / s->med;
        double q[2], pair = im != I_BLAS && peer ? paired_ratio(&sd[im], &sd[I_BLAS], q) : 0;
        if (pair > 0) cat(notes[im], sizeof notes[im], "; rounds' ratios %.3f..%.3f (quartiles)", q[0], q[1]);
        bench_report(b, S, cse, impl_names[im], s, "gflops", flops, im == I_BLAS || !peer ? NULL : "openblas",
                     im == I_BLAS || !peer ? NULL : &sd[I_BLAS].s, pair, notes[im]);
    }
    for (int i = 0; i < 2; i++) {
        program_free(p[i]);
        graph_free(g[i]);
    }
done:
    free(C);
    free(ref.rows);
    free(ref.ref);
    free(ref.mag);
    kn_scope_end(ctx);
}

static void header(B *b, const char *suite)
{
    if (b->o->json) return;
    char threads[128];
    if (!strcmp(suite, "gemm"))
        snprintf(threads, sizeof threads, "kiln-c and openblas on %d thread%s (KILN_NUM_THREADS), the rest 1",
                 port_threads(), port_threads() > 1 ? "s" : "");
    else snprintf(threads, sizeof threads, "kiln-c, kiln-tcc and memcpy on %d thread%s (KILN_NUM_THREADS), memcpy-1t on 1",
                  port_threads(), port_threads() > 1 ? "s" : "");
    outf(b, "kiln bench %s%s%s: %s; medians of n runs (min..max), every impl of a case timed in alternating rounds; "
         "ratio = peer time / this time, the median of the rounds' ratios", suite,
         b->o->quick ? " --quick" : "", b->o->smoke ? " --smoke" : "", threads);
    outf(b, "%-5s %-22s %-11s %13s %-22s %-4s %-18s %-18s %s", "suite", "case", "impl", "median", "(min..max)", "n",
         "rate", "speed vs peer", "note");
}

int bench_gemm(const BenchOpts *o)
{
    B b = {o, 0};
    kn_ctx *ctx = kn_ctx_new(NULL);
    if (!ctx) return 1;
    kn_manual_seed(ctx, 1);
    header(&b, "gemm");
    if (!o->json) {
        if (!blas_open()) outf(&b, "openblas: %s", blas_why);
        else if (blas_threads_set) outf(&b, "openblas: libopenblas.so.0, openblas_set_num_threads(%d)", blas_threads_set);
        else outf(&b, "openblas: libopenblas.so.0, its default thread count (no openblas_set_num_threads)");
        outf(&b, "case = MxKxN: A (M, K) times B (K, N), f32");
    }
    static const Shape smoke[] = {{16, 16, 16, "square"}, {32, 32, 32, "square"}, {32, 16, 24, "odd"}};
    static const Shape full[] = {
        {64, 64, 64, "square"},       {128, 128, 128, "square"},    {256, 256, 256, "square"},
        {512, 512, 512, "square"},    {1024, 1024, 1024, "square"}, {2048, 2048, 2048, "square"},
        {2048, 256, 768, "gpt qkv"},  {2048, 256, 1024, "gpt mlp up"},
        {4096, 1152, 128, "conv3x3 128->128 16x16 b16"},
        {512, 4608, 256, "conv3x3 512->512 4x4 b16 (resnet stage 4)"},
    };
    const Shape *sh = o->smoke ? smoke : full;
    int ns = o->smoke ? (int)(sizeof smoke / sizeof *smoke) : (int)(sizeof full / sizeof *full);
    double rate[NIMPL] = {0, 0, 0, 0};
    double slow[NIMPL] = {0, 0, 0, 0};
    for (int i = 0; i < ns; i++) {
        if (o->quick && sh[i].m == 2048 && sh[i].k == 2048) continue;
        if (!o->json && strcmp(sh[i].what, "square")) outf(&b, "-- %s", sh[i].what);
        gemm_case(&b, ctx, &sh[i], rate, slow);
    }
    kn_ctx_free(ctx);
    return b.failed;
}

/* ---- ops ---- */

typedef struct {
    const float *src;
    float *dst;
    size_t n;
    int tasks;  /* pieces handed to the thread pool (1: memcpy on this thread) */
} CopyRun;

static void copy_piece(void *arg, int i)
{
    const CopyRun *r = arg;
    size_t lo = r->n * (size_t)i / (size_t)r->tasks, hi = r->n * (size_t)(i + 1) / (size_t)r->tasks;
    memcpy(r->dst + lo, r->src + lo, (hi - lo) * sizeof(float));
}

/* memcpy, cut as the kernels cut their parallel loops (4 pieces per thread,
 * handed out by the same pool), so that both sides pay the same threads'
 * wake-ups and stragglers */
static int run_copy(void *arg)
{
    CopyRun *r = arg;
    if (r->tasks < 2) memcpy(r->dst, r->src, r->n * sizeof(float));
    else port_parallel_for(r->tasks, copy_piece, r);
    return 0;
}

static kn_tensor *build_chain(kn_ctx *c, kn_tensor *const *in)
{
    return kn_gelu(c, kn_add(c, kn_mul(c, in[0], kn_scalar(c, 1.5)), kn_scalar(c, 0.25)), 0);
}
static kn_tensor *build_softmax(kn_ctx *c, kn_tensor *const *in) { return kn_softmax(c, in[0], 1); }
static kn_tensor *build_layer_norm(kn_ctx *c, kn_tensor *const *in)
{
    int64_t d = kn_shape(in[0])[1];
    return kn_layer_norm(c, in[0], 1, &d, NULL, NULL, 1e-5);
}

enum { K_CHAIN, K_SOFTMAX, K_LAYER_NORM };

/* max |got - ref| / (0.01 + |ref|) against a double computation from x */
static double ops_err(int kind, const float *x, const float *y, int64_t rows, int64_t cols)
{
    double worst = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        const float *yr = y + r * cols;
        double mx = -INFINITY, sum = 0, mean = 0, var = 0;
        if (kind == K_SOFTMAX) {
            for (int64_t j = 0; j < cols; j++) mx = xr[j] > mx ? xr[j] : mx;
            for (int64_t j = 0; j < cols; j++) sum += exp(xr[j] - mx);
        } else if (kind == K_LAYER_NORM) {
            for (int64_t j = 0; j < cols; j++) mean += xr[j];
            mean /= (double)cols;
            for (int64_t j = 0; j < cols; j++) var += (xr[j] - mean) * (xr[j] - mean);
            var /= (double)cols;
        }
        for (int64_t j = 0; j < cols; j++) {
            double v = xr[j], want;
            if (kind == K_CHAIN) {
                v = v * 1.5 + 0.25;
                want = 0.5 * v * (1 + erf(v / sqrt(2.0)));
            } else if (kind == K_SOFTMAX) want = exp(v - mx) / sum;
            else want = (v - mean) / sqrt(var + 1e-5);
            double d = fabs(yr[j] - want) / (0.01 + fabs(want));
            if (!(d <= worst)) worst = d;
        }
    }
    return worst;
}

/* The case's memcpy peers and kernels, each checked, then timed side by
 * side (measure_sides): memcpy, memcpy-1t, kiln-c, kiln-tcc. */
enum { OPS_SIDES = 4 };

static void ops_case(B *b, kn_ctx *ctx, int kind, const char *cse, int64_t rows, int64_t cols)
{
    const char *S = "ops";
    static const CompileBackend bes[2] = {BACKEND_C, BACKEND_TCC};
    const char *impls[OPS_SIDES] = {"memcpy", "memcpy-1t", bench_be_name(bes[0]), bench_be_name(bes[1])};
    char notes[OPS_SIDES][256];
    int64_t shape[2] = {rows, cols};
    size_t n = (size_t)(rows * cols);
    double bytes = 2.0 * (double)n * sizeof(float); /* read x, write y */
    Side sd[OPS_SIDES];
    int live[OPS_SIDES] = {0, 0, 0, 0};
    CopyRun cr[2];
    ProgRun pr[2];
    Program *p[2] = {NULL, NULL};
    Graph *g[2] = {NULL, NULL};
    memset(sd, 0, sizeof sd);
    kn_scope_begin(ctx);
    kn_tensor *x = kn_randn(ctx, KN_F32, kind == K_CHAIN ? 1 : 2, kind == K_CHAIN ? &shape[1] : shape);
    float *y = malloc(n * sizeof *y), *dst = malloc(n * sizeof *dst);
    if (!x || !y || !dst) {
        bench_report_err(b, S, cse, "kiln", "ms", x ? "out of memory" : kn_last_error(ctx), 1);
        kn_clear_error(ctx);
        goto done;
    }
    const float *xs = fdata(x);
    /* the peer: memcpy of the same bytes on the kernels' threads (and, for reference, on one) */
    int threads = port_threads();
    double t0 = 0;
    memset(dst, 0, n * sizeof *dst); /* touch it: pages mapped before timing */
    for (int pass = 0; pass < 2; pass++) {
        cr[pass] = (CopyRun){xs, dst, n, pass ? 1 : 4 * threads};
        memset(dst, 0, n * sizeof *dst);
        t0 = port_now_ms();
        run_copy(&cr[pass]);
        sd[pass] = (Side){run_copy, &cr[pass], port_now_ms() - t0, 0, 0, {0}, {0, 0, 0, 0}, 0};
        snprintf(notes[pass], sizeof notes[pass], "read + write of the same bytes, on %d thread%s%s", pass ? 1 : threads,
                 pass || threads == 1 ? "" : "s", pass ? "" : " (the kernels' pool and pieces)");
        if (memcmp(dst, xs, n * sizeof *dst)) bench_report_err(b, S, cse, impls[pass], "ms", "memcpy result differs", 1);
        else live[pass] = 1;
    }
    Build f = kind == K_CHAIN ? build_chain : kind == K_SOFTMAX ? build_softmax : build_layer_norm;
    for (int i = 0; i < 2; i++) {
        const char *impl = impls[2 + i];
        double cms = 0;
        p[i] = trace_compile(ctx, f, &x, bes[i], &g[i], &cms);
        if (!p[i]) {
            bench_report_err(b, S, cse, impl, "ms", kn_last_error(ctx), 1);
            kn_clear_error(ctx);
            continue;
        }
        ProgramStats st;
        program_stats(p[i], &st);
        program_set_reuse(p[i], PROGRAM_POOL); /* as kn_compile's default mode runs it */
        pr[i] = (ProgRun){ctx, p[i], g[i], 1, y, n};
        t0 = port_now_ms();
        int bad = run_prog(&pr[i]);
        double t1 = port_now_ms() - t0;
        double e = bad ? INFINITY : ops_err(kind, xs, y, kind == K_CHAIN ? 1 : rows, kind == K_CHAIN ? (int64_t)n : cols);
        if (bad) {
            bench_report_err(b, S, cse, impl, "ms", kn_last_error(ctx), 1);
            kn_clear_error(ctx);
        } else if (!(e <= TOL)) {
            char msg[160];
            snprintf(msg, sizeof msg, "result check failed: max err |d|/(0.01+|ref|) %.3g > %g", e, TOL);
            bench_report_err(b, S, cse, impl, "ms", msg, 1);
        } else {
            pr[i].keep = NULL;
            sd[2 + i] = (Side){run_prog, &pr[i], t1, 0, 0, {0}, {0, 0, 0, 0}, 0};
            live[2 + i] = 1;
            snprintf(notes[2 + i], sizeof notes[2 + i], "compile %.1f ms; %d kernel%s on %s; output freed per run (its "
                     "storage reused); %d thread%s", cms, st.kernels, st.kernels == 1 ? "" : "s", st.backend,
                     port_threads(), port_threads() > 1 ? "s" : "");
        }
    }
    int idx[OPS_SIDES], nrun = 0;
    Side packed[OPS_SIDES]; /* the live sides, timed together */
    for (int j = 0; j < OPS_SIDES; j++)
        if (live[j]) idx[nrun] = j, packed[nrun++] = sd[j];
    measure_sides(b, packed, nrun);
    for (int k = 0; k < nrun; k++) sd[idx[k]] = packed[k];
    for (int j = 0; j < OPS_SIDES; j++) {
        if (!live[j]) continue;
        if (sd[j].bad) {
            bench_report_err(b, S, cse, impls[j], "ms", j < 2 ? "memcpy failed" : kn_last_error(ctx), 1);
            kn_clear_error(ctx);
            continue;
        }
        double q[2], pair = j >= 2 && live[0] && !sd[0].bad ? paired_ratio(&sd[j], &sd[0], q) : 0;
        if (pair > 0) cat(notes[j], sizeof notes[j], "; rounds' ratios %.3f..%.3f (quartiles)", q[0], q[1]);
        bench_report(b, S, cse, impls[j], &sd[j].s, "gbps", bytes, j >= 2 && live[0] ? "memcpy" : NULL,
                     j >= 2 && live[0] ? &sd[0].s : NULL, pair, notes[j]);
    }
done:
    for (int i = 0; i < 2; i++) {
        program_free(p[i]);
        graph_free(g[i]);
    }
    free(y);
    free(dst);
    kn_scope_end(ctx);
}

int bench_ops(const BenchOpts *o)
{
    B b = {o, 0};
    kn_ctx *ctx = kn_ctx_new(NULL);
    if (!ctx) return 1;
    kn_manual_seed(ctx, 1);
    header(&b, "ops");
    if (!o->json) outf(&b, "GB/s counts read + write of the tensor (memcpy: the same bytes)");
    int64_t n = o->smoke ? 4096 : (int64_t)1 << 24, r = o->smoke ? 32 : 4096, c = o->smoke ? 64 : 1024;
    char cse[64];
    snprintf(cse, sizeof cse, "gelu(x*a+b) %lldM", (long long)(n >> 20));
    if (o->smoke) snprintf(cse, sizeof cse, "gelu(x*a+b) %lld", (long long)n);
    ops_case(&b, ctx, K_CHAIN, cse, 1, n);
    snprintf(cse, sizeof cse, "softmax %lldx%lld", (long long)r, (long long)c);
    ops_case(&b, ctx, K_SOFTMAX, cse, r, c);
    snprintf(cse, sizeof cse, "layer_norm %lldx%lld", (long long)r, (long long)c);
    ops_case(&b, ctx, K_LAYER_NORM, cse, r, c);
    bench_compile_mlp(&b, ctx);
    bench_compile_steps(&b, ctx);
    kn_ctx_free(ctx);
    return b.failed;
}

int bench_cli(int argc, char **argv)
{
    BenchOpts o;
    memset(&o, 0, sizeof o);
    const char *suite = argc > 2 ? argv[2] : "";
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) o.json = 1;
        else if (!strcmp(argv[i], "--quick")) o.quick = 1;
        else if (!strcmp(argv[i], "--smoke")) o.smoke = o.quick = 1;
        else {
            fprintf(stderr, "kiln bench: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!strcmp(suite, "gemm")) return bench_gemm(&o);
    if (!strcmp(suite, "ops")) return bench_ops(&o);
    fprintf(stderr, "kiln bench: unknown suite '%s' (gemm, ops)\n", suite);
    return 2;
}
