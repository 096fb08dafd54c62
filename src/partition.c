/*
 * partition.c — the AOTAutograd stage: splits a joint forward+backward
 * graph into a forward program and a backward program, choosing which
 * forward values the forward saves for the backward and which the backward
 * recomputes; and a runner that executes such a program eagerly.
 *
 * Requires: a graph whose sources precede their users (graph.c keeps it so),
 * the ids of the forward's outputs and of the backward's outputs.
 * Produces: a Partition (forward program, backward program, saved values,
 * saved bytes with and without recomputation), arrays from the caller's
 * arena.
 *
 * Algorithm: min-cut rematerialization, after PyTorch functorch's
 * `min_cut_rematerialization_partition` (torch/_functorch/partitioners.py;
 * see also Chen et al., "Training Deep Nets with Sublinear Memory Cost",
 * 2016, for the recompute-instead-of-store trade). Every forward value the
 * backward needs is either saved or recomputed from other saved values and
 * the graph inputs. We build a flow network over those forward nodes:
 *
 *   - each node v is split into v_in -> v_out with capacity bytes(v), the
 *     cost of saving v;
 *   - each data-flow edge u -> v becomes u_out -> v_in with infinite
 *     capacity;
 *   - source -> v_in, infinite, for every node the backward may not
 *     recompute (dot, reductions, indexing, rand): such a value is on the
 *     source side, so it is computed only by the forward;
 *   - v_out -> sink, infinite, for every forward node a backward node
 *     reads directly.
 *
 * Inputs and constants (input, full, iota) are free to both programs and
 * stay out of the network. A minimum cut only cuts node edges (every other
 * edge is infinite), and the cut nodes are the cheapest set of values to
 * save such that everything the backward reads is computable from them:
 * a saved node has v_in reachable from the source in the residual graph
 * and v_out not. Max-flow is Dinic's algorithm on int64 capacities.
 *
 * With a memory budget, more op classes become recomputable (reductions,
 * then indexing; never dot or rand) and the cut is taken again. Each step
 * only removes source edges, so the saved bytes never grow.
 */
#include <string.h>

#include "partition.h"

/* ---- the runner ---- */

/* The structure every walk relies on: a known op, its source count, and
 * sources that precede the node. Checked rather than asserted: a program
 * or graph may come from outside. */
static kn_status node_check(kn_ctx *ctx, const Graph *g, uint32_t id)
{
    const Node *n = &g->nodes[id];
    if (n->op >= OP_COUNT || n->nsrc != kn_opinfo[n->op].nsrc || n->ndim > KN_MAX_DIMS)
        return kn_errs(ctx, KN_EINVAL, "node %%%" PRIu32 " has a bad op, source count or rank", id);
    for (int s = 0; s < n->nsrc; s++)
        if (n->src[s] == 0 || n->src[s] >= id)
            return kn_errs(ctx, KN_EINVAL, "node %%%" PRIu32 " (%s): source %d (%%%" PRIu32 ") does not precede it", id,
                           kn_opinfo[n->op].name, s, n->src[s]);
    return KN_OK;
}

/* The runner computes concrete tensors only. */
static kn_status concrete_check(kn_ctx *ctx, const Graph *g, uint32_t id)
{
    const Node *n = &g->nodes[id];
    for (int d = 0; d < n->ndim; d++)
        if (DIM_IS_SYM(n->shape[d]))
            return kn_errs(ctx, KN_EUNSUPPORTED, "node %%%" PRIu32 " (%s) has a symbolic dim %d; bind its symbols first", id,
                           kn_opinfo[n->op].name, d);
    return KN_OK;
}

/* A value handed in or computed must be what its node records, or every
 * later op would compute on the wrong shape without noticing. */
static kn_status value_check(kn_ctx *ctx, const Graph *g, uint32_t id, const kn_tensor *t)
{
    const Node *n = &g->nodes[id];
    int same = t->dtype == n->dtype && t->ndim == n->ndim;
    for (int d = 0; same && d < n->ndim; d++) same = t->shape[d] == n->shape[d];
    if (same) return KN_OK;
    char have[96], want[96];
    return kn_errs(ctx, KN_ESHAPE, "the value of %%%" PRIu32 " (%s) is %s %s, but the node is %s %s", id,
                   kn_opinfo[n->op].name, kn_dtype_name((kn_dtype)t->dtype), fmt_shape(have, sizeof have, t),
                   kn_dtype_name((kn_dtype)n->dtype), fmt_dims(want, sizeof want, n->ndim, n->shape));
}

static kn_status run_node(kn_ctx *ctx, const Graph *g, uint32_t id, kn_tensor **vals)
{
    if (id == 0 || id >= g->n)
        return kn_errs(ctx, KN_EINVAL, "the program names node %%%" PRIu32 ", but the graph has %%1..%%%" PRIu32 "", id, g->n - 1);
    if (node_check(ctx, g, id) || concrete_check(ctx, g, id)) return ctx->status;
    const Node *n = &g->nodes[id];
    if (n->op == OP_INPUT) {
        if (!vals[id])
            return kn_errs(ctx, KN_EINVAL, "input %%%" PRIu32 " (graph input %lld) has no value", id, (long long)n->p.i[0]);
        return value_check(ctx, g, id, vals[id]);
    }
    kn_tensor *src[3] = {NULL, NULL, NULL};
    for (int s = 0; s < n->nsrc; s++) {
        uint32_t u = n->src[s];
        if (!vals[u])
            return kn_errs(ctx, KN_EINVAL, "node %%%" PRIu32 " (%s) reads %%%" PRIu32 " (%s), which has no value yet", id,
                           kn_opinfo[n->op].name, u, kn_opinfo[g->nodes[u].op].name);
        if (value_check(ctx, g, u, vals[u])) return ctx->status;
        src[s] = vals[u];
    }
    kn_tensor *t = prim(ctx, (Op)n->op, src, &n->p);
    if (!t) return ctx->status ? ctx->status : kn_errs(ctx, KN_ENOMEM, "node %%%" PRIu32 ": no result", id);
    vals[id] = t;
    return value_check(ctx, g, id, t);
}

kn_status graph_run(kn_ctx *ctx, const Graph *g, const uint32_t *prog, int nprog, kn_tensor **vals)
{
    if (!ctx) return KN_EINVAL;
    const char *saved_op = op_enter(ctx, "graph_run");
    kn_status s = KN_OK;
    if (!g || !vals || nprog < 0 || (nprog > 0 && !prog))
        s = kn_errs(ctx, KN_EINVAL, "needs a graph, a value array and a program (%d nodes)", nprog);
    else if (ctx->trace)
        s = kn_errs(ctx, KN_EINVAL, "runs eagerly, but a trace is open");
    int grad = ctx->grad_enabled;
    ctx->grad_enabled = 0; /* the program already holds its backward: record nothing */
    for (int i = 0; s == KN_OK && i < nprog; i++) s = run_node(ctx, g, prog[i], vals);
    ctx->grad_enabled = grad;
    op_leave(ctx, saved_op);
    return s;
}

void graph_run_bind(const Graph *g, kn_tensor **vals)
{
    for (uint32_t id = 1; id < g->n; id++) {
        const Node *n = &g->nodes[id];
        if (n->op == OP_INPUT && !vals[id] && n->p.i[0] >= 0 && (uint64_t)n->p.i[0] < g->ninputs)
            vals[id] = g->input_vals[n->p.i[0]];
    }
}

/* ---- costs and op classes ---- */

#define SYM_HINT 64            /* a symbolic dim counts as this size: unbound when we partition */
#define COST_MAX ((int64_t)1 << 40) /* per node, so that sums over a graph stay far from int64 overflow */
#define INF (INT64_MAX / 4)

/* Bytes to save v: numel * element size. */
static int64_t node_bytes(const Node *n)
{
    int64_t b = (int64_t)kn_dtype_size((kn_dtype)n->dtype);
    for (int d = 0; d < n->ndim; d++) {
        int64_t k = DIM_IS_SYM(n->shape[d]) ? SYM_HINT : n->shape[d];
        if (k == 0) return 0;
        b = k > COST_MAX / (b ? b : 1) ? COST_MAX : b * k;
    }
    return b;
}

/* Available to both programs at no cost: inputs are passed to both and
 * constants are cheaper to recompute than to store. */
static int is_free(const Node *n) { return n->op == OP_INPUT || n->op == OP_FULL || n->op == OP_IOTA; }

/* May the backward recompute this op? Level 0 admits the cheap, fusible
 * ops (pointwise, casts, compares, selects, views and pad), as AOTAutograd
 * does; a budget raises the level to admit reductions (1), then indexing
 * (2). Dot is too expensive to repeat; rand is kept saved, as PyTorch does:
 * it reads the generator's counter, which has moved on by the time a
 * backward runs, so the backward must never draw again. */
static int recomputable(const Node *n, int level)
{
    switch (kn_opinfo[n->op].cls) {
    case OC_UNARY:
    case OC_BINARY:
    case OC_COMPARE:
    case OC_WHERE:
    case OC_CAST:
    case OC_MOVE: return 1;
    case OC_REDUCE: return level >= 1;
    case OC_INDEX: return level >= 2;
    default: return 0;
    }
}

#define MAX_LEVEL 2

/* ---- max-flow: Dinic's algorithm ---- */

typedef struct {
    int nv, ne, cap_e;
    int *head, *next, *to; /* adjacency lists; edge e's reverse is e ^ 1 */
    int64_t *cap;          /* residual capacities */
    int *level, *it, *queue, *path;
} Flow;

static int flow_init(Flow *f, Arena *a, int nv, int max_edges)
{
    memset(f, 0, sizeof *f);
    f->nv = nv;
    f->cap_e = max_edges;
    f->head = arena_alloc(a, (size_t)nv * sizeof(int));
    f->level = arena_alloc(a, (size_t)nv * sizeof(int));
    f->it = arena_alloc(a, (size_t)nv * sizeof(int));
    f->queue = arena_alloc(a, (size_t)nv * sizeof(int));
    f->path = arena_alloc(a, (size_t)nv * sizeof(int));
    f->next = arena_alloc(a, (size_t)max_edges * sizeof(int));
    f->to = arena_alloc(a, (size_t)max_edges * sizeof(int));
    f->cap = arena_alloc(a, (size_t)max_edges * sizeof(int64_t));
    if (!f->head || !f->level || !f->it || !f->queue || !f->path || !f->next || !f->to || !f->cap) return 0;
    for (int v = 0; v < nv; v++) f->head[v] = -1;
    return 1;
}

static void flow_edge(Flow *f, int u, int v, int64_t c)
{
    KN_ASSERT(f->ne + 2 <= f->cap_e);
    int e = f->ne;
    f->to[e] = v, f->cap[e] = c, f->next[e] = f->head[u], f->head[u] = e;
    f->to[e + 1] = u, f->cap[e + 1] = 0, f->next[e + 1] = f->head[v], f->head[v] = e + 1;
    f->ne += 2;
}

/* Breadth-first levels from s over edges with residual capacity. Returns
 * whether t is reachable; after the last phase, level >= 0 marks the
 * source side of the minimum cut. */
static int flow_bfs(Flow *f, int s, int t)
{
    for (int v = 0; v < f->nv; v++) f->level[v] = -1;
    int qh = 0, qt = 0;
    f->queue[qt++] = s;
    f->level[s] = 0;
    while (qh < qt) {
        int u = f->queue[qh++];
        for (int e = f->head[u]; e != -1; e = f->next[e])
            if (f->cap[e] > 0 && f->level[f->to[e]] < 0) {
                f->level[f->to[e]] = f->level[u] + 1;
                f->queue[qt++] = f->to[e];
            }
    }
    return f->level[t] >= 0;
}

/* One augmenting path in the level graph, found iteratively (graphs are
 * deep enough that recursion would strain small stacks). Returns the flow
 * pushed, 0 when the level graph is blocked. */
static int64_t flow_augment(Flow *f, int s, int t)
{
    int top = 0, v = s;
    for (;;) {
        if (v == t) {
            int64_t b = INF;
            for (int k = 0; k < top; k++) b = f->cap[f->path[k]] < b ? f->cap[f->path[k]] : b;
            for (int k = 0; k < top; k++) f->cap[f->path[k]] -= b, f->cap[f->path[k] ^ 1] += b;
            return b;
        }
        int e = f->it[v];
        while (e != -1 && !(f->cap[e] > 0 && f->level[f->to[e]] == f->level[v] + 1)) e = f->next[e];
        f->it[v] = e;
        if (e != -1) {
            f->path[top++] = e;
            v = f->to[e];
            continue;
        }
        f->level[v] = -1; /* a dead end: never enter it again this phase */
        if (top == 0) return 0;
        v = f->to[f->path[--top] ^ 1];
        f->it[v] = f->next[f->it[v]];
    }
}

static void flow_max(Flow *f, int s, int t)
{
    while (flow_bfs(f, s, t)) {
        memcpy(f->it, f->head, (size_t)f->nv * sizeof(int));
        while (flow_augment(f, s, t) > 0) {}
    }
    flow_bfs(f, s, t); /* level >= 0: on the source side of the minimum cut */
}

/* ---- the partitioner ---- */

enum {
    FL_FWD = 1,   /* ancestor of a forward output */
    FL_NEED = 2,  /* ancestor of a backward output */
    FL_READ = 4,  /* forward node the backward reads directly */
    FL_NET = 8,   /* in the flow network: non-free, forward, an ancestor of a FL_READ node */
    FL_SAVED = 16,/* cut: the forward saves it */
    FL_BWD = 32   /* in the backward program */
};

typedef struct {
    kn_ctx *ctx;
    const Graph *g;
    uint8_t *fl;  /* per node */
    int *vix;     /* per node: index in the network, -1 if absent */
    int nnet, nedges;
    Arena tmp;
} Work;

static kn_status check_ids(kn_ctx *ctx, const Graph *g, const uint32_t *ids, int n, const char *what)
{
    if (n < 0 || (n > 0 && !ids)) return kn_errs(ctx, KN_EINVAL, "%s: %d ids", what, n);
    for (int i = 0; i < n; i++)
        if (ids[i] == 0 || ids[i] >= g->n)
            return kn_errs(ctx, KN_EINVAL, "%s %d is %%%" PRIu32 ", not a node of the graph (%%1..%%%" PRIu32 ")", what, i, ids[i],
                           g->n - 1);
    return KN_OK;
}

/* Marks bit on ids and all their ancestors: one sweep down the ids, since
 * sources precede their users. */
static kn_status mark_ancestors(Work *w, const uint32_t *ids, int n, uint8_t bit)
{
    for (int i = 0; i < n; i++) w->fl[ids[i]] |= bit;
    for (uint32_t v = w->g->n - 1; v > 0; v--) {
        if (!(w->fl[v] & bit)) continue;
        if (node_check(w->ctx, w->g, v)) return w->ctx->status;
        const Node *n = &w->g->nodes[v];
        for (int s = 0; s < n->nsrc; s++) w->fl[n->src[s]] |= bit;
    }
    return KN_OK;
}

/* FL_READ: forward values a backward node reads, or that are themselves
 * backward outputs. Returns their bytes: saving all of them is the
 * no-recompute strategy. */
static size_t mark_reads(Work *w, const uint32_t *bwd_out, int nbwd_out)
{
    const Graph *g = w->g;
    for (int i = 0; i < nbwd_out; i++)
        if (w->fl[bwd_out[i]] & FL_FWD) w->fl[bwd_out[i]] |= FL_READ;
    for (uint32_t v = 1; v < g->n; v++) {
        if ((w->fl[v] & (FL_NEED | FL_FWD)) != FL_NEED) continue;
        for (int s = 0; s < g->nodes[v].nsrc; s++)
            if (w->fl[g->nodes[v].src[s]] & FL_FWD) w->fl[g->nodes[v].src[s]] |= FL_READ;
    }
    size_t all = 0;
    for (uint32_t v = 1; v < g->n; v++)
        if ((w->fl[v] & FL_READ) && !is_free(&g->nodes[v])) all += (size_t)node_bytes(&g->nodes[v]);
    return all;
}

/* FL_NET: the non-free forward nodes that FL_READ values depend on; these
 * are the only candidates for saving or recomputing. */
static void mark_network(Work *w)
{
    const Graph *g = w->g;
    w->nnet = w->nedges = 0;
    for (uint32_t v = g->n - 1; v > 0; v--) {
        const Node *n = &g->nodes[v];
        w->vix[v] = -1;
        if (!(w->fl[v] & (FL_READ | FL_NET)) || is_free(n)) continue;
        w->fl[v] |= FL_NET;
        for (int s = 0; s < n->nsrc; s++) w->fl[n->src[s]] |= FL_NET;
    }
    for (uint32_t v = 1; v < g->n; v++) {
        const Node *n = &g->nodes[v];
        if (is_free(n)) w->fl[v] &= (uint8_t)~FL_NET;
        if (!(w->fl[v] & FL_NET)) continue;
        w->vix[v] = w->nnet++;
        w->nedges += 2 * (3 + n->nsrc); /* node, source, sink, data edges; each with its reverse */
    }
}

/* Vertex numbering: 0 source, 1 sink, 2k + 2 node k's in, 2k + 3 its out. */
#define V_IN(k) (2 * (k) + 2)
#define V_OUT(k) (2 * (k) + 3)

static void build_network(Work *w, Flow *f, int level)
{
    const Graph *g = w->g;
    for (uint32_t v = 1; v < g->n; v++) {
        int k = w->vix[v];
        if (k < 0) continue;
        const Node *n = &g->nodes[v];
        flow_edge(f, V_IN(k), V_OUT(k), node_bytes(n));
        for (int s = 0; s < n->nsrc; s++)
            if (w->vix[n->src[s]] >= 0) flow_edge(f, V_OUT(w->vix[n->src[s]]), V_IN(k), INF);
        if (!recomputable(n, level)) flow_edge(f, 0, V_IN(k), INF);
        if (w->fl[v] & FL_READ) flow_edge(f, V_OUT(k), 1, INF);
    }
}

/* Takes the minimum cut at one recompute level; marks FL_SAVED and returns
 * the saved bytes, or -1 when out of memory. */
static int64_t cut(Work *w, int level)
{
    const Graph *g = w->g;
    Arena a;
    arena_init(&a, w->ctx);
    Flow f;
    int64_t bytes = -1;
    if (flow_init(&f, &a, 2 * w->nnet + 2, w->nedges)) {
        build_network(w, &f, level);
        flow_max(&f, 0, 1);
        bytes = 0;
        for (uint32_t v = 1; v < g->n; v++) {
            int k = w->vix[v];
            w->fl[v] &= (uint8_t)~FL_SAVED;
            if (k < 0 || f.level[V_IN(k)] < 0 || f.level[V_OUT(k)] >= 0) continue;
            w->fl[v] |= FL_SAVED;
            bytes += node_bytes(&g->nodes[v]);
        }
    }
    arena_free(&a);
    return bytes;
}

/* FL_BWD: what the backward computes, walking up from its outputs and
 * stopping at saved values and at inputs (which the caller passes in). */
static void mark_backward(Work *w, const uint32_t *bwd_out, int nbwd_out, int level)
{
    const Graph *g = w->g;
    for (int i = 0; i < nbwd_out; i++)
        if (!(w->fl[bwd_out[i]] & FL_SAVED)) w->fl[bwd_out[i]] |= FL_BWD;
    for (uint32_t v = g->n - 1; v > 0; v--) {
        const Node *n = &g->nodes[v];
        if (!(w->fl[v] & FL_BWD) || n->op == OP_INPUT) continue;
        /* the cut guarantees this: a value the backward may not recompute is saved */
        KN_ASSERT(!(w->fl[v] & FL_FWD) || is_free(n) || recomputable(n, level));
        for (int s = 0; s < n->nsrc; s++)
            if (!(w->fl[n->src[s]] & FL_SAVED)) w->fl[n->src[s]] |= FL_BWD;
    }
}

/* The ids carrying bit, in id order, into a fresh array from a. */
static uint32_t *collect(const Work *w, uint8_t bit, Arena *a, int *count)
{
    int n = 0;
    for (uint32_t v = 1; v < w->g->n; v++) n += (w->fl[v] & bit) != 0;
    uint32_t *ids = arena_alloc(a, (size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) return NULL;
    n = 0;
    for (uint32_t v = 1; v < w->g->n; v++)
        if (w->fl[v] & bit) ids[n++] = v;
    *count = n;
    return ids;
}

static kn_status partition_work(Work *w, const uint32_t *fwd_out, int nfwd_out, const uint32_t *bwd_out,
                                int nbwd_out, size_t budget, Arena *a, Partition *out)
{
    kn_ctx *ctx = w->ctx;
    w->fl = arena_alloc(&w->tmp, w->g->n);
    w->vix = arena_alloc(&w->tmp, (size_t)w->g->n * sizeof(int));
    if (!w->fl || !w->vix) return kn_errs(ctx, KN_ENOMEM, "out of memory");
    if (mark_ancestors(w, fwd_out, nfwd_out, FL_FWD) || mark_ancestors(w, bwd_out, nbwd_out, FL_NEED))
        return ctx->status;
    out->saved_bytes_all = mark_reads(w, bwd_out, nbwd_out);
    mark_network(w);
    int64_t bytes = 0;
    for (out->level = 0; out->level <= MAX_LEVEL; out->level++) {
        if ((bytes = cut(w, out->level)) < 0) return kn_errs(ctx, KN_ENOMEM, "out of memory");
        if (budget == 0 || (size_t)bytes <= budget || out->level == MAX_LEVEL) break;
    }
    out->saved_bytes = (size_t)bytes;
    mark_backward(w, bwd_out, nbwd_out, out->level);
    out->fwd = collect(w, FL_FWD, a, &out->nfwd);
    out->bwd = collect(w, FL_BWD, a, &out->nbwd);
    out->saved = collect(w, FL_SAVED, a, &out->nsaved);
    if (!out->fwd || !out->bwd || !out->saved) return kn_errs(ctx, KN_ENOMEM, "out of memory");
    return KN_OK;
}

int partition_joint(kn_ctx *ctx, const Graph *g, const uint32_t *fwd_out, int nfwd_out, const uint32_t *bwd_out,
                    int nbwd_out, size_t budget, Arena *a, Partition *out)
{
    if (!ctx) return KN_EINVAL;
    const char *saved_op = op_enter(ctx, "partition");
    kn_status s = KN_OK;
    if (!g || !a || !out) s = kn_errs(ctx, KN_EINVAL, "needs a graph, an arena and a result");
    else if (g->n > INT32_MAX / 16) /* the network's edge count is an int */
        s = kn_errs(ctx, KN_EUNSUPPORTED, "a graph of %lld nodes is too large", (long long)g->n);
    if (!s) s = check_ids(ctx, g, fwd_out, nfwd_out, "forward output");
    if (!s) s = check_ids(ctx, g, bwd_out, nbwd_out, "backward output");
    if (!s) {
        Work w;
        memset(&w, 0, sizeof w);
        memset(out, 0, sizeof *out);
        w.ctx = ctx;
        w.g = g;
        arena_init(&w.tmp, ctx);
        s = partition_work(&w, fwd_out, nfwd_out, bwd_out, nbwd_out, budget, a, out);
        arena_free(&w.tmp);
    }
    op_leave(ctx, saved_op);
    return s;
}
