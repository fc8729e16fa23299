"""Converters of ONNX's operators on the bits of integers: BitwiseAnd, BitwiseOr,
BitwiseXor, BitwiseNot (since opset 18) and BitCast (26), which reads each element's
bits as another type of the same width (:mod:`tecomp.topi.bitwise`). Importing the
module registers them."""

from __future__ import annotations

from .onnx_converters import converter, onnx_dtype

_BINARY = {"BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor"}


@converter("BitwiseAnd", 18)
@converter("BitwiseOr", 18)
@converter("BitwiseXor", 18)
def _bitwise_binary(ctx, node, attrs):
    ctx.emit(_BINARY[node.op_type], node.input[:2], node.output)


@converter("BitwiseNot", 18)
def _bitwise_not(ctx, node, attrs):
    ctx.emit("bitwise_not", node.input[:1], node.output)


@converter("BitCast", 26)
def _bitcast(ctx, node, attrs):
    # The widths agree (onnx_checks' BitCastWidth).
    ctx.emit("bitcast", node.input[:1], node.output,
             dtype=onnx_dtype(attrs["to"], f"node {ctx.node_name!r}: BitCast to"))
