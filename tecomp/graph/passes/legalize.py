"""Legalization: graph operators with ONNX's wider semantics rewritten into the forms the
operator library implements.

``matmul`` in a graph follows ONNX MatMul (any rank, batch dimensions broadcast); the
library has ``dense`` (``X[N, K] @ W[M, K]^T``, weight packed once when constant),
``matmul`` (2-D) and ``batch_matmul`` (3-D, equal batches). So:

- ``A[..., K] @ B[K, M]`` with a constant ``B`` becomes ``dense`` on ``A`` reshaped to
  ``[prod(...), K]`` with the transposed weight (folded later), reshaped back;
- the same with a computed ``B`` becomes a 2-D ``matmul`` between the reshapes;
- ``A[b..., N, K] @ B[b..., K, M]`` with equal batch dimensions becomes ``batch_matmul``
  on ``[prod(b...), N, K]`` and ``[prod(b...), K, M]``;
- where ``B`` is a computed ``transpose`` of ``X``'s last two axes (attention's
  ``Q @ K^T``), the product reads ``X``: ``batch_matmul`` with ``transpose_b``, or a
  ``dense`` with the computed weight ``X``. Its packed copy of ``X`` is the transpose,
  so the transpose kernel and the product's copy of its output become one copy.

A 1-D operand is first made a matrix (``[1, K]`` or ``[K, 1]``) and the result reshaped
back. Other batch broadcasts are left as they are (the build reports them). A cast from
float64 to float16 goes through float32, which the code generator can convert.

A float ``power`` by a constant 2 or 3 (one value, not widening the base) becomes
multiplications, as ONNX Runtime computes it: GPT-2's tanh GELU cubes every activation of
its feed-forward layer, and the general power runs in double through exp2 and log2.

A 2-D ``conv_transpose`` with a constant weight becomes a ``conv2d`` of its stride's
phases and a pixel shuffle (:mod:`.transposed_convolutions`).
"""

from __future__ import annotations

from .. import dims
from ..infer import infer_types
from ..ir import Graph, Node, value_namer
from .transposed_convolutions import rewrite_transposed_convolution


def _names(graph: Graph, node: Node):
    fresh = value_namer(graph)
    return lambda hint: fresh(f"{node.outputs[0]}.{hint}")


def _untransposed(graph: Graph, producers: dict, b: str) -> str | None:
    """``X`` where ``b`` is ``transpose(X)`` of its last two axes alone and ``X``'s last
    axis (the product's K) is static: the product can read ``X`` in place of ``b``."""
    p = producers.get(b)
    if p is None or p.op != "transpose":
        return None
    n = len(p.attrs["perm"])
    if tuple(p.attrs["perm"]) != (*range(n - 2), n - 1, n - 2):
        return None
    x = p.inputs[0]
    return x if dims.is_static(graph.types[x].shape[-1]) else None


def _legalize_matmul(graph: Graph, node: Node, producers: dict) -> list:
    a, b = node.inputs
    sa, sb = graph.types[a].shape, graph.types[b].shape
    out = node.outputs[0]
    out_shape = graph.types[out].shape
    fresh = _names(graph, node)
    # A right operand that is a transpose of its last two axes (attention's keys) is read
    # in place by a product that takes it transposed.
    bt = None if b in graph.consts else _untransposed(graph, producers, b)

    def emit(op, inputs, output=None, **attrs):
        return Node(op, inputs, (output or fresh(op),), attrs, node.name)

    if len(sb) == 2 and len(sa) >= 2:
        rows = dims.product(sa[:-1])
        steps = []
        a2 = a
        if len(sa) > 2:
            steps.append(emit("reshape", (a,), newshape=(rows, sa[-1])))
            a2 = steps[-1].outputs[0]
        if b in graph.consts:
            steps.append(emit("transpose", (b,), perm=(1, 0)))
            product = emit("dense", (a2, steps[-1].outputs[0]),
                           out if len(sa) == 2 else None, units=sb[1])
        elif bt is not None:
            product = emit("dense", (a2, bt), out if len(sa) == 2 else None, units=sb[1])
        elif len(sa) == 2:
            return [node]
        else:
            product = emit("matmul", (a2, b))
        steps.append(product)
        if len(sa) > 2:
            steps.append(emit("reshape", product.outputs, out, newshape=tuple(out_shape)))
        return steps
    if len(sa) >= 3 and len(sa) == len(sb) and all(
            dims.equal(x, y) for x, y in zip(sa[:-2], sb[:-2])):
        transposed = {"transpose_b": True} if bt is not None else {}
        if len(sa) == 3:
            return [node.with_(op="batch_matmul", inputs=(a, bt or b),
                               attrs={**node.attrs, **transposed})]
        batch = dims.product(sa[:-2])
        ra = emit("reshape", (a,), newshape=(batch,) + tuple(sa[-2:]))
        rb = emit("reshape", (bt or b,),
                  newshape=(batch,) + tuple(sb[-2:][::-1] if bt else sb[-2:]))
        product = emit("batch_matmul", (ra.outputs[0], rb.outputs[0]), **transposed)
        back = emit("reshape", product.outputs, out, newshape=tuple(out_shape))
        return [ra, rb, product, back]
    return [node]


def _promote_vector_operands(graph: Graph, node: Node) -> list:
    """A matmul with a 1-D operand as one between matrices (``[K]`` as ``[1, K]`` on the
    left, ``[K, 1]`` on the right), reshaped back to the 1-D result's shape."""
    a, b = node.inputs
    sa, sb = graph.types[a].shape, graph.types[b].shape
    if len(sa) > 1 and len(sb) > 1:
        return [node]
    fresh = _names(graph, node)
    steps = []
    if len(sa) == 1:
        steps.append(Node("reshape", (a,), (fresh("reshape"),), {"newshape": (1, sa[0])},
                          node.name))
        a = steps[-1].outputs[0]
    if len(sb) == 1:
        steps.append(Node("reshape", (b,), (fresh("reshape"),), {"newshape": (sb[0], 1)},
                          node.name))
        b = steps[-1].outputs[0]
    product = fresh("matmul")
    out = node.outputs[0]
    steps.append(node.with_(inputs=(a, b), outputs=(product,)))
    steps.append(Node("reshape", (product,), (out,),
                      {"newshape": tuple(graph.types[out].shape)}, node.name))
    return steps


def _legalize_cast(graph: Graph, node: Node) -> list:
    """float64 -> float16 as float64 -> float32 -> float16: the code generator has no
    direct conversion (LLVM would call a runtime routine that is not linked in)."""
    src = graph.types[node.inputs[0]].dtype
    if src != "float64" or node.attrs["dtype"] != "float16":
        return [node]
    mid = _names(graph, node)("cast")
    return [node.with_(outputs=(mid,), attrs={"dtype": "float32"}),
            node.with_(inputs=(mid,))]


def _power_by_small_integer(graph: Graph, node: Node) -> list:
    """``x ** 2`` as ``x * x`` and ``x ** 3`` as ``(x * x) * x`` for a float ``x`` and a
    constant exponent of one value whose shape does not widen ``x``'s."""
    x, e = node.inputs
    out = node.outputs[0]
    if (e not in graph.consts or graph.consts[e].size != 1
            or not graph.types[x].dtype.startswith(("float", "bfloat"))
            or tuple(graph.types[out].shape) != tuple(graph.types[x].shape)):
        return [node]
    n = float(graph.consts[e].reshape(()))
    if n not in (2.0, 3.0):
        return [node]
    if n == 2.0:
        return [Node("multiply", (x, x), (out,), {}, node.name)]
    square = _names(graph, node)("square")
    return [Node("multiply", (x, x), (square,), {}, node.name),
            Node("multiply", (square, x), (out,), {}, node.name)]


def legalize_for_library(graph: Graph) -> Graph:
    """``graph`` with every ``matmul`` in a form the operator library implements, and
    casts, powers and transposed convolutions rewritten as the module text says."""
    graph = infer_types(graph)
    nodes, consts = [], dict(graph.consts)
    for node in graph.nodes:
        if node.op == "conv_transpose":
            nodes.extend(rewrite_transposed_convolution(graph, node, consts))
        elif node.op == "matmul":
            nodes.extend(_promote_vector_operands(graph, node))
        elif node.op == "cast":
            nodes.extend(_legalize_cast(graph, node))
        elif node.op == "power":
            nodes.extend(_power_by_small_integer(graph, node))
        else:
            nodes.append(node)
    graph = infer_types(graph.with_(nodes=tuple(nodes), consts=consts))
    nodes = []
    producers = {o: n for n in graph.nodes for o in n.outputs}
    for node in graph.nodes:
        nodes.extend(_legalize_matmul(graph, node, producers) if node.op == "matmul"
                     else [node])
    return infer_types(graph.with_(nodes=tuple(nodes)))
