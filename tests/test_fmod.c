/*
 * test_fmod.c — kn_fmod against torch.fmod at its edge cases
 * (tests/ref/fmod_fixture.h, written by tests/ref/gen_fmod.py): signed zeros,
 * infinite dividends and divisors, zero divisors, NaN, exact multiples and
 * large quotients, huge divisors and random pairs, for f32, f64, i32 and i64;
 * eagerly on each eager backend (interp, tcc, c: kn_set_eager_backend) and
 * compiled on each backend. Every result must be torch's bit for bit (any
 * NaN for NaN): kiln's fmod is exact wherever |a / b| < 2^53. An integer
 * divisor of 0 fails, eager and compiled, with "integer division by
 * zero" (PyTorch raises); INT_MIN fmod -1 is 0 (PyTorch traps); a u8
 * divisor of 255 is not -1.
 */
#include <stdint.h>

#include "test.h"
#include "ref/fmod_fixture.h"

static const kn_backend backends[3] = {KN_BACKEND_INTERP, KN_BACKEND_TCC, KN_BACKEND_C};
static const char *bname[3] = {"interp", "tcc", "c"};

static kn_status fmod_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    (void)user, (void)nin, (void)nout;
    out[0] = kn_fmod(ctx, in[0], in[1]);
    return out[0] ? KN_OK : kn_last_status(ctx);
}

/* fmod(a, b) in ctx: eager (compiled 0), or through a kn_fn on backend be. NULL with the error set. */
static kn_tensor *run(kn_ctx *ctx, kn_tensor *a, kn_tensor *b, int compiled, kn_backend be)
{
    kn_tensor *in[2] = {a, b}, *out[1] = {NULL};
    if (!compiled) return fmod_body(ctx, NULL, in, 2, out, 1) == KN_OK ? out[0] : NULL;
    kn_compile_opts o = {.backend = be, .name = "fmod"};
    kn_fn *f = kn_compile(ctx, fmod_body, NULL, &o);
    kn_status s = kn_call(f, in, 2, out, 1);
    kn_fn_free(f);
    return s == KN_OK ? out[0] : NULL;
}

/* got is torch's want: NaN for NaN, else the same bits (so -0 for -0) */
static int same_f(double got, double want)
{
    if (isnan(want)) return isnan(got);
    return memcmp(&got, &want, sizeof got) == 0;
}

/* The fixture's rows of one float dtype through every way of running: one CHECK each. */
static void floats(int f64)
{
    int n = f64 ? (int)(sizeof fmod_f64 / sizeof *fmod_f64) : (int)(sizeof fmod_f32 / sizeof *fmod_f32);
    double a[256], b[256], want[256], got[256];
    for (int i = 0; i < n; i++) {
        double *v[3] = {&a[i], &b[i], &want[i]};
        for (int k = 0; k < 3; k++) {
            float x;
            uint32_t u = f64 ? 0 : fmod_f32[i][k];
            memcpy(&x, &u, 4);
            if (f64) memcpy(v[k], &fmod_f64[i][k], 8);
            else *v[k] = x;
        }
    }
    kn_dtype dt = f64 ? KN_F64 : KN_F32;
    for (int mode = 0; mode < 6; mode++) { /* 0..2: eager on backend mode; 3..5: compiled on backend mode - 3 */
        kn_ctx *ctx = kn_ctx_new(NULL);
        if (mode < 3) kn_set_eager_backend(ctx, backends[mode]);
        int64_t s = n;
        kn_tensor *ta = kn_to(ctx, kn_tensor_from(ctx, KN_F64, 1, &s, a), dt);
        kn_tensor *tb = kn_to(ctx, kn_tensor_from(ctx, KN_F64, 1, &s, b), dt);
        kn_tensor *y = run(ctx, ta, tb, mode >= 3, backends[mode % 3]);
        kn_tensor *y64 = y ? kn_to(ctx, y, KN_F64) : NULL;
        int bad = -1;
        if (y64 && kn_read(ctx, y64, got, (size_t)n * sizeof *got) == KN_OK)
            for (int i = 0; i < n && bad < 0; i++)
                if (!same_f(got[i], want[i])) bad = i;
        CHECK_MSG(y64 && bad < 0, "%s %s %s: %s fmod(%.17g, %.17g) = %.17g, torch %.17g", kn_dtype_name(dt),
                  mode < 3 ? "eager" : "compiled", bname[mode % 3], y64 ? "" : kn_last_error(ctx),
                  bad >= 0 ? a[bad] : 0, bad >= 0 ? b[bad] : 0, bad >= 0 ? got[bad] : 0, bad >= 0 ? want[bad] : 0);
        kn_ctx_free(ctx);
    }
}

/* The fixture's rows of i32 (i64 0) or i64 through every way of running, bit for bit. */
static void ints(int i64)
{
    int n = i64 ? (int)(sizeof fmod_i64 / sizeof *fmod_i64) : (int)(sizeof fmod_i32 / sizeof *fmod_i32);
    int64_t a[128], b[128], want[128], got[128];
    for (int i = 0; i < n; i++) {
        a[i] = i64 ? fmod_i64[i][0] : fmod_i32[i][0];
        b[i] = i64 ? fmod_i64[i][1] : fmod_i32[i][1];
        want[i] = i64 ? fmod_i64[i][2] : fmod_i32[i][2];
    }
    kn_dtype dt = i64 ? KN_I64 : KN_I32;
    for (int mode = 0; mode < 6; mode++) {
        kn_ctx *ctx = kn_ctx_new(NULL);
        if (mode < 3) kn_set_eager_backend(ctx, backends[mode]);
        int64_t s = n;
        kn_tensor *ta = kn_to(ctx, kn_tensor_from(ctx, KN_I64, 1, &s, a), dt);
        kn_tensor *tb = kn_to(ctx, kn_tensor_from(ctx, KN_I64, 1, &s, b), dt);
        kn_tensor *y = run(ctx, ta, tb, mode >= 3, backends[mode % 3]);
        kn_tensor *y64 = y ? kn_to(ctx, y, KN_I64) : NULL;
        int bad = -1;
        if (y64 && kn_read(ctx, y64, got, (size_t)n * sizeof *got) == KN_OK)
            for (int i = 0; i < n && bad < 0; i++)
                if (got[i] != want[i]) bad = i;
        CHECK_MSG(y64 && bad < 0, "%s %s %s: %s fmod(%lld, %lld) = %lld, torch %lld", kn_dtype_name(dt),
                  mode < 3 ? "eager" : "compiled", bname[mode % 3], y64 ? "" : kn_last_error(ctx),
                  bad >= 0 ? (long long)a[bad] : 0, bad >= 0 ? (long long)b[bad] : 0,
                  bad >= 0 ? (long long)got[bad] : 0, bad >= 0 ? (long long)want[bad] : 0);
        kn_ctx_free(ctx);
    }
}

/* What PyTorch cannot say: a zero integer divisor (it raises) is an error naming kn_fmod, eager and
 * compiled, also as a 0-d divisor; INT_MIN fmod -1 (it traps) is 0; a u8 255 divisor stays 255. */
static void int_edges(void)
{
    static const kn_dtype dts[3] = {KN_I32, KN_I64, KN_U8};
    for (int d = 0; d < 3; d++)
        for (int mode = 0; mode < 6; mode++) {
            kn_ctx *ctx = kn_ctx_new(NULL);
            kn_dtype dt = dts[d];
            if (mode < 3) kn_set_eager_backend(ctx, backends[mode]);
            int64_t s = 3, av[3] = {5, 7, 9}, bv[3] = {2, 0, 4};
            kn_tensor *a = kn_to(ctx, kn_tensor_from(ctx, KN_I64, 1, &s, av), dt);
            for (int scalar = 0; scalar < 2; scalar++) {
                kn_tensor *b = scalar ? kn_to(ctx, kn_scalar_int(ctx, 0), dt)
                                      : kn_to(ctx, kn_tensor_from(ctx, KN_I64, 1, &s, bv), dt);
                kn_tensor *y = run(ctx, a, b, mode >= 3, backends[mode % 3]);
                const char *want = mode < 3 ? "kn_fmod: integer division by zero" : "kn_call: kn_fmod: integer division by zero";
                CHECK_MSG(!y && kn_last_status(ctx) == KN_EINVAL && !strcmp(kn_last_error(ctx), want),
                          "%s %s %s, a %s zero divisor: expected \"%s\", got %d \"%s\"", kn_dtype_name(dt),
                          mode < 3 ? "eager" : "compiled", bname[mode % 3], scalar ? "0-d" : "1-d", want,
                          (int)kn_last_status(ctx), kn_last_error(ctx));
                kn_clear_error(ctx);
            }
            int64_t lo = dt == KN_I64 ? INT64_MIN : dt == KN_I32 ? INT32_MIN : 254, got[2] = {1, 1};
            int64_t xv[2] = {lo, lo + 1}, yv[2] = {dt == KN_U8 ? 255 : -1, dt == KN_U8 ? 255 : -1};
            int64_t w[2] = {dt == KN_U8 ? 254 : 0, 0};
            s = 2;
            kn_tensor *y = run(ctx, kn_to(ctx, kn_tensor_from(ctx, KN_I64, 1, &s, xv), dt),
                               kn_to(ctx, kn_tensor_from(ctx, KN_I64, 1, &s, yv), dt), mode >= 3, backends[mode % 3]);
            CHECK_MSG(y && kn_read(ctx, kn_to(ctx, y, KN_I64), got, sizeof got) == KN_OK && got[0] == w[0] && got[1] == w[1],
                      "%s %s %s: fmod(%lld, %lld) = %lld and fmod(%lld, %lld) = %lld, expected %lld and %lld: %s",
                      kn_dtype_name(dt), mode < 3 ? "eager" : "compiled", bname[mode % 3], (long long)xv[0],
                      (long long)yv[0], (long long)got[0], (long long)xv[1], (long long)yv[1], (long long)got[1],
                      (long long)w[0], (long long)w[1], kn_last_error(ctx));
            kn_ctx_free(ctx);
        }
}

int main(void)
{
    floats(0);
    floats(1);
    ints(0);
    ints(1);
    int_edges();
    TEST_END("fmod");
}
