"""An ONNX model whose shapes depend on data the import cannot see, imported again per input.

Where a node needs a value at compile time that the import cannot compute (a ``Reshape``
to a shape read from an input tensor, a ``TopK`` whose ``k`` an input decides, a
``NonZero``), :func:`tecomp.frontend.from_onnx` returns a
:class:`~tecomp.graph.specialise.DeferredGraph` whose ``specialise`` is a
:class:`ModelSpecialiser`: it imports the model again with every input shape fixed, and
the inputs given values made constants (initializers), so the import folds what they
decide (:mod:`tecomp.graph.specialise` caches the builds).

With the shapes fixed, a value still unknown is computed from the *values* of graph
inputs: :func:`value_sources` finds them (not through inputs whose shape and dtype alone
count, such as ``Shape``'s), and the library specialises on them (on inputs of at most
:data:`~tecomp.graph.specialise.MAX_VALUE_ELEMENTS` elements). A value computed from no
input's values stays refused, the error naming the node and its argument.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import onnx
from onnx import numpy_helper

from ..graph.specialise import NeedsInputValues
from .onnx_control_flow import free_names, node_names, subgraphs
from .onnx_converters import ModelError, NeedsConstantError

#: Operator -> the positions of its inputs whose values its outputs never depend on
#: (their shape and dtype only).
SHAPE_ONLY_INPUTS = {"Shape": (0,), "Size": (0,), "EyeLike": (0,), "CastLike": (1,)}


def value_sources(graph: onnx.GraphProto, value: str, inputs) -> tuple:
    """The names among ``inputs`` (graph inputs) whose values ``value`` is computed from,
    in the graph's input order: every input reached going up from ``value`` through the
    nodes that compute it, except through the inputs of :data:`SHAPE_ONLY_INPUTS`
    (``Shape``'s, ``CastLike``'s type template). A node holding subgraphs (If, Loop,
    Scan) computes its outputs, and the values of its subgraphs the import inlines
    (``"If_3/then/x"``), from its inputs and every value of the graph its subgraphs read."""
    producers = {o: node for node in graph.node for o in node.output if o}
    owners = {name: node for name, node in zip(node_names(graph), graph.node)
              if subgraphs(node)}
    inputs = set(inputs)
    seen, walked, stack, found = set(), set(), [value], set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in inputs:
            found.add(name)
            continue
        node = producers.get(name) or owners.get(name.split("/", 1)[0])
        # A node is walked once, however many of its outputs (or inlined values) lead to it.
        if node is not None and id(node) not in walked:
            walked.add(id(node))
            shape_only = SHAPE_ONLY_INPUTS.get(node.op_type, ())
            stack.extend(i for k, i in enumerate(node.input) if i and k not in shape_only)
            stack.extend(v for sub in subgraphs(node) for v in free_names(sub))
    return tuple(vi.name for vi in graph.input if vi.name in found)


def deferral_reason(error: NeedsConstantError) -> str:
    """Why a model is specialised on first run, from the error its import stopped at:
    ``"node 'X': <argument> ('v') is not known at import"``."""
    if not error.node:
        return str(error)
    return f"node {error.node!r}: {error.what} ({error.value_name!r}) is not known at import"


class ModelSpecialiser:
    """``DeferredGraph.specialise`` for an ONNX model: ``(shapes, values, params) ->
    (Graph, params)``, the model imported with input name -> shape ``shapes`` fixed and
    input name -> array ``values`` as initializers, its weights replaced by ``params``.

    Parameters
    ----------
    model : onnx.ModelProto
        The model (not modified).
    dtype : str or dict or None
        ``from_onnx``'s ``dtype``.
    import_model : callable
        ``import_model(model, shape, dtype) -> (Graph, params)``: the import, raising
        :class:`NeedsConstantError` where a value is not known.

    Raises (when called)
    --------------------
    NeedsInputValues
        The import needs the values of inputs not given in ``values``.
    NeedsConstantError
        A value the import needs is computed from no input's values (with the shapes
        fixed, nothing the caller gives decides it).
    ModelError
        ``params`` names a weight the model does not have.
    """

    def __init__(self, model: onnx.ModelProto, dtype, import_model: Callable,
                 container_shapes: dict | None = None):
        self.model = model
        self.dtype = dtype
        self._import = import_model
        # from_onnx's shape= entries of sequence and optional inputs, which the graph's
        # inputs (a sequence's tensors, name[i]) do not name.
        self.container_shapes = dict(container_shapes or {})

    def __call__(self, shapes: dict, values: dict, params: dict) -> tuple:
        model = self._with_constants(values, params)
        # A size of 0 is no kernel's static size (an empty tensor): an input with one
        # keeps the dimensions the model declares, symbolic where it leaves them so.
        inputs = {vi.name for vi in model.graph.input}
        fixed = {name: shape for name, shape in shapes.items()
                 if 0 not in shape and name in inputs and name not in self.container_shapes}
        fixed.update(self.container_shapes)
        try:
            return self._import(model, fixed, self.dtype)
        except NeedsConstantError as e:
            raise self._needed(e, shapes) from None

    def _with_constants(self, values: dict, params: dict) -> onnx.ModelProto:
        """The model with the inputs in ``values`` made initializers and the initializers
        named in ``params`` replaced."""
        weights = {t.name for t in self.model.graph.initializer}
        unknown = sorted(set(params) - weights)
        if unknown:
            raise ModelError(f"params: no weight of the model is named "
                             f"{', '.join(map(repr, unknown))}; its weights: "
                             f"{', '.join(sorted(weights)) or 'none'}")
        model = copy.deepcopy(self.model)
        graph = model.graph
        kept = [vi for vi in graph.input if vi.name not in values]
        del graph.input[:]
        graph.input.extend(kept)
        constants = {**params, **values}
        inits = [t for t in graph.initializer if t.name not in constants]
        inits += [numpy_helper.from_array(np.asarray(v), name) for name, v in constants.items()]
        del graph.initializer[:]
        graph.initializer.extend(inits)
        return model

    def _needed(self, error: NeedsConstantError, shapes: dict) -> Exception:
        """What to raise for ``error``, an import with ``shapes`` fixed: the inputs to
        specialise on, or why there are none."""
        sources = value_sources(self.model.graph, error.value_name, shapes)
        if not sources:
            return NeedsConstantError(
                f"{error}; with every input shape fixed it is still not known: it is not "
                "computed from the values of graph inputs", error.value_name, error.node,
                error.what)
        return NeedsInputValues(str(error), sources)
