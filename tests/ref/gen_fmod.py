#!/usr/bin/python3
"""gen_fmod.py -- tests/ref/fmod_fixture.h: torch.fmod at its edge cases.

Run from anywhere with Debian's interpreter, which sees python3-torch:

    /usr/bin/python3 tests/ref/gen_fmod.py

For f32 and f64, every pair of a grid of dividends and divisors that holds
signed zeros, infinities, NaN, subnormals and exact multiples; a few large
quotients and huge divisors; and 64 random pairs of quotients up to 2^40
(kiln's fmod is exact below 2^53); for i32 and i64, signs, 0, +-1 and the extremes (not INT_MIN % -1,
which traps in PyTorch, nor a zero divisor, which raises: tests/test_fmod.c
checks kiln's error for it). Floats are written as bit patterns, so -0 and NaN
survive; the output is deterministic.
"""
import os
import struct

import torch

INF, NAN = float("inf"), float("nan")
FA = [5.0, -5.0, 0.0, -0.0, 1.5, -1.5, 7.25, -7.25, 0.3, -6.0, 12345.5, 3e-39, INF, -INF, NAN]
FB = [3.0, -3.0, 2.0, 0.1, -0.25, 1e-3, 1.5, 0.0, -0.0, INF, -INF, NAN]
BIG = [(1e8, 3.0), (-1e8, 7.0), (1e10, 3.0), (16777217.0, 2.0), (1e10, 0.1), (0.7, 0.1), (1e301, 3e300),
       (-1e308, 7e305), (1e-300, 3e-310)]
I32 = [7, -7, 0, 5, -5, 1, -1, 2147483647, -2147483647, -2147483648]
I64 = [7, -7, 0, 5, -5, 1, -1, 9223372036854775807, -9223372036854775807, -9223372036854775808]


def random_pairs(n):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, generator=g, dtype=torch.float64) * 10.0 ** (torch.rand(n, generator=g, dtype=torch.float64) * 9 - 3)
    b = torch.randn(n, generator=g, dtype=torch.float64) * 10.0 ** (torch.rand(n, generator=g, dtype=torch.float64) * 6 - 3)
    return [(x, y) for x, y in zip(a.tolist(), b.tolist()) if abs(x / y) < 2.0 ** 40]


def float_rows(dtype, fmt, ufmt):
    pairs = [(a, b) for a in FA for b in FB] + BIG + random_pairs(64)
    a = torch.tensor([p[0] for p in pairs], dtype=dtype)
    b = torch.tensor([p[1] for p in pairs], dtype=dtype)
    y = torch.fmod(a, b)

    def bits(v):
        return struct.unpack(ufmt, struct.pack(fmt, v))[0]
    return [(bits(x), bits(z), bits(w)) for x, z, w in zip(a.tolist(), b.tolist(), y.tolist())]


def int_rows(dtype, vals):
    lo = min(vals)
    pairs = [(a, b) for a in vals for b in vals if b != 0 and not (a == lo and b == -1)]
    a = torch.tensor([p[0] for p in pairs], dtype=dtype)
    b = torch.tensor([p[1] for p in pairs], dtype=dtype)
    return list(zip(a.tolist(), b.tolist(), torch.fmod(a, b).tolist()))


def c_int(v, bits):
    if v == -(1 << (bits - 1)):  # no negative literal of the minimum in C
        return "(-INT%d_C(%d) - 1)" % (bits, (1 << (bits - 1)) - 1)
    return "INT%d_C(%d)" % (bits, v)


def main():
    out = ["/* tests/ref/fmod_fixture.h -- written by tests/ref/gen_fmod.py from torch.fmod (PyTorch %s);"
           " do not edit.\n * Rows {a, b, torch.fmod(a, b)}: floats as bit patterns. */" % torch.__version__,
           "#ifndef KN_FMOD_FIXTURE_H", "#define KN_FMOD_FIXTURE_H", "#include <stdint.h>", ""]
    for name, dtype, fmt, ufmt, ctype, digits in (("f32", torch.float32, "<f", "<I", "uint32_t", 8),
                                                  ("f64", torch.float64, "<d", "<Q", "uint64_t", 16)):
        rows = float_rows(dtype, fmt, ufmt)
        suffix = "u" if digits == 8 else "ull"
        out.append("static const %s fmod_%s[%d][3] = {" % (ctype, name, len(rows)))
        out += ["    {0x%0*x%s, 0x%0*x%s, 0x%0*x%s}," % (digits, a, suffix, digits, b, suffix, digits, w, suffix)
                for a, b, w in rows]
        out.append("};")
    for name, dtype, vals, bits in (("i32", torch.int32, I32, 32), ("i64", torch.int64, I64, 64)):
        rows = int_rows(dtype, vals)
        out.append("static const int%d_t fmod_%s[%d][3] = {" % (bits, name, len(rows)))
        out += ["    {%s, %s, %s}," % (c_int(a, bits), c_int(b, bits), c_int(w, bits)) for a, b, w in rows]
        out.append("};")
    out += ["", "#endif", ""]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fmod_fixture.h")
    with open(path, "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()
