/*
 * replay.h — replaying a PyTorch fixture case (fixture.h) through kiln: the
 * table from op names to kn_ calls, building the inputs and comparing the
 * results with PyTorch's at the tolerances below. Shared by tests/test_ref.c
 * (eager) and tests/test_compiled.c (traced and compiled), which include it
 * once, after test.h; every function here is used by both.
 *
 * One case in flight is a Call: make_stored builds the stored tensors (with
 * grad: those with a reference gradient require it), apply_views applies the
 * view recipe, row->run calls the op, verify compares the results, and for
 * gradients grad_loss builds loss = sum_i sum(out_i * cot_i), whose gradient
 * compare_tensor checks at case_grad_tol.
 *
 * Tolerances: outputs rtol 1e-5 / atol 1e-6 for f32 (1e-10 / 1e-12 for f64,
 * about an ulp for f16 and bf16, exact for integers and bool); gradients rtol
 * 1e-4 / atol 1e-5 for f32 (1e-9 / 1e-10 for f64), or the looser tolerance
 * of the outputs they flow back from.
 */
#ifndef KN_REPLAY_H
#define KN_REPLAY_H

#include <stdlib.h>

#include "fixture.h"

#define WHY_LEN 512

typedef struct OpRow OpRow;

/* One case in flight: its context, inputs and the results the op gave. */
typedef struct {
    kn_ctx *ctx;
    const FxCase *c;
    const OpRow *row;
    kn_tensor *in[FX_MAX_TENSORS];
    kn_tensor *base[FX_MAX_TENSORS]; /* the stored tensor behind in[i] when it requires grad */
    kn_tensor *res[FX_MAX_TENSORS];
    int nres;
    char note[WHY_LEN]; /* a failure the runner found beyond the values ("" if none) */
} Call;

typedef kn_tensor *(*Unary)(kn_ctx *, kn_tensor *);
typedef kn_tensor *(*Binary)(kn_ctx *, kn_tensor *, kn_tensor *);
typedef kn_tensor *(*Int1)(kn_ctx *, kn_tensor *, int);
typedef kn_tensor *(*Int2)(kn_ctx *, kn_tensor *, int, int);
typedef kn_tensor *(*Long1)(kn_ctx *, kn_tensor *, int64_t);
typedef kn_tensor *(*Real1)(kn_ctx *, kn_tensor *, double);
typedef kn_tensor *(*DimsFn)(kn_ctx *, kn_tensor *, const int *, int, int);
typedef kn_tensor *(*VarFn)(kn_ctx *, kn_tensor *, const int *, int, int, int);
typedef kn_tensor *(*ShapeFn)(kn_ctx *, kn_tensor *, int, const int64_t *);
typedef kn_tensor *(*JoinFn)(kn_ctx *, kn_tensor *const *, int, int);
typedef kn_tensor *(*IndexFn)(kn_ctx *, kn_tensor *, int, kn_tensor *);
typedef kn_tensor *(*ConvFn)(kn_ctx *, kn_tensor *, kn_tensor *, kn_tensor *, const kn_conv_opts *);
typedef kn_tensor *(*PoolFn)(kn_ctx *, kn_tensor *, const kn_pool_opts *);
typedef kn_tensor *(*ClassLoss)(kn_ctx *, kn_tensor *, kn_tensor *, const kn_loss_opts *);
typedef kn_tensor *(*PairLoss)(kn_ctx *, kn_tensor *, kn_tensor *, kn_reduction);

/* A row: the op's name in the fixtures, how to call it, and the kn_ function.
 * Only the pointer field the runner reads is set. */
struct OpRow {
    const char *name;
    void (*run)(Call *k);
    Unary unary;
    Binary binary;
    Int1 int1;
    Int2 int2;
    Long1 long1;
    Real1 real1;
    DimsFn dims;
    VarFn var;
    ShapeFn shape;
    JoinFn join;
    IndexFn index;
    ConvFn conv;
    PoolFn pool;
    ClassLoss class_loss;
    PairLoss pair_loss;
};

/* ---- argument access ---- */

static int iarg(const Call *k, int i) { return (int)k->c->ints[i]; }
static int64_t larg(const Call *k, int i) { return k->c->ints[i]; }
static double farg(const Call *k, int i) { return k->c->flts[i]; }

/* ints[from..nint) as an int array; returns how many. */
static int int_list(const Call *k, int from, int *out)
{
    int i, n = 0;
    for (i = from; i < k->c->nint; i++) out[n++] = (int)k->c->ints[i];
    return n;
}

static void one(Call *k, kn_tensor *t)
{
    k->res[0] = t;
    k->nres = 1;
}

/* ---- runners: one per calling convention ---- */

static void run_unary(Call *k) { one(k, k->row->unary(k->ctx, k->in[0])); }
static void run_binary(Call *k) { one(k, k->row->binary(k->ctx, k->in[0], k->in[1])); }
static void run_int1(Call *k) { one(k, k->row->int1(k->ctx, k->in[0], iarg(k, 0))); }
static void run_int2(Call *k) { one(k, k->row->int2(k->ctx, k->in[0], iarg(k, 0), iarg(k, 1))); }
static void run_long1(Call *k) { one(k, k->row->long1(k->ctx, k->in[0], larg(k, 0))); }
static void run_real1(Call *k) { one(k, k->row->real1(k->ctx, k->in[0], farg(k, 0))); }

/* ints = keepdim, dims... */
static void run_dims(Call *k)
{
    int dims[FX_MAX_ARGS];
    int n = int_list(k, 1, dims);
    one(k, k->row->dims(k->ctx, k->in[0], dims, n, iarg(k, 0)));
}

/* ints = keepdim, correction, dims... */
static void run_var(Call *k)
{
    int dims[FX_MAX_ARGS];
    int n = int_list(k, 2, dims);
    one(k, k->row->var(k->ctx, k->in[0], dims, n, iarg(k, 1), iarg(k, 0)));
}

/* ints = a shape (reshape, view, expand) */
static void run_shape(Call *k)
{
    one(k, k->row->shape(k->ctx, k->in[0], k->c->nint, k->c->ints));
}

static void run_permute(Call *k)
{
    int perm[FX_MAX_ARGS];
    int_list(k, 0, perm);
    one(k, kn_permute(k->ctx, k->in[0], perm));
}

/* Also checks that the result is laid out contiguously. */
static void run_contiguous(Call *k)
{
    one(k, kn_contiguous(k->ctx, k->in[0]));
    if (k->res[0] && !kn_is_contiguous(k->res[0]))
        snprintf(k->note, sizeof k->note, "result is not contiguous");
}

static void run_clamp(Call *k) { one(k, kn_clamp(k->ctx, k->in[0], farg(k, 0), farg(k, 1))); }
static void run_where(Call *k) { one(k, kn_where(k->ctx, k->in[0], k->in[1], k->in[2])); }
static void run_masked_fill(Call *k) { one(k, kn_masked_fill(k->ctx, k->in[0], k->in[1], farg(k, 0))); }
static void run_to(Call *k) { one(k, kn_to(k->ctx, k->in[0], (kn_dtype)iarg(k, 0))); }

static void run_slice(Call *k)
{
    one(k, kn_slice(k->ctx, k->in[0], iarg(k, 0), larg(k, 1), larg(k, 2), larg(k, 3)));
}

static void run_narrow(Call *k) { one(k, kn_narrow(k->ctx, k->in[0], iarg(k, 0), larg(k, 1), larg(k, 2))); }
static void run_pad(Call *k) { one(k, kn_pad(k->ctx, k->in[0], k->c->nint, k->c->ints, farg(k, 0))); }
static void run_join(Call *k) { one(k, k->row->join(k->ctx, k->in, k->c->nin, iarg(k, 0))); }

/* split/chunk: -1 is an error; a count over the buffer is reported as a note. */
static void take_pieces(Call *k, int n)
{
    if (n > FX_MAX_TENSORS) snprintf(k->note, sizeof k->note, "%d pieces, more than the driver holds", n);
    k->nres = n < 0 || n > FX_MAX_TENSORS ? 0 : n;
}

static void run_split(Call *k)
{
    take_pieces(k, kn_split(k->ctx, k->in[0], larg(k, 0), iarg(k, 1), k->res, FX_MAX_TENSORS));
}

static void run_chunk(Call *k)
{
    take_pieces(k, kn_chunk(k->ctx, k->in[0], iarg(k, 0), iarg(k, 1), k->res, FX_MAX_TENSORS));
}

static void run_index(Call *k) { one(k, k->row->index(k->ctx, k->in[0], iarg(k, 0), k->in[1])); }

static void run_scatter_add(Call *k)
{
    one(k, kn_scatter_add(k->ctx, k->in[0], iarg(k, 0), k->in[1], k->in[2]));
}

static void run_linear(Call *k) { one(k, kn_linear(k->ctx, k->in[0], k->in[1], k->in[2])); }

/* ints = stride[2], padding[2], dilation[2], output_padding[2], groups */
static void run_conv(Call *k)
{
    kn_conv_opts o;
    int i;
    memset(&o, 0, sizeof o);
    for (i = 0; i < 2; i++) {
        o.stride[i] = iarg(k, i);
        o.padding[i] = iarg(k, 2 + i);
        o.dilation[i] = iarg(k, 4 + i);
        o.output_padding[i] = iarg(k, 6 + i);
    }
    o.groups = iarg(k, 8);
    one(k, k->row->conv(k->ctx, k->in[0], k->in[1], k->in[2], &o));
}

/* ints = kernel[2], stride[2], padding[2], dilation[2], ceil_mode, exclude_pad, divisor */
static void run_pool(Call *k)
{
    kn_pool_opts o;
    int i;
    memset(&o, 0, sizeof o);
    for (i = 0; i < 2; i++) {
        o.kernel[i] = iarg(k, i);
        o.stride[i] = iarg(k, 2 + i);
        o.padding[i] = iarg(k, 4 + i);
        o.dilation[i] = iarg(k, 6 + i);
    }
    o.ceil_mode = iarg(k, 8);
    o.exclude_pad = iarg(k, 9);
    o.divisor = iarg(k, 10);
    one(k, k->row->pool(k->ctx, k->in[0], &o));
}

static void run_adaptive(Call *k) { one(k, kn_adaptive_avg_pool2d(k->ctx, k->in[0], larg(k, 0), larg(k, 1))); }

/* Results: y, then the running stats (read after the call) when given. */
static void run_batch_norm(Call *k)
{
    one(k, kn_batch_norm(k->ctx, k->in[0], k->in[1], k->in[2], k->in[3], k->in[4], iarg(k, 0), farg(k, 0),
                         farg(k, 1)));
    if (k->res[0] && k->in[1]) {
        k->res[1] = k->in[1];
        k->res[2] = k->in[2];
        k->nres = 3;
    }
}

static void run_layer_norm(Call *k)
{
    one(k, kn_layer_norm(k->ctx, k->in[0], k->c->nint, k->c->ints, k->in[1], k->in[2], farg(k, 0)));
}

static void run_group_norm(Call *k)
{
    one(k, kn_group_norm(k->ctx, k->in[0], larg(k, 0), k->in[1], k->in[2], farg(k, 0)));
}

static void run_rms_norm(Call *k)
{
    one(k, kn_rms_norm(k->ctx, k->in[0], k->c->nint, k->c->ints, k->in[1], farg(k, 0)));
}

static void run_softplus(Call *k) { one(k, kn_softplus(k->ctx, k->in[0], farg(k, 0), farg(k, 1))); }

/* ints = reduction, has_ignore_index, ignore_index; flts = label_smoothing */
static void run_class_loss(Call *k)
{
    kn_loss_opts o;
    memset(&o, 0, sizeof o);
    o.reduction = (kn_reduction)iarg(k, 0);
    o.weight = k->in[2];
    o.has_ignore_index = iarg(k, 1);
    o.ignore_index = larg(k, 2);
    o.label_smoothing = farg(k, 0);
    one(k, k->row->class_loss(k->ctx, k->in[0], k->in[1], &o));
}

static void run_pair_loss(Call *k)
{
    one(k, k->row->pair_loss(k->ctx, k->in[0], k->in[1], (kn_reduction)iarg(k, 0)));
}

static void run_bce(Call *k)
{
    one(k, kn_binary_cross_entropy(k->ctx, k->in[0], k->in[1], k->in[2], (kn_reduction)iarg(k, 0)));
}

static void run_bce_logits(Call *k)
{
    one(k, kn_binary_cross_entropy_with_logits(k->ctx, k->in[0], k->in[1], k->in[2], k->in[3],
                                               (kn_reduction)iarg(k, 0)));
}

static void run_sdpa(Call *k)
{
    one(k, kn_scaled_dot_product_attention(k->ctx, k->in[0], k->in[1], k->in[2], k->in[3], iarg(k, 0),
                                           farg(k, 0)));
}

/* ---- the op table ---- */

#define UN(n) {.name = #n, .run = run_unary, .unary = kn_##n}
#define BI(n) {.name = #n, .run = run_binary, .binary = kn_##n}
#define I1(n) {.name = #n, .run = run_int1, .int1 = kn_##n}
#define I2(n) {.name = #n, .run = run_int2, .int2 = kn_##n}
#define L1(n) {.name = #n, .run = run_long1, .long1 = kn_##n}
#define R1(n) {.name = #n, .run = run_real1, .real1 = kn_##n}
#define DIMS(n) {.name = #n, .run = run_dims, .dims = kn_##n}
#define VAR(n) {.name = #n, .run = run_var, .var = kn_##n}
#define SHAPE(n) {.name = #n, .run = run_shape, .shape = kn_##n}
#define JOIN(n) {.name = #n, .run = run_join, .join = kn_##n}
#define INDEX(n) {.name = #n, .run = run_index, .index = kn_##n}
#define CONV(n) {.name = #n, .run = run_conv, .conv = kn_##n}
#define POOL(n) {.name = #n, .run = run_pool, .pool = kn_##n}
#define CLOSS(n) {.name = #n, .run = run_class_loss, .class_loss = kn_##n}
#define PLOSS(n) {.name = #n, .run = run_pair_loss, .pair_loss = kn_##n}
#define RUN(n) {.name = #n, .run = run_##n}

static const OpRow ops[] = {
    /* pointwise */
    BI(add), BI(sub), BI(mul), BI(div), BI(pow), BI(fmod), BI(minimum), BI(maximum),
    UN(neg), UN(abs), UN(sign), UN(exp), UN(log), UN(sqrt), UN(rsqrt), UN(reciprocal), UN(square),
    UN(sin), UN(cos), UN(tanh), UN(erf), UN(floor), UN(ceil), UN(round), RUN(clamp),
    BI(eq), BI(ne), BI(lt), BI(le), BI(gt), BI(ge),
    BI(logical_and), BI(logical_or), BI(logical_xor), UN(logical_not),
    RUN(where), RUN(masked_fill), RUN(to),
    /* reductions */
    DIMS(sum), DIMS(mean), DIMS(amax), DIMS(amin), DIMS(logsumexp), VAR(var), VAR(std),
    I2(prod), I2(argmax), I2(argmin), I1(cumsum),
    /* shape and indexing */
    SHAPE(reshape), SHAPE(view), SHAPE(expand), I2(flatten), I1(squeeze), I1(unsqueeze), I2(transpose),
    RUN(permute), RUN(contiguous), RUN(slice), RUN(narrow), RUN(pad), JOIN(cat), JOIN(stack),
    RUN(split), RUN(chunk), INDEX(index_select), INDEX(gather), RUN(scatter_add),
    L1(triu), L1(tril), L1(one_hot),
    /* linear algebra, convolution, pooling */
    BI(matmul), BI(bmm), RUN(linear), CONV(conv1d), CONV(conv2d), CONV(conv_transpose2d),
    POOL(max_pool2d), POOL(avg_pool2d), {.name = "adaptive_avg_pool2d", .run = run_adaptive},
    /* normalisation and activations */
    RUN(batch_norm), RUN(layer_norm), RUN(group_norm), RUN(rms_norm),
    UN(relu), R1(leaky_relu), I1(gelu), UN(silu), UN(sigmoid), RUN(softplus), UN(hardswish), R1(elu),
    I1(softmax), I1(log_softmax),
    /* losses and layers */
    CLOSS(cross_entropy), CLOSS(nll_loss), PLOSS(mse_loss), PLOSS(l1_loss),
    {.name = "binary_cross_entropy", .run = run_bce},
    {.name = "binary_cross_entropy_with_logits", .run = run_bce_logits},
    BI(embedding), {.name = "scaled_dot_product_attention", .run = run_sdpa},
};

static const OpRow *find_op(const char *name)
{
    size_t i;
    for (i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(ops[i].name, name) == 0) return &ops[i];
    return NULL;
}

/* ---- building inputs ---- */

static kn_tensor *apply_step(kn_ctx *ctx, kn_tensor *x, const FxStep *s)
{
    int perm[KN_MAX_DIMS], i;
    switch (s->kind) {
    case FX_TRANSPOSE: return kn_transpose(ctx, x, (int)s->args[0], (int)s->args[1]);
    case FX_PERMUTE:
        for (i = 0; i < s->nargs; i++) perm[i] = (int)s->args[i];
        return kn_permute(ctx, x, perm);
    case FX_SLICE: return kn_slice(ctx, x, (int)s->args[0], s->args[1], s->args[2], s->args[3]);
    case FX_EXPAND: return kn_expand(ctx, x, s->nargs, s->args);
    default: return NULL;
    }
}

/* 1 when every stored tensor was made (absent inputs stay NULL on purpose):
 * k->in[i] is the stored, contiguous tensor of input i. With grad, the ones
 * that have a reference gradient require grad and are also left in k->base. */
static int make_stored(Call *k, int grad, char *why)
{
    const FxTensor *t;
    int i;
    for (i = 0; i < k->c->nin; i++) {
        t = &k->c->in[i];
        if (t->code == FX_ABSENT) continue;
        if (t->code == FX_SCALAR) k->in[i] = kn_scalar(k->ctx, fx_scalar_value(t));
        else k->in[i] = kn_tensor_from(k->ctx, (kn_dtype)t->code, t->ndim, t->shape, t->data);
        if (k->in[i] && grad && k->c->ngrad && k->c->grad[i].code != FX_ABSENT)
            k->in[i] = k->base[i] = kn_requires_grad(k->ctx, k->in[i], 1);
        if (!k->in[i]) {
            snprintf(why, WHY_LEN, "building input %d failed: %s", i, kn_last_error(k->ctx));
            return 0;
        }
    }
    return 1;
}

/* 1 when each input's view recipe was applied to its stored tensor (a
 * separate step, so that a caller can trace the views into a graph). */
static int apply_views(Call *k, char *why)
{
    int i, s;
    for (i = 0; i < k->c->nin; i++)
        for (s = 0; s < k->c->in[i].nsteps && k->in[i]; s++) {
            k->in[i] = apply_step(k->ctx, k->in[i], &k->c->in[i].steps[s]);
            if (!k->in[i]) {
                snprintf(why, WHY_LEN, "view %d of input %d failed: %s", s, i, kn_last_error(k->ctx));
                return 0;
            }
        }
    return 1;
}

/* ---- comparing outputs ---- */

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double bf16_to_double(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Element i of a row-major buffer of dtype code, as a double (exact for integers below 2^53). */
static double elem_real(const unsigned char *p, int code, int64_t i)
{
    size_t sz = fx_dtype_size(code);
    float f;
    double d;
    uint16_t h;
    int32_t i32;
    int64_t i64;
    p += (size_t)i * sz;
    switch (code) {
    case KN_F32: memcpy(&f, p, 4); return f;
    case KN_F64: memcpy(&d, p, 8); return d;
    case KN_F16: memcpy(&h, p, 2); return half_to_double(h);
    case KN_BF16: memcpy(&h, p, 2); return bf16_to_double(h);
    case KN_I32: memcpy(&i32, p, 4); return i32;
    case KN_I64: memcpy(&i64, p, 8); return (double)i64;
    default: return *p;
    }
}

static int is_float(int code) { return code == KN_F32 || code == KN_F64 || code == KN_F16 || code == KN_BF16; }

typedef struct {
    double rtol, atol;
} Tol;

/* Outputs: f16 and bf16 to about one unit in the last place, as kiln rounds an f32 result. */
static Tol out_tol(int code)
{
    static const Tol tol[] = {{1e-5, 1e-6}, {1e-10, 1e-12}, {1e-3, 1e-5}, {8e-3, 1e-4}};
    return is_float(code) ? tol[code] : tol[0];
}

/* Gradients accumulate more rounding than one op's output. */
static Tol grad_tol(int code)
{
    static const Tol tol[] = {{1e-4, 1e-5}, {1e-9, 1e-10}, {1e-3, 1e-5}, {8e-3, 1e-4}};
    return is_float(code) ? tol[code] : tol[0];
}

static Tol looser(Tol a, Tol b)
{
    Tol t;
    t.rtol = a.rtol > b.rtol ? a.rtol : b.rtol;
    t.atol = a.atol > b.atol ? a.atol : b.atol;
    return t;
}

/* Elementwise agreement: floats by test_close at tol, the rest bit-exact. */
static int elem_ok(const unsigned char *got, const unsigned char *want, int code, int64_t i, Tol tol)
{
    size_t sz = fx_dtype_size(code);
    if (!is_float(code)) return memcmp(got + (size_t)i * sz, want + (size_t)i * sz, sz) == 0;
    return test_close(elem_real(got, code, i), elem_real(want, code, i), tol.rtol, tol.atol);
}

static void shape_str(char *dst, size_t cap, int ndim, const int64_t *shape)
{
    size_t n = 0;
    int i;
    n += (size_t)snprintf(dst, cap, "(");
    for (i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(dst + n, cap - n, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (n < cap) snprintf(dst + n, cap - n, ")");
}

static int same_shape(const kn_tensor *t, const FxTensor *want)
{
    int i;
    if (kn_ndim(t) != want->ndim) return 0;
    for (i = 0; i < want->ndim; i++)
        if (kn_shape(t)[i] != want->shape[i]) return 0;
    return 1;
}

/* Compares the values of got (dtype and shape already equal) with want; what names it in why. */
static int compare_values(kn_ctx *ctx, kn_tensor *got, const FxTensor *want, const char *what, Tol tol,
                          char *why)
{
    size_t bytes = (size_t)want->numel * fx_dtype_size(want->code);
    unsigned char *buf = malloc(bytes ? bytes : 1);
    int64_t i, bad = 0, first = -1;
    kn_status st;
    if (!buf) {
        snprintf(why, WHY_LEN, "out of memory in the test");
        return 0;
    }
    st = kn_read(ctx, got, buf, bytes);
    if (st != KN_OK) {
        snprintf(why, WHY_LEN, "%s: kn_read failed: %s", what, kn_last_error(ctx));
        free(buf);
        return 0;
    }
    for (i = 0; i < want->numel; i++)
        if (!elem_ok(buf, want->data, want->code, i, tol) && bad++ == 0) first = i;
    if (bad)
        snprintf(why, WHY_LEN, "%s: %lld of %lld values differ; first at flat index %lld: got %.9g, want %.9g",
                 what, (long long)bad, (long long)want->numel, (long long)first,
                 elem_real(buf, want->code, first), elem_real(want->data, want->code, first));
    free(buf);
    return bad == 0;
}

static int compare_tensor(kn_ctx *ctx, kn_tensor *got, const FxTensor *want, const char *what, Tol tol, char *why)
{
    char gs[128], ws[128];
    if (kn_dtype_of(got) != (kn_dtype)want->code) {
        snprintf(why, WHY_LEN, "%s: dtype %s, PyTorch gives %s", what, kn_dtype_name(kn_dtype_of(got)),
                 kn_dtype_name((kn_dtype)want->code));
        return 0;
    }
    if (!same_shape(got, want)) {
        shape_str(gs, sizeof gs, kn_ndim(got), kn_shape(got));
        shape_str(ws, sizeof ws, want->ndim, want->shape);
        snprintf(why, WHY_LEN, "%s: shape %s, PyTorch gives %s", what, gs, ws);
        return 0;
    }
    return compare_values(ctx, got, want, what, tol, why);
}

static int compare_output(kn_ctx *ctx, kn_tensor *got, const FxTensor *want, int which, char *why)
{
    char what[32];
    snprintf(what, sizeof what, "output %d", which);
    return compare_tensor(ctx, got, want, what, out_tol(want->code), why);
}

/* 1 when the op succeeded and every result matches PyTorch's. */
static int verify(Call *k, char *why)
{
    int i;
    if (k->note[0]) {
        snprintf(why, WHY_LEN, "%s", k->note);
        return 0;
    }
    for (i = 0; i < k->nres; i++)
        if (!k->res[i]) break;
    if (k->nres == 0 || i < k->nres || kn_last_status(k->ctx) != KN_OK) {
        snprintf(why, WHY_LEN, "op failed: %s", kn_last_error(k->ctx)[0] ? kn_last_error(k->ctx) : "(no message)");
        return 0;
    }
    if (k->nres != k->c->nout) {
        snprintf(why, WHY_LEN, "%d results, PyTorch gives %d", k->nres, k->c->nout);
        return 0;
    }
    for (i = 0; i < k->nres; i++)
        if (!compare_output(k->ctx, k->res[i], &k->c->out[i], i, why)) return 0;
    return 1;
}

/* ---- gradients ---- */

/* loss = sum over outputs with a cotangent of sum(out * cot); NULL with an error pending. */
static kn_tensor *grad_loss(Call *k)
{
    kn_tensor *loss = NULL, *cot, *term;
    const FxTensor *c;
    int i;
    for (i = 0; i < k->nres; i++) {
        c = &k->c->cot[i];
        if (c->code == FX_ABSENT) continue;
        cot = kn_tensor_from(k->ctx, (kn_dtype)c->code, c->ndim, c->shape, c->data);
        term = kn_sum(k->ctx, kn_mul(k->ctx, k->res[i], cot), NULL, 0, 0);
        loss = loss ? kn_add(k->ctx, loss, term) : term;
        if (!loss) return NULL;
    }
    return loss;
}

static int all_zero(const FxTensor *t)
{
    int64_t i;
    for (i = 0; i < t->numel; i++)
        if (elem_real(t->data, t->code, i) != 0) return 0;
    return 1;
}

/* The tolerance of a gradient: its own dtype's, or the looser one of an output it flows back from. */
static Tol case_grad_tol(const FxCase *c, int code)
{
    Tol t = grad_tol(code);
    int i;
    for (i = 0; i < c->ncot; i++)
        if (c->cot[i].code != FX_ABSENT) t = looser(t, grad_tol(c->cot[i].code));
    return t;
}

#endif
