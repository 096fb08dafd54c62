/*
 * test_models.c — the three models of docs/BENCHMARKS.md, small, trained eagerly
 * by kiln and checked against PyTorch, as llm.c's test_gpt2.c checks its model.
 *
 * tests/ref/gen_models.py (run with /usr/bin/python3) wrote
 * tests/ref/data/models.bin: for mlp, cnn and gpt the initial weights,
 * inputs, targets, the loss, every parameter gradient, the losses of 10 Adam
 * steps and (cnn) the final BatchNorm running stats. This program builds each
 * model in eager mode with one kn_ call per PyTorch call of gen_models.py,
 * from the same weights (kn_tensor_from + kn_param), and checks:
 *   - the loss within 1e-4 relative;
 *   - every gradient: ||g - g_ref|| / ||g_ref|| <= 1e-4 per parameter, and each
 *     element within 1e-5 + 1e-4 |g_ref|;
 *   - 10 Adam steps (lr 1e-3; each kn_optim_zero_grad, forward, kn_backward,
 *     kn_optim_step inside kn_scope_begin/kn_scope_end): each loss within 1e-4
 *     relative; the cnn's running stats after all 11 forward passes, as the
 *     gradients;
 *   - memory: 100 mlp steps hold kn_live_tensors and kn_live_bytes flat (the
 *     counts after step 100 equal those after step 2); 12 cnn and gpt steps too.
 * It prints one line per model with the measured errors.
 *
 * Run from the repository root:  build/tests/test_models
 */
#include <stdlib.h>

#include "test.h"
#include "ref/fixture.h"
#include "../src/core.h"
#include "../src/partition.h"

#define MODELS_FILE FX_DATA_DIR "/models.bin"
#define MAX_ENTRIES 128
#define MAX_PARAMS 64
#define ADAM_STEPS 10
#define FLAT_STEPS 100   /* mlp */
#define FLAT_STEPS_BIG 12 /* cnn and gpt: the same check, shorter */
#define REL_TOL 1e-4  /* loss, gradient norms, Adam losses, running stats */
#define ELEM_ATOL 1e-5

/* ---- the fixture: one model's named tensors ---- */

typedef struct {
    char key[FX_MAX_NAME];
    FxTensor t;
} Entry;

typedef struct {
    char name[FX_MAX_NAME];
    int n;
    Entry e[MAX_ENTRIES];
} Model;

static void model_free(Model *m)
{
    int i;
    for (i = 0; i < m->n; i++) free(m->e[i].t.data);
    m->n = 0;
}

/* Reads the next model: 1 read, -1 bad file (f->error set). */
static int model_read(FxFile *f, Model *m)
{
    int i;
    memset(m, 0, sizeof *m);
    if (fx_str(f, m->name, sizeof m->name) || fx_count(f, MAX_ENTRIES, &m->n)) return -1;
    for (i = 0; i < m->n; i++) {
        if (fx_str(f, m->e[i].key, sizeof m->e[i].key) || fx_tensor(f, &m->e[i].t)) {
            m->n = i + 1;
            model_free(m);
            return -1;
        }
    }
    f->read++;
    return 1;
}

static const FxTensor *entry(const Model *m, const char *key)
{
    int i;
    for (i = 0; i < m->n; i++)
        if (strcmp(m->e[i].key, key) == 0) return &m->e[i].t;
    return NULL;
}

/* Element i of an f32 or f64 fixture tensor. */
static double fx_at(const FxTensor *t, int64_t i)
{
    float f;
    double d;
    if (t->code == KN_F64) {
        memcpy(&d, t->data + (size_t)i * 8, 8);
        return d;
    }
    memcpy(&f, t->data + (size_t)i * 4, 4);
    return f;
}

/* ---- a network under test: its context, parameters and buffers ---- */

typedef struct {
    kn_ctx *ctx;
    const Model *m;
    kn_tensor *x, *y;
    int np, nb;
    const char *pname[MAX_PARAMS], *bname[MAX_PARAMS];
    kn_tensor *p[MAX_PARAMS], *b[MAX_PARAMS];
    int broken; /* the fixture and the builder disagree; message printed */
} Net;

/* A tensor from a fixture entry, or NULL (with a failed CHECK) when it is missing. */
static kn_tensor *from_entry(Net *n, const char *key)
{
    const FxTensor *t = entry(n->m, key);
    kn_tensor *v;
    CHECK_MSG(t != NULL, "%s: models.bin has no \"%s\"", n->m->name, key);
    if (!t) return NULL;
    v = kn_tensor_from(n->ctx, (kn_dtype)t->code, t->ndim, t->shape, t->data);
    CHECK_MSG(v != NULL, "%s: kn_tensor_from(%s): %s", n->m->name, key, kn_last_error(n->ctx));
    return v;
}

/* Declares the next parameter, as gen_models.py's Init does: its name must be
 * the fixture's next "p." entry (same order), and it starts from that entry. */
static void param(Net *n, const char *name)
{
    char key[FX_MAX_NAME];
    const char *want = NULL;
    int i, k = 0;
    for (i = 0; i < n->m->n && !want; i++)
        if (strncmp(n->m->e[i].key, "p.", 2) == 0 && k++ == n->np) want = n->m->e[i].key + 2;
    if (!want || strcmp(want, name) != 0 || n->np == MAX_PARAMS) {
        CHECK_MSG(0, "%s: parameter %d is \"%s\" here, \"%s\" in models.bin", n->m->name, n->np, name,
                  want ? want : "(none)");
        n->broken = 1;
        return;
    }
    snprintf(key, sizeof key, "p.%s", name);
    n->pname[n->np] = want;
    n->p[n->np++] = kn_param(n->ctx, from_entry(n, key));
}

/* A buffer (BatchNorm running stats): kept across scopes, no grad. */
static void buffer(Net *n, const char *name)
{
    char key[FX_MAX_NAME];
    int i;
    snprintf(key, sizeof key, "b.%s", name);
    if (n->nb == MAX_PARAMS) return;
    n->bname[n->nb] = "?";
    for (i = 0; i < n->m->n; i++)
        if (strcmp(n->m->e[i].key, key) == 0) n->bname[n->nb] = n->m->e[i].key + 2;
    n->b[n->nb++] = kn_keep(n->ctx, from_entry(n, key));
}

static kn_tensor *lookup(kn_tensor *const *ts, const char *const *names, int count, const char *name)
{
    int i;
    for (i = 0; i < count; i++)
        if (strcmp(names[i], name) == 0) return ts[i];
    return NULL;
}

/* Parameter or buffer "prefix.suffix"; NULL makes the op that takes it fail. */
static kn_tensor *P(Net *n, const char *prefix, const char *suffix)
{
    char name[FX_MAX_NAME];
    snprintf(name, sizeof name, "%s%s", prefix, suffix);
    return lookup(n->p, n->pname, n->np, name);
}

static kn_tensor *B(Net *n, const char *prefix, const char *suffix)
{
    char name[FX_MAX_NAME];
    snprintf(name, sizeof name, "%s%s", prefix, suffix);
    return lookup(n->b, n->bname, n->nb, name);
}

/* The declarations gen_models.py's Init makes, by layer kind. */
static void linear(Net *n, const char *name, int bias)
{
    char s[FX_MAX_NAME + 8];
    snprintf(s, sizeof s, "%s.w", name);
    param(n, s);
    if (!bias) return;
    snprintf(s, sizeof s, "%s.b", name);
    param(n, s);
}

static void norm(Net *n, const char *name, int running)
{
    char s[FX_MAX_NAME + 8];
    linear(n, name, 1); /* weight and bias */
    if (!running) return;
    snprintf(s, sizeof s, "%s.mean", name);
    buffer(n, s);
    snprintf(s, sizeof s, "%s.var", name);
    buffer(n, s);
}

/* ---- mlp: Linear 64->32, ReLU, Linear 32->32, ReLU, Linear 32->10 ---- */

static void mlp_build(Net *n)
{
    linear(n, "fc1", 1);
    linear(n, "fc2", 1);
    linear(n, "fc3", 1);
}

static kn_tensor *mlp_forward(Net *n)
{
    kn_ctx *c = n->ctx;
    kn_tensor *h = kn_relu(c, kn_linear(c, n->x, P(n, "fc1", ".w"), P(n, "fc1", ".b"))); /* (8, 32) */
    h = kn_relu(c, kn_linear(c, h, P(n, "fc2", ".w"), P(n, "fc2", ".b")));                /* (8, 32) */
    return kn_linear(c, h, P(n, "fc3", ".w"), P(n, "fc3", ".b"));                          /* (8, 10) */
}

/* ---- cnn: ResNet stem, two BasicBlocks, pool, Linear ---- */

static void cnn_build(Net *n)
{
    static const char *const convs[] = {"stem", "l1.conv1", "l1.conv2", "l2.conv1", "l2.conv2", "l2.sc"};
    static const char *const bns[] = {"stem.bn", "l1.bn1", "l1.bn2", "l2.bn1", "l2.bn2", "l2.sc.bn"};
    char s[FX_MAX_NAME];
    int i;
    for (i = 0; i < 6; i++) {
        snprintf(s, sizeof s, i == 0 || i == 5 ? "%s.conv" : "%s", convs[i]);
        param(n, s);
        norm(n, bns[i], 1);
    }
    linear(n, "fc", 1);
}

static kn_tensor *conv(Net *n, kn_tensor *h, const char *name, int stride, int pad)
{
    kn_conv_opts o;
    memset(&o, 0, sizeof o);
    o.stride[0] = o.stride[1] = stride;
    o.padding[0] = o.padding[1] = pad;
    return kn_conv2d(n->ctx, h, P(n, name, ""), NULL, &o);
}

/* BatchNorm2d in training mode: batch statistics; running stats updated in place. */
static kn_tensor *bn(Net *n, kn_tensor *h, const char *name)
{
    return kn_batch_norm(n->ctx, h, B(n, name, ".mean"), B(n, name, ".var"), P(n, name, ".w"), P(n, name, ".b"),
                         1, 0.1, 1e-5);
}

static kn_tensor *cnn_forward(Net *n)
{
    kn_ctx *c = n->ctx;
    kn_tensor *h, *o, *s;
    h = kn_relu(c, bn(n, conv(n, n->x, "stem.conv", 1, 1), "stem.bn"));  /* (4, 8, 8, 8) */
    o = kn_relu(c, bn(n, conv(n, h, "l1.conv1", 1, 1), "l1.bn1"));
    o = bn(n, conv(n, o, "l1.conv2", 1, 1), "l1.bn2");
    h = kn_relu(c, kn_add(c, o, h));                                      /* (4, 8, 8, 8) */
    o = kn_relu(c, bn(n, conv(n, h, "l2.conv1", 2, 1), "l2.bn1"));
    o = bn(n, conv(n, o, "l2.conv2", 1, 1), "l2.bn2");
    s = bn(n, conv(n, h, "l2.sc.conv", 2, 0), "l2.sc.bn");
    h = kn_relu(c, kn_add(c, o, s));                                      /* (4, 16, 4, 4) */
    h = kn_flatten(c, kn_adaptive_avg_pool2d(c, h, 1, 1), 1, -1);         /* (4, 16) */
    return kn_linear(c, h, P(n, "fc", ".w"), P(n, "fc", ".b"));           /* (4, 10) */
}

/* ---- gpt: vocab 64, context 16, d 64, 2 layers, 4 heads ---- */

enum { VOCAB = 64, CONTEXT = 16, D = 64, LAYERS = 2, HEADS = 4 };

static void gpt_build(Net *n)
{
    char h[32], s[FX_MAX_NAME];
    int l;
    param(n, "wte");
    param(n, "wpe");
    for (l = 0; l < LAYERS; l++) {
        snprintf(h, sizeof h, "h%d.", l);
        snprintf(s, sizeof s, "%sln1", h);
        norm(n, s, 0);
        snprintf(s, sizeof s, "%sattn.qkv", h);
        linear(n, s, 1);
        snprintf(s, sizeof s, "%sattn.proj", h);
        linear(n, s, 1);
        snprintf(s, sizeof s, "%sln2", h);
        norm(n, s, 0);
        snprintf(s, sizeof s, "%smlp.fc", h);
        linear(n, s, 1);
        snprintf(s, sizeof s, "%smlp.proj", h);
        linear(n, s, 1);
    }
    norm(n, "lnf", 0);
    linear(n, "head", 0);
}

static kn_tensor *layer_norm(Net *n, kn_tensor *x, const char *prefix, const char *name)
{
    char s[FX_MAX_NAME];
    int64_t d = D;
    snprintf(s, sizeof s, "%s%s", prefix, name);
    return kn_layer_norm(n->ctx, x, 1, &d, P(n, s, ".w"), P(n, s, ".b"), 1e-5);
}

/* Causal self-attention: (B, T, D) -> (B, T, D). */
static kn_tensor *attention(Net *n, kn_tensor *h, const char *prefix)
{
    kn_ctx *c = n->ctx;
    kn_tensor *parts[3], *qkv, *att, *causal, *y;
    int64_t b = kn_shape(h)[0], t = kn_shape(h)[1], hd = D / HEADS;
    int64_t heads[4] = {b, t, HEADS, hd}, tt[2] = {t, t}, back[3] = {b, t, D};
    char s[FX_MAX_NAME];
    int i;
    snprintf(s, sizeof s, "%sattn.qkv", prefix);
    qkv = kn_linear(c, h, P(n, s, ".w"), P(n, s, ".b"));                      /* (B, T, 3D) */
    if (kn_split(c, qkv, D, 2, parts, 3) != 3) return NULL;
    for (i = 0; i < 3; i++) parts[i] = kn_transpose(c, kn_reshape(c, parts[i], 4, heads), 1, 2); /* (B, H, T, hd) */
    att = kn_matmul(c, parts[0], kn_transpose(c, parts[1], -2, -1));        /* (B, H, T, T) */
    att = kn_mul(c, att, kn_scalar(c, 1.0 / sqrt((double)hd)));
    causal = kn_tril(c, kn_ones(c, KN_BOOL, 2, tt), 0);
    att = kn_softmax(c, kn_masked_fill(c, att, kn_logical_not(c, causal), -INFINITY), -1);
    y = kn_reshape(c, kn_transpose(c, kn_matmul(c, att, parts[2]), 1, 2), 3, back); /* (B, T, D) */
    snprintf(s, sizeof s, "%sattn.proj", prefix);
    return kn_linear(c, y, P(n, s, ".w"), P(n, s, ".b"));
}

static kn_tensor *gpt_forward(Net *n)
{
    kn_ctx *c = n->ctx;
    kn_tensor *x, *h;
    int64_t t = kn_shape(n->y)[1], flat[2] = {-1, VOCAB};
    char pre[32];
    int l;
    x = kn_add(c, kn_embedding(c, P(n, "wte", ""), n->x), kn_slice(c, P(n, "wpe", ""), 0, 0, t, 1)); /* (B, T, D) */
    for (l = 0; l < LAYERS; l++) {
        snprintf(pre, sizeof pre, "h%d.", l);
        x = kn_add(c, x, attention(n, layer_norm(n, x, pre, "ln1"), pre));
        h = layer_norm(n, x, pre, "ln2");
        snprintf(pre, sizeof pre, "h%d.mlp.fc", l);
        h = kn_gelu(c, kn_linear(c, h, P(n, pre, ".w"), P(n, pre, ".b")), 1); /* (B, T, 4D) */
        snprintf(pre, sizeof pre, "h%d.mlp.proj", l);
        x = kn_add(c, x, kn_linear(c, h, P(n, pre, ".w"), P(n, pre, ".b")));
    }
    x = layer_norm(n, x, "", "lnf");
    return kn_reshape(c, kn_linear(c, x, P(n, "head", ".w"), NULL), 2, flat); /* (B*T, V) */
}

/* ---- the checks ---- */

typedef struct {
    const char *name;
    void (*build)(Net *n);
    kn_tensor *(*forward)(Net *n);
} Arch;

static const Arch archs[] = {
    {"mlp", mlp_build, mlp_forward},
    {"cnn", cnn_build, cnn_forward},
    {"gpt", gpt_build, gpt_forward},
};

/* cross_entropy(forward(x), y flattened), mean; NULL with an error pending. */
static kn_tensor *loss_of(Net *n, const Arch *a)
{
    kn_loss_opts o;
    int64_t all = -1;
    memset(&o, 0, sizeof o);
    return kn_cross_entropy(n->ctx, a->forward(n), kn_reshape(n->ctx, n->y, 1, &all), &o);
}

static int net_open(Net *n, const Model *m, const Arch *a)
{
    memset(n, 0, sizeof *n);
    n->m = m;
    n->ctx = kn_ctx_new(NULL);
    if (!n->ctx) return 0;
    n->x = kn_keep(n->ctx, from_entry(n, "x"));
    n->y = kn_keep(n->ctx, from_entry(n, "y"));
    a->build(n);
    CHECK_MSG(!n->broken && kn_last_status(n->ctx) == KN_OK, "%s: building the model: %s", m->name,
              kn_last_error(n->ctx));
    return !n->broken && kn_last_status(n->ctx) == KN_OK && n->x && n->y;
}

/* How far t (f32) is from want: the norm-relative error, and whether every element is close. */
static double tensor_err(Net *n, kn_tensor *t, const FxTensor *want, int *elems_ok)
{
    float *buf = malloc((size_t)(want->numel ? want->numel : 1) * sizeof *buf);
    double d2 = 0, r2 = 0, g, r;
    int64_t i;
    *elems_ok = 0;
    if (!buf) return INFINITY;
    if (kn_numel(t) != want->numel || kn_read(n->ctx, t, buf, (size_t)want->numel * sizeof *buf) != KN_OK) {
        free(buf);
        return INFINITY;
    }
    *elems_ok = 1;
    for (i = 0; i < want->numel; i++) {
        g = buf[i];
        r = fx_at(want, i);
        d2 += (g - r) * (g - r);
        r2 += r * r;
        if (!test_close(g, r, REL_TOL, ELEM_ATOL)) *elems_ok = 0;
    }
    free(buf);
    return r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
}

static double rel_err(double got, double want) { return fabs(got - want) / fabs(want); }

/* Loss and every gradient at the initial weights; returns the worst gradient error. */
static double check_grads(Net *n, const Arch *a, double *loss_err)
{
    char key[FX_MAX_NAME];
    kn_tensor *loss, *g;
    double v = NAN, e, worst = 0;
    const FxTensor *want = entry(n->m, "loss");
    int i, elems_ok;
    kn_scope_begin(n->ctx);
    loss = loss_of(n, a);
    CHECK_MSG(loss && kn_item(n->ctx, loss, &v) == KN_OK, "%s: forward: %s", n->m->name, kn_last_error(n->ctx));
    *loss_err = want ? rel_err(v, fx_at(want, 0)) : INFINITY;
    CHECK_MSG(*loss_err <= REL_TOL, "%s: loss %.9g, PyTorch %.9g", n->m->name, v, want ? fx_at(want, 0) : NAN);
    CHECK_MSG(loss && kn_backward(n->ctx, loss, 0) == KN_OK, "%s: kn_backward: %s", n->m->name,
              kn_last_error(n->ctx));
    for (i = 0; i < n->np; i++) {
        snprintf(key, sizeof key, "g.%s", n->pname[i]);
        want = entry(n->m, key);
        g = kn_grad(n->ctx, n->p[i]);
        e = g && want ? tensor_err(n, g, want, &elems_ok) : INFINITY;
        if (e > worst) worst = e;
        CHECK_MSG(e <= REL_TOL && elems_ok, "%s: gradient of %s: relative error %.3g%s", n->m->name, n->pname[i], e,
                  g ? (elems_ok ? "" : ", and an element off by more than 1e-5 + 1e-4 |ref|") : " (no .grad)");
    }
    kn_scope_end(n->ctx);
    return worst;
}

/* One training step; returns the loss before the update (NaN on failure). */
static double train_step(Net *n, const Arch *a, kn_optim *opt)
{
    kn_tensor *loss;
    double v = NAN;
    kn_scope_begin(n->ctx);
    kn_optim_zero_grad(opt);
    loss = loss_of(n, a);
    if (!loss || kn_item(n->ctx, loss, &v) != KN_OK || kn_backward(n->ctx, loss, 0) != KN_OK ||
        kn_optim_step(opt) != KN_OK)
        v = NAN;
    kn_scope_end(n->ctx);
    return v;
}

static kn_optim *adam(Net *n)
{
    kn_adam_opts o;
    kn_optim *opt;
    memset(&o, 0, sizeof o); /* PyTorch's defaults: lr 1e-3, betas 0.9, 0.999, eps 1e-8 */
    opt = kn_adam(n->ctx, n->p, n->np, &o);
    CHECK_MSG(opt != NULL, "%s: kn_adam: %s", n->m->name, kn_last_error(n->ctx));
    return opt;
}

/* 10 Adam steps from the initial weights; returns the worst loss error. */
static double check_adam(Net *n, const Arch *a)
{
    const FxTensor *want = entry(n->m, "losses");
    kn_optim *opt = adam(n);
    double v, e, worst = 0;
    int s;
    CHECK_MSG(want && want->numel == ADAM_STEPS, "%s: models.bin has no %d losses", n->m->name, ADAM_STEPS);
    if (!opt || !want || want->numel != ADAM_STEPS) return INFINITY;
    for (s = 0; s < ADAM_STEPS; s++) {
        v = train_step(n, a, opt);
        e = rel_err(v, fx_at(want, s));
        if (!(e <= worst)) worst = e;
        CHECK_MSG(e <= REL_TOL, "%s: Adam step %d: loss %.9g, PyTorch %.9g (%s)", n->m->name, s + 1, v,
                  fx_at(want, s), isnan(v) ? kn_last_error(n->ctx) : "relative error over 1e-4");
    }
    kn_optim_free(opt);
    return worst;
}

/* The running stats after the 11 forward passes; returns the worst error. */
static double check_buffers(Net *n)
{
    char key[FX_MAX_NAME];
    double e, worst = 0;
    int i, elems_ok;
    for (i = 0; i < n->nb; i++) {
        snprintf(key, sizeof key, "bf.%s", n->bname[i]);
        e = entry(n->m, key) ? tensor_err(n, n->b[i], entry(n->m, key), &elems_ok) : INFINITY;
        if (e > worst) worst = e;
        CHECK_MSG(e <= REL_TOL && elems_ok, "%s: running stat %s after 11 steps: relative error %.3g", n->m->name,
                  n->bname[i], e);
    }
    return worst;
}

static void check_model(const Model *m, const Arch *a)
{
    Net n;
    double loss_err = INFINITY, grad_err = INFINITY, adam_err = INFINITY, buf_err = 0;
    if (net_open(&n, m, a)) {
        grad_err = check_grads(&n, a, &loss_err);
        adam_err = check_adam(&n, a);
        buf_err = check_buffers(&n);
    }
    printf("%s: %d params; loss rel err %.2e; max grad rel err %.2e; Adam losses max rel err %.2e", m->name,
           n.np, loss_err, grad_err, adam_err);
    if (n.nb) printf("; running stats max rel err %.2e", buf_err);
    printf("\n");
    kn_ctx_free(n.ctx);
}

/* An eager training loop holds memory flat: live tensors and bytes after the
 * last of steps equal those after step 2. */
static void check_flat(const Model *m, const Arch *a, int steps)
{
    Net n;
    kn_optim *opt;
    size_t tensors2 = 0, bytes2 = 0;
    double v = 0;
    int s;
    if (!net_open(&n, m, a) || !(opt = adam(&n))) {
        kn_ctx_free(n.ctx);
        return;
    }
    for (s = 1; s <= steps && !isnan(v); s++) {
        v = train_step(&n, a, opt);
        if (s == 2) {
            tensors2 = kn_live_tensors(n.ctx);
            bytes2 = kn_live_bytes(n.ctx);
        }
    }
    CHECK_MSG(!isnan(v), "%s: step %d failed: %s", m->name, s - 1, kn_last_error(n.ctx));
    CHECK_MSG(kn_live_tensors(n.ctx) == tensors2 && kn_live_bytes(n.ctx) == bytes2,
              "%s: after step 2 %zu tensors, %zu bytes; after step %d %zu tensors, %zu bytes", m->name, tensors2,
              bytes2, steps, kn_live_tensors(n.ctx), kn_live_bytes(n.ctx));
    printf("%s: %d eager Adam steps, %zu live tensors and %zu bytes after step 2 and after step %d\n", m->name,
           steps, tensors2, bytes2, steps);
    kn_optim_free(opt);
    kn_ctx_free(n.ctx);
}

/* The traced joint graph (forward + backward) of the loss, split by the
 * partitioner into a forward and a backward program: run one after the
 * other on the interpreter they give PyTorch's loss and gradients, and
 * recomputing cheap values saves bytes over saving everything. */
static void check_partition(const Model *m, const Arch *a)
{
    Net n;
    kn_tensor *g[MAX_PARAMS];
    uint32_t gout[MAX_PARAMS];
    if (!net_open(&n, m, a)) {
        kn_ctx_free(n.ctx);
        return;
    }
    kn_ctx *c = n.ctx;
    Arena ar;
    arena_init(&ar, c);
    Graph *gr = c->trace = graph_new(c);
    kn_tensor *loss = loss_of(&n, a);
    int ok = loss && autodiff_grads(c, loss, n.np, n.p, g) == KN_OK;
    for (int i = 0; ok && i < n.np; i++) ok = g[i] && (gout[i] = g[i]->node) != 0;
    c->trace = NULL;
    Partition pa;
    uint32_t lout = ok ? loss->node : 0;
    ok = ok && partition_joint(c, gr, &lout, 1, gout, n.np, 0, &ar, &pa) == 0;
    kn_tensor **fv = arena_alloc(&ar, gr->n * sizeof *fv), **bv = arena_alloc(&ar, gr->n * sizeof *bv);
    if (ok && fv && bv) {
        graph_run_bind(gr, fv);
        graph_run_bind(gr, bv);
        ok = graph_run(c, gr, pa.fwd, pa.nfwd, fv) == KN_OK;
        for (int i = 0; ok && i < pa.nsaved; i++) bv[pa.saved[i]] = fv[pa.saved[i]];
        ok = ok && graph_run(c, gr, pa.bwd, pa.nbwd, bv) == KN_OK;
    }
    CHECK_MSG(ok, "%s: joint graph, partition and run: %s", m->name, kn_last_error(c));
    double worst = 0, v = NAN;
    int elems_ok = 1;
    if (ok && kn_item(c, fv[lout], &v) == KN_OK) worst = rel_err(v, fx_at(entry(m, "loss"), 0));
    for (int i = 0; ok && i < n.np; i++) {
        char key[FX_MAX_NAME];
        snprintf(key, sizeof key, "g.%s", n.pname[i]);
        double e = tensor_err(&n, bv[gout[i]], entry(m, key), &elems_ok);
        worst = e > worst ? e : worst;
    }
    CHECK_MSG(ok && worst <= REL_TOL && elems_ok, "%s: partitioned programs: max relative error %.3g", m->name, worst);
    CHECK_MSG(ok && pa.saved_bytes < pa.saved_bytes_all, "%s: recomputation saves nothing (%zu vs %zu bytes)",
              m->name, ok ? pa.saved_bytes : 0, ok ? pa.saved_bytes_all : 0);
    if (ok)
        printf("%s: joint graph %u nodes; forward %d, backward %d nodes; saved %zu bytes with recomputation, "
               "%zu without; max rel err vs PyTorch %.2e\n",
               m->name, gr->n - 1, pa.nfwd, pa.nbwd, pa.saved_bytes, pa.saved_bytes_all, worst);
    autodiff_release(c);
    arena_free(&ar);
    graph_free(gr);
    kn_ctx_free(c);
}

int main(void)
{
    static Model m; /* large: off the stack */
    FxFile f;
    size_t i;
    int seen = 0;
    if (fx_open_magic(&f, MODELS_FILE, "KNMOD001") != 0) {
        CHECK_MSG(0, "%s (run from the repo root; regenerate with /usr/bin/python3 tests/ref/gen_models.py)",
                  f.error);
        fx_close(&f);
        TEST_END("test_models");
    }
    while (f.read < f.ncases && model_read(&f, &m) == 1) {
        for (i = 0; i < sizeof archs / sizeof archs[0]; i++) {
            if (strcmp(archs[i].name, m.name) != 0) continue;
            check_model(&m, &archs[i]);
            check_flat(&m, &archs[i], strcmp(m.name, "mlp") == 0 ? FLAT_STEPS : FLAT_STEPS_BIG);
            if (strcmp(m.name, "cnn") != 0) check_partition(&m, &archs[i]); /* cnn: traced batch_norm is issue 5 */
            seen++;
        }
        model_free(&m);
    }
    CHECK_MSG(!f.error[0] && seen == 3 && fgetc(f.fp) == EOF, "%s: %s; %d of the 3 models", MODELS_FILE,
              f.error[0] ? f.error : "bad file", seen);
    fx_close(&f);
    TEST_END("test_models");
}
