/*
 * test_ops.c — the op table and `kiln ops`: the primitive set stays closed
 * (<= 40), every composite of docs/DESIGN.md (composite.h's table) traces into
 * primitives, and the library finds a composite by its public name.
 */
#include "test.h"
#include "../src/core.h"
#include "../src/cli/opslist.h"

int main(void)
{
    int nprim = 0, ncomp = 0;
    CHECK(opslist_run(0, &nprim, &ncomp) == 0);
    CHECK_MSG(nprim > 0 && nprim <= 40, "%d primitives", nprim);
    /* docs/DESIGN.md's 109, and more as rows are added */
    CHECK_MSG(ncomp == COMP_COUNT && ncomp >= 109, "%d composites listed, %d in the table", ncomp, COMP_COUNT);
    int bad = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        bad += !kn_opinfo[op].name || kn_opinfo[op].nsrc < 0 || kn_opinfo[op].nsrc > 3;
        for (int j = 0; j < op; j++) bad += strcmp(kn_opinfo[op].name, kn_opinfo[j].name) == 0;
    }
    CHECK_MSG(bad == 0, "%d malformed or duplicate rows in the op table", bad);

    bad = composite_name(-1) != NULL || composite_name(COMP_COUNT) != NULL;
    for (int i = 0; i < COMP_COUNT; i++) {
        char pub[64];
        snprintf(pub, sizeof pub, "kn_%s", composite_name(i));
        bad += composite_find(pub) != i + 1; /* also a duplicate name */
    }
    CHECK_MSG(bad == 0, "%d composites not found by their public name", bad);
    CHECK(composite_find("kn_scatter_add") == 1 + COMP_scatter_add);
    CHECK(composite_find("scatter_add") == 0 && composite_find("kn_no_such_op") == 0 && composite_find(NULL) == 0);
    TEST_END("ops");
}
