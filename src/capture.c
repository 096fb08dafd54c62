/*
 * capture.c — kn_compile, TorchDynamo's contract for C functions: trace the
 * body once into graphs, compile them, and replay them behind guards.
 *
 * The first call (and each recompile) runs the body with ctx->trace set,
 * on symbolic stand-ins for the inputs, so every op records a node. A
 * concrete tensor the body meets (a parameter, optimizer state, running
 * statistics) enters the graph as an input, bound at call time to where it
 * came from: a kn_call input, params[i] of the options, or a handle the
 * entry holds. What the graph assumed becomes the entry's guards.
 *
 * Side effects are recorded rather than done: a write into a concrete
 * tensor (an optimizer step, batch_norm's running stats: tensor_assign)
 * redirects later reads of that tensor to the written value and becomes an
 * output of the graph, copied back after each run; the .grad that
 * kn_backward and kn_zero_grad leave likewise. Reading a value (kn_read,
 * kn_item) is a graph break: the graph so far becomes a segment that is
 * compiled and run, every live traced tensor becomes concrete, the value
 * read is guarded on, and tracing goes on in a new graph.
 *
 * An entry is a list of segments. A call runs them in order, holding back
 * writes until the last has run, so a break value that differs from the
 * traced one (another branch of the body) simply discards the call's work
 * and traces the body again; the new trace takes the values the call
 * computed so far, shares the programs of segments it makes the same
 * (seg_twin), and where it is the same entry but for the value, replaces
 * the old one: a loss logged before its backward costs a trace per call,
 * not a compile. With grad enabled and a parameter or input that requires
 * grad, the single segment is a joint graph split by the partitioner: its
 * forward runs now, and a tape region runs its compiled backward when
 * kn_backward reaches the output. A break in such a body ends a region of
 * its own, whose backward a later kn_backward in the body copies into its
 * graph ("backward across a graph break").
 *
 * Requires: the eager API traceable (prim.c), autodiff_grads, the
 * partitioner and compile_graph. Produces: kn_fn.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compile.h"
#include "core.h"
#include "expr.h"
#include "log.h"
#include "partition.h"
#include "../port/port.h"

enum { MAX_IO = 64, MAX_VALS = 1024 }; /* inputs/outputs of a call; values in or out of a graph */

/* Where a value comes from at call time. */
typedef enum { SRC_NONE, SRC_IN, SRC_PARAM, SRC_HELD, SRC_GRAD, SRC_SEG, SRC_COT } SrcKind;
typedef struct {
    uint8_t kind;
    int32_t a, b; /* IN: input a; PARAM: params[a]; HELD: held[a]; GRAD: params[a]'s grad; SEG: segment a, output b */
} Src;

typedef struct DynSeg DynSeg;

typedef struct {
    Graph *g;        /* the segment's own graph (inputs renumbered); generic (dyn): at the traced size */
    Program *prog;   /* NULL: nothing to compute (or generic: dyn's program for the size run) */
    DynSeg *dyn;     /* non-NULL: the graph is generic in s0 (see "dynamic dims") */
    int nin;
    Src *in;         /* what each input of g is bound to */
    int nout;
    uint32_t *outs;  /* nodes of g */
    Src *alias;      /* output m is an input passed through: alias[m] (else kind NONE) */
    uint8_t donates; /* its program writes outputs over inputs (compile.c, "outputs in place") */
} Seg;

typedef struct {
    int at;          /* checked before segment `at` runs (nsegs: at the end) */
    Src val;         /* the value read */
    void *bytes;     /* what it held when traced */
    size_t n;
    const char *op;
} ValueGuard;

typedef struct {
    Src dst;         /* PARAM or HELD */
    Src val;
    int seg;         /* the segment after which it is known */
} Write;

typedef struct {
    int param;       /* params[param].grad := val (kind NONE: no grad) */
    Src val;
} GradSet;

typedef struct {
    uint8_t dtype, ndim, contig, reqgrad;
    uint8_t sym[KN_MAX_DIMS];  /* 1: the dim is the symbol s0 (any size >= 2, equal to s0's other dims) */
    int64_t shape[KN_MAX_DIMS];
    int64_t stride[KN_MAX_DIMS]; /* not contig, no dim s0: the strides the trace viewed it with */
} InGuard;

/* A user output that eager makes a view of a tensor with an identity (an
 * input, a parameter, a held tensor): the call hands out that view of it,
 * after the writes land, so that it shows what eager's does (a parameter
 * the body's optimizer step changed). Generic: its numbers as expressions
 * in s0 (0: the traced value). */
typedef struct {
    Src root;        /* IN, PARAM or HELD; kind NONE: not a view */
    uint8_t ndim;
    int64_t shape[KN_MAX_DIMS], stride[KN_MAX_DIMS], offset; /* offset from the root's own */
    ExprId gshape[KN_MAX_DIMS], gstride[KN_MAX_DIMS], goffset;
} OutView;

typedef struct {
    int idx;
    const kn_tensor *t;
    uint8_t reqgrad;
    int8_t grad;     /* -1: not assumed; 0: no grad at entry; 1: a grad (of the param's shape) */
} ParamGuard;

typedef struct {
    const int *p;
    int v;
    const char *what;
} FlagGuard;

/* the compiled backward of a region (grad mode, one differentiable output) */
typedef struct {
    Seg bwd;         /* inputs: SRC_SEG(0, m) saved values, SRC_COT, and the forward's own sources */
    int nsrc;
    Src *src;        /* the region's sources (IN or PARAM), in tape order */
    int *grad_out;   /* output of bwd for source i, or -1 */
    int out;         /* which user output is differentiable */
} Region;

typedef struct CEntry {
    struct CEntry *next;
    int refs;        /* the fn, and each live tape region */
    kn_ctx *ctx;
    Arena arena;
    int nin, nout, grad_mode;
    InGuard *ing;
    ParamGuard *pg;
    int npg;
    FlagGuard *fg;
    int nfg;
    kn_tensor **held;
    int nheld;
    Seg *segs;
    int nsegs;
    ValueGuard *vg;
    int nvg;
    Write *w;
    int nw;
    GradSet *gs;
    int ngs;
    Src *outs;
    OutView *ov;     /* per user output */
    uint8_t *fresh;  /* per user output: eager's is a new tensor, never a view of an input or parameter */
    uint8_t *leaf;   /* per user output: a leaf that requires grad itself (an input or parameter) */
    Region *rg;
    kn_tensor ***vals; /* a call's segment values (entry_vals) */
    int kernels, interp_steps, ops, nodes, in_place;
    int ran;              /* segments its last call ran before a value read at a break differed */
    int sym_in, sym_dim;  /* where s0 is read (in[sym_in] dim sym_dim); -1: the entry is static */
    int64_t s0_limit;     /* generic: the largest s0 its graphs hold for (dyn_limit); 0: none */
    int64_t s0_floor;     /* generic: the smallest s0 it holds for where a small probe differed; 0: 2 */
    char arena_expr[64];  /* generic: the arena's size in s0 ("" if static) */
    size_t arena_bytes, code_bytes;
    double compile_ms;
    const char *backend;
} CEntry;

struct kn_fn {
    kn_ctx *ctx;
    kn_body_fn body;
    void *user;
    kn_compile_opts o;
    CEntry *entries;  /* newest first */
    int nentries, calls, recompiles, graph_breaks, eager_calls, warned;
    int compiles;     /* programs made with code (backends tcc, c): a segment's, or a generic one's */
    uint8_t dyn[MAX_IO][KN_MAX_DIMS]; /* dims marked dynamic (auto: seen to change; on: all) */
    char name[64];
};

/* ---- the trace in progress ---- */

typedef struct {
    kn_tensor *t;     /* the user's tensor */
    kn_tensor *hold;  /* a handle keeping its storage (materialized) */
    Src src;
} Known;

typedef struct {
    kn_tensor *leaf;  /* params[param] */
    int param;
    kn_tensor *entry; /* its .grad when first touched */
} Tracked;

typedef struct {
    kn_tensor *dst;
    uint32_t node, serial;
} PendingWrite;

/* A tensor whose storage traced tensors would view eagerly (kn_tensor.view_root): a stand-in, or a concrete
 * tensor a movement op read. */
typedef struct {
    kn_tensor *t;     /* the tensor (a stand-in, or the user's) */
    kn_tensor *hold;  /* concrete: a handle keeping it */
    int in;           /* a stand-in: its input; else -1 */
    int64_t offset;   /* its offset when traced */
    uint8_t unknown;  /* a probe's stand-in of a non-contiguous input at another size: strides not known */
} Root;

typedef struct Capture {
    TraceHooks hooks;        /* first: ctx->capture points here while tracing (core.h) */
    kn_fn *f;
    CEntry *e;
    kn_tensor *const *in;    /* the real inputs */
    kn_tensor **stand;       /* their stand-ins */
    uint32_t tape_start;
    Known *known;
    int nknown;
    Tracked *tr;
    int ntr;
    PendingWrite *pw;
    int npw;
    int seg;                 /* segments finished */
    int backward;            /* the body called kn_backward */
    kn_tensor ***vals;       /* vals[seg][m]: outputs of finished segments */
    int *nvals;
    kn_status failed;
    int probe;               /* trace only (dynamic dims): no compile, no run, no break */
    uint32_t seg_tape;       /* the tape's length when the current graph began */
    CEntry *like;            /* traced again after its value guard failed: the values its call computed */
    Root *roots;
    int nroots;
} Capture;

/* The tracer's state behind ctx->capture */
static Capture *cap_of(const kn_ctx *ctx) { return (Capture *)ctx->capture; }

/* the hooks the core calls while a body is traced (core.h TraceHooks) */
static kn_status capture_break(kn_ctx *ctx, kn_tensor *t, const char *op);
static kn_status capture_write(kn_ctx *ctx, kn_tensor *dst, kn_tensor *src);
static kn_status capture_set_grad(kn_ctx *ctx, kn_tensor *leaf, kn_tensor *g, int read_old);
static void capture_guard_flag(kn_ctx *ctx, const int *flag, const char *what);
static uint32_t capture_tape_start(const kn_ctx *ctx);
static int capture_generic(const kn_ctx *ctx);
static int capture_root(kn_ctx *ctx, kn_tensor *x);
static int capture_layout_known(const kn_ctx *ctx, const kn_tensor *x);
static const TraceHooks capture_hooks = {capture_break,      capture_write,   capture_set_grad, capture_guard_flag,
                                         capture_tape_start, capture_generic, capture_root,     capture_layout_known};

/* Arrays in an arena hold max(8, the next power of two >= n) elements: room for one more. */
static void *append(Arena *a, void *p, int n, size_t size)
{
    int cap = 8;
    while (cap < n) cap *= 2;
    if (n > 0 && n < cap) return p;
    return arena_grow(a, p, (size_t)(n ? cap : 0) * size, (size_t)(n ? 2 * cap : 8) * size);
}

#define APPEND(a, arr, n) (((arr) = append((a), (arr), (n), sizeof *(arr))) != NULL)

/* The strides a tensor laid out as one of (shape, stride) has at another shape `to` (a generic entry's
 * input at another size of s0): its dims of size > 1 ordered by stride, the innermost keeping its stride
 * and each outer one its inner neighbour's times that one's size times the gap between them (a transposed,
 * stepped or expanded input stays one). 0 where the layout is not so made (dims that overlap). */
static int scaled_strides(int nd, const int64_t *shape, const int64_t *stride, const int64_t *to, int64_t *out)
{
    int order[KN_MAX_DIMS], n = 0;
    for (int d = 0; d < nd; d++) {
        out[d] = stride[d]; /* a size-1 or broadcast dim keeps its own */
        if (shape[d] == 1 || stride[d] == 0) continue;
        int i = n++;
        for (; i > 0 && stride[order[i - 1]] > stride[d]; i--) order[i] = order[i - 1];
        order[i] = d;
    }
    for (int i = 1; i < n; i++) {
        int64_t in = stride[order[i - 1]] * shape[order[i - 1]], st = stride[order[i]];
        if (in <= 0 || st < in || st % in) return 0;
        out[order[i]] = out[order[i - 1]] * to[order[i - 1]] * (st / in);
    }
    return 1;
}


/* ---- slicing a traced graph into a segment's graph ---- */

/* Ancestors of outs in g, stopping at cut nodes and INPUTs, which become
 * the new graph's inputs; from[k] is the g node behind new input k, map[v]
 * the new id of g's node v. */
static Graph *slice_graph(kn_ctx *ctx, const Graph *g, const uint32_t *outs, int nouts, const uint8_t *cut, uint32_t *map,
                    uint32_t *from, int *nfrom, int maxfrom)
{
    uint8_t *need = kn_alloc(ctx, g->n);
    Graph *h = need ? graph_new(ctx) : NULL;
    if (!h) {
        kn_dealloc(ctx, need, g->n);
        return kn_err(ctx, KN_ENOMEM, "out of memory slicing a graph");
    }
    memset(need, 0, g->n);
    memset(map, 0, g->n * sizeof *map);
    for (int i = 0; i < nouts; i++) need[outs[i]] = 1;
    for (uint32_t v = g->n; v-- > 1;) {
        if (!need[v] || cut[v] || g->nodes[v].op == OP_INPUT) continue;
        for (int i = 0; i < g->nodes[v].nsrc; i++) need[g->nodes[v].src[i]] = 1;
    }
    *nfrom = 0;
    for (uint32_t v = 1; v < g->n; v++) {
        if (!need[v]) continue;
        Node n = g->nodes[v];
        if (cut[v] || n.op == OP_INPUT) {
            if (*nfrom == maxfrom) {
                kn_err(ctx, KN_EUNSUPPORTED, "a compiled graph reads more than %d tensors", maxfrom);
                break;
            }
            memset(&n, 0, sizeof n);
            n.op = OP_INPUT;
            n.dtype = g->nodes[v].dtype;
            n.ndim = g->nodes[v].ndim;
            memcpy(n.shape, g->nodes[v].shape, sizeof n.shape);
            n.p.i[0] = *nfrom;
            n.p.n = 1;
            from[(*nfrom)++] = v;
            h->ninputs++;
        } else {
            for (int i = 0; i < n.nsrc; i++) n.src[i] = map[n.src[i]];
        }
        if (!(map[v] = graph_add(h, &n))) {
            kn_err(ctx, KN_ENOMEM, "out of memory slicing a graph");
            break;
        }
    }
    kn_dealloc(ctx, need, g->n);
    if (ctx->status) {
        graph_free(h);
        return NULL;
    }
    return h;
}

static CompileBackend backend_of(kn_backend b)
{
    return b == KN_BACKEND_TCC ? BACKEND_TCC : b == KN_BACKEND_INTERP ? BACKEND_INTERP : BACKEND_C;
}

/* A handle the entry keeps on concrete tensor t (one per storage and view). */
static Src held_src(Capture *c, kn_tensor *t)
{
    CEntry *e = c->e;
    for (int i = 0; i < e->nheld; i++)
        if (e->held[i]->st == t->st && e->held[i]->offset == t->offset && e->held[i]->dtype == t->dtype &&
            e->held[i]->ndim == t->ndim && memcmp(e->held[i]->shape, t->shape, sizeof t->shape) == 0 &&
            memcmp(e->held[i]->stride, t->stride, sizeof t->stride) == 0)
            return (Src){SRC_HELD, i, 0};
    if (!APPEND(&e->arena, e->held, e->nheld)) {
        kn_err(c->f->ctx, KN_ENOMEM, "out of memory tracing");
        return (Src){SRC_NONE, 0, 0};
    }
    if (!(e->held[e->nheld] = tensor_hold(c->f->ctx, t))) return (Src){SRC_NONE, 0, 0};
    return (Src){SRC_HELD, e->nheld++, 0};
}

/* Which input's stand-in t is: the stand-in itself, or once the stand-in is concrete (materialize_stand)
 * another handle of it that the body made (kn_detach's), which eager would make of that call's input too;
 * -1 if neither. The caller's own handle of the input is not one: a body that reads it directly reads that
 * tensor, whatever a later call passes. */
static int stand_of(const Capture *c, const kn_tensor *t)
{
    for (int k = 0; k < c->e->nin; k++) {
        const kn_tensor *x = c->stand[k];
        if (t == x || (x->st && t->st == x->st && t != c->in[k] && tensor_same_layout(t, x))) return k;
    }
    return -1;
}

/* Classifies g's input node v (a concrete tensor met while tracing, or a stand-in). */
static Src source_of(Capture *c, const Graph *g, uint32_t v, uint32_t cot_node)
{
    Src s = {SRC_NONE, 0, 0};
    if (v == cot_node) return (Src){SRC_COT, 0, 0};
    kn_tensor *t = g->input_vals[g->nodes[v].p.i[0]];
    kn_fn *f = c->f;
    int k = stand_of(c, t);
    if (k >= 0) return (Src){SRC_IN, k, 0};
    for (int i = 0; i < c->nknown; i++)
        if (c->known[i].t == t && c->known[i].hold->st == t->st) return c->known[i].src;
    for (int i = 0; i < c->ntr; i++)
        if (c->tr[i].entry == t) return (Src){SRC_GRAD, c->tr[i].param, 0};
    for (int i = 0; f->o.params && i < f->o.nparams; i++)
        if (f->o.params[i] == t) return (Src){SRC_PARAM, i, 0};
    (void)s;
    return held_src(c, t);
}

static int swappable(const CEntry *e, int i);
static int same_src(Src a, Src b);

/* The writes of a segment that are a whole entry (no break, no tape region) whose values the program may
 * write in place over the inputs they replace (compile.c, "outputs in place"): donate[q] for program
 * output q (uniq[q]), the input, or -1. Those swappable (see below): nothing else of the call holds the
 * value. Others keep the swap or copy after the run. */
static void seg_donations(const CEntry *e, const Seg *sg, int seg, const uint32_t *uniq, int nu, int *donate)
{
    for (int q = 0; q < nu; q++) donate[q] = -1;
    for (int i = 0; i < e->nw; i++) {
        const Write *w = &e->w[i];
        int later = 0; /* only the last write to a tensor lands */
        for (int j = i + 1; j < e->nw && !later; j++) later = same_src(e->w[j].dst, w->dst);
        if (later || w->seg != seg || w->val.kind != SRC_SEG || w->val.a != seg || !swappable(e, i)) continue;
        int q = -1, k = -1;
        for (int j = 0; j < nu && q < 0; j++)
            if (uniq[j] == sg->outs[w->val.b]) q = j;
        for (int j = 0; j < sg->nin && k < 0; j++)
            if (same_src(sg->in[j], w->dst)) k = j;
        if (q >= 0 && k >= 0) donate[q] = k;
    }
}

/* Two segments that compute the same: the same graph, reading the same values, with the same outputs. */
static int same_seg(const Seg *a, const Seg *b)
{
    if (a->g->n != b->g->n || a->nin != b->nin || a->nout != b->nout || a->donates || b->donates) return 0;
    if (memcmp(a->g->nodes, b->g->nodes, a->g->n * sizeof *a->g->nodes) != 0) return 0;
    for (int k = 0; k < a->nin; k++)
        if (a->in[k].kind != b->in[k].kind || a->in[k].a != b->in[k].a || a->in[k].b != b->in[k].b) return 0;
    for (int m = 0; m < a->nout; m++)
        if (a->outs[m] != b->outs[m] || a->alias[m].kind != b->alias[m].kind || a->alias[m].a != b->alias[m].a ||
            a->alias[m].b != b->alias[m].b)
            return 0;
    return 1;
}

/* The program of a segment of an earlier entry of f that is the same as sg: a body traced again (a value it
 * read at a graph break changed, say) that made the same graph shares it instead of compiling it again. */
static const Seg *seg_twin(kn_fn *f, const Seg *sg)
{
    for (CEntry *e = f->entries; e; e = e->next) {
        for (int j = 0; j < e->nsegs; j++)
            if (e->segs[j].prog && !e->segs[j].dyn && same_seg(&e->segs[j], sg)) return &e->segs[j];
        if (e->rg && e->rg->bwd.prog && !e->rg->bwd.dyn && same_seg(&e->rg->bwd, sg)) return &e->rg->bwd;
    }
    return NULL;
}

/* Builds and compiles a segment of graph g computing outs (cut: nodes that are inputs). whole: the segment
 * is the entry's only one, with no tape region (its writes may land in place). */
static kn_status make_seg(Capture *c, Seg *sg, const Graph *g, const uint32_t *outs, int nouts, const uint8_t *cut,
                          uint32_t cot_node, int whole)
{
    kn_ctx *ctx = c->f->ctx;
    CEntry *e = c->e;
    uint32_t *map = kn_alloc(ctx, g->n * sizeof *map), from[MAX_VALS];
    if (!map) return kn_errs(ctx, KN_ENOMEM, "out of memory compiling a segment");
    int nfrom = 0;
    sg->g = slice_graph(ctx, g, outs, nouts, cut, map, from, &nfrom, MAX_VALS);
    kn_status s = sg->g ? KN_OK : ctx->status;
    sg->nin = nfrom;
    sg->nout = nouts;
    sg->in = arena_alloc(&e->arena, (size_t)(nfrom + 1) * sizeof *sg->in);
    sg->outs = arena_alloc(&e->arena, (size_t)(nouts + 1) * sizeof *sg->outs);
    sg->alias = arena_alloc(&e->arena, (size_t)(nouts + 1) * sizeof *sg->alias);
    if (!s && (!sg->in || !sg->outs || !sg->alias)) s = kn_errs(ctx, KN_ENOMEM, "out of memory compiling a segment");
    for (int k = 0; k < nfrom && !s; k++) {
        uint32_t v = from[k];
        if (g->nodes[v].op == OP_INPUT) sg->in[k] = source_of(c, g, v, cot_node);
        else {
            sg->in[k] = (Src){SRC_NONE, (int32_t)v, 0}; /* a saved value: the caller fills it */
        }
        if (ctx->status) s = ctx->status;
    }
    uint32_t uniq[MAX_VALS];
    int nu = 0;
    for (int m = 0; m < nouts && !s; m++) {
        sg->outs[m] = map[outs[m]];
        const Node *n = &sg->g->nodes[sg->outs[m]];
        sg->alias[m] = n->op == OP_INPUT ? sg->in[n->p.i[0]] : (Src){SRC_NONE, 0, 0};
        if (n->op == OP_INPUT) continue;
        int dup = 0;
        for (int i = 0; i < nu && !dup; i++) dup = uniq[i] == sg->outs[m];
        if (!dup && nu < (int)(sizeof uniq / sizeof *uniq)) uniq[nu++] = sg->outs[m];
    }
    kn_dealloc(ctx, map, g->n * sizeof *map);
    if (s || nu == 0 || c->probe) return s;
    if (log_on(ctx, LOG_GRAPH)) {
        size_t need = graph_dump(sg->g, NULL, 0) + 1;
        char *buf = kn_alloc(ctx, need);
        if (buf) {
            graph_dump(sg->g, buf, need);
            log_line(ctx, LOG_GRAPH, "%s: entry %d, segment %d: %" PRIu32 " nodes", c->f->name, c->f->nentries,
                     c->seg, sg->g->n - 1);
            log_text(ctx, LOG_GRAPH, buf);
            kn_dealloc(ctx, buf, need);
        }
    }
    /* the program's outputs are the distinct computed ones, in order */
    int donate[MAX_VALS];
    if (whole) seg_donations(e, sg, c->seg, uniq, nu, donate);
    CompileOpts co = {backend_of(c->f->o.backend), c->f->o.mode, 1, whole ? donate : NULL}; /* weights come back:
                                                                                              keep them packed */
    sg->donates = (uint8_t)whole;
    const Seg *twin = whole ? NULL : seg_twin(c->f, sg);
    if (twin) { /* its program keeps its graph: the two segments share both */
        graph_free(sg->g);
        sg->g = twin->g;
        sg->g->refs++;
    }
    sg->prog = twin ? program_share(twin->prog) : compile_graph(ctx, sg->g, uniq, nu, &co);
    if (!sg->prog) return ctx->status ? ctx->status : kn_errs(ctx, KN_EINVAL, "compile failed");
    ProgramStats st;
    program_stats(sg->prog, &st);
    if (twin) log_line(ctx, LOG_RECOMPILES, "%s: graph %d is the same as one compiled before: its program is reused",
                       c->f->name, c->seg + 1);
    c->f->compiles += !twin && strcmp(st.backend, "interp") != 0;
    e->kernels += st.kernels;
    e->in_place += st.in_place;
    e->interp_steps += st.interp_steps;
    e->nodes += (int)(sg->g->n - 1 - sg->g->ninputs);
    e->arena_bytes += st.arena_bytes;
    e->code_bytes += st.code_bytes;
    e->backend = st.backend;
    return KN_OK;
}

/* ---- running an entry ---- */

typedef struct {
    int64_t s;       /* the size of s0 it is for */
    Graph *g;        /* the segment's graph at that size */
    Program *p;
    int *slot;       /* per distinct computed output of the segment: its program output */
    uint64_t used;
} DynProg;

/* Per node of a generic segment's graph, its fields as expressions in s0
 * (0: the traced value, the same at every size). */
typedef struct {
    ExprId shape[KN_MAX_DIMS];
    ExprId i[2 * KN_MAX_DIMS];
    ExprId f;        /* p.f, an integer (a count: a mean's divisor) */
    uint8_t finv;    /* 1: p.f is 1 / f's value */
    uint8_t any;     /* some field is symbolic */
} GenNode;

enum { DYN_CACHE = 4 }; /* sizes whose programs a generic segment keeps */

struct DynSeg {
    ExprTable ex;
    GenNode *gen;    /* per node of the segment's graph */
    uint32_t *uniq;  /* the distinct computed outputs, in order (nodes of the segment's graph) */
    int nu;
    CompileOpts co;
    int reuse;       /* its programs' (PROGRAM_POOL; a region's backward PROGRAM_FRESH: grads go to the tape) */
    DynProg cache[DYN_CACHE];
    uint64_t tick;
    Program *code;   /* backends tcc and c: the program generic in s0 (compile_generic) whose code every size
                        runs; NULL: the interpreter (a plan per size) */
};

static const DynProg *dyn_prog(kn_fn *f, CEntry *e, const Seg *sg, int64_t s0);
static void dyn_free(DynSeg *d);

typedef struct {
    kn_tensor *const *in;
    kn_tensor ***vals;    /* vals[seg][m] */
    kn_tensor **staged;   /* per write: its value, not yet committed */
    kn_tensor *cot;
    kn_tensor **saved;    /* region backward: the forward's saved values */
} Binding;

static kn_tensor *resolve(kn_fn *f, CEntry *e, const Binding *b, Src s)
{
    switch (s.kind) {
    case SRC_IN: return b->in[s.a];
    case SRC_PARAM:
    case SRC_HELD:
        for (int i = e->nw; b->staged && i-- > 0;) /* the newest held-back write wins */
            if (b->staged[i] && e->w[i].dst.kind == s.kind && e->w[i].dst.a == s.a) return b->staged[i];
        return s.kind == SRC_PARAM ? f->o.params[s.a] : e->held[s.a];
    case SRC_GRAD: return f->o.params[s.a]->grad;
    case SRC_SEG: return b->vals[s.a][s.b];
    case SRC_COT: return b->cot;
    default: return NULL;
    }
}

/* Runs seg, filling out[0..nout) with kept tensors: the program's outputs
 * themselves (a new handle each, or under reduce-overhead the program's
 * own), views for aliases and repeated outputs. */
static kn_status run_seg(kn_fn *f, CEntry *e, const Seg *sg, const Binding *b, kn_tensor **out)
{
    kn_ctx *ctx = f->ctx;
    kn_tensor *ins[MAX_VALS], *pouts[MAX_VALS];
    for (int k = 0; k < sg->nin; k++) {
        ins[k] = sg->in[k].kind == SRC_NONE ? b->saved[sg->in[k].b] : resolve(f, e, b, sg->in[k]);
        if (!ins[k]) return kn_errs(ctx, KN_EINVAL, "%s: input %d of a compiled graph has no value", f->name, k);
    }
    Program *prog = sg->prog;
    const int *slot = NULL; /* generic: distinct output j is program output slot[j] */
    if (sg->dyn) {
        const DynProg *dp = dyn_prog(f, e, sg, b->in[e->sym_in]->shape[e->sym_dim]);
        if (!dp) return ctx->status ? ctx->status : kn_errs(ctx, KN_EINVAL, "%s: planning s0 failed", f->name);
        prog = dp->p, slot = dp->slot;
    }
    kn_status s = prog ? program_run(prog, ins, sg->nin, pouts) : KN_OK;
    int next = 0, first[MAX_VALS]; /* generic: the out[] that took program output q first, or -1 */
    for (int q = 0; slot && q < sg->nout; q++) first[q] = -1;
    for (int m = 0; m < sg->nout; m++) out[m] = NULL;
    for (int m = 0; m < sg->nout && !s; m++) {
        kn_tensor *v;
        if (sg->alias[m].kind != SRC_NONE) v = resolve(f, e, b, sg->alias[m]);
        else {
            int j = -1; /* the program's output for this node */
            for (int i = 0; i < m && j < 0; i++)
                if (sg->alias[i].kind == SRC_NONE && sg->outs[i] == sg->outs[m]) j = i;
            if (j < 0 && slot && first[slot[next]] >= 0) j = first[slot[next++]]; /* merged at this size */
            else if (j < 0 && slot) {
                first[slot[next]] = m;
                out[m] = kn_keep(ctx, pouts[slot[next++]]);
                continue;
            }
            if (j < 0) {
                out[m] = kn_keep(ctx, pouts[next++]);
                continue;
            }
            v = out[j];
        }
        out[m] = v ? tensor_view(ctx, v, v->ndim, v->shape, v->stride, v->offset) : NULL;
        if (!out[m]) s = ctx->status ? ctx->status : kn_errs(ctx, KN_EINVAL, "%s: no value for output %d", f->name, m);
        else kn_keep(ctx, out[m]);
    }
    return s; /* on failure, outputs not handed on are the caller scope's */
}

static void free_vals(kn_ctx *ctx, kn_tensor **v, int n)
{
    for (int i = 0; v && i < n; i++)
        if (v[i]) {
            v[i]->flags &= (uint8_t)~TF_KEPT;
            kn_free(ctx, v[i]);
        }
}

static void entry_unref(CEntry *e);

typedef struct {
    kn_fn *f;
    CEntry *e;
    kn_tensor **saved;
    int nsaved;
    kn_tensor **src;  /* handles of the forward's sources, as bound at the call */
    int64_t s0;       /* a generic entry's s0 at the call */
} RegionCall;

static void region_release(kn_ctx *ctx, void *user)
{
    RegionCall *rc = user;
    for (int i = 0; i < rc->nsaved; i++) tensor_unhold(ctx, rc->saved[i]);
    for (int i = 0; i < rc->e->rg->bwd.nin; i++)
        if (rc->src[i]) tensor_unhold(ctx, rc->src[i]);
    kn_dealloc(ctx, rc->saved, (size_t)(rc->nsaved + 1) * sizeof *rc->saved); /* as run_entry allocates them */
    kn_dealloc(ctx, rc->src, (size_t)(rc->e->rg->bwd.nin + 1) * sizeof *rc->src);
    entry_unref(rc->e);
    kn_dealloc(ctx, rc, sizeof *rc);
}

static kn_status region_vjp(kn_ctx *ctx, void *user, kn_tensor *const *gs, kn_tensor **grads)
{
    kn_tensor *g = gs[0];
    RegionCall *rc = user;
    Region *rg = rc->e->rg;
    kn_tensor *ins[MAX_VALS], *outs[MAX_VALS];
    Program *prog = rg->bwd.prog;
    const int *slot = NULL; /* generic: the program output of each distinct gradient */
    if (rg->bwd.dyn) {
        const DynProg *dp = rg->bwd.dyn->nu ? dyn_prog(rc->f, rc->e, &rg->bwd, rc->s0) : NULL;
        if (rg->bwd.dyn->nu && !dp)
            return ctx->status ? ctx->status : kn_errs(ctx, KN_EINVAL, "%s: planning s0 failed", rc->f->name);
        prog = dp ? dp->p : NULL, slot = dp ? dp->slot : NULL;
    }
    if (!prog) return KN_OK; /* no source gets a gradient */
    for (int k = 0; k < rg->bwd.nin; k++) {
        Src s = rg->bwd.in[k];
        ins[k] = s.kind == SRC_COT ? g : s.kind == SRC_NONE ? rc->saved[s.b] : rc->src[k];
    }
    kn_status st = program_run(prog, ins, rg->bwd.nin, outs);
    if (st) return st;
    for (int i = 0; i < rg->nsrc; i++) {
        int m = rg->grad_out[i], dup = 0;
        grads[i] = m < 0 ? NULL : outs[slot ? slot[m] : m];
        for (int j = 0; j < i && grads[i]; j++) dup |= grads[j] == grads[i]; /* one at this size: a view each */
        if (dup) grads[i] = tensor_view(ctx, grads[i], grads[i]->ndim, grads[i]->shape, grads[i]->stride,
                                        grads[i]->offset);
        if (m >= 0 && !grads[i]) return ctx->status ? ctx->status : KN_ENOMEM;
    }
    return KN_OK;
}

/* The bytes of t, row-major; NULL on error. */
static void *read_bytes(kn_ctx *ctx, kn_tensor *t, size_t *n)
{
    *n = (size_t)kn_numel(t) * kn_dtype_size(kn_dtype_of(t));
    void *p = kn_alloc(ctx, *n ? *n : 1);
    if (p && kn_read(ctx, t, p, *n) != KN_OK) {
        kn_dealloc(ctx, p, *n ? *n : 1);
        p = NULL;
    }
    return p;
}

static int same_src(Src a, Src b) { return a.kind == b.kind && a.a == b.a && a.b == b.b; }

/* Whether write i's value is a computed output of a segment that nothing
 * else of a call hands on (another write, a .grad, a user output, a tape
 * region), so that its bytes may move into the destination (take_storage). */
static int swappable(const CEntry *e, int i)
{
    Src v = e->w[i].val, d = e->w[i].dst; /* d resolves to v too, once staged */
    if (v.kind != SRC_SEG || e->rg || e->segs[v.a].alias[v.b].kind != SRC_NONE) return 0;
    for (int k = 0; k < e->nw; k++)
        if (k != i && (same_src(e->w[k].val, v) || same_src(e->w[k].val, d))) return 0;
    for (int k = 0; k < e->ngs; k++)
        if (same_src(e->gs[k].val, v) || same_src(e->gs[k].val, d)) return 0;
    for (int k = 0; k < e->nout; k++)
        if (same_src(e->outs[k], v) || same_src(e->outs[k], d)) return 0;
    return 1;
}

static int whole(const kn_tensor *t, size_t bytes)
{
    return t->st && !t->st->borrowed && t->offset == 0 && t->st->bytes == bytes && kn_is_contiguous(t);
}

/* A write without a copy: where dst and v each cover the whole of a storage,
 * and no handle but the program's own (which keeps it for the next run) and
 * v refers to v's, the two storages exchange their bytes. dst's storage (and
 * so every view of it, as after a copy) then holds v's values, and the
 * program overwrites dst's old ones at its next run.
 * A step's parameters and optimizer state move so (the copy was a quarter
 * of the mlp step's instructions at batch 1). 1 if done. */
static int take_storage(kn_ctx *ctx, kn_tensor *dst, kn_tensor *v)
{
    size_t bytes = (size_t)tensor_numel(dst->ndim, dst->shape) * kn_dtype_size((kn_dtype)dst->dtype);
    if (dst->dtype != v->dtype || dst->ndim != v->ndim || !whole(dst, bytes) || !whole(v, bytes) || dst->st == v->st ||
        v->st->refs != 1 + !(v->flags & TF_OWNED) || !bytes)
        return 0;
    void *d = dst->st->data;
    dst->st->data = v->st->data;
    v->st->data = d;
    storage_stamp(ctx, dst->st);
    storage_stamp(ctx, v->st);
    return 1;
}

/* Whether v shares its storage with an input, parameter or held tensor of the call. */
static int shares_storage(kn_fn *f, CEntry *e, kn_tensor *const *in, const kn_tensor *v)
{
    for (int k = 0; k < e->nin; k++)
        if (in[k]->st == v->st) return 1;
    for (int i = 0; f->o.params && i < f->o.nparams; i++)
        if (f->o.params[i] && f->o.params[i]->st == v->st) return 1;
    for (int i = 0; i < e->nheld; i++)
        if (e->held[i]->st == v->st) return 1;
    return 0;
}

/* Output k as the view of its root that eager's is (OutView), at the call's s0 where generic; NULL on error. */
static kn_tensor *out_view_of(kn_fn *f, CEntry *e, kn_tensor *const *in, int k)
{
    const OutView *v = &e->ov[k];
    kn_tensor *r = v->root.kind == SRC_IN ? in[v->root.a] : v->root.kind == SRC_PARAM ? f->o.params[v->root.a]
                                                                                       : e->held[v->root.a];
    int64_t shape[KN_MAX_DIMS], stride[KN_MAX_DIMS], off = v->offset, s0 = 0;
    memcpy(shape, v->shape, sizeof shape);
    memcpy(stride, v->stride, sizeof stride);
    const DynSeg *d = e->segs[0].dyn;
    if (d) {
        int err = 0;
        s0 = in[e->sym_in]->shape[e->sym_dim];
        for (int i = 0; i < v->ndim; i++) {
            if (v->gshape[i]) shape[i] = expr_eval(&d->ex, v->gshape[i], &s0, &err);
            if (v->gstride[i]) stride[i] = expr_eval(&d->ex, v->gstride[i], &s0, &err);
        }
        if (v->goffset) off = expr_eval(&d->ex, v->goffset, &s0, &err);
        if (err) return kn_err(f->ctx, KN_EINVAL, "%s: out[%d]'s view at s0 = %lld", f->name, k, (long long)s0);
    }
    return tensor_view(f->ctx, r, v->ndim, shape, stride, r->offset + off);
}

enum { RUN_OK = 0, RUN_MISMATCH = -1 };

/* Runs segments first..nsegs-1 of e (earlier ones' values are in vals),
 * commits writes and grads, hands out outputs. Returns RUN_OK, RUN_MISMATCH
 * (a break value differs: nothing was changed) or a status. */
static int run_entry(kn_fn *f, CEntry *e, kn_tensor *const *in, kn_tensor **out, int first, kn_tensor ***vals,
                     int commit_each)
{
    kn_ctx *ctx = f->ctx;
    kn_tensor *staged[512] = {0};
    Binding b = {in, vals, staged, NULL, NULL};
    int s = KN_OK;
    if (e->nw > 512) return kn_errs(ctx, KN_EUNSUPPORTED, "%s: more than 512 writes", f->name);
    for (int k = 0; k < e->nout; k++) out[k] = NULL; /* out[] is output only: a failure frees what is set */
    for (int j = first; j <= e->nsegs && !s; j++) {
        /* values the body read before segment j: a trace that runs the rest from segment `first`
         * has just read those before it; a call (first 0) checks those before segment 0 too, a
         * read of an input or a parameter before any op */
        for (int i = 0; i < e->nvg && !s && (j > first || first == 0); i++) {
            ValueGuard *g = &e->vg[i];
            if (g->at != j) continue;
            size_t n;
            kn_tensor *t = resolve(f, e, &b, g->val);
            void *p = t ? read_bytes(ctx, t, &n) : NULL;
            if (!p) s = ctx->status ? ctx->status : kn_errs(ctx, KN_EINVAL, "%s: a guarded value is gone", f->name);
            else if (n != g->n || memcmp(p, g->bytes, n) != 0) s = RUN_MISMATCH, e->ran = j;
            if (p) kn_dealloc(ctx, p, n ? n : 1);
        }
        if (j == e->nsegs || s) break;
        Seg *sg = &e->segs[j];
        if (!vals[j] && !(vals[j] = kn_alloc(ctx, (size_t)(sg->nout + 1) * sizeof **vals)))
            return kn_errs(ctx, KN_ENOMEM, "out of memory running %s", f->name);
        if ((s = run_seg(f, e, sg, &b, vals[j]))) break;
        for (int i = 0; i < e->nw; i++)
            if (e->w[i].seg == j) staged[i] = resolve(f, e, &b, e->w[i].val);
    }
    /* commit: writes, then grads */
    Graph *tr = ctx->trace;
    TraceHooks *cap = ctx->capture;
    ctx->trace = NULL;
    ctx->capture = NULL;
    for (int i = 0; i < e->nw && s == KN_OK; i++) {
        if (!staged[i] || (commit_each && e->w[i].seg < first)) continue;
        kn_tensor *dst = e->w[i].dst.kind == SRC_PARAM ? f->o.params[e->w[i].dst.a] : e->held[e->w[i].dst.a];
        int later = 0; /* only the last write to a tensor counts */
        for (int k = i + 1; k < e->nw && !later; k++)
            later = e->w[k].dst.kind == e->w[i].dst.kind && e->w[k].dst.a == e->w[i].dst.a;
        if (!later && !(swappable(e, i) && take_storage(ctx, dst, staged[i]))) s = tensor_assign(ctx, dst, staged[i]);
    }
    for (int i = 0; i < e->ngs && s == KN_OK; i++) {
        kn_tensor *p = f->o.params[e->gs[i].param];
        kn_tensor *v = e->gs[i].val.kind == SRC_NONE ? NULL : resolve(f, e, &b, e->gs[i].val);
        if (v && p->grad) { /* the leaf's .grad handle stays; it now shows v */
            tensor_rebind(ctx, p->grad, v);
            continue;
        }
        kn_tensor *ng = v ? kn_keep(ctx, tensor_view(ctx, v, v->ndim, v->shape, v->stride, v->offset)) : NULL;
        if (v && !ng) {
            s = ctx->status;
            break;
        }
        if (p->grad) {
            p->grad->flags &= (uint8_t)~TF_GRAD;
            kn_free(ctx, p->grad);
        }
        p->grad = ng;
        if (ng) ng->flags |= TF_GRAD;
    }
    for (int k = 0; k < e->nout && s == KN_OK; k++) {
        Src o = e->outs[k]; /* a parameter or held tensor itself: as it is now, its writes landed */
        Src r = o.kind == SRC_PARAM ? o : e->ov[k].root; /* eager's is the leaf: a view of it on the tape */
        if (e->leaf[k] && (r.kind == SRC_IN || r.kind == SRC_PARAM)) {
            kn_tensor *x = r.kind == SRC_IN ? in[r.a] : f->o.params[r.a];
            Params rp;
            memset(&rp, 0, sizeof rp);
            rp.n = x->ndim;
            memcpy(rp.i, x->shape, (size_t)x->ndim * sizeof *x->shape);
            if (!(out[k] = prim(ctx, OP_RESHAPE, &x, &rp))) s = ctx->status;
            continue;
        }
        if (e->ov[k].root.kind != SRC_NONE) {
            if (!(out[k] = out_view_of(f, e, in, k))) s = ctx->status;
            continue;
        }
        kn_tensor *v = o.kind == SRC_PARAM ? f->o.params[o.a] : o.kind == SRC_HELD ? e->held[o.a] : resolve(f, e, &b, o);
        if (v && (v->flags & TF_OWNED) && !e->rg) { /* reduce-overhead: the program's own handle */
            out[k] = v;
            continue;
        }
        if (v && e->fresh[k] && shares_storage(f, e, in, v)) { /* the interpreter's view of an input */
            Params cp;
            memset(&cp, 0, sizeof cp);
            cp.dtype = v->dtype;
            if (!(out[k] = prim(ctx, OP_CAST, &v, &cp))) s = ctx->status;
            continue;
        }
        out[k] = v ? tensor_view(ctx, v, v->ndim, v->shape, v->stride, v->offset) : NULL;
        if (!out[k]) s = ctx->status ? ctx->status : kn_errs(ctx, KN_EINVAL, "%s: output %d has no value", f->name, k);
    }
    if (s == RUN_MISMATCH) {
        ctx->trace = tr;
        ctx->capture = cap;
        return s;
    }
    if (s == KN_OK && e->rg) { /* the tape region that runs the compiled backward */
        Region *rg = e->rg;
        RegionCall *rc = kn_alloc(ctx, sizeof *rc);
        int last = e->nsegs - 1; /* the region's forward is the last segment (earlier ones end at breaks) */
        Seg *fw = &e->segs[last];
        if (rc) {
            memset(rc, 0, sizeof *rc);
            rc->f = f;
            rc->e = e;
            rc->s0 = e->sym_in >= 0 ? in[e->sym_in]->shape[e->sym_dim] : 0;
            rc->nsaved = fw->nout;
            rc->saved = kn_alloc(ctx, (size_t)(fw->nout + 1) * sizeof *rc->saved);
            rc->src = kn_alloc(ctx, (size_t)(rg->bwd.nin + 1) * sizeof *rc->src);
            e->refs++;
        }
        if (!rc || !rc->saved || !rc->src) s = kn_errs(ctx, KN_ENOMEM, "out of memory for a compiled backward");
        for (int m = 0; rc && rc->saved && m < fw->nout; m++) rc->saved[m] = NULL;
        for (int k = 0; rc && rc->src && k < rg->bwd.nin; k++) rc->src[k] = NULL;
        for (int m = 0; !s && m < fw->nout; m++)
            if (!(rc->saved[m] = tensor_hold(ctx, vals[last][m]))) s = ctx->status;
        for (int k = 0; !s && k < rg->bwd.nin; k++) {
            Src sk = rg->bwd.in[k];
            if (sk.kind == SRC_NONE || sk.kind == SRC_COT) continue;
            kn_tensor *v = resolve(f, e, &b, sk);
            if (!v || !(rc->src[k] = tensor_hold(ctx, v))) s = ctx->status ? ctx->status : KN_EINVAL;
        }
        kn_tensor *srcs[MAX_VALS];
        for (int i = 0; !s && i < rg->nsrc; i++) srcs[i] = resolve(f, e, &b, rg->src[i]);
        if (!s) {
            s = autodiff_region(ctx, 1, &out[rg->out], rg->nsrc, srcs, region_vjp, region_release, rc);
        } else if (rc && rc->saved && rc->src) {
            region_release(ctx, rc);
        } else if (rc) {
            kn_dealloc(ctx, rc->saved, (size_t)(fw->nout + 1) * sizeof *rc->saved);
            kn_dealloc(ctx, rc->src, (size_t)(rg->bwd.nin + 1) * sizeof *rc->src);
            kn_dealloc(ctx, rc, sizeof *rc);
            e->refs--;
        }
    }
    ctx->trace = tr;
    ctx->capture = cap;
    if (s != KN_OK)
        for (int k = 0; k < e->nout; k++)
            if (out[k]) kn_free(ctx, out[k]), out[k] = NULL;
    return s;
}

/* ---- guards ---- */

/* 1 if every guard of e holds; else 0 and the first failure in why. */
static int guards_pass(kn_fn *f, CEntry *e, kn_tensor *const *in, int nin, int nout, char *why, size_t cap)
{
    kn_ctx *ctx = f->ctx;
    if (e->nin != nin || e->nout != nout) {
        snprintf(why, cap, "called with %d inputs and %d outputs, compiled for %d and %d", nin, nout, e->nin, e->nout);
        return 0;
    }
    if (e->grad_mode != ctx->grad_enabled) {
        snprintf(why, cap, "grad mode: expected %s", e->grad_mode ? "enabled" : "disabled");
        return 0;
    }
    int64_t s0 = -1; /* generic entries: s0's size at this call */
    for (int k = 0; k < nin; k++) {
        const InGuard *g = &e->ing[k];
        const kn_tensor *t = in[k];
        if (t->dtype != g->dtype) {
            snprintf(why, cap, "in[%d] dtype: expected %s, got %s", k, kn_dtype_name((kn_dtype)g->dtype),
                     kn_dtype_name((kn_dtype)t->dtype));
            return 0;
        }
        if (t->ndim != g->ndim) {
            snprintf(why, cap, "in[%d] rank: expected %d, got %d", k, g->ndim, t->ndim);
            return 0;
        }
        for (int d = 0; d < t->ndim; d++) {
            if (g->sym[d] && s0 < 0 && t->shape[d] < 2) { /* s0 is the first symbolic dim */
                snprintf(why, cap, "in[%d] dim %d: expected a size >= 2 (s0), got %lld", k, d, (long long)t->shape[d]);
                return 0;
            }
            if (g->sym[d] && s0 < 0 && t->shape[d] < e->s0_floor) {
                snprintf(why, cap, "in[%d] dim %d: expected a size >= %lld (s0: the generic graph holds from it), "
                         "got %lld", k, d, (long long)e->s0_floor, (long long)t->shape[d]);
                return 0;
            }
            if (g->sym[d] && s0 < 0 && e->s0_limit && t->shape[d] > e->s0_limit) {
                snprintf(why, cap, "in[%d] dim %d: expected a size <= %lld (s0: the generic graph holds up to it), "
                         "got %lld", k, d, (long long)e->s0_limit, (long long)t->shape[d]);
                return 0;
            }
            if (g->sym[d] && s0 < 0) s0 = t->shape[d];
            else if (g->sym[d] && t->shape[d] != s0) {
                snprintf(why, cap, "in[%d] dim %d: expected s0 = %lld (in[%d] dim %d), got %lld", k, d, (long long)s0,
                         e->sym_in, e->sym_dim, (long long)t->shape[d]);
                return 0;
            } else if (!g->sym[d] && t->shape[d] != g->shape[d]) {
                snprintf(why, cap, "in[%d] dim %d: expected %lld, got %lld", k, d, (long long)g->shape[d],
                         (long long)t->shape[d]);
                return 0;
            }
        }
        if ((kn_is_contiguous(t) != 0) != g->contig) {
            snprintf(why, cap, "in[%d]: expected a %scontiguous tensor", k, g->contig ? "" : "non-");
            return 0;
        }
        int64_t st[KN_MAX_DIMS]; /* a generic input's: laid out as the traced one, at this size */
        if (!g->contig && !scaled_strides(g->ndim, g->shape, g->stride, t->shape, st))
            memcpy(st, g->stride, sizeof st);
        int same = 1; /* a dim of size 1 may have any stride: no view of it depends on it */
        for (int d = 0; d < t->ndim && !g->contig; d++) same &= t->shape[d] == 1 || t->stride[d] == st[d];
        if (!same) {
            snprintf(why, cap, "in[%d]: expected strides laid out as those it was traced with", k);
            return 0;
        }
        if (((t->flags & TF_REQGRAD) != 0 && ctx->grad_enabled) != g->reqgrad) {
            snprintf(why, cap, "in[%d] requires_grad: expected %s", k, g->reqgrad ? "true" : "false");
            return 0;
        }
    }
    for (int i = 0; i < e->npg; i++) {
        const ParamGuard *g = &e->pg[i];
        const kn_tensor *p = g->idx < f->o.nparams ? f->o.params[g->idx] : NULL;
        if (p != g->t) {
            snprintf(why, cap, "params[%d]: a different tensor than when compiled", g->idx);
            return 0;
        }
        if (((p->flags & TF_REQGRAD) != 0) != g->reqgrad) {
            snprintf(why, cap, "params[%d] requires_grad: expected %s", g->idx, g->reqgrad ? "true" : "false");
            return 0;
        }
        if (g->grad >= 0 && (p->grad != NULL) != g->grad) {
            snprintf(why, cap, "params[%d].grad: expected %s", g->idx, g->grad ? "a gradient" : "none");
            return 0;
        }
    }
    for (int i = 0; i < e->nfg; i++)
        if (*e->fg[i].p != e->fg[i].v) {
            snprintf(why, cap, "%s: expected %d, got %d", e->fg[i].what, e->fg[i].v, *e->fg[i].p);
            return 0;
        }
    return 1;
}

static void log_guards(kn_fn *f, CEntry *e)
{
    kn_ctx *ctx = f->ctx;
    if (!log_on(ctx, LOG_GUARDS)) return;
    log_line(ctx, LOG_GUARDS, "%s: entry %d: grad mode %s, %d inputs, %d outputs", f->name, f->nentries + 1,
             e->grad_mode ? "on" : "off", e->nin, e->nout);
    for (int k = 0; k < e->nin; k++) {
        char b[160] = "(";
        size_t len = 1;
        for (int d = 0; d < e->ing[k].ndim; d++) /* "(s0>=2, 784)" */
            len = e->ing[k].sym[d] ? kn_appendf(b, sizeof b, len, "%ss0>=2", d ? ", " : "")
                                   : kn_appendf(b, sizeof b, len, "%s%lld", d ? ", " : "", (long long)e->ing[k].shape[d]);
        kn_appendf(b, sizeof b, len, ")");
        log_line(ctx, LOG_GUARDS, "  in[%d]: %s %s%s%s", k, kn_dtype_name((kn_dtype)e->ing[k].dtype),
                 b, e->ing[k].contig ? ", contiguous" : ", strided",
                 e->ing[k].reqgrad ? ", requires_grad" : "");
    }
    for (int i = 0; i < e->npg; i++)
        log_line(ctx, LOG_GUARDS, "  params[%d]: the same tensor%s%s", e->pg[i].idx,
                 e->pg[i].reqgrad ? ", requires_grad" : "",
                 e->pg[i].grad < 0 ? "" : e->pg[i].grad ? ", has a grad" : ", no grad");
    for (int i = 0; i < e->nfg; i++) log_line(ctx, LOG_GUARDS, "  %s == %d", e->fg[i].what, e->fg[i].v);
    for (int i = 0; i < e->nvg; i++)
        log_line(ctx, LOG_GUARDS, "  the value read by %s (%zu bytes), before graph %d", e->vg[i].op, e->vg[i].n,
                 e->vg[i].at + 1);
}

/* ---- the hooks the eager API calls while tracing ---- */

static Tracked *track(Capture *c, kn_tensor *leaf, int read_old)
{
    kn_fn *f = c->f;
    for (int i = 0; i < c->ntr; i++)
        if (c->tr[i].leaf == leaf) return &c->tr[i];
    int idx = -1;
    for (int i = 0; f->o.params && i < f->o.nparams && idx < 0; i++)
        if (f->o.params[i] == leaf) idx = i;
    if (idx < 0) {
        kn_err(f->ctx, KN_EUNSUPPORTED, "%s: the body changes the .grad of a tensor that is not in "
               "kn_compile_opts.params; list every parameter there", f->name);
        return NULL;
    }
    if (!APPEND(&c->e->arena, c->tr, c->ntr)) return kn_err(f->ctx, KN_ENOMEM, "out of memory tracing");
    Tracked *t = &c->tr[c->ntr++];
    t->leaf = leaf;
    t->param = idx;
    t->entry = leaf->grad;
    CEntry *e = c->e;
    for (int i = 0; i < e->npg; i++)
        if (e->pg[i].idx == idx && e->pg[i].grad < 0 && read_old) e->pg[i].grad = leaf->grad != NULL;
    if (read_old) { /* the graph assumed whether there was a grad */
        int found = 0;
        for (int i = 0; i < e->npg && !found; i++) found = e->pg[i].idx == idx;
        if (!found && APPEND(&e->arena, e->pg, e->npg))
            e->pg[e->npg++] = (ParamGuard){idx, leaf, (uint8_t)((leaf->flags & TF_REQGRAD) != 0),
                                           (int8_t)(leaf->grad != NULL)};
    }
    return t;
}

static kn_status capture_set_grad(kn_ctx *ctx, kn_tensor *leaf, kn_tensor *g, int read_old)
{
    Capture *c = cap_of(ctx);
    Tracked *t = track(c, leaf, read_old);
    if (!t) return ctx->status;
    if (read_old) c->backward = 1;
    kn_tensor *cur = leaf->grad;
    if (cur && cur != t->entry) {
        cur->flags &= (uint8_t)~TF_GRAD;
        kn_free(ctx, cur);
    }
    leaf->grad = g ? kn_keep(ctx, g) : NULL;
    if (g) g->flags |= TF_GRAD;
    return KN_OK;
}

static uint32_t capture_tape_start(const kn_ctx *ctx) { return cap_of(ctx)->tape_start; }

static void capture_guard_flag(kn_ctx *ctx, const int *flag, const char *what)
{
    CEntry *e = cap_of(ctx)->e;
    for (int i = 0; i < e->nfg; i++)
        if (e->fg[i].p == flag) return;
    if (APPEND(&e->arena, e->fg, e->nfg)) e->fg[e->nfg++] = (FlagGuard){flag, *flag, what};
}

static kn_status capture_write(kn_ctx *ctx, kn_tensor *dst, kn_tensor *src)
{
    Capture *c = cap_of(ctx);
    if (!kn_is_contiguous(dst) || dst->offset != 0 || (size_t)kn_numel(dst) * kn_dtype_size(kn_dtype_of(dst)) != dst->st->bytes)
        return kn_errs(ctx, KN_EUNSUPPORTED, "%s: the body writes into a view; kn_compile replays writes into whole "
                       "tensors only", c->f->name);
    Params p;
    memset(&p, 0, sizeof p);
    p.dtype = dst->dtype;
    kn_tensor *v = prim(ctx, OP_CAST, &src, &p); /* a traced node in dst's dtype */
    if (!v) return ctx->status;
    if (!APPEND(&c->e->arena, c->pw, c->npw)) return kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
    c->pw[c->npw++] = (PendingWrite){dst, v->node, ctx->trace->serial};
    dst->node = v->node; /* later reads in this graph see the new value */
    dst->trace_serial = ctx->trace->serial;
    return KN_OK;
}

/* ---- finishing a segment ---- */

/* ---- views: what eager's outputs share storage with ----
 * A traced tensor keeps the layout eager's would have (prim.c trace_layout)
 * and, where eager's would be a view, the root it views. A user output that
 * is a view of a root with an identity of its own (an input, a parameter, a
 * held tensor) is handed out as that view of it (OutView), made after the
 * call's writes land: eager's shows what the body's optimizer step wrote,
 * and so does kn_call's. An output that eager makes fresh is never a view of
 * such a tensor (a copy where the interpreter's would be). */

static int is_traced(const kn_ctx *ctx, const kn_tensor *t);

static Root *root_add(Capture *c, kn_tensor *t, kn_tensor *hold, int in, uint8_t unknown)
{
    if (!APPEND(&c->e->arena, c->roots, c->nroots)) return kn_err(c->f->ctx, KN_ENOMEM, "out of memory tracing");
    Root *r = &c->roots[c->nroots++];
    *r = (Root){t, hold, in, t->offset, unknown};
    return r;
}

static int capture_root(kn_ctx *ctx, kn_tensor *x)
{
    Capture *c = cap_of(ctx);
    if (!c) return 0;
    if (stand_of(c, x) >= 0) return 0; /* made concrete at a break: views of it stay in the call's values */
    for (int i = 0; i < c->nroots; i++)
        if (c->roots[i].t == x && c->roots[i].hold && c->roots[i].hold->st == x->st) return i + 1;
    kn_tensor *h = tensor_hold(ctx, x);
    if (!h || !root_add(c, x, h, -1, 0)) {
        tensor_unhold(ctx, h);
        return 0;
    }
    return c->nroots;
}

static int capture_layout_known(const kn_ctx *ctx, const kn_tensor *x)
{
    const Capture *c = cap_of(ctx);
    return !c || x->st || x->view_root <= 0 || x->view_root > c->nroots || !c->roots[x->view_root - 1].unknown;
}

/* Output k's view (or not) of a root: into e->ov[k] and e->fresh[k]. */
static kn_status out_view(Capture *c, int k, kn_tensor *o)
{
    kn_ctx *ctx = c->f->ctx;
    CEntry *e = c->e;
    if (!is_traced(ctx, o)) return KN_OK;
    if (o->view_root <= 0 || o->view_root > c->nroots) {
        e->fresh[k] = 1;
        return KN_OK;
    }
    Root *r = &c->roots[o->view_root - 1];
    if (r->unknown)
        return kn_errs(ctx, KN_EUNSUPPORTED, "%s: out[%d] is a view of a non-contiguous input whose strides change "
                       "with the dynamic size", c->f->name, k);
    Src src = {SRC_NONE, 0, 0};
    if (r->in >= 0) src = (Src){SRC_IN, r->in, 0};
    for (int i = 0; c->f->o.params && i < c->f->o.nparams && src.kind == SRC_NONE; i++)
        if (c->f->o.params[i] == r->t) src = (Src){SRC_PARAM, i, 0};
    for (int i = 0; i < c->nknown && src.kind == SRC_NONE; i++)
        if (c->known[i].t == r->t) return KN_OK; /* a value of an earlier graph: its own */
    if (src.kind == SRC_NONE && (src = held_src(c, r->hold)).kind == SRC_NONE) return ctx->status;
    OutView *v = &e->ov[k];
    v->root = src;
    v->ndim = o->ndim;
    memcpy(v->shape, o->shape, sizeof v->shape);
    memcpy(v->stride, o->stride, sizeof v->stride);
    v->offset = o->offset - r->offset;
    return KN_OK;
}

static int add_out(uint32_t *outs, int *n, int cap, uint32_t node)
{
    for (int i = 0; i < *n; i++)
        if (outs[i] == node) return i;
    if (*n == cap) return -1;
    outs[*n] = node;
    return (*n)++;
}

static int is_traced(const kn_ctx *ctx, const kn_tensor *t)
{
    return t && !t->st && t->node && t->trace_serial == ctx->trace->serial;
}

/* An input or a parameter itself that requires grad: eager hands out the leaf, whose .grad a later
 * backward fills. */
static int is_leaf(const Capture *c, const kn_tensor *t)
{
    int self = 0;
    for (int k = 0; k < c->e->nin; k++) self |= t == c->stand[k];
    for (int i = 0; c->f->o.params && i < c->f->o.nparams; i++) self |= t == c->f->o.params[i];
    return self && c->f->ctx->grad_enabled && (t->flags & TF_REQGRAD);
}

/* The value of t (traced or concrete) as a source for the entry, with the
 * segment's output list extended as needed. */
static int value_src(Capture *c, kn_tensor *t, uint32_t *outs, int *nouts, int cap, Src *src)
{
    kn_ctx *ctx = c->f->ctx;
    if (is_traced(ctx, t)) {
        int m = add_out(outs, nouts, cap, t->node);
        if (m < 0) return kn_errs(ctx, KN_EUNSUPPORTED, "%s: more than %d values leave a graph", c->f->name, cap);
        *src = (Src){SRC_SEG, c->seg, m};
        return KN_OK;
    }
    int k = stand_of(c, t);
    if (k >= 0) return *src = (Src){SRC_IN, k, 0}, KN_OK;
    for (int i = 0; i < c->nknown; i++) /* the value itself, or another handle of it (kn_detach's) */
        if ((c->known[i].t == t || tensor_same_layout(c->known[i].t, t)) && c->known[i].hold->st == t->st)
            return *src = c->known[i].src, KN_OK;
    for (int i = 0; c->f->o.params && i < c->f->o.nparams; i++)
        if (c->f->o.params[i] == t) return *src = (Src){SRC_PARAM, i, 0}, KN_OK;
    if (!t->st) return kn_errs(ctx, KN_EINVAL, "%s: an output comes from an earlier trace", c->f->name);
    *src = held_src(c, t); /* a concrete tensor the graph never read */
    return src->kind == SRC_NONE ? ctx->status : KN_OK;
}

static kn_status region_build(Capture *c, Graph *g, kn_tensor *o, uint32_t *outs, int *nouts, int cap, int dout,
                              Seg *fwd);
static void materialize_stand(Capture *c, int k);

/* ---- backward across a graph break ----
 * A break with grad enabled, in a graph whose ops went on the tape, ends a
 * region as AOTAutograd would end one: the joint graph of the live values
 * that require grad (each with a cotangent input) against what they depend
 * on (parameters, inputs, values of earlier graphs), partitioned; the
 * forward becomes the segment, which also hands out the saved values, and
 * the graph's tape entries are replaced by one region entry for those
 * values. A kn_backward later in the body reaches the region while tracing
 * and copies the region's backward graph into the graph being traced, its
 * saved values bound to the segment's outputs: a whole step with a value
 * read before its backward (a loss logged with kn_item) compiles into a
 * forward segment and a segment with the backward and what follows. Such a
 * region lives only while its trace does (the trace drops the tape it made):
 * a function whose output still requires grad after a break (a compiled
 * forward whose backward runs later) copies the regions' backward graphs
 * into the backward of its last graph the same way (region_build). */
typedef struct {
    Capture *c;
    uint32_t serial;   /* the graph it was made in: it is copied only into later graphs of the same trace */
    Graph *g;          /* the backward: inputs are saved values, cotangents or tensors the forward read */
    Src *in;           /* per input of g: where its value comes from (SRC_SEG: a saved value) */
    int *cot;          /* per input of g: which output's cotangent (-1: none) */
    int nout, nl;
    kn_tensor **leaf;  /* the sources: graph inputs that require grad */
    uint32_t *gout;    /* per source: the node of g that is its gradient (0: none) */
    uint32_t *from;    /* per input of g: the node of the traced graph behind it */
} BreakRegion;

static void break_free(kn_ctx *ctx, void *user)
{
    BreakRegion *r = user;
    if (r->g) graph_free(r->g);
    kn_dealloc(ctx, r, sizeof *r);
}

/* The tensor of the trace that source_of maps to s (everything it names lives as long as the trace). */
static kn_tensor *trace_value(Capture *c, Src s)
{
    switch (s.kind) {
    case SRC_IN: return c->stand[s.a];
    case SRC_PARAM: return c->f->o.params[s.a];
    case SRC_HELD: return c->e->held[s.a];
    case SRC_SEG: return c->vals[s.a][s.b];
    case SRC_GRAD:
        for (int i = 0; i < c->ntr; i++)
            if (c->tr[i].param == s.a) return c->tr[i].entry;
        return NULL;
    default: return NULL;
    }
}

/* The region's backward, copied node by node into the trace. An output no gradient reached has no
 * cotangent (not a zero one): as eager's backward skips what only it would feed, every node that reads
 * such a value is left out too, but for a sum of gradients (add), which is its other operand. So a
 * gradient is never 0 * inf where eager has none. */
static kn_status break_vjp(kn_ctx *ctx, void *user, kn_tensor *const *gs, kn_tensor **grads)
{
    BreakRegion *r = user;
    if (cap_of(ctx) != r->c || !ctx->trace || ctx->trace->serial == r->serial)
        return kn_errs(ctx, KN_EUNSUPPORTED, "backward through a graph break of a compiled function runs only "
                       "inside its body (call kn_backward in the body, or read no value before the output)");
    size_t bytes = (size_t)r->g->n * sizeof(kn_tensor *);
    kn_tensor **v = kn_alloc_zeroed(ctx, bytes); /* NULL: absent */
    if (!v) return kn_errs(ctx, KN_ENOMEM, "out of memory for a backward");
    kn_status s = KN_OK;
    for (uint32_t i = 1; i < r->g->n && !s; i++) {
        const Node *n = &r->g->nodes[i];
        kn_tensor *src[3] = {NULL, NULL, NULL};
        int absent = 0;
        if (n->op == OP_INPUT) {
            int k = (int)n->p.i[0], o = r->cot[k];
            v[i] = o < 0 ? trace_value(r->c, r->in[k]) : gs[o];
            if (!v[i] && o >= 0) continue; /* absent */
        } else {
            for (int j = 0; j < n->nsrc; j++) absent += !(src[j] = v[n->src[j]]);
            if (absent && n->op == OP_ADD && absent < 2) v[i] = src[0] ? src[0] : src[1];
            else if (absent) continue;
            else v[i] = prim(ctx, (Op)n->op, src, &n->p);
        }
        if (!v[i]) s = ctx->status ? ctx->status : kn_errs(ctx, KN_EINVAL, "no value in a backward");
    }
    for (int j = 0; j < r->nl && !s; j++) grads[j] = r->gout[j] ? v[r->gout[j]] : NULL;
    kn_dealloc(ctx, v, bytes);
    return s;
}

/* At a break: if the graph's ops are on the tape and live values (mat) require grad, builds the joint
 * graph and its partition; outs gets the saved values, *made the region (its tensors bound by break_bind
 * once the segment has run), or NULL where none is needed. */
static kn_status break_region(Capture *c, Graph *g, kn_tensor *const *mat, int nmat, uint32_t *outs, int *nouts,
                              BreakRegion **made)
{
    kn_ctx *ctx = c->f->ctx;
    *made = NULL;
    kn_tensor *d[MAX_VALS], *grads[MAX_VALS];
    int nd = 0, nl = 0;
    if (!ctx->grad_enabled || autodiff_tape_len(ctx) <= c->seg_tape) return KN_OK;
    for (int i = 0; i < nmat; i++)
        if (mat[i]->flags & TF_REQGRAD) d[nd++] = mat[i];
    if (!nd) return KN_OK;
    BreakRegion *r = kn_alloc_zeroed(ctx, sizeof *r);
    Arena *a = &c->e->arena;
    if (!r || !(r->leaf = arena_alloc(a, ((size_t)g->ninputs + 1) * sizeof *r->leaf))) {
        kn_dealloc(ctx, r, r ? sizeof *r : 0);
        return kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
    }
    for (uint32_t k = 0; k < g->ninputs && nl < MAX_VALS; k++) /* every graph input that requires grad */
        if (g->input_vals[k] && (g->input_vals[k]->flags & TF_REQGRAD)) r->leaf[nl++] = g->input_vals[k];
    r->c = c, r->serial = g->serial, r->nout = nd, r->nl = nl;
    r->gout = arena_alloc(a, (size_t)(nl + 1) * sizeof *r->gout);
    uint32_t cots[MAX_VALS], bout[MAX_VALS];
    kn_status s = r->gout ? KN_OK : kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
    kn_scope_begin(ctx);
    kn_tensor *loss = NULL;
    for (int k = 0; k < nd && !s; k++) { /* loss = the sum over k of sum(d[k] * cot[k]) */
        Node cn;
        memset(&cn, 0, sizeof cn);
        cn.op = OP_INPUT;
        cn.dtype = d[k]->dtype;
        cn.ndim = d[k]->ndim;
        memcpy(cn.shape, d[k]->shape, d[k]->ndim * sizeof(Dim));
        cn.p.i[0] = g->ninputs;
        cn.p.n = 1;
        if (!(cots[k] = graph_add(g, &cn))) s = kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
        g->ninputs++; /* no input_vals entry: the cotangents are known by node */
        kn_tensor *cot = s ? NULL : tensor_symbolic(ctx, (kn_dtype)cn.dtype, cn.ndim, cn.shape, cots[k]);
        if (cot) cot->trace_serial = g->serial;
        kn_tensor *term = kn_sum(ctx, kn_mul(ctx, d[k], cot), NULL, 0, 0);
        loss = !term ? NULL : loss ? kn_add(ctx, loss, term) : term;
        if (!loss) s = ctx->status;
    }
    if (!s) s = autodiff_grads_since(ctx, loss, c->seg_tape, nl, r->leaf, grads);
    int nb = 0;
    for (int j = 0; j < nl && !s; j++) {
        r->gout[j] = 0;
        if (!grads[j]) continue;
        if (!is_traced(ctx, grads[j]))
            s = kn_errs(ctx, KN_EUNSUPPORTED, "%s: a gradient that is not computed by the graph", c->f->name);
        else if (add_out(bout, &nb, MAX_VALS, grads[j]->node) < 0)
            s = kn_errs(ctx, KN_EUNSUPPORTED, "%s: too many gradients", c->f->name);
        else r->gout[j] = grads[j]->node; /* a node of g for now; of r->g once sliced */
    }
    kn_scope_end(ctx);
    Arena pa;
    arena_init(&pa, ctx);
    Partition part;
    if (!s) s = partition_joint(ctx, g, outs, *nouts, bout, nb, 0, &pa, &part);
    for (int i = 0; !s && i < part.nsaved; i++)
        if (add_out(outs, nouts, MAX_VALS, part.saved[i]) < 0)
            s = kn_errs(ctx, KN_EUNSUPPORTED, "%s: too many saved values", c->f->name);
    arena_free(&pa);
    uint8_t *cut = s ? NULL : kn_alloc_zeroed(ctx, g->n);
    uint32_t *map = s ? NULL : kn_alloc(ctx, g->n * sizeof *map), from[MAX_VALS];
    if (!s && (!cut || !map)) s = kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
    int nfrom = 0;
    for (int m = 0; !s && m < *nouts; m++) cut[outs[m]] = 1; /* the backward reads the forward's outputs */
    if (!s && !(r->g = slice_graph(ctx, g, bout, nb, cut, map, from, &nfrom, MAX_VALS))) s = ctx->status;
    if (!s) {
        r->in = arena_alloc(a, ((size_t)nfrom + 1) * sizeof *r->in);
        r->cot = arena_alloc(a, ((size_t)nfrom + 1) * sizeof *r->cot);
        r->from = arena_alloc(a, ((size_t)nfrom + 1) * sizeof *r->from);
        if (!r->in || !r->cot || !r->from) s = kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
    }
    for (int k = 0; !s && k < nfrom; k++) {
        r->from[k] = from[k];
        r->cot[k] = -1;
        for (int o = 0; o < nd; o++)
            if (from[k] == cots[o]) r->cot[k] = o;
    }
    for (int j = 0; !s && j < nl; j++) r->gout[j] = r->gout[j] ? map[r->gout[j]] : 0;
    if (cut) kn_dealloc(ctx, cut, g->n);
    if (map) kn_dealloc(ctx, map, g->n * sizeof *map);
    if (s) {
        break_free(ctx, r);
        return s;
    }
    *made = r;
    return KN_OK;
}

/* Once segment seg has run (v: its outputs, outs their nodes in g; the live values and stand-ins concrete):
 * the backward's inputs bound, saved values known as the segment's outputs, the graph's tape entries
 * replaced by the region. */
static kn_status break_bind(Capture *c, BreakRegion *r, const Graph *g, const uint32_t *outs, int nouts,
                            kn_tensor *const *mat, int nmat)
{
    kn_ctx *ctx = c->f->ctx;
    kn_tensor *d[MAX_VALS];
    int nd = 0;
    kn_status s = KN_OK;
    for (uint32_t k = 0; k < r->g->ninputs && !s; k++) {
        uint32_t node = r->from[k];
        if (r->cot[k] >= 0) continue;
        if (g->nodes[node].op == OP_INPUT) {
            r->in[k] = source_of(c, g, node, 0);
            s = ctx->status;
            continue;
        }
        int m = 0;
        while (m < nouts && outs[m] != node) m++;
        KN_ASSERT(m < nouts);
        r->in[k] = (Src){SRC_SEG, c->seg, m};
        kn_tensor *t = c->vals[c->seg][m]; /* known, so that the graph reading it reads the segment's output */
        if (!APPEND(&c->e->arena, c->known, c->nknown)) s = kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
        else if (!(c->known[c->nknown].hold = tensor_hold(ctx, t))) s = ctx->status;
        else c->known[c->nknown].t = t, c->known[c->nknown++].src = r->in[k];
    }
    for (int i = 0; i < nmat; i++)
        if (mat[i]->flags & TF_REQGRAD) d[nd++] = mat[i];
    autodiff_truncate(ctx, c->seg_tape);
    if (s) break_free(ctx, r);
    else s = autodiff_region(ctx, nd, d, r->nl, r->leaf, break_vjp, break_free, r);
    c->seg_tape = autodiff_tape_len(ctx);
    return s;
}

/* Ends the current graph: at a break (t: the tensor read) or at the end of
 * the body (out: its outputs). Compiles the segment and, at a break, runs it
 * and makes every live traced tensor concrete. */
/* A value an earlier graph of this trace computed (concrete since its break) whose gradient the tape
 * reaches: an output that is one differentiates through that graph's region */
static int earlier_value(const Capture *c, const kn_tensor *t)
{
    return t->st && t->tape_seq > c->tape_start && t->tape_epoch == c->f->ctx->tape_epoch;
}

static kn_status finish(Capture *c, kn_tensor *brk, int *brk_m, kn_tensor **out, int nout)
{
    kn_fn *f = c->f;
    kn_ctx *ctx = f->ctx;
    CEntry *e = c->e;
    Graph *g = ctx->trace;
    uint32_t outs[MAX_VALS];
    int n = 0, cap = MAX_VALS;
    kn_status s = KN_OK;
    kn_tensor *mat[MAX_VALS];
    int nmat = 0;
    if (brk && c->probe) return kn_errs(ctx, KN_EUNSUPPORTED, "a graph break");
    if (brk) { /* every live traced tensor leaves the graph */
        for (kn_tensor *t = ctx->live; t && !s; t = t->next) {
            if (!is_traced(ctx, t)) continue;
            int stand = 0;
            for (int k = 0; k < e->nin; k++) stand |= t == c->stand[k];
            if (stand) continue;
            if (nmat == cap) s = kn_errs(ctx, KN_EUNSUPPORTED, "%s: more than %d live tensors at a graph break", f->name, cap);
            else if (add_out(outs, &n, cap, t->node) < 0) s = kn_errs(ctx, KN_EUNSUPPORTED, "%s: too many values at a break", f->name);
            else mat[nmat++] = t;
        }
        if (!s && (*brk_m = add_out(outs, &n, cap, brk->node)) < 0) s = kn_errs(ctx, KN_EUNSUPPORTED, "%s: too many values at a break", f->name);
    }
    /* writes of this segment: the last value of each tensor */
    for (int i = 0; i < c->npw && !s; i++) {
        PendingWrite *w = &c->pw[i];
        if (w->serial != g->serial) continue;
        Src dst, val;
        int found = 0;
        for (int p = 0; f->o.params && p < f->o.nparams && !found; p++)
            if (f->o.params[p] == w->dst) dst = (Src){SRC_PARAM, p, 0}, found = 1;
        if (!found && (dst = held_src(c, w->dst)).kind == SRC_NONE) {
            s = ctx->status;
            break;
        }
        int m = add_out(outs, &n, cap, w->node);
        if (m < 0) {
            s = kn_errs(ctx, KN_EUNSUPPORTED, "%s: too many writes", f->name);
            break;
        }
        val = (Src){SRC_SEG, c->seg, m};
        if (!APPEND(&e->arena, e->w, e->nw)) s = kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
        else e->w[e->nw++] = (Write){dst, val, c->seg};
    }
    BreakRegion *br = NULL;
    if (brk && !s) s = break_region(c, g, mat, nmat, outs, &n, &br);
    int nuser = n;
    Src *osrc = NULL;
    if (!brk && !s) { /* outputs and grads */
        osrc = e->outs;
        for (int k = 0; k < nout && !s; k++) {
            if (!out[k]) {
                s = ctx->status ? ctx->status : kn_errs(ctx, KN_EINVAL, "%s: the body left out[%d] NULL", f->name, k);
                break;
            }
            s = value_src(c, out[k], outs, &n, cap, &osrc[k]);
            if (!s) s = out_view(c, k, out[k]);
            e->leaf[k] = (uint8_t)is_leaf(c, out[k]);
        }
        for (int i = 0; i < c->ntr && !s; i++) {
            Tracked *t = &c->tr[i];
            kn_tensor *cur = t->leaf->grad;
            if (cur == t->entry) continue;
            Src v = {SRC_NONE, 0, 0};
            if (cur) s = value_src(c, cur, outs, &n, cap, &v);
            if (!s && APPEND(&e->arena, e->gs, e->ngs)) e->gs[e->ngs++] = (GradSet){t->param, v};
        }
        nuser = n;
    }
    size_t ncut = g ? g->n : 0; /* region_build adds nodes to g: the size as allocated */
    uint8_t *cut = s ? NULL : kn_alloc(ctx, ncut);
    if (!s && !cut) s = kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
    if (cut) memset(cut, 0, ncut);
    Seg *sg = NULL;
    if (!s) {
        if (!APPEND(&e->arena, e->segs, e->nsegs)) s = kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
        else {
            sg = &e->segs[e->nsegs++];
            memset(sg, 0, sizeof *sg);
        }
    }
    int dout = -1; /* the differentiable output, if a region is needed */
    if (!s && !brk && ctx->grad_enabled && !c->backward) {
        for (int k = 0; k < nout && !s; k++)
            if ((is_traced(ctx, out[k]) || earlier_value(c, out[k])) && (out[k]->flags & TF_REQGRAD) && !e->leaf[k]) {
                if (dout >= 0)
                    s = kn_errs(ctx, KN_EUNSUPPORTED, "%s: out[%d] and out[%d] both require grad; a compiled "
                                "backward supports one differentiable output", f->name, dout, k);
                dout = k;
            }
    }
    (void)nuser;
    if (!s && dout >= 0) s = region_build(c, g, out[dout], outs, &n, cap, dout, sg);
    else if (!s) s = make_seg(c, sg, g, outs, n, cut, 0, !brk && c->seg == 0);
    kn_dealloc(ctx, cut, ncut);
    if (s && br) break_free(ctx, br);
    if (s || !brk) return s;

    /* a break: run the segment now and make the live traced tensors concrete */
    Binding b = {c->in, c->vals, NULL, NULL, NULL};
    kn_tensor **v = kn_alloc(ctx, (size_t)(sg->nout + 1) * sizeof *v);
    if (!v) return kn_errs(ctx, KN_ENOMEM, "out of memory at a graph break");
    c->vals[c->seg] = v;
    c->nvals[c->seg] = sg->nout;
    Graph *tr = ctx->trace;
    ctx->trace = NULL;
    ctx->capture = NULL;
    CEntry *like = c->like; /* the call that failed its value guard computed this segment already */
    if (like && c->seg < like->ran && like->vals && sg->prog && sg->prog == like->segs[c->seg].prog) {
        memcpy(v, like->vals[c->seg], (size_t)sg->nout * sizeof *v);
        memset(like->vals[c->seg], 0, (size_t)sg->nout * sizeof *v);
    } else s = run_seg(f, e, sg, &b, v);
    for (int i = 0; i < e->nw && !s; i++) /* the body goes on eagerly: writes land now */
        if (e->w[i].seg == c->seg) {
            kn_tensor *dst = e->w[i].dst.kind == SRC_PARAM ? f->o.params[e->w[i].dst.a] : e->held[e->w[i].dst.a];
            s = tensor_assign(ctx, dst, resolve(f, e, &b, e->w[i].val));
        }
    ctx->trace = tr;
    ctx->capture = &c->hooks;
    for (int i = 0; i < nmat && !s; i++) { /* each becomes a view of its value */
        kn_tensor *t = mat[i];
        int m = 0;
        while (m < sg->nout && outs[m] != t->node) m++;
        KN_ASSERT(m < sg->nout);
        t->st = v[m]->st;
        t->st->refs++;
        memcpy(t->stride, v[m]->stride, sizeof t->stride);
        t->offset = v[m]->offset;
        t->node = 0;
        if (!APPEND(&e->arena, c->known, c->nknown)) s = kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
        else if (!(c->known[c->nknown].hold = tensor_hold(ctx, t))) s = ctx->status;
        else {
            c->known[c->nknown].t = t;
            c->known[c->nknown++].src = (Src){SRC_SEG, c->seg, m};
        }
    }
    for (int k = 0; k < e->nin && !s; k++) materialize_stand(c, k); /* views of the inputs */
    if (br && !s) s = break_bind(c, br, g, outs, sg->nout, mat, nmat);
    else if (br) break_free(ctx, br);
    c->seg++;
    return s;
}

/* With grad: the joint graph of out[dout] against every source that requires
 * grad, partitioned; fwd gets the forward (outputs, writes, then saved values). */
static kn_status region_build(Capture *c, Graph *g, kn_tensor *o, uint32_t *outs, int *nouts, int cap, int dout,
                              Seg *fwd)
{
    kn_fn *f = c->f;
    kn_ctx *ctx = f->ctx;
    CEntry *e = c->e;
    /* the leaves: stand-ins of inputs that require grad, and params that do */
    kn_tensor *leaves[MAX_VALS];
    Src lsrc[MAX_VALS];
    int nl = 0;
    for (int k = 0; k < e->nin; k++)
        if (c->stand[k]->flags & TF_REQGRAD) leaves[nl] = c->stand[k], lsrc[nl++] = (Src){SRC_IN, k, 0};
    for (uint32_t k = 0; k < g->ninputs && nl < MAX_VALS; k++) {
        kn_tensor *t = g->input_vals[k];
        int stand = 0, idx = -1;
        for (int i = 0; t && i < e->nin; i++) stand |= t == c->stand[i];
        if (!t || !(t->flags & TF_REQGRAD) || !t->st || stand) continue;
        if (t->tape_seq && t->tape_epoch == ctx->tape_epoch) continue; /* a value of an earlier graph of the trace:
                                                                           the backward goes through its region */
        for (int i = 0; f->o.params && i < f->o.nparams && idx < 0; i++)
            if (f->o.params[i] == t) idx = i;
        if (idx < 0)
            return kn_errs(ctx, KN_EUNSUPPORTED, "%s: the body reads a tensor that requires grad but is not in "
                           "kn_compile_opts.params; list every parameter there", f->name);
        leaves[nl] = t, lsrc[nl++] = (Src){SRC_PARAM, idx, 0};
    }
    for (int i = 0; c->seg > 0 && f->o.params && i < f->o.nparams && nl < MAX_VALS; i++) { /* and those that
                                                                      only the regions of earlier graphs read */
        kn_tensor *t = f->o.params[i];
        int seen = !(t->flags & TF_REQGRAD);
        for (int j = 0; j < nl && !seen; j++) seen = leaves[j] == t;
        if (!seen) leaves[nl] = t, lsrc[nl++] = (Src){SRC_PARAM, i, 0};
    }
    /* loss = sum(out * cot): its grads are the VJP of the cotangent cot */
    Node cn;
    memset(&cn, 0, sizeof cn);
    cn.op = OP_INPUT;
    cn.dtype = o->dtype;
    cn.ndim = o->ndim;
    memcpy(cn.shape, o->shape, o->ndim * sizeof(Dim));
    uint32_t cot_node = graph_input(g, &cn); /* input_vals has no tensor for it: source_of knows it by node */
    if (!cot_node) return kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
    kn_tensor *cot = tensor_symbolic(ctx, (kn_dtype)o->dtype, o->ndim, o->shape, cot_node);
    if (!cot) return ctx->status;
    cot->trace_serial = g->serial;
    kn_tensor *loss = kn_sum(ctx, kn_mul(ctx, o, cot), NULL, 0, 0);
    kn_tensor *grads[MAX_VALS];
    if (!loss || autodiff_grads(ctx, loss, nl, leaves, grads) != KN_OK) return ctx->status;
    uint32_t bout[MAX_VALS];
    int nb = 0;
    Region *rg = arena_alloc(&e->arena, sizeof *rg);
    if (!rg) return kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
    rg->nsrc = nl;
    rg->out = dout;
    rg->src = arena_alloc(&e->arena, (size_t)(nl + 1) * sizeof *rg->src);
    rg->grad_out = arena_alloc(&e->arena, (size_t)(nl + 1) * sizeof *rg->grad_out);
    if (!rg->src || !rg->grad_out) return kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
    for (int i = 0; i < nl; i++) {
        rg->src[i] = lsrc[i];
        rg->grad_out[i] = -1;
        if (!grads[i]) continue;
        if (!is_traced(ctx, grads[i]))
            return kn_errs(ctx, KN_EUNSUPPORTED, "%s: a gradient that is not computed by the graph", f->name);
        rg->grad_out[i] = add_out(bout, &nb, MAX_VALS, grads[i]->node);
    }
    Arena pa;
    arena_init(&pa, ctx);
    Partition part;
    kn_status s = partition_joint(ctx, g, outs, *nouts, bout, nb, 0, &pa, &part);
    if (log_on(ctx, LOG_PARTITION) && !s)
        log_line(ctx, LOG_PARTITION, "%s: forward %d nodes, backward %d nodes, %d saved (%zu bytes; %zu without "
                 "recomputation)", f->name, part.nfwd, part.nbwd, part.nsaved, part.saved_bytes, part.saved_bytes_all);
    for (int i = 0; i < part.nsaved && !s; i++)
        if (add_out(outs, nouts, cap, part.saved[i]) < 0) s = kn_errs(ctx, KN_EUNSUPPORTED, "%s: too many saved values", f->name);
    uint8_t *cut = s ? NULL : kn_alloc(ctx, g->n);
    if (!s && !cut) s = kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
    if (!s) {
        memset(cut, 0, g->n);
        s = make_seg(c, fwd, g, outs, *nouts, cut, cot_node, 0);
    }
    if (!s) { /* backward: saved values (every forward output) are cut */
        for (int m = 0; m < *nouts; m++) cut[outs[m]] = 1;
        s = make_seg(c, &rg->bwd, g, bout, nb, cut, cot_node, 0);
        for (int k = 0; !s && k < rg->bwd.nin; k++) /* a cut node: which forward output it is */
            if (rg->bwd.in[k].kind == SRC_NONE) {
                uint32_t v = (uint32_t)rg->bwd.in[k].a;
                int m = 0;
                while (m < *nouts && outs[m] != v) m++;
                rg->bwd.in[k].b = m;
            }
        for (int k = 0; !s && k < rg->bwd.nout; k++)
            if (rg->bwd.alias[k].kind != SRC_NONE)
                s = kn_errs(ctx, KN_EUNSUPPORTED, "%s: a gradient that passes an input straight through", f->name);
    }
    kn_dealloc(ctx, cut, g->n);
    arena_free(&pa);
    if (!s) e->rg = rg; /* bout is distinct and computed: program output m is bout[m] */
    else { /* the entry does not hold rg: what its backward has made goes now */
        program_free(rg->bwd.prog);
        if (rg->bwd.g) graph_free(rg->bwd.g);
    }
    return s;
}

static void materialize_stand(Capture *c, int k)
{
    kn_tensor *t = c->stand[k], *x = c->in[k];
    if (t->st) return;
    t->st = x->st;
    t->st->refs++;
    memcpy(t->stride, x->stride, sizeof t->stride);
    t->offset = x->offset;
    t->node = 0;
}

/* A read of t's values while tracing (kn_read, kn_item). A traced t is a
 * graph break; any value read is guarded on, a concrete one too (an input
 * made concrete at a break, a value of an earlier graph, a parameter): the
 * body may branch on it. */
static kn_status capture_break(kn_ctx *ctx, kn_tensor *t, const char *op)
{
    Capture *c = cap_of(ctx);
    kn_fn *f = c->f;
    CEntry *e = c->e;
    Src val = {SRC_NONE, 0, 0};
    kn_status s = KN_OK;
    if (c->probe) return kn_errs(ctx, KN_EUNSUPPORTED, "%s reads a value", op);
    int k = stand_of(c, t);
    if (k >= 0) {
        val = (Src){SRC_IN, k, 0};
        materialize_stand(c, k);
    }
    if (val.kind == SRC_NONE && is_traced(ctx, t)) {
        if (f->o.fullgraph)
            return kn_errs(ctx, KN_EUNSUPPORTED, "%s: %s reads the value of a traced tensor (a graph break) and "
                           "fullgraph is set", f->name, op);
        log_line(ctx, LOG_GRAPH_BREAKS, "%s: graph break %d: %s reads a traced value", f->name, c->seg + 1, op);
        if (c->seg + 1 >= 16) return kn_errs(ctx, KN_EUNSUPPORTED, "%s: more than 15 graph breaks", f->name);
        int m = -1;
        if ((s = finish(c, t, &m, NULL, 0))) return s;
        val = (Src){SRC_SEG, c->seg - 1, m};
        Graph *g = graph_new(ctx); /* a new graph for what follows */
        if (!g) return kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
        graph_free(ctx->trace);
        ctx->trace = g;
    } else if (val.kind == SRC_NONE) {
        if (!t->st) return kn_errs(ctx, KN_EINVAL, "%s: %s of a tensor from an earlier trace", f->name, op);
        for (int i = 0; i < c->nknown && val.kind == SRC_NONE; i++) /* or another handle of it (kn_detach's) */
            if ((c->known[i].t == t || tensor_same_layout(c->known[i].t, t)) && c->known[i].hold->st == t->st)
                val = c->known[i].src;
        for (int i = 0; f->o.params && i < f->o.nparams && val.kind == SRC_NONE; i++)
            if (f->o.params[i] == t) val = (Src){SRC_PARAM, i, 0};
        if (val.kind == SRC_NONE && (val = held_src(c, t)).kind == SRC_NONE) return ctx->status;
    }
    /* the value is guarded on */
    Binding b = {c->in, c->vals, NULL, NULL, NULL};
    kn_tensor *v = resolve(f, e, &b, val);
    Graph *tr = ctx->trace;
    ctx->trace = NULL;
    ctx->capture = NULL;
    size_t n = 0;
    void *bytes = v ? read_bytes(ctx, v, &n) : NULL;
    ctx->trace = tr;
    ctx->capture = &c->hooks;
    if (!bytes) return ctx->status ? ctx->status : kn_errs(ctx, KN_EINVAL, "%s: %s: no value", f->name, op);
    void *copy = arena_alloc(&e->arena, n ? n : 1);
    if (!copy || !APPEND(&e->arena, e->vg, e->nvg)) {
        kn_dealloc(ctx, bytes, n ? n : 1);
        return kn_errs(ctx, KN_ENOMEM, "out of memory tracing");
    }
    memcpy(copy, bytes, n);
    kn_dealloc(ctx, bytes, n ? n : 1);
    e->vg[e->nvg++] = (ValueGuard){c->seg, val, copy, n, op};
    return KN_OK;
}

/* ---- entries ---- */

static void entry_unref(CEntry *e)
{
    if (!e || --e->refs > 0) return;
    kn_ctx *ctx = e->ctx;
    for (int j = 0; j < e->nsegs; j++) {
        program_free(e->segs[j].prog);
        dyn_free(e->segs[j].dyn);
        if (e->segs[j].g) graph_free(e->segs[j].g);
    }
    if (e->rg) {
        program_free(e->rg->bwd.prog);
        dyn_free(e->rg->bwd.dyn);
        if (e->rg->bwd.g) graph_free(e->rg->bwd.g);
    }
    for (int i = 0; i < e->nheld; i++) tensor_unhold(ctx, e->held[i]);
    Arena a = e->arena;
    arena_free(&a);
}

static CEntry *entry_new(kn_fn *f, kn_tensor *const *in, int nin, int nout)
{
    kn_ctx *ctx = f->ctx;
    Arena a;
    arena_init(&a, ctx);
    CEntry *e = arena_alloc(&a, sizeof *e);
    if (!e) {
        arena_free(&a);
        return kn_err(ctx, KN_ENOMEM, "out of memory compiling %s", f->name);
    }
    e->arena = a;
    e->ctx = ctx;
    e->refs = 1;
    e->nin = nin;
    e->nout = nout;
    e->sym_in = e->sym_dim = -1;
    e->grad_mode = ctx->grad_enabled;
    e->ing = arena_alloc(&e->arena, (size_t)(nin + 1) * sizeof *e->ing);
    e->outs = arena_alloc(&e->arena, (size_t)(nout + 1) * sizeof *e->outs);
    e->ov = arena_alloc(&e->arena, (size_t)(nout + 1) * sizeof *e->ov);
    e->fresh = arena_alloc(&e->arena, (size_t)(nout + 1));
    e->leaf = arena_alloc(&e->arena, (size_t)(nout + 1));
    if (!e->ing || !e->outs || !e->ov || !e->fresh || !e->leaf) {
        entry_unref(e);
        return kn_err(ctx, KN_ENOMEM, "out of memory compiling %s", f->name);
    }
    for (int k = 0; k < nin; k++) {
        InGuard *g = &e->ing[k];
        g->dtype = in[k]->dtype;
        g->ndim = in[k]->ndim;
        memcpy(g->shape, in[k]->shape, sizeof g->shape);
        g->contig = kn_is_contiguous(in[k]) != 0;
        memcpy(g->stride, in[k]->stride, sizeof g->stride);
        g->reqgrad = (in[k]->flags & TF_REQGRAD) != 0 && ctx->grad_enabled;
    }
    return e;
}

static void guard_param(kn_fn *f, CEntry *e, int idx)
{
    for (int i = 0; i < e->npg; i++)
        if (e->pg[i].idx == idx) return;
    const kn_tensor *p = f->o.params[idx];
    if (APPEND(&e->arena, e->pg, e->npg))
        e->pg[e->npg++] = (ParamGuard){idx, p, (uint8_t)((p->flags & TF_REQGRAD) != 0), -1};
}

/* Traces the body into a new entry and runs it (the first call of it).
 * probe (dynamic dims): the body sees inputs of shapes[k] instead, and the
 * entry is only traced: its segment (and a region's backward) keeps its
 * graph, uncompiled, and nothing runs; a graph break fails the probe. */
static kn_status trace_entry(kn_fn *f, kn_tensor *const *in, int nin, kn_tensor **out, int nout, CEntry **made,
                             const int64_t (*shapes)[KN_MAX_DIMS], int probe, CEntry *like)
{
    kn_ctx *ctx = f->ctx;
    double t0 = port_now_ms();
    *made = NULL;
    CEntry *e = entry_new(f, in, nin, nout);
    if (!e) return ctx->status;
    Capture c;
    memset(&c, 0, sizeof c);
    c.hooks = capture_hooks;
    kn_tensor **vals[16] = {0};
    int nvals[16] = {0};
    kn_tensor *stand[MAX_IO];
    c.f = f;
    c.e = e;
    c.in = in;
    c.stand = stand;
    c.vals = vals;
    c.nvals = nvals;
    c.tape_start = c.seg_tape = autodiff_tape_len(ctx);
    c.probe = probe;
    c.like = like;
    kn_status s = KN_OK;
    Graph *g = graph_new(ctx);
    if (!g) {
        entry_unref(e);
        return kn_errs(ctx, KN_ENOMEM, "out of memory tracing %s", f->name);
    }
    kn_scope_begin(ctx);
    for (int k = 0; k < nin && !s; k++) { /* stand-ins: graph inputs */
        Node n;
        memset(&n, 0, sizeof n);
        n.op = OP_INPUT;
        n.dtype = in[k]->dtype;
        n.ndim = in[k]->ndim;
        memcpy(n.shape, shapes ? shapes[k] : in[k]->shape, in[k]->ndim * sizeof(Dim));
        uint32_t id = graph_input(g, &n);
        stand[k] = id ? tensor_symbolic(ctx, (kn_dtype)n.dtype, n.ndim, n.shape, id) : NULL;
        if (!stand[k]) {
            s = ctx->status ? ctx->status : kn_errs(ctx, KN_ENOMEM, "out of memory tracing %s", f->name);
            break;
        }
        stand[k]->trace_serial = g->serial;
        g->input_vals[n.p.i[0]] = stand[k];
        /* its layout: the input's, at a probe's shape as the guard will check it (else not known) */
        int known = !shapes || kn_is_contiguous(in[k]) ||
                    scaled_strides(in[k]->ndim, in[k]->shape, in[k]->stride, stand[k]->shape, stand[k]->stride);
        if (!shapes) memcpy(stand[k]->stride, in[k]->stride, sizeof stand[k]->stride);
        else if (kn_is_contiguous(in[k])) tensor_contig_strides(in[k]->ndim, stand[k]->shape, stand[k]->stride);
        if (!root_add(&c, stand[k], NULL, k, !known && shapes)) {
            s = ctx->status;
            break;
        }
        stand[k]->view_root = c.nroots;
        if (e->ing[k].reqgrad) stand[k]->flags |= TF_REQGRAD;
    }
    for (int k = 0; k < nout; k++) out[k] = NULL;
    kn_tensor *bout[MAX_IO] = {0};
    if (!s) {
        ctx->trace = g;
        ctx->capture = &c.hooks;
        const char *op = ctx->op; /* the body's ops name themselves in errors, and are counted */
        uint64_t ops0 = ctx->public_ops;
        ctx->op = NULL;
        kn_status bs = f->body(ctx, f->user, stand, nin, bout, nout);
        log_line(ctx, LOG_PERF, "%s: trace %.1f ms (the body, decompositions and backward traced)", f->name,
                 port_now_ms() - t0);
        ctx->op = op;
        e->ops = (int)(ctx->public_ops - ops0);
        if (bs != KN_OK || ctx->status) s = ctx->status ? ctx->status : kn_errs(ctx, bs, "%s: the body returned %d", f->name, (int)bs);
        if (!s) s = finish(&c, NULL, NULL, bout, nout);
        g = ctx->trace;
    }
    ctx->trace = NULL;
    ctx->capture = NULL;
    /* restore what tracing touched: grads, redirected nodes, the tape */
    for (int i = 0; i < c.ntr; i++) {
        kn_tensor *cur = c.tr[i].leaf->grad;
        if (cur && cur != c.tr[i].entry) {
            cur->flags &= (uint8_t)~TF_GRAD;
            kn_free(ctx, cur);
        }
        c.tr[i].leaf->grad = c.tr[i].entry;
    }
    for (int i = 0; i < c.npw; i++) c.pw[i].dst->node = 0;
    autodiff_truncate(ctx, c.tape_start);
    int nseg_done = c.seg;
    if (!s) { /* guards: every param the graphs read or write, or whose grad they set */
        for (int j = 0; j < e->nsegs; j++)
            for (int k = 0; k < e->segs[j].nin; k++)
                if (e->segs[j].in[k].kind == SRC_PARAM || e->segs[j].in[k].kind == SRC_GRAD)
                    guard_param(f, e, e->segs[j].in[k].a);
        for (int i = 0; i < e->nw; i++)
            if (e->w[i].dst.kind == SRC_PARAM) guard_param(f, e, e->w[i].dst.a);
        for (int i = 0; i < e->ngs; i++) guard_param(f, e, e->gs[i].param);
        if (e->rg)
            for (int i = 0; i < e->rg->nsrc; i++)
                if (e->rg->src[i].kind == SRC_PARAM) guard_param(f, e, e->rg->src[i].a);
    }
    kn_scope_end(ctx);
    for (int i = 0; i < c.nknown; i++) tensor_unhold(ctx, c.known[i].hold);
    for (int i = 0; i < c.nroots; i++) tensor_unhold(ctx, c.roots[i].hold);
    if (g) graph_free(g);
    e->compile_ms = port_now_ms() - t0;
    if (probe) {
        for (int j = 0; j < 16; j++)
            if (vals[j]) kn_dealloc(ctx, vals[j], (size_t)((j < e->nsegs ? e->segs[j].nout : 0) + 1) * sizeof **vals);
        if (s) entry_unref(e);
        else *made = e;
        return s;
    }
    /* the programs keep their outputs' storage; under reduce-overhead they hand out their own handles,
     * which a region's forward does not (the tape holds its saved values until a backward that may
     * come after the next call; its backward's grads go to the tape: always new) */
    for (int j = 0; !s && j < e->nsegs; j++)
        if (e->segs[j].prog)
            program_set_reuse(e->segs[j].prog,
                              f->o.mode == KN_MODE_REDUCE_OVERHEAD && !e->rg ? PROGRAM_STATIC : PROGRAM_POOL);
    if (!s) { /* the rest runs as every later call does */
        int r = run_entry(f, e, in, out, nseg_done, vals, 1);
        if (r == RUN_MISMATCH) r = kn_errs(ctx, KN_EINVAL, "%s: the body's graph breaks are not deterministic", f->name);
        s = (kn_status)r;
    }
    for (int j = 0; j < 16; j++)
        if (vals[j]) {
            free_vals(ctx, vals[j], j < e->nsegs ? e->segs[j].nout : 0);
            kn_dealloc(ctx, vals[j], (size_t)((j < e->nsegs ? e->segs[j].nout : 0) + 1) * sizeof **vals);
        }
    if (s) {
        entry_unref(e);
        return s;
    }
    f->graph_breaks += e->nsegs - 1;
    log_guards(f, e);
    if (log_on(ctx, LOG_PERF))
        log_line(ctx, LOG_PERF, "%s: entry %d: %d graphs, %d kernels, arena %zu bytes, code %zu bytes, %.1f ms "
                 "(backend %s)", f->name, f->nentries + 1, e->nsegs, e->kernels, e->arena_bytes, e->code_bytes,
                 e->compile_ms, e->backend ? e->backend : "none");
    *made = e;
    return KN_OK;
}

/* ---- dynamic dims ----
 *
 * A dim marked dynamic (kn_compile_opts.dynamic: auto marks a dim once a
 * call's size differs from the entry's; on marks every dim from the first
 * call; off none) becomes the symbol s0 of a generic entry, which any size
 * >= 2 of it passes (0 and 1 are specialised, as torch does: broadcasting
 * treats them differently). Dims of the same size as the first dynamic dim
 * share s0 (torch's duck sizing: a batch dim of x and of its labels); other
 * dynamic dims stay static: one symbol per entry for now.
 *
 * The generic graph comes from tracing the body at four sizes of s0: the
 * call's n, n+1, n+3 and 2 (the next size up where one is n or a static dim
 * of the inputs or parameters, whose nodes those of s0 would equal). Where
 * only the small probe differs (a slice whose end clamps below n), a probe
 * past 2n replaces it and the entry holds from n on (s0_floor, a guard: a
 * smaller size traces anew). Traces that make the same nodes,
 * sources and entry (outputs, writes, grads) and whose integers (shapes,
 * reshape targets, slice bounds, counts) are one affine a*s0+b at all four
 * sizes give a graph generic in s0: each node keeps such fields as
 * expressions (GenNode). A float parameter generalises when it is such an
 * integer (a mean's divisor) or its reciprocal is. A region's forward and
 * backward (a compiled forward whose backward runs later) are matched each.
 * Anything else (a trace that breaks, reads a value, makes other nodes at
 * another size, or a size that is not affine) specialises the dims to the
 * call's sizes, logged under KILN_LOGS=recompiles with the reason. While the
 * probes trace, capture_generic tells a decomposition whose form would
 * depend on a size to take one that does not (kn_cumsum's scan). A generic
 * graph holds for the sizes at which none of its sizes, slice starts and pad
 * widths is negative (dyn_limit): a larger s0 fails the entry's guard and
 * traces anew (a scan's fixed depth sets such a limit).
 *
 * Running a generic segment evaluates its graph at the call's s0 and plans
 * it (a program per size, the last DYN_CACHE kept): cheap for the
 * interpreter, which has no code to make. Backends tcc and c compile the
 * segment once when the entry is made, into a program whose kernels read s0
 * at run time (compile_generic, from its graph at the four probe sizes);
 * each size then only plans its arena (program_at). Where the graph does
 * not lower to one such program (compile.c says why), the dims specialise,
 * logged; a size at which two nodes of the generic graph are equal (so the
 * graph has other nodes) compiles a program for that size, logged too.
 *
 * Limit: the trace cannot see C control flow. A body that branches on a
 * size (if (kn_shape(x)[0] > 64) ...) is caught only where the branches
 * differ among the four probe sizes; a threshold beyond them is not
 * guarded, as a graph is not for any other value the body reads from C. */

/* x[j] at s0 = sv[j] (j < 4): 1 with *out the affine expression in s0 (0: a constant), or 0. */
static int fit(ExprTable *ex, const int64_t *x, const int64_t *sv, ExprId *out)
{
    *out = 0;
    if (x[1] == x[0] && x[2] == x[0] && x[3] == x[0]) return 1;
    int64_t a = (x[1] - x[0]) / (sv[1] - sv[0]), b = x[0] - a * sv[0];
    for (int j = 0; j < 4; j++)
        if (a * sv[j] + b != x[j]) return 0;
    *out = expr_add(ex, expr_mul(ex, expr_sym(ex, 0), expr_const(ex, a)), expr_const(ex, b));
    return *out != 0;
}

static int integral(double v) { return v == floor(v) && fabs(v) < 9e15; }

/* p.f at the four sizes: a constant, an affine integer, or the reciprocal of one. */
static int fit_f(ExprTable *ex, const double *v, const int64_t *sv, GenNode *gn)
{
    int64_t x[4];
    if (v[1] == v[0] && v[2] == v[0] && v[3] == v[0]) return 1;
    int in = 1, rec = 1;
    for (int j = 0; j < 4; j++) {
        in &= integral(v[j]);
        rec &= v[j] != 0 && integral(1.0 / v[j]) && 1.0 / (1.0 / v[j]) == v[j];
    }
    if (!in && !rec) return 0;
    for (int j = 0; j < 4; j++) x[j] = (int64_t)(in ? v[j] : 1.0 / v[j]);
    gn->finv = !in;
    return fit(ex, x, sv, &gn->f) && gn->f;
}

/* The largest s0 at which the generic graph of d (its nodes' g) has no
 * negative size, slice start or pad width, each a*s0+b: past it the graph
 * does not hold (a scan's fixed depth, decomp_shape.c's scan_generic, is
 * such a limit), and guards_pass sends a call there to a new trace; 0 where
 * nothing falls as s0 grows. */
static int64_t dyn_limit(const DynSeg *d, const Graph *g)
{
    int64_t lim = 0, zero = 0, one = 1;
    for (uint32_t v = 1; v < g->n; v++) {
        const Node *n = &g->nodes[v];
        const GenNode *gn = &d->gen[v];
        ExprId f[3 * KN_MAX_DIMS];
        int k = 0, err = 0;
        for (int dd = 0; dd < n->ndim; dd++) f[k++] = gn->shape[dd];
        if (n->op == OP_SLICE) f[k++] = gn->i[1];
        for (int q = 0; n->op == OP_PAD && q < 2 * n->ndim; q++) f[k++] = gn->i[q];
        for (int j = 0; j < k; j++) {
            if (!f[j]) continue;
            int64_t b = expr_eval(&d->ex, f[j], &zero, &err), a = expr_eval(&d->ex, f[j], &one, &err) - b;
            if (!err && a < 0 && (!lim || b / -a < lim)) lim = b / -a; /* b >= 0: it held at the probes */
        }
    }
    return lim;
}

/* 1 while kn_call traces the probes of an entry generic in s0 (dyn_entry):
 * a decomposition whose form depends on a size takes one that does not. */
static int capture_generic(const kn_ctx *ctx) { return ctx->capture && cap_of(ctx)->probe; }

/* Held tensors of two probes: the same view, or a constant the body made
 * at each trace with the same values (a size read as a value is not). */
static int same_held(kn_ctx *ctx, kn_tensor *a, kn_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof a->shape) != 0) return 0;
    if (a->st == b->st) return a->offset == b->offset && memcmp(a->stride, b->stride, sizeof a->stride) == 0;
    size_t na, nb;
    void *x = read_bytes(ctx, a, &na), *y = x ? read_bytes(ctx, b, &nb) : NULL;
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    if (x) kn_dealloc(ctx, x, na ? na : 1);
    if (y) kn_dealloc(ctx, y, nb ? nb : 1);
    if (!x || !y) kn_clear_error(ctx);
    return same;
}

/* The same segment of the four probes (ss[j] at s0 = sv[j]) as one generic
 * segment, made in arena a: NULL with the reason in why if they are not one
 * graph in s0. */
static DynSeg *dyn_seg(kn_fn *f, Arena *a, const Seg *const *ss, const int64_t *sv, char *why, size_t cap)
{
    kn_ctx *ctx = f->ctx;
    const Seg *sg = ss[0];
    for (int j = 1; j < 4; j++) {
        const Seg *s1 = ss[j];
        int ins = s1->nin == sg->nin && s1->g->ninputs == sg->g->ninputs, outs = s1->nout == sg->nout;
        for (int i = 0; ins && i < sg->nin; i++) ins = same_src(s1->in[i], sg->in[i]);
        for (int i = 0; outs && i < sg->nout; i++) outs = s1->outs[i] == sg->outs[i] && same_src(s1->alias[i], sg->alias[i]);
        if (!ins || !outs || s1->g->n != sg->g->n) {
            snprintf(why, cap, "the trace at size %lld has other %s (%u nodes, %u at size %lld)", (long long)sv[j],
                     !ins ? "inputs" : s1->g->n != sg->g->n ? "nodes" : "outputs", (unsigned)s1->g->n,
                     (unsigned)sg->g->n, (long long)sv[0]);
            return NULL;
        }
    }
    const Graph *g = sg->g;
    DynSeg *d = arena_alloc(a, sizeof *d);
    GenNode *gen = d ? arena_alloc(a, g->n * sizeof *gen) : NULL;
    d = gen ? d : NULL;
    uint32_t *uniq = d ? arena_alloc(a, (size_t)(sg->nout + 1) * sizeof *uniq) : NULL;
    if (!uniq) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    expr_init(&d->ex, ctx);
    d->gen = gen;
    d->uniq = uniq;
    for (uint32_t v = 1; v < g->n; v++) {
        const Node *n[4];
        for (int j = 0; j < 4; j++) n[j] = &ss[j]->g->nodes[v];
        GenNode *gn = &gen[v];
        int ok = 1;
        for (int j = 1; j < 4 && ok; j++)
            ok = n[j]->op == n[0]->op && n[j]->dtype == n[0]->dtype && n[j]->ndim == n[0]->ndim &&
                 n[j]->nsrc == n[0]->nsrc && memcmp(n[j]->src, n[0]->src, sizeof n[0]->src) == 0 &&
                 n[j]->p.axis == n[0]->p.axis && n[j]->p.dtype == n[0]->p.dtype && n[j]->p.n == n[0]->p.n;
        int64_t x[4];
        for (int dd = 0; dd < KN_MAX_DIMS && ok; dd++) {
            for (int j = 0; j < 4; j++) x[j] = n[j]->shape[dd];
            ok = fit(&d->ex, x, sv, &gn->shape[dd]);
            gn->any |= gn->shape[dd] != 0;
        }
        for (int q = 0; q < 2 * KN_MAX_DIMS && ok; q++) {
            for (int j = 0; j < 4; j++) x[j] = n[j]->p.i[q];
            ok = fit(&d->ex, x, sv, &gn->i[q]);
            gn->any |= gn->i[q] != 0;
        }
        double fv[4] = {n[0]->p.f, n[1]->p.f, n[2]->p.f, n[3]->p.f};
        if (ok) ok = fit_f(&d->ex, fv, sv, gn);
        gn->any |= gn->f != 0;
        if (!ok) {
            snprintf(why, cap, "node %%%" PRIu32 " (%s) is not the same graph at every size, or not affine in the size",
                     v, kn_opinfo[n[0]->op].name);
            expr_free(&d->ex);
            return NULL;
        }
    }
    for (int m = 0; m < sg->nout; m++) { /* as make_seg: the distinct computed outputs, in order */
        if (sg->alias[m].kind != SRC_NONE) continue;
        int dup = 0;
        for (int i = 0; i < d->nu && !dup; i++) dup = d->uniq[i] == sg->outs[m];
        if (!dup) d->uniq[d->nu++] = sg->outs[m];
    }
    d->co = (CompileOpts){backend_of(f->o.backend), f->o.mode, 1, NULL};
    d->reuse = PROGRAM_POOL; /* an evicted size's outputs must outlive its program */
    return d;
}

/* The probes' output views as e[0]'s, generic in s0: 1, or 0 with the reason in why. */
static int dyn_views(CEntry *const *e, const int64_t *sv, ExprTable *ex, char *why, size_t cap)
{
    for (int k = 0; k < e[0]->nout; k++) {
        OutView *v = &e[0]->ov[k];
        int ok = 1;
        for (int j = 1; j < 4 && ok; j++)
            ok = e[j]->fresh[k] == e[0]->fresh[k] && same_src(e[j]->ov[k].root, v->root) && e[j]->ov[k].ndim == v->ndim;
        int64_t x[4];
        for (int i = 0; i < v->ndim && ok && v->root.kind != SRC_NONE; i++) {
            for (int j = 0; j < 4; j++) x[j] = e[j]->ov[k].shape[i];
            ok = fit(ex, x, sv, &v->gshape[i]);
            for (int j = 0; j < 4 && ok; j++) x[j] = e[j]->ov[k].stride[i];
            ok = ok && fit(ex, x, sv, &v->gstride[i]);
        }
        for (int j = 0; j < 4 && ok; j++) x[j] = e[j]->ov[k].offset;
        if (ok && v->root.kind != SRC_NONE) ok = fit(ex, x, sv, &v->goffset);
        if (!ok) {
            snprintf(why, cap, "out[%d] is a view whose layout is not the same, or not affine, at every size", k);
            return 0;
        }
    }
    return 1;
}

/* The probes' entries e[0..4) (e[0] at the call's size) as one entry
 * generic in s0: 1 with the generic segments attached to e[0], or 0 with
 * the reason in why. */
static int dyn_match(kn_fn *f, CEntry *const *e, const int64_t *sv, char *why, size_t cap)
{
    kn_ctx *ctx = f->ctx;
    CEntry *b = e[0];
    for (int j = 0; j < 4; j++)
        if (e[j]->nsegs != 1 || e[j]->nvg || (e[j]->rg != NULL) != (b->rg != NULL)) {
            snprintf(why, cap, "the trace at size %lld is not one graph", (long long)sv[j]);
            return 0;
        }
    for (int j = 1; j < 4; j++) {
        const CEntry *x = e[j];
        int same = x->nw == b->nw && x->ngs == b->ngs && x->nheld == b->nheld;
        for (int i = 0; same && i < b->nw; i++)
            same = same_src(x->w[i].dst, b->w[i].dst) && same_src(x->w[i].val, b->w[i].val);
        for (int i = 0; same && i < b->ngs; i++)
            same = x->gs[i].param == b->gs[i].param && same_src(x->gs[i].val, b->gs[i].val);
        for (int i = 0; same && i < b->nout; i++) same = same_src(x->outs[i], b->outs[i]);
        for (int i = 0; same && i < b->nheld; i++) same = same_held(ctx, x->held[i], b->held[i]);
        if (same && b->rg) {
            same = x->rg->nsrc == b->rg->nsrc && x->rg->out == b->rg->out;
            for (int i = 0; same && i < b->rg->nsrc; i++)
                same = same_src(x->rg->src[i], b->rg->src[i]) && x->rg->grad_out[i] == b->rg->grad_out[i];
        }
        if (!same) {
            snprintf(why, cap, "the trace at size %lld reads or writes other tensors, or makes constants of other "
                     "values", (long long)sv[j]);
            return 0;
        }
    }
    const Seg *ss[4];
    DynSeg *d, *bd = NULL;
    for (int j = 0; j < 4; j++) ss[j] = &e[j]->segs[0];
    d = dyn_seg(f, &b->arena, ss, sv, why, cap);
    if (d && b->rg) { /* and the region's backward */
        for (int j = 0; j < 4; j++) ss[j] = &e[j]->rg->bwd;
        if ((bd = dyn_seg(f, &b->arena, ss, sv, why, cap))) bd->reuse = PROGRAM_FRESH;
        if (!bd) {
            expr_free(&d->ex);
            d = NULL;
        }
    }
    if (!d) return 0;
    b->segs[0].dyn = d;
    if (bd) b->rg->bwd.dyn = bd;
    if (!dyn_views(e, sv, &d->ex, why, cap)) return 0; /* the caller frees b, d with it */
    int64_t lf = dyn_limit(d, b->segs[0].g), lb = bd ? dyn_limit(bd, b->rg->bwd.g) : 0;
    b->s0_limit = !lf ? lb : !lb ? lf : lf < lb ? lf : lb;
    return 1;
}

static void dyn_drop(kn_ctx *ctx, DynProg *q, int nu)
{
    program_free(q->p);
    if (q->g) graph_free(q->g);
    kn_dealloc(ctx, q->slot, (size_t)(nu + 1) * sizeof *q->slot);
    memset(q, 0, sizeof *q);
}

static void dyn_free(DynSeg *d)
{
    if (!d) return;
    for (int i = 0; i < DYN_CACHE; i++)
        if (d->cache[i].p || d->cache[i].g) dyn_drop(d->ex.arena.ctx, &d->cache[i], d->nu);
    program_free(d->code); /* after its instances */
    expr_free(&d->ex);
}

/* The generic graph g of d at s0 = s (map: g's node -> the new graph's):
 * NULL with *err 1 (no valid shapes at s) or 2 (out of memory). Nodes that
 * are equal at s are one (the new graph has fewer). */
static Graph *dyn_graph(kn_ctx *ctx, const DynSeg *d, const Graph *g, int64_t s, uint32_t *map, int *err)
{
    Graph *h = graph_new(ctx);
    if (!h) return *err = 2, NULL;
    map[0] = 0;
    for (uint32_t v = 1; v < g->n && !*err; v++) {
        Node n = g->nodes[v];
        const GenNode *gn = &d->gen[v];
        for (int dd = 0; gn->any && dd < KN_MAX_DIMS; dd++)
            if (gn->shape[dd]) n.shape[dd] = expr_eval(&d->ex, gn->shape[dd], &s, err);
        for (int i = 0; gn->any && i < 2 * KN_MAX_DIMS; i++)
            if (gn->i[i]) n.p.i[i] = expr_eval(&d->ex, gn->i[i], &s, err);
        if (gn->f) {
            int64_t c = expr_eval(&d->ex, gn->f, &s, err);
            n.p.f = gn->finv ? (c ? 1.0 / (double)c : (*err = 1, 0.0)) : (double)c;
        }
        for (int dd = 0; dd < n.ndim; dd++) *err |= n.shape[dd] < 0;
        for (int i = 0; i < n.nsrc; i++) n.src[i] = map[n.src[i]];
        if (!*err && !(map[v] = graph_add(h, &n))) *err = 2;
        if (n.op == OP_INPUT) h->ninputs++;
    }
    if (*err) graph_free(h), h = NULL;
    return h;
}

/* The segment's graph at s0 = s, planned: from the cache, else made (the
 * least recently used size's program goes). NULL with the error set. */
static const DynProg *dyn_prog(kn_fn *f, CEntry *e, const Seg *sg, int64_t s)
{
    kn_ctx *ctx = f->ctx;
    DynSeg *d = sg->dyn;
    DynProg *q = &d->cache[0];
    for (int i = 0; i < DYN_CACHE; i++) {
        if (d->cache[i].p && d->cache[i].s == s) {
            d->cache[i].used = ++d->tick;
            return &d->cache[i];
        }
        if (d->cache[i].used < q->used) q = &d->cache[i];
    }
    dyn_drop(ctx, q, d->nu);
    const Graph *g = sg->g;
    uint32_t *map = kn_alloc(ctx, g->n * sizeof *map), hu[MAX_VALS];
    q->slot = kn_alloc(ctx, (size_t)(d->nu + 1) * sizeof *q->slot);
    int err = !map || !q->slot ? 2 : 0;
    Graph *h = err ? NULL : dyn_graph(ctx, d, g, s, map, &err);
    if (err == 2) {
        kn_dealloc(ctx, map, g->n * sizeof *map);
        dyn_drop(ctx, q, d->nu);
        return kn_err(ctx, KN_ENOMEM, "%s: out of memory planning s0 = %lld", f->name, (long long)s);
    }
    q->g = h;
    int nhu = 0;
    for (int j = 0; j < d->nu && !err; j++) { /* nodes equal at this size are one: so are their outputs */
        uint32_t u = map[d->uniq[j]];
        int k = 0;
        while (k < nhu && hu[k] != u) k++;
        if (k == nhu) hu[nhu++] = u;
        q->slot[j] = k;
    }
    kn_dealloc(ctx, map, g->n * sizeof *map);
    if (err) {
        dyn_drop(ctx, q, d->nu);
        return err == 2 ? kn_err(ctx, KN_ENOMEM, "%s: out of memory planning s0 = %lld", f->name, (long long)s)
                        : kn_err(ctx, KN_EINVAL, "%s: the graph generic in s0 has no valid shapes at s0 = %lld",
                                 f->name, (long long)s);
    }
    if (graph_verify(ctx, h)) {
        dyn_drop(ctx, q, d->nu);
        return NULL;
    }
    int fresh = !d->code || h->n != g->n; /* the interpreter's plan, or code for this size */
    if (!fresh && !(q->p = program_at(ctx, d->code, h, s)) && ctx->status != KN_ENOMEM) { /* a dot of no size */
        log_line(ctx, LOG_RECOMPILES, "%s: s0 = %lld: %s: compiled for it", f->name, (long long)s, kn_last_error(ctx));
        kn_clear_error(ctx);
        fresh = 1;
    }
    if (fresh) {
        if (d->code && h->n != g->n)
            log_line(ctx, LOG_RECOMPILES, "%s: s0 = %lld: nodes of the generic graph are equal at this size: "
                     "compiled for it", f->name, (long long)s);
        q->p = compile_graph(ctx, h, hu, nhu, &d->co);
        if (q->p && d->code) f->compiles++;
    }
    if (!q->p) {
        dyn_drop(ctx, q, d->nu);
        return NULL;
    }
    program_set_reuse(q->p, d->reuse);
    ProgramStats st;
    program_stats(q->p, &st);
    e->arena_bytes = st.arena_bytes; /* the size run last */
    e->backend = st.backend;
    q->s = s;
    q->used = ++d->tick;
    log_line(ctx, LOG_PERF, "%s: s0 = %lld planned: arena %zu bytes", f->name, (long long)s, st.arena_bytes);
    return q;
}

/* The arena of generic entry e as an expression in s0 (planned at three of
 * the probe sizes; "" where the plan is not affine in s0). */
static void dyn_arena_expr(kn_fn *f, CEntry *e, const int64_t *sv)
{
    int64_t x[4];
    Seg *sg = &e->segs[0];
    for (int j = 0; j < 4; j++) {
        const DynProg *q = dyn_prog(f, e, sg, sv[j]);
        if (!q) {
            kn_clear_error(f->ctx);
            return;
        }
        ProgramStats st;
        program_stats(q->p, &st);
        x[j] = (int64_t)st.arena_bytes;
    }
    ExprId a;
    ExprTable *ex = &sg->dyn->ex;
    if (fit(ex, x, sv, &a)) {
        if (!a) a = expr_const(ex, x[0]);
        if (a) expr_print(ex, a, e->arena_expr, sizeof e->arena_expr);
    }
}

/* Backends tcc and c: sg's program generic in s0, compiled once from its
 * graph at the probe sizes sv[0..4) (compile_generic): 1, or 0 with the
 * reason in why. */
static int dyn_compile(kn_fn *f, Seg *sg, const int64_t *sv, char *why, size_t cap)
{
    kn_ctx *ctx = f->ctx;
    DynSeg *d = sg->dyn;
    const Graph *g = sg->g;
    Graph *hs[4] = {0};
    uint32_t *map = kn_alloc(ctx, g->n * sizeof *map);
    int err = !map ? 2 : 0;
    if (!d->nu) {
        kn_dealloc(ctx, map, g->n * sizeof *map);
        return 1; /* nothing to compute */
    }
    for (int j = 0; j < 4 && !err; j++) {
        hs[j] = dyn_graph(ctx, d, g, sv[j], map, &err);
        if (!err && hs[j]->n != g->n) {
            snprintf(why, cap, "nodes of the generic graph are equal at size %lld", (long long)sv[j]);
            err = 1;
        }
    }
    kn_dealloc(ctx, map, g->n * sizeof *map);
    if (err == 2) snprintf(why, cap, "out of memory");
    if (!err && !(d->code = compile_generic(ctx, (const Graph *const *)hs, sv, 4, d->uniq, d->nu, &d->co, why, cap)))
        err = 1;
    for (int j = 0; j < 4; j++)
        if (hs[j]) graph_free(hs[j]);
    if (err) {
        if (!why[0]) snprintf(why, cap, "%s", kn_last_error(ctx));
        kn_clear_error(ctx);
        return 0;
    }
    f->compiles++;
    return 1;
}

/* The dims of in[] that would be s0 under f's dynamic setting: their marks
 * in sym (zeroed first); returns s0's size at this call, or 0 if none. */
static int64_t dyn_dims(kn_fn *f, kn_tensor *const *in, int nin, uint8_t (*sym)[KN_MAX_DIMS])
{
    int64_t n = 0;
    memset(sym, 0, (size_t)nin * sizeof *sym);
    if (f->o.dynamic == KN_DYNAMIC_OFF) return 0;
    for (int k = 0; k < nin; k++)
        for (int d = 0; d < in[k]->ndim; d++) {
            int cand = f->o.dynamic == KN_DYNAMIC_ON || f->dyn[k][d];
            if (!cand || in[k]->shape[d] < 2 || (n && in[k]->shape[d] != n)) continue;
            n = in[k]->shape[d];
            sym[k][d] = 1;
        }
    return n;
}

/* The first size from `from` on that is none of used[0..nused) and no
 * static dim (not s0's) of the inputs or the parameters: a probe at such a
 * size would make a node of s0 equal to one of that dim (a mean's divisor,
 * an expand), a graph of fewer nodes than the other probes'. */
static int64_t probe_size(const kn_fn *f, kn_tensor *const *in, int nin, const uint8_t (*sym)[KN_MAX_DIMS],
                          int64_t from, const int64_t *used, int nused)
{
    for (int64_t s = from;; s++) {
        int clash = 0;
        for (int i = 0; i < nused && !clash; i++) clash = used[i] == s;
        for (int k = 0; k < nin && !clash; k++)
            for (int d = 0; d < in[k]->ndim && !clash; d++) clash = !sym[k][d] && in[k]->shape[d] == s;
        for (int k = 0; k < f->o.nparams && !clash; k++)
            for (int d = 0; d < f->o.params[k]->ndim && !clash; d++) clash = f->o.params[k]->shape[d] == s;
        if (!clash) return s;
    }
}

/* The body traced as a probe at s0 = s (shapes: room for nin inputs' shapes): *e, or why set. */
static void dyn_probe(kn_fn *f, kn_tensor *const *in, int nin, int nout, const uint8_t (*sym)[KN_MAX_DIMS],
                      int64_t (*shapes)[KN_MAX_DIMS], int64_t s, CEntry **e, char *why, size_t cap)
{
    kn_tensor *junk[MAX_IO];
    for (int k = 0; k < nin; k++)
        for (int d = 0; d < KN_MAX_DIMS; d++) shapes[k][d] = sym[k][d] ? s : in[k]->shape[d];
    if (trace_entry(f, in, nin, junk, nout, e, (const int64_t(*)[KN_MAX_DIMS])shapes, 1, NULL)) {
        snprintf(why, cap, "tracing at size %lld: %s", (long long)s, kn_last_error(f->ctx));
        kn_clear_error(f->ctx);
    }
}

/* A new generic entry for this call (its first run not done): NULL if the
 * dims specialise, with the reason logged. */
static CEntry *dyn_entry(kn_fn *f, kn_tensor *const *in, int nin, int nout, int64_t n,
                         uint8_t (*sym)[KN_MAX_DIMS])
{
    kn_ctx *ctx = f->ctx;
    int k0 = 0, d0 = 0;
    while (!sym[k0][d0])
        if (++d0 == KN_MAX_DIMS) d0 = 0, k0++;
    char why[256] = "";
    int code = (f->o.backend == KN_BACKEND_C && port_jit_available(PORT_CC)) ||
               (f->o.backend == KN_BACKEND_TCC && port_jit_available(PORT_TCC)); /* else it runs on interp */
    double t0 = port_now_ms();
    int64_t sv[4] = {n};
    int64_t (*shapes)[KN_MAX_DIMS] = kn_alloc(ctx, (size_t)(nin + 1) * sizeof *shapes);
    CEntry *e[4] = {0};
    const uint8_t(*csym)[KN_MAX_DIMS] = (const uint8_t(*)[KN_MAX_DIMS])sym;
    sv[1] = probe_size(f, in, nin, csym, n + 1, sv, 1);
    sv[2] = probe_size(f, in, nin, csym, sv[1] + 2, sv, 2);
    sv[3] = probe_size(f, in, nin, csym, 2, sv, 3);
    if (!shapes) {
        kn_err(ctx, KN_ENOMEM, "out of memory compiling %s", f->name);
        return NULL;
    }
    for (int j = 0; j < 4 && !why[0]; j++) dyn_probe(f, in, nin, nout, csym, shapes, sv[j], &e[j], why, sizeof why);
    int d = !why[0] && dyn_match(f, e, sv, why, sizeof why);
    int64_t floor = 0;
    if (!d && sv[3] < n && e[0] && e[1] && e[2]) {
        /* the small probe differed (a slice that clamps below n): one past 2n instead, and the entry
         * holds from n on (a guard, as torch's on such a size). Past 2n, so that a form whose depth
         * grows with log2 of the size (a scan's steps), which the small probe caught, still differs */
        char first[256];
        memcpy(first, why, sizeof why);
        entry_unref(e[3]);
        e[3] = NULL, why[0] = 0, floor = n;
        sv[3] = probe_size(f, in, nin, csym, 2 * n + 1, sv, 3);
        dyn_probe(f, in, nin, nout, csym, shapes, sv[3], &e[3], why, sizeof why);
        d = !why[0] && dyn_match(f, e, sv, why, sizeof why);
        if (!d) memcpy(why, first, sizeof why);
    }
    kn_dealloc(ctx, shapes, (size_t)(nin + 1) * sizeof *shapes);
    for (int j = 1; j < 4; j++) entry_unref(e[j]);
    if (d && code) /* one program for every size, the forward's and a region backward's */
        d = dyn_compile(f, &e[0]->segs[0], sv, why, sizeof why) &&
            (!e[0]->rg || dyn_compile(f, &e[0]->rg->bwd, sv, why, sizeof why));
    if (!d) {
        entry_unref(e[0]);
        log_line(ctx, LOG_RECOMPILES, "%s: in[%d] dim %d specialised to %lld: %s", f->name, k0, d0, (long long)n, why);
        return NULL;
    }
    CEntry *g = e[0];
    g->sym_in = k0, g->sym_dim = d0, g->s0_floor = floor;
    for (int k = 0; k < nin; k++) memcpy(g->ing[k].sym, sym[k], sizeof g->ing[k].sym);
    g->nodes = (int)(g->segs[0].g->n - 1 - g->segs[0].g->ninputs);
    g->backend = "interp";
    g->kernels = g->interp_steps = 0, g->code_bytes = 0;
    for (int j = 0; j < 2; j++) {
        const DynSeg *ds = j ? (g->rg ? g->rg->bwd.dyn : NULL) : g->segs[0].dyn;
        ProgramStats st;
        if (!ds || !ds->code) continue;
        program_stats(ds->code, &st);
        g->backend = st.backend, g->kernels += st.kernels, g->interp_steps += st.interp_steps;
        g->code_bytes += st.code_bytes;
    }
    dyn_arena_expr(f, g, sv);
    g->compile_ms = port_now_ms() - t0;
    char upto[48] = "";
    if (g->s0_limit) snprintf(upto, sizeof upto, ", up to s0 = %lld", (long long)g->s0_limit);
    if (g->s0_floor) snprintf(upto + strlen(upto), sizeof upto - strlen(upto), ", from s0 = %lld", (long long)n);
    log_line(ctx, LOG_RECOMPILES, "%s: entry %d is generic in s0 = in[%d] dim %d (now %lld), arena %s bytes%s",
             f->name, f->nentries + 1, k0, d0, (long long)n, g->arena_expr[0] ? g->arena_expr : "not affine in s0",
             upto);
    return g;
}

/* ---- the public API ---- */

kn_fn *kn_compile(kn_ctx *ctx, kn_body_fn body, void *user, const kn_compile_opts *o)
{
    if (!ctx) return NULL;
    const char *saved = op_enter(ctx, "kn_compile");
    kn_fn *f = NULL;
    kn_compile_opts opts;
    memset(&opts, 0, sizeof opts);
    if (o) opts = *o;
    if (!body) kn_err(ctx, KN_EINVAL, "operand 'body' is NULL");
    else if ((unsigned)opts.backend > KN_BACKEND_INTERP) kn_err(ctx, KN_EINVAL, "unknown backend %d", (int)opts.backend);
    else if ((unsigned)opts.mode > KN_MODE_MAX_AUTOTUNE) kn_err(ctx, KN_EINVAL, "unknown mode %d", (int)opts.mode);
    else if ((unsigned)opts.dynamic > KN_DYNAMIC_OFF) kn_err(ctx, KN_EINVAL, "unknown dynamic setting %d", (int)opts.dynamic);
    else if (opts.recompile_limit < 0) kn_err(ctx, KN_EINVAL, "recompile_limit %d is negative", opts.recompile_limit);
    else if (opts.nparams < 0 || (opts.nparams > 0 && !opts.params))
        kn_err(ctx, KN_EINVAL, "params: %d given with a %s array", opts.nparams, opts.params ? "non-NULL" : "NULL");
    else if (!(f = kn_alloc(ctx, sizeof *f))) kn_err(ctx, KN_ENOMEM, "out of memory for a compiled function");
    if (f) {
        memset(f, 0, sizeof *f);
        f->ctx = ctx;
        f->body = body;
        f->user = user;
        f->o = opts;
        if (!f->o.recompile_limit) f->o.recompile_limit = 8;
        snprintf(f->name, sizeof f->name, "%s", opts.name ? opts.name : "fn");
        /* no compiler for the backend: said once per context and backend, whatever KILN_LOGS asks
         * (as eager's backend and the recompile limit say theirs), and in the perf log each time */
        int nojit = (opts.backend == KN_BACKEND_C && !port_jit_available(PORT_CC)) ||
                    (opts.backend == KN_BACKEND_TCC && !port_jit_available(PORT_TCC));
        const char *bn = opts.backend == KN_BACKEND_C ? "c" : "tcc";
        unsigned bit = 1u << (opts.backend & 7);
        if (nojit && !(ctx->said_no_jit & bit)) {
            char line[160];
            snprintf(line, sizeof line, "kiln: backend %s has no compiler here; kn_compile's functions run on the "
                     "interpreter", bn);
            if (ctx->log) ctx->log(ctx->log_user, line);
            else port_log(line);
            ctx->said_no_jit |= (uint8_t)bit;
        }
        if (nojit) log_line(ctx, LOG_PERF, "%s: backend %s has no compiler here: falling back to interp", f->name, bn);
    }
    op_leave(ctx, saved);
    return f;
}

/* The table of segment values a call fills (vals[seg][m]), in the entry's
 * arena: made at its first call, so later calls allocate none. */
/* Whether b, traced after a's value guard failed, does what a did: its segments run a's programs (shared,
 * seg_twin), with the same writes, grads, outputs and reads. */
static int same_view(const OutView *a, const OutView *b)
{
    size_t n = a->ndim * sizeof *a->shape;
    return same_src(a->root, b->root) && a->ndim == b->ndim && a->offset == b->offset &&
           memcmp(a->shape, b->shape, n) == 0 && memcmp(a->stride, b->stride, n) == 0;
}

static int same_entry(const CEntry *a, const CEntry *b)
{
    if (a->nsegs != b->nsegs || a->nw != b->nw || a->ngs != b->ngs || a->nvg != b->nvg || a->nout != b->nout ||
        (a->rg != NULL) != (b->rg != NULL) || (a->rg && a->rg->bwd.prog != b->rg->bwd.prog))
        return 0;
    for (int j = 0; j < a->nsegs; j++)
        if (a->segs[j].prog != b->segs[j].prog || a->segs[j].dyn || b->segs[j].dyn) return 0;
    for (int i = 0; i < a->nw; i++)
        if (!same_src(a->w[i].dst, b->w[i].dst) || !same_src(a->w[i].val, b->w[i].val)) return 0;
    for (int i = 0; i < a->ngs; i++)
        if (a->gs[i].param != b->gs[i].param || !same_src(a->gs[i].val, b->gs[i].val)) return 0;
    for (int i = 0; i < a->nvg; i++)
        if (a->vg[i].at != b->vg[i].at || !same_src(a->vg[i].val, b->vg[i].val)) return 0;
    for (int k = 0; k < a->nout; k++)
        if (!same_src(a->outs[k], b->outs[k]) || a->fresh[k] != b->fresh[k] || a->leaf[k] != b->leaf[k] ||
            !same_view(&a->ov[k], &b->ov[k]))
            return 0;
    return 1;
}

static kn_tensor ***entry_vals(CEntry *e)
{
    kn_tensor ***v = arena_alloc(&e->arena, (size_t)(e->nsegs + 1) * sizeof *v);
    for (int j = 0; v && j < e->nsegs; j++)
        if (!(v[j] = arena_alloc(&e->arena, (size_t)(e->segs[j].nout + 1) * sizeof **v))) return NULL;
    return v;
}

static void entry_vals_free(kn_fn *f, CEntry *e)
{
    for (int j = 0; e->vals && j < e->nsegs; j++) {
        free_vals(f->ctx, e->vals[j], e->segs[j].nout);
        memset(e->vals[j], 0, (size_t)(e->segs[j].nout + 1) * sizeof **e->vals);
    }
    e->ran = 0;
}

/* Runs cached entry e: RUN_OK, RUN_MISMATCH or a status (run_entry). keep: on RUN_MISMATCH the values
 * of the segments that ran stay (a trace that follows may take them; entry_vals_free). */
static int call_entry(kn_fn *f, CEntry *e, kn_tensor *const *in, kn_tensor **out, int keep)
{
    if (!e->vals && !(e->vals = entry_vals(e))) return kn_errs(f->ctx, KN_ENOMEM, "out of memory running %s", f->name);
    int r = run_entry(f, e, in, out, 0, e->vals, 0);
    if (r != RUN_MISMATCH || !keep) entry_vals_free(f, e);
    return r;
}

/* auto: the dims of in[] whose size differs from the newest entry's become dynamic (logged). */
static void mark_dynamic(kn_fn *f, kn_tensor *const *in, int nin)
{
    const CEntry *e = f->entries;
    if (f->o.dynamic != KN_DYNAMIC_AUTO || !e || e->nin != nin) return;
    for (int k = 0; k < nin; k++) {
        const InGuard *g = &e->ing[k];
        if (g->dtype != in[k]->dtype || g->ndim != in[k]->ndim) continue;
        for (int d = 0; d < g->ndim; d++)
            if (!g->sym[d] && !f->dyn[k][d] && g->shape[d] != in[k]->shape[d]) {
                f->dyn[k][d] = 1;
                log_line(f->ctx, LOG_RECOMPILES, "%s: in[%d] dim %d changed (%lld, then %lld): dynamic from now on",
                         f->name, k, d, (long long)g->shape[d], (long long)in[k]->shape[d]);
            }
    }
}

static kn_status eager_call(kn_fn *f, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    f->eager_calls++;
    kn_status s = f->body(f->ctx, f->user, in, nin, out, nout);
    if (s == KN_OK && f->ctx->status) s = f->ctx->status;
    return s;
}

kn_status kn_call(kn_fn *f, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    if (!f) return KN_EINVAL;
    kn_ctx *ctx = f->ctx;
    if (ctx->status) return ctx->status; /* a pending error is not ours to hide */
    const char *saved = op_enter(ctx, "kn_call");
    kn_status s = KN_OK;
    if (ctx->trace) s = kn_errs(ctx, KN_EUNSUPPORTED, "%s: kn_call inside a traced body", f->name);
    else if (nin < 0 || nin > MAX_IO || nout < 0 || nout > MAX_IO)
        s = kn_errs(ctx, KN_EINVAL, "%d inputs and %d outputs: each must be in 0..%d", nin, nout, MAX_IO);
    else if ((nin && !in) || (nout && !out)) s = kn_errs(ctx, KN_EINVAL, "operand '%s' is NULL", nin && !in ? "in" : "out");
    for (int k = 0; k < nin && !s; k++)
        if (!tensor_check(ctx, in[k], "in")) s = ctx->status;
        else if (!in[k]->st) s = kn_errs(ctx, KN_EINVAL, "in[%d] is a traced tensor", k);
    for (int i = 0; i < f->o.nparams && !s; i++)
        if (!f->o.params[i]) s = kn_errs(ctx, KN_EINVAL, "params[%d] is NULL", i);
    if (s) {
        op_leave(ctx, saved);
        return s;
    }
    f->calls++;
    char why[256] = "";
    CEntry *like = NULL; /* an entry whose guards passed but a value read at a break differed */
    for (CEntry *e = f->entries; e; e = e->next) {
        char w[256];
        if (!guards_pass(f, e, in, nin, nout, w, sizeof w)) {
            if (!why[0]) snprintf(why, sizeof why, "%s", w); /* the newest entry's reason */
            continue;
        }
        int r = call_entry(f, e, in, out, !like);
        if (r != RUN_MISMATCH) {
            op_leave(ctx, saved);
            return (kn_status)r;
        }
        if (!like) like = e;
        if (!why[0]) snprintf(why, sizeof why, "a value read at a graph break differs from the traced one");
    }
    if (f->entries) {
        if (f->nentries >= f->o.recompile_limit) {
            if (!f->warned) {
                char line[400];
                snprintf(line, sizeof line, "kiln: %s: hit the recompile limit (%d); running eagerly from now on "
                         "(last reason: %s)", f->name, f->o.recompile_limit, why);
                if (ctx->log) ctx->log(ctx->log_user, line);
                else port_log(line);
                f->warned = 1;
            }
            s = eager_call(f, in, nin, out, nout);
            op_leave(ctx, saved);
            return s;
        }
        f->recompiles++;
        if (like) log_line(ctx, LOG_RECOMPILES, "%s: tracing again: %s", f->name, why);
        else log_line(ctx, LOG_RECOMPILES, "%s: recompiling (entry %d): %s", f->name, f->nentries + 1, why);
        mark_dynamic(f, in, nin);
    }
    CEntry *made = NULL;
    uint8_t sym[MAX_IO][KN_MAX_DIMS];
    int64_t n = dyn_dims(f, in, nin, sym);
    char w[256];
    if (n && (made = dyn_entry(f, in, nin, nout, n, sym)) && !guards_pass(f, made, in, nin, nout, w, sizeof w)) {
        /* the probes changed what the first one assumed (a flag a traced step sets) */
        log_line(ctx, LOG_RECOMPILES, "%s: the generic entry's guards fail after tracing (%s): specialised", f->name, w);
        entry_unref(made);
        made = NULL;
    }
    if (made) {
        log_guards(f, made);
        made->next = f->entries;
        f->entries = made;
        f->nentries++;
        int r = call_entry(f, made, in, out, 0);
        s = r == RUN_MISMATCH ? kn_errs(ctx, KN_EINVAL, "%s: a generic entry's guard failed at its first call", f->name)
                              : (kn_status)r;
        op_leave(ctx, saved);
        return s;
    }
    if (!ctx->status) s = trace_entry(f, in, nin, out, nout, &made, NULL, 0, like);
    else s = ctx->status;
    if (like) entry_vals_free(f, like);
    if (made && like && same_entry(like, made)) { /* the body did the same with the new value: made replaces like */
        CEntry **p = &f->entries;
        while (*p != like) p = &(*p)->next;
        *p = made;
        made->next = like->next;
        entry_unref(like);
        f->recompiles--;
        log_line(ctx, LOG_RECOMPILES, "%s: the same graphs as before: no recompile, their programs run", f->name);
    } else if (made) {
        made->next = f->entries;
        f->entries = made;
        f->nentries++;
    }
    op_leave(ctx, saved);
    return s;
}

kn_status kn_fn_stats(const kn_fn *f, kn_fn_info *info)
{
    if (!f || !info) return KN_EINVAL;
    memset(info, 0, sizeof *info);
    info->calls = f->calls;
    info->entries = f->nentries;
    info->recompiles = f->recompiles;
    info->graph_breaks = f->graph_breaks;
    info->eager_calls = f->eager_calls;
    info->compiles = f->compiles;
    const CEntry *e = f->entries;
    if (e) {
        info->graphs = e->nsegs + (e->rg != NULL);
        info->kernels = e->kernels;
        info->in_place = e->in_place;
        info->interp_steps = e->interp_steps;
        info->arena_bytes = e->arena_bytes;
        info->code_bytes = e->code_bytes;
        info->compile_ms = e->compile_ms;
        info->ops = e->ops;
        info->nodes = e->nodes;
        info->backend = e->backend;
        for (int k = 0; k < e->nin; k++)
            for (int d = 0; d < e->ing[k].ndim; d++) info->symbolic_dims += e->ing[k].sym[d];
        snprintf(info->arena_expr, sizeof info->arena_expr, "%s", e->arena_expr);
    }
    return KN_OK;
}

void kn_fn_free(kn_fn *f)
{
    if (!f) return;
    kn_ctx *ctx = f->ctx;
    while (f->entries) {
        CEntry *e = f->entries;
        f->entries = e->next;
        entry_unref(e);
    }
    kn_dealloc(ctx, f, sizeof *f);
}
