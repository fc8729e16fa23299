"""Quantized products: a float ``conv2d``, ``dense`` or ``matmul`` on dequantized 8-bit
operands becomes the integer product of the 8-bit operands and a rescale.

This is the QDQ format that ``onnxruntime.quantization.quantize_static`` writes (and
what the ONNX importer makes of the operator format, QLinearConv, MatMulInteger, ...)::

    xq -> dequantize_linear(sx, zx) -.
                                      conv2d / dense / matmul -> (+ bias, relu) -> quantize_linear
    wq -> dequantize_linear(sw, zw) -'

Since ``(xq - zx) * sx * (wq - zw) * sw`` summed over the window is ``sx * sw`` times the
integer sum, the product becomes::

    qnn_conv2d / qnn_matmul(xq, wq, zx, zw) -> cast(float32) -> multiply(sx * sw) -> ...

``qnn_*`` accumulates exactly in int32; the rescale, the bias, the activation and the
requantize that follow are elementwise and fuse into its output loop, so the float
operator never runs on dequantized values. The scales must be constants, per tensor for
the data and per tensor or per output channel for the weight; zero points may be
computed (``DynamicQuantizeLinear``'s). ``conv2d`` is rewritten for ``groups = 1`` (a
depthwise or grouped convolution keeps its float form on the dequantized values).
A product of scale 1 cast back to int32 (ConvInteger, MatMulInteger) is the integer
product itself.

An ``add`` of dequantized values followed by ``quantize_linear`` (QLinearAdd's pattern)
needs no rewrite: it is elementwise, and fusion makes it one kernel reading the 8-bit
inputs and writing the 8-bit sum.
"""

from __future__ import annotations

import numpy as np

from .. import dims
from ..infer import infer_types
from ..ir import Graph, Node
from ...topi.qnn import weight_pairs_fit_int16
from .rewrite import replace_values

QUANTIZED = ("uint8", "int8")


def _operand(graph: Graph, producers: dict, value: str, channels: int | None, axis: int):
    """``(q, scale, zero)`` of a float operand computed as ``dequantize_linear(q, scale,
    zero)`` of an 8-bit ``q`` with a constant scale: per tensor, or (with ``channels``)
    ``channels`` values along ``axis`` of ``q``; ``scale`` is the float array (shape
    ``()`` or ``[channels]``) and ``zero`` the zero point's value name or None. None
    where ``value`` is not such an operand."""
    node = producers.get(value)
    if node is None or node.op != "dequantize_linear":
        return None
    q, scale = node.inputs[0], node.inputs[1]
    if graph.types[q].dtype not in QUANTIZED or scale not in graph.consts:
        return None
    s = np.asarray(graph.consts[scale])
    rank = len(graph.types[q].shape)
    per_axis = s.size > 1
    if per_axis and (channels is None or s.shape != (channels,) or rank == 0
                     or node.attrs.get("axis", 1) % rank != axis):
        return None
    zero = node.inputs[2] if len(node.inputs) > 2 else None
    if zero is not None and len(graph.types[zero].shape) == 1 and not per_axis and (
            graph.types[zero].shape[0] != 1):
        return None
    return q, (s if per_axis else s.reshape(())), zero


class _Emitter:
    """New nodes and constants for one rewritten node, named after its output."""

    def __init__(self, graph: Graph, node: Node):
        self.graph, self.node = graph, node
        self.nodes: list = []
        self.consts: dict = {}
        #: The int32 products (reshaped as the float result) the rescale reads.
        self.products: set = set()
        self._count = 0

    def fresh(self, hint: str) -> str:
        while True:
            self._count += 1
            name = f"{self.node.outputs[0]}.{hint}{self._count}"
            if name not in self.graph.types and name not in self.graph.consts:
                return name

    def emit(self, op: str, inputs, output=None, **attrs) -> str:
        output = output or self.fresh(op)
        self.nodes.append(Node(op, tuple(inputs), (output,), attrs, self.node.name))
        return output

    def const(self, array, hint: str) -> str:
        name = self.fresh(hint)
        self.consts[name] = np.ascontiguousarray(array)
        return name

    def zero(self, q: str, zero: str | None) -> str:
        """The zero point of ``q``: ``zero``, or a constant 0 of ``q``'s dtype."""
        if zero is not None:
            return zero
        return self.const(np.zeros((), self.dtype(q)), "zero")

    def weight_zero(self, zero: str | None, weight: str | None = None) -> list:
        """The weight's zero point as the product's last input: none where it is a
        constant 0 (symmetric weights), which the kernels then do not subtract, except
        for a ``weight`` that is not int8 (only int8 weights take the convolution's
        symmetric kernels)."""
        value = self.value(zero) if zero is not None else None
        symmetric = zero is None or (value is not None and not np.any(value))
        if symmetric and (weight is None or self.dtype(weight) == "int8"):
            return []
        return [zero if zero is not None else self.zero(weight, None)]

    def value(self, name: str):
        """The array of constant ``name`` (one of the graph's or a new one), or None."""
        return self.consts.get(name, self.graph.consts.get(name))

    def dtype(self, name: str) -> str:
        value = self.consts.get(name)
        return str(value.dtype) if value is not None else self.graph.types[name].dtype

    def signed_weight(self, q: str, zero: str | None) -> tuple:
        """``(q, zero)`` of a constant uint8 weight as int8 (``q - 128`` and ``zero -
        128``, the same real values), so that a symmetric uint8 weight (zero point 128)
        takes the symmetric int8 kernels; other weights are returned as they are."""
        value = self.value(q)
        if (value is None or value.dtype != np.uint8
                or (zero is not None and self.value(zero) is None)):
            return q, zero
        shift = np.int16(128)
        w = (value.astype(np.int16) - shift).astype(np.int8)
        z = np.asarray(self.value(zero)) if zero is not None else np.zeros((), "uint8")
        return (self.const(w, "weight"),
                self.const((z.astype(np.int16) - shift).astype(np.int8), "weight_zero"))

    def pairs_fit(self, q: str, as_oihw=lambda w: w) -> dict:
        """``{"pairs_fit_int16": ...}`` for a constant int8 weight ``q`` (viewed as an
        OIHW kernel by ``as_oihw``), which :func:`weight_pairs_fit_int16` checks; empty
        for another weight."""
        weight = self.value(q)
        if weight is None or weight.dtype != np.int8:
            return {}
        return {"pairs_fit_int16": weight_pairs_fit_int16(as_oihw(np.asarray(weight)))}

    def rescale(self, acc: str, scale: np.ndarray, shape: tuple, output: str | None) -> str:
        """``cast(acc, float) * scale`` (``scale`` reshaped to ``shape``); the multiply
        is left out where every scale is 1."""
        dtype = self.graph.types[self.node.outputs[0]].dtype
        self.products.add(acc)
        if np.all(scale == 1):
            return self.emit("cast", [acc], output, dtype=dtype)
        value = self.emit("cast", [acc], dtype=dtype)
        return self.emit("multiply", [value, self.const(scale.astype(dtype).reshape(shape),
                                                        "scale")], output)


def _conv2d(graph: Graph, producers: dict, node: Node, em: _Emitter) -> bool:
    if node.attrs.get("groups", 1) != 1:
        return False
    x, w = node.inputs
    channels = graph.types[w].shape[0]
    xo = _operand(graph, producers, x, None, 1)
    wo = _operand(graph, producers, w, channels, 0)
    if xo is None or wo is None:
        return False
    (xq, sx, zx), (wq, sw, zw) = xo, wo
    wq, zw = em.signed_weight(wq, zw)
    attrs = {k: v for k, v in node.attrs.items() if k != "groups"} | em.pairs_fit(wq)
    acc = em.emit("qnn_conv2d", [xq, wq, em.zero(xq, zx), *em.weight_zero(zw, wq)], **attrs)
    scale = sx * sw
    em.rescale(acc, scale, (-1, 1, 1) if scale.ndim else (), node.outputs[0])
    return True


def _product(graph: Graph, producers: dict, node: Node, em: _Emitter) -> bool:
    """``dense(X, W[M, K])`` or ``matmul(A[..., K], B[K, M])`` on dequantized operands."""
    a, b = node.inputs
    sa, sb = graph.types[a].shape, graph.types[b].shape
    if len(sa) < 2 or len(sb) != 2:
        return False
    ao = _operand(graph, producers, a, None, 0)
    if ao is None:
        return False
    aq, s_a, za = ao
    if node.op == "dense":
        # W[M, K] is B transposed: dequantized itself (per-channel along M, axis 0), or
        # the transpose of a dequantized B[K, M] (the Gemm converter's, transB=0).
        bo = _operand(graph, producers, b, sb[0], 0)
        if bo is not None:
            w = em.value(bo[0])
            bq = (em.const(w.T, "weight") if w is not None
                  else em.emit("transpose", [bo[0]], perm=(1, 0)))
        else:
            t = producers.get(b)
            if t is None or t.op != "transpose" or tuple(t.attrs.get("perm") or (1, 0)) != (
                    1, 0):
                return False
            bo = _operand(graph, producers, t.inputs[0], sb[0], 1)
            if bo is None:
                return False
            bq = bo[0]
    else:
        bo = _operand(graph, producers, b, sb[1], 1)
        if bo is None:
            return False
        bq = bo[0]
    _, s_b, zb = bo
    bq, zb = em.signed_weight(bq, zb)
    rows = aq
    if len(sa) > 2:
        rows = em.emit("reshape", [aq], newshape=(dims.product(sa[:-1]), sa[-1]))
    # B[K, M]: its columns are the output channels, k the input channels.
    attrs = em.pairs_fit(bq, lambda w: w.T[:, :, None, None])
    acc = em.emit("qnn_matmul", [rows, bq, em.zero(aq, za), *em.weight_zero(zb, bq)], **attrs)
    out = node.outputs[0]
    if len(sa) > 2:
        # Reshaped back before the rescale (sink_reshapes moves it below the epilogue).
        acc = em.emit("reshape", [acc], newshape=tuple(graph.types[out].shape))
    em.rescale(acc, s_a * s_b, (-1,) if s_b.ndim else (), out)
    return True


_REWRITES = {"conv2d": _conv2d, "dense": _product, "matmul": _product}


def _integer_results(graph: Graph, products: set) -> dict:
    """``cast(cast(product, float), int32)`` -> the int32 ``product``: the value mapping
    that drops the round trip a scale of 1 leaves (ConvInteger, MatMulInteger), whose
    float value the operator defines as exact."""
    producers = graph.producers()
    mapping = {}
    for node in graph.nodes:
        inner = producers.get(node.inputs[0]) if node.inputs else None
        if (node.op == "cast" and node.attrs["dtype"] == "int32" and inner is not None
                and inner.op == "cast" and inner.inputs[0] in products):
            mapping[node.outputs[0]] = inner.inputs[0]
    return mapping


def dequantized_constant(graph: Graph, node: Node) -> np.ndarray:
    """The value of ``dequantize_linear`` on constants (ONNX: ``(x - zero) * scale``)."""
    x, scale, *zero = (np.asarray(graph.consts[i]) for i in node.inputs)
    if scale.size > 1:
        shape = [1] * x.ndim
        shape[node.attrs.get("axis", 1) % x.ndim] = -1
        scale = scale.reshape(shape)
        zero = [z.reshape(shape) for z in zero]
    shifted = x.astype(np.int64) - (zero[0].astype(np.int64) if zero else 0)
    return (shifted.astype(scale.dtype) * scale.reshape(scale.shape if scale.size > 1
                                                         else ())).astype(scale.dtype)


def lower_quantized_ops(graph: Graph) -> Graph:
    """``graph`` with each product on dequantized 8-bit operands computed on the 8-bit
    operands with int32 accumulation (see the module text). A dequantization of
    constants that stays read (a bias quantized to int32) becomes a float constant; those
    no longer read are left to dead-code elimination."""
    graph = infer_types(graph)
    producers = graph.producers()
    nodes, consts, products = [], dict(graph.consts), set()
    changed = False
    for node in graph.nodes:
        rewrite = _REWRITES.get(node.op)
        em = _Emitter(graph, node)
        if rewrite is not None and rewrite(graph, producers, node, em):
            nodes.extend(em.nodes)
            consts.update(em.consts)
            products |= em.products
            changed = True
        else:
            nodes.append(node)
    if not changed:
        return graph
    graph = infer_types(graph.with_(nodes=tuple(nodes), consts=consts))
    read = {i for n in graph.nodes for i in n.inputs} | set(graph.outputs)
    # Only 8-bit and int32 data per tensor or per axis: other dequantizations of
    # constants (float8, 4-bit, blocked scales) stay their kernels.
    folded = {n.outputs[0]: dequantized_constant(graph, n) for n in graph.nodes
              if n.op == "dequantize_linear" and n.outputs[0] in read
              and all(i in graph.consts for i in n.inputs)
              and graph.types[n.inputs[0]].dtype in QUANTIZED + ("int32",)
              and not n.attrs.get("block_size")}
    if folded:
        graph = infer_types(graph.with_(
            nodes=tuple(n for n in graph.nodes if n.outputs[0] not in folded),
            consts={**graph.consts, **folded}))
    mapping = _integer_results(graph, products)
    if not mapping:
        return graph
    return replace_values(graph, [n for n in graph.nodes if n.outputs[0] not in mapping],
                          mapping)
