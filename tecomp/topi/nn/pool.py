"""Pooling over the spatial axes of NCHW tensors (ONNX MaxPool / AveragePool / Global*).

A pooling window is a reduction over the kernel's (rh, rw) whose points outside the
input are masked out (never read); the schedule (``schedule_reduce``) is parallel over
N * C * output rows and vectorized along the output width.
"""

from __future__ import annotations

from ... import te
from ...errors import ShapeError
from ...ir import expr as E
from ..cpu_schedule import const_int, schedule_reduce
from ..reduction import reduce_max, reduce_mean
from ..register import register_llvm


def _pair(v, name):
    v = tuple(v)
    if len(v) != 2:
        raise ShapeError(f"pool2d: {name}={list(v)} must have 2 values (height, width)")
    return v


def _out_size(size, k, s, d, p0, p1, ceil_mode):
    """ONNX's output length of one spatial axis."""
    span = size + (p0 + p1) - ((k - 1) * d + 1)
    if not ceil_mode:
        return span // s + 1
    out = (span + s - 1) // s + 1
    # A last window that starts in the end padding is dropped.
    c = const_int(E.as_expr(out))
    if c is not None and (c - 1) * s >= const_int(E.as_expr(size)) + p0:
        return out - 1
    if c is None:
        return te.if_then_else((out - 1) * s >= size + p0, out - 1, out)
    return out


def _window(x, kernel, strides, pads, dilations, ceil_mode):
    """Output shape, reduce axes and ``read(idx) -> (value, inside)`` of a pooling window."""
    if len(x.shape) != 4:
        raise ShapeError(f"pool2d expects an NCHW tensor, got rank {len(x.shape)}")
    (kh, kw), (sh, sw), (dh, dw) = (_pair(kernel, "kernel"), _pair(strides, "strides"),
                                    _pair(dilations, "dilations"))
    if len(pads) != 4:
        raise ShapeError(f"pool2d: pads={list(pads)} must be (top, left, bottom, right)")
    pt, pl, pb, pr = pads
    n, c, h, w = x.shape
    oh = _out_size(h, kh, sh, dh, pt, pb, ceil_mode)
    ow = _out_size(w, kw, sw, dw, pl, pr, ceil_mode)
    rh = te.reduce_axis((0, kh), name="rh")
    rw = te.reduce_axis((0, kw), name="rw")

    def read(idx):
        ni, ci, yi, xi = idx
        y = yi * sh + rh.var * dh - pt
        xx = xi * sw + rw.var * dw - pl
        inside = te.all(y >= 0, y < h, xx >= 0, xx < w)
        return x[ni, ci, y, xx], inside

    return (n, c, oh, ow), (rh, rw), read


def max_pool2d(x, kernel, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
               ceil_mode: int = 0):
    """ONNX MaxPool (2-D, NCHW): the maximum over each window; padding never wins."""
    shape, axes, read = _window(x, kernel, strides, pads, dilations, ceil_mode)

    def body(*idx):
        v, inside = read(idx)
        return te.max(v, axis=list(axes), where=inside)

    return te.compute(shape, body, name="max_pool2d", tag="pool", attrs={"inner_axes": 1})


def _valid_count(start, k, d, size):
    """How many of ``start, start + d, ..., start + (k - 1) * d`` lie in ``[0, size)``."""
    lo = te.max((-start + (d - 1)) // d, 0)
    hi = te.min((size - 1 - start) // d, k - 1)
    return te.max(hi - lo + 1, 0)


def avg_pool2d(x, kernel, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
               ceil_mode: int = 0, count_include_pad: int = 0):
    """ONNX AveragePool (2-D, NCHW): the window's sum divided by the number of its input
    elements (``count_include_pad``: by the kernel size, padding included)."""
    shape, axes, read = _window(x, kernel, strides, pads, dilations, ceil_mode)

    def body(*idx):
        v, inside = read(idx)
        return te.sum(v, axis=list(axes), where=inside)

    total = te.compute(shape, body, name="avg_pool2d.sum", tag="pool",
                       attrs={"inner_axes": 1})
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    h, w = x.shape[2:]
    pt, pl, pb, pr = pads

    def average(*idx):
        if count_include_pad:
            # Points in the padded input count (ceil_mode may overhang even that).
            ch = _valid_count(idx[2] * sh, kh, dh, h + pt + pb)
            cw = _valid_count(idx[3] * sw, kw, dw, w + pl + pr)
        else:
            ch = _valid_count(idx[2] * sh - pt, kh, dh, h)
            cw = _valid_count(idx[3] * sw - pl, kw, dw, w)
        return total[idx] / (ch * cw).astype(x.dtype)

    return te.compute(shape, average, name="avg_pool2d", tag="elemwise")


def global_avg_pool(x):
    """ONNX GlobalAveragePool: the mean over all spatial axes (kept with size 1)."""
    return reduce_mean(x, axes=list(range(2, len(x.shape))), keepdims=1)


def global_max_pool(x):
    """ONNX GlobalMaxPool: the maximum over all spatial axes (kept with size 1)."""
    return reduce_max(x, axes=list(range(2, len(x.shape))), keepdims=1)


register_llvm("max_pool2d", max_pool2d, schedule_reduce)
register_llvm("avg_pool2d", avg_pool2d, schedule_reduce)
register_llvm("global_avg_pool", global_avg_pool, schedule_reduce)
register_llvm("global_max_pool", global_max_pool, schedule_reduce)
