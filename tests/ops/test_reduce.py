"""Reductions over one and several axes (sum, max, min, prod, a user comm_reducer, an
argmax tuple reducer), rfactor and cache_read, checked against numpy."""

import numpy as np
import pytest
from util import check_schedule, compile_schedule, rand, run_and_check

from tecomp import te

R, C = 6, 13


def row_reduce(kind, n=R, m=C, dtype="float32"):
    x = te.placeholder((n, m), dtype=dtype, name="x")
    k = te.reduce_axis((0, m), name="k")
    fn = {"sum": te.sum, "max": te.max, "min": te.min, "prod": te.prod}[kind]
    out = te.compute((n,), lambda i: fn(x[i, k], axis=k), name=kind)
    return x, out


NP = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}


def red_default(s, out):
    pass


def red_split_k_tail_unroll(s, out):
    (k,) = out.op.reduce_axis
    _ko, ki = s[out].split(k, factor=4)
    s[out].unroll(ki)


def red_split_k_reorder_vectorize_data(s, out):
    (i,) = out.op.axis
    (k,) = out.op.reduce_axis
    io, ii = s[out].split(i, factor=4)
    s[out].reorder(io, k, ii)
    s[out].vectorize(ii)  # data-parallel lanes, reduction outside: legal


def red_rfactor_parallel(s, out):
    (k,) = out.op.reduce_axis
    ko, _ki = s[out].split(k, nparts=4)
    rf = s.rfactor(out, ko)
    s[rf].parallel(s[rf].op.axis[0])
    s[out].vectorize(out.op.axis[0])


def red_rfactor_compute_at(s, out):
    (k,) = out.op.reduce_axis
    _ko, ki = s[out].split(k, factor=4)
    rf = s.rfactor(out, ki, factor_axis=1)
    s[rf].compute_at(s[out], out.op.axis[0])
    s[rf].vectorize(s[rf].op.axis[1])


def red_cache_write(s, out):
    ol = s.cache_write(out, "local")
    (i,) = s[out].op.axis
    io, ii = s[out].split(i, factor=4)
    s[ol].compute_at(s[out], io)
    s[out].vectorize(ii)


RED_SCHEDULES = [red_default, red_split_k_tail_unroll, red_split_k_reorder_vectorize_data,
                 red_rfactor_parallel, red_rfactor_compute_at, red_cache_write]


@pytest.mark.parametrize("sched", RED_SCHEDULES)
@pytest.mark.parametrize("kind", ["sum", "max", "min", "prod"])
def test_row_reduce(kind, sched, rng, target):
    x, out = row_reduce(kind)
    s = te.create_schedule(out.op)
    sched(s, out)
    lo, hi = (0.5, 1.5) if kind == "prod" else (-1.0, 1.0)
    xv = rand(rng, (R, C), lo=lo, hi=hi)
    check_schedule(s, [x, out], [xv], [NP[kind](xv, axis=1)], rtol=1e-5, atol=1e-6, target=target)


@pytest.mark.parametrize("kind", ["sum", "max", "min", "prod"])
def test_row_reduce_int32(kind, rng, target):
    x, out = row_reduce(kind, dtype="int32")
    s = te.create_schedule(out.op)
    red_split_k_tail_unroll(s, out)
    xv = rng.integers(-5, 6, size=(R, C)).astype("int32")
    if kind == "prod":
        xv = rng.integers(-2, 3, size=(R, C)).astype("int32")
    check_schedule(s, [x, out], [xv], [NP[kind](xv, axis=1).astype("int32")], target=target)


@pytest.mark.parametrize("sched", [red_default, red_split_k_tail_unroll, red_rfactor_parallel,
                                   red_cache_write])
def test_row_reduce_symbolic(sched, rng, target):
    n, m = te.var("n"), te.var("m")
    x, out = row_reduce("sum", n, m)
    s = te.create_schedule(out.op)
    sched(s, out)
    f = compile_schedule(s, [x, out], target=target)
    for shape in [(1, 1), (3, 5), (6, 17)]:
        xv = rand(rng, shape)
        run_and_check(f, [x, out], [xv], [xv.sum(axis=1)], rtol=1e-5, atol=1e-6)


def multi_axis(kind):
    """out[c] = reduce over (a, b) of x[a, c, b]: two reduce axes around a data axis."""
    x = te.placeholder((4, 5, 6), name="x")
    ka = te.reduce_axis((0, 4), name="ka")
    kb = te.reduce_axis((0, 6), name="kb")
    fn = {"sum": te.sum, "max": te.max, "min": te.min}[kind]
    out = te.compute((5,), lambda c: fn(x[ka, c, kb], axis=[ka, kb]), name="out")
    return x, out


def ma_default(s, out):
    pass


def ma_fuse_reduce_axes_split(s, out):
    ka, kb = out.op.reduce_axis
    f = s[out].fuse(ka, kb)
    _fo, fi = s[out].split(f, factor=5)  # 24 = 4 * 5 + 4
    s[out].unroll(fi)


def ma_reorder_reduce_outer(s, out):
    (c,) = out.op.axis
    ka, kb = out.op.reduce_axis
    s[out].reorder(kb, ka, c)
    s[out].vectorize(c)


def ma_rfactor_fused(s, out):
    ka, kb = out.op.reduce_axis
    f = s[out].fuse(ka, kb)
    _fo, fi = s[out].split(f, factor=8)
    rf = s.rfactor(out, fi)
    s[rf].vectorize(s[rf].op.axis[0])


@pytest.mark.parametrize("sched", [ma_default, ma_fuse_reduce_axes_split,
                                   ma_reorder_reduce_outer, ma_rfactor_fused])
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_reduce_several_axes(kind, sched, rng, target):
    x, out = multi_axis(kind)
    s = te.create_schedule(out.op)
    sched(s, out)
    xv = rand(rng, (4, 5, 6))
    check_schedule(s, [x, out], [xv], [NP[kind](xv, axis=(0, 2))], rtol=1e-5, atol=1e-6,
                   target=target)


def test_reduce_all_axes_to_scalar_shape_1(rng, target):
    x = te.placeholder((3, 7), name="x")
    a = te.reduce_axis((0, 3), name="a")
    b = te.reduce_axis((0, 7), name="b")
    out = te.compute((1,), lambda i: te.sum(x[a, b], axis=[a, b]), name="total")
    s = te.create_schedule(out.op)
    _bo, _bi = s[out].split(b, factor=3)
    xv = rand(rng, (3, 7))
    check_schedule(s, [x, out], [xv], [np.array([xv.sum()], "float32")], rtol=1e-5, target=target)


def test_reduce_with_where_condition(rng, target):
    """A masked (lower-triangular) row sum through where=."""
    x = te.placeholder((5, 5), name="x")
    k = te.reduce_axis((0, 5), name="k")
    out = te.compute((5,), lambda i: te.sum(x[i, k], axis=k, where=k <= i), name="out")
    s = te.create_schedule(out.op)
    _ko, _ki = s[out].split(k, factor=2)
    xv = rand(rng, (5, 5))
    check_schedule(s, [x, out], [xv], [np.tril(xv).sum(axis=1)], rtol=1e-5, atol=1e-6,
                   target=target)


def test_user_comm_reducer_sum_of_squares(rng, target):
    ssq = te.comm_reducer(lambda a, b: a + b * b, lambda d: te.const(0, d), name="ssq")
    x = te.placeholder((4, 9), name="x")
    k = te.reduce_axis((0, 9), name="k")
    out = te.compute((4,), lambda i: ssq(x[i, k], axis=k), name="out")
    s = te.create_schedule(out.op)
    _ko, _ki = s[out].split(k, factor=4)
    xv = rand(rng, (4, 9))
    check_schedule(s, [x, out], [xv], [(xv * xv).sum(axis=1)], rtol=1e-5, atol=1e-6, target=target)


def test_user_comm_reducer_logsumexp_style_max_abs(rng, target):
    maxabs = te.comm_reducer(lambda a, b: te.max(a, te.abs(b)), lambda d: te.const(0, d),
                             name="maxabs")
    x = te.placeholder((3, 8), name="x")
    k = te.reduce_axis((0, 8), name="k")
    out = te.compute((3,), lambda i: maxabs(x[i, k], axis=k), name="out")
    s = te.create_schedule(out.op)
    s[out].parallel(out.op.axis[0])
    xv = rand(rng, (3, 8))
    check_schedule(s, [x, out], [xv], [np.abs(xv).max(axis=1)], target=target)


def argmax_reducer():
    def fcombine(x, y):
        # x, y are (index, value) pairs; ties keep the smaller index, like numpy.
        take_y = te.any(y[1] > x[1], te.all(te.equal(y[1], x[1]), y[0] < x[0]))
        return (te.if_then_else(take_y, y[0], x[0]), te.if_then_else(take_y, y[1], x[1]))

    def fidentity(t0, t1):
        return te.const(-1, t0), te.min_value(t1)

    return te.comm_reducer(fcombine, fidentity, name="argmax")


def _argmax(n, m):
    x = te.placeholder((n, m), name="x")
    k = te.reduce_axis((0, m), name="k")
    idx, val = te.compute((n,), lambda i: argmax_reducer()((k, x[i, k]), axis=k), name="argmax")
    return x, idx, val


@pytest.mark.parametrize("split", [None, 3])
def test_argmax_tuple_reducer(split, rng, target):
    x, idx, val = _argmax(5, 7)
    s = te.create_schedule(idx.op)
    if split:
        _ko, ki = s[idx].split(idx.op.reduce_axis[0], factor=split)
        s[idx].unroll(ki)
    s[idx].parallel(idx.op.axis[0])
    xv = rand(rng, (5, 7))
    xv[2, :] = 0.25  # all ties: the first index wins
    check_schedule(s, [x, idx, val], [xv],
                   [xv.argmax(axis=1).astype("int32"), xv.max(axis=1)], target=target)


# ---- cache_read -------------------------------------------------------------------------------


def test_cache_read_compute_at_stencil(rng, target):
    """A 1-d blur reading its input through a cache_read copy, computed per tile."""
    x = te.placeholder((14,), name="x")
    out = te.compute((12,), lambda i: (x[i] + x[i + 1] + x[i + 2]) / 3.0, name="blur")
    s = te.create_schedule(out.op)
    xl = s.cache_read(x, "local", [out])
    io, ii = s[out].split(out.op.axis[0], factor=5)
    s[xl].compute_at(s[out], io)
    s[out].vectorize(ii)
    xv = rand(rng, (14,))
    check_schedule(s, [x, out], [xv], [(xv[:-2] + xv[1:-1] + xv[2:]) / 3], rtol=1e-5,
                   atol=1e-6, target=target)


def test_cache_read_shared_by_two_readers(rng, target):
    x = te.placeholder((6, 7), name="x")
    a = te.compute((6, 7), lambda i, j: x[i, j] * 2.0, name="a")
    b = te.compute((6, 7), lambda i, j: x[i, j] + a[i, j], name="b")
    s = te.create_schedule(b.op)
    xl = s.cache_read(x, "local", [a, b])
    io, _ii = s[b].split(b.op.axis[0], factor=4)
    s[xl].compute_at(s[b], io)
    s[a].compute_at(s[b], io)
    xv = rand(rng, (6, 7))
    check_schedule(s, [x, b], [xv], [xv * 3], rtol=1e-6, target=target)


def test_cache_read_and_cache_write_matmul_rows(rng, target):
    a = te.placeholder((7, 9), name="A")
    w = te.placeholder((9,), name="w")
    k = te.reduce_axis((0, 9), name="k")
    out = te.compute((7,), lambda i: te.sum(a[i, k] * w[k], axis=k), name="gemv")
    s = te.create_schedule(out.op)
    wl = s.cache_read(w, "local", [out])
    ol = s.cache_write(out, "local")
    io, _ii = s[out].split(out.op.axis[0], factor=3)
    s[ol].compute_at(s[out], io)
    s[wl].compute_at(s[ol], s[ol].op.reduce_axis[0])
    av, wv = rand(rng, (7, 9)), rand(rng, (9,))
    check_schedule(s, [a, w, out], [av, wv], [av @ wv], rtol=1e-5, atol=1e-6, target=target)
