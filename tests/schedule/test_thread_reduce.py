"""Cross-thread reductions: a reduction axis bound to threadIdx.x, lowered to warp
shuffles and, across warps, shared memory; run in the GPU simulator (and on a GPU where
there is one) against numpy, compiled by NVRTC."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tecomp
from tecomp import te
from tecomp.errors import IRVerifyError, LoweringError, TecompError
from tecomp.ir import expr as E
from tecomp.ir import stmt as S
from tecomp.ir.functor import IRMutator, post_order_visit
from tecomp.ir.interpreter import run
from tecomp.ir.verify import verify

import util

REDUCERS = {
    "sum": (te.sum, np.sum),
    "max": (te.max, np.max),
    "min": (te.min, np.min),
}


def _rows(rows, extent, threads, reducer="sum", where=False):
    """B[i] = reducer(A[i, k]) with a block per row: each of ``threads`` threads
    accumulates a strided share of the row (rfactor), then the threads combine."""
    A = te.placeholder((rows, extent), name="A")
    k = te.reduce_axis((0, extent), name="k")
    cond = {"where": A[0, k] > 0.5} if where else {}
    B = te.compute((rows,), lambda i: REDUCERS[reducer][0](A[i, k], axis=k, **cond), name="B")
    s = te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=threads)
    BF = s.rfactor(B, ki)
    s[B].bind(s[B].op.axis[0], te.thread_axis("blockIdx.x"))
    tx = s[B].op.reduce_axis[0]
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[BF].compute_at(s[B], tx)
    s[BF].set_scope("local")
    return s, [A, B]


def _nodes(func, cls):
    out = []
    post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


@settings(max_examples=12, deadline=None)
@given(threads=st.sampled_from([1, 2, 8, 16, 32, 64, 96, 256, 1024]),
       extent=st.integers(1, 2100), reducer=st.sampled_from(sorted(REDUCERS)),
       where=st.booleans(), seed=st.integers(0, 2**16))
def test_simulated_reduction_matches_numpy(threads, extent, reducer, where, seed):
    s, args = _rows(2, extent, threads, reducer, where)
    a = np.random.default_rng(seed).random((2, extent), dtype="float32")
    a[0, -1] = 1.0  # the condition keeps at least one point
    b = np.zeros(2, "float32")
    run(tecomp.lower(s, args, target="cuda"), a, b)
    kept = a[:, a[0] > 0.5] if where else a
    np.testing.assert_allclose(b, REDUCERS[reducer][1](kept, axis=1), rtol=1e-5)


@pytest.mark.parametrize("threads, shuffles, shared", [(16, 4, 0), (32, 5, 0), (256, 8, 8)])
def test_shuffles_fold_a_warp_and_shared_memory_joins_the_warps(threads, shuffles, shared):
    s, args = _rows(3, 1000, threads)
    f = tecomp.lower(s, args, target="cuda")
    steps = _nodes(f, S.WarpShuffle)
    assert len(steps) == shuffles
    # Within a warp: offsets 16, 8, ..., 1 (a warp's own lanes); then across its 8 warps.
    assert [x.offset for x in steps][:4] == [min(threads, 32) // 2 >> k for k in range(4)]
    allocs = [n.buffer for n in _nodes(f, S.Allocate) if n.buffer.scope == "shared"]
    assert sum(int(b.shape[0]) for b in allocs) == shared
    assert len(_nodes(f, S.Barrier)) == (1 if shared else 0)


def test_nvrtc_compiles_the_shuffles(cuda_target, rng):
    s, args = _rows(3, 700, 128)
    mod = tecomp.build(s, args, target=cuda_target)
    src = mod.get_source("cuda")
    assert src.count("__shfl_down_sync(0xffffffffu, ") == 7  # 5 in each warp, 2 across 4
    assert "__shared__ float B_warps[4];" in src and src.count("__syncthreads();") == 1
    a = util.rand(rng, (3, 700))
    util.check_schedule(s, args, [a], [a.sum(axis=1)], rtol=1e-5, target=cuda_target)


def test_a_block_smaller_than_a_warp_shuffles_its_own_lanes(cuda_target):
    s, args = _rows(2, 40, 8)
    src = tecomp.build(s, args, target=cuda_target).get_source("cuda")
    assert "__shfl_down_sync(0xffu, B_acc[0], 4, 8)" in src


def test_the_reduction_axis_itself_bound_without_rfactor(rng):
    A = te.placeholder((5, 64), name="A")
    k = te.reduce_axis((0, 64), name="k")
    B = te.compute((5,), lambda i: te.max(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(k, te.thread_axis("threadIdx.x"))
    a, b = util.rand(rng, (5, 64)), np.zeros(5, "float32")
    run(tecomp.lower(s, [A, B], target="cuda"), a, b)
    np.testing.assert_array_equal(b, a.max(axis=1))


@pytest.mark.parametrize("threads", [24, 48])
def test_thread_counts_that_do_not_fill_warps_are_refused(threads):
    s, args = _rows(2, 4096, threads)
    with pytest.raises(LoweringError, match=rf"stage B: its reduction axis bound to "
                       rf"threadIdx.x has extent {threads}; a cross-thread reduction needs"):
        tecomp.lower(s, args, target="cuda")


def test_a_bound_reduction_axis_beside_a_serial_one_is_refused():
    A = te.placeholder((2, 256), name="A")
    k = te.reduce_axis((0, 256), name="k")
    B = te.compute((2,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=32)
    s[B].reorder(B.op.axis[0], ki, ko)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(ki, te.thread_axis("threadIdx.x"))
    with pytest.raises(LoweringError, match=r"stage B: its reduction axis k.inner is bound "
                       r"to threadIdx.x beside the reduction loops k.outer; rfactor"):
        tecomp.lower(s, [A, B], target="cuda")


class _Diverge(IRMutator):
    """Puts the first shuffle under ``threadIdx.x < 16``."""

    def __init__(self, thread):
        super().__init__()
        self.thread, self.done = thread, False

    def visit_WarpShuffle(self, n):
        if self.done:
            return n
        self.done = True
        return S.IfThenElse(E.binary(E.LT, self.thread, E.IntImm(16, "int32")), n)


def test_simulator_reports_a_shuffle_some_lanes_never_reach():
    s, args = _rows(1, 64, 32)
    f = tecomp.lower(s, args, target="cuda")
    tx = next(n for n in _nodes(f, S.For) if n.thread_tag == "threadIdx.x").loop_var
    broken = f.with_body(_Diverge(tx).visit(f.body))
    with pytest.raises(TecompError, match=r"thread \(0, 0, 0\) reaches a warp shuffle that "
                                          r"thread \(16, 0, 0\) of its warp does not"):
        run(broken, np.ones((1, 64), "float32"), np.zeros(1, "float32"))


def test_verifier_checks_the_shuffle_width():
    s, args = _rows(1, 64, 32)
    f = tecomp.lower(s, args, target="cuda")

    class _Widen(IRMutator):
        def visit_WarpShuffle(self, n):
            return S.WarpShuffle(n.buffer, n.value, n.index, n.offset, 48)

    with pytest.raises(IRVerifyError, match=r"warp-shuffle.*segments of 48"):
        verify(f.with_body(_Widen().visit(f.body)))
    assert "shuffle_down(" in str(f)
