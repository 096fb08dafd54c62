/*
 * test_io.c — files: kn_save/kn_load (safetensors), gz_inflate, idx_read,
 * fmnist_load.
 *
 * safetensors: a round trip of every dtype, contiguous or not, 0-d and empty,
 * into contiguous and strided destinations; tests/ref/io_fixture.h's
 * reference file (laid out as the safetensors library lays it out, from
 * torch tensors; see tests/ref/gen_io.py) loads to the expected values, and
 * kn_save of the same tensors reproduces it byte for byte; a valid file in
 * an unusual form loads too. Every class of malformed file gives KN_EIO with
 * a message naming the file and the fault, and leaves every destination
 * unchanged; so does every truncation of three files, and every byte flip,
 * JSON character put in and random mutation of them either loads or fails
 * that way (run under ASan to catch what would crash).
 * A save replaces a file whole; a failed save leaves the old one. Failed
 * allocations at every point give KN_ENOMEM, change nothing and leak nothing.
 *
 * gzip (zlib, through gz_inflate): the fixture's streams (stored, fixed and
 * dynamic blocks, all header flags, two members, empty) inflate to their
 * text; corrupt CRC, length, blocks and headers, bytes after a member and
 * every truncation are errors with a message; a byte flip gives an error or
 * the right text.
 * IDX: small files written here, raw and gzip'd; every bad header is named.
 * Fashion-MNIST: a small synthetic set written here, and the real test set if
 * /usr/share/datasets/fashion-mnist is there (else a SKIP line, not a pass).
 *
 * gzip, IDX and Fashion-MNIST are the CLI's dataset reader, linked where
 * KN_TEST_DATA is defined (native builds, with zlib); cross builds test the
 * rest.
 *
 * Temporary files go to a fresh directory under $TMPDIR (or /tmp), removed at
 * the end; under WASI, to test_io.tmp.dir in the current directory.
 *
 * The fixtures are compiled in, so it runs from any directory: build/tests/test_io
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, mkdir, rmdir */
#include <sys/stat.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>

#include "test.h"
#include "ref/io_fixture.h"
#include "../src/core.h"
#include "../src/cli/data.h"

/* ---- an allocator that counts, checks sizes and fails on request ---- */

typedef struct {
    long n;       /* allocations so far */
    long fail_at; /* 1-based allocation to fail, and every later one; 0: none */
    long blocks;  /* held now */
    int bad_size; /* a free or realloc named another size than the block's */
} Hook;

#define HDR 16

static void *hook_alloc(void *user, void *ptr, size_t osize, size_t nsize)
{
    Hook *h = user;
    char *p = ptr ? (char *)ptr - HDR : NULL;
    if (p) {
        size_t old;
        memcpy(&old, p, sizeof old);
        if (old != osize) h->bad_size = 1;
    }
    if (nsize == 0) {
        if (p) h->blocks--;
        free(p);
        return NULL;
    }
    if (h->fail_at && ++h->n >= h->fail_at) return NULL;
    char *q = realloc(p, nsize + HDR);
    if (!q) return NULL;
    if (!p) h->blocks++;
    memcpy(q, &nsize, sizeof nsize);
    return q + HDR;
}

/* ---- temporary files ---- */

static char tmp_dir[256];

static void tmp_init(void)
{
#ifdef __wasi__ /* no mkdtemp; only the current directory is reachable */
    snprintf(tmp_dir, sizeof tmp_dir, "test_io.tmp.dir");
    mkdir(tmp_dir, 0700); /* may be left from a run that crashed */
#else
    const char *t = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/kiln-test-io-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmp_dir)) printf("FAIL cannot make a temporary directory %s\n", tmp_dir);
#endif
}

/* tmp(name): the path of a temporary file (one of 8 rotating buffers) */
static const char *tmp(const char *name)
{
    static char buf[8][320];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", tmp_dir, name);
    return p;
}

static const char *const tmp_names[] = {"a.st", "ref.st", "odd.st", "bad.st", "fuzz.st", "weights.safetensors",
                                        "saved.st", "x.idx", "x.idx.gz", "t10k-images-idx3-ubyte",
                                        "t10k-labels-idx1-ubyte.gz", "t10k-labels-idx1-ubyte", "empty.st",
                                        "unreadable.st", "ro/x.st"};

static void tmp_cleanup(void)
{
    for (size_t i = 0; i < sizeof tmp_names / sizeof *tmp_names; i++) remove(tmp(tmp_names[i]));
    rmdir(tmp("sub"));
    rmdir(tmp("ro"));
    rmdir(tmp_dir);
}

static int write_file(const char *path, const void *data, size_t n)
{
    remove(path); /* a new file: rewriting one in place can be slow (ext4 flushes it at close) */
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(data, 1, n, f) == n;
    if (f) ok = fclose(f) == 0 && ok;
    return ok;
}

/* the whole file, malloc'd (NULL if unreadable) */
static unsigned char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *b = NULL;
    *n = 0;
    if (!f) return NULL;
    size_t cap = 0;
    for (;;) {
        if (*n == cap) {
            unsigned char *nb = realloc(b, cap = cap * 2 + 4096);
            if (!nb) break;
            b = nb;
        }
        size_t got = fread(b + *n, 1, cap - *n, f);
        *n += got;
        if (!got) break;
    }
    fclose(f);
    return b;
}

/* ---- tensors with known values ---- */

#define SH(...) ((const int64_t[]){__VA_ARGS__})

/* value(k, i): element i of the k-th tensor, as gen_io.py computes it */
static double value(int k, int64_t i, kn_dtype dt)
{
    int r = (int)((i * 37 + k * 11) % 23);
    switch (dt) {
    case KN_F32: case KN_F64: case KN_F16: case KN_BF16: return (r - 11) / 4.0;
    case KN_I64: return (r - 11) * 100000000007.0;
    case KN_I32: return (r - 11) * 1000.0;
    case KN_BOOL: return r % 2;
    default: return r * 11.0;
    }
}

static kn_tensor *make(kn_ctx *ctx, int k, kn_dtype dt, int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = value(k, i, dt);
    kn_tensor *t = kn_to(ctx, kn_tensor_from(ctx, KN_F64, ndim, shape, v), dt);
    free(v);
    return t;
}

/* t holds value(k, i) at row-major position i */
static int holds(kn_ctx *ctx, kn_tensor *t, int k)
{
    int64_t n = kn_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    int ok = kn_read(ctx, kn_to(ctx, t, KN_F64), v, (size_t)n * sizeof *v) == KN_OK;
    for (int64_t i = 0; ok && i < n; i++) ok = v[i] == value(k, i, kn_dtype_of(t));
    free(v);
    return ok;
}

/* A snapshot of t's elements, to check that a failed call left them alone. */
typedef struct {
    unsigned char *b;
    size_t n;
} Snap;

static Snap snap(kn_ctx *ctx, kn_tensor *t)
{
    Snap s;
    s.n = (size_t)kn_numel(t) * kn_dtype_size(kn_dtype_of(t));
    s.b = malloc(s.n + 1);
    kn_read(ctx, t, s.b, s.n);
    return s;
}

static int unchanged(kn_ctx *ctx, kn_tensor *t, Snap s)
{
    unsigned char *b = malloc(s.n + 1);
    int ok = kn_read(ctx, t, b, s.n) == KN_OK && !memcmp(b, s.b, s.n);
    free(b);
    return ok;
}

/* ---- safetensors: round trips ---- */

static const kn_dtype all_dtypes[] = {KN_F32, KN_F64, KN_F16, KN_BF16, KN_I32, KN_I64, KN_BOOL, KN_U8};
#define NDT 8

static void test_roundtrip(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    const char *path = tmp("a.st");
    /* per dtype: contiguous (3, 4); a transposed (4, 3) view; a strided slice; 0-d; empty (0, 3) */
    kn_tensor *src[NDT * 5], *dst[NDT * 5];
    const char *names[NDT * 5];
    char nbuf[NDT * 5][32];
    for (int d = 0; d < NDT; d++) {
        kn_dtype dt = all_dtypes[d];
        kn_tensor **s = src + 5 * d, **o = dst + 5 * d;
        s[0] = make(ctx, 5 * d, dt, 2, SH(3, 4));
        s[1] = kn_transpose(ctx, make(ctx, 5 * d + 1, dt, 2, SH(3, 4)), 0, 1); /* (4, 3), not contiguous */
        s[2] = kn_slice(ctx, make(ctx, 5 * d + 2, dt, 2, SH(4, 6)), 1, 1, 6, 2); /* (4, 3), stride 2 */
        s[3] = make(ctx, 5 * d + 3, dt, 0, NULL);
        s[4] = make(ctx, 5 * d + 4, dt, 2, SH(0, 3));
        for (int j = 0; j < 5; j++) {
            snprintf(nbuf[5 * d + j], sizeof nbuf[0], "%s.%d", kn_dtype_name(dt), j);
            names[5 * d + j] = nbuf[5 * d + j];
        }
        o[0] = kn_zeros(ctx, dt, 2, SH(3, 4));
        o[1] = kn_transpose(ctx, kn_zeros(ctx, dt, 2, SH(3, 4)), 0, 1); /* a strided destination */
        o[2] = kn_slice(ctx, kn_zeros(ctx, dt, 2, SH(4, 7)), 1, 0, 6, 2);
        o[3] = kn_zeros(ctx, dt, 0, NULL);
        o[4] = kn_zeros(ctx, dt, 2, SH(0, 3));
    }
    CHECK(!kn_is_contiguous(src[1]) && !kn_is_contiguous(src[2]) && !kn_is_contiguous(dst[2]));
    CHECK_MSG(kn_save(ctx, path, names, src, NDT * 5) == KN_OK, "%s", kn_last_error(ctx));
    CHECK_MSG(kn_load(ctx, path, names, dst, NDT * 5) == KN_OK, "%s", kn_last_error(ctx));
    int same = 1;
    for (int i = 0; i < NDT * 5; i++) {
        Snap a = snap(ctx, src[i]), b = snap(ctx, dst[i]);
        if (kn_ndim(src[i]) != kn_ndim(dst[i]) || a.n != b.n || memcmp(a.b, b.b, a.n)) {
            same = 0;
            printf("    round trip differs: %s\n", names[i]);
        }
        free(a.b);
        free(b.b);
    }
    CHECK(same);
    CHECK(holds(ctx, dst[NDT * 5 - 2], 5 * (NDT - 1) + 3)); /* a 0-d one, by value */

    /* a subset, in another order, is fine; the rest of the file is ignored */
    kn_tensor *one = kn_zeros(ctx, KN_I64, 2, SH(3, 4));
    char i64[32];
    snprintf(i64, sizeof i64, "%s.0", kn_dtype_name(KN_I64));
    const char *n1[] = {i64};
    CHECK_MSG(kn_load(ctx, path, n1, &one, 1) == KN_OK && holds(ctx, one, 25), "%s", kn_last_error(ctx));
    /* n == 0: nothing asked, the file is still checked */
    CHECK(kn_load(ctx, path, NULL, NULL, 0) == KN_OK);
    kn_ctx_free(ctx);
}

/* The reference file: values, and kn_save reproducing it byte for byte. */
static const struct {
    const char *name;
    kn_dtype dt;
    int ndim;
    int64_t shape[2];
} ref[] = {
    {"fc1.weight", KN_F32, 2, {3, 4}}, {"fc1.bias", KN_F32, 1, {3}}, {"emb", KN_F64, 2, {2, 2}},
    {"half", KN_F16, 1, {5}},          {"bf", KN_BF16, 2, {2, 3}},   {"idx", KN_I64, 1, {4}},
    {"count", KN_I32, 2, {2, 2}},      {"mask", KN_BOOL, 1, {3}},    {"pixels", KN_U8, 2, {2, 3}},
    {"scalar", KN_F32, 0, {0}},        {"empty", KN_F32, 2, {0, 3}},
};
#define NREF ((int)(sizeof ref / sizeof ref[0]))

static void test_reference(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    const char *path = tmp("ref.st"), *out = tmp("saved.st");
    kn_tensor *dst[NREF], *src[NREF];
    const char *names[NREF];
    CHECK(write_file(path, io_ref_st, sizeof io_ref_st));
    for (int k = 0; k < NREF; k++) {
        names[k] = ref[k].name;
        dst[k] = kn_zeros(ctx, ref[k].dt, ref[k].ndim, ref[k].shape);
        src[k] = make(ctx, k, ref[k].dt, ref[k].ndim, ref[k].shape);
    }
    CHECK_MSG(kn_load(ctx, path, names, dst, NREF) == KN_OK, "%s", kn_last_error(ctx));
    int ok = 1;
    for (int k = 0; k < NREF; k++)
        if (!holds(ctx, dst[k], k)) {
            ok = 0;
            printf("    reference tensor '%s' has the wrong values\n", names[k]);
        }
    CHECK(ok);

    /* the same tensors, one of them as a strided view, saved: the same bytes */
    src[0] = kn_transpose(ctx, kn_contiguous(ctx, kn_transpose(ctx, src[0], 0, 1)), 0, 1);
    CHECK(!kn_is_contiguous(src[0]));
    CHECK_MSG(kn_save(ctx, out, names, src, NREF) == KN_OK, "%s", kn_last_error(ctx));
    size_t n;
    unsigned char *b = read_file(out, &n);
    CHECK_MSG(b && n == sizeof io_ref_st && !memcmp(b, io_ref_st, n), "kn_save's file (%zu bytes) differs from "
              "the reference (%zu bytes)", n, sizeof io_ref_st);
    free(b);

    /* no tensors: the safetensors library's own empty file, "{}" padded to 8 */
    static const unsigned char empty[16] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    CHECK(kn_save(ctx, tmp("empty.st"), NULL, NULL, 0) == KN_OK);
    b = read_file(tmp("empty.st"), &n);
    CHECK(b && n == 16 && !memcmp(b, empty, 16));
    free(b);
    CHECK(kn_load(ctx, tmp("empty.st"), NULL, NULL, 0) == KN_OK);
    kn_ctx_free(ctx);
}

/* A valid file no writer of ours makes: indented JSON, escapes, metadata, a
 * misaligned F32 tensor, a dtype kiln lacks, a non-ASCII name. */
static void test_odd_file(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    const char *path = tmp("odd.st");
    CHECK(write_file(path, io_odd_st, sizeof io_odd_st));
    kn_tensor *ts[2] = {kn_zeros(ctx, KN_F32, 1, SH(2)), kn_zeros(ctx, KN_U8, 1, SH(3))};
    const char *names[2] = {"a.f32", "b.u8"};
    CHECK_MSG(kn_load(ctx, path, names, ts, 2) == KN_OK, "%s", kn_last_error(ctx));
    float f[2] = {0, 0};
    uint8_t u[3] = {0, 0, 0};
    kn_read(ctx, ts[0], f, sizeof f);
    kn_read(ctx, ts[1], u, sizeof u);
    CHECK(f[0] == 1.5f && f[1] == -2.25f && u[0] == 1 && u[1] == 2 && u[2] == 250);

    kn_tensor *i16 = kn_zeros(ctx, KN_I32, 1, SH(2));
    const char *n16[] = {"skipped.i16"};
    CHECK(kn_load(ctx, path, n16, &i16, 1) == KN_EIO);
    CHECK_ERR(ctx, "tensor 'skipped.i16' has dtype I16, expected I32");
    kn_ctx_free(ctx);
}

/* ---- safetensors: errors ---- */

static void test_arg_errors(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    kn_tensor *t = kn_zeros(ctx, KN_F32, 1, SH(2)), *ts[2] = {t, t};
    const char *path = tmp("a.st");
    char long_name[300];
    memset(long_name, 'x', 256);
    long_name[256] = 0;
    const char *bad[] = {"", "a\"b", "a\\b", "tab\there", "caf\xc3\xa9", long_name, "__metadata__"};
    CHECK(kn_save(NULL, path, (const char *[]){"a"}, &t, 1) == KN_EINVAL);
    CHECK(kn_load(NULL, path, (const char *[]){"a"}, &t, 1) == KN_EINVAL);
    for (int save = 0; save < 2; save++) {
        kn_status (*f)(kn_ctx *, const char *, const char *const *, kn_tensor *const *, int) = save ? kn_save : kn_load;
        CHECK(f(ctx, NULL, (const char *[]){"a"}, &t, 1) == KN_EINVAL);
        CHECK_ERR(ctx, "operand 'path' is NULL");
        CHECK(f(ctx, path, (const char *[]){"a"}, &t, -1) == KN_EINVAL);
        CHECK_ERR(ctx, "negative");
        CHECK(f(ctx, path, NULL, &t, 1) == KN_EINVAL);
        CHECK_ERR(ctx, "operand 'names' is NULL");
        CHECK(f(ctx, path, (const char *[]){"a"}, NULL, 1) == KN_EINVAL);
        CHECK_ERR(ctx, "operand 'ts' is NULL");
        CHECK(f(ctx, path, (const char *[]){NULL}, &t, 1) == KN_EINVAL);
        CHECK_ERR(ctx, "names[0] is NULL");
        CHECK(f(ctx, path, (const char *[]){"a"}, (kn_tensor *[]){NULL}, 1) == KN_EINVAL);
        CHECK_ERR(ctx, "ts[0] ('a') is NULL");
        int all = 1;
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
            all &= f(ctx, path, &bad[i], &t, 1) == KN_EINVAL && strstr(kn_last_error(ctx), "is not a tensor name");
            kn_clear_error(ctx);
        }
        CHECK(all);
        CHECK(f(ctx, path, (const char *[]){"b", "b"}, ts, 2) == KN_EINVAL);
        CHECK_ERR(ctx, save ? "kn_save: name 'b' is given twice" : "kn_load: name 'b' is given twice");
    }
    long_name[255] = 0; /* 255 bytes is the longest name */
    CHECK(kn_save(ctx, path, (const char *[]){long_name}, &t, 1) == KN_OK);
    CHECK(kn_load(ctx, path, (const char *[]){long_name}, &t, 1) == KN_OK);
    CHECK(kn_load(ctx, tmp("no-such-file.st"), (const char *[]){"a"}, &t, 1) == KN_EIO);
    CHECK_ERR(ctx, "no-such-file.st: cannot open");
    kn_ctx_free(ctx);
}

/* Each wrong path names the file and what is wrong with it, for load and save alike: a directory
 * (where a file was expected, the target of a save too), a missing file, a missing directory, a file
 * where a directory was expected, an empty path, and (not as root, who may read and write anything, nor
 * under WASI, which has no permission bits) a file that cannot be read and a directory that cannot be
 * written. */
static void test_path_errors(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    kn_tensor *t = kn_zeros(ctx, KN_F32, 1, SH(2));
    const char *nm[] = {"a"};
    char sub[320], file[320], want[800];
    snprintf(sub, sizeof sub, "%s", tmp("sub"));
    snprintf(file, sizeof file, "%s", tmp("a.st"));
    CHECK(mkdir(sub, 0700) == 0 && kn_save(ctx, file, nm, &t, 1) == KN_OK);
    static const struct {
        int save;
        const char *path, *why; /* path: "" the directory sub, "=" the file a.st, else a name in the temporary dir */
    } cases[] = {
        {0, "", "is a directory, not a file"},
        {1, "", "is a directory, not a file"},
        {0, "no-such.st", "cannot open: No such file or directory"},
        {0, "no-such-dir/x.st", "cannot open: No such file or directory"},
        {1, "no-such-dir/x.st", "cannot create: its directory does not exist"},
        {0, "a.st/x.st", "cannot open: Not a directory"},
        {1, "a.st/x.st", "cannot create: Not a directory"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const char *path = !cases[c].path[0] ? sub : tmp(cases[c].path);
        kn_status s = cases[c].save ? kn_save(ctx, path, nm, &t, 1) : kn_load(ctx, path, nm, &t, 1);
        snprintf(want, sizeof want, "%s: %s: %s", cases[c].save ? "kn_save" : "kn_load", path, cases[c].why);
        CHECK_MSG(s == KN_EIO && !strcmp(kn_last_error(ctx), want), "case %zu: expected KN_EIO and \"%s\", got %d \"%s\"",
                  c, want, (int)s, kn_last_error(ctx));
        kn_clear_error(ctx);
    }
    CHECK(kn_save(ctx, "", nm, &t, 1) == KN_EINVAL);
    CHECK_ERR(ctx, "kn_save: operand 'path' is empty");
    CHECK(kn_load(ctx, "", nm, &t, 1) == KN_EINVAL);
    CHECK_ERR(ctx, "kn_load: operand 'path' is empty");
#ifndef __wasi__
    if (geteuid() == 0) {
        printf("SKIP io: running as root, who may read any file and write any directory: the checks of an "
               "unreadable file and a read-only directory did not run\n");
    } else {
        const char *unreadable = tmp("unreadable.st"), *ro = tmp("ro"), *in_ro = tmp("ro/x.st");
        CHECK(kn_save(ctx, unreadable, nm, &t, 1) == KN_OK && chmod(unreadable, 0) == 0);
        CHECK(kn_load(ctx, unreadable, nm, &t, 1) == KN_EIO);
        snprintf(want, sizeof want, "kn_load: %s: cannot open: Permission denied", unreadable);
        CHECK_ERR(ctx, want);
        CHECK(mkdir(ro, 0500) == 0 && kn_save(ctx, in_ro, nm, &t, 1) == KN_EIO);
        snprintf(want, sizeof want, "kn_save: %s: cannot create: Permission denied", in_ro);
        CHECK_ERR(ctx, want);
    }
#endif
    kn_ctx_free(ctx);
}

/* A file of an 8-byte length, header and data. */
static void write_st(const char *path, const char *header, size_t hlen, const unsigned char *data, size_t ndata)
{
    unsigned char *b = malloc(8 + hlen + ndata);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(b + 8, header, hlen);
    if (ndata) memcpy(b + 8 + hlen, data, ndata);
    write_file(path, b, 8 + hlen + ndata);
    free(b);
}

#define OK_T "\"ok\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"
#define W_T(dt, shape, offs) "\"w\":{\"dtype\":\"" dt "\",\"shape\":[" shape "],\"data_offsets\":[" offs "]}"

/* header, data length, the wanted message (NULL: loads fine); w's
 * destination is F32 (2, 2) unless bool_w; data: 1.0f, 2.0f, then fill */
static const struct {
    const char *header, *want;
    size_t ndata;
    int bool_w, fill;
} bad_files[] = {
    {"{" OK_T "," W_T("F32", "2,2", "8,24") "}", NULL, 24, 0, 0},
    {"\n {" OK_T " , " W_T("F32", "2,2", "8,24") "}\t\r\n  ", NULL, 24, 0, 0},
    {"{" OK_T "," W_T("F32", "2,3", "8,32") "}", "tensor 'w' has shape (2, 3), expected (2, 2)", 32, 0, 0},
    {"{" OK_T "," W_T("F32", "4", "8,24") "}", "tensor 'w' has shape (4), expected (2, 2)", 24, 0, 0},
    {"{" OK_T "," W_T("F64", "2,2", "8,40") "}", "tensor 'w' has dtype F64, expected F32", 40, 0, 0},
    {"{" OK_T "," W_T("I16", "2,2", "8,16") "}", "tensor 'w' has dtype I16, expected F32", 16, 0, 0},
    {"{" OK_T "," W_T("F17", "2,2", "8,24") "}", "tensor 'w': unknown dtype \"F17\"", 24, 0, 0},
    {"{" OK_T "," W_T("f32", "2,2", "8,24") "}", "unknown dtype \"f32\"", 24, 0, 0},
    {"{" OK_T "}", "no tensor 'w' in the file", 8, 0, 0},
    {"{" OK_T "," W_T("F32", "2,2", "8,24") "}", "data_offsets [8, 24] are outside the 20-byte data buffer", 20, 0, 0},
    {"{" OK_T "," W_T("F32", "2,2", "24,8") "}", "data_offsets [24, 8] are outside", 24, 0, 0},
    {"{" OK_T "," W_T("F32", "2,2", "8,28") "}", "data_offsets [8, 28] hold 20 bytes, but F32 (2, 2) needs 16",
     28, 0, 0},
    {"{" OK_T "," W_T("F32", "2,2", "4,20") "}", "overlap those of tensor 'ok'", 20, 0, 0},
    {"{" OK_T "," W_T("F32", "2,2", "12,28") "}", "data bytes [8, 12) belong to no tensor", 28, 0, 0},
    {"{" OK_T "," W_T("F32", "2,2", "8,24") "}", "data bytes [24, 30) belong to no tensor", 30, 0, 0},
    {"{" OK_T ",\"ok\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", "tensor name 'ok' appears twice",
     16, 0, 0},
    {"{" OK_T ",\"w\":{\"dtype\":\"F32\",\"shape\":[2,2]}}", "tensor 'w' has no \"data_offsets\"", 24, 0, 0},
    {"{" OK_T ",\"w\":{\"shape\":[2,2],\"data_offsets\":[8,24]}}", "tensor 'w' has no \"dtype\"", 24, 0, 0},
    {"{" OK_T ",\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[8,24]}}",
     "tensor 'w': key \"dtype\" given twice", 24, 0, 0},
    {"{" OK_T ",\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"strides\":[2,1],\"data_offsets\":[8,24]}}",
     "tensor 'w': unknown key \"strides\"", 24, 0, 0},
    {"{" OK_T "," W_T("F32", "2,2", "8,24,24") "}", "data_offsets has 3 numbers, expected 2", 24, 0, 0},
    {"{" OK_T "," W_T("F32", "-2,2", "8,24") "}", "negative number", 24, 0, 0},
    {"{" OK_T "," W_T("F32", "2.0,2", "8,24") "}", "fraction or exponent", 24, 0, 0},
    {"{" OK_T "," W_T("F32", "2e0,2", "8,24") "}", "fraction or exponent", 24, 0, 0},
    {"{" OK_T "," W_T("F32", "02,2", "8,24") "}", "leading zero", 24, 0, 0},
    {"{" OK_T "," W_T("F32", "99999999999999999999,2", "8,24") "}", "number too large", 24, 0, 0},
    {"{" OK_T "," W_T("F32", "2,,2", "8,24") "}", "expected a non-negative integer", 24, 0, 0},
    {"{" OK_T "," W_T("F32", "4294967296,4294967296,4294967296", "8,24") "}", "shape (4294967296, 4294967296, "
     "4294967296) overflows", 24, 0, 0},
    {"{" OK_T "," W_T("F32", "1,1,1,1,1,1,1,2,2", "8,24") "}", "tensor 'w' has 9 dims, expected shape (2, 2)",
     24, 0, 0},
    {"{" OK_T "," W_T("BOOL", "2,2", "8,12") "}", "tensor 'w': BOOL element 0 is 2, not 0 or 1", 12, 1, 2},
    {"{\"__metadata__\":{\"a\":1}," OK_T "," W_T("F32", "2,2", "8,24") "}", "__metadata__ values must be strings",
     24, 0, 0},
    {"{\"__metadata__\":{},\"__metadata__\":{}," OK_T "}", "__metadata__ given twice", 8, 0, 0},
    {"{\"__metadata__\":\"pt\"," OK_T "}", "__metadata__ is not an object", 8, 0, 0},
    {"{" OK_T ",\"w\":[1]}", "tensor 'w' is not an object", 8, 0, 0},
    {"{\"ok\" {}}", "expected ':' after a key", 8, 0, 0},
    {"{" OK_T " " W_T("F32", "2,2", "8,24") "}", "expected ',' or '}'", 24, 0, 0},
    {"{" OK_T ",}", "expected a string", 8, 0, 0},
    {"{" OK_T ",\"w", "header JSON ends early", 8, 0, 0},
    {"{" OK_T ",\"w\x01\":{}}", "control character 0x01 in a string", 8, 0, 0},
    {"{" OK_T ",\"w\\x\":{}}", "expected an escape", 8, 0, 0},
    {"{" OK_T ",\"w\\u12G4\":{}}", "4 hex digits", 8, 0, 0},
    {"{" OK_T ",\"w\\udc00\":{}}", "unpaired surrogate \\uDC00", 8, 0, 0},
    {"{" OK_T ",\"w\\ud800x\":{}}", "unpaired surrogate \\uD800", 8, 0, 0},
    {"{" OK_T ",\"w\xff\":{}}", "invalid UTF-8 byte 0xFF", 8, 0, 0},
    {"{" OK_T ",\"w\xc0\x80\":{}}", "invalid UTF-8 byte 0xC0", 8, 0, 0},
    {"{" OK_T ",\"w\xed\xa0\x80\":{}}", "invalid UTF-8 byte 0xED", 8, 0, 0},
    {"[]", "header JSON, byte 0: expected '{' (a JSON object)", 0, 0, 0},
    {"", "header JSON ends early (0 bytes): expected '{'", 0, 0, 0},
    {"{" OK_T "} x", "expected the end of the header", 8, 0, 0},
    {"{" OK_T ",\"w\\u00e9\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[8,24]}}", "no tensor 'w'", 24, 0, 0},
};

static void test_bad_files(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    const char *path = tmp("bad.st");
    kn_tensor *ok = kn_full(ctx, KN_F32, 1, SH(2), 7), *wf = kn_full(ctx, KN_F32, 2, SH(2, 2), 7);
    kn_tensor *wb = kn_full(ctx, KN_BOOL, 2, SH(2, 2), 1);
    Snap s_ok = snap(ctx, ok), s_wf = snap(ctx, wf), s_wb = snap(ctx, wb);
    const char *names[2] = {"ok", "w"};
    int n = (int)(sizeof bad_files / sizeof *bad_files);
    for (int c = 0; c < n; c++) {
        unsigned char data[64];
        float one_two[2] = {1, 2};
        memset(data, bad_files[c].fill, sizeof data);
        memcpy(data, one_two, sizeof one_two);
        write_st(path, bad_files[c].header, strlen(bad_files[c].header), data, bad_files[c].ndata);
        kn_tensor *ts[2] = {ok, bad_files[c].bool_w ? wb : wf};
        kn_status s = kn_load(ctx, path, names, ts, 2);
        if (!bad_files[c].want) {
            CHECK_MSG(s == KN_OK, "case %d: %s", c, kn_last_error(ctx));
            float v[2];
            kn_read(ctx, ok, v, sizeof v);
            CHECK(v[0] == 1 && v[1] == 2);
            tensor_assign(ctx, ok, kn_full(ctx, KN_F32, 1, SH(2), 7)); /* the sentinels back */
            tensor_assign(ctx, wf, kn_full(ctx, KN_F32, 2, SH(2, 2), 7));
            continue;
        }
        const char *m = kn_last_error(ctx);
        CHECK_MSG(s == KN_EIO && !strncmp(m, "kn_load: ", 9) && strstr(m, path) && strstr(m, bad_files[c].want),
                  "case %d: expected KN_EIO and \"%s\", got %d \"%s\"", c, bad_files[c].want, (int)s, m);
        CHECK_MSG(unchanged(ctx, ok, s_ok) && unchanged(ctx, wf, s_wf) && unchanged(ctx, wb, s_wb),
                  "case %d: a destination changed", c);
        kn_clear_error(ctx);
    }

    /* the example of the contract, message for message */
    const char *wpath = tmp("weights.safetensors");
    static const char h[] = "{\"fc1.weight\":{\"dtype\":\"F32\",\"shape\":[10,5],\"data_offsets\":[0,200]}}";
    unsigned char zeros[200] = {0};
    write_st(wpath, h, strlen(h), zeros, 200);
    kn_tensor *w = kn_zeros(ctx, KN_F32, 2, SH(10, 784));
    const char *wn[] = {"fc1.weight"};
    char want[512];
    snprintf(want, sizeof want, "kn_load: %s: tensor 'fc1.weight' has shape (10, 5), expected (10, 784)", wpath);
    CHECK(kn_load(ctx, wpath, wn, &w, 1) == KN_EIO);
    CHECK_MSG(!strcmp(kn_last_error(ctx), want), "got \"%s\"", kn_last_error(ctx));
    kn_clear_error(ctx);

    /* padding that is not JSON whitespace */
    static const char nul[] = "{" OK_T "}\0\0\0";
    write_st(path, nul, sizeof nul - 1, (const unsigned char *)"\0\0\x80?\0\0\0@", 8);
    CHECK(kn_load(ctx, path, names, (kn_tensor *[]){ok, wf}, 2) == KN_EIO);
    CHECK_ERR(ctx, "byte 55: expected the end of the header after its object");

    /* the header length itself */
    unsigned char shortf[5] = {1, 0, 0, 0, 0}, huge[16] = {8, 0, 0, 0, 0, 0, 0, 0x80, '{', '}'};
    write_file(path, shortf, sizeof shortf);
    CHECK(kn_load(ctx, path, names, (kn_tensor *[]){ok, wf}, 2) == KN_EIO);
    CHECK_ERR(ctx, "5 bytes is too short for a safetensors file");
    write_file(path, huge, sizeof huge);
    CHECK(kn_load(ctx, path, names, (kn_tensor *[]){ok, wf}, 2) == KN_EIO);
    CHECK_ERR(ctx, "header length 9223372036854775816 exceeds the 8 bytes after it");
    huge[7] = 0;
    huge[0] = 9;
    write_file(path, huge, sizeof huge);
    CHECK(kn_load(ctx, path, names, (kn_tensor *[]){ok, wf}, 2) == KN_EIO);
    CHECK_ERR(ctx, "header length 9 exceeds the 8 bytes after it");

    /* destinations: an expanded view aliases its elements; a symbolic one has no values */
    write_st(path, bad_files[0].header, strlen(bad_files[0].header), (unsigned char[24]){0}, 24);
    kn_tensor *ex = kn_expand(ctx, kn_zeros(ctx, KN_F32, 2, SH(1, 2)), 2, SH(2, 2));
    CHECK(kn_load(ctx, path, names, (kn_tensor *[]){ok, ex}, 2) == KN_EIO);
    CHECK_ERR(ctx, "destination 'w' is an expanded view (dim 0 has stride 0)");
    CHECK(unchanged(ctx, ok, s_ok));
    free(s_ok.b);
    free(s_wf.b);
    free(s_wb.b);
    kn_ctx_free(ctx);
}

/* ---- safetensors: truncation, byte flips, atomic saves, failed allocations ---- */

/* One load of file (n bytes) into dst[0..nt): 1 if it loaded, 0 if it failed
 * cleanly (KN_EIO naming the file, no destination changed), -1 otherwise.
 * A load that succeeds puts the sentinels (sn) back. */
static int load_cleanly(kn_ctx *ctx, const unsigned char *file, size_t n, const char *const *names, kn_tensor **dst,
                        const Snap *sn, int nt)
{
    const char *path = tmp("fuzz.st");
    write_file(path, file, n);
    kn_status s = kn_load(ctx, path, names, dst, nt);
    int r = s == KN_OK ? 1 : s == KN_EIO && strstr(kn_last_error(ctx), path) ? 0 : -1;
    for (int i = 0; i < nt; i++) {
        if (r != 1 && !unchanged(ctx, dst[i], sn[i])) r = -1;
        if (r == 1) { /* the sentinels back */
            kn_tensor *v = kn_tensor_from(ctx, kn_dtype_of(dst[i]), kn_ndim(dst[i]), kn_shape(dst[i]), sn[i].b);
            tensor_assign(ctx, dst[i], v);
            kn_free(ctx, v);
        }
    }
    kn_clear_error(ctx);
    return r;
}

/* Every truncation of file fails cleanly; every byte flipped, or replaced by
 * a character that matters to JSON, and 2000 random multi-byte mutations
 * either load or fail cleanly. */
static void fuzz_file(const char *what, const unsigned char *file, size_t n, const char *const *names,
                      kn_tensor **dst, int nt, kn_ctx *ctx)
{
    Snap sn[NREF];
    for (int i = 0; i < nt; i++) sn[i] = snap(ctx, dst[i]);
    int bad = 0, loads = 0, errors = 0;
    for (size_t len = 0; len < n; len++) bad += load_cleanly(ctx, file, len, names, dst, sn, nt) != 0;
    CHECK_MSG(bad == 0, "%s: %d of %zu truncations did not fail cleanly", what, bad, n);

    static const unsigned char subst[] = {'{', '}', '[', ']', '"', ',', ':', '\\', '0', '9', '-', ' ', 'e', 'u', 0};
    static const unsigned char flips[] = {0x01, 0x20, 0x80, 0xff};
    unsigned char *mut = malloc(n);
    bad = 0;
    for (size_t p = 0; p < n; p++)
        for (int k = 0; k < (int)(sizeof flips + sizeof subst); k++) {
            memcpy(mut, file, n);
            mut[p] = k < (int)sizeof flips ? (unsigned char)(file[p] ^ flips[k]) : subst[k - sizeof flips];
            if (mut[p] == file[p]) continue;
            int r = load_cleanly(ctx, mut, n, names, dst, sn, nt);
            bad += r < 0, loads += r == 1, errors += r == 0;
        }
    uint32_t seed = 12345;
    for (int t = 0; t < 2000; t++) {
        memcpy(mut, file, n);
        for (int j = 0, m = 1 + t % 4; j < m; j++) {
            seed = seed * 1664525u + 1013904223u;
            mut[(seed >> 8) % n] = (unsigned char)(seed >> 24);
        }
        int r = load_cleanly(ctx, mut, n, names, dst, sn, nt);
        bad += r < 0, loads += r == 1, errors += r == 0;
    }
    CHECK_MSG(bad == 0, "%s: %d mutations neither loaded nor failed cleanly", what, bad);
    CHECK(errors > 0 && loads > 0); /* changes to the data load; most to the header do not */
    free(mut);
    for (int i = 0; i < nt; i++) free(sn[i].b);
}

static void test_fuzz(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    const char *in = tmp("a.st");
    kn_tensor *src[6] = {make(ctx, 0, KN_F32, 2, SH(2, 3)), make(ctx, 1, KN_I64, 1, SH(3)),
                         make(ctx, 2, KN_BOOL, 1, SH(5)), make(ctx, 3, KN_BF16, 0, NULL),
                         make(ctx, 4, KN_U8, 2, SH(0, 4)), make(ctx, 5, KN_F64, 1, SH(1))};
    const char *names[6] = {"layer.0.weight", "steps", "mask", "scale", "none", "x~"};
    kn_tensor *dst[NREF];
    for (int i = 0; i < 6; i++) dst[i] = kn_full(ctx, kn_dtype_of(src[i]), kn_ndim(src[i]), kn_shape(src[i]), 1);
    CHECK(kn_save(ctx, in, names, src, 6) == KN_OK);
    size_t n;
    unsigned char *file = read_file(in, &n);
    if (file) fuzz_file("saved", file, n, names, dst, 6, ctx);
    free(file);

    const char *rnames[NREF];
    for (int k = 0; k < NREF; k++) {
        rnames[k] = ref[k].name;
        dst[k] = kn_full(ctx, ref[k].dt, ref[k].ndim, ref[k].shape, 1);
    }
    fuzz_file("reference", io_ref_st, sizeof io_ref_st, rnames, dst, NREF, ctx);
    const char *onames[2] = {"a.f32", "b.u8"};
    dst[0] = kn_full(ctx, KN_F32, 1, SH(2), 1);
    dst[1] = kn_full(ctx, KN_U8, 1, SH(3), 1);
    fuzz_file("odd", io_odd_st, sizeof io_odd_st, onames, dst, 2, ctx);
    kn_ctx_free(ctx);
}

static void test_atomic_save(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    const char *path = tmp("saved.st");
    kn_tensor *a = make(ctx, 1, KN_F32, 1, SH(4)), *b = make(ctx, 2, KN_F32, 1, SH(4));
    kn_tensor *d = kn_zeros(ctx, KN_F32, 1, SH(4));
    const char *nm[] = {"t"};
    CHECK(kn_save(ctx, path, nm, &a, 1) == KN_OK);
    CHECK(kn_save(ctx, path, nm, &b, 1) == KN_OK); /* over an existing file */
    CHECK(kn_load(ctx, path, nm, &d, 1) == KN_OK && holds(ctx, d, 2));
    size_t n0, n1;
    unsigned char *before = read_file(path, &n0);

    CHECK(kn_save(ctx, path, (const char *[]){"bad\"name"}, &a, 1) == KN_EINVAL); /* fails before writing */
    kn_clear_error(ctx);
    char missing[400];
    snprintf(missing, sizeof missing, "%s/no-such-dir/x.st", tmp_dir);
    CHECK(kn_save(ctx, missing, nm, &a, 1) == KN_EIO);
    CHECK_ERR(ctx, "no-such-dir/x.st");
    CHECK(read_file(missing, &n1) == NULL);

    /* out of memory at every allocation a save makes: the old file stays */
    Hook h = {0, 0, 0, 0};
    kn_ctx_opts o = {hook_alloc, &h, 0};
    kn_ctx *c2 = kn_ctx_new(&o);
    kn_tensor *t = kn_transpose(c2, make(c2, 3, KN_F32, 2, SH(2, 3)), 0, 1);
    int ok = 0, bad = 0;
    for (long at = 1; at < 100 && !ok; at++) {
        h.n = 0;
        h.fail_at = at;
        kn_status s = kn_save(c2, path, nm, &t, 1);
        h.fail_at = 0;
        ok = s == KN_OK;
        unsigned char *now = read_file(path, &n1);
        if (!ok) bad += s != KN_ENOMEM || n1 != n0 || memcmp(now, before, n0);
        free(now);
        kn_clear_error(c2);
    }
    CHECK_MSG(ok && bad == 0, "saves under failing allocations: %d bad", bad);
    kn_ctx_free(c2);
    CHECK(h.blocks == 0 && !h.bad_size);
    free(before);
    kn_ctx_free(ctx);
}

/* kn_load with allocation N failing, for every N: KN_ENOMEM, nothing changed, no leak. */
static void test_load_alloc_failures(void)
{
    Hook h = {0, 0, 0, 0};
    kn_ctx_opts o = {hook_alloc, &h, 0};
    kn_ctx *ctx = kn_ctx_new(&o);
    const char *path = tmp("odd.st");
    write_file(path, io_odd_st, sizeof io_odd_st); /* misaligned: the aligned copy is allocated too */
    kn_tensor *ts[2] = {kn_transpose(ctx, kn_full(ctx, KN_F32, 2, SH(1, 2), 3), 0, 1),
                        kn_full(ctx, KN_U8, 1, SH(3), 3)};
    ts[0] = kn_reshape(ctx, ts[0], 1, SH(2));
    Snap s0 = snap(ctx, ts[0]), s1 = snap(ctx, ts[1]);
    const char *names[2] = {"a.f32", "b.u8"};
    int ok = 0, bad = 0, leaks = 0;
    long at;
    for (at = 1; at < 200 && !ok; at++) {
        long blocks = h.blocks;
        h.n = 0;
        h.fail_at = at;
        kn_status s = kn_load(ctx, path, names, ts, 2);
        h.fail_at = 0;
        ok = s == KN_OK;
        if (!ok) bad += s != KN_ENOMEM || !unchanged(ctx, ts[0], s0) || !unchanged(ctx, ts[1], s1);
        leaks += h.blocks != blocks;
        kn_clear_error(ctx);
    }
    CHECK_MSG(ok && at > 3 && bad == 0 && leaks == 0, "loads under failing allocations: %d bad, %d leaked", bad, leaks);
    free(s0.b);
    free(s1.b);
    kn_ctx_free(ctx);
    CHECK(h.blocks == 0 && !h.bad_size);
}

#ifdef KN_TEST_DATA /* the dataset reader: native builds only (zlib) */

/* ---- gzip ---- */

static uint32_t crc32(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* gzip of p in stored blocks, written here, independent of gz.c (malloc'd) */
static unsigned char *gz_store(const unsigned char *p, size_t n, size_t *out)
{
    size_t blocks = n / 65535 + 1;
    unsigned char *g = malloc(18 + n + 5 * blocks), *q = g;
    static const unsigned char head[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255};
    memcpy(q, head, 10);
    q += 10;
    for (size_t b = 0; b < blocks; b++) {
        size_t len = n - b * 65535 < 65535 ? n - b * 65535 : 65535;
        *q++ = b == blocks - 1;
        *q++ = (unsigned char)len, *q++ = (unsigned char)(len >> 8);
        *q++ = (unsigned char)~len, *q++ = (unsigned char)(~len >> 8);
        memcpy(q, p + b * 65535, len);
        q += len;
    }
    put32(q, crc32(p, n));
    put32(q + 4, (uint32_t)n);
    *out = (size_t)(q + 8 - g);
    return g;
}

/* A one-member gzip around raw deflate bytes, with the trailer of plain. */
static size_t gz_wrap(unsigned char *g, const unsigned char *deflate, size_t nd, const char *plain)
{
    static const unsigned char head[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255};
    memcpy(g, head, 10);
    memcpy(g + 10, deflate, nd);
    put32(g + 10 + nd, crc32((const unsigned char *)plain, strlen(plain)));
    put32(g + 14 + nd, (uint32_t)strlen(plain));
    return 18 + nd;
}

/* status of inflating g; on success, whether the output is plain */
static int inflate_is(kn_ctx *ctx, const unsigned char *g, size_t n, const unsigned char *plain, size_t np,
                      char *why)
{
    uint8_t *out;
    size_t on;
    int s = gz_inflate(ctx, g, n, &out, &on, why);
    if (s == 0) {
        if (on != np || (np && memcmp(out, plain, np))) s = -1;
        kn_dealloc(ctx, out, on);
    } else if (out || on) s = -2; /* an error must leave nothing */
    return s;
}

static void test_gzip(void)
{
    Hook h = {0, 0, 0, 0};
    kn_ctx_opts o = {hook_alloc, &h, 0};
    kn_ctx *ctx = kn_ctx_new(&o);
    char why[128];
    int n = (int)(sizeof io_gz / sizeof *io_gz);
    for (int i = 0; i < n; i++) {
        int s = inflate_is(ctx, io_gz[i].gz, io_gz[i].ngz, io_gz[i].plain, io_gz[i].nplain, why);
        CHECK_MSG(s == 0, "%s: %d %s", io_gz[i].name, s, why);
    }
    uint8_t *out = (uint8_t *)"x";
    size_t on = 1;
    CHECK(gz_inflate(ctx, io_gz[6].gz, io_gz[6].ngz, &out, &on, why) == 0 && out == NULL && on == 0); /* empty */

    /* corruptions of the header, the blocks and the trailer */
    const IoGz *g = &io_gz[0]; /* stored */
    unsigned char buf[8192];
    struct { size_t at; unsigned char v; const char *want; } edits[] = {
        {0, 0x1e, "not gzip: the input starts 1e 8b"},
        {2, 7, "corrupt: unknown compression method"}, /* zlib's messages */
        {3, 0x20, "corrupt: unknown header flags set"},
        {10, 0x07, "corrupt: invalid block type"},
        {13, 0x00, "corrupt: invalid stored block lengths"},
        {g->ngz - 8, 0, "corrupt: incorrect data check"},
        {g->ngz - 4, 0, "corrupt: incorrect length check"},
    };
    for (size_t e = 0; e < sizeof edits / sizeof *edits; e++) {
        memcpy(buf, g->gz, g->ngz);
        buf[edits[e].at] = edits[e].v == buf[edits[e].at] ? (unsigned char)(edits[e].v + 1) : edits[e].v;
        CHECK(inflate_is(ctx, buf, g->ngz, g->plain, g->nplain, why) == KN_EIO);
        CHECK_MSG(strstr(why, edits[e].want) != NULL, "expected \"%s\", got \"%s\"", edits[e].want, why);
    }
    memcpy(buf, g->gz, g->ngz);
    memcpy(buf + g->ngz, "xy", 2);
    CHECK(inflate_is(ctx, buf, g->ngz + 2, g->plain, g->nplain, why) == KN_EIO &&
          strstr(why, "2 bytes after the member"));
    /* fixed Huffman, by hand: "a" then a copy of distance 2 (before the start), then "a", 3 copies of distance 1 */
    static const unsigned char far[] = {0x4b, 0x04, 0x42, 0x00};
    size_t nf = gz_wrap(buf, far, sizeof far, "a");
    CHECK(inflate_is(ctx, buf, nf, (const unsigned char *)"a", 1, why) == KN_EIO);
    CHECK_MSG(strstr(why, "corrupt: invalid distance too far back") != NULL, "got \"%s\"", why);
    static const unsigned char run[] = {0x4b, 0x04, 0x02, 0x00};
    nf = gz_wrap(buf, run, sizeof run, "aaaa");
    CHECK_MSG(inflate_is(ctx, buf, nf, (const unsigned char *)"aaaa", 4, why) == 0, "%s", why);
    CHECK(gz_inflate(NULL, g->gz, g->ngz, &out, &on, why) == KN_EINVAL);
    CHECK(gz_inflate(ctx, NULL, 5, &out, &on, why) == KN_EINVAL);
    CHECK(inflate_is(ctx, g->gz, 0, g->plain, 0, why) == KN_EIO && strstr(why, "empty input"));

    /* every truncation is an error (a two-member stream may end cleanly after its first member) */
    int bad = 0, flips_bad = 0;
    for (int i = 0; i < n; i++) {
        for (size_t len = 0; len < io_gz[i].ngz; len++) {
            int s = inflate_is(ctx, io_gz[i].gz, len, io_gz[i].plain, io_gz[i].nplain, why);
            uint8_t *o2;
            size_t n2;
            if (s == -1 && !strcmp(io_gz[i].name, "multi")) { /* only its first member, whole */
                s = gz_inflate(ctx, io_gz[i].gz, len, &o2, &n2, why);
                s = s == 0 && n2 < io_gz[i].nplain && !memcmp(o2, io_gz[i].plain, n2) ? KN_EIO : -1;
                kn_dealloc(ctx, o2, n2);
            }
            if (s != KN_EIO) {
                bad++;
                printf("    %s cut at %zu: status %d (%s)\n", io_gz[i].name, len, s, why);
            }
        }
        /* every byte flipped: an error, or the right text (header fields such as the time) */
        for (size_t p = 0; p < io_gz[i].ngz; p++)
            for (int k = 0; k < 3; k++) {
                memcpy(buf, io_gz[i].gz, io_gz[i].ngz);
                buf[p] ^= (unsigned char[]){0x01, 0x10, 0xff}[k];
                int s = inflate_is(ctx, buf, io_gz[i].ngz, io_gz[i].plain, io_gz[i].nplain, why);
                flips_bad += s != 0 && s != KN_EIO;
            }
    }
    CHECK_MSG(bad == 0, "%d truncations were not errors", bad);
    CHECK_MSG(flips_bad == 0, "%d byte flips gave wrong output or status", flips_bad);

    /* out of memory at every allocation: KN_ENOMEM, no leak */
    const IoGz *d = &io_gz[2];
    int ok = 0, oom_bad = 0;
    for (long at = 1; at < 100 && !ok; at++) {
        h.n = 0;
        h.fail_at = at;
        int s = inflate_is(ctx, d->gz, d->ngz, d->plain, d->nplain, why);
        h.fail_at = 0;
        ok = s == 0;
        oom_bad += !ok && s != KN_ENOMEM;
    }
    CHECK(ok && oom_bad == 0);
    kn_ctx_free(ctx);
    CHECK(h.blocks == 0 && !h.bad_size);
}

/* ---- IDX ---- */

/* An IDX header of type and dims, then n bytes of (7 i) % 256, into b; returns its length. */
static size_t idx_bytes(unsigned char *b, int type, int ndim, const uint32_t *dims, size_t n)
{
    b[0] = b[1] = 0;
    b[2] = (unsigned char)type;
    b[3] = (unsigned char)ndim;
    for (int d = 0; d < ndim; d++)
        for (int k = 0; k < 4; k++) b[4 + 4 * d + k] = (unsigned char)(dims[d] >> (24 - 8 * k));
    for (size_t i = 0; i < n; i++) b[4 + 4 * ndim + i] = (unsigned char)(7 * i);
    return 4 + 4 * (size_t)ndim + n;
}

static int is_234(const IdxArray *a)
{
    int ok = a->ndim == 3 && a->dims[0] == 2 && a->dims[1] == 3 && a->dims[2] == 4 && a->data;
    for (int i = 0; ok && i < 24; i++) ok = a->data[i] == (uint8_t)(7 * i);
    return ok;
}

static void test_idx(void)
{
    Hook h = {0, 0, 0, 0};
    kn_ctx_opts o = {hook_alloc, &h, 0};
    kn_ctx *ctx = kn_ctx_new(&o);
    const char *raw = tmp("x.idx"), *gz = tmp("x.idx.gz");
    unsigned char b[256];
    IdxArray a;
    size_t n = idx_bytes(b, 8, 3, (const uint32_t[]){2, 3, 4}, 24), ng;
    write_file(raw, b, n);
    CHECK(idx_read(ctx, raw, &a) == KN_OK && is_234(&a) && a.bytes >= 24);
    idx_free(ctx, &a);
    CHECK(a.data == NULL);
    unsigned char *g = gz_store(b, n, &ng);
    write_file(gz, g, ng);
    free(g);
    CHECK(idx_read(ctx, gz, &a) == KN_OK && is_234(&a));
    idx_free(ctx, &a);
    write_file(gz, io_idx_gz, sizeof io_idx_gz); /* compressed by Python's zlib */
    CHECK(idx_read(ctx, gz, &a) == KN_OK && is_234(&a));
    idx_free(ctx, &a);

    struct { int type, ndim; uint32_t dims[5]; size_t n, cut; const char *want; } bad[] = {
        {0x0d, 3, {2, 3, 4}, 96, 0, "IDX element type 0x0D is not supported (only u8, 0x08, is read)"},
        {8, 0, {0}, 0, 0, "IDX file with 0 dims"},
        {8, 5, {1, 1, 1, 1, 1}, 1, 0, "IDX file with 5 dims"},
        {8, 2, {3, 0}, 0, 0, "IDX dim 1 is 0"},
        {8, 3, {2, 3, 4}, 23, 0, "truncated: the dims need 24 bytes of data, the file has 23"},
        {8, 3, {2, 3, 4}, 25, 0, "trailing bytes: the dims need 24 bytes of data, the file has 25"},
        {8, 3, {2, 3, 4}, 24, 10, "truncated: 10 bytes, the IDX header needs 16"},
        {8, 4, {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, 0, 0, "IDX dims overflow"},
    };
    for (size_t c = 0; c < sizeof bad / sizeof *bad; c++) {
        n = idx_bytes(b, bad[c].type, bad[c].ndim, bad[c].dims, bad[c].n);
        write_file(raw, b, bad[c].cut ? bad[c].cut : n);
        memset(&a, 1, sizeof a);
        CHECK(idx_read(ctx, raw, &a) == KN_EIO && a.data == NULL && a.ndim == 0);
        const char *m = kn_last_error(ctx);
        CHECK_MSG(!strncmp(m, "idx_read: ", 10) && strstr(m, raw) && strstr(m, bad[c].want), "case %zu: got \"%s\"",
                  c, m);
        kn_clear_error(ctx);
    }
    b[0] = 1;
    write_file(raw, b, 20);
    CHECK(idx_read(ctx, raw, &a) == KN_EIO);
    CHECK_ERR(ctx, "not an IDX file (magic 01 00, expected 00 00)");
    n = idx_bytes(b, 8, 3, (const uint32_t[]){2, 3, 4}, 24);
    g = gz_store(b, n, &ng);
    g[ng - 5] ^= 1; /* the CRC */
    write_file(gz, g, ng);
    CHECK(idx_read(ctx, gz, &a) == KN_EIO);
    CHECK_ERR(ctx, "x.idx.gz: corrupt: incorrect data check");
    write_file(gz, g, ng - 12); /* inside the data */
    CHECK(idx_read(ctx, gz, &a) == KN_EIO);
    CHECK_ERR(ctx, "x.idx.gz: truncated");
    free(g);
    CHECK(idx_read(ctx, tmp("no-such.idx"), &a) == KN_EIO);
    CHECK_ERR(ctx, "no-such.idx: cannot open");
    CHECK(idx_read(ctx, NULL, &a) == KN_EINVAL);
    CHECK_ERR(ctx, "operand 'path' is NULL");
    CHECK(idx_read(ctx, raw, NULL) == KN_EINVAL);
    CHECK_ERR(ctx, "operand 'out' is NULL");
    CHECK(idx_read(NULL, raw, &a) == KN_EINVAL);
    idx_free(ctx, NULL);

    /* out of memory at every allocation, raw and gzip'd: KN_ENOMEM, nothing held */
    n = idx_bytes(b, 8, 3, (const uint32_t[]){2, 3, 4}, 24);
    write_file(raw, b, n);
    write_file(gz, io_idx_gz, sizeof io_idx_gz);
    int oom_bad = 0, done = 0, loaded = 0;
    for (int k = 0; k < 2; k++, loaded += done, done = 0)
        for (long at = 1; at < 50 && !done; at++) {
            long blocks = h.blocks;
            h.n = 0;
            h.fail_at = at;
            kn_status s = idx_read(ctx, k ? gz : raw, &a);
            h.fail_at = 0;
            done = s == KN_OK;
            oom_bad += done ? !is_234(&a) : s != KN_ENOMEM || a.data || h.blocks != blocks;
            idx_free(ctx, &a);
            kn_clear_error(ctx);
        }
    CHECK(oom_bad == 0 && loaded == 2);
    kn_ctx_free(ctx);
    CHECK(h.blocks == 0 && !h.bad_size);
}

/* ---- Fashion-MNIST ---- */

/* A 3-image set in the temporary directory: images raw, labels gzip'd. */
static void test_fmnist_small(void)
{
    Hook h = {0, 0, 0, 0};
    kn_ctx_opts o = {hook_alloc, &h, 0};
    kn_ctx *ctx = kn_ctx_new(&o);
    static unsigned char img[16 + 3 * 784];
    unsigned char lab[8 + 3];
    size_t ni = idx_bytes(img, 8, 3, (const uint32_t[]){3, 28, 28}, 3 * 784), ng;
    size_t nl = idx_bytes(lab, 8, 1, (const uint32_t[]){3}, 0);
    lab[8] = 9, lab[9] = 0, lab[10] = 4;
    nl += 3;
    write_file(tmp("t10k-images-idx3-ubyte"), img, ni);
    unsigned char *g = gz_store(lab, nl, &ng);
    write_file(tmp("t10k-labels-idx1-ubyte.gz"), g, ng);
    free(g);
    remove(tmp("t10k-labels-idx1-ubyte"));
    char dir[300];
    snprintf(dir, sizeof dir, "%s", tmp_dir);
    kn_tensor *x = NULL, *y = NULL;
    kn_scope_begin(ctx);
    kn_status s = fmnist_load(ctx, dir, 0, &x, &y);
    kn_scope_end(ctx); /* kept tensors survive */
    CHECK_MSG(s == KN_OK && x && y, "%s", kn_last_error(ctx));
    if (s == KN_OK) {
        CHECK(kn_ndim(x) == 4 && kn_shape(x)[0] == 3 && kn_shape(x)[1] == 1 && kn_shape(x)[2] == 28 &&
              kn_shape(x)[3] == 28 && kn_dtype_of(x) == KN_F32);
        CHECK(kn_ndim(y) == 1 && kn_shape(y)[0] == 3 && kn_dtype_of(y) == KN_I64);
        static float xv[3 * 784];
        int64_t yv[3];
        kn_read(ctx, x, xv, sizeof xv);
        kn_read(ctx, y, yv, sizeof yv);
        int ok = yv[0] == 9 && yv[1] == 0 && yv[2] == 4;
        for (int i = 0; i < 3 * 784 && ok; i++) {
            float v = (float)(uint8_t)(7 * i) / 255.0f, c = v - 0.2860f;
            ok = xv[i] == c / 0.3530f;
        }
        CHECK(ok);
    }
    /* a label out of range; counts that disagree; the train split missing */
    lab[10] = 10;
    g = gz_store(lab, nl, &ng);
    write_file(tmp("t10k-labels-idx1-ubyte.gz"), g, ng);
    free(g);
    CHECK(fmnist_load(ctx, dir, 0, &x, &y) == KN_EIO && x == NULL && y == NULL);
    CHECK_ERR(ctx, "label 2 is 10, not a class 0..9");
    lab[7] = 2;
    write_file(tmp("t10k-labels-idx1-ubyte"), lab, nl - 1); /* raw is read before .gz */
    CHECK(fmnist_load(ctx, dir, 0, &x, &y) == KN_EIO);
    CHECK_ERR(ctx, "3 images but a different number of labels");
    CHECK(fmnist_load(ctx, dir, 1, &x, &y) == KN_EIO);
    CHECK_ERR(ctx, "train-images-idx3-ubyte.gz: cannot open");
    CHECK(fmnist_load(ctx, dir, 0, NULL, &y) == KN_EINVAL);
    CHECK_ERR(ctx, "fmnist_load: operand 'images' is NULL");
    kn_ctx_free(ctx);
    CHECK(h.blocks == 0 && !h.bad_size);
}

static void test_fmnist_real(void)
{
    FILE *f = fopen(FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", "rb");
    if (!f) f = fopen(FASHION_MNIST_DIR "/t10k-images-idx3-ubyte", "rb");
    if (!f) {
        printf("SKIP fmnist: %s not found (Debian package dataset-fashion-mnist); its checks did not run\n",
               FASHION_MNIST_DIR);
        return;
    }
    fclose(f);
    kn_ctx *ctx = kn_ctx_new(NULL);
    kn_tensor *x, *y;
    kn_status s = fmnist_load(ctx, NULL, 0, &x, &y);
    CHECK_MSG(s == KN_OK, "%s", kn_last_error(ctx));
    if (s != KN_OK) {
        kn_ctx_free(ctx);
        return;
    }
    CHECK(kn_ndim(x) == 4 && kn_shape(x)[0] == 10000 && kn_shape(x)[1] == 1 && kn_shape(x)[2] == 28 &&
          kn_shape(x)[3] == 28);
    CHECK(kn_ndim(y) == 1 && kn_shape(y)[0] == 10000);
    static int64_t yv[10000];
    int count[10] = {0}, ok = kn_read(ctx, y, yv, sizeof yv) == KN_OK;
    for (int i = 0; ok && i < 10000; i++) ok = yv[i] >= 0 && yv[i] <= 9 && ++count[yv[i]];
    for (int c = 0; ok && c < 10; c++) ok = count[c] == 1000;
    CHECK_MSG(ok, "labels are not 1000 of each class 0..9");

    /* the mean, against one computed from the raw bytes */
    IdxArray a;
    double mean, sum = 0;
    CHECK(idx_read(ctx, FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", &a) == KN_OK ||
          idx_read(ctx, FASHION_MNIST_DIR "/t10k-images-idx3-ubyte", &a) == KN_OK);
    for (size_t i = 0; i < 10000 * 784 && a.data; i++) sum += a.data[i];
    idx_free(ctx, &a);
    double want = (sum / (10000.0 * 784) / 255 - 0.2860) / 0.3530;
    CHECK(kn_item(ctx, kn_mean(ctx, kn_to(ctx, x, KN_F64), NULL, 0, 0), &mean) == KN_OK);
    CHECK_MSG(test_close(mean, want, 1e-6, 1e-6), "mean %.9f, expected %.9f", mean, want);
    CHECK(want > -0.1 && want < 0.1); /* the normalisation constants are the test set's own, nearly */

    /* the labels' .gz cut in half, and with a byte of its deflate data changed: errors naming the file */
    FILE *lf = fopen(FASHION_MNIST_DIR "/t10k-labels-idx1-ubyte.gz", "rb");
    static unsigned char gz[1 << 16];
    size_t ng = lf ? fread(gz, 1, sizeof gz, lf) : 0;
    if (lf) fclose(lf);
    if (ng > 100 && ng < sizeof gz) {
        const char *cut = tmp("labels-cut.gz");
        CHECK(write_file(cut, gz, ng / 2));
        CHECK(idx_read(ctx, cut, &a) == KN_EIO && a.data == NULL);
        CHECK_ERR(ctx, "labels-cut.gz: truncated: the input ends inside a gzip member");
        gz[ng / 2] ^= 0x55;
        CHECK(write_file(cut, gz, ng));
        CHECK(idx_read(ctx, cut, &a) == KN_EIO && a.data == NULL);
        CHECK_ERR(ctx, "labels-cut.gz: corrupt: ");
    }
    kn_ctx_free(ctx);
}
#endif

int main(void)
{
    tmp_init();
    test_roundtrip();
    test_reference();
    test_odd_file();
    test_arg_errors();
    test_path_errors();
    test_bad_files();
    test_fuzz();
    test_atomic_save();
    test_load_alloc_failures();
#ifdef KN_TEST_DATA
    test_gzip();
    test_idx();
    test_fmnist_small();
    test_fmnist_real();
#endif
    tmp_cleanup();
    TEST_END("io");
}
