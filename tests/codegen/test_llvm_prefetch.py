"""``Stage.prefetch`` on LLVM targets: one ``prefetcht0`` per cache line the announced
access touches, at the address ``offset`` iterations ahead, and results unchanged."""

import re

import numpy as np
import pytest
from cg_helpers import X86_AVX512

import tecomp
from tecomp import te


def _rows_times_matrix(dtype, offset):
    """C = A @ B with B's 16 columns vectorized and B prefetched ``offset`` rows ahead."""
    A = te.placeholder((8, 32), dtype, name="A")
    B = te.placeholder((32, 16), dtype, name="B")
    k = te.reduce_axis((0, 32), name="k")
    C = te.compute((8, 16), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    s[C].reorder(i, k, j)
    s[C].vectorize(j)
    s[C].prefetch(B, k, offset)
    return s, [A, B, C]


@pytest.mark.parametrize("dtype, lines", [("float32", 1), ("float64", 2)])
@pytest.mark.parametrize("offset", [-3, 1, 8, 40])
def test_prefetch_announces_each_line_ahead_and_changes_no_result(dtype, lines, offset):
    rng = np.random.default_rng(abs(offset))
    a, b = rng.random((8, 32)).astype(dtype), rng.random((32, 16)).astype(dtype)
    c = np.zeros((8, 16), dtype)
    # Run on this machine's CPU (which may lack AVX-512); read the AVX-512 machine code.
    tecomp.build(*_rows_times_matrix(dtype, offset), target="llvm")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-6)  # offset 40 runs past B's 32 rows
    mod = tecomp.build(*_rows_times_matrix(dtype, offset), target=X86_AVX512)
    # One prefetch per line per (row, k), however far LLVM unrolls the loops (8 x 32).
    ll = mod.get_source("ll")
    count = ll.count("call void @llvm.prefetch.p0(")
    assert count % lines == 0 and 0 < count <= 8 * 32 * lines
    asm = mod.get_source("asm")
    found = {(int(d or 0), base) for d, base in re.findall(r"prefetcht0\s+(-?\d*)\((.*)\)", asm)}
    if lines == 2:   # a 128-byte row: its second line too, 64 bytes on from the same base
        assert any((d + 64, base) in found for d, base in found)
    else:            # B's row k + offset: the displacement in the machine code
        assert offset * 64 in {d for d, _ in found}


def test_a_stage_prefetches_what_it_will_write_ready_to_be_written():
    # Each row of C is written 2 rows ahead of its stores: prefetchw, with write intent,
    # of one line per 16 floats, and the results are those of the plain schedule.
    A = te.placeholder((64, 64), name="A")
    C = te.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=16)
    s[C].vectorize(ji)
    s[C].prefetch(C, i, 2)
    assert "prefetch(C[i * 64 + j.outer * 16 + j.inner + 128], 1)" in str(tecomp.lower(s, [A, C]))
    a = np.random.default_rng(0).random((64, 64)).astype("float32")
    c = np.zeros_like(a)
    tecomp.build(s, [A, C], target="llvm")(a, c)
    np.testing.assert_array_equal(c, a * 2.0)
    ll = tecomp.build(s, [A, C], target=X86_AVX512).get_source("ll")
    assert re.search(r"call void @llvm\.prefetch\.p0\(ptr [^,]+, i32 1, i32 3, i32 1\)", ll)
