"""``GraphModule``: runs a built graph on numpy arrays.

The symbolic dimensions of the graph are bound from the inputs' shapes at run time, so one
build serves every batch or sequence size. Runs use *memory plans*, each laid out once
for a bucket of sizes (every symbolic size rounded up, :func:`size_bucket`) and kept
(the pools of the :data:`PLAN_SHAPES_KEPT` buckets used last): every intermediate value
gets an offset in one arena, and values whose lifetimes (from the kernel that writes them
to the last kernel that reads them or a reshape of them) do not overlap share bytes; a
reshape is no kernel but a view of its source's bytes, and the inputs of a concatenation
computed in place are slices of its output (:mod:`tecomp.graph.storage`). A plan serves
every size of its bucket: for a shape it has not run, it makes the views over its
buffers and gives its calls the new sizes. A run then only calls kernels on views of the
arena, their arguments packed once per plan (``PackedFunction.prepare``): nothing is
allocated per call for shapes seen before, and a run is one native call that calls the
kernels in order (``CallSequence``).

A plan (its arena, outputs and packed calls) serves one run at a time, so that several
threads can call one ``GraphModule`` at once, as an inference server calls one loaded
model: each bucket has a pool of plans; a call takes a free one (or makes one when every
plan of the bucket is in use) and gives it back once its outputs are copied.
Kernels are native calls that release the GIL, so concurrent callers overlap.

Inputs must have the dtype the graph declares (:func:`input_array`); converting is an
explicit choice (``convert_inputs=True``), never a silent one.
"""

from __future__ import annotations

import functools
import importlib
import math
import operator
import threading
import time
from dataclasses import dataclass, replace

import numpy as np

from ..errors import TecompError
from ..ir import expr as E
from ..runtime import aligned
from ..runtime.aligned import ALIGNMENT
from ..runtime.args import data_pointer
from ..runtime.module import CallSequence, TimingResult
from . import dims
from .storage import buffer_lifetimes, is_view, value_homes


class GraphInputError(TecompError, ValueError):
    """An input is missing, unknown, or does not fit the graph's input type."""


class InputDtypeError(GraphInputError):
    """An input's dtype is not the one the graph declares (and converting was not asked
    for).

    Parameters
    ----------
    input : str
        The graph input.
    got, want : str
        The value's dtype (or the kind of Python value) and the declared dtype.
    detail : str
        What else is wrong (a value out of range, one that overflows), or "".
    hint : str
        How to opt in to converting where the error is raised (a caller such as
        ``tecomp run`` replaces it with :meth:`with_hint`).
    """

    def __init__(self, input: str, got: str, want: str, detail: str = "",
                 hint: str = "GraphModule(lib, convert_inputs=True) for every call, or "
                             "set_input(name, value, convert=True)"):
        self.input, self.got, self.want, self.detail, self.hint = input, got, want, detail, hint
        super().__init__(input, got, want, detail, hint)

    def __str__(self) -> str:
        detail = f", and {self.detail}" if self.detail else ""
        example = "" if self.got.startswith("Python") else f" (x.astype({self.want!r}))"
        return (f"input {self.input!r} is {self.got} but the model declares {self.want}"
                f"{detail}; pass {self.want} data{example}, or opt in to converting: "
                f"{self.hint}")

    def with_hint(self, hint: str) -> InputDtypeError:
        """The same error with another way to opt in to converting."""
        return InputDtypeError(self.input, self.got, self.want, self.detail, hint)


def input_array(name: str, value, dtype, convert: bool = False) -> np.ndarray:
    """``value`` as a C-contiguous array of ``dtype``, the dtype graph input ``name``
    declares, under the rule that a run never changes a value silently.

    - An array, or anything with a ``dtype`` (numpy scalars, arrays of other libraries):
      its dtype must be ``dtype``. An array that fits is used as it is, not copied.
    - Python numbers and (nested) lists, which carry no dtype, are converted when that
      loses nothing but the rounding a float literal always has: ``bool`` to a bool input;
      ``int`` to an integer or float input when every value is exactly representable;
      ``float`` to a float input (rounded to its precision, an error if a finite value
      overflows). Anything else (strings, floats for an integer input, ints out of range,
      bools for a number input) is an error.
    - ``convert=True`` converts anything numpy can, as ``np.asarray(value, dtype)`` does
      (floats truncate to integers, NaN becomes an arbitrary integer, strings are parsed).

    Parameters
    ----------
    name : str
        The input, for the error message.
    value : array_like
        The value given.
    dtype : str or numpy.dtype
        The input's dtype.
    convert : bool
        Convert to ``dtype`` whatever the value's dtype.

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    InputDtypeError
        The value's dtype (or its Python values) do not fit ``dtype``.

    Examples
    --------
    >>> input_array("x", np.zeros(2, "float32"), "float32").dtype
    dtype('float32')
    >>> input_array("x", [1, 2], "float32")
    array([1., 2.], dtype=float32)
    >>> input_array("x", np.zeros(2), "float32")        # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    InputDtypeError: input 'x' is float64 but the model declares float32; ...
    """
    want = np.dtype(dtype)
    if convert:
        value = np.asarray(value, dtype=want)
    elif hasattr(value, "dtype") or hasattr(value, "__array__"):
        value = np.asarray(value)
        if value.dtype != want:
            raise InputDtypeError(name, str(value.dtype), str(want))
    else:
        value = _from_python(name, value, want)
    if not value.flags.c_contiguous:
        value = value.copy(order="C")  # (ascontiguousarray would make a scalar 1-D)
    return value


def _from_python(name: str, value, want: np.dtype) -> np.ndarray:
    """Python numbers or lists as an array of ``want``: see :func:`input_array`."""
    try:
        a = np.asarray(value)
    except ValueError as e:  # a ragged list
        raise GraphInputError(f"input {name!r}: {e}") from None
    if a.dtype == want:
        return a
    got = _PYTHON_KINDS.get(a.dtype.kind, f"Python {a.dtype}")
    if a.dtype.kind in "iu" and want.kind in "iu":
        info = np.iinfo(want)
        if a.size == 0 or (info.min <= a.min() and a.max() <= info.max):
            return a.astype(want)
        raise InputDtypeError(name, got, str(want), f"a value is out of the range of {want}")
    if a.dtype.kind in "iu" and want.kind == "f":
        out = a.astype(want)
        with np.errstate(invalid="ignore"):  # (a float beyond the int range casts back wrong)
            exact = np.array_equal(out.astype(a.dtype), a)  # float32 skips ints past 2**24
        if exact:
            return out
        raise InputDtypeError(name, got, str(want), f"a value is not exactly a {want}")
    if a.dtype.kind == "f" and want.kind == "f":
        with np.errstate(over="ignore"):
            out = a.astype(want)
        if np.array_equal(np.isfinite(out), np.isfinite(a)):
            return out
        raise InputDtypeError(name, got, str(want), f"a value overflows {want}")
    raise InputDtypeError(name, got, str(want))


#: What ``np.asarray`` makes of Python values, by dtype kind, for error messages.
_PYTHON_KINDS = {"b": "Python bool", "i": "Python int", "u": "Python int",
                 "f": "Python float", "c": "Python complex", "U": "Python str",
                 "S": "Python bytes", "O": "Python object"}


@dataclass(frozen=True)
class MemoryPlan:
    """Where every value of one run lives, for one binding of the symbolic dimensions:
    ``arena`` (bytes) with ``views`` (value -> array over it) for intermediates, made for
    the shapes its calls were packed at (at later shapes every buffer keeps its address
    and only the calls' sizes change), and
    ``outputs`` (value -> array) that a run writes and ``get_output`` returns; a reshape of
    a graph input is made on each run: ``input_views`` holds (value, input, shape)."""

    arena: np.ndarray
    views: dict
    outputs: dict
    input_views: tuple
    #: The kernel calls of a run, their arguments packed once (``PreparedCall``), and
    #: (graph input, ((call, argument index), ...)): the arguments a run points at each
    #: input.
    calls: tuple = ()
    input_slots: tuple = ()
    #: ``calls`` as one native call (``CallSequence``).
    sequence: CallSequence | None = None
    #: ((a call's sizes, index), ...) per size expression (``GraphModule._size_groups``):
    #: where the sizes a run passes go, rewritten when the plan serves new shapes.
    size_slots: tuple = ()
    #: The input shapes the views and calls are for now.
    shapes: tuple = ()
    #: The layout, made for the sizes of its pool (see ``GraphModule._pool_key``): the
    #: arena offset of each buffer, and each output's flat buffer; the views of any
    #: smaller sizes that fit are made over them.
    offsets: dict = None
    output_buffers: dict = None
    #: The key of the pool the plan belongs to.
    pool_key: tuple = ()


def plan_offsets(sizes: list, lifetimes: list) -> tuple:
    """Offsets for buffers of ``sizes`` bytes alive over ``lifetimes`` (first, last) kernel
    indices, such that buffers alive at the same time do not overlap; returns (offsets,
    total bytes). Largest buffers are placed first, each at the lowest aligned offset that
    fits beside the buffers already placed that it overlaps in time (first fit)."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    offsets = [0] * len(sizes)
    placed: list = []
    total = 0
    for i in order:
        first, last = lifetimes[i]
        busy = sorted((offsets[j], offsets[j] + sizes[j]) for j in placed
                      if not (lifetimes[j][1] < first or last < lifetimes[j][0]))
        offset = 0
        for lo, hi in busy:
            if offset + sizes[i] <= lo:
                break
            offset = max(offset, -(-hi // ALIGNMENT) * ALIGNMENT)
        offsets[i] = offset
        placed.append(i)
        total = max(total, offset + sizes[i])
    return offsets, total


#: Pools of memory plans a ``GraphModule`` keeps; past it the least recently used pool's
#: plans are dropped. A pool serves a range of sizes (``size_bucket``), so a decoder's
#: steps, each with a longer past, share a few pools instead of growing memory with the
#: length of the generation.
PLAN_SHAPES_KEPT = 16

#: Input-shape tuples whose bound sizes a ``GraphModule`` remembers (binding and checking
#: the sizes of every run again took the executor's own work per SqueezeNet run from 1.4
#: to 4.0 us).
KNOWN_SHAPES_KEPT = 256


def input_shape_rules(graph) -> tuple:
    """What binds a run's symbolic sizes (:meth:`GraphModule._bind`): (symbol, input
    index, dimension) of each symbol's first dimension among ``graph``'s inputs (by
    identity: two symbols may share a name), and a function giving every input's shape
    under the sizes bound, which must be the shapes given."""
    shapes = [graph.types[n].shape for n in graph.inputs]
    seen: list = []
    first = []
    for i, shape in enumerate(shapes):
        for d, dim in enumerate(shape):
            if isinstance(dim, E.Var) and not any(v is dim for v in seen):
                seen.append(dim)
                first.append((dim, i, d))
    return tuple(first), dims.shapes_evaluator(shapes)


def size_bucket(n: int) -> int:
    """The size a plan is laid out for, to serve a symbolic size of ``n``: the next power
    of two up to 64, then the next multiple of 64. A plan made once then serves every
    size of its bucket: a new shape costs its views and its calls' sizes, not a layout.

    >>> [size_bucket(n) for n in (0, 1, 3, 33, 64, 65, 130)]
    [0, 1, 4, 64, 64, 128, 192]
    """
    if n <= 1:
        return n
    return 1 << (n - 1).bit_length() if n <= 64 else -(-n // 64) * 64


class _PlanPool:
    """The memory plans of one bucket of sizes: the sizes they are laid out for, and the
    plans no run holds now."""

    __slots__ = ("bindings", "free")

    def __init__(self, bindings: dict):
        self.bindings = bindings
        self.free: list = []


class _CallerState(threading.local):
    """What ``set_input`` / ``run`` / ``get_output`` keep, one copy per thread: the inputs
    set, the plan of the last ``run`` (held until the next one, so that ``get_output``
    reads outputs no other call overwrites), and the plan the last run or call used."""

    def __init__(self):
        self.inputs: dict = {}
        self.plan: MemoryPlan | None = None
        self.last: MemoryPlan | None = None


#: The executor of libraries whose runtime module keeps a model's values in a device's
#: memory (it answers ``module.device_memory``, as a CUDA module does): (module, class),
#: imported by name the first time such a library is run, so that loading and running a
#: CPU model imports nothing of devices.
DEVICE_EXECUTOR = ("tecomp.graph.device_executor", "DeviceGraphModule")


def executor_class(lib) -> type:
    """The :class:`GraphModule` class that runs ``lib``: the one the library names (a
    library specialised on first run, :mod:`tecomp.graph.specialise`), the device executor
    where its module offers a device's memory, else the host executor itself."""
    own = getattr(lib, "executor_class", None)
    if own is not None:
        return own
    if getattr(lib.module, "device_memory", None) is None:
        return GraphModule
    module, name = DEVICE_EXECUTOR
    return getattr(importlib.import_module(module), name)


class GraphModule:
    """Run a :class:`~tecomp.graph.library.GraphLibrary`.

    One class for every device, as TVM's ``graph_executor.GraphModule``: a library built
    for a device target (``target="cuda"``) makes a
    :class:`~tecomp.graph.device_executor.DeviceGraphModule` (its values in device
    memory; on a GPU, or in the simulator without one), which takes the same calls and
    also ``simulate=`` and ``device_outputs=``.

    ``gm(**inputs)`` runs on the inputs given and returns copies of the outputs, keeping
    nothing; ``set_input`` / ``run`` / ``get_output`` keep the inputs set and the outputs of
    the last run (the module's own arrays, not copies). Both are safe to use from several
    threads at once on one module: each run holds a memory plan of its own while it runs,
    and what ``set_input`` / ``run`` keep is kept per thread, so a thread's ``run`` and
    ``get_output`` see only the inputs that thread set.

    Parameters
    ----------
    lib : GraphLibrary
        The built graph.
    convert_inputs : bool
        Convert inputs of another dtype than the graph declares (``np.asarray(value,
        dtype)``) instead of raising :class:`InputDtypeError`; :func:`input_array` says
        what is accepted without it.

    Examples
    --------
    >>> gm = tecomp.graph.GraphModule(lib)                       # doctest: +SKIP
    >>> gm.set_input("x", x); gm.run(); y = gm.get_output(0)     # doctest: +SKIP
    >>> y, = gm(x=x)                                             # doctest: +SKIP
    >>> with ThreadPoolExecutor(4) as pool:                      # doctest: +SKIP
    ...     ys = list(pool.map(lambda x: gm(x=x)[0], xs))
    """

    #: Whether the kernels run in a simulator rather than on the hardware they were
    #: built for (a device executor without its device).
    simulated = False
    #: Whether :meth:`profile` times the calls of whole runs (``in_run=True``): host
    #: kernels run one after another, a device queues them without waiting in between.
    profiles_in_run = True

    def __new__(cls, lib=None, **options):
        if cls is GraphModule and lib is not None:
            cls = executor_class(lib)
            unknown = set(options) - {"convert_inputs"}
            if cls is GraphModule and unknown:
                raise TypeError(f"GraphModule: {', '.join(sorted(unknown))} apply to a "
                                f"library built for a device target (cuda); this one's "
                                f"kernels run on the host, which takes convert_inputs only")
        return super().__new__(cls)

    def __init__(self, lib, *, convert_inputs: bool = False):
        self.lib = lib
        self.graph = lib.graph
        self.convert_inputs = convert_inputs
        # Pool key (_pool_key) -> _PlanPool: a pool holds as many plans as runs of its
        # bucket have been in flight at once; the dict's order is that of last use (see
        # PLAN_SHAPES_KEPT).
        self._plans: dict = {}
        # Input shapes -> (pool key, bound sizes), for the KNOWN_SHAPES_KEPT used last.
        self._known: dict = {}
        # Arenas of the plans of dropped shapes, which no run holds: a new plan takes one
        # that is large enough instead of fresh memory, whose pages the first run would
        # fault in (a decoder's every step has new shapes).
        self._spare_arenas: list = []
        self._lock = threading.Lock()
        self._state = _CallerState()
        graph = self.graph
        self._kernel_nodes = [n for n in graph.nodes if not is_view(n)]
        self._kernels = [(lib.module[n.name], n.inputs, n.outputs[0])
                         for n in self._kernel_nodes]
        self._lifetimes = buffer_lifetimes(graph)
        self._homes = value_homes(graph)
        # The views of graph inputs (reshapes of them), made for each new shape.
        self._input_homes = tuple((v, root) for v, (root, _) in self._homes.items()
                                  if root in graph.inputs)
        self._symbol_dims, self._input_shapes = input_shape_rules(graph)
        # Pool key of a bucket -> (whether its sizes are all valid, the elements of each
        # buffer of self._lifetimes at them): what _pool_key compares a new shape's
        # buffers with, evaluated once per bucket.
        self._rooms: dict = {}
        # What a new plan evaluates: the shapes of the inputs, the buffers and their views.
        self._planned = list(dict.fromkeys([*graph.inputs, *self._lifetimes, *self._homes]))
        self._planned_shapes = dims.shapes_evaluator(
            [graph.types[v].shape for v in self._planned])
        # The graph outputs kernels write, in the order of a plan's output_buffers.
        self._output_roots = tuple(v for v in self._lifetimes if v in graph.outputs)
        # The elements of each buffer kernels write, which _pool_key compares with a
        # bucket's layout for every new shape.
        self._buffer_sizes = dims.sizes_evaluator(
            [graph.types[v].shape for v in self._lifetimes])
        self._dtypes = {v: np.dtype(graph.types[v].dtype) for v in self._planned}
        self._dim_checks = lib.dim_checks

    @property
    def input_names(self) -> tuple:
        """The names of the graph's inputs, in order."""
        return self.graph.inputs

    @property
    def num_outputs(self) -> int:
        """How many outputs a run gives."""
        return len(self.graph.outputs)

    @property
    def run_library(self):
        """The library whose kernels this thread's runs call: ``lib`` (a library
        specialised on first run answers the build of its last run)."""
        return self.lib

    @property
    def _plan(self) -> MemoryPlan | None:
        """The memory plan of this thread's last run or call, to inspect its buffers (after
        a call, another call may be using it already)."""
        return self._state.last

    def set_input(self, name: str, value, *, convert: bool | None = None) -> None:
        """Set input ``name`` to ``value`` for this thread's next :meth:`run`.

        ``value`` must have the input's dtype, or be Python numbers that convert exactly
        (:func:`input_array`); an array that fits is read, not copied.

        Parameters
        ----------
        name : str
            One of :attr:`input_names`.
        value : array_like
            The input.
        convert : bool, optional
            Convert a value of another dtype (``np.asarray(value, dtype)``); default: the
            module's ``convert_inputs``.

        Raises
        ------
        GraphInputError
            ``name`` is not an input, or the value's rank does not fit.
        InputDtypeError
            The value's dtype is not the input's, and converting was not asked for.
        """
        self._state.inputs[name] = self._input(name, value, convert)

    def _input(self, name: str, value, convert: bool | None) -> np.ndarray:
        if name not in self.graph.inputs:
            raise GraphInputError(f"{name!r} is not an input; inputs: "
                                  f"{', '.join(self.graph.inputs)}")
        t = self.graph.types[name]
        value = input_array(name, value, t.dtype,
                            self.convert_inputs if convert is None else convert)
        if value.ndim != len(t.shape):
            raise GraphInputError(f"input {name!r} must have rank {len(t.shape)} "
                                  f"({t}), got shape {value.shape}")
        return value

    def _key(self, inputs: dict, verb: str) -> tuple:
        """The input shapes of ``inputs``, which key the plans."""
        try:
            return tuple(inputs[n].shape for n in self.graph.inputs)
        except KeyError:
            missing = [n for n in self.graph.inputs if n not in inputs]
            raise GraphInputError(f"inputs {', '.join(missing)} are not {verb}") from None

    def _bind(self, inputs: dict) -> dict:
        """The symbolic sizes ``inputs`` give (symbol -> int); raises if the inputs'
        shapes disagree with one another or with the graph's."""
        shapes = [inputs[n].shape for n in self.graph.inputs]
        bindings = {v: shapes[i][d] for v, i, d in self._symbol_dims}
        if self._input_shapes(bindings) == shapes:
            return bindings
        return self._bind_and_explain(inputs)

    def _bind_and_explain(self, inputs: dict) -> dict:
        """:meth:`_bind`, input by input, raising the error that names what disagrees."""
        bindings: dict = {}
        for name in self.graph.inputs:
            shape = self.graph.types[name].shape
            for d, got in zip(shape, inputs[name].shape):
                if isinstance(d, E.Var):
                    prev = next((n for v, n in bindings.items() if v is d), None)
                    if prev is not None and prev != got:
                        raise GraphInputError(f"input {name!r}: size {d.name} is {got} here "
                                              f"but {prev} in another input")
                    bindings[d] = got
        for name in self.graph.inputs:
            t = self.graph.types[name]
            want = tuple(dims.evaluate(d, bindings) for d in t.shape)
            if want != inputs[name].shape:
                declared = ", ".join(map(dims.to_text, t.shape))
                raise GraphInputError(f"input {name!r} must have shape [{declared}] = {want}, "
                                      f"got {inputs[name].shape}")
        return bindings

    def _check_dims(self, bindings) -> None:
        """Raise if ``bindings`` break a shape condition left to run time (a position
        table sliced to ``min(seq, 512)`` rows added to ``seq`` tokens)."""
        for check in self._dim_checks:
            if not check.holds(bindings):
                raise GraphInputError(check.message(bindings))

    def _acquire(self, shapes: tuple, inputs: dict) -> MemoryPlan:
        """A plan for ``inputs`` (of ``shapes``) that no other run holds: a free one of
        the pool serving those shapes, else a new one, which :meth:`_release` adds to it;
        its views and calls made for ``shapes`` if they are not."""
        with self._lock:
            known = self._known.pop(shapes, None)
        if known is None:
            bindings = self._bind(inputs)
            self._check_dims(bindings)
            known = (self._pool_key(bindings, shapes), bindings)
        key, bindings = known
        with self._lock:
            self._known[shapes] = known  # the most recently used, last
            while len(self._known) > KNOWN_SHAPES_KEPT:
                del self._known[next(iter(self._known))]
            pool = self._plans.pop(key[0], None)
            plan = pool.free.pop() if pool is not None and pool.free else None
            if pool is None:
                pool = _PlanPool(key[1])
                while len(self._plans) >= PLAN_SHAPES_KEPT:
                    dropped = self._plans.pop(next(iter(self._plans)))
                    self._spare_arenas = sorted(
                        self._spare_arenas + [p.arena for p in dropped.free],
                        key=len)[-PLAN_SHAPES_KEPT:]
            self._plans[key[0]] = pool  # the most recently used, last
        if plan is None:
            plan = self._make_plan(pool.bindings, key[0])
        if plan.shapes != shapes:
            plan = self._fit(plan, bindings, shapes, inputs)
        return plan

    def _pool_key(self, bindings: dict, shapes: tuple) -> tuple:
        """(the key of the pool serving ``bindings``; the sizes its plans are laid out
        for): every symbolic size rounded up to its :func:`size_bucket`, or the exact
        sizes where a buffer would then not be the largest (a size that shrinks as a
        symbol grows)."""
        bucket = {v: size_bucket(n) for v, n in bindings.items()}
        key = ("bucket", *sorted((v.name, n) for v, n in bucket.items()))
        if bucket != bindings:
            room = self._rooms.get(key)
            if room is None:
                room_shapes = self._value_shapes(bucket)
                room = (all(n >= 0 for d in room_shapes.values() for n in d),
                        self._buffer_sizes(bucket))
                with self._lock:  # concurrent callers: evict and insert as one step
                    if len(self._rooms) >= KNOWN_SHAPES_KEPT:
                        del self._rooms[next(iter(self._rooms))]
                    self._rooms[key] = room
            valid, room_sizes = room
            if not (valid and all(map(operator.le, self._buffer_sizes(bindings),
                                      room_sizes))):
                return ("shapes", shapes), bindings
        return key, bucket

    def _release(self, plan: MemoryPlan) -> None:
        """Give ``plan`` back to its pool (unless the pool was dropped meanwhile)."""
        with self._lock:
            pool = self._plans.get(plan.pool_key)
            if pool is not None:
                pool.free.append(plan)

    def _make_plan(self, bindings: dict, key: tuple) -> MemoryPlan:
        """A plan laid out for the sizes ``bindings`` (its pool's), without views."""
        graph = self.graph
        shape_of = self._value_shapes(bindings)
        output_buffers = {v: aligned.empty(math.prod(shape_of[v]), self._dtypes[v])
                          for v in self._output_roots}
        # The other roots kernels write, in order of first write.
        inter = [v for v in self._lifetimes if v not in graph.outputs]
        sizes = [max(math.prod(shape_of[v]) * self._dtypes[v].itemsize, 1) for v in inter]
        offsets, total = plan_offsets(sizes, [self._lifetimes[v] for v in inter])
        return MemoryPlan(self._arena(total), {}, {}, (), shapes=None,
                          offsets=dict(zip(inter, offsets)), output_buffers=output_buffers,
                          pool_key=key)

    def _fit(self, plan: MemoryPlan, bindings: dict, shapes: tuple,
             inputs: dict) -> MemoryPlan:
        """``plan`` with its outputs and calls made for ``shapes`` (whose sizes are
        ``bindings``), over its layout: the first time with views of every buffer to pack
        the calls from, after that only the calls' sizes (every buffer keeps its address
        from one size to the next), as a decoder's every step has new shapes."""
        fitted = self._fitted_shapes(bindings)
        n_out, n_views = len(self._output_roots), len(self._input_homes)
        outputs = {v: plan.output_buffers[v][:math.prod(shape)].reshape(shape)
                   for v, shape in zip(self._output_roots, fitted)}
        input_views = tuple((v, root, shape) for (v, root), shape
                            in zip(self._input_homes, fitted[n_out:n_out + n_views]))
        plan = replace(plan, outputs=outputs, input_views=input_views, shapes=shapes)
        if plan.calls:
            for (n,), targets in zip(fitted[n_out + n_views:], plan.size_slots):
                for sizes, k in targets:
                    sizes[k] = n
            return plan
        plan = replace(plan, views=self._views(plan, self._value_shapes(bindings)))
        return self._prepare_calls(plan, inputs)

    def _views(self, plan: MemoryPlan, shape_of: dict) -> dict:
        """The arrays over ``plan``'s arena, outputs and the constants of every value
        kernels read or write but the graph inputs and their reshapes, at the shapes
        ``shape_of``."""
        arena, offsets = plan.arena, plan.offsets
        views = {v: np.ndarray(shape_of[v], self._dtypes[v], buffer=arena, offset=off)
                 for v, off in offsets.items()}
        held = {**self.graph.consts, **plan.outputs}
        for v, (root, offset) in self._homes.items():
            shape, dtype = shape_of[v], self._dtypes[v]
            if root in offsets:
                views[v] = np.ndarray(shape, dtype, buffer=arena, offset=offsets[root] + offset)
            elif root not in self.graph.inputs:  # a reshape of a constant or a graph output
                views[v] = held[root].reshape(shape)
        return views

    def _value_shapes(self, bindings: dict) -> dict:
        """Value -> its shape under ``bindings``, for the inputs, the buffers kernels write
        and the views of them."""
        return dict(zip(self._planned, self._planned_shapes(bindings)))

    def _arena(self, nbytes: int) -> np.ndarray:
        """At least ``nbytes`` bytes for a new plan: the smallest spare arena that holds
        them, else fresh memory with a quarter to spare (so that the arena can serve the
        next, a little larger, shapes once its plan is dropped)."""
        with self._lock:
            fits = [k for k, a in enumerate(self._spare_arenas) if len(a) >= nbytes]
            if fits:
                return self._spare_arenas.pop(fits[0])
        return aligned.empty(nbytes + nbytes // 4, np.uint8)

    def run(self) -> None:
        """Run the graph on the inputs this thread set.

        The thread holds the plan of its last run until its next one, so that
        :meth:`get_output` reads outputs no other run overwrites."""
        state = self._state
        shapes = self._key(state.inputs, "set")
        plan = state.plan
        if plan is None or plan.shapes != shapes:
            plan = self._acquire(shapes, state.inputs)
            if state.plan is not None:
                self._release(state.plan)
            state.plan = plan
        state.last = plan
        self._execute(plan, state.inputs)

    @staticmethod
    def _execute(plan: MemoryPlan, inputs: dict) -> None:
        """Run ``plan``'s kernel calls on ``inputs``; the caller holds the plan."""
        for name, slots in plan.input_slots:
            value = inputs[name]
            address = data_pointer(value)
            for call, index in slots:
                call.set_pointer(index, value, address)
        plan.sequence()

    def _prepare_calls(self, plan: MemoryPlan, inputs: dict) -> MemoryPlan:
        """``plan`` with its kernel calls packed: every array of a run has its kernel's
        dtype and C layout (set_input checks the inputs, the plan allocates the rest)
        and the shapes type inference gave for the bound sizes, so the arguments are
        checked once, here, by construction, and a run is one native call per kernel. Only
        the inputs' addresses change from run to run (a view of an input shares its
        address)."""
        values = self._values(plan, inputs)
        root = {v: source for v, source, _ in plan.input_views}
        root.update((name, name) for name in self.graph.inputs)
        calls = []
        slots: dict = {name: [] for name in self.graph.inputs}
        groups, call_groups = self._size_groups
        size_slots = tuple([] for _ in groups)
        for (kernel, args_in, output), size_groups in zip(self._kernels, call_groups):
            args = (*args_in, output)
            call = kernel.prepare(*(values[a] for a in args))
            calls.append(call)
            for k, a in enumerate(args):
                if a in root:
                    slots[root[a]].append((call, k))
            for k, group in size_groups:
                size_slots[group].append((call.sizes, k))
        input_slots = tuple((name, tuple(s)) for name, s in slots.items() if s)
        return replace(plan, calls=tuple(calls), sequence=CallSequence(calls),
                       input_slots=input_slots, size_slots=tuple(map(tuple, size_slots)))

    @functools.cached_property
    def _size_groups(self) -> tuple:
        """The sizes the kernel calls read off arguments that are not constants (constants'
        sizes never change): (value, dimension) of each distinct size expression (a
        decoder's ``past + seq`` is many values' dimension; dimensions are one expression
        where their text and symbols are, by identity: two symbols may share a name), and
        per kernel ((its size index, that expression's index), ...). What a plan rewrites
        for new shapes."""
        index: dict = {}
        groups, per_call = [], []
        for kernel, args_in, output in self._kernels:
            args = (*args_in, output)
            mine = []
            for k, (i, d) in enumerate(kernel.size_sources):
                if args[i] in self.graph.consts:
                    continue
                dim = self.graph.types[args[i]].shape[d]
                key = (dims.to_text(dim), *map(id, dims.symbols([dim])))
                if key not in index:
                    index[key] = len(groups)
                    groups.append((args[i], d))
                mine.append((k, index[key]))
            per_call.append(tuple(mine))
        return tuple(groups), tuple(per_call)

    @functools.cached_property
    def _fitted_shapes(self):
        """What a plan whose calls are packed evaluates for new shapes, and only that: its
        outputs' shapes, its input views' shapes and its size expressions (evaluating
        every value's shape took a third of a decoder step's executor work)."""
        types = self.graph.types
        return dims.shapes_evaluator([types[v].shape for v in self._output_roots]
                                     + [types[v].shape for v, _ in self._input_homes]
                                     + [(types[v].shape[d],) for v, d in self._size_groups[0]])

    def _values(self, plan: MemoryPlan, inputs: dict) -> dict:
        """Value -> array for a run with ``plan`` on ``inputs``."""
        values = {**self.graph.consts, **inputs, **plan.views, **plan.outputs}
        for v, source, shape in plan.input_views:
            values[v] = values[source].reshape(shape)
        return values

    def profile(self, number: int = 10, repeat: int = 3, in_run: bool = False) -> list:
        """Time each kernel on the inputs this thread set, with the arguments a run gives it: alone
        (each kernel called over and over, its operands warm in cache), or ``in_run``
        (whole runs, each call timed in run order, so a kernel finds the caches as the
        kernels before it left them).

        The two differ where a kernel's operands come from memory: ResNet-50's deep
        layers stream megabytes of weights that a kernel called alone finds in its
        cache, and there the sum of the kernels alone understates a run. ``in_run``
        says where a run's time goes; alone says what a kernel costs at best.

        Parameters
        ----------
        number, repeat : int
            As for ``Module.time_evaluator``: ``repeat`` batches of ``number`` calls (with
            ``in_run``, of ``number`` runs), each batch giving one time per call.
        in_run : bool
            Time the calls of whole runs instead of each kernel alone.

        Returns
        -------
        list of (str, TimingResult)
            Per kernel call, in run order (a kernel that several nodes share appears
            once per call): its name and its timings (``.median``, ``.min``,
            ``.results`` in seconds per call; on a busy machine ``.min`` is the one
            least disturbed by other processes).

        Examples
        --------
        >>> gm.set_input("x", x)                                            # doctest: +SKIP
        >>> for name, t in gm.profile(): print(name, t.median * 1e3)        # doctest: +SKIP
        >>> in_run = gm.profile(in_run=True)                                # doctest: +SKIP
        """
        for arg, value in (("number", number), ("repeat", repeat)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"profile: {arg} must be a positive int, got {value!r}")
        # One run fills the intermediates, so each kernel reads the values it reads in a
        # model run (some kernels' speed depends on them, e.g. a mask).
        self.run()
        if in_run:
            return self._profile_runs(number, repeat)
        state = self._state
        # The plan's views are those of the shapes its calls were packed at.
        plan = state.plan
        plan = replace(plan, views=self._views(plan, self._value_shapes(
            self._bind(state.inputs))))
        values = self._values(plan, state.inputs)
        module = self.lib.module
        times = [(node.name, module.time_evaluator(node.name, number=number, repeat=repeat)(
                     *(values[i] for i in node.inputs), values[node.outputs[0]]))
                 for node in self._kernel_nodes]
        # Timing a kernel alone overwrites arena bytes a later kernel's input shares:
        # one more run leaves the outputs of the inputs set for get_output.
        self.run()
        return times

    def _profile_runs(self, number: int, repeat: int) -> list:
        """``profile(in_run=True)``: ``repeat`` batches of ``number`` runs of the current
        plan, every call timed; per call, the mean of each batch."""
        calls = self._state.plan.calls
        batches = np.zeros((repeat, len(calls)), np.int64)
        clock = time.perf_counter_ns
        for batch in batches:
            for _ in range(number):
                for i, call in enumerate(calls):
                    t0 = clock()
                    call()
                    batch[i] += clock() - t0
        seconds = batches / (number * 1e9)
        return [(node.name, TimingResult([float(t) for t in seconds[:, i]]))
                for i, node in enumerate(self._kernel_nodes)]

    def get_output(self, index: int) -> np.ndarray:
        """Output ``index`` of this thread's last :meth:`run`. The array is the module's
        own, overwritten by the thread's next run with the same input shapes: copy it to
        keep it."""
        if not 0 <= index < self.num_outputs:
            raise IndexError(f"output {index}: the graph has {self.num_outputs} outputs")
        state = self._state
        if state.plan is None:
            raise TecompError("get_output before run() (in this thread)")
        return self._output(index, state.plan, state.inputs)

    def _output(self, index: int, plan: MemoryPlan, inputs: dict) -> np.ndarray:
        name = self.graph.outputs[index]
        # An output is computed by a kernel, or is an input or a constant passed through.
        source = next(s for s in (plan.outputs, inputs, self.graph.consts) if name in s)
        return source[name]

    def named_outputs(self, **inputs) -> dict:
        """``self(**inputs)`` by name: output name -> array, the outputs of the build that
        ran (an ONNX model's sequence output ``s`` is its tensors ``s[0]``, ``s[1]``, ...,
        whose number a specialised build may decide)."""
        return dict(zip(self.graph.outputs, self(**inputs)))

    def __call__(self, **inputs) -> list:
        """Run on ``inputs`` (every input, by name) and return copies of all outputs.

        Safe to call from several threads at once: the run holds a memory plan of its own
        (taken from the pool of plans of its input shapes, given back once the outputs are
        copied). The inputs and outputs that :meth:`set_input` / :meth:`get_output` see
        are left as they were.

        Raises
        ------
        GraphInputError, InputDtypeError
            As :meth:`set_input`; an input is missing, or the shapes do not fit.
        """
        arrays = {name: self._input(name, value, None) for name, value in inputs.items()}
        plan = self._acquire(self._key(arrays, "given"), arrays)
        try:
            self._execute(plan, arrays)
            return [self._output(i, plan, arrays).copy() for i in range(self.num_outputs)]
        finally:
            self._state.last = plan
            self._release(plan)
