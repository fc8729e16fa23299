"""A model of the small types, end to end: written to a file (onnx packs its int4
initializer two to a byte), imported, built and run on ml_dtypes arrays, against onnx's
reference evaluator; the results are ml_dtypes arrays, compared code for code."""

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import tecomp
from tecomp.frontend import from_onnx


def _model() -> onnx.ModelProto:
    """y = QuantizeLinear(x + DequantizeLinear(w_int4), to float8_e4m3fn) and its value
    back in float32; h = Cast(q_e5m2 -> float16) and Cast(x -> float4_e2m1fn)."""
    w = np.array([-8, -3, 0, 1, 7, 5, -1, 2], dtype=ml_dtypes.int4)
    nodes = [
        helper.make_node("DequantizeLinear", ["w", "w_scale", "w_zero"], ["wf"]),
        helper.make_node("Add", ["x", "wf"], ["s"]),
        helper.make_node("QuantizeLinear", ["s", "y_scale", "y_zero"], ["y"]),
        helper.make_node("Cast", ["y"], ["yf"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["q"], ["h"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["x"], ["f4"], to=TensorProto.FLOAT4E2M1),
    ]
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array(0.75, np.float32), "w_scale"),
             numpy_helper.from_array(np.array(1, dtype=ml_dtypes.int4), "w_zero"),
             numpy_helper.from_array(np.array(0.125, np.float32), "y_scale"),
             numpy_helper.from_array(np.array(0, dtype=ml_dtypes.float8_e4m3fn), "y_zero")]
    graph = helper.make_graph(
        nodes, "small_types",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8]),
         helper.make_tensor_value_info("q", TensorProto.FLOAT8E5M2, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, ["batch", 8]),
         helper.make_tensor_value_info("yf", TensorProto.FLOAT, ["batch", 8]),
         helper.make_tensor_value_info("h", TensorProto.FLOAT16, ["batch", 8]),
         helper.make_tensor_value_info("f4", TensorProto.FLOAT4E2M1, ["batch", 8])],
        initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def test_a_model_of_small_types_runs_as_onnx_reference(tmp_path, rng):
    path = tmp_path / "small_types.onnx"
    onnx.save(_model(), path)
    mod, params = from_onnx(str(path))
    assert mod.types["w"].dtype == "int4" and params["w"].dtype == ml_dtypes.int4
    assert mod.types["y"].dtype == "float8_e4m3fn"
    run = tecomp.graph.GraphModule(tecomp.graph.build(mod, target="llvm", params=params))
    reference = ReferenceEvaluator(onnx.load(path))
    for batch in (1, 3):
        x = (rng.normal(size=(batch, 8)) * 20).astype(np.float32)
        x[0, :4] = [1e4, -1e4, np.nan, -0.0]  # saturated, NaN, -0
        codes = rng.integers(0, 256, (batch, 8)).astype(np.uint8)
        q = codes.view(ml_dtypes.float8_e5m2)
        got = run(x=x, q=q)
        want = reference.run(None, {"x": x, "q": q})
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            if g.dtype.itemsize == 1:
                np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))
            else:
                np.testing.assert_array_equal(g, w)


def test_an_input_of_another_type_is_refused(rng):
    mod, params = from_onnx(_model())
    run = tecomp.graph.GraphModule(tecomp.graph.build(mod, target="llvm", params=params))
    x = np.zeros((2, 8), np.float32)
    with pytest.raises((TypeError, ValueError), match="q"):
        run(x=x, q=np.zeros((2, 8), np.uint8))


def test_a_float8_constant_dequantized_beside_int8_products(rng):
    """The int8 rewrite of a QDQ MatMul folds its constant dequantizations; a float8 one
    (a bias here) stays its kernel, which decodes it."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"]),
             helper.make_node("MatMul", ["xd", "wd"], ["m"]),
             helper.make_node("DequantizeLinear", ["b", "sb"], ["bd"]),
             helper.make_node("Add", ["m", "bd"], ["y"])]
    bias = (rng.normal(size=(8,)) * 30).astype(ml_dtypes.float8_e4m3fn)
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "sx"),
             numpy_helper.from_array(np.array(3, np.uint8), "zx"),
             numpy_helper.from_array(rng.integers(-60, 60, (4, 8)).astype(np.int8), "w"),
             numpy_helper.from_array(np.array(0.02, np.float32), "sw"),
             numpy_helper.from_array(bias, "b"),
             numpy_helper.from_array(np.array(0.5, np.float32), "sb")]
    graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [2, 4])],
                              [vi("y", TensorProto.FLOAT, [2, 8])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    x = rng.normal(size=(2, 4)).astype(np.float32)
    mod, params = from_onnx(model)
    got, = tecomp.graph.GraphModule(tecomp.graph.build(mod, target="llvm", params=params))(x=x)
    want, = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
