"""tecomp as an ONNX backend (``onnx.backend.base.Backend``), as ``onnxruntime.backend``.

>>> import tecomp.frontend.onnx_backend as backend                   # doctest: +SKIP
>>> rep = backend.prepare(model, device="CPU"); outs = rep.run([x])  # doctest: +SKIP

``prepare`` imports and builds the model once (named or unknown input dimensions stay
symbolic; inputs whose values tecomp needs at compile time are specialised on at the first
run, see :class:`TecompRep`); ``run_node`` builds a one-node model around a node and its
inputs. ``device`` is ``"CPU"`` (built for ``llvm``, this machine's CPU) or ``"CUDA"``
(``"CUDA:0"``; built for ``cuda`` and run by the device executor on this machine's GPU),
supported where the target kind runs on this machine (:meth:`TecompBackend.supports_device`).

``rep.run`` is safe to call from several threads at once, as ``InferenceSession.run`` of
onnxruntime is (each call runs on memory of its own, see :class:`~tecomp.graph.GraphModule`).
An input must have the dtype the model declares; ``prepare(model, convert_inputs=True)``
converts instead (:func:`tecomp.graph.executor.input_array` says what passes without it).
"""

from __future__ import annotations

import copy
import threading

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.backend.base import Backend, BackendRep

from ..errors import TecompError
from ..graph import GraphModule, build
from ..graph.executor import InputDtypeError, input_array
from ..target import get_target_kind
from .onnx import ModelError, from_onnx, load_model, unsupported_nodes
from .onnx_converters import NeedsConstantError, onnx_dtype

#: How an ``InputDtypeError`` of a rep says to opt in to converting.
_CONVERT_HINT = "prepare(model, convert_inputs=True)"

#: ONNX backend device types -> the target kind that runs on them.
DEVICE_KINDS = {"CPU": "llvm", "CUDA": "cuda"}


def _device_kind(device) -> str | None:
    """The target kind of ``device`` ("CPU", "CUDA", or either with ":0", in any case), or
    None for another string: tecomp runs on device 0 of a type only."""
    name, sep, ordinal = str(device).upper().partition(":")
    if sep and ordinal != "0":
        return None
    return DEVICE_KINDS.get(name)


def device_target(device) -> str:
    """The target string a model for ``device`` is built for: this machine's CPU, or its
    GPU's architecture.

    Raises
    ------
    TecompError
        ``device`` is not one tecomp knows, or this machine cannot run it (no GPU or
        driver for "CUDA").
    """
    kind = _device_kind(device)
    if kind is None:
        raise TecompError(f"device {device!r} is not one tecomp runs on; allowed: "
                          f"{', '.join(repr(d) for d in DEVICE_KINDS)} (device 0, or "
                          f"'CUDA:0')")
    local = get_target_kind(kind).local_targets()
    if not local:
        raise TecompError(f"device {device!r}: no {kind} device and driver are usable on "
                          f"this machine; tecomp builds for {kind} without one "
                          f"(tecomp.graph.build(mod, target={kind!r})) and the library "
                          f"runs in the simulator (tecomp.graph.GraphModule(lib))")
    return local[0]


def _build(model, bound: dict, convert_inputs: bool, target: str = "llvm") -> GraphModule:
    """Import and build ``model`` for ``target`` with the inputs in ``bound`` (name ->
    array) made constants; the executor of the target's device runs it."""
    if bound:
        model = copy.deepcopy(model)
        kept = [vi for vi in model.graph.input if vi.name not in bound]
        del model.graph.input[:]
        model.graph.input.extend(kept)
        model.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), k)
                                       for k, v in bound.items())
    mod, params = from_onnx(model)
    return GraphModule(build(mod, target=target, params=params), convert_inputs=convert_inputs)


class TecompRep(BackendRep):
    """A model built by :meth:`TecompBackend.prepare`: ``run(inputs)`` runs it.

    An input the model uses where tecomp needs a compile-time value (the axes of a
    reduction, the bounds of a slice, clip limits given as inputs) is specialised on: the
    model is built on the first run with that input's value as a constant, and built
    again when a later run gives another value.

    ``run`` may be called from several threads at once (on a GPU, runs take turns).
    Inputs must have the dtypes the model declares, unless ``convert_inputs``. ``model``
    is the ONNX model, ``input_names`` its graph inputs in order (what ``run``'s list of
    arrays binds to) and ``target`` the target string it is built for.
    """

    def __init__(self, model, input_names: tuple, convert_inputs: bool = False,
                 target: str = "llvm"):
        self.model = model
        self.input_names = input_names
        self.convert_inputs = convert_inputs
        self.target = target
        self._bound_names: tuple = ()
        self._built: dict = {}
        # Finding or building the module of a run's bound values: one thread at a time.
        self._lock = threading.Lock()
        # Built now, so an unsupported model fails in prepare; unless an input's value
        # is needed, which waits for the first run.
        self._module({})

    def _bound_value(self, name: str, value) -> np.ndarray:
        """``value`` of input ``name``, made a constant of the model: held to the dtype
        the model declares, as an input that stays one is."""
        vi = next(vi for vi in self.model.graph.input if vi.name == name)
        dtype = onnx_dtype(vi.type.tensor_type.elem_type, f"input {name!r}")
        return input_array(name, value, dtype, self.convert_inputs)

    def _module(self, feeds: dict) -> tuple:
        """The module for ``feeds``' values of the inputs specialised on, and the names of
        those inputs (read together: another thread's run may add one)."""
        with self._lock:
            return self._find_or_build(feeds), self._bound_names

    def _find_or_build(self, feeds: dict) -> GraphModule:
        while True:
            bound = {k: self._bound_value(k, feeds[k]) for k in self._bound_names}
            key = tuple((k, v.dtype.str, v.shape, v.tobytes()) for k, v in bound.items())
            if key in self._built:
                return self._built[key]
            try:
                gm = self._built[key] = _build(self.model, bound, self.convert_inputs,
                                               self.target)
                return gm
            except NeedsConstantError as e:
                if e.value_name not in self.input_names or e.value_name in self._bound_names:
                    raise
                self._bound_names += (e.value_name,)
                if e.value_name not in feeds:
                    return None

    def run(self, inputs, **kwargs) -> tuple:
        """Run on ``inputs``: a list in the model's input order, a dict by name, or one
        array for a one-input model; returns the outputs as a tuple of numpy arrays.

        Raises
        ------
        InputDtypeError
            An input's dtype is not the one the model declares (and the rep was not
            prepared with ``convert_inputs=True``).
        ModelError, GraphInputError
            Inputs missing, or of shapes the model does not take.
        """
        names = self.input_names
        if isinstance(inputs, dict):
            feeds = dict(inputs)
            missing = [n for n in names if n not in feeds]
            if missing:
                raise ModelError(f"inputs {', '.join(missing)} are missing; the model takes "
                                 f"{', '.join(names)}")
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            if len(inputs) != len(names):
                raise ModelError(f"the model takes {len(names)} inputs ({', '.join(names)}), "
                                 f"got {len(inputs)}")
            feeds = dict(zip(names, inputs))
        try:
            gm, bound = self._module(feeds)
            return tuple(gm(**{k: v for k, v in feeds.items() if k not in bound}))
        except InputDtypeError as e:
            raise e.with_hint(_CONVERT_HINT) from None


class TecompBackend(Backend):
    """The ``onnx.backend`` interface to tecomp (devices ``"CPU"`` and ``"CUDA"``)."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """Whether tecomp runs on ``device`` on this machine, as ``onnxruntime.backend``
        answers: ``"CPU"`` always, ``"CUDA"`` (``"CUDA:0"``) where a GPU and its driver
        are usable; False for other strings."""
        kind = _device_kind(device)
        return kind is not None and bool(get_target_kind(kind).local_targets())

    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        """Whether tecomp can import every operator of ``model`` (nothing is compiled)."""
        return cls.supports_device(device) and not unsupported_nodes(load_model(model))

    @classmethod
    def prepare(cls, model, device: str = "CPU", convert_inputs: bool = False,
                **kwargs) -> TecompRep:
        """Import and build ``model`` for ``device``.

        Parameters
        ----------
        model : onnx.ModelProto or str
            The model, or its path.
        device : str
            ``"CPU"`` (this machine's CPU), or ``"CUDA"`` / ``"CUDA:0"`` (its GPU: the model
            is built for cuda and runs in device memory, numpy in and out).
        convert_inputs : bool
            Let ``run`` convert inputs of another dtype than the model declares (as
            ``np.asarray(value, dtype)``) instead of raising ``InputDtypeError``.

        Raises
        ------
        UnsupportedOpError, ModelError
            As :func:`tecomp.frontend.from_onnx`.
        TecompError
            For a device tecomp does not know or this machine cannot run
            (:func:`device_target`), or a model that cannot be built.
        """
        target = device_target(device)
        model = load_model(model)
        inits = {t.name for t in model.graph.initializer}
        return TecompRep(model, tuple(i.name for i in model.graph.input if i.name not in inits),
                         convert_inputs=convert_inputs, target=target)

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
