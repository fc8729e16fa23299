import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import tecomp
from tecomp import te
from tecomp.errors import DTypeError, ShapeError
from tecomp.ir import dtype as dt
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


def _reference(op_type, arrays, **attrs):
    """``op_type(*arrays)`` by onnx's reference evaluator (opset 23: every quantized type)."""
    names = [f"in{i}" for i in range(len(arrays))]
    node = helper.make_node(op_type, names, ["out"], **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in zip(names, arrays)],
        [helper.make_tensor_value_info("out", TensorProto.UNDEFINED, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    return ReferenceEvaluator(model).run(None, dict(zip(names, arrays)))[0]


@pytest.mark.parametrize("block", [0, 2])
@pytest.mark.parametrize("zdtype", ["int4", "uint2", "int16", "float8_e4m3fn",
                                    "float8_e5m2fnuz", "float4_e2m1fn"])
def test_small_types_and_blocks_match_onnx(zdtype, block, rng, check_op):
    """Per-axis or blocked (blocks of 2 along axis 1 of [4, 5]: the last one short)
    quantization to ``zdtype`` and back; a float8 zero point is 0 (ONNX)."""
    shape, pshape = (4, 5), ((5,) if not block else (4, 3))
    x = te.placeholder(shape, name="x")
    scale = te.placeholder(pshape, name="scale")
    zero = te.placeholder(pshape, dtype=zdtype, name="zero")
    a = (rng.normal(size=shape) * 8).astype("float32")
    sa = rng.uniform(0.25, 2.0, pshape).astype("float32")
    zdt = dt.numpy_dtype(zdtype)
    za = (np.zeros(pshape, "float32") if zdtype.startswith("float8") else
          rng.integers(-1, 2, pshape).astype("float32") if zdtype != "uint2" else
          rng.integers(0, 2, pshape).astype("float32")).astype(zdt)
    attrs = {"axis": 1, **({"block_size": block} if block else {})}
    q = quantize.quantize_linear(x, scale, zero, axis=1, block_size=block)
    assert q.dtype == zdtype
    want = _reference("QuantizeLinear", [a, sa, za], **attrs)
    mod = tecomp.build(schedule_injective(None, q), [x, scale, zero, q], target="llvm")
    got = np.empty(shape, zdt)
    mod(a, sa, za, got)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    xq = te.placeholder(shape, dtype=zdtype, name="xq")
    d = quantize.dequantize_linear(xq, scale, zero, axis=1, block_size=block)
    # onnx's reference leaves a float4 zero point out where ONNX's formula subtracts it
    # (test_float4_zero_point_is_subtracted): compared with a zero one.
    zd = np.zeros_like(za) if zdtype == "float4_e2m1fn" else za
    check_op(schedule_injective(None, d), [xq, scale, zero], [d], [want, sa, zd],
             _reference("DequantizeLinear", [want, sa, zd], **attrs), rtol=0, atol=0)


def test_float4_zero_point_is_subtracted(check_op):
    """DequantizeLinear is ``(x - zero_point) * scale`` for float4 too (ONNX's formula)."""
    x = te.placeholder((16,), dtype="float4_e2m1fn", name="x")
    zero = te.placeholder((), dtype="float4_e2m1fn", name="zero")
    scale = te.placeholder((), name="scale")
    d = quantize.dequantize_linear(x, scale, zero)
    codes = np.arange(16, dtype=np.uint8).view(dt.numpy_dtype("float4_e2m1fn"))
    zp = np.array(1.5, dt.numpy_dtype("float4_e2m1fn"))
    check_op(schedule_injective(None, d), [x, scale, zero], [d],
             [codes, np.array(2.0, "float32"), zp], (codes.astype("float32") - 1.5) * 2.0)


def test_dequantize_refuses_a_float_input():
    x = te.placeholder((4,), name="x")
    with pytest.raises(DTypeError, match="x is float32; allowed: uint8, int8"):
        quantize.dequantize_linear(x, te.placeholder((), name="s"))
