"""conv2d on channel-blocked activations (NCHW{b}c in, NCHW{b}c out).

Layouts, with ``b`` the block of channels (one vector of float32 lanes: 16 with AVX-512):

- data ``[N, C/b, H, W, b]``: channel ``c`` of point (y, x) at ``[n, c // b, y, x, c % b]``
  (:func:`to_blocked`);
- kernel ``[K/b, C/b, R, S, b, b]``: ``[o, i, r, s, ci, co]`` is the OIHW weight
  ``[o*b + co, i*b + ci, r, s]`` (:func:`pack_nchwc_kernel`, once per weight);
- output ``[N, K/b, OH, OW, b]``.

Each point's ``b`` channels are one contiguous vector, so the register tile, ``tile_ocb``
output channel blocks by ``tile_ow`` output columns of one row, loads per input channel
``tile_ocb`` weight vectors and broadcasts ``tile_ow`` input values from consecutive
points, one cache line each; the next input channel block is the next plane of the
blocked input. In NCHW a 1x1 convolution reads its input a whole plane apart per
channel; with the input blocked, the same tile ran 1024->256 at 14x14 at 166 GFLOPS on
one AVX-512 core against 145 reading NCHW in place (ONNX Runtime, which keeps CNN
activations blocked the same way, 174). A model keeps its activations blocked from one
convolution to the next (the graph's ``alter_conv_layout`` pass), so only its first
and last layers pay a layout transform.

A padded convolution reads its input in place when the config unrolls the kernel's
columns (``unroll_kw``; the fallback but on output rows of at most 7 columns, or where
every output row streams weights from beyond L2): the zero
border is the reduction's ``where`` condition, whose row part lowering hoists to the
kernel-row loop and whose column part is decided at compile time for each unrolled
(column, kernel column) pair, so no multiply-add tests anything at run time and no copy
runs. With the columns as a loop it
first copies the input into a zero-bordered buffer (``data_pad``) instead: a column
condition inside that loop would stay in the multiply-adds of every border tile.
Measured on one AVX-512 core (GFLOPS, the best in-place tile vs the best over the copy):
3x3 128->128 at 28x28 206 vs 184, 64->64 at 56x56 192 vs 158, 256->256 at 14x14 192 vs
178, 512->512 at 7x7 189 vs 147, 256->256 stride 2 at 28x28 189 vs 176.

**A symbolic image.** The height and width may be symbolic (one kernel for every image
size, a model built with its symbolic axes): each row is computed in whole tiles and
cropped, the columns past it reading its last column again (in place) or zeros (from the
padded copy). The untuned config reads a padded input
through the zero-bordered copy, which covers the whole tiles, so no multiply-add tests a
border (in place, a border tile would test each column at run time), in tiles of at most
:data:`SYMBOLIC_TILE_COLUMNS` columns, since no divisor of the row is known.

**Planar data.** A first layer with fewer input channels than its output's block (an
image's 3) reads them planar, ``[N, C, H, W]``, and writes blocks, as ONNX Runtime's first
NCHWc layer does: its kernel is ``[K/b, C, R, S, 1, b]`` (:func:`pack_nchwc_kernel`), a
step of the reduction is one channel plane, and each column's input is one broadcast
from that plane's row. No layout transform runs before it.

**bfloat16 products.** With bfloat16 data (the model's own, or a float32 model built
with ``precision="bf16"``: :mod:`tecomp.graph.passes.precision`) the kernel is packed as
words of two bfloat16 input channels, ``[K/b, C/b, R, S, b/2, b]`` int32
(:func:`pack_nchwc_kernel_bf16`), and each step of the reduction over a block's channels
takes a pair of them: a 32-bit broadcast of two adjacent channels of one point, one
:func:`tecomp.te.dot2_bf16` per vector of output channels (``vdpbf16ps`` with
AVX512-BF16, twice the multiply-adds of a float32 FMA per instruction, from half the
bytes). The sums and the output are float32.

**An epilogue of long chains.** A group's epilogue runs at the register tile, on the
accumulators as they are finished (``epilogue = "tile"``), or over each output row the
tile loop has stored (``"row"``, the row's few kilobytes still in L1). Where a tile's
weights do not change along the row (one input-channel block and a 1x1 kernel: LLVM then
keeps them in registers across the row) and the epilogue calls ``exp`` or a function of
it (a SiLU's sigmoid), those weights, the accumulators and the epilogue's constants exceed
the registers: EfficientNet-B0's first 1x1 expand convolution (16 -> 96 channels at
112x112, a tile of 2 blocks by 8 columns) kept 429 stack references at the tile. Run over
the row, it took 0.275 ms in a model run against 0.561 (2 Zen 5 cores), and the untuned
model 0.92x the time. With the weights read in a loop (more input channels) the row's
extra pass costs more than it saves (a 24 -> 144 expand at 56x56: 0.150 against 0.143
ms), so the tile is the untuned choice elsewhere. The knob is declared for every group
with an epilogue; a config that passes over whole planes keeps the epilogue at the tile.

Workload (what a graph produces): ``conv2d_nchwc(data_shape, kernel_shape, strides,
padding, dilation, dtype)`` with the blocked ``data_shape = (N, C/b, H, W, b)`` and the
logical OIHW ``kernel_shape = (K, C, R, S)``. The block is the data shape's last axis, so
each block a layer may take is a task of its own; the graph chooses among them per layer
(:mod:`tecomp.graph.passes.layout_choice`, which weighs their records). Planar data
``(N, C, H, W)`` adds the output's block: ``conv2d_nchwc(data_shape, kernel_shape, strides,
padding, dilation, dtype, block)``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import te
from ..autotune import get_config, template
from ..runtime import aligned
from . import cpu_tiling
from .conv2d import (_ceil_div, _conv_workload, _divisors, _geometry, _padded_widths,
                     _shape_of, _size, nominal_size, order_window)
from .group import (cache_row, crop, epilogue_place, find_anchor, group_output,
                    inline_epilogue)
from .strategy import Implementation, register_implementation
from .utils import check_out_dtype


def to_blocked(x: np.ndarray, b: int) -> np.ndarray:
    """An NCHW array as ``[N, C/b, H, W, b]`` (a contiguous copy)."""
    N, C, H, W = x.shape
    return aligned.ascontiguous(x.reshape(N, C // b, b, H, W).transpose(0, 1, 3, 4, 2))


def from_blocked(x: np.ndarray) -> np.ndarray:
    """A ``[N, C/b, H, W, b]`` array as NCHW (a contiguous copy)."""
    N, Cb, H, W, b = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(N, Cb * b, H, W))


def pack_nchwc_kernel(kernel: np.ndarray, b: int) -> np.ndarray:
    """An OIHW numpy ``kernel`` as ``[K/b, C/b, R, S, b, b]``, or as ``[K/b, C, R, S, 1,
    b]`` where ``b`` does not divide its input channels C (the kernel of planar data; see
    the module docstring)."""
    K, C, R, S = kernel.shape
    bi = b if C % b == 0 else 1
    blocked = kernel.reshape(K // b, b, C // bi, bi, R, S)
    return aligned.ascontiguous(blocked.transpose(0, 2, 4, 5, 3, 1))


def pack_nchwc_kernel_bf16(kernel: np.ndarray, b: int) -> np.ndarray:
    """An OIHW ``kernel`` (float32, rounded to bfloat16 to nearest even, or bfloat16) as
    the int32 ``[K/b, C/b, R, S, b/2, b]`` the bfloat16 products read: ``[o, i, r, s, j,
    co]`` holds the weights of input channels ``i*b + 2j`` (low half) and ``i*b + 2j + 1``
    of output channel ``o*b + co``."""
    halves = np.asarray(kernel).astype(ml_dtypes.bfloat16).view(np.uint16)
    blocked = pack_nchwc_kernel(halves, b)
    Kb, Cb, R, S = blocked.shape[:4]
    pairs = blocked.reshape(Kb, Cb, R, S, b // 2, 2, b).transpose(0, 1, 2, 3, 4, 6, 5)
    return aligned.ascontiguous(np.ascontiguousarray(pairs).view(np.int32)
                                .reshape(Kb, Cb, R, S, b // 2, b))


def _logical_shapes(data_shape, kernel_shape, what, block=None):
    """``((N, C, H, W), (K, C, R, S), b)`` of blocked data ``[N, C/b, H, W, b]``, or of
    planar data ``[N, C, H, W]`` whose channels the output's ``block`` b does not divide."""
    K, C, R, S = (int(d) for d in kernel_shape)
    if len(data_shape) == 4:
        N, Cd, H, W = data_shape
        if block is None or int(Cd) != C or C % int(block) == 0 or K % int(block):
            raise ValueError(
                f"{what}: planar data {tuple(data_shape)} needs block=, the output's "
                f"channel block (got {block}), which must divide the kernel's {K} output "
                f"channels and not its {C} input channels (of which the data has {Cd}); "
                f"data with whole blocks of channels comes blocked, [N, C/b, H, W, b]")
        return (N, C, H, W), (K, C, R, S), int(block)
    N, Cb, H, W, b = data_shape
    b = int(b)
    if int(Cb) * b != C or K % b:
        raise ValueError(f"{what}: data {tuple(data_shape)} holds {int(Cb) * b} channels "
                         f"in blocks of {b}, the kernel {tuple(kernel_shape)} reads {C} "
                         f"and writes {K}; both must be multiples of the block")
    return (N, C, H, W), (K, C, R, S), b


#: The widest untuned tile over a row of symbolic width, which ends in a partial tile
#: computed whole: at most 7 columns past its end.
SYMBOLIC_TILE_COLUMNS = 8


def define_conv2d_nchwc_knobs(cfg, C, H, W, K, R, S, OW, b, padded=False, pairs=False):
    """``tile_ocb`` (output channel blocks per register tile), ``tile_ow`` (output columns
    per tile: a divisor of OW, or one of :data:`.conv2d.PADDED_TILE_WIDTHS`, the row then
    computed over whole tiles and cropped),
    ``unroll_kw`` (the kernel's columns unrolled inside each
    input channel, reading a padded input in place, else a loop outside them over a padded
    copy; see the module docstring; one value for an unpadded kernel one column wide,
    where both are the same code) and ``order`` (``"oh_oc"``: the threads
    share out output rows, each computing all channel blocks of its rows, so the input is
    read once; ``"oc_oh"``: they share out channel blocks, so the weights are read once).

    ``order`` is a rule, not a choice the tuner makes: it reads once whichever of input
    and weights is larger. In a model run the input was just written by the previous
    kernel, half of it by each core, a situation the tuner's timing (the input warm in the
    timing cores' caches) does not reproduce: on ResNet-50 a tuner free to choose shared
    out channel blocks in 7 of the 10 layers where this rule shares out rows (timed alone,
    the 256->64 1x1 at 56x56 took 0.320 ms so against 0.330 with rows), and in a run that
    layer took 0.54 ms instead of 0.32 (each thread reading the whole 3.2 MB input, half of
    it from the other core): the model ran at 1.08x ONNX Runtime's time, 1.02x untuned.

    The fallback comes from the target's registers and FMA latency
    (:func:`tecomp.topi.cpu_tiling.blocked_conv_register_tile`): two vectors of channel blocks
    by the widest row divisor that keeps the tile near twice the FMA chains (2 blocks by 8
    columns with AVX-512, by 4 with AVX2; rows of up to 4 blocks on bfloat16 ``pairs``,
    :data:`~tecomp.topi.cpu_tiling.BF16_ROW_VECTORS`, whose tile keeps half again the chains,
    :func:`~tecomp.topi.cpu_tiling.bf16_dot_chains`). Padded, it reads in place with the
    kernel's columns unrolled where their weight vectors fit beside a tile of enough chains
    (:func:`~tecomp.topi.cpu_tiling.blocked_conv_reads_in_place`), so the tile is smaller,
    unless each output row streams the kernel from beyond L2 (the copy's loop order reads it
    better: :func:`~tecomp.topi.cpu_tiling.weights_stream_past_l2`; VGG-19's 256-channel 3x3
    layers at 56x56 on 2 Zen 5 cores 8.2 -> 7.5 ms); a padded row of at most 7 columns keeps the
    copy, which the schedule's whole-plane passes run faster (ResNet-50's 3x3 512->512 at 7x7,
    in a model run: 1.02-1.12 ms so, 1.18-1.30 ms in place). A row with no divisor that reaches
    the FMA chains (SqueezeNet's 13 and 27 columns) gets the largest tile the registers hold (2
    threads, AVX-512, ms: 3x3 64->256 at 13x13 0.454 -> 0.139 with 1 block by 13, 3x3
    32->128 at 27x27 0.217 -> 0.155 with 2 by 9, 1x1 64->256 at 13x13 0.032 -> 0.018 with
    2 by 13). Where the divisors leave a tile of one channel vector, a convolution not
    reading in place takes a padded row of two instead
    (:func:`~tecomp.topi.cpu_tiling.padded_conv_columns`; ResNet-50's 14- and 7-column 1x1
    layers on 2 Zen 3 cores, AVX2: 1024->256 at 14x14 1.27 -> 0.81 ms with 2 blocks by 5,
    the stride-2 512->1024 into 14x14 3.0 -> 2.0 ms; its padded 3x3 layers over their
    zero-bordered copy, paired on the same cores, GFLOPS: 256->256 at 14x14 106 -> 121, the
    stride-2 256->256 into 14x14 98 -> 116, 512->512 at 7x7 104 -> 111; in place the
    clamped last tile would keep the border conditions in its multiply-adds). On 16
    registers (:func:`~tecomp.topi.cpu_tiling.one_vector_tiles_load_bound`) a padded
    convolution whose in-place tile is one channel vector takes that padded row over the
    copy instead (SqueezeNet's 3x3 16->64 at 55x55: 76 -> 130 GFLOPS; the model 0.89x
    and Inception-v1 0.87x the previous build's time)."""
    # A symbolic size is chosen for as if it were 224 (see conv2d's SYMBOLIC_EXTENT):
    # every tile then crops a row computed over whole tiles.
    symbolic = not isinstance(OW, int)
    H, W, OW = (nominal_size(d) for d in (H, W, OW))
    blocks = K // b
    ocb = [d for d in (1, 2, 4) if blocks % d == 0]
    ow = [d for d in _divisors(OW) if d <= 28]
    # A convolution may also tile its rows by widths that do not divide them (the row
    # computed over whole tiles, its last reading the last column again).
    padded_ow = _padded_widths(OW, ow)
    cfg.define_knob("tile_ocb", ocb)
    cfg.define_knob("tile_ow", ow + padded_ow)
    cfg.define_knob("unroll_kw", [True, False] if padded or S > 1 else [False])
    cfg.define_knob("order", ["oh_oc" if K * C * R * S <= C * H * W else "oc_oh"])
    if cfg.is_fallback:
        caps = cpu_tiling.current_caps()
        # A padded row of at most 7 columns reads the padded copy (cheap for so small a
        # plane), which the whole-plane passes of the schedule run faster than in place.
        # Over a symbolic width the padded copy, which covers whole tiles, leaves the
        # multiply-adds free of tests (in place the last tile would test each column),
        # and tiles of at most SYMBOLIC_TILE_COLUMNS keep the columns computed past the
        # row's end few.
        if symbolic:
            ow = [d for d in ow if d <= SYMBOLIC_TILE_COLUMNS]
        streams = cfg["order"].val == "oh_oc" and cpu_tiling.weights_stream_past_l2(
            caps, K * C * R * S * (2 if pairs else 4))
        in_place = (padded and not symbolic and OW > 7 and not streams
                    and cpu_tiling.blocked_conv_reads_in_place(caps, b, ocb, ow, S, pairs))
        rows, cols = cpu_tiling.blocked_conv_register_tile(
            caps, b, ocb, ow, S if in_place else 1, pairs)
        # A tile of one channel vector loads a broadcast per multiply-add: where no
        # divisor of the row gives one of two, a padded row may (14 and 7 columns on AVX2),
        # over the zero-bordered copy (in place, the last tile's clamped columns would keep
        # the border conditions in its multiply-adds).
        one_vector = rows * cpu_tiling.vectors_of(caps, b) < 2
        if padded_ow and one_vector and not symbolic and (
                not in_place or cpu_tiling.one_vector_tiles_load_bound(caps)):
            wide = cpu_tiling.padded_conv_columns(caps, b, ocb, OW, ow + padded_ow)
            if wide is not None:
                (rows, cols), in_place = wide, False
        cfg.fallback_knob("tile_ocb", rows)
        cfg.fallback_knob("tile_ow", cols)
        cfg.fallback_knob("unroll_kw", in_place)


def compute_conv2d_nchwc(cfg, data, kernel, strides=(1, 1), padding=(0, 0), dilation=(1, 1),
                         block=None, out_dtype=None):
    """``[N, K/b, OH, OW, b]`` from blocked ``data`` and a packed ``kernel`` (tag
    ``"conv2d_nchwc"``), with ``strides`` and ``dilation`` per spatial axis; ``padding``
    is ``(ph, pw)`` or ``(top, left, bottom, right)``; ``block``, if given, must be the
    data's ``b``; ``out_dtype``, if given, float32 for bfloat16 data (the sums' dtype).
    ``cfg`` is the operator's config (:func:`tecomp.topi.strategy.select_config`)."""
    what = "conv2d_nchwc"
    data_shape = _shape_of(data)
    Kb, Cb, R, S, bi, bo = (int(d) for d in kernel.shape)
    planar = len(data_shape) == 4
    if block is not None and int(block) != (bo if planar else data_shape[4]):
        raise ValueError(f"{what}: block={block}, but the "
                         + (f"kernel {tuple(kernel.shape)} writes blocks of {bo}" if planar
                            else f"data {data_shape} is blocked by {data_shape[4]}"))
    pairs = data.dtype == "bfloat16"
    per_word = 2 if pairs else 1
    check_out_dtype(what, data.dtype, out_dtype)
    if planar:
        fits = bi == 1 and not pairs and kernel.dtype == data.dtype and Cb == data_shape[1]
        need = "[K/b, C, R, S, 1, b], float32 data"
    else:
        fits = (bi * per_word == bo and bo == data_shape[4] and Cb == data_shape[1]
                and pairs == (kernel.dtype == "int32"))
        need = "int32 [K/b, C/b, R, S, b/2, b]" if pairs else "[K/b, C/b, R, S, b, b]"
    if not fits:
        raise ValueError(f"{what}: the kernel {kernel.dtype} {(Kb, Cb, R, S, bi, bo)} does "
                         f"not fit the {'planar' if planar else 'blocked'} {data.dtype} data "
                         f"{data_shape} (need {need})")
    (N, C, H, W), (K, _, R, S), b = _logical_shapes(
        data_shape, (Kb * bo, Cb * bi * per_word, R, S), what, block=bo)
    (N, C, H, W, K, _, R, S, sh, sw, dh, dw, pads, OH, OW) = _geometry(
        (N, C, H, W), (K, C, R, S), strides, padding, dilation, what)
    define_conv2d_nchwc_knobs(cfg, C, H, W, K, R, S, OW, b, padded=any(pads), pairs=pairs)
    top, left, bottom, right = pads
    tile = cfg["tile_ow"].val
    whole = isinstance(OW, int) and OW % tile == 0
    width = OW if whole else _ceil_div(OW, tile) * tile

    in_place = cfg["unroll_kw"].val or not any(pads)
    if not in_place:
        # The copy covers every column the whole tiles read: those past the row read zeros.
        Hp, Wp = H + top + bottom, (width - 1) * sw + (S - 1) * dw + 1
        source = data

        def bordered(n, c, y, x, *i):
            return te.if_then_else(te.all(y >= top, y < H + top, x >= left, x < W + left),
                                   source[(n, c, y - top, x - left, *i)],
                                   te.const(0, data.dtype))

        data = te.compute((N, Cb, Hp, Wp) if planar else (N, Cb, Hp, Wp, b), bordered,
                          name="data_pad", tag="conv2d_nchwc_pad")
        top = left = 0
    ico = te.reduce_axis((0, Cb), name="ico")
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    ici = te.reduce_axis((0, bi), name="ici")

    # Columns past the row read its last column again (in place; the copy has zeros
    # there).
    clamp = in_place and not whole

    def conv(n, o, y, x, ob):
        if clamp:
            x = te.min(x, OW - 1)
        iy, ix = y * sh + ry * dh - top, x * sw + rx * dw - left
        inside = []
        if in_place:
            inside = [c for c, pad in ((iy >= 0, top), (iy < H, bottom), (ix >= 0, left),
                                       (ix < W, right)) if pad]
        if pairs:
            product = te.dot2_bf16(te.bf16_pair(data[n, ico, iy, ix, 2 * ici],
                                                data[n, ico, iy, ix, 2 * ici + 1]),
                                   kernel[o, ico, ry, rx, ici, ob])
        else:
            # Planar data: one channel plane per step of ``ico`` (``ici`` is one step).
            point = data[n, ico, iy, ix] if planar else data[n, ico, iy, ix, ici]
            product = point * kernel[o, ico, ry, rx, ici, ob]
        return te.sum(product, axis=[ico, ry, rx, ici],
                      where=te.all(*inside) if inside else None)

    out = te.compute((N, K // b, OH, width, b), conv, name="conv", tag="conv2d_nchwc")
    if whole:
        return out
    return crop(out, (N, K // b, OH, OW, b))


#: Weights of at least this many bytes are prefetched ahead of the register tile: in a
#: model run they come from beyond the core's L2 (2 MB on the Xeon measured), where the
#: hardware prefetcher alone left ResNet-50's 14x14 and 7x7 layers 10-40% slower than
#: with their weights warm. Below it (ResNet-50's first stages) a prefetch only costs.
PREFETCH_WEIGHT_BYTES = 1 << 20

#: How far ahead of each weight vector the tile prefetches, in bytes of the packed weight.
PREFETCH_DISTANCE = 4096

#: The accumulators of one channel-block tile over a whole output plane, at most this many
#: bytes, live in L1 between passes over chunks of input channels (see the schedule).
PLANE_ACCUMULATOR_BYTES = 8192

#: Input channel blocks per pass when a tile covers its whole output plane.
CHANNEL_BLOCKS_PER_PASS = 4


def _whole_plane_passes(cfg, OH, OW, b, elem_bytes) -> bool:
    """Whether a tile of ``tile_ocb`` channel blocks covers whole rows and keeps its
    accumulators for the whole plane in L1 (see :func:`schedule_conv2d_nchwc`)."""
    if not (isinstance(OH, int) and isinstance(OW, int)):
        return False
    return (cfg["order"].val == "oc_oh" and cfg["tile_ow"].val == OW
            and OH * OW * cfg["tile_ocb"].val * b * elem_bytes <= PLANE_ACCUMULATOR_BYTES)


def schedule_conv2d_nchwc(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_conv2d_nchwc` and any
    elementwise epilogue (bias, activation, residual add, on the blocked layout), run at
    the register tile (``cfg`` is the operator's config,
    :func:`tecomp.topi.strategy.select_config`). Output rows and groups of channel blocks
    run in parallel, in the
    config's ``order``; the padded copy of the input, if any, is its own parallel pass.

    Two rules for the weights, which in a model run come from beyond L2 in the deep
    layers (each thread's share of ResNet-50's 7x7 layers streams 2-5 MB):

    - A tile whose register rows are whole output rows, on a plane whose accumulators
      fit in L1 (7x7 planes; ``PLANE_ACCUMULATOR_BYTES``), makes passes over chunks of
      ``CHANNEL_BLOCKS_PER_PASS`` input channel blocks, each pass over every row: each
      weight vector then serves the whole plane while in L1, and the weights stream
      evenly through the kernel instead of in a burst at each tile's first row.
    - Weights of at least ``PREFETCH_WEIGHT_BYTES`` are prefetched ``PREFETCH_DISTANCE``
      bytes ahead of the tile (:meth:`Stage.prefetch` over the kernel rows, extrapolating
      into the next input channels).

    In a ResNet-50 run, both rules against neither (same process, interleaved): the model
    0-3% faster over three runs, its 7x7 layers 0-4% and 14x14 layers 1-5% where it showed;
    the weights still arrive at memory speed (14-18 GB/s here), as they do for ONNX Runtime.
    """
    what = "schedule_conv2d_nchwc"
    out = group_output(outs, what)
    s = te.create_schedule(out.op)
    conv = find_anchor(out, "conv2d_nchwc", what)
    for t in conv.input_tensors:
        if t.op.tag == "conv2d_nchwc_pad":
            n, c, y, x, *i = s[t].op.axis
            s[t].parallel(s[t].fuse(n, c, y))
            s[t].vectorize(i[0] if i else x)
    kernel = next(t for t in conv.input_tensors if len(t.shape) == 6)
    OH, OW = (_size(d) for d in out.shape[2:4])
    b = int(out.shape[4])
    whole_plane = _whole_plane_passes(cfg, OH, OW, b, np.dtype(out.dtype).itemsize)
    # The tile's weights stay in registers along a row: one input-channel block, 1x1.
    weights_stay = int(np.prod([int(d) for d in kernel.shape[1:4]])) == 1 and int(
        kernel.shape[4]) > 1
    # Declared whatever the tile, so that every config of the space has the knob; passes
    # over whole planes keep the epilogue at the tile.
    place = epilogue_place(cfg, out, conv, what, weights_stay)
    if place == "row" and not whole_plane:
        CL = _row_epilogue(s, cfg, out, conv, what)
    else:
        CL = _tile_epilogue(s, cfg, out, conv, whole_plane, what)
    _, rr, _, rci = s[CL].op.reduce_axis
    s[CL].unroll(rci)
    word_bytes = np.dtype(kernel.dtype).itemsize
    weight_bytes = int(np.prod([int(d) for d in kernel.shape])) * word_bytes
    if weight_bytes >= PREFETCH_WEIGHT_BYTES:
        row_bytes = int(np.prod([int(d) for d in kernel.shape[3:]])) * word_bytes
        s[CL].prefetch(kernel, rr, max(1, PREFETCH_DISTANCE // row_bytes))
    return s


def _row_epilogue(s, cfg, out, conv, what):
    """The convolution's register tiles stored over an output row (the group's parallel
    task: ``tile_ocb`` channel blocks of one row), then the epilogue over that row, one
    vector at a time. Returns the accumulators' local stage."""
    n, o, y, x, ob = s[out].op.axis
    oo, oi = s[out].split(o, factor=cfg["tile_ocb"].val)
    if cfg["order"].val == "oh_oc":
        s[out].reorder(n, y, oo, oi, x, ob)
        task = s[out].fuse(n, y, oo)
    else:
        s[out].reorder(n, oo, y, oi, x, ob)
        task = s[out].fuse(n, oo, y)
    row, CL = cache_row(s, out, conv, what, task)
    rn, ro, ry, rx, rb = s[row].op.axis
    xo, xi = s[row].split(rx, factor=cfg["tile_ow"].val)
    s[row].reorder(rn, ry, xo, ro, xi, rb)
    s[row].unroll(ro)
    s[row].unroll(xi)
    s[row].vectorize(rb)
    s[CL].compute_at(s[row], xo)
    _, lo, ly, lx, lb = s[CL].op.axis
    rco, rr, rs, rci = s[CL].op.reduce_axis
    order_window(s[CL], (rco,), (rr, rs, rci), (ly, lx, lo, lb), cfg["unroll_kw"].val)
    return CL


def _tile_epilogue(s, cfg, out, conv, whole_plane, what):
    """The group's epilogue inlined into the output's register tile, the tile's loops
    as the config and ``whole_plane`` say (see :func:`schedule_conv2d_nchwc`). Returns the
    accumulators' local stage."""
    CL = inline_epilogue(s, out, conv, what)
    n, o, y, x, ob = s[out].op.axis
    oo, oi = s[out].split(o, factor=cfg["tile_ocb"].val)
    xo, xi = s[out].split(x, factor=cfg["tile_ow"].val)
    _, lo, ly, lx, lb = s[CL].op.axis
    rco, rr, rs, rci = s[CL].op.reduce_axis
    if whole_plane:
        s[out].reorder(n, oo, y, xo, oi, xi, ob)
        tile = s[out].fuse(n, oo)
        s[out].parallel(tile)
        s[CL].compute_at(s[out], tile)
        rco, rci_block = s[CL].split(rco, factor=CHANNEL_BLOCKS_PER_PASS)
        order_window(s[CL], (rco, ly, rci_block), (rr, rs, rci), (lx, lo, lb),
                     cfg["unroll_kw"].val)
    else:
        if cfg["order"].val == "oh_oc":
            s[out].reorder(n, y, oo, xo, oi, xi, ob)
            s[out].parallel(s[out].fuse(n, y, oo))
        else:
            s[out].reorder(n, oo, y, xo, oi, xi, ob)
            s[out].parallel(s[out].fuse(n, oo, y))
        s[CL].compute_at(s[out], xo)
        # Per input channel: each column's broadcast serves every channel block of the
        # tile before the next is loaded (channel blocks innermost keeps the live registers
        # to the accumulators, the tile's weight vectors and one broadcast).
        order_window(s[CL], (rco,), (rr, rs, rci), (ly, lx, lo, lb), cfg["unroll_kw"].val)
    s[out].unroll(oi)
    s[out].unroll(xi)
    s[out].vectorize(ob)
    return CL


@template("conv2d_nchwc")
def conv2d_nchwc(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0), dilation=(1, 1),
                 dtype="float32", block=None):
    """Tunable conv2d on blocked activations (see the module docstring); the kernel input
    is the packed ``[K/b, C/b, R, S, b, b]`` weight, for bfloat16 data the int32
    ``[K/b, C/b, R, S, b/2, b]`` of :func:`pack_nchwc_kernel_bf16`. Planar data
    ``[N, C, H, W]`` (channels that ``block``, the output's, does not divide) reads the
    ``[K/b, C, R, S, 1, b]`` kernel of :func:`pack_nchwc_kernel`."""
    what = "conv2d_nchwc"
    _, (K, C, R, S), b = _logical_shapes(data_shape, kernel_shape, what, block)
    cfg = get_config()
    data = te.placeholder(tuple(data_shape), dtype, name="data")
    if len(data_shape) == 4:
        kernel = te.placeholder((K // b, C, R, S, 1, b), dtype, name="kernel")
    elif dtype == "bfloat16":
        kernel = te.placeholder((K // b, C // b, R, S, b // 2, b), "int32", name="kernel")
    else:
        kernel = te.placeholder((K // b, C // b, R, S, b, b), dtype, name="kernel")
    out = compute_conv2d_nchwc(cfg, data, kernel, strides, padding, dilation)
    return schedule_conv2d_nchwc(cfg, [out]), [data, kernel, out]


def _nchwc_workload(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0),
                    dilation=(1, 1), dtype="float32", block=None):
    """The template's arguments: the output's ``block`` only with planar data (blocked
    data says its block, and its workloads keep the arguments they always had)."""
    args = _conv_workload(data_shape, kernel_shape, strides, padding, dilation, dtype)
    return args + (int(block),) if len(data_shape) == 4 else args


def _prepack(cfg, kernel, block, **attrs):
    """The OIHW weight (the graph's constant) blocked like the data (the kernel of planar
    data where ``block`` does not divide its input channels); a bfloat16 one as words of
    two input channels."""
    if kernel.dtype == ml_dtypes.bfloat16:
        return (pack_nchwc_kernel_bf16(kernel, block),)
    return (pack_nchwc_kernel(kernel, block),)


register_implementation(Implementation(
    "conv2d_nchwc", "llvm", compute_conv2d_nchwc, schedule_conv2d_nchwc,
    template="conv2d_nchwc", workload=_nchwc_workload, prepack=_prepack, packed_inputs=(1,),
    packing_reads_config=False, batch_free_config=True))
