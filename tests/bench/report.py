#!/usr/bin/python3
"""report.py -- kiln and PyTorch benchmark lines side by side.

    /usr/bin/python3 tests/bench/report.py [--out build/bench] FILE.jsonl...

Reads JSON lines from `kiln bench train|infer --json` (impl "kiln-eager",
"kiln-c", "kiln-tcc", "kiln-interp", maybe with a mode suffix: "kiln-c-ro")
and from tests/bench/torch_peer.py (impl "torch"), one object per line:

    {"suite": "train", "case": "mlp/train", "impl": "kiln-c", "metric": "ms",
     "median": m, "min": a, "max": b, "n": 30, "batch": 128, "threads": 2}

"case" is WORKLOAD/SUITE for the step time, WORKLOAD/SUITE-first for the first
step (compiling included); metric "bytes" is kiln's arena size. Other lines
(not JSON, or without these fields) are skipped and counted on stderr.

Writes OUT/report.md, a table per suite: each impl's median step time with
its spread (min-max), its speedup over torch (torch ms / impl ms: above 1,
kiln is faster), each compiled impl's speedup over kiln-eager; then first
steps and arena bytes. And OUT/ratios.svg, a bar chart of the speedups over
torch on a log scale, one group per workload and suite. A missing entry is a
dash in the table and is named under it. Standard library only.
"""

import argparse
import datetime
import json
import math
import os
import sys
from xml.sax.saxutils import escape

SUITES = ("train", "infer")
WORKLOADS = ("mlp", "cnn", "gpt")
KILN_ORDER = ("kiln-eager", "kiln-interp", "kiln-tcc", "kiln-c")
COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
          "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
FIELDS = ("suite", "case", "impl", "metric", "median")


def load(paths):
    """{(suite, workload, kind, impl): record}; kind is "ms", "first" or "bytes"."""
    recs, skipped = {}, 0
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    r = json.loads(line)
                    ok = isinstance(r, dict) and all(k in r for k in FIELDS) \
                        and isinstance(r["median"], (int, float)) and r["median"] > 0
                except ValueError:
                    ok = False
                if not ok:
                    skipped += line.strip() != ""
                    continue
                workload, _, rest = r["case"].partition("/")
                kind = "first" if rest.endswith("-first") else "ms"
                if r["metric"] == "bytes":
                    kind = "bytes"
                recs[(r["suite"], workload, kind, r["impl"])] = r
    if skipped:
        print("report.py: skipped %d line(s) that are not benchmark JSON" % skipped,
              file=sys.stderr)
    return recs


def impl_key(impl):
    """kiln-eager first, then the known backends, each followed by its modes."""
    for i, base in enumerate(KILN_ORDER):
        if impl == base or impl.startswith(base + "-"):
            return (i, impl != base, impl)
    return (len(KILN_ORDER), False, impl)


def ordered(values, first):
    return [v for v in first if v in values] + sorted(set(values) - set(first))


def ms(r):
    return r["median"] if r else None


def num(v):
    """Three significant digits without exponents: 0.123, 1.23, 12.3, 123, 1234."""
    if not v:
        return "0"
    d = 2 - int(math.floor(math.log10(abs(v))))
    if abs(round(v, d)) >= 10 ** (3 - d):        # 99.96 rounds up a decade
        d -= 1
    return "%.*f" % (max(0, d), v)


def fmt_ms(r):
    if not r:
        return "—"
    s = num(r["median"])
    if r.get("n", 1) > 1 and "min" in r and "max" in r:
        s += " (%s–%s)" % (num(r["min"]), num(r["max"]))
    return s


def fmt_ratio(num, den):
    return "%.2f×" % (num / den) if num and den else "—"


def fmt_bytes(r):
    if not r:
        return "—"
    b = r["median"]
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= size:
            return "%.1f %s" % (b / size, unit)
    return "%d B" % b


def suite_tables(recs, suite, workloads, kilns, missing):
    get = lambda w, kind, impl: recs.get((suite, w, kind, impl))
    head = ["workload", "batch", "torch ms"]
    for k in kilns:
        head += [k + " ms", "vs torch"] + (["vs eager"] if k != "kiln-eager" else [])
    rows = []
    for w in workloads:
        torch = get(w, "ms", "torch")
        batches = sorted({str(r["batch"]) for (s, wl, kind, i), r in recs.items()
                          if s == suite and wl == w and kind == "ms" and "batch" in r})
        row = [w, "/".join(batches) or "—", fmt_ms(torch)]
        for k in kilns:
            r = get(w, "ms", k)
            row += [fmt_ms(r), fmt_ratio(ms(torch), ms(r))]
            if k != "kiln-eager":
                row.append(fmt_ratio(ms(get(w, "ms", "kiln-eager")), ms(r)))
        rows.append(row)
        for impl in ["torch"] + kilns:
            for kind in ("ms", "first"):
                if not get(w, kind, impl):
                    missing.append("%s/%s%s %s" % (w, suite, "-first" * (kind == "first"), impl))
        if len(batches) > 1:
            missing.append("%s/%s: batch sizes differ (%s): ratios are not like for like"
                           % (w, suite, ", ".join(batches)))
    out = table(head, rows)
    head = ["workload", "torch first ms"] + [k + " first ms" for k in kilns]
    head += [k + " arena" for k in kilns]
    rows = [[w, fmt_ms(get(w, "first", "torch"))] + [fmt_ms(get(w, "first", k)) for k in kilns]
            + [fmt_bytes(get(w, "bytes", k)) for k in kilns] for w in workloads]
    return out + "\nFirst step (compiling included) and arena bytes:\n\n" + table(head, rows)


def table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def svg_chart(groups, kilns, title):
    """groups: [(label, {impl: ratio})]. Log-scale bars from the 1.0 line."""
    ratios = [v for _, g in groups for v in g.values()] or [1.0]
    ticks = [m * 10 ** e for e in range(-4, 5) for m in (1, 2, 5)]
    lo = max(t for t in ticks if t <= min(min(ratios), 1) / 1.2)
    hi = min(t for t in ticks if t >= max(max(ratios), 1) * 1.2)
    bw, gap, left, top, ph = 16, 28, 70, 50, 260
    gw = max(len(kilns), 1) * bw + gap
    width = left + len(groups) * gw + 20
    legend_w = 20 + sum(30 + 7 * len(k) for k in kilns)
    width = max(width, left + legend_w, 360)
    height = top + ph + 70
    y = lambda v: top + ph * (math.log(hi) - math.log(v)) / (math.log(hi) - math.log(lo))
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
         'font-family="sans-serif" font-size="11">' % (width, height),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="18" font-size="13" font-weight="bold">%s</text>' % (left, escape(title)),
         '<text x="%d" y="34" fill="#555">above the dashed line (1.0): kiln is faster than torch'
         '</text>' % left]
    for t in (t for t in ticks if lo <= t <= hi):
        o.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>'
                 % (left, width - 10, y(t), y(t)))
        o.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (left - 6, y(t) + 4, t))
    for gi, (label, g) in enumerate(groups):
        x0 = left + gi * gw + gap / 2
        for ki, k in enumerate(kilns):
            if k not in g:
                continue
            v, x = g[k], x0 + ki * bw
            y0, y1 = sorted((y(1.0), y(g[k])))
            o.append('<rect x="%.1f" y="%.1f" width="%d" height="%.1f" fill="%s">'
                     '<title>%s %s: %.2f×</title></rect>'
                     % (x, y0, bw - 2, max(y1 - y0, 1), COLORS[ki % len(COLORS)],
                        escape(label), escape(k), v))
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                 % (x0 + len(kilns) * bw / 2, top + ph + 16, escape(label)))
    o.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="black" stroke-dasharray="5,4"/>'
             % (left, width - 10, y(1.0), y(1.0)))
    o.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="black"/>' % (left, left, top, top + ph))
    o.append('<text transform="translate(16,%d) rotate(-90)" text-anchor="middle">'
             'speedup vs torch (torch ms / kiln ms, log scale)</text>' % (top + ph / 2))
    x = left
    for ki, k in enumerate(kilns):
        o.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>'
                 % (x, height - 26, COLORS[ki % len(COLORS)]))
        o.append('<text x="%d" y="%d">%s</text>' % (x + 16, height - 16, escape(k)))
        x += 30 + 7 * len(k)
    o.append("</svg>")
    return "\n".join(o) + "\n"


def main():
    ap = argparse.ArgumentParser(description="kiln vs torch benchmark report")
    ap.add_argument("--out", default="build/bench")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    recs = load(args.files)
    impls = {k[3] for k in recs}
    kilns = sorted((i for i in impls if i != "torch"), key=impl_key)
    workloads = ordered({k[1] for k in recs}, WORKLOADS)
    suites = ordered({k[0] for k in recs}, SUITES)
    threads = sorted({str(r["threads"]) for r in recs.values() if "threads" in r})
    info = "threads %s" % (", ".join(threads) or "?")
    if len(threads) > 1:
        info += " (mixed: ratios are not like for like)"
    date = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")

    md = ["# kiln vs PyTorch", "", "%s, %s. Median ms over the timed steps (min–max); "
          "vs torch = torch ms / kiln ms, vs eager = kiln-eager ms / kiln ms: above 1 is faster."
          % (date, info), ""]
    groups = []
    for suite in suites:
        missing = [] if kilns else ["every kiln impl (no kiln lines)"]
        md += ["## %s" % suite, "", suite_tables(recs, suite, workloads, kilns, missing)]
        if missing:
            md += ["Missing: " + "; ".join(missing) + ".", ""]
        for w in workloads:
            t = ms(recs.get((suite, w, "ms", "torch")))
            g = {k: t / ms(recs[(suite, w, "ms", k)]) for k in kilns
                 if t and ms(recs.get((suite, w, "ms", k)))}
            if g:
                groups.append(("%s %s" % (w, suite), g))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "report.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(md))
    with open(os.path.join(args.out, "ratios.svg"), "w", encoding="utf-8") as f:
        f.write(svg_chart(groups, kilns, "kiln speedup over PyTorch eager (%s, %s)" % (info, date)))
    print("report.py: wrote %s/report.md and ratios.svg (%d record(s), %d bar group(s))"
          % (args.out, len(recs), len(groups)), file=sys.stderr)


if __name__ == "__main__":
    main()
