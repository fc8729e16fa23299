"""Pooling over the spatial axes of N, C, spatial... tensors (ONNX MaxPool, AveragePool,
GlobalAveragePool, GlobalMaxPool), 1-D, 2-D (NCHW) and 3-D.

A pooling window is a reduction over the kernel's axes whose points outside the input
are masked out (never read); the schedule (``schedule_reduce``) is parallel over N * C
and vectorized along the last output axis. The output rows stay a serial loop of
constant extent, which loop partitioning cuts into border rows (with the padding
conditions) and interior rows (without).
"""

from __future__ import annotations

from ... import te
from ...errors import ShapeError
from ...ir import expr as E
from ..cpu_schedule import const_int, schedule_reduce
from ..reduce_templates import register_row_operator
from ..reduction import nanmax, reduce_compute, reduce_mean

#: For schedule_reduce: the last output axis is vectorized, N * C is the parallel loop.
_LAYOUT = {"inner_axes": 1, "parallel_axes": 2}


def _out_size(size, k, s, d, p0, p1, ceil_mode):
    """ONNX's output length of one spatial axis."""
    span = size + (p0 + p1) - ((k - 1) * d + 1)
    if not ceil_mode:
        return span // s + 1
    out = (span + s - 1) // s + 1
    # A last window that would start in the end padding is dropped.
    c = const_int(E.as_expr(out))
    if c is None:
        return te.if_then_else((out - 1) * s >= size + p0, out - 1, out)
    return out - 1 if (c - 1) * s >= const_int(E.as_expr(size)) + p0 else out


def _attrs(x, kernel, strides, pads, dilations, name):
    """The per-axis kernel, strides, dilations, begin and end pads, checked."""
    nsp = len(kernel)
    if len(x.shape) != nsp + 2:
        raise ShapeError(f"{name}: a {nsp}-D kernel needs a rank-{nsp + 2} tensor "
                         f"(N, C, spatial...), got rank {len(x.shape)}")
    strides = tuple(strides) if strides is not None else (1,) * nsp
    dilations = tuple(dilations) if dilations is not None else (1,) * nsp
    pads = tuple(pads) if pads is not None else (0,) * (2 * nsp)
    for what, v, n in (("strides", strides, nsp), ("dilations", dilations, nsp),
                       ("pads", pads, 2 * nsp)):
        if len(v) != n:
            raise ShapeError(f"{name}: {what}={list(v)} must have {n} values for a "
                             f"{nsp}-D kernel (pads: all begins, then all ends)")
    return tuple(kernel), strides, dilations, pads[:nsp], pads[nsp:]


def _window(x, kernel, strides, pads, dilations, ceil_mode, name):
    """Output shape, reduce axes and ``read(idx) -> (value, inside)`` of a pooling window."""
    kernel, strides, dilations, begin, end = _attrs(x, kernel, strides, pads, dilations,
                                                    name)
    spatial = x.shape[2:]
    out = tuple(_out_size(*a, ceil_mode) for a in zip(spatial, kernel, strides, dilations,
                                                       begin, end))
    axes = [te.reduce_axis((0, k), name=f"r{i}") for i, k in enumerate(kernel)]

    def read(idx):
        pos = [o * s + r.var * d - b
               for o, s, r, d, b in zip(idx[2:], strides, axes, dilations, begin)]
        inside = te.all(*[te.all(p >= 0, p < size) for p, size in zip(pos, spatial)])
        return x[tuple(idx[:2]) + tuple(pos)], inside

    return tuple(x.shape[:2]) + out, axes, read


def _valid_count(start, k, d, size):
    """How many of ``start, start + d, ..., start + (k - 1) * d`` lie in ``[0, size)``."""
    lo = te.max((-start + (d - 1)) // d, 0)
    hi = te.min((size - 1 - start) // d, k - 1)
    return te.max(hi - lo + 1, 0)


def max_pool(x, kernel, strides=None, pads=None, dilations=None, ceil_mode: int = 0):
    """ONNX MaxPool over the spatial axes (as many as ``kernel`` has): the maximum over
    each window; padding never wins, nor does a NaN (a window of NaN only gives -inf), as
    onnxruntime skips them. ``pads`` = the begins of every axis, then the ends (2-D: top,
    left, bottom, right).

    Parameters
    ----------
    x : Tensor
        N, C, spatial... data.
    kernel : tuple of int
        The window's size per spatial axis.
    strides, dilations : tuple of int, optional
        One per spatial axis (default 1).
    pads : tuple of int, optional
        The begins of every spatial axis, then the ends (default 0).
    ceil_mode : int
        1: output sizes round up instead of down (ONNX's ``ceil_mode``).
    """
    name = f"max_pool{len(kernel)}d"
    shape, axes, read = _window(x, kernel, strides, pads, dilations, ceil_mode, name)

    def body(*idx):
        v, inside = read(idx)
        return nanmax(v, axis=axes, where=inside)

    return te.compute(shape, body, name=name, tag=name, attrs=_LAYOUT)


def avg_pool(x, kernel, strides=None, pads=None, dilations=None, ceil_mode: int = 0,
             count_include_pad: int = 0):
    """ONNX AveragePool over the spatial axes: the window's sum divided by the number of
    its input elements (``count_include_pad``: of its elements in the padded input).

    Parameters
    ----------
    x : Tensor
        N, C, spatial... data.
    kernel : tuple of int
        The window's size per spatial axis.
    strides, dilations : tuple of int, optional
        One per spatial axis (default 1).
    pads : tuple of int, optional
        The begins of every spatial axis, then the ends (default 0).
    ceil_mode : int
        1: output sizes round up instead of down (ONNX's ``ceil_mode``).
    count_include_pad : int
        1: divide by the window's size, padding included.
    """
    name = f"avg_pool{len(kernel)}d"
    shape, axes, read = _window(x, kernel, strides, pads, dilations, ceil_mode, name)
    kernel, strides, dilations, begin, end = _attrs(x, kernel, strides, pads, dilations,
                                                    name)

    def body(*idx):
        v, inside = read(idx)
        return te.sum(v, axis=axes, where=inside)

    total = te.compute(shape, body, name=f"{name}.sum", tag=name, attrs=_LAYOUT)

    def average(*idx):
        count = E.IntImm(1)
        for o, k, s, d, b, e, size in zip(idx[2:], kernel, strides, dilations, begin, end,
                                          x.shape[2:]):
            if count_include_pad:
                count = count * _valid_count(o * s, k, d, size + b + e)
            else:
                count = count * _valid_count(o * s - b, k, d, size)
        return total[idx] / count.astype(x.dtype)

    return te.compute(shape, average, name=name, tag=name)


def _fixed_rank(pool, nsp):
    def op(x, kernel, *args, **attrs):
        if len(kernel) != nsp:
            raise ShapeError(f"{pool.__name__}{nsp}d: kernel={list(kernel)} must have "
                             f"{nsp} values")
        return pool(x, kernel, *args, **attrs)

    op.__name__ = f"{pool.__name__}{nsp}d"
    op.__doc__ = f"{nsp}-D {pool.__doc__}"
    return op


max_pool1d, max_pool2d, max_pool3d = (_fixed_rank(max_pool, n) for n in (1, 2, 3))
avg_pool1d, avg_pool2d, avg_pool3d = (_fixed_rank(avg_pool, n) for n in (1, 2, 3))


def global_avg_pool(x):
    """ONNX GlobalAveragePool: the mean over all spatial axes (kept with size 1). ``x`` is
    N, C, spatial... data."""
    return reduce_mean(x, axes=list(range(2, len(x.shape))), keepdims=1)


def global_max_pool(x):
    """ONNX GlobalMaxPool: the maximum over all spatial axes (kept with size 1), NaN
    skipped as in :func:`max_pool`. ``x`` is N, C,
    spatial... data. Unlike ReduceMax, a NaN first element is skipped too (onnxruntime's
    GlobalMaxPool skips NaN wherever it is)."""
    return reduce_compute(x, list(range(2, len(x.shape))), 1, lambda v: v, nanmax,
                          "global_max_pool")


_WINDOW = {"strides": None, "pads": None, "dilations": None, "ceil_mode": 0}
for _fn in (max_pool1d, max_pool2d, max_pool3d):
    register_row_operator(_fn.__name__, _fn, schedule_reduce, kernel=None, **_WINDOW)
for _fn in (avg_pool1d, avg_pool2d, avg_pool3d):
    register_row_operator(_fn.__name__, _fn, schedule_reduce, kernel=None, **_WINDOW,
                          count_include_pad=0)
for _fn in (global_avg_pool, global_max_pool):
    register_row_operator(_fn.__name__, _fn, schedule_reduce)
