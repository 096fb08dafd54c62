/*
 * gradcheck.h — `kiln gradcheck`: every VJP rule against central finite
 * differences in f64, as torch.autograd.gradcheck (gradcheck.c).
 */
#ifndef KN_GRADCHECK_H
#define KN_GRADCHECK_H

#include "../kiln.h"

/* Checks every differentiable primitive ("prim.NAME") and composite, or only
 * the one named only_op (NULL: all). print: 0 nothing, 1 the failing ops
 * (indented four spaces, which tests/run.sh echoes), 2 one line per op and
 * the closing "gradcheck: N passed, M failed". Returns 0 if every op passed,
 * 1 if one failed, -1 if only_op names no check (nothing run). */
int gradcheck_run(const char *only_op, int print, int *npass, int *nfail);

const char *gradcheck_name(int i); /* the i-th check's name; NULL past the end */

/* The checker on gradients that are wrong on purpose (and one that is off by
 * less than the tolerance). *ncaught of *nwrong wrong ones were reported;
 * returns 0 if each verdict was the expected one. */
int gradcheck_selftest(int print, int *nwrong, int *ncaught);

/* One case of a check, to run it another way (tests/test_compiled.c traces
 * and compiles it): every forward computes from the same f64 leaves, which
 * the first forward makes (so it must run eagerly), keeps and marks as
 * requiring grad; the context is reseeded before each, as the checker does. */
#define GRADCHECK_MAX_LEAVES 6
typedef struct GradcheckCase GradcheckCase;
int gradcheck_ncases(int i);                            /* the i-th check's cases; 0 past the end */
GradcheckCase *gradcheck_case(kn_ctx *ctx, int i, int v); /* case v of check i; NULL with the error set */
kn_tensor *gradcheck_forward(GradcheckCase *c);         /* y = op(leaves); NULL with the error set */
int gradcheck_leaves(const GradcheckCase *c, kn_tensor **leaves); /* the leaves so far; how many */
void gradcheck_case_free(GradcheckCase *c);

#endif
