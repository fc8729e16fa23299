import numpy as np
import pytest

from tecomp import te
from tecomp.errors import DTypeError, ShapeError
from tecomp.topi import broadcast, elemwise, strategy
from tecomp.topi.cpu_schedule import schedule_injective

BINARY = {
    "add": "Add", "subtract": "Sub", "multiply": "Mul", "divide": "Div", "maximum": "Max",
    "minimum": "Min", "equal": "Equal", "less": "Less", "greater": "Greater",
    "less_equal": "LessOrEqual", "greater_equal": "GreaterOrEqual", "power": "Pow",
}

SHAPES = [((4, 1, 5), (3, 1)), ((7,), (2, 3, 7)), ((2, 3), (2, 3)), ((1,), (5, 1))]


def _arrays(rng, shapes, dtype, positive=False):
    out = []
    for sh in shapes:
        a = rng.uniform(0.5 if positive else -4, 4, sh)
        out.append(a.astype(dtype) if "float" in dtype else np.round(a * 5).astype(dtype))
    return out


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", SHAPES)
def test_binary_float32_matches_onnx(name, shapes, rng, check_op, onnx_ref):
    a, b = (te.placeholder(sh, name=n) for sh, n in zip(shapes, "ab"))
    impl = strategy.get_implementation(name, "llvm")
    y = impl.compute(None, a, b)
    assert y.op.tag == "broadcast"
    arrs = _arrays(rng, shapes, "float32", positive=name == "power")
    check_op(impl.schedule(None, [y]), [a, b], [y], arrs, onnx_ref(BINARY[name], arrs),
             rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "float64", "float16"])
def test_binary_other_dtypes(dtype, rng, check_op, onnx_ref):
    a = te.placeholder((3, 8), dtype=dtype, name="a")
    b = te.placeholder((8,), dtype=dtype, name="b")
    arrs = _arrays(rng, [(3, 8), (8,)], dtype)
    arrs[1][arrs[1] == 0] = 3  # no division by zero
    for name in ["add", "subtract", "multiply", "divide", "maximum", "less"]:
        y = getattr(broadcast, name)(a, b)
        tol = 3e-3 if dtype == "float16" else 1e-6
        check_op(schedule_injective(None, y), [a, b], [y], arrs,
                 onnx_ref(BINARY[name], arrs), rtol=tol, atol=tol)


def test_mod_both_sign_conventions(rng, check_op, onnx_ref):
    a = te.placeholder((4, 6), dtype="int32", name="a")
    b = te.placeholder((6,), dtype="int32", name="b")
    arrs = [rng.integers(-20, 20, (4, 6)).astype("int32"),
            np.array([3, -3, 7, -5, 2, 9], "int32")]
    for fmod in (0, 1):
        y = broadcast.mod(a, b, fmod=fmod)
        check_op(schedule_injective(None, y), [a, b], [y], arrs,
                 onnx_ref("Mod", arrs, fmod=fmod))
    fa = te.placeholder((4, 6), name="fa")
    fb = te.placeholder((6,), name="fb")
    farrs = [rng.uniform(-9, 9, (4, 6)).astype("float32"),
             np.array([3, -3, 2.5, -1.5, 0.7, 9], "float32")]
    y = broadcast.mod(fa, fb, fmod=1)
    check_op(schedule_injective(None, y), [fa, fb], [y], farrs, np.fmod(*farrs), atol=1e-5)
    with pytest.raises(DTypeError, match="fmod=1"):
        broadcast.mod(fa, fb)


def test_float_fmod_by_an_infinity_keeps_a_finite_dividend(check_op):
    # C's fmod (the spec's Mod with fmod=1): a finite x by +-inf is x, where
    # x - trunc(x / y) * y gave 0 * inf = NaN; an infinite x or a zero y give NaN.
    a = te.placeholder((4, 9), name="a")
    b = te.placeholder((4, 1), name="b")
    x = np.array([5, -5, 0, -0.0, 3, np.inf, np.nan, 1e30, 7.5], "float32")
    y = np.array([[np.inf], [-np.inf], [2], [0]], "float32")
    xs = np.broadcast_to(x, (4, 9)).copy()
    with np.errstate(invalid="ignore"):
        ref = np.fmod(xs, y)
    out = broadcast.mod(a, b, fmod=1)
    check_op(schedule_injective(None, out), [a, b], [out], [xs, y], ref)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_fmod_is_exact_for_any_quotient(dtype, check_op):
    # trunc(x / y) * y loses the remainder once the quotient needs more bits than the
    # mantissa (1e4 mod 2.1 in float16 gave 0; -3.4e38 mod 2.1 in float32 has a quotient
    # of 2^127): the remainder is C's fmod, exact for every pair.
    big = float(np.finfo(dtype).max)
    a = te.placeholder((8,), dtype=dtype, name="a")
    b = te.placeholder((8,), dtype=dtype, name="b")
    x = np.array([1e4, -1e4, 6e4, 3e3, 1e4, -6e4, -big, big], dtype)
    y = np.array([2.1, -3.4, 8.0, 0.01, 3.3, 7.7, 2.1, -0.3], dtype)
    out = broadcast.mod(a, b, fmod=1)
    check_op(schedule_injective(None, out), [a, b], [out], [x, y], np.fmod(x, y), rtol=0,
             atol=0)


def test_logical_where_prelu(rng, check_op, onnx_ref):
    p = te.placeholder((3, 5), dtype="bool", name="p")
    q = te.placeholder((5,), dtype="bool", name="q")
    arrs = [rng.uniform(0, 1, (3, 5)) > 0.5, rng.uniform(0, 1, (5,)) > 0.5]
    for name, op_type in [("logical_and", "And"), ("logical_or", "Or"),
                          ("logical_xor", "Xor")]:
        y = getattr(broadcast, name)(p, q)
        check_op(schedule_injective(None, y), [p, q], [y], arrs, onnx_ref(op_type, arrs))
    x = te.placeholder((2, 3, 5), name="x")
    z = te.placeholder((1, 5), name="z")
    xa, za = rng.normal(size=(2, 3, 5)).astype("float32"), rng.normal(size=(1, 5)).astype(
        "float32")
    w = broadcast.where(p, x, z)
    check_op(schedule_injective(None, w), [p, x, z], [w], [arrs[0], xa, za],
             np.where(arrs[0], xa, za))
    slope = te.placeholder((3, 1), name="slope")
    sa = rng.uniform(0, 1, (3, 1)).astype("float32")
    pr = broadcast.prelu(x, slope)
    check_op(schedule_injective(None, pr), [x, slope], [pr], [xa, sa],
             onnx_ref("PRelu", [xa, sa]))
    with pytest.raises(DTypeError, match="bool"):
        broadcast.where(x, x, x)


def test_symbolic_broadcast_and_a_fused_chain(multicore, rng, check_op):
    n = te.var("n")
    x = te.placeholder((n, 3, 64), name="x")
    bias = te.placeholder((3, 1), name="bias")
    y = elemwise.sigmoid(broadcast.add(x, bias))
    s = schedule_injective(None, [y])
    xa = rng.normal(size=(6, 3, 64)).astype("float32")
    ba = rng.normal(size=(3, 1)).astype("float32")
    mod = check_op(s, [x, bias], [y], [xa, ba], 1 / (1 + np.exp(-(xa + ba))), rtol=1e-5)
    assert "tecomp.parallel" in mod.get_source("ll")


def test_shape_and_dtype_errors():
    a = te.placeholder((3, 4), name="a")
    with pytest.raises(ShapeError, match="do not broadcast"):
        broadcast.add(a, te.placeholder((5,), name="b"))
    with pytest.raises(DTypeError, match="one dtype"):
        broadcast.add(a, te.placeholder((4,), dtype="int32", name="c"))


@pytest.mark.parametrize("name, fref", [("sum", np.sum), ("mean", np.mean), ("max", np.max),
                                        ("min", np.min)])
def test_variadic_ops(name, fref, rng, check_op):
    # numpy is the reference: onnx.reference's Mean accumulates in place and cannot
    # broadcast its first input.
    shapes = [(2, 1, 5), (3, 1), (5,)]
    ins = [te.placeholder(sh, name=f"x{k}") for k, sh in enumerate(shapes)]
    arrs = _arrays(rng, shapes, "float32")
    impl = strategy.get_implementation(name, "llvm")
    y = impl.compute(None, *ins)
    ref = fref(np.stack(np.broadcast_arrays(*arrs)), axis=0)
    check_op(impl.schedule(None, [y]), ins, [y], arrs, ref, rtol=1e-6)
    single = impl.compute(None, ins[0])
    check_op(impl.schedule(None, [single]), ins[:1], [single], arrs[:1], arrs[0])


@pytest.mark.parametrize("name, fref", [("maximum", np.maximum), ("minimum", np.minimum)])
def test_maximum_minimum_propagate_nan_from_either_side(name, fref, check_op):
    a = te.placeholder((6,), name="a")
    b = te.placeholder((6,), name="b")
    x = np.array([np.nan, 1, np.nan, np.inf, -np.inf, 2], "float32")
    y = np.array([1, np.nan, np.nan, -np.inf, 3, 2], "float32")
    impl = strategy.get_implementation(name, "llvm")
    out = impl.compute(None, a, b)
    check_op(impl.schedule(None, [out]), [a, b], [out], [x, y], fref(x, y))
    impl = strategy.get_implementation(name[:3], "llvm")
    out = impl.compute(None, a, b, a)
    check_op(impl.schedule(None, [out]), [a, b], [out], [x, y], fref(fref(x, y), x))


def test_integer_power_truncates_toward_zero(check_op):
    # As onnxruntime converts the float result: 3 ** 0.5 = 1.73 is 1, not 2.
    a = te.placeholder((6,), dtype="int32", name="a")
    b = te.placeholder((6,), name="b")
    base = np.array([2, 3, 10, 4, -2, 7], "int32")
    exp = np.array([-0.12, 0.5, 0.3, 0.5, 3, 0], "float32")
    impl = strategy.get_implementation("power", "llvm")
    out = impl.compute(None, a, b)
    check_op(impl.schedule(None, [out]), [a, b], [out], [base, exp],
             np.array([0, 1, 1, 2, -8, 1], "int32"))
