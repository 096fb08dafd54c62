/*
 * sched.c — the scheduler: decides which nodes of a primitive graph are
 * materialised (get a buffer and a kernel of their own) and which are fused
 * into the kernels that read them.
 *
 * Rules, after TorchInductor's:
 * - views (reshape, permute, expand, slice) and pad are never materialised:
 *   they become index arithmetic in their readers;
 * - pointwise ops are fused into their readers (so chains fuse, and a
 *   reduction's elementwise input is its prologue);
 * - reductions, dot, gather and scatter_add each anchor a kernel;
 * - a pointwise value read by several kernels is materialised when its fused
 *   subtree holds an expensive op (exp, log, ...), so no expensive op is
 *   ever computed in two kernels; cheap ones (add, compare, ...) are
 *   recomputed instead of costing a round trip through memory;
 * - dot reads its operands once per multiply-add, so an operand that is not
 *   a view of a buffer is materialised first;
 * - graph outputs are materialised.
 *
 * Requires: a verified graph and its outputs. Produces: a Schedule, the
 * kernels in topological order, each with the node it writes.
 */
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "sched.h"

static int is_view(Op op) { return kn_opinfo[op].cls == OC_MOVE; }

static int is_pointwise(Op op)
{
    OpClass c = kn_opinfo[op].cls;
    return c == OC_UNARY || c == OC_BINARY || c == OC_COMPARE || c == OC_WHERE || c == OC_CAST ||
           op == OP_FULL || op == OP_IOTA || op == OP_RAND;
}

static int is_anchor(Op op)
{
    OpClass c = kn_opinfo[op].cls;
    return c == OC_REDUCE || c == OC_DOT || c == OC_INDEX;
}

static int is_expensive(Op op)
{
    return (op >= OP_EXP && op <= OP_ERF) || op == OP_POW || op == OP_DIV || op == OP_RAND;
}

/* Whether node v, fused into a reader, would compute an expensive op: its
 * own op or one in the unmaterialised subtree it pulls in. */
static int fused_cost(const Graph *g, const uint8_t *mat, uint8_t *memo, uint32_t v)
{
    if (memo[v]) return memo[v] - 1;
    const Node *n = &g->nodes[v];
    int cost = is_expensive((Op)n->op);
    for (int s = 0; s < n->nsrc && !cost; s++)
        if (!mat[n->src[s]]) cost = fused_cost(g, mat, memo, n->src[s]);
    memo[v] = (uint8_t)(cost + 1);
    return cost;
}

/* The nearest materialised or input node a view chain starts from, or 0
 * if the chain passes through computation. */
static uint32_t view_root(const Graph *g, const uint8_t *mat, uint32_t v)
{
    while (!mat[v] && is_view((Op)g->nodes[v].op) && g->nodes[v].op != OP_PAD) v = g->nodes[v].src[0];
    return mat[v] ? v : 0;
}

/* The number of readers of each node, kernels counted as the node that
 * anchors them: a fused node's reads count towards its readers. */
static void count_readers(const Graph *g, const uint8_t *mat, uint32_t *readers)
{
    memset(readers, 0, g->n * sizeof *readers);
    for (uint32_t v = g->n; v-- > 1;) {
        const Node *n = &g->nodes[v];
        for (int s = 0; s < n->nsrc; s++) {
            uint32_t u = n->src[s];
            readers[u] += mat[v] ? 1 : (readers[v] ? readers[v] : 1);
        }
    }
}

int sched_build(kn_ctx *ctx, const Graph *g, const uint32_t *outs, int nouts, Arena *a, Schedule *out)
{
    memset(out, 0, sizeof *out);
    uint8_t *mat = arena_alloc(a, g->n), *memo = arena_alloc(a, g->n);
    uint32_t *readers = arena_alloc(a, g->n * sizeof *readers);
    if (!mat || !memo || !readers) return kn_errs(ctx, KN_ENOMEM, "out of memory scheduling");
    for (uint32_t v = 1; v < g->n; v++) {
        Op op = (Op)g->nodes[v].op;
        mat[v] = op == OP_INPUT || is_anchor(op);
    }
    for (int i = 0; i < nouts; i++) mat[outs[i]] = 1;
    /* gather and scatter_add read whole buffers (their lowering is the
     * interpreter's for now) */
    for (uint32_t v = 1; v < g->n; v++)
        if (kn_opinfo[g->nodes[v].op].cls == OC_INDEX)
            for (int s = 0; s < g->nodes[v].nsrc; s++) mat[g->nodes[v].src[s]] = 1;
    /* dot operands: a view of a buffer, or a buffer of their own */
    for (uint32_t v = 1; v < g->n; v++)
        if (g->nodes[v].op == OP_DOT)
            for (int s = 0; s < 2; s++) {
                uint32_t u = g->nodes[v].src[s];
                if (!view_root(g, mat, u)) mat[u] = 1;
            }
    /* shared expensive pointwise values: once, in a kernel of their own.
     * Deciding one can change another's cost, so repeat until stable. */
    for (int changed = 1; changed;) {
        changed = 0;
        count_readers(g, mat, readers);
        memset(memo, 0, g->n);
        for (uint32_t v = g->n; v-- > 1;) {
            if (mat[v] || !is_pointwise((Op)g->nodes[v].op) || readers[v] < 2) continue;
            if (fused_cost(g, mat, memo, v)) mat[v] = changed = 1, memset(memo, 0, g->n);
        }
    }
    /* a view that is an output is materialised through its own kernel;
     * everything materialised but the inputs is a kernel */
    uint32_t nk = 0;
    for (uint32_t v = 1; v < g->n; v++) nk += mat[v] && g->nodes[v].op != OP_INPUT;
    out->kernels = arena_alloc(a, (nk ? nk : 1) * sizeof *out->kernels);
    if (!out->kernels) return kn_errs(ctx, KN_ENOMEM, "out of memory scheduling");
    for (uint32_t v = 1; v < g->n; v++)
        if (mat[v] && g->nodes[v].op != OP_INPUT) out->kernels[out->nkernels++] = v;
    out->materialised = mat;
    return 0;
}

/* The unmaterialised nodes kernel node v pulls in, depth first. */
static size_t dump_fused(const Graph *g, const Schedule *s, uint32_t v, char *buf, size_t cap, size_t len)
{
    const Node *n = &g->nodes[v];
    for (int i = 0; i < n->nsrc; i++) {
        uint32_t u = n->src[i];
        if (s->materialised[u]) continue;
        len = dump_fused(g, s, u, buf, cap, len);
        len = kn_appendf(buf, cap, len, " %%%" PRIu32 " %s", u, kn_opinfo[g->nodes[u].op].name);
    }
    return len;
}

size_t sched_dump(const Graph *g, const Schedule *s, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap) buf[0] = 0;
    for (int k = 0; k < s->nkernels; k++) {
        uint32_t v = s->kernels[k];
        len = kn_appendf(buf, cap, len, "%%%" PRIu32 " %s <-", v, kn_opinfo[g->nodes[v].op].name);
        len = dump_fused(g, s, v, buf, cap, len);
        len = kn_appendf(buf, cap, len, "\n");
    }
    return len;
}
