/*
 * render_int.h — targets/c: what the files of the C renderer share, and
 * nothing else includes. render.c writes values and statements and drives
 * the whole unit; loop.c writes loop statements (the SIMD dialect's lanes,
 * streams and prefetches), loop_scalar.c the scalar dialect's innermost
 * loops written out; prelude.c holds the fixed text at the top of a unit.
 *
 * Here: the renderer's state (R) and output (Out), the rows of the dtype
 * and op tables, a statement's value DAG, and the few small helpers every
 * part calls (output, IR accessors), as static inline functions. What one
 * file defines for another has its file's prefix: render_, loop_, prelude_.
 */
#ifndef KN_TARGETS_C_RENDER_INT_H
#define KN_TARGETS_C_RENDER_INT_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "render.h"

/* ---- the fixed text (prelude.c) ---- */

extern const char *const prelude_parts[]; /* the helpers of both dialects, in pieces */
extern const size_t prelude_nparts;
extern const char prelude_threads[]; /* the thread pool, for either dialect */
extern const char prelude_simd[];    /* the SIMD dialect's macros, after its instruction set's header */

/* ---- per-dtype strings (render.c: render_dts) ---- */

/* %s is an operand (always an atom or parenthesised). */
typedef struct {
    const char *store; /* element type of a buffer */
    const char *value; /* C type of a value */
    const char *load;  /* buffer element -> value */
    const char *save;  /* value -> buffer element */
    const char *wrap;  /* an op's raw result -> value: rounding to f16/bf16, integer wrapping */
    const char *from_f; /* a float or double -> value, as dt_store */
    const char *fn;    /* libm suffix of a float dtype ("f" or ""), NULL for integers and bool */
} DtFmt;

/* A row of the op table (render.c: render_ops, whose comment tells the columns). */
typedef struct {
    uint8_t wrap;
    const char *flt, *integer, *boolean;
} OpFmt;

extern const DtFmt render_dts[KN_NDTYPES];
extern const OpFmt render_ops[OP_COUNT];

/* An accumulator's start: float and integer. */
static inline const char *acc_init(unsigned op, int fl)
{
    if (op == OP_SUM) return "0";
    return fl ? "-INFINITY" : "INT64_MIN";
}

/* ---- output ---- */

typedef struct {
    char *buf;
    size_t cap, len; /* len: what the whole text needs so far */
} Out;

static inline void put(Out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->len < o->cap ? o->buf + o->len : NULL, o->len < o->cap ? o->cap - o->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) o->len += (size_t)n;
}

static inline void put_str(Out *o, const char *s)
{
    for (; *s; s++, o->len++)
        if (o->len < o->cap) o->buf[o->len] = *s;
}

static inline void put_char(Out *o, char c)
{
    if (o->len < o->cap) o->buf[o->len] = c;
    o->len++;
}

static inline void indent(Out *o, int level) { put(o, "%*s", 4 * level, ""); }

/* ---- a statement's value DAG ---- */

#define DAG_MAX 2048   /* values of one statement that are analysed; beyond, no temporaries */
#define DAG_SLOTS 4096 /* a power of two, twice DAG_MAX */

typedef struct {
    IrRef ref;
    uint8_t uses;    /* edges into it in the statement, counted up to 2 */
    uint8_t load;    /* it is or uses a load */
    uint8_t uncond;  /* evaluated whatever the wheres choose */
    uint8_t visited; /* by the temporaries pass */
    uint8_t live;    /* reached from its statement other than through a hoisted value (un_plan) */
    int temp;        /* its temporary's number, or -1 */
} Val;

typedef struct {
    uint16_t slot[DAG_SLOTS]; /* 1 + index into v; 0 = empty */
    Val v[DAG_MAX];
    int n, full;
} Dag;

typedef struct {
    Out *o;
    const Kernel *k;
    Dag *d;
    int ntemps;       /* temporaries declared in this kernel so far */
    uint8_t *bufused; /* per buffer (up to MAX_BUFS) */
    uint8_t *accread; /* per accumulator (up to MAX_ACCS) */
    IrRef unrounded;  /* a value stored to f16 or bf16: the store rounds it, so it need not */
    const CIsa *isa;  /* the SIMD dialect's instruction set; NULL: the scalar dialect */
    int lane;         /* >= 0: rendering the lanes of vector loop s<lane>: updates go to lane accumulators */
    int stream;       /* >= 0: rendering streamed vector loop s<stream>: its store goes to nt_ (put_stream) */
    int range;        /* >= 0: loop s<range> runs over [lo, hi) (a parallel loop's range function) */
    IrRef shared;     /* the value of consecutive statements, in temporary t<shared_temp> */
    int shared_temp;
    int in_run;       /* rendering a run of stores whose temporaries are declared before the first (put_run) */
    int checks;       /* the kernel has a check(): its functions name the error cell kn_err */
    IrRef pf_row, pf_after; /* after statement pf_after, prefetch loop pf_row's next row (put_prefetch) */
    const struct Unroll *un; /* non-NULL: rendering copy un_u of an unrolled innermost loop's body (put_unrolled) */
    int un_u;
    int tsuffix;      /* temporaries are named t<N>_<un_u>: the copies of a chain of updates (put_chain) */
    IrRef chain;      /* the update statement whose accumulator %a is the chain of copies before un_u */
    int blocks;       /* > 0: innermost loops of this many iterations or more may call the library's vector
                         helpers (loop.c, put_blocks: backend tcc's code runs in this process) */
} R;

#define MAX_BUFS 256 /* buffers whose use is tracked; beyond, all count as used */
#define MAX_ACCS 256

/* The node r names if it is a value older than its user (a broken kernel's
 * cycles end here), else NULL. */
static inline const IrNode *value_at(const Kernel *k, IrRef r, IrRef user)
{
    if (r == 0 || r >= user || r >= k->n) return NULL;
    const IrNode *x = &k->nodes[r];
    return x->kind >= IR_CONST && x->kind < IR_NKINDS ? x : NULL;
}

static inline int nops(const IrNode *x) { return ir_nsrc(x); }

static inline IrRef operand(const IrNode *x, int i) { return i == 0 ? x->a : i == 1 ? x->b : x->c; }

/* The statements of a block, or NULL past a broken kernel's end. */
static inline const IrNode *stmt_at(const R *r, IrRef s) { return s && s < r->k->n ? &r->k->nodes[s] : NULL; }

/* No loop in x's body: a flat loop, whose chunks start at multiples of 16
 * (vector alignment); a loop of rows is cut anywhere. */
static inline int innermost(const R *r, const IrNode *x)
{
    for (IrRef s = x->child; s && s < r->k->n; s = r->k->nodes[s].next)
        if (r->k->nodes[s].kind == IR_LOOP) return 0;
    return 1;
}

/* ---- render.c: values and statements ---- */

void render_put_part(Out *o, const char *fmt, int after); /* fmt up to its "%s", or after it */
void render_put_int(Out *o, int64_t v, int paren);
/* coef * f[0] * ... as a term of a sum: "s0*4", "- s0*4" unless first */
void render_put_term(Out *o, const ExprTable *t, int64_t coef, const ExprId *f, int n, int first);
void render_put_index(Out *o, const ExprTable *t, ExprId e, int paren); /* e as a C int64 expression */
Val *render_dag_find(Dag *d, IrRef ref, int add);
int render_dag_build(R *r, IrRef root, IrRef stmt); /* 0 if the value is too large for the table */
/* A template of the op table: %0 %1 %2 operands, %f libm suffix, %a acc. */
void render_put_tmpl(R *r, const char *t, const IrNode *x, IrRef self, int depth, int acc, int bare);
void render_put_value(R *r, IrRef ref, IrRef user, int depth, int bare);
void render_put_temps(R *r, IrRef ref, IrRef user, int level); /* the temporaries of a value */
void render_put_block(R *r, IrRef s, int level);

/* ---- loop.c, loop_scalar.c: loops ---- */

void loop_put_loop(R *r, const IrNode *x, int level);
void loop_put_prefetch(R *r, const IrNode *x, int level); /* after the first pass of loop x: its next row */
int loop_put_scalar(R *r, const IrNode *x, int level);    /* loop_scalar.c: 1 if it wrote x */
/* e = a*s_v + rest + k with rest's terms free of s_v: 1 (*a, *k), or 0 */
int loop_lin(const ExprTable *t, ExprId e, int v, int64_t *a, int64_t *k);
/* In a copy of an unrolled innermost loop's body (R.un): an access through
 * its stream's pointer, a hoisted value, a chain of updates' accumulator */
int loop_put_access(R *r, int buf, ExprId index);
int loop_put_hoisted(R *r, IrRef ref);
int loop_is_hoisted(const R *r, IrRef ref);
void loop_put_chain(R *r, int u);

#endif
