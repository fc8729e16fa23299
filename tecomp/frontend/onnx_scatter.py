"""Converters of ONNX operators that write values into a tensor at computed positions,
as one ``scatter_elements`` each: TensorScatter (24), a KV cache's update written at each
batch entry's position (linearly or circularly), MaxUnpool (9, 11, 22), the values of a
max pooling put back at its indices, and Col2Im (18), the sum of image blocks back into
the image (columns as Unfold writes them). Importing the module registers them."""

from __future__ import annotations

import itertools

import numpy as np

from ..graph import dims
from .onnx_converters import ModelError, converter


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def _static(ctx, shape, what):
    if not all(dims.is_static(d) for d in shape):
        ctx.fail(f"{what} {list(shape)} must be known at import")
    return tuple(int(d) for d in shape)


@converter("TensorScatter", 24)
def _tensor_scatter(ctx, node, attrs):
    # Entry b of the update goes to positions write_indices[b] + s of the cache's axis
    # (modulo its length when circular): an index table built in the graph, so the
    # positions may change from call to call without a new build.
    past, update = node.input[:2]
    rank = len(ctx.type_of(past).shape)
    axis = int(attrs.get("axis", -2)) % rank
    if axis == 0:
        ctx.fail("axis 0 is the batch axis; the sequence axis must come after it",
                 ModelError)
    mode = _text(attrs.get("mode", "linear"))
    if mode not in ("linear", "circular"):
        ctx.fail(f"mode {mode!r}; allowed: linear, circular", ModelError)
    update_shape = ctx.type_of(update).shape
    steps = update_shape[axis]
    if not dims.is_static(steps):
        ctx.fail(f"the update's sequence length {steps} must be known at import")
    shape = [1] * rank
    shape[axis] = int(steps)
    index = ctx.const(np.arange(int(steps), dtype="int64").reshape(shape), "steps")
    if len(node.input) > 2 and node.input[2]:
        starts = ctx.emit("cast", [node.input[2]], dtype="int64")
        batch_shape = [1] * rank
        batch_shape[0] = ctx.type_of(node.input[2]).shape[0]
        index = ctx.emit("add", [ctx.emit("reshape", [starts], newshape=tuple(batch_shape)),
                                 index])
    if mode == "circular":
        length = ctx.const(np.array(ctx.type_of(past).shape[axis], "int64"), "length")
        index = ctx.emit("mod", [index, length], fmod=0)
    index = ctx.emit("expand", [index], shape=tuple(update_shape))
    ctx.emit("scatter_elements", [past, index, update], node.output[:1], axis=axis,
             reduction="none", node=ctx.node_name)


@converter("MaxUnpool", 9, 11, 22)
def _max_unpool(ctx, node, attrs):
    # Indices flatten the whole unpooled tensor (as MaxPool's second output numbers it):
    # one scatter into its zeros, then zeros appended where output_shape asks for more.
    x, indices = node.input[:2]
    shape = _static(ctx, ctx.type_of(x).shape, "the input's shape")
    index_shape = ctx.type_of(indices).shape
    if len(index_shape) != len(shape) or not all(dims.equal(i, d)
                                                 for i, d in zip(index_shape, shape)):
        # onnxruntime requires it; the scatter below would pair values and positions by
        # flat order otherwise.
        ctx.fail(f"the indices' shape [{', '.join(dims.to_text(d) for d in index_shape)}] "
                 f"must be the input's {list(shape)}", ModelError)
    kernel = [int(k) for k in attrs["kernel_shape"]]
    nsp = len(kernel)
    strides = [int(s) for s in attrs.get("strides", [1] * nsp)]
    pads = [int(p) for p in attrs.get("pads", [0] * 2 * nsp)]
    unpooled = shape[:2] + tuple((shape[2 + a] - 1) * strides[a] - pads[a] - pads[nsp + a]
                                 + kernel[a] for a in range(nsp))
    out = unpooled
    if len(node.input) > 2 and node.input[2]:
        out = tuple(int(v) for v in ctx.value_of(node.input[2], "output_shape").reshape(-1))
        if len(out) != len(unpooled) or any(o < u for o, u in zip(out, unpooled)):
            ctx.fail(f"output_shape {list(out)} must have rank {len(unpooled)} and be at "
                     f"least the unpooled shape {list(unpooled)}", ModelError)
    dtype = ctx.type_of(x).dtype
    zeros = ctx.const(np.zeros(int(np.prod(unpooled)), dtype), "zeros")
    flat = ctx.emit("scatter_elements",
                    [zeros, ctx.emit("reshape", [indices], newshape=(-1,)),
                     ctx.emit("reshape", [x], newshape=(-1,))],
                    axis=0, reduction="none", node=ctx.node_name)
    y = ctx.emit("reshape", [flat], newshape=unpooled)
    ends = tuple(o - u for o, u in zip(out, unpooled))
    ctx.emit("pad", [y], node.output[:1], pads=(0,) * len(out) + ends, mode="constant",
             value=0)


def col2im_positions(image, block, dilations, pads, strides) -> tuple:
    """``(positions, L)``: for each (block offset, column) pair, in the order of Col2Im's
    input ``[C * prod(block), L]``, the flat pixel of the image it adds to, or
    ``prod(image)`` where it falls in the padding; and the number of columns ``L``."""
    k = len(image)
    counts = [(image[a] + pads[a] + pads[k + a] - dilations[a] * (block[a] - 1) - 1)
              // strides[a] + 1 for a in range(k)]
    out = []
    for offset in itertools.product(*(range(b) for b in block)):
        for column in itertools.product(*(range(c) for c in counts)):
            pixel = [column[a] * strides[a] - pads[a] + offset[a] * dilations[a]
                     for a in range(k)]
            inside = all(0 <= p < n for p, n in zip(pixel, image))
            out.append(int(np.ravel_multi_index(pixel, image)) if inside
                       else int(np.prod(image)))
    return np.array(out, dtype="int64"), int(np.prod(counts))


@converter("Col2Im", 18)
def _col2im(ctx, node, attrs):
    x = node.input[0]
    image = tuple(int(v) for v in ctx.value_of(node.input[1], "image_shape").reshape(-1))
    block = tuple(int(v) for v in ctx.value_of(node.input[2], "block_shape").reshape(-1))
    k = len(image)
    dilations = [int(d) for d in attrs.get("dilations", [1] * k)]
    pads = [int(p) for p in attrs.get("pads", [0] * 2 * k)]
    strides = [int(s) for s in attrs.get("strides", [1] * k)]
    t = ctx.type_of(x)
    n, rows, columns = t.shape
    blocks = int(np.prod(block))
    positions, count = col2im_positions(image, block, dilations, pads, strides)
    if not dims.is_static(rows) or rows % blocks or not dims.equal(columns, count):
        ctx.fail(f"the input [{n}, {rows}, {columns}] must be [N, C * {blocks}, {count}] "
                 f"for blocks {list(block)} over the image {list(image)}", ModelError)
    channels = int(rows) // blocks
    # Each channel's rows are its block offsets: [N, C, offsets * columns] in the order
    # of the position table; what falls in the padding is summed into one extra pixel.
    updates = ctx.emit("reshape", [x], newshape=(n, channels, blocks * count))
    index = ctx.emit("expand", [ctx.const(positions, "pixels")],
                     shape=(n, channels, blocks * count))
    pixels = int(np.prod(image))
    sums = ctx.emit("scatter_elements",
                    [ctx.emit("full", [], shape=(n, channels, pixels + 1), value=0,
                              dtype=t.dtype), index, updates],
                    axis=2, reduction="add", node=ctx.node_name)
    image_values = ctx.emit("slice", [sums], starts=(0,), ends=(pixels,), axes=(2,),
                            steps=(1,))
    ctx.emit("reshape", [image_values], node.output[:1], newshape=(n, channels) + image)
