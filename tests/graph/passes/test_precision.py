"""float16 and bfloat16 models end to end (accumulating in float32), and the bf16
precision of float32 models."""

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import tecomp
from tecomp import autotune
from tecomp import graph as G
from tecomp.errors import TargetError
from tecomp.frontend import from_onnx
from tecomp.codegen.llvm.bfloat import has_bf16
from tecomp.graph.build import bind_params
from tecomp.graph.passes.fold_batch_norms import fold_batch_norms
from tecomp.graph.passes.fold_constants import fold_constants
from tecomp.graph.passes.precision import (
    accumulate_in_float32,
    bfloat16_products,
    apply_precision,
    round_products_to_bfloat16,
)
from tecomp.testing.models import bert_encoder, example_inputs, resnet
from tecomp.testing.quantized import folded_batch_norms
from tecomp.topi.fused_group import anchor_workload

STORAGE = {"float16": (TP.FLOAT16, np.float16), "bfloat16": (TP.BFLOAT16, ml_dtypes.bfloat16)}
#: One unit in the last place at 1.0: 2^-10 for float16, 2^-7 for bfloat16.
ULP = {"float16": 2.0**-10, "bfloat16": 2.0**-7}
#: Built, never run: an x86 CPU with AVX512-BF16.
SAPPHIRE_RAPIDS = "llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids"


def _weight(rng, shape, np_dtype, scale):
    return (rng.standard_normal(shape) * scale).astype(np_dtype)


def _case(name, rng, np_dtype):
    """(nodes, input shape, output shape, initializers) of a small model of ``name``."""
    w = lambda shape, scale=0.3: _weight(rng, shape, np_dtype, scale)  # noqa: E731
    node = helper.make_node
    if name == "conv_relu_pool":
        return ([node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
                 node("Relu", ["c"], ["r"]), node("GlobalAveragePool", ["r"], ["y"])],
                (2, 3, 9, 9), (2, 8, 1, 1), {"W": w((8, 3, 3, 3)), "B": w((8,))})
    if name == "gemm_softmax":
        return ([node("Gemm", ["x", "W", "B"], ["g"], transB=1),
                 node("Softmax", ["g"], ["y"], axis=-1)],
                (4, 64), (4, 10), {"W": w((10, 64), 0.1), "B": w((10,))})
    if name == "matmul_layer_norm":
        return ([node("MatMul", ["x", "W"], ["m"]),
                 node("LayerNormalization", ["m", "S", "B"], ["y"], axis=-1)],
                (2, 5, 32), (2, 5, 16), {"W": w((32, 16), 0.2), "S": w((16,)), "B": w((16,))})
    if name == "reduce_mean_sum":
        return ([node("ReduceMean", ["x", "A"], ["m"], keepdims=1),
                 node("ReduceSum", ["x", "A"], ["s"], keepdims=1), node("Mul", ["m", "s"], ["y"])],
                (3, 40, 7), (3, 1, 7), {"A": np.array([1], np.int64)})
    if name == "cast_elementwise":
        # Through float32 and back, with arithmetic in the storage type on both sides.
        return ([node("Sigmoid", ["x"], ["s"]), node("Cast", ["s"], ["f"], to=TP.FLOAT),
                 node("Mul", ["f", "f"], ["q"]), node("Cast", ["q"], ["h"], to=0),
                 node("Add", ["h", "x"], ["y"])],
                (6, 33), (6, 33), {})
    raise AssertionError(name)


CASES = ("conv_relu_pool", "gemm_softmax", "matmul_layer_norm", "reduce_mean_sum",
         "cast_elementwise")


def _model(name, elem, np_dtype, seed=0):
    """The model of ``name`` in element type ``elem`` (its weights drawn in ``np_dtype``
    and converted, so every element type gets the same values)."""
    rng = np.random.default_rng(seed)
    nodes, in_shape, out_shape, inits = _case(name, rng, np_dtype)
    storage = helper.tensor_dtype_to_np_dtype(elem)
    for n in nodes:  # a Cast back to the storage type (to=0 above)
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == 0:
                a.i = elem
    tensors = [numpy_helper.from_array(v if v.dtype == np.int64 else v.astype(storage), k)
               for k, v in inits.items()]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", elem, in_shape)],
                          [helper.make_tensor_value_info("y", elem, out_shape)], tensors)
    opset = 18 if elem != TP.BFLOAT16 else 22  # Conv takes bfloat16 from version 22
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _run_tecomp(model, feeds, **build_args):
    graph, params = from_onnx(model)
    lib = G.build(graph, "llvm", params=params, **build_args)
    return G.GraphModule(lib)(**feeds)[0]


def _float32_reference(name, x, np_dtype):
    """The model computed in float32 by onnxruntime, rounded to the storage type."""
    model = _model(name, TP.FLOAT, np_dtype)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x.astype(np.float32)})[0].astype(np_dtype)


def _assert_close(out, ref, dtype, ulps):
    """Within ``ulps`` units in the last place of ``dtype`` at the output's scale."""
    out32, ref32 = out.astype(np.float32), ref.astype(np.float32)
    scale = max(1.0, float(np.abs(ref32).max()))
    np.testing.assert_allclose(out32, ref32, rtol=0, atol=ulps * ULP[dtype] * scale)


def _model_input_and_output(name, dtype):
    """The model of ``name`` in ``dtype``, a random input and tecomp's output."""
    elem, np_dtype = STORAGE[dtype]
    model = _model(name, elem, np_dtype)
    shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    x = np.random.default_rng(1).standard_normal(shape).astype(np_dtype)
    return model, x, _run_tecomp(model, {"x": x})


@pytest.mark.parametrize("name", CASES)
def test_float16_models_match_onnxruntime(name):
    model, x, out = _model_input_and_output(name, "float16")
    assert out.dtype == np.float16
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    _assert_close(out, sess.run(None, {"x": x})[0], "float16", ulps=2)


@pytest.mark.parametrize("name", CASES)
def test_bfloat16_models_match_float32_rounded(name):
    """onnxruntime's CPU provider has no bfloat16 Conv, Gemm or reductions: the reference
    is the float32 model rounded to bfloat16 (tecomp rounds once per node more)."""
    np_dtype = STORAGE["bfloat16"][1]
    _, x, out = _model_input_and_output(name, "bfloat16")
    assert out.dtype == np_dtype
    _assert_close(out, _float32_reference(name, x, np_dtype), "bfloat16", ulps=2)


@pytest.mark.parametrize("dtype", sorted(STORAGE))
def test_long_sum_accumulates_in_float32(dtype):
    """8192 values near 1 summed: a float16 accumulator would stop growing at 2048 (and a
    bfloat16 one at 256); in float32 the sum is the float32 sum rounded once."""
    elem, np_dtype = STORAGE[dtype]
    g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)], "sum",
                          [helper.make_tensor_value_info("x", elem, [2, 8192])],
                          [helper.make_tensor_value_info("y", elem, [])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = (1 + np.random.default_rng(0).random((2, 8192)) / 8).astype(np_dtype)
    out = _run_tecomp(model, {"x": x})
    ref = x.astype(np.float32).sum().astype(np_dtype)
    _assert_close(out, ref, dtype, ulps=1)


def test_accumulate_in_float32_casts_around_products_only():
    model = _model("conv_relu_pool", *STORAGE["float16"])
    graph, _ = from_onnx(model)
    widened = accumulate_in_float32(graph)
    ops = [(n.op, n.attrs.get("dtype")) for n in widened.nodes]
    conv = next(n for n in widened.nodes if n.op == "conv2d")
    assert all(widened.types[i].dtype == "float32" for i in conv.inputs)
    assert widened.types[conv.outputs[0]].dtype == "float32"
    assert ("relu", None) in ops and widened.types["r"].dtype == "float16"
    assert widened.types["y"].dtype == "float16"
    f32_graph, _ = from_onnx(_model("conv_relu_pool", TP.FLOAT, np.float32))
    assert accumulate_in_float32(f32_graph).nodes == f32_graph.nodes


def test_precision_is_checked():
    graph, params = from_onnx(_model("gemm_softmax", TP.FLOAT, np.float32))
    with pytest.raises(ValueError, match="precision='int4'.*'fp32', 'bf16'"):
        G.build(graph, "llvm", params=params, precision="int4")


def test_bf16_precision_needs_avx512_bf16():
    graph, params = from_onnx(_model("gemm_softmax", TP.FLOAT, np.float32))
    target = tecomp.Target("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3")
    with pytest.raises(TargetError, match="avx512bf16"):
        G.build(graph, target, params=params, precision="bf16")
    with pytest.raises(TargetError, match=r"\(bf16\)"):
        apply_precision(graph, tecomp.Target("llvm -mtriple=aarch64-linux-gnu"), "bf16")


def test_bf16_precision_cross_build_rounds_with_vcvtneps2bf16():
    """For Sapphire Rapids the operands' rounding is vcvtneps2bf16; a convolution of 3
    input channels (not channel-blocked) reads the rounded float32 values."""
    graph, params = from_onnx(_model("conv_relu_pool", TP.FLOAT, np.float32))
    lib = G.build(graph, SAPPHIRE_RAPIDS, params=params, precision="bf16")
    asm = lib.module.get_source("asm")
    assert "vcvtneps2bf16" in asm
    assert "vdpbf16ps" not in asm


def test_bf16_precision_blocked_convolutions_multiply_with_vdpbf16ps():
    """A CNN's channel-blocked convolutions read their bfloat16 inputs and weights as
    pairs (vdpbf16ps): every convolution on blocked data reads a bfloat16 input, and the
    first, reading the image's 3 channels planar, a rounded float32 input."""
    graph, params = from_onnx(_small_cnn())
    lib = G.build(graph, SAPPHIRE_RAPIDS, params=params, precision="bf16")
    assert "vdpbf16ps" in lib.module.get_source("asm")
    convs = [n for node in lib.graph.nodes if "body" in node.attrs
             for n in node.attrs["body"].nodes if n.op.startswith("conv2d")]
    body_types = {v: t for node in lib.graph.nodes if "body" in node.attrs
                  for v, t in node.attrs["body"].types.items()}
    planar = [n for n in convs if len(body_types[n.inputs[0]].shape) == 4]
    assert len(planar) == 1 and all(n.op == "conv2d_nchwc" for n in convs)
    assert body_types[planar[0].inputs[0]].dtype == "float32"
    assert all(body_types[n.inputs[0]].dtype == "bfloat16" for n in convs if n not in planar)
    assert all(body_types[n.outputs[0]].dtype == "float32" for n in convs)


def test_bf16_precision_on_aarch64_multiplies_with_bfdot():
    """On AArch64 with FEAT_BF16 the blocked convolutions' pairs are bfdot (4 lanes each)
    and the operands' rounding bfcvt (the kernel's numerics under qemu-user:
    tests/codegen/test_llvm_bf16_dot.py)."""
    graph, params = from_onnx(_small_cnn())
    target = tecomp.Target("llvm -mtriple=aarch64-linux-gnu -mattr=+bf16")
    asm = G.build(graph, target, params=params, precision="bf16").module.get_source("asm")
    assert "bfdot" in asm and "bfcvt" in asm


def _small_cnn():
    return resnet(depths=(1, 1), width=16, image=32, classes=10, batch=1)


def _bf16_rounded_reference(model):
    """``model`` with its BatchNormalizations folded into the convolutions (onnxruntime's
    ``quant_pre_process``), then a Cast to bfloat16 and back before each Conv/Gemm/MatMul
    operand, which onnxruntime runs in float32: what the bf16 precision computes."""
    import onnx

    if any(n.op_type == "BatchNormalization" for n in model.graph.node):
        m = folded_batch_norms(model)
    else:
        m = onnx.ModelProto()
        m.CopyFrom(model)
    nodes, rounded = [], set()
    for n in m.graph.node:
        if n.op_type in ("Conv", "Gemm", "MatMul"):
            for k in (0, 1):
                src = n.input[k]
                if src not in rounded:
                    rounded.add(src)
                    nodes.append(helper.make_node("Cast", [src], [src + ".b"], to=TP.BFLOAT16))
                    nodes.append(helper.make_node("Cast", [src + ".b"], [src + ".r"],
                                                  to=TP.FLOAT))
                n.input[k] = src + ".r"
        nodes.append(n)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def test_bf16_precision_numerics_on_a_small_cnn():
    """The bf16 precision's graph, built for this machine (where it has AVX512-BF16, its
    blocked convolutions multiply in bfloat16): equal (to float32 summation order) to
    onnxruntime running the same roundings, and within 2% of the float32 model's largest
    logit (the figure in docs/guides/onnx.md)."""
    model = _small_cnn()
    feeds = example_inputs(model)
    graph, params = from_onnx(model)
    host = tecomp.Target("llvm")
    if has_bf16(host):
        lib = G.build(graph, host, params=params, precision="bf16")
    else:  # the same roundings, the products in float32
        bound = bind_params(graph, params)
        lib = G.build(round_products_to_bfloat16(fold_batch_norms(fold_constants(bound))),
                      host)
    out = G.GraphModule(lib)(**feeds)[0]

    def ort_run(m):
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)[0]

    np.testing.assert_allclose(out, ort_run(_bf16_rounded_reference(model)), rtol=1e-4,
                               atol=1e-4)
    fp32 = ort_run(model)
    deviation = np.abs(out - fp32).max() / np.abs(fp32).max()
    assert 0 < deviation < 0.02


def test_bf16_tasks_are_the_bfloat16_convolutions():
    """A bf16 build's convolutions on blocked data are tuning tasks of their own (bfloat16
    data), which ``tecomp tune --precision bf16`` tunes; the first, reading the image
    planar, stays float32."""
    graph, params = from_onnx(_small_cnn())

    def data_ranks_and_dtypes(tasks):
        workloads = [anchor_workload(t) for t in tasks]
        return {(len(args[0]), args[5]) for name, args in workloads if name == "conv2d_nchwc"}

    tasks = autotune.extract_tasks(graph, params, SAPPHIRE_RAPIDS, precision="bf16")
    assert data_ranks_and_dtypes(tasks) == {(5, "bfloat16"), (4, "float32")}
    fp32 = autotune.extract_tasks(graph, params, SAPPHIRE_RAPIDS)
    assert data_ranks_and_dtypes(fp32) == {(5, "float32"), (4, "float32")}


def test_bf16_precision_numerics_on_a_transformer_layer():
    """A BERT-style layer in bf16: its dense layers (with AVX512-BF16, on bfloat16 inputs
    and pairs of k) give what onnxruntime gives with the same roundings."""
    model = bert_encoder(layers=1, hidden=32, heads=2, vocab=50, max_pos=16)
    feeds = example_inputs(model, batch=2, seq=8)
    graph, params = from_onnx(model)
    host = tecomp.Target("llvm")
    if has_bf16(host):
        lib = G.build(graph, host, params=params, precision="bf16")
        denses = [n for node in lib.graph.nodes if "body" in node.attrs
                  for n in node.attrs["body"].nodes if n.op == "dense"]
        assert denses and all(n.attrs.get("out_dtype") == "float32" for n in denses)
    else:
        lib = G.build(round_products_to_bfloat16(bind_params(graph, params)), host)
    out = G.GraphModule(lib)(**feeds)[0]
    reference = _bf16_rounded_reference(model)
    sess = ort.InferenceSession(reference.SerializeToString(),
                                providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(out, sess.run(None, feeds)[0], rtol=1e-4, atol=1e-4)


def test_bf16_products_share_the_rounded_copy_of_a_shared_weight():
    """Two dense layers reading one float32 weight read one bfloat16 copy of it."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "W"], ["a"], transB=1),
             helper.make_node("Gemm", ["x", "W"], ["b"], transB=1, alpha=0.5),
             helper.make_node("Add", ["a", "b"], ["y"])]
    g = helper.make_graph(nodes, "tied", [helper.make_tensor_value_info("x", TP.FLOAT, (4, 8))],
                          [helper.make_tensor_value_info("y", TP.FLOAT, (4, 16))],
                          [numpy_helper.from_array(w, "W")])
    graph, params = from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))
    rounded = round_products_to_bfloat16(bind_params(graph, params))
    out = bfloat16_products(fold_constants(rounded))
    weights = {n.inputs[1] for n in out.nodes if n.op == "dense"}
    assert len(weights) == 1 and out.consts[weights.pop()].dtype == ml_dtypes.bfloat16
