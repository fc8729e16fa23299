"""Small ONNX models built with ``onnx.helper`` (random weights), shared by the frontend
and graph tests."""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17

#: The models exported from torch/transformers (tools/export_test_models.py writes them).
EXPORTED = os.path.join(os.path.dirname(__file__), "data", "models")


def load_test_model(name: str) -> onnx.ModelProto:
    """The committed exported model ``name`` (its file name without ``.onnx``)."""
    return onnx.load(os.path.join(EXPORTED, f"{name}.onnx"))


def _init(rng, name, shape, scale=0.1):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("float32"), name)


def _model(nodes, inputs, outputs, inits, opset=OPSET, name="model"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def conv_bn_relu_pool_gemm(batch="N", seed=0):
    """Conv(+bias) -> BatchNormalization -> Relu -> MaxPool -> GlobalAveragePool -> Flatten
    -> Gemm, input ``x[batch, 3, 16, 16]``."""
    rng = np.random.default_rng(seed)
    inits = [
        _init(rng, "w", (8, 3, 3, 3)), _init(rng, "b", (8,)),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype("float32"), "gamma"),
        _init(rng, "beta", (8,)), _init(rng, "mean", (8,)),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype("float32"), "var"),
        _init(rng, "fc_w", (10, 8)), _init(rng, "fc_b", (10,)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["bn"],
                         name="bn", epsilon=1e-5),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], name="fc", transB=1),
    ]
    return _model(nodes, [_vi("x", [batch, 3, 16, 16])], [_vi("y", [batch, 10])], inits)


def residual_block(seed=0):
    """relu(conv(relu(conv(x))) + x), input ``x[1, 8, 8, 8]``."""
    rng = np.random.default_rng(seed)
    inits = [_init(rng, "w1", (8, 8, 3, 3)), _init(rng, "b1", (8,)),
             _init(rng, "w2", (8, 8, 3, 3)), _init(rng, "b2", (8,))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "x"], ["s"], name="residual"),
        helper.make_node("Relu", ["s"], ["y"], name="relu2"),
    ]
    return _model(nodes, [_vi("x", [1, 8, 8, 8])], [_vi("y", [1, 8, 8, 8])], inits)


def layer_norm_gelu(seed=0):
    """LayerNormalization then GELU written with Erf, input ``x[batch, seq, 32]``."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 32).astype("float32"), "gamma"),
        _init(rng, "beta", (32,)),
        numpy_helper.from_array(np.array(1 / np.sqrt(2), "float32"), "inv_sqrt2"),
        numpy_helper.from_array(np.array(1.0, "float32"), "one"),
        numpy_helper.from_array(np.array(0.5, "float32"), "half"),
    ]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], name="ln",
                         axis=-1, epsilon=1e-5),
        helper.make_node("Mul", ["ln", "inv_sqrt2"], ["t0"], name="gelu_scale"),
        helper.make_node("Erf", ["t0"], ["t1"], name="gelu_erf"),
        helper.make_node("Add", ["t1", "one"], ["t2"], name="gelu_add"),
        helper.make_node("Mul", ["ln", "t2"], ["t3"], name="gelu_mul"),
        helper.make_node("Mul", ["t3", "half"], ["y"], name="gelu_half"),
    ]
    return _model(nodes, [_vi("x", ["batch", "seq", 32])], [_vi("y", ["batch", "seq", 32])],
                  inits)


#: Input shapes of :func:`attention_4d`.
ATTENTION_4D_SHAPES = {"q": (1, 2, 4, 8), "k": (1, 2, 8, 4), "v": (1, 2, 4, 6),
                       "mask": (1, 1, 1, 4)}


def attention_4d():
    """Attention on ``[B, H, S, D]`` products as torch exports it: ``softmax(mask +
    (q @ k) * 0.125) @ v`` with ``k`` given transposed and a ``[B, 1, 1, S]`` mask; inputs
    :data:`ATTENTION_4D_SHAPES`, output ``y[1, 2, 4, 6]``."""
    def vi(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"]),
             helper.make_node("Mul", ["s", "eighth"], ["scaled"]),
             helper.make_node("Add", ["mask", "scaled"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["p"], axis=3),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    eighth = numpy_helper.from_array(np.array(0.125, "float32"), "eighth")
    graph = helper.make_graph(nodes, "attention4",
                              [vi(n, s) for n, s in ATTENTION_4D_SHAPES.items()],
                              [vi("y", [1, 2, 4, 6])], [eighth])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def attention_block(hidden=32, heads=4, seed=0):
    """Self-attention with a padding mask, as PyTorch exports it: the head split is a
    Shape -> Gather -> Unsqueeze -> Concat -> Reshape chain on the dynamic batch and
    sequence. Inputs ``x[batch, seq, hidden]`` and ``mask[batch, seq]`` (1 keeps, 0 masks)."""
    rng = np.random.default_rng(seed)
    d = hidden // heads
    inits = [_init(rng, n, (hidden, hidden)) for n in ("wq", "wk", "wv", "wo")]
    inits += [
        numpy_helper.from_array(np.array(0, "int64"), "i0"),
        numpy_helper.from_array(np.array(1, "int64"), "i1"),
        numpy_helper.from_array(np.array([0], "int64"), "ax0"),
        numpy_helper.from_array(np.array([heads, d], "int64"), "heads_d"),
        numpy_helper.from_array(np.array([hidden], "int64"), "hid"),
        numpy_helper.from_array(np.array([1, 2], "int64"), "ax12"),
        numpy_helper.from_array(np.array(1 / np.sqrt(d), "float32"), "scale"),
        numpy_helper.from_array(np.array(1.0, "float32"), "one"),
        numpy_helper.from_array(np.array(-10000.0, "float32"), "neg"),
    ]
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"], name="shape"),
        helper.make_node("Gather", ["shp", "i0"], ["b"], name="gather_b", axis=0),
        helper.make_node("Gather", ["shp", "i1"], ["s"], name="gather_s", axis=0),
        helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"], name="unsq_b"),
        helper.make_node("Unsqueeze", ["s", "ax0"], ["s1"], name="unsq_s"),
        helper.make_node("Concat", ["b1", "s1", "heads_d"], ["split_shape"], name="concat",
                         axis=0),
        helper.make_node("Concat", ["b1", "s1", "hid"], ["merge_shape"], name="concat_m",
                         axis=0),
    ]
    for n in ("q", "k", "v"):
        nodes += [
            helper.make_node("MatMul", ["x", f"w{n}"], [f"{n}0"], name=f"proj_{n}"),
            helper.make_node("Reshape", [f"{n}0", "split_shape"], [f"{n}1"], name=f"split_{n}"),
            helper.make_node("Transpose", [f"{n}1"], [f"{n}h"], name=f"heads_{n}",
                             perm=[0, 2, 3, 1] if n == "k" else [0, 2, 1, 3]),
        ]
    nodes += [
        helper.make_node("MatMul", ["qh", "kh"], ["sc0"], name="scores"),
        helper.make_node("Mul", ["sc0", "scale"], ["sc1"], name="scale_scores"),
        helper.make_node("Unsqueeze", ["mask", "ax12"], ["m1"], name="mask_unsq"),
        helper.make_node("Sub", ["one", "m1"], ["m2"], name="mask_inv"),
        helper.make_node("Mul", ["m2", "neg"], ["m3"], name="mask_bias"),
        helper.make_node("Add", ["sc1", "m3"], ["sc2"], name="masked"),
        helper.make_node("Softmax", ["sc2"], ["p"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["p", "vh"], ["ctx"], name="context"),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], name="merge_t", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx_t", "merge_shape"], ["ctx_m"], name="merge"),
        helper.make_node("MatMul", ["ctx_m", "wo"], ["o"], name="out_proj"),
        helper.make_node("Add", ["o", "x"], ["y"], name="residual"),
    ]
    return _model(nodes, [_vi("x", ["batch", "seq", hidden]), _vi("mask", ["batch", "seq"])],
                  [_vi("y", ["batch", "seq", hidden])], inits)


def run_onnxruntime(model, feeds):
    """Outputs of ``model`` on ``feeds`` with onnxruntime (the reference). The model is
    given the lowest IR version its opsets allow: ``helper.make_model`` writes onnx's
    newest, which an onnxruntime older than the onnx package refuses (onnx 1.23 writes IR 14;
    onnxruntime 1.30 reads up to 13)."""
    import onnxruntime

    ir_version = helper.find_min_ir_version_for(model.opset_import, ignore_unknown=True)
    if model.ir_version > ir_version:
        model, original = onnx.ModelProto(), model
        model.CopyFrom(original)
        model.ir_version = ir_version
    sess = onnxruntime.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def decomposed_layer_norm(seed=0):
    """LayerNorm as opset-13 exporters write it (ReduceMean, Sub, Pow, ReduceMean, Add,
    Sqrt, Div, Mul, Add), input ``x[batch, 16]``."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 16).astype("float32"), "gamma"),
        _init(rng, "beta", (16,)),
        numpy_helper.from_array(np.array(2.0, "float32"), "two"),
        numpy_helper.from_array(np.array(1e-5, "float32"), "eps"),
    ]
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], name="mean", axes=[-1]),
        helper.make_node("Sub", ["x", "mean"], ["d"], name="center"),
        helper.make_node("Pow", ["d", "two"], ["d2"], name="square"),
        helper.make_node("ReduceMean", ["d2"], ["var"], name="var", axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"], name="add_eps"),
        helper.make_node("Sqrt", ["ve"], ["std"], name="std"),
        helper.make_node("Div", ["d", "std"], ["n"], name="normalize"),
        helper.make_node("Mul", ["n", "gamma"], ["s"], name="scale"),
        helper.make_node("Add", ["s", "beta"], ["y"], name="shift"),
    ]
    return _model(nodes, [_vi("x", ["batch", 16])], [_vi("y", ["batch", 16])], inits,
                  opset=13)


def small_cnn(batch=1, seed=0):
    """Three Conv -> BatchNormalization -> Relu blocks (the last two of the same shape),
    GlobalAveragePool, Flatten, Gemm; input ``x[batch, 3, 16, 16]``."""
    rng = np.random.default_rng(seed)
    inits, nodes, prev = [], [], "x"
    for k, cin in enumerate((3, 16, 16)):
        inits += [
            _init(rng, f"w{k}", (16, cin, 3, 3)), _init(rng, f"b{k}", (16,)),
            numpy_helper.from_array(rng.uniform(0.5, 1.5, 16).astype("float32"), f"gamma{k}"),
            _init(rng, f"beta{k}", (16,)), _init(rng, f"mean{k}", (16,)),
            numpy_helper.from_array(rng.uniform(0.5, 1.5, 16).astype("float32"), f"var{k}"),
        ]
        nodes += [
            helper.make_node("Conv", [prev, f"w{k}", f"b{k}"], [f"c{k}"], name=f"conv{k}",
                             pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", [f"c{k}", f"gamma{k}", f"beta{k}",
                                                    f"mean{k}", f"var{k}"], [f"bn{k}"],
                             name=f"bn{k}", epsilon=1e-5),
            helper.make_node("Relu", [f"bn{k}"], [f"r{k}"], name=f"relu{k}"),
        ]
        prev = f"r{k}"
    inits += [_init(rng, "fc_w", (10, 16)), _init(rng, "fc_b", (10,))]
    nodes += [
        helper.make_node("GlobalAveragePool", [prev], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], name="fc", transB=1),
    ]
    return _model(nodes, [_vi("x", [batch, 3, 16, 16])], [_vi("y", [batch, 10])], inits)


def shuffle_unit(channels=32, groups=4, image=8, seed=0):
    """A ShuffleNet unit: grouped 1x1 Conv -> BatchNormalization -> Relu -> channel shuffle
    (Reshape, Transpose, Reshape) -> depthwise 3x3 Conv -> BatchNormalization -> grouped
    1x1 Conv -> BatchNormalization -> + input -> Relu; input ``x[1, channels, image,
    image]``."""
    rng = np.random.default_rng(seed)
    per = channels // groups
    inits, nodes = [], []

    def conv_bn(x, out, k, w_shape, **attrs):
        inits.extend([
            _init(rng, f"w{k}", w_shape, scale=0.3),
            numpy_helper.from_array(rng.uniform(0.5, 1.5, channels).astype("float32"),
                                    f"gamma{k}"),
            _init(rng, f"beta{k}", (channels,)), _init(rng, f"mean{k}", (channels,)),
            numpy_helper.from_array(rng.uniform(0.5, 1.5, channels).astype("float32"),
                                    f"var{k}")])
        nodes.extend([
            helper.make_node("Conv", [x, f"w{k}"], [f"c{k}"], **attrs),
            helper.make_node("BatchNormalization", [f"c{k}", f"gamma{k}", f"beta{k}",
                                                    f"mean{k}", f"var{k}"], [out])])

    conv_bn("x", "bn0", 0, (channels, per, 1, 1), group=groups)
    inits += [numpy_helper.from_array(np.array(s, "int64"), f"shape{k}") for k, s in
              enumerate([(1, groups, per, image, image), (1, channels, image, image)])]
    nodes += [helper.make_node("Relu", ["bn0"], ["r0"]),
              helper.make_node("Reshape", ["r0", "shape0"], ["g"]),
              helper.make_node("Transpose", ["g"], ["t"], perm=[0, 2, 1, 3, 4]),
              helper.make_node("Reshape", ["t", "shape1"], ["shuffled"])]
    conv_bn("shuffled", "bn1", 1, (channels, 1, 3, 3), group=channels, pads=[1, 1, 1, 1])
    conv_bn("bn1", "bn2", 2, (channels, per, 1, 1), group=groups)
    nodes += [helper.make_node("Add", ["bn2", "x"], ["s"]),
              helper.make_node("Relu", ["s"], ["y"])]
    shape = [1, channels, image, image]
    return _model(nodes, [_vi("x", shape)], [_vi("y", shape)], inits)
