"""A constant-stride vector access to a small stack buffer is done lane by lane (scalar
loads + insertelement, extractelement + scalar stores), not as a gather or scatter
intrinsic, so SROA can keep the buffer in registers (e.g. a transposed write-back of an
accumulator tile)."""

import re

import numpy as np

import tecomp
from tecomp import te


def _transpose_through_local(rows, cols, factor, unroll_cols=False):
    A = te.placeholder((rows, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((cols, rows), lambda j, i: B[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    j, i = s[C].op.axis
    io, ii = s[C].split(i, factor=factor)
    s[C].reorder(io, j, ii)
    s[C].vectorize(ii)
    if unroll_cols:
        s[C].unroll(j)
    s[B].set_scope("local")
    s[B].compute_at(s[C], io)
    bi, bj = s[B].op.axis
    s[B].unroll(bi)
    s[B].vectorize(bj)
    return s, A, C


def _no_gather_or_scatter(mod):
    ir = mod.get_source("ll")
    assert "llvm.masked.gather" not in ir and "llvm.masked.scatter" not in ir
    assert not re.search(r"v(?:gather|scatter)[dq]p", mod.get_source("asm"))


def test_strided_load_from_local_buffer_is_lanewise():
    s, A, C = _transpose_through_local(8, 16, 8)
    text = str(tecomp.lower(s, [A, C]))
    assert "local" in text
    mod = tecomp.build(s, [A, C])
    a = np.random.default_rng(0).random((8, 16), dtype=np.float32)
    c = np.empty((16, 8), np.float32)
    mod(a, c)
    np.testing.assert_array_equal(c, a.T * 2 + 1)
    _no_gather_or_scatter(mod)


def test_strided_load_from_local_buffer_with_odd_width_and_tail():
    # 7 lanes, and 10 rows in tiles of 7: the vector loop runs under a mask. With the
    # columns unrolled every lane's address is a constant inside the buffer: lane by lane
    # still; with a variable base it stays a (masked) gather.
    for unroll in (True, False):
        s, A, C = _transpose_through_local(10, 5, 7, unroll_cols=unroll)
        mod = tecomp.build(s, [A, C])
        a = np.random.default_rng(1).random((10, 5), dtype=np.float32)
        c = np.full((5, 10), np.nan, np.float32)
        mod(a, c)
        np.testing.assert_array_equal(c, a.T * 2 + 1)
        if unroll:
            _no_gather_or_scatter(mod)


def test_strided_store_into_local_buffer_is_lanewise():
    A = te.placeholder((16, 8), name="A")
    B = te.compute((8, 16), lambda i, j: A[j, i] * 2.0, name="B")
    C = te.compute((16, 8), lambda j, i: B[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    j, i = s[C].op.axis
    s[C].unroll(j)
    s[C].vectorize(i)
    s[B].set_scope("local")
    bi, bj = s[B].op.axis
    s[B].reorder(bj, bi)
    s[B].unroll(bj)
    s[B].vectorize(bi)
    mod = tecomp.build(s, [A, C])
    a = np.random.default_rng(2).random((16, 8), dtype=np.float32)
    c = np.empty((16, 8), np.float32)
    mod(a, c)
    np.testing.assert_array_equal(c, a * 2 + 1)
    assert "llvm.masked.scatter" not in mod.get_source("ll")
