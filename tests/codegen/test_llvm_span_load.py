"""A vector load of a small constant stride (2 to 4) is contiguous vector loads over the
span of its lanes and a shuffle, not a gather; its lanes read what a gather reads."""

import re

import numpy as np
from cg_helpers import X86_AVX512, vectorized
from hypothesis import given, settings
from hypothesis import strategies as st

import tecomp
from tecomp import te


def _strided_copy(n_out, stride, offset, lanes, dtype):
    """B[i] = A[i * stride + offset] + 1, the last lane reading A's last element."""
    A = te.placeholder(((n_out - 1) * stride + offset + 1,), dtype, name="A")
    B = te.compute((n_out,), lambda i: A[i * stride + offset] + 1, name="B")
    return vectorized(B, 0, lanes), [A, B]


@settings(max_examples=40, deadline=None)
@given(stride=st.integers(2, 4), offset=st.integers(0, 3), lanes=st.sampled_from([4, 8, 16]),
       tiles=st.integers(1, 4), tail=st.integers(0, 3),
       dtype=st.sampled_from(["float32", "float64", "int32"]))
def test_strided_loads_read_every_lane_right(stride, offset, lanes, tiles, tail, dtype):
    n_out = tiles * lanes + tail
    s, args = _strided_copy(n_out, stride, offset, lanes, dtype)
    mod = tecomp.build(s, args)
    a = (np.random.default_rng(stride * 100 + n_out).random(args[0].shape[0].value) * 100
         ).astype(dtype)
    b = np.empty(n_out, dtype)
    mod(a, b)
    np.testing.assert_array_equal(b, a[offset::stride][:n_out] + 1)
    if tail == 0:
        # No lane mask anywhere: every vector load is a span load.
        assert "llvm.masked.gather" not in mod.get_source("ll")


def test_stride_two_on_avx512_is_two_loads_and_a_permute():
    s, args = _strided_copy(64, 2, 1, 16, "float32")
    asm = tecomp.build(s, args, target=X86_AVX512).get_source("asm")
    assert not re.search(r"vgather[dq]ps", asm)
    assert re.search(r"vperm[it]2ps|vshufps", asm)


def test_a_wider_stride_stays_a_gather():
    s, args = _strided_copy(32, 5, 0, 16, "float32")
    mod = tecomp.build(s, args)
    a = np.arange(args[0].shape[0].value, dtype=np.float32)
    b = np.empty(32, np.float32)
    mod(a, b)
    np.testing.assert_array_equal(b, a[::5] + 1)
    assert "llvm.masked.gather" in mod.get_source("ll")
