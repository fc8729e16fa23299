"""Target-independent loop analyses."""

from tecomp.ir import Allocate, FloatImm, For, IntImm, Load, Store, Var, seq
from tecomp.ir import expr as E
from tecomp.ir.analysis import (
    buffer_key,
    const_stride,
    free_refs,
    has_unsafe,
    is_pure_int,
    lane_reduction,
    vectorizable,
)
from tecomp.ir.buffer import make_buffer
from tecomp.ir.functor import uses_var
from tecomp.ir.structural import structural_equal


def _buf(name, shape, scope="global"):
    return make_buffer(name, "float32", shape, scope)


def _ld(b, idx):
    return Load(b, idx, b.dtype)


def test_const_stride_of_affine_and_non_affine_indices():
    i, j = Var("i"), Var("j")
    stride, rest = const_stride(i * 16 + j * 3 + 5, j)
    assert stride == 3 and uses_var(rest, i) and not uses_var(rest, j)
    assert const_stride(i * 16 + 5, j)[0] == 0
    assert const_stride(E.binary(E.FloorDiv, j, IntImm(4)), j) is None
    assert const_stride(i * j, j) is None  # the coefficient is not a constant


def test_index_arithmetic_and_unsafe_expressions():
    A = _buf("A", (8,))
    i, n = Var("i"), Var("n")
    assert is_pure_int(i * 4 + E.binary(E.FloorMod, i, IntImm(3)), {})
    assert not is_pure_int(E.Cast("int32", _ld(A, i)), {})
    assert has_unsafe(_ld(A, i) + 1.0)
    assert has_unsafe(E.binary(E.FloorDiv, i, n))
    assert not has_unsafe(E.binary(E.FloorDiv, i, IntImm(2)))


def test_vectorizable_bodies():
    A, C = _buf("A", (64,)), _buf("C", (64,))
    i, k = Var("i"), Var("k")
    assert vectorizable(Store(C, _ld(A, i) * 2.0, i), i)
    # Every lane would store to the same address.
    assert not vectorizable(Store(C, _ld(A, i), IntImm(0)), i)
    # Lane i reads what lane i + 1 stores.
    assert not vectorizable(Store(C, _ld(C, i + 1), i), i)
    # Reading the address it stores is fine (an update in place).
    assert vectorizable(Store(C, _ld(C, i) + 1.0, i), i)
    inner = Store(C, _ld(C, i) + _ld(A, k), i)
    assert vectorizable(For(k, IntImm(0), IntImm(4), "unrolled", inner), i)
    assert not vectorizable(For(k, IntImm(0), IntImm(4), "serial", inner), i)
    T = _buf("T", (4,), scope="local")
    assert not vectorizable(Allocate(T, Store(C, FloatImm(0.0), i)), i)


def test_lane_reductions():
    A, C = _buf("A", (64,)), _buf("C", (4,))
    k, j = Var("k"), Var("j")
    zero = IntImm(0)
    upd = Store(C, _ld(C, j) + _ld(A, k) * 2.0, j)
    red = lane_reduction(upd, k)
    assert red is not None and red.store is upd and type(red.combiner) is E.Add
    assert structural_equal(red.operand, _ld(A, k) * 2.0)
    # The accumulator on either side, and min / max / product combine too.
    red = lane_reduction(Store(C, E.binary(E.Max, _ld(A, k), _ld(C, zero)), zero), k)
    assert red is not None and type(red.combiner) is E.Max
    # Each lane its own address: an elementwise loop, not a reduction.
    assert lane_reduction(Store(C, _ld(C, k) + _ld(A, k), k), k) is None
    # The operand reads the accumulator; a different address; not a combiner.
    assert lane_reduction(Store(C, _ld(C, zero) + _ld(C, zero) * _ld(A, k), zero), k) is None
    assert lane_reduction(Store(C, _ld(C, IntImm(1)) + _ld(A, k), zero), k) is None
    assert lane_reduction(Store(C, _ld(C, zero) - _ld(A, k), zero), k) is None
    assert lane_reduction(seq(upd, upd), k) is None


def test_free_refs_lists_variables_and_buffers_once_in_order():
    n = Var("n")
    A, C = _buf("A", (n,)), _buf("C", (n,))
    T = _buf("T", (n,), scope="local")
    i = Var("i")
    body = Allocate(T, seq(Store(T, _ld(A, i), i), Store(C, _ld(T, i) + _ld(A, i), i)))
    vars_, bufs = free_refs(body)
    assert set(vars_) == {i, n} and len(vars_) == 2
    assert set(bufs) == {buffer_key(A), buffer_key(C), buffer_key(T)} and len(bufs) == 3
