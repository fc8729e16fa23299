"""2-D convolutions in NCHW for NVIDIA GPUs: ``conv2d`` and ``depthwise_conv2d``, each a
compute, a schedule of the compute with any elementwise epilogue, and a tunable template
(``conv2d.cuda``, ``depthwise_conv2d.cuda``).

``conv2d`` is TVM's direct CUDA schedule: a block computes a tile of output channels x
rows x columns (``tile_f``, ``tile_y``, ``tile_x``: blocks, virtual threads, threads, per
thread), each thread accumulating in registers; the reduction runs in steps of
``tile_rc`` input channels, and per step the block copies the padded input window and the
weights of those channels (every kernel row and column) into shared memory, spread over
all its threads (``vec``-wide loads of the weights). The zero padding is a condition in
that copy; the padded input is never written to global memory. The copy sits outside
the kernel-window loops on purpose: there the padding condition does not depend on them,
so loop partitioning leaves them whole.

``depthwise_conv2d`` reads little reuse per output, so its block stages one padded input
window per channel block in shared memory, loaded once; each thread computes a few
output columns in registers.
"""

from __future__ import annotations

from ... import te
from ...autotune import get_config, template
from ...errors import ShapeError
from ..conv2d import _geometry  # one reading of shapes, strides and padding for every target
from ..group import find_anchor, group_output, inline_epilogue
from ..strategy import Implementation, register_implementation
from ...ir import expr as E
from ...ir.stmt import FRAGMENT
from . import tensor_core
from .common import bind_block, compute_as_filled, cooperative_load, define_tile, shape_ints

PAD_TAG = "conv2d_pad"


def _pad(data, pads):
    """The zero-padded input (tag ``"conv2d_pad"``; the schedules inline it into their
    shared-memory copy, so it is a condition on each loaded element)."""
    N = data.shape[0]  # may be symbolic: a batch of any size
    C, H, W = shape_ints(data.shape[1:])
    top, left, bottom, right = pads
    if not any(pads):
        return data
    return te.compute(
        (N, C, H + top + bottom, W + left + right),
        lambda n, c, y, x: te.if_then_else(
            (y >= top) & (y < H + top) & (x >= left) & (x < W + left),
            data[n, c, y - top, x - left], te.const(0, data.dtype)),
        name="pad", tag=PAD_TAG)


def _batched_shape(shape) -> tuple:
    """A data shape ``(N, C, H, W)`` with ints for its constant sizes; the batch ``N``
    may be symbolic (the knobs tile channels and the image, not the batch).

    Raises
    ------
    ShapeError
        The channels, height or width are symbolic.
    """
    if any(_is_symbolic(d) for d in shape[1:]):
        raise ShapeError(f"a cuda convolution needs constant channels, height and width "
                         f"(its tiles are sized from them), got data {tuple(shape)}; only "
                         f"the batch may be symbolic: fix the image size when importing "
                         f"(from_onnx(..., shape={{name: (batch, C, H, W)}}))")
    return (shape[0] if _is_symbolic(shape[0]) else shape_ints(shape[:1])[0],
            *shape_ints(shape[1:]))


def _is_symbolic(dim) -> bool:
    return not isinstance(getattr(dim, "value", dim), int)


def define_conv2d_knobs(cfg, K, C, OH, OW):
    """Register the knobs of a direct convolution (a second call changes nothing): output
    channel / row / column tiles (blocks, virtual threads, threads, per thread), the
    reduction step ``tile_rc`` (input channels per shared tile), ``vec`` (lanes of the
    shared loads of the weights) and ``unroll_rx`` (the kernel-column loop). The fallback:
    8 x 4 x 8 threads of 2 x 1 x 2 outputs per block, shrunk to the shape, input channels
    in steps of 8."""
    define_tile(cfg, "tile_f", K)
    define_tile(cfg, "tile_y", OH)
    define_tile(cfg, "tile_x", OW)
    cfg.define_split("tile_rc", C, num_outputs=2, filter=lambda e: e.size[-1] <= 16)
    cfg.define_knob("vec", [1, 2, 4])
    cfg.define_knob("unroll_rx", [True, False])
    if cfg.is_fallback:
        cfg.fallback_split("tile_f", [-1, 2, 8, 2])
        cfg.fallback_split("tile_y", [-1, 1, 4, 1])
        cfg.fallback_split("tile_x", [-1, 1, 8, 2])
        cfg.fallback_split("tile_rc", [-1, 8])
        cfg.fallback_knob("vec", 1)
        cfg.fallback_knob("unroll_rx", True)


def compute_conv2d(cfg, data, kernel, strides=(1, 1), padding=(0, 0), dilation=(1, 1),
                   tf32=False):
    """NCHW conv2d, ``[N, C, H, W]`` by ``[K, C, R, S]`` (tag ``"conv2d"``). 16-bit data,
    and float32 data with ``tf32`` (multiplied as TF32), is an implicit GEMM on tensor
    cores.

    ``padding`` is (top, left) for symmetric padding or (top, left, bottom, right).
    Pass the result, or an elementwise epilogue computed from it, to
    :func:`schedule_conv2d`.
    """
    data_shape, kernel_shape = _batched_shape(data.shape), shape_ints(kernel.shape)
    (N, C, H, W, K, KC, R, S, sh, sw, dh, dw, pads, OH, OW) = _geometry(
        data_shape, kernel_shape, strides, padding, dilation, "conv2d")
    if KC != C:
        raise ShapeError(f"conv2d: the kernel {kernel_shape} reads {KC} input channels; "
                         f"the data {data_shape} has {C} (groups are not supported)")
    if data.dtype in tensor_core.INPUT_DTYPES or (tf32 and data.dtype == tensor_core.TF32):
        return _implicit_gemm(cfg, data, kernel, _pad(data, pads), (C, K, R, S, OH, OW),
                              (sh, sw), (dh, dw))
    define_conv2d_knobs(cfg, K, C, OH, OW)
    return direct_conv2d(_pad(data, pads), kernel, (OH, OW), (sh, sw), (dh, dw))


def direct_conv2d(padded, kernel, out_size, strides, dilation):
    """``sum padded[n, c, y * sh + r * dh, x * sw + s * dw] * kernel[f, c, r, s]`` over
    the input channels and the window, ``[N, K, OH, OW]`` (tag ``"conv2d"``, what
    :func:`schedule_conv2d` schedules): ``padded`` the input with its border (a compute,
    computed as the shared tiles are filled), or the input itself."""
    N, C = padded.shape[:2]
    K, _, R, S = shape_ints(kernel.shape)
    (sh, sw), (dh, dw) = strides, dilation
    rc = te.reduce_axis((0, C), name="rc")
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    return te.compute(
        (N, K, *out_size),
        lambda n, f, y, x: te.sum(
            padded[n, rc, y * sh + ry * dh, x * sw + rx * dw] * kernel[f, rc, ry, rx],
            axis=[rc, ry, rx]),
        name="conv", tag="conv2d")


def _round16(n: int) -> int:
    return -(-n // FRAGMENT) * FRAGMENT


def _implicit_gemm(cfg, data, kernel, padded, sizes, strides, dilation):
    """A 16-bit convolution as a product on tensor cores (an implicit GEMM): for each
    image, ``weights [K, C*R*S] x columns [C*R*S, OH*OW]``, the columns gathered from the
    padded input as the shared tiles are filled (never written out). The product's rows
    are output channels and its columns pixels, so it is the NCHW output itself; each
    size is padded to a multiple of 16 with zeros the output never reads. Products and
    sums in float32, the result rounded to the data's type."""
    C, K, R, S, OH, OW = sizes
    (sh, sw), (dh, dw) = strides, dilation
    N = data.shape[0]
    depth, pixels, channels = (_round16(n) for n in (C * R * S, OH * OW, K))
    images = N if isinstance(N, int) else E.const_value(N)
    tensor_core.define_knobs(cfg, channels, depth, pixels, images or 1, data.dtype)
    zero = te.const(0, data.dtype)

    def weights(f, k):
        inside = (f < K) & (k < C * R * S)
        return te.if_then_else(inside, kernel[f, k // (R * S), k // S % R, k % S], zero)

    def columns(n, p, k):
        y = p // OW * sh + k // S % R * dh
        x = p % OW * sw + k % S * dw
        inside = (p < OH * OW) & (k < C * R * S)
        return te.if_then_else(inside, padded[n, k // (R * S), y, x], zero)

    wmat = te.compute((channels, depth), weights, name="weight_matrix")
    cols = te.compute((N, pixels, depth), columns, name="columns")
    k = te.reduce_axis((0, depth), name="k")
    gemm = te.compute(
        (N, channels, pixels),
        lambda n, f, p: te.sum(wmat[f, k].astype("float32") * cols[n, p, k].astype("float32"),
                               axis=k),
        name="conv_gemm", tag="conv2d", attrs={"transposed_b": True})
    return te.compute((N, K, OH, OW), lambda n, f, y, x: gemm[n, f, y * OW + x].astype(
        data.dtype), name="conv")


def schedule_conv2d(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_conv2d` and any elementwise
    epilogue (bias, activation, residual), computed from the register accumulators."""
    what = "schedule_conv2d (cuda)"
    out = group_output(outs, what)
    s = te.create_schedule(out.op)
    anchor = find_anchor(out, "conv2d", what)
    if anchor.attrs.get("transposed_b"):  # an implicit GEMM on tensor cores
        tensor_core.schedule_product(cfg, s, out, anchor, list(anchor.input_tensors), True)
        return s
    OL = inline_epilogue(s, out, anchor, what)
    data, kernel = anchor.input_tensors
    # The zero padding, and int8 operands widened with their zero points off.
    compute_as_filled(s, [data, kernel])
    AA = s.cache_read(data, "shared", [OL])
    WW = s.cache_read(kernel, "shared", [OL])

    n, f, y, x = s[out].op.axis
    bf, vf, tf, fi = cfg["tile_f"].apply(s, out, f)
    by, vy, ty, yi = cfg["tile_y"].apply(s, out, y)
    bx, vx, tx, xi = cfg["tile_x"].apply(s, out, x)
    s[out].reorder(n, bf, by, bx, vf, vy, vx, tf, ty, tx, fi, yi, xi)
    bind_block(s[out], [s[out].fuse(n, bf)], by, bx)
    for v in (vf, vy, vx):
        s[out].bind(v, te.thread_axis("vthread"))
    s[out].bind(tf, te.thread_axis("threadIdx.z"))
    s[out].bind(ty, te.thread_axis("threadIdx.y"))
    s[out].bind(tx, te.thread_axis("threadIdx.x"))

    s[OL].compute_at(s[out], tx)
    on, of, oy, ox = s[OL].op.axis
    rc, ry, rx = s[OL].op.reduce_axis
    rco, rci = cfg["tile_rc"].apply(s, OL, rc)
    s[OL].reorder(rco, rci, ry, rx, on, of, oy, ox)
    if cfg["unroll_rx"].val:
        s[OL].unroll(rx)
    threads = tuple(cfg[k].size[2] for k in ("tile_f", "tile_y", "tile_x"))
    for T, vec in ((AA, 1), (WW, cfg["vec"].val)):
        s[T].compute_at(s[OL], rco)
        cooperative_load(s, T, threads, vec)
    return s


# ---- depthwise --------------------------------------------------------------------------


def define_depthwise_knobs(cfg, K, OH, OW):
    """Register the knobs of a depthwise convolution: output channels as (blocks,
    threads), rows and columns as (blocks, threads, per thread), and ``unroll_kw``."""
    cfg.define_split("tile_c", K, num_outputs=2, filter=lambda e: e.size[-1] <= 16)
    define_tile(cfg, "tile_y", OH, vthreads=False)
    define_tile(cfg, "tile_x", OW, vthreads=False)
    cfg.define_knob("unroll_kw", [True, False])
    if cfg.is_fallback:
        cfg.fallback_split("tile_c", [-1, 1])
        cfg.fallback_split("tile_y", [-1, 8, 1])
        cfg.fallback_split("tile_x", [-1, 16, 2])
        cfg.fallback_knob("unroll_kw", True)


def compute_depthwise_conv2d(cfg, data, kernel, strides=(1, 1), padding=(0, 0),
                             dilation=(1, 1)):
    """NCHW depthwise conv2d: ``[N, C, H, W]`` by ``[C * multiplier, 1, R, S]`` (tag
    ``"depthwise_conv2d"``); ``padding`` as for :func:`compute_conv2d`."""
    data_shape, kernel_shape = _batched_shape(data.shape), shape_ints(kernel.shape)
    (N, C, H, W, K, KC, R, S, sh, sw, dh, dw, pads, OH, OW) = _geometry(
        data_shape, kernel_shape, strides, padding, dilation, "depthwise_conv2d")
    if KC != 1 or K % C:
        raise ShapeError(f"depthwise_conv2d: the kernel must be (C * multiplier, 1, R, S) "
                         f"for data {data_shape}, got {kernel_shape}")
    define_depthwise_knobs(cfg, K, OH, OW)
    mult = K // C
    padded = _pad(data, pads)
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    return te.compute(
        (N, K, OH, OW),
        lambda n, k, y, x: te.sum(
            padded[n, k // mult, y * sh + ry * dh, x * sw + rx * dw] * kernel[k, 0, ry, rx],
            axis=[ry, rx]),
        name="depthwise", tag="depthwise_conv2d")


def schedule_depthwise_conv2d(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_depthwise_conv2d` and any
    elementwise epilogue; the block's padded input window is staged in shared memory."""
    what = "schedule_depthwise_conv2d (cuda)"
    out = group_output(outs, what)
    s = te.create_schedule(out.op)
    anchor = find_anchor(out, "depthwise_conv2d", what)
    OL = inline_epilogue(s, out, anchor, what)
    data = anchor.input_tensors[0]
    if getattr(data.op, "tag", "") == PAD_TAG:
        s[data].compute_inline()
    AA = s.cache_read(data, "shared", [OL])

    n, c, y, x = s[out].op.axis
    bc, tc = cfg["tile_c"].apply(s, out, c)
    by, ty, yi = cfg["tile_y"].apply(s, out, y)
    bx, tx, xi = cfg["tile_x"].apply(s, out, x)
    s[out].reorder(n, bc, by, bx, tc, ty, tx, yi, xi)
    bind_block(s[out], [s[out].fuse(n, bc)], by, bx)
    s[out].bind(tc, te.thread_axis("threadIdx.z"))
    s[out].bind(ty, te.thread_axis("threadIdx.y"))
    s[out].bind(tx, te.thread_axis("threadIdx.x"))
    s[AA].compute_at(s[out], bx)
    cooperative_load(s, AA, tuple(cfg[k].size[1] for k in ("tile_c", "tile_y", "tile_x")), 1)
    s[OL].compute_at(s[out], tx)
    ry, rx = s[OL].op.reduce_axis
    s[OL].reorder(ry, rx, *s[OL].op.axis)
    if cfg["unroll_kw"].val:
        s[OL].unroll(rx)
    return s


# ---- templates and strategies -----------------------------------------------------------


@template("conv2d.cuda")
def conv2d(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0), dilation=(1, 1),
           dtype="float32", tf32=False):
    """Tunable NCHW conv2d on a GPU (float32 as TF32 on tensor cores with ``tf32``)."""
    cfg = get_config()
    data = te.placeholder(tuple(data_shape), dtype, name="data")
    kernel = te.placeholder(tuple(kernel_shape), dtype, name="kernel")
    out = compute_conv2d(cfg, data, kernel, strides, padding, dilation, tf32)
    return schedule_conv2d(cfg, [out]), [data, kernel, out]


@template("depthwise_conv2d.cuda")
def depthwise_conv2d(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0),
                     dilation=(1, 1), dtype="float32"):
    """Tunable NCHW depthwise conv2d (channel multiplier = K / C) on a GPU."""
    cfg = get_config()
    data = te.placeholder(tuple(data_shape), dtype, name="data")
    kernel = te.placeholder(tuple(kernel_shape), dtype, name="kernel")
    out = compute_depthwise_conv2d(cfg, data, kernel, strides, padding, dilation)
    return schedule_depthwise_conv2d(cfg, [out]), [data, kernel, out]


def _conv_workload(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0),
                   dilation=(1, 1), dtype="float32", tf32=False):
    return (shape_ints(data_shape), shape_ints(kernel_shape), shape_ints(strides),
            shape_ints(padding), shape_ints(dilation), str(dtype), *((True,) if tf32 else ()))


register_implementation(Implementation(
    "conv2d", "cuda", compute_conv2d, schedule_conv2d,
    template="conv2d.cuda", workload=_conv_workload, batch_free_config=True))
register_implementation(Implementation(
    "depthwise_conv2d", "cuda", compute_depthwise_conv2d, schedule_depthwise_conv2d,
    template="depthwise_conv2d.cuda", workload=_conv_workload, batch_free_config=True))
