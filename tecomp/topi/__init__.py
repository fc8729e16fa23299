"""Operator library: compute + default schedule + tunable x86 template per operator.

Importing this package registers the templates ``matmul``, ``dense``, ``batch_matmul``,
``conv2d``, ``conv2d_packed_kernel`` (weights blocked once, e.g. constant-folded) and
``depthwise_conv2d`` with ``tecomp.autotune``. Calling a template outside
tuning gives the best shipped or ``apply_history_best`` record, else a fallback config.
"""

from .conv2d import (
    conv2d,
    conv2d_pack_kernel,
    conv2d_packed_kernel,
    depthwise_conv2d,
    kernel_blocking,
    pack_conv2d_kernel,
)
from .matmul import batch_matmul, dense, matmul, matmul_compute

__all__ = [
    "batch_matmul",
    "conv2d",
    "conv2d_pack_kernel",
    "conv2d_packed_kernel",
    "dense",
    "depthwise_conv2d",
    "kernel_blocking",
    "matmul",
    "matmul_compute",
    "pack_conv2d_kernel",
]
