"""Whole models built for cuda: a small CNN and an MLP with layer norm against
onnxruntime, run by DeviceGraphModule on the GPU where there is one and in the simulator
otherwise (tiny shapes: the simulator interprets every thread), export -> load, device
arrays in and out, and the errors."""

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

import tecomp
from tecomp import autotune
from tecomp.autotune import MeasureErrorNo, MeasureResult
from tecomp.autotune.records import make_record
from tecomp.frontend import from_onnx
from tecomp.graph import GraphBuildError, GraphInputError, build, load
from tecomp.graph.device_executor import DeviceGraphModule
from tecomp.topi.cuda.reduction import CROSS_THREAD_MIN

import onnx_models
import util

RTOL, ATOL = 1e-3, 1e-4


def _w(rng, name, *shape, lo=None):
    data = (rng.uniform(0.5, 1.5, shape) if lo else rng.standard_normal(shape) * 0.3)
    return numpy_helper.from_array(data.astype("float32"), name)


def tiny_cnn(seed=0):
    """Conv -> BatchNormalization -> Relu -> MaxPool -> Conv + residual Add -> Relu ->
    GlobalAveragePool -> Flatten -> Gemm -> Softmax, input ``x[batch, 3, 6, 6]``."""
    rng = np.random.default_rng(seed)
    inits = [_w(rng, "w0", 4, 3, 3, 3), _w(rng, "b0", 4), _w(rng, "gamma", 4, lo=True),
             _w(rng, "beta", 4), _w(rng, "mean", 4), _w(rng, "var", 4, lo=True),
             _w(rng, "w1", 4, 4, 3, 3), _w(rng, "fc_w", 5, 4), _w(rng, "fc_b", 5)]
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c0", "gamma", "beta", "mean", "var"],
                         ["bn"], epsilon=1e-5),
        helper.make_node("Relu", ["bn"], ["r0"]),
        helper.make_node("MaxPool", ["r0"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c1", "p"], ["s"]),
        helper.make_node("Relu", ["s"], ["r1"]),
        helper.make_node("GlobalAveragePool", ["r1"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1),
    ]
    return onnx_models._model(nodes, [onnx_models._vi("x", ["batch", 3, 6, 6])],
                              [onnx_models._vi("y", ["batch", 5])], inits)


def tiny_mlp(hidden=CROSS_THREAD_MIN, seed=0):
    """Gemm -> LayerNormalization over ``hidden`` (wide enough for a block of threads per
    row) -> Relu -> Gemm -> Softmax, input ``x[batch, 8]``."""
    rng = np.random.default_rng(seed)
    inits = [_w(rng, "w0", hidden, 8), _w(rng, "b0", hidden), _w(rng, "g", hidden, lo=True),
             _w(rng, "b", hidden), _w(rng, "w1", 4, hidden), _w(rng, "b1", 4)]
    nodes = [
        helper.make_node("Gemm", ["x", "w0", "b0"], ["h"], transB=1),
        helper.make_node("LayerNormalization", ["h", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("Gemm", ["r", "w1", "b1"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1),
    ]
    return onnx_models._model(nodes, [onnx_models._vi("x", ["batch", 8])],
                              [onnx_models._vi("y", ["batch", 4])], inits)


def _build(model, **kw):
    mod, params = from_onnx(model)
    return build(mod, target="cuda", params=params, **kw)


@pytest.fixture(scope="module")
def cnn_lib():
    if util.target_unavailable("cuda"):
        pytest.skip(util.target_unavailable("cuda"))
    return _build(tiny_cnn())


def test_small_cnn_matches_onnxruntime_at_two_batches(cnn_lib, rng):
    gm = DeviceGraphModule(cnn_lib)
    assert gm.simulated == (not util.gpu_available())
    for batch in (1, 2):
        x = rng.standard_normal((batch, 3, 6, 6)).astype("float32")
        ref, = onnx_models.run_onnxruntime(tiny_cnn(), {"x": x})
        y, = gm(x=x)
        np.testing.assert_allclose(y, ref, rtol=RTOL, atol=ATOL)
    # One plan per input-shape tuple, kept: the second call of a shape makes none.
    assert len(gm._device_plans) == 2
    gm(x=x)
    assert len(gm._device_plans) == 2


def test_small_cnn_fuses_as_on_the_cpu(cnn_lib):
    anchors = [k.anchor for k in cnn_lib.kernels]
    assert anchors.count("conv2d") == 2
    assert {"max_pool2d", "global_avg_pool", "dense", "softmax"} <= set(anchors)
    # Batch norm folded into the first convolution, the residual add into the second.
    assert not any("batch_norm" in k.ops for k in cnn_lib.kernels)
    assert any(k.ops[:2] == ("conv2d", "add") and "relu" in k.ops for k in cnn_lib.kernels)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, 10 ** 6))
def test_any_config_of_every_task_builds_a_model_that_matches_onnxruntime(index):
    """Records of the small CNN's CUDA tasks (its two convolutions with what is fused
    after them, the dense with its bias) at any point of their spaces build a model
    that matches onnxruntime: every config of a space is a program that runs."""
    if util.target_unavailable("cuda"):
        pytest.skip(util.target_unavailable("cuda"))
    model = tiny_cnn()
    mod, params = from_onnx(model, shape={"x": (2, 3, 6, 6)})
    tasks = autotune.extract_tasks(mod, params, target="cuda")
    assert [t.name for t in tasks] == ["fused_group"] * 3
    done = MeasureResult((1e-4,), MeasureErrorNo.NO_ERROR, "", 0.0, time.time())
    records = [make_record(t, t.config_space.get(index % len(t.config_space)), done)
               for t in tasks]
    with autotune.apply_history_best(records):
        lib = build(mod, target="cuda", params=params)
    assert [k.schedule for k in lib.kernels].count("tuned record") == 3
    x = np.random.default_rng(index).standard_normal((2, 3, 6, 6)).astype("float32")
    ref, = onnx_models.run_onnxruntime(model, {"x": x})
    y, = DeviceGraphModule(lib)(x=x)
    np.testing.assert_allclose(y, ref, rtol=RTOL, atol=ATOL)


def test_mlp_with_layer_norm_matches_onnxruntime(cuda_target, rng):
    lib = _build(tiny_mlp())
    source = lib.module.get_source("cuda")
    assert "__shared__" in source  # the layer norm's statistics: a block per row
    x = rng.standard_normal((2, 8)).astype("float32")
    ref, = onnx_models.run_onnxruntime(tiny_mlp(), {"x": x})
    gm = DeviceGraphModule(lib)
    gm.set_input("x", x)
    gm.run()
    np.testing.assert_allclose(gm.get_output(0), ref, rtol=RTOL, atol=ATOL)


def test_a_mean_over_everything_runs_in_the_thread_of_its_one_element(cuda_target, rng):
    """A loss's reductions to 0-d values (sum of x, sum of x squared) divided into a 0-d
    output: the output is computed as its one element and both sums in that element's
    thread, as a 0-d value has no loop to bind to the GPU's threads."""
    from onnx import TensorProto

    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Mul", ["x", "x"], ["x2"]),
             helper.make_node("ReduceSum", ["x2"], ["t"], keepdims=0),
             helper.make_node("Div", ["t", "s"], ["y"])]
    graph = helper.make_graph(
        nodes, "ratio", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.uniform(0.5, 1.5, (3, 5)).astype("float32")
    y, = DeviceGraphModule(_build(model))(x=x)
    assert y.shape == ()
    np.testing.assert_allclose(y, (x * x).sum() / x.sum(), rtol=1e-5)


def test_export_then_load_holds_cubin_ptx_and_graph(cnn_lib, tmp_path, rng):
    path = cnn_lib.export_library(str(tmp_path / "cnn.cuda"))
    loaded = load(path)
    assert loaded.target.kind == "cuda"
    assert [k.name for k in loaded.kernels] == [k.name for k in cnn_lib.kernels]
    assert loaded.module.cubin == cnn_lib.module.cubin
    assert ".entry" in loaded.module.get_source("ptx")
    if util.gpu_available():
        x = rng.standard_normal((1, 3, 6, 6)).astype("float32")
        ref, = onnx_models.run_onnxruntime(tiny_cnn(), {"x": x})
        np.testing.assert_allclose(DeviceGraphModule(loaded)(x=x)[0], ref, rtol=RTOL,
                                   atol=ATOL)
    else:  # a loaded module holds no loop IR: simulating it is refused, clearly
        with pytest.raises(tecomp.errors.TargetError, match="loaded from a file"):
            DeviceGraphModule(loaded)


def test_the_device_executor_refuses_a_cpu_library():
    lib = build(from_onnx(onnx_models.decomposed_layer_norm())[0], target="llvm")
    with pytest.raises(tecomp.errors.TecompError, match="run it with tecomp.graph.GraphModule"):
        DeviceGraphModule(lib)


def test_wrong_inputs_are_named(cnn_lib):
    gm = DeviceGraphModule(cnn_lib)
    with pytest.raises(GraphInputError, match="rank 4"):
        gm(x=np.zeros((3, 6, 6), "float32"))
    with pytest.raises(GraphInputError, match="not an input"):
        gm(x=np.zeros((1, 3, 6, 6), "float32"), z=np.zeros(1, "float32"))


def test_an_operator_without_a_cuda_implementation_is_refused_by_name(monkeypatch):
    from tecomp.operators import lookup

    monkeypatch.delitem(lookup("softmax").implementations, "cuda")
    with pytest.raises(GraphBuildError,
                       match=r"target kind 'cuda': softmax \(kernel fused_\w+, node"):
        _build(tiny_mlp(hidden=8))


@pytest.mark.gpu
def test_device_arrays_in_place_and_out(gpu, cnn_lib, rng):
    cupy = pytest.importorskip("cupy")
    x = rng.standard_normal((2, 3, 6, 6)).astype("float32")
    ref, = onnx_models.run_onnxruntime(tiny_cnn(), {"x": x})
    gm = DeviceGraphModule(cnn_lib, device_outputs=True)
    y, = gm(x=cupy.asarray(x))
    np.testing.assert_allclose(cupy.asnumpy(cupy.asarray(y)), ref, rtol=RTOL, atol=ATOL)


def test_attention_with_symbolic_batch_and_sequence(cuda_target, rng):
    """Products of symbolic sizes (scores are seq x seq) and a masked softmax: one build,
    two sequence lengths."""
    model = onnx_models.attention_block(hidden=8, heads=2)
    gm = DeviceGraphModule(_build(model))
    for seq in (3, 5):
        feeds = {"x": rng.standard_normal((1, seq, 8)).astype("float32"),
                 "mask": np.ones((1, seq), "float32")}
        feeds["mask"][0, -1] = 0
        ref, = onnx_models.run_onnxruntime(model, feeds)
        np.testing.assert_allclose(gm(**feeds)[0], ref, rtol=RTOL, atol=ATOL)


def test_a_symbolic_image_size_is_a_clear_error_for_cuda_convolutions(cuda_target):
    model = onnx_models._model(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
        [onnx_models._vi("x", [1, 3, "h", "w_"])], [onnx_models._vi("y", [1, 4, "h", "w_"])],
        [_w(np.random.default_rng(0), "w", 4, 3, 3, 3)])
    with pytest.raises(GraphBuildError, match="only the batch may be symbolic"):
        _build(model)


@pytest.mark.gpu
def test_pytorch_tensors_in_place_and_out(gpu, cnn_lib, rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 3, 6, 6)).astype("float32")
    ref, = onnx_models.run_onnxruntime(tiny_cnn(), {"x": x})
    y, = DeviceGraphModule(cnn_lib, device_outputs=True)(x=torch.from_numpy(x).cuda())
    np.testing.assert_allclose(torch.as_tensor(y, device="cuda").cpu().numpy(), ref,
                               rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_16_bit_model_runs_its_products_on_tensor_cores(dtype, cuda_target, rng):
    """MatMul -> Add -> Relu -> MatMul in float16 or bfloat16 with sizes in multiples of
    16: both products on wmma fragments, summed in float32 as numpy's reference is."""
    import ml_dtypes
    from onnx import TensorProto

    np_type = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    proto = TensorProto.FLOAT16 if dtype == "float16" else TensorProto.BFLOAT16
    w0 = (rng.standard_normal((64, 32)) * 0.2).astype(np_type)
    b0 = (rng.standard_normal(32) * 0.2).astype(np_type)
    w1 = (rng.standard_normal((32, 16)) * 0.2).astype(np_type)
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"]),
             helper.make_node("Add", ["h", "b0"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("MatMul", ["r", "w1"], ["y"])]
    graph = helper.make_graph(
        nodes, "half_mlp", [helper.make_tensor_value_info("x", proto, [32, 64])],
        [helper.make_tensor_value_info("y", proto, [32, 16])],
        [numpy_helper.from_array(a, n) for a, n in ((w0, "w0"), (b0, "b0"), (w1, "w1"))])
    lib = _build(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert lib.module.get_source("cuda").count("wmma.mma.sync") == 2
    x = (rng.standard_normal((32, 64)) * 0.5).astype(np_type)
    h = (x.astype("float32") @ w0.astype("float32")).astype(np_type).astype("float32")
    h = np.maximum((h + b0.astype("float32")).astype(np_type).astype("float32"), 0)
    ref = h @ w1.astype("float32")
    y, = DeviceGraphModule(lib)(x=x)
    assert y.dtype == np_type
    tol = 1e-2 if dtype == "float16" else 5e-2
    np.testing.assert_allclose(y.astype("float32"), ref, rtol=tol, atol=tol)


def test_a_float16_convolution_runs_as_an_implicit_gemm(cuda_target, rng):
    """Conv (bias) -> Relu in float16 on CUDA: one kernel, the convolution a product on
    tensor cores whose columns are gathered from the padded input, against onnxruntime
    on the same model in float32."""
    from onnx import TensorProto

    def model(dtype, proto):
        w = numpy_helper.from_array(weight.astype(dtype), "w")
        b = numpy_helper.from_array(bias.astype(dtype), "b")
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1],
                                  strides=[2, 2]),
                 helper.make_node("Relu", ["c"], ["y"])]
        graph = helper.make_graph(
            nodes, "half_conv", [helper.make_tensor_value_info("x", proto, [1, 4, 9, 9])],
            [helper.make_tensor_value_info("y", proto, [1, 16, 5, 5])], [w, b])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    weight = (rng.standard_normal((16, 4, 3, 3)) * 0.3).astype("float16")
    bias = (rng.standard_normal(16) * 0.3).astype("float16")
    lib = _build(model("float16", TensorProto.FLOAT16))
    assert len(lib.kernels) == 1 and "wmma.mma.sync" in lib.module.get_source("cuda")
    x = rng.standard_normal((1, 4, 9, 9)).astype("float16")
    ref, = onnx_models.run_onnxruntime(model("float32", TensorProto.FLOAT),
                                       {"x": x.astype("float32")})
    y, = DeviceGraphModule(lib)(x=x)
    np.testing.assert_allclose(y.astype("float32"), ref, rtol=1e-2, atol=1e-2)


def test_the_tf32_precision_multiplies_float32_products_on_tensor_cores(cuda_target, rng):
    """A float32 MatMul -> Relu -> Gemm built with precision="tf32": both products on TF32
    tensor cores, within TF32's rounding of onnxruntime's float32 result; a CPU target
    is refused, naming the precision."""
    w0 = numpy_helper.from_array((rng.standard_normal((32, 16)) * 0.2).astype("float32"), "w0")
    w1 = numpy_helper.from_array((rng.standard_normal((16, 16)) * 0.2).astype("float32"), "w1")
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w1"], ["y"], transB=1)]
    model = onnx_models._model(nodes, [onnx_models._vi("x", [16, 32])],
                               [onnx_models._vi("y", [16, 16])], [w0, w1])
    lib = _build(model, precision="tf32")
    assert lib.module.get_source("cuda").count("m16n16k8.f32.tf32.tf32.f32") >= 2
    x = rng.standard_normal((16, 32)).astype("float32")
    ref, = onnx_models.run_onnxruntime(model, {"x": x})
    y, = DeviceGraphModule(lib)(x=x)
    np.testing.assert_allclose(y, ref, rtol=1e-2, atol=1e-2)
    mod, params = from_onnx(model)
    with pytest.raises(tecomp.errors.TargetError, match=r"precision='tf32' multiplies on "
                                                        r"NVIDIA tensor cores"):
        build(mod, target="llvm", params=params, precision="tf32")


def test_attention_is_one_kernel_without_the_score_matrix(cuda_target, rng):
    """The scores' product, scale, mask, softmax and the product with the values are one
    attention kernel (a key tile's scores in shared memory only), matching onnxruntime,
    with the sizes fixed and, in one build, a symbolic batch and sequence (each
    sequence's padding mask shared by its heads)."""
    model = onnx_models.attention_block(hidden=8, heads=2)
    mod, params = from_onnx(model, shape={"x": (1, 6, 8), "mask": (1, 6)})
    fixed, symbolic = build(mod, target="cuda", params=params), _build(model)
    for lib, shapes in ((fixed, [(1, 6)]), (symbolic, [(2, 3), (2, 40)])):
        assert [k.ops for k in lib.kernels].count(("attention",)) == 1
        assert not any("softmax" in k.ops for k in lib.kernels)
        gm = DeviceGraphModule(lib)
        for batch, seq in shapes:
            feeds = {"x": rng.standard_normal((batch, seq, 8)).astype("float32"),
                     "mask": np.ones((batch, seq), "float32")}
            feeds["mask"][0, -2:] = 0
            ref, = onnx_models.run_onnxruntime(model, feeds)
            np.testing.assert_allclose(gm(**feeds)[0], ref, rtol=RTOL, atol=ATOL)


def test_inputs_read_through_views_keep_their_memory(cuda_target, rng):
    """A 4-D attention as torch exports it: its inputs are read through reshapes (views,
    no kernels) before the first kernel. The device plan keeps every input's bytes for
    the whole run (a lifetime counted in kernels instead of nodes let the first kernel's
    output overwrite them); the chain is one attention kernel, equal to onnxruntime."""
    model = onnx_models.attention_4d()
    lib = _build(model)
    assert ("attention",) in [k.ops for k in lib.kernels]
    feeds = {n: rng.standard_normal(s).astype("float32")
             for n, s in onnx_models.ATTENTION_4D_SHAPES.items()}
    ref, = onnx_models.run_onnxruntime(model, feeds)
    np.testing.assert_allclose(DeviceGraphModule(lib)(**feeds)[0], ref, rtol=RTOL, atol=ATOL)


def test_a_decoder_built_for_one_token_splits_its_attention_over_the_past(cuda_target):
    """The exported GPT-2 built for steps of one token (the query length fixed, the past
    left symbolic under a name): each attention's keys are split into parts, folded by a
    second kernel; a step after a prompt matches onnxruntime."""
    model = onnx_models.load_test_model("gpt2_past")
    names = [i.name for i in model.graph.input if i.name.startswith("past.")]
    shape = {"input_ids": (1, 1), "attention_mask": (1, "total"),
             **{n: (1, 4, "past", 8) for n in names}}
    mod, params = from_onnx(model, shape=shape)
    lib = build(mod, target="cuda", params=params)
    assert ("attention",) in [k.ops for k in lib.kernels]
    assert "online_part" in lib.module.get_source("cuda")  # the parts' triples
    gm = DeviceGraphModule(lib)
    feeds = {"input_ids": np.array([[5, 17, 3]]), "attention_mask": np.ones((1, 3), "int64"),
             **{n: np.zeros((1, 4, 0, 8), "float32") for n in names}}
    out = onnx_models.run_onnxruntime(model, feeds)
    past, ids = out[1:], out[0][:, -1:].argmax(-1).astype("int64")
    feeds = {"input_ids": ids, "attention_mask": np.ones((1, 4), "int64"),
             **dict(zip(names, past))}
    for got, ref in zip(gm(**feeds), onnx_models.run_onnxruntime(model, feeds)):
        np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)


def test_an_exported_decoder_with_a_growing_past_runs_on_one_build(cuda_target, rng):
    """GPT-2 as the TorchScript exporter writes it (symbolic batch, sequence and past; its
    causal mask per batch, shared by the heads): every layer's attention is one fused
    kernel, the sizes read from shapes are kernels of one element, and a prompt then a
    step of one token match onnxruntime on one build."""
    model = onnx_models.load_test_model("gpt2_past")
    lib = _build(model)
    assert not any("softmax" in k.ops for k in lib.kernels)
    gm = DeviceGraphModule(lib)
    names = [i.name for i in model.graph.input if i.name.startswith("past.")]
    past = [np.zeros((1, 4, 0, 8), "float32") for _ in names]
    ids = rng.integers(0, 100, (1, 3)).astype("int64")
    for _ in range(2):
        total = past[0].shape[2] + ids.shape[1]
        feeds = {"input_ids": ids, "attention_mask": np.ones((1, total), "int64"),
                 **dict(zip(names, past))}
        want = onnx_models.run_onnxruntime(model, feeds)
        for got, ref in zip(gm(**feeds), want):
            np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)
        past, ids = want[1:], want[0][:, -1:].argmax(-1).astype("int64")
