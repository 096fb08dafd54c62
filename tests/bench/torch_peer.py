#!/usr/bin/python3
"""torch_peer.py -- the PyTorch eager peer for kiln's CPU benchmarks.

Run with Debian's interpreter, which sees python3-torch (1.13):

    /usr/bin/python3 tests/bench/torch_peer.py [--threads 2] [--quick]
                     [--models mlp,cnn,gpt] [--steps 30] [--json]

It runs the three workloads of docs/BENCHMARKS.md at the 2-core CPU
batch sizes (mlp 128, cnn 16, gpt 4) and prints one JSON object per line, the
schema `kiln bench train|infer --json` prints, so tests/bench/report.py can
set them side by side:

    {"suite": "train", "case": "mlp/train", "impl": "torch", "metric": "ms",
     "median": m, "min": a, "max": b, "n": steps, "batch": 128, "threads": 2}

plus a "mlp/train-first" line (n 1) for the first step of a fresh model.

Train step: zero_grad(set_to_none=True), forward, mean cross-entropy,
backward, Adam(lr=1e-3) step. Inference: forward in eval mode under no_grad.
Each case times its first step, then warm-up steps, then the timed steps, all
on one fixed synthetic batch (x ~ randn, labels uniform, seed 0). The result is
checked before the timed steps: every loss finite and, for train, the loss
after 5 steps on that batch below the first one; the check's steps are the
warm-up, so the first step stays the first thing the model ever runs.

Threads: torch.set_num_threads(N) sets the OpenMP pool (elementwise ops,
oneDNN convs) but not Debian's OpenBLAS (GEMM), which has its own pool, so
OPENBLAS_NUM_THREADS is set to N as well. OMP_WAIT_POLICY=PASSIVE: on a loaded
machine with few cores libgomp's default spin-waiting makes small steps (the mlp's)
many times slower. Both are set before torch loads, unless already set.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time


def options():
    ap = argparse.ArgumentParser(description="PyTorch eager peer for kiln bench (JSON lines)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="5 timed steps, 2 warm-up")
    ap.add_argument("--models", default="mlp,cnn,gpt")
    ap.add_argument("--json", action="store_true", help="JSON lines (the default anyway)")
    args = ap.parse_args()
    if args.quick:
        args.steps, args.warmup = 5, 2
    return args


ARGS = options()
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(ARGS.threads))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402  (after the environment above)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BATCH = {"mlp": 128, "cnn": 16, "gpt": 4}
CHECK_STEPS = 5


def mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512),
                         nn.ReLU(), nn.Linear(512, 10))


class Block(nn.Module):
    """ResNet BasicBlock: two conv3x3+BN, a 1x1 conv+BN shortcut where the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + self.short(x))


def cnn():
    """CIFAR ResNet-18: (B, 3, 32, 32) -> (B, 10)."""
    layers = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)]
    return nn.Sequential(*layers)


class Attn(nn.Module):
    """Causal self-attention by hand (torch 1.13 has no scaled_dot_product_attention)."""

    def __init__(self, d, heads, ctx):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        mask = torch.full((ctx, ctx), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):                                   # (B, T, C)
        B, T, C = x.shape
        hd = C // self.heads
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
        att = q @ k.transpose(-2, -1) / math.sqrt(hd) + self.mask[:T, :T]  # (B, H, T, T)
        y = F.softmax(att, dim=-1) @ v                      # (B, H, T, hd)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class GPT(nn.Module):
    def __init__(self, vocab=4096, ctx=128, d=256, layers=4, heads=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict({
                "ln1": nn.LayerNorm(d), "attn": Attn(d, heads, ctx), "ln2": nn.LayerNorm(d),
                "mlp": nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * d, d))}))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):                                 # (B, T) -> (B*T, vocab)
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = x + b["attn"](b["ln1"](x))
            x = x + b["mlp"](b["ln2"](x))
        return self.head(self.ln(x)).flatten(0, 1)


def workload(name):
    """A fresh model (seed 0) and its fixed batch: (model, input, flat targets)."""
    torch.manual_seed(0)
    B = BATCH[name]
    if name == "mlp":
        return mlp(), torch.randn(B, 784), torch.randint(0, 10, (B,))
    if name == "cnn":
        return cnn(), torch.randn(B, 3, 32, 32), torch.randint(0, 10, (B,))
    return GPT(), torch.randint(0, 4096, (B, 128)), torch.randint(0, 4096, (B * 128,))


def timed(fn):
    t = time.perf_counter()
    loss = fn()
    return (time.perf_counter() - t) * 1e3, loss


def fail(msg):
    print("torch_peer: " + msg, file=sys.stderr)
    sys.exit(1)


def run_case(name, suite, args):
    model, x, y = workload(name)
    if suite == "train":
        model.train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.item()
        warmup = max(args.warmup, CHECK_STEPS)
    else:
        model.eval()

        def step():
            with torch.no_grad():
                return F.cross_entropy(model(x), y).item()
        warmup = args.warmup

    first, loss0 = timed(step)
    losses = [loss0] + [step() for _ in range(warmup)]
    case = "%s/%s" % (name, suite)
    if not all(math.isfinite(v) for v in losses):
        fail("%s: loss not finite: %s" % (case, losses))
    if suite == "train" and not losses[CHECK_STEPS] < losses[0]:
        fail("%s: %d steps on one batch did not reduce the loss: %s"
             % (case, CHECK_STEPS, losses))
    times = [timed(step)[0] for _ in range(args.steps)]

    base = {"suite": suite, "impl": "torch", "metric": "ms"}
    tail = {"batch": BATCH[name], "threads": args.threads}
    for c, t in ((case + "-first", [first]), (case, times)):
        row = dict(base, case=c, median=round(statistics.median(t), 4),
                   min=round(min(t), 4), max=round(max(t), 4), n=len(t), **tail)
        print(json.dumps(row), flush=True)


def main(args):
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in BATCH:
            fail("unknown model %r (have %s)" % (m, ",".join(BATCH)))
    torch.set_num_threads(args.threads)
    for suite in ("train", "infer"):
        for m in models:
            run_case(m, suite, args)


if __name__ == "__main__":
    main(ARGS)
