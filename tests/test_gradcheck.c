/*
 * test_gradcheck.c — `kiln gradcheck` inside make test: every VJP rule of
 * every differentiable primitive and composite against finite differences,
 * and the checker itself on gradients that are wrong on purpose.
 */
#include "test.h"
#include "../src/core.h"
#include "../src/cli/gradcheck.h"

/* 30 differentiable primitives and 90 differentiable composites: the count
 * keeps the test from passing by checking nothing */
#define MIN_CHECKS 120

/* composite.h's GRAD column: 1 where there is a gradient to check */
#define UN(fn, d) 1
#define UN0(fn, d) 1
#define BIN(fn, d0, d1) 1
#define BODY(fn, n) 1
#define NONE(why) 0
#define DIFF_(name, example, grad) grad,
static const char differentiable[COMP_COUNT] = {KN_COMPOSITES(DIFF_)};

int main(void)
{
    int pass = -1, fail = -1, nchecks = 0;
    while (gradcheck_name(nchecks)) nchecks++;
    CHECK_MSG(nchecks >= MIN_CHECKS, "%d checks, expected at least %d", nchecks, MIN_CHECKS);

    /* the checks: "prim.*", then every composite with a gradient, in the table's order */
    int i = 0, order = 1;
    while (gradcheck_name(i) && !strncmp(gradcheck_name(i), "prim.", 5)) i++;
    for (int c = 0; c < COMP_COUNT; c++)
        if (differentiable[c]) order &= gradcheck_name(i) && !strcmp(gradcheck_name(i++), composite_name(c));
    CHECK_MSG(order && i == nchecks, "the composites' checks are not composite.h's differentiable rows");

    /* everything; failing ops are printed (run build/kiln gradcheck for every line) */
    CHECK(gradcheck_run(NULL, 1, &pass, &fail) == 0);
    CHECK_MSG(fail == 0, "%d ops failed the gradient check", fail);
    CHECK_MSG(pass >= MIN_CHECKS, "%d ops passed, expected at least %d", pass, MIN_CHECKS);

    /* the checker reports gradients that are wrong, and passes one off by less than rtol */
    int nwrong = 0, ncaught = 0;
    CHECK(gradcheck_selftest(1, &nwrong, &ncaught) == 0);
    CHECK_MSG(nwrong >= 4 && ncaught == nwrong, "%d of %d wrong gradients caught", ncaught, nwrong);

    /* one op by name; an unknown name runs nothing */
    CHECK(gradcheck_run("prim.exp", 0, &pass, &fail) == 0 && pass == 1 && fail == 0);
    CHECK(gradcheck_run("no_such_op", 0, &pass, &fail) == -1 && pass == 0 && fail == 0);
    TEST_END("gradcheck");
}
