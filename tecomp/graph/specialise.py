"""Models whose graph is known only once their input shapes (and maybe a few input values)
are: built per input on first use, and cached.

Symbolic shape values (:mod:`tecomp.frontend.shape_values`) give most models one build for
every shape. A model whose shapes depend on data the compiler cannot see at import (a
``Reshape`` to a shape read from an input tensor, a ``TopK`` whose ``k`` is computed from
an input's value, a ``NonZero``) is imported as a :class:`DeferredGraph` instead of being
refused: its inputs and a ``specialise`` function that imports it again with the shapes
fixed, and the values of the inputs that decide its shapes folded in as constants.

:func:`tecomp.graph.build` makes a :class:`SpecialisingLibrary` of it. Run through
``GraphModule(lib)`` (a :class:`SpecialisingGraphModule`), each call finds the build of
its key, the tuple of its input shapes and the values of the inputs specialised on, in a
least-recently-used cache of :data:`CACHE_SIZE` builds, or imports and builds it there
(one build at a time; runs of builds already made proceed meanwhile, as a
:class:`~tecomp.graph.GraphModule` runs concurrent calls).

Which inputs' values matter is learned: a key first holds the shapes alone; where an
import with the shapes fixed still needs a value, the frontend names the inputs it is
computed from (:class:`NeedsInputValues`) and from then on their values join the key.
Only inputs of at most :data:`MAX_VALUE_ELEMENTS` elements are specialised on: a call
giving a larger one is a :class:`SpecialisationError` naming it and the node that needs
its values.

Such a library cannot be exported: its kernels depend on inputs not yet seen, so running
it needs the compiler (see :meth:`SpecialisingLibrary.export_library`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from ..autotune.context import pop_context, push_context, state
from ..autotune.extract import register_task_extractor
from ..errors import TecompError
from .executor import GraphModule, input_shape_rules

#: The most elements an input may have for its values to be specialised on: shape
#: vectors, axes, counts and scalars have a few; a larger input is data, and a build per
#: value of it would be a build per call.
MAX_VALUE_ELEMENTS = 64

#: How many builds a :class:`SpecialisingLibrary` keeps (least recently used dropped
#: first): a serving process sees a handful of shapes; a model given a new sequence length
#: on every call rebuilds, and this bounds the memory that costs.
CACHE_SIZE = 16


class SpecialisationError(TecompError, ValueError):
    """A model specialised on first run cannot be built for the inputs given: an input
    whose values decide its shapes is too large to specialise on."""


class NeedsInputValues(TecompError):
    """Raised by a :class:`DeferredGraph`'s ``specialise``: with the input shapes fixed,
    the model still needs the values of ``inputs`` (graph input names) at compile time;
    the message says where (``"node 'X': ..."``)."""

    def __init__(self, message: str, inputs: tuple):
        super().__init__(message)
        self.inputs = tuple(inputs)


@dataclass(frozen=True)
class DeferredGraph:
    """A model whose graph depends on its inputs: ``specialise(shapes, values, params)``
    returns ``(Graph, params)`` for input name -> shape ``shapes``, input name -> array
    ``values`` (the inputs made constants, absent from the graph's inputs) and weight
    name -> array ``params``, or raises :class:`NeedsInputValues`.

    ``inputs``, ``outputs`` and ``types`` (each input's declared type, symbolic
    dimensions as ``te.var``) are the model's; ``reason`` names the node that forced
    the deferral and why (``"node 'X': ..."``)."""

    name: str
    inputs: tuple
    outputs: tuple
    types: Mapping
    reason: str
    specialise: Callable

    def __post_init__(self):
        object.__setattr__(self, "types", MappingProxyType(dict(self.types)))

    def __str__(self):
        inputs = ", ".join(f"{n}: {self.types[n]}" for n in self.inputs)
        return (f"graph {self.name}({inputs}) -> ({', '.join(self.outputs)}): specialised "
                f"on first run ({self.reason})")


def _refuse_tasks(mod: DeferredGraph, params=None, target="llvm", precision="fp32"):
    raise TecompError(
        f"extract_tasks: model {mod.name!r} is specialised on first run ({mod.reason}): its "
        "kernels, and so its tuning tasks, are known once its input shapes are; import it "
        "with every input shape fixed (from_onnx(model, shape={...})), and the inputs that "
        "decide its shapes as constants, to extract them")


register_task_extractor(DeferredGraph, _refuse_tasks)


def _contexts() -> tuple:
    """The ``apply_history_best`` contexts active in this thread, innermost last."""
    return tuple(state().contexts)


class SpecialisingGraphModule(GraphModule):
    """Runs a :class:`SpecialisingLibrary` with :class:`~tecomp.graph.GraphModule`'s calls:
    each run finds (or makes) the build of its inputs and runs it.

    Inputs are checked as ``GraphModule`` checks them (dtype, rank, the model's fixed
    dimensions and the sizes its named dimensions share) before a build is looked up.
    Safe to use from several threads at once: builds are made one at a time, and runs
    of a build hold memory of their own.
    """

    def __init__(self, lib: SpecialisingLibrary, *, convert_inputs: bool = False):
        self.lib = lib
        self.graph = lib.graph
        self.convert_inputs = convert_inputs
        self._state = _SpecialisedCallerState()
        self._symbol_dims, self._input_shapes = input_shape_rules(self.graph)

    @property
    def _plan(self):
        gm = self._state.module
        return None if gm is None else gm._plan

    @property
    def run_library(self):
        """The build this thread's last run used (None before its first run)."""
        gm = self._state.module
        return None if gm is None else gm.lib

    def _module(self, arrays: dict, verb: str) -> tuple:
        """The executor of ``arrays``' build and its inputs among ``arrays`` (``verb``:
        how the inputs came, for the error naming one missing)."""
        self._key(arrays, verb)
        self._bind(arrays)  # the declared shapes, before any import
        gm, bound = self.lib.module_for(arrays)
        return gm, {k: v for k, v in arrays.items() if k not in bound}

    def run(self) -> None:
        """Run the build of the inputs this thread set (made first if it is new)."""
        state = self._state
        gm, inputs = self._module(state.inputs, "set")
        for name, value in inputs.items():
            gm.set_input(name, value)
        gm.run()
        state.module = gm

    def get_output(self, index: int) -> np.ndarray:
        """Output ``index`` of this thread's last :meth:`run` (the build's own array)."""
        if self._state.module is None:
            raise TecompError("get_output before run() (in this thread)")
        return self._state.module.get_output(index)

    def profile(self, number: int = 10, repeat: int = 3, in_run: bool = False) -> list:
        """:meth:`GraphModule.profile` of the build of the inputs this thread set."""
        self.run()
        return self._state.module.profile(number, repeat, in_run)

    def __call__(self, **inputs) -> list:
        """Run the build of ``inputs`` (every input, by name); copies of the outputs."""
        return list(self.named_outputs(**inputs).values())

    def named_outputs(self, **inputs) -> dict:
        """Run the build of ``inputs``; output name -> a copy, by that build's names."""
        arrays = {name: self._input(name, value, None) for name, value in inputs.items()}
        gm, own = self._module(arrays, "given")
        return gm.named_outputs(**own)


class _SpecialisedCallerState(threading.local):
    """Per thread: the inputs ``set_input`` set and the executor of the last run."""

    def __init__(self):
        self.inputs: dict = {}
        self.module: GraphModule | None = None


class SpecialisingLibrary:
    """What :func:`tecomp.graph.build` returns for a :class:`DeferredGraph`: one
    :class:`~tecomp.graph.GraphLibrary` per key (input shapes, and the values of the inputs
    specialised on), built on first use and cached (:data:`CACHE_SIZE` builds, least
    recently used dropped first). Run it with ``GraphModule(lib)``.

    Builds made later use the tuning records that were active when ``build`` was called.

    Parameters
    ----------
    graph : DeferredGraph
        The model.
    build : callable
        ``build(Graph, params) -> GraphLibrary`` with the target and options of the
        ``tecomp.graph.build`` call.
    params : dict or None
        Weight name -> array, for every specialisation.
    target : Target
        What the builds are for.
    cache_size : int
        How many builds to keep.
    """

    #: What ``GraphModule(lib)`` makes (:func:`tecomp.graph.executor.executor_class`).
    executor_class = SpecialisingGraphModule

    def __init__(self, graph: DeferredGraph, build: Callable, params: dict | None, target,
                 cache_size: int = CACHE_SIZE):
        if not isinstance(cache_size, int) or cache_size < 1:
            raise ValueError(f"cache_size must be a positive int, got {cache_size!r}")
        self.graph = graph
        self.target = target
        self.cache_size = cache_size
        self._build = build
        self._params = dict(params or {})
        self._records = _contexts()
        #: The inputs whose values are part of a key, in the order they were found, and
        #: what needs each (the frontend's message).
        self.value_inputs: tuple = ()
        self._needed_by: dict = {}
        #: How many builds were made (cache hits make none).
        self.build_count = 0
        # key -> (GraphLibrary, GraphModule, the inputs it takes as constants)
        self._builds: OrderedDict = OrderedDict()
        # _lock guards the cache and value_inputs, held briefly; _build_lock makes one
        # build at a time, so no two threads build the same key.
        self._lock = threading.Lock()
        self._build_lock = threading.Lock()

    @property
    def kernels(self) -> tuple:
        """The kernels of the builds cached now (a build's kernels once each)."""
        with self._lock:
            return tuple(k for lib, *_ in self._builds.values() for k in lib.kernels)

    def module_for(self, arrays: dict) -> tuple:
        """``(GraphModule, bound)``: the executor of the build for ``arrays`` (input name ->
        array, every input, of the declared dtypes) and the names of the inputs it takes
        as constants (the others are its inputs). Builds it when no cached build fits:
        one build at a time, while calls whose build is cached go on."""
        while True:
            entry = self._cached(arrays)
            if entry is not None:
                return entry[1:]
            with self._build_lock:
                if self._cached(arrays) is not None:  # built while this call waited
                    continue
                try:
                    entry = self._specialise(arrays)
                except NeedsInputValues as e:
                    self._add_value_inputs(e)
                    continue
                with self._lock:
                    self._builds[self._key(arrays)] = entry
                    if len(self._builds) > self.cache_size:
                        self._builds.popitem(last=False)
                return entry[1:]

    def _cached(self, arrays: dict) -> tuple | None:
        """The cached ``(GraphLibrary, GraphModule, bound)`` of ``arrays``, or None."""
        self._check_value_sizes(arrays)
        with self._lock:
            key = self._key(arrays)
            entry = self._builds.get(key)
            if entry is not None:
                self._builds.move_to_end(key)
            return entry

    def _add_value_inputs(self, error: NeedsInputValues) -> None:
        """Make the inputs ``error`` names part of every key from now on."""
        new = tuple(n for n in error.inputs if n not in self.value_inputs)
        if not new:  # the frontend asked again for values it was given
            raise TecompError(f"model {self.graph.name!r}: {error}") from None
        with self._lock:
            self.value_inputs += new
            self._needed_by.update(dict.fromkeys(new, str(error)))

    def _check_value_sizes(self, arrays: dict) -> None:
        for name in self.value_inputs:
            size = arrays[name].size
            if size > MAX_VALUE_ELEMENTS:
                raise SpecialisationError(
                    f"{self._needed_by[name]}; it is computed from the values of input "
                    f"{name!r}, given with {size} elements, and a model is specialised on "
                    f"the values of inputs of at most {MAX_VALUE_ELEMENTS} elements only "
                    "(make the input a constant of the model to build it)")

    def _key(self, arrays: dict) -> tuple:
        shapes = tuple(arrays[n].shape for n in self.graph.inputs)
        # Bytes, not numbers: a NaN equals itself as bytes, so its build is found again.
        values = tuple((n, arrays[n].dtype.str, arrays[n].tobytes())
                       for n in self.value_inputs)
        return shapes, values

    def _specialise(self, arrays: dict) -> tuple:
        values = {n: arrays[n] for n in self.value_inputs}
        shapes = {n: arrays[n].shape for n in self.graph.inputs if n not in values}
        for ctx in self._records:
            push_context(ctx)
        try:
            graph, params = self.graph.specialise(shapes, values, self._params)
            lib = self._build(graph, params)
        finally:
            for ctx in reversed(self._records):
                pop_context(ctx)
        self.build_count += 1
        return lib, GraphModule(lib), tuple(values)

    def summary(self) -> str:
        """Says the model is specialised on first run, which node forced it and why, and
        the builds cached now (their keys and kernel counts)."""
        values = (f" and the values of {', '.join(self.value_inputs)}" if self.value_inputs
                  else "")
        lines = [f"specialised on first run ({self.graph.reason}): one build per input "
                 f"shapes{values}, for {self.target}; {self.build_count} builds made, "
                 f"{len(self._builds)} cached (at most {self.cache_size})"]
        with self._lock:
            builds = list(self._builds.items())
        for (shapes, values), (lib, *_) in builds:
            shape_of = dict(zip(self.graph.inputs, shapes))
            key = [f"{n}={np.frombuffer(data, dtype).reshape(shape_of[n]).tolist()}"
                   for n, dtype, data in values]
            given = {n for n, _, _ in values}
            key += [f"{n}{list(s)}" for n, s in shape_of.items() if n not in given]
            lines.append(f"  {', '.join(key)}: {len(lib.kernels)} kernels")
        return "\n".join(lines)

    def export_library(self, path) -> str:
        """Refused: the kernels depend on input shapes (or values) not yet seen, so the
        model needs the compiler at run time.

        Raises
        ------
        TecompError
            Always, saying how to make a model that exports.
        """
        raise TecompError(
            f"cannot export model {self.graph.name!r} to {str(path)!r}: it is specialised on "
            f"first run ({self.graph.reason}), so its kernels depend on the input shapes "
            "it is given and it needs the compiler at run time; import it with every input "
            "shape fixed (from_onnx(model, shape={...}), tecomp compile --input-shape) and "
            "the inputs that decide its shapes as constants (initializers) to build a "
            "library that exports, or run it from the ONNX model (GraphModule(lib), "
            "tecomp run model.onnx)")

    export_header = export_library

    def __repr__(self):
        return (f"<tecomp.graph.SpecialisingLibrary {self.graph.name}: "
                f"{len(self._builds)} builds cached>")
