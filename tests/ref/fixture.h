/*
 * fixture.h — reads the PyTorch fixtures written by tests/ref/gen.py.
 *
 * Header-only, plain stdio, no kiln calls: it turns the bytes into FxCase
 * structs and leaves building tensors and calling ops to the test. The format
 * is documented at the top of gen.py; in short, a file is "KNREF002", a u32
 * case count and the cases, each a name, an op, integer and float arguments,
 * input tensors (with an optional view recipe), expected output tensors and
 * an optional gradient part: one cotangent per output and the expected
 * gradient of sum(out * cot) for each input (FX_ABSENT where there is none).
 * "KNREF001" files, which have no gradient part, are read too.
 * tests/ref/data/MANIFEST lists the files and their case counts.
 *
 * The tensor encoding (fx_tensor) and the little readers are shared with
 * tests/test_models.c, which opens tests/ref/data/models.bin with fx_open_magic.
 *
 *     FxFile f;
 *     FxCase c;
 *     if (fx_open(&f, "tests/ref/data/pointwise.bin") == 0) {
 *         while (fx_next(&f, &c) == 1) { ...; fx_case_free(&c); }
 *         fx_close(&f);
 *     }
 *
 * Every reader returns -1 on a short or malformed file and sets f->error.
 * Data is little-endian; a big-endian host is refused in fx_open.
 */
#ifndef KN_FIXTURE_H
#define KN_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

#define FX_DATA_DIR "tests/ref/data"
#define FX_MAX_ARGS 32
#define FX_MAX_TENSORS 16
#define FX_MAX_STEPS 4
#define FX_MAX_NAME 128
#define FX_SCALAR 254 /* input code: a Python number, passed through kn_scalar */
#define FX_ABSENT 255 /* input code: pass NULL */

typedef enum { FX_TRANSPOSE = 1, FX_PERMUTE, FX_SLICE, FX_EXPAND } FxStepKind;

typedef struct {
    int kind;                  /* FxStepKind */
    int nargs;
    int64_t args[KN_MAX_DIMS]; /* transpose: d0 d1; permute: perm; slice: dim start stop step; expand: shape */
} FxStep;

typedef struct {
    int code;                    /* a kn_dtype, FX_SCALAR or FX_ABSENT */
    int ndim;
    int64_t shape[KN_MAX_DIMS];
    int nsteps;
    FxStep steps[FX_MAX_STEPS];  /* views to apply, in order, to the stored tensor */
    int64_t numel;
    unsigned char *data;         /* numel elements, row-major (FX_SCALAR: one double); malloc'd */
} FxTensor;

typedef struct {
    char name[FX_MAX_NAME];
    char op[FX_MAX_NAME];        /* the kn_ function without its prefix */
    int nint, nflt, nin, nout;
    int64_t ints[FX_MAX_ARGS];
    double flts[FX_MAX_ARGS];
    FxTensor in[FX_MAX_TENSORS];
    FxTensor out[FX_MAX_TENSORS];
    int ncot, ngrad;             /* 0, 0: no gradient part; else nout and nin */
    FxTensor cot[FX_MAX_TENSORS];  /* cotangent of each output (FX_ABSENT: none) */
    FxTensor grad[FX_MAX_TENSORS]; /* d sum(out * cot) / d stored input, no view steps (FX_ABSENT: none) */
} FxCase;

typedef struct {
    FILE *fp;
    int version;                 /* 1 or 2: the magic's last digit */
    uint32_t ncases, read;
    char error[768];             /* "" while all is well */
} FxFile;

/* Bytes per element of a kn_dtype code, 0 for anything else. */
static inline size_t fx_dtype_size(int code)
{
    static const size_t sizes[KN_NDTYPES] = {4, 8, 2, 2, 4, 8, 1, 1};
    return code >= 0 && code < KN_NDTYPES ? sizes[code] : 0;
}

static inline int fx_fail(FxFile *f, const char *what)
{
    if (!f->error[0])
        snprintf(f->error, sizeof f->error, "case %u: %s", (unsigned)f->read, what);
    return -1;
}

/* Reads n little-endian bytes as an unsigned integer into *v. */
static inline int fx_uint(FxFile *f, int n, uint64_t *v)
{
    unsigned char b[8];
    int i;
    if (fread(b, 1, (size_t)n, f->fp) != (size_t)n) return fx_fail(f, "file ends early");
    *v = 0;
    for (i = n - 1; i >= 0; i--) *v = (*v << 8) | b[i];
    return 0;
}

static inline int fx_i64(FxFile *f, int64_t *v)
{
    uint64_t u;
    if (fx_uint(f, 8, &u)) return -1;
    memcpy(v, &u, sizeof *v);
    return 0;
}

static inline int fx_f64(FxFile *f, double *v)
{
    uint64_t u;
    if (fx_uint(f, 8, &u)) return -1;
    memcpy(v, &u, sizeof *v);
    return 0;
}

/* A u32 count that must not exceed max. */
static inline int fx_count(FxFile *f, int max, int *n)
{
    uint64_t u;
    if (fx_uint(f, 4, &u)) return -1;
    if (u > (uint64_t)max) return fx_fail(f, "count over the loader's limit");
    *n = (int)u;
    return 0;
}

static inline int fx_str(FxFile *f, char *dst, size_t cap)
{
    uint64_t n;
    if (fx_uint(f, 2, &n)) return -1;
    if (n >= cap) return fx_fail(f, "string too long");
    if (fread(dst, 1, (size_t)n, f->fp) != (size_t)n) return fx_fail(f, "file ends early");
    dst[n] = '\0';
    return 0;
}

static inline int fx_step(FxFile *f, FxStep *s)
{
    uint64_t kind, nargs;
    int i;
    if (fx_uint(f, 1, &kind) || fx_uint(f, 1, &nargs)) return -1;
    if (kind < FX_TRANSPOSE || kind > FX_EXPAND || nargs > KN_MAX_DIMS) return fx_fail(f, "bad view step");
    s->kind = (int)kind;
    s->nargs = (int)nargs;
    for (i = 0; i < s->nargs; i++)
        if (fx_i64(f, &s->args[i])) return -1;
    return 0;
}

/* The element data after a tensor's header: numel * size bytes (at least 1 byte allocated). */
static inline int fx_data(FxFile *f, FxTensor *t, size_t elem)
{
    size_t bytes = (size_t)t->numel * elem;
    t->data = malloc(bytes ? bytes : 1);
    if (!t->data) return fx_fail(f, "out of memory");
    if (fread(t->data, 1, bytes, f->fp) != bytes) return fx_fail(f, "file ends early");
    return 0;
}

static inline int fx_tensor(FxFile *f, FxTensor *t)
{
    uint64_t code, ndim, nsteps, pad;
    int i;
    memset(t, 0, sizeof *t);
    if (fx_uint(f, 1, &code) || fx_uint(f, 1, &ndim) || fx_uint(f, 1, &nsteps) || fx_uint(f, 1, &pad))
        return -1;
    if (ndim > KN_MAX_DIMS || nsteps > FX_MAX_STEPS) return fx_fail(f, "bad tensor header");
    t->code = (int)code;
    t->ndim = (int)ndim;
    t->nsteps = (int)nsteps;
    if (t->code == FX_ABSENT) return 0;
    t->numel = 1;
    for (i = 0; i < t->ndim; i++) {
        if (fx_i64(f, &t->shape[i])) return -1;
        if (t->shape[i] < 0 || t->shape[i] > (1 << 24)) return fx_fail(f, "bad tensor shape");
        t->numel *= t->shape[i];
    }
    for (i = 0; i < t->nsteps; i++)
        if (fx_step(f, &t->steps[i])) return -1;
    if (t->code == FX_SCALAR) return fx_data(f, t, sizeof(double));
    if (!fx_dtype_size(t->code)) return fx_fail(f, "bad dtype code");
    return fx_data(f, t, fx_dtype_size(t->code));
}

/* The scalar held by an FX_SCALAR input. */
static inline double fx_scalar_value(const FxTensor *t)
{
    double v;
    memcpy(&v, t->data, sizeof v);
    return v;
}

static inline void fx_case_free(FxCase *c)
{
    int i;
    for (i = 0; i < c->nin; i++) free(c->in[i].data);
    for (i = 0; i < c->nout; i++) free(c->out[i].data);
    for (i = 0; i < c->ncot; i++) free(c->cot[i].data);
    for (i = 0; i < c->ngrad; i++) free(c->grad[i].data);
    c->nin = c->nout = c->ncot = c->ngrad = 0;
}

static inline int fx_tensors(FxFile *f, FxTensor *ts, int *n, int *done)
{
    int i;
    if (fx_count(f, FX_MAX_TENSORS, n)) return -1;
    for (i = 0; i < *n; i++) {
        *done = i + 1;
        if (fx_tensor(f, &ts[i])) return -1;
    }
    return 0;
}

/* Reads the next case into c: 1 read, 0 no cases left, -1 bad file (c holds nothing to free). */
static inline int fx_next(FxFile *f, FxCase *c)
{
    int i, ok = 0, nin = 0, nout = 0, ncot = 0, ngrad = 0;
    memset(c, 0, sizeof *c);
    if (f->error[0]) return -1;
    if (f->read == f->ncases) return 0;
    if (fx_str(f, c->name, sizeof c->name) || fx_str(f, c->op, sizeof c->op)) return -1;
    if (fx_count(f, FX_MAX_ARGS, &c->nint)) return -1;
    for (i = 0; i < c->nint; i++)
        if (fx_i64(f, &c->ints[i])) return -1;
    if (fx_count(f, FX_MAX_ARGS, &c->nflt)) return -1;
    for (i = 0; i < c->nflt; i++)
        if (fx_f64(f, &c->flts[i])) return -1;
    if (fx_tensors(f, c->in, &c->nin, &nin) == 0 && fx_tensors(f, c->out, &c->nout, &nout) == 0) ok = 1;
    if (ok && f->version >= 2)
        ok = fx_tensors(f, c->cot, &c->ncot, &ncot) == 0 && fx_tensors(f, c->grad, &c->ngrad, &ngrad) == 0;
    if (ok && (c->ncot || c->ngrad) && (c->ncot != c->nout || c->ngrad != c->nin)) {
        ok = 0;
        fx_fail(f, "gradient part does not match the outputs and inputs");
    }
    if (!ok) {
        c->nin = nin;
        c->nout = nout;
        c->ncot = ncot;
        c->ngrad = ngrad;
        fx_case_free(c);
        return -1;
    }
    f->read++;
    return 1;
}

/* Opens a file whose first 8 bytes must be magic, then reads a u32 count into
 * f->ncases: 0 ok, -1 with f->error set. */
static inline int fx_open_magic(FxFile *f, const char *path, const char *magic)
{
    char got[8];
    uint64_t n;
    uint16_t probe = 1;
    memset(f, 0, sizeof *f);
    if (*(unsigned char *)&probe != 1) {
        snprintf(f->error, sizeof f->error, "%s: fixtures are little-endian; this host is not", path);
        return -1;
    }
    f->fp = fopen(path, "rb");
    if (!f->fp) {
        snprintf(f->error, sizeof f->error, "%s: cannot open", path);
        return -1;
    }
    if (fread(got, 1, 8, f->fp) != 8 || memcmp(got, magic, 8) != 0) {
        snprintf(f->error, sizeof f->error, "%s: not a %.8s file", path, magic);
        return -1;
    }
    if (fx_uint(f, 4, &n)) return -1;
    f->ncases = (uint32_t)n;
    return 0;
}

/* Opens a fixture file (KNREF001 or KNREF002): 0 ok, -1 with f->error set. */
static inline int fx_open(FxFile *f, const char *path)
{
    if (fx_open_magic(f, path, "KNREF002") == 0) {
        f->version = 2;
        return 0;
    }
    if (f->fp && strstr(f->error, "not a KNREF002")) {
        fclose(f->fp);
        if (fx_open_magic(f, path, "KNREF001") == 0) {
            f->version = 1;
            return 0;
        }
        snprintf(f->error, sizeof f->error, "%s: not a KNREF001 or KNREF002 fixture file", path);
    }
    return -1;
}

static inline void fx_close(FxFile *f)
{
    if (f->fp) fclose(f->fp);
    f->fp = NULL;
}

#endif
