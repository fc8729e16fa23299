"""The operator library for NVIDIA GPUs (target kind ``cuda``).

Importing this package registers the tunable templates ``matmul.cuda``, ``dense.cuda``,
``batch_matmul.cuda``, ``conv2d.cuda``, ``depthwise_conv2d.cuda``, ``qnn_matmul.cuda`` and
``qnn_conv2d.cuda`` with
``tecomp.autotune`` and, in :mod:`tecomp.topi.strategy`, a ``cuda`` implementation of
those operators and of every elementwise, broadcast, transform and reduction operator
that has an ``llvm`` one (the same compute, scheduled by :func:`schedule_injective` or
:func:`schedule_reduce`), so a graph compiler can target ``cuda``.
"""

from ..strategy import register_without_implementation
from . import attention, conv2d, injective, product, qnn
from .conv2d import (
    compute_conv2d,
    compute_depthwise_conv2d,
    schedule_conv2d,
    schedule_depthwise_conv2d,
)
from .injective import schedule_injective, schedule_reduce
from .product import (
    compute_batch_matmul,
    compute_dense,
    compute_matmul,
    schedule_batch_matmul,
    schedule_dense,
    schedule_matmul,
)

# The graph operators the CPU alone computes, and why.
for _op in ("conv2d_nchwc", "depthwise_conv2d_nchwc", "qnn_conv2d_nchwc"):
    register_without_implementation(
        _op, "cuda", "a CPU layout (activations blocked by channel vectors) that the graph "
        "passes make for llvm targets only; on cuda the convolution stays conv2d")

__all__ = [
    "compute_batch_matmul",
    "compute_conv2d",
    "compute_dense",
    "compute_depthwise_conv2d",
    "conv2d",
    "injective",
    "compute_matmul",
    "product",
    "qnn",
    "schedule_batch_matmul",
    "schedule_conv2d",
    "schedule_dense",
    "schedule_depthwise_conv2d",
    "schedule_injective",
    "schedule_matmul",
    "schedule_reduce",
]
