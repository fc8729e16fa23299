"""Operator library: per operator, a compute, a schedule per target and a tunable template.

Each operator has a public compute (``compute_dense(cfg, X, W, b=None)``, ...: te
tensors in, the output tensor out, the reduction tagged with the operator's name) and a
schedule (``schedule_dense(cfg, outs)``) that schedules the group ending in ``outs`` —
the operator plus any elementwise epilogue computed from it, fused into its output loop.
They are registered per target kind in :mod:`tecomp.topi.strategy`, where a graph
compiler finds them.

Importing this package registers the templates ``matmul``, ``dense``, ``dense_packed``,
``batch_matmul``, ``conv2d``, ``conv2d_packed_kernel`` (weights blocked once, e.g.
constant-folded) and ``depthwise_conv2d`` with ``tecomp.autotune``. Calling a template
outside tuning gives the best shipped or ``apply_history_best`` record, else a fallback
config.
"""

from . import strategy
from .conv2d import (
    compute_conv2d,
    compute_depthwise_conv2d,
    conv2d,
    conv2d_pack_kernel,
    conv2d_packed_kernel,
    depthwise_conv2d,
    kernel_blocking,
    pack_conv2d_kernel,
    schedule_conv2d,
    schedule_depthwise_conv2d,
)
from .matmul import (
    batch_matmul,
    compute_batch_matmul,
    compute_dense,
    compute_matmul,
    dense,
    dense_packed,
    matmul,
    pack_dense_weight,
    schedule_batch_matmul,
    schedule_dense,
    schedule_matmul,
)

__all__ = [
    "batch_matmul",
    "compute_batch_matmul",
    "compute_conv2d",
    "compute_dense",
    "compute_depthwise_conv2d",
    "compute_matmul",
    "conv2d",
    "conv2d_pack_kernel",
    "conv2d_packed_kernel",
    "dense",
    "dense_packed",
    "depthwise_conv2d",
    "kernel_blocking",
    "matmul",
    "pack_conv2d_kernel",
    "pack_dense_weight",
    "schedule_batch_matmul",
    "schedule_conv2d",
    "schedule_dense",
    "schedule_depthwise_conv2d",
    "schedule_matmul",
    "strategy",
]
