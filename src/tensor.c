/*
 * tensor.c — tensor handles, storage, views, lifetime and reading back.
 *
 * A tensor is a view (shape, strides, offset, in elements) of a refcounted
 * storage. Every handle sits on the context's live list with the scope
 * depth it was made in; kn_scope_end frees the handles of the scope it
 * closes, and a storage goes when its last view goes.
 */
#include <string.h>

#include "core.h"

static void link_live(kn_ctx *ctx, kn_tensor *t)
{
    t->next = ctx->live;
    if (ctx->live) ctx->live->prev = t;
    ctx->live = t;
    t->scope = ctx->scope;
    ctx->live_tensors++;
}

/* Sizes of a tensor that holds elements fit int64 (tensor_check_size); an
 * empty tensor's other dims may not, so products wrap (unsigned) instead of
 * overflowing, and their meaningless values are never used. */
int64_t tensor_numel(int ndim, const int64_t *shape)
{
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (uint64_t)shape[i];
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) return 0;
    return (int64_t)n;
}

void tensor_contig_strides(int ndim, const int64_t *shape, int64_t *stride)
{
    uint64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = (int64_t)s;
        s *= shape[i] > 1 ? (uint64_t)shape[i] : 1;
    }
}

/* Byte size of a contiguous tensor, or an error when a size is negative or
 * the product overflows. Returns 1 if fine. */
int tensor_check_size(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, size_t *bytes)
{
    if (ndim < 0 || ndim > KN_MAX_DIMS) {
        kn_err(ctx, KN_EINVAL, "%d dims: kiln supports 0 to %d", ndim, KN_MAX_DIMS);
        return 0;
    }
    if ((unsigned)dt >= KN_NDTYPES) {
        kn_err(ctx, KN_EDTYPE, "dtype code %d is not a kn_dtype", (int)dt);
        return 0;
    }
    if (ndim > 0 && !shape) {
        kn_err(ctx, KN_EINVAL, "operand 'shape' is NULL for %d dims", ndim);
        return 0;
    }
    size_t n = kn_dtype_size(dt);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            kn_err(ctx, KN_ESHAPE, "dim %d has negative size %lld", i, (long long)shape[i]);
            return 0;
        }
        if ((uint64_t)shape[i] > SIZE_MAX || kn_mul_overflows(n, (size_t)shape[i], &n) ||
            n > (size_t)INT64_MAX) {
            kn_err(ctx, KN_ENOMEM, "shape overflows: dim %d makes the byte size exceed %zu", i,
                   (size_t)SIZE_MAX);
            return 0;
        }
    }
    *bytes = n;
    return 1;
}

static kn_tensor *new_handle(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape)
{
    kn_tensor *t = kn_alloc(ctx, sizeof *t);
    if (!t) return kn_err(ctx, KN_ENOMEM, "out of memory for a tensor handle");
    memset(t, 0, sizeof *t);
    t->dtype = (uint8_t)dt;
    t->ndim = (uint8_t)ndim;
    if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    link_live(ctx, t);
    return t;
}

/* A storage's bytes start at a 64-byte boundary, so that a vector load or
 * store of a compiled kernel never splits two cache lines (libc gives 16: a
 * large block is a fresh mapping plus a 16-byte header; split lines slow the
 * row kernels of kiln bench ops, softmax and layer_norm, markedly).
 * The allocation is bytes + DATA_ALIGN; the byte before the data holds the
 * distance back to its start (1 to 64), so the pointer alone frees it, and
 * storages may exchange their data (capture.c take_storage). */
enum { DATA_ALIGN = 64 };

/* ---- freed storage kept for reuse ----
 * An eager step frees and allocates the same sizes over and over, and a
 * large block from libc is a fresh mapping each time, whose pages the
 * kernel faults in and clears again at first touch: a ResNet-18 step in
 * eager mode spent most of its time there. A context keeps up to
 * KN_CACHE_BLOCKS freed blocks of CACHE_MIN bytes or more, CACHE_BYTES in
 * all, and hands one back to an allocation of exactly its size; the oldest
 * goes first when there is no room. A zeroed allocation clears a block it
 * reuses. kn_ctx_free frees them (storage_cache_flush). */
enum { CACHE_MIN = 256 << 10 };
#define CACHE_BYTES ((size_t)512 << 20)

static unsigned char *cache_take(kn_ctx *ctx, size_t bytes)
{
    for (int i = ctx->ncache; KN_CACHE_ON && bytes >= CACHE_MIN && i-- > 0;) { /* the newest first */
        if (ctx->cache_bytes[i] != bytes) continue;
        unsigned char *raw = ctx->cache_raw[i];
        ctx->cache_total -= bytes;
        memmove(&ctx->cache_raw[i], &ctx->cache_raw[i + 1], (size_t)(ctx->ncache - i - 1) * sizeof *ctx->cache_raw);
        memmove(&ctx->cache_bytes[i], &ctx->cache_bytes[i + 1], (size_t)(ctx->ncache - i - 1) * sizeof *ctx->cache_bytes);
        ctx->ncache--;
        return raw;
    }
    return NULL;
}

static void cache_drop_oldest(kn_ctx *ctx)
{
    kn_dealloc(ctx, ctx->cache_raw[0], ctx->cache_bytes[0]);
    ctx->cache_total -= ctx->cache_bytes[0];
    ctx->ncache--;
    memmove(&ctx->cache_raw[0], &ctx->cache_raw[1], (size_t)ctx->ncache * sizeof *ctx->cache_raw);
    memmove(&ctx->cache_bytes[0], &ctx->cache_bytes[1], (size_t)ctx->ncache * sizeof *ctx->cache_bytes);
}

/* raw (an allocation of bytes) kept for reuse, or freed */
static void cache_put(kn_ctx *ctx, unsigned char *raw, size_t bytes)
{
    if (!KN_CACHE_ON || bytes < CACHE_MIN || bytes > CACHE_BYTES) {
        kn_dealloc(ctx, raw, bytes);
        return;
    }
    while (ctx->ncache && (ctx->ncache == KN_CACHE_BLOCKS || ctx->cache_total + bytes > CACHE_BYTES))
        cache_drop_oldest(ctx);
    ctx->cache_raw[ctx->ncache] = raw, ctx->cache_bytes[ctx->ncache++] = bytes;
    ctx->cache_total += bytes;
}

void storage_cache_flush(kn_ctx *ctx)
{
    while (ctx->ncache) cache_drop_oldest(ctx);
}

static void *data_alloc(kn_ctx *ctx, size_t bytes, int zeroed)
{
    if (!bytes || bytes > SIZE_MAX - DATA_ALIGN) return NULL;
    unsigned char *raw = cache_take(ctx, bytes + DATA_ALIGN);
    if (raw && zeroed) memset(raw, 0, bytes + DATA_ALIGN);
    if (!raw) raw = zeroed ? kn_alloc_zeroed(ctx, bytes + DATA_ALIGN) : kn_alloc(ctx, bytes + DATA_ALIGN);
    if (!raw) return NULL;
    size_t shift = DATA_ALIGN - (uintptr_t)raw % DATA_ALIGN;
    raw[shift - 1] = (unsigned char)shift;
    return raw + shift;
}

static void data_free(kn_ctx *ctx, void *data, size_t bytes)
{
    if (!data) return;
    unsigned char *d = data;
    cache_put(ctx, d - d[-1], bytes + DATA_ALIGN);
}

static kn_tensor *new_tensor(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, int zeroed)
{
    size_t bytes;
    if (!tensor_check_size(ctx, dt, ndim, shape, &bytes)) return NULL;
    Storage *st = kn_alloc(ctx, sizeof *st);
    void *data = data_alloc(ctx, bytes, zeroed);
    if (!st || (bytes && !data)) {
        kn_dealloc(ctx, st, sizeof *st);
        data_free(ctx, data, bytes);
        return kn_err(ctx, KN_ENOMEM, "out of memory allocating %zu bytes", bytes);
    }
    st->data = data;
    st->bytes = bytes;
    st->refs = 1;
    st->borrowed = 0;
    storage_stamp(ctx, st);
    kn_tensor *t = new_handle(ctx, dt, ndim, shape);
    if (!t) {
        data_free(ctx, data, bytes);
        kn_dealloc(ctx, st, sizeof *st);
        return NULL;
    }
    t->st = st;
    tensor_contig_strides(ndim, shape, t->stride);
    ctx->live_bytes += bytes;
    return t;
}

kn_tensor *tensor_new(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape)
{
    return new_tensor(ctx, dt, ndim, shape, 0);
}

kn_tensor *tensor_new_zeroed(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape)
{
    return new_tensor(ctx, dt, ndim, shape, 1);
}

kn_tensor *tensor_view(kn_ctx *ctx, kn_tensor *base, int ndim, const int64_t *shape,
                       const int64_t *stride, int64_t offset)
{
    kn_tensor *t = new_handle(ctx, (kn_dtype)base->dtype, ndim, shape);
    if (!t) return NULL;
    if (ndim) memcpy(t->stride, stride, (size_t)ndim * sizeof *stride);
    t->offset = offset;
    t->st = base->st;
    t->node = base->node;
    t->trace_serial = base->trace_serial;
    t->view_root = base->st ? 0 : base->view_root;
    if (t->st) t->st->refs++;
    return t;
}

kn_tensor *tensor_symbolic(kn_ctx *ctx, kn_dtype dt, int ndim, const Dim *shape, uint32_t node)
{
    kn_tensor *t = new_handle(ctx, dt, ndim, shape);
    if (!t) return NULL;
    t->node = node;
    for (int d = 0; d < ndim; d++)
        if (DIM_IS_SYM(shape[d])) return t;
    tensor_contig_strides(ndim, shape, t->stride); /* the layout eager's fresh tensor would have */
    return t;
}

void *tensor_ptr(const kn_tensor *t, int64_t elem_offset)
{
    return (char *)t->st->data + (size_t)elem_offset * kn_dtype_size((kn_dtype)t->dtype);
}

int tensor_check(kn_ctx *ctx, kn_tensor *t, const char *operand)
{
    if (!t) {
        kn_err_null(ctx, operand);
        return 0;
    }
    return 1;
}

int tensor_norm_dim(kn_ctx *ctx, int dim, int ndim, const char *what)
{
    int n = ndim > 0 ? ndim : 1; /* a 0-d tensor accepts dims 0 and -1, as PyTorch */
    if (dim < -n || dim >= n) {
        kn_err(ctx, KN_EINVAL, "%s %d out of range for a %d-dim tensor (expected %d to %d)", what, dim,
               ndim, -n, n - 1);
        return -1;
    }
    return dim < 0 ? dim + n : dim;
}

void storage_stamp(kn_ctx *ctx, Storage *st)
{
    if (st) st->stamp = ++ctx->clock;
}

static void storage_release(kn_ctx *ctx, Storage *st)
{
    if (st && --st->refs == 0) {
        if (!st->borrowed) {
            ctx->live_bytes -= st->bytes;
            data_free(ctx, st->data, st->bytes);
        }
        kn_dealloc(ctx, st, sizeof *st);
    }
}

/* A contiguous tensor over memory someone else owns and frees. */
kn_tensor *tensor_borrow(kn_ctx *ctx, void *data, kn_dtype dt, int ndim, const int64_t *shape)
{
    Storage *st = kn_alloc(ctx, sizeof *st);
    if (!st) return kn_err(ctx, KN_ENOMEM, "out of memory for a tensor handle");
    kn_tensor *t = new_handle(ctx, dt, ndim, shape);
    if (!t) {
        kn_dealloc(ctx, st, sizeof *st);
        return NULL;
    }
    st->data = data;
    st->bytes = (size_t)tensor_numel(ndim, shape) * kn_dtype_size(dt);
    st->refs = 1;
    st->borrowed = 1;
    storage_stamp(ctx, st);
    t->st = st;
    tensor_contig_strides(ndim, shape, t->stride);
    return t;
}

static void unlink_live(kn_ctx *ctx, kn_tensor *t)
{
    if (t->prev) t->prev->next = t->next;
    else ctx->live = t->next;
    if (t->next) t->next->prev = t->prev;
    t->prev = t->next = NULL;
    ctx->live_tensors--;
}

void kn_free(kn_ctx *ctx, kn_tensor *t)
{
    if (!ctx || !t || (t->flags & (TF_GRAD | TF_OWNED))) return;
    unlink_live(ctx, t);
    if ((t->flags & TF_REQGRAD) && !t->tape_seq) autodiff_forget_leaf(ctx, t);
    if (t->grad) {
        t->grad->flags &= (uint8_t)~TF_GRAD;
        kn_free(ctx, t->grad);
    }
    storage_release(ctx, t->st);
    kn_dealloc(ctx, t, sizeof *t);
}

/* A handle owned by the autodiff tape: it shares t's storage (keeping it
 * alive) but is on no scope's list, so only its owner frees it. */
kn_tensor *tensor_hold(kn_ctx *ctx, const kn_tensor *t)
{
    kn_tensor *h = kn_alloc(ctx, sizeof *h);
    if (!h) return kn_err(ctx, KN_ENOMEM, "out of memory for the autodiff tape");
    *h = *t;
    h->prev = h->next = NULL;
    h->grad = NULL;
    h->scope = -1;
    if (h->st) h->st->refs++;
    return h;
}

void tensor_unhold(kn_ctx *ctx, kn_tensor *h)
{
    if (!h) return;
    storage_release(ctx, h->st);
    kn_dealloc(ctx, h, sizeof *h);
}

kn_tensor *tensor_own(kn_ctx *ctx, kn_tensor *t)
{
    if (!t) return NULL;
    unlink_live(ctx, t);
    t->scope = -1;
    t->flags |= TF_OWNED | TF_KEPT;
    return t;
}

void tensor_rebind(kn_ctx *ctx, kn_tensor *h, const kn_tensor *v)
{
    if (v->st) v->st->refs++; /* first: v may be h itself */
    storage_release(ctx, h->st);
    h->st = v->st;
    h->dtype = v->dtype;
    h->ndim = v->ndim;
    memcpy(h->shape, v->shape, sizeof h->shape);
    memcpy(h->stride, v->stride, sizeof h->stride);
    h->offset = v->offset;
}

kn_tensor *kn_keep(kn_ctx *ctx, kn_tensor *t)
{
    if (ctx && t) {
        t->scope = 0;
        t->flags |= TF_KEPT;
    }
    return t;
}

/* ---- reading ---- */

int kn_ndim(const kn_tensor *t) { return t ? t->ndim : -1; }
const int64_t *kn_shape(const kn_tensor *t) { return t ? t->shape : NULL; }
const int64_t *kn_strides(const kn_tensor *t) { return t ? t->stride : NULL; }
kn_dtype kn_dtype_of(const kn_tensor *t) { return t ? (kn_dtype)t->dtype : KN_F32; }
int64_t kn_numel(const kn_tensor *t) { return t ? tensor_numel(t->ndim, t->shape) : -1; }

int kn_is_contiguous(const kn_tensor *t)
{
    if (!t) return 0;
    if (tensor_numel(t->ndim, t->shape) == 0) return 1; /* no elements, whatever the strides: as PyTorch */
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return 0;
        s *= t->shape[i];
    }
    return 1;
}

/* Copies t row-major into dst, element by element in t's dtype. */
static void copy_out(const kn_tensor *t, char *dst)
{
    size_t es = kn_dtype_size((kn_dtype)t->dtype);
    int64_t n = tensor_numel(t->ndim, t->shape), idx[KN_MAX_DIMS] = {0}, off = t->offset;
    for (int64_t k = 0; k < n; k++) {
        memcpy(dst + (size_t)k * es, tensor_ptr(t, off), es);
        for (int d = t->ndim - 1; d >= 0; d--) {
            off += t->stride[d];
            if (++idx[d] < t->shape[d]) break;
            off -= t->stride[d] * t->shape[d];
            idx[d] = 0;
        }
    }
}

static int check_concrete(kn_ctx *ctx, kn_tensor *t, const char *op)
{
    if (!tensor_check(ctx, t, "t")) return 0;
    if (ctx->capture) return ctx->capture->read(ctx, t, op) == KN_OK; /* traced: a break; concrete: a guard */
    if (!t->st) {
        kn_err(ctx, KN_EUNSUPPORTED, "tensor is symbolic (being traced): its values are not known yet");
        return 0;
    }
    return 1;
}

kn_status kn_read(kn_ctx *ctx, kn_tensor *t, void *dst, size_t bytes)
{
    if (!ctx) return KN_EINVAL;
    const char *saved = op_enter(ctx, "kn_read");
    kn_status s = KN_OK;
    size_t need = (size_t)kn_numel(t) * kn_dtype_size(kn_dtype_of(t));
    if (!check_concrete(ctx, t, "kn_read")) s = ctx->status;
    else if (!dst && need) s = kn_errs(ctx, KN_EINVAL, "operand 'dst' is NULL");
    else if (bytes < need)
        s = kn_errs(ctx, KN_EINVAL, "destination holds %zu bytes, the %s tensor needs %zu", bytes,
                    kn_dtype_name(kn_dtype_of(t)), need);
    else copy_out(t, dst);
    op_leave(ctx, saved);
    return s;
}

kn_status kn_item(kn_ctx *ctx, kn_tensor *t, double *out)
{
    if (!ctx) return KN_EINVAL;
    const char *saved = op_enter(ctx, "kn_item");
    kn_status s = KN_OK;
    if (!check_concrete(ctx, t, "kn_item")) s = ctx->status;
    else if (!out) s = kn_errs(ctx, KN_EINVAL, "operand 'out' is NULL");
    else if (kn_numel(t) != 1)
        s = kn_errs(ctx, KN_ESHAPE, "tensor has %lld elements, expected exactly 1", (long long)kn_numel(t));
    else *out = dt_load((kn_dtype)t->dtype, tensor_ptr(t, t->offset));
    op_leave(ctx, saved);
    return s;
}

/* ---- creation ---- */

kn_tensor *kn_tensor_from(kn_ctx *ctx, kn_dtype dt, int ndim, const int64_t *shape, const void *data)
{
    ENTER(ctx, "kn_tensor_from");
    kn_tensor *t = tensor_new(ctx, dt, ndim, shape);
    if (t && t->st->bytes) {
        if (!data) {
            kn_free(ctx, t);
            return LEAVE(ctx, kn_err(ctx, KN_EINVAL, "operand 'data' is NULL"));
        }
        memcpy(t->st->data, data, t->st->bytes);
    }
    return LEAVE(ctx, t);
}

kn_tensor *kn_scalar(kn_ctx *ctx, double v)
{
    ENTER(ctx, "kn_scalar");
    kn_tensor *t = tensor_new(ctx, KN_F64, 0, NULL);
    if (t) {
        dt_store(KN_F64, t->st->data, v);
        t->flags |= TF_WRAPPED;
    }
    return LEAVE(ctx, t);
}

kn_tensor *kn_scalar_int(kn_ctx *ctx, int64_t v)
{
    ENTER(ctx, "kn_scalar_int");
    kn_tensor *t = tensor_new(ctx, KN_I64, 0, NULL);
    if (t) {
        dt_store_i(KN_I64, t->st->data, v);
        t->flags |= TF_WRAPPED;
    }
    return LEAVE(ctx, t);
}

int tensor_same_layout(const kn_tensor *a, const kn_tensor *b)
{
    return a->dtype == b->dtype && a->ndim == b->ndim && a->offset == b->offset &&
           memcmp(a->shape, b->shape, a->ndim * sizeof *a->shape) == 0 &&
           memcmp(a->stride, b->stride, a->ndim * sizeof *a->stride) == 0;
}
