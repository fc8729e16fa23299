"""Constant folding: nodes whose inputs are all constants, and all shape arithmetic.

A node folds when its output is known at compile time: either all its inputs are
constants and its operator has a numpy evaluation here (the transforms and the arithmetic
that weights and shapes go through: a Gemm weight's transpose, a bias reshape, BatchNorm's
scale), or its type's ``content`` is fully static (a ``shape_of`` of a static shape and the
arithmetic on it). A reshape whose target shape is computed from symbolic shapes becomes a
reshape with the resolved shape as attribute, so nothing of a shape computation is left
to run. Other operators on constants stay nodes (they run once per call, correctly).

A node whose outputs have static shapes without elements (a slice past the end, a split
into parts of size 0) is a constant too, an empty array, and a concatenation drops the
inputs that have no elements whatever the run's sizes: no kernel is made for them.
"""

from __future__ import annotations

import numpy as np

from .. import dims
from ...ir import dtype as dt
from ..infer import infer_types
from ..ir import Graph
from ...topi.transform import slice_bounds


def _empty(t) -> bool:
    """Whether a value of type ``t`` has no elements, whatever the run's sizes."""
    return any(dims.is_static(d) and int(d) == 0 for d in t.shape)


def _divide(a, b):
    if a.dtype.kind in "iu":
        return np.trunc(np.true_divide(a, b)).astype(a.dtype)  # ONNX: integer division truncates
    return np.divide(a, b)


def _slice(x, attrs):
    # ONNX's clamping, not Python's: -100:-100:-1 of 5 elements is [x[0]].
    picks = [np.arange(d) for d in x.shape]
    starts, ends = attrs["starts"], attrs["ends"]
    axes = attrs.get("axes") or range(len(starts))
    steps = attrs.get("steps") or (1,) * len(starts)
    for a, s, e, st in zip(axes, starts, ends, steps):
        picks[a] = np.arange(*slice_bounds(x.shape[a], s, e, st), st)
    return x[np.ix_(*picks)]


# Operator -> fn(attrs, out_type, *arrays); each keeps its output's dtype.
NUMPY = {
    "identity": lambda at, t, x: x,
    "reshape": lambda at, t, x, *_: x.reshape(t.shape),
    "transpose": lambda at, t, x: np.transpose(x, at.get("perm")),
    "cast": lambda at, t, x: x.astype(at["dtype"]),
    "concat": lambda at, t, *xs: np.concatenate(xs, axis=at["axis"]),
    "gather": lambda at, t, x, i: np.take(x, i, axis=at.get("axis", 0)),
    "slice": lambda at, t, x: _slice(x, at),
    "neg": lambda at, t, x: np.negative(x),
    "sqrt": lambda at, t, x: np.sqrt(x),
    "reciprocal": lambda at, t, x: np.reciprocal(x),
    "add": lambda at, t, a, b: np.add(a, b),
    "subtract": lambda at, t, a, b: np.subtract(a, b),
    "multiply": lambda at, t, a, b: np.multiply(a, b),
    "divide": lambda at, t, a, b: _divide(a, b),
    "power": lambda at, t, a, b: np.power(a, b),
}


def fold_constants(graph: Graph) -> Graph:
    """``graph`` with every foldable node replaced by a constant (see the module text) and
    every reshape's target shape resolved into its ``newshape`` attribute."""
    graph = infer_types(graph)
    consts = dict(graph.consts)
    nodes = []
    for node in graph.nodes:
        types = [graph.types[o] for o in node.outputs]
        t = types[0]
        if all(_empty(u) and all(dims.is_static(d) for d in u.shape) for u in types):
            # Nothing to compute: the outputs are their shapes (a slice past the end, a
            # split into parts of size 0), whatever the inputs hold.
            consts.update((o, np.empty(u.shape, dt.numpy_dtype(u.dtype)))
                          for o, u in zip(node.outputs, types))
            continue
        if node.op == "concat" and any(_empty(graph.types[i]) for i in node.inputs):
            kept = tuple(i for i in node.inputs if not _empty(graph.types[i]))
            node = node.with_(op="identity", inputs=kept, attrs={}) if len(kept) == 1 \
                else node.with_(inputs=kept)
        if len(types) == 1 and t.content is not None and all(dims.is_static(d)
                                                             for d in t.content):
            consts[node.outputs[0]] = np.array(t.content, t.dtype).reshape(t.shape)
            continue
        if len(types) == 1 and node.op in NUMPY and all(i in consts for i in node.inputs) and (
                all(dims.is_static(d) for d in t.shape)):
            # (A constant sliced to a symbolic length stays a node: its size is known only
            # when the inputs are.)
            try:
                value = NUMPY[node.op](node.attrs, t, *(consts[i] for i in node.inputs))
            except IndexError:
                # A gather index outside the data: the node stays, and its kernel
                # reports the index when it runs.
                value = None
            if value is not None:
                consts[node.outputs[0]] = np.ascontiguousarray(value, dtype=t.dtype)
                continue
        if node.op == "reshape":
            attrs = {k: v for k, v in node.attrs.items() if k != "allowzero"}
            attrs["newshape"] = t.shape
            node = node.with_(inputs=node.inputs[:1], attrs=attrs)
        nodes.append(node)
    return infer_types(graph.with_(nodes=tuple(nodes), consts=consts))
