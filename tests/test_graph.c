/*
 * test_graph.c — the graph core: tracing records primitives, identical
 * nodes are interned into one, the text dump is stable, and the verifier
 * rejects a node whose recorded shape or sources are wrong.
 */
#include "test.h"
#include "../src/core.h"

static const char *golden =
    "%1 = input f32 (3) [0]\n" /* inputs enter the graph at first use */
    "%2 = reshape f32 (1,3) %1 [1,3]\n"
    "%3 = expand f32 (2,3) %2 [2,3]\n"
    "%4 = input f32 (2,3) [1]\n"
    "%5 = add f32 (2,3) %4 %3\n"
    "%6 = exp f32 (2,3) %5\n";

static void test_trace_and_intern(kn_ctx *ctx)
{
    int64_t s23[2] = {2, 3}, s3 = 3;
    kn_tensor *x = kn_zeros(ctx, KN_F32, 2, s23), *b = kn_zeros(ctx, KN_F32, 1, &s3);
    ctx->trace = graph_new(ctx);
    CHECK(ctx->trace != NULL);
    kn_tensor *y1 = kn_exp(ctx, kn_add(ctx, x, b));
    kn_tensor *y2 = kn_exp(ctx, kn_add(ctx, x, b));
    CHECK(y1 && y2 && y1->node == y2->node); /* interned: CSE for free */
    CHECK(y1 && y1->st == NULL);             /* symbolic while tracing */
    CHECK(ctx->trace->n == 7);
    char buf[1024];
    size_t len = graph_dump(ctx->trace, buf, sizeof buf);
    CHECK(len == strlen(golden));
    CHECK_MSG(strcmp(buf, golden) == 0, "dump was:\n%s", buf);
    CHECK(graph_verify(ctx, ctx->trace) == 0);

    /* truncated dumps report the full length, snprintf-style */
    char small[8];
    CHECK(graph_dump(ctx->trace, small, sizeof small) == len && strlen(small) == 7);

    /* corrupt: the add claims a shape its rule does not give */
    ctx->trace->nodes[5].shape[1] = 4;
    CHECK(graph_verify(ctx, ctx->trace) != 0);
    CHECK_ERR(ctx, "verify: node %5");
    ctx->trace->nodes[5].shape[1] = 3;
    /* corrupt: a source that does not precede its user */
    ctx->trace->nodes[2].src[0] = 6;
    CHECK(graph_verify(ctx, ctx->trace) != 0);
    CHECK_ERR(ctx, "does not precede");
    graph_free(ctx->trace);
    ctx->trace = NULL;
}

static void test_many_nodes(kn_ctx *ctx)
{
    /* enough nodes to grow the node array and rehash several times */
    int64_t s = 4;
    kn_scope_begin(ctx);
    kn_tensor *x = kn_zeros(ctx, KN_F32, 1, &s);
    ctx->trace = graph_new(ctx);
    kn_tensor *y = x;
    for (int i = 0; i < 3000; i++) y = kn_add(ctx, y, kn_scalar(ctx, (double)i));
    CHECK(y != NULL);
    CHECK(graph_verify(ctx, ctx->trace) == 0);
    uint32_t n = ctx->trace->n;
    y = x;
    for (int i = 0; i < 3000; i++) y = kn_add(ctx, y, kn_scalar(ctx, (double)i));
    CHECK(ctx->trace->n > n); /* wrapped scalars are fresh inputs: no false sharing */
    graph_free(ctx->trace);
    ctx->trace = NULL;
    kn_scope_end(ctx);
}

static void test_arena(kn_ctx *ctx)
{
    Arena a;
    arena_init(&a, ctx);
    char *p = arena_alloc(&a, 10);
    CHECK(p && ((uintptr_t)p & 15) == 0 && p[9] == 0);
    char *big = arena_alloc(&a, 1 << 20); /* larger than a block */
    CHECK(big && big[(1 << 20) - 1] == 0);
    char *q = arena_grow(&a, p, 10, 100);
    CHECK(q && q != p);
    arena_free(&a);
    CHECK(a.total == 0 && a.head == NULL);
}

/* kn_hash, which the interning tables index by its low bits: equal bytes
 * hash equal, every byte counts (the tail after whole words too), and keys
 * that differ in one field of a node (a source id, a dim) spread over the
 * low 13 bits about as random ones would (4096 keys into 8192 slots: ~3200
 * distinct; a hash that left the low bits to one byte would give far fewer). */
static void test_hash(void)
{
    Node a, b;
    memset(&a, 0, sizeof a);
    a.op = OP_ADD, a.ndim = 2, a.shape[0] = 4, a.shape[1] = 8, a.src[0] = 1, a.src[1] = 2;
    b = a;
    CHECK(kn_hash(&a, sizeof a) == kn_hash(&b, sizeof b));
    unsigned char bytes[13] = {0};
    uint64_t h13 = kn_hash(bytes, 13);
    for (int i = 0; i < 13; i++) {
        bytes[i] = 1;
        CHECK_MSG(kn_hash(bytes, 13) != h13, "byte %d", i);
        bytes[i] = 0;
    }
    CHECK(kn_hash(bytes, 12) != h13);
    static unsigned char seen[8192];
    for (int field = 0; field < 3; field++) {
        int distinct = 0;
        memset(seen, 0, sizeof seen);
        for (uint32_t i = 0; i < 4096; i++) {
            b = a;
            if (field == 0) b.src[0] = i;
            else if (field == 1) b.shape[1] = (Dim)i * 64;
            else b.p.i[0] = (int64_t)i << 20;
            uint32_t k = (uint32_t)kn_hash(&b, sizeof b) & 8191;
            distinct += !seen[k];
            seen[k] = 1;
        }
        CHECK_MSG(distinct > 2900, "field %d: %d distinct slots of 8192 for 4096 keys", field, distinct);
    }
}

/* an allocator hook that counts the bytes it holds */
static void *counting(void *user, void *ptr, size_t osize, size_t nsize)
{
    size_t *held = user;
    *held += nsize - osize * (ptr != NULL);
    if (!nsize) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, nsize);
}

/* A graph holds its node array and hash table once: grown in place, not a
 * copy per doubling left in the arena (the sum of all the sizes it had) */
static void test_graph_memory(void)
{
    size_t held = 0;
    kn_ctx *ctx = kn_ctx_new(&(kn_ctx_opts){.alloc = counting, .alloc_user = &held});
    if (!CHECK(ctx != NULL)) return;
    size_t base = held;
    Graph *g = graph_new(ctx);
    Node n;
    memset(&n, 0, sizeof n);
    n.op = OP_FULL, n.dtype = KN_F32;
    int added = 0;
    for (int i = 0; i < 20000 && g; i++) {
        n.p.f = i; /* each its own node */
        added += graph_add(g, &n) == (uint32_t)i + 1;
    }
    CHECK(added == 20000);
    size_t want = g ? g->cap * sizeof(Node) + g->hcap * sizeof(uint32_t) : 0;
    CHECK_MSG(g && held - base < want + (256 << 10), "a graph of %u nodes holds %zu bytes; its node array and hash "
              "table are %zu", g ? g->n : 0, held - base, want);
    graph_free(g);
    CHECK_MSG(held == base, "%zu bytes left after graph_free", held - base);
    kn_ctx_free(ctx);
}

int main(void)
{
    test_graph_memory();
    test_hash();
    kn_ctx *ctx = kn_ctx_new(NULL);
    test_trace_and_intern(ctx);
    test_many_nodes(ctx);
    test_arena(ctx);
    kn_ctx_free(ctx);
    TEST_END("graph");
}
