"""onnxruntime's quantized ``com.microsoft`` operators (what its quantizer writes in the
operator format), each against onnxruntime's own kernels, and a model quantized in that
format end to end.

Tolerance: one quantization step. onnxruntime computes some of these in fixed point or
through lookup tables, tecomp as the QDQ format writes them (dequantize, the float
operator, requantize): a value within a rounding of a tie may land one step apart."""

import numpy as np
import onnx_models
import pytest
from onnx import TensorProto, helper, numpy_helper

import tecomp
from tecomp.errors import UnsupportedOpError
from tecomp.frontend import from_onnx
from tecomp.graph.build import bind_params
from tecomp.graph.passes import optimize
from tecomp.graph.passes.pipeline import pipeline_for
from tecomp.target import as_target

pytest.importorskip("onnxruntime")

MS = "com.microsoft"
TYPES = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8, "int32": TensorProto.INT32,
         "float32": TensorProto.FLOAT, "bool": TensorProto.BOOL}


def _model(node, inputs: dict, consts: dict, out_dtype="uint8"):
    """A one-node model: ``inputs`` name -> array (graph inputs), ``consts`` name -> array
    (initializers), its output of ``out_dtype``."""
    graph = helper.make_graph(
        [node], "contrib",
        [helper.make_tensor_value_info(n, TYPES[str(a.dtype)], a.shape)
         for n, a in inputs.items()],
        [helper.make_tensor_value_info(node.output[0], TYPES[out_dtype], None)],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(MS, 1)])


def _check(model, inputs, steps=1.0):
    (want,) = onnx_models.run_onnxruntime(model, inputs)
    mod, params = from_onnx(model)
    (got,) = tecomp.graph.GraphModule(tecomp.graph.build(mod, target="llvm",
                                                         params=params))(**inputs)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.abs(got.astype(np.float64) - want.astype(np.float64)).max() <= steps
    return got


def _q(rng, shape, dtype="uint8"):
    low, high = (0, 256) if dtype == "uint8" else (-128, 128)
    return rng.integers(low, high, shape).astype(dtype)


def _params(prefix, scale, zero, dtype="uint8"):
    return {f"{prefix}_scale": np.array(scale, "float32"),
            f"{prefix}_zero": np.array(zero, dtype)}


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_binary_operators_broadcast(op, dtype, rng):
    zero = 3 if dtype == "uint8" else -5
    consts = {**_params("a", 0.02, zero, dtype), **_params("b", 0.05, zero + 7, dtype),
              **_params("c", 0.04 if op == "QLinearAdd" else 0.3, zero - 2, dtype)}
    node = helper.make_node(op, ["a", "a_scale", "a_zero", "b", "b_scale", "b_zero",
                                 "c_scale", "c_zero"], ["c"], domain=MS)
    inputs = {"a": _q(rng, (2, 8, 5, 6), dtype), "b": _q(rng, (1, 8, 1, 1), dtype)}
    _check(_model(node, inputs, consts, dtype), inputs)


@pytest.mark.parametrize("requantized", [True, False])
def test_qgemm_with_bias_alpha_and_per_column_weight_scales(requantized, rng):
    b = _q(rng, (5, 8), "int8")
    consts = {**_params("a", 0.03, 100), "b": b,
              "b_scale": np.linspace(0.01, 0.02, 5).astype("float32"),
              "b_zero": np.zeros(5, "int8"),
              "c": rng.integers(-2000, 2000, 5).astype("int32")}
    names = ["a", "a_scale", "a_zero", "b", "b_scale", "b_zero", "c"]
    if requantized:
        consts.update(_params("y", 0.05, 128))
        names += ["y_scale", "y_zero"]
    node = helper.make_node("QGemm", names, ["y"], domain=MS, transB=1, alpha=0.5)
    inputs = {"a": _q(rng, (3, 8))}
    got = _check(_model(node, inputs, consts, "uint8" if requantized else "float32"), inputs,
                 1.0 if requantized else 1e-4)
    assert got.dtype == (np.uint8 if requantized else np.float32)


@pytest.mark.parametrize("op, attrs", [
    ("QLinearGlobalAveragePool", {}),
    ("QLinearAveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("QLinearAveragePool", {"kernel_shape": [2, 2], "count_include_pad": 1,
                            "pads": [0, 0, 1, 1]}),
    ("QLinearLeakyRelu", {"alpha": 0.1}),
    ("QLinearSigmoid", {}),
    ("QLinearSoftmax", {"axis": -1, "opset": 13}),
])
def test_unary_operators(op, attrs, rng):
    consts = {**_params("x", 0.05, 120), **_params("y", 0.02 if op != "QLinearSoftmax"
                                                    else 1 / 256, 0 if op == "QLinearSoftmax"
                                                    else 110)}
    node = helper.make_node(op, ["x", "x_scale", "x_zero", "y_scale", "y_zero"], ["y"],
                            domain=MS, **attrs)
    inputs = {"x": _q(rng, (1, 8, 7, 9))}
    _check(_model(node, inputs, consts), inputs)


def test_concat_requantizes_each_input(rng):
    consts = {**_params("y", 0.05, 10), **_params("a", 0.02, 3), **_params("b", 0.1, 200)}
    node = helper.make_node("QLinearConcat", ["y_scale", "y_zero", "a", "a_scale", "a_zero",
                                              "b", "b_scale", "b_zero"], ["y"], domain=MS,
                            axis=1)
    inputs = {"a": _q(rng, (1, 3, 4, 5)), "b": _q(rng, (1, 5, 4, 5))}
    _check(_model(node, inputs, consts), inputs)


def test_where_requantizes_the_branch_it_takes(rng):
    consts = {**_params("x", 0.02, 3), **_params("y", 0.1, 200), **_params("z", 0.05, 10)}
    node = helper.make_node("QLinearWhere", ["c", "x", "x_scale", "x_zero", "y", "y_scale",
                                             "y_zero", "z_scale", "z_zero"], ["z"], domain=MS)
    inputs = {"c": rng.random((1, 4, 5)) < 0.5, "x": _q(rng, (2, 4, 5)), "y": _q(rng, (1, 5))}
    _check(_model(node, inputs, consts), inputs)


def test_channels_last_pools_are_refused_by_name(rng):
    node = helper.make_node("QLinearGlobalAveragePool", ["x", "x_scale", "x_zero", "y_scale",
                                                         "y_zero"], ["y"], domain=MS,
                            channels_last=1)
    model = _model(node, {"x": _q(rng, (1, 4, 4, 8))},
                   {**_params("x", 0.05, 1), **_params("y", 0.05, 1)})
    with pytest.raises(UnsupportedOpError, match="channels_last=1"):
        from_onnx(model)


def test_other_contrib_operators_are_listed_as_unsupported(rng):
    node = helper.make_node("QLinearReduceMean", ["x"], ["y"], domain=MS)
    with pytest.raises(UnsupportedOpError, match="com.microsoft.QLinearReduceMean"):
        from_onnx(_model(node, {"x": _q(rng, (2,))}, {}))


def test_a_cnn_quantized_in_the_operator_format_matches_onnxruntime(rng):
    pytest.importorskip("onnxruntime.quantization")
    from tecomp.testing.models import resnet
    from tecomp.testing.quantized import quantize_static_model

    model = resnet(depths=(1, 1), width=16, image=24, classes=10, batch=1)
    feeds = [{"input": rng.normal(size=(1, 3, 24, 24)).astype("float32")} for _ in range(6)]
    qmodel = quantize_static_model(model, feeds, quant_format="QOperator")
    assert {"QLinearAdd", "QLinearGlobalAveragePool", "QGemm"} <= {
        n.op_type for n in qmodel.graph.node if n.domain == MS}
    last = [n for n in qmodel.graph.node if n.op_type == "DequantizeLinear"][-1]
    inits = {t.name: numpy_helper.to_array(t) for t in qmodel.graph.initializer}
    step = float(inits[last.input[1]])
    mod, params = from_onnx(qmodel)
    # The biases, int32 with the product's scale, are constants: the additions after the
    # convolutions follow their blocked layout, one transform back before the classifier.
    graph = optimize(bind_params(mod, params), pipeline_for(as_target("llvm")))
    ops = [n.op for k in graph.nodes if k.op == "fused" for n in k.attrs["body"].nodes]
    assert "qnn_conv2d_nchwc" in ops and ops.count("transpose") == 1
    run = tecomp.graph.GraphModule(tecomp.graph.build(mod, target="llvm", params=params))
    for f in feeds[:3]:
        (want,) = onnx_models.run_onnxruntime(qmodel, f)
        (got,) = run(**f)
        assert np.abs(got - want).max() <= step * 1.0001
