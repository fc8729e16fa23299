"""Tests of tecomp.ir.semantics against numpy, and that constant folding, the interpreter
and the runtime's size evaluation agree with it."""

import numpy as np
import pytest

from tecomp.errors import RuntimeCheckError, TecompError
from tecomp.ir import interpreter, semantics
from tecomp.ir import stmt as S
from tecomp.ir.arith import simplify
from tecomp.ir.buffer import make_buffer
from tecomp.ir.expr import Cast, FloatImm, FloorDiv, FloorMod, IntImm, Load, Var, binary
from tecomp.runtime.abi import eval_size

INTS = [-9, -8, -7, -1, 0, 1, 7, 8, 9, 2**31 - 1, -(2**31)]
DIVISORS = [-8, -3, -1, 1, 3, 8]


@pytest.mark.parametrize("b", DIVISORS)
def test_floordiv_floormod_of_negatives_match_numpy(b):
    a = np.array(INTS, dtype=np.int64)
    assert [semantics.floordiv(int(x), b) for x in a] == np.floor_divide(a, b).tolist()
    assert [semantics.floormod(int(x), b) for x in a] == np.mod(a, b).tolist()
    assert semantics.floordiv(-7, 2) == -4 and semantics.floormod(-7, 2) == 1
    assert semantics.floormod(7, -2) == -1


def test_division_by_zero_is_undefined():
    assert semantics.floordiv(5, 0) is None
    assert semantics.floormod(5, 0) is None
    assert semantics.int_binary("//", 5, 0, "int32") is None


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64", "uint32"])
@pytest.mark.parametrize("op", ["+", "-", "*"])
def test_integer_overflow_wraps_like_numpy(dtype, op):
    info = np.iinfo(dtype)
    values = [info.min, info.min + 1, -1 if info.min < 0 else 0, 1, info.max - 1, info.max]
    numpy_op = {"+": np.add, "-": np.subtract, "*": np.multiply}[op]
    for a in values:
        for b in values:
            with np.errstate(over="ignore"):
                want = numpy_op(np.array(a, dtype), np.array(b, dtype)).item()
            assert semantics.int_binary(op, int(a), int(b), dtype) == want, (a, op, b)


def test_int32_overflow_example():
    assert semantics.int_binary("+", 2**31 - 1, 1, "int32") == -(2**31)
    assert semantics.int_binary("*", 65536, 65536, "int32") == 0


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_float_to_int_truncates_toward_zero_like_numpy(dtype):
    xs = np.array([-100.9, -2.7, -2.5, -0.5, -0.0, 0.5, 2.5, 2.7, 100.9])
    info = np.iinfo(dtype)
    for x in xs[(xs > info.min - 1) & (xs < info.max + 1)]:
        assert semantics.cast(float(x), dtype) == np.array(x).astype(dtype).item(), x


def test_float_to_int_out_of_range_is_undefined():
    assert semantics.cast(300.0, "int8") is None
    assert semantics.cast(-1.5, "uint8") is None
    assert semantics.cast(float("nan"), "int32") is None
    assert semantics.cast(float("inf"), "int64") is None


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "uint32"])
def test_narrowing_int_casts_keep_low_bits_like_numpy(dtype):
    for v in [-(2**40) - 3, -129, -128, -1, 0, 127, 128, 255, 256, 300, 2**31, 2**40 + 5]:
        assert semantics.cast(v, dtype) == np.array(v, np.int64).astype(dtype).item(), v


def test_bool_and_float_casts_like_numpy():
    for v in [0, 1, -3, 0.0, -0.0, 0.25, float("nan")]:
        assert semantics.cast(v, "bool") == int(np.array(v).astype(bool).item()), v
    assert semantics.cast(0.1, "float32") == float(np.float32(0.1))
    assert semantics.cast(2**24 + 1, "float32") == float(np.float32(2**24 + 1))
    assert semantics.cast(1e6, "float16") == float("inf")


def test_constant_folding_uses_the_semantics():
    big = IntImm(2**31 - 1)
    assert binary(FloorDiv, IntImm(-7), IntImm(2)).value == -4
    assert binary(FloorMod, IntImm(-7), IntImm(2)).value == 1
    assert (big + 1).value == -(2**31)
    assert (IntImm(100, "int8") + IntImm(100, "int8")).value == -56
    assert simplify(Cast("int8", FloatImm(-2.7))).value == -2
    assert simplify(Cast("uint8", IntImm(300))).value == 44
    folded = simplify(Cast("int8", FloatImm(300.0)))
    assert isinstance(folded, Cast)  # undefined: left for the target


def _run_scalar(expr, dtype, env=None):
    """Store ``expr`` into a 1-element buffer with the interpreter and return it."""
    out = make_buffer("out", dtype, (1,))
    f = S.PrimFunc("f", (out,), S.Store(out, expr, IntImm(0)))
    arr = np.zeros(1, dtype)
    interp = interpreter.Interpreter()
    interp.env.update(env or {})
    interp.mem[out] = arr
    interp.stmt(f.body)
    return arr[0].item()


def test_interpreter_uses_the_semantics():
    a, b = Var("a"), Var("b")
    env = {a: np.int32(-7), b: np.int32(2)}
    assert _run_scalar(FloorDiv(a, b, "int32"), "int32", env) == -4
    assert _run_scalar(FloorMod(a, b, "int32"), "int32", env) == 1
    env = {a: np.int32(2**31 - 1), b: np.int32(1)}
    assert _run_scalar(a + b, "int32", env) == -(2**31)
    f = Var("f", "float32")
    assert _run_scalar(Cast("int32", f), "int32", {f: np.float32(-2.7)}) == -2
    assert _run_scalar(Cast("uint8", a), "uint8", {a: np.int32(300)}) == 44
    with pytest.raises(TecompError, match="undefined"):
        _run_scalar(Cast("int8", f), "int8", {f: np.float32(300.0)})
    env = {a: np.int32(-(2**31)), b: np.int32(-1)}
    assert _run_scalar(FloorDiv(a, b, "int32"), "int32", env) == -(2**31)
    assert _run_scalar(FloorMod(a, b, "int32"), "int32", env) == 0


def test_interpreter_records_a_division_by_zero_and_goes_on():
    n = Var("n")
    a = make_buffer("a", "int32", (n,))
    b = make_buffer("b", "int32", (n,))
    q = make_buffer("q", "int32", (n,))
    r = make_buffer("r", "int32", (n,))
    i = Var("i")
    ai, bi = Load(a, i, "int32"), Load(b, i, "int32")
    body = S.For(i, IntImm(0), n, "serial", S.seq(
        S.Store(q, FloorDiv(ai, bi, "int32"), i), S.Store(r, FloorMod(ai, bi, "int32"), i)))
    f = S.PrimFunc("div", (a, b, q, r), body)
    qa, ra = np.zeros(3, "int32"), np.zeros(3, "int32")
    with pytest.raises(RuntimeCheckError, match="^kernel 'div': integer division by zero$"):
        interpreter.run(f, np.array([7, 5, -7], "int32"), np.array([2, 0, 2], "int32"), qa, ra)
    assert list(qa) == [3, 5, -4] and list(ra) == [1, 0, 1]


def test_runtime_size_evaluation_uses_the_semantics():
    env = {"n": -7}
    assert eval_size(["//", "n", 2], env) == -4
    assert eval_size(["%", "n", 2], env) == 1
    assert eval_size(["//", "n", 0], env) is None
    assert eval_size(["+", 2**63 - 1, 1], {}) == -(2**63)
