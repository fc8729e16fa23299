import numpy as np
import pytest

from tecomp import te
from tecomp.errors import ShapeError
from tecomp.target import Target
from tecomp.topi import nn, strategy

CASES = [
    dict(kernel=(3, 3), strides=(1, 1), pads=(1, 1, 1, 1)),
    dict(kernel=(2, 2), strides=(2, 2), pads=(0, 0, 0, 0)),
    dict(kernel=(3, 3), strides=(2, 2), pads=(1, 0, 1, 1), ceil_mode=1),
    dict(kernel=(3, 2), strides=(2, 1), pads=(0, 1, 1, 0), dilations=(2, 2)),
]

ONNX_NAMES = {"kernel": "kernel_shape", "strides": "strides", "pads": "pads",
              "dilations": "dilations", "ceil_mode": "ceil_mode",
              "count_include_pad": "count_include_pad"}


def _onnx_attrs(attrs):
    # ONNX orders 2-D pads as (x1_begin, x2_begin, x1_end, x2_end): top, left, bottom, right.
    return {ONNX_NAMES[k]: v for k, v in attrs.items()}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name, op_type, extra", [
    ("max_pool2d", "MaxPool", {}),
    ("avg_pool2d", "AveragePool", {}),
    ("avg_pool2d", "AveragePool", {"count_include_pad": 1}),
])
def test_pool2d_matches_onnx(case, name, op_type, extra, rng, check_op, onnx_ref):
    x = te.placeholder((2, 3, 11, 10), name="x")
    a = rng.normal(size=(2, 3, 11, 10)).astype("float32")
    attrs = {**case, **extra}
    impl = strategy.get_implementation(name, "llvm")
    y = impl.compute(None, x, **attrs)
    check_op(impl.schedule(None, [y]), [x], [y], [a], onnx_ref(op_type, [a], **_onnx_attrs(attrs)),
             rtol=1e-5, atol=1e-5)


def test_pool_schedule_is_parallel_and_vectorized(multicore, rng, check_op):
    n = te.var("n")
    x = te.placeholder((n, 8, 32, 64), name="x")
    a = rng.normal(size=(2, 8, 32, 64)).astype("float32")
    impl = strategy.get_implementation("max_pool2d", "llvm")
    y = impl.compute(None, x, kernel=(2, 2), strides=(1, 1))
    ref = np.maximum.reduce([a[:, :, i:i + 31, j:j + 63] for i in (0, 1) for j in (0, 1)])
    mod = check_op(impl.schedule(None, [y]), [x], [y], [a], ref)
    ll = mod.get_source("ll")
    lanes = Target("llvm").vector_width_bits // 32
    assert f"<{lanes} x float>" in ll and "tecomp.parallel" in ll


@pytest.mark.parametrize("name, op_type", [("global_avg_pool", "GlobalAveragePool"),
                                           ("global_max_pool", "GlobalMaxPool")])
def test_global_pool_matches_onnx(name, op_type, rng, check_op, onnx_ref):
    x = te.placeholder((2, 5, 7, 9), name="x")
    a = rng.normal(size=(2, 5, 7, 9)).astype("float32")
    impl = strategy.get_implementation(name, "llvm")
    y = impl.compute(None, x)
    check_op(impl.schedule(None, [y]), [x], [y], [a], onnx_ref(op_type, [a]), rtol=1e-5,
             atol=1e-6)


@pytest.mark.parametrize("name, op_type", [("max_pool1d", "MaxPool"),
                                           ("avg_pool1d", "AveragePool")])
def test_pool1d_matches_onnx(name, op_type, rng, check_op, onnx_ref):
    n = te.var("n")
    x = te.placeholder((n, 4, 23), name="x")
    a = rng.normal(size=(3, 4, 23)).astype("float32")
    attrs = dict(kernel=(4,), strides=(3,), pads=(2, 1))
    impl = strategy.get_implementation(name, "llvm")
    y = impl.compute(None, x, **attrs)
    check_op(impl.schedule(None, [y]), [x], [y], [a], onnx_ref(op_type, [a], **_onnx_attrs(attrs)),
             rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name, op_type", [("max_pool3d", "MaxPool"),
                                           ("avg_pool3d", "AveragePool")])
def test_pool3d_matches_onnx(name, op_type, rng, check_op, onnx_ref):
    x = te.placeholder((1, 2, 5, 6, 7), name="x")
    a = rng.normal(size=(1, 2, 5, 6, 7)).astype("float32")
    attrs = dict(kernel=(2, 3, 3), strides=(1, 2, 2), pads=(0, 1, 1, 1, 1, 0),
                 count_include_pad=1) if name == "avg_pool3d" else dict(
        kernel=(2, 2, 2), strides=(2, 2, 2), ceil_mode=1)
    impl = strategy.get_implementation(name, "llvm")
    y = impl.compute(None, x, **attrs)
    check_op(impl.schedule(None, [y]), [x], [y], [a], onnx_ref(op_type, [a], **_onnx_attrs(attrs)),
             rtol=1e-5, atol=1e-5)


def test_pool_attribute_errors():
    x = te.placeholder((1, 2, 5, 6), name="x")
    with pytest.raises(ShapeError, match="must have 2 values"):
        nn.max_pool2d(x, kernel=(3,))
    with pytest.raises(ShapeError, match="pads=.*must have 4 values"):
        nn.avg_pool2d(x, kernel=(3, 3), pads=(1, 1))
    with pytest.raises(ShapeError, match="rank-5 tensor"):
        nn.max_pool3d(x, kernel=(2, 2, 2))


def test_max_pool_skips_nan_and_a_window_of_nan_only_is_minus_infinity(check_op):
    from numpy.lib.stride_tricks import sliding_window_view

    x = te.placeholder((1, 2, 6, 7), name="x")
    a = np.random.default_rng(1).normal(size=(1, 2, 6, 7)).astype("float32")
    a[0, 0, 1:3, 2:4] = np.nan  # one whole 2 x 2 window
    a[0, 1, 0, ::3] = np.nan
    a[0, 1, 4, 6] = np.nan
    with pytest.warns(RuntimeWarning, match="All-NaN"):
        expected = np.nanmax(sliding_window_view(a, (2, 2), axis=(2, 3)), axis=(-1, -2))
    assert np.isnan(expected).sum() == 1
    expected[np.isnan(expected)] = -np.inf
    impl = strategy.get_implementation("max_pool2d", "llvm")
    y = impl.compute(None, x, kernel=(2, 2))
    check_op(impl.schedule(None, [y]), [x], [y], [a], expected)
