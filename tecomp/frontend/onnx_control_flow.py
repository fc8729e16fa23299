"""ONNX control flow, unrolled at import: ``If`` takes the branch its condition picks,
``Loop`` repeats its body as many times as its trip count and conditions say, ``Scan``
runs its body once per element of its sequences. The graph that results has no control
flow left, so it is fused, tuned and built like any other, and iterations that compute
the same thing share one kernel (equal groups compile once).

What decides the control flow must be known when the model is imported: an ``If``'s
condition, a ``Loop``'s trip count and each condition its body computes, and a ``Scan``'s
sequence length. Constants and shape arithmetic are; a value an input decides (a
condition given as an input, a trip count read from one) makes the model specialised per
value of that input on first run, and a symbolic sequence length per input shape
(:mod:`.onnx_specialise`), as for a ``Reshape`` to a shape read from an input. A condition
computed from data at run time is refused, naming the node.

The nodes of a subgraph are converted in the enclosing graph under names of their own
(``loop/2/x``: the node, the iteration, the body's name), so every iteration is a copy;
names a subgraph does not define are the enclosing scope's, as ONNX says.
"""

from __future__ import annotations

import copy

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import UnsupportedOpError
from ..graph import dims
from .onnx_converters import ModelError, NeedsConstantError, converter

#: The most copies of a body one Loop or Scan unrolls to.
MAX_ITERATIONS = 4096


def subgraphs(node) -> list:
    """The graphs held by ``node``'s attributes (If's branches, Loop's and Scan's body)."""
    found = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            found.append(a.g)
        elif a.type == onnx.AttributeProto.GRAPHS:
            found.extend(a.graphs)
    return found


def node_names(graph) -> list:
    """The name the import gives each node of ``graph``: its own, or ``OpType_index``."""
    return [n.name or f"{n.op_type}_{i}" for i, n in enumerate(graph.node)]


def free_names(graph) -> set:
    """The names ``graph`` reads but does not define (values of the enclosing graphs),
    its nested subgraphs' included."""
    used = {i for n in graph.node for i in n.input if i}
    used |= {o.name for o in graph.output}
    used |= {v for n in graph.node for sub in subgraphs(n) for v in free_names(sub)}
    return used - _defined(graph)


def _defined(graph) -> set:
    names = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    return names | {o for n in graph.node for o in n.output if o}


def _rename_free(graph, mapping: dict) -> None:
    """Rename, in place, ``graph``'s references to names it does not define itself (its
    free names, in nested subgraphs too) by ``mapping``."""
    mapping = {k: v for k, v in mapping.items() if k not in _defined(graph)}
    for node in graph.node:
        node.input[:] = [mapping.get(i, i) for i in node.input]
        _rename_free_in_subgraphs(node, mapping)
    for o in graph.output:
        o.name = mapping.get(o.name, o.name)


def _rename_free_in_subgraphs(node, mapping: dict) -> None:
    for sub in subgraphs(node):  # the attributes' own messages: renamed where they are
        _rename_free(sub, mapping)


def _check_outputs(graph, owner: str) -> None:
    for o in graph.output:
        kind = o.type.WhichOneof("value")
        # An output may leave its type unsaid.
        if kind not in (None, "tensor_type", "sequence_type", "optional_type"):
            raise UnsupportedOpError(
                f"node {owner!r}: subgraph output {o.name!r} is a {kind}; tecomp runs "
                f"tensors, sequences and optionals (no maps)")


def inline_subgraph(ctx, graph, owner: str, prefix: str, bound: dict) -> list:
    """Convert the nodes of subgraph ``graph`` (of node ``owner``) into ``ctx``, the
    values it defines named ``prefix + name``, its inputs bound to the values ``bound``
    names (subgraph input -> value of the enclosing graph); returns the values of its
    outputs."""
    local = dict(bound)
    for init in graph.initializer:
        local[init.name] = ctx.const(numpy_helper.to_array(init), name=prefix + init.name)
    for name, node in zip(node_names(graph), graph.node):
        inner = copy.deepcopy(node)
        inner.input[:] = [local.get(i, i) if i else "" for i in node.input]
        # Nested subgraphs read this one's values by their names.
        _rename_free_in_subgraphs(inner, local)
        local.update({o: prefix + o for o in node.output if o})
        inner.output[:] = [local[o] if o else "" for o in node.output]
        ctx.used = ctx.used | {o for o in inner.output if o}
        ctx.convert_node(inner, f"{owner}/{name}")
    return [local.get(o.name, o.name) for o in graph.output]


def alias_value(ctx, value: str, name: str, owner: str) -> None:
    """Define ``name`` as ``value``: a tensor by an Identity (which the import folds or
    the graph passes remove), a sequence or optional by the context's maps
    (:mod:`.onnx_sequences`)."""
    if value in ctx.sequences:
        ctx.sequences[name] = ctx.sequences[value]
    elif value in ctx.optionals:
        ctx.optionals[name] = ctx.optionals[value]
    else:
        ctx.convert_node(helper.make_node("Identity", [value], [name]), f"{owner}/{name}")


def _scalar(ctx, name: str, what: str):
    value = np.asarray(ctx.value_of(name, what))
    if value.size != 1:
        raise ModelError(f"node {ctx.node_name!r}: {what} ({name!r}) must have one element, "
                         f"got shape {value.shape}")
    return value.reshape(-1)[0]


def stack_values(ctx, values: list, axis: int, name: str, owner: str) -> None:
    """Define ``name`` as ``values`` stacked along a new ``axis``."""
    ctx.node_name = owner
    pieces = []
    for v in values:
        shape = list(ctx.type_of(v).shape)
        shape.insert(axis % (len(shape) + 1), 1)
        pieces.append(ctx.emit("reshape", [v], newshape=tuple(shape)))
    ctx.emit("concat", pieces, [name], axis=axis % len(shape))


@converter("If", 1, 11, 13, 16, 19, 21, 23, 24, 25)
def _if(ctx, node, attrs):
    owner = ctx.node_name
    taken = bool(_scalar(ctx, node.input[0], "cond"))
    branch = attrs["then_branch" if taken else "else_branch"]
    _check_outputs(branch, owner)
    outs = inline_subgraph(ctx, branch, owner, f"{owner}/{'then' if taken else 'else'}/", {})
    if len(outs) != len(node.output):
        raise ModelError(f"node {owner!r} (If): its {'then' if taken else 'else'} branch "
                         f"has {len(outs)} outputs, the node {len(node.output)}")
    for value, name in zip(outs, node.output):
        if name:
            alias_value(ctx, value, name, owner)


@converter("Loop", 1, 11, 13, 16, 19, 21, 23, 24, 25)
def _loop(ctx, node, attrs):
    owner, body = ctx.node_name, attrs["body"]
    _check_outputs(body, owner)
    inputs = list(node.input) + [""] * (2 - len(node.input))
    trips = int(_scalar(ctx, inputs[0], "M (the trip count)")) if inputs[0] else None
    cond = bool(_scalar(ctx, inputs[1], "cond")) if inputs[1] else True
    if trips is None and not inputs[1]:
        raise ModelError(f"node {owner!r} (Loop): neither a trip count nor a condition: the "
                         f"loop would never end")
    carried = inputs[2:]
    n_scans = len(body.output) - 1 - len(carried)
    scans: list = [[] for _ in range(n_scans)]
    names = [i.name for i in body.input]
    i = 0
    while cond and (trips is None or i < trips):
        if i == MAX_ITERATIONS:
            raise UnsupportedOpError(
                f"node {owner!r} (Loop): more than {MAX_ITERATIONS} iterations; tecomp "
                f"unrolls loops at import, and this one would not end within that")
        prefix = f"{owner}/{i}/"
        bound = {names[0]: ctx.const(np.array(i, np.int64), name=prefix + names[0]),
                 names[1]: ctx.const(np.array(cond), name=prefix + names[1])}
        bound.update(zip(names[2:], carried))
        outs = inline_subgraph(ctx, body, owner, prefix, bound)
        carried = outs[1:1 + len(carried)]
        for found, value in zip(scans, outs[1 + len(carried):]):
            found.append(value)
        i += 1
        if trips is None or i < trips:
            ctx.node_name = owner
            cond = _body_condition(ctx, outs[0], owner, i - 1)
    for value, name in zip(carried, node.output):
        if name:
            alias_value(ctx, value, name, owner)
    for found, name in zip(scans, node.output[len(carried):]):
        if not name:
            continue
        if not found:
            raise UnsupportedOpError(f"node {owner!r} (Loop): no iteration ran, so its scan "
                                     f"output {name!r} has no element to take a shape from")
        stack_values(ctx, found, 0, name, owner)


def _body_condition(ctx, value: str, owner: str, iteration: int) -> bool:
    """The condition a Loop's body computed in ``iteration``, which the unrolling needs."""
    what = f"the condition of iteration {iteration}"
    try:
        return bool(_scalar(ctx, value, what))
    except NeedsConstantError as e:
        raise NeedsConstantError(
            f"node {owner!r} (Loop): {what} ({value!r}) is not known at import; tecomp "
            f"unrolls loops there, so the condition must follow from constants, shapes and "
            f"the iteration number, not from tensor data", e.value_name, owner,
            what) from None


def _sequence_length(ctx, xs, axes, owner: str) -> int:
    lengths = set()
    for x, axis in zip(xs, axes):
        n = ctx.type_of(x).shape[axis]
        if not dims.is_static(n):
            raise NeedsConstantError(f"node {owner!r} (Scan): the length of sequence {x!r} "
                                     f"({dims.to_text(n)}) must be known at import", x,
                                     owner, "the sequence length")
        lengths.add(int(n))
    if len(lengths) > 1:
        raise ModelError(f"node {owner!r} (Scan): its sequences have different lengths "
                         f"{sorted(lengths)}")
    return lengths.pop()


@converter("Scan", 9, 11, 16, 19, 21, 23, 24, 25)
def _scan(ctx, node, attrs):
    owner, body = ctx.node_name, attrs["body"]
    _check_outputs(body, owner)
    n_scan = int(attrs["num_scan_inputs"])
    states, xs = list(node.input[:len(node.input) - n_scan]), node.input[-n_scan:]
    n_out = len(body.output) - len(states)

    in_axes = [int(a) % len(ctx.type_of(x).shape)
               for a, x in zip(attrs.get("scan_input_axes", [0] * n_scan), xs)]
    in_dirs = list(attrs.get("scan_input_directions", [0] * n_scan))
    out_dirs = list(attrs.get("scan_output_directions", [0] * n_out))
    length = _sequence_length(ctx, xs, in_axes, owner)
    if length > MAX_ITERATIONS:
        raise UnsupportedOpError(f"node {owner!r} (Scan): {length} steps, more than the "
                                 f"{MAX_ITERATIONS} tecomp unrolls at import")
    names = [i.name for i in body.input]
    ys: list = [[] for _ in range(n_out)]
    for t in range(length):
        prefix = f"{owner}/{t}/"
        ctx.node_name = owner
        steps = [ctx.emit("gather", [x, ctx.const(np.array(length - 1 - t if d else t,
                                                           np.int64))],
                          axis=a, node=owner)
                 for x, a, d in zip(xs, in_axes, in_dirs)]
        outs = inline_subgraph(ctx, body, owner, prefix, dict(zip(names, states + steps)))
        states = outs[:len(states)]
        for found, value in zip(ys, outs[len(states):]):
            found.append(value)
    for value, name in zip(states, node.output):
        if name:
            alias_value(ctx, value, name, owner)
    out_axes = list(attrs.get("scan_output_axes", [0] * n_out))
    for found, name, axis, d in zip(ys, node.output[len(states):], out_axes, out_dirs):
        if not name:
            continue
        if not found:
            raise UnsupportedOpError(f"node {owner!r} (Scan): its sequences are empty, so "
                                     f"scan output {name!r} has no element to take a shape "
                                     f"from")
        stack_values(ctx, found[::-1] if d else found, int(axis), name, owner)
