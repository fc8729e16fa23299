"""The channel-blocked layout pass: which nodes follow a convolution into NCHW{b}c, where
the layout transforms go, and that the built models still match onnxruntime."""

from functools import partial

import numpy as np
import onnx
import onnx_models
import pytest
from onnx import TensorProto, helper, numpy_helper

from tecomp import Target
from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.graph.passes import PIPELINE, alter_conv_layout, optimize
from tecomp.graph.passes.alter_layout import graph_layers
from tecomp.graph.passes.layout_choice import PLANAR
from tecomp.testing import models

RTOL, ATOL = 1e-3, 1e-4


def _cnn(extra_outputs=(), planar_add=False, image=(12, 12)):
    """x[N, 16, 12, 12] -> conv 3x3 + bias -> relu -> conv 1x1 -> + relu output -> relu ->
    max pool 2x2 -> conv 3x3 -> sigmoid * 0.5 -> global average pool -> flatten -> gemm.
    ``planar_add`` adds a [1, 32, 12, 12] constant (not per channel) after the first
    ReLU; ``image`` is the height and width (names for symbolic ones)."""
    rng = np.random.default_rng(0)

    def const(name, *shape):
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype("float32"), name)

    inits = [const("w1", 32, 16, 3, 3), const("b1", 32), const("w2", 32, 32, 1, 1),
             const("w3", 16, 32, 3, 3), const("fc", 16, 10), const("fb", 10),
             numpy_helper.from_array(np.array(0.5, "float32"), "half"),
             const("plane", 1, 32, 12, 12)]
    h = "r1"
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"])]
    if planar_add:
        nodes.append(helper.make_node("Add", ["r1", "plane"], ["r1p"]))
        h = "r1p"
    nodes += [helper.make_node("Conv", [h, "w2"], ["c2"]),
              helper.make_node("Add", ["c2", h], ["s2"]),
              helper.make_node("Relu", ["s2"], ["r2"]),
              helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
              helper.make_node("Conv", ["p2", "w3"], ["c3"], pads=[1, 1, 1, 1]),
              helper.make_node("Sigmoid", ["c3"], ["g3"]),
              helper.make_node("Mul", ["g3", "half"], ["m3"]),
              helper.make_node("GlobalAveragePool", ["m3"], ["gap"]),
              helper.make_node("Flatten", ["gap"], ["flat"]),
              helper.make_node("Gemm", ["flat", "fc", "fb"], ["y"])]
    vi = helper.make_tensor_value_info
    outputs = [vi("y", TensorProto.FLOAT, None)] + [vi(o, TensorProto.FLOAT, None)
                                                    for o in extra_outputs]
    graph = helper.make_graph(nodes, "cnn", [vi("x", TensorProto.FLOAT, ["N", 16, *image])],
                              outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _blocked_graph(model, block):
    """The graph after the pipeline up to fusion, with the layout pass (``block``
    channels) where the pipeline for a CPU target runs it."""
    mod, _ = from_onnx(model)
    names = [name for name, _ in PIPELINE]
    at, fusion = names.index("sink_reshapes") + 1, names.index("fuse_operators")
    layout = partial(alter_conv_layout, block=block)
    passes = [*PIPELINE[:at], ("alter", layout), *PIPELINE[at:fusion]]
    return optimize(mod, passes=passes)


def _ops(graph):
    return [n.op for n in graph.nodes]


def test_a_cnn_pays_one_transform_in_and_one_out():
    graph = _blocked_graph(_cnn(), block=8)
    ops = _ops(graph)
    assert ops.count("conv2d_nchwc") == 3 and "conv2d" not in ops
    assert "max_pool3d" in ops and "max_pool2d" not in ops
    assert "reduce_mean" in ops and "global_avg_pool" not in ops
    # x blocked once; the pooled features made planar once, for the classifier.
    assert ops.count("transpose") == 2
    pool = next(n for n in graph.nodes if n.op == "max_pool3d")
    assert pool.attrs["kernel"] == (2, 2, 1) and pool.attrs["strides"] == (2, 2, 1)
    conv = next(n for n in graph.nodes if n.op == "conv2d_nchwc")
    assert graph.types[conv.inputs[0]].shape[1:] == (2, 12, 12, 8)
    # The bias became a blocked per-channel constant.
    adds = [n for n in graph.nodes if n.op == "add" and len(graph.types[n.outputs[0]].shape) == 5
            and any(i in graph.consts for i in n.inputs)]
    assert {graph.consts[i].shape for n in adds for i in n.inputs if i in graph.consts} == {
        (1, 4, 1, 1, 8)}


def test_a_layer_the_block_does_not_divide_takes_its_half_or_stays_planar():
    """16 and 32 channels: with a block of 32 lanes every convolution takes its half,
    16, which divides its channels; with 64 lanes none may go below 32: the first layer
    reads its 16 channels planar and writes blocks of 32, the last, writing 16, stays
    planar."""
    def blocks(block):
        return {n.inputs[1]: (n.attrs["block"], n.inputs[0])
                for n in _blocked_graph(_cnn(), block=block).nodes if n.op == "conv2d_nchwc"}

    assert {w: b for w, (b, _) in blocks(32).items()} == {"w1": 16, "w2": 16, "w3": 16}
    wide = blocks(64)
    assert wide.keys() == {"w1", "w2"} and wide["w1"] == (32, "x") and wide["w2"][0] == 32


def test_a_graph_with_a_depthwise_convolution_stays_planar_where_its_kernel_is_tuned(
        monkeypatch):
    """Blocked by default (depthwise_conv2d_nchwc); planar when asked, or when tuning
    records apply to the planar depthwise kernel (the tuned kernel is kept)."""
    from tecomp.graph.passes import alter_layout

    model = _cnn()
    w = numpy_helper.from_array(np.ones((32, 1, 3, 3), "float32"), "wd")
    model.graph.initializer.append(w)
    model.graph.node.insert(2, helper.make_node("Conv", ["r1", "wd"], ["d1"], group=32,
                                                pads=[1, 1, 1, 1]))
    for node in model.graph.node[3:]:
        node.input[:] = ["d1" if i == "r1" else i for i in node.input]
    mod, _ = from_onnx(model)
    through = [name for name, _ in PIPELINE].index("sink_reshapes") + 1
    graph = optimize(mod, passes=PIPELINE[:through])
    assert "depthwise_conv2d" in _ops(graph)
    assert "depthwise_conv2d_nchwc" in _ops(alter_conv_layout(graph, 8))
    assert alter_conv_layout(graph, 8, blocked_depthwise=False) is graph
    monkeypatch.setattr(alter_layout, "has_tuned_record",
                        lambda name, args, target: name == "depthwise_conv2d")
    assert alter_conv_layout(graph, 8) is graph


def test_blocked_models_match_onnxruntime_from_one_build(needs_llvm):
    """Batch 1 and 3 from one build; a convolution's output that is also a graph output
    and a constant that is not per channel get the planar form."""
    rng = np.random.default_rng(5)
    for model in (_cnn(), _cnn(extra_outputs=("c2",), planar_add=True)):
        mod, params = from_onnx(model)
        lib = build(mod, params=params)
        assert any("conv2d_nchwc" in k.ops for k in lib.kernels)
        gm = GraphModule(lib)
        for batch in (1, 3):
            x = rng.uniform(-1, 1, (batch, 16, 12, 12)).astype("float32")
            got = gm(x=x)
            want = onnx_models.run_onnxruntime(model, {"x": x})
            assert len(got) == len(want)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


def test_a_cnn_over_a_symbolic_image_is_blocked_and_serves_every_size(needs_llvm):
    """Height and width symbolic: the same blocked layers and transforms as for a fixed
    image, and one build matches onnxruntime at sizes no tile divides (1x1 and padded
    3x3 convolutions over rows computed in whole tiles, a pool over an odd plane)."""
    model = _cnn(image=("H", "W"))
    ops = _ops(_blocked_graph(model, block=8))
    assert ops.count("conv2d_nchwc") == 3 and "conv2d" not in ops
    assert "max_pool3d" in ops and ops.count("transpose") == 2
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, params=params))
    rng = np.random.default_rng(6)
    for batch, (h, w) in zip((1, 2, 1), ((12, 12), (9, 21), (4, 5))):
        x = rng.uniform(-1, 1, (batch, 16, h, w)).astype("float32")
        got, = gm(x=x)
        want, = onnx_models.run_onnxruntime(model, {"x": x})
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def _image_stem(image, second=True):
    """x[N, 3, *image] -> conv 3x3 stride 2 + bias -> relu -> conv 3x3 (unless not
    ``second``) -> relu -> global average pool: a first layer of an image's 3 channels."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype("float32"), name)
             for name, shape in (("w1", (16, 3, 3, 3)), ("b1", (16,)), ("w2", (16, 16, 3, 3)))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1],
                              strides=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2" if second else "r1"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["y"])]
    if not second:
        del nodes[2], inits[2]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "stem", [vi("x", TensorProto.FLOAT, ["N", 3, *image])],
                              [vi("y", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("image", [(13, 10), ("H", "W")])
def test_a_first_layer_reads_the_image_planar_and_writes_blocks(needs_llvm, image):
    """The image's 3 channels are read planar by the first blocked convolution: the one
    transform left is the pooled features' back to planar. One build (for a symbolic
    image, every size) matches onnxruntime."""
    model = _image_stem(image)
    graph = _blocked_graph(model, block=8)
    first, second = (n for n in graph.nodes if n.op == "conv2d_nchwc")
    assert first.inputs[0] == "x" and graph.types[second.inputs[0]].shape[4] == 8
    assert _ops(graph).count("transpose") == 1
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, params=params))
    rng = np.random.default_rng(2)
    sizes = [image] if isinstance(image[0], int) else [(13, 10), (7, 21), (1, 2)]
    for batch, (h, w) in zip((1, 2, 1), sizes):
        x = rng.uniform(-1, 1, (batch, 3, h, w)).astype("float32")
        got, = gm(x=x)
        want, = onnx_models.run_onnxruntime(model, {"x": x})
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_a_first_layer_alone_stays_planar():
    """With no blocked layer after it, blocking the first layer would only add a
    transform back: it stays a planar convolution."""
    ops = _ops(_blocked_graph(_image_stem((8, 8), second=False), block=8))
    assert "conv2d" in ops and "conv2d_nchwc" not in ops and "transpose" not in ops


def test_planar_forms_go_where_a_reader_needs_them():
    graph = _blocked_graph(_cnn(extra_outputs=("c2",), planar_add=True), block=8)
    ops = _ops(graph)
    assert ops.count("conv2d_nchwc") == 3
    # c2 (a graph output) and r1 (read by the add of a whole-plane constant) come back
    # planar, r1p goes blocked again for the next convolution, the features for the
    # classifier: 4 transposes besides blocking x.
    assert ops.count("transpose") == 5
    assert graph.types["c2"].shape[1:] == (32, 12, 12)


def test_the_pass_runs_for_cpu_targets_with_their_vector_width():
    from tecomp.graph.passes import pipeline_for
    from tecomp.target import Target

    assert "alter_conv_layout" not in dict(pipeline_for(Target("cuda")))
    names = [name for name, _ in pipeline_for(Target("llvm -mcpu=skylake-avx512"))]
    assert names.index("alter_conv_layout") == names.index("sink_reshapes") + 1
    layout = dict(pipeline_for(Target("llvm -mcpu=haswell")))["alter_conv_layout"]
    assert layout.keywords["block"] == 8


def test_an_expand_and_a_batch_norm_stay_planar():
    """Broadcasting operators with a shape in their attributes, or [C] vectors along
    axis 1, do not follow a blocked input; the graph still matches onnxruntime."""
    rng = np.random.default_rng(6)
    w = numpy_helper.from_array(rng.uniform(-0.5, 0.5, (16, 16, 1, 1)).astype("float32"), "w")
    stats = [numpy_helper.from_array(rng.uniform(0.5, 1.5, 16).astype("float32"), n)
             for n in ("scale", "bias", "mean", "var")]
    shape = numpy_helper.from_array(np.array([2, 16, 4, 4], "int64"), "shape")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Expand", ["c", "shape"], ["e"]),
             helper.make_node("BatchNormalization", ["e", "scale", "bias", "mean", "var"],
                              ["y"])]
    vi = helper.make_tensor_value_info
    model = helper.make_model(
        helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [1, 16, 4, 4])],
                          [vi("y", TensorProto.FLOAT, None)], [w, *stats, shape]),
        opset_imports=[helper.make_opsetid("", 13)])
    graph = _blocked_graph(model, block=8)
    assert "conv2d_nchwc" in _ops(graph)
    expand = next(n for n in graph.nodes if n.op == "expand")
    assert len(graph.types[expand.inputs[0]].shape) == 4
    x = rng.uniform(-1, 1, (1, 16, 4, 4)).astype("float32")
    mod, params = from_onnx(model)
    got, = GraphModule(build(mod, params=params))(x=x)
    np.testing.assert_allclose(got, onnx_models.run_onnxruntime(model, {"x": x})[0],
                               rtol=RTOL, atol=ATOL)


def _dense_block():
    """DenseNet's first layers: x[1, 16, 8, 8] -> max pool 3x3 / 1 (planar: its input is
    the graph's) -> relu -> conv 1x1 (16) -> concat with the pool's output (32) -> relu
    -> conv 1x1 (16) -> concat with the first concat (48) -> conv 1x1 (16)."""
    rng = np.random.default_rng(2)

    def weight(name, cout, cin):
        return numpy_helper.from_array(
            rng.uniform(-0.5, 0.5, (cout, cin, 1, 1)).astype("float32"), name)

    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", ["p"], ["r1"]),
             helper.make_node("Conv", ["r1", "w1"], ["c1"]),
             helper.make_node("Concat", ["p", "c1"], ["f1"], axis=1),
             helper.make_node("Relu", ["f1"], ["r2"]),
             helper.make_node("Conv", ["r2", "w2"], ["c2"]),
             helper.make_node("Concat", ["f1", "c2"], ["f2"], axis=1),
             helper.make_node("Conv", ["f2", "w3"], ["y"])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "dense_block", [vi("x", TensorProto.FLOAT, [1, 16, 8, 8])],
        [vi("y", TensorProto.FLOAT, [1, 16, 8, 8])],
        initializer=[weight("w1", 16, 16), weight("w2", 16, 32), weight("w3", 16, 48)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_a_concatenation_blocks_its_planar_input_once(needs_llvm):
    graph = _blocked_graph(_dense_block(), block=16)
    concats = [n for n in graph.nodes if n.op == "concat"]
    assert len(concats) == 2 and all(len(graph.types[n.outputs[0]].shape) == 5
                                     for n in concats)
    # r1 blocked for the first conv, the pool's output p for the first concatenation,
    # and y back to planar; neither concatenation is (with p left planar, each
    # concatenation's parts went back and forth).
    transformed = [n.inputs[0] for n in graph.nodes if n.op == "transpose"]
    assert transformed == ["r1.split16c", "p.split16c", "y.nchw16c"]
    model = _dense_block()
    mod, params = from_onnx(model)
    lib = build(mod, params=params)
    # The second concatenation, of blocked parts, is computed in place.
    views = [n for n in lib.graph.nodes if n.op == "concat_view"]
    block = Target("llvm").vector_width_bits // 32
    assert [(n.outputs[0], n.attrs["offsets"]) for n in views] == [
        (f"f2.nchw{block}c", (0, 8192))]
    x = np.random.default_rng(3).uniform(-1, 1, (1, 16, 8, 8)).astype("float32")
    got, = GraphModule(lib)(x=x)
    np.testing.assert_allclose(got, onnx_models.run_onnxruntime(model, {"x": x})[0],
                               rtol=RTOL, atol=ATOL)


# ---- a block per layer ---------------------------------------------------------------------


def _up_to_layout(model):
    """The graph the layout pass receives in the pipeline."""
    mod, _ = from_onnx(model)
    through = [name for name, _ in PIPELINE].index("sink_reshapes") + 1
    return optimize(mod, passes=PIPELINE[:through])


def _with_layout(monkeypatch, **layout):
    """Make :func:`tecomp.graph.build` run the layout pass with ``layout``'s options."""
    import sys

    graph_build = sys.modules["tecomp.graph.build"]
    default = graph_build.pipeline_for

    def pipeline_for(target):
        return tuple((name, partial(fn, **layout)) if name == "alter_conv_layout"
                     else (name, fn) for name, fn in default(target))

    monkeypatch.setattr(graph_build, "pipeline_for", pipeline_for)


def test_layers_forced_to_different_blocks_match_onnxruntime(needs_llvm, monkeypatch):
    """Blocks 8, 4 and 8 for the three convolutions: the transforms between them and the
    residual add of values blocked by 4 and 8 (re-blocked to its first input's 4); built
    for this machine with its block and its half."""
    from tecomp.topi.cpu_tiling import channel_block, current_caps

    graph = _up_to_layout(_cnn())
    layer = {n.inputs[1]: n.outputs[0] for n in graph.nodes if n.op == "conv2d"}
    blocks = {layer["w1"]: 8, layer["w2"]: 4, layer["w3"]: 8}
    altered = alter_conv_layout(graph, 8, layer_blocks=blocks)
    assert {n.inputs[1]: n.attrs["block"] for n in altered.nodes
            if n.op == "conv2d_nchwc"} == {"w1": 8, "w2": 4, "w3": 8}
    host = channel_block(current_caps())
    _with_layout(monkeypatch, layer_blocks={
        layer["w1"]: host, layer["w2"]: host // 2, layer["w3"]: host})
    model = _cnn()
    mod, params = from_onnx(model)
    lib = build(mod, params=params)
    x = np.random.default_rng(7).uniform(-1, 1, (2, 16, 12, 12)).astype("float32")
    got, = GraphModule(lib)(x=x)
    np.testing.assert_allclose(got, onnx_models.run_onnxruntime(model, {"x": x})[0],
                               rtol=RTOL, atol=ATOL)


def _padded_layers(block):
    """x[N, 2 block, 10, 10] -> two convolutions to 8.5 blocks of channels (3x3 and 1x1,
    with biases) -> relu of the first -> their sum / a per-channel constant (output s);
    max pool 2x2 -> global average pool of the first (output g); a 1x1 convolution of the
    sum back to ``block`` channels (output y)."""
    rng = np.random.default_rng(3)
    k = 8 * block + block // 2

    def const(name, *shape, low=-0.5):
        return numpy_helper.from_array(rng.uniform(low, 0.5, shape).astype("float32"), name)

    inits = [const("w1", k, 2 * block, 3, 3), const("b1", k), const("w2", k, 2 * block, 1, 1),
             const("b2", k), const("scale", k, 1, 1, low=0.25), const("w3", block, k, 1, 1)]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["x", "w2", "b2"], ["c2"]),
             helper.make_node("Add", ["r1", "c2"], ["a"]),
             helper.make_node("Div", ["a", "scale"], ["s"]),
             helper.make_node("MaxPool", ["r1"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"]),
             helper.make_node("Conv", ["s", "w3"], ["y"])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "padded",
                              [vi("x", TensorProto.FLOAT, ["N", 2 * block, 10, 10])],
                              [vi(o, TensorProto.FLOAT, None) for o in ("s", "g", "y")],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_output_channels_the_vector_does_not_divide_are_computed_padded():
    """136 output channels in blocks of 16 (9 blocks, 144 computed) rather than blocks of
    8: the bias, relu, residual add, per-channel division and pools follow on the padded
    blocks; the planar forms drop the padding; the 1x1 convolution reading 136 channels,
    which only half a vector divides, stays planar: in the model a block of 8 computes at
    half the speed and pays a transform through the planar form, which the planar kernel
    reads as it is."""
    graph = _blocked_graph(_padded_layers(16), block=16)
    convs = {n.inputs[1].split(".")[0]: n for n in graph.nodes if n.op == "conv2d_nchwc"}
    assert {w: n.attrs["block"] for w, n in convs.items()} == {"w1": 16, "w2": 16}
    assert [n.inputs[1] for n in graph.nodes if n.op == "conv2d"] == ["w3"]
    for w in ("w1", "w2"):
        assert graph.consts[convs[w].inputs[1]].shape[0] == 144
        assert not graph.consts[convs[w].inputs[1]][136:].any()
        assert graph.types[convs[w].outputs[0]].shape[1:] == (9, 10, 10, 16)
    five_d = {n.op for n in graph.nodes if len(graph.types[n.outputs[0]].shape) == 5}
    assert {"add", "relu", "divide", "max_pool3d", "reduce_mean"} <= five_d
    # Per-channel constants fill the last block with the last channel's value.
    scale = next(graph.consts[i] for n in graph.nodes if n.op == "divide" for i in n.inputs
                 if i in graph.consts)
    assert scale.shape == (1, 9, 1, 1, 16) and (scale[0, 8, 0, 0, 8:] == scale[0, 8, 0, 0, 7]
                                                ).all()
    slices = [n for n in graph.nodes if n.op == "slice"]
    assert slices and all(graph.types[n.outputs[0]].shape[1] == 136 for n in slices)


def test_padded_layers_match_onnxruntime(needs_llvm):
    """The same net for this machine's vector (8.5 of its blocks of output channels),
    batch 1 and 2 from one build."""
    from tecomp.topi.cpu_tiling import channel_block, current_caps

    model = _padded_layers(channel_block(current_caps()))
    mod, params = from_onnx(model)
    lib = build(mod, params=params)
    gm = GraphModule(lib)
    rng = np.random.default_rng(8)
    for batch in (1, 2):
        x = rng.uniform(-1, 1, (batch, model.graph.input[0].type.tensor_type.shape.dim[1]
                                .dim_value, 10, 10)).astype("float32")
        for got, want in zip(gm(x=x), onnx_models.run_onnxruntime(model, {"x": x})):
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_a_forced_block_must_be_one_of_the_layers_candidates():
    graph = _up_to_layout(_cnn())
    with pytest.raises(ValueError, match=r"'c2' takes blocks \(8, 4\)"):
        alter_conv_layout(graph, 8, layer_blocks={"c2": 16})
    with pytest.raises(ValueError, match="'r1' is not a layer"):
        alter_conv_layout(graph, 8, layer_blocks={"r1": 8})


def test_a_layer_only_half_a_vector_divides_may_be_forced_planar():
    """With 64 lanes the convolutions of 32 channels take half a vector or stay planar:
    the second forced planar (0) reads the planar form of the first's blocks; the third,
    of 16 channels, is planar anyway."""
    graph = _up_to_layout(_cnn())
    layer = {n.inputs[1]: n.outputs[0] for n in graph.nodes if n.op == "conv2d"}
    altered = alter_conv_layout(graph, 64, layer_blocks={layer["w1"]: 32,
                                                         layer["w2"]: PLANAR})
    assert [n.inputs[1] for n in altered.nodes if n.op == "conv2d"] == ["w2", "w3"]
    assert {n.inputs[1]: n.attrs["block"] for n in altered.nodes
            if n.op == "conv2d_nchwc"} == {"w1": 32}


@pytest.mark.parametrize("name", ["resnet", "light_resnet50"])
def test_the_untuned_choice_is_one_block_for_the_whole_graph(name, monkeypatch):
    """Without records every layer of a ResNet takes the one vector block, so the graph
    is the one the pass made before blocks were chosen per layer."""
    from tecomp.autotune import records

    monkeypatch.setitem(records._SHIPPED, "enabled", False)
    model = (models.resnet() if name == "resnet"
             else onnx.load(models.light_model_path("resnet50")))
    graph = _up_to_layout(model)
    for target in ("llvm -mcpu=skylake-avx512", "llvm -mcpu=haswell"):
        block = Target(target).vector_width_bits // 32
        layers = graph_layers(graph, block)
        assert len(layers) >= 19 and all(layer.blocks[0] == block for layer in layers)
        one_block = {layer.name: block for layer in layers}
        chosen = alter_conv_layout(graph, block, target=target)
        assert str(chosen) == str(alter_conv_layout(graph, block, target=target,
                                                    layer_blocks=one_block))
        assert {n.attrs["block"] for n in chosen.nodes if n.op == "conv2d_nchwc"} == {block}


# ---- depthwise convolutions blocked ---------------------------------------------------------


def _se_block(pool="GlobalAveragePool", squeeze=8, scale_first=False):
    """An EfficientNet-style block at 8x8: 1x1 expand 16->32 + SiLU, 3x3 depthwise stride 1
    + SiLU, squeeze-excite (``pool``: a global pool, or a ReduceMean over the height and
    width as torch exports it; 1x1 32->``squeeze`` + SiLU, 1x1 ``squeeze``->32, sigmoid,
    multiply, the scale its first operand with ``scale_first`` as torchvision writes it),
    1x1 project 32->16, residual add."""
    rng = np.random.default_rng(11)

    def w(name, *shape):
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype("float32"), name)

    def silu(x, y):
        return [helper.make_node("Sigmoid", [x], [f"{y}.s"]),
                helper.make_node("Mul", [x, f"{y}.s"], [y])]

    nodes = [helper.make_node("Conv", ["x", "we", "be"], ["e"]), *silu("e", "ea"),
             helper.make_node("Conv", ["ea", "wd"], ["d"], group=32, pads=[1, 1, 1, 1]),
             *silu("d", "da"),
             helper.make_node(pool, ["da"], ["g"], **(
                 {"axes": [2, 3], "keepdims": 1} if pool == "ReduceMean" else {})),
             helper.make_node("Conv", ["g", "wr", "br"], ["r"]), *silu("r", "ra"),
             helper.make_node("Conv", ["ra", "wx", "bx"], ["xe"]),
             helper.make_node("Sigmoid", ["xe"], ["gate"]),
             helper.make_node("Mul", ["gate", "da"] if scale_first else ["da", "gate"],
                              ["scaled"]),
             helper.make_node("Conv", ["scaled", "wp"], ["p"]),
             helper.make_node("Add", ["p", "x"], ["y"])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "se_block", [vi("x", TensorProto.FLOAT, ["N", 16, 8, 8])],
        [vi("y", TensorProto.FLOAT, None)],
        initializer=[w("we", 32, 16, 1, 1), w("be", 32), w("wd", 32, 1, 3, 3),
                     w("wr", squeeze, 32, 1, 1), w("br", squeeze),
                     w("wx", 32, squeeze, 1, 1), w("bx", 32),
                     w("wp", 16, 32, 1, 1)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_an_se_block_stays_blocked_end_to_end(needs_llvm, monkeypatch):
    """The depthwise convolution, the squeeze-excite's pool, convolutions and multiply and
    the residual add all blocked: one transform in, one out."""
    graph = alter_conv_layout(_up_to_layout(_se_block()), 8, blocked_depthwise=True)
    graph = optimize(graph, passes=PIPELINE[[n for n, _ in PIPELINE].index(
        "sink_reshapes") + 1:[n for n, _ in PIPELINE].index("fuse_operators")])
    ops = _ops(graph)
    assert ops.count("depthwise_conv2d_nchwc") == 1 and "depthwise_conv2d" not in ops
    assert ops.count("conv2d_nchwc") == 4 and ops.count("transpose") == 2
    _with_layout(monkeypatch, blocked_depthwise=True)
    model = _se_block()
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, params=params))
    x = np.random.default_rng(12).uniform(-1, 1, (2, 16, 8, 8)).astype("float32")
    np.testing.assert_allclose(gm(x=x)[0], onnx_models.run_onnxruntime(model, {"x": x})[0],
                               rtol=RTOL, atol=ATOL)


def test_an_se_block_of_a_spatial_mean_and_planar_convolutions_stays_blocked(
        needs_llvm):
    """torch's squeeze-excite: a ReduceMean over the height and width follows the blocked
    layout; its convolutions of 4 channels stay planar (no block of at least 8 divides
    them), and the multiply reads their [N, 32, 1, 1] scale blocked, so the activations
    stay blocked from the expansion to the residual add."""
    graph = _blocked_graph(_se_block(pool="ReduceMean", squeeze=4), block=16)
    rank = {n.op: len(graph.types[n.outputs[0]].shape) for n in graph.nodes}
    assert rank["reduce_mean"] == 5 and rank["multiply"] == 5 and rank["add"] == 5
    assert rank["conv2d"] == 4 and rank["depthwise_conv2d_nchwc"] == 5
    big = [n for n in graph.nodes if n.op == "transpose"
           and np.prod(graph.types[n.outputs[0]].shape[1:]) > 32]
    assert len(big) == 2  # the input blocked, the output made planar
    model = _se_block(pool="ReduceMean", squeeze=4)
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, params=params))
    x = np.random.default_rng(13).uniform(-1, 1, (2, 16, 8, 8)).astype("float32")
    np.testing.assert_allclose(gm(x=x)[0], onnx_models.run_onnxruntime(model, {"x": x})[0],
                               rtol=RTOL, atol=ATOL)


def test_a_layer_after_a_squeeze_excite_scale_descends_from_the_activation():
    """Whichever operand of the multiply is the [N, 32, 1, 1] scale, the project
    convolution's parent is the depthwise convolution whose activation it reads (the
    tensor a transform would move), not the squeeze-excite's convolution."""
    for scale_first in (False, True):
        graph = _up_to_layout(_se_block(scale_first=scale_first))
        producer = {n.outputs[0]: n for n in graph.nodes}
        layers = {producer[layer.name].inputs[1]: layer
                  for layer in graph_layers(graph, 8)}
        assert producer[layers["wp"].parent].inputs[1] == "wd"


def test_mobilenet_v2_built_blocked_matches_onnxruntime(needs_llvm, monkeypatch):
    """Every convolution of a MobileNetV2 (width 0.5, 64x64) blocked: the depthwise ones
    by the blocked kernel, none planar."""
    model = models.mobilenet_v2(width=0.5, image=64, classes=10)
    _with_layout(monkeypatch, blocked_depthwise=True)
    mod, params = from_onnx(model)
    lib = build(mod, params=params)
    ops = {op for k in lib.kernels for op in k.ops}
    assert "depthwise_conv2d_nchwc" in ops and "depthwise_conv2d" not in ops
    assert "conv2d_nchwc" in ops
    feeds = models.example_inputs(model, batch=2)
    got, = GraphModule(lib)(**feeds)
    np.testing.assert_allclose(got, onnx_models.run_onnxruntime(model, feeds)[0],
                               rtol=RTOL, atol=ATOL)


def test_the_blocked_depthwise_type_rule_checks_its_operands():
    from tecomp.graph.ir import Node, TensorType
    from tecomp.graph.ops import GraphTypeError, op_info

    node = Node("depthwise_conv2d_nchwc", ("x", "w"), ("y",),
                {"block": 8, "padding": (1, 1, 1, 1)}, "dw")
    rule = op_info(node).rule
    x = TensorType("float32", (1, 2, 8, 8, 8))
    assert rule(node, [x, TensorType("float32", (16, 1, 3, 3))])[0].shape == (1, 2, 8, 8, 8)
    with pytest.raises(GraphTypeError, match="multiplier 1"):
        rule(node, [x, TensorType("float32", (24, 1, 3, 3))])
    with pytest.raises(GraphTypeError, match=r"\[N, C/8, H, W, 8\]"):
        rule(node, [TensorType("float32", (1, 4, 8, 8, 4)), TensorType("float32",
                                                                         (16, 1, 3, 3))])


def test_a_depthwise_layer_no_layer_feeds_stays_planar(needs_llvm):
    """ShuffleNet's depthwise convolution sits between grouped 1x1 convolutions computed
    as batches of products (planar): blocked, it would pay a transform each way, so it
    stays planar; the products carry their batch norms and the residual add."""
    model = onnx_models.shuffle_unit()
    ops = _ops(_blocked_graph(model, block=8))
    assert "depthwise_conv2d" in ops and "depthwise_conv2d_nchwc" not in ops
    assert ops.count("batch_matmul") == 2
    mod, params = from_onnx(model)
    lib = build(mod, params=params)
    products = [k.ops for k in lib.kernels if k.anchor == "batch_matmul"]
    assert ["batch_matmul", "multiply", "add", "relu"] in [list(p) for p in products]
    assert any(p[-2:] == ("add", "relu") and p.count("add") == 2 for p in products)
    x = np.random.default_rng(1).standard_normal((1, 32, 8, 8)).astype("float32")
    ref, = onnx_models.run_onnxruntime(model, {"x": x})
    np.testing.assert_allclose(GraphModule(lib)(x=x)[0], ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_an_upsampling_between_blocked_layers_stays_blocked(needs_llvm, mode):
    """Conv -> Resize (x2 height and width) -> Conv: the resize runs on the blocks, with
    no transform around it, and the model matches onnxruntime."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, (16, 16, 3, 3)).astype(
                 "float32"), "w1"),
             numpy_helper.from_array(rng.uniform(-0.5, 0.5, (16, 16, 3, 3)).astype(
                 "float32"), "w2"),
             numpy_helper.from_array(np.array([1, 1, 2, 2], "float32"), "scales")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Resize", ["c1", "", "scales"], ["up"], mode=mode,
                              coordinate_transformation_mode="pytorch_half_pixel"),
             helper.make_node("Conv", ["up", "w2"], ["y"], pads=[1, 1, 1, 1])]
    vi = helper.make_tensor_value_info
    model = helper.make_model(helper.make_graph(
        nodes, "up", [vi("x", TensorProto.FLOAT, [1, 16, 6, 7])],
        [vi("y", TensorProto.FLOAT, None)], initializer=inits),
        opset_imports=[helper.make_opsetid("", 13)])
    ops = _ops(_blocked_graph(model, block=8))
    first = ops.index("conv2d_nchwc")
    assert ops[first:first + 3] == ["conv2d_nchwc", "resize", "conv2d_nchwc"]
    mod, params = from_onnx(model)
    x = rng.standard_normal((1, 16, 6, 7)).astype("float32")
    ref, = onnx_models.run_onnxruntime(model, {"x": x})
    np.testing.assert_allclose(GraphModule(build(mod, params=params))(x=x)[0], ref,
                               rtol=RTOL, atol=ATOL)
