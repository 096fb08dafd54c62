/*
 * graph.c — the graph core: nodes in one flat array with 32-bit indices,
 * interned so that identical nodes (same op, dtype, shape, sources and
 * parameters) are one node, which makes common-subexpression elimination
 * free. Node 0 is reserved as "none". Also a text dump and a verifier.
 *
 * Nodes are appended in topological order: a node's sources always have
 * smaller indices. The node array and its hash table come from the context's
 * allocator, grown by realloc (a large block moves by its pages, neither
 * copied nor faulted in again): in the graph's arena, every doubling left
 * the old array behind, zeroed the new one and copied, half of a ResNet-18
 * training step's trace time. The rest of a graph's memory is its arena's.
 */
#include <stdio.h>
#include <string.h>

#include "core.h"

Graph *graph_new(kn_ctx *ctx)
{
    Arena a;
    arena_init(&a, ctx);
    Graph *g = arena_alloc(&a, sizeof *g);
    if (!g) return NULL;
    g->ctx = ctx;
    g->arena = a;
    g->serial = ++ctx->graph_serial;
    g->nodes = kn_alloc(ctx, 64 * sizeof(Node));
    g->hash = kn_alloc_zeroed(ctx, 128 * sizeof(uint32_t));
    g->cap = g->nodes ? 64 : 0;
    g->hcap = g->hash ? 128 : 0;
    if (!g->nodes || !g->hash) {
        graph_free(g);
        return NULL;
    }
    memset(&g->nodes[0], 0, sizeof(Node));
    g->n = 1; /* node 0: none */
    return g;
}

void graph_free(Graph *g)
{
    if (!g) return;
    if (g->refs > 0) {
        g->refs--;
        return;
    }
    kn_dealloc(g->ctx, g->nodes, g->cap * sizeof(Node));
    kn_dealloc(g->ctx, g->hash, g->hcap * sizeof(uint32_t));
    Arena a = g->arena; /* g itself lives in its arena */
    arena_free(&a);
}

/* The node's bytes; nodes are built from memset-zeroed structs so padding
 * compares equal. */
static uint32_t node_hash(const Node *n) { return (uint32_t)kn_hash(n, sizeof *n); }

static int rehash(Graph *g)
{
    uint32_t cap = g->hcap * 2;
    uint32_t *h = kn_alloc_zeroed(g->ctx, cap * sizeof *h);
    if (!h) return 0;
    kn_dealloc(g->ctx, g->hash, g->hcap * sizeof *h);
    for (uint32_t i = 1; i < g->n; i++) {
        uint32_t k = node_hash(&g->nodes[i]) & (cap - 1);
        while (h[k]) k = (k + 1) & (cap - 1);
        h[k] = i;
    }
    g->hash = h;
    g->hcap = cap;
    return 1;
}

uint32_t graph_input(Graph *g, Node *n)
{
    if (g->ninputs == g->input_cap) {
        uint32_t cap = g->input_cap ? 2 * g->input_cap : 16;
        kn_tensor **v = arena_grow(&g->arena, g->input_vals, g->input_cap * sizeof *v, cap * sizeof *v);
        if (!v) return 0;
        g->input_vals = v;
        g->input_cap = cap;
    }
    n->op = OP_INPUT;
    n->p.i[0] = g->ninputs;
    n->p.n = 1;
    uint32_t id = graph_add(g, n);
    if (id) g->input_vals[g->ninputs++] = NULL;
    return id;
}

uint32_t graph_add(Graph *g, const Node *n)
{
    uint32_t k = node_hash(n) & (g->hcap - 1);
    for (; g->hash[k]; k = (k + 1) & (g->hcap - 1))
        if (memcmp(&g->nodes[g->hash[k]], n, sizeof *n) == 0) return g->hash[k];
    if (g->n == g->cap) {
        Node *nn = kn_realloc(g->ctx, g->nodes, g->cap * sizeof(Node), 2 * (size_t)g->cap * sizeof(Node));
        if (!nn) return 0;
        g->nodes = nn;
        g->cap *= 2;
    }
    uint32_t id = g->n++;
    g->nodes[id] = *n;
    g->hash[k] = id;
    if (g->n * 2 > g->hcap && !rehash(g)) return 0;
    return id;
}

/* ---- text form: one line per node ----
 *   %3 = add f32 (4,8) %1 %2
 *   %5 = reduce_max f32 (4,1) %4 [0,1]           params follow in brackets
 */
static size_t dump_params(const Node *n, char *buf, size_t cap, size_t len)
{
    const Params *p = &n->p;
    if (p->n) {
        len = kn_appendf(buf, cap, len, " [");
        for (int i = 0; i < p->n; i++) len = kn_appendf(buf, cap, len, "%s%lld", i ? "," : "", (long long)p->i[i]);
        len = kn_appendf(buf, cap, len, "]");
    }
    if (n->op == OP_FULL || n->op == OP_PAD) len = kn_appendf(buf, cap, len, " value=%.17g", p->f);
    if (n->op == OP_IOTA) len = kn_appendf(buf, cap, len, " axis=%d", (int)p->axis);
    return len;
}

size_t graph_dump(const Graph *g, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap) buf[0] = 0;
    for (uint32_t i = 1; i < g->n; i++) {
        const Node *n = &g->nodes[i];
        len = kn_appendf(buf, cap, len, "%%%" PRIu32 " = %s %s (", i, kn_opinfo[n->op].name, kn_dtype_name((kn_dtype)n->dtype));
        for (int d = 0; d < n->ndim; d++) {
            if (DIM_IS_SYM(n->shape[d])) len = kn_appendf(buf, cap, len, "%s#%lld", d ? "," : "", (long long)-n->shape[d]);
            else len = kn_appendf(buf, cap, len, "%s%lld", d ? "," : "", (long long)n->shape[d]);
        }
        len = kn_appendf(buf, cap, len, ")");
        for (int s = 0; s < n->nsrc; s++) len = kn_appendf(buf, cap, len, " %%%" PRIu32 "", n->src[s]);
        len = dump_params(n, buf, cap, len);
        len = kn_appendf(buf, cap, len, "\n");
    }
    return len;
}

/* ---- verifier: sources precede their users, and each node's dtype and
 * shape are what its shape rule gives for its sources. ---- */
int graph_verify(kn_ctx *ctx, const Graph *g)
{
    for (uint32_t i = 1; i < g->n; i++) {
        const Node *n = &g->nodes[i];
        if (n->op >= OP_COUNT) return kn_errs(ctx, KN_EINVAL, "verify: node %%%" PRIu32 " has bad op %d", i, (int)n->op);
        if (n->nsrc != kn_opinfo[n->op].nsrc)
            return kn_errs(ctx, KN_EINVAL, "verify: node %%%" PRIu32 " (%s) has %d sources, expected %d", i,
                           kn_opinfo[n->op].name, n->nsrc, kn_opinfo[n->op].nsrc);
        uint8_t dts[3], nds[3], odt = 0, ond = 0;
        const Dim *shs[3];
        Dim osh[KN_MAX_DIMS];
        for (int s = 0; s < n->nsrc; s++) {
            if (n->src[s] == 0 || n->src[s] >= i)
                return kn_errs(ctx, KN_EINVAL, "verify: node %%%" PRIu32 " source %d (%%%" PRIu32 ") does not precede it", i, s, n->src[s]);
            const Node *m = &g->nodes[n->src[s]];
            dts[s] = m->dtype, nds[s] = m->ndim, shs[s] = m->shape;
        }
        if (n->op == OP_INPUT) continue;
        if (prim_shape(ctx, (Op)n->op, n->nsrc, dts, nds, shs, &n->p, &odt, &ond, osh) != KN_OK) {
            char why[sizeof ctx->err];
            snprintf(why, sizeof why, "%s", ctx->err);
            return kn_errs(ctx, KN_EINVAL, "verify: node %%%" PRIu32 ": %s", i, why);
        }
        if (odt != n->dtype || ond != n->ndim || memcmp(osh, n->shape, ond * sizeof(Dim)) != 0)
            return kn_errs(ctx, KN_EINVAL, "verify: node %%%" PRIu32 " (%s) records a dtype or shape its rule does not give", i,
                           kn_opinfo[n->op].name);
    }
    return 0;
}
