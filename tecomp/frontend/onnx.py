"""ONNX importer: an ONNX model -> a :class:`tecomp.graph.Graph` and its weights.

Every ONNX operator is converted by a function registered for the ONNX since-versions
whose semantics it implements (:func:`converter`); a model's node is dispatched on the
since-version its opset selects, as the ONNX spec versions each operator. Before anything
is converted the whole model is checked, so a model tecomp cannot import fails with one
error: every unsupported ``(op_type, version)`` in one :class:`UnsupportedOpError`, or a
:class:`ModelError` naming the first malformed node (an input nothing defines, an attribute
of the wrong type, shapes that do not fit).
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict

import numpy as np
import onnx
from onnx import numpy_helper

from .. import te
from ..errors import TecompError, UnsupportedOpError
from ..graph import dims
from ..graph.infer import infer_types
from ..graph.ir import Graph, TensorType
from ..graph.ops import GraphTypeError
from ..graph.specialise import DeferredGraph
from . import shape_values
from . import (  # noqa: F401 (importing registers their converters)
    onnx_bits, onnx_causal_conv, onnx_control_flow, onnx_data_dependent,
    onnx_linear_attention, onnx_math, onnx_normalization, onnx_recurrent, onnx_sampling,
    onnx_scatter, onnx_sequences, onnx_signal, onnx_tensor_ops)
from .onnx_checks import check_node
from .onnx_converters import (
    NOT_FOLDED,
    Context,
    ModelError,
    NeedsConstantError,
    converter_of,
    onnx_dtype,
    reference_outputs,
    since_version,
    supported_ops,
)
from .onnx_control_flow import alias_value, node_names, subgraphs
from .onnx_specialise import SHAPE_ONLY_INPUTS, ModelSpecialiser, deferral_reason

__all__ = ["ModelError", "from_onnx", "load_model", "supported_ops", "unsupported_nodes"]

logger = logging.getLogger("tecomp.frontend")


# ---- folding of nodes whose inputs are known -------------------------------------------------

# Nodes whose inputs are all known and at most this many elements each are evaluated at
# import (shape arithmetic, small constant tables); heavier constant work is left to the
# graph's constant folding.
FOLD_LIMIT = 4096


def _known_value(ctx, name: str):
    """The value of ``name`` if the import knows it (a constant, or shape arithmetic whose
    result is static), else None."""
    if name in ctx.consts:
        return ctx.consts[name]
    t = ctx.types.get(name)
    if t is None or t.content is None or not all(dims.is_static(d) for d in t.content):
        return None
    return np.array(t.content, dtype=t.dtype).reshape(t.shape)


def _fold_input(ctx, name: str, type_only: bool):
    """The value ``_fold`` evaluates input ``name`` with: its known value, or where only
    its type counts (``type_only``), zeros of its static shape and dtype (a broadcast
    view, no memory); None if neither is known."""
    value = _known_value(ctx, name)
    t = ctx.types.get(name)
    if value is not None or not type_only or t is None or not all(
            dims.is_static(d) for d in t.shape):
        return value
    return np.broadcast_to(np.zeros((), t.dtype), tuple(int(d) for d in t.shape))


def _fold(ctx, node, opset_imports) -> bool:
    """Evaluate ``node`` with onnx's reference evaluator when every input is known and
    small, making its outputs constants; returns whether it did. An input whose shape and
    dtype alone count (``CastLike``'s type template, :data:`SHAPE_ONLY_INPUTS`) needs a
    static type only. Nodes without inputs (Constant, ConstantOfShape's absent input) are
    left to their converters."""
    if node.op_type in NOT_FOLDED:
        return False
    type_only = SHAPE_ONLY_INPUTS.get(node.op_type, ())
    values = [_fold_input(ctx, i, k in type_only) if i else None
              for k, i in enumerate(node.input)]
    if not node.input or any(v is None and i for v, i in zip(values, node.input)) or any(
            v is not None and v.size > FOLD_LIMIT and k not in type_only
            for k, v in enumerate(values)):
        return False
    try:
        results = reference_outputs(node, {n: v for n, v in zip(node.input, values) if n},
                                    opset_imports)
    except Exception:  # noqa: BLE001 - the converter then handles the node as usual
        return False
    if not all(isinstance(r, np.ndarray) for r in results):
        return False
    for name, value in zip([o for o in node.output if o], results):
        ctx.const(value, name=name)
    return True


def _convert(ctx, node, attrs) -> None:
    """Convert ``node``, following shape arithmetic (:mod:`.shape_values`): outputs whose
    values the inputs' shapes decide, up to the symbolic dimensions, are defined by those
    values; other nodes go to their converters."""
    if node.op_type == "Identity" and (node.input[0] in ctx.sequences
                                       or node.input[0] in ctx.optionals):
        alias_value(ctx, node.input[0], node.output[0], ctx.node_name)
        return
    values = shape_values.evaluate(ctx, node, attrs)
    if values is None:
        converter_of(node, ctx.version)(ctx, node, attrs)
    else:
        shape_values.define(ctx, node, attrs, values)


# ---- checks before conversion -------------------------------------------------------------


def _opsets(model) -> dict:
    return {(o.domain if o.domain != "ai.onnx" else ""): o.version for o in model.opset_import}


def _nodes_within(graph, names=None):
    """``(name, node)`` for every node of ``graph`` and, after each node holding them, of
    its subgraphs (If's branches, Loop's and Scan's bodies), depth first."""
    for name, node in zip(names or node_names(graph), graph.node):
        yield name, node
        for sub in subgraphs(node):
            yield from _nodes_within(sub, [f"{name}/{n}" for n in node_names(sub)])


def unsupported_nodes(model) -> dict:
    """``(op_type, version) -> [node names]`` for every operator of ``model`` the importer
    has no converter for (empty when it can import all of them), subgraphs included."""
    graph, opsets = model.graph, _opsets(model)
    missing: dict = defaultdict(list)
    for name, node in _nodes_within(graph):
        opset = opsets.get(node.domain or "")
        if opset is None:
            missing[(f"{node.domain}.{node.op_type}", 0)].append(name)
            continue
        version = since_version(node.op_type, opset, node.domain)
        if converter_of(node, version) is None:
            key = node.op_type if node.domain in ("", "ai.onnx") else (
                f"{node.domain}.{node.op_type}")
            missing[(key, version or opset)].append(name)
    return dict(missing)


def _check_supported(model) -> None:
    missing = unsupported_nodes(model)
    if missing:
        lines = [f"  {op} (version {v}): nodes {', '.join(names)}"
                 for (op, v), names in sorted(missing.items())]
        raise UnsupportedOpError("the model uses operators tecomp cannot import:\n"
                                 + "\n".join(lines))


def _check_wiring_and_attributes(graph, opsets: dict) -> None:
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    for name, node in zip(node_names(graph), graph.node):
        for i in node.input:
            if i and i not in defined:
                raise ModelError(f"node {name!r} ({node.op_type}) reads {i!r}, which no graph "
                                 "input, initializer or earlier node defines")
        try:
            schema = onnx.defs.get_schema(node.op_type, opsets.get(node.domain or "", 1),
                                          node.domain)
        except onnx.defs.SchemaError:
            # An operator of another domain (com.microsoft's): its converter reads the
            # attributes.
            defined.update(o for o in node.output if o)
            continue
        for a in node.attribute:
            spec = schema.attributes.get(a.name)
            if spec is None:
                raise ModelError(f"node {name!r} ({node.op_type}): unknown attribute "
                                 f"{a.name!r}; allowed: {', '.join(sorted(schema.attributes))}")
            if a.type != spec.type:
                raise ModelError(
                    f"node {name!r} ({node.op_type}): attribute {a.name!r} is "
                    f"{onnx.AttributeProto.AttributeType.Name(a.type)}, the operator needs "
                    f"{onnx.AttributeProto.AttributeType.Name(spec.type)}")
        defined.update(o for o in node.output if o)
    for o in graph.output:
        if o.name not in defined:
            raise ModelError(f"graph output {o.name!r} is not computed by any node")


# ---- inputs ---------------------------------------------------------------------------------


def _input_type(name: str, t, given, dtype, symbols: dict) -> TensorType:
    """The type of graph input ``name`` of ONNX tensor type ``t``: ``given`` (a shape
    from ``from_onnx``'s ``shape``) or the model's, unknown dimensions symbolic."""
    if isinstance(dtype, dict) and name in dtype:
        dt = str(dtype[name])
    elif dtype is not None and not isinstance(dtype, dict):
        dt = str(dtype)
    elif t is None or not t.elem_type:
        raise ModelError(f"input {name!r} has no element type; give it with "
                         f"dtype={{{name!r}: ...}}")
    else:
        dt = onnx_dtype(t.elem_type, f"input {name!r}")
    dims = list(t.shape.dim) if t is not None and t.HasField("shape") else None
    if given is None:
        if dims is None:
            raise ModelError(f"input {name!r} has no shape; give it with "
                             f"shape={{{name!r}: (...)}}")
        given = [None] * len(dims)
    elif dims is not None and len(given) != len(dims):
        raise ModelError(f"shape[{name!r}] has {len(given)} dimensions; the model's input "
                         f"has {len(dims)}")

    def symbol(sym: str):
        return symbols.setdefault(sym, te.var(sym))

    out = []
    for i, d in enumerate(given):
        if isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0:
            out.append(int(d))
        elif isinstance(d, str) and d.isidentifier():
            out.append(symbol(d))  # a size left symbolic, shared by every dim of that name
        elif d is None and dims is not None:  # the model's own dimension
            m = dims[i]
            if m.HasField("dim_value") and m.dim_value > 0:
                out.append(int(m.dim_value))
            else:
                out.append(symbol(m.dim_param if m.HasField("dim_param") and m.dim_param
                                  else f"{name}_dim{i}"))
        else:
            raise ModelError(
                f"shape[{name!r}]: dimension {i} is {d!r}; allowed: a size (an int >= 0), "
                f"a name (a str, the size left symbolic and shared by the dimensions so "
                f"named) or None (the model's own dimension"
                f"{'' if dims is not None else ', which this input does not give'})")
    return TensorType(dt, tuple(out))


def load_model(model) -> onnx.ModelProto:
    """An ``onnx.ModelProto`` from a model or a path (external data next to it loads)."""
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (str, os.PathLike)):
        if not os.path.exists(model):
            raise ModelError(f"no ONNX model at {os.fspath(model)!r}")
        try:
            return onnx.load(os.fspath(model))
        except Exception as e:  # a corrupt protobuf: say which file, not protobuf internals
            raise ModelError(f"{os.fspath(model)!r} is not a readable ONNX model: {e}") from None
    raise TypeError(f"from_onnx: model must be an onnx.ModelProto or a path, not "
                    f"{type(model).__name__}")


def from_onnx(model, shape: dict | None = None, dtype=None):
    """Import an ONNX model.

    Parameters
    ----------
    model : onnx.ModelProto or str or os.PathLike
        The model, or the path of an ``.onnx`` file (external data files next to it load).
    shape : dict, optional
        Input name -> shape, fixing dimensions the model leaves named (``batch``) or
        unknown. Other named or unknown dimensions stay symbolic (``te.var`` named after
        the dimension), and one build serves every size. An entry of a shape is a size
        (int), a name (str: the size stays symbolic, shared by every dimension of that
        name, as ``("batch", 1)`` fixes a decoder's query length and keeps its batch) or
        None (the model's own dimension).
    dtype : str or dict, optional
        The dtype of every input, or input name -> dtype; default: the model's.

    Returns
    -------
    mod : tecomp.graph.Graph or tecomp.graph.specialise.DeferredGraph
        The typed graph; its constants are the model's initializers. Where a node needs
        a value the import cannot compute from the input shapes (a shape read from an
        input tensor, a ``NonZero``), a ``DeferredGraph``: ``tecomp.graph.build`` then
        builds it per input shapes (and values of the small inputs deciding them) on
        first run (:mod:`tecomp.frontend.onnx_specialise`); one line is logged
        (``tecomp.frontend``) naming the node.
    params : dict
        Initializer name -> numpy array (``tecomp.graph.build(mod, params=params)``).

    Raises
    ------
    UnsupportedOpError
        One error listing every unsupported ``(op_type, version)`` and the nodes using it.
    ModelError
        A malformed model; the message names the node.

    Examples
    --------
    >>> mod, params = tecomp.frontend.from_onnx("model.onnx", shape={"x": (1, 3, 224, 224)})
    ...                                                       # doctest: +SKIP
    """
    return _import_model(load_model(model), shape, dtype, defer=True)


def _import_model(model: onnx.ModelProto, shape: dict | None, dtype, defer: bool = False):
    """:func:`from_onnx` of a loaded model; a value the import cannot compute raises
    ``NeedsConstantError``, or with ``defer`` gives a ``DeferredGraph``."""
    graph = model.graph
    opsets = _opsets(model)
    _check_supported(model)
    _check_wiring_and_attributes(graph, opsets)

    params = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    symbols: dict = {}
    inputs, types = [], {}
    containers: tuple = ({}, {})  # sequences, optionals (onnx_sequences)
    shape = shape or {}
    for vi in graph.input:
        if vi.name in params:
            continue
        for name, t, given in onnx_sequences.bind_container_input(containers, vi, shape):
            inputs.append(name)
            types[name] = _input_type(name, t, given, dtype, symbols)
    unknown = set(shape) - {vi.name for vi in graph.input}
    if unknown:
        raise ModelError(f"shape= names {', '.join(sorted(unknown))}, which are not inputs of "
                         f"the model; inputs: {', '.join(inputs)}")
    used = {i for _, n in _nodes_within(graph) for i in n.input}
    used |= {o.name for o in graph.output}
    ctx = Context(types=dict(types), consts={}, used=frozenset(used),
                  sequences=containers[0], optionals=containers[1])
    for name, array in params.items():
        ctx.const(array, name=name)
    try:
        _convert_nodes(ctx, model)
        outputs = tuple(out for o in graph.output
                        for out in onnx_sequences.bind_container_output(ctx, o.name))
    except NeedsConstantError as e:
        if not defer:
            raise
        return _deferred(model, inputs, types, dtype, e,
                         {n: shape[n] for n in shape if n not in types}), params
    used = {i for n in ctx.nodes for i in n.inputs} | set(outputs)
    consts = {k: v for k, v in ctx.consts.items() if k in used}
    mod = Graph(inputs=tuple(inputs), outputs=outputs, nodes=tuple(ctx.nodes), consts=consts,
                types=types, name=graph.name or "main")
    mod = infer_types(mod)
    # The type rules do not follow every step of shape arithmetic (a comparison, a Where):
    # the values the import followed stay on the types, as a reader of the graph expects.
    types = {name: t if t.content is not None or name not in ctx.types
             or ctx.types[name].shape != t.shape else ctx.types[name]
             for name, t in mod.types.items()}
    return mod.with_(types=types), {k: v for k, v in params.items() if k in used}


def _convert_nodes(ctx, model) -> None:
    """Fold or convert every node of ``model`` into ``ctx``, in order."""
    graph, opsets = model.graph, _opsets(model)

    def convert_node(node, name: str) -> None:
        ctx.node_name = name
        ctx.version = since_version(node.op_type, opsets.get(node.domain or "", 1), node.domain)
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        # The spec's rules before folding or converting: either would take an out-of-range
        # axis modulo the rank, or hand a kernel a size it loops or overruns on.
        check_node(node, name, ctx.version, attrs, type_of=ctx.types.get,
                   value_of=lambda value: _known_value(ctx, value))
        try:
            if not _fold(ctx, node, model.opset_import):
                _convert(ctx, node, attrs)
        except GraphTypeError as e:
            raise ModelError(str(e)) from None
        except (KeyError, IndexError, TypeError, ValueError) as e:
            if isinstance(e, TecompError):
                raise
            # A node the converter cannot read (a missing attribute or input): name it.
            raise ModelError(f"node {name!r} ({node.op_type}): cannot convert it: "
                             f"{type(e).__name__}: {e}") from None

    ctx.convert_node = convert_node
    for name, node in zip(node_names(graph), graph.node):
        convert_node(node, name)


def _deferred(model, inputs: list, types: dict, dtype, error,
              container_shapes: dict) -> DeferredGraph:
    """The model as a ``DeferredGraph``: its import stopped at ``error``, a value only the
    inputs decide; ``container_shapes``: ``shape=`` of its sequence and optional inputs."""
    name = model.graph.name or "main"
    reason = deferral_reason(error)
    logger.warning("model %r is specialised on first run (%s): it is built per input shapes "
                   "when first run with them", name, reason)
    return DeferredGraph(name, tuple(inputs), tuple(o.name for o in model.graph.output),
                         types, reason,
                         ModelSpecialiser(model, dtype, _import_model, container_shapes))
