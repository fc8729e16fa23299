"""Attention as one operator: ``softmax(scale * Q K^T + mask) V`` recognised in the form
the importer and legalization leave it, for targets with a fused ``attention``
implementation (CUDA's: no score matrix in memory, :mod:`tecomp.topi.cuda.attention`).

The form, each value read by the next node only::

    scores = batch_matmul(Q, K)            # K [B, D, Skv], or [B, Skv, D] transpose_b
    scores = divide(scores, c)             # or multiply by c (a scalar constant); optional
    scores = add(scores, mask)             # optional; the mask broadcasts to the scores
    scores = reshape(scores, ...)          # optional, as long as the last two axes stay
    probs = softmax(scores, axis=-1)
    probs = reshape(probs, [B, Sq, Skv])   # optional
    out = batch_matmul(probs, V)           # V [B, Skv, Dv]

becomes ``out = attention(Q, K, V[, mask], scale, k_transposed)``. Sizes other than the
batch must be constants, and the keys at most ``MAX_KEYS`` (the fused kernel keeps a
query row's scores in shared memory).
"""

from __future__ import annotations

import numpy as np

from ...topi.cuda.attention import MAX_KEYS
from .. import dims
from ..infer import infer_types
from ..ir import Graph, Node


def _scalar(graph: Graph, value: str):
    const = graph.consts.get(value)
    if const is None or np.size(const) != 1:
        return None
    return float(np.asarray(const).reshape(()))


class _Chain:
    """The nodes of one attention, walked back from its last product."""

    def __init__(self, graph: Graph, users: dict, producer: dict):
        self.graph, self.users, self.producer = graph, users, producer
        self.nodes: list = []

    def only_user(self, value: str, op) -> Node | None:
        """The node computing ``value`` if it is an ``op`` node (one of ``op`` where a
        tuple) whose output only the chain reads."""
        node = self.producer.get(value)
        ops = op if isinstance(op, tuple) else (op,)
        if node is None or node.op not in ops or len(self.users.get(value, ())) != 1 \
                or value in self.graph.outputs:
            return None
        self.nodes.append(node)
        return node


def _match(graph: Graph, final: Node, users: dict, producer: dict):
    """(nodes of the chain, the attention node) ending at ``final``, or None."""
    if final.op != "batch_matmul" or final.attrs.get("transpose_b"):
        return None
    chain = _Chain(graph, users, producer)
    probs = final.inputs[0]
    node = chain.only_user(probs, ("reshape", "softmax"))
    if node is not None and node.op == "reshape":
        node = chain.only_user(node.inputs[0], "softmax")
    if node is None or node.attrs.get("axis", -1) not in (-1, len(
            graph.types[node.outputs[0]].shape) - 1):
        return None
    value = node.inputs[0]
    step = chain.only_user(value, ("reshape", "add", "divide", "multiply", "batch_matmul"))
    if step is not None and step.op == "reshape":
        step = chain.only_user(step.inputs[0], ("add", "divide", "multiply", "batch_matmul"))
    mask = None
    if step is not None and step.op == "add":
        value, mask = step.inputs
        step = chain.only_user(value, ("divide", "multiply", "batch_matmul"))
    scale = 1.0
    if step is not None and step.op in ("divide", "multiply"):
        c = _scalar(graph, step.inputs[1])
        if c is None or (step.op == "divide" and c == 0):
            return None
        scale = 1.0 / c if step.op == "divide" else c
        step = chain.only_user(step.inputs[0], "batch_matmul")
    if step is None or step.op != "batch_matmul":
        return None
    q, k = step.inputs
    scores = graph.types[step.outputs[0]].shape
    if tuple(graph.types[probs].shape) != tuple(scores):
        return None
    v = final.inputs[1]
    sizes = [*scores[1:], graph.types[q].shape[2], graph.types[v].shape[2]]
    if not all(dims.is_static(d) for d in sizes) or int(scores[2]) > MAX_KEYS:
        return None
    if mask is not None and (len(graph.types[mask].shape) > 3 or not all(
            dims.equal(m, 1) or dims.equal(m, n)
            for m, n in zip(reversed(graph.types[mask].shape), reversed(scores)))):
        return None
    attrs = {"scale": scale, "k_transposed": not step.attrs.get("transpose_b", False)}
    inputs = (q, k, v) if mask is None else (q, k, v, mask)
    return chain.nodes, Node("attention", inputs, final.outputs, attrs, final.name)


def fuse_attention(graph: Graph) -> Graph:
    """``graph`` with every attention of the module docstring's form one ``attention``
    node; others are left as they are."""
    graph = infer_types(graph)
    users, producer = graph.consumers(), graph.producers()
    fused: dict = {}  # the last product of an attention -> (its nodes, the new node)
    for node in graph.nodes:
        found = _match(graph, node, users, producer)
        if found is not None:
            fused[id(node)] = found
    if not fused:
        return graph
    dropped = {id(n) for nodes, _ in fused.values() for n in nodes}
    nodes = [fused[id(n)][1] if id(n) in fused else n for n in graph.nodes
             if id(n) not in dropped]
    return infer_types(graph.with_(nodes=tuple(nodes)))
