"""ONNX RotaryEmbedding (opset 23) lowered to graph operators the library has: gather,
slice, multiply, add, subtract, concat and reshape.

The operator rotates pairs of each head's first ``rotary_embedding_dim`` features by the
angle of the token's position (the rotary position embeddings of LLaMA-style decoders,
which ``torch.onnx.export(..., dynamo=True, opset_version=23)`` writes as one node):

- X is ``[batch, heads, seq, head_size]``, or ``[batch, seq, hidden]`` split into
  ``num_heads`` heads of ``hidden / num_heads`` features;
- with ``position_ids`` (``[batch, seq]``), the cos and sin caches are tables
  ``[max_position, rotary_dim / 2]`` read at those rows, else they are
  ``[batch, seq, rotary_dim / 2]`` already;
- each pair ``(x1, x2)`` — the two halves of the rotated features, or with
  ``interleaved`` the even and odd ones — becomes ``(cos x1 - sin x2, sin x1 + cos x2)``,
  written back where it was read; the features past ``rotary_dim`` pass unchanged.

The products and sums are elementwise, so fusion makes of them one kernel with the
gathers of the caches.
"""

from __future__ import annotations

from ..graph import dims


class RotaryError(ValueError):
    """A RotaryEmbedding node whose inputs or attributes break the operator's rules."""


def lower_rotary_embedding(ctx, x: str, cos_cache: str, sin_cache: str,
                           position_ids: str | None, output: str, *, interleaved: bool,
                           rotary_dim: int, num_heads: int) -> None:
    """Emit the graph operators of ``RotaryEmbedding(x, cos_cache, sin_cache,
    position_ids)`` into ``ctx`` (a ``onnx_converters.Context``), writing ``output``.

    ``rotary_dim`` 0 rotates the whole head; ``num_heads`` 0 means the attribute is
    absent (only a 4-D X may omit it). Raises :class:`RotaryError` naming the input or
    attribute that is wrong and what is allowed.
    """
    shape = ctx.type_of(x).shape
    if len(shape) == 3:
        batch, seq, hidden = shape
        if num_heads <= 0:
            raise RotaryError("a 3-D input (batch, sequence, hidden) needs the num_heads "
                              "attribute (a positive number of heads)")
        if not dims.is_static(hidden) or hidden % num_heads:
            raise RotaryError(f"the hidden size {dims.to_text(hidden)} of input X is not a "
                              f"multiple of num_heads={num_heads}")
        # Heads on axis 2: the caches' [batch, seq] rows then broadcast over them.
        rows = ctx.emit("reshape", [x], newshape=(batch, seq, num_heads, hidden // num_heads))
        head_axis = 2
    elif len(shape) == 4:
        rows, head_axis = x, 1
    else:
        raise RotaryError(f"input X has rank {len(shape)}; allowed: 3 (batch, sequence, "
                          "hidden) or 4 (batch, heads, sequence, head size)")
    head_size = ctx.type_of(rows).shape[3]
    if not dims.is_static(head_size):
        raise RotaryError("the head size of input X must be known at compile time")
    rotary_dim = rotary_dim or head_size
    if rotary_dim % 2 or not 0 < rotary_dim <= head_size:
        raise RotaryError(f"rotary_embedding_dim={rotary_dim} must be even and at most the "
                          f"head size {head_size}")
    half = rotary_dim // 2
    cos, sin = (_angles(ctx, cache, position_ids, half, head_axis, what)
                for cache, what in ((cos_cache, "cos_cache"), (sin_cache, "sin_cache")))

    def features(start, end, step=1):
        return ctx.emit("slice", [rows], axes=(3,), starts=(start,), ends=(end,),
                        steps=(step,))

    x1, x2 = (features(0, rotary_dim, 2), features(1, rotary_dim, 2)) if interleaved else (
        features(0, half), features(half, rotary_dim))
    real = ctx.emit("subtract", [ctx.emit("multiply", [cos, x1]),
                                 ctx.emit("multiply", [sin, x2])])
    imag = ctx.emit("add", [ctx.emit("multiply", [sin, x1]), ctx.emit("multiply", [cos, x2])])
    if interleaved:
        # (real, imag) pairs side by side: [..., half, 2] read as [..., rotary_dim].
        lead = ctx.type_of(real).shape[:3]
        pairs = ctx.emit("concat", [ctx.emit("reshape", [t], newshape=(*lead, half, 1))
                                    for t in (real, imag)], axis=4)
        rotated = ctx.emit("reshape", [pairs], newshape=(*lead, rotary_dim))
    else:
        rotated = ctx.emit("concat", [real, imag], axis=3)
    if rotary_dim < head_size:
        rotated = ctx.emit("concat", [rotated, features(rotary_dim, head_size)], axis=3)
    ctx.emit("reshape", [rotated], [output], newshape=tuple(shape))


def _angles(ctx, cache: str, position_ids: str | None, half: int, head_axis: int,
            what: str) -> str:
    """The cos or sin of each token's angles, ``[batch, seq, half]`` with a 1 inserted at
    ``head_axis`` so that it broadcasts over the heads."""
    if position_ids is not None:
        if len(ctx.type_of(cache).shape) != 2:
            raise RotaryError(f"{what} with position_ids must be 2-D (max position, "
                              f"rotary dim / 2), not {_text(ctx.type_of(cache).shape)}")
        cache = ctx.emit("gather", [cache, position_ids], axis=0)
    shape = ctx.type_of(cache).shape
    if len(shape) != 3:
        raise RotaryError(f"{what} without position_ids must be 3-D (batch, sequence, "
                          f"rotary dim / 2), not {_text(shape)}")
    if not dims.is_static(shape[2]) or shape[2] < half:
        raise RotaryError(f"{what} has {dims.to_text(shape[2])} angles a position; the "
                          f"rotation needs {half}")
    if shape[2] > half:
        cache = ctx.emit("slice", [cache], axes=(2,), starts=(0,), ends=(half,), steps=(1,))
    angles = (*ctx.type_of(cache).shape[:2], half)
    return ctx.emit("reshape", [cache], newshape=(*angles[:head_axis], 1, *angles[head_axis:]))


def _text(shape) -> str:
    return f"[{', '.join(dims.to_text(d) for d in shape)}]"
