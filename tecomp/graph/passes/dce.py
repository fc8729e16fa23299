"""Dead-code elimination."""

from __future__ import annotations

from ..ir import Graph


def eliminate_dead_code(graph: Graph) -> Graph:
    """``graph`` without the nodes and constants no output depends on."""
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if any(o in live for o in node.outputs):
            kept.append(node)
            live.update(i for i in node.inputs if i)
    consts = {k: v for k, v in graph.consts.items() if k in live}
    types = {k: t for k, t in graph.types.items()
             if k in live or k in graph.inputs or any(k in n.outputs for n in kept)}
    return graph.with_(nodes=tuple(reversed(kept)), consts=consts, types=types)
