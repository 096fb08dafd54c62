/*
 * io.c — kn_save and kn_load: named tensors to and from safetensors files.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of
 * JSON, then the data buffer, each tensor row-major and little-endian:
 *
 *     {"__metadata__":{"format":"pt"},                          optional; strings only
 *      "fc1.bias":{"dtype":"F32","shape":[10],"data_offsets":[0,40]}, ...}
 *
 * data_offsets are [begin, end) byte offsets into the data buffer. kn_save
 * writes what the safetensors library writes: tensors ordered by dtype (in
 * the order of its Dtype enum, widest last, so descending) then by name,
 * compact JSON padded with spaces to a multiple of 8 bytes. The data then
 * starts 8-aligned and every tensor is aligned to its element size.
 *
 * kn_load trusts nothing in the file. A strict parser for this one schema
 * reads the whole header; every entry is checked (dtype name, shape, size,
 * offsets in range, the entries tiling the data buffer exactly, as the
 * safetensors library requires, names unique), then every requested name
 * (present, dtype, shape, BOOL bytes 0 or 1); only when all of that holds
 * are the destinations written, so an error changes none of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "../port/port.h"

/* safetensors dtypes in the order of the library's Dtype enum (its sort key) */
static const struct {
    const char *name;
    int size;
    int kn; /* the kn_dtype, or -1: valid in a file, but kiln has no such dtype */
} stdt[] = {
    {"BOOL", 1, KN_BOOL}, {"U8", 1, KN_U8},   {"I8", 1, -1},       {"F8_E5M2", 1, -1},
    {"F8_E4M3", 1, -1},   {"I16", 2, -1},     {"U16", 2, -1},      {"F16", 2, KN_F16},
    {"BF16", 2, KN_BF16}, {"I32", 4, KN_I32}, {"U32", 4, -1},      {"F32", 4, KN_F32},
    {"F64", 8, KN_F64},   {"I64", 8, KN_I64}, {"U64", 8, -1},
};
enum { NSTDT = sizeof stdt / sizeof stdt[0] };

static int stdt_of(kn_dtype dt)
{
    for (int i = 0; i < NSTDT; i++)
        if (stdt[i].kn == (int)dt) return i;
    KN_ASSERT(!"every kn_dtype has a safetensors name");
    return 0;
}

static int host_is_le(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* Reverses each es-byte element of p: little-endian <-> a big-endian host. */
static void swap_elems(uint8_t *p, size_t bytes, size_t es)
{
    for (size_t k = 0; es > 1 && k + es <= bytes; k += es)
        for (size_t i = 0; i < es / 2; i++) {
            uint8_t t = p[k + i];
            p[k + i] = p[k + es - 1 - i];
            p[k + es - 1 - i] = t;
        }
}

/* ---- arguments, shared by save and load ---- */

/* 1..255 bytes of printable ASCII, no quote or backslash: needs no JSON escape */
static int name_ok(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (s[n] < 0x20 || s[n] > 0x7e || s[n] == '"' || s[n] == '\\' || n == 255) return 0;
    return n > 0;
}

/* A name with its index and safetensors dtype rank: what the sorts compare. */
typedef struct {
    const char *name;
    int rank, i;
} Item;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const Item *)a)->name, ((const Item *)b)->name);
}

/* safetensors' order: dtype descending, then name */
static int by_rank_name(const void *a, const void *b)
{
    const Item *x = a, *y = b;
    return x->rank != y->rank ? y->rank - x->rank : strcmp(x->name, y->name);
}

/* Checks the arguments; returns the names as Items sorted by name
 * (kn_alloc'd, n of them; free with free_items), or NULL with an error set. */
static Item *check_args(kn_ctx *ctx, const char *path, const char *const *names, kn_tensor *const *ts, int n)
{
    static Item none; /* n == 0: a non-NULL result that is never read */
    if (!path) return kn_err(ctx, KN_EINVAL, "operand 'path' is NULL");
    if (!path[0]) return kn_err(ctx, KN_EINVAL, "operand 'path' is empty");
    if (n < 0) return kn_err(ctx, KN_EINVAL, "n = %d tensors is negative", n);
    if (n == 0) return &none;
    if (!names || !ts) return kn_err(ctx, KN_EINVAL, "operand '%s' is NULL", names ? "ts" : "names");
    for (int i = 0; i < n; i++) {
        if (!names[i]) return kn_err(ctx, KN_EINVAL, "names[%d] is NULL", i);
        if (!name_ok(names[i]) || !strcmp(names[i], "__metadata__"))
            return kn_err(ctx, KN_EINVAL, "names[%d] \"%.40s\" is not a tensor name (1 to 255 printable ASCII "
                          "characters, no quote or backslash, not __metadata__)", i, names[i]);
        if (!ts[i]) return kn_err(ctx, KN_EINVAL, "ts[%d] ('%s') is NULL", i, names[i]);
        if (!ts[i]->st)
            return kn_err(ctx, KN_EUNSUPPORTED, "ts[%d] ('%s') is symbolic (being traced): files hold "
                          "concrete tensors only", i, names[i]);
    }
    Item *it = kn_alloc(ctx, (size_t)n * sizeof *it);
    if (!it) return kn_err(ctx, KN_ENOMEM, "out of memory for %d names", n);
    for (int i = 0; i < n; i++) it[i] = (Item){names[i], stdt_of((kn_dtype)ts[i]->dtype), i};
    qsort(it, (size_t)n, sizeof *it, by_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(it[i - 1].name, it[i].name)) {
            kn_err(ctx, KN_EINVAL, "name '%s' is given twice", it[i].name);
            kn_dealloc(ctx, it, (size_t)n * sizeof *it);
            return NULL;
        }
    return it;
}

static void free_items(kn_ctx *ctx, Item *it, int n)
{
    if (n > 0) kn_dealloc(ctx, it, (size_t)n * sizeof *it);
}

/* ---- kn_save ---- */

static size_t tensor_bytes(const kn_tensor *t)
{
    return (size_t)tensor_numel(t->ndim, t->shape) * kn_dtype_size((kn_dtype)t->dtype);
}

/* The JSON header of the tensors in the order of it into buf (cap bytes);
 * returns its unpadded length, which may exceed cap (then nothing is cut
 * short but the text). */
static size_t header_json(char *buf, size_t cap, kn_tensor *const *ts, const Item *it, int n)
{
    size_t len = kn_appendf(buf, cap, 0, "{"), off = 0;
    for (int k = 0; k < n; k++) {
        const kn_tensor *t = ts[it[k].i];
        len = kn_appendf(buf, cap, len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", k ? "," : "", it[k].name,
                         stdt[it[k].rank].name);
        for (int d = 0; d < t->ndim; d++) len = kn_appendf(buf, cap, len, "%s%" PRId64, d ? "," : "", t->shape[d]);
        len = kn_appendf(buf, cap, len, "],\"data_offsets\":[%zu,%zu]}", off, off + tensor_bytes(t));
        off += tensor_bytes(t);
    }
    return kn_appendf(buf, cap, len, "}");
}

static kn_status save(kn_ctx *ctx, const char *path, const char *const *names, kn_tensor *const *ts, int n)
{
    Item *it = check_args(ctx, path, names, ts, n);
    if (!it) return ctx->status;
    size_t data = 0;
    for (int i = 0; i < n; i++) { /* each tensor's size fits (tensor_check_size); their sum may not */
        if (tensor_bytes(ts[i]) > SIZE_MAX / 4 - data) {
            free_items(ctx, it, n);
            return kn_errs(ctx, KN_ENOMEM, "%.200s: the tensors' total size overflows", path);
        }
        data += tensor_bytes(ts[i]);
    }
    qsort(it, (size_t)n, sizeof *it, by_rank_name);
    size_t hlen = header_json(NULL, 0, ts, it, n), hpad = (hlen + 7) / 8 * 8, total = 8 + hpad + data;
    uint8_t *buf = hpad < SIZE_MAX / 4 ? kn_alloc(ctx, total + 1) : NULL; /* + 1: room for snprintf's NUL */
    if (!buf) {
        free_items(ctx, it, n);
        return kn_errs(ctx, KN_ENOMEM, "%.200s: out of memory for a %zu-byte file", path, total);
    }
    for (int b = 0; b < 8; b++) buf[b] = (uint8_t)((uint64_t)hpad >> (8 * b));
    header_json((char *)buf + 8, hpad + 1, ts, it, n);
    memset(buf + 8 + hlen, ' ', hpad - hlen);
    kn_status s = KN_OK;
    uint8_t *p = buf + 8 + hpad;
    for (int k = 0; k < n && s == KN_OK; k++) {
        kn_tensor *t = ts[it[k].i];
        s = kn_read(ctx, t, p, tensor_bytes(t)); /* row-major, whatever t's strides */
        if (!host_is_le()) swap_elems(p, tensor_bytes(t), kn_dtype_size((kn_dtype)t->dtype));
        p += tensor_bytes(t);
    }
    char why[128];
    if (s == KN_OK && port_write_file(path, buf, total, why) != 0) s = kn_errs(ctx, KN_EIO, "%.200s: %s", path, why);
    kn_dealloc(ctx, buf, total + 1);
    free_items(ctx, it, n);
    return s;
}

kn_status kn_save(kn_ctx *ctx, const char *path, const char *const *names, kn_tensor *const *ts, int n)
{
    if (!ctx) return KN_EINVAL;
    const char *saved = op_enter(ctx, "kn_save");
    kn_status s = save(ctx, path, names, ts, n);
    op_leave(ctx, saved);
    return s;
}

/* ---- the header parser ----
 *
 * header   = ws object(member) ws
 * member   = string ws ":" ws (metadata | tensor)       metadata iff the key is "__metadata__"
 * metadata = object(string ws ":" ws string)
 * tensor   = object(field), with each of the three fields exactly once
 * field    = "\"dtype\"" ws ":" ws string | ("\"shape\"" | "\"data_offsets\"") ws ":" ws uints
 * object(m)= "{" ws [m *(ws "," ws m)] ws "}"
 * uints    = "[" ws [uint *(ws "," ws uint)] ws "]"     uint: "0" | [1-9][0-9]*, at most 2^63 - 1
 * string   = JSON's string, UTF-8 checked, escapes decoded
 */

typedef struct {
    const char *name;            /* decoded, in the parser's pool; not NUL-terminated */
    size_t len;
    int dt;                      /* index into stdt */
    int ndim;                    /* may exceed KN_MAX_DIMS: then only the first dims are kept */
    int64_t shape[KN_MAX_DIMS];
    uint64_t numel;              /* UINT64_MAX if it overflows */
    uint64_t begin, end;
    int seen;                    /* fields parsed: 1 dtype, 2 shape, 4 data_offsets */
} Entry;

typedef struct {
    kn_ctx *ctx;
    const char *path;
    const uint8_t *s, *p, *end;  /* the header text, the next byte, its end */
    char *pool;                  /* decoded strings, never longer than the header */
    size_t used;
    Entry *e;
    size_t n, cap;
    int failed;                  /* an error is set */
} Parser;

/* An error naming the file (the first one wins); returns 0 so that parse
 * steps can `return bad(...)`. */
static int bad(Parser *ps, const char *fmt, ...) KN_PRINTF(2, 3);
static int bad(Parser *ps, const char *fmt, ...)
{
    if (ps->failed) return 0;
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kn_errs(ps->ctx, KN_EIO, "%.160s: %s", ps->path, msg);
    ps->failed = 1;
    return 0;
}

static size_t at(const Parser *ps) { return (size_t)(ps->p - ps->s); }

static int syntax(Parser *ps, const char *what)
{
    if (ps->p == ps->end) return bad(ps, "header JSON ends early (%zu bytes): expected %s", at(ps), what);
    return bad(ps, "header JSON, byte %zu: expected %s", at(ps), what);
}

static int next_is(const Parser *ps, char c) { return ps->p < ps->end && *ps->p == c; }

static void ws(Parser *ps)
{
    while (next_is(ps, ' ') || next_is(ps, '\t') || next_is(ps, '\n') || next_is(ps, '\r')) ps->p++;
}

static int eat(Parser *ps, char c, const char *what)
{
    ws(ps);
    if (!next_is(ps, c)) return syntax(ps, what);
    ps->p++;
    ws(ps);
    return 1;
}

/* length of the valid UTF-8 sequence at p (RFC 3629: no overlong forms, no
 * surrogates, at most U+10FFFF), else 0 */
static int utf8_len(const uint8_t *p, const uint8_t *end)
{
    int n = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3
          : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
    if (n <= 1 || end - p < n) return n == 1;
    uint32_t c = p[0] & (0x3fu >> (n - 1));
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        c = c << 6 | (p[i] & 0x3fu);
    }
    if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)) || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    return n;
}

static int hex4(Parser *ps, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++, ps->p++) {
        int c = ps->p < ps->end ? *ps->p : -1;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return syntax(ps, "4 hex digits after \\u");
        *v = *v << 4 | (uint32_t)d;
    }
    return 1;
}

static void put_utf8(Parser *ps, uint32_t c)
{
    uint8_t *o = (uint8_t *)ps->pool + ps->used;
    int n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    static const uint8_t lead[5] = {0, 0x00, 0xc0, 0xe0, 0xf0};
    for (int i = n - 1; i > 0; i--, c >>= 6) o[i] = (uint8_t)(0x80 | (c & 0x3f));
    o[0] = (uint8_t)(lead[n] | c);
    ps->used += (size_t)n;
}

/* One escape, after its backslash; a UTF-16 surrogate pair is one code
 * point. Decoded bytes never outnumber the escape's (\uXXXX: 6 -> at most 3,
 * a pair: 12 -> 4), so the pool, as long as the header, cannot overflow. */
static int escape(Parser *ps)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = ps->p < ps->end && *ps->p ? strchr(from, *ps->p) : NULL;
    if (k) {
        ps->pool[ps->used++] = to[k - from];
        ps->p++;
        return 1;
    }
    if (!next_is(ps, 'u')) return syntax(ps, "an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX)");
    ps->p++;
    uint32_t c, lo = 0;
    if (!hex4(ps, &c)) return 0;
    if (c >= 0xd800 && c <= 0xdbff && ps->end - ps->p >= 2 && ps->p[0] == '\\' && ps->p[1] == 'u') {
        ps->p += 2;
        if (!hex4(ps, &lo)) return 0;
    }
    if ((c >= 0xdc00 && c <= 0xdfff) || (c >= 0xd800 && c <= 0xdbff && (lo < 0xdc00 || lo > 0xdfff)))
        return bad(ps, "header JSON, byte %zu: unpaired surrogate \\u%04X", at(ps), (unsigned)c);
    if (c >= 0xd800 && c <= 0xdbff) c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
    put_utf8(ps, c);
    return 1;
}

/* A JSON string, decoded into the pool at *out (len bytes). */
static int string(Parser *ps, const char **out, size_t *len)
{
    if (!next_is(ps, '"')) return syntax(ps, "a string");
    ps->p++;
    size_t start = ps->used;
    while (!next_is(ps, '"')) {
        if (ps->p == ps->end) return syntax(ps, "the closing quote of a string");
        if (*ps->p == '\\') {
            ps->p++;
            if (!escape(ps)) return 0;
            continue;
        }
        int n = *ps->p < 0x20 ? 0 : utf8_len(ps->p, ps->end);
        if (!n)
            return bad(ps, "header JSON, byte %zu: %s 0x%02X in a string", at(ps),
                       *ps->p < 0x20 ? "control character" : "invalid UTF-8 byte", *ps->p);
        memcpy(ps->pool + ps->used, ps->p, (size_t)n);
        ps->used += (size_t)n;
        ps->p += n;
    }
    ps->p++;
    *out = ps->pool + start;
    *len = ps->used - start;
    return 1;
}

static int is(const char *s, size_t len, const char *lit) { return len == strlen(lit) && !memcmp(s, lit, len); }

static int uint(Parser *ps, uint64_t *v)
{
    size_t start = at(ps);
    if (next_is(ps, '-')) return bad(ps, "header JSON, byte %zu: negative number", start);
    *v = 0;
    for (; ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9'; ps->p++) {
        unsigned d = (unsigned)(*ps->p - '0');
        if (*v > ((uint64_t)INT64_MAX - d) / 10) return bad(ps, "header JSON, byte %zu: number too large", start);
        *v = *v * 10 + d;
    }
    if (at(ps) == start) return syntax(ps, "a non-negative integer");
    if (ps->s[start] == '0' && at(ps) - start > 1)
        return bad(ps, "header JSON, byte %zu: number with a leading zero", start);
    if (next_is(ps, '.') || next_is(ps, 'e') || next_is(ps, 'E'))
        return bad(ps, "header JSON, byte %zu: expected an integer, found a fraction or exponent", start);
    return 1;
}

/* "[" uints "]": the first max into v, the count into *n, and into *prod
 * (if not NULL) their product, UINT64_MAX if that overflows. */
static int uints(Parser *ps, uint64_t *v, int max, int *n, uint64_t *prod)
{
    uint64_t p = 1;
    int zero = 0;
    *n = 0;
    if (!eat(ps, '[', "'['")) return 0;
    while (!next_is(ps, ']')) {
        uint64_t x = 0;
        if ((*n && !eat(ps, ',', "',' or ']'")) || !uint(ps, &x)) return 0;
        if (*n < max) v[*n] = x;
        if (*n < INT32_MAX) ++*n;
        zero |= x == 0;
        p = p != UINT64_MAX && (!x || p <= UINT64_MAX / x) ? p * x : UINT64_MAX;
        ws(ps);
    }
    ps->p++;
    if (prod) *prod = zero ? 0 : p;
    return 1;
}

/* "{" key ":" value ... "}", calling member(ps, key, len, arg) at each value. */
static int object(Parser *ps, int (*member)(Parser *, const char *, size_t, void *), void *arg)
{
    int first = 1;
    if (!eat(ps, '{', "'{'")) return 0;
    while (!next_is(ps, '}')) {
        const char *key;
        size_t len;
        if ((!first && !eat(ps, ',', "',' or '}'")) || !string(ps, &key, &len) || !eat(ps, ':', "':' after a key") ||
            !member(ps, key, len, arg))
            return 0;
        first = 0;
        ws(ps);
    }
    ps->p++;
    return 1;
}

static int meta_member(Parser *ps, const char *key, size_t len, void *arg)
{
    const char *v;
    size_t vlen;
    (void)key, (void)arg;
    if (!next_is(ps, '"')) return bad(ps, "header JSON, byte %zu: __metadata__ values must be strings", at(ps));
    if (!string(ps, &v, &vlen)) return 0;
    ps->used -= len + vlen; /* neither is kept */
    return 1;
}

static const char *show(const Entry *e, char *buf, size_t cap) /* the name, for messages */
{
    snprintf(buf, cap, "%.*s", e->len > 80 ? 80 : (int)e->len, e->name);
    return buf;
}

static int field(Parser *ps, const char *key, size_t len, void *arg)
{
    Entry *e = arg;
    char nb[96];
    int bit = is(key, len, "dtype") ? 1 : is(key, len, "shape") ? 2 : is(key, len, "data_offsets") ? 4 : 0;
    ps->used -= len;
    if (!bit)
        return bad(ps, "tensor '%s': unknown key \"%.*s\"", show(e, nb, sizeof nb), len > 40 ? 40 : (int)len, key);
    if (e->seen & bit) return bad(ps, "tensor '%s': key \"%.*s\" given twice", show(e, nb, sizeof nb), (int)len, key);
    e->seen |= bit;
    if (bit == 1) {
        const char *v;
        size_t vlen;
        if (!string(ps, &v, &vlen)) return 0;
        ps->used -= vlen;
        for (e->dt = 0; e->dt < NSTDT && !is(v, vlen, stdt[e->dt].name); e->dt++) continue;
        if (e->dt == NSTDT)
            return bad(ps, "tensor '%s': unknown dtype \"%.*s\"", show(e, nb, sizeof nb),
                       vlen > 20 ? 20 : (int)vlen, v);
        return 1;
    }
    uint64_t v[KN_MAX_DIMS];
    int n;
    if (bit == 2) {
        if (!uints(ps, v, KN_MAX_DIMS, &e->ndim, &e->numel)) return 0;
        for (int d = 0; d < e->ndim && d < KN_MAX_DIMS; d++) e->shape[d] = (int64_t)v[d];
        return 1;
    }
    if (!uints(ps, v, 2, &n, NULL)) return 0;
    if (n != 2) return bad(ps, "tensor '%s': data_offsets has %d numbers, expected 2", show(e, nb, sizeof nb), n);
    e->begin = v[0];
    e->end = v[1];
    return 1;
}

static int tensor(Parser *ps, const char *key, size_t len, void *arg)
{
    (void)arg;
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 16;
        Entry *e = cap < SIZE_MAX / sizeof *e ? kn_realloc(ps->ctx, ps->e, ps->cap * sizeof *e, cap * sizeof *e) : NULL;
        if (!e) {
            kn_errs(ps->ctx, KN_ENOMEM, "%.160s: out of memory for %zu header entries", ps->path, cap);
            ps->failed = 1;
            return 0;
        }
        ps->e = e;
        ps->cap = cap;
    }
    Entry *e = &ps->e[ps->n++];
    memset(e, 0, sizeof *e);
    e->name = key;
    e->len = len;
    char nb[96];
    if (!next_is(ps, '{'))
        return bad(ps, "header JSON, byte %zu: tensor '%s' is not an object", at(ps), show(e, nb, sizeof nb));
    if (!object(ps, field, e)) return 0;
    if (e->seen != 7)
        return bad(ps, "tensor '%s' has no \"%s\"", show(e, nb, sizeof nb),
                   !(e->seen & 1) ? "dtype" : !(e->seen & 2) ? "shape" : "data_offsets");
    return 1;
}

static int top_member(Parser *ps, const char *key, size_t len, void *arg)
{
    int *meta = arg;
    if (!is(key, len, "__metadata__")) return tensor(ps, key, len, NULL);
    if ((*meta)++) return bad(ps, "header JSON: __metadata__ given twice");
    ps->used -= len;
    if (!next_is(ps, '{')) return bad(ps, "header JSON, byte %zu: __metadata__ is not an object", at(ps));
    return object(ps, meta_member, NULL);
}

static int parse(Parser *ps)
{
    int meta = 0;
    ws(ps);
    if (!next_is(ps, '{')) return syntax(ps, "'{' (a JSON object)");
    if (!object(ps, top_member, &meta)) return 0;
    ws(ps);
    return ps->p == ps->end || syntax(ps, "the end of the header after its object");
}

/* ---- kn_load ---- */

static int by_offsets(const void *a, const void *b)
{
    const Entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end != y->end ? (x->end < y->end ? -1 : 1) : 0;
}

static int cmp_name(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : alen < blen ? -1 : alen > blen;
}

static int by_entry_name(const void *a, const void *b)
{
    const Entry *x = a, *y = b;
    return cmp_name(x->name, x->len, y->name, y->len);
}

static int by_key(const void *key, const void *b)
{
    const Entry *y = b;
    return cmp_name(key, strlen(key), y->name, y->len);
}

/* Every entry's size and offsets, then the entries tiling [0, data) in
 * offset order, then unique names; leaves the entries sorted by name. */
static int check_entries(Parser *ps, uint64_t data)
{
    char nb[96], sb[160];
    for (size_t i = 0; i < ps->n; i++) {
        Entry *e = &ps->e[i];
        uint64_t size = (uint64_t)stdt[e->dt].size, bytes = e->numel <= UINT64_MAX / size ? e->numel * size : 0;
        fmt_dims(sb, sizeof sb, e->ndim < KN_MAX_DIMS ? e->ndim : KN_MAX_DIMS, e->shape);
        if (e->numel > UINT64_MAX / size) return bad(ps, "tensor '%s': shape %s overflows", show(e, nb, sizeof nb), sb);
        if (e->begin > e->end || e->end > data)
            return bad(ps, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] are outside the %" PRIu64
                       "-byte data buffer", show(e, nb, sizeof nb), e->begin, e->end, data);
        if (e->end - e->begin != bytes)
            return bad(ps, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64 " bytes, but %s %s "
                       "needs %" PRIu64, show(e, nb, sizeof nb), e->begin, e->end, e->end - e->begin,
                       stdt[e->dt].name, sb, bytes);
    }
    if (ps->n > 1) qsort(ps->e, ps->n, sizeof *ps->e, by_offsets);
    uint64_t end = 0;
    for (size_t i = 0; i < ps->n; i++) {
        const Entry *e = &ps->e[i];
        char pb[96];
        if (e->begin < end)
            return bad(ps, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] overlap those of tensor '%s'",
                       show(e, nb, sizeof nb), e->begin, e->end, show(&ps->e[i - 1], pb, sizeof pb));
        if (e->begin > end) return bad(ps, "data bytes [%" PRIu64 ", %" PRIu64 ") belong to no tensor", end, e->begin);
        end = e->end;
    }
    if (end != data) return bad(ps, "data bytes [%" PRIu64 ", %" PRIu64 ") belong to no tensor", end, data);
    if (ps->n > 1) qsort(ps->e, ps->n, sizeof *ps->e, by_entry_name);
    for (size_t i = 1; i < ps->n; i++)
        if (!by_entry_name(&ps->e[i - 1], &ps->e[i]))
            return bad(ps, "tensor name '%s' appears twice", show(&ps->e[i], nb, sizeof nb));
    return 1;
}

/* The file's entry for each requested name, checked against its destination. */
static int match(Parser *ps, const char *const *names, kn_tensor *const *ts, int n, const uint8_t *data,
                 const Entry **found)
{
    char b0[160], b1[160];
    for (int i = 0; i < n; i++) {
        const Entry *e = ps->n ? bsearch(names[i], ps->e, ps->n, sizeof *ps->e, by_key) : NULL;
        const kn_tensor *t = ts[i];
        if (!e) return bad(ps, "no tensor '%s' in the file", names[i]);
        if (stdt[e->dt].kn != t->dtype)
            return bad(ps, "tensor '%s' has dtype %s, expected %s", names[i], stdt[e->dt].name,
                       stdt[stdt_of((kn_dtype)t->dtype)].name);
        if (e->ndim > KN_MAX_DIMS)
            return bad(ps, "tensor '%s' has %d dims, expected shape %s", names[i], e->ndim,
                       fmt_shape(b1, sizeof b1, t));
        if (e->ndim != t->ndim || memcmp(e->shape, t->shape, (size_t)t->ndim * sizeof *t->shape))
            return bad(ps, "tensor '%s' has shape %s, expected %s", names[i],
                       fmt_dims(b0, sizeof b0, e->ndim, e->shape), fmt_shape(b1, sizeof b1, t));
        for (int d = 0; d < t->ndim; d++)
            if (t->stride[d] == 0 && t->shape[d] > 1)
                return bad(ps, "destination '%s' is an expanded view (dim %d has stride 0): its elements alias",
                           names[i], d);
        for (uint64_t k = e->begin; t->dtype == KN_BOOL && k < e->end; k++)
            if (data[k] > 1)
                return bad(ps, "tensor '%s': BOOL element %" PRIu64 " is %u, not 0 or 1", names[i], k - e->begin,
                           data[k]);
        found[i] = e;
    }
    return 1;
}

/* What the writes need, made before any of them: one borrowed source per
 * destination, over the file's bytes or, where those are misaligned for the
 * dtype, over an aligned copy. */
typedef struct {
    kn_tensor *src;
    void *copy;
    size_t bytes;
} Source;

static int make_sources(Parser *ps, kn_tensor *const *ts, int n, uint8_t *data, const Entry **found, Source *src)
{
    for (int i = 0; i < n; i++) {
        size_t es = kn_dtype_size((kn_dtype)ts[i]->dtype), bytes = (size_t)(found[i]->end - found[i]->begin);
        uint8_t *p = data + found[i]->begin;
        if (!host_is_le()) swap_elems(p, bytes, es);
        if ((uintptr_t)p % es) {
            if (!(src[i].copy = kn_alloc(ps->ctx, bytes))) {
                kn_errs(ps->ctx, KN_ENOMEM, "%.160s: out of memory for a %zu-byte aligned copy", ps->path, bytes);
                return !(ps->failed = 1);
            }
            src[i].bytes = bytes;
            p = memcpy(src[i].copy, p, bytes);
        }
        src[i].src = tensor_borrow(ps->ctx, p, (kn_dtype)ts[i]->dtype, ts[i]->ndim, ts[i]->shape);
        if (!src[i].src) return !(ps->failed = 1);
    }
    return 1;
}

/* The file is read whole; its header is parsed and checked; then the
 * requested tensors are matched and copied, through borrowed views of the
 * file's bytes, into the destinations. */
static kn_status load(kn_ctx *ctx, const char *path, const char *const *names, kn_tensor *const *ts, int n)
{
    Item *it = check_args(ctx, path, names, ts, n);
    if (!it) return ctx->status;
    free_items(ctx, it, n); /* only its checks were wanted */
    void *file;
    size_t size, nn = (size_t)n;
    char why[128];
    if (port_read_file(path, &file, &size, why) != 0) return kn_errs(ctx, KN_EIO, "%.200s: %s", path, why);
    Parser ps = {.ctx = ctx, .path = path};
    const uint8_t *f = file;
    uint64_t hlen = 0;
    for (int b = 0; b < 8 && size >= 8; b++) hlen |= (uint64_t)f[b] << (8 * b);
    if (size < 8) bad(&ps, "%zu bytes is too short for a safetensors file (an 8-byte header length first)", size);
    else if (hlen > size - 8)
        bad(&ps, "header length %" PRIu64 " exceeds the %zu bytes after it: not a safetensors file, or truncated",
            hlen, size - 8);
    else if (!(ps.pool = kn_alloc(ctx, (size_t)hlen + 1)))
        ps.failed = kn_errs(ctx, KN_ENOMEM, "%.160s: out of memory for a %" PRIu64 "-byte header", path, hlen) != 0;
    else {
        ps.s = ps.p = f + 8;
        ps.end = ps.p + hlen;
        if (parse(&ps)) check_entries(&ps, size - 8 - hlen);
    }
    const Entry **found = NULL;
    Source *src = NULL;
    if (!ps.failed && n > 0) {
        uint8_t *data = (uint8_t *)file + 8 + hlen;
        found = kn_alloc(ctx, nn * sizeof *found);
        src = kn_alloc(ctx, nn * sizeof *src);
        if (src) memset(src, 0, nn * sizeof *src);
        if (!found || !src) ps.failed = kn_errs(ctx, KN_ENOMEM, "%.160s: out of memory for %d tensors", path, n) != 0;
        else if ((uintptr_t)data % 8) { /* an unpadded header: move the data back over it, to 8-aligned */
            memmove(data - (uintptr_t)data % 8, data, size - 8 - hlen);
            data -= (uintptr_t)data % 8;
        }
        if (!ps.failed && match(&ps, names, ts, n, data, found) && make_sources(&ps, ts, n, data, found, src))
            for (int i = 0; i < n; i++) {
                kn_status a = tensor_assign(ctx, ts[i], src[i].src); /* cannot fail: all was checked */
                KN_ASSERT(a == KN_OK);
            }
    }
    for (size_t i = 0; src && i < nn; i++) {
        kn_free(ctx, src[i].src);
        kn_dealloc(ctx, src[i].copy, src[i].bytes);
    }
    kn_dealloc(ctx, found, nn * sizeof *found);
    kn_dealloc(ctx, src, nn * sizeof *src);
    kn_dealloc(ctx, ps.e, ps.cap * sizeof *ps.e);
    if (ps.pool) kn_dealloc(ctx, ps.pool, (size_t)hlen + 1);
    free(file);
    return ps.failed ? ctx->status : KN_OK;
}

kn_status kn_load(kn_ctx *ctx, const char *path, const char *const *names, kn_tensor *const *ts, int n)
{
    if (!ctx) return KN_EINVAL;
    const char *saved = op_enter(ctx, "kn_load");
    kn_status s = load(ctx, path, names, ts, n);
    op_leave(ctx, saved);
    return s;
}
