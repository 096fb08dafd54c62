/*
 * test_core.c — tensors, views, scopes, promotion, broadcasting and the
 * pointwise composites on hand-checked values.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__) && !defined(__wasi__)
#include <sys/resource.h>
#endif

#include "test.h"
#include "../src/core.h"

static kn_tensor *vec(kn_ctx *ctx, int n, const float *v)
{
    int64_t s = n;
    return kn_tensor_from(ctx, KN_F32, 1, &s, v);
}

static void test_views(kn_ctx *ctx)
{
    float v[6] = {0, 1, 2, 3, 4, 5};
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
    kn_tensor *a = kn_tensor_from(ctx, KN_F32, 2, s23, v);
    kn_tensor *t = kn_transpose(ctx, a, 0, 1);
    CHECK(t && kn_shape(t)[0] == 3 && kn_shape(t)[1] == 2);
    CHECK(t && !kn_is_contiguous(t));
    float out[6];
    CHECK(kn_read(ctx, t, out, sizeof out) == KN_OK);
    CHECK(out[0] == 0 && out[1] == 3 && out[2] == 1 && out[5] == 5);
    kn_tensor *r = kn_reshape(ctx, t, 2, s32);
    CHECK(r != NULL);
    kn_tensor *flat = kn_reshape(ctx, t, 1, (int64_t[]){-1});
    CHECK(flat && kn_read(ctx, flat, out, sizeof out) == KN_OK && out[1] == 3 && out[4] == 2);
    CHECK(kn_view(ctx, t, 1, (int64_t[]){6}) == NULL);
    CHECK_ERR(ctx, "kn_view");
}

static void test_arith(kn_ctx *ctx)
{
    float a[3] = {1, 2, 3}, b[1] = {10};
    kn_tensor *x = vec(ctx, 3, a), *y = vec(ctx, 1, b);
    float out[3];
    CHECK(kn_read(ctx, kn_add(ctx, x, y), out, sizeof out) == KN_OK && out[2] == 13);
    CHECK(kn_read(ctx, kn_mul(ctx, x, kn_scalar(ctx, 0.5)), out, sizeof out) == KN_OK && out[1] == 1.0f);
    int32_t iv[3] = {7, -7, 2};
    int64_t s3 = 3;
    kn_tensor *xi = kn_tensor_from(ctx, KN_I32, 1, &s3, iv);
    kn_tensor *q = kn_div(ctx, xi, kn_scalar_int(ctx, 2));
    CHECK(q && kn_dtype_of(q) == KN_F32);
    CHECK(kn_read(ctx, q, out, sizeof out) == KN_OK && out[0] == 3.5f && out[1] == -3.5f);
    kn_tensor *s = kn_add(ctx, xi, kn_scalar_int(ctx, 1));
    CHECK(s && kn_dtype_of(s) == KN_I32);
    kn_tensor *f = kn_add(ctx, xi, kn_scalar(ctx, 1.0));
    CHECK(f && kn_dtype_of(f) == KN_F32);
    kn_tensor *m = kn_fmod(ctx, xi, kn_scalar_int(ctx, 3));
    int32_t mi[3];
    CHECK(m && kn_read(ctx, m, mi, sizeof mi) == KN_OK && mi[0] == 1 && mi[1] == -1 && mi[2] == 2);
    float rv[6] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.6f}, ro[6];
    kn_tensor *rr = kn_round(ctx, vec(ctx, 6, rv));
    CHECK(rr && kn_read(ctx, rr, ro, sizeof ro) == KN_OK);
    CHECK(ro[0] == 0 && ro[1] == 2 && ro[2] == 2 && ro[3] == 0 && ro[4] == -2 && ro[5] == 3);
}

static void test_errors(kn_ctx *ctx)
{
    float a[3] = {1, 2, 3}, b[2] = {1, 2};
    CHECK(kn_add(ctx, vec(ctx, 3, a), vec(ctx, 2, b)) == NULL);
    CHECK_ERR(ctx, "kn_add: operand 'b' (2) does not broadcast with (3) at dim -1");
    CHECK(kn_add(ctx, NULL, vec(ctx, 2, b)) == NULL);
    CHECK_ERR(ctx, "kn_add: operand 'a' is NULL");
    CHECK(kn_exp(ctx, kn_add(ctx, vec(ctx, 3, a), vec(ctx, 2, b))) == NULL);
    CHECK_ERR(ctx, "kn_add:"); /* the first failure's message survives */
    int64_t huge[3] = {1LL << 40, 1LL << 40, 1LL << 40};
    CHECK(kn_zeros(ctx, KN_F32, 3, huge) == NULL);
    CHECK_ERR(ctx, "overflow");
}

static void test_scopes(kn_ctx *ctx)
{
    size_t before = kn_live_tensors(ctx), bytes = kn_live_bytes(ctx);
    for (int i = 0; i < 100; i++) {
        kn_scope_begin(ctx);
        int64_t s[2] = {16, 16};
        kn_tensor *x = kn_randn(ctx, KN_F32, 2, s);
        kn_exp(ctx, kn_add(ctx, x, x));
        kn_scope_end(ctx);
    }
    CHECK(kn_live_tensors(ctx) == before && kn_live_bytes(ctx) == bytes);
}

/* A hook that hands out blocks full of garbage, so that zeros must be written. */
static void *dirty_alloc(void *user, void *ptr, size_t osize, size_t nsize)
{
    (void)user;
    if (!nsize) {
        free(ptr);
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (p && nsize > osize) memset((char *)p + osize, 0xA5, nsize - osize);
    return p;
}

/* kn_zeros (eager: zeroed memory) and kn_full (one element, then doubling
 * copies) against the values they promise, in every dtype, at odd sizes,
 * under the default allocator and one that leaves garbage. */
static void test_fills(void)
{
    static const kn_dtype dts[] = {KN_F32, KN_F64, KN_I32, KN_I64, KN_BOOL};
    kn_ctx *cs[2] = {kn_ctx_new(NULL), kn_ctx_new(&(kn_ctx_opts){.alloc = dirty_alloc})};
    for (int c = 0; c < 2; c++)
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
            for (int64_t n = 1; n <= 70000; n = n * 7 + 3) {
                int64_t shape[2] = {n, 3};
                kn_tensor *z = kn_zeros(cs[c], dts[d], 2, shape), *f = kn_full(cs[c], dts[d], 2, shape, 1);
                double *zv = malloc((size_t)(3 * n) * sizeof *zv), *fv = malloc((size_t)(3 * n) * sizeof *fv);
                kn_tensor *z64 = kn_to(cs[c], z, KN_F64), *f64 = kn_to(cs[c], f, KN_F64);
                CHECK(zv && fv && z64 && f64);
                if (!zv || !fv || !z64 || !f64 || kn_read(cs[c], z64, zv, (size_t)(3 * n) * sizeof *zv) ||
                    kn_read(cs[c], f64, fv, (size_t)(3 * n) * sizeof *fv)) {
                    CHECK(!"read");
                } else {
                    int bad = 0;
                    for (int64_t i = 0; i < 3 * n; i++) bad += zv[i] != 0 || fv[i] != 1;
                    CHECK_MSG(!bad, "dtype %d, %lld x 3: %d wrong", (int)dts[d], (long long)n, bad);
                }
                free(zv), free(fv);
                if (z64 != z) kn_free(cs[c], z64); /* kn_to of an f64 is the tensor itself */
                if (f64 != f) kn_free(cs[c], f64);
                kn_free(cs[c], z), kn_free(cs[c], f);
            }
    kn_ctx_free(cs[0]);
    kn_ctx_free(cs[1]);
}

/* Every storage's bytes start at a 64-byte boundary (a compiled kernel's
 * vector loads and stores never split cache lines), and each allocation is
 * freed with the size it was made with: the hook's bytes balance. */
typedef struct {
    long long bytes;
    int calls;
} Bal;

static void *bal_alloc(void *user, void *ptr, size_t osize, size_t nsize)
{
    Bal *b = user;
    b->calls++;
    b->bytes += (long long)nsize - (long long)(ptr ? osize : 0);
    if (!nsize) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, nsize);
}

static void test_aligned(void)
{
    Bal bal = {0, 0};
    kn_ctx_opts o = {0};
    o.alloc = bal_alloc, o.alloc_user = &bal;
    kn_ctx *ctx = kn_ctx_new(&o);
    static const int64_t sizes[] = {1, 3, 17, 1000, 1 << 20};
    for (int i = 0; i < 5; i++) {
        int64_t n = sizes[i];
        kn_tensor *t[4] = {kn_zeros(ctx, KN_BOOL, 1, &n), kn_randn(ctx, KN_F32, 1, &n), kn_ones(ctx, KN_F64, 1, &n), NULL};
        t[3] = kn_add(ctx, t[1], t[1]);
        for (int j = 0; j < 4; j++)
            CHECK_MSG(t[j] && (uintptr_t)tensor_ptr(t[j], 0) % 64 == 0, "size %lld, tensor %d at %p", (long long)n, j,
                      t[j] ? tensor_ptr(t[j], 0) : NULL);
        for (int j = 0; j < 4; j++) kn_free(ctx, t[j]);
    }
    kn_ctx_free(ctx);
    CHECK_MSG(bal.bytes == 0, "allocated and freed bytes differ by %lld", bal.bytes);
}

/* A freed storage of 256 KiB or more is kept for the next tensor of its
 * size (tensor.c): no call to the allocator; zeros where asked for zeros;
 * everything freed with the context. Not kept where memory is a WASM
 * module's or a microcontroller's (KN_CACHE_ON 0). */
static void test_storage_cache(void)
{
    Bal bal = {0, 0};
    kn_ctx_opts o = {0};
    o.alloc = bal_alloc, o.alloc_user = &bal;
    kn_ctx *ctx = kn_ctx_new(&o);
    int64_t n = 1 << 18, small = 1000; /* 1 MiB of f32; 4000 bytes */
    kn_tensor *a = kn_full(ctx, KN_F32, 1, &n, 7);
    void *where = a ? tensor_ptr(a, 0) : NULL;
    kn_free(ctx, a);
    int calls = bal.calls;
    kn_tensor *z = kn_zeros(ctx, KN_F32, 1, &n); /* the same size: the block freed above */
    int reused = z && tensor_ptr(z, 0) == where && bal.calls == calls + 2; /* + 2: the handle, the storage record */
    CHECK_MSG(reused == KN_CACHE_ON, "a freed block of 1 MiB reused: %d (cache %d), %d allocator calls", reused,
              KN_CACHE_ON, bal.calls - calls);
    static float f[1 << 18];
    if (z) kn_read(ctx, z, f, sizeof f);
    int zeros = 1;
    for (int64_t i = 0; z && i < n; i++) zeros &= f[i] == 0;
    CHECK_MSG(z && zeros, "a reused block given as zeros is not");
    kn_free(ctx, z);
    calls = bal.calls;
    kn_tensor *other = kn_full(ctx, KN_F32, 2, (int64_t[]){2, n / 2}, 3); /* another shape, the same bytes */
    /* by the allocator's calls, not the address: without the cache, libc's
     * malloc (wasm's dlmalloc) may hand the same block back itself */
    CHECK_MSG((other && tensor_ptr(other, 0) == where && bal.calls == calls + 2) == KN_CACHE_ON,
              "another shape of the same bytes: %d allocator calls (cache %d)", bal.calls - calls, KN_CACHE_ON);
    kn_tensor *s = kn_full(ctx, KN_F32, 1, &small, 1); /* small blocks go straight back to the allocator */
    kn_free(ctx, s);
    CHECK(ctx->ncache == 0);
    kn_ctx_free(ctx);
    CHECK_MSG(bal.bytes == 0, "allocated and freed bytes differ by %lld", bal.bytes);
}

/* A large block from the default allocator is asked for in large pages
 * (ctx.c, port_advise_large): it holds what is written to it, and on Linux
 * with transparent huge pages on request its first touch takes far fewer
 * faults than its 4 KiB pages, fewer than half even under ASan, whose
 * shadow is written too (the count is checked only where
 * /sys/kernel/mm/transparent_hugepage/enabled offers them; elsewhere the
 * hint does nothing and only the contents are). */
static void test_large_pages(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    size_t n = (size_t)16 << 20, pages = n / 4096;
    unsigned char *p = kn_alloc(ctx, n);
    CHECK(p != NULL);
    if (!p) {
        kn_ctx_free(ctx);
        return;
    }
#if defined(__linux__) && !defined(__wasi__)
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
#endif
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 7);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += p[i] != (unsigned char)(i * 7);
    CHECK_MSG(bad == 0, "a large block lost %zu bytes written to it", bad);
#if defined(__linux__) && !defined(__wasi__)
    getrusage(RUSAGE_SELF, &r1);
    long faults = r1.ru_minflt - r0.ru_minflt;
    char mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f && !fgets(mode, sizeof mode, f)) mode[0] = 0;
    if (f) fclose(f);
    if (strstr(mode, "[madvise]") || strstr(mode, "[always]"))
        CHECK_MSG(faults < (long)pages / 2, "a 16 MiB block took %ld page faults (%zu pages of 4 KiB)", faults, pages);
    else
        printf("test_large_pages: no transparent huge pages here (%s): the fault count is not checked\n",
               mode[0] ? "never" : "no sysfs entry");
#else
    (void)pages;
#endif
    kn_dealloc(ctx, p, n);
    kn_ctx_free(ctx);
}

int main(void)
{
    test_fills();
    test_aligned();
    test_storage_cache();
    test_large_pages();
    kn_ctx *ctx = kn_ctx_new(NULL);
    test_views(ctx);
    test_arith(ctx);
    test_errors(ctx);
    test_scopes(ctx);
    kn_ctx_free(ctx);
    TEST_END("core");
}
