"""ONNX Resize of the two trailing (spatial) axes: nearest and linear interpolation."""

from __future__ import annotations

from fractions import Fraction

from .. import te
from ..errors import ShapeError
from ..ir import expr as E
from .cpu_schedule import const_int, same_shape, schedule_injective
from .register import register_llvm

COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_half_pixel_for_nn")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source_coordinate(o, scale, in_size, out_size, mode):
    """The input coordinate (float32) that output coordinate ``o`` maps to; ``out_size``
    is the output length before rounding (``in_size * scale`` when scales are given), as
    ONNX's align_corners formula uses it."""
    of = o.astype("float32")
    if mode == "half_pixel":
        return (of + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return te.if_then_else(out_size > 1.0, (of + 0.5) / scale - 0.5, te.const(0.0))
    if mode == "align_corners":
        denom = te.max(out_size - 1.0, 1.0)
        return of * (in_size - 1).astype("float32") / denom
    if mode == "asymmetric":
        return of / scale
    return (of + 0.5) / scale  # tf_half_pixel_for_nn


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
           nearest_mode: str = "round_prefer_floor"):
    """ONNX Resize (opset 13+) of ``x``'s two trailing axes.

    Parameters
    ----------
    x : Tensor
        Rank >= 2, e.g. NCHW; float.
    scales, sizes : sequence, one of them
        Per axis of ``x`` (ONNX form) or for the two trailing axes only; the leading axes
        must keep their size.
    mode : "nearest" or "linear"
    coordinate_transformation_mode, nearest_mode : str
        As in ONNX (see ``COORDINATE_MODES`` / ``NEAREST_MODES``).

    Returns
    -------
    Tensor
        The resized tensor (same dtype), tagged ``"injective"``.
    """
    if mode not in ("nearest", "linear"):
        raise ShapeError(f"resize: mode={mode!r}; allowed: 'nearest', 'linear'")
    if coordinate_transformation_mode not in COORDINATE_MODES:
        raise ShapeError(f"resize: coordinate_transformation_mode="
                         f"{coordinate_transformation_mode!r}; allowed: {COORDINATE_MODES}")
    if nearest_mode not in NEAREST_MODES:
        raise ShapeError(f"resize: nearest_mode={nearest_mode!r}; allowed: {NEAREST_MODES}")
    if (scales is None) == (sizes is None):
        raise ShapeError("resize: give exactly one of scales= and sizes=")
    given = list(scales if sizes is None else sizes)
    lead = given[:-2]
    if lead and (any(float(v) != 1.0 for v in lead) if sizes is None else not same_shape(
            tuple(E.as_expr(v) for v in lead), tuple(x.shape[:-2]))):
        raise ShapeError(f"resize: only the two trailing axes may change size, got {given}")
    in_h, in_w = x.shape[-2:]
    if sizes is not None:
        out_h, out_w = (E.as_expr(v) for v in given[-2:])
        sh = out_h.astype("float32") / in_h.astype("float32")
        sw = out_w.astype("float32") / in_w.astype("float32")
    else:
        sh, sw = (float(v) for v in given[-2:])
        out_h, out_w = (E.as_expr(scaled_size(d, sc)) for d, sc in ((in_h, sh), (in_w, sw)))
        sh, sw = te.const(sh), te.const(sw)
    ctm = coordinate_transformation_mode

    def read(*idx):
        lead_idx, oh, ow = idx[:-2], idx[-2], idx[-1]
        ch = _source_coordinate(oh, sh, in_h, in_h.astype("float32") * sh, ctm)
        cw = _source_coordinate(ow, sw, in_w, in_w.astype("float32") * sw, ctm)
        if mode == "nearest":
            return x[lead_idx + (_nearest(ch, in_h, nearest_mode),
                                 _nearest(cw, in_w, nearest_mode))]
        ch, cw = te.max(ch, 0.0), te.max(cw, 0.0)
        h0f, w0f = te.floor(ch), te.floor(cw)
        dh, dw = (ch - h0f).astype(x.dtype), (cw - w0f).astype(x.dtype)
        h0 = te.min(h0f.astype("int32"), in_h - 1)
        w0 = te.min(w0f.astype("int32"), in_w - 1)
        h1, w1 = te.min(h0 + 1, in_h - 1), te.min(w0 + 1, in_w - 1)
        top = x[lead_idx + (h0, w0)] * (1.0 - dw) + x[lead_idx + (h0, w1)] * dw
        bottom = x[lead_idx + (h1, w0)] * (1.0 - dw) + x[lead_idx + (h1, w1)] * dw
        return top * (1.0 - dh) + bottom * dh

    shape = tuple(x.shape[:-2]) + (out_h, out_w)
    return te.compute(shape, read, name="resize", tag="injective")


register_llvm("resize", resize, schedule_injective)
