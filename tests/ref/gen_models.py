#!/usr/bin/python3
"""gen_models.py -- a full PyTorch reference for the three models of docs/BENCHMARKS.md,
at small size, as llm.c's test_gpt2 does: initial weights, inputs, the loss,
every parameter gradient and the losses of 10 Adam steps.

Run from anywhere with Debian's interpreter, which sees python3-torch:

    /usr/bin/python3 tests/ref/gen_models.py

It rewrites tests/ref/data/models.bin (deterministic: same bytes every run);
tests/test_models.c builds each model from it with kiln's eager ops, one kn_
call per PyTorch call below, and checks it.

The models (written functionally, with explicit weight tensors, so the C side
mirrors them line by line):
    mlp  x (8, 64) f32 -> Linear 64->32, ReLU, Linear 32->32, ReLU, Linear 32->10;
         labels (8,) in 0..9.  (BENCHMARKS' 784->512->512->10 at fixture size.)
    cnn  x (4, 3, 8, 8) -> conv3x3(3->8)+BN+ReLU stem; BasicBlock 8->8 stride 1;
         BasicBlock 8->16 stride 2 with a 1x1 conv+BN shortcut; adaptive avg pool;
         Linear 16->10; labels (4,). Convs without bias; BatchNorm in training mode
         (batch statistics; running stats updated with momentum 0.1, eps 1e-5).
    gpt  vocab 64, context 16, d 64, 2 layers, 4 heads; token + position
         embeddings; pre-LayerNorm blocks: x += proj(causal softmax attention
         (qkv Linear d->3d)), x += Linear 4d->d(GELU tanh(Linear d->4d)); final
         LayerNorm (eps 1e-5); head d->vocab without bias (not tied);
         tokens (2, 16) i64, targets (2, 16) i64.
    Loss: cross_entropy, mean over the batch (gpt: over the 32 positions).
    Initialisation as PyTorch's defaults, from a fixed seed: Linear and Conv
    weights kaiming-uniform with a = sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
    Linear biases the same bound; BatchNorm and LayerNorm weight 1, bias 0;
    running mean 0, running var 1; Embedding N(0, 1).

The protocol the numbers come from (test_models.c repeats it):
    1. forward from the initial weights, loss, backward        -> loss, grads
    2. Adam (lr 1e-3, betas 0.9/0.999, eps 1e-8, no weight decay) over the
       parameters, starting again from the initial weights; 10 times:
       zero_grad, forward, loss, backward, step                -> losses[10]
       (losses[0] is the loss of step 1 again: BN trains on batch statistics)
    3. the cnn's running stats after all 11 forward passes      -> final buffers
The weights and inputs are f32. Every reference number is computed with them
widened to f64 (as gen.py does for the op fixtures), so kiln's f32 run is judged
by its own rounding only; the generator also runs PyTorch's own f32 model and
prints how far it lands from the reference, a yardstick for the tolerances
(loss and gradients 1e-4 relative, each Adam loss 1e-4 relative).

Binary format (little-endian; the tensor encoding is gen.py's, with no view steps)
----------------------------------------------------------------------------------
    file   := magic "KNMOD001" (8 bytes), u32 nmodels, model * nmodels
    model  := str name, u32 nentries, (str key, tensor) * nentries
    str    := u16 length, bytes
    tensor := u8 code (kn_dtype: F32 0, F64 1, I64 5), u8 ndim, u8 0, u8 0,
              i64 shape[ndim], data (numel * dtype size bytes, row-major)
    keys, in this order:
        x, y          the input and the integer targets
        p.NAME        initial parameters (f32), in the order the C side makes them
        b.NAME        initial buffers (f32; the cnn's running_mean / running_var)
        loss          0-d f64, the loss at the initial weights
        g.NAME        f32, d loss / d p.NAME, one per parameter, same order
        losses        (10,) f64, the loss of each Adam step, before its update
        bf.NAME       f32, each buffer after the 11 forward passes
"""

import math
import os
import struct

import torch
import torch.nn.functional as F

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
F32, F64, I64 = torch.float32, torch.float64, torch.int64
CODES = {F32: 0, F64: 1, I64: 5}
STEPS = 10
LR = 1e-3


# ---------------------------------------------------------------- initialisation

class Init:
    """Draws parameters as PyTorch's defaults do, from one generator, in call order."""

    def __init__(self, seed):
        self.g = torch.Generator()
        self.g.manual_seed(seed)
        self.params = {}   # name -> f32 tensor, insertion order = the C side's order
        self.buffers = {}

    def uniform(self, name, shape, bound):
        self.params[name] = (torch.rand(shape, generator=self.g, dtype=F64) * 2 - 1).mul(bound).to(F32)

    def linear(self, name, n_out, n_in, bias=True):
        bound = 1.0 / math.sqrt(n_in)  # kaiming_uniform(a=sqrt(5)) and the bias rule agree
        self.uniform(name + ".w", (n_out, n_in), bound)
        if bias:
            self.uniform(name + ".b", (n_out,), bound)

    def conv(self, name, c_out, c_in, k):
        self.uniform(name, (c_out, c_in, k, k), 1.0 / math.sqrt(c_in * k * k))

    def norm(self, name, c, running=False):
        self.params[name + ".w"] = torch.ones(c, dtype=F32)
        self.params[name + ".b"] = torch.zeros(c, dtype=F32)
        if running:
            self.buffers[name + ".mean"] = torch.zeros(c, dtype=F32)
            self.buffers[name + ".var"] = torch.ones(c, dtype=F32)

    def normal(self, name, shape):
        self.params[name] = torch.randn(shape, generator=self.g, dtype=F64).to(F32)


# ---------------------------------------------------------------- mlp

def mlp_init(seed):
    m = Init(seed)
    m.linear("fc1", 32, 64)
    m.linear("fc2", 32, 32)
    m.linear("fc3", 10, 32)
    x = torch.randn((8, 64), generator=m.g, dtype=F64).to(F32)
    y = torch.randint(0, 10, (8,), generator=m.g, dtype=I64)
    return m, x, y


def mlp_forward(p, b, x):
    h = F.relu(F.linear(x, p["fc1.w"], p["fc1.b"]))   # (8, 32)
    h = F.relu(F.linear(h, p["fc2.w"], p["fc2.b"]))   # (8, 32)
    return F.linear(h, p["fc3.w"], p["fc3.b"])        # (8, 10)


# ---------------------------------------------------------------- cnn

def cnn_init(seed):
    m = Init(seed)
    m.conv("stem.conv", 8, 3, 3)
    m.norm("stem.bn", 8, True)
    m.conv("l1.conv1", 8, 8, 3)
    m.norm("l1.bn1", 8, True)
    m.conv("l1.conv2", 8, 8, 3)
    m.norm("l1.bn2", 8, True)
    m.conv("l2.conv1", 16, 8, 3)
    m.norm("l2.bn1", 16, True)
    m.conv("l2.conv2", 16, 16, 3)
    m.norm("l2.bn2", 16, True)
    m.conv("l2.sc.conv", 16, 8, 1)
    m.norm("l2.sc.bn", 16, True)
    m.linear("fc", 10, 16)
    x = torch.randn((4, 3, 8, 8), generator=m.g, dtype=F64).to(F32)
    y = torch.randint(0, 10, (4,), generator=m.g, dtype=I64)
    return m, x, y


def bn(h, p, b, name):
    """BatchNorm2d in training mode: batch statistics, running stats updated in place."""
    return F.batch_norm(h, b[name + ".mean"], b[name + ".var"], p[name + ".w"], p[name + ".b"],
                        training=True, momentum=0.1, eps=1e-5)


def cnn_forward(p, b, x):
    h = F.relu(bn(F.conv2d(x, p["stem.conv"], padding=1), p, b, "stem.bn"))       # (4, 8, 8, 8)
    o = F.relu(bn(F.conv2d(h, p["l1.conv1"], padding=1), p, b, "l1.bn1"))
    o = bn(F.conv2d(o, p["l1.conv2"], padding=1), p, b, "l1.bn2")
    h = F.relu(o + h)                                                              # (4, 8, 8, 8)
    o = F.relu(bn(F.conv2d(h, p["l2.conv1"], stride=2, padding=1), p, b, "l2.bn1"))
    o = bn(F.conv2d(o, p["l2.conv2"], padding=1), p, b, "l2.bn2")
    s = bn(F.conv2d(h, p["l2.sc.conv"], stride=2), p, b, "l2.sc.bn")
    h = F.relu(o + s)                                                              # (4, 16, 4, 4)
    h = torch.flatten(F.adaptive_avg_pool2d(h, (1, 1)), 1)                         # (4, 16)
    return F.linear(h, p["fc.w"], p["fc.b"])                                       # (4, 10)


# ---------------------------------------------------------------- gpt

VOCAB, CONTEXT, D, LAYERS, HEADS = 64, 16, 64, 2, 4


def gpt_init(seed):
    m = Init(seed)
    m.normal("wte", (VOCAB, D))
    m.normal("wpe", (CONTEXT, D))
    for l in range(LAYERS):
        h = "h%d." % l
        m.norm(h + "ln1", D)
        m.linear(h + "attn.qkv", 3 * D, D)
        m.linear(h + "attn.proj", D, D)
        m.norm(h + "ln2", D)
        m.linear(h + "mlp.fc", 4 * D, D)
        m.linear(h + "mlp.proj", D, 4 * D)
    m.norm("lnf", D)
    m.linear("head", VOCAB, D, bias=False)
    x = torch.randint(0, VOCAB, (2, CONTEXT), generator=m.g, dtype=I64)
    y = torch.randint(0, VOCAB, (2, CONTEXT), generator=m.g, dtype=I64)
    return m, x, y


def attention(h, p, name):
    """Causal self-attention: (B, T, D) -> (B, T, D)."""
    B, T, C = h.shape
    hd = C // HEADS
    qkv = F.linear(h, p[name + ".qkv.w"], p[name + ".qkv.b"])                      # (B, T, 3D)
    q, k, v = [t.reshape(B, T, HEADS, hd).transpose(1, 2) for t in qkv.split(C, 2)]  # (B, H, T, hd)
    att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))            # (B, H, T, T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    att = torch.softmax(att.masked_fill(~causal, float("-inf")), -1)
    y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, C)                      # (B, T, D)
    return F.linear(y, p[name + ".proj.w"], p[name + ".proj.b"])


def gpt_forward(p, b, tok):
    B, T = tok.shape
    x = F.embedding(tok, p["wte"]) + p["wpe"][:T]                                  # (B, T, D)
    for l in range(LAYERS):
        n = "h%d." % l
        x = x + attention(F.layer_norm(x, (D,), p[n + "ln1.w"], p[n + "ln1.b"], 1e-5), p, n + "attn")
        h = F.layer_norm(x, (D,), p[n + "ln2.w"], p[n + "ln2.b"], 1e-5)
        h = F.gelu(F.linear(h, p[n + "mlp.fc.w"], p[n + "mlp.fc.b"]), approximate="tanh")  # (B, T, 4D)
        x = x + F.linear(h, p[n + "mlp.proj.w"], p[n + "mlp.proj.b"])
    x = F.layer_norm(x, (D,), p["lnf.w"], p["lnf.b"], 1e-5)
    return F.linear(x, p["head.w"]).reshape(B * T, VOCAB)                          # (B*T, V)


# ---------------------------------------------------------------- the reference run

def run(init, forward, x, y, dtype):
    """The protocol in the docstring with every float tensor in dtype."""
    p = {k: v.to(dtype).clone().requires_grad_(True) for k, v in init.params.items()}
    b = {k: v.to(dtype).clone() for k, v in init.buffers.items()}
    xd = x.to(dtype) if x.is_floating_point() else x
    yd = y.reshape(-1)

    def loss_fn():
        return F.cross_entropy(forward(p, b, xd), yd)

    loss = loss_fn()
    grads = torch.autograd.grad(loss, list(p.values()))
    opt = torch.optim.Adam(list(p.values()), lr=LR)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        l = loss_fn()
        l.backward()
        opt.step()
        losses.append(l.item())
    return loss.item(), [g.detach() for g in grads], losses, b


def rel(a, b):
    return float((a.double() - b.double()).norm() / max(b.double().norm(), 1e-30))


# ---------------------------------------------------------------- encoding

def enc_str(s):
    b = s.encode()
    return struct.pack("<H", len(b)) + b


def enc_tensor(t):
    t = t.detach().contiguous()
    head = struct.pack("<BBBB", CODES[t.dtype], t.dim(), 0, 0) + struct.pack("<%dq" % t.dim(), *t.shape)
    return head + t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()


def model_blob(name, init, forward, x, y):
    loss, grads, losses, bufs = run(init, forward, x, y, F64)
    # PyTorch's own f32 run, against the reference: what an f32 implementation can expect
    l32, g32, ls32, b32 = run(init, forward, x, y, F32)
    gerr = max(rel(a, b) for a, b in zip(g32, grads))
    lerr = max(abs(a - b) / abs(b) for a, b in zip(ls32, losses))
    berr = max([rel(b32[k], bufs[k]) for k in bufs] or [0.0])
    nparams = sum(v.numel() for v in init.params.values())
    print("%-4s %6d params  loss %.6f  PyTorch f32 vs f64 reference: loss %.1e, max grad %.1e, "
          "Adam losses %.1e, buffers %.1e" % (name, nparams, loss, abs(l32 - loss) / loss, gerr, lerr, berr))
    entries = [("x", x), ("y", y)]
    entries += [("p." + k, v) for k, v in init.params.items()]
    entries += [("b." + k, v) for k, v in init.buffers.items()]
    entries += [("loss", torch.tensor(loss, dtype=F64))]
    entries += [("g." + k, g.to(F32)) for k, g in zip(init.params, grads)]
    entries += [("losses", torch.tensor(losses, dtype=F64))]
    entries += [("bf." + k, v.to(F32)) for k, v in bufs.items()]
    out = [enc_str(name), struct.pack("<I", len(entries))]
    out += [enc_str(k) + enc_tensor(v) for k, v in entries]
    return b"".join(out)


MODELS = [("mlp", mlp_init, mlp_forward, 1), ("cnn", cnn_init, cnn_forward, 2), ("gpt", gpt_init, gpt_forward, 3)]


def main():
    torch.manual_seed(0)
    blobs = []
    for name, init_fn, forward, seed in MODELS:
        init, x, y = init_fn(seed)
        blobs.append(model_blob(name, init, forward, x, y))
    blob = b"KNMOD001" + struct.pack("<I", len(blobs)) + b"".join(blobs)
    os.makedirs(DATA, exist_ok=True)
    with open(os.path.join(DATA, "models.bin"), "wb") as f:
        f.write(blob)
    print("models.bin: %d models, %d bytes" % (len(blobs), len(blob)))


if __name__ == "__main__":
    main()
