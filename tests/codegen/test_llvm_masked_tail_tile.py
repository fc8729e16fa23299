"""The masked tail of an accumulator tile (a split that does not divide the columns) stays
in registers: a lane-invariant load under the lane mask is one scalar load (a broadcast),
not a gather of one address, and a masked access to a stack buffer whose lanes are all
inside it is a plain load (and blend, for a store), which LLVM promotes to registers."""

import re

import numpy as np

import tecomp
from tecomp import te


def _tiled_matmul(n, k, m, rows, cols):
    """C = A @ B accumulated in a local rows x cols tile; m % cols leaves a masked tail."""
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*s[C].op.axis, rows, cols)
    s[C].vectorize(ji)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    s[CL].reorder(s[CL].op.reduce_axis[0], ci, cj)
    s[CL].unroll(ci)
    s[CL].vectorize(cj)
    return s, [A, B, C]


def test_masked_tail_tile_is_correct_without_gathers():
    s, args = _tiled_matmul(8, 20, 40, 4, 32)  # 40 = 32 + a tail of 8 columns
    mod = tecomp.build(s, args)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 20), dtype=np.float32)
    b = rng.standard_normal((20, 40), dtype=np.float32)
    c = np.full((8, 40), np.nan, np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    ir = mod.get_source("ll")
    assert "llvm.masked.gather" not in ir
    assert not re.search(r"vgather[dq]p", mod.get_source("asm"))


def test_lane_invariant_load_in_a_masked_tail_is_a_scalar_load():
    # The tail vector of a row of n (bound at run time) columns runs under a lane mask;
    # A[i] is the same for every lane: a scalar load, broadcast, not a gather.
    n = te.var("n")
    A = te.placeholder((3,), name="A")
    C = te.compute((3, n), lambda i, j: A[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    jo, ji = s[C].split(s[C].op.axis[1], factor=32)
    s[C].vectorize(ji)
    mod = tecomp.build(s, [A, C])
    assert "llvm.masked.gather" not in mod.get_source("ll")
    a = np.array([1.0, 2.0, 3.0], np.float32)
    for cols in (5, 32, 45):
        c = np.full((3, cols), np.nan, np.float32)
        mod(a, c)
        np.testing.assert_array_equal(c, np.repeat(a[:, None] * 2, cols, axis=1))
