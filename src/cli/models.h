/*
 * models.h — the workloads of docs/BENCHMARKS.md (mlp, cnn = CIFAR
 * ResNet-18, gpt) and the small CNN that `kiln train` fits to Fashion-MNIST,
 * written against the public API, so the same code runs eagerly and inside
 * kn_compile (models.c).
 *
 *     ModelCfg c = {0};                         // zero: docs/BENCHMARKS.md's sizes
 *     Model *m = model_new(ctx, "mlp", &c);     // parameters kaiming-uniform from ctx's seed
 *     kn_tensor *x, *y;
 *     model_batch(ctx, m, 128, &x, &y);         // a synthetic batch of the right shapes
 *     kn_tensor *loss = model_loss(ctx, m, x, y, 1);
 *
 * Parameters and buffers are kept tensors owned by the model (model_free
 * releases them); params are marked with kn_param. Names follow PyTorch's
 * state_dict keys ("fc1.weight", "layers.0.ln1.bias", "bn1.running_mean"),
 * so kn_save files read like torch's.
 */
#ifndef KN_MODELS_H
#define KN_MODELS_H

#include "../kiln.h"

typedef struct {
    /* gpt: 0 means docs/BENCHMARKS.md's size */
    int64_t vocab, context, d, layers, heads;
    /* cnn: channels of the first stage (0: 64); smallcnn: of the first conv (0: 16) */
    int64_t width;
    /* input images for cnn/smallcnn: channels and side (0: 3x32 for cnn, 1x28 for smallcnn) */
    int64_t in_ch, side;
    kn_dtype dtype; /* 0 (KN_F32) */
} ModelCfg;

typedef struct Model Model;

/* name: "mlp", "cnn", "gpt" or "smallcnn"; NULL and an error for anything else */
Model *model_new(kn_ctx *ctx, const char *name, const ModelCfg *cfg);
void model_free(kn_ctx *ctx, Model *m);
const char *model_name(const Model *m);

/* logits: mlp (B, 10) from x (B, 784); cnn/smallcnn (B, 10) from x (B, C, S, S);
 * gpt (B, T, vocab) from tokens (B, T) i64. training: batch_norm uses batch
 * statistics and updates running stats (cnn/smallcnn); otherwise eval. */
kn_tensor *model_forward(kn_ctx *ctx, Model *m, kn_tensor *x, int training);
/* mean cross-entropy of the logits against y: (B) i64 labels, or (B, T) for gpt */
kn_tensor *model_loss(kn_ctx *ctx, Model *m, kn_tensor *x, kn_tensor *y, int training);

/* params in a fixed order, with their state_dict names; buffers likewise
 * (running_mean/var of each batch_norm; none for mlp and gpt) */
int model_nparams(const Model *m);
kn_tensor **model_params(Model *m);
const char *const *model_param_names(const Model *m);
int model_nbuffers(const Model *m);
kn_tensor **model_buffers(Model *m);
const char *const *model_buffer_names(const Model *m);
int64_t model_param_count(const Model *m); /* elements over all params */

/* A synthetic batch from ctx's generator: x ~ N(0, 1) images or features, or
 * uniform tokens; y uniform labels (gpt: tokens). Kept tensors the caller frees. */
kn_status model_batch(kn_ctx *ctx, const Model *m, int64_t batch, kn_tensor **x, kn_tensor **y);

#endif
