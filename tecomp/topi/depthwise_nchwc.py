"""Depthwise conv2d on channel-blocked activations (NCHW{b}c in, NCHW{b}c out).

Layouts, with ``b`` the block of channels (:mod:`tecomp.topi.conv2d_nchwc`'s):

- data ``[N, ceil(C/b), H, W, b]``: channel ``c`` of point (y, x) at
  ``[n, c // b, y, x, c % b]``;
- kernel ``[ceil(C/b), R, S, b]``: ``[o, r, s, i]`` is the OIHW weight ``[o*b + i, 0, r, s]``
  (:func:`pack_depthwise_kernel`, once per weight; a last block short of ``b`` channels
  is zero-padded);
- output ``[N, ceil(C/b), OH, OW, b]``.

Each output point's ``b`` channels are one vector: a window tap is one vector load of the
input point, one of the weights and a multiply-add, with no broadcast, no gather and no
masked tail, whatever the stride (the planar kernel computes every input column of a
strided row instead). The register tile is ``tile_oh`` rows by ``tile_ow`` columns of
vectors, the window unrolled over it; the zero border is the reduction's ``where``
condition, which loop partitioning decides per unrolled column and hoists per row, so the
input is read in place. So a MobileNet's blocked pointwise convolutions
(:mod:`tecomp.topi.conv2d_nchwc`) need no layout transform around its depthwise layers.

The multiplier is 1 (``K == C``), the depthwise convolution of MobileNets and
EfficientNets; a channel count that ``b`` does not divide is padded to whole blocks.

Workload: ``depthwise_conv2d_nchwc(data_shape, kernel_shape, strides, padding, dilation,
dtype)`` with the blocked ``data_shape = (N, ceil(C/b), H, W, b)`` and the logical OIHW
``kernel_shape = (C, 1, R, S)``.
"""

from __future__ import annotations

import numpy as np

from .. import te
from ..autotune import get_config, template
from ..runtime import aligned
from . import cpu_tiling
from .conv2d import _ceil_div, _conv_workload, _divisors, _geometry, _shape_of, nominal_size
from .conv2d_nchwc import SYMBOLIC_TILE_COLUMNS
from .group import cache_row, crop, epilogue_place, find_anchor, group_output, inline_epilogue
from .strategy import Implementation, register_implementation

#: Output columns a tile may take (divisors of the width, at most this many).
MAX_TILE_COLUMNS = 16

#: Output rows a tile may take.
TILE_ROWS = (1, 2, 4)


def pack_depthwise_kernel(kernel: np.ndarray, b: int) -> np.ndarray:
    """A ``[C, 1, R, S]`` numpy ``kernel`` as ``[ceil(C/b), R, S, b]``, a last block short
    of ``b`` channels zero-padded (see the module docstring)."""
    C, one, R, S = kernel.shape
    if one != 1:
        raise ValueError(f"pack_depthwise_kernel: kernel {kernel.shape} must be [C, 1, R, S] "
                         f"(channel multiplier 1)")
    blocks = -(-C // b)
    padded = np.zeros((blocks * b, R, S), kernel.dtype)
    padded[:C] = kernel[:, 0]
    return aligned.ascontiguous(padded.reshape(blocks, b, R, S).transpose(0, 2, 3, 1))


def _check_shapes(data_shape, kernel_shape, what):
    """(C, R, S, b) of a blocked depthwise workload, or a ValueError naming the shapes."""
    _, Cb, _, _, b = data_shape
    C, KC, R, S = (int(d) for d in kernel_shape)
    Cb, b = int(Cb), int(b)
    if KC != 1 or -(-C // b) != Cb:
        raise ValueError(f"{what}: kernel {tuple(kernel_shape)} must be [C, 1, R, S] with C "
                         f"channels in the {Cb} blocks of {b} of the data "
                         f"{tuple(data_shape)} (channel multiplier 1)")
    return C, R, S, b


def define_depthwise_nchwc_knobs(cfg, OH, OW, b):
    """``tile_ow`` (output columns of the register tile, a divisor of OW up to
    ``MAX_TILE_COLUMNS``), ``tile_oh`` (its rows, of ``TILE_ROWS``), ``unroll_kh`` (the
    window's rows unrolled as well as its columns) and ``accumulate`` (``"tile"``: each
    window tap updates the whole tile; ``"row"``: one row of the tile at a time, fewer
    registers live): the planar depthwise kernel's space, on vectors of channels.

    The fallback (:func:`tecomp.topi.cpu_tiling.blocked_depthwise_tile`) fills the
    accumulator registers with one row of columns: each tap loads its own input vector,
    so loads bound the kernel and a second row shares nothing a first row does not.
    A symbolic size is chosen for as :func:`~tecomp.topi.conv2d_nchwc.
    define_conv2d_nchwc_knobs` chooses: as if it were 224, the fallback tile at most
    ``SYMBOLIC_TILE_COLUMNS`` wide."""
    symbolic = not isinstance(OW, int)
    OH, OW = nominal_size(OH), nominal_size(OW)
    columns = [d for d in _divisors(OW) if d <= MAX_TILE_COLUMNS]
    rows = [r for r in TILE_ROWS if r <= OH] or [1]
    cfg.define_knob("tile_ow", columns)
    cfg.define_knob("tile_oh", rows)
    cfg.define_knob("unroll_kh", [True, False])
    cfg.define_knob("accumulate", ["tile", "row"])
    if cfg.is_fallback:
        rows, cols = cpu_tiling.blocked_depthwise_tile(
            cpu_tiling.current_caps(), b,
            [d for d in columns if d <= SYMBOLIC_TILE_COLUMNS] if symbolic else columns, rows)
        cfg.fallback_knob("tile_ow", cols)
        cfg.fallback_knob("tile_oh", rows)


def compute_depthwise_conv2d_nchwc(cfg, data, kernel, strides=(1, 1), padding=(0, 0),
                                   dilation=(1, 1), block=None):
    """``[N, ceil(C/b), OH, OW, b]`` from blocked ``data`` and a packed ``kernel``
    ``[ceil(C/b), R, S, b]`` (tag ``"depthwise_conv2d_nchwc"``); ``strides``,
    ``padding`` (``(ph, pw)`` or ``(top, left, bottom, right)``) and ``dilation`` as for
    :func:`tecomp.topi.compute_depthwise_conv2d`; ``block``, if given, must be the data's
    ``b``. ``cfg`` is the operator's config."""
    what = "depthwise_conv2d_nchwc"
    data_shape = _shape_of(data)
    Cb, R, S, b = (int(d) for d in kernel.shape)
    if block is not None and int(block) != data_shape[4]:
        raise ValueError(f"{what}: block={block}, but the data {data_shape} is blocked by "
                         f"{data_shape[4]}")
    if b != data_shape[4] or Cb != data_shape[1]:
        raise ValueError(f"{what}: the kernel {(Cb, R, S, b)} does not fit the blocked data "
                         f"{data_shape} (need [C/b, R, S, b])")
    N, _, H, W, _ = data_shape
    (*_, sh, sw, dh, dw, pads, OH, OW) = _geometry(
        (N, Cb * b, H, W), (Cb * b, 1, R, S), strides, padding, dilation, what)
    define_depthwise_nchwc_knobs(cfg, OH, OW, b)
    top, left, bottom, right = pads
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    # A row of symbolic width is computed in whole tiles, the columns past it from zeros
    # past the input, and cropped.
    tile = cfg["tile_ow"].val
    whole = isinstance(OW, int) and OW % tile == 0
    width = OW if whole else _ceil_div(OW, tile) * tile

    def conv(n, c, y, x, i):
        iy, ix = y * sh + ry * dh - top, x * sw + rx * dw - left
        inside = [cond for cond, pad in ((iy >= 0, top), (iy < H, bottom), (ix >= 0, left),
                                         (ix < W, right or not whole)) if pad]
        return te.sum(data[n, c, iy, ix, i] * kernel[c, ry, rx, i], axis=[ry, rx],
                      where=te.all(*inside) if inside else None)

    out = te.compute((N, Cb, OH, width, b), conv, name="depthwise",
                     tag="depthwise_conv2d_nchwc")
    if whole:
        return out
    return crop(out, (N, Cb, OH, OW, b))


def schedule_depthwise_conv2d_nchwc(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_depthwise_conv2d_nchwc`
    and any elementwise epilogue (bias, ReLU6, a residual add, on the blocked layout),
    computed at the register tile from its accumulators, or over the stored rows of the
    parallel task (the ``epilogue`` knob, :func:`tecomp.topi.group.epilogue_place`: the
    window's weights stay in registers along a row, so a SiLU's runs over the rows
    untuned) (``cfg`` is the operator's config). Channel blocks and tile rows run in
    parallel; the window is unrolled (its rows with ``unroll_kh``), the tile's columns
    unrolled and the channel block vectorized."""
    what = "schedule_depthwise_conv2d_nchwc"
    out = group_output(outs, what)
    s = te.create_schedule(out.op)
    conv = find_anchor(out, "depthwise_conv2d_nchwc", what)
    # The window's weights stay in registers along a row (a channel block's R x S
    # vectors): the epilogue's place is a knob (tecomp.topi.group.epilogue_place).
    if epilogue_place(cfg, out, conv, what, weights_stay=True) == "row":
        n, c, y, x, i = s[out].op.axis
        yo, yi = s[out].split(y, factor=cfg["tile_oh"].val)
        s[out].reorder(n, c, yo, yi, x, i)
        row, CL = cache_row(s, out, conv, what, s[out].fuse(n, c, yo))
        n, c, y, x, i = s[row].op.axis
        xo, xi = s[row].split(x, factor=cfg["tile_ow"].val)
        s[row].reorder(n, c, xo, y, xi, i)
        tile, stage = (y, xi, i), row
    else:
        CL = inline_epilogue(s, out, conv, what)
        n, c, y, x, i = s[out].op.axis
        yo, yi = s[out].split(y, factor=cfg["tile_oh"].val)
        xo, xi = s[out].split(x, factor=cfg["tile_ow"].val)
        s[out].reorder(n, c, yo, xo, yi, xi, i)
        s[out].parallel(s[out].fuse(n, c, yo))
        tile, stage = (yi, xi, i), out
    s[stage].unroll(tile[0])
    s[stage].unroll(tile[1])
    s[stage].vectorize(tile[2])
    s[CL].compute_at(s[stage], xo if cfg["accumulate"].val == "tile" else tile[0])
    _, _, ly, lx, li = s[CL].op.axis
    ry, rx = s[CL].op.reduce_axis
    s[CL].reorder(ry, rx, ly, lx, li)
    if cfg["unroll_kh"].val:
        s[CL].unroll(ry)
    s[CL].unroll(rx)
    s[CL].unroll(ly)
    s[CL].unroll(lx)
    s[CL].vectorize(li)
    return s


@template("depthwise_conv2d_nchwc")
def depthwise_conv2d_nchwc(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0),
                           dilation=(1, 1), dtype="float32"):
    """Tunable depthwise conv2d on blocked activations (see the module docstring); the
    kernel input is the packed ``[ceil(C/b), R, S, b]`` weight."""
    what = "depthwise_conv2d_nchwc"
    _, R, S, b = _check_shapes(data_shape, kernel_shape, what)
    cfg = get_config()
    data = te.placeholder(tuple(data_shape), dtype, name="data")
    kernel = te.placeholder((int(data_shape[1]), R, S, b), dtype, name="kernel")
    out = compute_depthwise_conv2d_nchwc(cfg, data, kernel, strides, padding, dilation)
    return schedule_depthwise_conv2d_nchwc(cfg, [out]), [data, kernel, out]


def _prepack(cfg, kernel, block, **attrs):
    """The ``[C, 1, R, S]`` weight (the graph's constant) blocked like the data."""
    return (pack_depthwise_kernel(kernel, block),)


register_implementation(Implementation(
    "depthwise_conv2d_nchwc", "llvm", compute_depthwise_conv2d_nchwc,
    schedule_depthwise_conv2d_nchwc, template="depthwise_conv2d_nchwc",
    workload=_conv_workload, prepack=_prepack, packed_inputs=(1,), packing_reads_config=False,
    batch_free_config=True))
