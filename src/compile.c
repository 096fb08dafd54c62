/*
 * compile.c — the pipeline, in one visible function (compile_graph), and
 * the programs it makes.
 *
 *   graph -> schedule (fuse) -> lower to loop IR -> loop passes -> verify -> plan memory
 *         -> render (target) -> compile and load (port) -> steps
 *
 * A program is a list of steps in topological order: a compiled kernel, or
 * one primitive the interpreter runs (gather and scatter_add until their
 * lowering lands; every node under backend interp). Every intermediate value
 * lives at a planned offset in one arena allocated at compile time, reused
 * once its last reader has run; outputs are fresh tensors per call.
 *
 * Requires: a graph of concrete shapes and its outputs. Produces: a Program
 * that program_run runs on input tensors, equal to the interpreter's result.
 */
#include <stdio.h>
#include <string.h>

#include "compile.h"
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
    GemmSpec *gemm;     /* or a dot through the target's template: */
    uint32_t root[2];   /* the buffers A and B are views of */
    int64_t off[2];     /* and where the views start, in elements */
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

/* The buffer a dot operand u is a view of, with u's strides and offset over
 * it, following permute, expand, slice and reshape. 0 if u is not such a view. */
static int operand_view(const Program *p, const Schedule *s, uint32_t u, uint32_t *root, int64_t *stride, int64_t *off)
{
    const Node *n = &p->g->nodes[u];
    if (s->materialised[u]) {
        *root = u, *off = 0;
        tensor_contig_strides(n->ndim, n->shape, stride);
        return 1;
    }
    if (kn_opinfo[n->op].cls != OC_MOVE || n->op == OP_PAD) return 0;
    const Node *m = &p->g->nodes[n->src[0]];
    int64_t st[KN_MAX_DIMS];
    if (!operand_view(p, s, n->src[0], root, st, off)) return 0;
    switch (n->op) {
    case OP_PERMUTE:
        for (int d = 0; d < n->ndim; d++) stride[d] = st[n->p.i[d]];
        return 1;
    case OP_EXPAND:
        for (int d = 0; d < n->ndim; d++) stride[d] = m->shape[d] == n->shape[d] ? st[d] : 0;
        return 1;
    case OP_SLICE:
        memcpy(stride, st, sizeof st);
        *off += n->p.i[1] * st[n->p.i[0]];
        stride[n->p.i[0]] *= n->p.i[3];
        return 1;
    default: { /* OP_RESHAPE: a view only where the strides allow one */
        kn_tensor t;
        memset(&t, 0, sizeof t);
        t.ndim = m->ndim;
        memcpy(t.shape, m->shape, sizeof t.shape);
        memcpy(t.stride, st, sizeof t.stride);
        return prim_view_strides(&t, n->ndim, n->shape, stride);
    }
    }
}

/* The one stride of the batch dims [0, nb), or 0 if they do not collapse. */
static int batch_stride(int nb, const Dim *shape, const int64_t *stride, int64_t *out)
{
    int64_t s = 0;
    int seen = 0;
    for (int d = nb - 1; d >= 0; d--) {
        if (shape[d] == 1) continue;
        if (!seen) s = stride[d], seen = 1;
        else if (stride[d] != s * shape[d + 1]) return 0; /* TODO with size-1 dims between */
    }
    *out = s;
    return 1;
}

/* A dot of f32 or f64 over operands that are views of buffers, as a GemmSpec. */
static int make_gemm(Program *p, const Schedule *s, Step *st)
{
    const Node *n = &p->g->nodes[st->node];
    int nd = n->ndim, nb = nd - 2;
    if (!p->t->render_dot || (n->dtype != KN_F32 && n->dtype != KN_F64)) return 0;
    int64_t sa[KN_MAX_DIMS], sb[KN_MAX_DIMS];
    if (!operand_view(p, s, n->src[0], &st->root[0], sa, &st->off[0]) ||
        !operand_view(p, s, n->src[1], &st->root[1], sb, &st->off[1]))
        return 0;
    GemmSpec g;
    memset(&g, 0, sizeof g);
    if (!batch_stride(nb, n->shape, sa, &g.sa_b) || !batch_stride(nb, n->shape, sb, &g.sb_b)) return 0;
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
        if (p->g->nodes[st->node].op == OP_DOT && p->t && make_gemm(p, s, st)) continue;
        st->k = arena_alloc(&p->arena, sizeof *st->k);
        if (!st->k) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling");
        int r = lower_kernel(ctx, p->g, s, st->node, ex, &p->arena, st->k);
        if (r == LOWER_INTERP) st->interp = 1, st->k = NULL;
        else if (r) return r;
        else if (ir_verify(ctx, st->k) || loopopt_run(ctx, st->k, NULL) || ir_verify(ctx, st->k)) return ctx->status;
    }
    return 0;
}

/* Renders every kernel into one unit, compiles and loads it, finds each entry. */
static int load_kernels(kn_ctx *ctx, Program *p)
{
    const Kernel **ks = arena_alloc(&p->arena, (size_t)(p->nsteps ? p->nsteps : 1) * sizeof *ks);
    if (!ks) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling");
    int nk = 0, ng = 0;
    for (int s = 0; s < p->nsteps; s++) {
        if (p->steps[s].gemm) ng++;
        else if (!p->steps[s].interp) ks[nk++] = p->steps[s].k;
    }
    p->nkernels = nk + ng;
    p->ninterp = p->nsteps - nk - ng;
    if (!nk && !ng) return 0;
    /* one unit: the loop kernels, then each dot's template */
    size_t len = nk ? p->t->render(ks, nk, NULL, 0) : 0;
    for (int s = 0; s < p->nsteps; s++)
        if (p->steps[s].gemm) len += p->t->render_dot(p->steps[s].gemm, NULL, 0);
    char *src = arena_alloc(&p->arena, len + 1), why[512];
    if (!src) return kn_errs(ctx, KN_ENOMEM, "out of memory for %zu bytes of generated code", len);
    size_t at = nk ? p->t->render(ks, nk, src, len + 1) : 0;
    for (int s = 0; s < p->nsteps; s++)
        if (p->steps[s].gemm) at += p->t->render_dot(p->steps[s].gemm, src + at, len + 1 - at);
    p->code_bytes = len;
    if (!(p->module = p->t->load(src, why))) return kn_errs(ctx, KN_EUNSUPPORTED, "backend %s: %s", p->t->name, why);
    for (int s = 0; s < p->nsteps; s++) {
        Step *st = &p->steps[s];
        const char *name = st->gemm ? st->gemm->name : st->k ? st->k->name : NULL;
        if (!st->interp && !(st->fn = p->t->sym(p->module, name)))
            return kn_errs(ctx, KN_EINVAL, "backend %s: no symbol %s in the generated code", p->t->name, name);
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
    err = err || lower_steps(ctx, p, &s, &ex, p->t == NULL);
    err = err || plan(ctx, p);
    err = err || (p->t && load_kernels(ctx, p));
    expr_free(&ex);
    if (err) {
        program_free(p);
        return NULL;
    }
    return p;
}

/* ---- running ---- */

/* A tensor over the arena (or an output's storage) for an interpreter step. */
static kn_tensor *view_of(Program *p, uint32_t v, kn_tensor *const *vals)
{
    if (vals[v]) return vals[v];
    const Node *n = &p->g->nodes[v];
    return tensor_borrow(p->ctx, (char *)p->mem + p->offset[v], (kn_dtype)n->dtype, n->ndim, n->shape);
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
    /* b[4]: the SIMD GEMM splits its columns over the port's threads (the scalar one ignores it) */
    KnParallel par = {port_parallel_for, port_threads()};
    void *bufs[5] = {buffer_ptr(p, st->node, vals), (char *)buffer_ptr(p, st->root[0], vals) + st->off[0] * es,
                     (char *)buffer_ptr(p, st->root[1], vals) + st->off[1] * es, NULL, &par};
    p->t->run(st->fn, bufs, NULL);
    return KN_OK;
}

static kn_status run_kernel(Program *p, const Step *st, kn_tensor **vals)
{
    if (st->gemm) return run_gemm(p, st, vals);
    void *bufs[64];
    if (st->k->nbufs > 64) return kn_errs(p->ctx, KN_EUNSUPPORTED, "kernel %s reads %d buffers", st->k->name, st->k->nbufs);
    for (int b = 0; b < st->k->nbufs; b++) {
        uint32_t u = st->k->bufs[b].node;
        bufs[b] = vals[u] ? tensor_ptr(vals[u], vals[u]->offset) : (char *)p->mem + p->offset[u];
    }
    p->t->run(st->fn, bufs, st->k);
    return KN_OK;
}

/* The graph's input k, contiguous and of the recorded dtype and shape. */
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

kn_status program_run(Program *p, kn_tensor *const *inputs, int ninputs, kn_tensor **outs)
{
    kn_ctx *ctx = p->ctx;
    kn_tensor **vals = kn_alloc(ctx, p->g->n * sizeof *vals);
    if (!vals) return kn_errs(ctx, KN_ENOMEM, "out of memory running a program");
    memset(vals, 0, p->g->n * sizeof *vals);
    int was = kn_set_grad_enabled(ctx, 0);
    kn_scope_begin(ctx);
    kn_status s = KN_OK;
    uint8_t *fresh = kn_alloc(ctx, (size_t)p->nouts + 1); /* outputs made here (not inputs passed through) */
    if (!fresh) s = kn_errs(ctx, KN_ENOMEM, "out of memory running a program");
    else memset(fresh, 0, (size_t)p->nouts + 1);
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
        const Node *n = &p->g->nodes[p->outs[i]];
        if (vals[p->outs[i]]) continue;
        if (!(vals[p->outs[i]] = kn_keep(ctx, tensor_new(ctx, (kn_dtype)n->dtype, n->ndim, n->shape)))) s = ctx->status;
        fresh[i] = 1;
    }
    for (int i = 0; i < p->nsteps && !s && p->t; i++)
        s = p->steps[i].interp ? run_interp(p, &p->steps[i], vals) : run_kernel(p, &p->steps[i], vals);
    for (int i = 0; i < p->nouts; i++) outs[i] = s ? NULL : vals[p->outs[i]];
    kn_scope_end(ctx); /* copies and borrowed views; the fresh outputs are kept */
    for (int i = 0; i < p->nouts; i++) {
        if (!fresh[i] || !vals[p->outs[i]]) continue;
        if (s) { /* a failed run hands nothing back */
            kn_free(ctx, vals[p->outs[i]]);
            continue;
        }
        outs[i]->flags &= (uint8_t)~TF_KEPT; /* into the caller's scope */
        outs[i]->scope = ctx->scope;
    }
    kn_set_grad_enabled(ctx, was);
    kn_dealloc(ctx, fresh, (size_t)p->nouts + 1);
    kn_dealloc(ctx, vals, p->g->n * sizeof *vals);
    return s;
}

void program_free(Program *p)
{
    if (!p) return;
    if (p->module) p->t->unload(p->module);
    kn_dealloc(p->ctx, p->mem, p->arena_bytes);
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
    st->backend = p->t ? p->t->name : "interp";
}
