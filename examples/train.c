/* examples/train.c — the README's training loop, run by `make demo`: a
 * linear classifier on two Gaussian blobs, trained eagerly with Adam. */
#include <math.h>
#include <stdio.h>

#include "kiln.h"

int main(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t xs[2] = {64, 2}, ws[2] = {2, 2}, n = 64;
    /* x: 32 points around (-1, -1) labelled 0, 32 around (1, 1) labelled 1 */
    float xv[128];
    int64_t lv[64];
    kn_tensor *noise = kn_randn(ctx, KN_F32, 2, xs);
    kn_read(ctx, noise, xv, sizeof xv);
    for (int i = 0; i < 64; i++) {
        lv[i] = i >= 32;
        xv[2 * i] = 0.5f * xv[2 * i] + (i >= 32 ? 1.0f : -1.0f);
        xv[2 * i + 1] = 0.5f * xv[2 * i + 1] + (i >= 32 ? 1.0f : -1.0f);
    }
    kn_tensor *x = kn_tensor_from(ctx, KN_F32, 2, xs, xv), *labels = kn_tensor_from(ctx, KN_I64, 1, &n, lv);

    kn_tensor *w = kn_param(ctx, kn_kaiming_uniform(ctx, KN_F32, 2, ws, sqrt(5.0)));
    kn_adam_opts ao = {0.1, 0, 0, 0, 0, 0, 0};
    kn_optim *opt = kn_adam(ctx, &w, 1, &ao);
    double first = 0, last = 0;
    for (int step = 0; step < 100; step++) {
        kn_scope_begin(ctx);
        kn_tensor *loss = kn_cross_entropy(ctx, kn_linear(ctx, x, w, NULL), labels, NULL);
        kn_optim_zero_grad(opt);
        if (!loss || kn_backward(ctx, loss, 0) != KN_OK || kn_optim_step(opt) != KN_OK) {
            fprintf(stderr, "%s\n", kn_last_error(ctx));
            return 1;
        }
        kn_item(ctx, loss, step ? &last : &first);
        kn_scope_end(ctx);
    }
    printf("train: cross-entropy %.4f -> %.4f after 100 Adam steps (%zu tensors live)\n", first, last,
           kn_live_tensors(ctx));
    kn_optim_free(opt);
    kn_ctx_free(ctx);
    return last < first ? 0 : 1;
}
