"""A transposing copy nest (unrolled k, vectorized x: dst[a + k*s + x] = src[b + k + x*t])
is emitted as row loads, a shuffle network and row stores
(``tecomp.codegen.llvm.transpose``); everything else keeps the general path. Results are
compared with numpy for every shape."""

import re

import numpy as np
import pytest
from cg_helpers import X86_AVX512

import tecomp
from tecomp import te
from tecomp.codegen.llvm.transpose import transpose_nest
from tecomp.ir import For
from tecomp.ir.functor import post_order_visit


def _transpose(rows, cols, dtype="float32", local=True):
    """C[cols, rows] = (A * 2)[rows, cols] transposed, with ``B = A * 2`` optionally in a
    local buffer; C's column loop unrolled, its row loop vectorized."""
    A = te.placeholder((rows, cols), dtype, name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * te.const(2, dtype), name="B")
    C = te.compute((cols, rows), lambda j, i: B[i, j], name="C")
    s = te.create_schedule(C.op)
    j, i = s[C].op.axis
    s[C].unroll(j)
    s[C].vectorize(i)
    if local:
        s[B].set_scope("local")
    return s, A, C


def _unrolled_nests(stmt):
    found = []

    def fn(n):
        if isinstance(n, For) and n.kind == "unrolled":
            ext = n.extent.value if hasattr(n.extent, "value") else None
            if ext is not None and transpose_nest(n, ext) is not None:
                found.append(n)

    post_order_visit(stmt, fn)
    return found


def _run(s, A, C, rows, cols, dtype="float32"):
    mod = tecomp.build(s, [A, C])
    rng = np.random.default_rng(rows * 100 + cols)
    a = (rng.random((rows, cols)) * 100).astype(dtype)
    c = np.full((cols, rows), 7, dtype)
    mod(a, c)
    np.testing.assert_array_equal(c, (a * 2).T)
    return mod


@pytest.mark.parametrize("cols", [2, 4, 8, 16, 32, 64])
@pytest.mark.parametrize("rows", [2, 3, 7, 8, 14, 16, 28, 40, 64])
def test_transposing_copy_matches_numpy(rows, cols):
    # Blocks of up to 16 x 16: partial blocks in both directions, rows spanning two
    # vectors of the network (few columns, many rows).
    s, A, C = _transpose(rows, cols)
    assert _unrolled_nests(tecomp.lower(s, [A, C]).body)
    _run(s, A, C, rows, cols)


def test_padding_copy_is_a_transposing_nest():
    # What conv2d's input packing is: a zero-padded, channel-blocked copy. The padding
    # condition depends on the unrolled column, so rows are masked loads.
    C, H, W, bn = 8, 5, 5, 8
    A = te.placeholder((C, H, W), name="A")
    P = te.compute((H + 2, 16, bn), lambda y, x, c: te.if_then_else(
        te.all(y >= 1, y < H + 1, x >= 1, x < W + 1), A[c, y - 1, x - 1] + 1.0, 0.0),
        name="P")
    s = te.create_schedule(P.op)
    y, x, c = s[P].op.axis
    s[P].unroll(x)
    s[P].vectorize(c)
    assert _unrolled_nests(tecomp.lower(s, [A, P]).body)
    mod = tecomp.build(s, [A, P])
    a = np.random.default_rng(4).random((C, H, W), dtype=np.float32)
    p = np.full((H + 2, 16, bn), np.nan, np.float32)
    mod(a, p)
    ref = np.zeros((H + 2, 16, bn), np.float32)
    ref[1:H + 1, 1:W + 1] = a.transpose(1, 2, 0) + 1
    np.testing.assert_array_equal(p, ref)


@pytest.mark.parametrize("dtype", ["float64", "int32", "int8", "float16"])
def test_transposing_copy_other_dtypes(dtype):
    s, A, C = _transpose(7, 16, dtype, local=dtype != "int32")
    assert _unrolled_nests(tecomp.lower(s, [A, C]).body)
    _run(s, A, C, 7, 16, dtype)


def test_transpose_of_a_register_tile_uses_few_shuffles():
    # An 8 x 32 tile: 3 rounds of 8 two-source shuffles on 32 lanes (two zmm each), about
    # 48 permutes; built lane by lane LLVM needs about 300.
    s, A, C = _transpose(8, 32)
    _run(s, A, C, 8, 32)  # on this machine's CPU, which may lack AVX-512
    asm = tecomp.build(s, [A, C], target=X86_AVX512).get_source("asm")
    shuffles = len(re.findall(r"\bv(?:perm|unpck|shuf|insert|extract|blend)\w*", asm))
    assert shuffles <= 100, shuffles
    assert "vmovss" not in asm


def test_odd_width_rows_are_one_masked_store_each_on_avx512():
    s, A, C = _transpose(7, 16)
    _run(s, A, C, 7, 16)
    asm = tecomp.build(s, [A, C], target=X86_AVX512).get_source("asm")
    assert len(re.findall(r"vmovups\s+%ymm\d+, [^\n]*\{%k\d\}", asm)) == 16


def test_tile_inside_an_outer_loop_with_offsets():
    # The nest sits under a symbolic outer loop: bases are expressions, not constants.
    n = te.var("n")
    A = te.placeholder((n, 8, 16), name="A")
    C = te.compute((n, 16, 8), lambda b, j, i: A[b, i, j], name="C")
    s = te.create_schedule(C.op)
    b, j, i = s[C].op.axis
    s[C].unroll(j)
    s[C].vectorize(i)
    assert _unrolled_nests(tecomp.lower(s, [A, C]).body)
    mod = tecomp.build(s, [A, C])
    a = np.random.default_rng(3).random((5, 8, 16), dtype=np.float32)
    c = np.empty((5, 16, 8), np.float32)
    mod(a, c)
    np.testing.assert_array_equal(c, a.transpose(0, 2, 1))


def test_not_a_transpose_keeps_the_general_path():
    # Contiguous in both (a copy), and a non-power-of-two unrolled extent: no match.
    A = te.placeholder((8, 16), name="A")
    C = te.compute((8, 16), lambda i, j: A[i, j], name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].unroll(i)
    s[C].vectorize(j)
    assert not _unrolled_nests(tecomp.lower(s, [A, C]).body)
    s2, A2, C2 = _transpose(8, 12)
    assert not _unrolled_nests(tecomp.lower(s2, [A2, C2]).body)
    _run(s2, A2, C2, 8, 12)
