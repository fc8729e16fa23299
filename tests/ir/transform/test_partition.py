"""Loop partitioning: where the cuts go, what each part keeps, and that results match."""

import numpy as np
import pytest
from util import compile_schedule, run_and_check

import tecomp
from tecomp import te
from tecomp.ir import expr as E
from tecomp.ir import stmt as S
from tecomp.ir.functor import post_order_visit
from tecomp.ir.transform.partition import MAX_COPIES, partition_loops


def nodes(node, cls):
    out = []
    post_order_visit(node, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


def loops(func):
    return [(f.loop_var.name, int(f.min.value), int(f.extent.value), f.kind)
            for f in nodes(func.body, S.For)]


def padded_1d(n=100, pad=1, factor=8):
    A = te.placeholder((n,), name="A")
    P = te.compute((n + 2 * pad,),
                   lambda i: te.if_then_else(te.all(i >= pad, i < n + pad), A[i - pad], 0.0),
                   name="P")
    s = te.create_schedule(P.op)
    xo, xi = s[P].split(P.op.axis[0], factor=factor)
    return s, A, P, xo, xi


@pytest.mark.parametrize("backend", ["interp", None])
def test_padded_copy_has_a_condition_free_middle(backend, rng):
    s, A, P, _, xi = padded_1d()
    s[P].vectorize(xi)
    f = tecomp.lower(s, [A, P])
    outer = [lp for lp in loops(f) if lp[0] == "i.outer"]
    # i.outer = 0 holds the left pad, 1..11 are inside A, 12 holds the right pad and the
    # split's tail (the peeled pieces of extent 1 fold i.outer away entirely).
    assert outer == [("i.outer", 1, 11, "serial")], str(f)
    (middle,) = [lp for lp in nodes(f.body, S.For) if lp.loop_var.name == "i.outer"]
    assert not nodes(middle, E.Select) and not nodes(middle, S.IfThenElse), str(f)
    assert len(nodes(f.body, S.Store)) == 3
    a = rng.standard_normal(100).astype("float32")
    run_and_check(compile_schedule(s, [A, P], backend=backend), [A, P], [a], [np.pad(a, 1)])


def test_parallel_loop_is_cut_by_dispatch_in_one_region(rng):
    n, m = 20, 30
    A = te.placeholder((n, m), name="A")
    P = te.compute((n + 2, m),
                   lambda y, x: te.if_then_else(te.all(y >= 1, y < n + 1), A[y - 1, x], 0.0),
                   name="P")
    s = te.create_schedule(P.op)
    s[P].parallel(P.op.axis[0])
    f = tecomp.lower(s, [A, P])
    par = [lp for lp in nodes(f.body, S.For) if lp.kind == "parallel"]
    assert len(par) == 1 and int(par[0].extent.value) == n + 2
    # if y < 1 {pad} else if y < 21 {copy} else {pad}
    ifs = nodes(par[0].body, S.IfThenElse)
    assert sorted(str(i.condition) for i in ifs) == ["y < 1", "y < 21"], str(f)
    copy = [i for i in ifs if str(i.condition) == "y < 21"][0].then_case
    assert not nodes(copy, E.Select), str(f)
    a = rng.standard_normal((n, m)).astype("float32")
    expect = np.pad(a, ((1, 1), (0, 0)))
    run_and_check(compile_schedule(s, [A, P]), [A, P], [a], [expect])


def test_split_tail_guard_is_peeled():
    A = te.placeholder((100,), name="A")
    B = te.compute((100,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=8)
    f = tecomp.lower(s, [A, B])
    assert ("i.outer", 0, 12, "serial") in loops(f)
    # The guard is gone from the main part, and the tail loop covers the last 4 elements.
    assert not nodes(f.body, S.IfThenElse), str(f)
    assert ("i.inner", 0, 4, "serial") in loops(f), str(f)


def test_non_monotone_condition_cuts_nothing():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: te.if_then_else(te.equal(i % 3, 0), A[i], 0.0), name="B")
    s = te.create_schedule(B.op)
    io, ii = s[B].split(B.op.axis[0], factor=4)
    f = tecomp.lower(s, [A, B])
    assert sorted(lp[:3] for lp in loops(f)) == [("i.inner", 0, 4), ("i.outer", 0, 16)], str(f)


def test_symbolic_loop_is_not_cut_but_inner_loops_are(rng):
    n = te.var("n")
    A = te.placeholder((n, 10), name="A")
    B = te.compute((n, 12),
                   lambda y, x: te.if_then_else(te.all(x >= 1, x < 11), A[y, x - 1], 0.0),
                   name="B")
    s = te.create_schedule(B.op)
    f = tecomp.lower(s, [A, B])
    ys = [lp for lp in nodes(f.body, S.For) if lp.loop_var.name == "y"]
    assert len(ys) == 1
    xs = sorted((int(lp.min.value), int(lp.extent.value))
                for lp in nodes(f.body, S.For) if lp.loop_var.name == "x")
    assert xs == [(1, 10)], str(f)  # x = 0 and x = 11 are peeled to single stores
    fn = compile_schedule(s, [A, B])
    for rows in (1, 3):
        a = rng.standard_normal((rows, 10)).astype("float32")
        run_and_check(fn, [A, B], [a], [np.pad(a, ((0, 0), (1, 1)))])


@pytest.mark.parametrize("backend", ["interp", None])
def test_chunks_of_a_symbolic_extent_split_into_whole_ones_and_the_tail(backend, rng):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(xi)
    f = tecomp.lower(s, [A, B])
    whole, tail = [lp for lp in nodes(f.body, S.For) if lp.loop_var.name == "i.outer"]
    assert str(whole.extent) == "n // 16" and not nodes(whole, S.IfThenElse), str(f)
    assert len(nodes(tail, S.IfThenElse)) == 1, str(f)
    fn = compile_schedule(s, [A, B], backend=backend)
    for size in (1, 16, 33):
        a = rng.standard_normal(size).astype("float32")
        run_and_check(fn, [A, B], [a], [a * 2])


def test_vectorized_and_unrolled_loops_are_not_cut():
    s, A, P, xo, xi = padded_1d(n=14, factor=16)
    s[P].unroll(xi)
    f = tecomp.lower(s, [A, P])
    assert [lp[2:] for lp in loops(f)] == [(16, "unrolled")], str(f)


def test_copies_of_a_nest_are_bounded(rng):
    # Three nested loops, each with a padded border: cutting each into three would make
    # 27 copies of the innermost body.
    n = 12
    A = te.placeholder((n, n, n), name="A")

    def f(z, y, x):
        inside = te.all(z >= 1, z < n + 1, y >= 1, y < n + 1, x >= 1, x < n + 1)
        return te.if_then_else(inside, A[z - 1, y - 1, x - 1], 0.0)

    P = te.compute((n + 2, n + 2, n + 2), f, name="P")
    s = te.create_schedule(P.op)
    func = tecomp.lower(s, [A, P])
    assert 1 < len(nodes(func.body, S.Store)) <= MAX_COPIES
    a = rng.standard_normal((n, n, n)).astype("float32")
    run_and_check(compile_schedule(s, [A, P], backend="interp"), [A, P], [a], [np.pad(a, 1)])


def test_unchanged_function_is_returned_as_is():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    func = tecomp.lower(s, [A, B])
    assert partition_loops(func) is func


def test_two_tiles_each_on_one_border_are_cut_apart(rng):
    """A padded row of two tiles: no tile is clear of both borders, yet cutting between
    them leaves each tile one border, decided at compile time once the tile is unrolled."""
    s, A, P, xo, xi = padded_1d(n=14, factor=8)
    s[P].unroll(xi)
    f = tecomp.lower(s, [A, P])
    assert not [lp for lp in loops(f) if lp[0] == "i.outer"], str(f)
    for tile in nodes(f.body, S.For):
        assert len({str(c.cond) for c in nodes(tile, E.Select)}) <= 1, str(f)
    a = rng.standard_normal(14).astype("float32")
    run_and_check(compile_schedule(s, [A, P]), [A, P], [a], [np.pad(a, 1)])


def test_a_test_deciding_a_large_body_cuts_nothing():
    """``if`` around a whole unrolled window runs once per that window: not worth copies."""
    i, k = E.Var("i", "int64"), E.Var("k", "int64")
    buf = tecomp.ir.buffer.make_buffer("B", "float32", (64,))

    def nest(extent):
        store = S.Store(buf, E.FloatImm(1.0, "float32"), k)
        inner = S.For(k, E.IntImm(0, "int64"), E.IntImm(extent, "int64"), "unrolled", store)
        guard = S.IfThenElse(E.GE(i, E.IntImm(1, "int64")), inner)
        return S.PrimFunc("f", [buf], S.For(i, E.IntImm(0, "int64"),
                                            E.IntImm(8, "int64"), "serial", guard))

    cut = partition_loops(nest(64))
    assert [f.extent.value for f in nodes(cut.body, S.For) if f.loop_var is i] == [1, 7]
    large = nest(65)
    assert partition_loops(large) is large


def _padded_rows_of_symbolic_size(kind):
    """A 3-row window summed over rows padded by one on each side: P[y, x] = A[y-1, x] +
    A[y, x] + A[y+1, x] (0 outside), the rows a loop of ``kind`` over symbolic ``h``."""
    h, w = te.var("h"), 24
    A = te.placeholder((h, w), name="A")
    r = te.reduce_axis((0, 3), name="r")
    P = te.compute(
        (h, w), lambda y, x: te.sum(te.if_then_else(
            te.all(y + r >= 1, y + r < h + 1), A[y + r - 1, x], 0.0), axis=r), name="P")
    s = te.create_schedule(P.op)
    if kind == "parallel":
        s[P].parallel(P.op.axis[0])
    return s, A, P


@pytest.mark.parametrize("kind", ["serial", "parallel"])
def test_a_symbolic_range_is_cut_where_its_borders_are(kind, rng):
    s, A, P = _padded_rows_of_symbolic_size(kind)
    f = tecomp.lower(s, [A, P])
    # The body dispatches on the row: y < 1 (the top border), y < h - 1 (the inside, free
    # of the padding's conditions), the rest (the bottom border).
    tests = {str(c.condition): c for c in nodes(f.body, S.IfThenElse)}
    assert set(tests) == {"y < 1", "y < h - 1"}, str(f)
    inside = tests["y < h - 1"].then_case
    assert not nodes(inside, E.Select) and not nodes(inside, S.IfThenElse), str(f)
    assert len(nodes(f.body, E.Select)) == 2  # one in each border's copy
    fn = compile_schedule(s, [A, P])
    for h in (1, 2, 3, 9):  # borders that meet, overlap or leave an inside
        a = rng.standard_normal((h, 24)).astype("float32")
        padded = np.pad(a, ((1, 1), (0, 0)))
        run_and_check(fn, [A, P], [a], [padded[:-2] + padded[1:-1] + padded[2:]])
