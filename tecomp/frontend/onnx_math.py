"""Converters of ONNX's mathematical operators beyond the elementwise basics of
:mod:`tecomp.frontend.onnx_converters`: the inverse trigonometric functions Asin, Acos,
Atan (:mod:`tecomp.topi.trigonometry`). Importing the module registers them."""

from __future__ import annotations

from .onnx_converters import converter

_TRIGONOMETRY = {"Asin": "asin", "Acos": "acos", "Atan": "atan"}


@converter("Asin", 7, 22)
@converter("Acos", 7, 22)
@converter("Atan", 7, 22)
def _inverse_trigonometric(ctx, node, attrs):
    ctx.emit(_TRIGONOMETRY[node.op_type], node.input[:1], node.output)
