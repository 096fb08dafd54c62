#!/usr/bin/python3
"""rounds.py -- kiln-c and PyTorch timed in alternating rounds.

    /usr/bin/python3 tests/bench/rounds.py [--rounds 4] [--kiln build/kiln] [--out build/bench]

On a shared machine the speed of both sides drifts by tens of percent over
minutes, so a ratio of two runs minutes apart (make bench: all of kiln, then
all of torch) can measure the drift. Here each round times one workload on
kiln (`kiln bench train|infer --quick --model M --backend c`, kiln-eager
included: it is the check) and then on torch (torch_peer.py --quick --models M),
workload after workload, so the two sides of a ratio run seconds apart.

Writes OUT/rounds.jsonl (every line, with its round) and OUT/rounds.md: per
workload and suite, each round's ratios (torch ms / kiln-c ms, kiln-eager ms /
kiln-c ms) and their median with min-max. Standard library only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

WORKLOADS = ("mlp", "gpt", "cnn")
HERE = os.path.dirname(os.path.abspath(__file__))


def lines(cmd):
    """the JSON objects cmd prints (other lines skipped); a failed command is fatal"""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("rounds.py: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-400:]))
    out = []
    for s in p.stdout.splitlines():
        try:
            out.append(json.loads(s))
        except ValueError:
            pass
    return out


def main():
    ap = argparse.ArgumentParser(description="kiln-c and PyTorch in alternating rounds")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--kiln", default="build/kiln")
    ap.add_argument("--out", default="build/bench")
    a = ap.parse_args()
    if a.rounds < 1:
        sys.exit("rounds.py: --rounds must be >= 1")
    os.makedirs(a.out, exist_ok=True)
    got = []  # (round, object)
    for r in range(1, a.rounds + 1):
        for m in WORKLOADS:
            for suite in ("train", "infer"):
                got += [(r, o) for o in lines([a.kiln, "bench", suite, "--quick", "--json", "--model", m, "--backend", "c"])]
            got += [(r, o) for o in lines(["/usr/bin/python3", os.path.join(HERE, "torch_peer.py"), "--quick",
                                           "--threads", "2", "--models", m])]
        print("rounds.py: round %d of %d done" % (r, a.rounds), file=sys.stderr)
    tmp = os.path.join(a.out, "rounds.jsonl.tmp")
    with open(tmp, "w") as f:
        for r, o in got:
            f.write(json.dumps(dict(o, round=r)) + "\n")
    os.replace(tmp, os.path.join(a.out, "rounds.jsonl"))

    ms = {}  # (case, round) -> {impl: median ms}
    for r, o in got:
        if o.get("metric") == "ms" and not str(o.get("case", "")).endswith("-first"):
            ms.setdefault((o["case"], r), {})[o["impl"]] = o["median"]
    md = ["# kiln-c and PyTorch in alternating rounds", "",
          "%d rounds; each round times a workload on kiln (eager, c) and then on torch, seconds apart "
          "(`kiln bench --quick`, 5 timed steps, median ms). vs torch = torch ms / kiln-c ms; "
          "vs eager = kiln-eager ms / kiln-c ms: above 1 is faster." % a.rounds, "",
          "| case | kiln-c ms, per round | torch ms, per round | vs torch: median (min-max) | vs eager: median (min-max) |",
          "|---|---|---|---|---|"]
    for suite in ("train", "infer"):
        for m in WORKLOADS:
            case = "%s/%s" % (m, suite)
            per = [ms.get((case, r), {}) for r in range(1, a.rounds + 1)]
            per = [p for p in per if "kiln-c" in p and "torch" in p and "kiln-eager" in p]
            if not per:
                md.append("| %s | - | - | - | - |" % case)
                continue
            vt = [p["torch"] / p["kiln-c"] for p in per]
            ve = [p["kiln-eager"] / p["kiln-c"] for p in per]
            md.append("| %s | %s | %s | %.2fx (%.2f-%.2f) | %.2fx (%.2f-%.2f) |" % (
                case, ", ".join("%.3g" % p["kiln-c"] for p in per), ", ".join("%.3g" % p["torch"] for p in per),
                statistics.median(vt), min(vt), max(vt), statistics.median(ve), min(ve), max(ve)))
    tmp = os.path.join(a.out, "rounds.md.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(md) + "\n")
    os.replace(tmp, os.path.join(a.out, "rounds.md"))
    print("\n".join(md))


if __name__ == "__main__":
    main()
