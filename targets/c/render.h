/*
 * render.h — targets/c: loop-IR kernels to C99 text (render.c).
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
 * Scalar dialect: every loop kind renders as a plain serial loop (parallel
 * and vector code come from later passes and dialects). Results equal the
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

#include "../../src/ir.h"

/* Renders nk kernels into one unit, as snprintf: writes at most cap bytes
 * including the NUL and returns the length the whole text needs. buf may be
 * NULL when cap is 0. Every kernel that ir_verify accepts renders. */
size_t c_render(const Kernel *const *ks, int nk, char *buf, size_t cap);

#endif
