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
"""

from __future__ import annotations

from dataclasses import dataclass

from . import dims
from .ir import Graph
from .ops import op_info


def _sizes_text(bindings: dict) -> str:
    """``bindings`` (symbol -> size) as an error message names them: ``batch=2, seq=9``."""
    return ", ".join(f"{v.name}={n}" for v, n in bindings.items())


@dataclass(frozen=True)
class DimCheck:
    """Dimension ``axis`` of input ``value`` of node ``node`` (operator ``op``) is ``got``
    and must equal the node's output dimension ``want`` at run time."""

    node: str
    op: str
    value: str
    axis: int
    got: object
    want: object

    def holds(self, bindings: dict) -> bool:
        """Whether the condition holds for ``bindings`` (symbol -> size)."""
        return dims.evaluate(self.got, bindings) == dims.evaluate(self.want, bindings)

    def message(self, bindings: dict) -> str:
        """Why ``bindings`` break the condition, for the error a user sees."""
        return (f"node {self.node!r} ({self.op}): input {self.value!r} has "
                f"{dims.to_text(self.got)} = {dims.evaluate(self.got, bindings)} elements on "
                f"axis {self.axis} where the output has {dims.to_text(self.want)} = "
                f"{dims.evaluate(self.want, bindings)}, with the input sizes "
                f"{_sizes_text(bindings)}")

    def c_violation(self, c_expr) -> str:
        """The C condition under which the check fails, with dimensions written by
        ``c_expr``."""
        return f"{c_expr(self.got)} != {c_expr(self.want)}"

    def where(self) -> str:
        """Where the condition comes from, for a comment."""
        return f"{self.node}: {self.value} axis {self.axis}"


@dataclass(frozen=True)
class StepCheck:
    """The step ``delta`` of Range node ``node``, computed from symbolic sizes, must be at
    least 1 at run time."""

    node: str
    delta: object

    def holds(self, bindings: dict) -> bool:
        """Whether the condition holds for ``bindings`` (symbol -> size)."""
        return dims.evaluate(self.delta, bindings) >= 1

    def message(self, bindings: dict) -> str:
        """Why ``bindings`` break the condition, for the error a user sees."""
        return (f"node {self.node!r} (arange): the step {dims.to_text(self.delta)} = "
                f"{dims.evaluate(self.delta, bindings)} of the Range must be at least 1, with "
                f"the input sizes {_sizes_text(bindings)}")

    def c_violation(self, c_expr) -> str:
        """The C condition under which the check fails, with dimensions written by
        ``c_expr``."""
        return f"{c_expr(self.delta)} < 1"

    def where(self) -> str:
        """Where the condition comes from, for a comment."""
        return f"{self.node}: Range step"


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
    broadcasting node, :class:`StepCheck` s of ranges with a symbolic step), for the nodes
    of ``graph`` and of the bodies of its fused nodes."""
    checks: list = []
    for node in graph.nodes:
        body = node.attrs.get("body")
        if body is not None:
            checks += runtime_dim_checks(body)
        elif op_info(node).broadcasts:
            checks += _node_checks(node, graph.types)
        elif node.op == "arange" and not dims.is_static(node.attrs["delta"]):
            checks.append(StepCheck(node.name or node.op, node.attrs["delta"]))
    return tuple(checks)

