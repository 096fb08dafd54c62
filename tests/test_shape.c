/*
 * test_shape.c — reductions, shape and indexing ops and matrix products on
 * small hand-checked values: keepdim, negative dims, size-0 dims, 0-d
 * tensors, non-contiguous (transposed, sliced) inputs, result dtypes, and
 * the error messages of bad input. PyTorch fixtures cover the rest.
 */
#include <stdint.h>

#include "test.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define V(...) ((const double[]){__VA_ARGS__})
#define D(...) ((const int[]){__VA_ARGS__})

/* A tensor of dtype dt from doubles (through an f64 tensor and kn_to). */
static kn_tensor *mk(kn_ctx *ctx, kn_dtype dt, int nd, const int64_t *shape, const double *v)
{
    return kn_to(ctx, kn_tensor_from(ctx, KN_F64, nd, shape, v), dt);
}

/* t has dtype dt, shape (nd, shape) and values want (exact to 1e-6,
 * NaN equal to NaN); prints what differs. */
static int is(kn_ctx *ctx, kn_tensor *t, kn_dtype dt, int nd, const int64_t *shape, const double *want)
{
    if (!t) return printf("    NULL tensor: %s\n", kn_last_error(ctx)), 0;
    if (kn_dtype_of(t) != dt)
        return printf("    dtype %s, want %s\n", kn_dtype_name(kn_dtype_of(t)), kn_dtype_name(dt)), 0;
    if (kn_ndim(t) != nd) return printf("    %d dims, want %d\n", kn_ndim(t), nd), 0;
    for (int i = 0; i < nd; i++)
        if (kn_shape(t)[i] != shape[i])
            return printf("    dim %d is %lld, want %lld\n", i, (long long)kn_shape(t)[i], (long long)shape[i]), 0;
    int64_t n = kn_numel(t);
    double got[256];
    if (n > 256 || kn_read(ctx, kn_to(ctx, t, KN_F64), got, sizeof got) != KN_OK) return printf("    unreadable\n"), 0;
    for (int64_t i = 0; i < n; i++)
        if (!test_close(got[i], want[i], 1e-6, 1e-6))
            return printf("    element %lld is %g, want %g\n", (long long)i, got[i], want[i]), 0;
    return 1;
}

#define IS(t, dt, nd, shape, want) CHECK(is(ctx, (t), (dt), (nd), (shape), (want)))

/* (2, 3): [[1, 2, 3], [4, 5, 6]] */
static kn_tensor *m23(kn_ctx *ctx, kn_dtype dt) { return mk(ctx, dt, 2, S(2, 3), V(1, 2, 3, 4, 5, 6)); }

static void test_sum_mean(kn_ctx *ctx)
{
    kn_tensor *x = m23(ctx, KN_F32), *xt = kn_transpose(ctx, x, 0, 1);
    IS(kn_sum(ctx, x, NULL, 0, 0), KN_F32, 0, NULL, V(21));
    IS(kn_sum(ctx, x, D(1), 1, 0), KN_F32, 1, S(2), V(6, 15));
    IS(kn_sum(ctx, x, D(-1), 1, 1), KN_F32, 2, S(2, 1), V(6, 15));
    IS(kn_sum(ctx, x, D(-2), 1, 0), KN_F32, 1, S(3), V(5, 7, 9));
    IS(kn_sum(ctx, xt, D(1), 1, 0), KN_F32, 1, S(3), V(5, 7, 9)); /* non-contiguous */
    IS(kn_sum(ctx, x, NULL, 0, 1), KN_F32, 2, S(1, 1), V(21));
    IS(kn_sum(ctx, m23(ctx, KN_I32), D(0), 1, 0), KN_I64, 1, S(3), V(5, 7, 9));
    IS(kn_sum(ctx, mk(ctx, KN_BOOL, 1, S(4), V(1, 0, 1, 1)), NULL, 0, 0), KN_I64, 0, NULL, V(3));
    IS(kn_sum(ctx, mk(ctx, KN_U8, 1, S(2), V(200, 100)), NULL, 0, 0), KN_I64, 0, NULL, V(300));
    kn_tensor *e = kn_zeros(ctx, KN_F32, 2, S(0, 3));
    IS(kn_sum(ctx, e, D(0), 1, 0), KN_F32, 1, S(3), V(0, 0, 0));
    IS(kn_sum(ctx, e, D(1), 1, 0), KN_F32, 1, S(0), V(0));
    kn_tensor *s = kn_scalar(ctx, 5.0);
    IS(kn_sum(ctx, s, D(-1), 1, 0), KN_F64, 0, NULL, V(5));
    IS(kn_mean(ctx, x, D(0), 1, 0), KN_F32, 1, S(3), V(2.5, 3.5, 4.5));
    IS(kn_mean(ctx, xt, NULL, 0, 0), KN_F32, 0, NULL, V(3.5));
    IS(kn_mean(ctx, m23(ctx, KN_F16), D(1), 1, 1), KN_F16, 2, S(2, 1), V(2, 5));
    IS(kn_mean(ctx, e, D(0), 1, 0), KN_F32, 1, S(3), V(NAN, NAN, NAN));

    CHECK(kn_sum(ctx, x, D(1, -1), 2, 0) == NULL);
    CHECK_ERR(ctx, "kn_sum: operand 'dims' entry 1: dim -1 appears twice");
    CHECK(kn_sum(ctx, x, D(2), 1, 0) == NULL);
    CHECK_ERR(ctx, "kn_sum: operand 'dims' entry 0: dim 2 out of range for a 2-dim tensor");
    CHECK(kn_sum(ctx, x, NULL, 1, 0) == NULL);
    CHECK_ERR(ctx, "kn_sum: operand 'dims' is NULL");
    CHECK(kn_sum(ctx, NULL, NULL, 0, 0) == NULL);
    CHECK_ERR(ctx, "kn_sum: operand 'x' is NULL");
    CHECK(kn_mean(ctx, m23(ctx, KN_I64), NULL, 0, 0) == NULL);
    CHECK_ERR(ctx, "kn_mean: operand 'x' is i64: a float dtype is needed");
    CHECK(kn_sum(NULL, x, NULL, 0, 0) == NULL);
}

static void test_var_std_lse(kn_ctx *ctx)
{
    kn_tensor *x = m23(ctx, KN_F32);
    IS(kn_var(ctx, x, D(1), 1, 1, 0), KN_F32, 1, S(2), V(1, 1));
    IS(kn_var(ctx, x, D(1), 1, 0, 1), KN_F32, 2, S(2, 1), V(2.0 / 3, 2.0 / 3));
    IS(kn_var(ctx, x, NULL, 0, 1, 0), KN_F32, 0, NULL, V(3.5));
    IS(kn_std(ctx, kn_transpose(ctx, x, 0, 1), D(0), 1, 1, 0), KN_F32, 1, S(2), V(1, 1));
    IS(kn_var(ctx, kn_scalar(ctx, 3.0), NULL, 0, 1, 0), KN_F64, 0, NULL, V(NAN)); /* 0 / 0 */
    IS(kn_std(ctx, mk(ctx, KN_F64, 1, S(2), V(1, 3)), NULL, 0, 5, 0), KN_F64, 0, NULL, V(INFINITY));
    CHECK(kn_std(ctx, m23(ctx, KN_I32), NULL, 0, 1, 0) == NULL);
    CHECK_ERR(ctx, "kn_std: operand 'x' is i32");

    kn_tensor *l = mk(ctx, KN_F32, 2, S(3, 2), V(0, 0, -INFINITY, -INFINITY, 1000, 1000));
    IS(kn_logsumexp(ctx, l, D(1), 1, 0), KN_F32, 1, S(3), V(log(2.0), -INFINITY, 1000 + log(2.0)));
    IS(kn_logsumexp(ctx, kn_zeros(ctx, KN_F32, 2, S(2, 0)), D(-1), 1, 1), KN_F32, 2, S(2, 1), V(-INFINITY, -INFINITY));
    IS(kn_logsumexp(ctx, mk(ctx, KN_I64, 1, S(2), V(0, 0)), NULL, 0, 0), KN_F32, 0, NULL, V(log(2.0)));
    IS(kn_logsumexp(ctx, mk(ctx, KN_F32, 1, S(2), V(INFINITY, 0)), NULL, 0, 0), KN_F32, 0, NULL, V(INFINITY));
}

static void test_prod(kn_ctx *ctx)
{
    kn_tensor *x = mk(ctx, KN_F32, 2, S(2, 3), V(1, -2, 3, 0, 5, -1));
    IS(kn_prod(ctx, x, 1, 0), KN_F32, 1, S(2), V(-6, 0));
    IS(kn_prod(ctx, x, -2, 1), KN_F32, 2, S(1, 3), V(0, -10, -3));
    IS(kn_prod(ctx, kn_transpose(ctx, x, 0, 1), 0, 0), KN_F32, 1, S(2), V(-6, 0));
    IS(kn_prod(ctx, mk(ctx, KN_I32, 1, S(7), V(1, 2, 3, 4, 5, 6, 7)), KN_NODIM, 0), KN_I64, 0, NULL, V(5040));
    IS(kn_prod(ctx, x, KN_NODIM, 1), KN_F32, 2, S(1, 1), V(0));
    IS(kn_prod(ctx, mk(ctx, KN_F32, 1, S(3), V(2, -INFINITY, 0.5)), 0, 0), KN_F32, 0, NULL, V(-INFINITY));
    IS(kn_prod(ctx, kn_zeros(ctx, KN_F32, 2, S(2, 0)), 1, 0), KN_F32, 1, S(2), V(1, 1));
    IS(kn_prod(ctx, mk(ctx, KN_BOOL, 1, S(2), V(1, 1)), 0, 0), KN_I64, 0, NULL, V(1));
    IS(kn_prod(ctx, kn_scalar(ctx, -4.0), 0, 1), KN_F64, 0, NULL, V(-4));
    int64_t big[20], got = 0;
    for (int i = 0; i < 20; i++) big[i] = 3;
    kn_tensor *p = kn_prod(ctx, kn_tensor_from(ctx, KN_I64, 1, S(20), big), 0, 0);
    CHECK(p && kn_read(ctx, p, &got, sizeof got) == KN_OK && got == 3486784401LL); /* 3^20, exact */
    CHECK(kn_prod(ctx, x, 2, 0) == NULL);
    CHECK_ERR(ctx, "kn_prod: dim 2 out of range");
}

static void test_amax_amin(kn_ctx *ctx)
{
    kn_tensor *x = mk(ctx, KN_F32, 2, S(2, 3), V(1, NAN, 3, -4, 5, 0));
    IS(kn_amax(ctx, x, D(1), 1, 0), KN_F32, 1, S(2), V(NAN, 5));
    IS(kn_amin(ctx, x, D(1), 1, 0), KN_F32, 1, S(2), V(NAN, -4));
    IS(kn_amin(ctx, x, D(0), 1, 1), KN_F32, 2, S(1, 3), V(-4, NAN, 0));
    int64_t iv[3] = {INT64_MIN, 0, INT64_MAX}, out = 0;
    kn_tensor *xi = kn_tensor_from(ctx, KN_I64, 1, S(3), iv);
    CHECK(kn_read(ctx, kn_amin(ctx, xi, NULL, 0, 0), &out, sizeof out) == KN_OK && out == INT64_MIN);
    CHECK(kn_read(ctx, kn_amax(ctx, xi, NULL, 0, 0), &out, sizeof out) == KN_OK && out == INT64_MAX);
    kn_tensor *u = mk(ctx, KN_U8, 1, S(3), V(7, 0, 255));
    IS(kn_amin(ctx, u, NULL, 0, 0), KN_U8, 0, NULL, V(0));
    IS(kn_amax(ctx, u, NULL, 0, 0), KN_U8, 0, NULL, V(255));
    kn_tensor *b = mk(ctx, KN_BOOL, 2, S(2, 2), V(1, 0, 1, 1));
    IS(kn_amin(ctx, b, D(1), 1, 0), KN_BOOL, 1, S(2), V(0, 1));
    IS(kn_amax(ctx, b, D(0), 1, 0), KN_BOOL, 1, S(2), V(1, 1));
    IS(kn_amax(ctx, mk(ctx, KN_I32, 1, S(3), V(-5, -2, -9)), D(0), 1, 0), KN_I32, 0, NULL, V(-2));
    IS(kn_amax(ctx, kn_zeros(ctx, KN_F32, 2, S(0, 3)), D(1), 1, 0), KN_F32, 1, S(0), V(0));
    CHECK(kn_amax(ctx, kn_zeros(ctx, KN_F32, 2, S(0, 3)), D(0), 1, 0) == NULL);
    CHECK_ERR(ctx, "kn_amax: operand 'x' dim 0 has size 0");
    CHECK(kn_amin(ctx, kn_zeros(ctx, KN_F32, 1, S(0)), NULL, 0, 0) == NULL);
    CHECK_ERR(ctx, "kn_amin: operand 'x' dim 0 has size 0");
}

static void test_argmax(kn_ctx *ctx)
{
    kn_tensor *x = mk(ctx, KN_F32, 2, S(2, 3), V(1, 3, 3, 2, 2, 0));
    IS(kn_argmax(ctx, x, 1, 0), KN_I64, 1, S(2), V(1, 0));
    IS(kn_argmin(ctx, x, -1, 1), KN_I64, 2, S(2, 1), V(0, 2));
    IS(kn_argmax(ctx, x, 0, 0), KN_I64, 1, S(3), V(1, 0, 0));
    IS(kn_argmax(ctx, x, KN_NODIM, 1), KN_I64, 0, NULL, V(1)); /* keepdim ignored, as torch 1.13 */
    IS(kn_argmin(ctx, kn_transpose(ctx, x, 0, 1), KN_NODIM, 0), KN_I64, 0, NULL, V(5));
    IS(kn_argmax(ctx, kn_transpose(ctx, x, 0, 1), 0, 0), KN_I64, 1, S(2), V(1, 0));
    kn_tensor *n = mk(ctx, KN_F32, 1, S(4), V(1, NAN, 5, NAN));
    IS(kn_argmax(ctx, n, 0, 0), KN_I64, 0, NULL, V(1));
    IS(kn_argmin(ctx, n, 0, 0), KN_I64, 0, NULL, V(1));
    IS(kn_argmin(ctx, mk(ctx, KN_BOOL, 1, S(3), V(1, 0, 0)), 0, 0), KN_I64, 0, NULL, V(1));
    IS(kn_argmin(ctx, mk(ctx, KN_U8, 1, S(3), V(9, 0, 255)), 0, 0), KN_I64, 0, NULL, V(1));
    IS(kn_argmax(ctx, kn_scalar(ctx, 2.0), 0, 0), KN_I64, 0, NULL, V(0));
    CHECK(kn_argmax(ctx, kn_zeros(ctx, KN_F32, 2, S(2, 0)), 1, 0) == NULL);
    CHECK_ERR(ctx, "kn_argmax: operand 'x' dim 1 has size 0");
    CHECK(kn_argmin(ctx, kn_zeros(ctx, KN_F32, 1, S(0)), KN_NODIM, 0) == NULL);
    CHECK_ERR(ctx, "kn_argmin: operand 'x' has no elements");
    IS(kn_argmax(ctx, kn_zeros(ctx, KN_F32, 2, S(0, 2)), 1, 0), KN_I64, 1, S(0), V(0));
}

static void test_cumsum(kn_ctx *ctx)
{
    IS(kn_cumsum(ctx, mk(ctx, KN_F32, 1, S(5), V(1, 2, 3, 4, 5)), 0), KN_F32, 1, S(5), V(1, 3, 6, 10, 15));
    IS(kn_cumsum(ctx, m23(ctx, KN_I32), 0), KN_I64, 2, S(2, 3), V(1, 2, 3, 5, 7, 9));
    IS(kn_cumsum(ctx, m23(ctx, KN_F64), -1), KN_F64, 2, S(2, 3), V(1, 3, 6, 4, 9, 15));
    kn_tensor *t = kn_transpose(ctx, m23(ctx, KN_F32), 0, 1); /* (3, 2): [[1, 4], [2, 5], [3, 6]] */
    IS(kn_cumsum(ctx, t, 0), KN_F32, 2, S(3, 2), V(1, 4, 3, 9, 6, 15));
    kn_tensor *odd = kn_slice(ctx, mk(ctx, KN_F32, 1, S(6), V(1, 2, 3, 4, 5, 6)), 0, 0, 6, 2);
    IS(kn_cumsum(ctx, odd, 0), KN_F32, 1, S(3), V(1, 4, 9));
    IS(kn_cumsum(ctx, mk(ctx, KN_BOOL, 1, S(3), V(1, 0, 1)), 0), KN_I64, 1, S(3), V(1, 1, 2));
    IS(kn_cumsum(ctx, kn_scalar(ctx, 2.5), -1), KN_F64, 0, NULL, V(2.5));
    IS(kn_cumsum(ctx, kn_zeros(ctx, KN_F32, 2, S(2, 0)), 1), KN_F32, 2, S(2, 0), V(0));
    int64_t last = 0;
    kn_tensor *c = kn_cumsum(ctx, kn_ones(ctx, KN_I64, 1, S(1000)), 0);
    CHECK(c && kn_read(ctx, kn_slice(ctx, c, 0, -1, 1000, 1), &last, sizeof last) == KN_OK && last == 1000);
    CHECK(kn_cumsum(ctx, c, 1) == NULL);
    CHECK_ERR(ctx, "kn_cumsum: dim 1 out of range for a 1-dim tensor");
}

static void test_reshape_view(kn_ctx *ctx)
{
    kn_tensor *x = m23(ctx, KN_F32), *t = kn_transpose(ctx, x, 0, 1);
    IS(kn_reshape(ctx, x, 2, S(3, -1)), KN_F32, 2, S(3, 2), V(1, 2, 3, 4, 5, 6));
    IS(kn_reshape(ctx, t, 1, S(-1)), KN_F32, 1, S(6), V(1, 4, 2, 5, 3, 6)); /* a copy */
    IS(kn_reshape(ctx, x, 0 + 3, S(1, 6, 1)), KN_F32, 3, S(1, 6, 1), V(1, 2, 3, 4, 5, 6));
    IS(kn_reshape(ctx, kn_scalar(ctx, 7.0), 2, S(1, -1)), KN_F64, 2, S(1, 1), V(7));
    IS(kn_reshape(ctx, kn_zeros(ctx, KN_F32, 2, S(0, 3)), 2, S(3, 0)), KN_F32, 2, S(3, 0), V(0));
    kn_tensor *v = kn_view(ctx, x, 1, S(6));
    CHECK(v && kn_is_contiguous(v));
    IS(kn_view(ctx, t, 3, S(3, 1, 2)), KN_F32, 3, S(3, 1, 2), V(1, 4, 2, 5, 3, 6)); /* size-1 dims view */
    CHECK(kn_view(ctx, t, 1, S(6)) == NULL);
    CHECK_ERR(ctx, "kn_view: x (3, 2) with strides [1, 3] cannot be viewed as [6]");
    CHECK(kn_reshape(ctx, x, 2, S(-1, -1)) == NULL);
    CHECK_ERR(ctx, "kn_reshape: operand 'shape' dims 0 and 1 are both -1");
    CHECK(kn_reshape(ctx, x, 2, S(4, -1)) == NULL);
    CHECK_ERR(ctx, "kn_reshape: operand 'shape' [4, -1] is invalid for x (2, 3) of 6 elements");
    CHECK(kn_reshape(ctx, x, 2, S(2, 4)) == NULL);
    CHECK_ERR(ctx, "operand 'shape' [2, 4] is invalid");
    CHECK(kn_reshape(ctx, kn_zeros(ctx, KN_F32, 1, S(0)), 2, S(0, -1)) == NULL);
    CHECK_ERR(ctx, "dim 1 (-1) is ambiguous");
    CHECK(kn_reshape(ctx, x, 9, S(1, 1, 1, 1, 1, 1, 1, 1, 6)) == NULL);
    CHECK_ERR(ctx, "kn_reshape: operand 'shape' has 9 dims");
    CHECK(kn_reshape(ctx, x, 2, NULL) == NULL);
    CHECK_ERR(ctx, "operand 'shape' is NULL");
    CHECK(kn_reshape(ctx, x, 2, S(-3, -2)) == NULL);
    CHECK_ERR(ctx, "operand 'shape' dim 0 has invalid size -3");
}

static void test_dims_ops(kn_ctx *ctx)
{
    kn_tensor *x = m23(ctx, KN_F32), *t = kn_transpose(ctx, x, 0, 1);
    kn_tensor *x3 = kn_reshape(ctx, kn_arange(ctx, KN_F32, 0, 24, 1), 3, S(2, 3, 4));
    IS(kn_flatten(ctx, x3, 1, -1), KN_F32, 2, S(2, 12), V(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                                           17, 18, 19, 20, 21, 22, 23));
    IS(kn_flatten(ctx, t, 0, -1), KN_F32, 1, S(6), V(1, 4, 2, 5, 3, 6));
    IS(kn_flatten(ctx, kn_scalar(ctx, 3.0), 0, -1), KN_F64, 1, S(1), V(3));
    CHECK(kn_flatten(ctx, x3, 2, 1) == NULL);
    CHECK_ERR(ctx, "kn_flatten: start_dim 2 comes after end_dim 1");
    kn_tensor *u = kn_reshape(ctx, x, 4, S(1, 2, 1, 3));
    IS(kn_squeeze(ctx, u, KN_NODIM), KN_F32, 2, S(2, 3), V(1, 2, 3, 4, 5, 6));
    IS(kn_squeeze(ctx, u, -2), KN_F32, 3, S(1, 2, 3), V(1, 2, 3, 4, 5, 6));
    CHECK(kn_squeeze(ctx, u, 1) == u); /* size 2: unchanged */
    IS(kn_unsqueeze(ctx, t, -1), KN_F32, 3, S(3, 2, 1), V(1, 4, 2, 5, 3, 6));
    IS(kn_unsqueeze(ctx, kn_scalar(ctx, 1.0), 0), KN_F64, 1, S(1), V(1));
    CHECK(kn_unsqueeze(ctx, x, 3) == NULL);
    CHECK_ERR(ctx, "kn_unsqueeze: dim 3 out of range for a new dim in a 2-dim tensor (expected -3 to 2)");
    IS(kn_permute(ctx, x3, D(2, 0, -2)), KN_F32, 3, S(4, 2, 3),
       V(0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23));
    CHECK(kn_permute(ctx, x3, D(0, 1, -2)) == NULL);
    CHECK_ERR(ctx, "kn_permute: operand 'perm' entry 2: dim -2 appears twice");
    CHECK(kn_permute(ctx, x3, NULL) == NULL);
    CHECK_ERR(ctx, "operand 'perm' is NULL");
    CHECK(kn_transpose(ctx, x, 0, 2) == NULL);
    CHECK_ERR(ctx, "kn_transpose: dim1 2 out of range");
    IS(kn_expand(ctx, mk(ctx, KN_F32, 1, S(3), V(1, 2, 3)), 2, S(2, -1)), KN_F32, 2, S(2, 3), V(1, 2, 3, 1, 2, 3));
    IS(kn_expand(ctx, kn_unsqueeze(ctx, t, 1), 3, S(3, 2, 2)), KN_F32, 3, S(3, 2, 2),
       V(1, 4, 1, 4, 2, 5, 2, 5, 3, 6, 3, 6));
    IS(kn_expand(ctx, kn_scalar_int(ctx, 4), 1, S(0)), KN_I64, 1, S(0), V(0));
    CHECK(kn_expand(ctx, x, 3, S(-1, 2, 3)) == NULL);
    CHECK_ERR(ctx, "kn_expand: operand 'shape' dim 0: size -1 is invalid for a new leading dim");
    CHECK(kn_expand(ctx, x, 2, S(2, 4)) == NULL);
    CHECK_ERR(ctx, "kn_expand: operand 'shape' dim 1: cannot expand x dim 1 of size 3 to 4");
    CHECK(kn_expand(ctx, x, 1, S(6)) == NULL);
    CHECK_ERR(ctx, "operand 'shape' has 1 dims, fewer than x's 2");
    kn_tensor *c = kn_contiguous(ctx, t);
    CHECK(c && c != t && kn_is_contiguous(c) && !kn_is_contiguous(t));
    IS(c, KN_F32, 2, S(3, 2), V(1, 4, 2, 5, 3, 6));
    CHECK(kn_contiguous(ctx, x) == x);
    kn_tensor *nz = kn_contiguous(ctx, kn_transpose(ctx, mk(ctx, KN_F32, 2, S(1, 2), V(-0.0, 1)), 0, 1));
    float z[2] = {1, 1};
    CHECK(nz && kn_read(ctx, nz, z, sizeof z) == KN_OK && z[0] == 0 && signbit(z[0])); /* -0.0 survives */
}

static void test_slice_pad(kn_ctx *ctx)
{
    kn_tensor *r = kn_arange(ctx, KN_I64, 0, 10, 1);
    IS(kn_slice(ctx, r, 0, 2, 8, 2), KN_I64, 1, S(3), V(2, 4, 6));
    IS(kn_slice(ctx, r, 0, -3, INT64_MAX, 1), KN_I64, 1, S(3), V(7, 8, 9));
    IS(kn_slice(ctx, r, -1, -100, 3, 2), KN_I64, 1, S(2), V(0, 2));
    IS(kn_slice(ctx, r, 0, 7, 2, 1), KN_I64, 1, S(0), V(0));
    IS(kn_slice(ctx, r, 0, 1, 10, 4), KN_I64, 1, S(3), V(1, 5, 9));
    kn_tensor *t = kn_transpose(ctx, m23(ctx, KN_F32), 0, 1); /* [[1, 4], [2, 5], [3, 6]] */
    IS(kn_slice(ctx, t, 0, 1, 3, 1), KN_F32, 2, S(2, 2), V(2, 5, 3, 6));
    CHECK(kn_slice(ctx, r, 0, 0, 5, 0) == NULL);
    CHECK_ERR(ctx, "kn_slice: step 0: slice step must be positive");
    CHECK(kn_slice(ctx, kn_scalar(ctx, 1.0), 0, 0, 1, 1) == NULL);
    CHECK_ERR(ctx, "kn_slice: operand 'x' is 0-d");
    IS(kn_narrow(ctx, t, 0, -2, 2), KN_F32, 2, S(2, 2), V(2, 5, 3, 6));
    IS(kn_narrow(ctx, t, 1, 2, 0), KN_F32, 2, S(3, 0), V(0));
    CHECK(kn_narrow(ctx, t, 0, 2, 2) == NULL);
    CHECK_ERR(ctx, "kn_narrow: start 2 + length 2 does not fit dim 0 of size 3");
    CHECK(kn_narrow(ctx, t, 0, -4, 1) == NULL);
    CHECK_ERR(ctx, "kn_narrow: start -4 out of range for dim 0 of size 3 (expected -3 to 3)");

    kn_tensor *x = m23(ctx, KN_F32);
    IS(kn_pad(ctx, x, 2, S(1, 1), 0), KN_F32, 2, S(2, 5), V(0, 1, 2, 3, 0, 0, 4, 5, 6, 0));
    IS(kn_pad(ctx, x, 4, S(1, 0, 0, 1), 9), KN_F32, 2, S(3, 4), V(9, 1, 2, 3, 9, 4, 5, 6, 9, 9, 9, 9));
    IS(kn_pad(ctx, t, 2, S(-1, 1), 0), KN_F32, 2, S(3, 2), V(4, 0, 5, 0, 6, 0));
    IS(kn_pad(ctx, x, 2, S(-4, 2), 7), KN_F32, 2, S(2, 1), V(7, 7)); /* the crop eats the padding */
    IS(kn_pad(ctx, m23(ctx, KN_I32), 2, S(0, 1), 2.7), KN_I32, 2, S(2, 4), V(1, 2, 3, 2, 4, 5, 6, 2));
    CHECK(kn_pad(ctx, x, 3, S(1, 1, 1), 0) == NULL);
    CHECK_ERR(ctx, "kn_pad: operand 'pad' has 3 entries");
    CHECK(kn_pad(ctx, x, 6, S(1, 1, 1, 1, 1, 1), 0) == NULL);
    CHECK_ERR(ctx, "kn_pad: operand 'pad' has 6 entries");
    CHECK(kn_pad(ctx, x, 2, S(-2, -2), 0) == NULL);
    CHECK_ERR(ctx, "padding dim 1 of size 3 by (-2, -2) gives no valid size");
}

static void test_cat_stack(kn_ctx *ctx)
{
    kn_tensor *a = mk(ctx, KN_F32, 2, S(2, 1), V(1, 2)), *b = m23(ctx, KN_I32);
    IS(kn_cat(ctx, (kn_tensor *[]){a, b}, 2, -1), KN_F32, 2, S(2, 4), V(1, 1, 2, 3, 2, 4, 5, 6));
    kn_tensor *t = kn_transpose(ctx, m23(ctx, KN_F32), 0, 1);
    IS(kn_cat(ctx, (kn_tensor *[]){t, t, kn_slice(ctx, t, 0, 0, 1, 1)}, 3, 0), KN_F32, 2, S(7, 2),
       V(1, 4, 2, 5, 3, 6, 1, 4, 2, 5, 3, 6, 1, 4));
    kn_tensor *legacy = kn_zeros(ctx, KN_F64, 1, S(0));
    IS(kn_cat(ctx, (kn_tensor *[]){legacy, a, legacy}, 3, 1), KN_F64, 2, S(2, 1), V(1, 2)); /* skipped, promoted */
    IS(kn_cat(ctx, (kn_tensor *[]){legacy, legacy}, 2, 5), KN_F64, 1, S(0), V(0));
    IS(kn_cat(ctx, (kn_tensor *[]){kn_zeros(ctx, KN_F32, 2, S(2, 0)), a}, 2, 1), KN_F32, 2, S(2, 1), V(1, 2));
    kn_tensor *bo = mk(ctx, KN_BOOL, 1, S(2), V(1, 0));
    IS(kn_cat(ctx, (kn_tensor *[]){bo, bo}, 2, 0), KN_BOOL, 1, S(4), V(1, 0, 1, 0));
    kn_tensor *fz = mk(ctx, KN_F32, 1, S(1), V(-0.0)), *cz = kn_cat(ctx, (kn_tensor *[]){a, fz}, 2, 0);
    CHECK(cz == NULL);
    CHECK_ERR(ctx, "kn_cat: operand 'xs[1]' has 1 dims, xs[0] has 2");
    cz = kn_cat(ctx, (kn_tensor *[]){fz, fz}, 2, 0);
    float z[2] = {1, 1};
    CHECK(cz && kn_read(ctx, cz, z, sizeof z) == KN_OK && signbit(z[0]) && signbit(z[1]));
    CHECK(kn_cat(ctx, (kn_tensor *[]){a, t}, 2, 1) == NULL);
    CHECK_ERR(ctx, "kn_cat: operand 'xs[1]' dim 0: expected 2 (xs[0] dim 0), got 3");
    CHECK(kn_cat(ctx, (kn_tensor *[]){a, kn_scalar(ctx, 1.0)}, 2, 0) == NULL);
    CHECK_ERR(ctx, "kn_cat: operand 'xs[1]' is 0-d");
    CHECK(kn_cat(ctx, (kn_tensor *[]){a, NULL}, 2, 0) == NULL);
    CHECK_ERR(ctx, "kn_cat: operand 'xs[1]' is NULL");
    CHECK(kn_cat(ctx, NULL, 0, 0) == NULL);
    CHECK_ERR(ctx, "kn_cat: operand 'xs' has 0 tensors");

    kn_tensor *p = mk(ctx, KN_F32, 1, S(2), V(1, 2)), *q = mk(ctx, KN_F32, 1, S(2), V(3, 4));
    IS(kn_stack(ctx, (kn_tensor *[]){p, q}, 2, 0), KN_F32, 2, S(2, 2), V(1, 2, 3, 4));
    IS(kn_stack(ctx, (kn_tensor *[]){p, q}, 2, -1), KN_F32, 2, S(2, 2), V(1, 3, 2, 4));
    IS(kn_stack(ctx, (kn_tensor *[]){kn_scalar(ctx, 1), kn_scalar(ctx, 2)}, 2, 0), KN_F64, 1, S(2), V(1, 2));
    CHECK(kn_stack(ctx, (kn_tensor *[]){p, a}, 2, 0) == NULL);
    CHECK_ERR(ctx, "kn_stack: operand 'xs[1]' has shape (2, 1) but xs[0] has (2)");
    CHECK(kn_stack(ctx, (kn_tensor *[]){p, q}, 2, 2) == NULL);
    CHECK_ERR(ctx, "kn_stack: dim 2 out of range");
}

static void test_split_chunk(kn_ctx *ctx)
{
    kn_tensor *r = kn_arange(ctx, KN_F32, 0, 5, 1), *out[4] = {NULL, NULL, NULL, NULL};
    CHECK(kn_split(ctx, r, 2, 0, out, 4) == 3);
    IS(out[0], KN_F32, 1, S(2), V(0, 1));
    IS(out[2], KN_F32, 1, S(1), V(4));
    out[0] = NULL;
    CHECK(kn_split(ctx, r, 1, 0, out, 4) == 5 && out[0] == NULL); /* too many: nothing written */
    CHECK(kn_split(ctx, r, 9, -1, out, 4) == 1);
    IS(out[0], KN_F32, 1, S(5), V(0, 1, 2, 3, 4));
    CHECK(kn_split(ctx, kn_zeros(ctx, KN_F32, 1, S(0)), 0, 0, out, 4) == 1);
    CHECK(kn_split(ctx, r, 0, 0, out, 4) == -1);
    CHECK_ERR(ctx, "kn_split: split_size 0 is invalid for dim 0 of size 5");
    CHECK(kn_split(ctx, r, 2, 0, NULL, 4) == -1);
    CHECK_ERR(ctx, "kn_split: operand 'out' is NULL");
    CHECK(kn_split(ctx, r, 2, 0, NULL, 0) == 3);
    CHECK(kn_chunk(ctx, r, 3, 0, out, 4) == 3); /* ceil(5 / 3) = 2: pieces 2, 2, 1 */
    IS(out[1], KN_F32, 1, S(2), V(2, 3));
    IS(out[2], KN_F32, 1, S(1), V(4));
    CHECK(kn_chunk(ctx, kn_arange(ctx, KN_F32, 0, 6, 1), 4, 0, out, 4) == 3); /* ceil(6 / 4) = 2 */
    kn_tensor *t = kn_transpose(ctx, m23(ctx, KN_F32), 0, 1);
    CHECK(kn_chunk(ctx, t, 2, 1, out, 4) == 2);
    IS(out[1], KN_F32, 2, S(3, 1), V(4, 5, 6));
    CHECK(kn_chunk(ctx, kn_zeros(ctx, KN_F32, 2, S(0, 2)), 3, 0, out, 4) == 3);
    CHECK(out[2] && kn_shape(out[2])[0] == 0);
    CHECK(kn_chunk(ctx, r, 0, 0, out, 4) == -1);
    CHECK_ERR(ctx, "kn_chunk: chunks is 0");
    CHECK(kn_chunk(ctx, kn_scalar(ctx, 1.0), 1, 0, out, 4) == -1);
    CHECK_ERR(ctx, "kn_chunk: operand 'x' is 0-d");
    CHECK(kn_chunk(NULL, r, 1, 0, out, 4) == -1);
}

static void test_index(kn_ctx *ctx)
{
    kn_tensor *x = mk(ctx, KN_F32, 2, S(3, 2), V(1, 2, 3, 4, 5, 6));
    kn_tensor *i = mk(ctx, KN_I64, 1, S(3), V(2, 0, 2));
    IS(kn_index_select(ctx, x, 0, i), KN_F32, 2, S(3, 2), V(5, 6, 1, 2, 5, 6));
    IS(kn_index_select(ctx, kn_transpose(ctx, x, 0, 1), -1, i), KN_F32, 2, S(2, 3), V(5, 1, 5, 6, 2, 6));
    IS(kn_index_select(ctx, x, 1, mk(ctx, KN_I32, 0, NULL, V(1))), KN_F32, 2, S(3, 1), V(2, 4, 6));
    IS(kn_index_select(ctx, x, 0, kn_zeros(ctx, KN_I64, 1, S(0))), KN_F32, 2, S(0, 2), V(0));
    IS(kn_index_select(ctx, kn_scalar(ctx, 4.0), 0, mk(ctx, KN_I64, 1, S(1), V(0))), KN_F64, 0, NULL, V(4));
    CHECK(kn_index_select(ctx, x, 0, mk(ctx, KN_I64, 1, S(2), V(0, 3))) == NULL);
    CHECK(kn_last_status(ctx) == KN_EINDEX);
    CHECK_ERR(ctx, "kn_index_select: index 3 out of range for dim 0 of size 3");
    CHECK(kn_index_select(ctx, x, 0, mk(ctx, KN_I64, 1, S(1), V(-1))) == NULL);
    CHECK_ERR(ctx, "index -1 out of range");
    CHECK(kn_index_select(ctx, x, 0, mk(ctx, KN_F32, 1, S(1), V(0))) == NULL);
    CHECK_ERR(ctx, "kn_index_select: operand 'index' is f32: indices must be i64 or i32");
    CHECK(kn_index_select(ctx, x, 0, mk(ctx, KN_I64, 2, S(1, 1), V(0))) == NULL);
    CHECK_ERR(ctx, "operand 'index' has 2 dims");

    kn_tensor *g = mk(ctx, KN_F32, 2, S(2, 2), V(1, 2, 3, 4)), *gi = mk(ctx, KN_I64, 2, S(2, 2), V(0, 0, 1, 0));
    IS(kn_gather(ctx, g, 1, gi), KN_F32, 2, S(2, 2), V(1, 1, 4, 3));
    IS(kn_gather(ctx, kn_transpose(ctx, g, 0, 1), 0, mk(ctx, KN_I64, 2, S(1, 2), V(1, 0))), KN_F32, 2, S(1, 2),
       V(2, 3));
    IS(kn_gather(ctx, kn_scalar(ctx, 5.0), 0, kn_scalar_int(ctx, 0)), KN_F64, 0, NULL, V(5));
    CHECK(kn_gather(ctx, g, 1, i) == NULL);
    CHECK_ERR(ctx, "kn_gather: operand 'index' has 1 dims, x has 2");
    CHECK(kn_gather(ctx, g, 0, mk(ctx, KN_I64, 2, S(1, 3), V(0, 0, 0))) == NULL);
    CHECK_ERR(ctx, "kn_gather: operand 'index' dim 1: size 3 exceeds x's 2");

    kn_tensor *z = kn_zeros(ctx, KN_F32, 1, S(3));
    IS(kn_scatter_add(ctx, z, 0, mk(ctx, KN_I64, 1, S(4), V(0, 1, 0, 2)), mk(ctx, KN_F32, 1, S(4), V(1, 2, 3, 4))),
       KN_F32, 1, S(3), V(4, 2, 4));
    IS(z, KN_F32, 1, S(3), V(0, 0, 0)); /* not in place */
    IS(kn_scatter_add(ctx, kn_ones(ctx, KN_I64, 2, S(2, 3)), 1, mk(ctx, KN_I64, 2, S(2, 1), V(2, 0)),
                      mk(ctx, KN_I64, 2, S(2, 2), V(10, 20, 30, 40))),
       KN_I64, 2, S(2, 3), V(1, 1, 11, 31, 1, 1));
    CHECK(kn_scatter_add(ctx, z, 0, i, mk(ctx, KN_F64, 1, S(3), V(1, 2, 3))) == NULL);
    CHECK_ERR(ctx, "kn_scatter_add: operand 'src' is f64, x is f32");
    CHECK(kn_scatter_add(ctx, z, 0, i, mk(ctx, KN_F32, 1, S(2), V(1, 2))) == NULL);
    CHECK_ERR(ctx, "kn_scatter_add: operand 'index' dim 0: size 3 exceeds src's 2");
}

static void test_tri_onehot(kn_ctx *ctx)
{
    kn_tensor *x = mk(ctx, KN_F32, 2, S(3, 3), V(1, 2, 3, 4, 5, 6, 7, 8, 9));
    IS(kn_triu(ctx, x, 0), KN_F32, 2, S(3, 3), V(1, 2, 3, 0, 5, 6, 0, 0, 9));
    IS(kn_triu(ctx, x, 1), KN_F32, 2, S(3, 3), V(0, 2, 3, 0, 0, 6, 0, 0, 0));
    IS(kn_tril(ctx, x, -1), KN_F32, 2, S(3, 3), V(0, 0, 0, 4, 0, 0, 7, 8, 0));
    IS(kn_tril(ctx, kn_transpose(ctx, x, 0, 1), 0), KN_F32, 2, S(3, 3), V(1, 0, 0, 2, 5, 0, 3, 6, 9));
    IS(kn_tril(ctx, x, INT64_MAX), KN_F32, 2, S(3, 3), V(1, 2, 3, 4, 5, 6, 7, 8, 9));
    IS(kn_triu(ctx, x, INT64_MIN), KN_F32, 2, S(3, 3), V(1, 2, 3, 4, 5, 6, 7, 8, 9));
    kn_tensor *b = kn_reshape(ctx, kn_arange(ctx, KN_I64, 1, 13, 1), 3, S(2, 2, 3));
    IS(kn_tril(ctx, b, 0), KN_I64, 3, S(2, 2, 3), V(1, 0, 0, 4, 5, 0, 7, 0, 0, 10, 11, 0));
    IS(kn_triu(ctx, kn_ones(ctx, KN_BOOL, 2, S(2, 3)), -1), KN_BOOL, 2, S(2, 3), V(1, 1, 1, 1, 1, 1));
    CHECK(kn_triu(ctx, kn_ones(ctx, KN_F32, 1, S(3)), 0) == NULL);
    CHECK_ERR(ctx, "kn_triu: operand 'x' has 1 dims: needs 2 or more");

    kn_tensor *c = mk(ctx, KN_I64, 1, S(3), V(0, 2, 1));
    IS(kn_one_hot(ctx, c, -1), KN_I64, 2, S(3, 3), V(1, 0, 0, 0, 0, 1, 0, 1, 0));
    IS(kn_one_hot(ctx, kn_reshape(ctx, c, 2, S(3, 1)), 4), KN_I64, 3, S(3, 1, 4),
       V(1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0));
    IS(kn_one_hot(ctx, kn_scalar_int(ctx, 1), 2), KN_I64, 1, S(2), V(0, 1));
    IS(kn_one_hot(ctx, kn_zeros(ctx, KN_I64, 1, S(0)), 3), KN_I64, 2, S(0, 3), V(0));
    CHECK(kn_one_hot(ctx, c, 2) == NULL);
    CHECK_ERR(ctx, "kn_one_hot: operand 'index' holds 2: class values must be < num_classes 2");
    CHECK(kn_one_hot(ctx, mk(ctx, KN_I64, 1, S(2), V(0, -1)), 3) == NULL);
    CHECK_ERR(ctx, "kn_one_hot: operand 'index' holds -1: class values must be >= 0");
    CHECK(kn_one_hot(ctx, kn_zeros(ctx, KN_I64, 1, S(0)), -1) == NULL);
    CHECK_ERR(ctx, "kn_one_hot: operand 'index' is empty");
    CHECK(kn_one_hot(ctx, mk(ctx, KN_I32, 1, S(1), V(0)), 2) == NULL);
    CHECK_ERR(ctx, "kn_one_hot: operand 'index' is i32");
}

/* Naive reference for (B, M, K) @ (B, K, N), row-major. */
static void ref_bmm(int B, int M, int K, int N, const double *a, const double *b, double *out)
{
    for (int z = 0; z < B; z++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int k = 0; k < K; k++) s += a[(z * M + i) * K + k] * b[(z * K + k) * N + j];
                out[(z * M + i) * N + j] = s;
            }
}

static void test_matmul(kn_ctx *ctx)
{
    kn_tensor *v = mk(ctx, KN_F32, 1, S(3), V(1, 2, 3)), *m = m23(ctx, KN_F32); /* m (2, 3) */
    IS(kn_matmul(ctx, v, v), KN_F32, 0, NULL, V(14));
    IS(kn_matmul(ctx, m, v), KN_F32, 1, S(2), V(14, 32));
    IS(kn_matmul(ctx, mk(ctx, KN_F32, 1, S(2), V(1, -1)), m), KN_F32, 1, S(3), V(-3, -3, -3));
    IS(kn_matmul(ctx, m, kn_transpose(ctx, m, 0, 1)), KN_F32, 2, S(2, 2), V(14, 32, 32, 77));
    IS(kn_matmul(ctx, m23(ctx, KN_I64), mk(ctx, KN_I64, 2, S(3, 1), V(1, 1, 1))), KN_I64, 2, S(2, 1), V(6, 15));
    /* (2, 2, 3) @ (3, 2): folded into one (4, 3) @ (3, 2) */
    double a[12], b[6], want[8];
    for (int i = 0; i < 12; i++) a[i] = i - 5;
    for (int i = 0; i < 6; i++) b[i] = i * 0.5;
    ref_bmm(1, 4, 3, 2, a, b, want);
    kn_tensor *a3 = mk(ctx, KN_F32, 3, S(2, 2, 3), a), *b2 = mk(ctx, KN_F32, 2, S(3, 2), b);
    IS(kn_matmul(ctx, a3, b2), KN_F32, 3, S(2, 2, 2), want);
    IS(kn_matmul(ctx, a3, v), KN_F32, 2, S(2, 2), V(-22, -4, 14, 32));
    /* (2, 1, 2, 3) @ (2, 3, 2): batch dims broadcast to (2, 2) */
    double aa[24], bb[24], out[16];
    for (int z = 0; z < 2; z++)
        for (int y = 0; y < 2; y++) {
            memcpy(aa + (z * 2 + y) * 6, a + z * 6, 6 * sizeof *a);
            for (int k = 0; k < 6; k++) bb[(z * 2 + y) * 6 + k] = y * 6 + k;
        }
    ref_bmm(4, 2, 3, 2, aa, bb, out);
    IS(kn_matmul(ctx, kn_reshape(ctx, a3, 4, S(2, 1, 2, 3)), mk(ctx, KN_F32, 3, S(2, 3, 2), bb)), KN_F32, 4,
       S(2, 2, 2, 2), out);
    IS(kn_matmul(ctx, v, mk(ctx, KN_F32, 3, S(2, 3, 1), V(1, 1, 1, 0, 0, 1))), KN_F32, 2, S(2, 1), V(6, 3));
    IS(kn_matmul(ctx, kn_zeros(ctx, KN_F32, 2, S(2, 0)), kn_zeros(ctx, KN_F32, 2, S(0, 2))), KN_F32, 2, S(2, 2),
       V(0, 0, 0, 0));
    CHECK(kn_matmul(ctx, m, m) == NULL);
    CHECK_ERR(ctx, "kn_matmul: operand 'b' dim 0: expected 3 (a dim -1), got 2");
    CHECK(kn_matmul(ctx, m, m23(ctx, KN_F64)) == NULL);
    CHECK_ERR(ctx, "kn_matmul: operand 'b' is f64, a is f32");
    CHECK(kn_matmul(ctx, kn_scalar(ctx, 1.0), v) == NULL);
    CHECK_ERR(ctx, "kn_matmul: operand 'a' is 0-d");
    CHECK(kn_matmul(ctx, kn_zeros(ctx, KN_F32, 3, S(2, 1, 3)), kn_zeros(ctx, KN_F32, 3, S(3, 3, 1))) == NULL);
    CHECK_ERR(ctx, "kn_matmul: operand 'b' dim 0: batch size 3 does not broadcast with a dim 0 (2)");

    ref_bmm(2, 2, 3, 1, a, V(1, 0, -1, 2, 2, 2), want);
    IS(kn_bmm(ctx, a3, mk(ctx, KN_F32, 3, S(2, 3, 1), V(1, 0, -1, 2, 2, 2))), KN_F32, 3, S(2, 2, 1), want);
    CHECK(kn_bmm(ctx, a3, b2) == NULL);
    CHECK_ERR(ctx, "kn_bmm: operand 'b' has 2 dims: bmm needs 3");
    CHECK(kn_bmm(ctx, a3, kn_zeros(ctx, KN_F32, 3, S(3, 3, 1))) == NULL);
    CHECK_ERR(ctx, "kn_bmm: operand 'b' dim 0: expected 2 (a dim 0), got 3");
}

static void test_linear(kn_ctx *ctx)
{
    kn_tensor *x = m23(ctx, KN_F32), *w = mk(ctx, KN_F32, 2, S(2, 3), V(1, 0, 0, 1, 1, 1));
    kn_tensor *b = mk(ctx, KN_F32, 1, S(2), V(10, 20));
    IS(kn_linear(ctx, x, w, b), KN_F32, 2, S(2, 2), V(11, 26, 14, 35));
    IS(kn_linear(ctx, x, w, NULL), KN_F32, 2, S(2, 2), V(1, 6, 4, 15));
    IS(kn_linear(ctx, kn_reshape(ctx, x, 3, S(2, 1, 3)), w, b), KN_F32, 3, S(2, 1, 2), V(11, 26, 14, 35));
    IS(kn_linear(ctx, mk(ctx, KN_F32, 1, S(3), V(1, 2, 3)), w, b), KN_F32, 1, S(2), V(11, 26));
    IS(kn_linear(ctx, kn_transpose(ctx, kn_transpose(ctx, x, 0, 1), 0, 1), kn_contiguous(ctx, w), b), KN_F32, 2,
       S(2, 2), V(11, 26, 14, 35));
    CHECK(kn_linear(ctx, kn_zeros(ctx, KN_F32, 2, S(1, 784)), kn_zeros(ctx, KN_F32, 2, S(10, 512)), NULL) == NULL);
    CHECK_ERR(ctx, "kn_linear: operand 'w' dim 1: expected 784 (x dim -1), got 512");
    CHECK(kn_linear(ctx, x, w, mk(ctx, KN_F32, 1, S(3), V(1, 2, 3))) == NULL);
    CHECK_ERR(ctx, "kn_linear: operand 'b' (3) does not broadcast");
    CHECK(kn_linear(ctx, x, w, mk(ctx, KN_F64, 1, S(2), V(1, 2))) == NULL);
    CHECK_ERR(ctx, "kn_linear: operand 'b' is f64, x is f32");
    CHECK(kn_linear(ctx, x, NULL, b) == NULL);
    CHECK_ERR(ctx, "kn_linear: operand 'w' is NULL");
}

/* Every op's temporaries go with their scope. */
static void test_scope(kn_ctx *ctx)
{
    size_t tensors = kn_live_tensors(ctx), bytes = kn_live_bytes(ctx);
    kn_scope_begin(ctx);
    kn_tensor *x = m23(ctx, KN_F32), *pieces[3];
    kn_cumsum(ctx, kn_prod(ctx, x, 0, 0), 0);
    kn_argmax(ctx, kn_logsumexp(ctx, x, NULL, 0, 1), KN_NODIM, 0);
    kn_cat(ctx, (kn_tensor *[]){x, x, x}, 3, 1);
    kn_chunk(ctx, x, 3, 1, pieces, 3);
    kn_linear(ctx, x, x, NULL);
    kn_scope_end(ctx);
    CHECK(kn_live_tensors(ctx) == tensors && kn_live_bytes(ctx) == bytes);
}

int main(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    test_sum_mean(ctx);
    test_var_std_lse(ctx);
    test_prod(ctx);
    test_amax_amin(ctx);
    test_argmax(ctx);
    test_cumsum(ctx);
    test_reshape_view(ctx);
    test_dims_ops(ctx);
    test_slice_pad(ctx);
    test_cat_stack(ctx);
    test_split_chunk(ctx);
    test_index(ctx);
    test_tri_onehot(ctx);
    test_matmul(ctx);
    test_linear(ctx);
    test_scope(ctx);
    kn_ctx_free(ctx);
    TEST_END("shape");
}
