/*
 * main.c — the kiln command line: a thin layer over the library.
 */
#include <stdio.h>
#include <string.h>

#include "kiln.h"

int kn_cli_ops(void); /* decomp.c */

static int usage(void)
{
    fprintf(stderr,
            "usage: kiln --version\n"
            "       kiln ops        primitives, composites, and what each composite decomposes into\n");
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
    fprintf(stderr, "kiln: unknown command '%s'\n", argv[1]);
    return usage();
}
