/* examples/first.c — the README's first program, built and run by `make demo`. */
#include <stdio.h>
#include "kiln.h"

int main(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    int64_t xs[2] = {4, 3}, ws[2] = {2, 3};
    kn_tensor *x = kn_randn(ctx, KN_F32, 2, xs);          // (4, 3)
    kn_tensor *w = kn_randn(ctx, KN_F32, 2, ws);          // (2, 3)
    kn_tensor *y = kn_softmax(ctx, kn_relu(ctx, kn_linear(ctx, x, w, NULL)), -1);
    float out[8];
    if (!y || kn_read(ctx, y, out, sizeof out) != KN_OK) {
        fprintf(stderr, "%s\n", kn_last_error(ctx));      // names the op, operand and dim
        return 1;
    }
    for (int i = 0; i < 4; i++) printf("%.4f %.4f\n", out[2 * i], out[2 * i + 1]);
    kn_ctx_free(ctx);                                     // frees every tensor
    return 0;
}
