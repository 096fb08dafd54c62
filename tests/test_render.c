/*
 * test_render.c — the C target against the interpreter: small traced
 * graphs are scheduled, lowered, rendered into one C unit, compiled with
 * TinyCC and with the system compiler, run kernel by kernel in schedule
 * order on buffers of our own, and every kernel's output is compared with
 * the interpreter's value of its node (graph_run), then replaced by it, so
 * each kernel is checked on the interpreter's inputs (a node left to the
 * interpreter just takes its value).
 *
 * Graphs: every unary, binary, compare, where and cast primitive in every
 * dtype it takes (special values included: NaN, infinities, -0, f16
 * subnormals and overflow, integer extremes, zero divisors), fused chains,
 * reductions over various axes (max with NaN), views (permute, expand,
 * slice with steps, pad, reshape of a transposed tensor), dot, iota, full,
 * rand, gather and scatter_add (i32 and i64 indices, repeated, along
 * either dim, of a transposed input; no kernel may report an index), and
 * the composites softmax, layer_norm, gelu, conv2d and cross_entropy. Hand-written IR kernels check index arithmetic (floor
 * division and modulo of negative values), every loop kind and the
 * snprintf contract.
 *
 * Tolerances (|got - want| <= atol + rtol |want|): the interpreter computes
 * floats in double and rounds once per primitive; the C code computes in
 * the value's precision. So +, -, *, /, sqrt, abs, floor, max, min, where,
 * compares, casts, integers, bool and rand must agree exactly (checked bit
 * for bit where a case says so); transcendentals and float accumulation
 * (sums, dot) differ by rounding: f32 rtol 1e-5 atol 1e-6, f64 1e-12,
 * f16 1e-3, bf16 1e-2 (one rounding of the narrow dtype at most). Float
 * sums take inputs without the specials: 1e20 - 1e20 + ... cancels, and
 * the f32 accumulator is float where the interpreter's is double.
 *
 * Buffers sit against a PROT_NONE page, at its end for the TinyCC run and
 * at its start for the cc run, so a load that `where` must keep unexecuted
 * (pad) faults if it runs. KILN_RENDER_DUMP=DIR writes each unit to DIR.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>

#include "test.h"
#include "../port/port.h"
#include "../src/core.h"
#include "../src/loopopt.h"
#include "../src/lower.h"
#include "../src/partition.h"
#include "../targets/c/gemm.h"
#include "../targets/c/render.h"

#ifndef __wasi__
#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#define MAXO 96 /* outputs of one graph */
#define N 91     /* 7 x 13 elements */

/* CHECK_MSG as an expression: the check's result */
#define EXPECT(c, ...) expect_((c) != 0, __FILE__, __LINE__, #c, __VA_ARGS__)

static int expect_(int ok, const char *file, int line, const char *what, const char *fmt, ...)
{
    if (!test_check_(ok, file, line, what)) {
        va_list ap;
        va_start(ap, fmt);
        printf("    ");
        vprintf(fmt, ap);
        printf("\n");
        va_end(ap);
    }
    return ok;
}

static const int64_t S713[2] = {7, 13};

/* ---- guarded buffers ---- */

typedef struct {
    void *base, *p;
    size_t total;
} Buf;

/* bytes of memory with a PROT_NONE page right after it (at_end) or right
 * before it; plain malloc where there is no mprotect. */
static int buf_alloc(Buf *b, size_t bytes, int at_end)
{
    memset(b, 0, sizeof *b);
    if (bytes == 0) bytes = 1;
#ifndef __wasi__
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), data = (bytes + pg - 1) / pg * pg;
    b->total = data + 2 * pg;
    if (posix_memalign(&b->base, pg, b->total)) return 0;
    char *c = b->base;
    if (mprotect(c, pg, PROT_NONE) || mprotect(c + pg + data, pg, PROT_NONE)) return 0;
    b->p = at_end ? c + pg + data - bytes : c + pg;
    memset(c + pg, 0xA5, data); /* garbage, not zeros: a kernel must write what it owns */
#else
    (void)at_end;
    b->p = b->base = malloc(bytes);
#endif
    return b->p != NULL;
}

static void buf_free(Buf *b)
{
#ifndef __wasi__
    if (b->base) mprotect(b->base, b->total, PROT_READ | PROT_WRITE);
#endif
    free(b->base);
    memset(b, 0, sizeof *b);
}

/* ---- inputs ---- */

static uint64_t lcg = 12345;

static double uniform(double lo, double hi)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(lcg >> 11) * (1.0 / 9007199254740992.0);
}

/* A tensor of dt and shape (at most 256 elements): the specials first,
 * then uniform values in [lo, hi] (integral for integer dtypes), converted
 * as kn_to does. */
static kn_tensor *make(kn_ctx *ctx, kn_dtype dt, int nd, const int64_t *shape, const double *sp, int nsp, double lo,
                       double hi)
{
    double v[256];
    int64_t n = tensor_numel(nd, shape);
    for (int i = 0; i < n && i < 256; i++) {
        v[i] = i < nsp ? sp[i] : uniform(lo, hi);
        if (i >= nsp && !dt_is_float(dt)) v[i] = floor(v[i]);
    }
    kn_tensor *t = kn_tensor_from(ctx, KN_F64, nd, shape, v);
    return dt == KN_F64 ? t : kn_to(ctx, t, dt);
}

/* The same with exact i64 values. */
static kn_tensor *make_int(kn_ctx *ctx, kn_dtype dt, int nd, const int64_t *shape, const int64_t *sp, int nsp,
                           int64_t lo, int64_t hi)
{
    int64_t v[256];
    int64_t n = tensor_numel(nd, shape);
    for (int i = 0; i < n && i < 256; i++)
        v[i] = i < nsp ? sp[i] : (int64_t)floor(uniform((double)lo, (double)hi + 0.999));
    kn_tensor *t = kn_tensor_from(ctx, KN_I64, nd, shape, v);
    return dt == KN_I64 ? t : kn_to(ctx, t, dt);
}

static const double FSPEC[] = {0.5, -1.25, 3, -0.0, NAN, INFINITY, -INFINITY, 1e-6, 70000, 1e20, -1e20, 3e9, 300.7,
                               -2.5, 2.5, 0, 1, -1, 0.1, 7.9, 1e-40, 65504, -65520, 255.5, -3e38};
static const double FSPEC2[] = {2, 0, -0.0, 3, NAN, 2, INFINITY, 1e-6, 0.5, 1e20, 3, -3e9, 0.5, -2.5, 0, 0, NAN, 1};
static const int64_t ISPEC[] = {0, 1, -1, 2, -2, INT64_MAX, INT64_MIN, 2147483647, -2147483647 - 1, 255, 256, -7,
                                7, 3, -3, 1000000007, INT64_MIN, 4294967295LL, -129};
static const int64_t ISPEC2[] = {0, 0, -1, 3, 5, 2, -1, 2, -1, 3, -1, 0, -2, 63, 64, 1000000007, 1, 1, 7};

#define NSP(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* x-like and y-like operands of shape (7, 13), or any */
static kn_tensor *xs(kn_ctx *ctx, kn_dtype dt, int nd, const int64_t *sh)
{
    return dt_is_float(dt) ? make(ctx, dt, nd, sh, FSPEC, NSP(FSPEC), -4, 4)
                           : make_int(ctx, dt, nd, sh, ISPEC, NSP(ISPEC), -20, 20);
}
static kn_tensor *ys(kn_ctx *ctx, kn_dtype dt, int nd, const int64_t *sh)
{
    return dt_is_float(dt) ? make(ctx, dt, nd, sh, FSPEC2, NSP(FSPEC2), -3, 3)
                           : make_int(ctx, dt, nd, sh, ISPEC2, NSP(ISPEC2), -3, 5);
}
static kn_tensor *xin(kn_ctx *ctx, kn_dtype dt) { return xs(ctx, dt, 2, S713); }
static kn_tensor *yin(kn_ctx *ctx, kn_dtype dt) { return ys(ctx, dt, 2, S713); }
static kn_tensor *ix(kn_ctx *ctx, kn_dtype dt) { return xs(ctx, dt, 2, S713); }

/* ---- the outputs of the graph being traced ---- */

typedef struct {
    kn_ctx *ctx;
    const char *name;
    uint32_t node[MAXO];
    uint8_t exact[MAXO];
    int n;
} Outs;

static Outs *begin(kn_ctx *ctx, Outs *o, const char *name)
{
    memset(o, 0, sizeof *o);
    o->ctx = ctx;
    o->name = name;
    ctx->trace = graph_new(ctx);
    return o;
}

/* t is an output; exact: it must equal the interpreter's bit for bit. */
static void out(Outs *o, kn_tensor *t, int exact)
{
    if (!EXPECT(t != NULL && o->n < MAXO, "%s: output %d: %s", o->name, o->n, kn_last_error(o->ctx))) {
        kn_clear_error(o->ctx);
        return;
    }
    o->node[o->n] = t->node;
    o->exact[o->n++] = (uint8_t)exact;
}

/* ---- comparing ---- */

static double tol_r(kn_dtype dt) { return dt == KN_F64 ? 1e-12 : dt == KN_F16 ? 1e-3 : dt == KN_BF16 ? 1e-2 : 1e-5; }
static double tol_a(kn_dtype dt) { return dt == KN_F64 ? 1e-12 : dt == KN_F16 ? 1e-3 : dt == KN_BF16 ? 1e-2 : 1e-6; }

/* Element-wise; 1 if equal within the dtype's tolerance (bit for bit if
 * exact; NaN equals NaN). Names the first difference. */
static int same(const char *what, kn_dtype dt, const void *got, const void *want, int64_t n, int exact)
{
    size_t es = kn_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
        const char *g = (const char *)got + i * es, *w = (const char *)want + i * es;
        int ok;
        if (!dt_is_float(dt)) ok = dt_load_i(dt, g) == dt_load_i(dt, w);
        else if (exact) ok = memcmp(g, w, es) == 0 || (isnan(dt_load(dt, g)) && isnan(dt_load(dt, w)));
        else ok = test_close(dt_load(dt, g), dt_load(dt, w), tol_r(dt), tol_a(dt));
        if (!ok) {
            printf("    %s: element %lld of %lld: got %.17g, want %.17g (%s%s)\n", what, (long long)i, (long long)n,
                   dt_load(dt, g), dt_load(dt, w), kn_dtype_name(dt), exact ? ", exact" : "");
            return 0;
        }
    }
    return 1;
}

/* ---- running a graph through the C target ---- */

typedef struct {
    Kernel k;
    uint32_t node;
    int interp; /* LOWER_INTERP: its value is the interpreter's */
} Lowered;

static void dump(const char *name, const char *src)
{
    const char *dir = getenv("KILN_RENDER_DUMP");
    char path[512];
    if (!dir) return;
    snprintf(path, sizeof path, "%s/%s.c", dir, name);
    FILE *f = fopen(path, "w");
    if (f) fputs(src, f), fclose(f);
}

typedef void (*KernelFn)(void **);

/* Runs every kernel compiled by how, in order, and compares. isa: the
 * unit is the SIMD dialect for it (the kernels through loopopt, outer loops
 * parallel wherever allowed): each kernel runs on one thread, then again on
 * the thread pool, which must give the same bytes. */
static void run_with(int how, const CIsa *isa, Outs *o, const Graph *g, const Schedule *s, Lowered *lk, int nk,
                     const char *src, kn_tensor **vals)
{
    char why[256] = "", what[160], flags[200];
    const char *cc = how == PORT_TCC ? "tcc" : isa ? isa->name : "cc";
    if (isa) c_cc_flags(isa, flags, sizeof flags);
    PortModule *m = c_jit(how, src, isa ? flags : NULL, why);
    if (!EXPECT(m != NULL, "%s: %s: %s", o->name, cc, why)) return;
    Buf *bufs = calloc(g->n, sizeof *bufs);
    int ok = bufs != NULL;
    for (uint32_t v = 1; ok && v < g->n; v++) {
        const Node *n = &g->nodes[v];
        if (!s->materialised[v]) continue;
        size_t bytes = (size_t)tensor_numel(n->ndim, n->shape) * kn_dtype_size((kn_dtype)n->dtype);
        ok = buf_alloc(&bufs[v], bytes, how == PORT_TCC);
        if (ok && n->op == OP_INPUT) ok = kn_read(o->ctx, vals[v], bufs[v].p, bytes) == KN_OK;
    }
    EXPECT(ok, "%s: buffers: %s", o->name, kn_last_error(o->ctx));
    /* each kernel in order; its output is compared, then replaced by the
     * interpreter's, so every kernel reads exactly the interpreter's inputs
     * (errors of one kernel are not compounded by the next) */
    for (int i = 0; ok && i < nk; i++) {
        uint32_t v = lk[i].node;
        const Node *n = &g->nodes[v];
        int64_t numel = tensor_numel(n->ndim, n->shape);
        size_t bytes = (size_t)numel * kn_dtype_size((kn_dtype)n->dtype);
        void *want = malloc(bytes ? bytes : 1);
        if (!EXPECT(want && kn_read(o->ctx, vals[v], want, bytes) == KN_OK, "%s: %s", o->name, kn_last_error(o->ctx))) {
            free(want);
            break;
        }
        if (!lk[i].interp) { /* else the interpreter's value only */
            void *b[66], *p = port_jit_sym(m, lk[i].k.name);
            int64_t err[3] = {0, 0, 0}; /* the error cell of a kernel that checks indices */
            KernelFn fn = NULL;
            if (p) memcpy(&fn, &p, sizeof p);
            if (!EXPECT(fn && lk[i].k.nbufs <= 64, "%s: %s: no symbol %s", o->name, cc, lk[i].k.name)) {
                free(want);
                break;
            }
            for (int j = 0; j < lk[i].k.nbufs; j++) b[j] = bufs[lk[i].k.bufs[j].node].p;
            b[lk[i].k.nbufs] = NULL;
            b[lk[i].k.nbufs + 1] = err;
            fn(b);
            EXPECT(!err[0], "%s: %s: %s reports index %lld of %lld", o->name, cc, lk[i].k.name, (long long)err[1],
                   (long long)err[2]);
            if (isa) { /* again on 4 threads' worth of chunks: the same bytes */
                KnParallel par = {port_parallel_for, 4, NULL, NULL, NULL, NULL, NULL};
                void *one = malloc(bytes ? bytes : 1);
                if (one) memcpy(one, bufs[v].p, bytes);
                b[lk[i].k.nbufs] = &par;
                fn(b);
                snprintf(what, sizeof what, "%s/%s/%s threads", o->name, cc, lk[i].k.name);
                EXPECT(one && memcmp(one, bufs[v].p, bytes) == 0, "%s: not the one-thread bytes", what);
                free(one);
            }
            int exact = 0;
            for (int j = 0; j < o->n; j++) exact |= o->node[j] == v && o->exact[j];
            snprintf(what, sizeof what, "%s/%s/%s", o->name, cc, lk[i].k.name);
            EXPECT(same(what, (kn_dtype)n->dtype, bufs[v].p, want, numel, exact), "%s", what);
        }
        memcpy(bufs[v].p, want, bytes);
        free(want);
    }
    for (uint32_t v = 1; bufs && v < g->n; v++) buf_free(&bufs[v]);
    free(bufs);
    port_jit_free(m);
}

/* Ends the trace begun by begin(): schedule, lower, render, compile with
 * both compilers, run and compare. */
static void finish(Outs *o)
{
    kn_ctx *ctx = o->ctx;
    Graph *g = ctx->trace;
    ctx->trace = NULL;
    Arena a;
    arena_init(&a, ctx);
    ExprTable ex;
    expr_init(&ex, ctx);
    Schedule s;
    kn_scope_begin(ctx);
    kn_tensor **vals = calloc(g->n, sizeof *vals);
    uint32_t *prog = calloc(g->n, sizeof *prog);
    Lowered *lk = NULL;
    const Kernel **kp = NULL;
    char *src = NULL;
    int nk = 0, ok = vals && prog && o->n > 0;
    ok = ok && EXPECT(sched_build(ctx, g, o->node, o->n, &a, &s) == 0, "%s: %s", o->name, kn_last_error(ctx));
    if (ok) {
        lk = calloc((size_t)s.nkernels + 1, sizeof *lk);
        kp = calloc((size_t)s.nkernels + 1, sizeof *kp);
        ok = lk && kp;
    }
    for (int i = 0; ok && i < s.nkernels; i++) {
        lk[nk].node = s.kernels[i];
        int r = lower_kernel(ctx, g, &s, s.kernels[i], &ex, &a, &lk[nk].k);
        lk[nk].interp = r == LOWER_INTERP;
        ok = EXPECT(r == 0 || r == LOWER_INTERP, "%s: lowering %%%u: %s", o->name, s.kernels[i], kn_last_error(ctx));
        if (ok && r == 0) ok = EXPECT(ir_verify(ctx, &lk[nk].k) == 0, "%s: %s", o->name, kn_last_error(ctx));
        if (ok && r == 0) kp[nk] = &lk[nk].k;
        nk++;
    }
    /* the kernels that are compiled, in order */
    const Kernel **cp = kp;
    int nc = 0;
    for (int i = 0; ok && i < nk; i++)
        if (!lk[i].interp) cp[nc++] = &lk[i].k;
    if (ok) {
        size_t len = c_render(cp, nc, NULL, 0);
        src = malloc(len + 1);
        ok = src && CHECK(c_render(cp, nc, src, len + 1) == len && strlen(src) == len);
        if (ok) dump(o->name, src);
    }
    /* the oracle: every node by the interpreter */
    if (ok) {
        for (uint32_t v = 1; v < g->n; v++) prog[v - 1] = v;
        graph_run_bind(g, vals);
        ok = EXPECT(graph_run(ctx, g, prog, (int)g->n - 1, vals) == KN_OK, "%s: graph_run: %s", o->name,
                       kn_last_error(ctx));
    }
    if (ok) run_with(PORT_TCC, NULL, o, g, &s, lk, nk, src, vals);
    if (ok) run_with(PORT_CC, NULL, o, g, &s, lk, nk, src, vals);
    if (ok) { /* backend tcc's text, every loop that can through the vector helpers */
        size_t len = c_render_blocks(cp, nc, 1, NULL, 0);
        char *bsrc = malloc(len + 1);
        if (CHECK(bsrc && c_render_blocks(cp, nc, 1, bsrc, len + 1) == len && strlen(bsrc) == len))
            run_with(PORT_TCC, NULL, o, g, &s, lk, nk, bsrc, vals);
        free(bsrc);
    }
    /* the SIMD dialect of the loop-optimised kernels: parallel wherever
     * allowed, vector loops of width 4 (so 7 and 13 leave tails) */
    LoopOptions lo = {1, 4, 0, 0};
    for (int i = 0; ok && i < nk; i++)
        if (!lk[i].interp) ok = EXPECT(loopopt_run(ctx, &lk[i].k, &lo) == 0 && ir_verify(ctx, &lk[i].k) == 0, "%s: %s",
                                       o->name, kn_last_error(ctx));
    if (ok) {
        free(src);
        size_t len = c_render_isa(cp, nc, c_isa_host(), NULL, 0);
        src = malloc(len + 1);
        ok = src && CHECK(c_render_isa(cp, nc, c_isa_host(), src, len + 1) == len && strlen(src) == len);
    }
    if (ok && port_jit_available(PORT_CC)) run_with(PORT_CC, c_isa_host(), o, g, &s, lk, nk, src, vals);
    kn_clear_error(ctx);
    free(src);
    free(kp);
    free(lk);
    free(prog);
    free(vals);
    kn_scope_end(ctx);
    expr_free(&ex);
    arena_free(&a);
    graph_free(g);
}

/* ---- the graphs ---- */

static const char *DTN[KN_NDTYPES] = {"f32", "f64", "f16", "bf16", "i32", "i64", "bool", "u8"};

static int is_transcendental(Op op) { return op >= OP_EXP && op <= OP_ERF && op != OP_SQRT && op != OP_RECIP; }

/* Every elementwise primitive that takes dt, on (7, 13) inputs with
 * special values; where with a mask; two fused chains. */
static void test_elementwise(kn_ctx *ctx, kn_dtype dt)
{
    Outs o;
    char name[32];
    int fl = dt_is_float(dt);
    kn_scope_begin(ctx);
    kn_tensor *x = xin(ctx, dt), *y = yin(ctx, dt), *m = kn_to(ctx, ix(ctx, KN_I64), KN_BOOL);
    snprintf(name, sizeof name, "elementwise_%s", DTN[dt]);
    begin(ctx, &o, name);
    for (int op = OP_NEG; op <= OP_FLOOR; op++) {
        if (!fl && op != OP_NEG && op != OP_ABS && op != OP_FLOOR) continue; /* the rest need floats */
        if (dt == KN_BOOL && op == OP_NEG) continue;
        out(&o, prim1(ctx, (Op)op, x), !is_transcendental((Op)op));
    }
    for (int op = OP_ADD; op <= OP_CMPEQ; op++) {
        if (dt == KN_BOOL && op == OP_POW) continue;
        out(&o, prim2(ctx, (Op)op, x, y), op != OP_POW);
        out(&o, prim2(ctx, (Op)op, y, x), op != OP_POW);
    }
    out(&o, p_where(ctx, m, x, y), 1);
    /* fused: operands used twice (temporaries), rounding or wrapping after every op */
    kn_tensor *c = prim2(ctx, OP_ADD, prim2(ctx, OP_MUL, x, y), prim2(ctx, OP_SUB, x, dt == KN_BOOL ? y : prim1(ctx, OP_NEG, y)));
    out(&o, prim2(ctx, OP_MAX, c, prim2(ctx, OP_MUL, c, c)), 1);
    out(&o, p_where(ctx, prim2(ctx, OP_CMPLT, x, y), prim2(ctx, OP_DIV, x, y), prim2(ctx, OP_MIN, y, x)), 1);
    if (fl) out(&o, prim2(ctx, OP_ADD, prim2(ctx, OP_MUL, prim1(ctx, OP_EXP, x), x), prim1(ctx, OP_SQRT, prim1(ctx, OP_ABS, y))), 0);
    finish(&o);
    kn_scope_end(ctx);
}

/* Every cast between the eight dtypes, and two fused round trips. */
static void test_casts(kn_ctx *ctx)
{
    Outs o;
    kn_scope_begin(ctx);
    kn_tensor *src[KN_NDTYPES];
    for (int d = 0; d < KN_NDTYPES; d++) src[d] = xin(ctx, (kn_dtype)d);
    begin(ctx, &o, "casts");
    for (int from = 0; from < KN_NDTYPES; from++)
        for (int to = 0; to < KN_NDTYPES; to++)
            if (from != to) out(&o, p_cast(ctx, src[from], (kn_dtype)to), 1);
    out(&o, p_cast(ctx, p_cast(ctx, src[KN_F32], KN_F16), KN_F32), 1);
    out(&o, p_cast(ctx, p_cast(ctx, src[KN_F64], KN_BF16), KN_F64), 1);
    out(&o, p_cast(ctx, p_cast(ctx, src[KN_I64], KN_I32), KN_I64), 1);
    out(&o, p_cast(ctx, p_cast(ctx, src[KN_F32], KN_U8), KN_F16), 1);
    finish(&o);
    kn_scope_end(ctx);
}

/* sum and reduce_max over axes of a (3, 5, 7) tensor with a NaN (floats). */
static void test_reduce(kn_ctx *ctx, kn_dtype dt)
{
    static const int axes[][3] = {{0}, {1}, {2}, {0, 2}, {0, 1, 2}, {1, 2}};
    static const int nax[] = {1, 1, 1, 2, 3, 2};
    Outs o;
    char name[32];
    int64_t s357[3] = {3, 5, 7};
    kn_scope_begin(ctx);
    kn_tensor *x = xs(ctx, dt, 3, s357), *z = ys(ctx, dt, 3, s357);
    /* float sums of the specials (1e20 - 1e20 + ...) cancel catastrophically,
     * and f32 accumulates in float where the interpreter uses double */
    kn_tensor *u = dt_is_float(dt) ? make(ctx, dt, 3, s357, NULL, 0, -4, 4) : x;
    snprintf(name, sizeof name, "reduce_%s", DTN[dt]);
    begin(ctx, &o, name);
    for (int i = 0; i < 6; i++) {
        out(&o, p_reduce(ctx, OP_SUM, u, axes[i], nax[i]), !dt_is_float(dt));
        out(&o, p_reduce(ctx, OP_RMAX, x, axes[i], nax[i]), 1);
        out(&o, p_reduce(ctx, OP_RMAX, z, axes[i], nax[i]), 1); /* NaNs at elements 4 and 16 (floats) */
    }
    /* a prologue and an epilogue: max of x*x, sum then scaled */
    out(&o, prim2(ctx, OP_MUL, p_reduce(ctx, OP_SUM, prim2(ctx, OP_MUL, u, u), axes[1], 1), p_reduce(ctx, OP_RMAX, u, axes[1], 1)), 0);
    finish(&o);
    kn_scope_end(ctx);
}

/* Views fused into readers: permute, expand, slices with steps (negative
 * too), pad (its loads guarded by where), reshape of a transposed tensor,
 * and a non-contiguous input. */
static void test_views(kn_ctx *ctx, kn_dtype dt)
{
    Outs o;
    char name[32];
    kn_scope_begin(ctx);
    kn_tensor *x = xin(ctx, dt), *y = yin(ctx, dt);
    kn_tensor *xt = kn_transpose(ctx, yin(ctx, dt), 0, 1); /* a strided input: (13, 7) */
    /* pad values integral for integers: lowering makes an integer constant of
     * the pad value, and ir_const takes only integral ones */
    double pv = dt_is_float(dt) ? 2.5 : 2;
    int64_t row[2] = {1, 13}, pad4[4] = {2, 1, 1, 3}, pad2[2] = {3, 2}, flat = N, r2[2] = {12, 8};
    snprintf(name, sizeof name, "views_%s", DTN[dt]);
    begin(ctx, &o, name);
    out(&o, prim2(ctx, OP_ADD, kn_transpose(ctx, x, 0, 1), xt), 1);
    kn_tensor *r = kn_reshape(ctx, p_slice(ctx, y, 0, 2, 1, 1), 2, row), *c = p_slice(ctx, x, 1, 5, 1, 1);
    out(&o, prim2(ctx, OP_MUL, p_expand(ctx, r, 2, S713), p_expand(ctx, c, 2, S713)), 1);
    out(&o, kn_slice(ctx, x, 1, 1, 12, 3), 1);
    out(&o, p_slice(ctx, p_slice(ctx, x, 0, 6, 4, -2), 1, 12, 5, -3), 1);
    kn_tensor *pd = kn_pad(ctx, x, 4, pad4, pv);
    out(&o, pd, 1);
    out(&o, prim2(ctx, OP_MUL, pd, kn_pad(ctx, y, 4, pad4, dt == KN_U8 ? 3 : -1)), 1);
    out(&o, prim2(ctx, OP_ADD, kn_pad(ctx, xt, 4, pad4, 0), kn_transpose(ctx, kn_pad(ctx, x, 4, (int64_t[]){1, 3, 2, 1}, 0), 0, 1)), 1);
    out(&o, kn_reshape(ctx, kn_transpose(ctx, x, 0, 1), 1, &flat), 1);
    /* pad a flattened tensor, then fold it into rows: // and % of indices that pad shifts below 0 */
    out(&o, kn_reshape(ctx, kn_pad(ctx, kn_reshape(ctx, kn_transpose(ctx, x, 0, 1), 1, &flat), 2, pad2, 1), 2, r2), 1);
    finish(&o);
    kn_scope_end(ctx);
}

/* Views feeding transcendental ops, pad under exp: f32 only. */
static void test_views_math(kn_ctx *ctx)
{
    Outs o;
    kn_scope_begin(ctx);
    kn_tensor *x = kn_randn(ctx, KN_F32, 2, S713);
    int64_t pad4[4] = {1, 1, 2, 2};
    begin(ctx, &o, "views_math");
    kn_tensor *p = kn_pad(ctx, kn_transpose(ctx, x, 0, 1), 4, pad4, -1);
    out(&o, prim2(ctx, OP_MUL, prim1(ctx, OP_EXP, p), prim1(ctx, OP_TANH, p)), 0);
    out(&o, kn_gelu(ctx, kn_pad(ctx, x, 4, pad4, 0.5), 0), 0);
    finish(&o);
    kn_scope_end(ctx);
}

static void test_dot(kn_ctx *ctx, kn_dtype dt)
{
    Outs o;
    char name[32];
    int64_t sa[3] = {2, 5, 7}, sb[3] = {2, 7, 3}, sc[3] = {2, 3, 7}, sw[2] = {4, 7}, sbias = 4;
    kn_scope_begin(ctx);
    kn_tensor *a = kn_to(ctx, kn_randn(ctx, KN_F64, 3, sa), dt), *b = kn_to(ctx, kn_randn(ctx, KN_F64, 3, sb), dt);
    kn_tensor *c = kn_to(ctx, kn_randn(ctx, KN_F64, 3, sc), dt), *w = kn_to(ctx, kn_randn(ctx, KN_F64, 2, sw), dt);
    kn_tensor *bias = kn_to(ctx, kn_randn(ctx, KN_F64, 1, &sbias), dt);
    if (!dt_is_float(dt)) { /* small integers: exact */
        a = kn_to(ctx, kn_floor(ctx, kn_mul(ctx, kn_randn(ctx, KN_F32, 3, sa), kn_scalar(ctx, 4))), dt);
        b = kn_to(ctx, kn_floor(ctx, kn_mul(ctx, kn_randn(ctx, KN_F32, 3, sb), kn_scalar(ctx, 4))), dt);
        c = kn_to(ctx, kn_floor(ctx, kn_mul(ctx, kn_randn(ctx, KN_F32, 3, sc), kn_scalar(ctx, 4))), dt);
    }
    snprintf(name, sizeof name, "dot_%s", DTN[dt]);
    begin(ctx, &o, name);
    out(&o, kn_matmul(ctx, a, b), !dt_is_float(dt));
    out(&o, kn_matmul(ctx, a, kn_transpose(ctx, c, 1, 2)), !dt_is_float(dt)); /* transposed operand */
    if (dt_is_float(dt)) out(&o, kn_linear(ctx, a, w, bias), 0);
    finish(&o);
    kn_scope_end(ctx);
}

static void test_create(kn_ctx *ctx)
{
    Outs o;
    int64_t s3[3] = {3, 4, 5};
    kn_scope_begin(ctx);
    kn_tensor *x = kn_randn(ctx, KN_F32, 2, S713);
    begin(ctx, &o, "create");
    for (int d = 0; d < KN_NDTYPES; d++) {
        out(&o, p_iota(ctx, (kn_dtype)d, 2, S713, 1), 1);
        out(&o, p_iota(ctx, (kn_dtype)d, 3, s3, 0), 1);
    }
    out(&o, p_full(ctx, KN_F32, 2, S713, 0.1), 1);
    out(&o, p_full(ctx, KN_F64, 2, S713, 0.1), 1);
    out(&o, p_full(ctx, KN_F16, 2, S713, 0.1), 1);
    out(&o, p_full(ctx, KN_BF16, 2, S713, -0.1), 1);
    out(&o, p_full(ctx, KN_I32, 2, S713, -7), 1);
    out(&o, p_full(ctx, KN_I64, 2, S713, -9007199254740993.0), 1);
    out(&o, p_full(ctx, KN_BOOL, 2, S713, 1), 1);
    out(&o, p_full(ctx, KN_U8, 2, S713, 200), 1);
    out(&o, p_full(ctx, KN_F32, 2, S713, -INFINITY), 1);
    /* a constant and an iota fused into arithmetic */
    out(&o, prim2(ctx, OP_ADD, prim2(ctx, OP_MUL, x, p_full(ctx, KN_F32, 2, S713, -2.5)), p_iota(ctx, KN_F32, 2, S713, 0)), 1);
    finish(&o);
    kn_scope_end(ctx);
}

/* rand in f32, f64, bf16 and fused: the interpreter's bits, and eager
 * kn_rand's with the same seed and counter (a bare trace reads the
 * generator's state but leaves it as it was). */
static void test_rand(kn_ctx *ctx)
{
    Outs o;
    int64_t s3[3] = {3, 5, 7}, one = 1;
    kn_scope_begin(ctx);
    kn_manual_seed(ctx, 0x123456789abcdefull);
    kn_tensor *x = kn_randn(ctx, KN_F32, 3, s3);
    uint64_t ctr = ctx->rng[1];
    begin(ctx, &o, "rand");
    kn_tensor *r = kn_rand(ctx, KN_F32, 3, s3);
    out(&o, r, 1);
    out(&o, kn_rand(ctx, KN_F64, 2, S713), 1);
    out(&o, kn_rand(ctx, KN_BF16, 1, &one), 1);
    out(&o, prim2(ctx, OP_MUL, kn_rand(ctx, KN_F32, 3, s3), x), 1);
    out(&o, kn_dropout(ctx, x, 0.5, 1), 1);
    Graph *g = ctx->trace;
    ctx->trace = NULL;
    CHECK(ctx->rng[1] == ctr);
    float want[105], got[105];
    kn_tensor *e = kn_rand(ctx, KN_F32, 3, s3); /* eager, from the same counter: the same numbers */
    CHECK(ctx->rng[1] == ctr + 105);
    CHECK(e && kn_read(ctx, e, want, sizeof want) == KN_OK);
    ctx->trace = g;
    /* run the traced rand alone through the C target and compare with eager */
    Arena a;
    arena_init(&a, ctx);
    ExprTable ex;
    expr_init(&ex, ctx);
    Schedule s;
    Kernel k;
    CHECK(sched_build(ctx, g, &r->node, 1, &a, &s) == 0 && s.nkernels == 1);
    CHECK(lower_kernel(ctx, g, &s, r->node, &ex, &a, &k) == 0);
    const Kernel *kp = &k;
    size_t len = c_render(&kp, 1, NULL, 0);
    char *src = malloc(len + 1), why[256];
    c_render(&kp, 1, src, len + 1);
    PortModule *m = c_jit(PORT_TCC, src, NULL, why);
    void *p = m ? port_jit_sym(m, k.name) : NULL;
    KernelFn fn = NULL;
    if (p) memcpy(&fn, &p, sizeof p);
    if (EXPECT(fn != NULL && k.nbufs == 3, "%s", why)) {
        void *b[5] = {got, NULL, NULL, NULL, NULL};
        for (int j = 1; j < k.nbufs; j++) /* the generator's key and counter, as traced */
            b[j] = g->input_vals[g->nodes[k.bufs[j].node].p.i[0]]->st->data;
        uint64_t now = ctx->rng[1];
        ctx->rng[1] = ctr;
        fn(b);
        ctx->rng[1] = now;
        CHECK(memcmp(got, want, sizeof got) == 0);
    }
    port_jit_free(m);
    free(src);
    expr_free(&ex);
    arena_free(&a);
    finish(&o);
    kn_scope_end(ctx);
}

static void test_composites(kn_ctx *ctx, kn_dtype dt)
{
    Outs o;
    char name[32];
    int64_t s13 = 13, sx[4] = {2, 2, 7, 7}, sw[4] = {3, 2, 3, 3}, sb = 3, s7 = 7;
    kn_scope_begin(ctx);
    kn_tensor *x = kn_to(ctx, kn_randn(ctx, KN_F32, 2, S713), dt);
    kn_tensor *w = kn_to(ctx, kn_randn(ctx, KN_F32, 1, &s13), dt), *b = kn_to(ctx, kn_randn(ctx, KN_F32, 1, &s13), dt);
    kn_tensor *cx = kn_to(ctx, kn_randn(ctx, KN_F32, 4, sx), dt), *cw = kn_to(ctx, kn_randn(ctx, KN_F32, 4, sw), dt);
    kn_tensor *cb = kn_to(ctx, kn_randn(ctx, KN_F32, 1, &sb), dt);
    int64_t tv[7] = {0, 12, 5, 3, 3, 7, 1};
    kn_tensor *target = kn_tensor_from(ctx, KN_I64, 1, &s7, tv);
    kn_conv_opts co = {{2, 1}, {1, 2}, {1, 1}, {0, 0}, 1};
    int64_t sq[4] = {2, 3, 7, 5}; /* (B, H, T, E) */
    kn_tensor *q = kn_to(ctx, kn_randn(ctx, KN_F32, 4, sq), dt), *kk = kn_to(ctx, kn_randn(ctx, KN_F32, 4, sq), dt);
    kn_tensor *v = kn_to(ctx, kn_randn(ctx, KN_F32, 4, sq), dt);
    snprintf(name, sizeof name, "composites_%s", DTN[dt]);
    begin(ctx, &o, name);
    out(&o, kn_softmax(ctx, x, 1), 0);
    out(&o, kn_softmax(ctx, x, 0), 0);
    out(&o, kn_layer_norm(ctx, x, 1, &s13, w, b, 1e-5), 0);
    out(&o, kn_gelu(ctx, x, 0), 0);
    out(&o, kn_gelu(ctx, x, 1), 0);
    out(&o, kn_conv2d(ctx, cx, cw, cb, &co), 0);
    out(&o, kn_cross_entropy(ctx, x, target, NULL), 0);
    /* causal attention: the mask's where over the scores inside the max reduction, as a select */
    out(&o, kn_scaled_dot_product_attention(ctx, q, kk, v, NULL, 1, 0.0), 0);
    finish(&o);
    kn_scope_end(ctx);
}

/* gather and scatter_add of x (7, 13) with specials, in every dtype */
static void test_indexing(kn_ctx *ctx, kn_dtype dt)
{
    Outs o;
    char name[32];
    int64_t s75[2] = {7, 5}, s47[2] = {4, 7}, s513[2] = {5, 13}, s73[2] = {7, 3}, v[65];
    kn_scope_begin(ctx);
    kn_tensor *x = xin(ctx, dt), *y = yin(ctx, dt), *xt = kn_transpose(ctx, xin(ctx, dt), 0, 1); /* (13, 7) */
    for (int i = 0; i < 65; i++) v[i] = (i * 7 + i / 3) % 13;
    kn_tensor *i1 = kn_tensor_from(ctx, KN_I64, 2, s75, v), *i2 = kn_to(ctx, kn_tensor_from(ctx, KN_I64, 2, s47, v), KN_I32);
    for (int i = 0; i < 65; i++) v[i] = (i * 5 + i / 13) % 7; /* each one several times */
    kn_tensor *i3 = kn_tensor_from(ctx, KN_I64, 2, s513, v), *i4 = kn_to(ctx, kn_tensor_from(ctx, KN_I64, 2, s73, v), KN_I32);
    snprintf(name, sizeof name, "indexing_%s", DTN[dt]);
    begin(ctx, &o, name);
    out(&o, kn_gather(ctx, x, 1, i1), 1);
    out(&o, kn_gather(ctx, xt, 0, i2), 1);
    out(&o, kn_scatter_add(ctx, x, 0, i3, y), 1); /* f16, bf16: one float add rounded, as exact as the interpreter's */
    out(&o, kn_scatter_add(ctx, xt, 1, i4, y), 1);
    finish(&o);
    kn_scope_end(ctx);
}

/* ---- hand-written IR ---- */

/* Parses text, renders it (in the SIMD dialect for isa, if not NULL),
 * compiles with how, runs it on bufs. */
static int text_blocks; /* renders_with_shared renders backend tcc's text (c_render_blocks, C_BLOCKS_MIN) */
static int blocks; /* run_ir_isa renders the scalar dialect with the block form (c_render_blocks) for any extent */

static size_t render_one(const Kernel *kp, const CIsa *isa, char *src, size_t cap)
{
    return isa || !blocks ? c_render_isa(&kp, 1, isa, src, cap) : c_render_blocks(&kp, 1, 1, src, cap);
}

static int run_ir_isa(int how, const CIsa *isa, const char *text, void **bufs)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    Arena a;
    arena_init(&a, ctx);
    ExprTable ex;
    expr_init(&ex, ctx);
    Kernel k;
    char why[256] = "";
    ir_init(&k, &a, &ex, "");
    int ok = EXPECT(ir_parse(&k, text, why, sizeof why) == 0 && ir_verify(ctx, &k) == 0, "%s %s", why,
                       kn_last_error(ctx));
    const Kernel *kp = &k;
    size_t len = ok ? render_one(kp, isa, NULL, 0) : 0;
    char *src = ok ? malloc(len + 1) : NULL, flags[200];
    if (src) render_one(kp, isa, src, len + 1);
    if (isa) c_cc_flags(isa, flags, sizeof flags);
    PortModule *m = src ? c_jit(how, src, isa ? flags : NULL, why) : NULL;
    void *p = m ? port_jit_sym(m, k.name) : NULL;
    KernelFn fn = NULL;
    if (p) memcpy(&fn, &p, sizeof p);
    ok = ok && EXPECT(fn != NULL, "%s\n%s", why, src ? src : "");
    if (ok) fn(bufs);
    port_jit_free(m);
    free(src);
    expr_free(&ex);
    arena_free(&a);
    kn_ctx_free(ctx);
    return ok;
}

static int run_ir(int how, const char *text, void **bufs) { return run_ir_isa(how, NULL, text, bufs); }
static int renders_with(const CIsa *isa, const char *text, const char *want);
static int same_or_nan(const float *a, const float *b, int n);

#ifndef __wasi__
/* The "c" target's build (c_cc_flags: cc's options, with the ISA's and no FP
 * contraction) of the SIMD dialect leaves none of the f32 math helpers out
 * of line: in the shared object, from a fresh cache directory, no symbol of
 * theirs (at -O2 gcc's inliner would keep exp, erf and tanh out of line and
 * their loops scalar, which slows bench ops' gelu many times). */
static void test_inlined(const CIsa *isa)
{
    char flags[200], root[] = "/tmp/kiln-test-render-XXXXXX", path[512];
    size_t n = c_cc_flags(isa, flags, sizeof flags);
    CHECK_MSG(n < sizeof flags && strstr(flags, isa->flags) && strstr(flags, "-ffp-contract=off"), "flags: %s", flags);
    const char *env = getenv("KILN_CACHE_DIR");
    char *old = env ? strdup(env) : NULL;
    if (!CHECK(mkdtemp(root) != NULL)) return;
    setenv("KILN_CACHE_DIR", root, 1);
    float x[100];
    for (int i = 0; i < 100; i++) x[i] = (float)(i - 50) / 8;
    void *bufs[6] = {x, x, x, x, x, NULL};
    float *y = malloc(4 * sizeof x);
    for (int j = 0; y && j < 4; j++) bufs[j + 1] = y + 100 * j;
    if (CHECK(y != NULL))
        CHECK(run_ir_isa(PORT_CC, isa,
                         "kernel math(in b0 f32[100], out b1 f32[100], out b2 f32[100], out b3 f32[100], out b4 f32[100])\n"
                         "  for s0 in 100\n    b1[s0] = add(exp(b0[s0]), exp(mul(b0[s0], 2)))\n"
                         "    b2[s0] = add(log(b0[s0]), log(mul(b0[s0], 2)))\n    b3[s0] = add(tanh(b0[s0]), tanh(mul(b0[s0], 2)))\n"
                         "    b4[s0] = add(erf(b0[s0]), erf(mul(b0[s0], 2)))\n",
                         bufs));
    free(y);
    static const char *const helpers[] = {"kn_expf", "kn_logf", "kn_tanhf", "kn_erff", "kn_exp2f_in"};
    DIR *d = opendir(root);
    int objects = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        snprintf(path, sizeof path, "%s/%s", root, e->d_name);
        if (len > 3 && !strcmp(e->d_name + len - 3, ".so")) {
            FILE *f = fopen(path, "rb");
            char *bytes = f ? malloc(1 << 24) : NULL;
            size_t got = bytes ? fread(bytes, 1, 1 << 24, f) : 0;
            objects++;
            CHECK_MSG(got > 0 && got < 1 << 24, "%s: %zu bytes read", path, got);
            for (int h = 0; h < 5; h++)
                for (size_t i = 0; i + strlen(helpers[h]) <= got; i++)
                    if (!memcmp(bytes + i, helpers[h], strlen(helpers[h]))) {
                        CHECK_MSG(0, "%s (%s): %s out of line, flags %s", isa->name, path, helpers[h], flags);
                        break;
                    }
            free(bytes);
            if (f) fclose(f);
        }
        if (e->d_name[0] != '.') remove(path);
    }
    if (d) closedir(d);
    CHECK_MSG(objects == 1, "%d shared objects in %s", objects, root);
    CHECK(rmdir(root) == 0);
    if (old) setenv("KILN_CACHE_DIR", old, 1);
    else unsetenv("KILN_CACHE_DIR");
    free(old);
}
#endif

/* The prelude's f32 exp, log, tanh and erf against libm's double value over
 * 2^22 bit patterns spread over all of f32 (every 1024th, jittered: every
 * binade of both signs, -inf, +inf and NaNs), the special values, and every
 * float in a window of 2048 on each side of each edge (exp's overflow and
 * its subnormal results down to 0, tanh's and erf's branch points and the
 * points where they saturate). Bounds per function, in ulps of the
 * result (2^-149 for subnormals; measured with and without FMA: exp 1.00,
 * log 0.81, tanh 1.30, erf 1.37): exp and log 1.5, tanh and erf 2, so a
 * polynomial with a wrong coefficient fails; under TinyCC, which calls
 * libm's float functions, 3. NaN, infinities, zeros and signs must be
 * exactly libm's where its value rounds to one. exp(min(x, 0)), which
 * renders as kn_expf_le0, must equal exp(min(x, 0) computed apart) bit for
 * bit over the same inputs (a NaN any NaN). */
static double ulp_err(float got, double want)
{
    float w = (float)want;
    if (w != w) return got != got ? 0 : INFINITY;
    if (isinf(w) || isinf(got) || (w == 0 && got == 0)) return got == w && signbit(got) == signbit(w) ? 0 : INFINITY;
    int e = -200;
    if (want != 0) frexp(fabs(want), &e);
    return fabs((double)got - want) / ldexp(1, e - 24 < -149 ? -149 : e - 24);
}

static void test_math(int how, const CIsa *isa)
{
    static const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 0x1p-149f, -0x1p-149f, 0x1p-126f,
                               0x1.fffffep127f, -0x1.fffffep127f, 1, -1, 0.625f, -0.625f, 4, -4, 0x1.62e42ep6f,
                               0x1.62e430p6f, -0x1.9fe368p6f, -0x1.9fe36ap6f, -0x1.5d589ep6f, 0x1.6a09e6p0f, 1e-20f,
                               10, -10, 89, -104, 0x1.7ffffep-1f, -0x1.000002p0f};
    /* edges: exp overflows past 88.72 and its results are subnormal below -87.34, 0 below -103.97;
     * tanh switches at 0.625 and is 1 from about 9; erf switches at 1 and is 1 from about 3.92 */
    static const float edge[] = {0x1.62e430p6f, -0x1.5d589ep6f, -0x1.9fe368p6f, -0x1.9p6f, 0.625f, 9.01f, 1, 3.92f, 1e-30f};
    enum { NS = sizeof sp / sizeof *sp, NE = sizeof edge / sizeof *edge, W = 2048, NP = (1 << 22) + NS + NE * 4 * W };
    static const char *const fns[4] = {"exp", "log", "tanh", "erf"};
    static const double bound[4] = {1.5, 1.5, 2, 2};
    float *x = malloc(5 * (size_t)NP * sizeof *x);
    if (!CHECK(x != NULL)) return;
    uint64_t r = 99;
    uint32_t n = 0;
    for (uint32_t i = 0; i < NS; i++) x[n++] = sp[i];
    for (uint32_t i = 0; i < (1u << 22); i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (i << 10) | (uint32_t)(r >> 54);
        memcpy(&x[n++], &u, 4);
    }
    for (uint32_t i = 0; i < NE; i++)
        for (int sign = 0; sign < 2; sign++) {
            uint32_t c;
            memcpy(&c, &edge[i], 4);
            c ^= (uint32_t)sign << 31;
            for (uint32_t k = c - W; k != c + W; k++) memcpy(&x[n++], &k, 4);
        }
    char text[512];
    snprintf(text, sizeof text,
             "kernel math(in b0 f32[%d], out b1 f32[%d], out b2 f32[%d], out b3 f32[%d], out b4 f32[%d])\n"
             "  for s0 in %d\n    b1[s0] = exp(b0[s0])\n    b2[s0] = log(b0[s0])\n"
             "    b3[s0] = tanh(b0[s0])\n    b4[s0] = erf(b0[s0])\n",
             NP, NP, NP, NP, NP, NP);
    void *bufs[5];
    for (int j = 0; j < 5; j++) bufs[j] = x + (size_t)j * NP;
    if (CHECK(n == NP) && run_ir_isa(how, isa, text, bufs))
        for (int j = 0; j < 4; j++) {
            double worst = 0;
            float at = 0;
            for (uint32_t i = 0; i < NP; i++) {
                double v = x[i], want = j == 0 ? exp(v) : j == 1 ? log(v) : j == 2 ? tanh(v) : erf(v);
                double u = ulp_err(x[(size_t)(j + 1) * NP + i], want);
                if (!(u <= worst)) worst = u, at = x[i];
            }
            double b = how == PORT_TCC ? 3 : bound[j]; /* TinyCC's kernels call libm: glibc's tanhf is 2.06 */
            EXPECT(worst <= b, "%s %s: %g ulp at %a (bound %g)", how == PORT_TCC ? "tcc" : isa ? isa->name : "cc",
                   fns[j], worst, at, b);
        }
    /* exp(min(x, 0)) (kn_expf_le0, softmax's exp) against exp of min(x, 0) computed here: bit for bit */
    snprintf(text, sizeof text,
             "kernel mexp(in b0 f32[%d], out b1 f32[%d], out b2 f32[%d], in b3 f32[%d])\n"
             "  for s0 in %d\n    b1[s0] = exp(min(b0[s0], 0))\n    b2[s0] = exp(b3[s0])\n",
             NP, NP, NP, NP, NP);
    for (uint32_t i = 0; i < NP; i++) x[3 * (size_t)NP + i] = x[i] > 0 ? 0.0f : x[i]; /* NaN stays */
    if (run_ir_isa(how, isa, text, bufs)) {
        uint32_t bad = 0, at = 0;
        for (uint32_t i = 0; i < NP; i++) {
            float g = x[NP + i], w = x[2 * (size_t)NP + i];
            if (memcmp(&g, &w, 4) && !(g != g && w != w) && !bad++) at = i;
        }
        EXPECT(!bad, "%s exp(min(x, 0)): %u differ from exp of min(x, 0), first at %a: %a, want %a",
               how == PORT_TCC ? "tcc" : isa ? isa->name : "cc", bad, x[at], x[NP + at], x[2 * (size_t)NP + at]);
    }
    free(x);
}

/* Floor division, modulo, max and min of negative and positive values,
 * against expr_eval. */
static void test_index(int how)
{
    static const char *exprs[] = {"(s0-6)//4", "(s0-6)%4", "(s0-6)//-4", "(s0-6)%-4", "max(s0-6,2-s0)",
                                  "min(s0*2-7,3)", "(s0*3+1)//2", "(s0*3+1)%5", "(s0-6)*(s0-3)//-3", "s0//(s0-6)"};
    enum { NE = sizeof exprs / sizeof *exprs };
    char text[2048];
    int len = snprintf(text, sizeof text, "kernel idx(");
    for (int i = 0; i < NE; i++) len += snprintf(text + len, sizeof text - len, "%sout b%d i64[13]", i ? ", " : "", i);
    len += snprintf(text + len, sizeof text - len, ")\n  for s0 in 13\n");
    for (int i = 0; i < NE; i++) len += snprintf(text + len, sizeof text - len, "    b%d[s0] = idx(%s)\n", i, exprs[i]);
    int64_t got[NE][13];
    void *bufs[NE];
    for (int i = 0; i < NE; i++) bufs[i] = got[i];
    if (!run_ir(how, text, bufs)) return;
    kn_ctx *ctx = kn_ctx_new(NULL);
    ExprTable t;
    expr_init(&t, ctx);
    for (int i = 0; i < NE; i++) {
        ExprId e;
        int bad = 0;
        CHECK(expr_parse(&t, exprs[i], &e) == 0);
        for (int64_t s0 = 0; s0 < 13; s0++) {
            int err = 0;
            int64_t want = expr_eval(&t, e, &s0, &err);
            if (err) want = 0; /* division by zero: the C helpers give 0 */
            if (got[i][s0] != want && !bad++) printf("    %s at s0=%lld: got %lld, want %lld\n", exprs[i], (long long)s0,
                                                     (long long)got[i][s0], (long long)want);
        }
        EXPECT(!bad, "index %s", exprs[i]);
    }
    expr_free(&t);
    kn_ctx_free(ctx);
}

/* Indices out of range (-1, the size, -7) read and write element 0 instead and report to the
 * error cell, the last report kept: the buffers they index sit against a PROT_NONE page, at their
 * start and then at their end, so an unchecked access faults; for cc in both dialects. */
static void test_checks(int how)
{
    const char *text = "kernel chk(in b0 f32[5], in b1 i64[4], in b2 i32[4], out b3 f32[4], out b4 f32[5])\n"
                       "  for s0 in 4\n"
                       "    b3[s0] = b0[0; check(b1[s0], 5)]\n"
                       "  for s1 in 4\n"
                       "    b4[0; check(b2[s1], 5)] += 1\n";
    int64_t i1[4] = {0, 4, 5, -1}, err[3];
    int32_t i2[4] = {-7, 2, 5, 2};
    float got[4];
    for (int at_end = 0; at_end < 2 + 2 * (how == PORT_CC); at_end++) { /* cc: then in the SIMD dialect */
        Buf x, acc;
        if (!EXPECT(buf_alloc(&x, 5 * sizeof(float), at_end % 2) && buf_alloc(&acc, 5 * sizeof(float), at_end % 2), "buffers"))
            return;
        float *xv = x.p, *av = acc.p;
        for (int i = 0; i < 5; i++) xv[i] = (float)(i + 1) / 8, av[i] = (float)i;
        memset(err, 0, sizeof err);
        void *bufs[7] = {x.p, i1, i2, got, acc.p, NULL, err};
        if (run_ir_isa(how, at_end > 1 ? c_isa_host() : NULL, text, bufs)) {
            EXPECT(got[0] == xv[0] && got[1] == xv[4] && got[2] == xv[0] && got[3] == xv[0], "checked gather: %g %g %g %g",
                   got[0], got[1], got[2], got[3]);
            EXPECT(av[0] == 2 && av[1] == 1 && av[2] == 4 && av[3] == 3 && av[4] == 4, "checked scatter: %g %g %g %g %g",
                   av[0], av[1], av[2], av[3], av[4]);
            EXPECT(err[0] == 1 && err[1] == 5 && err[2] == 5, "error cell {%lld, %lld, %lld}", (long long)err[0],
                   (long long)err[1], (long long)err[2]);
        }
        buf_free(&x);
        buf_free(&acc);
    }
}

/* Every loop kind renders as a serial loop (unroll as its iterations written
 * out); an unused buffer and an accumulator nobody reads compile; a shared
 * load under a where branch stays under it. */
static void test_loops(int how)
{
    const char *text = "kernel loops(out b0 f32[24], in b1 f32[6], in b2 i32[4], out b3 f32[6])\n"
                       "  for s0 in 2 parallel\n"
                       "    for s1 in 3 vector(4)\n"
                       "      for s2 in 4 unroll(2)\n"
                       "        b0[s0*12+s1*4+s2] = add(b1[s0*3+s1], cast.f32(idx(s2)))\n"
                       "  for s3 in 1 gpu_block\n"
                       "    for s4 in 6 gpu_thread\n"
                       "      acc a0 f32 max\n"
                       "      acc a1 f32 sum\n"
                       "      for s5 in 3\n"
                       "        a1 += b1[s5]\n"
                       "      b3[s4] = where(cmplt(idx(s4), 5:i64), mul(b1[s4+1], b1[s4+1]), -1)\n";
    float b0[24], b1[6] = {1, 2, 3, 4, 5, 6}, b3[6];
    void *bufs[5] = {b0, b1, NULL, b3, NULL};
    Buf g;
    /* b1 against a guard page: b1[6] would fault */
    if (!CHECK(buf_alloc(&g, sizeof b1, 1))) return;
    memcpy(g.p, b1, sizeof b1);
    bufs[1] = g.p;
    if (run_ir(how, text, bufs)) {
        int ok = 1;
        for (int i = 0; i < 24; i++) ok &= b0[i] == b1[(i / 12) * 3 + (i % 12) / 4] + (float)(i % 4);
        for (int i = 0; i < 6; i++) ok &= b3[i] == (i < 5 ? b1[i + 1] * b1[i + 1] : -1);
        CHECK(ok);
    }
    buf_free(&g);
    /* unroll(W): groups of W iterations written out, then the rest (5 = 2 + 2 + 1); all of them (4) */
    const char *unr = "kernel unr(out b0 f32[10], in b1 f32[6], out b2 f32[8])\n"
                      "  for s0 in 2\n"
                      "    for s1 in 5 unroll(2)\n"
                      "      b0[s0*5+s1] = add(b1[s0+s1], cast.f32(idx(s1)))\n"
                      "    for s2 in 4 unroll(4)\n"
                      "      b2[s0*4+s2] = mul(b1[s2], cast.f32(idx(s0)))\n";
    float u0[10], u2[8];
    void *ubufs[4] = {u0, b1, u2, NULL};
    if (run_ir(how, unr, ubufs)) {
        int ok = 1;
        for (int i = 0; i < 10; i++) ok &= u0[i] == b1[i / 5 + i % 5] + (float)(i % 5);
        for (int i = 0; i < 8; i++) ok &= u2[i] == b1[i % 4] * (float)(i / 4);
        CHECK(ok);
    }
}

/* The scalar dialect's innermost loops (loop.c, put_unrolled): accesses
 * at strides 1, -1 and 2 through pointers set once per group of 4, no
 * multiply left in the statements, and one of stride 0 (a load the loop
 * does not change) read once before the loop; extents of 13 and 11 (groups and a
 * rest); a sum chained through a group's copies (8 of them), the same bits
 * as the serial sum;
 * a load under a where that reads past its buffer (b1 ends at a guard page)
 * where the mask is false: it joins the pointer of an unconditional load of
 * the same buffer and is never made. */
/* kn_rt_vsum's order: 8 lanes, then pairs of pairs */
static float lane_sum(const float *a, int n)
{
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < n; i++) s[i % 8] += a[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static void test_unrolled(int how)
{
    static const char text[] =
        "kernel unr(out b0 f32[78], in b1 f32[96], out b2 f32[6], in b3 f32[6], out b4 f32[13])\n"
        "  for s0 in 6\n"
        "    for s1 in 13\n"
        "      b0[s0*13+s1] = add(mul(b1[s0*16+s1+2], b3[s0]), b1[s0*16-s1+14])\n"
        "    acc a0 f32 sum\n"
        "    for s2 in 11\n"
        "      a0 += mul(b1[s0*8+s2*2], b1[s0*8+s2*2+1])\n"
        "    b2[s0] = a0\n"
        "  for s3 in 13\n"
        "    b4[s3] = add(b1[s3+83], where(cmplt(idx(s3), 12:i64), b1[s3+84], 0))\n";
    if (how == PORT_TCC) {
        CHECK(renders_with(NULL, text, "s1_q0[3] = (s1_q1[3] * s1_h0) + s1_q2[-3];"));
        CHECK(renders_with(NULL, text, "const float *s1_q2 = b1 + (s1_r2 - s1_o);"));
        CHECK(renders_with(NULL, text, "const float s1_h0 = b3[s0];")); /* once a row */
        CHECK(renders_with(NULL, text, "a0 = ((((((((a0 + (s2_q0[0] * s2_q0[1])) + (s2_q0[2] * s2_q0[3])) + "
                                       "(s2_q0[4] * s2_q0[5])) + (s2_q0[6] * s2_q0[7])) + (s2_q0[8] * s2_q0[9]))"));
        CHECK(renders_with(NULL, text, "a0 = a0 + (s2_q0[0] * s2_q0[1]);")); /* the 3 left over */
        CHECK(renders_with(NULL, text, "s3_q0[3] = s3_q1[3] + ((s3 < 12) ? s3_q1[4] : 0.0f);"));
        CHECK(renders_with(c_isa_host(), text, "b0[s0*13 + s1] = (b1[s0*16 + s1 + 2] * b3[s0]) + b1[s0*16 - s1 + 14];"));
    }
    float b0[78], b2[6], b3[6], b4[13], in[96];
    for (int i = 0; i < 96; i++) in[i] = (float)((i * 37) % 23) / 7.0f - 1.5f;
    for (int i = 0; i < 6; i++) b3[i] = 0.25f * (float)i - 0.6f;
    Buf g;
    if (!CHECK(buf_alloc(&g, sizeof in, 1))) return;
    memcpy(g.p, in, sizeof in);
    void *bufs[6] = {b0, g.p, b2, b3, b4, NULL};
    if (run_ir(how, text, bufs)) {
        int ok = 1;
        for (int i = 0; i < 6; i++) {
            float a = 0;
            for (int j = 0; j < 13; j++) ok &= b0[i * 13 + j] == in[i * 16 + j + 2] * b3[i] + in[i * 16 - j + 14];
            float p[11];
            for (int j = 0; j < 11; j++) p[j] = in[i * 8 + j * 2] * in[i * 8 + j * 2 + 1];
            if (blocks) a = lane_sum(p, 11); /* one block's sum (kn_rt_vsum) */
            else
                for (int j = 0; j < 11; j++) a = a + p[j];
            ok &= memcmp(&a, &b2[i], sizeof a) == 0;
        }
        for (int j = 0; j < 13; j++) ok &= b4[j] == in[j + 83] + (j < 12 ? in[j + 84] : 0.0f);
        CHECK(ok);
    }
    buf_free(&g);
}

/* Values an innermost loop of the scalar dialect does not change are
 * computed once before it: a row's scale and the reciprocal of its sum (an
 * accumulator the loop does not update) and a row's mask; not a load of a
 * buffer the loop stores (b0 itself, read after the row's first store),
 * nor one that leaves its buffer for some row (b3 at s0+3, guarded: b3
 * ends at a guard page), nor the sum a loop updates. */
static void test_hoisted(int how)
{
    static const char text[] =
        "kernel hoist(out b0 f32[64], in b1 f32[64], in b2 f32[4], in b3 f32[5])\n"
        "  for s0 in 4\n"
        "    acc a0 f32 sum\n"
        "    for s1 in 16\n"
        "      a0 += mul(b1[s0*16+s1], b2[s0])\n"
        "    for s2 in 16\n"
        "      b0[s0*16+s2] = add(mul(b1[s0*16+s2], mul(b2[s0], recip(a0))), "
        "where(cmplt(idx(s0), 2:i64), b3[s0+3], b0[s0*16]))\n";
    if (how == PORT_TCC) {
        CHECK(renders_with(NULL, text, "const float s2_h0 = b2[s0] * (1 / a0);"));
        CHECK(renders_with(NULL, text, "const float s1_h0 = b2[s0];"));
        CHECK(renders_with(NULL, text, "s2_q0[3] = (s2_q1[3] * s2_h0) + (s2_h1 ? b3[s0 + 3] : s2_q2[0]);"));
    }
    float b0[64], w0[64], b1[64], b2[4] = {0.5f, -1.25f, 2.0f, 3.0f}, in3[5] = {1, 2, 3, 4, 5};
    for (int i = 0; i < 64; i++) b1[i] = (float)(i % 9) - 3.5f, b0[i] = w0[i] = 100.0f + (float)i;
    Buf g;
    if (!CHECK(buf_alloc(&g, sizeof in3, 1))) return;
    memcpy(g.p, in3, sizeof in3);
    void *bufs[5] = {b0, b1, b2, g.p, NULL};
    if (run_ir(how, text, bufs)) {
        for (int i = 0; i < 4; i++) { /* the kernel, serially: b0[s0*16] read after its store */
            float a = 0;
            for (int j = 0; j < 16; j++) a = a + b1[i * 16 + j] * b2[i];
            for (int j = 0; j < 16; j++) w0[i * 16 + j] = b1[i * 16 + j] * (b2[i] * (1 / a)) + (i < 2 ? in3[i + 3] : w0[i * 16]);
        }
        CHECK(memcmp(w0, b0, sizeof w0) == 0);
    }
    buf_free(&g);
}

/* A where of the scalar dialect whose mask reads a buffer and whose
 * branches are cheap loads in bounds and constants (a ReLU's backward
 * mask) is KN_TSEL, a select on bits under TinyCC; one whose mask is of
 * indices (a pad's) stays a ?:, as does one with a call in a branch. Both
 * give the same bits as the ?:, -0 and NaN payloads included, in f32 and
 * f64. */
static void test_data_select(int how)
{
    static const char text[] =
        "kernel dsel(out b0 f32[37], in b1 bool[37], in b2 f32[37], in b3 bool[37], out b4 f64[37], in b5 f64[37], "
        "out b6 f32[37])\n"
        "  for s0 in 37\n"
        "    b0[s0] = where(b1[s0], b2[s0], where(b3[s0], 0, b2[s0]))\n"
        "    b4[s0] = where(b1[s0], neg(b5[s0]), 1.5:f64)\n"
        "    b6[s0] = add(where(cmplt(idx(s0), 20:i64), b2[s0], 2), where(b3[s0], sqrt(b2[s0]), -0))\n";
    if (how == PORT_TCC) {
        /* the three stores share the masks and b2's load as temporaries (a run of stores: put_run) */
        CHECK(renders_with(NULL, text, "s0_q0[0] = KN_TSEL(t0, t1, KN_TSEL(t2, 0.0f, t1));"));
        CHECK(renders_with(NULL, text, "s0_q4[0] = KN_TDSEL(t0, -s0_q5[0], 1.5);"));
        CHECK(renders_with(NULL, text, "s0_q6[0] = KN_SEL(s0 < 20, t1, 2.0f) + (t2 ? sqrtf(t1) : (-0.0f));"));
        CHECK(renders_with(c_isa_host(), text, "b0[s0] = t0 ? t1 : KN_SEL(t2, 0.0f, t1);"));
    }
    uint8_t m1[37], m3[37];
    float b0[37], b2[37], b6[37];
    double b4[37], b5[37];
    static const float sp[] = {-0.0f, 0.0f, 1.5f, -2.25f, INFINITY, -INFINITY, NAN};
    uint32_t payload = 0x7fc12345u;
    for (int i = 0; i < 37; i++) {
        m1[i] = (uint8_t)((i * 7 + i / 3) % 2), m3[i] = (uint8_t)((i * 5) % 3 == 0);
        b2[i] = i < 7 ? sp[i] : (float)(i % 9) - 4.0f;
        b5[i] = i < 7 ? (double)sp[i] : (double)(i % 5) - 2.5;
    }
    memcpy(&b2[8], &payload, 4); /* a NaN of its own bits */
    void *bufs[8] = {b0, m1, b2, m3, b4, b5, b6, NULL};
    if (run_ir(how, text, bufs)) {
        int ok = 1;
        for (int i = 0; i < 37; i++) {
            float w0 = m1[i] ? b2[i] : m3[i] ? 0.0f : b2[i], w6 = (i < 20 ? b2[i] : 2.0f) + (m3[i] ? sqrtf(b2[i]) : -0.0f);
            double w4 = m1[i] ? -b5[i] : 1.5;
            ok &= memcmp(&w0, &b0[i], 4) == 0 && memcmp(&w4, &b4[i], 8) == 0 && same_or_nan(&w6, &b6[i], 1);
        }
        CHECK(ok);
    }
}

/* Copies and zeros in the scalar dialect: an innermost loop that stores a
 * load of another buffer at stride 1 (a row of a transpose read back, a
 * cast to its own dtype) is memcpy, one that stores +0 is memset, the
 * same bytes (a NaN's own bits too); a loop shorter than 16, a bool copy
 * (normalised), -0 and a buffer copied onto itself stay loops. */
static void test_copies(int how)
{
    static const char text[] =
        "kernel cp(out b0 f32[96], in b1 f32[96], out b2 i64[40], in b3 i64[40], out b4 bool[20], in b5 bool[20], "
        "out b6 f32[60])\n"
        "  for s0 in 4\n"
        "    for s1 in 24\n"
        "      b0[s0*24+s1] = cast.f32(b1[s0*24+s1])\n"
        "  for s2 in 2\n"
        "    for s3 in 20\n"
        "      b2[s2*20+s3] = b3[s3+s2*20]\n"
        "    for s4 in 10\n"
        "      b4[s2*10+s4] = b5[s2*10+s4]\n"
        "  for s5 in 20\n"
        "    b6[s5] = 0\n"
        "  for s6 in 20\n"
        "    b6[s6+20] = -0\n"
        "  for s7 in 20\n"
        "    b6[s7+40] = b6[s7]\n";
    if (how == PORT_TCC) {
        CHECK(renders_with(NULL, text, "memcpy(&b0[s0*24 + s1], &b1[s0*24 + s1], (size_t)n_ * sizeof *b0);"));
        CHECK(renders_with(NULL, text, "memcpy(&b2[s2*20 + s3], &b3[s2*20 + s3], (size_t)n_ * sizeof *b2);"));
        CHECK(renders_with(NULL, text, "memset(&b6[s5], 0, (size_t)n_ * sizeof *b6);"));
        CHECK(!renders_with(NULL, text, "memcpy(&b4"));
        CHECK(!renders_with(NULL, text, "memset(&b6[s6"));
        CHECK(!renders_with(NULL, text, "memcpy(&b6"));
        CHECK(!renders_with(c_isa_host(), text, "memcpy(&b0"));
    }
    float b0[96], b1[96], b6[60];
    int64_t b2[40], b3[40];
    uint8_t b4[20], b5[20];
    uint32_t snan = 0x7f812345u;
    for (int i = 0; i < 96; i++) b1[i] = (float)i * 0.75f - 20.0f;
    memcpy(&b1[7], &snan, 4); /* a signalling NaN's bits, copied as they are */
    for (int i = 0; i < 40; i++) b3[i] = (int64_t)i * 1000000007 - INT64_C(4000000000);
    for (int i = 0; i < 20; i++) b5[i] = (uint8_t)(i % 3 == 0 ? 7 : 0); /* a bool stored as 7 reads back as 1 */
    memset(b6, 0x55, sizeof b6);
    void *bufs[8] = {b0, b1, b2, b3, b4, b5, b6, NULL};
    if (run_ir(how, text, bufs)) {
        int ok = memcmp(b0, b1, sizeof b0) == 0 && memcmp(b2, b3, sizeof b2) == 0;
        for (int i = 0; i < 20; i++) {
            float z = 0.0f, w = -0.0f;
            ok &= b4[i] == (b5[i] != 0) && memcmp(&b6[i], &z, 4) == 0 && memcmp(&b6[i + 20], &w, 4) == 0 &&
                  memcmp(&b6[i + 40], &z, 4) == 0;
        }
        CHECK(ok);
    }
}

static int renders_blocks(const char *text, const char *want)
{
    text_blocks = 1;
    int found = renders_with(NULL, text, want);
    text_blocks = 0;
    return found;
}

/* Backend tcc's block form (loop.c, put_blocks): loops of 200 iterations
 * (three whole blocks and 8 left) and of 40 (one part of a block) through
 * the vector helpers, the same bits as the scalar dialect's loops for max
 * and min of NaN and zeros of either sign, where over NaN, compares and
 * casts between f32 and bool, exp, division, a strided load and a strided
 * store; a sum (in lanes, kn_rt_vsum) and a max (in order) of a row. A
 * loop under C_BLOCKS_MIN, an index in a value, a load of a row that may
 * leave its buffer under a where (a pad's) stay scalar. */
static void test_blocks(void)
{
    static const char text[] =
        "kernel blk(out b0 f32[200], in b1 f32[200], in b2 f32[200], out b3 bool[200], out b4 f32[400], "
        "out b5 f32[200], out b6 f32[2], out b7 f32[40], in b8 f32[1])\n"
        "  for s0 in 200\n"
        "    b0[s0] = add(max(b1[s0], b2[s0]), mul(min(b1[s0], b2[s0]), b8[0]))\n"
        "    b3[s0] = cmplt(b1[s0], b2[s0])\n"
        "    b4[s0*2] = where(cmpeq(b1[s0], b2[s0]), div(b1[s0], b2[s0]), exp(b2[s0]))\n"
        "    b4[s0*2+1] = add(cast.f32(cast.bool(b1[s0])), b1[199-s0])\n"
        "  for s1 in 200\n"
        "    b5[s1] = mul(cast.f32(b3[s1]), b0[s1])\n"
        "  acc a0 f32 sum\n"
        "  acc a1 f32 max\n"
        "  for s2 in 190\n"
        "    a0 += b2[s2+10]\n"
        "    a1 max= b1[s2+10]\n"
        "  b6[0] = a0\n"
        "  b6[1] = a1\n"
        "  for s3 in 40\n"
        "    b7[s3] = where(cmplt(idx(s3), 39:i64), b1[s3+161], 0)\n";
    CHECK(renders_blocks(text, "kn_rt_vbinary(16 /* max */, s0_w"));
    CHECK(renders_blocks(text, "kn_rt_vcopy(s0_q"));           /* b4's strided store */
    CHECK(renders_blocks(text, "a0 = a0 + kn_rt_vsum(s2_q"));
    CHECK(renders_blocks(text, "a1 = kn_rt_vaccmax(a1, s2_q"));
    CHECK(!renders_blocks(text, "s3_w"));                       /* idx(s3): scalar */
    CHECK(!renders_with(NULL, text, "kn_rt_v"));                /* nor declared in the plain scalar dialect */
    static const char pad[] = "kernel pad(out b0 f32[300], in b1 f32[290], in b2 bool[300])\n"
                              "  for s0 in 300\n"
                              "    b0[s0] = where(b2[s0], b1[s0], 0)\n";
    CHECK(!renders_blocks(pad, "vector helpers"));
    static const char self[] = "kernel self(out b0 f32[300])\n" /* reads what it stores: in order, one at a time */
                               "  for s0 in 299\n"
                               "    b0[s0+1] = add(b0[s0], 1)\n";
    CHECK(!renders_blocks(self, "vector helpers"));
    static const char shortl[] = "kernel sh(out b0 f32[20], in b1 f32[20])\n"
                                 "  for s0 in 20\n"
                                 "    b0[s0] = mul(b1[s0], b1[s0])\n";
    CHECK(!renders_blocks(shortl, "vector helpers"));
    static const float sp[] = {NAN, 0.0f, -0.0f, 0.0f, -0.0f, 1.5f, INFINITY, -INFINITY, 3.0f, 2.0f};
    static const float sq[] = {1.0f, -0.0f, 0.0f, 0.0f, -0.0f, NAN, 2.0f, -INFINITY, 3.0f, -7.0f};
    float in1[200], in2[200], scale = 0.75f, got[6][400], want[6][400];
    uint8_t m[2][200];
    for (int i = 0; i < 200; i++) {
        in1[i] = i < 10 ? sp[i] : (float)((i * 37) % 23) / 7.0f - 1.5f;
        in2[i] = i < 10 ? sq[i] : i % 17 == 0 ? in1[i] : (float)((i * 11) % 19) / 5.0f - 2.0f;
    }
    for (int w = 0; w < 2; w++) { /* 0: the scalar dialect, 1: blocks */
        float(*o)[400] = w ? got : want;
        void *bufs[10] = {o[0], in1, in2, m[w], o[1], o[2], o[3], o[4], &scale, NULL};
        memset(o, 0, sizeof got);
        blocks = w;
        int ran = run_ir(PORT_TCC, text, bufs);
        blocks = 0;
        if (!ran) return;
    }
    /* a NaN max or min makes: NAN, whose sign is TinyCC's (0.0f / 0.0f) in the scalar dialect's code */
    CHECK(same_or_nan(got[0], want[0], 200) && memcmp(m[0], m[1], 200) == 0);
    CHECK(same_or_nan(got[1], want[1], 400) && same_or_nan(got[2], want[2], 200));
    CHECK(memcmp(got[4], want[4], 40 * sizeof(float)) == 0);
    /* the rows past the specials (NaN, infinities): a sum of three blocks (64, 64, 62) in kn_rt_vsum's
     * order, and their max as the scalar loop's, bit for bit */
    float lanes = 0;
    for (int i = 10; i < 200; i += 64) lanes = lanes + lane_sum(in2 + i, 200 - i < 64 ? 200 - i : 64);
    CHECK_MSG(!isnan(lanes) && memcmp(&lanes, &got[3][0], 4) == 0, "sum %.9g, want %.9g", got[3][0], lanes);
    CHECK(memcmp(&got[3][1], &want[3][1], 4) == 0 && got[3][1] == got[3][1]);
}

/* a[0, n) and b[0, n) have the same bits, or are both NaN: which NaN a sum of
 * two ends with is the compiler's choice (it may swap an add's operands) */
static int same_or_nan(const float *a, const float *b, int n)
{
    for (int i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a) && !(a[i] != a[i] && b[i] != b[i])) return 0;
    return 1;
}

/* Threads and lanes: a parallel loop of rows whose vector loop updates
 * max, sum and integer sum accumulators of f32, f64 and i64 (lanes in the
 * SIMD dialect, in GNU C vectors where the compiler has them; 37 is 4
 * lanes of 8 and a tail of 5), and a flat parallel loop (chunks start at
 * multiples of 16); each on one thread and on the pool: the same bytes.
 * Max and integer sums equal the serial ones exactly, NaN included; float
 * sums within rounding of a double sum. */
static void test_threads(int how, const CIsa *isa)
{
    enum { R = 37, C = 37, F = 1000 };
    const char *rows = "kernel rows(out b0 f32[37], out b1 f32[37], in b2 f32[1369], out b3 i64[37], out b4 f64[37], "
                       "out b5 f64[37], out b6 i64[37])\n"
                       "  for s0 in 37 parallel\n"
                       "    acc a0 f32 max\n"
                       "    acc a1 f32 sum\n"
                       "    acc a2 i64 sum\n"
                       "    acc a3 f64 max\n"
                       "    acc a4 f64 sum\n"
                       "    acc a5 i64 max\n"
                       "    for s1 in 37 vector(8)\n"
                       "      a0 max= b2[s0*37+s1]\n"
                       "      a1 += b2[s0*37+s1]\n"
                       "      a2 += cast.i64(mul(b2[s0*37+s1], 100))\n"
                       "      a3 max= cast.f64(b2[s0*37+s1])\n"
                       "      a4 += cast.f64(b2[s0*37+s1])\n"
                       "      a5 max= cast.i64(mul(b2[s0*37+s1], -100))\n"
                       "    b0[s0] = a0\n"
                       "    b1[s0] = a1\n"
                       "    b3[s0] = a2\n"
                       "    b4[s0] = a3\n"
                       "    b5[s0] = a4\n"
                       "    b6[s0] = a5\n";
    /* updates that add loads as they are (a unit-stride load of the accumulator's type): with
     * KN_VEC, their vectors come straight from the buffer; the bits of rows' a0, a1, a3, a2 */
    const char *direct = "kernel direct(out b0 f32[37], out b1 f32[37], in b2 f32[1369], out b3 f64[37], "
                         "in b4 f64[1369], out b5 i64[37], in b6 i64[1369])\n"
                         "  for s0 in 37 parallel\n"
                         "    acc a0 f32 max\n"
                         "    acc a1 f32 sum\n"
                         "    acc a2 f64 max\n"
                         "    acc a3 i64 sum\n"
                         "    for s1 in 37 vector(8)\n"
                         "      a0 max= b2[s0*37+s1]\n"
                         "      a1 += b2[s0*37+s1]\n"
                         "      a2 max= b4[s1+s0*37]\n"
                         "      a3 += b6[s0*37+s1]\n"
                         "    b0[s0] = a0\n"
                         "    b1[s0] = a1\n"
                         "    b3[s0] = a2\n"
                         "    b5[s0] = a3\n";
    const char *flat = "kernel flat(out b0 f32[1000], in b1 f32[1000])\n"
                       "  for s0 in 1000 parallel\n"
                       "    b0[s0] = exp(mul(b1[s0], 0.01))\n";
    static float x[R * C], mx[2][R], sum[2][R], fx[F], fy[2][F], dmxf[2][R], dsumf[2][R];
    static double dmx[2][R], dsum[2][R], xd[R * C], dmxd[2][R];
    static int64_t isum[2][R], imx[2][R], xi[R * C], dsumi[2][R];
    const char *name = how == PORT_TCC ? "tcc" : isa ? isa->name : "cc";
    for (int i = 0; i < R * C; i++) x[i] = (float)uniform(-3, 3);
    for (int i = 0; i < F; i++) fx[i] = (float)(i - 500);
    x[5 * C + 36] = NAN, x[9 * C + 2] = NAN; /* a NaN in a tail and in a lane */
    /* NaNs of other bits (the first one a lane meets is the max's: redone when a vector max
     * saw a NaN), and a row whose max is -0 and +0 (the first of equal values) */
    uint32_t nan1 = 0x7fc00123u, nan2 = 0xffc00000u;
    memcpy(&x[11 * C + 20], &nan1, 4), memcpy(&x[11 * C + 4], &nan2, 4), memcpy(&x[11 * C + 30], &nan2, 4);
    for (int c = 0; c < C; c++) x[12 * C + c] = -(float)(c + 1);
    x[12 * C + 1] = -0.0f, x[12 * C + 6] = 0.0f, x[12 * C + 17] = -0.0f;
    for (int i = 0; i < R * C; i++) xd[i] = x[i], xi[i] = x[i] == x[i] ? (int64_t)(x[i] * 100.0f) : 0;
    KnParallel par = {port_parallel_for, 4, NULL, NULL, NULL, NULL, NULL};
    for (int t = 0; t < 2; t++) {
        void *b[8] = {mx[t], sum[t], x, isum[t], dmx[t], dsum[t], imx[t], t ? &par : NULL};
        void *bf[3] = {fy[t], fx, t ? &par : NULL};
        void *bd[8] = {dmxf[t], dsumf[t], x, dmxd[t], xd, dsumi[t], xi, t ? &par : NULL};
        if (!run_ir_isa(how, isa, rows, b) || !run_ir_isa(how, isa, flat, bf) || !run_ir_isa(how, isa, direct, bd)) return;
    }
    for (int t = 0; t < 2; t++)
        EXPECT(!memcmp(dmxf[t], mx[0], sizeof mx[0]) && same_or_nan(dsumf[t], sum[0], R) &&
                   !memcmp(dmxd[t], dmx[0], sizeof dmx[0]) && !memcmp(dsumi[t], isum[0], sizeof isum[0]),
               "%s: loads added as they are (%d threads): not the bytes of the same sums and maxes", name, t ? 4 : 1);
    EXPECT(!memcmp(mx[0], mx[1], sizeof mx[0]) && !memcmp(sum[0], sum[1], sizeof sum[0]) &&
               !memcmp(isum[0], isum[1], sizeof isum[0]) && !memcmp(fy[0], fy[1], sizeof fy[0]) &&
               !memcmp(dmx[0], dmx[1], sizeof dmx[0]) && !memcmp(dsum[0], dsum[1], sizeof dsum[0]) &&
               !memcmp(imx[0], imx[1], sizeof imx[0]),
           "%s: threads change the bytes", name);
    for (int r = 0; r < R; r++) {
        double m = -INFINITY, s = 0;
        int64_t si = 0, mi = INT64_MIN;
        for (int c = 0; c < C; c++) {
            float v = x[r * C + c];
            int64_t vi = v == v ? (int64_t)(v * -100.0f) : 0; /* a NaN casts to 0 */
            m = v != v || m != m ? NAN : v > m ? v : m;
            s += v;
            si += v == v ? (int64_t)(v * 100.0f) : 0;
            mi = vi > mi ? vi : mi;
        }
        EXPECT(m == dmx[0][r] || (m != m && dmx[0][r] != dmx[0][r]), "%s: f64 max of row %d: %g, want %g", name, r,
               dmx[0][r], m);
        EXPECT(s != s ? dsum[0][r] != dsum[0][r] : fabs(dsum[0][r] - s) <= 1e-12 * 37 * 3,
               "%s: f64 sum of row %d: %.17g, want %.17g", name, r, dsum[0][r], s);
        EXPECT(imx[0][r] == mi, "%s: integer max of row %d: %lld, want %lld", name, r, (long long)imx[0][r],
               (long long)mi);
        EXPECT(m == mx[0][r] || (m != m && mx[0][r] != mx[0][r]), "%s: max of row %d: %g, want %g", name, r,
               mx[0][r], m);
        EXPECT(s != s ? sum[0][r] != sum[0][r] : fabs(sum[0][r] - s) <= 1e-5 * 37 * 3, "%s: sum of row %d: %g, want %g",
               name, r, sum[0][r], s);
        EXPECT(m != m || isum[0][r] == si, "%s: integer sum of row %d: %lld, want %lld", name, r,
               (long long)isum[0][r], (long long)si);
    }
    for (int i = 0; i < F; i++)
        if (!EXPECT(test_close(fy[0][i], exp(fx[i] * 0.01), 1e-6, 0), "%s: exp at %d", name, i)) break;
}

/* 1 if kernel text, rendered in isa's dialect, contains want. */
static int renders_with_shared(const CIsa *isa, const char *text, const char *want, unsigned shared);

static int renders_with(const CIsa *isa, const char *text, const char *want)
{
    return renders_with_shared(isa, text, want, 0);
}

/* shared: a mask of the buffers marked shared (IrBuf.shared: not in the text form) */
static int renders_with_shared(const CIsa *isa, const char *text, const char *want, unsigned shared)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    Arena a;
    arena_init(&a, ctx);
    ExprTable ex;
    expr_init(&ex, ctx);
    Kernel k;
    char why[256] = "";
    ir_init(&k, &a, &ex, "");
    const Kernel *kp = &k;
    int found = 0;
    if (EXPECT(ir_parse(&k, text, why, sizeof why) == 0, "%s", why)) {
        for (int b = 0; b < k.nbufs && b < 32; b++) k.bufs[b].shared = shared >> b & 1;
        size_t len = text_blocks ? c_render_blocks(&kp, 1, C_BLOCKS_MIN, NULL, 0) : c_render_isa(&kp, 1, isa, NULL, 0);
        char *src = malloc(len + 1);
        if (src && text_blocks) c_render_blocks(&kp, 1, C_BLOCKS_MIN, src, len + 1);
        else if (src) c_render_isa(&kp, 1, isa, src, len + 1);
        found = src && strstr(src, want) != NULL;
        free(src);
    }
    expr_free(&ex);
    arena_free(&a);
    kn_ctx_free(ctx);
    return found;
}

/* A parallel loop's iterations are independent: an innermost one carries
 * KN_IVDEP in the SIMD dialect, so the vectoriser needs no overlap checks
 * (a group's kernel reads and writes many buffers); a parallel loop around
 * another does not. */
static void test_ivdep(const CIsa *isa)
{
    const char *flat = "kernel flat(out b0 f32[4096], out b1 f32[4096], in b2 f32[4096], in b3 f32[4096])\n"
                       "  for s0 in 4096 parallel\n"
                       "    b0[s0] = mul(b2[s0], b3[s0])\n"
                       "    b1[s0] = add(b2[s0], b3[s0])\n";
    const char *nest = "kernel nest(out b0 f32[4096], in b1 f32[4096])\n"
                       "  for s0 in 64 parallel\n"
                       "    for s1 in 64\n"
                       "      b0[s0*64+s1] = exp(b1[s0*64+s1])\n";
    EXPECT(renders_with(isa, flat, "KN_IVDEP for (int64_t s0 = lo;"), "%s: an innermost parallel loop", isa->name);
    EXPECT(!renders_with(isa, nest, "KN_IVDEP for (int64_t s0 = lo;"), "%s: a parallel loop around another", isa->name);
    EXPECT(!renders_with(NULL, flat, "KN_IVDEP"), "the scalar dialect has no KN_IVDEP");
}

/* An output written in place over an input (IrBuf.shared, compile.c's donations): neither is restrict,
 * in either dialect; the others are. */
static void test_shared_bufs(const CIsa *isa)
{
    const char *adam = "kernel adam(out b0 f32[4096], in b1 f32[4096], in b2 f32[4096])\n"
                       "  for s0 in 4096 parallel\n"
                       "    b0[s0] = sub(b1[s0], mul(b2[s0], 0.001))\n";
    for (int d = 0; d < 2; d++) {
        const CIsa *i = d ? isa : NULL;
        EXPECT(renders_with_shared(i, adam, "float *b0 = (float *)b[0];", 3) &&
               renders_with_shared(i, adam, "const float *b1 = (const float *)b[1];", 3) &&
               renders_with_shared(i, adam, "const float *restrict b2 =", 3) &&
               renders_with_shared(i, adam, "float *restrict b0 =", 0),
               "%s: shared buffers are not restrict, others are", i ? i->name : "scalar");
    }
}

/* A large output (8 MiB or more) that a vector loop stores once, and the
 * kernel never loads, streams past the caches where the instruction set has
 * non-temporal stores: the bits of the scalar dialect on one thread and on
 * the pool, rows of 1025 (most not 64-byte aligned, each with a tail of 1)
 * included. An output the kernel loads again, or a smaller one, does not
 * stream. */
static void test_stream(const CIsa *isa)
{
    enum { R = 2049, C = 1025 };
    const char *big = "kernel big(out b0 f32[2100225], in b1 f32[2100225])\n"
                      "  for s0 in 2049 parallel\n"
                      "    for s1 in 1025 vector(8)\n"
                      "      b0[s0*1025+s1] = mul(add(b1[s0*1025+s1], 0.5), 3)\n";
    const char *again = "kernel again(out b0 f32[2100225], in b1 f32[2100225])\n"
                        "  for s0 in 2049 parallel\n"
                        "    for s1 in 1025 vector(8)\n"
                        "      b0[s0*1025+s1] = exp(b1[s0*1025+s1])\n"
                        "    for s2 in 1025 vector(8)\n"
                        "      b0[s0*1025+s2] = mul(b0[s0*1025+s2], 2)\n";
    const char *small = "kernel small(out b0 f32[1025], in b1 f32[1025])\n"
                        "  for s1 in 1025 vector(8)\n"
                        "    b0[s1] = mul(b1[s1], 3)\n";
    int nt = strstr(isa->header, "KN_NT(") != NULL;
    EXPECT(renders_with(isa, big, "KN_STREAM64(&b0[") == nt, "%s: a large output streams iff KN_NT (%d)", isa->name, nt);
    EXPECT(!renders_with(isa, again, "KN_STREAM64(&b0[") && !renders_with(isa, small, "KN_STREAM64(&b0["),
           "%s: an output loaded again, or small, streams", isa->name);
    float *x = malloc(sizeof(float) * R * C), *y[3] = {malloc(sizeof(float) * R * C), malloc(sizeof(float) * R * C),
                                                       malloc(sizeof(float) * R * C)};
    if (!CHECK(x && y[0] && y[1] && y[2])) goto done;
    for (int i = 0; i < R * C; i++) x[i] = (float)uniform(-3, 3), y[0][i] = y[1][i] = y[2][i] = NAN;
    KnParallel par = {port_parallel_for, 4, NULL, NULL, NULL, NULL, NULL};
    void *b0[3] = {y[0], x, NULL}, *b1[3] = {y[1], x, NULL}, *b2[3] = {y[2], x, &par};
    if (run_ir(PORT_CC, big, b0) && run_ir_isa(PORT_CC, isa, big, b1) && run_ir_isa(PORT_CC, isa, big, b2))
        EXPECT(!memcmp(y[0], y[1], sizeof(float) * R * C) && !memcmp(y[0], y[2], sizeof(float) * R * C),
               "%s: a streamed output differs from the scalar dialect's", isa->name);
done:
    free(x), free(y[0]), free(y[1]), free(y[2]);
}

/* Runs text, a kernel of nb buffers (output b0 of n floats, every input
 * x), in the scalar dialect, then in isa's on one thread and on a pool of
 * 3: 1 if the three outputs agree bit for bit. */
static int same_three(const CIsa *isa, const char *text, int nb, const float *x, int64_t n)
{
    float *y[3] = {malloc(sizeof(float) * n), malloc(sizeof(float) * n), malloc(sizeof(float) * n)};
    int ok = 0;
    if (y[0] && y[1] && y[2]) {
        for (int64_t i = 0; i < n; i++) y[0][i] = y[1][i] = y[2][i] = NAN;
        KnParallel par = {port_parallel_for, 3, NULL, NULL, NULL, NULL, NULL};
        void *b[3][4];
        for (int r = 0; r < 3; r++) {
            b[r][0] = y[r];
            for (int i = 1; i < nb; i++) b[r][i] = (void *)x;
            b[r][nb] = r == 2 ? &par : NULL;
        }
        ok = run_ir(PORT_CC, text, b[0]) && run_ir_isa(PORT_CC, isa, text, b[1]) && run_ir_isa(PORT_CC, isa, text, b[2]) &&
             !memcmp(y[0], y[1], sizeof(float) * n) && !memcmp(y[0], y[2], sizeof(float) * n);
    }
    free(y[0]), free(y[1]), free(y[2]);
    return ok;
}

/* Prefetches of the SIMD dialect (loop.c, "the next row, prefetched"
 * and "streams prefetched ahead"): a row kernel of two passes over rows of
 * 1 KiB or more (a max, then x - max) prefetches the first pass's next
 * row, one of rows under
 * 1 KiB or of one pass does not, one whose first pass is a cascaded sum
 * prefetches what its blocks read, the levels' vars at 0 (the rest past
 * the last block is not); a long flat loop over buffers of 1 MiB or
 * more prefetches each stream's lines ahead (4 lines a block for f32, 8
 * for f64), a short one or one over small buffers does not. The results
 * are the scalar dialect's bit for bit, on one thread and on three, with
 * rows and extents that leave remainders. */
static void test_prefetch(const CIsa *isa)
{
    const char *rows = "kernel rows(out b0 f32[8481], in b1 f32[8481])\n"
                       "  for s0 in 33 parallel\n"
                       "    acc a0 f32 max\n"
                       "    for s1 in 257 vector(8)\n"
                       "      a0 max= b1[s0*257+s1]\n"
                       "    for s2 in 257 vector(8)\n"
                       "      b0[s0*257+s2] = sub(b1[s0*257+s2], a0)\n";
    const char *narrow = "kernel narrow(out b0 f32[8415], in b1 f32[8415])\n"
                         "  for s0 in 33 parallel\n"
                         "    acc a0 f32 max\n"
                         "    for s1 in 255 vector(8)\n"
                         "      a0 max= b1[s0*255+s1]\n"
                         "    for s2 in 255 vector(8)\n"
                         "      b0[s0*255+s2] = sub(b1[s0*255+s2], a0)\n";
    const char *one = "kernel one(out b0 f32[8481], in b1 f32[8481])\n"
                      "  for s0 in 33 parallel\n"
                      "    for s1 in 257 vector(8)\n"
                      "      b0[s0*257+s1] = exp(b1[s0*257+s1])\n";
    const char *cascaded = "kernel cascaded(out b0 f32[33000], in b1 f32[33000])\n"
                           "  for s0 in 33 parallel\n"
                           "    acc a0 f32 sum\n"
                           "    for s3 in 7\n"
                           "      acc a1 f32 sum\n"
                           "      for s1 in 128 vector(8)\n"
                           "        a1 += b1[s0*1000+s1+s3*128]\n"
                           "      a0 += a1\n"
                           "    acc a2 f32 sum\n"
                           "    for s1 in 104 vector(8)\n"
                           "      a2 += b1[s0*1000+s1+896]\n"
                           "    a0 += a2\n"
                           "    for s2 in 1000 vector(8)\n"
                           "      b0[s0*1000+s2] = sub(b1[s0*1000+s2], a0)\n";
    const char *flat = "kernel flat(out b0 f32[262147], in b1 f32[262147], in b2 f32[262147])\n"
                       "  for s0 in 262147 parallel\n"
                       "    b0[s0] = add(mul(b1[s0], 1.5), b2[s0])\n";
    const char *vec = "kernel vec(out b0 f32[262147], in b1 f64[262147])\n"
                      "  for s0 in 262147 vector(8)\n"
                      "    b0[s0] = cast.f32(exp(b1[s0]))\n";
    const char *few = "kernel few(out b0 f32[4000], in b1 f32[4000])\n"
                      "  for s0 in 4000 vector(8)\n"
                      "    b0[s0] = mul(b1[s0], 3)\n";
    EXPECT(renders_with(isa, rows, "KN_PREFETCH(&b1[s0*257 + s1]);"), "%s: the next row is not prefetched", isa->name);
    EXPECT(!renders_with(isa, narrow, "KN_PREFETCH(&") && !renders_with(isa, one, "KN_PREFETCH(&"),
           "%s: a narrow row, or a row of one pass, is prefetched", isa->name);
    EXPECT(renders_with(isa, cascaded, "const int64_t s3 = 0; (void)s3;") &&
               renders_with(isa, cascaded, "for (int64_t s1 = 0; s1 < 896; s1 += 16) KN_PREFETCH(&b1[s0*1000 + s1 + s3*128]);"),
           "%s: a cascaded first pass's next row is not prefetched", isa->name);
    EXPECT(renders_with(isa, flat, "KN_PREFETCH(&b2[s0] + 48);") && renders_with(isa, flat, "KN_PREFETCH(&b0[s0] + 0);"),
           "%s: a long flat loop's streams are not prefetched ahead", isa->name);
    EXPECT(renders_with(isa, vec, "KN_PREFETCH(&b1[s0] + 56);") && !renders_with(isa, few, "KN_PREFETCH(&"),
           "%s: f64 streams take 8 lines a block, a short loop none", isa->name);
    enum { F = 262147 };
    float *x = malloc(sizeof(float) * F);
    if (!CHECK(x)) return;
    for (int i = 0; i < F; i++) x[i] = (float)uniform(-3, 3);
    EXPECT(same_three(isa, rows, 2, x, 8481), "%s: prefetched rows differ from the scalar dialect's", isa->name);
    for (int i = 0; i < 33000; i++) x[i] = (float)(i % 7 - 3); /* sums exact in any order */
    EXPECT(same_three(isa, cascaded, 2, x, 33000), "%s: prefetched cascaded rows differ from the scalar dialect's",
           isa->name);
    for (int i = 0; i < 33000; i++) x[i] = (float)uniform(-3, 3);
    EXPECT(same_three(isa, flat, 3, x, F), "%s: a prefetched flat loop differs from the scalar dialect's", isa->name);
    free(x);
}

/* snprintf contract, and text that does not depend on cap. */
static void test_text(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    Arena a;
    arena_init(&a, ctx);
    ExprTable ex;
    expr_init(&ex, ctx);
    Kernel k[2];
    char why[256];
    ir_init(&k[0], &a, &ex, "");
    ir_init(&k[1], &a, &ex, "");
    CHECK(ir_parse(&k[0], "kernel one(out b0 f16[4], in b1 f16[4])\n  for s0 in 4\n    b0[s0] = exp(b1[3-s0])\n", why,
                   sizeof why) == 0);
    CHECK(ir_parse(&k[1], "kernel two(out b0 bool[4])\n  for s0 in 4\n    b0[s0] = cmpeq(idx(s0%2), 0:i64)\n", why,
                   sizeof why) == 0);
    const Kernel *kp[2] = {&k[0], &k[1]};
    size_t n = c_render(kp, 2, NULL, 0);
    char *full = malloc(n + 1), small[16];
    CHECK(full && c_render(kp, 2, full, n + 1) == n && strlen(full) == n);
    CHECK(c_render(kp, 2, small, sizeof small) == n && strlen(small) == sizeof small - 1);
    CHECK(full && memcmp(small, full, sizeof small - 1) == 0);
    CHECK(full && strstr(full, "void one(void **b)") && strstr(full, "void two(void **b)"));
    /* the scalar dialect reads b1 at 3 - s0 through a pointer set once per group of iterations */
    CHECK(full && strstr(full, "const uint16_t *s0_q1 = b1 + (s0_r1 - s0_o);") != NULL);
    CHECK(full && strstr(full, "kn_h2f(s0_q1[-3])") != NULL);
    CHECK(c_render(kp, 0, NULL, 0) < n); /* the prelude alone */
    free(full);
    expr_free(&ex);
    arena_free(&a);
    kn_ctx_free(ctx);
}

/* A where both of whose branches may run whatever the mask says (a
 * constant, a load in range over every loop) renders as a select; one
 * whose load leaves its buffer where the mask is false (a pad's) keeps ?:.
 * Both compute the same values in each dialect; b1 is the last of its
 * allocation, so the guarded load at s0*4+s1+1 = 16 would read past it. */
static void test_select(int how, const CIsa *isa)
{
    static const char text[] =
        "kernel sel(out b0 f32[16], in b1 f32[16], out b2 f32[16], out b3 f32[4])\n"
        "  for s0 in 4\n"
        "    for s1 in 4\n"
        "      b0[s0*4+s1] = where(cmplt(idx(s0), idx(s1)), -inf, b1[s0*4+s1])\n"
        "      b2[s0*4+s1] = where(cmplt(idx(s0*4+s1), 15:i64), b1[s0*4+s1+1], 7)\n"
        "  for s2 in 4\n"
        "    acc a0 f32 max\n"
        "    for s3 in 4\n"
        "      a0 max= where(cmplt(idx(s2), idx(s3)), -inf, b1[s2*4+s3])\n"
        "    b3[s2] = a0\n";
    if (isa) {
        CHECK(renders_with(isa, text, "= KN_SEL(s0 < s1, (-INFINITY), b1[s0*4 + s1]);"));
        CHECK(renders_with(isa, text, "= ((s0*4 + s1) < 15) ? b1[s0*4 + s1 + 1] : 7.0f;"));
        CHECK(renders_with(isa, text, "kn_accmaxf(a0, KN_SEL(s2 < s3, (-INFINITY), b1[s2*4 + s3]))"));
    } else { /* the scalar dialect's loads through its pointers: the guarded one joins b1's */
        CHECK(renders_with(isa, text, "s1_q0[1] = KN_SEL(s0 < s1, (-INFINITY), s1_q1[1]);"));
        CHECK(renders_with(isa, text, "s1_q2[3] = ((s0*4 + s1) < 15) ? s1_q1[4] : 7.0f;"));
        CHECK(renders_with(isa, text, "a0 = kn_accmaxf(a0, KN_SEL(s2 < s3, (-INFINITY), s3_q0[2]));"));
    }
    float *in = malloc(64 * sizeof *in), *b1 = in + 48, b0[16], b2[16], b3[4];
    for (int i = 0; in && i < 16; i++) b1[i] = (float)(i * 7 % 11) - 5;
    void *bufs[4] = {b0, b1, b2, b3};
    if (in && run_ir_isa(how, isa, text, bufs)) {
        int bad = 0;
        for (int i = 0; i < 16; i++) {
            float w0 = i / 4 < i % 4 ? -INFINITY : b1[i], w2 = i < 15 ? b1[i + 1] : 7;
            bad += b0[i] != w0 || b2[i] != w2;
        }
        for (int r = 0; r < 4; r++) {
            float m = b1[r * 4];
            for (int c = 1; c <= r; c++) m = b1[r * 4 + c] > m ? b1[r * 4 + c] : m;
            bad += b3[r] != m;
        }
        EXPECT(!bad, "select: %d values differ (%s)", bad, isa ? isa->name : "scalar");
    }
    free(in);
}

/* A kernel of a run-time size z0 (ir.h IR_SHAPE_SYM), read from b[nbufs + 2]: extents, indices and
 * a constant 1/z0 (a mean's divisor) at sizes 1 to 64, in both dialects (the SIMD one's accumulator
 * lanes take 8 at a time, then the rest). */
static void test_shape_symbols(kn_ctx *ctx, int how, const CIsa *isa)
{
    static const char *text = "kernel kz(out b0 f32[s4096*3], in b1 f32[s4096*3], out b2 f32[3])\n"
                              "  for s0 in s4096\n"
                              "    for s1 in 3\n"
                              "      b0[s0*3+s1] = mul(b1[s0*3+s1], 2)\n"
                              "  for s2 in 3\n"
                              "    acc a0 f32 sum\n"
                              "    for s3 in s4096 vector(8)\n"
                              "      a0 += b1[s3*3+s2]\n"
                              "    b2[s2] = a0\n";
    char why[256], flags[200];
    Arena a;
    ExprTable ex;
    Kernel k;
    arena_init(&a, ctx);
    expr_init(&ex, ctx);
    ir_init(&k, &a, &ex, "kz");
    int ok = EXPECT(ir_parse(&k, text, why, sizeof why) == 0, "%s", why);
    for (IrRef r = 1; ok && r < k.n; r++) /* the 2 becomes 1/z0 */
        if (k.nodes[r].kind == IR_CONST) k.nodes[r].index = expr_sym(&ex, IR_SHAPE_SYM), k.nodes[r].op = OP_RECIP;
    k.shapes = 1;
    ok = ok && EXPECT(ir_verify(ctx, &k) == 0, "%s", kn_last_error(ctx));
    const Kernel *kp = &k;
    size_t len = ok ? (isa ? c_render_isa(&kp, 1, isa, NULL, 0) : c_render(&kp, 1, NULL, 0)) : 0;
    char *src = len ? malloc(len + 1) : NULL;
    if (src) isa ? c_render_isa(&kp, 1, isa, src, len + 1) : c_render(&kp, 1, src, len + 1);
    if (isa) c_cc_flags(isa, flags, sizeof flags);
    PortModule *m = src ? c_jit(how, src, isa ? flags : NULL, why) : NULL;
    void *sym = m ? port_jit_sym(m, "kz") : NULL;
    void (*fn)(void **) = NULL;
    if (sym) memcpy(&fn, &sym, sizeof sym);
    ok = ok && EXPECT(fn != NULL, "%s", m ? "no symbol kz" : why);
    ok = ok && EXPECT(strstr(src, "(1.0 / (double)kn_z[0])") && strstr(src, "kn_z[0]*3"), "source:\n%s", src);
    static const int64_t sizes[6] = {1, 2, 5, 8, 13, 64};
    for (int c = 0; c < 6 && ok; c++) {
        int64_t z = sizes[c], n = 3 * z;
        float *out = malloc((size_t)n * 4), *in = malloc((size_t)n * 4), sum[3];
        double want[3] = {0, 0, 0};
        for (int64_t i = 0; i < n; i++) in[i] = (float)(i % 17) * 0.25f - 2, want[i % 3] += in[i];
        void *b[6] = {out, in, sum, NULL, NULL, &z};
        fn(b);
        for (int64_t i = 0; i < n; i++)
            ok = ok && EXPECT(out[i] == in[i] * (float)(1.0 / (double)z), "%s z0 = %lld: b0[%lld] = %g, want %g",
                              isa ? isa->name : "scalar", (long long)z, (long long)i, out[i], in[i] / (double)z);
        for (int j = 0; j < 3; j++)
            ok = ok && EXPECT(fabs(sum[j] - want[j]) <= 1e-5 * (1 + fabs(want[j])), "%s z0 = %lld: b2[%d] = %g, want %g",
                              isa ? isa->name : "scalar", (long long)z, j, sum[j], want[j]);
        free(out), free(in);
    }
    if (m) port_jit_free(m);
    free(src);
    expr_free(&ex);
    arena_free(&a);
}

int main(void)
{
    if (!port_jit_available(PORT_TCC) && !port_jit_available(PORT_CC)) {
        printf("SKIP render: no JIT on this platform\n");
        TEST_END("render");
    }
    EXPECT(port_jit_available(PORT_TCC), "PORT_TCC is not available");
    EXPECT(port_jit_available(PORT_CC), "PORT_CC is not available");
    kn_ctx *ctx = kn_ctx_new(NULL);
    test_text();
    test_select(PORT_TCC, NULL);
    test_select(PORT_CC, NULL);
    test_select(PORT_CC, c_isa_host());
    if (port_jit_available(PORT_TCC)) test_shape_symbols(ctx, PORT_TCC, NULL);
    if (port_jit_available(PORT_CC)) test_shape_symbols(ctx, PORT_CC, c_isa_host());
    for (int how = PORT_TCC; how <= PORT_CC; how++)
        test_index(how), test_checks(how), test_loops(how), test_unrolled(how), test_hoisted(how), test_data_select(how),
            test_copies(how),
            test_math(how, NULL);
    blocks = 1; /* again in backend tcc's form, every innermost loop that can through the vector helpers */
    test_index(PORT_TCC), test_checks(PORT_TCC), test_loops(PORT_TCC), test_unrolled(PORT_TCC), test_hoisted(PORT_TCC),
        test_data_select(PORT_TCC), test_copies(PORT_TCC), test_math(PORT_TCC, NULL);
    blocks = 0;
    test_blocks();
    test_math(PORT_CC, c_isa_host()); /* with its fused multiply-adds */
#ifndef __wasi__
    if (port_jit_available(PORT_CC)) test_inlined(c_isa_host());
#endif
    if (!strcmp(c_isa_host()->name, "avx512")) test_math(PORT_CC, c_isa("avx2")); /* the other x86 header */
    test_ivdep(c_isa_host());
    test_shared_bufs(c_isa_host());
    test_threads(PORT_TCC, NULL);
    test_threads(PORT_CC, NULL);
    test_threads(PORT_TCC, c_isa_host()); /* the SIMD dialect is C that TinyCC compiles too */
    for (const CIsa *i = c_isas; i->name; i++)
        if (!strcmp(i->name, c_isa_host()->name) || !strcmp(i->name, "sse2")) test_threads(PORT_CC, i);
    if (port_jit_available(PORT_CC))
        for (const CIsa *i = c_isas; i->name; i++)
            if (!strcmp(i->name, c_isa_host()->name) || !strcmp(i->name, "sse2") ||
                (!strcmp(i->name, "avx2") && !strcmp(c_isa_host()->name, "avx512")))
                test_stream(i), test_prefetch(i);
    for (int d = 0; d < KN_NDTYPES; d++) test_elementwise(ctx, (kn_dtype)d);
    test_casts(ctx);
    for (int d = 0; d < KN_NDTYPES; d++)
        if (d != KN_BOOL) test_reduce(ctx, (kn_dtype)d);
    for (int d = 0; d < KN_NDTYPES; d++) test_views(ctx, (kn_dtype)d);
    test_views_math(ctx);
    test_dot(ctx, KN_F32);
    test_dot(ctx, KN_F64);
    test_dot(ctx, KN_F16);
    test_dot(ctx, KN_I32);
    test_dot(ctx, KN_I64);
    test_create(ctx);
    test_rand(ctx);
    for (int d = 0; d < KN_NDTYPES; d++) test_indexing(ctx, (kn_dtype)d);
    test_composites(ctx, KN_F32);
    test_composites(ctx, KN_F64);
    kn_ctx_free(ctx);
    TEST_END("render");
}
