"""Converters of ONNX's normalizations built from the library's kernels:
GroupNormalization (18, 21) as an instance normalization of the channel groups, and
MeanVarianceNormalization (9, 13) from mean reductions. Importing the module registers
them."""

from __future__ import annotations

import numpy as np
import onnx

from ..graph import dims
from .onnx_converters import converter, onnx_dtype


@converter("GroupNormalization", 18, 21)
def _group_normalization(ctx, node, attrs):
    # Each group of C / G channels is normalised over its channels and spatial positions:
    # x viewed as [N, G, C / G * spatial] is an instance normalisation of G "channels".
    # Version 18 scales and shifts per group (scale[G]: the instance norm's own), 21 per
    # channel (scale[C]: after the view is undone), with the statistics in stash_type.
    x, scale, bias = node.input[:3]
    t = ctx.type_of(x)
    if len(t.shape) < 3:
        ctx.fail(f"input {x!r} has shape {list(t.shape)}; GroupNormalization needs "
                 "[N, C, spatial...]")
    groups = int(attrs["num_groups"])
    n, c = t.shape[:2]
    if not dims.is_static(c) or c % groups:
        ctx.fail(f"num_groups={groups} must divide the channels ({c})")
    stash = t.dtype if ctx.version < 21 else onnx_dtype(
        int(attrs.get("stash_type", onnx.TensorProto.FLOAT)),
        f"node {ctx.node_name!r}: GroupNormalization stash_type")
    eps = float(attrs.get("epsilon", 1e-5))
    grouped = ctx.emit("reshape", [ctx.emit("cast", [x], dtype=stash)],
                       newshape=(n, groups, dims.normalize(c // groups
                                                           * dims.product(t.shape[2:]))))
    per_channel = ctx.version >= 21
    if per_channel:
        ones, zeros = (ctx.const(np.full(groups, v, stash), hint)
                       for v, hint in ((1, "ones"), (0, "zeros")))
    else:
        ones, zeros = (ctx.emit("cast", [v], dtype=stash) for v in (scale, bias))
    normed = ctx.emit("instance_norm", [grouped, ones, zeros], epsilon=eps)
    y = ctx.emit("reshape", [normed], newshape=tuple(t.shape))
    if per_channel:
        channel_shape = (c,) + (1,) * (len(t.shape) - 2)
        s, b = (ctx.emit("reshape", [ctx.emit("cast", [v], dtype=stash)],
                         newshape=channel_shape) for v in (scale, bias))
        y = ctx.emit("add", [ctx.emit("multiply", [y, s]), b])
    ctx.emit("cast", [y], node.output[:1], dtype=t.dtype)


@converter("MeanVarianceNormalization", 9, 13)
def _mean_variance_normalization(ctx, node, attrs):
    # ONNX's definition: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9), with the variance
    # taken as the mean square of the centred values (the same quantity, without the
    # cancellation of the difference of squares).
    x = node.input[0]
    axes = tuple(int(a) for a in attrs.get("axes", (0, 2, 3)))
    mean = ctx.emit("reduce_mean", [x], axes=axes, keepdims=1)
    centred = ctx.emit("subtract", [x, mean])
    var = ctx.emit("reduce_mean", [ctx.emit("multiply", [centred, centred])], axes=axes,
                   keepdims=1)
    eps = ctx.const(np.array(1e-9, ctx.type_of(x).dtype), "epsilon")
    ctx.emit("divide", [centred, ctx.emit("add", [ctx.emit("sqrt", [var]), eps])],
             node.output[:1])
