/*
 * decomp_conv.c — convolution, pooling and normalisation as decompositions
 * into primitives, with PyTorch 1.13's semantics (NCHW).
 *
 * Convolution is implicit GEMM (docs/DESIGN.md: "a strided window view feeding
 * dot"): the padded input is read through KH*KW strided slice views, one per
 * kernel offset, each (N, C, OH, OW); they are stacked into columns
 * (N, G, C/G*KH*KW, OH*OW) and contracted with the weight (G, O/G,
 * C/G*KH*KW) by one dot. conv1d is conv2d with a unit H. conv_transpose2d
 * is conv2d, stride 1, over the zero-stuffed and re-padded input with the
 * flipped weight; a stride-1 convolution's input gradient is such a
 * transposed convolution too (conv_vjp), and a strided one's is one
 * stride-1 convolution per phase of the input (conv_grad_phases), not the
 * columns' gradient summed back. The pools take the same window slices and combine them by
 * max or by sum; adaptive average pooling sums windows that tile the
 * input, and otherwise multiplies by two 0/1 pooling matrices. The norms are sums and pointwise ops in the input's float dtype
 * (f32 for f16/bf16).
 *
 * As in decomp.c, each public op opens with ENTER, checks its operands and
 * parameters with messages naming the operand, the dim and PyTorch's rule,
 * and then calls only prim()/p_*() and public kn_ ops, so it runs eagerly and
 * traces alike. The one exception is batch_norm's running statistics, which
 * PyTorch updates in place: they are written into the caller's storage in
 * eager mode and refused while tracing.
 *
 * Each public op is ENTER, a call to its static NAME_op, LEAVE, so the
 * checks and the decomposition are plain functions that return NULL (or 0)
 * on error.
 *
 * Spatial sizes must be concrete: symbolic dims are refused with
 * KN_EUNSUPPORTED for now.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

/* ---- operand checks ---- */

/* Sets the error and returns 0: the checks below return 1 when fine. */
static int fail(kn_ctx *ctx, kn_status s, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kn_err(ctx, s, "%s", msg);
    return 0;
}

static int concrete(kn_ctx *ctx, const kn_tensor *t, const char *operand)
{
    for (int i = 0; i < t->ndim; i++)
        if (DIM_IS_SYM(t->shape[i]))
            return fail(ctx, KN_EUNSUPPORTED, "operand '%s' dim %d is symbolic; dynamic sizes are not supported here yet",
                        operand, i);
    return 1;
}

/* t is given, concrete, and of a float dtype. */
static int float_operand(kn_ctx *ctx, kn_tensor *t, const char *operand)
{
    if (!tensor_check(ctx, t, operand) || !concrete(ctx, t, operand)) return 0;
    if (dt_is_float((kn_dtype)t->dtype)) return 1;
    return fail(ctx, KN_EDTYPE, "operand '%s' must be a float tensor, got %s", operand, kn_dtype_name((kn_dtype)t->dtype));
}

static int same_dtype(kn_ctx *ctx, const kn_tensor *t, const char *operand, const kn_tensor *x)
{
    if (t->dtype == x->dtype) return 1;
    return fail(ctx, KN_EDTYPE, "operand '%s' is %s but input is %s; they must be the same", operand,
                kn_dtype_name((kn_dtype)t->dtype), kn_dtype_name((kn_dtype)x->dtype));
}


/* An optional parameter: NULL, or a float tensor of exactly this shape. */
static int param_operand(kn_ctx *ctx, kn_tensor *t, const char *operand, int n, const int64_t *shape)
{
    if (!t) return 1;
    if (!float_operand(ctx, t, operand)) return 0;
    if (t->ndim == n && memcmp(t->shape, shape, (size_t)n * sizeof *shape) == 0) return 1;
    char b0[96], b1[96];
    return fail(ctx, KN_ESHAPE, "operand '%s' must have shape %s, got %s", operand, fmt_dims(b0, sizeof b0, n, shape),
                fmt_shape(b1, sizeof b1, t));
}

/* x has rank lo or hi (for inputs: unbatched or batched). */
static int rank_operand(kn_ctx *ctx, const kn_tensor *x, const char *operand, int lo, int hi, const char *layouts)
{
    if (x->ndim == lo || x->ndim == hi) return 1;
    char buf[96];
    return fail(ctx, KN_ESHAPE, "operand '%s' must be %s, got %d dims %s", operand, layouts, x->ndim,
                fmt_shape(buf, sizeof buf, x));
}

/* ---- layouts: everything runs on (N, C, H, W) ---- */

/* x viewed as (N, C, H, W): an unbatched input gets N = 1, a 1-d one H = 1. */
static kn_tensor *as_nchw(kn_ctx *ctx, kn_tensor *x, int nsp)
{
    int nd = x->ndim;
    int64_t s[4] = {nd == nsp + 2 ? x->shape[0] : 1, x->shape[nd - nsp - 1], nsp == 2 ? x->shape[nd - 2] : 1,
                    x->shape[nd - 1]};
    return p_reshape(ctx, x, 4, s);
}

/* y (N, C, H, W) back to the layout of an input of nd dims. */
static kn_tensor *from_nchw(kn_ctx *ctx, kn_tensor *y, int nd, int nsp)
{
    if (!y) return NULL;
    int64_t s[4];
    int k = 0;
    if (nd == nsp + 2) s[k++] = y->shape[0];
    s[k++] = y->shape[1];
    if (nsp == 2) s[k++] = y->shape[2];
    s[k++] = y->shape[3];
    return p_reshape(ctx, y, k, s);
}

static kn_tensor *pad_hw(kn_ctx *ctx, kn_tensor *x, int64_t top, int64_t bottom, int64_t left, int64_t right,
                         double v)
{
    int64_t before[4] = {0, 0, top, left}, after[4] = {0, 0, bottom, right};
    return p_pad(ctx, x, before, after, v);
}

/* ---- windows: the strided views convolution and pooling share ---- */

/* One spatial axis: input size, kernel, stride, padding, dilation, output. */
typedef struct {
    int64_t size, k, stride, pad, dil, out;
} Axis;

/* What kernel offset (kh, kw) sees in the padded input xp, for every output
 * cell: a strided view.  // (N, C, OH, OW) */
static kn_tensor *window(kn_ctx *ctx, kn_tensor *xp, const Axis *ax, int64_t kh, int64_t kw)
{
    kn_tensor *s = p_slice(ctx, xp, 2, kh * ax[0].dil, ax[0].out, ax[0].stride);
    return p_slice(ctx, s, 3, kw * ax[1].dil, ax[1].out, ax[1].stride);
}

/* Windows lo..hi-1 (k = kh * KW + kw) stacked on a new dim 2, as a cat by
 * pad + add: each half is zero-padded where the other half goes. Halving
 * keeps the copying at O(KK log KK) windows.  // (N, C, hi - lo, OH, OW) */
static kn_tensor *stack_windows(kn_ctx *ctx, kn_tensor *xp, const Axis *ax, int64_t lo, int64_t hi)
{
    if (hi - lo == 1) {
        kn_tensor *s = window(ctx, xp, ax, lo / ax[1].k, lo % ax[1].k);
        if (!s) return NULL;
        int64_t unit[5] = {s->shape[0], s->shape[1], 1, s->shape[2], s->shape[3]};
        return p_reshape(ctx, s, 5, unit);
    }
    int64_t mid = lo + (hi - lo) / 2;
    kn_tensor *l = stack_windows(ctx, xp, ax, lo, mid), *r = stack_windows(ctx, xp, ax, mid, hi);
    int64_t none[5] = {0}, after_l[5] = {0, 0, hi - mid, 0, 0}, before_r[5] = {0, 0, mid - lo, 0, 0};
    return prim2(ctx, OP_ADD, p_pad(ctx, l, none, after_l, 0.0), p_pad(ctx, r, before_r, none, 0.0));
}

/* The sum of every window, accumulated once by a reduction (the
 * interpreter's accumulator is double) rather than rounded after each add.
 * xp (N, C, Hp, Wp) -> (N, C, OH, OW) */
static kn_tensor *window_sum(kn_ctx *ctx, kn_tensor *xp, const Axis *ax, int64_t n, int64_t c)
{
    int k2 = 2;
    kn_tensor *s = p_reduce(ctx, OP_SUM, stack_windows(ctx, xp, ax, 0, ax[0].k * ax[1].k), &k2, 1);
    int64_t shape[4] = {n, c, ax[0].out, ax[1].out};
    return p_reshape(ctx, s, 4, shape);
}

/* ---- convolution: arguments ---- */

typedef struct {
    int64_t n, c, o, g; /* batch, in channels, out channels, groups */
    kn_dtype dt;        /* of input, weight and bias alike */
    Axis ax[2];         /* H, W; conv1d has a unit H */
    int64_t opad[2];    /* conv_transpose2d: output_padding */
} Conv;

static const Axis unit_axis = {1, 1, 1, 0, 1, 1};

static int positive_opt(kn_ctx *ctx, const char *name, int i, int v, int64_t *out)
{
    if (v < 0) return fail(ctx, KN_EINVAL, "%s[%d] must be positive, got %d", name, i, v);
    *out = v ? v : 1;
    return 1;
}

/* Ranks, dtypes, NULLs. nsp: spatial dims (1 or 2). */
static int conv_operands(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b, int nsp, int transposed)
{
    static const char *xl[3] = {"", "2-D (C, L) or 3-D (N, C, L)", "3-D (C, H, W) or 4-D (N, C, H, W)"};
    static const char *wl[2][3] = {{"", "3-D (out_channels, in_channels/groups, kL)",
                                    "4-D (out_channels, in_channels/groups, kH, kW)"},
                                   {"", "", "4-D (in_channels, out_channels/groups, kH, kW)"}};
    if (!float_operand(ctx, x, "x") || !float_operand(ctx, w, "weight")) return 0;
    if (b && !float_operand(ctx, b, "bias")) return 0;
    if (!rank_operand(ctx, x, "x", nsp + 1, nsp + 2, xl[nsp]) ||
        !rank_operand(ctx, w, "weight", nsp + 2, nsp + 2, wl[transposed][nsp]))
        return 0;
    for (int i = 0; i < w->ndim; i++)
        if (w->shape[i] == 0) return fail(ctx, KN_ESHAPE, "operand 'weight' dim %d has size 0", i);
    return same_dtype(ctx, w, "weight", x) && (!b || same_dtype(ctx, b, "bias", x));
}

/* stride, padding, dilation, output_padding, groups; conv1d reads [0]. */
static int conv_options(kn_ctx *ctx, const kn_conv_opts *o, int nsp, int transposed, Conv *cv)
{
    kn_conv_opts zero;
    memset(&zero, 0, sizeof zero);
    if (!o) o = &zero;
    cv->ax[0] = cv->ax[1] = unit_axis;
    cv->opad[0] = cv->opad[1] = 0;
    for (int i = 0; i < nsp; i++) {
        Axis *ax = &cv->ax[2 - nsp + i];
        if (!positive_opt(ctx, "stride", i, o->stride[i], &ax->stride) ||
            !positive_opt(ctx, "dilation", i, o->dilation[i], &ax->dil))
            return 0;
        if (o->padding[i] < 0)
            return fail(ctx, KN_EINVAL, "padding[%d] must be non-negative, got %d", i, o->padding[i]);
        ax->pad = o->padding[i];
        int op = o->output_padding[i];
        if (op && !transposed) return fail(ctx, KN_EINVAL, "output_padding applies to conv_transpose2d only");
        if (op < 0 || (op >= ax->stride && op >= ax->dil))
            return fail(ctx, KN_EINVAL,
                        "output_padding[%d] = %d must be non-negative and smaller than stride %lld or dilation %lld", i,
                        op, (long long)ax->stride, (long long)ax->dil);
        cv->opad[2 - nsp + i] = op;
    }
    if (o->groups < 0) return fail(ctx, KN_EINVAL, "groups must be positive, got %d", o->groups);
    cv->g = o->groups ? o->groups : 1;
    return 1;
}

/* Channels against groups and the weight; the bias against out channels. */
static int conv_channels(kn_ctx *ctx, const kn_tensor *x, kn_tensor *w, kn_tensor *b, int nsp, int transposed,
                         Conv *cv)
{
    int cd = x->ndim - nsp - 1; /* the channel dim of x */
    int64_t g = cv->g;
    cv->n = cd ? x->shape[0] : 1;
    cv->c = x->shape[cd];
    cv->dt = (kn_dtype)x->dtype;
    if (cv->c % g)
        return fail(ctx, KN_ESHAPE, "input dim %d (channels = %lld) is not divisible by groups %lld", cd,
                    (long long)cv->c, (long long)g);
    if (transposed) {
        if (w->shape[0] != cv->c)
            return fail(ctx, KN_ESHAPE, "weight dim 0 (in_channels = %lld) does not match input dim %d (channels = %lld)",
                        (long long)w->shape[0], cd, (long long)cv->c);
        cv->o = w->shape[1] * g;
    } else {
        cv->o = w->shape[0];
        if (cv->o % g)
            return fail(ctx, KN_ESHAPE, "weight dim 0 (out_channels = %lld) is not divisible by groups %lld",
                        (long long)cv->o, (long long)g);
        if (w->shape[1] != cv->c / g)
            return fail(ctx, KN_ESHAPE, "weight dim 1 is %lld, expected in_channels / groups = %lld / %lld = %lld",
                        (long long)w->shape[1], (long long)cv->c, (long long)g, (long long)(cv->c / g));
    }
    return param_operand(ctx, b, "bias", 1, &cv->o);
}

/* Kernel and output sizes, per spatial axis. */
static int conv_sizes(kn_ctx *ctx, const kn_tensor *x, const kn_tensor *w, int nsp, int transposed, Conv *cv)
{
    for (int i = 0; i < nsp; i++) {
        int xd = x->ndim - nsp + i, a = 2 - nsp + i;
        Axis *ax = &cv->ax[a];
        ax->size = x->shape[xd];
        ax->k = w->shape[2 + i];
        int64_t span = ax->dil * (ax->k - 1) + 1, padded = ax->size + 2 * ax->pad;
        if (transposed) {
            if (ax->size == 0) return fail(ctx, KN_ESHAPE, "input dim %d has size 0", xd);
            ax->out = (ax->size - 1) * ax->stride - 2 * ax->pad + span + cv->opad[a];
            if (ax->out <= 0)
                return fail(ctx, KN_ESHAPE, "output size %lld at input dim %d is not positive (padding %lld too large)",
                            (long long)ax->out, xd, (long long)ax->pad);
        } else {
            if (span > padded)
                return fail(ctx, KN_ESHAPE,
                            "weight dim %d: dilated kernel size %lld is larger than the padded input size %lld (input dim %d)",
                            2 + i, (long long)span, (long long)padded, xd);
            ax->out = (padded - span) / ax->stride + 1;
        }
    }
    return 1;
}

static int conv_args(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b, const kn_conv_opts *o, int nsp,
                     int transposed, Conv *cv)
{
    return conv_operands(ctx, x, w, b, nsp, transposed) && conv_options(ctx, o, nsp, transposed, cv) &&
           conv_channels(ctx, x, w, b, nsp, transposed, cv) && conv_sizes(ctx, x, w, nsp, transposed, cv);
}

/* ---- convolution: the implicit GEMM ---- */

/* The columns of the implicit GEMM: x's windows, padded.  // (G, C/G*KH*KW, N*OH*OW) */
static kn_tensor *conv_cols(kn_ctx *ctx, kn_tensor *x, const Conv *cv)
{
    const Axis *ax = cv->ax;
    int64_t n = cv->n, g = cv->g, cg = cv->c / g, kk = ax[0].k * ax[1].k, ck = cg * kk;
    int64_t oh = ax[0].out, ow = ax[1].out;
    kn_tensor *xp = pad_hw(ctx, x, ax[0].pad, ax[0].pad, ax[1].pad, ax[1].pad, 0.0); // (N, C, Hp, Wp)
    kn_tensor *cols = stack_windows(ctx, xp, ax, 0, kk);                             // (N, C, KH*KW, OH, OW)
    int64_t split[6] = {n, g, cg, kk, oh, ow}, cshape[3] = {g, ck, n * oh * ow};
    static const int to_gck[6] = {1, 2, 3, 0, 4, 5};
    cols = p_permute(ctx, p_reshape(ctx, cols, 6, split), to_gck);                   // (G, C/G, KH*KW, N, OH, OW)
    return p_reshape(ctx, cols, 3, cshape);                                          // (G, C/G*KH*KW, N*OH*OW)
}

/* x (N, C, H, W), w (O, C/G, KH, KW), b (O) or NULL -> (N, O, OH, OW)
 *
 * The batch is folded into the GEMM's columns: one dot per group of
 * (O/G, C/G*KH*KW) . (C/G*KH*KW, N*OH*OW), not one per image. The weight
 * is then packed once, not N times, and the weight gradient autodiff
 * derives from this dot is one GEMM whose K runs over N*OH*OW, with no
 * (N, O, C/G*KH*KW) per-image products to sum. The result comes out
 * channel-major, (G, O/G, N, OH, OW), and is returned as its (N, O, OH, OW)
 * permuted view. */
static kn_tensor *conv_gemm(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b, const Conv *cv)
{
    const Axis *ax = cv->ax;
    int64_t n = cv->n, g = cv->g, o = cv->o, ck = cv->c / g * ax[0].k * ax[1].k;
    int64_t oh = ax[0].out, ow = ax[1].out;
    kn_tensor *cols = conv_cols(ctx, x, cv);                                         // (G, C/G*KH*KW, N*OH*OW)
    int64_t wshape[3] = {g, o / g, ck};
    kn_tensor *wm = p_reshape(ctx, w, 3, wshape);                                    // (G, O/G, C/G*KH*KW)
    int64_t yg[5] = {g, o / g, n, oh, ow}, yshape[4] = {n, o, oh, ow}, bshape[4] = {1, o, 1, 1};
    static const int to_nchw[5] = {2, 0, 1, 3, 4};
    kn_tensor *y = p_permute(ctx, p_reshape(ctx, p_dot(ctx, wm, cols), 5, yg), to_nchw); // (N, G, O/G, OH, OW)
    y = p_reshape(ctx, y, 4, yshape);                                                // (N, O, OH, OW)
    return b ? bin(ctx, OP_ADD, y, p_reshape(ctx, b, 4, bshape), cv->dt) : y;
}

static kn_tensor *conv_transpose2d_op(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b, const kn_conv_opts *o);
static kn_tensor *conv_grad_phases(kn_ctx *ctx, kn_tensor *g, kn_tensor *w, const Conv *cv);

/* The hand-written backward of a convolution (x and w NCHW, saved[0] and [1]; args: padding,
 * dilation and stride of H and W). Derived through the window views, x's gradient would be the
 * columns' gradient, W^T . g, (C/G*KH*KW, N*OH*OW): KH*KW times x's size, materialised and then
 * summed back into x by KH*KW shifted gathers (col2im). As torch's convolution_backward does, it is
 * instead the transposed convolution of g with w. At stride 1 that is a stride-1 convolution of g
 * (padded by dilation*(k-1) - padding) with the flipped weight: an implicit GEMM of the forward's
 * cost with no columns. At stride s it would run over the zero-stuffed g, s^2 times the work, so it
 * is split into the input's s_h*s_w phases instead (conv_grad_phases). w's gradient is the derived
 * one, g . cols^T. */
static kn_tensor *conv_vjp(kn_ctx *ctx, kn_tensor *g, kn_tensor *const *saved, const int64_t *args, int which)
{
    kn_tensor *x = saved[0], *w = saved[1];
    int64_t groups = x->shape[1] / w->shape[1];
    Conv cv;
    cv.n = x->shape[0], cv.c = x->shape[1], cv.o = w->shape[0], cv.g = groups, cv.dt = (kn_dtype)x->dtype;
    for (int i = 0; i < 2; i++) {
        Axis *ax = &cv.ax[i];
        ax->size = x->shape[2 + i], ax->k = w->shape[2 + i], ax->stride = args[4 + i], ax->pad = args[i];
        ax->dil = args[2 + i], ax->out = g->shape[2 + i];
    }
    if (which == 0 && tensor_numel(x->ndim, x->shape) == 0) return p_full(ctx, cv.dt, 4, x->shape, 0.0); /* padded */
    if (which == 0 && (args[4] > 1 || args[5] > 1)) return conv_grad_phases(ctx, g, w, &cv); // (N, C, H, W)
    if (which == 0) {
        kn_conv_opts o = {{1, 1}, {(int)args[0], (int)args[1]}, {(int)args[2], (int)args[3]}, {0, 0}, (int)groups};
        return conv_transpose2d_op(ctx, g, w, NULL, &o); // (N, C, H, W)
    }
    int64_t yg[5] = {cv.n, groups, cv.o / groups, cv.ax[0].out, cv.ax[1].out};
    int64_t gshape[3] = {groups, cv.o / groups, cv.n * cv.ax[0].out * cv.ax[1].out};
    static const int to_gon[5] = {1, 2, 0, 3, 4}, swap[3] = {0, 2, 1};
    kn_tensor *gd = p_reshape(ctx, p_permute(ctx, p_reshape(ctx, g, 5, yg), to_gon), 3, gshape); // (G, O/G, N*OH*OW)
    kn_tensor *dw = p_dot(ctx, gd, p_permute(ctx, conv_cols(ctx, x, &cv), swap));               // (G, O/G, C/G*KH*KW)
    return p_reshape(ctx, dw, 4, w->shape);
}

/* conv_gemm, with conv_vjp as its backward where x's gradient is wanted and the
 * columns outnumber the output channels; the bias stays outside (derived). The flipped weight that
 * the transposed convolution reads, (C, O/G*KH*KW), is a transposing copy of w, O*C/G*KH*KW
 * elements gathered across w's rows, where col2im's buffer is C/G*KH*KW * N*OH*OW: where the
 * columns, N*OH*OW, are fewer than O the copy costs more than the buffer it saves (ResNet-18's
 * stage 4 at B = 16: 256 columns, 512 channels, where its train step is slower with it). */
static kn_tensor *conv_gemm_grad(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b, const Conv *cv)
{
    if (cv->n * cv->ax[0].out * cv->ax[1].out < cv->o || !autodiff_custom_wanted(ctx, x))
        return conv_gemm(ctx, x, w, b, cv);
    int was = kn_set_grad_enabled(ctx, 0);
    kn_tensor *y = conv_gemm(ctx, x, w, NULL, cv);
    kn_set_grad_enabled(ctx, was);
    int64_t args[6] = {cv->ax[0].pad, cv->ax[1].pad, cv->ax[0].dil, cv->ax[1].dil, cv->ax[0].stride, cv->ax[1].stride};
    kn_tensor *in[2] = {x, w};
    y = autodiff_custom(ctx, y, 2, in, 2, in, args, 6, conv_vjp);
    int64_t bshape[4] = {1, cv->o, 1, 1};
    return b && y ? bin(ctx, OP_ADD, y, p_reshape(ctx, b, 4, bshape), cv->dt) : y;
}

static kn_tensor *conv_forward(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b, const kn_conv_opts *o, int nsp)
{
    Conv cv;
    if (!conv_args(ctx, x, w, b, o, nsp, 0, &cv)) return NULL;
    kn_tensor *y = conv_gemm_grad(ctx, as_nchw(ctx, x, nsp), as_nchw(ctx, w, nsp), b, &cv);
    return from_nchw(ctx, y, x->ndim, nsp);
}

kn_tensor *kn_conv2d(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b, const kn_conv_opts *o)
{
    ENTER(ctx, "kn_conv2d");
    if (!optional_ok(ctx, b)) return LEAVE(ctx, NULL);
    kn_tensor *y = conv_forward(ctx, x, w, b, o, 2);
    return LEAVE(ctx, y);
}

kn_tensor *kn_conv1d(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b, const kn_conv_opts *o)
{
    ENTER(ctx, "kn_conv1d");
    if (!optional_ok(ctx, b)) return LEAVE(ctx, NULL);
    kn_tensor *y = conv_forward(ctx, x, w, b, o, 1);
    return LEAVE(ctx, y);
}

/* ---- transposed convolution: conv2d over the zero-stuffed input ---- */

/* stride - 1 zeros between neighbouring elements of H and W, through
 * (N, C, H, 1, W, 1) padded to (N, C, H, sh, W, sw) with the tails cut.
 * (N, C, H, W) -> (N, C, (H-1)*sh+1, (W-1)*sw+1) */
static kn_tensor *stuff_zeros(kn_ctx *ctx, kn_tensor *x, const Conv *cv)
{
    int64_t n = cv->n, c = cv->c, h = cv->ax[0].size, w = cv->ax[1].size;
    int64_t sh = cv->ax[0].stride, sw = cv->ax[1].stride;
    if (sh == 1 && sw == 1) return x;
    int64_t six[6] = {n, c, h, 1, w, 1}, after[6] = {0, 0, 0, sh - 1, 0, sw - 1}, four[4] = {n, c, h * sh, w * sw};
    x = p_reshape(ctx, p_pad(ctx, p_reshape(ctx, x, 6, six), NULL, after, 0.0), 4, four);
    return p_slice(ctx, p_slice(ctx, x, 2, 0, (h - 1) * sh + 1, 1), 3, 0, (w - 1) * sw + 1, 1);
}

/* Dim d grown by lo before and hi after: zeros where positive, a crop where
 * negative. Padding first keeps the crop in range when one side of the
 * input is cut away entirely. */
static kn_tensor *pad_or_crop(kn_ctx *ctx, kn_tensor *x, int d, int64_t lo, int64_t hi)
{
    int64_t before[4] = {0}, after[4] = {0};
    before[d] = lo > 0 ? lo : 0;
    after[d] = hi > 0 ? hi : 0;
    x = p_pad(ctx, x, before, after, 0.0);
    if (!x) return NULL;
    int64_t cut_lo = lo < 0 ? -lo : 0, cut_hi = hi < 0 ? -hi : 0;
    return p_slice(ctx, x, d, cut_lo, x->shape[d] - cut_lo - cut_hi, 1);
}

/* The conv2d weight equivalent to a transposed conv's: flipped in H and W
 * (slices of step -1), in and out channels swapped within each group.
 * (C, O/G, KH, KW) -> (O, C/G, KH, KW) */
static kn_tensor *flip_weight(kn_ctx *ctx, kn_tensor *w, int64_t g)
{
    int64_t c = w->shape[0], og = w->shape[1], kh = w->shape[2], kw = w->shape[3];
    int64_t grouped[5] = {g, c / g, og, kh, kw}, out[4] = {g * og, c / g, kh, kw};
    static const int swap[5] = {0, 2, 1, 3, 4};
    w = p_slice(ctx, p_slice(ctx, w, 2, kh - 1, kh, -1), 3, kw - 1, kw, -1);
    w = p_permute(ctx, p_reshape(ctx, w, 5, grouped), swap); // (G, O/G, C/G, KH, KW)
    return p_reshape(ctx, w, 4, out);
}

/* Each input element scatters the kernel into the output; equivalently the
 * output is a stride-1 convolution of the zero-stuffed input, padded by
 * dilation*(k-1) - padding (output_padding more at the bottom and right),
 * with the flipped weight. */
static kn_tensor *conv_transpose2d_op(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b, const kn_conv_opts *o)
{
    Conv cv;
    if (!conv_args(ctx, x, w, b, o, 2, 1, &cv)) return NULL;
    kn_tensor *xs = stuff_zeros(ctx, as_nchw(ctx, x, 2), &cv); // (N, C, (H-1)*sh+1, (W-1)*sw+1)
    Conv inner = cv;
    for (int i = 0; i < 2; i++) {
        Axis *ax = &inner.ax[i];
        int64_t q = ax->dil * (ax->k - 1) - ax->pad;
        xs = pad_or_crop(ctx, xs, 2 + i, q, q + cv.opad[i]);
        ax->size = (ax->size - 1) * ax->stride + 1 + 2 * q + cv.opad[i];
        ax->stride = 1;
        ax->pad = 0;
    }
    kn_tensor *y = conv_gemm(ctx, xs, flip_weight(ctx, w, cv.g), b, &inner); // (N, O, OH, OW)
    return from_nchw(ctx, y, x->ndim, 2);
}

kn_tensor *kn_conv_transpose2d(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b, const kn_conv_opts *o)
{
    ENTER(ctx, "kn_conv_transpose2d");
    if (!optional_ok(ctx, b)) return LEAVE(ctx, NULL);
    kn_tensor *y = conv_transpose2d_op(ctx, x, w, b, o);
    return LEAVE(ctx, y);
}

/* ---- a strided convolution's input gradient, phase by phase ---- */

/* One axis of one phase of the input: the positions i = s*q + ph, q < out. The kernel taps that
 * reach them are those with k*dil = ph + pad (mod s), n of them, k0 + j*step (step = s / gcd(s,
 * dil)); tap j reads g at q + (ph + pad - k_j*dil) / s, an offset that falls by dil*step/s per tap.
 * So the phase is a stride-1 convolution of g, cropped or padded by lo before and hi after, with
 * the n taps flipped at dilation dil*step/s. */
typedef struct {
    int64_t out, n, k0, step, dil, lo, hi;
} Phase;

static int64_t mod(int64_t a, int64_t m) { return (a % m + m) % m; }

static Phase phase_of(const Axis *ax, int64_t ph)
{
    Phase p = {0, 0, 0, 0, 1, 0, 0};
    int64_t s = ax->stride;
    p.out = ph < ax->size ? (ax->size - ph + s - 1) / s : 0;
    for (int64_t k = 0; k < ax->k; k++) {
        if (mod(k * ax->dil - ph - ax->pad, s)) continue;
        if (p.n == 0) p.k0 = k;
        if (p.n == 1) p.step = k - p.k0;
        p.n++;
    }
    if (p.n == 0 || p.out == 0) return p;
    if (p.n > 1) p.dil = ax->dil * p.step / s;
    p.lo = -(ph + ax->pad - (p.k0 + (p.n - 1) * p.step) * ax->dil) / s;
    p.hi = p.out + (p.n - 1) * p.dil - ax->out - p.lo;
    return p;
}

/* Input phase (ph, pw)'s gradient, a stride-1 convolution of g with w's taps of that phase,
 * flipped.  // (N, C, OUT_h, OUT_w) */
static kn_tensor *phase_grad(kn_ctx *ctx, kn_tensor *g, kn_tensor *w, const Conv *cv, const Phase *p)
{
    Conv inner = *cv;
    inner.c = cv->o, inner.o = cv->c;
    kn_tensor *ws = w;
    for (int i = 0; i < 2; i++) {
        Axis *ax = &inner.ax[i];
        g = pad_or_crop(ctx, g, 2 + i, p[i].lo, p[i].hi);
        ws = p_slice(ctx, ws, 2 + i, p[i].k0, p[i].n, p[i].n > 1 ? p[i].step : 1);
        ax->size = p[i].out + (p[i].n - 1) * p[i].dil, ax->k = p[i].n, ax->stride = 1, ax->pad = 0;
        ax->dil = p[i].dil, ax->out = p[i].out;
    }
    return conv_gemm(ctx, g, flip_weight(ctx, ws, cv->g), NULL, &inner);
}

/* The gradient of a strided convolution's input x from the output's g: each of x's s_h*s_w phases
 * (rows = ph mod s_h, columns = pw mod s_w) is a stride-1 convolution of g with the weight's taps
 * that reach that phase (phase_grad), together the forward's multiply-adds, with no columns and no
 * col2im. The phases are interleaved by selects over (N, C, H', s_h, W', s_w): each phase,
 * broadcast along the two phase dims, is chosen where a constant mask marks its place. (Padding
 * each phase into place and adding would give the fused kernel one guarded load per phase through
 * the padded size-1 dims, indices a simplifier cannot reduce; a broadcast's stride is 0.) Phases no
 * tap reaches stay zero.  g (N, O, OH, OW), w (O, C/G, KH, KW) -> (N, C, H, W) */
static kn_tensor *conv_grad_phases(kn_ctx *ctx, kn_tensor *g, kn_tensor *w, const Conv *cv)
{
    const Axis *ax = cv->ax;
    int64_t sh = ax[0].stride, sw = ax[1].stride, qh = (ax[0].size + sh - 1) / sh, qw = (ax[1].size + sw - 1) / sw;
    int64_t six[6] = {cv->n, cv->c, qh, 1, qw, 1}, full[6] = {cv->n, cv->c, qh, sh, qw, sw};
    int64_t four[4] = {cv->n, cv->c, qh * sh, qw * sw}, one[6] = {1, 1, 1, 1, 1, 1};
    kn_tensor *dx = p_full(ctx, cv->dt, 6, full, 0.0); // (N, C, H', s_h, W', s_w)
    for (int64_t ph = 0; ph < sh; ph++)
        for (int64_t pw = 0; pw < sw; pw++) {
            Phase p[2] = {phase_of(&ax[0], ph), phase_of(&ax[1], pw)};
            if (!p[0].n || !p[1].n || !p[0].out || !p[1].out) continue;
            kn_tensor *y = phase_grad(ctx, g, w, cv, p);                        // (N, C, OUT_h, OUT_w)
            y = pad_hw(ctx, y, 0, qh - p[0].out, 0, qw - p[1].out, 0.0);       // (N, C, H', W')
            y = p_expand(ctx, p_reshape(ctx, y, 6, six), 6, full);             // (N, C, H', s_h, W', s_w)
            int64_t before[6] = {0, 0, 0, ph, 0, pw}, after[6] = {0, 0, 0, sh - 1 - ph, 0, sw - 1 - pw};
            kn_tensor *m = p_pad(ctx, p_full(ctx, KN_BOOL, 6, one, 1.0), before, after, 0.0); // (1, 1, 1, s_h, 1, s_w)
            dx = p_where(ctx, p_expand(ctx, m, 6, full), y, dx);
            if (!dx) return NULL;
        }
    dx = p_reshape(ctx, dx, 4, four);                                           // (N, C, H'*s_h, W'*s_w)
    return p_slice(ctx, p_slice(ctx, dx, 2, 0, ax[0].size, 1), 3, 0, ax[1].size, 1);
}

/* ---- pooling ---- */

typedef struct {
    int64_t n, c;
    Axis ax[2];
    int64_t extra[2]; /* padding beyond ax.pad at the bottom/right that ceil_mode windows reach */
} Pool;

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

/* PyTorch's pooling_output_shape: with ceil_mode the last window must
 * start inside the input or the left padding. */
static int64_t pool_out(const Axis *ax, int ceil_mode)
{
    int64_t span = ax->dil * (ax->k - 1) + 1;
    int64_t out = floor_div(ax->size + 2 * ax->pad - span + (ceil_mode ? ax->stride - 1 : 0), ax->stride) + 1;
    if (ceil_mode && (out - 1) * ax->stride >= ax->size + ax->pad) out--;
    return out;
}

static int pool_axis(kn_ctx *ctx, const kn_pool_opts *o, int i, int dilated, Axis *ax)
{
    if (o->kernel[i] <= 0) return fail(ctx, KN_EINVAL, "kernel[%d] must be positive, got %d", i, o->kernel[i]);
    ax->k = o->kernel[i];
    if (o->stride[i] < 0) return fail(ctx, KN_EINVAL, "stride[%d] must be positive, got %d", i, o->stride[i]);
    ax->stride = o->stride[i] ? o->stride[i] : ax->k;
    if (!dilated && o->dilation[i] > 1) return fail(ctx, KN_EINVAL, "dilation applies to max_pool2d only");
    if (!positive_opt(ctx, "dilation", i, o->dilation[i], &ax->dil)) return 0;
    if (o->padding[i] < 0 || o->padding[i] > o->kernel[i] / 2)
        return fail(ctx, KN_EINVAL, "padding[%d] = %d must be between 0 and half the kernel size %d", i,
                    o->padding[i], o->kernel[i]);
    ax->pad = o->padding[i];
    return 1;
}

/* x (C, H, W) or (N, C, H, W) with non-zero C, H, W. */
static int pool_input(kn_ctx *ctx, kn_tensor *x)
{
    if (!tensor_check(ctx, x, "x") || !concrete(ctx, x, "x")) return 0;
    if (!rank_operand(ctx, x, "x", 3, 4, "3-D (C, H, W) or 4-D (N, C, H, W)")) return 0;
    for (int d = x->ndim - 3; d < x->ndim; d++)
        if (x->shape[d] == 0)
            return fail(ctx, KN_ESHAPE, "input dim %d has size 0; only the batch dim may be empty", d);
    return 1;
}

static int pool_args(kn_ctx *ctx, kn_tensor *x, const kn_pool_opts *o, int dilated, Pool *pl)
{
    if (!pool_input(ctx, x)) return 0;
    if (!o) return fail(ctx, KN_EINVAL, "operand 'opts' is NULL; the kernel size is required");
    pl->n = x->ndim == 4 ? x->shape[0] : 1;
    pl->c = x->shape[x->ndim - 3];
    for (int i = 0; i < 2; i++) {
        Axis *ax = &pl->ax[i];
        int xd = x->ndim - 2 + i;
        if (!pool_axis(ctx, o, i, dilated, ax)) return 0;
        ax->size = x->shape[xd];
        ax->out = pool_out(ax, o->ceil_mode);
        if (ax->out < 1)
            return fail(ctx, KN_ESHAPE,
                        "output size %lld at input dim %d is too small (input size %lld, kernel %lld, padding %lld)",
                        (long long)ax->out, xd, (long long)ax->size, (long long)ax->k, (long long)ax->pad);
        int64_t need = (ax->out - 1) * ax->stride + ax->dil * (ax->k - 1) + 1; /* padded size the windows read */
        pl->extra[i] = need - ax->size - 2 * ax->pad > 0 ? need - ax->size - 2 * ax->pad : 0;
    }
    return 1;
}

/* The value max pooling pads with: below every value of the dtype. */
static double lowest(kn_dtype dt)
{
    switch (dt) {
    case KN_I32: return -2147483648.0;
    case KN_I64: return -9223372036854775808.0;
    case KN_U8: return 0.0;
    default: return -INFINITY;
    }
}

/* x (N, C, H, W) padded as pool pl pads it, with v. */
static kn_tensor *pool_pad(kn_ctx *ctx, kn_tensor *x, const Pool *pl, double v)
{
    const Axis *ax = pl->ax;
    return pad_hw(ctx, x, ax[0].pad, ax[0].pad + pl->extra[0], ax[1].pad, ax[1].pad + pl->extra[1], v);
}

/* Where window offset (kh, kw) reads the input rather than padding, for every output cell, broadcast to
 * out's shape; NULL (no error) where no window reaches the padding.  // (N, C, OH, OW) bool */
static kn_tensor *pool_reads_input(kn_ctx *ctx, const Pool *pl, kn_tensor *in, int64_t kh, int64_t kw,
                                   const kn_tensor *out)
{
    return in ? p_expand(ctx, window(ctx, in, pl->ax, kh, kw), 4, out->shape) : NULL;
}

/* The max over the windows as PyTorch's kernel scans each: in order, keeping a value greater than the
 * maximum so far, or NaN. A chain of selects m = where(take, w, m) over the KH*KW window views w, whose
 * derived backward gives a window's whole gradient to the element it kept, as PyTorch does: its first
 * maximum (its last NaN), and never the padding, which holds the dtype's lowest value and which a first
 * element of the input replaces even when they are equal. // (N, C, OH, OW) */
static kn_tensor *max_select(kn_ctx *ctx, kn_tensor *xp, const Pool *pl, int has_pad)
{
    const Axis *ax = pl->ax;
    int64_t one[4] = {1, 1, ax[0].size, ax[1].size};
    kn_tensor *in = has_pad ? pool_pad(ctx, p_full(ctx, KN_BOOL, 4, one, 1.0), pl, 0.0) : NULL; // (1, 1, Hp, Wp)
    kn_tensor *m = window(ctx, xp, ax, 0, 0), *m_input = m ? pool_reads_input(ctx, pl, in, 0, 0, m) : NULL;
    int nan = dt_is_float((kn_dtype)xp->dtype);
    for (int64_t k = 1; k < ax[0].k * ax[1].k && m; k++) {
        kn_tensor *w = window(ctx, xp, ax, k / ax[1].k, k % ax[1].k);
        kn_tensor *take = prim2(ctx, OP_CMPLT, m, w);
        if (nan) take = prim2(ctx, OP_MAX, take, binc(ctx, OP_CMPEQ, prim2(ctx, OP_CMPEQ, w, w), 0.0)); /* or NaN */
        if (in) {
            kn_tensor *w_input = pool_reads_input(ctx, pl, in, k / ax[1].k, k % ax[1].k, m);
            kn_tensor *first = prim2(ctx, OP_MIN, w_input, binc(ctx, OP_CMPEQ, m_input, 0.0)); /* m is padding */
            take = prim2(ctx, OP_MAX, take, first);
            m_input = prim2(ctx, OP_MAX, m_input, w_input);
        }
        m = p_where(ctx, take, w, m);
    }
    return m;
}

/* max over the KH*KW windows of x padded with the lowest value: pairwise maxima, or where a gradient is
 * wanted the selects of max_select (the same values), whose backward is PyTorch's. */
static kn_tensor *max_pool2d_op(kn_ctx *ctx, kn_tensor *x, const kn_pool_opts *o)
{
    Pool pl;
    if (!pool_args(ctx, x, o, 1, &pl)) return NULL;
    if (x->dtype == KN_BOOL) return kn_err(ctx, KN_EDTYPE, "operand 'x' is bool; max pooling needs numbers");
    const Axis *ax = pl.ax;
    kn_tensor *xp = pool_pad(ctx, as_nchw(ctx, x, 2), &pl, lowest((kn_dtype)x->dtype)); // (N, C, Hp, Wp)
    if (!xp) return NULL;
    if (autodiff_wants(ctx, 1, &x)) {
        int has_pad = ax[0].pad || ax[1].pad || pl.extra[0] || pl.extra[1];
        return from_nchw(ctx, max_select(ctx, xp, &pl, has_pad), x->ndim, 2);
    }
    kn_tensor *m = window(ctx, xp, ax, 0, 0); // (N, C, OH, OW)
    for (int64_t k = 1; k < ax[0].k * ax[1].k && m; k++)
        m = prim2(ctx, OP_MAX, m, window(ctx, xp, ax, k / ax[1].k, k % ax[1].k));
    return from_nchw(ctx, m, x->ndim, 2);
}

kn_tensor *kn_max_pool2d(kn_ctx *ctx, kn_tensor *x, const kn_pool_opts *o)
{
    ENTER(ctx, "kn_max_pool2d");
    kn_tensor *y = max_pool2d_op(ctx, x, o);
    return LEAVE(ctx, y);
}

/* How many elements each window averages over, as PyTorch counts them:
 * window sums of a mask that is 1 over the input, also over the padding
 * when it is included, and 0 beyond.  // (1, 1, OH, OW) */
static kn_tensor *pool_counts(kn_ctx *ctx, const Pool *pl, int include_pad, kn_dtype dt)
{
    const Axis *ax = pl->ax;
    int64_t one[4] = {1, 1, ax[0].size, ax[1].size};
    kn_tensor *m = p_full(ctx, dt, 4, one, 1.0);
    m = pad_hw(ctx, m, ax[0].pad, ax[0].pad, ax[1].pad, ax[1].pad, include_pad ? 1.0 : 0.0);
    m = pad_hw(ctx, m, 0, pl->extra[0], 0, pl->extra[1], 0.0);
    return window_sum(ctx, m, ax, 1, 1);
}

/* window sums of the zero-padded x divided by the window's count, or by
 * the divisor override. */
static kn_tensor *avg_pool2d_op(kn_ctx *ctx, kn_tensor *x, const kn_pool_opts *o)
{
    Pool pl;
    if (!pool_args(ctx, x, o, 0, &pl) || !float_operand(ctx, x, "x")) return NULL;
    const Axis *ax = pl.ax;
    kn_dtype dt = (kn_dtype)x->dtype;
    kn_tensor *xp = pad_hw(ctx, as_nchw(ctx, x, 2), ax[0].pad, ax[0].pad + pl.extra[0], ax[1].pad,
                           ax[1].pad + pl.extra[1], 0.0); // (N, C, Hp, Wp)
    kn_tensor *sum = window_sum(ctx, xp, ax, pl.n, pl.c); // (N, C, OH, OW)
    kn_tensor *y = o->divisor ? binc(ctx, OP_DIV, sum, (double)o->divisor)
                              : bin(ctx, OP_DIV, sum, pool_counts(ctx, &pl, !o->exclude_pad, dt), dt);
    return from_nchw(ctx, y, x->ndim, 2);
}

kn_tensor *kn_avg_pool2d(kn_ctx *ctx, kn_tensor *x, const kn_pool_opts *o)
{
    ENTER(ctx, "kn_avg_pool2d");
    kn_tensor *y = avg_pool2d_op(ctx, x, o);
    return LEAVE(ctx, y);
}

/* The 0/1 pooling matrix of one axis: P[i, j] = 1 where
 * floor(i*in/out) <= j < ceil((i+1)*in/out).  // (out, in) */
static kn_tensor *pool_matrix(kn_ctx *ctx, int64_t out, int64_t in, kn_dtype dt)
{
    int64_t shape[2] = {out, in};
    kn_tensor *i = p_iota(ctx, KN_I64, 2, shape, 0), *j = p_iota(ctx, KN_I64, 2, shape, 1);
    kn_tensor *start = binc(ctx, OP_DIV, binc(ctx, OP_MUL, i, (double)in), (double)out);
    kn_tensor *end = binc(ctx, OP_DIV, binc(ctx, OP_ADD, binc(ctx, OP_MUL, i, (double)in), (double)(in + out - 1)),
                          (double)out); // ceil((i+1)*in/out) = ((i+1)*in + out - 1) / out
    kn_tensor *from_start = binc(ctx, OP_CMPEQ, prim2(ctx, OP_CMPLT, j, start), 0.0); // j >= start
    return p_cast(ctx, prim2(ctx, OP_MIN, from_start, prim2(ctx, OP_CMPLT, j, end)), dt);
}

/* How many input rows each output row averages: P's row sums, viewed
 * along dim d of a (1, 1, OH, OW) grid.  // (1, 1, out, 1) or (1, 1, 1, out) */
static kn_tensor *pool_matrix_counts(kn_ctx *ctx, kn_tensor *p, int64_t out, int d)
{
    int last = 1;
    int64_t shape[4] = {1, 1, 1, 1};
    shape[d] = out;
    return p_reshape(ctx, p_reduce(ctx, OP_SUM, p, &last, 1), 4, shape);
}

/* y = (P_h x P_w^T) / (count_h count_w^T): two dots with 0/1 matrices,
 * then one exact division by the window sizes. */
static kn_tensor *adaptive_avg_pool2d_op(kn_ctx *ctx, kn_tensor *x, int64_t out_h, int64_t out_w)
{
    if (!pool_input(ctx, x) || !float_operand(ctx, x, "x")) return NULL;
    if (out_h < 0 || out_w < 0)
        return kn_err(ctx, KN_EINVAL, "output size (%lld, %lld) must be non-negative", (long long)out_h, (long long)out_w);
    kn_dtype dt = (kn_dtype)x->dtype;
    int nd = x->ndim;
    int64_t n = nd == 4 ? x->shape[0] : 1, c = x->shape[nd - 3], h = x->shape[nd - 2], w = x->shape[nd - 1];
    if (out_h > 0 && out_w > 0 && h % out_h == 0 && w % out_w == 0) {
        /* windows that tile the input (a global pool, or sizes that divide): a sum over each window,
         * not two dots with 0/1 matrices (ResNet-18's global pool: 8192 one-row dots, 1% of its
         * inference) */
        int64_t kh = h / out_h, kw = w / out_w;
        int64_t s6[6] = {n, c, out_h, kh, out_w, kw}, s4[4] = {n, c, out_h, out_w};
        static const int win[2] = {3, 5};
        kn_tensor *sum = p_reduce(ctx, OP_SUM, p_reshape(ctx, as_nchw(ctx, x, 2), 6, s6), win, 2);
        return from_nchw(ctx, binc(ctx, OP_DIV, p_reshape(ctx, sum, 4, s4), (double)(kh * kw)), nd, 2);
    }
    kn_tensor *ph = pool_matrix(ctx, out_h, h, dt), *pw = pool_matrix(ctx, out_w, w, dt); // (OH, H), (OW, W)
    static const int tr[2] = {1, 0};
    int64_t hs[4] = {1, 1, out_h, h}, hfull[4] = {n, c, out_h, h};
    int64_t ws[4] = {1, 1, w, out_w}, wfull[4] = {n, c, w, out_w};
    kn_tensor *left = p_expand(ctx, p_reshape(ctx, ph, 4, hs), 4, hfull);                      // (N, C, OH, H)
    kn_tensor *right = p_expand(ctx, p_reshape(ctx, p_permute(ctx, pw, tr), 4, ws), 4, wfull); // (N, C, W, OW)
    kn_tensor *sum = p_dot(ctx, p_dot(ctx, left, as_nchw(ctx, x, 2)), right);                  // (N, C, OH, OW)
    kn_tensor *count = bin(ctx, OP_MUL, pool_matrix_counts(ctx, ph, out_h, 2), pool_matrix_counts(ctx, pw, out_w, 3),
                           dt); // (1, 1, OH, OW)
    return from_nchw(ctx, bin(ctx, OP_DIV, sum, count, dt), nd, 2);
}

kn_tensor *kn_adaptive_avg_pool2d(kn_ctx *ctx, kn_tensor *x, int64_t out_h, int64_t out_w)
{
    ENTER(ctx, "kn_adaptive_avg_pool2d");
    kn_tensor *y = adaptive_avg_pool2d_op(ctx, x, out_h, out_w);
    return LEAVE(ctx, y);
}

/* ---- normalisation ---- */

/* The dtype statistics are computed in: f64 stays, the rest use f32. */
static kn_dtype stat_dtype(kn_dtype dt) { return dt == KN_F64 ? KN_F64 : KN_F32; }

typedef struct {
    kn_tensor *mean, *dev, *ss; /* mean (dims kept), x - mean, sum of dev^2 (dims kept) */
} Moments;

static void moments(kn_ctx *ctx, kn_tensor *x, const int *dims, int nd, int64_t count, kn_dtype dt, Moments *m)
{
    m->mean = binc(ctx, OP_DIV, p_reduce(ctx, OP_SUM, x, dims, nd), (double)count);
    m->dev = bin(ctx, OP_SUB, x, m->mean, dt);
    m->ss = p_reduce(ctx, OP_SUM, prim2(ctx, OP_MUL, m->dev, m->dev), dims, nd);
}

/* x * rsqrt(ms + eps), ms a mean of squares broadcast against x */
static kn_tensor *scale_rsqrt(kn_ctx *ctx, kn_tensor *x, kn_tensor *ms, double eps, kn_dtype dt)
{
    kn_tensor *inv = prim1(ctx, OP_RECIP, prim1(ctx, OP_SQRT, binc(ctx, OP_ADD, ms, eps)));
    return bin(ctx, OP_MUL, x, inv, dt);
}

/* t cast to dt; with nd > 0, a (C) parameter viewed as (1, C, 1, ...) of nd dims. */
static kn_tensor *param_view(kn_ctx *ctx, kn_tensor *t, int nd, kn_dtype dt)
{
    t = p_cast(ctx, t, dt);
    if (!t || nd == 0) return t;
    int64_t s[KN_MAX_DIMS];
    for (int i = 0; i < nd; i++) s[i] = 1;
    s[1] = t->shape[0];
    return p_reshape(ctx, t, nd, s);
}

/* y * w + b, each optional. */
static kn_tensor *affine(kn_ctx *ctx, kn_tensor *y, kn_tensor *w, kn_tensor *b, int nd, kn_dtype dt)
{
    if (w) y = bin(ctx, OP_MUL, y, param_view(ctx, w, nd, dt), dt);
    if (b) y = bin(ctx, OP_ADD, y, param_view(ctx, b, nd, dt), dt);
    return y;
}

/* (1 - m) * run + m * value, computed in f64, in run's dtype and shape. */
static kn_tensor *running_update(kn_ctx *ctx, kn_tensor *run, kn_tensor *value, double m)
{
    kn_tensor *v = p_cast(ctx, p_reshape(ctx, value, 1, run->shape), KN_F64);
    kn_tensor *r = binc(ctx, OP_MUL, p_cast(ctx, run, KN_F64), 1.0 - m);
    return p_cast(ctx, prim2(ctx, OP_ADD, r, binc(ctx, OP_MUL, v, m)), (kn_dtype)run->dtype);
}

/* Both new values are computed before either is written, so a failure
 * leaves the caller's statistics as they were. */
static int update_running(kn_ctx *ctx, kn_tensor *rm, kn_tensor *rv, const Moments *mo, int64_t count, double m)
{
    kn_tensor *mean = NULL, *var = NULL;
    if (rm && !(mean = running_update(ctx, rm, mo->mean, m))) return 0;
    if (rv) {
        kn_tensor *unbiased = binc(ctx, OP_DIV, p_cast(ctx, mo->ss, KN_F64), (double)(count - 1));
        if (!(var = running_update(ctx, rv, unbiased, m))) return 0;
    }
    if (mean && tensor_assign(ctx, rm, mean) != KN_OK) return 0;
    return !var || tensor_assign(ctx, rv, var) == KN_OK;
}

/* Ranks, shapes and dtypes; running stats required in eval and concrete when updated. */
static int bn_operands(kn_ctx *ctx, kn_tensor *x, kn_tensor *rm, kn_tensor *rv, kn_tensor *w, kn_tensor *b,
                       int training)
{
    if (!float_operand(ctx, x, "x")) return 0;
    if (x->ndim < 2) {
        char buf[96];
        return fail(ctx, KN_ESHAPE, "operand 'x' must have at least 2 dims (N, C, ...), got %s",
                    fmt_shape(buf, sizeof buf, x));
    }
    const int64_t *c = &x->shape[1];
    if (!param_operand(ctx, rm, "running_mean", 1, c) || !param_operand(ctx, rv, "running_var", 1, c) ||
        !param_operand(ctx, w, "weight", 1, c) || !param_operand(ctx, b, "bias", 1, c))
        return 0;
    if (!training && (!rm || !rv))
        return fail(ctx, KN_EINVAL, "running_mean and running_var are required in eval mode");
    if (training && (rm || rv) && ((ctx->trace && !ctx->capture) || (rm && !rm->st) || (rv && !rv->st)))
        return fail(ctx, KN_EUNSUPPORTED, "running statistics are updated in place: trace them through kn_compile, "
                    "with concrete running_mean and running_var");
    return 1;
}

/* Batch statistics over every dim but C (dims kept), biased var for y; the
 * running var gets the unbiased one. */
static kn_tensor *bn_train(kn_ctx *ctx, kn_tensor *x, kn_tensor *rm, kn_tensor *rv, double momentum, double eps,
                           kn_dtype dt)
{
    int nd = x->ndim, dims[KN_MAX_DIMS], nr = 0;
    int64_t count = 1;
    for (int d = 0; d < nd; d++) {
        if (d == 1) continue;
        dims[nr++] = d;
        count *= x->shape[d];
    }
    if (count == 1) {
        char buf[96];
        return kn_err(ctx, KN_EINVAL, "expected more than 1 value per channel when training, got input %s",
                      fmt_shape(buf, sizeof buf, x));
    }
    Moments mo;
    moments(ctx, p_cast(ctx, x, dt), dims, nr, count, dt, &mo);
    kn_tensor *y = scale_rsqrt(ctx, mo.dev, binc(ctx, OP_DIV, mo.ss, (double)count), eps, dt); // (N, C, *)
    if (!y || !update_running(ctx, rm, rv, &mo, count, momentum == 0 ? 0.1 : momentum)) return NULL;
    return y;
}

/* y = (x - mean) / sqrt(var + eps) * w + b, per channel (dim 1): the
 * batch's statistics when training, else the running ones. */
static kn_tensor *batch_norm_op(kn_ctx *ctx, kn_tensor *x, kn_tensor *running_mean, kn_tensor *running_var,
                                kn_tensor *weight, kn_tensor *bias, int training, double momentum, double eps)
{
    if (!bn_operands(ctx, x, running_mean, running_var, weight, bias, training)) return NULL;
    kn_dtype dt = stat_dtype((kn_dtype)x->dtype);
    int nd = x->ndim;
    eps = eps == 0 ? 1e-5 : eps;
    kn_tensor *y;
    if (training) {
        y = bn_train(ctx, x, running_mean, running_var, momentum, eps, dt);
    } else {
        kn_tensor *dev = bin(ctx, OP_SUB, p_cast(ctx, x, dt), param_view(ctx, running_mean, nd, dt), dt);
        y = scale_rsqrt(ctx, dev, param_view(ctx, running_var, nd, dt), eps, dt);
    }
    return y ? p_cast(ctx, affine(ctx, y, weight, bias, nd, dt), (kn_dtype)x->dtype) : NULL;
}

kn_tensor *kn_batch_norm(kn_ctx *ctx, kn_tensor *x, kn_tensor *running_mean, kn_tensor *running_var,
                         kn_tensor *weight, kn_tensor *bias, int training, double momentum, double eps)
{
    ENTER(ctx, "kn_batch_norm");
    if (!optional_ok(ctx, running_mean) || !optional_ok(ctx, running_var) || !optional_ok(ctx, weight) || !optional_ok(ctx, bias)) return LEAVE(ctx, NULL);
    kn_tensor *y = batch_norm_op(ctx, x, running_mean, running_var, weight, bias, training, momentum, eps);
    return LEAVE(ctx, y);
}

/* normalized_shape matches x's trailing dims; weight and bias have it. */
static int norm_shape(kn_ctx *ctx, kn_tensor *x, int nnorm, const int64_t *shape, kn_tensor *w, kn_tensor *b)
{
    if (!float_operand(ctx, x, "x")) return 0;
    if (nnorm < 1 || nnorm > x->ndim)
        return fail(ctx, KN_EINVAL, "normalized_shape has %d dims; expected 1 to %d (the input's dims)", nnorm,
                    x->ndim);
    if (!shape) return fail(ctx, KN_EINVAL, "operand 'normalized_shape' is NULL");
    for (int i = 0; i < nnorm; i++) {
        int d = x->ndim - nnorm + i;
        if (shape[i] != x->shape[d]) {
            char buf[96];
            return fail(ctx, KN_ESHAPE, "normalized_shape[%d] = %lld does not match input dim %d of size %lld (input %s)",
                        i, (long long)shape[i], d, (long long)x->shape[d], fmt_shape(buf, sizeof buf, x));
        }
    }
    return param_operand(ctx, w, "weight", nnorm, shape) && param_operand(ctx, b, "bias", nnorm, shape);
}

/* The last nnorm dims of x, and how many elements they hold. */
static int64_t trailing_dims(const kn_tensor *x, int nnorm, int *dims)
{
    int64_t count = 1;
    for (int i = 0; i < nnorm; i++) {
        dims[i] = x->ndim - nnorm + i;
        count *= x->shape[dims[i]];
    }
    return count;
}

/* y = (x - mean) / sqrt(var + eps) * w + b over the last nnorm dims. */
/* The normalisation's hand-written backward (the affine part is derived):
 * with xhat = (x - mean) * rstd over the last n dims,
 * dx = rstd * (g - mean(g) - xhat * mean(g * xhat)). One pass of means
 * instead of differentiating through mean, variance and rsqrt. */
static kn_tensor *layer_norm_vjp(kn_ctx *ctx, kn_tensor *g, kn_tensor *const *saved, const int64_t *args, int which)
{
    (void)which;
    kn_tensor *xhat = saved[0], *rstd = saved[1];
    kn_dtype dt = (kn_dtype)xhat->dtype;
    int n = (int)args[0], dims[KN_MAX_DIMS];
    int64_t count = 1;
    for (int i = 0; i < n; i++) {
        dims[i] = xhat->ndim - n + i;
        count *= xhat->shape[dims[i]];
    }
    kn_tensor *mg = binc(ctx, OP_DIV, p_reduce(ctx, OP_SUM, g, dims, n), (double)count);
    kn_tensor *mgx = binc(ctx, OP_DIV, p_reduce(ctx, OP_SUM, prim2(ctx, OP_MUL, g, xhat), dims, n), (double)count);
    kn_tensor *d = bin(ctx, OP_SUB, bin(ctx, OP_SUB, g, mg, dt), bin(ctx, OP_MUL, xhat, mgx, dt), dt);
    return bin(ctx, OP_MUL, d, rstd, dt);
}

static kn_tensor *layer_norm_op(kn_ctx *ctx, kn_tensor *x, int nnorm, const int64_t *normalized_shape,
                                kn_tensor *weight, kn_tensor *bias, double eps)
{
    if (!norm_shape(ctx, x, nnorm, normalized_shape, weight, bias)) return NULL;
    kn_dtype dt = stat_dtype((kn_dtype)x->dtype);
    int dims[KN_MAX_DIMS];
    int64_t count = trailing_dims(x, nnorm, dims);
    Moments mo;
    kn_tensor *xc = p_cast(ctx, x, dt);
    int custom = autodiff_custom_wanted(ctx, xc);
    int was = custom ? kn_set_grad_enabled(ctx, 0) : 0;
    moments(ctx, xc, dims, nnorm, count, dt, &mo);
    kn_tensor *var = binc(ctx, OP_DIV, mo.ss, (double)count);
    kn_tensor *rstd = prim1(ctx, OP_RECIP, prim1(ctx, OP_SQRT, binc(ctx, OP_ADD, var, eps == 0 ? 1e-5 : eps)));
    kn_tensor *y = bin(ctx, OP_MUL, mo.dev, rstd, dt); /* xhat */
    if (custom) {
        kn_set_grad_enabled(ctx, was);
        int64_t arg = nnorm;
        y = autodiff_custom(ctx, y, 1, &xc, 2, (kn_tensor *[]){y, rstd}, &arg, 1, layer_norm_vjp);
    }
    return p_cast(ctx, affine(ctx, y, weight, bias, 0, dt), (kn_dtype)x->dtype);
}

kn_tensor *kn_layer_norm(kn_ctx *ctx, kn_tensor *x, int nnorm, const int64_t *normalized_shape,
                         kn_tensor *weight, kn_tensor *bias, double eps)
{
    ENTER(ctx, "kn_layer_norm");
    if (!optional_ok(ctx, weight) || !optional_ok(ctx, bias)) return LEAVE(ctx, NULL);
    kn_tensor *y = layer_norm_op(ctx, x, nnorm, normalized_shape, weight, bias, eps);
    return LEAVE(ctx, y);
}

/* C divisible by groups; the per-channel weight and bias. */
static int gn_operands(kn_ctx *ctx, kn_tensor *x, int64_t groups, kn_tensor *w, kn_tensor *b)
{
    char buf[96];
    if (!float_operand(ctx, x, "x")) return 0;
    if (x->ndim < 2)
        return fail(ctx, KN_ESHAPE, "operand 'x' must have at least 2 dims (N, C, ...), got %s",
                    fmt_shape(buf, sizeof buf, x));
    if (groups <= 0) return fail(ctx, KN_EINVAL, "groups must be positive, got %lld", (long long)groups);
    int64_t c = x->shape[1], n = x->shape[0] * (c / groups);
    if (c % groups)
        return fail(ctx, KN_ESHAPE, "input dim 1 (channels = %lld) is not divisible by groups %lld (input %s)",
                    (long long)c, (long long)groups, fmt_shape(buf, sizeof buf, x));
    for (int d = 2; d < x->ndim; d++) n *= x->shape[d];
    if (n == 1) /* torch.nn.functional.group_norm's check, odd as it is */
        return fail(ctx, KN_EINVAL, "expected more than 1 value per channel when training, got input %s",
                    fmt_shape(buf, sizeof buf, x));
    return param_operand(ctx, w, "weight", 1, &c) && param_operand(ctx, b, "bias", 1, &c);
}

/* Statistics over each group of C/G channels and all of (H, W, ...):
 * x (N, C, *) viewed as (N, G, C/G * prod(*)); weight and bias per channel. */
static kn_tensor *group_norm_op(kn_ctx *ctx, kn_tensor *x, int64_t groups, kn_tensor *weight, kn_tensor *bias,
                                double eps)
{
    if (!gn_operands(ctx, x, groups, weight, bias)) return NULL;
    int64_t n = x->shape[0], c = x->shape[1], rest = 1;
    for (int d = 2; d < x->ndim; d++) rest *= x->shape[d];
    kn_dtype dt = stat_dtype((kn_dtype)x->dtype);
    int64_t grouped[3] = {n, groups, c / groups * rest};
    int last = 2;
    Moments mo;
    moments(ctx, p_reshape(ctx, p_cast(ctx, x, dt), 3, grouped), &last, 1, grouped[2], dt, &mo);
    kn_tensor *y = scale_rsqrt(ctx, mo.dev, binc(ctx, OP_DIV, mo.ss, (double)grouped[2]), eps == 0 ? 1e-5 : eps, dt);
    y = affine(ctx, p_reshape(ctx, y, x->ndim, x->shape), weight, bias, x->ndim, dt); // (N, C, *)
    return p_cast(ctx, y, (kn_dtype)x->dtype);
}

kn_tensor *kn_group_norm(kn_ctx *ctx, kn_tensor *x, int64_t groups, kn_tensor *weight, kn_tensor *bias, double eps)
{
    ENTER(ctx, "kn_group_norm");
    if (!optional_ok(ctx, weight) || !optional_ok(ctx, bias)) return LEAVE(ctx, NULL);
    kn_tensor *y = group_norm_op(ctx, x, groups, weight, bias, eps);
    return LEAVE(ctx, y);
}

/* torch.finfo(dt).eps */
static double machine_eps(kn_dtype dt)
{
    switch (dt) {
    case KN_F64: return DBL_EPSILON;
    case KN_F16: return 9.765625e-4;  /* 2^-10 */
    case KN_BF16: return 7.8125e-3;   /* 2^-7 */
    default: return FLT_EPSILON;
    }
}

/* y = x * rsqrt(mean(x^2) + eps) * w over the last nnorm dims. */
static kn_tensor *rms_norm_op(kn_ctx *ctx, kn_tensor *x, int nnorm, const int64_t *normalized_shape,
                              kn_tensor *weight, double eps)
{
    if (!norm_shape(ctx, x, nnorm, normalized_shape, weight, NULL)) return NULL;
    kn_dtype dt = stat_dtype((kn_dtype)x->dtype);
    int dims[KN_MAX_DIMS];
    int64_t count = trailing_dims(x, nnorm, dims);
    kn_tensor *xc = p_cast(ctx, x, dt);
    kn_tensor *ms = binc(ctx, OP_DIV, p_reduce(ctx, OP_SUM, prim2(ctx, OP_MUL, xc, xc), dims, nnorm), (double)count);
    kn_tensor *y = scale_rsqrt(ctx, xc, ms, eps == 0 ? machine_eps((kn_dtype)x->dtype) : eps, dt);
    return p_cast(ctx, affine(ctx, y, weight, NULL, 0, dt), (kn_dtype)x->dtype);
}

kn_tensor *kn_rms_norm(kn_ctx *ctx, kn_tensor *x, int nnorm, const int64_t *normalized_shape, kn_tensor *weight,
                       double eps)
{
    ENTER(ctx, "kn_rms_norm");
    if (!optional_ok(ctx, weight)) return LEAVE(ctx, NULL);
    kn_tensor *y = rms_norm_op(ctx, x, nnorm, normalized_shape, weight, eps);
    return LEAVE(ctx, y);
}
