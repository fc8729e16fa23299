"""The shape conditions a graph leaves to run time, as data its runner checks.

:func:`tecomp.graph.checks.runtime_dim_checks` finds them when a graph is built (it reads
the operator table); a built library keeps them and its exported sidecar stores them
(:func:`check_to_json`), so ``GraphModule`` checks them before any kernel runs, also in
a process that loaded the library without the compiler.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import dims


def _size_text(d, bindings: dict) -> str:
    """A dimension and its value for ``bindings``: ``seq = 9``, or ``6`` when constant."""
    value = dims.evaluate(d, bindings)
    return str(value) if dims.is_static(d) else f"{dims.to_text(d)} = {value}"


def _sizes_text(bindings: dict) -> str:
    """``bindings`` (symbol -> size) as an error message names them: ``batch=2, seq=9``."""
    return ", ".join(f"{v.name}={n}" for v, n in bindings.items())


#: Each relation a :class:`DimCheck` may hold, and the C operator of its violation.
_VIOLATIONS = {"==": "!=", "<=": ">", ">=": "<"}


@dataclass(frozen=True)
class DimCheck:
    """Dimension ``axis`` of input ``value`` of node ``node`` (operator ``op``) is ``got``
    and must equal (``relation`` ``"=="``), be at most (``"<="``) or at least (``">="``)
    ``want`` at run time; ``against`` says what ``want`` is, as the error message
    continues "where ... 6": "the output has" (a broadcast), "the data has"
    (GatherElements' indices), "the Split's sizes add up to", "the operator needs at
    least" (a convolution's spatial axes)."""

    node: str
    op: str
    value: str
    axis: int
    got: object
    want: object
    relation: str = "=="
    against: str = "the output has"

    def __post_init__(self):
        if self.relation not in _VIOLATIONS:
            raise ValueError(f"relation {self.relation!r}; allowed: "
                             f"{', '.join(map(repr, _VIOLATIONS))}")

    def holds(self, bindings: dict) -> bool:
        """Whether the condition holds for ``bindings`` (symbol -> size)."""
        got, want = (dims.evaluate(d, bindings) for d in (self.got, self.want))
        return {"==": got == want, "<=": got <= want, ">=": got >= want}[self.relation]

    def message(self, bindings: dict) -> str:
        """Why ``bindings`` break the condition, for the error a user sees."""
        allowed = " (it may have at most as many)" if self.relation == "<=" else ""
        return (f"node {self.node!r} ({self.op}): input {self.value!r} has "
                f"{_size_text(self.got, bindings)} elements on axis {self.axis} where "
                f"{self.against} {_size_text(self.want, bindings)}{allowed}, with the input "
                f"sizes {_sizes_text(bindings)}")

    def c_violation(self, c_expr) -> str:
        """The C condition under which the check fails, with dimensions written by
        ``c_expr``."""
        return f"{c_expr(self.got)} {_VIOLATIONS[self.relation]} {c_expr(self.want)}"

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
        return (f"node {self.node!r} (arange): the step {_size_text(self.delta, bindings)} "
                f"of the Range must be at least 1, with "
                f"the input sizes {_sizes_text(bindings)}")

    def c_violation(self, c_expr) -> str:
        """The C condition under which the check fails, with dimensions written by
        ``c_expr``."""
        return f"{c_expr(self.delta)} < 1"

    def where(self) -> str:
        """Where the condition comes from, for a comment."""
        return f"{self.node}: Range step"


def check_to_json(check) -> dict:
    """``check`` (:class:`DimCheck` or :class:`StepCheck`) as JSON data."""
    if isinstance(check, DimCheck):
        return {"kind": "dim", "node": check.node, "op": check.op, "value": check.value,
                "axis": check.axis, "got": dims.to_json(check.got),
                "want": dims.to_json(check.want), "relation": check.relation,
                "against": check.against}
    return {"kind": "step", "node": check.node, "delta": dims.to_json(check.delta)}


def check_from_json(data: dict, symbols_by_name: dict):
    """The check :func:`check_to_json` wrote, its dimensions over the symbols of
    ``symbols_by_name`` (the graph's, so the sizes bound from its inputs bind them).

    Raises
    ------
    ValueError
        ``data`` is no check of a kind this reads.
    """
    kind = data.get("kind")
    if kind == "dim":
        return DimCheck(data["node"], data["op"], data["value"], data["axis"],
                        dims.from_json(data["got"], symbols_by_name),
                        dims.from_json(data["want"], symbols_by_name),
                        data.get("relation", "=="), data.get("against", "the output has"))
    if kind == "step":
        return StepCheck(data["node"], dims.from_json(data["delta"], symbols_by_name))
    raise ValueError(f"a shape check of kind {kind!r}; this tecomp reads 'dim' and 'step'")
