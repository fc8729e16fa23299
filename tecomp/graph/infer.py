"""Type inference: the dtype and shape of every value of a graph, symbolic dimensions
included, from the types of its inputs and constants."""

from __future__ import annotations

import numpy as np

from .ir import Graph, TensorType
from .ops import GraphTypeError, op_info

# Integer constants up to this many elements carry their content, so shape arithmetic on
# them folds (a shape tensor is short; a weight is not integer or not this small).
MAX_CONTENT = 64


def const_type(array: np.ndarray) -> TensorType:
    """The type of a constant; a small integer constant carries its content."""
    content = None
    if array.dtype.kind in "iu" and array.size <= MAX_CONTENT:
        content = tuple(int(v) for v in array.reshape(-1))
    return TensorType(str(array.dtype), tuple(int(d) for d in array.shape), content)


def infer_types(graph: Graph) -> Graph:
    """``graph`` with ``types`` holding the type of every value.

    The graph inputs' types must be in ``graph.types`` already; constants and node outputs
    are (re)computed, nodes in order.

    Raises
    ------
    GraphTypeError
        A node reads a value nothing defines, or its inputs do not fit its operator; the
        message names the node.
    """
    types = {name: graph.types[name] for name in graph.inputs}
    for name, array in graph.consts.items():
        types[name] = const_type(array)
    for node in graph.nodes:
        missing = [i for i in node.inputs if i and i not in types]
        if missing:
            raise GraphTypeError(f"node {node.name or node.op!r} ({node.op}) reads "
                                 f"{', '.join(missing)}, which no input, constant or earlier "
                                 "node defines")
        ins = [types[i] for i in node.inputs if i]
        outs = op_info(node).rule(node, ins)
        if len(outs) != len(node.outputs):
            raise GraphTypeError(f"node {node.name or node.op!r} ({node.op}) has "
                                 f"{len(node.outputs)} outputs; the operator gives {len(outs)}")
        types.update(zip(node.outputs, outs))
    for name in graph.outputs:
        if name not in types:
            raise GraphTypeError(f"graph output {name!r} is not defined by any node, input or "
                                 "constant")
    return graph.with_(types=types)
