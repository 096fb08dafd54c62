/*
 * test_reduce.c — long float sums are accurate: kn_sum, kn_mean, kn_var
 * and kn_std over up to 10^8 elements (a whole tensor, long rows, long
 * columns), on backends interp, tcc and c, within 1e-6 relative of the sum
 * in f64 of the same f32 values, as PyTorch's cascade sum is. 0.1f added
 * 10^7 times one after another in f32 ends 0.3% off; the loop passes'
 * cascade (src/loopopt.h) and the column sum's cascaded tile keep every
 * accumulator to runs of 16. A generic program (dynamic shapes: kernels
 * that read the length at run time) is checked too, compiled once and run
 * at 10^7 + 3.
 *
 * Values: copies of 0.1f (the same rounding at every step: the worst
 * case for a plain loop), and uniform in [1, 2) from a fixed xorshift (var
 * and std of those are not small next to their mean). The case of 10^8
 * (400 MB) runs where memory is a host's: not in the wasm build, which
 * says so and does not count it.
 *
 * Run from the repository root:  build/tests/test_reduce
 */
#include <stdint.h>

#include "test.h"
#include "../port/port.h"

#if defined(__wasi__) || defined(__EMSCRIPTEN__)
#define SMALL_MEMORY 1
#else
#define SMALL_MEMORY 0
#endif

static const kn_backend backends[3] = {KN_BACKEND_INTERP, KN_BACKEND_TCC, KN_BACKEND_C};
static const char *const bname[3] = {"interp", "tcc", "c"};

enum { SUM, MEAN, VAR, STD };
static const char *const opname[4] = {"sum", "mean", "var", "std"};

typedef struct {
    int op, dim; /* dim < 0: every dim */
} Case;

static kn_status body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    const Case *c = user;
    int n = c->dim < 0 ? 0 : 1;
    (void)nin, (void)nout;
    switch (c->op) {
    case SUM: out[0] = kn_sum(ctx, in[0], &c->dim, n, 0); break;
    case MEAN: out[0] = kn_mean(ctx, in[0], &c->dim, n, 0); break;
    case VAR: out[0] = kn_var(ctx, in[0], &c->dim, n, 1, 0); break;
    default: out[0] = kn_std(ctx, in[0], &c->dim, n, 1, 0); break;
    }
    return out[0] ? KN_OK : kn_last_status(ctx);
}

static uint64_t rng = 0x2545f4914f6cdd1du;
static float uniform12(void) /* in [1, 2) */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return 1.0f + (float)(rng >> 40) / 16777216.0f;
}

/* x of (rows, cols) row-major: 0.1f, or uniform in [1, 2) */
static float *values(int64_t n, int uniform)
{
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; x && i < n; i++) x[i] = uniform ? uniform12() : 0.1f;
    return x;
}

/* The op of c over x (rows, cols) in f64: want[k] for each k of the result. */
static void reference(const Case *c, const float *x, int64_t rows, int64_t cols, double *want)
{
    int64_t nk = c->dim < 0 ? 1 : c->dim == 0 ? cols : rows, nr = rows * cols / nk;
    for (int64_t k = 0; k < nk; k++) {
        double s = 0, q = 0;
        for (int64_t r = 0; r < nr; r++) /* element r of reduction k */
            s += x[c->dim < 0 ? r : c->dim == 0 ? r * cols + k : k * cols + r];
        double mean = s / (double)nr;
        for (int64_t r = 0; c->op >= VAR && r < nr; r++) {
            double d = x[c->dim < 0 ? r : c->dim == 0 ? r * cols + k : k * cols + r] - mean;
            q += d * d;
        }
        want[k] = c->op == SUM ? s : c->op == MEAN ? mean : c->op == VAR ? q / (double)(nr - 1) : sqrt(q / (double)(nr - 1));
    }
}

/* Whether backend bi compiles here (interp always runs). */
static int available(int bi)
{
    return bi == 0 || (bi == 1 && port_jit_available(PORT_TCC)) || (bi == 2 && port_jit_available(PORT_CC));
}

/* The op of c over t (rows, cols), on each backend, against want; what * says is in the messages. */
static void check(kn_ctx *ctx, const Case *c, kn_tensor *t, const double *want, int64_t nk, const char *what)
{
    float *got = malloc((size_t)nk * sizeof *got);
    for (int bi = 0; bi < 3; bi++) {
        if (!available(bi)) {
            printf("SKIP %s %s on %s: no such compiler here\n", opname[c->op], what, bname[bi]);
            continue;
        }
        kn_compile_opts o = {.backend = backends[bi], .name = "reduce"};
        kn_fn *f = kn_compile(ctx, body, (void *)c, &o);
        kn_tensor *y = NULL;
        kn_scope_begin(ctx);
        int ok = f && kn_call(f, &t, 1, &y, 1) == KN_OK && kn_read(ctx, y, got, (size_t)nk * sizeof *got) == KN_OK;
        double worst = ok ? 0 : INFINITY;
        for (int64_t k = 0; ok && k < nk; k++) {
            double e = fabs(got[k] - want[k]) / fabs(want[k]);
            worst = e > worst || e != e ? e : worst;
        }
        CHECK_MSG(ok && worst <= 1e-6, "%s %s on %s: %s, worst relative error %.3g (1e-6 allowed)", opname[c->op], what,
                  bname[bi], ok ? "ran" : kn_last_error(ctx), worst);
        kn_scope_end(ctx);
        kn_fn_free(f);
    }
    free(got);
}

/* The ops of cases over (rows, cols) of 0.1f or uniform values. */
static void run(kn_ctx *ctx, const Case *cases, int ncases, int64_t rows, int64_t cols, int uniform)
{
    int64_t shape[2] = {rows, cols}, n = rows * cols;
    float *x = values(n, uniform);
    double *want = malloc((size_t)(rows > cols ? rows : cols) * sizeof *want);
    if (!CHECK(x && want)) return;
    kn_tensor *t = kn_tensor_from(ctx, KN_F32, cols > 1 ? 2 : 1, cols > 1 ? shape : &n, x);
    for (int i = 0; t && i < ncases; i++) {
        char what[96];
        int64_t nk = cases[i].dim < 0 ? 1 : cases[i].dim == 0 ? cols : rows;
        snprintf(what, sizeof what, "over %s of (%lld, %lld) %s", cases[i].dim < 0 ? "all" : cases[i].dim ? "rows" : "columns",
                 (long long)rows, (long long)cols, uniform ? "in [1, 2)" : "of 0.1f");
        reference(&cases[i], x, rows, cols, want);
        check(ctx, &cases[i], t, want, nk, what);
    }
    CHECK(t != NULL);
    kn_free(ctx, t);
    free(x), free(want);
}

/* A generic program (dynamic on): compiled at 1000 elements, the same
 * entry sums 10^7 + 3 within 1e-6. */
static void test_generic(kn_ctx *ctx)
{
    static const Case c = {SUM, -1};
    int64_t small = 1000, big = 10000003;
    float *x = values(big, 1);
    double want = 0;
    for (int64_t i = 0; x && i < big; i++) want += x[i];
    kn_tensor *ts = kn_tensor_from(ctx, KN_F32, 1, &small, x), *tb = kn_tensor_from(ctx, KN_F32, 1, &big, x);
    for (int bi = 0; bi < 3 && ts && tb; bi++) {
        if (!available(bi)) {
            printf("SKIP generic sum on %s: no such compiler here\n", bname[bi]);
            continue;
        }
        kn_compile_opts o = {.backend = backends[bi], .dynamic = KN_DYNAMIC_ON, .name = "generic_sum"};
        kn_fn *f = kn_compile(ctx, body, (void *)&c, &o);
        kn_fn_info info;
        double got = NAN;
        kn_tensor *y = NULL;
        kn_scope_begin(ctx);
        int ok = f && kn_call(f, &ts, 1, &y, 1) == KN_OK && kn_call(f, &tb, 1, &y, 1) == KN_OK &&
                 kn_item(ctx, y, &got) == KN_OK && kn_fn_stats(f, &info) == KN_OK;
        CHECK_MSG(ok && info.entries == 1 && info.symbolic_dims == 1,
                  "generic sum on %s: %s, %d entries, %d symbolic dims (one generic entry wanted)", bname[bi],
                  ok ? "ran" : kn_last_error(ctx), ok ? info.entries : -1, ok ? info.symbolic_dims : -1);
        CHECK_MSG(fabs(got - want) <= 1e-6 * want, "generic sum of 10^7 + 3 on %s: %.9g, want %.9g (%.3g off)", bname[bi],
                  got, want, fabs(got - want) / want);
        kn_scope_end(ctx);
        kn_fn_free(f);
    }
    CHECK(ts && tb);
    kn_free(ctx, ts), kn_free(ctx, tb);
    free(x);
}

int main(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    static const Case all[1] = {{SUM, -1}};
    static const Case rows[4] = {{SUM, 1}, {MEAN, 1}, {VAR, 1}, {STD, 1}}, cols[2] = {{SUM, 0}, {MEAN, 0}};
    run(ctx, all, 1, 10000000, 1, 0);   /* 10^7 copies of 0.1f */
    run(ctx, all, 1, 10000000, 1, 1);   /* and of uniform values */
    run(ctx, rows, 4, 3, 3333337, 1);   /* long rows */
    run(ctx, rows, 1, 3, 3333337, 0);
    run(ctx, cols, 2, 3333337, 3, 0);   /* long columns, strided */
    run(ctx, cols, 2, 312503, 32, 1);   /* long columns in a tile of 16 */
    run(ctx, cols, 1, 312503, 32, 0);
    if (SMALL_MEMORY)
        printf("SKIP sum of 10^8 copies of 0.1f: 400 MB, not in this build's memory\n");
    else
        run(ctx, all, 1, 100000000, 1, 0);
    test_generic(ctx);
    kn_ctx_free(ctx);
    TEST_END("reduce");
}
