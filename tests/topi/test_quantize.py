import numpy as np
import pytest

from tecomp import te
from tecomp.errors import DTypeError, ShapeError
from tecomp.topi import quantize, strategy
from tecomp.topi.cpu_schedule import schedule_injective


def _impl(name):
    return strategy.get_implementation(name, "llvm")


@pytest.mark.parametrize("zdtype", ["uint8", "int8"])
@pytest.mark.parametrize("per_axis", [False, True])
def test_quantize_and_dequantize_match_onnx(zdtype, per_axis, rng, check_op, onnx_ref):
    x = te.placeholder((2, 3, 17), name="x")
    a = (rng.normal(size=(2, 3, 17)) * 40).astype("float32")
    a[0, 0, :4] = [0.5, 1.5, 2.5, -0.5]  # ties round to even
    pshape = (3,) if per_axis else ()
    scale = te.placeholder(pshape, name="scale")
    zero = te.placeholder(pshape, dtype=zdtype, name="zero")
    sa = np.full(pshape, 0.5, "float32") if not per_axis else np.array([0.5, 1.0, 0.25],
                                                                        "float32")
    za = np.full(pshape, 3, zdtype)
    q = _impl("quantize_linear").compute(None, x, scale, zero, axis=1)
    assert q.dtype == zdtype
    check_op(_impl("quantize_linear").schedule(None, [q]), [x, scale, zero], [q],
             [a, sa, za], onnx_ref("QuantizeLinear", [a, sa, za], axis=1))
    xq = te.placeholder((2, 3, 17), dtype=zdtype, name="xq")
    qa = rng.integers(-100 if zdtype == "int8" else 0, 100, (2, 3, 17)).astype(zdtype)
    d = _impl("dequantize_linear").compute(None, xq, scale, zero, axis=1)
    check_op(_impl("dequantize_linear").schedule(None, [d]), [xq, scale, zero], [d],
             [qa, sa, za], onnx_ref("DequantizeLinear", [qa, sa, za], axis=1))


def test_quantize_without_zero_point_and_errors(rng, check_op):
    x = te.placeholder((40,), name="x")
    scale = te.placeholder((), name="scale")
    a = rng.normal(size=(40,)).astype("float32") * 100
    q = quantize.quantize_linear(x, scale)
    ref = np.clip(np.round(a / 0.5), 0, 255).astype("uint8")
    check_op(schedule_injective(None, q), [x, scale], [q],
             [a, np.array(0.5, "float32")], ref)
    with pytest.raises(DTypeError, match="uint8, int8"):
        quantize.quantize_linear(x, scale, dtype="int32")
    with pytest.raises(ShapeError, match="has 4 values"):
        quantize.quantize_linear(te.placeholder((2, 3), name="y"),
                                 te.placeholder((4,), name="s"), axis=1)
