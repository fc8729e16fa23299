"""8-bit integer products for NVIDIA GPUs: ``qnn_matmul`` and ``qnn_conv2d`` (what
``MatMulInteger``, ``ConvInteger``, ``QLinearMatMul``, ``QLinearConv`` and the QDQ
format's quantized products become), each a compute and a tunable template
(``qnn_matmul.cuda``, ``qnn_conv2d.cuda``).

Each operand is widened to int32 and its zero point taken off as the block's threads
copy it into shared memory, then multiplied and summed in int32 on the CUDA cores by the
float products' schedules: the tiled product of :mod:`tecomp.topi.cuda.product` and the
direct convolution of :mod:`tecomp.topi.cuda.conv2d`, with their knobs. The sums are
exact, as onnxruntime's. The GPU's int8 instructions (``dp4a``, int8 tensor cores) are not
used yet: the shared tiles hold int32, four times the bytes of the operands.
"""

from __future__ import annotations

from ... import te
from ...autotune import get_config, template
from ...errors import ShapeError
from ..conv2d import _geometry
from ..qnn import _batch_one, _check_operand, _zero_reader
from ..strategy import Implementation, register_implementation
from .conv2d import (
    _batched_shape,
    _pad,
    define_conv2d_knobs,
    direct_conv2d,
    schedule_conv2d,
)
from .product import _differ, _schedule_product, _size, define_product_knobs

#: What the products sum in.
_ACC = "int32"


def _shifted(t, zero, name: str):
    """``int32(t) - zero`` elementwise, ``zero(index)`` the zero point of an element (or
    None: 0)."""
    def value(*i):
        wide = t[i].astype(_ACC)
        return wide if zero is None else wide - zero(*i)

    return te.compute(t.shape, value, name=name)


def compute_qnn_matmul(cfg, A, B, a_zero, b_zero=None, pairs_fit_int16=False):
    """``int32[N, M] = sum_k (A[n, k] - a_zero) * (B[k, m] - b_zero[m])`` (tag
    ``"qnn_matmul"``): A and B uint8 or int8, ``a_zero`` a scalar (or one element),
    ``b_zero`` a scalar, ``[M]`` or None (0); N may be symbolic. ``pairs_fit_int16`` (a
    promise the CPU's kernels use) changes nothing here."""
    what = "qnn_matmul"
    _check_operand(what, A, a_zero)
    _check_operand(what, B, b_zero)
    if len(A.shape) != 2 or len(B.shape) != 2:
        raise ShapeError(f"{what}: A and B must be matrices, got ranks {len(A.shape)} and "
                         f"{len(B.shape)}")
    N, K = (_size(d) for d in A.shape)
    K2, M = (_size(d) for d in B.shape)
    if _differ(K2, K):
        raise ShapeError(f"{what}: A is [{N}, {K}] but B is [{K2}, {M}]; B needs {K} rows")
    define_product_knobs(cfg, N, K, M, dtype=_ACC)
    za = _zero_reader(what, a_zero, None, "row")
    zb = _zero_reader(what, b_zero, M, "column")
    As = _shifted(A, za and (lambda i, k: za(i)), "A_shifted")
    Bs = _shifted(B, zb and (lambda k, j: zb(j)), "B_shifted")
    k = te.reduce_axis((0, K), name="k")
    return te.compute((N, M), lambda i, j: te.sum(As[i, k] * Bs[k, j], axis=k), name="C",
                      tag="qnn_matmul")


def schedule_qnn_matmul(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_qnn_matmul` and any
    elementwise epilogue (a requantization)."""
    return _schedule_product(cfg, outs, "qnn_matmul")


def compute_qnn_conv2d(cfg, data, kernel, x_zero, w_zero=None, strides=(1, 1),
                       padding=(0, 0, 0, 0), dilation=(1, 1), pairs_fit_int16=False):
    """NCHW ``int32[N, K, OH, OW]``: ``sum (x - x_zero) * (w[k] - w_zero[k])`` over the
    window and the input channels (tag ``"conv2d"``, scheduled as the direct
    convolution); padded positions hold the real 0. ``data`` and ``kernel`` (OIHW) uint8 or
    int8, ``x_zero`` a scalar, ``w_zero`` a scalar, ``[K]`` or None; only the batch may be
    symbolic. ``pairs_fit_int16`` changes nothing here."""
    what = "qnn_conv2d"
    _check_operand(what, data, x_zero)
    _check_operand(what, kernel, w_zero)
    data_shape = _batched_shape(data.shape)
    (N, C, H, W, K, KC, R, S, sh, sw, dh, dw, pads, OH, OW) = _geometry(
        data_shape, [_size(d) for d in kernel.shape], strides, padding, dilation, what)
    if KC != C:
        raise ShapeError(f"{what}: the kernel reads {KC} input channels; the data has {C} "
                         f"(groups are not supported)")
    define_conv2d_knobs(cfg, K, C, OH, OW)
    zx = _zero_reader(what, x_zero, None, "image")
    zw = _zero_reader(what, w_zero, K, "output channel")
    # Shifted, then padded: the border holds the real 0.
    shifted = _pad(_shifted(data, zx and (lambda n, c, y, x: zx(0)), "data_shifted"), pads)
    weights = _shifted(kernel, zw and (lambda f, c, r, s: zw(f)), "kernel_shifted")
    return direct_conv2d(shifted, weights, (OH, OW), (sh, sw), (dh, dw))


def schedule_qnn_conv2d(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_qnn_conv2d` and any
    elementwise epilogue, as the direct convolution."""
    return schedule_conv2d(cfg, outs)


# ---- templates and strategies -----------------------------------------------------------


@template("qnn_matmul.cuda")
def qnn_matmul(N, K, M, dtype="uint8", weight_zero=False):
    """Tunable ``int32[N, M] = (A[N, K] - a_zero) @ (B[K, M] - b_zero)`` on a GPU, B int8
    with a zero point per column where ``weight_zero``."""
    cfg = get_config()
    A = te.placeholder((N, K), dtype, name="A")
    za = te.placeholder((), dtype, name="a_zero")
    B = te.placeholder((K, M), "int8", name="B")
    zb = te.placeholder((M,), "int8", name="b_zero") if weight_zero else None
    C = compute_qnn_matmul(cfg, A, B, za, zb)
    return schedule_qnn_matmul(cfg, [C]), [A, B, za] + ([zb] if weight_zero else []) + [C]


@template("qnn_conv2d.cuda")
def qnn_conv2d(data_shape, kernel_shape, strides=(1, 1), padding=(0, 0, 0, 0),
               dilation=(1, 1), dtype="uint8", weight_zero=False):
    """Tunable ``qnn_conv2d`` on a GPU: int8 weights, with a zero point per output channel
    where ``weight_zero``."""
    cfg = get_config()
    data = te.placeholder(tuple(data_shape), dtype, name="data")
    zx = te.placeholder((), dtype, name="x_zero")
    kernel = te.placeholder(tuple(kernel_shape), "int8", name="kernel")
    zw = te.placeholder((kernel_shape[0],), "int8", name="w_zero") if weight_zero else None
    out = compute_qnn_conv2d(cfg, data, kernel, zx, zw, strides, padding, dilation)
    return schedule_qnn_conv2d(cfg, [out]), [data, kernel, zx] + ([zw] if weight_zero
                                                                  else []) + [out]


def _qnn_matmul_workload(a_shape, b_shape, *zero_shapes, dtype="uint8", pairs_fit_int16=False):
    n, k = _batch_one(a_shape)
    return (n, k, int(b_shape[1]), dtype, len(zero_shapes) > 1)


def _qnn_conv2d_workload(data_shape, kernel_shape, *zero_shapes, strides=(1, 1),
                         padding=(0, 0, 0, 0), dilation=(1, 1), dtype="uint8",
                         pairs_fit_int16=False):
    return (_batch_one(data_shape), tuple(int(d) for d in kernel_shape), tuple(strides),
            tuple(padding), tuple(dilation), dtype, len(zero_shapes) > 1)


register_implementation(Implementation(
    "qnn_matmul", "cuda", compute_qnn_matmul, schedule_qnn_matmul,
    template="qnn_matmul.cuda", workload=_qnn_matmul_workload))
register_implementation(Implementation(
    "qnn_conv2d", "cuda", compute_qnn_conv2d, schedule_qnn_conv2d,
    template="qnn_conv2d.cuda", workload=_qnn_conv2d_workload, batch_free_config=True))
