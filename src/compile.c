/*
 * compile.c — the pipeline, in one visible function (compile_graph), and
 * the programs it makes.
 *
 *   graph -> schedule (fuse) -> lower to loop IR -> loop passes -> verify -> plan memory
 *         -> render (target) -> compile and load (port) -> steps
 *
 * A program is a list of steps in topological order: a compiled kernel, a
 * dot through the target's template (the rest of its kernel, if the
 * scheduler fused the dot into a pointwise reader, as the template's tile
 * epilogue: linear + bias + gelu is one step), or one primitive the
 * interpreter runs (gather and scatter_add until their lowering lands;
 * every node under backend interp). Kernels run their parallel loops on
 * the port's thread pool. KILN_LOGS=fusion shows each kernel and what it
 * fused, loopir each kernel's loop IR, output_code the generated source. Every intermediate value
 * lives at a planned offset in one arena allocated at compile time, reused
 * once its last reader has run; outputs are new each run or live in
 * storage the program keeps and reuses as its reuse mode allows ("running",
 * below): a run of kn_compile's reduce-overhead allocates nothing.
 *
 * Requires: a graph of concrete shapes and its outputs. Produces: a Program
 * that program_run runs on input tensors, equal to the interpreter's result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "log.h"
#include "loopopt.h"
#include "lower.h"
#include "partition.h"
#include "target.h"
#include "../port/port.h"
#include "../targets/c/gemm.h" /* KnParallel */

typedef struct {
    uint32_t node;      /* the node it writes */
    int interp;         /* 1: the interpreter runs the node's primitive */
    Kernel *k;          /* compiled: its kernel and entry */
    void *fn;
    GemmSpec *gemm;     /* or a dot through the target's template (k: its epilogue, if any): */
    uint32_t dot;       /* the dot node (node itself, or the dot fused into node's kernel) */
    uint32_t root[2];   /* the buffers A and B are views of */
    int64_t off[2];     /* and where the views start, in elements */
    struct Tune *tune;  /* max-autotune: its candidates, or NULL */
    int shares;         /* a dot whose spec an earlier step's has (names aside): that step, else -1 */
    void *epi;          /* a dot's epilogue entry, handed to the template (so it can share a unit) */
} Step;

struct Program {
    kn_ctx *ctx;
    Arena arena;
    const Graph *g;
    const Target *t;
    void *module;
    Step *steps;
    int nsteps;
    uint32_t *outs;
    int nouts;
    uint32_t *all;      /* backend interp: every node to run */
    int nall;
    int64_t *offset;    /* per node: arena offset, -1 for inputs and outputs */
    size_t arena_bytes;
    void *mem;          /* the arena */
    size_t code_bytes;
    int nkernels, ninterp;
    int tuned, tune_cached;
    /* run time: made at the first run (run_init), reused by every later one */
    int reuse;          /* PROGRAM_FRESH, _POOL or _STATIC (compile.h) */
    kn_tensor **vals;   /* per node: its tensor during a run (inputs, outputs) */
    kn_tensor **view;   /* per node: a handle over its arena bytes, for interpreter steps */
    kn_tensor **pool;   /* per output i: pool[2i], pool[2i + 1], handles holding its storages */
    uint8_t *fresh;     /* per output: a handle made by this run, for the caller */
    uint8_t *older;     /* per output: the pool slot used less recently */
};

static size_t node_bytes(const Node *n)
{
    return (size_t)tensor_numel(n->ndim, n->shape) * kn_dtype_size((kn_dtype)n->dtype);
}

/* ---- memory plan: first fit over the intervals free at each step ---- */

typedef struct {
    int64_t off;
    size_t size;
    int until; /* the step after which it is free */
} Block;

/* The last step that reads each node (-1: none). */
static void last_uses(const Program *p, int *last)
{
    for (uint32_t v = 0; v < p->g->n; v++) last[v] = -1;
    for (int s = 0; s < p->nsteps; s++) {
        const Node *n = &p->g->nodes[p->steps[s].node];
        if (p->steps[s].interp) {
            for (int i = 0; i < n->nsrc; i++) last[n->src[i]] = s;
            continue;
        }
        if (p->steps[s].gemm) {
            last[p->steps[s].root[0]] = last[p->steps[s].root[1]] = s;
            for (int b = 1; p->steps[s].k && b < p->steps[s].k->nbufs; b++) last[p->steps[s].k->bufs[b].node] = s;
            continue;
        }
        for (int b = 1; b < p->steps[s].k->nbufs; b++) last[p->steps[s].k->bufs[b].node] = s;
    }
}

/* Lowest offset where size bytes fit among the blocks live at step s. */
static int64_t first_fit(const Block *live, int nlive, int s, size_t size)
{
    int64_t off = 0;
    for (int moved = 1; moved;) {
        moved = 0;
        for (int i = 0; i < nlive; i++) {
            if (live[i].until < s) continue;
            if (off < live[i].off + (int64_t)live[i].size && live[i].off < off + (int64_t)size) {
                off = (live[i].off + (int64_t)live[i].size + 63) & ~(int64_t)63;
                moved = 1;
            }
        }
    }
    return off;
}

static int is_output(const Program *p, uint32_t v)
{
    for (int i = 0; i < p->nouts; i++)
        if (p->outs[i] == v) return 1;
    return 0;
}

static int plan(kn_ctx *ctx, Program *p)
{
    int *last = arena_alloc(&p->arena, p->g->n * sizeof *last);
    Block *live = arena_alloc(&p->arena, (size_t)(p->nsteps + 1) * sizeof *live);
    p->offset = arena_alloc(&p->arena, p->g->n * sizeof *p->offset);
    if (!last || !live || !p->offset) return kn_errs(ctx, KN_ENOMEM, "out of memory planning");
    last_uses(p, last);
    for (uint32_t v = 0; v < p->g->n; v++) p->offset[v] = -1;
    int nlive = 0;
    for (int s = 0; s < p->nsteps; s++) {
        uint32_t v = p->steps[s].node;
        if (is_output(p, v)) continue;
        size_t size = node_bytes(&p->g->nodes[v]);
        int64_t off = first_fit(live, nlive, s, size);
        live[nlive++] = (Block){off, size, last[v] < s ? s : last[v]};
        p->offset[v] = off;
        if ((size_t)off + size > p->arena_bytes) p->arena_bytes = (size_t)off + size;
    }
    p->mem = p->arena_bytes ? kn_alloc(ctx, p->arena_bytes) : NULL;
    if (p->arena_bytes && !p->mem) return kn_errs(ctx, KN_ENOMEM, "out of memory for a %zu-byte arena", p->arena_bytes);
    return 0;
}

/* ---- building the steps ---- */

/* ---- dots through the target's template ---- */

/* Dot d (st->node or the dot fused into its kernel) of f32 or f64 over
 * operands that are views of buffers, as a GemmSpec writing st->node's buffer. */
static int make_gemm(Program *p, const Schedule *s, Step *st, uint32_t d)
{
    const Node *n = &p->g->nodes[d];
    int nd = n->ndim, nb = nd - 2;
    if (!p->t->render_dot || (n->dtype != KN_F32 && n->dtype != KN_F64)) return 0;
    int64_t sa[KN_MAX_DIMS], sb[KN_MAX_DIMS];
    if (!sched_view(p->g, s->materialised, n->src[0], &st->root[0], sa, &st->off[0]) ||
        !sched_view(p->g, s->materialised, n->src[1], &st->root[1], sb, &st->off[1]))
        return 0;
    GemmSpec g;
    memset(&g, 0, sizeof g);
    if (!sched_batch_stride(nb, n->shape, sa, &g.sa_b) || !sched_batch_stride(nb, n->shape, sb, &g.sb_b)) return 0;
    g.dtype = n->dtype == KN_F32 ? GEMM_F32 : GEMM_F64;
    g.batch = tensor_numel(nb, n->shape);
    g.M = n->shape[nd - 2], g.N = n->shape[nd - 1], g.K = p->g->nodes[n->src[0]].shape[nd - 1];
    g.sa_m = sa[nd - 2], g.sa_k = sa[nd - 1], g.sb_k = sb[nd - 2], g.sb_n = sb[nd - 1];
    if (g.M < 1 || g.N < 1 || g.K < 1) return 0;
    char *name = arena_alloc(&p->arena, 24);
    st->gemm = arena_alloc(&p->arena, sizeof *st->gemm);
    if (!name || !st->gemm) return 0;
    snprintf(name, 24, "g%" PRIu32 "_dot", st->node);
    g.name = name;
    *st->gemm = g;
    return 1;
}

/* KILN_LOGS=loopir: a kernel's loop IR after the loop passes. */
static void log_kernel(kn_ctx *ctx, const Kernel *k)
{
    if (!log_on(ctx, LOG_LOOPIR)) return;
    size_t n = ir_print(k, NULL, 0);
    char *text = kn_alloc(ctx, n + 1);
    if (!text) return;
    ir_print(k, text, n + 1);
    log_text(ctx, LOG_LOOPIR, text);
    kn_dealloc(ctx, text, n + 1);
}

/* KILN_LOGS=fusion: each kernel, what it writes and the nodes fused into it. */
static void log_fusion(kn_ctx *ctx, const Graph *g, const Schedule *s)
{
    if (!log_on(ctx, LOG_FUSION)) return;
    size_t n = sched_dump(g, s, NULL, 0);
    char *text = kn_alloc(ctx, n + 1);
    if (!text) return;
    sched_dump(g, s, text, n + 1);
    log_text(ctx, LOG_FUSION, text);
    kn_dealloc(ctx, text, n + 1);
}

/* Backend interp: every node but the inputs, in order, for graph_run. */
static int all_nodes(kn_ctx *ctx, Program *p)
{
    p->all = arena_alloc(&p->arena, p->g->n * sizeof *p->all);
    if (!p->all) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling");
    for (uint32_t v = 1; v < p->g->n; v++)
        if (p->g->nodes[v].op != OP_INPUT) p->all[p->nall++] = v;
    return 0;
}

static int lower_steps(kn_ctx *ctx, Program *p, const Schedule *s, ExprTable *ex, int interp_only)
{
    if (interp_only) return all_nodes(ctx, p);
    p->steps = arena_alloc(&p->arena, (size_t)(s->nkernels ? s->nkernels : 1) * sizeof *p->steps);
    if (!p->steps) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling");
    for (int i = 0; i < s->nkernels; i++) {
        Step *st = &p->steps[p->nsteps++];
        st->node = s->kernels[i];
        st->interp = interp_only;
        if (interp_only) continue;
        uint32_t d = s->dot[st->node] ? s->dot[st->node] : p->g->nodes[st->node].op == OP_DOT ? st->node : 0;
        if (d && p->t && make_gemm(p, s, st, d)) {
            st->dot = d;
            log_line(ctx, LOG_FUSION, "%%%" PRIu32 ": dot %%%" PRIu32 " through %s's gemm template%s", st->node, d,
                     p->t->name, d == st->node ? "" : ", the rest of the kernel its epilogue on each tile");
            if (d == st->node) continue;
            /* the rest of the kernel as the template's epilogue, on each tile */
            if (!(st->k = arena_alloc(&p->arena, sizeof *st->k))) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling");
            LoopOptions simplify = {0, 0, LOOPOPT_NO_COLLAPSE | LOOPOPT_NO_MARK}; /* its loops are the tile's */
            if (lower_epilogue(ctx, p->g, s, st->node, ex, &p->arena, st->k) || ir_verify(ctx, st->k) ||
                loopopt_run(ctx, st->k, &simplify) || ir_verify(ctx, st->k))
                return ctx->status;
            st->gemm->epilogue = st->k->name;
            log_kernel(ctx, st->k);
            continue;
        }
        st->k = arena_alloc(&p->arena, sizeof *st->k);
        if (!st->k) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling");
        int r = lower_kernel(ctx, p->g, s, st->node, ex, &p->arena, st->k);
        if (r == LOWER_INTERP) st->interp = 1, st->k = NULL;
        else if (r) return r;
        else if (ir_verify(ctx, st->k) || loopopt_run(ctx, st->k, NULL) || ir_verify(ctx, st->k)) return ctx->status;
        else log_kernel(ctx, st->k);
    }
    return 0;
}

/* ---- max-autotune ----
 * For each dot through the template and each kernel with an accumulating
 * vector loop, candidates (the template's cache blocks; the loops' vector
 * widths, which a target turns into accumulator lanes) are rendered side by
 * side into the one unit, timed on scratch buffers of the right sizes on
 * the thread pool, and the fastest becomes the step's. A winner is
 * remembered by a hash of what was tuned (the spec, or the kernel's text
 * less its name) and the target: in this process (a table of TUNE_MEMO
 * entries; compile from one thread at a time in this mode) and, where
 * $KILN_CACHE_DIR is set, in its autotune.txt ("key winner" lines), so a
 * later compile renders the winner alone. */

#define TUNE_N 4
#define TUNE_MEMO 256
#define TUNE_REPS 12              /* runs of each candidate, at most (the first warms it) */
#define TUNE_NS 100000000ull      /* after 3, no more once the step's runs took this long */
static const int tune_blocks[TUNE_N][2] = {{0, 0}, {128, 48}, {384, 144}, {192, 240}}; /* kc, mc; 0: defaults */
static const uint32_t tune_widths[TUNE_N] = {8, 16, 32, 64};

typedef struct Tune {
    uint64_t key;
    int n;              /* candidates to time */
    Kernel *k[TUNE_N];  /* a loop kernel's candidates */
    GemmSpec g[TUNE_N]; /* or a dot's */
    char name[TUNE_N][48];
    void *fn[TUNE_N];
} Tune;

static struct {
    uint64_t key;
    int win;
} tune_memo[TUNE_MEMO];
static int tune_nmemo;

static uint64_t fnv(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

static int tune_file(char *path, size_t cap)
{
    const char *dir = getenv("KILN_CACHE_DIR");
    return dir && *dir && snprintf(path, cap, "%s/autotune.txt", dir) < (int)cap;
}

static void tune_memo_add(uint64_t key, int win)
{
    if (tune_nmemo < TUNE_MEMO) tune_memo[tune_nmemo].key = key, tune_memo[tune_nmemo++].win = win;
}

/* The remembered winner of key, or -1. */
static int tune_lookup(uint64_t key)
{
    char path[1024], why[256];
    void *data;
    size_t size;
    for (int i = 0; i < tune_nmemo; i++)
        if (tune_memo[i].key == key) return tune_memo[i].win;
    if (!tune_file(path, sizeof path) || port_read_file(path, &data, &size, why)) return -1;
    int win = -1;
    for (const char *q = data, *end = q + size; q < end;) {
        const char *nl = memchr(q, '\n', (size_t)(end - q));
        char line[64];
        size_t n = (size_t)((nl ? nl : end) - q);
        unsigned long long k;
        int w;
        if (n < sizeof line) {
            memcpy(line, q, n), line[n] = 0;
            if (sscanf(line, "%16llx %d", &k, &w) == 2 && k == key && w >= 0 && w < TUNE_N) win = w; /* the last */
        }
        q = nl ? nl + 1 : end;
    }
    free(data);
    if (win >= 0) tune_memo_add(key, win);
    return win;
}

static void tune_store(uint64_t key, int win)
{
    char path[1024], why[256], line[64];
    void *data = NULL;
    size_t size = 0;
    tune_memo_add(key, win);
    if (!tune_file(path, sizeof path)) return;
    if (port_read_file(path, &data, &size, why)) data = NULL, size = 0;
    int n = snprintf(line, sizeof line, "%016llx %d\n", (unsigned long long)key, win);
    char *all = malloc(size + (size_t)n);
    if (all) {
        if (size) memcpy(all, data, size);
        memcpy(all + size, line, (size_t)n);
        port_write_file(path, all, size + (size_t)n, why); /* a cache: failing to write it is no error */
    }
    free(all);
    free(data);
}

/* The vector loops of k that accumulate (what their width changes), set
 * to width unless 0; how many. */
static int lane_loops(Kernel *k, IrRef s, uint32_t width)
{
    int n = 0;
    for (; s; s = k->nodes[s].next) {
        IrNode *x = &k->nodes[s];
        if (x->kind != IR_LOOP) continue;
        n += lane_loops(k, x->child, width);
        if (x->dtype != LOOP_VECTOR) continue;
        for (IrRef t = x->child; t; t = k->nodes[t].next)
            if (k->nodes[t].kind == IR_UPDATE) {
                if (width) x->width = width;
                n++;
                break;
            }
    }
    return n;
}

/* A copy of k with nodes of its own (widths of its own) under another name. */
static Kernel *kernel_copy(Program *p, const Kernel *k, const char *name)
{
    Kernel *c = arena_alloc(&p->arena, sizeof *c);
    IrNode *nodes = arena_alloc(&p->arena, k->n * sizeof *nodes);
    if (!c || !nodes) return NULL;
    *c = *k;
    memcpy(nodes, k->nodes, k->n * sizeof *nodes);
    c->nodes = nodes, c->cap = k->n;
    c->hash = NULL, c->hcap = 0; /* no value is built in a copy */
    snprintf(c->name, sizeof c->name, "%s", name);
    return c;
}

static uint64_t kernel_key(kn_ctx *ctx, const Program *p, const Kernel *k)
{
    size_t n = ir_print(k, NULL, 0);
    char *text = kn_alloc(ctx, n + 1);
    uint64_t h = fnv(14695981039346656037ull, p->t->name, strlen(p->t->name));
    if (!text) return 0;
    ir_print(k, text, n + 1);
    const char *at = strchr(text, '(');
    h = fnv(h, at ? at : text, strlen(at ? at : text));
    kn_dealloc(ctx, text, n + 1);
    return h;
}

static uint64_t gemm_key(const Program *p, const GemmSpec *g)
{
    char text[320];
    int n = snprintf(text, sizeof text, "%s gemm %d %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %d %d %d",
                     p->t->name, g->dtype, (long long)g->batch, (long long)g->M, (long long)g->N, (long long)g->K,
                     (long long)g->sa_b, (long long)g->sa_m, (long long)g->sa_k, (long long)g->sb_b,
                     (long long)g->sb_k, (long long)g->sb_n, g->bias, g->act, g->epilogue != NULL);
    return fnv(14695981039346656037ull, text, (size_t)n);
}

/* Candidates for the steps that have them, or their remembered winners. */
static int tune_prepare(kn_ctx *ctx, Program *p)
{
    for (int s = 0; s < p->nsteps; s++) {
        Step *st = &p->steps[s];
        if (st->interp || (!st->gemm && (!st->k || st->k->tile || !lane_loops(st->k, st->k->body, 0)))) continue;
        const char *what = st->gemm ? st->gemm->name : st->k->name;
        uint64_t key = st->gemm ? gemm_key(p, st->gemm) : kernel_key(ctx, p, st->k);
        int win = key ? tune_lookup(key) : -1;
        if (win >= 0) { /* known: the winner alone */
            if (st->gemm) st->gemm->kc = tune_blocks[win][0], st->gemm->mc = tune_blocks[win][1];
            else lane_loops(st->k, st->k->body, tune_widths[win]);
            p->tune_cached++;
            log_line(ctx, LOG_PERF, "autotune %s: candidate %d, remembered", what, win);
            continue;
        }
        Tune *t = arena_alloc(&p->arena, sizeof *t);
        if (!t) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling");
        memset(t, 0, sizeof *t);
        t->key = key;
        for (int i = 0; i < TUNE_N; i++) {
            snprintf(t->name[i], sizeof t->name[i], "%.30s_t%d", what, i);
            if (st->gemm) {
                t->g[i] = *st->gemm;
                t->g[i].name = t->name[i];
                t->g[i].kc = tune_blocks[i][0], t->g[i].mc = tune_blocks[i][1];
            } else {
                if (!(t->k[i] = kernel_copy(p, st->k, t->name[i]))) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling");
                lane_loops(t->k[i], t->k[i]->body, tune_widths[i]);
            }
        }
        t->n = TUNE_N;
        st->tune = t;
    }
    return 0;
}

/* Elements of a buffer that a strided operand reads: its largest index + 1. */
static int64_t extent(int64_t b, int64_t r, int64_t c, int64_t sb, int64_t sr, int64_t sc)
{
    return (b - 1) * sb + (r - 1) * sr + (c - 1) * sc + 1;
}

/* Scratch of n elements of dt (bytes in *bytes), values in [-1, 1) where it is a float. */
static void *scratch(kn_ctx *ctx, kn_dtype dt, int64_t n, size_t *bytes)
{
    size_t es = kn_dtype_size(dt);
    unsigned char *m;
    *bytes = (size_t)(n > 0 ? n : 1) * es;
    if (!(m = kn_alloc(ctx, *bytes))) return NULL;
    memset(m, 0, *bytes);
    for (int64_t i = 0; dt_is_float(dt) && i < n; i++) dt_store(dt, m + (size_t)i * es, (double)(i % 61) / 30.5 - 1);
    return m;
}

/* Times every candidate of step st (the fastest of a few runs each, taken
 * in turns after one that warms it) and makes the fastest the step's. */
static int tune_step(kn_ctx *ctx, Program *p, Step *st)
{
    Tune *t = st->tune;
    const Kernel *k = st->gemm ? st->k : t->k[0]; /* whose buffers: the loop kernel's, or the epilogue's */
    void *b[65], *eb[65], *mem[68];
    size_t bytes[68];
    int nmem = 0, ok = 1, nb = k ? k->nbufs : 0;
    KnParallel par = {port_parallel_for, port_threads()};
    for (int i = 0; i < nb && ok; i++) {
        int64_t n = 0;
        ok = expr_as_const(k->ex, k->bufs[i].size, &n);
        eb[i] = mem[nmem] = ok ? scratch(ctx, (kn_dtype)k->bufs[i].dtype, n, &bytes[nmem]) : NULL;
        ok = ok && mem[nmem++];
    }
    eb[nb] = &par;
    if (st->gemm && ok) {
        const GemmSpec *g = st->gemm;
        kn_dtype dt = g->dtype == GEMM_F32 ? KN_F32 : KN_F64;
        if (!nb) b[0] = mem[nmem] = scratch(ctx, dt, g->batch * g->M * g->N, &bytes[nmem]), nmem++;
        else b[0] = eb[0]; /* C is the epilogue's output */
        b[1] = mem[nmem] = scratch(ctx, dt, extent(g->batch, g->M, g->K, g->sa_b, g->sa_m, g->sa_k), &bytes[nmem]), nmem++;
        b[2] = mem[nmem] = scratch(ctx, dt, extent(g->batch, g->K, g->N, g->sb_b, g->sb_k, g->sb_n), &bytes[nmem]), nmem++;
        b[3] = NULL, b[4] = &par, b[5] = nb ? eb : NULL;
        for (int i = 0; i < nmem; i++) ok = ok && mem[i];
    } else if (ok) {
        memcpy(b, eb, sizeof eb);
    }
    uint64_t best[TUNE_N], spent = 0;
    for (int i = 0; i < t->n; i++) best[i] = UINT64_MAX;
    for (int rep = 0; rep < TUNE_REPS && ok && (rep < 3 || spent < TUNE_NS); rep++)
        for (int i = 0; i < t->n; i++) {
            uint64_t t0 = port_now_ns();
            p->t->run(t->fn[i], b, st->gemm ? NULL : t->k[i]);
            uint64_t dt = port_now_ns() - t0;
            spent += dt;
            if (rep && dt < best[i]) best[i] = dt;
        }
    for (int i = 0; i < nmem; i++) kn_dealloc(ctx, mem[i], bytes[i]);
    if (!ok) return kn_errs(ctx, KN_ENOMEM, "out of memory autotuning %s", t->name[0]);
    int win = 0;
    for (int i = 1; i < t->n; i++) win = best[i] < best[win] ? i : win;
    log_line(ctx, LOG_PERF, "autotune %s: candidate %d of %d, %.3f ms (candidate 0: %.3f ms)", t->name[win], win, t->n,
             (double)best[win] / 1e6, (double)best[0] / 1e6);
    if (st->gemm) *st->gemm = t->g[win], st->gemm->name = t->name[win];
    else st->k = t->k[win];
    st->fn = t->fn[win];
    tune_store(t->key, win);
    p->tuned++;
    return 0;
}

/* Whether two dots can run one template unit: the same spec but for the
 * names (each passes its own epilogue entry). */
static int same_gemm(const GemmSpec *a, const GemmSpec *b)
{
    return a->dtype == b->dtype && a->batch == b->batch && a->M == b->M && a->N == b->N && a->K == b->K &&
           a->sa_b == b->sa_b && a->sa_m == b->sa_m && a->sa_k == b->sa_k && a->sb_b == b->sb_b &&
           a->sb_k == b->sb_k && a->sb_n == b->sb_n && a->bias == b->bias && a->act == b->act &&
           !a->epilogue == !b->epilogue && a->kc == b->kc && a->mc == b->mc;
}

/* Renders every kernel into one unit, compiles and loads it, finds each entry. */
static int load_kernels(kn_ctx *ctx, Program *p)
{
    const Kernel **ks = arena_alloc(&p->arena, (size_t)(p->nsteps ? p->nsteps : 1) * TUNE_N * sizeof *ks);
    if (!ks) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling");
    int nk = 0, ng = 0;
    for (int s = 0; s < p->nsteps; s++) {
        const Step *st = &p->steps[s];
        if (st->gemm) ng++;
        if (st->interp || !st->k) continue;
        if (st->tune && !st->gemm)
            for (int i = 0; i < st->tune->n; i++) ks[nk++] = st->tune->k[i];
        else ks[nk++] = st->k; /* a dot's epilogue too */
    }
    p->ninterp = 0;
    for (int s = 0; s < p->nsteps; s++) p->ninterp += p->steps[s].interp;
    p->nkernels = p->nsteps - p->ninterp;
    if (!nk && !ng) return 0;
    /* one template per distinct dot spec (a transformer's layers repeat theirs) */
    for (int s = 0; s < p->nsteps; s++) {
        Step *st = &p->steps[s];
        st->shares = -1;
        for (int e = 0; e < s && st->gemm && !st->tune && st->shares < 0; e++)
            if (p->steps[e].gemm && !p->steps[e].tune && p->steps[e].shares < 0 && same_gemm(p->steps[e].gemm, st->gemm))
                st->shares = e;
    }
    /* one unit: the loop kernels, then each dot's template */
    size_t len = nk ? p->t->render(ks, nk, NULL, 0) : 0;
    for (int s = 0; s < p->nsteps; s++) {
        const Step *st = &p->steps[s];
        for (int i = 0; st->gemm && st->shares < 0 && i < (st->tune ? st->tune->n : 1); i++)
            len += strlen(PORT_UNIT) + p->t->render_dot(st->tune ? &st->tune->g[i] : st->gemm, NULL, 0);
    }
    char *src = arena_alloc(&p->arena, len + 1), why[512];
    if (!src) return kn_errs(ctx, KN_ENOMEM, "out of memory for %zu bytes of generated code", len);
    size_t at = nk ? p->t->render(ks, nk, src, len + 1) : 0;
    for (int s = 0; s < p->nsteps; s++) {
        const Step *st = &p->steps[s];
        for (int i = 0; st->gemm && st->shares < 0 && i < (st->tune ? st->tune->n : 1); i++) {
            memcpy(src + at, PORT_UNIT, strlen(PORT_UNIT) + 1); /* a unit of its own (port.h) */
            at += strlen(PORT_UNIT);
            at += p->t->render_dot(st->tune ? &st->tune->g[i] : st->gemm, src + at, len + 1 - at);
        }
    }
    p->code_bytes = len;
    log_text(ctx, LOG_OUTPUT_CODE, src);
    if (!(p->module = p->t->load(src, why))) return kn_errs(ctx, KN_EUNSUPPORTED, "backend %s: %s", p->t->name, why);
    for (int s = 0; s < p->nsteps; s++) {
        Step *st = &p->steps[s];
        for (int i = 0; st->tune && i < st->tune->n; i++)
            if (!(st->tune->fn[i] = p->t->sym(p->module, st->tune->name[i])))
                return kn_errs(ctx, KN_EINVAL, "backend %s: no symbol %s in the generated code", p->t->name,
                               st->tune->name[i]);
        if (st->tune) {
            if (tune_step(ctx, p, st)) return ctx->status;
            continue;
        }
        const char *name = st->gemm ? p->steps[st->shares < 0 ? s : st->shares].gemm->name : st->k ? st->k->name : NULL;
        if (!st->interp && !(st->fn = p->t->sym(p->module, name)))
            return kn_errs(ctx, KN_EINVAL, "backend %s: no symbol %s in the generated code", p->t->name, name);
        if (st->gemm && st->k && !(st->epi = p->t->sym(p->module, st->k->name)))
            return kn_errs(ctx, KN_EINVAL, "backend %s: no symbol %s in the generated code", p->t->name, st->k->name);
    }
    return 0;
}

static const Target *target_of(CompileBackend b)
{
    return b == BACKEND_TCC ? &kn_target_tcc : b == BACKEND_C ? &kn_target_c : NULL;
}

/* The pipeline. */
Program *compile_graph(kn_ctx *ctx, const Graph *g, const uint32_t *outs, int nouts, const CompileOpts *o)
{
    Program *p = kn_alloc(ctx, sizeof *p);
    if (!p) return kn_err(ctx, KN_ENOMEM, "out of memory compiling");
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->g = g;
    arena_init(&p->arena, ctx);
    p->t = target_of(o ? o->backend : BACKEND_C);
    if (p->t && !p->t->available()) p->t = NULL; /* falls back to the interpreter */
    p->outs = arena_alloc(&p->arena, (size_t)(nouts ? nouts : 1) * sizeof *p->outs);
    ExprTable ex;
    expr_init(&ex, ctx);
    Schedule s;
    int err = !p->outs || graph_verify(ctx, g);
    if (!err) memcpy(p->outs, outs, (size_t)nouts * sizeof *outs), p->nouts = nouts;
    err = err || sched_build(ctx, g, outs, nouts, &p->arena, &s);
    if (!err) log_fusion(ctx, g, &s);
    err = err || lower_steps(ctx, p, &s, &ex, p->t == NULL);
    err = err || plan(ctx, p);
    err = err || (p->t && o && o->mode == KN_MODE_MAX_AUTOTUNE && tune_prepare(ctx, p));
    err = err || (p->t && load_kernels(ctx, p)); /* and times the candidates */
    expr_free(&ex);
    if (err) {
        program_free(p);
        return NULL;
    }
    return p;
}

/* ---- running ----
 * What a run needs beyond the arena is made at the first run and kept
 * (run_init): the table of node values, a handle over the arena bytes of
 * each value an interpreter step reads or writes, and each output's
 * storage. So a later run allocates nothing but, in the default mode, one
 * handle per output: the caller's.
 *
 * Outputs (p->reuse). FRESH: new tensors each run, nothing kept (eager's
 * single-op programs, whose outputs escape). POOL (kn_compile's default
 * mode): a new handle per output, which the caller may keep as long as it
 * likes; its storage is reused only once no handle but the program's own
 * refers to it (each output has up to two storages, so an output that the
 * caller keeps while calling again, a .grad, say, alternates between them
 * instead of allocating each time). STATIC (reduce-overhead): the
 * program's own handles over one storage per output, which the next run
 * overwrites: torch.compile's CUDA-graph contract (kiln.h). */

/* The value table, interpreter views and output pool; 0 or an error. */
static int run_init(Program *p)
{
    kn_ctx *ctx = p->ctx;
    size_t nv = (size_t)p->g->n;
    p->vals = kn_alloc(ctx, nv * sizeof *p->vals);
    p->view = kn_alloc(ctx, nv * sizeof *p->view);
    p->pool = kn_alloc(ctx, (size_t)(2 * p->nouts + 1) * sizeof *p->pool);
    p->fresh = kn_alloc(ctx, (size_t)p->nouts + 1);
    p->older = kn_alloc(ctx, (size_t)p->nouts + 1);
    if (!p->vals || !p->view || !p->pool || !p->fresh || !p->older) return kn_errs(ctx, KN_ENOMEM, "out of memory running a program");
    memset(p->view, 0, nv * sizeof *p->view);
    memset(p->pool, 0, (size_t)(2 * p->nouts + 1) * sizeof *p->pool);
    return 0;
}

/* A tensor over the arena (or an output's storage) for an interpreter step:
 * made at the first run, kept by the program. */
static kn_tensor *view_of(Program *p, uint32_t v, kn_tensor *const *vals)
{
    if (vals[v]) return vals[v];
    if (p->view[v]) return p->view[v];
    const Node *n = &p->g->nodes[v];
    return p->view[v] = tensor_own(p->ctx, tensor_borrow(p->ctx, (char *)p->mem + p->offset[v], (kn_dtype)n->dtype,
                                                         n->ndim, n->shape));
}

static kn_status run_interp(Program *p, const Step *st, kn_tensor **vals)
{
    const Node *n = &p->g->nodes[st->node];
    kn_tensor *src[3] = {NULL, NULL, NULL};
    for (int i = 0; i < n->nsrc; i++)
        if (!(src[i] = view_of(p, n->src[i], vals))) return p->ctx->status;
    kn_tensor *out = view_of(p, st->node, vals);
    if (!out) return p->ctx->status;
    return interp_run(p->ctx, (Op)n->op, out, src, &n->p);
}

static void *buffer_ptr(Program *p, uint32_t u, kn_tensor **vals)
{
    return vals[u] ? tensor_ptr(vals[u], vals[u]->offset) : (char *)p->mem + p->offset[u];
}

static kn_status run_gemm(Program *p, const Step *st, kn_tensor **vals)
{
    size_t es = kn_dtype_size((kn_dtype)p->g->nodes[st->node].dtype);
    /* b[4]: the SIMD GEMM splits its columns over the port's threads (the scalar one ignores it);
     * b[5]: the buffers of its epilogue */
    KnParallel par = {port_parallel_for, port_threads()};
    void *eb[65];
    if (st->k && st->k->nbufs > 64) return kn_errs(p->ctx, KN_EUNSUPPORTED, "kernel %s reads %d buffers", st->k->name, st->k->nbufs);
    for (int b = 0; st->k && b < st->k->nbufs; b++) eb[b] = buffer_ptr(p, st->k->bufs[b].node, vals);
    if (st->k) eb[st->k->nbufs] = &par;
    void *bufs[7] = {buffer_ptr(p, st->node, vals), (char *)buffer_ptr(p, st->root[0], vals) + st->off[0] * es,
                     (char *)buffer_ptr(p, st->root[1], vals) + st->off[1] * es, NULL, &par, eb, st->epi};
    p->t->run(st->fn, bufs, NULL);
    return KN_OK;
}

static kn_status run_kernel(Program *p, const Step *st, kn_tensor **vals)
{
    if (st->gemm) return run_gemm(p, st, vals);
    void *bufs[65];
    /* one past the buffers: the thread pool a parallel kernel splits its outer loop over */
    KnParallel par = {port_parallel_for, port_threads()};
    if (st->k->nbufs > 64) return kn_errs(p->ctx, KN_EUNSUPPORTED, "kernel %s reads %d buffers", st->k->name, st->k->nbufs);
    for (int b = 0; b < st->k->nbufs; b++) bufs[b] = buffer_ptr(p, st->k->bufs[b].node, vals);
    bufs[st->k->nbufs] = &par;
    p->t->run(st->fn, bufs, st->k);
    return KN_OK;
}

/* The graph's input k, contiguous and of the recorded dtype and shape (a
 * copy, on the run's scope, where it is not contiguous). */
static kn_tensor *bind_input(Program *p, const Node *n, kn_tensor *t)
{
    if (!t) return kn_err(p->ctx, KN_EINVAL, "input %lld is NULL", (long long)n->p.i[0]);
    if (t->dtype != n->dtype || t->ndim != n->ndim || memcmp(t->shape, n->shape, n->ndim * sizeof(Dim)) != 0)
        return kn_err(p->ctx, KN_ESHAPE, "input %lld: expected %s with the shape it was compiled for",
                      (long long)n->p.i[0], kn_dtype_name((kn_dtype)n->dtype));
    if (kn_is_contiguous(t)) return t;
    Params cp;
    memset(&cp, 0, sizeof cp);
    cp.dtype = t->dtype;
    return prim(p->ctx, OP_CAST, &t, &cp); /* a contiguous copy */
}

/* Output i's tensor for this run (a compiled backend): the program's own
 * handle under reuse, else a new handle over one of its two storages that
 * nobody else refers to now (a new storage where both are taken). */
static kn_tensor *output_of(Program *p, int i)
{
    kn_ctx *ctx = p->ctx;
    const Node *n = &p->g->nodes[p->outs[i]];
    kn_tensor **slot = &p->pool[2 * i];
    if (p->reuse == PROGRAM_FRESH) return kn_keep(ctx, tensor_new(ctx, (kn_dtype)n->dtype, n->ndim, n->shape));
    if (p->reuse == PROGRAM_STATIC) {
        if (!slot[0]) slot[0] = tensor_own(ctx, tensor_new(ctx, (kn_dtype)n->dtype, n->ndim, n->shape));
        return slot[0];
    }
    int j = slot[0] && slot[0]->st->refs == 1 ? 0 : slot[1] && slot[1]->st->refs == 1 ? 1 : -1;
    if (j < 0) { /* both storages are held elsewhere (or not made yet): a new one in the older slot */
        kn_tensor *h = tensor_own(ctx, tensor_new(ctx, (kn_dtype)n->dtype, n->ndim, n->shape));
        if (!h) return NULL;
        j = !slot[0] ? 0 : !slot[1] ? 1 : p->older[i];
        tensor_unhold(ctx, slot[j]);
        slot[j] = h;
    }
    p->older[i] = (uint8_t)!j;
    return kn_keep(ctx, tensor_view(ctx, slot[j], n->ndim, slot[j]->shape, slot[j]->stride, 0));
}

kn_status program_run(Program *p, kn_tensor *const *inputs, int ninputs, kn_tensor **outs)
{
    kn_ctx *ctx = p->ctx;
    if (!p->vals && run_init(p)) return ctx->status;
    kn_tensor **vals = p->vals;
    uint8_t *fresh = p->fresh; /* outputs made here (not inputs passed through) */
    memset(vals, 0, p->g->n * sizeof *vals);
    memset(fresh, 0, (size_t)p->nouts);
    int was = kn_set_grad_enabled(ctx, 0);
    /* a scope for what a run makes and drops (the interpreter's values, copies of inputs), only
     * where there is any: closing one walks every live tensor */
    int scoped = !p->t || p->ninterp > 0;
    for (int k = 0; k < ninputs && !scoped; k++) scoped = inputs[k] && !kn_is_contiguous(inputs[k]);
    if (scoped) kn_scope_begin(ctx);
    kn_status s = KN_OK;
    for (uint32_t v = 1; v < p->g->n && !s; v++) {
        const Node *n = &p->g->nodes[v];
        if (n->op != OP_INPUT) continue;
        int64_t k = n->p.i[0];
        if (k >= ninputs) s = kn_errs(ctx, KN_EINVAL, "the program reads input %lld; %d given", (long long)k, ninputs);
        else if (!(vals[v] = bind_input(p, n, inputs[k]))) s = ctx->status;
    }
    if (!p->t && !s) { /* backend interp: the oracle runs every node */
        graph_run_bind(p->g, vals);
        s = graph_run(ctx, p->g, p->all, p->nall, vals);
        for (int i = 0; i < p->nouts && !s; i++)
            if (p->g->nodes[p->outs[i]].op != OP_INPUT) kn_keep(ctx, vals[p->outs[i]]), fresh[i] = 1;
    }
    for (int i = 0; i < p->nouts && !s && p->t; i++) {
        if (vals[p->outs[i]]) continue;
        if (!(vals[p->outs[i]] = output_of(p, i))) s = ctx->status;
        fresh[i] = p->reuse != PROGRAM_STATIC;
    }
    for (int i = 0; i < p->nsteps && !s && p->t; i++)
        s = p->steps[i].interp ? run_interp(p, &p->steps[i], vals) : run_kernel(p, &p->steps[i], vals);
    for (int i = 0; i < p->nouts; i++) outs[i] = s ? NULL : vals[p->outs[i]];
    if (scoped) kn_scope_end(ctx); /* copies and the interpreter's values; the fresh outputs are kept */
    for (int i = 0; i < p->nouts; i++) {
        if (!fresh[i] || !vals[p->outs[i]]) continue;
        if (s) { /* a failed run hands nothing back */
            vals[p->outs[i]]->flags &= (uint8_t)~TF_KEPT;
            kn_free(ctx, vals[p->outs[i]]);
            continue;
        }
        outs[i]->flags &= (uint8_t)~TF_KEPT; /* into the caller's scope */
        outs[i]->scope = ctx->scope;
    }
    kn_set_grad_enabled(ctx, was);
    return s;
}

void program_set_reuse(Program *p, int mode) { p->reuse = mode; }

void program_free(Program *p)
{
    if (!p) return;
    if (p->module) p->t->unload(p->module);
    kn_dealloc(p->ctx, p->mem, p->arena_bytes);
    for (uint32_t v = 0; p->view && v < p->g->n; v++) tensor_unhold(p->ctx, p->view[v]);
    for (int i = 0; p->pool && i < 2 * p->nouts; i++) tensor_unhold(p->ctx, p->pool[i]);
    kn_dealloc(p->ctx, p->vals, p->g->n * sizeof *p->vals);
    kn_dealloc(p->ctx, p->view, p->g->n * sizeof *p->view);
    kn_dealloc(p->ctx, p->pool, (size_t)(2 * p->nouts + 1) * sizeof *p->pool);
    kn_dealloc(p->ctx, p->fresh, (size_t)p->nouts + 1);
    kn_dealloc(p->ctx, p->older, (size_t)p->nouts + 1);
    Arena a = p->arena;
    kn_dealloc(p->ctx, p, sizeof *p);
    arena_free(&a);
}

void program_stats(const Program *p, ProgramStats *st)
{
    st->kernels = p->nkernels;
    st->interp_steps = p->ninterp;
    st->arena_bytes = p->arena_bytes;
    st->code_bytes = p->code_bytes;
    st->tuned = p->tuned;
    st->tune_cached = p->tune_cached;
    st->backend = p->t ? p->t->name : "interp";
}
