"""Gathers and scatters address their lanes with 32-bit offsets from one base pointer where
they fit (16-lane vgatherdps / vscatterdps on AVX-512 instead of pairs of 8-lane ...qps)."""

import re

import numpy as np
from cg_helpers import X86_AVX512

import tecomp
from tecomp import te


def _kinds(mod):
    return set(re.findall(r"v(?:gather|scatter)[dq]ps", mod.get_source("asm")))


def test_strided_gather_uses_32bit_offsets():
    A = te.placeholder((64, 16), name="A")
    B = te.compute((16, 64), lambda i, j: A[j, i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(B.op.axis[1])
    mod = tecomp.build(s, [A, B])
    a = np.random.default_rng(0).random((64, 16), dtype=np.float32)
    b = np.empty((16, 64), np.float32)
    mod(a, b)
    np.testing.assert_array_equal(b, a.T * 2)
    assert _kinds(tecomp.build(s, [A, B], target=X86_AVX512)) == {"vgatherdps"}


def test_strided_scatter_under_mask_and_negative_stride():
    # out[j, 9 - i] for a width that leaves a masked tail: a scatter with stride -W whose
    # lane 0 may be a disabled lane.
    A = te.placeholder((10, 13), name="A")
    B = te.compute((13, 10), lambda j, i: A[i, j] + 1.0, name="B")
    C = te.compute((13, 10), lambda j, i: B[j, 9 - i], name="C")
    s = te.create_schedule(C.op)
    j, i = s[C].op.axis
    s[C].reorder(i, j)
    jo, ji = s[C].split(j, factor=16)
    s[C].vectorize(ji)
    s[B].compute_inline()
    mod = tecomp.build(s, [A, C])
    a = np.random.default_rng(1).random((10, 13), dtype=np.float32)
    c = np.full((13, 10), np.nan, np.float32)
    mod(a, c)
    np.testing.assert_array_equal(c, (a.T + 1)[:, ::-1])


def test_data_dependent_gather_index_into_small_buffer():
    A = te.placeholder((1000,), name="A")
    idx = te.placeholder((64,), dtype="int32", name="idx")
    B = te.compute((64,), lambda i: A[idx[i]], name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    mod = tecomp.build(s, [A, idx, B])
    rng = np.random.default_rng(2)
    a = rng.random(1000, dtype=np.float32)
    ix = rng.integers(0, 1000, 64).astype(np.int32)
    b = np.empty(64, np.float32)
    mod(a, ix, b)
    np.testing.assert_array_equal(b, a[ix])
