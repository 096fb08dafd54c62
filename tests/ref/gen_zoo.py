#!/usr/bin/python3
"""gen_zoo.py -- the state_dict layout of src/models.c's models, from PyTorch.

Run with Debian's interpreter, which sees python3-torch:

    /usr/bin/python3 tests/ref/gen_zoo.py > /tmp/zoo_ref.h

It builds each model of src/models.c as torch modules with the same names
(mlp; the CIFAR ResNet-18 with torchvision's names; the GPT-2 style model;
the small Fashion-MNIST CNN) and prints C tables of the ordered parameter and
buffer names with shapes (num_batches_tracked left out: kiln keeps no such
buffer) and the parameter counts. tests/test_zoo.c holds a pasted copy of the
output between its "gen_zoo.py" markers.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 512)
        self.fc2 = nn.Linear(512, 512)
        self.fc3 = nn.Linear(512, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class BasicBlock(nn.Module):  # torchvision.models.resnet.BasicBlock
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + (self.downsample(x) if self.downsample is not None else x))


class ResNet18(nn.Module):  # CIFAR stem: conv3x3, no max-pool
    def __init__(self, w=64, in_ch=3):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, w, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        cin = w
        for i, (c, s) in enumerate([(w, 1), (2 * w, 2), (4 * w, 2), (8 * w, 2)]):
            setattr(self, "layer%d" % (i + 1), nn.Sequential(BasicBlock(cin, c, s), BasicBlock(c, c, 1)))
            cin = c
        self.fc = nn.Linear(8 * w, 10)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(d, 3 * d)
        self.attn.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(d, 4 * d)
        self.mlp.c_proj = nn.Linear(4 * d, d)


class GPT(nn.Module):
    def __init__(self, vocab=4096, context=128, d=256, layers=4):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        self.h = nn.ModuleList([Block(d) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)


class SmallCNN(nn.Module):
    def __init__(self, w=16):
        super().__init__()
        self.conv1 = nn.Conv2d(1, w, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        self.conv2 = nn.Conv2d(w, 2 * w, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(2 * w)
        self.fc = nn.Linear(2 * w * 7 * 7, 10)


def table(cname, m):
    print("static const RefEntry %s[] = {" % cname)
    rows = [(n, p.shape, 0) for n, p in m.named_parameters()]
    rows += [(n, b.shape, 1) for n, b in m.named_buffers() if not n.endswith("num_batches_tracked")]
    for n, s, buf in rows:
        dims = ", ".join(str(x) for x in s)
        print('    {"%s", %d, %d, {%s}},' % (n, buf, len(s), dims))
    print("};")


def count(m):
    return sum(p.numel() for p in m.parameters())


print("/* gen_zoo.py: PyTorch %s */" % torch.__version__.split("a")[0])
table("ref_mlp", MLP())
table("ref_cnn8", ResNet18(8))
table("ref_gpt_small", GPT(vocab=64, context=16, d=32, layers=2))
table("ref_smallcnn", SmallCNN())
for name, m in [("mlp", MLP()), ("cnn", ResNet18()), ("gpt", GPT()), ("smallcnn", SmallCNN()),
                ("cnn8", ResNet18(8)), ("gpt_small", GPT(vocab=64, context=16, d=32, layers=2))]:
    print("#define REF_COUNT_%s %dLL" % (name.upper(), count(m)))
print("/* end gen_zoo.py */")
