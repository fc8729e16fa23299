"""tecomp as an ONNX backend (``onnx.backend.base.Backend``), as ``onnxruntime.backend``.

>>> import tecomp.frontend.onnx_backend as backend                   # doctest: +SKIP
>>> rep = backend.prepare(model, device="CPU"); outs = rep.run([x])  # doctest: +SKIP

``prepare`` imports and builds the model once (named or unknown input dimensions stay
symbolic; a model whose shapes depend on its inputs' values is built per input on first
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

import numpy as np
import onnx
from onnx import helper
from onnx.backend.base import Backend, BackendRep

from ..errors import TecompError
from ..graph import GraphModule, build
from ..graph.executor import InputDtypeError
from ..target import get_target_kind
from .onnx import ModelError, from_onnx, load_model, unsupported_nodes
from .onnx_sequences import container_kind, element_names, group_outputs

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


class TecompRep(BackendRep):
    """A model built by :meth:`TecompBackend.prepare`: ``run(inputs)`` runs it.

    A model whose shapes or compile-time values an input decides (a Reshape to a shape
    given as an input, the axes of a reduction or clip limits given as inputs, a
    ``NonZero``) is built on its first run with those inputs' shapes and values, and
    again for each new one (:mod:`tecomp.graph.specialise`).

    ``run`` may be called from several threads at once (on a GPU, runs take turns).
    A sequence input is a list of arrays and an optional one an array or None: the model
    is built per sequence length and tensor shapes, and per optional given or not. A
    sequence output is returned as a list of arrays, an empty optional as None.

    Inputs must have the dtypes the model declares, unless ``convert_inputs``. ``model``
    is the ONNX model, ``input_names`` its graph inputs in order (what ``run``'s list of
    arrays binds to), ``target`` the target string it is built for and ``module`` the
    :class:`~tecomp.graph.GraphModule` that runs it (None where the model has sequence or
    optional inputs: ``modules`` holds a build per their shapes).
    """

    def __init__(self, model, input_names: tuple, convert_inputs: bool = False,
                 target: str = "llvm"):
        self.model = model
        self.input_names = input_names
        self.convert_inputs = convert_inputs
        self.target = target
        kinds = {vi.name: container_kind(vi.type)[0] for vi in model.graph.input}
        self._containers = {n: kinds[n] for n in input_names if kinds[n] != "tensor"}
        self.modules: dict = {}
        self.module = None if self._containers else self._build({})

    def _build(self, shape: dict, dtype: dict | None = None) -> GraphModule:
        """The GraphModule of the model imported with ``shape`` (and the ``dtype`` of a
        sequence's tensors, which a model may leave unsaid)."""
        mod, params = from_onnx(self.model, shape=shape or None, dtype=dtype or None)
        return GraphModule(build(mod, target=self.target, params=params),
                           convert_inputs=self.convert_inputs)

    def _flatten(self, feeds: dict) -> tuple:
        """The build for ``feeds``' shapes (sequences' and optionals' included), and its
        tensor inputs."""
        shape, dtype, flat = {}, {}, {}
        for name, value in feeds.items():
            if value is None and name in self._containers:
                shape[name] = None
            elif isinstance(value, (list, tuple)) and name in self._containers:
                arrays = [np.asarray(v) for v in value]
                shape[name] = [a.shape for a in arrays]
                names = element_names(name, len(arrays))
                flat.update(zip(names, arrays))
                dtype.update((n, a.dtype) for n, a in zip(names, arrays))
            else:
                flat[name] = value
                shape[name] = np.shape(value)
        key = repr((sorted(shape.items()), sorted(dtype.items())))
        if key not in self.modules:
            self.modules[key] = self._build(shape, dtype)
        return self.modules[key], flat

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
        module, feeds = self._flatten(feeds) if self._containers else (self.module, feeds)
        try:
            values = module.named_outputs(**feeds)
        except InputDtypeError as e:
            raise e.with_hint(_CONVERT_HINT) from None
        return tuple(group_outputs(self.model, values))


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
