/*
 * vec_rt.h — elementwise helpers on short runs of f32 (and bool masks),
 * compiled into the library by the build's compiler with vector code, for
 * backend tcc: TinyCC's own code moves one element at a time through
 * memory, so its innermost loops of many iterations call these on blocks of
 * KN_VBLOCK elements instead (targets/c/loop.c, put_blocks; port/jit_tcc.c
 * hands libtcc the symbols).
 *
 *     float t[KN_VBLOCK];
 *     kn_rt_vbinary(OP_MUL, t, x + o, scale, n);   // t[i] = x[o + i] * scale[i]
 *     kn_rt_vcopy(y + o, 1, t, 1, n, 4);
 *
 * Each result is what the scalar dialect of targets/c/render.c computes
 * for the element under TinyCC, bit for bit: one IEEE operation per call
 * (no contraction), max and min with its NaN rules, the libm function
 * TinyCC's code calls for exp, log, tanh, erf, sin, cos, pow. Two
 * exceptions: kn_rt_vsum adds in 8 lanes, so a reduction differs from the
 * scalar loop's by rounding (as the SIMD dialect's lanes do); and the NaN a
 * max or min makes is this compiler's NAN, whose sign may differ from
 * TinyCC's (0.0f / 0.0f): NaN either way.
 *
 * op is the primitive's number (src/ops.h); an op a function does not know
 * leaves d unchanged and returns -1 (renderers never pass one). Runs do not
 * overlap. n >= 0. Generated code declares these itself (targets/c/render.c,
 * blocks_decl): change the two together.
 */
#ifndef KN_VEC_RT_H
#define KN_VEC_RT_H

#include <stdint.h>

#define KN_VBLOCK 64 /* the elements a block of the generated code holds */

int kn_rt_vunary(int op, float *d, const float *a, int64_t n);                     /* neg exp log sqrt recip sin
                                                                                         cos tanh erf abs floor */
int kn_rt_vbinary(int op, float *d, const float *a, const float *b, int64_t n);    /* add sub mul div max min pow */
int kn_rt_vcompare(int op, uint8_t *d, const float *a, const float *b, int64_t n); /* cmplt cmpeq: 0 or 1 */
void kn_rt_vwhere(float *d, const uint8_t *c, const float *a, const float *b, int64_t n); /* c[i] != 0 ? a : b */
void kn_rt_vmask(float *d, const uint8_t *c, int64_t n);                            /* (float)(c[i] != 0) */
void kn_rt_vnonzero(uint8_t *d, const float *a, int64_t n);                        /* a[i] != 0 */
void kn_rt_vfill(float *d, float v, int64_t n);
/* n elements of size bytes (1, 4 or 8) from s (every ss-th) to d (every ds-th) */
void kn_rt_vcopy(void *d, int64_t ds, const void *s, int64_t ss, int64_t n, int size);
float kn_rt_vsum(const float *a, int64_t n);           /* in 8 lanes, added pairwise at the end; 0 if n is 0 */
float kn_rt_vaccmax(float acc, const float *a, int64_t n); /* acc, then each a[i] in turn, as kn_accmaxf */

#endif
