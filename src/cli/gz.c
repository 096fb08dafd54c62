/*
 * gz.c — gzip decompression (RFC 1952) of a buffer, through zlib's inflate.
 *
 * A gzip stream is one member or several, whose outputs are concatenated
 * (as gunzip does); zlib checks each member's header, its deflate blocks and
 * its trailer (CRC-32 and length). What zlib cannot see is checked here: the
 * input's first bytes, input that ends inside a member, and bytes after a
 * member that do not begin another. zlib's memory, like the output, comes
 * from the context's allocator.
 *
 * App code (the kiln CLI's dataset reader, with data.c): it is linked with
 * -lz and is not part of libkiln.a.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "../core.h"
#include "data.h"

enum { ALIGN = 16 }; /* zlib's blocks hold their size in front, keeping malloc's alignment */

static voidpf z_alloc(voidpf ctx, uInt items, uInt size)
{
    size_t n;
    if (kn_mul_overflows(items, size, &n) || n > SIZE_MAX - ALIGN) return Z_NULL;
    unsigned char *p = kn_alloc(ctx, n + ALIGN);
    if (!p) return Z_NULL;
    memcpy(p, &n, sizeof n);
    return p + ALIGN;
}

static void z_free(voidpf ctx, voidpf q)
{
    if (!q) return;
    unsigned char *p = (unsigned char *)q - ALIGN;
    size_t n;
    memcpy(&n, p, sizeof n);
    kn_dealloc(ctx, p, n + ALIGN);
}

typedef struct {
    kn_ctx *ctx;
    uint8_t *out; /* len bytes of cap */
    size_t len, cap;
    char *why;
} Out;

static int fail(char *why, int status, const char *fmt, ...) KN_PRINTF(3, 4);
static int fail(char *why, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, 128, fmt, ap);
    va_end(ap);
    return status;
}

/* room for at least k more bytes of output, doubling (linear time overall); 0 or KN_ENOMEM */
static int reserve(Out *o, size_t k)
{
    if (o->cap - o->len >= k) return 0;
    if (k > SIZE_MAX / 4 - o->len) return fail(o->why, KN_ENOMEM, "output too large for memory");
    size_t cap = o->cap < SIZE_MAX / 4 ? 2 * o->cap : o->len + k;
    if (cap < o->len + k) cap = o->len + k;
    if (cap < 4096) cap = 4096;
    uint8_t *p = kn_realloc(o->ctx, o->out, o->cap, cap);
    if (!p) return fail(o->why, KN_ENOMEM, "out of memory for %zu bytes of output", cap);
    o->out = p;
    o->cap = cap;
    return 0;
}

static uInt chunk(size_t n) { return n < UINT_MAX ? (uInt)n : UINT_MAX; }

/* Inflates src[0..n) (n > 0, gzip's magic first) into o; 0 or a status. */
static int inflate_all(z_stream *z, const uint8_t *src, size_t n, Out *o)
{
    size_t pos = 0;
    for (;;) {
        int s = o->len == o->cap ? reserve(o, 1) : 0;
        if (s) return s;
        z->next_in = (Bytef *)(uintptr_t)(src + pos); /* zlib reads it only */
        z->avail_in = chunk(n - pos);
        z->next_out = o->out + o->len;
        z->avail_out = chunk(o->cap - o->len);
        uInt in0 = z->avail_in, out0 = z->avail_out;
        int zs = inflate(z, Z_NO_FLUSH);
        pos += in0 - z->avail_in;
        o->len += out0 - z->avail_out;
        if (zs == Z_STREAM_END) {
            if (pos == n) return 0;
            if (n - pos < 2 || src[pos] != 0x1f || src[pos + 1] != 0x8b)
                return fail(o->why, KN_EIO, "corrupt: %zu bytes after the member at byte %zu are not another gzip member",
                            n - pos, pos);
            if (inflateReset(z) != Z_OK) return fail(o->why, KN_EIO, "zlib: inflateReset failed");
        } else if (zs == Z_MEM_ERROR) {
            return fail(o->why, KN_ENOMEM, "out of memory for zlib's inflate state");
        } else if (zs == Z_DATA_ERROR || zs == Z_NEED_DICT || zs == Z_STREAM_ERROR) {
            return fail(o->why, KN_EIO, "corrupt: %s (input byte %zu)", z->msg ? z->msg : "bad deflate data", pos);
        } else if (pos == n && z->avail_out > 0) { /* Z_OK or Z_BUF_ERROR: it wants input there is none of */
            return fail(o->why, KN_EIO, "truncated: the input ends inside a gzip member (%zu bytes)", n);
        }
    }
}

static uint32_t le32(const uint8_t *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

int gz_inflate(kn_ctx *ctx, const uint8_t *src, size_t n, uint8_t **out, size_t *out_bytes, char *why)
{
    if (why) why[0] = 0;
    if (out) *out = NULL;
    if (out_bytes) *out_bytes = 0;
    if (!ctx || (!src && n) || !out || !out_bytes || !why) {
        if (why) snprintf(why, 128, "gz_inflate: a NULL argument");
        return KN_EINVAL;
    }
    if (n == 0) return fail(why, KN_EIO, "not gzip: empty input");
    if (n < 2 || src[0] != 0x1f || src[1] != 0x8b)
        return fail(why, KN_EIO, "not gzip: the input starts %02x %02x, gzip's magic is 1f 8b", src[0],
                    n > 1 ? src[1] : 0);
    Out o = {ctx, NULL, 0, 0, why};
    /* the last trailer's length as the first guess of the size, if deflate could reach it (1032:1 at most) */
    size_t guess = n >= 18 ? le32(src + n - 4) : 0;
    int s = guess && guess / 1032 <= n ? reserve(&o, guess) : 0;
    z_stream z;
    memset(&z, 0, sizeof z);
    z.zalloc = z_alloc;
    z.zfree = z_free;
    z.opaque = ctx;
    if (!s) {
        int zs = inflateInit2(&z, 16 + MAX_WBITS); /* 16: a gzip header and trailer around the deflate data */
        if (zs != Z_OK)
            s = fail(why, zs == Z_MEM_ERROR ? KN_ENOMEM : KN_EIO, "zlib: inflateInit2 failed (%d)", zs);
        else {
            s = inflate_all(&z, src, n, &o);
            inflateEnd(&z);
        }
    }
    if (!s && o.len < o.cap) { /* the exact size, so the caller frees *out_bytes bytes */
        uint8_t *p = o.len ? kn_realloc(ctx, o.out, o.cap, o.len) : NULL;
        if (o.len && !p) s = fail(why, KN_ENOMEM, "out of memory shrinking the output");
        else {
            if (!o.len) kn_dealloc(ctx, o.out, o.cap);
            o.out = p;
            o.cap = o.len;
        }
    }
    if (s) {
        kn_dealloc(ctx, o.out, o.cap);
        return s;
    }
    *out = o.out;
    *out_bytes = o.len;
    return 0;
}
