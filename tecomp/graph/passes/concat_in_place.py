"""Concatenations computed in place: the kernels producing the parts write them straight
into their slices of the output, and the concatenation copies nothing.

A fire module (SqueezeNet), an Inception block or a DenseNet layer concatenates the
outputs of convolutions along the channels. At batch 1 each part is a contiguous slice
of the result (every axis before the channels has size 1), so the pass turns such a
concatenation kernel into a ``concat_view`` node (:data:`~tecomp.graph.storage.CONCAT_VIEW`)
with the byte offset of each part, and the memory plans place the parts there
(:func:`~tecomp.graph.storage.value_homes`). Nested concatenations (a DenseNet block's
growing feature map) nest their slices, so a whole block lives in its last output.

A concatenation stays a kernel unless every part

- is computed by a kernel or by another concatenation in place (not a graph input, a
  constant or a reshape of one, which live elsewhere),
- is read by no other concatenation in place (a value lives in one place) and appears
  once, and is not a graph output (the caller's buffer holds that),
- starts at a multiple of :data:`~tecomp.runtime.aligned.ALIGNMENT` bytes (kernels assume
  aligned buffers),

and unless every shape is static with only size-1 axes before the concatenation axis,
and the output is no graph output.
"""

from __future__ import annotations

import numpy as np

from ...runtime.aligned import ALIGNMENT
from .. import dims
from ..ir import Graph, Node
from ..storage import CONCAT_VIEW


def _concat_of(node: Node):
    """The concat node a fused group consists of, or None."""
    if node.op != "fused":
        return None
    body = node.attrs["body"]
    if len(body.nodes) != 1 or body.nodes[0].op != "concat":
        return None
    concat = body.nodes[0]
    # The group's inputs are the concat's, each once (``concat(x, x)`` needs a copy).
    if len(set(concat.inputs)) != len(concat.inputs) or set(concat.inputs) != set(node.inputs):
        return None
    return concat


def _part_offsets(graph: Graph, concat: Node, output: str):
    """Byte offsets of the parts in the output, or None when the parts are not contiguous
    aligned slices of it."""
    out = graph.types[output]
    if not all(dims.is_static(d) for d in out.shape):
        return None
    axis = concat.attrs["axis"] % len(out.shape)
    if any(int(d) != 1 for d in out.shape[:axis]):
        return None
    offsets, offset = [], 0
    for part in concat.inputs:
        t = graph.types[part]
        if offset % ALIGNMENT or not all(dims.is_static(d) for d in t.shape):
            return None
        offsets.append(offset)
        offset += dims.product(t.shape) * np.dtype(t.dtype).itemsize
    return tuple(offsets)


def concatenate_in_place(graph: Graph) -> Graph:
    """``graph`` (fused) with each concatenation that qualifies (see the module docstring)
    replaced by a ``concat_view`` node carrying its ``axis`` and the byte ``offsets`` of
    its parts; ``graph`` itself when none does."""
    # Values kernels write (the outputs of the concatenations turned into views included:
    # a concatenation in place can be a part of the next one).
    computed = {n.outputs[0] for n in graph.nodes if n.op == "fused"}
    outputs = set(graph.outputs)
    placed: set = set()  # parts already living in a concatenation in place
    nodes = []
    for node in graph.nodes:
        concat = _concat_of(node)
        offsets = None if concat is None else _part_offsets(graph, concat, node.outputs[0])
        if (offsets is None or node.outputs[0] in outputs
                or any(p in outputs or p in placed or p not in computed
                       for p in concat.inputs)):
            nodes.append(node)
            continue
        placed.update(concat.inputs)
        nodes.append(Node(CONCAT_VIEW, concat.inputs, node.outputs,
                          {"axis": concat.attrs["axis"], "offsets": offsets}, node.name))
    return graph.with_(nodes=tuple(nodes)) if placed else graph
