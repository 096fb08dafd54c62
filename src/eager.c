/*
 * eager.c — eager mode through compiled kernels: each primitive that prim.c
 * would hand to the interpreter runs instead as a one-op program of the C
 * target (backend tcc or c), compiled once per signature and cached in the
 * context. The interpreter stays the default and the oracle.
 *
 * The program of an op is a small graph: one INPUT per source and the op.
 * A source that is a view (a transpose, a broadcast, a slice) is not copied:
 * its INPUT is the stretch of the source's storage the view spans, shaped so
 * that a chain of view nodes (slice, reshape, permute, expand; pad where the
 * storage ends early) gives back the view, and the scheduler turns the chain
 * into index arithmetic, or into the strides of a dot's GEMM template. The
 * chain exists when the view's dims nest: sorted by |stride|, each dim's
 * elements fit, evenly spaced, within one step of the dim before, as the
 * views permute, expand, slice and reshape make of a row-major tensor do.
 * Views that do not (overlapping windows), gather, scatter_add, the
 * creation ops but rand (whose generator state is its sources, so one
 * kernel serves every draw of a shape) and empty tensors stay on the
 * interpreter.
 *
 * Signature: op, parameters, and for each source its dtype, shape, strides
 * (of dims of size > 1), where the view starts inside its stretch and how
 * far the storage falls short of it. The cache holds EAGER_MAX programs and
 * drops the least recently used. A backend without a compiler here (wasm,
 * bare metal, no libtcc) falls back to the interpreter for the context with
 * one log line; a signature that fails to compile stays on the interpreter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "eager.h"
#include "log.h"
#include "../port/port.h"

enum { EAGER_MAX = 512, EAGER_BUCKETS = 1024 };

/* One source as the signature sees it. */
typedef struct {
    uint8_t dtype, ndim, direct, pad_[5]; /* direct: contiguous, bound as it is */
    int64_t shape[KN_MAX_DIMS];
    int64_t stride[KN_MAX_DIMS];          /* 0 for dims of size 1 */
    int64_t start;                        /* the view's first element, from its stretch's first */
    int64_t short_by;                     /* elements of the stretch past the storage's end */
} SrcKey;

typedef struct {
    Params p;
    uint16_t op;
    uint8_t nsrc, pad_[5];
    SrcKey src[3];
} Key;

/* How a non-direct source's view is rebuilt from its stretch. The stretch
 * is r[0] x ... x r[nr-1] elements of storage, row-major. Its dim j < m
 * holds source dim dim[j] (sorted by |stride|, largest first), which steps
 * step[j] along it; dim m, when nr > m, is what is left of the innermost
 * stride, of which each view element uses one. */
typedef struct {
    int m, nr;
    int dim[KN_MAX_DIMS];
    int64_t r[KN_MAX_DIMS], step[KN_MAX_DIMS];
    int64_t lo;  /* the stretch's first element in storage */
    int64_t len; /* elements of it the storage holds */
} Bind;

typedef struct Entry {
    Key key;
    uint32_t hash;
    uint64_t used; /* the tick of its last run */
    Graph *g;
    Program *prog; /* NULL: this signature failed to compile, the interpreter runs it */
    struct Entry *next;
} Entry;

typedef struct Eager {
    kn_backend backend;
    int failed; /* no compiler: the interpreter runs everything */
    int n, cap;
    uint64_t tick;
    EagerStats st;
    Entry *bucket[EAGER_BUCKETS];
    Entry *ent[EAGER_MAX];
} Eager;

/* One line on the context's sink whatever KILN_LOGS says: a fallback the user should hear of. */
static void say(kn_ctx *ctx, const char *line)
{
    if (ctx->log) ctx->log(ctx->log_user, line);
    else port_log(line);
}

static const char *backend_name(kn_backend b) { return b == KN_BACKEND_C ? "c" : b == KN_BACKEND_TCC ? "tcc" : "interp"; }

/* ---- setup ---- */

static int eager_run(kn_ctx *ctx, Op op, kn_tensor *const *src, const Params *p, uint8_t odt, uint8_t ond,
                     const Dim *osh, kn_tensor **out);
static void eager_free(kn_ctx *ctx);
static const EagerHooks eager_hooks = {eager_run, eager_free};

kn_status kn_set_eager_backend(kn_ctx *ctx, kn_backend b)
{
    if (!ctx) return KN_EINVAL;
    if (b != KN_BACKEND_C && b != KN_BACKEND_TCC && b != KN_BACKEND_INTERP)
        return kn_errs(ctx, KN_EINVAL, "kn_set_eager_backend: %d is not a kn_backend", (int)b);
    if (b != ctx->eager_backend) eager_free(ctx); /* the other backend's kernels */
    ctx->eager_backend = b;
    ctx->eager_hooks = &eager_hooks;
    return KN_OK;
}

/* The core's context, with the eager backend KILN_EAGER=c|tcc|interp names (anything else is reported
 * once and ignored) */
kn_ctx *kn_ctx_new(const kn_ctx_opts *opts)
{
    kn_ctx *ctx = ctx_new(opts);
    const char *v = getenv("KILN_EAGER");
    if (!ctx || !v || !*v || !strcmp(v, "interp")) return ctx;
    if (!strcmp(v, "c") || !strcmp(v, "tcc")) {
        kn_set_eager_backend(ctx, !strcmp(v, "c") ? KN_BACKEND_C : KN_BACKEND_TCC);
        return ctx;
    }
    char line[96];
    snprintf(line, sizeof line, "kiln: KILN_EAGER=%.32s is not c, tcc or interp; ignored", v);
    say(ctx, line);
    return ctx;
}

/* The context's cache, made on first use; NULL with the error set. */
static Eager *cache(kn_ctx *ctx)
{
    if (ctx->eager) return ctx->eager;
    Eager *e = kn_alloc(ctx, sizeof *e);
    if (!e) return kn_err(ctx, KN_ENOMEM, "out of memory for the eager kernel cache");
    memset(e, 0, sizeof *e);
    e->backend = ctx->eager_backend;
    e->cap = EAGER_MAX;
    return ctx->eager = e;
}

static void drop(kn_ctx *ctx, Entry *x)
{
    program_free(x->prog);
    graph_free(x->g);
    kn_dealloc(ctx, x, sizeof *x);
}

static void eager_free(kn_ctx *ctx)
{
    Eager *e = ctx->eager;
    if (!e) return;
    for (int i = 0; i < e->n; i++) drop(ctx, e->ent[i]);
    ctx->eager = NULL;
    kn_dealloc(ctx, e, sizeof *e);
}

void eager_stats(const kn_ctx *ctx, EagerStats *st)
{
    memset(st, 0, sizeof *st);
    if (ctx->eager) *st = ctx->eager->st;
    st->backend = ctx->eager_backend;
    if (!ctx->eager) return;
    st->entries = ctx->eager->n;
    st->failed = ctx->eager->failed;
}

/* ---- signatures ---- */

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

static int64_t gcd64(int64_t a, int64_t b) { return b ? gcd64(b, a % b) : a; }

/* The stretch of storage behind view t and the view's place in it, or 0
 * when t's dims do not nest: sorted by |stride|, each dim's elements must
 * fit, evenly spaced, between two steps of the dim before (as x[:, ::2]
 * does), so that the stretch splits into one level per dim. */
static int plan_view(const kn_tensor *t, Bind *b, SrcKey *k)
{
    int m = 0;
    int64_t first = t->offset; /* the lowest element the view reads */
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 1 || t->stride[d] == 0) continue;
        if (t->stride[d] < 0) first += (t->shape[d] - 1) * t->stride[d];
        int j = m++; /* insertion by |stride|, largest first; equal ones overlap */
        for (; j > 0 && abs64(t->stride[b->dim[j - 1]]) < abs64(t->stride[d]); j--) b->dim[j] = b->dim[j - 1];
        if (j > 0 && abs64(t->stride[b->dim[j - 1]]) == abs64(t->stride[d])) return 0;
        b->dim[j] = d;
    }
    b->m = m;
    int64_t outer = m ? abs64(t->stride[b->dim[0]]) : 1, unit = outer; /* unit: elements per step of the level */
    b->r[0] = m ? t->shape[b->dim[0]] : 1;
    b->step[0] = 1;
    for (int j = 1; j < m; j++) {
        int64_t st = abs64(t->stride[b->dim[j]]), u = gcd64(unit, st);
        b->r[j] = unit / u;
        b->step[j] = st / u;
        if ((t->shape[b->dim[j]] - 1) * b->step[j] >= b->r[j]) return 0;
        unit = u;
    }
    b->nr = m > 0 ? m : 1;
    if (unit > 1) {
        if (m == KN_MAX_DIMS) return 0;
        b->r[b->nr] = unit;
        b->step[b->nr++] = 1;
    }
    /* Start the stretch where the view's outermost row would start, so a
     * slice of a row-major tensor binds its rows whole; else at the view. */
    int64_t start = first % outer, c = start;
    for (int j = b->nr - 1; j > 0 && start; j--) {
        int64_t digit = c % b->r[j], count = j < m ? t->shape[b->dim[j]] : 1;
        if (digit + (count - 1) * b->step[j] >= b->r[j]) start = 0;
        c /= b->r[j];
    }
    int64_t total = (int64_t)(t->st->bytes / kn_dtype_size((kn_dtype)t->dtype)), need = b->r[0] * outer;
    b->lo = first - start;
    b->len = total - b->lo < need ? total - b->lo : need;
    k->start = start;
    k->short_by = need - b->len;
    return 1;
}

static int make_key(Op op, kn_tensor *const *src, const Params *p, Key *key, Bind *bind)
{
    memset(key, 0, sizeof *key);
    memcpy(&key->p, p, sizeof key->p);
    key->op = (uint16_t)op;
    key->nsrc = (uint8_t)kn_opinfo[op].nsrc;
    for (int i = 0; i < key->nsrc; i++) {
        const kn_tensor *t = src[i];
        SrcKey *k = &key->src[i];
        if (tensor_numel(t->ndim, t->shape) == 0) return 0;
        k->dtype = t->dtype;
        k->ndim = t->ndim;
        memcpy(k->shape, t->shape, t->ndim * sizeof *t->shape);
        for (int d = 0; d < t->ndim; d++) k->stride[d] = t->shape[d] == 1 ? 0 : t->stride[d];
        k->direct = (uint8_t)kn_is_contiguous(t);
        if (!k->direct && !plan_view(t, &bind[i], k)) return 0;
    }
    return 1;
}

static uint32_t key_hash(const Key *k) { return (uint32_t)kn_hash(k, sizeof *k); }

/* ---- the one-op graph ---- */

/* Appends op over node a with parameters p, its dtype and shape by the op's rule; 0 on failure. */
static uint32_t add1(Graph *g, Op op, uint32_t a, const Params *p)
{
    Node n;
    memset(&n, 0, sizeof n);
    const Node *s = &g->nodes[a];
    const Dim *sh = s->shape;
    n.op = (uint16_t)op;
    n.nsrc = 1;
    n.src[0] = a;
    memcpy(&n.p, p, sizeof n.p);
    if (prim_shape(g->ctx, op, 1, &s->dtype, &s->ndim, &sh, p, &n.dtype, &n.ndim, n.shape)) return 0;
    return graph_add(g, &n);
}

static uint32_t add_slice(Graph *g, uint32_t a, int dim, int64_t start, int64_t count, int64_t step)
{
    const Node *s = &g->nodes[a];
    if (start == 0 && step == 1 && count == s->shape[dim]) return a;
    Params p;
    memset(&p, 0, sizeof p);
    p.i[0] = dim, p.i[1] = start, p.i[2] = count, p.i[3] = step, p.n = 4;
    return add1(g, OP_SLICE, a, &p);
}

static uint32_t add_shaped(Graph *g, Op op, uint32_t a, int nd, const int64_t *shape)
{
    const Node *s = &g->nodes[a];
    if (s->ndim == nd && memcmp(s->shape, shape, nd * sizeof *shape) == 0) return a;
    Params p;
    memset(&p, 0, sizeof p);
    p.n = (uint8_t)nd;
    memcpy(p.i, shape, nd * sizeof *shape);
    return add1(g, op, a, &p);
}

static uint32_t add_input(Graph *g, int k, kn_dtype dt, int nd, const int64_t *shape)
{
    Node n;
    memset(&n, 0, sizeof n);
    n.op = OP_INPUT;
    n.dtype = (uint8_t)dt;
    n.ndim = (uint8_t)nd;
    memcpy(n.shape, shape, nd * sizeof *shape);
    n.p.i[0] = k;
    n.p.n = 1;
    return graph_add(g, &n);
}

/* The INPUT for source k and the view chain that rebuilds it from its stretch. */
static uint32_t add_source(Graph *g, int k, const SrcKey *s, const Bind *b)
{
    kn_dtype dt = (kn_dtype)s->dtype;
    if (s->direct) return add_input(g, k, dt, s->ndim, s->shape);
    uint32_t v;
    if (!s->short_by) v = add_input(g, k, dt, b->nr, b->r);
    else { /* the storage ends inside the stretch: pad it out, then shape it */
        int64_t len = b->len;
        Params p;
        memset(&p, 0, sizeof p);
        p.i[1] = s->short_by, p.n = 2;
        v = add_input(g, k, dt, 1, &len);
        v = v ? add1(g, OP_PAD, v, &p) : 0;
        v = v ? add_shaped(g, OP_RESHAPE, v, b->nr, b->r) : 0;
    }
    /* the view's place in the stretch, one digit of start per dim */
    int64_t c = s->start, sorted[KN_MAX_DIMS];
    for (int j = b->nr - 1; j >= 0 && v; j--) {
        int64_t count = j < b->m ? s->shape[b->dim[j]] : 1;
        v = add_slice(g, v, j, c % b->r[j], count, b->step[j]);
        c /= b->r[j];
    }
    for (int j = 0; j < b->m; j++) sorted[j] = s->shape[b->dim[j]];
    if (b->nr > b->m && v) v = add_shaped(g, OP_RESHAPE, v, b->m, sorted);
    for (int j = 0; j < b->m && v; j++)
        if (s->stride[b->dim[j]] < 0) v = add_slice(g, v, j, sorted[j] - 1, sorted[j], -1);
    /* back to the source's order of dims, its size-1 dims, its broadcasts */
    Params p;
    memset(&p, 0, sizeof p);
    int ident = 1, i = 0;
    int64_t kept[KN_MAX_DIMS];
    for (int d = 0; d < s->ndim; d++) {
        kept[d] = s->stride[d] ? s->shape[d] : 1;
        if (!s->stride[d]) continue;
        for (int j = 0; j < b->m; j++)
            if (b->dim[j] == d) p.i[i] = j;
        ident &= p.i[i] == i;
        i++;
    }
    p.n = (uint8_t)b->m;
    if (!ident && v) v = add1(g, OP_PERMUTE, v, &p);
    if (v) v = add_shaped(g, OP_RESHAPE, v, s->ndim, kept);
    if (v) v = add_shaped(g, OP_EXPAND, v, s->ndim, s->shape);
    return v;
}

static Graph *build(kn_ctx *ctx, const Key *key, const Bind *bind, uint8_t odt, uint8_t ond, const Dim *osh,
                    uint32_t *out)
{
    Graph *g = graph_new(ctx);
    if (!g) return kn_err(ctx, KN_ENOMEM, "out of memory for an eager kernel");
    Node n;
    memset(&n, 0, sizeof n);
    n.op = key->op;
    n.dtype = odt;
    n.ndim = ond;
    n.nsrc = key->nsrc;
    memcpy(n.shape, osh, ond * sizeof *osh);
    memcpy(&n.p, &key->p, sizeof n.p);
    for (int i = 0; i < key->nsrc; i++)
        if (!(n.src[i] = add_source(g, i, &key->src[i], &bind[i]))) break;
    *out = n.src[key->nsrc - 1] ? graph_add(g, &n) : 0;
    if (!*out) {
        graph_free(g);
        return ctx->status ? NULL : kn_err(ctx, KN_ENOMEM, "out of memory for an eager kernel");
    }
    return g;
}

/* ---- the cache ---- */

static Entry *find(Eager *e, const Key *k, uint32_t h)
{
    for (Entry *x = e->bucket[h % EAGER_BUCKETS]; x; x = x->next)
        if (x->hash == h && memcmp(&x->key, k, sizeof *k) == 0) return x;
    return NULL;
}

/* The least recently used entry leaves the cache. */
static void evict(kn_ctx *ctx, Eager *e)
{
    int lru = 0;
    for (int i = 1; i < e->n; i++)
        if (e->ent[i]->used < e->ent[lru]->used) lru = i;
    Entry *x = e->ent[lru], **at = &e->bucket[x->hash % EAGER_BUCKETS];
    while (*at != x) at = &(*at)->next;
    *at = x->next;
    e->ent[lru] = e->ent[--e->n];
    e->st.evictions++;
    drop(ctx, x);
}

static void describe(const Key *k, uint8_t odt, uint8_t ond, const Dim *osh, char *buf, size_t cap)
{
    char sh[96];
    fmt_dims(sh, sizeof sh, ond, osh);
    size_t len = kn_appendf(buf, cap, 0, "%s %s %s", kn_opinfo[k->op].name, kn_dtype_name((kn_dtype)odt), sh);
    for (int i = 0; i < k->nsrc; i++)
        if (!k->src[i].direct) len = kn_appendf(buf, cap, len, ", source %d a view", i);
}

/* The backend has no compiler here (compile_graph gave an interpreter
 * program): every op goes to the interpreter from now on. */
static void no_compiler(kn_ctx *ctx, Eager *e)
{
    char line[160];
    snprintf(line, sizeof line, "kiln: eager backend %s is not available here; eager ops run on the interpreter",
             backend_name(e->backend));
    say(ctx, line);
    e->failed = 1;
}

/* Compiles the signature's program into a new entry. Out of memory: NULL
 * with the error set. No compiler: NULL and the backend marked failed.
 * Any other failure: an entry without a program (the interpreter runs the
 * signature from then on), one log line, and the error taken back. */
static Entry *compile(kn_ctx *ctx, Eager *e, const Key *key, uint32_t h, const Bind *bind, uint8_t odt,
                      uint8_t ond, const Dim *osh)
{
    if (e->n >= e->cap) evict(ctx, e);
    Entry *x = kn_alloc(ctx, sizeof *x);
    if (!x) return kn_err(ctx, KN_ENOMEM, "out of memory for an eager kernel");
    memset(x, 0, sizeof *x);
    x->key = *key;
    x->hash = h;
    kn_status was = ctx->status;
    char err[sizeof ctx->err], what[256];
    memcpy(err, ctx->err, sizeof err);
    describe(key, odt, ond, osh, what, sizeof what);
    uint64_t t0 = port_now_ns();
    uint32_t out = 0;
    /* keep_packed 0: one op's program sees every layer's weight of its shape in turn, so rarely the same twice */
    CompileOpts o = {e->backend == KN_BACKEND_C ? BACKEND_C : BACKEND_TCC, KN_MODE_DEFAULT, 0, NULL};
    x->g = build(ctx, key, bind, odt, ond, osh, &out);
    x->prog = x->g ? compile_graph(ctx, x->g, &out, 1, &o) : NULL;
    e->st.compiles++;
    ProgramStats ps = {0, 0, 0, 0, "interp", 0, 0, 0, 0, 0};
    if (x->prog) program_stats(x->prog, &ps);
    if (x->prog && !strcmp(ps.backend, "interp")) {
        no_compiler(ctx, e);
        drop(ctx, x);
        return NULL;
    }
    if (!x->prog && (ctx->status == KN_ENOMEM || ctx->status == KN_OK)) {
        /* the op fails as any op does without memory (a failure that left
         * no error is taken for one), and nothing is cached */
        if (!ctx->status) kn_err(ctx, KN_ENOMEM, "out of memory compiling an eager kernel");
        drop(ctx, x);
        return NULL;
    }
    if (!x->prog) {
        char line[1024];
        snprintf(line, sizeof line, "kiln: eager %.255s: could not compile (%.511s); it runs on the interpreter", what,
                 ctx->err);
        say(ctx, line);
        graph_free(x->g);
        x->g = NULL;
        e->st.failures++;
    }
    ctx->status = was;
    memcpy(ctx->err, err, sizeof err);
    log_line(ctx, LOG_PERF, "eager: %s %s in %.2f ms (%s, %d kernel%s)", x->prog ? "compiled" : "failed", what,
             (double)(port_now_ns() - t0) / 1e6, ps.backend, ps.kernels, ps.kernels == 1 ? "" : "s");
    x->next = e->bucket[h % EAGER_BUCKETS];
    e->bucket[h % EAGER_BUCKETS] = x;
    e->ent[e->n++] = x;
    return x;
}

void eager_set_capacity(kn_ctx *ctx, int cap)
{
    Eager *e = ctx->eager;
    if (!e) return;
    e->cap = cap < 1 ? 1 : cap > EAGER_MAX ? EAGER_MAX : cap;
    while (e->n > e->cap) evict(ctx, e);
}

/* ---- running ---- */

static int compiled_op(Op op)
{
    OpClass c = kn_opinfo[op].cls;
    return c != OC_LEAF && (c != OC_CREATE || op == OP_RAND) && c != OC_INDEX;
}

static int eager_run(kn_ctx *ctx, Op op, kn_tensor *const *src, const Params *p, uint8_t odt, uint8_t ond,
                     const Dim *osh, kn_tensor **out)
{
    *out = NULL;
    if (!compiled_op(op) || tensor_numel(ond, osh) == 0) return 0;
    Eager *e = cache(ctx);
    if (!e) return 1;
    if (e->failed) return 0;
    Key key;
    Bind bind[3];
    if (!make_key(op, src, p, &key, bind)) return 0;
    uint32_t h = key_hash(&key);
    Entry *x = find(e, &key, h);
    if (x) e->st.hits++;
    else if (!(x = compile(ctx, e, &key, h, bind, odt, ond, osh))) return e->failed ? 0 : 1;
    x->used = ++e->tick;
    if (!x->prog) return 0;
    kn_tensor *in[3] = {NULL, NULL, NULL};
    int n = kn_opinfo[op].nsrc, ok = 1;
    for (int i = 0; i < n && ok; i++) {
        const Bind *b = &bind[i];
        if (key.src[i].direct) {
            in[i] = src[i];
            continue;
        }
        /* the stretch, contiguous: flat when it is to be padded */
        int nd = key.src[i].short_by ? 1 : b->nr;
        int64_t flat = b->len, st[KN_MAX_DIMS];
        const int64_t *shape = key.src[i].short_by ? &flat : b->r;
        tensor_contig_strides(nd, shape, st);
        ok = (in[i] = tensor_view(ctx, src[i], nd, shape, st, b->lo)) != NULL;
    }
    if (ok && program_run(x->prog, in, n, out) != KN_OK) *out = NULL;
    for (int i = 0; i < n; i++)
        if (in[i] && in[i] != src[i]) kn_free(ctx, in[i]);
    e->st.runs++;
    return 1;
}
