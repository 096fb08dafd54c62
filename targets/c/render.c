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
 * - index expressions use floor division and the divisor-signed modulo;
 * - a data-dependent offset adds to its index (gather, scatter_add); check()
 *   is kn_check, which reports an index out of range in the kernel's error
 *   cell, b[nbufs + 1] (after the thread pool), and gives 0 instead; a
 *   store += adds as scatter_add does (floats in their value type, rounded
 *   once on store; integers wrap).
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
 *
 * Two dialects of the same text: the scalar one (TinyCC, and the oracle)
 * renders every loop serially, its innermost ones written out for a
 * compiler that optimises nothing (put_unrolled); the SIMD one
 * (c_render_isa, for the system compiler) starts with an instruction set's
 * macro header and writes vector loops for its vectoriser: KN_IVDEP on
 * those that store, and lanes for those that accumulate; it prefetches
 * what the hardware prefetcher misses (a row kernel's next row, long
 * streams ahead). In both, a kernel's top-level parallel loops run on the
 * thread pool, chunk by chunk, each iteration as on one thread.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "../../src/loopopt.h" /* loopopt_range */
#include "../../port/port.h" /* PORT_PART */

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
    " * aliases an input or another output, but for one written in place over\n"
    " * the input it replaces, element by element (both left unqualified). */\n"
    "#include <math.h>\n"
    "#include <stdint.h>\n"
    "#include <string.h>\n"
    "\n"
    "/* helpers a kernel does not call are no warning (the SIMD dialect\n"
    " * defines KN_HELPER first, always inlined) */\n"
    "#ifndef KN_HELPER\n"
    "#if defined(__GNUC__) || defined(__clang__)\n"
    "#define KN_HELPER static inline __attribute__((unused))\n"
    "#else\n"
    "#define KN_HELPER static inline\n"
    "#endif\n"
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
    "/* an index read at run time (ir.h check): v in [0, n), else 0 (in bounds) and a report in the\n"
    " * kernel's error cell b[nbufs + 1]: {1, v, n} (threads may race to write it: one report wins) */\n"
    "KN_HELPER int64_t kn_check(int64_t v, int64_t n, int64_t *err)\n"
    "{\n"
    "    if (v >= 0 && v < n) return v;\n"
    "    err[1] = v, err[2] = n, err[0] = 1;\n"
    "    return 0;\n"
    "}\n"
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
    " * of them without -ffast-math; IEEE specials. Max error vs libm's double\n"
    " * over every 61st bit pattern (70M inputs): 0.96, 0.81, 1.30 ulp (KN_FMAF\n"
    " * a fused multiply-add, as an instruction set's header defines it: 1.00,\n"
    " * 0.81, 1.30); erf over every float of [0, 4.5]: 1.50 (1.25) ulp.\n"
    " * Clamps and selects are on bits where one integer min does a compare and\n"
    " * a blend's work (test_render's sweep). */\n"
    "#ifndef KN_FMAF\n"
    "#define KN_FMAF(a, b, c) ((a) * (b) + (c))\n"
    "#endif\n"
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
    "union kn_du { double f; uint64_t u; };\n"
    "#ifdef __TINYC__\n"
    "#define KN_DSEL(c, a, b) ((c) ? (a) : (b))\n"
    "#else\n"
    "KN_HELPER double kn_dsel(int c, double a, double b)\n"
    "{\n"
    "    uint64_t m = 0u - (uint64_t)(c != 0);\n"
    "    return ((union kn_du){.u = (((union kn_du){.f = a}).u & m) | (((union kn_du){.f = b}).u & ~m)}).f;\n"
    "}\n"
    "#define KN_DSEL(c, a, b) kn_dsel(c, a, b)\n"
    "#endif\n"
    "/* KN_TSEL, KN_TDSEL: a where of the scalar dialect on data (a mask read from\n"
    " * a buffer) whose branches are cheap and may run whatever the mask. TinyCC's\n"
    " * ?: is a branch, which a ReLU mask takes at random: there, a select on bits\n"
    " * in a statement expression (it inlines no function; a backward mask of 1M\n"
    " * elements: 8.5 -> 4.0 ms); elsewhere KN_SEL's. A where on indices (a\n"
    " * pad's) goes the same way for a whole row: TinyCC's branch, KN_SEL */\n"
    "#ifdef __TINYC__\n"
    "#define KN_TSEL(c, a, b) \\\n"
    "    ({ uint32_t m_ = 0u - (uint32_t)((c) != 0); KN_ASF((KN_ASU(a) & m_) | (KN_ASU(b) & ~m_)); })\n"
    "#define KN_DASU(x) (((union kn_du){.f = (x)}).u)\n"
    "#define KN_TDSEL(c, a, b) \\\n"
    "    ({ uint64_t m_ = 0u - (uint64_t)((c) != 0); \\\n"
    "       ((union kn_du){.u = (KN_DASU(a) & m_) | (KN_DASU(b) & ~m_)}).f; })\n"
    "#else\n"
    "#define KN_TSEL(c, a, b) KN_SEL(c, a, b)\n"
    "#define KN_TDSEL(c, a, b) KN_DSEL(c, a, b)\n"
    "#endif\n"
    "/* max and min propagate NaN; a max accumulator takes a NaN and keeps it.\n"
    " * Every compare is evaluated (& and |, not && and ||): branch-free */\n"
    "KN_HELPER float kn_maxf(float a, float b) { return KN_SEL((a != a) | (b != b), NAN, KN_SEL(a > b, a, b)); }\n"
    "KN_HELPER float kn_minf(float a, float b) { return KN_SEL((a != a) | (b != b), NAN, KN_SEL(a < b, a, b)); }\n"
    "KN_HELPER double kn_max(double a, double b) { return KN_DSEL((a != a) | (b != b), NAN, KN_DSEL(a > b, a, b)); }\n"
    "KN_HELPER double kn_min(double a, double b) { return KN_DSEL((a != a) | (b != b), NAN, KN_DSEL(a < b, a, b)); }\n"
    "/* !(v <= acc) is v > acc or either NaN: with acc == acc, v taken when greater or NaN, in two\n"
    " * compares where (v != v) | (v > acc) took three (softmax's row max: 0.56 -> 0.50 ns/element) */\n"
    "KN_HELPER float kn_accmaxf(float acc, float v) { return KN_SEL((acc == acc) & !(v <= acc), v, acc); }\n"
    "KN_HELPER double kn_accmax(double acc, double v)\n"
    "{\n"
    "    return KN_DSEL((acc == acc) & !(v <= acc), v, acc);\n"
    "}\n"
    "\n",
    "/* e^r - 1 for |r| <= ln2/2, into s: r + r^2 P(r), P of degree 4 a fit\n"
    " * (Lawson) of (e^r - 1 - r) / r^2, relative error 3.1e-9 before rounding:\n"
    " * one term fewer than Cephes expf's degree-5 P, the same ulps; e^r is\n"
    " * 1 + s (KN_EXPR) */\n"
    "#define KN_EXPS(r, s)                                 \\\n"
    "    do {                                              \\\n"
    "        float p_ = 1.3814598788e-3f;                  \\\n"
    "        p_ = KN_FMAF(p_, r, 8.3687165752e-3f);        \\\n"
    "        p_ = KN_FMAF(p_, r, 4.1668388993e-2f);        \\\n"
    "        p_ = KN_FMAF(p_, r, 1.6666521132e-1f);        \\\n"
    "        p_ = KN_FMAF(p_, r, 4.9999994040e-1f);        \\\n"
    "        (s) = KN_FMAF((r) * (r), p_, r);              \\\n"
    "    } while (0)\n"
    "#define KN_EXPR(r, p)                                 \\\n"
    "    do {                                              \\\n"
    "        float s_;                                     \\\n"
    "        KN_EXPS(r, s_);                               \\\n"
    "        (p) = 1.0f + s_;                              \\\n"
    "    } while (0)\n"
    "/* exp: n = rint(x / ln2) by the 1.5 * 2^23 shifter, r = x - n ln2 in two\n"
    " * Cody-Waite steps (n * C1 exact), e^r, times 2^n as two exact powers of\n"
    " * two so that a subnormal result rounds once. x is clamped to [-104, 89]\n"
    " * on its bits, by one unsigned min (x < -104, -NaN) and one signed min\n"
    " * (x > 89, +inf, +NaN): single integer instructions where compares and\n"
    " * blends cost two each; n stays in [-150, 129], beyond which the product\n"
    " * is 0 or inf. A NaN is put back at the end. */\n"
    "KN_HELPER float kn_expf(float x)\n"
    "{\n"
    "    uint32_t u = KN_ASU(x);\n"
    "    u = u < 0xc2d00000u ? u : 0xc2d00000u;\n"
    "    int32_t i = (int32_t)u;\n"
    "    i = i < 0x42b20000 ? i : 0x42b20000;\n"
    "    float c = KN_ASF((uint32_t)i);\n"
    "    float z = KN_FMAF(c, 1.44269504f, 12582912.0f), n = z - 12582912.0f, p;\n"
    "    uint32_t m = KN_ASU(z) - 0x4b400000u + 256u; /* n + 256, in [106, 385] */\n"
    "    float r = KN_FMAF(n, -0.693359375f, c);\n"
    "    r = KN_FMAF(n, 2.12194440e-4f, r);\n"
    "    KN_EXPR(r, p);\n"
    "    uint32_t h = m >> 1; /* n = (h - 128) + (m - h - 128) */\n"
    "    float y = p * KN_ASF((h - 128u + 127u) << 23) * KN_ASF((m - h - 128u + 127u) << 23);\n"
    "    return KN_SEL(x != x, x, y);\n"
    "}\n"
    "/* e^x for x in [-87, 88], not NaN (tanh's and erf's own arguments): the\n"
    " * result is normal, so one power of two scales it, and nothing clamps */\n"
    "KN_HELPER float kn_expf_in(float x)\n"
    "{\n"
    "    float z = KN_FMAF(x, 1.44269504f, 12582912.0f), n = z - 12582912.0f, p;\n"
    "    float r = KN_FMAF(n, -0.693359375f, x);\n"
    "    r = KN_FMAF(n, 2.12194440e-4f, r);\n"
    "    KN_EXPR(r, p);\n"
    "    return p * KN_ASF((KN_ASU(z) - 0x4b400000u + 127u) << 23);\n"
    "}\n"
    "/* 2^q for q in [-126, 127], not NaN, to 9.2e-8 relative before rounding\n"
    " * (0.8 ulp: for erf's tail, where it is scaled by erfc/erf <= 0.19): n =\n"
    " * rint(q), f = q - n exact, 2^f = 1 + f F(f) with F a degree-4 minimax fit\n"
    " * (Lawson) of (2^f - 1)/f on [-1/2, 1/2], without exp's step through ln2 */\n"
    "KN_HELPER float kn_exp2f_in(float q)\n"
    "{\n"
    "    float z = q + 12582912.0f, n = z - 12582912.0f, f = q - n;\n"
    "    float p = 1.3264631541e-3f;\n"
    "    p = KN_FMAF(p, f, 9.6714868819e-3f);\n"
    "    p = KN_FMAF(p, f, 5.5507337428e-2f);\n"
    "    p = KN_FMAF(p, f, 2.4022242493e-1f);\n"
    "    p = KN_FMAF(p, f, 6.9314697778e-1f);\n"
    "    p = KN_FMAF(p, f, 1.0f);\n"
    "    return p * KN_ASF((KN_ASU(z) - 0x4b400000u + 127u) << 23);\n"
    "}\n"
    "\n",
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
    "    p = KN_FMAF(p, f, -1.1514610310e-1f);\n"
    "    p = KN_FMAF(p, f, 1.1676998740e-1f);\n"
    "    p = KN_FMAF(p, f, -1.2420140846e-1f);\n"
    "    p = KN_FMAF(p, f, 1.4249322787e-1f);\n"
    "    p = KN_FMAF(p, f, -1.6668057665e-1f);\n"
    "    p = KN_FMAF(p, f, 2.0000714765e-1f);\n"
    "    p = KN_FMAF(p, f, -2.4999993993e-1f);\n"
    "    p = KN_FMAF(p, f, 3.3333331174e-1f);\n"
    "    float y = f * z * p + e * -2.12194440e-4f - 0.5f * z;\n"
    "    y = (f + y) + e * 0.693359375f;\n"
    "    y = KN_SEL(x == 0.0f, -INFINITY, y);\n"
    "    y = KN_SEL(x < 0.0f, NAN, y);\n"
    "    return KN_SEL(x == INFINITY || x != x, x, y);\n"
    "}\n"
    "\n",
    "/* tanh, on |x| then x's sign: |x| < 0.625, a + a^3 P(a^2) (Cephes tanhf's degree-4 minimax P);\n"
    " * else 1 - 2 / (e^2a + 1), with |x| clamped to 10 on its bits (tanh(10) is 1 in f32) so that\n"
    " * e^2a is in kn_expf_in's range; a NaN takes the first branch, which keeps it. */\n"
    "KN_HELPER float kn_tanhf(float x)\n"
    "{\n"
    "    uint32_t ua = KN_ASU(x) & 0x7fffffffu;\n"
    "    float a = KN_ASF(ua), z = a * a;\n"
    "    float p = -5.70498872745e-3f;\n"
    "    p = KN_FMAF(p, z, 2.06390887954e-2f);\n"
    "    p = KN_FMAF(p, z, -5.37397155531e-2f);\n"
    "    p = KN_FMAF(p, z, 1.33314422036e-1f);\n"
    "    p = KN_FMAF(p, z, -3.33332819422e-1f);\n"
    "    float s = KN_FMAF(a * z, p, a), c = KN_ASF(ua < 0x41200000u ? ua : 0x41200000u);\n"
    "    float l = 1.0f - 2.0f / (kn_expf_in(c + c) + 1.0f);\n"
    "    return KN_ASF(KN_ASU(KN_SEL(a >= 0.625f, l, s)) | (KN_ASU(x) & 0x80000000u));\n"
    "}\n"
    "/* erf: |x| < 1, |x| + |x| Q(x^2) with Q a degree-6 minimax fit (Lawson) of\n"
    " * erf(x)/x - 1; else 1 - 2^P(|x|) with P a degree-5 fit of log2(erfc) on\n"
    " * [1, 4] weighted by erfc ln2/erf, the result's relative error (1.6e-8\n"
    " * before rounding); |x| is clamped to 4 on its bits, where erf is 1 in\n"
    " * f32; a NaN takes the first branch; then x's sign. */\n"
    "KN_HELPER float kn_erff(float x)\n"
    "{\n"
    "    uint32_t ua = KN_ASU(x) & 0x7fffffffu;\n"
    "    float a = KN_ASF(ua), s = a * a;\n"
    "    float q = 7.889142580e-05f;\n"
    "    q = KN_FMAF(q, s, -8.020849200e-04f);\n"
    "    q = KN_FMAF(q, s, 5.189536139e-03f);\n"
    "    q = KN_FMAF(q, s, -2.685444430e-02f);\n"
    "    q = KN_FMAF(q, s, 1.128360033e-01f);\n"
    "    q = KN_FMAF(q, s, -3.761262596e-01f);\n"
    "    q = KN_FMAF(q, s, 1.283791661e-01f);\n"
    "    float small = KN_FMAF(a, q, a), t = KN_ASF(ua < 0x40800000u ? ua : 0x40800000u);\n"
    "    float p = -1.669443895e-03f;\n"
    "    p = KN_FMAF(p, t, 2.139724360e-02f);\n"
    "    p = KN_FMAF(p, t, -1.281090837e-01f);\n"
    "    p = KN_FMAF(p, t, -9.438716944e-01f);\n"
    "    p = KN_FMAF(p, t, -1.612384559e+00f);\n"
    "    p = KN_FMAF(p, t, -3.779284370e-03f);\n"
    "    float l = 1.0f - kn_exp2f_in(p);\n"
    "    return KN_ASF(KN_ASU(KN_SEL(a >= 1.0f, l, small)) | (KN_ASU(x) & 0x80000000u));\n"
    "}\n"
    "/* e^min(x, 0), bit for bit kn_expf's: the exp of softmax's x - max, which lower.c\n"
    " * marks so. c in [-104, 0] keeps n in [-150, 0], so 2^(n+64) is normal and p 2^(n+64)\n"
    " * exact, and the one rounding is the product by 2^-64, where kn_expf takes two powers\n"
    " * of two and a clamp on either side; both clamps are compares that a NaN fails, so it\n"
    " * flows through the arithmetic to the result (softmax 4096x1024, its exp loop alone in\n"
    " * cache, one thread: 0.365 -> 0.336 ns/element). (1 + s) 2^(n+64) is one fused\n"
    " * multiply-add, s t + t, of the same bits: t is a power of two and the result normal, so\n"
    " * s t is exact and the add rounds as 1 + s did (softmax's kernel, one thread: 0.404 ->\n"
    " * 0.395 ns/element). */\n"
    "KN_HELPER float kn_expf_le0(float x)\n"
    "{\n"
    "    float c = KN_SEL(x > 0.0f, 0.0f, x);\n"
    "    c = KN_SEL(c < -104.0f, -104.0f, c);\n"
    "    float z = KN_FMAF(c, 1.44269504f, 12582912.0f), n = z - 12582912.0f, s;\n"
    "    float r = KN_FMAF(n, -0.693359375f, c);\n"
    "    r = KN_FMAF(n, 2.12194440e-4f, r);\n"
    "    KN_EXPS(r, s);\n"
    "    float t = KN_ASF((KN_ASU(z) - 0x4b400000u + 127u + 64u) << 23);\n"
    "    return KN_FMAF(s, t, t) * 5.42101086e-20f; /* 2^-64 */\n"
    "}\n"
    "/* TinyCC neither inlines nor vectorises, and its code for the above runs\n"
    " * 4-6x slower than libm's: there, kernels call libm */\n"
    "#ifdef __TINYC__\n"
    "#define kn_expf expf\n"
    "#define kn_expf_le0(x) expf(kn_minf(x, 0.0f))\n"
    "#define kn_logf logf\n"
    "#define kn_tanhf tanhf\n"
    "#define kn_erff erff\n"
    "#endif\n"
    "\n",
    "/* TinyCC calls every function: max, min and the max accumulator there as\n"
    " * statement expressions, each operand evaluated once (a row max of 512 x\n"
    " * 4096 alone, best of 5: 10.0 -> 6.7 ms) */\n"
    "#ifdef __TINYC__\n"
    "#define kn_maxf(a, b) ({ float a_ = (a), b_ = (b); ((a_ != a_) | (b_ != b_)) ? NAN : a_ > b_ ? a_ : b_; })\n"
    "#define kn_minf(a, b) ({ float a_ = (a), b_ = (b); ((a_ != a_) | (b_ != b_)) ? NAN : a_ < b_ ? a_ : b_; })\n"
    "#define kn_max(a, b) ({ double a_ = (a), b_ = (b); ((a_ != a_) | (b_ != b_)) ? NAN : a_ > b_ ? a_ : b_; })\n"
    "#define kn_min(a, b) ({ double a_ = (a), b_ = (b); ((a_ != a_) | (b_ != b_)) ? NAN : a_ < b_ ? a_ : b_; })\n"
    "#define kn_accmaxf(acc, v) ({ float a_ = (acc), v_ = (v); ((a_ == a_) & !(v_ <= a_)) ? v_ : a_; })\n"
    "#define kn_accmax(acc, v) ({ double a_ = (acc), v_ = (v); ((a_ == a_) & !(v_ <= a_)) ? v_ : a_; })\n"
    "#define kn_imax(a, b) ({ int64_t a_ = (a), b_ = (b); a_ > b_ ? a_ : b_; })\n"
    "#define kn_imin(a, b) ({ int64_t a_ = (a), b_ = (b); a_ < b_ ? a_ : b_; })\n"
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

/* The thread pool, for either dialect: a kernel's top-level parallel loop
 * is a function over a range [lo, hi) of its iterations; the entry cuts the
 * extent into chunks (multiples of grain, so vector loops keep their
 * alignment) and runs them through the pool it finds in b[nbufs], or runs
 * the whole range itself. Each iteration runs exactly as on one thread, so
 * the result is the same bit for bit whatever the threads. */
static const char threads_prelude[] =
    "/* threads: kn_par has the layout of kiln's KnParallel (targets/c/gemm.h) */\n"
    "typedef struct { int (*parallel_for)(int, void (*)(void *, int), void *); int threads; } kn_par;\n"
    "typedef struct { void (*body)(void **, int64_t, int64_t); void **b; int64_t n, grain; int tasks; } kn_job;\n"
    "KN_HELPER int64_t kn_chunk(const kn_job *j, int i)\n"
    "{\n"
    "    return i >= j->tasks ? j->n : i * j->n / j->tasks / j->grain * j->grain;\n"
    "}\n"
    "KN_HELPER void kn_task(void *arg, int i)\n"
    "{\n"
    "    const kn_job *j = (const kn_job *)arg;\n"
    "    j->body(j->b, kn_chunk(j, i), kn_chunk(j, i + 1));\n"
    "}\n"
    "/* a few chunks per thread, handed out as threads come free */\n"
    "KN_HELPER void kn_parallel(void (*body)(void **, int64_t, int64_t), void **b, int64_t n, int64_t grain,\n"
    "                           const kn_par *par)\n"
    "{\n"
    "    kn_job j;\n"
    "    j.body = body, j.b = b, j.n = n, j.grain = grain;\n"
    "    j.tasks = par && par->parallel_for && par->threads > 1 ? 4 * par->threads : 1;\n"
    "    if (j.tasks > n / grain) j.tasks = (int)(n / grain);\n"
    "    if (j.tasks < 2) body(b, 0, n);\n"
    "    else par->parallel_for(j.tasks, kn_task, &j);\n"
    "}\n";

/* ---- the SIMD dialect: a macro header per instruction set ----
 * The same C as the scalar dialect, for the system compiler's vectoriser:
 * vector loops carry KN_IVDEP (their iterations are independent), and a
 * vector loop that accumulates keeps one accumulator per lane (KN_LANES
 * marks the lane loop), so the vectoriser needs no reassociation. An
 * instruction set adds its compiler flags and a few macros: KN_FMAF (a
 * fused multiply-add where the ISA has one, used by nothing that must be
 * exact). */
static const char simd_prelude[] =
    "/* KN_IVDEP: independent iterations; KN_LANES: a loop over lanes, to be\n"
    " * vectorised whole (gcc's SLP does not take what unrolling it leaves) */\n"
    "#if defined(__clang__)\n"
    "#define KN_IVDEP _Pragma(\"clang loop vectorize(assume_safety)\")\n"
    "#define KN_LANES _Pragma(\"clang loop vectorize(assume_safety)\")\n"
    "#elif defined(__GNUC__)\n"
    "#define KN_IVDEP _Pragma(\"GCC ivdep\")\n"
    "#define KN_LANES _Pragma(\"GCC unroll 1\")\n"
    "#else\n"
    "#define KN_IVDEP\n"
    "#define KN_LANES\n"
    "#endif\n"
    "/* KN_VEC: GNU C vectors (vector_size) hold lane accumulators in registers\n"
    " * across a vector loop; TinyCC ignores vector_size, so it folds the lanes\n"
    " * through their array instead */\n"
    "#if (defined(__GNUC__) || defined(__clang__)) && !defined(__TINYC__)\n"
    "#define KN_VEC 1\n"
    "#endif\n"
    "/* KN_HELPER: helpers inlined whatever their size: at -O2 gcc's inliner\n"
    " * leaves exp, erf and tanh out of line, and their loops scalar */\n"
    "#if (defined(__GNUC__) || defined(__clang__)) && !defined(__TINYC__)\n"
    "#define KN_HELPER static inline __attribute__((unused, always_inline))\n"
    "#endif\n"
    "/* KN_VMAX(a, b): a > b ? a : b lane by lane on GNU C vectors, by a compare\n"
    " * and a blend (the vector ?: is C++ only); KN_VMAXF, for f32, where the\n"
    " * instruction set's header has no one instruction for it */\n"
    "#ifdef KN_VEC\n"
    "#define KN_VMAX(a, b) __extension__({ __typeof__(a) a_ = (a), b_ = (b); __typeof__(a_ == a_) m_ = a_ > b_; \\\n"
    "    (__typeof__(a_))((m_ & (__typeof__(m_))a_) | (~m_ & (__typeof__(m_))b_)); })\n"
    "#ifndef KN_VMAXF\n"
    "#define KN_VMAXF(a, b) KN_VMAX(a, b)\n"
    "#endif\n"
    "#endif\n"
    "/* KN_STREAM64(p, s): the 64 bytes at s to p, by KN_NT where p is 64-byte\n"
    " * aligned (a whole line: no read for ownership), else memcpy; KN_SFENCE:\n"
    " * the non-temporal stores before it are seen before what follows */\n"
    "#if defined(KN_VEC) && defined(KN_NT)\n"
    "#define KN_STREAM64(p, s) \\\n"
    "    do { \\\n"
    "        char *p_ = (char *)(p); \\\n"
    "        if ((uintptr_t)p_ % 64) memcpy(p_, s, 64); \\\n"
    "        else for (int i_ = 0; i_ < 64; i_ += KN_NTV) { \\\n"
    "            float __attribute__((vector_size(KN_NTV))) v_; \\\n"
    "            memcpy(&v_, (const char *)(s) + i_, KN_NTV); \\\n"
    "            KN_NT(p_ + i_, v_); \\\n"
    "        } \\\n"
    "    } while (0)\n"
    "#define KN_SFENCE() __builtin_ia32_sfence()\n"
    "#else\n"
    "#define KN_STREAM64(p, s) memcpy(p, s, 64)\n"
    "#define KN_SFENCE() ((void)0)\n"
    "#endif\n"
    "/* KN_PREFETCH(p): the line at p into the cache, to be read soon (a hint: it never faults) */\n"
    "#if (defined(__GNUC__) || defined(__clang__)) && !defined(__TINYC__)\n"
    "#define KN_PREFETCH(p) __builtin_prefetch(p, 0, 3)\n"
    "#else\n"
    "#define KN_PREFETCH(p) ((void)0)\n"
    "#endif\n";

/* KN_VMAXF(a, b): a > b ? a : b on GNU C vectors of f32, lane by lane, where
 * a NaN operand gives either (the caller tracks NaN apart): x86's max
 * instruction is exactly that, in one where the prelude's KN_VMAX takes a
 * compare and a blend (gcc and clang name the 512-bit builtin apart);
 * NEON's and wasm's max take +0 over -0, so they keep KN_VMAX.
 * KN_NT(p, v): a non-temporal store of GNU C vector v (KN_NTV bytes) to
 * aligned p, past the caches; where a header defines it, the renderer
 * streams large outputs (stream_store). */
const CIsa c_isas[] = {
    {"avx512", "-mavx512f -mavx512vl -mavx2 -mfma -mprefer-vector-width=512",
     "#define KN_ISA_AVX512 1 /* 16 f32 lanes */\n#define KN_FMAF(a, b, c) __builtin_fmaf(a, b, c)\n"
     "#ifdef __clang__\n#define KN_VMAXF(a, b) __builtin_ia32_maxps512(a, b, 4)\n"
     "#define KN_NT(p, v) __builtin_nontemporal_store(v, (__typeof__(v) *)(p))\n"
     "#else\n#define KN_VMAXF(a, b) __builtin_ia32_maxps512_mask(a, b, a, (unsigned short)-1, 4)\n"
     "#define KN_NT(p, v) __builtin_ia32_movntps512((float *)(p), v)\n#endif\n#define KN_NTV 64\n", 32},
    {"avx2", "-mavx2 -mfma",
     "#define KN_ISA_AVX2 1 /* 8 f32 lanes */\n#define KN_FMAF(a, b, c) __builtin_fmaf(a, b, c)\n"
     "#define KN_VMAXF(a, b) __builtin_ia32_maxps256(a, b)\n#ifdef __clang__\n"
     "#define KN_NT(p, v) __builtin_nontemporal_store(v, (__typeof__(v) *)(p))\n"
     "#else\n#define KN_NT(p, v) __builtin_ia32_movntps256((float *)(p), v)\n#endif\n#define KN_NTV 32\n", 16},
    {"sse2", "",
     "#define KN_ISA_SSE2 1 /* 4 f32 lanes, no FMA */\n#ifdef __SSE2__\n#define KN_VMAXF(a, b) __builtin_ia32_maxps(a, b)\n"
     "#ifdef __clang__\n#define KN_NT(p, v) __builtin_nontemporal_store(v, (__typeof__(v) *)(p))\n"
     "#else\n#define KN_NT(p, v) __builtin_ia32_movntps((float *)(p), v)\n#endif\n#define KN_NTV 16\n#endif\n", 8},
    {"neon", "",
     "#define KN_ISA_NEON 1 /* 4 f32 lanes */\n#define KN_FMAF(a, b, c) __builtin_fmaf(a, b, c)\n"
     "/* KN_VMAXF: the prelude's KN_VMAX (vmaxq_f32 takes +0 over -0); KN_NT: none (stores go through the cache) */\n", 8},
    {"wasm128", "-msimd128",
     "#define KN_ISA_WASM128 1 /* 4 f32 lanes, no FMA */\n"
     "/* KN_VMAXF: the prelude's KN_VMAX (f32x4.max takes +0 over -0); KN_NT: none (wasm has no such store) */\n", 8},
    {"scalar", "", "#define KN_ISA_SCALAR 1 /* KN_VMAXF, KN_NT: no vectors */\n", 1},
    {NULL, NULL, NULL, 0},
};

const CIsa *c_isa(const char *name)
{
    for (const CIsa *i = c_isas; i->name; i++)
        if (!strcmp(i->name, name)) return i;
    return NULL;
}

/* The best instruction set of the machine this runs on, by run-time CPU
 * detection where the compiler offers it. */
const CIsa *c_isa_host(void)
{
    static const CIsa *isa;
    if (isa) return isa;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return isa = c_isa("avx512");
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return isa = c_isa("avx2");
    return isa = c_isa("sse2");
#elif defined(__aarch64__) || defined(__ARM_NEON)
    return isa = c_isa("neon");
#elif defined(__wasm_simd128__)
    return isa = c_isa("wasm128");
#else
    return isa = c_isa("scalar");
#endif
}

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
    case EX_SYM: /* a loop var, or a shape symbol: its value at the run (ir.h IR_SHAPE_SYM) */
        if (x->c >= IR_SHAPE_SYM) put(o, "kn_z[%lld]", (long long)(x->c - IR_SHAPE_SYM));
        else put(o, "s%lld", (long long)x->c);
        break;
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
    uint8_t live;    /* reached from its statement other than through a hoisted value (un_plan) */
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
    const CIsa *isa;  /* the SIMD dialect's instruction set; NULL: the scalar dialect */
    int lane;         /* >= 0: rendering the lanes of vector loop s<lane>: updates go to lane accumulators */
    int stream;       /* >= 0: rendering streamed vector loop s<stream>: its store goes to nt_ (put_stream) */
    int range;        /* >= 0: loop s<range> runs over [lo, hi) (a parallel loop's range function) */
    IrRef shared;     /* the value of consecutive statements, in temporary t<shared_temp> */
    int shared_temp;
    int in_run;       /* rendering a run of stores whose temporaries are declared before the first (put_run) */
    int checks;       /* the kernel has a check(): its functions name the error cell kn_err */
    IrRef pf_row, pf_after; /* after statement pf_after, prefetch loop pf_row's next row (put_prefetch) */
    const struct Unroll *un; /* non-NULL: rendering copy un_u of an unrolled innermost loop's body (put_unrolled) */
    int un_u;
    int tsuffix;      /* temporaries are named t<N>_<un_u>: the copies of a chain of updates (put_chain) */
    IrRef chain;      /* the update statement whose accumulator %a is the chain of copies before un_u */
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

static int nops(const IrNode *x) { return ir_nsrc(x); }

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

/* A where's branch that may be evaluated whatever the mask says: a
 * constant, or a load without a data-dependent offset whose index stays in
 * [0, size) over every loop's range. A pad's load, out of range exactly
 * where its mask is false, is not one. */
static int speculable(const R *r, IrRef ref, IrRef user)
{
    const IrNode *x = value_at(r->k, ref, user);
    int64_t lo, hi, size;
    if (!x) return 0;
    if (x->kind == IR_CONST) return 1;
    return x->kind == IR_LOAD && !x->a && x->buf >= 0 && x->buf < r->k->nbufs
           && expr_as_const(r->k->ex, r->k->bufs[x->buf].size, &size) && loopopt_range(r->k, x->index, &lo, &hi)
           && lo >= 0 && hi < size;
}

/* A float where both of whose branches are speculable: a branch-free
 * select (KN_SEL), which cc vectorises where it keeps a ?: over a load
 * scalar (gpt's causal mask inside softmax's max reduction). */
static int select_where(const R *r, const IrNode *x, IrRef self)
{
    return x->kind == IR_OP && x->op == OP_WHERE && (x->dtype == KN_F32 || x->dtype == KN_F64)
           && speculable(r, x->b, self) && speculable(r, x->c, self);
}

/* A where of the scalar dialect that TinyCC takes as a select (KN_TSEL), not
 * a branch: a float one whose mask reads a buffer or an accumulator (data,
 * taken at random; a mask of indices is as regular as its loops) and both
 * of whose branches are cheap and may run whatever the mask (cheap_safe). */
static int on_data(const R *r, IrRef ref, IrRef user, int *budget)
{
    const IrNode *x = value_at(r->k, ref, user);
    if (!x || --*budget < 0) return 0;
    if (x->kind == IR_LOAD || x->kind == IR_ACCVAL) return 1;
    for (int i = 0; x->kind == IR_OP && i < ir_nsrc(x); i++)
        if (on_data(r, i == 0 ? x->a : i == 1 ? x->b : x->c, ref, budget)) return 1;
    return 0;
}

static int cheap_safe(const R *r, IrRef ref, IrRef user, int *budget)
{
    const IrNode *x = value_at(r->k, ref, user);
    if (!x || --*budget < 0) return 0;
    switch (x->kind) {
    case IR_CONST:
    case IR_ACCVAL:
    case IR_INDEX: return 1;
    case IR_LOAD: return speculable(r, ref, user);
    case IR_OP:
        if ((x->op >= OP_EXP && x->op <= OP_FLOOR && x->op != OP_RECIP) || x->op == OP_POW || x->op == OP_MAX ||
            x->op == OP_MIN)
            return 0; /* a call under TinyCC */
        for (int i = 0; i < ir_nsrc(x); i++)
            if (!cheap_safe(r, i == 0 ? x->a : i == 1 ? x->b : x->c, ref, budget)) return 0;
        return 1;
    default: return 0; /* a check reports, rand is dear */
    }
}

static int tsel_where(const R *r, const IrNode *x, IrRef self)
{
    int budget = 16, mask = 16;
    return !r->isa && x->kind == IR_OP && x->op == OP_WHERE && (x->dtype == KN_F32 || x->dtype == KN_F64) &&
           on_data(r, x->a, self, &mask) && cheap_safe(r, x->b, self, &budget) && cheap_safe(r, x->c, self, &budget);
}

/* Marks what is evaluated whatever the wheres choose: all but the branches
 * of a where that is not a select. */
static void dag_uncond(R *r, IrRef ref, IrRef user)
{
    const IrNode *x = value_at(r->k, ref, user);
    Val *v = x ? dag_find(r->d, ref, 0) : NULL;
    if (!v || v->uncond) return;
    v->uncond = 1;
    int sel = select_where(r, x, ref) || tsel_where(r, x, ref);
    for (int i = 0; i < nops(x); i++)
        if (!(x->op == OP_WHERE && i > 0) || sel) dag_uncond(r, operand(x, i), ref);
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
static void put_chain(R *r, int u);
static int put_access(R *r, int buf, ExprId index);
static int put_hoisted(R *r, IrRef ref);
static int is_hoisted(const R *r, IrRef ref);

/* Temporary n's name: t<n>, or t<n>_<copy> in a chain of updates' copies. */
static void put_temp(R *r, int n)
{
    if (r->tsuffix) put(r->o, "t%d_%d", n, r->un_u);
    else put(r->o, "t%d", n);
}

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
        else if (p[1] == 'a' && r->lane >= 0) put(r->o, "a%d_l[s%d_l]", acc, r->lane);
        else if (p[1] == 'a' && r->chain && r->un_u > 0) put_chain(r, r->un_u - 1);
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
    const IrNode *m = x->op == OP_EXP && dt == KN_F32 ? value_at(r->k, x->a, self) : NULL;
    const IrNode *zero = m && m->kind == IR_OP && m->op == OP_MIN && m->dtype == KN_F32 ? value_at(r->k, m->b, x->a) : NULL;
    if (zero && zero->kind == IR_CONST && zero->imm == 0) { /* exp(min(v, 0)) */
        put_str(r->o, "kn_expf_le0(");
        put_value(r, m->a, x->a, depth + 2, 1);
        put_char(r->o, ')');
        return;
    }
    /* a compare's or where's operand dtype decides: the last operand's */
    const IrNode *last = value_at(r->k, operand(x, nops(x) - 1), self);
    int fl = last ? dt_is_float((kn_dtype)last->dtype) : dt_is_float(dt);
    const OpFmt *f = &ops[x->op];
    const char *t = fl ? f->flt : last && last->dtype == KN_BOOL && f->boolean ? f->boolean : f->integer;
    if (tsel_where(r, x, self)) t = dt == KN_F32 ? "KN_TSEL(%0, %1, %2)" : "KN_TDSEL(%0, %1, %2)";
    else if (select_where(r, x, self)) t = dt == KN_F32 ? "KN_SEL(%0, %1, %2)" : "KN_DSEL(%0, %1, %2)";
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
    if (put_hoisted(r, ref)) return;
    if (v && v->temp >= 0) {
        put_temp(r, v->temp);
        return;
    }
    if (ref == r->shared) {
        put(r->o, "t%d", r->shared_temp);
        return;
    }
    switch (x->kind) {
    case IR_CONST:
        if (x->index) { /* a size at the run, or its reciprocal, as dt_store stores the double */
            put_str(r->o, "(");
            put_part(r->o, dts[x->dtype].from_f, 0);
            put_str(r->o, x->op == OP_RECIP ? "(1.0 / (double)" : "((double)");
            put_index(r->o, r->k->ex, x->index, 1);
            put_str(r->o, ")");
            put_part(r->o, dts[x->dtype].from_f, 1);
            put_str(r->o, ")");
        } else {
            put_const(r->o, (kn_dtype)x->dtype, x->imm);
        }
        break;
    case IR_LOAD:
        put_part_strip(r->o, dts[x->dtype].load, 0, bare);
        if (x->a || !put_access(r, x->buf, x->index)) {
            put(r->o, "b%d[", (int)x->buf);
            put_index(r->o, r->k->ex, x->index, 0);
            if (x->a) put_str(r->o, " + "), put_value(r, x->a, ref, depth + 1, 0);
            put_char(r->o, ']');
        }
        put_part_strip(r->o, dts[x->dtype].load, 1, bare);
        break;
    case IR_CHECK:
        put_str(r->o, "kn_check(");
        put_value(r, x->a, ref, depth + 1, 1);
        put_str(r->o, ", ");
        put_index(r->o, r->k->ex, x->index, 0);
        put_str(r->o, ", kn_err)");
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
    if (!v || v->visited || is_hoisted(r, ref)) return;
    v->visited = 1;
    for (int i = 0; i < nops(x); i++) put_temps(r, operand(x, i), ref, level);
    if (!hoist(r, v)) return;
    int n = v->temp >= 0 ? v->temp : r->ntemps++; /* a chain's later copies keep the first's numbers */
    v->temp = -1; /* the value itself, not its name */
    indent(r->o, level);
    put(r->o, "const %s ", dts[x->dtype].value);
    put_temp(r, n);
    put_str(r->o, " = ");
    put_value(r, ref, user, 0, 1);
    put_str(r->o, ";\n");
    v->temp = n;
}

/* Analyses value (of statement stmt) and declares its temporaries. */
static void begin_value(R *r, IrRef value, IrRef stmt, int level)
{
    if (value == r->shared || r->in_run) return;
    if (dag_build(r, value, stmt)) put_temps(r, value, stmt, level);
}

/* ---- statements ---- */

static const char *const loop_kinds[] = {"serial", "parallel", "vector", "unroll", "gpu_block", "gpu_thread"};

static void put_block(R *r, IrRef s, int level);
static int innermost(const R *r, const IrNode *x);

/* The statements of a block, or NULL past a broken kernel's end. */
static const IrNode *stmt_at(const R *r, IrRef s) { return s && s < r->k->n ? &r->k->nodes[s] : NULL; }

#define MAX_LANE_ACCS 16 /* accumulators one vector loop may update in lanes */

/* The accumulators the body of vector loop x updates, if the SIMD dialect
 * can give each its own lanes: the body is stores and updates only (no
 * loops, no declarations), the accumulators are f32, f64 or integers, the
 * width is a power of two, and no value in the body reads an accumulator
 * it updates (lanes hold partial results). Their numbers into accs; the
 * count, 0 when the body updates none, -1 when lanes are not possible. */
/* The lanes of vector loop x: its width, or more where the ISA wants more
 * vectors in flight (a multiple of the width: the same order on any ISA
 * of as many lanes). */
static int lanes_of(const R *r, const IrNode *x)
{
    int w = (int)x->width;
    while (r->isa && w < r->isa->lanes && w <= 32) w *= 2;
    return w;
}

static int lane_accs(R *r, const IrNode *x, int *accs)
{
    int n = 0;
    if (x->width < 2 || x->width > 64 || (x->width & (x->width - 1))) return -1;
    for (IrRef s = x->child; s; s = r->k->nodes[s].next) {
        const IrNode *y = stmt_at(r, s);
        if (!y || (y->kind != IR_STORE && y->kind != IR_UPDATE)) return -1;
        if (y->kind != IR_UPDATE) continue;
        const IrNode *v = value_at(r->k, y->a, s);
        if (!v || (v->dtype != KN_F32 && v->dtype != KN_F64 && dt_is_float((kn_dtype)v->dtype))) return -1;
        int seen = 0;
        for (int i = 0; i < n; i++) seen |= accs[i] == y->var;
        if (!seen && n == MAX_LANE_ACCS) return -1;
        if (!seen) accs[n++] = y->var;
    }
    for (IrRef s = x->child; s; s = r->k->nodes[s].next) {
        if (!dag_build(r, r->k->nodes[s].a, s)) return -1;
        for (int i = 0; i < r->d->n; i++) {
            const IrNode *v = &r->k->nodes[r->d->v[i].ref];
            for (int j = 0; v->kind == IR_ACCVAL && j < n; j++)
                if (v->var == accs[j]) return -1;
        }
    }
    return n;
}

/* The update statement of accumulator acc in the body of x (its op and dtype). */
static const IrNode *acc_update(const R *r, const IrNode *x, int acc, kn_dtype *dt)
{
    for (IrRef s = x->child; s; s = r->k->nodes[s].next) {
        const IrNode *y = &r->k->nodes[s], *v;
        if (y->kind == IR_UPDATE && y->var == acc && (v = value_at(r->k, y->a, s))) {
            *dt = (kn_dtype)v->dtype;
            return y;
        }
    }
    return NULL;
}

/* acc = acc op lane[i]: the combination of an accumulator's lanes. */
static void put_combine(R *r, const IrNode *u, kn_dtype dt, const char *dst, const char *src)
{
    int fl = dt_is_float(dt);
    if (u->op == OP_RMAX) put(r->o, "%s = %s(%s, %s);", dst, fl ? (dt == KN_F32 ? "kn_accmaxf" : "kn_accmax") : "kn_imax", dst, src);
    else if (fl) put(r->o, "%s = %s + %s;", dst, dst, src);
    else put(r->o, "%s = (int64_t)((uint64_t)%s + (uint64_t)%s);", dst, dst, src);
}

/* The bytes of one vector register of the SIMD dialect's instruction set,
 * for the GNU C vectors of lane accumulators; 0: none. */
static int vec_bytes(const CIsa *isa)
{
    if (!isa) return 0;
    if (!strcmp(isa->name, "avx512")) return 64;
    if (!strcmp(isa->name, "avx2")) return 32;
    if (!strcmp(isa->name, "sse2") || !strcmp(isa->name, "neon") || !strcmp(isa->name, "wasm128")) return 16;
    return 0;
}

/* dst = dst op src on GNU C vectors of an accumulator's lanes, as
 * put_combine on each lane, through masks of compares (the vector ?: is C++
 * only); integer sums wrap as uint64. A float max is two chains, each of a
 * compare and a blend where kn_accmaxf's one chain has two compares: dst
 * takes src where dst < src, and nan (aN_qK) takes src while it is not NaN,
 * so it ends as the lane's first NaN if there is one, which put_lanes then
 * puts in dst: kn_accmaxf's result, bit for bit (it keeps the first NaN and,
 * of equal values, the first). Where src is a direct_load (redo), dst
 * takes KN_VMAXF(src, dst), one instruction on x86 and the same value but
 * where a NaN is, and nan is a mask that records a NaN in src: put_lanes
 * then redoes the lanes serially, so NaN costs time, never bits (softmax
 * 4096x1024's row max, one thread: 0.426 -> 0.407 ns/element for the
 * kernel). */
static void put_vcombine(R *r, const IrNode *u, kn_dtype dt, int acc, const char *dst, const char *src, const char *nan,
                         int redo)
{
    int fl = dt_is_float(dt);
    if (u->op == OP_RMAX && fl && redo)
        put(r->o, "%s = %s(%s, %s); %s = %s | (%s != %s);", dst, dt == KN_F32 ? "KN_VMAXF" : "KN_VMAX", src, dst, nan,
            nan, src, src);
    else if (u->op == OP_RMAX && fl)
        put(r->o,
            "{ __typeof__(%s == %s) m_ = %s < %s; %s = (a%d_vt)((m_ & (__typeof__(m_))%s) | (~m_ & (__typeof__(m_))%s)); "
            "m_ = %s == %s; %s = (a%d_vt)((m_ & (__typeof__(m_))%s) | (~m_ & (__typeof__(m_))%s)); }",
            dst, dst, dst, src, dst, acc, src, dst, nan, nan, nan, acc, src, nan);
    else if (u->op == OP_RMAX)
        put(r->o, "{ __typeof__(%s > %s) m_ = %s > %s; %s = (m_ & %s) | (~m_ & %s); }", src, dst, src, dst, dst, src, dst);
    else if (fl) put(r->o, "%s = %s + %s;", dst, dst, src);
    else put(r->o, "%s = (a%d_vt)((a%d_ut)%s + (a%d_ut)%s);", dst, acc, acc, dst, acc, src);
}

/* The load that update u of vector loop s_v adds (or maxes) in as it is:
 * its buffer holds the accumulator's own C type, no data-dependent offset,
 * and the index is s_v + terms without s_v (unit stride); else NULL. */
static const IrNode *direct_load(const R *r, const IrNode *u, int v)
{
    const IrNode *x = u && u->a && u->a < r->k->n ? &r->k->nodes[u->a] : NULL;
    const ExprNode *e = x ? expr_node(r->k->ex, x->index) : NULL;
    int units = 0;
    if (!e || x->kind != IR_LOAD || x->a || x->buf < 0 || x->buf >= r->k->nbufs) return NULL;
    if (x->dtype != KN_F32 && x->dtype != KN_F64 && x->dtype != KN_I64) return NULL;
    if (e->kind == EX_SYM) return e->c == v ? x : NULL;
    if (e->kind != EX_ADD) return NULL;
    for (int i = 0; i < e->n; i++) {
        const ExprNode *a = expr_node(r->k->ex, e->args[i]);
        if (a && a->kind == EX_SYM && a->c == v) units++;
        else if (expr_has_sym(r->k->ex, e->args[i], v)) return NULL;
    }
    return units == 1 ? x : NULL;
}

/* Every statement of vector loop x is an update of an accumulator in lanes
 * on GNU C vectors (nv[i] > 0) that adds a direct_load: with KN_VEC, each
 * group's vectors come straight from the buffer, and the lane loop, which
 * would only copy them to aN_n (a store and a reload a vector), is not
 * run (softmax 4096x1024's max and sum loops, one thread: 0.51 -> 0.46
 * ns/element for the kernel). */
static int all_direct(const R *r, const IrNode *x, const int *accs, const int *nv, int na)
{
    for (IrRef s = x->child; s; s = r->k->nodes[s].next) {
        const IrNode *y = &r->k->nodes[s];
        int i = 0;
        while (i < na && !(y->kind == IR_UPDATE && y->var == accs[i])) i++;
        if (i == na || !nv[i] || !direct_load(r, y, x->var)) return 0;
    }
    return 1;
}

/* One step of folding an accumulator's lanes, l[0, h) op= l[h, 2h), on GNU C
 * vectors of h lanes: put_combine's operations lane by lane (a float max
 * kn_accmaxf's: src taken where dst is not NaN and src is not <= dst), so
 * the bits of the scalar steps, in a few vector instructions where gcc
 * leaves the scalar loops of kn_accmaxf scalar (softmax 4096x1024, one
 * thread: the row max's 32 lanes took ~300 instructions a row). */
static void put_vfold(R *r, const IrNode *u, kn_dtype dt, int acc, int h, int esz, int level)
{
    int fl = dt_is_float(dt), bytes = h * esz;
    indent(r->o, level);
    put(r->o, "{ typedef %s f_t __attribute__((vector_size(%d))); f_t d_, s_; ", fl ? dts[dt].value : "int64_t", bytes);
    put(r->o, "memcpy(&d_, a%d_l, %d); memcpy(&s_, a%d_l + %d, %d); ", acc, bytes, acc, h, bytes);
    if (u->op == OP_RMAX)
        put(r->o, "{ __typeof__(d_ == d_) m_ = %s; d_ = (f_t)((m_ & (__typeof__(m_))s_) | (~m_ & (__typeof__(m_))d_)); } ",
            fl ? "(d_ == d_) & ~(s_ <= d_)" : "s_ > d_");
    else if (fl) put_str(r->o, "d_ = d_ + s_; ");
    else put(r->o, "{ typedef uint64_t u_t __attribute__((vector_size(%d))); d_ = (f_t)((u_t)d_ + (u_t)s_); } ", bytes);
    put(r->o, "memcpy(a%d_l, &d_, %d); }\n", acc, bytes);
}

/* After the vector loop of x, where max accumulator acc's NaN masks
 * (aN_qK) saw a NaN: its lanes again, serially from their start, as the
 * lane loop without KN_VEC takes them (kn_accmaxf keeps a lane's first NaN,
 * whose bits KN_VMAXF may have lost); else nothing. */
static void put_redo(R *r, const IrNode *x, const IrNode *u, kn_dtype dt, int acc, int w, int nv, int level)
{
    const IrNode *ld = direct_load(r, u, x->var);
    int v = x->var, vb = vec_bytes(r->isa);
    indent(r->o, level);
    put(r->o, "{ __typeof__(a%d_q0) o_ = a%d_q0", acc, acc);
    for (int k = 1; k < nv; k++) put(r->o, " | a%d_q%d", acc, k);
    put(r->o, "; int64_t w_[%d], any_ = 0; memcpy(w_, &o_, %d); for (int l = 0; l < %d; l++) any_ |= w_[l];\n", vb / 8, vb,
        vb / 8);
    indent(r->o, level);
    put(r->o, "if (any_) { /* a NaN: the lanes again, for kn_accmaxf's bits */\n");
    indent(r->o, level + 1);
    put(r->o, "for (int l = 0; l < %d; l++) a%d_l[l] = -INFINITY;\n", w, acc);
    indent(r->o, level + 1);
    put(r->o, "for (int64_t s%d = 0; s%d < s%d_o; s%d++) a%d_l[s%d %% %d] = %s(a%d_l[s%d %% %d], b%d[", v, v, v, v, acc, v, w,
        dt == KN_F32 ? "kn_accmaxf" : "kn_accmax", acc, v, w, (int)ld->buf);
    put_index(r->o, r->k->ex, ld->index, 0);
    put_str(r->o, "]);\n");
    for (int k = 0; k < nv; k++) {
        indent(r->o, level + 1);
        put(r->o, "memcpy(&a%d_v%d, a%d_l + %d, %d);\n", acc, k, acc, k * (w / nv), vb);
    }
    indent(r->o, level);
    put_str(r->o, "} }\n");
}


/* The rest of vector loop x's extent, from s_o on (its symbol s), as a plain
 * loop of x's body at level: the tail that whole vectors did not cover. */
/* Where loop x ends: hi for a parallel loop's range, else its extent. */
static void put_end(R *r, const IrNode *x)
{
    if (x->var == r->range) put_str(r->o, "hi");
    else put_index(r->o, r->k->ex, x->index, 0);
}

static void put_rest(R *r, const IrNode *x, int level)
{
    int v = x->var;
    indent(r->o, level);
    put(r->o, "for (int64_t s%d = s%d_o; s%d < ", v, v, v);
    put_end(r, x);
    put(r->o, "; s%d++) {\n", v);
    put_block(r, x->child, level + 1);
    indent(r->o, level);
    put_str(r->o, "}\n");
}

/* A vector loop whose body updates accumulators, in the SIMD dialect:
 * each accumulator gets L lanes (the width, or a multiple of it the ISA
 * wants for more vectors in flight; starting at its op's identity) that
 * whole groups of L iterations update lane by lane, so the compiler
 * vectorises the lane loop without reassociating anything; the lanes are
 * then folded into the accumulator pairwise, and the last extent % L
 * iterations run as the plain loop. The order of the additions is fixed by
 * L alone: the same on every run and any number of threads.
 *
 * The lane loop writes a group's values to an array (aN_n), folded into
 * the lanes after it: with KN_VEC, into GNU C vectors of one register each
 * (a register-resident accumulator: an array updated in the lane loop stays
 * in memory under gcc, and every group waits on a store and a reload:
 * layer_norm 4096x1024 0.235 -> 0.19 ns/element, one thread), else lane by
 * lane into the array; the same operations on the same values in the same
 * order either way. */
static void put_lanes(R *r, const IrNode *x, const int *accs, int na, int level)
{
    int v = x->var, w = lanes_of(r, x), vb = vec_bytes(r->isa);
    kn_dtype dts_[MAX_LANE_ACCS];
    const IrNode *us[MAX_LANE_ACCS];
    int nv[MAX_LANE_ACCS]; /* vectors per accumulator; 0: the array only */
    int redo[MAX_LANE_ACCS]; /* a float max on KN_VMAX: NaN redoes its lanes (put_vcombine) */
    for (int i = 0; i < na; i++) {
        kn_dtype dt = KN_F32;
        const IrNode *u = acc_update(r, x, accs[i], &dt);
        int esz = dt == KN_F32 ? 4 : 8, per = vb / esz;
        dts_[i] = dt, us[i] = u;
        nv[i] = u && per > 1 && w % per == 0 && w / per <= 8 ? w / per : 0;
    }
    int direct = all_direct(r, x, accs, nv, na);
    for (int i = 0; i < na; i++)
        redo[i] = direct && nv[i] && dt_is_float(dts_[i]) && us[i]->op == OP_RMAX;
    indent(r->o, level);
    put(r->o, "{ /* vector(%u): %d lanes, then the rest */\n", (unsigned)x->width, w);
    for (int i = 0; i < na; i++) {
        kn_dtype dt = dts_[i];
        const IrNode *u = us[i];
        int fl = dt_is_float(dt);
        const char *ty = fl ? dts[dt].value : "int64_t";
        indent(r->o, level + 1);
        put(r->o, "%s a%d_l[%d], a%d_n[%d];\n", ty, accs[i], w, accs[i], w);
        indent(r->o, level + 1);
        put(r->o, "for (int l = 0; l < %d; l++) a%d_l[l] = %s;\n", w, accs[i], acc_init(u ? u->op : OP_SUM, fl));
        if (!nv[i]) continue;
        put_str(r->o, "#ifdef KN_VEC\n");
        indent(r->o, level + 1);
        put(r->o, "typedef %s a%d_vt __attribute__((vector_size(%d)));\n", ty, accs[i], vb);
        if (!fl && u->op == OP_SUM) { /* the integer sum wraps as uint64 */
            indent(r->o, level + 1);
            put(r->o, "typedef uint64_t a%d_ut __attribute__((vector_size(%d)));\n", accs[i], vb);
        }
        indent(r->o, level + 1);
        put(r->o, "a%d_vt", accs[i]);
        for (int k = 0; k < nv[i]; k++) put(r->o, "%s a%d_v%d", k ? "," : "", accs[i], k);
        if (fl && u->op == OP_RMAX && !redo[i])
            for (int k = 0; k < nv[i]; k++) put(r->o, ", a%d_q%d", accs[i], k);
        put_str(r->o, ";\n");
        if (redo[i]) { /* NaN masks */
            indent(r->o, level + 1);
            put(r->o, "__typeof__(a%d_v0 == a%d_v0)", accs[i], accs[i]);
            for (int k = 0; k < nv[i]; k++) put(r->o, "%s a%d_q%d", k ? "," : "", accs[i], k);
            put_str(r->o, ";\n");
        }
        for (int k = 0; k < nv[i]; k++) {
            indent(r->o, level + 1);
            put(r->o, "memcpy(&a%d_v%d, a%d_l + %d, %d);", accs[i], k, accs[i], k * (w / nv[i]), vb);
            if (redo[i]) put(r->o, " a%d_q%d = a%d_v%d != a%d_v%d;", accs[i], k, accs[i], k, accs[i], k);
            else if (fl && u->op == OP_RMAX) put(r->o, " a%d_q%d = a%d_v%d;", accs[i], k, accs[i], k);
            put_char(r->o, '\n');
        }
        put_str(r->o, "#endif\n");
    }
    indent(r->o, level + 1);
    put(r->o, "int64_t s%d_o = 0;\n", v);
    indent(r->o, level + 1);
    put(r->o, "for (; s%d_o + %d <= ", v, w);
    put_index(r->o, r->k->ex, x->index, 1);
    put(r->o, "; s%d_o += %d) {\n", v, w);
    if (direct) put_str(r->o, "#ifndef KN_VEC\n");
    indent(r->o, level + 2);
    put(r->o, "KN_LANES for (int s%d_l = 0; s%d_l < %d; s%d_l++) {\n", v, v, w, v);
    indent(r->o, level + 3);
    put(r->o, "const int64_t s%d = s%d_o + s%d_l;\n", v, v, v);
    r->lane = v;
    put_block(r, x->child, level + 3);
    r->lane = -1;
    indent(r->o, level + 2);
    put_str(r->o, "}\n");
    if (direct) put_str(r->o, "#endif\n");
    char dst[48], src[48];
    for (int i = 0; i < na; i++) {
        if (!us[i]) continue;
        if (nv[i]) put_str(r->o, "#ifdef KN_VEC\n");
        for (int k = 0; k < nv[i]; k++) { /* with KN_VEC: the group's values as vectors, folded into the lanes' */
            const IrNode *ld = direct ? direct_load(r, us[i], v) : NULL;
            indent(r->o, level + 2);
            if (ld) {
                put(r->o, "{ a%d_vt n_; { const int64_t s%d = s%d_o + %d; memcpy(&n_, &b%d[", accs[i], v, v, k * (w / nv[i]), (int)ld->buf);
                put_index(r->o, r->k->ex, ld->index, 0);
                put(r->o, "], %d); } ", vb);
            } else
                put(r->o, "{ a%d_vt n_; memcpy(&n_, a%d_n + %d, %d); ", accs[i], accs[i], k * (w / nv[i]), vb);
            snprintf(dst, sizeof dst, "a%d_v%d", accs[i], k);
            snprintf(src, sizeof src, "a%d_q%d", accs[i], k);
            put_vcombine(r, us[i], dts_[i], accs[i], dst, "n_", src, redo[i]);
            put_str(r->o, " }\n");
        }
        if (nv[i]) put_str(r->o, "#else\n");
        indent(r->o, level + 2);
        put(r->o, "for (int l = 0; l < %d; l++) ", w);
        snprintf(dst, sizeof dst, "a%d_l[l]", accs[i]);
        snprintf(src, sizeof src, "a%d_n[l]", accs[i]);
        put_combine(r, us[i], dts_[i], dst, src);
        put_char(r->o, '\n');
        if (nv[i]) put_str(r->o, "#endif\n");
    }
    indent(r->o, level + 1);
    put_str(r->o, "}\n");
    for (int i = 0; i < na; i++) {
        if (!nv[i]) continue;
        put_str(r->o, "#ifdef KN_VEC\n");
        if (redo[i]) put_redo(r, x, us[i], dts_[i], accs[i], w, nv[i], level + 1);
        for (int k = 0; k < nv[i] && !redo[i] && dt_is_float(dts_[i]) && us[i]->op == OP_RMAX; k++) { /* a lane's first NaN */
            indent(r->o, level + 1);
            put(r->o, "{ __typeof__(a%d_q%d == a%d_q%d) m_ = a%d_q%d != a%d_q%d; a%d_v%d = (a%d_vt)((m_ & (__typeof__(m_))a%d_q%d) | (~m_ & (__typeof__(m_))a%d_v%d)); }\n",
                accs[i], k, accs[i], k, accs[i], k, accs[i], k, accs[i], k, accs[i], accs[i], k, accs[i], k);
        }
        for (int k = 0; k < nv[i]; k++) {
            indent(r->o, level + 1);
            put(r->o, "memcpy(a%d_l + %d, &a%d_v%d, %d);\n", accs[i], k * (w / nv[i]), accs[i], k, vb);
        }
        put_str(r->o, "#endif\n");
    }
    for (int i = 0; i < na; i++) {
        kn_dtype dt = dts_[i];
        const IrNode *u = us[i];
        int esz = dt == KN_F32 ? 4 : 8, h = w / 2;
        if (nv[i]) { /* with KN_VEC: the halvings of two lanes or more on GNU C vectors */
            put_str(r->o, "#ifdef KN_VEC\n");
            for (; h >= 2; h /= 2) put_vfold(r, u, dt, accs[i], h, esz, level + 1);
            put_str(r->o, "#else\n");
        }
        for (int k = w / 2; k >= 1 && u; k /= 2) {
            if (k == h && nv[i]) put_str(r->o, "#endif\n");
            indent(r->o, level + 1);
            put(r->o, "for (int l = 0; l < %d; l++) ", k);
            snprintf(dst, sizeof dst, "a%d_l[l]", accs[i]);
            snprintf(src, sizeof src, "a%d_l[l + %d]", accs[i], k);
            put_combine(r, u, dt, dst, src);
            put_char(r->o, '\n');
        }
        indent(r->o, level + 1);
        snprintf(dst, sizeof dst, "a%d", accs[i]);
        snprintf(src, sizeof src, "a%d_l[0]", accs[i]);
        if (u) put_combine(r, u, dt, dst, src);
        put_char(r->o, '\n');
    }
    put_rest(r, x, level + 1);
    indent(r->o, level);
    put_str(r->o, "}\n");
}

#define STREAM_MIN_BYTES (8 << 20) /* an output this large outgrows a core's caches */

/* The store of vector loop x, if the SIMD dialect streams it: the body is
 * that one plain f32 store, unit stride in x's symbol with no data-dependent
 * offset, to a buffer of STREAM_MIN_BYTES or more that the kernel never
 * loads, and the instruction set has non-temporal stores (its header
 * defines KN_NT); else NULL. Such an output is written once and not read
 * again here, so its lines need not come into the cache only to be
 * overwritten (layer_norm 4096x1024's kernel, one thread, side by side:
 * 0.28 -> 0.19 ns/element; 0.41 -> 0.32 on a loaded machine). An output
 * read again soon after the kernel comes from memory instead of the last
 * level cache: past 8 MiB, little of it would still be in a core's. */
static const IrNode *stream_store(const R *r, const IrNode *x)
{
    const IrNode *y = stmt_at(r, x->child);
    if (!r->isa || !strstr(r->isa->header, "KN_NT(") || x->dtype != LOOP_VECTOR || !y || y->next)
        return NULL;
    if (y->kind != IR_STORE || y->op || y->b || y->buf < 0 || y->buf >= r->k->nbufs) return NULL;
    const IrBuf *b = &r->k->bufs[y->buf];
    const ExprNode *size = expr_node(r->k->ex, b->size), *e = expr_node(r->k->ex, y->index);
    if (b->dtype != KN_F32 || !size || size->kind != EX_CONST || size->c < STREAM_MIN_BYTES / 4 || !e) return NULL;
    int units = 0, v = x->var;
    if (e->kind == EX_SYM) units = e->c == v;
    for (int i = 0; e->kind == EX_ADD && i < e->n; i++) {
        const ExprNode *a = expr_node(r->k->ex, e->args[i]);
        if (a && a->kind == EX_SYM && a->c == v) units++;
        else if (expr_has_sym(r->k->ex, e->args[i], v)) return NULL;
    }
    if (units != 1) return NULL;
    for (uint32_t i = 1; i < r->k->n; i++)
        if (r->k->nodes[i].kind == IR_LOAD && r->k->nodes[i].buf == y->buf) return NULL;
    return y;
}

/* Streamed vector loop x (stream_store): groups of 16 elements computed
 * into nt_ (in L1, vectorised as the plain loop), each then stored to the
 * buffer by KN_STREAM64; the rest of the extent as the plain loop; a fence
 * after it, so that the stores are seen before the threads' join. */
static void put_stream(R *r, const IrNode *x, const IrNode *st, int level)
{
    int v = x->var;
    indent(r->o, level);
    put(r->o, "{ /* vector(%u), streamed: b%d is stored here once and never loaded */\n", (unsigned)x->width, (int)st->buf);
    indent(r->o, level + 1);
    put(r->o, "float nt_[16];\n");
    indent(r->o, level + 1);
    put(r->o, "int64_t s%d_o = 0;\n", v);
    indent(r->o, level + 1);
    put(r->o, "for (; s%d_o + 16 <= ", v);
    put_index(r->o, r->k->ex, x->index, 1);
    put(r->o, "; s%d_o += 16) {\n", v);
    indent(r->o, level + 2);
    put(r->o, "KN_IVDEP for (int s%d_l = 0; s%d_l < 16; s%d_l++) {\n", v, v, v);
    indent(r->o, level + 3);
    put(r->o, "const int64_t s%d = s%d_o + s%d_l;\n", v, v, v);
    r->stream = v;
    put_block(r, x->child, level + 3);
    r->stream = -1;
    indent(r->o, level + 2);
    put_str(r->o, "}\n");
    indent(r->o, level + 2);
    put(r->o, "{ const int64_t s%d = s%d_o; KN_STREAM64(&b%d[", v, v, (int)st->buf);
    put_index(r->o, r->k->ex, st->index, 0);
    put_str(r->o, "], nt_); }\n");
    indent(r->o, level + 1);
    put_str(r->o, "}\n");
    put_rest(r, x, level + 1);
    indent(r->o, level + 1);
    put_str(r->o, "KN_SFENCE();\n");
    indent(r->o, level);
    put_str(r->o, "}\n");
}

/* ---- the next row, prefetched ----
 * A loop whose body makes several passes over a row (softmax: max, exp,
 * sum, scale; layer_norm: mean, variance, output) reads its row from
 * memory in the first pass, whose loads then wait on each line: the
 * hardware prefetcher follows a stream only within a 4 KiB page, so it
 * starts again at every row of 4 KiB. After the first pass, the SIMD
 * dialect prefetches the lines the first pass will read in the next
 * iteration, which come in while the later passes compute (kiln bench ops,
 * 2 threads, median of 8 runs alternating with the build without it, a
 * loaded machine: softmax 4096x1024 0.63 -> 0.82x memcpy).
 * What qualifies (prefetch_pass): the first loop of x's body is innermost,
 * of constant extent, another loop follows it, and it loads a buffer at
 * unit stride in its var, at an index of x's var, a row of PF_MIN_BYTES
 * to PF_MAX_BYTES (larger rows would push the current one out of L1). */
#define PF_MIN_BYTES 1024
#define PF_MAX_BYTES (32 << 10)
#define PF_LOADS 8 /* distinct rows prefetched, at most */

static int innermost(const R *r, const IrNode *x);

/* Index e is rest + s<v> with rest free of s<v>. */
static int unit_stride(const ExprTable *t, ExprId e, int v)
{
    const ExprNode *n = expr_node(t, e);
    if (!n) return 0;
    if (n->kind == EX_SYM) return n->c == v;
    int units = 0;
    for (int i = 0; n->kind == EX_ADD && i < n->n; i++) {
        const ExprNode *a = expr_node(t, n->args[i]);
        if (a && a->kind == EX_SYM && a->c == v) units++;
        else if (expr_has_sym(t, n->args[i], v)) return 0;
    }
    return units == 1;
}

/* The first pass of loop x: its first statement that is a loop, if it
 * qualifies (above), with the loads to prefetch in at[] (*n of them). */
static IrRef prefetch_pass(R *r, const IrNode *x, const IrNode **at, int *n)
{
    *n = 0;
    if (!r->isa || r->k->tile || x->kind != IR_LOOP) return 0;
    IrRef first = 0;
    for (IrRef s = x->child; s && s < r->k->n && !first; s = r->k->nodes[s].next)
        if (r->k->nodes[s].kind == IR_LOOP) first = s;
    const IrNode *l = stmt_at(r, first);
    int64_t ext;
    if (!l || !innermost(r, l) || !expr_as_const(r->k->ex, l->index, &ext)) return 0;
    int more = 0;
    for (IrRef s = l->next; s && s < r->k->n && !more; s = r->k->nodes[s].next) more = r->k->nodes[s].kind == IR_LOOP;
    if (!more) return 0;
    for (IrRef s = l->child; s && s < r->k->n; s = r->k->nodes[s].next) {
        const IrNode *y = &r->k->nodes[s];
        if ((y->kind != IR_STORE && y->kind != IR_UPDATE) || !dag_build(r, y->a, s)) return 0;
        for (int i = 0; i < r->d->n; i++) {
            const IrNode *v = &r->k->nodes[r->d->v[i].ref];
            if (v->kind != IR_LOAD || v->a || v->buf < 0 || v->buf >= r->k->nbufs) continue;
            double bytes = (double)ext * (double)kn_dtype_size((kn_dtype)r->k->bufs[v->buf].dtype);
            if (bytes < PF_MIN_BYTES || bytes > PF_MAX_BYTES || !unit_stride(r->k->ex, v->index, l->var) ||
                !expr_has_sym(r->k->ex, v->index, x->var))
                continue;
            int dup = 0;
            for (int j = 0; j < *n; j++) dup |= at[j]->buf == v->buf && at[j]->index == v->index;
            if (!dup && *n < PF_LOADS) at[(*n)++] = v;
        }
    }
    return *n ? first : 0;
}

/* After loop x's first pass: the lines its loads read at x's next
 * iteration. x's var is declared again in an inner block as the next one,
 * so the loads' indices render as they are. */
static void put_prefetch(R *r, const IrNode *x, int level)
{
    const IrNode *at[PF_LOADS];
    int n, v = x->var;
    const IrNode *l = stmt_at(r, prefetch_pass(r, x, at, &n));
    if (!l) return;
    indent(r->o, level);
    put(r->o, "if (s%d + 1 < ", v);
    put_index(r->o, r->k->ex, x->index, 1);
    put(r->o, ") { /* the first pass's lines of the next row, while the other passes run */\n");
    indent(r->o, level + 1);
    put(r->o, "const int64_t s%d_n = s%d + 1;\n", v, v);
    indent(r->o, level + 1);
    put(r->o, "{\n");
    indent(r->o, level + 2);
    put(r->o, "const int64_t s%d = s%d_n;\n", v, v);
    for (int i = 0; i < n; i++) {
        indent(r->o, level + 2);
        put(r->o, "for (int64_t s%d = 0; s%d < ", (int)l->var, (int)l->var);
        put_index(r->o, r->k->ex, l->index, 0);
        put(r->o, "; s%d += %d) KN_PREFETCH(&b%d[", (int)l->var, 64 / (int)kn_dtype_size((kn_dtype)r->k->bufs[at[i]->buf].dtype),
            (int)at[i]->buf);
        put_index(r->o, r->k->ex, at[i]->index, 0);
        put_str(r->o, "]);\n");
    }
    indent(r->o, level + 1);
    put_str(r->o, "}\n");
    indent(r->o, level);
    put_str(r->o, "}\n");
}

/* ---- streams prefetched ahead ----
 * A long innermost loop that streams through large buffers at unit stride
 * (a pointwise kernel over a whole tensor, the optimizer's updates) waits
 * on memory where the hardware prefetcher falls behind: it follows a
 * stream only within a page, and starts again at each one. The SIMD
 * dialect runs such a loop in blocks of AHEAD_BLOCK iterations and, before
 * each block, prefetches the lines of every such load and store AHEAD
 * iterations on (kiln bench ops, 2 threads, median of 6 runs alternating
 * with the build without it: gelu(x*a+b) over 16M floats 0.66 -> 0.91x
 * memcpy; streamed past the caches instead, the gelu ran 0.39x on one
 * thread: this machine's memory is slower than its large L3). What qualifies (ahead_refs): x is a vector loop,
 * or a flat loop run over a range of threads, of AHEAD_MIN_ITERS or more
 * iterations, whose body is stores, and whose unit-stride accesses without
 * an offset to buffers of AHEAD_MIN_BYTES or more are the streams. */
#define AHEAD 1024
#define AHEAD_BLOCK 64
#define AHEAD_MIN_ITERS 4096
#define AHEAD_MIN_BYTES (1 << 20)

static int stream_ref(R *r, const IrNode *v, int var, const IrNode **at, int *n)
{
    const IrBuf *b = v->buf >= 0 && v->buf < r->k->nbufs ? &r->k->bufs[v->buf] : NULL;
    int64_t size;
    if (!b || v->kind == IR_LOAD ? v->a != 0 : v->b != 0) return 0;
    if (!expr_as_const(r->k->ex, b->size, &size) || (double)size * kn_dtype_size((kn_dtype)b->dtype) < AHEAD_MIN_BYTES ||
        !unit_stride(r->k->ex, v->index, var))
        return 0;
    for (int j = 0; j < *n; j++)
        if (at[j]->buf == v->buf && at[j]->index == v->index) return 0;
    if (*n == PF_LOADS) return -1;
    at[(*n)++] = v;
    return 0;
}

static int ahead_refs(R *r, const IrNode *x, const IrNode **at)
{
    int64_t ext;
    int n = 0;
    if (!r->isa || r->k->tile || !innermost(r, x) || !expr_as_const(r->k->ex, x->index, &ext) || ext < AHEAD_MIN_ITERS ||
        (x->dtype != LOOP_VECTOR && x->var != r->range))
        return 0;
    for (IrRef s = x->child; s && s < r->k->n; s = r->k->nodes[s].next) {
        const IrNode *y = &r->k->nodes[s];
        if (y->kind != IR_STORE || !dag_build(r, y->a, s) || stream_ref(r, y, x->var, at, &n) < 0) return 0;
        for (int i = 0; i < r->d->n; i++) {
            const IrNode *v = &r->k->nodes[r->d->v[i].ref];
            if (v->kind == IR_LOAD && stream_ref(r, v, x->var, at, &n) < 0) return 0;
        }
    }
    return n;
}

/* Loop x (ahead_refs gave its n streams at[]) in blocks, each after the
 * prefetches of its streams' lines AHEAD iterations on, then the rest. */
static void put_ahead(R *r, const IrNode *x, const IrNode **at, int n, int level)
{
    int v = x->var;
    indent(r->o, level);
    put(r->o, "{ /* %s, its %d stream%s prefetched %d iterations ahead */\n",
        x->dtype == LOOP_VECTOR ? "vector" : "parallel: this thread's range", n, n > 1 ? "s" : "", AHEAD);
    indent(r->o, level + 1);
    put(r->o, "int64_t s%d_o = %s;\n", v, x->var == r->range ? "lo" : "0");
    indent(r->o, level + 1);
    put(r->o, "for (; s%d_o + %d <= ", v, AHEAD_BLOCK);
    put_end(r, x);
    put(r->o, "; s%d_o += %d) {\n", v, AHEAD_BLOCK);
    indent(r->o, level + 2);
    put(r->o, "if (s%d_o + %d < ", v, AHEAD + AHEAD_BLOCK);
    put_index(r->o, r->k->ex, x->index, 1);
    put(r->o, ") {\n");
    indent(r->o, level + 3);
    put(r->o, "const int64_t s%d = s%d_o + %d;\n", v, v, AHEAD);
    for (int i = 0; i < n; i++) {
        int esz = (int)kn_dtype_size((kn_dtype)r->k->bufs[at[i]->buf].dtype);
        for (int j = 0; j < AHEAD_BLOCK * esz; j += 64) {
            indent(r->o, level + 3);
            put(r->o, "KN_PREFETCH(&b%d[", (int)at[i]->buf);
            put_index(r->o, r->k->ex, at[i]->index, 0);
            put(r->o, "] + %d);\n", j / esz);
        }
    }
    indent(r->o, level + 2);
    put_str(r->o, "}\n");
    indent(r->o, level + 2);
    put(r->o, "KN_IVDEP for (int64_t s%d_l = 0; s%d_l < %d; s%d_l++) {\n", v, v, AHEAD_BLOCK, v);
    indent(r->o, level + 3);
    put(r->o, "const int64_t s%d = s%d_o + s%d_l;\n", v, v, v);
    put_block(r, x->child, level + 3);
    indent(r->o, level + 2);
    put_str(r->o, "}\n");
    indent(r->o, level + 1);
    put_str(r->o, "}\n");
    put_rest(r, x, level + 1);
    indent(r->o, level);
    put_str(r->o, "}\n");
}

/* Loop x of kind unroll(W): each group of W iterations written out, a block
 * per iteration with the var a constant there (all of them when W covers
 * a constant extent), then the rest as a loop. */
static void put_unroll(R *r, const IrNode *x, int level)
{
    int v = x->var, w = (int)x->width;
    int64_t e;
    int full = expr_as_const(r->k->ex, x->index, &e) && e <= w;
    indent(r->o, level);
    put(r->o, "{ /* unroll(%d) */\n", w);
    if (!full) {
        indent(r->o, level + 1);
        put(r->o, "int64_t s%d_o = 0;\n", v);
        indent(r->o, level + 1);
        put(r->o, "for (; s%d_o + %d <= ", v, w);
        put_end(r, x);
        put(r->o, "; s%d_o += %d) {\n", v, w);
    }
    for (int j = 0; j < (full ? (int)e : w); j++) {
        indent(r->o, level + 1 + !full);
        if (full) put(r->o, "{\n"), indent(r->o, level + 2), put(r->o, "const int64_t s%d = %d;\n", v, j);
        else put(r->o, "{\n"), indent(r->o, level + 3), put(r->o, "const int64_t s%d = s%d_o + %d;\n", v, v, j);
        put_block(r, x->child, level + 2 + !full);
        indent(r->o, level + 1 + !full);
        put_str(r->o, "}\n");
    }
    if (!full) {
        indent(r->o, level + 1);
        put_str(r->o, "}\n");
        put_rest(r, x, level + 1);
    }
    indent(r->o, level);
    put_str(r->o, "}\n");
}

/* ---- the scalar dialect's innermost loops ----
 * TinyCC computes what the text says, each time it says it: an index like
 * b1[s0*65536 + s1*1024 + s2] costs its multiplies and adds at every access
 * of every iteration, locals live in memory, and an accumulator goes
 * through memory at every update, whose next update waits on that store. So
 * the scalar dialect writes an innermost loop out for it (put_unrolled):
 * - an access whose index is a*s_v + rest + k (rest's terms free of the
 *   loop's var s_v, k a constant) goes through the pointer of its stream
 *   (its buffer, rest and a), set at each group of iterations to the
 *   element that an access of the stream makes at the group's first
 *   iteration, from rest's value computed once before the loop: the access
 *   is then p[k' + u*a], a constant offset. A stream's pointer comes from
 *   an access that every iteration makes (a store, or a load that is
 *   evaluated unconditionally or stays in bounds over the loops' ranges),
 *   so no pointer points outside its buffer; a load under a where's branch
 *   joins a stream but never starts one;
 * - the body is copied for UNROLL iterations a group (all of them when the
 *   extent is a constant up to UNROLL; one when the body is large), the
 *   copies in order; the rest of the extent runs one iteration at a time;
 * - a body of updates only, whose values read none of the accumulators it
 *   updates, updates each accumulator once a group by one expression that
 *   chains the copies' values in order, ((a + x0) + x1) + ...: the same
 *   operations in the same order, so the same bits, with the partial sums
 *   in registers;
 * - values the loop does not change (a row's scale, a mask of outer
 *   indices) are computed once before it, where that is safe whatever the
 *   loop does (un_hoist);
 * - a loop that only copies another buffer's elements, or stores +0, is a
 *   memcpy or memset (copy_src).
 * The SIMD dialect's loops are cc's to optimise and stay as they were. */

#define UNROLL 4             /* iterations a group */
#define UNROLL_CHAIN 8       /* iterations a group of a small chain of updates: half the trips of its
                                accumulator through memory (a product's sum of 1M elements alone, in
                                cache, best of 10: 1.09 -> 0.87 ms) */
#define UNROLL_MAX_VALUES 40 /* a body of more values is not copied: its loop's overhead is small beside it */
#define MAX_STREAMS 24
#define MAX_ACCESSES 64
#define MAX_HOISTS 16

typedef struct {
    int buf;
    ExprId index;  /* an access's index, for rest's terms */
    int64_t a, k0; /* the stride in s_v; the constant of the access the pointer points at */
    int rest;      /* the stream whose s<v>_r<rest> holds rest + k0 (the first with both); -1: none, 0 */
} Stream;

typedef struct {
    int buf;
    ExprId index;
    int stream, safe; /* stream -1 until one takes it; safe: made at every iteration */
    int64_t k;
} Access;

typedef struct Unroll {
    int v, u;        /* the loop's var; copies a group */
    int need_v;      /* the body names s_v outside its streams' accesses */
    int decl;        /* the body declares an accumulator: each copy in braces of its own */
    int chain;       /* updates only: chained (put_chain) */
    Stream st[MAX_STREAMS];
    Access ac[MAX_ACCESSES];
    int nst, nac;
    IrRef h[MAX_HOISTS], hs[MAX_HOISTS]; /* values the loop does not change, computed before it; their statements */
    int nh;
    uint8_t stored[MAX_BUFS], acc[MAX_ACCS]; /* buffers the body stores; accumulators it declares or updates */
} Unroll;

/* Term e of a sum: c*s_v (1, *c = c) or free of s_v (1, *c = 0); 0 otherwise. */
static int lin_term(const ExprTable *t, ExprId e, int v, int64_t *c)
{
    const ExprNode *x = expr_node(t, e), *f;
    *c = 0;
    if (!x) return 0;
    if (x->kind == EX_SYM && x->c == v) return *c = 1, 1;
    if (x->kind == EX_MUL && x->n == 1 && (f = expr_node(t, x->args[0])) && f->kind == EX_SYM && f->c == v)
        return *c = x->c, 1;
    return !expr_has_sym(t, e, v);
}

/* e = a*s_v + rest + k with rest's terms free of s_v: 1 (*a, *k), or 0. */
static int lin(const ExprTable *t, ExprId e, int v, int64_t *a, int64_t *k)
{
    const ExprNode *x = expr_node(t, e);
    *a = 0, *k = 0;
    if (!x) return 0;
    if (x->kind == EX_CONST) return *k = x->c, 1;
    if (x->kind != EX_ADD) return lin_term(t, e, v, a);
    *k = x->c;
    for (int i = 0; i < x->n; i++) {
        int64_t c;
        if (!lin_term(t, x->args[i], v, &c)) return 0;
        if (c && *a) return 0;
        if (c) *a = c;
    }
    return 1;
}

/* The terms of e free of s_v and not constant (rest), into out; their count. */
static int rest_terms(const ExprTable *t, ExprId e, int v, ExprId *out)
{
    const ExprNode *x = expr_node(t, e);
    int n = 0;
    if (!x || x->kind == EX_CONST) return 0;
    if (x->kind != EX_ADD) {
        if (!expr_has_sym(t, e, v)) out[n++] = e;
        return n;
    }
    for (int i = 0; i < x->n; i++)
        if (!expr_has_sym(t, x->args[i], v)) out[n++] = x->args[i];
    return n;
}

static int same_rest(const ExprTable *t, ExprId e1, ExprId e2, int v)
{
    ExprId a[EXPR_MAX_ARGS], b[EXPR_MAX_ARGS];
    int n = rest_terms(t, e1, v, a);
    if (n != rest_terms(t, e2, v, b)) return 0;
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return 0; /* canonical sums order their terms */
    return 1;
}

/* rest + k of index e, as put_index writes a sum */
static void put_rest_index(Out *o, const ExprTable *t, ExprId e, int v, int64_t k)
{
    ExprId a[EXPR_MAX_ARGS];
    int n = rest_terms(t, e, v, a);
    for (int i = 0; i < n; i++) {
        const ExprNode *y = expr_node(t, a[i]);
        if (y && y->kind == EX_MUL) put_term(o, t, y->c, y->args, y->n, i == 0);
        else put_term(o, t, 1, &a[i], 1, i == 0);
    }
    if (!n) put_int(o, k, 0);
    else if (k > 0) put(o, " + %lld", (long long)k);
    else if (k == INT64_MIN) put_str(o, " + INT64_MIN");
    else if (k < 0) put(o, " - %lld", -(long long)k);
}

/* The access of buffer buf at index, if the body's plan has one. */
static Access *un_find(Unroll *un, int buf, ExprId index)
{
    for (int i = 0; i < un->nac; i++)
        if (un->ac[i].buf == buf && un->ac[i].index == index) return &un->ac[i];
    return NULL;
}

/* Notes an access of the body; 0 when the plan has no room for it. */
static int un_note(Unroll *un, const ExprTable *t, int buf, ExprId index, int safe)
{
    int64_t a, k;
    Access *x = un_find(un, buf, index);
    if (x) return x->safe |= safe, 1;
    if (!lin(t, index, un->v, &a, &k)) return un->need_v |= expr_has_sym(t, index, un->v), 1; /* as written */
    if (un->nac == MAX_ACCESSES) return 0;
    x = &un->ac[un->nac++];
    x->buf = buf, x->index = index, x->safe = safe, x->k = k, x->stream = -1;
    return 1;
}

/* Whether value ref (of the DAG built) is the same at every iteration of
 * the loop and may be computed once before it: indices and rand without
 * s_v, accumulators the body neither declares nor updates, loads without
 * s_v of buffers the body does not store, in bounds over every loop's range
 * (so safe whether or not the loop's iterations would read them, and
 * however many there are), and ops of such values; never a check, which
 * reports. */
static int invariant(const R *r, const Unroll *un, IrRef ref, IrRef user, int depth)
{
    const Kernel *k = r->k;
    const IrNode *x = value_at(k, ref, user);
    int64_t lo, hi, size;
    if (!x || depth > IR_MAX_DEPTH) return 0;
    switch (x->kind) {
    case IR_CONST: return !x->index;
    case IR_ACCVAL: return x->var >= 0 && x->var < MAX_ACCS && !un->acc[x->var];
    case IR_INDEX:
    case IR_RAND: return !expr_has_sym(k->ex, x->index, un->v);
    case IR_LOAD:
        return !x->a && x->buf >= 0 && x->buf < MAX_BUFS && x->buf < k->nbufs && !un->stored[x->buf] &&
               !expr_has_sym(k->ex, x->index, un->v) && expr_as_const(k->ex, k->bufs[x->buf].size, &size) &&
               loopopt_range(k, x->index, &lo, &hi) && lo >= 0 && hi < size;
    case IR_OP:
        for (int i = 0; i < nops(x); i++)
            if (!invariant(r, un, operand(x, i), ref, depth + 1)) return 0;
        return 1;
    default: return 0;
    }
}

/* From ref (used by user, in statement s) down: the largest invariant
 * values worth a variable (loads and ops) go into the plan's hoisted ones;
 * what stays in the loop is marked live. */
static void un_hoist(R *r, Unroll *un, IrRef ref, IrRef user, IrRef s, int depth)
{
    const IrNode *x = value_at(r->k, ref, user);
    Val *v = x ? dag_find(r->d, ref, 0) : NULL;
    if (!v || v->live || depth > IR_MAX_DEPTH) return;
    if ((x->kind == IR_LOAD || x->kind == IR_OP) && invariant(r, un, ref, user, 0)) {
        int seen = 0;
        for (int i = 0; i < un->nh; i++) seen |= un->h[i] == ref;
        if (!seen && un->nh < MAX_HOISTS) un->hs[un->nh] = s, un->h[un->nh++] = ref;
        if (seen || un->nh <= MAX_HOISTS) return;
    }
    v->live = 1;
    for (int i = 0; i < nops(x); i++) un_hoist(r, un, operand(x, i), ref, s, depth + 1);
}

/* The hoisted value ref's number, or -1. */
static int un_hoisted(const Unroll *un, IrRef ref)
{
    for (int i = 0; un && i < un->nh; i++)
        if (un->h[i] == ref) return i;
    return -1;
}

static int is_hoisted(const R *r, IrRef ref) { return un_hoisted(r->un, ref) >= 0; }

/* A hoisted value, in a copy of the body, by the name of its variable: 1, or 0 if ref is none. */
static int put_hoisted(R *r, IrRef ref)
{
    int h = un_hoisted(r->un, ref);
    if (h >= 0) put(r->o, "s%d_h%d", r->un->v, h);
    return h >= 0;
}

/* Loads of statement s's value into the plan (the DAG built), and whether
 * the body names s_v elsewhere; 0 when the plan has no room. */
static int un_loads(R *r, Unroll *un)
{
    const Kernel *k = r->k;
    for (int i = 0; i < r->d->n; i++) {
        const IrNode *x = &k->nodes[r->d->v[i].ref];
        int64_t lo, hi, size;
        if (!r->d->v[i].live) continue; /* hoisted, or only below a hoisted value */
        if (x->kind == IR_LOAD && !x->a) {
            int safe = r->d->v[i].uncond ||
                       (x->buf >= 0 && x->buf < k->nbufs && expr_as_const(k->ex, k->bufs[x->buf].size, &size) &&
                        loopopt_range(k, x->index, &lo, &hi) && lo >= 0 && hi < size);
            if (!un_note(un, k->ex, x->buf, x->index, safe)) return 0;
        } else if ((x->kind == IR_LOAD || x->kind == IR_INDEX || x->kind == IR_RAND) &&
                   expr_has_sym(k->ex, x->index, un->v)) {
            un->need_v = 1;
        }
    }
    return 1;
}

/* Plans the scalar dialect's writing of innermost loop x (above): 1, or 0
 * to write it as it is (nothing goes through a pointer, or the plan has no
 * room). */
static int un_plan(R *r, const IrNode *x, Unroll *un)
{
    const Kernel *k = r->k;
    int64_t e, a, kk;
    int values = 0, updates = 0, stores = 0;
    memset(un, 0, sizeof *un);
    un->v = x->var;
    for (IrRef s = x->child; s; s = k->nodes[s].next) { /* what the body changes */
        const IrNode *y = stmt_at(r, s);
        if (!y || (y->kind != IR_STORE && y->kind != IR_UPDATE && y->kind != IR_ACC)) return 0;
        if (y->kind == IR_STORE && (y->buf < 0 || y->buf >= MAX_BUFS)) return 0;
        if (y->kind != IR_STORE && (y->var < 0 || y->var >= MAX_ACCS)) return 0;
        if (y->kind == IR_STORE) un->stored[y->buf] = 1;
        else un->acc[y->var] = 1;
    }
    for (IrRef s = x->child; s; s = k->nodes[s].next) {
        const IrNode *y = stmt_at(r, s);
        if (y->kind == IR_ACC) {
            updates = stores = 1 << 20; /* a declaration in the body: no chain */
            un->decl = 1;
            continue;
        }
        if (y->kind == IR_STORE) {
            stores++;
            if (!y->b && !un_note(un, k->ex, y->buf, y->index, 1)) return 0;
            if (y->b || !lin(k->ex, y->index, un->v, &a, &kk)) un->need_v |= expr_has_sym(k->ex, y->index, un->v);
            if (y->b && (!dag_build(r, y->b, s) || (un_hoist(r, un, y->b, s, s, 0), !un_loads(r, un)))) return 0;
        } else {
            updates++;
        }
        if (!dag_build(r, y->a, s)) return 0;
        un_hoist(r, un, y->a, s, s, 0);
        if (!un_loads(r, un)) return 0;
        values += r->d->n;
        for (int i = 0; y->kind == IR_UPDATE && i < r->d->n; i++) { /* a chain reads no accumulator it updates */
            const IrNode *v = &k->nodes[r->d->v[i].ref];
            for (IrRef t = x->child; v->kind == IR_ACCVAL && t; t = k->nodes[t].next)
                if (k->nodes[t].kind == IR_UPDATE && k->nodes[t].var == v->var) stores = 1 << 20;
        }
        const IrNode *z = stmt_at(r, y->next);
        if (z && (z->kind == IR_STORE || z->kind == IR_UPDATE) && z->a == y->a) stores = 1 << 20; /* a shared value */
    }
    for (int i = 0; i < un->nac; i++) { /* streams: started by safe accesses, joined by any */
        Access *c = &un->ac[i];
        lin(k->ex, c->index, un->v, &a, &kk);
        for (int j = 0; j < un->nst && c->stream < 0; j++)
            if (un->st[j].buf == c->buf && un->st[j].a == a && same_rest(k->ex, un->st[j].index, c->index, un->v))
                c->stream = j;
        if (c->stream < 0 && c->safe && un->nst < MAX_STREAMS) {
            Stream *st = &un->st[un->nst];
            st->buf = c->buf, st->index = c->index, st->a = a, st->k0 = c->k;
            ExprId terms[EXPR_MAX_ARGS];
            st->rest = rest_terms(k->ex, c->index, un->v, terms) || c->k ? un->nst : -1;
            for (int j = 0; j < un->nst && st->rest == un->nst; j++)
                if (un->st[j].rest == j && un->st[j].k0 == c->k && same_rest(k->ex, un->st[j].index, c->index, un->v))
                    st->rest = j;
            c->stream = un->nst++;
        }
    }
    for (int i = 0; i < un->nac; i++) /* an access no stream took is written as it was */
        if (un->ac[i].stream < 0) un->need_v |= expr_has_sym(k->ex, un->ac[i].index, un->v);
    if (!un->nst && !un->nh) return 0;
    int chain = updates && !stores && !un->need_v; /* a chain is one expression: no s_v to declare */
    un->u = values > UNROLL_MAX_VALUES ? 1 : chain && values <= UNROLL_MAX_VALUES / 2 ? UNROLL_CHAIN : UNROLL;
    if (x->var != r->range && expr_as_const(k->ex, x->index, &e) && e < un->u) un->u = e > 1 ? (int)e : 1;
    un->chain = un->u > 1 && chain;
    return 1;
}

/* The access of buffer buf at index in the copy being written, as its
 * stream's pointer: 1, or 0 when it has none (written as it was). */
static int put_access(R *r, int buf, ExprId index)
{
    Access *c = r->un ? un_find((Unroll *)r->un, buf, index) : NULL;
    if (!c || c->stream < 0) return 0;
    const Stream *st = &r->un->st[c->stream];
    put(r->o, "s%d_q%d[", r->un->v, c->stream);
    put_int(r->o, c->k - st->k0 + (int64_t)r->un_u * st->a, 0);
    put_char(r->o, ']');
    return 1;
}

/* The update expression of copy u of the chain (r->chain), its
 * accumulator the chain of the copies before it. */
static void put_chain(R *r, int u)
{
    IrRef s = r->chain;
    const IrNode *x = &r->k->nodes[s], *v = value_at(r->k, x->a, s);
    kn_dtype dt = (kn_dtype)(v ? v->dtype : KN_F32);
    int fl = dt_is_float(dt), saved = r->un_u;
    const OpFmt *f = &ops[x->op == OP_RMAX ? OP_RMAX : OP_SUM];
    IrNode self = *x;
    self.dtype = (uint8_t)dt;
    r->un_u = u;
    int wrap = fl && f->wrap;
    if (wrap) put_part(r->o, dts[dt].wrap, 0);
    put_tmpl(r, fl ? f->flt : f->integer, &self, s, 0, x->var, 0);
    if (wrap) put_part(r->o, dts[dt].wrap, 1);
    r->un_u = saved;
}

/* One group of n copies of x's body from iteration `base` (a C name; the
 * loop's var itself if own, else each copy declares it where the body names
 * it): the streams' pointers, then the copies. */
static void put_group(R *r, const IrNode *x, Unroll *un, const char *base, int own, int n, int level)
{
    const Kernel *k = r->k;
    int v = x->var;
    for (int i = 0; i < un->nst; i++) {
        const Stream *st = &un->st[i];
        const IrBuf *b = &k->bufs[st->buf];
        int rest = st->rest >= 0;
        indent(r->o, level);
        put(r->o, "%s%s *s%d_q%d = b%d", b->role == BUF_IN ? "const " : "", dts[b->dtype].store, v, i, st->buf);
        if (rest || st->a) put_str(r->o, " + (");
        if (rest) put(r->o, "s%d_r%d", v, st->rest);
        if (st->a) put(r->o, "%s%s", st->a < 0 ? (rest ? " - " : "-") : rest ? " + " : "", base);
        if (st->a != 1 && st->a != -1 && st->a) put(r->o, "*%lld", st->a < 0 ? -(long long)st->a : (long long)st->a);
        put_str(r->o, rest || st->a ? ");\n" : ";\n");
    }
    r->un = un;
    if (un->chain) {
        for (IrRef s = x->child; s; s = k->nodes[s].next) {
            const IrNode *y = &k->nodes[s];
            if (!dag_build(r, y->a, s)) continue; /* planned: cannot fail */
            r->tsuffix = 1;
            for (int u = 0; u < n; u++) {
                for (int i = 0; i < r->d->n; i++) r->d->v[i].visited = 0;
                r->un_u = u;
                put_temps(r, y->a, s, level);
            }
            indent(r->o, level);
            put(r->o, "a%d = ", (int)y->var);
            r->chain = s;
            put_chain(r, n - 1);
            r->chain = 0, r->tsuffix = 0;
            put_str(r->o, ";\n");
        }
    } else {
        int decl = un->need_v && !own, braces = decl || (un->decl && n > 1);
        for (int u = 0; u < n; u++) {
            r->un_u = u;
            if (braces) indent(r->o, level), put_str(r->o, "{");
            if (decl) put(r->o, " const int64_t s%d = %s + %d;", v, base, u);
            if (braces) put_char(r->o, '\n');
            put_block(r, x->child, level + braces);
            if (braces) indent(r->o, level), put_str(r->o, "}\n");
        }
    }
    r->un = NULL, r->un_u = 0;
}

/* An innermost loop of the scalar dialect whose body is one store, at
 * stride 1, of a load of another buffer of the same dtype at stride 1 (or
 * of that load cast to its own dtype), or of a constant whose bits are all
 * 0: libc's memcpy or memset of the extent, the same bytes (f32, f64 and
 * integers other than bool, which the scalar code copies bit for bit; a
 * bool is normalised, an f16 NaN quieted) where TinyCC's loop moves an
 * element in a dozen instructions (a 9.4 MB copy, the parameter Adam
 * writes back, best of 5 runs: 2.5 -> 0.7 ms). Its source, or 0 for memset;
 * -1 if not.
 * A loop shorter than COPY_MIN is not worth the call. */
#define COPY_MIN 16
static int copy_src(const R *r, const IrNode *x, IrRef *src)
{
    const Kernel *k = r->k;
    const IrNode *y = stmt_at(r, x->child), *v;
    int64_t a, kk;
    if (!y || y->next || y->kind != IR_STORE || y->op || y->b || y->buf < 0 || y->buf >= k->nbufs) return -1;
    if (x->var != r->range && expr_as_const(k->ex, x->index, &a) && a < COPY_MIN) return -1;
    kn_dtype dt = (kn_dtype)k->bufs[y->buf].dtype;
    if (dt == KN_BOOL || dt == KN_F16 || dt == KN_BF16 || !lin(k->ex, y->index, x->var, &a, &kk) || a != 1) return -1;
    if (!(v = value_at(k, y->a, x->child))) return -1;
    if (v->kind == IR_OP && v->op == OP_CAST && v->dtype == dt) v = value_at(k, v->a, y->a);
    if (v && v->kind == IR_CONST && !v->index && v->imm == 0 && !signbit(v->imm)) return *src = 0, 0;
    if (!v || v->kind != IR_LOAD || v->a || v->buf == y->buf || v->dtype != dt || !lin(k->ex, v->index, x->var, &a, &kk) ||
        a != 1)
        return -1;
    *src = (IrRef)(v - k->nodes);
    return 0;
}

static void put_copy(R *r, const IrNode *x, IrRef src, int level)
{
    const Kernel *k = r->k;
    const IrNode *y = stmt_at(r, x->child);
    int v = x->var, range = x->var == r->range;
    int64_t e;
    int sized = range || !expr_as_const(k->ex, x->index, &e) || e < 1; /* an extent that may be 0 */
    indent(r->o, level);
    put(r->o, "{ /* s%d: %s */\n", v, src ? "a copy" : "zeros");
    indent(r->o, level + 1);
    put(r->o, "const int64_t s%d = %s, n_ = ", v, range ? "lo" : "0");
    if (range) put_str(r->o, "hi - lo");
    else put_index(r->o, k->ex, x->index, 0);
    put_str(r->o, ";\n");
    indent(r->o, level + 1);
    if (sized) put_str(r->o, "if (n_ > 0) ");
    put(r->o, "%s(&b%d[", src ? "memcpy" : "memset", (int)y->buf);
    put_index(r->o, k->ex, y->index, 0);
    if (src) {
        put(r->o, "], &b%d[", (int)k->nodes[src].buf);
        put_index(r->o, k->ex, k->nodes[src].index, 0);
        put(r->o, "], (size_t)n_ * sizeof *b%d);\n", (int)y->buf);
    } else {
        put(r->o, "], 0, (size_t)n_ * sizeof *b%d);\n", (int)y->buf);
    }
    indent(r->o, level);
    put_str(r->o, "}\n");
}

/* Innermost loop x of the scalar dialect as planned (un_plan): rest's
 * values, whole groups, then the iterations left one by one. */
static void put_unrolled(R *r, const IrNode *x, Unroll *un, int level)
{
    const Kernel *k = r->k;
    int v = x->var, range = x->var == r->range;
    int64_t e = 0;
    int whole = un->u > 1 && !range && expr_as_const(k->ex, x->index, &e) && e % un->u == 0; /* none left */
    char base[32];
    indent(r->o, level);
    put(r->o, "{ /* s%d: %d iterations a group through pointers (scalar dialect) */\n", v, un->u);
    for (int i = 0; i < un->nst; i++) {
        const Stream *st = &un->st[i];
        if (st->rest != i) continue;
        indent(r->o, level + 1);
        put(r->o, "const int64_t s%d_r%d = ", v, i);
        put_rest_index(r->o, k->ex, st->index, v, st->k0);
        put_str(r->o, ";\n");
    }
    for (int i = 0; i < un->nh; i++) { /* what the loop does not change, once */
        const IrNode *h = &k->nodes[un->h[i]];
        if (!dag_build(r, un->h[i], un->hs[i])) continue; /* planned: cannot fail */
        indent(r->o, level + 1);
        put(r->o, "const %s s%d_h%d = ", dts[h->dtype].value, v, i);
        put_value(r, un->h[i], un->hs[i], 0, 1); /* r->un unset: as the loop would write it */
        put_str(r->o, ";\n");
    }
    if (un->u > 1) {
        indent(r->o, level + 1);
        put(r->o, "int64_t s%d_o = %s;\n", v, range ? "lo" : "0");
        indent(r->o, level + 1);
        put(r->o, "for (; s%d_o + %d <= ", v, un->u);
        if (range) put_str(r->o, "hi");
        else put_index(r->o, k->ex, x->index, 1);
        put(r->o, "; s%d_o += %d) {\n", v, un->u);
        snprintf(base, sizeof base, "s%d_o", v);
        put_group(r, x, un, base, 0, un->u, level + 2);
        indent(r->o, level + 1);
        put_str(r->o, "}\n");
    }
    if (!whole) {
        indent(r->o, level + 1);
        if (un->u > 1) put(r->o, "for (int64_t s%d = s%d_o; s%d < ", v, v, v);
        else put(r->o, "for (int64_t s%d = %s; s%d < ", v, range ? "lo" : "0", v);
        if (range) put_str(r->o, "hi");
        else put_index(r->o, k->ex, x->index, 0);
        put(r->o, "; s%d++) {\n", v);
        snprintf(base, sizeof base, "s%d", v);
        Unroll one = *un;
        one.chain = 0;
        put_group(r, x, &one, base, 1, 1, level + 2);
        indent(r->o, level + 1);
        put_str(r->o, "}\n");
    }
    indent(r->o, level);
    put_str(r->o, "}\n");
}

static void put_loop(R *r, const IrNode *x, int level)
{
    int accs[MAX_LANE_ACCS], na = -1;
    Unroll un;
    IrRef src;
    if (x->dtype == LOOP_UNROLL && x->width > 1 && x->width <= 64 && level <= IR_MAX_NEST) {
        put_unroll(r, x, level);
        return;
    }
    if (!r->isa && !r->un && level <= IR_MAX_NEST && innermost(r, x) && copy_src(r, x, &src) == 0) {
        put_copy(r, x, src, level);
        return;
    }
    if (!r->isa && !r->un && level <= IR_MAX_NEST && innermost(r, x) && un_plan(r, x, &un)) {
        put_unrolled(r, x, &un, level);
        return;
    }
    if (r->isa && x->dtype == LOOP_VECTOR && r->lane < 0 && level <= IR_MAX_NEST) na = lane_accs(r, x, accs);
    if (na > 0) {
        put_lanes(r, x, accs, na, level);
        return;
    }
    if (na == 0 && level <= IR_MAX_NEST && stream_store(r, x)) {
        put_stream(r, x, stream_store(r, x), level);
        return;
    }
    const IrNode *refs[PF_LOADS];
    int nrefs = na <= 0 && level <= IR_MAX_NEST ? ahead_refs(r, x, refs) : 0;
    if (nrefs) {
        put_ahead(r, x, refs, nrefs, level);
        return;
    }
    indent(r->o, level);
    /* a parallel loop's iterations are independent too: an innermost one (Adam's update of a flat weight)
     * is vectorised without the overlap checks that gcc gives up on past ten pairs of buffers */
    if (r->isa && (x->dtype == LOOP_VECTOR || (x->dtype == LOOP_PARALLEL && innermost(r, x))))
        put_str(r->o, "KN_IVDEP ");
    if (x->var == r->range) put(r->o, "for (int64_t s%d = lo; s%d < hi; s%d++) {", (int)x->var, (int)x->var, (int)x->var);
    else {
        put(r->o, "for (int64_t s%d = 0; s%d < ", (int)x->var, (int)x->var);
        put_index(r->o, r->k->ex, x->index, 0);
        put(r->o, "; s%d++) {", (int)x->var);
    }
    if (x->dtype == LOOP_PARALLEL && x->var == r->range) put_str(r->o, " /* parallel: this thread's range */");
    else if (x->dtype == LOOP_VECTOR && r->isa) put(r->o, " /* vector(%u) */", (unsigned)x->width);
    else if (x->dtype == LOOP_VECTOR || x->dtype == LOOP_UNROLL)
        put(r->o, " /* %s(%u): serial in this dialect */", loop_kinds[x->dtype], (unsigned)x->width);
    else if (x->dtype != LOOP_SERIAL && x->dtype <= LOOP_GPU_THREAD)
        put(r->o, " /* %s: serial here */", loop_kinds[x->dtype]);
    put_char(r->o, '\n');
    const IrNode *at[PF_LOADS];
    int npf;
    IrRef row = r->pf_row, after = r->pf_after, first = level <= IR_MAX_NEST ? prefetch_pass(r, x, at, &npf) : 0;
    if (first) r->pf_row = (IrRef)(x - r->k->nodes), r->pf_after = first;
    if (level <= IR_MAX_NEST) put_block(r, x->child, level + 1);
    r->pf_row = row, r->pf_after = after;
    indent(r->o, level);
    put_str(r->o, "}\n");
}

/* b<buf>[index + offset], the element a store writes */
static void put_elem(R *r, IrRef s, const IrNode *x)
{
    if (!x->b && put_access(r, x->buf, x->index)) return;
    put(r->o, "b%d[", (int)x->buf);
    put_index(r->o, r->k->ex, x->index, 0);
    if (x->b) put_str(r->o, " + "), put_value(r, x->b, s, 0, 0);
    put_char(r->o, ']');
}

/* b[i] += v as interp.c's scatter_add: floats add in their value type and
 * round once on store (f16, bf16: exact, as ops on them), integers wrap */
static void put_add_store(R *r, IrRef s, const IrNode *x, const DtFmt *f, int level)
{
    int fl = f->fn != NULL;
    indent(r->o, level);
    put_elem(r, s, x);
    put_str(r->o, " = ");
    put_part(r->o, f->save, 0);
    if (!fl) put_part(r->o, f->wrap, 0), put_str(r->o, "(uint64_t)");
    put_part(r->o, f->load, 0), put_elem(r, s, x), put_part(r->o, f->load, 1);
    put_str(r->o, fl ? " + " : " + (uint64_t)");
    put_value(r, x->a, s, 0, 0);
    if (!fl) put_part(r->o, f->wrap, 1);
    put_part(r->o, f->save, 1);
    put_str(r->o, ";\n");
}

static void put_store(R *r, IrRef s, const IrNode *x, int level)
{
    const IrBuf *b = x->buf >= 0 && x->buf < r->k->nbufs ? &r->k->bufs[x->buf] : NULL;
    const char *save = b && b->dtype < KN_NDTYPES ? dts[b->dtype].save : "KN_BAD_STORE(%s)";
    begin_value(r, x->a, s, level);
    if (x->op == OP_SUM && b && b->dtype < KN_NDTYPES) {
        put_add_store(r, s, x, &dts[b->dtype], level);
        return;
    }
    indent(r->o, level);
    if (x->op) put_str(r->o, "KN_BAD_STORE_OP ");
    if (r->stream >= 0) put(r->o, "nt_[s%d_l]", r->stream);
    else put_elem(r, s, x);
    put_str(r->o, " = ");
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
    if (r->lane >= 0) { /* lanes: this group's value, folded in after the lane loop (put_lanes) */
        put(r->o, "a%d_n[s%d_l] = ", (int)x->var, r->lane);
        put_value(r, x->a, s, 1, 1);
        put_str(r->o, ";\n");
        return;
    }
    put(r->o, "a%d = ", (int)x->var);
    int wrap = fl && f->wrap;
    if (wrap) put_part(r->o, dts[dt].wrap, 0);
    put_tmpl(r, fl ? f->flt : f->integer, &self, s, 0, x->var, wrap ? bare_in(dts[dt].wrap, 1) : 1);
    if (wrap) put_part(r->o, dts[dt].wrap, 1);
    put_str(r->o, ";\n");
}

/* A top-level parallel loop runs as a range function on the thread pool
 * when nothing in it refers to an accumulator declared outside it (an
 * accumulator lives in one function). Its number among such loops, or -1. */
static int par_index(R *r, IrRef s)
{
    const IrNode *x = stmt_at(r, s);
    if (!x || x->kind != IR_LOOP || x->dtype != LOOP_PARALLEL) return -1;
    int n = 0;
    for (IrRef t = r->k->body; t && t != s; t = r->k->nodes[t].next) {
        const IrNode *y = stmt_at(r, t);
        if (!y) return -1;
        n += y->kind == IR_LOOP && y->dtype == LOOP_PARALLEL;
    }
    uint8_t declared[MAX_ACCS];
    memset(declared, 0, sizeof declared);
    IrRef stack[2 * IR_MAX_NEST + 4]; /* a pending next and a child per level */
    int depth = 0, room = (int)(sizeof stack / sizeof *stack);
    stack[depth++] = x->child;
    while (depth) { /* the statements below, depth first */
        IrRef t = stack[--depth];
        const IrNode *y = stmt_at(r, t);
        if (!y) continue;
        if (y->next) {
            if (depth == room) return -1;
            stack[depth++] = y->next;
        }
        if ((y->kind == IR_ACC || y->kind == IR_UPDATE) && (y->var < 0 || y->var >= MAX_ACCS)) return -1;
        if (y->kind == IR_LOOP) {
            if (depth == room) return -1;
            stack[depth++] = y->child;
        } else if (y->kind == IR_ACC) {
            declared[y->var] = 1;
        }
        if (y->kind == IR_UPDATE && !declared[y->var]) return -1;
        if (y->kind != IR_STORE && y->kind != IR_UPDATE) continue;
        if (!dag_build(r, y->a, t)) return -1;
        for (int i = 0; i < r->d->n; i++) {
            const IrNode *v = &r->k->nodes[r->d->v[i].ref];
            if (v->kind == IR_ACCVAL && (v->var < 0 || v->var >= MAX_ACCS || !declared[v->var])) return -1;
        }
    }
    return n;
}

/* No loop in x's body: a flat loop, whose chunks start at multiples of 16
 * (vector alignment); a loop of rows is cut anywhere. */
static int innermost(const R *r, const IrNode *x)
{
    for (IrRef s = x->child; s && s < r->k->n; s = r->k->nodes[s].next)
        if (r->k->nodes[s].kind == IR_LOOP) return 0;
    return 1;
}

/* A run of plain stores from statement s in its block (a group's, lower_group): how many, up to
 * RUN_MAX; 0 where fewer than two, or where one of them writes a buffer that a value of the run loads
 * (what it loads must then be read after the store, as each statement's own temporaries are). */
enum { RUN_MAX = 16 };
static int store_run(R *r, IrRef s)
{
    IrRef st[RUN_MAX];
    int n = 0;
    for (const IrNode *x; n < RUN_MAX && (x = stmt_at(r, s)) && x->kind == IR_STORE && !x->op && !x->b; s = x->next)
        st[n++] = s;
    if (n < 2) return 0;
    dag_reset(r->d);
    for (int i = 0; i < n; i++) dag_walk(r, r->k->nodes[st[i]].a, st[i], 0);
    if (r->d->full) return 0;
    for (int v = 0; v < r->d->n; v++) {
        const IrNode *x = &r->k->nodes[r->d->v[v].ref];
        for (int i = 0; i < n && x->kind == IR_LOAD; i++)
            if (r->k->nodes[st[i]].buf == x->buf) return 0;
    }
    return n;
}

/* Stores s and the n - 1 after it, whose values share one analysis: a value used twice anywhere in the
 * run, and evaluated whatever the wheres choose in one of them, is a temporary declared before the
 * first, so a group's stores compute what they share once (TinyCC does no common subexpressions). */
static IrRef put_run(R *r, IrRef s, int n, int level)
{
    IrRef t = s;
    for (int i = 0; i < n; i++, t = r->k->nodes[t].next) dag_uncond(r, r->k->nodes[t].a, t);
    t = s;
    for (int i = 0; i < n; i++, t = r->k->nodes[t].next) put_temps(r, r->k->nodes[t].a, t, level);
    r->in_run = 1;
    for (int i = 0; i < n; i++, s = r->k->nodes[s].next) put_store(r, s, &r->k->nodes[s], level);
    r->in_run = 0;
    return s;
}

static void put_block(R *r, IrRef s, int level)
{
    for (uint32_t budget = r->k->n; s && s < r->k->n && budget; budget--) {
        const IrNode *x = &r->k->nodes[s];
        int p = level == 1 && r->range == -2 ? par_index(r, s) : -1;
        if (p >= 0) { /* the kernel's entry: the loop runs through the pool */
            indent(r->o, level);
            put(r->o, "kn_parallel(%s_p%d, b, ", r->k->name, p);
            put_index(r->o, r->k->ex, x->index, 0);
            put(r->o, ", %d, par);\n", innermost(r, x) ? 16 : 1);
            s = x->next;
            continue;
        }
        int run = x->kind == IR_STORE && r->stream < 0 ? store_run(r, s) : 0;
        if (run) {
            s = put_run(r, s, run, level);
            continue;
        }
        const IrNode *y = stmt_at(r, x->next);
        if ((x->kind == IR_STORE || x->kind == IR_UPDATE) && y && (y->kind == IR_STORE || y->kind == IR_UPDATE) &&
            y->a == x->a && value_at(r->k, x->a, s) && value_at(r->k, x->a, s)->kind == IR_OP) {
            /* one value for two statements (a row kernel stores what it sums): computed once */
            const IrNode *v = value_at(r->k, x->a, s);
            begin_value(r, x->a, s, level);
            indent(r->o, level);
            put(r->o, "const %s t%d = ", v->dtype < KN_NDTYPES ? dts[v->dtype].value : "KN_BAD_DTYPE", r->ntemps);
            put_value(r, x->a, s, 0, 1);
            put_str(r->o, ";\n");
            r->shared = x->a, r->shared_temp = r->ntemps++;
        }
        switch (x->kind) {
        case IR_LOOP: put_loop(r, x, level); break;
        case IR_STORE: put_store(r, s, x, level); break;
        case IR_ACC: put_acc(r, x, level); break;
        case IR_UPDATE: put_update(r, s, x, level); break;
        default: indent(r->o, level), put_str(r->o, "KN_BAD_STATEMENT;\n"); break;
        }
        if (r->shared && r->shared != (y && (y->kind == IR_STORE || y->kind == IR_UPDATE) ? y->a : 0)) r->shared = 0;
        if (s == r->pf_after && r->pf_row) put_prefetch(r, &r->k->nodes[r->pf_row], level);
        s = x->next;
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
        if (x->kind == IR_CHECK) r->checks = 1;
    }
}

/* Marks what statement s (and, if all, the ones after it) names. */
static void scan_block(R *r, IrRef s, int level, int all)
{
    for (uint32_t budget = r->k->n; s && s < r->k->n && budget; s = all ? r->k->nodes[s].next : 0, budget--) {
        const IrNode *x = &r->k->nodes[s];
        if (x->kind == IR_LOOP && level <= IR_MAX_NEST) scan_block(r, x->child, level + 1, 1);
        if (x->kind == IR_STORE && x->buf >= 0 && x->buf < MAX_BUFS) r->bufused[x->buf] = 1;
        if (x->kind == IR_STORE || x->kind == IR_UPDATE) scan_value(r, x->a, s);
        if (x->kind == IR_STORE && x->b) scan_value(r, x->b, s);
    }
}

/* ---- kernels ---- */

static const char *const roles[] = {"in", "out", "tmp"};

/* The buffers as typed locals: those the function does not name are
 * (void), or left out if omit. */
static void put_bufs(R *r, const uint8_t *bufused, int omit)
{
    const Kernel *k = r->k;
    if (k->nbufs == 0) put_str(r->o, "    (void)b;\n");
    for (int i = 0; i < k->nbufs; i++) {
        const IrBuf *bf = &k->bufs[i];
        if (omit && i < MAX_BUFS && !bufused[i]) continue;
        const char *t = bf->dtype < KN_NDTYPES ? dts[bf->dtype].store : "KN_BAD_DTYPE";
        const char *c = bf->role == BUF_IN ? "const " : "";
        put(r->o, "    %s%s *%sb%d = (%s%s *)b[%d];", c, t, bf->shared ? "" : "restrict ", i, c, t, i);
        if (i < MAX_BUFS && !bufused[i]) put(r->o, " (void)b%d;", i);
        put(r->o, " /* %s %s[", bf->role <= BUF_TMP ? roles[bf->role] : "?", kn_dtype_name((kn_dtype)bf->dtype));
        put_index(r->o, k->ex, bf->size, 0);
        put_str(r->o, "] */\n");
    }
    if (k->shapes) /* shape symbols' values at this run: after the thread pool and the error cell */
        put(r->o, "    const int64_t *kn_z = (const int64_t *)b[%d]; (void)kn_z;\n", k->nbufs + 2);
}

/* The error cell of a kernel with checks: b[nbufs + 1], after the thread pool. */
static void put_err(R *r)
{
    if (r->checks) put(r->o, "    int64_t *kn_err = (int64_t *)b[%d]; (void)kn_err;\n", r->k->nbufs + 1);
}

/* A dot template's epilogue (Kernel.tile): its three loops (batch, M, N)
 * over one tile, NAME(b, t, m0, m1, n0, n1), the template calling it on
 * each tile of its output once the tile is final. */
static void put_tile(R *r)
{
    const Kernel *k = r->k;
    const IrNode *l0 = stmt_at(r, k->body), *l1 = l0 ? stmt_at(r, l0->child) : NULL, *l2 = l1 ? stmt_at(r, l1->child) : NULL;
    uint8_t bufused[MAX_BUFS], accread[MAX_ACCS];
    memset(bufused, 0, sizeof bufused);
    memset(accread, 0, sizeof accread);
    r->bufused = bufused, r->accread = accread, r->ntemps = 0;
    scan_block(r, k->body, 0, 1);
    put(r->o, "\nvoid %s(void **b, int64_t t, int64_t m0, int64_t m1, int64_t n0, int64_t n1);\n"
              "void %s(void **b, int64_t t, int64_t m0, int64_t m1, int64_t n0, int64_t n1)\n{\n", k->name, k->name);
    if (!l2 || l0->kind != IR_LOOP || l1->kind != IR_LOOP || l2->kind != IR_LOOP || l0->next || l1->next || l2->next) {
        put_str(r->o, "    KN_BAD_TILE;\n}\n"); /* does not compile: not a tile kernel */
        return;
    }
    put_bufs(r, bufused, 0);
    put(r->o, "    const int64_t s%d = t;\n    (void)s%d;\n", (int)l0->var, (int)l0->var);
    put(r->o, "    for (int64_t s%d = m0; s%d < m1; s%d++) {\n", (int)l1->var, (int)l1->var, (int)l1->var);
    put(r->o, "        %sfor (int64_t s%d = n0; s%d < n1; s%d++) {\n", r->isa ? "KN_IVDEP " : "", (int)l2->var,
        (int)l2->var, (int)l2->var);
    put_block(r, l2->child, 3);
    put_str(r->o, "        }\n    }\n}\n");
}

/* Parallel loops first, each as a function over a range of its iterations;
 * then the entry, which runs them through kn_parallel (so it reads the
 * thread pool from b[nbufs]) and everything else itself. */
static void put_kernel(R *r)
{
    const Kernel *k = r->k;
    if (k->tile) {
        put_tile(r);
        return;
    }
    uint8_t bufused[MAX_BUFS], accread[MAX_ACCS];
    memset(accread, 0, sizeof accread);
    r->bufused = bufused;
    r->accread = accread;
    r->ntemps = 0;
    memset(bufused, 1, sizeof bufused);
    r->checks = 0;
    scan_block(r, k->body, 0, 1); /* accread and checks for the whole kernel */
    int npar = 0;
    for (IrRef s = k->body; s && s < k->n; s = k->nodes[s].next) {
        int p = par_index(r, s);
        if (p < 0) continue;
        memset(bufused, 0, sizeof bufused);
        scan_block(r, s, 0, 0);
        put(r->o, "\nstatic void %s_p%d(void **b, int64_t lo, int64_t hi)\n{\n", k->name, p);
        put_bufs(r, bufused, 0);
        put_err(r);
        r->range = k->nodes[s].var;
        put_loop(r, &k->nodes[s], 1);
        r->range = -1;
        put_str(r->o, "}\n");
        npar++;
    }
    memset(bufused, 0, sizeof bufused);
    for (IrRef s = k->body; s && s < k->n; s = k->nodes[s].next)
        if (par_index(r, s) < 0) scan_block(r, s, 0, 0);
    put(r->o, "\nvoid %s(void **b);\nvoid %s(void **b)\n{\n", k->name, k->name);
    if (npar) put(r->o, "    const kn_par *par = (const kn_par *)b[%d];\n", k->nbufs);
    put_bufs(r, bufused, npar > 0);
    put_err(r);
    r->range = -2; /* the entry's top level: parallel loops are calls */
    put_block(r, k->body, 1);
    r->range = -1;
    put_str(r->o, "}\n");
}

static size_t render(const Kernel *const *ks, int nk, const CIsa *isa, char *buf, size_t cap)
{
    Dag dag; /* 32 KiB */
    Out o = {buf, buf ? cap : 0, 0};
    R r;
    memset(&r, 0, sizeof r);
    r.o = &o;
    r.d = &dag;
    r.isa = isa;
    r.lane = r.range = r.stream = -1;
    if (isa) put(&o, "/* SIMD dialect for %s */\n%s%s", isa->name, isa->header, simd_prelude);
    for (size_t i = 0; i < sizeof prelude / sizeof *prelude; i++) put_str(&o, prelude[i]);
    put_str(&o, threads_prelude);
    for (int i = 0; i < nk; i++) {
        r.k = ks[i];
        put_str(&o, PORT_PART); /* cc may compile each kernel apart from the others (port.h) */
        put_kernel(&r);
    }
    if (o.cap) o.buf[o.len < o.cap ? o.len : o.cap - 1] = '\0';
    return o.len;
}

size_t c_render(const Kernel *const *ks, int nk, char *buf, size_t cap) { return render(ks, nk, NULL, buf, cap); }

size_t c_render_isa(const Kernel *const *ks, int nk, const CIsa *isa, char *buf, size_t cap)
{
    return render(ks, nk, isa, buf, cap);
}
