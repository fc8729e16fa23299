"""Converters of the ``com.microsoft`` quantized operators that onnxruntime's quantizer
writes in its operator format (``quantize_static(..., quant_format=QuantFormat.QOperator)``)
beside the standard ``QLinearConv`` and ``QLinearMatMul``: the element-wise additions and
products of a residual network, its pools, concatenations and activations, and the
quantized ``Gemm`` of its classifier.

Each is written the way the QDQ format is, as :mod:`.onnx_quantized` writes the standard
ones: its 8-bit inputs dequantized, the float operator (through the float converters, so
its attributes mean what they mean for Add, Gemm, AveragePool, ...), then a requantize.
The graph pass :func:`tecomp.graph.passes.quantized_ops.lower_quantized_ops` then runs
``QGemm`` on the int8 product, and fusion makes each of the others one kernel reading and
writing 8-bit values. Semantics are onnxruntime's (its ``ContribOperators.md``):

- ``QLinearAdd`` / ``QLinearMul(A, A_scale, A_zero_point, B, B_scale, B_zero_point,
  C_scale, C_zero_point)``: broadcasting, as Add / Mul;
- ``QGemm(A, a_scale, a_zero_point, B, b_scale, b_zero_point, [C], [y_scale],
  [y_zero_point])``, attributes ``alpha``, ``transA``, ``transB``: ``C`` is int32 with
  scale ``alpha * a_scale * b_scale`` and zero point 0; ``b_scale`` may hold one value
  per output column; without ``y_scale`` the output is float;
- ``QLinearGlobalAveragePool`` / ``QLinearAveragePool(X, x_scale, x_zero_point,
  y_scale, y_zero_point)``, ``channels_last`` 0 (the pool's other attributes as
  AveragePool's);
- ``QLinearConcat(Y_scale, Y_zero_point, X1, X1_scale, X1_zero_point, ...)``, ``axis``;
- ``QLinearLeakyRelu`` (``alpha``), ``QLinearSigmoid`` and ``QLinearSoftmax`` (``axis``,
  and ``opset``: whose Softmax, 13's axis or the flattening of versions before it)
  ``(X, X_scale, X_zero_point, Y_scale, Y_zero_point)``;
- ``QLinearWhere(condition, X, X_scale, X_zero_point, Y, Y_scale, Y_zero_point, Z_scale,
  Z_zero_point)``, broadcasting as Where.

Scales are per tensor but where noted; zero points may be left out (0, uint8).
"""

from __future__ import annotations

from collections.abc import Callable

from .onnx_quantized import _check_quantized, _dequantized, _float_node, _input, bias_scale

__all__ = ["CONTRIB_DOMAIN", "contrib_converters"]

#: The domain of onnxruntime's contributed operators.
CONTRIB_DOMAIN = "com.microsoft"


def contrib_converters(float_converter: Callable) -> dict:
    """``(domain, op_type) -> converter`` of the ``com.microsoft`` quantized operators.

    Parameters
    ----------
    float_converter : callable
        ``(op_type, since_version) -> converter`` of the float operators they are written
        with.
    """

    def float_op(ctx, node, op_type, version, inputs, attrs) -> str:
        """The float operator ``op_type`` (since-version ``version``) on ``inputs``."""
        y = ctx.fresh(op_type.lower())
        float_node = _float_node(op_type, node, inputs, y, attrs)
        # A converter may read the version it converts (Softmax's axis).
        own, ctx.version = ctx.version, version
        try:
            float_converter(op_type, version)(ctx, float_node, attrs)
        finally:
            ctx.version = own
        return y

    def requantized(ctx, node, y, scale, zero, axis=1):
        """``y`` quantized into the node's first output (uint8 where no zero point)."""
        dtype = ctx.type_of(zero).dtype if zero else "uint8"
        if zero:
            _check_quantized(ctx, zero, "the output zero point")
        ctx.emit("quantize_linear", [y, scale] + ([zero] if zero else []), node.output[:1],
                 axis=axis, dtype=dtype)

    def dequantized(ctx, node, at, what, axis=1):
        """Input ``at`` of ``node`` dequantized by the scale and zero point after it."""
        return _dequantized(ctx, node.input[at], node.input[at + 1], _input(node, at + 2),
                            axis, what)

    def binary(op_type):
        def convert(ctx, node, attrs):
            a = dequantized(ctx, node, 0, "A")
            b = dequantized(ctx, node, 3, "B")
            y = float_op(ctx, node, op_type, 14, [a, b], {})
            requantized(ctx, node, y, node.input[6], _input(node, 7))

        return convert

    def unary(op_type, version, kept=()):
        def convert(ctx, node, attrs):
            x = dequantized(ctx, node, 0, "X")
            y = float_op(ctx, node, op_type, version, [x],
                         {k: v for k, v in attrs.items() if k in kept})
            requantized(ctx, node, y, node.input[3], _input(node, 4))

        return convert

    def channels_first(ctx, attrs):
        if int(attrs.get("channels_last", 0)):
            ctx.fail("channels_last=1 (NHWC data) is not supported; allowed: 0")

    def global_average_pool(ctx, node, attrs):
        channels_first(ctx, attrs)
        unary("GlobalAveragePool", 1)(ctx, node, attrs)

    def average_pool(ctx, node, attrs):
        channels_first(ctx, attrs)
        unary("AveragePool", 19, ("auto_pad", "ceil_mode", "count_include_pad",
                                  "kernel_shape", "pads", "strides"))(ctx, node, attrs)

    def softmax(ctx, node, attrs):
        version = 13 if int(attrs.get("opset", 13)) >= 13 else 11
        default_axis = -1 if version == 13 else 1
        unary("Softmax", version, ("axis",))(ctx, node, {"axis": attrs.get("axis",
                                                                             default_axis)})

    def concat(ctx, node, attrs):
        if (len(node.input) - 2) % 3 or len(node.input) < 5:
            ctx.fail(f"takes Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples; "
                     f"got {len(node.input)} inputs")
        xs = [dequantized(ctx, node, at, f"input {k}")
              for k, at in enumerate(range(2, len(node.input), 3))]
        y = float_op(ctx, node, "Concat", 13, xs, {"axis": attrs["axis"]})
        requantized(ctx, node, y, node.input[0], _input(node, 1))

    def where(ctx, node, attrs):
        x = dequantized(ctx, node, 1, "X")
        y = dequantized(ctx, node, 4, "Y")
        out = float_op(ctx, node, "Where", 16, [node.input[0], x, y], {})
        requantized(ctx, node, out, node.input[7], _input(node, 8))

    def qgemm(ctx, node, attrs):
        trans_b = int(attrs.get("transB", 0))
        a = dequantized(ctx, node, 0, "A")
        # A per-column scale of B runs along its output axis.
        b = dequantized(ctx, node, 3, "B", axis=0 if trans_b else 1)
        alpha = float(attrs.get("alpha", 1.0))
        inputs = [a, b]
        bias = _input(node, 6)
        if bias is not None:
            _check_quantized(ctx, bias, "the bias C", ("int32",))
            scale = bias_scale(ctx, node.input[1], node.input[4], factor=alpha)
            inputs.append(ctx.emit("dequantize_linear", [bias, scale], axis=-1))
        y = float_op(ctx, node, "Gemm", 13, inputs,
                     {"alpha": alpha, "transA": int(attrs.get("transA", 0)),
                      "transB": trans_b})
        if _input(node, 7) is None:
            ctx.emit("identity", [y], node.output[:1])
        else:
            requantized(ctx, node, y, node.input[7], _input(node, 8), axis=-1)

    table = {
        "QLinearAdd": binary("Add"),
        "QLinearMul": binary("Mul"),
        "QGemm": qgemm,
        "QLinearGlobalAveragePool": global_average_pool,
        "QLinearAveragePool": average_pool,
        "QLinearConcat": concat,
        "QLinearLeakyRelu": unary("LeakyRelu", 16, ("alpha",)),
        "QLinearSigmoid": unary("Sigmoid", 13),
        "QLinearSoftmax": softmax,
        "QLinearWhere": where,
    }
    return {(CONTRIB_DOMAIN, op): fn for op, fn in table.items()}
