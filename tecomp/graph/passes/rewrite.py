"""Editing helpers the graph passes share: replacing a value by another everywhere."""

from __future__ import annotations

from ..infer import infer_types
from ..ir import Graph


def replace_values(graph: Graph, nodes, mapping: dict) -> Graph:
    """``graph`` with ``nodes`` as its node list and every read of a value ``v`` in
    ``mapping`` reading ``mapping[v]`` instead (chains followed).

    A graph output keeps its name: where an output ``y`` is replaced by ``x`` and ``x`` is
    computed by a node, that node's output is renamed to ``y`` instead. So ``mapping`` may
    replace an output only by a node's output that is not an output itself
    (:func:`replaceable`). Types are re-inferred.
    """

    def resolve(v):
        seen = set()
        while v in mapping and v not in seen:
            seen.add(v)
            v = mapping[v]
        return v

    rename = {}
    for y in graph.outputs:
        x = resolve(y)
        if x != y:
            rename[x] = y
    nodes = [n.with_(inputs=tuple(rename.get(resolve(i), resolve(i)) for i in n.inputs),
                     outputs=tuple(rename.get(o, o) for o in n.outputs)) for n in nodes]
    return infer_types(graph.with_(nodes=tuple(nodes)))


def replaceable(graph: Graph, old: str, new: str) -> bool:
    """Whether :func:`replace_values` can replace value ``old`` by ``new``."""
    if old not in graph.outputs:
        return True
    return new not in graph.outputs and new not in graph.inputs and new not in graph.consts
