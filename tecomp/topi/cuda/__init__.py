"""The operator library for NVIDIA GPUs (target kind ``cuda``).

Importing this package registers the tunable templates ``matmul.cuda``, ``dense.cuda``,
``batch_matmul.cuda``, ``conv2d.cuda`` and ``depthwise_conv2d.cuda`` with
``tecomp.autotune`` and, in :mod:`tecomp.topi.strategy`, a ``cuda`` implementation of
those operators and of every elementwise, broadcast, transform and reduction operator
that has an ``llvm`` one (the same compute, scheduled by :func:`schedule_injective` or
:func:`schedule_reduce`), so a graph compiler can target ``cuda``.
"""

from . import conv2d, injective, product
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

__all__ = [
    "compute_batch_matmul",
    "compute_conv2d",
    "compute_dense",
    "compute_depthwise_conv2d",
    "conv2d",
    "injective",
    "compute_matmul",
    "product",
    "schedule_batch_matmul",
    "schedule_conv2d",
    "schedule_dense",
    "schedule_depthwise_conv2d",
    "schedule_injective",
    "schedule_matmul",
    "schedule_reduce",
]
