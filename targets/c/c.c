/*
 * c.c — the C target's two compile-and-load paths as Target structs: "c"
 * (the system compiler, through port_jit's content-hash cache) and "tcc"
 * (libtcc in the process). Both render the same C text (render.c) and run
 * a kernel as a call fn(bufs).
 */
#include "../../port/port.h"
#include "../../src/target.h"
#include "gemm.h"
#include "render.h"

static int cc_available(void) { return port_jit_available(PORT_CC); }
static int tcc_available(void) { return port_jit_available(PORT_TCC); }

/* The system compiler builds code for the machine it runs on, so the ISA
 * comes from run-time CPU detection (never -march=native in the library's
 * own build). FP contraction stays off: results match the scalar dialect. */
static const char *cc_flags(void)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return "-O3 -ffp-contract=off -mavx512f -mavx512vl -mavx2 -mfma -mprefer-vector-width=512";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "-O3 -ffp-contract=off -mavx2 -mfma";
#endif
    return "-O3 -ffp-contract=off";
}

static void *cc_load(const char *src, char *why) { return port_jit(PORT_CC, src, cc_flags(), why); }
static void *tcc_load(const char *src, char *why) { return port_jit(PORT_TCC, src, "", why); }

static void *sym(void *module, const char *name) { return port_jit_sym(module, name); }
static void unload(void *module) { port_jit_free(module); }

/* dots: packed SIMD micro-kernels for cc, the scalar tiled loop for tcc */
static size_t cc_dot(const GemmSpec *s, char *buf, size_t cap) { return gemm_render(s, GEMM_SIMD, buf, cap); }
static size_t tcc_dot(const GemmSpec *s, char *buf, size_t cap) { return gemm_render(s, GEMM_SCALAR, buf, cap); }

typedef void (*KernelFn)(void **bufs);

static void run(void *fn, void **bufs, const Kernel *k)
{
    (void)k;
    KernelFn f;
    *(void **)&f = fn; /* object to function pointer: as dlsym's result is used */
    f(bufs);
}

const Target kn_target_c = {
    .name = "c", .available = cc_available, .render = c_render,
    .load = cc_load, .sym = sym, .unload = unload, .run = run, .render_dot = cc_dot,
};

const Target kn_target_tcc = {
    .name = "tcc", .available = tcc_available, .render = c_render,
    .load = tcc_load, .sym = sym, .unload = unload, .run = run, .render_dot = tcc_dot,
};
