"""Bounds-checking builds (``check_bounds=True``, ``TECOMP_CHECK_BOUNDS=1``): an access
outside its buffer is skipped and raises RuntimeCheckError naming the kernel, the buffer,
read or write, the index and the size; valid code runs as before."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import tecomp
from tecomp import te
from tecomp.errors import RuntimeCheckError
from tecomp.ir import For, IntImm, Load, PrimFunc, Store, Var
from tecomp.ir import expr as E
from tecomp.ir import stmt as S
from tecomp.ir.buffer import make_buffer
from tecomp.ir.functor import post_order_visit
from tecomp.ir.transform.bound_checks import instrument_bound_checks


def _checks(func) -> list:
    found = []
    post_order_visit(func.body, lambda n: found.append(n.message)
                     if isinstance(n, E.Check) else None)
    return found


def _shifted(schedule="serial"):
    """B[i] = A[i + 1] * 2 over a symbolic n: reads one element past A's end."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i + 1] * 2.0, name="B")
    s = te.create_schedule(B.op)
    if schedule == "vectorized":
        _, ii = s[B].split(B.op.axis[0], factor=8)
        s[B].vectorize(ii)
    elif schedule == "parallel":
        io, ii = s[B].split(B.op.axis[0], factor=4)
        s[B].parallel(io)
    return s, [A, B]


@pytest.mark.usefixtures("needs_llvm")
@pytest.mark.parametrize("schedule", ["serial", "vectorized", "parallel"])
def test_a_read_past_the_end_raises_naming_kernel_buffer_index_and_size(schedule):
    s, args = _shifted(schedule)
    mod = tecomp.build(s, args, name="shift", check_bounds=True)
    for n in (5, 21):  # the size is symbolic: the check reads it at run time
        a = np.arange(n, dtype="float32")
        b = np.full(n, np.nan, "float32")
        with pytest.raises(RuntimeCheckError) as info:
            mod(a, b)
        assert str(info.value) == (f"kernel 'shift': read of A[{n}] is out of bounds: "
                                   f"A has n elements")
        np.testing.assert_array_equal(b, np.append(a[1:] * 2, 0))  # the read gave 0


@pytest.mark.usefixtures("needs_llvm")
def test_valid_code_runs_unchanged_and_the_normal_build_has_no_checks():
    n = te.var("n")
    A = te.placeholder((n, 4), name="A")
    B = te.compute((n, 4), lambda i, j: A[i, 3 - j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    plain = tecomp.build(s, [A, B], name="flip")
    checked = tecomp.build(s, [A, B], name="flip", check_bounds=True)
    assert plain["flip"].signature.checks == ()
    assert "cmpxchg" not in plain.get_source("ll")
    a = np.random.default_rng(0).random((6, 4), dtype=np.float32)
    for mod in (plain, checked):
        b = np.zeros((6, 4), "float32")
        mod(a, b)
        np.testing.assert_array_equal(b, a[:, ::-1] + 1)


@pytest.mark.usefixtures("needs_llvm")
def test_a_hand_written_store_past_the_end_is_skipped_and_reported():
    A = make_buffer("A", "int32", (8,))
    i = Var("i")
    body = For(i, IntImm(0), IntImm(8), "serial",
               Store(A, i * 10, i * 2 - 3))  # writes A[-3], A[-1], ... A[11]
    f = PrimFunc("scatter", (A,), body)
    with pytest.raises(RuntimeCheckError,
                       match=r"^kernel 'scatter': write of A\[-3\] is out of bounds: "
                             r"A has 8 elements$"):
        tecomp.build(f, check_bounds=True)(np.zeros(8, "int32"))
    a = np.full(8, -7, "int32")
    with pytest.raises(RuntimeCheckError):
        tecomp.build(f, check_bounds=True)(a)
    np.testing.assert_array_equal(a, [-7, 20, -7, 30, -7, 40, -7, 50])


@pytest.mark.usefixtures("needs_llvm")
def test_an_allocation_is_checked_against_its_own_size():
    A = make_buffer("A", "float32", (4,))
    T = make_buffer("T", "float32", (3,), scope="local")
    i = Var("i")
    body = S.Allocate(T, S.seq(
        For(i, IntImm(0), IntImm(4), "serial", Store(T, Load(A, i, "float32"), i)),
        Store(A, Load(T, IntImm(0), "float32"), IntImm(0))))
    f = PrimFunc("stage", (A,), body)
    with pytest.raises(RuntimeCheckError, match=r"write of T\[3\] is out of bounds: T has 3"):
        tecomp.build(f, check_bounds=True)(np.ones(4, "float32"))


@pytest.mark.usefixtures("needs_llvm")
def test_the_environment_variable_turns_it_on(monkeypatch):
    s, args = _shifted()
    monkeypatch.setenv("TECOMP_CHECK_BOUNDS", "1")
    with pytest.raises(RuntimeCheckError, match="read of A"):
        tecomp.build(s, args, name="shift")(np.ones(3, "float32"), np.zeros(3, "float32"))
    monkeypatch.setenv("TECOMP_CHECK_BOUNDS", "0")
    assert tecomp.build(s, args, name="shift")["shift"].signature.checks == ()


def test_accesses_the_loop_bounds_prove_in_range_are_not_checked():
    n = Var("n")
    A, B = make_buffer("A", "float32", (n,)), make_buffer("B", "float32", (16,))
    i, j = Var("i"), Var("j")
    body = S.seq(
        For(i, IntImm(0), n, "serial", Store(A, Load(A, i, "float32"), i)),
        For(j, IntImm(0), IntImm(16), "vectorized",
            Store(B, Load(B, 15 - j, "float32"), j)),
        For(j, IntImm(0), IntImm(16), "serial", Store(B, Load(B, j + 1, "float32"), j)))
    f = instrument_bound_checks(PrimFunc("f", (A, B), body))
    assert _checks(f) == ["read of B[{value}] is out of bounds: B has 16 elements"]
    assert instrument_bound_checks(f) is f  # once per function


def test_prefetch_hints_are_not_checked():
    B = make_buffer("B", "float32", (16,))
    f = PrimFunc("f", (B,), S.prefetch(B, IntImm(40)))
    assert _checks(instrument_bound_checks(f)) == []


@pytest.mark.usefixtures("needs_llvm")
def test_the_interpreter_runs_instrumented_code():
    from tecomp.ir import interpreter

    s, args = _shifted("vectorized")
    func = tecomp.lower(s, args, name="shift", check_bounds=True)
    b = np.zeros(9, "float32")
    with pytest.raises(RuntimeCheckError, match=r"read of A\[9\]"):
        interpreter.run(func, np.ones(9, "float32"), b)
    assert list(b) == [2.0] * 8 + [0.0]


@pytest.mark.usefixtures("needs_llvm")
def test_graph_build_passes_the_flag_to_every_kernel():
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])],
        "g", [vi("x", TensorProto.FLOAT, ["N", 3])], [vi("y", TensorProto.FLOAT, ["N", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    mod, params = tecomp.frontend.from_onnx(model)
    lib = tecomp.graph.build(mod, "llvm", params=params, check_bounds=True)
    assert any("read of x[{value}]" in c for sig in lib.module.signatures for c in sig.checks)
    x = np.array([[-1, 2, 3], [4, -5, 6]], "float32")
    y, = tecomp.graph.GraphModule(lib)(x=x)
    np.testing.assert_array_equal(y, np.maximum(x, 0) + x)


@pytest.mark.usefixtures("needs_llvm")
def test_an_explicit_false_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("TECOMP_CHECK_BOUNDS", "1")
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [vi("x", TensorProto.FLOAT, ["N"])],
                              [vi("y", TensorProto.FLOAT, ["N"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    mod, params = tecomp.frontend.from_onnx(model)
    lib = tecomp.graph.build(mod, "llvm", params=params, check_bounds=False)
    assert all(sig.checks == () for sig in lib.module.signatures)
    s, args = _shifted()
    assert tecomp.build(s, args, name="f", check_bounds=False)["f"].signature.checks == ()
