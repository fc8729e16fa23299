"""tecomp as an ONNX backend (``onnx.backend.base.Backend``), as ``onnxruntime.backend``.

>>> import tecomp.frontend.onnx_backend as backend                   # doctest: +SKIP
>>> rep = backend.prepare(model, device="CPU"); outs = rep.run([x])  # doctest: +SKIP

``prepare`` imports and builds the model once (named or unknown input dimensions stay
symbolic; inputs whose values tecomp needs at compile time are specialised on at the first
run, see :class:`TecompRep`); ``run_node`` builds a one-node model around a node and its
inputs. Only the CPU device is supported.
"""

from __future__ import annotations

import copy

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.backend.base import Backend, BackendRep

from ..errors import TecompError
from ..graph import GraphModule, build
from .onnx import ModelError, from_onnx, load_model, unsupported_nodes
from .onnx_converters import NeedsConstantError


def _build(model, bound: dict) -> GraphModule:
    """Import and build ``model`` with the inputs in ``bound`` (name -> array) made
    constants."""
    if bound:
        model = copy.deepcopy(model)
        kept = [vi for vi in model.graph.input if vi.name not in bound]
        del model.graph.input[:]
        model.graph.input.extend(kept)
        model.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), k)
                                       for k, v in bound.items())
    mod, params = from_onnx(model)
    return GraphModule(build(mod, target="llvm", params=params))


class TecompRep(BackendRep):
    """A model built by :meth:`TecompBackend.prepare`: ``run(inputs)`` runs it.

    An input the model uses where tecomp needs a compile-time value (the axes of a
    reduction, the bounds of a slice, clip limits given as inputs) is specialised on: the
    model is built on the first run with that input's value as a constant, and built
    again when a later run gives another value.
    """

    def __init__(self, model, input_names: tuple):
        self.model = model
        self.input_names = input_names
        self._bound_names: tuple = ()
        self._built: dict = {}
        # Built now, so an unsupported model fails in prepare; unless an input's value
        # is needed, which waits for the first run.
        self._module({})

    def _module(self, feeds: dict) -> GraphModule:
        while True:
            bound = {k: np.asarray(feeds[k]) for k in self._bound_names}
            key = tuple((k, v.dtype.str, v.shape, v.tobytes()) for k, v in bound.items())
            if key in self._built:
                return self._built[key]
            try:
                gm = self._built[key] = _build(self.model, bound)
                return gm
            except NeedsConstantError as e:
                if e.value_name not in self.input_names or e.value_name in self._bound_names:
                    raise
                self._bound_names += (e.value_name,)
                if e.value_name not in feeds:
                    return None

    def run(self, inputs, **kwargs) -> tuple:
        """Run on ``inputs``: a list in the model's input order, a dict by name, or one
        array for a one-input model; returns the outputs as a tuple of numpy arrays."""
        names = self.input_names
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            if len(inputs) != len(names):
                raise ModelError(f"the model takes {len(names)} inputs ({', '.join(names)}), "
                                 f"got {len(inputs)}")
            feeds = dict(zip(names, inputs))
        gm = self._module(feeds)
        return tuple(gm(**{k: v for k, v in feeds.items() if k not in self._bound_names}))


class TecompBackend(Backend):
    """The ``onnx.backend`` interface to tecomp (device ``"CPU"``)."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """Whether tecomp runs on ``device``: only ``"CPU"``."""
        return str(device).upper() == "CPU"

    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        """Whether tecomp can import every operator of ``model`` (nothing is compiled)."""
        return cls.supports_device(device) and not unsupported_nodes(load_model(model))

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> TecompRep:
        """Import and build ``model`` for the CPU.

        Raises
        ------
        UnsupportedOpError, ModelError
            As :func:`tecomp.frontend.from_onnx`.
        TecompError
            For another device, or a model that cannot be built.
        """
        if not cls.supports_device(device):
            raise TecompError(f"device {device!r} is not supported; tecomp runs on 'CPU'")
        model = load_model(model)
        inits = {t.name for t in model.graph.initializer}
        return TecompRep(model, tuple(i.name for i in model.graph.input if i.name not in inits))

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs) -> tuple:
        """Run one ONNX node on ``inputs`` (arrays for its non-empty inputs, in order)."""
        inputs = [np.asarray(x) for x in inputs]
        names = [n for n in node.input if n]
        value_infos = [helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape) for n, x in zip(names, inputs)]
        outputs = [helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None)
                   for n in node.output if n]
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        model = helper.make_model(helper.make_graph([node], "node", value_infos, outputs),
                                  opset_imports=[helper.make_opsetid("", opset)])
        return cls.prepare(model, device).run(inputs)


prepare = TecompBackend.prepare
run_model = TecompBackend.run_model
run_node = TecompBackend.run_node
supports_device = TecompBackend.supports_device
is_compatible = TecompBackend.is_compatible
