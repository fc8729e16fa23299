"""Cumulative products along an axis (ONNX CumProd): each output element is the product
of the elements before it, written as one masked reduction per element, as
:func:`tecomp.topi.reduction.cumsum` writes cumulative sums."""

from __future__ import annotations

from .. import te
from .cpu_schedule import schedule_reduce
from .reduction import TAG
from .register import register_llvm
from .transform import normalize_axis


def cumprod(x, axis: int = 0, exclusive: int = 0, reverse: int = 0):
    """ONNX CumProd of ``x`` along ``axis``: each element multiplies the elements up to it
    (``exclusive`` leaves itself out, so the first is 1; ``reverse`` takes those after it
    instead). Quadratic in the axis length, which suits the short axes it sees."""
    ndim = len(x.shape)
    axis = normalize_axis(axis, ndim)
    k = te.reduce_axis((0, x.shape[axis]), name="k")

    def body(*idx):
        i = idx[axis]
        if reverse:
            cond = k.var > i if exclusive else k.var >= i
        else:
            cond = k.var < i if exclusive else k.var <= i
        return te.prod(x[idx[:axis] + (k,) + idx[axis + 1:]], axis=k, where=cond)

    return te.compute(x.shape, body, name="cumprod", tag=TAG,
                      attrs={"inner_axes": ndim - 1 - axis})


register_llvm("cumprod", cumprod, schedule_reduce)
