/*
 * loopopt_mark.c — the loop passes that mark how a target runs a loop (loopopt_int.h): pass 6
 * marks loops parallel (enough work, disjoint writes) and vector (unit-stride, independent
 * iterations); pass 8 marks small inner loops to unroll.
 */
#include <string.h>

#include "loopopt_int.h"

#define DEFAULT_PAR_THRESHOLD 32768
#define DEFAULT_VECTOR_WIDTH 8

/* ---- pass 6: marks ---- */

/* Elements of work in loop l: its extent times the statements below,
 * loops counted by their work (an extent that is a min of a constant, a
 * cascade's level, by that constant); -1 when an extent is not constant. */
static int min_bound(const ExprTable *t, ExprId e, int64_t *c) /* e is min(c, ...): 1 and *c */
{
    const ExprNode *x = expr_node(t, e);
    return x && x->kind == EX_MIN && (expr_as_const(t, x->args[0], c) || expr_as_const(t, x->args[1], c));
}

static int64_t work(Opt *o, IrRef l)
{
    int64_t e, sum = 0, w;
    if (!min_bound(o->ex, o->k->nodes[l].index, &e) && (!opt_extent_at_hint(o, o->k->nodes[l].index, &e) || e < 0))
        return -1;
    for (IrRef s = o->k->nodes[l].child; s; s = o->k->nodes[s].next) {
        w = o->k->nodes[s].kind == IR_LOOP ? work(o, s) : 1;
        if (w < 0) return -1;
        sum = opt_clamp_big(sum + w);
    }
    return opt_mul_ok(e, sum, &w) ? w : BIG;
}

/* What a subtree does, for the marks. */
typedef struct {
    uint8_t *stored, *loaded, *declared; /* per buffer, buffer, accumulator */
    uint8_t *seen;                       /* per node: value visited */
    ExprId *at;                          /* per buffer: the index of its first load or store */
    uint8_t *mixed;                      /* per buffer: loaded or stored at two indices */
    int var;                             /* loads must have stride 0 or 1 in s_var; -1: any */
    int nstores, nloops, outside_acc, decls, updates, dup_store, strided;
} Facts;

static void note_index(Facts *f, int buf, ExprId e)
{
    if (f->at[buf] && f->at[buf] != e) f->mixed[buf] = 1;
    f->at[buf] = e;
}

static void facts_value(Opt *o, IrRef r, Facts *f)
{
    const IrNode *x = &o->k->nodes[r];
    int64_t a;
    ExprId rest;
    if (f->seen[r]) return;
    f->seen[r] = 1;
    if (x->kind == IR_LOAD) {
        f->loaded[x->buf] = 1;
        note_index(f, x->buf, x->index);
        if (f->var >= 0 && !(opt_affine(o->ex, x->index, f->var, &a, &rest) && (a == 0 || a == 1))) f->strided = 1;
        if (x->a && f->var >= 0 && opt_depends(o->k, x->a, f->var, 0)) f->strided = 1; /* a gather across lanes */
        if (x->a) facts_value(o, x->a, f);
    }
    if (x->kind == IR_CHECK) facts_value(o, x->a, f);
    if (x->kind == IR_ACCVAL && !f->declared[x->var]) f->outside_acc = 1;
    if (x->kind == IR_OP || x->kind == IR_RAND) {
        if (x->a) facts_value(o, x->a, f);
        if (x->b) facts_value(o, x->b, f);
        if (x->c) facts_value(o, x->c, f);
    }
}

static void facts_block(Opt *o, IrRef s, Facts *f)
{
    for (; s; s = o->k->nodes[s].next) {
        const IrNode *x = &o->k->nodes[s];
        switch (x->kind) {
        case IR_LOOP: f->nloops++, facts_block(o, x->child, f); break;
        case IR_ACC: f->decls++, f->declared[x->var] = 1; break;
        case IR_UPDATE:
            f->updates++;
            if (!f->declared[x->var]) f->outside_acc = 1;
            facts_value(o, x->a, f);
            break;
        default:
            f->nstores++;
            if (f->stored[x->buf]) f->dup_store = 1;
            f->stored[x->buf] = 1;
            note_index(f, x->buf, x->index);
            facts_value(o, x->a, f);
            if (x->b) facts_value(o, x->b, f);
            if (x->b && f->var >= 0 && opt_depends(o->k, x->b, f->var, 0)) f->strided = 1; /* lanes may collide */
            if (x->op == OP_SUM) f->loaded[x->buf] = 1; /* += reads where it writes */
        }
    }
}

static size_t facts_bytes(const Kernel *k)
{
    return (size_t)k->nbufs * sizeof(ExprId) + 3 * (size_t)k->nbufs + (size_t)k->naccs + k->n + 1;
}

/* Facts of the block from s, loads checked against s_var (-1: not); 0 or
 * KN_ENOMEM. facts_free releases them. */
static int facts(Opt *o, IrRef s, int var, Facts *f)
{
    size_t n = facts_bytes(o->k);
    memset(f, 0, sizeof *f);
    void *mem = kn_alloc(o->ctx, n);
    if (!mem) return KN_ENOMEM;
    memset(mem, 0, n);
    f->at = mem; /* first: aligned for ExprId */
    f->stored = (uint8_t *)(f->at + o->k->nbufs);
    f->loaded = f->stored + o->k->nbufs, f->mixed = f->loaded + o->k->nbufs;
    f->declared = f->mixed + o->k->nbufs;
    f->seen = f->declared + o->k->naccs;
    f->var = var;
    facts_block(o, s, f);
    return 0;
}

static void facts_free(Opt *o, Facts *f) { kn_dealloc(o->ctx, f->at, facts_bytes(o->k)); }

/* The elements of each stored buffer that one iteration of s_v touches:
 * every store, and every load of a buffer that is stored, at rest + a*s_v
 * with one a != 0 per buffer and the rests' union spanning less than |a|,
 * so distinct iterations touch disjoint elements (an iteration may read
 * back what it wrote). The loops between bind their ranges as the walk goes. */
typedef struct {
    int64_t a, lo, hi;
    uint8_t any, bad;
} Region;

static void region_add(Opt *o, Region *r, ExprId index, int v)
{
    int64_t a, l, h;
    ExprId rest;
    if (!opt_affine(o->ex, index, v, &a, &rest) || a == 0 || !opt_range(o, rest, &l, &h) || (r->any && r->a != a)) {
        r->bad = 1;
        return;
    }
    if (!r->any || l < r->lo) r->lo = l;
    if (!r->any || h > r->hi) r->hi = h;
    r->a = a, r->any = 1;
}

static void region_value(Opt *o, IrRef r, int v, const uint8_t *stored, uint8_t *seen, Region *reg)
{
    const IrNode *x = &o->k->nodes[r];
    if (seen[r]) return;
    seen[r] = 1;
    if (x->kind == IR_LOAD && stored[x->buf]) region_add(o, &reg[x->buf], x->index, v);
    if (x->kind == IR_LOAD && stored[x->buf] && x->a) reg[x->buf].bad = 1; /* where it reads depends on data */
    if (x->kind == IR_LOAD && x->a) region_value(o, x->a, v, stored, seen, reg);
    if (x->kind == IR_CHECK) region_value(o, x->a, v, stored, seen, reg);
    if (x->kind != IR_OP && x->kind != IR_RAND) return;
    if (x->a) region_value(o, x->a, v, stored, seen, reg);
    if (x->b) region_value(o, x->b, v, stored, seen, reg);
    if (x->c) region_value(o, x->c, v, stored, seen, reg);
}

static void region_block(Opt *o, IrRef s, int v, const uint8_t *stored, uint8_t *seen, Region *reg)
{
    for (; s; s = o->k->nodes[s].next) {
        IrNode x = o->k->nodes[s];
        if (x.kind == IR_LOOP) {
            opt_bind(o, &x, 1);
            region_block(o, x.child, v, stored, seen, reg);
            opt_bind(o, &x, 0);
            continue;
        }
        if (x.kind == IR_STORE) region_add(o, &reg[x.buf], x.index, v);
        if (x.kind == IR_STORE && x.b) reg[x.buf].bad = 1, region_value(o, x.b, v, stored, seen, reg); /* scatter */
        if (x.kind == IR_STORE || x.kind == IR_UPDATE) region_value(o, x.a, v, stored, seen, reg);
    }
}

/* 1 if the iterations of loop l touch disjoint parts of what it stores, 0
 * if not, -1 out of memory. */
static int disjoint(Opt *o, IrRef l, const uint8_t *stored)
{
    size_t bytes = (size_t)o->k->nbufs * sizeof(Region) + o->k->n;
    Region *reg = kn_alloc(o->ctx, bytes);
    if (!reg) return -1;
    memset(reg, 0, bytes);
    uint8_t *seen = (uint8_t *)(reg + o->k->nbufs);
    region_block(o, o->k->nodes[l].child, o->k->nodes[l].var, stored, seen, reg);
    int ok = 1;
    for (int b = 0; b < o->k->nbufs && ok; b++)
        ok = !stored[b] || o->k->bufs[b].role == BUF_TMP || /* each run writes its tmp before reading it (ir.h) */
             (!reg[b].bad && reg[b].any && reg[b].hi - reg[b].lo < (reg[b].a < 0 ? -reg[b].a : reg[b].a));
    kn_dealloc(o->ctx, reg, bytes);
    return ok;
}

static int parallel_ok(Opt *o, IrRef l, int64_t threshold, int *ok)
{
    Facts f;
    int64_t w = work(o, l);
    *ok = 0;
    if (o->k->nodes[l].dtype != LOOP_SERIAL || w <= threshold) return 0;
    if (facts(o, o->k->nodes[l].child, -1, &f)) return KN_ENOMEM;
    int clean = f.nstores > 0 && !f.outside_acc;
    int d = clean ? disjoint(o, l, f.stored) : 0;
    facts_free(o, &f);
    if (d < 0) return KN_ENOMEM;
    *ok = d;
    return 0;
}

static int vector_ok(Opt *o, IrRef l, uint32_t width, int *ok)
{
    Facts f;
    int64_t e, a;
    ExprId rest;
    const IrNode *x = &o->k->nodes[l];
    *ok = 0;
    if (x->dtype != LOOP_SERIAL || !opt_extent_at_hint(o, x->index, &e) || e < (int64_t)width) return 0;
    int v = x->var;
    IrRef body = x->child;
    if (facts(o, body, v, &f)) return KN_ENOMEM;
    int clean = f.nstores + f.updates > 0 && !f.nloops && !f.decls && !f.dup_store && !f.strided;
    for (int b = 0; b < o->k->nbufs && clean; b++) clean = !(f.stored[b] && f.loaded[b] && f.mixed[b]);
    facts_free(o, &f);
    for (IrRef s = body; s && clean; s = o->k->nodes[s].next) /* stores and updates, as checked */
        clean = o->k->nodes[s].kind == IR_UPDATE || (opt_affine(o->ex, o->k->nodes[s].index, v, &a, &rest) && a == 1);
    *ok = clean;
    return 0;
}

/* Vector marks on the innermost loops of the block from s. */
static int mark_vector(Opt *o, IrRef s, uint32_t width)
{
    for (; s; s = o->k->nodes[s].next) {
        int ok;
        if (o->k->nodes[s].kind != IR_LOOP) continue;
        if (mark_vector(o, o->k->nodes[s].child, width) || vector_ok(o, s, width, &ok)) return KN_ENOMEM;
        if (ok) o->k->nodes[s].dtype = LOOP_VECTOR, o->k->nodes[s].width = width;
    }
    return 0;
}

int opt_mark(Opt *o, const LoopOptions *opt)
{
    int64_t threshold = opt->parallel_threshold > 0 ? opt->parallel_threshold : DEFAULT_PAR_THRESHOLD;
    uint32_t width = opt->vector_width ? opt->vector_width : DEFAULT_VECTOR_WIDTH;
    for (IrRef s = o->k->body; s; s = o->k->nodes[s].next) {
        int ok;
        if (o->k->nodes[s].kind != IR_LOOP) continue;
        if (parallel_ok(o, s, threshold, &ok)) return KN_ENOMEM;
        if (ok) o->k->nodes[s].dtype = LOOP_PARALLEL;
    }
    return mark_vector(o, o->k->body, width);
}

/* ---- pass 8: unroll ----
 * An innermost loop the marks left serial, of constant extent 2 to
 * UNROLL_MAX, whose body is stores and updates of at most UNROLL_NODES
 * value nodes times its extent, becomes unroll(extent): a target writes its
 * iterations out one after the other (the C target: a block each, the var
 * a constant there), so no loop control is left and each copy's index
 * arithmetic folds where the compiler folds constants. The iterations and
 * their operations keep their order. */
#define UNROLL_MAX 8
#define UNROLL_NODES 512

/* Value nodes below r not seen yet, counted up to limit. */
static int64_t count_nodes(const Kernel *k, IrRef r, uint8_t *seen, int64_t limit)
{
    if (seen[r] || limit <= 0) return 0;
    seen[r] = 1;
    const IrNode *x = &k->nodes[r];
    int64_t n = 1;
    for (int i = 0; i < ir_nsrc(x) && n < limit; i++)
        n += count_nodes(k, i == 0 ? x->a : i == 1 ? x->b : x->c, seen, limit - n);
    return n;
}

/* 1 if loop l qualifies, 0 if not, -1 out of memory. */
static int unroll_ok(Opt *o, IrRef l)
{
    const Kernel *k = o->k;
    int64_t e, nodes = 0;
    if (k->nodes[l].dtype != LOOP_SERIAL || !opt_const_extent(o, l, &e) || e < 2 || e > UNROLL_MAX) return 0;
    for (IrRef s = k->nodes[l].child; s; s = k->nodes[s].next)
        if (k->nodes[s].kind != IR_STORE && k->nodes[s].kind != IR_UPDATE) return 0;
    uint8_t *seen = kn_alloc(o->ctx, k->n);
    if (!seen) return -1;
    memset(seen, 0, k->n);
    for (IrRef s = k->nodes[l].child; s; s = k->nodes[s].next) {
        const IrNode *x = &k->nodes[s];
        nodes += count_nodes(k, x->a, seen, UNROLL_NODES + 1);
        if (x->kind == IR_STORE && x->b) nodes += count_nodes(k, x->b, seen, UNROLL_NODES + 1);
    }
    kn_dealloc(o->ctx, seen, k->n);
    return nodes * e <= UNROLL_NODES;
}

int opt_unroll_block(Opt *o, IrRef s)
{
    for (; s; s = o->k->nodes[s].next) {
        if (o->k->nodes[s].kind != IR_LOOP) continue;
        if (opt_unroll_block(o, o->k->nodes[s].child)) return KN_ENOMEM;
        int ok = unroll_ok(o, s);
        if (ok < 0) return KN_ENOMEM;
        if (ok) {
            int64_t e = 0; /* unroll_ok found it constant */
            opt_const_extent(o, s, &e);
            o->k->nodes[s].dtype = LOOP_UNROLL, o->k->nodes[s].width = (uint32_t)e;
        }
    }
    return 0;
}
