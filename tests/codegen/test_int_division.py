"""Integer division and modulo in generated code cannot trap: a zero divisor is a failed
run-time check (RuntimeCheckError naming the kernel) and the process goes on; the most
negative value divided by -1 wraps (onnxruntime's result); results elsewhere are
Python's floor semantics (``//``, ``%``) and C's truncation (``te.truncdiv``)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tecomp
from tecomp import te
from tecomp.errors import RuntimeCheckError

pytestmark = pytest.mark.usefixtures("needs_llvm")

SIGNED = ["int8", "int16", "int32", "int64"]
UNSIGNED = ["uint8", "uint16", "uint32", "uint64"]
N = 40


def _divide(dtype, op, schedule="serial", name="Div_1"):
    """out[i] = a[i] op b[i] with op one of floordiv, floormod, truncdiv, truncmod."""
    a = te.placeholder((N,), dtype, name="a")
    b = te.placeholder((N,), dtype, name="b")
    fns = {
        "floordiv": lambda x, y: x // y,
        "floormod": lambda x, y: x % y,
        "truncdiv": te.truncdiv,
        "truncmod": lambda x, y: x - te.truncdiv(x, y) * y,
    }
    out = te.compute((N,), lambda i: fns[op](a[i], b[i]), name="out")
    s = te.create_schedule(out.op)
    if schedule == "vectorized":
        _, ii = s[out].split(out.op.axis[0], factor=8)
        s[out].vectorize(ii)
    elif schedule == "parallel":
        io, ii = s[out].split(out.op.axis[0], factor=8)
        s[out].parallel(io)
        s[out].vectorize(ii)
    return tecomp.build(s, [a, b, out], name=name)


def _reference(op, a: int, b: int) -> int:
    if op == "floordiv":
        return a // b
    if op == "floormod":
        return a % b
    q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return q if op == "truncdiv" else a - q * b


def _wrap(values, dtype):
    return np.array([v % (1 << 64) for v in values], "uint64").astype(dtype)


OPS = ["floordiv", "floormod", "truncdiv", "truncmod"]


@pytest.mark.parametrize("dtype", SIGNED + UNSIGNED)
@pytest.mark.parametrize("schedule", ["serial", "vectorized", "parallel"])
def test_a_zero_divisor_raises_and_the_process_survives(dtype, schedule):
    for op in ("floordiv", "floormod", "truncdiv"):
        mod = _divide(dtype, op, schedule)
        a = np.arange(1, N + 1).astype(dtype)
        b = np.full(N, 3, dtype)
        b[17] = 0
        out = np.zeros(N, dtype)
        with pytest.raises(RuntimeCheckError,
                           match="^kernel 'Div_1': integer division by zero$"):
            mod(a, b, out)
        keep = np.arange(N) != 17
        want = [_reference(op, int(x), 3) for x in a[keep]]
        np.testing.assert_array_equal(out[keep], _wrap(want, dtype))
        b[17] = 5
        mod(a, b, out)  # the same kernel runs again without a stale error


@pytest.mark.parametrize("dtype", SIGNED)
@pytest.mark.parametrize("schedule", ["serial", "vectorized", "parallel"])
def test_the_most_negative_value_by_minus_one_wraps(dtype, schedule):
    lo = int(np.iinfo(dtype).min)
    a = np.full(N, lo, dtype)
    b = np.full(N, -1, dtype)
    for op, want in (("floordiv", lo), ("floormod", 0), ("truncdiv", lo), ("truncmod", 0)):
        out = np.zeros(N, dtype)
        _divide(dtype, op, schedule)(a, b, out)
        assert (out == want).all(), (op, out)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint16", "uint64"])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_division_matches_python_semantics(dtype, data):
    info = np.iinfo(dtype)
    ints = st.integers(int(info.min), int(info.max))
    a = data.draw(st.lists(ints, min_size=N, max_size=N))
    b = data.draw(st.lists(ints.filter(lambda v: v != 0), min_size=N, max_size=N))
    op = data.draw(st.sampled_from(OPS))
    schedule = data.draw(st.sampled_from(["serial", "vectorized"]))
    out = np.zeros(N, dtype)
    _divide(dtype, op, schedule)(np.array(a, dtype), np.array(b, dtype), out)
    want = _wrap([_reference(op, x, y) for x, y in zip(a, b)], dtype)
    np.testing.assert_array_equal(out, want)


def test_a_divisor_by_constant_zero_is_a_check_not_a_fold():
    a = te.placeholder((N,), "int32", name="a")
    out = te.compute((N,), lambda i: a[i] // te.const(0, "int32"), name="out")
    mod = tecomp.build(te.create_schedule(out.op), [a, out], name="Div_0")
    with pytest.raises(RuntimeCheckError, match="integer division by zero"):
        mod(np.ones(N, "int32"), np.zeros(N, "int32"))


def _asm(build):
    return tecomp.build(*build()).get_source("asm")


def _float_kernels():
    n = 64
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 16)
    s[C].parallel(io)
    s[C].vectorize(ji)
    yield s, [A, B, C]
    idx = te.var("m")
    X = te.placeholder((idx, 48), name="X")
    Y = te.compute((idx, 48), lambda i, j: X[(i * 48 + j) // 48, (i * 48 + j) % 48] * 2.0,
                   name="Y")
    s = te.create_schedule(Y.op)
    fused = s[Y].fuse(*Y.op.axis)
    _, fi = s[Y].split(fused, factor=16)
    s[Y].vectorize(fi)
    yield s, [X, Y]


def test_index_arithmetic_has_no_guard():
    # Divisions by constants and by sizes: no check, no compare against zero.
    for s, args in _float_kernels():
        mod = tecomp.build(s, args)
        assert mod[mod.entry_name].signature.checks == ()
        assert "cmpxchg" not in mod.get_source("ll")


@pytest.mark.parametrize("op, fmod", [("Div", None), ("Mod", 0), ("Mod", 1)])
def test_an_onnx_integer_node_raises_instead_of_killing_the_process(op, fmod):
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    attrs = {} if fmod is None else {"fmod": fmod}
    graph = helper.make_graph(
        [helper.make_node(op, ["a", "b"], ["y"], **attrs)], "g",
        [vi("a", TensorProto.INT32, [4]), vi("b", TensorProto.INT32, [4])],
        [vi("y", TensorProto.INT32, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    mod, params = tecomp.frontend.from_onnx(model)
    gm = tecomp.graph.GraphModule(tecomp.graph.build(mod, "llvm", params=params))
    lo = np.iinfo("int32").min
    a = np.array([lo, 7, -7, 5], "int32")
    y, = gm(a=a, b=np.array([-1, 2, 2, 3], "int32"))
    want = {"Div": [lo, 3, -3, 1], "Mod": [0, 1, 1, 2]}[op]
    if fmod == 1:
        want = [0, 1, -1, 2]
    np.testing.assert_array_equal(y, want)
    with pytest.raises(RuntimeCheckError, match=r"^kernel '\w+': integer division by zero$"):
        gm(a=a, b=np.array([-1, 2, 0, 3], "int32"))
