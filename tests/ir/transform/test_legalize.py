"""Legalization: loops the CPU code generator cannot run as scheduled become serial in the
IR, with the request kept as a hint; everything else is returned as is."""

from tecomp.ir import FloatImm, For, IntImm, Load, PrimFunc, SeqStmt, Store, Var, seq
from tecomp.ir.buffer import make_buffer
from tecomp.ir.transform.legalize import MAX_UNROLL, legalize
from tecomp.target import Target

LLVM = Target("llvm")


def _buf(name, shape):
    return make_buffer(name, "float32", shape)


def _loop(var, extent, body, kind="serial"):
    return For(var, IntImm(0), IntImm(extent) if isinstance(extent, int) else extent, kind, body)


def _ld(b, idx):
    return Load(b, idx, b.dtype)


def _rows(kind_i, kind_k, k_extent=4):
    """C[i] = sum_k A[i, k]: the i loop of ``kind_i`` holds an init and the k loop."""
    A, C = _buf("A", (8, k_extent)), _buf("C", (8,))
    i, k = Var("i"), Var("k")
    body = _loop(i, 8, seq(
        Store(C, FloatImm(0.0), i),
        _loop(k, k_extent, Store(C, _ld(C, i) + _ld(A, i * k_extent + k), i), kind_k),
    ), kind_i)
    return PrimFunc("rows", (A, C), body)


def _loops(func):
    """The For nodes of ``func``, outermost first."""
    out, stack = [], [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, For):
            out.append(s)
            stack.append(s.body)
        elif isinstance(s, SeqStmt):
            stack.extend(reversed(s.seq))
    return out


def test_vectorized_loop_holding_a_serial_loop_becomes_serial_with_a_hint():
    outer, inner = _loops(legalize(_rows("vectorized", "serial"), LLVM))
    assert (outer.kind, outer.hint) == ("serial", "vectorize")
    assert (inner.kind, inner.hint) == ("serial", "")
    assert "# serial, vectorize requested" in str(legalize(_rows("vectorized", "serial"), LLVM))


def test_vectorized_loop_holding_an_unrolled_loop_stays_and_function_is_returned_as_is():
    f = _rows("vectorized", "unrolled")
    assert legalize(f, LLVM) is f


def test_store_to_a_lane_invariant_address_is_not_vectorized():
    A, C = _buf("A", (37,)), _buf("C", (1,))
    k = Var("k")
    # The last iteration's value wins: no lane order gives that.
    f = PrimFunc("r", (A, C), _loop(k, 37, Store(C, _ld(A, k) * 2.0, IntImm(0)), "vectorized"))
    (lp,) = _loops(legalize(f, LLVM))
    assert (lp.kind, lp.hint) == ("serial", "vectorize")


def test_a_reduction_into_a_lane_invariant_address_stays_vectorized():
    A, C = _buf("A", (37,)), _buf("C", (1,))
    k = Var("k")
    f = PrimFunc("r", (A, C), _loop(k, 37, Store(C, _ld(C, IntImm(0)) + _ld(A, k), IntImm(0)),
                                    "vectorized"))
    assert legalize(f, LLVM) is f
    # A difference is no reduction its lanes can combine in any order.
    g = PrimFunc("r", (A, C), _loop(k, 37, Store(C, _ld(C, IntImm(0)) - _ld(A, k), IntImm(0)),
                                    "vectorized"))
    (lp,) = _loops(legalize(g, LLVM))
    assert (lp.kind, lp.hint) == ("serial", "vectorize")


def test_vectorized_loop_with_symbolic_extent_becomes_serial():
    n = Var("n")
    A, C = _buf("A", (n,)), _buf("C", (n,))
    i = Var("i")
    f = PrimFunc("s", (A, C), _loop(i, n, Store(C, _ld(A, i) * 2.0, i), "vectorized"))
    (lp,) = _loops(legalize(f, LLVM))
    assert (lp.kind, lp.hint) == ("serial", "vectorize")


def test_unroll_limits():
    n = Var("n")
    A, C = _buf("A", (n,)), _buf("C", (n,))
    i = Var("i")

    def kind_of(extent):
        f = PrimFunc("u", (A, C), _loop(i, extent, Store(C, _ld(A, i), i), "unrolled"))
        (lp,) = _loops(legalize(f, LLVM))
        return lp.kind, lp.hint

    assert kind_of(MAX_UNROLL) == ("unrolled", "")
    assert kind_of(MAX_UNROLL + 1) == ("serial", "unroll")
    assert kind_of(n) == ("serial", "")


def test_too_long_unrolled_loop_makes_the_enclosing_vectorized_loop_serial():
    outer, inner = _loops(legalize(_rows("vectorized", "unrolled", MAX_UNROLL + 1), LLVM))
    assert (outer.kind, outer.hint) == ("serial", "vectorize")
    assert (inner.kind, inner.hint) == ("serial", "unroll")


def test_parallel_inside_parallel_becomes_serial():
    outer, inner = _loops(legalize(_rows("parallel", "parallel"), LLVM))
    assert outer.kind == "parallel"
    assert (inner.kind, inner.hint) == ("serial", "")


def test_legalize_is_idempotent():
    once = legalize(_rows("vectorized", "serial"), LLVM)
    assert legalize(once, LLVM) is once


def test_other_target_kinds_keep_the_scheduled_kinds():
    f = _rows("vectorized", "serial")
    assert legalize(f, Target("cuda")) is f
