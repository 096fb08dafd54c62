/*
 * test.h — the whole test framework: checks that count, a summary line.
 *
 * A test program includes this once, calls CHECK* inside plain functions
 * and ends main with TEST_END(). Each program prints "NAME: P passed, F failed";
 * tests/run.sh adds them up.
 */
#ifndef KN_TEST_H
#define KN_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/kiln.h"

static int test_pass_, test_fail_;

#define CHECK(c) test_check_((c) != 0, __FILE__, __LINE__, #c)
#define CHECK_MSG(c, ...) \
    do { if (!test_check_((c) != 0, __FILE__, __LINE__, #c)) { printf("    "); printf(__VA_ARGS__); printf("\n"); } } while (0)

static inline int test_check_(int ok, const char *file, int line, const char *what)
{
    if (ok) test_pass_++;
    else {
        test_fail_++;
        printf("FAIL %s:%d: %s\n", file, line, what);
    }
    return ok;
}

/* |a - b| <= atol + rtol * |b|, NaN equal to NaN, infinities equal to themselves */
static inline int test_close(double a, double b, double rtol, double atol)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b)) return a == b;
    return fabs(a - b) <= atol + rtol * fabs(b);
}

/* The largest |a - b| / (1 + |b|) over the elements of a (of ctx ca) and b
 * (of cb), read as f64 in logical order; INFINITY if either is missing, the
 * sizes differ, a read fails or an element differs by NaN. */
static inline double test_rel_diff(kn_ctx *ca, kn_tensor *a, kn_ctx *cb, kn_tensor *b)
{
    int64_t n = a && b ? kn_numel(a) : -1;
    if (n < 0 || n != kn_numel(b)) return INFINITY;
    double *x = malloc((size_t)n * sizeof *x + 8), *y = malloc((size_t)n * sizeof *y + 8), m = 0;
    kn_tensor *a64 = kn_to(ca, a, KN_F64), *b64 = kn_to(cb, b, KN_F64);
    if (!x || !y || kn_read(ca, a64, x, (size_t)n * 8) || kn_read(cb, b64, y, (size_t)n * 8)) m = INFINITY;
    for (int64_t i = 0; i < n && m != INFINITY; i++) {
        double d = fabs(x[i] - y[i]) / (1 + fabs(y[i]));
        if (!(d <= m)) m = isnan(d) ? INFINITY : d;
    }
    free(x);
    free(y);
    return m;
}

/* Checks that an error is pending and its message contains want. */
#define CHECK_ERR(ctx, want) \
    do { \
        const char *m_ = kn_last_error(ctx); \
        CHECK_MSG(kn_last_status(ctx) != KN_OK && strstr(m_, (want)) != NULL, \
                  "expected error containing \"%s\", got \"%s\"", (want), m_); \
        kn_clear_error(ctx); \
    } while (0)

#define TEST_END(name) \
    do { \
        printf("%s: %d passed, %d failed\n", (name), test_pass_, test_fail_); \
        return test_fail_ != 0; \
    } while (0)

#endif
