"""Operator library: compute + default schedule + tunable x86 template per operator.

Importing this package registers the templates ``matmul``, ``dense``, ``batch_matmul``,
``conv2d`` and ``depthwise_conv2d`` with ``tecomp.autotune``. Calling a template outside
tuning gives the best shipped or ``apply_history_best`` record, else a fallback config.
"""

from .conv2d import conv2d, depthwise_conv2d
from .matmul import batch_matmul, dense, matmul, matmul_compute

__all__ = ["batch_matmul", "conv2d", "dense", "depthwise_conv2d", "matmul", "matmul_compute"]
