/*
 * c.c — the C target's two compile-and-load paths as Target structs: "c"
 * (the system compiler, through port_jit's content-hash cache) and "tcc"
 * (libtcc in the process). "c" renders the SIMD dialect for the
 * instruction set CPU detection finds, "tcc" the scalar one (render.c);
 * both run a kernel as a call fn(bufs), bufs ending with the thread pool
 * and the error cell of index checks.
 */
#include <stdio.h>
#include <string.h>

#include "../../port/port.h"
#include "../../src/target.h"
#include "gemm.h"
#include "render.h"
#include "../../src/gemm_rt.h"
#include "../../src/vec_rt.h"

static int cc_available(void) { return port_jit_available(PORT_CC); }
static int tcc_available(void) { return port_jit_available(PORT_TCC); }

/* The system compiler builds code for the machine it runs on, so the ISA
 * (the SIMD dialect's macro header and cc's flags) comes from run-time CPU
 * detection, never from -march=native in the library's own build. */
static size_t cc_render(const Kernel *const *ks, int nk, char *buf, size_t cap)
{
    return c_render_isa(ks, nk, c_isa_host(), buf, cap);
}

/* -O2, not -O3: a cold training step compiles markedly faster, and runs as
 * fast as at -O3, given what -O3 did that -O2 does not: the SIMD
 * dialect's helpers are always_inline (prelude.c: at -O2 gcc left exp, erf
 * and tanh out of line and their loops scalar); gcc gets -O3's vectoriser
 * cost model back (its -O2 one vectorises only loops that need no epilogue,
 * which leaves many of the steps' loops scalar; clang's -O2 has it, and
 * rejects the flag); no errno from libm (a sqrtf's errno branch kept
 * layer_norm's loop scalar, which -O3's unswitching took out). FP
 * contraction stays off: pointwise results match the scalar dialect's bit
 * for bit. */
size_t c_cc_flags(const CIsa *isa, char *buf, size_t cap)
{
    char version[256];
    int clang = port_jit_version(PORT_CC, version) && strstr(version, "clang");
    int n = snprintf(buf, cap, "-O2%s -fno-math-errno -ffp-contract=off %s",
                     clang ? "" : " -fvect-cost-model=dynamic", isa->flags);
    return n < 0 ? 0 : (size_t)n;
}

static void *cc_load(const char *src, char *why)
{
    char flags[200];
    if (c_cc_flags(c_isa_host(), flags, sizeof flags) >= sizeof flags) {
        snprintf(why, 256, "cc: its flags do not fit %d bytes", (int)sizeof flags);
        return NULL;
    }
    return c_jit(PORT_CC, src, flags, why);
}
/* the dialect and flags the host's ISA gives (cc_render, cc_load) */
static const char *cc_tag(void) { return c_isa_host()->name; }

/* A function's address as an object pointer, as dlsym's results are used */
static void *addr_of(void (*fn)(void))
{
    void *p;
    memcpy(&p, &fn, sizeof p);
    return p;
}

void c_rt_symbols(PortSymbol syms[C_RT_NSYMS])
{
#define SYM(fn) (PortSymbol){#fn, addr_of((void (*)(void))fn)}
    const PortSymbol all[C_RT_NSYMS] = {SYM(kn_rt_gemm),     SYM(kn_rt_conv),    SYM(kn_rt_conv_work), SYM(kn_rt_vunary),
                                        SYM(kn_rt_vbinary),  SYM(kn_rt_vcompare), SYM(kn_rt_vwhere),   SYM(kn_rt_vmask),
                                        SYM(kn_rt_vnonzero), SYM(kn_rt_vfill),   SYM(kn_rt_vcopy),     SYM(kn_rt_vsum),
                                        SYM(kn_rt_vaccmax)};
#undef SYM
    memcpy(syms, all, sizeof all);
}

PortModule *c_jit(int how, const char *src, const char *flags, char *why)
{
    PortSymbol syms[C_RT_NSYMS];
    c_rt_symbols(syms);
    return port_jit(how, src, flags, syms, C_RT_NSYMS, why);
}

static void *tcc_load(const char *src, char *why) { return c_jit(PORT_TCC, src, "", why); }
/* the scalar dialect's text is the same on every machine; a program cache entry spares a warm start
 * scheduling, lowering and rendering (most of a warm ResNet-18 training step's compile), not TinyCC's
 * compile of the text, which tcc_load runs in every process */
static const char *tcc_tag(void) { return "scalar"; }

static void *sym(void *module, const char *name) { return port_jit_sym(module, name); }
static void unload(void *module) { port_jit_free(module); }

/* dots: packed SIMD micro-kernels for cc; for tcc, a call into the library's GEMM (src/gemm_rt.c), which
 * the build's compiler made far faster than TinyCC's code for the scalar template.
 * The small products of convolutions (at most LENT_MACS multiply-adds: ResNet-18's 1x1 shortcuts and
 * the gradients of its small stages) call the library's GEMM too (GEMM_LENT, through what the program
 * lends): each SIMD unit costs cc a noticeable share of a cold compile (a ResNet-18 training step
 * has tens of them), and those save little a call. Not the plain matrix products: lent, the mlp's
 * (up to 2^25, even its 128 x 10 x 512 ones alone) make its training step slower. */
#define LENT_MACS (1 << 25)
static size_t cc_dot(const GemmSpec *s, char *buf, size_t cap)
{
    double macs = (double)s->batch * (double)s->M * (double)s->N * (double)s->K;
    int lent = !s->wino && s->win.on && macs <= LENT_MACS;
    return gemm_render(s, lent ? GEMM_LENT : GEMM_SIMD_HOST, buf, cap);
}
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

static size_t tcc_render(const Kernel *const *ks, int nk, char *buf, size_t cap)
{
    return c_render_blocks(ks, nk, C_BLOCKS_MIN, buf, cap);
}

const Target kn_target_tcc = {
    .name = "tcc", .available = tcc_available, .render = tcc_render,
    .load = tcc_load, .sym = sym, .unload = unload, .run = run, .render_dot = tcc_dot, .cache_tag = tcc_tag,
};
