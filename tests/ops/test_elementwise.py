"""Elementwise operators with broadcasting (written by index expressions) under several
schedules, checked against numpy."""

import numpy as np
import pytest
from util import check_schedule, compile_schedule, rand, run_and_check

from tecomp import te

N, M = 7, 10  # neither divides by the split factors used below


def broadcast_add(n=N, m=M):
    """out[i, j] = a[i, j] * row[j] + col[i, 0], with an intermediate stage t."""
    a = te.placeholder((n, m), name="a")
    row = te.placeholder((m,), name="row")
    col = te.placeholder((n, 1), name="col")
    t = te.compute((n, m), lambda i, j: a[i, j] * row[j], name="t")
    out = te.compute((n, m), lambda i, j: t[i, j] + col[i, 0], name="out")
    return [a, row, col, out], t


def ref_broadcast_add(a, row, col):
    return a * row[None, :] + col


def _default(s, t, out):
    pass


def _split_vectorize_tail(s, t, out):
    _i, j = out.op.axis
    _jo, ji = s[out].split(j, factor=4)  # 10 = 2 * 4 + 2: a tail
    s[out].vectorize(ji)
    _ti, tj = t.op.axis
    _tjo, tji = s[t].split(tj, factor=3)
    s[t].vectorize(tji)


def _fuse_parallel(s, t, out):
    f = s[out].fuse(*out.op.axis)
    s[out].parallel(f)
    s[t].compute_inline()


def _fuse_split_parallel(s, t, out):
    f = s[out].fuse(*out.op.axis)
    fo, fi = s[out].split(f, factor=8)  # 70 = 8 * 8 + 6
    s[out].parallel(fo)
    s[out].vectorize(fi)
    s[t].compute_at(s[out], fo)


def _compute_at_split(s, t, out):
    _i, j = out.op.axis
    jo, _ji = s[out].split(j, nparts=3)
    s[t].compute_at(s[out], jo)


def _tile_unroll(s, t, out):
    io, jo, ii, ji = s[out].tile(*out.op.axis, 3, 4)
    s[out].unroll(ii)
    s[out].reorder(jo, io, ii, ji)
    s[t].compute_at(s[out], io)


def _inline(s, t, out):
    s[t].compute_inline()
    i, j = out.op.axis
    s[out].reorder(j, i)


def _cache_write(s, t, out):
    oc = s.cache_write(out, "local")
    io, _ii = s[out].split(out.op.axis[0], factor=2)
    s[oc].compute_at(s[out], io)
    s[t].compute_at(s[oc], s[oc].op.axis[0])
    s[out].vectorize(s[out].op.axis[1])


SCHEDULES = {
    "default": _default,
    "split_vectorize_tail": _split_vectorize_tail,
    "fuse_parallel": _fuse_parallel,
    "fuse_split_parallel": _fuse_split_parallel,
    "compute_at_split": _compute_at_split,
    "tile_unroll": _tile_unroll,
    "inline": _inline,
    "cache_write": _cache_write,
}


@pytest.mark.parametrize("name", SCHEDULES)
def test_broadcast(name, rng, target):
    args, t = broadcast_add()
    out = args[-1]
    s = te.create_schedule(out.op)
    SCHEDULES[name](s, t, out)
    a, row, col = rand(rng, (N, M)), rand(rng, (M,)), rand(rng, (N, 1))
    check_schedule(s, args, [a, row, col], [ref_broadcast_add(a, row, col)], target=target)


@pytest.mark.parametrize("name", [
    "default",
    "split_vectorize_tail",
    "fuse_split_parallel",  # lowering bug 2 (fixed): TypeError in bound inference
    "compute_at_split",
    "cache_write",
])
def test_broadcast_symbolic(name, rng, target):
    n, m = te.var("n"), te.var("m")
    args, t = broadcast_add(n, m)
    out = args[-1]
    s = te.create_schedule(out.op)
    SCHEDULES[name](s, t, out)
    f = compile_schedule(s, args, target=target)
    for nn, mm in [(1, 1), (3, 4), (5, 9), (2, 17)]:
        a, row, col = rand(rng, (nn, mm)), rand(rng, (mm,)), rand(rng, (nn, 1))
        run_and_check(f, args, [a, row, col], [ref_broadcast_add(a, row, col)])


def test_broadcast_outer_product_3d(rng, target):
    """out[b, i, j] = x[b, i] - y[j] broadcast into a 3-d result; fused, split, parallel."""
    x = te.placeholder((3, 5), name="x")
    y = te.placeholder((6,), name="y")
    out = te.compute((3, 5, 6), lambda b, i, j: x[b, i] - y[j], name="out")
    s = te.create_schedule(out.op)
    b, i, j = out.op.axis
    f = s[out].fuse(b, i)
    fo, _fi = s[out].split(f, factor=4)
    s[out].parallel(fo)
    _jo, ji = s[out].split(j, factor=4)
    s[out].vectorize(ji)
    xa, ya = rand(rng, (3, 5)), rand(rng, (6,))
    check_schedule(s, [x, y, out], [xa, ya], [xa[:, :, None] - ya[None, None, :]], target=target)


def test_index_arithmetic_transpose_and_flip(rng, target):
    """Indices that are expressions of the axes: transpose and reverse."""
    a = te.placeholder((4, 6), name="a")
    out = te.compute((6, 4), lambda i, j: a[3 - j, i] * 2.0, name="out")
    s = te.create_schedule(out.op)
    _io, ii = s[out].split(out.op.axis[0], factor=4)
    s[out].vectorize(ii)
    x = rand(rng, (4, 6))
    check_schedule(s, [a, out], [x], [(x[::-1, :].T * 2).astype("float32")], target=target)


def test_floordiv_floormod_indices(rng, target):
    """Reshape (4, 6) -> (3, 8) written with // and % in the index."""
    a = te.placeholder((4, 6), name="a")
    out = te.compute((3, 8), lambda i, j: a[(i * 8 + j) // 6, (i * 8 + j) % 6], name="out")
    s = te.create_schedule(out.op)
    f = s[out].fuse(*out.op.axis)
    _fo, fi = s[out].split(f, factor=5)
    s[out].unroll(fi)
    x = rand(rng, (4, 6))
    check_schedule(s, [a, out], [x], [x.reshape(3, 8)], target=target)


def test_integer_floordiv_mod_negative_values(rng, target):
    """// and % on int32 data are floor division / modulo, as in Python and numpy."""
    a = te.placeholder((12,), dtype="int32", name="a")
    b = te.placeholder((12,), dtype="int32", name="b")
    q = te.compute((12,), lambda i: a[i] // b[i], name="q")
    r = te.compute((12,), lambda i: a[i] % b[i], name="r")
    s = te.create_schedule([q.op, r.op])
    _xo, xi = s[q].split(q.op.axis[0], factor=5)
    s[q].vectorize(xi)
    x = np.array([7, -7, 7, -7, 0, 1, -1, 13, -13, 5, -5, 100], "int32")
    y = np.array([2, 2, -2, -2, 3, -3, 3, 4, 4, -6, 6, -7], "int32")
    check_schedule(s, [a, b, q, r], [x, y], [x // y, x % y], target=target)


def test_multiple_outputs_share_input(rng, target):
    """Two outputs in one schedule (create_schedule of a list)."""
    a = te.placeholder((5, 7), name="a")
    p = te.compute((5, 7), lambda i, j: a[i, j] + 1.0, name="p")
    q = te.compute((5, 7), lambda i, j: a[i, j] * p[i, j], name="q")
    s = te.create_schedule([p.op, q.op])
    _jo, ji = s[q].split(q.op.axis[1], factor=3)
    s[q].vectorize(ji)
    s[q].parallel(q.op.axis[0])
    x = rand(rng, (5, 7))
    check_schedule(s, [a, p, q], [x], [x + 1, x * (x + 1)], target=target)


def test_select_and_comparisons(rng, target):
    """if_then_else / comparisons / te.all: a clamp-like piecewise function."""
    a = te.placeholder((9,), name="a")
    out = te.compute(
        (9,),
        lambda i: te.if_then_else(te.all(a[i] > -0.5, a[i] < 0.5), a[i] * 2.0,
                                  te.if_then_else(a[i] >= 0.5, 1.0 + 0.0 * a[i],
                                                  -1.0 + 0.0 * a[i])),
        name="out",
    )
    s = te.create_schedule(out.op)
    _xo, xi = s[out].split(out.op.axis[0], factor=4)
    s[out].vectorize(xi)
    x = np.linspace(-1, 1, 9).astype("float32")
    ref = np.where((x > -0.5) & (x < 0.5), x * 2, np.where(x >= 0.5, 1.0, -1.0)).astype("float32")
    check_schedule(s, [a, out], [x], [ref], target=target)


def test_vectorize_under_symbolic_fused_axis(rng, target):
    """Codegen bug 2 (fixed): a vector select with scalar operands."""
    b, n, m = te.var("b"), te.var("n"), te.var("m")
    x = te.placeholder((b, n, m), name="x")
    out = te.compute((b, n, m), lambda p, i, j: x[p, i, j] * 2.0, name="out")
    s = te.create_schedule(out.op)
    p, i, j = out.op.axis
    s[out].parallel(s[out].fuse(p, i))
    _jo, ji = s[out].split(j, factor=8)
    s[out].vectorize(ji)
    f = compile_schedule(s, [x, out], target=target)
    for shape in [(2, 3, 5), (1, 1, 17)]:
        xv = rand(rng, shape)
        run_and_check(f, [x, out], [xv], [xv * 2])
