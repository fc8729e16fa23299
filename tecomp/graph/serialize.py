"""Graphs as JSON data (no pickle): what an exported library stores next to its kernels.

Symbolic dimensions are written with :func:`tecomp.graph.dims.to_json`; one graph's
symbols are read back as one set of ``te.var`` s, shared by its fused bodies.
"""

from __future__ import annotations

from ..ir.expr import PrimExpr
from . import dims
from .ir import Graph, Node, TensorType

FORMAT_VERSION = 1


def _value_to_json(v):
    if isinstance(v, Graph):
        return {"graph": graph_to_json(v)}
    if isinstance(v, PrimExpr):
        return {"dim": dims.to_json(v)}
    if isinstance(v, tuple):
        return [_value_to_json(x) for x in v]
    return v


def _value_from_json(v, symbols):
    if isinstance(v, dict):
        if "graph" in v:
            return _graph_from_json(v["graph"], symbols)
        return dims.from_json(v["dim"], symbols)
    if isinstance(v, list):
        return tuple(_value_from_json(x, symbols) for x in v)
    return v


def _type_to_json(t: TensorType) -> dict:
    out = {"dtype": t.dtype, "shape": [dims.to_json(d) for d in t.shape]}
    if t.content is not None:
        out["content"] = [dims.to_json(d) for d in t.content]
    return out


def _type_from_json(d: dict, symbols) -> TensorType:
    content = d.get("content")
    return TensorType(d["dtype"], tuple(dims.from_json(x, symbols) for x in d["shape"]),
                      None if content is None else tuple(dims.from_json(x, symbols)
                                                         for x in content))


def graph_to_json(graph: Graph) -> dict:
    """``graph`` without its constants' data (those are saved as arrays) as JSON data."""
    return {
        "format": FORMAT_VERSION,
        "name": graph.name,
        "inputs": list(graph.inputs),
        "outputs": list(graph.outputs),
        "consts": list(graph.consts),
        "types": {k: _type_to_json(t) for k, t in graph.types.items()},
        "nodes": [{"op": n.op, "inputs": list(n.inputs), "outputs": list(n.outputs),
                   "name": n.name, "attrs": {k: _value_to_json(v) for k, v in n.attrs.items()}}
                  for n in graph.nodes],
    }


def _graph_from_json(data: dict, symbols: dict, consts=None) -> Graph:
    nodes = tuple(Node(n["op"], tuple(n["inputs"]), tuple(n["outputs"]),
                       {k: _value_from_json(v, symbols) for k, v in n["attrs"].items()},
                       n["name"]) for n in data["nodes"])
    types = {k: _type_from_json(t, symbols) for k, t in data["types"].items()}
    return Graph(tuple(data["inputs"]), tuple(data["outputs"]), nodes,
                 consts or {}, types, data["name"])


def graph_from_json(data: dict, consts: dict) -> Graph:
    """The graph :func:`graph_to_json` wrote, with ``consts`` (name -> array) as its
    constants.

    Raises
    ------
    ValueError
        The data is of another format version or lacks a constant it names.
    """
    if data.get("format") != FORMAT_VERSION:
        raise ValueError(f"graph format {data.get('format')!r}; this tecomp reads "
                         f"{FORMAT_VERSION}")
    missing = [c for c in data["consts"] if c not in consts]
    if missing:
        raise ValueError(f"constants {', '.join(missing)} are missing")
    return _graph_from_json(data, {}, {c: consts[c] for c in data["consts"]})
