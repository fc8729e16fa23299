"""Common-subexpression elimination."""

from __future__ import annotations

from ..ir import Graph, attrs_text
from .rewrite import replace_values, replaceable


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    """``graph`` where nodes that call the same operator with the same attributes on the
    same inputs are computed once (later copies read the first one's outputs)."""
    seen: dict = {}
    mapping: dict = {}
    nodes = []
    for node in graph.nodes:
        inputs = tuple(mapping.get(i, i) for i in node.inputs)
        key = (node.op, inputs, attrs_text(node.attrs))
        first = seen.get(key)
        if first is not None and all(replaceable(graph, o, f)
                                     for o, f in zip(node.outputs, first.outputs)):
            mapping.update(zip(node.outputs, first.outputs))
            continue
        seen.setdefault(key, node)
        nodes.append(node)
    if not mapping:
        return graph
    return replace_values(graph, nodes, mapping)
