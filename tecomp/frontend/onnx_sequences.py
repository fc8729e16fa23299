"""ONNX sequences and optionals, resolved at import.

A sequence inside a model (``SequenceConstruct``, ``SplitToSequence``, a ``Loop`` that
inserts into one, ``SequenceMap``) is a list of tensors whose length the import follows:
the context maps the sequence's name to the names of its tensors
(``Context.sequences``), and an optional's name to its tensor's name or None
(``Context.optionals``). ``SequenceAt`` or ``ConcatFromSequence`` then read those tensors
directly, so the graph that results holds tensors only and builds like any other.

What decides a sequence must be known at import, as for control flow
(:mod:`.onnx_control_flow`): positions, split sizes and the length of a split axis are
constants or shape arithmetic. A model whose inputs or outputs are sequences or
optionals is refused at its boundary: a built model takes and returns tensors.
"""

from __future__ import annotations

import numpy as np


from ..graph import dims
from .onnx_control_flow import alias_value, inline_subgraph, stack_values
from .onnx_converters import ModelError, NeedsConstantError, converter


def _sequence(ctx, name: str) -> tuple:
    if name not in ctx.sequences:
        raise ModelError(f"node {ctx.node_name!r}: {name!r} is not a sequence")
    return ctx.sequences[name]


def _alias(ctx, value: str, name: str) -> None:
    owner = ctx.node_name
    alias_value(ctx, value, name, owner)
    ctx.node_name = owner


def _position(ctx, name: str, length: int, insert: bool = False) -> int:
    """The position input ``name`` names in a sequence of ``length``: ``-length`` to
    ``length - 1``, negative ones counting from the end; an insert may also name
    ``length``, the end (so its ``-1`` is before the last element, as ONNX says)."""
    value = np.asarray(ctx.value_of(name, "position"))
    if value.size != 1:
        raise ModelError(f"node {ctx.node_name!r}: position ({name!r}) must be a scalar, got "
                         f"shape {value.shape}")
    pos = int(value.reshape(-1)[0])
    top = length if insert else length - 1
    if not -length <= pos <= top:
        raise ModelError(f"node {ctx.node_name!r}: position {pos} is outside the sequence of "
                         f"length {length} (allowed: {-length} to {top})")
    return pos + length if pos < 0 else pos


@converter("SequenceConstruct", 11)
def _construct(ctx, node, attrs):
    ctx.sequences[node.output[0]] = tuple(node.input)


@converter("SequenceEmpty", 11)
def _empty(ctx, node, attrs):
    ctx.sequences[node.output[0]] = ()


@converter("SequenceLength", 11)
def _length(ctx, node, attrs):
    ctx.const(np.array(len(_sequence(ctx, node.input[0])), np.int64), name=node.output[0])


@converter("SequenceAt", 11)
def _at(ctx, node, attrs):
    seq = _sequence(ctx, node.input[0])
    _alias(ctx, seq[_position(ctx, node.input[1], len(seq))], node.output[0])


@converter("SequenceInsert", 11)
def _insert(ctx, node, attrs):
    seq = _sequence(ctx, node.input[0])
    pos = (_position(ctx, node.input[2], len(seq), insert=True)
           if len(node.input) > 2 and node.input[2] else len(seq))
    ctx.sequences[node.output[0]] = seq[:pos] + (node.input[1],) + seq[pos:]


@converter("SequenceErase", 11)
def _erase(ctx, node, attrs):
    seq = _sequence(ctx, node.input[0])
    if not seq:
        raise ModelError(f"node {ctx.node_name!r} (SequenceErase): the sequence is empty")
    pos = (_position(ctx, node.input[1], len(seq)) if len(node.input) > 1 and node.input[1]
           else len(seq) - 1)
    ctx.sequences[node.output[0]] = seq[:pos] + seq[pos + 1:]


@converter("SplitToSequence", 11, 24)
def _split_to_sequence(ctx, node, attrs):
    x = node.input[0]
    shape = ctx.type_of(x).shape
    axis = int(attrs.get("axis", 0)) % len(shape)
    extent = shape[axis]
    if not dims.is_static(extent):
        raise NeedsConstantError(
            f"node {ctx.node_name!r} (SplitToSequence): the length of axis {axis} "
            f"({dims.to_text(extent)}) decides the sequence's length and must be known at "
            f"import", x, ctx.node_name, "the split axis's length")
    extent = int(extent)
    given = len(node.input) > 1 and node.input[1]
    if not given:
        sizes = [1] * extent
    else:
        split = np.asarray(ctx.value_of(node.input[1], "split")).astype(np.int64)
        if split.ndim == 0:
            if split <= 0:
                raise ModelError(f"node {ctx.node_name!r} (SplitToSequence): split must be "
                                 f"positive, got {int(split)}")
            sizes = [int(split)] * (extent // int(split))
            sizes += [extent % int(split)] if extent % int(split) else []
        else:
            sizes = [int(s) for s in split.reshape(-1)]
            if sum(sizes) != extent or min(sizes, default=0) < 0:
                raise ModelError(f"node {ctx.node_name!r} (SplitToSequence): split {sizes} "
                                 f"must be non-negative and add up to axis {axis}'s {extent}")
    squeeze = not given and not int(attrs.get("keepdims", 1))
    pieces, start = [], 0
    for size in sizes:
        piece = ctx.emit("slice", [x], starts=(start,), ends=(start + size,), axes=(axis,),
                         steps=(1,))
        if squeeze:
            piece = ctx.emit("reshape", [piece],
                             newshape=tuple(d for i, d in enumerate(shape) if i != axis))
        pieces.append(piece)
        start += size
    ctx.sequences[node.output[0]] = tuple(pieces)


@converter("ConcatFromSequence", 11)
def _concat_from_sequence(ctx, node, attrs):
    seq = _sequence(ctx, node.input[0])
    if not seq:
        raise ModelError(f"node {ctx.node_name!r} (ConcatFromSequence): the sequence is "
                         f"empty, so the result has no shape")
    axis = int(attrs["axis"])
    if int(attrs.get("new_axis", 0)):
        stack_values(ctx, list(seq), axis, node.output[0], ctx.node_name)
    else:
        rank = len(ctx.type_of(seq[0]).shape)
        ctx.emit("concat", list(seq), node.output, axis=axis % rank)


@converter("SequenceMap", 17)
def _sequence_map(ctx, node, attrs):
    owner, body = ctx.node_name, attrs["body"]
    inputs = list(node.input)
    lengths = {len(ctx.sequences[i]) for i in inputs if i in ctx.sequences}
    if len(lengths) != 1:
        raise ModelError(f"node {owner!r} (SequenceMap): its sequences have lengths "
                         f"{sorted(lengths)}; they must have one")
    names = [i.name for i in body.input]
    results: list = [[] for _ in body.output]
    for k in range(lengths.pop()):
        bound = {n: (ctx.sequences[i][k] if i in ctx.sequences else i)
                 for n, i in zip(names, inputs)}
        outs = inline_subgraph(ctx, body, owner, f"{owner}/{k}/", bound)
        for found, value in zip(results, outs):
            found.append(value)
        ctx.node_name = owner
    for name, found in zip(node.output, results):
        if name:
            ctx.sequences[name] = tuple(found)


@converter("Optional", 15, 28)
def _optional(ctx, node, attrs):
    ctx.optionals[node.output[0]] = node.input[0] if node.input and node.input[0] else None


@converter("OptionalHasElement", 15, 18, 28)
def _has_element(ctx, node, attrs):
    value = node.input[0] if node.input else ""
    has = bool(value) and ctx.optionals.get(value, value) is not None
    ctx.const(np.array(has), name=node.output[0])


@converter("OptionalGetElement", 15, 18, 28)
def _get_element(ctx, node, attrs):
    value = node.input[0]
    if value in ctx.optionals:
        value = ctx.optionals[value]
        if value is None:
            raise ModelError(f"node {ctx.node_name!r} (OptionalGetElement): the optional "
                             f"{node.input[0]!r} is empty")
    _alias(ctx, value, node.output[0])


def container_kind(type_proto):
    """``(kind, tensor type)`` of an ONNX value's type: kind ``"tensor"``, ``"sequence"``,
    ``"optional"`` (of a tensor) or ``"optional sequence"``, and the ``TypeProto.Tensor``
    of its tensors (None for a map or an unsaid type)."""
    kind = type_proto.WhichOneof("value")
    if kind in (None, "tensor_type"):
        return "tensor", type_proto.tensor_type if kind else None
    if kind == "sequence_type":
        inner, _ = container_kind(type_proto.sequence_type.elem_type)
        return ("sequence" if inner == "tensor" else "map",
                type_proto.sequence_type.elem_type.tensor_type)
    if kind == "optional_type":
        inner, tensor = container_kind(type_proto.optional_type.elem_type)
        return ("optional" if inner == "tensor" else f"optional {inner}"), tensor
    return "map", None


def element_names(name: str, count: int) -> list:
    """The graph values that hold the tensors of sequence input or output ``name``:
    ``name[0]``, ``name[1]``, ..."""
    return [f"{name}[{i}]" for i in range(count)]


def bind_container_input(ctx_maps: tuple, vi, shape: dict) -> list:
    """The tensor inputs that stand for graph input ``vi``, as ``(name, TypeProto.Tensor,
    shape or None)``: itself for a tensor, ``name[i]`` for a sequence's tensors (recorded
    in ``ctx_maps``, ``(sequences, optionals)``). ``shape`` is ``from_onnx``'s: a
    sequence's entry gives its tensors' shapes (a list of shapes), an optional's None
    for an empty one (an optional it does not name is given)."""
    sequences, optionals = ctx_maps
    given = shape.get(vi.name)
    kind, tensor = container_kind(vi.type)
    if kind == "map":
        raise ModelError(f"input {vi.name!r} is a map or a sequence of maps; tecomp runs "
                         f"tensors, sequences and optionals")
    if kind.startswith("optional") and vi.name in shape and given is None:
        optionals[vi.name] = None
        return []
    listed = isinstance(given, list) and all(isinstance(g, (list, tuple)) for g in given)
    # An optional whose element type is left unsaid holds a sequence where given one.
    if kind == "tensor" or (kind == "optional" and not listed):
        return [(vi.name, tensor, given)]
    if not listed:
        raise ModelError(f"input {vi.name!r} is a sequence: give the shapes of its tensors "
                         f"as shape={{{vi.name!r}: [(...), (...), ...]}}")
    names = element_names(vi.name, len(given))
    sequences[vi.name] = tuple(names)
    return [(n, tensor, tuple(g)) for n, g in zip(names, given)]


def bind_container_output(ctx, name: str) -> list:
    """The graph outputs that stand for output ``name``: a tensor itself, a sequence's
    tensors as ``name[i]``, an optional's tensor as ``name`` (none if it is empty)."""
    if name in ctx.sequences:
        outs = element_names(name, len(ctx.sequences[name]))
        for value, out in zip(ctx.sequences[name], outs):
            alias_value(ctx, value, out, f"output {name}")
        return outs
    if name in ctx.optionals:
        value = ctx.optionals.pop(name)
        if value is None:
            return []
        alias_value(ctx, value, name, f"output {name}")
        if name in ctx.sequences:
            return bind_container_output(ctx, name)
    return [name]


def group_outputs(model, values: dict) -> list:
    """``model``'s outputs from a build's outputs by name (``values``): a list of arrays
    for a sequence output (its tensors ``name[i]``, also where the model leaves the
    output's type unsaid), None for an empty optional."""
    out = []
    for o in model.graph.output:
        kind, _ = container_kind(o.type)
        count = sum(1 for n in values if n.startswith(f"{o.name}["))
        if o.name in values:
            out.append(values[o.name])
        elif count or kind == "sequence":
            out.append([values[n] for n in element_names(o.name, count)])
        else:
            out.append(None)
    return out


__all__ = ["bind_container_input", "bind_container_output", "container_kind",
           "group_outputs"]
