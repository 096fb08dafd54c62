/*
 * ir.c — the loop IR of ir.h: builders that intern values, the text form's
 * printer and parser, and the verifier.
 *
 * Nodes live in one array that grows inside the kernel's arena. Value
 * nodes are also entered in an open-addressing hash table keyed by their
 * bytes (built from zeroed structs and copied whole), so building a value that
 * exists returns the old ref and common subexpressions are one node.
 * Statements are linked lists (next) hanging from the kernel's body and
 * from each loop's child.
 *
 * The printer is one switch over value kinds and one over statement kinds;
 * the parser is line-driven (the indent picks the block) with a recursive-
 * descent reader for values, and builds through the same builders, so a
 * parsed kernel is interned exactly as a built one. Every recursion is
 * bounded (IR_MAX_NEST loops, IR_MAX_DEPTH values, EXPR_MAX_DEPTH
 * expressions) and every walk over statements is counted or marked, so any
 * bytes given to ir_parse and any kernel given to ir_print or ir_verify end
 * in text or an error, never in a crash or a hang.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define MAX_REFS (1u << 30) /* nodes per kernel: refs and byte sizes stay far from overflow */
#define MAX_NUM 1000000     /* the largest buffer, loop, accumulator number or width in text */

static const char *const role_names[] = {"in", "out", "tmp"};
static const char *const kind_names[] = {"serial", "parallel", "vector", "unroll", "gpu_block", "gpu_thread"};

/* ---- nodes and interning ---- */

static int is_stmt(unsigned kind) { return kind <= IR_UPDATE; }
static int is_value(unsigned kind) { return kind >= IR_CONST && kind < IR_NKINDS; }
static int has_lanes(unsigned kind) { return kind == LOOP_VECTOR || kind == LOOP_UNROLL; }

/* The node r names, or NULL for 0 or a stranger. */
static const IrNode *node_at(const Kernel *k, IrRef r)
{
    return r > 0 && r < k->n ? &k->nodes[r] : NULL;
}

static int valid_value(const Kernel *k, IrRef r)
{
    const IrNode *x = node_at(k, r);
    return x && is_value(x->kind);
}

static int valid_expr(const Kernel *k, ExprId e)
{
    return k->ex && expr_node(k->ex, e) != NULL;
}

static int is_elementwise(unsigned op)
{
    if (op >= OP_COUNT) return 0;
    OpClass c = kn_opinfo[op].cls;
    return c == OC_UNARY || c == OC_BINARY || c == OC_COMPARE || c == OC_WHERE || c == OC_CAST;
}

static IrNode blank(IrKind kind, unsigned dtype)
{
    IrNode x;
    memset(&x, 0, sizeof x);
    x.kind = (uint8_t)kind;
    x.dtype = (uint8_t)dtype;
    return x;
}

/* Appends a copy of *x: its ref, or 0 when memory runs out. */
static IrRef add_node(Kernel *k, const IrNode *x)
{
    if (k->n == k->cap) {
        uint32_t cap = k->cap ? 2 * k->cap : 64;
        if (cap > MAX_REFS) return 0;
        IrNode *nodes = arena_grow(k->arena, k->nodes, k->cap * sizeof *nodes, cap * sizeof *nodes);
        if (!nodes) return 0;
        k->nodes = nodes;
        k->cap = cap;
        if (k->n == 0) k->n = 1; /* node 0: none */
    }
    memcpy(&k->nodes[k->n], x, sizeof *x);
    return k->n++;
}

/* The node's bytes. */
static uint32_t node_hash(const IrNode *x) { return (uint32_t)kn_hash(x, sizeof *x); }

/* Room for one more node while the table stays at most half full. */
static int reserve_hash(Kernel *k)
{
    uint32_t need = 2 * (k->n + 1), cap = k->hcap ? k->hcap : 128;
    if (need <= k->hcap) return 1;
    while (cap < need) cap *= 2;
    uint32_t *h = arena_alloc(k->arena, cap * sizeof *h);
    if (!h) return 0;
    for (IrRef r = 1; r < k->n; r++) {
        if (!is_value(k->nodes[r].kind)) continue;
        uint32_t i = node_hash(&k->nodes[r]) & (cap - 1);
        while (h[i]) i = (i + 1) & (cap - 1);
        h[i] = r;
    }
    k->hash = h;
    k->hcap = cap;
    return 1;
}

/* The value node equal to *x, added if new; 0 when memory runs out. */
static IrRef intern(Kernel *k, const IrNode *x)
{
    if (!reserve_hash(k)) return 0;
    uint32_t mask = k->hcap - 1, i = node_hash(x) & mask;
    for (; k->hash[i]; i = (i + 1) & mask)
        if (memcmp(&k->nodes[k->hash[i]], x, sizeof *x) == 0) return k->hash[i];
    IrRef r = add_node(k, x);
    if (r) k->hash[i] = r;
    return r;
}

/* ---- the kernel and its buffers ---- */

void ir_init(Kernel *k, Arena *a, ExprTable *ex, const char *name)
{
    size_t i = 0;
    memset(k, 0, sizeof *k);
    k->arena = a;
    k->ex = ex;
    for (; name && name[i] && i < sizeof k->name - 1; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        k->name[i] = ok ? c : '_';
    }
    if (i == 0) k->name[i++] = 'k';
    k->name[i] = '\0';
}

int ir_buf(Kernel *k, kn_dtype dt, BufRole role, ExprId size, uint32_t node)
{
    if ((unsigned)dt >= KN_NDTYPES || (unsigned)role > BUF_TMP || !valid_expr(k, size)) return -1;
    if (k->nbufs == k->bufcap) {
        int cap = k->bufcap ? 2 * k->bufcap : 8;
        if (cap > MAX_NUM) return -1;
        IrBuf *b = arena_grow(k->arena, k->bufs, (size_t)k->bufcap * sizeof *b, (size_t)cap * sizeof *b);
        if (!b) return -1;
        k->bufs = b;
        k->bufcap = cap;
    }
    IrBuf *b = &k->bufs[k->nbufs];
    b->dtype = (uint8_t)dt;
    b->role = (uint8_t)role;
    b->shared = 0;
    b->size = size;
    b->node = node;
    return k->nbufs++;
}

/* ---- values ---- */

/* *v as dtype dt holds it: integers integral and in range, bool 0 or 1, one
 * NaN for floats, +0 for integer zero. 0 if dt cannot hold it. */
static int const_fits(kn_dtype dt, double *v)
{
    if (dt == KN_BOOL) *v = *v != 0;
    else if (dt_is_float(dt)) *v = isnan(*v) ? NAN : *v;
    else if (!dt_is_int(dt) || !isfinite(*v) || *v != floor(*v)) return 0;
    else if (dt == KN_U8 && (*v < 0 || *v > 255)) return 0;
    else if (dt == KN_I32 && (*v < -2147483648.0 || *v > 2147483647.0)) return 0;
    else if (dt == KN_I64 && (*v < -0x1p63 || *v >= 0x1p63)) return 0;
    else if (*v == 0) *v = 0;
    return 1;
}

IrRef ir_const(Kernel *k, kn_dtype dt, double v)
{
    if ((unsigned)dt >= KN_NDTYPES || !const_fits(dt, &v)) return 0;
    IrNode x = blank(IR_CONST, dt);
    x.imm = v;
    return intern(k, &x);
}

IrRef ir_load(Kernel *k, int buf, ExprId index) { return ir_load_at(k, buf, index, 0); }

IrRef ir_load_at(Kernel *k, int buf, ExprId index, IrRef off)
{
    if (buf < 0 || buf >= k->nbufs || !valid_expr(k, index) || (off && !valid_value(k, off))) return 0;
    IrNode x = blank(IR_LOAD, k->bufs[buf].dtype);
    x.buf = buf;
    x.index = index;
    x.a = off;
    return intern(k, &x);
}

IrRef ir_check(Kernel *k, IrRef v, ExprId bound)
{
    if (!valid_value(k, v) || !valid_expr(k, bound)) return 0;
    IrNode x = blank(IR_CHECK, KN_I64);
    x.a = v;
    x.index = bound;
    return intern(k, &x);
}

int ir_nsrc(const IrNode *x)
{
    switch (x->kind) {
    case IR_OP: return x->op < OP_COUNT ? kn_opinfo[x->op].nsrc : 0;
    case IR_LOAD: return x->a != 0;
    case IR_CHECK: return 1;
    case IR_RAND: return 2;
    default: return 0;
    }
}

IrRef ir_index(Kernel *k, ExprId index)
{
    if (!valid_expr(k, index)) return 0;
    IrNode x = blank(IR_INDEX, KN_I64);
    x.index = index;
    return intern(k, &x);
}

/* The dtype op's rule gives for operands a, b (valid values): the first
 * operand's, the second's for where, bool for a compare, cast_to for a cast. */
static int op_dtype(const Kernel *k, unsigned op, int cast_to, IrRef a, IrRef b)
{
    switch (kn_opinfo[op].cls) {
    case OC_COMPARE: return KN_BOOL;
    case OC_WHERE: return k->nodes[b].dtype;
    case OC_CAST: return cast_to;
    default: return k->nodes[a].dtype;
    }
}

IrRef ir_op(Kernel *k, Op op, kn_dtype dt, IrRef a, IrRef b, IrRef c)
{
    IrRef src[3] = {a, b, c};
    if (!is_elementwise(op) || (unsigned)dt >= KN_NDTYPES) return 0;
    for (int i = 0; i < 3; i++)
        if (i < kn_opinfo[op].nsrc ? !valid_value(k, src[i]) : src[i] != 0) return 0;
    if (op_dtype(k, op, dt, a, b) != (int)dt) return 0;
    IrNode x = blank(IR_OP, dt);
    x.op = (uint16_t)op;
    x.a = a, x.b = b, x.c = c;
    return intern(k, &x);
}

/* The first declaration of accumulator acc, or NULL. */
static const IrNode *acc_decl(const Kernel *k, int acc)
{
    for (IrRef r = 1; r < k->n; r++)
        if (k->nodes[r].kind == IR_ACC && k->nodes[r].var == acc) return &k->nodes[r];
    return NULL;
}

IrRef ir_accval(Kernel *k, int acc)
{
    const IrNode *d = acc_decl(k, acc);
    if (!d) return 0;
    IrNode x = blank(IR_ACCVAL, d->dtype);
    x.var = acc;
    return intern(k, &x);
}

IrRef ir_rand(Kernel *k, IrRef key, IrRef ctr, ExprId offset)
{
    if (!valid_value(k, key) || !valid_value(k, ctr) || !valid_expr(k, offset)) return 0;
    IrNode x = blank(IR_RAND, KN_F32);
    x.a = key, x.b = ctr;
    x.index = offset;
    return intern(k, &x);
}

/* ---- statements ---- */

/* Places statement *x after b->tail in b's block and makes it the tail. */
static IrRef place(Kernel *k, IrBlock *b, const IrNode *x)
{
    const IrNode *loop = node_at(k, b->loop), *tail = node_at(k, b->tail);
    if ((b->loop && (!loop || loop->kind != IR_LOOP)) || (b->tail && (!tail || !is_stmt(tail->kind)))) return 0;
    IrRef s = add_node(k, x);
    if (!s) return 0;
    IrRef *link = b->tail ? &k->nodes[b->tail].next : b->loop ? &k->nodes[b->loop].child : &k->body;
    k->nodes[s].next = *link;
    *link = s;
    b->tail = s;
    return s;
}

/* A loop binding symbol s<var>; nvars grows past var. */
static IrRef new_loop(Kernel *k, IrBlock *b, ExprId extent, unsigned kind, uint32_t width, int var)
{
    if (kind > LOOP_GPU_THREAD || !valid_expr(k, extent) || (has_lanes(kind) && width < 1) || var < 0) return 0;
    IrNode x = blank(IR_LOOP, kind);
    x.width = has_lanes(kind) ? width : 1;
    x.index = extent;
    x.var = var;
    IrRef r = place(k, b, &x);
    if (r && var >= k->nvars) k->nvars = var + 1;
    return r;
}

IrRef ir_loop(Kernel *k, IrBlock *b, ExprId extent, LoopKind kind, uint32_t width)
{
    return new_loop(k, b, extent, kind, width, k->nvars);
}

IrRef ir_store(Kernel *k, IrBlock *b, int buf, ExprId index, IrRef value)
{
    return ir_store_at(k, b, buf, index, 0, value, 0);
}

IrRef ir_store_at(Kernel *k, IrBlock *b, int buf, ExprId index, IrRef off, IrRef value, int add)
{
    if (buf < 0 || buf >= k->nbufs || !valid_expr(k, index) || !valid_value(k, value) || (off && !valid_value(k, off)))
        return 0;
    IrNode x = blank(IR_STORE, 0);
    x.buf = buf;
    x.index = index;
    x.a = value;
    x.b = off;
    x.op = (uint16_t)(add ? OP_SUM : 0);
    return place(k, b, &x);
}

/* The declaration of accumulator acc; naccs grows past it. */
static IrRef new_acc(Kernel *k, IrBlock *b, unsigned op, kn_dtype dt, int acc)
{
    if ((op != OP_SUM && op != OP_RMAX) || (unsigned)dt >= KN_NDTYPES || acc < 0) return 0;
    IrNode x = blank(IR_ACC, dt);
    x.op = (uint16_t)op;
    x.var = acc;
    IrRef r = place(k, b, &x);
    if (r && acc >= k->naccs) k->naccs = acc + 1;
    return r;
}

int ir_acc(Kernel *k, IrBlock *b, Op op, kn_dtype dt)
{
    return new_acc(k, b, op, dt, k->naccs) ? k->naccs - 1 : -1;
}

IrRef ir_update(Kernel *k, IrBlock *b, int acc, IrRef value)
{
    const IrNode *d = acc_decl(k, acc);
    if (!d || !valid_value(k, value)) return 0;
    IrNode x = blank(IR_UPDATE, 0);
    x.op = d->op;
    x.var = acc;
    x.a = value;
    return place(k, b, &x);
}

/* ---- printing ---- */

typedef struct {
    char *buf;
    size_t cap, len; /* len: what the whole text needs so far */
    size_t stop;     /* values stop expanding past this length (messages need no more) */
} Out;

static void put(Out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->len < o->cap ? o->buf + o->len : NULL, o->len < o->cap ? o->cap - o->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) o->len += (size_t)n;
}

static void put_expr(Out *o, const Kernel *k, ExprId e)
{
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    if (!k->ex) put(o, "?");
    else o->len += expr_print(k->ex, e, room ? o->buf + o->len : NULL, room);
}

/* The shortest %g text that reads back as v exactly (%.17g always does). */
static void put_number(Out *o, double v)
{
    char s[32];
    if (isnan(v)) put(o, "nan");
    else if (isinf(v)) put(o, v < 0 ? "-inf" : "inf");
    else {
        for (int p = 1; p <= 17; p++) {
            snprintf(s, sizeof s, "%.*g", p, v);
            if (strtod(s, NULL) == v) break;
        }
        put(o, "%s", s);
    }
}

static const char *acc_op_name(unsigned op) { return op == OP_SUM ? "sum" : op == OP_RMAX ? "max" : "?"; }

static void put_value(Out *o, const Kernel *k, IrRef r, IrRef below, int depth);

/* name(a, b, c), or cast.DT(a), of node r */
static void put_op(Out *o, const Kernel *k, IrRef r, const IrNode *x, int depth)
{
    IrRef src[3] = {x->a, x->b, x->c};
    if (!is_elementwise(x->op)) {
        put(o, "?");
        return;
    }
    if (kn_opinfo[x->op].cls == OC_CAST) put(o, "cast.%s(", kn_dtype_name((kn_dtype)x->dtype));
    else put(o, "%s(", kn_opinfo[x->op].name);
    for (int i = 0; i < kn_opinfo[x->op].nsrc; i++) {
        if (i) put(o, ", ");
        put_value(o, k, src[i], r, depth + 1);
    }
    put(o, ")");
}

/* A value inline, as an expression; "?" for what is not a value older
 * than below (so a broken kernel's cycles end) or nests too deep. */
static void put_value(Out *o, const Kernel *k, IrRef r, IrRef below, int depth)
{
    const IrNode *x = r < below ? node_at(k, r) : NULL;
    if (o->len > o->stop) return;
    if (!x || !is_value(x->kind) || depth >= IR_MAX_DEPTH) {
        put(o, "?");
        return;
    }
    switch (x->kind) {
    case IR_CONST:
        put_number(o, x->imm);
        if (x->dtype != KN_F32) put(o, ":%s", kn_dtype_name((kn_dtype)x->dtype));
        break;
    case IR_LOAD:
        put(o, "b%d[", (int)x->buf), put_expr(o, k, x->index);
        if (x->a) put(o, "; "), put_value(o, k, x->a, r, depth + 1);
        put(o, "]");
        break;
    case IR_CHECK:
        put(o, "check("), put_value(o, k, x->a, r, depth + 1), put(o, ", "), put_expr(o, k, x->index), put(o, ")");
        break;
    case IR_ACCVAL: put(o, "a%d", (int)x->var); break;
    case IR_INDEX: put(o, "idx("), put_expr(o, k, x->index), put(o, ")"); break;
    case IR_RAND:
        put(o, "rand("), put_value(o, k, x->a, r, depth + 1), put(o, ", "), put_value(o, k, x->b, r, depth + 1);
        put(o, ", "), put_expr(o, k, x->index), put(o, ")");
        break;
    default: put_op(o, k, r, x, depth); break;
    }
}

/* One statement's line, without indent or newline (a loop: its header). */
static void put_stmt(Out *o, const Kernel *k, const IrNode *x)
{
    switch (x->kind) {
    case IR_LOOP:
        put(o, "for s%d in ", (int)x->var), put_expr(o, k, x->index);
        if (x->dtype > LOOP_GPU_THREAD) put(o, " ?");
        else if (x->dtype != LOOP_SERIAL) put(o, " %s", kind_names[x->dtype]);
        if (has_lanes(x->dtype)) put(o, "(%u)", (unsigned)x->width);
        break;
    case IR_STORE:
        put(o, "b%d[", (int)x->buf), put_expr(o, k, x->index);
        if (x->b) put(o, "; "), put_value(o, k, x->b, k->n, 0);
        put(o, x->op == OP_SUM ? "] += " : x->op ? "] ?= " : "] = ");
        put_value(o, k, x->a, k->n, 0);
        break;
    case IR_ACC:
        put(o, "acc a%d %s %s", (int)x->var, kn_dtype_name((kn_dtype)x->dtype), acc_op_name(x->op));
        break;
    default:
        put(o, "a%d %s ", (int)x->var, x->op == OP_SUM ? "+=" : x->op == OP_RMAX ? "max=" : "?=");
        put_value(o, k, x->a, k->n, 0);
        break;
    }
}

/* The block from s on at nesting level; *budget (statements left to print)
 * ends a cyclic list. */
static void put_block(Out *o, const Kernel *k, IrRef s, int level, uint32_t *budget)
{
    for (; s && *budget; s = k->nodes[s].next) {
        const IrNode *x = node_at(k, s);
        put(o, "%*s", 2 * level + 2, "");
        if (!x || !is_stmt(x->kind)) {
            put(o, "?\n");
            return;
        }
        (*budget)--;
        put_stmt(o, k, x);
        put(o, "\n");
        if (x->kind == IR_LOOP && level < IR_MAX_NEST) put_block(o, k, x->child, level + 1, budget);
    }
}

size_t ir_print(const Kernel *k, char *buf, size_t cap)
{
    Out o = {buf, buf ? cap : 0, 0, SIZE_MAX};
    uint32_t budget = k->n;
    put(&o, "kernel %.31s(", k->name);
    for (int i = 0; i < k->nbufs; i++) {
        const IrBuf *b = &k->bufs[i];
        put(&o, "%s%s b%d %s[", i ? ", " : "", b->role <= BUF_TMP ? role_names[b->role] : "?", i,
            kn_dtype_name((kn_dtype)b->dtype));
        put_expr(&o, k, b->size);
        put(&o, "]");
    }
    put(&o, ")\n");
    put_block(&o, k, k->body, 0, &budget);
    return o.len;
}

/* ---- parsing: line by line; the grammar is in ir.h ---- */

typedef struct {
    Kernel *k;
    const char *p;    /* the next byte of the current line */
    const char *eol;  /* the end of the current line: its '\n' or the NUL */
    const char *next; /* the start of the next line, NULL after the last */
    int line;         /* 1-based */
    int depth;        /* values being read, nested */
    int failed;
    char msg[200];    /* the first error */
} Parser;

/* Records the first error; returns 0 (as a failed ref or a failed int). */
static IrRef fail(Parser *P, const char *fmt, ...)
{
    if (!P->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(P->msg, sizeof P->msg, fmt, ap);
        va_end(ap);
        P->failed = 1;
    }
    return 0;
}

/* Byte i from p, or 0 past the end of the line. */
static char ch(const Parser *P, size_t i) { return P->p + i < P->eol ? P->p[i] : '\0'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.'; }

static void skip_sp(Parser *P)
{
    while (P->p < P->eol && *P->p == ' ') P->p++;
}

static int accept(Parser *P, const char *tok)
{
    size_t n = strlen(tok);
    skip_sp(P);
    if ((size_t)(P->eol - P->p) < n || memcmp(P->p, tok, n) != 0) return 0;
    P->p += n;
    return 1;
}

static int expect(Parser *P, const char *tok)
{
    return accept(P, tok) || fail(P, "expected '%s'", tok);
}

/* A word (letters, digits, '_', '.') into w: its length, 0 if none or too long. */
static size_t word(Parser *P, char *w, size_t cap)
{
    size_t n = 0;
    skip_sp(P);
    while (is_word(ch(P, n))) n++;
    if (n == 0 || n >= cap) return 0;
    memcpy(w, P->p, n);
    w[n] = '\0';
    P->p += n;
    return n;
}

static int expect_word(Parser *P, const char *want)
{
    char w[16];
    return (word(P, w, sizeof w) && strcmp(w, want) == 0) || fail(P, "expected '%s'", want);
}

/* Decimal digits at p, at most limit. */
static int number(Parser *P, uint64_t limit, uint64_t *v)
{
    uint64_t x = 0;
    if (!is_digit(ch(P, 0))) return fail(P, "expected a number");
    for (; is_digit(ch(P, 0)); P->p++) {
        unsigned d = (unsigned)(*P->p - '0');
        if (x > (limit - d) / 10) return fail(P, "number out of range");
        x = x * 10 + d;
    }
    *v = x;
    return 1;
}

/* prefix and a number: b3, a0, s2 */
static int numbered(Parser *P, char prefix, int *out)
{
    uint64_t v;
    skip_sp(P);
    if (ch(P, 0) != prefix || !is_digit(ch(P, 1))) return fail(P, "expected %c and a number", prefix);
    P->p++;
    if (!number(P, MAX_NUM, &v)) return 0;
    *out = (int)v;
    return 1;
}

static int p_dtype(Parser *P)
{
    char w[16];
    if (word(P, w, sizeof w))
        for (int i = 0; i < KN_NDTYPES; i++)
            if (strcmp(w, kn_dtype_name((kn_dtype)i)) == 0) return i;
    fail(P, "expected a dtype");
    return -1;
}

/* The expression text [from, to) read into k's table. */
static int expr_text(Parser *P, const char *from, const char *to, ExprId *e)
{
    char s[512];
    size_t n = (size_t)(to - from);
    if (n >= sizeof s) return fail(P, "expression too long");
    memcpy(s, from, n);
    s[n] = '\0';
    if (expr_parse(P->k->ex, s, e) != 0) return fail(P, "bad expression '%s': %s", s, P->k->ex->err);
    return 1;
}

/* The expression up to close (']', or ')' matching any '(' inside); p
 * moves past close. */
static int expr_until(Parser *P, char close, ExprId *e)
{
    const char *q = P->p;
    int open = 0;
    for (; q < P->eol && !(*q == close && open == 0); q++) open += *q == '(' ? 1 : *q == ')' ? -1 : 0;
    if (q == P->eol) return fail(P, "expected '%c'", close);
    if (!expr_text(P, P->p, q, e)) return 0;
    P->p = q + 1;
    return 1;
}

static IrRef p_value(Parser *P);

/* "[" read: EXPR [";" value] "]", the index and the offset (0 if none). */
static int p_at(Parser *P, ExprId *e, IrRef *off)
{
    const char *q = P->p;
    int open = 0;
    for (; q < P->eol && !((*q == ']' || *q == ';') && open == 0); q++) open += *q == '(' ? 1 : *q == ')' ? -1 : 0;
    if (q == P->eol) return fail(P, "expected ']'");
    if (!expr_text(P, P->p, q, e)) return 0;
    P->p = q + 1;
    *off = 0;
    if (*q == ']') return 1;
    return (*off = p_value(P)) && expect(P, "]");
}

/* The length of the number at p: [-]digits[.digits][e[+-]digits], [-]inf
 * or nan; 0 if there is none. */
static size_t number_len(const Parser *P)
{
    size_t n = ch(P, 0) == '-', digits = 0;
    if (ch(P, n) == 'i' && ch(P, n + 1) == 'n' && ch(P, n + 2) == 'f') return n + 3;
    if (n == 0 && ch(P, 0) == 'n' && ch(P, 1) == 'a' && ch(P, 2) == 'n') return 3;
    for (; is_digit(ch(P, n)); n++) digits++;
    if (ch(P, n) == '.')
        for (n++; is_digit(ch(P, n)); n++) digits++;
    if (digits && (ch(P, n) == 'e' || ch(P, n) == 'E')) {
        size_t e = n + 1 + (ch(P, n + 1) == '+' || ch(P, n + 1) == '-');
        if (is_digit(ch(P, e)))
            for (n = e; is_digit(ch(P, n)); n++) {}
    }
    return digits ? n : 0;
}

/* NUMBER [":" DTYPE] at p */
static IrRef p_const(Parser *P)
{
    char s[48];
    size_t n = number_len(P);
    if (n == 0) return fail(P, "expected a value");
    if (n >= sizeof s) return fail(P, "number too long");
    memcpy(s, P->p, n);
    s[n] = '\0';
    P->p += n;
    int dt = accept(P, ":") ? p_dtype(P) : KN_F32;
    if (dt < 0) return 0;
    IrRef r = ir_const(P->k, (kn_dtype)dt, strtod(s, NULL));
    return r ? r : fail(P, "%s is not a %s constant (or out of memory)", s, kn_dtype_name((kn_dtype)dt));
}

/* name(value, ...) or cast.DT(value); the name is read */
static IrRef p_op(Parser *P, const char *name)
{
    IrRef src[3] = {0, 0, 0};
    int op = -1, cast_to = -1;
    for (int i = 0; i < OP_COUNT && op < 0; i++)
        if (strcmp(name, kn_opinfo[i].name) == 0 && is_elementwise((unsigned)i) && kn_opinfo[i].cls != OC_CAST) op = i;
    for (int i = 0; i < KN_NDTYPES && op < 0; i++)
        if (strncmp(name, "cast.", 5) == 0 && strcmp(name + 5, kn_dtype_name((kn_dtype)i)) == 0) op = OP_CAST, cast_to = i;
    if (op < 0) return fail(P, "unknown op '%s'", name);
    if (!expect(P, "(")) return 0;
    for (int i = 0; i < kn_opinfo[op].nsrc; i++)
        if ((i && !expect(P, ",")) || !(src[i] = p_value(P))) return 0;
    if (!expect(P, ")")) return 0;
    int dt = op_dtype(P->k, (unsigned)op, cast_to, src[0], src[1]);
    IrRef r = ir_op(P->k, (Op)op, (kn_dtype)dt, src[0], src[1], src[2]);
    return r ? r : fail(P, "out of memory");
}

/* A load, an accumulator, idx(...) or rand(...), after its first word or
 * letter; the other words name ops. */
static IrRef p_named(Parser *P)
{
    char w[32];
    int n;
    ExprId e;
    IrRef r, key;
    if (ch(P, 0) == 'b' && is_digit(ch(P, 1))) {
        if (!numbered(P, 'b', &n) || !expect(P, "[") || !p_at(P, &e, &r)) return 0;
        return (r = ir_load_at(P->k, n, e, r)) ? r : fail(P, "unknown buffer b%d", n);
    }
    if (ch(P, 0) == 'a' && is_digit(ch(P, 1))) {
        if (!numbered(P, 'a', &n)) return 0;
        return (r = ir_accval(P->k, n)) ? r : fail(P, "accumulator a%d is not declared", n);
    }
    if (!word(P, w, sizeof w)) return fail(P, "expected a value");
    if (strcmp(w, "idx") == 0) {
        if (!expect(P, "(") || !expr_until(P, ')', &e)) return 0;
        return (r = ir_index(P->k, e)) ? r : fail(P, "out of memory");
    }
    if (strcmp(w, "rand") == 0) {
        if (!expect(P, "(") || !(key = p_value(P)) || !expect(P, ",") || !(r = p_value(P)) || !expect(P, ",") ||
            !expr_until(P, ')', &e))
            return 0;
        return (r = ir_rand(P->k, key, r, e)) ? r : fail(P, "out of memory");
    }
    if (strcmp(w, "check") == 0) {
        if (!expect(P, "(") || !(r = p_value(P)) || !expect(P, ",") || !expr_until(P, ')', &e)) return 0;
        return (r = ir_check(P->k, r, e)) ? r : fail(P, "out of memory");
    }
    return p_op(P, w);
}

/* value: a constant or a named value, at most IR_MAX_DEPTH deep */
static IrRef p_value(Parser *P)
{
    IrRef r;
    if (++P->depth > IR_MAX_DEPTH) return fail(P, "values nested deeper than %d", IR_MAX_DEPTH);
    skip_sp(P);
    char c = ch(P, 0), c1 = ch(P, 1), c2 = ch(P, 2), c3 = ch(P, 3);
    int special = ((c == 'i' && c1 == 'n' && c2 == 'f') || (c == 'n' && c1 == 'a' && c2 == 'n')) && !is_word(c3);
    if (c == '-' || c == '.' || is_digit(c) || special) r = p_const(P);
    else r = p_named(P);
    P->depth--;
    return r;
}

/* [kind] at the end of a for line: nothing (serial), a kind's name, or
 * vector(W) / unroll(W) */
static int p_kind(Parser *P, unsigned *kind, uint64_t *width)
{
    char w[16];
    skip_sp(P);
    if (P->p == P->eol) return 1;
    if (!word(P, w, sizeof w)) return fail(P, "expected a loop kind");
    for (unsigned i = LOOP_PARALLEL; i <= LOOP_GPU_THREAD; i++)
        if (strcmp(w, kind_names[i]) == 0) *kind = i;
    if (*kind == LOOP_SERIAL) return fail(P, "unknown loop kind '%s'", w);
    if (!has_lanes(*kind)) return 1;
    if (!expect(P, "(") || (skip_sp(P), !number(P, MAX_NUM, width)) || !expect(P, ")")) return 0;
    return *width >= 1 || fail(P, "%s width must be at least 1", w);
}

/* "for" read: s<var> "in" EXTENT [kind]; the extent runs to a space */
static IrRef p_for(Parser *P, IrBlock *b)
{
    int var;
    uint64_t width = 1;
    unsigned kind = LOOP_SERIAL;
    ExprId extent;
    if (!numbered(P, 's', &var) || !expect_word(P, "in")) return 0;
    skip_sp(P);
    const char *end = P->p;
    while (end < P->eol && *end != ' ') end++;
    if (!expr_text(P, P->p, end, &extent)) return 0;
    P->p = end;
    if (!p_kind(P, &kind, &width)) return 0;
    IrRef r = new_loop(P->k, b, extent, kind, (uint32_t)width, var);
    return r ? r : fail(P, "out of memory");
}

/* "acc" read: a<n> DTYPE ("sum" | "max") */
static IrRef p_acc(Parser *P, IrBlock *b)
{
    int acc, dt;
    char w[8];
    if (!numbered(P, 'a', &acc) || (dt = p_dtype(P)) < 0) return 0;
    if (!word(P, w, sizeof w) || (strcmp(w, "sum") != 0 && strcmp(w, "max") != 0))
        return fail(P, "expected sum or max");
    if (acc_decl(P->k, acc)) return fail(P, "accumulator a%d declared twice", acc);
    IrRef r = new_acc(P->k, b, w[0] == 's' ? OP_SUM : OP_RMAX, (kn_dtype)dt, acc);
    return r ? r : fail(P, "out of memory");
}

/* b<n> "[" EXPR [";" value] "]" ("=" | "+=") value */
static IrRef p_store(Parser *P, IrBlock *b)
{
    int buf, add;
    ExprId e;
    IrRef v, r, off;
    if (!numbered(P, 'b', &buf)) return 0;
    if (buf >= P->k->nbufs) return fail(P, "unknown buffer b%d", buf);
    if (!expect(P, "[") || !p_at(P, &e, &off)) return 0;
    add = accept(P, "+=");
    if ((!add && !expect(P, "=")) || !(v = p_value(P))) return 0;
    return (r = ir_store_at(P->k, b, buf, e, off, v, add)) ? r : fail(P, "out of memory");
}

/* a<n> ("+=" | "max=") value */
static IrRef p_update(Parser *P, IrBlock *b)
{
    int acc;
    IrRef v, r;
    if (!numbered(P, 'a', &acc)) return 0;
    unsigned op = accept(P, "+=") ? OP_SUM : accept(P, "max=") ? OP_RMAX : OP_COUNT;
    if (op == OP_COUNT) return fail(P, "expected += or max=");
    const IrNode *d = acc_decl(P->k, acc);
    if (!d) return fail(P, "accumulator a%d is not declared", acc);
    if (d->op != op) return fail(P, "a%d is a %s accumulator", acc, acc_op_name(d->op));
    if (!(v = p_value(P))) return 0;
    return (r = ir_update(P->k, b, acc, v)) ? r : fail(P, "out of memory");
}

static IrRef p_stmt(Parser *P, IrBlock *b)
{
    char w[8];
    if (ch(P, 0) == 'b' && is_digit(ch(P, 1))) return p_store(P, b);
    if (ch(P, 0) == 'a' && is_digit(ch(P, 1))) return p_update(P, b);
    size_t n = word(P, w, sizeof w);
    if (n && strcmp(w, "for") == 0) return p_for(P, b);
    if (n && strcmp(w, "acc") == 0) return p_acc(P, b);
    return fail(P, "expected for, acc, a store or an update");
}

static int end_of_line(Parser *P)
{
    skip_sp(P);
    return P->p == P->eol || fail(P, "unexpected text at the end of the line");
}

/* Moves to the next line; 0 at the end of the text. */
static int next_line(Parser *P)
{
    if (!P->next || !*P->next) return 0;
    P->line++;
    P->p = P->next;
    P->eol = P->p + strcspn(P->p, "\n");
    P->next = *P->eol ? P->eol + 1 : NULL;
    return 1;
}

/* ROLE b<n> DTYPE "[" EXPR "]" */
static int p_buffer(Parser *P)
{
    char w[8];
    int role = -1, n, dt;
    ExprId size;
    if (word(P, w, sizeof w))
        for (int i = 0; i <= BUF_TMP; i++)
            if (strcmp(w, role_names[i]) == 0) role = i;
    if (role < 0) return fail(P, "expected in, out or tmp");
    if (!numbered(P, 'b', &n) || (dt = p_dtype(P)) < 0) return 0;
    if (n != P->k->nbufs) return fail(P, "buffers must be numbered in order: expected b%d", P->k->nbufs);
    if (!expect(P, "[") || !expr_until(P, ']', &size)) return 0;
    return ir_buf(P->k, (kn_dtype)dt, (BufRole)role, size, 0) >= 0 || fail(P, "out of memory");
}

/* "kernel" NAME "(" [buffer ("," buffer)*] ")" */
static int p_header(Parser *P)
{
    size_t n = 0;
    if (!expect_word(P, "kernel")) return 0;
    skip_sp(P);
    while (is_word(ch(P, n)) && ch(P, n) != '.') n++;
    if (n == 0 || n >= sizeof P->k->name) return fail(P, "expected a kernel name of 1 to 31 letters, digits or _");
    memcpy(P->k->name, P->p, n);
    P->k->name[n] = '\0';
    P->p += n;
    if (!expect(P, "(")) return 0;
    if (!accept(P, ")")) {
        do
            if (!p_buffer(P)) return 0;
        while (accept(P, ","));
        if (!expect(P, ")")) return 0;
    }
    return end_of_line(P);
}

/* One statement line; blocks[l] is the block of level l, open the deepest
 * level the line may take (one below a loop just read). */
static int p_line(Parser *P, IrBlock *blocks, int *open)
{
    size_t sp = 0;
    while (ch(P, sp) == ' ') sp++;
    if (P->p + sp == P->eol) return fail(P, "empty line");
    if (sp < 2 || sp % 2) return fail(P, "indent must be two spaces per level");
    int level = (int)(sp / 2) - 1;
    if (level > *open) return fail(P, "indented deeper than its block");
    P->p += sp;
    IrRef s = p_stmt(P, &blocks[level]);
    if (!s || !end_of_line(P)) return 0;
    *open = level;
    if (P->k->nodes[s].kind != IR_LOOP) return 1;
    if (level + 1 > IR_MAX_NEST) return fail(P, "loops nested deeper than %d", IR_MAX_NEST);
    blocks[level + 1] = (IrBlock){s, 0};
    *open = level + 1;
    return 1;
}

int ir_parse(Kernel *k, const char *text, char *why, size_t whycap)
{
    Parser P;
    IrBlock blocks[IR_MAX_NEST + 1];
    int open = 0;
    memset(&P, 0, sizeof P);
    P.k = k;
    P.next = text;
    blocks[0] = (IrBlock){0, 0};
    if (!text || !k->ex) fail(&P, "no text or no expression table");
    else if (k->n > 1 || k->nbufs || k->body || k->nvars || k->naccs) fail(&P, "the kernel is not empty");
    else if (!next_line(&P)) fail(&P, "no kernel header");
    else p_header(&P);
    while (!P.failed && next_line(&P)) p_line(&P, blocks, &open);
    if (P.failed && why && whycap) snprintf(why, whycap, "line %d: %s", P.line, P.msg);
    else if (why && whycap) why[0] = '\0';
    return P.failed ? -1 : 0;
}

/* ---- verifying ---- */

/* The blocks enclosing the statement being checked, innermost first. */
typedef struct Scope {
    const struct Scope *up;
    IrRef first, at; /* the block's first statement; the one being checked in it */
    int var;         /* the var of the loop whose body this is; -1 at top level */
} Scope;

#define STMT_SEEN UINT32_MAX

typedef struct {
    kn_ctx *ctx;
    const Kernel *k;
    uint32_t *seen;   /* per node: STMT_SEEN, or the serial of the last statement that reached the value */
    uint16_t *height; /* per node: values nested in it, itself included, capped at IR_MAX_DEPTH + 1 */
    uint32_t serial;
    IrRef stmt;       /* the statement being checked, 0 for the header */
    const Scope *sc;
} Verifier;

/* Reports reason for the statement being checked; returns -1. */
static int bad(Verifier *v, const char *fmt, ...)
{
    char why[256], line[160];
    Out o = {line, sizeof line, 0, sizeof line};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (v->stmt) put_stmt(&o, v->k, &v->k->nodes[v->stmt]);
    else put(&o, "kernel %.31s(...)", v->k->name);
    if (o.len >= sizeof line) memcpy(line + sizeof line - 4, "...", 4);
    kn_errs(v->ctx, KN_EINVAL, "verify: kernel %.31s: `%s`: %s", v->k->name, line, why);
    return -1;
}

static int bound(const Scope *sc, int64_t var)
{
    for (; sc; sc = sc->up)
        if (sc->var >= 0 && sc->var == var) return 1;
    return 0;
}

/* Every symbol of e is the var of an enclosing loop. */
static int v_syms(Verifier *v, ExprId e, const char *what)
{
    const ExprNode *x = v->k->ex ? expr_node(v->k->ex, e) : NULL;
    if (!x) return bad(v, "the %s is not a valid expression", what);
    if (x->kind == EX_SYM && x->c < IR_SHAPE_SYM && !bound(v->sc, x->c))
        return bad(v, "s%lld in the %s is not the var of an enclosing loop", (long long)x->c, what);
    for (int i = 0; i < x->n; i++)
        if (v_syms(v, x->args[i], what)) return -1;
    return 0;
}

/* The declaration of acc in a block enclosing the statement, before it. */
static const IrNode *visible(const Verifier *v, int acc)
{
    for (const Scope *sc = v->sc; sc; sc = sc->up)
        for (IrRef s = sc->first; s && s != sc->at; s = v->k->nodes[s].next)
            if (v->k->nodes[s].kind == IR_ACC && v->k->nodes[s].var == acc) return &v->k->nodes[s];
    return NULL;
}

static int v_value(Verifier *v, IrRef r);

/* An IR_OP: its operands older values, its dtypes prim_shape's rule. */
static int v_op(Verifier *v, IrRef r, const IrNode *x)
{
    IrRef src[3] = {x->a, x->b, x->c};
    uint8_t dts[3] = {0, 0, 0}, nds[3] = {0, 0, 0}, odt = 0, ond = 0;
    Dim none[1] = {0}, osh[KN_MAX_DIMS];
    const Dim *shs[3] = {none, none, none};
    Params p;
    if (!is_elementwise(x->op)) return bad(v, "op %u is not an elementwise primitive", (unsigned)x->op);
    const OpInfo *oi = &kn_opinfo[x->op];
    for (int i = 0; i < 3; i++) {
        if (i >= oi->nsrc && src[i]) return bad(v, "%s takes %d operands", oi->name, oi->nsrc);
        if (i >= oi->nsrc) continue;
        if (src[i] == 0 || src[i] >= r) return bad(v, "operand %d of %s is not an older value", i + 1, oi->name);
        if (v_value(v, src[i])) return -1;
        dts[i] = v->k->nodes[src[i]].dtype;
    }
    memset(&p, 0, sizeof p);
    p.dtype = x->dtype;
    if (prim_shape(v->ctx, (Op)x->op, oi->nsrc, dts, nds, shs, &p, &odt, &ond, osh) != KN_OK)
        return bad(v, "%s", v->ctx->err);
    if (odt != x->dtype)
        return bad(v, "%s gives %s, the node says %s", oi->name, kn_dtype_name((kn_dtype)odt),
                   kn_dtype_name((kn_dtype)x->dtype));
    return 0;
}

/* A data-dependent offset: an older i64 value. */
static int v_offset(Verifier *v, IrRef off)
{
    if (!valid_value(v->k, off) || off >= v->k->n) return bad(v, "an offset is not a value");
    if (v_value(v, off)) return -1;
    return v->k->nodes[off].dtype == KN_I64 ? 0 : bad(v, "an offset must be i64");
}

static int v_check(Verifier *v, IrRef r, const IrNode *x)
{
    if (x->dtype != KN_I64) return bad(v, "check() must be i64");
    if (!x->a || x->a >= r || !valid_value(v->k, x->a)) return bad(v, "check()'s operand is not an older value");
    if (v_value(v, x->a)) return -1;
    if (!dt_is_int((kn_dtype)v->k->nodes[x->a].dtype)) return bad(v, "check() takes an integer");
    return v_syms(v, x->index, "bound");
}

/* rand(key, counter, offset): older i64 values, an index. */
static int v_rand(Verifier *v, IrRef r, const IrNode *x)
{
    if (x->dtype != KN_F32) return bad(v, "rand() must be f32");
    for (int i = 0; i < 2; i++) {
        IrRef o = i ? x->b : x->a;
        const char *what = i ? "counter" : "key";
        if (!o || o >= r || !valid_value(v->k, o)) return bad(v, "rand()'s %s is not an older value", what);
        if (v_value(v, o)) return -1;
        if (v->k->nodes[o].dtype != KN_I64) return bad(v, "rand()'s %s must be i64", what);
    }
    return v_syms(v, x->index, "offset");
}

static int v_load(Verifier *v, const IrNode *x)
{
    const Kernel *k = v->k;
    if (x->buf < 0 || x->buf >= k->nbufs) return bad(v, "load from unknown buffer b%d", (int)x->buf);
    if (x->dtype != k->bufs[x->buf].dtype) return bad(v, "a load of b%d is not of its dtype", (int)x->buf);
    return v_syms(v, x->index, "index") || (x->a && v_offset(v, x->a));
}

/* One value and, once per statement, those it uses. */
static int v_value(Verifier *v, IrRef r)
{
    const IrNode *x = node_at(v->k, r);
    double c;
    if (!x || !is_value(x->kind)) return bad(v, "ref %u is not a value", (unsigned)r);
    if (v->seen[r] == v->serial) return 0;
    v->seen[r] = v->serial;
    if (x->dtype >= KN_NDTYPES) return bad(v, "a value has bad dtype %u", (unsigned)x->dtype);
    switch (x->kind) {
    case IR_CONST:
        c = x->imm;
        if (!const_fits((kn_dtype)x->dtype, &c) || memcmp(&c, &x->imm, sizeof c) != 0)
            return bad(v, "constant %g is not a canonical %s", x->imm, kn_dtype_name((kn_dtype)x->dtype));
        return 0;
    case IR_LOAD:
        if (x->a >= r) return bad(v, "a load's offset is not an older value");
        return v_load(v, x);
    case IR_ACCVAL: {
        const IrNode *d = visible(v, x->var);
        if (!d) return bad(v, "a%d is not declared in an enclosing block before this", (int)x->var);
        return d->dtype == x->dtype ? 0 : bad(v, "a value of a%d is not of its dtype", (int)x->var);
    }
    case IR_INDEX:
        return x->dtype == KN_I64 ? v_syms(v, x->index, "index") : bad(v, "idx() must be i64");
    case IR_RAND: return v_rand(v, r, x);
    case IR_CHECK: return v_check(v, r, x);
    default: return v_op(v, r, x);
    }
}

/* The value a statement stores or accumulates, and its dtype. */
static int v_root(Verifier *v, IrRef r, unsigned want)
{
    if (!valid_value(v->k, r)) return bad(v, "ref %u is not a value", (unsigned)r);
    if (v->height[r] > IR_MAX_DEPTH) return bad(v, "values nested deeper than %d", IR_MAX_DEPTH);
    if (v_value(v, r)) return -1;
    if (v->k->nodes[r].dtype != want)
        return bad(v, "the value is %s, not %s", kn_dtype_name((kn_dtype)v->k->nodes[r].dtype),
                   kn_dtype_name((kn_dtype)want));
    return 0;
}

static int v_block(Verifier *v, IrRef first, int var, int level);

static int v_loop(Verifier *v, const IrNode *x, int level)
{
    int64_t ext;
    if (x->dtype > LOOP_GPU_THREAD) return bad(v, "bad loop kind %u", (unsigned)x->dtype);
    if (has_lanes(x->dtype) ? x->width < 1 : x->width != 1)
        return bad(v, "a %s loop with width %u", kind_names[x->dtype], (unsigned)x->width);
    if (level >= IR_MAX_NEST) return bad(v, "loops nested deeper than %d", IR_MAX_NEST);
    if (x->var < 0 || x->var >= v->k->nvars) return bad(v, "s%d is not a loop var of the kernel", (int)x->var);
    if (bound(v->sc, x->var)) return bad(v, "s%d is already bound by an enclosing loop", (int)x->var);
    if (v_syms(v, x->index, "extent")) return -1;
    if (expr_as_const(v->k->ex, x->index, &ext) && ext < 0) return bad(v, "negative extent");
    return v_block(v, x->child, x->var, level + 1);
}

static int v_store(Verifier *v, const IrNode *x)
{
    const Kernel *k = v->k;
    if (x->buf < 0 || x->buf >= k->nbufs) return bad(v, "store to unknown buffer b%d", (int)x->buf);
    if (k->bufs[x->buf].role == BUF_IN) return bad(v, "store to input buffer b%d", (int)x->buf);
    if (x->op != 0 && x->op != OP_SUM) return bad(v, "a store is = or +=");
    if (v_syms(v, x->index, "index") || (x->b && v_offset(v, x->b))) return -1;
    return v_root(v, x->a, k->bufs[x->buf].dtype);
}

static int v_acc(Verifier *v, const IrNode *x)
{
    if (x->op != OP_SUM && x->op != OP_RMAX) return bad(v, "an accumulator's op must be sum or max");
    if (x->dtype >= KN_NDTYPES || x->dtype == KN_BOOL) return bad(v, "bad accumulator dtype");
    if (x->var < 0 || x->var >= v->k->naccs) return bad(v, "a%d is not an accumulator of the kernel", (int)x->var);
    if (acc_decl(v->k, x->var) != x) return bad(v, "a%d is declared twice", (int)x->var);
    return 0;
}

static int v_update(Verifier *v, const IrNode *x)
{
    const IrNode *d = visible(v, x->var);
    if (!d) return bad(v, "a%d is not declared in an enclosing block before this", (int)x->var);
    if (d->op != x->op) return bad(v, "a%d is a %s accumulator", (int)x->var, acc_op_name(d->op));
    return v_root(v, x->a, d->dtype);
}

/* The statements of a block, each reached once; var: the loop var it binds. */
static int v_block(Verifier *v, IrRef first, int var, int level)
{
    Scope sc = {v->sc, first, 0, var};
    int err = 0;
    v->sc = &sc;
    for (IrRef s = first; s && !err; s = v->k->nodes[s].next) {
        const IrNode *x = node_at(v->k, s);
        if (!x || !is_stmt(x->kind)) err = bad(v, "ref %u after this is not a statement", (unsigned)s);
        else if (v->seen[s] == STMT_SEEN) err = bad(v, "statement %u is reached twice (a cycle)", (unsigned)s);
        if (err) break;
        v->seen[s] = STMT_SEEN;
        sc.at = v->stmt = s;
        v->serial++;
        switch (x->kind) {
        case IR_LOOP: err = v_loop(v, x, level); break;
        case IR_STORE: err = v_store(v, x); break;
        case IR_ACC: err = v_acc(v, x); break;
        default: err = v_update(v, x); break;
        }
    }
    v->sc = sc.up;
    return err;
}

/* The kernel's tables and buffers. */
static int v_header(Verifier *v)
{
    const Kernel *k = v->k;
    int64_t size;
    if (!k->ex) return bad(v, "no expression table");
    if (k->n > k->cap || (k->n && !k->nodes) || k->nbufs < 0 || k->nbufs > k->bufcap || (k->body && k->body >= k->n))
        return bad(v, "node or buffer counts out of range");
    for (int i = 0; i < k->nbufs; i++) {
        const IrBuf *b = &k->bufs[i];
        if (b->dtype >= KN_NDTYPES || b->role > BUF_TMP) return bad(v, "b%d has a bad dtype or role", i);
        if (!expr_node(k->ex, b->size)) return bad(v, "b%d has no valid size", i);
        if (expr_as_const(k->ex, b->size, &size) && size < 0) return bad(v, "b%d has a negative size", i);
    }
    return 0;
}

/* Values nested in each node, from the oldest: operands are older. */
static void heights(Verifier *v)
{
    for (IrRef r = 1; r < v->k->n; r++) {
        const IrNode *x = &v->k->nodes[r];
        IrRef src[3] = {x->a, x->b, x->c};
        unsigned h = 0;
        for (int i = 0; i < 3 && is_value(x->kind); i++)
            if (src[i] && src[i] < r && v->height[src[i]] > h) h = v->height[src[i]];
        v->height[r] = (uint16_t)(h <= IR_MAX_DEPTH ? h + 1 : IR_MAX_DEPTH + 1);
    }
}

int ir_verify(kn_ctx *ctx, const Kernel *k)
{
    Verifier v;
    memset(&v, 0, sizeof v);
    v.ctx = ctx;
    v.k = k;
    if (v_header(&v)) return -1;
    size_t bytes = ((size_t)k->n + 1) * (sizeof *v.seen + sizeof *v.height);
    void *mem = kn_alloc(ctx, bytes);
    if (!mem) return kn_errs(ctx, KN_ENOMEM, "verify: kernel %.31s: out of memory", k->name);
    memset(mem, 0, bytes);
    v.seen = mem;
    v.height = (uint16_t *)(v.seen + k->n + 1);
    heights(&v);
    int err = v_block(&v, k->body, -1, 0);
    kn_dealloc(ctx, mem, bytes);
    return err;
}
