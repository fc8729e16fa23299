"""Shape conditions left to run time.

Type inference accepts a broadcast of two symbolic dimensions it cannot prove equal when
they may be (:func:`tecomp.graph.dims.may_equal`): a position table of 512 rows sliced
to the sequence length has ``min(seq, 512)`` rows, and adding it to the token embeddings
(``seq`` rows) is valid exactly while ``seq <= 512``. The kernels index such an input as
if the dimensions were equal, so whoever runs the graph checks them once the sizes are
bound, before any kernel runs: ``GraphModule`` raises ``GraphInputError`` naming the
node, the C entry point returns ``TECOMP_MODEL_ESHAPE``.

Likewise a Range whose step is a symbolic size (:class:`StepCheck`): its length
``ceil((limit - start) / delta)`` is exact for any step of at least 1, and a step of 0
is an error ONNX Runtime reports too.

This module finds the conditions when a graph is built (it asks the operator table which
operators broadcast); :mod:`tecomp.graph.dim_checks` holds them as data, which a built
library keeps and its runner checks without the operator table.
"""

from __future__ import annotations

from . import dims
from .dim_checks import DimCheck, StepCheck
from .ir import Graph
from .ops import op_info


def _node_checks(node, types) -> list:
    out_shape = types[node.outputs[0]].shape
    checks = []
    for value in node.inputs:
        shape = types[value].shape
        offset = len(out_shape) - len(shape)
        for axis, got in enumerate(shape):
            want = out_shape[offset + axis]
            if (dims.is_static(got) and got == 1) or dims.equal(got, want):
                continue
            checks.append(DimCheck(node.name or node.op, node.op, value, axis, got, want))
    return checks


def runtime_dim_checks(graph: Graph) -> tuple:
    """The conditions type inference left to run time (:class:`DimCheck` s of every
    broadcasting node and those an operator's ``dim_checks`` gives, :class:`StepCheck` s of
    ranges with a symbolic step), for the nodes of ``graph`` and of the bodies of its fused
    nodes."""
    checks: list = []
    for node in graph.nodes:
        body = node.attrs.get("body")
        if body is not None:
            checks += runtime_dim_checks(body)
            continue
        info = op_info(node)
        if info.broadcasts:
            checks += _node_checks(node, graph.types)
        elif info.dim_checks is not None:
            checks += info.dim_checks(node, graph.types)
        elif node.op == "arange" and not dims.is_static(node.attrs["delta"]):
            checks.append(StepCheck(node.name or node.op, node.attrs["delta"]))
    return tuple(checks)

