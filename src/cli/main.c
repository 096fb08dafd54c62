/*
 * main.c — the kiln command line: a thin layer over the library.
 */
#include <stdio.h>
#include <string.h>

#include "../kiln.h"
#include "gradcheck.h"
#include "bench.h"
#include "train.h"
#include "opslist.h"

static int usage(void)
{
    fprintf(stderr,
            "usage: kiln --version\n"
            "       kiln ops                    primitives, composites, and what each composite decomposes into\n"
            "       kiln gradcheck [--op NAME]  finite-difference gradient check of every differentiable op\n"
            "       kiln bench gemm|ops [--json] [--quick]   checked benchmarks against OpenBLAS / memcpy\n"
            "       kiln bench train|infer|dispatch [--json] [--quick] [--model mlp|gpt|cnn] [--backend c|tcc]\n"
            "                                   the workloads, eager vs compiled\n"
            "       kiln explain mlp|cnn|gpt        graphs, breaks, guards, decomposition, fusion, code size\n"
            "       kiln train [--model smallcnn|mlp] [--epochs 2] [--batch 64] [--lr 1e-3] [--optim adam|sgd]\n"
            "                  [--backend c|tcc|interp] [--threads 2] [--seed 0] [--data DIR] [--limit N]\n"
            "                  [--save FILE] [--resume FILE] [--quiet]   train on Fashion-MNIST\n");
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
    if (!strcmp(argv[1], "train")) {
        int r = cli_train(argc, argv);
        return r == 2 ? usage() : r;
    }
    if (!strcmp(argv[1], "explain")) {
        int r = cli_explain(argc, argv);
        return r == 2 ? usage() : r;
    }
    if (!strcmp(argv[1], "bench") && argc > 2 && (!strcmp(argv[2], "train") || !strcmp(argv[2], "infer") ||
                                                   !strcmp(argv[2], "dispatch"))) {
        int json = 0, quick = 0;
        const char *model = NULL, *backend = NULL;
        for (int i = 3; i < argc; i++) {
            if (!strcmp(argv[i], "--json")) json = 1;
            else if (!strcmp(argv[i], "--quick")) quick = 1;
            else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
            else if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
            else return usage();
        }
        return bench_models(argv[2], json, quick, model, backend);
    }
    if (!strcmp(argv[1], "bench")) {
        int r = bench_cli(argc, argv);
        return r == 2 ? usage() : r;
    }
    fprintf(stderr, "kiln: unknown command '%s'\n", argv[1]);
    return usage();
}
