/*
 * test_dtype.c — element types: half and bfloat16 conversion against
 * known bit patterns, and the promotion table against PyTorch's.
 */
#include "test.h"
#include "../src/core.h"

static void test_half(void)
{
    static const struct { float f; uint16_t h; } cases[] = {
        {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3c00}, {-2.0f, 0xc000}, {65504.0f, 0x7bff},
        {6.103515625e-05f, 0x0400},       /* smallest normal */
        {5.960464477539063e-08f, 0x0001}, /* smallest subnormal */
        {0.333251953125f, 0x3555}, {1e6f, 0x7c00} /* overflow to inf */,
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        CHECK_MSG(dt_float_to_half(cases[i].f) == cases[i].h, "half(%g) = %04x", cases[i].f, dt_float_to_half(cases[i].f));
        if (cases[i].h != 0x7c00) CHECK(dt_half_to_float(cases[i].h) == cases[i].f);
    }
    CHECK(dt_float_to_half(1.0f + 1.0f / 2048) == 0x3c00);  /* tie rounds to even */
    CHECK(dt_float_to_half(1.0f + 3.0f / 2048) == 0x3c02);
    CHECK(isnan(dt_half_to_float(dt_float_to_half(NAN))));
    /* every finite half survives a round trip */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++)
        if ((h & 0x7c00) != 0x7c00 && dt_float_to_half(dt_half_to_float((uint16_t)h)) != h) bad++;
    CHECK(bad == 0);
}

static void test_bf16(void)
{
    CHECK(dt_float_to_bf16(1.0f) == 0x3f80);
    CHECK(dt_bf16_to_float(0xc040) == -3.0f);
    CHECK(dt_float_to_bf16(1.0f + 1.0f / 256) == 0x3f80); /* tie to even */
    CHECK(dt_float_to_bf16(1.0f + 3.0f / 256) == 0x3f82);
    CHECK(isnan(dt_bf16_to_float(dt_float_to_bf16(NAN))));
}

static void test_promotion(void)
{
    /* torch.promote_types for a few pairs */
    CHECK(promote_types(KN_I32, KN_F32) == KN_F32);
    CHECK(promote_types(KN_I64, KN_BOOL) == KN_I64);
    CHECK(promote_types(KN_U8, KN_I32) == KN_I32);
    CHECK(promote_types(KN_F16, KN_BF16) == KN_F32);
    CHECK(promote_types(KN_F16, KN_F64) == KN_F64);
    CHECK(promote_types(KN_BOOL, KN_U8) == KN_U8);

    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t s2 = 2;
    kn_tensor *i32 = kn_zeros(ctx, KN_I32, 1, &s2), *f16 = kn_zeros(ctx, KN_F16, 1, &s2);
    kn_tensor *d0 = kn_zeros(ctx, KN_F64, 0, NULL), *b = kn_zeros(ctx, KN_BOOL, 1, &s2);
    CHECK(kn_dtype_of(kn_add(ctx, i32, kn_scalar(ctx, 1.5))) == KN_F32); /* int + float number */
    CHECK(kn_dtype_of(kn_add(ctx, f16, kn_scalar(ctx, 1.5))) == KN_F16); /* same category: tensor wins */
    CHECK(kn_dtype_of(kn_add(ctx, f16, d0)) == KN_F16);                  /* 0-d loses to dims */
    CHECK(kn_dtype_of(kn_add(ctx, i32, d0)) == KN_F64);                  /* higher category 0-d wins */
    CHECK(kn_dtype_of(kn_add(ctx, b, kn_scalar_int(ctx, 3))) == KN_I64);
    CHECK(kn_dtype_of(kn_add(ctx, i32, kn_scalar_int(ctx, 3))) == KN_I32);
    /* f16 arithmetic is stored in f16 */
    kn_tensor *h = kn_full(ctx, KN_F16, 1, &s2, 1.0);
    kn_tensor *s = kn_add(ctx, h, kn_scalar(ctx, 1.0 / 4096));
    uint16_t out[2];
    CHECK(s && kn_read(ctx, s, out, sizeof out) == KN_OK && out[0] == 0x3c00);
    kn_ctx_free(ctx);
}

int main(void)
{
    test_half();
    test_bf16();
    test_promotion();
    TEST_END("dtype");
}
