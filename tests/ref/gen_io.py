#!/usr/bin/python3
"""gen_io.py -- fixtures for tests/test_io.c: safetensors files and gzip streams.

Run from anywhere with Debian's interpreter, which sees python3-torch:

    /usr/bin/python3 tests/ref/gen_io.py

It rewrites tests/ref/io_fixture.h (deterministic bytes) with C arrays:

  io_ref_st    a safetensors file laid out exactly as the safetensors library
               lays it out (Debian's torch 1.13 has no safetensors package, so
               the layout is written here with struct and json): tensors sorted
               by dtype, descending in the library's Dtype order, then by name;
               compact JSON padded with spaces to a multiple of 8 bytes; data
               from torch tensors. Element i of the k-th tensor of REF is
               value(k, i) (below, and again in test_io.c), so the C side knows
               what to expect without reading the file's own bytes; and
               kn_save of the same tensors must give this file byte for byte.
  io_odd_st    a valid file in a form no writer of ours produces: indented JSON
               with escapes, __metadata__, an unpadded header, tensors in an
               order that leaves a F32 tensor misaligned, a dtype kiln lacks
               (I16) and a non-ASCII name.
  io_gz_*      gzip streams from Python's zlib with their plain text: stored,
               fixed and dynamic Huffman blocks (each checked here by reading
               the first block's BTYPE), back-references across blocks, long
               runs, all header flags (FEXTRA, FNAME, FCOMMENT, FHCRC) over one
               member holding all three block types, two members, empty input.
  io_idx_gz    a gzip'd IDX file of u8 dims (2, 3, 4), element i = (7 i) % 256.
"""

import gzip
import json
import os
import random
import struct
import zlib

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "io_fixture.h")

# safetensors' Dtype enum order (its sort key) and the torch dtype of each kiln one
RANK = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64",
        "I64", "U64"]
TORCH = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
         "I32": torch.int32, "I64": torch.int64, "BOOL": torch.bool, "U8": torch.uint8, "I16": torch.int16}

# name, dtype, shape: the order is k in value(k, i)
REF = [("fc1.weight", "F32", (3, 4)), ("fc1.bias", "F32", (3,)), ("emb", "F64", (2, 2)), ("half", "F16", (5,)),
       ("bf", "BF16", (2, 3)), ("idx", "I64", (4,)), ("count", "I32", (2, 2)), ("mask", "BOOL", (3,)),
       ("pixels", "U8", (2, 3)), ("scalar", "F32", ()), ("empty", "F32", (0, 3))]


def value(k, i, dtype):
    """Exactly representable in every dtype: floats are quarters in [-2.75, 2.75]."""
    r = (i * 37 + k * 11) % 23
    if dtype in ("F32", "F64", "F16", "BF16"):
        return (r - 11) / 4
    if dtype == "I64":
        return (r - 11) * 100000000007
    if dtype in ("I32", "I16"):
        return (r - 11) * 1000
    if dtype == "BOOL":
        return r % 2
    return r * 11  # U8


def make(k, dtype, shape):
    n = 1
    for s in shape:
        n *= s
    vals = [value(k, i, dtype) for i in range(n)]
    t = torch.tensor(vals, dtype=torch.float64 if dtype in ("F16", "BF16", "F32", "F64") else torch.int64)
    return t.to(TORCH[dtype]).reshape(shape)


def raw(t):
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.contiguous().numpy().tobytes()


def safetensors_bytes(tensors, metadata=None):
    """The safetensors library's layout of {name: (dtype, tensor)}."""
    order = sorted(tensors, key=lambda n: (-RANK.index(tensors[n][0]), n))
    header, off, data = {}, 0, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name in order:
        dtype, t = tensors[name]
        b = raw(t)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        data += b
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def odd_bytes():
    u8 = torch.tensor([1, 2, 250], dtype=torch.uint8)
    f32 = torch.tensor([1.5, -2.25], dtype=torch.float32)
    i16 = torch.tensor([-7, 300], dtype=torch.int16)
    f64 = torch.tensor([3.0], dtype=torch.float64)
    parts = [("b.u8", "U8", u8), ("a.f32", "F32", f32), ("skipped.i16", "I16", i16), ("caf\u00e9", "F64", f64)]
    header, off, data = {"__metadata__": {"format": "pt", "note": "caf\u00e9 \"quoted\"\n"}}, 0, b""
    for name, dtype, t in parts:
        b = raw(t)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        data += b
    h = json.dumps(header, indent=1).encode()  # ensure_ascii: "caf\\u00e9"
    h += b"\n" * ((3 - len(h)) % 8)  # length 3 mod 8: the data starts misaligned
    assert len(h) % 8 == 3 and 3 % 4 != 0
    return struct.pack("<Q", len(h)) + h + data


def text(seed, n):
    rnd = random.Random(seed)
    words = "kiln tensor graph kernel fuse lower schedule loop buffer arena float gradient the a of to and " \
            "compile cache guard trace shape stride view".split()
    out = []
    while sum(len(w) + 1 for w in out) < n:
        out.append(rnd.choice(words) + rnd.choice(["", "", "", ",", "."]))
    return (" ".join(out)[:n]).encode()


def deflate(data, level=9, strategy=zlib.Z_DEFAULT_STRATEGY, flush=zlib.Z_FINISH):
    c = zlib.compressobj(level, zlib.DEFLATED, -15, 8, strategy)
    return c.compress(data) + c.flush(flush)


def btype(raw_deflate):
    return (raw_deflate[0] >> 1) & 3


def member(body, plain, header=None):
    if header is None:
        header = bytes([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255])
    return header + body + struct.pack("<II", zlib.crc32(plain), len(plain) & 0xffffffff)


def gzip_streams():
    s = {}
    p = text(1, 300)
    body = deflate(p, level=0)
    assert btype(body) == 0
    s["stored"] = (member(body, p), p)

    p = b"hello, kiln! hello, kiln! hello!\n"
    body = deflate(p)
    assert btype(body) == 1
    s["fixed"] = (member(body, p), p)

    # one compressor, a sync flush between two copies: the second block refers back into the first
    p = text(2, 1500)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = c.compress(p) + c.flush(zlib.Z_SYNC_FLUSH) + c.compress(p) + c.flush()
    assert btype(body) == 2
    s["dynamic"] = (member(body, p + p), p + p)

    p = b"a" * 1000 + b"ab" * 300 + bytes(range(256)) * 3 + b"z" * 258 * 4
    s["runs"] = (gzip.compress(p, 9, mtime=0), p)

    # all three block types in one member, behind a header with every optional field
    p1, p2, p3 = text(3, 200), text(4, 300), text(5, 1500)
    b1 = deflate(p1, level=0, flush=zlib.Z_SYNC_FLUSH)
    b2 = deflate(p2, strategy=zlib.Z_FIXED, flush=zlib.Z_SYNC_FLUSH)
    b3 = deflate(p3)
    assert (btype(b1), btype(b2), btype(b3)) == (0, 1, 2)
    h = bytes([0x1f, 0x8b, 8, 2 | 4 | 8 | 16, 1, 2, 3, 4, 2, 3]) + struct.pack("<H", 6) + b"KN\x02\x00hi"
    h += b"weights.txt\x00" + b"a comment\x00"
    h += struct.pack("<H", zlib.crc32(h) & 0xffff)
    s["flags"] = (member(b1 + b2 + b3, p1 + p2 + p3, h), p1 + p2 + p3)

    m1, m2 = text(6, 500), b"second member\n"
    s["multi"] = (gzip.compress(m1, 9, mtime=0) + gzip.compress(m2, 0, mtime=0), m1 + m2)

    s["empty"] = (gzip.compress(b"", 9, mtime=0), b"")
    for name, (gz, plain) in s.items():
        assert gzip.decompress(gz) == plain, name
    return s


def carray(name, b):
    lines = [", ".join(str(x) for x in b[i:i + 24]) for i in range(0, len(b), 24)]
    body = ",\n    ".join(lines) or "0"
    return f"static const unsigned char {name}[{max(len(b), 1)}] = {{\n    {body}\n}};\n"


def main():
    ref = {name: (dt, make(k, dt, shape)) for k, (name, dt, shape) in enumerate(REF)}
    st = safetensors_bytes(ref)
    idx = struct.pack(">BBBBIII", 0, 0, 8, 3, 2, 3, 4) + bytes((7 * i) % 256 for i in range(24))
    gz = gzip_streams()

    out = ["/* io_fixture.h -- generated by tests/ref/gen_io.py; do not edit. See its docstring. */",
           "#ifndef KN_IO_FIXTURE_H", "#define KN_IO_FIXTURE_H", "", "#include <stddef.h>", ""]
    out.append(carray("io_ref_st", st))
    out.append(carray("io_odd_st", odd_bytes()))
    out.append(carray("io_idx_gz", gzip.compress(idx, 9, mtime=0)))
    for name, (g, plain) in gz.items():
        out.append(carray(f"io_gz_{name}", g))
        out.append(carray(f"io_gz_{name}_plain", plain))
    out.append("typedef struct {\n    const char *name;\n    const unsigned char *gz, *plain;\n"
               "    size_t ngz, nplain;\n} IoGz;\n")
    rows = [f'    {{"{n}", io_gz_{n}, io_gz_{n}_plain, sizeof io_gz_{n}, {len(p)}}},' for n, (g, p) in gz.items()]
    out.append("static const IoGz io_gz[] = {\n" + "\n".join(rows) + "\n};\n")
    out.append("#endif")
    with open(OUT, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {OUT}: ref {len(st)} bytes, {len(gz)} gzip streams")


if __name__ == "__main__":
    main()
