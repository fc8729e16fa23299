"""Quantized models as onnxruntime writes them, quantized here at test time, built with
their products on int8 kernels and compared with onnxruntime's int8 run.

Tolerance: one quantization step of the output. tecomp rescales the exact int32 sum by
``x_scale * w_scale`` (then adds the bias and requantizes with ``y_scale``) where
onnxruntime multiplies by one float ``x_scale * w_scale / y_scale``; the two roundings
of a value within a float rounding of a tie may differ by one step, and a step in an
intermediate activation moves the output by at most about one step more. The float
outputs of dynamic quantization (MatMulInteger, then the float scale) agree to float
rounding."""

import numpy as np
import onnx_models
import pytest
from onnx import TensorProto, helper, numpy_helper

import tecomp
from tecomp.frontend import from_onnx
from tecomp.graph.passes import optimize
from tecomp.graph.passes.pipeline import pipeline_for
from tecomp.graph.passes.quantized_ops import lower_quantized_ops
from tecomp.graph.tasks import extract_graph_tasks
from tecomp.target import as_target
from tecomp.testing.quantized import quantize_dynamic_model, quantize_static_model
from tecomp.topi.fused_group import anchor_workload

pytest.importorskip("onnxruntime.quantization")


def _weights(rng, shapes: dict):
    return [numpy_helper.from_array((rng.normal(size=s) * 0.3).astype("float32"), n)
            for n, s in shapes.items()]


def _cnn(rng):
    """conv + relu + conv + add (residual) + relu + pool + gemm, and a 1x1 projection."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "wp"], ["proj"]),
        helper.make_node("Add", ["c2", "proj"], ["a"]),
        helper.make_node("Relu", ["a"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], transB=1),
    ]
    inits = _weights(rng, {"w1": (8, 3, 3, 3), "b1": (8,), "w2": (8, 8, 3, 3), "b2": (8,),
                           "wp": (8, 3, 1, 1), "wg": (10, 8), "bg": (10,)})
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _matmul_chain(rng):
    """x[batch, seq, 16] @ W1 + b -> relu -> @ W2 (a transformer's feed-forward)."""
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["y"]),
    ]
    inits = _weights(rng, {"w1": (16, 32), "b1": (32,), "w2": (32, 8)})
    graph = helper.make_graph(
        nodes, "ffn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _feeds(rng, model, n):
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
              for i in model.graph.input}
    return [{k: rng.normal(size=s).astype("float32") for k, s in shapes.items()}
            for _ in range(n)]


def _output_scale(qmodel):
    """The scale of the last DequantizeLinear, that of the model's output."""
    last = [n for n in qmodel.graph.node if n.op_type == "DequantizeLinear"][-1]
    inits = {t.name: numpy_helper.to_array(t) for t in qmodel.graph.initializer}
    return float(inits[last.input[1]])


def _build(qmodel, target="llvm"):
    mod, params = from_onnx(qmodel)
    return mod, tecomp.graph.GraphModule(tecomp.graph.build(mod, target=target,
                                                            params=params))


def _cpu_kernel_ops(mod) -> list:
    """The operators of the kernels the CPU pipeline makes of ``mod``."""
    return [n.op for k in optimize(mod, pipeline_for(as_target("llvm"))).nodes
            if k.op == "fused" for n in k.attrs["body"].nodes]


def _assert_matches_onnxruntime(qmodel, run, feeds_list):
    """Within one output quantization step of onnxruntime's int8 run on each feed."""
    step = _output_scale(qmodel)
    for feeds in feeds_list:
        (want,) = onnx_models.run_onnxruntime(qmodel, feeds)
        (got,) = run(**feeds)
        assert np.abs(got - want).max() <= step * 1.0001


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("make", [_cnn, _matmul_chain])
def test_quantize_static_models_match_onnxruntime_int8(make, per_channel, rng):
    model = make(rng)
    qmodel = quantize_static_model(model, _feeds(rng, model, 8), per_channel=per_channel)
    mod, run = _build(qmodel)
    optimized = optimize(mod)
    anchors = {n.op for k in optimized.nodes if k.op == "fused" for n in k.attrs["body"].nodes}
    # Every product runs on the int8 operands; no float conv or product is left.
    assert anchors & {"qnn_conv2d", "qnn_matmul"}
    assert not anchors & {"conv2d", "dense", "matmul", "conv2d_nchwc"}
    _assert_matches_onnxruntime(qmodel, run, _feeds(rng, model, 3))


def _blocked_cnn(rng):
    """A ResNet-like net of 32 and 64 channels (whole channel blocks): a strided 7x7 first
    layer on 3 channels, max pool, a residual block, a strided 1x1 and 3x3 pair, global
    pool and classifier, on an odd-sized image."""
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[3, 3, 3, 3], strides=[2, 2]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("MaxPool", ["r0"], ["p0"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["p0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "p0"], ["a"]),
        helper.make_node("Relu", ["a"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Conv", ["r2", "wp"], ["proj"], strides=[2, 2]),
        helper.make_node("Add", ["c3", "proj"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], transB=1),
    ]
    inits = _weights(rng, {"w0": (32, 3, 7, 7), "b0": (32,), "w1": (32, 32, 3, 3), "b1": (32,),
                           "w2": (32, 32, 3, 3), "b2": (32,), "w3": (64, 32, 3, 3),
                           "b3": (64,), "wp": (64, 32, 1, 1), "wg": (10, 64), "bg": (10,)})
    graph = helper.make_graph(
        nodes, "blocked", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         [1, 3, 37, 29])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _narrow_bottleneck(rng):
    """MobileNetV2's narrow layers: 24 channels (half a vector of int32 lanes with
    AVX-512), a residual addition between them, expanded back to 32."""
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"]),
        helper.make_node("Conv", ["c1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c1", "c2"], ["a"]),
        helper.make_node("Conv", ["a", "w3", "b3"], ["c3"]),
        helper.make_node("Relu", ["c3"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], transB=1),
    ]
    inits = _weights(rng, {"w0": (32, 3, 3, 3), "b0": (32,), "w1": (24, 32, 1, 1), "b1": (24,),
                           "w2": (24, 24, 3, 3), "b2": (24,), "w3": (32, 24, 1, 1),
                           "b3": (32,), "wg": (10, 32), "bg": (10,)})
    graph = helper.make_graph(
        nodes, "narrow", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                        [1, 3, 13, 15])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("make", [_blocked_cnn, _narrow_bottleneck])
def test_quantized_convolutions_keep_their_activations_blocked(make, rng):
    model = make(rng)
    qmodel = quantize_static_model(model, _feeds(rng, model, 8))
    mod, run = _build(qmodel)
    ops = _cpu_kernel_ops(mod)
    # Every convolution blocked, the first one reading its planar 3 channels; the pool
    # and the residual additions on blocked data; one transform back, before the
    # classifier.
    assert "qnn_conv2d" not in ops and ops.count("transpose") == 1
    assert ops.count("qnn_conv2d_nchwc") == sum(n.op_type == "Conv" for n in model.graph.node)
    assert "max_pool3d" in ops or make is _narrow_bottleneck
    _assert_matches_onnxruntime(qmodel, run, _feeds(rng, model, 3))


def test_one_build_of_a_quantized_cnn_serves_every_image_size(rng):
    # Blocked over a symbolic image too: rows computed in whole tiles and cropped.
    model = _blocked_cnn(rng)
    qmodel = quantize_static_model(model, _feeds(rng, model, 4))
    dims = qmodel.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_param, dims[3].dim_param = "height", "width"
    mod, run = _build(qmodel)
    ops = _cpu_kernel_ops(mod)
    assert ops.count("qnn_conv2d_nchwc") == 5 and ops.count("transpose") == 1
    _assert_matches_onnxruntime(qmodel, run, [
        {"x": rng.normal(size=shape).astype("float32")}
        for shape in ((1, 3, 37, 29), (1, 3, 16, 45), (1, 3, 9, 9))])


@pytest.mark.parametrize("make", [_cnn, _matmul_chain])
def test_quantize_static_models_on_cuda_match_onnxruntime_int8(make, cuda_target, rng):
    """On a GPU (simulated without one) the products run on int8 operands too."""
    model = make(rng)
    qmodel = quantize_static_model(model, _feeds(rng, model, 8), per_channel=True)
    mod, run = _build(qmodel, cuda_target)
    _assert_matches_onnxruntime(qmodel, run, _feeds(rng, model, 1))


@pytest.mark.parametrize("target", ["llvm", "cuda"])
def test_quantize_dynamic_matmul_matches_onnxruntime(target, rng, request):
    if target == "cuda":
        request.getfixturevalue("cuda_target")
    model = _matmul_chain(rng)
    qmodel = quantize_dynamic_model(model)
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= {n.op_type for n in qmodel.graph.node}
    mod, run = _build(qmodel, target)
    lowered = {n.op for n in lower_quantized_ops(mod).nodes}
    assert "qnn_matmul" in lowered
    for feeds in _feeds(rng, model, 3):
        (want,) = onnx_models.run_onnxruntime(qmodel, feeds)
        (got,) = run(**feeds)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_quantized_products_are_tuning_tasks(rng):
    model = _cnn(rng)
    mod, params = from_onnx(quantize_static_model(model, _feeds(rng, model, 2)))
    names = {anchor_workload(t)[0] for t in extract_graph_tasks(mod, params)}
    # The convolutions as the CPU's blocked layout computes them.
    assert {"qnn_conv2d_nchwc", "qnn_matmul"} <= names


def _qdq_conv(groups=1, constant_scale=True):
    """DequantizeLinear(x) and DequantizeLinear(w) -> Conv, as graph operators."""
    c = 4
    w = np.arange(c * (c // groups) * 9, dtype="int8").reshape(c, c // groups, 3, 3) % 7
    inits = [numpy_helper.from_array(w, "wq"),
             numpy_helper.from_array(np.full(c, 0.1, "float32"), "sw"),
             numpy_helper.from_array(np.array(3, "uint8"), "zx")]
    inputs = [helper.make_tensor_value_info("xq", TensorProto.UINT8, [1, c, 6, 6])]
    if constant_scale:
        inits.append(numpy_helper.from_array(np.array(0.5, "float32"), "sx"))
    else:
        inputs.append(helper.make_tensor_value_info("sx", TensorProto.FLOAT, []))
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["x"]),
             helper.make_node("DequantizeLinear", ["wq", "sw"], ["w"], axis=0),
             helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=groups)]
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    mod, _ = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    return mod


def test_products_the_kernels_do_not_take_keep_their_float_form():
    assert "qnn_conv2d" in {n.op for n in lower_quantized_ops(_qdq_conv()).nodes}
    # A depthwise convolution, and a scale computed at run time.
    for mod in (_qdq_conv(groups=4), _qdq_conv(constant_scale=False)):
        ops = {n.op for n in lower_quantized_ops(mod).nodes}
        assert "qnn_conv2d" not in ops and ops & {"conv2d", "depthwise_conv2d"}


def test_lowered_conv_computes_the_dequantized_convolution(rng):
    mod = _qdq_conv()
    xq = rng.integers(0, 256, (1, 4, 6, 6)).astype("uint8")
    x = (xq.astype(np.float32) - 3) * 0.5
    w = (np.arange(4 * 4 * 9, dtype="int8").reshape(4, 4, 3, 3) % 7).astype(np.float32) * 0.1
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 4, 6, 6), np.float32)
    for dy in range(3):
        for dx in range(3):
            want += np.einsum("nchw,kc->nkhw", xp[:, :, dy:dy + 6, dx:dx + 6], w[:, :, dy, dx])
    (got,) = tecomp.graph.GraphModule(tecomp.graph.build(mod, target="llvm"))(xq=xq)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def _qdq_conv_of(wq, zw=None, channels=16):
    """DequantizeLinear(xq, 0.5, 3) and DequantizeLinear(wq, 0.1[, zw]) -> Conv 3x3."""
    inits = [numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(np.float32(0.5), "sx"),
             numpy_helper.from_array(np.full(wq.shape[0], 0.1, "float32"), "sw"),
             numpy_helper.from_array(np.array(3, "uint8"), "zx")]
    w_inputs = ["wq", "sw"]
    if zw is not None:
        inits.append(numpy_helper.from_array(zw, "zw"))
        w_inputs.append("zw")
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["x"]),
             helper.make_node("DequantizeLinear", w_inputs, ["w"], axis=0),
             helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("xq", TensorProto.UINT8, [1, channels, 7, 9])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    mod, _ = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    return mod


def _dequantized_conv(xq, wq, zw):
    """In float64: the float32 sum of thousands of products rounds by more than the
    result's own rounding."""
    x = (xq.astype(np.float64) - 3) * 0.5
    w = (wq.astype(np.float64) - (0 if zw is None else zw.astype(np.float64)
                                  .reshape(-1, 1, 1, 1))) * 0.1
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, w.shape[0], 7, 9))
    for dy in range(3):
        for dx in range(3):
            want += np.einsum("nchw,kc->nkhw", xp[:, :, dy:dy + 7, dx:dx + 9], w[:, :, dy, dx])
    return want


@pytest.mark.parametrize("weights,symmetric,pairs_fit", [
    ("int8 7-bit", True, True), ("int8 full range", True, False),
    ("uint8 zero 128", True, False), ("uint8 zero 100", False, None)])
def test_weights_are_lowered_to_the_int8_kernels_they_fit(weights, symmetric, pairs_fit, rng):
    # uint8 weights become int8 (w - 128, zero point - 128): symmetric at zero point 128.
    if weights.startswith("int8"):
        bound = 64 if "7-bit" in weights else 128
        wq, zw = rng.integers(-bound, bound, (16, 16, 3, 3)).astype("int8"), None
    else:
        wq = rng.integers(0, 256, (16, 16, 3, 3)).astype("uint8")
        zw = np.full(16, 128 if "128" in weights else 100, "uint8")
    mod = _qdq_conv_of(wq, zw)
    (conv,) = [n for n in lower_quantized_ops(mod).nodes if n.op == "qnn_conv2d"]
    assert len(conv.inputs) == (3 if symmetric else 4)
    assert conv.attrs.get("pairs_fit_int16") == (pairs_fit if symmetric else False)
    xq = rng.integers(0, 256, (1, 16, 7, 9)).astype("uint8")
    (got,) = tecomp.graph.GraphModule(tecomp.graph.build(mod, target="llvm"))(xq=xq)
    np.testing.assert_allclose(got, _dequantized_conv(xq, wq, zw), rtol=1e-6, atol=1e-3)
