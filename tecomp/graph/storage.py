"""Where the values of a built graph live: kernels write buffers, views alias them.

A built graph's nodes are kernel calls (``fused`` nodes) and *views*, which compute
nothing:

- a ``reshape`` left alone by fusion: its output is its input's bytes under another shape
  (every value is C-contiguous);
- a ``concat_view`` (:data:`CONCAT_VIEW`, placed by
  :func:`tecomp.graph.passes.concat_in_place.concatenate_in_place`): a concatenation whose
  inputs the kernels computing them write straight into their slices of its output, at
  the byte offsets of its ``offsets`` attribute.

Each value has a *home*: the buffer it lives in (its *root*) and its byte offset there
(:func:`value_homes`). The memory plans (``GraphModule``'s and the C entry point's) give a
buffer only to roots: values a kernel writes that live nowhere else, and the outputs of
concat views. A root stays alive from the first write of any value homed in it to the
last read of any of them.

The constants of a built graph live in one buffer too (:func:`pack_constants`), laid out
in the order a run first reads them.
"""

from __future__ import annotations

import numpy as np

from ..runtime import aligned
from ..runtime.aligned import ALIGNMENT
from .ir import Graph, Node


#: The op of a concatenation computed in place: its inputs live in its output's buffer.
CONCAT_VIEW = "concat_view"


def is_view(node: Node) -> bool:
    """Whether ``node`` of a built graph is a view rather than a kernel call."""
    return node.op in ("reshape", CONCAT_VIEW)


def value_homes(graph: Graph) -> dict:
    """Value -> ``(root, byte offset)`` for each value that lives in another value's bytes:
    the output of a reshape (in its input's home) and each input of a concat view (in its
    output's home, at its offset); chains of views followed to the root, a graph input,
    a constant or a buffer of the plan."""
    parent: dict = {}
    for node in graph.nodes:
        if node.op == "reshape":
            parent[node.outputs[0]] = (node.inputs[0], 0)
        elif node.op == CONCAT_VIEW:
            for value, offset in zip(node.inputs, node.attrs["offsets"]):
                parent[value] = (node.outputs[0], offset)
    homes: dict = {}

    def home(value):
        if value not in parent:
            return value, 0
        if value not in homes:
            up, offset = parent[value]
            root, base = home(up)
            homes[value] = (root, base + offset)
        return homes[value]

    for value in parent:
        home(value)
    return homes


def buffer_lifetimes(graph: Graph) -> dict:
    """Root value of the plan -> (first, last) node index: from the first kernel writing a
    value homed in it to the last node reading one (see :func:`value_homes`)."""
    homes = value_homes(graph)
    lifetimes: dict = {}
    for step, node in enumerate(graph.nodes):
        for i in node.inputs:
            root = homes.get(i, (i, 0))[0]
            if root in lifetimes:
                lifetimes[root] = (lifetimes[root][0], step)
        if not is_view(node):
            root = homes.get(node.outputs[0], (node.outputs[0], 0))[0]
            lifetimes[root] = (lifetimes.get(root, (step,))[0], step)
    return lifetimes


def pack_constants(graph: Graph) -> Graph:
    """``graph`` with its constants copied into one buffer, each at a multiple of
    :data:`ALIGNMENT`, in the order the nodes first read them (unread ones last).

    A batch-1 model run reads most of its weights from memory once each, one kernel after
    another: laid out so, they are one ascending stream, and a buffer that large gets
    transparent huge pages where the system offers them (numpy asks for them on large
    allocations on Linux), so the stream's TLB misses are one per 2 MiB rather than one
    per 4 KiB page. The buffer starts on a cache line, so every constant does (numpy had
    put each large one 16 bytes past a page). Both together, ResNet-50 at batch 1 (2
    threads, Xeon, AVX-512): 1.16-1.21x -> 1.12-1.13x ONNX Runtime's time.
    """
    if not graph.consts:
        return graph
    first_read = dict.fromkeys(i for node in graph.nodes for i in node.inputs
                               if i in graph.consts)
    order = [*first_read, *(name for name in graph.consts if name not in first_read)]
    sizes = [-(-graph.consts[name].nbytes // ALIGNMENT) * ALIGNMENT for name in order]
    arena = aligned.empty(sum(sizes), np.uint8)
    offset, packed = 0, {}
    for name, size in zip(order, sizes):
        value = graph.consts[name]
        packed[name] = np.ndarray(value.shape, value.dtype, buffer=arena, offset=offset)
        packed[name][...] = value
        offset += size
    return graph.with_(consts={name: packed[name] for name in graph.consts})
