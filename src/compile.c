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
 * interpreter runs (a node lower_kernel leaves to it; every node under
 * backend interp). Kernels run their parallel loops on
 * the port's thread pool. KILN_LOGS=fusion shows each kernel and what it
 * fused, loopir each kernel's loop IR, output_code the generated source. Every intermediate value
 * lives at a planned offset in one arena allocated at compile time, reused
 * once its last reader has run; outputs are new each run or live in
 * storage the program keeps and reuses as its reuse mode allows (program.c,
 * "running"): a run of kn_compile's reduce-overhead allocates nothing.
 *
 * Requires: a graph of concrete shapes and its outputs. Produces: a Program
 * (program.h) that program_run (program.c) runs on input tensors, equal to
 * the interpreter's result.
 * Dynamic shapes: compile_generic makes one program for a graph at every
 * size of one symbol, program_at runs it at a size ("programs generic in a
 * size", below).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "gemm_rt.h"
#include "log.h"
#include "loopopt.h"
#include "lower.h"
#include "program.h"
#include "target.h"
#include "../port/port.h"

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
        if (p->steps[s].gemm) last[p->steps[s].root[0]] = last[p->steps[s].root[1]] = s;
        const Kernel *k = p->steps[s].k; /* a loop kernel's or a dot's epilogue's inputs */
        for (int b = 0; k && b < k->nbufs; b++)
            if (k->bufs[b].role != BUF_OUT) last[k->bufs[b].node] = s;
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

/* p's arena at a 64-byte boundary (libc gives 16: a large block is a fresh mapping plus a 16-byte
 * header, a smaller one wherever the heap has room), so every buffer the plan puts at a multiple of 64
 * starts a cache line, and a vector load of the SIMD dialect never splits two. 1, or 0 out of memory. */
static int arena_alloc_aligned(kn_ctx *ctx, Program *p)
{
    p->mem_raw = kn_alloc(ctx, p->arena_bytes + 64);
    if (!p->mem_raw) return 0;
    p->mem = (char *)p->mem_raw + (64 - (uintptr_t)p->mem_raw % 64) % 64;
    return 1;
}

static int plan(kn_ctx *ctx, Program *p)
{
    int *last = arena_alloc(&p->arena, p->g->n * sizeof *last);
    Block *live = arena_alloc(&p->arena, (size_t)(LOWER_GROUP_MAX * p->nsteps + 1) * sizeof *live);
    p->offset = arena_alloc(&p->arena, p->g->n * sizeof *p->offset);
    if (!last || !live || !p->offset) return kn_errs(ctx, KN_ENOMEM, "out of memory planning");
    last_uses(p, last);
    for (uint32_t v = 0; v < p->g->n; v++) p->offset[v] = -1;
    int nlive = 0;
    for (int s = 0; s < p->nsteps; s++) {
        const Step *st = &p->steps[s];
        int group = st->k && !st->gemm; /* a loop kernel writes its out buffers (a group: several), others their node */
        for (int b = 0; b < (group ? st->k->nbufs : 1); b++) {
            uint32_t v = group ? st->k->bufs[b].node : st->node;
            if ((group && st->k->bufs[b].role != BUF_OUT) || is_output(p, v)) continue;
            size_t size = node_bytes(&p->g->nodes[v]);
            int64_t off = first_fit(live, nlive, s, size);
            live[nlive++] = (Block){off, size, last[v] < s ? s : last[v]};
            p->offset[v] = off;
            if ((size_t)off + size > p->arena_bytes) p->arena_bytes = (size_t)off + size;
        }
    }
    if (p->arena_bytes && !arena_alloc_aligned(ctx, p))
        return kn_errs(ctx, KN_ENOMEM, "out of memory for a %zu-byte arena", p->arena_bytes);
    return 0;
}

/* ---- building the steps ---- */

/* ---- dots through the target's template ---- */

/* Operand B (node u) as a convolution's window view of a buffer: the
 * window into w, B's batch stride (a group's channels) into sb[0]. */
static int gemm_window(Program *p, const Schedule *s, Step *st, uint32_t u, GemmWindow *w, int64_t *sb)
{
    uint32_t x;
    int64_t sx[KN_MAX_DIMS];
    if (!sched_window(p->g, s->materialised, u, &x, w) || !sched_view(p->g, s->materialised, x, &st->root[1], sx, &st->off[1]))
        return 0;
    w->sx_n = sx[0], w->sx_c = sx[1], w->sx_h = sx[2], w->sx_w = sx[3];
    sb[0] = w->c * sx[1];
    return 1;
}

/* Whether the dot g is a convolution that Winograd F(2x2, 3x3) computes
 * faster (GemmSpec.wino; a target without it computes directly): 3x3,
 * stride 1, dilation 1, one group, at least WINO_MIN channels in and out,
 * WINO_COLS output columns (images x pixels), and a column per channel in:
 * the transforms of input and output cost per tile and channel what the
 * GEMM saves per tile and channel pair, and the weights' (per call) per
 * channel pair what it saves per column. Measured on the 2-core Zen 4, one
 * thread's CPU time of backend c's units, direct / Winograd (images x side^2
 * columns): 64 -> 64 channels at 16 x 32^2 1.62, 4 x 8^2 1.23; 128 -> 128
 * at 16 x 16^2 1.62; 256 -> 256 at 16 x 8^2 1.39, 8 x 8^2 1.22, 4 x 8^2
 * 1.13; 512 -> 512 at 16 x 4^2 (ResNet-18's stage 4: half a column per
 * channel, the weights' transform as costly as the GEMM's saving) 1.00;
 * 16 -> 16 at 16 x 16^2 0.94 (before the vector transforms); 32 -> 32 at
 * 16 x 16^2 1.35 (idem).
 * kept: the weights are a graph input whose transform the unit may keep
 * across calls (GemmSpec.ukeep), so inference pays for it once: then from
 * WINO_COLS_KEPT columns, whatever the channels. Direct / Winograd with U
 * kept, same measure: 512 -> 512 at 16 x 4^2 1.65, 8 x 4^2 1.71, 4 x 4^2
 * 1.58, 3 x 4^2 1.39, 1 x 7^2 1.38, 2 x 4^2 1.01, 1 x 4^2 1.08; 256 -> 256
 * at 2 x 8^2 1.64, 1 x 8^2 1.52, 1 x 14^2 1.58; 128 -> 128 at 1 x 8^2
 * 1.83, 5 x 4^2 1.51; 64 -> 64 at 1 x 8^2 1.62, 1 x 6^2 1.36, 1 x 5^2 0.91,
 * 1 x 4^2 0.85; 32 -> 32 at 1 x 8^2 1.84 (under 16 tiles, most of a
 * GEMM's 16-column panel is padding). A training step's weights change at
 * every call, so it never keeps U: lower_steps undoes the choice there
 * (train_demote). */
#define WINO_MIN 32
#define WINO_COLS 256
#define WINO_COLS_KEPT 48
static int wino_pays(const GemmSpec *g, int kept)
{
    const GemmWindow *w = &g->win;
    return w->on && !w->t && w->kh == 3 && w->kw == 3 && w->sh == 1 && w->sw == 1 && w->dh == 1 && w->dw == 1 &&
           g->batch == 1 && w->c >= WINO_MIN && g->M >= WINO_MIN &&
           (kept ? g->N >= WINO_COLS_KEPT : g->N >= WINO_COLS && g->N >= w->c);
}

/* Whether the library's kn_rt_conv takes the convolution g (kn_rt_conv_work nonzero). A forward
 * window (Winograd F(4x4, 3x3), src/wino_rt.c): f32, relu or no act, at least a column per channel
 * in. Where it does, it beats backend c's own F(2x2, 3x3) units (wino.c), which need cc's time
 * besides: on the 2-core Zen 4, ResNet-18's 64 -> 64 channel convolutions 2.7 against 3.6 ms, 128 ->
 * 128 2.5 against 3.0 ms, 256 -> 256 the same, 3.3 ms (with F(2x2, 3x3)'s weights kept, the
 * library's transformed at every call); stage 4's 512 -> 512, half a column per channel, stays F(2x2,
 * 3x3) with its weights kept. Either keeps its weights' transform where inference may
 * (GemmSpec.ukeep). A transposed window (a 3x3 stride-1 convolution's weights' gradient,
 * src/conv_rt.c): f32, a batch filling vectors of 16 images 4/5ths full at least; against backend c's
 * SIMD units, whose pack of the window was some 40% of their time, ResNet-18's at B = 16 ran
 * 3.5-5.1 ms where those took 5-8. */
static int conv_lib(const GemmSpec *s)
{
    KnRtGemm g;
    int64_t win[19];
    spec_rt_gemm(s, &g, win);
    return kn_rt_conv_work(&g) > 0;
}

void spec_rt_gemm(const GemmSpec *s, KnRtGemm *g, int64_t *win)
{
    const GemmWindow *w = &s->win;
    int64_t v[19] = {w->t, w->n, w->c, w->h, w->w, w->kh, w->kw, w->oh, w->ow, w->sh,
                     w->sw, w->dh, w->dw, w->ph, w->pw, w->sx_n, w->sx_c, w->sx_h, w->sx_w};
    memcpy(win, v, sizeof v);
    memset(g, 0, sizeof *g);
    g->dtype = s->dtype, g->act = s->act, g->batch = s->batch, g->M = s->M, g->N = s->N, g->K = s->K;
    g->sa_b = s->sa_b, g->sa_m = s->sa_m, g->sa_k = s->sa_k, g->sb_b = s->sb_b, g->sb_k = s->sb_k, g->sb_n = s->sb_n;
    g->win = w->on ? win : NULL;
}

/* Dot d (st->node or the dot fused into its kernel) of f32 or f64 over
 * operands that are views of buffers, as a GemmSpec writing st->node's buffer. */
static int make_gemm(Program *p, const Schedule *s, Step *st, uint32_t d)
{
    const Node *n = &p->g->nodes[d];
    int nd = n->ndim, nb = nd - 2;
    if (!p->t->render_dot || (n->dtype != KN_F32 && n->dtype != KN_F64)) return 0;
    int64_t sa[KN_MAX_DIMS], sb[KN_MAX_DIMS];
    GemmSpec g;
    memset(&g, 0, sizeof g);
    if (!sched_view(p->g, s->materialised, n->src[0], &st->root[0], sa, &st->off[0])) return 0;
    if (!sched_view(p->g, s->materialised, n->src[1], &st->root[1], sb, &st->off[1]) &&
        !gemm_window(p, s, st, n->src[1], &g.win, sb))
        return 0;
    if (!sched_batch_stride(nb, n->shape, sa, &g.sa_b) || !sched_batch_stride(nb, n->shape, sb, &g.sb_b)) return 0;
    g.dtype = n->dtype == KN_F32 ? GEMM_F32 : GEMM_F64;
    g.batch = tensor_numel(nb, n->shape);
    g.M = n->shape[nd - 2], g.N = n->shape[nd - 1], g.K = p->g->nodes[n->src[0]].shape[nd - 1];
    g.sa_m = sa[nd - 2], g.sa_k = sa[nd - 1];
    if (!g.win.on) g.sb_k = sb[nd - 2], g.sb_n = sb[nd - 1];
    if (g.batch < 1 || g.M < 1 || g.N < 1 || g.K < 1) return 0; /* empty: a loop kernel (no pass, or C = 0) */
    /* B a graph input (a weight) read the same by every batch index: the unit may take it packed */
    g.bkeep = p->keep_packed && !g.win.on && (g.batch == 1 || g.sb_b == 0) && p->g->nodes[st->root[1]].op == OP_INPUT;
    /* A a graph input (a conv's weight): a Winograd unit may keep its transform */
    int akeep = p->keep_packed && p->g->nodes[st->root[0]].op == OP_INPUT;
    g.wino = wino_pays(&g, akeep);
    if ((g.wino || (g.win.on && g.win.t)) && conv_lib(&g)) g.wino = 2; /* the library's */
    g.ukeep = g.wino && akeep && !g.win.t;
    char *name = arena_alloc(&p->arena, 24);
    GemmSpec *spec = arena_alloc(&p->arena, sizeof *spec);
    if (!name || !spec) return 0;
    snprintf(name, 24, "g%" PRIu32 "_dot", st->node);
    g.name = name;
    /* a spec the target declines (a window over an empty image, say) is a loop kernel */
    if (!p->t->render_dot(&g, NULL, 0)) return 0;
    *spec = g;
    st->gemm = spec;
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

/* A graph with a convolution's weight gradient (a transposed window: win.t) trains: its weights,
 * graph inputs, change at every call, so no Winograd dot keeps their transform, and one that pays
 * only with it kept (wino_pays) computes directly. */
static void train_demote(kn_ctx *ctx, Program *p)
{
    int trains = 0;
    for (int i = 0; i < p->nsteps; i++) {
        const GemmSpec *g = p->steps[i].gemm;
        trains |= g && g->win.on && g->win.t;
    }
    for (int i = 0; trains && i < p->nsteps; i++) {
        GemmSpec *g = p->steps[i].gemm;
        if (!g || !g->ukeep) continue;
        g->ukeep = 0;
        if (wino_pays(g, 0)) continue;
        g->wino = 0;
        log_line(ctx, LOG_FUSION, "%%%" PRIu32 ": computed directly, not by Winograd: the graph trains (a weight "
                 "gradient's window), so its weights change at every call", p->steps[i].node);
    }
}

/* ---- groups: pointwise kernels of one shape that read the same buffers, as one kernel ----
 * The scheduler gives each materialised node a kernel of its own. Where
 * several pointwise kernels of one shape read the same buffers (Adam's
 * updates of a weight, its moments and the weight itself, each read the
 * gradient and the moments; batch norm's normalised value, its affine
 * output, ReLU's masks and output, each a pass over the activation),
 * each pass reads them again, and a later kernel that reads an earlier
 * one's output reads it back from memory. group_steps moves such a kernel
 * up into an earlier one's step when every buffer it reads is written
 * before that step (or by the group, at the element it stores), and
 * lower_group lowers the group as one loop nest with a store per node: its
 * inputs are read once, a node read by a later one of the group is the
 * value just stored, and values the nodes share are computed once. The
 * program's steps stay in an order where every buffer is written before it
 * is read. */

enum { GROUP_WINDOW = 256, GROUP_MAX_BUFS = 24 };

/* A plain kernel: a loop nest, one loop in each block, around one store of buffer 0 with no data-dependent
 * offset (what lower_kernel makes of a pointwise node). */
static int plain_kernel(const Kernel *k)
{
    IrRef r = k->body;
    while (r && k->nodes[r].kind == IR_LOOP && !k->nodes[r].next) r = k->nodes[r].child;
    const IrNode *x = r ? &k->nodes[r] : NULL;
    return x && x->kind == IR_STORE && !x->next && !x->op && !x->b && x->buf == 0;
}

/* Whether every load of kernel k moves by 0 or 1 element per step of its innermost loop (var v): a loop a
 * target vectorises. A group of a kernel that does not (a transposed read: the mlp's weight gradient
 * stored transposed) would drag its partners' loads (Adam's) onto that loop order too. */
static int unit_loads(const Kernel *k, int v)
{
    int64_t sym[IR_MAX_NEST + 1] = {0};
    if (v < 0) return 1; /* no loop */
    if (v > IR_MAX_NEST) return 0;
    for (uint32_t r = 1; r < k->n; r++) {
        const IrNode *x = &k->nodes[r];
        if (x->kind != IR_LOAD) continue;
        int err = 0;
        int64_t e[3];
        for (int i = 0; i < 3; i++) sym[v] = i, e[i] = expr_eval(k->ex, x->index, sym, &err);
        sym[v] = 0;
        if (err || x->a || e[1] - e[0] != e[2] - e[1] || (e[1] - e[0] != 0 && e[1] - e[0] != 1)) return 0;
    }
    return 1;
}

static int same_shape(const Node *a, const Node *b)
{
    return a->ndim == b->ndim && !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape);
}

/* Whether kernel k reads node u */
static int reads(const Kernel *k, uint32_t u)
{
    for (int b = 0; b < k->nbufs; b++)
        if (k->bufs[b].role == BUF_IN && k->bufs[b].node == u) return 1;
    return 0;
}

/* Whether step i's kernel k may join the group headed by step h (members m[0..nm), m[0] == h's node):
 * every buffer it reads written before h or by the group, and one of them, of the kernel's size at
 * least (not a scalar such as a learning rate), read or written by the group too. */
static int may_join(const Program *p, const int *at, const uint32_t *m, int nm, int h, const Kernel *k)
{
    const Graph *g = p->g;
    int64_t numel = tensor_numel(g->nodes[m[0]].ndim, g->nodes[m[0]].shape);
    int shared = 0;
    for (int b = 1; b < k->nbufs; b++) {
        uint32_t u = k->bufs[b].node;
        int mine = k->bufs[b].role == BUF_IN && reads(p->steps[h].k, u);
        for (int j = 0; j < nm && !mine; j++) mine = m[j] == u;
        if (k->bufs[b].role != BUF_IN || (!mine && at[u] >= h)) return 0;
        shared |= mine && tensor_numel(g->nodes[u].ndim, g->nodes[u].shape) >= numel;
    }
    return shared;
}

/* Lowers the group of nodes m[0..nm) into a new kernel for step h: 1 if it is one (or 0, and h keeps its
 * kernel), -1 on error. */
static int regroup(kn_ctx *ctx, Program *p, const Schedule *s, ExprTable *ex, int h, const uint32_t *m, int nm)
{
    Kernel *k = arena_alloc(&p->arena, sizeof *k);
    if (!k) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling"), -1;
    int r = lower_group(ctx, p->g, s, m, nm, ex, &p->arena, k);
    if (r == LOWER_NOGROUP || (!r && k->nbufs > GROUP_MAX_BUFS)) return 0;
    if (r || ir_verify(ctx, k)) return -1;
    p->steps[h].k = k;
    return 1;
}

/* Steps whose loop kernels write scalars alone move up to just after the last step that writes what they
 * read (Adam's bias corrections, made from the step count, then come before the first kernel of the step:
 * the weight's update, which reads them, may join its moments' group). A scalar is one at every size. */
static void hoist_scalars(Program *p, int *at)
{
    const Graph *g = p->g;
    for (int i = 0; i < p->nsteps; i++) at[p->steps[i].node] = i;
    for (int i = 0; i < p->nsteps; i++) {
        Step st = p->steps[i];
        int tiny = !st.interp && !st.gemm && st.k, to = 0;
        for (int b = 0; tiny && b < st.k->nbufs; b++) {
            const Node *n = &g->nodes[st.k->bufs[b].node];
            if (st.k->bufs[b].role == BUF_OUT) tiny = tensor_numel(n->ndim, n->shape) == 1;
            else if (at[st.k->bufs[b].node] + 1 > to) to = at[st.k->bufs[b].node] + 1;
        }
        if (!tiny || to >= i) continue;
        memmove(&p->steps[to + 1], &p->steps[to], (size_t)(i - to) * sizeof *p->steps);
        p->steps[to] = st;
        for (int j = to; j <= i; j++) at[p->steps[j].node] = j;
    }
}

static int group_steps(kn_ctx *ctx, Program *p, const Schedule *s, ExprTable *ex)
{
    const Graph *g = p->g;
    int *at = arena_alloc(&p->arena, g->n * sizeof *at);  /* per node: the step that writes it, or -1 */
    int *head = arena_alloc(&p->arena, (size_t)(p->nsteps + 1) * sizeof *head); /* per step: its group's, or -1 */
    uint32_t *m = arena_alloc(&p->arena, (size_t)(LOWER_GROUP_MAX * p->nsteps + 1) * sizeof *m); /* per head */
    int *nm = arena_alloc(&p->arena, (size_t)(p->nsteps + 1) * sizeof *nm);
    if (!at || !head || !m || !nm) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling");
    for (uint32_t v = 0; v < g->n; v++) at[v] = -1;
    hoist_scalars(p, at);
    for (uint32_t v = 0; v < g->n; v++) at[v] = -1;
    for (int i = 0; i < p->nsteps; i++) {
        Step *st = &p->steps[i];
        at[st->node] = i, head[i] = -1, nm[i] = 0;
        if (st->interp || st->gemm || !st->k || !plain_kernel(st->k) || !unit_loads(st->k, st->k->nvars - 1)) continue;
        head[i] = i, nm[i] = 1, m[LOWER_GROUP_MAX * i] = st->node;
        for (int h = i - 1; h >= 0 && h >= i - GROUP_WINDOW; h--) {
            if (head[h] != h || nm[h] == LOWER_GROUP_MAX || !same_shape(&g->nodes[p->steps[h].node], &g->nodes[st->node]))
                continue;
            uint32_t *mh = &m[LOWER_GROUP_MAX * h];
            if (!may_join(p, at, mh, nm[h], h, st->k)) continue;
            mh[nm[h]] = st->node;
            int r = regroup(ctx, p, s, ex, h, mh, nm[h] + 1);
            if (r < 0) return ctx->status;
            if (!r) continue;
            nm[h]++, head[i] = h, nm[i] = 0, at[st->node] = h;
            break;
        }
    }
    int n = 0, groups = 0;
    for (int i = 0; i < p->nsteps; i++) {
        if (head[i] >= 0 && head[i] != i) continue; /* in an earlier step's group */
        if (nm[i] > 1) {
            groups++;
            log_line(ctx, LOG_FUSION, "%%%" PRIu32 ": one kernel with %d nodes of its shape, %s", p->steps[i].node,
                     nm[i], p->steps[i].k->name);
        }
        p->steps[n++] = p->steps[i];
    }
    p->nsteps = n;
    return 0;
}

/* A dot's epilogue runs its three loops (batch, M, N) over each tile of the template: the loop passes only
 * simplify its indices (no split, cut, collapse, tile, marks or unroll of the tile's loops). */
#define EPILOGUE_PASSES \
    (LOOPOPT_NO_SPLIT | LOOPOPT_NO_GUARDS | LOOPOPT_NO_COLLAPSE | LOOPOPT_NO_TILE | LOOPOPT_NO_MARK | LOOPOPT_NO_UNROLL | \
     LOOPOPT_NO_CASCADE)

/* raw: the kernels as lowered, before the loop passes (compile_generic runs them on the generic kernels). */
static int lower_steps(kn_ctx *ctx, Program *p, const Schedule *s, ExprTable *ex, int interp_only, int raw)
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
            log_line(ctx, LOG_FUSION, "%%%" PRIu32 ": dot %%%" PRIu32 " through %s's gemm template%s%s", st->node, d,
                     p->t->name, st->gemm->wino ? " (a 3x3 convolution: Winograd allowed)" : "",
                     d == st->node ? "" : ", the rest of the kernel its epilogue on each tile");
            if (d == st->node) continue;
            /* the rest of the kernel as the template's epilogue, on each tile */
            if (!(st->k = arena_alloc(&p->arena, sizeof *st->k))) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling");
            /* its loops are the tile's: only their indices simplified */
            LoopOptions simplify = {0, 0, EPILOGUE_PASSES, 0};
            if (lower_epilogue(ctx, p->g, s, st->node, ex, &p->arena, st->k) || ir_verify(ctx, st->k) ||
                (!raw && (loopopt_run(ctx, st->k, &simplify) || ir_verify(ctx, st->k))))
                return ctx->status;
            st->gemm->epilogue = st->k->name;
            if (!raw) log_kernel(ctx, st->k);
            continue;
        }
        st->k = arena_alloc(&p->arena, sizeof *st->k);
        if (!st->k) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling");
        int r = lower_kernel(ctx, p->g, s, st->node, ex, &p->arena, st->k);
        if (r == LOWER_INTERP) st->interp = 1, st->k = NULL;
        else if (r) return r;
        else if (ir_verify(ctx, st->k)) return ctx->status;
    }
    if (group_steps(ctx, p, s, ex)) return ctx->status;
    for (int i = 0; i < p->nsteps && !raw; i++) {
        Step *st = &p->steps[i];
        if (!st->k || st->gemm) continue;
        if (loopopt_run(ctx, st->k, NULL) || ir_verify(ctx, st->k)) return ctx->status;
        log_kernel(ctx, st->k);
    }
    train_demote(ctx, p);
    return 0;
}

/* ---- outputs in place ----
 * A training step's outputs include the new values of its weights and
 * optimizer state, which the caller then puts in place of the old ones,
 * graph inputs of the same program (CompileOpts.donate names the pairs).
 * Where output o may be written straight into input u's storage, the step
 * needs no second copy of its weights and state, and the kernel that
 * writes them (Adam's: it reads the weight, the gradient and the moments,
 * and writes the weight and the moments) moves 7 arrays instead of 10: the
 * lines it writes are those it has just read, not lines fetched only to be
 * overwritten. donations allows it where nothing can tell: o is written by
 * a loop kernel's store at the same element as every load of u in that
 * kernel, by a statement no later than the last that loads u; no other
 * step reads u after that kernel (or, earlier, wherever); and no step after
 * it can fail (an index check, the interpreter), so a failed run leaves u
 * as it was. Its two buffers are marked shared (no restrict in C). At run
 * time the input must be a whole contiguous storage of kiln's that no other
 * input shares (program_run); otherwise the output is made as usual. */

/* The statements of kernel k's innermost block, if its body is a loop nest, one loop in each block, around
 * plain stores at one index (a pointwise kernel or a group's): their count (at most cap) into st, the
 * index into *at and the innermost loop into *loop (0: the body itself); 0 otherwise. */
static int store_block(const Kernel *k, IrRef *st, int cap, ExprId *at, IrRef *loop)
{
    IrRef r = k->body;
    *loop = 0;
    while (r && k->nodes[r].kind == IR_LOOP && !k->nodes[r].next) *loop = r, r = k->nodes[r].child;
    int n = 0;
    for (; r; r = k->nodes[r].next) {
        const IrNode *x = &k->nodes[r];
        if (n == cap || x->kind != IR_STORE || x->op || x->b || (n && x->index != *at)) return 0;
        *at = x->index, st[n++] = r;
    }
    return n;
}

/* Whether value v (of kernel k) loads buffer b anywhere but at index at, or at a data-dependent offset;
 * *loads counts its loads of b. seen: per node, visited. */
static int loads_elsewhere(const Kernel *k, IrRef v, int b, ExprId at, uint8_t *seen, int *loads)
{
    if (!v || seen[v]) return 0;
    seen[v] = 1;
    const IrNode *x = &k->nodes[v];
    if (x->kind == IR_LOAD && x->buf == b) {
        ++*loads;
        if (x->index != at || x->a) return 1;
    }
    int n = ir_nsrc(x);
    for (int i = 0; i < n; i++)
        if (loads_elsewhere(k, i == 0 ? x->a : i == 1 ? x->b : x->c, b, at, seen, loads)) return 1;
    return 0;
}

/* Whether step s reads node u (a loop kernel's input, a dot's operand, an interpreter step's source). */
static int step_reads(const Program *p, const Step *st, uint32_t u)
{
    if (st->interp) {
        const Node *n = &p->g->nodes[st->node];
        for (int i = 0; i < n->nsrc; i++)
            if (n->src[i] == u) return 1;
        return 0;
    }
    if (st->gemm && (st->root[0] == u || st->root[1] == u)) return 1;
    return st->k && reads(st->k, u);
}

/* Whether a step may fail at run time: an interpreter step, or a kernel with a checked index (gather,
 * scatter_add). */
static int may_fail(const Step *st)
{
    if (st->interp) return 1;
    for (uint32_t r = 1; st->k && r < st->k->n; r++)
        if (st->k->nodes[r].kind == IR_CHECK) return 1;
    return 0;
}

typedef struct {
    int out, in;  /* output i over input k */
    int w, ob, ub; /* the step writing it, its out buffer there and u's buffer there (-1: not read there) */
} Donation;

enum { DONATE_STORES = 64 };

/* Output d->out over input d->in, but for the order of the stores in its kernel (donate_order): its
 * kernel and buffers into d; 1 if allowed. */
static int donation(kn_ctx *ctx, Program *p, Donation *d)
{
    const Graph *g = p->g;
    uint32_t o = p->outs[d->out], u = 0;
    for (uint32_t v = 1; v < g->n && !u; v++)
        if (g->nodes[v].op == OP_INPUT && g->nodes[v].p.i[0] == d->in) u = v;
    const Node *no = &g->nodes[o], *nu = u ? &g->nodes[u] : NULL;
    if (!nu || no->op == OP_INPUT || no->dtype != nu->dtype || !same_shape(no, nu)) return 0;
    for (int j = 0; j < p->nouts; j++)
        if (j != d->out && p->outs[j] == o) return 0;
    d->w = d->ob = d->ub = -1;
    for (int s = 0; s < p->nsteps && d->w < 0; s++)
        for (int b = 0; p->steps[s].k && !p->steps[s].gemm && b < p->steps[s].k->nbufs; b++)
            if (p->steps[s].k->bufs[b].role == BUF_OUT && p->steps[s].k->bufs[b].node == o) d->w = s, d->ob = b;
    if (d->w < 0) return 0; /* not a loop kernel's */
    for (int s = d->w; s < p->nsteps; s++)
        if ((s > d->w && step_reads(p, &p->steps[s], u)) || may_fail(&p->steps[s])) return 0;
    const Kernel *k = p->steps[d->w].k;
    for (int b = 0; b < k->nbufs; b++)
        if (k->bufs[b].role == BUF_IN && k->bufs[b].node == u) d->ub = b;
    if (d->ub < 0) return 1;
    IrRef st[DONATE_STORES], loop;
    ExprId at = 0;
    int n = store_block(k, st, DONATE_STORES, &at, &loop), bad = !n;
    uint8_t *seen = n ? kn_alloc_zeroed(ctx, k->n) : NULL;
    for (int j = 0; j < n && !bad; j++) { /* u read at the element written alone */
        int loads = 0;
        bad = !seen || loads_elsewhere(k, k->nodes[st[j]].a, d->ub, at, seen, &loads);
        memset(seen, 0, k->n);
    }
    kn_dealloc(ctx, seen, seen ? k->n : 0);
    return !bad;
}

/* An order of kernel k's stores in which every statement that loads an input written over in place
 * (ds[0..nd), of this kernel) comes before the store over it, the stores' own order wherever free
 * (a group's stores are values of inputs alone: any order computes the same); into order. 0 if there
 * is none (a statement loads what another overwrites, and that one what the first does). */
static int donate_order(kn_ctx *ctx, const Kernel *k, const Donation *ds, int nd, int *order)
{
    IrRef st[DONATE_STORES], loop;
    ExprId at = 0;
    int n = store_block(k, st, DONATE_STORES, &at, &loop), before[DONATE_STORES] = {0}, placed[DONATE_STORES] = {0};
    uint64_t after[DONATE_STORES] = {0}; /* after[j]: the statements that must come after j */
    uint8_t *seen = kn_alloc_zeroed(ctx, k->n);
    if (!seen) return 0;
    for (int q = 0; q < nd; q++) {
        int sq = -1;
        for (int j = 0; j < n; j++)
            if (k->nodes[st[j]].buf == ds[q].ob) sq = j;
        for (int j = 0; j < n && sq >= 0 && ds[q].ub >= 0; j++) {
            int loads = 0;
            loads_elsewhere(k, k->nodes[st[j]].a, ds[q].ub, at, seen, &loads);
            memset(seen, 0, k->n);
            if (j != sq && loads && !(after[j] >> sq & 1)) after[j] |= (uint64_t)1 << sq, before[sq]++;
        }
    }
    kn_dealloc(ctx, seen, k->n);
    for (int r = 0; r < n; r++) { /* Kahn's, the lowest free statement first */
        int j = 0;
        while (j < n && (placed[j] || before[j])) j++;
        if (j == n) return 0;
        placed[j] = 1, order[r] = j;
        for (int x = 0; x < n; x++)
            if (after[j] >> x & 1) before[x]--;
    }
    return n;
}

/* The stores of kernel k relinked in this order (donate_order's). */
static void reorder_stores(Kernel *k, const int *order)
{
    IrRef st[DONATE_STORES], loop;
    ExprId at = 0;
    int n = store_block(k, st, DONATE_STORES, &at, &loop);
    for (int r = 0; r < n; r++) k->nodes[st[order[r]]].next = r + 1 < n ? st[order[r + 1]] : 0;
    if (loop) k->nodes[loop].child = st[order[0]];
    else k->body = st[order[0]];
}

static int donations(kn_ctx *ctx, Program *p, const int *want)
{
    if (!want || !p->t || !p->nouts) return 0;
    Donation *ds = arena_alloc(&p->arena, (size_t)p->nouts * sizeof *ds);
    if (!(p->donate = arena_alloc(&p->arena, (size_t)p->nouts * sizeof *p->donate)) || !ds)
        return kn_errs(ctx, KN_ENOMEM, "out of memory compiling");
    int nd = 0, order[DONATE_STORES];
    for (int i = 0; i < p->nouts; i++) {
        p->donate[i] = -1;
        int taken = 0; /* an input written over by one output at most */
        for (int j = 0; j < nd; j++) taken |= ds[j].in == want[i];
        if (want[i] < 0 || taken) continue;
        Donation *d = &ds[nd];
        d->out = i, d->in = want[i];
        if (!donation(ctx, p, d)) continue;
        Donation same[DONATE_STORES]; /* this kernel's, this one last */
        int ns = 0;
        for (int j = 0; j <= nd && ns < DONATE_STORES; j++)
            if (ds[j].w == d->w) same[ns++] = ds[j];
        if (d->ub >= 0 && (ns == DONATE_STORES || !donate_order(ctx, p->steps[d->w].k, same, ns, order))) continue;
        nd++;
    }
    for (int j = 0; j < nd; j++) {
        Kernel *k = p->steps[ds[j].w].k;
        Donation same[DONATE_STORES];
        int ns = 0;
        for (int q = 0; q < nd; q++)
            if (ds[q].w == ds[j].w) same[ns++] = ds[q];
        if (same[0].out == ds[j].out && donate_order(ctx, k, same, ns, order)) reorder_stores(k, order);
        k->bufs[ds[j].ob].shared = 1;
        if (ds[j].ub >= 0) k->bufs[ds[j].ub].shared = 1;
        p->donate[ds[j].out] = ds[j].in;
        log_line(ctx, LOG_FUSION, "output %d (%%%" PRIu32 ") is written in place over input %d in %s", ds[j].out,
                 p->outs[ds[j].out], ds[j].in, k->name);
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
    uint64_t h = kn_hash(p->t->name, strlen(p->t->name));
    if (!text) return 0;
    ir_print(k, text, n + 1);
    const char *at = strchr(text, '(');
    h = kn_hash_more(h, at ? at : text, strlen(at ? at : text));
    kn_dealloc(ctx, text, n + 1);
    return h;
}

static uint64_t gemm_key(const Program *p, const GemmSpec *g)
{
    char text[320];
    int n = snprintf(text, sizeof text, "%s gemm %d %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %d %d %d %d",
                     p->t->name, g->dtype, (long long)g->batch, (long long)g->M, (long long)g->N, (long long)g->K,
                     (long long)g->sa_b, (long long)g->sa_m, (long long)g->sa_k, (long long)g->sb_b,
                     (long long)g->sb_k, (long long)g->sb_n, g->bias, g->act, g->epilogue != NULL, g->wino);
    uint64_t h = kn_hash(text, (size_t)n);
    return g->win.on ? kn_hash_more(h, &g->win, sizeof g->win) : h; /* a window: its geometry too */
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
    void *b[66], *eb[66], *mem[68];
    int64_t err[3] = {0, 0, 0}; /* scratch indices are 0: in range, but a kernel with checks names the cell */
    size_t bytes[68];
    int nmem = 0, ok = 1, nb = k ? k->nbufs : 0;
    KnParallel par = program_lends(p);
    for (int i = 0; i < nb && ok; i++) {
        int64_t n = 0;
        ok = expr_as_const(k->ex, k->bufs[i].size, &n);
        eb[i] = mem[nmem] = ok ? scratch(ctx, (kn_dtype)k->bufs[i].dtype, n, &bytes[nmem]) : NULL;
        ok = ok && mem[nmem++];
    }
    eb[nb] = &par;
    eb[nb + 1] = err;
    if (st->gemm && ok) {
        const GemmSpec *g = st->gemm;
        kn_dtype dt = g->dtype == GEMM_F32 ? KN_F32 : KN_F64;
        if (!nb) b[0] = mem[nmem] = scratch(ctx, dt, g->batch * g->M * g->N, &bytes[nmem]), nmem++;
        else b[0] = eb[0]; /* C is the epilogue's output */
        b[1] = mem[nmem] = scratch(ctx, dt, extent(g->batch, g->M, g->K, g->sa_b, g->sa_m, g->sa_k), &bytes[nmem]), nmem++;
        const GemmWindow *w = &g->win; /* B: a window's input, or strided */
        int64_t xb = w->on ? extent(g->batch, w->n, w->c, g->sb_b, w->sx_n, w->sx_c) + (w->h - 1) * w->sx_h +
                                 (w->w - 1) * w->sx_w
                           : extent(g->batch, g->K, g->N, g->sb_b, g->sb_k, g->sb_n);
        b[2] = mem[nmem] = scratch(ctx, dt, xb, &bytes[nmem]), nmem++;
        b[3] = NULL, b[4] = &par, b[5] = nb ? eb : NULL, b[6] = NULL;
        b[7] = NULL; /* the weights packed (or transformed) in the call */
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
           !a->epilogue == !b->epilogue && a->kc == b->kc && a->mc == b->mc && a->bkeep == b->bkeep &&
           a->wino == b->wino && a->ukeep == b->ukeep && !memcmp(&a->win, &b->win, sizeof a->win);
}

static int find_entries(kn_ctx *ctx, Program *p);

/* A hash of a kernel's code: what same_kernel compares (names and the
 * graph nodes its buffers hold left out). */
static uint64_t kernel_hash(const Kernel *k)
{
    uint64_t h = kn_hash(&k->n, sizeof k->n);
    h = kn_hash_more(h, &k->nbufs, sizeof k->nbufs);
    h = kn_hash_more(h, &k->body, sizeof k->body);
    for (uint32_t i = 1; i < k->n; i++) {
        const IrNode *x = &k->nodes[i];
        uint32_t v[12] = {x->kind, x->dtype, x->op, x->width, x->a, x->b, x->c, x->child, x->next, (uint32_t)x->buf,
                          (uint32_t)x->var, x->index};
        h = kn_hash_more(h, v, sizeof v);
    }
    return h;
}

static int same_node(const IrNode *x, const IrNode *y)
{
    return x->kind == y->kind && x->dtype == y->dtype && x->op == y->op && x->width == y->width && x->a == y->a &&
           x->b == y->b && x->c == y->c && x->child == y->child && x->next == y->next && x->buf == y->buf &&
           x->var == y->var && x->index == y->index && !memcmp(&x->imm, &y->imm, sizeof x->imm);
}

/* Whether a and b render to the same code but for their names: the same
 * nodes, buffers of the same dtypes, roles and sizes (expressions of the
 * program's one table, interned: equal ids are equal expressions). */
static int same_kernel(const Kernel *a, const Kernel *b)
{
    if (a->ex != b->ex || a->n != b->n || a->nbufs != b->nbufs || a->body != b->body || a->nvars != b->nvars ||
        a->naccs != b->naccs || a->tile != b->tile)
        return 0;
    for (int i = 0; i < a->nbufs; i++)
        if (a->bufs[i].dtype != b->bufs[i].dtype || a->bufs[i].role != b->bufs[i].role || a->bufs[i].size != b->bufs[i].size)
            return 0;
    for (uint32_t i = 1; i < a->n; i++)
        if (!same_node(&a->nodes[i], &b->nodes[i])) return 0;
    return 1;
}

/* Step s's `same`: a plain loop kernel (no dot, no candidates) equal to an
 * earlier one runs that one's code, so it is rendered and compiled once
 * (a transformer's layers and Adam's updates of equal shapes repeat theirs). */
static void share_kernels(Program *p, uint64_t *hash)
{
    for (int s = 0; s < p->nsteps; s++) {
        Step *st = &p->steps[s];
        st->same = -1;
        if (st->interp || !st->k || st->gemm || st->tune) continue;
        hash[s] = kernel_hash(st->k);
        for (int e = 0; e < s && st->same < 0; e++) {
            const Step *x = &p->steps[e];
            if (!x->interp && x->k && !x->gemm && !x->tune && x->same < 0 && hash[e] == hash[s] && same_kernel(x->k, st->k))
                st->same = e;
        }
    }
}

/* Renders every kernel into one unit, compiles and loads it, finds each entry. */
static int load_kernels(kn_ctx *ctx, Program *p)
{
    const Kernel **ks = arena_alloc(&p->arena, (size_t)(p->nsteps ? p->nsteps : 1) * TUNE_N * sizeof *ks);
    uint64_t *hash = arena_alloc(&p->arena, (size_t)(p->nsteps ? p->nsteps : 1) * sizeof *hash);
    if (!ks || !hash) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling");
    share_kernels(p, hash);
    int nk = 0, ng = 0;
    for (int s = 0; s < p->nsteps; s++) {
        const Step *st = &p->steps[s];
        if (st->gemm && !st->gx) ng++;
        if (st->interp || !st->k || st->same >= 0) continue;
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
        for (int e = 0; e < s && st->gemm && !st->gx && !st->tune && st->shares < 0; e++)
            if (p->steps[e].gemm && !p->steps[e].gx && !p->steps[e].tune && p->steps[e].shares < 0 &&
                same_gemm(p->steps[e].gemm, st->gemm))
                st->shares = e;
    }
    /* one unit: the loop kernels, then each dot's template */
    uint64_t t0 = port_now_ns();
    size_t len = nk ? p->t->render(ks, nk, NULL, 0) : 0;
    for (int s = 0; s < p->nsteps; s++) {
        const Step *st = &p->steps[s];
        for (int i = 0; st->gemm && !st->gx && st->shares < 0 && i < (st->tune ? st->tune->n : 1); i++)
            len += strlen(PORT_UNIT) + p->t->render_dot(st->tune ? &st->tune->g[i] : st->gemm, NULL, 0);
    }
    char *src = arena_alloc(&p->arena, len + 1), why[512];
    if (!src) return kn_errs(ctx, KN_ENOMEM, "out of memory for %zu bytes of generated code", len);
    size_t at = nk ? p->t->render(ks, nk, src, len + 1) : 0;
    for (int s = 0; s < p->nsteps; s++) {
        const Step *st = &p->steps[s];
        for (int i = 0; st->gemm && !st->gx && st->shares < 0 && i < (st->tune ? st->tune->n : 1); i++) {
            memcpy(src + at, PORT_UNIT, strlen(PORT_UNIT) + 1); /* a unit of its own (port.h) */
            at += strlen(PORT_UNIT);
            at += p->t->render_dot(st->tune ? &st->tune->g[i] : st->gemm, src + at, len + 1 - at);
        }
    }
    p->code_bytes = len;
    p->render_ns = (double)(port_now_ns() - t0);
    p->src = src;
    log_text(ctx, LOG_OUTPUT_CODE, src);
    if (!(p->module = p->t->load(src, why))) return kn_errs(ctx, KN_EUNSUPPORTED, "backend %s: %s", p->t->name, why);
    return find_entries(ctx, p);
}

/* A dot that keeps its weights: its unit's NAME_bpack or NAME_upack (unit name), where it has one
 * (optional: the dialects without one pack B, or compute directly, in each call), or for the
 * library's Winograd (spec.wino 2) the library's kn_rt_wino_upack */
static void find_bpack(Program *p, Step *st, const char *name)
{
    char bp[80];
    if (!st->gemm || !(st->gemm->bkeep || st->gemm->ukeep) || st->gx || !name) return;
    if (st->gemm->wino == 2) { /* the library's: kept_b (program.c) calls kn_rt_wino_upack */
        size_t (*up)(const KnRtGemm *, void *) = kn_rt_wino_upack;
        memcpy(&st->bpack, &up, sizeof up);
        return;
    }
    snprintf(bp, sizeof bp, "%s_%s", name, st->gemm->ukeep ? "upack" : "bpack");
    st->bpack = p->t->sym(p->module, bp);
}

/* Each step's entry in the loaded module (and times a max-autotune step's candidates). */
static int find_entries(kn_ctx *ctx, Program *p)
{
    for (int s = 0; s < p->nsteps; s++) {
        Step *st = &p->steps[s];
        for (int i = 0; st->tune && i < st->tune->n; i++)
            if (!(st->tune->fn[i] = p->t->sym(p->module, st->tune->name[i])))
                return kn_errs(ctx, KN_EINVAL, "backend %s: no symbol %s in the generated code", p->t->name,
                               st->tune->name[i]);
        if (st->tune) {
            if (tune_step(ctx, p, st)) return ctx->status;
            find_bpack(p, st, st->gemm ? st->gemm->name : NULL); /* the winner's */
            continue;
        }
        const char *name = st->gemm ? p->steps[st->shares < 0 ? s : st->shares].gemm->name
                           : st->k ? p->steps[st->same < 0 ? s : st->same].k->name : NULL;
        if (!st->interp && !st->gx && !(st->fn = p->t->sym(p->module, name)))
            return kn_errs(ctx, KN_EINVAL, "backend %s: no symbol %s in the generated code", p->t->name, name);
        if (st->gemm && st->k && !(st->epi = p->t->sym(p->module, st->k->name)))
            return kn_errs(ctx, KN_EINVAL, "backend %s: no symbol %s in the generated code", p->t->name, st->k->name);
        find_bpack(p, st, name);
    }
    return 0;
}

/* ---- the program cache ----
 * A target with a cache_tag (backends c and tcc) keeps each program it compiled in
 * the port's cache directory, so that a later process compiling the same
 * graph skips scheduling, lowering, the loop passes, planning and rendering:
 *
 *   key    kn_hash over the entry format, port_build_id() (this build of
 *          kiln), the target's name and cache_tag, the mode (and keep_packed, the
 *          outputs in place asked for), the outputs and every node of the
 *          graph (interned nodes are zeroed before they are filled, so their
 *          bytes are their value)
 *   entry  <cache dir>/<key>.prog: "KILNPG06", key, body size, kn_hash of
 *          the body (little-endian u64s), then the body: the graph's node
 *          count, the plan (arena size, each node's offset), the steps (node,
 *          kind, a kernel's name and buffers, a dot's spec, window and
 *          operands), each output's input written over in place (+1; 0:
 *          none) and the generated source, which the target's load turns
 *          back into the module through its own cache
 *
 * An entry is trusted only whole: a wrong magic, key, size or checksum, a
 * field out of range or a missing entry point makes the compile run afresh
 * and write the entry again. max-autotune (whose winners have their own
 * memory) and the logs that show the pipeline's work (fusion, loopir)
 * compile afresh too. kn_hash's byte order is no concern: the key holds
 * this build of kiln. */

#define PCACHE_MAGIC "KILNPG06"
#define MAX_IO_DONATE 65536 /* an input a donated output names is below this */
#define PCACHE_HEAD 32

typedef struct {
    unsigned char *p;
    size_t n, cap;
    int oom;
} PcOut;

typedef struct {
    const unsigned char *p, *end;
    int bad;
} PcIn;

static void pc_put(PcOut *o, const void *v, size_t n)
{
    if (o->oom || !n) return; /* v may be NULL then (a program with no source: pc_str) */
    if (o->n + n > o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 4096;
        while (cap < o->n + n) cap *= 2;
        unsigned char *q = realloc(o->p, cap);
        if (!q) {
            o->oom = 1;
            return;
        }
        o->p = q, o->cap = cap;
    }
    memcpy(o->p + o->n, v, n);
    o->n += n;
}

static void pc_u64(PcOut *o, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> 8 * i);
    pc_put(o, b, 8);
}

static void pc_str(PcOut *o, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    pc_u64(o, n);
    pc_put(o, s, n);
}

static uint64_t pc_get(PcIn *in)
{
    uint64_t v = 0;
    if (in->end - in->p < 8) {
        in->bad = 1;
        return 0;
    }
    for (int i = 0; i < 8; i++) v |= (uint64_t)in->p[i] << 8 * i;
    in->p += 8;
    return v;
}

/* A value read and checked to be below limit (else the entry is bad, 0). */
static uint64_t pc_below(PcIn *in, uint64_t limit)
{
    uint64_t v = pc_get(in);
    if (v >= limit) in->bad = 1;
    return in->bad ? 0 : v;
}

/* A string of fewer than cap bytes copied into the arena (NULL if bad). */
static char *pc_getstr(PcIn *in, Arena *a, size_t cap)
{
    size_t n = (size_t)pc_below(in, cap);
    char *s = in->bad || (size_t)(in->end - in->p) < n ? NULL : arena_alloc(a, n + 1);
    if (!s) {
        in->bad = 1;
        return NULL;
    }
    memcpy(s, in->p, n);
    s[n] = 0;
    in->p += n;
    return s;
}

/* The entry's key, or 0 where programs are not cached (see above). */
static uint64_t pcache_key(kn_ctx *ctx, const Graph *g, const uint32_t *outs, int nouts, const Target *t,
                           const CompileOpts *o)
{
    uint64_t build;
    if (!t || !t->cache_tag || (o && o->mode == KN_MODE_MAX_AUTOTUNE) || log_on(ctx, LOG_FUSION) ||
        log_on(ctx, LOG_LOOPIR) || !(build = port_build_id()))
        return 0;
    uint64_t h = kn_hash(PCACHE_MAGIC, 8);
    uint64_t mode = o ? (uint64_t)o->mode | (uint64_t)!!o->keep_packed << 8 : 0;
    for (int i = 0; o && o->donate && i < nouts; i++) h = kn_hash_more(h, &o->donate[i], sizeof o->donate[i]);
    h = kn_hash_more(h, &build, sizeof build);
    h = kn_hash_more(h, t->name, strlen(t->name) + 1);
    h = kn_hash_more(h, t->cache_tag(), strlen(t->cache_tag()) + 1);
    h = kn_hash_more(h, &mode, sizeof mode);
    h = kn_hash_more(h, &nouts, sizeof nouts);
    h = kn_hash_more(h, outs, (size_t)nouts * sizeof *outs);
    uint64_t nodes = kn_hash(g->nodes + 1, (size_t)(g->n - 1) * sizeof *g->nodes);
    h = kn_hash_more(h, &g->n, sizeof g->n);
    h = kn_hash_more(h, &nodes, sizeof nodes);
    return h ? h : 1;
}

static int pcache_path(uint64_t key, char *path, size_t cap)
{
    char name[32];
    snprintf(name, sizeof name, "%016llx.prog", (unsigned long long)key);
    return port_cache_path(name, path, cap);
}

static void pc_kernel(PcOut *o, const Kernel *k)
{
    pc_str(o, k->name);
    pc_u64(o, (uint64_t)k->nbufs);
    for (int b = 0; b < k->nbufs; b++) {
        pc_u64(o, k->bufs[b].node);
        pc_u64(o, k->bufs[b].dtype | (uint64_t)k->bufs[b].role << 8 | (uint64_t)k->bufs[b].shared << 16);
    }
}

static void pc_gemm(PcOut *o, const GemmSpec *s)
{
    int64_t v[19] = {s->dtype, s->batch, s->M, s->N, s->K, s->sa_b, s->sa_m, s->sa_k, s->sb_b, s->sb_k,
                     s->sb_n, s->bias, s->act, s->epilogue != NULL, s->kc, s->mc, s->bkeep, s->wino, s->ukeep};
    const GemmWindow *w = &s->win;
    int64_t win[20] = {w->on, w->t, w->n, w->c, w->h, w->w, w->kh, w->kw, w->oh, w->ow,
                       w->sh, w->sw, w->dh, w->dw, w->ph, w->pw, w->sx_n, w->sx_c, w->sx_h, w->sx_w};
    pc_str(o, s->name);
    for (int i = 0; i < 19; i++) pc_u64(o, (uint64_t)v[i]);
    for (int i = 0; i < 20; i++) pc_u64(o, (uint64_t)win[i]);
}

/* Writes p's entry (a cache: failing to is no error). */
static void pcache_store(const Program *p, uint64_t key)
{
    char path[1100], why[256];
    if (!pcache_path(key, path, sizeof path)) return;
    PcOut o = {NULL, 0, 0, 0};
    pc_put(&o, PCACHE_MAGIC, 8);
    pc_u64(&o, key), pc_u64(&o, 0), pc_u64(&o, 0); /* size and checksum, below */
    pc_u64(&o, p->g->n);
    pc_u64(&o, p->arena_bytes), pc_u64(&o, p->code_bytes);
    for (uint32_t v = 0; v < p->g->n; v++) pc_u64(&o, (uint64_t)p->offset[v]);
    pc_u64(&o, (uint64_t)p->nsteps);
    for (int s = 0; s < p->nsteps; s++) {
        const Step *st = &p->steps[s];
        pc_u64(&o, st->node);
        pc_u64(&o, (uint64_t)st->interp | (uint64_t)(st->k != NULL) << 1 | (uint64_t)(st->gemm != NULL) << 2 |
                       (uint64_t)(st->same + 1) << 3);
        if (st->k) pc_kernel(&o, st->k);
        if (!st->gemm) continue;
        pc_gemm(&o, st->gemm);
        pc_u64(&o, (uint64_t)(st->shares + 1)), pc_u64(&o, st->dot);
        for (int i = 0; i < 2; i++) pc_u64(&o, st->root[i]), pc_u64(&o, (uint64_t)st->off[i]);
    }
    for (int i = 0; i < p->nouts; i++) pc_u64(&o, (uint64_t)(p->donate ? p->donate[i] + 1 : 0));
    pc_str(&o, p->src);
    if (!o.oom) {
        uint64_t sum = kn_hash(o.p + PCACHE_HEAD, o.n - PCACHE_HEAD);
        for (int i = 0; i < 8; i++) {
            o.p[16 + i] = (unsigned char)((o.n - PCACHE_HEAD) >> 8 * i);
            o.p[24 + i] = (unsigned char)(sum >> 8 * i);
        }
        port_write_file(path, o.p, o.n, why);
    }
    free(o.p);
}

static int pc_read_kernel(PcIn *in, Program *p, Kernel *k)
{
    memset(k, 0, sizeof *k);
    char *name = pc_getstr(in, &p->arena, sizeof k->name);
    k->nbufs = (int)pc_below(in, 65);
    k->bufs = arena_alloc(&p->arena, (size_t)(k->nbufs + 1) * sizeof *k->bufs);
    if (!name || !k->bufs) return in->bad = 1, 0;
    memcpy(k->name, name, strlen(name) + 1);
    for (int b = 0; b < k->nbufs; b++) {
        memset(&k->bufs[b], 0, sizeof k->bufs[b]);
        k->bufs[b].node = (uint32_t)pc_below(in, p->g->n);
        uint64_t dr = pc_below(in, 1u << 17);
        k->bufs[b].dtype = (uint8_t)dr, k->bufs[b].role = (uint8_t)(dr >> 8), k->bufs[b].shared = (uint8_t)(dr >> 16);
    }
    return !in->bad;
}

static int pc_read_gemm(PcIn *in, Program *p, GemmSpec *s, const Kernel *epi)
{
    int64_t v[19];
    memset(s, 0, sizeof *s);
    s->name = pc_getstr(in, &p->arena, 48);
    for (int i = 0; i < 19; i++) v[i] = (int64_t)pc_get(in);
    s->dtype = (int)v[0], s->batch = v[1], s->M = v[2], s->N = v[3], s->K = v[4];
    s->sa_b = v[5], s->sa_m = v[6], s->sa_k = v[7], s->sb_b = v[8], s->sb_k = v[9], s->sb_n = v[10];
    s->bias = (int)v[11], s->act = (int)v[12], s->kc = (int)v[14], s->mc = (int)v[15], s->bkeep = v[16] == 1;
    s->wino = (int)v[17], s->ukeep = v[18] == 1;
    for (int i = 16; i < 19; i++)
        if (v[i] != 0 && v[i] != 1 && !(i == 17 && v[i] == 2)) in->bad = 1;
    if (v[13] && !epi) in->bad = 1;
    s->epilogue = v[13] && epi ? epi->name : NULL;
    int64_t win[20]; /* a convolution's window: flags 0 or 1, extents and steps >= 1 */
    for (int i = 0; i < 20; i++) win[i] = (int64_t)pc_get(in);
    for (int i = 0; i < 14; i++)
        if (i < 2 ? (win[i] != 0 && win[i] != 1) : win[0] && win[i] < 1) in->bad = 1;
    GemmWindow *w = &s->win;
    w->on = (int)win[0], w->t = (int)win[1], w->n = win[2], w->c = win[3], w->h = win[4], w->w = win[5];
    w->kh = win[6], w->kw = win[7], w->oh = win[8], w->ow = win[9], w->sh = win[10], w->sw = win[11];
    w->dh = win[12], w->dw = win[13], w->ph = win[14], w->pw = win[15];
    w->sx_n = win[16], w->sx_c = win[17], w->sx_h = win[18], w->sx_w = win[19];
    return !in->bad && s->name;
}

/* The steps and plan of an entry's body into p; 0 if it is bad. */
static int pc_read(PcIn *in, Program *p)
{
    if (pc_get(in) != p->g->n) return 0;
    p->arena_bytes = (size_t)pc_below(in, (uint64_t)1 << 48);
    p->code_bytes = (size_t)pc_get(in);
    p->offset = arena_alloc(&p->arena, p->g->n * sizeof *p->offset);
    if (!p->offset) return 0;
    for (uint32_t v = 0; v < p->g->n; v++) {
        p->offset[v] = (int64_t)pc_get(in);
        if (p->offset[v] < -1 || (p->offset[v] >= 0 && (size_t)p->offset[v] + node_bytes(&p->g->nodes[v]) > p->arena_bytes))
            in->bad = 1;
    }
    int n = (int)pc_below(in, p->g->n);
    p->steps = arena_alloc(&p->arena, (size_t)(n ? n : 1) * sizeof *p->steps);
    if (!p->steps || in->bad) return 0;
    memset(p->steps, 0, (size_t)(n ? n : 1) * sizeof *p->steps);
    for (p->nsteps = 0; p->nsteps < n && !in->bad; p->nsteps++) {
        Step *st = &p->steps[p->nsteps];
        st->node = (uint32_t)pc_below(in, p->g->n);
        uint64_t kind = pc_below(in, 8 * ((uint64_t)p->nsteps + 1));
        st->interp = kind & 1;
        st->shares = -1;
        st->same = (int)(kind >> 3) - 1;
        if (st->same >= 0 && (st->interp || !(kind & 2) || (kind & 4) || !p->steps[st->same].k || p->steps[st->same].gemm ||
                              p->steps[st->same].same >= 0))
            return 0;
        if (kind & 2 && (!(st->k = arena_alloc(&p->arena, sizeof *st->k)) || !pc_read_kernel(in, p, st->k))) return 0;
        if (!(kind & 4)) {
            if (!st->interp && !st->k) return 0; /* a compiled step runs a kernel or a dot */
            continue;
        }
        if (!(st->gemm = arena_alloc(&p->arena, sizeof *st->gemm)) || !pc_read_gemm(in, p, st->gemm, st->k)) return 0;
        st->shares = (int)pc_below(in, (uint64_t)p->nsteps + 1) - 1;
        st->dot = (uint32_t)pc_below(in, p->g->n);
        for (int i = 0; i < 2; i++) st->root[i] = (uint32_t)pc_below(in, p->g->n), st->off[i] = (int64_t)pc_get(in);
        if (st->shares >= 0 && !p->steps[st->shares].gemm) return 0;
    }
    if (!(p->donate = arena_alloc(&p->arena, (size_t)(p->nouts + 1) * sizeof *p->donate))) return 0;
    for (int i = 0; i < p->nouts; i++) p->donate[i] = (int)pc_below(in, MAX_IO_DONATE + 1) - 1;
    p->src = pc_getstr(in, &p->arena, SIZE_MAX);
    if (in->bad || !p->src || in->p != in->end) return 0;
    if (!*p->src) p->src = NULL;
    for (int s = 0; s < p->nsteps; s++) {
        p->ninterp += p->steps[s].interp;
        if (!p->steps[s].interp && !p->src) return 0;
    }
    p->nkernels = p->nsteps - p->ninterp;
    return 1;
}

/* p's steps, plan and module from its entry: 1, or 0 (no entry, or a bad
 * one: the reason logged under perf; p is then to be freed). */
static int pcache_load(kn_ctx *ctx, Program *p, uint64_t key)
{
    char path[1100], why[256];
    void *data = NULL;
    size_t size = 0;
    if (!pcache_path(key, path, sizeof path) || port_read_file(path, &data, &size, why)) return 0;
    const unsigned char *d = data;
    PcIn head = {d + 8, d + (size < PCACHE_HEAD ? 8 : PCACHE_HEAD), 0};
    const char *bad = NULL;
    if (size < PCACHE_HEAD || memcmp(d, PCACHE_MAGIC, 8)) bad = "no program cache header";
    else if (pc_get(&head) != key) bad = "stale: another key";
    else if (pc_get(&head) != size - PCACHE_HEAD) bad = "corrupt: wrong size";
    else if (pc_get(&head) != kn_hash(d + PCACHE_HEAD, size - PCACHE_HEAD))
        bad = "corrupt: wrong checksum";
    else {
        PcIn in = {d + PCACHE_HEAD, d + size, 0};
        if (!pc_read(&in, p)) bad = "corrupt: a field out of range";
    }
    if (!bad && p->arena_bytes && !arena_alloc_aligned(ctx, p)) bad = "out of memory for its arena";
    if (!bad && p->src && !(p->module = p->t->load(p->src, why))) bad = why;
    if (!bad && find_entries(ctx, p)) {
        bad = "an entry point is missing";
        kn_clear_error(ctx);
    }
    if (bad) log_line(ctx, LOG_PERF, "program cache %s: %s; compiling afresh", path, bad);
    else log_text(ctx, LOG_OUTPUT_CODE, p->src ? p->src : "");
    free(data);
    return !bad;
}

static const Target *target_of(CompileBackend b)
{
    return b == BACKEND_TCC ? &kn_target_tcc : b == BACKEND_C ? &kn_target_c : NULL;
}

/* An empty program for g on the target o names (NULL if out of memory). */
static Program *program_new(kn_ctx *ctx, const Graph *g, int nouts, const CompileOpts *o)
{
    Program *p = kn_alloc(ctx, sizeof *p);
    if (!p) return kn_err(ctx, KN_ENOMEM, "out of memory compiling");
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->g = g;
    arena_init(&p->arena, ctx);
    p->t = target_of(o ? o->backend : BACKEND_C);
    if (p->t && !p->t->available()) p->t = NULL; /* falls back to the interpreter */
    p->keep_packed = o && o->keep_packed;
    p->outs = arena_alloc(&p->arena, (size_t)(nouts ? nouts : 1) * sizeof *p->outs);
    return p;
}

static Program *compile_fresh(kn_ctx *ctx, const Graph *g, const uint32_t *outs, int nouts, const CompileOpts *o,
                              uint64_t key);

/* The pipeline: from the program cache where it holds this graph, else compile_fresh. */
Program *compile_graph(kn_ctx *ctx, const Graph *g, const uint32_t *outs, int nouts, const CompileOpts *o)
{
    Program *p = program_new(ctx, g, nouts, o);
    if (!p) return NULL;
    uint64_t t0 = port_now_ns(), key = p->outs ? pcache_key(ctx, g, outs, nouts, p->t, o) : 0;
    if (key) { /* a program this build compiled before, in any process */
        memcpy(p->outs, outs, (size_t)nouts * sizeof *outs), p->nouts = nouts;
        if (pcache_load(ctx, p, key)) {
            p->from_cache = 1;
            log_line(ctx, LOG_PERF, "compile: from the program cache, %.1f ms", (double)(port_now_ns() - t0) / 1e6);
            return p;
        }
    }
    program_free(p);
    return compile_fresh(ctx, g, outs, nouts, o, key);
}

/* The pipeline, from the graph (its entry written under key unless 0). */
static Program *compile_fresh(kn_ctx *ctx, const Graph *g, const uint32_t *outs, int nouts, const CompileOpts *o,
                              uint64_t key)
{
    Program *p = program_new(ctx, g, nouts, o);
    if (!p) return NULL;
    ExprTable ex;
    expr_init(&ex, ctx);
    Schedule s;
    uint64_t t[5];
    t[0] = port_now_ns();
    int err = !p->outs ? (kn_errs(ctx, KN_ENOMEM, "out of memory compiling"), 1) : graph_verify(ctx, g);
    if (!err) memcpy(p->outs, outs, (size_t)nouts * sizeof *outs), p->nouts = nouts;
    err = err || sched_build(ctx, g, outs, nouts, &p->arena, &s);
    if (!err) log_fusion(ctx, g, &s);
    t[1] = port_now_ns();
    err = err || lower_steps(ctx, p, &s, &ex, p->t == NULL, 0) || donations(ctx, p, o ? o->donate : NULL);
    t[2] = port_now_ns();
    err = err || plan(ctx, p);
    err = err || (p->t && o && o->mode == KN_MODE_MAX_AUTOTUNE && tune_prepare(ctx, p));
    t[3] = port_now_ns();
    err = err || (p->t && load_kernels(ctx, p)); /* and times the candidates */
    t[4] = port_now_ns();
    expr_free(&ex);
    if (!err)
        log_line(ctx, LOG_PERF, "compile: schedule %.1f ms, lower and loop passes %.1f ms, plan %.1f ms, "
                 "render %.1f ms, compile and load %.1f ms", (double)(t[1] - t[0]) / 1e6, (double)(t[2] - t[1]) / 1e6,
                 (double)(t[3] - t[2]) / 1e6, p->render_ns / 1e6, (double)(t[4] - t[3] - p->render_ns) / 1e6);
    if (err) {
        program_free(p);
        return NULL;
    }
    if (key) pcache_store(p, key);
    return p;
}

/* ---- programs generic in a size ----
 * Dynamic shapes (capture.c's generic entries) without a compile per size,
 * as torch.compile's dynamic=True: the graph is lowered at a few probe
 * sizes of the symbol (the same nodes but for sizes), and where the probes'
 * schedules, steps and kernels are the same but for numbers that are one
 * affine a*z0 + b at every probe (extents, indices, buffer sizes, a dot's
 * sizes, strides and offsets; a constant that is such a size or its
 * reciprocal: a mean's divisor, a draw's advance of the generator;
 * a*z0*z0 + b*z0 + c where an (s0, s0) tensor makes them quadratic),
 * those numbers become expressions of z0, a shape symbol (ir.h
 * IR_SHAPE_SYM) that the kernels read at run time. The
 * loop passes then run on the generic kernels: their ranges know nothing of
 * z0, so no index is simplified on the strength of a size; parallel and
 * vector marks take the first probe's size as a hint only (they are valid at
 * every size: vector loops have a remainder). A dot whose sizes depend on
 * z0 runs through the library's GEMM (gemm_rt.h) with this size's numbers,
 * its epilogue compiled generic. One module is compiled; program_at plans
 * each size's graph (cheap) and runs its steps. Anything else (a schedule
 * or kernel that differs in form between probes, a value not affine in the
 * size) fails with the reason, and the caller specialises. A convolution's
 * window (GemmWindow) is generic like the rest of a dot. */

/* c[j] at z0 = sv[j] (np >= 3 probes): an expression of z0, a*z0*z0 + b*z0 + c with integers a, b, c
 * (divided differences of the first three, checked at the rest; a size of a (s0, s0) tensor is
 * quadratic), or 0 if there is none. */
static ExprId gen_affine(ExprTable *t, const int64_t *c, const int64_t *sv, int np)
{
    int same = 1;
    for (int j = 1; j < np; j++) same &= c[j] == c[0];
    if (same) return expr_const(t, c[0]);
    int64_t d01 = c[1] - c[0], d12 = c[2] - c[1], x01 = sv[1] - sv[0], x12 = sv[2] - sv[1], x02 = sv[2] - sv[0];
    if (d01 % x01 || d12 % x12 || (d12 / x12 - d01 / x01) % x02) return 0;
    int64_t a = (d12 / x12 - d01 / x01) / x02, b = d01 / x01 - a * (sv[0] + sv[1]), k = c[0] - a * sv[0] * sv[0] - b * sv[0];
    for (int j = 0; j < np; j++)
        if (a * sv[j] * sv[j] + b * sv[j] + k != c[j]) return 0;
    ExprId z = expr_sym(t, IR_SHAPE_SYM);
    return expr_add(t, expr_add(t, expr_mul(t, expr_mul(t, z, z), expr_const(t, a)), expr_mul(t, z, expr_const(t, b))),
                    expr_const(t, k));
}

/* A hash of e's form, numbers left out; the terms of a sum and the factors
 * of a product in any order (canonical order depends on their numbers: at
 * another size, the same terms may stand in another order). */
static uint64_t form_hash(const ExprTable *t, ExprId e)
{
    const ExprNode *x = expr_node(t, e);
    if (!x) return 0;
    uint64_t h = 0x9e3779b97f4a7c15ull * (x->kind + 1), sum = 0;
    if (x->kind == EX_SYM) h ^= (uint64_t)x->c * 0xff51afd7ed558ccdull;
    for (int i = 0; i < x->n; i++) {
        uint64_t a = form_hash(t, x->args[i]);
        if (x->kind == EX_ADD || x->kind == EX_MUL) sum += a * 0xc4ceb9fe1a85ec53ull + (a >> 29);
        else h = (h ^ a) * 1099511628211ull + (uint64_t)i;
    }
    return h + sum;
}

/* The probes' expressions e[j] (at z0 = sv[j]) as one expression of z0: the
 * same form with each number affine in z0; 0 if they are not. */
static ExprId gen_expr(ExprTable *t, const ExprId *e, const int64_t *sv, int np)
{
    const ExprNode *x[GEN_PROBES] = {0};
    int64_t c[GEN_PROBES];
    ExprId a[GEN_PROBES], r = 0;
    int same = 1;
    for (int j = 1; j < np; j++) same &= e[j] == e[0];
    if (same) return e[0];
    for (int j = 0; j < np; j++) {
        x[j] = expr_node(t, e[j]);
        if (!x[j] || x[j]->kind != x[0]->kind || x[j]->n != x[0]->n) return 0;
        c[j] = x[j]->c;
    }
    switch (x[0]->kind) {
    case EX_CONST: return gen_affine(t, c, sv, np);
    case EX_ADD:
    case EX_MUL:
        r = gen_affine(t, c, sv, np); /* the constant term, or the coefficient */
        uint64_t used[GEN_PROBES] = {0}; /* per probe: its terms matched so far (EXPR_MAX_ARGS <= 64) */
        for (int i = 0; i < x[0]->n && r; i++) {
            uint64_t h = form_hash(t, x[0]->args[i]);
            a[0] = x[0]->args[i];
            for (int j = 1; j < np; j++) { /* probe j's term of the same form, the first unmatched */
                int m = 0;
                while (m < x[j]->n && ((used[j] >> m & 1) || form_hash(t, x[j]->args[m]) != h)) m++;
                if (m == x[j]->n) return 0;
                used[j] |= (uint64_t)1 << m;
                a[j] = x[j]->args[m];
            }
            ExprId g = gen_expr(t, a, sv, np);
            r = x[0]->kind == EX_ADD ? expr_add(t, r, g) : expr_mul(t, r, g);
        }
        return r;
    case EX_FLOORDIV:
    case EX_MOD:
    case EX_MAX:
    case EX_MIN: {
        ExprId g[2];
        for (int i = 0; i < 2; i++) {
            for (int j = 0; j < np; j++) a[j] = x[j]->args[i];
            if (!(g[i] = gen_expr(t, a, sv, np))) return 0;
        }
        switch (x[0]->kind) {
        case EX_FLOORDIV: return expr_floordiv(t, g[0], g[1]);
        case EX_MOD: return expr_mod(t, g[0], g[1]);
        case EX_MAX: return expr_max(t, g[0], g[1]);
        default: return expr_min(t, g[0], g[1]);
        }
    }
    default: return 0; /* symbols that differ */
    }
}

/* An f32 or f64 constant of the probes that is a size affine in z0, or its
 * reciprocal (as the graph's double rounds to dt), or an i64 one that is
 * such a size (a draw's advance of the generator: prim.c p_rand): its
 * node's index (and op OP_RECIP) set in *y, 1; else 0. */
static int gen_const(ExprTable *t, IrNode *y, const IrNode *const *x, const int64_t *sv, int np)
{
    int64_t c[GEN_PROBES];
    if (y->dtype != KN_F32 && y->dtype != KN_F64 && y->dtype != KN_I64) return 0;
    for (int inv = 0; inv < 2 - (y->dtype == KN_I64); inv++) {
        int ok = 1;
        for (int j = 0; j < np && ok; j++) {
            double v = inv ? 1.0 / x[j]->imm : x[j]->imm;
            ok = v == v && fabs(v) < 9e15;
            c[j] = ok ? (int64_t)(v < 0 ? v - 0.5 : v + 0.5) : 0;
            double back = inv ? 1.0 / (double)c[j] : (double)c[j];
            ok = ok && c[j] && (y->dtype == KN_F32 ? (double)(float)back : back) == x[j]->imm;
        }
        if (ok && (y->index = gen_affine(t, c, sv, np))) {
            y->op = inv ? OP_RECIP : 0;
            return 1;
        }
    }
    return 0;
}

/* The probes' kernels ks[j] as one kernel of p, generic in z0: NULL with why. */
static Kernel *gen_kernel(Program *p, const Kernel *const *ks, const int64_t *sv, int np, char *why, size_t cap)
{
    const Kernel *a = ks[0];
    ExprTable *t = p->gex;
    for (int j = 1; j < np; j++) {
        const Kernel *b = ks[j];
        if (b->n != a->n || b->nbufs != a->nbufs || b->nvars != a->nvars || b->naccs != a->naccs ||
            b->tile != a->tile || b->body != a->body) {
            snprintf(why, cap, "kernel %s has another form at size %lld", a->name, (long long)sv[j]);
            return NULL;
        }
    }
    Kernel *k = arena_alloc(&p->arena, sizeof *k);
    IrNode *nodes = arena_alloc(&p->arena, a->n * sizeof *nodes);
    IrBuf *bufs = arena_alloc(&p->arena, (size_t)(a->nbufs + 1) * sizeof *bufs);
    if (!k || !nodes || !bufs) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    *k = *a;
    memcpy(nodes, a->nodes, a->n * sizeof *nodes);
    memcpy(bufs, a->bufs, (size_t)a->nbufs * sizeof *bufs);
    k->nodes = nodes, k->cap = a->n, k->bufs = bufs, k->bufcap = a->nbufs;
    k->arena = &p->arena, k->ex = t, k->hash = NULL, k->hcap = 0;
    ExprId e[GEN_PROBES];
    for (int i = 0; i < a->nbufs; i++) {
        int same = 1;
        for (int j = 0; j < np; j++) {
            const IrBuf *x = &ks[j]->bufs[i];
            same &= x->dtype == bufs[i].dtype && x->role == bufs[i].role && x->node == bufs[i].node;
            e[j] = x->size;
        }
        if (!same || !(bufs[i].size = gen_expr(t, e, sv, np))) {
            snprintf(why, cap, "kernel %s: buffer %d is not affine in the size", a->name, i);
            return NULL;
        }
        k->shapes |= bufs[i].size != a->bufs[i].size;
    }
    for (uint32_t r = 1; r < a->n; r++) {
        IrNode *y = &nodes[r];
        const IrNode *x[GEN_PROBES];
        int same = 1, imm = 1, any = 0;
        for (int j = 0; j < np; j++) {
            x[j] = &ks[j]->nodes[r];
            any |= x[j]->index != 0;
            IrNode u = *x[j], v = *y;
            u.index = v.index = 0, u.imm = v.imm = 0;
            same &= !memcmp(&u, &v, sizeof u);
            imm &= !memcmp(&x[j]->imm, &y->imm, sizeof y->imm);
            e[j] = x[j]->index;
        }
        if (same && y->kind == IR_CONST && !imm && gen_const(t, y, x, sv, np)) {
            k->shapes = 1;
            continue;
        }
        if (!same || !imm || (any && !(y->index = gen_expr(t, e, sv, np)))) {
            static const char *const kinds[IR_NKINDS] = {"loop", "store", "acc", "update", "constant", "load",
                                                         "accval", "idx", "op", "rand", "check"};
            snprintf(why, cap, "kernel %s: node %u (%s) %s", a->name, (unsigned)r, kinds[y->kind],
                     !same ? "has another form at another size" : !imm ? "is a number not affine in the size"
                                                                    : "has an index not affine in the size");
            return NULL;
        }
        k->shapes |= y->index != a->nodes[r].index;
    }
    return k;
}

/* Step s of the probes q[j] as p's step s: 0, or 1 with why. */
static int gen_step(Program *p, Program *const *q, int s, const int64_t *sv, int np, char *why, size_t cap)
{
    const Step *x = &q[0]->steps[s];
    Step *st = &p->steps[s];
    for (int j = 1; j < np; j++) {
        const Step *y = &q[j]->steps[s];
        if (y->node != x->node || y->interp != x->interp || !y->k != !x->k || !y->gemm != !x->gemm ||
            y->dot != x->dot || y->root[0] != x->root[0] || y->root[1] != x->root[1]) {
            snprintf(why, cap, "step %d (node %%%u) is another kind of step at size %lld", s, (unsigned)x->node,
                     (long long)sv[j]);
            return 1;
        }
    }
    memset(st, 0, sizeof *st);
    st->node = x->node, st->interp = x->interp, st->dot = x->dot;
    st->root[0] = x->root[0], st->root[1] = x->root[1], st->off[0] = x->off[0], st->off[1] = x->off[1];
    st->shares = st->same = -1;
    const Kernel *ks[GEN_PROBES];
    for (int j = 0; j < np; j++) ks[j] = q[j]->steps[s].k;
    if (x->k && !(st->k = gen_kernel(p, ks, sv, np, why, cap))) return 1;
    if (!x->gemm) return 0;
    if (x->gemm->bias) /* run_rt_gemm has no bias operand to hand the library's GEMM (the scheduler fuses a
                          bias as the epilogue, so no dot of a compiled graph has one today) */
        return snprintf(why, cap, "dot %%%u has a bias in its spec", (unsigned)x->dot), 1;
    st->gemm = arena_alloc(&p->arena, sizeof *st->gemm);
    char *name = arena_alloc(&p->arena, 24);
    st->gx = arena_alloc(&p->arena, GX_N * sizeof *st->gx);
    if (!st->gemm || !name || !st->gx) return snprintf(why, cap, "out of memory"), 1;
    *st->gemm = *x->gemm;
    snprintf(name, 24, "%s", x->gemm->name);
    st->gemm->name = name;
    st->gemm->epilogue = st->k ? st->k->name : NULL;
    int generic = 0;
    for (int f = 0; f < GX_N; f++) {
        int64_t c[GEN_PROBES];
        for (int j = 0; j < np; j++) {
            const Step *y = &q[j]->steps[s];
            const GemmSpec *g = y->gemm;
            const GemmWindow *w = &g->win;
            int64_t v[GX_N] = {g->batch, g->M, g->N, g->K, g->sa_b, g->sa_m, g->sa_k, g->sb_b, g->sb_k, g->sb_n,
                               y->off[0], y->off[1], w->n, w->c, w->h, w->w, w->kh, w->kw, w->oh, w->ow, w->sh,
                               w->sw, w->dh, w->dw, w->ph, w->pw, w->sx_n, w->sx_c, w->sx_h, w->sx_w};
            c[j] = v[f];
            if (w->on != x->gemm->win.on || w->t != x->gemm->win.t || g->dtype != x->gemm->dtype ||
                g->act != x->gemm->act || g->bias != x->gemm->bias) {
                snprintf(why, cap, "dot %%%u is another kind of product at size %lld", (unsigned)x->dot,
                         (long long)sv[j]);
                return 1;
            }
        }
        if (!(st->gx[f] = gen_affine(p->gex, c, sv, np))) {
            snprintf(why, cap, "dot %%%u: its sizes are not affine in the size", (unsigned)x->dot);
            return 1;
        }
        generic |= c[0] != c[np - 1] || c[0] != c[1];
    }
    if (!generic) st->gx = NULL; /* the same dot at every size: the target's template */
    return 0;
}

/* The generic kernels through the loop passes (see above). */
static int gen_opt(kn_ctx *ctx, Program *p, int64_t hint)
{
    LoopOptions all = {0, 0, 0, hint};
    LoopOptions simplify = {0, 0, EPILOGUE_PASSES, 0};
    for (int s = 0; s < p->nsteps; s++) {
        Kernel *k = p->steps[s].k;
        if (!k) continue;
        if (ir_verify(ctx, k) || loopopt_run(ctx, k, k->tile ? &simplify : &all) || ir_verify(ctx, k)) return ctx->status;
        log_kernel(ctx, k);
    }
    return 0;
}

Program *compile_generic(kn_ctx *ctx, const Graph *const *gs, const int64_t *sv, int np, const uint32_t *outs,
                         int nouts, const CompileOpts *o, char *why, size_t cap)
{
    Program *q[GEN_PROBES] = {0}, *p = np >= 3 && np <= GEN_PROBES ? program_new(ctx, gs[0], nouts, o) : NULL;
    why[0] = 0;
    if (!p) return snprintf(why, cap, "%s", np < 3 || np > GEN_PROBES ? "too few probes" : "out of memory"), NULL;
    int err = !p->t || !p->outs;
    if (err) snprintf(why, cap, "%s", p->t ? "out of memory" : "no compiler here");
    if (!err && (p->gex = kn_alloc(ctx, sizeof *p->gex))) expr_init(p->gex, ctx);
    err = err || !p->gex;
    int big = 0; /* the largest probe: its sizes decide every probe's size heuristics */
    for (int j = 1; j < np; j++)
        if (sv[j] > sv[big]) big = j;
    for (int j = 0; j < np && !err; j++) {
        Schedule s;
        q[j] = program_new(ctx, gs[j], nouts, o);
        if (q[j]) q[j]->keep_packed = 0; /* its instances share its steps: nothing kept per program */
        err = !q[j] || gs[j]->n != gs[0]->n || sched_build_hint(ctx, gs[j], gs[big], outs, nouts, &q[j]->arena, &s) ||
              lower_steps(ctx, q[j], &s, p->gex, 0, 1);
        if (!err && q[j]->nsteps != q[0]->nsteps)
            err = 1, snprintf(why, cap, "the schedule at size %lld has other kernels", (long long)sv[j]);
    }
    if (!err) {
        memcpy(p->outs, outs, (size_t)nouts * sizeof *outs), p->nouts = nouts;
        p->steps = arena_alloc(&p->arena, (size_t)(q[0]->nsteps + 1) * sizeof *p->steps);
        err = !p->steps;
        p->nsteps = err ? 0 : q[0]->nsteps;
    }
    for (int s = 0; s < p->nsteps && !err; s++) err = gen_step(p, q, s, sv, np, why, cap);
    for (int j = 0; j < np; j++) program_free(q[j]);
    err = err || gen_opt(ctx, p, sv[0]) || load_kernels(ctx, p);
    if (err) {
        if (!why[0]) snprintf(why, cap, "%s", ctx->status ? kn_last_error(ctx) : "out of memory");
        kn_clear_error(ctx);
        program_free(p);
        return NULL;
    }
    p->gn = gs[0]->n;
    p->g = NULL; /* the probes' graphs are the caller's */
    log_line(ctx, LOG_PERF, "compile: generic in s0, %d steps, %zu bytes of code", p->nsteps, p->code_bytes);
    return p;
}

Program *program_at(kn_ctx *ctx, const Program *gen, const Graph *g, int64_t z0)
{
    if (!gen->gex || g->n != gen->gn)
        return kn_err(ctx, KN_EINVAL, "a generic program runs a graph of %u nodes, not %u", (unsigned)gen->gn,
                      (unsigned)g->n);
    Program *p = kn_alloc(ctx, sizeof *p);
    if (!p) return kn_err(ctx, KN_ENOMEM, "out of memory planning s0 = %lld", (long long)z0);
    memset(p, 0, sizeof *p);
    p->ctx = ctx, p->g = g, p->t = gen->t, p->base = gen, p->shape[0] = z0;
    arena_init(&p->arena, ctx);
    p->steps = gen->steps, p->nsteps = gen->nsteps;
    p->nkernels = gen->nkernels, p->ninterp = gen->ninterp, p->code_bytes = gen->code_bytes, p->src = gen->src;
    p->outs = arena_alloc(&p->arena, (size_t)(gen->nouts + 1) * sizeof *p->outs);
    p->gv = arena_alloc(&p->arena, (size_t)(GX_N * p->nsteps + 1) * sizeof *p->gv);
    int64_t *symv = kn_alloc(ctx, (IR_SHAPE_SYM + 1) * sizeof *symv); /* z0 is symbol IR_SHAPE_SYM */
    int err = !p->outs || !p->gv || !symv;
    if (!err) {
        memcpy(p->outs, gen->outs, (size_t)gen->nouts * sizeof *p->outs), p->nouts = gen->nouts;
        memset(symv, 0, (IR_SHAPE_SYM + 1) * sizeof *symv);
        symv[IR_SHAPE_SYM] = z0;
        for (int s = 0; s < p->nsteps; s++)
            for (int f = 0; p->steps[s].gx && f < GX_N; f++) {
                int64_t v = expr_eval(gen->gex, p->steps[s].gx[f], symv, &err);
                p->gv[GX_N * s + f] = v;
                err |= (f < 4 || (p->steps[s].gemm->win.on && f >= GX_WIN && f < GX_WIN + 12)) && v < 1; /* sizes, steps */
            }
    }
    kn_dealloc(ctx, symv, (IR_SHAPE_SYM + 1) * sizeof *symv);
    if (err) {
        program_free(p);
        return ctx->status ? NULL : kn_err(ctx, KN_EINVAL, "the generic program has no valid dot at s0 = %lld", (long long)z0);
    }
    if (plan(ctx, p)) {
        program_free(p);
        return NULL;
    }
    return p;
}
