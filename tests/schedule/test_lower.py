"""Lowering: bound inference, tails, attach points and the shape of the loop nest.

These tests need no code generator: the loop IR runs in the reference interpreter.
"""

import numpy as np
import pytest

import tecomp
from tecomp import te
from tecomp.ir import stmt as S
from tecomp.ir.functor import post_order_visit
from tecomp.ir.interpreter import run


def nodes(func, cls):
    out = []
    post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


def matmul_relu(n=None):
    n = n if n is not None else te.var("n")
    A = te.placeholder((n, 64), name="A")
    B = te.placeholder((64, 32), name="B")
    k = te.reduce_axis((0, 64), name="k")
    C = te.compute((n, 32), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((n, 32), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return A, B, C, D


def design_schedule(A, B, C, D):
    s = te.create_schedule(D.op)
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[D].tile(D.op.axis[0], D.op.axis[1], 8, 16)
    s[C].compute_inline()
    s[CL].compute_at(s[D], jo)
    ci, cj = s[CL].op.axis
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=4)
    s[CL].reorder(ko, ci, ki, cj)
    s[CL].vectorize(cj)
    s[CL].unroll(ki)
    s[D].vectorize(ji)
    s[D].parallel(io)
    return s


@pytest.mark.parametrize("rows", [8, 13, 1])
def test_design_example_matches_numpy(rows):
    A, B, C, D = matmul_relu()
    f = tecomp.lower(design_schedule(A, B, C, D), [A, B, D])
    a = np.random.rand(rows, 64).astype("float32")
    b = np.random.rand(64, 32).astype("float32")
    d = np.zeros((rows, 32), "float32")
    run(f, a, b, d)
    np.testing.assert_allclose(d, np.maximum(a @ b, 0), rtol=1e-5)


def test_compute_at_region_is_the_tile():
    A, B, C, D = matmul_relu()
    f = tecomp.lower(design_schedule(A, B, C, D), [A, B, D])
    # One tile for the row blocks before the last, one for the last (a symbolic count).
    allocs = nodes(f, S.Allocate)
    assert len(allocs) == 2
    for alloc in allocs:
        assert [s.value for s in alloc.buffer.shape] == [8, 16]
        assert alloc.buffer.scope == "local"


def test_divisible_constant_loops_have_no_guard():
    A, B, C, D = matmul_relu(n=64)
    f = tecomp.lower(design_schedule(A, B, C, D), [A, B, D])
    assert nodes(f, S.IfThenElse) == []


def test_non_dividing_split_tail_is_peeled():
    # The split's guard (i.outer * 4 + i.inner < 10) holds for i.outer < 2: the loop is
    # partitioned into an unguarded main part and a tail of 2 iterations.
    A = te.placeholder((10,), name="A")
    B = te.compute((10,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=4)
    f = tecomp.lower(s, [A, B])
    assert not nodes(f, S.IfThenElse)
    extents = [int(loop.extent.value) for loop in nodes(f, S.For)]
    assert sorted(extents) == [2, 2, 4], str(f)
    a = np.arange(10, dtype="float32")
    b = np.zeros(10, "float32")
    run(f, a, b)
    np.testing.assert_array_equal(b, a * 2)


def innermost_store(func):
    stores = nodes(func, S.Store)
    return stores[-1]


def test_split_and_fused_indices_reduce_to_affine_strides():
    A = te.placeholder((64, 64), name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    io, jo, ii, ji = s[B].tile(B.op.axis[0], B.op.axis[1], 8, 16)
    s[B].fuse(io, jo)
    f = tecomp.lower(s, [A, B])
    store = innermost_store(f)
    text = str(store.index)
    # The inner loops contribute plain strides; only the fused outer axis needs // and %.
    assert "i.inner * 64" in text and "j.inner" in text
    assert "i.inner //" not in text and "j.inner %" not in text


def test_symbolic_size_binds_at_run_time():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].vectorize(xi)
    f = tecomp.lower(s, [A, B])
    assert f.size_vars == (n,)
    for size in (1, 4, 7):
        a = np.random.rand(size).astype("float32")
        b = np.zeros(size, "float32")
        run(f, a, b)
        np.testing.assert_allclose(b, a + 1)


def test_reduction_init_is_placed_before_the_first_reduce_loop():
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=3)
    s[B].reorder(ko, B.op.axis[0], ki)
    f = tecomp.lower(s, [A, B])
    text = str(f)
    assert text.index("B[i] = 0.0") < text.index("for k.outer")
    a = np.random.rand(4, 6).astype("float32")
    b = np.zeros(4, "float32")
    run(f, a, b)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5)


def test_rfactor_gives_the_same_sum():
    A = te.placeholder((3, 20), name="A")
    k = te.reduce_axis((0, 20), name="k")
    B = te.compute((3,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=8)
    BF = s.rfactor(B, ki)
    assert BF.shape[0].value == 8
    s[BF].vectorize(s[BF].op.axis[0])
    f = tecomp.lower(s, [A, B])
    a = np.random.rand(3, 20).astype("float32")
    b = np.zeros(3, "float32")
    run(f, a, b)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5)


def test_rfactor_tests_the_split_tail_before_the_where_condition():
    # The condition reads x[j]; in the tail of the split, lanes past n must be turned off
    # before it is read, or a vectorized tail reads past the end of x.
    n = te.var("n")
    x = te.placeholder((n,), name="x")
    j = te.reduce_axis((0, n), name="j")
    y = te.compute((1,), lambda i: te.sum(x[j], axis=j, where=x[j] > 0), name="y")
    s = te.create_schedule(y.op)
    _, ji = s[y].split(j, factor=8)
    yf = s.rfactor(y, ji)
    s[yf].vectorize(s[yf].op.axis[0])
    f = tecomp.build(s, [x, y], target="llvm", check_bounds=True)
    for size in (1, 3, 9, 17):
        xs = np.random.default_rng(size).standard_normal(size).astype("float32")
        out = np.zeros(1, "float32")
        f(xs, out)
        np.testing.assert_allclose(out, [xs[xs > 0].sum()], rtol=1e-5)


def test_cache_read_copies_into_local_buffer():
    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] * 3.0, name="B")
    s = te.create_schedule(B.op)
    AL = s.cache_read(A, "local", [B])
    io, ii = s[B].split(B.op.axis[0], factor=2)
    s[AL].compute_at(s[B], io)
    f = tecomp.lower(s, [A, B])
    (alloc,) = nodes(f, S.Allocate)
    assert [x.value for x in alloc.buffer.shape] == [2, 8]
    a = np.random.rand(8, 8).astype("float32")
    b = np.zeros((8, 8), "float32")
    run(f, a, b)
    np.testing.assert_allclose(b, a * 3, rtol=1e-6)


def test_a_stage_read_at_gathered_positions_is_computed_whole():
    # gather_nd binds the positions it reads from its index tensor with Let: the region of
    # its producer is unknown until they are read, so the producer computes all of it
    # (it once computed [pos, pos] from variables defined only inside the gather).
    from tecomp.topi import transform

    x = te.placeholder((2, 6), name="x")
    doubled = te.compute((2, 6), lambda i, j: x[i, j] * 2.0, name="doubled")
    idx = te.placeholder((3, 2), dtype="int64", name="idx")
    y = transform.gather_nd(doubled, idx)
    s = te.create_schedule(y.op)
    f = tecomp.lower(s, [x, idx, y])
    (alloc,) = nodes(f, S.Allocate)
    assert [v.value for v in alloc.buffer.shape] == [2, 6]
    a = np.arange(12, dtype="float32").reshape(2, 6)
    ia = np.array([[0, 5], [1, -1], [1, 0]], "int64")
    out = np.zeros(3, "float32")
    run(f, a, ia, out)
    np.testing.assert_array_equal(out, [10.0, 22.0, 12.0])


def test_padding_stage_computed_inside_split_loop():
    X = te.placeholder((2, 7, 7), name="X")
    P = te.compute(
        (2, 9, 9),
        lambda c, h, w: te.if_then_else(
            te.all(h >= 1, h < 8, w >= 1, w < 8), X[c, h - 1, w - 1], 0.0
        ),
        name="P",
    )
    rh = te.reduce_axis((0, 3), name="rh")
    rw = te.reduce_axis((0, 3), name="rw")
    Y = te.compute(
        (2, 4, 4),
        lambda c, h, w: te.max(P[c, h * 2 + rh, w * 2 + rw], axis=[rh, rw]),
        name="Y",
    )
    s = te.create_schedule(Y.op)
    ho, hi = s[Y].split(Y.op.axis[1], factor=3)
    s[P].compute_at(s[Y], ho)
    f = tecomp.lower(s, [X, Y])
    x = np.random.rand(2, 7, 7).astype("float32")
    y = np.zeros((2, 4, 4), "float32")
    run(f, x, y)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    ref = np.array(
        [[[xp[c, h * 2 : h * 2 + 3, w * 2 : w * 2 + 3].max() for w in range(4)]
          for h in range(4)] for c in range(2)]
    )
    np.testing.assert_allclose(y, ref)


def test_tuple_reduction_argmax():
    def fcombine(x, y):
        keep = x[1] >= y[1]
        return te.if_then_else(keep, x[0], y[0]), te.if_then_else(keep, x[1], y[1])

    argmax = te.comm_reducer(fcombine, lambda t0, t1: (te.const(-1, t0), te.min_value(t1)))
    A = te.placeholder((3, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    idx, val = te.compute((3,), lambda i: argmax((k.var, A[i, k]), axis=k), name="T")
    s = te.create_schedule(idx.op)
    f = tecomp.lower(s, [A, idx, val])
    a = np.random.rand(3, 5).astype("float32")
    ri = np.zeros(3, "int32")
    rv = np.zeros(3, "float32")
    run(f, a, ri, rv)
    np.testing.assert_array_equal(ri, a.argmax(1))
    np.testing.assert_array_equal(rv, a.max(1))


def test_lowered_function_prints_a_readable_loop_nest():
    A, B, C, D = matmul_relu()
    text = str(tecomp.lower(design_schedule(A, B, C, D), [A, B, D]))
    assert text.startswith(
        "def default_function(A: float32[n, 64], B: float32[64, 32], D: float32[n, 32]):"
    )
    assert "# parallel" in text and "# vectorized" in text and "# unrolled" in text
    assert "C.local = allocate(float32, [8, 16], local)" in text


def _where_sum():
    """``B[i] = sum over r, k of A[i, r, k]`` where ``r >= 1``, ``i + k < 9`` and ``i >= 2``:
    one conjunct per loop level (a reduction loop, the inner reduction loop together
    with the row, and the row alone). The sizes are symbolic so that loop partitioning,
    which would decide the conjuncts by cutting constant loops, leaves them in place."""
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m, 5), name="A")
    r = te.reduce_axis((0, m), name="r")
    k = te.reduce_axis((0, 5), name="k")
    B = te.compute((n,), lambda i: te.sum(
        A[i, r, k], axis=[r, k], where=te.all(r >= 1, i + k < 9, i >= 2)), name="B")
    a = np.random.default_rng(0).uniform(-1, 1, (6, 3, 5)).astype("float32")
    i, rr, kk = np.meshgrid(np.arange(6), np.arange(3), np.arange(5), indexing="ij")
    ref = np.where((rr >= 1) & (i + kk < 9) & (i >= 2), a, 0).sum(axis=(1, 2))
    return A, B, a, ref


def _lower_and_run(s, A, B, a, ref):
    func = tecomp.lower(s, [A, B])
    out = np.full(6, np.nan, "float32")
    run(func, a, out)
    # i >= 2 says nothing about the init: the rows it rejects still read 0, not NaN.
    np.testing.assert_allclose(out, ref, rtol=1e-5)
    return {f.loop_var.name: f for f in nodes(func, S.For)}


def test_reduction_where_is_tested_at_the_loop_that_decides_it():
    A, B, a, ref = _where_sum()
    s = te.create_schedule(B.op)
    loops = _lower_and_run(s, A, B, a, ref)
    # r >= 1 and i >= 2 wrap the k loop (inside r: the init is outside r, untested),
    # i + k < 9 the update inside k.
    r_body, k_body = loops["r"].body, loops["k"].body
    assert isinstance(r_body, S.IfThenElse) and r_body.then_case is loops["k"]
    assert "r" in str(r_body.condition) and "k" not in str(r_body.condition)
    assert isinstance(k_body, S.IfThenElse) and "k" in str(k_body.condition)
    assert isinstance(k_body.then_case, S.Store)


def test_reduction_where_ignores_loops_of_one_iteration():
    """A cache stage's axis of extent 1 (a tile's row) sits inside the reduction loops;
    the conjuncts over the row alone still go to the reduction loop they need."""
    A, B, a, ref = _where_sum()
    s = te.create_schedule(B.op)
    BL = s.cache_write(B, "local")
    io, ii = s[B].split(B.op.axis[0], factor=1)
    s[BL].compute_at(s[B], io)
    r, k = s[BL].op.reduce_axis
    s[BL].reorder(r, k, s[BL].op.axis[0])
    loops = _lower_and_run(s, A, B, a, ref)
    assert isinstance(loops["r"].body, S.IfThenElse)
    assert "k" not in str(loops["r"].body.condition)


def _prefetching_matmul(offset=8):
    """C = A @ B, rows in tiles of 4 (unrolled), B's 16 columns vectorized, B prefetched
    ``offset`` iterations of k ahead."""
    A = te.placeholder((8, 32), name="A")
    B = te.placeholder((32, 16), name="B")
    k = te.reduce_axis((0, 32), name="k")
    C = te.compute((8, 16), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    j = C.op.axis[1]
    s[C].reorder(io, k, ii, j)
    s[C].unroll(ii)
    s[C].vectorize(j)
    s[C].prefetch(B, k, offset)
    return s, [A, B, C]


def _prefetches(func):
    out = []
    post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, S.Evaluate)
                     and S.prefetched(n) is not None else None)
    return out


def test_prefetch_sits_outside_the_loops_its_index_does_not_use():
    s, args = _prefetching_matmul()
    func = tecomp.lower(s, args)
    (pf,) = _prefetches(func)
    text = str(func)
    # In k's body, before the tile's rows (which B's index does not use), around a copy
    # of the vectorized column loop (which it does): one prefetch per k, not one per row.
    assert "for k in range(32):\n      for j_pf in range(16):  # vectorized\n" \
           "        prefetch(B[k * 16 + j_pf + 128])\n      for i.inner" in text
    assert S.prefetched(pf).buffer.name == "B"
    # The interpreter ignores the hint, even though its index runs past B at the end.
    a, b = np.random.rand(8, 32).astype("float32"), np.random.rand(32, 16).astype("float32")
    c = np.zeros((8, 16), "float32")
    run(func, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_prefetch_checks_its_arguments():
    s, (A, B, C) = _prefetching_matmul()
    other = te.placeholder((4,), name="other")
    with pytest.raises(tecomp.ScheduleError, match="tensor other is neither read by this stage"):
        s[C].prefetch(other, C.op.reduce_axis[0], 1)
    with pytest.raises(tecomp.ScheduleError, match="offset=0 must be a non-zero int"):
        s[C].prefetch(B, C.op.reduce_axis[0], 0)
    with pytest.raises(tecomp.ScheduleError, match="is not an iteration variable"):
        s[C].prefetch(B, "k", 1)
    with pytest.raises(tecomp.ScheduleError, match="streaming=1 must be a bool"):
        s[C].prefetch(B, C.op.reduce_axis[0], 1, streaming=1)
    with pytest.raises(tecomp.ScheduleError, match="not its output C"):
        s[C].prefetch(C, C.op.axis[1], 1, streaming=True)


def test_a_streaming_prefetch_keeps_its_hint_through_lowering():
    s, (A, B, C) = _prefetching_matmul()
    s[C].prefetch(B, C.op.reduce_axis[0], 16, streaming=True)
    ahead = {int(str(S.prefetched(pf).index).rsplit("+ ", 1)[1]): S.prefetch_streaming(pf)
             for pf in _prefetches(tecomp.lower(s, [A, B, C]))}
    assert ahead == {8 * 16: False, 16 * 16: True}


def test_prefetch_of_an_inlined_tensor_is_refused_when_lowering():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] * 2, name="B")
    C = te.compute((16,), lambda i: B[i] + 1, name="C")
    s = te.create_schedule(C.op)
    s[C].prefetch(B, C.op.axis[0], 4)
    s[B].compute_inline()
    with pytest.raises(tecomp.LoweringError, match="prefetches B, which is inlined"):
        tecomp.lower(s, [A, C])


def test_storage_align_pads_the_row_stride_of_the_allocation(needs_llvm):
    A = te.placeholder((8, 12), name="A")
    B = te.compute((8, 12), lambda i, j: A[i, j] * 3.0, name="B")
    s = te.create_schedule(B.op)
    AL = s.cache_read(A, "local", [B])
    io, ii = s[B].split(B.op.axis[0], factor=4)
    s[AL].compute_at(s[B], io)
    s[AL].storage_align(AL.op.axis[0], 8, 1)
    f = tecomp.lower(s, [A, B])
    (alloc,) = nodes(f, S.Allocate)
    # Rows of 12 elements spaced 17 apart: the smallest 8k + 1 no less than 12.
    assert [x.value for x in alloc.buffer.shape] == [4, 17]
    assert "A.local[i.inner * 17 + j]" in str(f)
    a = np.random.rand(8, 12).astype("float32")
    b = np.zeros((8, 12), "float32")
    run(f, a, b)
    np.testing.assert_allclose(b, a * 3, rtol=1e-6)
    b[:] = 0
    tecomp.build(s, [A, B], target="llvm")(a, b)
    np.testing.assert_allclose(b, a * 3, rtol=1e-6)


def test_storage_align_of_a_symbolic_row_and_the_cases_it_rejects():
    n = te.var("n")
    A = te.placeholder((4, n), name="A")
    B = te.compute((4, n), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((4, n), lambda i, j: B[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[B].storage_align(B.op.axis[0], 4, 0)
    f = tecomp.lower(s, [A, C])
    (alloc,) = nodes(f, S.Allocate)
    a = np.random.rand(4, 5).astype("float32")
    c = np.zeros((4, 5), "float32")
    run(f, a, c)
    np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)
    assert "n" in str(alloc.buffer.shape[1])  # n padded up to a multiple of 4
    with pytest.raises(tecomp.ScheduleError, match="second-to-last axis"):
        s[B].storage_align(B.op.axis[1], 4, 0)
    with pytest.raises(tecomp.ScheduleError, match="0 <= offset < factor"):
        s[B].storage_align(B.op.axis[0], 4, 4)
    s2 = te.create_schedule(C.op)
    s2[C].storage_align(C.op.axis[0], 4, 0)
    with pytest.raises(tecomp.LoweringError, match="argument of the function"):
        tecomp.lower(s2, [A, C])
