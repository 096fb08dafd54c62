/*
 * data.h — reading datasets from files: IDX arrays (MNIST, Fashion-MNIST),
 * raw or gzip-compressed (data.c; gz.c inflates with zlib). App code: the
 * kiln CLI and test_io link it, with -lz; libkiln.a does not hold it.
 *
 *     IdxArray a;
 *     if (idx_read(ctx, "train-images-idx3-ubyte.gz", &a) != KN_OK)
 *         puts(kn_last_error(ctx));   // names the file and what was wrong
 *     // a.dims = {60000, 28, 28}, a.data: 47,040,000 bytes
 *     idx_free(ctx, &a);
 *
 * Every problem is an error naming the file: missing or unreadable, a bad
 * gzip stream (magic, method, a corrupt block, CRC or length mismatch), a
 * bad IDX magic, an unsupported element type (only u8, 0x08, is read), a
 * zero or overflowing dim, or a size that disagrees with the dims
 * (truncated or trailing bytes).
 */
#ifndef KN_DATA_H
#define KN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "../kiln.h"

typedef struct {
    int ndim;          /* 1..4 */
    int64_t dims[4];
    uint8_t *data;     /* prod(dims) bytes, row-major */
    size_t bytes;      /* held by data (for idx_free) */
} IdxArray;

kn_status idx_read(kn_ctx *ctx, const char *path, IdxArray *out);
void idx_free(kn_ctx *ctx, IdxArray *a);

/* gzip (RFC 1952) of src, inflated by zlib into a new buffer allocated
 * through ctx, *out and *out_bytes; a stream that is not gzip is an error. 0 or a status with why
 * set (at least 128 bytes). Several members are concatenated, as gunzip does. */
int gz_inflate(kn_ctx *ctx, const uint8_t *src, size_t n, uint8_t **out, size_t *out_bytes, char *why);

/* Fashion-MNIST: the four files under dir (NULL: FASHION_MNIST_DIR), raw or
 * .gz, images scaled to [0, 1] then normalised with mean 0.2860, std 0.3530
 * into (N, 1, 28, 28) f32, labels (N) i64; kept tensors. */
#define FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
kn_status fmnist_load(kn_ctx *ctx, const char *dir, int train, kn_tensor **images, kn_tensor **labels);

#endif
