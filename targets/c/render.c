/*
 * render.c — targets/c, scalar dialect: loop-IR kernels (ir.h) to one C99
 * translation unit that cc -std=gnu99 and TinyCC both compile.
 *
 * The text is a prelude of static inline helpers, then one function per
 * kernel, `void NAME(void **b)`, whose buffer i is b[i]. Codegen is from
 * tables, after tinygrad's renderer/cstyle.py: one row per primitive of C
 * templates (`ops`), one row per dtype of how its values are typed, loaded,
 * stored, rounded and converted (`dts`). A dialect for another C compiler
 * (CUDA) overrides rows, not code.
 *
 * Semantics are interp.c's, op by op:
 * - a value of dtype f32 is a float, f64 a double; f16 and bf16 values are
 *   floats rounded back to their dtype after every op (the interpreter
 *   stores every primitive's result in its dtype), so + - * / sqrt on them
 *   give the interpreter's bits exactly (double rounding through double is
 *   innocuous for these); transcendentals and pow use the value's precision
 *   where the interpreter uses double, so they differ by rounding: f64 calls
 *   libm; f32 (and f16, bf16) exp, log, tanh and erf call the prelude's
 *   kn_expf ... kn_erff (branch-free and call-free, so that cc -O3
 *   vectorises their loops without -ffast-math; <= 2 ulp, IEEE specials;
 *   under TinyCC, which vectorises nothing, they are libm's), the others
 *   libm's float functions;
 * - integers and bools compute in uint64 (two's complement wrap) and wrap
 *   back to their dtype after every op, as the interpreter's int64 kernels
 *   followed by dt_store_i do; division by zero and INT64_MIN / -1 give 0;
 * - max and min propagate NaN; a max accumulator takes a NaN and keeps it;
 * - a cast to an integer from a float truncates and saturates as dt_store;
 * - `where` is a C conditional, so only the chosen operand is evaluated:
 *   lowering relies on it to keep out-of-bounds loads of pad unexecuted;
 * - index expressions use floor division and the divisor-signed modulo.
 *
 * A statement's value is a DAG. Values it uses more than once become
 * `const` temporaries declared just before it, in post-order, so text grows
 * linearly. A temporary is evaluated whatever the `where`s choose, so only
 * values the statement evaluates unconditionally, or values with no load
 * below them (which cannot fault), get one; a shared value under a `where`
 * branch that loads renders inline at each use.
 *
 * No allocation: each statement's DAG is analysed in a fixed table on the
 * stack (DAG_MAX values); a larger statement renders without temporaries.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"

/* ---- per-dtype strings ---- */

/* %s is an operand (always an atom or parenthesised). */
typedef struct {
    const char *store; /* element type of a buffer */
    const char *value; /* C type of a value */
    const char *load;  /* buffer element -> value */
    const char *save;  /* value -> buffer element */
    const char *wrap;  /* an op's raw result -> value: rounding to f16/bf16, integer wrapping */
    const char *from_f; /* a float or double -> value, as dt_store */
    const char *fn;    /* libm suffix of a float dtype ("f" or ""), NULL for integers and bool */
} DtFmt;

static const DtFmt dts[KN_NDTYPES] = {
    [KN_F32] = {"float", "float", "%s", "%s", "%s", "(float)%s", "f"},
    [KN_F64] = {"double", "double", "%s", "%s", "%s", "(double)%s", ""},
    [KN_F16] = {"uint16_t", "float", "kn_h2f(%s)", "kn_f2h(%s)", "kn_rh(%s)", "kn_rh((float)%s)", "f"},
    [KN_BF16] = {"uint16_t", "float", "kn_b2f(%s)", "kn_f2b(%s)", "kn_rb(%s)", "kn_rb((float)%s)", "f"},
    [KN_I32] = {"int32_t", "int32_t", "%s", "%s", "(int32_t)(uint32_t)(%s)", "(int32_t)(uint32_t)kn_f2i(%s)", NULL},
    [KN_I64] = {"int64_t", "int64_t", "%s", "%s", "(int64_t)(%s)", "kn_f2i(%s)", NULL},
    [KN_BOOL] = {"uint8_t", "uint8_t", "(%s != 0)", "%s", "(%s != 0)", "(%s != 0)", NULL},
    [KN_U8] = {"uint8_t", "uint8_t", "%s", "%s", "(uint8_t)(%s)", "(uint8_t)kn_f2i(%s)", NULL},
};

/* ---- per-op templates ----
 * One row per elementwise primitive, and one per accumulating reduction
 * (the update of an accumulator). flt: for float dtypes, computed in the
 * value's C type; integer: for integers and bool, computed in int64/uint64
 * as interp.c's unary_i and binary_i (which leave an integer's exp, log,
 * ... unchanged); boolean: for bool where it differs from integer (min
 * and max of 0 and 1 are & and |). %0 %1 %2 are the operands, %f the
 * dtype's libm suffix, %a the accumulator. wrap: the result goes through
 * the dtype's wrap. Cast has no row: it depends on the pair of dtypes
 * (put_cast). */
typedef struct {
    uint8_t wrap;
    const char *flt, *integer, *boolean;
} OpFmt;

static const OpFmt ops[OP_COUNT] = {
    [OP_NEG] = {1, "(-%0)", "(0 - (uint64_t)%0)", NULL},
    [OP_EXP] = {1, "kn_exp%f(%0)", "%0", NULL},
    [OP_LOG] = {1, "kn_log%f(%0)", "%0", NULL},
    [OP_SQRT] = {1, "sqrt%f(%0)", "%0", NULL},
    [OP_RECIP] = {1, "(1 / %0)", "kn_irecip(%0)", NULL},
    [OP_SIN] = {1, "sin%f(%0)", "%0", NULL},
    [OP_COS] = {1, "cos%f(%0)", "%0", NULL},
    [OP_TANH] = {1, "kn_tanh%f(%0)", "%0", NULL},
    [OP_ERF] = {1, "kn_erf%f(%0)", "%0", NULL},
    [OP_ABS] = {1, "fabs%f(%0)", "kn_iabs(%0)", NULL},
    [OP_FLOOR] = {1, "floor%f(%0)", "%0", NULL},
    [OP_ADD] = {1, "(%0 + %1)", "((uint64_t)%0 + (uint64_t)%1)", NULL},
    [OP_SUB] = {1, "(%0 - %1)", "((uint64_t)%0 - (uint64_t)%1)", NULL},
    [OP_MUL] = {1, "(%0 * %1)", "((uint64_t)%0 * (uint64_t)%1)", NULL},
    [OP_DIV] = {1, "(%0 / %1)", "kn_idiv(%0, %1)", NULL},
    [OP_MAX] = {0, "kn_max%f(%0, %1)", "kn_imax(%0, %1)", "(%0 | %1)"}, /* one of the operands, or NaN */
    [OP_MIN] = {0, "kn_min%f(%0, %1)", "kn_imin(%0, %1)", "(%0 & %1)"},
    [OP_POW] = {1, "pow%f(%0, %1)", "kn_ipow(%0, %1)", NULL},
    [OP_CMPLT] = {0, "(%0 < %1)", "(%0 < %1)", NULL},
    [OP_CMPEQ] = {0, "(%0 == %1)", "(%0 == %1)", NULL},
    [OP_WHERE] = {0, "(%0 ? %1 : %2)", "(%0 ? %1 : %2)", NULL},
    /* integer accumulators are int64_t whatever their dtype (see put_acc) */
    [OP_SUM] = {1, "(%a + %0)", "(int64_t)((uint64_t)%a + (uint64_t)%0)", NULL},
    [OP_RMAX] = {0, "kn_accmax%f(%a, %0)", "kn_imax(%a, %0)", NULL},
};

/* An accumulator's start: float and integer. */
static const char *acc_init(unsigned op, int fl)
{
    if (op == OP_SUM) return "0";
    return fl ? "-INFINITY" : "INT64_MIN";
}

/* In pieces: ISO C99 compilers need take no string literal over 4095 bytes. */
static const char *const prelude[] = {
    "/* Generated by kiln (targets/c, scalar dialect): C99 for cc and TinyCC.\n"
    " * Values compute as kiln's interpreter does: f16 and bf16 in float, rounded\n"
    " * back after every op; integers in uint64, wrapped to their dtype after\n"
    " * every op. Buffers are restrict: in kiln's programs an output never\n"
    " * aliases an input or another output. */\n"
    "#include <math.h>\n"
    "#include <stdint.h>\n"
    "#include <string.h>\n"
    "\n"
    "/* helpers a kernel does not call are no warning */\n"
    "#if defined(__GNUC__) || defined(__clang__)\n"
    "#define KN_HELPER static inline __attribute__((unused))\n"
    "#else\n"
    "#define KN_HELPER static inline\n"
    "#endif\n"
    "\n"
    "/* index arithmetic: // is floor division, % takes the divisor's sign */\n"
    "KN_HELPER int64_t kn_floordiv(int64_t a, int64_t b)\n"
    "{\n"
    "    if (b == 0) return 0;\n"
    "    if (b == -1) return (int64_t)(0 - (uint64_t)a);\n"
    "    int64_t q = a / b;\n"
    "    return a % b != 0 && (a < 0) != (b < 0) ? q - 1 : q;\n"
    "}\n"
    "KN_HELPER int64_t kn_floormod(int64_t a, int64_t b)\n"
    "{\n"
    "    if (b == 0 || b == -1) return 0;\n"
    "    int64_t r = a % b;\n"
    "    return r != 0 && (r < 0) != (b < 0) ? r + b : r;\n"
    "}\n"
    "KN_HELPER int64_t kn_imax(int64_t a, int64_t b) { return a > b ? a : b; }\n"
    "KN_HELPER int64_t kn_imin(int64_t a, int64_t b) { return a < b ? a : b; }\n"
    "\n"
    "/* integer ops: truncating division, 0 for a zero divisor and INT64_MIN / -1 */\n"
    "KN_HELPER int64_t kn_idiv(int64_t a, int64_t b) { return b == 0 || (a == INT64_MIN && b == -1) ? 0 : a / b; }\n"
    "KN_HELPER int64_t kn_iabs(int64_t a) { return a < 0 ? (int64_t)(0 - (uint64_t)a) : a; }\n"
    "KN_HELPER int64_t kn_irecip(int64_t a) { return a == 1 ? 1 : a == -1 ? -1 : 0; }\n"
    "KN_HELPER int64_t kn_ipow(int64_t a, int64_t b)\n"
    "{\n"
    "    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;\n"
    "    uint64_t r = 1, x = (uint64_t)a;\n"
    "    for (; b; b >>= 1, x *= x)\n"
    "        if (b & 1) r *= x;\n"
    "    return (int64_t)r;\n"
    "}\n"
    "/* float -> integer: NaN is 0, saturating beyond +-9.2e18, else truncating */\n"
    "KN_HELPER int64_t kn_f2i(double v)\n"
    "{\n"
    "    return v != v ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;\n"
    "}\n"
    "\n"
    "/* max and min propagate NaN; a max accumulator takes a NaN and keeps it */\n"
    "KN_HELPER float kn_maxf(float a, float b) { return a != a || b != b ? NAN : a > b ? a : b; }\n"
    "KN_HELPER float kn_minf(float a, float b) { return a != a || b != b ? NAN : a < b ? a : b; }\n"
    "KN_HELPER double kn_max(double a, double b) { return a != a || b != b ? NAN : a > b ? a : b; }\n"
    "KN_HELPER double kn_min(double a, double b) { return a != a || b != b ? NAN : a < b ? a : b; }\n"
    "KN_HELPER float kn_accmaxf(float acc, float v) { return acc == acc && (v != v || v > acc) ? v : acc; }\n"
    "KN_HELPER double kn_accmax(double acc, double v) { return acc == acc && (v != v || v > acc) ? v : acc; }\n"
    "\n",
    "/* IEEE binary16 and bfloat16 <-> float, round to nearest even */\n"
    "KN_HELPER float kn_h2f(uint16_t h)\n"
    "{\n"
    "    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, man = h & 0x3ff, bits;\n"
    "    if (e == 0x1f) bits = sign | 0x7f800000u | (man << 13);\n"
    "    else if (e != 0) bits = sign | ((e + 112) << 23) | (man << 13);\n"
    "    else if (man == 0) bits = sign;\n"
    "    else {\n"
    "        int k = -1;\n"
    "        do { man <<= 1; k++; } while (!(man & 0x400));\n"
    "        bits = sign | ((uint32_t)(112 - k) << 23) | ((man & 0x3ff) << 13);\n"
    "    }\n"
    "    float f;\n"
    "    memcpy(&f, &bits, 4);\n"
    "    return f;\n"
    "}\n"
    "KN_HELPER uint16_t kn_f2h(float f)\n"
    "{\n"
    "    uint32_t x;\n"
    "    memcpy(&x, &f, 4);\n"
    "    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffffu;\n"
    "    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));\n"
    "    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);\n"
    "    if (ax < 0x38800000u) {\n"
    "        float a;\n"
    "        memcpy(&a, &ax, 4);\n"
    "        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));\n"
    "    }\n"
    "    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1);\n"
    "    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));\n"
    "}\n"
    "KN_HELPER float kn_b2f(uint16_t h)\n"
    "{\n"
    "    uint32_t bits = (uint32_t)h << 16;\n"
    "    float f;\n"
    "    memcpy(&f, &bits, 4);\n"
    "    return f;\n"
    "}\n"
    "KN_HELPER uint16_t kn_f2b(float f)\n"
    "{\n"
    "    uint32_t x;\n"
    "    memcpy(&x, &f, 4);\n"
    "    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);\n"
    "    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);\n"
    "}\n"
    "KN_HELPER float kn_rh(float f) { return kn_h2f(kn_f2h(f)); }\n"
    "KN_HELPER float kn_rb(float f) { return kn_b2f(kn_f2b(f)); }\n"
    "\n",
    "/* f32 exp, log, tanh, erf: branch-free, no calls, so cc -O3 vectorises loops\n"
    " * of them without -ffast-math; IEEE specials. Max error over all 2^32\n"
    " * inputs vs libm's double: 0.99, 0.83, 1.33, 1.50 ulp. */\n"
    "/* bits of a float and back through a union (C99 TC3 6.5.2.3), as macros:\n"
    " * TinyCC inlines nothing, and would call memcpy */\n"
    "union kn_fu { float f; uint32_t u; };\n"
    "#define KN_ASU(x) (((union kn_fu){.f = (x)}).u)\n"
    "#define KN_ASF(x) (((union kn_fu){.u = (x)}).f)\n"
    "/* c ? a : b. For gcc, on bits: a float ?: lets it sink an operand's\n"
    " * arithmetic into a branch, which -ftrapping-math keeps it from\n"
    " * if-converting, and the loop from vectorising; TinyCC takes the ?: */\n"
    "#ifdef __TINYC__\n"
    "#define KN_SEL(c, a, b) ((c) ? (a) : (b))\n"
    "#else\n"
    "KN_HELPER float kn_fsel(int c, float a, float b)\n"
    "{\n"
    "    uint32_t m = 0u - (uint32_t)(c != 0);\n"
    "    return KN_ASF((KN_ASU(a) & m) | (KN_ASU(b) & ~m));\n"
    "}\n"
    "#define KN_SEL(c, a, b) kn_fsel(c, a, b)\n"
    "#endif\n"
    "/* exp: n = rint(x / ln2) by the 1.5 * 2^23 shifter, r = x - n ln2 in two\n"
    " * Cody-Waite steps (n * C1 exact), e^r = 1 + r + r^2 P(r) (Cephes expf's\n"
    " * degree-5 minimax P), times 2^n as two exact powers of two so that a\n"
    " * subnormal result rounds once. Clamping x to [-104, 89] keeps n in\n"
    " * [-150, 129]: beyond, the product is 0 or inf, and NaN flows through. */\n"
    "KN_HELPER float kn_expf(float x)\n"
    "{\n"
    "    x = KN_SEL(x < -104.0f, -104.0f, x);\n"
    "    x = KN_SEL(x > 89.0f, 89.0f, x);\n"
    "    float z = x * 1.44269504f + 12582912.0f, n = z - 12582912.0f;\n"
    "    uint32_t m = KN_ASU(z) - 0x4b400000u + 256u; /* n + 256, in [106, 385] */\n"
    "    float r = x - n * 0.693359375f;\n"
    "    r = r - n * -2.12194440e-4f;\n"
    "    float p = 1.9875691500e-4f;\n"
    "    p = p * r + 1.3981999507e-3f;\n"
    "    p = p * r + 8.3334519073e-3f;\n"
    "    p = p * r + 4.1665795894e-2f;\n"
    "    p = p * r + 1.6666665459e-1f;\n"
    "    p = p * r + 5.0000001201e-1f;\n"
    "    p = 1.0f + (r + r * r * p);\n"
    "    uint32_t h = m >> 1; /* n = (h - 128) + (m - h - 128) */\n"
    "    return p * KN_ASF((h - 128u + 127u) << 23) * KN_ASF((m - h - 128u + 127u) << 23);\n"
    "}\n"
    "/* log: x = 2^e m, m in [sqrt(1/2), sqrt(2)) from the bits (subnormals scaled\n"
    " * by 2^23 first), f = m - 1, log(1+f) = f - f^2/2 + f^3 P(f) (Cephes logf's\n"
    " * degree-8 minimax P), + e ln2 in two Cody-Waite parts. */\n"
    "KN_HELPER float kn_logf(float x)\n"
    "{\n"
    "    int sub = x < 1.17549435e-38f;\n"
    "    uint32_t u = KN_ASU(KN_SEL(sub, x * 8388608.0f, x)) + (0x3f800000u - 0x3f3504f3u);\n"
    "    float e = (float)(int32_t)((u >> 23) - 127u - 23u * (uint32_t)sub);\n"
    "    float f = KN_ASF((u & 0x007fffffu) + 0x3f3504f3u) - 1.0f, z = f * f;\n"
    "    float p = 7.0376836292e-2f;\n"
    "    p = p * f - 1.1514610310e-1f;\n"
    "    p = p * f + 1.1676998740e-1f;\n"
    "    p = p * f - 1.2420140846e-1f;\n"
    "    p = p * f + 1.4249322787e-1f;\n"
    "    p = p * f - 1.6668057665e-1f;\n"
    "    p = p * f + 2.0000714765e-1f;\n"
    "    p = p * f - 2.4999993993e-1f;\n"
    "    p = p * f + 3.3333331174e-1f;\n"
    "    float y = f * z * p + e * -2.12194440e-4f - 0.5f * z;\n"
    "    y = (f + y) + e * 0.693359375f;\n"
    "    y = KN_SEL(x == 0.0f, -INFINITY, y);\n"
    "    y = KN_SEL(x < 0.0f, NAN, y);\n"
    "    return KN_SEL(x == INFINITY || x != x, x, y);\n"
    "}\n"
    "\n",
    "/* tanh, on |x| then x's sign: |x| < 0.625, a + a^3 P(a^2) (Cephes tanhf's degree-4 minimax P);\n"
    " * else 1 - 2 / (e^2a + 1), which saturates to 1 as e^2a overflows. */\n"
    "KN_HELPER float kn_tanhf(float x)\n"
    "{\n"
    "    float a = KN_ASF(KN_ASU(x) & 0x7fffffffu), z = a * a;\n"
    "    float p = -5.70498872745e-3f;\n"
    "    p = p * z + 2.06390887954e-2f;\n"
    "    p = p * z - 5.37397155531e-2f;\n"
    "    p = p * z + 1.33314422036e-1f;\n"
    "    p = p * z - 3.33332819422e-1f;\n"
    "    float s = a + a * z * p, l = 1.0f - 2.0f / (kn_expf(a + a) + 1.0f);\n"
    "    return KN_ASF(KN_ASU(KN_SEL(a < 0.625f, s, l)) | (KN_ASU(x) & 0x80000000u));\n"
    "}\n"
    "/* erf: |x| < 1, |x| + |x| Q(x^2) with Q a degree-6 minimax fit (Lawson) of\n"
    " * erf(x)/x - 1; else 1 - e^P(|x|) with P a degree-7 fit of\n"
    " * log(erfc) on [1, 4], weighted by erfc/erf (the result's relative error);\n"
    " * |x| is clamped to 4, where erf is 1 in f32; then x's sign. */\n"
    "KN_HELPER float kn_erff(float x)\n"
    "{\n"
    "    float a = KN_ASF(KN_ASU(x) & 0x7fffffffu), s = a * a;\n"
    "    float q = 7.889142580e-05f;\n"
    "    q = q * s - 8.020849200e-04f;\n"
    "    q = q * s + 5.189536139e-03f;\n"
    "    q = q * s - 2.685444430e-02f;\n"
    "    q = q * s + 1.128360033e-01f;\n"
    "    q = q * s - 3.761262596e-01f;\n"
    "    q = q * s + 1.283791661e-01f;\n"
    "    float small = a + a * q;\n"
    "    float t = KN_SEL(a > 4.0f, 4.0f, a);\n"
    "    float p = -2.169760228e-05f;\n"
    "    p = p * t + 4.414724826e-04f;\n"
    "    p = p * t - 4.205283709e-03f;\n"
    "    p = p * t + 2.521033771e-02f;\n"
    "    p = p * t - 1.084220931e-01f;\n"
    "    p = p * t - 6.332163811e-01f;\n"
    "    p = p * t - 1.129580259e+00f;\n"
    "    p = p * t + 1.884672820e-04f;\n"
    "    float l = 1.0f - kn_expf(p);\n"
    "    return KN_ASF(KN_ASU(KN_SEL(a < 1.0f, small, l)) | (KN_ASU(x) & 0x80000000u));\n"
    "}\n"
    "/* TinyCC neither inlines nor vectorises, and its code for the above runs\n"
    " * 4-6x slower than libm's: there, kernels call libm */\n"
    "#ifdef __TINYC__\n"
    "#define kn_expf expf\n"
    "#define kn_logf logf\n"
    "#define kn_tanhf tanhf\n"
    "#define kn_erff erff\n"
    "#endif\n"
    "/* f64 keeps libm */\n"
    "KN_HELPER double kn_exp(double x) { return exp(x); }\n"
    "KN_HELPER double kn_log(double x) { return log(x); }\n"
    "KN_HELPER double kn_tanh(double x) { return tanh(x); }\n"
    "KN_HELPER double kn_erf(double x) { return erf(x); }\n"
    "\n",
    "/* Philox 4x32-10: element c of stream key is block c / 4, lane c % 4;\n"
    " * its top 24 bits give a float uniform in [0, 1) */\n"
    "KN_HELPER float kn_rand(uint64_t key, int64_t c)\n"
    "{\n"
    "    uint64_t ctr = (uint64_t)c >> 2;\n"
    "    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;\n"
    "    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);\n"
    "    for (int r = 0; r < 10; r++) {\n"
    "        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;\n"
    "        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;\n"
    "        c1 = (uint32_t)p1;\n"
    "        c3 = (uint32_t)p0;\n"
    "        c0 = n0;\n"
    "        c2 = n2;\n"
    "        k0 += 0x9E3779B9u;\n"
    "        k1 += 0xBB67AE85u;\n"
    "    }\n"
    "    uint32_t lane = (uint32_t)c & 3, w = lane == 0 ? c0 : lane == 1 ? c1 : lane == 2 ? c2 : c3;\n"
    "    return (float)(w >> 8) * (1.0f / 16777216.0f);\n"
    "}\n",
};

/* ---- output ---- */

typedef struct {
    char *buf;
    size_t cap, len; /* len: what the whole text needs so far */
} Out;

static void put(Out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->len < o->cap ? o->buf + o->len : NULL, o->len < o->cap ? o->cap - o->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) o->len += (size_t)n;
}

static void put_str(Out *o, const char *s)
{
    for (; *s; s++, o->len++)
        if (o->len < o->cap) o->buf[o->len] = *s;
}

static void put_char(Out *o, char c)
{
    if (o->len < o->cap) o->buf[o->len] = c;
    o->len++;
}

/* The text of fmt up to its "%s", or after it (after != 0): a one-operand
 * format of the dtype table split around its operand. */
static void put_part(Out *o, const char *fmt, int after)
{
    const char *s = strstr(fmt, "%s");
    if (after) put_str(o, s + 2);
    else
        for (; fmt < s; fmt++) put_char(o, *fmt);
}

/* The same, less the outer parentheses of a format "(...%s...)" if strip. */
static void put_part_strip(Out *o, const char *fmt, int after, int strip)
{
    const char *s = strstr(fmt, "%s");
    if (!strip || fmt[0] != '(' || fmt[strlen(fmt) - 1] != ')' || strchr(fmt + 1, '(') || strchr(s, ')') != fmt + strlen(fmt) - 1)
        put_part(o, fmt, after);
    else if (after)
        for (s += 2; s[1]; s++) put_char(o, *s);
    else
        for (fmt++; fmt < s; fmt++) put_char(o, *fmt);
}

/* ---- index expressions ----
 * Loop variables count up from 0, so a sum of non-negative terms is
 * non-negative and its floor division or modulo by a positive constant is
 * C's / and %; anything else goes through kn_floordiv and kn_floormod. */

static int nonneg(const ExprTable *t, ExprId e)
{
    const ExprNode *x = expr_node(t, e);
    int64_t c;
    if (!x) return 0;
    switch (x->kind) {
    case EX_CONST: return x->c >= 0;
    case EX_SYM: return 1;
    case EX_MUL:
    case EX_ADD:
        if (x->kind == EX_MUL ? x->c <= 0 : x->c < 0) return 0;
        for (int i = 0; i < x->n; i++)
            if (!nonneg(t, x->args[i])) return 0;
        return 1;
    case EX_FLOORDIV: return expr_as_const(t, x->args[1], &c) && c > 0 && nonneg(t, x->args[0]);
    case EX_MOD: return expr_as_const(t, x->args[1], &c) && c > 0;
    case EX_MAX: return nonneg(t, x->args[0]) || nonneg(t, x->args[1]);
    default: return nonneg(t, x->args[0]) && nonneg(t, x->args[1]);
    }
}

static void put_int(Out *o, int64_t v, int paren)
{
    if (v == INT64_MIN) put_str(o, "INT64_MIN");
    else if (v < 0 && paren) put(o, "(%lld)", (long long)v);
    else put(o, "%lld", (long long)v);
}

static void put_index(Out *o, const ExprTable *t, ExprId e, int paren);

/* coef * f[0] * ... as a term of a sum: "s0*4", "- s0*4" unless first */
static void put_term(Out *o, const ExprTable *t, int64_t coef, const ExprId *f, int n, int first)
{
    int neg = coef < 0 && coef != INT64_MIN;
    if (!first) put_str(o, neg ? " - " : " + ");
    else if (neg) put_str(o, "-");
    for (int i = 0; i < n; i++) {
        if (i) put_char(o, '*');
        put_index(o, t, f[i], 1);
    }
    if (coef != 1 && coef != -1) put_char(o, '*'), put_int(o, neg ? -coef : coef, 1);
}

/* e as a C int64 expression; paren: it must be an atom (parenthesised). */
static void put_index(Out *o, const ExprTable *t, ExprId e, int paren)
{
    const ExprNode *x = expr_node(t, e);
    int64_t c;
    if (!x) {
        put_str(o, "KN_BAD_INDEX"); /* does not compile: a broken kernel never runs */
        return;
    }
    switch (x->kind) {
    case EX_CONST: put_int(o, x->c, paren); break;
    case EX_SYM: put(o, "s%lld", (long long)x->c); break;
    case EX_MUL:
        if (paren) put_char(o, '(');
        put_term(o, t, x->c, x->args, x->n, 1);
        if (paren) put_char(o, ')');
        break;
    case EX_ADD:
        if (paren) put_char(o, '(');
        for (int i = 0; i < x->n; i++) {
            const ExprNode *y = expr_node(t, x->args[i]);
            if (y && y->kind == EX_MUL) put_term(o, t, y->c, y->args, y->n, i == 0);
            else put_term(o, t, 1, &x->args[i], 1, i == 0);
        }
        if (x->c > 0) put(o, " + %lld", (long long)x->c);
        else if (x->c == INT64_MIN) put_str(o, " + INT64_MIN");
        else if (x->c < 0) put(o, " - %lld", -(long long)x->c);
        if (paren) put_char(o, ')');
        break;
    case EX_FLOORDIV:
    case EX_MOD:
        if (expr_as_const(t, x->args[1], &c) && c > 0 && nonneg(t, x->args[0])) {
            put_char(o, '(');
            put_index(o, t, x->args[0], 1);
            put(o, " %c %lld)", x->kind == EX_MOD ? '%' : '/', (long long)c);
            break;
        }
        /* fall through */
    default:
        put_str(o, x->kind == EX_FLOORDIV ? "kn_floordiv(" : x->kind == EX_MOD ? "kn_floormod(" :
                   x->kind == EX_MAX ? "kn_imax(" : "kn_imin(");
        put_index(o, t, x->args[0], 0);
        put_str(o, ", ");
        put_index(o, t, x->args[1], 0);
        put_char(o, ')');
    }
}

/* ---- constants ---- */

/* v as a float (suffix "f") or double literal: the shortest that reads back. */
static void put_real(Out *o, double v, int is_float)
{
    char s[40];
    if (isnan(v)) {
        put_str(o, "NAN");
        return;
    }
    if (isinf(v)) {
        put_str(o, v < 0 ? "(-INFINITY)" : "INFINITY");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(s, sizeof s, "%.*g", p, v);
        if (is_float ? (double)strtof(s, NULL) == v : strtod(s, NULL) == v) break;
    }
    if (!strpbrk(s, ".e")) strcat(s, ".0");
    if (v < 0 || (v == 0 && signbit(v))) put(o, "(%s%s)", s, is_float ? "f" : "");
    else put(o, "%s%s", s, is_float ? "f" : "");
}

/* A constant of dtype dt, as the interpreter stores it (dt_store). */
static void put_const(Out *o, kn_dtype dt, double v)
{
    switch (dt) {
    case KN_F32: put_real(o, (float)v, 1); break;
    case KN_F64: put_real(o, v, 0); break;
    case KN_F16: put_real(o, dt_half_to_float(dt_float_to_half((float)v)), 1); break;
    case KN_BF16: put_real(o, dt_bf16_to_float(dt_float_to_bf16((float)v)), 1); break;
    case KN_BOOL: put_str(o, v != 0 ? "1" : "0"); break;
    case KN_I32:
        if (v == -2147483648.0) put_str(o, "INT32_MIN");
        else put_int(o, (int64_t)v, 1);
        break;
    default: put_int(o, (int64_t)v, 1); break; /* i64, u8: ir_const keeps them in range */
    }
}

/* ---- a statement's value DAG ---- */

#define DAG_MAX 2048   /* values of one statement that are analysed; beyond, no temporaries */
#define DAG_SLOTS 4096 /* a power of two, twice DAG_MAX */

typedef struct {
    IrRef ref;
    uint8_t uses;    /* edges into it in the statement, counted up to 2 */
    uint8_t load;    /* it is or uses a load */
    uint8_t uncond;  /* evaluated whatever the wheres choose */
    uint8_t visited; /* by the temporaries pass */
    int temp;        /* its temporary's number, or -1 */
} Val;

typedef struct {
    uint16_t slot[DAG_SLOTS]; /* 1 + index into v; 0 = empty */
    Val v[DAG_MAX];
    int n, full;
} Dag;

typedef struct {
    Out *o;
    const Kernel *k;
    Dag *d;
    int ntemps;       /* temporaries declared in this kernel so far */
    uint8_t *bufused; /* per buffer (up to MAX_BUFS) */
    uint8_t *accread; /* per accumulator (up to MAX_ACCS) */
    IrRef unrounded;  /* a value stored to f16 or bf16: the store rounds it, so it need not */
} R;

#define MAX_BUFS 256 /* buffers whose use is tracked; beyond, all count as used */
#define MAX_ACCS 256

static void dag_reset(Dag *d)
{
    memset(d->slot, 0, sizeof d->slot);
    d->n = d->full = 0;
}

/* The entry of ref, added if add; NULL if absent or the table is full. */
static Val *dag_find(Dag *d, IrRef ref, int add)
{
    uint32_t i = (ref * 2654435761u) & (DAG_SLOTS - 1);
    for (; d->slot[i]; i = (i + 1) & (DAG_SLOTS - 1))
        if (d->v[d->slot[i] - 1].ref == ref) return &d->v[d->slot[i] - 1];
    if (!add || d->n == DAG_MAX) {
        if (add) d->full = 1;
        return NULL;
    }
    Val *v = &d->v[d->n++];
    memset(v, 0, sizeof *v);
    v->ref = ref;
    v->temp = -1;
    d->slot[i] = (uint16_t)d->n;
    return v;
}

/* The node r names if it is a value older than its user (a broken kernel's
 * cycles end here), else NULL. */
static const IrNode *value_at(const Kernel *k, IrRef r, IrRef user)
{
    if (r == 0 || r >= user || r >= k->n) return NULL;
    const IrNode *x = &k->nodes[r];
    return x->kind >= IR_CONST && x->kind < IR_NKINDS ? x : NULL;
}

static int nops(const IrNode *x)
{
    return x->kind == IR_OP && x->op < OP_COUNT ? kn_opinfo[x->op].nsrc : 0;
}

static IrRef operand(const IrNode *x, int i) { return i == 0 ? x->a : i == 1 ? x->b : x->c; }

/* Counts uses and finds loads below each value, depth first. */
static Val *dag_walk(R *r, IrRef ref, IrRef user, int depth)
{
    const IrNode *x = value_at(r->k, ref, user);
    Val *v = x && depth <= IR_MAX_DEPTH ? dag_find(r->d, ref, 1) : NULL;
    if (!v) return NULL;
    if (v->uses++) {
        v->uses = 2;
        return v;
    }
    v->load = x->kind == IR_LOAD;
    for (int i = 0; i < nops(x); i++) {
        const Val *c = dag_walk(r, operand(x, i), ref, depth + 1);
        if (c && c->load) v->load = 1;
    }
    return v;
}

/* Marks what is evaluated whatever the wheres choose: all but their branches. */
static void dag_uncond(R *r, IrRef ref, IrRef user)
{
    const IrNode *x = value_at(r->k, ref, user);
    Val *v = x ? dag_find(r->d, ref, 0) : NULL;
    if (!v || v->uncond) return;
    v->uncond = 1;
    for (int i = 0; i < nops(x); i++)
        if (!(x->op == OP_WHERE && i > 0)) dag_uncond(r, operand(x, i), ref);
}

/* Analyses the value of one statement; 0 if it is too large for the table. */
static int dag_build(R *r, IrRef root, IrRef stmt)
{
    dag_reset(r->d);
    dag_walk(r, root, stmt, 0);
    if (r->d->full) return 0;
    dag_uncond(r, root, stmt);
    return 1;
}

/* Worth a temporary and safe to evaluate before the statement. */
static int hoist(const R *r, const Val *v)
{
    const IrNode *x = &r->k->nodes[v->ref];
    const ExprNode *e;
    if (v->uses < 2 || (v->load && !v->uncond)) return 0;
    switch (x->kind) {
    case IR_CONST:
    case IR_ACCVAL: return 0;
    case IR_INDEX: return (e = expr_node(r->k->ex, x->index)) && e->kind != EX_SYM && e->kind != EX_CONST;
    default: return 1;
    }
}

/* ---- values ---- */

static void put_value(R *r, IrRef ref, IrRef user, int depth, int bare);

/* Parentheses: every template writes an atom or a parenthesised
 * expression, so operands nest safely; where a place delimits its operand
 * anyway (a call's argument, an assignment's right side), the operand's
 * outer parentheses are dropped: it is written "bare". */

/* The placeholder at `at` in template t (2 bytes) is delimited: after "("
 * or ", ", before ")" or ",". */
static int delimited(const char *t, const char *at)
{
    int before = (at > t && at[-1] == '(') || (at - t >= 2 && at[-2] == ',' && at[-1] == ' ');
    return before && (at[2] == ')' || at[2] == ',');
}

/* May the operand of a "%s" format fmt be bare, fmt itself being written
 * bare or not? */
static int bare_in(const char *fmt, int bare)
{
    const char *at = strstr(fmt, "%s");
    return strcmp(fmt, "%s") == 0 ? bare : delimited(fmt, at);
}

/* t is "(...)" with its first parenthesis closed by its last. */
static int enclosed(const char *t)
{
    size_t n = strlen(t);
    int depth = 0;
    if (n < 2 || t[0] != '(' || t[n - 1] != ')') return 0;
    for (size_t i = 0; i + 1 < n; i++)
        if ((depth += t[i] == '(' ? 1 : t[i] == ')' ? -1 : 0) == 0) return 0;
    return 1;
}

/* A template of the op table: %0 %1 %2 operands, %f libm suffix, %a acc. */
static void put_tmpl(R *r, const char *t, const IrNode *x, IrRef self, int depth, int acc, int bare)
{
    const char *fn = dts[x->dtype < KN_NDTYPES ? x->dtype : 0].fn, *p = t, *end = t + strlen(t);
    if (bare && enclosed(t)) p++, end--;
    for (; p < end; p++) {
        if (*p != '%') {
            put_char(r->o, *p);
            continue;
        }
        if (p[1] == 'f') put_str(r->o, fn ? fn : "");
        else if (p[1] == 'a') put(r->o, "a%d", acc);
        else put_value(r, operand(x, p[1] - '0'), self, depth + 1, delimited(t, p));
        p++;
    }
}

/* cast: as interp.c, through double (dt_load, dt_store) when either side
 * is a float, else through int64 (dt_load_i, dt_store_i) */
static void put_cast(R *r, const IrNode *x, IrRef self, int depth, int bare)
{
    const IrNode *s = value_at(r->k, x->a, self);
    kn_dtype to = (kn_dtype)x->dtype, from = s ? (kn_dtype)s->dtype : KN_F32;
    int ffrom = dt_is_float(from), via_double = !ffrom && dt_is_float(to) && to != KN_F64;
    const char *fmt = ffrom || dt_is_float(to) ? dts[to].from_f : dts[to].wrap;
    if (self == r->unrounded && (to == KN_F16 || to == KN_BF16)) fmt = "(float)%s";
    put_part(r->o, fmt, 0);
    if (via_double) put_str(r->o, "(double)");
    put_value(r, x->a, self, depth + 1, !via_double && bare_in(fmt, bare));
    put_part(r->o, fmt, 1);
}

static void put_op(R *r, const IrNode *x, IrRef self, int depth, int bare)
{
    kn_dtype dt = (kn_dtype)x->dtype;
    if (x->op == OP_CAST) {
        put_cast(r, x, self, depth, bare);
        return;
    }
    if (nops(x) == 0 || !ops[x->op].flt) {
        put_str(r->o, "KN_BAD_OP"); /* does not compile */
        return;
    }
    /* a compare's or where's operand dtype decides: the last operand's */
    const IrNode *last = value_at(r->k, operand(x, nops(x) - 1), self);
    int fl = last ? dt_is_float((kn_dtype)last->dtype) : dt_is_float(dt);
    const OpFmt *f = &ops[x->op];
    const char *t = fl ? f->flt : last && last->dtype == KN_BOOL && f->boolean ? f->boolean : f->integer;
    int wrap = f->wrap && !(self == r->unrounded && (dt == KN_F16 || dt == KN_BF16));
    if (wrap) put_part(r->o, dts[dt].wrap, 0);
    put_tmpl(r, t, x, self, depth, 0, wrap ? bare_in(dts[dt].wrap, bare) : bare);
    if (wrap) put_part(r->o, dts[dt].wrap, 1);
}

/* Value ref used by user (a statement or an older value): an atom, or
 * without outer parentheses if bare. */
static void put_value(R *r, IrRef ref, IrRef user, int depth, int bare)
{
    const IrNode *x = value_at(r->k, ref, user);
    const Val *v = x && !r->d->full ? dag_find(r->d, ref, 0) : NULL;
    if (!x || depth > IR_MAX_DEPTH || x->dtype >= KN_NDTYPES) {
        put_str(r->o, "KN_BAD_VALUE"); /* does not compile: a broken kernel never runs */
        return;
    }
    if (v && v->temp >= 0) {
        put(r->o, "t%d", v->temp);
        return;
    }
    switch (x->kind) {
    case IR_CONST: put_const(r->o, (kn_dtype)x->dtype, x->imm); break;
    case IR_LOAD:
        put_part_strip(r->o, dts[x->dtype].load, 0, bare);
        put(r->o, "b%d[", (int)x->buf);
        put_index(r->o, r->k->ex, x->index, 0);
        put_char(r->o, ']');
        put_part_strip(r->o, dts[x->dtype].load, 1, bare);
        break;
    case IR_ACCVAL: /* integer accumulators are int64_t: wrapped to their dtype */
        if (dt_is_float((kn_dtype)x->dtype)) put(r->o, "a%d", (int)x->var);
        else put_part(r->o, dts[x->dtype].wrap, 0), put(r->o, "a%d", (int)x->var), put_part(r->o, dts[x->dtype].wrap, 1);
        break;
    case IR_INDEX: put_index(r->o, r->k->ex, x->index, 1); break;
    case IR_RAND:
        put(r->o, "kn_rand(UINT64_C(%llu), ", (unsigned long long)x->seed);
        put_index(r->o, r->k->ex, x->index, 0);
        put_char(r->o, ')');
        break;
    default: put_op(r, x, ref, depth, bare); break;
    }
}

static void indent(Out *o, int level) { put(o, "%*s", 4 * level, ""); }

/* The temporaries the statement's value needs, children first. */
static void put_temps(R *r, IrRef ref, IrRef user, int level)
{
    const IrNode *x = value_at(r->k, ref, user);
    Val *v = x ? dag_find(r->d, ref, 0) : NULL;
    if (!v || v->visited) return;
    v->visited = 1;
    for (int i = 0; i < nops(x); i++) put_temps(r, operand(x, i), ref, level);
    if (!hoist(r, v)) return;
    indent(r->o, level);
    put(r->o, "const %s t%d = ", dts[x->dtype].value, r->ntemps);
    put_value(r, ref, user, 0, 1);
    put_str(r->o, ";\n");
    v->temp = r->ntemps++;
}

/* Analyses value (of statement stmt) and declares its temporaries. */
static void begin_value(R *r, IrRef value, IrRef stmt, int level)
{
    if (dag_build(r, value, stmt)) put_temps(r, value, stmt, level);
}

/* ---- statements ---- */

static const char *const loop_kinds[] = {"serial", "parallel", "vector", "unroll", "gpu_block", "gpu_thread"};

static void put_block(R *r, IrRef s, int level);

static void put_loop(R *r, const IrNode *x, int level)
{
    indent(r->o, level);
    put(r->o, "for (int64_t s%d = 0; s%d < ", (int)x->var, (int)x->var);
    put_index(r->o, r->k->ex, x->index, 0);
    put(r->o, "; s%d++) {", (int)x->var);
    if (x->dtype == LOOP_VECTOR || x->dtype == LOOP_UNROLL) /* parallel and vector code: later passes */
        put(r->o, " /* %s(%u): serial in this dialect */", loop_kinds[x->dtype], (unsigned)x->width);
    else if (x->dtype != LOOP_SERIAL && x->dtype <= LOOP_GPU_THREAD)
        put(r->o, " /* %s: serial in this dialect */", loop_kinds[x->dtype]);
    put_char(r->o, '\n');
    if (level <= IR_MAX_NEST) put_block(r, x->child, level + 1);
    indent(r->o, level);
    put_str(r->o, "}\n");
}

static void put_store(R *r, IrRef s, const IrNode *x, int level)
{
    const IrBuf *b = x->buf >= 0 && x->buf < r->k->nbufs ? &r->k->bufs[x->buf] : NULL;
    const char *save = b && b->dtype < KN_NDTYPES ? dts[b->dtype].save : "KN_BAD_STORE(%s)";
    begin_value(r, x->a, s, level);
    indent(r->o, level);
    put(r->o, "b%d[", (int)x->buf);
    put_index(r->o, r->k->ex, x->index, 0);
    put_str(r->o, "] = ");
    put_part(r->o, save, 0);
    r->unrounded = x->a; /* kn_f2h(kn_rh(v)) is kn_f2h(v) */
    put_value(r, x->a, s, 0, bare_in(save, 1));
    r->unrounded = 0;
    put_part(r->o, save, 1);
    put_str(r->o, ";\n");
}

/* The declaration of an accumulator, at its IR_ACC: floats in their value
 * type, integers in int64_t (so a max starts below every value). */
static void put_acc(R *r, const IrNode *x, int level)
{
    kn_dtype dt = (kn_dtype)(x->dtype < KN_NDTYPES ? x->dtype : KN_F32);
    int fl = dt_is_float(dt);
    indent(r->o, level);
    put(r->o, "%s a%d = %s;", fl ? dts[dt].value : "int64_t", (int)x->var, acc_init(x->op, fl));
    if (x->var >= 0 && x->var < MAX_ACCS && !r->accread[x->var]) put(r->o, " (void)a%d;", (int)x->var);
    put_char(r->o, '\n');
}

static void put_update(R *r, IrRef s, const IrNode *x, int level)
{
    const IrNode *v = value_at(r->k, x->a, s);
    kn_dtype dt = (kn_dtype)(v ? v->dtype : KN_F32);
    int fl = dt_is_float(dt);
    const OpFmt *f = &ops[x->op == OP_RMAX ? OP_RMAX : OP_SUM];
    IrNode self = *x; /* the template's operand %0 is the update's value */
    self.dtype = (uint8_t)dt;
    begin_value(r, x->a, s, level);
    indent(r->o, level);
    put(r->o, "a%d = ", (int)x->var);
    int wrap = fl && f->wrap;
    if (wrap) put_part(r->o, dts[dt].wrap, 0);
    put_tmpl(r, fl ? f->flt : f->integer, &self, s, 0, x->var, wrap ? bare_in(dts[dt].wrap, 1) : 1);
    if (wrap) put_part(r->o, dts[dt].wrap, 1);
    put_str(r->o, ";\n");
}

static void put_block(R *r, IrRef s, int level)
{
    for (uint32_t budget = r->k->n; s && s < r->k->n && budget; s = r->k->nodes[s].next, budget--) {
        const IrNode *x = &r->k->nodes[s];
        switch (x->kind) {
        case IR_LOOP: put_loop(r, x, level); break;
        case IR_STORE: put_store(r, s, x, level); break;
        case IR_ACC: put_acc(r, x, level); break;
        case IR_UPDATE: put_update(r, s, x, level); break;
        default: indent(r->o, level), put_str(r->o, "KN_BAD_STATEMENT;\n"); break;
        }
    }
}

/* ---- which buffers and accumulators the text names ---- */

static void scan_value(R *r, IrRef value, IrRef stmt)
{
    if (!dag_build(r, value, stmt)) { /* too large to tell: everything counts as used */
        memset(r->bufused, 1, MAX_BUFS);
        memset(r->accread, 1, MAX_ACCS);
        return;
    }
    for (int i = 0; i < r->d->n; i++) {
        const IrNode *x = &r->k->nodes[r->d->v[i].ref];
        if (x->kind == IR_LOAD && x->buf >= 0 && x->buf < MAX_BUFS) r->bufused[x->buf] = 1;
        if (x->kind == IR_ACCVAL && x->var >= 0 && x->var < MAX_ACCS) r->accread[x->var] = 1;
    }
}

static void scan_block(R *r, IrRef s, int level)
{
    for (uint32_t budget = r->k->n; s && s < r->k->n && budget; s = r->k->nodes[s].next, budget--) {
        const IrNode *x = &r->k->nodes[s];
        if (x->kind == IR_LOOP && level <= IR_MAX_NEST) scan_block(r, x->child, level + 1);
        if (x->kind == IR_STORE && x->buf >= 0 && x->buf < MAX_BUFS) r->bufused[x->buf] = 1;
        if (x->kind == IR_STORE || x->kind == IR_UPDATE) scan_value(r, x->a, s);
    }
}

/* ---- kernels ---- */

static const char *const roles[] = {"in", "out", "tmp"};

static void put_kernel(R *r)
{
    const Kernel *k = r->k;
    uint8_t bufused[MAX_BUFS], accread[MAX_ACCS];
    memset(bufused, 0, sizeof bufused);
    memset(accread, 0, sizeof accread);
    r->bufused = bufused;
    r->accread = accread;
    r->ntemps = 0;
    scan_block(r, k->body, 0);
    put(r->o, "\nvoid %s(void **b);\nvoid %s(void **b)\n{\n", k->name, k->name);
    if (k->nbufs == 0) put_str(r->o, "    (void)b;\n");
    for (int i = 0; i < k->nbufs; i++) {
        const IrBuf *bf = &k->bufs[i];
        const char *t = bf->dtype < KN_NDTYPES ? dts[bf->dtype].store : "KN_BAD_DTYPE";
        const char *c = bf->role == BUF_IN ? "const " : "";
        put(r->o, "    %s%s *restrict b%d = (%s%s *)b[%d];", c, t, i, c, t, i);
        if (i < MAX_BUFS && !bufused[i]) put(r->o, " (void)b%d;", i);
        put(r->o, " /* %s %s[", bf->role <= BUF_TMP ? roles[bf->role] : "?",
            kn_dtype_name((kn_dtype)bf->dtype));
        put_index(r->o, k->ex, bf->size, 0);
        put_str(r->o, "] */\n");
    }
    put_block(r, k->body, 1);
    put_str(r->o, "}\n");
}

size_t c_render(const Kernel *const *ks, int nk, char *buf, size_t cap)
{
    Dag dag; /* 32 KiB */
    Out o = {buf, buf ? cap : 0, 0};
    R r;
    memset(&r, 0, sizeof r);
    r.o = &o;
    r.d = &dag;
    for (size_t i = 0; i < sizeof prelude / sizeof *prelude; i++) put_str(&o, prelude[i]);
    for (int i = 0; i < nk; i++) {
        r.k = ks[i];
        put_kernel(&r);
    }
    if (o.cap) o.buf[o.len < o.cap ? o.len : o.cap - 1] = '\0';
    return o.len;
}
