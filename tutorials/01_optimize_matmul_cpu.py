"""
From a naive matmul to one that runs near OpenBLAS speed
========================================================

We write C = A @ B once, as a tensor expression, and then change only the *schedule*:
blocking for the cache, loop permutation, vectorization, packing B into a layout the
inner loop reads contiguously, a register-sized accumulator (cache_write), and
parallelism. At every step we print the loop nest tecomp generates and its speed next
to numpy's.

Run it::

    python tutorials/01_optimize_matmul_cpu.py    # n = 1024
    TECOMP_TUTORIAL_N=256 python tutorials/01_optimize_matmul_cpu.py    # quick
    TECOMP_TUTORIAL_QUICK=1 python tutorials/01_optimize_matmul_cpu.py  # CI: one round
"""

import os
import statistics
import time

import numpy as np

import tecomp
from tecomp import te
from tecomp.timing import median_ratio, paired

N = int(os.environ.get("TECOMP_TUTORIAL_N", "1024"))
QUICK = os.environ.get("TECOMP_TUTORIAL_QUICK", "") not in ("", "0")  # CI: a smoke run
# Width of the vector lanes we block for: 16 float32 lanes fill a 512-bit register.
LANES = 16


def matmul(n):
    """The algorithm: C[i, j] = sum_k A[i, k] * B[k, j]. It never changes below."""
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


# Step 0: the default schedule is the textbook triple loop. Each k step of the inner loop
# reads B down a column, a new cache line every time.
def naive(n):
    A, B, C = matmul(n)
    s = te.create_schedule(C.op)
    return s, [A, B, C]


# Step 1: blocking. Work on 32x32 tiles of C so the pieces of A and B a tile needs stay
# in cache while they are reused.
def blocking(n, bn=32):
    A, B, C = matmul(n)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    s[C].reorder(io, jo, ko, ki, ii, ji)
    return s, [A, B, C]


# Step 2: vectorization. The innermost loop (ji) walks C and B contiguously; run its
# iterations as the lanes of one vector instruction.
def vectorized(n, bn=32):
    s, (A, B, C) = blocking(n, bn)
    s[C].vectorize(s[C].leaf_iter_vars[-1])
    return s, [A, B, C]


# Step 3: loop permutation. With ii outside ki, each row of the tile reuses one A element
# across the vector and reads B rows that are contiguous.
def permuted(n, bn=32):
    A, B, C = matmul(n)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    return s, [A, B, C]


def packed_matmul(n, bn):
    """Pack B into [n/bn, n, bn]: the bn columns a tile needs become one contiguous run."""
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    packedB = te.compute((n // bn, n, bn), lambda jo, k, ji: B[k, jo * bn + ji], name="packedB")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute(
        (n, n), lambda i, j: te.sum(A[i, k] * packedB[j // bn, k, j % bn], axis=k), name="C"
    )
    return A, B, packedB, C


# Step 4: array packing. The tile's inner loop now reads packedB with stride 1 and the
# next k step continues right after it: no cache line of B is wasted.
# On its own this step is often *slower* than step 3, and that is expected: packing is an
# extra pass over all of B on every call (n * n floats copied into a fresh buffer), while
# the inner loop is still limited by loading and storing its row of C on every k step,
# not by reading B, so the better layout of B buys little yet. It pays off in step 5,
# where the accumulator lives in registers and streaming B becomes what limits the loop.
def packing(n, bn=32):
    A, B, packedB, C = packed_matmul(n, bn)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[packedB].vectorize(packedB.op.axis[2])
    return s, [A, B, C]


# Step 5: a write cache. Accumulate a (rows x 2*LANES) tile of C in a local buffer that
# fits in vector registers: with the row loop unrolled and the lane loop vectorized, every
# access to the accumulator has a constant offset, so LLVM keeps it in registers for the
# whole k loop. The tile is written back to C once.
def write_cache(n, rows=8, bn=2 * LANES, kfactor=4):
    A, B, packedB, C = packed_matmul(n, bn)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], rows, bn)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=kfactor)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    s[packedB].vectorize(packedB.op.axis[2])
    return s, [A, B, C], (io, jo, packedB)


def cached(n):
    s, args, _ = write_cache(n)
    return s, args


# Step 6: parallelism. Tiles of C are independent: spread the outer tile loop over all
# cores, and pack B in parallel too.
def parallel(n):
    s, args, (io, jo, packedB) = write_cache(n)
    C = args[2]
    s[C].parallel(s[C].fuse(io, jo))
    s[packedB].parallel(packedB.op.axis[0])
    return s, args


STEPS = [
    ("naive", naive),
    ("blocking", blocking),
    ("vectorized", vectorized),
    ("loop permutation", permuted),
    ("array packing", packing),
    ("write cache", cached),
    ("parallel", parallel),
]


def gflops(n, seconds):
    return 2.0 * n**3 / seconds / 1e9


def main():
    rng = np.random.default_rng(0)
    a = rng.random((N, N), dtype=np.float32)
    b = rng.random((N, N), dtype=np.float32)
    expected = a @ b
    print(f"matmul {N}x{N}x{N}, float32, target {tecomp.Target('llvm')}")
    for title, make in STEPS:
        s, args = make(N)
        t0 = time.perf_counter()
        mod = tecomp.build(s, args, target="llvm", name="matmul")
        build_s = time.perf_counter() - t0
        print(f"\n=== {title} ===")
        print(tecomp.lower(s, args, name="matmul"))
        c = np.empty((N, N), "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-3)
        # The machine's speed drifts, so numpy and our kernel are timed in alternation and
        # compared round by round (tecomp.timing); slow steps get a single round.
        first = mod.time_evaluator(number=1, repeat=1)(a, b, c).median
        times = paired({"numpy": lambda: a @ b, "ours": lambda: mod(a, b, c)},
                       rounds=1 if first > 0.5 or QUICK else 5)
        ours, ref = statistics.median(times["ours"]), statistics.median(times["numpy"])
        print(
            f"--> {title}: {gflops(N, ours):7.1f} GFLOPS   numpy {gflops(N, ref):7.1f} GFLOPS"
            f"   ratio {median_ratio(times['numpy'], times['ours']):5.2f}x"
            f"   (lower+build {build_s * 1e3:.0f} ms)"
        )
    print("\nThe final schedule's inner loop, in x86 assembly (look for zmm and vfmadd):")
    asm = mod.get_source("asm")
    lines = [ln for ln in asm.splitlines() if "vfmadd" in ln]
    print("\n".join(lines[:8]))


if __name__ == "__main__":
    main()
