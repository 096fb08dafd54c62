/*
 * models.c — the workloads of docs/BENCHMARKS.md and the small
 * Fashion-MNIST CNN, written only against the public API (kiln.h) so that
 * model_forward and model_loss run eagerly and under kn_compile's tracer
 * alike: they read shapes, never tensor values, and branch only on shapes
 * and the configuration.
 *
 * A model is its resolved configuration plus two lists of kept tensors with
 * their PyTorch state_dict names: params (kn_param) and buffers (BatchNorm
 * running statistics). The builders append in state_dict order; the forward
 * passes walk the same structure in the same order and take each tensor
 * from a cursor, so no name is looked up at run time. The order is PyTorch's
 * named_parameters() / named_buffers() for the equivalent modules
 * (tests/ref/gen_zoo.py builds them).
 *
 * Initialisation follows PyTorch's defaults: Linear and Conv weights
 * kaiming-uniform with a = sqrt(5), their biases U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)); Embedding N(0, 1); LayerNorm and BatchNorm weight 1,
 * bias 0; running_mean 0, running_var 1. Convolutions carry no bias (each is
 * followed by a BatchNorm, which would cancel it).
 */
#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core.h"
#include "models.h"

#define NAME_MAX_LEN 96
#define CFG_MAX ((int64_t)1 << 24) /* a bound on every size, far above any real model's */

typedef enum {
    MD_MLP,      /* 784 -> 512 -> 512 -> 10 */
    MD_CNN,      /* CIFAR ResNet-18 */
    MD_GPT,      /* GPT-2 style decoder */
    MD_SMALLCNN, /* two conv+BN+ReLU+pool stages, one Linear */
    MD_COUNT
} ModelKind;

static const char *const kind_names[MD_COUNT] = {"mlp", "cnn", "gpt", "smallcnn"};

/* Tensors with their state_dict names, in order; names are malloc'd. */
typedef struct {
    kn_tensor **t;
    char **names;
    int n, cap;
} List;

struct Model {
    ModelKind kind;
    ModelCfg cfg; /* the defaults filled in */
    List params, buffers;
};

/* ---- configuration ---- */

static int64_t or_default(int64_t v, int64_t def) { return v ? v : def; }

/* Fills in the defaults of m->cfg for its kind; an error if a size is out of
 * range or the sizes do not fit together. */
static kn_status resolve_cfg(kn_ctx *ctx, Model *m, const ModelCfg *in)
{
    static const char *const fields[] = {"vocab", "context", "d", "layers", "heads", "width", "in_ch", "side"};
    ModelCfg c = in ? *in : (ModelCfg){0};
    const int64_t v[8] = {c.vocab, c.context, c.d, c.layers, c.heads, c.width, c.in_ch, c.side};
    for (int i = 0; i < 8; i++) {
        if (v[i] < 0) return kn_errs(ctx, KN_EINVAL, "cfg.%s = %lld is negative", fields[i], (long long)v[i]);
        if (v[i] > CFG_MAX)
            return kn_errs(ctx, KN_EINVAL, "cfg.%s = %lld is too large (at most %lld)", fields[i], (long long)v[i],
                           (long long)CFG_MAX);
    }
    if (c.dtype != KN_F32 && c.dtype != KN_F64 && c.dtype != KN_F16 && c.dtype != KN_BF16)
        return kn_errs(ctx, KN_EDTYPE, "cfg.dtype %s is not a float dtype", kn_dtype_name(c.dtype));
    switch (m->kind) {
    case MD_GPT:
        c.vocab = or_default(c.vocab, 4096);
        c.context = or_default(c.context, 128);
        c.d = or_default(c.d, 256);
        c.layers = or_default(c.layers, 4);
        c.heads = or_default(c.heads, 4);
        if (c.d % c.heads != 0)
            return kn_errs(ctx, KN_EINVAL, "gpt: cfg.heads = %lld does not divide cfg.d = %lld",
                           (long long)c.heads, (long long)c.d);
        break;
    case MD_CNN:
        c.width = or_default(c.width, 64);
        c.in_ch = or_default(c.in_ch, 3);
        c.side = or_default(c.side, 32);
        break;
    case MD_SMALLCNN:
        c.width = or_default(c.width, 16);
        c.in_ch = or_default(c.in_ch, 1);
        c.side = or_default(c.side, 28);
        if (c.side < 4)
            return kn_errs(ctx, KN_EINVAL, "smallcnn: cfg.side = %lld is below 4 (two 2x2 max-pools)",
                           (long long)c.side);
        break;
    case MD_MLP:
    case MD_COUNT:
        break;
    }
    m->cfg = c;
    return KN_OK;
}

/* ---- building: parameters and buffers in state_dict order ---- */

typedef struct {
    kn_ctx *ctx;
    Model *m;
    int ok; /* 0 after the first failure; later calls do nothing */
} Build;

static int list_push(List *l, kn_tensor *t, const char *name)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        kn_tensor **nt = realloc(l->t, (size_t)cap * sizeof *nt);
        if (nt) l->t = nt;
        char **nn = realloc(l->names, (size_t)cap * sizeof *nn);
        if (nn) l->names = nn;
        if (!nt || !nn) return 0;
        l->cap = cap;
    }
    size_t len = strlen(name) + 1;
    char *s = malloc(len);
    if (!s) return 0;
    memcpy(s, name, len);
    l->t[l->n] = t;
    l->names[l->n++] = s;
    return 1;
}

/* Appends t as prefix.suffix to the params (buffer 0, marked kn_param) or the
 * buffers (kept). A NULL t is a failure already reported. */
static void add(Build *b, int buffer, kn_tensor *t, const char *prefix, const char *suffix)
{
    char name[NAME_MAX_LEN];
    if (!b->ok) return;
    if (!t || !(buffer ? kn_keep(b->ctx, t) : kn_param(b->ctx, t))) {
        b->ok = 0;
        return;
    }
    snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    if (!list_push(buffer ? &b->m->buffers : &b->m->params, t, name)) {
        kn_free(b->ctx, t);
        kn_errs(b->ctx, KN_ENOMEM, "out of memory for the model's tables");
        b->ok = 0;
    }
}

static kn_dtype dt_of(const Build *b) { return b->m->cfg.dtype; }

/* U(-1/sqrt(fan_in), 1/sqrt(fan_in)), nn.Linear's and nn.Conv2d's bias */
static kn_tensor *fan_in_bias(Build *b, int64_t n, int64_t fan_in)
{
    double bound = fan_in > 0 ? 1.0 / sqrt((double)fan_in) : 0.0;
    return kn_uniform(b->ctx, dt_of(b), 1, &n, -bound, bound);
}

/* nn.Linear(in, out, bias): weight (out, in), bias (out) */
static void new_linear(Build *b, const char *prefix, int64_t in, int64_t out, int bias)
{
    int64_t ws[2] = {out, in};
    if (!b->ok) return;
    add(b, 0, kn_kaiming_uniform(b->ctx, dt_of(b), 2, ws, sqrt(5.0)), prefix, "weight");
    if (bias && b->ok) add(b, 0, fan_in_bias(b, out, in), prefix, "bias");
}

/* nn.Conv2d(in, out, k, bias=False): weight (out, in, k, k) */
static void new_conv(Build *b, const char *prefix, int64_t in, int64_t out, int64_t k)
{
    int64_t ws[4] = {out, in, k, k};
    if (!b->ok) return;
    add(b, 0, kn_kaiming_uniform(b->ctx, dt_of(b), 4, ws, sqrt(5.0)), prefix, "weight");
}

/* nn.BatchNorm2d(c): weight, bias; buffers running_mean, running_var */
static void new_batch_norm(Build *b, const char *prefix, int64_t c)
{
    if (!b->ok) return;
    add(b, 0, kn_ones(b->ctx, dt_of(b), 1, &c), prefix, "weight");
    if (b->ok) add(b, 0, kn_zeros(b->ctx, dt_of(b), 1, &c), prefix, "bias");
    if (b->ok) add(b, 1, kn_zeros(b->ctx, dt_of(b), 1, &c), prefix, "running_mean");
    if (b->ok) add(b, 1, kn_ones(b->ctx, dt_of(b), 1, &c), prefix, "running_var");
}

/* nn.LayerNorm(d): weight, bias */
static void new_layer_norm(Build *b, const char *prefix, int64_t d)
{
    if (!b->ok) return;
    add(b, 0, kn_ones(b->ctx, dt_of(b), 1, &d), prefix, "weight");
    if (b->ok) add(b, 0, kn_zeros(b->ctx, dt_of(b), 1, &d), prefix, "bias");
}

/* nn.Embedding(n, d): weight (n, d) ~ N(0, 1) */
static void new_embedding(Build *b, const char *prefix, int64_t n, int64_t d)
{
    int64_t ws[2] = {n, d};
    if (!b->ok) return;
    add(b, 0, kn_randn(b->ctx, dt_of(b), 2, ws), prefix, "weight");
}

/* ResNet: block j of stage s (both from 0) has a 1x1 conv+BN shortcut when
 * its shape changes: the first block of every stage but the first. */
static int resnet_stride(int s, int j) { return s > 0 && j == 0 ? 2 : 1; }
static int resnet_downsample(int s, int j) { return s > 0 && j == 0; }

static void build_mlp(Build *b)
{
    new_linear(b, "fc1", 784, 512, 1);
    new_linear(b, "fc2", 512, 512, 1);
    new_linear(b, "fc3", 512, 10, 1);
}

static void build_cnn(Build *b)
{
    const ModelCfg *c = &b->m->cfg;
    char p[NAME_MAX_LEN];
    int64_t cin = c->width;
    new_conv(b, "conv1", c->in_ch, c->width, 3);
    new_batch_norm(b, "bn1", c->width);
    for (int s = 0; s < 4; s++) {
        int64_t cout = c->width << s;
        for (int j = 0; j < 2; j++) {
            snprintf(p, sizeof p, "layer%d.%d.conv1", s + 1, j);
            new_conv(b, p, j ? cout : cin, cout, 3);
            snprintf(p, sizeof p, "layer%d.%d.bn1", s + 1, j);
            new_batch_norm(b, p, cout);
            snprintf(p, sizeof p, "layer%d.%d.conv2", s + 1, j);
            new_conv(b, p, cout, cout, 3);
            snprintf(p, sizeof p, "layer%d.%d.bn2", s + 1, j);
            new_batch_norm(b, p, cout);
            if (resnet_downsample(s, j)) {
                snprintf(p, sizeof p, "layer%d.%d.downsample.0", s + 1, j);
                new_conv(b, p, cin, cout, 1);
                snprintf(p, sizeof p, "layer%d.%d.downsample.1", s + 1, j);
                new_batch_norm(b, p, cout);
            }
        }
        cin = cout;
    }
    new_linear(b, "fc", cin, 10, 1);
}

static void build_gpt(Build *b)
{
    const ModelCfg *c = &b->m->cfg;
    char p[NAME_MAX_LEN];
    new_embedding(b, "wte", c->vocab, c->d);
    new_embedding(b, "wpe", c->context, c->d);
    for (int64_t l = 0; l < c->layers && b->ok; l++) {
        snprintf(p, sizeof p, "h.%lld.ln_1", (long long)l);
        new_layer_norm(b, p, c->d);
        snprintf(p, sizeof p, "h.%lld.attn.c_attn", (long long)l);
        new_linear(b, p, c->d, 3 * c->d, 1);
        snprintf(p, sizeof p, "h.%lld.attn.c_proj", (long long)l);
        new_linear(b, p, c->d, c->d, 1);
        snprintf(p, sizeof p, "h.%lld.ln_2", (long long)l);
        new_layer_norm(b, p, c->d);
        snprintf(p, sizeof p, "h.%lld.mlp.c_fc", (long long)l);
        new_linear(b, p, c->d, 4 * c->d, 1);
        snprintf(p, sizeof p, "h.%lld.mlp.c_proj", (long long)l);
        new_linear(b, p, 4 * c->d, c->d, 1);
    }
    new_layer_norm(b, "ln_f", c->d);
    new_linear(b, "lm_head", c->d, c->vocab, 0);
}

/* side after two floor-halving 2x2 max-pools */
static int64_t smallcnn_side(const ModelCfg *c) { return c->side / 2 / 2; }

static void build_smallcnn(Build *b)
{
    const ModelCfg *c = &b->m->cfg;
    int64_t s = smallcnn_side(c);
    new_conv(b, "conv1", c->in_ch, c->width, 3);
    new_batch_norm(b, "bn1", c->width);
    new_conv(b, "conv2", c->width, 2 * c->width, 3);
    new_batch_norm(b, "bn2", 2 * c->width);
    new_linear(b, "fc", 2 * c->width * s * s, 10, 1);
}

static void list_free(kn_ctx *ctx, List *l)
{
    for (int i = 0; i < l->n; i++) {
        kn_free(ctx, l->t[i]);
        free(l->names[i]);
    }
    free(l->t);
    free(l->names);
}

static Model *new_model(kn_ctx *ctx, const char *name, const ModelCfg *cfg)
{
    static void (*const builders[MD_COUNT])(Build *) = {build_mlp, build_cnn, build_gpt, build_smallcnn};
    if (!name) return kn_err_null(ctx, "name");
    int kind = 0;
    while (kind < MD_COUNT && strcmp(name, kind_names[kind]) != 0) kind++;
    if (kind == MD_COUNT) return kn_err(ctx, KN_EINVAL, "unknown model \"%s\" (mlp, cnn, gpt, smallcnn)", name);
    Model *m = calloc(1, sizeof *m);
    if (!m) return kn_err(ctx, KN_ENOMEM, "out of memory for the model");
    m->kind = (ModelKind)kind;
    if (resolve_cfg(ctx, m, cfg) != KN_OK) {
        free(m);
        return NULL;
    }
    Build b = {ctx, m, 1};
    kn_scope_begin(ctx); /* the initialisers' temporaries */
    builders[kind](&b);
    kn_scope_end(ctx);
    if (!b.ok) {
        model_free(ctx, m);
        return NULL;
    }
    return m;
}

Model *model_new(kn_ctx *ctx, const char *name, const ModelCfg *cfg)
{
    if (!ctx) return NULL;
    const char *saved = op_enter(ctx, "model_new");
    Model *m = new_model(ctx, name, cfg);
    op_leave(ctx, saved);
    return m;
}

void model_free(kn_ctx *ctx, Model *m)
{
    if (!m) return;
    list_free(ctx, &m->params);
    list_free(ctx, &m->buffers);
    free(m);
}

const char *model_name(const Model *m) { return m ? kind_names[m->kind] : NULL; }

/* ---- the forward passes: the same walk, taking tensors from a cursor ---- */

typedef struct {
    kn_ctx *ctx;
    Model *m;
    int p, b;     /* next param, next buffer */
    int training;
} Run;

static kn_tensor *next_param(Run *r)
{
    assert(r->p < r->m->params.n);
    return r->m->params.t[r->p++];
}

static kn_tensor *next_buffer(Run *r)
{
    assert(r->b < r->m->buffers.n);
    return r->m->buffers.t[r->b++];
}

static kn_tensor *linear(Run *r, kn_tensor *x, int bias)
{
    kn_tensor *w = next_param(r);
    kn_tensor *bs = bias ? next_param(r) : NULL;
    return kn_linear(r->ctx, x, w, bs);
}

static kn_tensor *conv(Run *r, kn_tensor *x, int stride, int pad)
{
    kn_conv_opts o = {.stride = {stride, stride}, .padding = {pad, pad}};
    return kn_conv2d(r->ctx, x, next_param(r), NULL, &o);
}

/* momentum 0.1 and eps 1e-5, PyTorch's defaults */
static kn_tensor *batch_norm(Run *r, kn_tensor *x)
{
    kn_tensor *w = next_param(r), *bias = next_param(r);
    kn_tensor *mean = next_buffer(r), *var = next_buffer(r);
    return kn_batch_norm(r->ctx, x, mean, var, w, bias, r->training, 0.1, 1e-5);
}

static kn_tensor *layer_norm(Run *r, kn_tensor *x)
{
    kn_tensor *w = next_param(r), *bias = next_param(r);
    return kn_layer_norm(r->ctx, x, 1, kn_shape(w), w, bias, 1e-5);
}

static kn_tensor *forward_mlp(Run *r, kn_tensor *x) /* (B, 784) -> (B, 10) */
{
    kn_ctx *c = r->ctx;
    x = kn_relu(c, linear(r, x, 1));
    x = kn_relu(c, linear(r, x, 1));
    return linear(r, x, 1);
}

/* torchvision's BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)) */
static kn_tensor *basic_block(Run *r, kn_tensor *x, int s, int j)
{
    kn_ctx *c = r->ctx;
    int stride = resnet_stride(s, j);
    kn_tensor *o = kn_relu(c, batch_norm(r, conv(r, x, stride, 1)));
    o = batch_norm(r, conv(r, o, 1, 1));
    kn_tensor *sc = resnet_downsample(s, j) ? batch_norm(r, conv(r, x, stride, 0)) : x;
    return kn_relu(c, kn_add(c, o, sc));
}

static kn_tensor *forward_cnn(Run *r, kn_tensor *x) /* (B, C, S, S) -> (B, 10) */
{
    kn_ctx *c = r->ctx;
    kn_tensor *h = kn_relu(c, batch_norm(r, conv(r, x, 1, 1))); /* (B, w, S, S) */
    for (int s = 0; s < 4; s++)
        for (int j = 0; j < 2; j++) h = basic_block(r, h, s, j); /* (B, 8w, S/8, S/8) at the end */
    h = kn_flatten(c, kn_adaptive_avg_pool2d(c, h, 1, 1), 1, -1); /* (B, 8w) */
    return linear(r, h, 1);
}

/* Causal self-attention, (B, T, D) -> (B, T, D). */
static kn_tensor *attention(Run *r, kn_tensor *x, int64_t t)
{
    kn_ctx *c = r->ctx;
    int64_t d = r->m->cfg.d, nh = r->m->cfg.heads;
    int64_t split[4] = {-1, t, nh, d / nh}, merged[3] = {-1, t, d};
    kn_tensor *qkv = linear(r, x, 1), *part[3] = {NULL, NULL, NULL}; /* (B, T, 3D) */
    if (kn_split(c, qkv, d, 2, part, 3) != 3) part[0] = part[1] = part[2] = NULL; /* the error is pending */
    for (int i = 0; i < 3; i++) part[i] = kn_transpose(c, kn_reshape(c, part[i], 4, split), 1, 2); /* (B, H, T, hd) */
    kn_tensor *y = kn_scaled_dot_product_attention(c, part[0], part[1], part[2], NULL, 1, 0.0);
    y = kn_reshape(c, kn_transpose(c, y, 1, 2), 3, merged); /* (B, T, D) */
    return linear(r, y, 1);
}

static kn_tensor *forward_gpt(Run *r, kn_tensor *tok) /* (B, T) i64 -> (B, T, vocab) */
{
    kn_ctx *c = r->ctx;
    const ModelCfg *cfg = &r->m->cfg;
    if (kn_ndim(tok) != 2)
        return kn_err(c, KN_ESHAPE, "gpt: tokens must be (B, T), got %d dims", kn_ndim(tok));
    int64_t t = kn_shape(tok)[1];
    if (t > cfg->context)
        return kn_err(c, KN_ESHAPE, "gpt: tokens have T = %lld positions, more than the context %lld",
                      (long long)t, (long long)cfg->context);
    kn_tensor *wte = next_param(r), *wpe = next_param(r);
    kn_tensor *x = kn_add(c, kn_embedding(c, wte, tok), kn_narrow(c, wpe, 0, 0, t)); /* (B, T, D) */
    for (int64_t l = 0; l < cfg->layers; l++) {
        x = kn_add(c, x, attention(r, layer_norm(r, x), t));
        kn_tensor *h = kn_gelu(c, linear(r, layer_norm(r, x), 1), 1); /* (B, T, 4D) */
        x = kn_add(c, x, linear(r, h, 1));
    }
    return linear(r, layer_norm(r, x), 0); /* (B, T, vocab) */
}

static kn_tensor *forward_smallcnn(Run *r, kn_tensor *x) /* (B, C, S, S) -> (B, 10) */
{
    kn_ctx *c = r->ctx;
    kn_pool_opts pool = {.kernel = {2, 2}};
    x = kn_max_pool2d(c, kn_relu(c, batch_norm(r, conv(r, x, 1, 1))), &pool); /* (B, w, S/2, S/2) */
    x = kn_max_pool2d(c, kn_relu(c, batch_norm(r, conv(r, x, 1, 1))), &pool); /* (B, 2w, S/4, S/4) */
    return linear(r, kn_flatten(c, x, 1, -1), 1);
}

kn_tensor *model_forward(kn_ctx *ctx, Model *m, kn_tensor *x, int training)
{
    static kn_tensor *(*const forwards[MD_COUNT])(Run *, kn_tensor *) = {forward_mlp, forward_cnn, forward_gpt,
                                                                        forward_smallcnn};
    ENTER(ctx, "model_forward");
    if (!m) return LEAVE(ctx, kn_err_null(ctx, "m"));
    if (!x) return LEAVE(ctx, kn_err_null(ctx, "x"));
    Run r = {ctx, m, 0, 0, training};
    kn_tensor *y = forwards[m->kind](&r, x);
    assert(!y || (r.p == m->params.n && r.b == m->buffers.n)); /* the walk matches the build */
    return LEAVE(ctx, y);
}

kn_tensor *model_loss(kn_ctx *ctx, Model *m, kn_tensor *x, kn_tensor *y, int training)
{
    ENTER(ctx, "model_loss");
    if (!m) return LEAVE(ctx, kn_err_null(ctx, "m"));
    kn_tensor *logits = model_forward(ctx, m, x, training);
    if (m->kind == MD_GPT) { /* (B, T, V) against (B, T): as (B*T, V) against (B*T) */
        int64_t flat[2] = {-1, m->cfg.vocab}, all = -1;
        logits = kn_reshape(ctx, logits, 2, flat);
        y = kn_reshape(ctx, y, 1, &all);
    }
    return LEAVE(ctx, kn_cross_entropy(ctx, logits, y, NULL));
}

/* ---- the lists ---- */

int model_nparams(const Model *m) { return m ? m->params.n : 0; }
kn_tensor **model_params(Model *m) { return m ? m->params.t : NULL; }
const char *const *model_param_names(const Model *m) { return m ? (const char *const *)m->params.names : NULL; }
int model_nbuffers(const Model *m) { return m ? m->buffers.n : 0; }
kn_tensor **model_buffers(Model *m) { return m ? m->buffers.t : NULL; }
const char *const *model_buffer_names(const Model *m) { return m ? (const char *const *)m->buffers.names : NULL; }

int64_t model_param_count(const Model *m)
{
    int64_t n = 0;
    for (int i = 0; m && i < m->params.n; i++) n += kn_numel(m->params.t[i]);
    return n;
}

/* ---- synthetic batches ---- */

/* Integers uniform in [0, n), i64: floor(u * n) clamped, u ~ U[0, 1) in f64. */
static kn_tensor *uniform_ints(kn_ctx *c, int ndim, const int64_t *shape, int64_t n)
{
    kn_tensor *u = kn_mul(c, kn_rand(c, KN_F64, ndim, shape), kn_scalar(c, (double)n));
    return kn_to(c, kn_clamp(c, kn_floor(c, u), 0.0, (double)(n - 1)), KN_I64);
}

kn_status model_batch(kn_ctx *ctx, const Model *m, int64_t batch, kn_tensor **x, kn_tensor **y)
{
    if (!ctx) return KN_EINVAL;
    const char *saved = op_enter(ctx, "model_batch");
    kn_status s = KN_OK;
    if (x) *x = NULL;
    if (y) *y = NULL;
    if (!m || !x || !y) s = kn_errs(ctx, KN_EINVAL, "operand '%s' is NULL", !m ? "m" : !x ? "x" : "y");
    else if (batch < 1) s = kn_errs(ctx, KN_EINVAL, "batch = %lld is not positive", (long long)batch);
    if (s != KN_OK) {
        op_leave(ctx, saved);
        return s;
    }
    const ModelCfg *c = &m->cfg;
    int64_t img[4] = {batch, c->in_ch, c->side, c->side}, feat[2] = {batch, 784}, tok[2] = {batch, c->context};
    kn_tensor *xs, *ys;
    kn_scope_begin(ctx); /* the temporaries of the label draws */
    switch (m->kind) {
    case MD_GPT:
        xs = uniform_ints(ctx, 2, tok, c->vocab);
        ys = uniform_ints(ctx, 2, tok, c->vocab);
        break;
    case MD_MLP:
        xs = kn_randn(ctx, c->dtype, 2, feat);
        ys = uniform_ints(ctx, 1, &batch, 10);
        break;
    default:
        xs = kn_randn(ctx, c->dtype, 4, img);
        ys = uniform_ints(ctx, 1, &batch, 10);
        break;
    }
    if (xs && ys) {
        *x = kn_keep(ctx, xs);
        *y = kn_keep(ctx, ys);
    }
    kn_scope_end(ctx);
    if (!*x) s = kn_last_status(ctx) != KN_OK ? kn_last_status(ctx) : KN_ENOMEM;
    op_leave(ctx, saved);
    return s;
}
