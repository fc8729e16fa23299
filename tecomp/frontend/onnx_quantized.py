"""Converters of ONNX's quantization operators.

``QuantizeLinear`` and ``DequantizeLinear`` become the graph's ``quantize_linear`` and
``dequantize_linear``. The operator format (``QLinearConv``, ``QLinearMatMul``,
``ConvInteger``, ``MatMulInteger``) is written the way the QDQ format is: its 8-bit
operands dequantized, the float operator (through the float converters, so padding,
``auto_pad`` and batch broadcasting mean what they mean for Conv and MatMul), then a
requantize (``QLinear*``) or a cast to int32 (``*Integer``, whose scale is 1). The graph
pass :func:`tecomp.graph.passes.quantized_ops.lower_quantized_ops` then runs each such
product on int8 operands with int32 accumulation, so both formats reach the same
kernels; without the pass the graph still computes what the operator defines.
``DynamicQuantizeLinear`` is its definition in graph operators (min and max reductions,
the scale and zero point arithmetic, ``quantize_linear``).

QuantizeLinear and DequantizeLinear take every type ONNX quantizes to (8- and 16-bit
integers, and the small types: int4/uint4/int2/uint2, float8, float4, see
:mod:`tecomp.topi.small_types`), per tensor, per axis or blocked (``block_size``). The
operator format takes 8-bit operands. What ONNX allows and tecomp does not run is refused
with an error naming the node and the input: a per-row zero point of MatMulInteger's A,
grouped ConvInteger, a QuantizeLinear ``precision`` other than float32.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from ..topi.quantize import QUANTIZED_TYPES

__all__ = ["QUANTIZED_DTYPES", "quantized_converters"]

#: The quantized element types the operator format's kernels take.
QUANTIZED_DTYPES = ("uint8", "int8")


def _input(node, i):
    return node.input[i] if len(node.input) > i and node.input[i] else None


def _check_quantized(ctx, name, what, allowed=QUANTIZED_DTYPES):
    dtype = ctx.type_of(name).dtype
    if dtype not in allowed:
        ctx.fail(f"{what} ({name!r}) is {dtype}; tecomp runs {', '.join(allowed)}")
    return dtype


def _element_dtype(elem: int) -> str | None:
    """The dtype name of ONNX element type ``elem`` (None if numpy has none)."""
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)).name
    except (KeyError, TypeError, ValueError):
        return None


def _layout(ctx, attrs) -> dict:
    """The ``axis`` and, for blocked quantization, ``block_size`` of a (de)quantization."""
    block = int(attrs.get("block_size", 0))
    if block < 0:
        ctx.fail(f"block_size={block}; allowed: 0 (per tensor or per axis) or a positive "
                 "block length")
    return {"axis": int(attrs.get("axis", 1)), **({"block_size": block} if block else {})}


def _params(ctx, node, scale_at, zero_at):
    """The scale and, if given, zero point input names of a (de)quantization."""
    zero = _input(node, zero_at)
    return [node.input[scale_at]] + ([zero] if zero else [])


def _quantize_linear(ctx, node, attrs):
    precision = int(attrs.get("precision", 0))
    if precision not in (0, onnx.TensorProto.FLOAT):
        # The division by the scale runs in float32.
        ctx.fail(f"precision {onnx.TensorProto.DataType.Name(precision)} is not supported; "
                 "allowed: FLOAT")
    zero = _input(node, 2)
    if zero is not None:
        dtype = _check_quantized(ctx, zero, "the zero point y_zero_point", QUANTIZED_TYPES)
    else:
        elem = int(attrs.get("output_dtype", onnx.TensorProto.UINT8))
        dtype = _element_dtype(elem)
        if dtype not in QUANTIZED_TYPES:
            ctx.fail(f"output_dtype {onnx.TensorProto.DataType.Name(elem)} is not "
                     f"supported; allowed: {', '.join(QUANTIZED_TYPES)}")
    rounding = {} if int(attrs.get("saturate", 1)) else {"saturate": False}
    ctx.emit("quantize_linear", [node.input[0]] + _params(ctx, node, 1, 2), node.output,
             dtype=dtype, **_layout(ctx, attrs), **rounding)


def _dequantize_linear(ctx, node, attrs):
    out = int(attrs.get("output_dtype", 0))
    if out and out != onnx.helper.np_dtype_to_tensor_dtype(
            np.dtype(ctx.type_of(node.input[1]).dtype)):
        ctx.fail(f"output_dtype {onnx.TensorProto.DataType.Name(out)} differs from the "
                 "scale's type; allowed: the scale's type")
    dtype = _check_quantized(ctx, node.input[0], "the input x", QUANTIZED_TYPES + ("int32",))
    zero = _input(node, 2)
    if dtype == "int32" and zero is not None and np.any(
            ctx.value_of(zero, "an int32 input's zero point") != 0):
        ctx.fail(f"the zero point ({zero!r}) of int32 data must be 0 (ONNX)")
    ctx.emit("dequantize_linear", [node.input[0]] + _params(ctx, node, 1, 2), node.output,
             **_layout(ctx, attrs))


def _dequantized(ctx, name, scale, zero, axis, what):
    """``dequantize_linear`` of 8-bit input ``name``; ``scale`` None means 1."""
    _check_quantized(ctx, name, what)
    if zero is not None and ctx.type_of(zero).dtype != ctx.type_of(name).dtype:
        ctx.fail(f"the zero point {zero!r} of {what} is {ctx.type_of(zero).dtype} but "
                 f"{what} ({name!r}) is {ctx.type_of(name).dtype}; they must have one type")
    if scale is None:
        scale = ctx.const(np.array(1.0, "float32"), "unit_scale")
    return ctx.emit("dequantize_linear", [name, scale] + ([zero] if zero else []),
                    axis=axis)


def bias_scale(ctx, *scales, factor: float = 1.0) -> str:
    """The scale of an int32 bias, the product of ``scales`` (value names) and
    ``factor``: a constant where they are (so the bias's dequantization is folded once,
    at build, and the bias reads as a per-channel constant), else computed."""
    known = [ctx.consts.get(name) for name in scales]
    if all(v is not None for v in known):
        value = np.asarray(factor, "float32")
        for v in known:
            value = value * np.asarray(v, "float32")
        return ctx.const(value.astype("float32"), "bias_scale")
    scale = scales[0]
    for name in scales[1:]:
        scale = ctx.emit("multiply", [scale, name])
    if factor != 1.0:
        scale = ctx.emit("multiply", [scale, ctx.const(np.array(factor, "float32"), "alpha")])
    return scale


def _float_node(op_type, node, inputs, output, attrs):
    """``node`` as the float operator ``op_type`` on ``inputs`` (its attributes kept)."""
    return onnx.helper.make_node(op_type, inputs, [output], name=node.name, **attrs)


def _output(node, i):
    """``[name]`` of output ``i``, or None where the model leaves it unnamed."""
    return [node.output[i]] if len(node.output) > i and node.output[i] else None


def quantized_converters(float_converter: Callable) -> dict:
    """``(op_type, since-version) -> converter`` of the quantization operators.

    Parameters
    ----------
    float_converter : callable
        ``(op_type, since_version) -> converter`` of the float operators (Conv, MatMul)
        the operator format is written with.
    """

    def conv(ctx, node, x, w, bias, output, attrs):
        y = ctx.fresh("conv")
        float_converter("Conv", 11)(
            ctx, _float_node("Conv", node, [x, w] + ([bias] if bias else []), y, attrs), attrs)
        return y

    def matmul(ctx, node, a, b):
        y = ctx.fresh("matmul")
        float_converter("MatMul", 13)(ctx, _float_node("MatMul", node, [a, b], y, {}), {})
        return y

    def qlinear_conv(ctx, node, attrs):
        x, sx, zx, w, sw, zw, sy, zy = node.input[:8]
        x = _dequantized(ctx, x, sx, zx, 1, "x")
        w = _dequantized(ctx, w, sw, zw, 0, "w")
        bias = _input(node, 8)
        if bias is not None:
            _check_quantized(ctx, bias, "the bias B", ("int32",))
            # B is quantized with scale x_scale * w_scale and zero point 0 (ONNX).
            bias = ctx.emit("dequantize_linear", [bias, bias_scale(ctx, sx, sw)], axis=0)
        y = conv(ctx, node, x, w, bias, node.output[0], attrs)
        ctx.emit("quantize_linear", [y, sy, zy], node.output, axis=1,
                 dtype=ctx.type_of(zy).dtype)

    def qlinear_matmul(ctx, node, attrs):
        a, sa, za, b, sb, zb, sy, zy = node.input[:8]
        a = _dequantized(ctx, a, sa, za, 1, "a")
        # A per-column scale of B [.., K, N] runs along its last axis.
        b = _dequantized(ctx, b, sb, zb, len(ctx.type_of(b).shape) - 1, "b")
        y = matmul(ctx, node, a, b)
        rank = len(ctx.type_of(y).shape)
        ctx.emit("quantize_linear", [y, sy, zy], node.output, axis=rank - 1,
                 dtype=ctx.type_of(zy).dtype)

    def conv_integer(ctx, node, attrs):
        if int(attrs.get("group", 1)) != 1:
            ctx.fail(f"group={attrs['group']}: grouped ConvInteger is not supported")
        x = _dequantized(ctx, node.input[0], None, _input(node, 2), 1, "x")
        w = _dequantized(ctx, node.input[1], None, _input(node, 3), 0, "w")
        y = conv(ctx, node, x, w, None, node.output[0], attrs)
        ctx.emit("cast", [y], node.output, dtype="int32")

    def matmul_integer(ctx, node, attrs):
        za, zb = _input(node, 2), _input(node, 3)
        if za is not None and len(ctx.type_of(za).shape) == 1 and (
                ctx.type_of(za).shape[0] != 1):
            ctx.fail(f"a per-row zero point of A ({za!r}) is not supported; allowed: a "
                     "scalar or one element")
        a = _dequantized(ctx, node.input[0], None, za, 0, "A")
        b = _dequantized(ctx, node.input[1], None, zb,
                         len(ctx.type_of(node.input[1]).shape) - 1, "B")
        ctx.emit("cast", [matmul(ctx, node, a, b)], node.output, dtype="int32")

    def dynamic_quantize_linear(ctx, node, attrs):
        x = node.input[0]
        _check_quantized(ctx, x, "the input x", ("float32",))
        zero = ctx.const(np.array(0.0, "float32"), "zero")
        # The range always includes 0, so 0 is exactly representable (ONNX).
        lo = ctx.emit("minimum", [ctx.emit("reduce_min", [x], keepdims=0), zero])
        hi = ctx.emit("maximum", [ctx.emit("reduce_max", [x], keepdims=0), zero])
        scale = ctx.emit("divide", [ctx.emit("subtract", [hi, lo]),
                                    ctx.const(np.array(255.0, "float32"), "qrange")],
                         _output(node, 1))
        shifted = ctx.emit("round", [ctx.emit("neg", [ctx.emit("divide", [lo, scale])])])
        clipped = ctx.emit("clip", [shifted], min=0.0, max=255.0)
        zp = ctx.emit("cast", [clipped], _output(node, 2), dtype="uint8")
        ctx.emit("quantize_linear", [x, scale, zp], node.output[:1], dtype="uint8")

    table = {
        # Versions 19 to 28 add element types (float8, 16-bit, int4, float4, int2) and the
        # attributes read above (saturate, block_size, output_dtype, precision).
        ("QuantizeLinear", (10, 13, 19, 21, 23, 24, 25, 28)): _quantize_linear,
        ("DequantizeLinear", (10, 13, 19, 21, 23, 24, 25, 28)): _dequantize_linear,
        ("QLinearConv", (10,)): qlinear_conv,
        ("QLinearMatMul", (10, 21)): qlinear_matmul,
        ("ConvInteger", (10,)): conv_integer,
        ("MatMulInteger", (10,)): matmul_integer,
        ("DynamicQuantizeLinear", (11,)): dynamic_quantize_linear,
    }
    return {(op, v): fn for (op, versions), fn in table.items() for v in versions}
