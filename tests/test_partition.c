/*
 * test_partition.c — the graph runner and the min-cut partitioner.
 *
 * Joint graphs are built by tracing: a forward, then a backward written by
 * hand with kn_ ops or produced by autodiff_grads. Each is partitioned and
 * checked for (a) the forward then the backward program giving exactly the
 * values of the whole joint graph run as one program (and, for the MLP, the
 * gradients of eager kn_backward); (b) pointwise chains after a dot being
 * recomputed rather than saved; (c) a memory budget never increasing the
 * saved bytes; (d) the runner's and the partitioner's errors.
 */
#include <stdlib.h>

#include "test.h"
#include "../src/core.h"
#include "../src/partition.h"

/* ---- helpers ---- */

static kn_tensor *ramp(kn_ctx *ctx, int ndim, const int64_t *shape, double scale)
{
    double v[512];
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    for (int64_t i = 0; i < n && i < 512; i++) v[i] = scale * (double)((i * 7) % 11 - 5) / 5.0;
    return kn_to(ctx, kn_tensor_from(ctx, KN_F64, ndim, shape, v), KN_F32);
}

/* Elementwise equality within rtol (0: bit-exact up to the f64 read). */
static int same(kn_ctx *ctx, kn_tensor *a, kn_tensor *b, double rtol)
{
    if (!a || !b || kn_numel(a) != kn_numel(b) || kn_ndim(a) != kn_ndim(b)) return 0;
    int64_t n = kn_numel(a);
    double *x = malloc((size_t)(n ? n : 1) * sizeof *x), *y = malloc((size_t)(n ? n : 1) * sizeof *y);
    int ok = x && y && kn_read(ctx, kn_to(ctx, a, KN_F64), x, (size_t)n * sizeof *x) == KN_OK &&
             kn_read(ctx, kn_to(ctx, b, KN_F64), y, (size_t)n * sizeof *y) == KN_OK;
    for (int64_t i = 0; ok && i < n; i++) ok = test_close(x[i], y[i], rtol, rtol * 1e-2);
    free(x);
    free(y);
    return ok;
}

static int has(const uint32_t *ids, int n, uint32_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id) return 1;
    return 0;
}

/* Invariants of every partition: programs in id order, saved values are
 * computed by the forward, never inputs or constants, never computed again
 * by the backward; the backward recomputes no dot or rand (and at level 0
 * no reduction or indexing). */
static void check_structure(const Graph *g, const Partition *p)
{
    int order = 1, saved = 1, recompute = 1;
    for (int i = 1; i < p->nfwd; i++) order &= p->fwd[i - 1] < p->fwd[i];
    for (int i = 1; i < p->nbwd; i++) order &= p->bwd[i - 1] < p->bwd[i];
    for (int i = 0; i < p->nsaved; i++) {
        const Node *n = &g->nodes[p->saved[i]];
        saved &= has(p->fwd, p->nfwd, p->saved[i]) && !has(p->bwd, p->nbwd, p->saved[i]);
        saved &= n->op != OP_INPUT && n->op != OP_FULL && n->op != OP_IOTA;
    }
    for (int i = 0; i < p->nbwd; i++) {
        const Node *n = &g->nodes[p->bwd[i]];
        OpClass c = kn_opinfo[n->op].cls;
        if (!has(p->fwd, p->nfwd, p->bwd[i])) continue;
        recompute &= n->op != OP_DOT && n->op != OP_RAND;
        if (p->level == 0) recompute &= c != OC_REDUCE && c != OC_INDEX;
    }
    CHECK_MSG(order, "programs are not in id order");
    CHECK_MSG(saved, "a saved value is an input, a constant, or computed by the backward");
    CHECK_MSG(recompute, "the backward recomputes a value it may not");
    CHECK(p->saved_bytes <= p->saved_bytes_all);
}

/* Runs the whole joint graph as one program. vals: g->n slots. */
static kn_status run_joint(kn_ctx *ctx, const Graph *g, kn_tensor **vals)
{
    uint32_t *prog = malloc(g->n * sizeof *prog);
    if (!prog) return KN_ENOMEM;
    for (uint32_t i = 1; i < g->n; i++) prog[i - 1] = i;
    memset(vals, 0, g->n * sizeof *vals);
    graph_run_bind(g, vals);
    kn_status s = graph_run(ctx, g, prog, (int)g->n - 1, vals);
    free(prog);
    return s;
}

/* Runs the forward program, hands its saved values to a fresh value array,
 * runs the backward program there. */
static kn_status run_split(kn_ctx *ctx, const Graph *g, const Partition *p, kn_tensor **fv, kn_tensor **bv)
{
    memset(fv, 0, g->n * sizeof *fv);
    memset(bv, 0, g->n * sizeof *bv);
    graph_run_bind(g, fv);
    graph_run_bind(g, bv);
    if (graph_run(ctx, g, p->fwd, p->nfwd, fv)) return ctx->status;
    for (int i = 0; i < p->nsaved; i++) bv[p->saved[i]] = fv[p->saved[i]];
    return graph_run(ctx, g, p->bwd, p->nbwd, bv);
}

/* Partitions with the budget, checks the structure, and that the split
 * programs reproduce the joint run exactly. */
static void check_split(kn_ctx *ctx, const Graph *g, const uint32_t *fo, int nfo, const uint32_t *bo, int nbo,
                        size_t budget, Partition *p, Arena *a)
{
    CHECK(partition_joint(ctx, g, fo, nfo, bo, nbo, budget, a, p) == 0);
    check_structure(g, p);
    kn_tensor **joint = calloc(g->n, sizeof *joint), **fv = calloc(g->n, sizeof *fv), **bv = calloc(g->n, sizeof *bv);
    CHECK(joint && fv && bv);
    CHECK_MSG(run_joint(ctx, g, joint) == KN_OK, "%s", kn_last_error(ctx));
    CHECK_MSG(run_split(ctx, g, p, fv, bv) == KN_OK, "%s", kn_last_error(ctx));
    for (int i = 0; i < nfo; i++) CHECK_MSG(same(ctx, fv[fo[i]], joint[fo[i]], 0), "forward output %d", i);
    for (int i = 0; i < nbo; i++) CHECK_MSG(same(ctx, bv[bo[i]], joint[bo[i]], 0), "backward output %d", i);
    free(joint);
    free(fv);
    free(bv);
}

static int count_op(const Graph *g, const uint32_t *ids, int n, Op op)
{
    int k = 0;
    for (int i = 0; i < n; i++) k += g->nodes[ids[i]].op == op;
    return k;
}

/* ---- (a), (b): a hand-written backward of a pointwise chain after a dot ---- */

/* y = sum(exp(u) * u), u = tanh(x @ w); the backward reads u and exp(u),
 * both (4, 16) f32, but only the dot's output need be saved: 256 bytes
 * instead of 512. */
static void test_pointwise_chain(kn_ctx *ctx)
{
    int64_t sx[2] = {4, 8}, sw[2] = {8, 16};
    kn_scope_begin(ctx);
    kn_tensor *x = ramp(ctx, 2, sx, 1.0), *w = ramp(ctx, 2, sw, 0.5);
    ctx->trace = graph_new(ctx);
    kn_tensor *h = kn_matmul(ctx, x, w), *u = kn_tanh(ctx, h), *v = kn_exp(ctx, u);
    kn_tensor *y = kn_sum(ctx, kn_mul(ctx, v, u), NULL, 0, 0);
    kn_tensor *dy = kn_full(ctx, KN_F32, 0, NULL, 1.0);
    kn_tensor *dv = kn_mul(ctx, dy, u), *du = kn_add(ctx, kn_mul(ctx, dy, v), kn_mul(ctx, dv, v));
    kn_tensor *dh = kn_mul(ctx, du, kn_sub(ctx, kn_scalar(ctx, 1.0), kn_mul(ctx, u, u)));
    kn_tensor *dw = kn_matmul(ctx, kn_transpose(ctx, x, 0, 1), dh);
    kn_tensor *dx = kn_matmul(ctx, dh, kn_transpose(ctx, w, 0, 1));
    CHECK(y && dw && dx);
    Graph *g = ctx->trace;
    ctx->trace = NULL;
    if (y && dw && dx) {
        uint32_t fo[1] = {y->node}, bo[2] = {dw->node, dx->node};
        Arena a;
        arena_init(&a, ctx);
        Partition p;
        check_split(ctx, g, fo, 1, bo, 2, 0, &p, &a);
        CHECK_MSG(p.saved_bytes == 256 && p.saved_bytes_all == 512, "saved %zu of %zu", p.saved_bytes,
                  p.saved_bytes_all);
        CHECK(p.nsaved == 1 && g->nodes[p.saved[0]].op == OP_DOT);
        CHECK(has(p.bwd, p.nbwd, u->node) && has(p.bwd, p.nbwd, v->node)); /* recomputed */
        CHECK(!has(p.bwd, p.nbwd, y->node));                                /* not needed */
        arena_free(&a);
    }
    graph_free(g);
    kn_scope_end(ctx);
}

/* ---- (c): a budget makes reductions recomputable ---- */

/* Softmax after a dot: without a budget the backward's reads of the
 * softmax need the dot and the two reductions saved; with a small budget
 * the reductions are recomputed from the dot's output. */
static void test_budget(kn_ctx *ctx)
{
    int64_t sx[2] = {4, 8}, sw[2] = {8, 16}, st[2] = {4, 16};
    kn_scope_begin(ctx);
    kn_tensor *x = ramp(ctx, 2, sx, 1.0), *w = kn_param(ctx, ramp(ctx, 2, sw, 0.5)), *t = ramp(ctx, 2, st, 2.0);
    ctx->trace = graph_new(ctx);
    kn_tensor *y = kn_sum(ctx, kn_mul(ctx, kn_softmax(ctx, kn_matmul(ctx, x, w), 1), t), NULL, 0, 0);
    kn_tensor *gw = NULL;
    CHECK(y && autodiff_grads(ctx, y, 1, &w, &gw) == KN_OK && gw);
    Graph *g = ctx->trace;
    ctx->trace = NULL;
    if (gw) {
        uint32_t fo[1] = {y->node}, bo[1] = {gw->node};
        Arena a;
        arena_init(&a, ctx);
        Partition p0, p1, pbig;
        check_split(ctx, g, fo, 1, bo, 1, 0, &p0, &a);
        check_split(ctx, g, fo, 1, bo, 1, 1, &p1, &a);              /* unreachable: recompute all it may */
        check_split(ctx, g, fo, 1, bo, 1, p0.saved_bytes, &pbig, &a); /* fits already */
        CHECK(p0.level == 0 && pbig.level == 0 && pbig.saved_bytes == p0.saved_bytes);
        CHECK(p1.level == 2 && p1.saved_bytes <= p0.saved_bytes);
        CHECK_MSG(p1.saved_bytes < p0.saved_bytes, "budget: %zu, none: %zu", p1.saved_bytes, p0.saved_bytes);
        CHECK(count_op(g, p0.saved, p0.nsaved, OP_DOT) == 1);
        arena_free(&a);
    }
    autodiff_release(ctx);
    graph_free(g);
    kn_free(ctx, w);
    kn_scope_end(ctx);
}

/* ---- rand is saved, never replayed; what it feeds may be recomputed ---- */

static void test_dropout(kn_ctx *ctx)
{
    int64_t sx[2] = {4, 16};
    kn_scope_begin(ctx);
    kn_tensor *x = kn_param(ctx, ramp(ctx, 2, sx, 1.0));
    ctx->trace = graph_new(ctx);
    kn_tensor *d = kn_dropout(ctx, kn_exp(ctx, x), 0.5, 1);
    kn_tensor *y = kn_sum(ctx, kn_mul(ctx, d, d), NULL, 0, 0);
    kn_tensor *gx = NULL;
    CHECK(y && autodiff_grads(ctx, y, 1, &x, &gx) == KN_OK && gx);
    Graph *g = ctx->trace;
    ctx->trace = NULL;
    if (gx) {
        uint32_t fo[1] = {y->node}, bo[1] = {gx->node};
        Arena a;
        arena_init(&a, ctx);
        Partition p;
        check_split(ctx, g, fo, 1, bo, 1, 0, &p, &a);
        CHECK(count_op(g, p.bwd, p.nbwd, OP_RAND) == 0);
        CHECK(p.saved_bytes < p.saved_bytes_all);
        arena_free(&a);
    }
    autodiff_release(ctx);
    graph_free(g);
    kn_free(ctx, x);
    kn_scope_end(ctx);
}

/* ---- the MLP: autodiff's joint graph, checked against eager backward ---- */

typedef struct {
    kn_tensor *x, *target, *p[4]; /* W1 (32, 16), b1 (32), W2 (10, 32), b2 (10) */
} Mlp;

static kn_tensor *mlp_loss(kn_ctx *ctx, const Mlp *m)
{
    kn_tensor *h = kn_relu(ctx, kn_linear(ctx, m->x, m->p[0], m->p[1]));
    return kn_cross_entropy(ctx, kn_linear(ctx, h, m->p[2], m->p[3]), m->target, NULL);
}

static void mlp_init(kn_ctx *ctx, Mlp *m)
{
    int64_t sx[2] = {8, 16}, s[4][2] = {{32, 16}, {32, 0}, {10, 32}, {10, 0}}, n8 = 8;
    int64_t tv[8] = {0, 3, 9, 1, 4, 4, 7, 2};
    m->x = ramp(ctx, 2, sx, 1.0);
    m->target = kn_tensor_from(ctx, KN_I64, 1, &n8, tv);
    for (int i = 0; i < 4; i++) m->p[i] = kn_param(ctx, ramp(ctx, s[i][1] ? 2 : 1, s[i], 0.3 + 0.1 * i));
}

static void test_mlp(kn_ctx *ctx)
{
    Mlp m;
    kn_scope_begin(ctx);
    mlp_init(ctx, &m);
    /* eager reference */
    CHECK(kn_backward(ctx, mlp_loss(ctx, &m), 0) == KN_OK);
    ctx->trace = graph_new(ctx);
    kn_tensor *loss = mlp_loss(ctx, &m), *grads[4] = {NULL, NULL, NULL, NULL};
    CHECK(loss && autodiff_grads(ctx, loss, 4, m.p, grads) == KN_OK);
    Graph *g = ctx->trace;
    ctx->trace = NULL;
    int ok = loss && grads[0] && grads[1] && grads[2] && grads[3];
    CHECK(ok);
    if (ok) {
        uint32_t fo[1] = {loss->node}, bo[4];
        for (int i = 0; i < 4; i++) bo[i] = grads[i]->node;
        Arena a;
        arena_init(&a, ctx);
        Partition p;
        check_split(ctx, g, fo, 1, bo, 4, 0, &p, &a);
        CHECK(p.saved_bytes < p.saved_bytes_all);
        printf("  mlp (8x16 -> 32 -> 10): %u nodes, forward %d, backward %d, saved %d values, %zu bytes "
               "(%zu without recompute)\n",
               (unsigned)g->n - 1, p.nfwd, p.nbwd, p.nsaved, p.saved_bytes, p.saved_bytes_all);
        kn_tensor **fv = calloc(g->n, sizeof *fv), **bv = calloc(g->n, sizeof *bv);
        CHECK(fv && bv && run_split(ctx, g, &p, fv, bv) == KN_OK);
        for (int i = 0; fv && bv && i < 4; i++)
            CHECK_MSG(same(ctx, bv[bo[i]], kn_grad(ctx, m.p[i]), 1e-5), "gradient %d differs from eager", i);
        free(fv);
        free(bv);
        arena_free(&a);
    }
    autodiff_release(ctx);
    graph_free(g);
    for (int i = 0; i < 4; i++) kn_free(ctx, m.p[i]);
    kn_scope_end(ctx);
}

/* ---- (d): errors ---- */

static void test_run_errors(kn_ctx *ctx)
{
    int64_t s3 = 3, s2 = 2;
    kn_scope_begin(ctx);
    kn_tensor *x = kn_ones(ctx, KN_F32, 1, &s3);
    ctx->trace = graph_new(ctx);
    kn_tensor *y = kn_exp(ctx, kn_neg(ctx, x)); /* %1 input, %2 neg, %3 exp */
    Graph *g = ctx->trace;
    ctx->trace = NULL;
    CHECK(y && y->node == 3);
    kn_tensor *vals[8] = {NULL};
    uint32_t all[3] = {1, 2, 3}, skip[2] = {1, 3}, bad[1] = {99};

    CHECK(graph_run(ctx, g, all, 3, vals) == KN_EINVAL);
    CHECK_ERR(ctx, "graph_run: input %1 (graph input 0) has no value");
    graph_run_bind(g, vals);
    CHECK(vals[1] == x);
    CHECK(graph_run(ctx, g, skip, 2, vals) == KN_EINVAL);
    CHECK_ERR(ctx, "node %3 (exp) reads %2 (neg), which has no value yet");
    CHECK(graph_run(ctx, g, bad, 1, vals) == KN_EINVAL);
    CHECK_ERR(ctx, "names node %99");
    vals[1] = kn_ones(ctx, KN_F32, 1, &s2);
    CHECK(graph_run(ctx, g, all, 3, vals) == KN_ESHAPE);
    CHECK_ERR(ctx, "the value of %1 (input) is f32 (2), but the node is f32 (3)");
    vals[1] = x;
    ctx->trace = g;
    CHECK(graph_run(ctx, g, all, 3, vals) == KN_EINVAL);
    CHECK_ERR(ctx, "a trace is open");
    ctx->trace = NULL;
    CHECK(graph_run(ctx, g, all, 3, NULL) == KN_EINVAL);
    CHECK_ERR(ctx, "graph_run");
    CHECK(graph_run(NULL, g, all, 3, vals) == KN_EINVAL);
    CHECK(ctx->grad_enabled == 1); /* restored after every error */

    /* a good run; an empty program is fine */
    CHECK(graph_run(ctx, g, all, 3, vals) == KN_OK && vals[3]);
    float out[3];
    CHECK(vals[3] && kn_read(ctx, vals[3], out, sizeof out) == KN_OK && test_close(out[0], exp(-1.0), 1e-6, 0));
    CHECK(graph_run(ctx, g, NULL, 0, vals) == KN_OK);

    /* a corrupt graph: a source that does not precede its user */
    g->nodes[2].src[0] = 3;
    CHECK(graph_run(ctx, g, all, 3, vals) == KN_EINVAL);
    CHECK_ERR(ctx, "node %2 (neg): source 0 (%3) does not precede it");
    g->nodes[2].src[0] = 1;

    /* a symbolic shape cannot run */
    Node n;
    memset(&n, 0, sizeof n);
    n.op = OP_INPUT, n.dtype = KN_F32, n.ndim = 1, n.shape[0] = -1, n.p.n = 1, n.p.i[0] = 7;
    uint32_t sym[1] = {graph_add(g, &n)};
    CHECK(graph_run(ctx, g, sym, 1, vals) == KN_EUNSUPPORTED);
    CHECK_ERR(ctx, "symbolic dim 0");

    /* the partitioner's errors */
    Arena a;
    arena_init(&a, ctx);
    Partition p;
    uint32_t zero[1] = {0}, three[1] = {3};
    CHECK(partition_joint(ctx, g, zero, 1, three, 1, 0, &a, &p) == KN_EINVAL);
    CHECK_ERR(ctx, "partition: forward output 0 is %0, not a node of the graph");
    CHECK(partition_joint(ctx, g, three, 1, bad, 1, 0, &a, &p) == KN_EINVAL);
    CHECK_ERR(ctx, "backward output 0 is %99");
    CHECK(partition_joint(ctx, NULL, three, 1, three, 1, 0, &a, &p) == KN_EINVAL);
    CHECK_ERR(ctx, "partition: needs a graph");
    /* no backward: nothing saved; an output read by nothing else */
    CHECK(partition_joint(ctx, g, three, 1, NULL, 0, 0, &a, &p) == 0);
    CHECK(p.nfwd == 3 && p.nbwd == 0 && p.nsaved == 0 && p.saved_bytes == 0 && p.saved_bytes_all == 0);
    arena_free(&a);
    graph_free(g);
    kn_scope_end(ctx);
}

/* The partitioner on a graph of a few thousand nodes: a long residual
 * chain of dots and pointwise ops, one linear-time cut per level. */
static void test_large(kn_ctx *ctx)
{
    int64_t s[2] = {4, 4};
    kn_scope_begin(ctx);
    kn_tensor *x = kn_param(ctx, ramp(ctx, 2, s, 0.1)), *w = ramp(ctx, 2, s, 0.05);
    ctx->trace = graph_new(ctx);
    kn_tensor *h = x;
    for (int i = 0; i < 300; i++) h = kn_add(ctx, h, kn_tanh(ctx, kn_mul(ctx, kn_matmul(ctx, h, w), h)));
    kn_tensor *y = kn_sum(ctx, h, NULL, 0, 0), *gx = NULL;
    CHECK(y && autodiff_grads(ctx, y, 1, &x, &gx) == KN_OK && gx);
    Graph *g = ctx->trace;
    ctx->trace = NULL;
    if (gx) {
        uint32_t fo[1] = {y->node}, bo[1] = {gx->node};
        Arena a;
        arena_init(&a, ctx);
        Partition p;
        check_split(ctx, g, fo, 1, bo, 1, 0, &p, &a);
        CHECK(g->n > 2000 && p.saved_bytes < p.saved_bytes_all);
        arena_free(&a);
    }
    autodiff_release(ctx);
    graph_free(g);
    kn_free(ctx, x);
    kn_scope_end(ctx);
}

int main(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    test_pointwise_chain(ctx);
    test_budget(ctx);
    test_dropout(ctx);
    test_mlp(ctx);
    test_run_errors(ctx);
    test_large(ctx);
    kn_ctx_free(ctx);
    TEST_END("partition");
}
