/*
 * dtype.c — element types: sizes, names, loading and storing one element,
 * IEEE half and bfloat16 conversion, and PyTorch's type promotion.
 */
#include <math.h>
#include <string.h>

#include "core.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[KN_NDTYPES] = {
    [KN_F32] = {"f32", 4}, [KN_F64] = {"f64", 8}, [KN_F16] = {"f16", 2}, [KN_BF16] = {"bf16", 2},
    [KN_I32] = {"i32", 4}, [KN_I64] = {"i64", 8}, [KN_BOOL] = {"bool", 1}, [KN_U8] = {"u8", 1},
};

const char *kn_dtype_name(kn_dtype dt) { return (unsigned)dt < KN_NDTYPES ? dtypes[dt].name : "?"; }
size_t kn_dtype_size(kn_dtype dt) { return (unsigned)dt < KN_NDTYPES ? dtypes[dt].size : 0; }

int dt_is_float(kn_dtype dt) { return dt == KN_F32 || dt == KN_F64 || dt == KN_F16 || dt == KN_BF16; }
int dt_is_int(kn_dtype dt) { return dt == KN_I32 || dt == KN_I64 || dt == KN_U8; }

/* IEEE 754 binary16 <-> binary32, round to nearest even. */
float dt_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | (man << 13);       /* inf, nan */
    else if (exp != 0) bits = sign | ((exp + 112) << 23) | (man << 13);
    else if (man == 0) bits = sign;                                /* zero */
    else {                                                         /* subnormal */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t dt_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);       /* overflow to inf */
    if (ax < 0x38800000u) {                                        /* subnormal or zero */
        float a;
        memcpy(&a, &ax, 4);
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f)); /* a / 2^-24 */
    }
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1);                   /* round to nearest even */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

float dt_bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t dt_float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

double dt_load(kn_dtype dt, const void *p)
{
    switch (dt) {
    case KN_F32: { float v; memcpy(&v, p, 4); return v; }
    case KN_F64: { double v; memcpy(&v, p, 8); return v; }
    case KN_F16: { uint16_t v; memcpy(&v, p, 2); return dt_half_to_float(v); }
    case KN_BF16: { uint16_t v; memcpy(&v, p, 2); return dt_bf16_to_float(v); }
    case KN_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case KN_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case KN_BOOL: return *(const uint8_t *)p != 0;
    case KN_U8: return *(const uint8_t *)p;
    default: KN_ASSERT(0); return 0;
    }
}

int64_t dt_load_i(kn_dtype dt, const void *p)
{
    switch (dt) {
    case KN_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case KN_I64: { int64_t v; memcpy(&v, p, 8); return v; }
    case KN_BOOL: return *(const uint8_t *)p != 0;
    case KN_U8: return *(const uint8_t *)p;
    default: {
        double v = dt_load(dt, p);
        if (!(v == v)) return 0;
        if (v >= 9.2e18) return INT64_MAX;
        if (v <= -9.2e18) return INT64_MIN;
        return (int64_t)v;
    }
    }
}

void dt_store(kn_dtype dt, void *p, double v)
{
    switch (dt) {
    case KN_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case KN_F64: memcpy(p, &v, 8); break;
    case KN_F16: { uint16_t h = dt_float_to_half((float)v); memcpy(p, &h, 2); break; }
    case KN_BF16: { uint16_t h = dt_float_to_bf16((float)v); memcpy(p, &h, 2); break; }
    case KN_BOOL: *(uint8_t *)p = v != 0; break;
    default: dt_store_i(dt, p, v != v ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v);
    }
}

void dt_store_i(kn_dtype dt, void *p, int64_t v)
{
    switch (dt) {
    case KN_I32: { int32_t x = (int32_t)(uint32_t)v; memcpy(p, &x, 4); break; }
    case KN_I64: memcpy(p, &v, 8); break;
    case KN_BOOL: *(uint8_t *)p = v != 0; break;
    case KN_U8: *(uint8_t *)p = (uint8_t)v; break;
    default: dt_store(dt, p, (double)v);
    }
}

/* ---- promotion, as torch.promote_types ---- */

static int category(kn_dtype dt) { return dt == KN_BOOL ? 0 : dt_is_int(dt) ? 1 : 2; }

kn_dtype promote_types(kn_dtype a, kn_dtype b)
{
    if (a == b) return a;
    int ca = category(a), cb = category(b);
    if (ca != cb) return ca > cb ? a : b;
    if (ca == 2) {
        if (a == KN_F64 || b == KN_F64) return KN_F64;
        if (a == KN_F32 || b == KN_F32) return KN_F32;
        return KN_F32; /* f16 with bf16 */
    }
    if (ca == 1) {
        if (a == KN_I64 || b == KN_I64) return KN_I64;
        if (a == KN_I32 || b == KN_I32) return KN_I32;
    }
    return a;
}

/* PyTorch's result_type: tensors with dims beat 0-d tensors, which beat
 * wrapped numbers; a weaker tier only matters when its category is higher,
 * and a wrapped number then contributes the default dtype of its category. */
kn_dtype result_type(int n, kn_tensor *const *xs)
{
    int have[3] = {0, 0, 0};
    kn_dtype tier[3] = {KN_BOOL, KN_BOOL, KN_BOOL};
    for (int i = 0; i < n; i++) {
        if (!xs[i]) continue;
        int k = (xs[i]->flags & TF_WRAPPED) ? 2 : xs[i]->ndim == 0 ? 1 : 0;
        kn_dtype dt = xs[i]->dtype;
        if (k == 2) dt = category(dt) == 2 ? KN_F32 : category(dt) == 1 ? KN_I64 : KN_BOOL;
        tier[k] = have[k] ? promote_types(tier[k], dt) : dt;
        have[k] = 1;
    }
    kn_dtype r = KN_BOOL;
    int got = 0;
    for (int k = 0; k < 3; k++) {
        if (!have[k]) continue;
        if (!got) { r = tier[k]; got = 1; }
        else if (category(tier[k]) > category(r)) r = tier[k];
    }
    return r;
}
