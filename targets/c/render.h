/*
 * render.h — targets/c: loop-IR kernels to C99 text (render.c, loop.c,
 * prelude.c).
 *
 *     size_t n = c_render(ks, nk, NULL, 0);        // the length the text needs
 *     char *src = malloc(n + 1);
 *     c_render(ks, nk, src, n + 1);
 *     PortModule *m = port_jit(PORT_TCC, src, NULL, why);
 *     void (*k0)(void **) = ...port_jit_sym(m, ks[0]->name)...;
 *     void *bufs[] = {out, in1, in2};              // buffer i of kernel 0
 *     k0(bufs);
 *
 * The text is one self-contained translation unit for cc -std=gnu99 (or
 * c99) and TinyCC: a prelude of static inline helpers, then one external
 * function `void NAME(void **b)` per kernel, where b[i] is the base pointer
 * of the kernel's buffer i, of the buffer's storage type: float, double,
 * uint16_t (f16 and bf16, converted on load and store), int32_t, int64_t,
 * uint8_t (bool and u8). Kernel names must differ and be C identifiers that
 * are not keywords (lowering's k<node>_<op> are).
 *
 * Threads: a kernel with a top-level parallel loop reads b[nbufs] (one
 * entry past its buffers) as a `const KnParallel *` (gemm.h) or NULL, and
 * runs that loop's iterations in chunks through its parallel_for (NULL, or
 * one thread: all on the caller's thread); the result is the same bit for
 * bit. Other kernels read only b[0 .. nbufs). Callers pass nbufs + 1
 * entries, the last NULL when they have no pool.
 *
 * A tile kernel (Kernel.tile: a dot template's epilogue) renders as
 * `void NAME(void **b, int64_t t, int64_t m0, int64_t m1, int64_t n0,
 * int64_t n1)`, its three loops run over batch t, rows [m0, m1) and columns
 * [n0, n1) only.
 *
 * Scalar dialect: every other loop kind renders as a plain serial loop
 * (vector code comes from the SIMD dialect below). Results equal the
 * interpreter's (interp.c) bit for bit for integers, bool, compares,
 * casts, where, rand, and + - * / sqrt abs floor max min in every float
 * dtype (f16 and bf16 are rounded after every op, as the interpreter
 * stores every primitive's result); transcendentals, pow and float
 * accumulators (sum, dot) are computed in the value's own precision (expf
 * for f32) where the interpreter uses double, so they differ by rounding.
 * Exactness assumes no FMA contraction (x86-64 without -mfma; pass
 * -ffp-contract=off to cc elsewhere).
 */
#ifndef KN_TARGETS_C_RENDER_H
#define KN_TARGETS_C_RENDER_H

#include "../../port/port.h"
#include "../../src/ir.h"

/* An instruction set of the SIMD dialect: its name, the system compiler's
 * flags for it, and the macro header that starts the unit. */
typedef struct {
    const char *name;   /* avx512, avx2, sse2, neon, wasm128, scalar */
    const char *flags;  /* cc options ("-mavx2 -mfma"), never -march=native */
    const char *header; /* #defines: KN_ISA_<NAME>, KN_FMAF where fused multiply-add exists */
    int lanes;          /* accumulator lanes of a vector loop, at least: two or more vectors of f32 */
} CIsa;

extern const CIsa c_isas[]; /* ends with a row of NULLs */
const CIsa *c_isa(const char *name); /* NULL if unknown */
const CIsa *c_isa_host(void);        /* this machine's best, by run-time CPU detection */
/* The system compiler's options for the SIMD dialect of isa (targets/c/c.c),
 * as snprintf: what the "c" target builds with */
size_t c_cc_flags(const CIsa *isa, char *buf, size_t cap);

/* Renders nk kernels into one unit, as snprintf: writes at most cap bytes
 * including the NUL and returns the length the whole text needs. buf may be
 * NULL when cap is 0. Every kernel that ir_verify accepts renders. */
size_t c_render(const Kernel *const *ks, int nk, char *buf, size_t cap);
/* The scalar dialect for TinyCC in this process, whose innermost loops of
 * min or more iterations (a thread's range of a flat parallel loop, always)
 * call the library's vector helpers (src/vec_rt.h) on blocks of their
 * elements where every value is one those compute (f32, and bool masks):
 * the unit links only where those symbols are given (port/jit_tcc.c).
 * Results as the scalar dialect's, but for float sums, added in lanes, and
 * the sign of the NaN a max or min makes (vec_rt.h). */
#define C_BLOCKS_MIN 32 /* the tcc target's min: a shorter loop spends more in calls than TinyCC's copies do */
size_t c_render_blocks(const Kernel *const *ks, int nk, int min, char *buf, size_t cap);
/* The same kernels in the SIMD dialect for isa (cc -std=gnu99 with
 * isa->flags; TinyCC compiles it too, serially): vector loops are marked
 * for the vectoriser and accumulate in lanes (so float sums differ from the
 * scalar dialect's by rounding; pointwise results are the same bits). */
size_t c_render_isa(const Kernel *const *ks, int nk, const CIsa *isa, char *buf, size_t cap);

/* The library functions rendered code may call (the tcc dialect's dots call kn_rt_gemm, the block
 * form of loops the vector helpers of src/vec_rt.h), as port_jit takes them; c_jit loads rendered
 * text with them */
enum { C_RT_NSYMS = 13 };
void c_rt_symbols(PortSymbol syms[C_RT_NSYMS]);
PortModule *c_jit(int how, const char *src, const char *flags, char *why);

#endif
