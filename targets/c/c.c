/*
 * c.c — the C target's two compile-and-load paths as Target structs: "c"
 * (the system compiler, through port_jit's content-hash cache) and "tcc"
 * (libtcc in the process). "c" renders the SIMD dialect for the
 * instruction set CPU detection finds, "tcc" the scalar one (render.c);
 * both run a kernel as a call fn(bufs), bufs ending with the thread pool
 * and the error cell of index checks.
 */
#include <stdio.h>

#include "../../port/port.h"
#include "../../src/target.h"
#include "gemm.h"
#include "render.h"

static int cc_available(void) { return port_jit_available(PORT_CC); }
static int tcc_available(void) { return port_jit_available(PORT_TCC); }

/* The system compiler builds code for the machine it runs on, so the ISA
 * (the SIMD dialect's macro header and cc's flags) comes from run-time CPU
 * detection, never from -march=native in the library's own build. FP
 * contraction stays off: pointwise results match the scalar dialect's bit
 * for bit. sqrtf need not set errno (-fno-math-errno; nothing reads it):
 * with errno, gcc kept every loop with a sqrtf scalar, a compare and a
 * branch per element around the call (Adam's update, 5% of the cnn's train
 * step); its result is correctly rounded either way. */
static size_t cc_render(const Kernel *const *ks, int nk, char *buf, size_t cap)
{
    return c_render_isa(ks, nk, c_isa_host(), buf, cap);
}

static void *cc_load(const char *src, char *why)
{
    char flags[160];
    snprintf(flags, sizeof flags, "-O3 -ffp-contract=off -fno-math-errno %s", c_isa_host()->flags);
    return port_jit(PORT_CC, src, flags, why);
}
/* the dialect and flags the host's ISA gives (cc_render, cc_load) */
static const char *cc_tag(void) { return c_isa_host()->name; }

static void *tcc_load(const char *src, char *why) { return port_jit(PORT_TCC, src, "", why); }

static void *sym(void *module, const char *name) { return port_jit_sym(module, name); }
static void unload(void *module) { port_jit_free(module); }

/* dots: packed SIMD micro-kernels for cc; for tcc, a call into the library's GEMM (src/gemm_rt.c), which
 * the build's compiler made far faster than TinyCC's code for the scalar template */
static size_t cc_dot(const GemmSpec *s, char *buf, size_t cap) { return gemm_render(s, GEMM_SIMD_HOST, buf, cap); }
static size_t tcc_dot(const GemmSpec *s, char *buf, size_t cap) { return gemm_render(s, GEMM_RUNTIME, buf, cap); }

typedef void (*KernelFn)(void **bufs);

static void run(void *fn, void **bufs, const Kernel *k)
{
    (void)k;
    KernelFn f;
    *(void **)&f = fn; /* object to function pointer: as dlsym's result is used */
    f(bufs);
}

const Target kn_target_c = {
    .name = "c", .available = cc_available, .render = cc_render,
    .load = cc_load, .sym = sym, .unload = unload, .run = run, .render_dot = cc_dot, .cache_tag = cc_tag,
};

const Target kn_target_tcc = {
    .name = "tcc", .available = tcc_available, .render = c_render,
    .load = tcc_load, .sym = sym, .unload = unload, .run = run, .render_dot = tcc_dot,
};
