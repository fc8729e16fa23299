"""The CUDA passes of the pipeline: virtual threads, the host/device split, barriers."""

import numpy as np
import pytest

import tecomp
from tecomp.errors import TecompError
from tecomp.ir import expr as E
from tecomp.ir import stmt as S
from tecomp.ir.functor import IRMutator, post_order_visit
from tecomp.ir.gpu_sim import RaceError
from tecomp.ir.interpreter import run
from tecomp.ir.transform.pipeline import passes

import cuda_schedules


def _nodes(func, cls):
    out = []
    post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


def test_cuda_pipeline_adds_the_device_passes_after_the_common_ones():
    names = [p.name for p in passes(tecomp.Target("cuda"))]
    assert names == ["simplify", "partition_loops", "legalize", "inject_virtual_threads",
                     "split_host_device", "inject_double_buffer", "insert_barriers"]
    assert "split_host_device" not in [p.name for p in passes(tecomp.Target("llvm"))]


def test_one_kernel_per_root_stage_and_global_temporaries_on_the_host():
    s, args = cuda_schedules.two_kernels(n=48, threads=16)
    f = tecomp.lower(s, args, target="cuda", name="f")
    assert isinstance(f.body, S.Allocate) and f.body.buffer.name == "B"
    launches = _nodes(f, S.KernelLaunch)
    assert sorted(k.name for k in launches) == ["f_kernel0", "f_kernel1"]
    for k in launches:
        assert [E.const_value(d) for d in k.grid] == [3, 1, 1]
        assert [E.const_value(d) for d in k.block] == [16, 1, 1]
    by_name = {k.name: k for k in launches}
    assert [b.name for b in by_name["f_kernel0"].params] == ["A", "B"]
    assert [b.name for b in by_name["f_kernel1"].params] == ["C", "B"]


def test_a_global_temporary_computed_inside_a_kernel_is_not_a_kernel_parameter():
    from tecomp import te
    from tecomp.codegen.cuda.build import launch_plan
    from tecomp.ir.verify import verify

    x = te.placeholder((4, 6), name="x")
    k = te.reduce_axis((0, 6), name="k")
    total = te.compute((4,), lambda i: te.sum(x[i, k], axis=k), name="total")
    mean = te.compute((4,), lambda i: total[i] / 6.0, name="mean")
    s = te.create_schedule(mean.op)
    s[mean].bind(mean.op.axis[0], te.thread_axis("threadIdx.x"))
    s[total].compute_at(s[mean], mean.op.axis[0])  # one thread's, in its own global scope
    f = tecomp.lower(s, [x, mean], target="cuda", name="f")
    (launch,) = _nodes(f, S.KernelLaunch)
    assert [a.buffer.name for a in _nodes(launch, S.Allocate)] == ["total"]
    # The host allocates no "total" and could pass none: the kernel has its own.
    assert [b.name for b in launch.params] == ["x", "mean"]
    steps, _ = launch_plan(f)
    assert steps[-1]["buffers"] == [{"param": 0}, {"param": 1}]
    verify(f)
    data = np.random.rand(4, 6).astype("float32")
    out = np.zeros(4, "float32")
    run(f, data, out)
    np.testing.assert_allclose(out, data.mean(axis=1), rtol=1e-5)


def test_symbolic_size_is_a_kernel_argument_and_sizes_the_grid():
    s, args = cuda_schedules.elementwise(threads=64)
    (k,) = _nodes(tecomp.lower(s, args, target="cuda"), S.KernelLaunch)
    assert [v.name for v in k.scalars] == ["n"]
    assert "n" in str(k.grid[0])
    a = np.arange(100, dtype="float32")
    b = np.zeros(100, "float32")
    run(tecomp.lower(s, args, target="cuda"), a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_barriers_only_where_shared_data_passes_between_threads():
    s, args = cuda_schedules.matmul_shared()
    f = tecomp.lower(s, args, target="cuda")
    text = str(f)
    # Per k step: one barrier before the tiles are overwritten (the previous step's
    # threads may still read them), one after they are loaded; none elsewhere.
    assert text.count("barrier()") == 2
    ko = text.index("for k.outer")
    first, second = text.index("barrier()", ko), text.rindex("barrier()")
    assert first < text.index("A.shared[") < text.index("B.shared[") < second
    assert second < text.index("for k.inner.outer")


def test_no_barrier_without_shared_memory():
    for make in (cuda_schedules.row_sum, cuda_schedules.two_kernels):
        s, args = make()
        assert _nodes(tecomp.lower(s, args, target="cuda"), S.Barrier) == []


def test_virtual_threads_share_the_tiles_and_get_their_own_registers():
    s, args = cuda_schedules.matmul_shared()
    f = tecomp.lower(s, args, target="cuda")
    assert not [n for n in _nodes(f, S.For) if n.thread_tag == "vthread"]
    # The shared tiles are loaded once per k step, not once per virtual thread.
    stores = [n for n in _nodes(f, S.Store) if n.buffer.name == "A.shared"]
    assert len(stores) == 1
    loops_above = []

    def enclosing(node, target, path):
        if node is target:
            loops_above.extend(p for p in path if isinstance(p, S.For))
            return True
        for f_ in ("body", "then_case", "else_case"):
            c = getattr(node, f_, None)
            if isinstance(c, S.Stmt) and enclosing(c, target, path + [node]):
                return True
        if isinstance(node, S.SeqStmt):
            return any(enclosing(c, target, path + [node]) for c in node.seq)
        return False

    enclosing(f.body, stores[0], [])
    assert all(lp.kind != "unrolled" for lp in loops_above)


class _DropBarriers(IRMutator):
    def visit_SeqStmt(self, s):
        s = self.generic(s)
        return S.seq(*[c for c in s.seq if not isinstance(c, S.Barrier)])


def _matmul_arrays(rng):
    a = rng.random((32, 16), dtype="float32")
    b = rng.random((16, 32), dtype="float32")
    return a, b, np.zeros((32, 32), "float32")


def test_simulation_matches_numpy_with_the_inserted_barriers(rng):
    s, args = cuda_schedules.matmul_shared()
    a, b, c = _matmul_arrays(rng)
    run(tecomp.lower(s, args, target="cuda"), a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_simulation_reports_the_race_of_a_missing_barrier(rng):
    s, args = cuda_schedules.matmul_shared()
    f = tecomp.lower(s, args, target="cuda")
    broken = f.with_body(_DropBarriers().visit(f.body))
    assert _nodes(broken, S.Barrier) == []
    with pytest.raises(RaceError, match=r"kernel default_function_kernel0: thread .* "
                                        r"[AB].shared\[\d+\].*__syncthreads\(\) is missing"):
        run(broken, *_matmul_arrays(rng))


def test_simulation_reports_a_barrier_some_threads_never_reach():
    s, args = cuda_schedules.elementwise(n=8, threads=4)
    f = tecomp.lower(s, args, target="cuda")
    (k,) = _nodes(f, S.KernelLaunch)
    tx = next(n for n in _nodes(f, S.For) if n.thread_tag == "threadIdx.x")
    body = S.IfThenElse(E.binary(E.LT, tx.loop_var, E.IntImm(2, "int32")), S.Barrier())
    inner = S.For(tx.loop_var, tx.min, tx.extent, tx.kind, S.seq(body, tx.body), tx.thread_tag)

    class _Swap(IRMutator):
        def visit_For(self, n):
            return inner if n is tx else self.generic(n)

    with pytest.raises(TecompError, match=r"2 threads wait at a barrier that 2 others"):
        run(f.with_body(_Swap().visit(f.body)), np.zeros(8, "float32"), np.zeros(8, "float32"))


def test_barriers_stay_outside_the_guards_of_a_partial_tile(rng):
    # 40 rows do not divide into 16-row blocks: in the last block, some threads skip
    # their loads and stores; the barriers stay where every thread reaches them.
    s, args = cuda_schedules.matmul_shared(M=40, N=32, K=16)
    f = tecomp.lower(s, args, target="cuda")
    assert len(_nodes(f, S.Barrier)) == 2
    a = rng.random((40, 16), dtype="float32")
    b = rng.random((16, 32), dtype="float32")
    c = np.zeros((40, 32), "float32")
    run(f, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
