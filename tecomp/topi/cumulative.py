"""Cumulative products along an axis (ONNX CumProd): each output element is the product
of the elements before it, one masked reduction per element, as
:func:`tecomp.topi.reduction.cumsum` sums them."""

from __future__ import annotations

from .. import te
from .cpu_schedule import schedule_reduce
from .reduction import cumulative
from .register import register_llvm


def cumprod(x, axis: int = 0, exclusive: int = 0, reverse: int = 0):
    """ONNX CumProd of ``x`` along ``axis``: each element multiplies the elements up to it
    (``exclusive`` leaves itself out, so the first is 1; ``reverse`` takes those after it
    instead)."""
    return cumulative(x, te.prod, "cumprod", axis, exclusive, reverse)


register_llvm("cumprod", cumprod, schedule_reduce)
