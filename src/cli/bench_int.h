/*
 * bench_int.h — what the files of `kiln bench gemm|ops` share (bench.h is their interface):
 * bench.c times and reports, bench_compile.c measures compile times with its helpers.
 */
#ifndef KN_BENCH_INT_H
#define KN_BENCH_INT_H

#include "bench.h"
#include "../compile.h"

#define MAX_SAMPLES 30
#define TOL 1e-4

typedef struct {
    const BenchOpts *o;
    int failed;
} B;

typedef struct {
    double med, min, max; /* ms */
    int n;
} Stat;

/* bench.c */
/* a measurement, an error, a case skipped: one line or JSON record each */
void bench_report(B *b, const char *suite, const char *cse, const char *impl, const Stat *s, const char *dmetric,
                  double work, const char *peer, const Stat *ps, double pair, const char *note);
void bench_report_err(B *b, const char *suite, const char *cse, const char *impl, const char *metric, const char *msg,
                      int counts);
const char *bench_be_name(CompileBackend be); /* kiln-c or kiln-tcc */
int bench_cmp_double(const void *a, const void *b); /* qsort of doubles */

/* bench_compile.c: compile time, cold and warm, of an MLP's joint graph and of the workloads'
 * training steps */
void bench_compile_mlp(B *b, kn_ctx *ctx);
void bench_compile_steps(B *b, kn_ctx *ctx);

#endif
