/*
 * ctx.c — the context: the allocator hook, errors, logging, the op-name
 * stack used in messages, and scopes.
 *
 * Errors: bad input sets ctx->status and a message "kn_OP: what was wrong"
 * and the op returns NULL (or a status). The message of the first failure in
 * a nested call survives: a NULL operand does not overwrite a pending error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "../port/port.h"

void kn_assert_fail(const char *file, int line, const char *cond)
{
    char buf[256];
    snprintf(buf, sizeof buf, "kiln: internal error at %s:%d: %s", file, line, cond);
    port_log(buf);
    abort();
}

/* A block of LARGE_BLOCK bytes or more from libc is a fresh mapping whose
 * pages the kernel faults in at first touch, one 4 KiB page at a time: in a
 * virtual machine each fault costs microseconds, and a compiled ResNet-18
 * step's first run (a 160 MiB arena, gradients, Adam's state: 90,000
 * faults) spent much of its time there. The port may map such a block in
 * large pages instead (port_advise_large). */
enum { LARGE_BLOCK = 4 << 20 };

static void *large(void *p, size_t n)
{
    if (p && n >= LARGE_BLOCK) port_advise_large(p, n);
    return p;
}

static void *libc_alloc(void *user, void *ptr, size_t osize, size_t nsize)
{
    (void)user;
    (void)osize;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    return large(realloc(ptr, nsize), nsize); /* realloc(NULL, n) is malloc(n) */
}

void *kn_alloc(kn_ctx *ctx, size_t n) { return n ? ctx->alloc(ctx->alloc_user, NULL, 0, n) : NULL; }

/* calloc where the hook is libc's: a large block is fresh pages from the
 * kernel, zero already, which are then touched only where written (Adam's
 * state of a large model costs no page faults until its first step) */
void *kn_alloc_zeroed(kn_ctx *ctx, size_t n)
{
    if (ctx->alloc == libc_alloc) return n ? large(calloc(1, n), n) : NULL;
    void *p = kn_alloc(ctx, n);
    if (p) memset(p, 0, n);
    return p;
}

void *kn_realloc(kn_ctx *ctx, void *p, size_t o, size_t n) { return ctx->alloc(ctx->alloc_user, p, o, n); }

void kn_dealloc(kn_ctx *ctx, void *p, size_t n)
{
    if (p) ctx->alloc(ctx->alloc_user, p, n, 0);
}

void *ctx_scratch(void *owner, size_t bytes)
{
    kn_ctx *ctx = owner;
    if (bytes > ctx->scratch_bytes) {
        kn_dealloc(ctx, ctx->scratch, ctx->scratch_bytes ? ctx->scratch_bytes + 64 : 0);
        ctx->scratch_bytes = (ctx->scratch = kn_alloc(ctx, bytes + 64)) ? bytes : 0;
        if (!ctx->scratch) return NULL;
    }
    return (char *)ctx->scratch + (64 - (uintptr_t)ctx->scratch % 64) % 64;
}

int kn_mul_overflows(size_t a, size_t b, size_t *out)
{
    if (a && b > SIZE_MAX / a) return 1;
    *out = a * b;
    return 0;
}

kn_ctx *ctx_new(const kn_ctx_opts *opts)
{
    kn_alloc_fn fn = opts && opts->alloc ? opts->alloc : libc_alloc;
    void *user = opts ? opts->alloc_user : NULL;
    kn_ctx *ctx = fn(user, NULL, 0, sizeof *ctx);
    if (!ctx) return NULL;
    memset(ctx, 0, sizeof *ctx);
    ctx->alloc = fn;
    ctx->alloc_user = user;
    ctx->rng[0] = opts ? opts->seed : 0;
    ctx->grad_enabled = 1;
    log_init(ctx);
    ctx->eager_backend = KN_BACKEND_INTERP;
    return ctx;
}

void kn_ctx_free(kn_ctx *ctx)
{
    if (!ctx) return;
    autodiff_release(ctx);
    for (kn_tensor *t = ctx->live; t; t = t->next) { /* grads go as ordinary tensors */
        t->grad = NULL;
        t->flags &= (uint8_t)~TF_GRAD;
    }
    while (ctx->live) kn_free(ctx, ctx->live);
    if (ctx->trace) graph_free(ctx->trace);
    for (int i = 0; i < 2; i++) tensor_unhold(ctx, ctx->rng_t[i]);
    if (ctx->eager_hooks) ctx->eager_hooks->release(ctx);
    storage_cache_flush(ctx);
    kn_dealloc(ctx, ctx->scratch, ctx->scratch_bytes ? ctx->scratch_bytes + 64 : 0);
    ctx->alloc(ctx->alloc_user, ctx, sizeof *ctx, 0);
}

const char *kn_last_error(const kn_ctx *ctx)
{
    if (!ctx) return "kiln: NULL context (kn_ctx_new failed or was not called)";
    return ctx->err;
}

kn_status kn_last_status(const kn_ctx *ctx) { return ctx ? ctx->status : KN_EINVAL; }

void kn_clear_error(kn_ctx *ctx)
{
    if (!ctx) return;
    ctx->status = KN_OK;
    ctx->err[0] = 0;
}

void kn_set_log(kn_ctx *ctx, void (*fn)(void *user, const char *line), void *user)
{
    if (!ctx) return;
    ctx->log = fn;
    ctx->log_user = user;
}

kn_tensor *const *ctx_rng(kn_ctx *ctx)
{
    for (int i = 0; i < 2; i++)
        if (!ctx->rng_t[i] && !(ctx->rng_t[i] = tensor_own(ctx, tensor_borrow(ctx, &ctx->rng[i], KN_I64, 0, NULL))))
            return NULL;
    return ctx->rng_t;
}

/* Key := seed, counter := 0. Inside a body kn_call traces, the two are writes the program replays at
 * every call (as a draw's advance is), from constants the entry holds. */
void kn_manual_seed(kn_ctx *ctx, uint64_t seed)
{
    if (!ctx) return;
    if (ctx->capture) {
        const char *saved = op_enter(ctx, "kn_manual_seed");
        kn_tensor *const *rng = ctx_rng(ctx);
        int64_t v[2] = {(int64_t)seed, 0};
        for (int i = 0; i < 2 && rng && !ctx->status; i++) {
            kn_tensor *c = kn_tensor_from(ctx, KN_I64, 0, NULL, &v[i]);
            if (c) tensor_assign(ctx, rng[i], c);
        }
        op_leave(ctx, saved);
        return;
    }
    ctx->rng[0] = seed;
    ctx->rng[1] = 0;
    for (int i = 0; i < 2; i++)
        if (ctx->rng_t[i]) storage_stamp(ctx, ctx->rng_t[i]->st);
}

static kn_status verr(kn_ctx *ctx, kn_status s, const char *fmt, va_list ap)
{
    int n = 0;
    if (ctx->op) n = snprintf(ctx->err, sizeof ctx->err, "%s: ", ctx->op);
    if (n < 0 || (size_t)n >= sizeof ctx->err) n = 0;
    vsnprintf(ctx->err + n, sizeof ctx->err - (size_t)n, fmt, ap);
    ctx->status = s;
    return s;
}

void *kn_err(kn_ctx *ctx, kn_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verr(ctx, s, fmt, ap);
    va_end(ap);
    return NULL;
}

kn_status kn_errs(kn_ctx *ctx, kn_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verr(ctx, s, fmt, ap);
    va_end(ap);
    return s;
}

void *kn_err_null(kn_ctx *ctx, const char *operand)
{
    if (ctx->status != KN_OK) return NULL; /* an earlier failure made the NULL */
    return kn_err(ctx, KN_EINVAL, "operand '%s' is NULL", operand);
}

int optional_ok(const kn_ctx *ctx, const kn_tensor *t) { return t != NULL || ctx->status == KN_OK; }

const char *op_enter(kn_ctx *ctx, const char *name)
{
    const char *saved = ctx->op;
    ctx->public_ops++;
    if (!saved) ctx->op = name;
    return saved;
}

void op_leave(kn_ctx *ctx, const char *saved) { ctx->op = saved; }

kn_tensor *op_leave_with(kn_ctx *ctx, const char *saved, kn_tensor *v)
{
    ctx->op = saved;
    return v;
}

/* snprintf onto the end of buf's text at len: returns the new length, which
 * keeps counting past cap so callers learn the size they need. */
size_t kn_appendf(char *buf, size_t cap, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0, fmt, ap);
    va_end(ap);
    return len + (n > 0 ? (size_t)n : 0);
}

/* ---- scopes ---- */

void kn_scope_begin(kn_ctx *ctx)
{
    if (!ctx) return;
    autodiff_scope_begin(ctx);
    ctx->scope++;
}

void kn_scope_end(kn_ctx *ctx)
{
    if (!ctx || ctx->scope == 0) return;
    kn_tensor *t = ctx->live, *next;
    for (; t; t = next) {
        next = t->next;
        if (t->scope >= ctx->scope) kn_free(ctx, t);
    }
    ctx->scope--;
    autodiff_scope_end(ctx);
}

size_t kn_live_bytes(const kn_ctx *ctx) { return ctx ? ctx->live_bytes : 0; }
size_t kn_live_tensors(const kn_ctx *ctx) { return ctx ? ctx->live_tensors : 0; }
