/*
 * test_conv.c — convolution, pooling and normalisation against naive loops
 * written here in double: conv2d and conv1d as direct sums, conv_transpose2d
 * as a scatter, the pools over explicit windows (PyTorch's ceil_mode and
 * count_include_pad rules spelled out again), the norms by their formulas.
 * Odd sizes, stride, padding, dilation and groups together; a transposed
 * (non-contiguous) input; expected output shapes worked out by hand; and
 * the error messages. PyTorch fixtures live elsewhere (tests/ref).
 */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>

#include "test.h"
#include "../src/core.h" /* the trace of a pool: its nodes */

#define RTOL 1e-5
#define ATOL 1e-6

/* ---- data ---- */

static uint64_t rng_state = 88172645463325252ULL;

static double urand(void) /* xorshift64, uniform in [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 4503599627370496.0 - 1.0;
}

static int64_t numel(int nd, const int64_t *s)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= s[i];
    return n;
}

/* A random array of the given shape, already rounded to dt so that the
 * reference reads exactly what kiln reads. Caller frees. */
static double *rand_data(kn_dtype dt, int nd, const int64_t *s)
{
    int64_t n = numel(nd, s);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = dt == KN_F32 ? (double)(float)urand() : urand();
    return v;
}

static kn_tensor *make(kn_ctx *ctx, kn_dtype dt, int nd, const int64_t *s, const double *v)
{
    int64_t n = numel(nd, s);
    if (dt == KN_F64) return kn_tensor_from(ctx, dt, nd, s, v);
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
    kn_tensor *t = kn_tensor_from(ctx, dt, nd, s, f);
    free(f);
    return t;
}

/* Reads t (f32 or f64) as n doubles; 0 if t is NULL or of another size. */
static int read_d(kn_ctx *ctx, kn_tensor *t, double *out, int64_t n)
{
    if (!t || kn_numel(t) != n) return 0;
    if (kn_dtype_of(t) == KN_F64) return kn_read(ctx, t, out, (size_t)n * sizeof *out) == KN_OK;
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    int ok = kn_read(ctx, t, f, (size_t)n * sizeof *f) == KN_OK;
    for (int64_t i = 0; ok && i < n; i++) out[i] = f[i];
    free(f);
    return ok;
}

static int has_shape(const kn_tensor *t, int nd, const int64_t *s)
{
    return t && kn_ndim(t) == nd && memcmp(kn_shape(t), s, (size_t)nd * sizeof *s) == 0;
}

/* t has shape s and holds want (n = numel) within rtol/atol. */
static int matches(kn_ctx *ctx, kn_tensor *t, int nd, const int64_t *s, const double *want, double rtol, double atol)
{
    if (!has_shape(t, nd, s)) {
        printf("    shape mismatch or NULL (%s)\n", t ? "wrong shape" : kn_last_error(ctx));
        return 0;
    }
    int64_t n = numel(nd, s);
    double *got = malloc((size_t)(n ? n : 1) * sizeof *got);
    int ok = read_d(ctx, t, got, n);
    for (int64_t i = 0; ok && i < n; i++)
        if (!test_close(got[i], want[i], rtol, atol)) {
            printf("    element %lld: got %.9g, want %.9g\n", (long long)i, got[i], want[i]);
            ok = 0;
        }
    free(got);
    return ok;
}

/* ---- reference convolutions ---- */

typedef struct {
    int n, c, h, w;          /* input */
    int o, kh, kw, g;        /* out channels, kernel, groups */
    int sh, sw, ph, pw, dh, dw, oph, opw;
} Geo;

static int conv_out(int size, int k, int s, int p, int d) { return (size + 2 * p - d * (k - 1) - 1) / s + 1; }
static int convt_out(int size, int k, int s, int p, int d, int op) { return (size - 1) * s - 2 * p + d * (k - 1) + op + 1; }

/* y[n, o, i, j] = b[o] + sum over the group's channels and the kernel of
 * x[n, c, i*sh - ph + ki*dh, j*sw - pw + kj*dw] * w[o, c', ki, kj] */
static void ref_conv2d(const Geo *q, const double *x, const double *w, const double *b, double *y)
{
    int oh = conv_out(q->h, q->kh, q->sh, q->ph, q->dh), ow = conv_out(q->w, q->kw, q->sw, q->pw, q->dw);
    int cg = q->c / q->g, og = q->o / q->g;
    for (int n = 0; n < q->n; n++)
        for (int o = 0; o < q->o; o++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++) {
                    double s = b ? b[o] : 0;
                    for (int ci = 0; ci < cg; ci++)
                        for (int ki = 0; ki < q->kh; ki++)
                            for (int kj = 0; kj < q->kw; kj++) {
                                int c = o / og * cg + ci, hi = i * q->sh - q->ph + ki * q->dh,
                                    wj = j * q->sw - q->pw + kj * q->dw;
                                if (hi < 0 || hi >= q->h || wj < 0 || wj >= q->w) continue;
                                s += x[((n * q->c + c) * q->h + hi) * q->w + wj] *
                                     w[((o * cg + ci) * q->kh + ki) * q->kw + kj];
                            }
                    y[((n * q->o + o) * oh + i) * ow + j] = s;
                }
}

/* Every input element adds x * w[c, o', ki, kj] to output
 * (hi*sh - ph + ki*dh, wj*sw - pw + kj*dw) of channel o in its group. */
static void ref_conv_transpose2d(const Geo *q, const double *x, const double *w, const double *b, double *y)
{
    int oh = convt_out(q->h, q->kh, q->sh, q->ph, q->dh, q->oph), ow = convt_out(q->w, q->kw, q->sw, q->pw, q->dw, q->opw);
    int cg = q->c / q->g, og = q->o / q->g;
    for (int n = 0; n < q->n; n++)
        for (int o = 0; o < q->o; o++)
            for (int k = 0; k < oh * ow; k++) y[(n * q->o + o) * oh * ow + k] = b ? b[o] : 0;
    for (int n = 0; n < q->n; n++)
        for (int c = 0; c < q->c; c++)
            for (int hi = 0; hi < q->h; hi++)
                for (int wj = 0; wj < q->w; wj++)
                    for (int oc = 0; oc < og; oc++)
                        for (int ki = 0; ki < q->kh; ki++)
                            for (int kj = 0; kj < q->kw; kj++) {
                                int o = c / cg * og + oc, i = hi * q->sh - q->ph + ki * q->dh,
                                    j = wj * q->sw - q->pw + kj * q->dw;
                                if (i < 0 || i >= oh || j < 0 || j >= ow) continue;
                                y[((n * q->o + o) * oh + i) * ow + j] += x[((n * q->c + c) * q->h + hi) * q->w + wj] *
                                                                         w[((c * og + oc) * q->kh + ki) * q->kw + kj];
                            }
}

static kn_conv_opts opts_of(const Geo *q)
{
    kn_conv_opts o;
    memset(&o, 0, sizeof o);
    o.stride[0] = q->sh, o.stride[1] = q->sw;
    o.padding[0] = q->ph, o.padding[1] = q->pw;
    o.dilation[0] = q->dh, o.dilation[1] = q->dw;
    o.output_padding[0] = q->oph, o.output_padding[1] = q->opw;
    o.groups = q->g;
    return o;
}

/* conv2d (or conv_transpose2d) of random data against the reference;
 * want_h/want_w: the output size worked out by hand. */
static void check_conv(kn_ctx *ctx, const Geo *q, kn_dtype dt, int transposed, int bias, int want_h, int want_w)
{
    kn_scope_begin(ctx);
    int64_t xs[4] = {q->n, q->c, q->h, q->w};
    int64_t ws[4] = {transposed ? q->c : q->o, transposed ? q->o / q->g : q->c / q->g, q->kh, q->kw}, bs = q->o;
    double *x = rand_data(dt, 4, xs), *w = rand_data(dt, 4, ws), *b = rand_data(dt, 1, &bs);
    int64_t ys[4] = {q->n, q->o, want_h, want_w};
    double *y = malloc((size_t)numel(4, ys) * sizeof *y);
    kn_conv_opts o = opts_of(q);
    kn_tensor *xt = make(ctx, dt, 4, xs, x), *wt = make(ctx, dt, 4, ws, w), *bt = bias ? make(ctx, dt, 1, &bs, b) : NULL;
    kn_tensor *yt = transposed ? kn_conv_transpose2d(ctx, xt, wt, bt, &o) : kn_conv2d(ctx, xt, wt, bt, &o);
    if (transposed) ref_conv_transpose2d(q, x, w, bias ? b : NULL, y);
    else ref_conv2d(q, x, w, bias ? b : NULL, y);
    double rtol = dt == KN_F64 ? 1e-12 : RTOL, atol = dt == KN_F64 ? 1e-12 : ATOL;
    CHECK_MSG(matches(ctx, yt, 4, ys, y, rtol, atol), "%s n%d c%d %dx%d o%d k%dx%d g%d s%d,%d p%d,%d d%d,%d",
              transposed ? "conv_transpose2d" : "conv2d", q->n, q->c, q->h, q->w, q->o, q->kh, q->kw, q->g, q->sh,
              q->sw, q->ph, q->pw, q->dh, q->dw);
    free(x), free(w), free(b), free(y);
    kn_scope_end(ctx);
}

static void test_conv2d(kn_ctx *ctx)
{
    /* OH = (9 + 2 - 2*2 - 1) / 2 + 1 = 4, OW = (7 + 4 - 1 - 1) / 1 + 1 = 10 */
    Geo a = {2, 4, 9, 7, 6, 3, 2, 2, 2, 1, 1, 2, 2, 1, 0, 0};
    check_conv(ctx, &a, KN_F32, 0, 1, 4, 10);
    /* OH = (8 - 1 - 1) / 2 + 1 = 4, OW = (11 - 4 - 1) / 2 + 1 = 4 */
    Geo b = {1, 3, 8, 11, 5, 2, 3, 1, 2, 2, 0, 0, 1, 2, 0, 0};
    check_conv(ctx, &b, KN_F64, 0, 0, 4, 4);
    Geo depthwise = {2, 4, 6, 5, 4, 3, 3, 4, 1, 1, 1, 1, 1, 1, 0, 0};
    check_conv(ctx, &depthwise, KN_F32, 0, 1, 6, 5);
    Geo pointwise = {3, 5, 4, 4, 2, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0};
    check_conv(ctx, &pointwise, KN_F32, 0, 1, 4, 4);
}

/* An unbatched (C, H, W) input, and an input that is a transposed view. */
static void test_conv2d_layouts(kn_ctx *ctx)
{
    kn_scope_begin(ctx);
    Geo q = {2, 3, 5, 6, 4, 3, 2, 1, 2, 1, 1, 0, 1, 2, 0, 0}; /* OH = (5 + 2 - 3) / 2 + 1 = 3, OW = 4 */
    int64_t xs[4] = {2, 3, 5, 6}, xts[4] = {2, 3, 6, 5}, ws[4] = {4, 3, 3, 2}, bs = 4, ys[4] = {2, 4, 3, 4};
    double *x = rand_data(KN_F32, 4, xs), *w = rand_data(KN_F32, 4, ws), *b = rand_data(KN_F32, 1, &bs);
    double xt[180], y[96];
    for (int n = 0; n < 2; n++) /* xt[n, c, j, i] = x[n, c, i, j] */
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < 5; i++)
                for (int j = 0; j < 6; j++) xt[((n * 3 + c) * 6 + j) * 5 + i] = x[((n * 3 + c) * 5 + i) * 6 + j];
    ref_conv2d(&q, x, w, b, y);
    kn_conv_opts o = opts_of(&q);
    kn_tensor *wt = make(ctx, KN_F32, 4, ws, w), *bt = make(ctx, KN_F32, 1, &bs, b);
    kn_tensor *view = kn_transpose(ctx, make(ctx, KN_F32, 4, xts, xt), 2, 3);
    CHECK(view && !kn_is_contiguous(view));
    CHECK(matches(ctx, kn_conv2d(ctx, view, wt, bt, &o), 4, ys, y, RTOL, ATOL));
    /* the second batch element alone, unbatched: (C, H, W) -> (O, OH, OW) */
    int64_t x3[3] = {3, 5, 6}, y3[3] = {4, 3, 4};
    CHECK(matches(ctx, kn_conv2d(ctx, make(ctx, KN_F32, 3, x3, x + 90), wt, bt, &o), 3, y3, y + 48, RTOL, ATOL));
    free(x), free(w), free(b);
    kn_scope_end(ctx);
}

/* x's and w's gradients of sum(conv2d(x, w) * gy), scattered back by the
 * forward's own index rule: dx[n, c, i*sh - ph + ki*dh, ...] += gy * w,
 * dw[o, c', ki, kj] += gy * x. */
static void ref_conv2d_grads(const Geo *q, const double *x, const double *w, const double *gy, double *dx, double *dw)
{
    int oh = conv_out(q->h, q->kh, q->sh, q->ph, q->dh), ow = conv_out(q->w, q->kw, q->sw, q->pw, q->dw);
    int cg = q->c / q->g, og = q->o / q->g;
    memset(dx, 0, (size_t)q->n * q->c * q->h * q->w * sizeof *dx);
    memset(dw, 0, (size_t)q->o * cg * q->kh * q->kw * sizeof *dw);
    for (int n = 0; n < q->n; n++)
        for (int o = 0; o < q->o; o++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++)
                    for (int ci = 0; ci < cg; ci++)
                        for (int ki = 0; ki < q->kh; ki++)
                            for (int kj = 0; kj < q->kw; kj++) {
                                int c = o / og * cg + ci, hi = i * q->sh - q->ph + ki * q->dh,
                                    wj = j * q->sw - q->pw + kj * q->dw;
                                if (hi < 0 || hi >= q->h || wj < 0 || wj >= q->w) continue;
                                double g = gy[((n * q->o + o) * oh + i) * ow + j];
                                int xi = ((n * q->c + c) * q->h + hi) * q->w + wj, wi = ((o * cg + ci) * q->kh + ki) * q->kw + kj;
                                dx[xi] += g * w[wi];
                                dw[wi] += g * x[xi];
                            }
}

/* The gradients of strided convolutions (x's is computed phase by phase,
 * conv_grad_phases) against the reference: phases with several taps, one
 * tap and none (a 1x1 kernel at stride 2, padded: odd rows get no
 * gradient), stride beyond the kernel, dilation sharing a factor with the
 * stride and not, H below the stride, groups, odd sizes. The output has at
 * least as many positions as channels, so the hand-written backward runs. */
static void test_conv2d_strided_grad(kn_ctx *ctx)
{
    static const Geo geos[] = {
        /* n c  h  w  o kh kw g sh sw ph pw dh dw */
        {2, 3, 9, 7, 4, 3, 3, 1, 2, 2, 1, 1, 1, 1, 0, 0}, /* ResNet's downsampling 3x3, odd sizes */
        {2, 4, 8, 9, 6, 1, 1, 2, 2, 2, 0, 0, 1, 1, 0, 0}, /* its 1x1 shortcut, groups */
        {1, 2, 7, 6, 3, 1, 1, 1, 2, 3, 1, 1, 1, 1, 0, 0}, /* 1x1 padded: phases without taps */
        {2, 2, 11, 10, 2, 3, 2, 1, 3, 2, 2, 1, 2, 3, 0, 0}, /* dilation coprime to the stride */
        {1, 4, 10, 9, 4, 3, 3, 2, 2, 2, 2, 1, 2, 2, 0, 0}, /* dilation a multiple of the stride */
        {2, 3, 1, 9, 3, 1, 3, 1, 2, 2, 0, 1, 1, 1, 0, 0}, /* H = 1 below the stride */
        {1, 2, 9, 8, 2, 2, 2, 1, 3, 3, 0, 0, 1, 1, 0, 0}, /* stride beyond the kernel: rows never read */
        {1, 3, 12, 13, 3, 5, 4, 3, 2, 3, 4, 2, 3, 1, 0, 0}, /* depthwise, large padding */
    };
    for (size_t k = 0; k < sizeof geos / sizeof *geos; k++)
        for (int f64 = 0; f64 < 2; f64++) {
            const Geo *q = &geos[k];
            kn_dtype dt = f64 ? KN_F64 : KN_F32;
            kn_scope_begin(ctx);
            int oh = conv_out(q->h, q->kh, q->sh, q->ph, q->dh), ow = conv_out(q->w, q->kw, q->sw, q->pw, q->dw);
            int64_t xs[4] = {q->n, q->c, q->h, q->w}, ws[4] = {q->o, q->c / q->g, q->kh, q->kw}, ys[4] = {q->n, q->o, oh, ow};
            double *x = rand_data(dt, 4, xs), *w = rand_data(dt, 4, ws), *gy = rand_data(dt, 4, ys);
            double *dx = malloc((size_t)numel(4, xs) * sizeof *dx), *dw = malloc((size_t)numel(4, ws) * sizeof *dw);
            ref_conv2d_grads(q, x, w, gy, dx, dw);
            kn_conv_opts o = opts_of(q);
            kn_tensor *xt = kn_requires_grad(ctx, make(ctx, dt, 4, xs, x), 1);
            kn_tensor *wt = kn_requires_grad(ctx, make(ctx, dt, 4, ws, w), 1);
            kn_tensor *l = kn_sum(ctx, kn_mul(ctx, kn_conv2d(ctx, xt, wt, NULL, &o), make(ctx, dt, 4, ys, gy)), NULL, 0, 0);
            int ok = kn_backward(ctx, l, 0) == KN_OK;
            double rtol = f64 ? 1e-12 : RTOL, atol = f64 ? 1e-12 : ATOL;
            CHECK_MSG(ok && matches(ctx, kn_grad(ctx, xt), 4, xs, dx, rtol, atol) &&
                          matches(ctx, kn_grad(ctx, wt), 4, ws, dw, rtol, atol),
                      "conv2d grad %s n%d c%d %dx%d o%d k%dx%d g%d s%d,%d p%d,%d d%d,%d (%s)", f64 ? "f64" : "f32",
                      q->n, q->c, q->h, q->w, q->o, q->kh, q->kw, q->g, q->sh, q->sw, q->ph, q->pw, q->dh, q->dw,
                      ok ? "" : kn_last_error(ctx));
            free(x), free(w), free(gy), free(dx), free(dw);
            kn_free(ctx, xt), kn_free(ctx, wt);
            kn_scope_end(ctx);
        }
}

/* conv1d is conv2d with H = 1: OL = (13 + 2 - 2*2 - 1) / 2 + 1 = 6 */
static void test_conv1d(kn_ctx *ctx)
{
    kn_scope_begin(ctx);
    Geo q = {2, 4, 1, 13, 2, 1, 3, 2, 1, 2, 0, 1, 1, 2, 0, 0};
    int64_t xs[3] = {2, 4, 13}, ws[3] = {2, 2, 3}, bs = 2, ys[3] = {2, 2, 6};
    double *x = rand_data(KN_F32, 3, xs), *w = rand_data(KN_F32, 3, ws), *b = rand_data(KN_F32, 1, &bs), y[24];
    ref_conv2d(&q, x, w, b, y);
    kn_conv_opts o;
    memset(&o, 0, sizeof o);
    o.stride[0] = 2, o.padding[0] = 1, o.dilation[0] = 2, o.groups = 2;
    o.stride[1] = 99; /* conv1d reads element [0] only */
    kn_tensor *wt = make(ctx, KN_F32, 3, ws, w), *bt = make(ctx, KN_F32, 1, &bs, b);
    CHECK(matches(ctx, kn_conv1d(ctx, make(ctx, KN_F32, 3, xs, x), wt, bt, &o), 3, ys, y, RTOL, ATOL));
    int64_t x2[2] = {4, 13}, y2[2] = {2, 6};
    CHECK(matches(ctx, kn_conv1d(ctx, make(ctx, KN_F32, 2, x2, x + 52), wt, bt, &o), 2, y2, y + 12, RTOL, ATOL));
    free(x), free(w), free(b);
    kn_scope_end(ctx);
}

static void test_conv_transpose2d(kn_ctx *ctx)
{
    /* OH = 3*2 - 2 + 1*2 + 1 + 1 = 8, OW = 2*3 - 0 + 2*1 + 2 + 1 = 11 */
    Geo a = {2, 4, 4, 3, 6, 3, 2, 2, 2, 3, 1, 0, 1, 2, 1, 2};
    check_conv(ctx, &a, KN_F32, 1, 1, 8, 11);
    /* padding beyond dilation*(k-1) crops: OH = 4*2 - 6 + 2 + 1 + 1 = 6, OW = 3*2 - 2 + 2 + 0 + 1 = 7 */
    Geo b = {1, 2, 5, 4, 2, 3, 3, 1, 2, 2, 3, 1, 1, 1, 1, 0};
    check_conv(ctx, &b, KN_F64, 1, 1, 6, 7);
    Geo plain = {2, 3, 4, 5, 2, 2, 3, 1, 1, 1, 0, 1, 1, 1, 0, 0}; /* OH = 5, OW = 5 */
    check_conv(ctx, &plain, KN_F32, 1, 0, 5, 5);
    /* a crop that removes the whole input on one side: H = 1, k = 1, stride 5,
     * padding 2, output_padding 4: OH = 0 - 4 + 0 + 4 + 1 = 1, the bias alone */
    Geo c = {1, 1, 1, 1, 1, 1, 1, 1, 5, 5, 2, 2, 1, 1, 4, 4};
    check_conv(ctx, &c, KN_F32, 1, 1, 1, 1);
}

/* ---- reference pools ---- */

/* PyTorch's pooling_output_shape, written out again */
static int pool_out(int size, int k, int s, int p, int d, int ceil_mode)
{
    int num = size + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int out = num / s + 1; /* num >= 0 in these tests */
    if (ceil_mode && (out - 1) * s >= size + p) out--;
    return out;
}

static void ref_max_pool(const int64_t *xs, const double *x, const kn_pool_opts *o, int oh, int ow, double *y)
{
    int64_t h = xs[2], w = xs[3];
    for (int64_t nc = 0; nc < xs[0] * xs[1]; nc++)
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++) {
                double m = -INFINITY;
                for (int ki = 0; ki < o->kernel[0]; ki++)
                    for (int kj = 0; kj < o->kernel[1]; kj++) {
                        int hi = i * o->stride[0] - o->padding[0] + ki * (o->dilation[0] ? o->dilation[0] : 1);
                        int wj = j * o->stride[1] - o->padding[1] + kj * (o->dilation[1] ? o->dilation[1] : 1);
                        if (hi >= 0 && hi < h && wj >= 0 && wj < w && x[(nc * h + hi) * w + wj] > m)
                            m = x[(nc * h + hi) * w + wj];
                    }
                y[(nc * oh + i) * ow + j] = m;
            }
}

/* PyTorch's avg_pool2d kernel: the window is clipped to the padded input
 * for the count_include_pad divisor, and to the input for the sum. */
static void ref_avg_pool(const int64_t *xs, const double *x, const kn_pool_opts *o, int oh, int ow, double *y)
{
    int h = (int)xs[2], w = (int)xs[3];
    for (int64_t nc = 0; nc < xs[0] * xs[1]; nc++)
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++) {
                int h0 = i * o->stride[0] - o->padding[0], w0 = j * o->stride[1] - o->padding[1];
                int h1 = h0 + o->kernel[0] < h + o->padding[0] ? h0 + o->kernel[0] : h + o->padding[0];
                int w1 = w0 + o->kernel[1] < w + o->padding[1] ? w0 + o->kernel[1] : w + o->padding[1];
                int pool = (h1 - h0) * (w1 - w0);
                h0 = h0 > 0 ? h0 : 0, w0 = w0 > 0 ? w0 : 0, h1 = h1 < h ? h1 : h, w1 = w1 < w ? w1 : w;
                double s = 0;
                for (int a = h0; a < h1; a++)
                    for (int b = w0; b < w1; b++) s += x[(nc * h + a) * w + b];
                int div = o->divisor ? o->divisor : o->exclude_pad ? (h1 - h0) * (w1 - w0) : pool;
                y[(nc * oh + i) * ow + j] = s / div;
            }
}

/* One pool of random data against the reference; o's zero strides must
 * already be filled in (the reference reads them). */
static void check_pool(kn_ctx *ctx, int avg, kn_dtype dt, const int64_t *xs, const kn_pool_opts *o, int want_h,
                       int want_w)
{
    kn_scope_begin(ctx);
    int oh = pool_out((int)xs[2], o->kernel[0], o->stride[0], o->padding[0], o->dilation[0] ? o->dilation[0] : 1, o->ceil_mode);
    int ow = pool_out((int)xs[3], o->kernel[1], o->stride[1], o->padding[1], o->dilation[1] ? o->dilation[1] : 1, o->ceil_mode);
    CHECK_MSG(oh == want_h && ow == want_w, "test's own output size %dx%d, by hand %dx%d", oh, ow, want_h, want_w);
    int64_t ys[4] = {xs[0], xs[1], want_h, want_w};
    double *x = rand_data(dt, 4, xs), *y = malloc((size_t)numel(4, ys) * sizeof *y);
    if (avg) ref_avg_pool(xs, x, o, want_h, want_w, y);
    else ref_max_pool(xs, x, o, want_h, want_w, y);
    kn_tensor *xt = make(ctx, dt, 4, xs, x);
    kn_tensor *yt = avg ? kn_avg_pool2d(ctx, xt, o) : kn_max_pool2d(ctx, xt, o);
    CHECK_MSG(matches(ctx, yt, 4, ys, y, dt == KN_F64 ? 1e-12 : RTOL, dt == KN_F64 ? 1e-12 : ATOL),
              "%s k%dx%d s%d,%d p%d,%d d%d,%d ceil %d excl %d div %d", avg ? "avg_pool2d" : "max_pool2d", o->kernel[0],
              o->kernel[1], o->stride[0], o->stride[1], o->padding[0], o->padding[1], o->dilation[0], o->dilation[1],
              o->ceil_mode, o->exclude_pad, o->divisor);
    free(x), free(y);
    kn_scope_end(ctx);
}

static kn_pool_opts pool_opts(int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw, int ceil_mode)
{
    kn_pool_opts o;
    memset(&o, 0, sizeof o);
    o.kernel[0] = kh, o.kernel[1] = kw, o.stride[0] = sh, o.stride[1] = sw;
    o.padding[0] = ph, o.padding[1] = pw, o.dilation[0] = dh, o.dilation[1] = dw;
    o.ceil_mode = ceil_mode;
    return o;
}

static void test_max_pool(kn_ctx *ctx)
{
    int64_t a[4] = {2, 3, 10, 5}, b[4] = {1, 2, 7, 6};
    /* ceil: OH = (10 + 2 - 3 + 1) / 2 + 1 = 6; OW = (5 + 2 - 2 + 1) / 2 + 1 = 4,
     * but window 3 would start at 6 >= 5 + 1, past the input: 3 */
    kn_pool_opts o = pool_opts(3, 2, 2, 2, 1, 1, 1, 1, 1);
    check_pool(ctx, 0, KN_F32, a, &o, 6, 3);
    o.ceil_mode = 0; /* OH = 9 / 2 + 1 = 5, OW = 4 / 2 + 1 = 3 */
    check_pool(ctx, 0, KN_F32, a, &o, 5, 3);
    /* dilation: OH = (7 + 2 - 2 - 1) / 1 + 1 = 7; ceil OW = (6 + 2 - 2 - 1 + 1) / 2 + 1 = 4 */
    o = pool_opts(2, 3, 1, 2, 1, 1, 2, 1, 1);
    check_pool(ctx, 0, KN_F64, b, &o, 7, 4);

    /* stride 0 means the kernel size; integers pad with their minimum */
    kn_scope_begin(ctx);
    int32_t v[12] = {-5, -9, -7, -1, -3, -8, -2, -4, -6, -100, -200, -300}, out[6];
    int64_t s[3] = {1, 3, 4}, ys[3] = {1, 2, 3};
    kn_pool_opts q = pool_opts(2, 2, 0, 0, 1, 1, 0, 0, 0);
    kn_tensor *y = kn_max_pool2d(ctx, kn_tensor_from(ctx, KN_I32, 3, s, v), &q);
    CHECK(has_shape(y, 3, ys) && kn_dtype_of(y) == KN_I32);
    CHECK(y && kn_read(ctx, y, out, sizeof out) == KN_OK && out[0] == -5 && out[1] == -7 && out[2] == -1 &&
          out[3] == -3 && out[4] == -2 && out[5] == -4);
    kn_scope_end(ctx);
}

static void test_avg_pool(kn_ctx *ctx)
{
    int64_t a[4] = {2, 3, 10, 5}, b[4] = {2, 2, 5, 7};
    kn_pool_opts o = pool_opts(3, 2, 2, 2, 1, 1, 0, 0, 1); /* 6 x 3, as for max_pool2d */
    check_pool(ctx, 1, KN_F32, a, &o, 6, 3);
    o.exclude_pad = 1;
    check_pool(ctx, 1, KN_F32, a, &o, 6, 3);
    o.ceil_mode = 0, o.divisor = 5;
    check_pool(ctx, 1, KN_F32, a, &o, 5, 3);
    /* no padding, ceil: the last windows hang over the input; OH = (5 - 2 + 1) / 2 + 1 = 3, OW = 4 */
    o = pool_opts(2, 2, 2, 2, 0, 0, 0, 0, 1);
    check_pool(ctx, 1, KN_F64, b, &o, 3, 4);
    o.ceil_mode = 0;
    check_pool(ctx, 1, KN_F64, b, &o, 2, 3);
}

/* start = floor(i*H/OH), end = ceil((i+1)*H/OH) */
static void ref_adaptive(const int64_t *xs, const double *x, int oh, int ow, double *y)
{
    int h = (int)xs[2], w = (int)xs[3];
    for (int64_t nc = 0; nc < xs[0] * xs[1]; nc++)
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++) {
                int h0 = i * h / oh, h1 = ((i + 1) * h + oh - 1) / oh, w0 = j * w / ow, w1 = ((j + 1) * w + ow - 1) / ow;
                double s = 0;
                for (int a = h0; a < h1; a++)
                    for (int b = w0; b < w1; b++) s += x[(nc * h + a) * w + b];
                y[(nc * oh + i) * ow + j] = s / ((h1 - h0) * (w1 - w0));
            }
}

static void check_adaptive(kn_ctx *ctx, const int64_t *xs, int oh, int ow)
{
    kn_scope_begin(ctx);
    int64_t ys[4] = {xs[0], xs[1], oh, ow};
    double *x = rand_data(KN_F32, 4, xs), *y = malloc((size_t)numel(4, ys) * sizeof *y);
    ref_adaptive(xs, x, oh, ow, y);
    kn_tensor *yt = kn_adaptive_avg_pool2d(ctx, make(ctx, KN_F32, 4, xs, x), oh, ow);
    CHECK_MSG(matches(ctx, yt, 4, ys, y, RTOL, ATOL), "adaptive %lldx%lld -> %dx%d", (long long)xs[2],
              (long long)xs[3], oh, ow);
    int64_t x3[3] = {xs[1], xs[2], xs[3]};
    CHECK(matches(ctx, kn_adaptive_avg_pool2d(ctx, make(ctx, KN_F32, 3, x3, x), oh, ow), 3, ys + 1, y, RTOL, ATOL));
    free(x), free(y);
    kn_scope_end(ctx);
}

static void test_adaptive(kn_ctx *ctx)
{
    int64_t a[4] = {2, 3, 7, 5}, b[4] = {1, 2, 3, 2}, c[4] = {1, 1, 8, 8};
    check_adaptive(ctx, a, 3, 4); /* windows of uneven sizes */
    check_adaptive(ctx, b, 5, 3); /* more outputs than inputs: overlapping windows */
    check_adaptive(ctx, c, 1, 1); /* global average pooling */
    check_adaptive(ctx, c, 4, 2);
    /* windows that tile the input are summed, those that do not are two dots with 0/1 matrices */
    for (int tiled = 0; tiled < 2; tiled++) {
        kn_scope_begin(ctx);
        kn_tensor *x = kn_randn(ctx, KN_F32, 4, tiled ? c : a);
        ctx->trace = graph_new(ctx);
        kn_tensor *y = kn_adaptive_avg_pool2d(ctx, x, tiled ? 4 : 3, tiled ? 2 : 4);
        int dots = 0;
        for (uint32_t i = 1; ctx->trace && i < ctx->trace->n; i++) dots += ctx->trace->nodes[i].op == OP_DOT;
        CHECK_MSG(y && dots == (tiled ? 0 : 2), "adaptive pool, windows %s: %d dots", tiled ? "tiled" : "uneven", dots);
        graph_free(ctx->trace);
        ctx->trace = NULL;
        kn_scope_end(ctx);
    }
}

/* ---- norms ---- */

/* mean and biased var of x[n, c, s] over n and s for each c (x is (N, C, S)) */
static void channel_stats(const double *x, int n, int c, int s, int ch, double *mean, double *var)
{
    double m = 0, v = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < s; k++) m += x[(i * c + ch) * s + k];
    m /= n * s;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < s; k++) v += (x[(i * c + ch) * s + k] - m) * (x[(i * c + ch) * s + k] - m);
    *mean = m, *var = v / (n * s);
}

static void test_batch_norm_train(kn_ctx *ctx)
{
    kn_scope_begin(ctx);
    enum { N = 4, C = 3, S = 10 };
    int64_t xs[4] = {N, C, 5, 2}, cs = C;
    double *x = rand_data(KN_F32, 4, xs), *w = rand_data(KN_F32, 1, &cs), *b = rand_data(KN_F32, 1, &cs);
    double rm[C] = {0.5, -0.25, 1}, rv[C] = {1, 2, 0.5}, y[N * C * S], want_rm[C], want_rv[C];
    for (int ch = 0; ch < C; ch++) {
        double m, v;
        channel_stats(x, N, C, S, ch, &m, &v);
        for (int i = 0; i < N; i++)
            for (int k = 0; k < S; k++)
                y[(i * C + ch) * S + k] = (x[(i * C + ch) * S + k] - m) / sqrt(v + 1e-3) * w[ch] + b[ch];
        want_rm[ch] = 0.8 * rm[ch] + 0.2 * m;
        want_rv[ch] = 0.8 * rv[ch] + 0.2 * v * (N * S) / (N * S - 1); /* the unbiased var */
    }
    kn_tensor *rmt = make(ctx, KN_F32, 1, &cs, rm), *rvt = make(ctx, KN_F32, 1, &cs, rv);
    kn_tensor *yt = kn_batch_norm(ctx, make(ctx, KN_F32, 4, xs, x), rmt, rvt, make(ctx, KN_F32, 1, &cs, w),
                                  make(ctx, KN_F32, 1, &cs, b), 1, 0.2, 1e-3);
    CHECK(matches(ctx, yt, 4, xs, y, RTOL, ATOL));
    CHECK(matches(ctx, rmt, 1, &cs, want_rm, RTOL, ATOL));
    CHECK(matches(ctx, rvt, 1, &cs, want_rv, RTOL, ATOL));
    free(x), free(w), free(b);
    kn_scope_end(ctx);
}

/* (N, C) input, default momentum and eps, no affine, strided running stats */
static void test_batch_norm_2d(kn_ctx *ctx)
{
    kn_scope_begin(ctx);
    enum { N = 6, C = 3 };
    int64_t xs[2] = {N, C}, cs = C, six = 2 * C;
    double *x = rand_data(KN_F64, 2, xs), y[N * C], store[2 * C] = {1, 7, 2, 7, 3, 7}, zero[2 * C] = {0};
    double want_rm[C], want_rv[C];
    for (int ch = 0; ch < C; ch++) {
        double m, v;
        channel_stats(x, N, C, 1, ch, &m, &v);
        for (int i = 0; i < N; i++) y[i * C + ch] = (x[i * C + ch] - m) / sqrt(v + 1e-5);
        want_rm[ch] = 0.9 * store[2 * ch] + 0.1 * m;
        want_rv[ch] = 0.1 * v * N / (N - 1);
    }
    kn_tensor *rm_base = make(ctx, KN_F64, 1, &six, store);
    kn_tensor *rm = kn_slice(ctx, rm_base, 0, 0, 6, 2), *rv = kn_slice(ctx, make(ctx, KN_F64, 1, &six, zero), 0, 1, 6, 2);
    CHECK(rm && rv && !kn_is_contiguous(rm));
    kn_tensor *yt = kn_batch_norm(ctx, make(ctx, KN_F64, 2, xs, x), rm, rv, NULL, NULL, 1, 0, 0);
    CHECK(matches(ctx, yt, 2, xs, y, 1e-12, 1e-12));
    CHECK(matches(ctx, rm, 1, &cs, want_rm, 1e-12, 1e-12));
    CHECK(matches(ctx, rv, 1, &cs, want_rv, 1e-12, 1e-12));
    double all[2 * C]; /* the elements between the strided view's are untouched */
    CHECK(read_d(ctx, rm_base, all, 2 * C) && all[1] == 7 && all[3] == 7 && all[5] == 7);
    free(x);
    kn_scope_end(ctx);
}

static void test_batch_norm_eval(kn_ctx *ctx)
{
    kn_scope_begin(ctx);
    int64_t xs[3] = {2, 3, 4}, cs = 3;
    double *x = rand_data(KN_F32, 3, xs), rm[3] = {0.125, -0.25, 0.375}, rv[3] = {0.5, 1.5, 2.5}, w[3] = {1, 2, -1},
           b[3] = {0, 0.5, 1}, y[24];
    for (int i = 0; i < 24; i++) {
        int ch = i / 4 % 3;
        y[i] = (x[i] - rm[ch]) / sqrt(rv[ch] + 1e-5) * w[ch] + b[ch];
    }
    kn_tensor *rmt = make(ctx, KN_F32, 1, &cs, rm), *rvt = make(ctx, KN_F32, 1, &cs, rv);
    kn_tensor *yt = kn_batch_norm(ctx, make(ctx, KN_F32, 3, xs, x), rmt, rvt, make(ctx, KN_F32, 1, &cs, w),
                                  make(ctx, KN_F32, 1, &cs, b), 0, 0, 0);
    CHECK(matches(ctx, yt, 3, xs, y, RTOL, ATOL));
    CHECK(matches(ctx, rmt, 1, &cs, rm, 0, 0)); /* eval leaves the stats alone */
    free(x);
    kn_scope_end(ctx);
}

/* y = x / sqrt(mean(x^2) + eps) * g, row by row */
static void ref_rms(const double *x, int rows, int cols, const double *g, double eps, double *y)
{
    for (int i = 0; i < rows; i++) {
        double ms = 0;
        for (int j = 0; j < cols; j++) ms += x[i * cols + j] * x[i * cols + j] / cols;
        for (int j = 0; j < cols; j++) y[i * cols + j] = x[i * cols + j] / sqrt(ms + eps) * (g ? g[j] : 1);
    }
}

/* layer_norm over the last two dims of a transposed view; rms_norm over the last. */
static void test_layer_rms_norm(kn_ctx *ctx)
{
    kn_scope_begin(ctx);
    int64_t xs[3] = {2, 4, 3}, ns[2] = {3, 4}, vs[3] = {2, 3, 4};
    double *x = rand_data(KN_F32, 3, xs), *w = rand_data(KN_F32, 2, ns), *b = rand_data(KN_F32, 2, ns), y[24];
    for (int n = 0; n < 2; n++) { /* the view is v[n, i, j] = x[n, j, i] */
        double m = 0, v = 0;
        for (int k = 0; k < 12; k++) m += x[n * 12 + k] / 12;
        for (int k = 0; k < 12; k++) v += (x[n * 12 + k] - m) * (x[n * 12 + k] - m) / 12;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                y[n * 12 + i * 4 + j] = (x[n * 12 + j * 3 + i] - m) / sqrt(v + 1e-5) * w[i * 4 + j] + b[i * 4 + j];
    }
    kn_tensor *view = kn_transpose(ctx, make(ctx, KN_F32, 3, xs, x), 1, 2);
    kn_tensor *yt = kn_layer_norm(ctx, view, 2, ns, make(ctx, KN_F32, 2, ns, w), make(ctx, KN_F32, 2, ns, b), 0);
    CHECK(matches(ctx, yt, 3, vs, y, RTOL, ATOL));

    /* rms_norm's default eps is the dtype's machine epsilon */
    int64_t rs[2] = {6, 4}, last = 4;
    double *r = rand_data(KN_F32, 2, rs), *g = rand_data(KN_F32, 1, &last), ry[24];
    ref_rms(r, 6, 4, g, FLT_EPSILON, ry);
    kn_tensor *rt = kn_rms_norm(ctx, make(ctx, KN_F32, 2, rs, r), 1, &last, make(ctx, KN_F32, 1, &last, g), 0);
    CHECK(matches(ctx, rt, 2, rs, ry, RTOL, ATOL));
    ref_rms(r, 6, 4, NULL, DBL_EPSILON, ry);
    CHECK(matches(ctx, kn_rms_norm(ctx, make(ctx, KN_F64, 2, rs, r), 1, &last, NULL, 0), 2, rs, ry, 1e-12, 1e-12));
    free(x), free(w), free(b), free(r), free(g);
    kn_scope_end(ctx);
}

static void test_group_norm(kn_ctx *ctx)
{
    kn_scope_begin(ctx);
    enum { N = 2, C = 6, G = 3, S = 6 };
    int64_t xs[4] = {N, C, 3, 2}, cs = C;
    double *x = rand_data(KN_F32, 4, xs), *w = rand_data(KN_F32, 1, &cs), *b = rand_data(KN_F32, 1, &cs), y[N * C * S];
    for (int n = 0; n < N; n++)
        for (int g = 0; g < G; g++) { /* a group is C/G = 2 channels of S elements, contiguous */
            const double *p = x + (n * C + g * 2) * S;
            double m = 0, v = 0;
            for (int k = 0; k < 2 * S; k++) m += p[k] / (2 * S);
            for (int k = 0; k < 2 * S; k++) v += (p[k] - m) * (p[k] - m) / (2 * S);
            for (int k = 0; k < 2 * S; k++) {
                int ch = g * 2 + k / S;
                y[(n * C + g * 2) * S + k] = (p[k] - m) / sqrt(v + 1e-5) * w[ch] + b[ch];
            }
        }
    kn_tensor *yt = kn_group_norm(ctx, make(ctx, KN_F32, 4, xs, x), G, make(ctx, KN_F32, 1, &cs, w),
                                  make(ctx, KN_F32, 1, &cs, b), 0);
    CHECK(matches(ctx, yt, 4, xs, y, RTOL, ATOL));
    free(x), free(w), free(b);
    kn_scope_end(ctx);
}

/* ---- errors ---- */

static void test_conv_errors(kn_ctx *ctx)
{
    kn_scope_begin(ctx);
    int64_t xs[4] = {1, 4, 5, 5}, ws[4] = {6, 2, 3, 3}, w3[4] = {6, 4, 3, 3}, big[4] = {2, 2, 3, 3}, bs = 5, x2[2] = {4, 5};
    kn_tensor *x = kn_zeros(ctx, KN_F32, 4, xs), *w = kn_zeros(ctx, KN_F32, 4, ws);
    kn_conv_opts o;
    memset(&o, 0, sizeof o);
    o.groups = 3;
    CHECK(kn_conv2d(ctx, x, kn_zeros(ctx, KN_F32, 4, w3), NULL, &o) == NULL);
    CHECK_ERR(ctx, "kn_conv2d: input dim 1 (channels = 4) is not divisible by groups 3");
    o.groups = 2;
    CHECK(kn_conv2d(ctx, x, kn_zeros(ctx, KN_F32, 4, w3), NULL, &o) == NULL);
    CHECK_ERR(ctx, "weight dim 1 is 4, expected in_channels / groups = 4 / 2 = 2");
    o.groups = 4;
    CHECK(kn_conv2d(ctx, x, kn_zeros(ctx, KN_F32, 4, (int64_t[]){6, 1, 3, 3}), NULL, &o) == NULL);
    CHECK_ERR(ctx, "weight dim 0 (out_channels = 6) is not divisible by groups 4");
    o.groups = 2;
    CHECK(kn_conv2d(ctx, x, kn_zeros(ctx, KN_F32, 4, (int64_t[]){6, 2, 7, 3}), NULL, &o) == NULL);
    CHECK_ERR(ctx, "weight dim 2: dilated kernel size 7 is larger than the padded input size 5 (input dim 2)");
    o.padding[0] = 1, o.dilation[1] = 3;
    CHECK(kn_conv2d(ctx, x, kn_zeros(ctx, KN_F32, 4, big), NULL, &o) == NULL);
    CHECK_ERR(ctx, "weight dim 3: dilated kernel size 7 is larger than the padded input size 5 (input dim 3)");
    memset(&o, 0, sizeof o);
    o.groups = 2, o.stride[1] = -1;
    CHECK(kn_conv2d(ctx, x, w, NULL, &o) == NULL);
    CHECK_ERR(ctx, "stride[1] must be positive, got -1");
    o.stride[1] = 0, o.padding[0] = -2;
    CHECK(kn_conv2d(ctx, x, w, NULL, &o) == NULL);
    CHECK_ERR(ctx, "padding[0] must be non-negative, got -2");
    o.padding[0] = 0, o.dilation[0] = -1;
    CHECK(kn_conv2d(ctx, x, w, NULL, &o) == NULL);
    CHECK_ERR(ctx, "dilation[0] must be positive");
    o.dilation[0] = 0;
    CHECK(kn_conv2d(ctx, x, w, kn_zeros(ctx, KN_F32, 1, &bs), &o) == NULL);
    CHECK_ERR(ctx, "operand 'bias' must have shape (6), got (5)");
    CHECK(kn_conv2d(ctx, kn_zeros(ctx, KN_F32, 2, x2), w, NULL, &o) == NULL);
    CHECK_ERR(ctx, "operand 'x' must be 3-D (C, H, W) or 4-D (N, C, H, W), got 2 dims (4, 5)");
    CHECK(kn_conv2d(ctx, x, kn_zeros(ctx, KN_F32, 2, x2), NULL, &o) == NULL);
    CHECK_ERR(ctx, "operand 'weight' must be 4-D (out_channels, in_channels/groups, kH, kW)");
    CHECK(kn_conv2d(ctx, kn_zeros(ctx, KN_I32, 4, xs), w, NULL, &o) == NULL);
    CHECK_ERR(ctx, "operand 'x' must be a float tensor, got i32");
    CHECK(kn_conv2d(ctx, x, kn_zeros(ctx, KN_F64, 4, ws), NULL, &o) == NULL);
    CHECK_ERR(ctx, "operand 'weight' is f64 but input is f32");
    CHECK(kn_conv2d(ctx, NULL, w, NULL, &o) == NULL);
    CHECK_ERR(ctx, "kn_conv2d: operand 'x' is NULL");
    CHECK(kn_conv1d(ctx, x, w, NULL, &o) == NULL);
    CHECK_ERR(ctx, "kn_conv1d: operand 'x' must be 2-D (C, L) or 3-D (N, C, L)");
    o.output_padding[0] = 1;
    CHECK(kn_conv2d(ctx, x, w, NULL, &o) == NULL);
    CHECK_ERR(ctx, "output_padding applies to conv_transpose2d only");

    /* transposed: weight (C_in, O/G, kH, kW) */
    memset(&o, 0, sizeof o);
    o.stride[0] = 2, o.output_padding[0] = 2;
    kn_tensor *wt = kn_zeros(ctx, KN_F32, 4, (int64_t[]){4, 3, 3, 3});
    CHECK(kn_conv_transpose2d(ctx, x, wt, NULL, &o) == NULL);
    CHECK_ERR(ctx, "kn_conv_transpose2d: output_padding[0] = 2 must be non-negative and smaller than stride 2 or dilation 1");
    CHECK(kn_conv_transpose2d(ctx, x, kn_zeros(ctx, KN_F32, 4, (int64_t[]){3, 3, 3, 3}), NULL, NULL) == NULL);
    CHECK_ERR(ctx, "weight dim 0 (in_channels = 3) does not match input dim 1 (channels = 4)");
    memset(&o, 0, sizeof o);
    o.padding[1] = 4;
    CHECK(kn_conv_transpose2d(ctx, x, wt, NULL, &o) == NULL);
    CHECK_ERR(ctx, "output size -1 at input dim 3 is not positive");
    kn_scope_end(ctx);
}

static void test_pool_norm_errors(kn_ctx *ctx)
{
    kn_scope_begin(ctx);
    int64_t xs[4] = {1, 2, 3, 4}, cs = 2, one[2] = {1, 2}, ns[2] = {3, 5};
    kn_tensor *x = kn_zeros(ctx, KN_F32, 4, xs);
    kn_pool_opts o = pool_opts(3, 3, 1, 1, 2, 0, 0, 0, 0);
    CHECK(kn_max_pool2d(ctx, x, &o) == NULL);
    CHECK_ERR(ctx, "kn_max_pool2d: padding[0] = 2 must be between 0 and half the kernel size 3");
    o = pool_opts(5, 2, 0, 0, 0, 0, 0, 0, 0);
    CHECK(kn_avg_pool2d(ctx, x, &o) == NULL);
    CHECK_ERR(ctx, "kn_avg_pool2d: output size 0 at input dim 2 is too small");
    o = pool_opts(0, 2, 0, 0, 0, 0, 0, 0, 0);
    CHECK(kn_max_pool2d(ctx, x, &o) == NULL);
    CHECK_ERR(ctx, "kernel[0] must be positive, got 0");
    o = pool_opts(2, 2, 0, 0, 0, 0, 2, 1, 0);
    CHECK(kn_avg_pool2d(ctx, x, &o) == NULL);
    CHECK_ERR(ctx, "dilation applies to max_pool2d only");
    CHECK(kn_max_pool2d(ctx, x, NULL) == NULL);
    CHECK_ERR(ctx, "operand 'opts' is NULL");
    CHECK(kn_adaptive_avg_pool2d(ctx, kn_zeros(ctx, KN_F32, 4, (int64_t[]){1, 2, 0, 4}), 2, 2) == NULL);
    CHECK_ERR(ctx, "input dim 2 has size 0");

    CHECK(kn_batch_norm(ctx, kn_zeros(ctx, KN_F32, 2, one), NULL, NULL, NULL, NULL, 1, 0, 0) == NULL);
    CHECK_ERR(ctx, "kn_batch_norm: expected more than 1 value per channel when training, got input (1, 2)");
    CHECK(kn_batch_norm(ctx, x, NULL, NULL, NULL, NULL, 0, 0, 0) == NULL);
    CHECK_ERR(ctx, "running_mean and running_var are required in eval mode");
    CHECK(kn_batch_norm(ctx, x, kn_zeros(ctx, KN_F32, 1, ns), kn_zeros(ctx, KN_F32, 1, &cs), NULL, NULL, 0, 0, 0) == NULL);
    CHECK_ERR(ctx, "operand 'running_mean' must have shape (2), got (3)");
    CHECK(kn_layer_norm(ctx, x, 2, ns, NULL, NULL, 0) == NULL);
    CHECK_ERR(ctx, "kn_layer_norm: normalized_shape[1] = 5 does not match input dim 3 of size 4");
    CHECK(kn_layer_norm(ctx, x, 1, &xs[3], kn_zeros(ctx, KN_F32, 1, ns), NULL, 0) == NULL);
    CHECK_ERR(ctx, "operand 'weight' must have shape (4), got (3)");
    CHECK(kn_rms_norm(ctx, x, 5, xs, NULL, 0) == NULL);
    CHECK_ERR(ctx, "kn_rms_norm: normalized_shape has 5 dims; expected 1 to 4");
    CHECK(kn_group_norm(ctx, x, 3, NULL, NULL, 0) == NULL);
    CHECK_ERR(ctx, "kn_group_norm: input dim 1 (channels = 2) is not divisible by groups 3");
    CHECK(kn_group_norm(ctx, x, 0, NULL, NULL, 0) == NULL);
    CHECK_ERR(ctx, "groups must be positive, got 0");
    kn_scope_end(ctx);
}

/* A rejected training step leaves the running statistics as they were. */
static void test_no_partial_update(kn_ctx *ctx)
{
    kn_scope_begin(ctx);
    int64_t xs[2] = {4, 2}, cs = 2, bad = 3;
    double rm[2] = {1, 2}, got[2];
    kn_tensor *rmt = make(ctx, KN_F32, 1, &cs, rm);
    CHECK(kn_batch_norm(ctx, kn_ones(ctx, KN_F32, 2, xs), rmt, kn_ones(ctx, KN_F32, 1, &cs),
                        kn_ones(ctx, KN_F32, 1, &bad), NULL, 1, 0, 0) == NULL);
    CHECK_ERR(ctx, "operand 'weight' must have shape (2), got (3)");
    CHECK(read_d(ctx, rmt, got, 2) && got[0] == 1 && got[1] == 2);
    kn_scope_end(ctx);
}

int main(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    size_t live = kn_live_tensors(ctx);
    test_conv2d(ctx);
    test_conv2d_layouts(ctx);
    test_conv2d_strided_grad(ctx);
    test_conv1d(ctx);
    test_conv_transpose2d(ctx);
    test_max_pool(ctx);
    test_avg_pool(ctx);
    test_adaptive(ctx);
    test_batch_norm_train(ctx);
    test_batch_norm_2d(ctx);
    test_batch_norm_eval(ctx);
    test_layer_rms_norm(ctx);
    test_group_norm(ctx);
    test_conv_errors(ctx);
    test_pool_norm_errors(ctx);
    test_no_partial_update(ctx);
    CHECK(kn_live_tensors(ctx) == live); /* every op's temporaries went with its scope */
    kn_ctx_free(ctx);
    TEST_END("conv");
}
