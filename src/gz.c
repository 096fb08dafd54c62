/*
 * gz.c — gzip decompression (RFC 1952) with an inflate of our own (RFC 1951).
 *
 * A gzip member is a header, deflate blocks and a trailer holding the CRC-32
 * and the length (mod 2^32) of what the blocks decode to; members may follow
 * one another, and their outputs are concatenated. A deflate block is stored
 * (copied as is), or Huffman-coded with the fixed code of RFC 1951 3.2.6 or
 * with codes it describes itself (3.2.7). Symbols are literal bytes, the end
 * of the block, or a length that, with a distance code after it, copies
 * earlier output.
 *
 * Huffman codes are canonical (3.2.2): a code is given by its lengths alone,
 * codes of one length being consecutive integers in symbol order. Decoding
 * looks the next FAST_BITS input bits up in a table, which resolves every
 * code that short (nearly all of them); longer codes are walked a bit at a
 * time through the count of codes of each length.
 *
 * Nothing in the input is trusted: every read is bounds-checked, codes are
 * checked for over-subscription, distances against the output so far. All
 * memory comes from the context's allocator.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "data.h"

enum { MAX_BITS = 15, FAST_BITS = 9, MAX_LITLEN = 288, MAX_DIST = 32, MAX_CODES = 19 };

typedef struct {
    uint16_t count[MAX_BITS + 1];  /* number of codes of each length */
    uint16_t sym[MAX_LITLEN];      /* symbols, shortest code first, then by symbol */
    uint16_t fast[1 << FAST_BITS]; /* next FAST_BITS bits -> length << 9 | symbol; 0: a longer code */
} Huff;

typedef struct {
    kn_ctx *ctx;
    const uint8_t *in;
    size_t n, pos;        /* input, its length, the next byte to read */
    uint64_t bits;        /* bits read but not used, the next one lowest */
    int nbits;
    uint8_t *out;         /* output so far: len bytes of cap */
    size_t len, cap;
    size_t member;        /* where the current member's output starts */
    int status;           /* 0, or the first error (why holds its message) */
    char *why;
    Huff lit, dist, lens; /* the current block's codes */
    Huff fixed_lit, fixed_dist;
    uint32_t crc_table[256];
} Inflate;

/* RFC 1951 3.2.5: lengths 3..258 (symbols 257..285) and distances 1..32768 */
static const uint16_t len_base[29] = {3,  4,  5,  6,  7,  8,  9,  10,  11,  13,  15,  17,  19,  23, 27,
                                      31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t dist_base[30] = {1,    2,    3,    4,    5,    7,     9,     13,    17,    25,
                                       33,   49,   65,   97,   129,  193,   257,   385,   513,   769,
                                       1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6,
                                       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

static int fail(Inflate *s, int status, const char *fmt, ...) KN_PRINTF(3, 4);
static int fail(Inflate *s, int status, const char *fmt, ...)
{
    if (s->status) return 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, 128, fmt, ap);
    va_end(ap);
    s->status = status;
    return 0;
}

/* ---- bits, least significant first (3.1.1) ---- */

static uint32_t getbits(Inflate *s, int k) /* k <= 16 */
{
    while (s->nbits < k) {
        if (s->pos == s->n) return (uint32_t)fail(s, KN_EIO, "truncated: the input ends inside a deflate block");
        s->bits |= (uint64_t)s->in[s->pos++] << s->nbits;
        s->nbits += 8;
    }
    uint32_t v = (uint32_t)(s->bits & ((1u << k) - 1));
    s->bits >>= k;
    s->nbits -= k;
    return v;
}

/* Drops the bits up to a byte boundary and gives back whole bytes still buffered. */
static void align(Inflate *s)
{
    s->pos -= (size_t)s->nbits / 8;
    s->bits = 0;
    s->nbits = 0;
}

/* ---- Huffman codes ---- */

/* Builds h from the code lengths of n symbols. 0 if the lengths make a
 * code: complete, or with at most one code (a distance code may have one
 * or none); -1 if over-subscribed or incomplete. */
static int build(Huff *h, const uint8_t *lens, int n)
{
    uint16_t offs[MAX_BITS + 2], next[MAX_BITS + 1];
    memset(h->count, 0, sizeof h->count);
    for (int i = 0; i < n; i++) h->count[lens[i]]++;
    int left = 1, used = n - h->count[0];
    for (int len = 1; len <= MAX_BITS; len++) {
        left = 2 * left - h->count[len];
        if (left < 0) return -1;
    }
    if (left > 0 && used > 1) return -1;
    offs[1] = 0;
    for (int len = 1; len <= MAX_BITS; len++) offs[len + 1] = (uint16_t)(offs[len] + h->count[len]);
    for (int i = 0; i < n; i++)
        if (lens[i]) h->sym[offs[lens[i]]++] = (uint16_t)i;
    /* the first code of each length, then every short code into the table, bits reversed */
    next[1] = 0;
    for (int len = 2; len <= MAX_BITS; len++) next[len] = (uint16_t)((next[len - 1] + h->count[len - 1]) << 1);
    memset(h->fast, 0, sizeof h->fast);
    for (int i = 0; i < n; i++) {
        int len = lens[i];
        if (!len || len > FAST_BITS) continue;
        unsigned code = next[len]++, rev = 0;
        for (int b = 0; b < len; b++) rev |= ((code >> b) & 1u) << (len - 1 - b);
        for (unsigned j = rev; j < 1u << FAST_BITS; j += 1u << len) h->fast[j] = (uint16_t)(len << 9 | i);
    }
    return 0;
}

/* The next symbol in code h, or -1 (error set). */
static int decode(Inflate *s, const Huff *h)
{
    while (s->nbits < FAST_BITS && s->pos < s->n) {
        s->bits |= (uint64_t)s->in[s->pos++] << s->nbits;
        s->nbits += 8;
    }
    unsigned e = h->fast[s->bits & ((1u << FAST_BITS) - 1)];
    if (e && (int)(e >> 9) <= s->nbits) {
        s->bits >>= e >> 9;
        s->nbits -= (int)(e >> 9);
        return (int)(e & 511);
    }
    /* a code longer than FAST_BITS: code - first is its rank among the codes of its length */
    int code = 0, first = 0, index = 0;
    for (int len = 1; len <= MAX_BITS; len++) {
        code |= (int)getbits(s, 1);
        if (s->status) return -1;
        if (code - first < h->count[len]) return h->sym[index + code - first];
        index += h->count[len];
        first = (first + h->count[len]) << 1;
        code <<= 1;
    }
    fail(s, KN_EIO, "corrupt: no such Huffman code (input byte %zu)", s->pos);
    return -1;
}

/* ---- blocks ---- */

static int reserve(Inflate *s, size_t k)
{
    if (s->cap - s->len >= k) return 1;
    if (k > SIZE_MAX / 4 - s->len) return fail(s, KN_ENOMEM, "output too large for memory");
    size_t cap = s->cap < SIZE_MAX / 4 ? 2 * s->cap : s->len + k; /* doubling: linear time overall */
    if (cap < s->len + k) cap = s->len + k;
    if (cap < 4096) cap = 4096;
    uint8_t *p = kn_realloc(s->ctx, s->out, s->cap, cap);
    if (!p) return fail(s, KN_ENOMEM, "out of memory for %zu bytes of output", cap);
    s->out = p;
    s->cap = cap;
    return 1;
}

static void stored(Inflate *s)
{
    align(s);
    if (s->n - s->pos < 4) {
        fail(s, KN_EIO, "truncated: the input ends inside a stored block's length");
        return;
    }
    const uint8_t *p = s->in + s->pos;
    size_t len = p[0] | (size_t)p[1] << 8, nlen = p[2] | (size_t)p[3] << 8;
    if (len != (~nlen & 0xffff)) {
        fail(s, KN_EIO, "corrupt: stored block length %zu does not match its complement (input byte %zu)", len, s->pos);
        return;
    }
    s->pos += 4;
    if (s->n - s->pos < len) fail(s, KN_EIO, "truncated: the input ends inside a stored block");
    else if (reserve(s, len)) {
        memcpy(s->out + s->len, s->in + s->pos, len);
        s->len += len;
        s->pos += len;
    }
}

/* Literals and copies until the end-of-block symbol (3.2.5). */
static void codes(Inflate *s, const Huff *lit, const Huff *dist)
{
    for (;;) {
        int sym = decode(s, lit);
        if (sym < 256) {
            if (sym < 0 || !reserve(s, 1)) return;
            s->out[s->len++] = (uint8_t)sym;
            continue;
        }
        if (sym == 256) return;
        if ((sym -= 257) >= 29) {
            fail(s, KN_EIO, "corrupt: invalid length symbol %d (input byte %zu)", sym + 257, s->pos);
            return;
        }
        size_t len = len_base[sym] + getbits(s, len_extra[sym]);
        int d = decode(s, dist);
        if (d < 0) return;
        if (d >= 30) {
            fail(s, KN_EIO, "corrupt: invalid distance symbol %d (input byte %zu)", d, s->pos);
            return;
        }
        size_t back = dist_base[d] + getbits(s, dist_extra[d]);
        if (s->status) return;
        if (back > s->len - s->member) {
            fail(s, KN_EIO, "corrupt: distance %zu reaches before the start of the output (input byte %zu)", back,
                 s->pos);
            return;
        }
        if (!reserve(s, len)) return;
        for (size_t i = 0; i < len; i++, s->len++) s->out[s->len] = s->out[s->len - back]; /* may overlap */
    }
}

/* A dynamic block's header: the code-length code, then the literal/length
 * and distance code lengths coded with it, runs included (3.2.7). */
static void dynamic(Inflate *s)
{
    static const uint8_t order[MAX_CODES] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    uint8_t lens[MAX_LITLEN + MAX_DIST] = {0};
    int nlit = (int)getbits(s, 5) + 257, ndist = (int)getbits(s, 5) + 1, ncode = (int)getbits(s, 4) + 4;
    if (s->status) return;
    if (nlit > 286 || ndist > 30) {
        fail(s, KN_EIO, "corrupt: dynamic block with %d literal/length and %d distance codes", nlit, ndist);
        return;
    }
    for (int i = 0; i < ncode; i++) lens[order[i]] = (uint8_t)getbits(s, 3);
    if (s->status) return;
    if (build(&s->lens, lens, MAX_CODES) != 0) {
        fail(s, KN_EIO, "corrupt: bad code-length code (input byte %zu)", s->pos);
        return;
    }
    memset(lens, 0, sizeof lens);
    for (int i = 0; i < nlit + ndist;) {
        int sym = decode(s, &s->lens), rep = 1;
        uint8_t val = (uint8_t)sym;
        if (sym < 0) return;
        if (sym == 16) {
            if (i == 0) {
                fail(s, KN_EIO, "corrupt: a repeat with no length before it (input byte %zu)", s->pos);
                return;
            }
            val = lens[i - 1];
            rep = 3 + (int)getbits(s, 2);
        } else if (sym == 17) {
            val = 0;
            rep = 3 + (int)getbits(s, 3);
        } else if (sym == 18) {
            val = 0;
            rep = 11 + (int)getbits(s, 7);
        }
        if (s->status) return;
        if (i + rep > nlit + ndist) {
            fail(s, KN_EIO, "corrupt: code lengths run past their count (input byte %zu)", s->pos);
            return;
        }
        while (rep--) lens[i++] = val;
    }
    if (lens[256] == 0) fail(s, KN_EIO, "corrupt: a dynamic block with no end-of-block code");
    else if (build(&s->lit, lens, nlit) != 0 || build(&s->dist, lens + nlit, ndist) != 0)
        fail(s, KN_EIO, "corrupt: bad literal/length or distance code (input byte %zu)", s->pos);
    else codes(s, &s->lit, &s->dist);
}

static void fixed_codes(Inflate *s)
{
    uint8_t lens[MAX_LITLEN];
    for (int i = 0; i < MAX_LITLEN; i++) lens[i] = i < 144 ? 8 : i < 256 ? 9 : i < 280 ? 7 : 8;
    build(&s->fixed_lit, lens, MAX_LITLEN);
    memset(lens, 5, MAX_DIST);
    build(&s->fixed_dist, lens, MAX_DIST);
}

/* ---- gzip members (RFC 1952) ---- */

static uint32_t crc32(const uint32_t *table, uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static uint32_t le32(const uint8_t *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Skips a zero-terminated field of the header; 0 if the input ends first. */
static int skip_string(Inflate *s)
{
    const uint8_t *z = memchr(s->in + s->pos, 0, s->n - s->pos);
    if (!z) return fail(s, KN_EIO, "truncated: the input ends inside the gzip header");
    s->pos = (size_t)(z - s->in) + 1;
    return 1;
}

static void header(Inflate *s)
{
    enum { FHCRC = 2, FEXTRA = 4, FNAME = 8, FCOMMENT = 16 };
    const uint8_t *h = s->in + s->pos;
    size_t start = s->pos, left = s->n - s->pos;
    if (h[0] != 0x1f || (left > 1 && h[1] != 0x8b)) {
        if (start) fail(s, KN_EIO, "not gzip: %zu bytes after the member that ends at byte %zu", left, start);
        else fail(s, KN_EIO, "not gzip: the input starts %02x %02x, not 1f 8b", h[0], left > 1 ? h[1] : 0);
        return;
    }
    if (left < 10) {
        fail(s, KN_EIO, "truncated: %zu bytes where a 10-byte gzip header should be", left);
        return;
    }
    if (h[2] != 8) {
        fail(s, KN_EIO, "gzip compression method %d, only 8 (deflate) is known", h[2]);
        return;
    }
    if (h[3] & 0xe0) {
        fail(s, KN_EIO, "gzip header has reserved flag bits set (0x%02x)", h[3]);
        return;
    }
    s->pos += 10;
    if (h[3] & FEXTRA) {
        size_t xlen = s->n - s->pos >= 2 ? (size_t)(s->in[s->pos] | s->in[s->pos + 1] << 8) : 0;
        if (s->n - s->pos < 2 || s->n - s->pos - 2 < xlen) {
            fail(s, KN_EIO, "truncated: the input ends inside the gzip header");
            return;
        }
        s->pos += 2 + xlen;
    }
    if (((h[3] & FNAME) && !skip_string(s)) || ((h[3] & FCOMMENT) && !skip_string(s))) return;
    if (h[3] & FHCRC) {
        if (s->n - s->pos < 2) {
            fail(s, KN_EIO, "truncated: the input ends inside the gzip header");
            return;
        }
        uint32_t want = s->in[s->pos] | (uint32_t)s->in[s->pos + 1] << 8;
        if ((crc32(s->crc_table, 0, s->in + start, s->pos - start) & 0xffff) != want) {
            fail(s, KN_EIO, "corrupt: gzip header CRC mismatch");
            return;
        }
        s->pos += 2;
    }
}

/* One member: header, blocks, trailer. */
static void member(Inflate *s)
{
    header(s);
    s->member = s->len;
    for (int last = 0; !last && !s->status;) {
        last = (int)getbits(s, 1);
        int type = (int)getbits(s, 2);
        if (s->status) return;
        if (type == 0) stored(s);
        else if (type == 1) codes(s, &s->fixed_lit, &s->fixed_dist);
        else if (type == 2) dynamic(s);
        else fail(s, KN_EIO, "corrupt: deflate block type 3 (input byte %zu)", s->pos);
    }
    if (s->status) return;
    align(s);
    if (s->n - s->pos < 8) {
        fail(s, KN_EIO, "truncated: %zu bytes where the 8-byte gzip trailer should be", s->n - s->pos);
        return;
    }
    uint32_t crc = s->len > s->member ? crc32(s->crc_table, 0, s->out + s->member, s->len - s->member) : 0;
    uint32_t want = le32(s->in + s->pos), size = le32(s->in + s->pos + 4);
    if (crc != want) fail(s, KN_EIO, "corrupt: CRC-32 %08lx, the gzip trailer says %08lx", (unsigned long)crc,
                          (unsigned long)want);
    else if ((uint32_t)(s->len - s->member) != size)
        fail(s, KN_EIO, "corrupt: length mismatch: %zu bytes decoded, the gzip trailer says %lu (mod 2^32)",
             s->len - s->member, (unsigned long)size);
    s->pos += 8;
}

int gz_inflate(kn_ctx *ctx, const uint8_t *src, size_t n, uint8_t **out, size_t *out_bytes, char *why)
{
    if (why) why[0] = 0;
    if (out) *out = NULL;
    if (out_bytes) *out_bytes = 0;
    if (!ctx || (!src && n) || !out || !out_bytes || !why) {
        if (why) snprintf(why, 128, "gz_inflate: a NULL argument");
        return KN_EINVAL;
    }
    Inflate *s = kn_alloc(ctx, sizeof *s);
    if (!s) {
        snprintf(why, 128, "out of memory for the inflate state");
        return KN_ENOMEM;
    }
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->in = src;
    s->n = n;
    s->why = why;
    for (uint32_t i = 0; i < 256; i++) { /* CRC-32, reflected polynomial 0xedb88320 */
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        s->crc_table[i] = c;
    }
    fixed_codes(s);
    /* the last trailer's length as the first guess of the size, if deflate could reach it (1032:1 at most) */
    size_t guess = n >= 18 ? le32(src + n - 4) : 0;
    if (guess && guess / 1032 <= n) reserve(s, guess);
    if (n == 0) fail(s, KN_EIO, "not gzip: empty input");
    while (!s->status && s->pos < s->n) member(s);
    if (!s->status && s->len < s->cap) { /* the exact size, so the caller frees *out_bytes bytes */
        uint8_t *p = s->len ? kn_realloc(ctx, s->out, s->cap, s->len) : NULL;
        if (s->len && !p) fail(s, KN_ENOMEM, "out of memory shrinking the output");
        else {
            if (!s->len) kn_dealloc(ctx, s->out, s->cap);
            s->out = p;
            s->cap = s->len;
        }
    }
    int status = s->status;
    if (status) kn_dealloc(ctx, s->out, s->cap);
    else {
        *out = s->out;
        *out_bytes = s->len;
    }
    kn_dealloc(ctx, s, sizeof *s);
    return status;
}
