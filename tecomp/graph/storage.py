"""Where the values of a built graph live: kernels write buffers, views alias them.

A built graph's nodes are kernel calls (``fused`` nodes) and *views*: a ``reshape`` left
alone by fusion computes nothing, its output is its input's bytes under another shape
(every value is C-contiguous). The memory plans (``GraphModule``'s and the C entry
point's) give a buffer only to values a kernel writes; a view lives in its source's
buffer (a graph input's, a constant's, or a kernel's), which therefore stays alive until
the last read of any view of it.
"""

from __future__ import annotations

from .ir import Graph, Node


def is_view(node: Node) -> bool:
    """Whether ``node`` of a built graph is a view rather than a kernel call."""
    return node.op == "reshape"


def view_sources(graph: Graph) -> dict:
    """View value -> the value whose bytes it is (a graph input, a constant or a kernel's
    output; chains of views followed)."""
    source: dict = {}
    for node in graph.nodes:
        if is_view(node):
            x = node.inputs[0]
            source[node.outputs[0]] = source.get(x, x)
    return source


def buffer_lifetimes(graph: Graph) -> dict:
    """Value a kernel writes -> (first, last) node index: from its kernel to the last node
    reading it or a view of it."""
    source = view_sources(graph)
    lifetimes: dict = {}
    for step, node in enumerate(graph.nodes):
        for i in node.inputs:
            root = source.get(i, i)
            if root in lifetimes:
                lifetimes[root] = (lifetimes[root][0], step)
        if not is_view(node):
            lifetimes[node.outputs[0]] = (step, step)
    return lifetimes
