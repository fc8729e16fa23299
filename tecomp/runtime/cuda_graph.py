"""Device memory for running a whole model's kernels on a GPU: what the graph executor
(:class:`tecomp.graph.device_executor.DeviceGraphModule`) asks of a device, answered for
CUDA on the driver (:class:`CUDAMemory`) and, without a GPU, by the simulator
(:class:`SimulatedCUDAMemory`).

Both hand out :class:`DeviceView` s (an address, a shape and a dtype over memory they
own) and run a module's function on views, so the executor plans one arena per input
shape tuple, uploads constants once and never allocates per run, the same way on a GPU
and in simulation. A :class:`DeviceView` of real device memory exposes
``__cuda_array_interface__``, so CuPy (``cupy.asarray``) and PyTorch
(``torch.as_tensor(..., device="cuda")``) read it without a copy.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from .args import ArgumentError
from .cuda_arrays import device_array
from .cuda_driver import CUDAError, CUDAUnavailableError, device_arch, driver


def _c_order(array: np.ndarray) -> np.ndarray:
    """``array`` in C order, a 0-d one staying 0-d (``ascontiguousarray`` makes it 1-d)."""
    return array if array.flags.c_contiguous else array.copy(order="C")


@dataclass(frozen=True)
class DeviceView:
    """``shape`` x ``dtype`` at device address ``ptr``; ``owner`` keeps the memory alive
    (a :class:`DeviceBuffer`, or another library's array used in place)."""

    ptr: int
    shape: tuple
    dtype: np.dtype
    owner: object

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": tuple(self.shape), "typestr": self.dtype.str,
                "data": (self.ptr, False), "strides": None, "version": 3}

    def numpy(self) -> np.ndarray:
        """A host copy."""
        out = np.empty(self.shape, self.dtype)
        driver().to_host(out, self.ptr)
        return out

    def view(self, offset: int, shape, dtype) -> DeviceView:
        """``shape`` x ``dtype`` at ``offset`` bytes into this view's memory."""
        return DeviceView(self.ptr + offset, tuple(shape), np.dtype(dtype), self.owner)


class DeviceBuffer:
    """``nbytes`` of device memory, freed when the buffer is collected."""

    def __init__(self, nbytes: int):
        drv = driver()
        self.nbytes = nbytes
        self.ptr = drv.alloc(nbytes)
        self._free = weakref.finalize(self, drv.free, self.ptr)

    def view(self, offset: int, shape, dtype) -> DeviceView:
        return DeviceView(self.ptr + offset, tuple(shape), np.dtype(dtype), self)


class RecordedRun:
    """A run's kernels recorded once in a CUDA graph (:meth:`CUDAMemory.record`), replayed
    with their arguments as recorded; ``checked`` holds (function, error record address)
    for the functions whose kernels report run-time checks. The graph is freed with the
    object."""

    def __init__(self, drv, graph_exec, checked: list):
        self.graph_exec = graph_exec
        self.checked = checked
        self._free = weakref.finalize(self, drv.destroy_graph, graph_exec)


class CUDAMemory:
    """Device memory and launches of ``module`` (a ``CUDAModule``) on this machine's GPU,
    queued on a stream of its own that orders with the legacy default stream (where
    PyTorch and CuPy work unless told otherwise)."""

    simulated = False

    def __init__(self, module):
        self.module = module
        self.driver = driver()
        self.stream = self.driver.new_stream()
        weakref.finalize(self, self.driver.destroy_stream, self.stream)
        self._recording: list | None = None

    def arena(self, nbytes: int) -> DeviceBuffer:
        """One allocation that :meth:`view` carves values from."""
        return DeviceBuffer(nbytes)

    @staticmethod
    def view(base, offset: int, shape, dtype) -> DeviceView:
        """``shape`` x ``dtype`` at ``offset`` bytes into ``base`` (an arena or a view)."""
        return base.view(offset, shape, dtype)

    def upload(self, array: np.ndarray) -> DeviceView:
        """A device copy of ``array`` (constants: uploaded once)."""
        array = _c_order(array)
        view = DeviceBuffer(array.nbytes).view(0, array.shape, array.dtype)
        self.driver.to_device(view.ptr, array)
        return view

    def write(self, view: DeviceView, array: np.ndarray) -> None:
        self.driver.to_device(view.ptr, _c_order(array))

    def write_device(self, view: DeviceView, source: DeviceView) -> None:
        """Queue a copy of device array ``source`` into ``view`` (same size)."""
        self.driver.copy_async(view.ptr, source.ptr, view.nbytes, self.stream)

    def read(self, view: DeviceView) -> np.ndarray:
        return view.numpy()

    def copy(self, view: DeviceView) -> DeviceView:
        """A device array of its own holding ``view``'s values."""
        out = DeviceBuffer(view.nbytes).view(0, view.shape, view.dtype)
        self.driver.copy(out.ptr, view.ptr, view.nbytes)
        return out

    @staticmethod
    def external(value) -> DeviceView | None:
        """``value`` as a view when it is another library's CUDA array (DLPack or
        ``__cuda_array_interface__``), used in place; None otherwise."""
        arr = device_array(value)
        if arr is None:
            return None
        if not arr.c_contiguous:
            raise ArgumentError(f"a device array of shape {arr.shape} is not C-contiguous; "
                                f"pass a contiguous one (.contiguous() in PyTorch, "
                                f"cupy.ascontiguousarray)")
        arr.check_device(f"a device array of shape {arr.shape}")
        return DeviceView(arr.ptr, arr.shape, arr.dtype, arr)

    def run(self, name: str, views, temps: dict) -> None:
        """Queue function ``name`` on ``views`` (its arguments, in order); ``temps``
        keeps each function's global temporaries from call to call. A function whose
        kernels report run-time checks waits for them and raises the failed one, except
        while :meth:`record` records (the replay checks them)."""
        f = self.module[name]
        checks = any(step.get("record") for step in f.plan)
        recording = self._recording is not None
        record = self.module._run_plan(
            self.driver, f, [v.ptr for v in views], f._sizes(views),
            sync=checks and not recording, kept=temps.setdefault(name, {}), stream=self.stream)
        if recording and record is not None:
            self._recording.append((f, record))

    def record(self, queue, temps: dict) -> RecordedRun | None:
        """Record the launches ``queue()`` makes (through :meth:`run`, on views and
        ``temps`` a run made before, so nothing is allocated) in a CUDA graph; None when
        the driver refuses to capture them (the caller keeps launching one by one)."""
        self._recording = []
        try:
            graph_exec = self.driver.capture(self.stream, queue)
        except CUDAError:
            return None
        finally:
            checked, self._recording = self._recording, None
        return RecordedRun(self.driver, graph_exec, checked)

    def replay(self, run: RecordedRun, what: str) -> None:
        """Run a recorded graph, wait for it, and raise the first failed run-time check."""
        self.driver.replay(run.graph_exec, self.stream)
        self.driver.synchronize(what)
        for f, record in run.checked:
            self.module.check_record(self.driver, f, record)

    def synchronize(self, what: str) -> None:
        self.driver.synchronize(what)

    def free_temps(self, temps: dict) -> None:
        for own in temps.values():
            for ptr in own.values():
                self.driver.free(ptr)
        temps.clear()


class SimulatedCUDAMemory:
    """Device memory as host arrays and launches run by the GPU simulator
    (``CUDAModule.simulate``): the same plans as on a GPU, checked without one (slow:
    for tiny models). Its device arrays are numpy arrays."""

    simulated = True

    def __init__(self, module):
        self.module = module

    @staticmethod
    def arena(nbytes: int) -> np.ndarray:
        from .aligned import empty

        return empty(max(nbytes, 1), np.uint8)

    @staticmethod
    def view(base: np.ndarray, offset: int, shape, dtype) -> np.ndarray:
        return np.ndarray(tuple(shape), dtype, buffer=base, offset=offset)

    @staticmethod
    def upload(array: np.ndarray) -> np.ndarray:
        return np.array(array, order="C")

    @staticmethod
    def write(view: np.ndarray, array: np.ndarray) -> None:
        view[...] = array

    @staticmethod
    def read(view: np.ndarray) -> np.ndarray:
        return view.copy()

    copy = read

    @staticmethod
    def external(value):
        """Without a GPU no value is another library's device array."""
        return None

    def run(self, name: str, views, temps: dict) -> None:
        self.module.simulate(*views, func_name=name)

    @staticmethod
    def record(queue, temps: dict) -> None:
        """The simulator records no graphs: every run launches its kernels."""
        return None

    def synchronize(self, what: str) -> None:
        """The simulator runs each function to its end: nothing is in flight."""

    @staticmethod
    def free_temps(temps: dict) -> None:
        temps.clear()


def device_memory(module, simulate: bool | None = None):
    """The memory a graph of ``module``'s functions runs in: the GPU's, or with
    ``simulate`` (default: when this machine has no usable GPU) the simulator's.

    Raises
    ------
    CUDAUnavailableError
        ``simulate=False`` without a GPU, or simulating a module loaded from a file (it
        holds no loop IR to simulate) without a GPU.
    """
    if simulate is None:
        simulate = device_arch() is None
    if not simulate:
        return CUDAMemory(module)
    if getattr(module, "_simulator", None) is None:
        raise CUDAUnavailableError(
            "no CUDA GPU is usable here, and this CUDA model was loaded from a file, which "
            "holds no loop IR to simulate; run it on a machine with an NVIDIA GPU, or "
            "simulate the library tecomp.graph.build returns")
    return SimulatedCUDAMemory(module)


__all__ = ["CUDAMemory", "DeviceBuffer", "DeviceView", "SimulatedCUDAMemory",
           "device_memory"]
