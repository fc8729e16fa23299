"""Reshapes moved below the elementwise operators that read them.

The exporters write a 3-D MatMul as ``reshape -> dense -> reshape`` with the bias add,
the activation and the residual add after the second reshape: fusion cannot take them
into the dense's epilogue (the epilogue runs in the dense's output loop, and a reshape
sits between). This pass computes such an elementwise node on the reshape's source and
reshapes its result instead: ``add(reshape(p), b)`` -> ``reshape(add(p, b'))``. The other
operands follow: a full-shape one is reshaped like the source (a view, no copy), one that
broadcasts only over trailing axes the reshape keeps (a bias) keeps those axes, a scalar
stays, and one that is full over leading axes and broadcasts over the trailing ones that
the reshape merges or splits (a per-channel scale after a grouped 1x1 convolution computed
as a batch of products, ``[G, K/G, H*W]`` viewed as ``[1, K, H, W]``) is viewed over the
source's axes: ``[1, K, 1, 1]`` as ``[G, K/G, 1]``. Repeated down a chain, the reshapes
meet the next one (before a dense, a layer norm) and collapse or cancel.
"""

from __future__ import annotations

import numpy as np

from .. import dims
from ..infer import infer_types
from ..ir import Graph, Node, TensorType
from ..ops import BROADCAST, ELEMWISE, op_info
from .fold_batch_norms import tidy_reshapes


def _operand_shape(shape, out_shape, src_shape):
    """How an operand of ``shape`` that is not the reshaped value is read against the
    reshape's source (``src_shape``) instead of ``out_shape``: the target shape of a
    reshape of it, ``shape`` itself when it needs none, or None when it cannot."""
    if dims.same_shape(shape, out_shape):
        return tuple(src_shape)
    size_one = [dims.is_static(d) and d == 1 for d in shape]
    if not all(one or dims.equal(d, o) for d, o, one in zip(
            shape[::-1], out_shape[::-1], size_one[::-1])):
        return None  # sizes equal only once bound (checked at run time) stay as they are
    # The trailing axes the operand does not broadcast over must be kept by the reshape.
    k = len(shape) - next((i for i, one in enumerate(size_one) if not one), len(shape))
    if k > len(src_shape) or not dims.same_shape(out_shape[len(out_shape) - k:],
                                        src_shape[len(src_shape) - k:]):
        return _regrouped(shape, out_shape, src_shape)
    return tuple(shape[len(shape) - k:])


def _regrouped(shape, out_shape, src_shape):
    """The shape over ``src_shape``'s axes of an operand of ``shape`` that is full over
    the leading axes of ``out_shape`` and broadcasts over its trailing ones, when the
    reshape maps those trailing axes onto trailing axes of the source of the same size
    (static sizes only), or None. An element's offset in the leading axes is then the
    same in both shapes, so the operand is a view: ``[1, K, 1, 1]`` against ``[1, K, H, W]``
    viewed from ``[G, K/G, H*W]`` is ``[G, K/G, 1]``."""
    if not all(dims.is_static(d) for d in (*shape, *out_shape, *src_shape)):
        return None
    full = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    k = len(full) - next((i for i in range(len(full) - 1, -1, -1) if full[i] != 1), -1) - 1
    if k == 0 or any(d != o for d, o in zip(full[:-k], out_shape[:-k])):
        return None
    broadcast = int(np.prod(out_shape[-k:]))
    for m in range(1, len(src_shape)):
        if int(np.prod(src_shape[-m:])) == broadcast:
            return tuple(src_shape[:-m]) + (1,) * m
    return None


def _shape_follows_operands(node: Node) -> bool:
    """Whether ``node`` works element by element on operands broadcast under numpy's
    rules, with nothing else shaping its output: only such a node computes the same on a
    reshape's source. Expand's target shape and BatchNorm's channel axis do shape theirs."""
    info = op_info(node)
    return info.pattern == ELEMWISE or (
        info.pattern == BROADCAST and info.broadcasts and "shape" not in node.attrs)


def _sunk(node: Node, source: dict, types: dict) -> list | None:
    """``node`` computed on its reshaped operand's source and reshaped after, as new
    nodes, or None when it does not apply (see the module text). The types of the new
    values join ``types``."""
    if not _shape_follows_operands(node) or len(node.outputs) != 1:
        return None
    out = node.outputs[0]
    out_shape = types[out].shape
    reshaped = [i for i in node.inputs
                if i in source and dims.same_shape(types[i].shape, out_shape)]
    if not reshaped:
        return None
    src_shape = types[source[reshaped[0]]].shape
    if any(dims.is_static(d) and d == 0 for d in out_shape):
        return None  # a 0 in a target shape copies the input's dimension
    nodes, inputs = [], []
    for i in node.inputs:
        if i in source and dims.same_shape(types[i].shape, out_shape) and dims.same_shape(
                types[source[i]].shape, src_shape):
            inputs.append(source[i])
            continue
        shape = _operand_shape(types[i].shape, out_shape, src_shape)
        if shape is None:
            return None
        if dims.same_shape(shape, types[i].shape):
            inputs.append(i)
            continue
        name = f"{i}.as.{out}"
        types[name] = TensorType(types[i].dtype, shape)
        nodes.append(Node("reshape", (i,), (name,), {"newshape": shape}, node.name))
        inputs.append(name)
    flat = f"{out}.flat"
    types[flat] = TensorType(types[out].dtype, tuple(src_shape))
    nodes.append(node.with_(inputs=tuple(inputs), outputs=(flat,)))
    nodes.append(Node("reshape", (flat,), (out,), {"newshape": tuple(out_shape)}, node.name))
    return nodes


def sink_reshapes(graph: Graph) -> Graph:
    """``graph`` with reshapes moved below the elementwise nodes reading them (see the
    module text), then reshape chains collapsed and no-op reshapes removed."""
    graph = infer_types(graph)
    types = dict(graph.types)
    source: dict = {}  # a reshape's output -> its input
    root: dict = {}  # a reshape's output -> the first input of its chain of reshapes
    nodes: list = []
    changed = False
    for node in graph.nodes:
        # A chain of reshapes is one view of its first input: the node is computed on
        # that where it can be (a batch of products viewed as a 4-D activation and
        # reshaped again), else on the last reshape's input.
        new = _sunk(node, root, types) or _sunk(node, source, types)
        if new is None:
            new = [node]
        else:
            changed = True
        for n in new:
            if n.op == "reshape" and len(n.inputs) == 1:
                source[n.outputs[0]] = n.inputs[0]
                root[n.outputs[0]] = root.get(n.inputs[0], n.inputs[0])
        nodes.extend(new)
    if not changed:
        return graph
    return tidy_reshapes(infer_types(graph.with_(nodes=tuple(nodes))))
