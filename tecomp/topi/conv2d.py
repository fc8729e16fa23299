"""2-D convolutions in NCHW for CPUs (x86, AArch64): ``conv2d`` and ``depthwise_conv2d``,
each a compute (:func:`compute_conv2d`, :func:`compute_depthwise_conv2d`), a schedule of
the compute with any elementwise epilogue (bias, activation, a residual add), computed at
the output tile from the accumulators (:func:`schedule_conv2d`,
:func:`schedule_depthwise_conv2d`), and tunable templates. Blockings and register tiles
are counted in the target's vectors (``target.caps``), so AArch64 gets NEON-sized ones.

Inputs and outputs stay NCHW. Inside, ``conv2d`` works on channel-blocked (NCHW[x]c)
tensors, the layout of TVM's ``conv2d_NCHWc`` schedule for x86:

- ``data_vec[n, C/ic_bn, Hp, Wp, ic_bn]``: the padded input with ``ic_bn`` channels
  innermost (one packing pass, in parallel, so the hot loop has no bounds checks), or no
  copy at all (``data_layout="nchw"`` below);
- ``kernel_vec[K/oc_bn, C/ic_bn, R, S, ic_bn, oc_bn]``: the kernel with ``oc_bn`` output
  channels innermost, so one vector load gives ``oc_bn`` weights;
- ``conv[n, K/oc_bn, OH, OW, oc_bn]``: the micro-kernel accumulates a tile of
  ``oh_bn x reg_n`` output points by ``oc_bn`` channels in a local buffer (``cache_write``)
  that LLVM keeps in vector registers: per step of the reduction it loads the ``oc_bn``
  weights once and does one fused multiply-add per output point with the input value
  broadcast from memory. The reduction runs over input-channel blocks, kernel rows and
  columns and the ``ic_bn`` channels of a block (optionally with the kernel columns
  unrolled); the loops over (batch, output-channel block, output rows) are fused and
  run in parallel;
- the unpack to NCHW happens at the tile, straight from the accumulators (the blocked
  ``conv`` tensor is never written to memory).

Knobs: ``tile_ic`` (ic_bn, a divisor of C), ``tile_oc`` (oc_bn, a divisor of K),
``tile_ow`` (reg_n; a divisor of OW, or, when OW has none that fits a register tile, a
value that pads the output width with columns that are computed and dropped),
``tile_oh`` (rows per tile), ``unroll_kw``, ``order`` (which of output-channel block and
output row is the outer parallel loop; ``"oc_plane"``, offered for small output planes:
channel blocks in parallel, each accumulating its whole output plane with the reduction
outermost, so a block of weights serves every row while it is in cache) and
``data_layout``: ``"nchwc"`` reads the input from the blocked ``data_vec`` above,
``"nchw"`` from the NCHW input itself, with no copy at all (the micro-kernel broadcasts
single input values, so any layout serves). There the zero padding is a condition on each
read, and loop partitioning (:mod:`tecomp.ir.transform.partition`) cuts the parallel row
loop and the tile loop so that only the border tiles keep it, each specialised to its
border; the row cut needs the row to be monotone in the parallel loop, i.e.
``order="oh_oc"`` (a batch is then a serial outer loop). Reading in place saves the
packing pass and its memory traffic (5-7% of a ResNet-50 3x3 layer), at the price of
input channels a plane apart instead of next to each other. The fallback config reads in
place, sizes its register tile and channel blocks from the target's registers, FMA
latency and L1 (see :func:`_conv_fallback`) and
puts rows outside while the input is larger than the kernel, output-channel blocks
outside once the kernel is larger (:func:`_fallback_order`).

A 1x1 convolution with no padding also offers ``data_layout="gemm"``, its fallback: the
product ``W[K, C] x X[C, OH*OW]`` per batch item (with a stride, over a copy of the points
it reads), in register tiles of ``tile_oc`` output channels (one broadcast weight each) by
``gemm_vecs`` vectors of output points, read and written in place as contiguous vectors of
the NCHW planes (a residual add in the epilogue reads whole vectors too); ``order`` picks
whether column blocks or row tiles run in parallel (:func:`_pointwise_fallback`).

Depthwise conv2d reads its input in place as well: channels run in parallel, and each
``tile_h x tile_w`` output tile accumulates in registers, vectorized along the output
row, with the padded borders cut out of the row and tile loops. With a column stride it
accumulates every column of the tile's input span (contiguous loads instead of gathers)
and keeps every ``sw``-th at the write-back.

The batch may be symbolic (a ``te.var``): nothing but the loop bounds depends on it, so
one kernel serves every batch size with the config of the batch-1 workload.

Workload keys (what a graph produces):

- ``conv2d(data_shape, kernel_shape, strides, padding, dilation, dtype)`` with
  ``data_shape = (N, C, H, W)``, ``kernel_shape = (K, C, R, S)``, ``strides = (sh, sw)``,
  ``padding = (top, left, bottom, right)`` (or ``(ph, pw)``), ``dilation = (dh, dw)``;
- ``conv2d_packed_kernel(...)``: the same arguments and knobs as ``conv2d`` (the logical
  OIHW ``kernel_shape``), but the kernel *input* is ``kernel_vec`` itself, in the blocked
  layout of the config (``[K/oc_bn, C/ic_bn, R, S, ic_bn, oc_bn]``). A weight that does not
  change between calls (an ONNX initializer) is packed once — ``pack_conv2d_kernel`` in
  numpy, or ``conv2d_pack_kernel`` as a compute a graph can constant-fold — with the
  blocking read off the template's kernel tensor (``kernel_blocking(tensors[1])``), as ONNX
  Runtime prepacks initializers at session creation;
- ``depthwise_conv2d(data_shape, kernel_shape, strides, padding, dilation, dtype)`` with
  ``kernel_shape = (C * multiplier, 1, R, S)``.
"""

from __future__ import annotations

import numpy as np

from .. import te
from ..autotune import get_config, template
from ..ir.arith import simplify_size
from ..runtime import aligned
from . import cpu_tiling
from .group import find_anchor, group_output, inline_epilogue
from .strategy import Implementation, register_implementation
from .utils import fp32_lanes

def _pads(padding):
    padding = tuple(int(p) for p in padding)
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    if len(padding) == 4:
        return padding
    raise ValueError(f"padding={padding}: give (ph, pw) or (top, left, bottom, right)")


def _out_size(size, k, stride, lo, hi, dil):
    """An output length; a symbolic one simplified, so that it is the expression an
    elementwise epilogue over the graph's type of the output has (``height``, not
    ``height + 1 + 1 - 2 - 1 + 1``)."""
    out = (size + lo + hi - dil * (k - 1) - 1) // stride + 1
    return out if isinstance(size, int) else simplify_size(out)


def _ceil_div(a, b):
    return (a + b - 1) // b


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def _size(dim):
    """A batch, height or width: an int, or the expression of a symbolic size (one kernel
    serves every size; only loop bounds and the padding tests depend on it)."""
    value = getattr(dim, "value", dim)
    return int(value) if isinstance(value, (int, np.integer)) else dim


# Tiles along a symbolic output height or width are chosen as if it were this size, whose
# divisors are the usual tile candidates (224 = 2^5 * 7: 4, 7, 8, 14, 16, 28, 32), so no
# candidate wins for dividing it; the computes pad the output to whole tiles, so any tile
# serves any size.
SYMBOLIC_EXTENT = 224


def nominal_size(size) -> int:
    """``size`` where it is an int, else :data:`SYMBOLIC_EXTENT`: what tile choices (and a
    graph's layout costs) see."""
    return size if isinstance(size, int) else SYMBOLIC_EXTENT


def _geometry(data_shape, kernel_shape, strides, padding, dilation, what):
    N, H, W = (_size(data_shape[i]) for i in (0, 2, 3))
    C = int(getattr(data_shape[1], "value", data_shape[1]))
    K, KC, R, S = (int(s) for s in kernel_shape)
    sh, sw = (int(s) for s in strides)
    dh, dw = (int(d) for d in dilation)
    pads = _pads(padding)
    OH = _out_size(H, R, sh, pads[0], pads[2], dh)
    OW = _out_size(W, S, sw, pads[1], pads[3], dw)
    static = [d for d in (N, H, W) if isinstance(d, int)]
    if min(C, K, KC, R, S, sh, sw, dh, dw, *static) < 1 or min(pads) < 0:
        raise ValueError(f"{what}: shapes, strides and dilation must be positive, padding >= 0 "
                         f"(data {tuple(data_shape)}, kernel {tuple(kernel_shape)}, "
                         f"strides {tuple(strides)}, padding {pads}, dilation {tuple(dilation)})")
    if any(isinstance(d, int) and d < 1 for d in (OH, OW)):
        raise ValueError(f"{what}: the kernel {R}x{S} (dilation {dh}x{dw}) does not fit the "
                         f"padded input {H}x{W} (padding {pads}): empty output")
    return N, C, H, W, K, KC, R, S, sh, sw, dh, dw, pads, OH, OW


def _inside_padding(y, x, H, W, Hp, Wp, top, left) -> list:
    """Conditions under which padded position (y, x) holds a real input element; only the
    borders that exist are tested (with a symbolic size, the far border always is)."""
    conds = []
    if top:
        conds.append(y >= top)
    if _may_exceed(Hp, H + top):
        conds.append(y < H + top)
    if left:
        conds.append(x >= left)
    if _may_exceed(Wp, W + left):
        conds.append(x < W + left)
    return conds


def _may_exceed(a, b) -> bool:
    """Whether ``a > b`` may hold: decided for ints, assumed for symbolic sizes."""
    return a > b if isinstance(a, int) and isinstance(b, int) else True


def _pack_data(data, bn, Hp, Wp, pads, name="data_vec", channel_of=None):
    """``data`` [N, C, H, W] as [N, ceil(C'/bn), Hp, Wp, bn]: zero padding of ``pads`` (top,
    left) and up to Hp x Wp; channel ``j`` of the blocked tensor is input channel
    ``channel_of(j)`` (identity by default; C' = C); channels past C' are zero."""
    N, C = _size(data.shape[0]), int(data.shape[1].value)
    chans = C if channel_of is None else channel_of[1]
    of = (lambda j: j) if channel_of is None else channel_of[0]

    def f(n, c, y, x, cb):
        j = c * bn + cb
        return _padded_read(data, pads, Hp, Wp, n, of(j), y, x,
                            also=[j < chans] if chans % bn else [])

    return te.compute((N, _ceil_div(chans, bn), Hp, Wp, bn), f, name=name,
                      tag="conv2d_data_pack")


def _padded_read(data, pads, Hp, Wp, n, c, y, x, also=()):
    """``data[n, c, y - top, x - left]`` where (y, x) is inside the input and the extra
    conditions ``also`` hold, else 0; (y, x) ranges over ``Hp x Wp`` positions of the
    padded input."""
    H, W = (_size(s) for s in data.shape[2:])
    top, left = pads[0], pads[1]
    conds = _inside_padding(y, x, H, W, Hp, Wp, top, left) + list(also)
    # No clamping: the code generator evaluates a load under if_then_else only where the
    # condition holds (a branch, or a masked load for vector lanes).
    value = data[n, c, y - top, x - left]
    return te.if_then_else(te.all(*conds), value, 0.0) if conds else value


# ---- conv2d -------------------------------------------------------------------------------------


#: Tile widths a convolution may take beside the divisors of its rows (the row then
#: computed over whole tiles and cropped).
PADDED_TILE_WIDTHS = (4, 5, 6, 8)

#: Output rows a conv2d register tile may span.
TILE_ROWS = (1, 2, 4)


def _conv_candidates(C, K, OH, OW, lanes):
    """``(ic, oc, ow, oh)``: the channel blocks, tile widths and tile heights the fallback
    chooses from. The space offers more widths (:func:`_padded_widths`)."""
    ic = [d for d in _divisors(C) if d <= 64]
    ic = [d for d in ic if d >= min(4, ic[-1])]
    oc = [d for d in _divisors(K) if d <= 64]
    # Output-channel blocks of at least one vector (8 channels on x86, 4 with NEON).
    oc = [d for d in oc if d >= min(8, lanes, oc[-1])]
    ow = [d for d in _divisors(OW) if d <= 32]
    ow = [d for d in ow if d >= min(4, ow[-1])]
    if max(ow) < 7 and OW > 7:
        # No divisor gives a register tile: also offer tiles that pad the width.
        ow = sorted(set(ow) | {r for r in (8, 14, 16) if r < OW})
    oh = [d for d in TILE_ROWS if d <= max(OH, 1)]
    return ic, oc, ow, oh


def _padded_widths(OW, ow) -> list:
    """The widths of :data:`PADDED_TILE_WIDTHS` that do not divide a row of ``OW``
    columns and are not among the candidates ``ow`` already."""
    return [d for d in PADDED_TILE_WIDTHS if d < OW and OW % d and d not in ow]


def _conv_fallback(OW, R, S, sw, dw, ic, oc, ow):
    """``(ic_bn, oc_bn, reg_n)`` of the fallback, from the current target's caps
    (:mod:`tecomp.topi.cpu_tiling`): an output-channel block of two vectors (32 channels
    with AVX-512, 8 with NEON), the register tile's columns near the accumulator target
    beside the unrolled kernel columns' weights, and the largest input-channel block
    whose weights and input rows fit L1."""
    caps = cpu_tiling.current_caps()
    oc_bn = cpu_tiling.output_channel_block(caps, oc)
    reg_n = cpu_tiling.conv_register_columns(caps, oc_bn, ow, OW, kernel_columns=S)
    ic_bn = cpu_tiling.conv_input_block(caps, ic, oc_bn, R, S,
                                        input_columns=(reg_n - 1) * sw + (S - 1) * dw + 1)
    return ic_bn, oc_bn, reg_n


def _plane_fits(OH, OW, oc_bn) -> bool:
    """Whether a whole output plane of ``oc_bn`` channels fits the accumulator buffer of
    ``order="oc_plane"``: 8192 floats (32 KiB, an L1 data cache), a 14x14 plane of 32
    channels or 7x7 of 64 and more."""
    return OH * OW * oc_bn <= 8192


def _fallback_order(C, H, W, K, R, S, OH, OW, oc_bn) -> str:
    """Rows as the outer parallel loop (``oh_oc``) while the input is the larger operand:
    the padding conditions then leave the interior tiles, and each thread streams its own
    rows once. Once the kernel is larger (the deep layers of a CNN, where a few rows meet
    megabytes of weights), output-channel blocks go outside: each thread then reads its
    share of the kernel once, instead of all of it once per row (1.3-1.6x faster on the
    ResNet-50 layers with the kernel larger than the input, 2 threads, AVX-512). There
    the whole output plane of a channel block accumulates at once (``oc_plane``) when it
    fits in L1, so each block of weights, fresh from memory at batch 1, serves every row
    while it is in cache and the weight stream spreads over all of the block's work
    (``oc_oh`` reads it all during the first row): 7-23% faster than ``oc_oh`` on those
    layers with their weights coming from memory, 4-13% with them in cache. Larger planes
    keep the register tile in the reduction loop (``oc_oh``)."""
    if K * C * R * S <= C * H * W:
        return "oh_oc"
    return "oc_plane" if _plane_fits(OH, OW, oc_bn) else "oc_oh"


def define_conv2d_knobs(cfg, data_shape, kernel_shape, strides, padding, dilation):
    """Register the conv2d knobs (see the module docstring) for these shapes, with the
    fallback values on a fallback config; a second call changes nothing. The computes
    call it; a template whose kernel input is blocked calls it first, for the blocking."""
    (N, C, H, W, K, KC, R, S, sh, sw, dh, dw, pads, OH, OW) = _geometry(
        data_shape, kernel_shape, strides, padding, dilation, "conv2d")
    # A symbolic plane has no static size for the whole-plane accumulator of "oc_plane".
    static_plane = all(isinstance(d, int) for d in (OH, OW))
    H, W, OH, OW = (nominal_size(d) for d in (H, W, OH, OW))
    lanes = fp32_lanes()
    ic, oc, ow, oh = _conv_candidates(C, K, OH, OW, lanes)
    cfg.define_split("tile_ic", C, num_outputs=2, policy="candidate",
                     candidate=[[-1, d] for d in ic])
    cfg.define_split("tile_oc", K, num_outputs=2, policy="candidate",
                     candidate=[[-1, d] for d in oc])
    cfg.define_split("tile_ow", OW, num_outputs=2, policy="candidate",
                     candidate=[[-1, d] for d in ow + _padded_widths(OW, ow)])
    cfg.define_split("tile_oh", OH, num_outputs=2, policy="candidate",
                     candidate=[[-1, d] for d in oh])
    cfg.define_knob("unroll_kw", [False, True])
    if R > 1:
        cfg.define_knob("unroll_kh", [False, True])
        cfg.define_knob("kernel_rows", ["inside", "outside"])
    # A whole output plane as the accumulator is offered where one of the smallest
    # channel blocks fits twice over (a larger block is the tuner's to measure).
    cfg.define_knob("order", ["oc_oh", "oh_oc"]
                    + (["oc_plane"] if static_plane and _plane_fits(2 * OH, OW, min(oc))
                       else []))
    gemm = _is_pointwise(R, S, sh, sw, pads)
    cfg.define_knob("data_layout", ["nchwc", "nchw"] + (["gemm"] if gemm else []))
    if gemm:
        cfg.define_knob("gemm_vecs", [1, 2, 3])
    if cfg.is_fallback:
        ic_bn, oc_bn, reg_n = _conv_fallback(OW, R, S, sw, dw, ic, oc, ow)
        cfg.fallback_split("tile_ow", [-1, reg_n])
        cfg.fallback_split("tile_oh", [-1, 1])
        cfg.fallback_knob("unroll_kw", True)
        if gemm:
            _pointwise_fallback(cfg, K, ic, oc)
        else:
            cfg.fallback_split("tile_ic", [-1, ic_bn])
            cfg.fallback_split("tile_oc", [-1, oc_bn])
            cfg.fallback_knob("order", _fallback_order(C, H, W, K, R, S, OH, OW, oc_bn))
            # The input read in place: measured ahead of the blocked copy on every
            # ResNet-50 layer shape tried, 3x faster on 1x1 convolutions (no pack).
            cfg.fallback_knob("data_layout", "nchw")


def _is_pointwise(R, S, sh, sw, pads) -> bool:
    """Whether the convolution is a plain product over channels (1x1, no padding), which
    ``data_layout="gemm"`` computes as ``W[K, C] x X[C, OH*OW]`` (with a stride, of the
    input's every ``sh``-th row and ``sw``-th column, copied first)."""
    return (R, S) == (1, 1) and not any(pads)


def _pointwise_fallback(cfg, K, ic, oc):
    """A 1x1 convolution computes as a product (``data_layout="gemm"``): register tiles
    of ``fma_chains`` output channels by as many vectors of output points as the
    accumulator target allows (:func:`tecomp.topi.cpu_tiling.pointwise_register_tile`:
    8 by 2 with AVX-512, 8 by 1 with AVX2), input channels 8 at a time, unrolled. Row tiles run in
    parallel from 256 output channels on, column blocks below that: with many output
    channels a column block would write (and read a residual from) all of their planes at
    once, and a thread streaming 8 planes at a time is faster. Measured on the ResNet-50
    1x1 layers (2 threads, AVX-512, with bias and ReLU, a residual add where ResNet has
    one): 0.40-0.60 ms against 0.42-0.70 ms with ``data_layout="nchw"`` (64->256 at 56x56
    with a residual: 0.43 against 0.67), never slower."""
    vec_options = [e.val for e in cfg.space_map["gemm_vecs"].entities]
    rows, vecs = cpu_tiling.pointwise_register_tile(cpu_tiling.current_caps(), oc,
                                                    max(vec_options))
    cfg.fallback_split("tile_oc", [-1, rows])
    cfg.fallback_split("tile_ic", [-1, min(ic, key=lambda d: abs(d - 8))])
    cfg.fallback_knob("gemm_vecs", vecs)
    cfg.fallback_knob("order", "oc_oh" if K >= 256 else "oh_oc")
    cfg.fallback_knob("data_layout", "gemm")


def _check_channels(what, data_shape, kernel_shape):
    C, KC = int(data_shape[1]), int(kernel_shape[1])
    if KC != C:
        raise ValueError(f"{what}: kernel {tuple(kernel_shape)} has {KC} input channels, data "
                         f"{tuple(data_shape)} has {C} (grouped convolution is not supported; "
                         f"use depthwise_conv2d for groups == channels)")


def _shape_of(t):
    """A conv operand's shape as ints, but symbolic sizes (a data tensor's batch, height
    and width) kept as their expressions."""
    return tuple(_size(d) for d in t.shape)


def compute_conv2d(cfg, data, kernel, strides=(1, 1), padding=(0, 0), dilation=(1, 1)):
    """NCHW conv2d through channel-blocked tensors (see the module docstring).

    Parameters
    ----------
    cfg : config entity
        The schedule config; its blocking and ``data_layout`` shape the compute.
    data : Tensor
        ``[N, C, H, W]``.
    kernel : Tensor
        OIHW ``[K, C, R, S]`` (blocked per call), or already blocked
        ``[K/oc_bn, C/ic_bn, R, S, ic_bn, oc_bn]`` for the config's blocking (see
        :func:`pack_conv2d_kernel`).
    strides, padding, dilation : tuple of int
        ``(sh, sw)``, ``(top, left, bottom, right)`` or ``(ph, pw)``, ``(dh, dw)``.

    Returns
    -------
    Tensor
        ``[N, K, OH, OW]`` (tag ``"conv2d"``), the unpack of the blocked product (tag
        ``"conv2d_nchwc"``); pass it, or an elementwise epilogue computed from it, to
        :func:`schedule_conv2d`.
    """
    packed_kernel = len(kernel.shape) == 6
    what = "conv2d_packed_kernel" if packed_kernel else "conv2d"
    data_shape = _shape_of(data)
    if packed_kernel:
        OCc, ICc, R, S, ic_bn, oc_bn = _shape_of(kernel)
        kernel_shape = (OCc * oc_bn, ICc * ic_bn, R, S)
    else:
        kernel_shape = _shape_of(kernel)
    (N, C, H, W, K, KC, R, S, sh, sw, dh, dw, pads, OH, OW) = _geometry(
        data_shape, kernel_shape, strides, padding, dilation, what)
    _check_channels(what, data_shape, kernel_shape)
    define_conv2d_knobs(cfg, data_shape, kernel_shape, strides, padding, dilation)
    ic_bn = cfg["tile_ic"].size[-1]
    oc_bn = cfg["tile_oc"].size[-1]
    reg_n = cfg["tile_ow"].size[-1]
    oh_bn = cfg["tile_oh"].size[-1]
    if packed_kernel and kernel_blocking(kernel) != (ic_bn, oc_bn):
        raise ValueError(f"{what}: the kernel is blocked {kernel_blocking(kernel)} (ic_bn, "
                         f"oc_bn); this config reads ({ic_bn}, {oc_bn})")

    # The blocked output covers whole tiles; columns and rows past OW / OH are computed
    # from zero padding and dropped by the unpack.
    OWp = _ceil_div(OW, reg_n) * reg_n
    OHp = _ceil_div(OH, oh_bn) * oh_bn
    Hp = (OHp - 1) * sh + (R - 1) * dh + 1
    Wp = (OWp - 1) * sw + (S - 1) * dw + 1
    ICc, OCc = C // ic_bn, K // oc_bn
    kernel_vec = kernel if packed_kernel else conv2d_pack_kernel(kernel, ic_bn, oc_bn)
    if cfg["data_layout"].val == "gemm":
        return _compute_pointwise_gemm(data, kernel_vec, N, C, K, OH, OW, sh, sw, ic_bn,
                                       oc_bn)
    plain = cfg["data_layout"].val == "nchw"
    if not plain:
        # Columns in blocks of a vector's lanes (zero columns past Wp, never read): the
        # pack is then a transposing nest (lanes input columns by ic_bn channels) that the
        # code generator turns into contiguous row loads and in-register transposes.
        lanes = fp32_lanes()
        data_vec = _pack_data(data, ic_bn, Hp, _ceil_div(Wp, lanes) * lanes, pads)
    ico = te.reduce_axis((0, ICc), name="ico")
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    ici = te.reduce_axis((0, ic_bn), name="ici")
    conv = te.compute(
        (N, OCc, OHp, OWp, oc_bn),
        lambda n, o, y, x, ob: te.sum(
            # "nchw": the input read in place; the padding becomes conditions that loop
            # partitioning removes from all but the border tiles.
            (_padded_read(data, pads, Hp, Wp, n, ico * ic_bn + ici, y * sh + ry * dh,
                          x * sw + rx * dw)
             if plain else
             data_vec[n, ico, y * sh + ry * dh, x * sw + rx * dw, ici])
            * kernel_vec[o, ico, ry, rx, ici, ob],
            axis=[ico, ry, rx, ici],
        ),
        name="conv", tag="conv2d_nchwc",
    )
    return te.compute(
        (N, K, OH, OW), lambda n, k, y, x: conv[n, k // oc_bn, y, x, k % oc_bn], name="out",
        tag="conv2d")


def _compute_pointwise_gemm(data, kernel_vec, N, C, K, OH, OW, sh, sw, ic_bn, oc_bn):
    """A 1x1 convolution as the product ``W[K, C] x X[C, OH*OW]`` per batch item, in
    ``[N, K/oc_bn, oc_bn, OH*OW]``: rows are output channels (a weight broadcast per row),
    columns the flattened output plane, read in place as contiguous vectors of the NCHW
    input and written as contiguous vectors of the NCHW output. A strided convolution
    first copies the points it reads (``OH x OW`` of every channel, a quarter of the input
    at stride 2), so the product's columns are contiguous too."""
    plane = OH * OW
    if (sh, sw) != (1, 1):
        data = te.compute((N, C, OH, OW), lambda n, c, y, x: data[n, c, y * sh, x * sw],
                          name="data_sub", tag="conv2d_data_subsample")
    ico = te.reduce_axis((0, C // ic_bn), name="ico")
    ici = te.reduce_axis((0, ic_bn), name="ici")
    conv = te.compute(
        (N, K // oc_bn, oc_bn, plane),
        lambda n, o, ob, q: te.sum(
            data[n, ico * ic_bn + ici, q // OW, q % OW] * kernel_vec[o, ico, 0, 0, ici, ob],
            axis=[ico, ici]),
        name="conv", tag="conv2d_nchwc")
    return te.compute(
        (N, K, OH, OW), lambda n, k, y, x: conv[n, k // oc_bn, k % oc_bn, y * OW + x],
        name="out", tag="conv2d")


def _schedule_pointwise_gemm(s, cfg, out, CL):
    """Register tiles of ``oc_bn`` rows (output channels) by ``gemm_vecs`` vectors of
    columns (output points); per input channel, the tile loads its columns once and
    multiplies them by one broadcast weight per row. With ``order="oh_oc"`` the column
    blocks run in parallel and every row tile of one block reads the same input columns
    while they are in cache; otherwise the row tiles run in parallel and each thread's
    weights stay in cache across the column blocks. The serial loop inside has constant
    bounds, so loop partitioning cuts the guard of a ragged last column block out of the
    others."""
    n, k, y, x = s[out].op.axis
    ko, ki = s[out].split(k, factor=cfg["tile_oc"].size[-1])
    qo, qi = s[out].split(s[out].fuse(y, x), factor=cfg["gemm_vecs"].val * fp32_lanes())
    if cfg["order"].val == "oh_oc":
        s[out].reorder(n, qo, ko, ki, qi)
        # Past one batch item the batch stays a serial outer loop, so the column block
        # is monotone in the parallel loop and loop partitioning can cut its last one.
        fused, tile = (s[out].fuse(n, qo) if _shape_of(out)[0] == 1 else qo), ko
    else:
        s[out].reorder(n, ko, qo, ki, qi)
        fused, tile = s[out].fuse(n, ko), qo
    s[out].parallel(fused)
    s[out].unroll(ki)
    s[out].vectorize(qi)
    s[CL].compute_at(s[out], tile)
    _, _, lob, lq = s[CL].op.axis
    rco, rci = s[CL].op.reduce_axis
    s[CL].reorder(rco, rci, lob, lq)
    # Unrolled input channels multiply the tile's code: past 256 multiply-add rows LLVM
    # took more than the tuner's 10 s build limit (64 channels by 64 rows), for code that
    # no longer fits the instruction cache.
    if cfg["unroll_kw"].val and cfg["tile_ic"].size[-1] * cfg["tile_oc"].size[-1] <= 256:
        s[CL].unroll(rci)
    s[CL].unroll(lob)
    s[CL].vectorize(lq)
    return s


def schedule_conv2d(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_conv2d` and any elementwise
    epilogue computed from it (bias, activation, a residual add), which runs at the
    output tile straight from the accumulators, fused with the unpack to NCHW.

    Examples
    --------
    >>> out = compute_conv2d(cfg, data, kernel, (1, 1), (1, 1))
    >>> Y = te.compute(out.shape, lambda n, k, y, x: te.max(out[n, k, y, x] + b[k], 0.0))
    >>> s = schedule_conv2d(cfg, [Y])
    """
    what = "schedule_conv2d"
    out = group_output(outs, what)
    s = te.create_schedule(out.op)
    head = find_anchor(out, "conv2d", what)
    conv = find_anchor(out, "conv2d_nchwc", what)
    oc_bn = cfg["tile_oc"].size[-1]
    reg_n = cfg["tile_ow"].size[-1]
    oh_bn = cfg["tile_oh"].size[-1]
    plain = cfg["data_layout"].val == "nchw"
    N = _shape_of(out)[0]
    # Packing stages: parallel over (batch, channel block, row) / kernel blocks.
    for t in conv.input_tensors:
        if t.op.tag == "conv2d_data_pack":
            n, c, y, x, cb = s[t].op.axis
            s[t].parallel(s[t].fuse(n, c, y))
            s[t].unroll(s[t].split(x, factor=fp32_lanes())[1])
            s[t].vectorize(cb)
        elif t.op.tag == "conv2d_data_subsample":
            n, c, y, x = s[t].op.axis
            s[t].parallel(s[t].fuse(n, c))
        elif t.op.tag == "conv2d_kernel_pack":
            o, c, r, s_, cb, ob = s[t].op.axis
            s[t].parallel(s[t].fuse(o, c))
            s[t].unroll(s_)
            s[t].unroll(ob)

    # The micro-kernel's accumulators live at the output tile; the unpack to NCHW (and
    # the epilogue) reads them there (the blocked ``conv`` tensor is never materialised).
    CL = inline_epilogue(s, out, conv, what, head=head)
    if cfg["data_layout"].val == "gemm":
        return _schedule_pointwise_gemm(s, cfg, out, CL)
    n, k, y, x = s[out].op.axis
    ko, ki = s[out].split(k, factor=oc_bn)
    yo, yi = s[out].split(y, factor=oh_bn)
    xo, xi = s[out].split(x, factor=reg_n)
    order = cfg["order"].val
    if order == "oc_plane":
        s[out].reorder(n, ko, yo, xo, yi, ki, xi)
        fused = s[out].fuse(n, ko)
    elif order == "oc_oh":
        s[out].reorder(n, ko, yo, xo, yi, ki, xi)
        fused = s[out].fuse(n, ko, yo)
    else:
        s[out].reorder(n, yo, ko, xo, yi, ki, xi)
        # Reading in place, a batch stays a serial outer loop: the row of a fused
        # (n, yo, ko) iteration would be a modulo, which loop partitioning cannot cut.
        # A symbolic batch counts as more than one.
        one_item = isinstance(N, int) and N == 1
        fused = s[out].fuse(yo, ko) if plain and not one_item else s[out].fuse(n, yo, ko)
    s[out].parallel(fused)
    # The write-back runs along output columns: one vector of reg_n columns per output
    # channel, a contiguous NCHW store. Its lanes are reg_n different accumulators (the
    # code generator reads a stack buffer lane by lane), which LLVM turns into an
    # in-register transpose of the fully unrolled tile.
    s[out].unroll(yi)
    s[out].unroll(ki)
    s[out].vectorize(xi)
    _, _, ly, lx, lob = s[CL].op.axis
    rco, rr, rs, rci = s[CL].op.reduce_axis
    if order == "oc_plane":
        s[CL].compute_at(s[out], fused)
        lyo, ly = s[CL].split(ly, factor=oh_bn)
        lxo, lx = s[CL].split(lx, factor=reg_n)
        tiles = [rco, lyo, lxo]
    else:
        s[CL].compute_at(s[out], xo)
        tiles = [rco]
    rows = "kernel_rows" in cfg and cfg["kernel_rows"].val == "outside"
    order_window(s[CL], tiles, (rr, rs, rci), (ly, lx, lob), cfg["unroll_kw"].val,
                 unroll_kh="unroll_kh" in cfg and cfg["unroll_kh"].val, rows_outside=rows)
    return s


def order_window(stage, outer, window, tile, unroll_kw, unroll_kh=False,
                 rows_outside=False):
    """The accumulation loops of a register tile: ``outer`` loops, then the kernel rows,
    then with ``unroll_kw`` each input channel with the kernel columns unrolled inside it
    (else the columns as a loop outside the channels), then the ``tile`` axes, unrolled
    but the last, which is vectorized. ``window`` is (kernel rows, kernel columns, input
    channels). With ``unroll_kh`` the kernel rows are unrolled too; with
    ``rows_outside`` they run outside the ``outer`` loops (each kernel row walks every
    input-channel block: the tile reads one input row of every block, then the next,
    where inside it reads a block's rows, then the next block's)."""
    rr, rs, rci = window
    head = [rr, *outer] if rows_outside else [*outer, rr]
    if unroll_kw:
        stage.reorder(*head, rci, rs, *tile)
        stage.unroll(rs)
    else:
        stage.reorder(*head, rs, rci, *tile)
    if unroll_kh:
        stage.unroll(rr)
    for axis in tile[:-1]:
        stage.unroll(axis)
    stage.vectorize(tile[-1])


@template("conv2d")
def conv2d(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0), dilation=(1, 1),
           dtype="float32"):
    """Tunable NCHW conv2d (see the module docstring)."""
    _geometry(data_shape, kernel_shape, strides, padding, dilation, "conv2d")
    _check_channels("conv2d", data_shape, kernel_shape)
    cfg = get_config()
    data = te.placeholder(tuple(data_shape), dtype, name="data")
    kernel = te.placeholder(tuple(kernel_shape), dtype, name="kernel")
    out = compute_conv2d(cfg, data, kernel, strides, padding, dilation)
    return schedule_conv2d(cfg, [out]), [data, kernel, out]


@template("conv2d_packed_kernel")
def conv2d_packed_kernel(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0),
                         dilation=(1, 1), dtype="float32"):
    """``conv2d`` whose kernel input is already blocked: the same workload arguments
    (``kernel_shape`` is the logical OIHW shape) and the same knobs, but the kernel
    placeholder is ``[K/oc_bn, C/ic_bn, R, S, ic_bn, oc_bn]`` for the config's blocking, so
    no kernel repacking runs per call. Pack a weight once with :func:`pack_conv2d_kernel`
    (numpy) or :func:`conv2d_pack_kernel` (a compute, for constant folding), taking the
    blocking from the kernel tensor the template returns (:func:`kernel_blocking`)."""
    what = "conv2d_packed_kernel"
    _geometry(data_shape, kernel_shape, strides, padding, dilation, what)
    _check_channels(what, data_shape, kernel_shape)
    cfg = get_config()
    define_conv2d_knobs(cfg, data_shape, kernel_shape, strides, padding, dilation)
    blocked = packed_kernel_shape(kernel_shape, cfg["tile_ic"].size[-1],
                                  cfg["tile_oc"].size[-1])
    data = te.placeholder(tuple(data_shape), dtype, name="data")
    kernel = te.placeholder(blocked, dtype, name="kernel")
    out = compute_conv2d(cfg, data, kernel, strides, padding, dilation)
    return schedule_conv2d(cfg, [out]), [data, kernel, out]


def packed_kernel_shape(kernel_shape, ic_bn, oc_bn):
    """The blocked shape ``[K/oc_bn, C/ic_bn, R, S, ic_bn, oc_bn]`` of an OIHW kernel."""
    K, C, R, S = (int(s) for s in kernel_shape)
    if K % oc_bn or C % ic_bn:
        raise ValueError(f"kernel {tuple(kernel_shape)}: oc_bn={oc_bn} must divide {K} and "
                         f"ic_bn={ic_bn} must divide {C}")
    return (K // oc_bn, C // ic_bn, R, S, ic_bn, oc_bn)


def kernel_blocking(kernel):
    """``(ic_bn, oc_bn)`` of a packed kernel tensor (``conv2d_packed_kernel``'s second
    argument) or of its shape."""
    shape = kernel.shape if hasattr(kernel, "shape") else kernel
    dims = [int(getattr(d, "value", d)) for d in shape]
    if len(dims) != 6:
        raise ValueError(f"kernel shape {tuple(dims)} is not a packed [K/oc_bn, C/ic_bn, R, S, "
                         f"ic_bn, oc_bn] kernel")
    return dims[4], dims[5]


def pack_conv2d_kernel(kernel, ic_bn, oc_bn):
    """An OIHW numpy ``kernel`` in ``conv2d_packed_kernel``'s blocked layout (a contiguous
    copy), blocked by ``ic_bn`` input and ``oc_bn`` output channels, e.g.
    ``pack_conv2d_kernel(w, *kernel_blocking(tensors[1]))``."""
    K, C, R, S = kernel.shape
    OCc, ICc = packed_kernel_shape(kernel.shape, ic_bn, oc_bn)[:2]
    blocked = kernel.reshape(OCc, oc_bn, ICc, ic_bn, R, S)
    return aligned.ascontiguous(blocked.transpose(0, 2, 4, 5, 3, 1))


def conv2d_pack_kernel(kernel, ic_bn, oc_bn, name="kernel_vec"):
    """The compute (named ``name``) that packs an OIHW ``kernel`` tensor into the blocked
    layout of ``ic_bn`` input and ``oc_bn`` output channels (what a graph constant-folds
    for an initializer)."""
    shape = packed_kernel_shape([int(s.value) for s in kernel.shape], ic_bn, oc_bn)
    return te.compute(
        shape,
        lambda o, c, r, s, cb, ob: kernel[o * oc_bn + ob, c * ic_bn + cb, r, s],
        name=name, tag="conv2d_kernel_pack",
    )


# ---- depthwise conv2d ---------------------------------------------------------------------------

#: Output columns of a depthwise tile (its vector), and the widths the untuned rule
#: (``cpu_tiling.depthwise_tile``) chooses among, those it was measured on.
DEPTHWISE_WIDTHS = (4, 7, 8, 12, 14, 16, 24, 28, 32, 48, 56, 64)
DEPTHWISE_UNTUNED_WIDTHS = (4, 7, 8, 14, 16, 28, 32, 56, 64)
#: Output rows of a depthwise tile.
DEPTHWISE_ROWS = (1, 2, 3, 4, 6, 7, 8, 14, 16)
#: Channels one parallel task of a depthwise kernel computes.
DEPTHWISE_CHANNEL_BLOCKS = (1, 2, 4, 8, 16, 32, 64)


def _check_depthwise(data_shape, kernel_shape):
    C, (K, KC) = int(data_shape[1]), (int(kernel_shape[0]), int(kernel_shape[1]))
    if KC != 1 or K % C:
        raise ValueError(f"depthwise_conv2d: kernel {tuple(kernel_shape)} must be "
                         f"(C * multiplier, 1, R, S) for data {tuple(data_shape)}")


def compute_depthwise_conv2d(cfg, data, kernel, strides=(1, 1), padding=(0, 0),
                             dilation=(1, 1)):
    """NCHW depthwise conv2d (channel multiplier ``K / C``), reading the input in place.

    Parameters
    ----------
    cfg : config entity
        The schedule config (its knobs are defined here; the compute does not depend on
        them).
    data, kernel : Tensor
        ``[N, C, H, W]`` and ``[C * multiplier, 1, R, S]``.
    strides, padding, dilation : tuple of int
        As for :func:`compute_conv2d`.

    Returns
    -------
    Tensor
        ``[N, K, OH, OW]`` (tag ``"depthwise_conv2d"``); pass it, or an elementwise
        epilogue computed from it, to :func:`schedule_depthwise_conv2d`.
    """
    data_shape, kernel_shape = _shape_of(data), _shape_of(kernel)
    (N, C, H, W, K, KC, R, S, sh, sw, dh, dw, pads, OH, OW) = _geometry(
        data_shape, kernel_shape, strides, padding, dilation, "depthwise_conv2d")
    _check_depthwise(data_shape, kernel_shape)
    mult = K // C
    Hp = (OH - 1) * sh + (R - 1) * dh + 1
    Wp = (OW - 1) * sw + (S - 1) * dw + 1
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    # The input is read in place: the padding is a condition on each read, which loop
    # partitioning cuts out of the interior rows and column tiles.
    if sw == 1:
        out = te.compute(
            (N, K, OH, OW),
            lambda n, k, y, x: te.sum(
                _padded_read(data, pads, Hp, Wp, n, k // mult, y * sh + ry * dh,
                             x + rx * dw) * kernel[k, 0, ry, rx],
                axis=[ry, rx],
            ),
            name="depthwise", tag="depthwise_conv2d",
        )
    else:
        # A column stride makes a vector of output columns a gather from the input row.
        # Instead every column of the tile's input span is computed (``sw`` times the
        # multiply-adds, each vector a contiguous load) and the output keeps every
        # ``sw``-th one. Stride 2 on the MobileNetV2 layers, one thread (AMD EPYC, AVX-512):
        # 3.5-4.7x faster than the gathers.
        dense = te.compute(
            (N, K, OH, OW * sw),
            lambda n, k, y, x: te.sum(
                _padded_read(data, pads, Hp, OW * sw + (S - 1) * dw, n, k // mult,
                             y * sh + ry * dh, x + rx * dw) * kernel[k, 0, ry, rx],
                axis=[ry, rx],
            ),
            name="depthwise.dense", tag="depthwise_conv2d_dense",
        )
        out = te.compute((N, K, OH, OW), lambda n, k, y, x: dense[n, k, y, x * sw],
                         name="depthwise", tag="depthwise_conv2d")
    OH, OW = nominal_size(OH), nominal_size(OW)
    cfg.define_split("tile_w", OW, num_outputs=2, policy="candidate",
                     candidate=[[-1, r] for r in DEPTHWISE_WIDTHS if r <= OW] or [[-1, 1]])
    cfg.define_split("tile_h", OH, num_outputs=2, policy="candidate",
                     candidate=[[-1, r] for r in DEPTHWISE_ROWS if r <= OH] or [[-1, 1]])
    cfg.define_knob("unroll_kw", [True, False])
    cfg.define_knob("channel_block", [c for c in DEPTHWISE_CHANNEL_BLOCKS if c <= K])
    cfg.define_knob("unroll_kh", [False, True])
    cfg.define_knob("unroll_rows", [False, True])
    cfg.define_knob("accumulate", ["tile", "row"])
    if cfg.is_fallback:
        # A vector of output columns (cpu_tiling.depthwise_tile: on AVX-512 the row may
        # end in a masked one, elsewhere it divides the width), by 2 rows; among the
        # widths the rule was measured on.
        rows, cols = cpu_tiling.depthwise_tile(
            cpu_tiling.current_caps(),
            [e.size[-1] for e in cfg.space_map["tile_w"].entities
             if e.size[-1] in DEPTHWISE_UNTUNED_WIDTHS] or [1],
            [e.size[-1] for e in cfg.space_map["tile_h"].entities], OW)
        cfg.fallback_split("tile_w", [-1, cols])
        cfg.fallback_split("tile_h", [-1, rows])
    return out


def schedule_depthwise_conv2d(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_depthwise_conv2d` and any
    elementwise epilogue, computed at the output tile from the accumulators. ``cfg`` is
    the operator's config (:func:`tecomp.topi.strategy.select_config`)."""
    what = "schedule_depthwise_conv2d"
    out = group_output(outs, what)
    s = te.create_schedule(out.op)
    head = find_anchor(out, "depthwise_conv2d", what)
    # With a column stride the reduction is the dense stage and ``head`` selects its
    # columns (see compute_depthwise_conv2d).
    strided = [t for t in head.input_tensors if t.op.tag == "depthwise_conv2d_dense"]
    anchor = strided[0].op if strided else head
    OL = inline_epilogue(s, out, anchor, what, head=head)
    n, k, y, x = s[out].op.axis
    yo, yi = s[out].split(y, factor=cfg["tile_h"].size[-1])
    xo, xi = s[out].split(x, factor=cfg["tile_w"].size[-1])
    s[out].reorder(n, k, yo, xo, yi, xi)
    # Channels in parallel, rows serial inside: the row loop can then be cut at the
    # padded borders (a fused (k, yo) loop would give the row as a modulo). A task
    # takes ``channel_block`` channels.
    task = s[out].fuse(n, k)
    if cfg["channel_block"].val > 1:
        task, _ = s[out].split(task, factor=cfg["channel_block"].val)
    s[out].parallel(task)
    s[out].vectorize(xi)
    # The accumulators: the whole tile (each window tap updates every row of it), or one
    # row of the tile at a time (fewer registers live).
    s[OL].compute_at(s[out], xo if cfg["accumulate"].val == "tile" else yi)
    _, _, ly, lx = s[OL].op.axis
    ry, rx = s[OL].op.reduce_axis
    s[OL].reorder(ry, rx, ly, lx)
    s[OL].vectorize(lx)
    if cfg["unroll_kw"].val:
        s[OL].unroll(rx)
    if cfg["unroll_kh"].val:
        s[OL].unroll(ry)
    if cfg["unroll_rows"].val:
        s[OL].unroll(ly)
        s[out].unroll(yi)
    return s


@template("depthwise_conv2d")
def depthwise_conv2d(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0),
                     dilation=(1, 1), dtype="float32"):
    """Tunable NCHW depthwise conv2d (channel multiplier = K / C)."""
    _geometry(data_shape, kernel_shape, strides, padding, dilation, "depthwise_conv2d")
    _check_depthwise(data_shape, kernel_shape)
    cfg = get_config()
    data = te.placeholder(tuple(data_shape), dtype, name="data")
    kernel = te.placeholder(tuple(kernel_shape), dtype, name="kernel")
    out = compute_depthwise_conv2d(cfg, data, kernel, strides, padding, dilation)
    return schedule_depthwise_conv2d(cfg, [out]), [data, kernel, out]


# ---- strategies -------------------------------------------------------------------------


def _conv_workload(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0),
                   dilation=(1, 1), dtype="float32"):
    return (tuple(int(d) for d in data_shape), tuple(int(d) for d in kernel_shape),
            tuple(int(d) for d in strides), tuple(int(d) for d in padding),
            tuple(int(d) for d in dilation), str(dtype))


def _prepack_conv2d(cfg, kernel, **attrs):
    """The OIHW kernel in the config's blocked layout (strides, padding and dilation, given
    to every prepack, do not change it)."""
    return (pack_conv2d_kernel(kernel, cfg["tile_ic"].size[-1], cfg["tile_oc"].size[-1]),)


register_implementation(Implementation(
    "conv2d", "llvm", compute_conv2d, schedule_conv2d,
    template="conv2d_packed_kernel", workload=_conv_workload,
    prepack=_prepack_conv2d, packed_inputs=(1,), batch_free_config=True))
register_implementation(Implementation(
    "depthwise_conv2d", "llvm", compute_depthwise_conv2d, schedule_depthwise_conv2d,
    template="depthwise_conv2d", workload=_conv_workload, batch_free_config=True))
