/*
 * arena.c — bump allocation for compile-time structures (graphs, IR,
 * plans). Blocks come from the context's allocator hook; arena_free returns
 * all of them at once. Memory from an arena is zeroed and 16-byte aligned.
 */
#include <string.h>

#include "core.h"

struct ArenaBlock {
    ArenaBlock *next;
    size_t size, used;
    /* data follows, aligned to 16 */
};

#define HDR ((sizeof(ArenaBlock) + 15) & ~(size_t)15)
#define MIN_BLOCK (64 * 1024)

void arena_init(Arena *a, kn_ctx *ctx)
{
    memset(a, 0, sizeof *a);
    a->ctx = ctx;
}

static ArenaBlock *new_block(Arena *a, size_t need)
{
    size_t size = need > MIN_BLOCK ? need : MIN_BLOCK;
    if (size > SIZE_MAX - HDR) return NULL;
    ArenaBlock *b = kn_alloc(a->ctx, HDR + size);
    if (!b) return NULL;
    b->size = size;
    b->used = 0;
    b->next = a->head;
    a->head = b;
    a->total += HDR + size;
    return b;
}

void *arena_alloc(Arena *a, size_t n)
{
    if (n > SIZE_MAX - 15) return NULL;
    n = (n + 15) & ~(size_t)15;
    ArenaBlock *b = a->head;
    if (!b || b->size - b->used < n) b = new_block(a, n);
    if (!b) return NULL;
    char *p = (char *)b + HDR + b->used;
    b->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void *arena_grow(Arena *a, void *p, size_t o, size_t n)
{
    if (n <= o) return p;
    void *q = arena_alloc(a, n);
    if (q && p) memcpy(q, p, o);
    return q;
}

void arena_free(Arena *a)
{
    ArenaBlock *b = a->head, *next;
    for (; b; b = next) {
        next = b->next;
        kn_dealloc(a->ctx, b, HDR + b->size);
    }
    a->head = NULL;
    a->used = a->total = 0;
}
