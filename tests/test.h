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
