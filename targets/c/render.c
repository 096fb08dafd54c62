/*
 * render.c — targets/c, scalar dialect: loop-IR kernels (ir.h) to one C99
 * translation unit that cc -std=gnu99 and TinyCC both compile.
 *
 * The text is a prelude of static inline helpers, then one function per
 * kernel, `void NAME(void **b)`, whose buffer i is b[i]. Codegen is from
 * tables, after tinygrad's renderer/cstyle.py: one row per primitive of C
 * templates (`ops`), one row per dtype of how its values are typed, loaded,
 * stored, rounded and converted (`dts`). A dialect for another C compiler
 * (CUDA) overrides rows, not code.
 *
 * Semantics are interp.c's, op by op:
 * - a value of dtype f32 is a float, f64 a double; f16 and bf16 values are
 *   floats rounded back to their dtype after every op (the interpreter
 *   stores every primitive's result in its dtype), so + - * / sqrt on them
 *   give the interpreter's bits exactly (double rounding through double is
 *   innocuous for these); transcendentals and pow use the value's precision
 *   where the interpreter uses double, so they differ by rounding: f64 calls
 *   libm; f32 (and f16, bf16) exp, log, tanh and erf call the prelude's
 *   kn_expf ... kn_erff (branch-free and call-free, so that cc -O3
 *   vectorises their loops without -ffast-math; <= 2 ulp, IEEE specials;
 *   under TinyCC, which vectorises nothing, they are libm's), the others
 *   libm's float functions;
 * - integers and bools compute in uint64 (two's complement wrap) and wrap
 *   back to their dtype after every op, as the interpreter's int64 kernels
 *   followed by dt_store_i do; division by zero and INT64_MIN / -1 give 0;
 * - max and min propagate NaN; a max accumulator takes a NaN and keeps it;
 * - a cast to an integer from a float truncates and saturates as dt_store;
 * - `where` is a C conditional, so only the chosen operand is evaluated:
 *   lowering relies on it to keep out-of-bounds loads of pad unexecuted;
 * - index expressions use floor division and the divisor-signed modulo;
 * - a data-dependent offset adds to its index (gather, scatter_add); check()
 *   is kn_check, which reports an index out of range in the kernel's error
 *   cell, b[nbufs + 1] (after the thread pool), and gives 0 instead; a
 *   store += adds as scatter_add does (floats in their value type, rounded
 *   once on store; integers wrap).
 *
 * A statement's value is a DAG. Values it uses more than once become
 * `const` temporaries declared just before it, in post-order, so text grows
 * linearly. A temporary is evaluated whatever the `where`s choose, so only
 * values the statement evaluates unconditionally, or values with no load
 * below them (which cannot fault), get one; a shared value under a `where`
 * branch that loads renders inline at each use.
 *
 * No allocation: each statement's DAG is analysed in a fixed table on the
 * stack (DAG_MAX values); a larger statement renders without temporaries.
 *
 * Two dialects of the same text: the scalar one (TinyCC, and the oracle)
 * renders every loop serially, its innermost ones written out for a
 * compiler that optimises nothing (put_unrolled); the SIMD one
 * (c_render_isa, for the system compiler) starts with an instruction set's
 * macro header and writes vector loops for its vectoriser: KN_IVDEP on
 * those that store, and lanes for those that accumulate; it prefetches
 * what the hardware prefetcher misses (a row kernel's next row, long
 * streams ahead). In both, a kernel's top-level parallel loops run on the
 * thread pool, chunk by chunk, each iteration as on one thread.
 *
 * Three files: this one writes values, statements and kernels and drives
 * the unit; loop.c writes loops (every form above that replaces a plain
 * loop); prelude.c holds the prelude's text and the instruction sets.
 * render_int.h is what they share.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "render_int.h"
#include "../../src/loopopt.h" /* loopopt_range */
#include "../../port/port.h" /* PORT_PART */

/* ---- per-dtype strings ---- */

const DtFmt render_dts[KN_NDTYPES] = {
    [KN_F32] = {"float", "float", "%s", "%s", "%s", "(float)%s", "f"},
    [KN_F64] = {"double", "double", "%s", "%s", "%s", "(double)%s", ""},
    [KN_F16] = {"uint16_t", "float", "kn_h2f(%s)", "kn_f2h(%s)", "kn_rh(%s)", "kn_rh((float)%s)", "f"},
    [KN_BF16] = {"uint16_t", "float", "kn_b2f(%s)", "kn_f2b(%s)", "kn_rb(%s)", "kn_rb((float)%s)", "f"},
    [KN_I32] = {"int32_t", "int32_t", "%s", "%s", "(int32_t)(uint32_t)(%s)", "(int32_t)(uint32_t)kn_f2i(%s)", NULL},
    [KN_I64] = {"int64_t", "int64_t", "%s", "%s", "(int64_t)(%s)", "kn_f2i(%s)", NULL},
    [KN_BOOL] = {"uint8_t", "uint8_t", "(%s != 0)", "%s", "(%s != 0)", "(%s != 0)", NULL},
    [KN_U8] = {"uint8_t", "uint8_t", "%s", "%s", "(uint8_t)(%s)", "(uint8_t)kn_f2i(%s)", NULL},
};

/* ---- per-op templates ----
 * One row per elementwise primitive, and one per accumulating reduction
 * (the update of an accumulator). flt: for float dtypes, computed in the
 * value's C type; integer: for integers and bool, computed in int64/uint64
 * as interp.c's unary_i and binary_i (which leave an integer's exp, log,
 * ... unchanged); boolean: for bool where it differs from integer (min
 * and max of 0 and 1 are & and |). %0 %1 %2 are the operands, %f the
 * dtype's libm suffix, %a the accumulator. wrap: the result goes through
 * the dtype's wrap. Cast has no row: it depends on the pair of dtypes
 * (put_cast). */
const OpFmt render_ops[OP_COUNT] = {
    [OP_NEG] = {1, "(-%0)", "(0 - (uint64_t)%0)", NULL},
    [OP_EXP] = {1, "kn_exp%f(%0)", "%0", NULL},
    [OP_LOG] = {1, "kn_log%f(%0)", "%0", NULL},
    [OP_SQRT] = {1, "sqrt%f(%0)", "%0", NULL},
    [OP_RECIP] = {1, "(1 / %0)", "kn_irecip(%0)", NULL},
    [OP_SIN] = {1, "sin%f(%0)", "%0", NULL},
    [OP_COS] = {1, "cos%f(%0)", "%0", NULL},
    [OP_TANH] = {1, "kn_tanh%f(%0)", "%0", NULL},
    [OP_ERF] = {1, "kn_erf%f(%0)", "%0", NULL},
    [OP_ABS] = {1, "fabs%f(%0)", "kn_iabs(%0)", NULL},
    [OP_FLOOR] = {1, "floor%f(%0)", "%0", NULL},
    [OP_ADD] = {1, "(%0 + %1)", "((uint64_t)%0 + (uint64_t)%1)", NULL},
    [OP_SUB] = {1, "(%0 - %1)", "((uint64_t)%0 - (uint64_t)%1)", NULL},
    [OP_MUL] = {1, "(%0 * %1)", "((uint64_t)%0 * (uint64_t)%1)", NULL},
    [OP_DIV] = {1, "(%0 / %1)", "kn_idiv(%0, %1)", NULL},
    [OP_MAX] = {0, "kn_max%f(%0, %1)", "kn_imax(%0, %1)", "(%0 | %1)"}, /* one of the operands, or NaN */
    [OP_MIN] = {0, "kn_min%f(%0, %1)", "kn_imin(%0, %1)", "(%0 & %1)"},
    [OP_POW] = {1, "pow%f(%0, %1)", "kn_ipow(%0, %1)", NULL},
    [OP_CMPLT] = {0, "(%0 < %1)", "(%0 < %1)", NULL},
    [OP_CMPEQ] = {0, "(%0 == %1)", "(%0 == %1)", NULL},
    [OP_WHERE] = {0, "(%0 ? %1 : %2)", "(%0 ? %1 : %2)", NULL},
    /* integer accumulators are int64_t whatever their dtype (see put_acc) */
    [OP_SUM] = {1, "(%a + %0)", "(int64_t)((uint64_t)%a + (uint64_t)%0)", NULL},
    [OP_RMAX] = {0, "kn_accmax%f(%a, %0)", "kn_imax(%a, %0)", NULL},
};

/* ---- output ---- */

/* The text of fmt up to its "%s", or after it (after != 0): a one-operand
 * format of the dtype table split around its operand. */
void render_put_part(Out *o, const char *fmt, int after)
{
    const char *s = strstr(fmt, "%s");
    if (after) put_str(o, s + 2);
    else
        for (; fmt < s; fmt++) put_char(o, *fmt);
}

/* The same, less the outer parentheses of a format "(...%s...)" if strip. */
static void put_part_strip(Out *o, const char *fmt, int after, int strip)
{
    const char *s = strstr(fmt, "%s");
    if (!strip || fmt[0] != '(' || fmt[strlen(fmt) - 1] != ')' || strchr(fmt + 1, '(') || strchr(s, ')') != fmt + strlen(fmt) - 1)
        render_put_part(o, fmt, after);
    else if (after)
        for (s += 2; s[1]; s++) put_char(o, *s);
    else
        for (fmt++; fmt < s; fmt++) put_char(o, *fmt);
}

/* ---- index expressions ----
 * Loop variables count up from 0, so a sum of non-negative terms is
 * non-negative and its floor division or modulo by a positive constant is
 * C's / and %; anything else goes through kn_floordiv and kn_floormod. */

static int nonneg(const ExprTable *t, ExprId e)
{
    const ExprNode *x = expr_node(t, e);
    int64_t c;
    if (!x) return 0;
    switch (x->kind) {
    case EX_CONST: return x->c >= 0;
    case EX_SYM: return 1;
    case EX_MUL:
    case EX_ADD:
        if (x->kind == EX_MUL ? x->c <= 0 : x->c < 0) return 0;
        for (int i = 0; i < x->n; i++)
            if (!nonneg(t, x->args[i])) return 0;
        return 1;
    case EX_FLOORDIV: return expr_as_const(t, x->args[1], &c) && c > 0 && nonneg(t, x->args[0]);
    case EX_MOD: return expr_as_const(t, x->args[1], &c) && c > 0;
    case EX_MAX: return nonneg(t, x->args[0]) || nonneg(t, x->args[1]);
    default: return nonneg(t, x->args[0]) && nonneg(t, x->args[1]);
    }
}

void render_put_int(Out *o, int64_t v, int paren)
{
    if (v == INT64_MIN) put_str(o, "INT64_MIN");
    else if (v < 0 && paren) put(o, "(%lld)", (long long)v);
    else put(o, "%lld", (long long)v);
}

/* coef * f[0] * ... as a term of a sum: "s0*4", "- s0*4" unless first */
void render_put_term(Out *o, const ExprTable *t, int64_t coef, const ExprId *f, int n, int first)
{
    int neg = coef < 0 && coef != INT64_MIN;
    if (!first) put_str(o, neg ? " - " : " + ");
    else if (neg) put_str(o, "-");
    for (int i = 0; i < n; i++) {
        if (i) put_char(o, '*');
        render_put_index(o, t, f[i], 1);
    }
    if (coef != 1 && coef != -1) put_char(o, '*'), render_put_int(o, neg ? -coef : coef, 1);
}

/* e as a C int64 expression; paren: it must be an atom (parenthesised). */
void render_put_index(Out *o, const ExprTable *t, ExprId e, int paren)
{
    const ExprNode *x = expr_node(t, e);
    int64_t c;
    if (!x) {
        put_str(o, "KN_BAD_INDEX"); /* does not compile: a broken kernel never runs */
        return;
    }
    switch (x->kind) {
    case EX_CONST: render_put_int(o, x->c, paren); break;
    case EX_SYM: /* a loop var, or a shape symbol: its value at the run (ir.h IR_SHAPE_SYM) */
        if (x->c >= IR_SHAPE_SYM) put(o, "kn_z[%lld]", (long long)(x->c - IR_SHAPE_SYM));
        else put(o, "s%lld", (long long)x->c);
        break;
    case EX_MUL:
        if (paren) put_char(o, '(');
        render_put_term(o, t, x->c, x->args, x->n, 1);
        if (paren) put_char(o, ')');
        break;
    case EX_ADD:
        if (paren) put_char(o, '(');
        for (int i = 0; i < x->n; i++) {
            const ExprNode *y = expr_node(t, x->args[i]);
            if (y && y->kind == EX_MUL) render_put_term(o, t, y->c, y->args, y->n, i == 0);
            else render_put_term(o, t, 1, &x->args[i], 1, i == 0);
        }
        if (x->c > 0) put(o, " + %lld", (long long)x->c);
        else if (x->c == INT64_MIN) put_str(o, " + INT64_MIN");
        else if (x->c < 0) put(o, " - %lld", -(long long)x->c);
        if (paren) put_char(o, ')');
        break;
    case EX_FLOORDIV:
    case EX_MOD:
        if (expr_as_const(t, x->args[1], &c) && c > 0 && nonneg(t, x->args[0])) {
            put_char(o, '(');
            render_put_index(o, t, x->args[0], 1);
            put(o, " %c %lld)", x->kind == EX_MOD ? '%' : '/', (long long)c);
            break;
        }
        /* fall through */
    default:
        put_str(o, x->kind == EX_FLOORDIV ? "kn_floordiv(" : x->kind == EX_MOD ? "kn_floormod(" :
                   x->kind == EX_MAX ? "kn_imax(" : "kn_imin(");
        render_put_index(o, t, x->args[0], 0);
        put_str(o, ", ");
        render_put_index(o, t, x->args[1], 0);
        put_char(o, ')');
    }
}

/* ---- constants ---- */

/* v as a float (suffix "f") or double literal: the shortest that reads back. */
static void put_real(Out *o, double v, int is_float)
{
    char s[40];
    if (isnan(v)) {
        put_str(o, "NAN");
        return;
    }
    if (isinf(v)) {
        put_str(o, v < 0 ? "(-INFINITY)" : "INFINITY");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(s, sizeof s, "%.*g", p, v);
        if (is_float ? (double)strtof(s, NULL) == v : strtod(s, NULL) == v) break;
    }
    if (!strpbrk(s, ".e")) strcat(s, ".0");
    if (v < 0 || (v == 0 && signbit(v))) put(o, "(%s%s)", s, is_float ? "f" : "");
    else put(o, "%s%s", s, is_float ? "f" : "");
}

/* A constant of dtype dt, as the interpreter stores it (dt_store). */
static void put_const(Out *o, kn_dtype dt, double v)
{
    switch (dt) {
    case KN_F32: put_real(o, (float)v, 1); break;
    case KN_F64: put_real(o, v, 0); break;
    case KN_F16: put_real(o, dt_half_to_float(dt_float_to_half((float)v)), 1); break;
    case KN_BF16: put_real(o, dt_bf16_to_float(dt_float_to_bf16((float)v)), 1); break;
    case KN_BOOL: put_str(o, v != 0 ? "1" : "0"); break;
    case KN_I32:
        if (v == -2147483648.0) put_str(o, "INT32_MIN");
        else render_put_int(o, (int64_t)v, 1);
        break;
    default: render_put_int(o, (int64_t)v, 1); break; /* i64, u8: ir_const keeps them in range */
    }
}

/* ---- a statement's value DAG ---- */

static void dag_reset(Dag *d)
{
    memset(d->slot, 0, sizeof d->slot);
    d->n = d->full = 0;
}

/* The entry of ref, added if add; NULL if absent or the table is full. */
Val *render_dag_find(Dag *d, IrRef ref, int add)
{
    uint32_t i = (ref * 2654435761u) & (DAG_SLOTS - 1);
    for (; d->slot[i]; i = (i + 1) & (DAG_SLOTS - 1))
        if (d->v[d->slot[i] - 1].ref == ref) return &d->v[d->slot[i] - 1];
    if (!add || d->n == DAG_MAX) {
        if (add) d->full = 1;
        return NULL;
    }
    Val *v = &d->v[d->n++];
    memset(v, 0, sizeof *v);
    v->ref = ref;
    v->temp = -1;
    d->slot[i] = (uint16_t)d->n;
    return v;
}

/* Counts uses and finds loads below each value, depth first. */
static Val *dag_walk(R *r, IrRef ref, IrRef user, int depth)
{
    const IrNode *x = value_at(r->k, ref, user);
    Val *v = x && depth <= IR_MAX_DEPTH ? render_dag_find(r->d, ref, 1) : NULL;
    if (!v) return NULL;
    if (v->uses++) {
        v->uses = 2;
        return v;
    }
    v->load = x->kind == IR_LOAD;
    for (int i = 0; i < nops(x); i++) {
        const Val *c = dag_walk(r, operand(x, i), ref, depth + 1);
        if (c && c->load) v->load = 1;
    }
    return v;
}

/* A where's branch that may be evaluated whatever the mask says: a
 * constant, or a load without a data-dependent offset whose index stays in
 * [0, size) over every loop's range. A pad's load, out of range exactly
 * where its mask is false, is not one. */
static int speculable(const R *r, IrRef ref, IrRef user)
{
    const IrNode *x = value_at(r->k, ref, user);
    int64_t lo, hi, size;
    if (!x) return 0;
    if (x->kind == IR_CONST) return 1;
    return x->kind == IR_LOAD && !x->a && x->buf >= 0 && x->buf < r->k->nbufs
           && expr_as_const(r->k->ex, r->k->bufs[x->buf].size, &size) && loopopt_range(r->k, x->index, &lo, &hi)
           && lo >= 0 && hi < size;
}

/* A float where both of whose branches are speculable: a branch-free
 * select (KN_SEL), which cc vectorises where it keeps a ?: over a load
 * scalar (gpt's causal mask inside softmax's max reduction). */
static int select_where(const R *r, const IrNode *x, IrRef self)
{
    return x->kind == IR_OP && x->op == OP_WHERE && (x->dtype == KN_F32 || x->dtype == KN_F64)
           && speculable(r, x->b, self) && speculable(r, x->c, self);
}

/* A where of the scalar dialect that TinyCC takes as a select (KN_TSEL), not
 * a branch: a float one whose mask reads a buffer or an accumulator (data,
 * taken at random; a mask of indices is as regular as its loops) and both
 * of whose branches are cheap and may run whatever the mask (cheap_safe). */
static int on_data(const R *r, IrRef ref, IrRef user, int *budget)
{
    const IrNode *x = value_at(r->k, ref, user);
    if (!x || --*budget < 0) return 0;
    if (x->kind == IR_LOAD || x->kind == IR_ACCVAL) return 1;
    for (int i = 0; x->kind == IR_OP && i < ir_nsrc(x); i++)
        if (on_data(r, i == 0 ? x->a : i == 1 ? x->b : x->c, ref, budget)) return 1;
    return 0;
}

static int cheap_safe(const R *r, IrRef ref, IrRef user, int *budget)
{
    const IrNode *x = value_at(r->k, ref, user);
    if (!x || --*budget < 0) return 0;
    switch (x->kind) {
    case IR_CONST:
    case IR_ACCVAL:
    case IR_INDEX: return 1;
    case IR_LOAD: return speculable(r, ref, user);
    case IR_OP:
        if ((x->op >= OP_EXP && x->op <= OP_FLOOR && x->op != OP_RECIP) || x->op == OP_POW || x->op == OP_MAX ||
            x->op == OP_MIN)
            return 0; /* a call under TinyCC */
        for (int i = 0; i < ir_nsrc(x); i++)
            if (!cheap_safe(r, i == 0 ? x->a : i == 1 ? x->b : x->c, ref, budget)) return 0;
        return 1;
    default: return 0; /* a check reports, rand is dear */
    }
}

static int tsel_where(const R *r, const IrNode *x, IrRef self)
{
    int budget = 16, mask = 16;
    return !r->isa && x->kind == IR_OP && x->op == OP_WHERE && (x->dtype == KN_F32 || x->dtype == KN_F64) &&
           on_data(r, x->a, self, &mask) && cheap_safe(r, x->b, self, &budget) && cheap_safe(r, x->c, self, &budget);
}

/* Marks what is evaluated whatever the wheres choose: all but the branches
 * of a where that is not a select. */
static void dag_uncond(R *r, IrRef ref, IrRef user)
{
    const IrNode *x = value_at(r->k, ref, user);
    Val *v = x ? render_dag_find(r->d, ref, 0) : NULL;
    if (!v || v->uncond) return;
    v->uncond = 1;
    int sel = select_where(r, x, ref) || tsel_where(r, x, ref);
    for (int i = 0; i < nops(x); i++)
        if (!(x->op == OP_WHERE && i > 0) || sel) dag_uncond(r, operand(x, i), ref);
}

/* Analyses the value of one statement; 0 if it is too large for the table. */
int render_dag_build(R *r, IrRef root, IrRef stmt)
{
    dag_reset(r->d);
    dag_walk(r, root, stmt, 0);
    if (r->d->full) return 0;
    dag_uncond(r, root, stmt);
    return 1;
}

/* Worth a temporary and safe to evaluate before the statement. */
static int hoist(const R *r, const Val *v)
{
    const IrNode *x = &r->k->nodes[v->ref];
    const ExprNode *e;
    if (v->uses < 2 || (v->load && !v->uncond)) return 0;
    switch (x->kind) {
    case IR_CONST:
    case IR_ACCVAL: return 0;
    case IR_INDEX: return (e = expr_node(r->k->ex, x->index)) && e->kind != EX_SYM && e->kind != EX_CONST;
    default: return 1;
    }
}

/* ---- values ---- */

/* Temporary n's name: t<n>, or t<n>_<copy> in a chain of updates' copies. */
static void put_temp(R *r, int n)
{
    if (r->tsuffix) put(r->o, "t%d_%d", n, r->un_u);
    else put(r->o, "t%d", n);
}

/* Parentheses: every template writes an atom or a parenthesised
 * expression, so operands nest safely; where a place delimits its operand
 * anyway (a call's argument, an assignment's right side), the operand's
 * outer parentheses are dropped: it is written "bare". */

/* The placeholder at `at` in template t (2 bytes) is delimited: after "("
 * or ", ", before ")" or ",". */
static int delimited(const char *t, const char *at)
{
    int before = (at > t && at[-1] == '(') || (at - t >= 2 && at[-2] == ',' && at[-1] == ' ');
    return before && (at[2] == ')' || at[2] == ',');
}

/* May the operand of a "%s" format fmt be bare, fmt itself being written
 * bare or not? */
static int bare_in(const char *fmt, int bare)
{
    const char *at = strstr(fmt, "%s");
    return strcmp(fmt, "%s") == 0 ? bare : delimited(fmt, at);
}

/* t is "(...)" with its first parenthesis closed by its last. */
static int enclosed(const char *t)
{
    size_t n = strlen(t);
    int depth = 0;
    if (n < 2 || t[0] != '(' || t[n - 1] != ')') return 0;
    for (size_t i = 0; i + 1 < n; i++)
        if ((depth += t[i] == '(' ? 1 : t[i] == ')' ? -1 : 0) == 0) return 0;
    return 1;
}

/* A template of the op table: %0 %1 %2 operands, %f libm suffix, %a acc. */
void render_put_tmpl(R *r, const char *t, const IrNode *x, IrRef self, int depth, int acc, int bare)
{
    const char *fn = render_dts[x->dtype < KN_NDTYPES ? x->dtype : 0].fn, *p = t, *end = t + strlen(t);
    if (bare && enclosed(t)) p++, end--;
    for (; p < end; p++) {
        if (*p != '%') {
            put_char(r->o, *p);
            continue;
        }
        if (p[1] == 'f') put_str(r->o, fn ? fn : "");
        else if (p[1] == 'a' && r->lane >= 0) put(r->o, "a%d_l[s%d_l]", acc, r->lane);
        else if (p[1] == 'a' && r->chain && r->un_u > 0) loop_put_chain(r, r->un_u - 1);
        else if (p[1] == 'a') put(r->o, "a%d", acc);
        else render_put_value(r, operand(x, p[1] - '0'), self, depth + 1, delimited(t, p));
        p++;
    }
}

/* cast: as interp.c, through double (dt_load, dt_store) when either side
 * is a float, else through int64 (dt_load_i, dt_store_i) */
static void put_cast(R *r, const IrNode *x, IrRef self, int depth, int bare)
{
    const IrNode *s = value_at(r->k, x->a, self);
    kn_dtype to = (kn_dtype)x->dtype, from = s ? (kn_dtype)s->dtype : KN_F32;
    int ffrom = dt_is_float(from), via_double = !ffrom && dt_is_float(to) && to != KN_F64;
    const char *fmt = ffrom || dt_is_float(to) ? render_dts[to].from_f : render_dts[to].wrap;
    if (self == r->unrounded && (to == KN_F16 || to == KN_BF16)) fmt = "(float)%s";
    render_put_part(r->o, fmt, 0);
    if (via_double) put_str(r->o, "(double)");
    render_put_value(r, x->a, self, depth + 1, !via_double && bare_in(fmt, bare));
    render_put_part(r->o, fmt, 1);
}

static void put_op(R *r, const IrNode *x, IrRef self, int depth, int bare)
{
    kn_dtype dt = (kn_dtype)x->dtype;
    if (x->op == OP_CAST) {
        put_cast(r, x, self, depth, bare);
        return;
    }
    if (nops(x) == 0 || !render_ops[x->op].flt) {
        put_str(r->o, "KN_BAD_OP"); /* does not compile */
        return;
    }
    const IrNode *m = x->op == OP_EXP && dt == KN_F32 ? value_at(r->k, x->a, self) : NULL;
    const IrNode *zero = m && m->kind == IR_OP && m->op == OP_MIN && m->dtype == KN_F32 ? value_at(r->k, m->b, x->a) : NULL;
    if (zero && zero->kind == IR_CONST && zero->imm == 0) { /* exp(min(v, 0)) */
        put_str(r->o, "kn_expf_le0(");
        render_put_value(r, m->a, x->a, depth + 2, 1);
        put_char(r->o, ')');
        return;
    }
    /* a compare's or where's operand dtype decides: the last operand's */
    const IrNode *last = value_at(r->k, operand(x, nops(x) - 1), self);
    int fl = last ? dt_is_float((kn_dtype)last->dtype) : dt_is_float(dt);
    const OpFmt *f = &render_ops[x->op];
    const char *t = fl ? f->flt : last && last->dtype == KN_BOOL && f->boolean ? f->boolean : f->integer;
    if (tsel_where(r, x, self)) t = dt == KN_F32 ? "KN_TSEL(%0, %1, %2)" : "KN_TDSEL(%0, %1, %2)";
    else if (select_where(r, x, self)) t = dt == KN_F32 ? "KN_SEL(%0, %1, %2)" : "KN_DSEL(%0, %1, %2)";
    int wrap = f->wrap && !(self == r->unrounded && (dt == KN_F16 || dt == KN_BF16));
    if (wrap) render_put_part(r->o, render_dts[dt].wrap, 0);
    render_put_tmpl(r, t, x, self, depth, 0, wrap ? bare_in(render_dts[dt].wrap, bare) : bare);
    if (wrap) render_put_part(r->o, render_dts[dt].wrap, 1);
}

/* Value ref used by user (a statement or an older value): an atom, or
 * without outer parentheses if bare. */
void render_put_value(R *r, IrRef ref, IrRef user, int depth, int bare)
{
    const IrNode *x = value_at(r->k, ref, user);
    const Val *v = x && !r->d->full ? render_dag_find(r->d, ref, 0) : NULL;
    if (!x || depth > IR_MAX_DEPTH || x->dtype >= KN_NDTYPES) {
        put_str(r->o, "KN_BAD_VALUE"); /* does not compile: a broken kernel never runs */
        return;
    }
    if (loop_put_hoisted(r, ref)) return;
    if (v && v->temp >= 0) {
        put_temp(r, v->temp);
        return;
    }
    if (ref == r->shared) {
        put(r->o, "t%d", r->shared_temp);
        return;
    }
    switch (x->kind) {
    case IR_CONST:
        if (x->index) { /* a size at the run, or its reciprocal, as dt_store stores the double */
            put_str(r->o, "(");
            render_put_part(r->o, render_dts[x->dtype].from_f, 0);
            put_str(r->o, x->op == OP_RECIP ? "(1.0 / (double)" : "((double)");
            render_put_index(r->o, r->k->ex, x->index, 1);
            put_str(r->o, ")");
            render_put_part(r->o, render_dts[x->dtype].from_f, 1);
            put_str(r->o, ")");
        } else {
            put_const(r->o, (kn_dtype)x->dtype, x->imm);
        }
        break;
    case IR_LOAD:
        put_part_strip(r->o, render_dts[x->dtype].load, 0, bare);
        if (x->a || !loop_put_access(r, x->buf, x->index)) {
            put(r->o, "b%d[", (int)x->buf);
            render_put_index(r->o, r->k->ex, x->index, 0);
            if (x->a) put_str(r->o, " + "), render_put_value(r, x->a, ref, depth + 1, 0);
            put_char(r->o, ']');
        }
        put_part_strip(r->o, render_dts[x->dtype].load, 1, bare);
        break;
    case IR_CHECK:
        put_str(r->o, "kn_check(");
        render_put_value(r, x->a, ref, depth + 1, 1);
        put_str(r->o, ", ");
        render_put_index(r->o, r->k->ex, x->index, 0);
        put_str(r->o, ", kn_err)");
        break;
    case IR_ACCVAL: /* integer accumulators are int64_t: wrapped to their dtype */
        if (dt_is_float((kn_dtype)x->dtype)) put(r->o, "a%d", (int)x->var);
        else render_put_part(r->o, render_dts[x->dtype].wrap, 0), put(r->o, "a%d", (int)x->var), render_put_part(r->o, render_dts[x->dtype].wrap, 1);
        break;
    case IR_INDEX: render_put_index(r->o, r->k->ex, x->index, 1); break;
    case IR_RAND:
        put_str(r->o, "kn_rand(");
        render_put_value(r, x->a, ref, depth + 1, 1);
        put_str(r->o, ", ");
        render_put_value(r, x->b, ref, depth + 1, 1);
        put_str(r->o, ", ");
        render_put_index(r->o, r->k->ex, x->index, 0);
        put_char(r->o, ')');
        break;
    default: put_op(r, x, ref, depth, bare); break;
    }
}

/* The temporaries the statement's value needs, children first. */
void render_put_temps(R *r, IrRef ref, IrRef user, int level)
{
    const IrNode *x = value_at(r->k, ref, user);
    Val *v = x ? render_dag_find(r->d, ref, 0) : NULL;
    if (!v || v->visited || loop_is_hoisted(r, ref)) return;
    v->visited = 1;
    for (int i = 0; i < nops(x); i++) render_put_temps(r, operand(x, i), ref, level);
    if (!hoist(r, v)) return;
    int n = v->temp >= 0 ? v->temp : r->ntemps++; /* a chain's later copies keep the first's numbers */
    v->temp = -1; /* the value itself, not its name */
    indent(r->o, level);
    put(r->o, "const %s ", render_dts[x->dtype].value);
    put_temp(r, n);
    put_str(r->o, " = ");
    render_put_value(r, ref, user, 0, 1);
    put_str(r->o, ";\n");
    v->temp = n;
}

/* Analyses value (of statement stmt) and declares its temporaries. */
static void begin_value(R *r, IrRef value, IrRef stmt, int level)
{
    if (value == r->shared || r->in_run) return;
    if (render_dag_build(r, value, stmt)) render_put_temps(r, value, stmt, level);
}

/* ---- statements ---- */

/* b<buf>[index + offset], the element a store writes */
static void put_elem(R *r, IrRef s, const IrNode *x)
{
    if (!x->b && loop_put_access(r, x->buf, x->index)) return;
    put(r->o, "b%d[", (int)x->buf);
    render_put_index(r->o, r->k->ex, x->index, 0);
    if (x->b) put_str(r->o, " + "), render_put_value(r, x->b, s, 0, 0);
    put_char(r->o, ']');
}

/* b[i] += v as interp.c's scatter_add: floats add in their value type and
 * round once on store (f16, bf16: exact, as ops on them), integers wrap */
static void put_add_store(R *r, IrRef s, const IrNode *x, const DtFmt *f, int level)
{
    int fl = f->fn != NULL;
    indent(r->o, level);
    put_elem(r, s, x);
    put_str(r->o, " = ");
    render_put_part(r->o, f->save, 0);
    if (!fl) render_put_part(r->o, f->wrap, 0), put_str(r->o, "(uint64_t)");
    render_put_part(r->o, f->load, 0), put_elem(r, s, x), render_put_part(r->o, f->load, 1);
    put_str(r->o, fl ? " + " : " + (uint64_t)");
    render_put_value(r, x->a, s, 0, 0);
    if (!fl) render_put_part(r->o, f->wrap, 1);
    render_put_part(r->o, f->save, 1);
    put_str(r->o, ";\n");
}

static void put_store(R *r, IrRef s, const IrNode *x, int level)
{
    const IrBuf *b = x->buf >= 0 && x->buf < r->k->nbufs ? &r->k->bufs[x->buf] : NULL;
    const char *save = b && b->dtype < KN_NDTYPES ? render_dts[b->dtype].save : "KN_BAD_STORE(%s)";
    begin_value(r, x->a, s, level);
    if (x->op == OP_SUM && b && b->dtype < KN_NDTYPES) {
        put_add_store(r, s, x, &render_dts[b->dtype], level);
        return;
    }
    indent(r->o, level);
    if (x->op) put_str(r->o, "KN_BAD_STORE_OP ");
    if (r->stream >= 0) put(r->o, "nt_[s%d_l]", r->stream);
    else put_elem(r, s, x);
    put_str(r->o, " = ");
    render_put_part(r->o, save, 0);
    r->unrounded = x->a; /* kn_f2h(kn_rh(v)) is kn_f2h(v) */
    render_put_value(r, x->a, s, 0, bare_in(save, 1));
    r->unrounded = 0;
    render_put_part(r->o, save, 1);
    put_str(r->o, ";\n");
}

/* The declaration of an accumulator, at its IR_ACC: floats in their value
 * type, integers in int64_t (so a max starts below every value). */
static void put_acc(R *r, const IrNode *x, int level)
{
    kn_dtype dt = (kn_dtype)(x->dtype < KN_NDTYPES ? x->dtype : KN_F32);
    int fl = dt_is_float(dt);
    indent(r->o, level);
    put(r->o, "%s a%d = %s;", fl ? render_dts[dt].value : "int64_t", (int)x->var, acc_init(x->op, fl));
    if (x->var >= 0 && x->var < MAX_ACCS && !r->accread[x->var]) put(r->o, " (void)a%d;", (int)x->var);
    put_char(r->o, '\n');
}

static void put_update(R *r, IrRef s, const IrNode *x, int level)
{
    const IrNode *v = value_at(r->k, x->a, s);
    kn_dtype dt = (kn_dtype)(v ? v->dtype : KN_F32);
    int fl = dt_is_float(dt);
    const OpFmt *f = &render_ops[x->op == OP_RMAX ? OP_RMAX : OP_SUM];
    IrNode self = *x; /* the template's operand %0 is the update's value */
    self.dtype = (uint8_t)dt;
    begin_value(r, x->a, s, level);
    indent(r->o, level);
    if (r->lane >= 0) { /* lanes: this group's value, folded in after the lane loop (put_lanes) */
        put(r->o, "a%d_n[s%d_l] = ", (int)x->var, r->lane);
        render_put_value(r, x->a, s, 1, 1);
        put_str(r->o, ";\n");
        return;
    }
    put(r->o, "a%d = ", (int)x->var);
    int wrap = fl && f->wrap;
    if (wrap) render_put_part(r->o, render_dts[dt].wrap, 0);
    render_put_tmpl(r, fl ? f->flt : f->integer, &self, s, 0, x->var, wrap ? bare_in(render_dts[dt].wrap, 1) : 1);
    if (wrap) render_put_part(r->o, render_dts[dt].wrap, 1);
    put_str(r->o, ";\n");
}

/* A top-level parallel loop runs as a range function on the thread pool
 * when nothing in it refers to an accumulator declared outside it (an
 * accumulator lives in one function). Its number among such loops, or -1. */
static int par_index(R *r, IrRef s)
{
    const IrNode *x = stmt_at(r, s);
    if (!x || x->kind != IR_LOOP || x->dtype != LOOP_PARALLEL) return -1;
    int n = 0;
    for (IrRef t = r->k->body; t && t != s; t = r->k->nodes[t].next) {
        const IrNode *y = stmt_at(r, t);
        if (!y) return -1;
        n += y->kind == IR_LOOP && y->dtype == LOOP_PARALLEL;
    }
    uint8_t declared[MAX_ACCS];
    memset(declared, 0, sizeof declared);
    IrRef stack[2 * IR_MAX_NEST + 4]; /* a pending next and a child per level */
    int depth = 0, room = (int)(sizeof stack / sizeof *stack);
    stack[depth++] = x->child;
    while (depth) { /* the statements below, depth first */
        IrRef t = stack[--depth];
        const IrNode *y = stmt_at(r, t);
        if (!y) continue;
        if (y->next) {
            if (depth == room) return -1;
            stack[depth++] = y->next;
        }
        if ((y->kind == IR_ACC || y->kind == IR_UPDATE) && (y->var < 0 || y->var >= MAX_ACCS)) return -1;
        if (y->kind == IR_LOOP) {
            if (depth == room) return -1;
            stack[depth++] = y->child;
        } else if (y->kind == IR_ACC) {
            declared[y->var] = 1;
        }
        if (y->kind == IR_UPDATE && !declared[y->var]) return -1;
        if (y->kind != IR_STORE && y->kind != IR_UPDATE) continue;
        if (!render_dag_build(r, y->a, t)) return -1;
        for (int i = 0; i < r->d->n; i++) {
            const IrNode *v = &r->k->nodes[r->d->v[i].ref];
            if (v->kind == IR_ACCVAL && (v->var < 0 || v->var >= MAX_ACCS || !declared[v->var])) return -1;
        }
    }
    return n;
}

/* A run of plain stores from statement s in its block (a group's, lower_group): how many, up to
 * RUN_MAX; 0 where fewer than two, or where one of them writes a buffer that a value of the run loads
 * (what it loads must then be read after the store, as each statement's own temporaries are). */
enum { RUN_MAX = 16 };
static int store_run(R *r, IrRef s)
{
    IrRef st[RUN_MAX];
    int n = 0;
    for (const IrNode *x; n < RUN_MAX && (x = stmt_at(r, s)) && x->kind == IR_STORE && !x->op && !x->b; s = x->next)
        st[n++] = s;
    if (n < 2) return 0;
    dag_reset(r->d);
    for (int i = 0; i < n; i++) dag_walk(r, r->k->nodes[st[i]].a, st[i], 0);
    if (r->d->full) return 0;
    for (int v = 0; v < r->d->n; v++) {
        const IrNode *x = &r->k->nodes[r->d->v[v].ref];
        for (int i = 0; i < n && x->kind == IR_LOAD; i++)
            if (r->k->nodes[st[i]].buf == x->buf) return 0;
    }
    return n;
}

/* Stores s and the n - 1 after it, whose values share one analysis: a value used twice anywhere in the
 * run, and evaluated whatever the wheres choose in one of them, is a temporary declared before the
 * first, so a group's stores compute what they share once (TinyCC does no common subexpressions). */
static IrRef put_run(R *r, IrRef s, int n, int level)
{
    IrRef t = s;
    for (int i = 0; i < n; i++, t = r->k->nodes[t].next) dag_uncond(r, r->k->nodes[t].a, t);
    t = s;
    for (int i = 0; i < n; i++, t = r->k->nodes[t].next) render_put_temps(r, r->k->nodes[t].a, t, level);
    r->in_run = 1;
    for (int i = 0; i < n; i++, s = r->k->nodes[s].next) put_store(r, s, &r->k->nodes[s], level);
    r->in_run = 0;
    return s;
}

void render_put_block(R *r, IrRef s, int level)
{
    for (uint32_t budget = r->k->n; s && s < r->k->n && budget; budget--) {
        const IrNode *x = &r->k->nodes[s];
        int p = level == 1 && r->range == -2 ? par_index(r, s) : -1;
        if (p >= 0) { /* the kernel's entry: the loop runs through the pool */
            indent(r->o, level);
            put(r->o, "kn_parallel(%s_p%d, b, ", r->k->name, p);
            render_put_index(r->o, r->k->ex, x->index, 0);
            put(r->o, ", %d, par);\n", innermost(r, x) ? 16 : 1);
            s = x->next;
            continue;
        }
        int run = x->kind == IR_STORE && r->stream < 0 ? store_run(r, s) : 0;
        if (run) {
            s = put_run(r, s, run, level);
            continue;
        }
        const IrNode *y = stmt_at(r, x->next);
        if ((x->kind == IR_STORE || x->kind == IR_UPDATE) && y && (y->kind == IR_STORE || y->kind == IR_UPDATE) &&
            y->a == x->a && value_at(r->k, x->a, s) && value_at(r->k, x->a, s)->kind == IR_OP) {
            /* one value for two statements (a row kernel stores what it sums): computed once */
            const IrNode *v = value_at(r->k, x->a, s);
            begin_value(r, x->a, s, level);
            indent(r->o, level);
            put(r->o, "const %s t%d = ", v->dtype < KN_NDTYPES ? render_dts[v->dtype].value : "KN_BAD_DTYPE", r->ntemps);
            render_put_value(r, x->a, s, 0, 1);
            put_str(r->o, ";\n");
            r->shared = x->a, r->shared_temp = r->ntemps++;
        }
        switch (x->kind) {
        case IR_LOOP: loop_put_loop(r, x, level); break;
        case IR_STORE: put_store(r, s, x, level); break;
        case IR_ACC: put_acc(r, x, level); break;
        case IR_UPDATE: put_update(r, s, x, level); break;
        default: indent(r->o, level), put_str(r->o, "KN_BAD_STATEMENT;\n"); break;
        }
        if (r->shared && r->shared != (y && (y->kind == IR_STORE || y->kind == IR_UPDATE) ? y->a : 0)) r->shared = 0;
        if (s == r->pf_after && r->pf_row) loop_put_prefetch(r, &r->k->nodes[r->pf_row], level);
        s = x->next;
    }
}

/* ---- which buffers and accumulators the text names ---- */

static void scan_value(R *r, IrRef value, IrRef stmt)
{
    if (!render_dag_build(r, value, stmt)) { /* too large to tell: everything counts as used */
        memset(r->bufused, 1, MAX_BUFS);
        memset(r->accread, 1, MAX_ACCS);
        return;
    }
    for (int i = 0; i < r->d->n; i++) {
        const IrNode *x = &r->k->nodes[r->d->v[i].ref];
        if (x->kind == IR_LOAD && x->buf >= 0 && x->buf < MAX_BUFS) r->bufused[x->buf] = 1;
        if (x->kind == IR_ACCVAL && x->var >= 0 && x->var < MAX_ACCS) r->accread[x->var] = 1;
        if (x->kind == IR_CHECK) r->checks = 1;
    }
}

/* Marks what statement s (and, if all, the ones after it) names. */
static void scan_block(R *r, IrRef s, int level, int all)
{
    for (uint32_t budget = r->k->n; s && s < r->k->n && budget; s = all ? r->k->nodes[s].next : 0, budget--) {
        const IrNode *x = &r->k->nodes[s];
        if (x->kind == IR_LOOP && level <= IR_MAX_NEST) scan_block(r, x->child, level + 1, 1);
        if (x->kind == IR_STORE && x->buf >= 0 && x->buf < MAX_BUFS) r->bufused[x->buf] = 1;
        if (x->kind == IR_STORE || x->kind == IR_UPDATE) scan_value(r, x->a, s);
        if (x->kind == IR_STORE && x->b) scan_value(r, x->b, s);
    }
}

/* ---- kernels ---- */

static const char *const roles[] = {"in", "out", "tmp"};

/* The buffers as typed locals: those the function does not name are
 * (void), or left out if omit. */
static void put_bufs(R *r, const uint8_t *bufused, int omit)
{
    const Kernel *k = r->k;
    if (k->nbufs == 0) put_str(r->o, "    (void)b;\n");
    for (int i = 0; i < k->nbufs; i++) {
        const IrBuf *bf = &k->bufs[i];
        if (omit && i < MAX_BUFS && !bufused[i]) continue;
        const char *t = bf->dtype < KN_NDTYPES ? render_dts[bf->dtype].store : "KN_BAD_DTYPE";
        const char *c = bf->role == BUF_IN ? "const " : "";
        int64_t n;
        if (bf->role == BUF_TMP && expr_as_const(k->ex, bf->size, &n) && n > 0) /* the function's own (ir.h) */
            put(r->o, "    %s b%d[%lld];", t, i, (long long)n);
        else if (bf->role == BUF_TMP)
            put(r->o, "    KN_BAD_TMP b%d;", i); /* does not compile: a tmp buffer's size is a positive constant */
        else
            put(r->o, "    %s%s *%sb%d = (%s%s *)b[%d];", c, t, bf->shared ? "" : "restrict ", i, c, t, i);
        if (i < MAX_BUFS && !bufused[i]) put(r->o, " (void)b%d;", i);
        put(r->o, " /* %s %s[", bf->role <= BUF_TMP ? roles[bf->role] : "?", kn_dtype_name((kn_dtype)bf->dtype));
        render_put_index(r->o, k->ex, bf->size, 0);
        put_str(r->o, "] */\n");
    }
    if (k->shapes) /* shape symbols' values at this run: after the thread pool and the error cell */
        put(r->o, "    const int64_t *kn_z = (const int64_t *)b[%d]; (void)kn_z;\n", k->nbufs + 2);
}

/* The error cell of a kernel with checks: b[nbufs + 1], after the thread pool. */
static void put_err(R *r)
{
    if (r->checks) put(r->o, "    int64_t *kn_err = (int64_t *)b[%d]; (void)kn_err;\n", r->k->nbufs + 1);
}

/* A dot template's epilogue (Kernel.tile): its three loops (batch, M, N)
 * over one tile, NAME(b, t, m0, m1, n0, n1), the template calling it on
 * each tile of its output once the tile is final. */
static void put_tile(R *r)
{
    const Kernel *k = r->k;
    const IrNode *l0 = stmt_at(r, k->body), *l1 = l0 ? stmt_at(r, l0->child) : NULL, *l2 = l1 ? stmt_at(r, l1->child) : NULL;
    uint8_t bufused[MAX_BUFS], accread[MAX_ACCS];
    memset(bufused, 0, sizeof bufused);
    memset(accread, 0, sizeof accread);
    r->bufused = bufused, r->accread = accread, r->ntemps = 0;
    scan_block(r, k->body, 0, 1);
    put(r->o, "\nvoid %s(void **b, int64_t t, int64_t m0, int64_t m1, int64_t n0, int64_t n1);\n"
              "void %s(void **b, int64_t t, int64_t m0, int64_t m1, int64_t n0, int64_t n1)\n{\n", k->name, k->name);
    if (!l2 || l0->kind != IR_LOOP || l1->kind != IR_LOOP || l2->kind != IR_LOOP || l0->next || l1->next || l2->next) {
        put_str(r->o, "    KN_BAD_TILE;\n}\n"); /* does not compile: not a tile kernel */
        return;
    }
    put_bufs(r, bufused, 0);
    put(r->o, "    const int64_t s%d = t;\n    (void)s%d;\n", (int)l0->var, (int)l0->var);
    put(r->o, "    for (int64_t s%d = m0; s%d < m1; s%d++) {\n", (int)l1->var, (int)l1->var, (int)l1->var);
    put(r->o, "        %sfor (int64_t s%d = n0; s%d < n1; s%d++) {\n", r->isa ? "KN_IVDEP " : "", (int)l2->var,
        (int)l2->var, (int)l2->var);
    render_put_block(r, l2->child, 3);
    put_str(r->o, "        }\n    }\n}\n");
}

/* Parallel loops first, each as a function over a range of its iterations;
 * then the entry, which runs them through kn_parallel (so it reads the
 * thread pool from b[nbufs]) and everything else itself. */
static void put_kernel(R *r)
{
    const Kernel *k = r->k;
    if (k->tile) {
        put_tile(r);
        return;
    }
    uint8_t bufused[MAX_BUFS], accread[MAX_ACCS];
    memset(accread, 0, sizeof accread);
    r->bufused = bufused;
    r->accread = accread;
    r->ntemps = 0;
    memset(bufused, 1, sizeof bufused);
    r->checks = 0;
    scan_block(r, k->body, 0, 1); /* accread and checks for the whole kernel */
    int npar = 0;
    for (IrRef s = k->body; s && s < k->n; s = k->nodes[s].next) {
        int p = par_index(r, s);
        if (p < 0) continue;
        memset(bufused, 0, sizeof bufused);
        scan_block(r, s, 0, 0);
        put(r->o, "\nstatic void %s_p%d(void **b, int64_t lo, int64_t hi)\n{\n", k->name, p);
        put_bufs(r, bufused, 0);
        put_err(r);
        r->range = k->nodes[s].var;
        loop_put_loop(r, &k->nodes[s], 1);
        r->range = -1;
        put_str(r->o, "}\n");
        npar++;
    }
    memset(bufused, 0, sizeof bufused);
    for (IrRef s = k->body; s && s < k->n; s = k->nodes[s].next)
        if (par_index(r, s) < 0) scan_block(r, s, 0, 0);
    put(r->o, "\nvoid %s(void **b);\nvoid %s(void **b)\n{\n", k->name, k->name);
    if (npar) put(r->o, "    const kn_par *par = (const kn_par *)b[%d];\n", k->nbufs);
    put_bufs(r, bufused, npar > 0);
    put_err(r);
    r->range = -2; /* the entry's top level: parallel loops are calls */
    render_put_block(r, k->body, 1);
    r->range = -1;
    put_str(r->o, "}\n");
}

/* The library's vector helpers (src/vec_rt.h), as the block form of loop.c calls them */
static const char blocks_decl[] =
    "int kn_rt_vunary(int op, float *d, const float *a, int64_t n);\n"
    "int kn_rt_vbinary(int op, float *d, const float *a, const float *b, int64_t n);\n"
    "int kn_rt_vcompare(int op, uint8_t *d, const float *a, const float *b, int64_t n);\n"
    "void kn_rt_vwhere(float *d, const uint8_t *c, const float *a, const float *b, int64_t n);\n"
    "void kn_rt_vmask(float *d, const uint8_t *c, int64_t n);\n"
    "void kn_rt_vnonzero(uint8_t *d, const float *a, int64_t n);\n"
    "void kn_rt_vfill(float *d, float v, int64_t n);\n"
    "void kn_rt_vcopy(void *d, int64_t ds, const void *s, int64_t ss, int64_t n, int size);\n"
    "float kn_rt_vsum(const float *a, int64_t n);\n"
    "float kn_rt_vaccmax(float acc, const float *a, int64_t n);\n";

static size_t render(const Kernel *const *ks, int nk, const CIsa *isa, int blocks, char *buf, size_t cap)
{
    Dag dag; /* 32 KiB */
    Out o = {buf, buf ? cap : 0, 0};
    R r;
    memset(&r, 0, sizeof r);
    r.o = &o;
    r.d = &dag;
    r.isa = isa;
    r.lane = r.range = r.stream = -1;
    r.blocks = isa ? 0 : blocks;
    if (isa) put(&o, "/* SIMD dialect for %s */\n%s%s", isa->name, isa->header, prelude_simd);
    for (size_t i = 0; i < prelude_nparts; i++) put_str(&o, prelude_parts[i]);
    put_str(&o, prelude_threads);
    if (r.blocks) put_str(&o, blocks_decl);
    for (int i = 0; i < nk; i++) {
        r.k = ks[i];
        put_str(&o, PORT_PART); /* cc may compile each kernel apart from the others (port.h) */
        put_kernel(&r);
    }
    if (o.cap) o.buf[o.len < o.cap ? o.len : o.cap - 1] = '\0';
    return o.len;
}

size_t c_render(const Kernel *const *ks, int nk, char *buf, size_t cap) { return render(ks, nk, NULL, 0, buf, cap); }

size_t c_render_blocks(const Kernel *const *ks, int nk, int min, char *buf, size_t cap)
{
    return render(ks, nk, NULL, min > 0 ? min : 1, buf, cap);
}

size_t c_render_isa(const Kernel *const *ks, int nk, const CIsa *isa, char *buf, size_t cap)
{
    return render(ks, nk, isa, 0, buf, cap);
}
