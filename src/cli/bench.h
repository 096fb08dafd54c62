/*
 * bench.h — `kiln bench gemm|ops` (bench.c): kiln's compiled code against
 * its ceilings on this machine (OpenBLAS sgemm, memcpy), each result checked
 * before it is timed.
 *
 * Output is one line per measurement, through emit (stdout when NULL):
 * an aligned table, or with json one JSON object per line holding at least
 * suite, case, impl, metric (ms, gflops, gbps), median, min, max, n; a failed
 * or skipped measurement has null values, n 0 and "error" or "skipped"
 * (with "note"). Tools outside the project read these lines: keep the
 * fields stable.
 */
#ifndef KN_BENCH_H
#define KN_BENCH_H

#include <stddef.h>

typedef struct {
    int json;  /* one JSON object per line instead of the table */
    int quick; /* no 2048 gemm, fewer cold compiles */
    int smoke; /* tests: tiny sizes (16, 32), one run each, no timing claims */
    void (*emit)(void *user, const char *line); /* one line, no newline; NULL: stdout */
    void *user;
} BenchOpts;

/* One measurement as a JSON line (no newline), the one writer of the lines
 * of every `kiln bench` suite: the fields below in this order, those that do
 * not apply left out. */
typedef struct {
    const char *suite, *cse, *impl, *metric; /* "case" in the line */
    const double *v; /* median, min, max; NULL: null values and n 0 (an error or a skip) */
    int n;
    const char *vs;   /* a peer, with ratio (its time / this time) where ratio > 0 */
    double ratio;
    const char *error; /* "error": message */
    int skipped;       /* "skipped": true */
    const char *note;  /* "note", where not empty */
    long long batch;   /* "batch", where > 0 */
    int threads;       /* "threads", where > 0 */
} BenchRecord;
void bench_json(const BenchRecord *r, char *line, size_t cap);

/* Each returns 0, or 1 if a result check failed (or kiln failed to produce one). */
int bench_gemm(const BenchOpts *o);
int bench_ops(const BenchOpts *o);

/* kiln bench SUITE [--json] [--quick] [--smoke]: argv as main's; 2 on bad usage */
int bench_cli(int argc, char **argv);

#endif
