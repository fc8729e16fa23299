"""Double buffering of shared tiles: the schedule primitive, the pass, and the result in
simulation and through NVRTC."""

import re

import numpy as np
import pytest

import tecomp
from tecomp import te
from tecomp.errors import ScheduleError
from tecomp.ir import stmt as S
from tecomp.ir.functor import post_order_visit

import cuda_schedules


def _allocations(func):
    out = []
    post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, S.Allocate) else None)
    return {a.buffer.name: a for a in out}


def test_tiles_are_doubled_and_indexed_by_the_parity_of_the_k_step():
    s, args = cuda_schedules.matmul_shared(K=32, step=8, double_buffer=True)
    f = tecomp.lower(s, args, target="cuda")
    allocs = _allocations(f)
    assert [int(d.value) for d in allocs["A.shared"].buffer.shape] == [2, 16, 8]
    assert [int(d.value) for d in allocs["B.shared"].buffer.shape] == [2, 8, 16]
    text = str(f)
    # The prefetch fills half 0 before the loop; inside, the next step fills the other
    # half while the compute reads the current one.
    assert "if k.outer + 1 < 4:" in text
    for name in ("A", "B"):
        assert re.search(rf"  {name}\.shared\[[^]=]*\(k\.outer \+ 1\) % 2 \* 128[^]=]*\] = ",
                         text)
        assert re.search(rf"= {name}\.shared\[[^]]*[^(]k\.outer % 2 \* 128", text)
    assert text.index("A.shared = allocate") < text.index("for k.outer")
    # One barrier after the prefetch and one per step, before the fill of the next half
    # (the previous step read it): the fill and the compute of a step touch different
    # halves and need none between them.
    loop = text[text.index("for k.outer"):]
    assert text.count("barrier()") == 2 and loop.count("barrier()") == 1
    assert loop.index("barrier()") < loop.index("if k.outer + 1 < 4:")
    assert f.attrs["double_buffered"] == {allocs["A.shared"].buffer.data,
                                          allocs["B.shared"].buffer.data}


def test_without_double_buffer_the_tiles_stay_single():
    s, args = cuda_schedules.matmul_shared(K=32, step=8)
    allocs = _allocations(tecomp.lower(s, args, target="cuda"))
    assert [int(d.value) for d in allocs["A.shared"].buffer.shape] == [16, 8]


@pytest.mark.parametrize("K,step", [(32, 8), (16, 8), (24, 8)])
def test_double_buffered_matmul_matches_numpy_in_simulation(K, step, cuda_target, rng):
    s, args = cuda_schedules.matmul_shared(K=K, step=step, double_buffer=True)
    mod = tecomp.build(s, args, target="cuda")
    a = rng.random((32, K), dtype="float32")
    b = rng.random((K, 32), dtype="float32")
    c = np.zeros((32, 32), "float32")
    mod.simulate(a, b, c)  # raises RaceError on a missing barrier
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_double_buffered_matmul_compiles_with_nvrtc(cuda_target):
    s, args = cuda_schedules.matmul_shared(K=32, double_buffer=True)
    mod = tecomp.build(s, args, target="cuda", name="mm")
    src = mod.get_source("cuda")
    assert "__shared__ float A_shared[256];" in src
    assert "__shared__ float B_shared[256];" in src
    assert mod.cubin[:4] == b"\x7fELF"


def _staged_matmul():
    A = te.placeholder((16, 16), name="A")
    B = te.placeholder((16, 16), name="B")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((16, 16), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C, te.create_schedule(C.op)


def test_double_buffer_needs_a_shared_stage():
    A, B, C, s = _staged_matmul()
    AL = s.cache_read(A, "local", [C])
    s[AL].compute_at(s[C], C.op.axis[1])
    with pytest.raises(ScheduleError, match=r"double_buffer on stage A\.local: .*'local'"):
        s[AL].double_buffer()


def test_double_buffer_needs_a_stage_computed_at_a_loop():
    A, B, C, s = _staged_matmul()
    AA = s.cache_read(A, "shared", [C])
    with pytest.raises(ScheduleError,
                       match=r"double_buffer on stage A\.shared: .*not computed at a loop"):
        s[AA].double_buffer()


def test_double_buffer_on_an_llvm_target_is_rejected():
    s, args = cuda_schedules.matmul_shared(double_buffer=True)
    with pytest.raises(ScheduleError,
                       match=r"double_buffer on stage A\.shared: .*CUDA target, not llvm"):
        tecomp.lower(s, args, target="llvm")
