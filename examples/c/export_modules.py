"""Export the two modules the C example calls, with test data from numpy.

    python export_modules.py --out DIR [--target "llvm -mtriple=aarch64-linux-gnu"]

writes DIR/mm.so + DIR/mm.h (a matmul with a symbolic row count), DIR/conv2d.so (a 3x3
convolution), and DIR/data/: the inputs and numpy's outputs as raw little-endian arrays
named ``<function>_<parameter>.bin`` (outputs: ``.expected.bin``).
"""

import argparse
import os

import numpy as np

import tecomp
from tecomp import te

MM_ROWS, MM_K, MM_COLS = 100, 64, 32  # main.c's N_ROWS, K, M
CONV = dict(batch=1, in_ch=8, out_ch=16, size=14, kernel=3, pad=1)


def matmul():
    n = te.var("n")
    A = te.placeholder((n, MM_K), name="A")
    B = te.placeholder((MM_K, MM_COLS), name="B")
    k = te.reduce_axis((0, MM_K), name="k")
    C = te.compute((n, MM_COLS), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 16)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=4)
    s[CL].reorder(ko, ki, ci, cj)
    s[CL].vectorize(cj)
    s[CL].unroll(ci)
    s[C].vectorize(ji)
    s[C].parallel(io)
    return s, [A, B, C]


def conv2d():
    c = CONV
    H = c["size"]
    data = te.placeholder((c["batch"], c["in_ch"], H, H), name="data")
    weight = te.placeholder((c["out_ch"], c["in_ch"], c["kernel"], c["kernel"]), name="weight")
    rc = te.reduce_axis((0, c["in_ch"]), name="rc")
    ry = te.reduce_axis((0, c["kernel"]), name="ry")
    rx = te.reduce_axis((0, c["kernel"]), name="rx")
    p = c["pad"]

    def padded(b, ch, y, x):
        inside = (y >= 0) & (y < H) & (x >= 0) & (x < H)
        return te.if_then_else(inside, data[b, ch, y, x], 0.0)

    out = te.compute(
        (c["batch"], c["out_ch"], H, H),
        lambda b, f, y, x: te.sum(padded(b, rc, y + ry - p, x + rx - p) * weight[f, rc, ry, rx],
                                  axis=[rc, ry, rx]),
        name="out",
    )
    s = te.create_schedule(out.op)
    b, f, y, x = out.op.axis
    xo, xi = s[out].split(x, factor=4)
    s[out].reorder(b, f, y, xo, *out.op.reduce_axis, xi)
    s[out].vectorize(xi)
    s[out].parallel(f)
    return s, [data, weight, out]


def reference_conv2d(x, w):
    c = CONV
    p, H, K = c["pad"], c["size"], c["kernel"]
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    out = np.zeros((c["batch"], c["out_ch"], H, H), "float32")
    for ry in range(K):
        for rx in range(K):
            out += np.einsum("bchw,fc->bfhw", xp[:, :, ry:ry + H, rx:rx + H], w[:, :, ry, rx])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", default="llvm")
    ns = ap.parse_args()
    os.makedirs(os.path.join(ns.out, "data"), exist_ok=True)
    rng = np.random.default_rng(0)

    def save(name, array):
        np.ascontiguousarray(array).tofile(os.path.join(ns.out, "data", name))

    s, args = matmul()
    mod = tecomp.build(s, args, target=ns.target, name="mm")
    mod.export_library(os.path.join(ns.out, "mm.so"))
    mod.export_header(os.path.join(ns.out, "mm.h"))
    a = rng.uniform(-1, 1, (MM_ROWS, MM_K)).astype("float32")
    b = rng.uniform(-1, 1, (MM_K, MM_COLS)).astype("float32")
    save("mm_A.bin", a)
    save("mm_B.bin", b)
    save("mm_C.expected.bin", a @ b)

    s, args = conv2d()
    mod = tecomp.build(s, args, target=ns.target, name="conv2d")
    mod.export_library(os.path.join(ns.out, "conv2d.so"))
    c = CONV
    x = rng.uniform(-1, 1, (c["batch"], c["in_ch"], c["size"], c["size"])).astype("float32")
    w = rng.uniform(-1, 1, (c["out_ch"], c["in_ch"], c["kernel"], c["kernel"])).astype("float32")
    save("conv2d_data.bin", x)
    save("conv2d_weight.bin", w)
    save("conv2d_out.expected.bin", reference_conv2d(x, w))
    print(f"exported mm.so, mm.h, conv2d.so for {mod.target} to {ns.out}")


if __name__ == "__main__":
    main()
