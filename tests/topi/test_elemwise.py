from math import erf

import numpy as np
import pytest
from onnx import helper

from tecomp import te
from tecomp.errors import DTypeError
from tecomp.target import Target
from tecomp.topi import elemwise, strategy
from tecomp.topi.cpu_schedule import schedule_injective

# library name -> (ONNX op_type, attrs for both, input range)
UNARY = {
    "abs": ("Abs", {}, (-3, 3)),
    "neg": ("Neg", {}, (-3, 3)),
    "exp": ("Exp", {}, (-3, 3)),
    "log": ("Log", {}, (0.1, 3)),
    "sqrt": ("Sqrt", {}, (0, 3)),
    "reciprocal": ("Reciprocal", {}, (0.5, 3)),
    "tanh": ("Tanh", {}, (-3, 3)),
    "sigmoid": ("Sigmoid", {}, (-6, 6)),
    "relu": ("Relu", {}, (-3, 3)),
    "erf": ("Erf", {}, (-3, 3)),
    "floor": ("Floor", {}, (-3, 3)),
    "ceil": ("Ceil", {}, (-3, 3)),
    "round": ("Round", {}, (-3, 3)),
    "sin": ("Sin", {}, (-3, 3)),
    "cos": ("Cos", {}, (-3, 3)),
    "sign": ("Sign", {}, (-3, 3)),
    "softplus": ("Softplus", {}, (-30, 30)),
    "softsign": ("Softsign", {}, (-3, 3)),
    "hard_swish": ("HardSwish", {}, (-5, 5)),
    "mish": ("Mish", {}, (-5, 5)),
    "identity": ("Identity", {}, (-3, 3)),
    "hard_sigmoid": ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, (-5, 5)),
    "leaky_relu": ("LeakyRelu", {"alpha": 0.1}, (-3, 3)),
    "elu": ("Elu", {"alpha": 0.7}, (-3, 3)),
    "selu": ("Selu", {}, (-3, 3)),
    "gelu": ("Gelu", {"approximate": "tanh"}, (-4, 4)),
    "tan": ("Tan", {}, (-1.2, 1.2)),
    "sinh": ("Sinh", {}, (-3, 3)),
    "cosh": ("Cosh", {}, (-3, 3)),
    "asinh": ("Asinh", {}, (-3, 3)),
    "acosh": ("Acosh", {}, (1, 4)),
    "atanh": ("Atanh", {}, (-0.9, 0.9)),
    "thresholded_relu": ("ThresholdedRelu", {"alpha": 0.5}, (-3, 3)),
    "celu": ("Celu", {"alpha": 0.8}, (-3, 3)),
    "shrink": ("Shrink", {"bias": 0.3, "lambd": 0.6}, (-3, 3)),
}


def _data(rng, lo, hi, shape, dtype):
    x = rng.uniform(lo, hi, shape)
    if lo <= -2.5 and hi >= 1.5:
        x[..., :4] = [-2.5, -0.5, 0.5, 1.5]  # ties: Round goes to even
    return x.astype(dtype)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float32_matches_onnx_with_a_symbolic_batch(name, rng, check_op, onnx_ref):
    op_type, attrs, (lo, hi) = UNARY[name]
    n = te.var("n")
    x = te.placeholder((n, 37), name="x")
    impl = strategy.get_implementation(name, "llvm")
    y = impl.compute(None, x, **attrs)
    assert y.op.tag == "elemwise" and y.dtype == "float32"
    a = _data(rng, lo, hi, (5, 37), "float32")
    check_op(impl.schedule(None, [y]), [x], [y], [a], onnx_ref(op_type, [a], **attrs),
             rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32", "int8"])
def test_unary_other_dtypes(dtype, rng, check_op, onnx_ref):
    x = te.placeholder((3, 20), dtype=dtype, name="x")
    a = (rng.uniform(-4, 4, (3, 20)) * (1 if "float" in dtype else 10)).astype(dtype)
    names = ["abs", "neg", "relu", "sign", "identity"]
    if "float" in dtype:
        names += ["exp", "tanh", "sigmoid", "round", "erf"]
    for name in names:
        op_type, attrs, _ = UNARY[name]
        y = getattr(elemwise, name)(x, **attrs)
        assert y.dtype == dtype
        tol = 2e-3 if dtype == "float16" else 1e-6
        check_op(schedule_injective(None, y), [x], [y], [a], onnx_ref(op_type, [a], **attrs),
                 rtol=tol, atol=tol)


def test_gelu_exact_and_clip_bounds(rng, check_op):
    x = te.placeholder((4, 33), name="x")
    a = rng.uniform(-4, 4, (4, 33)).astype("float32")
    g = elemwise.gelu(x)
    ref = a * 0.5 * (1 + np.vectorize(erf)(a / np.sqrt(2)))
    check_op(schedule_injective(None, g), [x], [g], [a], ref, rtol=1e-5, atol=1e-5)
    for lo, hi in [(None, 1.0), (-0.5, None), (-1.0, 2.0), (None, None)]:
        c = elemwise.clip(x, min=lo, max=hi)
        check_op(schedule_injective(None, c), [x], [c], [a], np.clip(a, lo, hi))
    xi = te.placeholder((40,), dtype="int64", name="xi")
    ci = elemwise.clip(xi, min=-3, max=5)
    ai = np.arange(-20, 20, dtype="int64")
    check_op(schedule_injective(None, ci), [xi], [ci], [ai], np.clip(ai, -3, 5))
    with pytest.raises(DTypeError, match="approximate"):
        elemwise.gelu(x, approximate="fast")


def test_isnan_isinf_not(check_op):
    x = te.placeholder((6,), name="x")
    a = np.array([1.0, np.nan, np.inf, -np.inf, 0.0, -2.0], "float32")
    for y, ref in [(elemwise.isnan(x), np.isnan(a)), (elemwise.isinf(x), np.isinf(a)),
                   (elemwise.isinf(x, detect_negative=0), np.isposinf(a)),
                   (elemwise.isinf(x, detect_positive=0), np.isneginf(a))]:
        assert y.dtype == "bool"
        check_op(schedule_injective(None, y), [x], [y], [a], ref)
    b = te.placeholder((5,), dtype="bool", name="b")
    nb = elemwise.logical_not(b)
    ab = np.array([True, False, True, True, False])
    check_op(schedule_injective(None, nb), [b], [nb], [ab], ~ab)
    with pytest.raises(DTypeError, match="bool"):
        elemwise.logical_not(x)


@pytest.mark.parametrize("src, dst", [("float32", "int32"), ("float32", "bool"),
                                      ("int64", "float32"), ("bool", "float32"),
                                      ("float32", "float16"), ("int32", "uint8")])
def test_cast_matches_onnx(src, dst, rng, check_op, onnx_ref):
    x = te.placeholder((3, 11), dtype=src, name="x")
    a = (rng.uniform(-3, 3, (3, 11)) * (1 if src.startswith("float") else 40)).astype(src)
    if src == "bool":
        a = rng.uniform(0, 1, (3, 11)) > 0.5
    if dst == "uint8":
        a = np.abs(a)
    y = elemwise.cast(x, dst)
    assert y.dtype == dst
    to = helper.np_dtype_to_tensor_dtype(np.dtype(dst))
    check_op(schedule_injective(None, y), [x], [y], [a], onnx_ref("Cast", [a], to=to),
             rtol=1e-3, atol=1e-3)


def test_injective_schedule_emits_vectors_and_a_parallel_loop(multicore, rng, check_op):
    n = te.var("n")
    x = te.placeholder((n, 256), name="x")
    y = elemwise.relu(elemwise.exp(x))  # a chain: the producer is inlined
    s = schedule_injective(None, y)
    a = rng.uniform(-1, 1, (97, 256)).astype("float32")
    mod = check_op(s, [x], [y], [a], np.maximum(np.exp(a), 0), rtol=1e-5)
    lanes = Target("llvm").vector_width_bits // 32
    ll = mod.get_source("ll")
    assert f"<{lanes} x float>" in ll
    assert "tecomp.parallel" in ll
    assert len([st for st in s.stages if st.attach_type == "root"]) == 2  # x and y


def test_small_constant_shapes_stay_on_one_thread(rng, check_op):
    x = te.placeholder((4, 9), name="x")
    y = elemwise.tanh(x)
    a = rng.uniform(-1, 1, (4, 9)).astype("float32")
    mod = check_op(schedule_injective(None, y), [x], [y], [a], np.tanh(a), rtol=1e-5)
    assert "tecomp.parallel" not in mod.get_source("ll")


def test_float_only_ops_reject_integers():
    x = te.placeholder((4,), dtype="int32", name="x")
    with pytest.raises(DTypeError):
        elemwise.exp(x)
    with pytest.raises(DTypeError, match="float"):
        elemwise.softplus(x)


def test_gelu_of_the_largest_floats_does_not_overflow(check_op):
    x = te.placeholder((4,), name="x")
    big = np.finfo("float32").max
    a = np.array([big, -big, 1e30, -1e30], "float32")
    for approximate in ("none", "tanh"):
        y = elemwise.gelu(x, approximate=approximate)
        check_op(schedule_injective(None, y), [x], [y], [a],
                 np.array([big, 0, 1e30, 0], "float32"))


def test_float16_celu_with_an_alpha_beyond_float16(check_op):
    # alpha = 1e5 has no float16 value (max 65504): computed in float32, as onnxruntime.
    x = te.placeholder((5,), dtype="float16", name="x")
    a = np.array([-2, -0.5, 0, 1.5, 60000], "float16")
    a64, alpha = a.astype("float64"), 1e5
    ref = np.maximum(0, a64) + np.minimum(0, alpha * np.expm1(a64 / alpha))
    y = elemwise.celu(x, alpha=alpha)
    check_op(schedule_injective(None, y), [x], [y], [a], ref.astype("float16"), rtol=2e-3,
             atol=2e-3)


def test_relu_clip_and_celu_keep_nan(check_op):
    x = te.placeholder((6,), name="x")
    a = np.array([np.nan, -np.inf, np.inf, -3, 0.5, 7], "float32")
    for name, attrs, expected in [
            ("relu", {}, [np.nan, 0, np.inf, 0, 0.5, 7]),
            ("clip", {"min": -1.0, "max": 1.0}, [np.nan, -1, 1, -1, 0.5, 1]),
            ("clip", {"min": 0.0}, [np.nan, 0, np.inf, 0, 0.5, 7]),
            ("celu", {"alpha": 2.0}, [np.nan, -2, np.inf, 2 * np.expm1(-1.5), 0.5, 7])]:
        impl = strategy.get_implementation(name, "llvm")
        y = impl.compute(None, x, **attrs)
        check_op(impl.schedule(None, [y]), [x], [y], [a], np.array(expected, "float32"))
