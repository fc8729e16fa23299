"""What ``bind``, thread axes and GPU scopes mean to lowering, and the schedule errors a
CUDA target raises (each names the stage and the axis)."""

import pytest

import tecomp
from tecomp import te
from tecomp.errors import ScheduleError
from tecomp.ir import stmt as S
from tecomp.ir.functor import post_order_visit

import cuda_schedules


def _vector(n=256):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    return A, B, te.create_schedule(B.op)


def _allocations(func):
    out = {}
    post_order_visit(func.body, lambda n: out.setdefault(n.buffer.name, n.buffer)
                     if isinstance(n, S.Allocate) else None)
    return out


def test_unbound_stage_on_cuda_names_the_stage_and_its_loops():
    A, B, s = _vector()
    with pytest.raises(ScheduleError, match=r"stage B runs at root.*\(i\).*blockIdx"):
        tecomp.lower(s, [A, B], target="cuda")


def test_loop_outside_the_bound_ones_must_be_bound():
    A, B, s = _vector()
    o, i = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(i, te.thread_axis("threadIdx.x"))
    with pytest.raises(ScheduleError, match=r"stage B: loop i.outer encloses .*not bound"):
        tecomp.lower(s, [A, B], target="cuda")


def test_axis_bound_twice():
    A, B, s = _vector()
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(ScheduleError, match=r"bind on stage B: axis i is already bound to "
                                            r"threadIdx.x"):
        s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))


def test_one_thread_index_bound_to_two_axes_of_a_stage():
    A, B, s = _vector()
    o, i = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(o, te.thread_axis("threadIdx.x"))
    with pytest.raises(ScheduleError, match=r"threadIdx.x is already bound to axis i.outer"):
        s[B].bind(i, te.thread_axis("threadIdx.x"))


def test_reduction_axis_binds_to_threadIdx_x_only():
    A = te.placeholder((8, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(ScheduleError, match=r"bind on stage B: axis k is a reduction axis; "
                       r"binding it to threadIdx.y would make threads race"):
        s[B].bind(k, te.thread_axis("threadIdx.y"))
    s[B].bind(k, te.thread_axis("threadIdx.x"))  # a cross-thread reduction


def test_thread_extent_over_the_target_limit():
    A, B, s = _vector(1024)
    o, i = s[B].split(B.op.axis[0], factor=256)
    s[B].bind(o, te.thread_axis("blockIdx.x"))
    s[B].bind(i, te.thread_axis("threadIdx.x"))
    tecomp.lower(s, [A, B], target="cuda")  # 256 <= 1024
    with pytest.raises(ScheduleError, match=r"stage B, axis i.inner to threadIdx.x: extent "
                                            r"256 is over .*max-threads-per-block \(128\)"):
        tecomp.lower(s, [A, B], target="cuda -max-threads-per-block=128")


def test_block_of_threads_over_the_limit_across_dimensions():
    s, args = cuda_schedules.matmul_shared(M=64, N=64, K=16, block=32, threads=8)
    with pytest.raises(ScheduleError, match=r"stage C: its kernel's block has 64 threads"):
        tecomp.lower(s, args, target="cuda -max-threads-per-block=32")


def test_shared_memory_over_the_target_limit():
    s, args = cuda_schedules.matmul_shared()
    tecomp.lower(s, args, target="cuda")  # two 16x8 float tiles: 1 KiB
    with pytest.raises(ScheduleError, match=r"stage C: its kernel uses 1024 bytes of shared "
                                            r"memory .*A.shared 512 B.*max-shared-memory"):
        tecomp.lower(s, args, target="cuda -max-shared-memory-per-block=1000")


def test_parallel_on_cuda():
    A, B, s = _vector()
    o, i = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(o, te.thread_axis("blockIdx.x"))
    s[B].parallel(i)
    with pytest.raises(ScheduleError, match=r"parallel on stage B, axis i.inner: a CUDA "
                                            r"target has no CPU threads"):
        tecomp.lower(s, [A, B], target="cuda")


def test_shared_stage_at_root():
    A, B, s = _vector()
    AS = s.cache_read(A, "shared", [B])
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    s[AS].bind(AS.op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(ScheduleError, match=r"stage A.shared is in the 'shared' scope.*"
                                            r"computed at root"):
        tecomp.lower(s, [A, B], target="cuda")


def test_local_stage_at_root():
    A, B, s = _vector()
    BL = s.cache_write(B, "local")
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    s[BL].bind(BL.op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(ScheduleError, match=r"stage B.local is in the 'local' scope, which "
                                            r"lives in one thread, but is computed at root"):
        tecomp.lower(s, [A, B], target="cuda")


def test_shared_scope_on_llvm():
    A, B, s = _vector()
    s.cache_read(A, "shared", [B])
    with pytest.raises(ScheduleError, match=r"A.shared.*'shared' scope.*CUDA.*not llvm"):
        tecomp.lower(s, [A, B], target="llvm")


def test_lower_inside_a_cuda_scope_checks_for_cuda():
    A, B, s = _vector()
    with tecomp.Target("cuda"), pytest.raises(ScheduleError, match="stage B runs at root"):
        tecomp.lower(s, [A, B])


def test_shared_tile_covers_every_thread_and_virtual_thread_of_the_block():
    # The shared copy is computed inside each thread's loop nest, but one copy serves the
    # block: its region is the block's 16-row tile of A by 8 columns of k, not one
    # thread's rows.
    s, args = cuda_schedules.matmul_shared()
    bufs = _allocations(tecomp.lower(s, args, target="cuda"))
    assert [int(d.value) for d in bufs["A.shared"].shape] == [16, 8]
    assert [int(d.value) for d in bufs["B.shared"].shape] == [8, 16]
    # Registers: one 2x2 accumulator per thread and virtual thread (2x2 of them).
    assert [int(d.value) for d in bufs["C.local"].shape] == [2, 2, 2, 2]
