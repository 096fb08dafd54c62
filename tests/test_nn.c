/*
 * test_nn.c — the neural-network composites (decomp_nn.c) against formulas
 * evaluated in double: activations over a range that includes the tails
 * (+-100), softmax of large and -inf rows, the losses with every reduction,
 * ignore_index, class weights and label smoothing, embedding, dropout
 * statistics and attention with masks and broadcast batches; plus the
 * error for each kind of bad operand. PyTorch fixtures live elsewhere.
 */
#include <stdint.h>

#include "test.h"

/* ---- helpers ---- */

static uint64_t rng = 0x9E3779B97F4A7C15ull;

/* Uniform in [lo, hi), rounded to f32 so that f32 inputs hold exactly the
 * values the references see. */
static double urand(double lo, double hi)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)(lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0);
}

static void fill(double *v, int n, double lo, double hi)
{
    for (int i = 0; i < n; i++) v[i] = urand(lo, hi);
}

/* A tensor of dtype dt holding v (converted element by element). */
static kn_tensor *tens(kn_ctx *ctx, kn_dtype dt, int nd, const int64_t *shape, const double *v)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    static unsigned char buf[1 << 16];
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case KN_F32: ((float *)buf)[i] = (float)v[i]; break;
        case KN_F64: ((double *)buf)[i] = v[i]; break;
        case KN_I32: ((int32_t *)buf)[i] = (int32_t)v[i]; break;
        case KN_I64: ((int64_t *)buf)[i] = (int64_t)v[i]; break;
        default: buf[i] = v[i] != 0; break; /* bool, u8 */
        }
    }
    return kn_tensor_from(ctx, dt, nd, shape, buf);
}

/* A (rows, cols) tensor holding v row-major, made as the transpose of a
 * (cols, rows) one, so it is not contiguous. */
static kn_tensor *tens_t(kn_ctx *ctx, kn_dtype dt, int64_t rows, int64_t cols, const double *v)
{
    static double t[4096];
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) t[j * rows + i] = v[i * cols + j];
    int64_t s[2] = {cols, rows};
    return kn_transpose(ctx, tens(ctx, dt, 2, s, t), 0, 1);
}

/* Reads t (any dtype) as doubles; 0 if it is NULL or not n elements. */
static int get(kn_ctx *ctx, kn_tensor *t, double *out, int64_t n)
{
    if (!t || kn_numel(t) != n) {
        printf("    get: %s (numel %lld, want %lld) %s\n", t ? "wrong size" : "NULL", (long long)kn_numel(t),
               (long long)n, kn_last_error(ctx));
        return 0;
    }
    return kn_read(ctx, kn_to(ctx, t, KN_F64), out, (size_t)n * sizeof *out) == KN_OK;
}

static int all_close(const double *got, const double *want, int64_t n, double rtol, double atol)
{
    for (int64_t i = 0; i < n; i++)
        if (!test_close(got[i], want[i], rtol, atol)) {
            printf("    element %lld: got %.10g, want %.10g\n", (long long)i, got[i], want[i]);
            return 0;
        }
    return 1;
}

/* t has n elements close to want */
#define CHECK_VALUES(ctx, t, want, n, rtol, atol) \
    do { \
        double got_[4096]; \
        CHECK(get((ctx), (t), got_, (n)) && all_close(got_, (want), (n), (rtol), (atol))); \
    } while (0)

static int has_shape(kn_tensor *t, int nd, const int64_t *shape)
{
    if (!t || kn_ndim(t) != nd) return 0;
    for (int i = 0; i < nd; i++)
        if (kn_shape(t)[i] != shape[i]) return 0;
    return 1;
}

/* ---- activations ---- */

static const double xs_act[] = {-100, -80, -20, -5, -3, -1, -0.3, -1e-6, 0, 1e-6, 0.3, 1, 3, 5, 20, 50, 100};
#define NACT ((int)(sizeof xs_act / sizeof *xs_act))

typedef struct {
    const char *name;
    double a, b;
} Act;

/* The formulas torch uses, in double. */
static double act_ref(const Act *f, double x)
{
    const char *n = f->name;
    if (!strcmp(n, "relu")) return x > 0 ? x : 0;
    if (!strcmp(n, "leaky_relu")) return x > 0 ? x : f->a * x;
    if (!strcmp(n, "gelu")) return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    if (!strcmp(n, "gelu_tanh")) return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    if (!strcmp(n, "silu")) return x / (1 + exp(-x));
    if (!strcmp(n, "sigmoid")) return 1 / (1 + exp(-x));
    if (!strcmp(n, "softplus")) return f->a * x > f->b ? x : log1p(exp(f->a * x)) / f->a;
    if (!strcmp(n, "hardswish")) return x * fmin(fmax(x + 3, 0), 6) / 6;
    return x > 0 ? x : f->a * expm1(x); /* elu */
}

static kn_tensor *act_run(kn_ctx *ctx, const Act *f, kn_tensor *x)
{
    const char *n = f->name;
    if (!strcmp(n, "relu")) return kn_relu(ctx, x);
    if (!strcmp(n, "leaky_relu")) return kn_leaky_relu(ctx, x, f->a);
    if (!strcmp(n, "gelu")) return kn_gelu(ctx, x, 0);
    if (!strcmp(n, "gelu_tanh")) return kn_gelu(ctx, x, 1);
    if (!strcmp(n, "silu")) return kn_silu(ctx, x);
    if (!strcmp(n, "sigmoid")) return kn_sigmoid(ctx, x);
    if (!strcmp(n, "softplus")) return kn_softplus(ctx, x, f->a == 1 && f->b == 20 ? 0 : f->a, f->a == 1 && f->b == 20 ? 0 : f->b);
    if (!strcmp(n, "hardswish")) return kn_hardswish(ctx, x);
    return kn_elu(ctx, x, f->a);
}

/* Every activation on xs_act in f32 and f64. Tolerances: f32 results are
 * rounded after each primitive, so a few ulps; gelu's 1 + erf cancels for
 * x < -2, which costs absolute accuracy near 1e-7 (torch has the same
 * formula). The tails of sigmoid, silu, softplus and elu keep relative
 * accuracy; atol only covers f32 denormals (|y| < 1.2e-38). */
static void test_activation_values(kn_ctx *ctx)
{
    static const Act acts[] = {{"relu", 0, 0}, {"leaky_relu", 0.01, 0}, {"gelu", 0, 0}, {"gelu_tanh", 0, 0},
                               {"silu", 0, 0}, {"sigmoid", 0, 0}, {"softplus", 1, 20}, {"softplus", 2, 5},
                               {"softplus", 0.5, 0}, {"hardswish", 0, 0}, {"elu", 1, 0}, {"elu", 0.5, 0},
                               {"elu", 0, 0}};
    int64_t n = NACT;
    for (size_t a = 0; a < sizeof acts / sizeof *acts; a++) {
        double want[NACT];
        for (int i = 0; i < NACT; i++) want[i] = act_ref(&acts[a], xs_act[i]);
        int gelu = !strncmp(acts[a].name, "gelu", 4);
        for (int f64 = 0; f64 < 2; f64++) {
            kn_tensor *y = act_run(ctx, &acts[a], tens(ctx, f64 ? KN_F64 : KN_F32, 1, &n, xs_act));
            double rtol = f64 ? 1e-12 : 2e-6, atol = f64 ? (gelu ? 1e-14 : 1e-300) : (gelu ? 2e-7 : 1e-37);
            double got[NACT];
            int ok = get(ctx, y, got, n) && kn_dtype_of(y) == (f64 ? KN_F64 : KN_F32) &&
                     all_close(got, want, n, rtol, atol);
            CHECK_MSG(ok, "%s(%g, %g) in %s", acts[a].name, acts[a].a, acts[a].b, f64 ? "f64" : "f32");
        }
    }
}

static void test_activation_dtypes(kn_ctx *ctx)
{
    double v[6] = {-3, -1, 0, 2, 5, -7}, w[6];
    int64_t s6 = 6, s23[2] = {2, 3}, s03[2] = {0, 3};
    kn_tensor *r = kn_relu(ctx, tens(ctx, KN_I64, 1, &s6, v));
    CHECK(r && kn_dtype_of(r) == KN_I64);
    double rw[6] = {0, 0, 0, 2, 5, 0};
    CHECK_VALUES(ctx, r, rw, 6, 0, 0);
    kn_tensor *sg = kn_sigmoid(ctx, tens(ctx, KN_I32, 1, &s6, v)); /* ints promote to f32, as torch */
    CHECK(sg && kn_dtype_of(sg) == KN_F32);
    for (int i = 0; i < 6; i++) w[i] = 1 / (1 + exp(-v[i]));
    CHECK_VALUES(ctx, sg, w, 6, 1e-6, 0);
    kn_tensor *h = kn_silu(ctx, kn_to(ctx, tens(ctx, KN_F32, 1, &s6, v), KN_F16)); /* computed in f32 */
    CHECK(h && kn_dtype_of(h) == KN_F16);
    for (int i = 0; i < 6; i++) w[i] = v[i] / (1 + exp(-v[i]));
    CHECK_VALUES(ctx, h, w, 6, 1e-3, 1e-4);
    /* non-contiguous input */
    kn_tensor *xt = tens_t(ctx, KN_F32, 2, 3, v);
    CHECK(xt && !kn_is_contiguous(xt));
    for (int i = 0; i < 6; i++) w[i] = 0.5 * v[i] * (1 + erf(v[i] / sqrt(2.0)));
    CHECK_VALUES(ctx, kn_gelu(ctx, xt, 0), w, 6, 1e-6, 1e-7);
    /* 0-d and empty */
    kn_tensor *z = kn_elu(ctx, kn_full(ctx, KN_F32, 0, NULL, -2.0), 1.0);
    CHECK(z && kn_ndim(z) == 0);
    w[0] = expm1(-2.0);
    CHECK_VALUES(ctx, z, w, 1, 1e-6, 0);
    CHECK(has_shape(kn_softplus(ctx, kn_zeros(ctx, KN_F32, 2, s03), 0, 0), 2, s03));
    CHECK(has_shape(kn_hardswish(ctx, tens(ctx, KN_F64, 2, s23, v)), 2, s23));
    /* NaN passes through */
    kn_tensor *nan = kn_full(ctx, KN_F32, 1, &s6, NAN);
    double nans[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
    CHECK_VALUES(ctx, kn_sigmoid(ctx, nan), nans, 6, 0, 0);
    CHECK_VALUES(ctx, kn_softplus(ctx, nan, 0, 0), nans, 6, 0, 0);
    CHECK_VALUES(ctx, kn_elu(ctx, nan, 1), nans, 6, 0, 0);
    CHECK_VALUES(ctx, kn_relu(ctx, nan), nans, 6, 0, 0);
}

static void test_activation_errors(kn_ctx *ctx)
{
    double v[3] = {1, 2, 3};
    int64_t s3 = 3;
    kn_tensor *xi = tens(ctx, KN_I64, 1, &s3, v);
    CHECK(kn_gelu(ctx, xi, 0) == NULL);
    CHECK_ERR(ctx, "kn_gelu: operand 'x' must be a float tensor, got i64");
    CHECK(kn_softplus(ctx, xi, 0, 0) == NULL);
    CHECK_ERR(ctx, "kn_softplus: operand 'x' must be a float tensor");
    CHECK(kn_relu(ctx, tens(ctx, KN_BOOL, 1, &s3, v)) == NULL);
    CHECK_ERR(ctx, "kn_relu: operand 'x' is bool");
    CHECK(kn_elu(ctx, NULL, 1.0) == NULL);
    CHECK_ERR(ctx, "kn_elu: operand 'x' is NULL");
    CHECK(kn_softplus(ctx, tens(ctx, KN_F32, 1, &s3, v), NAN, 1) == NULL);
    CHECK_ERR(ctx, "kn_softplus: beta (nan) and threshold (1) must not be NaN");
}

/* ---- softmax ---- */

static void softmax_ref(const double *x, int rows, int cols, int log, double *out)
{
    for (int r = 0; r < rows; r++) {
        const double *xr = x + r * cols;
        double m = -INFINITY, s = 0;
        for (int c = 0; c < cols; c++) m = fmax(m, xr[c]);
        for (int c = 0; c < cols; c++) s += exp(xr[c] - m);
        for (int c = 0; c < cols; c++) out[r * cols + c] = log ? xr[c] - m - log1p(s - 1) : exp(xr[c] - m) / s;
    }
}

static void test_softmax_values(kn_ctx *ctx)
{
    double x[12], xt[12], want[12];
    int64_t s34[2] = {3, 4};
    fill(x, 12, -3, 3);
    kn_tensor *t = tens(ctx, KN_F32, 2, s34, x);
    for (int log = 0; log < 2; log++) {
        kn_tensor *(*fn)(kn_ctx *, kn_tensor *, int) = log ? kn_log_softmax : kn_softmax;
        softmax_ref(x, 3, 4, log, want);
        CHECK_VALUES(ctx, fn(ctx, t, 1), want, 12, 2e-6, 1e-7);
        CHECK_VALUES(ctx, fn(ctx, t, -1), want, 12, 2e-6, 1e-7);
        CHECK_VALUES(ctx, fn(ctx, tens(ctx, KN_F64, 2, s34, x), 1), want, 12, 1e-13, 1e-15);
        CHECK_VALUES(ctx, fn(ctx, tens_t(ctx, KN_F32, 3, 4, x), 1), want, 12, 2e-6, 1e-7); /* non-contiguous */
        /* dim 0: the reference on the transpose */
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) xt[j * 3 + i] = x[i * 4 + j];
        double wt[12];
        softmax_ref(xt, 4, 3, log, wt);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) want[i * 4 + j] = wt[j * 3 + i];
        CHECK_VALUES(ctx, fn(ctx, t, 0), want, 12, 2e-6, 1e-7);
    }
}

static void test_softmax_extremes(kn_ctx *ctx)
{
    /* rows: large values, all -inf, one -inf */
    double x[12] = {1e4, 1e4 + 1, 1e4 + 2, 1e4 - 5, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 0, -INFINITY, 1, 2};
    double sh[4] = {0, 1, 2, -5}, w0[4], want[12];
    int64_t s34[2] = {3, 4};
    kn_tensor *t = tens(ctx, KN_F32, 2, s34, x);
    for (int log = 0; log < 2; log++) {
        softmax_ref(sh, 1, 4, log, w0);
        for (int c = 0; c < 4; c++) want[c] = w0[c], want[4 + c] = NAN;
        softmax_ref(x + 8, 1, 4, log, want + 8);
        CHECK_VALUES(ctx, (log ? kn_log_softmax : kn_softmax)(ctx, t, 1), want, 12, 2e-6, 1e-7);
    }
    kn_tensor *s0 = kn_softmax(ctx, kn_full(ctx, KN_F32, 0, NULL, 3.5), 0); /* 0-d: 1 */
    double one = 1, zero = 0;
    CHECK(s0 && kn_ndim(s0) == 0);
    CHECK_VALUES(ctx, s0, &one, 1, 0, 0);
    CHECK_VALUES(ctx, kn_log_softmax(ctx, kn_full(ctx, KN_F32, 0, NULL, -7), -1), &zero, 1, 0, 0);
    int64_t s20[2] = {2, 0};
    CHECK(has_shape(kn_softmax(ctx, kn_zeros(ctx, KN_F32, 2, s20), 1), 2, s20));
    CHECK(has_shape(kn_log_softmax(ctx, kn_zeros(ctx, KN_F32, 2, s20), 0), 2, s20));
}

static void test_softmax_errors(kn_ctx *ctx)
{
    int64_t s23[2] = {2, 3};
    CHECK(kn_softmax(ctx, kn_zeros(ctx, KN_F32, 2, s23), 2) == NULL);
    CHECK_ERR(ctx, "kn_softmax: dim 2 out of range for a 2-dim tensor");
    CHECK(kn_log_softmax(ctx, kn_zeros(ctx, KN_I64, 2, s23), 1) == NULL);
    CHECK_ERR(ctx, "kn_log_softmax: operand 'x' must be a float tensor, got i64");
}

/* ---- regression losses ---- */

static double reduce_ref(const double *v, int n, kn_reduction r)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return r == KN_REDUCE_SUM ? s : s / n;
}

static void test_regression(kn_ctx *ctx)
{
    double a[6], b[6], sq[6], ab[6];
    int64_t s23[2] = {2, 3}, s3 = 3, s4 = 4, s0 = 0;
    fill(a, 6, -2, 2);
    fill(b, 6, -2, 2);
    kn_tensor *x = tens(ctx, KN_F32, 2, s23, a), *y = tens(ctx, KN_F32, 2, s23, b);
    for (int i = 0; i < 6; i++) sq[i] = (a[i] - b[i]) * (a[i] - b[i]), ab[i] = fabs(a[i] - b[i]);
    CHECK_VALUES(ctx, kn_mse_loss(ctx, x, y, KN_REDUCE_NONE), sq, 6, 1e-6, 1e-7);
    CHECK_VALUES(ctx, kn_l1_loss(ctx, x, y, KN_REDUCE_NONE), ab, 6, 1e-6, 1e-7);
    for (kn_reduction r = KN_REDUCE_MEAN; r <= KN_REDUCE_SUM; r++) {
        double ws = reduce_ref(sq, 6, r), wa = reduce_ref(ab, 6, r);
        kn_tensor *m = kn_mse_loss(ctx, x, y, r);
        CHECK(m && kn_ndim(m) == 0);
        CHECK_VALUES(ctx, m, &ws, 1, 1e-6, 0);
        CHECK_VALUES(ctx, kn_l1_loss(ctx, x, y, r), &wa, 1, 1e-6, 0);
    }
    /* target (3) broadcasts against input (2, 3), as torch */
    kn_tensor *yb = tens(ctx, KN_F32, 1, &s3, b);
    for (int i = 0; i < 6; i++) sq[i] = (a[i] - b[i % 3]) * (a[i] - b[i % 3]);
    kn_tensor *mb = kn_mse_loss(ctx, x, yb, KN_REDUCE_NONE);
    CHECK(has_shape(mb, 2, s23));
    CHECK_VALUES(ctx, mb, sq, 6, 1e-6, 1e-7);
    /* empty: mean is NaN, sum is 0 */
    double nan = NAN, zero = 0;
    CHECK_VALUES(ctx, kn_mse_loss(ctx, kn_zeros(ctx, KN_F32, 1, &s0), kn_zeros(ctx, KN_F32, 1, &s0), KN_REDUCE_MEAN), &nan, 1, 0, 0);
    CHECK_VALUES(ctx, kn_l1_loss(ctx, kn_zeros(ctx, KN_F32, 1, &s0), kn_zeros(ctx, KN_F32, 1, &s0), KN_REDUCE_SUM), &zero, 1, 0, 0);
    /* errors */
    CHECK(kn_mse_loss(ctx, x, kn_zeros(ctx, KN_F32, 1, &s4), KN_REDUCE_MEAN) == NULL);
    CHECK_ERR(ctx, "kn_mse_loss: operand 'target' (4) does not broadcast at dim 0");
    CHECK(kn_l1_loss(ctx, x, y, (kn_reduction)7) == NULL);
    CHECK_ERR(ctx, "kn_l1_loss: reduction 7 is not a kn_reduction");
    CHECK(kn_mse_loss(ctx, kn_zeros(ctx, KN_I64, 1, &s3), kn_zeros(ctx, KN_I32, 1, &s3), KN_REDUCE_SUM) == NULL);
    CHECK_ERR(ctx, "must promote to a float dtype");
}

/* ---- cross_entropy and nll_loss ---- */

/* torch 1.13's cross_entropy with class indices, in double: x (N, C, D)
 * row-major, target (N, D). Returns the reduced value; fills none[N * D]. */
static double ce_ref(const double *x, int N, int C, int D, const int64_t *t, const double *w, int64_t ign, double eps,
                     kn_reduction r, double *none)
{
    double snll = 0, ssm = 0, wsum = 0;
    for (int n = 0; n < N; n++)
        for (int d = 0; d < D; d++) {
            int64_t tt = t[n * D + d];
            double m = -INFINITY, s = 0, nll = 0, sm = 0;
            if (tt != ign) {
                for (int c = 0; c < C; c++) m = fmax(m, x[(n * C + c) * D + d]);
                for (int c = 0; c < C; c++) s += exp(x[(n * C + c) * D + d] - m);
                for (int c = 0; c < C; c++) sm -= (w ? w[c] : 1) * (x[(n * C + c) * D + d] - m - log(s));
                nll = -(w ? w[tt] : 1) * (x[(n * C + tt) * D + d] - m - log(s));
                wsum += w ? w[tt] : 1;
            }
            none[n * D + d] = (1 - eps) * nll + eps / C * sm;
            snll += nll, ssm += sm;
        }
    if (r == KN_REDUCE_SUM) return (1 - eps) * snll + eps / C * ssm;
    return (1 - eps) * snll / wsum + eps / C * ssm / wsum;
}

/* Checks every reduction of kn_cross_entropy on one input against ce_ref. */
static void check_ce(kn_ctx *ctx, kn_tensor *x, kn_tensor *t, const double *xv, int N, int C, int D,
                     const int64_t *tv, kn_tensor *w, const double *wv, int64_t ign, double eps, double rtol)
{
    double none[64];
    for (kn_reduction r = KN_REDUCE_MEAN; r <= KN_REDUCE_NONE; r++) {
        kn_loss_opts o = {r, w, ign != -100, ign, eps};
        double want = ce_ref(xv, N, C, D, tv, wv, ign, eps, r, none);
        kn_tensor *l = kn_cross_entropy(ctx, x, t, &o);
        if (r == KN_REDUCE_NONE) {
            CHECK(l && kn_ndim(l) == kn_ndim(t));
            CHECK_VALUES(ctx, l, none, N * D, rtol, 1e-7);
        } else {
            CHECK(l && kn_ndim(l) == 0);
            CHECK_VALUES(ctx, l, &want, 1, rtol, 1e-7);
        }
    }
}

static void test_cross_entropy_2d(kn_ctx *ctx)
{
    enum { N = 6, C = 5 };
    double x[N * C], tvd[N], w[C] = {0.5, 1, 2, 1.5, 0.25};
    int64_t tv[N] = {0, 4, 2, -100, 1, 3}, sx[2] = {N, C}, sn = N, sc = C;
    fill(x, N * C, -4, 4);
    for (int i = 0; i < N; i++) tvd[i] = (double)tv[i];
    kn_tensor *xt = tens(ctx, KN_F32, 2, sx, x), *t = tens(ctx, KN_I64, 1, &sn, tvd);
    kn_tensor *wt = tens(ctx, KN_F32, 1, &sc, w);
    check_ce(ctx, xt, t, x, N, C, 1, tv, NULL, NULL, -100, 0, 2e-6);
    check_ce(ctx, xt, t, x, N, C, 1, tv, wt, w, -100, 0, 2e-6);
    check_ce(ctx, xt, t, x, N, C, 1, tv, NULL, NULL, -100, 0.1, 2e-6);
    check_ce(ctx, xt, t, x, N, C, 1, tv, wt, w, -100, 0.1, 2e-6);
    check_ce(ctx, xt, tens(ctx, KN_I32, 1, &sn, tvd), x, N, C, 1, tv, wt, w, -100, 0.25, 2e-6); /* i32 target */
    check_ce(ctx, tens(ctx, KN_F64, 2, sx, x), t, x, N, C, 1, tv, kn_to(ctx, wt, KN_F64), w, -100, 0.1, 1e-12);
    /* ignore_index inside [0, C): class 4 entries are ignored */
    int64_t tv2[N] = {0, 4, 2, 4, 1, 3};
    double tvd2[N] = {0, 4, 2, 4, 1, 3};
    check_ce(ctx, xt, tens(ctx, KN_I64, 1, &sn, tvd2), x, N, C, 1, tv2, wt, w, 4, 0.2, 2e-6);
}

static void test_cross_entropy_nd(kn_ctx *ctx)
{
    enum { N = 2, C = 3, D = 4 };
    /* x (N, C, D) made non-contiguous: the transpose of each (D, C) block */
    double x[N * C * D], xs[N * D * C], tvd[N * D], w[C] = {1.5, 0.5, 2};
    int64_t tv[N * D] = {0, 1, 2, 1, 2, 2, 0, 1}, sdc[3] = {N, D, C}, st[2] = {N, D}, sc = C;
    fill(x, N * C * D, -3, 3);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int d = 0; d < D; d++) xs[(n * D + d) * C + c] = x[(n * C + c) * D + d];
    for (int i = 0; i < N * D; i++) tvd[i] = (double)tv[i];
    kn_tensor *xt = kn_transpose(ctx, tens(ctx, KN_F32, 3, sdc, xs), 1, 2);
    CHECK(xt && !kn_is_contiguous(xt));
    kn_tensor *t = tens(ctx, KN_I64, 2, st, tvd), *wt = tens(ctx, KN_F32, 1, &sc, w);
    check_ce(ctx, xt, t, x, N, C, D, tv, NULL, NULL, -100, 0, 2e-6);
    check_ce(ctx, xt, t, x, N, C, D, tv, wt, w, 1, 0.2, 2e-6); /* ignore class 1 */
    check_ce(ctx, xt, t, x, N, C, D, tv, NULL, NULL, 2, 0.3, 2e-6);
}

static void test_cross_entropy_edges(kn_ctx *ctx)
{
    /* unbatched: input (C), target () */
    double x[5] = {0.5, -1, 2, 0.1, 3}, t3 = 3, none[1];
    int64_t sc = 5, t64 = 3;
    kn_tensor *xt = tens(ctx, KN_F32, 1, &sc, x), *t = tens(ctx, KN_I64, 0, NULL, &t3);
    kn_loss_opts o = {KN_REDUCE_MEAN, NULL, 0, 0, 0.1};
    double want = ce_ref(x, 1, 5, 1, &t64, NULL, -100, 0.1, KN_REDUCE_MEAN, none);
    kn_tensor *l = kn_cross_entropy(ctx, xt, t, &o);
    CHECK(l && kn_ndim(l) == 0);
    CHECK_VALUES(ctx, l, &want, 1, 2e-6, 0);
    /* every entry ignored: mean is NaN (0 / 0), sum is 0 */
    double ign[2] = {-100, -100}, nan = NAN, zero = 0, big[6] = {1e4, 0, -1e4, 1e4, 0, -1e4};
    int64_t s2 = 2, s23[2] = {2, 3};
    kn_tensor *x23 = tens(ctx, KN_F32, 2, s23, big), *ti = tens(ctx, KN_I64, 1, &s2, ign);
    CHECK_VALUES(ctx, kn_cross_entropy(ctx, x23, ti, NULL), &nan, 1, 0, 0);
    o.reduction = KN_REDUCE_SUM;
    CHECK_VALUES(ctx, kn_cross_entropy(ctx, x23, ti, &o), &zero, 1, 0, 0);
    /* logits of +-1e4: finite, and exact where the answer is 0 or 2e4 */
    double tb[2] = {0, 2}, lb[2] = {0, 2e4};
    kn_loss_opts on = {KN_REDUCE_NONE, NULL, 0, 0, 0};
    CHECK_VALUES(ctx, kn_cross_entropy(ctx, x23, tens(ctx, KN_I64, 1, &s2, tb), &on), lb, 2, 1e-6, 0);
    /* nll_loss on log_softmax equals cross_entropy; and on raw values it is -w[t] x[t] */
    int64_t s3 = 3;
    double raw[6] = {1, 2, 3, 4, 5, 6}, nl[2] = {-1 * 0.5, -6 * 2}, w3[3] = {0.5, 1, 2};
    kn_loss_opts ow = {KN_REDUCE_NONE, tens(ctx, KN_F32, 1, &s3, w3), 0, 0, 0};
    kn_tensor *tt = tens(ctx, KN_I64, 1, &s2, tb);
    CHECK_VALUES(ctx, kn_nll_loss(ctx, tens(ctx, KN_F32, 2, s23, raw), tt, &ow), nl, 2, 1e-7, 0);
    ow.reduction = KN_REDUCE_MEAN;
    double nm = (nl[0] + nl[1]) / 2.5;
    CHECK_VALUES(ctx, kn_nll_loss(ctx, tens(ctx, KN_F32, 2, s23, raw), tt, &ow), &nm, 1, 1e-7, 0);
    kn_tensor *ls = kn_log_softmax(ctx, x23, 1);
    double a[1], b[1];
    CHECK(get(ctx, kn_nll_loss(ctx, ls, tt, NULL), a, 1) && get(ctx, kn_cross_entropy(ctx, x23, tt, NULL), b, 1) &&
          a[0] == b[0]);
}

static void test_cross_entropy_errors(kn_ctx *ctx)
{
    double x[15] = {0}, t[3] = {0, 7, 1}, tn[3] = {0, -3, 1}, tf[3] = {0, 1, 2};
    int64_t s35[2] = {3, 5}, s3 = 3, s2 = 2, s4 = 4, s33[2] = {3, 3};
    kn_tensor *xt = tens(ctx, KN_F32, 2, s35, x);
    CHECK(kn_cross_entropy(ctx, xt, tens(ctx, KN_I64, 1, &s3, t), NULL) == NULL);
    CHECK(kn_last_status(ctx) == KN_EINDEX);
    CHECK_ERR(ctx, "kn_cross_entropy: target class 7 out of range for 5 classes");
    CHECK(kn_nll_loss(ctx, xt, tens(ctx, KN_I32, 1, &s3, tn), NULL) == NULL);
    CHECK(kn_last_status(ctx) == KN_EINDEX);
    CHECK_ERR(ctx, "kn_nll_loss: target class -3 out of range for 5 classes");
    CHECK(kn_cross_entropy(ctx, xt, tens(ctx, KN_F32, 1, &s3, tf), NULL) == NULL);
    CHECK_ERR(ctx, "kn_cross_entropy: operand 'target' must hold class indices (i64 or i32), got f32");
    CHECK(kn_cross_entropy(ctx, xt, tens(ctx, KN_I64, 1, &s2, tf), NULL) == NULL);
    CHECK_ERR(ctx, "operand 'target' dim 0 has size 2, expected 3 (input dim 0)");
    CHECK(kn_cross_entropy(ctx, xt, tens(ctx, KN_I64, 2, s33, x), NULL) == NULL);
    CHECK_ERR(ctx, "operand 'target' (3, 3) has 2 dims; input (3, 5) needs 1");
    kn_loss_opts o = {KN_REDUCE_MEAN, kn_ones(ctx, KN_F32, 1, &s4), 0, 0, 0};
    CHECK(kn_cross_entropy(ctx, xt, tens(ctx, KN_I64, 1, &s3, tf), &o) == NULL);
    CHECK_ERR(ctx, "operand 'weight' (4) must be (5)");
    o.weight = NULL, o.label_smoothing = 1.5;
    CHECK(kn_cross_entropy(ctx, xt, tens(ctx, KN_I64, 1, &s3, tf), &o) == NULL);
    CHECK_ERR(ctx, "label_smoothing must be between 0.0 and 1.0, got 1.5");
    CHECK(kn_nll_loss(ctx, kn_zeros(ctx, KN_F32, 0, NULL), tens(ctx, KN_I64, 0, NULL, tf), NULL) == NULL);
    CHECK_ERR(ctx, "kn_nll_loss: operand 'logp' is 0-d");
    o.label_smoothing = 0, o.reduction = (kn_reduction)3;
    CHECK(kn_cross_entropy(ctx, xt, tens(ctx, KN_I64, 1, &s3, tf), &o) == NULL);
    CHECK_ERR(ctx, "reduction 3 is not a kn_reduction");
}

/* ---- binary cross entropy ---- */

static void test_bce(kn_ctx *ctx)
{
    double p[8] = {0, 1, 0.1, 0.5, 0.9, 0.999, 1e-5, 0.7}, y[8] = {1, 0, 0.3, 1, 0, 1, 0, 0.5};
    double w[4] = {1, 0.5, 2, 0}, none[8], nw[8];
    int64_t s24[2] = {2, 4}, s4 = 4, s3 = 3;
    for (int i = 0; i < 8; i++) {
        double pf = (float)p[i];
        none[i] = -(y[i] * fmax(log(pf), -100) + (1 - y[i]) * fmax(log1p(-pf), -100));
        nw[i] = none[i] * w[i % 4];
        y[i] = (float)y[i];
    }
    kn_tensor *pt = tens(ctx, KN_F32, 2, s24, p), *yt = tens(ctx, KN_F32, 2, s24, y);
    kn_tensor *wt = tens(ctx, KN_F32, 1, &s4, w);
    CHECK_VALUES(ctx, kn_binary_cross_entropy(ctx, pt, yt, NULL, KN_REDUCE_NONE), none, 8, 2e-6, 1e-7);
    CHECK_VALUES(ctx, kn_binary_cross_entropy(ctx, pt, yt, wt, KN_REDUCE_NONE), nw, 8, 2e-6, 1e-7);
    for (kn_reduction r = KN_REDUCE_MEAN; r <= KN_REDUCE_SUM; r++) {
        double want = reduce_ref(nw, 8, r);
        CHECK_VALUES(ctx, kn_binary_cross_entropy(ctx, pt, yt, wt, r), &want, 1, 2e-6, 0);
    }
    /* p outside [0, 1]: NaN (torch raises; a graph cannot read values) */
    double bad[4] = {1.5, -0.5, 0.5, 0.5}, yb[4] = {1, 1, 0, 1}, got[4];
    CHECK(get(ctx, kn_binary_cross_entropy(ctx, tens(ctx, KN_F32, 1, &s4, bad), tens(ctx, KN_F32, 1, &s4, yb), NULL,
                                           KN_REDUCE_NONE), got, 4) &&
          isnan(got[0]) && isnan(got[1]) && !isnan(got[2]));
    CHECK(kn_binary_cross_entropy(ctx, pt, tens(ctx, KN_F32, 1, &s4, y), NULL, KN_REDUCE_MEAN) == NULL);
    CHECK_ERR(ctx, "kn_binary_cross_entropy: operand 'target' (4) must have the shape of p (2, 4)");
    CHECK(kn_binary_cross_entropy(ctx, pt, yt, kn_ones(ctx, KN_F32, 1, &s3), KN_REDUCE_MEAN) == NULL);
    CHECK_ERR(ctx, "operand 'weight' (3) does not broadcast to input (2, 4) at dim -1 (size 3 vs 4)");
    CHECK(kn_binary_cross_entropy(ctx, pt, kn_zeros(ctx, KN_I64, 2, s24), NULL, KN_REDUCE_MEAN) == NULL);
    CHECK_ERR(ctx, "operand 'target' must be a float tensor");
}

static double bcel_ref(double x, double y, double pw)
{
    return (1 - y) * x + (1 + (pw - 1) * y) * (log1p(exp(-fabs(x))) + fmax(-x, 0));
}

static void test_bce_logits(kn_ctx *ctx)
{
    double x[8] = {-100, -20, -1, 0, 0.5, 3, 20, 100}, y[8] = {1, 0, 0.3, 1, 0, 1, 0.5, 1};
    double pw[4] = {1, 2, 0.5, 3}, w[2] = {2, 0.5}, none[8], nw[8];
    int64_t s24[2] = {2, 4}, s4 = 4, s21[2] = {2, 1}, s8 = 8;
    for (int i = 0; i < 8; i++) {
        y[i] = (float)y[i];
        none[i] = bcel_ref(x[i], y[i], 1);
        nw[i] = bcel_ref(x[i], y[i], pw[i % 4]) * w[i / 4];
    }
    for (int f64 = 0; f64 < 2; f64++) {
        kn_dtype dt = f64 ? KN_F64 : KN_F32;
        double rtol = f64 ? 1e-12 : 2e-6, atol = f64 ? 1e-14 : 1e-6; /* atol: -x + x cancels in f32 */
        kn_tensor *xt = tens(ctx, dt, 2, s24, x), *yt = tens(ctx, dt, 2, s24, y);
        kn_tensor *pwt = tens(ctx, dt, 1, &s4, pw), *wt = tens(ctx, dt, 2, s21, w);
        CHECK_VALUES(ctx, kn_binary_cross_entropy_with_logits(ctx, xt, yt, NULL, NULL, KN_REDUCE_NONE), none, 8, rtol, atol);
        CHECK_VALUES(ctx, kn_binary_cross_entropy_with_logits(ctx, xt, yt, wt, pwt, KN_REDUCE_NONE), nw, 8, rtol, atol);
        for (kn_reduction r = KN_REDUCE_MEAN; r <= KN_REDUCE_SUM; r++) {
            double want = reduce_ref(nw, 8, r);
            CHECK_VALUES(ctx, kn_binary_cross_entropy_with_logits(ctx, xt, yt, wt, pwt, r), &want, 1, rtol, atol);
        }
    }
    /* the tail at x = +-100 keeps relative accuracy in f64: softplus(-100) = 3.7e-44 */
    double tail = log1p(exp(-100.0));
    double x100 = 100, one = 1;
    CHECK_VALUES(ctx, kn_binary_cross_entropy_with_logits(ctx, tens(ctx, KN_F64, 0, NULL, &x100),
                                                          tens(ctx, KN_F64, 0, NULL, &one), NULL, NULL,
                                                          KN_REDUCE_NONE), &tail, 1, 1e-12, 0);
    kn_tensor *xt = tens(ctx, KN_F32, 2, s24, x);
    CHECK(kn_binary_cross_entropy_with_logits(ctx, xt, tens(ctx, KN_F32, 1, &s8, y), NULL, NULL, KN_REDUCE_SUM) == NULL);
    CHECK_ERR(ctx, "operand 'target' (8) must have the shape of x (2, 4)");
    CHECK(kn_binary_cross_entropy_with_logits(ctx, xt, xt, NULL, kn_ones(ctx, KN_F32, 1, &s8), KN_REDUCE_SUM) == NULL);
    CHECK_ERR(ctx, "operand 'pos_weight' (8) does not broadcast to input (2, 4)");
}

/* ---- embedding ---- */

static void test_embedding(kn_ctx *ctx)
{
    double w[15], idx[4] = {4, 0, 2, 2}, want[12];
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++) w[i * 3 + j] = i * 10 + j;
    int64_t s22[2] = {2, 2}, s223[3] = {2, 2, 3}, s3 = 3, s0 = 0, s03[2] = {0, 3}, s1 = 1, s2 = 2;
    kn_tensor *wt = tens_t(ctx, KN_F32, 5, 3, w); /* non-contiguous weight */
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++) want[k * 3 + j] = idx[k] * 10 + j;
    kn_tensor *e = kn_embedding(ctx, wt, tens(ctx, KN_I64, 2, s22, idx));
    CHECK(has_shape(e, 3, s223));
    CHECK_VALUES(ctx, e, want, 12, 0, 0);
    CHECK_VALUES(ctx, kn_embedding(ctx, wt, tens(ctx, KN_I32, 2, s22, idx)), want, 12, 0, 0);
    kn_tensor *e0 = kn_embedding(ctx, wt, tens(ctx, KN_I64, 0, NULL, idx)); /* 0-d index: (D) */
    CHECK(has_shape(e0, 1, &s3));
    CHECK_VALUES(ctx, e0, want, 3, 0, 0);
    CHECK(has_shape(kn_embedding(ctx, wt, kn_zeros(ctx, KN_I64, 1, &s0)), 2, s03));
    CHECK(kn_embedding(ctx, wt, tens(ctx, KN_I64, 1, &s1, (double[]){5})) == NULL);
    CHECK(kn_last_status(ctx) == KN_EINDEX);
    CHECK_ERR(ctx, "kn_embedding: index 5 out of range for dim 0 of size 5");
    CHECK(kn_embedding(ctx, wt, tens(ctx, KN_I64, 1, &s2, (double[]){1, -1})) == NULL);
    CHECK_ERR(ctx, "index -1 out of range");
    CHECK(kn_embedding(ctx, wt, kn_zeros(ctx, KN_F32, 1, &s2)) == NULL);
    CHECK_ERR(ctx, "kn_embedding: operand 'index' must be i64 or i32, got f32");
    CHECK(kn_embedding(ctx, kn_zeros(ctx, KN_F32, 1, &s3), kn_zeros(ctx, KN_I64, 1, &s2)) == NULL);
    CHECK_ERR(ctx, "kn_embedding: operand 'weight' (3) must be 2-D (V, D)");
}

/* ---- dropout ---- */

static void test_dropout(kn_ctx *ctx)
{
    enum { N = 100000 };
    static double got[N];
    int64_t n = N;
    kn_manual_seed(ctx, 1234);
    kn_tensor *x = kn_ones(ctx, KN_F32, 1, &n);
    kn_tensor *y = kn_dropout(ctx, x, 0.3, 1);
    CHECK(y && kn_read(ctx, kn_to(ctx, y, KN_F64), got, sizeof got) == KN_OK);
    int kept = 0, exact = 1;
    double sum = 0;
    for (int i = 0; i < N; i++) {
        kept += got[i] != 0;
        exact &= got[i] == 0 || got[i] == (double)(float)(1 / 0.7);
        sum += got[i];
    }
    CHECK_MSG(fabs(kept / (double)N - 0.7) < 0.01, "kept fraction %g, want 0.7", kept / (double)N);
    CHECK_MSG(fabs(sum / N - 1) < 0.02, "mean %g, want 1", sum / N);
    CHECK(exact);
    static double got2[N];
    CHECK(get(ctx, kn_dropout(ctx, x, 0.3, 1), got2, N) && memcmp(got, got2, sizeof got) != 0); /* a fresh mask */
    CHECK(get(ctx, kn_dropout(ctx, x, 1.0, 1), got, N));
    int zeros = 1;
    for (int i = 0; i < N; i++) zeros &= got[i] == 0;
    CHECK(zeros);
    CHECK(kn_dropout(ctx, x, 0.3, 0) == x); /* not training: the input itself, as torch */
    CHECK(kn_dropout(ctx, x, 0.0, 1) == x);
    CHECK(kn_dropout(ctx, x, -0.1, 1) == NULL);
    CHECK_ERR(ctx, "kn_dropout: dropout probability has to be between 0 and 1, but got -0.1");
    CHECK(kn_dropout(ctx, x, NAN, 0) == NULL);
    CHECK_ERR(ctx, "dropout probability");
    CHECK(kn_dropout(ctx, kn_zeros(ctx, KN_I64, 1, &n), 0.5, 1) == NULL);
    CHECK_ERR(ctx, "operand 'x' must be a float tensor");
}

/* ---- scaled dot-product attention ---- */

/* One head in double: q (L, E), k (S, E), v (S, Ev); mask: NULL, or per
 * (l, s) keep (bool) or bias (float); causal keeps s <= l. */
static void sdpa_ref(const double *q, const double *k, const double *v, int L, int S, int E, int Ev,
                     const double *mask, int bool_mask, int causal, double scale, double *out)
{
    for (int l = 0; l < L; l++) {
        double sc[16], m = -INFINITY, sum = 0;
        for (int s = 0; s < S; s++) {
            double d = 0;
            for (int e = 0; e < E; e++) d += q[l * E + e] * k[s * E + e];
            sc[s] = d * scale;
            if (causal && s > l) sc[s] = -INFINITY;
            if (mask && bool_mask && !mask[l * S + s]) sc[s] = -INFINITY;
            if (mask && !bool_mask) sc[s] += mask[l * S + s];
            m = fmax(m, sc[s]);
        }
        for (int s = 0; s < S; s++) sum += exp(sc[s] - m);
        for (int j = 0; j < Ev; j++) {
            double acc = 0;
            for (int s = 0; s < S; s++) acc += exp(sc[s] - m) / sum * v[s * Ev + j];
            out[l * Ev + j] = acc;
        }
    }
}

enum { B = 2, L = 3, S = 5, E = 4, EV = 6 };

static void test_sdpa_masks(kn_ctx *ctx)
{
    double q[B * L * E], k[B * S * E], ks[B * E * S], v[B * S * EV], want[B * L * EV];
    double mb[L * S] = {1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, mf[L * S];
    int64_t sq[3] = {B, L, E}, sks[3] = {B, E, S}, sv[3] = {B, S, EV}, sm[2] = {L, S}, so[3] = {B, L, EV};
    fill(q, B * L * E, -1, 1), fill(k, B * S * E, -1, 1), fill(v, B * S * EV, -1, 1), fill(mf, L * S, -2, 2);
    for (int b = 0; b < B; b++)
        for (int s = 0; s < S; s++)
            for (int e = 0; e < E; e++) ks[(b * E + e) * S + s] = k[(b * S + s) * E + e];
    kn_tensor *qt = tens(ctx, KN_F32, 3, sq, q), *vt = tens(ctx, KN_F32, 3, sv, v);
    kn_tensor *kt = kn_transpose(ctx, tens(ctx, KN_F32, 3, sks, ks), 1, 2); /* (B, S, E), non-contiguous */
    struct { const double *mask; int is_bool, causal; double scale; } cases[] = {
        {NULL, 0, 0, 0}, {NULL, 0, 0, 0.3}, {NULL, 0, 1, 0}, {mb, 1, 0, 0}, {mf, 0, 0, 0.7}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        double scale = cases[c].scale ? cases[c].scale : 0.5;
        for (int b = 0; b < B; b++)
            sdpa_ref(q + b * L * E, k + b * S * E, v + b * S * EV, L, S, E, EV, cases[c].mask, cases[c].is_bool,
                     cases[c].causal, scale, want + b * L * EV);
        kn_tensor *mt = cases[c].mask ? tens(ctx, cases[c].is_bool ? KN_BOOL : KN_F32, 2, sm, cases[c].mask) : NULL;
        kn_tensor *o = kn_scaled_dot_product_attention(ctx, qt, kt, vt, mt, cases[c].causal, cases[c].scale);
        CHECK_MSG(has_shape(o, 3, so), "case %d: %s", (int)c, kn_last_error(ctx));
        CHECK_VALUES(ctx, o, want, B * L * EV, 1e-5, 1e-6); /* row 1 of the bool mask is NaN */
    }
}

/* q (2, 1, L, E), k (1, 2, S, E), v (S, Ev) -> (2, 2, L, Ev), in f64 */
static void test_sdpa_broadcast(kn_ctx *ctx)
{
    double q[2 * L * E], k[2 * S * E], v[S * EV], want[4 * L * EV];
    int64_t sq[4] = {2, 1, L, E}, sk[4] = {1, 2, S, E}, sv[2] = {S, EV}, so[4] = {2, 2, L, EV};
    fill(q, 2 * L * E, -1, 1), fill(k, 2 * S * E, -1, 1), fill(v, S * EV, -1, 1);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            sdpa_ref(q + i * L * E, k + j * S * E, v, L, S, E, EV, NULL, 0, 1, 0.5, want + (i * 2 + j) * L * EV);
    kn_tensor *o = kn_scaled_dot_product_attention(ctx, tens(ctx, KN_F64, 4, sq, q), tens(ctx, KN_F64, 4, sk, k),
                                                   tens(ctx, KN_F64, 2, sv, v), NULL, 1, 0);
    CHECK(has_shape(o, 4, so) && kn_dtype_of(o) == KN_F64);
    CHECK_VALUES(ctx, o, want, 4 * L * EV, 1e-12, 1e-14);
}

static void test_sdpa_errors(kn_ctx *ctx)
{
    int64_t sq[3] = {B, L, E}, sk[3] = {B, S, E}, sv[3] = {B, S, EV}, sk3[3] = {B, S, 3}, sm[2] = {L, 4}, s4 = 4;
    int64_t sls[2] = {L, S};
    kn_tensor *q = kn_zeros(ctx, KN_F32, 3, sq), *k = kn_zeros(ctx, KN_F32, 3, sk), *v = kn_zeros(ctx, KN_F32, 3, sv);
    kn_tensor *mask = kn_ones(ctx, KN_BOOL, 2, sls);
    CHECK(kn_scaled_dot_product_attention(ctx, q, k, v, mask, 1, 0) == NULL);
    CHECK_ERR(ctx, "kn_scaled_dot_product_attention: an explicit mask should not be set when is_causal is true");
    CHECK(kn_scaled_dot_product_attention(ctx, q, kn_zeros(ctx, KN_F32, 3, sk3), v, NULL, 0, 0) == NULL);
    CHECK_ERR(ctx, "operand 'k' dim -1 has size 3, expected E = 4 from q");
    CHECK(kn_scaled_dot_product_attention(ctx, q, kn_zeros(ctx, KN_F64, 3, sk), v, NULL, 0, 0) == NULL);
    CHECK_ERR(ctx, "operand 'k' is f64 but q is f32");
    CHECK(kn_scaled_dot_product_attention(ctx, q, k, q, NULL, 0, 0) == NULL);
    CHECK_ERR(ctx, "operand 'v' dim -2 has size 3, expected S = 5 from k");
    CHECK(kn_scaled_dot_product_attention(ctx, q, k, v, kn_ones(ctx, KN_I64, 2, sls), 0, 0) == NULL);
    CHECK_ERR(ctx, "operand 'mask' must be bool or float, got i64");
    CHECK(kn_scaled_dot_product_attention(ctx, q, k, v, kn_ones(ctx, KN_BOOL, 2, sm), 0, 0) == NULL);
    CHECK_ERR(ctx, "operand 'mask' dim -1 has size 4, expected 1 or S = 5");
    CHECK(kn_scaled_dot_product_attention(ctx, kn_zeros(ctx, KN_F32, 1, &s4), k, v, NULL, 0, 0) == NULL);
    CHECK_ERR(ctx, "operand 'q' is 1-D; expected (..., L, E)");
    CHECK(kn_scaled_dot_product_attention(ctx, q, k, v, NULL, 0, NAN) == NULL);
    CHECK_ERR(ctx, "scale must not be NaN");
}

static void test_scopes(kn_ctx *ctx)
{
    size_t before = kn_live_tensors(ctx), bytes = kn_live_bytes(ctx);
    int64_t s[2] = {4, 5}, t = 4;
    kn_scope_begin(ctx);
    kn_tensor *x = kn_randn(ctx, KN_F32, 2, s);
    kn_loss_opts o = {KN_REDUCE_MEAN, NULL, 0, 0, 0.1};
    CHECK(kn_cross_entropy(ctx, x, kn_zeros(ctx, KN_I64, 1, &t), &o) != NULL);
    CHECK(kn_scaled_dot_product_attention(ctx, x, x, x, NULL, 1, 0) != NULL);
    kn_scope_end(ctx);
    CHECK(kn_live_tensors(ctx) == before && kn_live_bytes(ctx) == bytes);
}

int main(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    test_activation_values(ctx);
    test_activation_dtypes(ctx);
    test_activation_errors(ctx);
    test_softmax_values(ctx);
    test_softmax_extremes(ctx);
    test_softmax_errors(ctx);
    test_regression(ctx);
    test_cross_entropy_2d(ctx);
    test_cross_entropy_nd(ctx);
    test_cross_entropy_edges(ctx);
    test_cross_entropy_errors(ctx);
    test_bce(ctx);
    test_bce_logits(ctx);
    test_embedding(ctx);
    test_dropout(ctx);
    test_sdpa_masks(ctx);
    test_sdpa_broadcast(ctx);
    test_sdpa_errors(ctx);
    test_scopes(ctx);
    kn_ctx_free(ctx);
    TEST_END("nn");
}
