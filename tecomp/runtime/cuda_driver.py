"""The CUDA driver API through NVIDIA's Python bindings (``cuda.bindings.driver``).

One ``Driver`` per process (``driver()``): it initializes CUDA on first use, makes the
primary context of device 0 current, and wraps the calls the CUDA runtime module needs
(module load, device memory, copies, launches, events), turning every failing status
into a ``CUDAError`` that names the call (and the kernel, for launches).

Importing this module needs nothing; ``driver()`` on a machine without the bindings, the
driver library or a GPU raises ``CUDAUnavailableError``, which says so and what still
works (building, ``simulate``).
"""

from __future__ import annotations

import ctypes
import functools
import os

from ..errors import TargetError, TecompError


class CUDAError(TecompError, RuntimeError):
    """A CUDA driver call failed (the message names the call, or the kernel, and the
    driver's error name)."""


class CUDAUnavailableError(TargetError):
    """CUDA modules cannot run in this process: no bindings, no driver or no GPU."""


_INSTALL = 'pip install "tecomp[cuda]"'


def _import_driver():
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        try:
            from cuda import cuda as cu  # cuda-python before the cuda.bindings namespace
        except ImportError:
            raise CUDAUnavailableError(
                f"running a CUDA module needs NVIDIA's driver bindings (cuda-python); "
                f"install them with {_INSTALL}"
            ) from None
    return cu


class Driver:
    """The initialized driver with device 0's primary context current."""

    def __init__(self):
        cu = self.cu = _import_driver()
        try:
            self._check(cu.cuInit(0), "cuInit")
            self.device = self._check(cu.cuDeviceGet(0), "cuDeviceGet")
            self.context = self._check(cu.cuDevicePrimaryCtxRetain(self.device),
                                       "cuDevicePrimaryCtxRetain")
        except CUDAError as err:
            raise CUDAUnavailableError(
                f"no usable CUDA GPU on this machine ({err}); CUDA modules build here but "
                f"run only where an NVIDIA GPU and its driver are; mod.simulate(...) runs "
                f"the kernels on the CPU"
            ) from None
        except Exception as err:  # noqa: BLE001 - the bindings raise their own types
            raise CUDAUnavailableError(
                f"the CUDA driver cannot be loaded on this machine ({type(err).__name__}: "
                f"{err}); CUDA modules build here but run only where an NVIDIA GPU and its "
                f"driver are; mod.simulate(...) runs the kernels on the CPU"
            ) from None
        self.make_current()
        self.pid = os.getpid()
        self.arch_name = self.arch()

    def make_current(self) -> None:
        self._check(self.cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def _check(self, result, what: str):
        err = result[0]
        if int(err) != 0:
            _, name = self.cu.cuGetErrorName(err)
            name = name.decode() if isinstance(name, bytes) else str(name)
            raise CUDAError(f"{what} failed: {name}")
        if len(result) == 1:
            return None
        return result[1] if len(result) == 2 else result[1:]

    # ---- device ---------------------------------------------------------------------

    def arch(self) -> str:
        """The device's architecture, e.g. "sm_90"."""
        attr = self.cu.CUdevice_attribute
        major = self._check(self.cu.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.device), "cuDeviceGetAttribute")
        minor = self._check(self.cu.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.device), "cuDeviceGetAttribute")
        return f"sm_{major}{minor}"

    # ---- modules and launches -------------------------------------------------------

    def load_module(self, cubin: bytes):
        return self._check(self.cu.cuModuleLoadData(cubin), "cuModuleLoadData")

    def unload_module(self, module) -> None:
        """Unload ``module`` (its code and constants leave the device). Errors are ignored:
        at interpreter exit the context may be gone already, taking the module with it."""
        self.cu.cuModuleUnload(module)

    def get_function(self, module, name: str):
        return self._check(self.cu.cuModuleGetFunction(module, name.encode()),
                           f"cuModuleGetFunction({name})")

    def allow_dynamic_shared(self, func, name: str, nbytes: int) -> None:
        """Let ``func`` (kernel ``name``) be launched with ``nbytes`` of dynamic shared
        memory, over the 48 KB a kernel gets without asking."""
        attr = self.cu.CUdevice_attribute
        limit = self._check(self.cu.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, self.device),
            "cuDeviceGetAttribute")
        static = self._check(self.cu.cuFuncGetAttribute(
            self.cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, func),
            "cuFuncGetAttribute")
        if nbytes + static > limit:
            raise CUDAError(
                f"kernel {name} needs {nbytes + static} bytes of shared memory per block, "
                f"but this GPU ({self.arch_name}) gives at most {limit}; build it for this "
                f"GPU's architecture (a target with -arch={self.arch_name}) or with smaller "
                f"tiles (-max-shared-memory-per-block={limit})")
        self._check(self.cu.cuFuncSetAttribute(
            func, self.cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            nbytes), f"cuFuncSetAttribute({name})")

    def launch(self, func, name: str, grid, block, args, stream=0, shared: int = 0) -> None:
        """Launch ``func`` (kernel ``name``) with ``args``: ctypes values, in order, and
        ``shared`` bytes of dynamic shared memory."""
        ptrs = (ctypes.c_void_p * max(len(args), 1))(
            *[ctypes.addressof(a) for a in args])
        self._check(self.cu.cuLaunchKernel(func, *grid, *block, shared, stream,
                                           ctypes.addressof(ptrs), 0),
                    f"launching kernel {name}")

    def synchronize(self, what: str) -> None:
        """Wait for the device; a failure of work already queued (an illegal address, a
        launch failure) is reported as a failure of ``what``."""
        self._check(self.cu.cuCtxSynchronize(), what)

    # ---- memory ---------------------------------------------------------------------

    def memory_info(self) -> tuple:
        """(free, total) bytes of device memory."""
        free, total = self._check(self.cu.cuMemGetInfo(), "cuMemGetInfo")
        return int(free), int(total)

    def alloc(self, nbytes: int) -> int:
        return int(self._check(self.cu.cuMemAlloc(max(nbytes, 1)), "cuMemAlloc"))

    def free(self, ptr: int) -> None:
        self._check(self.cu.cuMemFree(ptr), "cuMemFree")

    def to_device(self, ptr: int, array) -> None:
        if array.nbytes:
            self._check(self.cu.cuMemcpyHtoD(ptr, array.ctypes.data, array.nbytes),
                        "cuMemcpyHtoD")

    def to_host(self, array, ptr: int) -> None:
        if array.nbytes:
            self._check(self.cu.cuMemcpyDtoH(array.ctypes.data, ptr, array.nbytes),
                        "cuMemcpyDtoH")

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` from device address ``src`` to ``dst``."""
        if nbytes:
            self._check(self.cu.cuMemcpyDtoD(dst, src, nbytes), "cuMemcpyDtoD")

    def copy_async(self, dst: int, src: int, nbytes: int, stream) -> None:
        """Queue a copy of ``nbytes`` from device address ``src`` to ``dst`` on ``stream``."""
        if nbytes:
            self._check(self.cu.cuMemcpyDtoDAsync(dst, src, nbytes, stream),
                        "cuMemcpyDtoDAsync")

    def zero_async(self, ptr: int, nbytes: int, stream) -> None:
        """Queue zeroing ``nbytes`` at ``ptr`` on ``stream``."""
        self._check(self.cu.cuMemsetD8Async(ptr, 0, nbytes, stream), "cuMemsetD8Async")

    # ---- streams and graphs ---------------------------------------------------------

    def new_stream(self):
        """A stream that orders with the legacy default stream (``CU_STREAM_DEFAULT``),
        so work other libraries queue there comes before and after it in order."""
        return self._check(self.cu.cuStreamCreate(0), "cuStreamCreate")

    def destroy_stream(self, stream) -> None:
        """Destroy ``stream`` once its work is done. Errors are ignored: at interpreter exit
        the context may be gone already, taking the stream with it."""
        self.cu.cuStreamDestroy(stream)

    def capture(self, stream, queue) -> object:
        """Record what ``queue()`` puts on ``stream`` into a CUDA graph instead of running
        it; returns the instantiated graph (:meth:`replay` runs it, :meth:`destroy_graph`
        frees it). Capture is local to this thread, so other threads' CUDA calls go on."""
        cu = self.cu
        self._check(cu.cuStreamBeginCapture(
            stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            "cuStreamBeginCapture")
        try:
            queue()
        except BaseException:
            cu.cuStreamEndCapture(stream)  # ends the broken capture, its graph discarded
            raise
        graph = self._check(cu.cuStreamEndCapture(stream), "cuStreamEndCapture")
        try:
            return self._check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        finally:
            cu.cuGraphDestroy(graph)

    def replay(self, graph_exec, stream) -> None:
        self._check(self.cu.cuGraphLaunch(graph_exec, stream), "cuGraphLaunch")

    def destroy_graph(self, graph_exec) -> None:
        self._check(self.cu.cuGraphExecDestroy(graph_exec), "cuGraphExecDestroy")

    # ---- timing ---------------------------------------------------------------------

    def event(self):
        return self._check(self.cu.cuEventCreate(0), "cuEventCreate")

    def destroy_event(self, event) -> None:
        self._check(self.cu.cuEventDestroy(event), "cuEventDestroy")

    def record(self, event) -> None:
        self._check(self.cu.cuEventRecord(event, 0), "cuEventRecord")

    def elapsed_seconds(self, start, end) -> float:
        self._check(self.cu.cuEventSynchronize(end), "cuEventSynchronize")
        ms = self._check(self.cu.cuEventElapsedTime(start, end), "cuEventElapsedTime")
        return float(ms) / 1e3


@functools.cache
def _driver() -> Driver:
    return Driver()


def driver() -> Driver:
    """The process's ``Driver``, created on first use.

    Raises
    ------
    CUDAUnavailableError
        When the bindings, the driver library or a GPU is missing, or in a process forked
        from one that had initialized CUDA (the driver does not survive ``fork``).
    """
    d = _driver()
    if d.pid != os.getpid():
        raise CUDAUnavailableError(
            "CUDA was initialized in the process this one was forked from, and the driver "
            "cannot be used across fork(); run GPU work in the parent or in a process "
            "started with the 'spawn' method")
    d.make_current()
    return d


@functools.cache
def device_arch() -> str | None:
    """The architecture of device 0 ("sm_90"), or None where no GPU can be used.

    Asked once per process: where the driver cannot start, trying again (an import and
    ``cuInit`` each time) only repeats the answer, and the ONNX backend asks it for every
    test case it lists. A process forked from one that had initialized CUDA (a build
    process of the tuner) gets the parent's answer without calling the driver, so it
    compiles for the GPU the parent runs on."""
    try:
        return _driver().arch_name
    except CUDAUnavailableError:
        return None
