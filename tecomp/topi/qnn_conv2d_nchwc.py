"""The integer convolution of quantized models on channel-blocked activations
(``qnn_conv2d_nchwc``): NCHW{b}c int32 out, from NCHW{b}c data (or planar data, for a
first layer whose few channels fill no block).

In the quads layout of :mod:`.qnn` a register tile broadcasts one 32-bit word, four input
channels of one point, against vectors of output channels, one ``vpdpbusd`` (AVX512-VNNI
/ AVX-VNNI) per vector. Planar (NCHW) data makes two passes that cost as much as a third
of the products on a ResNet: the words are gathered from four channel planes before the
products, and the output tile, a vector of channels per point, is scattered to the
channel planes, one byte each, and so is every read of the epilogue (a residual
connection's other input). With the data blocked by ``b`` (a multiple of 4) a point's
channels are contiguous: a word is four adjacent bytes of one point, read in place (one
32-bit load, broadcast) or from a zero-bordered copy where the convolution pads, and
the output tile is ``b`` contiguous channels of one point, stored (and requantized by
the fused epilogue) as whole vectors. A quantized model keeps its activations blocked
from one convolution to the next (:func:`tecomp.graph.passes.alter_conv_layout`).

Layouts (``b``: the output block, the int32 lanes of a vector, or half of them for a
layer whose output channels are not whole vectors):

- data ``[N, C/d, H, W, d]`` uint8 or int8 (``d`` a multiple of 4; int8 is read with its
  top bit flipped, as uint8 plus 128, which needs the copy), or planar ``[N, C, H, W]``;
- kernel: the int32 quads ``[K/b, C4 + 1, R, S, b]`` of
  :func:`.qnn.pack_qnn_conv2d_quads` (symmetric int8 weights, packed once per weight);
- output ``[N, K/b, OH, OW, b]`` int32: ``sum (x - x_zero) * w`` over the window
  and the input channels.

Workload: ``qnn_conv2d_nchwc(data_shape, kernel_shape, strides, padding, dilation, dtype,
pairs_fit_int16, block)`` with the data shape as the graph gives it (blocked or planar),
the logical OIHW kernel shape and the output block (None for a whole vector); the knobs
are the quads layout's (:func:`.qnn.define_qnn_conv2d_quads_knobs`).
"""

from __future__ import annotations

from .. import te
from ..autotune import get_config, template
from ..errors import ShapeError
from .conv2d import _ceil_div, _geometry, _inside_padding, _may_exceed
from .cpu_schedule import const_int, vector_lanes
from .group import crop, find_anchor, group_output, inline_epilogue
from .qnn import (
    _ACC,
    QUADS_DATA_TAG,
    TILES_TAG,
    _batch_one,
    _byte_word,
    _check_operand,
    _schedule_quads,
    define_qnn_conv2d_quads_knobs,
    pack_qnn_conv2d_quads,
    planar_quads,
    unsigned_zero,
)
from .strategy import Implementation, register_implementation

#: Tag of the operator's output (the epilogue's head).
TAG = "qnn_conv2d_nchwc"


def _blocked_words(data, x_zero, H, W, Hp, Wp, top: int, left: int, what: str):
    """``(word, zero)``: ``word(n, cb, j, y, x)``, input channels ``4j .. 4j + 3`` of
    block ``cb`` at padded position (y, x) of blocked ``data`` as one int32 word of uint8
    bytes, and the zero point as the words hold it (int32). Read in place where nothing
    is padded and the data is uint8, else from a copy bordered with the zero point (tag
    :data:`QUADS_DATA_TAG`)."""
    N, CB, _, _, b = data.shape
    # The zero point, as the bytes hold it, fills the border.
    shift, zero = unsigned_zero(what, data, x_zero)
    source = data
    if shift or top or left or _may_exceed(Hp, H) or _may_exceed(Wp, W):

        def padded(n, cb, y, x, i):
            inside = _inside_padding(y, x, H, W, Hp, Wp, top, left)
            value = (data[n, cb, y - top, x - left, i].astype(_ACC) + shift).astype("uint8")
            return (te.if_then_else(te.all(*inside), value, zero.astype("uint8")) if inside
                    else value)

        source = te.compute((N, CB, Hp, Wp, b), padded, name="data_pad", tag=QUADS_DATA_TAG)

    def word(n, cb, j, y, x):
        # Four adjacent bytes, which LLVM loads as one 32-bit word.
        return _byte_word([source[n, cb, y, x, 4 * j + i].astype("uint32") for i in range(4)])

    return word, zero


def compute_qnn_conv2d_nchwc(cfg, data, kernel, x_zero, strides=(1, 1), padding=(0, 0, 0, 0),
                             dilation=(1, 1), pairs_fit_int16=False, block=None):
    """``int32[N, K/b, OH, OW, b]``: ``sum (x - x_zero) * w[k]`` over the window and the
    input channels, ``b`` the output block (tag :data:`TAG`).

    Parameters
    ----------
    cfg : config entity
        The schedule config (:func:`.qnn.define_qnn_conv2d_quads_knobs`).
    data : Tensor
        ``[N, C/b, H, W, b]`` (b a multiple of 4) or planar ``[N, C, H, W]``, uint8 or
        int8; N, H and W may be symbolic (rows are then computed in whole tiles, from a
        copy bordered with the zero point, and cropped).
    kernel : Tensor
        The int32 quads of symmetric int8 OIHW weights,
        ``[K/b, ceil(C/4) + 1, R, S, b]`` (:func:`.qnn.pack_qnn_conv2d_quads`).
    x_zero : Tensor
        The data's zero point, a scalar (or one element) of its dtype; padded positions
        hold it (the real 0).
    strides, padding, dilation : tuple of int
        As :func:`tecomp.topi.conv2d`.
    pairs_fit_int16 : bool
        The promise of :func:`tecomp.te.dot4_u8s8` (:func:`.qnn.compute_qnn_conv2d`).
    block : int, optional
        The output block: the int32 lanes of a vector (the default) or half of them (at
        least 4), for a layer whose output channels are not whole vectors (MobileNetV2's
        24).

    Raises
    ------
    ShapeError
        Data of another rank, blocks that are not a multiple of 4,
        an output block other than a vector or half of one, or a kernel not packed for
        the data's channels and the output block.
    """
    what = "qnn_conv2d_nchwc"
    vector = vector_lanes(_ACC)
    lanes = block or vector
    if lanes not in (vector, vector // 2) or lanes < 4:
        raise ShapeError(f"{what}: block={block}; this target's output blocks are {vector} "
                         f"(the int32 lanes of a vector)"
                         + (f" or {vector // 2}" if vector >= 8 else ""))
    _check_operand(what, data, x_zero)
    if len(data.shape) not in (4, 5) or len(kernel.shape) != 5 or kernel.dtype != _ACC:
        raise ShapeError(f"{what}: needs data [N, C/b, H, W, b] or [N, C, H, W] and the int32 "
                         f"quads kernel [K/{lanes}, C4 + 1, R, S, {lanes}]; got "
                         f"{[str(d) for d in data.shape]} and {kernel.dtype} "
                         f"{[str(d) for d in kernel.shape]}")
    blocked = len(data.shape) == 5
    b = const_int(data.shape[4]) if blocked else 1
    C = const_int(data.shape[1]) * b
    Ko, C41, R, S, kl = (const_int(d) for d in kernel.shape)
    C4 = -(-C // 4)
    if kl != lanes or C41 != C4 + 1 or (blocked and b % 4):
        raise ShapeError(f"{what}: for {C} input channels" + (f" in blocks of {b}" if blocked
                         else "") + f" and output blocks of {lanes} this target reads the "
                         f"quads kernel [K/{lanes}, {C4 + 1}, R, S, {lanes}] (and input blocks "
                         f"of a multiple of 4), got {list(kernel.shape)}")
    K = Ko * lanes
    logical = (data.shape[0], C, *data.shape[2:4])
    (N, C, H, W, K, _, R, S, sh, sw, dh, dw, pads, OH, OW) = _geometry(
        logical, [K, C, R, S], strides, padding, dilation, what)
    define_qnn_conv2d_quads_knobs(cfg, K, OW, lanes)
    OWp = _ceil_div(OW, cfg["rows"].val) * cfg["rows"].val
    Hp, Wp = (OH - 1) * sh + (R - 1) * dh + 1, (OWp - 1) * sw + (S - 1) * dw + 1
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    if blocked:
        word, zero = _blocked_words(data, x_zero, H, W, Hp, Wp, pads[0], pads[1], what)
        rcb = te.reduce_axis((0, C // b), name="rcb")
        rcj = te.reduce_axis((0, b // 4), name="rcj")
        axes = [rcb, rcj, ry, rx]

        def product(n, ko, y, x, k):
            return te.dot4_u8s8(word(n, rcb, rcj, y * sh + ry * dh, x * sw + rx * dw),
                                kernel[ko, rcb * (b // 4) + rcj, ry, rx, k], pairs_fit_int16)
    else:
        quads, zero = planar_quads(data, x_zero, C4, H, W, Hp, Wp, pads[0], pads[1], what)
        rc = te.reduce_axis((0, C4), name="rc")
        axes = [rc, ry, rx]

        def product(n, ko, y, x, k):
            return te.dot4_u8s8(quads[n, rc, y * sh + ry * dh, x * sw + rx * dw],
                                kernel[ko, rc, ry, rx, k], pairs_fit_int16)

    tiles = te.compute((N, Ko, OH, OWp, lanes),
                       lambda n, ko, y, x, k: te.sum(product(n, ko, y, x, k), axis=axes),
                       name="qnn_conv2d_tiles", tag=TILES_TAG)
    whole = tiles if isinstance(OW, int) and OWp == OW else crop(tiles, (N, Ko, OH, OW, lanes))
    # Padding holds the zero point, so its share is the same for every pixel: the zero
    # point times the channel's weight sum (the quads kernel's last slab).
    return te.compute((N, Ko, OH, OW, lanes),
                      lambda n, ko, y, x, k: whole[n, ko, y, x, k] - zero * kernel[ko, C4, 0, 0, k],
                      name="qnn_conv2d_nchwc", tag=TAG)


def schedule_qnn_conv2d_nchwc(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_qnn_conv2d_nchwc` and its
    elementwise epilogue, as the quads layout's loops (:func:`.qnn.schedule_qnn_conv2d`):
    (batch, output-channel tile, output row) in parallel, a register tile of ``rows``
    points by ``oc_vectors`` vectors of channels, whose epilogue stores whole vectors.

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
    what = "schedule_qnn_conv2d_nchwc"
    out = group_output(outs, what)
    s = te.create_schedule(out.op)
    local = inline_epilogue(s, out, find_anchor(out, TILES_TAG, what), what,
                            head=find_anchor(out, TAG, what))
    return _schedule_quads(cfg, s, out, local, what)


@template("qnn_conv2d_nchwc")
def qnn_conv2d_nchwc(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0, 0, 0),
                     dilation=(1, 1), dtype="uint8", pairs_fit_int16=False, block=None):
    """Tunable ``qnn_conv2d_nchwc``: blocked (or planar) ``data_shape``, the logical OIHW
    ``kernel_shape`` (the kernel input is its int32 quads packing), the output ``block``
    (None: a vector's int32 lanes)."""
    cfg = get_config()
    K, C, R, S = kernel_shape
    lanes = block or vector_lanes(_ACC)
    data = te.placeholder(tuple(data_shape), dtype, name="data")
    kernel = te.placeholder((K // lanes, -(-C // 4) + 1, R, S, lanes), _ACC, name="kernel")
    zx = te.placeholder((), dtype, name="x_zero")
    out = compute_qnn_conv2d_nchwc(cfg, data, kernel, zx, strides, padding, dilation,
                                   pairs_fit_int16, block)
    return schedule_qnn_conv2d_nchwc(cfg, [out]), [data, kernel, zx, out]


def _block(block):
    """The output block a node's ``block`` attribute names: None where it is a whole
    vector's int32 lanes (one task, one template instance, for every such layer)."""
    return None if block in (None, vector_lanes(_ACC)) else int(block)


def _workload(data_shape, kernel_shape, *zero_shapes, strides=(1, 1), padding=(0, 0, 0, 0),
              dilation=(1, 1), dtype="uint8", pairs_fit_int16=False, block=None):
    return (_batch_one(data_shape), tuple(int(d) for d in kernel_shape), tuple(strides),
            tuple(padding), tuple(dilation), dtype, bool(pairs_fit_int16), _block(block))


def _prepack(cfg, kernel, block=None, **attrs):
    """The kernel as the quads of the output block."""
    return (pack_qnn_conv2d_quads(kernel, block or vector_lanes(_ACC)),)


register_implementation(Implementation(
    "qnn_conv2d_nchwc", "llvm", compute_qnn_conv2d_nchwc, schedule_qnn_conv2d_nchwc,
    template="qnn_conv2d_nchwc", workload=_workload, prepack=_prepack,
    packed_inputs=(1,), packing_reads_config=False, batch_free_config=True))
