"""Attention as one operator: ``softmax(scale * Q K^T + mask) V`` recognised in the form
the importer and legalization leave it, for targets with a fused ``attention``
implementation (CUDA's: no score matrix in memory, :mod:`tecomp.topi.cuda.attention`).

The form, each value read by the next node only::

    scores = batch_matmul(Q, K)            # K [B, D, Skv], or [B, Skv, D] transpose_b
    scores = divide(scores, c)             # or multiply by c (a scalar constant)
    scores = add(scores, mask)             # the mask broadcasts to the scores
    scores = reshape(scores, ...)          # keeping the last two axes
    probs = softmax(scores, axis=-1)
    probs = reshape(probs, [B, Sq, Skv])   # optional
    out = batch_matmul(probs, V)           # V [B, Skv, Dv]

(the scaling, the mask and the reshapes optional and in any order; the rows of the
probabilities that allow no key may be set to zeros after the softmax, as torch's
exporter and ONNX ``Attention``'s import write it, see ``_row_guard``) becomes ``out =
attention(Q, K, V[, mask], scale, k_transposed, mask_heads, zero_empty_rows)``. A mask
added to a ``[B, H, Sq, Skv]`` value is read as its last two axes where it is the same
for every batch and head, and per batch (``mask_heads = H``) where it is the same for
every head.
The head sizes (``D``, ``Dv``) must be constants; the sequence lengths and the batch may
be symbolic, and the keys any number (the fused kernel walks them a tile at a time).
"""

from __future__ import annotations

import numpy as np

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
    reshaped = chain.only_user(probs, "reshape")
    value = probs if reshaped is None else reshaped.inputs[0]
    guarded = _row_guard(graph, chain, value)
    if guarded is None:
        node = chain.only_user(value, "softmax")
    else:  # read by the guard (and its test), in the chain
        node = producer.get(guarded[0])
        if node is None or node.op != "softmax":
            return None
        chain.nodes.append(node)
    if node is None or node.attrs.get("axis", -1) not in (-1, len(
            graph.types[node.outputs[0]].shape) - 1):
        return None
    value, mask, scale, added_to = node.inputs[0], None, 1.0, None
    seen: set = set()
    while True:  # back through the reshapes, the mask's add and the scaling
        step = chain.only_user(value, ("reshape", "add", "divide", "multiply",
                                       "batch_matmul"))
        if step is None or step.op == "batch_matmul":
            break
        if step.op in seen - {"reshape"} or (step.op in ("divide", "multiply")
                                             and seen & {"divide", "multiply"}):
            return None
        seen.add(step.op)
        if step.op == "add":  # the scores are the operand of the sum's own shape
            value, mask = step.inputs
            if not dims.same_shape(graph.types[value].shape, graph.types[step.outputs[0]].shape):
                mask, value = step.inputs
            added_to = graph.types[value].shape
        elif step.op == "reshape":
            value = step.inputs[0]
            if not dims.same_shape(graph.types[value].shape[-2:],
                               graph.types[step.outputs[0]].shape[-2:]):
                return None
        else:
            value, c = step.inputs[0], _scalar(graph, step.inputs[1])
            if c is None and step.op == "multiply":  # the constant first
                c, value = _scalar(graph, step.inputs[0]), step.inputs[1]
            if c is None or (step.op == "divide" and c == 0):
                return None
            scale = scale / c if step.op == "divide" else scale * c
    if step is None or step.op != "batch_matmul":
        return None
    q, k = step.inputs
    scores = graph.types[step.outputs[0]].shape
    if not dims.same_shape(graph.types[probs].shape, scores):
        return None
    v = final.inputs[1]
    if not all(dims.is_static(d) for d in (graph.types[q].shape[2], graph.types[v].shape[2])):
        return None
    extra, attrs = [], {"scale": scale, "k_transposed": not step.attrs.get("transpose_b",
                                                                           False)}
    if guarded is not None:
        if guarded[1] is not None and guarded[1] != mask:  # zeroes rows of another bias
            return None
        attrs["zero_empty_rows"] = True
    if mask is not None:
        mask, extra, heads = _mask_of_scores(graph, mask, added_to, scores, final.name)
        if mask is None:
            return None
        if heads != 1:
            attrs["mask_heads"] = heads
    inputs = (q, k, v) if mask is None else (q, k, v, mask)
    return chain.nodes, [*extra, Node("attention", inputs, final.outputs, attrs, final.name)]


def _row_guard(graph: Graph, chain: _Chain, value: str):
    """``(probabilities, bias)`` for ``value``, the probabilities with the rows that allow
    no key set to zeros, or None. Two forms, each joining the chain:

    - ``where(isnan(p), 0, p)``, as torch's exporter writes after the softmax of a masked
      attention (``bias`` None: any NaN row);
    - ``where(equal(reduce_max(bias, -1), -inf), 0, p)``, as ONNX ``Attention`` is
      imported (the rows whose every key the bias added to the scores masks).

    The fused kernel gives zeros for a row whose exponentials sum to 0: the same rows for
    finite queries and keys. The nodes are taken into the chain as they match (a chain
    that fails to match is dropped whole)."""
    guard = chain.only_user(value, "where")
    if guard is None:
        return None
    test, zero, probs = guard.inputs
    check = chain.only_user(test, ("isnan", "equal"))
    if check is None or _scalar(graph, zero) != 0.0 or probs in graph.outputs:
        return None
    readers = {id(n) for n in chain.users.get(probs, ())}
    if check.op == "isnan":
        match = check.inputs[0] == probs and readers == {id(guard), id(check)}
        return (probs, None) if match else None
    bounds = [_scalar(graph, x) for x in check.inputs]
    if readers != {id(guard)} or -np.inf not in bounds:
        return None
    top = chain.only_user(check.inputs[1 - bounds.index(-np.inf)], "reduce_max")
    if top is None or not top.attrs.get("keepdims", 1):
        return None
    bias = top.inputs[0]
    if tuple(top.attrs.get("axes", ())) not in ((-1,), (len(graph.types[bias].shape) - 1,)):
        return None
    return probs, bias


def _mask_of_scores(graph: Graph, mask: str, added_to, scores, name: str):
    """(the mask as the attention reads it, the nodes that make it, the heads that share
    each of its batches) for a mask added to a value of shape ``added_to`` whose last two
    axes are the scores' (``[B, Sq, Skv]``):

    - as it is where it broadcasts to the scores;
    - its last two axes alone where its leading ones are all 1 (a mask over a ``[B, H,
      Sq, Skv]`` value the same for every batch and head);
    - ``[B, Sq or 1, Skv or 1]`` read at batch ``b // H`` where it is ``[B, 1, Sq or 1,
      Skv or 1]`` over a ``[B, H, Sq, Skv]`` value (a padding mask per sequence, the same
      for every head: BERT's, with a batch that may be symbolic);

    (None, [], 1) otherwise."""
    shape = tuple(graph.types[mask].shape)
    if len(added_to) == len(scores) and dims.broadcasts_to(shape, scores):
        return mask, [], 1
    lead, last = shape[:-2], shape[-2:]
    if not dims.broadcasts_to(last, scores[1:]):
        return None, [], 1
    out = f"{mask}.as_scores_{name}"
    if all(dims.is_static(d) and int(d) == 1 for d in lead):
        return out, [Node("reshape", (mask,), (out,), {"newshape": last}, name)], 1
    if len(added_to) == 4 == len(shape) and dims.is_static(added_to[1]) and dims.equal(
            shape[1], 1) and dims.equal(shape[0], added_to[0]):
        newshape = (shape[0], *last)
        return out, [Node("reshape", (mask,), (out,), {"newshape": newshape}, name)], int(
            added_to[1])
    return None, [], 1


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
    nodes = [m for n in graph.nodes if id(n) not in dropped
             for m in (fused[id(n)][1] if id(n) in fused else [n])]
    return infer_types(graph.with_(nodes=tuple(nodes)))
