"""Integer products of quantized tensors: ``qnn_matmul`` and ``qnn_conv2d``.

Both take 8-bit operands (uint8 or int8, as ONNX's MatMulInteger / ConvInteger and the
QDQ format give them) with their zero points and compute the exact int32 sum of
``(a - a_zero) * (b - b_zero)``; a scale (and a requantize back to 8 bits) is an
elementwise epilogue that the graph fuses into the product's output loop, so the group
reads int8, accumulates in int32 registers and writes int8.

- ``qnn_matmul(A[N, K], B[K, M], a_zero, b_zero) -> int32[N, M]``: ``a_zero`` is a
  scalar (or one element), ``b_zero`` a scalar or one per column ``[M]``;
- ``qnn_conv2d(data[N, C, H, W], kernel[K, C, R, S], x_zero, w_zero, strides, padding,
  dilation) -> int32[N, K, OH, OW]``: ``x_zero`` a scalar, ``w_zero`` a scalar or one
  per output channel ``[K]``. The padding holds the real value 0, i.e. ``x_zero``, so
  it adds nothing to the sum.

The CPU schedules vectorize the int32 accumulation over output columns (matmul) or
output pixels (conv2d) with a register tile of a few rows or output channels; the
operands are widened to 32 bits before the multiply, so every product and the sum are
exact for any K below 2**15 (the largest |product| is 255 * 255).
"""

from __future__ import annotations

import numpy as np

from .. import te
from ..te import intrin
from ..autotune import get_config, template
from ..errors import DTypeError, ShapeError
from ..te.analysis import ops_of
from .conv2d import _ceil_div, _geometry, _inside_padding, nominal_size
from .cpu_schedule import (
    const_int,
    current_target,
    parallel,
    schedule_injective_stage,
    vector_lanes,
)
from .group import find_anchor, group_output, inline_epilogue
from .strategy import Implementation, register_implementation

#: The operand dtypes of the integer products (ONNX's T1 / T2 of MatMulInteger).
QUANTIZED_DTYPES = ("uint8", "int8")

_ACC = "int32"

#: Tags of qnn_conv2d's padded input and of its product over whole vectors of pixels
#: (the operator's output, tagged ``"qnn_conv2d"``, crops it).
PAD_TAG = "qnn_conv2d_pad"
TILES_TAG = "qnn_conv2d_tiles"

#: Tag of the packing of a computed kernel by vectors of output channels.
KERNEL_PACK_TAG = "qnn_conv2d_kernel_pack"

#: Tags of the quads layouts' activation words, their computed (per-call) weight
#: packing and sums, and the matmul's product over whole vectors of columns.
QUADS_DATA_TAG = "qnn_data_quads"
QUADS_KERNEL_TAG = "qnn_weight_quads"
MATMUL_TILES_TAG = "qnn_matmul_tiles"


def _shifted(value, zero):
    """``value - zero`` in int32, or ``value`` for no zero point (the symmetric int8
    weights onnxruntime writes).

    The simplifier distributes the product of two differences over them: ``(a - za) *
    b`` becomes ``a * b - za * b``, whose second product is the same for every lane of
    a vector (hoisted, one broadcast), while a weight zero point adds products per lane.
    The 8-bit operands stay 8-bit loads: LLVM pairs products into ``vpmaddwd`` /
    ``vpdpwssd`` only where it knows both factors fit in 16 bits, which a difference
    stored in an int16 buffer would hide (``vpmulld`` then, at 1.8x the time of a
    64-channel 28x28 3x3 convolution)."""
    value = value.astype(_ACC)
    return value if zero is None else value - zero


def _check_operand(what: str, t, zero) -> None:
    if t.dtype not in QUANTIZED_DTYPES:
        raise DTypeError(f"{what}: {t.name} is {t.dtype}; allowed: {', '.join(QUANTIZED_DTYPES)}")
    if zero is not None and zero.dtype != t.dtype:
        raise DTypeError(f"{what}: the zero point {zero.name} is {zero.dtype} but "
                         f"{t.name} is {t.dtype}; they must have one dtype")


def _zero_reader(what: str, zero, count: int | None, per: str):
    """``read(i)``: the zero point of row/channel ``i`` as int32, from a scalar, a
    one-element or (with ``count``) a per-``per`` vector of ``count`` values; None for
    no zero point (0)."""
    if zero is None:
        return None
    if len(zero.shape) == 0:
        return lambda i: zero[()].astype(_ACC)
    n = const_int(zero.shape[0]) if len(zero.shape) == 1 else None
    if n == 1:
        return lambda i: zero[0].astype(_ACC)
    if count is not None and n == count:
        return lambda i: zero[i].astype(_ACC)
    allowed = "a scalar or one element" + (f", or {count} values (one per {per})"
                                           if count is not None else "")
    raise ShapeError(f"{what}: the zero point {zero.name} has shape "
                     f"{[str(d) for d in zero.shape]}; allowed: {allowed}")


# ---- matmul --------------------------------------------------------------------------------


def define_qnn_matmul_knobs(cfg, N, K, M):
    """``rows`` of the register tile and ``cols``, the vectors of int32 lanes per row it
    accumulates; ``tile_k`` unrolls the reduction. The fallback takes 4 rows (1 for a
    single row) of two vectors."""
    lanes = vector_lanes(_ACC)
    rows = N if isinstance(N, int) else 64
    cfg.define_knob("rows", [r for r in (1, 2, 4, 8) if r <= max(rows, 1)])
    cfg.define_knob("cols", [1, 2, 4])
    cfg.define_knob("tile_k", [k for k in (1, 2, 4, 8) if k <= K])
    if cfg.is_fallback:
        cfg.fallback_knob("rows", 4 if rows >= 4 else 1)
        cfg.fallback_knob("cols", 2 if 2 * lanes <= M else 1)
        cfg.fallback_knob("tile_k", 4 if K >= 4 else 1)


def compute_qnn_matmul(cfg, A, B, a_zero, b_zero=None, pairs_fit_int16=False):
    """``int32[N, M] = sum_k (A[n, k] - a_zero) * (B[k, m] - b_zero[m])`` (tag
    ``"qnn_matmul"``).

    Symmetric int8 B (no ``b_zero``) of whole vectors of columns takes the **quads**
    layout: B packed by :func:`pack_qnn_matmul_quads` (or by the compute on every call),
    A read as words of four k, one :func:`tecomp.te.dot4_u8s8` per vector of columns.

    Parameters
    ----------
    cfg : config entity
        The schedule config (:func:`define_qnn_matmul_knobs`).
    A, B : Tensor
        ``[N, K]`` and ``[K, M]``, uint8 or int8; N may be symbolic.
    a_zero, b_zero : Tensor
        The zero points, of A's and B's dtypes: ``a_zero`` a scalar (or one element),
        ``b_zero`` a scalar or ``[M]``, or None (0, as symmetric int8 weights have).
    pairs_fit_int16 : bool
        The promise of :func:`tecomp.te.dot4_u8s8` for the quads layout: B's rows 2j and
        2j+1 of a column sum, by sign, to at most ``32767 / 255`` in magnitude.

    Raises
    ------
    DTypeError, ShapeError
        An operand is not 8-bit, a zero point's dtype or shape does not fit.
    """
    what = "qnn_matmul"
    _check_operand(what, A, a_zero)
    packed = B.dtype == _ACC
    if not packed:
        _check_operand(what, B, b_zero)
    if len(A.shape) != 2 or len(B.shape) != (3 if packed else 2):
        raise ShapeError(f"{what}: A and B must be matrices, got ranks {len(A.shape)} and "
                         f"{len(B.shape)}")
    N = const_int(A.shape[0])
    N = A.shape[0] if N is None else N
    K, K2, M = const_int(A.shape[1]), const_int(B.shape[0]), const_int(B.shape[1])
    if packed:
        lanes = vector_lanes(_ACC)
        K2 = K if const_int(B.shape[1]) == -(-K // 4) + 1 else None
        M = const_int(B.shape[0]) * lanes if const_int(B.shape[2]) == lanes else None
    if None in (K, K2, M) or K != K2:
        raise ShapeError(f"{what}: A is [{A.shape[0]}, {A.shape[1]}] and B [{B.shape[0]}, "
                         f"{B.shape[1]}]; K and M must be static and agree")
    za = _zero_reader(what, a_zero, None, "row")(0)
    zb = _zero_reader(what, b_zero, M, "column")
    if B.dtype == _ACC or (B.dtype == "int8" and zb is None and M % vector_lanes(_ACC) == 0):
        return _compute_matmul_quads(cfg, A, B, za, N, K, M, pairs_fit_int16)
    define_qnn_matmul_knobs(cfg, N, K, M)
    k = te.reduce_axis((0, K), name="k")
    return te.compute(
        (N, M),
        lambda i, j: te.sum(_shifted(A[i, k], za) * _shifted(B[k, j], zb(j) if zb else None),
                            axis=k),
        name="qnn_matmul", tag="qnn_matmul")


def schedule_qnn_matmul(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_qnn_matmul` and its
    elementwise epilogue (rescale, bias, activation, requantize) in its output loop.

    Row tiles of ``rows`` by column tiles of ``cols`` vectors run in parallel; each
    accumulates in ``rows x cols`` int32 vectors over k (a broadcast of A times a
    widened vector of B per step).

    Parameters
    ----------
    cfg : config entity
        The config the compute was given.
    outs : Tensor or list of Tensor
        The group's one output.

    Returns
    -------
    Schedule
    """
    what = "schedule_qnn_matmul"
    out = group_output(outs, what)
    s = te.create_schedule(out.op)
    if "col_vectors" in cfg:
        packs = [op for op in ops_of([out]) if getattr(op, "tag", "") == QUADS_KERNEL_TAG]
        local = inline_epilogue(s, out, find_anchor(out, MATMUL_TILES_TAG, what), what,
                                head=find_anchor(out, "qnn_matmul", what), beside=packs)
        for op in packs:
            schedule_injective_stage(s, op.output(0))
        return _schedule_matmul_quads(cfg, s, out, local, what)
    anchor = find_anchor(out, "qnn_matmul", what)
    local = inline_epilogue(s, out, anchor, what)
    lanes = vector_lanes(_ACC)
    i, j = s[out].op.axis
    io, ii = s[out].split(i, factor=cfg["rows"].val)
    jo, ji = s[out].split(j, factor=lanes * cfg["cols"].val)
    s[out].reorder(io, jo, ii, ji)
    parallel(s[out], s[out].fuse(io, jo))
    s[out].vectorize(ji)
    s[local].compute_at(s[out], s[out].leaf_iter_vars[0])
    ci, cj = s[local].op.axis
    ko, ki = s[local].split(s[local].op.reduce_axis[0], factor=cfg["tile_k"].val)
    s[local].reorder(ko, ki, ci, cj)
    s[local].vectorize(cj)
    s[local].unroll(ci)
    if cfg["tile_k"].val > 1:
        s[local].unroll(ki)
    return s


# ---- matmul on quads of k --------------------------------------------------------------------


def define_qnn_matmul_quads_knobs(cfg, N, M):
    """``rows`` of A by ``col_vectors`` vectors of output columns per register tile; the
    fallback is :func:`_quads_fallback_tile`'s, fewer rows for a short A."""
    lanes = vector_lanes(_ACC)
    vectors = M // lanes
    rows = N if isinstance(N, int) else 64
    cfg.define_knob("col_vectors", [v for v in (1, 2, 3, 4) if vectors % v == 0])
    cfg.define_knob("rows", [r for r in (1, 2, 3, 4, 5, 6, 8) if r <= max(rows, 1)])
    if cfg.is_fallback:
        tile_vectors, tile_rows = _quads_fallback_tile(vectors)
        cfg.fallback_knob("col_vectors", tile_vectors)
        cfg.fallback_knob("rows", max(r for r in (1, 2, 3, 4, 6) if r <= min(rows, tile_rows)))


def _quads_fallback_tile(vectors: int) -> tuple:
    """``(vectors, rows)`` of the untuned register tile of the quads layouts, for
    ``vectors`` vectors of output channels: one accumulator each, filling the vector
    registers beside the weight vectors, the broadcast word and the constants: 2 vectors
    by 4 rows where there are 16 registers, 3 by 6 where there are 32 (fewer vectors where
    they do not divide the channels)."""
    wide = current_target().num_vector_registers >= 32
    return (max(v for v in (1, 2, 3)[:3 if wide else 2] if vectors % v == 0),
            6 if wide else 4)


def _quads_fallback_rows(width: int, tile_rows: int) -> int:
    """The untuned ``rows`` of a convolution's register tile over rows of ``width``
    pixels: within two of ``tile_rows`` (up to one more where there are 16 registers),
    or the row itself where it is narrower, the one that computes the fewest columns
    past the row (the widest of those). A 56-pixel row in tiles of 6 ends in a tile of
    2; in tiles of 8 it has none: 3x3 64 -> 64 at 56x56 on blocked data went from 0.38
    to 0.27 ms (2 threads, AVX-512)."""
    wide = current_target().num_vector_registers >= 32
    top = tile_rows + (2 if wide else 1)
    candidates = set(range(max(tile_rows - 2, 1), top + 1)) | ({width} if width <= top else set())
    return min(candidates, key=lambda r: (-(-width // r) * r, -r))


def pack_qnn_matmul_quads(b: np.ndarray, lanes: int) -> np.ndarray:
    """A symmetric int8 ``B[K, M]`` (M a multiple of ``lanes``) as the int32
    ``[M/lanes, K4 + 1, lanes]`` the quads layout reads (K4 = ceil(K/4)): ``[o, k4, l]``
    holds ``B[4*k4 .. 4*k4 + 3, o*lanes + l]`` (0 past K) as the bytes of one word,
    ``[o, K4, l]`` the column's sum."""
    K, M = b.shape
    # B's columns are a 1x1 convolution's output channels, its rows the input channels.
    packed = pack_qnn_conv2d_quads(np.ascontiguousarray(b.T).reshape(M, K, 1, 1), lanes)
    return packed.reshape(M // lanes, -(-K // 4) + 1, lanes)


def _compute_matmul_quads(cfg, A, B, za, N, K, M, pairs_fit):
    lanes = vector_lanes(_ACC)
    K4 = -(-K // 4)
    if B.dtype == _ACC:
        words = B

        def column_sum(m):
            return B[m // lanes, K4, m % lanes]
    else:
        def byte_of_b(k, m):
            value = B[te.min(k, K - 1), m].astype(_ACC).astype("uint32") % 256
            return te.if_then_else(k < K, value, te.const(0, "uint32")) if K % 4 else value

        words = te.compute(
            (M // lanes, K4, lanes),
            lambda o, k4, lane: _byte_word([byte_of_b(4 * k4 + i, o * lanes + lane)
                                            for i in range(4)]),
            name="b_quads", tag=QUADS_KERNEL_TAG)
        rk = te.reduce_axis((0, K), name="rk")
        sums = te.compute((M,), lambda m: te.sum(B[rk, m].astype(_ACC), axis=rk),
                          name="b_sums", tag=QUADS_KERNEL_TAG)

        def column_sum(m):
            return sums[m]
    define_qnn_matmul_quads_knobs(cfg, N, M)
    signed = A.dtype == "int8"
    shift = 128 if signed else 0
    zero_byte = (za + shift).astype("uint32")

    # Rows are computed in whole register tiles, from A's words padded with its zero
    # point: the reduction has no condition where N is not a multiple of them (or is
    # symbolic), and out crops the rows past N.
    rows = cfg["rows"].val
    Np = -(-N // rows) * rows if isinstance(N, int) else (N + rows - 1) // rows * rows
    padded_rows = not (isinstance(N, int) and N % rows == 0)

    def byte_of_a(n, k):
        conds = ([k < K] if K % 4 else []) + ([n < N] if padded_rows else [])
        row = te.min(n, N - 1) if padded_rows else n
        value = (A[row, te.min(k, K - 1) if K % 4 else k].astype(_ACC) + shift
                 ).astype("uint32")
        return te.if_then_else(te.all(*conds), value, zero_byte) if conds else value

    a_quads = te.compute((Np, K4), lambda n, k4: _byte_word([byte_of_a(n, 4 * k4 + i)
                                                             for i in range(4)]),
                         name="a_quads", tag=QUADS_DATA_TAG)
    rk4 = te.reduce_axis((0, K4), name="rk4")
    tiles = te.compute(
        (Np, M // lanes, lanes),
        lambda n, o, lane: te.sum(te.dot4_u8s8(a_quads[n, rk4], words[o, rk4, lane], pairs_fit),
                                  axis=rk4),
        name="qnn_matmul_tiles", tag=MATMUL_TILES_TAG)
    return te.compute(
        (N, M), lambda n, m: tiles[n, m // lanes, m % lanes] - (za + shift) * column_sum(m),
        name="qnn_matmul", tag="qnn_matmul")


def _schedule_matmul_quads(cfg, s, out, local, what):
    """Tiles of ``rows`` rows by ``col_vectors`` vectors of columns in parallel, each
    accumulated over k's quads in registers."""
    lanes = vector_lanes(_ACC)
    schedule_injective_stage(s, find_anchor(out, QUADS_DATA_TAG, what).output(0))
    i, j = s[out].op.axis
    io, ii = s[out].split(i, factor=cfg["rows"].val)
    jo, ji = s[out].split(j, factor=lanes * cfg["col_vectors"].val)
    jv, jl = s[out].split(ji, factor=lanes)
    s[out].reorder(io, jo, ii, jv, jl)
    tile = s[out].fuse(io, jo)
    parallel(s[out], tile)
    s[out].vectorize(jl)
    s[local].compute_at(s[out], tile)
    li, lv, ll = s[local].op.axis
    (rk4,) = s[local].op.reduce_axis
    s[local].reorder(rk4, li, lv, ll)
    s[local].vectorize(ll)
    s[local].unroll(lv)
    s[local].unroll(li)
    return s


# ---- conv2d --------------------------------------------------------------------------------


def define_qnn_conv2d_knobs(cfg, C, K, OW):
    """The vectorization and register tile of ``qnn_conv2d``.

    ``vector``: ``"pixels"`` (vectors of int32 output pixels along a row, ``tile_ow`` of
    them by ``tile_oc`` output channels per register tile) or ``"channels"`` (vectors of
    output channels read from a weight packed ``[K/lanes, C, R, S, lanes]``, for
    ``rows`` pixels of a row: a choice for rows narrower than a vector, where K is a
    multiple of the lanes).
    ``tile_ic`` input channels (a divisor of C) are unrolled innermost of the reduction.
    """
    lanes = vector_lanes(_ACC)
    cfg.define_knob("vector", ["pixels", "channels"] if K % lanes == 0 else ["pixels"])
    cfg.define_knob("tile_oc", [c for c in (1, 2, 4, 8) if K % c == 0])
    cfg.define_knob("tile_ow", [1, 2])
    cfg.define_knob("rows", [1, 2, 4, 7, 8])
    cfg.define_knob("tile_ic", [c for c in (1, 2, 4) if C % c == 0])
    if cfg.is_fallback:
        # Channels where a row is narrower than a vector: a 4-pixel row ran in 0.8x
        # the time of pixels (512 -> 512 channels, 3x3, AVX2, 2 threads; the kernel
        # packed per call even), a 28-pixel one in 1.3x.
        cfg.fallback_knob("vector", "channels" if lanes > OW and K % lanes == 0
                          else "pixels")
        cfg.fallback_knob("tile_oc", max(c for c in (1, 2, 4) if K % c == 0))
        cfg.fallback_knob("tile_ow", 2 if 2 * lanes <= OW else 1)
        cfg.fallback_knob("rows", OW if OW in (1, 2, 4, 7, 8) else (8 if OW > 8 else 4))
        cfg.fallback_knob("tile_ic", max(c for c in (1, 2, 4) if C % c == 0))


def pack_qnn_conv2d_kernel(kernel: np.ndarray, lanes: int) -> np.ndarray:
    """An OIHW kernel ``[K, C, R, S]`` as ``[K/lanes, C, R, S, lanes]``, the layout the
    ``"channels"`` vectorization reads (K a multiple of ``lanes``)."""
    K, C, R, S = kernel.shape
    return np.ascontiguousarray(kernel.reshape(K // lanes, lanes, C, R, S)
                                .transpose(0, 2, 3, 4, 1))


def _prepack_qnn_conv2d(cfg, kernel, **attrs):
    """The kernel in the layout the config reads: as quads of input channels, packed by
    vectors of channels, or as it is."""
    if "oc_vectors" in cfg:
        return (pack_qnn_conv2d_quads(kernel, vector_lanes(_ACC)),)
    if cfg["vector"].val == "channels":
        return (pack_qnn_conv2d_kernel(kernel, vector_lanes(_ACC)),)
    return (kernel,)


def compute_qnn_conv2d(cfg, data, kernel, x_zero, w_zero=None, strides=(1, 1),
                       padding=(0, 0, 0, 0), dilation=(1, 1), pairs_fit_int16=False):
    """NCHW ``int32[N, K, OH, OW]``: ``sum (x - x_zero) * (w[k] - w_zero[k])`` over the
    window and the input channels (tag ``"qnn_conv2d"``).

    Symmetric int8 weights (no ``w_zero``) of whole vectors of output channels take the
    **quads** layout: the kernel packed by :func:`pack_qnn_conv2d_quads` (or packed by the
    compute on every call), the input as words of four channels, and each step of the
    reduction one :func:`tecomp.te.dot4_u8s8` per vector of output channels. Other weights
    take the ``"pixels"`` or ``"channels"`` layouts.

    Parameters
    ----------
    cfg : config entity
        The schedule config (:func:`define_qnn_conv2d_knobs`).
    data : Tensor
        ``[N, C, H, W]``, uint8 or int8 (N may be symbolic).
    kernel : Tensor
        OIHW ``[K, C, R, S]``, uint8 or int8, or already packed: by
        :func:`pack_qnn_conv2d_quads` (int32) or, for the ``"channels"`` vectorization, by
        :func:`pack_qnn_conv2d_kernel`.
    x_zero, w_zero : Tensor
        Zero points of ``data``'s and ``kernel``'s dtypes: a scalar, and a scalar or
        ``[K]`` or None (0, as symmetric int8 weights have).
    strides, padding, dilation : tuple of int
        As :func:`tecomp.topi.conv2d`; padded positions hold the real 0.
    pairs_fit_int16 : bool
        The promise of :func:`tecomp.te.dot4_u8s8` for the quads layout: every two
        adjacent input channels' weights of an output channel and window position sum,
        by sign, to at most ``32767 / 255`` in magnitude (``lower_quantized_ops`` checks
        the constant weight).
    """
    what = "qnn_conv2d"
    if kernel.dtype == _ACC or (kernel.dtype == "int8" and w_zero is None and const_int(
            kernel.shape[0]) % vector_lanes(_ACC) == 0):
        _check_operand(what, data, x_zero)
        return _compute_quads(cfg, data, kernel, x_zero, strides, padding, dilation,
                              pairs_fit_int16)
    _check_operand(what, data, x_zero)
    _check_operand(what, kernel, w_zero)
    lanes = vector_lanes(_ACC)
    packed = len(kernel.shape) == 5
    if len(data.shape) != 4 or len(kernel.shape) not in (4, 5):
        raise ShapeError(f"{what}: data and kernel must be 4-D (NCHW, OIHW), got ranks "
                         f"{len(data.shape)} and {len(kernel.shape)}")
    kshape = [const_int(d) for d in kernel.shape]
    if packed:
        kshape = [kshape[0] * kshape[4], *kshape[1:4]]
    (N, C, H, W, K, KC, R, S, sh, sw, dh, dw, pads, OH, OW) = _geometry(
        data.shape, kshape, strides, padding, dilation, what)
    if KC != C:
        raise ShapeError(f"{what}: the kernel reads {KC} input channels, the data has {C} "
                         "(grouped convolutions are not supported)")
    zx = _zero_reader(what, x_zero, None, "tensor")(0)
    zw = _zero_reader(what, w_zero, K, "output channel")
    define_qnn_conv2d_knobs(cfg, C, K, OW)
    by_channels = cfg["vector"].val == "channels"
    if packed and (not by_channels or const_int(kernel.shape[4]) != lanes):
        raise ShapeError(f"{what}: the kernel is packed {kernel.shape}; this config reads "
                         + (f"[K/{lanes}, C, R, S, {lanes}]" if by_channels else "OIHW"))
    if by_channels:
        weight = kernel if packed else te.compute(
            (K // lanes, C, R, S, lanes), lambda o, c, y, x, i: kernel[o * lanes + i, c, y, x],
            name="kernel_vec", tag=KERNEL_PACK_TAG)

        def read_weight(k, c, y, x):
            return weight[k // lanes, c, y, x, k % lanes]
    else:

        def read_weight(k, c, y, x):
            return kernel[k, c, y, x]

    top, left = pads[0], pads[1]
    # Rows are computed in whole register tiles of pixels, from an input padded (with
    # x_zero, the real 0) far enough for them: the reduction then has no condition and
    # no partial vector, which is what lets LLVM pair the products into multiply-adds.
    row = cfg["rows"].val if by_channels else lanes * cfg["tile_ow"].val
    OWp = -(-OW // row) * row
    Hp, Wp = (OH - 1) * sh + (R - 1) * dh + 1, (OWp - 1) * sw + (S - 1) * dw + 1

    x_zero_value = x_zero[()] if len(x_zero.shape) == 0 else x_zero[0]

    def padded(n, c, y, x):
        # Padded with x_zero, the real 0, which the product's shift then cancels.
        conds = _inside_padding(y, x, H, W, Hp, Wp, top, left)
        value = data[n, c, y - top, x - left]
        return te.if_then_else(te.all(*conds), value, x_zero_value) if conds else value

    data_pad = te.compute((N, C, Hp, Wp), padded, name="data_pad", tag=PAD_TAG)
    rc = te.reduce_axis((0, C), name="rc")
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    tiles = te.compute(
        (N, K, OH, OWp),
        lambda n, k, y, x: te.sum(
            _shifted(data_pad[n, rc, y * sh + ry * dh, x * sw + rx * dw], zx)
            * _shifted(read_weight(k, rc, ry, rx), zw(k) if zw else None),
            axis=[rc, ry, rx]),
        name="qnn_conv2d_tiles", tag=TILES_TAG)
    return te.compute((N, K, OH, OW), lambda n, k, y, x: tiles[n, k, y, x],
                      name="qnn_conv2d", tag="qnn_conv2d")


def schedule_qnn_conv2d(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_qnn_conv2d` and its
    elementwise epilogue.

    (batch, output-channel tile, output row) run in parallel; the input is padded in a
    pass of its own before. A register tile holds, with ``"pixels"``, ``tile_oc``
    channels by ``tile_ow`` vectors of pixels of one row, or, with ``"channels"``,
    ``rows`` pixels by one vector of channels; it accumulates over the input channels
    and the window. ``tile_ic`` input channels are unrolled innermost: consecutive
    products into one accumulator are what LLVM pairs into ``vpmaddwd`` (AVX2) or
    ``vpdpwssd`` (AVX-512 VNNI, AVX-VNNI).

    Parameters
    ----------
    cfg : config entity
        The config the compute was given.
    outs : Tensor or list of Tensor
        The group's one output.

    Returns
    -------
    Schedule
    """
    what = "schedule_qnn_conv2d"
    out = group_output(outs, what)
    s = te.create_schedule(out.op)
    anchor = find_anchor(out, TILES_TAG, what)
    # A computed weight's quads and sums are computed before the loop nest.
    packs = [op for op in ops_of([out]) if getattr(op, "tag", "") == QUADS_KERNEL_TAG]
    local = inline_epilogue(s, out, anchor, what, head=find_anchor(out, "qnn_conv2d", what),
                            beside=packs)
    if "oc_vectors" in cfg:
        for op in packs:
            schedule_injective_stage(s, op.output(0))
        return _schedule_quads(cfg, s, out, local, what)
    lanes = vector_lanes(_ACC)
    pad = find_anchor(out, PAD_TAG, what).output(0)
    schedule_injective_stage(s, pad)
    by_channels = cfg["vector"].val == "channels"
    n, k, y, x = s[out].op.axis
    _, lk, _, lx = s[local].op.axis
    rc, ry, rx = s[local].op.reduce_axis
    rco, rci = s[local].split(rc, factor=cfg["tile_ic"].val)
    if by_channels:
        ko, ki = s[out].split(k, factor=lanes)
        xo, xi = s[out].split(x, factor=cfg["rows"].val)
        s[out].reorder(n, ko, y, xo, xi, ki)
        s[local].reorder(rco, ry, rx, rci, lx, lk)
        inner, rows_axis = lk, lx
        packs = [op for op in ops_of([out]) if getattr(op, "tag", "") == KERNEL_PACK_TAG]
        for op in packs:
            # A computed weight, packed on every call (a constant one is packed at build).
            schedule_injective_stage(s, op.output(0))
    else:
        ko, ki = s[out].split(k, factor=cfg["tile_oc"].val)
        xo, xi = s[out].split(x, factor=lanes * cfg["tile_ow"].val)
        s[out].reorder(n, ko, y, xo, ki, xi)
        s[local].reorder(rco, ry, rx, rci, lk, lx)
        inner, rows_axis = lx, lk
    parallel(s[out], s[out].fuse(n, ko, y))
    s[out].vectorize(ki if by_channels else xi)
    s[local].compute_at(s[out], xo)
    s[local].vectorize(inner)
    s[local].unroll(rows_axis)
    s[local].unroll(rci)
    return s


# ---- conv2d on quads of input channels -------------------------------------------------------



def define_qnn_conv2d_quads_knobs(cfg, K, OW, lanes=None):
    """``oc_vectors`` vectors of output channels (of ``lanes`` int32 lanes, default a
    whole vector) by ``rows`` pixels of a row per register tile (one accumulator each);
    the fallback is :func:`_quads_fallback_tile`'s, its rows from
    :func:`_quads_fallback_rows`."""
    vectors = K // (lanes or vector_lanes(_ACC))
    cfg.define_knob("oc_vectors", [v for v in (1, 2, 3, 4) if vectors % v == 0])
    cfg.define_knob("rows", [1, 2, 3, 4, 5, 6, 7, 8])
    if cfg.is_fallback:
        tile_vectors, tile_rows = _quads_fallback_tile(vectors)
        cfg.fallback_knob("oc_vectors", tile_vectors)
        # A symbolic row (a model built for every image size) as tiles assume it.
        width = OW if isinstance(OW, int) else nominal_size(OW)
        cfg.fallback_knob("rows", _quads_fallback_rows(width, tile_rows))


def pack_qnn_conv2d_quads(kernel: np.ndarray, lanes: int) -> np.ndarray:
    """A symmetric int8 OIHW kernel ``[K, C, R, S]`` (K a multiple of ``lanes``) as the
    int32 ``[K/lanes, C4 + 1, R, S, lanes]`` the quads layout reads (C4 = ceil(C/4)):
    ``[o, c4, y, x, l]`` holds the weights of input channels ``4*c4 .. 4*c4 + 3`` (0
    past C) of output channel ``o*lanes + l`` as the bytes of one word; ``[o, C4, 0, 0,
    l]`` holds the sum of all that channel's weights (the input zero point's share of
    the product), the rest of that slab 0."""
    K, C, R, S = kernel.shape
    C4 = -(-C // 4)
    quads = np.zeros((K, 4 * C4, R, S), np.int8)
    quads[:, :C] = kernel
    words = (quads.reshape(K, C4, 4, R, S).transpose(0, 1, 3, 4, 2).copy()
             .view(np.int32).reshape(K, C4, R, S))
    packed = np.zeros((K // lanes, C4 + 1, R, S, lanes), np.int32)
    packed[:, :C4] = words.reshape(K // lanes, lanes, C4, R, S).transpose(0, 2, 3, 4, 1)
    sums = kernel.astype(np.int64).reshape(K, -1).sum(axis=1).astype(np.int32)
    packed[:, C4, 0, 0] = sums.reshape(K // lanes, lanes)
    return packed


def weight_pairs_fit_int16(kernel: np.ndarray) -> bool:
    """Whether every two adjacent input channels' weights (channels 2j and 2j+1, one
    output channel and window position) of an int8 OIHW ``kernel`` keep their products
    with any two uint8 values within int16: the promise ``dot4_u8s8`` can be given
    (``vpmaddubsw`` then adds them without saturating)."""
    K, C, R, S = kernel.shape
    w = np.zeros((K, C + C % 2, R, S), np.int64)
    w[:, :C] = kernel
    pairs = w.reshape(K, -1, 2, R, S)
    high = 255 * np.clip(pairs, 0, None).sum(axis=2)
    low = 255 * np.clip(pairs, None, 0).sum(axis=2)
    return bool(high.max(initial=0) <= 32767 and low.min(initial=0) >= -32768)


def _byte_word(values) -> te.PrimExpr:
    """The int32 word whose bytes are ``values`` (four uint32 expressions below 256)."""
    word = values[0]
    for i, v in enumerate(values[1:], 1):
        word = word + v * (1 << (8 * i))
    return intrin.reinterpret(word, "int32")


def _quads_kernel(kernel, lanes: int):
    """The quads packing of a computed OIHW int8 ``kernel``, as two stages: the words and
    the sums (what :func:`pack_qnn_conv2d_quads` stores in one array)."""
    K, C, R, S = (const_int(d) for d in kernel.shape)
    C4 = -(-C // 4)

    def byte(o, c, y, x):
        inside = c < C
        value = kernel[o, te.min(c, C - 1), y, x].astype("int32").astype("uint32") % 256
        return te.if_then_else(inside, value, te.const(0, "uint32"))

    words = te.compute(
        (K // lanes, C4, R, S, lanes),
        lambda o, c4, y, x, lane: _byte_word([byte(o * lanes + lane, 4 * c4 + i, y, x)
                                              for i in range(4)]),
        name="kernel_quads", tag=QUADS_KERNEL_TAG)
    rc = te.reduce_axis((0, C), name="rc")
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    sums = te.compute((K,), lambda o: te.sum(kernel[o, rc, ry, rx].astype(_ACC),
                                             axis=[rc, ry, rx]),
                      name="kernel_sums", tag=QUADS_KERNEL_TAG)
    return words, (lambda k: sums[k]), C4, K, R, S


def unsigned_zero(what: str, data, x_zero):
    """``(shift, zero)`` of 8-bit ``data`` read as uint8 bytes: int8 data is read with its
    top bit flipped (its value plus ``shift`` = 128, else 0), and so is its zero point
    ``x_zero``, given as the bytes hold it (int32)."""
    shift = 128 if data.dtype == "int8" else 0
    return shift, _zero_reader(what, x_zero, None, "tensor")(0) + shift


def planar_quads(data, x_zero, C4: int, H, W, Hp, Wp, top: int, left: int, what: str):
    """``(quads, zero)``: NCHW ``data`` as ``int32[N, C4, Hp, Wp]`` words of four input
    channels (uint8 bytes, 0 past the last channel) of each padded position, padded
    with the zero point (tag :data:`QUADS_DATA_TAG`), and that zero point as the words
    hold it (int32), which the product's correction subtracts."""
    N, C = data.shape[0], const_int(data.shape[1])
    shift, zero = unsigned_zero(what, data, x_zero)
    zero_byte = zero.astype("uint32")

    def byte(n, c, y, x):
        conds = _inside_padding(y, x, H, W, Hp, Wp, top, left)
        if 4 * C4 != C:
            conds.append(c < C)
        value = (data[n, te.min(c, C - 1) if 4 * C4 != C else c, y - top, x - left]
                 .astype(_ACC) + shift).astype("uint32")
        return te.if_then_else(te.all(*conds), value, zero_byte) if conds else value

    quads = te.compute(
        (N, C4, Hp, Wp),
        lambda n, c4, y, x: _byte_word([byte(n, 4 * c4 + i, y, x) for i in range(4)]),
        name="data_quads", tag=QUADS_DATA_TAG)
    return quads, zero


def _compute_quads(cfg, data, kernel, x_zero, strides, padding, dilation, pairs_fit):
    what = "qnn_conv2d"
    lanes = vector_lanes(_ACC)
    if len(data.shape) != 4 or len(kernel.shape) not in (4, 5):
        raise ShapeError(f"{what}: data and kernel must be 4-D (NCHW, OIHW), got ranks "
                         f"{len(data.shape)} and {len(kernel.shape)}")
    C = const_int(data.shape[1])
    if kernel.dtype == _ACC:
        Ko, C41, R, S, kl = (const_int(d) for d in kernel.shape)
        if kl != lanes or C41 - 1 != -(-C // 4):
            raise ShapeError(f"{what}: the quads kernel is {list(kernel.shape)}; for {C} "
                             f"input channels this target reads [K/{lanes}, {-(-C // 4) + 1}"
                             f", R, S, {lanes}]")
        words, C4, K = kernel, C41 - 1, Ko * lanes

        def weight_sum(k):
            return kernel[k // lanes, C4, 0, 0, k % lanes]
    else:
        words, weight_sum, C4, K, R, S = _quads_kernel(kernel, lanes)
    (N, C, H, W, K, KC, R, S, sh, sw, dh, dw, pads, OH, OW) = _geometry(
        data.shape, [K, C if kernel.dtype == _ACC else const_int(kernel.shape[1]), R, S],
        strides, padding, dilation, what)
    if KC != C:
        raise ShapeError(f"{what}: the kernel reads {KC} input channels, the data has {C} "
                         "(grouped convolutions are not supported)")
    define_qnn_conv2d_quads_knobs(cfg, K, OW)
    rows = cfg["rows"].val
    OWp = _ceil_div(OW, rows) * rows
    Hp, Wp = (OH - 1) * sh + (R - 1) * dh + 1, (OWp - 1) * sw + (S - 1) * dw + 1
    quads, zero = planar_quads(data, x_zero, C4, H, W, Hp, Wp, pads[0], pads[1], what)
    rc = te.reduce_axis((0, C4), name="rc")
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    # Accumulated with the lanes innermost ([N, K/lanes, OH, OWp, lanes]), so that the
    # register tile's accumulators are whole vectors.
    tiles = te.compute(
        (N, K // lanes, OH, OWp, lanes),
        lambda n, ko, y, x, kl: te.sum(te.dot4_u8s8(
            quads[n, rc, y * sh + ry * dh, x * sw + rx * dw], words[ko, rc, ry, rx, kl],
            pairs_fit), axis=[rc, ry, rx]),
        name="qnn_conv2d_tiles", tag=TILES_TAG)
    # Padding holds the zero point, so the zero point's share is the same for every
    # pixel: the zero point times the channel's weight sum.
    return te.compute(
        (N, K, OH, OW),
        lambda n, k, y, x: tiles[n, k // lanes, y, x, k % lanes]
        - zero * weight_sum(k),
        name="qnn_conv2d", tag="qnn_conv2d")


def _schedule_quads(cfg, s, out, local, what):
    """The quads layouts' loops, for a planar ``[N, K, OH, OW]`` or blocked ``[N, K/lanes,
    OH, OW, lanes]`` output: (batch, output-channel tile, output row) in parallel; a
    register tile of ``rows`` pixels by ``oc_vectors`` vectors of channels, accumulated
    over the reduction axes in their order (input channels, then the window)."""
    lanes = vector_lanes(_ACC)
    for op in ops_of([out]):
        if getattr(op, "tag", "") == QUADS_DATA_TAG:
            schedule_injective_stage(s, op.output(0))
    if len(s[out].op.axis) == 5:
        n, k, y, x, kl = s[out].op.axis
        ko, kv = s[out].split(k, factor=cfg["oc_vectors"].val)
    else:
        n, k, y, x = s[out].op.axis
        ko, ki = s[out].split(k, factor=lanes * cfg["oc_vectors"].val)
        kv, kl = s[out].split(ki, factor=lanes)
    xo, xi = s[out].split(x, factor=cfg["rows"].val)
    s[out].reorder(n, ko, y, xo, xi, kv, kl)
    parallel(s[out], s[out].fuse(n, ko, y))
    s[out].vectorize(kl)
    s[local].compute_at(s[out], xo)
    _, lkv, _, lx, lkl = s[local].op.axis
    s[local].reorder(*s[local].op.reduce_axis, lx, lkv, lkl)
    s[local].vectorize(lkl)
    s[local].unroll(lkv)
    s[local].unroll(lx)
    return s


# ---- templates and strategies ------------------------------------------------------------


# A template's B (weight) is int8: whether it is int8 or uint8 changes one widening
# instruction, not which config is fast, so a workload is keyed by A's dtype alone.


@template("qnn_matmul")
def qnn_matmul(N, K, M, dtype="uint8", weight_zero=False, pairs_fit_int16=False):
    """Tunable ``int32[N, M] = (A[N, K] - a_zero) @ (B[K, M] - b_zero)`` of int8 weights:
    symmetric ones (no ``b_zero``) of whole vectors of columns in the quads layout (B is
    then the packed int32 weight of :func:`pack_qnn_matmul_quads`), others as they
    are, with ``weight_zero`` a zero point per column."""
    cfg = get_config()
    lanes = vector_lanes(_ACC)
    A = te.placeholder((N, K), dtype, name="A")
    za = te.placeholder((), dtype, name="a_zero")
    if weight_zero or M % lanes:
        B = te.placeholder((K, M), "int8", name="B")
        zb = te.placeholder((M,), "int8", name="b_zero") if weight_zero else None
        C = compute_qnn_matmul(cfg, A, B, za, zb)
        return schedule_qnn_matmul(cfg, [C]), [A, B, za] + ([zb] if weight_zero else []) + [C]
    B = te.placeholder((M // lanes, -(-K // 4) + 1, lanes), _ACC, name="B")
    C = compute_qnn_matmul(cfg, A, B, za, None, pairs_fit_int16)
    return schedule_qnn_matmul(cfg, [C]), [A, B, za, C]


@template("qnn_conv2d")
def qnn_conv2d(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0, 0, 0),
               dilation=(1, 1), dtype="uint8", pairs_fit_int16=False, weight_zero=False):
    """Tunable ``qnn_conv2d`` of int8 weights: symmetric ones in the quads layout (the
    kernel input is the packed int32 weight of :func:`pack_qnn_conv2d_quads`), or with
    ``weight_zero`` (a zero point per output channel), or output channels that are not
    whole vectors, in the pixels / channels layouts."""
    cfg = get_config()
    K, C, R, S = kernel_shape
    lanes = vector_lanes(_ACC)
    data = te.placeholder(tuple(data_shape), dtype, name="data")
    zx = te.placeholder((), dtype, name="x_zero")
    if weight_zero or K % lanes:
        kernel = te.placeholder(tuple(kernel_shape), "int8", name="kernel")
        zw = te.placeholder((K,), "int8", name="w_zero") if weight_zero else None
        out = compute_qnn_conv2d(cfg, data, kernel, zx, zw, strides, padding, dilation)
        args = [data, kernel, zx] + ([zw] if weight_zero else []) + [out]
        return schedule_qnn_conv2d(cfg, [out]), args
    kernel = te.placeholder((K // lanes, -(-C // 4) + 1, R, S, lanes), _ACC, name="kernel")
    out = compute_qnn_conv2d(cfg, data, kernel, zx, None, strides, padding, dilation,
                             pairs_fit_int16)
    return schedule_qnn_conv2d(cfg, [out]), [data, kernel, zx, out]


def _batch_one(shape):
    """A workload's shape with a symbolic batch (first dimension) taken as 1."""
    first = shape[0] if isinstance(shape[0], int) else 1
    return (first, *(int(d) for d in shape[1:]))


def _qnn_matmul_workload(a_shape, b_shape, *zero_shapes, dtype="uint8", pairs_fit_int16=False):
    n, k = _batch_one(a_shape)
    return (n, k, int(b_shape[1]), dtype, len(zero_shapes) > 1, bool(pairs_fit_int16))


def _prepack_qnn_matmul(cfg, b, **attrs):
    """B as the quads layout reads it, or as it is."""
    if "col_vectors" in cfg:
        return (pack_qnn_matmul_quads(b, vector_lanes(_ACC)),)
    return (b,)


def _qnn_conv2d_workload(data_shape, kernel_shape, *zero_shapes, strides=(1, 1),
                         padding=(0, 0, 0, 0), dilation=(1, 1), dtype="uint8",
                         pairs_fit_int16=False):
    # A weight zero point (the fourth input) takes the other layouts: another space.
    return (_batch_one(data_shape), tuple(int(d) for d in kernel_shape), tuple(strides),
            tuple(padding), tuple(dilation), dtype, bool(pairs_fit_int16),
            len(zero_shapes) > 1)


register_implementation(Implementation(
    "qnn_matmul", "llvm", compute_qnn_matmul, schedule_qnn_matmul,
    template="qnn_matmul", workload=_qnn_matmul_workload, prepack=_prepack_qnn_matmul,
    packed_inputs=(1,)))
register_implementation(Implementation(
    "qnn_conv2d", "llvm", compute_qnn_conv2d, schedule_qnn_conv2d,
    template="qnn_conv2d", workload=_qnn_conv2d_workload, prepack=_prepack_qnn_conv2d,
    packed_inputs=(1,), batch_free_config=True))
