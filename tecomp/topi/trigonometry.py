"""ONNX's inverse trigonometric operators Asin, Acos and Atan, elementwise on floats:
the libm functions (``te.intrin.asin`` ...), so they are as exact as onnxruntime's. The
other trigonometric and hyperbolic operators are in :mod:`tecomp.topi.elemwise`."""

from __future__ import annotations

from ..te import intrin
from .cpu_schedule import schedule_injective
from .elemwise import elemwise
from .register import register_llvm


def asin(x):
    """ONNX Asin of float tensor ``x``: the arcsine, in ``[-pi/2, pi/2]`` (NaN outside
    ``[-1, 1]``)."""
    return elemwise(x, intrin.asin, "asin")


def acos(x):
    """ONNX Acos of float tensor ``x``: the arccosine, in ``[0, pi]`` (NaN outside
    ``[-1, 1]``)."""
    return elemwise(x, intrin.acos, "acos")


def atan(x):
    """ONNX Atan of float tensor ``x``: the arctangent, in ``(-pi/2, pi/2)``."""
    return elemwise(x, intrin.atan, "atan")


for _name, _fn in [("asin", asin), ("acos", acos), ("atan", atan)]:
    register_llvm(_name, _fn, schedule_injective)
