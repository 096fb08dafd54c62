/*
 * test_empty.c — every public op with a zero in each dimension in turn,
 * forward and backward, compiled on backends interp, tcc and c and run
 * eagerly through kernels compiled on tcc and c, against eager execution
 * on the interpreter.
 *
 * A case is an op and the shapes of its inputs, written with letters a, b,
 * c, ... (sizes 2, 3, 4, ...), A to E (17, 67, 260, 1100, 40000: sizes at
 * which the loop passes vectorise, tile, unroll and split over threads)
 * and digits (fixed sizes). Its variant 0 has every letter at its size;
 * variant i > 0 has the i-th letter that appears set to 0, so every dim a
 * letter names meets a zero: a batch, a feature, a reduced axis, a dot's
 * M, K or N, a channel. An input is
 *   ab       f32 N(0, 1) values, a leaf that requires grad
 *   p:ab     f32 in (0.05, 0.95), a leaf (probabilities)
 *   k:ab     f32 in (0.5, 1.5), a constant (running statistics)
 *   m:ab     a bool mask
 *   i:ab<c   i64 indices in [0, size of c); a size of 0 makes them out of range
 *
 * The oracle is eager execution on the interpreter: the results, the loss
 * sum_k sum(y_k * w_k) over the float results (fixed cotangents w_k) and its
 * gradients. Each variant is then checked, one CHECK per program kind and
 * backend:
 *   forward  a kn_compile'd body returning the results, leaves not requiring
 *            grad (on tcc also in reduce-overhead mode);
 *   region   a body returning the loss, leaves requiring grad, kn_backward
 *            after the call (a compiled forward whose backward runs later):
 *            the loss and the gradients;
 *   step     a body that computes the loss and calls kn_backward itself, the
 *            leaves its params: the loss and the .grad it leaves;
 *   eager    the ops run eagerly with kn_set_eager_backend tcc and c:
 *            results and gradients.
 * interp and tcc compile each variant on its own; c packs variants into
 * few programs (each costs a run of the system compiler). Where eager
 * fails (amax over an empty dim, as PyTorch), every program must fail with
 * the same status and message, but for the public op it names. A program
 * that runs on another backend than the one asked for fails. Then a whole
 * training step (an MLP, cross_entropy, Adam or SGD inside the body) with
 * an empty batch, no features or no hidden units, two steps against two
 * eager ones. The comparison is shown to catch a wrong value and shape.
 * Backend c compiles into a fresh $KILN_CACHE_DIR, removed at the end.
 *
 * Run from the repository root:  build/tests/test_empty [-v] [NAME_SUBSTRING]
 *   -v prints each variant and program as it runs; a substring runs only
 *   the cases whose name contains it ("mlp": the training steps).
 */
#if (defined(__unix__) || defined(__APPLE__)) && !defined(__wasi__) && !defined(__EMSCRIPTEN__)
#define HAVE_POSIX 1
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <unistd.h>
#else
#define HAVE_POSIX 0
#endif
#include <stdlib.h>

#include "test.h"
#include "../port/port.h"

#define MAXIN 4    /* inputs of a case */
#define MAXY 4     /* results of a case */
#define MAXIO 64   /* a compiled function's inputs and outputs (capture.c) */
#define MAXITEMS 64
#define NVARIANTS 6 /* a case's variants: at most 5 letters */
#define WHYLEN 640 /* a CHECK's message: two error messages and a few words */

typedef int (*OpFn)(kn_ctx *c, kn_tensor *const *x, kn_tensor **y); /* results, or 0 */

typedef struct {
    const char *name;
    const char *in;
    OpFn f;
} Case;

static int verbose;
static const char *filter;

/* ---- the cases ---- */

#define ONE(fn, expr) \
    static int fn(kn_ctx *c, kn_tensor *const *x, kn_tensor **y) \
    { \
        (void)c; \
        return (y[0] = (expr)) != NULL; \
    }

static const int d0[1] = {0}, d1[1] = {1}, dm1[1] = {-1}, d01[2] = {0, 1};
static const kn_conv_opts conv_pad = {.padding = {1, 1}};
static const kn_conv_opts conv_pad2 = {.padding = {2, 2}};
static const kn_conv_opts conv_s2 = {.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}};
static const kn_pool_opts pool2 = {.kernel = {2, 2}};
static const kn_pool_opts pool3s2 = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
static const kn_loss_opts ce_mean = {0}, ce_sum = {.reduction = KN_REDUCE_SUM};
static const kn_loss_opts ce_none_smooth = {.reduction = KN_REDUCE_NONE, .label_smoothing = 0.1};

/* pointwise */
ONE(c_add, kn_add(c, x[0], x[1]))
ONE(c_mul_bcast, kn_mul(c, x[0], x[1]))
ONE(c_chain, kn_tanh(c, kn_add(c, kn_gelu(c, kn_mul(c, x[0], kn_scalar(c, 1.5)), 0), kn_sigmoid(c, x[0]))))
ONE(c_div, kn_div(c, x[0], kn_add(c, kn_abs(c, x[1]), kn_scalar(c, 1))))
ONE(c_where, kn_where(c, x[0], x[1], x[2]))
ONE(c_masked_fill, kn_masked_fill(c, x[0], x[1], -2.5))
ONE(c_maximum, kn_maximum(c, x[0], x[1]))
ONE(c_clamp, kn_clamp(c, x[0], -0.5, 0.5))
ONE(c_compare, kn_logical_and(c, kn_lt(c, x[0], x[1]), kn_ge(c, x[0], kn_scalar(c, 0))))
ONE(c_cast, kn_add(c, kn_to(c, kn_mul(c, x[0], kn_scalar(c, 4)), KN_I32), kn_scalar_int(c, 1)))
ONE(c_acts, kn_add(c, kn_add(c, kn_silu(c, x[0]), kn_softplus(c, x[0], 0, 0)),
                   kn_add(c, kn_elu(c, x[0], 1.0), kn_hardswish(c, kn_leaky_relu(c, x[0], 0.1)))))
ONE(c_unary, kn_add(c, kn_exp(c, kn_neg(c, kn_square(c, x[0]))), kn_log(c, x[1])))
ONE(c_unary2, kn_add(c, kn_add(c, kn_mul(c, kn_sign(c, x[0]), kn_erf(c, x[0])), kn_sin(c, kn_round(c, x[0]))),
                     kn_add(c, kn_cos(c, kn_ceil(c, x[0])), kn_rsqrt(c, kn_add(c, kn_abs(c, x[0]), kn_scalar(c, 1))))))
ONE(c_binary2, kn_add(c, kn_pow(c, x[1], x[0]), kn_add(c, kn_minimum(c, x[0], kn_reciprocal(c, x[1])),
                                                        kn_floor(c, x[0]))))
ONE(c_logical, kn_logical_xor(c, kn_logical_or(c, kn_eq(c, x[0], x[1]), kn_le(c, x[0], x[1])),
                              kn_logical_not(c, kn_ne(c, kn_gt(c, x[0], x[1]), kn_lt(c, x[0], kn_scalar(c, 0))))))
ONE(c_casts, kn_add(c, kn_to(c, kn_to(c, x[0], KN_F16), KN_F32), kn_to(c, kn_to(c, x[0], KN_BF16), KN_F32)))
ONE(c_to_f64, kn_to(c, kn_mul(c, kn_to(c, x[0], KN_F64), kn_scalar(c, 3)), KN_F32))
ONE(c_dropout_eval, kn_dropout(c, x[0], 0.5, 0))

/* reductions */
ONE(c_sum_all, kn_sum(c, x[0], NULL, 0, 0))
ONE(c_sum_last, kn_sum(c, x[0], dm1, 1, 0))
ONE(c_sum_first_keep, kn_sum(c, kn_exp(c, x[0]), d0, 1, 1))
ONE(c_sum_mid, kn_sum(c, x[0], d1, 1, 0))
ONE(c_mean_last, kn_mean(c, x[0], dm1, 1, 0))
ONE(c_mean_all, kn_mean(c, x[0], NULL, 0, 0))
ONE(c_var, kn_var(c, x[0], d1, 1, 1, 0))
ONE(c_std, kn_std(c, x[0], d0, 1, 0, 1))
ONE(c_logsumexp, kn_logsumexp(c, x[0], dm1, 1, 0))
ONE(c_prod, kn_prod(c, x[0], 1, 0))
ONE(c_amax, kn_amax(c, x[0], dm1, 1, 0))
ONE(c_amin_keep, kn_amin(c, x[0], d0, 1, 1))
ONE(c_sub_amax, kn_sub(c, x[0], kn_amax(c, x[0], dm1, 1, 1)))
ONE(c_argmax, kn_argmax(c, x[0], 1, 0))
ONE(c_argmin_all, kn_argmin(c, x[0], KN_NODIM, 0))
ONE(c_cumsum_last, kn_cumsum(c, x[0], -1))
ONE(c_cumsum_first, kn_cumsum(c, x[0], 0))
ONE(c_sum_both, kn_mul(c, kn_sum(c, x[0], d01, 2, 1), x[0]))
ONE(c_prod_all, kn_prod(c, x[0], KN_NODIM, 0))
ONE(c_argmax_keep, kn_argmax(c, x[0], 0, 1))
ONE(c_var_all, kn_add(c, kn_var(c, x[0], NULL, 0, 1, 0), kn_std(c, x[0], NULL, 0, 0, 0)))
ONE(c_logsumexp2, kn_logsumexp(c, x[0], d01, 2, 1))
ONE(c_amax2, kn_amax(c, x[0], d01, 2, 0))
ONE(c_cumsum_mid, kn_cumsum(c, kn_exp(c, x[0]), 1))

/* views */
ONE(c_reshape, kn_reshape(c, kn_exp(c, x[0]), 3, (int64_t[]){-1, 2, 3}))
ONE(c_transpose, kn_contiguous(c, kn_transpose(c, kn_mul(c, x[0], x[0]), 0, 2)))
ONE(c_permute_sum, kn_sum(c, kn_permute(c, x[0], (int[]){2, 0, 1}), d1, 1, 0))
ONE(c_expand, kn_mul(c, kn_expand(c, x[0], 3, (int64_t[]){-1, 4, -1}), x[1]))
ONE(c_slice, kn_mul(c, kn_slice(c, x[0], 1, 1, 100, 2), kn_scalar(c, 3)))
ONE(c_narrow_unsq, kn_unsqueeze(c, kn_narrow(c, x[0], 0, 0, kn_shape(x[0])[0]), 1))
ONE(c_squeeze_flat, kn_flatten(c, kn_squeeze(c, x[0], 1), 0, -1))
ONE(c_pad, kn_pad(c, x[0], 4, (int64_t[]){1, 2, 0, 1}, 0.5))
ONE(c_triu, kn_add(c, kn_triu(c, x[0], 0), kn_tril(c, x[0], -1)))
ONE(c_view, kn_view(c, kn_mul(c, x[0], x[0]), 2, (int64_t[]){kn_shape(x[0])[1], -1}))
ONE(c_expand0, kn_add(c, kn_expand(c, x[0], 2, (int64_t[]){kn_shape(x[1])[0], -1}), x[1]))
ONE(c_cat0, kn_cat(c, x, 2, 0))
ONE(c_cat1, kn_cat(c, x, 2, 1))
ONE(c_stack, kn_stack(c, x, 2, 1))

static int c_split(kn_ctx *c, kn_tensor *const *x, kn_tensor **y)
{
    kn_tensor *p[8];
    int n = kn_split(c, x[0], 2, 1, p, 8);
    if (n < 2) return 0; /* a dim of 0 splits into one piece; the case wants two */
    y[0] = kn_mul(c, p[0], p[0]);
    y[1] = kn_exp(c, p[1]);
    return y[0] && y[1] ? 2 : 0;
}

static int c_chunk(kn_ctx *c, kn_tensor *const *x, kn_tensor **y)
{
    int n = kn_chunk(c, x[0], 2, 0, y, MAXY);
    for (int i = 0; i < n; i++) y[i] = kn_mul(c, y[i], kn_scalar(c, 2));
    return n > 0 ? n : 0;
}

/* indexing */
ONE(c_index_select, kn_index_select(c, x[0], 0, x[1]))
ONE(c_gather, kn_gather(c, x[0], 1, x[1]))
ONE(c_scatter_add, kn_scatter_add(c, x[0], 1, x[1], x[2]))
ONE(c_embedding, kn_embedding(c, x[0], x[1]))
ONE(c_one_hot, kn_one_hot(c, x[0], 5))
ONE(c_index_select0d, kn_mul(c, kn_index_select(c, x[0], 1, x[1]), kn_scalar(c, 2)))

/* dots */
ONE(c_matmul, kn_matmul(c, x[0], x[1]))
ONE(c_linear, kn_linear(c, x[0], x[1], x[2]))
ONE(c_linear_gelu, kn_gelu(c, kn_linear(c, x[0], x[1], NULL), 1))
ONE(c_bmm, kn_bmm(c, x[0], x[1]))
ONE(c_matmul_bcast, kn_matmul(c, x[0], x[1]))
ONE(c_matvec, kn_matmul(c, x[0], x[1]))
ONE(c_sdpa, kn_scaled_dot_product_attention(c, x[0], x[1], x[2], NULL, 0, 0))
ONE(c_sdpa_causal, kn_scaled_dot_product_attention(c, x[0], x[1], x[2], NULL, 1, 0))

/* convolution and pooling */
ONE(c_conv2d, kn_conv2d(c, x[0], x[1], x[2], &conv_pad))
ONE(c_conv1d, kn_conv1d(c, x[0], x[1], NULL, NULL))
ONE(c_conv1d_pad, kn_conv1d(c, x[0], x[1], NULL, &conv_pad2))
ONE(c_conv_t, kn_conv_transpose2d(c, x[0], x[1], NULL, &conv_s2))
ONE(c_maxpool, kn_max_pool2d(c, x[0], &pool3s2))
ONE(c_avgpool, kn_avg_pool2d(c, x[0], &pool2))
ONE(c_adaptive, kn_adaptive_avg_pool2d(c, x[0], 2, 2))

/* norms */
ONE(c_layer_norm, kn_layer_norm(c, x[0], 1, &kn_shape(x[0])[1], x[1], x[2], 0))
ONE(c_layer_norm2, kn_layer_norm(c, x[0], 2, &kn_shape(x[0])[1], NULL, NULL, 0))
ONE(c_rms_norm, kn_rms_norm(c, x[0], 1, &kn_shape(x[0])[1], x[1], 0))
ONE(c_group_norm, kn_group_norm(c, x[0], 2, x[1], x[2], 0))
ONE(c_bn_eval, kn_batch_norm(c, x[0], x[1], x[2], x[3], NULL, 0, 0, 0))
ONE(c_bn_train, kn_batch_norm(c, x[0], NULL, NULL, x[1], x[2], 1, 0, 0))

/* softmax family */
ONE(c_softmax_last, kn_softmax(c, x[0], -1))
ONE(c_softmax_first, kn_softmax(c, x[0], 0))
ONE(c_softmax_mid, kn_softmax(c, x[0], 1))
ONE(c_log_softmax, kn_log_softmax(c, x[0], -1))

/* losses */
ONE(c_ce_mean, kn_cross_entropy(c, x[0], x[1], &ce_mean))
ONE(c_ce_sum, kn_cross_entropy(c, x[0], x[1], &ce_sum))
ONE(c_ce_none, kn_cross_entropy(c, x[0], x[1], &ce_none_smooth))
ONE(c_nll, kn_nll_loss(c, kn_log_softmax(c, x[0], 1), x[1], &ce_mean))
ONE(c_mse, kn_mse_loss(c, x[0], x[1], KN_REDUCE_MEAN))
ONE(c_l1_sum, kn_l1_loss(c, x[0], x[1], KN_REDUCE_SUM))
ONE(c_bce, kn_binary_cross_entropy(c, x[0], x[1], NULL, KN_REDUCE_MEAN))
ONE(c_bce_logits, kn_binary_cross_entropy_with_logits(c, x[0], x[1], NULL, NULL, KN_REDUCE_SUM))

static const Case cases[] = {
    {"add", "ab ab", c_add},
    {"mul_bcast", "abc bc", c_mul_bcast},
    {"chain", "ab", c_chain},
    {"div", "ab b", c_div},
    {"where", "m:ab ab b", c_where},
    {"masked_fill", "ab m:b", c_masked_fill},
    {"maximum", "ab ab", c_maximum},
    {"clamp", "abc", c_clamp},
    {"compare", "ab ab", c_compare},
    {"cast", "ab", c_cast},
    {"activations", "ab", c_acts},
    {"unary", "ab p:ab", c_unary},
    {"unary2", "abc", c_unary2},
    {"binary2", "ab p:ab", c_binary2},
    {"logical", "ab b", c_logical},
    {"casts", "ab", c_casts},
    {"to_f64", "ab", c_to_f64},
    {"dropout_eval", "ab", c_dropout_eval},
    {"sum_all", "ab", c_sum_all},
    {"sum_last", "ab", c_sum_last},
    {"sum_first_keep", "ab", c_sum_first_keep},
    {"sum_mid", "abc", c_sum_mid},
    {"mean_last", "ab", c_mean_last},
    {"mean_all", "ab", c_mean_all},
    {"var", "ab", c_var},
    {"std", "ab", c_std},
    {"logsumexp", "ab", c_logsumexp},
    {"prod", "ab", c_prod},
    {"amax", "ab", c_amax},
    {"amin_keep", "ab", c_amin_keep},
    {"sub_amax", "ab", c_sub_amax},
    {"sub_amax3", "abc", c_sub_amax},
    {"argmax", "ab", c_argmax},
    {"argmin_all", "ab", c_argmin_all},
    {"cumsum_last", "ab", c_cumsum_last},
    {"cumsum_first", "ab", c_cumsum_first},
    {"sum_both", "abc", c_sum_both},
    {"prod_all", "ab", c_prod_all},
    {"argmax_keep", "ab", c_argmax_keep},
    {"var_std_all", "ab", c_var_all},
    {"logsumexp2", "abc", c_logsumexp2},
    {"amax2", "abc", c_amax2},
    {"cumsum_mid", "abc", c_cumsum_mid},
    {"reshape", "a3b", c_reshape},
    {"transpose", "abc", c_transpose},
    {"permute_sum", "abc", c_permute_sum},
    {"expand", "a1c 4c", c_expand},
    {"slice", "ab", c_slice},
    {"narrow_unsqueeze", "ab", c_narrow_unsq},
    {"squeeze_flatten", "a1b", c_squeeze_flat},
    {"pad", "ab", c_pad},
    {"triu_tril", "ab", c_triu},
    {"view", "ab", c_view},
    {"expand0", "1b ab", c_expand0},
    {"cat0", "ab cb", c_cat0},
    {"cat1", "ab ac", c_cat1},
    {"stack", "ab ab", c_stack},
    {"split", "a4", c_split},
    {"chunk", "ab", c_chunk},
    {"index_select", "ab i:c<a", c_index_select},
    {"gather", "ab i:ac<b", c_gather},
    {"scatter_add", "ab i:ac<b ac", c_scatter_add},
    {"embedding", "ab i:cd<a", c_embedding},
    {"one_hot", "i:ab<5", c_one_hot},
    {"index_select_0d", "ab i:<b", c_index_select0d},
    {"matmul", "ab bc", c_matmul},
    {"linear", "ab cb c", c_linear},
    {"linear_gelu", "ab cb", c_linear_gelu},
    {"bmm", "abc acd", c_bmm},
    {"matmul_bcast", "abc cd", c_matmul_bcast},
    {"matvec", "ab b", c_matvec},
    {"sdpa", "abc adc ade", c_sdpa},
    {"sdpa_causal", "abc abc abd", c_sdpa_causal},
    {"conv2d", "ab55 cb33 c", c_conv2d},
    {"conv1d", "ab7 cb3", c_conv1d},
    {"conv1d_padded", "abd cb1", c_conv1d_pad}, /* an empty length, padded to a nonempty result */
    {"conv_transpose2d", "ab33 bc33", c_conv_t},
    {"max_pool2d", "ab66", c_maxpool},
    {"avg_pool2d", "abcd", c_avgpool},
    {"adaptive_avg_pool2d", "ab66", c_adaptive},
    {"layer_norm", "ab b b", c_layer_norm},
    {"layer_norm2", "abc", c_layer_norm2},
    {"rms_norm", "ab b", c_rms_norm},
    {"group_norm", "a4c 4 4", c_group_norm},
    {"batch_norm_eval", "ab3 k:b k:b b", c_bn_eval},
    {"batch_norm_train", "ab3 b b", c_bn_train},
    {"softmax_last", "ab", c_softmax_last},
    {"softmax_first", "ab", c_softmax_first},
    {"softmax_mid", "abc", c_softmax_mid},
    {"log_softmax", "ab", c_log_softmax},
    {"cross_entropy_mean", "ab i:a<b", c_ce_mean},
    {"cross_entropy_sum", "ab i:a<b", c_ce_sum},
    {"cross_entropy_none", "abc i:ac<b", c_ce_none},
    {"cross_entropy_1d", "b i:<b", c_ce_sum},
    {"nll_loss", "ab i:a<b", c_nll},
    {"mse_loss", "ab ab", c_mse},
    {"l1_loss_sum", "ab ab", c_l1_sum},
    {"bce", "p:ab k:ab", c_bce},
    {"bce_with_logits", "ab k:ab", c_bce_logits},
    /* sizes where the loop passes vectorise, tile, unroll and split over threads */
    {"big_pointwise", "aE", c_chain},
    {"big_sum_rows", "Ea", c_sum_last},
    {"big_sum_cols", "Ea", c_sum_first_keep},
    {"big_transpose", "aCD", c_transpose},
    {"big_softmax", "aD", c_softmax_last},
    {"big_layer_norm", "aD D D", c_layer_norm},
    {"big_matmul", "CD DB", c_matmul},
    {"big_linear", "BD CD C", c_linear},
    {"big_conv2d", "aA99 BA33 B", c_conv2d},
    {"big_cross_entropy", "BD i:B<D", c_ce_mean},
};
#define NCASES ((int)(sizeof cases / sizeof *cases))

/* ---- inputs ---- */

/* The letters of a case's shapes, in order of appearance, into l (64); how many. */
static int letters(const char *spec, char *l)
{
    int n = 0;
    for (const char *p = spec; *p && n < 64; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'E')) || p[1] == ':') continue;
        if (!memchr(l, *p, (size_t)n)) l[n++] = *p;
    }
    return n;
}

static int64_t size_of(char ch, char zero)
{
    static const int64_t big[5] = {17, 67, 260, 1100, 40000}; /* A..E: vector, tile and thread sizes */
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch == zero) return 0;
    return ch >= 'A' && ch <= 'E' ? big[ch - 'A'] : 2 + (ch - 'a');
}

static double value_at(uint64_t *s) /* a splitmix64 stream to [0, 1) */
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

/* The input of spec token tok (len chars), letter zero at size 0; *leaf: it requires grad. */
static kn_tensor *make_input(kn_ctx *c, const char *tok, size_t len, char zero, uint64_t seed, int *leaf)
{
    char kind = len > 2 && tok[1] == ':' ? tok[0] : 'f';
    const char *dims = kind == 'f' ? tok : tok + 2;
    size_t nd = (size_t)(tok + len - dims);
    const char *lt = memchr(dims, '<', nd);
    int64_t shape[KN_MAX_DIMS], bound = lt ? size_of(lt[1], zero) : 0, n = 1;
    if (lt) nd = (size_t)(lt - dims);
    if (nd > KN_MAX_DIMS) return NULL;
    for (size_t d = 0; d < nd; d++) n *= shape[d] = size_of(dims[d], zero);
    kn_dtype dt = kind == 'i' ? KN_I64 : kind == 'm' ? KN_BOOL : KN_F32;
    unsigned char *buf = malloc((size_t)(n ? n : 1) * 8);
    for (int64_t i = 0; i < n; i++) {
        double u = value_at(&seed);
        if (kind == 'i') ((int64_t *)buf)[i] = bound ? (int64_t)(u * (double)bound) : 0;
        else if (kind == 'm') buf[i] = u < 0.5;
        else if (kind == 'p') ((float *)buf)[i] = (float)(0.05 + 0.9 * u);
        else if (kind == 'k') ((float *)buf)[i] = (float)(0.5 + u);
        else ((float *)buf)[i] = (float)(sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * value_at(&seed)));
    }
    kn_tensor *t = buf ? kn_tensor_from(c, dt, (int)nd, shape, buf) : NULL;
    free(buf);
    *leaf = kind == 'f' || kind == 'p';
    return t && *leaf ? kn_requires_grad(c, t, 1) : t;
}

/* ---- one variant: its inputs and eager's (the interpreter's) results ---- */

typedef struct {
    const Case *k;
    int v;           /* 0: no letter zeroed; i: the i-th letter */
    char name[64];
    int nx;
    kn_tensor *x[MAXIN];
    int leaf[MAXIN];
    /* eager on the interpreter */
    kn_status status;
    char msg[256];
    int ny;
    kn_tensor *y[MAXY];
    kn_tensor *loss;      /* NULL: no float result */
    kn_tensor *g[MAXIN];  /* gradients of the leaves (NULL where none) */
} Item;

/* The cotangent of result i: fixed values of y's shape (f32 results only). */
static kn_tensor *cotangent(kn_ctx *c, kn_tensor *y, int i)
{
    int64_t n = kn_numel(y);
    float *w = malloc((size_t)(n ? n : 1) * sizeof *w);
    for (int64_t j = 0; j < n; j++) w[j] = (float)cos(1.0 + 0.7 * (double)j + 1.3 * i);
    kn_tensor *t = w ? kn_tensor_from(c, KN_F32, kn_ndim(y), kn_shape(y), w) : NULL;
    free(w);
    return t;
}

/* sum_i sum(y_i * w_i) over the f32 results, added to *loss; 0 on failure. */
static int add_loss(kn_ctx *c, kn_tensor *const *y, int ny, kn_tensor **loss)
{
    for (int i = 0; i < ny; i++) {
        if (kn_dtype_of(y[i]) != KN_F32) continue;
        kn_tensor *t = kn_sum(c, kn_mul(c, y[i], cotangent(c, y[i], i)), NULL, 0, 0);
        if (!t || !(*loss = *loss ? kn_add(c, *loss, t) : t)) return 0;
    }
    return 1;
}

/* A copy of t (NULL: NULL), which outlives t's release by kn_zero_grad. */
static kn_tensor *copy(kn_ctx *c, kn_tensor *t)
{
    size_t bytes = t ? (size_t)kn_numel(t) * kn_dtype_size(kn_dtype_of(t)) : 0;
    void *buf = malloc(bytes ? bytes : 1);
    kn_tensor *r = t && buf && kn_read(c, t, buf, bytes) == KN_OK
                       ? kn_tensor_from(c, kn_dtype_of(t), kn_ndim(t), kn_shape(t), buf) : NULL;
    free(buf);
    return r;
}

static void zero_grads(kn_ctx *c, Item *it)
{
    for (int j = 0; j < it->nx; j++)
        if (it->leaf[j]) kn_zero_grad(c, &it->x[j], 1);
}

/* Forward, loss and backward eagerly on c's eager backend into y, loss, g; the status. */
static kn_status eager(kn_ctx *c, Item *it, kn_tensor **y, int *ny, kn_tensor **loss, kn_tensor **g)
{
    zero_grads(c, it);
    *loss = NULL;
    *ny = it->k->f(c, it->x, y);
    if (*ny <= 0) return kn_last_status(c) ? kn_last_status(c) : KN_EINVAL;
    if (!add_loss(c, y, *ny, loss) || (*loss && kn_backward(c, *loss, 0) != KN_OK)) return kn_last_status(c);
    for (int j = 0; j < it->nx; j++) g[j] = it->leaf[j] ? copy(c, kn_grad(c, it->x[j])) : NULL;
    return KN_OK;
}

/* Makes item it (case k, variant v) in c, and its oracle. */
static int item_make(kn_ctx *c, Item *it, const Case *k, int v)
{
    char l[64];
    letters(k->in, l);
    memset(it, 0, sizeof *it);
    it->k = k, it->v = v;
    if (v) snprintf(it->name, sizeof it->name, "%s %c=0", k->name, l[v - 1]);
    else snprintf(it->name, sizeof it->name, "%s", k->name);
    const char *p = k->in;
    while (*p) {
        size_t len = strcspn(p, " ");
        uint64_t seed = (uint64_t)(k - cases) * 1000 + (uint64_t)it->nx * 10 + (uint64_t)v;
        if (it->nx == MAXIN) return 0;
        it->x[it->nx] = make_input(c, p, len, v ? l[v - 1] : 0, seed, &it->leaf[it->nx]);
        if (!it->x[it->nx++]) return 0;
        p += len;
        while (*p == ' ') p++;
    }
    it->status = eager(c, it, it->y, &it->ny, &it->loss, it->g);
    snprintf(it->msg, sizeof it->msg, "%s", kn_last_error(c));
    kn_clear_error(c);
    zero_grads(c, it);
    return 1;
}

/* ---- comparing with the oracle ---- */

/* got against want: both absent, or the same dtype and shape and values
 * within rtol 1e-4, atol 1e-5 (NaN equal to NaN, infinities exact). 1, or 0 with why. */
static int same(kn_ctx *c, kn_tensor *got, kn_tensor *want, const char *what, char *why, size_t wn)
{
    if (!got || !want) {
        if (got == want) return 1;
        snprintf(why, wn, "%s: %s", what, got ? "not expected" : "missing");
        return 0;
    }
    int nd = kn_ndim(want);
    if (kn_dtype_of(got) != kn_dtype_of(want) || kn_ndim(got) != nd ||
        memcmp(kn_shape(got), kn_shape(want), (size_t)nd * sizeof(int64_t))) {
        snprintf(why, wn, "%s: %s of %d dims, expected %s of %d dims (or the sizes differ)", what,
                 kn_dtype_name(kn_dtype_of(got)), kn_ndim(got), kn_dtype_name(kn_dtype_of(want)), nd);
        return 0;
    }
    int64_t n = kn_numel(want);
    double *a = malloc((size_t)(n ? n : 1) * 8), *b = malloc((size_t)(n ? n : 1) * 8);
    int ok = a && b && kn_read(c, kn_to(c, got, KN_F64), a, (size_t)n * 8) == KN_OK &&
             kn_read(c, kn_to(c, want, KN_F64), b, (size_t)n * 8) == KN_OK;
    if (!ok) snprintf(why, wn, "%s: cannot read: %s", what, kn_last_error(c));
    for (int64_t i = 0; ok && i < n; i++)
        if (!test_close(a[i], b[i], 1e-4, 1e-5)) {
            snprintf(why, wn, "%s: element %lld is %.9g, expected %.9g", what, (long long)i, a[i], b[i]);
            ok = 0;
        }
    free(a);
    free(b);
    return ok;
}

/* A loss (one element) against eager's: a sum of many f32 products, which
 * a compiled program adds in another order (in f32, eager in f64), so the
 * tolerance grows with the count of terms. */
static int same_loss(kn_ctx *c, kn_tensor *got, const Item *it, char *why, size_t wn)
{
    int64_t terms = 0;
    double a = NAN, b = NAN;
    for (int i = 0; i < it->ny; i++) terms += kn_dtype_of(it->y[i]) == KN_F32 ? kn_numel(it->y[i]) : 0;
    if (!got || kn_item(c, got, &a) != KN_OK || kn_item(c, it->loss, &b) != KN_OK ||
        !test_close(a, b, 1e-4, 1e-5 + 1e-7 * (double)terms)) {
        snprintf(why, wn, "the loss is %.9g, expected %.9g (%lld terms)", a, b, (long long)terms);
        return 0;
    }
    return 1;
}

static int same_grads(kn_ctx *c, const Item *it, char *why, size_t wn)
{
    char what[32];
    for (int j = 0; j < it->nx; j++) {
        if (!it->leaf[j]) continue;
        snprintf(what, sizeof what, "gradient of input %d", j);
        if (!same(c, kn_grad(c, it->x[j]), it->g[j], what, why, wn)) return 0;
    }
    return 1;
}

static int same_results(kn_ctx *c, const Item *it, kn_tensor *const *y, int ny, char *why, size_t wn)
{
    char what[32];
    if (ny != it->ny) {
        snprintf(why, wn, "%d results, expected %d", ny, it->ny);
        return 0;
    }
    for (int i = 0; i < ny; i++) {
        snprintf(what, sizeof what, "result %d", i);
        if (!same(c, y[i], it->y[i], what, why, wn)) return 0;
    }
    return 1;
}

/* Status s and message msg are eager's error: the same status and words,
 * but for the public op that reports it (a compiled program's checks fail
 * in kn_call). */
/* msg (a compiled call's: "kn_call: " and eager's message, or another op's name before eager's text) says
 * what eager's it->msg says */
static int same_error(kn_status s, const char *msg, const Item *it)
{
    const char *b = strstr(it->msg, ": ");
    if (s != it->status || !b) return 0;
    if (strncmp(msg, "kn_call: ", 9) == 0 && strcmp(msg + 9, it->msg) == 0) return 1;
    const char *a = strstr(msg, ": ");
    return a && strcmp(a, b) == 0;
}

/* ---- compiled programs of several items ---- */

enum { M_FORWARD, M_REGION, M_STEP, NMODES };
static const char *const mode_name[NMODES] = {"forward", "region", "step"};
static const char *const be_name[3] = {"c", "tcc", "interp"};

typedef struct {
    Item *it[MAXITEMS];
    int n, mode;
    int overhead; /* kn_compile's reduce-overhead mode: three calls, the last one checked */
    kn_tensor *params[MAXITEMS * MAXIN];
    int nparams;
} Prog;

static kn_status body(kn_ctx *c, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Prog *p = user;
    int ii = 0, pi = 0, oi = 0;
    kn_tensor *loss = NULL;
    (void)nin;
    for (int t = 0; t < p->n; t++) {
        Item *it = p->it[t];
        kn_tensor *x[MAXIN], *y[MAXY];
        for (int j = 0; j < it->nx; j++) x[j] = p->mode == M_STEP && it->leaf[j] ? p->params[pi++] : in[ii++];
        int ny = it->k->f(c, x, y);
        if (ny <= 0) return kn_last_status(c) ? kn_last_status(c) : KN_EINVAL;
        if (p->mode != M_FORWARD && !add_loss(c, y, ny, &loss)) return kn_last_status(c);
        for (int i = 0; p->mode == M_FORWARD && i < ny && oi < nout; i++) out[oi++] = y[i];
    }
    if (p->mode == M_STEP && loss && kn_backward(c, loss, 0) != KN_OK) return kn_last_status(c);
    if (p->mode != M_FORWARD) out[0] = loss ? loss : kn_scalar(c, 0);
    return KN_OK;
}

/* Runs the items of p as one compiled function on backend be in mode p->mode
 * and CHECKs each against its oracle. */
static void run_prog(kn_ctx *c, Prog *p, kn_backend be)
{
    kn_tensor *in[MAXIO], *out[MAXIO] = {0};
    int nin = 0, nout = 0, mode = p->mode;
    char why[WHYLEN] = "";
    p->nparams = 0;
    for (int t = 0; t < p->n; t++) {
        Item *it = p->it[t];
        zero_grads(c, it);
        for (int j = 0; j < it->nx; j++) {
            if (it->leaf[j]) kn_requires_grad(c, it->x[j], mode != M_FORWARD);
            if (mode == M_STEP && it->leaf[j]) p->params[p->nparams++] = it->x[j];
            else in[nin++] = it->x[j];
        }
        nout += it->status == KN_OK ? it->ny : 1; /* a variant that fails alone: its first result */
    }
    if (mode != M_FORWARD) nout = 1;
    if (verbose) printf("    %s on %s\n", mode_name[mode], be_name[be]), fflush(stdout);
    kn_compile_opts o = {.backend = be, .params = p->params, .nparams = p->nparams, .name = "empty",
                         .mode = p->overhead ? KN_MODE_REDUCE_OVERHEAD : KN_MODE_DEFAULT};
    kn_fn *f = kn_compile(c, body, p, &o);
    kn_scope_begin(c);
    kn_status s = f ? kn_call(f, in, nin, out, nout) : kn_last_status(c);
    for (int i = 0; i < 2 && p->overhead && s == KN_OK; i++) s = kn_call(f, in, nin, out, nout);
    char msg[256];
    snprintf(msg, sizeof msg, "%s", kn_last_error(c));
    kn_clear_error(c);
    kn_fn_info info;
    int on_be = f && kn_fn_stats(f, &info) == KN_OK && info.backend && strcmp(info.backend, be_name[be]) == 0;
    if (verbose && on_be && info.interp_steps) printf("      %d interpreter steps\n", info.interp_steps);
    if (s == KN_OK && !on_be && info.backend && port_jit_available(be == KN_BACKEND_C ? PORT_CC : PORT_TCC))
        snprintf(why, sizeof why, "ran on %s", info.backend); /* (no backend: nothing to compute) */
    if (s == KN_OK && mode == M_REGION && kn_backward(c, out[0], 0) != KN_OK) /* the compiled forward's backward */
        snprintf(why, sizeof why, "kn_backward: %s", kn_last_error(c));
    kn_tensor *const *y = out;
    for (int t = 0; t < p->n; t++) {
        Item *it = p->it[t];
        char iwhy[WHYLEN];
        int ok;
        snprintf(iwhy, sizeof iwhy, "%s", why);
        if (it->status != KN_OK) /* the same error as eager */
            ok = same_error(s, msg, it);
        else if (s != KN_OK)
            ok = 0, snprintf(iwhy, sizeof iwhy, "failed: %s", msg);
        else if (why[0])
            ok = 0;
        else if (mode != M_FORWARD) /* the loss of a lone item is its own */
            ok = (p->n > 1 || same_loss(c, out[0], it, iwhy, sizeof iwhy)) &&
                 same_grads(c, it, iwhy, sizeof iwhy);
        else
            ok = same_results(c, it, y, it->ny, iwhy, sizeof iwhy);
        if (it->status != KN_OK && !ok)
            snprintf(iwhy, sizeof iwhy, "expected eager's error \"%s\" (status %d), got \"%s\" (status %d)", it->msg,
                     (int)it->status, msg, (int)s);
        CHECK_MSG(ok, "%s (%s%s, backend %s): %s", it->name, mode_name[mode], p->overhead ? ", reduce-overhead" : "",
                  be_name[be], iwhy);
        if (s == KN_OK && mode == M_FORWARD) y += it->ny;
        zero_grads(c, it);
    }
    kn_scope_end(c);
    kn_fn_free(f);
    for (int t = 0; t < p->n; t++)
        for (int j = 0; j < p->it[t]->nx; j++)
            if (p->it[t]->leaf[j]) kn_requires_grad(c, p->it[t]->x[j], 1);
}

/* Eager ops on backend be (kernels compiled per op) against the interpreter's. */
static void run_eager(kn_ctx *c, Item *it, kn_backend be)
{
    kn_tensor *y[MAXY], *loss, *g[MAXIN];
    int ny = 0, ok;
    char why[WHYLEN] = "";
    kn_set_eager_backend(c, be);
    kn_scope_begin(c);
    kn_status s = eager(c, it, y, &ny, &loss, g);
    if (it->status != KN_OK || s != KN_OK)
        ok = same_error(s, kn_last_error(c), it),
        snprintf(why, sizeof why, "status %d \"%s\", expected %d \"%s\"", (int)s, kn_last_error(c), (int)it->status,
                 it->msg);
    else
        ok = same_results(c, it, y, ny, why, sizeof why) && same_grads(c, it, why, sizeof why);
    kn_clear_error(c);
    CHECK_MSG(ok, "%s (eager, backend %s): %s", it->name, be_name[be], why);
    zero_grads(c, it);
    kn_scope_end(c);
    kn_set_eager_backend(c, KN_BACKEND_INTERP);
}

/* ---- the sweep ---- */

static int nvariants(const Case *k)
{
    char l[64];
    return 1 + letters(k->in, l);
}

static int wanted(const Case *k)
{
    return !filter || strstr(k->name, filter);
}

/* Each variant on its own, on the interpreter and tcc, compiled and eager. */
static void sweep_each(int have_tcc, int have_c)
{
    for (int i = 0; i < NCASES; i++) {
        if (!wanted(&cases[i])) continue;
        for (int v = 0; v < nvariants(&cases[i]); v++) {
            kn_ctx *c = kn_ctx_new(NULL);
            Item it;
            if (!c || !item_make(c, &it, &cases[i], v)) {
                CHECK_MSG(0, "%s variant %d: cannot make the inputs", cases[i].name, v);
                kn_ctx_free(c);
                continue;
            }
            if (verbose) printf("  %s: eager %s\n", it.name, it.status ? it.msg : "ok"), fflush(stdout);
            Prog p = {.it = {&it}, .n = 1};
            for (p.mode = 0; p.mode < NMODES; p.mode++) {
                if (p.mode != M_FORWARD && it.status == KN_OK && !it.loss) continue; /* nothing to differentiate */
                run_prog(c, &p, KN_BACKEND_INTERP);
                if (have_tcc) run_prog(c, &p, KN_BACKEND_TCC);
            }
            if (have_tcc) { /* the forward in reduce-overhead mode: outputs the function owns */
                p.mode = M_FORWARD, p.overhead = 1;
                run_prog(c, &p, KN_BACKEND_TCC);
                run_eager(c, &it, KN_BACKEND_TCC);
            }
            if (have_c && v > 0) run_eager(c, &it, KN_BACKEND_C); /* variant 0 would compile every op */
            kn_ctx_free(c);
        }
    }
}

/* Backend c: variants packed into programs up to the limit on inputs and
 * outputs; variants that fail eagerly each alone (they fail while tracing). */
static void sweep_c(void)
{
    static Item items[NCASES * NVARIANTS];
    int n = 0;
    kn_ctx *c = kn_ctx_new(NULL);
    if (!c) return;
    for (int i = 0; i < NCASES; i++)
        for (int v = 0; wanted(&cases[i]) && v < nvariants(&cases[i]) && v < NVARIANTS; v++)
            if (item_make(c, &items[n], &cases[i], v)) n++;
            else CHECK_MSG(0, "%s variant %d: cannot make the inputs", cases[i].name, v);
    for (int mode = 0; mode < NMODES; mode++) {
        Prog p = {.mode = mode};
        int nin = 0, nout = 0;
        for (int t = 0; t <= n; t++) {
            Item *it = t < n ? &items[t] : NULL;
            if (it && mode != M_FORWARD && it->status == KN_OK && !it->loss) continue;
            int alone = it && it->status != KN_OK;
            if (p.n && (!it || alone || nin + it->nx > MAXIO || nout + it->ny > MAXIO || p.n == MAXITEMS)) {
                if (verbose) printf("  c %s: %d variants from %s\n", mode_name[mode], p.n, p.it[0]->name);
                run_prog(c, &p, KN_BACKEND_C);
                p.n = nin = nout = 0;
            }
            if (!it) break;
            p.it[p.n++] = it;
            nin += it->nx, nout += it->ny;
            if (alone) {
                run_prog(c, &p, KN_BACKEND_C);
                p.n = nin = nout = 0;
            }
        }
    }
    kn_ctx_free(c);
}

/* ---- a whole training step ---- */

/* A two-layer MLP (n, f) -> (n, h) -> (n, 3) with cross_entropy (mean: NaN
 * for an empty batch, as PyTorch) and an optimizer step. */
typedef struct {
    kn_tensor *p[4]; /* w1 (h, f), b1 (h), w2 (3, h), b2 (3) */
    kn_optim *opt;
} Mlp;

static kn_tensor *mlp_loss(kn_ctx *c, const Mlp *m, kn_tensor *x, kn_tensor *target)
{
    kn_tensor *h = kn_relu(c, kn_linear(c, x, m->p[0], m->p[1]));
    return kn_cross_entropy(c, kn_linear(c, h, m->p[2], m->p[3]), target, &ce_mean);
}

static kn_status mlp_step(kn_ctx *c, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Mlp *m = user;
    (void)nin;
    (void)nout;
    kn_optim_zero_grad(m->opt);
    out[0] = mlp_loss(c, m, in[0], in[1]);
    if (!out[0] || kn_backward(c, out[0], 0) != KN_OK || kn_optim_step(m->opt) != KN_OK) return kn_last_status(c);
    return KN_OK;
}

/* Two steps of Adam (sgd: SGD with momentum) on backend be against two eager steps, at sizes n, f, h
 * (single digits: make_input's shapes). */
static void train_case(kn_backend be, int sgd, int n, int f, int h)
{
    kn_ctx *c = kn_ctx_new(NULL);
    Mlp m[2]; /* 0 eager, 1 compiled, from the same values (make_input's seeds) */
    char tok[4][8], why[WHYLEN] = "";
    int leaf, ok = 1;
    const kn_sgd_opts so = {.lr = 0.1, .momentum = 0.9};
    const kn_adam_opts ao = {.lr = 0.01};
    snprintf(tok[0], 8, "%d%d", h, f), snprintf(tok[1], 8, "%d", h), snprintf(tok[2], 8, "3%d", h);
    snprintf(tok[3], 8, "3");
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 4; i++)
            m[k].p[i] = kn_param(c, make_input(c, tok[i], strlen(tok[i]), 0, (uint64_t)i, &leaf));
        m[k].opt = sgd ? kn_sgd(c, m[k].p, 4, &so) : kn_adam(c, m[k].p, 4, &ao);
    }
    snprintf(tok[0], 8, "%d%d", n, f), snprintf(tok[1], 8, "i:%d<3", n);
    kn_tensor *in[2] = {make_input(c, tok[0], 2, 0, 7, &leaf), make_input(c, tok[1], 5, 0, 8, &leaf)};
    kn_requires_grad(c, in[0], 0);
    kn_compile_opts o = {.backend = be, .params = m[1].p, .nparams = 4, .name = "mlp"};
    kn_fn *fn = kn_compile(c, mlp_step, &m[1], &o);
    for (int step = 0; step < 2 && ok; step++) {
        kn_tensor *got = NULL, *want;
        kn_scope_begin(c);
        ok = mlp_step(c, &m[0], in, 2, &want, 1) == KN_OK;
        if (!ok) snprintf(why, sizeof why, "eager step %d: %s", step, kn_last_error(c));
        else if (kn_call(fn, in, 2, &got, 1) != KN_OK)
            ok = 0, snprintf(why, sizeof why, "step %d: %s", step, kn_last_error(c));
        ok = ok && same(c, got, want, "the loss", why, sizeof why);
        for (int i = 0; i < 4 && ok; i++) ok = same(c, m[1].p[i], m[0].p[i], "a parameter", why, sizeof why);
        kn_scope_end(c);
    }
    CHECK_MSG(ok, "mlp training step with %s, n=%d f=%d h=%d (backend %s): %s", sgd ? "sgd" : "adam", n, f, h,
              be_name[be], why);
    kn_fn_free(fn);
    kn_optim_free(m[0].opt);
    kn_optim_free(m[1].opt);
    kn_ctx_free(c);
}

/* Training steps with an empty batch, no features, no hidden units. */
static void train(int have_tcc, int have_c)
{
    static const int sz[4][3] = {{3, 4, 5}, {0, 4, 5}, {3, 0, 5}, {3, 4, 0}}; /* n, f, h */
    if (filter && !strstr("mlp", filter)) return;
    for (int be = 0; be < 3; be++) {
        if ((be == KN_BACKEND_C && !have_c) || (be == KN_BACKEND_TCC && !have_tcc)) continue;
        for (int i = 0; i < 4; i++)
            for (int sgd = 0; sgd < 2; sgd++) train_case((kn_backend)be, sgd, sz[i][0], sz[i][1], sz[i][2]);
    }
}

/* The comparison catches one wrong value, and a wrong shape. */
static void selftest(void)
{
    for (int i = 0; i < NCASES; i++) /* sweep_c's room */
        CHECK_MSG(nvariants(&cases[i]) <= NVARIANTS, "case %s has more than %d letters", cases[i].name, NVARIANTS - 1);
    kn_ctx *c = kn_ctx_new(NULL);
    Item it;
    char why[WHYLEN];
    CHECK(item_make(c, &it, &cases[0], 0) && it.status == KN_OK && it.ny == 1);
    kn_tensor *y = kn_contiguous(c, kn_add(c, it.y[0], kn_scalar(c, 0)));
    float v[6];
    CHECK(kn_read(c, y, v, sizeof v) == KN_OK && same(c, y, it.y[0], "y", why, sizeof why));
    v[4] += 1e-3f;
    CHECK(!same(c, kn_tensor_from(c, KN_F32, 2, kn_shape(y), v), it.y[0], "y", why, sizeof why));
    CHECK(!same(c, kn_reshape(c, y, 2, (int64_t[]){3, 2}), it.y[0], "y", why, sizeof why));
    CHECK(!same(c, kn_zeros(c, KN_F32, 2, (int64_t[]){0, 3}), it.y[0], "y", why, sizeof why));
    kn_ctx_free(c);
}

/* ---- a fresh cache directory for backend c ---- */

#if HAVE_POSIX
static char cache_dir[512];

static void remove_dir(const char *dir)
{
    char path[1024];
    struct dirent *e;
    DIR *d = opendir(dir);
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (unlink(path)) remove_dir(path);
        }
    if (d) closedir(d);
    rmdir(dir);
}

static int fresh_cache(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(cache_dir, sizeof cache_dir, "%s/kiln-test-empty-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(cache_dir) && setenv("KILN_CACHE_DIR", cache_dir, 1) == 0;
}
#endif

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0) verbose = 1;
        else filter = argv[i];
    }
#if HAVE_POSIX
    CHECK_MSG(fresh_cache(), "cannot make a fresh KILN_CACHE_DIR under $TMPDIR or /tmp");
#endif
    int have_tcc = port_jit_available(PORT_TCC), have_c = port_jit_available(PORT_CC);
    if (!have_tcc) printf("SKIP test_empty backend tcc: no TinyCC on this platform (%s)\n", port_name());
    if (!have_c) printf("SKIP test_empty backend c: no system compiler on this platform (%s)\n", port_name());
    selftest();
    sweep_each(have_tcc, have_c);
    if (have_c) sweep_c();
    train(have_tcc, have_c);
#if HAVE_POSIX
    if (cache_dir[0]) remove_dir(cache_dir);
#endif
    TEST_END("test_empty");
}
