/*
 * test_ref.c — kiln against PyTorch: replays every fixture in tests/ref/data.
 *
 * tests/ref/gen.py (run with /usr/bin/python3, which has torch) wrote the
 * cases; tests/ref/fixture.h reads them. For each case this program builds the
 * inputs (applying the view recipe, so inputs can be transposed, sliced or
 * expanded), calls the kn_ op named by the case through the table in
 * tests/ref/replay.h (shared with tests/test_compiled.c) and compares every
 * output with PyTorch's: same dtype, same shape, values within rtol 1e-5 /
 * atol 1e-6 for f32 (1e-10 / 1e-12 for f64, about an ulp for f16 and bf16,
 * exact for integers and bool). One CHECK per case. A case whose op the
 * table lacks fails, as does a missing data directory.
 *
 * A case with a gradient part runs a second time, in a fresh context, with a
 * second CHECK: the inputs that have a reference gradient are marked
 * kn_requires_grad on the stored tensor before the view recipe is applied (so
 * a transposed or expanded input gets its gradient through the view), the
 * outputs are compared again, loss = sum_i kn_sum(kn_mul(out_i, cot_i)),
 * kn_backward, and kn_grad of each marked tensor is compared with PyTorch's at
 * rtol 1e-4 / atol 1e-5 for f32 (1e-9 / 1e-10 for f64), or the looser
 * tolerance of the outputs it flows back from. A marked input that backward
 * does not reach may have no .grad only when its reference gradient is zero.
 *
 * Run from the repository root:  build/tests/test_ref [-v] [-x SKIP] [NAME_SUBSTRING]
 *   -v prints each case before it runs (to find a crash or a hang); -x skips the
 *   cases whose name contains SKIP (debugging only: a skipped case is not run);
 *   a substring runs only the cases whose name contains it.
 */
#include <stdlib.h>

#include "test.h"
#include "ref/replay.h"

/* 1 when backward from the case's loss gives PyTorch's gradient for every marked input. */
static int verify_grads(Call *k, char *why)
{
    kn_tensor *loss = grad_loss(k), *g;
    int i, reached;
    char what[48];
    if (!loss) {
        snprintf(why, WHY_LEN, "building the loss failed: %s", kn_last_error(k->ctx));
        return 0;
    }
    reached = kn_is_requires_grad(loss);
    if (reached && kn_backward(k->ctx, loss, 0) != KN_OK) {
        snprintf(why, WHY_LEN, "kn_backward failed: %s", kn_last_error(k->ctx));
        return 0;
    }
    for (i = 0; i < k->c->ngrad; i++) {
        const FxTensor *want = &k->c->grad[i];
        if (want->code == FX_ABSENT) continue;
        snprintf(what, sizeof what, "gradient of input %d", i);
        g = reached ? kn_grad(k->ctx, k->base[i]) : NULL;
        if (!g && !all_zero(want)) {
            snprintf(why, WHY_LEN, "%s: no .grad (%s), PyTorch's is nonzero", what,
                     reached ? "backward did not reach it" : "the loss does not require grad");
            return 0;
        }
        if (g && !compare_tensor(k->ctx, g, want, what, case_grad_tol(k->c, want->code), why)) return 0;
    }
    return 1;
}

/* ---- driving ---- */

static int verbose, unknown_ops, ran, ran_grads;
static const char *filter, *skip;

/* Builds the inputs (with grad: the ones that have a reference gradient
 * require it), runs the op and compares its results: 1 when they match. */
static int run_forward(Call *k, int grad, char *why)
{
    if (!make_stored(k, grad, why) || !apply_views(k, why)) return 0;
    k->row->run(k);
    return verify(k, why);
}

/* The case as a forward op (no input requires grad), then, with a gradient
 * part, again in a fresh context with grad: forward and backward. */
static void run_case(const FxCase *c)
{
    char why[WHY_LEN] = "";
    Call k;
    int ok, pass;
    if (!find_op(c->op)) {
        unknown_ops++;
        CHECK_MSG(0, "case %s: the driver does not know op \"%s\"", c->name, c->op);
        return;
    }
    if (verbose) {
        printf("  %s\n", c->name);
        fflush(stdout);
    }
    for (pass = 0; pass < (c->ncot ? 2 : 1); pass++) {
        memset(&k, 0, sizeof k);
        k.c = c;
        k.row = find_op(c->op);
        k.ctx = kn_ctx_new(NULL);
        if (!k.ctx) {
            CHECK_MSG(0, "case %s: kn_ctx_new failed", c->name);
            return;
        }
        ok = run_forward(&k, pass, why);
        if (pass == 0) {
            CHECK_MSG(ok, "case %s (kn_%s): %s", c->name, c->op, why);
        } else {
            ran_grads++;
            ok = ok && verify_grads(&k, why);
            CHECK_MSG(ok, "case %s (kn_%s) with grad: %s", c->name, c->op, why);
        }
        kn_ctx_free(k.ctx);
    }
}

/* Runs every case of one file; the file must hold exactly the MANIFEST's count. */
static void run_file(const char *file, long expect)
{
    char path[512];
    FxFile f;
    FxCase c;
    int r;
    snprintf(path, sizeof path, "%s/%s", FX_DATA_DIR, file);
    if (fx_open(&f, path) != 0) {
        CHECK_MSG(0, "%s", f.error);
        fx_close(&f);
        return;
    }
    CHECK_MSG(f.ncases == (uint32_t)expect, "%s: %u cases, MANIFEST says %ld", path, (unsigned)f.ncases, expect);
    while ((r = fx_next(&f, &c)) == 1) {
        if ((!filter || strstr(c.name, filter)) && !(skip && strstr(c.name, skip))) {
            run_case(&c);
            ran++;
        }
        fx_case_free(&c);
    }
    CHECK_MSG(r == 0 && fgetc(f.fp) == EOF, "%s: %s", path, f.error[0] ? f.error : "bytes after the last case");
    fx_close(&f);
}

int main(int argc, char **argv)
{
    char file[256];
    long n;
    int i, files = 0;
    FILE *m;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0) verbose = 1;
        else if (strcmp(argv[i], "-x") == 0 && i + 1 < argc) skip = argv[++i];
        else filter = argv[i];
    }
    m = fopen(FX_DATA_DIR "/MANIFEST", "r");
    CHECK_MSG(m != NULL, "%s/MANIFEST missing: run tests from the repo root; regenerate with "
              "/usr/bin/python3 tests/ref/gen.py", FX_DATA_DIR);
    if (m) {
        for (; fscanf(m, "%255s %ld", file, &n) == 2; files++) run_file(file, n);
        fclose(m);
        CHECK_MSG(files > 0, "%s/MANIFEST lists no files", FX_DATA_DIR);
    }
    printf("test_ref: %d cases (%d with gradients) from %d files, %d with an op the driver does not know\n", ran,
           ran_grads, files, unknown_ops);
    TEST_END("test_ref");
}
