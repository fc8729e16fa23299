"""``CausalConvWithState`` (opset 27): the depthwise causal 1-D convolution of Mamba and
Gated DeltaNet layers, with the last ``k - 1`` positions carried from one call to the
next for decoding.

It is written as the three operators it fuses, each converted as usual: the past state
(zeros without one) concatenated before the input along the length, a depthwise ``Conv``
of kernel ``k`` without padding (its bias added), SiLU where asked (in float32 for float16
inputs, as the reference computes it), and the present state sliced from the last
``k - 1`` positions of the concatenation. A kernel of length 1 carries no state, an empty
tensor, which the graph does not hold: that model is refused, naming the node.
"""

from __future__ import annotations

import itertools

import numpy as np
from onnx import TensorProto, helper

from .onnx_converters import ModelError, converter


@converter("CausalConvWithState", 27)
def _causal_conv_with_state(ctx, node, attrs):
    owner = ctx.node_name
    activation = attrs.get("activation", b"none")
    activation = activation.decode() if isinstance(activation, bytes) else activation
    if activation not in ("none", "silu", "swish"):
        raise ModelError(f"node {owner!r} (CausalConvWithState): activation "
                         f"{activation!r}; allowed: none, silu, swish")
    x, weight = node.input[0], node.input[1]
    bias = node.input[2] if len(node.input) > 2 and node.input[2] else ""
    past = node.input[3] if len(node.input) > 3 and node.input[3] else ""
    channels, k = ctx.type_of(weight).shape[0], ctx.type_of(weight).shape[2]
    if k == 1:
        raise ModelError(f"node {owner!r} (CausalConvWithState): a kernel of length 1 "
                         f"carries an empty state, which tecomp does not hold")
    dtype = ctx.type_of(x).dtype
    out, present = (list(node.output) + ["", ""])[:2]
    step = itertools.count()

    def run(op_type, inputs, outputs=None, **op_attrs):
        outputs = outputs or [f"{owner}/{op_type}_{next(step)}"]
        ctx.convert_node(helper.make_node(op_type, inputs, outputs, **op_attrs),
                         f"{owner}/{op_type}")
        ctx.node_name = owner
        return outputs[0]

    def const(value, hint):
        return ctx.const(np.asarray(value), name=f"{owner}/{hint}_{next(step)}")

    if past:
        padded = run("Concat", [past, x], axis=2)
    else:
        padded = run("Pad", [x, const(np.array([0, 0, k - 1, 0, 0, 0], np.int64), "pads")])
    conv_out = out if activation == "none" and out else None
    conv = run("Conv", [padded, weight] + ([bias] if bias else []),
               [conv_out] if conv_out else None, group=int(channels), kernel_shape=[int(k)])
    if activation != "none" and out:
        wide = run("Cast", [conv], to=TensorProto.FLOAT) if dtype == "float16" else conv
        silu = run("Mul", [wide, run("Sigmoid", [wide])],
                   None if dtype == "float16" else [out])
        if dtype == "float16":
            run("Cast", [silu], [out], to=TensorProto.FLOAT16)
    if present:
        run("Slice", [padded, const(np.array([-(k - 1)], np.int64), "starts"),
                      const(np.array([np.iinfo(np.int64).max], np.int64), "ends"),
                      const(np.array([2], np.int64), "axes")], [present])
