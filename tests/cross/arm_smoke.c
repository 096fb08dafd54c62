/*
 * arm_smoke.c — kiln on a Cortex-M4F under QEMU (mps2-an386), through the
 * bare-metal port: a context whose every byte comes from a static buffer,
 * a 2x2 add and matmul checked against hand-computed values, the port's
 * no-file and log hooks. Prints "arm_smoke: P passed, F failed" over
 * semihosting; main's return is QEMU's exit status.
 */
#include <stdint.h>

#include "../test.h"
#include "../../port/port.h"

/* A bump allocator over a static buffer, as a board without malloc would
 * give kiln: frees of the newest block are given back, others are leaked. */
static unsigned char heap[256 * 1024] __attribute__((aligned(16)));
static size_t heap_top, heap_peak;
static int heap_refused;

static void *bump_alloc(void *user, void *ptr, size_t osize, size_t nsize)
{
    (void)user;
    unsigned char *p = ptr;
    size_t ocap = (osize + 15) & ~(size_t)15, ncap = (nsize + 15) & ~(size_t)15;
    int newest = p && p + ocap == heap + heap_top;
    if (nsize == 0) {
        if (newest) heap_top -= ocap;
        return NULL;
    }
    if (newest) { /* grow or shrink in place */
        if (heap_top - ocap + ncap > sizeof heap) { heap_refused++; return NULL; }
        heap_top = heap_top - ocap + ncap;
        if (heap_top > heap_peak) heap_peak = heap_top;
        return p;
    }
    if (ncap < nsize || ncap > sizeof heap - heap_top) { heap_refused++; return NULL; }
    unsigned char *q = heap + heap_top;
    heap_top += ncap;
    if (heap_top > heap_peak) heap_peak = heap_top;
    if (p) memcpy(q, p, osize < nsize ? osize : nsize);
    return q;
}

/* The board's log sink overrides the port's weak default. */
static int board_lines;
void kn_board_log(const char *s);
void kn_board_log(const char *s)
{
    board_lines++;
    printf("board log: %s\n", s);
}

static void test_port(void)
{
    void *data = NULL;
    size_t size = 0;
    char why[128] = "";
    CHECK(strcmp(port_name(), "baremetal") == 0);
    CHECK(port_ncpu() == 1);
    CHECK(port_read_file("tests/ref/x", &data, &size, why) == -1 && data == NULL);
    CHECK_MSG(strstr(why, "no file system") != NULL, "why = \"%s\"", why);
    CHECK(port_write_file("x.bin", "abc", 3, why) == -1);
    port_log("hello from port_log");
    CHECK(board_lines == 1);
}

static void test_ops(kn_ctx *ctx)
{
    static const int64_t shape[2] = {2, 2};
    static const float a[4] = {1, 2, 3, 4}, b[4] = {0.5f, -1, 2, 0.25f};
    static const float sum[4] = {1.5f, 1, 5, 4.25f};
    static const float prod[4] = {4.5f, -0.5f, 9.5f, -2}; /* a @ b */
    float out[4] = {0};

    kn_scope_begin(ctx);
    kn_tensor *ta = kn_tensor_from(ctx, KN_F32, 2, shape, a);
    kn_tensor *tb = kn_tensor_from(ctx, KN_F32, 2, shape, b);
    kn_tensor *s = kn_add(ctx, ta, tb);
    CHECK_MSG(s && kn_read(ctx, s, out, sizeof out) == KN_OK, "kn_add: %s", kn_last_error(ctx));
    for (int i = 0; i < 4; i++) CHECK_MSG(out[i] == sum[i], "add[%d] = %g, want %g", i, out[i], sum[i]);

    kn_tensor *m = kn_matmul(ctx, ta, tb);
    CHECK_MSG(m && kn_read(ctx, m, out, sizeof out) == KN_OK, "kn_matmul: %s", kn_last_error(ctx));
    for (int i = 0; i < 4; i++)
        CHECK_MSG(test_close(out[i], prod[i], 1e-6, 1e-6), "matmul[%d] = %g, want %g", i, out[i], prod[i]);
    CHECK(kn_ndim(m) == 2 && kn_shape(m)[0] == 2 && kn_shape(m)[1] == 2);

    /* bad input is an error with a message, never a crash */
    static const int64_t shape3[1] = {3};
    kn_tensor *c = kn_zeros(ctx, KN_F32, 1, shape3);
    CHECK(kn_matmul(ctx, ta, c) == NULL);
    CHECK(kn_last_status(ctx) != KN_OK && kn_last_error(ctx)[0] != '\0');
    kn_clear_error(ctx);
    kn_scope_end(ctx);
}

int main(void)
{
    kn_ctx_opts opts = {0};
    opts.alloc = bump_alloc;
    test_port();
    kn_ctx *ctx = kn_ctx_new(&opts);
    CHECK(ctx != NULL);
    if (ctx) {
        test_ops(ctx);
        kn_ctx_free(ctx);
    }
    CHECK(heap_refused == 0);
    printf("heap peak %lu of %lu bytes\n", (unsigned long)heap_peak, (unsigned long)sizeof heap);
    TEST_END("arm_smoke");
}
