"""``GraphModule``: runs a built graph on numpy arrays.

The symbolic dimensions of the graph are bound from the inputs' shapes at run time, so one
build serves every batch or sequence size. For each combination of input shapes a
*memory plan* is made once and kept: every intermediate value gets an offset in one
arena, and values whose lifetimes (from the kernel that writes them to the last kernel
that reads them or a reshape of them) do not overlap share bytes; a reshape is no kernel
but a view of its source's bytes, and the inputs of a concatenation computed in place are
slices of its output (:mod:`tecomp.graph.storage`). A run then only calls
kernels on views of the arena, their arguments packed once per plan
(``PackedFunction.prepare``): nothing is allocated per call for shapes seen before, and a
run is one native call per kernel.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from ..errors import TecompError
from ..ir import expr as E
from ..runtime import aligned
from ..runtime.aligned import ALIGNMENT
from ..runtime.module import TimingResult
from . import dims
from .checks import runtime_dim_checks
from .storage import buffer_lifetimes, is_view, value_homes


class GraphInputError(TecompError, ValueError):
    """An input is missing, unknown, or does not fit the graph's input type."""


@dataclass(frozen=True)
class MemoryPlan:
    """Where every value of one run lives, for one binding of the symbolic dimensions:
    ``arena`` (bytes) with ``views`` (value -> array over it) for intermediates, and
    ``outputs`` (value -> array) that a run writes and ``get_output`` returns; a reshape of
    a graph input is made on each run: ``input_views`` holds (value, input, shape)."""

    arena: np.ndarray
    views: dict
    outputs: dict
    input_views: tuple
    #: The kernel calls of a run, their arguments packed once (``PreparedCall``), and
    #: (call, argument index, graph input) for each argument a run points at its input.
    calls: tuple = ()
    input_slots: tuple = ()


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


class GraphModule:
    """Run a :class:`~tecomp.graph.library.GraphLibrary`.

    Examples
    --------
    >>> gm = tecomp.graph.GraphModule(lib)                       # doctest: +SKIP
    >>> gm.set_input("x", x); gm.run(); y = gm.get_output(0)     # doctest: +SKIP
    >>> y, = gm(x=x)                                             # doctest: +SKIP
    """

    def __init__(self, lib):
        self.lib = lib
        self.graph = lib.graph
        self._inputs: dict = {}
        # Input shapes -> MemoryPlan: the shapes bind the sizes, so they key the plan.
        self._plans: dict = {}
        self._plan: MemoryPlan | None = None
        graph = self.graph
        self._kernel_nodes = [n for n in graph.nodes if not is_view(n)]
        self._kernels = [(lib.module[n.name], n.inputs, n.outputs[0])
                         for n in self._kernel_nodes]
        self._lifetimes = buffer_lifetimes(graph)
        self._homes = value_homes(graph)
        self._dim_checks = runtime_dim_checks(graph)

    @property
    def input_names(self) -> tuple:
        """The names of the graph's inputs, in order."""
        return self.graph.inputs

    @property
    def num_outputs(self) -> int:
        """How many outputs a run gives."""
        return len(self.graph.outputs)

    def set_input(self, name: str, value) -> None:
        """Set input ``name`` to ``value`` (converted to the input's dtype if it is a
        different numpy dtype; it is read, not copied, when it already fits).

        Raises
        ------
        GraphInputError
            ``name`` is not an input, or the value's rank does not fit.
        """
        if name not in self.graph.inputs:
            raise GraphInputError(f"{name!r} is not an input; inputs: "
                                  f"{', '.join(self.graph.inputs)}")
        t = self.graph.types[name]
        value = np.asarray(value, dtype=t.dtype)
        if not value.flags.c_contiguous:
            value = value.copy(order="C")  # (ascontiguousarray would make a scalar 1-D)
        if value.ndim != len(t.shape):
            raise GraphInputError(f"input {name!r} must have rank {len(t.shape)} "
                                  f"({t}), got shape {value.shape}")
        self._inputs[name] = value

    def _bind(self) -> dict:
        bindings: dict = {}
        missing = [n for n in self.graph.inputs if n not in self._inputs]
        if missing:
            raise GraphInputError(f"inputs {', '.join(missing)} are not set")
        for name in self.graph.inputs:
            shape = self.graph.types[name].shape
            for d, got in zip(shape, self._inputs[name].shape):
                if isinstance(d, E.Var):
                    prev = next((n for v, n in bindings.items() if v is d), None)
                    if prev is not None and prev != got:
                        raise GraphInputError(f"input {name!r}: size {d.name} is {got} here "
                                              f"but {prev} in another input")
                    bindings[d] = got
        for name in self.graph.inputs:
            t = self.graph.types[name]
            want = tuple(dims.evaluate(d, bindings) for d in t.shape)
            if want != self._inputs[name].shape:
                raise GraphInputError(f"input {name!r} must have shape {t.shape} = {want}, "
                                      f"got {self._inputs[name].shape}")
        return bindings

    def _check_dims(self, bindings) -> None:
        """Raise if ``bindings`` break a shape condition left to run time (a position
        table sliced to ``min(seq, 512)`` rows added to ``seq`` tokens)."""
        for check in self._dim_checks:
            if not check.holds(bindings):
                raise GraphInputError(check.message(bindings))

    def _make_plan(self, bindings) -> MemoryPlan:
        graph = self.graph
        outputs, inter = {}, []
        for v in self._lifetimes:  # the roots kernels write, in order of first write
            shape, dtype = self._shape(v, bindings), np.dtype(graph.types[v].dtype)
            if v in graph.outputs:
                outputs[v] = aligned.empty(shape, dtype)
            else:
                inter.append((v, shape, dtype))
        sizes = [max(int(np.prod(s)) * dt.itemsize, 1) for _, s, dt in inter]
        offsets, total = plan_offsets(sizes, [self._lifetimes[v] for v, _, _ in inter])
        arena = aligned.empty(total, np.uint8)
        views = {v: np.ndarray(s, dt, buffer=arena, offset=off)
                 for (v, s, dt), off in zip(inter, offsets)}
        root_offsets = {v: off for (v, _, _), off in zip(inter, offsets)}
        input_views, held = [], {**graph.consts, **outputs}
        for v, (root, offset) in self._homes.items():
            shape, dtype = self._shape(v, bindings), graph.types[v].dtype
            if root in root_offsets:
                views[v] = np.ndarray(shape, dtype, buffer=arena,
                                      offset=root_offsets[root] + offset)
            elif root in graph.inputs:
                input_views.append((v, root, shape))
            else:  # a reshape of a constant or of a graph output
                views[v] = held[root].reshape(shape)
        return MemoryPlan(arena, views, outputs, tuple(input_views))

    def _shape(self, value: str, bindings) -> tuple:
        return tuple(dims.evaluate(d, bindings) for d in self.graph.types[value].shape)

    def run(self) -> None:
        """Run the graph on the inputs set."""
        # Input shapes seen before have their plan: binding and checking the sizes again
        # took the executor's own work per SqueezeNet run from 1.4 to 4.0 us.
        shapes = tuple(getattr(self._inputs.get(n), "shape", None) for n in self.graph.inputs)
        plan = self._plans.get(shapes)
        if plan is None:
            bindings = self._bind()
            self._check_dims(bindings)
            plan = self._plans[shapes] = self._prepare_calls(self._make_plan(bindings))
        self._plan = plan
        for call, index, name in plan.input_slots:
            call.set_pointer(index, self._inputs[name])
        for call in plan.calls:
            call()

    def _prepare_calls(self, plan: MemoryPlan) -> MemoryPlan:
        """``plan`` with its kernel calls packed: every array of a run has its kernel's
        dtype and C layout (set_input converts the inputs, the plan allocates the rest)
        and the shapes type inference gave for the bound sizes, so the arguments are
        checked once, here, by construction, and a run is one native call per kernel. Only
        the inputs' addresses change from run to run (a view of an input shares its
        address)."""
        values = self._values(plan)
        root = {v: source for v, source, _ in plan.input_views}
        root.update((name, name) for name in self.graph.inputs)
        calls, slots = [], []
        for kernel, inputs, output in self._kernels:
            args = (*inputs, output)
            call = kernel.prepare(*(values[a] for a in args))
            calls.append(call)
            slots += [(call, k, root[a]) for k, a in enumerate(args) if a in root]
        return replace(plan, calls=tuple(calls), input_slots=tuple(slots))

    def _values(self, plan: MemoryPlan) -> dict:
        """Value -> array for a run with ``plan`` on the inputs set."""
        values = {**self.graph.consts, **self._inputs, **plan.views, **plan.outputs}
        for v, source, shape in plan.input_views:
            values[v] = values[source].reshape(shape)
        return values

    def profile(self, number: int = 10, repeat: int = 3, in_run: bool = False) -> list:
        """Time each kernel on the inputs set, with the arguments a run gives it: alone
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
        values = self._values(self._plan)
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
        calls = self._plan.calls
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
        """Output ``index`` of the last run. The array is the module's own, overwritten by
        the next run with the same input shapes: copy it to keep it."""
        if not 0 <= index < self.num_outputs:
            raise IndexError(f"output {index}: the graph has {self.num_outputs} outputs")
        name = self.graph.outputs[index]
        if self._plan is None:
            raise TecompError("get_output before run()")
        # An output is computed by a kernel, or is an input or a constant passed through.
        source = next(s for s in (self._plan.outputs, self._inputs, self.graph.consts)
                      if name in s)
        return source[name]

    def __call__(self, **inputs) -> list:
        """Set the inputs by name, run, and return copies of all outputs."""
        for name, value in inputs.items():
            self.set_input(name, value)
        self.run()
        return [self.get_output(i).copy() for i in range(self.num_outputs)]
