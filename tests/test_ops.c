/*
 * test_ops.c — the op table and `kiln ops`: the primitive set stays closed
 * (<= 40) and every composite of DESIGN.md traces into primitives.
 */
#include "test.h"
#include "../src/core.h"

int main(void)
{
    int nprim = 0, ncomp = 0;
    CHECK(opslist_run(0, &nprim, &ncomp) == 0);
    CHECK_MSG(nprim > 0 && nprim <= 40, "%d primitives", nprim);
    CHECK_MSG(ncomp == 109, "%d composites", ncomp);
    int bad = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        bad += !kn_opinfo[op].name || kn_opinfo[op].nsrc < 0 || kn_opinfo[op].nsrc > 3;
        for (int j = 0; j < op; j++) bad += strcmp(kn_opinfo[op].name, kn_opinfo[j].name) == 0;
    }
    CHECK_MSG(bad == 0, "%d malformed or duplicate rows in the op table", bad);
    TEST_END("ops");
}
