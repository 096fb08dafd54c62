/*
 * test_loopopt.c — the loop passes of loopopt.h: golden dumps before and
 * after on the kernels of test_lower.c and on hand-written ones, ir_verify
 * after every pass (simplify, collapse, tile, mark, unroll), and a semantic
 * check: each kernel before and after is rendered by the C target, compiled
 * with TinyCC and run on the same random buffers; every output and tmp
 * buffer must come out byte for byte the same (the passes keep the order of
 * every operation that writes a value: a tile reorders only iterations that
 * write elements of their own).
 */
#include <stdint.h>
#include <stdlib.h>

#include "test.h"
#include "../port/port.h"
#include "../src/core.h"
#include "../src/loopopt.h"
#include "../src/lower.h"
#include "../targets/c/render.h"

typedef void (*KernelFn)(void **);

/* a value of 66 nodes */
#define DEEP "exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(b1[s0+s1*64])))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))"

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint32_t next_rand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Compiles k alone; NULL (and a failed check) when it does not. */
static PortModule *compile(const Kernel *k, KernelFn *fn)
{
    char why[256];
    size_t len = c_render(&k, 1, NULL, 0);
    char *src = malloc(len + 1);
    PortModule *m = NULL;
    void *p = NULL;
    if (src) c_render(&k, 1, src, len + 1), m = c_jit(PORT_TCC, src, NULL, why);
    if (m) p = port_jit_sym(m, k->name);
    CHECK_MSG(p != NULL, "%s: %s", k->name, m ? "no symbol" : why);
    if (p) memcpy(fn, &p, sizeof p);
    free(src);
    return p ? m : (port_jit_free(m), NULL);
}

/* Runs a and b (the same buffers, b with tmp buffers of its own after
 * them) on the same random inputs; 1 when every buffer they may write ends
 * equal: byte for byte, or with tol > 0 each float within tol * (1 + |a's|)
 * of a's (sums that b cascades). */
static int same_results(const Kernel *a, const Kernel *b, double tol)
{
    KernelFn fa, fb;
    PortModule *ma = compile(a, &fa), *mb = ma ? compile(b, &fb) : NULL;
    void *ba[64] = {0}, *bb[64] = {0};
    size_t bytes[64] = {0};
    int nb = a->nbufs < 64 ? a->nbufs : 64, ok = ma && mb && nb == a->nbufs && nb <= b->nbufs && b->nbufs <= 64;
    for (int i = nb; ok && i < b->nbufs; i++) ok = b->bufs[i].role == BUF_TMP; /* the function's own: none passed */
    for (int i = 0; ok && i < nb; i++) {
        int64_t n;
        ok = expr_as_const(a->ex, a->bufs[i].size, &n) && n >= 0;
        bytes[i] = (size_t)(ok ? n : 0) * kn_dtype_size((kn_dtype)a->bufs[i].dtype) + 1;
        ba[i] = malloc(bytes[i]), bb[i] = malloc(bytes[i]);
        unsigned char *p = ba[i];
        for (size_t j = 0; p && j < bytes[i]; j++) p[j] = (unsigned char)next_rand();
        if (a->bufs[i].dtype == KN_F32) /* finite floats in [-2, 2) */
            for (size_t j = 0; p && j + 4 <= bytes[i]; j += 4) {
                float f = (float)(next_rand() % 4096) / 1024.0f - 2.0f;
                memcpy(p + j, &f, 4);
            }
        if (a->bufs[i].dtype == KN_F64)
            for (size_t j = 0; p && j + 8 <= bytes[i]; j += 8) {
                double f = (double)(next_rand() % 4096) / 1024.0 - 2.0;
                memcpy(p + j, &f, 8);
            }
        if (p && bb[i]) memcpy(bb[i], ba[i], bytes[i]);
        ok = ok && p && bb[i];
    }
    if (ok) fa(ba), fb(bb);
    for (int i = 0; i < nb; i++) {
        int fl = a->bufs[i].dtype == KN_F32 || a->bufs[i].dtype == KN_F64, es = a->bufs[i].dtype == KN_F32 ? 4 : 8;
        if (ok && a->bufs[i].role != BUF_IN && tol > 0 && fl)
            for (size_t j = 0; j + (size_t)es <= bytes[i]; j += (size_t)es) {
                float fx, fy;
                double x, y;
                if (es == 4) memcpy(&fx, (char *)ba[i] + j, 4), memcpy(&fy, (char *)bb[i] + j, 4), x = fx, y = fy;
                else memcpy(&x, (char *)ba[i] + j, 8), memcpy(&y, (char *)bb[i] + j, 8);
                if (!(fabs(x - y) <= tol * (1 + fabs(x)))) ok = 0;
            }
        else if (ok && a->bufs[i].role != BUF_IN && memcmp(ba[i], bb[i], bytes[i]) != 0) ok = 0;
        free(ba[i]), free(bb[i]);
    }
    port_jit_free(ma), port_jit_free(mb);
    return ok;
}

/* Optimises k (verified before) with o, appending "before" and "after"
 * dumps; checks ir_verify after each pass and equal results (within
 * rounding where the cascade changed the kernel, or a column sum's tile
 * cascaded its rows into tmp buffers). */
static void optimise(kn_ctx *ctx, Kernel *k, const LoopOptions *o, char *before, char *after, size_t cap)
{
    enum { ALL = LOOPOPT_NO_SIMPLIFY | LOOPOPT_NO_SPLIT | LOOPOPT_NO_GUARDS | LOOPOPT_NO_COLLAPSE | LOOPOPT_NO_TILE |
                 LOOPOPT_NO_MARK | LOOPOPT_NO_CASCADE | LOOPOPT_NO_UNROLL };
    static const unsigned passes[8] = {ALL & ~LOOPOPT_NO_SIMPLIFY, ALL & ~LOOPOPT_NO_SPLIT,   ALL & ~LOOPOPT_NO_GUARDS,
                                       ALL & ~LOOPOPT_NO_COLLAPSE, ALL & ~LOOPOPT_NO_TILE,    ALL & ~LOOPOPT_NO_MARK,
                                       ALL & ~LOOPOPT_NO_CASCADE,  ALL & ~LOOPOPT_NO_UNROLL};
    static char text[8192], pre[8192];
    char why[128];
    size_t lb = strlen(before), la = strlen(after);
    int cascaded = 0;
    Kernel orig;
    ir_print(k, text, sizeof text);
    ir_init(&orig, k->arena, k->ex, k->name);
    CHECK_MSG(ir_parse(&orig, text, why, sizeof why) == 0, "%s", why);
    ir_print(k, before + lb, lb < cap ? cap - lb : 0);
    for (int p = 0; p < 8; p++) { /* one pass at a time, in loopopt_run's order */
        LoopOptions one = *o;
        one.skip = o->skip | passes[p];
        ir_print(k, pre, sizeof pre);
        CHECK_MSG(loopopt_run(ctx, k, &one) == 0, "%s", kn_last_error(ctx));
        CHECK_MSG(ir_verify(ctx, k) == 0, "pass %d: %s", p, kn_last_error(ctx));
        ir_print(k, text, sizeof text);
        if (passes[p] == (ALL & ~LOOPOPT_NO_CASCADE)) cascaded = strcmp(pre, text) != 0;
    }
    ir_print(k, after + la, la < cap ? cap - la : 0);
    int64_t n;
    int sized = 1; /* buffers of shape symbols (IR_SHAPE_SYM) have no size to run here: test_dynamic runs them */
    for (int i = 0; i < k->nbufs; i++) sized &= expr_as_const(k->ex, k->bufs[i].size, &n);
    if (port_jit_available(PORT_TCC) && sized)
        CHECK_MSG(same_results(&orig, k, cascaded || k->nbufs > orig.nbufs ? 1e-4 : 0), "%s: results differ", k->name);
}

/* Schedules and lowers y's graph, optimises every kernel; dumps all kernels. */
static void lower_opt(kn_ctx *ctx, kn_tensor *y, const LoopOptions *o, const char *want_before,
                      const char *want_after)
{
    char before[8192] = "", after[8192] = "";
    Arena a;
    arena_init(&a, ctx);
    Schedule s;
    ExprTable ex;
    expr_init(&ex, ctx);
    int ok = sched_build(ctx, ctx->trace, &y->node, 1, &a, &s) == 0;
    CHECK_MSG(ok, "%s", kn_last_error(ctx));
    for (int i = 0; ok && i < s.nkernels; i++) {
        Kernel k;
        int r = lower_kernel(ctx, ctx->trace, &s, s.kernels[i], &ex, &a, &k);
        if (r == LOWER_INTERP) continue;
        ok = CHECK(r == 0 && ir_verify(ctx, &k) == 0);
        if (ok) optimise(ctx, &k, o, before, after, sizeof before);
    }
    CHECK_MSG(strcmp(before, want_before) == 0, "before:\n%s", before);
    CHECK_MSG(strcmp(after, want_after) == 0, "after:\n%s", after);
    expr_free(&ex);
    arena_free(&a);
    graph_free(ctx->trace);
    ctx->trace = NULL;
}

/* Parses text, optimises it, compares with want. */
static void hand(kn_ctx *ctx, const char *text, const LoopOptions *o, const char *want)
{
    char before[4096] = "", after[4096] = "", why[128];
    Arena a;
    arena_init(&a, ctx);
    ExprTable ex;
    expr_init(&ex, ctx);
    Kernel k;
    ir_init(&k, &a, &ex, "k");
    why[0] = 0;
    int ok = ir_parse(&k, text, why, sizeof why) == 0 && ir_verify(ctx, &k) == 0;
    CHECK_MSG(ok, "%s %s", why, kn_last_error(ctx));
    if (ok) {
        optimise(ctx, &k, o, before, after, sizeof before);
        CHECK_MSG(strcmp(before, text) == 0, "reprinted:\n%s", before);
        CHECK_MSG(strcmp(after, want) == 0, "after:\n%s", after);
    }
    expr_free(&ex);
    arena_free(&a);
}

int main(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    LoopOptions o = {0}, small = {8, 4, 0, 0}, no_mark = {0, 0, LOOPOPT_NO_MARK | LOOPOPT_NO_CASCADE | LOOPOPT_NO_UNROLL, 0};
    LoopOptions no_vector = {0, 64, 0, 0}; /* vector loops of 64 and more: these stay serial */
    LoopOptions no_unroll = {0, 0, LOOPOPT_NO_UNROLL, 0}; /* the split and guard goldens: their short loops stay */
    int64_t s48[2] = {4, 8}, s4 = 4, big[2] = {256, 256};
    kn_tensor *x = kn_randn(ctx, KN_F32, 2, s48), *w = kn_randn(ctx, KN_F32, 2, s48);
    kn_tensor *b = kn_randn(ctx, KN_F32, 1, &s4), *xb = kn_randn(ctx, KN_F32, 2, big);

    /* the kernels of test_lower.c */
    ctx->trace = graph_new(ctx);
    lower_opt(ctx, kn_exp(ctx, kn_add(ctx, kn_transpose(ctx, x, 0, 1), kn_scalar(ctx, 1.0))), &o,
           "kernel k8_exp(out b0 f32[32], in b1 f32[32], in b2 f64[1])\n"
           "  for s0 in 8\n"
           "    for s1 in 4\n"
           "      b0[s0*4+s1] = exp(add(b1[s0+s1*8], cast.f32(b2[0])))\n",
           "kernel k8_exp(out b0 f32[32], in b1 f32[32], in b2 f64[1])\n"
           "  for s0 in 8\n"
           "    for s1 in 4 unroll(4)\n"
           "      b0[s0*4+s1] = exp(add(b1[s0+s1*8], cast.f32(b2[0])))\n");
    ctx->trace = graph_new(ctx);
    lower_opt(ctx, kn_softmax(ctx, x, 1), &o,
           "kernel k8_div(out b0 f32[32], in b1 f32[32])\n"
           "  for s0 in 4\n"
           "    acc a0 f32 max\n"
           "    for s1 in 8\n"
           "      a0 max= b1[s0*8+s1]\n"
           "    acc a1 f32 sum\n"
           "    for s2 in 8\n"
           "      b0[s0*8+s2] = exp(min(sub(b1[s0*8+s2], a0), 0))\n"
           "    for s3 in 8\n"
           "      a1 += b0[s0*8+s3]\n"
           "    for s4 in 8\n"
           "      b0[s0*8+s4] = mul(b0[s0*8+s4], recip(a1))\n",
           "kernel k8_div(out b0 f32[32], in b1 f32[32])\n"
           "  for s0 in 4\n"
           "    acc a0 f32 max\n"
           "    for s1 in 8 vector(8)\n"
           "      a0 max= b1[s0*8+s1]\n"
           "    acc a1 f32 sum\n"
           "    for s2 in 8 vector(8)\n"
           "      b0[s0*8+s2] = exp(min(sub(b1[s0*8+s2], a0), 0))\n"
           "    for s3 in 8 vector(8)\n"
           "      a1 += b0[s0*8+s3]\n"
           "    for s4 in 8 vector(8)\n"
           "      b0[s0*8+s4] = mul(b0[s0*8+s4], recip(a1))\n");
    /* the same rows, big enough for threads: the row loop is parallel */
    int64_t s256[2] = {256, 256};
    kn_tensor *xs = kn_randn(ctx, KN_F32, 2, s256);
    ctx->trace = graph_new(ctx);
    lower_opt(ctx, kn_softmax(ctx, xs, 1), &o,
           "kernel k8_div(out b0 f32[65536], in b1 f32[65536])\n"
           "  for s0 in 256\n"
           "    acc a0 f32 max\n"
           "    for s1 in 256\n"
           "      a0 max= b1[s0*256+s1]\n"
           "    acc a1 f32 sum\n"
           "    for s2 in 256\n"
           "      b0[s0*256+s2] = exp(min(sub(b1[s0*256+s2], a0), 0))\n"
           "    for s3 in 256\n"
           "      a1 += b0[s0*256+s3]\n"
           "    for s4 in 256\n"
           "      b0[s0*256+s4] = mul(b0[s0*256+s4], recip(a1))\n",
           "kernel k8_div(out b0 f32[65536], in b1 f32[65536])\n"
           "  for s0 in 256 parallel\n"
           "    acc a0 f32 max\n"
           "    for s1 in 256 vector(8)\n"
           "      a0 max= b1[s0*256+s1]\n"
           "    acc a1 f32 sum\n"
           "    for s2 in 256 vector(8)\n"
           "      b0[s0*256+s2] = exp(min(sub(b1[s0*256+s2], a0), 0))\n"
           "    for s3 in 256 vector(8)\n"
           "      a1 += b0[s0*256+s3]\n"
           "    for s4 in 256 vector(8)\n"
           "      b0[s0*256+s4] = mul(b0[s0*256+s4], recip(a1))\n");
    ctx->trace = graph_new(ctx);
    lower_opt(ctx, kn_relu(ctx, kn_linear(ctx, x, w, b)), &o,
           "kernel k15_where(out b0 f32[16], in b1 f32[32], in b2 f32[32], in b3 f32[4])\n"
           "  for s0 in 4\n"
           "    for s1 in 4\n"
           "      acc a0 f32 sum\n"
           "      for s2 in 8\n"
           "        a0 += mul(b1[s0*8+s2], b2[s1*8+s2])\n"
           "      b0[s0*4+s1] = where(cmplt(0, add(a0, b3[s1%4])), add(a0, b3[s1%4]), "
           "where(cmpeq(add(a0, b3[s1%4]), add(a0, b3[s1%4])), 0, add(a0, b3[s1%4])))\n",
           "kernel k15_where(out b0 f32[16], in b1 f32[32], in b2 f32[32], in b3 f32[4])\n"
           "  for s0 in 4\n"
           "    for s1 in 4\n"
           "      acc a0 f32 sum\n"
           "      for s2 in 8 vector(8)\n"
           "        a0 += mul(b1[s0*8+s2], b2[s1*8+s2])\n"
           "      b0[s0*4+s1] = where(cmplt(0, add(a0, b3[s1])), add(a0, b3[s1]), "
           "where(cmpeq(add(a0, b3[s1]), add(a0, b3[s1])), 0, add(a0, b3[s1])))\n");
    /* contiguous pointwise: one flat loop, vector when small, parallel when big */
    ctx->trace = graph_new(ctx);
    lower_opt(ctx, kn_exp(ctx, kn_add(ctx, x, w)), &o,
           "kernel k4_exp(out b0 f32[32], in b1 f32[32], in b2 f32[32])\n"
           "  for s0 in 4\n"
           "    for s1 in 8\n"
           "      b0[s0*8+s1] = exp(add(b1[s0*8+s1], b2[s0*8+s1]))\n",
           "kernel k4_exp(out b0 f32[32], in b1 f32[32], in b2 f32[32])\n"
           "  for s0 in 32 vector(8)\n"
           "    b0[s0] = exp(add(b1[s0], b2[s0]))\n");
    ctx->trace = graph_new(ctx);
    lower_opt(ctx, kn_exp(ctx, xb), &o,
           "kernel k2_exp(out b0 f32[65536], in b1 f32[65536])\n"
           "  for s0 in 256\n"
           "    for s1 in 256\n"
           "      b0[s0*256+s1] = exp(b1[s0*256+s1])\n",
           "kernel k2_exp(out b0 f32[65536], in b1 f32[65536])\n"
           "  for s0 in 65536 parallel\n"
           "    b0[s0] = exp(b1[s0])\n");

    /* simplification: floordiv, mod, max with ranges; idx() too */
    hand(ctx,
         "kernel k(out b0 f32[12], in b1 f32[12], out b2 i64[12])\n"
         "  for s0 in 3\n"
         "    for s1 in 4\n"
         "      b0[s0*4+s1] = add(b1[s0*4+s1//4*4+s1%4], b1[s0*4+max(4,s1)-4])\n"
         "      b2[s0*4+s1] = idx(s1//4+s0%3+1)\n",
         &o,
           "kernel k(out b0 f32[12], in b1 f32[12], out b2 i64[12])\n"
           "  for s0 in 3\n"
           "    for s1 in 4 unroll(4)\n"
           "      b0[s0*4+s1] = add(b1[s0*4+s1], b1[s0*4])\n"
           "      b2[s0*4+s1] = idx(s0+1)\n");
    /* a sum over a divisor: (s0*8+s1)//32 is s0//4 and (s0*8+s1)%32 is
     * (s0%4)*8+s1 while s1 < 8, and (s0//4)*32+(s0%4)*8 joins into s0*8, so
     * a flattened index read back through a reshape is plain again; with
     * s1 up to 8 (b2's store) neither rule holds */
    hand(ctx,
         "kernel k(out b0 f32[96], in b1 f32[96], out b2 i64[108])\n"
         "  for s0 in 12\n"
         "    for s1 in 8\n"
         "      b0[s0*8+s1] = add(b1[s1+(s0*8+s1)//32*32+s0%4*8], b1[s0//4*32+(s0*8+s1)%32])\n"
         "    for s2 in 9\n"
         "      b2[s0*9+s2] = idx((s0*8+s2)//32-(s0*8+s2+4)%16)\n",
         &o,
           "kernel k(out b0 f32[96], in b1 f32[96], out b2 i64[108])\n"
           "  for s0 in 12\n"
           "    for s1 in 8 vector(8)\n"
           "      b0[s0*8+s1] = add(b1[s0*8+s1], b1[s0*8+s1])\n"
           "    for s2 in 9 vector(8)\n"
           "      b2[s0*9+s2] = idx((s0*8+s2)//32-(s0*8+s2+4)%16)\n");
    /* three loops collapse into one; rand's counter is an index too */
    hand(ctx,
         "kernel k(out b0 f32[24], in b1 f32[24], out b2 f32[24])\n"
         "  for s0 in 2\n"
         "    for s1 in 3\n"
         "      for s2 in 4\n"
         "        b0[s0*12+s1*4+s2] = neg(b1[s0*12+s1*4+s2])\n"
         "        b2[s0*12+s1*4+s2] = rand(7:i64, 5:i64, s0*12+s1*4+s2)\n",
         &o,
           "kernel k(out b0 f32[24], in b1 f32[24], out b2 f32[24])\n"
           "  for s0 in 24 vector(8)\n"
           "    b0[s0] = neg(b1[s0])\n"
           "    b2[s0] = rand(7:i64, 5:i64, s0)\n");
    hand(ctx,
         "kernel k(out b0 f32[65536], in b1 f32[65536])\n"
         "  for s0 in 256\n"
         "    for s1 in 256\n"
         "      b0[s0*256+s1] = mul(b1[s0*256+s1], 2)\n",
         &o,
           "kernel k(out b0 f32[65536], in b1 f32[65536])\n"
           "  for s0 in 65536 parallel\n"
           "    b0[s0] = mul(b1[s0], 2)\n");
    /* a unit outer loop collapses whatever its coefficients (s0 is 0): the
     * 512 rows of this transposing gather become the parallel loop, where
     * before the loop of 1 was marked parallel, one thread's work; then
     * its 16 x 16 tiles (its load strides 512 in s2) */
    hand(ctx,
         "kernel k(out b0 f32[65536], in b1 f32[65536])\n"
         "  for s0 in 1\n"
         "    for s1 in 512\n"
         "      for s2 in 128\n"
         "        b0[s0*65536+s1*128+s2] = b1[s0*7+s1+s2*512]\n",
         &o,
           "kernel k(out b0 f32[65536], in b1 f32[65536])\n"
           "  for s0 in 32 parallel\n"
           "    for s2 in 8\n"
           "      for s3 in 16\n"
           "        for s4 in 16\n"
           "          b0[s0*2048+s2*16+s3*128+s4] = b1[s0*16+s2*8192+s3+s4*512]\n");
    /* every s0 writes the same b0[s1]: neither collapsed nor parallel */
    hand(ctx,
         "kernel k(out b0 f32[256], in b1 f32[65536])\n"
         "  for s0 in 256\n"
         "    for s1 in 256\n"
         "      b0[s1] = b1[s0*256+s1]\n",
         &o,
           "kernel k(out b0 f32[256], in b1 f32[65536])\n"
           "  for s0 in 256\n"
           "    for s1 in 256 vector(8)\n"
           "      b0[s1] = b1[s0*256+s1]\n");
    /* stride 255 under a span of 256: rows overlap, not parallel */
    hand(ctx,
         "kernel k(out b0 f32[65536], in b1 f32[65536])\n"
         "  for s0 in 256\n"
         "    for s1 in 256\n"
         "      b0[s0*255+s1] = b1[s0*256+s1]\n",
         &o,
           "kernel k(out b0 f32[65536], in b1 f32[65536])\n"
           "  for s0 in 256\n"
           "    for s1 in 256 vector(8)\n"
           "      b0[s0*255+s1] = b1[s0*256+s1]\n");
    /* an accumulator declared outside: serial; a reduction loop: vector (lanes), in cascaded blocks of 512 */
    hand(ctx,
         "kernel k(out b0 f32[1], in b1 f32[65536])\n"
         "  acc a0 f32 sum\n"
         "  for s0 in 65536\n"
         "    a0 += b1[s0]\n"
         "  b0[0] = a0\n",
         &o,
           "kernel k(out b0 f32[1], in b1 f32[65536])\n"
           "  acc a0 f32 sum\n"
           "  for s1 in 8\n"
           "    acc a1 f32 sum\n"
           "    for s2 in 16\n"
           "      acc a2 f32 sum\n"
           "      for s0 in 512 vector(8)\n"
           "        a2 += b1[s0+s1*8192+s2*512]\n"
           "      a1 += a2\n"
           "    a0 += a1\n"
           "  b0[0] = a0\n");
    /* rows of a reduction: parallel over s0 */
    hand(ctx,
         "kernel k(out b0 f32[1024], in b1 f32[65536])\n"
         "  for s0 in 1024\n"
         "    acc a0 f32 max\n"
         "    for s1 in 64\n"
         "      a0 max= b1[s0*64+s1]\n"
         "    b0[s0] = a0\n",
         &o,
           "kernel k(out b0 f32[1024], in b1 f32[65536])\n"
           "  for s0 in 1024 parallel\n"
           "    acc a0 f32 max\n"
           "    for s1 in 64 vector(8)\n"
           "      a0 max= b1[s0*64+s1]\n"
           "    b0[s0] = a0\n");
    /* a loop that reads an accumulator declared outside it: not parallel */
    hand(ctx,
         "kernel k(out b0 f32[65536], in b1 f32[65536])\n"
         "  acc a0 f32 sum\n"
         "  for s0 in 65536\n"
         "    a0 += b1[s0]\n"
         "  for s1 in 65536\n"
         "    b0[s1] = div(b1[s1], a0)\n",
         &o,
           "kernel k(out b0 f32[65536], in b1 f32[65536])\n"
           "  acc a0 f32 sum\n"
           "  for s2 in 8\n"
           "    acc a1 f32 sum\n"
           "    for s3 in 16\n"
           "      acc a2 f32 sum\n"
           "      for s0 in 512 vector(8)\n"
           "        a2 += b1[s0+s2*8192+s3*512]\n"
           "      a1 += a2\n"
           "    a0 += a1\n"
           "  for s1 in 65536 vector(8)\n"
           "    b0[s1] = div(b1[s1], a0)\n");
    /* strided loads, and a loop that reads what it writes: not vector */
    hand(ctx,
         "kernel k(out b0 f32[64], in b1 f32[128], out b2 f32[64])\n"
         "  for s0 in 64\n"
         "    b0[s0] = b1[s0*2]\n"
         "  for s1 in 64\n"
         "    b2[s1] = 1\n"
         "    b0[s1] = b2[-s1+63]\n",
         &o,
           "kernel k(out b0 f32[64], in b1 f32[128], out b2 f32[64])\n"
           "  for s0 in 64\n"
           "    b0[s0] = b1[s0*2]\n"
           "  for s1 in 64\n"
           "    b2[s1] = 1\n"
           "    b0[s1] = b2[-s1+63]\n");
    /* split: a permute read back through a flat loop of 12 = 3*4 (b1 is (4, 3), b0 its
     * transpose (3, 4) flattened) divides by 4; split by 4, the index is affine in both loops; a
     * flipped 3x3 window read through a loop of 18 = 2*9 splits by 9, where simplify makes the
     * rest s6%3+s6//3*3 of one window s6 again; an odd extent (7) has no divisor of 2 to split by; and
     * s1%2 over 6 splits into a phase loop of 2 that a mask reads through idx() */
    hand(ctx,
         "kernel k(out b0 f32[24], in b1 f32[24], out b2 f32[36], in b3 f32[36], out b4 f32[14], "
         "in b5 f32[14], out b6 i64[12])\n"
         "  for s0 in 2\n"
         "    for s1 in 12\n"
         "      b0[s0*12+s1] = b1[s0*12+s1//4+s1%4*3]\n"
         "    for s2 in 18\n"
         "      b2[s0*18+s2] = b3[s0*18+s2//9*9-s2%3-s2//3%3*3+8]\n"
         "    for s3 in 7\n"
         "      b4[s0*7+s3] = b5[s0*7+s3//2+s3%2*3]\n"
         "    for s4 in 6\n"
         "      b6[s0*6+s4] = idx(s4//2+s4%2)\n",
         &no_unroll,
           "kernel k(out b0 f32[24], in b1 f32[24], out b2 f32[36], in b3 f32[36], out b4 f32[14], "
           "in b5 f32[14], out b6 i64[12])\n"
           "  for s0 in 2\n"
           "    for s1 in 3\n"
           "      for s5 in 4\n"
           "        b0[s0*12+s1*4+s5] = b1[s0*12+s1+s5*3]\n"
           "    for s2 in 2\n"
           "      for s6 in 9\n"
           "        b2[s0*18+s2*9+s6] = b3[s0*18+s2*9-s6+8]\n"
           "    for s3 in 7\n"
           "      b4[s0*7+s3] = b5[s0*7+s3//2+s3%2*3]\n"
           "    for s4 in 3\n"
           "      for s7 in 2\n"
           "        b6[s0*6+s4*2+s7] = idx(s4+s7)\n");
    /* guards: a pad's mask (s1-1 in [0, 4) over 6) cuts its loop at 1 and 5, the pieces of one
     * iteration become their bodies and the mask folds in each: b1 at s1-1 is plain; a phase's (s3
     * < 1 over 2) picks a branch in each; a cat's mask on s4*4+s5 < 4, with s5 in [0, 4), cuts the
     * outer s4 at 1 (an inner loop's range decides it), whose first piece, of one iteration, leaves
     * its loop of 4 (too short for a vector); a compare of two loop vars (causal), undecided past
     * the first iteration, cuts nothing; nor does a loop that declares an accumulator (s6's) */
    hand(ctx,
         "kernel k(out b0 f32[24], in b1 f32[16], out b2 f32[6], in b3 f32[3], out b4 f32[12], in b5 f32[4], "
         "in b6 f32[8], out b7 f32[16], out b8 f32[4])\n"
         "  for s0 in 4\n"
         "    for s1 in 6\n"
         "      b0[s0*6+s1] = where(min(cmplt(idx(s1-1), 4:i64), cmpeq(cmplt(idx(s1-1), 0:i64), 0:bool)), "
         "b1[s0*4+s1-1], 0)\n"
         "  for s2 in 3\n"
         "    for s3 in 2\n"
         "      b2[s2*2+s3] = where(cmplt(idx(s3), 1:i64), b3[s2], add(b3[s2], 1))\n"
         "  for s4 in 3\n"
         "    for s5 in 4\n"
         "      b4[s4*4+s5] = where(cmplt(idx(s4*4+s5), 4:i64), b5[s5], b6[s4*4+s5-4])\n"
         "  for s6 in 4\n"
         "    for s7 in 4\n"
         "      b7[s6*4+s7] = where(cmplt(idx(s6), idx(s7)), 0, b1[s6*4+s7])\n"
         "    acc a0 f32 sum\n"
         "    for s8 in 4\n"
         "      a0 += where(cmplt(idx(s6), 2:i64), b1[s6*4+s8], 0)\n"
         "    b8[s6] = a0\n",
         &no_unroll,
           "kernel k(out b0 f32[24], in b1 f32[16], out b2 f32[6], in b3 f32[3], out b4 f32[12], in b5 f32[4], "
           "in b6 f32[8], out b7 f32[16], out b8 f32[4])\n"
           "  for s0 in 4\n"
           "    b0[s0*6] = 0\n"
           "    for s1 in 4\n"
           "      b0[s0*6+s1+1] = b1[s0*4+s1]\n"
           "    b0[s0*6+5] = 0\n"
           "  for s2 in 3\n"
           "    b2[s2*2] = b3[s2]\n"
           "    b2[s2*2+1] = add(b3[s2], 1)\n"
           "  for s5 in 4\n"
           "    b4[s5] = b5[s5]\n"
           "  for s4 in 8 vector(8)\n"
           "    b4[s4+4] = b6[s4]\n"
           "  for s6 in 4\n"
           "    for s7 in 4\n"
           "      b7[s6*4+s7] = where(cmplt(idx(s6), idx(s7)), 0, b1[s6*4+s7])\n"
           "    acc a0 f32 sum\n"
           "    for s8 in 4\n"
           "      a0 += where(cmplt(idx(s6), 2:i64), b1[s6*4+s8], 0)\n"
           "    b8[s6] = a0\n");
    /* guards: s0's cut (at 1) makes two pieces of one iteration, each unwrapped, and the s1 of
     * the second is cut in the next round (at 1): loops nested in a cut loop are cut in pieces of
     * their own (a product's backward) */
    hand(ctx,
         "kernel k(out b0 f32[8], in b1 f32[8])\n"
         "  for s0 in 2\n"
         "    for s1 in 4\n"
         "      b0[s0*4+s1] = where(cmplt(idx(s0*4+s1), 4:i64), b1[s1], where(cmplt(idx(s1), 1:i64), 0, b1[s0*4+s1]))\n",
         &no_unroll,
           "kernel k(out b0 f32[8], in b1 f32[8])\n"
           "  for s1 in 4\n"
           "    b0[s1] = b1[s1]\n"
           "  b0[4] = 0\n"
           "  for s1 in 3\n"
           "    b0[s1+5] = b1[s1+5]\n");
    /* options: a small threshold and width 4 */
    hand(ctx,
         "kernel k(out b0 f32[16], in b1 f32[16], in b2 f32[4])\n"
         "  for s0 in 4\n"
         "    for s1 in 4\n"
         "      b0[s0*4+s1] = add(b1[s0*4+s1], b2[s1%4])\n",
         &small,
           "kernel k(out b0 f32[16], in b1 f32[16], in b2 f32[4])\n"
           "  for s0 in 4 parallel\n"
           "    for s1 in 4 vector(4)\n"
           "      b0[s0*4+s1] = add(b1[s0*4+s1], b2[s1])\n");
    /* tile, rule 1: the sums of 64 columns become 4 tiles of 16 columns, each summed a row at a time
     * into the output (a vector loop), from 0 and in the accumulator's order (the same bits): 16 rows */
    hand(ctx,
         "kernel k(out b0 f32[64], in b1 f32[1024], in b2 f32[64])\n"
         "  for s0 in 64\n"
         "    acc a0 f32 sum\n"
         "    for s1 in 16\n"
         "      a0 += mul(b1[s0+s1*64], b2[s0])\n"
         "    b0[s0] = a0\n",
         &o,
         "kernel k(out b0 f32[64], in b1 f32[1024], in b2 f32[64])\n"
         "  for s0 in 4\n"
         "    for s2 in 16 vector(8)\n"
         "      b0[s0*16+s2] = 0\n"
         "    for s1 in 16\n"
         "      for s3 in 16 vector(8)\n"
         "        b0[s0*16+s3] = add(b0[s0*16+s3], mul(b1[s0*16+s1*64+s3], b2[s0*16+s3]))\n");
    /* more than 16 rows: blocks of 16 rows summed into a tmp buffer of the tile's columns (the lanes of
     * a vector loop), added into the output (the pass 7 cascade's accumulators as rows of tmp buffers) */
    hand(ctx,
         "kernel k(out b0 f32[64], in b1 f32[4096], in b2 f32[64])\n"
         "  for s0 in 64\n"
         "    acc a0 f32 sum\n"
         "    for s1 in 64\n"
         "      a0 += mul(b1[s0+s1*64], b2[s0])\n"
         "    b0[s0] = a0\n",
         &o,
         "kernel k(out b0 f32[64], in b1 f32[4096], in b2 f32[64], tmp b3 f32[16])\n"
         "  for s0 in 4\n"
         "    for s2 in 16 vector(8)\n"
         "      b0[s0*16+s2] = 0\n"
         "    for s3 in 4\n"
         "      for s4 in 16 vector(8)\n"
         "        b3[s4] = 0\n"
         "      for s1 in 16\n"
         "        for s5 in 16 vector(8)\n"
         "          b3[s5] = add(b3[s5], mul(b1[s0*16+s1*64+s3*1024+s5], b2[s0*16+s5]))\n"
         "      for s6 in 16 vector(8)\n"
         "        b0[s0*16+s6] = add(b0[s0*16+s6], b3[s6])\n");
    /* big enough for threads: the tiles are the parallel loop (each thread's tmp buffers its own);
     * 512 rows are two levels of blocks; f64 */
    hand(ctx,
         "kernel k(out b0 f64[256], in b1 f64[131072])\n"
         "  for s0 in 256\n"
         "    acc a0 f64 sum\n"
         "    for s1 in 512\n"
         "      a0 += b1[s0+s1*256]\n"
         "    b0[s0] = a0\n",
         &o,
         "kernel k(out b0 f64[256], in b1 f64[131072], tmp b2 f64[16], tmp b3 f64[16])\n"
         "  for s0 in 16 parallel\n"
         "    for s2 in 16 vector(8)\n"
         "      b0[s0*16+s2] = 0:f64\n"
         "    for s3 in 2\n"
         "      for s4 in 16 vector(8)\n"
         "        b3[s4] = 0:f64\n"
         "      for s5 in 16\n"
         "        for s6 in 16 vector(8)\n"
         "          b2[s6] = 0:f64\n"
         "        for s1 in 16\n"
         "          for s7 in 16 vector(8)\n"
         "            b2[s7] = add(b2[s7], b1[s0*16+s1*256+s3*65536+s5*4096+s7])\n"
         "        for s8 in 16 vector(8)\n"
         "          b3[s8] = add(b3[s8], b2[s8])\n"
         "      for s9 in 16 vector(8)\n"
         "        b0[s0*16+s9] = add(b0[s0*16+s9], b3[s9])\n");
    /* not tiled: 24 columns (no whole tile), a sum stored scaled, a max, a load that reads the
     * output, rows (unit stride in s1: the row loop is better as it is) */
    const char *untiled[] = {
        "kernel k(out b0 f32[24], in b1 f32[1536])\n"
        "  for s0 in 24\n"
        "    acc a0 f32 sum\n"
        "    for s1 in 64\n"
        "      a0 += b1[s0+s1*24]\n"
        "    b0[s0] = a0\n",
        "kernel k(out b0 f32[64], in b1 f32[4096])\n"
        "  for s0 in 64\n"
        "    acc a0 f32 sum\n"
        "    for s1 in 64\n"
        "      a0 += b1[s0+s1*64]\n"
        "    b0[s0] = mul(a0, 0.5)\n",
        "kernel k(out b0 f32[64], in b1 f32[4096])\n"
        "  for s0 in 64\n"
        "    acc a0 f32 max\n"
        "    for s1 in 64\n"
        "      a0 max= b1[s0+s1*64]\n"
        "    b0[s0] = a0\n",
        "kernel k(out b0 f32[64], in b1 f32[4096])\n"
        "  for s0 in 64\n"
        "    acc a0 f32 sum\n"
        "    for s1 in 64\n"
        "      a0 += mul(b1[s0+s1*64], b0[s0])\n"
        "    b0[s0] = a0\n",
        "kernel k(out b0 f32[64], in b1 f32[4096])\n"
        "  for s0 in 64\n"
        "    acc a0 f32 sum\n"
        "    for s1 in 64\n"
        "      a0 += b1[s0*64+s1]\n"
        "    b0[s0] = a0\n",
    };
    for (int i = 0; i < 5; i++) hand(ctx, untiled[i], &no_mark, untiled[i]);
    /* tile, rule 2: a transposing copy of 64 x 48 (a weight's gradient) into 16 x 16 tiles; a copy
     * that loads what it stores, or of 64 x 40 (no whole tiles), is not tiled */
    hand(ctx,
         "kernel k(out b0 f32[3072], in b1 f32[3072])\n"
         "  for s0 in 64\n"
         "    for s1 in 48\n"
         "      b0[s0*48+s1] = cast.f32(b1[s0+s1*64])\n",
         &o,
         "kernel k(out b0 f32[3072], in b1 f32[3072])\n"
         "  for s0 in 4\n"
         "    for s1 in 3\n"
         "      for s2 in 16\n"
         "        for s3 in 16\n"
         "          b0[s0*768+s1*16+s2*48+s3] = cast.f32(b1[s0*16+s1*1024+s2+s3*64])\n");
    const char *untiled2[] = {
        "kernel k(out b0 f32[3072], in b1 f32[3072])\n"
        "  for s0 in 64\n"
        "    for s1 in 48\n"
        "      b0[s0*48+s1] = add(b1[s0+s1*64], b0[s0+s1*64])\n",
        "kernel k(out b0 f32[2560], in b1 f32[2560])\n"
        "  for s0 in 64\n"
        "    for s1 in 40\n"
        "      b0[s0*40+s1] = b1[s0+s1*64]\n",
    };
    for (int i = 0; i < 2; i++) hand(ctx, untiled2[i], &no_mark, untiled2[i]);
    /* unroll: a serial innermost loop of 8 (its load strided) is written out; one of 9, or whose
     * body would be over 512 nodes in all, is not */
    hand(ctx,
         "kernel k(out b0 f32[512], in b1 f32[512])\n"
         "  for s0 in 64\n"
         "    for s1 in 8\n"
         "      b0[s0*8+s1] = b1[s0+s1*64]\n",
         &o,
         "kernel k(out b0 f32[512], in b1 f32[512])\n"
         "  for s0 in 64\n"
         "    for s1 in 8 unroll(8)\n"
         "      b0[s0*8+s1] = b1[s0+s1*64]\n");
    const char *rolled[] = {
        "kernel k(out b0 f32[576], in b1 f32[576])\n"
        "  for s0 in 64\n"
        "    for s1 in 9\n"
        "      b0[s0*9+s1] = b1[s0+s1*64]\n",
        "kernel k(out b0 f32[512], in b1 f32[512])\n"
        "  for s0 in 64\n"
        "    for s1 in 8\n"
        "      b0[s0*8+s1] = " DEEP "\n",
    };
    for (int i = 0; i < 2; i++) hand(ctx, rolled[i], &no_vector, rolled[i]);

    /* cascade: a sum of 153605 in a vector loop: blocks of 512 (16 a lane of 32) under levels of at most
     * 16 blocks, the last levels' extents a min where the blocks do not divide evenly (300 of them), then
     * the last 5 values into an accumulator of their own */
    hand(ctx,
         "kernel k(out b0 f32[1], in b1 f32[153605])\n"
         "  acc a0 f32 sum\n"
         "  for s0 in 153605\n"
         "    a0 += b1[s0]\n"
         "  b0[0] = a0\n",
         &o,
         "kernel k(out b0 f32[1], in b1 f32[153605])\n"
         "  acc a0 f32 sum\n"
         "  for s1 in 2\n"
         "    acc a1 f32 sum\n"
         "    for s2 in min(16,-s1*16+19)\n"
         "      acc a2 f32 sum\n"
         "      for s3 in min(16,-s1*256-s2*16+300)\n"
         "        acc a3 f32 sum\n"
         "        for s0 in 512 vector(8)\n"
         "          a3 += b1[s0+s1*131072+s2*8192+s3*512]\n"
         "        a2 += a3\n"
         "      a1 += a2\n"
         "    a0 += a1\n"
         "  acc a4 f32 sum\n"
         "  for s0 in 5 unroll(5)\n"
         "    a4 += b1[s0+153600]\n"
         "  a0 += a4\n"
         "  b0[0] = a0\n");
    /* a sum over a dim of shape symbols (a generic kernel): the levels that 2^31 values need, and the rest */
    hand(ctx,
         "kernel k(out b0 f32[s4096], in b1 f32[s4096*s4096])\n"
         "  for s0 in s4096\n"
         "    acc a0 f32 sum\n"
         "    for s1 in s4096\n"
         "      a0 += b1[s1+s0*s4096]\n"
         "    b0[s0] = a0\n",
         &o,
         "kernel k(out b0 f32[s4096], in b1 f32[s4096*s4096])\n"
         "  for s0 in s4096\n"
         "    acc a0 f32 sum\n"
         "    for s2 in (s4096//16+16777215)//16777216\n"
         "      acc a1 f32 sum\n"
         "      for s3 in min(16,-s2*16+(s4096//16+1048575)//1048576)\n"
         "        acc a2 f32 sum\n"
         "        for s4 in min(16,-s2*256-s3*16+(s4096//16+65535)//65536)\n"
         "          acc a3 f32 sum\n"
         "          for s5 in min(16,-s2*4096-s3*256-s4*16+(s4096//16+4095)//4096)\n"
         "            acc a4 f32 sum\n"
         "            for s6 in min(16,-s2*65536-s3*4096-s4*256-s5*16+(s4096//16+255)//256)\n"
         "              acc a5 f32 sum\n"
         "              for s7 in min(16,-s2*1048576-s3*65536-s4*4096-s5*256-s6*16+(s4096//16+15)//16)\n"
         "                acc a6 f32 sum\n"
         "                for s8 in min(16,-s2*16777216-s3*1048576-s4*65536-s5*4096-s6*256-s7*16+s4096//16)\n"
         "                  acc a7 f32 sum\n"
         "                  for s1 in 16\n"
         "                    a7 += b1[s1+s2*268435456+s3*16777216+s4*1048576+s5*65536+s6*4096+s7*256+s8*16+s0*s4096]\n"
         "                  a6 += a7\n"
         "                a5 += a6\n"
         "              a4 += a5\n"
         "            a3 += a4\n"
         "          a2 += a3\n"
         "        a1 += a2\n"
         "      a0 += a1\n"
         "    acc a8 f32 sum\n"
         "    for s1 in s4096%16\n"
         "      a8 += b1[s1+s4096//16*16+s0*s4096]\n"
         "    a0 += a8\n"
         "    b0[s0] = a0\n");
    /* a nest that does not collapse: an accumulator for each iteration of s1 (50 values in a vector loop),
     * whose 40 iterations are blocks of 16 and the rest 8; f64 too */
    hand(ctx,
         "kernel k(out b0 f64[3], in b1 f64[6000])\n"
         "  for s0 in 3\n"
         "    acc a0 f64 sum\n"
         "    for s1 in 40\n"
         "      for s2 in 50\n"
         "        a0 += b1[s0*50+s1*150+s2]\n"
         "    b0[s0] = a0\n",
         &o,
         "kernel k(out b0 f64[3], in b1 f64[6000])\n"
         "  for s0 in 3\n"
         "    acc a0 f64 sum\n"
         "    for s3 in 2\n"
         "      acc a2 f64 sum\n"
         "      for s1 in 16\n"
         "        acc a3 f64 sum\n"
         "        for s2 in 50 vector(8)\n"
         "          a3 += b1[s0*50+s1*150+s2+s3*2400]\n"
         "        a2 += a3\n"
         "      a0 += a2\n"
         "    acc a4 f64 sum\n"
         "    for s1 in 8\n"
         "      acc a5 f64 sum\n"
         "      for s2 in 50 vector(8)\n"
         "        a5 += b1[s0*50+s1*150+s2+4800]\n"
         "      a4 += a5\n"
         "    a0 += a4\n"
         "    b0[s0] = a0\n");
    /* iterations of 3 values: blocks of 5 iterations (15 values), none left over; an integer sum is exact:
     * it stays */
    hand(ctx,
         "kernel k(out b0 f32[1], in b1 f32[3000], out b2 i64[1], in b3 i64[3000])\n"
         "  acc a0 f32 sum\n"
         "  for s0 in 1000\n"
         "    for s1 in 3\n"
         "      a0 += b1[s0+s1*1000]\n"
         "  b0[0] = a0\n"
         "  acc a1 i64 sum\n"
         "  for s2 in 3000\n"
         "    a1 += b3[s2]\n"
         "  b2[0] = a1\n",
         &o,
         "kernel k(out b0 f32[1], in b1 f32[3000], out b2 i64[1], in b3 i64[3000])\n"
         "  acc a0 f32 sum\n"
         "  for s3 in 13\n"
         "    acc a2 f32 sum\n"
         "    for s4 in min(16,-s3*16+200)\n"
         "      acc a3 f32 sum\n"
         "      for s0 in 5\n"
         "        for s1 in 3 unroll(3)\n"
         "          a3 += b1[s0+s1*1000+s3*80+s4*5]\n"
         "      a2 += a3\n"
         "    a0 += a2\n"
         "  b0[0] = a0\n"
         "  acc a1 i64 sum\n"
         "  for s2 in 3000 vector(8)\n"
         "    a1 += b3[s2]\n"
         "  b2[0] = a1\n");
    /* two loops feed one sum (a mask's pieces): each gets an accumulator of its own, cascaded */
    hand(ctx,
         "kernel k(out b0 f32[1], in b1 f32[3000])\n"
         "  acc a0 f32 sum\n"
         "  for s0 in 1200\n"
         "    a0 += b1[s0]\n"
         "  for s1 in 1800\n"
         "    a0 += mul(b1[s1+1200], 2)\n"
         "  b0[0] = a0\n",
         &o,
         "kernel k(out b0 f32[1], in b1 f32[3000])\n"
         "  acc a0 f32 sum\n"
         "  acc a1 f32 sum\n"
         "  for s2 in 2\n"
         "    acc a2 f32 sum\n"
         "    for s0 in 512 vector(8)\n"
         "      a2 += b1[s0+s2*512]\n"
         "    a1 += a2\n"
         "  acc a3 f32 sum\n"
         "  for s0 in 176 vector(8)\n"
         "    a3 += b1[s0+1024]\n"
         "  a1 += a3\n"
         "  a0 += a1\n"
         "  acc a4 f32 sum\n"
         "  for s3 in 3\n"
         "    acc a5 f32 sum\n"
         "    for s1 in 512 vector(8)\n"
         "      a5 += mul(b1[s1+s3*512+1200], 2)\n"
         "    a4 += a5\n"
         "  acc a6 f32 sum\n"
         "  for s1 in 264 vector(8)\n"
         "    a6 += mul(b1[s1+2736], 2)\n"
         "  a4 += a6\n"
         "  a0 += a4\n"
         "  b0[0] = a0\n");
    /* a sum read while it accumulates (a running sum) stays as it is */
    hand(ctx,
         "kernel k(out b0 f32[1], in b1 f32[1000], out b2 f32[1000])\n"
         "  acc a0 f32 sum\n"
         "  for s0 in 1000\n"
         "    a0 += b1[s0]\n"
         "    b2[s0] = a0\n"
         "  b0[0] = a0\n",
         &o,
         "kernel k(out b0 f32[1], in b1 f32[1000], out b2 f32[1000])\n"
         "  acc a0 f32 sum\n"
         "  for s0 in 1000 vector(8)\n"
         "    a0 += b1[s0]\n"
         "    b2[s0] = a0\n"
         "  b0[0] = a0\n");
    /* a shape symbol z0 (s4096): an outer loop of z0 rows collapses with its inner one of 16; the hint
     * (z0 = 4096) makes it parallel, as 65536 elements; without one it stays serial */
    LoopOptions hint = {0, 0, 0, 4096};
    const char *rows = "kernel k(out b0 f32[s4096*16], in b1 f32[s4096*16])\n"
                       "  for s0 in s4096\n"
                       "    for s1 in 16\n"
                       "      b0[s0*16+s1] = exp(b1[s0*16+s1])\n";
    hand(ctx, rows, &hint,
         "kernel k(out b0 f32[s4096*16], in b1 f32[s4096*16])\n"
         "  for s0 in s4096*16 parallel\n"
         "    b0[s0] = exp(b1[s0])\n");
    hand(ctx, rows, &o,
         "kernel k(out b0 f32[s4096*16], in b1 f32[s4096*16])\n"
         "  for s0 in s4096*16\n"
         "    b0[s0] = exp(b1[s0])\n");
    /* a hint never makes an index simpler: s0%8 stays though the hint's 2 rows would allow s0; the
     * loop of z0 iterations goes vector (the hint's 8 against width 4; targets add a remainder) */
    LoopOptions hint2 = {0, 4, 0, 2}, hint8 = {0, 4, 0, 8};
    const char *mod = "kernel k(out b0 f32[s4096], in b1 f32[8])\n"
                      "  for s0 in s4096\n"
                      "    b0[s0] = b1[s0%8]\n";
    hand(ctx, mod, &hint2, mod);
    /* a var of a loop of z0 iterations is below z0 at every size; a sum of two vars is not */
    hand(ctx,
         "kernel k(out b0 f32[s4096], in b1 f32[s4096])\n"
         "  for s0 in s4096\n"
         "    for s1 in 1\n"
         "      b0[s0] = b1[(s0+s1)//s4096+(s0+s1)%s4096]\n",
         &o,
         "kernel k(out b0 f32[s4096], in b1 f32[s4096])\n"
         "  for s0 in s4096\n"
         "    for s1 in 1\n"
         "      b0[s0] = b1[s0+s1]\n");
    const char *two = "kernel k(out b0 f32[s4096*2], in b1 f32[s4096])\n"
                      "  for s0 in s4096\n"
                      "    for s1 in 2\n"
                      "      b0[s0*2+s1] = b1[(s0+s1)%s4096]\n";
    hand(ctx, two, &o,
         "kernel k(out b0 f32[s4096*2], in b1 f32[s4096])\n"
         "  for s0 in s4096\n"
         "    for s1 in 2 unroll(2)\n"
         "      b0[s0*2+s1] = b1[(s0+s1)%s4096]\n");
    hand(ctx,
         "kernel k(out b0 f32[s4096], in b1 f32[s4096])\n"
         "  for s0 in s4096\n"
         "    b0[s0] = neg(b1[s0])\n",
         &hint8,
         "kernel k(out b0 f32[s4096], in b1 f32[s4096])\n"
         "  for s0 in s4096 vector(4)\n"
         "    b0[s0] = neg(b1[s0])\n");

    kn_ctx_free(ctx);
    TEST_END("loopopt");
}
