#!/usr/bin/python3
"""mutate.py -- mutation testing: do the tests kill small plausible bugs?

    make mutate                                  (nice -n 10 /usr/bin/python3 tests/mutate.py)
    /usr/bin/python3 tests/mutate.py [--list] [--only NAME,...] [--no-baseline] [--keep] [-j N]

Each entry of MUTATIONS below is one small bug of the kind a change could
bring in (an off-by-one, a dropped NaN check, a tie given the whole gradient,
a sign), written as an exact text substitution in one file. For each, in a
fresh copy of the tree (the working tree's tracked and unignored files, built
once; the working tree itself is never written), the script applies the
substitution, rebuilds, and runs the native test programs: first the ones the
entry names as most likely to kill it, stopping at the first that fails (the
mutant is killed), then, while it lives, every other one (a survivor has run
the whole native suite). A test program fails when it exits nonzero, prints
no "NAME: P passed, F failed" summary, reports F > 0, or runs past the hang
guard (HANG_S; a mutant that loops forever is killed by that test). The
report gives each mutant's fate and its killer, then the kill rate.

Every substitution must find its text exactly once in its file: the script
checks them all before building anything and stops with the stale ones
listed, so the list stays valid as the code changes (fix the entry, or
replace it with a bug of the same kind in the new code).

An entry marked equivalent is a mutant that changes no value a program
computes (a heuristic of speed or memory); it is listed with the reason, and
the kill rate is given over all entries and over the others.

--no-baseline skips running the suite on the unmutated copy first (which
checks that every test passes before mutants are judged by it). Backend c's
compiles go to a cache directory of the run's own (KILN_CACHE_DIR), never the
shared one. Exit status: 0 when every non-equivalent mutant is killed, 1 when
one survives, 2 when an entry does not apply or a copy does not build.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HANG_S = 1800  # a hang guard, not a timing bound: test_compiled takes minutes on a loaded machine


class M:
    """One mutant: name, pipeline stage, file, old text (exactly once there), new text, the test
    programs most likely to kill it, and for an equivalent mutant the reason it changes no value."""

    def __init__(self, name, area, path, old, new, tests, equivalent=None):
        self.name, self.area, self.path, self.old, self.new = name, area, path, old, new
        self.tests, self.equivalent = tests, equivalent


MUTATIONS = [
    # ---- interpreter: the oracle every compiled result is checked against
    M("interp-max-drops-nan", "interpreter", "src/interp.c",
      "case OP_MAX: return a != a || b != b ? NAN : a > b ? a : b;",
      "case OP_MAX: return a > b ? a : b;",
      ["test_ref", "test_eager", "test_ops"]),
    M("interp-reduce-max-drops-nan", "interpreter", "src/interp.c",
      "else if (af[o] == af[o] && (v != v || v > af[o])) af[o] = v;",
      "else if (v > af[o]) af[o] = v;",
      ["test_ref", "test_eager"]),
    # ---- VJP rules
    M("vjp-max-tie-whole-gradient", "VJPs", "src/autodiff.c",
      "kn_tensor *half = p_full(ctx, (kn_dtype)g->dtype, g->ndim, g->shape, 0.5);",
      "kn_tensor *half = p_full(ctx, (kn_dtype)g->dtype, g->ndim, g->shape, 1.0);",
      ["test_ref", "test_compiled"]),
    M("vjp-reduce-max-ignores-count", "VJPs", "src/autodiff.c",
      "kn_tensor *share = prim2(ctx, OP_DIV, g, count);",
      "kn_tensor *share = prim2(ctx, OP_MUL, g, count);",
      ["test_ref", "test_autodiff"]),
    M("vjp-div-sign", "VJPs", "src/autodiff.c",
      "return prim1(ctx, OP_NEG, prim2(ctx, OP_DIV, prim2(ctx, OP_MUL, g, out), y));",
      "return prim2(ctx, OP_DIV, prim2(ctx, OP_MUL, g, out), y);",
      ["test_autodiff", "test_gradcheck", "test_ref"]),
    # ---- decompositions: PyTorch's conventions at ties and bounds
    M("clamp-min-before-max", "decompositions", "src/decomp.c",
      "    if (has_lo) y = binc(ctx, OP_MAX, y, lo);\n    if (has_hi) y = binc(ctx, OP_MIN, y, hi);",
      "    if (has_hi) y = binc(ctx, OP_MIN, y, hi);\n    if (has_lo) y = binc(ctx, OP_MAX, y, lo);",
      ["test_ref"]),
    M("max-pool-last-maximum", "decompositions", "src/decomp_conv.c",
      "kn_tensor *take = prim2(ctx, OP_CMPLT, m, w);",
      "kn_tensor *take = prim2(ctx, OP_MAX, prim2(ctx, OP_CMPLT, m, w), prim2(ctx, OP_CMPEQ, m, w));",
      ["test_ref", "test_pool"]),
    M("hardswish-joint-at-3", "decompositions", "src/decomp_nn.c",
      "kn_tensor *upto3 = is_at_most(ctx, xf, 3.0);",
      "kn_tensor *upto3 = binc(ctx, OP_CMPLT, xf, 3.0);",
      ["test_ref"]),
    # ---- partitioner
    M("partition-cut-level", "partitioner", "src/partition.c",
      "if (!recomputable(n, level)) flow_edge(f, 0, V_IN(k), INF);",
      "if (!recomputable(n, level + 1)) flow_edge(f, 0, V_IN(k), INF);",
      ["test_partition", "test_capture"]),
    # ---- scheduler
    M("sched-index-not-anchor", "scheduler", "src/sched.c",
      "return c == OC_REDUCE || c == OC_DOT || c == OC_INDEX;",
      "return c == OC_REDUCE || c == OC_DOT;",
      ["test_sched", "test_compiled"]),
    M("sched-fuse-non-trailing", "scheduler", "src/sched.c",
      "        else if (seen_kept) return 0;",
      "        else if (seen_kept) return red != 0;",
      ["test_sched", "test_compiled"],
      equivalent="lower.c's row kernels loop over any mask of kept and reduced dims, so fusing a reduction "
                 "over non-trailing dims changes memory order, not values: test_sched's golden schedule "
                 "pins it, and no numeric test can"),
    # ---- loop passes
    M("loopopt-split-div-bound", "loop passes", "src/loopopt.c",
      "if (!r || !opt_range(o, r, &l, &h) || l < 0 || h >= g) continue;",
      "if (!r || !opt_range(o, r, &l, &h) || l < 0 || h > g) continue;",
      ["test_loopopt", "test_compiled"]),
    M("loopopt-mod-drops-offset", "loop passes", "src/loopopt.c",
      ": expr_sub(t, args[0], expr_const(t, opt_fdiv(l, c) * c));",
      ": args[0];",
      ["test_loopopt", "test_compiled"]),
    # ---- renderers
    M("render-cmpeq-as-le", "renderers", "targets/c/render.c",
      '[OP_CMPEQ] = {0, "(%0 == %1)", "(%0 == %1)", NULL},',
      '[OP_CMPEQ] = {0, "(%0 <= %1)", "(%0 == %1)", NULL},',
      ["test_render", "test_compiled"]),
    M("render-bool-and-as-or", "renderers", "targets/c/render.c",
      '[OP_MIN] = {0, "kn_min%f(%0, %1)", "kn_imin(%0, %1)", "(%0 & %1)"},',
      '[OP_MIN] = {0, "kn_min%f(%0, %1)", "kn_imin(%0, %1)", "(%0 | %1)"},',
      ["test_render", "test_compiled"]),
    # ---- GEMM
    M("gemm-edge-tile-test", "GEMM", "targets/c/gemm.c",
      '"                            if (h == %d && w == %d) {\\n"',
      '"                            if (h == %d || w == %d) {\\n"',
      ["test_gemm", "test_compiled"]),
    M("gemm-rt-add-overwrites", "GEMM", "src/gemm_rt.c",
      "for (j = 0; j < NR; j++) c[i * ldc + j] += acc[i][j];",
      "for (j = 0; j < NR; j++) c[i * ldc + j] = acc[i][j];",
      ["test_gemm_rt", "test_gemm"]),
    # ---- guards and capture
    M("guard-skips-last-dim", "guards", "src/capture.c",
      "        for (int d = 0; d < t->ndim; d++) {\n            if (g->sym[d] && s0 < 0 && t->shape[d] < 2)",
      "        for (int d = 0; d < t->ndim - 1; d++) {\n            if (g->sym[d] && s0 < 0 && t->shape[d] < 2)",
      ["test_dynamic", "test_capture"]),
    M("capture-recompile-limit-off-by-one", "capture", "src/capture.c",
      "if (f->nentries >= f->o.recompile_limit) {",
      "if (f->nentries > f->o.recompile_limit) {",
      ["test_capture", "test_dynamic"]),
    # ---- memory plan
    M("plan-frees-at-last-read", "memory plan", "src/compile.c",
      "if (live[i].until < s) continue;",
      "if (live[i].until <= s) continue;",
      ["test_compile", "test_compiled"]),
    # ---- optimizers
    M("adamw-decay-without-lr", "optimizers", "src/optim.c",
      "base = binc(ctx, OP_MUL, p, 1 - a->lr * a->weight_decay);",
      "base = binc(ctx, OP_MUL, p, 1 - a->weight_decay);",
      ["test_optim"]),
    M("sgd-dampening-sign", "optimizers", "src/optim.c",
      "1 - s->dampening, d)",
      "1 + s->dampening, d)",
      ["test_optim"]),
]

SUMMARY = re.compile(r"^[^ ]+: ([0-9]+) passed, ([0-9]+) failed$", re.M)


def log(msg):
    print(msg, flush=True)


def sh(cmd, cwd, logf=None, timeout=None, env=None):
    """Runs cmd (a list) in cwd; (exit status, output). A timeout gives status None."""
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=timeout, env=env)
        out = p.stdout.decode(errors="replace")
        rc = p.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace")
        rc = None
    if logf:
        with open(logf, "a") as f:
            f.write("$ %s\n%s\n" % (" ".join(cmd), out))
    return rc, out


def tree_files():
    """The working tree's tracked and unignored files, relative to ROOT."""
    out = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                         stdout=subprocess.PIPE).stdout.decode()
    return [p for p in out.split("\0") if p and os.path.isfile(os.path.join(ROOT, p))]


def check_mutations(muts):
    """Every entry's text occurs exactly once in its file: else the stale entries, described."""
    stale = []
    for m in muts:
        try:
            with open(os.path.join(ROOT, m.path)) as f:
                n = f.read().count(m.old)
        except OSError as e:
            n = -1
            stale.append("%s: %s: %s" % (m.name, m.path, e))
        if n == 0:
            stale.append("%s: %s: the text to replace is not there:\n    %r" % (m.name, m.path, m.old))
        elif n > 1:
            stale.append("%s: %s: the text to replace occurs %d times (make it unique):\n    %r"
                         % (m.name, m.path, n, m.old))
    return stale


def test_names():
    return sorted(f[:-2] for f in os.listdir(os.path.join(ROOT, "tests")) if re.match(r"test_.*\.c$", f))


def make_copy(files, dst):
    for p in files:
        d = os.path.join(dst, os.path.dirname(p))
        os.makedirs(d, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, p), os.path.join(dst, p))


def run_test(tree, name, jobs, logf, env):
    """Builds and runs one test program in tree: (ok, what happened, seconds)."""
    t0 = time.time()
    rc, out = sh(["make", "-j%d" % jobs, "--no-print-directory", "build/tests/" + name], tree, logf, env=env)
    if rc != 0:
        return False, "did not build", time.time() - t0
    rc, out = sh(["build/tests/" + name], tree, logf, timeout=HANG_S, env=env)
    dt = time.time() - t0
    if rc is None:
        return False, "hung (past %d s)" % HANG_S, dt
    m = SUMMARY.findall(out)
    if not m:
        return False, "crashed or printed no summary (exit %s)" % rc, dt
    failed = int(m[-1][1])
    if failed:
        first = next((l.strip() for l in out.splitlines() if l.startswith("    ")), "")
        return False, "%d failed%s" % (failed, ": " + first[:160] if first else ""), dt
    if rc != 0:
        return False, "exit %d" % rc, dt
    return True, "%s passed" % m[-1][0], dt


def judge(tree, m, tests, jobs, logf, env):
    """Runs m's likely tests first, then the rest: (killer or None, what it reported)."""
    order = [t for t in m.tests if t in tests] + [t for t in tests if t not in m.tests]
    for t in order:
        ok, what, dt = run_test(tree, t, jobs, logf, env)
        log("    %-16s %s (%.0f s)" % (t, "passed" if ok else what, dt))
        if not ok:
            return t, what
    return None, None


def main():
    ap = argparse.ArgumentParser(description="mutation testing of kiln's test suite (see the top comment)")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    ap.add_argument("--only", help="comma-separated mutation names to run")
    ap.add_argument("--no-baseline", action="store_true", help="skip the suite on the unmutated copy")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("-j", type=int, default=2, help="make's jobs (default 2)")
    args = ap.parse_args()
    if os.nice(0) < 10:  # the machine is shared: at most nice 10's share, however it was started
        os.nice(10 - os.nice(0))
    muts = MUTATIONS
    if args.only:
        names = args.only.split(",")
        unknown = [n for n in names if n not in {m.name for m in MUTATIONS}]
        if unknown:
            sys.exit("mutate: no mutation named %s" % ", ".join(unknown))
        muts = [m for m in MUTATIONS if m.name in names]
    if args.list:
        for m in muts:
            log("%-36s %-15s %s%s" % (m.name, m.area, m.path, "  (equivalent)" if m.equivalent else ""))
        return 0
    stale = check_mutations(muts)
    if stale:
        log("mutate: %d mutation(s) no longer apply; fix them in tests/mutate.py:" % len(stale))
        for s in stale:
            log("  " + s)
        return 2
    tests = test_names()
    scratch = tempfile.mkdtemp(prefix="kiln-mutate-")
    logf = os.path.join(scratch, "log.txt")
    env = dict(os.environ, KILN_CACHE_DIR=os.path.join(scratch, "cache"))
    os.makedirs(env["KILN_CACHE_DIR"])
    base = os.path.join(scratch, "base")
    log("mutate: %d mutations, %d test programs; scratch %s (log.txt: every command's output)"
        % (len(muts), len(tests), scratch))
    t0 = time.time()
    try:
        make_copy(tree_files(), base)
        rc, out = sh(["make", "-j%d" % args.j, "--no-print-directory", "all", "build-tests"], base, logf, env=env)
        if rc != 0:
            log("mutate: the unmutated copy does not build (see %s)" % logf)
            return 2
        if not args.no_baseline:
            log("baseline (no mutation):")
            killer, what = judge(base, M("baseline", "", "", "", "", []), tests, args.j, logf, env)
            if killer:
                log("mutate: %s fails without any mutation (%s): fix that first" % (killer, what))
                return 2
        results = []
        for i, m in enumerate(muts):
            log("[%d/%d] %s (%s, %s)" % (i + 1, len(muts), m.name, m.area, m.path))
            tree = os.path.join(scratch, "mutant")
            shutil.rmtree(tree, ignore_errors=True)
            shutil.copytree(base, tree, symlinks=True)
            path = os.path.join(tree, m.path)
            with open(path) as f:
                text = f.read()
            with open(path, "w") as f:
                f.write(text.replace(m.old, m.new))
            rc, out = sh(["make", "-j%d" % args.j, "--no-print-directory", "all"], tree, logf, env=env)
            if rc != 0:
                log("    does not build: the mutation must compile (see %s)" % logf)
                results.append((m, "unbuilt", None, None))
                continue
            killer, what = judge(tree, m, tests, args.j, logf, env)
            results.append((m, "killed" if killer else "survived", killer, what))
        shutil.rmtree(os.path.join(scratch, "mutant"), ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    log("")
    log("%-36s %-15s %s" % ("mutation", "area", "fate"))
    for m, fate, killer, what in results:
        if fate == "killed":
            desc = "killed by %s (%s)" % (killer, what)
        elif fate == "survived":
            desc = "SURVIVED the whole native suite" + (" (equivalent: %s)" % m.equivalent if m.equivalent else "")
        else:
            desc = "did not build"
        log("%-36s %-15s %s" % (m.name, m.area, desc))
    killed = sum(1 for r in results if r[1] == "killed")
    real = [r for r in results if not r[0].equivalent]
    real_killed = sum(1 for r in real if r[1] == "killed")
    log("")
    log("mutate: killed %d of %d mutants (%.0f%%); of the %d not marked equivalent, %d (%.0f%%); %.0f min"
        % (killed, len(results), 100.0 * killed / max(len(results), 1), len(real), real_killed,
           100.0 * real_killed / max(len(real), 1), (time.time() - t0) / 60))
    if any(r[1] == "unbuilt" for r in results):
        return 2
    return 0 if real_killed == len(real) else 1


if __name__ == "__main__":
    sys.exit(main())
