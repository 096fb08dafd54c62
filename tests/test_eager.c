/*
 * test_eager.c — eager ops through compiled single-op kernels (eager.c)
 * against the interpreter, for backends tcc and c.
 *
 * Two contexts run each case: one on the interpreter (the oracle), one on
 * the compiled backend. Inputs come from host data, so both start from the
 * same bits. Every primitive that gets a kernel runs on sources that are
 * contiguous, transposed, strided, reversed, broadcast, a scalar or a view
 * whose storage ends inside its last row, at odd sizes; movement, compare
 * and cast results must be bitwise equal, float math within a tight
 * tolerance. Then: the cache hits (a second call compiles nothing) and
 * drops its least recently used kernel when full; ops left to the
 * interpreter (gather, creation but rand, empty tensors, views whose dims
 * do not nest) still agree; rand's draws are the interpreter's bits, each
 * from the cached kernel of its shape; an MLP's eager training step with Adam gives the
 * interpreter's losses over 5 steps; shape and dtype errors are raised as
 * before; no compiler means the interpreter, with one log line; KILN_EAGER
 * picks the backend when a context is made.
 *
 * Backend c on the tcc matrix would be ~300 cold compiles: it runs every op
 * on one source layout each (layouts rotating) instead. Its cache is a fresh
 * directory under /tmp. Where no JIT exists (wasm) the checks still hold:
 * everything runs on the interpreter.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "test.h"
#include "../src/core.h"
#include "../src/eager.h"
#include "../port/port.h"

#ifndef __wasi__
#include <unistd.h>
#endif

static kn_ctx *ci, *cc;      /* the interpreter's context and the compiled one */
static kn_backend backend;   /* cc's */
static const char *bname;
static int jit;              /* the backend has its compiler here */

/* ---- inputs from host data ---- */

static uint32_t rng = 1;

static double uniform(double lo, double hi)
{
    rng = rng * 1664525u + 1013904223u;
    return lo + (hi - lo) * (double)(rng >> 8) / 16777216.0;
}

/* A contiguous tensor of dt, values in [lo, hi) (integers: truncated), from seed. */
static kn_tensor *data(kn_ctx *c, kn_dtype dt, int nd, const int64_t *shape, uint32_t seed, double lo, double hi)
{
    int64_t n = tensor_numel(nd, shape);
    size_t es = kn_dtype_size(dt);
    unsigned char *buf = malloc((size_t)(n ? n : 1) * es);
    rng = seed;
    for (int64_t i = 0; i < n; i++) dt_store(dt, buf + i * es, uniform(lo, hi));
    kn_tensor *t = kn_tensor_from(c, dt, nd, shape, buf);
    free(buf);
    return t;
}

/* Source layouts: each gives a (7, 13) tensor of dt. */
enum { R = 7, C = 13 };
typedef kn_tensor *(*Layout)(kn_ctx *c, kn_dtype dt, uint32_t seed, double lo, double hi);

static kn_tensor *l_contig(kn_ctx *c, kn_dtype dt, uint32_t s, double lo, double hi)
{
    int64_t sh[2] = {R, C};
    return data(c, dt, 2, sh, s, lo, hi);
}
static kn_tensor *l_transposed(kn_ctx *c, kn_dtype dt, uint32_t s, double lo, double hi)
{
    int64_t sh[2] = {C, R};
    return kn_transpose(c, data(c, dt, 2, sh, s, lo, hi), 0, 1);
}
static kn_tensor *l_strided(kn_ctx *c, kn_dtype dt, uint32_t s, double lo, double hi) /* every 2nd column, from 3 */
{
    int64_t sh[2] = {R + 2, 2 * C + 5};
    return kn_slice(c, kn_slice(c, data(c, dt, 2, sh, s, lo, hi), 1, 3, 3 + 2 * C, 2), 0, 1, R + 1, 1);
}
static kn_tensor *l_reversed(kn_ctx *c, kn_dtype dt, uint32_t s, double lo, double hi) /* rows backwards */
{
    int64_t sh[2] = {R, C};
    return p_slice(c, data(c, dt, 2, sh, s, lo, hi), 0, R - 1, R, -1);
}
static kn_tensor *l_row(kn_ctx *c, kn_dtype dt, uint32_t s, double lo, double hi) /* (1, 13) broadcast */
{
    int64_t sh[2] = {1, C}, to[2] = {R, C};
    return kn_expand(c, data(c, dt, 2, sh, s, lo, hi), 2, to);
}
static kn_tensor *l_col(kn_ctx *c, kn_dtype dt, uint32_t s, double lo, double hi) /* (7, 1) broadcast, transposed storage */
{
    int64_t sh[2] = {1, R}, to[2] = {R, C};
    return kn_expand(c, kn_transpose(c, data(c, dt, 2, sh, s, lo, hi), 0, 1), 2, to);
}
static kn_tensor *l_scalar(kn_ctx *c, kn_dtype dt, uint32_t s, double lo, double hi) /* 0-d broadcast */
{
    int64_t to[2] = {R, C};
    return p_expand(c, p_reshape(c, data(c, dt, 0, NULL, s, lo, hi), 2, (int64_t[2]){1, 1}), 2, to);
}
/* Rows of 16 over a storage of 7 * 16 - 3 elements: the last row's stretch
 * passes the storage's end, so the kernel pads it. */
static kn_tensor *l_short(kn_ctx *c, kn_dtype dt, uint32_t s, double lo, double hi)
{
    int64_t n = R * 16 - 3, sh[2] = {R, C}, st[2] = {16, 1};
    kn_tensor *base = data(c, dt, 1, &n, s, lo, hi);
    return base ? tensor_view(c, base, 2, sh, st, 0) : NULL;
}

static const struct { const char *name; Layout f; } layouts[] = {
    {"contiguous", l_contig}, {"transposed", l_transposed}, {"strided", l_strided}, {"reversed", l_reversed},
    {"row", l_row}, {"column", l_col}, {"scalar", l_scalar}, {"short", l_short},
};
enum { NLAYOUTS = sizeof layouts / sizeof *layouts };

/* ---- comparing the two contexts ---- */

enum { EXACT, CLOSE };

typedef kn_tensor *(*Case)(kn_ctx *c, const void *arg);

static uint64_t runs(void)
{
    EagerStats st;
    eager_stats(cc, &st);
    return st.runs;
}

/* Runs f in both contexts: same dtype and shape, and values bitwise
 * (EXACT) or within tolerance; compiled: whether cc must run a kernel. */
static void same(const char *what, Case f, const void *arg, int mode, int compiled)
{
    kn_scope_begin(ci);
    kn_scope_begin(cc);
    uint64_t r0 = runs();
    kn_tensor *a = f(ci, arg), *b = f(cc, arg);
    int ok = a && b && kn_dtype_of(a) == kn_dtype_of(b) && kn_ndim(a) == kn_ndim(b) &&
             memcmp(kn_shape(a), kn_shape(b), (size_t)kn_ndim(a) * sizeof(int64_t)) == 0;
    CHECK_MSG(ok, "%s (%s): %s %s", what, bname, kn_last_error(ci), kn_last_error(cc));
    if (ok) {
        kn_dtype dt = kn_dtype_of(a);
        size_t es = kn_dtype_size(dt), n = (size_t)kn_numel(a);
        unsigned char *u = malloc(n * es + 1), *v = malloc(n * es + 1);
        ok = kn_read(ci, a, u, n * es) == KN_OK && kn_read(cc, b, v, n * es) == KN_OK;
        double rtol = dt == KN_F64 ? 1e-12 : dt == KN_F16 || dt == KN_BF16 ? 1e-2 : 2e-6, worst = 0;
        size_t bad = 0;
        for (size_t i = 0; ok && i < n; i++) {
            double x = dt_load(dt, u + i * es), y = dt_load(dt, v + i * es);
            int eq = mode == EXACT ? memcmp(u + i * es, v + i * es, es) == 0 : test_close(y, x, rtol, rtol);
            if (!eq && !bad++) worst = fabs(x - y);
        }
        CHECK_MSG(ok && !bad, "%s (%s): %zu of %zu elements differ, first by %g", what, bname, bad, n, worst);
        free(u);
        free(v);
    }
    CHECK_MSG(!compiled || !jit || runs() > r0, "%s (%s): ran on the interpreter", what, bname);
    kn_clear_error(ci);
    kn_clear_error(cc);
    kn_scope_end(ci);
    kn_scope_end(cc);
}

/* ---- every primitive that gets a kernel ---- */

typedef struct {
    Op op;
    kn_dtype dt;
    int la, lb, lc;     /* layouts of the sources */
    double lo, hi;      /* the sources' range */
    Params p;
} PrimCase;

static kn_tensor *prim_case(kn_ctx *c, const void *arg)
{
    const PrimCase *k = arg;
    kn_tensor *s[3] = {NULL, NULL, NULL};
    int lay[3] = {k->la, k->lb, k->lc}, n = kn_opinfo[k->op].nsrc;
    for (int i = 0; i < n; i++) {
        kn_dtype dt = kn_opinfo[k->op].cls == OC_WHERE && i == 0 ? KN_BOOL : k->dt;
        s[i] = layouts[lay[i]].f(c, dt, 11u + 7u * (uint32_t)i, k->lo, k->hi);
    }
    return prim(c, k->op, s, &k->p);
}

static void check_prim(PrimCase k, int mode)
{
    char what[128];
    snprintf(what, sizeof what, "%s %s on %s, %s", kn_opinfo[k.op].name, kn_dtype_name(k.dt), layouts[k.la].name,
             layouts[k.lb].name);
    same(what, prim_case, &k, mode, 1);
}

static int full; /* every layout (tcc), or one per op, rotating (c) */
static int turn;

/* The layouts to try for an op: all, or the next one in turn. */
static int first_layout(void) { return full ? 0 : turn++ % NLAYOUTS; }
static int last_layout(int first) { return full ? NLAYOUTS - 1 : first; }

static void test_unary(void)
{
    static const struct { Op op; double lo, hi; } ops[] = {
        {OP_NEG, -3, 3}, {OP_EXP, -3, 3}, {OP_LOG, 0.1, 5}, {OP_SQRT, 0, 5}, {OP_RECIP, 0.5, 3}, {OP_SIN, -4, 4},
        {OP_COS, -4, 4}, {OP_TANH, -3, 3}, {OP_ERF, -2, 2}, {OP_ABS, -3, 3}, {OP_FLOOR, -5, 5},
    };
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        int f = first_layout();
        for (int l = f; l <= last_layout(f); l++) {
            PrimCase k = {ops[i].op, KN_F32, l, 0, 0, ops[i].lo, ops[i].hi, {{0}, 0, 0, 0, 0, 0, 0}};
            int exact = ops[i].op == OP_NEG || ops[i].op == OP_ABS || ops[i].op == OP_FLOOR;
            check_prim(k, exact ? EXACT : CLOSE);
        }
    }
    /* other dtypes */
    PrimCase k = {OP_EXP, KN_F64, 1, 0, 0, -3, 3, {{0}, 0, 0, 0, 0, 0, 0}};
    check_prim(k, CLOSE);
    k.dt = KN_F16, k.la = 2;
    check_prim(k, CLOSE);
    k.op = OP_NEG, k.dt = KN_I32, k.la = 3, k.lo = -100, k.hi = 100;
    check_prim(k, EXACT);
}

static void test_binary(void)
{
    static const Op ops[] = {OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MAX, OP_MIN, OP_POW, OP_CMPLT, OP_CMPEQ};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        int f = first_layout();
        for (int l = f; l <= last_layout(f); l++) {
            int lb = (l + 3) % NLAYOUTS; /* a different layout for b */
            int cmp = kn_opinfo[ops[i]].cls == OC_COMPARE;
            PrimCase k = {ops[i], KN_F32, l, lb, 0, ops[i] == OP_POW ? 0.2 : -3, 3, {{0}, 0, 0, 0, 0, 0, 0}};
            int exact = cmp || ops[i] == OP_MAX || ops[i] == OP_MIN || ops[i] == OP_ADD || ops[i] == OP_SUB || ops[i] == OP_MUL;
            check_prim(k, exact ? EXACT : CLOSE);
        }
    }
    /* integers: truncating division (the divisor's range has no 0), compare on bool's sibling u8 */
    PrimCase k = {OP_DIV, KN_I32, 0, 1, 0, 1, 50, {{0}, 0, 0, 0, 0, 0, 0}};
    check_prim(k, EXACT);
    k.op = OP_MUL, k.dt = KN_I64, k.la = 2, k.lb = 4, k.lo = -1000, k.hi = 1000;
    check_prim(k, EXACT);
    k.op = OP_CMPEQ, k.dt = KN_U8, k.la = 5, k.lb = 6, k.lo = 0, k.hi = 3;
    check_prim(k, EXACT);
    k.op = OP_ADD, k.dt = KN_F64, k.la = 1, k.lb = 7, k.lo = -1, k.hi = 1;
    check_prim(k, EXACT);
    k.op = OP_MUL, k.dt = KN_BF16, k.la = 3, k.lb = 0;
    check_prim(k, CLOSE);
}

static void test_where_cast(void)
{
    int f = first_layout();
    for (int l = f; l <= last_layout(f); l++) {
        PrimCase k = {OP_WHERE, KN_F32, l, (l + 1) % NLAYOUTS, (l + 5) % NLAYOUTS, -2, 2, {{0}, 0, 0, 0, 0, 0, 0}};
        check_prim(k, EXACT);
    }
    static const kn_dtype from[] = {KN_F32, KN_F32, KN_F32, KN_F64, KN_I64, KN_I32, KN_BOOL, KN_F16, KN_U8};
    static const kn_dtype to[] = {KN_I32, KN_F16, KN_BOOL, KN_F32, KN_F32, KN_I64, KN_F32, KN_F64, KN_F32};
    for (size_t i = 0; i < sizeof from / sizeof *from; i++) {
        PrimCase k = {OP_CAST, from[i], (int)i % NLAYOUTS, 0, 0, -300, 300, {{0}, 0, 0, 0, 0, 0, 0}};
        if (from[i] == KN_U8 || from[i] == KN_BOOL) k.lo = 0, k.hi = 255;
        k.p.dtype = (uint8_t)to[i];
        check_prim(k, EXACT);
    }
}

static void test_reduce_move(void)
{
    for (int mask = 1; mask <= 3; mask++) {
        int f = first_layout();
        for (int l = f; l <= last_layout(f); l++) {
            PrimCase k = {OP_SUM, KN_F32, l, 0, 0, -2, 2, {{0}, 0, 0, 0, 0, 0, 0}};
            k.p.n = 2, k.p.i[0] = mask & 1, k.p.i[1] = mask >> 1;
            check_prim(k, CLOSE);
            k.op = OP_RMAX;
            check_prim(k, EXACT);
        }
    }
    PrimCase k = {OP_SUM, KN_I32, 1, 0, 0, -50, 50, {{0}, 0, 0, 0, 0, 0, 0}};
    k.p.n = 2, k.p.i[1] = 1;
    check_prim(k, EXACT);
    /* pad, and a reshape that needs a copy (of a transposed source) */
    int f = first_layout();
    for (int l = f; l <= last_layout(f); l++) {
        PrimCase p = {OP_PAD, KN_F32, l, 0, 0, -2, 2, {{0}, 0, 0, 0, 0, 0, 0}};
        p.p.n = 4, p.p.i[0] = 2, p.p.i[1] = 0, p.p.i[2] = 1, p.p.i[3] = 3, p.p.f = -7.5;
        check_prim(p, EXACT);
    }
    PrimCase r = {OP_RESHAPE, KN_F32, 1, 0, 0, -2, 2, {{0}, 0, 0, 0, 0, 0, 0}};
    r.p.n = 1, r.p.i[0] = R * C;
    check_prim(r, EXACT);
    r.la = 2, r.p.n = 3, r.p.i[0] = C, r.p.i[1] = 1, r.p.i[2] = R;
    check_prim(r, EXACT);
}

/* dot: (..., M, K) x (..., K, N) at sizes that fill no tile, through the GEMM template */
typedef struct {
    kn_dtype dt;
    int batch, m, k, n, ta, tb; /* ta, tb: the operand is a transposed view */
} DotCase;

static kn_tensor *dot_case(kn_ctx *c, const void *arg)
{
    const DotCase *d = arg;
    int nd = d->batch ? 3 : 2;
    int64_t sa[3] = {d->batch, d->ta ? d->k : d->m, d->ta ? d->m : d->k};
    int64_t sb[3] = {d->batch, d->tb ? d->n : d->k, d->tb ? d->k : d->n};
    kn_tensor *a = data(c, d->dt, nd, sa + (d->batch ? 0 : 1), 5, -1, 1);
    kn_tensor *b = data(c, d->dt, nd, sb + (d->batch ? 0 : 1), 6, -1, 1);
    if (d->ta) a = kn_transpose(c, a, nd - 2, nd - 1);
    if (d->tb) b = kn_transpose(c, b, nd - 2, nd - 1);
    return p_dot(c, a, b);
}

static void test_dot(void)
{
    static const DotCase cases[] = {
        {KN_F32, 0, 37, 29, 41, 0, 0}, {KN_F32, 0, 37, 29, 41, 0, 1}, {KN_F32, 0, 5, 67, 3, 1, 0},
        {KN_F32, 3, 9, 17, 10, 1, 1}, {KN_F64, 0, 13, 7, 11, 0, 1}, {KN_I32, 2, 5, 6, 7, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (!full && i % 2) continue;
        char what[96];
        const DotCase *d = &cases[i];
        snprintf(what, sizeof what, "dot %s (%d, %d, %d, %d)%s%s", kn_dtype_name(d->dt), d->batch, d->m, d->k, d->n,
                 d->ta ? " a^T" : "", d->tb ? " b^T" : "");
        same(what, dot_case, d, d->dt == KN_I32 ? EXACT : CLOSE, 1);
    }
}

/* ---- what stays on the interpreter ---- */

static kn_tensor *gather_case(kn_ctx *c, const void *arg)
{
    (void)arg;
    int64_t sh[2] = {R, C}, ix[2] = {R, 4};
    return p_gather(c, data(c, KN_F32, 2, sh, 3, -1, 1), 1, data(c, KN_I64, 2, ix, 4, 0, C));
}
static kn_tensor *iota_case(kn_ctx *c, const void *arg)
{
    (void)arg;
    int64_t sh[2] = {R, C};
    return p_iota(c, KN_F32, 2, sh, 1);
}
static kn_tensor *empty_case(kn_ctx *c, const void *arg)
{
    (void)arg;
    int64_t sh[2] = {0, 5};
    return kn_exp(c, kn_zeros(c, KN_F32, 2, sh));
}
/* sliding windows: (5, 3) with strides (1, 1) overlap, so no stretch holds them */
static kn_tensor *overlap_case(kn_ctx *c, const void *arg)
{
    (void)arg;
    int64_t n = 7, sh[2] = {5, 3}, st[2] = {1, 1};
    kn_tensor *base = data(c, KN_F32, 1, &n, 9, -1, 1);
    return kn_exp(c, base ? tensor_view(c, base, 2, sh, st, 0) : NULL);
}

static void test_interp_only(void)
{
    uint64_t before = runs();
    same("gather", gather_case, NULL, EXACT, 0);
    same("iota", iota_case, NULL, EXACT, 0);
    same("exp of an empty tensor", empty_case, NULL, EXACT, 0);
    same("exp of overlapping windows", overlap_case, NULL, CLOSE, 0);
    CHECK_MSG(runs() == before, "%s: %llu ops ran through kernels, expected none", bname,
              (unsigned long long)(runs() - before));
}

/* ---- rand: the generator's state is its sources, so one kernel a shape serves every draw ---- */

static kn_tensor *rand_case(kn_ctx *c, const void *arg)
{
    int64_t sh[2] = {R, C};
    return kn_rand(c, *(const kn_dtype *)arg, 2, sh);
}

static kn_tensor *dropout_case(kn_ctx *c, const void *arg)
{
    int64_t sh[2] = {R, C};
    (void)arg;
    return kn_dropout(c, data(c, KN_F32, 2, sh, 5, -1, 1), 0.4, 1);
}

static void test_rand(void)
{
    static const kn_dtype dts[3] = {KN_F32, KN_F64, KN_BF16};
    char what[64];
    kn_manual_seed(ci, 5), kn_manual_seed(cc, 5);
    for (int i = 0; i < 3; i++) {
        snprintf(what, sizeof what, "rand %s", kn_dtype_name(dts[i]));
        same(what, rand_case, &dts[i], EXACT, 1);
    }
    EagerStats a, b;
    eager_stats(cc, &a);
    same("rand f32, again", rand_case, &dts[0], EXACT, 1); /* the next draw, through the cached kernel */
    eager_stats(cc, &b);
    CHECK_MSG(!jit || (b.compiles == a.compiles && b.hits > a.hits), "%s: a second draw compiled again", bname);
    same("dropout", dropout_case, NULL, EXACT, 1);
}

/* ---- the cache ---- */

static kn_tensor *add_case(kn_ctx *c, const void *arg)
{
    const int64_t *n = arg;
    int64_t sh[2] = {3, *n};
    kn_tensor *x = data(c, KN_F32, 2, sh, 1, -1, 1);
    return kn_add(c, x, x);
}

static void test_cache(void)
{
    if (!jit) return;
    EagerStats a, b;
    int64_t n = 31;
    same("add (31)", add_case, &n, EXACT, 1);
    eager_stats(cc, &a);
    same("add (31) again", add_case, &n, EXACT, 1);
    eager_stats(cc, &b);
    CHECK_MSG(b.compiles == a.compiles && b.hits == a.hits + 1, "%s: a second call compiled (%llu -> %llu compiles)",
              bname, (unsigned long long)a.compiles, (unsigned long long)b.compiles);
    /* a full cache drops the least recently used kernel */
    eager_set_capacity(cc, 3);
    for (n = 100; n < 105; n++) same("add (n)", add_case, &n, EXACT, 1);
    eager_stats(cc, &a);
    CHECK_MSG(a.entries == 3 && a.evictions >= 2, "%s: %d entries, %llu evictions", bname, a.entries,
              (unsigned long long)a.evictions);
    n = 104; /* the newest: still there */
    same("add (104) again", add_case, &n, EXACT, 1);
    n = 100; /* the oldest: compiled again */
    same("add (100) again", add_case, &n, EXACT, 1);
    eager_stats(cc, &b);
    CHECK_MSG(b.compiles == a.compiles + 1 && b.hits == a.hits + 1, "%s: after eviction %llu compiles, %llu hits",
              bname, (unsigned long long)(b.compiles - a.compiles), (unsigned long long)(b.hits - a.hits));
    eager_set_capacity(cc, 512);
}

/* ---- an MLP's eager training step ---- */

enum { B = 17, IN = 20, HID = 33, OUT = 7, STEPS = 5 };

static void train(kn_ctx *c, double *loss)
{
    int64_t sx[2] = {B, IN}, s1[2] = {HID, IN}, s2[2] = {OUT, HID}, b1 = HID, b2 = OUT, sy = B;
    kn_tensor *p[4] = {kn_param(c, data(c, KN_F32, 2, s1, 21, -0.3, 0.3)), kn_param(c, data(c, KN_F32, 1, &b1, 22, -0.1, 0.1)),
                       kn_param(c, data(c, KN_F32, 2, s2, 23, -0.3, 0.3)), kn_param(c, data(c, KN_F32, 1, &b2, 24, -0.1, 0.1))};
    kn_tensor *x = data(c, KN_F32, 2, sx, 25, -2, 2), *y = data(c, KN_I64, 1, &sy, 26, 0, OUT);
    kn_adam_opts o = {1e-2, 0, 0, 0, 0, 0, 0};
    kn_optim *opt = kn_adam(c, p, 4, &o);
    for (int s = 0; s < STEPS; s++) {
        kn_scope_begin(c);
        kn_optim_zero_grad(opt);
        kn_tensor *h = kn_relu(c, kn_linear(c, x, p[0], p[1]));
        kn_tensor *l = kn_cross_entropy(c, kn_linear(c, h, p[2], p[3]), y, NULL);
        loss[s] = NAN;
        if (l && kn_item(c, l, &loss[s]) == KN_OK && kn_backward(c, l, 0) == KN_OK) kn_optim_step(opt);
        kn_scope_end(c);
    }
    CHECK_MSG(kn_last_status(c) == KN_OK, "mlp: %s", kn_last_error(c));
    kn_optim_free(opt);
    for (int i = 0; i < 4; i++) kn_free(c, p[i]);
    kn_free(c, x);
    kn_free(c, y);
}

static void test_mlp(void)
{
    double want[STEPS], got[STEPS];
    uint64_t r0 = runs();
    train(ci, want);
    train(cc, got);
    for (int s = 0; s < STEPS; s++)
        CHECK_MSG(test_close(got[s], want[s], 1e-5, 0), "mlp step %d (%s): loss %.9g, interpreter %.9g", s, bname,
                  got[s], want[s]);
    CHECK(want[STEPS - 1] < want[0]); /* it learns */
    CHECK_MSG(!jit || runs() > r0, "mlp (%s): no op ran through a kernel", bname);
}

/* ---- errors ---- */

static void test_errors(void)
{
    EagerStats a, b;
    eager_stats(cc, &a);
    int64_t s1[2] = {3, 4}, s2[2] = {3, 5};
    kn_scope_begin(cc);
    CHECK(kn_add(cc, kn_zeros(cc, KN_F32, 2, s1), kn_zeros(cc, KN_F32, 2, s2)) == NULL);
    CHECK_ERR(cc, "kn_add: ");
    CHECK(kn_matmul(cc, kn_zeros(cc, KN_F32, 2, s1), kn_zeros(cc, KN_F32, 2, s2)) == NULL);
    CHECK_ERR(cc, "kn_matmul: ");
    kn_tensor *i = kn_zeros(cc, KN_I64, 2, s1);
    CHECK(prim1(cc, OP_EXP, i) == NULL);
    CHECK_ERR(cc, "exp: needs a float operand");
    kn_scope_end(cc);
    eager_stats(cc, &b);
    CHECK_MSG(b.compiles == a.compiles && b.runs == a.runs, "%s: a rejected op reached a kernel", bname);
    CHECK(kn_set_eager_backend(cc, (kn_backend)7) == KN_EINVAL);
    CHECK_ERR(cc, "kn_set_eager_backend");
}

/* ---- no compiler: the interpreter, and one log line ---- */

#ifndef __wasi__
static void count_line(void *user, const char *line)
{
    if (strstr(line, "eager backend")) ++*(int *)user;
}
#endif

static void test_no_compiler(void)
{
#ifndef __wasi__
    const char *was = getenv("KILN_CC");
    setenv("KILN_CC", "/nonexistent/kiln-cc", 1);
    kn_ctx *c = kn_ctx_new(NULL);
    int lines = 0;
    kn_set_log(c, count_line, &lines);
    CHECK(kn_set_eager_backend(c, KN_BACKEND_C) == KN_OK);
    int64_t sh[2] = {4, 5};
    kn_tensor *x = kn_full(c, KN_F32, 2, sh, 2.0);
    kn_tensor *y = kn_mul(c, kn_exp(c, x), kn_add(c, x, x));
    double v = 0;
    CHECK(y && kn_item(c, kn_sum(c, y, NULL, 0, 0), &v) == KN_OK && test_close(v, 20 * 4 * exp(2.0), 1e-6, 0));
    EagerStats st;
    eager_stats(c, &st);
    CHECK_MSG(st.failed == 1 && st.runs == 0 && lines == 1, "no compiler: failed %d, %llu runs, %d log lines",
              st.failed, (unsigned long long)st.runs, lines);
    CHECK(kn_last_status(c) == KN_OK);
    kn_ctx_free(c);
    if (was) setenv("KILN_CC", was, 1);
    else unsetenv("KILN_CC");
#endif
}

/* KILN_EAGER picks a context's backend when it is made */
static void test_env(void)
{
#ifndef __wasi__
    static const char *vals[] = {"tcc", "c", "interp", "bogus"};
    for (int i = 0; i < 4; i++) {
        setenv("KILN_EAGER", vals[i], 1);
        kn_ctx *c = kn_ctx_new(NULL);
        EagerStats st;
        if (c) eager_stats(c, &st);
        kn_backend want = i == 0 ? KN_BACKEND_TCC : i == 1 ? KN_BACKEND_C : KN_BACKEND_INTERP;
        CHECK_MSG(c && st.backend == want, "KILN_EAGER=%s", vals[i]);
        kn_ctx_free(c);
    }
    unsetenv("KILN_EAGER");
    kn_ctx *c = kn_ctx_new(NULL);
    EagerStats st;
    if (c) eager_stats(c, &st);
    CHECK(c && st.backend == KN_BACKEND_INTERP); /* the default: the interpreter */
    kn_ctx_free(c);
#endif
}

static void run_backend(kn_backend b)
{
    backend = b;
    bname = b == KN_BACKEND_TCC ? "tcc" : "c";
    jit = port_jit_available(b == KN_BACKEND_TCC ? PORT_TCC : PORT_CC);
    full = b == KN_BACKEND_TCC;
    if (!jit) printf("SKIP eager %s: no compiler on this platform (%s): checking the interpreter fallback\n", bname, port_name());
    kn_ctx_opts o = {NULL, NULL, 42};
    ci = kn_ctx_new(&o);
    cc = kn_ctx_new(&o);
    kn_set_eager_backend(ci, KN_BACKEND_INTERP);
    CHECK(kn_set_eager_backend(cc, b) == KN_OK);
    test_unary();
    test_binary();
    test_where_cast();
    test_reduce_move();
    test_dot();
    test_interp_only();
    test_rand();
    test_cache();
    test_mlp();
    test_errors();
    EagerStats st;
    eager_stats(cc, &st);
    CHECK_MSG(st.failures == 0 && st.failed == !jit, "%s: %llu signatures failed to compile, backend failed %d", bname,
              (unsigned long long)st.failures, st.failed);
    kn_ctx_free(ci);
    kn_ctx_free(cc);
}

int main(void)
{
#ifndef __wasi__
    char root[] = "/tmp/kiln-test-eager-XXXXXX";
    if (!CHECK(mkdtemp(root) != NULL)) TEST_END("eager"); /* returns */
    setenv("KILN_CACHE_DIR", root, 1); /* never the user's cache */
    unsetenv("KILN_EAGER");
#endif
    run_backend(KN_BACKEND_TCC);
    run_backend(KN_BACKEND_C);
    test_no_compiler();
    test_env();
#ifndef __wasi__
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
#endif
    TEST_END("eager");
}
