"""ONNX DeformConv: a 2-D convolution whose every tap reads the input at its window
position moved by an offset the ``offset`` input gives per output pixel, tap and offset
group, by bilinear interpolation (pixels outside the image read 0), its product scaled
by an optional ``mask`` (Deformable ConvNets v1 and v2, torchvision's ``deform_conv2d``).

Input channels are split into ``groups`` as a grouped convolution's, and separately into
``offset_groups`` sharing their offsets and mask. Each output element sums its group's
channels times the kernel's taps: a reduction the library's default schedule runs (no
tiling template: a gather per tap decides its cost).
"""

from __future__ import annotations

from .. import te
from ..errors import DTypeError, ShapeError
from ..ir import dtype as dt
from .cpu_schedule import const_int, schedule_reduce
from .grid_sample import bilinear_zeros
from .register import register_llvm
from .utils import shape_text


def deform_conv2d(x, weight, offset, mask=None, strides=(1, 1), padding=(0, 0, 0, 0),
                  dilation=(1, 1), groups: int = 1, offset_groups: int = 1):
    """``[N, K, OH, OW]``: ONNX DeformConv of ``x`` ``[N, C, H, W]`` with ``weight``
    ``[K, C / groups, R, S]``, ``offset`` ``[N, offset_groups * R * S * 2, OH, OW]`` (per
    offset group and tap, the row's offset then the column's) and ``mask`` ``[N,
    offset_groups * R * S, OH, OW]`` or None (every tap's product whole).

    Parameters
    ----------
    x, weight, offset, mask : Tensor
        Of one float dtype.
    strides, dilation : tuple of int
        Per spatial axis.
    padding : tuple of int
        (top, left, bottom, right).
    groups, offset_groups : int
        How many groups the channels are split into for the weights and for the
        offsets.

    Raises
    ------
    DTypeError
        Inputs that are not of one float dtype.
    ShapeError
        Channels that the groups do not divide, or a weight, offset or mask whose
        shape does not fit the others.
    """
    tensors = [t for t in (x, weight, offset, mask) if t is not None]
    if not dt.is_float(x.dtype) or any(t.dtype != x.dtype for t in tensors):
        raise DTypeError("deform_conv2d: x, weight, offset and mask must have one float "
                         f"dtype, got {', '.join(t.dtype for t in tensors)}")
    N = x.shape[0]
    OH, OW = offset.shape[2:]
    C = const_int(x.shape[1])
    K, per_group, R, S = (const_int(d) for d in weight.shape)
    if None in (C, K, per_group, R, S) or per_group * groups != C or K % groups \
            or C % offset_groups:
        raise ShapeError(f"deform_conv2d: x {shape_text(x.shape)} and weight "
                         f"{shape_text(weight.shape)} with groups={groups} and "
                         f"offset_groups={offset_groups}: constant channels and kernel, "
                         "which the groups divide, the weight reading C / groups of them")
    taps = R * S
    if const_int(offset.shape[1]) != offset_groups * taps * 2 or (
            mask is not None and const_int(mask.shape[1]) != offset_groups * taps):
        raise ShapeError(f"deform_conv2d: offset {shape_text(offset.shape)} (and mask) "
                         f"must have {offset_groups * taps * 2} (and {offset_groups * taps}) "
                         f"channels for {offset_groups} offset groups of a {R} x {S} kernel")
    per_offset_group = C // offset_groups
    wide = "float32" if dt.bits(x.dtype) < 32 else x.dtype
    c = te.reduce_axis((0, per_group), name="c")
    r = te.reduce_axis((0, R), name="r")
    s_ = te.reduce_axis((0, S), name="s")

    def body(n, k, i, j):
        channel = k // (K // groups) * per_group + c
        og = channel // per_offset_group
        tap = r * S + s_
        # Positions in float32 at least: a 16-bit one loses the pixel past 2048.
        dy = offset[n, (og * taps + tap) * 2, i, j].astype(wide)
        dx = offset[n, (og * taps + tap) * 2 + 1, i, j].astype(wide)
        y = (i * strides[0] - padding[0] + r * dilation[0]).astype(wide) + dy
        col = (j * strides[1] - padding[1] + s_ * dilation[1]).astype(wide) + dx
        value = bilinear_zeros(x, (n, channel), y, col)
        if mask is not None:
            value = value * mask[n, og * taps + tap, i, j].astype(wide)
        return te.sum(value * weight[k, c, r, s_].astype(wide), axis=[c, r, s_])

    out = te.compute((N, K, OH, OW), body, name="deform_sum")
    return te.compute(out.shape, lambda *ix: out(*ix).astype(x.dtype), name="deform_conv2d",
                      tag="injective")


register_llvm("deform_conv2d", deform_conv2d, schedule_reduce)
