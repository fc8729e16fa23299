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
from ..autotune import get_config, template
from ..errors import DTypeError, ShapeError
from ..te.analysis import ops_of
from .conv2d import _geometry, _inside_padding
from .cpu_schedule import const_int, parallel, schedule_injective_stage, vector_lanes
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


def compute_qnn_matmul(cfg, A, B, a_zero, b_zero=None):
    """``int32[N, M] = sum_k (A[n, k] - a_zero) * (B[k, m] - b_zero[m])`` (tag
    ``"qnn_matmul"``).

    Parameters
    ----------
    cfg : config entity
        The schedule config (:func:`define_qnn_matmul_knobs`).
    A, B : Tensor
        ``[N, K]`` and ``[K, M]``, uint8 or int8; N may be symbolic.
    a_zero, b_zero : Tensor
        The zero points, of A's and B's dtypes: ``a_zero`` a scalar (or one element),
        ``b_zero`` a scalar or ``[M]``, or None (0, as symmetric int8 weights have).

    Raises
    ------
    DTypeError, ShapeError
        An operand is not 8-bit, a zero point's dtype or shape does not fit.
    """
    what = "qnn_matmul"
    _check_operand(what, A, a_zero)
    _check_operand(what, B, b_zero)
    if len(A.shape) != 2 or len(B.shape) != 2:
        raise ShapeError(f"{what}: A and B must be matrices, got ranks {len(A.shape)} and "
                         f"{len(B.shape)}")
    N = const_int(A.shape[0])
    N = A.shape[0] if N is None else N
    K, K2, M = const_int(A.shape[1]), const_int(B.shape[0]), const_int(B.shape[1])
    if None in (K, K2, M) or K != K2:
        raise ShapeError(f"{what}: A is [{A.shape[0]}, {A.shape[1]}] and B [{B.shape[0]}, "
                         f"{B.shape[1]}]; K and M must be static and agree")
    za = _zero_reader(what, a_zero, None, "row")(0)
    zb = _zero_reader(what, b_zero, M, "column")
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
    """The kernel in the layout the config reads: packed by vectors of channels, or as
    it is."""
    if cfg["vector"].val == "channels":
        return (pack_qnn_conv2d_kernel(kernel, vector_lanes(_ACC)),)
    return (kernel,)


def compute_qnn_conv2d(cfg, data, kernel, x_zero, w_zero=None, strides=(1, 1),
                       padding=(0, 0, 0, 0), dilation=(1, 1)):
    """NCHW ``int32[N, K, OH, OW]``: ``sum (x - x_zero) * (w[k] - w_zero[k])`` over the
    window and the input channels (tag ``"qnn_conv2d"``).

    Parameters
    ----------
    cfg : config entity
        The schedule config (:func:`define_qnn_conv2d_knobs`).
    data : Tensor
        ``[N, C, H, W]``, uint8 or int8 (N may be symbolic).
    kernel : Tensor
        OIHW ``[K, C, R, S]``, uint8 or int8, or (for the ``"channels"`` vectorization)
        already packed by :func:`pack_qnn_conv2d_kernel`.
    x_zero, w_zero : Tensor
        Zero points of ``data``'s and ``kernel``'s dtypes: a scalar, and a scalar or
        ``[K]`` or None (0, as symmetric int8 weights have).
    strides, padding, dilation : tuple of int
        As :func:`tecomp.topi.conv2d`; padded positions hold the real 0.
    """
    what = "qnn_conv2d"
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
    local = inline_epilogue(s, out, anchor, what, head=find_anchor(out, "qnn_conv2d", what))
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


# ---- templates and strategies ------------------------------------------------------------


# A template's B (weight) is int8: whether it is int8 or uint8 changes one widening
# instruction, not which config is fast, so a workload is keyed by A's dtype alone.


@template("qnn_matmul")
def qnn_matmul(N, K, M, dtype="uint8"):
    """Tunable ``int32[N, M] = (A[N, K] - a_zero) @ B[K, M]`` (symmetric int8 weights,
    as onnxruntime's quantizer writes them)."""
    cfg = get_config()
    A = te.placeholder((N, K), dtype, name="A")
    B = te.placeholder((K, M), "int8", name="B")
    za = te.placeholder((), dtype, name="a_zero")
    C = compute_qnn_matmul(cfg, A, B, za)
    return schedule_qnn_matmul(cfg, [C]), [A, B, za, C]


@template("qnn_conv2d")
def qnn_conv2d(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0, 0, 0),
               dilation=(1, 1), dtype="uint8"):
    """Tunable ``qnn_conv2d`` of symmetric int8 weights."""
    cfg = get_config()
    data = te.placeholder(tuple(data_shape), dtype, name="data")
    kernel = te.placeholder(tuple(kernel_shape), "int8", name="kernel")
    zx = te.placeholder((), dtype, name="x_zero")
    out = compute_qnn_conv2d(cfg, data, kernel, zx, None, strides, padding, dilation)
    return schedule_qnn_conv2d(cfg, [out]), [data, kernel, zx, out]


def _batch_one(shape):
    """A workload's shape with a symbolic batch (first dimension) taken as 1."""
    first = shape[0] if isinstance(shape[0], int) else 1
    return (first, *(int(d) for d in shape[1:]))


def _qnn_matmul_workload(a_shape, b_shape, *zero_shapes, dtype="uint8"):
    n, k = _batch_one(a_shape)
    return (n, k, int(b_shape[1]), dtype)


def _qnn_conv2d_workload(data_shape, kernel_shape, *zero_shapes, strides=(1, 1),
                         padding=(0, 0, 0, 0), dilation=(1, 1), dtype="uint8"):
    return (_batch_one(data_shape), tuple(int(d) for d in kernel_shape), tuple(strides),
            tuple(padding), tuple(dilation), dtype)


register_implementation(Implementation(
    "qnn_matmul", "llvm", compute_qnn_matmul, schedule_qnn_matmul,
    template="qnn_matmul", workload=_qnn_matmul_workload))
register_implementation(Implementation(
    "qnn_conv2d", "llvm", compute_qnn_conv2d, schedule_qnn_conv2d,
    template="qnn_conv2d", workload=_qnn_conv2d_workload, prepack=_prepack_qnn_conv2d,
    packed_inputs=(1,), batch_free_config=True))
