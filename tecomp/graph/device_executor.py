"""``DeviceGraphModule``: runs a graph built for an accelerator (``cuda``) with its values
in device memory.

What the device is, is its module's: a built module of a device kind answers
``module.device_memory(simulate)`` with an object that allocates arenas and views into
them, uploads and reads arrays, takes another library's device arrays in place and runs
the module's functions on views (for CUDA, :mod:`tecomp.runtime.cuda_graph`: the GPU
through the driver, or the simulator where there is no GPU). This module knows no kind.

As on the CPU (:class:`~tecomp.graph.executor.GraphModule`, whose input checks, size
binding and shape conditions it shares), each tuple of input shapes gets one plan, made
on its first run and kept: one device arena holding every intermediate, output and
host input (values whose lifetimes do not overlap share bytes), views of it for the
reshapes and concatenations in place. The constants are uploaded once, when the module
is made. A run copies numpy inputs into their arena slots (another library's device
arrays, through DLPack or ``__cuda_array_interface__``, are read in place), queues every
kernel, waits once, and copies the outputs back to numpy (``device_outputs=True``: device
arrays of their own). From a plan's second run on, its launches are recorded once by the
device (a CUDA graph) and replayed, every input copied into its slot, so a run costs one
launch instead of one per kernel. Runs of one module take turns (a lock): a plan is one
arena.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from ..errors import TecompError
from .executor import GraphInputError, GraphModule, InputDtypeError, plan_offsets


@dataclass
class DevicePlan:
    """The device memory of runs with one tuple of input ``shapes``: the ``arena``,
    ``views`` of it (value -> view) for everything kernels write, ``inputs`` (input ->
    its arena slot), ``input_views`` (value, input, byte offset, shape, dtype) for views of
    an input made per run, ``one_element`` (value -> its memory as shape (1,)) for the 0-d
    values a kernel writes (a device kernel computes a 0-d value as its one element), the
    global temporaries its kernels keep (``temps``), how many runs it served, and its
    launches as recorded by the device (``recorded``)."""

    shapes: tuple
    arena: object
    views: dict
    inputs: dict
    input_views: tuple
    one_element: dict
    temps: dict = field(default_factory=dict)
    runs: int = 0
    recorded: object = None  # the recorded launches; False where they cannot be recorded


class DeviceGraphModule(GraphModule):
    """Run a :class:`~tecomp.graph.library.GraphLibrary` built for a device target.

    ``tecomp.graph.GraphModule(lib)`` makes one for such a library (its module answers
    ``device_memory``), so code written for the host executor runs a device model too.

    Parameters
    ----------
    lib : GraphLibrary
        Built for a device kind (``tecomp.graph.build(mod, target="cuda")``).
    convert_inputs : bool
        Convert host inputs of another dtype (as :class:`GraphModule`).
    simulate : bool, optional
        Run in the device's simulator on the CPU; default: where no device is usable.
    device_outputs : bool
        Return outputs as device arrays of their own (``__cuda_array_interface__``; numpy
        arrays in simulation) instead of numpy copies.
    graph_replay : bool
        Record a plan's launches once, on its second run, and replay the recording after
        (a CUDA graph: one launch per run instead of one per kernel); every input is then
        copied into its arena slot, device arrays too. Off, or where the device records
        nothing (the simulator), each run launches its kernels one by one.

    Raises
    ------
    TecompError
        The library was built for a CPU target (run it with :class:`GraphModule`).
    tecomp.runtime.cuda_driver.CUDAUnavailableError
        No device is usable and the library cannot be simulated (a loaded one).

    Examples
    --------
    >>> lib = tecomp.graph.build(mod, target="cuda", params=params)    # doctest: +SKIP
    >>> y, = DeviceGraphModule(lib)(x=x)                               # doctest: +SKIP
    >>> y, = DeviceGraphModule(lib)(x=torch_tensor_on_gpu)             # doctest: +SKIP
    >>> y, = tecomp.graph.GraphModule(lib)(x=x)                        # doctest: +SKIP
    """

    profiles_in_run = False

    def __init__(self, lib, *, convert_inputs: bool = False, simulate: bool | None = None,
                 device_outputs: bool = False, graph_replay: bool = True):
        memory_of = getattr(lib.module, "device_memory", None)
        if memory_of is None:
            raise TecompError(f"this library was built for {lib._target!r}, whose kernels run "
                              f"on the host: run it with tecomp.graph.GraphModule")
        super().__init__(lib, convert_inputs=convert_inputs)
        self.memory = memory_of(simulate)
        self.device_outputs = device_outputs
        self.graph_replay = graph_replay
        read = {i for n in self._kernel_nodes for i in n.inputs}
        read |= {root for root, _ in self._homes.values()}
        self._consts = {k: self.memory.upload(v) for k, v in self.graph.consts.items()
                        if k in read}
        self._device_plans: dict = {}
        self._run_lock = threading.Lock()

    @property
    def simulated(self) -> bool:
        """Whether the kernels run in the simulator rather than on a device."""
        return self.memory.simulated

    def _input(self, name: str, value, convert: bool | None):
        """A host input as :class:`GraphModule` takes it, or another library's device
        array (checked, used in place)."""
        view = self.memory.external(value)
        if view is None:
            return super()._input(name, value, convert)
        if name not in self.graph.inputs:
            raise GraphInputError(f"{name!r} is not an input; inputs: "
                                  f"{', '.join(self.graph.inputs)}")
        t = self.graph.types[name]
        if view.dtype != np.dtype(t.dtype):
            raise InputDtypeError(name, f"a device array of {view.dtype}", t.dtype,
                                  hint="convert it on the device (x.to(dtype) in PyTorch, "
                                       "x.astype(dtype) in CuPy)")
        if len(view.shape) != len(t.shape):
            raise GraphInputError(f"input {name!r} must have rank {len(t.shape)} ({t}), got "
                                  f"shape {view.shape}")
        return view

    def _device_plan(self, shapes: tuple, inputs: dict) -> DevicePlan:
        plan = self._device_plans.get(shapes)
        if plan is None:
            bindings = self._bind(inputs)
            self._check_dims(bindings)
            plan = self._device_plans[shapes] = self._make_device_plan(bindings, shapes)
        return plan

    def _make_device_plan(self, bindings: dict, shapes: tuple) -> DevicePlan:
        """Every value a kernel writes and every host input gets bytes of one arena;
        outputs and inputs live for the whole run, the rest from the kernel that writes
        them to their last reader."""
        # Lifetimes count the graph's nodes (views among them), so inputs and outputs
        # live to the last node's index.
        graph = self.graph
        end = len(graph.nodes)
        entries = [(v, (0, end)) for v in graph.inputs]
        entries += [(v, (first, end) if v in graph.outputs else (first, last))
                    for v, (first, last) in self._lifetimes.items()]
        shape_of = self._value_shapes(bindings)
        typed = [(v, shape_of[v], self._dtypes[v], life) for v, life in entries]
        sizes = [max(int(np.prod(s, dtype=np.int64)) * dt.itemsize, 1) for _, s, dt, _ in typed]
        offsets, total = plan_offsets(sizes, [life for *_, life in typed])
        memory = self.memory
        arena = memory.arena(total)
        slots = {v: (memory.view(arena, off, s, dt), off)
                 for (v, s, dt, _), off in zip(typed, offsets)}
        views = {v: view for v, (view, _) in slots.items() if v not in graph.inputs}
        input_views = []
        for v, (root, offset) in self._homes.items():
            shape, dtype = shape_of[v], graph.types[v].dtype
            if root in graph.inputs:
                input_views.append((v, root, offset, shape, dtype))
            elif root in slots:
                views[v] = memory.view(arena, slots[root][1] + offset, shape, dtype)
            else:  # a reshape of a constant
                views[v] = memory.view(self._consts[root], offset, shape, dtype)
        inputs = {v: slots[v][0] for v in graph.inputs}
        one_element = {v: memory.view(views[v], 0, (1,), self._dtypes[v])
                       for n in self._kernel_nodes for v in n.outputs[:1]
                       if not graph.types[v].shape}
        return DevicePlan(shapes, arena, views, inputs, tuple(input_views), one_element)

    def _execute_device(self, plan: DevicePlan, inputs: dict) -> dict:
        """Run every kernel of ``plan`` on ``inputs``; returns value -> view.

        The first run of a plan launches kernel by kernel (allocating the temporaries its
        kernels keep); with ``graph_replay`` the second records the launches and every
        later one replays them, its inputs copied into their arena slots first."""
        memory = self.memory
        what = f"model {self.graph.name} ({len(self._kernel_nodes)} kernels)"
        replay = self.graph_replay and plan.runs > 0 and plan.recorded is not False
        plan.runs += 1
        bound = {}
        for name, slot in plan.inputs.items():
            value = inputs[name]
            if isinstance(value, np.ndarray):
                memory.write(slot, value)
            elif replay:  # the recorded launches read the slot
                memory.write_device(slot, value)
            else:
                slot = value  # read in place
            bound[name] = slot
        values = self._values(plan, bound)
        if replay:
            if plan.recorded is None:
                plan.recorded = memory.record(lambda: self._queue(plan, values),
                                              plan.temps) or False
            if plan.recorded:
                memory.replay(plan.recorded, what)
                return values
        self._queue(plan, values)
        memory.synchronize(what)
        return values

    def _values(self, plan: DevicePlan, inputs: dict) -> dict:
        """Value -> view for a run of ``plan`` with ``inputs`` (input -> view)."""
        values = {**self._consts, **plan.views, **inputs}
        for v, root, offset, shape, dtype in plan.input_views:
            values[v] = self.memory.view(inputs[root], offset, shape, dtype)
        return values

    def _queue(self, plan: DevicePlan, values: dict) -> None:
        for node in self._kernel_nodes:
            out = node.outputs[0]
            self.memory.run(node.name, [*(values[a] for a in node.inputs),
                                        plan.one_element.get(out, values[out])], plan.temps)

    def _outputs(self, values: dict) -> list:
        memory, outs = self.memory, []
        for name in self.graph.outputs:
            if name in values:
                outs.append(memory.copy(values[name]) if self.device_outputs
                            else memory.read(values[name]))
            else:  # a constant no kernel reads, passed through
                outs.append(np.array(self.graph.consts[name]))
        return outs

    def run(self) -> None:
        """Run the graph on the inputs this thread set (:meth:`set_input`)."""
        state = self._state
        shapes = self._key(state.inputs, "set")
        with self._run_lock:
            plan = self._device_plan(shapes, state.inputs)
            state.values = self._execute_device(plan, state.inputs)
            state.outputs = self._outputs(state.values)

    def get_output(self, index: int):
        """Output ``index`` of this thread's last :meth:`run` (a copy: numpy, or a device
        array with ``device_outputs``)."""
        if not 0 <= index < self.num_outputs:
            raise IndexError(f"output {index}: the graph has {self.num_outputs} outputs")
        outputs = getattr(self._state, "outputs", None)
        if outputs is None:
            raise TecompError("get_output before run() (in this thread)")
        return outputs[index]

    def profile(self, number: int = 10, repeat: int = 3, in_run: bool = False) -> list:
        """Time each kernel alone on the device, on the values a run on the inputs this
        thread set gives it, with the module's ``time_evaluator`` (CUDA events around
        ``number`` back-to-back launches, ``repeat`` times).

        Returns
        -------
        list of (str, TimingResult)
            Per kernel call, in run order (see :meth:`GraphModule.profile`).

        Raises
        ------
        TecompError
            ``in_run`` (the calls of whole runs are not timed one by one on a device:
            time whole calls instead).
        tecomp.runtime.cuda_driver.CUDAUnavailableError
            In simulation: there is no device to time.
        """
        if in_run:
            raise TecompError("profile(in_run=True) is not available for a device graph: a "
                              "run queues its kernels without waiting between them; time "
                              "whole calls, or each kernel alone (in_run=False)")
        self.run()
        values, module = self._state.values, self.lib.module
        return [(node.name, module.time_evaluator(node.name, number=number, repeat=repeat)(
                    *(values[a] for a in (*node.inputs, node.outputs[0]))))
                for node in self._kernel_nodes]

    def __call__(self, **inputs) -> list:
        """Run on ``inputs`` (every input, by name: numpy arrays, Python values or
        another library's device arrays) and return the outputs (numpy copies, or device
        arrays with ``device_outputs``).

        Raises
        ------
        GraphInputError, InputDtypeError
            An input is missing, unknown, or does not fit.
        """
        arrays = {name: self._input(name, value, None) for name, value in inputs.items()}
        shapes = self._key(arrays, "given")
        with self._run_lock:
            plan = self._device_plan(shapes, arrays)
            return self._outputs(self._execute_device(plan, arrays))
