/*
 * test_ir.c — the loop IR (src/ir.c): builders, golden text, round trips,
 * the verifier and the parser's errors.
 *
 * Four kernels are built by hand with the builders (pointwise exp, a
 * softmax row, matmul + bias + gelu, a strided convolution) plus one that
 * uses every value form; each must print exactly its golden text, verify,
 * and read back through ir_parse to the same text byte for byte. Then:
 * interning (equal values are one ref, statements never are), builder
 * argument checks, verifier rejections with the statement and reason in
 * the message, 47 malformed texts with the line and reason of their
 * error, 2000 random byte mutations of the golden dumps (each parses and
 * round-trips or fails cleanly), 2000 kernels with random node fields
 * broken (each prints and verifies without a crash or a hang, and each the
 * verifier accepts round-trips), and allocation failures during a parse.
 */
#include <stdlib.h>

#include "test.h"
#include "../src/ir.h"

static kn_ctx *ctx;

/* ---- a kernel with its own arena and expression table ---- */

typedef struct {
    Arena arena;
    ExprTable ex;
    Kernel k;
} Fix;

static Kernel *fix_open(Fix *f, kn_ctx *c, const char *name)
{
    arena_init(&f->arena, c);
    expr_init(&f->ex, c);
    ir_init(&f->k, &f->arena, &f->ex, name);
    return &f->k;
}

static void fix_close(Fix *f)
{
    arena_free(&f->arena);
    expr_free(&f->ex);
}

/* An index expression from text; 0 (and a failure) if it does not parse. */
static ExprId E(Kernel *k, const char *s)
{
    ExprId e = 0;
    CHECK_MSG(expr_parse(k->ex, s, &e) == 0, "expression \"%s\"", s);
    return e;
}

static char out[16384];

static const char *P(const Kernel *k)
{
    ir_print(k, out, sizeof out);
    return out;
}

/* k prints as want, verifies, and parse(print(k)) prints as want again. */
static void golden(Kernel *k, const char *want)
{
    char why[256];
    CHECK_MSG(strcmp(P(k), want) == 0, "printed:\n%s\nwant:\n%s", out, want);
    CHECK_MSG(ir_verify(ctx, k) == 0, "verify: %s", kn_last_error(ctx));
    kn_clear_error(ctx);
    Fix g;
    Kernel *k2 = fix_open(&g, ctx, "");
    CHECK_MSG(ir_parse(k2, want, why, sizeof why) == 0, "parse: %s", why);
    CHECK_MSG(strcmp(P(k2), want) == 0, "round trip printed:\n%s", out);
    CHECK_MSG(ir_verify(ctx, k2) == 0, "verify parsed: %s", kn_last_error(ctx));
    CHECK(k2->nvars == k->nvars && k2->naccs == k->naccs && k2->nbufs == k->nbufs);
    kn_clear_error(ctx);
    fix_close(&g);
}

/* ---- the four kernels, built by hand ---- */

static const char *pointwise_text =
    "kernel pointwise(in b0 f32[1024], out b1 f32[1024])\n"
    "  for s0 in 1024 parallel\n"
    "    b1[s0] = exp(b0[s0])\n";

static void build_pointwise(Kernel *k)
{
    int in = ir_buf(k, KN_F32, BUF_IN, E(k, "1024"), 0), o = ir_buf(k, KN_F32, BUF_OUT, E(k, "1024"), 0);
    IrBlock top = {0, 0};
    IrRef l = ir_loop(k, &top, E(k, "1024"), LOOP_PARALLEL, 1);
    IrBlock body = {l, 0};
    CHECK(ir_store(k, &body, o, E(k, "s0"), ir_op(k, OP_EXP, KN_F32, ir_load(k, in, E(k, "s0")), 0, 0)) != 0);
}

static const char *softmax_text =
    "kernel softmax(in b0 f32[8192], out b1 f32[8192])\n"
    "  for s0 in 64 parallel\n"
    "    acc a0 f32 max\n"
    "    for s1 in 128\n"
    "      a0 max= b0[s0*128+s1]\n"
    "    acc a1 f32 sum\n"
    "    for s2 in 128\n"
    "      a1 += exp(sub(b0[s0*128+s2], a0))\n"
    "    for s3 in 128 vector(8)\n"
    "      b1[s0*128+s3] = div(exp(sub(b0[s0*128+s3], a0)), a1)\n";

/* x[row, s] - max, exponentiated */
static IrRef shifted_exp(Kernel *k, int in, const char *index, int mx)
{
    return ir_op(k, OP_EXP, KN_F32, ir_op(k, OP_SUB, KN_F32, ir_load(k, in, E(k, index)), ir_accval(k, mx), 0), 0, 0);
}

static void build_softmax(Kernel *k)
{
    int in = ir_buf(k, KN_F32, BUF_IN, E(k, "8192"), 0), o = ir_buf(k, KN_F32, BUF_OUT, E(k, "8192"), 0);
    IrBlock top = {0, 0};
    IrBlock row = {ir_loop(k, &top, E(k, "64"), LOOP_PARALLEL, 1), 0};
    int mx = ir_acc(k, &row, OP_RMAX, KN_F32);
    IrBlock b1 = {ir_loop(k, &row, E(k, "128"), LOOP_SERIAL, 1), 0};
    ir_update(k, &b1, mx, ir_load(k, in, E(k, "s0*128 + s1")));
    int sum = ir_acc(k, &row, OP_SUM, KN_F32);
    IrBlock b2 = {ir_loop(k, &row, E(k, "128"), LOOP_SERIAL, 1), 0};
    ir_update(k, &b2, sum, shifted_exp(k, in, "s0*128 + s2", mx));
    IrBlock b3 = {ir_loop(k, &row, E(k, "128"), LOOP_VECTOR, 8), 0};
    IrRef v = ir_op(k, OP_DIV, KN_F32, shifted_exp(k, in, "s0*128 + s3", mx), ir_accval(k, sum), 0);
    CHECK(ir_store(k, &b3, o, E(k, "s0*128 + s3"), v) != 0);
}

static const char *linear_gelu_text =
    "kernel linear_gelu(in b0 f32[2048], in b1 f32[1024], in b2 f32[16], out b3 f32[512])\n"
    "  for s0 in 32 parallel\n"
    "    for s1 in 16\n"
    "      acc a0 f32 sum\n"
    "      for s2 in 64 unroll(4)\n"
    "        a0 += mul(b0[s0*64+s2], b1[s1+s2*16])\n"
    "      b3[s0*16+s1] = mul(mul(add(a0, b2[s1]), 0.5), add(erf(mul(add(a0, b2[s1]), 0.7071067811865476)), 1))\n";

/* gelu(x) = 0.5 x (1 + erf(x / sqrt 2)) */
static IrRef gelu(Kernel *k, IrRef x)
{
    IrRef e = ir_op(k, OP_ERF, KN_F32, ir_op(k, OP_MUL, KN_F32, x, ir_const(k, KN_F32, 0.70710678118654752440), 0), 0, 0);
    IrRef half = ir_op(k, OP_MUL, KN_F32, x, ir_const(k, KN_F32, 0.5), 0);
    return ir_op(k, OP_MUL, KN_F32, half, ir_op(k, OP_ADD, KN_F32, e, ir_const(k, KN_F32, 1), 0), 0);
}

static void build_linear_gelu(Kernel *k)
{
    int a = ir_buf(k, KN_F32, BUF_IN, E(k, "32*64"), 0), w = ir_buf(k, KN_F32, BUF_IN, E(k, "64*16"), 0);
    int bias = ir_buf(k, KN_F32, BUF_IN, E(k, "16"), 0), o = ir_buf(k, KN_F32, BUF_OUT, E(k, "32*16"), 0);
    IrBlock top = {0, 0};
    IrBlock m = {ir_loop(k, &top, E(k, "32"), LOOP_PARALLEL, 1), 0};
    IrBlock n = {ir_loop(k, &m, E(k, "16"), LOOP_SERIAL, 1), 0};
    int acc = ir_acc(k, &n, OP_SUM, KN_F32);
    IrBlock kk = {ir_loop(k, &n, E(k, "64"), LOOP_UNROLL, 4), 0};
    IrRef prod = ir_op(k, OP_MUL, KN_F32, ir_load(k, a, E(k, "s0*64+s2")), ir_load(k, w, E(k, "s2*16+s1")), 0);
    ir_update(k, &kk, acc, prod);
    IrRef x = ir_op(k, OP_ADD, KN_F32, ir_accval(k, acc), ir_load(k, bias, E(k, "s1")), 0);
    CHECK(ir_store(k, &n, o, E(k, "s0*16+s1"), gelu(k, x)) != 0);
}

static const char *conv_text =
    "kernel conv(in b0 f32[300], in b1 f32[108], out b2 f32[64])\n"
    "  for s0 in 4 gpu_block\n"
    "    for s1 in 4 gpu_thread\n"
    "      for s2 in 4\n"
    "        acc a0 f32 sum\n"
    "        for s3 in 3\n"
    "          for s4 in 3\n"
    "            for s5 in 3\n"
    "              a0 += mul(b0[s1*20+s2*2+s3*100+s4*10+s5], b1[s0*27+s3*9+s4*3+s5])\n"
    "        b2[s0*16+s1*4+s2] = a0\n";

/* out[f, oh, ow] = sum over c, kh, kw of x[c, oh*2+kh, ow*2+kw] w[f, c, kh, kw];
 * x (3, 10, 10), w (4, 3, 3, 3), out (4, 4, 4), stride 2 */
static void build_conv(Kernel *k)
{
    int x = ir_buf(k, KN_F32, BUF_IN, E(k, "3*10*10"), 0), w = ir_buf(k, KN_F32, BUF_IN, E(k, "4*27"), 0);
    int o = ir_buf(k, KN_F32, BUF_OUT, E(k, "64"), 0);
    IrBlock top = {0, 0};
    IrBlock f = {ir_loop(k, &top, E(k, "4"), LOOP_GPU_BLOCK, 1), 0};
    IrBlock oh = {ir_loop(k, &f, E(k, "4"), LOOP_GPU_THREAD, 1), 0};
    IrBlock ow = {ir_loop(k, &oh, E(k, "4"), LOOP_SERIAL, 1), 0};
    int acc = ir_acc(k, &ow, OP_SUM, KN_F32);
    IrBlock c = {ir_loop(k, &ow, E(k, "3"), LOOP_SERIAL, 1), 0};
    IrBlock kh = {ir_loop(k, &c, E(k, "3"), LOOP_SERIAL, 1), 0};
    IrBlock kw = {ir_loop(k, &kh, E(k, "3"), LOOP_SERIAL, 1), 0};
    IrRef xv = ir_load(k, x, E(k, "(s3*10 + s1*2+s4)*10 + s2*2+s5"));
    IrRef wv = ir_load(k, w, E(k, "((s0*3 + s3)*3 + s4)*3 + s5"));
    ir_update(k, &kw, acc, ir_op(k, OP_MUL, KN_F32, xv, wv, 0));
    CHECK(ir_store(k, &ow, o, E(k, "(s0*4 + s1)*4 + s2"), ir_accval(k, acc)) != 0);
}

static const char *misc_text =
    "kernel misc(in b0 f32[16], out b1 f32[16], tmp b2 i64[16], out b3 bool[16], out b4 f64[1])\n"
    "  for s0 in 16\n"
    "    b2[s0] = add(idx(s0*2+1), 3:i64)\n"
    "    b1[s0] = where(cmplt(b0[s0], -0), mul(b0[s0], 0.01), add(cast.f32(b2[s0]), rand(42:i64, b2[0], s0)))\n"
    "    b3[s0] = cmpeq(b2[s0], -1:i64)\n"
    "  acc a0 f64 max\n"
    "  for s1 in 16\n"
    "    a0 max= max(cast.f64(b0[s1]), -inf:f64)\n"
    "  b4[0] = add(a0, mul(1e+300:f64, nan:f64))\n";

static void build_misc(Kernel *k)
{
    int x = ir_buf(k, KN_F32, BUF_IN, E(k, "16"), 0), y = ir_buf(k, KN_F32, BUF_OUT, E(k, "16"), 0);
    int t = ir_buf(k, KN_I64, BUF_TMP, E(k, "16"), 0), m = ir_buf(k, KN_BOOL, BUF_OUT, E(k, "16"), 0);
    int r = ir_buf(k, KN_F64, BUF_OUT, E(k, "1"), 0);
    IrBlock top = {0, 0};
    IrBlock b = {ir_loop(k, &top, E(k, "16"), LOOP_SERIAL, 1), 0};
    ir_store(k, &b, t, E(k, "s0"), ir_op(k, OP_ADD, KN_I64, ir_index(k, E(k, "2*s0+1")), ir_const(k, KN_I64, 3), 0));
    IrRef xv = ir_load(k, x, E(k, "s0"));
    IrRef neg = ir_op(k, OP_CMPLT, KN_BOOL, xv, ir_const(k, KN_F32, -0.0), 0);
    IrRef u = ir_rand(k, ir_const(k, KN_I64, 42), ir_load(k, t, E(k, "0")), E(k, "s0"));
    IrRef pos = ir_op(k, OP_ADD, KN_F32, ir_op(k, OP_CAST, KN_F32, ir_load(k, t, E(k, "s0")), 0, 0), u, 0);
    ir_store(k, &b, y, E(k, "s0"), ir_op(k, OP_WHERE, KN_F32, neg, ir_op(k, OP_MUL, KN_F32, xv, ir_const(k, KN_F32, 0.01), 0), pos));
    ir_store(k, &b, m, E(k, "s0"), ir_op(k, OP_CMPEQ, KN_BOOL, ir_load(k, t, E(k, "s0")), ir_const(k, KN_I64, -1), 0));
    int a = ir_acc(k, &top, OP_RMAX, KN_F64);
    IrBlock b2 = {ir_loop(k, &top, E(k, "16"), LOOP_SERIAL, 1), 0};
    IrRef wide = ir_op(k, OP_CAST, KN_F64, ir_load(k, x, E(k, "s1")), 0, 0);
    ir_update(k, &b2, a, ir_op(k, OP_MAX, KN_F64, wide, ir_const(k, KN_F64, -INFINITY), 0));
    IrRef junk = ir_op(k, OP_MUL, KN_F64, ir_const(k, KN_F64, 1e300), ir_const(k, KN_F64, NAN), 0);
    CHECK(ir_store(k, &top, r, E(k, "0"), ir_op(k, OP_ADD, KN_F64, ir_accval(k, a), junk, 0)) != 0);
}

/* gather (row s0 of b0 picked by b1[s0]) and scatter_add (row s3 of b3 added to the row b2[s3] of b5) */
static const char *index_text =
    "kernel index(in b0 f32[40], in b1 i64[6], in b2 i32[6], in b3 f32[48], out b4 f32[48], out b5 f32[40])\n"
    "  for s0 in 6\n"
    "    for s1 in 8 vector(8)\n"
    "      b4[s0*8+s1] = b0[s1; mul(check(b1[s0], 5), 8:i64)]\n"
    "  for s2 in 40\n"
    "    b5[s2] = 0\n"
    "  for s3 in 6\n"
    "    for s4 in 8\n"
    "      b5[s4; mul(check(b2[s3], 5), 8:i64)] += b3[s3*8+s4]\n";

static void build_index(Kernel *k)
{
    int x = ir_buf(k, KN_F32, BUF_IN, E(k, "40"), 0), i64 = ir_buf(k, KN_I64, BUF_IN, E(k, "6"), 0);
    int i32 = ir_buf(k, KN_I32, BUF_IN, E(k, "6"), 0), src = ir_buf(k, KN_F32, BUF_IN, E(k, "48"), 0);
    int g = ir_buf(k, KN_F32, BUF_OUT, E(k, "48"), 0), sc = ir_buf(k, KN_F32, BUF_OUT, E(k, "40"), 0);
    IrBlock top = {0, 0};
    IrBlock rows = {ir_loop(k, &top, E(k, "6"), LOOP_SERIAL, 1), 0};
    IrBlock cols = {ir_loop(k, &rows, E(k, "8"), LOOP_VECTOR, 8), 0};
    IrRef eight = ir_const(k, KN_I64, 8);
    IrRef off = ir_op(k, OP_MUL, KN_I64, ir_check(k, ir_load(k, i64, E(k, "s0")), E(k, "5")), eight, 0);
    ir_store(k, &cols, g, E(k, "s0*8+s1"), ir_load_at(k, x, E(k, "s1"), off));
    IrBlock zero = {ir_loop(k, &top, E(k, "40"), LOOP_SERIAL, 1), 0};
    ir_store(k, &zero, sc, E(k, "s2"), ir_const(k, KN_F32, 0));
    IrBlock r2 = {ir_loop(k, &top, E(k, "6"), LOOP_SERIAL, 1), 0};
    IrBlock c2 = {ir_loop(k, &r2, E(k, "8"), LOOP_SERIAL, 1), 0};
    off = ir_op(k, OP_MUL, KN_I64, ir_check(k, ir_load(k, i32, E(k, "s3")), E(k, "5")), eight, 0);
    CHECK(ir_store_at(k, &c2, sc, E(k, "s4"), off, ir_load(k, src, E(k, "s3*8+s4")), 1) != 0);
}

static const struct {
    const char *name, **text;
    void (*build)(Kernel *);
} kernels[] = {
    {"pointwise", &pointwise_text, build_pointwise}, {"softmax", &softmax_text, build_softmax},
    {"linear_gelu", &linear_gelu_text, build_linear_gelu}, {"conv", &conv_text, build_conv},
    {"misc", &misc_text, build_misc}, {"index", &index_text, build_index},
};
#define NKERNELS (int)(sizeof kernels / sizeof kernels[0])

static void test_golden(void)
{
    for (int i = 0; i < NKERNELS; i++) {
        Fix f;
        Kernel *k = fix_open(&f, ctx, kernels[i].name);
        kernels[i].build(k);
        golden(k, *kernels[i].text);
        fix_close(&f);
    }
}

/* snprintf semantics: the whole length back, a NUL-terminated prefix written. */
static void test_print_truncated(void)
{
    Fix f;
    char small[12];
    Kernel *k = fix_open(&f, ctx, "pointwise");
    build_pointwise(k);
    CHECK(ir_print(k, small, sizeof small) == strlen(pointwise_text));
    CHECK(strcmp(small, "kernel poin") == 0);
    CHECK(ir_print(k, NULL, 0) == strlen(pointwise_text));
    fix_close(&f);
}

/* ---- builders: interning and argument checks ---- */

static void test_interning(void)
{
    Fix f;
    Kernel *k = fix_open(&f, ctx, "intern");
    int b0 = ir_buf(k, KN_F32, BUF_IN, E(k, "8"), 0), b1 = ir_buf(k, KN_F32, BUF_OUT, E(k, "8"), 0);
    IrRef l1 = ir_load(k, b0, E(k, "s0")), l2 = ir_load(k, b0, E(k, "s0"));
    CHECK(l1 != 0 && l1 == l2);
    CHECK(ir_load(k, b0, E(k, "s0+1")) != l1);
    IrRef e1 = ir_op(k, OP_EXP, KN_F32, l1, 0, 0);
    CHECK(e1 != 0 && e1 == ir_op(k, OP_EXP, KN_F32, l2, 0, 0));
    CHECK(ir_op(k, OP_ADD, KN_F32, e1, l1, 0) == ir_op(k, OP_ADD, KN_F32, e1, l1, 0));
    CHECK(ir_op(k, OP_ADD, KN_F32, e1, l1, 0) != ir_op(k, OP_ADD, KN_F32, l1, e1, 0));
    CHECK(ir_const(k, KN_F32, 1) == ir_const(k, KN_F32, 1.0));
    CHECK(ir_const(k, KN_F32, 1) != ir_const(k, KN_F64, 1));
    CHECK(ir_const(k, KN_F32, 0.0) != ir_const(k, KN_F32, -0.0));
    CHECK(ir_const(k, KN_F32, NAN) == ir_const(k, KN_F32, -NAN));
    CHECK(ir_const(k, KN_I32, -0.0) == ir_const(k, KN_I32, 0));
    CHECK(ir_const(k, KN_BOOL, 5) == ir_const(k, KN_BOOL, 1));
    CHECK(ir_index(k, E(k, "s0*2")) == ir_index(k, E(k, "2*s0")));
    IrRef c7 = ir_const(k, KN_I64, 7), c8 = ir_const(k, KN_I64, 8);
    CHECK(ir_rand(k, c7, c8, E(k, "s0")) == ir_rand(k, c7, c8, E(k, "s0")));
    CHECK(ir_rand(k, c7, c8, E(k, "s0")) != ir_rand(k, c8, c8, E(k, "s0")));
    CHECK(ir_rand(k, c7, c8, E(k, "s0")) != ir_rand(k, c7, c7, E(k, "s0")));
    IrBlock top = {0, 0};
    IrRef l = ir_loop(k, &top, E(k, "8"), LOOP_SERIAL, 1);
    IrBlock in = {l, 0};
    int acc = ir_acc(k, &in, OP_SUM, KN_F32);
    CHECK(acc == 0 && ir_accval(k, acc) == ir_accval(k, acc) && ir_accval(k, acc) != 0);
    IrRef s1 = ir_store(k, &in, b1, E(k, "s0"), e1), s2 = ir_store(k, &in, b1, E(k, "s0"), e1);
    CHECK(s1 != 0 && s2 != 0 && s1 != s2); /* statements are never interned */
    CHECK(k->n < 40);
    fix_close(&f);
}

static void test_builder_checks(void)
{
    Fix f;
    Kernel *k = fix_open(&f, ctx, "bad name!");
    CHECK(strcmp(k->name, "bad_name_") == 0);
    int b0 = ir_buf(k, KN_F32, BUF_IN, E(k, "8"), 0);
    CHECK(ir_buf(k, KN_NDTYPES, BUF_IN, E(k, "8"), 0) == -1);
    CHECK(ir_buf(k, KN_F32, (BufRole)7, E(k, "8"), 0) == -1);
    CHECK(ir_buf(k, KN_F32, BUF_IN, 99999, 0) == -1);
    IrRef x = ir_load(k, b0, E(k, "s0")), i = ir_index(k, E(k, "s0"));
    CHECK(ir_load(k, 1, E(k, "s0")) == 0 && ir_load(k, -1, E(k, "s0")) == 0);
    CHECK(ir_load(k, b0, 0) == 0 && ir_index(k, 12345) == 0 && ir_rand(k, i, i, 0) == 0);
    CHECK(ir_rand(k, 0, i, E(k, "s0")) == 0 && ir_rand(k, i, 999, E(k, "s0")) == 0);
    CHECK(ir_const(k, KN_I32, 1.5) == 0 && ir_const(k, KN_U8, 256) == 0 && ir_const(k, KN_U8, -1) == 0);
    CHECK(ir_const(k, KN_I64, INFINITY) == 0 && ir_const(k, KN_I32, NAN) == 0 && ir_const(k, KN_I64, 0x1p63) == 0);
    CHECK(ir_const(k, KN_I64, -0x1p63) != 0 && ir_const(k, KN_F16, INFINITY) != 0);
    CHECK(ir_op(k, OP_EXP, KN_F32, x, x, 0) == 0);          /* arity */
    CHECK(ir_op(k, OP_ADD, KN_F32, x, 0, 0) == 0);
    CHECK(ir_op(k, OP_WHERE, KN_F32, x, x, 0) == 0);
    CHECK(ir_op(k, OP_SUM, KN_F32, x, 0, 0) == 0);          /* not elementwise */
    CHECK(ir_op(k, OP_DOT, KN_F32, x, x, 0) == 0);
    CHECK(ir_op(k, OP_COUNT, KN_F32, x, 0, 0) == 0);
    CHECK(ir_op(k, OP_CMPLT, KN_F32, x, x, 0) == 0);        /* the rule's dtype, not another */
    CHECK(ir_op(k, OP_NEG, KN_I64, x, 0, 0) == 0);
    CHECK(ir_op(k, OP_CMPLT, KN_BOOL, x, x, 0) != 0);
    CHECK(ir_op(k, OP_CAST, KN_U8, i, 0, 0) != 0);
    CHECK(ir_op(k, OP_EXP, KN_F32, 9999, 0, 0) == 0);        /* not a node */
    CHECK(ir_accval(k, 0) == 0);                              /* undeclared */
    IrBlock top = {0, 0};
    CHECK(ir_loop(k, &top, E(k, "8"), LOOP_VECTOR, 0) == 0);
    CHECK(ir_loop(k, &top, E(k, "8"), (LoopKind)9, 1) == 0);
    CHECK(ir_loop(k, &top, 0, LOOP_SERIAL, 1) == 0);
    CHECK(k->nvars == 0 && top.tail == 0 && k->body == 0);
    IrBlock wrong = {x, 0};                                   /* a value is not a loop */
    CHECK(ir_loop(k, &wrong, E(k, "8"), LOOP_SERIAL, 1) == 0);
    CHECK(ir_update(k, &top, 0, x) == 0);
    CHECK(ir_acc(k, &top, OP_ADD, KN_F32) == -1);
    CHECK(ir_store(k, &top, 3, E(k, "s0"), x) == 0);
    CHECK(ir_store(k, &top, b0, E(k, "s0"), 0) == 0);
    IrRef l = ir_loop(k, &top, E(k, "8"), LOOP_PARALLEL, 77);
    CHECK(l != 0 && k->nodes[l].width == 1 && k->nvars == 1);
    fix_close(&f);
}

/* tail 0 places a statement first; a tail in the middle splices after it */
static void test_blocks(void)
{
    Fix f;
    Kernel *k = fix_open(&f, ctx, "blocks");
    int o = ir_buf(k, KN_F32, BUF_OUT, E(k, "4"), 0);
    IrBlock top = {0, 0};
    IrRef s1 = ir_store(k, &top, o, E(k, "1"), ir_const(k, KN_F32, 1));
    IrRef s3 = ir_store(k, &top, o, E(k, "3"), ir_const(k, KN_F32, 3));
    IrBlock mid = {0, s1}, first = {0, 0};
    ir_store(k, &mid, o, E(k, "2"), ir_const(k, KN_F32, 2));
    ir_store(k, &first, o, E(k, "0"), ir_const(k, KN_F32, 0));
    CHECK(top.tail == s3);
    CHECK(strcmp(P(k), "kernel blocks(out b0 f32[4])\n  b0[0] = 0\n  b0[1] = 1\n  b0[2] = 2\n  b0[3] = 3\n") == 0);
    fix_close(&f);
}

/* ---- the verifier ---- */

/* text parses, and ir_verify fails with a message holding want. */
static void rejects(const char *text, const char *want)
{
    Fix f;
    char why[256];
    Kernel *k = fix_open(&f, ctx, "");
    CHECK_MSG(ir_parse(k, text, why, sizeof why) == 0, "parse: %s\n%s", why, text);
    CHECK_MSG(ir_verify(ctx, k) != 0, "verify accepted:\n%s", text);
    CHECK_ERR(ctx, want);
    fix_close(&f);
}

static void test_verify_text(void)
{
    rejects("kernel bad(in b0 f32[8], out b1 f32[8])\n  for s0 in 8\n    b1[s1] = b0[s0]\n",
            "verify: kernel bad: `b1[s1] = b0[s0]`: s1 in the index is not the var of an enclosing loop");
    rejects("kernel bad(in b0 f32[8], out b1 f32[8])\n  for s0 in 8\n    b1[s0] = b0[s0+s1]\n", "s1 in the index");
    rejects("kernel bad(in b0 f32[8])\n  for s0 in 8\n    b0[s0] = 1\n", "`b0[s0] = 1`: store to input buffer b0");
    rejects("kernel bad(in b0 f32[8], out b1 f32[1])\n"
            "  for s0 in 1\n    acc a0 f32 sum\n    for s1 in 8\n      a0 += b0[s1]\n  b1[0] = a0\n",
            "`b1[0] = a0`: a0 is not declared in an enclosing block before this");
    rejects("kernel bad(in b0 f32[8], out b1 f32[8])\n  for s0 in 8\n    b1[s0] = add(b0[s0], 1:f64)\n",
            "add: operand dtypes differ (f32 vs f64)");
    { /* an output is read back where it was stored (row kernels reuse it) */
        Fix f;
        char why[256];
        Kernel *k = fix_open(&f, ctx, "");
        CHECK(ir_parse(k, "kernel ok(out b0 f32[8])\n  for s0 in 8\n    b0[s0] = 1\n    b0[s0] = add(b0[s0], 1)\n", why,
                       sizeof why) == 0);
        CHECK_MSG(ir_verify(ctx, k) == 0, "%s", kn_last_error(ctx));
        fix_close(&f);
    }
    rejects("kernel bad(in b0 f32[8], out b1 f32[8])\n  for s0 in 8\n    for s0 in 8\n      b1[s0] = 1\n",
            "`for s0 in 8`: s0 is already bound by an enclosing loop");
    rejects("kernel bad(in b0 f32[8], out b1 f32[8])\n  for s0 in s1\n    b1[s0] = 1\n",
            "s1 in the extent is not the var");
    rejects("kernel bad(in b0 f32[8], out b1 f32[1])\n  acc a0 f32 sum\n  for s0 in 8\n    a0 += cast.f64(b0[s0])\n",
            "`a0 += cast.f64(b0[s0])`: the value is f64, not f32");
    rejects("kernel bad(in b0 f32[8], out b1 f32[8])\n  for s0 in 8\n    b1[s0] = where(b0[s0], 1, 2)\n",
            "where: condition must be bool, got f32");
    rejects("kernel bad(in b0 i32[8], out b1 i32[8])\n  for s0 in 8\n    b1[s0] = exp(b0[s0])\n",
            "exp: needs a float operand, got i32");
    rejects("kernel bad(in b0 f32[8], out b1 i32[8])\n  for s0 in 8\n    b1[s0] = b0[s0]\n", "the value is f32, not i32");
    rejects("kernel bad(out b0 bool[8])\n  for s0 in 8\n    b0[s0] = neg(1:bool)\n", "neg: bool operands");
    rejects("kernel bad(out b0 f32[8])\n  for s0 in -3\n    b0[s0] = 1\n", "negative extent");
    rejects("kernel bad(out b0 bool[1])\n  acc a0 bool sum\n", "bad accumulator dtype");
    rejects("kernel bad(in b0 f32[8], in b1 i32[8], out b2 f32[8])\n  for s0 in 8\n    b2[s0] = b0[0; b1[s0]]\n",
            "an offset must be i64");
    rejects("kernel bad(in b0 f32[8], out b1 f32[8])\n  for s0 in 8\n    b1[0; check(b0[s0], 8)] += 1\n",
            "check() takes an integer");
    rejects("kernel bad(in b0 i64[1], out b1 f32[8])\n  for s0 in 8\n    b1[s0] = rand(7, b0[0], s0)\n",
            "rand()'s key must be i64");
    rejects("kernel bad(in b0 i32[1], out b1 f32[8])\n  for s0 in 8\n    b1[s0] = rand(7:i64, b0[0], s0)\n",
            "rand()'s counter must be i64");
    rejects("kernel bad(in b0 i64[1], out b1 f32[8])\n  for s0 in 8\n    b1[s0] = rand(7:i64, b0[0], s1)\n",
            "s1 in the offset is not the var");
    rejects("kernel bad(in b0 i64[8], out b1 f32[8])\n  for s0 in 8\n    b1[0; check(b0[s0], s1)] = 1\n",
            "s1 in the bound is not the var");
}

/* A pointwise kernel to break by hand: its loop and its store. */
static Kernel *pointwise(Fix *f, IrRef *loop, IrRef *store)
{
    Kernel *k = fix_open(f, ctx, "pw");
    build_pointwise(k);
    *loop = k->body;
    *store = k->nodes[k->body].child;
    return k;
}

static void broken(Fix *f, const char *want)
{
    CHECK_MSG(ir_verify(ctx, &f->k) != 0, "verify accepted:\n%s", P(&f->k));
    CHECK_ERR(ctx, want);
    P(&f->k); /* printing a broken kernel never crashes or hangs */
    fix_close(f);
}

static void test_verify_nodes(void)
{
    Fix f;
    IrRef l, s;
    Kernel *k = pointwise(&f, &l, &s);
    k->nodes[s].buf = 7;
    broken(&f, "`b7[s0] = exp(b0[s0])`: store to unknown buffer b7");
    k = pointwise(&f, &l, &s);
    k->nodes[k->nodes[k->nodes[s].a].a].buf = 5;
    broken(&f, "load from unknown buffer b5");
    k = pointwise(&f, &l, &s);
    k->nodes[s].next = l; /* a cycle */
    broken(&f, "reached twice");
    k = pointwise(&f, &l, &s);
    k->nodes[s].next = s;
    broken(&f, "reached twice");
    k = pointwise(&f, &l, &s);
    k->nodes[l].dtype = LOOP_VECTOR, k->nodes[l].width = 0;
    broken(&f, "a vector loop with width 0");
    k = pointwise(&f, &l, &s);
    k->nodes[l].width = 4;
    broken(&f, "a parallel loop with width 4");
    k = pointwise(&f, &l, &s);
    k->nodes[l].dtype = 17;
    broken(&f, "bad loop kind 17");
    k = pointwise(&f, &l, &s);
    k->nodes[l].index = 999999;
    broken(&f, "the extent is not a valid expression");
    k = pointwise(&f, &l, &s);
    k->nodes[s].a = s;
    broken(&f, "is not a value");
    k = pointwise(&f, &l, &s);
    k->nodes[k->nodes[s].a].op = OP_DOT;
    broken(&f, "op 32 is not an elementwise primitive");
    k = pointwise(&f, &l, &s);
    k->nodes[k->nodes[s].a].b = k->nodes[k->nodes[s].a].a;
    broken(&f, "exp takes 1 operands");
    k = pointwise(&f, &l, &s);
    k->nodes[k->nodes[s].a].a = k->nodes[s].a; /* its own operand */
    broken(&f, "operand 1 of exp is not an older value");
    k = pointwise(&f, &l, &s);
    { /* a load at an offset of itself: a cycle */
        IrRef ld = k->nodes[k->nodes[s].a].a;
        k->nodes[ld].a = ld;
    }
    broken(&f, "a load's offset is not an older value");
    k = pointwise(&f, &l, &s);
    k->bufs[1].role = BUF_IN;
    broken(&f, "store to input buffer b1");
}

static void test_verify_accs(void)
{
    static const char *text = "kernel r(in b0 f32[8], out b1 f32[1])\n  acc a0 f32 sum\n  for s0 in 8\n"
                              "    a0 += b0[s0]\n  b1[0] = a0\n";
    Fix f;
    char why[128];
    Kernel *k = fix_open(&f, ctx, "");
    CHECK(ir_parse(k, text, why, sizeof why) == 0 && ir_verify(ctx, k) == 0);
    IrRef acc = k->body, loop = k->nodes[acc].next, upd = k->nodes[loop].child;
    k->nodes[upd].op = OP_RMAX;
    broken(&f, "`a0 max= b0[s0]`: a0 is a sum accumulator");
    k = fix_open(&f, ctx, "");
    ir_parse(k, text, why, sizeof why);
    k->nodes[k->body].op = OP_MUL;
    broken(&f, "an accumulator's op must be sum or max");
    k = fix_open(&f, ctx, "");
    ir_parse(k, text, why, sizeof why);
    IrBlock top = {0, k->body};
    IrRef l2 = ir_loop(k, &top, E(k, "1"), LOOP_SERIAL, 1);
    IrBlock in = {l2, 0};
    CHECK(ir_acc(k, &in, OP_SUM, KN_F32) == 1);
    k->nodes[k->nodes[l2].child].var = 0; /* a second a0 */
    broken(&f, "a0 is declared twice");
    k = fix_open(&f, ctx, "");
    ir_parse(k, text, why, sizeof why);
    top = (IrBlock){0, 0}; /* a use placed before the declaration */
    ir_store(k, &top, 1, E(k, "0"), ir_accval(k, 0));
    broken(&f, "`b1[0] = a0`: a0 is not declared in an enclosing block before this");
}

/* A chain deeper than IR_MAX_DEPTH builds but does not verify; one of
 * exactly IR_MAX_DEPTH values does, and round-trips. */
static void test_depth(void)
{
    Fix f;
    char why[128];
    static char text[8192];
    Kernel *k = fix_open(&f, ctx, "deep");
    int o = ir_buf(k, KN_F32, BUF_OUT, E(k, "1"), 0);
    IrRef v = ir_const(k, KN_F32, 1);
    for (int i = 1; i < IR_MAX_DEPTH; i++) v = ir_op(k, OP_NEG, KN_F32, v, 0, 0);
    IrBlock top = {0, 0};
    ir_store(k, &top, o, E(k, "0"), v);
    CHECK(ir_verify(ctx, k) == 0);
    ir_print(k, text, sizeof text);
    Fix g;
    Kernel *k2 = fix_open(&g, ctx, "");
    CHECK_MSG(ir_parse(k2, text, why, sizeof why) == 0, "%s", why);
    CHECK(strcmp(P(k2), text) == 0);
    fix_close(&g);
    top = (IrBlock){0, 0};
    ir_store(k, &top, o, E(k, "0"), ir_op(k, OP_NEG, KN_F32, v, 0, 0));
    broken(&f, "values nested deeper than 256");
}

/* ---- parse errors ---- */

static const struct {
    const char *text, *want; /* want: "line N: reason" starts so */
} bad_texts[] = {
    {"", "line 0: no kernel header"},
    {"kernal k()\n", "line 1: expected 'kernel'"},
    {"kernel (in b0 f32[4])\n", "line 1: expected a kernel name"},
    {"kernel k(in b1 f32[4])\n", "line 1: buffers must be numbered in order: expected b0"},
    {"kernel k(inn b0 f32[4])\n", "line 1: expected in, out or tmp"},
    {"kernel k(in b0 f31[4])\n", "line 1: expected a dtype"},
    {"kernel k(in b0 f32[4)\n", "line 1: expected ']'"},
    {"kernel k(in b0 f32[4]\n", "line 1: expected ')'"},
    {"kernel k(in b0 f32[4+])\n", "line 1: bad expression '4+'"},
    {"kernel k() extra\n", "line 1: unexpected text at the end"},
    {"kernel k()\nfor s0 in 4\n", "line 2: indent must be two spaces per level"},
    {"kernel k()\n   for s0 in 4\n", "line 2: indent must be two spaces per level"},
    {"kernel k()\n    for s0 in 4\n", "line 2: indented deeper than its block"},
    {"kernel k()\n  for s0 in 4\n      for s1 in 4\n", "line 3: indented deeper than its block"},
    {"kernel k()\n  for s0 in 4 sideways\n", "line 2: unknown loop kind 'sideways'"},
    {"kernel k()\n  for s0 in 4 vector(0)\n", "line 2: vector width must be at least 1"},
    {"kernel k()\n  for s0 in 4 vector\n", "line 2: expected '('"},
    {"kernel k()\n  for s0 on 4\n", "line 2: expected 'in'"},
    {"kernel k()\n  for x0 in 4\n", "line 2: expected s and a number"},
    {"kernel k()\n  for s0 in\n", "line 2: bad expression ''"},
    {"kernel k()\n  fork s0 in 4\n", "line 2: expected for, acc, a store or an update"},
    {"kernel k(out b0 f32[4])\n  b1[0] = 1\n", "line 2: unknown buffer b1"},
    {"kernel k(out b0 f32[4])\n  b0[0] = b3[0]\n", "line 2: unknown buffer b3"},
    {"kernel k(out b0 f32[4])\n  b0[0] = frob(1)\n", "line 2: unknown op 'frob'"},
    {"kernel k(out b0 f32[4])\n  b0[0] = reduce_max(1)\n", "line 2: unknown op 'reduce_max'"},
    {"kernel k(out b0 f32[4])\n  b0[0] = cast(1)\n", "line 2: unknown op 'cast'"},
    {"kernel k(out b0 f32[4])\n  b0[0] = cast.f99(1)\n", "line 2: unknown op 'cast.f99'"},
    {"kernel k(out b0 f32[4])\n  b0[0] = exp(1, 2)\n", "line 2: expected ')'"},
    {"kernel k(out b0 f32[4])\n  b0[0] = add(1)\n", "line 2: expected ','"},
    {"kernel k(out b0 f32[4])\n  b0[0] = a0\n", "line 2: accumulator a0 is not declared"},
    {"kernel k(out b0 f32[4])\n  acc a0 f32 sum\n  a0 max= 1\n", "line 3: a0 is a sum accumulator"},
    {"kernel k(out b0 f32[4])\n  acc a0 f32 sum\n  acc a0 f32 sum\n", "line 3: accumulator a0 declared twice"},
    {"kernel k(out b0 f32[4])\n  acc a0 f32 avg\n", "line 2: expected sum or max"},
    {"kernel k(out b0 f32[4])\n  a0 -= 1\n", "line 2: expected += or max="},
    {"kernel k(out b0 f32[4])\n  b0[0] = 1.5:i32\n", "line 2: 1.5 is not a i32 constant"},
    {"kernel k(out b0 f32[4])\n  b0[0] = 300:u8\n", "line 2: 300 is not a u8 constant"},
    {"kernel k(out b0 f32[4])\n  b0[0] = 1 2\n", "line 2: unexpected text at the end"},
    {"kernel k(out b0 f32[4])\n  b0[0] == 1\n", "line 2: expected a value"},
    {"kernel k(out b0 f32[4])\n\n  b0[0] = 1\n", "line 2: empty line"},
    {"kernel k(out b0 f32[4])\n  b0[0] = 1\n\n", "line 3: empty line"},
    {"kernel k(out b0 f32[4])\n  b0[0] = rand(1:i64, 2:i64 s0)\n", "line 2: expected ','"},
    {"kernel k(out b0 f32[4])\n  b0[0] = idx(s0\n", "line 2: expected ')'"},
    {"kernel k(out b0 f32[4])\n  b0[0] = -\n", "line 2: expected a value"},
    {"kernel k(out b0 f32[4])\n  b0[0] = 1e\n", "line 2: unexpected text at the end"},
    {"kernel k(out b0 f32[4])\n  b0[0; ] = 1\n", "line 2: expected a value"},
    {"kernel k(out b0 f32[4])\n  b0[0; 1:i64 = 1\n", "line 2: expected ']'"},
    {"kernel k(out b0 f32[4])\n  b0[0] = check(1:i64 4)\n", "line 2: expected ','"},
    {"kernel k(out b0 f32[4])\n  b0[0] =+ 1\n", "line 2: expected a value"},
    {"kernel k(out b0 f32[4])\n  b99999999[0] = 1\n", "line 2: number out of range"},
    {"kernel k(out b0 f32[4])\n\tb0[0] = 1\n", "line 2: indent must be two spaces"},
    {"kernel k(out b0 f32[4])\r\n  b0[0] = 1\n", "line 1: unexpected text at the end"},
};

static void test_parse_errors(void)
{
    for (size_t i = 0; i < sizeof bad_texts / sizeof bad_texts[0]; i++) {
        Fix f;
        char why[256] = "unset";
        Kernel *k = fix_open(&f, ctx, "");
        int r = ir_parse(k, bad_texts[i].text, why, sizeof why);
        CHECK_MSG(r == -1 && strncmp(why, bad_texts[i].want, strlen(bad_texts[i].want)) == 0,
                  "text %d:\n%s\ngave %d \"%s\", want \"%s\"", (int)i, bad_texts[i].text, r, why, bad_texts[i].want);
        fix_close(&f);
    }
}

/* Values and loops nested past the limits, and a kernel that is not empty. */
static void test_parse_limits(void)
{
    static char text[16384];
    char why[256];
    Fix f;
    size_t n = (size_t)sprintf(text, "kernel k(out b0 f32[4])\n  b0[0] = ");
    for (int i = 0; i <= IR_MAX_DEPTH; i++) n += (size_t)sprintf(text + n, "neg(");
    n += (size_t)sprintf(text + n, "1");
    for (int i = 0; i <= IR_MAX_DEPTH; i++) text[n++] = ')';
    strcpy(text + n, "\n");
    Kernel *k = fix_open(&f, ctx, "");
    CHECK(ir_parse(k, text, why, sizeof why) == -1 && strstr(why, "values nested deeper than 256"));
    fix_close(&f);
    n = (size_t)sprintf(text, "kernel k(out b0 f32[4])\n");
    for (int i = 0; i <= IR_MAX_NEST; i++) n += (size_t)sprintf(text + n, "%*sfor s%d in 2\n", 2 * i + 2, "", i);
    k = fix_open(&f, ctx, "");
    CHECK(ir_parse(k, text, why, sizeof why) == -1 && strstr(why, "line 34: loops nested deeper than 32"));
    fix_close(&f);
    k = fix_open(&f, ctx, "");
    CHECK(ir_parse(k, pointwise_text, why, sizeof why) == 0);
    CHECK(ir_parse(k, pointwise_text, why, sizeof why) == -1 && strstr(why, "not empty"));
    CHECK(ir_parse(k, NULL, NULL, 0) == -1);
    fix_close(&f);
    k = fix_open(&f, ctx, "");   /* no final newline, spaces between value tokens */
    CHECK(ir_parse(k, "kernel k(out b0 f32[4])\n  b0[ s0 ] = add( 1 , 2:f32 )", why, sizeof why) == 0);
    CHECK(strcmp(P(k), "kernel k(out b0 f32[4])\n  b0[s0] = add(1, 2)\n") == 0);
    fix_close(&f);
}

/* ---- fuzzing: random mutations of the golden dumps ---- */

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11) % n;
}

static char rnd_byte(void)
{
    static const char pick[] = " \n\n()[],:=+-*/%.sabk0123456789eifnx";
    return rnd(4) ? pick[rnd(sizeof pick - 1)] : (char)(1 + rnd(255));
}

/* One to three edits: replace a digit by a digit, replace, insert or
 * delete a byte, or copy a span (often a whole line). */
static size_t mutate(char *s, size_t n, size_t cap)
{
    for (int m = 1 + (int)rnd(3); m > 0 && n > 1; m--) {
        size_t at = rnd((uint32_t)n), len = 1 + rnd(24);
        if (rnd(3) == 0) { /* the line at 'at' */
            while (at > 0 && s[at - 1] != '\n') at--;
            for (len = 0; at + len < n && s[at + len] != '\n'; len++) {}
            len++;
        }
        switch (rnd(5)) {
        case 0: s[at] = rnd_byte(); break;
        case 4: if (s[at] >= '0' && s[at] <= '9') s[at] = (char)('0' + rnd(10)); break;
        case 1: if (n + 1 < cap) memmove(s + at + 1, s + at, n - at), s[at] = rnd_byte(), n++; break;
        case 2: memmove(s + at, s + at + 1, n - at - 1), n--; break;
        default:
            if (at + len > n || n + len >= cap) break;
            memmove(s + at + len, s + at, n - at), n += len; /* s[at, at+len) now repeats */
        }
    }
    s[n] = '\0';
    return n;
}

static void test_fuzz(void)
{
    static char text[8192], again[8192];
    int parsed = 0, failed = 0, roundtrip = 0, verified = 0;
    for (int it = 0; it < 2000; it++) {
        Fix f;
        char why[256];
        const char *src = *kernels[rnd(NKERNELS)].text;
        size_t n = strlen(src);
        memcpy(text, src, n + 1);
        mutate(text, n, sizeof text - 32);
        Kernel *k = fix_open(&f, ctx, "");
        if (ir_parse(k, text, why, sizeof why) != 0) {
            failed += strncmp(why, "line ", 5) == 0;
            fix_close(&f);
            continue;
        }
        parsed++;
        ir_print(k, again, sizeof again);
        Fix g;
        Kernel *k2 = fix_open(&g, ctx, "");
        roundtrip += ir_parse(k2, again, why, sizeof why) == 0 && strcmp(P(k2), again) == 0;
        verified += ir_verify(ctx, k) == 0;
        kn_clear_error(ctx);
        fix_close(&g);
        fix_close(&f);
    }
    CHECK_MSG(parsed + failed == 2000, "parsed %d, failed with a reason %d", parsed, failed);
    CHECK_MSG(roundtrip == parsed, "%d of %d parsed mutants did not round-trip", parsed - roundtrip, parsed);
    CHECK_MSG(parsed > 100 && failed > 500 && verified > 0, "parsed %d, failed %d, verified %d", parsed, failed, verified);
    printf("fuzz: %d mutants parsed (%d verified), %d rejected\n", parsed, verified, failed);
}

/* A random field of a random node, or a kernel count, set to a small
 * random value near the valid ones. */
static void mutate_node(Kernel *k)
{
    IrNode *x = &k->nodes[1 + rnd(k->n - 1)];
    uint32_t near = 1 + rnd(k->n + 2), e = rnd(k->ex->n + 2);
    switch (rnd(14)) {
    case 0: x->kind = (uint8_t)rnd(IR_NKINDS + 2); break;
    case 1: x->dtype = (uint8_t)rnd(KN_NDTYPES + 2); break;
    case 2: x->op = (uint16_t)rnd(OP_COUNT + 2); break;
    case 3: x->width = rnd(3); break;
    case 4: x->a = near; break;
    case 5: x->b = near; break;
    case 6: x->c = rnd(2) ? near : 0; break;
    case 7: x->child = rnd(2) ? near : 0; break;
    case 8: x->next = rnd(2) ? near : 0; break;
    case 9: x->buf = (int32_t)rnd((uint32_t)k->nbufs + 2) - 1; break;
    case 10: x->var = (int32_t)rnd(8) - 1; break;
    case 11: x->index = e; break;
    case 12: x->imm = rnd(2) ? -0.0 : 0.5; break;
    default: k->body = rnd(2) ? near % k->n : k->body; break;
    }
}

/* Broken kernels print and verify without crashing or hanging, and every
 * one the verifier accepts round-trips through the text. */
static void test_fuzz_nodes(void)
{
    static char text[65536], again[65536];
    int accepted = 0, roundtrip = 0;
    for (int it = 0; it < 2000; it++) {
        Fix f, g;
        char why[256];
        Kernel *k = fix_open(&f, ctx, "");
        ir_parse(k, *kernels[rnd(NKERNELS)].text, why, sizeof why);
        for (int m = 1 + (int)rnd(3); m > 0; m--) mutate_node(k);
        ir_print(k, text, sizeof text);
        if (ir_verify(ctx, k) == 0) {
            accepted++;
            Kernel *k2 = fix_open(&g, ctx, "");
            if (ir_parse(k2, text, why, sizeof why) == 0 && ir_print(k2, again, sizeof again) < sizeof again)
                roundtrip += strcmp(again, text) == 0;
            else printf("    accepted but did not read back (%s):\n%s", why, text);
            fix_close(&g);
        }
        kn_clear_error(ctx);
        fix_close(&f);
    }
    CHECK_MSG(accepted > 100 && roundtrip == accepted, "accepted %d, round-tripped %d", accepted, roundtrip);
    printf("node fuzz: %d broken kernels accepted by the verifier, all round-trip\n", accepted);
}

/* ---- allocation failures ---- */

typedef struct {
    long n, fail_at;
} Hook;

static void *hook_alloc(void *user, void *ptr, size_t osize, size_t nsize)
{
    Hook *h = user;
    (void)osize;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    if (++h->n >= h->fail_at && h->fail_at) return NULL;
    return realloc(ptr, nsize);
}

/* Failing every allocation from the Nth on: each parse fails cleanly or
 * gives the golden text. */
static void test_oom(void)
{
    int clean = 1, full = 0;
    for (long at = 1; at <= 40; at++) {
        Hook h = {0, at};
        kn_ctx_opts o;
        memset(&o, 0, sizeof o);
        o.alloc = hook_alloc;
        o.alloc_user = &h;
        kn_ctx *c = kn_ctx_new(&o);
        if (!c) continue;
        Fix f;
        char why[256];
        Kernel *k = fix_open(&f, c, "");
        if (ir_parse(k, softmax_text, why, sizeof why) == 0) full += strcmp(P(k), softmax_text) == 0;
        else clean &= strstr(why, "memory") != NULL;
        if (ir_verify(c, k) != 0) clean &= kn_last_status(c) == KN_ENOMEM || kn_last_status(c) == KN_EINVAL;
        fix_close(&f);
        kn_ctx_free(c);
    }
    CHECK(clean && full > 0);
}

int main(void)
{
    ctx = kn_ctx_new(NULL);
    test_golden();
    test_print_truncated();
    test_interning();
    test_builder_checks();
    test_blocks();
    test_verify_text();
    test_verify_nodes();
    test_verify_accs();
    test_depth();
    test_parse_errors();
    test_parse_limits();
    test_fuzz();
    test_fuzz_nodes();
    test_oom();
    kn_ctx_free(ctx);
    TEST_END("ir");
}
