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
    defined = {o for n in kept for o in n.outputs} | live | set(graph.inputs)
    types = {k: t for k, t in graph.types.items() if k in defined}
    return graph.with_(nodes=tuple(reversed(kept)), consts=consts, types=types)
