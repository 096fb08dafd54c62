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
 * - reductions, dot, gather and scatter_add each anchor a kernel (gather's
 *   input a buffer: it is read at data-dependent places), but a
 *   reduction over rows (trailing dims) fuses into its one reader kernel
 *   when that kernel iterates the same rows (softmax's max and sum,
 *   layer_norm's mean and variance: one kernel), and a dot fuses into its
 *   one pointwise reader of its shape and dtype (bias, activation and
 *   residual as the dot's epilogue: linear + bias + gelu is one kernel);
 * - a pointwise value read by several kernels is materialised when its fused
 *   subtree holds an expensive op (exp, log, ...), so no expensive op is
 *   ever computed in two kernels; cheap ones (add, compare, ...) are
 *   recomputed instead of costing a round trip through memory; where the
 *   expensive op is broadcast into the value (BatchNorm's per-channel
 *   1/sqrt(var + eps) in x_hat), it is materialised instead, and the value
 *   is cheap;
 * - dot reads its operands once per multiply-add, so an operand that is not
 *   a view of a buffer is materialised first, but for a convolution's
 *   window view of a buffer (sched_window), which the dot template packs
 *   straight from the input (implicit GEMM, no im2col buffer);
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

/* The ops (not views) node v, fused into a reader, computes: its own and
 * its unmaterialised subtree's, counted along every path as the reader's
 * code would compute them, saturating at 250; -1 if it pulls in a fused
 * reduction or dot (kept fused: the kernel computes those once per row or
 * tile, and the values around them are the cheap part). */
static int fused_ops(const Graph *g, const uint8_t *mat, const uint8_t *fused, uint8_t *memo, uint32_t v)
{
    if (memo[v]) return memo[v] - 2;
    const Node *n = &g->nodes[v];
    int ops = fused[v] ? -1 : !is_view((Op)n->op);
    /* every source, also once the count saturates: a fused node further on still makes it -1 */
    for (int s = 0; s < n->nsrc && ops >= 0; s++)
        if (!mat[n->src[s]]) {
            int o = fused_ops(g, mat, fused, memo, n->src[s]);
            ops = o < 0 ? -1 : ops + o > 250 ? 250 : ops + o;
        }
    if (ops > 250) ops = 250;
    memo[v] = (uint8_t)(ops + 2);
    return ops;
}

/* The buffers (materialised nodes) of at least v's size that v, fused into
 * a reader, reads: its unmaterialised subtree's, each once, counting up to
 * limit and visiting at most SCHED_WIDE_VISIT nodes (mark: per node, the
 * stamp of the walk that saw it). */
enum { SCHED_WIDE_VISIT = 256 };

/* Node v's element count as the size heuristics read it: at the hint's sizes (sched_build). */
static int64_t numel_at(const Graph *hint, uint32_t v)
{
    return tensor_numel(hint->nodes[v].ndim, hint->nodes[v].shape);
}

static int wide_inputs(const Graph *g, const Graph *hint, const uint8_t *mat, const uint8_t *fused, uint32_t *mark,
                       uint32_t stamp, uint32_t v, int64_t numel, int limit, int *visits)
{
    int found = 0;
    const Node *n = &g->nodes[v];
    for (int s = 0; s < n->nsrc && found < limit && *visits < SCHED_WIDE_VISIT; s++) {
        uint32_t u = n->src[s];
        if (mark[u] == stamp) continue;
        mark[u] = stamp, ++*visits;
        if (mat[u]) found += numel_at(hint, u) >= numel;
        else if (!fused[u]) found += wide_inputs(g, hint, mat, fused, mark, stamp, u, numel, limit - found, visits);
    }
    return found;
}

/* An expensive pointwise node in v's unmaterialised subtree that is
 * broadcast into it (at most a sixteenth of its numel elements: a
 * BatchNorm's 1/sqrt(var + eps), one per channel, in x_hat = (x - mean) *
 * that) and pulls in no fused reduction or dot (a row reduction's, which
 * its kernel computes once per row, stays there); 0 if none. At most
 * SCHED_WIDE_VISIT nodes are visited (mark, stamp as wide_inputs). */
static uint32_t broadcast_expensive(const Graph *g, const Graph *hint, const uint8_t *mat, const uint8_t *fused,
                                    uint8_t *memo2, uint32_t *mark, uint32_t stamp, uint32_t v, int64_t numel,
                                    int *visits)
{
    const Node *n = &g->nodes[v];
    for (int s = 0; s < n->nsrc && *visits < SCHED_WIDE_VISIT; s++) {
        uint32_t u = n->src[s], e;
        const Node *m = &g->nodes[u];
        if (mark[u] == stamp || mat[u] || fused[u]) continue;
        mark[u] = stamp, ++*visits;
        if (is_pointwise((Op)m->op) && is_expensive((Op)m->op) && numel_at(hint, u) * 16 <= numel &&
            fused_ops(g, mat, fused, memo2, u) >= 0)
            return u;
        if ((e = broadcast_expensive(g, hint, mat, fused, memo2, mark, stamp, u, numel, visits))) return e;
    }
    return 0;
}

#define NO_KERNEL 0u           /* owner: no kernel reads it (dead) */
#define MANY_KERNELS UINT32_MAX /* owner: read by two kernels or more */

/* owner[u]: the one kernel (the node it writes) an unmaterialised node is
 * fused into, NO_KERNEL or MANY_KERNELS; a materialised node owns itself.
 * Users have larger ids, so one pass from the top settles each node
 * before its sources. */
static void owners(const Graph *g, const uint8_t *mat, uint32_t *owner)
{
    memset(owner, 0, g->n * sizeof *owner);
    for (uint32_t v = g->n; v-- > 1;) {
        const Node *n = &g->nodes[v];
        uint32_t k = mat[v] ? v : owner[v];
        if (mat[v]) owner[v] = v;
        if (k == NO_KERNEL) continue;
        for (int s = 0; s < n->nsrc; s++) {
            uint32_t u = n->src[s];
            if (mat[u]) continue;
            owner[u] = owner[u] == NO_KERNEL || owner[u] == k ? k : MANY_KERNELS;
        }
    }
}

/* ---- reductions fused into their reader's kernel ----
 * A reduction r over dims Red of x (shape X) need not be a kernel of its
 * own when its one reader kernel iterates over X too: that kernel, a
 * pointwise node of shape X or a reduction of an X-shaped value over the
 * same Red, runs one loop nest per row (the kept dims), which computes r in
 * an accumulator over the row before it is used (softmax: max, then the sum
 * of exp, then the output, one kernel reading each row from memory once).
 * The reader must see r only at the row's own position: through pointwise
 * ops of shape X ("full" index), one expand of r's keepdim shape back to X
 * and pointwise ops of that shape ("row" index). Red must be the trailing
 * non-unit dims of X (rows contiguous in memory); anything else keeps r in
 * a kernel of its own. */

enum { AT_FULL, AT_ROW, AT_OTHER };

typedef struct {
    const Graph *g;
    const uint8_t *mat, *fused;
    const Dim *x;        /* the host's X */
    int nd;
    uint32_t stamp;      /* this host's walk */
    uint32_t *seen_full, *seen_row, *seen_other; /* per node: stamp when walked so */
    uint8_t *bad;        /* per node: a fused reduction that must be a kernel */
    uint32_t *red_of;    /* per node: red mask + 1 where reached at a row index this walk */
    uint32_t red;        /* the host's red mask (bits), 0 until known */
    int nfused;          /* reductions fused into this host so far */
    uint32_t dot;        /* the dot fused into this host, 0 if none */
    uint8_t dtype;       /* the host's dtype */
    uint8_t host_red;    /* the host is a reduction */
    uint8_t prologue;    /* walking a fused reduction's input */
    uint32_t *dot_of;    /* per host: its fused dot, as found by the last walk */
} Walk;

/* The dims reduced by reduction n over an input of shape x, unit dims left
 * out (a dim of size 0 is no unit: its reduction is the identity, and a
 * kept one leaves no row). */
static uint32_t red_mask(const Node *n, const Dim *x, int nd)
{
    uint32_t m = 0;
    for (int d = 0; d < nd; d++)
        if (n->p.i[d] && x[d] != 1) m |= 1u << d;
    return m;
}

/* Red is the trailing non-unit dims of x. */
static int trailing(uint32_t red, const Dim *x, int nd)
{
    int seen_kept = 0;
    for (int d = nd - 1; d >= 0; d--) {
        if (x[d] == 1) continue;
        if (!(red >> d & 1)) seen_kept = 1;
        else if (seen_kept) return 0;
    }
    return red != 0;
}

static int same_shape(const Node *n, const Dim *x, int nd)
{
    return n->ndim == nd && memcmp(n->shape, x, (size_t)nd * sizeof *x) == 0;
}

/* The row shape of red: x with the reduced dims 1. */
static int row_shape(const Node *n, const Dim *x, int nd, uint32_t red)
{
    if (n->ndim != nd) return 0;
    for (int d = 0; d < nd; d++)
        if (n->shape[d] != (red >> d & 1 ? 1 : x[d])) return 0;
    return 1;
}

static void walk(Walk *w, uint32_t u, int at, uint32_t red);

/* Reaching fused reduction u with index `at` (red: the row's mask). */
static void reach_reduction(Walk *w, uint32_t u, int at, uint32_t red)
{
    const Node *n = &w->g->nodes[u], *x = &w->g->nodes[n->src[0]];
    uint32_t m = same_shape(x, w->x, w->nd) ? red_mask(n, w->x, w->nd) : 0;
    if (at != AT_ROW || !m || m != red || !trailing(m, w->x, w->nd) || (w->red && w->red != m) ||
        w->nfused == SCHED_MAX_ROW) {
        w->bad[u] = 1;
        return;
    }
    w->red = m;
    w->nfused++;
    uint8_t was = w->prologue;
    w->prologue = 1;
    walk(w, n->src[0], AT_FULL, 0); /* its input, over the row, is at the full index */
    w->prologue = was;
}

/* Reaching fused dot u: its output's kernel computes it, an accumulator
 * per element, and reads it only there (as an epilogue of the dot: bias,
 * activation, residual), so never inside a reduction's row. */
static void reach_dot(Walk *w, uint32_t u, int at)
{
    if (at != AT_FULL || w->host_red || w->prologue || (w->dot && w->dot != u) || w->g->nodes[u].dtype != w->dtype)
        w->bad[u] = 1;
    else w->dot = u;
}

static void walk(Walk *w, uint32_t u, int at, uint32_t red)
{
    const Node *n = &w->g->nodes[u];
    if (w->mat[u]) return;
    if (at == AT_FULL && !same_shape(n, w->x, w->nd)) at = AT_OTHER;
    if (at == AT_ROW && !row_shape(n, w->x, w->nd, red)) at = AT_OTHER;
    uint32_t *seen = at == AT_FULL ? w->seen_full : at == AT_ROW ? w->seen_row : w->seen_other;
    if (seen[u] == w->stamp && (at != AT_ROW || w->red_of[u] == red + 1)) return;
    if (seen[u] == w->stamp) at = AT_OTHER, seen = w->seen_other; /* two row masks: neither is trusted */
    if (at == AT_OTHER && seen[u] == w->stamp) return;
    seen[u] = w->stamp;
    if (at == AT_ROW) w->red_of[u] = red + 1;
    if (w->fused[u] && n->op == OP_DOT) { /* its operands are views of buffers */
        reach_dot(w, u, at);
        return;
    }
    if (w->fused[u]) {
        if (at == AT_OTHER) w->bad[u] = 1;
        else reach_reduction(w, u, at, red);
        if (w->bad[u]) walk(w, n->src[0], AT_OTHER, 0);
        return;
    }
    if (n->op == OP_EXPAND && at == AT_FULL) { /* x's row values broadcast back over the row */
        const Node *m = &w->g->nodes[n->src[0]];
        uint32_t r = 0;
        for (int d = 0; d < n->ndim && m->ndim == n->ndim; d++)
            if (m->shape[d] == 1 && n->shape[d] != 1) r |= 1u << d;
        walk(w, n->src[0], r ? AT_ROW : AT_OTHER, r);
        return;
    }
    int keep = is_pointwise((Op)n->op) && at != AT_OTHER;
    for (int s = 0; s < n->nsrc; s++) walk(w, n->src[s], keep ? at : AT_OTHER, red);
}

/* Walks every kernel; a fused reduction reached wrongly becomes a kernel:
 * 1 if any did. */
static int check_fused(Walk *w, const uint32_t *owner)
{
    const Graph *g = w->g;
    int changed = 0;
    memset(w->bad, 0, g->n);
    for (uint32_t v = 1; v < g->n; v++) {
        const Node *n = &g->nodes[v];
        if (!w->mat[v] || n->op == OP_INPUT) continue;
        w->stamp++;
        w->red = 0, w->nfused = 0, w->dot = 0, w->dtype = n->dtype, w->prologue = 0;
        w->host_red = kn_opinfo[n->op].cls == OC_REDUCE;
        if (kn_opinfo[n->op].cls == OC_REDUCE) { /* a reduction reads its input at the full index of X */
            w->x = g->nodes[n->src[0]].shape, w->nd = g->nodes[n->src[0]].ndim;
            w->red = red_mask(n, w->x, w->nd);
            if (!trailing(w->red, w->x, w->nd)) w->red = UINT32_MAX; /* no row kernel: fuses none */
            walk(w, n->src[0], AT_FULL, 0);
        } else {
            w->x = n->shape, w->nd = n->ndim;
            for (int s = 0; s < n->nsrc; s++) walk(w, n->src[s], is_pointwise((Op)n->op) ? AT_FULL : AT_OTHER, 0);
        }
        if (w->dot && w->nfused) w->bad[w->dot] = 1; /* a dot per element of a row kernel: no */
        w->dot_of[v] = w->dot;
    }
    for (uint32_t v = 1; v < g->n; v++) /* one reader kernel, and not read where it cannot be */
        if (w->fused[v] && !w->mat[v] && (w->bad[v] || owner[v] == MANY_KERNELS)) w->bad[v] = 1, changed = 1;
    return changed;
}

/* ---- dot operands: views of buffers ---- */
int sched_view(const Graph *g, const uint8_t *mat, uint32_t u, uint32_t *root, int64_t *stride, int64_t *off)
{
    const Node *n = &g->nodes[u];
    if (mat[u]) {
        *root = u, *off = 0;
        tensor_contig_strides(n->ndim, n->shape, stride);
        return 1;
    }
    if (kn_opinfo[n->op].cls != OC_MOVE || n->op == OP_PAD) return 0;
    const Node *m = &g->nodes[n->src[0]];
    int64_t st[KN_MAX_DIMS];
    if (!sched_view(g, mat, n->src[0], root, st, off)) return 0;
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

/* ---- convolution windows: a dot operand read as implicit GEMM ---- */

enum { MAX_WINDOWS = 256 }; /* kernel offsets (KH*KW) a window view may stack */

typedef struct {
    uint32_t xp;            /* the (padded) input the window slices; 0: not seen yet */
    int64_t h0, w0, sh, sw; /* its start and step in H and W */
} Leaf;

static int unfused_view(const Graph *g, const uint8_t *mat, uint32_t v, Op op, int ndim)
{
    return !mat[v] && g->nodes[v].op == op && g->nodes[v].ndim == ndim;
}

/* A pad of 0 on dim 2 only, before (pd->p.i[4]) and after, of a 5-d node of
 * v's shape: one half of stack_windows' cat. */
static int stack_pad(const Graph *g, const uint8_t *mat, uint32_t u, const Node *v)
{
    const Node *pd = &g->nodes[u];
    if (!unfused_view(g, mat, u, OP_PAD, 5) || pd->p.f != 0.0 || memcmp(pd->shape, v->shape, 5 * sizeof(Dim)))
        return 0;
    for (int d = 0; d < 5; d++)
        if (pd->p.i[2 * d] < 0 || pd->p.i[2 * d + 1] < 0 || (d != 2 && (pd->p.i[2 * d] || pd->p.i[2 * d + 1]))) return 0;
    return 1;
}

/* The windows of decomp_conv.c's stack_windows, (N, C, KK, OH, OW): one
 * window, a reshape of (N, C, OH, OW) slices of xp to (N, C, 1, OH, OW), at
 * position base, or add(pad(l), pad(r)) of windows padded apart on dim 2.
 * Fills leaf[base..]; 0 if v is not such a tree or two windows overlap. */
static int window_leaves(const Graph *g, const uint8_t *mat, uint32_t v, int64_t base, Leaf *leaf, int64_t kk)
{
    const Node *n = &g->nodes[v];
    if (!mat[v] && n->op == OP_ADD && n->ndim == 5) {
        for (int s = 0; s < 2; s++)
            if (!stack_pad(g, mat, n->src[s], n) ||
                !window_leaves(g, mat, g->nodes[n->src[s]].src[0], base + g->nodes[n->src[s]].p.i[4], leaf, kk))
                return 0;
        return 1;
    }
    if (!unfused_view(g, mat, v, OP_RESHAPE, 5) || n->shape[2] != 1 || base < 0 || base >= kk || leaf[base].xp)
        return 0;
    Leaf l = {n->src[0], 0, 0, 1, 1};
    const Node *m = &g->nodes[l.xp];
    if (m->ndim != 4 || m->shape[0] != n->shape[0] || m->shape[1] != n->shape[1]) return 0;
    for (int d = 3; d >= 2; d--) /* window(): a slice of H, then of W; either may be the identity */
        if (unfused_view(g, mat, l.xp, OP_SLICE, 4) && g->nodes[l.xp].p.i[0] == d) {
            const Node *sl = &g->nodes[l.xp];
            if (sl->p.i[3] < 1) return 0;
            *(d == 2 ? &l.h0 : &l.w0) = sl->p.i[1];
            *(d == 2 ? &l.sh : &l.sw) = sl->p.i[3];
            l.xp = sl->src[0];
        }
    leaf[base] = l;
    return 1;
}

/* KH x KW windows at (h0 + ky*dh, w0 + kx*dw), k = ky*KW + kx, with one
 * step: the geometry into w; 0 if the leaves are not such a grid. */
static int window_grid(const Leaf *leaf, int64_t kk, GemmWindow *w)
{
    int64_t kw = 1;
    while (kw < kk && leaf[kw].h0 == leaf[0].h0) kw++;
    if (kk % kw) return 0;
    w->kh = kk / kw, w->kw = kw;
    w->dh = w->kh > 1 ? leaf[kw].h0 - leaf[0].h0 : 1;
    w->dw = kw > 1 ? leaf[1].w0 - leaf[0].w0 : 1;
    w->sh = leaf[0].sh, w->sw = leaf[0].sw;
    if (w->dh < 1 || w->dw < 1) return 0;
    for (int64_t k = 0; k < kk; k++)
        if (leaf[k].xp != leaf[0].xp || leaf[k].sh != w->sh || leaf[k].sw != w->sw ||
            leaf[k].h0 != leaf[0].h0 + k / kw * w->dh || leaf[k].w0 != leaf[0].w0 + k % kw * w->dw)
            return 0;
    return 1;
}

int sched_window(const Graph *g, const uint8_t *mat, uint32_t u, uint32_t *x, GemmWindow *w)
{
    static const int to_gck[6] = {1, 2, 3, 0, 4, 5};
    memset(w, 0, sizeof *w);
    if (unfused_view(g, mat, u, OP_PERMUTE, 3) && !memcmp(g->nodes[u].p.i, (int64_t[]){0, 2, 1}, 3 * sizeof(int64_t)))
        w->t = 1, u = g->nodes[u].src[0];
    /* (G, C*KK, N*OH*OW) = reshape(permute(reshape(S, (N, G, C, KK, OH, OW)), (G, C, KK, N, OH, OW))) */
    if (!unfused_view(g, mat, u, OP_RESHAPE, 3)) return 0;
    uint32_t p = g->nodes[u].src[0];
    if (!unfused_view(g, mat, p, OP_PERMUTE, 6)) return 0;
    for (int d = 0; d < 6; d++)
        if (g->nodes[p].p.i[d] != to_gck[d]) return 0;
    uint32_t r = g->nodes[p].src[0], st = g->nodes[r].src[0];
    if (!unfused_view(g, mat, r, OP_RESHAPE, 6) || g->nodes[st].ndim != 5) return 0;
    const Dim *rs = g->nodes[r].shape, *ss = g->nodes[st].shape;
    const Dim *us = g->nodes[u].shape;
    if (rs[0] != ss[0] || rs[1] * rs[2] != ss[1] || rs[3] != ss[2] || rs[4] != ss[3] || rs[5] != ss[4] ||
        us[0] != rs[1] || us[1] != rs[2] * rs[3] || us[2] != rs[0] * rs[4] * rs[5])
        return 0;
    int64_t kk = ss[2];
    Leaf leaf[MAX_WINDOWS];
    if (kk < 1 || kk > MAX_WINDOWS) return 0;
    memset(leaf, 0, (size_t)kk * sizeof *leaf);
    if (!window_leaves(g, mat, st, 0, leaf, kk)) return 0;
    for (int64_t k = 0; k < kk; k++)
        if (!leaf[k].xp) return 0;
    if (!window_grid(leaf, kk, w)) return 0;
    /* the input, and the zero padding before its windows */
    uint32_t xp = leaf[0].xp;
    int64_t ph = 0, pw = 0;
    if (unfused_view(g, mat, xp, OP_PAD, 4) && g->nodes[xp].p.f == 0.0) {
        const int64_t *pi = g->nodes[xp].p.i;
        int ok = !pi[0] && !pi[1] && !pi[2] && !pi[3];
        for (int i = 4; i < 8; i++) ok &= pi[i] >= 0;
        if (ok) ph = pi[4], pw = pi[6], xp = g->nodes[xp].src[0];
    }
    const Node *xn = &g->nodes[xp];
    if (xn->ndim != 4 || xn->shape[0] != ss[0] || xn->shape[1] != ss[1]) return 0;
    *x = xp;
    w->on = 1;
    w->n = xn->shape[0], w->c = rs[2], w->h = xn->shape[2], w->w = xn->shape[3];
    w->oh = ss[3], w->ow = ss[4];
    w->ph = ph - leaf[0].h0, w->pw = pw - leaf[0].w0;
    return 1;
}

int sched_batch_stride(int nb, const Dim *shape, const int64_t *stride, int64_t *out)
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

int sched_build(kn_ctx *ctx, const Graph *g, const uint32_t *outs, int nouts, Arena *a, Schedule *out)
{
    return sched_build_hint(ctx, g, NULL, outs, nouts, a, out);
}

int sched_build_hint(kn_ctx *ctx, const Graph *g, const Graph *hint, const uint32_t *outs, int nouts, Arena *a,
                     Schedule *out)
{
    memset(out, 0, sizeof *out);
    if (!hint) hint = g;
    uint8_t *mat = arena_alloc(a, g->n), *memo = arena_alloc(a, g->n), *fused = arena_alloc(a, g->n);
    uint8_t *memo2 = arena_alloc(a, g->n);
    uint8_t *bad = arena_alloc(a, g->n);
    uint32_t *owner = arena_alloc(a, g->n * sizeof *owner);
    uint32_t *seen = arena_alloc(a, 5 * (size_t)g->n * sizeof *seen), *mark = arena_alloc(a, g->n * sizeof *mark);
    uint32_t stamp = 0;
    if (!mat || !memo || !memo2 || !fused || !bad || !owner || !seen || !mark)
        return kn_errs(ctx, KN_ENOMEM, "out of memory scheduling");
    memset(seen, 0, 5 * (size_t)g->n * sizeof *seen);
    memset(mark, 0, g->n * sizeof *mark);
    for (uint32_t v = 1; v < g->n; v++) {
        Op op = (Op)g->nodes[v].op;
        mat[v] = op == OP_INPUT || is_anchor(op);
        /* reductions and dots may fuse into their reader (the lowering
         * computes them in an accumulator) */
        fused[v] = kn_opinfo[op].cls == OC_REDUCE || op == OP_DOT;
        if (fused[v]) mat[v] = 0;
    }
    for (int i = 0; i < nouts; i++) mat[outs[i]] = 1;
    /* gather reads its input at data-dependent places (lower.c), which only
     * a buffer can be; its index and scatter_add's operands are read at
     * the positions of the index (or the output), so they fuse (a token
     * index expanded over the embedding's row is a view of the tokens) */
    for (uint32_t v = 1; v < g->n; v++)
        if (g->nodes[v].op == OP_GATHER) mat[g->nodes[v].src[0]] = 1;
    /* dot operands: a view of a buffer, or a buffer of their own */
    for (uint32_t v = 1; v < g->n; v++)
        if (g->nodes[v].op == OP_DOT)
            for (int s = 0; s < 2; s++) {
                uint32_t u = g->nodes[v].src[s], r = u, x;
                GemmWindow win;
                if (s == 1 && sched_window(g, mat, u, &x, &win)) { /* implicit GEMM: x must be a view of a buffer */
                    uint32_t root;
                    int64_t st[KN_MAX_DIMS], off;
                    if (!mat[x] && !sched_view(g, mat, x, &root, st, &off)) mat[x] = 1;
                    continue;
                }
                while (!mat[r] && is_view((Op)g->nodes[r].op) && g->nodes[r].op != OP_PAD) r = g->nodes[r].src[0];
                /* a view of a reduction: the reduction; of a pointwise value: the value, so that
                 * its kernel keeps the value's shape (layer_norm's rows, then flattened for a
                 * linear: one row kernel), and the view is read through strides where it can be */
                if (!mat[r]) mat[r == u || (!fused[r] && !is_pointwise((Op)g->nodes[r].op)) ? u : r] = 1;
                /* a view the template cannot read (batch dims that do not collapse to one stride, as
                 * attention's heads permuted out of the rows): a contiguous copy of its own */
                uint32_t root;
                int64_t st[KN_MAX_DIMS], off, bs;
                int nb = g->nodes[v].ndim - 2;
                if (!mat[u] && (!sched_view(g, mat, u, &root, st, &off) || !sched_batch_stride(nb, g->nodes[v].shape, st, &bs)))
                    mat[u] = 1;
            }
    /* reads[v]: the places v is read at, views followed to their readers
     * (a pad read by nine window slices: nine), up to the buffers marked so
     * far (a convolution's input: its windows read the buffer, not what it
     * is computed from). Fused pointwise readers read v where they are
     * themselves computed, one place for them all (pw[v]): relu's
     * where(x < 0, 0, where(x == x, x, 0)) reads its x at one place, which
     * its kernel loads once (values are interned); counted once per reader,
     * a BatchNorm's 4-op affine before it was "read at four places"
     * (SCHED_MANY_READS) and became a kernel and a round trip through
     * memory of its own. */
    uint16_t *reads = arena_alloc(a, 2 * g->n * sizeof *reads), *pw = reads + g->n;
    if (!reads) return kn_errs(ctx, KN_ENOMEM, "out of memory scheduling");
    memset(reads, 0, 2 * g->n * sizeof *reads);
    for (uint32_t v = g->n; v-- > 1;) {
        const Node *n = &g->nodes[v];
        int fused_pw = !mat[v] && is_pointwise((Op)n->op);
        uint32_t r = is_view((Op)n->op) && !mat[v] ? reads[v] + pw[v] : 1;
        if (r > UINT16_MAX) r = UINT16_MAX;
        for (int s = 0; s < n->nsrc; s++) {
            uint32_t u = n->src[s];
            int again = 0;
            for (int t = 0; t < s; t++) again |= n->src[t] == u;
            if (again) continue;
            if (fused_pw) pw[u] = (uint16_t)(pw[u] > r ? pw[u] : r);
            else reads[u] = (uint16_t)(reads[u] + r > UINT16_MAX ? UINT16_MAX : reads[u] + r);
        }
    }
    for (uint32_t v = 1; v < g->n; v++) reads[v] = (uint16_t)(reads[v] + pw[v] > UINT16_MAX ? UINT16_MAX : reads[v] + pw[v]);
    for (uint32_t v = 1; v < g->n; v++)
        if (mat[v]) fused[v] = 0;
    /* Fused reductions that cannot stay fused, then shared expensive
     * pointwise values (once, in a kernel of their own; cheap ones, such
     * as add or compare, are recomputed instead of costing a round trip
     * through memory). Deciding one can change another, so repeat until
     * stable.
     * The walk over every kernel (check_fused) runs again only after it
     * changed something itself: the rules after it materialise a pointwise
     * value v whose fused subtree holds no fused reduction or dot (rule 2:
     * v has many owners, so would any fused node below it, and check_fused
     * found none such; rules 3 and 4: fused_ops(v) >= 0 says so). Then
     * every walk that passed v loses no fused node and no conflict is added
     * (a path less can only remove one), v's own walk finds none, and no
     * fused node's owners change (its readers are outside v's subtree): it
     * would find nothing, and each host's dot is the same (cnn: 373 walks
     * of every kernel -> 1). */
    Walk w;
    memset(&w, 0, sizeof w);
    w.g = g, w.mat = mat, w.fused = fused, w.bad = bad;
    w.seen_full = seen, w.seen_row = seen + g->n, w.seen_other = seen + 2 * g->n, w.red_of = seen + 3 * g->n;
    w.dot_of = seen + 4 * g->n;
    for (int changed = 1, walked = 0; changed;) {
        changed = 0;
        owners(g, mat, owner);
        if (!walked && check_fused(&w, owner)) {
            for (uint32_t v = 1; v < g->n; v++)
                if (bad[v]) mat[v] = 1, fused[v] = 0;
            changed = 1;
            continue;
        }
        walked = 1;
        memset(memo, 0, g->n);
        memset(memo2, 0, g->n);
        for (uint32_t v = g->n; v-- > 1;) {
            if (mat[v] || !is_pointwise((Op)g->nodes[v].op) || owner[v] != MANY_KERNELS) continue;
            if (fused_cost(g, mat, memo, v)) {
                /* the expensive op, where it is broadcast into v: a small buffer, and v, cheap now,
                 * recomputed by its readers rather than a buffer of v's size written and read back */
                int visits = 0;
                uint32_t e = broadcast_expensive(g, hint, mat, fused, memo2, mark, ++stamp, v, numel_at(hint, v),
                                                 &visits);
                mat[e ? e : v] = changed = 1;
                break; /* the owners change */
            }
        }
        if (changed) continue;
        /* a cheap value read by several kernels that itself reads
         * SCHED_WIDE buffers of its size: once, rather than each reader
         * reading them all. k readers of a value over m buffers read k*m
         * buffers, against m + 1 + k through a buffer of its own: fewer
         * for every k >= 2 once m >= 4. The earliest such value first, so
         * that later ones build on it (a residual stream x + f(x) + g(x)
         * + ..., which every layer_norm would otherwise recompute from the
         * start: quadratic in the layers) */
        for (uint32_t v = 1; v < g->n; v++) {
            if (mat[v] || !is_pointwise((Op)g->nodes[v].op) || owner[v] != MANY_KERNELS) continue;
            int visits = 0;
            if (wide_inputs(g, hint, mat, fused, mark, ++stamp, v, numel_at(hint, v), SCHED_WIDE, &visits) >= SCHED_WIDE) {
                mat[v] = changed = 1;
                break; /* the owners change */
            }
        }
        if (changed) continue;
        /* an expensive value broadcast into a larger kernel (Adam's bias
         * correction, a pow of scalars, into every parameter's update):
         * once, not at each element; but not a row reduction's (layer_norm's
         * 1/sqrt(var + eps)), which the kernel computes once per row */
        memset(memo2, 0, g->n);
        for (uint32_t v = g->n; v-- > 1;) {
            uint32_t k = owner[v];
            if (mat[v] || !is_pointwise((Op)g->nodes[v].op) || k == NO_KERNEL || k == MANY_KERNELS) continue;
            int64_t nv = numel_at(hint, v), nk = numel_at(hint, k);
            if (nv >= 0 && nv * 16 <= nk && fused_cost(g, mat, memo, v) && fused_ops(g, mat, fused, memo2, v) >= 0) {
                mat[v] = changed = 1;
                break; /* the outermost such value: it holds the rest */
            }
        }
        if (changed) continue;
        /* a value read at many places (a convolution's windows, a pool's)
         * or one that is long, computed once rather than at each read */
        memset(memo, 0, g->n);
        for (uint32_t v = g->n; v-- > 1;) {
            if (mat[v] || !is_pointwise((Op)g->nodes[v].op) || owner[v] == NO_KERNEL) continue;
            int ops = fused_ops(g, mat, fused, memo, v);
            if ((reads[v] >= SCHED_MANY_READS && ops >= 4) || (reads[v] >= 2 && ops >= SCHED_LONG)) mat[v] = changed = 1;
        }
    }
    /* a window operand whose chain a rule above materialised after all: a
     * buffer of its own, as any operand that is not a view */
    for (uint32_t v = 1; v < g->n; v++) {
        uint32_t u = g->nodes[v].src[1], root, x;
        int64_t st[KN_MAX_DIMS], off;
        GemmWindow win;
        if (g->nodes[v].op == OP_DOT && !mat[u] && !sched_view(g, mat, u, &root, st, &off) &&
            !sched_window(g, mat, u, &x, &win))
            mat[u] = 1;
    }
    /* a view that is an output is materialised through its own kernel;
     * everything materialised but the inputs is a kernel */
    uint32_t nk = 0;
    for (uint32_t v = 1; v < g->n; v++) nk += mat[v] && g->nodes[v].op != OP_INPUT;
    out->kernels = arena_alloc(a, (nk ? nk : 1) * sizeof *out->kernels);
    if (!out->kernels) return kn_errs(ctx, KN_ENOMEM, "out of memory scheduling");
    for (uint32_t v = 1; v < g->n; v++)
        if (mat[v] && g->nodes[v].op != OP_INPUT) out->kernels[out->nkernels++] = v;
    for (uint32_t v = 1; v < g->n; v++) /* dead reductions are no concern of anyone's */
        if (fused[v] && owner[v] == NO_KERNEL) fused[v] = 0;
    out->materialised = mat;
    out->fused = fused;
    out->dot = w.dot_of;
    for (uint32_t v = 1; v < g->n; v++)
        if (!mat[v] || (out->dot[v] && !fused[out->dot[v]])) out->dot[v] = 0;
    return 0;
}

/* The unmaterialised nodes kernel node v pulls in, depth first, each once
 * (the first 256 remembered in done). */
static size_t dump_fused(const Graph *g, const Schedule *s, uint32_t v, uint32_t *done, int *ndone, char *buf,
                         size_t cap, size_t len)
{
    const Node *n = &g->nodes[v];
    for (int i = 0; i < n->nsrc; i++) {
        uint32_t u = n->src[i];
        int seen = 0;
        for (int j = 0; j < *ndone && !seen; j++) seen = done[j] == u;
        if (s->materialised[u] || seen) continue;
        if (*ndone < 256) done[(*ndone)++] = u;
        len = dump_fused(g, s, u, done, ndone, buf, cap, len);
        len = kn_appendf(buf, cap, len, " %%%" PRIu32 " %s%s", u, kn_opinfo[g->nodes[u].op].name,
                         !s->fused || !s->fused[u] ? "" : g->nodes[u].op == OP_DOT ? "(epilogue)" : "(row)");
    }
    return len;
}

size_t sched_dump(const Graph *g, const Schedule *s, char *buf, size_t cap)
{
    size_t len = 0;
    uint32_t done[256];
    if (cap) buf[0] = 0;
    for (int k = 0; k < s->nkernels; k++) {
        uint32_t v = s->kernels[k];
        int ndone = 0;
        len = kn_appendf(buf, cap, len, "%%%" PRIu32 " %s <-", v, kn_opinfo[g->nodes[v].op].name);
        len = dump_fused(g, s, v, done, &ndone, buf, cap, len);
        len = kn_appendf(buf, cap, len, "\n");
    }
    return len;
}
