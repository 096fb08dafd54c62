/*
 * test_compiled.c — every op through the compiler, forward and backward,
 * for backends tcc and c, against PyTorch and against the interpreter.
 *
 * A case is traced into a graph: its stored tensors become the graph's
 * inputs; its views (transposes, slices, expands), the op, and for a
 * backward the loss sum(out * cotangent) and autodiff_grads become nodes.
 * compile_graph makes a program of it and program_run runs it on the stored
 * tensors. A forward program has the op's results as outputs; a joint
 * (forward + backward) program has the gradients of the inputs too.
 *
 *   fixtures   every PyTorch case of tests/ref, replayed through replay.h as
 *              test_ref does eagerly and compared with PyTorch's values at
 *              test_ref's tolerances. tcc: each case's forward program and,
 *              with a gradient part, its joint program. c, each of whose
 *              programs costs a run of the system compiler: the first case
 *              of every op and every C_STRIDE-th, the joint program of those
 *              with a gradient part and the forward of the rest, several
 *              cases to a program.
 *   gradcheck  every case of every check of src/cli/gradcheck.c (f64 leaves,
 *              transposed and broadcast inputs): forward and joint programs
 *              on tcc against the same programs on backend interp.
 *   shapes     pointwise, reduction, scan, indexing, reshape, dot, conv and pool families at
 *              sizes 1, 7, 17, 33 and 65 (no multiple of a vector width or
 *              a tile), with broadcast, transposed, permuted and strided
 *              inputs, against backend interp: on tcc each size's forward and
 *              joint programs; on c one joint program of every size of a
 *              family (and a forward one where a dot's epilogue is at stake).
 *
 * One CHECK per case and program kind. A case that does not trace, compile
 * or run, that runs on another backend than the one asked for (a fallback
 * to the interpreter), any node of which the interpreter runs (gather and
 * scatter_add compile too), or whose values differ, fails. Skips are printed
 * with their reason and never counted as passes: a case whose results are
 * all inputs themselves (nothing to compile), and the cases of untraceable[]
 * while their tracing fails. With no JIT on the platform (wasm, a board)
 * the test says so and checks nothing. The comparisons are shown to catch a
 * perturbed value. Backend c compiles into a fresh $KILN_CACHE_DIR, removed
 * at the end, so its compiles are cold (programs that render the same
 * source share a cached object, as they would in use).
 *
 * Run from the repository root:  build/tests/test_compiled [-v] [NAME_SUBSTRING]
 *   -v prints each case before it runs; a substring runs only the cases
 *   (of every section) whose name contains it.
 */
#if (defined(__unix__) || defined(__APPLE__)) && !defined(__wasi__) && !defined(__EMSCRIPTEN__)
#define HAVE_POSIX 1
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <unistd.h>
#else
#define HAVE_POSIX 0
#endif
#include <stdlib.h>

#include "test.h"
#include "ref/replay.h"
#include "../src/core.h"
#include "../src/compile.h"
#include "../src/cli/gradcheck.h"
#include "../port/port.h"

#define C_STRIDE 8      /* backend c: besides each op's first fixture case, every C_STRIDE-th */
#define MAX_OUTS 64     /* a program's outputs (program_run's limit) */
#define MAX_LEAVES 48   /* a shapes family at every size */

static const int sizes[] = {1, 7, 17, 33, 65};
#define NSIZES ((int)(sizeof sizes / sizeof *sizes))

static int verbose;
static const char *filter;

/* ---- tallies ---- */

enum { SEC_FIXTURES, SEC_GRADCHECK, SEC_SHAPES, NSEC };
static const char *const sec_name[NSEC] = {"fixtures", "gradcheck", "shapes"};

typedef struct {
    int pass, fail, skip;
    int interp_steps;  /* programs in which some node ran on the interpreter */
    double worst;      /* largest |got - want| / tolerance seen: 1 is the limit */
    double compile_s;  /* wall time in compile_graph */
} Tally;

static Tally tally[NSEC][2]; /* [section][0 tcc, 1 c] */
static int cur_sec;          /* the section running, for compile times */

static int be_index(CompileBackend be) { return be == BACKEND_C; }
static const char *be_name(CompileBackend be) { return be == BACKEND_C ? "c" : "tcc"; }

static double now(void) { return port_now_ms() / 1e3; } /* seconds, for the report */

/* One CHECK, counted in its section's tally. */
static void count(int sec, CompileBackend be, int ok, const char *name, const char *what, const char *why)
{
    Tally *t = &tally[sec][be_index(be)];
    ++*(ok ? &t->pass : &t->fail);
    CHECK_MSG(ok, "%s %s (%s, backend %s): %s", sec_name[sec], name, what, be_name(be), why);
}

/* A case the compiled path cannot take, printed with its reason and counted
 * apart: never as a pass. */
static void count_skip(int sec, CompileBackend be, const char *name, const char *what, const char *why)
{
    tally[sec][be_index(be)].skip++;
    printf("SKIP %s %s (%s, backend %s): %s\n", sec_name[sec], name, what, be_name(be), why);
}

/* Cases that cannot be traced, and why. They still run: a listed case whose
 * tracing fails is skipped; one that now traces counts like any other. */
static const struct {
    const char *prefix, *why;
} untraceable[] = {
    {"batch_norm_train", "training batch_norm updates its running statistics, which tracing does not support yet"},
    {"batch_norm case 1", "training batch_norm updates its running statistics, which tracing does not support yet"},
    {"one_hot_infer", "num_classes -1 reads the index values: a shape that depends on data"},
};

static const char *known_untraceable(const char *name)
{
    size_t i;
    for (i = 0; i < sizeof untraceable / sizeof *untraceable; i++)
        if (strncmp(name, untraceable[i].prefix, strlen(untraceable[i].prefix)) == 0) return untraceable[i].why;
    return NULL;
}

/* ---- programs ---- */

/* A compiled program of graph g with its outputs, run on g's traced inputs.
 * got[i] is output i; 1 on success, else 0 with why set. Checks that the
 * program ran on the backend asked for (not a fallback). */
static int run_program(kn_ctx *ctx, Graph *g, const uint32_t *outs, int nouts, CompileBackend be,
                       kn_tensor **got, int *interp_steps, char *why)
{
    CompileOpts o;
    ProgramStats st;
    const char *want = be == BACKEND_C ? "c" : be == BACKEND_TCC ? "tcc" : "interp";
    double t0 = now();
    memset(&o, 0, sizeof o);
    o.backend = be;
    Program *p = compile_graph(ctx, g, outs, nouts, &o);
    if (be != BACKEND_INTERP) tally[cur_sec][be_index(be)].compile_s += now() - t0;
    if (verbose && be != BACKEND_INTERP) printf("    compiled for %s in %.3f s\n", be_name(be), now() - t0);
    if (!p) {
        snprintf(why, WHY_LEN, "compile_graph failed: %s", kn_last_error(ctx));
        return 0;
    }
    program_stats(p, &st);
    int ok = program_run(p, g->input_vals, (int)g->ninputs, got) == KN_OK;
    if (!ok) snprintf(why, WHY_LEN, "program_run failed: %s", kn_last_error(ctx));
    else if (strcmp(st.backend, want) != 0) {
        snprintf(why, WHY_LEN, "ran on backend %s, not %s", st.backend, want);
        ok = 0;
    } else if (be != BACKEND_INTERP && st.interp_steps > 0) { /* every primitive compiles */
        snprintf(why, WHY_LEN, "%d of its nodes ran on the interpreter", st.interp_steps);
        ok = 0;
    }
    if (interp_steps) *interp_steps = st.interp_steps;
    program_free(p);
    return ok;
}

/* The graph node of a traced result, or 0 (why set) if it is not a value of g. */
static uint32_t node_of(const Graph *g, const kn_tensor *t, const char *what, char *why)
{
    if (t && t->node && t->trace_serial == g->serial) return t->node;
    snprintf(why, WHY_LEN, "%s is not a value of the traced graph", what);
    return 0;
}

/* How far a is from b in units of the tolerance (0 when equal; INFINITY when
 * one is NaN and the other is not, or an infinity differs). */
static double badness(double a, double b, Tol t)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : INFINITY;
    if (isinf(a) || isinf(b)) return a == b ? 0 : INFINITY;
    return fabs(a - b) / (t.atol + t.rtol * fabs(b));
}

/* got against want (the interpreter's): same dtype and shape, floats within
 * tol with its atol scaled by want's largest magnitude (a compiled reduction
 * sums in another order, and its rounding grows with the size of the terms),
 * the rest bit-exact. *worst: the largest badness seen. */
static int same_values(kn_ctx *ctx, kn_tensor *got, kn_tensor *want, Tol tol, const char *what, double *worst,
                       char *why)
{
    int code = kn_dtype_of(want);
    int64_t n = kn_numel(want), i, bad = 0, first = -1;
    size_t bytes = (size_t)n * fx_dtype_size(code);
    double scale = 1;
    unsigned char *a, *b;
    if (kn_dtype_of(got) != kn_dtype_of(want) || kn_ndim(got) != kn_ndim(want) ||
        memcmp(kn_shape(got), kn_shape(want), (size_t)kn_ndim(want) * sizeof(int64_t)) != 0) {
        snprintf(why, WHY_LEN, "%s: dtype or shape differs from the interpreter's", what);
        return 0;
    }
    a = malloc(bytes ? bytes : 1);
    b = malloc(bytes ? bytes : 1);
    if (!a || !b || kn_read(ctx, got, a, bytes) != KN_OK || kn_read(ctx, want, b, bytes) != KN_OK) {
        snprintf(why, WHY_LEN, "%s: reading the values failed: %s", what, kn_last_error(ctx));
        free(a);
        free(b);
        return 0;
    }
    for (i = 0; i < n; i++)
        if (isfinite(elem_real(b, code, i)) && fabs(elem_real(b, code, i)) > scale) scale = fabs(elem_real(b, code, i));
    tol.atol *= scale;
    for (i = 0; i < n; i++) {
        double d = is_float(code) ? badness(elem_real(a, code, i), elem_real(b, code, i), tol) : 0;
        if (d > *worst) *worst = d;
        if (!elem_ok(a, b, code, i, tol) && bad++ == 0) first = i;
    }
    if (bad)
        snprintf(why, WHY_LEN, "%s: %lld of %lld values differ from the interpreter's; first at flat index %lld: "
                 "got %.9g, want %.9g", what, (long long)bad, (long long)n, (long long)first,
                 elem_real(a, code, first), elem_real(b, code, first));
    free(a);
    free(b);
    return bad == 0;
}

/* ---- fixtures: PyTorch's values through the compiled paths ---- */

/* A graph being traced and the context of its tensors: one case's, or a
 * batch of cases that backend c compiles into one program. */
typedef struct {
    kn_ctx *ctx;
    Graph *g;
} Trace;

static int trace_open(Trace *tr)
{
    tr->ctx = kn_ctx_new(NULL);
    tr->g = tr->ctx ? graph_new(tr->ctx) : NULL;
    CHECK_MSG(tr->g != NULL, "out of memory opening a trace");
    return tr->g != NULL;
}

static void trace_close(Trace *tr)
{
    graph_free(tr->g);
    kn_ctx_free(tr->ctx);
    tr->g = NULL;
}

/* One case traced into a Trace: its results, and with grad the gradients of
 * its marked inputs (NULL where backward does not reach). A result can be
 * an input itself, a concrete tensor outside the graph (a transpose of a dim
 * with itself, a cast to its own dtype, batch_norm's running statistics in
 * eval mode): it is compared as it is, and the program computes the rest.
 * status: 1 traced; -1 every result is an input itself, so there is nothing
 * to compile; 0 failed. why says what went wrong. */
typedef struct {
    Call k;
    int grad, status;
    kn_tensor *grads[FX_MAX_TENSORS];
    uint8_t itself[FX_MAX_TENSORS]; /* result i is an input itself */
    uint32_t outs[MAX_OUTS];
    int nres_outs, nouts;           /* the computed results' nodes, then the gradients' */
    char why[WHY_LEN];
} Traced;

/* Result i is one of the op's inputs, not a value of graph g. */
static int input_itself(const Call *k, const Graph *g, int i)
{
    int j;
    for (j = 0; j < k->c->nin; j++)
        if (k->res[i] == k->in[j] && !(k->res[i]->node && k->res[i]->trace_serial == g->serial)) return 1;
    return 0;
}

/* The op (with grad: the loss and autodiff_grads too) traced into tr->g;
 * the caller ends the trace. Returns t->status. */
static int trace_op(Trace *tr, Traced *t)
{
    Call *k = &t->k;
    kn_tensor *loss, *leaves[FX_MAX_TENSORS];
    int i;
    if (!make_stored(k, t->grad, t->why)) return 0;
    tr->ctx->trace = tr->g;
    if (!apply_views(k, t->why)) return 0;
    k->row->run(k);
    for (i = 0; i < k->nres && k->res[i]; i++) {}
    if (k->nres == 0 || i < k->nres || kn_last_status(k->ctx) != KN_OK) {
        snprintf(t->why, WHY_LEN, "tracing the op failed: %s", kn_last_error(k->ctx));
        return 0;
    }
    k->note[0] = 0; /* a traced result has no layout: a program's outputs are fresh contiguous tensors */
    if (!t->grad) return 1;
    for (i = 0; i < k->c->nin; i++) leaves[i] = k->base[i];
    if (!(loss = grad_loss(k)) ||
        (kn_is_requires_grad(loss) && autodiff_grads(k->ctx, loss, k->c->nin, leaves, t->grads) != KN_OK)) {
        snprintf(t->why, WHY_LEN, "tracing the backward failed: %s", kn_last_error(k->ctx));
        return 0;
    }
    return 1;
}

/* Traces case c into tr; a failure (t->status) leaves tr usable. */
static void trace_case(Trace *tr, Traced *t, const FxCase *c, int grad)
{
    Call *k = &t->k;
    int i;
    memset(t, 0, sizeof *t);
    t->grad = grad;
    k->c = c;
    k->ctx = tr->ctx;
    if (!(k->row = find_op(c->op))) {
        snprintf(t->why, WHY_LEN, "the driver does not know op \"%s\"", c->op);
        return;
    }
    t->status = trace_op(tr, t);
    tr->ctx->trace = NULL;
    for (i = 0; t->status == 1 && i < k->nres; i++) {
        char what[32];
        snprintf(what, sizeof what, "result %d", i);
        if ((t->itself[i] = (uint8_t)input_itself(k, tr->g, i))) continue;
        if (!(t->outs[t->nouts++] = node_of(tr->g, k->res[i], what, t->why))) t->status = 0;
    }
    t->nres_outs = t->nouts;
    for (i = 0; t->status == 1 && i < c->nin; i++)
        if (t->grads[i] && !(t->outs[t->nouts++] = node_of(tr->g, t->grads[i], "a gradient", t->why))) t->status = 0;
    if (t->status == 1 && t->nouts == 0) {
        snprintf(t->why, WHY_LEN, "every result is an input itself: there is nothing to compile");
        t->status = -1;
    }
    kn_clear_error(tr->ctx);
}

/* The gradients the joint program gave (got[nres_outs..]) against PyTorch's. */
static int verify_compiled_grads(Traced *t, kn_tensor **got, char *why)
{
    const FxCase *c = t->k.c;
    int i, j = t->nres_outs;
    char what[48];
    for (i = 0; i < c->ngrad; i++) {
        const FxTensor *want = &c->grad[i];
        kn_tensor *g = t->grads[i] ? got[j++] : NULL;
        if (want->code == FX_ABSENT) continue;
        snprintf(what, sizeof what, "gradient of input %d", i);
        if (!g && !all_zero(want)) {
            snprintf(why, WHY_LEN, "%s: backward does not reach it, PyTorch's is nonzero", what);
            return 0;
        }
        if (g && !compare_tensor(t->k.ctx, g, want, what, case_grad_tol(c, want->code), why)) return 0;
    }
    return 1;
}

/* The compiled results (and with grad, gradients) got against PyTorch's. */
static int verify_compiled(Traced *t, kn_tensor **got, char *why)
{
    int i, j = 0;
    for (i = 0; i < t->k.nres; i++)
        if (!t->itself[i]) t->k.res[i] = got[j++];
    if (t->k.row->run == run_contiguous && !kn_is_contiguous(t->k.res[0]))
        snprintf(t->k.note, sizeof t->k.note, "result is not contiguous");
    return verify(&t->k, why) && (!t->grad || verify_compiled_grads(t, got, why));
}

static const char *kind_of(const Traced *t) { return t->grad ? "forward+backward" : "forward"; }

/* A case that did not trace: skipped when there is nothing to compile or its
 * failure is a known one, else failed. 1 if it was counted so. */
static int count_untraced(const Traced *t, CompileBackend be)
{
    const char *gap = known_untraceable(t->k.c->name);
    if (t->status == 1) return 0;
    if (t->status < 0 || gap) count_skip(SEC_FIXTURES, be, t->k.c->name, kind_of(t), t->status < 0 ? t->why : gap);
    else count(SEC_FIXTURES, be, 0, t->k.c->name, kind_of(t), t->why);
    return 1;
}

/* The traced cases ts[0..n) of tr as one program on backend be, each
 * checked against PyTorch. If the program does not compile or run, each case
 * gets a program of its own, so that the failure lands on its case. */
static void fixture_programs(Trace *tr, Traced *ts, int n, CompileBackend be)
{
    uint32_t outs[MAX_OUTS];
    kn_tensor *got[MAX_OUTS];
    char why[WHY_LEN];
    int i, m = 0, steps = 0, ok;
    for (i = 0; i < n; i++) {
        memcpy(outs + m, ts[i].outs, (size_t)ts[i].nouts * sizeof *outs);
        m += ts[i].nouts;
    }
    kn_scope_begin(tr->ctx);
    ok = run_program(tr->ctx, tr->g, outs, m, be, got, &steps, why);
    if (ok) tally[SEC_FIXTURES][be_index(be)].interp_steps += steps > 0;
    for (i = 0, m = 0; ok && i < n; m += ts[i++].nouts)
        count(SEC_FIXTURES, be, verify_compiled(&ts[i], got + m, ts[i].why), ts[i].k.c->name, kind_of(&ts[i]),
              ts[i].why);
    kn_scope_end(tr->ctx);
    kn_clear_error(tr->ctx);
    if (!ok && n == 1) count(SEC_FIXTURES, be, 0, ts[0].k.c->name, kind_of(&ts[0]), why);
    for (i = 0; !ok && n > 1 && i < n; i++) fixture_programs(tr, &ts[i], 1, be);
}

/* Backend tcc: the case's forward (traced without grad, as test_ref's first
 * pass) and, with a gradient part, its joint graph, each a program. */
static void fixture_case(const FxCase *c)
{
    Trace tr;
    Traced t;
    int grad;
    for (grad = 0; grad < (c->ncot ? 2 : 1); grad++) {
        if (!trace_open(&tr)) return;
        trace_case(&tr, &t, c, grad);
        if (!count_untraced(&t, BACKEND_TCC)) fixture_programs(&tr, &t, 1, BACKEND_TCC);
        trace_close(&tr);
    }
}

/* Backend c, each of whose programs costs a run of the system compiler:
 * the joint graphs of the cases cs[0..n) that have a gradient part (their
 * outputs are checked too) and the forward of the rest, as few programs as
 * MAX_OUTS outputs each allow. */
static void fixture_batch(const FxCase *cs, int n)
{
    Traced *ts = malloc((size_t)(n ? n : 1) * sizeof *ts);
    Trace tr;
    int grad, i, nt, nouts;
    CHECK_MSG(ts != NULL, "out of memory for a batch of %d cases", n);
    for (grad = 0; ts && grad < 2; grad++) {
        tr.g = NULL;
        for (i = nt = nouts = 0; i <= n; i++) {
            int want = i < n && (cs[i].ncot > 0) == grad;
            if (tr.g && (i == n || (want && nouts + cs[i].nout + cs[i].nin > MAX_OUTS))) {
                fixture_programs(&tr, ts, nt, BACKEND_C);
                trace_close(&tr);
                nt = nouts = 0;
            }
            if (!want || (!tr.g && !trace_open(&tr))) continue;
            trace_case(&tr, &ts[nt], &cs[i], grad);
            if (!count_untraced(&ts[nt], BACKEND_C)) nouts += ts[nt++].nouts;
        }
    }
    free(ts);
}

/* Overwrites element 0 of a float fixture tensor by far more than its
 * tolerance, keeping the old bytes in saved (8) for unperturb. */
static void perturb(FxTensor *x, unsigned char *saved)
{
    double v = elem_real(x->data, x->code, 0) * 1.01 + 0.01;
    float f = (float)v;
    memcpy(saved, x->data, fx_dtype_size(x->code));
    if (x->code == KN_F32) memcpy(x->data, &f, sizeof f);
    else memcpy(x->data, &v, sizeof v);
}

static void unperturb(FxTensor *x, const unsigned char *saved) { memcpy(x->data, saved, fx_dtype_size(x->code)); }

/* Element 0 of c's first output and of its first float gradient are finite, so that perturb changes them
 * (a NaN stays NaN). */
static int perturbable(const FxCase *c)
{
    int i;
    for (i = 0; i < c->ngrad; i++)
        if (c->grad[i].code == KN_F32 || c->grad[i].code == KN_F64)
            return c->out[0].numel > 0 && c->grad[i].numel > 0 &&
                   isfinite(elem_real(c->out[0].data, c->out[0].code, 0)) &&
                   isfinite(elem_real(c->grad[i].data, c->grad[i].code, 0));
    return 0;
}

/* The comparison with PyTorch catches one wrong output value and one wrong
 * gradient value. c has an f32 output and a gradient part. */
static void fixture_selftest(FxCase *c)
{
    char why[WHY_LEN] = "";
    unsigned char saved[8];
    kn_tensor *got[MAX_OUTS];
    Trace tr;
    Traced t;
    int i, g = -1, ok;
    for (i = 0; i < c->ngrad && g < 0; i++)
        if (c->grad[i].code == KN_F32 || c->grad[i].code == KN_F64) g = i;
    if (!trace_open(&tr)) return;
    trace_case(&tr, &t, c, 1);
    kn_scope_begin(tr.ctx);
    ok = t.status == 1 && g >= 0 && run_program(tr.ctx, tr.g, t.outs, t.nouts, BACKEND_TCC, got, NULL, why);
    CHECK_MSG(ok && verify_compiled(&t, got, why), "self-test on %s: the unperturbed case fails: %s %s", c->name,
              t.why, why);
    if (ok) {
        perturb(&c->out[0], saved);
        CHECK_MSG(!verify_compiled(&t, got, why), "self-test: a wrong output value of %s is not caught", c->name);
        unperturb(&c->out[0], saved);
        perturb(&c->grad[g], saved);
        CHECK_MSG(!verify_compiled(&t, got, why), "self-test: a wrong gradient value of %s is not caught", c->name);
        unperturb(&c->grad[g], saved);
    }
    kn_scope_end(tr.ctx);
    trace_close(&tr);
}

/* An op not seen before in this run (backend c takes each op's first case). */
static int first_of_op(const char *op)
{
    static char seen[256][FX_MAX_NAME];
    static int n;
    int i;
    for (i = 0; i < n; i++)
        if (strcmp(seen[i], op) == 0) return 0;
    if (n < 256) snprintf(seen[n++], FX_MAX_NAME, "%s", op);
    return 1;
}

/* Every case of one file on tcc; the sample for c kept and run as a batch at the end. */
static void fixture_file(const char *file, int have_c, int *selftested)
{
    char path[512];
    FxFile f;
    FxCase *keep = NULL, *more;
    int r, nkeep = 0, i;
    static long index;
    snprintf(path, sizeof path, "%s/%s", FX_DATA_DIR, file);
    if (fx_open(&f, path) != 0) {
        CHECK_MSG(0, "%s", f.error);
        fx_close(&f);
        return;
    }
    for (;;) {
        FxCase c;
        int sample;
        if ((r = fx_next(&f, &c)) != 1) break;
        sample = first_of_op(c.op) || index++ % C_STRIDE == 0;
        if (filter && !strstr(c.name, filter)) {
            fx_case_free(&c);
            continue;
        }
        if (verbose) printf("  %s\n", c.name), fflush(stdout);
        fixture_case(&c);
        if (!*selftested && c.ncot && c.out[0].code == KN_F32 && perturbable(&c)) fixture_selftest(&c), *selftested = 1;
        if (have_c && sample && (more = realloc(keep, (size_t)(nkeep + 1) * sizeof *keep))) {
            keep = more;
            keep[nkeep++] = c; /* its data is freed after the batch */
        } else {
            fx_case_free(&c);
        }
    }
    CHECK_MSG(r == 0, "%s: %s", path, f.error);
    fx_close(&f);
    if (nkeep) fixture_batch(keep, nkeep);
    for (i = 0; i < nkeep; i++) fx_case_free(&keep[i]);
    free(keep);
}

static void fixtures(int have_c)
{
    char file[256];
    long n;
    int selftested = 0;
    FILE *m = fopen(FX_DATA_DIR "/MANIFEST", "r");
    CHECK_MSG(m != NULL, "%s/MANIFEST missing: run tests from the repo root", FX_DATA_DIR);
    if (!m) return;
    while (fscanf(m, "%255s %ld", file, &n) == 2) fixture_file(file, have_c, &selftested);
    fclose(m);
    CHECK_MSG(selftested || filter, "no fixture case had an f32 output and gradients for the self-test");
}

/* ---- against the interpreter: gradcheck's cases and odd shapes ---- */

/* Oracle tolerance: the compiled code may sum in another order and use the C
 * renderer's own exp, log, tanh and erf (under 1.5 ulp). */
static Tol oracle_tol(kn_dtype dt) { return grad_tol(dt); }

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static double rng_normal(uint64_t *s) /* Box-Muller */
{
    double u = (double)(rng_next(s) >> 11) / 9007199254740992.0, v = (double)(rng_next(s) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

/* A concrete tensor of N(0, 1) values of dtype dt (f32 or f64), made from
 * bytes so that it is concrete while tracing too. */
static kn_tensor *randn(kn_ctx *ctx, uint64_t *rng, kn_dtype dt, int ndim, const int64_t *shape)
{
    int64_t i, n = tensor_numel(ndim, shape);
    size_t sz = kn_dtype_size(dt);
    unsigned char *buf = malloc(n ? (size_t)n * sz : 1);
    kn_tensor *t;
    if (!buf) return kn_err(ctx, KN_ENOMEM, "out of memory in the test");
    for (i = 0; i < n; i++) dt_store(dt, buf + (size_t)i * sz, rng_normal(rng));
    t = kn_tensor_from(ctx, dt, ndim, shape, buf);
    free(buf);
    return t;
}

/* Traced forward results y[] of leaves, the loss sum_i sum(y_i * w_i) for
 * random cotangents w_i, and the gradient of every leaf; outs = {y...,
 * gradients reached}. */
typedef struct {
    kn_ctx *ctx;
    Graph *g;
    uint64_t rng;
    int nleaves, ny, nouts;
    kn_tensor *leaf[MAX_LEAVES];
    uint32_t outs[MAX_OUTS];
    char yname[MAX_OUTS][24]; /* what each result is, for messages */
} Joint;

/* Traces the loss and gradients of j's results (traced in j->g) and ends the
 * trace; 1, or 0 with why set. */
static int trace_backward(Joint *j, kn_tensor *const *y, char *why)
{
    kn_tensor *grads[MAX_LEAVES], *loss = NULL, *w;
    int i, ok = j->ny > 0;
    for (i = 0; ok && i < j->ny; i++) {
        w = y[i] ? randn(j->ctx, &j->rng, kn_dtype_of(y[i]), kn_ndim(y[i]), kn_shape(y[i])) : NULL;
        w = w ? kn_sum(j->ctx, kn_mul(j->ctx, y[i], w), NULL, 0, 0) : NULL;
        ok = w && (loss = loss ? kn_add(j->ctx, loss, w) : w) != NULL;
    }
    ok = ok && autodiff_grads(j->ctx, loss, j->nleaves, j->leaf, grads) == KN_OK;
    j->ctx->trace = NULL;
    if (!ok) {
        snprintf(why, WHY_LEN, "tracing failed: %s", kn_last_error(j->ctx));
        return 0;
    }
    for (i = 0; ok && i < j->ny; i++) ok = (j->outs[j->nouts++] = node_of(j->g, y[i], j->yname[i], why)) != 0;
    for (i = 0; ok && i < j->nleaves; i++)
        if (grads[i]) ok = (j->outs[j->nouts++] = node_of(j->g, grads[i], "a gradient", why)) != 0;
    if (ok && j->nouts == j->ny) snprintf(why, WHY_LEN, "no leaf gets a gradient"), ok = 0;
    return ok;
}

/* The forward program (the results; with forward) and the joint one
 * (results and gradients) on be against the same programs on the
 * interpreter. traced: trace_backward succeeded (else why0 says what failed). */
static void against_interp(int sec, const char *name, Joint *j, int traced, CompileBackend be, int forward,
                           const char *why0)
{
    char why[WHY_LEN], what[48];
    kn_tensor *got[MAX_OUTS], *want[MAX_OUTS];
    Tally *t = &tally[sec][be_index(be)];
    int joint, i, steps = 0, ok;
    for (joint = !forward; joint < 2; joint++) {
        int n = joint ? j->nouts : j->ny;
        if (!traced && known_untraceable(name)) {
            count_skip(sec, be, name, joint ? "forward+backward" : "forward", known_untraceable(name));
            continue;
        }
        snprintf(why, WHY_LEN, "%s", why0);
        kn_scope_begin(j->ctx);
        ok = traced && run_program(j->ctx, j->g, j->outs, n, BACKEND_INTERP, want, NULL, why);
        ok = ok && run_program(j->ctx, j->g, j->outs, n, be, got, &steps, why);
        for (i = 0; ok && i < n; i++) {
            if (i < j->ny) snprintf(what, sizeof what, "%s", j->yname[i]);
            else snprintf(what, sizeof what, "gradient %d", i - j->ny);
            ok = same_values(j->ctx, got[i], want[i], oracle_tol(kn_dtype_of(want[i])), what, &t->worst, why);
        }
        kn_scope_end(j->ctx);
        kn_clear_error(j->ctx);
        t->interp_steps += steps > 0;
        count(sec, be, ok, name, joint ? "forward+backward" : "forward", why);
    }
}

/* Every case of every gradcheck check, compiled with tcc against the interpreter. */
static void gradchecks(void)
{
    char name[96], why[WHY_LEN];
    int i, v;
    for (i = 0; gradcheck_name(i); i++)
        for (v = 0; v < gradcheck_ncases(i); v++) {
            kn_tensor *y;
            Joint j;
            GradcheckCase *gc;
            int ok;
            snprintf(name, sizeof name, "%s case %d", gradcheck_name(i), v);
            if (filter && !strstr(name, filter)) continue;
            if (verbose) printf("  %s\n", name), fflush(stdout);
            memset(&j, 0, sizeof j);
            if (!(j.ctx = kn_ctx_new(NULL))) {
                CHECK_MSG(0, "kn_ctx_new failed");
                return;
            }
            j.rng = (uint64_t)i << 8 | (uint64_t)v;
            j.ny = 1;
            snprintf(j.yname[0], sizeof j.yname[0], "the result");
            /* the first forward, eager, makes the leaves */
            gc = gradcheck_case(j.ctx, i, v);
            kn_scope_begin(j.ctx);
            ok = gc && gradcheck_forward(gc) != NULL;
            kn_scope_end(j.ctx);
            snprintf(why, WHY_LEN, "the eager forward failed: %s", kn_last_error(j.ctx));
            if (ok) {
                j.nleaves = gradcheck_leaves(gc, j.leaf);
                j.g = j.ctx->trace = graph_new(j.ctx);
                y = gradcheck_forward(gc);
                ok = j.g && trace_backward(&j, &y, why);
            }
            against_interp(SEC_GRADCHECK, name, &j, ok, BACKEND_TCC, 1, why);
            gradcheck_case_free(gc);
            graph_free(j.g);
            kn_ctx_free(j.ctx);
        }
}

/* ---- odd sizes, broadcast and non-contiguous inputs ---- */

/* A new leaf of N(0, 1) f32 values that requires grad. */
static kn_tensor *leaf(Joint *j, int ndim, const int64_t *shape)
{
    kn_tensor *t = randn(j->ctx, &j->rng, KN_F32, ndim, shape);
    if (!t || j->nleaves == MAX_LEAVES) return NULL;
    return j->leaf[j->nleaves++] = kn_requires_grad(j->ctx, t, 1);
}

/* The size after n in sizes[], for a second dimension that differs from n. */
static int64_t next_size(int64_t n)
{
    int i;
    for (i = 0; i < NSIZES - 1; i++)
        if (sizes[i] == n) return sizes[i + 1];
    return sizes[0];
}

typedef kn_tensor *(*ShapeBody)(Joint *j, int64_t n);

/* (3, n): a transposed leaf, a row broadcast over rows, a Python number; where over a comparison */
static kn_tensor *s_pointwise(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    kn_tensor *x = leaf(j, 2, (int64_t[]){3, n});
    kn_tensor *xt = kn_transpose(c, leaf(j, 2, (int64_t[]){n, 3}), 0, 1);
    kn_tensor *row = leaf(j, 1, &n);
    kn_tensor *y = kn_tanh(c, kn_add(c, kn_mul(c, x, kn_scalar(c, 1.5)), kn_exp(c, row)));
    return kn_where(c, kn_gt(c, xt, kn_scalar(c, 0.0)), kn_mul(c, y, kn_sigmoid(c, xt)), kn_sub(c, y, xt));
}

/* (4, n + 3): every other column of a (4, 2n + 1) leaf times an expanded column, padded, gelu */
static kn_tensor *s_strided(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    kn_tensor *x = kn_slice(c, leaf(j, 2, (int64_t[]){4, 2 * n + 1}), 1, 1, 2 * n + 1, 2);
    kn_tensor *col = kn_expand(c, leaf(j, 2, (int64_t[]){4, 1}), 2, (int64_t[]){4, n});
    return kn_gelu(c, kn_pad(c, kn_mul(c, x, col), 2, (int64_t[]){1, 2}, 0.5), 0);
}

/* (5, n) from a transposed leaf: softmax along rows plus row sum times row max */
static kn_tensor *s_reduce_rows(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    int d = 1;
    kn_tensor *x = kn_transpose(c, leaf(j, 2, (int64_t[]){n, 5}), 0, 1);
    kn_tensor *sm = kn_mul(c, kn_sum(c, x, &d, 1, 1), kn_amax(c, x, &d, 1, 1));
    return kn_add(c, kn_softmax(c, x, 1), sm);
}

/* (6): reductions down the n rows of a (n, 6) leaf: variance, logsumexp, mean of the log_softmax */
static kn_tensor *s_reduce_cols(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    int d = 0;
    kn_tensor *x = leaf(j, 2, (int64_t[]){n, 6});
    kn_tensor *v = kn_add(c, kn_var(c, x, &d, 1, 0, 0), kn_logsumexp(c, x, &d, 1, 0));
    return kn_add(c, v, kn_mean(c, kn_log_softmax(c, x, 0), &d, 1, 0));
}

/* (7, n, 3): reductions over leading, middle and several dims, which the scheduler may fuse into their
 * reader's kernel only where they are trailing: a sum over dim 0 and a mean over dim 1 (kept) of a (7,
 * n, 3) leaf, an amax over dims {0, 2} (kept) of one seen transposed from (3, n, 7), an amin over the
 * trailing {1, 2} (kept), each read back by one pointwise kernel of the leaf's shape */
static kn_tensor *s_reduce_dims(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    int d0 = 0, d1 = 1, d02[2] = {0, 2}, d12[2] = {1, 2};
    kn_tensor *x = leaf(j, 3, (int64_t[]){7, n, 3});
    kn_tensor *xt = kn_transpose(c, leaf(j, 3, (int64_t[]){3, n, 7}), 0, 2);
    kn_tensor *a = kn_sum(c, x, &d0, 1, 0);                      /* (n, 3) */
    kn_tensor *b = kn_amax(c, xt, d02, 2, 1);                    /* (1, n, 1) */
    kn_tensor *m = kn_mean(c, kn_mul(c, x, xt), &d1, 1, 1);      /* (7, 1, 3) */
    kn_tensor *e = kn_amin(c, kn_exp(c, xt), d12, 2, 1);         /* (7, 1, 1) */
    return kn_add(c, kn_add(c, kn_mul(c, x, b), a), kn_mul(c, m, e));
}

/* (7, n, 3): a softmax down dim 0 and a normalisation over dims {0, 2} of a (7, n, 3) leaf (x minus its
 * mean, times the reciprocal root of its variance), each a reduction read back at the row's position,
 * plus the sum over {0, 2} of a transposed leaf (not kept) */
static kn_tensor *s_norm_dims(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    int d02[2] = {0, 2};
    kn_tensor *x = leaf(j, 3, (int64_t[]){7, n, 3});
    kn_tensor *xt = kn_transpose(c, leaf(j, 3, (int64_t[]){3, n, 7}), 0, 2);
    kn_tensor *z = kn_sub(c, x, kn_mean(c, x, d02, 2, 1));
    kn_tensor *r = kn_rsqrt(c, kn_add(c, kn_var(c, x, d02, 2, 1, 1), kn_scalar(c, 1e-3)));
    kn_tensor *s = kn_reshape(c, kn_sum(c, xt, d02, 2, 0), 3, (int64_t[]){1, n, 1});
    return kn_add(c, kn_add(c, kn_softmax(c, x, 0), kn_mul(c, z, r)), s);
}

/* (3, n): layer_norm with weight and bias, and rms_norm of a transposed leaf */
static kn_tensor *s_norm(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    kn_tensor *x = leaf(j, 2, (int64_t[]){3, n}), *w = leaf(j, 1, &n), *b = leaf(j, 1, &n);
    kn_tensor *xt = kn_transpose(c, leaf(j, 2, (int64_t[]){n, 3}), 0, 1);
    return kn_add(c, kn_layer_norm(c, x, 1, &n, w, b, 1e-5), kn_rms_norm(c, xt, 1, &n, NULL, 1e-6));
}

/* (3, n): cumsum along rows, plus integer work: argmax and a cast through i32 */
static kn_tensor *s_scan_ints(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    kn_tensor *x = leaf(j, 2, (int64_t[]){3, n});
    kn_tensor *i = kn_fmod(c, kn_to(c, kn_mul(c, x, kn_scalar(c, 10.0)), KN_I32), kn_scalar(c, 3.0));
    kn_tensor *am = kn_to(c, kn_argmax(c, x, 1, 1), KN_F32);
    return kn_add(c, kn_cumsum(c, x, 1), kn_mul(c, kn_to(c, i, KN_F32), am));
}

/* (3, n, 6): an embedding of i64 tokens into an (m, 6) table plus a gather of i32 rows of a
 * transposed leaf, plus the sum of a scatter_add of an (n, 6) leaf into another; m the next size.
 * Backward: the embedding's scatter_add, the gather's, and scatter_add's gather of its src. */
static kn_tensor *s_index(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    int64_t m = next_size(n), tok[3 * 65], rows[65 * 6], ts[2] = {3, n}, rs[2] = {n, 6};
    int64_t i;
    for (i = 0; i < 3 * n; i++) tok[i] = (i * 7 + 1) % m;
    for (i = 0; i < 6 * n; i++) rows[i] = (i * 5 + i / 6) % m; /* rows repeat: scatter_add adds several */
    kn_tensor *w = leaf(j, 2, (int64_t[]){m, 6}), *xt = kn_transpose(c, leaf(j, 2, (int64_t[]){6, m}), 0, 1);
    kn_tensor *r = kn_tensor_from(c, KN_I64, 2, rs, rows);
    kn_tensor *e = kn_embedding(c, w, kn_tensor_from(c, KN_I64, 2, ts, tok));
    kn_tensor *g = kn_gather(c, xt, 0, kn_to(c, r, KN_I32));
    kn_tensor *sc = kn_scatter_add(c, leaf(j, 2, (int64_t[]){m, 6}), 0, r, leaf(j, 2, rs));
    return kn_add(c, kn_add(c, e, kn_unsqueeze(c, g, 0)), kn_sum(c, sc, NULL, 0, 0));
}

/* (4, 6n): the softmax along rows of a permuted leaf read back flat, (2, n, 3, 4) permuted to (4, 2,
 * 3, n) and reshaped, whose row loops of 6n divide and reduce by n and 3n (loopopt splits them), plus
 * the tanh of a transposed (6n, 4) leaf */
static kn_tensor *s_reshape(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    kn_tensor *x = kn_permute(c, leaf(j, 4, (int64_t[]){2, n, 3, 4}), (int[]){3, 0, 2, 1});
    kn_tensor *xt = kn_transpose(c, leaf(j, 2, (int64_t[]){6 * n, 4}), 0, 1);
    return kn_add(c, kn_softmax(c, kn_reshape(c, x, 2, (int64_t[]){4, 6 * n}), 1), kn_tanh(c, xt));
}

/* (n, m) = (n, k) @ (k, m) with b a transposed leaf; k and m the next sizes */
static kn_tensor *s_matmul(Joint *j, int64_t n)
{
    int64_t k = next_size(n), m = next_size(k);
    kn_tensor *a = leaf(j, 2, (int64_t[]){n, k});
    kn_tensor *b = kn_transpose(j->ctx, leaf(j, 2, (int64_t[]){m, k}), 0, 1);
    return kn_matmul(j->ctx, a, b);
}

/* (n, m): gelu(x w^T + b) + r, the bias, activation and residual epilogue of a dot */
static kn_tensor *s_linear(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    int64_t m = next_size(n);
    kn_tensor *x = leaf(j, 2, (int64_t[]){n, 17}), *w = leaf(j, 2, (int64_t[]){m, 17}), *b = leaf(j, 1, &m);
    return kn_add(c, kn_gelu(c, kn_linear(c, x, w, b), 1), leaf(j, 2, (int64_t[]){n, m}));
}

/* (2, n, m): a bmm of a (2, n, 7) batch by one (7, m) leaf expanded over the batch (batch stride 0) */
static kn_tensor *s_batched(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    int64_t m = next_size(n);
    kn_tensor *a = leaf(j, 3, (int64_t[]){2, n, 7});
    kn_tensor *b = kn_expand(c, kn_unsqueeze(c, leaf(j, 2, (int64_t[]){7, m}), 0), 3, (int64_t[]){2, 7, m});
    return kn_bmm(c, a, b);
}

/* conv2d with bias, stride 2, padding 1 on an NHWC leaf seen as NCHW (a permuted view), then relu */
static kn_tensor *s_conv(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    kn_conv_opts o = {{2, 2}, {1, 1}, {1, 1}, {0, 0}, 1};
    kn_tensor *x = kn_permute(c, leaf(j, 4, (int64_t[]){2, n, n + 2, 3}), (int[]){0, 3, 1, 2});
    kn_tensor *w = leaf(j, 4, (int64_t[]){4, 3, 3, 3}), *b = leaf(j, 1, (int64_t[]){4});
    return kn_relu(c, kn_conv2d(c, x, w, b, &o));
}

/* conv2d in 2 groups, dilation (2, 1), padding (2, 0), no bias */
static kn_tensor *s_conv_grouped(Joint *j, int64_t n)
{
    kn_conv_opts o = {{1, 1}, {2, 0}, {2, 1}, {0, 0}, 2};
    kn_tensor *x = leaf(j, 4, (int64_t[]){1, 4, n, n}), *w = leaf(j, 4, (int64_t[]){6, 2, 3, 1});
    return kn_conv2d(j->ctx, x, w, NULL, &o);
}

/* conv2d read as implicit GEMM at odd geometry: batch 1, kernel (3, 2),
 * stride (2, 1), padding (0, 2), dilation (1, 2), on an input sliced every
 * other column (a non-contiguous view), plus bias */
static kn_tensor *s_conv_odd(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    kn_conv_opts o = {{2, 1}, {0, 2}, {1, 2}, {0, 0}, 1};
    kn_tensor *x = kn_slice(c, leaf(j, 4, (int64_t[]){1, 3, n + 2, 2 * n + 1}), 3, 0, 2 * n + 1, 2); /* (1, 3, n + 2, n + 1) */
    kn_tensor *w = leaf(j, 4, (int64_t[]){5, 3, 3, 2}), *b = leaf(j, 1, (int64_t[]){5});
    return kn_conv2d(c, x, w, b, &o);
}

/* 1x1 convolutions, a ResNet shortcut's (stride 2) and a grouped one (3
 * groups, stride 1: the window is the input itself), summed */
static kn_tensor *s_conv_1x1(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    kn_conv_opts s2 = {{2, 2}, {0, 0}, {1, 1}, {0, 0}, 1}, g3 = {{1, 1}, {0, 0}, {1, 1}, {0, 0}, 3};
    kn_tensor *x = leaf(j, 4, (int64_t[]){2, 6, n, n});
    kn_tensor *a = kn_conv2d(c, x, leaf(j, 4, (int64_t[]){3, 6, 1, 1}), NULL, &s2);
    kn_tensor *b = kn_conv2d(c, x, leaf(j, 4, (int64_t[]){3, 2, 1, 1}), NULL, &g3);
    return kn_add(c, kn_sum(c, a, NULL, 0, 0), kn_sum(c, b, NULL, 0, 0));
}

/* max_pool2d and avg_pool2d (kernel 3, stride 2, padding 1) of a (1, 2, n, n + 2) leaf */
static kn_tensor *s_pool(Joint *j, int64_t n)
{
    kn_ctx *c = j->ctx;
    kn_pool_opts mp = {{3, 3}, {2, 2}, {1, 1}, {1, 1}, 0, 0, 0}, ap = {{3, 3}, {2, 2}, {1, 1}, {1, 1}, 0, 1, 0};
    kn_tensor *x = leaf(j, 4, (int64_t[]){1, 2, n, n + 2});
    return kn_add(c, kn_max_pool2d(c, x, &mp), kn_avg_pool2d(c, x, &ap));
}

/* Backend c compiles one joint program of a family (its outputs include
 * the forward's), at every size but for heavy families, whose dots each
 * cost the system compiler a GEMM template: those take sizes 1, 17 and 65
 * (k and m follow n, so each dim still meets most sizes). fwd_c: a forward
 * program too, where a dot's epilogue fuses only when no backward reads the
 * dot's value. */
static const int heavy_sizes[] = {1, 17, 65};

static const struct {
    const char *name;
    ShapeBody f;
    int heavy, fwd_c;
} shape_cases[] = {
    {"pointwise", s_pointwise, 0, 0}, {"strided", s_strided, 0, 0},   {"reduce_rows", s_reduce_rows, 0, 0},
    {"reduce_cols", s_reduce_cols, 0, 0}, {"norm", s_norm, 0, 0},     {"scan_ints", s_scan_ints, 0, 0},
    {"reduce_dims", s_reduce_dims, 0, 0}, {"norm_dims", s_norm_dims, 0, 0},
    {"index", s_index, 0, 0},         {"reshape", s_reshape, 0, 0},
    {"matmul", s_matmul, 1, 0},       {"linear", s_linear, 1, 1},     {"batched", s_batched, 1, 0},
    {"conv", s_conv, 1, 0},           {"conv_grouped", s_conv_grouped, 1, 0}, {"conv_odd", s_conv_odd, 1, 0},
    {"conv_1x1", s_conv_1x1, 1, 0},   {"pool", s_pool, 1, 0},
};

/* Family f at the sizes ns[0..nn), traced into one graph, on backend be against the interpreter. */
static void shape_case(int f, const int *ns, int nn, CompileBackend be)
{
    char name[64], why[WHY_LEN] = "";
    kn_tensor *y[NSIZES];
    Joint j;
    int i, ok;
    size_t at;
    at = (size_t)snprintf(name, sizeof name, "%s n=", shape_cases[f].name);
    for (i = 0; i < nn && at < sizeof name; i++) at += (size_t)snprintf(name + at, sizeof name - at, i ? ",%d" : "%d", ns[i]);
    if (filter && !strstr(name, filter)) return;
    if (verbose) printf("  %s (%s)\n", name, be_name(be)), fflush(stdout);
    memset(&j, 0, sizeof j);
    if (!(j.ctx = kn_ctx_new(NULL))) {
        CHECK_MSG(0, "kn_ctx_new failed");
        return;
    }
    j.rng = (uint64_t)f * 1000 + (uint64_t)ns[0];
    j.g = j.ctx->trace = graph_new(j.ctx);
    for (i = 0; i < nn; i++) {
        y[i] = shape_cases[f].f(&j, ns[i]);
        snprintf(j.yname[i], sizeof j.yname[i], "the result for n=%d", ns[i]);
    }
    j.ny = nn;
    ok = j.g && trace_backward(&j, y, why);
    against_interp(SEC_SHAPES, name, &j, ok, be, be != BACKEND_C || shape_cases[f].fwd_c, why);
    graph_free(j.g);
    kn_ctx_free(j.ctx);
}

/* Every family: on tcc each size in programs of its own, on c the sizes
 * together (see heavy_sizes). */
static void shapes(int have_c)
{
    size_t f;
    int i;
    for (f = 0; f < sizeof shape_cases / sizeof *shape_cases; f++) {
        for (i = 0; i < NSIZES; i++) shape_case((int)f, &sizes[i], 1, BACKEND_TCC);
        if (have_c && shape_cases[f].heavy) shape_case((int)f, heavy_sizes, 3, BACKEND_C);
        else if (have_c) shape_case((int)f, sizes, NSIZES, BACKEND_C);
    }
}

/* The comparison with the interpreter catches one wrong value. */
static void interp_selftest(void)
{
    char why[WHY_LEN] = "";
    kn_tensor *got, *want, *y;
    double worst = 0;
    Joint j;
    int ok;
    memset(&j, 0, sizeof j);
    j.ctx = kn_ctx_new(NULL);
    j.g = j.ctx->trace = graph_new(j.ctx);
    y = s_pointwise(&j, 7);
    j.ny = 1;
    ok = trace_backward(&j, &y, why);
    kn_scope_begin(j.ctx);
    ok = ok && run_program(j.ctx, j.g, j.outs, 1, BACKEND_INTERP, &want, NULL, why) &&
         run_program(j.ctx, j.g, j.outs, 1, BACKEND_TCC, &got, NULL, why);
    CHECK_MSG(ok && same_values(j.ctx, got, want, oracle_tol(KN_F32), "y", &worst, why),
              "self-test: the unperturbed program differs: %s", why);
    if (ok) {
        float *p = tensor_ptr(got, got->offset + 5);
        *p = *p * 1.01f + 0.01f;
        CHECK_MSG(!same_values(j.ctx, got, want, oracle_tol(KN_F32), "y", &worst, why),
                  "self-test: a wrong value is not caught");
    }
    kn_scope_end(j.ctx);
    graph_free(j.g);
    kn_ctx_free(j.ctx);
}

/* ---- a fresh cache directory for backend c ---- */

#if HAVE_POSIX
static char cache_dir[512];

static void remove_dir(const char *dir)
{
    char path[1024];
    struct dirent *e;
    DIR *d = opendir(dir);
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (unlink(path)) remove_dir(path);
        }
    if (d) closedir(d);
    rmdir(dir);
}

static int fresh_cache(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(cache_dir, sizeof cache_dir, "%s/kiln-test-compiled-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(cache_dir) && setenv("KILN_CACHE_DIR", cache_dir, 1) == 0;
}
#endif

int main(int argc, char **argv)
{
    int i, s, b, have_tcc, have_c;
    double t0 = now();
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0) verbose = 1;
        else filter = argv[i];
    }
#if HAVE_POSIX
    CHECK_MSG(fresh_cache(), "cannot make a fresh KILN_CACHE_DIR under $TMPDIR or /tmp");
#endif
    have_tcc = port_jit_available(PORT_TCC);
    have_c = port_jit_available(PORT_CC);
    if (!have_tcc) /* nothing would be compiled: every program would run on the interpreter */
        printf("SKIP test_compiled: no TinyCC on this platform (%s): nothing is checked\n", port_name());
    else if (!have_c)
        printf("SKIP test_compiled backend c: no system compiler here\n");
    if (have_tcc) {
        cur_sec = SEC_FIXTURES;
        fixtures(have_c);
        cur_sec = SEC_GRADCHECK;
        gradchecks();
        cur_sec = SEC_SHAPES;
        shapes(have_c);
        interp_selftest();
    }
#if HAVE_POSIX
    if (cache_dir[0]) remove_dir(cache_dir);
#endif
    for (s = 0; s < NSEC; s++)
        for (b = 0; b < 2; b++) {
            Tally *t = &tally[s][b];
            if (!t->pass && !t->fail && !t->skip) continue;
            printf("test_compiled: %-9s on %-3s: %4d passed, %d failed, %d skipped; %d programs with interpreter "
                   "steps; %.1f s compiling", sec_name[s], b ? "c" : "tcc", t->pass, t->fail, t->skip,
                   t->interp_steps, t->compile_s);
            if (s != SEC_FIXTURES) printf("; largest difference %.2g of the tolerance", t->worst);
            printf("\n");
        }
    printf("test_compiled: %.1f s\n", now() - t0);
    TEST_END("test_compiled");
}
