/*
 * vec_rt.c — the elementwise helpers of vec_rt.h.
 *
 * Each helper is a plain loop that the build's compiler vectorises; on
 * x86-64 with gcc or clang there are three copies (SSE2, the baseline;
 * AVX2; AVX-512), one picked per call by CPU detection, as gemm_rt.c picks
 * its kit. gcc's -O2 vectorises only loops that need no scalar epilogue,
 * so the loops here ask for its full vectoriser, and for libm calls
 * without errno (sqrtf, a branch otherwise); FP contraction is off
 * whatever the build says: each call is one operation anyway.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-math-errno", "fp-contract=off")
#endif

#include <math.h>
#include <string.h>

#include "ops.h"
#include "vec_rt.h"

/* the scalar dialect's max and min (targets/c/prelude.c): NaN if either is */
#define MAXF(a, b) ((((a) != (a)) | ((b) != (b))) ? NAN : (a) > (b) ? (a) : (b))
#define MINF(a, b) ((((a) != (a)) | ((b) != (b))) ? NAN : (a) < (b) ? (a) : (b))

#define LOOP(expr)                                                                                                     \
    for (int64_t i = 0; i < n; i++) d[i] = (expr);                                                                     \
    return 0

/* One copy of the vectorised helpers, every function attributed with ATTR. */
#define DEFINE_VEC(sfx, ATTR)                                                                                          \
    ATTR static int unary_##sfx(int op, float *restrict d, const float *restrict a, int64_t n)                        \
    {                                                                                                                  \
        switch (op) {                                                                                                  \
        case OP_NEG: LOOP(-a[i]);                                                                                      \
        case OP_SQRT: LOOP(sqrtf(a[i]));                                                                               \
        case OP_RECIP: LOOP(1 / a[i]);                                                                                 \
        case OP_ABS: LOOP(fabsf(a[i]));                                                                                \
        case OP_FLOOR: LOOP(floorf(a[i]));                                                                             \
        default: return -1;                                                                                            \
        }                                                                                                              \
    }                                                                                                                  \
    ATTR static int binary_##sfx(int op, float *restrict d, const float *restrict a, const float *restrict b,          \
                                 int64_t n)                                                                            \
    {                                                                                                                  \
        switch (op) {                                                                                                  \
        case OP_ADD: LOOP(a[i] + b[i]);                                                                                \
        case OP_SUB: LOOP(a[i] - b[i]);                                                                                \
        case OP_MUL: LOOP(a[i] * b[i]);                                                                                \
        case OP_DIV: LOOP(a[i] / b[i]);                                                                                \
        case OP_MAX: LOOP(MAXF(a[i], b[i]));                                                                           \
        case OP_MIN: LOOP(MINF(a[i], b[i]));                                                                           \
        default: return -1;                                                                                            \
        }                                                                                                              \
    }                                                                                                                  \
    ATTR static int compare_##sfx(int op, uint8_t *restrict d, const float *restrict a, const float *restrict b,      \
                                  int64_t n)                                                                           \
    {                                                                                                                  \
        switch (op) {                                                                                                  \
        case OP_CMPLT: LOOP((uint8_t)(a[i] < b[i]));                                                                   \
        case OP_CMPEQ: LOOP((uint8_t)(a[i] == b[i]));                                                                  \
        default: return -1;                                                                                            \
        }                                                                                                              \
    }                                                                                                                  \
    ATTR static void where_##sfx(float *restrict d, const uint8_t *restrict c, const float *restrict a,               \
                                 const float *restrict b, int64_t n)                                                   \
    {                                                                                                                  \
        for (int64_t i = 0; i < n; i++) d[i] = c[i] ? a[i] : b[i];                                                     \
    }                                                                                                                  \
    ATTR static void mask_##sfx(float *restrict d, const uint8_t *restrict c, int64_t n)                               \
    {                                                                                                                  \
        for (int64_t i = 0; i < n; i++) d[i] = (float)(c[i] != 0);                                                     \
    }                                                                                                                  \
    ATTR static void nonzero_##sfx(uint8_t *restrict d, const float *restrict a, int64_t n)                            \
    {                                                                                                                  \
        for (int64_t i = 0; i < n; i++) d[i] = a[i] != 0;                                                              \
    }                                                                                                                  \
    ATTR static float sum_##sfx(const float *restrict a, int64_t n)                                                   \
    {                                                                                                                  \
        float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                                         \
        int64_t i = 0;                                                                                                 \
        for (; i + 8 <= n; i += 8)                                                                                     \
            for (int j = 0; j < 8; j++) s[j] += a[i + j];                                                              \
        for (int j = 0; i < n; i++, j++) s[j] += a[i];                                                                 \
        return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));                                      \
    }

/* The baseline copy: the helpers no copy of an instruction set would speed
 * up (libm calls, copies) are in it alone. */
DEFINE_VEC(base, )

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define VEC_X86 1
DEFINE_VEC(avx2, __attribute__((target("avx2"))))
DEFINE_VEC(avx512, __attribute__((target("avx512f,avx512bw"))))
#endif

#ifdef VEC_X86
/* 2 avx512f+bw, 1 avx2, 0 the baseline; found once (a race writes the same value) */
static int isa(void)
{
    static int found = -1;
    if (found < 0) {
        int f = 0;
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) f = 2;
        else if (__builtin_cpu_supports("avx2")) f = 1;
        found = f;
    }
    return found;
}

#define PICK(fn, ...) (isa() == 2 ? fn##_avx512(__VA_ARGS__) : isa() == 1 ? fn##_avx2(__VA_ARGS__) : fn##_base(__VA_ARGS__))
#else
#define PICK(fn, ...) fn##_base(__VA_ARGS__)
#endif

int kn_rt_vunary(int op, float *d, const float *a, int64_t n)
{
    switch (op) { /* libm: as TinyCC's code calls it (prelude.c maps kn_expf ... to expf ...) */
    case OP_EXP: for (int64_t i = 0; i < n; i++) d[i] = expf(a[i]); return 0;
    case OP_LOG: for (int64_t i = 0; i < n; i++) d[i] = logf(a[i]); return 0;
    case OP_SIN: for (int64_t i = 0; i < n; i++) d[i] = sinf(a[i]); return 0;
    case OP_COS: for (int64_t i = 0; i < n; i++) d[i] = cosf(a[i]); return 0;
    case OP_TANH: for (int64_t i = 0; i < n; i++) d[i] = tanhf(a[i]); return 0;
    case OP_ERF: for (int64_t i = 0; i < n; i++) d[i] = erff(a[i]); return 0;
    default: return PICK(unary, op, d, a, n);
    }
}

int kn_rt_vbinary(int op, float *d, const float *a, const float *b, int64_t n)
{
    if (op == OP_POW) {
        for (int64_t i = 0; i < n; i++) d[i] = powf(a[i], b[i]);
        return 0;
    }
    return PICK(binary, op, d, a, b, n);
}

int kn_rt_vcompare(int op, uint8_t *d, const float *a, const float *b, int64_t n)
{
    return PICK(compare, op, d, a, b, n);
}

void kn_rt_vwhere(float *d, const uint8_t *c, const float *a, const float *b, int64_t n)
{
    PICK(where, d, c, a, b, n);
}

void kn_rt_vmask(float *d, const uint8_t *c, int64_t n) { PICK(mask, d, c, n); }

void kn_rt_vnonzero(uint8_t *d, const float *a, int64_t n) { PICK(nonzero, d, a, n); }

void kn_rt_vfill(float *d, float v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) d[i] = v;
}

void kn_rt_vcopy(void *d, int64_t ds, const void *s, int64_t ss, int64_t n, int size)
{
    if (ds == 1 && ss == 1) {
        memcpy(d, s, (size_t)n * (size_t)size);
        return;
    }
    if (size == 4) {
        uint32_t *o = d;
        const uint32_t *p = s;
        for (int64_t i = 0; i < n; i++) o[i * ds] = p[i * ss];
    } else if (size == 8) {
        uint64_t *o = d;
        const uint64_t *p = s;
        for (int64_t i = 0; i < n; i++) o[i * ds] = p[i * ss];
    } else {
        uint8_t *o = d;
        const uint8_t *p = s;
        for (int64_t i = 0; i < n; i++) o[i * ds] = p[i * ss];
    }
}

float kn_rt_vsum(const float *a, int64_t n) { return PICK(sum, a, n); }

float kn_rt_vaccmax(float acc, const float *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++) acc = ((acc == acc) & !(a[i] <= acc)) ? a[i] : acc;
    return acc;
}
