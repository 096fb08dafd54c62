/*
 * composite.h — the composite ops, one row each, in docs/DESIGN.md's order: the
 * one list that `kiln ops`, `kiln gradcheck`, the tests and the library read.
 *
 *     X(NAME, EXAMPLE, GRAD)
 *
 * NAME     the public op kn_NAME. The library keeps the names (composite.c):
 *          an index-out-of-range error in a primitive names the composite
 *          that made it (Params.origin).
 * EXAMPLE  a call of kn_NAME on the example inputs of src/cli/opslist.c (ctx,
 *          e->m, e->x4, ... and the options co, po there), which `kiln ops`
 *          traces to list the primitives NAME decomposes into.
 * GRAD     its check in src/cli/gradcheck.c against finite differences:
 *            UN(fn, dist)         a unary op: gradcheck's unary cases
 *            UN0(fn, dist)        the same, and the gradient must be exactly 0
 *            BIN(fn, d0, d1)      a binary op: the binary cases
 *            BODY(fn, ncases)     fn(ctx, case, v) builds case v of ncases
 *            NONE(why)            no gradient to check
 *          dist is the distribution of the inputs (gradcheck.c's Dist).
 *
 * Only the reader of a column expands it, so the library compiles the names
 * alone. Adding a composite is one row here (and a BODY function in
 * gradcheck.c where the standard cases do not fit).
 */
#ifndef KN_COMPOSITE_H
#define KN_COMPOSITE_H

#define KN_COMPOSITES(X) \
    X(linear, kn_linear(ctx, e->m, e->wt, NULL), BODY(t_linear, 3)) \
    X(matmul, kn_matmul(ctx, e->m, e->m2), BODY(t_matmul, 5)) \
    X(bmm, kn_bmm(ctx, e->b3, e->bt), BODY(t_bmm, 2)) \
    X(conv1d, kn_conv1d(ctx, e->b3, e->w1, NULL, &co), BODY(t_conv1d, 2)) \
    X(conv2d, kn_conv2d(ctx, e->x4, e->w2, NULL, &co), BODY(t_conv2d, 6)) \
    X(conv_transpose2d, kn_conv_transpose2d(ctx, e->x4, e->wT, NULL, &co), BODY(t_conv_transpose2d, 3)) \
    X(max_pool2d, kn_max_pool2d(ctx, e->x4, &po), BODY(t_max_pool2d, 4)) \
    X(avg_pool2d, kn_avg_pool2d(ctx, e->x4, &po), BODY(t_avg_pool2d, 4)) \
    X(adaptive_avg_pool2d, kn_adaptive_avg_pool2d(ctx, e->x4, 3, 2), BODY(t_adaptive_avg_pool2d, 3)) \
    X(batch_norm, kn_batch_norm(ctx, e->x4, NULL, NULL, NULL, NULL, 1, 0, 0), BODY(t_batch_norm, 3)) \
    X(layer_norm, kn_layer_norm(ctx, e->m, 1, s4, NULL, NULL, 0), BODY(t_layer_norm, 4)) \
    X(group_norm, kn_group_norm(ctx, e->x4, 3, NULL, NULL, 0), BODY(t_group_norm, 2)) \
    X(rms_norm, kn_rms_norm(ctx, e->m, 1, s4, NULL, 0), BODY(t_rms_norm, 3)) \
    X(relu, kn_relu(ctx, e->m), UN(kn_relu, D_KINK)) \
    X(leaky_relu, kn_leaky_relu(ctx, e->m, 0.01), BODY(t_leaky_relu, 2)) \
    X(gelu, kn_gelu(ctx, e->m, 1), BODY(t_gelu, 2)) \
    X(silu, kn_silu(ctx, e->m), UN(kn_silu, D_NORMAL)) \
    X(sigmoid, kn_sigmoid(ctx, e->m), UN(kn_sigmoid, D_NORMAL)) \
    X(tanh, kn_tanh(ctx, e->m), UN(kn_tanh, D_NORMAL)) \
    X(softplus, kn_softplus(ctx, e->m, 0, 0), BODY(t_softplus, 2)) \
    X(hardswish, kn_hardswish(ctx, e->m), UN(kn_hardswish, D_KINK)) \
    X(elu, kn_elu(ctx, e->m, 1.0), BODY(t_elu, 2)) \
    X(softmax, kn_softmax(ctx, e->m, -1), BODY(t_softmax, 3)) \
    X(log_softmax, kn_log_softmax(ctx, e->m, -1), BODY(t_log_softmax, 4)) \
    X(cross_entropy, kn_cross_entropy(ctx, e->cls, e->idx, NULL), BODY(t_cross_entropy, 6)) \
    X(nll_loss, kn_nll_loss(ctx, e->cls, e->idx, NULL), BODY(t_nll_loss, 3)) \
    X(mse_loss, kn_mse_loss(ctx, e->m, e->m, KN_REDUCE_MEAN), BODY(t_mse_loss, 3)) \
    X(l1_loss, kn_l1_loss(ctx, e->m, e->m, KN_REDUCE_MEAN), BODY(t_l1_loss, 3)) \
    X(binary_cross_entropy, kn_binary_cross_entropy(ctx, e->p, e->p, NULL, 0), BODY(t_binary_cross_entropy, 3)) \
    X(binary_cross_entropy_with_logits, kn_binary_cross_entropy_with_logits(ctx, e->m, e->m, NULL, NULL, 0), \
      BODY(t_binary_cross_entropy_with_logits, 3)) \
    X(embedding, kn_embedding(ctx, e->m, e->idx), BODY(t_embedding, 2)) \
    X(dropout, kn_dropout(ctx, e->m, 0.5, 1), BODY(t_dropout, 3)) \
    X(scaled_dot_product_attention, kn_scaled_dot_product_attention(ctx, e->b3, e->b3, e->b3, NULL, 1, 0), \
      BODY(t_scaled_dot_product_attention, 4)) \
    X(mean, kn_mean(ctx, e->m, &d1, 1, 0), BODY(t_mean, 3)) \
    X(var, kn_var(ctx, e->m, &d1, 1, 1, 0), BODY(t_var, 3)) \
    X(std, kn_std(ctx, e->m, &d1, 1, 1, 0), BODY(t_std, 3)) \
    X(sum, kn_sum(ctx, e->m, d01, 2, 0), BODY(t_sum, 3)) \
    X(prod, kn_prod(ctx, e->m, 1, 0), BODY(t_prod, 3)) \
    X(amax, kn_amax(ctx, e->m, &d1, 1, 0), BODY(t_amax, 3)) \
    X(amin, kn_amin(ctx, e->m, &d1, 1, 0), BODY(t_amin, 3)) \
    X(argmax, kn_argmax(ctx, e->m, 1, 0), NONE("integer results")) \
    X(argmin, kn_argmin(ctx, e->m, 1, 0), NONE("integer results")) \
    X(logsumexp, kn_logsumexp(ctx, e->m, &d1, 1, 0), BODY(t_logsumexp, 3)) \
    X(cumsum, kn_cumsum(ctx, e->m, 1), BODY(t_cumsum, 3)) \
    X(clamp, kn_clamp(ctx, e->m, -1, 1), BODY(t_clamp, 3)) \
    X(square, kn_square(ctx, e->m), UN(kn_square, D_NORMAL)) \
    X(rsqrt, kn_rsqrt(ctx, e->m), UN(kn_rsqrt, D_POS)) \
    X(reciprocal, kn_reciprocal(ctx, e->m), UN(kn_reciprocal, D_POS)) \
    X(transpose, kn_transpose(ctx, e->m, 0, 1), BODY(t_transpose, 2)) \
    X(view, kn_view(ctx, e->m, 1, s12), BODY(t_view, 2)) \
    X(reshape, kn_reshape(ctx, e->mt, 1, s12), BODY(t_reshape, 2)) \
    X(flatten, kn_flatten(ctx, e->x4, 1, -1), BODY(t_flatten, 2)) \
    X(squeeze, kn_squeeze(ctx, e->m1, 0), BODY(t_squeeze, 2)) \
    X(unsqueeze, kn_unsqueeze(ctx, e->m, 1), BODY(t_unsqueeze, 2)) \
    X(cat, kn_cat(ctx, (kn_tensor *[]){e->m, e->m}, 2, 0), BODY(t_cat, 2)) \
    X(stack, kn_stack(ctx, (kn_tensor *[]){e->m, e->m}, 2, 0), BODY(t_stack, 2)) \
    X(split, kn_split(ctx, e->m, 2, 1, pieces, 4) > 0 ? pieces[1] : NULL, BODY(t_split, 2)) \
    X(chunk, kn_chunk(ctx, e->m, 2, 1, pieces, 4) > 0 ? pieces[1] : NULL, BODY(t_chunk, 2)) \
    X(narrow, kn_narrow(ctx, e->m, 1, 1, 2), BODY(t_narrow, 2)) \
    X(index_select, kn_index_select(ctx, e->m, 0, e->idx), BODY(t_index_select, 2)) \
    X(where, kn_where(ctx, e->mask, e->m, e->p), BODY(t_where, 3)) \
    X(masked_fill, kn_masked_fill(ctx, e->m, e->mask, 0.0), BODY(t_masked_fill, 2)) \
    X(triu, kn_triu(ctx, e->m, 0), BODY(t_triu, 3)) \
    X(tril, kn_tril(ctx, e->m, 0), BODY(t_tril, 3)) \
    X(one_hot, kn_one_hot(ctx, e->idx, 3), NONE("integer results")) \
    X(arange, kn_arange(ctx, KN_F32, 0, 5, 1), NONE("no tensor inputs")) \
    X(zeros, kn_zeros(ctx, KN_F32, 2, s34), NONE("no tensor inputs")) \
    X(ones, kn_ones(ctx, KN_F32, 2, s34), NONE("no tensor inputs")) \
    X(full, kn_full(ctx, KN_F32, 2, s34, 2.5), NONE("no tensor inputs")) \
    X(randn, kn_randn(ctx, KN_F32, 2, s34), NONE("no tensor inputs")) \
    X(rand, kn_rand(ctx, KN_F32, 2, s34), NONE("no tensor inputs")) \
    X(eq, kn_eq(ctx, e->m, e->m), NONE("bool results")) \
    X(ne, kn_ne(ctx, e->m, e->m), NONE("bool results")) \
    X(lt, kn_lt(ctx, e->m, e->m), NONE("bool results")) \
    X(le, kn_le(ctx, e->m, e->m), NONE("bool results")) \
    X(gt, kn_gt(ctx, e->m, e->m), NONE("bool results")) \
    X(ge, kn_ge(ctx, e->m, e->m), NONE("bool results")) \
    X(logical_and, kn_logical_and(ctx, e->mask, e->mask), NONE("bool results")) \
    X(logical_or, kn_logical_or(ctx, e->mask, e->mask), NONE("bool results")) \
    X(logical_xor, kn_logical_xor(ctx, e->mask, e->mask), NONE("bool results")) \
    X(logical_not, kn_logical_not(ctx, e->mask), NONE("bool results")) \
    X(abs, kn_abs(ctx, e->m), UN(kn_abs, D_KINK)) \
    X(sign, kn_sign(ctx, e->m), UN0(kn_sign, D_FRAC)) \
    X(minimum, kn_minimum(ctx, e->m, e->m), BIN(kn_minimum, D_KINK, D_KINK)) \
    X(maximum, kn_maximum(ctx, e->m, e->m), BIN(kn_maximum, D_KINK, D_KINK)) \
    X(pow, kn_pow(ctx, e->m, e->two), BIN(kn_pow, D_POS, D_NORMAL)) \
    X(fmod, kn_fmod(ctx, e->m, e->two), BIN(kn_fmod, D_FRAC, D_POS)) \
    X(floor, kn_floor(ctx, e->m), UN0(kn_floor, D_FRAC)) \
    X(ceil, kn_ceil(ctx, e->m), UN0(kn_ceil, D_FRAC)) \
    X(round, kn_round(ctx, e->m), UN0(kn_round, D_FRAC)) \
    X(add, kn_add(ctx, e->m, e->m), BIN(kn_add, D_NORMAL, D_NORMAL)) \
    X(sub, kn_sub(ctx, e->m, e->m), BIN(kn_sub, D_NORMAL, D_NORMAL)) \
    X(mul, kn_mul(ctx, e->m, e->m), BIN(kn_mul, D_NORMAL, D_NORMAL)) \
    X(div, kn_div(ctx, e->m, e->m), BIN(kn_div, D_NORMAL, D_POS)) \
    X(neg, kn_neg(ctx, e->m), UN(kn_neg, D_NORMAL)) \
    X(exp, kn_exp(ctx, e->m), UN(kn_exp, D_NORMAL)) \
    X(log, kn_log(ctx, e->m), UN(kn_log, D_POS)) \
    X(sqrt, kn_sqrt(ctx, e->m), UN(kn_sqrt, D_POS)) \
    X(sin, kn_sin(ctx, e->m), UN(kn_sin, D_NORMAL)) \
    X(cos, kn_cos(ctx, e->m), UN(kn_cos, D_NORMAL)) \
    X(erf, kn_erf(ctx, e->m), UN(kn_erf, D_NORMAL)) \
    X(permute, kn_permute(ctx, e->m, perm), BODY(t_permute, 2)) \
    X(expand, kn_expand(ctx, e->m1, 3, (int64_t[]){2, 3, 4}), BODY(t_expand, 2)) \
    X(contiguous, kn_contiguous(ctx, e->mt), UN(kn_contiguous, D_NORMAL)) \
    X(slice, kn_slice(ctx, e->m, 1, 0, 4, 2), BODY(t_slice, 3)) \
    X(pad, kn_pad(ctx, e->m, 2, pad2, 0.0), BODY(t_pad, 2)) \
    X(gather, kn_gather(ctx, e->m, 1, e->i31), BODY(t_gather, 2)) \
    X(scatter_add, kn_scatter_add(ctx, e->m, 1, e->i31, e->m), BODY(t_scatter_add, 2)) \
    X(to, kn_to(ctx, e->m, KN_F64), BODY(t_to, 2))

#define COMP_ENUM_(name, example, grad) COMP_##name,
typedef enum { KN_COMPOSITES(COMP_ENUM_) COMP_COUNT } Composite; /* COMP_linear, ... */
#undef COMP_ENUM_

const char *composite_name(int i);        /* the i-th composite's name; NULL past the end */
int composite_find(const char *public_op); /* "kn_NAME": 1 + NAME's index, or 0 */

#endif
