/*
 * data.c — IDX arrays (the file format of MNIST and Fashion-MNIST), raw or
 * gzip-compressed, and the Fashion-MNIST dataset as tensors.
 *
 * An IDX file is a magic of 0, 0, an element type (0x08: u8) and the number
 * of dims; then each dim as a big-endian u32; then the elements, row-major.
 * A file that starts with gzip's magic (1f 8b) is inflated first (gz.c,
 * zlib).
 * Every check is strict: the payload must be exactly the dims' product.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core.h"
#include "data.h"
#include "../../port/port.h"

/* The bytes of a file, inflated if gzip: either malloc'd by port_read_file
 * (ctx_owned 0) or kn_alloc'd by gz_inflate (1). */
typedef struct {
    uint8_t *p;
    size_t n;
    int ctx_owned;
} Bytes;

static void bytes_free(kn_ctx *ctx, Bytes *b)
{
    if (b->ctx_owned) kn_dealloc(ctx, b->p, b->n);
    else free(b->p);
    b->p = NULL;
}

/* Reads path, or alt where path cannot be opened (alt may be NULL); *used
 * is the one read. */
static kn_status read_bytes(kn_ctx *ctx, const char *path, const char *alt, Bytes *b, const char **used)
{
    char why[128], why2[128];
    void *data;
    *used = path;
    if (port_read_file(path, &data, &b->n, why) != 0) {
        if (!alt) return kn_errs(ctx, KN_EIO, "%.200s: %s", path, why);
        *used = alt;
        if (port_read_file(alt, &data, &b->n, why2) != 0)
            return kn_errs(ctx, KN_EIO, "%.160s: %s; %.160s: %s", path, why, alt, why2);
    }
    b->p = data;
    b->ctx_owned = 0;
    if (b->n < 2 || b->p[0] != 0x1f || b->p[1] != 0x8b) return KN_OK;
    uint8_t *out;
    size_t n;
    int s = gz_inflate(ctx, b->p, b->n, &out, &n, why);
    free(b->p);
    b->p = NULL;
    if (s) return kn_errs(ctx, (kn_status)s, "%.200s: %s", *used, why);
    b->p = out;
    b->n = n;
    b->ctx_owned = 1;
    return KN_OK;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Checks the IDX header of b and moves its payload into out (b is used up). */
static kn_status parse(kn_ctx *ctx, const char *path, Bytes *b, IdxArray *out)
{
    const uint8_t *p = b->p;
    if (b->n < 4 || p[0] != 0 || p[1] != 0)
        return kn_errs(ctx, KN_EIO, "%.200s: not an IDX file (magic %02x %02x, expected 00 00)", path,
                       b->n > 0 ? p[0] : 0, b->n > 1 ? p[1] : 0);
    if (p[2] != 0x08)
        return kn_errs(ctx, KN_EIO, "%.200s: IDX element type 0x%02X is not supported (only u8, 0x08, is read)",
                       path, p[2]);
    int ndim = p[3];
    if (ndim < 1 || ndim > 4)
        return kn_errs(ctx, KN_EIO, "%.200s: IDX file with %d dims (1 to 4 are read)", path, ndim);
    size_t head = 4 + 4 * (size_t)ndim, numel = 1;
    if (b->n < head)
        return kn_errs(ctx, KN_EIO, "%.200s: truncated: %zu bytes, the IDX header needs %zu", path, b->n, head);
    for (int d = 0; d < ndim; d++) {
        uint32_t v = be32(p + 4 + 4 * d);
        if (v == 0) return kn_errs(ctx, KN_EIO, "%.200s: IDX dim %d is 0", path, d);
        if (kn_mul_overflows(numel, v, &numel) || numel > SIZE_MAX - head)
            return kn_errs(ctx, KN_EIO, "%.200s: IDX dims overflow the address space at dim %d", path, d);
        out->dims[d] = v;
    }
    if (b->n - head != numel)
        return kn_errs(ctx, KN_EIO, "%.200s: %s: the dims need %zu bytes of data, the file has %zu", path,
                       b->n - head < numel ? "truncated" : "trailing bytes", numel, b->n - head);
    if (b->ctx_owned) { /* keep the buffer: payload to the front */
        memmove(b->p, b->p + head, numel);
        out->data = b->p;
        out->bytes = b->n;
        b->p = NULL;
    } else {
        if (!(out->data = kn_alloc(ctx, numel)))
            return kn_errs(ctx, KN_ENOMEM, "%.200s: out of memory for %zu bytes", path, numel);
        memcpy(out->data, p + head, numel);
        out->bytes = numel;
    }
    out->ndim = ndim;
    return KN_OK;
}

static kn_status idx_load(kn_ctx *ctx, const char *path, const char *alt, IdxArray *out)
{
    Bytes b = {NULL, 0, 0};
    const char *used;
    memset(out, 0, sizeof *out);
    kn_status s = read_bytes(ctx, path, alt, &b, &used);
    if (s == KN_OK) s = parse(ctx, used, &b, out);
    if (s != KN_OK) memset(out, 0, sizeof *out);
    if (b.p) bytes_free(ctx, &b);
    return s;
}

kn_status idx_read(kn_ctx *ctx, const char *path, IdxArray *out)
{
    if (!ctx) return KN_EINVAL;
    const char *saved = op_enter(ctx, "idx_read");
    kn_status s = !path || !out ? kn_errs(ctx, KN_EINVAL, "operand '%s' is NULL", path ? "out" : "path")
                                : idx_load(ctx, path, NULL, out);
    op_leave(ctx, saved);
    return s;
}

void idx_free(kn_ctx *ctx, IdxArray *a)
{
    if (!ctx || !a) return;
    kn_dealloc(ctx, a->data, a->bytes);
    memset(a, 0, sizeof *a);
}

/* ---- Fashion-MNIST ---- */

/* dir/name, or dir/name.gz where that is missing */
static kn_status load_file(kn_ctx *ctx, const char *dir, const char *name, IdxArray *out)
{
    size_t len = strlen(dir) + strlen(name) + 8;
    char *path = kn_alloc(ctx, 2 * len);
    if (!path) return kn_errs(ctx, KN_ENOMEM, "out of memory for a path");
    snprintf(path, len, "%s/%s", dir, name);
    snprintf(path + len, len, "%s/%s.gz", dir, name);
    kn_status s = idx_load(ctx, path, path + len, out);
    kn_dealloc(ctx, path, 2 * len);
    return s;
}

/* Images (N, 28, 28) and labels (N) with labels 0..9. */
static kn_status check_pair(kn_ctx *ctx, const char *dir, const IdxArray *im, const IdxArray *lb)
{
    if (im->ndim != 3 || im->dims[1] != 28 || im->dims[2] != 28)
        return kn_errs(ctx, KN_EIO, "%.200s: images are not (N, 28, 28)", dir);
    if (lb->ndim != 1 || lb->dims[0] != im->dims[0])
        return kn_errs(ctx, KN_EIO, "%.200s: %" PRId64 " images but %s labels", dir, im->dims[0],
                       lb->ndim == 1 ? "a different number of" : "not a vector of");
    for (int64_t i = 0; i < lb->dims[0]; i++)
        if (lb->data[i] > 9)
            return kn_errs(ctx, KN_EIO, "%.200s: label %" PRId64 " is %d, not a class 0..9", dir, i, lb->data[i]);
    return KN_OK;
}

/* torchvision's ToTensor then Normalize((0.2860,), (0.3530,)), in f32 as torch computes it */
static void normalise(const IdxArray *im, float *out)
{
    float lut[256];
    for (int v = 0; v < 256; v++) {
        float x = (float)v / 255.0f, c = x - 0.2860f;
        lut[v] = c / 0.3530f;
    }
    for (size_t i = 0; i < (size_t)(im->dims[0] * 28 * 28); i++) out[i] = lut[im->data[i]];
}

static kn_status fmnist(kn_ctx *ctx, const char *dir, int train, kn_tensor **images, kn_tensor **labels)
{
    IdxArray im, lb;
    const char *split = train ? "train" : "t10k";
    char name[64];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", split);
    kn_status s = load_file(ctx, dir, name, &im);
    if (s != KN_OK) return s;
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", split);
    if ((s = load_file(ctx, dir, name, &lb)) != KN_OK) {
        idx_free(ctx, &im);
        return s;
    }
    kn_tensor *x = NULL, *y = NULL;
    if ((s = check_pair(ctx, dir, &im, &lb)) == KN_OK) {
        int64_t n = im.dims[0], xs[4] = {n, 1, 28, 28};
        x = tensor_new(ctx, KN_F32, 4, xs);
        y = x ? tensor_new(ctx, KN_I64, 1, &n) : NULL;
        if (!y) {
            kn_free(ctx, x);
            s = ctx->status;
        } else {
            normalise(&im, x->st->data);
            int64_t *ly = y->st->data;
            for (int64_t i = 0; i < n; i++) ly[i] = lb.data[i];
            *images = kn_keep(ctx, x);
            *labels = kn_keep(ctx, y);
        }
    }
    idx_free(ctx, &im);
    idx_free(ctx, &lb);
    return s;
}

kn_status fmnist_load(kn_ctx *ctx, const char *dir, int train, kn_tensor **images, kn_tensor **labels)
{
    if (!ctx) return KN_EINVAL;
    const char *saved = op_enter(ctx, "fmnist_load");
    kn_status s;
    if (images) *images = NULL;
    if (labels) *labels = NULL;
    if (!images || !labels) s = kn_errs(ctx, KN_EINVAL, "operand '%s' is NULL", images ? "labels" : "images");
    else s = fmnist(ctx, dir ? dir : FASHION_MNIST_DIR, train, images, labels);
    op_leave(ctx, saved);
    return s;
}
