/*
 * test_zoo.c — src/cli/models.c: the benchmark models and the small CNN.
 *
 * Checks, eagerly:
 *   - layout: the ordered parameter and buffer names and shapes of mlp, a
 *     width-8 cnn, a small gpt and the default smallcnn equal PyTorch's
 *     state_dict (less num_batches_tracked), and the parameter counts of the
 *     default sizes equal PyTorch's. Both come from tests/ref/gen_zoo.py
 *     (/usr/bin/python3, Debian torch 1.13), whose output is pasted below;
 *   - forward shapes, and the loss at init near ln(10) (gpt: ln(vocab));
 *   - one backward leaves a grad of its parameter's shape on every parameter;
 *   - 20 Adam steps (mlp, which has no small size: 3) on one fixed batch
 *     lower the loss;
 *   - BatchNorm running stats move after a training forward, not after eval;
 *   - model_batch shapes, dtypes and label ranges; model_free releases all;
 *   - bad names, configurations and inputs give NULL and a clear error.
 * Sizes are tiny (cnn width 4 side 8, gpt d 32 vocab 64 T 16): the default
 * eager interpreter is slow.
 *
 * Run from the repository root: build/tests/test_zoo
 */
#include <stdlib.h>

#include "test.h"
#include "../src/cli/models.h"

typedef struct {
    const char *name;
    int buffer; /* 0: named_parameters(), 1: named_buffers() */
    int ndim;
    int64_t shape[4];
} RefEntry;

/* gen_zoo.py: PyTorch 1.13.0 */
static const RefEntry ref_mlp[] = {
    {"fc1.weight", 0, 2, {512, 784}},
    {"fc1.bias", 0, 1, {512}},
    {"fc2.weight", 0, 2, {512, 512}},
    {"fc2.bias", 0, 1, {512}},
    {"fc3.weight", 0, 2, {10, 512}},
    {"fc3.bias", 0, 1, {10}},
};
static const RefEntry ref_cnn8[] = {
    {"conv1.weight", 0, 4, {8, 3, 3, 3}},
    {"bn1.weight", 0, 1, {8}},
    {"bn1.bias", 0, 1, {8}},
    {"layer1.0.conv1.weight", 0, 4, {8, 8, 3, 3}},
    {"layer1.0.bn1.weight", 0, 1, {8}},
    {"layer1.0.bn1.bias", 0, 1, {8}},
    {"layer1.0.conv2.weight", 0, 4, {8, 8, 3, 3}},
    {"layer1.0.bn2.weight", 0, 1, {8}},
    {"layer1.0.bn2.bias", 0, 1, {8}},
    {"layer1.1.conv1.weight", 0, 4, {8, 8, 3, 3}},
    {"layer1.1.bn1.weight", 0, 1, {8}},
    {"layer1.1.bn1.bias", 0, 1, {8}},
    {"layer1.1.conv2.weight", 0, 4, {8, 8, 3, 3}},
    {"layer1.1.bn2.weight", 0, 1, {8}},
    {"layer1.1.bn2.bias", 0, 1, {8}},
    {"layer2.0.conv1.weight", 0, 4, {16, 8, 3, 3}},
    {"layer2.0.bn1.weight", 0, 1, {16}},
    {"layer2.0.bn1.bias", 0, 1, {16}},
    {"layer2.0.conv2.weight", 0, 4, {16, 16, 3, 3}},
    {"layer2.0.bn2.weight", 0, 1, {16}},
    {"layer2.0.bn2.bias", 0, 1, {16}},
    {"layer2.0.downsample.0.weight", 0, 4, {16, 8, 1, 1}},
    {"layer2.0.downsample.1.weight", 0, 1, {16}},
    {"layer2.0.downsample.1.bias", 0, 1, {16}},
    {"layer2.1.conv1.weight", 0, 4, {16, 16, 3, 3}},
    {"layer2.1.bn1.weight", 0, 1, {16}},
    {"layer2.1.bn1.bias", 0, 1, {16}},
    {"layer2.1.conv2.weight", 0, 4, {16, 16, 3, 3}},
    {"layer2.1.bn2.weight", 0, 1, {16}},
    {"layer2.1.bn2.bias", 0, 1, {16}},
    {"layer3.0.conv1.weight", 0, 4, {32, 16, 3, 3}},
    {"layer3.0.bn1.weight", 0, 1, {32}},
    {"layer3.0.bn1.bias", 0, 1, {32}},
    {"layer3.0.conv2.weight", 0, 4, {32, 32, 3, 3}},
    {"layer3.0.bn2.weight", 0, 1, {32}},
    {"layer3.0.bn2.bias", 0, 1, {32}},
    {"layer3.0.downsample.0.weight", 0, 4, {32, 16, 1, 1}},
    {"layer3.0.downsample.1.weight", 0, 1, {32}},
    {"layer3.0.downsample.1.bias", 0, 1, {32}},
    {"layer3.1.conv1.weight", 0, 4, {32, 32, 3, 3}},
    {"layer3.1.bn1.weight", 0, 1, {32}},
    {"layer3.1.bn1.bias", 0, 1, {32}},
    {"layer3.1.conv2.weight", 0, 4, {32, 32, 3, 3}},
    {"layer3.1.bn2.weight", 0, 1, {32}},
    {"layer3.1.bn2.bias", 0, 1, {32}},
    {"layer4.0.conv1.weight", 0, 4, {64, 32, 3, 3}},
    {"layer4.0.bn1.weight", 0, 1, {64}},
    {"layer4.0.bn1.bias", 0, 1, {64}},
    {"layer4.0.conv2.weight", 0, 4, {64, 64, 3, 3}},
    {"layer4.0.bn2.weight", 0, 1, {64}},
    {"layer4.0.bn2.bias", 0, 1, {64}},
    {"layer4.0.downsample.0.weight", 0, 4, {64, 32, 1, 1}},
    {"layer4.0.downsample.1.weight", 0, 1, {64}},
    {"layer4.0.downsample.1.bias", 0, 1, {64}},
    {"layer4.1.conv1.weight", 0, 4, {64, 64, 3, 3}},
    {"layer4.1.bn1.weight", 0, 1, {64}},
    {"layer4.1.bn1.bias", 0, 1, {64}},
    {"layer4.1.conv2.weight", 0, 4, {64, 64, 3, 3}},
    {"layer4.1.bn2.weight", 0, 1, {64}},
    {"layer4.1.bn2.bias", 0, 1, {64}},
    {"fc.weight", 0, 2, {10, 64}},
    {"fc.bias", 0, 1, {10}},
    {"bn1.running_mean", 1, 1, {8}},
    {"bn1.running_var", 1, 1, {8}},
    {"layer1.0.bn1.running_mean", 1, 1, {8}},
    {"layer1.0.bn1.running_var", 1, 1, {8}},
    {"layer1.0.bn2.running_mean", 1, 1, {8}},
    {"layer1.0.bn2.running_var", 1, 1, {8}},
    {"layer1.1.bn1.running_mean", 1, 1, {8}},
    {"layer1.1.bn1.running_var", 1, 1, {8}},
    {"layer1.1.bn2.running_mean", 1, 1, {8}},
    {"layer1.1.bn2.running_var", 1, 1, {8}},
    {"layer2.0.bn1.running_mean", 1, 1, {16}},
    {"layer2.0.bn1.running_var", 1, 1, {16}},
    {"layer2.0.bn2.running_mean", 1, 1, {16}},
    {"layer2.0.bn2.running_var", 1, 1, {16}},
    {"layer2.0.downsample.1.running_mean", 1, 1, {16}},
    {"layer2.0.downsample.1.running_var", 1, 1, {16}},
    {"layer2.1.bn1.running_mean", 1, 1, {16}},
    {"layer2.1.bn1.running_var", 1, 1, {16}},
    {"layer2.1.bn2.running_mean", 1, 1, {16}},
    {"layer2.1.bn2.running_var", 1, 1, {16}},
    {"layer3.0.bn1.running_mean", 1, 1, {32}},
    {"layer3.0.bn1.running_var", 1, 1, {32}},
    {"layer3.0.bn2.running_mean", 1, 1, {32}},
    {"layer3.0.bn2.running_var", 1, 1, {32}},
    {"layer3.0.downsample.1.running_mean", 1, 1, {32}},
    {"layer3.0.downsample.1.running_var", 1, 1, {32}},
    {"layer3.1.bn1.running_mean", 1, 1, {32}},
    {"layer3.1.bn1.running_var", 1, 1, {32}},
    {"layer3.1.bn2.running_mean", 1, 1, {32}},
    {"layer3.1.bn2.running_var", 1, 1, {32}},
    {"layer4.0.bn1.running_mean", 1, 1, {64}},
    {"layer4.0.bn1.running_var", 1, 1, {64}},
    {"layer4.0.bn2.running_mean", 1, 1, {64}},
    {"layer4.0.bn2.running_var", 1, 1, {64}},
    {"layer4.0.downsample.1.running_mean", 1, 1, {64}},
    {"layer4.0.downsample.1.running_var", 1, 1, {64}},
    {"layer4.1.bn1.running_mean", 1, 1, {64}},
    {"layer4.1.bn1.running_var", 1, 1, {64}},
    {"layer4.1.bn2.running_mean", 1, 1, {64}},
    {"layer4.1.bn2.running_var", 1, 1, {64}},
};
static const RefEntry ref_gpt_small[] = {
    {"wte.weight", 0, 2, {64, 32}},
    {"wpe.weight", 0, 2, {16, 32}},
    {"h.0.ln_1.weight", 0, 1, {32}},
    {"h.0.ln_1.bias", 0, 1, {32}},
    {"h.0.attn.c_attn.weight", 0, 2, {96, 32}},
    {"h.0.attn.c_attn.bias", 0, 1, {96}},
    {"h.0.attn.c_proj.weight", 0, 2, {32, 32}},
    {"h.0.attn.c_proj.bias", 0, 1, {32}},
    {"h.0.ln_2.weight", 0, 1, {32}},
    {"h.0.ln_2.bias", 0, 1, {32}},
    {"h.0.mlp.c_fc.weight", 0, 2, {128, 32}},
    {"h.0.mlp.c_fc.bias", 0, 1, {128}},
    {"h.0.mlp.c_proj.weight", 0, 2, {32, 128}},
    {"h.0.mlp.c_proj.bias", 0, 1, {32}},
    {"h.1.ln_1.weight", 0, 1, {32}},
    {"h.1.ln_1.bias", 0, 1, {32}},
    {"h.1.attn.c_attn.weight", 0, 2, {96, 32}},
    {"h.1.attn.c_attn.bias", 0, 1, {96}},
    {"h.1.attn.c_proj.weight", 0, 2, {32, 32}},
    {"h.1.attn.c_proj.bias", 0, 1, {32}},
    {"h.1.ln_2.weight", 0, 1, {32}},
    {"h.1.ln_2.bias", 0, 1, {32}},
    {"h.1.mlp.c_fc.weight", 0, 2, {128, 32}},
    {"h.1.mlp.c_fc.bias", 0, 1, {128}},
    {"h.1.mlp.c_proj.weight", 0, 2, {32, 128}},
    {"h.1.mlp.c_proj.bias", 0, 1, {32}},
    {"ln_f.weight", 0, 1, {32}},
    {"ln_f.bias", 0, 1, {32}},
    {"lm_head.weight", 0, 2, {64, 32}},
};
static const RefEntry ref_smallcnn[] = {
    {"conv1.weight", 0, 4, {16, 1, 3, 3}},
    {"bn1.weight", 0, 1, {16}},
    {"bn1.bias", 0, 1, {16}},
    {"conv2.weight", 0, 4, {32, 16, 3, 3}},
    {"bn2.weight", 0, 1, {32}},
    {"bn2.bias", 0, 1, {32}},
    {"fc.weight", 0, 2, {10, 1568}},
    {"fc.bias", 0, 1, {10}},
    {"bn1.running_mean", 1, 1, {16}},
    {"bn1.running_var", 1, 1, {16}},
    {"bn2.running_mean", 1, 1, {32}},
    {"bn2.running_var", 1, 1, {32}},
};
#define REF_COUNT_MLP 669706LL
#define REF_COUNT_CNN 11173962LL
#define REF_COUNT_GPT 5289472LL
#define REF_COUNT_SMALLCNN 20538LL
#define REF_COUNT_CNN8 176402LL
#define REF_COUNT_GPT_SMALL 30080LL
/* end gen_zoo.py */

#define N_OF(a) ((int)(sizeof(a) / sizeof(a)[0]))

/* The tiny configurations of the numeric tests. */
static const ModelCfg tiny_cnn = {.width = 4, .side = 8};
static const ModelCfg tiny_gpt = {.vocab = 64, .context = 16, .d = 32, .layers = 2, .heads = 4};
static const ModelCfg tiny_smallcnn = {.width = 4, .side = 8};

/* ---- layout against PyTorch ---- */

static int shape_is(kn_tensor *t, int ndim, const int64_t *shape)
{
    if (kn_ndim(t) != ndim) return 0;
    for (int d = 0; d < ndim; d++)
        if (kn_shape(t)[d] != shape[d]) return 0;
    return 1;
}

/* m's params then buffers equal ref, in order; else the first difference. */
static void check_layout(const char *what, const ModelCfg *cfg, const char *name, const RefEntry *ref, int nref,
                         int64_t count)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    Model *m = model_new(ctx, name, cfg);
    CHECK_MSG(m != NULL, "%s: %s", what, kn_last_error(ctx));
    if (!m) {
        kn_ctx_free(ctx);
        return;
    }
    int np = model_nparams(m), nb = model_nbuffers(m), i = 0;
    CHECK_MSG(np + nb == nref, "%s: %d params + %d buffers, PyTorch %d", what, np, nb, nref);
    for (; i < nref && i < np + nb; i++) {
        const RefEntry *r = &ref[i];
        int b = i >= np;
        const char *got = b ? model_buffer_names(m)[i - np] : model_param_names(m)[i];
        kn_tensor *t = b ? model_buffers(m)[i - np] : model_params(m)[i];
        if (r->buffer != b || strcmp(got, r->name) != 0 || !shape_is(t, r->ndim, r->shape)) break;
        if (!b && !kn_is_requires_grad(t)) break;
    }
    CHECK_MSG(i == nref, "%s: entry %d is %s, PyTorch %s", what, i,
              i < np ? model_param_names(m)[i] : i < np + nb ? model_buffer_names(m)[i - np] : "(none)",
              i < nref ? ref[i].name : "(none)");
    CHECK_MSG(model_param_count(m) == count, "%s: %lld params, PyTorch %lld", what,
              (long long)model_param_count(m), (long long)count);
    model_free(ctx, m);
    kn_ctx_free(ctx);
}

static void test_layout(void)
{
    static const ModelCfg def, cnn8 = {.width = 8}, gpt_small = {.vocab = 64, .context = 16, .d = 32, .layers = 2,
                                                                 .heads = 4};
    check_layout("mlp", &def, "mlp", ref_mlp, N_OF(ref_mlp), REF_COUNT_MLP);
    check_layout("cnn width 8", &cnn8, "cnn", ref_cnn8, N_OF(ref_cnn8), REF_COUNT_CNN8);
    check_layout("gpt small", &gpt_small, "gpt", ref_gpt_small, N_OF(ref_gpt_small), REF_COUNT_GPT_SMALL);
    check_layout("smallcnn", NULL, "smallcnn", ref_smallcnn, N_OF(ref_smallcnn), REF_COUNT_SMALLCNN);
}

/* The default sizes: construction only (no forward: too slow eagerly). */
static void test_default_counts(void)
{
    static const struct {
        const char *name;
        int64_t count;
        int nbuffers;
    } cases[] = {
        {"mlp", REF_COUNT_MLP, 0},
        {"cnn", REF_COUNT_CNN, 2 * 20},
        {"gpt", REF_COUNT_GPT, 0},
        {"smallcnn", REF_COUNT_SMALLCNN, 2 * 2},
    };
    kn_ctx *ctx = kn_ctx_new(NULL);
    size_t live = kn_live_tensors(ctx), bytes = kn_live_bytes(ctx);
    for (int i = 0; i < N_OF(cases); i++) {
        Model *m = model_new(ctx, cases[i].name, NULL);
        CHECK_MSG(m && strcmp(model_name(m), cases[i].name) == 0, "%s: %s", cases[i].name, kn_last_error(ctx));
        CHECK_MSG(model_param_count(m) == cases[i].count, "%s: %lld params, PyTorch %lld", cases[i].name,
                  (long long)model_param_count(m), (long long)cases[i].count);
        CHECK(model_nbuffers(m) == cases[i].nbuffers);
        CHECK(kn_live_bytes(ctx) >= bytes + (size_t)cases[i].count * 4);
        model_free(ctx, m);
        CHECK_MSG(kn_live_tensors(ctx) == live && kn_live_bytes(ctx) == bytes, "%s: model_free left %zu tensors",
                  cases[i].name, kn_live_tensors(ctx) - live);
    }
    kn_ctx_free(ctx);
}

/* ---- forward, loss, backward, Adam ---- */

typedef struct {
    const char *name;
    const ModelCfg *cfg;
    int64_t batch;      /* backward and Adam */
    int64_t init_batch; /* the loss at init: larger, so that it is near its mean */
    double want_loss;   /* at init, within tol */
    double tol;
    int steps;          /* of Adam */
} Case;

/* smallcnn's loss at init sits above ln(10): its features (max-pooled ReLUs
 * of batch-normed values) have mean ~1, so each class logit gets a fixed
 * offset. PyTorch's own runs of it gave 2.36..2.99 over 10 seeds (batch 32,
 * at both sizes). mlp has no small size: 3 Adam steps, as the eager
 * interpreter takes ~0.25 s per step of its 669,706 parameters. */
static const Case cases[] = {
    {"mlp", NULL, 2, 32, 2.302585092994046, 0.5, 3},
    {"cnn", &tiny_cnn, 4, 32, 2.302585092994046, 0.5, 20},
    {"gpt", &tiny_gpt, 2, 8, 4.1588830833596715, 0.5, 20}, /* ln 64 */
    {"smallcnn", &tiny_smallcnn, 4, 32, 2.302585092994046, 0.8, 20},
};

static int loss_value(kn_ctx *ctx, Model *m, kn_tensor *x, kn_tensor *y, int training, double *out)
{
    kn_scope_begin(ctx);
    kn_status s = kn_item(ctx, model_loss(ctx, m, x, y, training), out);
    kn_scope_end(ctx);
    return s == KN_OK;
}

static void test_forward(const Case *c)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    Model *m = model_new(ctx, c->name, c->cfg);
    kn_tensor *x = NULL, *y = NULL;
    CHECK_MSG(m && model_batch(ctx, m, c->init_batch, &x, &y) == KN_OK, "%s: %s", c->name, kn_last_error(ctx));
    if (!m || !x) goto done;
    kn_scope_begin(ctx);
    kn_tensor *out = model_forward(ctx, m, x, 1);
    int gpt = strcmp(c->name, "gpt") == 0;
    int64_t want[3] = {c->init_batch, gpt ? 16 : 10, 64};
    CHECK_MSG(out && shape_is(out, gpt ? 3 : 2, want) && kn_dtype_of(out) == KN_F32, "%s forward: %s", c->name,
              kn_last_error(ctx));
    kn_scope_end(ctx);

    double loss = NAN;
    CHECK_MSG(loss_value(ctx, m, x, y, 1, &loss) && test_close(loss, c->want_loss, 0, c->tol),
              "%s: loss at init %g, want about %g (%s)", c->name, loss, c->want_loss, kn_last_error(ctx));
done:
    model_free(ctx, m);
    kn_ctx_free(ctx);
}

static void test_backward(const Case *c)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    Model *m = model_new(ctx, c->name, c->cfg);
    kn_tensor *x = NULL, *y = NULL;
    if (!m || model_batch(ctx, m, c->batch, &x, &y) != KN_OK) {
        CHECK_MSG(0, "%s: %s", c->name, kn_last_error(ctx));
        goto done;
    }
    kn_scope_begin(ctx);
    CHECK_MSG(kn_backward(ctx, model_loss(ctx, m, x, y, 1), 0) == KN_OK, "%s backward: %s", c->name,
              kn_last_error(ctx));
    kn_scope_end(ctx);
    int i, n = model_nparams(m);
    for (i = 0; i < n; i++) {
        kn_tensor *p = model_params(m)[i], *g = kn_grad(ctx, p);
        if (!g || !shape_is(g, kn_ndim(p), kn_shape(p))) break;
    }
    CHECK_MSG(i == n, "%s: no grad of the right shape on %s", c->name, i < n ? model_param_names(m)[i] : "");
done:
    model_free(ctx, m);
    kn_ctx_free(ctx);
}

/* Adam steps (lr 1e-3) on one batch: the loss falls. */
static void test_adam(const Case *c)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    Model *m = model_new(ctx, c->name, c->cfg);
    kn_tensor *x = NULL, *y = NULL;
    kn_optim *opt = NULL;
    double first = NAN, last = NAN;
    int ok = m && model_batch(ctx, m, c->batch, &x, &y) == KN_OK;
    if (ok) opt = kn_adam(ctx, model_params(m), model_nparams(m), NULL);
    ok = ok && opt;
    for (int k = 0; k < c->steps && ok; k++) {
        kn_scope_begin(ctx);
        kn_optim_zero_grad(opt);
        kn_tensor *loss = model_loss(ctx, m, x, y, 1);
        ok = kn_item(ctx, loss, k == 0 ? &first : &last) == KN_OK && kn_backward(ctx, loss, 0) == KN_OK &&
             kn_optim_step(opt) == KN_OK;
        kn_scope_end(ctx);
    }
    CHECK_MSG(ok && last < first - 0.05, "%s: loss %g after %d Adam steps, %g at first (%s)", c->name, last,
              c->steps, first, kn_last_error(ctx));
    kn_optim_free(opt);
    model_free(ctx, m);
    kn_ctx_free(ctx);
}

/* ---- BatchNorm running statistics ---- */

/* all of t, as doubles, into v (n elements) */
static int read_all(kn_ctx *ctx, kn_tensor *t, double *v, int64_t n)
{
    kn_scope_begin(ctx);
    kn_tensor *d = kn_to(ctx, t, KN_F64);
    int ok = d && kn_numel(d) == n && kn_read(ctx, d, v, (size_t)n * sizeof *v) == KN_OK;
    kn_scope_end(ctx);
    return ok;
}

/* The sum of |b| over every buffer: a fingerprint of the running stats. */
static double stats_sum(kn_ctx *ctx, Model *m)
{
    double s = 0, v[64];
    for (int i = 0; i < model_nbuffers(m); i++) {
        kn_tensor *b = model_buffers(m)[i];
        if (kn_numel(b) > 64 || !read_all(ctx, b, v, kn_numel(b))) return NAN;
        for (int64_t j = 0; j < kn_numel(b); j++) s += fabs(v[j]) * (double)(j + 1) * (i + 1);
    }
    return s;
}

static void test_running_stats(void)
{
    static const char *const names[] = {"cnn", "smallcnn"};
    for (int k = 0; k < 2; k++) {
        kn_ctx *ctx = kn_ctx_new(NULL);
        Model *m = model_new(ctx, names[k], k ? &tiny_smallcnn : &tiny_cnn);
        kn_tensor *x = NULL, *y = NULL;
        if (!m || model_batch(ctx, m, 4, &x, &y) != KN_OK) {
            CHECK_MSG(0, "%s: %s", names[k], kn_last_error(ctx));
            model_free(ctx, m);
            kn_ctx_free(ctx);
            continue;
        }
        double v[4], s0 = stats_sum(ctx, m), s1, s2;
        /* bn1 starts at mean 0, var 1 */
        CHECK(model_nbuffers(m) >= 2 && strcmp(model_buffer_names(m)[0], "bn1.running_mean") == 0 &&
              strcmp(model_buffer_names(m)[1], "bn1.running_var") == 0);
        CHECK(read_all(ctx, model_buffers(m)[0], v, 4) && v[0] == 0 && v[3] == 0);
        CHECK(read_all(ctx, model_buffers(m)[1], v, 4) && v[0] == 1 && v[3] == 1);
        kn_scope_begin(ctx);
        CHECK(model_forward(ctx, m, x, 0) != NULL);
        kn_scope_end(ctx);
        s1 = stats_sum(ctx, m);
        CHECK_MSG(s1 == s0, "%s: eval forward changed the running stats (%g to %g)", names[k], s0, s1);
        kn_scope_begin(ctx);
        CHECK(model_forward(ctx, m, x, 1) != NULL);
        kn_scope_end(ctx);
        s2 = stats_sum(ctx, m);
        CHECK_MSG(!isnan(s2) && s2 != s1, "%s: training forward left the running stats (%g)", names[k], s2);
        /* every buffer moved: mean away from 0, var away from 1 */
        int moved = 1;
        for (int i = 0; i < model_nbuffers(m); i++) {
            double w[64];
            int64_t n = kn_numel(model_buffers(m)[i]);
            moved &= n <= 64 && read_all(ctx, model_buffers(m)[i], w, n) && w[0] != (i % 2 ? 1.0 : 0.0);
        }
        CHECK_MSG(moved, "%s: a running stat did not move", names[k]);
        model_free(ctx, m);
        kn_ctx_free(ctx);
    }
}

/* ---- model_batch ---- */

static void test_batch(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    Model *mlp = model_new(ctx, "mlp", NULL), *cnn = model_new(ctx, "cnn", &tiny_cnn);
    Model *gpt = model_new(ctx, "gpt", &tiny_gpt), *sc = model_new(ctx, "smallcnn", NULL);
    kn_tensor *x, *y;
    int64_t v[64];
    CHECK(mlp && cnn && gpt && sc);
    size_t live = kn_live_tensors(ctx);

    kn_scope_begin(ctx);
    CHECK(model_batch(ctx, mlp, 5, &x, &y) == KN_OK);
    kn_scope_end(ctx); /* kept: they survive */
    int64_t xs[2] = {5, 784};
    CHECK(shape_is(x, 2, xs) && kn_dtype_of(x) == KN_F32 && shape_is(y, 1, xs) && kn_dtype_of(y) == KN_I64);
    CHECK(kn_live_tensors(ctx) == live + 2);
    kn_free(ctx, x);
    kn_free(ctx, y);

    CHECK(model_batch(ctx, cnn, 3, &x, &y) == KN_OK);
    int64_t is[4] = {3, 3, 8, 8};
    CHECK(shape_is(x, 4, is) && shape_is(y, 1, is));
    kn_free(ctx, x);
    kn_free(ctx, y);

    CHECK(model_batch(ctx, sc, 64, &x, &y) == KN_OK);
    int64_t fs[4] = {64, 1, 28, 28};
    CHECK(shape_is(x, 4, fs) && shape_is(y, 1, fs));
    int inrange = kn_read(ctx, y, v, sizeof v) == KN_OK, seen = 0;
    for (int i = 0; i < 64; i++) {
        inrange &= v[i] >= 0 && v[i] < 10;
        seen |= 1 << (v[i] & 15);
    }
    CHECK_MSG(inrange && seen == 0x3ff, "labels out of [0, 10) or not all drawn (seen %#x)", seen);
    kn_free(ctx, x);
    kn_free(ctx, y);

    CHECK(model_batch(ctx, gpt, 4, &x, &y) == KN_OK);
    int64_t ts[2] = {4, 16};
    CHECK(shape_is(x, 2, ts) && kn_dtype_of(x) == KN_I64 && shape_is(y, 2, ts) && kn_dtype_of(y) == KN_I64);
    inrange = kn_read(ctx, x, v, sizeof v) == KN_OK;
    for (int i = 0; i < 64; i++) inrange &= v[i] >= 0 && v[i] < 64;
    CHECK(inrange);
    kn_free(ctx, x);
    kn_free(ctx, y);
    CHECK(kn_live_tensors(ctx) == live);

    model_free(ctx, mlp);
    model_free(ctx, cnn);
    model_free(ctx, gpt);
    model_free(ctx, sc);
    CHECK(kn_live_tensors(ctx) == 0);
    kn_ctx_free(ctx);
}

/* ---- errors ---- */

static void bad_cfg(const char *name, ModelCfg c, const char *want)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    CHECK(model_new(ctx, name, &c) == NULL);
    CHECK_ERR(ctx, want);
    CHECK(kn_live_tensors(ctx) == 0);
    kn_ctx_free(ctx);
}

static void test_errors(void)
{
    kn_ctx *ctx = kn_ctx_new(NULL);
    CHECK(model_new(ctx, "resnet50", NULL) == NULL);
    CHECK_ERR(ctx, "model_new: unknown model \"resnet50\"");
    CHECK(model_new(ctx, NULL, NULL) == NULL);
    CHECK_ERR(ctx, "model_new: operand 'name' is NULL");
    CHECK(model_new(NULL, "mlp", NULL) == NULL);

    bad_cfg("gpt", (ModelCfg){.heads = 3}, "model_new: gpt: cfg.heads = 3 does not divide cfg.d = 256");
    bad_cfg("gpt", (ModelCfg){.vocab = -5}, "model_new: cfg.vocab = -5 is negative");
    bad_cfg("cnn", (ModelCfg){.width = -1}, "cfg.width = -1 is negative");
    bad_cfg("cnn", (ModelCfg){.side = (int64_t)1 << 40}, "cfg.side = 1099511627776 is too large");
    bad_cfg("smallcnn", (ModelCfg){.side = 3}, "smallcnn: cfg.side = 3 is below 4");
    bad_cfg("mlp", (ModelCfg){.dtype = KN_I64}, "cfg.dtype i64 is not a float dtype");

    Model *gpt = model_new(ctx, "gpt", &tiny_gpt), *mlp = model_new(ctx, "mlp", NULL);
    int64_t too_long[2] = {2, 17}, flat[1] = {16}, imgs[4] = {2, 3, 8, 8};
    kn_tensor *x, *y;
    CHECK(model_forward(ctx, gpt, kn_zeros(ctx, KN_I64, 2, too_long), 0) == NULL);
    CHECK_ERR(ctx, "model_forward: gpt: tokens have T = 17 positions, more than the context 16");
    CHECK(model_forward(ctx, gpt, kn_zeros(ctx, KN_I64, 1, flat), 0) == NULL);
    CHECK_ERR(ctx, "model_forward: gpt: tokens must be (B, T), got 1 dims");
    CHECK(model_loss(ctx, mlp, kn_zeros(ctx, KN_F32, 4, imgs), kn_zeros(ctx, KN_I64, 1, imgs), 1) == NULL);
    CHECK_ERR(ctx, "model_loss: ");
    CHECK(model_forward(ctx, NULL, kn_zeros(ctx, KN_F32, 1, flat), 0) == NULL);
    CHECK_ERR(ctx, "operand 'm' is NULL");
    CHECK(model_forward(ctx, mlp, NULL, 0) == NULL);
    CHECK_ERR(ctx, "operand 'x' is NULL");
    CHECK(model_batch(ctx, mlp, 0, &x, &y) == KN_EINVAL && x == NULL && y == NULL);
    CHECK_ERR(ctx, "model_batch: batch = 0 is not positive");
    CHECK(model_batch(ctx, NULL, 4, &x, &y) == KN_EINVAL);
    CHECK_ERR(ctx, "model_batch: operand 'm' is NULL");
    model_free(ctx, gpt);
    model_free(ctx, mlp);
    model_free(ctx, NULL);
    CHECK(model_name(NULL) == NULL && model_nparams(NULL) == 0 && model_param_count(NULL) == 0);
    kn_ctx_free(ctx);
}

int main(void)
{
    test_layout();
    test_default_counts();
    for (int i = 0; i < N_OF(cases); i++) {
        test_forward(&cases[i]);
        test_backward(&cases[i]);
        test_adam(&cases[i]);
    }
    test_running_stats();
    test_batch();
    test_errors();
    TEST_END("zoo");
}
