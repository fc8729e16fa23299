"""Stage.tensorize with intrinsics made of ordinary statements, on the CPU: the loops
from the tensorized axis inwards become the intrinsic's statements over the regions of
the buffers; a body, extents or tiles that do not match are errors naming the stage."""

import pytest

import tecomp
from tecomp import te
from tecomp.errors import LoweringError, ScheduleError
from tecomp.ir import expr as E
from tecomp.ir import stmt as S

import util


def _at(region, *steps):
    """The flat index of element ``steps`` of ``region``."""
    index = region.offset
    for step, stride in zip(steps, region.strides):
        index = index + E.IntImm(step, stride.dtype) * stride
    return index


def _add4():
    """c[i] = a[i] + b[i] for 4 elements, as 4 statements."""
    a, b = te.placeholder((4,), name="a"), te.placeholder((4,), name="b")
    c = te.compute((4,), lambda i: a[i] + b[i], name="c")

    def implement(ins, outs):
        (ra, rb), (rc,) = ins, outs
        return S.seq(*(S.Store(rc.buffer, E.Load(ra.buffer, _at(ra, i), "float32")
                               + E.Load(rb.buffer, _at(rb, i), "float32"), _at(rc, i))
                       for i in range(4)))

    return te.decl_tensor_intrin(c.op, implement, name="add4")


def _gemv4(calls):
    """c[i] = sum_k a[i, k] * b[k] over 4 x 4, as (body, reset, update) statements;
    ``calls`` records which of them lowering used."""
    a, b = te.placeholder((4, 4), name="a"), te.placeholder((4,), name="b")
    k = te.reduce_axis((0, 4), name="k")
    c = te.compute((4,), lambda i: te.sum(a[i, k] * b[k], axis=k), name="c")

    def implement(ins, outs):
        (ra, rb), (rc,) = ins, outs
        calls.append(ins)
        reset = S.seq(*(S.Store(rc.buffer, E.FloatImm(0.0, "float32"), _at(rc, i))
                        for i in range(4)))
        update = S.seq(*(S.Store(rc.buffer, E.Load(rc.buffer, _at(rc, i), "float32") + sum(
            (E.Load(ra.buffer, _at(ra, i, j), "float32") * E.Load(rb.buffer, _at(rb, j),
                                                                  "float32")
             for j in range(1, 4)), E.Load(ra.buffer, _at(ra, i, 0), "float32")
            * E.Load(rb.buffer, _at(rb, 0), "float32")), _at(rc, i)) for i in range(4)))
        return S.seq(reset, update), reset, update

    return te.decl_tensor_intrin(c.op, implement, name="gemv4")


def _elementwise():
    A, B = te.placeholder((6, 12), name="A"), te.placeholder((6, 12), name="B")
    C = te.compute((6, 12), lambda i, j: A[i, j] + B[i, j], name="C")
    return A, B, C, te.create_schedule(C.op)


def test_an_elementwise_intrinsic_replaces_the_inner_loop(rng):
    A, B, C, s = _elementwise()
    _, ji = s[C].split(C.op.axis[1], factor=4)
    s[C].tensorize(ji, _add4())
    f = tecomp.lower(s, [A, B, C])
    assert "j.inner" not in str(f)          # no loop left inside the tensorized axis
    a, b = util.rand(rng, (6, 12)), util.rand(rng, (6, 12))
    util.check_schedule(s, [A, B, C], [a, b], [a + b])


@pytest.mark.parametrize("K, outside", [(16, True), (4, False)])
def test_a_reduction_intrinsic_resets_once_and_updates_per_step(K, outside, rng):
    A, x = te.placeholder((8, K), name="A"), te.placeholder((K,), name="x")
    k = te.reduce_axis((0, K), name="k")
    y = te.compute((8,), lambda i: te.sum(A[i, k] * x[k], axis=k), name="y")
    s = te.create_schedule(y.op)
    io, ii = s[y].split(y.op.axis[0], factor=4)
    ko, ki = s[y].split(k, factor=4)
    s[y].reorder(io, ko, ii, ki)
    calls = []
    s[y].tensorize(ii, _gemv4(calls))
    text = str(tecomp.lower(s, [A, x, y]))
    # With reduction steps outside the intrinsic, the reset comes before their loop.
    assert ("for k.outer" in text) is outside
    a, v = util.rand(rng, (8, K)), util.rand(rng, (K,))
    util.check_schedule(s, [A, x, y], [a, v], [a @ v], rtol=1e-5)
    ra, rb = calls[-1]
    assert [E.const_value(st) for st in ra.strides] == [K, 1]  # a's rows K apart in A
    assert [E.const_value(st) for st in rb.strides] == [1]


def test_a_different_body_is_refused():
    A, B = te.placeholder((6, 12), name="A"), te.placeholder((6, 12), name="B")
    C = te.compute((6, 12), lambda i, j: A[i, j] * B[i, j], name="C")
    s = te.create_schedule(C.op)
    _, ji = s[C].split(C.op.axis[1], factor=4)
    s[C].tensorize(ji, _add4())
    with pytest.raises(LoweringError, match=r"tensorize on stage C: its body\n.*\nis not "
                                            r"the intrinsic add4's"):
        tecomp.lower(s, [A, B, C])


def test_other_extents_are_refused():
    A, B, C, s = _elementwise()
    _, ji = s[C].split(C.op.axis[1], factor=3)
    s[C].tensorize(ji, _add4())
    with pytest.raises(LoweringError, match=r"its data axes inside the tensorized loops "
                                            r"\(j: 3\) are not the intrinsic's \(i: 4\)"):
        tecomp.lower(s, [A, B, C])


def test_a_partial_tile_is_refused():
    A, B = te.placeholder((6, 10), name="A"), te.placeholder((6, 10), name="B")
    C = te.compute((6, 10), lambda i, j: A[i, j] + B[i, j], name="C")
    s = te.create_schedule(C.op)
    _, ji = s[C].split(C.op.axis[1], factor=4)
    s[C].tensorize(ji, _add4())
    with pytest.raises(LoweringError, match=r"are guarded .*an intrinsic computes whole"):
        tecomp.lower(s, [A, B, C])


def test_an_axis_advancing_with_two_inner_loops_is_refused():
    A, B, C, s = _elementwise()
    _, ji = s[C].split(C.op.axis[1], factor=4)
    s[C].reorder(ji, C.op.axis[0])
    s[C].tensorize(ji, _add4())
    with pytest.raises(LoweringError, match=r"axis j advances inside the tensorized loops "
                                            r"as j.outer \* 4 \+ j.inner, not as one loop"):
        tecomp.lower(s, [A, B, C])


def test_a_reduction_implementation_must_give_three_statements():
    a, b = te.placeholder((4, 4), name="a"), te.placeholder((4,), name="b")
    k = te.reduce_axis((0, 4), name="k")
    c = te.compute((4,), lambda i: te.sum(a[i, k] * b[k], axis=k), name="c")
    one = te.decl_tensor_intrin(c.op, lambda ins, outs: S.Evaluate(E.IntImm(0, "int32")))
    A, x = te.placeholder((4, 4), name="A"), te.placeholder((4,), name="x")
    kk = te.reduce_axis((0, 4), name="k")
    y = te.compute((4,), lambda i: te.sum(A[i, kk] * x[kk], axis=kk), name="y")
    s = te.create_schedule(y.op)
    s[y].tensorize(y.op.axis[0], one)
    with pytest.raises(LoweringError, match=r"reduces, so its implementation returns "
                                            r"\(body, reset, update\), not Evaluate"):
        tecomp.lower(s, [A, x, y])


def test_declaration_and_schedule_errors():
    n = te.var("n")
    a = te.placeholder((n,), name="a")
    c = te.compute((n,), lambda i: a[i] + 1.0, name="c")
    with pytest.raises(ScheduleError, match=r"axis i of c has the extent n; an intrinsic's "
                                            r"extents are constants"):
        te.decl_tensor_intrin(c.op, lambda ins, outs: None)
    A, B, C, s = _elementwise()
    with pytest.raises(ScheduleError, match=r"tensorize on stage C: intrin must come from "
                                            r"te.decl_tensor_intrin"):
        s[C].tensorize(C.op.axis[1], "add4")
    s[C].tensorize(C.op.axis[1], _add4())
    with pytest.raises(ScheduleError, match=r"already tensorized at j"):
        s[C].tensorize(C.op.axis[1], _add4())
