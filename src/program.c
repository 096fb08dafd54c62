/*
 * program.c — running a compiled program, and what it keeps from one run
 * to the next. program_run binds the inputs, hands out the outputs as the
 * reuse mode says, and runs each step over the planned arena: a loop
 * kernel's entry, a dot through the target's template (or, in a program
 * generic in a size, the library's GEMM at this size's numbers) with its
 * epilogue, or one primitive on the interpreter. A dot whose weights are a
 * graph input may keep them packed across runs ("B kept packed", below).
 * KILN_LOGS=perf times every run but the first, step by step, and
 * program_free logs the profile; program_stats sums up a program.
 *
 * Requires: a Program from compile.c (compile_graph, or program_at for a
 * generic one; program.h: what it holds) and inputs of the dtypes and
 * shapes it was compiled for. Produces: its outputs, equal to the
 * interpreter's result.
 */
#include <stdio.h>
#include <string.h>

#include "compile.h"
#include "gemm_rt.h"
#include "log.h"
#include "partition.h" /* graph_run */
#include "program.h"
#include "target.h"
#include "../port/port.h"

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

/* ---- B kept packed ----
 * A dot packs its B into the template's column panels at every call: for
 * a weight (kn_compile's parameters are graph inputs) the same bytes each
 * inference call, ~17% of the mlp's. With keep_packed a step whose B is a
 * graph input keeps one packed copy across runs (NAME_bpack, gemm.h),
 * under a key: the storage B is in, where B starts and the storage's
 * stamp, which every write into a storage renews (core.h: tensor_assign,
 * so an optimizer step or kn_load; a compiled step's write-back, a swap of
 * bytes included; a program's outputs). A storage freed and another made
 * at the same address has a new stamp too. The copy is made at the second
 * run in a row that sees a key, the first packs in the call as before: a
 * training step, whose weights change at every step, never makes one, and
 * repeated inference packs once. A storage that is not kiln's (borrowed)
 * is never kept. The product is bitwise the same either way.
 * A Winograd dot whose A (the convolution's weights) is a graph input keeps
 * the weights' transform U the same way (GemmSpec.ukeep, NAME_upack), keyed
 * on A's storage, start and stamp: inference skips the transform, 16 x
 * channels out x channels in per call. */
typedef struct Packed {
    const Storage *st;  /* the key (st is compared, never read: it may be gone) */
    const void *at;
    uint64_t stamp;
    int ready;          /* 1: the copy holds B of this key */
    void *mem;          /* the copy's allocation, bytes + 64: the copy starts at its first 64-byte boundary */
    size_t bytes;
} Packed;

/* The value table, interpreter views and output pool; 0 or an error. */
static int run_init(Program *p)
{
    kn_ctx *ctx = p->ctx;
    size_t nv = (size_t)p->g->n;
    p->vals = kn_alloc(ctx, nv * sizeof *p->vals);
    p->view = kn_alloc_zeroed(ctx, nv * sizeof *p->view); /* program_free walks both */
    p->pool = kn_alloc_zeroed(ctx, (size_t)(2 * p->nouts + 1) * sizeof *p->pool);
    p->fresh = kn_alloc(ctx, (size_t)p->nouts + 1);
    p->older = kn_alloc(ctx, (size_t)p->nouts + 1);
    p->packed = kn_alloc_zeroed(ctx, (size_t)(p->nsteps + 1) * sizeof *p->packed);
    if (log_on(ctx, LOG_PERF) && p->t) p->prof_ns = kn_alloc_zeroed(ctx, (size_t)(p->nsteps + 1) * sizeof *p->prof_ns);
    if (p->vals && p->view && p->pool && p->fresh && p->older && p->packed) return 0;
    /* all or nothing: the next run tries again */
    kn_dealloc(ctx, p->vals, nv * sizeof *p->vals);
    kn_dealloc(ctx, p->view, nv * sizeof *p->view);
    kn_dealloc(ctx, p->pool, (size_t)(2 * p->nouts + 1) * sizeof *p->pool);
    kn_dealloc(ctx, p->fresh, (size_t)p->nouts + 1);
    kn_dealloc(ctx, p->older, (size_t)p->nouts + 1);
    kn_dealloc(ctx, p->packed, (size_t)(p->nsteps + 1) * sizeof *p->packed);
    p->vals = NULL, p->view = NULL, p->pool = NULL, p->fresh = p->older = NULL, p->packed = NULL;
    return kn_errs(ctx, KN_ENOMEM, "out of memory running a program");
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

/* Where a step finds node u. A value of no elements (a dim of size 0) may have no storage, or an
 * offset at the arena's end: it is bound to the run's zeroed cell instead, so that a checked index
 * read (ir.h: check), which falls back to element 0 of its buffer, still reads in bounds (the run then
 * fails with the index error) and a scatter_add's store there writes nowhere that matters. */
static void *buffer_ptr(Program *p, uint32_t u, kn_tensor **vals, int64_t *cell)
{
    if (node_bytes(&p->g->nodes[u]) == 0) return cell;
    return vals[u] ? tensor_ptr(vals[u], vals[u]->offset) : (char *)p->mem + p->offset[u];
}

typedef void (*TileFn)(void **b, int64_t t, int64_t m0, int64_t m1, int64_t n0, int64_t n1);

/* A generic program's dot of sizes in z0: the library's GEMM at this size's values (the step's gv),
 * then the epilogue on the whole of each batch's C, as the runtime template does (gemm.c). */
static kn_status run_rt_gemm(Program *p, const Step *st, kn_tensor **vals, void **eb, int64_t *cell)
{
    const GemmSpec *s = st->gemm;
    const int64_t *v = p->gv + GX_N * (st - p->steps);
    size_t es = s->dtype == GEMM_F32 ? 4 : 8;
    const GemmWindow *w = &s->win;
    int64_t win[19] = {w->t}; /* then n, c, h, w, ... at this size */
    memcpy(win + 1, v + GX_WIN, 18 * sizeof *win);
    KnRtGemm g;
    memset(&g, 0, sizeof g);
    g.C = buffer_ptr(p, st->node, vals, cell);
    g.A = (char *)buffer_ptr(p, st->root[0], vals, cell) + v[10] * (int64_t)es;
    g.B = (char *)buffer_ptr(p, st->root[1], vals, cell) + v[11] * (int64_t)es;
    g.batch = v[0], g.M = v[1], g.N = v[2], g.K = v[3];
    g.sa_b = v[4], g.sa_m = v[5], g.sa_k = v[6], g.sb_b = v[7], g.sb_k = v[8], g.sb_n = v[9];
    g.dtype = s->dtype, g.act = s->act;
    g.parallel_for = port_parallel_for, g.threads = port_threads();
    g.win = w->on ? win : NULL;
    kn_rt_gemm(&g);
    TileFn epi;
    *(void **)&epi = st->epi; /* object to function pointer: as dlsym's result is used */
    for (int64_t t = 0; st->k && t < g.batch; t++) epi(eb, t, 0, g.M, 0, g.N);
    return KN_OK;
}

typedef size_t (*BpackFn)(const void *B, void *dst);

KnParallel program_lends(const Program *p)
{
    KnParallel par = {port_parallel_for, port_threads(), ctx_scratch, p->ctx, kn_rt_conv, kn_rt_conv_work, kn_rt_gemm};
    return par;
}

/* The library's Winograd (spec.wino 2): the weights' transform of A, as BpackFn (kn_rt_wino_upack) */
static size_t wino_upack(const GemmSpec *s, const void *A, void *dst)
{
    KnRtGemm g;
    int64_t win[19];
    spec_rt_gemm(s, &g, win);
    g.A = A;
    return kn_rt_wino_upack(&g, dst);
}

static void *packed_at(const Packed *k) { return (char *)k->mem + (64 - (uintptr_t)k->mem % 64) % 64; }

/* Step st's weights (at B: its B, or its A where the spec keeps A's Winograd transform) packed or
 * transformed, or NULL: the call packs them. Out of memory is no error here: NULL. */
static void *kept_b(Program *p, const Step *st, kn_tensor **vals, const void *B)
{
    const kn_tensor *t = vals[st->root[st->gemm->ukeep ? 0 : 1]];
    Packed *k = &p->packed[st - p->steps];
    if (!st->bpack || !t || !t->st || t->st->borrowed) return NULL;
    if (k->st != t->st || k->at != B || k->stamp != t->st->stamp) { /* a key not seen last run */
        k->st = t->st, k->at = B, k->stamp = t->st->stamp, k->ready = 0;
        return NULL;
    }
    if (k->ready) return packed_at(k);
    BpackFn pack;
    *(void **)&pack = st->bpack; /* object to function pointer: as dlsym's result is used */
    size_t need = st->gemm->wino == 2 ? wino_upack(st->gemm, B, NULL) : pack(B, NULL);
    if (!need) return NULL;
    if (need > k->bytes) {
        kn_dealloc(p->ctx, k->mem, k->bytes ? k->bytes + 64 : 0);
        k->bytes = (k->mem = kn_alloc(p->ctx, need + 64)) ? need : 0;
        if (!k->mem) return NULL;
        log_line(p->ctx, LOG_PERF, "run: %s keeps %s, %zu bytes", st->gemm->name,
                 st->gemm->ukeep ? "its weights' Winograd transform" : "B packed", need);
    }
    if (st->gemm->wino == 2) wino_upack(st->gemm, B, packed_at(k));
    else pack(B, packed_at(k));
    k->ready = 1;
    return packed_at(k);
}

static kn_status run_gemm(Program *p, const Step *st, kn_tensor **vals)
{
    size_t es = kn_dtype_size((kn_dtype)p->g->nodes[st->node].dtype);
    /* b[4]: the SIMD GEMM splits its columns over the port's threads (the scalar one ignores it);
     * b[5]: the buffers of its epilogue, then the pool, an unused error cell and z0's value */
    KnParallel par = program_lends(p);
    void *eb[67];
    int64_t cell[8] = {0};
    if (st->k && st->k->nbufs > 64) return kn_errs(p->ctx, KN_EUNSUPPORTED, "kernel %s reads %d buffers", st->k->name, st->k->nbufs);
    for (int b = 0; st->k && b < st->k->nbufs; b++) eb[b] = buffer_ptr(p, st->k->bufs[b].node, vals, cell);
    if (st->k) eb[st->k->nbufs] = &par, eb[st->k->nbufs + 1] = NULL, eb[st->k->nbufs + 2] = p->shape;
    if (st->gx) return run_rt_gemm(p, st, vals, eb, cell);
    void *bufs[8] = {buffer_ptr(p, st->node, vals, cell),
                     (char *)buffer_ptr(p, st->root[0], vals, cell) + st->off[0] * es,
                     (char *)buffer_ptr(p, st->root[1], vals, cell) + st->off[1] * es, NULL, &par, eb, st->epi, NULL};
    if (st->bpack) bufs[7] = kept_b(p, st, vals, bufs[st->gemm->ukeep ? 1 : 2]);
    p->t->run(st->fn, bufs, NULL);
    return KN_OK;
}

static kn_status run_kernel(Program *p, const Step *st, kn_tensor **vals)
{
    if (st->gemm) return run_gemm(p, st, vals);
    void *bufs[67];
    /* one past the buffers: the thread pool a parallel kernel splits its outer loop over; two past:
     * the error cell where a check() of an index read at run time reports {1, index, bound} (ir.h);
     * three past: the shape symbols' values (z0), for a generic program's kernels */
    KnParallel par = program_lends(p);
    int64_t err[3] = {0, 0, 0}, cell[8] = {0};
    if (st->k->nbufs > 64) return kn_errs(p->ctx, KN_EUNSUPPORTED, "kernel %s reads %d buffers", st->k->name, st->k->nbufs);
    for (int b = 0; b < st->k->nbufs; b++) bufs[b] = buffer_ptr(p, st->k->bufs[b].node, vals, cell);
    bufs[st->k->nbufs] = &par;
    bufs[st->k->nbufs + 1] = err;
    bufs[st->k->nbufs + 2] = p->shape;
    p->t->run(st->fn, bufs, st->k);
    if (err[0]) { /* only gather and scatter_add read indices (lower.c), each the node of its kernel */
        const Node *n = &p->g->nodes[st->node];
        return interp_bad_index(p->ctx, (Op)n->op, &n->p, err[1], err[2]);
    }
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

/* Output i written over its input (CompileOpts.donate; compile.c, "outputs in place"): a new handle
 * over that input's storage, where the input is a whole contiguous storage of kiln's that no other
 * input or output of this run shares; else NULL (the output is made as usual). The default reuse mode only: an
 * eager program's outputs are new, reduce-overhead's the program's own. */
static kn_tensor *in_place(Program *p, int i, kn_tensor *const *inputs, int ninputs)
{
    int k = p->donate && p->reuse == PROGRAM_POOL ? p->donate[i] : -1;
    kn_tensor *t = k >= 0 && k < ninputs ? inputs[k] : NULL;
    const Node *n = &p->g->nodes[p->outs[i]];
    if (!t || !t->st || t->st->borrowed || t->offset || t->dtype != n->dtype || !kn_is_contiguous(t) ||
        t->st->bytes != node_bytes(n))
        return NULL;
    for (int j = 0; j < ninputs; j++)
        if (j != k && inputs[j] && inputs[j]->st == t->st) return NULL;
    for (int j = 0; j < p->nouts; j++)
        if (j != i && p->vals[p->outs[j]] && p->vals[p->outs[j]]->st == t->st) return NULL;
    return kn_keep(p->ctx, tensor_view(p->ctx, t, t->ndim, t->shape, t->stride, 0));
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
        if (!(vals[p->outs[i]] = in_place(p, i, inputs, ninputs)) && !(vals[p->outs[i]] = output_of(p, i)))
            s = ctx->status;
        else storage_stamp(ctx, vals[p->outs[i]]->st); /* written below: a storage kept may be one reused */
        fresh[i] = p->reuse != PROGRAM_STATIC;
    }
    uint64_t *prof = p->runs++ ? p->prof_ns : NULL; /* the first run touches the arena and outputs first */
    for (int i = 0; i < p->nsteps && !s && p->t; i++) {
        uint64_t t0 = prof ? port_now_ns() : 0;
        s = p->steps[i].interp ? run_interp(p, &p->steps[i], vals) : run_kernel(p, &p->steps[i], vals);
        if (prof) prof[i] += port_now_ns() - t0;
    }
    p->prof_runs += prof && !s;
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

static const char *step_name(const Program *p, const Step *st)
{
    return st->gemm ? st->gemm->name : st->k ? st->k->name : kn_opinfo[p->g->nodes[st->node].op].name;
}

/* KILN_LOGS=perf: where a program's runs but the first (which touches the arena and outputs for the
 * first time) went, step by step: the totals of dots, loop kernels and interpreter steps, then the
 * PROFILE_TOP slowest steps of each kind, with their share of the whole. */
enum { PROFILE_TOP = 16 };
static int step_kind(const Step *st) { return st->gemm ? 0 : st->interp ? 2 : 1; }

static void log_profile(const Program *p)
{
    static const char *const kinds[3] = {"dots", "loop kernels", "interpreter"};
    kn_ctx *ctx = p->ctx;
    double kind[3] = {0, 0, 0}, all = 0, per = 1e6 * p->prof_runs; /* ns to ms per run */
    for (int i = 0; i < p->nsteps; i++) {
        kind[step_kind(&p->steps[i])] += (double)p->prof_ns[i];
        all += (double)p->prof_ns[i];
    }
    log_line(ctx, LOG_PERF, "profile: %d runs, %.3f ms a run in %d steps: dots %.3f ms, loop kernels %.3f ms, "
             "interpreter %.3f ms", p->prof_runs, all / per, p->nsteps, kind[0] / per, kind[1] / per, kind[2] / per);
    for (int c = 0; c < 3; c++) {
        int top[PROFILE_TOP], ntop = 0;
        for (int i = 0; i < p->nsteps; i++) { /* insertion into the sorted top list */
            if (step_kind(&p->steps[i]) != c) continue;
            int j = ntop < PROFILE_TOP ? ntop++ : PROFILE_TOP;
            while (j > 0 && p->prof_ns[top[j - 1]] < p->prof_ns[i]) {
                if (j < PROFILE_TOP) top[j] = top[j - 1];
                j--;
            }
            if (j < PROFILE_TOP) top[j] = i;
        }
        for (int r = 0; r < ntop; r++) {
            const Step *st = &p->steps[top[r]];
            const GemmSpec *g = st->gemm;
            char shape[96] = "";
            double ms = (double)p->prof_ns[top[r]] / per;
            if (g && !st->gx) /* the product's sizes (batch x M x N x K) and rate */
                snprintf(shape, sizeof shape, "  %lldx%lldx%lldx%lld%s, %.1f GFLOP/s", (long long)g->batch,
                         (long long)g->M, (long long)g->N, (long long)g->K, !g->wino ? "" : g->win.t ? " kn_rt_conv" : " winograd",
                         ms > 0 ? 2.0 * (double)g->batch * (double)g->M * (double)g->N * (double)g->K / (ms * 1e6) : 0.0);
            log_line(ctx, LOG_PERF, "profile: %-12s %8.3f ms %5.1f%%  step %d %s%s", kinds[c], ms,
                     all > 0 ? 100.0 * (double)p->prof_ns[top[r]] / all : 0.0, top[r], step_name(p, st), shape);
        }
    }
}

Program *program_share(Program *p)
{
    p->refs++;
    return p;
}

void program_free(Program *p)
{
    if (!p) return;
    if (p->refs > 0) {
        p->refs--;
        return;
    }
    if (p->prof_ns) {
        if (p->prof_runs) log_profile(p);
        kn_dealloc(p->ctx, p->prof_ns, (size_t)(p->nsteps + 1) * sizeof *p->prof_ns);
    }
    if (p->module) p->t->unload(p->module);
    kn_dealloc(p->ctx, p->mem_raw, p->arena_bytes ? p->arena_bytes + 64 : 0);
    uint32_t gn = p->g ? p->g->n : 0; /* a generic program has no graph (and runs nothing itself) */
    for (uint32_t v = 0; p->view && v < gn; v++) tensor_unhold(p->ctx, p->view[v]);
    for (int i = 0; p->pool && i < 2 * p->nouts; i++) tensor_unhold(p->ctx, p->pool[i]);
    for (int s = 0; p->packed && s < p->nsteps; s++)
        kn_dealloc(p->ctx, p->packed[s].mem, p->packed[s].bytes ? p->packed[s].bytes + 64 : 0);
    kn_dealloc(p->ctx, p->packed, (size_t)(p->nsteps + 1) * sizeof *p->packed);
    kn_dealloc(p->ctx, p->vals, gn * sizeof *p->vals);
    kn_dealloc(p->ctx, p->view, gn * sizeof *p->view);
    if (p->gex) expr_free(p->gex), kn_dealloc(p->ctx, p->gex, sizeof *p->gex);
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
    st->from_cache = p->from_cache;
    st->backend = p->t ? p->t->name : "interp";
    st->wino = st->in_place = 0;
    for (int s = 0; p->steps && s < p->nsteps; s++) st->wino += p->steps[s].gemm && p->steps[s].gemm->wino;
    for (int i = 0; p->donate && i < p->nouts; i++) st->in_place += p->donate[i] >= 0;
}
