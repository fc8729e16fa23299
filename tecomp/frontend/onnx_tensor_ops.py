"""Converters of ONNX operators that rearrange or generate tensors, written with the
library's slices, pads, gathers and resizes: CenterCropPad (18), ReverseSequence (10, 28),
Compress (9, 11, 28), EyeLike (9, 22), Upsample (7, 9) and the gated activation SwiGLU
(28). Importing the module registers them."""

from __future__ import annotations

import numpy as np

from ..graph import dims
from .onnx_converters import ModelError, converter, onnx_dtype


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


@converter("CenterCropPad", 18)
def _center_crop_pad(ctx, node, attrs):
    # Per listed axis: a larger size is cropped to its centre (the extra element, for
    # an odd difference, cut at the end), a smaller one padded with zeros around it
    # (the extra zero at the end).
    x = node.input[0]
    shape = ctx.type_of(x).shape
    rank = len(shape)
    target = ctx.dims_of(node.input[1], "shape")
    axes = [int(a) % rank for a in attrs.get("axes", range(rank))]
    if len(target) != len(axes):
        ctx.fail(f"shape has {len(target)} sizes for {len(axes)} axes")
    starts, ends, crop_axes, pads = [], [], [], [0] * (2 * rank)
    for a, want in zip(axes, target):
        have = shape[a]
        if not (dims.is_static(have) and dims.is_static(want)):
            ctx.fail(f"axis {a}: the sizes {have} and {want} must be known at import")
        if want < have:
            d = (have - want) // 2
            starts.append(d)
            ends.append(d + want)
            crop_axes.append(a)
        elif want > have:
            d = want - have
            pads[a], pads[a + rank] = d // 2, d - d // 2
    if crop_axes:
        x = ctx.emit("slice", [x], starts=tuple(starts), ends=tuple(ends),
                     axes=tuple(crop_axes), steps=(1,) * len(crop_axes))
    ctx.emit("pad", [x], node.output[:1], pads=tuple(pads), mode="constant", value=0)


@converter("ReverseSequence", 10, 28)
def _reverse_sequence(ctx, node, attrs):
    # The first sequence_lens[b] steps of batch b reversed, the rest kept: one gather
    # along the time axis by an index table of [batch, time] (the lengths are values
    # the model is specialised on where they are inputs).
    x = node.input[0]
    shape = ctx.type_of(x).shape
    rank = len(shape)
    batch_axis, time_axis = int(attrs.get("batch_axis", 1)), int(attrs.get("time_axis", 0))
    if batch_axis == time_axis:
        ctx.fail(f"batch_axis and time_axis are both {batch_axis}; they must differ",
                 ModelError)
    lengths = ctx.value_of(node.input[1], "sequence_lens").reshape(-1).astype("int64")
    steps = shape[time_axis]
    if not dims.is_static(steps):
        ctx.fail(f"the time axis ({time_axis}) has the symbolic size {steps}; it must be "
                 "known at import")
    if np.any((lengths < 0) | (lengths > steps)):
        ctx.fail(f"sequence_lens {lengths.tolist()} must lie in 0..{steps}", ModelError)
    t = np.arange(steps)
    table = np.where(t < lengths[:, None], lengths[:, None] - 1 - t, t)
    if batch_axis > time_axis:
        table = table.T
    index_shape = [1] * rank
    index_shape[batch_axis], index_shape[time_axis] = len(lengths), steps
    index = ctx.const(table.reshape(index_shape), "reversed_steps")
    index = ctx.emit("expand", [index], shape=tuple(shape))
    ctx.emit("gather_elements", [x, index], node.output[:1], axis=time_axis,
             node=ctx.node_name)


@converter("EyeLike", 9, 22)
def _eye_like(ctx, node, attrs):
    t = ctx.type_of(node.input[0])
    if len(t.shape) != 2 or not all(dims.is_static(d) for d in t.shape):
        ctx.fail(f"the input's shape {list(t.shape)} must be 2-D and known at import")
    dtype = (onnx_dtype(int(attrs["dtype"]), f"node {ctx.node_name!r}: EyeLike dtype")
             if "dtype" in attrs else t.dtype)
    rows, cols = (int(d) for d in t.shape)
    ctx.const(np.eye(rows, cols, k=int(attrs.get("k", 0)), dtype=dtype), name=node.output[0])


@converter("Upsample", 7, 9)
def _upsample(ctx, node, attrs):
    # Resize's asymmetric coordinates: output i reads input i / scale (nearest: floor).
    mode = _text(attrs.get("mode", "nearest"))
    if mode not in ("nearest", "linear"):
        ctx.fail(f"Upsample mode {mode!r} is not supported; allowed: nearest, linear")
    scales = (attrs["scales"] if ctx.version < 9
              else ctx.value_of(node.input[1], "scales").reshape(-1))
    ctx.emit("resize", [node.input[0]], node.output[:1],
             scales=tuple(float(s) for s in scales), sizes=None, mode=mode,
             coordinate_transformation_mode="asymmetric", nearest_mode="floor")


@converter("SwiGLU", 28)
def _swiglu(ctx, node, attrs):
    # a * sigmoid(alpha * a) * b, A and B of one shape.
    a, b = node.input[:2]
    alpha = ctx.const(np.array(attrs.get("alpha", 1.0), ctx.type_of(a).dtype), "alpha")
    gate = ctx.emit("sigmoid", [ctx.emit("multiply", [a, alpha])])
    ctx.emit("multiply", [ctx.emit("multiply", [a, gate]), b], node.output[:1])


@converter("Compress", 9, 11, 28)
def _compress(ctx, node, attrs):
    # The kept positions decide the output's size: a gather of the positions where the
    # condition holds (a value the model is specialised on where it is an input). Without
    # an axis, the input is flattened first.
    x = node.input[0]
    keep = np.nonzero(ctx.value_of(node.input[1], "condition").reshape(-1))[0]
    shape = ctx.type_of(x).shape
    if "axis" in attrs:
        axis = int(attrs["axis"]) % len(shape)
    else:
        x = ctx.emit("reshape", [x], newshape=(dims.product(shape),))
        axis, shape = 0, (dims.product(shape),)
    size = shape[axis]
    if dims.is_static(size) and keep.size and keep[-1] >= size:
        ctx.fail(f"the condition selects position {int(keep[-1])} of an axis of {size}",
                 ModelError)
    ctx.emit("gather", [x, ctx.const(keep.astype("int64"), "kept")], node.output[:1],
             axis=axis, node=ctx.node_name)
