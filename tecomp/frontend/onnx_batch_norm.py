"""BatchNormalization in training mode (``training_mode=1``, versions 14 and 15), in graph
operators: Y normalised by the batch's own statistics (the mean and the population
variance over every axis but the channels), and the running statistics updated as
``running * momentum + batch * (1 - momentum)`` for the outputs after Y. Called by the
BatchNormalization converter of :mod:`tecomp.frontend.onnx_converters`."""

from __future__ import annotations

import numpy as np


def batch_norm_training(ctx, node, attrs) -> None:
    """Emit ``node`` (a BatchNormalization with ``training_mode=1``) through ``ctx``."""
    x, scale, bias, running_mean, running_var = node.input[:5]
    t = ctx.type_of(x)
    rank = len(t.shape)
    if rank < 2:
        ctx.fail(f"the input {list(t.shape)} must have a channel axis (rank 2 or more)")
    axes = (0,) + tuple(range(2, rank))
    channel_shape = (t.shape[1],) + (1,) * (rank - 2)
    mean = ctx.emit("reduce_mean", [x], axes=axes, keepdims=0)
    centred = ctx.emit("subtract", [x, ctx.emit("reshape", [mean], newshape=channel_shape)])
    var = ctx.emit("reduce_mean", [ctx.emit("multiply", [centred, centred])], axes=axes,
                   keepdims=0)
    ctx.emit("batch_norm", [x, scale, bias, mean, var], node.output[:1],
             epsilon=float(attrs.get("epsilon", 1e-5)))
    momentum = float(attrs.get("momentum", 0.9))
    keep = ctx.const(np.array(momentum, t.dtype), "momentum")
    take = ctx.const(np.array(1.0 - momentum, t.dtype), "one_minus_momentum")
    for running, batch, out in ((running_mean, mean, 1), (running_var, var, 2)):
        if len(node.output) > out and node.output[out]:
            ctx.emit("add", [ctx.emit("multiply", [running, keep]),
                             ctx.emit("multiply", [batch, take])], [node.output[out]])
