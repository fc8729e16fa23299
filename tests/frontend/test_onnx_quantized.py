"""The quantization operators, each against onnxruntime on random inputs, and the errors
for what tecomp does not run.

Tolerances: QuantizeLinear, DequantizeLinear, ConvInteger, MatMulInteger and
DynamicQuantizeLinear are exact. QLinearConv and QLinearMatMul requantize an int32 sum:
onnxruntime multiplies it by the float ``x_scale * w_scale / y_scale``, tecomp by
``x_scale * w_scale``, adds the bias and divides by ``y_scale``; the two roundings of the
same real number differ where it lies within a float rounding of a tie, so an output may
differ by one quantization step, never more. The weights are kept within [-63, 63]:
onnxruntime's uint8 x int8 kernels on x86 without VNNI add pairs of products in int16
(``vpmaddubsw``), which saturates beyond that (what ``reduce_range`` is for)."""

import numpy as np
import onnx_models
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tecomp
from tecomp.errors import OnnxSpecError, UnsupportedOpError
from tecomp.frontend import from_onnx
from tecomp.graph.passes.dce import eliminate_dead_code
from tecomp.graph.passes.quantized_ops import lower_quantized_ops

F, U8, I8, I32 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32
_ELEM = {"float32": F, "uint8": U8, "int8": I8, "int32": I32, "int16": TensorProto.INT16,
         "uint16": TensorProto.UINT16}


def _model(node, inputs, inits, opset):
    """A one-node model: ``inputs`` are ``(name, array)`` fed at run time, ``inits``
    ``(name, array)`` initializers."""
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, _ELEM[str(a.dtype)], a.shape) for n, a in inputs],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in node.output],
        initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    # The outputs' types, which onnxruntime needs, from onnx's shape inference.
    return onnx.shape_inference.infer_shapes(model)


def _compare(node, inputs, inits=(), opset=13, steps=0, target="llvm"):
    """tecomp's outputs for ``target`` equal onnxruntime's (integer outputs within
    ``steps``)."""
    model = _model(node, inputs, inits, opset)
    feeds = dict(inputs)
    want = onnx_models.run_onnxruntime(model, feeds)
    mod, params = from_onnx(model)
    got = tecomp.graph.GraphModule(tecomp.graph.build(mod, target=target, params=params))(
        **feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
        else:
            diff = np.abs(g.astype(np.int64) - w.astype(np.int64))
            assert diff.max() <= steps, f"{diff.max()} steps apart"
    return mod


def _lowered_ops(mod):
    """The operators left once the products are lowered and dead code dropped."""
    return {n.op for n in eliminate_dead_code(lower_quantized_ops(mod)).nodes}


def _ints(rng, dtype, shape, bound=None):
    info = np.iinfo(dtype)
    lo, hi = (info.min, info.max) if bound is None else (max(info.min, -bound), bound)
    return rng.integers(lo, hi + 1, shape).astype(dtype)


@pytest.mark.parametrize("opset", [10, 13, 19, 21])
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_quantize_dequantize_per_tensor(opset, dtype, rng):
    x = (rng.normal(size=(2, 3, 5)) * 30).astype("float32")
    x.flat[:4] = [0.5, 1.5, 2.5, -2.5]  # ties round to even
    scale, zero = np.array(0.5, "float32"), np.array(7, dtype)
    _compare(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"]), [("x", x)],
             [("s", scale), ("z", zero)], opset)
    q = _ints(rng, dtype, (2, 3, 5))
    _compare(helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]), [("q", q)],
             [("s", scale), ("z", zero)], opset)


@pytest.mark.parametrize("axis", [1, -1, 0])
def test_quantize_dequantize_per_axis(axis, rng):
    x = (rng.normal(size=(4, 3, 6)) * 30).astype("float32")
    n = x.shape[axis]
    scale = rng.uniform(0.1, 1.0, n).astype("float32")
    zero = _ints(rng, "int8", (n,), 20)
    _compare(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=axis),
             [("x", x)], [("s", scale), ("z", zero)])
    q = _ints(rng, "int8", x.shape)
    _compare(helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=axis),
             [("q", q)], [("s", scale), ("z", zero)])


def test_quantize_without_zero_point_takes_output_dtype(rng):
    x = (rng.normal(size=(3, 8)) * 50).astype("float32")
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=I8)
    _compare(node, [("x", x)], [("s", np.array(0.25, "float32"))], opset=21)
    _compare(helper.make_node("QuantizeLinear", ["x", "s"], ["y"]), [("x", x)],
             [("s", np.array(0.25, "float32"))], opset=13)


def test_dequantize_int32_bias(rng):
    q = rng.integers(-5000, 5000, (16,)).astype("int32")
    _compare(helper.make_node("DequantizeLinear", ["q", "s"], ["y"]), [("q", q)],
             [("s", np.array(0.003, "float32"))])


@pytest.mark.parametrize("x_dtype", ["uint8", "int8"])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_qlinear_conv(x_dtype, per_channel, bias, rng):
    x = _ints(rng, x_dtype, (1, 4, 9, 9))
    w = _ints(rng, "int8", (6, 4, 3, 3), 63)
    k = 6 if per_channel else ()
    inits = [("sx", np.array(0.02, "float32")), ("zx", np.array(9, x_dtype)), ("w", w),
             ("sw", rng.uniform(0.005, 0.02, k).astype("float32")),
             ("zw", np.zeros(k, "int8")), ("sy", np.array(0.15, "float32")),
             ("zy", np.array(120, x_dtype))]
    inputs = ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"]
    if bias:
        inits.append(("b", rng.integers(-3000, 3000, (6,)).astype("int32")))
        inputs.append("b")
    node = helper.make_node("QLinearConv", inputs, ["y"], pads=[1, 0, 1, 2], strides=[2, 1])
    mod = _compare(node, [("x", x)], inits, opset=13, steps=1)
    assert {"qnn_conv2d"} <= _lowered_ops(mod) and "conv2d" not in _lowered_ops(mod)


@pytest.mark.parametrize("per_column", [False, True])
def test_qlinear_matmul(per_column, rng):
    a = _ints(rng, "uint8", (2, 5, 24))
    b = _ints(rng, "int8", (24, 7), 63)
    n = 7 if per_column else ()
    inits = [("sa", np.array(0.03, "float32")), ("za", np.array(100, "uint8")), ("b", b),
             ("sb", rng.uniform(0.01, 0.03, n).astype("float32")),
             ("zb", np.zeros(n, "int8")), ("sy", np.array(0.4, "float32")),
             ("zy", np.array(3, "uint8"))]
    node = helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"],
                            ["y"])
    _compare(node, [("a", a)], inits, opset=13, steps=1)


@pytest.mark.parametrize("b_dtype", ["int8", "uint8"])
def test_matmul_integer_is_exact(b_dtype, rng):
    a = _ints(rng, "uint8", (3, 4, 40))
    b = _ints(rng, b_dtype, (40, 9), 63)
    node = helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])
    mod = _compare(node, [("a", a)],
                   [("b", b), ("za", np.array(128, "uint8")), ("zb", np.array(5, b_dtype))])
    assert _lowered_ops(mod) == {"reshape", "qnn_matmul"}


def test_conv_integer_is_exact(rng):
    x = _ints(rng, "uint8", (2, 3, 7, 7))
    w = _ints(rng, "int8", (5, 3, 3, 3), 63)
    node = helper.make_node("ConvInteger", ["x", "w", "zx"], ["y"], pads=[1, 1, 1, 1])
    _compare(node, [("x", x)], [("w", w), ("zx", np.array(77, "uint8"))])


@pytest.mark.parametrize("op", ["MatMulInteger", "ConvInteger", "QLinearMatMul",
                                "QLinearConv"])
def test_quantized_products_on_cuda(op, cuda_target, rng):
    """The int8 products on a GPU (simulated without one): int32 sums as exact as the
    CPU's, zero points per tensor and per column or channel."""
    if op == "MatMulInteger":
        inits = [("b", _ints(rng, "int8", (20, 6))), ("za", np.array(7, "uint8")),
                 ("zb", _ints(rng, "int8", (6,), 5))]
        node = helper.make_node(op, ["a", "b", "za", "zb"], ["y"])
        _compare(node, [("a", _ints(rng, "uint8", (3, 20)))], inits, 10, target=cuda_target)
    elif op == "ConvInteger":
        inits = [("w", _ints(rng, "int8", (4, 3, 3, 3))), ("zx", np.array(9, "uint8"))]
        node = helper.make_node(op, ["x", "w", "zx"], ["y"], pads=[1, 1, 1, 1], strides=[2, 1])
        _compare(node, [("x", _ints(rng, "uint8", (1, 3, 7, 7)))], inits, 10,
                 target=cuda_target)
    elif op == "QLinearMatMul":
        inits = [("sa", np.array(0.03, "float32")), ("za", np.array(11, "uint8")),
                 ("b", _ints(rng, "int8", (24, 7), 63)),
                 ("sb", rng.uniform(0.005, 0.02, (7,)).astype("float32")),
                 ("zb", np.zeros(7, "int8")), ("sy", np.array(0.2, "float32")),
                 ("zy", np.array(128, "uint8"))]
        node = helper.make_node(op, ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])
        _compare(node, [("a", _ints(rng, "uint8", (5, 24)))], inits, 13, steps=1,
                 target=cuda_target)
    else:
        inits = [("sx", np.array(0.02, "float32")), ("zx", np.array(9, "int8")),
                 ("w", _ints(rng, "int8", (6, 4, 3, 3), 63)),
                 ("sw", rng.uniform(0.005, 0.02, 6).astype("float32")),
                 ("zw", np.zeros(6, "int8")), ("sy", np.array(0.15, "float32")),
                 ("zy", np.array(-3, "int8")),
                 ("b", rng.integers(-3000, 3000, (6,)).astype("int32"))]
        node = helper.make_node(op, ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"],
                                ["y"], pads=[1, 0, 1, 2])
        _compare(node, [("x", _ints(rng, "int8", (1, 4, 9, 9)))], inits, 13, steps=1,
                 target=cuda_target)


def test_dynamic_quantize_linear(rng):
    x = (rng.normal(size=(3, 17)) * 4 + 1).astype("float32")
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zero"])
    _compare(node, [("x", x)], opset=13)


# ---- what is refused ------------------------------------------------------------------------


def _import(node, inputs, inits=(), opset=13):
    return from_onnx(_model(node, inputs, inits, opset))


def test_zero_point_of_another_type_is_refused(rng):
    node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])
    with pytest.raises(OnnxSpecError, match="must have one element type"):
        _import(node, [("q", _ints(rng, "uint8", (4,)))],
                [("s", np.array(0.1, "float32")), ("z", np.array(0, "int8"))])


@pytest.mark.parametrize("dtype", ["int16", "uint16"])
def test_sixteen_bit_quantization(dtype, rng):
    x = (rng.normal(size=(3, 8)) * 3000).astype("float32")
    x.flat[:3] = [0.5, 1.5, -2.5]  # ties round to even
    params = [("s", np.array(0.125, "float32")), ("z", np.array(300, dtype))]
    _compare(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"]), [("x", x)], params,
             opset=21)
    _compare(helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
             [("q", _ints(rng, dtype, (3, 8)))], params, opset=21)


@pytest.mark.parametrize("axis", [0, 1])
def test_blocked_quantization(axis, rng):
    """Blocks of 3 along ``axis`` of a [6, 7] tensor: the last block along axis 1 is short."""
    x = (rng.normal(size=(6, 7)) * 40).astype("float32")
    blocks = [2, 7] if axis == 0 else [6, 3]
    params = [("s", rng.uniform(0.2, 1.0, blocks).astype("float32")),
              ("z", _ints(rng, "int8", blocks, 10))]
    _compare(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=axis,
                              block_size=3), [("x", x)], params, opset=21)
    _compare(helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=axis,
                              block_size=3), [("q", _ints(rng, "int8", (6, 7)))], params,
             opset=21)


def test_blocked_parameters_must_cover_the_blocks(rng):
    node = helper.make_node("DequantizeLinear", ["q", "s"], ["y"], axis=1, block_size=2)
    with pytest.raises(tecomp.TecompError, match=r"must be \[2, 2\] \(blocks of 2"):
        _import(node, [("q", _ints(rng, "int8", (2, 4)))],
                [("s", np.full((2, 3), 0.1, "float32"))], opset=21)


def test_per_axis_parameters_must_fit_the_axis(rng):
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)
    with pytest.raises(OnnxSpecError, match="has 4 values but axis 1"):
        _import(node, [("x", np.zeros((2, 3), "float32"))],
                [("s", np.ones(4, "float32")), ("z", np.zeros(4, "uint8"))])
    with pytest.raises(OnnxSpecError, match="they must have one shape"):
        _import(node, [("x", np.zeros((2, 3), "float32"))],
                [("s", np.ones(3, "float32")), ("z", np.zeros((), "uint8"))])


def test_per_row_zero_point_and_grouped_conv_integer_are_refused(rng):
    node = helper.make_node("MatMulInteger", ["a", "b", "za"], ["y"])
    with pytest.raises(UnsupportedOpError, match="per-row zero point"):
        _import(node, [("a", _ints(rng, "uint8", (3, 8)))],
                [("b", _ints(rng, "int8", (8, 2))), ("za", np.arange(3, dtype="uint8"))])
    node = helper.make_node("ConvInteger", ["x", "w"], ["y"], group=2)
    with pytest.raises(UnsupportedOpError, match="grouped ConvInteger"):
        _import(node, [("x", _ints(rng, "uint8", (1, 4, 5, 5)))],
                [("w", _ints(rng, "int8", (4, 2, 3, 3)))])


def test_version_23_attributes_beyond_float_are_refused(rng):
    x = [("x", np.zeros((4,), "float32"))]
    scale = [("s", np.array(0.1, "float32")), ("z", np.array(0, "uint8"))]
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"],
                            precision=TensorProto.FLOAT16)
    with pytest.raises(UnsupportedOpError, match="precision FLOAT16 is not supported"):
        _import(node, x, scale, opset=23)
    node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"],
                            output_dtype=TensorProto.FLOAT16)
    with pytest.raises(UnsupportedOpError, match="output_dtype FLOAT16 differs"):
        _import(node, [("q", _ints(rng, "uint8", (4,)))], scale, opset=23)
