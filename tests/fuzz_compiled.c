/*
 * fuzz_compiled.c — a differential fuzzer of kn_compile: random programs of
 * public ops, compiled on every backend in each mode, against eager.
 *
 * A program is a straight-line body of public ops (pointwise, reductions,
 * views, indexing, dot, conv, pools, norms, losses, random ops, reads that
 * break the graph) over inputs of random shapes (sizes 0, 1, primes, large),
 * dtypes and views (transposed, strided, expanded), with or without grad: a
 * body that calls kn_backward (and maybe an optimizer step) and returns the
 * grads, or a compiled forward whose backward runs outside. gen() makes it
 * from (seed, index) alone, so each is reproducible. It runs eagerly (backend
 * interp, no kn_compile: the oracle), eagerly again with every float in f64
 * (how far rounding alone moves each value), then compiled in a few
 * configurations (backend interp, tcc or c; mode default, reduce-overhead or
 * max-autotune; dynamic auto, on or off), each called several times (at
 * several sizes of the dim s0 where it has one). Every call's outputs, grads
 * and parameters must equal eager's: integers exactly, floats within a
 * tolerance that grows with the longest reduction and with eager's own
 * rounding error. Errors are allowed (a bad dim, an index out of range) but
 * eager and compiled must agree on whether one happens; KN_EUNSUPPORTED from
 * kn_call (a documented limit of capture) is counted apart. A generic entry
 * must not recompile per size, and eager runs check a few pointwise ops
 * against C's libm (torch's semantics).
 *
 * Each program runs in a child process (fork), so a crash or a hang is a
 * failure like any other. A failing program is shrunk (dead values, outputs,
 * ops replaced by an operand, smaller sizes, plain f32 inputs, fewer calls, a
 * simpler configuration) while it still fails the same way, and printed as a
 * test program for tests/test.h: the body, the inputs of each call, a check.
 *
 * Bug classes: those fixed run unless left out (--without CLASS,...): rand
 * (random ops: fresh numbers at every call), empty (size-0 dims), longsum
 * (reductions of up to 10^7 elements; the CI set's stop at 10^6), itembwd
 * (kn_item or kn_read before a backward, in the body or after the call),
 * fmod (kn_fmod against libm: fmod(5, inf), inexact results), cumsum (the
 * recompile check on programs with cumsum), viewwrite (an output that is a
 * view of a parameter the body's optimizer step writes), passgrad (a
 * compiled forward that returns a leaf itself, its backward outside), viewnc
 * (kn_view of a traced tensor that eager refuses: compiled must refuse it
 * too). Those still open run only when asked for (--with CLASS,... or
 * $KN_FUZZ_WITH; "all"): dynspec (the recompile check on every program: ops
 * outside generic_kind, grad, parameters, unused inputs in s0, a probe at
 * size 2), readout (reads in a compiled forward whose backward runs after the
 * call: on tcc, --seed 5 --index 36 gives a leaf a grad eager does not, --seed
 * 7 --index 26 fails a backward eager runs).
 *
 *     build/tests/fuzz_compiled                 the CI seed set: "fuzz_compiled: P passed, F failed"
 *     build/tests/fuzz_compiled --seconds 60    random seeds until then, a summary (make fuzz SECONDS=60)
 *     build/tests/fuzz_compiled --seed S --index I [-v]   one program (-v: printed); shrunk if it fails
 *     options: --with/--without CLASS,...  --count N (programs per seed)  --backends interp,tcc,c
 *              --ops sum,cumsum,... (only these)  --no-shrink  -v
 */
#if (defined(__unix__) || defined(__APPLE__)) && !defined(__wasi__) && !defined(__EMSCRIPTEN__)
#define HAVE_POSIX 1
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#else
#define HAVE_POSIX 0
#endif
#include <stdarg.h>
#include <stdint.h>
#include <time.h>

#include "test.h"
#include "../port/port.h"

#define MAXOPS 48    /* values of a program: inputs, scalars and ops */
#define MAXIN 16     /* inputs (kn_call inputs and parameters) */
#define MAXOUT 6     /* outputs the program picks */
#define MAXVARS 8    /* sizes the inputs' dims are drawn from */
#define MAXCALLS 4   /* kn_calls of one compiled fn */
#define MAXCFG 4     /* configurations a program is compiled in */
#define MSG 512

#define CI_SEEDS 8     /* the CI set: seeds 1..CI_SEEDS, */
#ifdef __SANITIZE_ADDRESS__ /* make asan: the sanitizers run each program some 3 times slower */
#define CI_PROGRAMS 10
#else
#define CI_PROGRAMS 60 /* programs 0..CI_PROGRAMS-1 of each (a few minutes on 2 cores), */
#endif
#define CI_C 12        /* backend c for the first CI_C of them */

/* ---- the bug classes a run includes ---- */

enum { CL_RAND, CL_EMPTY, CL_LONGSUM, CL_ITEMBWD, CL_FMOD, CL_CUMSUM, CL_VIEWWRITE, CL_PASSGRAD, CL_VIEWNC,
       CL_DYNSPEC, CL_READOUT, NCLASS };
static const char *const class_name[NCLASS] = {"rand", "empty", "longsum", "itembwd", "fmod", "cumsum",
                                               "viewwrite", "passgrad", "viewnc", "dynspec", "readout"};
/* which classes a run includes: the fixed ones by default (a regression in them is a failure like any
 * other; --without leaves one out), the open ones only when asked for */
static const uint8_t class_default[NCLASS] = {[CL_RAND] = 1,   [CL_EMPTY] = 1,     [CL_LONGSUM] = 1,  [CL_ITEMBWD] = 1,
                                              [CL_FMOD] = 1,   [CL_CUMSUM] = 1,    [CL_VIEWWRITE] = 1, [CL_PASSGRAD] = 1,
                                              [CL_VIEWNC] = 1};
static int with[NCLASS];

static int verbose;
static int64_t long_max = INT64_MAX; /* programs with a longer reduction are skipped (the CI set: 10^6) */

/* ---- a small generator: splitmix64 ---- */

typedef struct {
    uint64_t s;
} Rng;

static uint64_t next64(Rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int rnd(Rng *r, int n) { return n <= 1 ? 0 : (int)(next64(r) % (uint64_t)n); }
static int chance(Rng *r, int percent) { return rnd(r, 100) < percent; }

/* ---- input data: element i of an input is a function of (i, seed, kind) ---- */

enum {
    D_GRID,    /* k/32 for k in [-128, 128]: exact in every float dtype */
    D_POS,     /* k/32 for k in [1, 256] */
    D_CONT,    /* (nearly) continuous in [-3, 3) */
    D_UNIT,    /* k/256 for k in [1, 255]: probabilities */
    D_SPECIAL, /* D_GRID with one in 8 of inf, -inf, nan, -0 */
    D_INT,     /* integers in [lo, hi) */
    NDATA
};

static double fz_value(uint64_t i, uint32_t seed, int kind, int64_t lo, int64_t hi)
{
    static const double special[4] = {INFINITY, -INFINITY, NAN, -0.0};
    uint32_t h = (uint32_t)(i * 2654435761u) ^ seed;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    switch (kind) {
    case D_POS: return (double)(h % 256 + 1) / 32;
    case D_CONT: return (double)h / 4294967296.0 * 6 - 3;
    case D_UNIT: return (double)(h % 255 + 1) / 256;
    case D_SPECIAL:
        if (h % 8 == 0) return special[(h >> 3) % 4];
        return ((double)(h % 257) - 128) / 32;
    case D_INT: return (double)(lo + (int64_t)(h % (uint32_t)(hi > lo ? hi - lo : 1)));
    default: return ((double)(h % 257) - 128) / 32;
    }
}

/* ---- programs ---- */

/* The op kinds: most name a public op, kn_ and op_name (apply says which); RANDLIKE, ARANGE_ADD,
 * ITEM_SCALE and REREAD are small compositions of them, INPUT and SCALAR a program's leaves. */
#define FZ_OPS(X) \
    X(INPUT) X(SCALAR) \
    X(NEG) X(ABS) X(SIGN) X(EXP) X(LOG) X(SQRT) X(RSQRT) X(RECIPROCAL) \
    X(SQUARE) X(SIN) X(COS) X(TANH) X(ERF) X(FLOOR) X(CEIL) X(ROUND) \
    X(RELU) X(SIGMOID) X(SILU) X(HARDSWISH) X(LOGICAL_NOT) X(CONTIGUOUS) X(DETACH) \
    X(GELU) X(SOFTPLUS) X(ELU) X(LEAKY_RELU) X(CLAMP) X(TO) \
    X(ADD) X(SUB) X(MUL) X(DIV) X(POW) X(FMOD) X(MINIMUM) X(MAXIMUM) \
    X(EQ) X(NE) X(LT) X(LE) X(GT) X(GE) X(LOGICAL_AND) X(LOGICAL_OR) \
    X(LOGICAL_XOR) X(WHERE) X(MASKED_FILL) \
    X(SUM) X(MEAN) X(AMAX) X(AMIN) X(LOGSUMEXP) X(VAR) X(STD) \
    X(PROD) X(ARGMAX) X(ARGMIN) X(CUMSUM) X(SOFTMAX) X(LOG_SOFTMAX) \
    X(RESHAPE) X(VIEW) X(FLATTEN) X(SQUEEZE) X(UNSQUEEZE) X(TRANSPOSE) X(PERMUTE) \
    X(EXPAND) X(SLICE) X(NARROW) X(PAD) X(CAT) X(STACK) X(SPLIT) X(CHUNK) \
    X(TRIU) X(TRIL) \
    X(INDEX_SELECT) X(GATHER) X(SCATTER_ADD) X(EMBEDDING) X(ONE_HOT) \
    X(MATMUL) X(BMM) X(LINEAR) \
    X(CONV1D) X(CONV2D) X(CONV_T2D) X(MAX_POOL2D) X(AVG_POOL2D) X(ADAPTIVE_POOL2D) \
    X(LAYER_NORM) X(RMS_NORM) X(GROUP_NORM) X(BATCH_NORM) \
    X(MSE) X(L1) X(BCE) X(BCE_LOGITS) X(CROSS_ENTROPY) X(NLL) \
    X(DROPOUT) X(SDPA) X(RANDLIKE) X(ARANGE_ADD) \
    X(ITEM_SCALE) X(REREAD)

#define X_ENUM(name) K_##name,
enum { FZ_OPS(X_ENUM) NKINDS };
#define X_NAME(name) #name,
static const char *const kind_name[NKINDS] = {FZ_OPS(X_NAME)};

/* a * kn_shape(value v)[d] + b, or b where v < 0: a size the body reads at run time */
typedef struct {
    int16_t v;
    int8_t d;
    int32_t a;
    int64_t b;
} SzE;

enum { V_PLAIN, V_T, V_STRIDED, V_EXPAND, NVIEW }; /* how a kn_call input is a view of its base */
static const char *const view_name[NVIEW] = {"plain", "transposed", "strided", "expanded"};

typedef struct {
    uint8_t dt, nd, view, data;
    uint8_t param;      /* read from the parameter array (kn_compile_opts.params), not in[] */
    uint8_t reqgrad;    /* a leaf that requires grad */
    int8_t vd;          /* the view's dim */
    int8_t var[KN_MAX_DIMS]; /* which size each dim is (var 0 is s0 in a program with a dynamic dim) */
    int64_t lo, hi;     /* D_INT */
} InSpec;

typedef struct {
    uint8_t k, nsrc;
    int16_t src[5];     /* -1: NULL (an optional operand left out) */
    int64_t ip[8];
    double f[3];
    SzE e[2];
} Op;

enum { G_NONE, G_INSIDE, G_OUTSIDE };
static const char *const grad_name[3] = {"none", "inside", "outside"};

typedef struct {
    uint8_t backend, mode, dynamic;
} Config;

typedef struct {
    uint64_t seed;
    int index;
    int nvars;
    int64_t var[MAXVARS];
    int dyn;                 /* var 0 is s0: its size at call c is s[c] */
    int ncalls;
    int64_t s[MAXCALLS];
    int nin;
    InSpec in[MAXIN];
    int nops;
    Op op[MAXOPS];
    int nout;
    int16_t out[MAXOUT];
    int grad, dout;          /* grad mode; the output differentiated */
    int optim;               /* G_INSIDE: 0 none, 1 SGD with momentum, 2 Adam */
    int generic;             /* dynamic entries should stay generic (the recompile check applies) */
    int ncfg;
    Config cfg[MAXCFG];
} Prog;

static const char *const backend_name[3] = {"c", "tcc", "interp"};
static const char *const mode_name[3] = {"default", "reduce-overhead", "max-autotune"};
static const char *const dynamic_name[3] = {"auto", "on", "off"};
static const char *const dtype_c[KN_NDTYPES] = {"KN_F32", "KN_F64", "KN_F16", "KN_BF16",
                                                "KN_I32", "KN_I64", "KN_BOOL", "KN_U8"};

/* the public op's name (kn_ less) of kind k */
static const char *op_name(int k)
{
    static char buf[NKINDS][24];
    if (!buf[k][0])
        for (int i = 0; kind_name[k][i] && i < 23; i++)
            buf[k][i] = (char)(kind_name[k][i] >= 'A' && kind_name[k][i] <= 'Z' ? kind_name[k][i] + 32 : kind_name[k][i]);
    return buf[k];
}

static int is_float(int dt) { return dt == KN_F32 || dt == KN_F64 || dt == KN_F16 || dt == KN_BF16; }

/* ---- running a program: the body ---- */

/* the tolerance unit of a float dtype: rounding in another order (0 for the exact dtypes) */
static double dtype_eps(int dt)
{
    return dt == KN_F64 ? 1e-10 : dt == KN_F32 ? 2e-5 : dt == KN_F16 ? 2e-3 : dt == KN_BF16 ? 1.6e-2 : 0;
}

static int f64_mode; /* run with every float input and cast in f64 (the conditioning oracle) */

static int run_dtype(int dt) { return f64_mode && is_float(dt) ? KN_F64 : dt; }

typedef struct {
    const Prog *p;
    kn_tensor *param[MAXIN]; /* by input index, where in[k].param */
    kn_tensor *plist[MAXIN]; /* the parameter array kn_compile reads */
    int nparam;
    kn_tensor *leaf[MAXIN];  /* leaves that require grad, in input order */
    int nleaf;
    int inpos[MAXIN];        /* input k's position in the body's in[] */
    kn_optim *opt;
    int eager;               /* the oracle's run: sizes noted, reference checks on */
    int64_t maxred;          /* the longest reduction met (eager) */
    int zero_dim;            /* some value had a size-0 dim (eager) */
    double eps;              /* the largest rounding unit of any float value (eager) */
    char ref[MSG];           /* a reference check that failed (eager) */
    int ref_op;              /* its op, element and libm's value */
    int64_t ref_i;
    double ref_want;
    int rank[MAXOPS];        /* each value's rank (eager; -1 if not reached) */
    int fail_op;             /* the op that failed in the last call (-1: none) */
    int alias_leaf;          /* an output is a leaf itself (eager) */
    int alias_step;          /* an output changed with the optimizer step: a view of a parameter (eager) */
} Run;

typedef kn_tensor *(*Unary)(kn_ctx *, kn_tensor *);
typedef kn_tensor *(*Binary)(kn_ctx *, kn_tensor *, kn_tensor *);

static Unary unary_fn(int k)
{
    switch (k) {
    case K_NEG: return kn_neg;
    case K_ABS: return kn_abs;
    case K_SIGN: return kn_sign;
    case K_EXP: return kn_exp;
    case K_LOG: return kn_log;
    case K_SQRT: return kn_sqrt;
    case K_RSQRT: return kn_rsqrt;
    case K_RECIPROCAL: return kn_reciprocal;
    case K_SQUARE: return kn_square;
    case K_SIN: return kn_sin;
    case K_COS: return kn_cos;
    case K_TANH: return kn_tanh;
    case K_ERF: return kn_erf;
    case K_FLOOR: return kn_floor;
    case K_CEIL: return kn_ceil;
    case K_ROUND: return kn_round;
    case K_RELU: return kn_relu;
    case K_SIGMOID: return kn_sigmoid;
    case K_SILU: return kn_silu;
    case K_HARDSWISH: return kn_hardswish;
    case K_LOGICAL_NOT: return kn_logical_not;
    case K_CONTIGUOUS: return kn_contiguous;
    default: return NULL;
    }
}

static Binary binary_fn(int k)
{
    switch (k) {
    case K_ADD: return kn_add;
    case K_SUB: return kn_sub;
    case K_MUL: return kn_mul;
    case K_DIV: return kn_div;
    case K_POW: return kn_pow;
    case K_FMOD: return kn_fmod;
    case K_MINIMUM: return kn_minimum;
    case K_MAXIMUM: return kn_maximum;
    case K_EQ: return kn_eq;
    case K_NE: return kn_ne;
    case K_LT: return kn_lt;
    case K_LE: return kn_le;
    case K_GT: return kn_gt;
    case K_GE: return kn_ge;
    case K_LOGICAL_AND: return kn_logical_and;
    case K_LOGICAL_OR: return kn_logical_or;
    case K_LOGICAL_XOR: return kn_logical_xor;
    default: return NULL;
    }
}

static int64_t numel_of(int nd, const int64_t *s)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= s[i];
    return n;
}

static int64_t szval(kn_tensor *const *v, SzE e)
{
    if (e.v < 0 || !v[e.v] || e.d >= kn_ndim(v[e.v])) return e.b;
    return e.a * kn_shape(v[e.v])[e.d] + e.b;
}

/* The target shape of RESHAPE/VIEW (form ip[0]) for x: 0 all in one dim (-1); 1 dims ip[1] and
 * ip[1]+1 merged; 2 dim ip[1] split into (ip[2], -1); 3 a leading 1 added. */
static int reshape_target(kn_tensor *x, const Op *o, int64_t *t)
{
    int nd = kn_ndim(x), d = (int)o->ip[1], m = 0;
    const int64_t *s = kn_shape(x);
    if (o->ip[0] == 0) {
        t[0] = -1;
        return 1;
    }
    if (o->ip[0] == 3) {
        t[m++] = 1;
        for (int i = 0; i < nd && m < KN_MAX_DIMS; i++) t[m++] = s[i];
        return m;
    }
    for (int i = 0; i < nd; i++) {
        if (o->ip[0] == 1 && i == d && i + 1 < nd) {
            t[m++] = s[i] * s[i + 1];
            i++;
        } else if (o->ip[0] == 2 && i == d && m + 1 < KN_MAX_DIMS) {
            t[m++] = o->ip[2];
            t[m++] = -1;
        } else if (m < KN_MAX_DIMS) {
            t[m++] = s[i];
        }
    }
    return m;
}

static kn_status fail_status(kn_ctx *ctx)
{
    kn_status s = kn_last_status(ctx);
    return s ? s : KN_EINVAL;
}

/* A read of x's values inside the body: a graph break when compiled. */
static kn_tensor *reread(kn_ctx *ctx, kn_tensor *x)
{
    if (!x) return NULL;
    size_t n = (size_t)kn_numel(x) * kn_dtype_size(kn_dtype_of(x));
    void *buf = malloc(n ? n : 1);
    kn_tensor *t = NULL;
    if (buf && kn_read(ctx, x, buf, n) == KN_OK) t = kn_tensor_from(ctx, kn_dtype_of(x), kn_ndim(x), kn_shape(x), buf);
    free(buf);
    return t;
}

static kn_tensor *item_scale(kn_ctx *ctx, kn_tensor *x, kn_tensor *y, int how)
{
    kn_tensor *r = how == 0 ? kn_mean(ctx, y, NULL, 0, 0) : how == 1 ? kn_amax(ctx, y, NULL, 0, 0)
                                                                     : kn_sum(ctx, y, NULL, 0, 0);
    double d;
    if (!r || kn_item(ctx, r, &d) != KN_OK) return NULL;
    return kn_mul(ctx, x, kn_scalar(ctx, d));
}

static const kn_reduction reductions[3] = {KN_REDUCE_MEAN, KN_REDUCE_SUM, KN_REDUCE_NONE};

static void ref_check(kn_ctx *ctx, Run *r, const Op *o, kn_tensor **src, kn_tensor *y);
static double *read_f64(kn_ctx *ctx, kn_tensor *t, int64_t *n);

/* Value i of the program: the public op it names, on the values before it. */
static kn_tensor *apply(kn_ctx *ctx, Run *r, kn_tensor *const *in, kn_tensor *const *v, int i)
{
    const Op *o = &r->p->op[i];
    kn_tensor *s[5] = {NULL, NULL, NULL, NULL, NULL};
    for (int j = 0; j < o->nsrc; j++) s[j] = o->src[j] >= 0 ? v[o->src[j]] : NULL;
    kn_tensor *a = s[0], *b = s[1], *c = s[2];
    const int64_t *ip = o->ip;
    int dims[KN_MAX_DIMS];
    for (int j = 0; j < KN_MAX_DIMS; j++) dims[j] = (int)ip[j];
    int64_t t[KN_MAX_DIMS], kk;
    kn_tensor *pieces[64];
    int n;
    if (unary_fn(o->k)) return unary_fn(o->k)(ctx, a);
    if (binary_fn(o->k)) return binary_fn(o->k)(ctx, a, b);
    switch (o->k) {
    case K_INPUT: return r->p->in[ip[0]].param ? r->param[ip[0]] : in[r->inpos[ip[0]]];
    case K_SCALAR: return ip[0] ? kn_scalar_int(ctx, ip[1]) : kn_scalar(ctx, o->f[0]);
    case K_DETACH: return kn_detach(ctx, a);
    case K_GELU: return kn_gelu(ctx, a, (int)ip[0]);
    case K_SOFTPLUS: return kn_softplus(ctx, a, o->f[0], o->f[1]);
    case K_ELU: return kn_elu(ctx, a, o->f[0]);
    case K_LEAKY_RELU: return kn_leaky_relu(ctx, a, o->f[0]);
    case K_CLAMP: return kn_clamp(ctx, a, o->f[0], o->f[1]);
    case K_TO: return kn_to(ctx, a, (kn_dtype)run_dtype((int)ip[0]));
    case K_WHERE: return kn_where(ctx, a, b, c);
    case K_MASKED_FILL: return kn_masked_fill(ctx, a, b, o->f[0]);
    case K_SUM: return kn_sum(ctx, a, dims, (int)ip[6], (int)ip[7]);
    case K_MEAN: return kn_mean(ctx, a, dims, (int)ip[6], (int)ip[7]);
    case K_AMAX: return kn_amax(ctx, a, dims, (int)ip[6], (int)ip[7]);
    case K_AMIN: return kn_amin(ctx, a, dims, (int)ip[6], (int)ip[7]);
    case K_LOGSUMEXP: return kn_logsumexp(ctx, a, dims, (int)ip[6], (int)ip[7]);
    case K_VAR: return kn_var(ctx, a, dims, (int)ip[6], (int)o->f[0], (int)ip[7]);
    case K_STD: return kn_std(ctx, a, dims, (int)ip[6], (int)o->f[0], (int)ip[7]);
    case K_PROD: return kn_prod(ctx, a, dims[0], dims[1]);
    case K_ARGMAX: return kn_argmax(ctx, a, dims[0], dims[1]);
    case K_ARGMIN: return kn_argmin(ctx, a, dims[0], dims[1]);
    case K_CUMSUM: return kn_cumsum(ctx, a, dims[0]);
    case K_SOFTMAX: return kn_softmax(ctx, a, dims[0]);
    case K_LOG_SOFTMAX: return kn_log_softmax(ctx, a, dims[0]);
    case K_RESHAPE:
    case K_VIEW:
        if (!a) return NULL;
        n = reshape_target(a, o, t);
        return o->k == K_VIEW ? kn_view(ctx, a, n, t) : kn_reshape(ctx, a, n, t);
    case K_FLATTEN: return kn_flatten(ctx, a, dims[0], dims[1]);
    case K_SQUEEZE: return kn_squeeze(ctx, a, dims[0]);
    case K_UNSQUEEZE: return kn_unsqueeze(ctx, a, dims[0]);
    case K_TRANSPOSE: return kn_transpose(ctx, a, dims[0], dims[1]);
    case K_PERMUTE: return kn_permute(ctx, a, dims);
    case K_EXPAND:
        if (!a) return NULL;
        n = (int)ip[0];
        for (int j = 0; j < n; j++) t[j] = ip[1 + j];
        for (int j = 0; j < kn_ndim(a) && n < KN_MAX_DIMS; j++, n++) t[n] = j == ip[3] ? ip[4] : -1;
        return kn_expand(ctx, a, n, t);
    case K_SLICE: return kn_slice(ctx, a, dims[0], ip[1], ip[2], ip[3]);
    case K_NARROW: return kn_narrow(ctx, a, dims[0], szval(v, o->e[0]), szval(v, o->e[1]));
    case K_PAD: return kn_pad(ctx, a, (int)ip[6], ip, o->f[0]);
    case K_CAT: return kn_cat(ctx, (kn_tensor *const[]){a, b}, 2, dims[0]);
    case K_STACK: return kn_stack(ctx, (kn_tensor *const[]){a, b}, 2, dims[0]);
    case K_SPLIT:
    case K_CHUNK:
        n = o->k == K_SPLIT ? kn_split(ctx, a, ip[0], dims[1], pieces, 64) : kn_chunk(ctx, a, dims[0], dims[1], pieces, 64);
        return n > 0 && n <= 64 ? pieces[ip[2] < n ? ip[2] : n - 1] : NULL;
    case K_TRIU: return kn_triu(ctx, a, ip[0]);
    case K_TRIL: return kn_tril(ctx, a, ip[0]);
    case K_INDEX_SELECT: return kn_index_select(ctx, a, dims[0], b);
    case K_GATHER: return kn_gather(ctx, a, dims[0], b);
    case K_SCATTER_ADD: return kn_scatter_add(ctx, a, dims[0], b, c);
    case K_EMBEDDING: return kn_embedding(ctx, a, b);
    case K_ONE_HOT: return kn_one_hot(ctx, a, ip[0]);
    case K_MATMUL: return kn_matmul(ctx, a, b);
    case K_BMM: return kn_bmm(ctx, a, b);
    case K_LINEAR: return kn_linear(ctx, a, b, c);
    case K_CONV1D:
    case K_CONV2D:
    case K_CONV_T2D: {
        kn_conv_opts co = {{dims[0], dims[1]}, {dims[2], dims[3]}, {dims[4], dims[5]}, {dims[7], dims[7]}, dims[6]};
        return o->k == K_CONV1D ? kn_conv1d(ctx, a, b, c, &co)
               : o->k == K_CONV2D ? kn_conv2d(ctx, a, b, c, &co) : kn_conv_transpose2d(ctx, a, b, c, &co);
    }
    case K_MAX_POOL2D:
    case K_AVG_POOL2D: {
        kn_pool_opts po = {{dims[0], dims[1]}, {dims[2], dims[3]}, {dims[4], dims[5]}, {dims[6], dims[6]},
                           dims[7] & 1, dims[7] >> 1 & 1, 0};
        return o->k == K_MAX_POOL2D ? kn_max_pool2d(ctx, a, &po) : kn_avg_pool2d(ctx, a, &po);
    }
    case K_ADAPTIVE_POOL2D: return kn_adaptive_avg_pool2d(ctx, a, ip[0], ip[1]);
    case K_LAYER_NORM:
    case K_RMS_NORM:
        if (!a) return NULL;
        n = (int)ip[0];
        for (int j = 0; j < n; j++) t[j] = kn_shape(a)[kn_ndim(a) - n + j];
        return o->k == K_LAYER_NORM ? kn_layer_norm(ctx, a, n, t, b, c, o->f[0]) : kn_rms_norm(ctx, a, n, t, b, o->f[0]);
    case K_GROUP_NORM: return kn_group_norm(ctx, a, ip[0], b, c, o->f[0]);
    case K_BATCH_NORM: return kn_batch_norm(ctx, a, b, c, s[3], s[4], (int)ip[0], o->f[0], o->f[1]);
    case K_MSE: return kn_mse_loss(ctx, a, b, reductions[ip[0]]);
    case K_L1: return kn_l1_loss(ctx, a, b, reductions[ip[0]]);
    case K_BCE: return kn_binary_cross_entropy(ctx, a, b, NULL, reductions[ip[0]]);
    case K_BCE_LOGITS: return kn_binary_cross_entropy_with_logits(ctx, a, b, NULL, NULL, reductions[ip[0]]);
    case K_CROSS_ENTROPY:
    case K_NLL: {
        kn_loss_opts lo = {reductions[ip[0]], NULL, (int)ip[1], ip[2], o->f[0]};
        return o->k == K_NLL ? kn_nll_loss(ctx, a, b, &lo) : kn_cross_entropy(ctx, a, b, &lo);
    }
    case K_DROPOUT: return kn_dropout(ctx, a, o->f[0], (int)ip[0]);
    case K_SDPA: return kn_scaled_dot_product_attention(ctx, a, b, c, NULL, (int)ip[0], o->f[0]);
    case K_RANDLIKE:
        if (!a) return NULL;
        return kn_add(ctx, a, (ip[0] ? kn_randn : kn_rand)(ctx, (kn_dtype)run_dtype(KN_F32), kn_ndim(a), kn_shape(a)));
    case K_ARANGE_ADD:
        if (!a) return NULL;
        kk = kn_ndim(a) ? kn_shape(a)[kn_ndim(a) - 1] : 1;
        return kn_add(ctx, a, kn_arange(ctx, KN_F32, 0, (double)kk, 1));
    case K_ITEM_SCALE: return item_scale(ctx, a, b, (int)ip[0]);
    case K_REREAD: return reread(ctx, a);
    default: return NULL;
    }
}

/* The longest reduction op i makes (eager sizes): how far a compiled sum may round from eager's. */
static int64_t reduction_length(const Op *o, kn_tensor *const *s, kn_tensor *y)
{
    kn_tensor *a = s[0], *b = s[1];
    if (!a || !y) return 1;
    int64_t na = kn_numel(a), ny = kn_numel(y), k;
    switch (o->k) {
    case K_MATMUL:
    case K_BMM:
    case K_LINEAR:
    case K_SDPA:
        k = kn_ndim(a) ? kn_shape(a)[kn_ndim(a) - 1] : 1;
        if (o->k == K_SDPA && b && kn_ndim(b) >= 2) k *= kn_shape(b)[kn_ndim(b) - 2];
        return k;
    case K_CONV1D:
    case K_CONV2D:
    case K_CONV_T2D: return b ? kn_numel(b) : 1;
    case K_SCATTER_ADD:
    case K_CUMSUM: return na;
    default: return ny > 0 && na > ny ? (na + ny - 1) / ny : 1;
    }
}

/* The loss of a program with grad: sum(y * w), w a fixed cotangent of y's shape and dtype (cos(0.7 i)
 * at element i); linear, so it passes y's rounding on to the grads unamplified. */
static kn_tensor *loss_of(kn_ctx *ctx, kn_tensor *y)
{
    kn_tensor *i = y ? kn_arange(ctx, kn_dtype_of(y), 0, (double)kn_numel(y), 1) : NULL;
    kn_tensor *w = i ? kn_reshape(ctx, kn_cos(ctx, kn_mul(ctx, i, kn_scalar(ctx, 0.7))), kn_ndim(y), kn_shape(y)) : NULL;
    return kn_sum(ctx, kn_mul(ctx, y, w), NULL, 0, 0);
}

static const char loss_src[] =
    "/* the loss: sum(y * w), w = cos(0.7 i) at element i, in y's dtype */\n"
    "static kn_tensor *fz_loss(kn_ctx *ctx, kn_tensor *y)\n"
    "{\n"
    "    kn_tensor *i = y ? kn_arange(ctx, kn_dtype_of(y), 0, (double)kn_numel(y), 1) : NULL;\n"
    "    kn_tensor *w = i ? kn_reshape(ctx, kn_cos(ctx, kn_mul(ctx, i, kn_scalar(ctx, 0.7))), kn_ndim(y), kn_shape(y)) : NULL;\n"
    "    return kn_sum(ctx, kn_mul(ctx, y, w), NULL, 0, 0);\n"
    "}\n\n";

static kn_status body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)
{
    Run *r = user;
    const Prog *p = r->p;
    kn_tensor *v[MAXOPS];
    (void)nin;
    (void)nout;
    if (p->grad == G_INSIDE) kn_zero_grad(ctx, r->leaf, r->nleaf);
    for (int i = 0; i < p->nops; i++) {
        v[i] = apply(ctx, r, in, v, i);
        if (!v[i]) {
            r->fail_op = i;
            return fail_status(ctx);
        }
        r->rank[i] = kn_ndim(v[i]);
        if (r->eps < dtype_eps(kn_dtype_of(v[i]))) r->eps = dtype_eps(kn_dtype_of(v[i]));
        if (r->eager) {
            kn_tensor *s[5] = {NULL, NULL, NULL, NULL, NULL};
            for (int j = 0; j < p->op[i].nsrc; j++) s[j] = p->op[i].src[j] >= 0 ? v[p->op[i].src[j]] : NULL;
            int64_t red = reduction_length(&p->op[i], s, v[i]);
            if (red > r->maxred) r->maxred = red;
            for (int d = 0; d < kn_ndim(v[i]); d++) r->zero_dim |= kn_shape(v[i])[d] == 0;
            ref_check(ctx, r, &p->op[i], s, v[i]);
        }
    }
    for (int k = 0; k < p->nout; k++) out[k] = v[p->out[k]];
    for (int k = 0; k < p->nout && r->eager; k++)
        for (int j = 0; j < p->nin; j++)
            r->alias_leaf |= p->in[j].reqgrad && out[k] == (p->in[j].param ? r->param[j] : in[r->inpos[j]]);
    if (p->grad != G_INSIDE) return KN_OK;
    kn_tensor *loss = loss_of(ctx, out[p->dout]);
    if (!loss || kn_backward(ctx, loss, 0) != KN_OK) return fail_status(ctx);
    double *before[MAXOUT] = {NULL};
    int64_t n;
    for (int k = 0; k < p->nout && r->eager && p->optim; k++) before[k] = read_f64(ctx, out[k], &n);
    if (p->optim && kn_optim_step(r->opt) != KN_OK) return fail_status(ctx);
    for (int k = 0; k < p->nout && r->eager && p->optim; k++) {
        double *after = before[k] ? read_f64(ctx, out[k], &n) : NULL;
        r->alias_step |= after && memcmp(after, before[k], (size_t)n * sizeof *after) != 0;
        free(after);
        free(before[k]);
    }
    out[p->nout] = loss;
    for (int j = 0; j < r->nleaf; j++) {
        kn_tensor *g = kn_grad(ctx, r->leaf[j]);
        out[p->nout + 1 + j] = g ? g : kn_zeros(ctx, kn_dtype_of(r->leaf[j]), kn_ndim(r->leaf[j]), kn_shape(r->leaf[j]));
        if (!out[p->nout + 1 + j]) return fail_status(ctx);
    }
    return KN_OK;
}

/* ---- eager against libm: torch's semantics of a few pointwise ops ---- */

/* y = op(x[, z]) as torch defines it, in f64; 0 if op i is not checked. exact: no rounding allowed
 * beyond the result dtype's. */
static int ref_value(const Op *o, double x, double z, double *y, int *exact)
{
    *exact = 1;
    switch (o->k) {
    case K_NEG: *y = -x; return 1;
    case K_ABS: *y = fabs(x); return 1;
    case K_SIGN: *y = isnan(x) ? 0 : (double)((0 < x) - (x < 0)); return 1; /* torch 1.13: sign(nan) is 0 */
    case K_FLOOR: *y = floor(x); return 1;
    case K_CEIL: *y = ceil(x); return 1;
    case K_ROUND: *y = nearbyint(x); return 1; /* half to even */
    case K_RELU: *y = isnan(x) ? x : x > 0 ? x : 0; return 1;
    case K_SQRT: *y = sqrt(x); return 1;
    case K_CLAMP: *y = isnan(x) ? x : x < o->f[0] ? o->f[0] : x > o->f[1] ? o->f[1] : x; return 1;
    case K_EXP: *y = exp(x), *exact = 0; return 1;
    case K_LOG: *y = log(x), *exact = 0; return 1;
    case K_ADD: *y = x + z; return 1;
    case K_SUB: *y = x - z; return 1;
    case K_MUL: *y = x * z; return 1;
    case K_DIV: *y = x / z; return 1;
    case K_POW: *y = pow(x, z), *exact = 0; return 1;
    case K_FMOD: *y = fmod(x, z); return with[CL_FMOD];
    case K_MINIMUM: *y = isnan(x) || isnan(z) ? NAN : x < z ? x : z; return 1;
    case K_MAXIMUM: *y = isnan(x) || isnan(z) ? NAN : x > z ? x : z; return 1;
    case K_EQ: *y = x == z; return 1;
    case K_NE: *y = x != z; return 1;
    case K_LT: *y = x < z; return 1;
    case K_LE: *y = x <= z; return 1;
    case K_GT: *y = x > z; return 1;
    case K_GE: *y = x >= z; return 1;
    default: return 0;
    }
}

/* t's elements as f64 in a new buffer (n of them), or NULL. */
static double *read_f64(kn_ctx *ctx, kn_tensor *t, int64_t *n)
{
    *n = kn_numel(t);
    double *x = malloc((size_t)*n * sizeof *x + 8);
    kn_tensor *t64 = kn_to(ctx, t, KN_F64);
    if (x && t64 && kn_read(ctx, t64, x, (size_t)*n * sizeof *x) == KN_OK) return x;
    free(x);
    kn_clear_error(ctx);
    return NULL;
}

/* the element of operand t (shape broadcast to y's) behind y's element i */
static int64_t bcast_at(const kn_tensor *t, const kn_tensor *y, int64_t i)
{
    int64_t off = 0, stride = 1;
    int nd = kn_ndim(t), yd = kn_ndim(y);
    for (int d = yd - 1; d >= 0; d--) {
        int64_t c = i % kn_shape(y)[d];
        i /= kn_shape(y)[d];
        int td = d - (yd - nd);
        if (td < 0) continue;
        if (kn_shape(t)[td] != 1) off += c * stride;
        stride *= kn_shape(t)[td];
    }
    return off;
}

static void ref_check(kn_ctx *ctx, Run *r, const Op *o, kn_tensor **src, kn_tensor *y)
{
    double dummy;
    int exact, ydt = kn_dtype_of(y), n = o->nsrc;
    if (r->ref[0] || !ref_value(o, 1, 1, &dummy, &exact) || kn_numel(y) > 4096) return;
    if (ydt != KN_F32 && ydt != KN_F64 && ydt != KN_BOOL) return;
    for (int j = 0; j < n; j++)
        if (!src[j] || (kn_dtype_of(src[j]) != KN_F32 && kn_dtype_of(src[j]) != KN_F64)) return;
    int was = kn_set_grad_enabled(ctx, 0);
    int64_t ny, nx = 0, nz = 0;
    double *yv = read_f64(ctx, y, &ny), *xv = read_f64(ctx, src[0], &nx), *zv = n > 1 ? read_f64(ctx, src[1], &nz) : NULL;
    kn_set_grad_enabled(ctx, was);
    for (int64_t i = 0; yv && xv && (n < 2 || zv) && i < ny && !r->ref[0]; i++) {
        double x = xv[bcast_at(src[0], y, i)], z = n > 1 ? zv[bcast_at(src[1], y, i)] : 0, want;
        if (ydt == KN_F32) x = (float)x, z = (float)z; /* an f64 0-d operand or a number computes in f32 */
        ref_value(o, x, z, &want, &exact);
        if (ydt == KN_F32) want = (double)(float)want;
        double got = yv[i], ulp = ydt == KN_F32 ? 1.2e-7 : 2.3e-16;
        int ok = isnan(want) ? isnan(got) : isinf(want) ? got == want : o->k == K_SIGN && isnan(x) ? got == 0 || isnan(got)
                 : fabs(got - want) <= (exact ? 1.01 : 4.01) * ulp * fabs(want);
        char args[64];
        if (n > 1) snprintf(args, sizeof args, "%.9g, %.9g", x, z);
        else snprintf(args, sizeof args, "%.9g", x);
        if (!ok) r->ref_op = (int)(o - r->p->op), r->ref_i = i, r->ref_want = want;
        if (!ok)
            snprintf(r->ref, MSG, "eager kn_%s (%s) element %lld: (%s) gives %.9g, torch's (libm) %.9g",
                     op_name(o->k), kn_dtype_name((kn_dtype)ydt), (long long)i, args, got, want);
    }
    free(yv);
    free(xv);
    free(zv);
}

/* ---- the generator: a model of each value's shape and dtype ---- */

typedef struct {
    int64_t n;
    int cls;  /* 0: a constant size; 1: s0; > 1: some other function of s0 */
} Dim;

typedef struct {
    uint8_t dt, nd;
    uint8_t weak;    /* a Python number (kn_scalar) */
    uint8_t grad;    /* depends on a leaf that requires grad */
    uint8_t nonfin;  /* may hold inf or nan */
    uint8_t big;     /* may be far outside [-1000, 1000] */
    int64_t hi;      /* > 0: integers in [0, hi) (an index) */
    Dim d[KN_MAX_DIMS];
} VInfo;

typedef struct {
    Prog *p;
    Rng r;
    VInfo v[MAXOPS];
    int ncls;         /* symbolic classes handed out (1 is s0) */
    int64_t cap;      /* the most elements a value may have */
    int64_t smin;     /* the smallest size s0 takes */
    int nonaffine;    /* some size is not affine in s0: dynamic entries may specialise */
    int breaks;       /* a value read inside the body */
    int breaks_ok;    /* reads inside the body allowed */
} Gen;

static int64_t vnumel(const VInfo *v)
{
    int64_t n = 1;
    for (int i = 0; i < v->nd; i++) n *= v->d[i].n;
    return n;
}

static int same_dim(Dim a, Dim b) { return a.n == b.n && a.cls == b.cls; }
static int is_one(Dim a) { return a.n == 1 && a.cls == 0; }
static Dim cdim(int64_t n) { return (Dim){n, 0}; }

/* a size derived from d (and e) by a function that is not the identity */
static Dim derived(Gen *g, int64_t n, Dim d, Dim e, int affine)
{
    if (!d.cls && !e.cls) return cdim(n);
    if (!affine) g->nonaffine = 1;
    return (Dim){n, ++g->ncls};
}

/* torch's broadcasting of a and b into o (shape only); 0 if they do not broadcast */
static int bcast(const VInfo *a, const VInfo *b, VInfo *o)
{
    int nd = a->nd > b->nd ? a->nd : b->nd;
    o->nd = (uint8_t)nd;
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - a->nd), ib = i - (nd - b->nd);
        Dim da = ia >= 0 ? a->d[ia] : cdim(1), db = ib >= 0 ? b->d[ib] : cdim(1);
        if (same_dim(da, db) || is_one(db)) o->d[i] = da;
        else if (is_one(da)) o->d[i] = db;
        else return 0;
    }
    return 1;
}

static int rank(int dt) { return dt == KN_BOOL ? 0 : is_float(dt) ? 2 : 1; }

/* torch's type promotion of a and b (a Python number is weak: it only lifts the kind) */
static int promote(const VInfo *a, const VInfo *b)
{
    if (a->weak && !b->weak) return promote(b, a);
    if (b->weak && !a->weak) return rank(b->dt) > rank(a->dt) ? (is_float(b->dt) ? KN_F32 : KN_I64) : a->dt;
    if (a->dt == b->dt) return a->dt;
    if (rank(a->dt) != rank(b->dt)) return rank(a->dt) > rank(b->dt) ? a->dt : b->dt;
    if (rank(a->dt) == 2) {
        if (a->dt == KN_F64 || b->dt == KN_F64) return KN_F64;
        return KN_F32; /* f32 with f16/bf16, or f16 with bf16 */
    }
    if (a->dt == KN_I64 || b->dt == KN_I64) return KN_I64;
    return KN_I32; /* i32 with u8 */
}

static int push(Gen *g, const Op *o, const VInfo *vi)
{
    Prog *p = g->p;
    int sym = 0;
    for (int i = 0; i < vi->nd; i++) sym += vi->d[i].cls != 0;
    if (sym > 1) g->nonaffine = 1; /* a size that is a product of s0's: not affine */
    if (p->nops >= MAXOPS || vnumel(vi) > g->cap || (!with[CL_EMPTY] && vnumel(vi) == 0)) return -1;
    p->op[p->nops] = *o;
    g->v[p->nops] = *vi;
    return p->nops++;
}

static int var_for(Gen *g, Dim d)
{
    Prog *p = g->p;
    if (d.cls == 1) return p->dyn ? 0 : -1;
    if (d.cls > 1) return -1;
    for (int k = p->dyn; k < p->nvars; k++)
        if (p->var[k] == d.n) return k;
    if (p->nvars == MAXVARS) return -1;
    p->var[p->nvars] = d.n;
    return p->nvars++;
}

/* A new input of shape d: a leaf (where grad is on and it is a float) if leaf; its view at random. */
static int new_input(Gen *g, int dt, int nd, const Dim *d, int data, int64_t lo, int64_t hi, int leaf)
{
    Prog *p = g->p;
    if (p->nin == MAXIN) return -1;
    InSpec *s = &p->in[p->nin];
    int sym = 0;
    memset(s, 0, sizeof *s);
    s->dt = (uint8_t)dt, s->nd = (uint8_t)nd, s->data = (uint8_t)data, s->lo = lo, s->hi = hi;
    for (int i = 0; i < nd; i++) {
        int k = var_for(g, d[i]);
        if (k < 0) return -1;
        s->var[i] = (int8_t)k;
        sym |= d[i].cls == 1;
    }
    if (leaf && is_float(dt) && p->grad != G_NONE && !(sym && p->grad == G_INSIDE)) {
        s->reqgrad = 1;
        s->param = p->grad == G_INSIDE || (!sym && chance(&g->r, 50));
    } else if (!sym && chance(&g->r, 15)) {
        s->param = 1;
    }
    int c = rnd(&g->r, 100);
    if (!s->param && !s->reqgrad && nd >= 2 && c < 15) s->view = V_T, s->vd = (int8_t)rnd(&g->r, nd - 1);
    else if (!s->param && !s->reqgrad && nd >= 1 && c < 30) s->view = V_STRIDED, s->vd = (int8_t)rnd(&g->r, nd);
    else if (!s->param && !s->reqgrad && nd >= 1 && c < 36) s->view = V_EXPAND, s->vd = (int8_t)rnd(&g->r, nd);
    Op o = {K_INPUT, 0, {-1, -1, -1, -1, -1}, {p->nin}, {0}, {{-1, 0, 0, 0}, {-1, 0, 0, 0}}};
    VInfo vi;
    memset(&vi, 0, sizeof vi);
    vi.dt = (uint8_t)dt, vi.nd = (uint8_t)nd, vi.grad = s->reqgrad, vi.nonfin = data == D_SPECIAL;
    vi.hi = data == D_INT && lo >= 0 ? hi : 0;
    memcpy(vi.d, d, (size_t)nd * sizeof *d);
    int at = push(g, &o, &vi);
    if (at >= 0) p->nin++;
    return at;
}

static int64_t pick_size(Gen *g)
{
    static const int64_t small[] = {1, 2, 3, 4, 5, 7, 8, 11, 13, 16, 17};
    static const int64_t mid[] = {23, 31, 32, 37, 61, 64, 97, 127, 128};
    static const int64_t big[] = {255, 257, 509, 1000, 1031, 4099};
    int c = rnd(&g->r, 100);
    if (with[CL_EMPTY] && c < 12) return 0;
    if (c < 70) return small[rnd(&g->r, (int)(sizeof small / sizeof *small))];
    if (c < 93) return mid[rnd(&g->r, (int)(sizeof mid / sizeof *mid))];
    return big[rnd(&g->r, (int)(sizeof big / sizeof *big))];
}

/* a random dim: one of the program's sizes (s0 among them), or 1 */
static Dim rand_dim(Gen *g)
{
    Prog *p = g->p;
    if (chance(&g->r, 12)) return cdim(1);
    int k = rnd(&g->r, p->nvars);
    return p->dyn && k == 0 ? (Dim){p->var[0], 1} : cdim(p->var[k]);
}

/* a random shape of nd dims within the cap (fewer dims if it will not fit) */
static int rand_shape(Gen *g, int nd, Dim *d)
{
    for (int tries = 0; tries < 20; tries++) {
        int64_t n = 1;
        for (int i = 0; i < nd; i++) n *= (d[i] = rand_dim(g)).n;
        if (n <= g->cap / 4 || n == 0) return nd;
        if (tries % 4 == 3 && nd > 1) nd--;
    }
    for (int i = 0; i < nd; i++) d[i] = cdim(1 + rnd(&g->r, 4));
    return nd;
}

static int rand_rank(Gen *g)
{
    int c = rnd(&g->r, 100);
    return c < 5 ? 0 : c < 28 ? 1 : c < 62 ? 2 : c < 84 ? 3 : 4;
}

static int rand_float_dt(Gen *g)
{
    int c = rnd(&g->r, 100);
    return c < 72 ? KN_F32 : c < 86 ? KN_F64 : c < 93 ? KN_F16 : KN_BF16;
}

static int float_input(Gen *g, int nd)
{
    Dim d[KN_MAX_DIMS];
    nd = rand_shape(g, nd, d);
    int data = chance(&g->r, 70) ? D_GRID : chance(&g->r, 60) ? D_CONT : chance(&g->r, 50) ? D_POS : D_SPECIAL;
    return new_input(g, rand_float_dt(g), nd, d, data, 0, 0, 1);
}

/* ---- picking operands ---- */

typedef int (*Pred)(const VInfo *);
static int p_float(const VInfo *v) { return is_float(v->dt); }
static int p_num(const VInfo *v) { return v->dt != KN_BOOL; }
static int p_any(const VInfo *v) { (void)v; return 1; }
static int p_bool(const VInfo *v) { return v->dt == KN_BOOL; }
static int p_float1(const VInfo *v) { return is_float(v->dt) && v->nd >= 1; }
static int p_float2(const VInfo *v) { return is_float(v->dt) && v->nd >= 2; }
static int p_float3(const VInfo *v) { return is_float(v->dt) && v->nd == 3; }
static int p_float4(const VInfo *v) { return is_float(v->dt) && v->nd == 4; }
static int p_nd1(const VInfo *v) { return v->nd >= 1; }
static int p_nd2(const VInfo *v) { return v->nd >= 2; }

/* a value that ok accepts (not a Python number), the newest ones likelier; -1 if none */
static int pick(Gen *g, Pred ok)
{
    int cand[MAXOPS], n = 0;
    for (int i = 0; i < g->p->nops; i++)
        if (!g->v[i].weak && ok(&g->v[i])) cand[n++] = i;
    if (!n) return -1;
    return chance(&g->r, 65) ? cand[n - 1 - rnd(&g->r, n < 3 ? n : 3)] : cand[rnd(&g->r, n)];
}

/* a value that ok accepts, or a new float input of rank nd if none (or now and then) */
static int pick_or_new(Gen *g, Pred ok, int nd)
{
    int a = chance(&g->r, 85) ? pick(g, ok) : -1;
    if (a >= 0) return a;
    a = float_input(g, nd);
    return a >= 0 && ok(&g->v[a]) ? a : -1;
}

static int scalar(Gen *g, int isint)
{
    static const double fv[] = {0.5, 2, -1.5, 3, 0, 1e-3, -0.25, 7};
    static const double special[] = {INFINITY, -INFINITY, NAN};
    Op o = {K_SCALAR, 0, {-1, -1, -1, -1, -1}, {isint, 0}, {0}, {{-1, 0, 0, 0}, {-1, 0, 0, 0}}};
    VInfo vi;
    memset(&vi, 0, sizeof vi);
    vi.weak = 1;
    vi.dt = isint ? KN_I64 : KN_F32;
    if (isint) o.ip[1] = rnd(&g->r, 5) - 1;
    else if (chance(&g->r, 6)) o.f[0] = special[rnd(&g->r, 3)], vi.nonfin = 1;
    else o.f[0] = fv[rnd(&g->r, 8)];
    return push(g, &o, &vi);
}

/* a shape broadcastable against a's: a's dims, some turned to 1, leading ones dropped */
static int bcast_partner(Gen *g, const VInfo *a, int dt, int data)
{
    Dim d[KN_MAX_DIMS];
    int drop = a->nd && chance(&g->r, 30) ? rnd(&g->r, a->nd + 1) : 0, nd = a->nd - drop;
    for (int i = 0; i < nd; i++) d[i] = chance(&g->r, 25) ? cdim(1) : a->d[i + drop];
    return new_input(g, dt, nd, d, data, 0, 0, 1);
}

/* a second operand for a: a number, a value that broadcasts with a, or a new input that does */
static int partner(Gen *g, int a, int allow_scalar)
{
    int c = rnd(&g->r, 100);
    if (allow_scalar && c < 25) return scalar(g, chance(&g->r, 20));
    if (c < 65) {
        int cand[MAXOPS], n = 0;
        VInfo o;
        for (int i = 0; i < g->p->nops; i++)
            if (!g->v[i].weak && bcast(&g->v[a], &g->v[i], &o) && vnumel(&o) <= g->cap) cand[n++] = i;
        if (n) return cand[rnd(&g->r, n)];
    }
    const VInfo *va = &g->v[a];
    return bcast_partner(g, va, is_float(va->dt) ? va->dt : KN_F32, chance(&g->r, 80) ? D_GRID : D_POS);
}

/* ---- the generator: one op ---- */


static Op new_op(int k)
{
    Op o;
    memset(&o, 0, sizeof o);
    o.k = (uint8_t)k;
    for (int j = 0; j < 5; j++) o.src[j] = -1;
    o.e[0].v = o.e[1].v = -1;
    return o;
}

static void set_src(Op *o, int n, int a, int b, int c)
{
    o->nsrc = (uint8_t)n;
    o->src[0] = (int16_t)a, o->src[1] = (int16_t)b, o->src[2] = (int16_t)c;
}

static int float_only(int k)
{
    return (k >= K_EXP && k <= K_RECIPROCAL) || (k >= K_SIN && k <= K_ERF) || k == K_SIGMOID || k == K_SILU ||
           k == K_HARDSWISH || k == K_GELU || k == K_SOFTPLUS || k == K_ELU;
}

static int bounded_op(int k)
{
    return k == K_NEG || k == K_ABS || k == K_SIGN || k == K_FLOOR || k == K_CEIL || k == K_ROUND || k == K_RELU ||
           k == K_SIN || k == K_COS || k == K_TANH || k == K_ERF || k == K_SIGMOID || k == K_CLAMP ||
           k == K_CONTIGUOUS || k == K_DETACH || k == K_LOGICAL_NOT || k == K_HARDSWISH;
}

static int gen_unary(Gen *g, int k)
{
    static const double clamps[4][2] = {{-1, 1}, {0, INFINITY}, {-INFINITY, 0.5}, {-0.5, -0.5}};
    int a = k == K_LOGICAL_NOT || k == K_CONTIGUOUS || k == K_DETACH || chance(&g->r, 8) ? pick(g, p_any) : pick_or_new(g, p_float, rand_rank(g));
    if (a < 0) return -1;
    Op o = new_op(k);
    VInfo vi = g->v[a];
    set_src(&o, 1, a, -1, -1);
    if (float_only(k) && !is_float(vi.dt)) vi.dt = KN_F32;
    if (k == K_LOGICAL_NOT) vi.dt = KN_BOOL;
    if (!is_float(vi.dt) || k == K_DETACH) vi.grad = 0;
    if (k == K_EXP || k == K_LOG || k == K_RSQRT || k == K_RECIPROCAL || k == K_SQRT) vi.nonfin = 1;
    if (k == K_EXP || k == K_RECIPROCAL || k == K_RSQRT || k == K_SQUARE) vi.big = 1;
    if (bounded_op(k) && k != K_NEG && k != K_ABS && k != K_FLOOR && k != K_CEIL && k != K_ROUND && k != K_CLAMP)
        vi.big = 0;
    vi.hi = 0;
    switch (k) {
    case K_GELU: o.ip[0] = rnd(&g->r, 2); break;
    case K_SOFTPLUS: o.f[0] = (double[]){1, 2, 0.5}[rnd(&g->r, 3)], o.f[1] = (double[]){20, 1, 0}[rnd(&g->r, 3)]; break;
    case K_ELU: o.f[0] = chance(&g->r, 50) ? 1 : 0.5; break;
    case K_LEAKY_RELU: o.f[0] = chance(&g->r, 50) ? 0.01 : 0.2; break;
    case K_CLAMP: {
        int c = rnd(&g->r, 4);
        o.f[0] = clamps[c][0], o.f[1] = clamps[c][1];
        vi.big = g->v[a].big && c != 0 && c != 3;
        break;
    }
    case K_TO: {
        static const int dts[] = {KN_F32, KN_F32, KN_F64, KN_F64, KN_F16, KN_BF16, KN_I32, KN_I64, KN_BOOL, KN_U8};
        int dt = dts[rnd(&g->r, 10)];
        /* a float that is not small, or not finite, has no defined integer value (C and torch differ) */
        if (!is_float(dt) && dt != KN_BOOL && is_float(vi.dt) && (vi.nonfin || vi.big)) dt = KN_F64;
        if (dt == KN_U8 && is_float(vi.dt)) dt = KN_I32;
        if ((vi.dt == KN_F16 || dt == KN_F16) && vi.big) dt = KN_F32; /* f16 overflows where others do not */
        o.ip[0] = dt;
        vi.dt = (uint8_t)dt;
        if (!is_float(dt)) vi.grad = 0, vi.nonfin = 0;
        if (dt == KN_BOOL || dt == KN_U8) vi.big = 0;
        break;
    }
    default: break;
    }
    return push(g, &o, &vi);
}

static int gen_binary(Gen *g, int k)
{
    int logical = k >= K_LOGICAL_AND && k <= K_LOGICAL_XOR, cmp = k >= K_EQ && k <= K_GE;
    int a = logical || chance(&g->r, 10) ? pick(g, p_any) : pick_or_new(g, p_float, rand_rank(g));
    if (a < 0) return -1;
    int b = partner(g, a, 1);
    if (b < 0) return -1;
    VInfo vi;
    memset(&vi, 0, sizeof vi);
    if (!bcast(&g->v[a], &g->v[b], &vi)) return -1;
    if (chance(&g->r, 20)) { /* the number or the smaller operand first */
        int t = a;
        a = b, b = t;
    }
    const VInfo *va = &g->v[a], *vb = &g->v[b];
    if (va->weak && vb->weak) return -1;
    if (k == K_FMOD && vb->nonfin && !with[CL_FMOD]) return -1;
    /* fmod jumps by its divisor where x is a multiple of it: a divisor that a backend may round
     * otherwise than eager (exp's, a norm's) would flip such ties, so it is an input or a number */
    if (k == K_FMOD && g->p->op[b].k != K_INPUT && g->p->op[b].k != K_SCALAR) return -1;
    if (k == K_FMOD && with[CL_FMOD] && chance(&g->r, 50)) {
        Op s = new_op(K_SCALAR);
        VInfo si;
        memset(&si, 0, sizeof si);
        si.weak = 1, si.dt = KN_F32, si.nonfin = 1;
        s.f[0] = chance(&g->r, 50) ? INFINITY : -INFINITY;
        if ((b = push(g, &s, &si)) < 0) return -1;
        va = &g->v[a], vb = &g->v[b];
    }
    vi.dt = (uint8_t)(cmp || logical ? KN_BOOL : promote(va, vb));
    if (k == K_DIV && !is_float(vi.dt)) vi.dt = KN_F32;
    vi.grad = is_float(vi.dt) && (va->grad || vb->grad);
    vi.nonfin = is_float(vi.dt) && (va->nonfin || vb->nonfin || k == K_DIV || k == K_POW);
    vi.big = vi.dt != KN_BOOL && (va->big || vb->big || k == K_DIV || k == K_POW || k == K_MUL);
    Op o = new_op(k);
    set_src(&o, 2, a, b, -1);
    return push(g, &o, &vi);
}

static int gen_where(Gen *g, int k)
{
    int c = pick(g, p_bool);
    if (c < 0) return -1;
    int a = k == K_WHERE ? partner(g, c, 0) : pick_or_new(g, p_float, g->v[c].nd);
    if (a < 0) return -1;
    VInfo vi, t;
    memset(&vi, 0, sizeof vi);
    Op o = new_op(k);
    if (k == K_MASKED_FILL) { /* the mask broadcasts to x's shape */
        if (!bcast(&g->v[a], &g->v[c], &vi) || vi.nd != g->v[a].nd) return -1;
        for (int i = 0; i < vi.nd; i++)
            if (!same_dim(vi.d[i], g->v[a].d[i])) return -1;
        vi = g->v[a];
        o.f[0] = (double[]){0, -1e9, 1.5, -INFINITY}[rnd(&g->r, 4)];
        vi.nonfin |= isinf(o.f[0]) && is_float(vi.dt);
        set_src(&o, 2, a, c, -1);
        return push(g, &o, &vi);
    }
    int b = partner(g, a, 1);
    if (b < 0 || !bcast(&g->v[c], &g->v[a], &t) || !bcast(&t, &g->v[b], &vi)) return -1;
    const VInfo *va = &g->v[a], *vb = &g->v[b];
    vi.dt = (uint8_t)promote(va, vb);
    vi.grad = is_float(vi.dt) && (va->grad || vb->grad);
    vi.nonfin = va->nonfin || vb->nonfin;
    vi.big = va->big || vb->big;
    set_src(&o, 3, c, a, b);
    return push(g, &o, &vi);
}

/* dims of x to reduce: ip[0..n) and n in ip[6] (0: all), keepdim in ip[7]; vi the result's shape */
static void reduce_dims(Gen *g, Op *o, const VInfo *x, VInfo *vi)
{
    int n = x->nd && chance(&g->r, 80) ? 1 + rnd(&g->r, x->nd) : 0, keep = chance(&g->r, 40), m = 0;
    uint8_t red[KN_MAX_DIMS] = {0};
    for (int i = 0; i < n; i++) {
        int d = rnd(&g->r, x->nd);
        if (red[d]) continue;
        red[d] = 1;
        o->ip[m++] = chance(&g->r, 25) ? d - x->nd : d;
    }
    if (x->nd && chance(&g->r, 2)) o->ip[m++] = x->nd + 1; /* a bad dim: an error either way */
    o->ip[6] = m, o->ip[7] = keep;
    *vi = *x;
    vi->nd = 0;
    for (int i = 0; i < x->nd; i++) {
        if (!red[i] && m) vi->d[vi->nd++] = x->d[i];
        else if (keep) vi->d[vi->nd++] = cdim(1);
    }
}

static int gen_reduce(Gen *g, int k)
{
    int a = chance(&g->r, 8) ? pick(g, p_num) : pick_or_new(g, p_float, rand_rank(g));
    if (a < 0) return -1;
    Op o = new_op(k);
    const VInfo *x = &g->v[a];
    VInfo vi = *x;
    set_src(&o, 1, a, -1, -1);
    vi.hi = 0;
    if (k <= K_STD) {
        reduce_dims(g, &o, x, &vi);
        if (k == K_VAR || k == K_STD) o.f[0] = rnd(&g->r, 2);
    } else {
        int d = x->nd ? rnd(&g->r, x->nd) : 0;
        int nodim = (k == K_PROD || k == K_ARGMAX || k == K_ARGMIN) && chance(&g->r, 25);
        if (x->nd == 0 && k != K_CUMSUM && k != K_SOFTMAX && k != K_LOG_SOFTMAX) nodim = 1;
        o.ip[0] = nodim ? KN_NODIM : chance(&g->r, 20) ? d - x->nd : d;
        o.ip[1] = chance(&g->r, 40);
        if (k == K_PROD || k == K_ARGMAX || k == K_ARGMIN) {
            vi.nd = 0;
            for (int i = 0; i < x->nd; i++) {
                if (i != d && !nodim) vi.d[vi.nd++] = x->d[i];
                else if (o.ip[1]) vi.d[vi.nd++] = cdim(1);
            }
        }
    }
    if ((k == K_SUM || k == K_PROD || k == K_CUMSUM) && !is_float(x->dt)) vi.dt = KN_I64;
    if (k == K_SUM || k == K_PROD || k == K_CUMSUM) vi.big = 1;
    if (k == K_PROD) vi.nonfin |= is_float(vi.dt);
    if ((k == K_MEAN || k == K_VAR || k == K_STD || k == K_LOGSUMEXP || k == K_SOFTMAX || k == K_LOG_SOFTMAX) &&
        !is_float(vi.dt))
        vi.dt = KN_F32;
    if (k == K_ARGMAX || k == K_ARGMIN) vi.dt = KN_I64, vi.grad = 0, vi.nonfin = 0, vi.big = 0;
    return push(g, &o, &vi);
}

/* the length of kn_slice(x, dim of size m, start, stop, step) */
static int64_t slice_count(int64_t m, int64_t start, int64_t stop, int64_t step)
{
    int64_t a = start < 0 ? (start + m < 0 ? 0 : start + m) : start > m ? m : start;
    int64_t b = stop < 0 ? (stop + m < 0 ? 0 : stop + m) : stop > m ? m : stop;
    return b > a ? (b - a - 1) / step + 1 : 0;
}

static int gen_view(Gen *g, int k)
{
    int a = pick_or_new(g, k == K_TRANSPOSE || k == K_TRIU || k == K_TRIL ? p_nd2 : k == K_RESHAPE || k == K_VIEW ||
                                   k == K_UNSQUEEZE || k == K_FLATTEN || k == K_SQUEEZE ? p_any : p_nd1,
                        1 + rnd(&g->r, 3));
    if (a < 0) return -1;
    Op o = new_op(k);
    const VInfo *x = &g->v[a];
    VInfo vi = *x;
    int nd = x->nd, d = nd ? rnd(&g->r, nd) : 0;
    Dim n = nd ? x->d[d] : cdim(1);
    set_src(&o, 1, a, -1, -1);
    switch (k) {
    case K_RESHAPE:
    case K_VIEW: {
        int form = rnd(&g->r, 4);
        o.ip[0] = form, o.ip[1] = d;
        if (form == 0) {
            int sym = 0;
            for (int i = 0; i < nd; i++) sym |= x->d[i].cls;
            vi.nd = 1;
            vi.d[0] = nd == 1 ? x->d[0] : sym ? (Dim){vnumel(x), ++g->ncls} : cdim(vnumel(x));
        } else if (form == 1) {
            if (d + 1 >= nd) return -1;
            vi.d[d] = derived(g, x->d[d].n * x->d[d + 1].n, x->d[d], x->d[d + 1], 1);
            for (int i = d + 1; i + 1 < nd; i++) vi.d[i] = x->d[i + 1];
            vi.nd--;
        } else if (form == 2) {
            int64_t f = (int64_t[]){2, 3, 4, 5, 7}[rnd(&g->r, 5)];
            if (!nd || n.cls || n.n % f || nd == KN_MAX_DIMS) return -1;
            for (int i = nd; i > d + 1; i--) vi.d[i] = x->d[i - 1];
            vi.d[d] = cdim(f), vi.d[d + 1] = cdim(n.n / f);
            o.ip[2] = f;
            vi.nd++;
        } else {
            if (nd == KN_MAX_DIMS) return -1;
            for (int i = nd; i > 0; i--) vi.d[i] = x->d[i - 1];
            vi.d[0] = cdim(1);
            vi.nd++;
        }
        break;
    }
    case K_FLATTEN: {
        int e = nd ? d + rnd(&g->r, nd - d) : 0;
        o.ip[0] = d, o.ip[1] = chance(&g->r, 20) ? e - nd : e;
        if (!nd) {
            vi.nd = 1, vi.d[0] = cdim(1);
            break;
        }
        int64_t m = 1, sym = 0;
        for (int i = d; i <= e; i++) m *= x->d[i].n, sym |= x->d[i].cls;
        vi.d[d] = e == d ? x->d[d] : sym ? (Dim){m, ++g->ncls} : cdim(m);
        for (int i = d + 1; i + (e - d) < nd; i++) vi.d[i] = x->d[i + (e - d)];
        vi.nd = (uint8_t)(nd - (e - d));
        break;
    }
    case K_SQUEEZE: {
        int all = chance(&g->r, 30);
        o.ip[0] = all ? KN_NODIM : d;
        vi.nd = 0;
        for (int i = 0; i < nd; i++)
            if (!(is_one(x->d[i]) && (all || i == d))) vi.d[vi.nd++] = x->d[i];
        break;
    }
    case K_UNSQUEEZE:
        if (nd == KN_MAX_DIMS) return -1;
        d = rnd(&g->r, nd + 1);
        o.ip[0] = chance(&g->r, 20) ? d - nd - 1 : d;
        for (int i = nd; i > d; i--) vi.d[i] = x->d[i - 1];
        vi.d[d] = cdim(1);
        vi.nd++;
        break;
    case K_TRANSPOSE: {
        int e = rnd(&g->r, nd);
        o.ip[0] = d, o.ip[1] = chance(&g->r, 20) ? e - nd : e;
        vi.d[d] = x->d[e], vi.d[e] = x->d[d];
        break;
    }
    case K_PERMUTE:
        for (int i = 0; i < nd; i++) o.ip[i] = i;
        for (int i = nd - 1; i > 0; i--) {
            int j = rnd(&g->r, i + 1);
            int64_t t = o.ip[i];
            o.ip[i] = o.ip[j], o.ip[j] = t;
        }
        for (int i = 0; i < nd; i++) vi.d[i] = x->d[o.ip[i]];
        break;
    case K_EXPAND: {
        int lead = chance(&g->r, 40) ? 1 + rnd(&g->r, 2) : 0, one = -1;
        if (nd + lead > KN_MAX_DIMS) return -1;
        for (int i = 0; i < nd; i++)
            if (is_one(x->d[i]) && (one < 0 || chance(&g->r, 50))) one = i;
        if (one < 0 && !lead) return -1;
        o.ip[0] = lead, o.ip[3] = one, o.ip[4] = 1 + rnd(&g->r, 7);
        vi.nd = (uint8_t)(nd + lead);
        for (int i = 0; i < lead; i++) vi.d[i] = cdim(o.ip[1 + i] = 1 + rnd(&g->r, 5));
        for (int i = 0; i < nd; i++) vi.d[lead + i] = i == one ? cdim(o.ip[4]) : x->d[i];
        break;
    }
    case K_SLICE: {
        int64_t start = (int64_t[]){0, 1, -2, -1000, 2}[rnd(&g->r, 5)];
        int64_t stop = (int64_t[]){(int64_t)1 << 40, -1, 1, 3, (int64_t)1 << 40}[rnd(&g->r, 5)];
        int64_t step = 1 + rnd(&g->r, 3), m = n.n, cnt = slice_count(m, start, stop, step);
        o.ip[0] = d, o.ip[1] = start, o.ip[2] = stop, o.ip[3] = step;
        vi.d[d] = cdim(cnt);
        if (n.cls) { /* how the count moves with s0 */
            int64_t c1 = slice_count(m + 1, start, stop, step), c7 = slice_count(m + 7, start, stop, step);
            if (!with[CL_EMPTY] && slice_count(g->smin, start, stop, step) == 0) return -1;
            if (c1 == cnt && c7 == cnt) g->nonaffine |= slice_count(g->smin, start, stop, step) != cnt;
            else if (cnt == m && c1 == m + 1) vi.d[d] = n;
            else vi.d[d] = derived(g, cnt, n, cdim(1), step == 1 && c1 == cnt + 1 && c7 == cnt + 7);
        }
        break;
    }
    case K_NARROW: {
        int64_t start = rnd(&g->r, 3), k2 = rnd(&g->r, 3);
        if (start + k2 > n.n) return -1;
        o.ip[0] = d;
        o.e[0] = (SzE){-1, 0, 0, start};
        if (n.cls || chance(&g->r, 50)) { /* a length read from the operand's size */
            o.e[1] = (SzE){0, (int8_t)d, 1, -start - k2};
            o.e[1].v = (int16_t)a;
            vi.d[d] = start + k2 ? derived(g, n.n - start - k2, n, cdim(1), 1) : n;
        } else {
            o.e[1] = (SzE){-1, 0, 0, n.n - start - k2};
            vi.d[d] = cdim(n.n - start - k2);
        }
        break;
    }
    case K_PAD: {
        int np = 2 * (1 + (nd >= 2 && chance(&g->r, 40)));
        if (np > 2 * nd) return -1;
        o.ip[6] = np;
        for (int i = 0; i < np; i++) {
            int dd = nd - 1 - i / 2;
            o.ip[i] = (int64_t[]){0, 1, 2, -1}[rnd(&g->r, 4)];
            Dim m = vi.d[dd];
            if (m.n + o.ip[i] < 0 || (m.cls && o.ip[i] < 0 && g->smin < 2)) return -1;
            vi.d[dd] = o.ip[i] ? derived(g, m.n + o.ip[i], m, cdim(1), 1) : m;
        }
        o.f[0] = (double[]){0, 1.5, -INFINITY}[rnd(&g->r, 3)];
        vi.nonfin |= isinf(o.f[0]);
        break;
    }
    case K_CAT:
    case K_STACK: {
        int b = -1;
        if (chance(&g->r, 30)) b = a;
        for (int i = g->p->nops - 1; i >= 0 && b < 0; i--) {
            const VInfo *y = &g->v[i];
            int ok = !y->weak && y->nd == nd && i != a;
            for (int j = 0; j < nd && ok; j++) ok = same_dim(y->d[j], x->d[j]) || (k == K_CAT && j == d);
            if (ok && chance(&g->r, 60)) b = i;
        }
        if (b < 0) {
            Dim e[KN_MAX_DIMS];
            memcpy(e, x->d, sizeof e);
            if (k == K_CAT) e[d] = rand_dim(g);
            b = new_input(g, is_float(x->dt) ? x->dt : KN_F32, nd, e, D_GRID, 0, 0, 1);
            if (b < 0) return -1;
            x = &g->v[a];
        }
        const VInfo *y = &g->v[b];
        set_src(&o, 2, a, b, -1);
        vi.dt = (uint8_t)promote(x, y);
        vi.grad = is_float(vi.dt) && (x->grad || y->grad);
        vi.nonfin = x->nonfin || y->nonfin, vi.big = x->big || y->big;
        if (k == K_CAT) {
            o.ip[0] = d;
            vi.d[d] = derived(g, x->d[d].n + y->d[d].n, x->d[d], y->d[d], 1);
            if (!x->d[d].cls && !y->d[d].cls) vi.d[d] = cdim(x->d[d].n + y->d[d].n);
        } else {
            if (nd == KN_MAX_DIMS) return -1;
            d = rnd(&g->r, nd + 1);
            o.ip[0] = d;
            for (int i = nd; i > d; i--) vi.d[i] = x->d[i - 1];
            vi.d[d] = cdim(2);
            vi.nd++;
        }
        break;
    }
    case K_SPLIT:
    case K_CHUNK: {
        int64_t m = n.n, size, cnt, piece;
        if (m == 0) return -1;
        if (k == K_SPLIT) {
            size = (int64_t[]){1, 2, 3, m / 2 + 1}[rnd(&g->r, 4)];
        } else {
            o.ip[0] = 2 + rnd(&g->r, 3);
            size = (m + o.ip[0] - 1) / o.ip[0];
        }
        cnt = (m + size - 1) / size;
        if (k == K_SPLIT) o.ip[0] = size;
        piece = (int64_t[]){0, 1, cnt - 1}[rnd(&g->r, 3)];
        if (piece >= cnt) piece = cnt - 1;
        o.ip[1] = d, o.ip[2] = piece;
        m = piece == cnt - 1 ? m - size * (cnt - 1) : size;
        vi.d[d] = n.cls ? derived(g, m, n, cdim(1), 0) : cdim(m);
        break;
    }
    case K_TRIU:
    case K_TRIL: o.ip[0] = rnd(&g->r, 5) - 2; break;
    default: return -1;
    }
    return push(g, &o, &vi);
}

/* an index input of shape d, values in [0, hi) (now and then, where past, one past: an error either way) */
static int index_input(Gen *g, int nd, const Dim *d, int64_t hi, int past)
{
    if (hi <= 0) return -1;
    return new_input(g, chance(&g->r, 15) ? KN_I32 : KN_I64, nd, d, D_INT, 0, hi + (past && chance(&g->r, 3)), 0);
}

/* the values a dim of x holds at every call (its smallest size): an index range */
static int64_t index_range(Gen *g, Dim n)
{
    return n.cls == 0 ? n.n : n.cls == 1 ? g->smin : 0;
}

static int gen_index(Gen *g, int k)
{
    Op o = new_op(k);
    VInfo vi;
    Dim e[KN_MAX_DIMS];
    if (k == K_ONE_HOT || k == K_EMBEDDING) {
        int64_t c = (int64_t[]){2, 3, 5, 10}[rnd(&g->r, 4)];
        int nd = rnd(&g->r, 3), idx, w = -1;
        nd = rand_shape(g, nd, e);
        if (k == K_EMBEDDING) {
            w = chance(&g->r, 50) ? pick(g, p_float2) : -1;
            if (w >= 0 && (g->v[w].nd != 2 || g->v[w].d[0].cls)) w = -1;
            if (w < 0) {
                Dim wd[2] = {cdim(c), rand_dim(g)};
                if ((w = new_input(g, rand_float_dt(g), 2, wd, D_GRID, 0, 0, 1)) < 0) return -1;
            }
            c = g->v[w].d[0].n;
        }
        /* one_hot trusts a traced index (an out-of-range class gives a zero row): in range only */
        if ((idx = index_input(g, nd, e, c, k == K_EMBEDDING)) < 0) return -1;
        vi = g->v[idx];
        vi.hi = 0;
        if (k == K_ONE_HOT) {
            if (vi.nd == KN_MAX_DIMS) return -1;
            o.ip[0] = g->breaks_ok && chance(&g->r, 8) ? -1 : c; /* -1 reads the values: a graph break */
            if (o.ip[0] < 0) g->breaks = 1;
            vi.d[vi.nd++] = cdim(c);
            vi.dt = KN_I64;
            set_src(&o, 1, idx, -1, -1);
        } else {
            const VInfo *wv = &g->v[w];
            vi.d[vi.nd++] = wv->d[1];
            vi.dt = wv->dt, vi.grad = wv->grad, vi.nonfin = wv->nonfin, vi.big = wv->big;
            set_src(&o, 2, w, idx, -1);
        }
        return push(g, &o, &vi);
    }
    int a = pick_or_new(g, k == K_SCATTER_ADD ? p_float1 : p_nd1, 1 + rnd(&g->r, 3));
    if (a < 0) return -1;
    const VInfo *x = &g->v[a];
    int nd = x->nd, d = rnd(&g->r, nd), idx;
    int64_t hi = index_range(g, x->d[d]);
    vi = *x;
    o.ip[0] = chance(&g->r, 20) ? d - nd : d;
    if (k == K_INDEX_SELECT) {
        Dim m = rand_dim(g);
        if ((idx = index_input(g, 1, &m, hi, 1)) < 0) return -1;
        vi = g->v[a];
        vi.d[d] = m;
        set_src(&o, 2, a, idx, -1);
    } else if (k == K_GATHER) { /* idx no larger than x but along d */
        for (int i = 0; i < nd; i++) e[i] = i == d ? rand_dim(g) : chance(&g->r, 70) ? g->v[a].d[i] : cdim(1);
        if ((idx = index_input(g, nd, e, hi, 1)) < 0) return -1;
        vi = g->v[a];
        memcpy(vi.d, e, sizeof e);
        set_src(&o, 2, a, idx, -1);
    } else { /* scatter_add: src and idx of one shape, no larger than x but along d */
        for (int i = 0; i < nd; i++) e[i] = i == d ? rand_dim(g) : chance(&g->r, 80) ? x->d[i] : cdim(1);
        int src = new_input(g, x->dt, nd, e, D_GRID, 0, 0, 1);
        if (src < 0 || (idx = index_input(g, nd, e, hi, 1)) < 0) return -1;
        vi = g->v[a];
        vi.grad |= g->v[src].grad;
        vi.big = 1;
        set_src(&o, 3, a, idx, src);
    }
    return push(g, &o, &vi);
}

static int gen_dot(Gen *g, int k)
{
    int a = pick_or_new(g, k == K_BMM ? p_float3 : p_float1, k == K_BMM ? 3 : 1 + rnd(&g->r, 3)), b, c = -1;
    if (a < 0) return -1;
    const VInfo *x = &g->v[a];
    int nd = x->nd, dt = x->dt;
    Dim kd = x->d[nd - 1], m = rand_dim(g), e[KN_MAX_DIMS];
    VInfo vi = *x;
    Op o = new_op(k);
    if (k == K_LINEAR) {
        Dim wd[2] = {m, kd};
        if ((b = new_input(g, dt, 2, wd, D_GRID, 0, 0, 1)) < 0) return -1;
        if (chance(&g->r, 60) && (c = new_input(g, dt, 1, &m, D_GRID, 0, 0, 1)) < 0) return -1;
        vi.d[nd - 1] = m;
    } else if (k == K_BMM || nd == 1 || chance(&g->r, 50)) { /* b (k, m), (k) or, batched, (..., k, m) */
        int bn = k == K_BMM ? 3 : chance(&g->r, 25) ? 1 : chance(&g->r, 60) || nd < 3 ? 2 : nd;
        for (int i = 0; i < bn - 2; i++) e[i] = x->d[nd - 2 - (bn - 2) + i];
        e[bn < 2 ? 0 : bn - 2] = kd;
        if (bn >= 2) e[bn - 1] = m;
        if ((b = new_input(g, dt, bn, e, D_GRID, 0, 0, 1)) < 0) return -1;
        x = &g->v[a];
        vi = *x;
        if (nd == 1 && bn == 1) vi.nd = 0;
        else if (nd == 1) {
            vi.nd = (uint8_t)(bn - 1);
            memcpy(vi.d, e, sizeof *e * (size_t)(bn - 2));
            vi.d[bn - 2] = m;
        } else if (bn == 1) {
            vi.nd--;
        } else {
            vi.d[nd - 1] = m;
        }
    } else { /* an existing value as b: (..., k, m) */
        b = -1;
        for (int i = g->p->nops - 1; i >= 0 && b < 0; i--)
            if (is_float(g->v[i].dt) && !g->v[i].weak && g->v[i].nd == 2 && same_dim(g->v[i].d[0], kd)) b = i;
        if (b < 0) return -1;
        vi.d[nd - 1] = g->v[b].d[1];
    }
    const VInfo *y = &g->v[b];
    vi.dt = (uint8_t)promote(&g->v[a], y);
    vi.grad = g->v[a].grad || y->grad || (c >= 0 && g->v[c].grad);
    vi.nonfin = g->v[a].nonfin || y->nonfin, vi.big = 1, vi.hi = 0;
    set_src(&o, k == K_LINEAR ? 3 : 2, a, b, c);
    return push(g, &o, &vi);
}

/* one output size of a window op, as torch computes it; -1 if there is none */
static int64_t window_out(int64_t n, int kk, int s, int p, int d, int ceil_mode)
{
    int64_t span = n + 2 * p - (int64_t)d * (kk - 1) - 1;
    if (span < 0) return -1;
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= n + p) o--;
    return o;
}

static int gen_conv(Gen *g, int k)
{
    int sp = k == K_CONV1D ? 1 : 2, nd = sp + 2;
    int a = pick(g, k == K_CONV1D ? p_float3 : p_float4);
    if (a < 0 || chance(&g->r, 30)) {
        Dim d[4] = {cdim(1 + rnd(&g->r, 3)), cdim((int64_t[]){1, 2, 3, 4, 6}[rnd(&g->r, 5)]), cdim(1 + rnd(&g->r, 12)),
                    cdim(1 + rnd(&g->r, 12))};
        if (g->p->dyn && chance(&g->r, 40)) d[0] = (Dim){g->p->var[0], 1};
        if ((a = new_input(g, chance(&g->r, 80) ? KN_F32 : KN_F64, nd, d, D_GRID, 0, 0, 1)) < 0) return -1;
    }
    const VInfo *x = &g->v[a];
    VInfo vi = *x;
    Op o = new_op(k);
    Dim c = x->d[1];
    if (c.cls || c.n == 0) return -1;
    if (k == K_MAX_POOL2D || k == K_AVG_POOL2D || k == K_ADAPTIVE_POOL2D) {
        set_src(&o, 1, a, -1, -1);
        for (int i = 0; i < 2; i++) {
            if (x->d[2 + i].cls) return -1;
            if (k == K_ADAPTIVE_POOL2D) {
                o.ip[i] = 1 + rnd(&g->r, 5);
                vi.d[2 + i] = cdim(o.ip[i]);
                continue;
            }
            int kk = 1 + rnd(&g->r, 3), s = rnd(&g->r, 3), p = rnd(&g->r, kk / 2 + 1);
            o.ip[i] = kk, o.ip[2 + i] = s, o.ip[4 + i] = p;
        }
        if (k == K_ADAPTIVE_POOL2D) return push(g, &o, &vi);
        o.ip[6] = k == K_MAX_POOL2D ? 1 + rnd(&g->r, 2) : 0;
        o.ip[7] = rnd(&g->r, 4);
        for (int i = 0; i < 2; i++) {
            int64_t w = window_out(x->d[2 + i].n, (int)o.ip[i], o.ip[2 + i] ? (int)o.ip[2 + i] : (int)o.ip[i],
                                   (int)o.ip[4 + i], o.ip[6] ? (int)o.ip[6] : 1, (int)(o.ip[7] & 1));
            if (w < 1) return -1;
            vi.d[2 + i] = cdim(w);
        }
        vi.big = x->big && k == K_MAX_POOL2D;
        return push(g, &o, &vi);
    }
    int groups = chance(&g->r, 70) ? 1 : chance(&g->r, 50) ? (int)c.n : c.n % 2 ? 1 : 2;
    int64_t outc = groups * (1 + rnd(&g->r, 3));
    Dim wd[4];
    wd[0] = cdim(k == K_CONV_T2D ? c.n : outc);
    wd[1] = cdim(k == K_CONV_T2D ? outc / groups : c.n / groups);
    o.ip[6] = groups;
    for (int i = 0; i < sp; i++) {
        int kk = 1 + rnd(&g->r, 3), s = 1 + rnd(&g->r, 2), p = rnd(&g->r, 3), d = 1 + (chance(&g->r, 20));
        Dim n = x->d[2 + i];
        int64_t w;
        wd[2 + i] = cdim(kk);
        o.ip[i] = s, o.ip[2 + i] = p, o.ip[4 + i] = d;
        if (k == K_CONV_T2D) {
            if (p > d * (kk - 1)) p = 0, o.ip[2 + i] = 0;
            o.ip[7] = s > 1 && chance(&g->r, 30) ? 1 : 0;
            w = (n.n - 1) * s - 2 * p + (int64_t)d * (kk - 1) + o.ip[7] + 1;
        } else {
            w = window_out(n.n, kk, s, p, d, 0);
        }
        if (w < 1) return -1;
        vi.d[2 + i] = n.cls ? derived(g, w, n, cdim(1), s == 1) : cdim(w);
        if (k == K_CONV_T2D && n.cls) vi.d[2 + i] = derived(g, w, n, cdim(1), 0);
    }
    if (k == K_CONV1D) {
        o.ip[1] = o.ip[0], o.ip[3] = o.ip[2], o.ip[5] = o.ip[4];
    }
    int w = new_input(g, x->dt, nd, wd, D_GRID, 0, 0, 1), b = -1;
    if (w < 0 || (chance(&g->r, 50) && (b = new_input(g, x->dt, 1, &(Dim){outc, 0}, D_GRID, 0, 0, 1)) < 0)) return -1;
    vi.d[1] = cdim(outc);
    vi.grad = g->v[a].grad || g->v[w].grad || (b >= 0 && g->v[b].grad);
    vi.big = 1;
    set_src(&o, 3, a, w, b);
    return push(g, &o, &vi);
}

/* an optional leaf of shape d for a norm's weight or bias: -1 when left out (*ok 0 if it failed) */
static int optional_leaf(Gen *g, int dt, int nd, const Dim *d, int data, int *ok)
{
    if (chance(&g->r, 40)) return -1;
    int v = new_input(g, dt, nd, d, data, 0, 0, 1);
    *ok &= v >= 0;
    return v;
}

static int gen_norm(Gen *g, int k)
{
    int a = pick_or_new(g, k == K_LAYER_NORM || k == K_RMS_NORM ? p_float1 : p_float2, 2 + rnd(&g->r, 2)), ok = 1;
    if (a < 0) return -1;
    const VInfo *x = &g->v[a];
    VInfo vi = *x;
    Op o = new_op(k);
    int dt = x->dt, nd = x->nd, w, b = -1;
    if (k == K_LAYER_NORM || k == K_RMS_NORM) {
        int nn = 1 + (nd >= 2 && chance(&g->r, 40));
        o.ip[0] = nn;
        o.f[0] = k == K_RMS_NORM && chance(&g->r, 50) ? 0 : 1e-5;
        w = optional_leaf(g, dt, nn, g->v[a].d + nd - nn, D_POS, &ok);
        if (k == K_LAYER_NORM) b = optional_leaf(g, dt, nn, g->v[a].d + nd - nn, D_GRID, &ok);
        set_src(&o, k == K_LAYER_NORM ? 3 : 2, a, w, b);
    } else {
        Dim c = x->d[1];
        if (c.cls || c.n == 0) return -1;
        if (k == K_GROUP_NORM) {
            int64_t gr = (int64_t[]){1, 2, 3, c.n}[rnd(&g->r, 4)];
            if (c.n % gr) gr = 1;
            o.ip[0] = gr, o.f[0] = 1e-5;
            w = optional_leaf(g, dt, 1, &c, D_POS, &ok);
            b = optional_leaf(g, dt, 1, &c, D_GRID, &ok);
            set_src(&o, 3, a, w, b);
        } else {
            int train = chance(&g->r, 50), rm = -1, rv = -1;
            if (!train) {
                rm = new_input(g, dt, 1, &c, D_GRID, 0, 0, 0);
                rv = new_input(g, dt, 1, &c, D_POS, 0, 0, 0);
                ok &= rm >= 0 && rv >= 0;
            }
            w = optional_leaf(g, dt, 1, &c, D_POS, &ok);
            b = optional_leaf(g, dt, 1, &c, D_GRID, &ok);
            o.ip[0] = train, o.f[0] = 0, o.f[1] = 1e-5;
            set_src(&o, 5, a, rm, rv);
            o.src[3] = (int16_t)w, o.src[4] = (int16_t)b;
        }
    }
    if (!ok) return -1;
    for (int j = 1; j < o.nsrc; j++) vi.grad |= o.src[j] >= 0 && g->v[o.src[j]].grad;
    vi.nonfin = 1, vi.big = 1;
    return push(g, &o, &vi);
}

static int gen_loss(Gen *g, int k)
{
    int a = pick_or_new(g, k == K_CROSS_ENTROPY || k == K_NLL ? p_float2 : p_float, 1 + rnd(&g->r, 3)), t;
    if (a < 0) return -1;
    Op o = new_op(k);
    VInfo vi = g->v[a];
    o.ip[0] = rnd(&g->r, 3);
    if (k == K_CROSS_ENTROPY || k == K_NLL) {
        const VInfo *x = &g->v[a];
        Dim e[KN_MAX_DIMS], c = x->d[1];
        int nd = x->nd - 1;
        if (c.cls || c.n == 0) return -1;
        e[0] = x->d[0];
        for (int i = 1; i < nd; i++) e[i] = x->d[i + 1];
        if (k == K_NLL) { /* the log-probabilities of x */
            Op ls = new_op(K_LOG_SOFTMAX);
            VInfo li = *x;
            ls.ip[0] = 1;
            set_src(&ls, 1, a, -1, -1);
            if ((a = push(g, &ls, &li)) < 0) return -1;
        }
        if ((t = new_input(g, KN_I64, nd, e, D_INT, 0, c.n, 0)) < 0) return -1;
        o.ip[1] = chance(&g->r, 20), o.ip[2] = rnd(&g->r, (int)c.n);
        o.f[0] = k == K_CROSS_ENTROPY && chance(&g->r, 30) ? 0.1 : 0;
        memcpy(vi.d, e, sizeof e);
        vi.nd = (uint8_t)nd;
    } else {
        if (k == K_BCE) { /* probabilities: sigmoid of x */
            Op sg = new_op(K_SIGMOID);
            VInfo si = g->v[a];
            set_src(&sg, 1, a, -1, -1);
            si.nonfin = 0, si.big = 0;
            if ((a = push(g, &sg, &si)) < 0) return -1;
        }
        const VInfo *x = &g->v[a];
        if ((t = new_input(g, x->dt, x->nd, x->d, k == K_BCE || k == K_BCE_LOGITS ? D_UNIT : D_GRID, 0, 0,
                           k == K_MSE || k == K_L1)) < 0)
            return -1;
        vi = g->v[a];
        vi.grad |= g->v[t].grad;
    }
    if (o.ip[0] != 2) vi.nd = 0;
    vi.nonfin = 1, vi.big = 1, vi.hi = 0;
    set_src(&o, 2, a, t, -1);
    return push(g, &o, &vi);
}

static int gen_misc(Gen *g, int k)
{
    Op o = new_op(k);
    int a = pick_or_new(g, k == K_SDPA ? p_float2 : k == K_ARANGE_ADD ? p_num : p_float, 2 + rnd(&g->r, 2));
    if (a < 0) return -1;
    VInfo vi = g->v[a];
    set_src(&o, 1, a, -1, -1);
    vi.hi = 0;
    switch (k) {
    case K_DROPOUT:
        o.f[0] = (double[]){0, 0.25, 0.5, 1}[rnd(&g->r, 4)];
        o.ip[0] = with[CL_RAND] && chance(&g->r, 70);
        break;
    case K_SDPA: {
        const VInfo *q = &g->v[a];
        Dim e[KN_MAX_DIMS];
        int nd = q->nd, kv, v;
        memcpy(e, q->d, sizeof e);
        e[nd - 2] = rand_dim(g);
        if ((kv = new_input(g, q->dt, nd, e, D_GRID, 0, 0, 1)) < 0) return -1;
        e[nd - 1] = rand_dim(g);
        if ((v = new_input(g, q->dt, nd, e, D_GRID, 0, 0, 1)) < 0) return -1;
        vi = g->v[a];
        vi.d[nd - 1] = e[nd - 1];
        vi.grad |= g->v[kv].grad || g->v[v].grad;
        o.ip[0] = chance(&g->r, 30);
        o.f[0] = chance(&g->r, 30) ? 0.5 : 0;
        vi.nonfin = 1;
        set_src(&o, 3, a, kv, v);
        break;
    }
    case K_RANDLIKE:
        o.ip[0] = rnd(&g->r, 2);
        if (!is_float(vi.dt)) return -1;
        if (vi.dt != KN_F64) vi.dt = KN_F32;
        break;
    case K_ARANGE_ADD:
        vi.dt = (uint8_t)(is_float(vi.dt) ? vi.dt : KN_F32);
        if (vi.dt == KN_F16 || vi.dt == KN_BF16) vi.dt = KN_F32;
        if (vi.nd == 0) vi.nd = 1, vi.d[0] = cdim(1);
        break;
    case K_ITEM_SCALE: {
        int b = pick(g, p_float);
        if (b < 0) return -1;
        o.ip[0] = rnd(&g->r, 3);
        set_src(&o, 2, a, b, -1);
        vi.nonfin = 1, vi.big = 1;
        g->breaks = 1;
        break;
    }
    case K_REREAD:
        vi.grad = 0;
        g->breaks = 1;
        break;
    default: return -1;
    }
    return push(g, &o, &vi);
}

/* one op of kind k, appended (with any inputs it needs); its value, or -1 */
static int gen_op(Gen *g, int k)
{
    if (k >= K_NEG && k <= K_TO) return gen_unary(g, k);
    if (k >= K_ADD && k <= K_LOGICAL_XOR) return gen_binary(g, k);
    if (k == K_WHERE || k == K_MASKED_FILL) return gen_where(g, k);
    if (k >= K_SUM && k <= K_LOG_SOFTMAX) return gen_reduce(g, k);
    if (k >= K_RESHAPE && k <= K_TRIL) return gen_view(g, k);
    if (k >= K_INDEX_SELECT && k <= K_ONE_HOT) return gen_index(g, k);
    if (k >= K_MATMUL && k <= K_LINEAR) return gen_dot(g, k);
    if (k >= K_CONV1D && k <= K_ADAPTIVE_POOL2D) return gen_conv(g, k);
    if (k >= K_LAYER_NORM && k <= K_BATCH_NORM) return gen_norm(g, k);
    if (k >= K_MSE && k <= K_NLL) return gen_loss(g, k);
    return gen_misc(g, k);
}

/* ---- the generator: a program ---- */

static const struct {
    uint8_t k, w;
} kinds[] = {
    {K_NEG, 2}, {K_ABS, 2}, {K_SIGN, 1}, {K_EXP, 3}, {K_LOG, 2}, {K_SQRT, 2}, {K_RSQRT, 1}, {K_RECIPROCAL, 1},
    {K_SQUARE, 2}, {K_SIN, 2}, {K_COS, 1}, {K_TANH, 2}, {K_ERF, 1}, {K_FLOOR, 1}, {K_CEIL, 1}, {K_ROUND, 1},
    {K_RELU, 3}, {K_SIGMOID, 2}, {K_SILU, 1}, {K_HARDSWISH, 1}, {K_LOGICAL_NOT, 1}, {K_CONTIGUOUS, 2},
    {K_DETACH, 1}, {K_GELU, 2}, {K_SOFTPLUS, 1}, {K_ELU, 1}, {K_LEAKY_RELU, 1}, {K_CLAMP, 2}, {K_TO, 4},
    {K_ADD, 5}, {K_SUB, 3}, {K_MUL, 5}, {K_DIV, 3}, {K_POW, 2}, {K_FMOD, 2}, {K_MINIMUM, 2}, {K_MAXIMUM, 2},
    {K_EQ, 1}, {K_NE, 1}, {K_LT, 2}, {K_LE, 1}, {K_GT, 2}, {K_GE, 1}, {K_LOGICAL_AND, 1}, {K_LOGICAL_OR, 1},
    {K_LOGICAL_XOR, 1}, {K_WHERE, 4}, {K_MASKED_FILL, 2},
    {K_SUM, 5}, {K_MEAN, 4}, {K_AMAX, 3}, {K_AMIN, 2}, {K_LOGSUMEXP, 2}, {K_VAR, 2}, {K_STD, 1}, {K_PROD, 2},
    {K_ARGMAX, 2}, {K_ARGMIN, 1}, {K_CUMSUM, 2}, {K_SOFTMAX, 3}, {K_LOG_SOFTMAX, 2},
    {K_RESHAPE, 3}, {K_VIEW, 2}, {K_FLATTEN, 2}, {K_SQUEEZE, 2}, {K_UNSQUEEZE, 3}, {K_TRANSPOSE, 4},
    {K_PERMUTE, 3}, {K_EXPAND, 3}, {K_SLICE, 4}, {K_NARROW, 2}, {K_PAD, 2}, {K_CAT, 3}, {K_STACK, 2},
    {K_SPLIT, 1}, {K_CHUNK, 1}, {K_TRIU, 1}, {K_TRIL, 1},
    {K_INDEX_SELECT, 2}, {K_GATHER, 2}, {K_SCATTER_ADD, 2}, {K_EMBEDDING, 2}, {K_ONE_HOT, 1},
    {K_MATMUL, 6}, {K_BMM, 2}, {K_LINEAR, 4},
    {K_CONV1D, 2}, {K_CONV2D, 3}, {K_CONV_T2D, 2}, {K_MAX_POOL2D, 2}, {K_AVG_POOL2D, 2}, {K_ADAPTIVE_POOL2D, 1},
    {K_LAYER_NORM, 2}, {K_RMS_NORM, 1}, {K_GROUP_NORM, 1}, {K_BATCH_NORM, 2},
    {K_MSE, 2}, {K_L1, 1}, {K_BCE, 1}, {K_BCE_LOGITS, 1}, {K_CROSS_ENTROPY, 3}, {K_NLL, 1},
    {K_DROPOUT, 2}, {K_SDPA, 2}, {K_RANDLIKE, 3}, {K_ARANGE_ADD, 1}, {K_ITEM_SCALE, 3}, {K_REREAD, 2},
};

static uint8_t only_ops[NKINDS]; /* --ops: [0] set if only these kinds */

static int parse_ops(const char *s)
{
    while (*s) {
        size_t n = strcspn(s, ",");
        int found = 0;
        for (int k = K_NEG; k < NKINDS; k++)
            if (strlen(op_name(k)) == n && strncmp(s, op_name(k), n) == 0) only_ops[k] = only_ops[0] = 1, found = 1;
        if (!found) {
            fprintf(stderr, "fuzz_compiled: unknown op '%.*s'\n", (int)n, s);
            return 0;
        }
        s += n + (s[n] == ',');
    }
    return 1;
}

static int pick_kind(Gen *g)
{
    int total = 0, n = (int)(sizeof kinds / sizeof *kinds);
    for (int i = 0; i < n; i++) total += kinds[i].w;
    for (;;) {
        int w = rnd(&g->r, total), i = 0;
        while (w >= kinds[i].w) w -= kinds[i++].w;
        int k = kinds[i].k;
        if (only_ops[0] && !only_ops[k]) continue;
        if (k == K_RANDLIKE && !with[CL_RAND]) continue;
        if ((k == K_ITEM_SCALE || k == K_REREAD) && !g->breaks_ok) continue;
        return k;
    }
}

static int64_t pick_s0(Gen *g)
{
    static const int64_t s[] = {2, 3, 4, 5, 7, 8, 13, 16, 17, 31, 64};
    if (chance(&g->r, 8)) return with[CL_EMPTY] && chance(&g->r, 40) ? 0 : 1;
    return s[rnd(&g->r, (int)(sizeof s / sizeof *s))];
}

static int backend_mask = 7; /* 1 c, 2 tcc, 4 interp */

/* A configuration on backend, unless --backends leaves it out (drawn all the same: the same
 * program's other configurations stay as they were). max-autotune times candidates: not on c. */
static void add_config(Prog *p, Rng *r, int backend)
{
    Config c = {(uint8_t)backend, (uint8_t)rnd(r, 3), (uint8_t)rnd(r, 3)};
    if (c.mode == KN_MODE_MAX_AUTOTUNE && (backend == KN_BACKEND_C || chance(r, 50))) c.mode = KN_MODE_DEFAULT;
    if (p->ncfg < MAXCFG && backend_mask >> backend & 1) p->cfg[p->ncfg++] = c;
}

/* the outputs: the last value and now and then a few more; the differentiated one first among those
 * that require grad, the others detached where the backward runs outside */
static void pick_outputs(Gen *g)
{
    Prog *p = g->p;
    int last = p->nops - 1;
    while (last > 0 && g->v[last].weak) last--;
    p->out[p->nout++] = (int16_t)last;
    for (int extra = chance(&g->r, 40) ? 1 + rnd(&g->r, 2) : 0; extra > 0; extra--) {
        int v = rnd(&g->r, p->nops), dup = g->v[v].weak;
        for (int k = 0; k < p->nout; k++) dup |= p->out[k] == v;
        if (!dup) p->out[p->nout++] = (int16_t)v;
    }
    p->dout = -1;
    for (int k = 0; k < p->nout && p->grad != G_NONE; k++) {
        const VInfo *v = &g->v[p->out[k]];
        if (!v->grad || !is_float(v->dt)) continue;
        if (p->dout < 0) {
            p->dout = k;
        } else if (p->grad == G_OUTSIDE) {
            Op o = new_op(K_DETACH);
            VInfo vi = *v;
            vi.grad = 0;
            set_src(&o, 1, p->out[k], -1, -1);
            int d = push(g, &o, &vi);
            if (d >= 0) p->out[k] = (int16_t)d;
            else p->nout = k; /* no room: drop it */
        }
    }
    if (p->dout < 0) {
        p->grad = G_NONE;
        for (int k = 0; k < p->nin; k++) p->in[k].reqgrad = 0;
    }
    if (p->grad == G_INSIDE) p->optim = rnd(&g->r, 3);
}

static void gen(Prog *p, uint64_t seed, int index)
{
    Gen g;
    memset(&g, 0, sizeof g);
    memset(p, 0, sizeof *p);
    g.p = p;
    p->seed = seed, p->index = index;
    g.r.s = seed;
    g.r.s = next64(&g.r) ^ ((uint64_t)index * 0xd1b54a32d192ed03ull);
    g.r.s = next64(&g.r);
    g.cap = (int64_t)1 << 15;
    g.ncls = 1;
    p->dyn = chance(&g.r, 35);
    p->ncalls = p->dyn ? 2 + rnd(&g.r, 3) : 1 + rnd(&g.r, 3);
    if (p->dyn) {
        p->s[0] = 2 + rnd(&g.r, 15);
        for (int c = 1; c < p->ncalls; c++) p->s[c] = pick_s0(&g);
        p->var[p->nvars++] = p->s[0];
    }
    g.smin = p->s[0];
    for (int c = 1; c < p->ncalls && p->dyn; c++) g.smin = p->s[c] < g.smin ? p->s[c] : g.smin;
    for (int n = 1 + rnd(&g.r, 3); n > 0; n--) p->var[p->nvars++] = pick_size(&g);
    int c = rnd(&g.r, 100);
    p->grad = c < 45 ? G_NONE : c < 72 ? G_INSIDE : G_OUTSIDE;
    g.breaks_ok = p->grad == G_NONE || (p->grad == G_INSIDE ? with[CL_ITEMBWD] : with[CL_READOUT]);
    if (with[CL_LONGSUM] && chance(&g.r, 10)) { /* one long reduction */
        static const int64_t longs[] = {100003, 1000000, 4000037, 10000000};
        Dim d[2] = {cdim(longs[rnd(&g.r, 4)]), cdim(1)};
        g.cap = 12000000;
        if (new_input(&g, chance(&g.r, 80) ? KN_F32 : KN_F16, 1, d, chance(&g.r, 50) ? D_POS : D_GRID, 0, 0, 1) >= 0)
            gen_op(&g, (int[]){K_SUM, K_MEAN, K_VAR, K_SOFTMAX}[rnd(&g.r, 4)]);
    } else {
        for (int n = 1 + rnd(&g.r, 2); n > 0; n--) float_input(&g, rand_rank(&g));
        int want = 1 + rnd(&g.r, 8) + (chance(&g.r, 20) ? rnd(&g.r, 12) : 0);
        for (int tries = 0, made = 0; tries < 200 && made < want && p->nops < MAXOPS - 8; tries++)
            made += gen_op(&g, pick_kind(&g)) >= 0;
    }
    if (p->nops == 0) float_input(&g, 1);
    pick_outputs(&g);
    p->generic = p->dyn && !g.nonaffine && !g.breaks;
    add_config(p, &g.r, KN_BACKEND_TCC);
    if (chance(&g.r, 60)) add_config(p, &g.r, KN_BACKEND_INTERP);
    if (chance(&g.r, 25)) add_config(p, &g.r, KN_BACKEND_C);
}

/* ---- running a program: inputs, calls, results ---- */

typedef struct {
    char what[40];
    int dt, nd;
    int64_t shape[KN_MAX_DIMS], n; /* n < 0: no value (a leaf the backward did not reach) */
    double *x;
} Val;

#define MAXVALS (MAXOUT + 1 + 3 * MAXIN)

typedef struct {
    kn_status st;
    int fail_op;     /* eager: the op that failed (-1: none, or not one of the program's) */
    char msg[256];
    int nv;
    Val v[MAXVALS];
} CallRes;

typedef struct {
    CallRes call[MAXCALLS];
    int entries, eager_calls;
    int64_t maxred;
    int zero_dim, alias_leaf, alias_step;
    double eps;
    char ref[MSG];
    int ref_op, rank[MAXOPS];
    int64_t ref_i;
    double ref_want, tol;
    char log[1024];
} RunRes;

static int64_t size_of(const Prog *p, int var, int call)
{
    return p->dyn && var == 0 && call >= 0 ? p->s[call] : p->var[var];
}

static uint32_t data_seed(const Prog *p, int k, int call)
{
    return (uint32_t)(p->seed * 2654435761u) ^ (uint32_t)(p->index * 40503) ^ (uint32_t)(k * 7919 + (call + 1) * 104729);
}

/* input k's base tensor (the storage its view reads) shape at a call: its shape, but for the view's dim */
static int base_shape(const Prog *p, int k, int call, int64_t *shape, int64_t *base)
{
    const InSpec *s = &p->in[k];
    for (int d = 0; d < s->nd; d++) shape[d] = base[d] = size_of(p, s->var[d], s->param ? -1 : call);
    if (s->view == V_T) base[s->vd] = shape[s->vd + 1], base[s->vd + 1] = shape[s->vd];
    if (s->view == V_STRIDED) base[s->vd] = 2 * shape[s->vd] + 1;
    if (s->view == V_EXPAND) base[s->vd] = 1;
    return s->nd;
}


static kn_tensor *make_input(kn_ctx *ctx, const Prog *p, int k, int call)
{
    const InSpec *s = &p->in[k];
    int64_t shape[KN_MAX_DIMS], base[KN_MAX_DIMS];
    int nd = base_shape(p, k, call, shape, base);
    int64_t n = numel_of(nd, base);
    uint32_t seed = data_seed(p, k, s->param ? -1 : call);
    double *buf = malloc((size_t)n * sizeof *buf + 8);
    if (!buf) return NULL;
    for (int64_t i = 0; i < n; i++) buf[i] = fz_value((uint64_t)i, seed, s->data, s->lo, s->hi);
    kn_tensor *t = kn_tensor_from(ctx, KN_F64, nd, base, buf);
    free(buf);
    if (run_dtype(s->dt) != KN_F64) t = kn_to(ctx, t, (kn_dtype)run_dtype(s->dt));
    if (s->view == V_T) t = kn_transpose(ctx, t, s->vd, s->vd + 1);
    if (s->view == V_STRIDED) t = kn_slice(ctx, t, s->vd, 1, 2 * shape[s->vd] + 1, 2);
    if (s->view == V_EXPAND) t = kn_expand(ctx, t, nd, shape);
    return t;
}

static void record(kn_ctx *ctx, CallRes *cr, kn_tensor *t, const char *fmt, int arg)
{
    Val *v = &cr->v[cr->nv++];
    snprintf(v->what, sizeof v->what, fmt, arg);
    v->n = -1;
    if (!t) return;
    v->dt = kn_dtype_of(t), v->nd = kn_ndim(t);
    memcpy(v->shape, kn_shape(t), (size_t)v->nd * sizeof *v->shape);
    v->x = read_f64(ctx, t, &v->n);
    if (!v->x) v->n = -2;
}

static RunRes *log_to;
static void log_sink(void *user, const char *line)
{
    (void)user;
    if (getenv("KN_FUZZ_LOGS")) fprintf(stderr, "%s\n", line);
    size_t n = strlen(log_to->log);
    if (n + 2 < sizeof log_to->log) snprintf(log_to->log + n, sizeof log_to->log - n, "%s\n", line);
}

static void free_run(RunRes *rr)
{
    for (int c = 0; c < MAXCALLS; c++)
        for (int j = 0; j < rr->call[c].nv; j++) free(rr->call[c].v[j].x);
    memset(rr, 0, sizeof *rr);
}

/* one call's inputs (params made once), then the call: eager (f NULL) or kn_call */
static void one_call(kn_ctx *ctx, const Prog *p, Run *r, kn_fn *f, int call, CallRes *cr)
{
    kn_tensor *in[MAXIN] = {NULL}, *out[MAXOUT + 1 + MAXIN], *leaves[MAXIN];
    int nin = 0, nleaf = 0, nout = p->nout + (p->grad == G_INSIDE ? 1 + r->nleaf : 0);
    memset(out, 0, sizeof out);
    for (int k = 0; k < p->nin; k++) {
        if (p->in[k].param) {
            if (p->in[k].reqgrad) leaves[nleaf++] = r->param[k];
            continue;
        }
        in[nin] = make_input(ctx, p, k, call);
        if (p->in[k].reqgrad) leaves[nleaf++] = kn_requires_grad(ctx, in[nin], 1);
        nin++;
    }
    r->fail_op = -1;
    kn_status st = f ? kn_call(f, in, nin, out, nout) : body(ctx, r, in, nin, out, nout);
    cr->fail_op = r->fail_op;
    if (!st && p->grad == G_OUTSIDE) { /* the backward outside the body */
        kn_tensor *loss = loss_of(ctx, out[p->dout]);
        st = loss ? kn_backward(ctx, loss, 0) : fail_status(ctx);
    }
    cr->st = st;
    if (st) {
        snprintf(cr->msg, sizeof cr->msg, "%s", kn_last_error(ctx));
        kn_clear_error(ctx);
        return;
    }
    int was = kn_set_grad_enabled(ctx, 0);
    for (int j = 0; j < p->nout; j++) record(ctx, cr, out[j], "out[%d]", j);
    if (p->grad == G_INSIDE) {
        record(ctx, cr, out[p->nout], "the loss%.0d", 0);
        for (int j = 0; j < r->nleaf; j++) record(ctx, cr, out[p->nout + 1 + j], "the grad of leaf %d", j);
    }
    if (p->grad == G_OUTSIDE) {
        for (int j = 0; j < nleaf; j++) record(ctx, cr, kn_grad(ctx, leaves[j]), "the grad of leaf %d", j);
        kn_zero_grad(ctx, leaves, nleaf);
    }
    for (int k = 0; k < p->nin; k++)
        if (p->in[k].param) record(ctx, cr, r->param[k], "param in%d after the call", k);
    kn_set_grad_enabled(ctx, was);
    kn_clear_error(ctx);
}

/* The program eagerly (ci < 0) or compiled in configuration ci, every call; results in rr. */
static void run_prog(const Prog *p, int ci, RunRes *rr)
{
    memset(rr, 0, sizeof *rr);
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.seed = p->seed + (uint64_t)p->index});
    Run r;
    memset(&r, 0, sizeof r);
    if (!ctx) {
        rr->call[0].st = KN_ENOMEM;
        return;
    }
    log_to = rr;
    kn_set_eager_backend(ctx, KN_BACKEND_INTERP);
    kn_set_log(ctx, log_sink, NULL);
    kn_set_logs(ctx, getenv("KN_FUZZ_LOGS") ? getenv("KN_FUZZ_LOGS") : "recompiles");
    r.p = p, r.eager = ci < 0 && !f64_mode, r.maxred = 1;
    for (int i = 0; i < MAXOPS; i++) r.rank[i] = -1;
    for (int k = 0, nin = 0; k < p->nin; k++) {
        if (!p->in[k].param) {
            r.inpos[k] = nin++;
            continue;
        }
        kn_tensor *t = make_input(ctx, p, k, -1);
        r.param[k] = r.plist[r.nparam++] = p->in[k].reqgrad ? kn_param(ctx, t) : kn_keep(ctx, t);
        if (p->in[k].reqgrad) r.leaf[r.nleaf++] = t;
    }
    if (p->optim == 1) r.opt = kn_sgd(ctx, r.leaf, r.nleaf, &(kn_sgd_opts){.lr = 0.1, .momentum = 0.9});
    if (p->optim == 2) r.opt = kn_adam(ctx, r.leaf, r.nleaf, &(kn_adam_opts){.lr = 0.01});
    kn_clear_error(ctx);
    kn_set_grad_enabled(ctx, p->grad != G_NONE);
    kn_fn *f = NULL;
    if (ci >= 0) {
        const Config *c = &p->cfg[ci];
        kn_compile_opts o = {.backend = (kn_backend)c->backend, .mode = (kn_mode)c->mode,
                             .dynamic = (kn_dynamic)c->dynamic, .params = r.plist, .nparams = r.nparam,
                             .name = "fuzz"};
        f = kn_compile(ctx, body, &r, &o);
    }
    for (int call = 0; call < p->ncalls; call++) {
        kn_scope_begin(ctx);
        if (ci >= 0 && !f) {
            rr->call[call].st = fail_status(ctx);
            snprintf(rr->call[call].msg, sizeof rr->call[call].msg, "kn_compile: %s", kn_last_error(ctx));
        } else {
            one_call(ctx, p, &r, f, call, &rr->call[call]);
        }
        kn_scope_end(ctx);
    }
    kn_fn_info info;
    if (f && kn_fn_stats(f, &info) == KN_OK) rr->entries = info.entries, rr->eager_calls = info.eager_calls;
    rr->maxred = r.maxred, rr->zero_dim = r.zero_dim, rr->eps = r.eps;
    rr->alias_leaf = r.alias_leaf, rr->alias_step = r.alias_step;
    memcpy(rr->ref, r.ref, sizeof rr->ref);
    memcpy(rr->rank, r.rank, sizeof rr->rank);
    rr->ref_op = r.ref_op, rr->ref_i = r.ref_i, rr->ref_want = r.ref_want;
    kn_fn_free(f);
    kn_optim_free(r.opt);
    kn_ctx_free(ctx);
    log_to = NULL;
}

/* ---- comparing a compiled run with eager ---- */

enum { R_PASS, R_MISMATCH, R_ERRDIFF, R_CRASH, R_RECOMPILE, R_REF, R_UNSUPPORTED, R_SKIP, NVERDICT };
static const char *const verdict_name[NVERDICT] = {"pass", "mismatch", "error disagreement", "crash",
                                                   "recompiles", "reference", "unsupported", "skipped"};
static int is_failure(int v) { return v >= R_MISMATCH && v <= R_REF; }

#define LONG_LIMIT 40000 /* the longest reduction outside class longsum */

/* |compiled - eager| allowed for a float of dtype dt, relative to the output's largest magnitude, in
 * a program whose least precise float has tolerance unit eps: rounding in another order grows with
 * the length of the longest reduction, as log2 of it for a sum in blocks or pairs (the interpreter
 * sums in double; an f32 sum one element at a time drifts as the length itself) */
static double tolerance(int dt, double eps, int64_t maxred)
{
    double base = dtype_eps(dt) > eps ? dtype_eps(dt) : eps;
    return base * (1 + log2(1 + (double)maxred) / 4);
}

/* c against e, within tol; e64 (NULL if none) the same value of the f64 run, which says how far
 * rounding alone can move each element (an ill-conditioned program amplifies it) */
static int close_vals(const Val *c, const Val *e, const Val *e64, double tol, char *why, size_t cap)
{
    if (c->n < 0 || e->n < 0) {
        if (c->n == e->n) return 1;
        snprintf(why, cap, "%s: compiled %s, eager %s", e->what, c->n < 0 ? "has none" : "has one",
                 e->n < 0 ? "none" : "one");
        return 0;
    }
    if (c->dt != e->dt) {
        snprintf(why, cap, "%s: dtype %s, eager %s", e->what, kn_dtype_name((kn_dtype)c->dt), kn_dtype_name((kn_dtype)e->dt));
        return 0;
    }
    if (c->nd != e->nd || memcmp(c->shape, e->shape, (size_t)e->nd * sizeof *e->shape) != 0) {
        char a[96] = "", b[96] = "";
        for (int d = 0; d < c->nd; d++) snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? ", " : "", (long long)c->shape[d]);
        for (int d = 0; d < e->nd; d++) snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? ", " : "", (long long)e->shape[d]);
        snprintf(why, cap, "%s: shape (%s), eager (%s)", e->what, a, b);
        return 0;
    }
    if (e64 && (e64->n != e->n || e64->nd != e->nd)) e64 = NULL;
    double maxabs = 0, max64 = 0, noise = 0, worst = 0;
    int64_t bad = 0, first = -1;
    int fl = is_float(e->dt);
    for (int64_t i = 0; i < e->n; i++) {
        double w = e->x[i], w64 = e64 ? e64->x[i] : w;
        if (isfinite(w) && fabs(w) > maxabs) maxabs = fabs(w);
        if (isfinite(w64) && fabs(w64) > max64) max64 = fabs(w64);
        if (isfinite(w) && isfinite(w64) && fabs(w - w64) > noise) noise = fabs(w - w64);
    }
    /* eager's own rounding (against the f64 run) is more than 5% of the values: a program this
     * ill-conditioned says nothing about the compiled one */
    if (fl && noise > 0.05 * max64 && noise > tol * maxabs) return 1;
    for (int64_t i = 0; i < e->n; i++) {
        double w = e->x[i], g = c->x[i], w64 = e64 ? e64->x[i] : w, r;
        if (e64 && (isnan(w) != isnan(w64) || isinf(w) != isinf(w64) || (!fl && w != w64))) continue;
        if (e64 && fl && isinf(w) && w != w64) continue;
        if (isnan(w) || isnan(g) || isinf(w) || isinf(g)) /* where even f64 overflows, nan and inf are alike */
            r = (isnan(w) && isnan(g)) || w == g || (!isfinite(w) && !isfinite(g) && !isfinite(w64)) ? 0 : INFINITY;
        else if (!fl) r = w == g ? 0 : INFINITY;
        else r = fabs(g - w) / (tol * ((maxabs > 1e-3 ? maxabs : 1e-3) + fabs(w)) + 8 * noise + 1e-300);
        if (r > 1) bad++;
        if (r > 1 && first < 0) first = i;
        if (r > worst) worst = r;
    }
    if (!bad) return 1;
    snprintf(why, cap, "%s: element %lld of %lld is %.9g, eager %.9g (f64 eager %.9g; tolerance %.2g); %lld differ",
             e->what, (long long)first, (long long)e->n, c->x[first], e->x[first], e64 ? e64->x[first] : NAN,
             tol * ((maxabs > 1e-3 ? maxabs : 1e-3) + fabs(e->x[first])) + 8 * noise, (long long)bad);
    return 0;
}

/* live[i]: value i reaches an output (through operands or sizes read) */
static void live_values(const Prog *p, uint8_t *live)
{
    memset(live, 0, MAXOPS);
    for (int k = 0; k < p->nout; k++) live[p->out[k]] = 1;
    for (int i = p->nops - 1; i >= 0; i--) {
        if (!live[i]) continue;
        for (int j = 0; j < p->op[i].nsrc; j++)
            if (p->op[i].src[j] >= 0) live[p->op[i].src[j]] = 1;
        for (int j = 0; j < 2; j++)
            if (p->op[i].e[j].v >= 0) live[p->op[i].e[j].v] = 1;
    }
}

static int has_kind(const Prog *p, int k)
{
    for (int i = 0; i < p->nops; i++)
        if (p->op[i].k == k) return 1;
    return 0;
}

/* entries a generic-friendly program may make over its calls: auto one static and one generic, on
 * one generic; a size of 0 or 1 specialises (torch's rule); SGD's first step (no momentum buffer
 * yet) is a program of its own, as torch's guard on the optimizer state makes it */
static int max_entries(const Prog *p, int dynamic)
{
    int small = 0, big = 0;
    for (int c = 0; c < p->ncalls; c++) {
        int seen = 0;
        for (int d = 0; d < c; d++) seen |= p->s[d] == p->s[c];
        if (!seen) ++*(p->s[c] < 2 ? &small : &big);
    }
    return small + (dynamic == KN_DYNAMIC_AUTO ? (big < 2 ? big : 2) : big > 0) + (p->optim == 1 && p->ncalls > 1);
}

/* Ops whose programs stay generic in s0 (outside class dynspec, the only ones the recompile check
 * takes): those no case of which the fuzzer has seen specialise. */
static int generic_kind(int k)
{
    switch (k) {
    case K_VAR: case K_STD: case K_ARGMAX: case K_ARGMIN: case K_NARROW: case K_PAD: case K_CAT:
    case K_GATHER: case K_SCATTER_ADD: case K_EMBEDDING: case K_AVG_POOL2D: case K_CONV1D: case K_CONV2D:
    case K_CONV_T2D: case K_MAX_POOL2D: case K_ADAPTIVE_POOL2D: case K_RMS_NORM: case K_LAYER_NORM: case K_BATCH_NORM:
    case K_GROUP_NORM: case K_SDPA: case K_L1: case K_BCE: case K_BCE_LOGITS: case K_CROSS_ENTROPY: case K_NLL:
    case K_LOGSUMEXP: case K_MEAN: case K_CLAMP: case K_SLICE: case K_STACK: case K_MATMUL: case K_BMM:
    case K_ITEM_SCALE: case K_REREAD: case K_RANDLIKE:
        return 0;
    default: return 1;
    }
}

/* The recompile check applies: auto marks the dims that change (s0's); on marks the first dim >= 2
 * of the inputs as s0, which must be s0's var; and no other size equals s0's first (duck sizing
 * would make it s0 too). Outside class dynspec, only to programs of generic_kind ops with no
 * grad, no parameters and no unused input in s0 (each of which specialises in cases found). */
static int check_entries(const Prog *p, int dynamic)
{
    int first = -1;
    uint8_t live[MAXOPS];
    if (!p->generic || dynamic == KN_DYNAMIC_OFF || (!with[CL_CUMSUM] && has_kind(p, K_CUMSUM))) return 0;
    live_values(p, live);
    if (!with[CL_DYNSPEC] && p->grad != G_NONE) return 0; /* grad regions' probes differ more often */
    for (int i = 0; i < p->nops && !with[CL_DYNSPEC]; i++)
        if (!generic_kind(p->op[i].k) || (p->op[i].k == K_INPUT && p->in[p->op[i].ip[0]].param)) return 0;
    for (int i = 0; i < p->nops; i++) {
        const InSpec *s = p->op[i].k == K_INPUT ? &p->in[p->op[i].ip[0]] : NULL;
        if (!s || s->param) continue;
        for (int d = 0; d < s->nd; d++) {
            int v = s->var[d];
            if (first < 0 && size_of(p, v, 0) >= 2) first = v;
            if (v && size_of(p, v, 0) == p->s[0]) return 0;
            if (!v && !live[i] && !with[CL_DYNSPEC]) return 0; /* an unused input in s0 */
        }
    }
    return dynamic == KN_DYNAMIC_AUTO || first == 0;
}

/* The body writes state that outlives a call: it draws random numbers, trains, or updates running stats. */
static int writes_state(const Prog *p)
{
    return p->grad == G_INSIDE || has_kind(p, K_RANDLIKE) || has_kind(p, K_DROPOUT) || has_kind(p, K_BATCH_NORM);
}

static int compare(const Prog *p, int ci, const RunRes *e, const RunRes *e64, const RunRes *c, char *why, size_t cap)
{
    int all_ok = 1;
    uint8_t live[MAXOPS];
    live_values(p, live);
    for (int k = 0; k < p->ncalls; k++) {
        const CallRes *E = &e->call[k], *C = &c->call[k], *E64 = e64 ? &e64->call[k] : NULL;
        char at[48] = "";
        if (p->dyn) snprintf(at, sizeof at, " (s0 = %lld)", (long long)p->s[k]);
        all_ok &= !E->st;
        /* both failed: a compiled call does not stop at the failing op as eager does, so what the body
         * writes (the generator, parameters, running stats) may differ from then on (kiln.h, kn_call) */
        if (E->st && C->st && writes_state(p)) break;
        if (E->st && C->st) continue;
        if (!E->st && C->st == KN_EUNSUPPORTED) {
            snprintf(why, cap, "%s", C->msg);
            return R_UNSUPPORTED;
        }
        /* an index out of range in a value nothing uses: eager meets it, a compiled graph drops the op
         * (and runs the rest, an optimizer step too: later calls start from other parameters) */
        if (E->st == KN_EINDEX && !C->st && E->fail_op >= 0 && !live[E->fail_op]) break;
        /* kn_view that eager refuses (a non-contiguous view) and compiled does not: class viewnc's */
        if (E->st && !C->st && E->fail_op >= 0 && p->op[E->fail_op].k == K_VIEW && !with[CL_VIEWNC]) break;
        if (E->st || C->st) {
            snprintf(why, cap, "call %d%s: eager %s%s%s, compiled %s%s%s", k, at, E->st ? "fails: " : "succeeds",
                     E->st ? E->msg : "", "", C->st ? "fails: " : "succeeds", C->st ? C->msg : "", "");
            return R_ERRDIFF;
        }
        if (E->nv != C->nv) {
            snprintf(why, cap, "call %d%s: %d values, eager %d", k, at, C->nv, E->nv);
            return R_MISMATCH;
        }
        for (int j = 0; j < E->nv; j++) {
            char w[MSG];
            const Val *v64 = E64 && !E64->st && E64->nv == E->nv ? &E64->v[j] : NULL;
            if (!close_vals(&C->v[j], &E->v[j], v64, tolerance(E->v[j].dt, e->eps, e->maxred), w, sizeof w)) {
                snprintf(why, cap, "call %d%s: %.400s", k, at, w);
                return R_MISMATCH;
            }
        }
    }
    int dynamic = p->cfg[ci].dynamic;
    /* a probe at s0 = 2 that traces or schedules otherwise (a size that is special for the
     * program) is class dynspec's, as is any op outside generic_kind (cumsum's own is cumsum's) */
    int probe2 = strstr(c->log, "at size 2 has other") != NULL && !(with[CL_CUMSUM] && has_kind(p, K_CUMSUM));
    /* an output that is a view of a non-contiguous input has strides no generic program describes: it
     * specialises, says so in the log, and is class dynspec's too */
    probe2 |= strstr(c->log, "strides change with the dynamic size") != NULL;
    if (all_ok && check_entries(p, dynamic) && c->eager_calls == 0 && c->entries > max_entries(p, dynamic) &&
        (!probe2 || with[CL_DYNSPEC])) {
        snprintf(why, cap, "%d entries for %d calls, at most %d expected (dynamic %s); log: %.400s", c->entries,
                 p->ncalls, max_entries(p, dynamic), dynamic_name[dynamic], c->log);
        return R_RECOMPILE;
    }
    return R_PASS;
}

/* ---- each program in a child process: a crash is a verdict ---- */

typedef struct {
    int eager;               /* R_PASS, R_REF, R_SKIP or R_CRASH: what the eager runs said */
    int eager_ok;            /* calls that succeeded eagerly */
    int ref_op;              /* R_REF: the op whose reference check failed */
    char eager_why[MSG];     /* R_PASS: eager's first error, if any */
    int v[MAXCFG];           /* each configuration's verdict (-1: not run) */
    char why[MAXCFG][MSG];
} Outcome;

static int hang_guard;  /* CPU seconds a child may take (0: no limit) */
static char *membuf;    /* without fork: the lines, in memory */
static size_t memlen;

static void put_line(int fd, char tag, int ci, int v, const char *msg)
{
    char line[MSG + 64];
    int n = snprintf(line, sizeof line - 1, "%c %d %d %s", tag, ci, v, msg);
    if (n < 0) return;
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    for (int i = 0; i < n; i++)
        if (line[i] == '\n') line[i] = '|';
    line[n++] = '\n';
#if HAVE_POSIX
    if (fd >= 0) {
        for (int off = 0; off < n;) {
            ssize_t w = write(fd, line + off, (size_t)(n - off));
            if (w <= 0) break;
            off += (int)w;
        }
        return;
    }
#endif
    (void)fd;
    char *m = realloc(membuf, memlen + (size_t)n + 1);
    if (!m) return;
    membuf = m;
    memcpy(membuf + memlen, line, (size_t)n);
    memlen += (size_t)n;
    membuf[memlen] = 0;
}

/* Some output is made from a parameter by view ops alone (a copy such as kn_contiguous's among
 * them): compiled on backend interp it can be a view of the parameter's storage, which the step's
 * write then changes (eager's copy keeps the old values). */
static int views_param(const Prog *p)
{
    for (int k = 0; k < p->nout; k++)
        for (int v = p->out[k];;) {
            const Op *o = &p->op[v];
            if (o->k == K_INPUT) {
                if (p->in[o->ip[0]].param) return 1;
                break;
            }
            if (!((o->k >= K_RESHAPE && o->k <= K_CHUNK && o->k != K_PAD && o->k != K_CAT && o->k != K_STACK) ||
                  o->k == K_CONTIGUOUS || o->k == K_DETACH || o->k == K_TO || o->k == K_DROPOUT))
                break;
            v = o->src[0];
        }
    return 0;
}

/* eager, the f64 eager run, then the configurations in mask, each line written to fd */
static void child_run(const Prog *p, int mask, int fd)
{
    RunRes *e = calloc(1, sizeof *e), *e64 = calloc(1, sizeof *e64), *c = calloc(1, sizeof *c);
    char why[MSG], skip[MSG] = "";
    if (!e || !e64 || !c) {
        put_line(fd, 'E', -1, R_SKIP, "out of memory");
        free(e), free(e64), free(c);
        return;
    }
    run_prog(p, -1, e);
    if (!with[CL_EMPTY] && e->zero_dim) snprintf(skip, sizeof skip, "a size-0 dim (class empty)");
    if (!with[CL_LONGSUM] && e->maxred > LONG_LIMIT)
        snprintf(skip, sizeof skip, "a reduction of %lld elements (class longsum)", (long long)e->maxred);
    else if (e->maxred > long_max)
        snprintf(skip, sizeof skip, "a reduction of %lld elements (the CI set's are at most %lld: make fuzz runs them)",
                 (long long)e->maxred, (long long)long_max);
    if (!with[CL_VIEWWRITE] && (e->alias_step || (p->optim && views_param(p))))
        snprintf(skip, sizeof skip, "an output is a view of a parameter the body's optimizer step writes (class viewwrite)");
    if (!with[CL_PASSGRAD] && e->alias_leaf && p->grad == G_OUTSIDE)
        snprintf(skip, sizeof skip, "an output is a leaf that requires grad itself (class passgrad)");
    int ok = 0;
    const char *err = "";
    for (int k = 0; k < p->ncalls; k++) {
        ok += !e->call[k].st;
        if (e->call[k].st && !err[0]) err = e->call[k].msg;
    }
    if (skip[0]) {
        put_line(fd, 'E', ok, R_SKIP, skip);
    } else {
        f64_mode = 1;
        run_prog(p, -1, e64);
        f64_mode = 0;
        if (e->ref[0]) put_line(fd, 'R', e->ref_op, 0, "");
        put_line(fd, 'E', ok, e->ref[0] ? R_REF : R_PASS, e->ref[0] ? e->ref : err);
        for (int ci = 0; ci < p->ncfg; ci++) {
            if (!(mask >> ci & 1)) continue;
            put_line(fd, 'S', ci, 0, "");
            run_prog(p, ci, c);
            why[0] = 0;
            int v = compare(p, ci, e, e64, c, why, sizeof why);
            put_line(fd, 'V', ci, v, why);
            free_run(c);
        }
    }
    free_run(e), free_run(e64);
    free(e), free(e64), free(c);
}

static void parse_lines(const char *buf, Outcome *o, int *started)
{
    *started = -2;
    for (const char *s = buf; s && *s;) {
        const char *nl = strchr(s, '\n');
        char tag;
        int ci, v, at = 0;
        if (sscanf(s, "%c %d %d%n", &tag, &ci, &v, &at) >= 3) {
            at += s[at] == ' ';
            size_t n = (size_t)((nl ? nl : s + strlen(s)) - (s + at));
            char *dst = tag == 'E' ? o->eager_why : tag == 'V' && ci >= 0 && ci < MAXCFG ? o->why[ci] : NULL;
            if (n >= MSG) n = MSG - 1;
            if (tag == 'E') o->eager = v, o->eager_ok = ci, *started = -1;
            if (tag == 'S') *started = ci;
            if (tag == 'R') o->ref_op = ci;
            if (tag == 'V' && ci >= 0 && ci < MAXCFG) o->v[ci] = v, *started = -1;
            if (dst && tag != 'S') memcpy(dst, s + at, n), dst[n] = 0;
        }
        s = nl ? nl + 1 : NULL;
    }
}

/* p's eager runs and configurations in mask, in a child process where there is fork */
static void run_child(const Prog *p, int mask, Outcome *o)
{
    int started;
    memset(o, 0, sizeof *o);
    o->eager = R_CRASH;
    for (int ci = 0; ci < MAXCFG; ci++) o->v[ci] = -1;
#if HAVE_POSIX
    int fds[2];
    fflush(stdout);
    if (pipe(fds) == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            if (hang_guard) { /* CPU seconds (a loaded machine is no hang), and a wall clock for a wait */
                struct rlimit rl = {(rlim_t)hang_guard, (rlim_t)hang_guard + 10};
                setrlimit(RLIMIT_CPU, &rl);
                alarm((unsigned)hang_guard * 8);
            }
            child_run(p, mask, fds[1]);
            _exit(0);
        }
        close(fds[1]);
        size_t len = 0, cap = 4096;
        char *buf = malloc(cap);
        ssize_t r;
        while (buf && (r = read(fds[0], buf + len, cap - len - 1)) > 0) {
            len += (size_t)r;
            if (cap - len < 1024) {
                char *nb = realloc(buf, cap *= 2);
                if (!nb) break;
                buf = nb;
            }
        }
        close(fds[0]);
        if (buf) buf[len] = 0;
        int status = 0;
        if (pid > 0) waitpid(pid, &status, 0);
        parse_lines(buf, o, &started);
        free(buf);
        if (pid > 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
            char why[MSG];
            if (WIFSIGNALED(status))
                snprintf(why, sizeof why, "killed by signal %d%s", WTERMSIG(status),
                         WTERMSIG(status) == SIGXCPU ? " (a hang: more than the hang guard's CPU seconds)"
                         : WTERMSIG(status) == SIGALRM ? " (a hang: more than 8 times the hang guard's seconds)" : "");
            else
                snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(status));
            if (started >= 0) o->v[started] = R_CRASH, snprintf(o->why[started], MSG, "%s", why);
            else if (started == -2) o->eager = R_CRASH, snprintf(o->eager_why, MSG, "eager: %.400s", why);
        }
        return;
    }
#endif
    memlen = 0;
    child_run(p, mask, -1);
    parse_lines(membuf, o, &started);
}

/* ---- the driver ---- */

typedef struct {
    char what[160]; /* a message (its start) */
    int n;
} Note;

typedef struct {
    int programs, checks, pass, fail, skipped, unsupported;
    int eager_calls, eager_ok; /* calls of the programs run, those that succeeded eagerly */
    int by[NVERDICT];
    Note unsup[8], skip[8];    /* distinct KN_EUNSUPPORTED messages, reasons to skip a program */
} Tally;

static Tally tally;
static int do_shrink = 1;

static void note(Note *notes, const char *why)
{
    char head[160];
    snprintf(head, sizeof head, "%s", why);
    for (int i = 0; i < 8; i++) {
        if (!notes[i].what[0]) snprintf(notes[i].what, sizeof notes[i].what, "%s", head);
        if (strcmp(notes[i].what, head) == 0) {
            notes[i].n++;
            return;
        }
    }
}

static void print_config(FILE *f, const Config *c)
{
    fprintf(f, "backend %s, mode %s, dynamic %s", backend_name[c->backend], mode_name[c->mode], dynamic_name[c->dynamic]);
}

static void shrink_and_print(const Prog *p, int ci, int verdict, const char *why);
static void print_c(FILE *f, const Prog *p, int verdict, const char *why, int from_ops);

/* Program (seed, index): run, tallied; a failure is shrunk and printed. Returns the failures. */
static int fuzz_one(uint64_t seed, int index)
{
    Prog *p = malloc(sizeof *p);
    Outcome o;
    int failures = 0;
    if (!p) return 0;
    gen(p, seed, index);
    run_child(p, (1 << p->ncfg) - 1, &o);
    if (verbose)
        printf("program %#llx/%d: %d ops, %d inputs, grad %s, %d calls, %d ok eagerly%s%s\n", (unsigned long long)seed,
               index, p->nops, p->nin, grad_name[p->grad], p->ncalls, o.eager_ok, o.eager_why[0] ? ": " : "",
               o.eager_why);
    tally.programs++;
    tally.eager_calls += p->ncalls, tally.eager_ok += o.eager_ok;
    if (o.eager == R_SKIP) {
        tally.skipped++;
        note(tally.skip, o.eager_why);
        if (verbose) printf("  skipped: %s\n", o.eager_why);
        free(p);
        return 0;
    }
    if (is_failure(o.eager)) {
        tally.checks++, tally.fail++, tally.by[o.eager]++, failures++;
        printf("FAIL program --seed %#llx --index %d: %s: %s\n", (unsigned long long)seed, index,
               verdict_name[o.eager], o.eager_why);
        if (do_shrink && o.eager == R_REF) { /* the op checked becomes the output */
            Prog *q = malloc(sizeof *q);
            if (q) {
                *q = *p;
                q->out[0] = (int16_t)o.ref_op, q->nout = 1, q->grad = G_NONE, q->dout = -1, q->optim = 0;
                for (int m = 0; m < q->nin; m++) q->in[m].reqgrad = 0;
                shrink_and_print(q, -1, o.eager, o.eager_why);
                free(q);
            }
        } else if (do_shrink) {
            shrink_and_print(p, -1, o.eager, o.eager_why);
        }
    }
    for (int ci = 0; ci < p->ncfg; ci++) {
        int v = o.v[ci];
        if (v < 0) continue;
        tally.checks++;
        tally.by[v]++;
        if (v == R_PASS) tally.pass++;
        if (v == R_UNSUPPORTED) tally.unsupported++, note(tally.unsup, o.why[ci]);
        if (verbose || is_failure(v)) {
            printf("%s program --seed %#llx --index %d, ", is_failure(v) ? "FAIL" : " ", (unsigned long long)seed, index);
            print_config(stdout, &p->cfg[ci]);
            printf(": %s%s%s\n", verdict_name[v], o.why[ci][0] ? ": " : "", o.why[ci]);
        }
        if (!is_failure(v)) continue;
        tally.fail++, failures++;
        if (do_shrink && failures == 1 + is_failure(o.eager)) shrink_and_print(p, ci, v, o.why[ci]);
    }
    free(p);
    return failures;
}

static int parse_classes(const char *s, int on)
{
    while (s && *s) {
        size_t n = strcspn(s, ",");
        int found = 0;
        for (int c = 0; c < NCLASS; c++)
            if ((n == 3 && strncmp(s, "all", 3) == 0) || (strlen(class_name[c]) == n && strncmp(s, class_name[c], n) == 0))
                with[c] = on, found = 1;
        if (!found) {
            fprintf(stderr, "fuzz_compiled: unknown class '%.*s' (all or one of:", (int)n, s);
            for (int c = 0; c < NCLASS; c++) fprintf(stderr, " %s", class_name[c]);
            fprintf(stderr, ")\n");
            return 0;
        }
        s += n + (s[n] == ',');
    }
    return 1;
}

static int parse_backends(const char *s)
{
    backend_mask = 0;
    if (strstr(s, "c,") == s || strcmp(s, "c") == 0 || strstr(s, ",c,") || (strlen(s) > 1 && strcmp(s + strlen(s) - 2, ",c") == 0))
        backend_mask |= 1;
    if (strstr(s, "tcc")) backend_mask |= 2;
    if (strstr(s, "interp")) backend_mask |= 4;
    return backend_mask != 0;
}

static double now_s(void)
{
    return (double)port_now_ns() / 1e9;
}

static void summary(double t0)
{
    printf("fuzz summary: %d programs, %d checks in %.0f s: %d passed, %d failed", tally.programs, tally.checks,
           now_s() - t0, tally.pass, tally.fail);
    for (int v = R_MISMATCH; v <= R_REF; v++)
        if (tally.by[v]) printf(", %d %s", tally.by[v], verdict_name[v]);
    printf("; %d unsupported, %d programs skipped; %d of %d calls succeed eagerly\n", tally.unsupported,
           tally.skipped, tally.eager_ok, tally.eager_calls);
    for (int i = 0; i < 8 && tally.unsup[i].what[0]; i++) printf("  unsupported x%d: %s\n", tally.unsup[i].n, tally.unsup[i].what);
    for (int i = 0; i < 8 && tally.skip[i].what[0]; i++) printf("  skipped x%d: %s\n", tally.skip[i].n, tally.skip[i].what);
}

int main(int argc, char **argv)
{
    double seconds = 0;
    uint64_t seed = 0;
    int index = -1, count = 0, have_seed = 0;
    for (int c = 0; c < NCLASS; c++) with[c] = class_default[c];
    parse_classes(getenv("KN_FUZZ_WITH"), 1);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-v") == 0) verbose = 1;
        else if (strcmp(a, "--no-shrink") == 0) do_shrink = 0;
        else if (strcmp(a, "--seconds") == 0 && v) seconds = atof(v), i++;
        else if (strcmp(a, "--seed") == 0 && v) seed = strtoull(v, NULL, 0), have_seed = 1, i++;
        else if (strcmp(a, "--index") == 0 && v) index = atoi(v), i++;
        else if (strcmp(a, "--count") == 0 && v) count = atoi(v), i++;
        else if (strcmp(a, "--with") == 0 && v && parse_classes(v, 1)) i++;
        else if (strcmp(a, "--without") == 0 && v && parse_classes(v, 0)) i++;
        else if (strcmp(a, "--backends") == 0 && v && parse_backends(v)) i++;
        else if (strcmp(a, "--ops") == 0 && v && parse_ops(v)) i++;
        else {
            fprintf(stderr, "usage: %s [--seconds N | --seed S [--index I]] [--count N] [--with CLASSES] "
                            "[--without CLASSES] [--backends interp,tcc,c] [--ops sum,cumsum,...] [--no-shrink] [-v]\n", argv[0]);
            return 2;
        }
    }
    double t0 = now_s();
    if (have_seed && index >= 0) {
        if (verbose) { /* the program as generated */
            Prog *p = malloc(sizeof *p);
            if (p) gen(p, seed, index), print_c(stdout, p, R_PASS, "as generated", p->nops);
            free(p);
        }
        fuzz_one(seed, index);
    } else if (have_seed) {
        for (int i = 0; i < (count ? count : 100); i++) fuzz_one(seed, i);
    } else if (seconds > 0) {
        hang_guard = 300;
        while (now_s() - t0 < seconds) {
            seed = (port_now_ns() * 0x9e3779b97f4a7c15ull) ^ (uint64_t)tally.programs;
            for (int i = 0; i < (count ? count : 20) && now_s() - t0 < seconds; i++) fuzz_one(seed, i);
        }
    } else { /* the CI set: fixed seeds; backend c (a run of the system compiler per program, cached
              * on disk) for the first CI_C programs of each only */
        int mask = backend_mask;
        long_max = 1000000;
        for (uint64_t s = 1; s <= CI_SEEDS; s++)
            for (int i = 0; i < (count ? count : CI_PROGRAMS); i++) {
                backend_mask = i < CI_C ? mask : mask & ~1;
                fuzz_one(s, i);
            }
    }
    summary(t0);
    printf("fuzz_compiled: %d passed, %d failed\n", tally.pass, tally.fail);
    return tally.fail != 0;
}

/* ---- shrinking ---- */

/* Keeps the values live[] marks (and the inputs of those), renumbered. */
static void compact(Prog *p, const uint8_t *live)
{
    int map[MAXOPS], n = 0, nin = 0;
    InSpec in[MAXIN];
    memset(in, 0, sizeof in);
    for (int i = 0; i < p->nops; i++) {
        map[i] = -1;
        if (!live[i]) continue;
        Op o = p->op[i];
        for (int j = 0; j < o.nsrc; j++)
            if (o.src[j] >= 0) o.src[j] = (int16_t)map[o.src[j]];
        for (int j = 0; j < 2; j++)
            if (o.e[j].v >= 0) o.e[j].v = (int16_t)map[o.e[j].v];
        if (o.k == K_INPUT) {
            in[nin] = p->in[o.ip[0]];
            o.ip[0] = nin++;
        }
        map[i] = n;
        p->op[n++] = o;
    }
    p->nops = n;
    memcpy(p->in, in, sizeof in);
    p->nin = nin;
    for (int k = 0; k < p->nout; k++) p->out[k] = (int16_t)map[p->out[k]];
}

/* Drops the ops no output needs and (unless keep_inputs) the inputs no op reads. */
static void dce(Prog *p, int keep_inputs)
{
    uint8_t live[MAXOPS];
    live_values(p, live);
    for (int i = 0; i < p->nops && keep_inputs; i++) live[i] |= p->op[i].k == K_INPUT;
    compact(p, live);
}

/* Uses of value i (operands, sizes read, outputs) turned into uses of value j. */
static void replace_uses(Prog *p, int i, int j)
{
    for (int m = i + 1; m < p->nops; m++) {
        for (int s = 0; s < p->op[m].nsrc; s++)
            if (p->op[m].src[s] == i) p->op[m].src[s] = (int16_t)j;
        for (int s = 0; s < 2; s++)
            if (p->op[m].e[s].v == i) p->op[m].e[s].v = (int16_t)j;
    }
    for (int k = 0; k < p->nout; k++)
        if (p->out[k] == i) p->out[k] = (int16_t)j;
}

static int shrink_tries, shrink_budget;
static char shrunk_why[MSG]; /* what the last failing candidate said */
static double shrink_until;

/* q still fails as verdict says (configuration 0, or eager where verdict is R_REF)? */
static int still_fails(const Prog *q, int verdict)
{
    Outcome o;
    if (shrink_tries >= shrink_budget || now_s() > shrink_until) return 0;
    shrink_tries++;
    run_child(q, verdict == R_REF ? 0 : 1, &o);
    int same = verdict == R_REF || o.eager == R_CRASH ? o.eager == verdict : o.eager != R_SKIP && o.v[0] == verdict;
    if (same) snprintf(shrunk_why, sizeof shrunk_why, "%s", verdict == R_REF || o.eager == R_CRASH ? o.eager_why : o.why[0]);
    return same;
}

/* The candidates, one by one (k-th of this round): 1 with q set to it, 0 if the k-th changes
 * nothing, -1 past the last. */
static int candidate(const Prog *p, int k, Prog *q)
{
    *q = *p;
    for (int keep = 0; keep < 2; keep++)
        if (k-- == 0) { /* without dead values (inputs too: unused ones still pass through kn_call) */
            dce(q, keep);
            return q->nops < p->nops || q->nin < p->nin;
        }
    uint8_t live[MAXOPS];
    live_values(p, live);
    for (int i = p->nops - 1; i >= 0; i--) /* without one dead op or input (a read inside one may matter) */
        if (!live[i] && k-- == 0) {
            memset(live, 1, sizeof live);
            live[i] = 0;
            compact(q, live);
            return 1;
        }
    /* fewer outputs, calls, configuration simpler */
    for (int m = 0; m < p->nout; m++)
        if (p->nout > 1 && m != p->dout && k-- == 0) {
            memmove(q->out + m, q->out + m + 1, (size_t)(q->nout - m - 1) * sizeof *q->out);
            q->nout--;
            q->dout -= m < q->dout;
            return 1;
        }
    if (p->grad != G_NONE && k-- == 0) {
        q->grad = G_NONE, q->optim = 0, q->dout = -1;
        for (int m = 0; m < q->nin; m++) q->in[m].reqgrad = 0;
        return 1;
    }
    if (p->optim && k-- == 0) return q->optim = 0, 1;
    for (int c = 0; c < p->ncalls; c++)
        if (p->ncalls > 1 && k-- == 0) {
            memmove(q->s + c, q->s + c + 1, (size_t)(q->ncalls - c - 1) * sizeof *q->s);
            q->ncalls--;
            if (c == 0 && q->dyn) q->var[0] = q->s[0];
            return 1;
        }
    if (p->cfg[0].mode && k-- == 0) return q->cfg[0].mode = 0, 1;
    if (p->cfg[0].dynamic != KN_DYNAMIC_OFF && k-- == 0) return q->cfg[0].dynamic = KN_DYNAMIC_OFF, 1;
    if (p->cfg[0].backend == KN_BACKEND_C && k-- == 0) return q->cfg[0].backend = KN_BACKEND_TCC, 1;
    if (p->dyn && k-- == 0) return q->dyn = 0, q->var[0] = q->s[0], 1;
    /* fewer ops: an op's value replaced by one of its operands */
    for (int i = p->nops - 1; i >= 0; i--)
        for (int j = 0; j < p->op[i].nsrc; j++)
            if (p->op[i].src[j] >= 0 && k-- == 0) {
                replace_uses(q, i, p->op[i].src[j]);
                dce(q, 0);
                return 1;
            }
    /* simpler inputs */
    for (int m = 0; m < p->nin; m++) {
        const InSpec *s = &p->in[m];
        if (s->view != V_PLAIN && k-- == 0) return q->in[m].view = V_PLAIN, 1;
        if (is_float(s->dt) && s->dt != KN_F32 && k-- == 0) return q->in[m].dt = KN_F32, 1;
        if (s->data != D_GRID && s->data != D_INT && s->data != D_UNIT && k-- == 0) return q->in[m].data = D_GRID, 1;
        if (s->reqgrad && k-- == 0) return q->in[m].reqgrad = 0, 1;
        if (s->param && !s->reqgrad && k-- == 0) return q->in[m].param = 0, 1;
    }
    /* smaller sizes */
    for (int v = 0; v < p->nvars; v++) {
        int64_t n = p->var[v], t[4] = {1, 2, n / 2, n - 1};
        for (int j = 0; j < 4; j++)
            if (t[j] < n && t[j] >= 1 && (j == 0 || t[j] != t[j - 1]) && k-- == 0) {
                if (p->dyn && v == 0) q->s[0] = t[j];
                return q->var[v] = t[j], 1;
            }
    }
    for (int c = 1; c < p->ncalls && p->dyn; c++) {
        int64_t n = p->s[c], t[3] = {2, n / 2, n - 1};
        for (int j = 0; j < 3; j++)
            if (t[j] < n && t[j] >= 1 && k-- == 0) return q->s[c] = t[j], 1;
    }
    return -1;
}

static void print_c(FILE *f, const Prog *p, int verdict, const char *why, int from_ops);

static void shrink_and_print(const Prog *p, int ci, int verdict, const char *why)
{
    Prog *cur = malloc(sizeof *cur), *q = malloc(sizeof *q);
    if (!cur || !q) {
        free(cur), free(q);
        return;
    }
    *cur = *p;
    if (ci >= 0) cur->cfg[0] = p->cfg[ci];
    cur->ncfg = ci >= 0;
    shrink_tries = 0;
    shrink_budget = 400;
    snprintf(shrunk_why, sizeof shrunk_why, "%s", why);
    shrink_until = now_s() + 180;
    for (int progress = 1; progress;) {
        progress = 0;
        for (int k = 0, c; (c = candidate(cur, k, q)) >= 0; k++)
            if (c && still_fails(q, verdict)) {
                if (verbose)
                    printf("  shrink: candidate %d: %d ops, %d inputs, %d calls, grad %s: %.160s\n", k, q->nops, q->nin,
                           q->ncalls, grad_name[q->grad], shrunk_why);
                *cur = *q;
                progress = 1;
                break;
            }
    }
    shrink_budget = shrink_tries + 1, shrink_until = now_s() + 600;
    if (!still_fails(cur, verdict)) snprintf(shrunk_why, sizeof shrunk_why, "(no longer fails when run again: flaky)");
    printf("---- shrunk in %d tries: %d ops (from %d); paste as tests/NAME.c ----\n", shrink_tries, cur->nops, p->nops);
    print_c(stdout, cur, verdict, shrunk_why, p->nops);
    printf("---- end ----\n");
    free(cur), free(q);
}

/* ---- printing a program as a C test ---- */

static FILE *pf; /* where print_* write */

static void P(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(pf, fmt, ap);
    va_end(ap);
}

static void pnum(double x)
{
    if (isnan(x)) P("NAN");
    else if (isinf(x)) P(x > 0 ? "INFINITY" : "-INFINITY");
    else if (x == 0 && signbit(x)) P("-0.0");
    else if (x == floor(x) && fabs(x) < 1e15) P("%.1f", x);
    else P("%.17g", x);
}

static void pszexpr(SzE e)
{
    if (e.v < 0) {
        P("%lld", (long long)e.b);
        return;
    }
    if (e.a != 1) P("%d * ", (int)e.a);
    P("kn_shape(v%d)[%d]", e.v, e.d);
    if (e.b) P(" %c %lld", e.b < 0 ? '-' : '+', (long long)(e.b < 0 ? -e.b : e.b));
}

static void pdims(const int64_t *d, int n)
{
    if (!n) {
        P("NULL, 0");
        return;
    }
    P("(const int[]){");
    for (int i = 0; i < n; i++) P("%s%lld", i ? ", " : "", (long long)d[i]);
    P("}, %d", n);
}

static void pdim(int64_t d)
{
    if (d == KN_NODIM) P("KN_NODIM");
    else P("%lld", (long long)d);
}

static const char *const red_c[3] = {"KN_REDUCE_MEAN", "KN_REDUCE_SUM", "KN_REDUCE_NONE"};

/* "vN" or NULL for an optional operand */
static const char *vname(const Op *o, int j)
{
    static char buf[5][12];
    if (j >= o->nsrc || o->src[j] < 0) return "NULL";
    snprintf(buf[j], sizeof buf[j], "v%d", o->src[j]);
    return buf[j];
}

/* the shape of RESHAPE/VIEW's target, as reshape_target builds it, for an operand of rank r */
static void ptarget(const Op *o, const char *a, int r)
{
    int d = (int)o->ip[1], n = 0;
    P("(const int64_t[]){");
    if (o->ip[0] == 0) P("-1"), n = 1;
    if (o->ip[0] == 3) P("1"), n = 1;
    for (int i = 0; i < r && o->ip[0] != 0; i++) {
        P("%s", n ? ", " : "");
        if (o->ip[0] == 1 && i == d && i + 1 < r) P("kn_shape(%s)[%d] * kn_shape(%s)[%d]", a, i, a, i + 1), i++;
        else if (o->ip[0] == 2 && i == d) P("%lld, -1", (long long)o->ip[2]), n++;
        else P("kn_shape(%s)[%d]", a, i);
        n++;
    }
    P("}, %d", n);
}

static void print_op(const Prog *p, int i, const int *rank, const int *pos)
{
    const Op *o = &p->op[i];
    const int64_t *ip = o->ip;
    const char *a = vname(o, 0), *b = vname(o, 1), *c = vname(o, 2);
    int r = o->nsrc && o->src[0] >= 0 ? rank[o->src[0]] : 0, k = o->k;
    if (k == K_SPLIT || k == K_CHUNK) {
        P("    kn_tensor *p%d[64];\n    int n%d = kn_%s(ctx, %s, %lld, %lld, p%d, 64);\n", i, i, op_name(k), a,
          (long long)ip[0], (long long)ip[1], i);
        P("    kn_tensor *v%d = n%d > 0 ? p%d[%lld < n%d ? %lld : n%d - 1] : NULL;\n", i, i, i, (long long)ip[2], i,
          (long long)ip[2], i);
        return;
    }
    P("    kn_tensor *v%d = ", i);
    if (unary_fn(k) || k == K_DETACH) P("kn_%s(ctx, %s)", op_name(k), a);
    else if (binary_fn(k)) P("kn_%s(ctx, %s, %s)", op_name(k), a, b);
    else switch (k) {
    case K_INPUT: P(p->in[ip[0]].param ? "u->param[%d]" : "in[%d]", pos[ip[0]]); break;
    case K_SCALAR:
        if (ip[0]) P("kn_scalar_int(ctx, %lld)", (long long)ip[1]);
        else P("kn_scalar(ctx, "), pnum(o->f[0]), P(")");
        break;
    case K_GELU: P("kn_gelu(ctx, %s, %d)", a, (int)ip[0]); break;
    case K_SOFTPLUS: P("kn_softplus(ctx, %s, ", a), pnum(o->f[0]), P(", "), pnum(o->f[1]), P(")"); break;
    case K_ELU:
    case K_LEAKY_RELU: P("kn_%s(ctx, %s, ", op_name(k), a), pnum(o->f[0]), P(")"); break;
    case K_CLAMP: P("kn_clamp(ctx, %s, ", a), pnum(o->f[0]), P(", "), pnum(o->f[1]), P(")"); break;
    case K_TO: P("kn_to(ctx, %s, %s)", a, dtype_c[ip[0]]); break;
    case K_WHERE: P("kn_where(ctx, %s, %s, %s)", a, b, c); break;
    case K_MASKED_FILL: P("kn_masked_fill(ctx, %s, %s, ", a, b), pnum(o->f[0]), P(")"); break;
    case K_SUM:
    case K_MEAN:
    case K_AMAX:
    case K_AMIN:
    case K_LOGSUMEXP:
        P("kn_%s(ctx, %s, ", op_name(k), a), pdims(ip, (int)ip[6]), P(", %d)", (int)ip[7]);
        break;
    case K_VAR:
    case K_STD: P("kn_%s(ctx, %s, ", op_name(k), a), pdims(ip, (int)ip[6]), P(", %d, %d)", (int)o->f[0], (int)ip[7]); break;
    case K_PROD:
    case K_ARGMAX:
    case K_ARGMIN: P("kn_%s(ctx, %s, ", op_name(k), a), pdim(ip[0]), P(", %d)", (int)ip[1]); break;
    case K_CUMSUM:
    case K_SOFTMAX:
    case K_LOG_SOFTMAX: P("kn_%s(ctx, %s, %d)", op_name(k), a, (int)ip[0]); break;
    case K_RESHAPE:
    case K_VIEW: P("kn_%s(ctx, %s, ", op_name(k), a), ptarget(o, a, r), P(")"); break;
    case K_FLATTEN: P("kn_flatten(ctx, %s, %d, %d)", a, (int)ip[0], (int)ip[1]); break;
    case K_SQUEEZE:
    case K_UNSQUEEZE: P("kn_%s(ctx, %s, ", op_name(k), a), pdim(ip[0]), P(")"); break;
    case K_TRANSPOSE: P("kn_transpose(ctx, %s, %d, %d)", a, (int)ip[0], (int)ip[1]); break;
    case K_PERMUTE:
        P("kn_permute(ctx, %s, (const int[]){", a);
        for (int j = 0; j < r; j++) P("%s%d", j ? ", " : "", (int)ip[j]);
        P("})");
        break;
    case K_EXPAND:
        P("kn_expand(ctx, %s, %d, (const int64_t[]){", a, (int)ip[0] + r);
        for (int j = 0; j < ip[0]; j++) P("%s%lld", j ? ", " : "", (long long)ip[1 + j]);
        for (int j = 0; j < r; j++) P("%s%lld", j + ip[0] ? ", " : "", (long long)(j == ip[3] ? ip[4] : -1));
        P("})");
        break;
    case K_SLICE:
        P("kn_slice(ctx, %s, %d, %lld, %lld, %lld)", a, (int)ip[0], (long long)ip[1], (long long)ip[2], (long long)ip[3]);
        break;
    case K_NARROW: P("kn_narrow(ctx, %s, %d, ", a, (int)ip[0]), pszexpr(o->e[0]), P(", "), pszexpr(o->e[1]), P(")"); break;
    case K_PAD:
        P("kn_pad(ctx, %s, %d, (const int64_t[]){", a, (int)ip[6]);
        for (int j = 0; j < ip[6]; j++) P("%s%lld", j ? ", " : "", (long long)ip[j]);
        P("}, "), pnum(o->f[0]), P(")");
        break;
    case K_CAT:
    case K_STACK: P("kn_%s(ctx, (kn_tensor *const[]){%s, %s}, 2, %d)", op_name(k), a, b, (int)ip[0]); break;
    case K_TRIU:
    case K_TRIL: P("kn_%s(ctx, %s, %lld)", op_name(k), a, (long long)ip[0]); break;
    case K_INDEX_SELECT:
    case K_GATHER: P("kn_%s(ctx, %s, %d, %s)", op_name(k), a, (int)ip[0], b); break;
    case K_SCATTER_ADD: P("kn_scatter_add(ctx, %s, %d, %s, %s)", a, (int)ip[0], b, c); break;
    case K_EMBEDDING: P("kn_embedding(ctx, %s, %s)", a, b); break;
    case K_ONE_HOT: P("kn_one_hot(ctx, %s, %lld)", a, (long long)ip[0]); break;
    case K_MATMUL:
    case K_BMM: P("kn_%s(ctx, %s, %s)", op_name(k), a, b); break;
    case K_LINEAR: P("kn_linear(ctx, %s, %s, %s)", a, b, c); break;
    case K_CONV1D:
    case K_CONV2D:
    case K_CONV_T2D:
        P("kn_%s(ctx, %s, %s, %s, &(kn_conv_opts){{%d, %d}, {%d, %d}, {%d, %d}, {%d, %d}, %d})",
          k == K_CONV_T2D ? "conv_transpose2d" : op_name(k), a, b, c, (int)ip[0], (int)ip[1], (int)ip[2], (int)ip[3],
          (int)ip[4], (int)ip[5], (int)ip[7], (int)ip[7], (int)ip[6]);
        break;
    case K_MAX_POOL2D:
    case K_AVG_POOL2D:
        P("kn_%s(ctx, %s, &(kn_pool_opts){{%d, %d}, {%d, %d}, {%d, %d}, {%d, %d}, %d, %d, 0})", op_name(k), a,
          (int)ip[0], (int)ip[1], (int)ip[2], (int)ip[3], (int)ip[4], (int)ip[5], (int)ip[6], (int)ip[6],
          (int)(ip[7] & 1), (int)(ip[7] >> 1 & 1));
        break;
    case K_ADAPTIVE_POOL2D: P("kn_adaptive_avg_pool2d(ctx, %s, %lld, %lld)", a, (long long)ip[0], (long long)ip[1]); break;
    case K_LAYER_NORM:
    case K_RMS_NORM:
        P("kn_%s(ctx, %s, %d, (const int64_t[]){", op_name(k), a, (int)ip[0]);
        for (int j = 0; j < ip[0]; j++) P("%skn_shape(%s)[%d]", j ? ", " : "", a, r - (int)ip[0] + j);
        P("}, %s, ", b);
        if (k == K_LAYER_NORM) P("%s, ", c);
        pnum(o->f[0]), P(")");
        break;
    case K_GROUP_NORM: P("kn_group_norm(ctx, %s, %lld, %s, %s, ", a, (long long)ip[0], b, c), pnum(o->f[0]), P(")"); break;
    case K_BATCH_NORM:
        P("kn_batch_norm(ctx, %s, %s, %s, %s, %s, %d, ", a, b, c, vname(o, 3), vname(o, 4), (int)ip[0]);
        pnum(o->f[0]), P(", "), pnum(o->f[1]), P(")");
        break;
    case K_MSE:
    case K_L1: P("kn_%s_loss(ctx, %s, %s, %s)", op_name(k), a, b, red_c[ip[0]]); break;
    case K_BCE: P("kn_binary_cross_entropy(ctx, %s, %s, NULL, %s)", a, b, red_c[ip[0]]); break;
    case K_BCE_LOGITS: P("kn_binary_cross_entropy_with_logits(ctx, %s, %s, NULL, NULL, %s)", a, b, red_c[ip[0]]); break;
    case K_CROSS_ENTROPY:
    case K_NLL:
        P("kn_%s(ctx, %s, %s, &(kn_loss_opts){%s, NULL, %d, %lld, ", k == K_NLL ? "nll_loss" : "cross_entropy", a, b,
          red_c[ip[0]], (int)ip[1], (long long)ip[2]);
        pnum(o->f[0]), P("})");
        break;
    case K_DROPOUT: P("kn_dropout(ctx, %s, ", a), pnum(o->f[0]), P(", %d)", (int)ip[0]); break;
    case K_SDPA: P("kn_scaled_dot_product_attention(ctx, %s, %s, %s, NULL, %d, ", a, b, c, (int)ip[0]), pnum(o->f[0]), P(")"); break;
    case K_RANDLIKE: P("kn_add(ctx, %s, kn_%s(ctx, KN_F32, kn_ndim(%s), kn_shape(%s)))", a, ip[0] ? "randn" : "rand", a, a); break;
    case K_ARANGE_ADD:
        if (r) P("kn_add(ctx, %s, kn_arange(ctx, KN_F32, 0, (double)kn_shape(%s)[%d], 1))", a, a, r - 1);
        else P("kn_add(ctx, %s, kn_arange(ctx, KN_F32, 0, 1, 1))", a);
        break;
    case K_ITEM_SCALE: P("fz_item_scale(ctx, %s, %s, %d)", a, b, (int)ip[0]); break;
    case K_REREAD: P("fz_reread(ctx, %s)", a); break;
    default: P("NULL /* ? */"); break;
    }
    P(";\n");
}

/* The text of fz_value above, for a printed program whose inputs are too large to list. */
static const char fz_value_src[] =
    "static double fz_value(uint64_t i, uint32_t seed, int kind, int64_t lo, int64_t hi)\n"
    "{\n"
    "    static const double special[4] = {INFINITY, -INFINITY, NAN, -0.0};\n"
    "    uint32_t h = (uint32_t)(i * 2654435761u) ^ seed;\n"
    "    h ^= h >> 16;\n"
    "    h *= 0x7feb352du;\n"
    "    h ^= h >> 15;\n"
    "    h *= 0x846ca68bu;\n"
    "    h ^= h >> 16;\n"
    "    switch (kind) {\n"
    "    case 1: return (double)(h % 256 + 1) / 32;\n"
    "    case 2: return (double)h / 4294967296.0 * 6 - 3;\n"
    "    case 3: return (double)(h % 255 + 1) / 256;\n"
    "    case 4:\n"
    "        if (h % 8 == 0) return special[(h >> 3) % 4];\n"
    "        return ((double)(h % 257) - 128) / 32;\n"
    "    case 5: return (double)(lo + (int64_t)(h % (uint32_t)(hi > lo ? hi - lo : 1)));\n"
    "    default: return ((double)(h % 257) - 128) / 32;\n"
    "    }\n"
    "}\n\n"
    "/* a tensor of shape s whose element i is fz_value(i, ...) */\n"
    "static kn_tensor *fz_data(kn_ctx *ctx, int nd, const int64_t *s, uint32_t seed, int kind, int64_t lo, int64_t hi)\n"
    "{\n"
    "    int64_t n = 1;\n"
    "    for (int d = 0; d < nd; d++) n *= s[d];\n"
    "    double *x = malloc((size_t)n * sizeof *x + 8);\n"
    "    for (int64_t i = 0; x && i < n; i++) x[i] = fz_value((uint64_t)i, seed, kind, lo, hi);\n"
    "    kn_tensor *t = x ? kn_tensor_from(ctx, KN_F64, nd, s, x) : NULL;\n"
    "    free(x);\n"
    "    return t;\n"
    "}\n\n";

#define LIST_MAX 1024 /* inputs up to this many elements are printed as lists */

static void print_input(const Prog *p, int k)
{
    const InSpec *s = &p->in[k];
    int ncalls = s->param ? 1 : p->ncalls, nd = s->nd, big = 0;
    int64_t shape[KN_MAX_DIMS], base[KN_MAX_DIMS];
    for (int c = 0; c < ncalls; c++) {
        base_shape(p, k, s->param ? -1 : c, shape, base);
        big |= numel_of(nd, base) > LIST_MAX;
    }
    P("/* input %d: %s, %s%s%s */\nstatic kn_tensor *fz_in%d(kn_ctx *ctx, int call)\n{\n", k, kn_dtype_name((kn_dtype)s->dt),
      view_name[s->view], s->param ? ", a parameter" : "", s->reqgrad ? ", requires grad" : "", k);
    P("    static const int64_t base[%d][%d] = {", ncalls, nd ? nd : 1);
    for (int c = 0; c < ncalls; c++) {
        base_shape(p, k, s->param ? -1 : c, shape, base);
        P("%s{", c ? ", " : "");
        for (int d = 0; d < nd; d++) P("%s%lld", d ? ", " : "", (long long)base[d]);
        P("%s}", nd ? "" : "0");
    }
    P("};\n");
    if (s->view == V_EXPAND) {
        P("    static const int64_t shape[%d][%d] = {", ncalls, nd);
        for (int c = 0; c < ncalls; c++) {
            base_shape(p, k, s->param ? -1 : c, shape, base);
            P("%s{", c ? ", " : "");
            for (int d = 0; d < nd; d++) P("%s%lld", d ? ", " : "", (long long)shape[d]);
            P("}");
        }
        P("};\n");
    }
    if (big) {
        P("    static const uint32_t seed[%d] = {", ncalls);
        for (int c = 0; c < ncalls; c++) P("%s%uu", c ? ", " : "", data_seed(p, k, s->param ? -1 : c));
        P("};\n    kn_tensor *t = fz_data(ctx, %d, base[call], seed[call], %d, %lld, %lld);\n", nd, s->data,
          (long long)s->lo, (long long)s->hi);
    } else {
        for (int c = 0; c < ncalls; c++) {
            base_shape(p, k, s->param ? -1 : c, shape, base);
            int64_t n = numel_of(nd, base);
            uint32_t seed = data_seed(p, k, s->param ? -1 : c);
            P("    static const double d%d[] = {", c);
            for (int64_t i = 0; i < n; i++) {
                P("%s", i ? (i % 12 ? ", " : ",\n        ") : "");
                pnum(fz_value((uint64_t)i, seed, s->data, s->lo, s->hi));
            }
            P("%s};\n", n ? "" : "0");
        }
        P("    static const double *const data[%d] = {", ncalls);
        for (int c = 0; c < ncalls; c++) P("%sd%d", c ? ", " : "", c);
        P("};\n    kn_tensor *t = kn_tensor_from(ctx, KN_F64, %d, base[call], data[call]);\n", nd);
    }
    if (s->dt != KN_F64) P("    t = kn_to(ctx, t, %s);\n", dtype_c[s->dt]);
    if (s->view == V_T) P("    t = kn_transpose(ctx, t, %d, %d);\n", s->vd, s->vd + 1);
    if (s->view == V_STRIDED) P("    t = kn_slice(ctx, t, %d, 1, %lld, 2);\n", s->vd, (long long)1 << 40);
    if (s->view == V_EXPAND) P("    t = kn_expand(ctx, t, %d, shape[call]);\n", nd);
    P("    return t;\n}\n\n");
}

static const char diff_src[] =
    "/* the largest |a - b| / (1 + |b|) over the elements (read as f64), where equal infinities and two NaNs\n"
    " * agree; INFINITY if the sizes differ or a read fails */\n"
    "static double fz_diff(kn_ctx *ca, kn_tensor *a, kn_ctx *cb, kn_tensor *b)\n"
    "{\n"
    "    int64_t n = a && b ? kn_numel(a) : -1;\n"
    "    if (n < 0 || n != kn_numel(b)) return INFINITY;\n"
    "    double *x = malloc((size_t)n * 8 + 8), *y = malloc((size_t)n * 8 + 8), m = 0;\n"
    "    if (!x || !y || kn_read(ca, kn_to(ca, a, KN_F64), x, (size_t)n * 8) || kn_read(cb, kn_to(cb, b, KN_F64), y, (size_t)n * 8))\n"
    "        m = INFINITY;\n"
    "    for (int64_t i = 0; i < n && m != INFINITY; i++) {\n"
    "        double d = x[i] == y[i] || (x[i] != x[i] && y[i] != y[i]) ? 0 : fabs(x[i] - y[i]) / (1 + fabs(y[i]));\n"
    "        if (!(d <= m)) m = d != d ? INFINITY : d;\n"
    "    }\n"
    "    free(x);\n"
    "    free(y);\n"
    "    return m;\n"
    "}\n\n";

static const char reread_src[] =
    "/* a read of x's values inside the body: a graph break when compiled */\n"
    "static kn_tensor *fz_reread(kn_ctx *ctx, kn_tensor *x)\n"
    "{\n"
    "    size_t n = (size_t)kn_numel(x) * kn_dtype_size(kn_dtype_of(x));\n"
    "    void *buf = malloc(n ? n : 1);\n"
    "    kn_tensor *t = NULL;\n"
    "    if (buf && kn_read(ctx, x, buf, n) == KN_OK) t = kn_tensor_from(ctx, kn_dtype_of(x), kn_ndim(x), kn_shape(x), buf);\n"
    "    free(buf);\n"
    "    return t;\n"
    "}\n\n";

static const char item_src[] =
    "/* x times a value read from y (kn_item): a graph break when compiled */\n"
    "static kn_tensor *fz_item_scale(kn_ctx *ctx, kn_tensor *x, kn_tensor *y, int how)\n"
    "{\n"
    "    kn_tensor *r = how == 0 ? kn_mean(ctx, y, NULL, 0, 0) : how == 1 ? kn_amax(ctx, y, NULL, 0, 0)\n"
    "                                                                     : kn_sum(ctx, y, NULL, 0, 0);\n"
    "    double d;\n"
    "    if (!r || kn_item(ctx, r, &d) != KN_OK) return NULL;\n"
    "    return kn_mul(ctx, x, kn_scalar(ctx, d));\n"
    "}\n\n";

/* The program as a test: fz_body, the inputs of each call and fz_check, which runs the body eagerly
 * and compiled as the fuzzer did and checks what failed. rr: an eager run of it (ranks, reference). */
static void print_program(const Prog *p, int verdict, const char *why, int from_ops, const RunRes *rr)
{
    int pos[MAXIN], nparam = 0, nin = 0, nleaf = 0, big = 0, nout = p->nout;
    const Config *cf = &p->cfg[0];
    for (int k = 0; k < p->nin; k++) {
        pos[k] = p->in[k].param ? nparam++ : nin++;
        nleaf += p->in[k].param && p->in[k].reqgrad;
        for (int c = 0; c < p->ncalls; c++) {
            int64_t shape[KN_MAX_DIMS], base[KN_MAX_DIMS];
            base_shape(p, k, c, shape, base);
            big |= numel_of(p->in[k].nd, base) > LIST_MAX;
        }
    }
    if (p->grad == G_INSIDE) nout += 1 + nleaf;
    P("/*\n * fuzz_compiled --seed %#llx --index %d", (unsigned long long)p->seed, p->index);
    for (int c = 0; c < NCLASS; c++)
        if (with[c] != class_default[c]) P(" --with%s %s", with[c] ? "" : "out", class_name[c]);
    for (int k = 1, n = 0; k < NKINDS && only_ops[0]; k++)
        if (only_ops[k]) P("%s%s", n++ ? "," : " --ops ", op_name(k));
    P(" (shrunk from %d values to %d)\n * %s", from_ops, p->nops, verdict_name[verdict]);
    if (verdict != R_REF) {
        P(" on ");
        print_config(pf, cf);
    }
    P(":\n * %s\n", why);
    P(" * grad %s%s; %d call%s", grad_name[p->grad], p->optim ? (p->optim == 1 ? " with SGD" : " with Adam") : "",
      p->ncalls, p->ncalls > 1 ? "s" : "");
    if (p->dyn) {
        P(" at s0 =");
        for (int c = 0; c < p->ncalls; c++) P("%s %lld", c ? "," : "", (long long)p->s[c]);
    }
    P(".\n */\n#include \"test.h\"\n\n");
    if (big) P("%s", fz_value_src);
    P("%s", diff_src);
    if (p->grad != G_NONE) P("%s", loss_src);
    if (has_kind(p, K_REREAD)) P("%s", reread_src);
    if (has_kind(p, K_ITEM_SCALE)) P("%s", item_src);
    P("typedef struct {\n    kn_tensor *param[%d]; /* kn_compile_opts.params */\n", nparam ? nparam : 1);
    P("    kn_tensor *leaf[%d];  /* leaves that require grad */\n    int nleaf;\n    kn_optim *opt;\n} FzUser;\n\n", MAXIN);
    P("static kn_status fz_body(kn_ctx *ctx, void *user, kn_tensor *const *in, int nin, kn_tensor **out, int nout)\n{\n");
    P("    FzUser *u = user;\n    (void)u;\n    (void)in;\n    (void)nin;\n    (void)nout;\n");
    if (p->grad == G_INSIDE) P("    kn_zero_grad(ctx, u->leaf, u->nleaf);\n");
    for (int i = 0; i < p->nops; i++) {
        print_op(p, i, rr->rank, pos);
        if (p->op[i].k != K_INPUT) P("    if (!v%d) return kn_last_status(ctx);\n", i);
    }
    for (int k = 0; k < p->nout; k++) P("    out[%d] = v%d;\n", k, p->out[k]);
    if (p->grad == G_INSIDE) {
        P("    kn_tensor *loss = fz_loss(ctx, out[%d]);\n", p->dout);
        P("    if (!loss || kn_backward(ctx, loss, 0) != KN_OK) return kn_last_status(ctx);\n");
        if (p->optim) P("    if (kn_optim_step(u->opt) != KN_OK) return kn_last_status(ctx);\n");
        P("    out[%d] = loss;\n    for (int j = 0; j < u->nleaf; j++) {\n", p->nout);
        P("        kn_tensor *g = kn_grad(ctx, u->leaf[j]);\n");
        P("        out[%d + j] = g ? g : kn_zeros(ctx, kn_dtype_of(u->leaf[j]), kn_ndim(u->leaf[j]), kn_shape(u->leaf[j]));\n",
          p->nout + 1);
        P("    }\n");
    }
    P("    return KN_OK;\n}\n\n");
    for (int k = 0; k < p->nin; k++) print_input(p, k);
    P("/* the parameters, once per context */\nstatic void fz_setup(kn_ctx *ctx, FzUser *u)\n{\n");
    P("    kn_set_eager_backend(ctx, KN_BACKEND_INTERP);\n");
    for (int k = 0; k < p->nin; k++) {
        if (!p->in[k].param) continue;
        P("    u->param[%d] = %s(ctx, fz_in%d(ctx, 0));\n", pos[k], p->in[k].reqgrad ? "kn_param" : "kn_keep", k);
        if (p->in[k].reqgrad) P("    u->leaf[u->nleaf++] = u->param[%d];\n", pos[k]);
    }
    if (p->optim == 1) P("    u->opt = kn_sgd(ctx, u->leaf, u->nleaf, &(kn_sgd_opts){.lr = 0.1, .momentum = 0.9});\n");
    if (p->optim == 2) P("    u->opt = kn_adam(ctx, u->leaf, u->nleaf, &(kn_adam_opts){.lr = 0.01});\n");
    P("    kn_set_grad_enabled(ctx, %d);\n}\n\n", p->grad != G_NONE);
    P("/* the inputs of a call; leaves that require grad (a backward outside the body) in lv */\n");
    P("static int fz_inputs(kn_ctx *ctx, int call, kn_tensor **in, kn_tensor **lv)\n{\n    int n = 0;\n    (void)call;\n");
    for (int k = 0; k < p->nin; k++) {
        if (p->in[k].param) continue;
        P("    in[%d] = fz_in%d(ctx, call);\n", pos[k], k);
        if (p->in[k].reqgrad) P("    lv[n++] = kn_requires_grad(ctx, in[%d], 1);\n", pos[k]);
    }
    P("    return n;\n}\n\n");
    /* the check */
    double tol = rr->tol;
    P("static void fz_check(void)\n{\n");
    P("    kn_ctx *ce = kn_ctx_new(&(kn_ctx_opts){.seed = %lluu}), *cc = kn_ctx_new(&(kn_ctx_opts){.seed = %lluu});\n",
      (unsigned long long)(p->seed + (uint64_t)p->index), (unsigned long long)(p->seed + (uint64_t)p->index));
    P("    FzUser ue = {{0}}, uc = {{0}};\n    fz_setup(ce, &ue);\n    fz_setup(cc, &uc);\n");
    P("    kn_compile_opts o = {.backend = %s, .mode = %s, .dynamic = %s, .params = uc.param, .nparams = %d};\n",
      (const char *[]){"KN_BACKEND_C", "KN_BACKEND_TCC", "KN_BACKEND_INTERP"}[cf->backend],
      (const char *[]){"KN_MODE_DEFAULT", "KN_MODE_REDUCE_OVERHEAD", "KN_MODE_MAX_AUTOTUNE"}[cf->mode],
      (const char *[]){"KN_DYNAMIC_AUTO", "KN_DYNAMIC_ON", "KN_DYNAMIC_OFF"}[cf->dynamic], nparam);
    P("    kn_fn *f = kn_compile(cc, fz_body, &uc, &o);\n");
    P("    for (int call = 0; call < %d; call++) {\n", p->ncalls);
    P("        kn_tensor *ie[%d], *ic[%d], *le[%d], *lc[%d], *oe[%d] = {0}, *oc[%d] = {0};\n", MAXIN, MAXIN, MAXIN, MAXIN,
      nout, nout);
    P("        int nl = fz_inputs(ce, call, ie, le);\n        fz_inputs(cc, call, ic, lc);\n");
    P("        kn_status se = fz_body(ce, &ue, ie, %d, oe, %d), sc = kn_call(f, ic, %d, oc, %d);\n", nin, nout, nin, nout);
    if (p->grad == G_OUTSIDE) {
        P("        if (!se) se = kn_backward(ce, fz_loss(ce, oe[%d]), 0);\n", p->dout);
        P("        if (!sc) sc = kn_backward(cc, fz_loss(cc, oc[%d]), 0);\n", p->dout);
    }
    P("        CHECK_MSG((se != KN_OK) == (sc != KN_OK), \"call %%d: eager \\\"%%s\\\", compiled \\\"%%s\\\"\", call,\n");
    P("                  kn_last_error(ce), kn_last_error(cc));\n");
    P("        for (int k = 0; k < %d && !se && !sc; k++) {\n", nout);
    P("            double d = fz_diff(cc, oc[k], ce, oe[k]);\n");
    P("            CHECK_MSG(d <= %.3g, \"call %%d out[%%d]: compiled differs from eager by %%g\", call, k, d);\n        }\n", tol);
    P("        for (int j = 0; j < nl && !se && !sc; j++) {\n");
    P("            double d = fz_diff(cc, kn_grad(cc, lc[j]), ce, kn_grad(ce, le[j]));\n");
    P("            CHECK_MSG(d <= %.3g, \"call %%d: the grad of leaf %%d differs from eager's by %%g\", call, j, d);\n", tol);
    P("        }\n        for (int j = 0; j < %d && !se && !sc; j++) {\n", nparam);
    P("            double d = fz_diff(cc, uc.param[j], ce, ue.param[j]);\n");
    P("            CHECK_MSG(d <= %.3g, \"call %%d: param %%d differs from eager's by %%g\", call, j, d);\n        }\n", tol);
    if (verdict == R_REF && rr->ref[0] && rr->ref_op == p->out[0]) {
        P("        double *x = se ? NULL : malloc((size_t)kn_numel(oe[0]) * sizeof *x + 8);\n");
        P("        if (x && kn_read(ce, kn_to(ce, oe[0], KN_F64), x, (size_t)kn_numel(oe[0]) * sizeof *x) == KN_OK)\n");
        P("            CHECK_MSG(test_close(x[%lld], ", (long long)rr->ref_i), pnum(rr->ref_want);
        P(", 1e-6, 0), \"eager out[0] element %lld is %%.9g, torch's (libm) ", (long long)rr->ref_i), pnum(rr->ref_want);
        P("\", x[%lld]);\n        free(x);\n", (long long)rr->ref_i);
    }
    P("        kn_clear_error(ce);\n        kn_clear_error(cc);\n    }\n");
    if (verdict == R_RECOMPILE) {
        P("    kn_fn_info info;\n    CHECK(kn_fn_stats(f, &info) == KN_OK);\n");
        P("    CHECK_MSG(info.entries <= %d, \"%%d entries\", info.entries);\n", max_entries(p, cf->dynamic));
    }
    P("    kn_fn_free(f);\n    kn_optim_free(ue.opt);\n    kn_optim_free(uc.opt);\n    kn_ctx_free(cc);\n    kn_ctx_free(ce);\n}\n\n");
    P("int main(void)\n{\n    fz_check();\n    TEST_END(\"fuzz_repro\");\n}\n");
}

/* print_program, after an eager run for the ranks (in a child, where a crash cannot take the fuzzer down) */
static void print_c(FILE *f, const Prog *p, int verdict, const char *why, int from_ops)
{
    fflush(f);
#if HAVE_POSIX
    pid_t pid = fork();
    if (pid > 0) {
        int status;
        waitpid(pid, &status, 0);
        return;
    }
#endif
    RunRes *rr = calloc(1, sizeof *rr);
    if (rr) {
        run_prog(p, -1, rr);
        rr->tol = tolerance(KN_F32, rr->eps, rr->maxred);
        pf = f;
        print_program(p, verdict, why, from_ops, rr);
        fflush(f);
        free_run(rr);
        free(rr);
    }
#if HAVE_POSIX
    if (pid == 0) _exit(0);
#endif
}
