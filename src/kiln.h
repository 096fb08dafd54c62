/*
 * kiln.h — the public interface of kiln, a small torch.compile in C99.
 *
 * A worked example: one eager step of f(x) = relu(x W^T + b), read back.
 *
 *     kn_ctx *ctx = kn_ctx_new(NULL);                  // zeroed options: defaults
 *     int64_t xs[2] = {4, 3}, ws[2] = {2, 3}, bs[1] = {2};
 *     kn_tensor *x = kn_randn(ctx, KN_F32, 2, xs);     // (4, 3)
 *     kn_tensor *w = kn_randn(ctx, KN_F32, 2, ws);     // (2, 3)
 *     kn_tensor *b = kn_zeros(ctx, KN_F32, 1, bs);     // (2)
 *
 *     kn_scope_begin(ctx);                             // temporaries from here on
 *     kn_tensor *y = kn_relu(ctx, kn_linear(ctx, x, w, b));   // (4, 2)
 *     float out[8];
 *     if (!y || kn_read(ctx, y, out, sizeof out) != KN_OK)
 *         fprintf(stderr, "%s\n", kn_last_error(ctx));  // e.g. "kn_linear: ..."
 *     kn_scope_end(ctx);                               // frees y and the hidden temporaries
 *
 *     kn_ctx_free(ctx);                                // frees everything else
 *
 * Conventions
 * - Every op takes the context first and returns a new tensor handle, or NULL
 *   on bad input with a message in kn_last_error() naming the op, the operand
 *   and the dimension. A NULL operand is itself an error, so calls can be
 *   nested and the first message survives. An error stays pending until
 *   kn_clear_error(); while one is pending, a NULL optional operand (a bias,
 *   weight or mask) counts as the failed result of an earlier call, never as
 *   "absent", so a failure cannot silently drop a term.
 * - Tensors are owned by the context. Each belongs to the innermost open scope
 *   when it was made; kn_scope_end() releases it unless it was kept
 *   (kn_keep) or is a parameter. kn_ctx_free() releases all of them.
 * - Dimensions follow PyTorch: negative dims count from the end; broadcasting
 *   and type promotion are PyTorch's.
 * - Option structs: all-zero means PyTorch's defaults.
 * - The library never exits, aborts or prints on bad input.
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KN_VERSION "0.1.0"
#define KN_MAX_DIMS 8
#define KN_NODIM (-2147483647 - 1) /* "no dim": reduce or squeeze over all dims */

typedef struct kn_ctx kn_ctx;
typedef struct kn_tensor kn_tensor;

typedef enum {
    KN_F32,  /* default float */
    KN_F64,  /* oracle and gradient checks */
    KN_F16,  /* stored as IEEE half, computed in f32 */
    KN_BF16, /* stored as bfloat16, computed in f32 */
    KN_I32,
    KN_I64,  /* indices */
    KN_BOOL, /* one byte, 0 or 1 */
    KN_U8,
    KN_NDTYPES
} kn_dtype;

typedef enum {
    KN_OK,          /* success */
    KN_EINVAL,      /* bad argument: NULL handle, bad dim, bad parameter */
    KN_ESHAPE,      /* shapes that do not match or broadcast */
    KN_EDTYPE,      /* dtype not accepted by the op */
    KN_EINDEX,      /* index out of range (gather, embedding, ...) */
    KN_ENOMEM,      /* the allocator said no, or a size overflowed */
    KN_EIO,         /* file I/O */
    KN_EUNSUPPORTED /* valid but not implemented */
} kn_status;

/* The allocator hook, as lua_Alloc: ptr == NULL allocates, nsize == 0 frees
 * (and returns NULL), otherwise reallocates. Returning NULL on an allocation
 * is an out-of-memory error that kiln reports and survives. */
typedef void *(*kn_alloc_fn)(void *user, void *ptr, size_t osize, size_t nsize);

typedef struct {
    kn_alloc_fn alloc; /* NULL: libc malloc/realloc/free */
    void *alloc_user;
    uint64_t seed;     /* random seed for kn_rand/kn_randn/dropout; 0 is a valid seed */
} kn_ctx_opts;

/* ---- context and errors ---- */
kn_ctx *kn_ctx_new(const kn_ctx_opts *opts); /* NULL opts: defaults; NULL if out of memory */
void kn_ctx_free(kn_ctx *ctx);
const char *kn_last_error(const kn_ctx *ctx); /* "" when no error is pending */
kn_status kn_last_status(const kn_ctx *ctx);
void kn_clear_error(kn_ctx *ctx);
void kn_set_log(kn_ctx *ctx, void (*fn)(void *user, const char *line), void *user);
/* KILN_LOGS topics for this context ("graph,fusion", "all", ""): overrides the environment */
kn_status kn_set_logs(kn_ctx *ctx, const char *spec);
/* The generator behind kn_rand, kn_randn, kn_dropout and the initialisers:
 * Philox 4x32-10 (counter-based), whose state is a 64-bit key (the seed)
 * and a counter, a position in the key's stream. Position c is 32-bit lane
 * c % 4 of Philox block c / 4 of the key, whose top 24 bits give a uniform
 * in [0, 1) (the same value in every float dtype). A draw of n elements
 * takes element k (row-major) from position counter + k and advances the
 * counter by n: kn_rand draws once, kn_randn twice (Box-Muller), a training
 * kn_dropout once in f32 whatever x's dtype. kn_manual_seed sets the key to
 * seed and the counter to 0 (kn_ctx_opts.seed: the key at the start).
 * For the same seed and the same sequence of draws, eager mode and every
 * backend of kn_compile draw the same bits: a compiled function reads the
 * state at each kn_call and advances it as eager does, so each call draws
 * fresh numbers, kn_manual_seed between calls takes effect without a
 * recompile, and a compiled backward reuses the forward's dropout mask
 * (what kn_randn computes from its uniforms is as exact as the backend's
 * log and cos). */
void kn_manual_seed(kn_ctx *ctx, uint64_t seed);
const char *kn_dtype_name(kn_dtype dt);
size_t kn_dtype_size(kn_dtype dt);

/* ---- scopes and lifetime ---- */
void kn_scope_begin(kn_ctx *ctx);
void kn_scope_end(kn_ctx *ctx);          /* frees tensors made since the matching begin */
kn_tensor *kn_keep(kn_ctx *ctx, kn_tensor *t); /* survive every scope end; returns t */
void kn_free(kn_ctx *ctx, kn_tensor *t);       /* release one tensor now */
size_t kn_live_bytes(const kn_ctx *ctx);       /* bytes of tensor storage held now */
size_t kn_live_tensors(const kn_ctx *ctx);

/* ---- creation and reading ---- */
kn_tensor *kn_tensor_from(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, const void *data);
kn_tensor *kn_scalar(kn_ctx *ctx, double v);      /* a Python float: 0-d, weakest in type promotion */
kn_tensor *kn_scalar_int(kn_ctx *ctx, int64_t v); /* a Python int */
kn_tensor *kn_zeros(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape);
kn_tensor *kn_ones(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape);
kn_tensor *kn_full(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, double value);
kn_tensor *kn_arange(kn_ctx *ctx, kn_dtype dt, double start, double end, double step);
kn_tensor *kn_rand(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape);  /* U[0, 1) */
kn_tensor *kn_randn(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape); /* N(0, 1) */
/* Copy t's elements, row-major, in t's dtype into dst (bytes must be >= numel * size). */
kn_status kn_read(kn_ctx *ctx, kn_tensor *t, void *dst, size_t bytes);
kn_status kn_item(kn_ctx *ctx, kn_tensor *t, double *out); /* t must hold one element */

int kn_ndim(const kn_tensor *t);
const int64_t *kn_shape(const kn_tensor *t);
const int64_t *kn_strides(const kn_tensor *t); /* in elements */
kn_dtype kn_dtype_of(const kn_tensor *t);
int64_t kn_numel(const kn_tensor *t);
int kn_is_contiguous(const kn_tensor *t);

/* ---- pointwise ---- */
kn_tensor *kn_add(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_sub(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_mul(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_div(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);  /* true division */
kn_tensor *kn_pow(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_fmod(kn_ctx *ctx, kn_tensor *a, kn_tensor *b); /* C fmod: sign of a */
kn_tensor *kn_minimum(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_maximum(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_neg(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_abs(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_sign(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_exp(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_log(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_sqrt(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_rsqrt(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_reciprocal(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_square(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_sin(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_cos(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_tanh(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_erf(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_floor(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_ceil(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_round(kn_ctx *ctx, kn_tensor *x); /* half to even, as torch.round */
kn_tensor *kn_clamp(kn_ctx *ctx, kn_tensor *x, double lo, double hi); /* +-INFINITY: no bound */
kn_tensor *kn_eq(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_ne(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_lt(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_le(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_gt(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_ge(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_logical_and(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_logical_or(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_logical_xor(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_logical_not(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_where(kn_ctx *ctx, kn_tensor *cond, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_masked_fill(kn_ctx *ctx, kn_tensor *x, kn_tensor *mask, double value);
kn_tensor *kn_to(kn_ctx *ctx, kn_tensor *x, kn_dtype dt); /* cast */

/* ---- reductions: dims/ndims select axes (ndims == 0: all axes) ---- */
kn_tensor *kn_sum(kn_ctx *ctx, kn_tensor *x, const int *dims, int ndims, int keepdim);
kn_tensor *kn_mean(kn_ctx *ctx, kn_tensor *x, const int *dims, int ndims, int keepdim);
kn_tensor *kn_prod(kn_ctx *ctx, kn_tensor *x, int dim, int keepdim); /* dim KN_NODIM: all */
kn_tensor *kn_amax(kn_ctx *ctx, kn_tensor *x, const int *dims, int ndims, int keepdim);
kn_tensor *kn_amin(kn_ctx *ctx, kn_tensor *x, const int *dims, int ndims, int keepdim);
kn_tensor *kn_var(kn_ctx *ctx, kn_tensor *x, const int *dims, int ndims, int correction, int keepdim);
kn_tensor *kn_std(kn_ctx *ctx, kn_tensor *x, const int *dims, int ndims, int correction, int keepdim);
kn_tensor *kn_logsumexp(kn_ctx *ctx, kn_tensor *x, const int *dims, int ndims, int keepdim);
kn_tensor *kn_argmax(kn_ctx *ctx, kn_tensor *x, int dim, int keepdim); /* KN_NODIM: flattened */
kn_tensor *kn_argmin(kn_ctx *ctx, kn_tensor *x, int dim, int keepdim);
kn_tensor *kn_cumsum(kn_ctx *ctx, kn_tensor *x, int dim);

/* ---- shape and indexing (views where PyTorch makes views) ---- */
kn_tensor *kn_reshape(kn_ctx *ctx, kn_tensor *x, int ndim, const int64_t *shape); /* one -1 allowed */
kn_tensor *kn_view(kn_ctx *ctx, kn_tensor *x, int ndim, const int64_t *shape);    /* no copy, or an error */
kn_tensor *kn_flatten(kn_ctx *ctx, kn_tensor *x, int start_dim, int end_dim);
kn_tensor *kn_squeeze(kn_ctx *ctx, kn_tensor *x, int dim); /* KN_NODIM: every size-1 dim */
kn_tensor *kn_unsqueeze(kn_ctx *ctx, kn_tensor *x, int dim);
kn_tensor *kn_transpose(kn_ctx *ctx, kn_tensor *x, int dim0, int dim1);
kn_tensor *kn_permute(kn_ctx *ctx, kn_tensor *x, const int *perm); /* perm has ndim entries */
kn_tensor *kn_expand(kn_ctx *ctx, kn_tensor *x, int ndim, const int64_t *shape); /* -1 keeps */
kn_tensor *kn_contiguous(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_slice(kn_ctx *ctx, kn_tensor *x, int dim, int64_t start, int64_t stop, int64_t step);
kn_tensor *kn_narrow(kn_ctx *ctx, kn_tensor *x, int dim, int64_t start, int64_t length);
kn_tensor *kn_pad(kn_ctx *ctx, kn_tensor *x, int npad, const int64_t *pad, double value); /* F.pad constant */
kn_tensor *kn_cat(kn_ctx *ctx, kn_tensor *const *xs, int n, int dim);
kn_tensor *kn_stack(kn_ctx *ctx, kn_tensor *const *xs, int n, int dim);
/* split/chunk write up to max_out handles into out and return how many
 * pieces there are (more than max_out: nothing written), or -1 on error. */
int kn_split(kn_ctx *ctx, kn_tensor *x, int64_t split_size, int dim, kn_tensor **out, int max_out);
int kn_chunk(kn_ctx *ctx, kn_tensor *x, int chunks, int dim, kn_tensor **out, int max_out);
kn_tensor *kn_index_select(kn_ctx *ctx, kn_tensor *x, int dim, kn_tensor *index);
kn_tensor *kn_gather(kn_ctx *ctx, kn_tensor *x, int dim, kn_tensor *index);
kn_tensor *kn_scatter_add(kn_ctx *ctx, kn_tensor *x, int dim, kn_tensor *index, kn_tensor *src);
kn_tensor *kn_triu(kn_ctx *ctx, kn_tensor *x, int64_t diagonal);
kn_tensor *kn_tril(kn_ctx *ctx, kn_tensor *x, int64_t diagonal);
kn_tensor *kn_one_hot(kn_ctx *ctx, kn_tensor *index, int64_t num_classes); /* -1: max + 1 */

/* ---- linear algebra ---- */
kn_tensor *kn_matmul(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_bmm(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
kn_tensor *kn_linear(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b); /* b may be NULL */

/* ---- convolution and pooling (NCHW) ---- */
typedef struct {
    int stride[2];         /* 0: 1 */
    int padding[2];
    int dilation[2];       /* 0: 1 */
    int output_padding[2]; /* conv_transpose2d only */
    int groups;            /* 0: 1 */
} kn_conv_opts;            /* conv1d reads element [0] of each pair */

typedef struct {
    int kernel[2];
    int stride[2];   /* 0: the kernel size */
    int padding[2];
    int dilation[2]; /* 0: 1; max_pool2d only */
    int ceil_mode;
    int exclude_pad; /* avg_pool2d: count_include_pad = !exclude_pad */
    int divisor;     /* avg_pool2d: divisor_override, 0: none */
} kn_pool_opts;

kn_tensor *kn_conv1d(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b, const kn_conv_opts *o);
kn_tensor *kn_conv2d(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b, const kn_conv_opts *o);
kn_tensor *kn_conv_transpose2d(kn_ctx *ctx, kn_tensor *x, kn_tensor *w, kn_tensor *b, const kn_conv_opts *o);
kn_tensor *kn_max_pool2d(kn_ctx *ctx, kn_tensor *x, const kn_pool_opts *o);
kn_tensor *kn_avg_pool2d(kn_ctx *ctx, kn_tensor *x, const kn_pool_opts *o);
kn_tensor *kn_adaptive_avg_pool2d(kn_ctx *ctx, kn_tensor *x, int64_t out_h, int64_t out_w);

/* ---- normalisation ---- */
/* training: batch statistics, and running_mean/var (if given) are updated in
 * place with momentum (0: PyTorch's 0.1); eps 0: 1e-5. */
kn_tensor *kn_batch_norm(kn_ctx *ctx, kn_tensor *x, kn_tensor *running_mean, kn_tensor *running_var,
                         kn_tensor *weight, kn_tensor *bias, int training, double momentum, double eps);
kn_tensor *kn_layer_norm(kn_ctx *ctx, kn_tensor *x, int nnorm, const int64_t *normalized_shape,
                         kn_tensor *weight, kn_tensor *bias, double eps);
kn_tensor *kn_group_norm(kn_ctx *ctx, kn_tensor *x, int64_t groups, kn_tensor *weight, kn_tensor *bias,
                         double eps);
/* eps 0: the dtype's machine epsilon, as torch.nn.functional.rms_norm */
kn_tensor *kn_rms_norm(kn_ctx *ctx, kn_tensor *x, int nnorm, const int64_t *normalized_shape,
                       kn_tensor *weight, double eps);

/* ---- activations ---- */
kn_tensor *kn_relu(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_leaky_relu(kn_ctx *ctx, kn_tensor *x, double slope);
kn_tensor *kn_gelu(kn_ctx *ctx, kn_tensor *x, int tanh_approx);
kn_tensor *kn_silu(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_sigmoid(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_softplus(kn_ctx *ctx, kn_tensor *x, double beta, double threshold); /* 0, 0: 1, 20 */
kn_tensor *kn_hardswish(kn_ctx *ctx, kn_tensor *x);
kn_tensor *kn_elu(kn_ctx *ctx, kn_tensor *x, double alpha);
kn_tensor *kn_softmax(kn_ctx *ctx, kn_tensor *x, int dim);
kn_tensor *kn_log_softmax(kn_ctx *ctx, kn_tensor *x, int dim);

/* ---- losses ---- */
typedef enum { KN_REDUCE_MEAN, KN_REDUCE_SUM, KN_REDUCE_NONE } kn_reduction;

typedef struct {
    kn_reduction reduction;  /* 0: mean */
    kn_tensor *weight;       /* per-class weight (C), or NULL */
    int has_ignore_index;    /* 0: ignore_index is PyTorch's -100 */
    int64_t ignore_index;
    double label_smoothing;  /* cross_entropy only */
} kn_loss_opts;

/* input (N, C) or (N, C, d...) logits; target (N) or (N, d...) class indices (i64/i32) */
kn_tensor *kn_cross_entropy(kn_ctx *ctx, kn_tensor *input, kn_tensor *target, const kn_loss_opts *o);
kn_tensor *kn_nll_loss(kn_ctx *ctx, kn_tensor *logp, kn_tensor *target, const kn_loss_opts *o);
kn_tensor *kn_mse_loss(kn_ctx *ctx, kn_tensor *input, kn_tensor *target, kn_reduction r);
kn_tensor *kn_l1_loss(kn_ctx *ctx, kn_tensor *input, kn_tensor *target, kn_reduction r);
kn_tensor *kn_binary_cross_entropy(kn_ctx *ctx, kn_tensor *p, kn_tensor *target, kn_tensor *weight,
                                   kn_reduction r);
kn_tensor *kn_binary_cross_entropy_with_logits(kn_ctx *ctx, kn_tensor *x, kn_tensor *target,
                                               kn_tensor *weight, kn_tensor *pos_weight, kn_reduction r);

/* ---- layers ---- */
kn_tensor *kn_embedding(kn_ctx *ctx, kn_tensor *weight, kn_tensor *index);
kn_tensor *kn_dropout(kn_ctx *ctx, kn_tensor *x, double p, int training);
/* q (..., L, E), k (..., S, E), v (..., S, Ev); mask NULL or bool/float (..., L, S); scale 0: 1/sqrt(E) */
kn_tensor *kn_scaled_dot_product_attention(kn_ctx *ctx, kn_tensor *q, kn_tensor *k, kn_tensor *v,
                                           kn_tensor *mask, int is_causal, double scale);

/* ---- autodiff (reverse mode, a tape of primitives) ----
 * Ops on tensors that require grad record their primitives on the context's
 * tape; kn_backward runs the tape backwards and adds each leaf's gradient
 * into its .grad (read with kn_grad). The tape is released after backward
 * unless keep_graph is set. */
kn_tensor *kn_param(kn_ctx *ctx, kn_tensor *t);                  /* requires grad, kept; returns t */
kn_tensor *kn_requires_grad(kn_ctx *ctx, kn_tensor *t, int on); /* a leaf that requires grad */
int kn_is_requires_grad(const kn_tensor *t);
kn_tensor *kn_grad(kn_ctx *ctx, kn_tensor *t);                   /* NULL until a backward reaches t */
kn_status kn_backward(kn_ctx *ctx, kn_tensor *loss, int keep_graph); /* loss: one element */
void kn_zero_grad(kn_ctx *ctx, kn_tensor *const *params, int n); /* grads to NULL (set_to_none) */
int kn_set_grad_enabled(kn_ctx *ctx, int on);                    /* returns the previous setting */
kn_tensor *kn_detach(kn_ctx *ctx, kn_tensor *t);                 /* same storage, no history */

/* ---- parameters as PyTorch initialises them (from the context's seed) ---- */
/* New tensors (wrap with kn_param). kaiming: U(-b, b) with b = gain * sqrt(3 / fan_in),
 * gain = sqrt(2 / (1 + a^2)); a = sqrt(5) for nn.Linear and nn.Conv weights.
 * fan_in = shape[1] * prod(shape[2:]); fewer than 2 dims is an error; an empty shape gives zeros.
 * uniform: lo + (hi - lo) * u, u from kn_rand; needs finite lo <= hi and a float dtype. */
kn_tensor *kn_kaiming_uniform(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, double a);
kn_tensor *kn_uniform(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, double lo, double hi);

/* ---- optimizers: the update is a graph of primitives; state lives in tensors ----
 * PyTorch 1.13's update rules. Zeroed options give PyTorch's defaults: lr 1e-3 (SGD has
 * none: lr 0 is an error), betas 0.9 and 0.999, eps 1e-8, AdamW weight_decay 1e-2 (so
 * AdamW cannot have 0: use Adam). A zero that is meaningful (momentum, dampening,
 * weight_decay for SGD and Adam) is used as given. Invalid options (lr < 0, momentum or
 * weight_decay < 0, eps < 0, a beta outside [0, 1), nesterov without momentum > 0 and
 * dampening 0), an empty list, a NULL, repeated or non-float parameter: NULL and an error.
 * The optimizer keeps the handles (they must outlive it) and makes its state tensors at
 * the first step that reaches each parameter. A step writes params and state in place
 * with grad disabled; on error (a grad whose shape is not its parameter's) it changes
 * nothing. Free the optimizer before its context. */
typedef struct kn_optim kn_optim;
typedef struct {
    double lr, momentum, dampening, weight_decay;
    int nesterov, maximize;
} kn_sgd_opts;
typedef struct {
    double lr, beta1, beta2, eps, weight_decay; /* AdamW: weight_decay 0 means 1e-2 */
    int amsgrad, maximize;
} kn_adam_opts;

kn_optim *kn_sgd(kn_ctx *ctx, kn_tensor *const *params, int n, const kn_sgd_opts *o);
kn_optim *kn_adam(kn_ctx *ctx, kn_tensor *const *params, int n, const kn_adam_opts *o);
kn_optim *kn_adamw(kn_ctx *ctx, kn_tensor *const *params, int n, const kn_adam_opts *o);
kn_status kn_optim_step(kn_optim *opt);      /* params without a grad are skipped, as in torch */
void kn_optim_zero_grad(kn_optim *opt);      /* kn_zero_grad on its params */
void kn_optim_free(kn_optim *opt);           /* frees the state; NULL is fine */

/* ---- capture: kn_compile (TorchDynamo's contract for C functions) ----
 *
 *     static kn_status step(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin,
 *                           kn_tensor **out, int nout)
 *     {
 *         Model *m = user;                     // parameters live wherever the caller keeps them
 *         out[0] = kn_cross_entropy(ctx, forward(ctx, m, in[0]), in[1], NULL);
 *         return out[0] ? KN_OK : kn_last_status(ctx);
 *     }
 *     kn_compile_opts o = {.params = m->params, .nparams = m->n};
 *     kn_fn *f = kn_compile(ctx, step, m, &o);  // nothing compiled yet
 *     kn_call(f, in, 2, out, 1);                // first call: trace, compile, cache, run
 *     kn_call(f, in, 2, out, 1);                // guards pass: the cached program runs
 *
 * The first call runs body on symbolic tensors and records a graph; guards
 * record what the graph assumed: the inputs' dtypes, shapes and contiguity,
 * which tensors it read (the identity of each params[i], read from the
 * caller's array at every call), the grad mode and the option values. A
 * later call checks the guards and runs the cached program; a failed guard
 * traces and compiles a new entry and logs why (KILN_LOGS=recompiles).
 * Tensors the body reads that are not in params (optimizer state, running
 * statistics) are held by the entry and read, and written, in place.
 * Writes to them (kn_optim_step, batch_norm's running stats) and the .grad
 * that kn_backward leaves are replayed on every call. Reading a value
 * (kn_item, kn_read) is a graph break unless fullgraph is set, in which
 * case it is an error naming the op: the graph so far is compiled and run,
 * the body goes on with the value, and what follows is another graph; a
 * kn_backward after the read (a loss logged before the backward) runs
 * backward through both. The value is guarded on, since the body may
 * branch on it: a call that reads another value runs the body again (its C
 * code too, so what it logs is this call's), and where the graphs come out
 * the same their compiled programs run, with no recompile. To read a value
 * at no cost, return it as an output and read it after kn_call. A value
 * read may be a traced one or the state itself (a parameter read with
 * kn_read): either is guarded on. Results always equal eager execution
 * within floating-point tolerance. A call that fails (an index out of
 * range inside the program, say) makes no outputs, and what the body
 * writes (the generator, parameters and optimizer state, running
 * statistics) may then differ from what eager leaves, which stops at the
 * failing op while a program runs whole. out[]
 * receives new tensors in the caller's current scope (reduce-overhead: the
 * function's own; kn_mode). */
typedef struct kn_fn kn_fn;
typedef kn_status (*kn_body_fn)(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out,
                                int nout);
typedef enum { KN_BACKEND_C, KN_BACKEND_TCC, KN_BACKEND_INTERP } kn_backend; /* c: system cc, cached */
/* Eager ops through kernels compiled once per op signature and cached in the context
 * (tcc: milliseconds per kernel; c: the system compiler, cached on disk). The default is
 * KN_BACKEND_INTERP, the reference interpreter, unless $KILN_EAGER=c|tcc|interp says
 * otherwise when the context is made. Without that compiler here, the interpreter runs
 * (one log line); KILN_LOGS=perf logs each compile. */
kn_status kn_set_eager_backend(kn_ctx *ctx, kn_backend b);
/* Modes, as torch.compile's:
 * - default: out[] are new handles in the caller's scope, which the caller
 *   may keep, free or view as long as it likes; later calls never change
 *   them. Their storage is the program's, reused once no handle but the
 *   program's own refers to it, so a call allocates one handle per output
 *   (and one per program output that holds a written value or a .grad).
 * - reduce-overhead: a step is one call that allocates nothing once warm
 *   (after the first two calls; a graph break or a non-contiguous input
 *   still allocate; backend interp, or no compiler here, runs as default). out[] are
 *   handles the compiled function owns: the same handle for an output on
 *   every call, over storage that the NEXT CALL OVERWRITES, as torch.compile's
 *   CUDA-graph mode does. kn_free on them is ignored; they go with
 *   kn_fn_free. Views of an output (kn_reshape, kn_grad) see the new values
 *   too: copy out (kn_read) what must outlive the next call. A .grad set by
 *   the function is likewise a view of storage the next call overwrites.
 *   With grad enabled and a compiled forward whose backward runs later
 *   (kn_backward outside the body), the outputs are new, as in default.
 * - max-autotune: as default, after timing candidate GEMM blockings and
 *   vector widths on this machine when compiling (the winners are cached). */
typedef enum { KN_MODE_DEFAULT, KN_MODE_REDUCE_OVERHEAD, KN_MODE_MAX_AUTOTUNE } kn_mode;
typedef enum { KN_DYNAMIC_AUTO, KN_DYNAMIC_ON, KN_DYNAMIC_OFF } kn_dynamic;

typedef struct {
    kn_backend backend;
    kn_mode mode;
    kn_dynamic dynamic;        /* auto: a dim whose size changed once becomes the symbol s0 of a generic
                                  entry that any size >= 2 runs without recompiling (up to a limit where
                                  its graph has one: a cumsum along s0 covers 2^16; dims of equal size
                                  share it); on: every dim from the first call (one symbol: the first
                                  dim >= 2 and those of its size); off: never. Backends tcc and c compile
                                  a generic entry once, kernels that read s0 at run time. What cannot be
                                  generic (a size read as a value, a graph break, a size not affine in s0,
                                  kernels that differ in form with the size) specialises, logged
                                  (KILN_LOGS=recompiles) */
    int fullgraph;             /* a graph break is an error */
    int recompile_limit;       /* 0: 8; past it calls run eagerly, with one warning */
    kn_tensor *const *params;  /* the caller's parameter array (must outlive the fn); may be NULL */
    int nparams;
    const char *name;          /* in logs; NULL: "fn" */
} kn_compile_opts;

typedef struct {
    int calls, entries, recompiles, graphs, graph_breaks, eager_calls;
    int kernels;               /* compiled kernels, over every graph of the newest entry */
    int interp_steps;          /* nodes of its graphs that a compiled backend leaves to the interpreter */
    size_t arena_bytes;        /* planned arena of the newest entry, summed over its graphs */
    size_t code_bytes;         /* generated source of the newest entry */
    double compile_ms;         /* trace + compile time of the newest entry */
    int ops;                   /* public ops the newest entry's trace called (before decomposition) */
    int nodes;                 /* primitive nodes of its compiled graphs (after decomposition and autodiff) */
    const char *backend;       /* what it runs on ("c", "tcc", "interp") */
    int symbolic_dims;         /* input dims of the newest entry that are the symbol s0 (dynamic shapes) */
    char arena_expr[64];       /* such an entry's arena in s0, e.g. "s0*3200+64" ("" if static or not
                                  affine; arena_bytes is then the arena at the size run last) */
    int compiles;              /* programs made with generated code (backends tcc, c), over every entry: one
                                  per compiled graph, one per graph of a generic entry whatever its sizes */
    int in_place;              /* writes of the newest entry (a step's weights and optimizer state) whose new
                                  values its program stores straight over the old ones, element by element,
                                  instead of into storage of its own (backends tcc and c, an entry with no
                                  graph break; checked safe at compile time, else 0 for that write) */
} kn_fn_info;

kn_fn *kn_compile(kn_ctx *ctx, kn_body_fn body, void *user, const kn_compile_opts *o);
kn_status kn_call(kn_fn *f, kn_tensor *const *in, int nin, kn_tensor **out, int nout);
kn_status kn_fn_stats(const kn_fn *f, kn_fn_info *info);
void kn_fn_free(kn_fn *f); /* NULL is fine; before its context */

/* ---- files: safetensors ----
 * kn_save writes tensors under names (a name is 1..255 bytes of printable
 * ASCII, no quote or backslash; names unique) to path as safetensors, through
 * a temporary file renamed over path, so an interrupted save never leaves a
 * half-written file. kn_load reads path and copies each named tensor into
 * the tensor given for that name (dtype and shape must match exactly);
 * names in the file that are not asked for are ignored, an asked name that
 * is missing is an error. Errors (KN_EIO, message naming the file and what
 * was wrong: magic/header length, JSON, dtype, shape, offsets, size) leave
 * every destination unchanged. */
kn_status kn_save(kn_ctx *ctx, const char *path, const char *const *names, kn_tensor *const *ts, int n);
kn_status kn_load(kn_ctx *ctx, const char *path, const char *const *names, kn_tensor *const *ts, int n);

#ifdef __cplusplus
}
#endif
#endif
