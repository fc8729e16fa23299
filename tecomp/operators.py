"""The operator registry: one :class:`Operator` per operator name, holding everything the
compiler states about that operator.

Each layer of the compiler states its part where that layer lives, as TVM sets the
attributes of one ``Op`` from several files, and every part lands on the same object:

- the graph level (:mod:`tecomp.graph.ops`): the fusion pattern, the type rule, whether the
  inputs broadcast, the run-time checks on symbolic dimensions, and, for the few graph
  operators no kernel ever computes, where they go instead (``no_kernel``);
- the operator library (:mod:`tecomp.topi.strategy`): one implementation (compute,
  schedule, tuning template) per target kind, or the reason a kind leaves the operator out.

So ``operator("softmax")`` answers every question about softmax, and
:func:`missing_implementations` lists, for a target kind, the graph operators that have
neither an implementation nor a stated reason (a test keeps it empty for every kind).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

from .errors import TecompError

__all__ = ["Operator", "define_graph_operator", "graph_operators", "library_entry",
           "library_operators", "lookup", "missing_implementations", "operator"]


@dataclass(eq=False)
class Operator:
    """Everything the compiler states about one operator.

    Attributes
    ----------
    name : str
        The operator's name (``"softmax"``, ``"conv2d"``, ...), in the graph and in the
        operator library.
    pattern : str or None
        Its fusion pattern at the graph level (``tecomp.graph.ops.ELEMWISE``, ...); None for
        an operator of the library that graphs do not use.
    rule : callable or None
        The graph's type rule, ``rule(node, input_types) -> output types``; None as above.
    broadcasts : bool
        Whether the inputs broadcast to the output under numpy's rules.
    dim_checks : callable or None
        ``dim_checks(node, types) -> [DimCheck]``: conditions on symbolic dimensions that
        the rule could not decide and the kernels rely on, checked at run time.
    no_kernel : str or None
        For a graph operator no kernel computes: where it goes instead.
    implementations : dict
        Target kind -> :class:`tecomp.topi.strategy.Implementation`.
    left_out : dict
        Target kind -> why that kind has no implementation.
    """

    name: str
    pattern: str | None = None
    rule: Callable | None = None
    broadcasts: bool = False
    dim_checks: Callable | None = None
    no_kernel: str | None = None
    implementations: dict = field(default_factory=dict)
    left_out: dict = field(default_factory=dict)

    @property
    def in_graph(self) -> bool:
        """Whether graphs use this operator (it has a type rule)."""
        return self.rule is not None


_OPERATORS: dict[str, Operator] = {}


def operator(name: str) -> Operator:
    """The operator named ``name``, created empty on first use (each layer then states its
    part of it)."""
    op = _OPERATORS.get(name)
    if op is None:
        op = _OPERATORS[name] = Operator(name)
    return op


def _load_builtin_operators(*parts: str) -> None:
    # The operators tecomp ships are stated by the operator library and the graph level
    # (tecomp.BUILTIN_OPERATORS, by part), imported on the first query rather than here,
    # so this module stays at the bottom of the layers; a query of implementations alone
    # (the operator library's own, while it registers them) loads no graph module.
    from . import BUILTIN_OPERATORS

    for part in parts or tuple(BUILTIN_OPERATORS):
        for module in BUILTIN_OPERATORS[part]:
            importlib.import_module(module)


def lookup(name: str) -> Operator | None:
    """The operator named ``name``, or None if no layer has stated anything about it."""
    _load_builtin_operators()
    return _OPERATORS.get(name)


def library_entry(name: str) -> Operator | None:
    """The operator named ``name`` as the operator library states it (its implementations
    and the kinds that leave it out; its graph part may not be loaded), or None."""
    _load_builtin_operators("library")
    return _OPERATORS.get(name)


def define_graph_operator(name: str, pattern: str, rule: Callable, broadcasts: bool = False,
                          dim_checks: Callable | None = None,
                          no_kernel: str | None = None) -> Operator:
    """State the graph level's part of operator ``name``; stating it twice is an error (two
    modules claiming one operator is a bug, not an override).

    Parameters
    ----------
    name : str
        The operator.
    pattern : str
        Its fusion pattern (``tecomp.graph.ops.ELEMWISE``, ...).
    rule : callable
        Its type rule, ``rule(node, input_types) -> output types``.
    broadcasts : bool
        Whether the inputs broadcast to the output under numpy's rules.
    dim_checks : callable or None
        ``dim_checks(node, types) -> [DimCheck]``, the run-time checks on symbolic
        dimensions the kernels rely on.
    no_kernel : str or None
        For an operator no kernel computes: where it goes instead.

    Returns
    -------
    Operator
        The operator's entry.
    """
    op = operator(name)
    if op.rule is not None:
        raise TecompError(f"operator {name!r} already has a type rule")
    op.pattern, op.rule, op.broadcasts = pattern, rule, broadcasts
    op.dim_checks, op.no_kernel = dim_checks, no_kernel
    return op


def graph_operators() -> dict[str, Operator]:
    """The operators graphs use (those with a type rule), by name."""
    _load_builtin_operators()
    return {name: op for name, op in sorted(_OPERATORS.items()) if op.in_graph}


def library_operators(kind: str) -> dict[str, Operator]:
    """The operators with an implementation for target kind ``kind``, by name."""
    _load_builtin_operators("library")
    return {name: op for name, op in sorted(_OPERATORS.items()) if kind in op.implementations}


def missing_implementations(kind: str) -> list[str]:
    """The graph operators with no implementation for ``kind``, no reason why the kind
    leaves them out, and no statement that no kernel computes them."""
    return [name for name, op in graph_operators().items()
            if kind not in op.implementations and kind not in op.left_out
            and op.no_kernel is None]
