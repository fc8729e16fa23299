"""The graph IR: a typed dataflow graph of operator calls.

Values are named by strings. A value is a graph input, a constant (a numpy array held by
the graph) or the output of exactly one node. Each value has a :class:`TensorType`: a dtype
and a shape whose dimensions are ints or symbolic ``te`` expressions (see
:mod:`tecomp.graph.dims`). Nodes call an operator of the operator library by name
(``"conv2d"``, ``"add"``, ...) with keyword attributes, which are the keyword arguments of
that operator's compute. Everything is immutable: passes build new graphs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType

import numpy as np

from . import dims


@dataclass(frozen=True)
class TensorType:
    """The dtype and shape of a value; ``content`` is the value itself where it is a small
    integer tensor known at compile time up to symbols (a shape computed by ``shape_of``),
    flattened, else None."""

    dtype: str
    shape: tuple
    content: tuple | None = None

    def __str__(self):
        text = f"{self.dtype}[{', '.join(dims.to_text(d) for d in self.shape)}]"
        if self.content is not None:
            text += " = [" + ", ".join(dims.to_text(d) for d in self.content) + "]"
        return text


def _freeze(value):
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.ndarray):
        return tuple(_freeze(v) for v in value.tolist())
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


@dataclass(frozen=True, eq=False)
class Node:
    """One call ``outputs = op(*inputs, **attrs)``; ``name`` is the node's name in the source
    model (for error messages and dumps)."""

    op: str
    inputs: tuple
    outputs: tuple
    attrs: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    name: str = ""

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        frozen = {k: _freeze(v) for k, v in sorted(dict(self.attrs).items())}
        object.__setattr__(self, "attrs", MappingProxyType(frozen))

    def with_(self, **changes) -> "Node":
        """A copy with some fields changed."""
        return replace(self, **changes)


def _attr_text(v) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_attr_text(x) for x in v) + "]"
    if isinstance(v, str):
        return repr(v)
    return str(v)


def attrs_text(attrs) -> str:
    """Attributes as printed: ``k=v, ...`` in name order (also a key for comparing them)."""
    return ", ".join(f"{k}={_attr_text(v)}" for k, v in attrs.items())


@dataclass(frozen=True, eq=False)
class Graph:
    """A dataflow graph: ``nodes`` in a topological order, the ``inputs`` a caller gives,
    the ``outputs`` it gets, ``consts`` (name -> numpy array) and a type per value
    (``types``; empty until :func:`tecomp.graph.infer_types` ran)."""

    inputs: tuple
    outputs: tuple
    nodes: tuple
    consts: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    types: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    name: str = "main"

    def __post_init__(self):
        for f in ("inputs", "outputs", "nodes"):
            object.__setattr__(self, f, tuple(getattr(self, f)))
        for f in ("consts", "types"):
            object.__setattr__(self, f, MappingProxyType(dict(getattr(self, f))))

    def with_(self, **changes) -> "Graph":
        """A copy with some fields changed."""
        return replace(self, **changes)

    def producers(self) -> dict:
        """Value name -> the node that computes it."""
        return {out: node for node in self.nodes for out in node.outputs}

    def consumers(self) -> dict:
        """Value name -> the nodes that read it (graph outputs are not nodes)."""
        users: dict = {}
        for node in self.nodes:
            for name in node.inputs:
                users.setdefault(name, []).append(node)
        return users

    def type_of(self, name: str) -> TensorType:
        """The type of value ``name`` (after type inference)."""
        return self.types[name]

    def __str__(self):
        def typed(name):
            t = self.types.get(name)
            return f"%{name}: {t}" if t is not None else f"%{name}"

        lines = [f"graph {self.name}({', '.join(typed(n) for n in self.inputs)}) {{"]
        for cname, arr in self.consts.items():
            lines.append(f"  const %{cname}: {arr.dtype}[{', '.join(map(str, arr.shape))}]")
        for node in self.nodes:
            outs = ", ".join(typed(o) for o in node.outputs)
            args = ", ".join(f"%{i}" if i else "_" for i in node.inputs)
            body = node.attrs.get("body")
            if body is not None:
                # A fused group: its body's nodes, indented, under the kernel's name.
                lines.append(f"  {outs} = {node.name}({args}) {{")
                lines.extend("  " + line for line in str(body).splitlines()[1:-1]
                             if not line.startswith("  return"))
                lines.append("  }")
                continue
            attrs = attrs_text(node.attrs)
            call = f"{node.op}({args}{', ' if args and attrs else ''}{attrs})"
            lines.append(f"  {outs} = {call}" + (f"  # {node.name}" if node.name else ""))
        lines.append(f"  return {', '.join('%' + o for o in self.outputs)}")
        lines.append("}")
        return "\n".join(lines)


def value_namer(graph: Graph):
    """``fresh(stem)``: a value name that no value or constant of ``graph`` has and no
    earlier call returned — ``stem`` itself, else ``stem1``, ``stem2``, ... (for the
    values a pass adds)."""
    taken = set(graph.types) | set(graph.consts)

    def fresh(stem: str) -> str:
        name, k = stem, 0
        while name in taken:
            k += 1
            name = f"{stem}{k}"
        taken.add(name)
        return name

    return fresh
