"""``LinearAttention`` (opset 27): attention whose keys and values are summed into a state
``S[d_k, d_v]`` per head, read by each query, as in RetNet, Mamba-2 and Gated DeltaNet.

Per time step ``t``, in float32 (the reference's precision): the state decays by
``exp(decay[t])`` (update rules ``gated`` and ``gated_delta``), the value is corrected by
what the state already holds for the key, ``v <- beta[t] * (v - k S)`` (``delta`` and
``gated_delta``), the outer product ``k v`` is added, and the output is
``scale * q S``, the state of a key/value head read by each of its query heads. The steps
are unrolled into the graph's own operators, as the recurrent layers are
(:mod:`.onnx_recurrent`): the sequence length must be static, and where the model leaves
it symbolic the model is specialised per input shapes on first run. The batch may stay
symbolic; ``chunk_size`` is a hint for chunked kernels and changes no result.
"""

from __future__ import annotations

import numpy as np

from ..graph import dims
from .onnx_converters import ModelError, NeedsConstantError, converter, split_heads

_RULES = {"linear": (False, False), "gated": (True, False), "delta": (False, True),
          "gated_delta": (True, True)}


def _heads(ctx, x, heads: int, what: str):
    """(B, T, H*D) as float32 (B, H, T, D)."""
    out = split_heads(ctx, x, heads, what)
    return out if ctx.type_of(out).dtype == "float32" else ctx.emit("cast", [out],
                                                                      dtype="float32")


def _step(ctx, x, t: int):
    """Step ``t`` of a (B, H, T, D) tensor, as (B, H, 1, D)."""
    return ctx.emit("slice", [x], starts=(t,), ends=(t + 1,), axes=(2,), steps=(1,))


@converter("LinearAttention", 27)
def _linear_attention(ctx, node, attrs):
    owner = ctx.node_name
    rule = attrs.get("update_rule", b"gated_delta")
    rule = rule.decode() if isinstance(rule, bytes) else rule
    if rule not in _RULES:
        raise ModelError(f"node {owner!r} (LinearAttention): update_rule {rule!r}; allowed: "
                         f"{', '.join(_RULES)}")
    gating, delta = _RULES[rule]
    q_heads, kv_heads = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
    if not q_heads or not kv_heads or q_heads % kv_heads:
        raise ModelError(f"node {owner!r} (LinearAttention): q_num_heads ({q_heads}) must be "
                         f"a positive multiple of kv_num_heads ({kv_heads})")
    inputs = list(node.input) + [""] * (6 - len(node.input))
    query, key, value, past, decay, beta = inputs[:6]
    for given, needed, name in ((decay, gating, "decay"), (beta, delta, "beta")):
        if bool(given) != needed:
            raise ModelError(f"node {owner!r} (LinearAttention): update_rule {rule!r} "
                             f"{'needs' if needed else 'takes no'} {name}")
    batch, steps, q_width = ctx.type_of(query).shape
    if not dims.is_static(steps):
        raise NeedsConstantError(
            f"node {owner!r} (LinearAttention): the sequence length "
            f"({dims.to_text(steps)}) must be known at import, as the steps are unrolled",
            query, owner, "the sequence length")
    d_k = q_width // q_heads
    d_v = ctx.type_of(value).shape[2] // kv_heads
    group = q_heads // kv_heads
    q4 = _heads(ctx, query, q_heads, "q_num_heads")
    k4, v4 = (_heads(ctx, x, kv_heads, "kv_num_heads") for x in (key, value))
    if gating:
        width = ctx.type_of(decay).shape[2]
        per = 1 if width == kv_heads else d_k
        if width != kv_heads * per:
            raise ModelError(f"node {owner!r} (LinearAttention): decay's last axis is "
                             f"{width}; allowed: {kv_heads} or {kv_heads * d_k}")
        # (B, Hkv, T, 1 or d_k)
        decay4 = ctx.emit("exp", [_heads(ctx, decay, kv_heads, "kv_num_heads")])
    if delta:
        # (B, Hkv or 1, T, 1)
        beta4 = _heads(ctx, beta, ctx.type_of(beta).shape[2], "beta's heads")
    zero = ctx.const(np.zeros((), np.float32), "zero")
    state_shape = (batch, kv_heads, d_k, d_v)
    state = (ctx.emit("cast", [past], dtype="float32") if past
             else ctx.emit("expand", [zero], shape=state_shape))
    scale = float(attrs.get("scale", 0.0)) or 1.0 / np.sqrt(d_k)
    scale_c = ctx.const(np.array(scale, np.float32), "scale")
    outputs = []
    for t in range(int(steps)):
        k_t, v_t = _step(ctx, k4, t), _step(ctx, v4, t)
        if gating:
            g = _step(ctx, decay4, t)
            g = ctx.emit("reshape", [g], newshape=(batch, kv_heads, ctx.type_of(g).shape[3], 1))
            state = ctx.emit("multiply", [state, g])
        if delta:
            held = ctx.emit("matmul", [k_t, state])                    # (B, Hkv, 1, d_v)
            v_t = ctx.emit("multiply", [_step(ctx, beta4, t),
                                        ctx.emit("subtract", [v_t, held])])
        column = ctx.emit("reshape", [k_t], newshape=(batch, kv_heads, d_k, 1))
        state = ctx.emit("add", [state, ctx.emit("multiply", [column, v_t])])
        read = state
        if group > 1:
            # Each key/value head's state serves its query heads, head h_kv the group.
            wide = ctx.emit("expand", [ctx.emit("reshape", [state], newshape=(
                batch, kv_heads, 1, d_k, d_v))], shape=(batch, kv_heads, group, d_k, d_v))
            read = ctx.emit("reshape", [wide], newshape=(batch, q_heads, d_k, d_v))
        o_t = ctx.emit("matmul", [_step(ctx, q4, t), read])              # (B, Hq, 1, d_v)
        outputs.append(ctx.emit("multiply", [o_t, scale_c]))
    out, present = (list(node.output) + ["", ""])[:2]
    if out:
        y = outputs[0] if len(outputs) == 1 else ctx.emit("concat", outputs, axis=2)
        y = ctx.emit("reshape", [ctx.emit("transpose", [y], perm=(0, 2, 1, 3))],
                     newshape=(batch, steps, q_heads * d_v))
        ctx.emit("cast", [y], [out], dtype=ctx.type_of(query).dtype)
    if present:
        dtype = ctx.type_of(past).dtype if past else ctx.type_of(query).dtype
        ctx.emit("cast", [state], [present], dtype=dtype)
