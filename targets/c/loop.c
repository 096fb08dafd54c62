/*
 * loop.c — targets/c: how the C renderer (render.c) writes a loop
 * statement, in either dialect (render.h). put_loop writes the plain C
 * loop, or one of the forms that replace it:
 * - unroll(W): each group of W iterations written out (put_unroll);
 * - the SIMD dialect's vector loops: accumulators in lanes, on GNU C
 *   vectors where the compiler has them (put_lanes), a large output
 *   streamed past the caches (put_stream), long streams prefetched ahead
 *   (put_ahead), and after a row's first pass, the next row's lines
 *   prefetched (put_prefetch);
 * - the scalar dialect's innermost loops, written out for TinyCC: accesses
 *   through stream pointers, the body copied a few times a group, chains of
 *   updates in registers, invariants computed once (put_unrolled), or a
 *   memcpy or memset (put_copy), or blocks through the library's vector
 *   helpers (put_blocks): loop_scalar.c, through loop_put_scalar.
 * Every form keeps the bits of the plain loop, as each comment says.
 *
 * Apart from render.c, which writes values, statements and kernels: these
 * forms are half of the renderer, and they meet the rest at a narrow seam.
 * A form writes a loop's control and calls render_put_block for its body;
 * the value emitter asks loop.c only how a copy of an unrolled body names
 * an access, a hoisted value or a chain's accumulator (loop_put_access,
 * loop_put_hoisted, loop_put_chain).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "render_int.h"

static const char *const loop_kinds[] = {"serial", "parallel", "vector", "unroll", "gpu_block", "gpu_thread"};

#define MAX_LANE_ACCS 16 /* accumulators one vector loop may update in lanes */

/* The accumulators the body of vector loop x updates, if the SIMD dialect
 * can give each its own lanes: the body is stores and updates only (no
 * loops, no declarations), the accumulators are f32, f64 or integers, the
 * width is a power of two, and no value in the body reads an accumulator
 * it updates (lanes hold partial results). Their numbers into accs; the
 * count, 0 when the body updates none, -1 when lanes are not possible. */
/* The lanes of vector loop x: its width, or more where the ISA wants more
 * vectors in flight (a multiple of the width: the same order on any ISA
 * of as many lanes). */
static int lanes_of(const R *r, const IrNode *x)
{
    int w = (int)x->width;
    while (r->isa && w < r->isa->lanes && w <= 32) w *= 2;
    return w;
}

static int lane_accs(R *r, const IrNode *x, int *accs)
{
    int n = 0;
    if (x->width < 2 || x->width > 64 || (x->width & (x->width - 1))) return -1;
    for (IrRef s = x->child; s; s = r->k->nodes[s].next) {
        const IrNode *y = stmt_at(r, s);
        if (!y || (y->kind != IR_STORE && y->kind != IR_UPDATE)) return -1;
        if (y->kind != IR_UPDATE) continue;
        const IrNode *v = value_at(r->k, y->a, s);
        if (!v || (v->dtype != KN_F32 && v->dtype != KN_F64 && dt_is_float((kn_dtype)v->dtype))) return -1;
        int seen = 0;
        for (int i = 0; i < n; i++) seen |= accs[i] == y->var;
        if (!seen && n == MAX_LANE_ACCS) return -1;
        if (!seen) accs[n++] = y->var;
    }
    for (IrRef s = x->child; s; s = r->k->nodes[s].next) {
        if (!render_dag_build(r, r->k->nodes[s].a, s)) return -1;
        for (int i = 0; i < r->d->n; i++) {
            const IrNode *v = &r->k->nodes[r->d->v[i].ref];
            for (int j = 0; v->kind == IR_ACCVAL && j < n; j++)
                if (v->var == accs[j]) return -1;
        }
    }
    return n;
}

/* The update statement of accumulator acc in the body of x (its op and dtype). */
static const IrNode *acc_update(const R *r, const IrNode *x, int acc, kn_dtype *dt)
{
    for (IrRef s = x->child; s; s = r->k->nodes[s].next) {
        const IrNode *y = &r->k->nodes[s], *v;
        if (y->kind == IR_UPDATE && y->var == acc && (v = value_at(r->k, y->a, s))) {
            *dt = (kn_dtype)v->dtype;
            return y;
        }
    }
    return NULL;
}

/* acc = acc op lane[i]: the combination of an accumulator's lanes. */
static void put_combine(R *r, const IrNode *u, kn_dtype dt, const char *dst, const char *src)
{
    int fl = dt_is_float(dt);
    if (u->op == OP_RMAX) put(r->o, "%s = %s(%s, %s);", dst, fl ? (dt == KN_F32 ? "kn_accmaxf" : "kn_accmax") : "kn_imax", dst, src);
    else if (fl) put(r->o, "%s = %s + %s;", dst, dst, src);
    else put(r->o, "%s = (int64_t)((uint64_t)%s + (uint64_t)%s);", dst, dst, src);
}

/* The bytes of one vector register of the SIMD dialect's instruction set,
 * for the GNU C vectors of lane accumulators; 0: none. */
static int vec_bytes(const CIsa *isa)
{
    if (!isa) return 0;
    if (!strcmp(isa->name, "avx512")) return 64;
    if (!strcmp(isa->name, "avx2")) return 32;
    if (!strcmp(isa->name, "sse2") || !strcmp(isa->name, "neon") || !strcmp(isa->name, "wasm128")) return 16;
    return 0;
}

/* dst = dst op src on GNU C vectors of an accumulator's lanes, as
 * put_combine on each lane, through masks of compares (the vector ?: is C++
 * only); integer sums wrap as uint64. A float max is two chains, each of a
 * compare and a blend where kn_accmaxf's one chain has two compares: dst
 * takes src where dst < src, and nan (aN_qK) takes src while it is not NaN,
 * so it ends as the lane's first NaN if there is one, which put_lanes then
 * puts in dst: kn_accmaxf's result, bit for bit (it keeps the first NaN and,
 * of equal values, the first). Where src is a direct_load (redo), dst
 * takes KN_VMAXF(src, dst), one instruction on x86 and the same value but
 * where a NaN is, and nan is a mask that records a NaN in src: put_lanes
 * then redoes the lanes serially, so NaN costs time, never bits (softmax
 * 4096x1024's row max, one thread: 0.426 -> 0.407 ns/element for the
 * kernel). */
static void put_vcombine(R *r, const IrNode *u, kn_dtype dt, int acc, const char *dst, const char *src, const char *nan,
                         int redo)
{
    int fl = dt_is_float(dt);
    if (u->op == OP_RMAX && fl && redo)
        put(r->o, "%s = %s(%s, %s); %s = %s | (%s != %s);", dst, dt == KN_F32 ? "KN_VMAXF" : "KN_VMAX", src, dst, nan,
            nan, src, src);
    else if (u->op == OP_RMAX && fl)
        put(r->o,
            "{ __typeof__(%s == %s) m_ = %s < %s; %s = (a%d_vt)((m_ & (__typeof__(m_))%s) | (~m_ & (__typeof__(m_))%s)); "
            "m_ = %s == %s; %s = (a%d_vt)((m_ & (__typeof__(m_))%s) | (~m_ & (__typeof__(m_))%s)); }",
            dst, dst, dst, src, dst, acc, src, dst, nan, nan, nan, acc, src, nan);
    else if (u->op == OP_RMAX)
        put(r->o, "{ __typeof__(%s > %s) m_ = %s > %s; %s = (m_ & %s) | (~m_ & %s); }", src, dst, src, dst, dst, src, dst);
    else if (fl) put(r->o, "%s = %s + %s;", dst, dst, src);
    else put(r->o, "%s = (a%d_vt)((a%d_ut)%s + (a%d_ut)%s);", dst, acc, acc, dst, acc, src);
}

/* The load that update u of vector loop s_v adds (or maxes) in as it is:
 * its buffer holds the accumulator's own C type, no data-dependent offset,
 * and the index is s_v + terms without s_v (unit stride); else NULL. */
static const IrNode *direct_load(const R *r, const IrNode *u, int v)
{
    const IrNode *x = u && u->a && u->a < r->k->n ? &r->k->nodes[u->a] : NULL;
    const ExprNode *e = x ? expr_node(r->k->ex, x->index) : NULL;
    int units = 0;
    if (!e || x->kind != IR_LOAD || x->a || x->buf < 0 || x->buf >= r->k->nbufs) return NULL;
    if (x->dtype != KN_F32 && x->dtype != KN_F64 && x->dtype != KN_I64) return NULL;
    if (e->kind == EX_SYM) return e->c == v ? x : NULL;
    if (e->kind != EX_ADD) return NULL;
    for (int i = 0; i < e->n; i++) {
        const ExprNode *a = expr_node(r->k->ex, e->args[i]);
        if (a && a->kind == EX_SYM && a->c == v) units++;
        else if (expr_has_sym(r->k->ex, e->args[i], v)) return NULL;
    }
    return units == 1 ? x : NULL;
}

/* Every statement of vector loop x is an update of an accumulator in lanes
 * on GNU C vectors (nv[i] > 0) that adds a direct_load: with KN_VEC, each
 * group's vectors come straight from the buffer, and the lane loop, which
 * would only copy them to aN_n (a store and a reload a vector), is not
 * run (softmax 4096x1024's max and sum loops, one thread: 0.51 -> 0.46
 * ns/element for the kernel). */
static int all_direct(const R *r, const IrNode *x, const int *accs, const int *nv, int na)
{
    for (IrRef s = x->child; s; s = r->k->nodes[s].next) {
        const IrNode *y = &r->k->nodes[s];
        int i = 0;
        while (i < na && !(y->kind == IR_UPDATE && y->var == accs[i])) i++;
        if (i == na || !nv[i] || !direct_load(r, y, x->var)) return 0;
    }
    return 1;
}

/* One step of folding an accumulator's lanes, l[0, h) op= l[h, 2h), on GNU C
 * vectors of h lanes: put_combine's operations lane by lane (a float max
 * kn_accmaxf's: src taken where dst is not NaN and src is not <= dst), so
 * the bits of the scalar steps, in a few vector instructions where gcc
 * leaves the scalar loops of kn_accmaxf scalar (softmax 4096x1024, one
 * thread: the row max's 32 lanes took ~300 instructions a row). */
static void put_vfold(R *r, const IrNode *u, kn_dtype dt, int acc, int h, int esz, int level)
{
    int fl = dt_is_float(dt), bytes = h * esz;
    indent(r->o, level);
    put(r->o, "{ typedef %s f_t __attribute__((vector_size(%d))); f_t d_, s_; ", fl ? render_dts[dt].value : "int64_t", bytes);
    put(r->o, "memcpy(&d_, a%d_l, %d); memcpy(&s_, a%d_l + %d, %d); ", acc, bytes, acc, h, bytes);
    if (u->op == OP_RMAX)
        put(r->o, "{ __typeof__(d_ == d_) m_ = %s; d_ = (f_t)((m_ & (__typeof__(m_))s_) | (~m_ & (__typeof__(m_))d_)); } ",
            fl ? "(d_ == d_) & ~(s_ <= d_)" : "s_ > d_");
    else if (fl) put_str(r->o, "d_ = d_ + s_; ");
    else put(r->o, "{ typedef uint64_t u_t __attribute__((vector_size(%d))); d_ = (f_t)((u_t)d_ + (u_t)s_); } ", bytes);
    put(r->o, "memcpy(a%d_l, &d_, %d); }\n", acc, bytes);
}

/* After the vector loop of x, where max accumulator acc's NaN masks
 * (aN_qK) saw a NaN: its lanes again, serially from their start, as the
 * lane loop without KN_VEC takes them (kn_accmaxf keeps a lane's first NaN,
 * whose bits KN_VMAXF may have lost); else nothing. */
static void put_redo(R *r, const IrNode *x, const IrNode *u, kn_dtype dt, int acc, int w, int nv, int level)
{
    const IrNode *ld = direct_load(r, u, x->var);
    int v = x->var, vb = vec_bytes(r->isa);
    indent(r->o, level);
    put(r->o, "{ __typeof__(a%d_q0) o_ = a%d_q0", acc, acc);
    for (int k = 1; k < nv; k++) put(r->o, " | a%d_q%d", acc, k);
    put(r->o, "; int64_t w_[%d], any_ = 0; memcpy(w_, &o_, %d); for (int l = 0; l < %d; l++) any_ |= w_[l];\n", vb / 8, vb,
        vb / 8);
    indent(r->o, level);
    put(r->o, "if (any_) { /* a NaN: the lanes again, for kn_accmaxf's bits */\n");
    indent(r->o, level + 1);
    put(r->o, "for (int l = 0; l < %d; l++) a%d_l[l] = -INFINITY;\n", w, acc);
    indent(r->o, level + 1);
    put(r->o, "for (int64_t s%d = 0; s%d < s%d_o; s%d++) a%d_l[s%d %% %d] = %s(a%d_l[s%d %% %d], b%d[", v, v, v, v, acc, v, w,
        dt == KN_F32 ? "kn_accmaxf" : "kn_accmax", acc, v, w, (int)ld->buf);
    render_put_index(r->o, r->k->ex, ld->index, 0);
    put_str(r->o, "]);\n");
    for (int k = 0; k < nv; k++) {
        indent(r->o, level + 1);
        put(r->o, "memcpy(&a%d_v%d, a%d_l + %d, %d);\n", acc, k, acc, k * (w / nv), vb);
    }
    indent(r->o, level);
    put_str(r->o, "} }\n");
}

/* The rest of vector loop x's extent, from s_o on (its symbol s), as a plain
 * loop of x's body at level: the tail that whole vectors did not cover. */
/* Where loop x ends: hi for a parallel loop's range, else its extent. */
static void put_end(R *r, const IrNode *x)
{
    if (x->var == r->range) put_str(r->o, "hi");
    else render_put_index(r->o, r->k->ex, x->index, 0);
}

static void put_rest(R *r, const IrNode *x, int level)
{
    int v = x->var;
    indent(r->o, level);
    put(r->o, "for (int64_t s%d = s%d_o; s%d < ", v, v, v);
    put_end(r, x);
    put(r->o, "; s%d++) {\n", v);
    render_put_block(r, x->child, level + 1);
    indent(r->o, level);
    put_str(r->o, "}\n");
}

/* A vector loop whose body updates accumulators, in the SIMD dialect:
 * each accumulator gets L lanes (the width, or a multiple of it the ISA
 * wants for more vectors in flight; starting at its op's identity) that
 * whole groups of L iterations update lane by lane, so the compiler
 * vectorises the lane loop without reassociating anything; the lanes are
 * then folded into the accumulator pairwise, and the last extent % L
 * iterations run as the plain loop. The order of the additions is fixed by
 * L alone: the same on every run and any number of threads.
 *
 * The lane loop writes a group's values to an array (aN_n), folded into
 * the lanes after it: with KN_VEC, into GNU C vectors of one register each
 * (a register-resident accumulator: an array updated in the lane loop stays
 * in memory under gcc, and every group waits on a store and a reload:
 * layer_norm 4096x1024 0.235 -> 0.19 ns/element, one thread), else lane by
 * lane into the array; the same operations on the same values in the same
 * order either way. */
static void put_lanes(R *r, const IrNode *x, const int *accs, int na, int level)
{
    int v = x->var, w = lanes_of(r, x), vb = vec_bytes(r->isa);
    kn_dtype dts_[MAX_LANE_ACCS];
    const IrNode *us[MAX_LANE_ACCS];
    int nv[MAX_LANE_ACCS]; /* vectors per accumulator; 0: the array only */
    int redo[MAX_LANE_ACCS]; /* a float max on KN_VMAX: NaN redoes its lanes (put_vcombine) */
    for (int i = 0; i < na; i++) {
        kn_dtype dt = KN_F32;
        const IrNode *u = acc_update(r, x, accs[i], &dt);
        int esz = dt == KN_F32 ? 4 : 8, per = vb / esz;
        dts_[i] = dt, us[i] = u;
        nv[i] = u && per > 1 && w % per == 0 && w / per <= 8 ? w / per : 0;
    }
    int direct = all_direct(r, x, accs, nv, na);
    for (int i = 0; i < na; i++)
        redo[i] = direct && nv[i] && dt_is_float(dts_[i]) && us[i]->op == OP_RMAX;
    indent(r->o, level);
    put(r->o, "{ /* vector(%u): %d lanes, then the rest */\n", (unsigned)x->width, w);
    for (int i = 0; i < na; i++) {
        kn_dtype dt = dts_[i];
        const IrNode *u = us[i];
        int fl = dt_is_float(dt);
        const char *ty = fl ? render_dts[dt].value : "int64_t";
        indent(r->o, level + 1);
        put(r->o, "%s a%d_l[%d], a%d_n[%d];\n", ty, accs[i], w, accs[i], w);
        indent(r->o, level + 1);
        put(r->o, "for (int l = 0; l < %d; l++) a%d_l[l] = %s;\n", w, accs[i], acc_init(u ? u->op : OP_SUM, fl));
        if (!nv[i]) continue;
        put_str(r->o, "#ifdef KN_VEC\n");
        indent(r->o, level + 1);
        put(r->o, "typedef %s a%d_vt __attribute__((vector_size(%d)));\n", ty, accs[i], vb);
        if (!fl && u->op == OP_SUM) { /* the integer sum wraps as uint64 */
            indent(r->o, level + 1);
            put(r->o, "typedef uint64_t a%d_ut __attribute__((vector_size(%d)));\n", accs[i], vb);
        }
        indent(r->o, level + 1);
        put(r->o, "a%d_vt", accs[i]);
        for (int k = 0; k < nv[i]; k++) put(r->o, "%s a%d_v%d", k ? "," : "", accs[i], k);
        if (fl && u->op == OP_RMAX && !redo[i])
            for (int k = 0; k < nv[i]; k++) put(r->o, ", a%d_q%d", accs[i], k);
        put_str(r->o, ";\n");
        if (redo[i]) { /* NaN masks */
            indent(r->o, level + 1);
            put(r->o, "__typeof__(a%d_v0 == a%d_v0)", accs[i], accs[i]);
            for (int k = 0; k < nv[i]; k++) put(r->o, "%s a%d_q%d", k ? "," : "", accs[i], k);
            put_str(r->o, ";\n");
        }
        for (int k = 0; k < nv[i]; k++) {
            indent(r->o, level + 1);
            put(r->o, "memcpy(&a%d_v%d, a%d_l + %d, %d);", accs[i], k, accs[i], k * (w / nv[i]), vb);
            if (redo[i]) put(r->o, " a%d_q%d = a%d_v%d != a%d_v%d;", accs[i], k, accs[i], k, accs[i], k);
            else if (fl && u->op == OP_RMAX) put(r->o, " a%d_q%d = a%d_v%d;", accs[i], k, accs[i], k);
            put_char(r->o, '\n');
        }
        put_str(r->o, "#endif\n");
    }
    indent(r->o, level + 1);
    put(r->o, "int64_t s%d_o = 0;\n", v);
    indent(r->o, level + 1);
    put(r->o, "for (; s%d_o + %d <= ", v, w);
    render_put_index(r->o, r->k->ex, x->index, 1);
    put(r->o, "; s%d_o += %d) {\n", v, w);
    if (direct) put_str(r->o, "#ifndef KN_VEC\n");
    indent(r->o, level + 2);
    put(r->o, "KN_LANES for (int s%d_l = 0; s%d_l < %d; s%d_l++) {\n", v, v, w, v);
    indent(r->o, level + 3);
    put(r->o, "const int64_t s%d = s%d_o + s%d_l;\n", v, v, v);
    r->lane = v;
    render_put_block(r, x->child, level + 3);
    r->lane = -1;
    indent(r->o, level + 2);
    put_str(r->o, "}\n");
    if (direct) put_str(r->o, "#endif\n");
    char dst[48], src[48];
    for (int i = 0; i < na; i++) {
        if (!us[i]) continue;
        if (nv[i]) put_str(r->o, "#ifdef KN_VEC\n");
        for (int k = 0; k < nv[i]; k++) { /* with KN_VEC: the group's values as vectors, folded into the lanes' */
            const IrNode *ld = direct ? direct_load(r, us[i], v) : NULL;
            indent(r->o, level + 2);
            if (ld) {
                put(r->o, "{ a%d_vt n_; { const int64_t s%d = s%d_o + %d; memcpy(&n_, &b%d[", accs[i], v, v, k * (w / nv[i]), (int)ld->buf);
                render_put_index(r->o, r->k->ex, ld->index, 0);
                put(r->o, "], %d); } ", vb);
            } else
                put(r->o, "{ a%d_vt n_; memcpy(&n_, a%d_n + %d, %d); ", accs[i], accs[i], k * (w / nv[i]), vb);
            snprintf(dst, sizeof dst, "a%d_v%d", accs[i], k);
            snprintf(src, sizeof src, "a%d_q%d", accs[i], k);
            put_vcombine(r, us[i], dts_[i], accs[i], dst, "n_", src, redo[i]);
            put_str(r->o, " }\n");
        }
        if (nv[i]) put_str(r->o, "#else\n");
        indent(r->o, level + 2);
        put(r->o, "for (int l = 0; l < %d; l++) ", w);
        snprintf(dst, sizeof dst, "a%d_l[l]", accs[i]);
        snprintf(src, sizeof src, "a%d_n[l]", accs[i]);
        put_combine(r, us[i], dts_[i], dst, src);
        put_char(r->o, '\n');
        if (nv[i]) put_str(r->o, "#endif\n");
    }
    indent(r->o, level + 1);
    put_str(r->o, "}\n");
    for (int i = 0; i < na; i++) {
        if (!nv[i]) continue;
        put_str(r->o, "#ifdef KN_VEC\n");
        if (redo[i]) put_redo(r, x, us[i], dts_[i], accs[i], w, nv[i], level + 1);
        for (int k = 0; k < nv[i] && !redo[i] && dt_is_float(dts_[i]) && us[i]->op == OP_RMAX; k++) { /* a lane's first NaN */
            indent(r->o, level + 1);
            put(r->o, "{ __typeof__(a%d_q%d == a%d_q%d) m_ = a%d_q%d != a%d_q%d; a%d_v%d = (a%d_vt)((m_ & (__typeof__(m_))a%d_q%d) | (~m_ & (__typeof__(m_))a%d_v%d)); }\n",
                accs[i], k, accs[i], k, accs[i], k, accs[i], k, accs[i], k, accs[i], accs[i], k, accs[i], k);
        }
        for (int k = 0; k < nv[i]; k++) {
            indent(r->o, level + 1);
            put(r->o, "memcpy(a%d_l + %d, &a%d_v%d, %d);\n", accs[i], k * (w / nv[i]), accs[i], k, vb);
        }
        put_str(r->o, "#endif\n");
    }
    for (int i = 0; i < na; i++) {
        kn_dtype dt = dts_[i];
        const IrNode *u = us[i];
        int esz = dt == KN_F32 ? 4 : 8, h = w / 2;
        if (nv[i]) { /* with KN_VEC: the halvings of two lanes or more on GNU C vectors */
            put_str(r->o, "#ifdef KN_VEC\n");
            for (; h >= 2; h /= 2) put_vfold(r, u, dt, accs[i], h, esz, level + 1);
            put_str(r->o, "#else\n");
        }
        for (int k = w / 2; k >= 1 && u; k /= 2) {
            if (k == h && nv[i]) put_str(r->o, "#endif\n");
            indent(r->o, level + 1);
            put(r->o, "for (int l = 0; l < %d; l++) ", k);
            snprintf(dst, sizeof dst, "a%d_l[l]", accs[i]);
            snprintf(src, sizeof src, "a%d_l[l + %d]", accs[i], k);
            put_combine(r, u, dt, dst, src);
            put_char(r->o, '\n');
        }
        indent(r->o, level + 1);
        snprintf(dst, sizeof dst, "a%d", accs[i]);
        snprintf(src, sizeof src, "a%d_l[0]", accs[i]);
        if (u) put_combine(r, u, dt, dst, src);
        put_char(r->o, '\n');
    }
    put_rest(r, x, level + 1);
    indent(r->o, level);
    put_str(r->o, "}\n");
}

#define STREAM_MIN_BYTES (8 << 20) /* an output this large outgrows a core's caches */

/* The store of vector loop x, if the SIMD dialect streams it: the body is
 * that one plain f32 store, unit stride in x's symbol with no data-dependent
 * offset, to a buffer of STREAM_MIN_BYTES or more that the kernel never
 * loads, and the instruction set has non-temporal stores (its header
 * defines KN_NT); else NULL. Such an output is written once and not read
 * again here, so its lines need not come into the cache only to be
 * overwritten (layer_norm 4096x1024's kernel, one thread, side by side:
 * 0.28 -> 0.19 ns/element; 0.41 -> 0.32 on a loaded machine). An output
 * read again soon after the kernel comes from memory instead of the last
 * level cache: past 8 MiB, little of it would still be in a core's. */
static const IrNode *stream_store(const R *r, const IrNode *x)
{
    const IrNode *y = stmt_at(r, x->child);
    if (!r->isa || !strstr(r->isa->header, "KN_NT(") || x->dtype != LOOP_VECTOR || !y || y->next)
        return NULL;
    if (y->kind != IR_STORE || y->op || y->b || y->buf < 0 || y->buf >= r->k->nbufs) return NULL;
    const IrBuf *b = &r->k->bufs[y->buf];
    const ExprNode *size = expr_node(r->k->ex, b->size), *e = expr_node(r->k->ex, y->index);
    if (b->dtype != KN_F32 || !size || size->kind != EX_CONST || size->c < STREAM_MIN_BYTES / 4 || !e) return NULL;
    int units = 0, v = x->var;
    if (e->kind == EX_SYM) units = e->c == v;
    for (int i = 0; e->kind == EX_ADD && i < e->n; i++) {
        const ExprNode *a = expr_node(r->k->ex, e->args[i]);
        if (a && a->kind == EX_SYM && a->c == v) units++;
        else if (expr_has_sym(r->k->ex, e->args[i], v)) return NULL;
    }
    if (units != 1) return NULL;
    for (uint32_t i = 1; i < r->k->n; i++)
        if (r->k->nodes[i].kind == IR_LOAD && r->k->nodes[i].buf == y->buf) return NULL;
    return y;
}

/* Streamed vector loop x (stream_store): groups of 16 elements computed
 * into nt_ (in L1, vectorised as the plain loop), each then stored to the
 * buffer by KN_STREAM64; the rest of the extent as the plain loop; a fence
 * after it, so that the stores are seen before the threads' join. */
static void put_stream(R *r, const IrNode *x, const IrNode *st, int level)
{
    int v = x->var;
    indent(r->o, level);
    put(r->o, "{ /* vector(%u), streamed: b%d is stored here once and never loaded */\n", (unsigned)x->width, (int)st->buf);
    indent(r->o, level + 1);
    put(r->o, "float nt_[16];\n");
    indent(r->o, level + 1);
    put(r->o, "int64_t s%d_o = 0;\n", v);
    indent(r->o, level + 1);
    put(r->o, "for (; s%d_o + 16 <= ", v);
    render_put_index(r->o, r->k->ex, x->index, 1);
    put(r->o, "; s%d_o += 16) {\n", v);
    indent(r->o, level + 2);
    put(r->o, "KN_IVDEP for (int s%d_l = 0; s%d_l < 16; s%d_l++) {\n", v, v, v);
    indent(r->o, level + 3);
    put(r->o, "const int64_t s%d = s%d_o + s%d_l;\n", v, v, v);
    r->stream = v;
    render_put_block(r, x->child, level + 3);
    r->stream = -1;
    indent(r->o, level + 2);
    put_str(r->o, "}\n");
    indent(r->o, level + 2);
    put(r->o, "{ const int64_t s%d = s%d_o; KN_STREAM64(&b%d[", v, v, (int)st->buf);
    render_put_index(r->o, r->k->ex, st->index, 0);
    put_str(r->o, "], nt_); }\n");
    indent(r->o, level + 1);
    put_str(r->o, "}\n");
    put_rest(r, x, level + 1);
    indent(r->o, level + 1);
    put_str(r->o, "KN_SFENCE();\n");
    indent(r->o, level);
    put_str(r->o, "}\n");
}

/* ---- the next row, prefetched ----
 * A loop whose body makes several passes over a row (softmax: max, exp,
 * sum, scale; layer_norm: mean, variance, output) reads its row from
 * memory in the first pass, whose loads then wait on each line: the
 * hardware prefetcher follows a stream only within a 4 KiB page, so it
 * starts again at every row of 4 KiB. After the first pass, the SIMD
 * dialect prefetches the lines the first pass will read in the next
 * iteration, which come in while the later passes compute (kiln bench ops'
 * softmax gains markedly against memcpy).
 * What qualifies (prefetch_pass): the first loop of x's body is innermost,
 * of constant extent, another loop follows it, and it loads a buffer at
 * unit stride in its var, at an index of x's var, a row of PF_MIN_BYTES
 * to PF_MAX_BYTES (larger rows would push the current one out of L1). A
 * first loop that is a cascaded sum's levels (src/loopopt.c, cascade)
 * counts by the innermost loop its first loops lead to: its row spans
 * that loop's extent and what the levels' vars add, each at most its
 * extent's bound (a min's constant); the prefetch takes those vars at 0. */
#define PF_MIN_BYTES 1024
#define PF_MAX_BYTES (32 << 10)
#define PF_LOADS 8 /* distinct rows prefetched, at most */

typedef struct {
    const IrNode *at[PF_LOADS]; /* the loads */
    int64_t span[PF_LOADS];     /* the elements of each one's row */
    int n, levels[IR_MAX_NEST]; /* the levels' vars, taken at 0 */
    int64_t top[IR_MAX_NEST];   /* and their largest values */
    int nlev;
    const IrNode *l;            /* the innermost loop */
} Pf;

/* Index e is rest + s<v> with rest free of s<v>. */
static int unit_stride(const ExprTable *t, ExprId e, int v)
{
    const ExprNode *n = expr_node(t, e);
    if (!n) return 0;
    if (n->kind == EX_SYM) return n->c == v;
    int units = 0;
    for (int i = 0; n->kind == EX_ADD && i < n->n; i++) {
        const ExprNode *a = expr_node(t, n->args[i]);
        if (a && a->kind == EX_SYM && a->c == v) units++;
        else if (expr_has_sym(t, n->args[i], v)) return 0;
    }
    return units == 1;
}

/* An extent's largest value: a constant's, or a min's constant. 1, or 0. */
static int extent_bound(const ExprTable *t, ExprId e, int64_t *hi)
{
    const ExprNode *x = expr_node(t, e);
    if (expr_as_const(t, e, hi)) return 1;
    return x && x->kind == EX_MIN && (expr_as_const(t, x->args[0], hi) || expr_as_const(t, x->args[1], hi));
}

/* The first pass of loop x: its first statement that is a loop, if it
 * qualifies (above), with what to prefetch in *pf. */
static IrRef prefetch_pass(R *r, const IrNode *x, Pf *pf)
{
    const ExprTable *t = r->k->ex;
    pf->n = pf->nlev = 0;
    if (!r->isa || r->k->tile || x->kind != IR_LOOP) return 0;
    IrRef first = 0;
    for (IrRef s = x->child; s && s < r->k->n && !first; s = r->k->nodes[s].next)
        if (r->k->nodes[s].kind == IR_LOOP) first = s;
    const IrNode *l = stmt_at(r, first);
    int64_t ext, a, k;
    while (l && !innermost(r, l)) { /* a cascade's levels */
        IrRef in = 0;
        if (pf->nlev == IR_MAX_NEST || !extent_bound(t, l->index, &pf->top[pf->nlev])) return 0;
        pf->levels[pf->nlev] = l->var, pf->top[pf->nlev++]--;
        for (IrRef s = l->child; s && s < r->k->n && !in; s = r->k->nodes[s].next)
            if (r->k->nodes[s].kind == IR_LOOP) in = s;
        l = stmt_at(r, in);
    }
    if (!l || !expr_as_const(t, l->index, &ext)) return 0;
    pf->l = l;
    int more = 0;
    for (IrRef s = r->k->nodes[first].next; s && s < r->k->n && !more; s = r->k->nodes[s].next)
        more = r->k->nodes[s].kind == IR_LOOP;
    if (!more) return 0;
    for (IrRef s = l->child; s && s < r->k->n; s = r->k->nodes[s].next) {
        const IrNode *y = &r->k->nodes[s];
        if ((y->kind != IR_STORE && y->kind != IR_UPDATE) || !render_dag_build(r, y->a, s)) return 0;
        for (int i = 0; i < r->d->n; i++) {
            const IrNode *v = &r->k->nodes[r->d->v[i].ref];
            int64_t span = ext;
            if (v->kind != IR_LOAD || v->a || v->buf < 0 || v->buf >= r->k->nbufs) continue;
            for (int j = 0; j < pf->nlev && span; j++) /* what each level adds: a*(its largest value) */
                span = loop_lin(t, v->index, pf->levels[j], &a, &k) && a >= 0 ? span + a * pf->top[j] : 0;
            double bytes = (double)span * (double)kn_dtype_size((kn_dtype)r->k->bufs[v->buf].dtype);
            if (bytes < PF_MIN_BYTES || bytes > PF_MAX_BYTES || !unit_stride(t, v->index, l->var) ||
                !expr_has_sym(t, v->index, x->var))
                continue;
            int dup = 0;
            for (int j = 0; j < pf->n; j++) dup |= pf->at[j]->buf == v->buf && pf->at[j]->index == v->index;
            if (!dup && pf->n < PF_LOADS) pf->span[pf->n] = span, pf->at[pf->n++] = v;
        }
    }
    return pf->n ? first : 0;
}

/* After loop x's first pass: the lines its loads read at x's next
 * iteration. x's var is declared again in an inner block as the next one,
 * so the loads' indices render as they are. */
void loop_put_prefetch(R *r, const IrNode *x, int level)
{
    Pf pf;
    int v = x->var;
    if (!prefetch_pass(r, x, &pf)) return;
    const IrNode *l = pf.l;
    indent(r->o, level);
    put(r->o, "if (s%d + 1 < ", v);
    render_put_index(r->o, r->k->ex, x->index, 1);
    put(r->o, ") { /* the first pass's lines of the next row, while the other passes run */\n");
    indent(r->o, level + 1);
    put(r->o, "const int64_t s%d_n = s%d + 1;\n", v, v);
    indent(r->o, level + 1);
    put(r->o, "{\n");
    indent(r->o, level + 2);
    put(r->o, "const int64_t s%d = s%d_n;\n", v, v);
    for (int j = 0; j < pf.nlev; j++) {
        indent(r->o, level + 2);
        put(r->o, "const int64_t s%d = 0; (void)s%d;\n", pf.levels[j], pf.levels[j]);
    }
    for (int i = 0; i < pf.n; i++) {
        indent(r->o, level + 2);
        put(r->o, "for (int64_t s%d = 0; s%d < ", (int)l->var, (int)l->var);
        if (pf.nlev) put(r->o, "%lld", (long long)pf.span[i]);
        else render_put_index(r->o, r->k->ex, l->index, 0);
        put(r->o, "; s%d += %d) KN_PREFETCH(&b%d[", (int)l->var, 64 / (int)kn_dtype_size((kn_dtype)r->k->bufs[pf.at[i]->buf].dtype),
            (int)pf.at[i]->buf);
        render_put_index(r->o, r->k->ex, pf.at[i]->index, 0);
        put_str(r->o, "]);\n");
    }
    indent(r->o, level + 1);
    put_str(r->o, "}\n");
    indent(r->o, level);
    put_str(r->o, "}\n");
}

/* ---- streams prefetched ahead ----
 * A long innermost loop that streams through large buffers at unit stride
 * (a pointwise kernel over a whole tensor, the optimizer's updates) waits
 * on memory where the hardware prefetcher falls behind: it follows a
 * stream only within a page, and starts again at each one. The SIMD
 * dialect runs such a loop in blocks of AHEAD_BLOCK iterations and, before
 * each block, prefetches the lines of every such load and store AHEAD
 * iterations on (kiln bench ops' gelu(x*a+b) over 16M floats gains markedly
 * against memcpy; streaming past the caches instead loses, where memory is
 * slower than a large L3). What qualifies (ahead_refs): x is a vector loop,
 * or a flat loop run over a range of threads, of AHEAD_MIN_ITERS or more
 * iterations, whose body is stores, and whose unit-stride accesses without
 * an offset to buffers of AHEAD_MIN_BYTES or more are the streams. */
#define AHEAD 1024
#define AHEAD_BLOCK 64
#define AHEAD_MIN_ITERS 4096
#define AHEAD_MIN_BYTES (1 << 20)

static int stream_ref(R *r, const IrNode *v, int var, const IrNode **at, int *n)
{
    const IrBuf *b = v->buf >= 0 && v->buf < r->k->nbufs ? &r->k->bufs[v->buf] : NULL;
    int64_t size;
    if (!b || v->kind == IR_LOAD ? v->a != 0 : v->b != 0) return 0;
    if (!expr_as_const(r->k->ex, b->size, &size) || (double)size * kn_dtype_size((kn_dtype)b->dtype) < AHEAD_MIN_BYTES ||
        !unit_stride(r->k->ex, v->index, var))
        return 0;
    for (int j = 0; j < *n; j++)
        if (at[j]->buf == v->buf && at[j]->index == v->index) return 0;
    if (*n == PF_LOADS) return -1;
    at[(*n)++] = v;
    return 0;
}

static int ahead_refs(R *r, const IrNode *x, const IrNode **at)
{
    int64_t ext;
    int n = 0;
    if (!r->isa || r->k->tile || !innermost(r, x) || !expr_as_const(r->k->ex, x->index, &ext) || ext < AHEAD_MIN_ITERS ||
        (x->dtype != LOOP_VECTOR && x->var != r->range))
        return 0;
    for (IrRef s = x->child; s && s < r->k->n; s = r->k->nodes[s].next) {
        const IrNode *y = &r->k->nodes[s];
        if (y->kind != IR_STORE || !render_dag_build(r, y->a, s) || stream_ref(r, y, x->var, at, &n) < 0) return 0;
        for (int i = 0; i < r->d->n; i++) {
            const IrNode *v = &r->k->nodes[r->d->v[i].ref];
            if (v->kind == IR_LOAD && stream_ref(r, v, x->var, at, &n) < 0) return 0;
        }
    }
    return n;
}

/* Loop x (ahead_refs gave its n streams at[]) in blocks, each after the
 * prefetches of its streams' lines AHEAD iterations on, then the rest. */
static void put_ahead(R *r, const IrNode *x, const IrNode **at, int n, int level)
{
    int v = x->var;
    indent(r->o, level);
    put(r->o, "{ /* %s, its %d stream%s prefetched %d iterations ahead */\n",
        x->dtype == LOOP_VECTOR ? "vector" : "parallel: this thread's range", n, n > 1 ? "s" : "", AHEAD);
    indent(r->o, level + 1);
    put(r->o, "int64_t s%d_o = %s;\n", v, x->var == r->range ? "lo" : "0");
    indent(r->o, level + 1);
    put(r->o, "for (; s%d_o + %d <= ", v, AHEAD_BLOCK);
    put_end(r, x);
    put(r->o, "; s%d_o += %d) {\n", v, AHEAD_BLOCK);
    indent(r->o, level + 2);
    put(r->o, "if (s%d_o + %d < ", v, AHEAD + AHEAD_BLOCK);
    render_put_index(r->o, r->k->ex, x->index, 1);
    put(r->o, ") {\n");
    indent(r->o, level + 3);
    put(r->o, "const int64_t s%d = s%d_o + %d;\n", v, v, AHEAD);
    for (int i = 0; i < n; i++) {
        int esz = (int)kn_dtype_size((kn_dtype)r->k->bufs[at[i]->buf].dtype);
        for (int j = 0; j < AHEAD_BLOCK * esz; j += 64) {
            indent(r->o, level + 3);
            put(r->o, "KN_PREFETCH(&b%d[", (int)at[i]->buf);
            render_put_index(r->o, r->k->ex, at[i]->index, 0);
            put(r->o, "] + %d);\n", j / esz);
        }
    }
    indent(r->o, level + 2);
    put_str(r->o, "}\n");
    indent(r->o, level + 2);
    put(r->o, "KN_IVDEP for (int64_t s%d_l = 0; s%d_l < %d; s%d_l++) {\n", v, v, AHEAD_BLOCK, v);
    indent(r->o, level + 3);
    put(r->o, "const int64_t s%d = s%d_o + s%d_l;\n", v, v, v);
    render_put_block(r, x->child, level + 3);
    indent(r->o, level + 2);
    put_str(r->o, "}\n");
    indent(r->o, level + 1);
    put_str(r->o, "}\n");
    put_rest(r, x, level + 1);
    indent(r->o, level);
    put_str(r->o, "}\n");
}

/* Loop x of kind unroll(W): each group of W iterations written out, a block
 * per iteration with the var a constant there (all of them when W covers
 * a constant extent), then the rest as a loop. */
static void put_unroll(R *r, const IrNode *x, int level)
{
    int v = x->var, w = (int)x->width;
    int64_t e;
    int full = expr_as_const(r->k->ex, x->index, &e) && e <= w;
    indent(r->o, level);
    put(r->o, "{ /* unroll(%d) */\n", w);
    if (!full) {
        indent(r->o, level + 1);
        put(r->o, "int64_t s%d_o = 0;\n", v);
        indent(r->o, level + 1);
        put(r->o, "for (; s%d_o + %d <= ", v, w);
        put_end(r, x);
        put(r->o, "; s%d_o += %d) {\n", v, w);
    }
    for (int j = 0; j < (full ? (int)e : w); j++) {
        indent(r->o, level + 1 + !full);
        if (full) put(r->o, "{\n"), indent(r->o, level + 2), put(r->o, "const int64_t s%d = %d;\n", v, j);
        else put(r->o, "{\n"), indent(r->o, level + 3), put(r->o, "const int64_t s%d = s%d_o + %d;\n", v, v, j);
        render_put_block(r, x->child, level + 2 + !full);
        indent(r->o, level + 1 + !full);
        put_str(r->o, "}\n");
    }
    if (!full) {
        indent(r->o, level + 1);
        put_str(r->o, "}\n");
        put_rest(r, x, level + 1);
    }
    indent(r->o, level);
    put_str(r->o, "}\n");
}

void loop_put_loop(R *r, const IrNode *x, int level)
{
    int accs[MAX_LANE_ACCS], na = -1;
    if (x->dtype == LOOP_UNROLL && x->width > 1 && x->width <= 64 && level <= IR_MAX_NEST) {
        put_unroll(r, x, level);
        return;
    }
    if (loop_put_scalar(r, x, level)) return;
    if (r->isa && x->dtype == LOOP_VECTOR && r->lane < 0 && level <= IR_MAX_NEST) na = lane_accs(r, x, accs);
    if (na > 0) {
        put_lanes(r, x, accs, na, level);
        return;
    }
    if (na == 0 && level <= IR_MAX_NEST && stream_store(r, x)) {
        put_stream(r, x, stream_store(r, x), level);
        return;
    }
    const IrNode *refs[PF_LOADS];
    int nrefs = na <= 0 && level <= IR_MAX_NEST ? ahead_refs(r, x, refs) : 0;
    if (nrefs) {
        put_ahead(r, x, refs, nrefs, level);
        return;
    }
    indent(r->o, level);
    /* a parallel loop's iterations are independent too: an innermost one (Adam's update of a flat weight)
     * is vectorised without the overlap checks that gcc gives up on past ten pairs of buffers */
    if (r->isa && (x->dtype == LOOP_VECTOR || (x->dtype == LOOP_PARALLEL && innermost(r, x))))
        put_str(r->o, "KN_IVDEP ");
    if (x->var == r->range) put(r->o, "for (int64_t s%d = lo; s%d < hi; s%d++) {", (int)x->var, (int)x->var, (int)x->var);
    else {
        put(r->o, "for (int64_t s%d = 0; s%d < ", (int)x->var, (int)x->var);
        render_put_index(r->o, r->k->ex, x->index, 0);
        put(r->o, "; s%d++) {", (int)x->var);
    }
    if (x->dtype == LOOP_PARALLEL && x->var == r->range) put_str(r->o, " /* parallel: this thread's range */");
    else if (x->dtype == LOOP_VECTOR && r->isa) put(r->o, " /* vector(%u) */", (unsigned)x->width);
    else if (x->dtype == LOOP_VECTOR || x->dtype == LOOP_UNROLL)
        put(r->o, " /* %s(%u): serial in this dialect */", loop_kinds[x->dtype], (unsigned)x->width);
    else if (x->dtype != LOOP_SERIAL && x->dtype <= LOOP_GPU_THREAD)
        put(r->o, " /* %s: serial here */", loop_kinds[x->dtype]);
    put_char(r->o, '\n');
    Pf pf;
    IrRef row = r->pf_row, after = r->pf_after, first = level <= IR_MAX_NEST ? prefetch_pass(r, x, &pf) : 0;
    if (first) r->pf_row = (IrRef)(x - r->k->nodes), r->pf_after = first;
    if (level <= IR_MAX_NEST) render_put_block(r, x->child, level + 1);
    r->pf_row = row, r->pf_after = after;
    indent(r->o, level);
    put_str(r->o, "}\n");
}
