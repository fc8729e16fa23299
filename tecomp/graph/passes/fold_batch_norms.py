"""BatchNorm folded into the preceding conv (``fold_batch_norms``); identities removed and
reshape chains collapsed (``tidy_reshapes``)."""

from __future__ import annotations

import numpy as np

from .. import dims
from ..infer import infer_types
from ..ir import Graph, Node
from .rewrite import replace_values, replaceable


def _remove_identities(graph: Graph) -> Graph:
    """Identity nodes (ONNX Identity, inference Dropout, a reshape to the same shape, a
    cast to the type it reads: exporters write ``softmax(x).to(x.dtype)``) read through;
    one that forwards an input or constant straight to an output stays."""
    mapping, nodes = {}, []
    for node in graph.nodes:
        src = node.inputs[0] if node.inputs else None
        same_shape = node.op == "reshape" and dims.same_shape(
            graph.types[src].shape, graph.types[node.outputs[0]].shape)
        same_type = node.op == "cast" and node.attrs["dtype"] == graph.types[src].dtype
        # Through the identities removed before it: y = id(id(x)) of an input x is an
        # output forwarding an input, which stays.
        if (node.op == "identity" or same_shape or same_type) and replaceable(
                graph, node.outputs[0], mapping.get(src, src)):
            mapping[node.outputs[0]] = mapping.get(src, src)
        else:
            nodes.append(node)
    return replace_values(graph, nodes, mapping) if mapping else graph


def _collapse_reshapes(graph: Graph) -> Graph:
    """``reshape(reshape(x))`` -> ``reshape(x)`` (the inner one goes once nothing else
    reads it)."""
    producers, nodes = {}, []
    for node in graph.nodes:
        inner = producers.get(node.inputs[0]) if node.inputs else None
        if node.op == "reshape" and inner is not None and inner.op == "reshape":
            node = node.with_(inputs=inner.inputs)
        nodes.append(node)
        producers.update((o, node) for o in node.outputs)
    return infer_types(graph.with_(nodes=tuple(nodes)))


def _bn_scale_shift(graph, node):
    gamma, beta, mean, var = (graph.consts[i] for i in node.inputs[1:5])
    scale = gamma / np.sqrt(var + node.attrs.get("epsilon", 1e-5))
    return scale.astype(gamma.dtype), (beta - mean * scale).astype(gamma.dtype)


def _fold_batch_norms(graph: Graph) -> Graph:
    """``batch_norm`` with constant statistics becomes a per-channel scale and shift; after
    a ``conv2d`` with a constant weight (and optionally a constant bias ``add``) that is
    read by nothing else, the scale goes into the weight and the shift into the bias, so
    the convolution's epilogue is all that is left of it."""
    producers, consumers = graph.producers(), graph.consumers()
    consts = dict(graph.consts)
    drop, nodes = set(), []

    def single_use(value):
        return len(consumers.get(value, ())) == 1 and value not in graph.outputs

    def fresh(hint):
        n = 0
        while f"{hint}.{n}" in consts or f"{hint}.{n}" in graph.types:
            n += 1
        return f"{hint}.{n}"

    rewritten = {}
    for node in graph.nodes:
        if node.op != "batch_norm" or not all(i in consts for i in node.inputs[1:5]):
            continue
        scale, shift = _bn_scale_shift(graph, node)
        x = node.inputs[0]
        rank = len(graph.types[x].shape)
        bshape = (-1,) + (1,) * (rank - 2)
        src, bias_node = producers.get(x), None
        if src is not None and src.op == "add" and single_use(x):
            b = src.inputs[1]
            inner = producers.get(src.inputs[0])
            if b in consts and inner is not None and inner.op == "conv2d" and single_use(
                    src.inputs[0]):
                bias_node, src = src, inner
        if src is not None and src.op == "conv2d" and src.inputs[1] in consts and (
                bias_node is not None or single_use(x)):
            w = fresh(f"{src.inputs[1]}.bn")
            consts[w] = (consts[src.inputs[1]] * scale.reshape(-1, 1, 1, 1)).astype(scale.dtype)
            bias = shift
            if bias_node is not None:
                bias = (consts[bias_node.inputs[1]].reshape(-1) * scale + shift).astype(
                    scale.dtype)
                drop.add(id(bias_node))
            b = fresh(f"{node.outputs[0]}.bias")
            consts[b] = bias.reshape(bshape)
            rewritten[id(src)] = [src.with_(inputs=(src.inputs[0], w)),
                                  Node("add", (src.outputs[0], b), node.outputs, {}, node.name)]
            drop.add(id(node))
            continue
        s, t = fresh(f"{node.outputs[0]}.scale"), fresh(f"{node.outputs[0]}.shift")
        consts[s], consts[t] = scale.reshape(bshape), shift.reshape(bshape)
        scaled = f"{node.outputs[0]}.scaled"
        rewritten[id(node)] = [Node("multiply", (x, s), (scaled,), {}, node.name),
                               Node("add", (scaled, t), node.outputs, {}, node.name)]
    if not rewritten:
        return graph
    for node in graph.nodes:
        if id(node) in rewritten:
            nodes.extend(rewritten[id(node)])
        elif id(node) not in drop:
            nodes.append(node)
    return infer_types(graph.with_(nodes=tuple(nodes), consts=consts))


def tidy_reshapes(graph: Graph) -> Graph:
    """``graph`` with identity/dropout and no-op reshapes removed and reshape chains
    collapsed."""
    # Identities first so reshape chains through them are seen; collapsing can leave
    # reshapes back to the original shape, which the second round removes.
    graph = _collapse_reshapes(_remove_identities(graph))
    return _remove_identities(graph)


def fold_batch_norms(graph: Graph) -> Graph:
    """``graph`` with each inference BatchNorm of constant statistics folded into the conv
    before it (its weight and bias), or else turned into a scale and a shift."""
    return _fold_batch_norms(infer_types(graph))
