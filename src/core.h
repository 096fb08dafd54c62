/*
 * core.h — internal types shared by every stage: arenas, the context,
 * tensors and their storage, primitive parameters, graph nodes, errors.
 *
 * Module prefixes: arena_ (arena.c), ctx_/err (ctx.c), tensor_ (tensor.c),
 * prim_ (prim.c), interp_ (interp.c), graph_ (graph.c), expr_/dim_ (expr.c),
 * dt_ (dtype.c), autodiff_ (autodiff.c), partition_/graph_run (partition.c),
 * composite_ (composite.c). Everything else is static
 * in its file.
 */
#ifndef KN_CORE_H
#define KN_CORE_H

#include <stdio.h> /* first: newlib's <inttypes.h> defines PRId64 only after <sys/types.h>, which this includes */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "composite.h"
#include "hash.h"
#include "kiln.h"
#include "ops.h"

/* printf-style functions: the compiler checks their formats */
#if defined(__GNUC__)
#define KN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define KN_PRINTF(f, a)
#endif

#define KN_ASSERT(c) ((c) ? (void)0 : kn_assert_fail(__FILE__, __LINE__, #c))
void kn_assert_fail(const char *file, int line, const char *cond);

/* ---- allocation: every byte goes through the context's hook ---- */
void *kn_alloc(kn_ctx *ctx, size_t n);           /* NULL on failure, no error set */
void *kn_alloc_zeroed(kn_ctx *ctx, size_t n);    /* the same, all bytes 0 (calloc under the default hook) */
void *kn_realloc(kn_ctx *ctx, void *p, size_t o, size_t n);
void kn_dealloc(kn_ctx *ctx, void *p, size_t n);
/* KnParallel.scratch (targets/c/gemm.h) for the context owner: at least bytes,
 * 64-byte aligned, the same block for every call (grown when one asks for
 * more), so the GEMMs of all its programs pack into one buffer; NULL when
 * it cannot grow. */
void *ctx_scratch(void *owner, size_t bytes);
int kn_mul_overflows(size_t a, size_t b, size_t *out); /* 1 if a * b overflows */

/* ---- arenas: compile-time structures, freed in one call ---- */
typedef struct ArenaBlock ArenaBlock;
typedef struct {
    kn_ctx *ctx;
    ArenaBlock *head;
    size_t used, total; /* bytes handed out, bytes held */
} Arena;

void arena_init(Arena *a, kn_ctx *ctx);
void *arena_alloc(Arena *a, size_t n);          /* zeroed, 16-aligned; NULL on failure */
void *arena_grow(Arena *a, void *p, size_t o, size_t n); /* copy into a larger block */
void arena_free(Arena *a);                      /* everything at once */

/* ---- dims: a concrete size (>= 0) or a symbolic expression (< 0) ---- */
typedef int64_t Dim;
#define DIM_IS_SYM(d) ((d) < 0)

/* ---- dtypes ---- */
int dt_is_float(kn_dtype dt);
int dt_is_int(kn_dtype dt); /* integer, not bool */
double dt_load(kn_dtype dt, const void *p);     /* one element as double */
int64_t dt_load_i(kn_dtype dt, const void *p);  /* one element as int64 (floats truncate) */
void dt_store(kn_dtype dt, void *p, double v);
void dt_store_i(kn_dtype dt, void *p, int64_t v);
float dt_half_to_float(uint16_t h);
uint16_t dt_float_to_half(float f);
float dt_bf16_to_float(uint16_t h);
uint16_t dt_float_to_bf16(float f);

/* ---- primitive parameters: zeroed, then the fields an op reads ---- */
typedef struct {
    int64_t i[2 * KN_MAX_DIMS]; /* axes mask, shape, perm, slice, pad pairs */
    double f;                   /* full value, pad value */
    int32_t axis;               /* iota axis */
    uint8_t dtype;              /* cast, full, iota, rand, input */
    uint8_t n;                  /* entries of i in use */
    uint8_t origin;             /* gather, scatter_add: 1 + the composite that made it (composite_name), or 0 */
    uint8_t ix;                 /* gather: what its index stands for (IndexUse) */
} Params;

/* What the index a GATHER reads stands for (Params.ix). An index out of range
 * is reported as such, naming the public op that made the node
 * (Params.origin, set by prim() from ctx->op), by interp_bad_index: in eager
 * and compiled runs alike, since both come from the node's params. */
typedef enum {
    IX_INDEX,  /* a position along the dim */
    IX_CLASS,  /* a target class (nll_loss, cross_entropy) */
    IX_DIVISOR /* 1 where an integer divisor is 0, into a table of one element (fmod) */
} IndexUse;

/* SLICE: i[0] dim, i[1] start, i[2] count, i[3] step (nonzero, may be < 0).
 * PAD:   i[2d], i[2d+1] before/after for dim d (>= 0), f the value.
 * GATHER/SCATTER_ADD: i[0] dim. REDUCE: i[d] != 0 reduces dim d.
 * RESHAPE/EXPAND/CREATE: i[0..n) the shape. PERMUTE: i[0..n) the order. */

/* ---- tensors ---- */
typedef struct {
    void *data;
    size_t bytes;
    int refs;
    int borrowed; /* data belongs to someone else (a program's arena): not freed here */
    uint64_t stamp; /* changes whenever the bytes may have: a value of the context's clock, new at the storage's
                       making and at every later write into it (storage_stamp), so a program can tell a
                       parameter it has seen, unchanged, from one written since (program.c, kept packed B) */
} Storage;

enum {
    TF_KEPT = 1,     /* survives scope ends */
    TF_PARAM = 2,    /* a parameter (kn_param) */
    TF_WRAPPED = 4,  /* a Python-number scalar: weakest in promotion */
    TF_REQGRAD = 8,  /* requires grad */
    TF_GRAD = 16,    /* the .grad of a leaf: owned by it, kn_free ignores it */
    TF_OWNED = 32    /* owned by a compiled program (tensor_own): kn_free ignores it */
};

struct kn_tensor {
    uint8_t dtype, ndim, flags;
    int64_t shape[KN_MAX_DIMS];
    int64_t stride[KN_MAX_DIMS]; /* elements */
    int64_t offset;              /* elements */
    Storage *st;                 /* NULL for a traced (symbolic) tensor */
    uint32_t node;               /* graph node while tracing, else 0 */
    uint32_t trace_serial;       /* node is valid only in the graph with this serial */
    int32_t view_root;           /* traced under kn_call: 1 + the capture's root (capture.c) whose storage this
                                    tensor would view eagerly, or 0 (eager would make it fresh) */
    int scope;                   /* scope depth when made; 0 after kn_keep */
    kn_tensor *prev, *next;      /* the context's list of live tensors */
    kn_tensor *grad;             /* autodiff: the accumulated gradient (kept) */
    uint32_t tape_seq;           /* autodiff: 1 + index of the tape entry that made it, or 0 */
    uint32_t tape_epoch;         /* autodiff: which tape tape_seq refers to */
};

/* ---- graph: flat node array, interned ---- */
typedef struct {
    uint16_t op;
    uint8_t dtype, ndim, nsrc;
    Dim shape[KN_MAX_DIMS];
    uint32_t src[3];
    Params p;
} Node;

typedef struct {
    kn_ctx *ctx;
    Arena arena;
    Node *nodes;      /* node 0 is a reserved "none" */
    uint32_t n, cap;
    uint32_t *hash;   /* open addressing, 0 = empty */
    uint32_t hcap;
    uint32_t ninputs;
    uint32_t serial;        /* distinguishes this graph's node ids from an earlier graph's */
    kn_tensor **input_vals; /* input_vals[k]: the tensor behind input k while tracing (not owned) */
    uint32_t input_cap;
    int refs;               /* holders besides the first: graph_free drops one, the last frees it */
} Graph;

Graph *graph_new(kn_ctx *ctx);
void graph_free(Graph *g);
uint32_t graph_add(Graph *g, const Node *n); /* interned; 0 on out of memory */
/* n as the graph's next input (op and index set here), with a NULL slot in input_vals for its
 * tensor; 0 on out of memory */
uint32_t graph_input(Graph *g, Node *n);
int graph_verify(kn_ctx *ctx, const Graph *g); /* 0 ok, else error set */
size_t graph_dump(const Graph *g, char *buf, size_t cap); /* text; returns length needed */

/* ---- the context ---- */
/* Freed storage blocks a context keeps for reuse, at most (tensor.c): none where memory is the linear
 * memory of a WASM module or a microcontroller's, and under AddressSanitizer (it would hide a
 * use after free). */
#if defined(__wasm__) || defined(__thumb__) || defined(__SANITIZE_ADDRESS__)
#define KN_CACHE_BLOCKS 1
#define KN_CACHE_ON 0
#else
#define KN_CACHE_BLOCKS 64
#define KN_CACHE_ON 1
#endif

struct kn_ctx {
    kn_alloc_fn alloc;
    void *alloc_user;
    kn_status status;
    char err[512];
    const char *op;          /* outermost public op running, for messages */
    int scope;               /* open scope depth */
    kn_tensor *live;         /* newest first */
    size_t live_bytes, live_tensors;
    uint64_t rng[2];         /* the generator: Philox key, and the stream position of the next draw */
    kn_tensor *rng_t[2];     /* rng[0] and rng[1] as 0-d i64 tensors (ctx_rng): a draw's sources */
    Graph *trace;            /* non-NULL: prims record nodes instead of running */
    void (*log)(void *user, const char *line);
    void *log_user;
    int grad_enabled;
    uint32_t graph_serial;   /* the last serial handed to a graph */
    struct Tape *tape;       /* autodiff: entries recorded since the last backward */
    uint32_t scope_mark[32], scope_epoch[32]; /* tape length and epoch at each scope begin */
    int no_custom_vjp;       /* tests: derive every backward from primitives */
    uint32_t tape_epoch;     /* bumped each time a tape is released */
    uint32_t logs;           /* KILN_LOGS topics (log.h), one bit each */
    struct TraceHooks *capture; /* kn_call tracing: its hooks (first in capture.c's state); NULL otherwise */
    uint64_t public_ops;     /* public op calls so far, nested ones included (kiln explain counts them) */
    kn_backend eager_backend; /* eager ops: the interpreter, or compiled kernels (eager.c) */
    const struct EagerHooks *eager_hooks; /* how eager.c runs them (NULL: the interpreter does) */
    struct Eager *eager;     /* eager.c's kernel cache, made at the first op that needs it */
    uint64_t clock;          /* the last Storage.stamp handed out */
    uint8_t said_no_jit;     /* per kn_backend bit: kn_compile said that backend has no compiler here */
    /* freed storage kept for reuse (tensor.c, "freed storage kept"): blocks as data_alloc made them */
    void *cache_raw[KN_CACHE_BLOCKS];
    size_t cache_bytes[KN_CACHE_BLOCKS];
    int ncache;
    size_t cache_total;
    void *scratch;           /* lent to compiled GEMMs for a call (ctx_scratch), scratch_bytes long */
    size_t scratch_bytes;
};

/* The generator's state as 0-d i64 tensors over ctx->rng, which the context owns (made at the first draw):
 * a draw reads them as its sources, so a traced draw reads the state and writes it back (prim.c p_rand).
 * NULL with the error set if out of memory. */
kn_tensor *const *ctx_rng(kn_ctx *ctx);

/* ---- errors ---- */
void *kn_err(kn_ctx *ctx, kn_status s, const char *fmt, ...) KN_PRINTF(3, 4);     /* returns NULL */
kn_status kn_errs(kn_ctx *ctx, kn_status s, const char *fmt, ...) KN_PRINTF(3, 4); /* returns s */
void *kn_err_null(kn_ctx *ctx, const char *operand);           /* NULL operand */
/* An optional operand (bias, weight, mask) may be NULL for "absent"; but a
 * NULL while an error is pending is the failed result of an earlier call and
 * must not silently become "absent". 1 if the op may go on. */
int optional_ok(const kn_ctx *ctx, const kn_tensor *t);
size_t kn_appendf(char *buf, size_t cap, size_t len, const char *fmt, ...) KN_PRINTF(4, 5); /* snprintf-style append */
const char *op_enter(kn_ctx *ctx, const char *name);
void op_leave(kn_ctx *ctx, const char *saved);
kn_tensor *op_leave_with(kn_ctx *ctx, const char *saved, kn_tensor *v);

/* Public ops open with ENTER and return through LEAVE so that errors raised
 * deep inside name the op the user called. LEAVE is a function call so that
 * its argument, which may itself raise the error, is evaluated first. */
#define ENTER(ctx, name) \
    if (!(ctx)) return NULL; \
    const char *kn_saved_op_ = op_enter((ctx), (name))
#define LEAVE(ctx, v) op_leave_with((ctx), kn_saved_op_, (v))

/* ---- tensors (tensor.c) ---- */
kn_tensor *tensor_new(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape); /* contiguous, uninit */
kn_tensor *tensor_new_zeroed(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape); /* contiguous, all bits 0 */
kn_tensor *tensor_view(kn_ctx *ctx, kn_tensor *base, int ndim, const int64_t *shape,
                       const int64_t *stride, int64_t offset);
kn_tensor *tensor_symbolic(kn_ctx *ctx, kn_dtype dt, int ndim, const Dim *shape, uint32_t node);
void tensor_contig_strides(int ndim, const int64_t *shape, int64_t *stride);
int64_t tensor_numel(int ndim, const int64_t *shape);
int tensor_check_size(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, size_t *bytes);
void *tensor_ptr(const kn_tensor *t, int64_t elem_offset); /* data + elem_offset * size */
int tensor_check(kn_ctx *ctx, kn_tensor *t, const char *operand); /* 0 if NULL (error set) */
int tensor_norm_dim(kn_ctx *ctx, int dim, int ndim, const char *what); /* -1 on error */
kn_tensor *tensor_hold(kn_ctx *ctx, const kn_tensor *t); /* a handle on no scope list, for the tape */
kn_tensor *tensor_borrow(kn_ctx *ctx, void *data, kn_dtype dt, int ndim, const int64_t *shape); /* over memory not ours */
void tensor_unhold(kn_ctx *ctx, kn_tensor *h);
/* Marks st as written now (a new stamp): every write into a storage after the op that made it must,
 * tensor_assign, a program's outputs, a swap of bytes between storages. NULL is ignored. */
void storage_stamp(kn_ctx *ctx, Storage *st);
void storage_cache_flush(kn_ctx *ctx); /* frees the blocks kept for reuse (kn_ctx_free) */
/* t (just made, on the live list) becomes a handle its maker owns: off every
 * scope's list, ignored by kn_free, released with tensor_unhold. */
kn_tensor *tensor_own(kn_ctx *ctx, kn_tensor *t);
/* h becomes a contiguous-or-not view of v's storage (v's dtype, shape,
 * strides, offset); h's own flags, grad and tape fields stay. */
void tensor_rebind(kn_ctx *ctx, kn_tensor *h, const kn_tensor *v);

/* ---- primitives (prim.c): shape rule, then trace or run ---- */
kn_tensor *prim(kn_ctx *ctx, Op op, kn_tensor *const *src, const Params *p);
kn_tensor *prim1(kn_ctx *ctx, Op op, kn_tensor *a);
kn_tensor *prim2(kn_ctx *ctx, Op op, kn_tensor *a, kn_tensor *b);
kn_status prim_shape(kn_ctx *ctx, Op op, int nsrc, const uint8_t *dts, const uint8_t *ndims,
                     const Dim *const *shapes, const Params *p, uint8_t *odt, uint8_t *ondim, Dim *oshape);

/* convenience constructors for composites; all return NULL on error */
kn_tensor *p_reshape(kn_ctx *ctx, kn_tensor *x, int ndim, const int64_t *shape);
kn_tensor *p_permute(kn_ctx *ctx, kn_tensor *x, const int *perm);
kn_tensor *p_expand(kn_ctx *ctx, kn_tensor *x, int ndim, const int64_t *shape);
kn_tensor *p_slice(kn_ctx *ctx, kn_tensor *x, int dim, int64_t start, int64_t count, int64_t step);
kn_tensor *p_pad(kn_ctx *ctx, kn_tensor *x, const int64_t *before, const int64_t *after, double value);
kn_tensor *p_reduce(kn_ctx *ctx, Op op, kn_tensor *x, const int *dims, int ndims); /* keepdim */
kn_tensor *p_cast(kn_ctx *ctx, kn_tensor *x, kn_dtype dt);
kn_tensor *p_full(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, double v);
kn_tensor *p_iota(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, int axis);
/* A draw from the context's generator: element c of it is Philox's at stream position counter + c,
 * and the counter advances by its numel (while tracing, a traced write of the counter). */
kn_tensor *p_rand(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape);
kn_tensor *p_gather(kn_ctx *ctx, kn_tensor *x, int dim, kn_tensor *idx);
kn_tensor *p_gather_for(kn_ctx *ctx, kn_tensor *x, int dim, kn_tensor *idx, IndexUse use);
kn_tensor *p_scatter_add(kn_ctx *ctx, kn_tensor *x, int dim, kn_tensor *idx, kn_tensor *src);
kn_tensor *p_where(kn_ctx *ctx, kn_tensor *c, kn_tensor *a, kn_tensor *b);
kn_tensor *p_dot(kn_ctx *ctx, kn_tensor *a, kn_tensor *b);
int prim_can_view(const kn_tensor *x, int ndim, const int64_t *shape); /* reshape without a copy? */
int prim_view_strides(const kn_tensor *x, int ndim, const int64_t *shape, int64_t *stride); /* 0: needs a copy */

/* ---- interpreter (interp.c): run one primitive on concrete tensors ---- */
kn_status interp_run(kn_ctx *ctx, Op op, kn_tensor *out, kn_tensor *const *src, const Params *p);
/* The error for index v outside [0, size) of a GATHER or SCATTER_ADD with params p (KN_EINDEX; an
 * IX_DIVISOR's, KN_EINVAL): it names the public op that made the node, unless ctx->op is that op. */
kn_status interp_bad_index(kn_ctx *ctx, Op op, const Params *p, int64_t v, int64_t size);
void interp_philox(uint64_t key, uint64_t ctr, uint32_t out[4]);

/* ---- helpers for composites (decomp.c) ---- */
kn_dtype promote_types(kn_dtype a, kn_dtype b);    /* torch.promote_types */
kn_dtype result_type(int n, kn_tensor *const *xs); /* PyTorch's three-tier rule */
kn_dtype float_of(kn_dtype dt);                    /* dt if float, else f32 */
const char *fmt_shape(char *buf, size_t cap, const kn_tensor *t); /* "(2, 3)" */
const char *fmt_dims(char *buf, size_t cap, int n, const int64_t *dims); /* "(2, 3)" */
int broadcast_shapes(kn_ctx *ctx, int n, kn_tensor *const *xs, int64_t *out); /* ndim or -1 */
kn_tensor *broadcast_to(kn_ctx *ctx, kn_tensor *x, int ndim, const int64_t *shape);
int broadcast_cast(kn_ctx *ctx, int n, kn_tensor **xs, kn_dtype dt); /* in place; 0 on error */
kn_tensor *c_scalar(kn_ctx *ctx, kn_dtype dt, double v);  /* 0-d constant */
kn_tensor *bin(kn_ctx *ctx, Op op, kn_tensor *a, kn_tensor *b, kn_dtype dt); /* broadcast, cast, op */
kn_tensor *binc(kn_ctx *ctx, Op op, kn_tensor *x, double v);  /* x op constant, x's dtype */
kn_tensor *truth(kn_ctx *ctx, kn_tensor *x);               /* x != 0 as bool */

/* ---- autodiff (autodiff.c) ----
 * prim() calls autodiff_record after every op whose sources need grad, in
 * eager mode and while tracing alike: VJP rules are written with prim(), so
 * a backward run while tracing appends the backward to the graph (the joint
 * graph). Composites with a hand-written backward compute their forward
 * with grad off and record one custom entry. */
int autodiff_wants(const kn_ctx *ctx, int n, kn_tensor *const *src);
kn_status autodiff_record(kn_ctx *ctx, Op op, kn_tensor *const *src, const Params *p, kn_tensor *out);
typedef kn_tensor *(*CustomVjp)(kn_ctx *ctx, kn_tensor *g, kn_tensor *const *saved, const int64_t *args, int which);
/* out = f(in[0..nin)) computed with grad off; fn(g, saved, args, i) gives
 * d/d in[i]. Up to 3 inputs, 4 saved tensors and 6 integer arguments. */
kn_tensor *autodiff_custom(kn_ctx *ctx, kn_tensor *out, int nin, kn_tensor *const *in, int nsaved,
                           kn_tensor *const *saved, const int64_t *args, int nargs, CustomVjp fn);
int autodiff_custom_wanted(kn_ctx *ctx, kn_tensor *x); /* grad wanted for x and custom rules on */
/* d loss / d leaves[i] into grads[i] (NULL where unreached), without touching
 * .grad; the tape is kept. Used by kn_backward and to build joint graphs. */
kn_status autodiff_grads(kn_ctx *ctx, kn_tensor *loss, int n, kn_tensor *const *leaves, kn_tensor **grads);
/* The same, over the tape's entries from stop on: a source made by an earlier entry is a leaf, listed in
 * leaves (a value a region of an earlier graph made: capture.c's graph breaks). */
kn_status autodiff_grads_since(kn_ctx *ctx, kn_tensor *loss, uint32_t stop, int n, kn_tensor *const *leaves,
                               kn_tensor **grads);
void autodiff_release(kn_ctx *ctx); /* drop the tape */
uint32_t autodiff_tape_len(const kn_ctx *ctx);
void autodiff_forget_leaf(kn_ctx *ctx, kn_tensor *leaf); /* a leaf is being freed */
void autodiff_scope_begin(kn_ctx *ctx);                  /* remember the tape's length */
void autodiff_scope_end(kn_ctx *ctx);                    /* drop entries nothing alive refers to */
int tensor_same_layout(const kn_tensor *a, const kn_tensor *b); /* dtype, shape, strides and offset */
kn_status tensor_assign(kn_ctx *ctx, kn_tensor *dst, kn_tensor *src); /* eager: copy values into dst's storage */
/* A region (a compiled function run by kn_call, or a graph of it): out[0..nout) depend on in[0..nin);
 * backward calls fn once with the outputs' cotangents g[0..nout) (NULL: none reached that output) to fill
 * grads[i] (NULL: none) for every source; release(user) runs when the entry is dropped (also if nothing
 * needs grad, or on error). */
typedef kn_status (*RegionVjp)(kn_ctx *ctx, void *user, kn_tensor *const *g, kn_tensor **grads);
kn_status autodiff_region(kn_ctx *ctx, int nout, kn_tensor *const *out, int nin, kn_tensor *const *in, RegionVjp fn,
                          void (*release)(kn_ctx *ctx, void *user), void *user);
void autodiff_truncate(kn_ctx *ctx, uint32_t len); /* drop entries from len on */

/* ---- trace hooks: what the core asks of a tracer ----
 * While kn_call traces a body, ctx->capture points at these (capture.c installs them, as the first
 * member of its state); the core calls up to the tracer only through them, never by name. */
typedef struct TraceHooks {
    kn_status (*read)(kn_ctx *ctx, kn_tensor *t, const char *op);    /* a read of t: a graph break if symbolic;
                                                                        its value guarded on */
    kn_status (*write)(kn_ctx *ctx, kn_tensor *dst, kn_tensor *src); /* a traced value into a concrete tensor */
    kn_status (*set_grad)(kn_ctx *ctx, kn_tensor *leaf, kn_tensor *g, int read_old); /* .grad := g (NULL: none) */
    void (*guard_flag)(kn_ctx *ctx, const int *flag, const char *what); /* the graph assumed *flag's value */
    uint32_t (*tape_start)(const kn_ctx *ctx); /* the tape's length when tracing began */
    int (*generic)(const kn_ctx *ctx); /* tracing a graph generic in a size: no form that depends on one */
    int (*root)(kn_ctx *ctx, kn_tensor *x); /* the view_root of a view of concrete x (0: none) */
    int (*layout_known)(const kn_ctx *ctx, const kn_tensor *x); /* 0: x's tracked strides are a guess (a probe) */
} TraceHooks;

void log_init(kn_ctx *ctx); /* log.c: KILN_LOGS into ctx->logs */

/* ---- eager hooks: eager ops through compiled single-op kernels ----
 * A compiled eager backend (eager.c: kn_set_eager_backend, KILN_EAGER) installs these in
 * ctx->eager_hooks; prim() calls up to it only through them. */
typedef struct EagerHooks {
    /* runs op through a cached kernel: 1 with *out the result (NULL with the error set if it failed),
     * or 0 if the interpreter should run it (an op or view that has no kernel, no compiler). odt, ond,
     * osh: the result, by the op's shape rule */
    int (*run)(kn_ctx *ctx, Op op, kn_tensor *const *src, const Params *p, uint8_t odt, uint8_t ond,
               const Dim *osh, kn_tensor **out);
    void (*release)(kn_ctx *ctx); /* the kernel cache, when the context goes */
} EagerHooks;

/* A context as the core makes it (kn_ctx_new, eager.c, adds the eager backend KILN_EAGER names) */
kn_ctx *ctx_new(const kn_ctx_opts *opts);

#endif
