"""Converters of ONNX's mathematical operators beyond the elementwise basics of
:mod:`tecomp.frontend.onnx_converters`: the inverse trigonometric functions Asin, Acos,
Atan (:mod:`tecomp.topi.trigonometry`) and CumProd (:mod:`tecomp.topi.cumulative`).
Importing the module registers them."""

from __future__ import annotations

from .onnx_converters import converter

_TRIGONOMETRY = {"Asin": "asin", "Acos": "acos", "Atan": "atan"}


@converter("Asin", 7, 22)
@converter("Acos", 7, 22)
@converter("Atan", 7, 22)
def _inverse_trigonometric(ctx, node, attrs):
    ctx.emit(_TRIGONOMETRY[node.op_type], node.input[:1], node.output)


@converter("CumProd", 26)
def _cumprod(ctx, node, attrs):
    # The axis is a scalar input (a value the model is specialised on where it is one).
    axis = int(ctx.value_of(node.input[1], "axis").reshape(-1)[0])
    ctx.emit("cumprod", [node.input[0]], node.output, axis=axis,
             exclusive=int(attrs.get("exclusive", 0)), reverse=int(attrs.get("reverse", 0)))
