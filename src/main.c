/*
 * main.c — the kiln command line: a thin layer over the library.
 */
#include <stdio.h>
#include <string.h>

#include "kiln.h"
#include "gradcheck.h"
#include "bench.h"

int kn_cli_ops(void); /* opslist.c */

static int usage(void)
{
    fprintf(stderr,
            "usage: kiln --version\n"
            "       kiln ops                    primitives, composites, and what each composite decomposes into\n"
            "       kiln gradcheck [--op NAME]  finite-difference gradient check of every differentiable op\n"
            "       kiln bench gemm|ops [--json] [--quick]   checked benchmarks against OpenBLAS / memcpy\n");
    return 2;
}

/* kiln gradcheck [--op NAME]: exit 0 if every op passed, 1 if one failed */
static int cli_gradcheck(int argc, char **argv)
{
    const char *only = NULL;
    int npass, nfail;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--op") && i + 1 < argc && !only) only = argv[++i];
        else {
            fprintf(stderr, "kiln gradcheck: unexpected argument '%s'\n", argv[i]);
            return usage();
        }
    }
    int r = gradcheck_run(only, 2, &npass, &nfail);
    if (r >= 0) return r;
    fprintf(stderr, "kiln gradcheck: no op named '%s'; the ops checked are:\n", only);
    int col = 0;
    for (int i = 0; gradcheck_name(i); i++) {
        const char *name = gradcheck_name(i);
        if (col && col + 1 + (int)strlen(name) > 100) col = 0, fputc('\n', stderr);
        col += fprintf(stderr, "%s%s", col ? " " : "  ", name);
    }
    if (col) fputc('\n', stderr);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage();
    if (!strcmp(argv[1], "--version")) {
        printf("kiln %s\n", KN_VERSION);
        return 0;
    }
    if (!strcmp(argv[1], "ops")) return kn_cli_ops();
    if (!strcmp(argv[1], "gradcheck")) return cli_gradcheck(argc, argv);
    if (!strcmp(argv[1], "bench")) {
        int r = bench_cli(argc, argv);
        return r == 2 ? usage() : r;
    }
    fprintf(stderr, "kiln: unknown command '%s'\n", argv[1]);
    return usage();
}
