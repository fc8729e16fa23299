"""ONNX Resize of the two trailing (spatial) axes: nearest, linear and cubic interpolation,
with or without antialiasing, and TensorFlow's crop-and-resize.

Linear and cubic are separable filters, written as ONNX's reference computes them: an
output coordinate maps to a source coordinate ``x``; with ``base = floor(x)`` and
``r = x - base``, tap ``i`` of the axis reads ``base + i`` (clamped to the axis: edge
padding) with weight
``kernel(s * (i - r))``: the triangle ``1 - |t|`` for linear, Keys' cubic of coefficient
``a`` for cubic, ``s`` the scale where antialiasing a downsampling axis (wider, more
taps) and 1 otherwise. Antialiased weights, and those of ``exclude_outside`` (taps past
the axis weigh 0), are divided by their sum."""

from __future__ import annotations

import math
from fractions import Fraction

from .. import te
from ..errors import ShapeError
from ..ir import expr as E
from .cpu_schedule import const_int, same_shape, schedule_injective
from .register import register_llvm

COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_half_pixel_for_nn", "half_pixel_symmetric", "tf_crop_and_resize")
MODES = ("nearest", "linear", "cubic")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source_coordinate(o, scale, in_size, out_size, out_int, mode, roi=None):
    """The input coordinate (float32) that output coordinate ``o`` maps to; ``out_size``
    is the output length before rounding (``in_size * scale`` when scales are given), as
    ONNX's align_corners formula uses it, ``out_int`` the output length; ``roi`` the
    axis's ``(start, end)`` for tf_crop_and_resize."""
    of = o.astype("float32")
    if mode == "half_pixel":
        return (of + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        # The centre of the input maps to the centre of the (rounded) output.
        in_f = in_size.astype("float32")
        offset = in_f / 2.0 * (1.0 - out_int.astype("float32") / out_size)
        return offset + (of + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return te.if_then_else(out_size > 1.0, (of + 0.5) / scale - 0.5, te.const(0.0))
    if mode == "align_corners":
        denom = te.max(out_size - 1.0, 1.0)
        return of * (in_size - 1).astype("float32") / denom
    if mode == "asymmetric":
        return of / scale
    if mode == "tf_crop_and_resize":
        start, end = (te.const(float(v)) for v in roi)
        span = (in_size - 1).astype("float32")
        inside = of * (end - start) * span / te.max(out_size - 1.0, 1.0)
        return start * span + te.if_then_else(out_size > 1.0, inside,
                                              (end - start) * span / 2.0)
    return (of + 0.5) / scale  # tf_half_pixel_for_nn


def _kernel_weight(t, mode: str, a: float, near=None):
    """The filter at ``t``: the triangle (linear) or Keys' cubic with coefficient ``a``.
    ``near``: whether ``|t| <= 1`` is known (True / False) or not (None)."""
    t = te.abs(t)
    if mode == "linear":
        return 1.0 - t if near else te.max(1.0 - t, 0.0)
    t2 = t * t
    t3 = t2 * t
    inner = (a + 2.0) * t3 - (a + 3.0) * t2 + 1.0
    outer = a * t3 - 5.0 * a * t2 + 8.0 * a * t - 4.0 * a
    if near is not None:
        return inner if near else outer
    return te.if_then_else(t <= 1.0, inner, te.if_then_else(t < 2.0, outer, te.const(0.0)))


def filter_taps(mode: str, scale, antialias: bool) -> tuple:
    """``(first, stop, s)``: the taps ``range(first, stop)`` of one axis and the factor
    of the filter's argument, as ONNX's reference sets them (a downsampling axis
    antialiased reads ``1/scale`` times as many input points)."""
    reach = 1 if mode == "linear" else 2
    if not antialias or scale >= 1.0:
        return 1 - reach, 1 + reach, 1.0
    first = int(math.floor(-reach / scale) + 1)
    return first, 2 - first, scale


def _axis_taps(x_src, in_size, mode: str, taps: tuple, a: float, exclude_outside: bool,
               normalise: bool):
    """``([(index, weight)], total)`` of one axis's taps at source coordinate ``x_src``:
    ``total`` is the sum of the weights where they are to be normalised (antialiasing,
    or taps excluded outside the input), else None. The caller divides once by it, not
    each weight: a weight divided by the sum of all weights, read by every tap of the
    other axis, made the expression grow with the cube of the taps.

    ONNX's reference takes ``base`` one lower where ``x_src`` is an integer (``r`` in
    ``(0, 1]``); taking the floor (``r`` in ``[0, 1)``) moves the taps by one where the
    filter is 0 at both ends, so the sums are the same, without a select per tap. Without
    antialiasing each tap's ``|i - r|`` is on one side of 1, so it takes one branch of the
    filter."""
    first, stop, s = taps
    base = te.floor(x_src)
    r = x_src - base
    base_i = base.astype("int32")
    out = []
    for i in range(first, stop):
        w = _kernel_weight((i - r) * s, mode, a, near=i in (0, 1) if s == 1.0 else None)
        at = base_i + i
        if exclude_outside:
            w = te.if_then_else(te.all(at >= 0, at < in_size), w, te.const(0.0))
        out.append((te.min(te.max(at, 0), in_size - 1), w))
    total = None
    if normalise or exclude_outside:
        total = out[0][1]
        for _, w in out[1:]:
            total = total + w
    return out, total


def scaled_size(size, scale: float):
    """ONNX Resize's output length for an input length ``size`` and a ``scale``:
    ``floor(size * scale)``, an int where ``size`` is one; for a symbolic size the same
    floor in integer arithmetic, ``size * p // q`` with ``p / q`` the scale as an exact
    fraction (a binary float is one), so the graph's type rule and the kernel give one
    expression: ``height * 2`` for a scale of 2, ``height // 2`` for 0.5."""
    static = const_int(size) if isinstance(size, E.PrimExpr) else int(size)
    if static is not None:
        return int(static * scale)
    ratio = Fraction(scale)
    scaled = size * ratio.numerator
    return scaled if ratio.denominator == 1 else scaled // ratio.denominator


def _nearest(c, in_size, mode):
    if mode == "round_prefer_floor":
        i = te.ceil(c - 0.5)
    elif mode == "round_prefer_ceil":
        i = te.floor(c + 0.5)
    elif mode == "floor":
        i = te.floor(c)
    else:
        i = te.ceil(c)
    return te.min(te.max(i.astype("int32"), 0), in_size - 1)


def resize(x, scales=None, sizes=None, mode: str = "nearest",
           coordinate_transformation_mode: str = "half_pixel",
           nearest_mode: str = "round_prefer_floor", cubic_coeff_a: float = -0.75,
           exclude_outside: bool = False, antialias: bool = False, roi=None,
           extrapolation_value: float = 0.0, axes=(-2, -1)):
    """ONNX Resize (opset 13+) of two axes of ``x``, by default its two trailing ones.

    Parameters
    ----------
    x : Tensor
        Rank >= 2, e.g. NCHW; float.
    scales, sizes : sequence, one of them
        Per axis of ``x`` (ONNX form) or for the two resized axes only; the other axes
        must keep their size.
    mode : "nearest", "linear" or "cubic"
    coordinate_transformation_mode, nearest_mode : str
        As in ONNX (see ``COORDINATE_MODES`` / ``NEAREST_MODES``).
    cubic_coeff_a, exclude_outside, antialias : as in ONNX
        Antialiasing needs static scales (it sets the number of taps).
    roi : sequence of 4 floats, optional
        ``(start_h, start_w, end_h, end_w)`` of tf_crop_and_resize, in [0, 1].
    extrapolation_value : float
        tf_crop_and_resize's value where the source coordinate leaves the input.
    axes : pair of int
        The resized axes (height, then width), in increasing order: ``(2, 3)`` for a
        channel-blocked ``[N, C/b, H, W, b]`` activation, whose lanes of channels stay
        innermost.

    Returns
    -------
    Tensor
        The resized tensor (same dtype), tagged ``"injective"``.
    """
    if mode not in MODES:
        raise ShapeError(f"resize: mode={mode!r}; allowed: {', '.join(MODES)}")
    if coordinate_transformation_mode not in COORDINATE_MODES:
        raise ShapeError(f"resize: coordinate_transformation_mode="
                         f"{coordinate_transformation_mode!r}; allowed: {COORDINATE_MODES}")
    if nearest_mode not in NEAREST_MODES:
        raise ShapeError(f"resize: nearest_mode={nearest_mode!r}; allowed: {NEAREST_MODES}")
    if (scales is None) == (sizes is None):
        raise ShapeError("resize: give exactly one of scales= and sizes=")
    crop = coordinate_transformation_mode == "tf_crop_and_resize"
    if crop and (roi is None or len(roi) != 4):
        raise ShapeError(f"resize: tf_crop_and_resize needs roi=(start_h, start_w, end_h, "
                         f"end_w), got {roi}")
    rank = len(x.shape)
    spatial = tuple(a % rank for a in axes) if rank else ()
    if len(spatial) != 2 or not spatial[0] < spatial[1]:
        raise ShapeError(f"resize: axes={tuple(axes)} must be two increasing axes of an "
                         f"input of rank {rank}")
    given = list(scales if sizes is None else sizes)
    if len(given) == rank:
        kept = [k for k in range(rank) if k not in spatial]
        if any(float(given[k]) != 1.0 for k in kept) if sizes is None else not same_shape(
                tuple(E.as_expr(given[k]) for k in kept), tuple(x.shape[k] for k in kept)):
            raise ShapeError(f"resize: only axes {spatial} may change size, got {given}")
        given = [given[k] for k in spatial]
    elif len(given) != 2:
        raise ShapeError(f"resize: {len(given)} scales or sizes for an input of rank "
                         f"{rank}; give one per axis or one per resized axis")
    in_h, in_w = (x.shape[k] for k in spatial)
    if sizes is not None:
        out_h, out_w = (E.as_expr(v) for v in given)
        sh = out_h.astype("float32") / in_h.astype("float32")
        sw = out_w.astype("float32") / in_w.astype("float32")
        static = [const_int(o) for o in (out_h, out_w)]
        ratios = [None if None in (o, const_int(i)) else o / const_int(i)
                  for o, i in zip(static, (in_h, in_w))]
    else:
        ratios = [float(v) for v in given]
        out_h, out_w = (E.as_expr(scaled_size(d, sc)) for d, sc in zip((in_h, in_w), ratios))
        sh, sw = te.const(ratios[0]), te.const(ratios[1])
    if antialias and mode != "nearest" and None in ratios:
        raise ShapeError("resize: antialias needs static scales (they set its filter's width)")
    ctm = coordinate_transformation_mode
    geometry = [(in_h, out_h, sh), (in_w, out_w, sw)]
    rois = [(roi[0], roi[2]), (roi[1], roi[3])] if crop else [None, None]
    taps = [filter_taps(mode, ratio, antialias) if mode != "nearest" else None
            for ratio in ratios]

    def read(*idx):
        def at(h, w):  # x at the output's index, (h, w) on the resized axes
            return x[idx[:spatial[0]] + (h,) + idx[spatial[0] + 1:spatial[1]] + (w,)
                     + idx[spatial[1] + 1:]]

        out_idx = (idx[spatial[0]], idx[spatial[1]])
        src = [_source_coordinate(o, sc, n, n.astype("float32") * sc, m, ctm, r)
               for o, (n, m, sc), r in zip(out_idx, geometry, rois)]
        if mode == "nearest":
            value = at(*(_nearest(c, n, nearest_mode) for c, (n, _, _) in zip(src, geometry)))
        else:
            (rows, row_total), (cols, col_total) = (
                _axis_taps(c, n, mode, t, cubic_coeff_a, exclude_outside,
                           normalise=t[2] != 1.0)
                for c, (n, _, _), t in zip(src, geometry, taps))
            value = None
            for h, wh in rows:
                row = None
                for w, ww in cols:
                    term = at(h, w) * ww.astype(x.dtype)
                    row = term if row is None else row + term
                term = row * wh.astype(x.dtype)
                value = term if value is None else value + term
            for total in (row_total, col_total):
                if total is not None:
                    value = value * (1.0 / total).astype(x.dtype)
        if crop:
            inside = te.all(*(te.all(c >= 0.0, c <= (n - 1).astype("float32"))
                              for c, (n, _, _) in zip(src, geometry)))
            value = te.if_then_else(inside, value, te.const(extrapolation_value, x.dtype))
        return value

    shape = list(x.shape)
    shape[spatial[0]], shape[spatial[1]] = out_h, out_w
    # The rows up to the height form the parallel loop (cpu_schedule._row_axes): the
    # height's taps are computed once per row, the width's once per output vector.
    return te.compute(tuple(shape), read, name="resize", tag="injective",
                      attrs={"parallel_axes": spatial[1]})


register_llvm("resize", resize, schedule_injective)
