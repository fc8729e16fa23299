import numpy as np
import pytest

from tecomp import te
from tecomp.errors import ShapeError
from tecomp.topi import strategy


def _impl(name):
    return strategy.get_implementation(name, "llvm")


def _layer_norm_ref(a, scale, bias, axis, eps):
    axes = tuple(range(axis % a.ndim, a.ndim))
    mean = a.mean(axis=axes, keepdims=True)
    var = ((a - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (a - mean) / np.sqrt(var + eps) * scale
    return y + bias if bias is not None else y


@pytest.mark.parametrize("shape, axis, with_bias", [((4, 6, 64), -1, True),
                                                   ((3, 5, 8), 1, False),
                                                   ((2, 37), -1, True)])
def test_layer_norm_matches_onnx(shape, axis, with_bias, rng, check_op, onnx_ref):
    x = te.placeholder(shape, name="x")
    pshape = shape[axis % len(shape):]
    scale = te.placeholder(pshape, name="scale")
    bias = te.placeholder(pshape, name="bias") if with_bias else None
    a = rng.normal(size=shape).astype("float32") * 3 + 1
    sa = rng.normal(size=pshape).astype("float32")
    ba = rng.normal(size=pshape).astype("float32") if with_bias else None
    y = _impl("layer_norm").compute(None, x, scale, bias, axis=axis, epsilon=1e-3)
    ins = [x, scale] + ([bias] if with_bias else [])
    arrs = [a, sa] + ([ba] if with_bias else [])
    ref = onnx_ref("LayerNormalization", [a, sa, ba], axis=axis, epsilon=1e-3)[:1]
    check_op(_impl("layer_norm").schedule(None, [y]), ins, [y], arrs, ref, rtol=1e-4,
             atol=1e-4)


@pytest.mark.parametrize("offset, spread", [(1000.0, 0.01), (-3e4, 1.0), (5.0, 0.0)])
def test_layer_norm_of_rows_far_from_zero(offset, spread, rng, check_op):
    # The variance is mean(d * d) - mean(d) ** 2 of d = x - (the row's first element):
    # float32 keeps its digits where the unshifted mean(x * x) - mean(x) ** 2 would lose
    # them all (and a constant row normalizes to the bias, not to a NaN).
    x = te.placeholder((6, 256), name="x")
    scale, bias = te.placeholder((256,), name="scale"), te.placeholder((256,), name="bias")
    a = (offset + spread * rng.normal(size=(6, 256))).astype("float32")
    sa = rng.normal(size=(256,)).astype("float32")
    ba = rng.normal(size=(256,)).astype("float32")
    y = _impl("layer_norm").compute(None, x, scale, bias, axis=-1, epsilon=1e-9)
    ref = _layer_norm_ref(a.astype("float64"), sa, ba, -1, 1e-9)
    check_op(_impl("layer_norm").schedule(None, [y]), [x, scale, bias], [y], [a, sa, ba],
             ref, rtol=2e-3, atol=2e-3)


def test_layer_norm_symbolic_and_float16(rng, check_op):
    n = te.var("n")
    x = te.placeholder((n, 96), dtype="float16", name="x")
    scale = te.placeholder((96,), dtype="float16", name="scale")
    y = _impl("layer_norm").compute(None, x, scale)
    assert y.dtype == "float16"
    a = rng.normal(size=(5, 96)).astype("float16")
    sa = rng.normal(size=(96,)).astype("float16")
    ref = _layer_norm_ref(a.astype("float32"), sa.astype("float32"), None, -1, 1e-5)
    check_op(_impl("layer_norm").schedule(None, [y]), [x, scale], [y], [a, sa], ref,
             rtol=1e-2, atol=1e-2)


def test_rms_norm(rng, check_op):
    n = te.var("n")
    x = te.placeholder((n, 4, 48), name="x")
    scale = te.placeholder((48,), name="scale")
    a = rng.normal(size=(3, 4, 48)).astype("float32")
    sa = rng.normal(size=(48,)).astype("float32")
    y = _impl("rms_norm").compute(None, x, scale, axis=-1, epsilon=1e-6)
    ref = a / np.sqrt((a * a).mean(axis=-1, keepdims=True) + 1e-6) * sa
    check_op(_impl("rms_norm").schedule(None, [y]), [x, scale], [y], [a, sa], ref,
             rtol=1e-5, atol=1e-5)


def test_instance_and_batch_norm_match_onnx(rng, check_op, onnx_ref):
    x = te.placeholder((2, 3, 5, 7), name="x")
    params = [te.placeholder((3,), name=n) for n in ("scale", "bias", "mean", "var")]
    a = rng.normal(size=(2, 3, 5, 7)).astype("float32")
    pa = [rng.normal(size=(3,)).astype("float32") for _ in range(4)]
    pa[3] = np.abs(pa[3]) + 0.1
    y = _impl("instance_norm").compute(None, x, *params[:2], epsilon=1e-4)
    check_op(_impl("instance_norm").schedule(None, [y]), [x] + params[:2], [y],
             [a] + pa[:2], onnx_ref("InstanceNormalization", [a] + pa[:2], epsilon=1e-4),
             rtol=1e-4, atol=1e-4)
    b = _impl("batch_norm").compute(None, x, *params, epsilon=1e-4)
    check_op(_impl("batch_norm").schedule(None, [b]), [x] + params, [b], [a] + pa,
             onnx_ref("BatchNormalization", [a] + pa, epsilon=1e-4), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("size", [3, 4])
def test_lrn_matches_the_onnx_formula(size, rng, check_op):
    # onnx.reference's LRN loops over the batch axis instead of the channels, so the
    # reference here is the operator's definition written in numpy.
    x = te.placeholder((2, 6, 4, 5), name="x")
    a = rng.normal(size=(2, 6, 4, 5)).astype("float32")
    attrs = dict(size=size, alpha=0.02, beta=0.75, bias=1.5)
    y = _impl("lrn").compute(None, x, **attrs)
    square_sum = np.stack([(a[:, max(0, c - (size - 1) // 2):c + size // 2 + 1] ** 2).sum(1)
                           for c in range(6)], axis=1)
    ref = a / (1.5 + 0.02 / size * square_sum) ** 0.75
    check_op(_impl("lrn").schedule(None, [y]), [x], [y], [a], ref, rtol=1e-5, atol=1e-5)


def test_parameters_of_the_wrong_shape_are_errors():
    x = te.placeholder((2, 3, 8), name="x")
    with pytest.raises(ShapeError, match="does not broadcast to the normalized axes"):
        _impl("layer_norm").compute(None, x, te.placeholder((7,), name="scale"))
    with pytest.raises(ShapeError, match="one value per channel"):
        _impl("batch_norm").compute(None, x, *[te.placeholder((4,), name=n) for n in "sbmv"])
