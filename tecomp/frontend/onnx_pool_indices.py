"""MaxPool's second output, the indices of the maxima, in graph operators: the windows are
gathered from the input padded with -inf (``[N, C, windows, k]``), ``argmax`` picks each
window's first largest element in scan order (as onnxruntime and the spec's reference do),
and a table maps it to its flat index in the input, row-major (``storage_order=0``) or
column-major (1) within each channel, plus the channel's offset. Called by the MaxPool
converter of :mod:`tecomp.frontend.onnx_converters`; 2-D pooling with static shapes."""

from __future__ import annotations

import itertools

import numpy as np

from ..graph import dims


def max_pool_with_indices(ctx, x, outputs, kernel, strides, pads, dilations, ceil_mode,
                          storage_order) -> None:
    """Emit MaxPool's values to ``outputs[0]`` and its indices to ``outputs[1]``."""
    shape = ctx.type_of(x).shape
    if len(shape) != 4 or not all(dims.is_static(d) for d in shape):
        ctx.fail(f"MaxPool's indices of an input {list(shape)}: 2-D pooling of a shape "
                 "known at import only")
    n, c, h, w = (int(d) for d in shape)
    values = ctx.emit("max_pool2d", [x], outputs[:1], kernel=kernel, strides=strides,
                      pads=pads, dilations=dilations, ceil_mode=ceil_mode)
    oh, ow = (int(d) for d in ctx.type_of(values).shape[2:])
    hp, wp = h + pads[0] + pads[2], w + pads[1] + pads[3]
    # The padded positions each window reads ([windows, k]), and the flat index in the
    # unpadded channel of each (a padded one never wins over a real element but -inf).
    taps = list(itertools.product(range(kernel[0]), range(kernel[1])))
    read, where = [], []
    for i, j in itertools.product(range(oh), range(ow)):
        rows = [i * strides[0] + a * dilations[0] for a, _ in taps]
        cols = [j * strides[1] + b * dilations[1] for _, b in taps]
        read.append([min(r, hp - 1) * wp + min(q, wp - 1) for r, q in zip(rows, cols)])
        where.append([(r - pads[0]) * w + (q - pads[1]) if storage_order == 0
                      else (r - pads[0]) + (q - pads[1]) * h for r, q in zip(rows, cols)])
    padded = ctx.emit("pad", [x], pads=(0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]),
                      mode="constant", value=float("-inf"))
    flat = ctx.emit("reshape", [padded], newshape=(n, c, hp * wp))
    windows = ctx.emit("gather", [flat, ctx.const(np.array(read, "int64"), "windows")],
                       axis=2, node=ctx.node_name)
    best = ctx.emit("argmax", [windows], axis=3, keepdims=0, select_last_index=0)
    k = len(taps)
    chosen = ctx.emit("add", [best, ctx.const(np.arange(oh * ow, dtype="int64") * k,
                                              "window_starts")])
    index = ctx.emit("gather", [ctx.const(np.array(where, "int64").reshape(-1),
                                          "input_positions"), chosen], axis=0,
                     node=ctx.node_name)
    channel = ctx.const((np.arange(n * c, dtype="int64") * h * w).reshape(n, c, 1),
                        "channel_offsets")
    ctx.emit("reshape", [ctx.emit("add", [index, channel])], outputs[1:2],
             newshape=(n, c, oh, ow))
