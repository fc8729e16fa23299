"""``CUDAModule``: kernels compiled to a cubin, run through the CUDA driver.

A function of a CUDA module is a *launch plan*: the host part of the lowered function,
as data — allocate a global temporary, launch kernel K with grid G and block B on these
buffers and sizes (temporaries are freed once the kernels are done) — so an exported
module needs no compiler and no IR to run. Calling it:

- with numpy arrays: validated as for CPU modules, copied to the device, run, outputs
  copied back;
- with device arrays of another library (``__cuda_array_interface__`` or DLPack: CuPy,
  PyTorch, pycuda): validated (dtype, shape, contiguity) and used in place, no copies.

A plan whose kernels have run-time checks (``"record": true`` on their launch steps)
allocates the call's error record on the device, zeroes it, passes it to those kernels
last, reads it back after synchronizing and raises ``RuntimeCheckError`` when a check
failed (timing runs skip the read-back).

``time_evaluator`` times with CUDA events. ``export_library`` writes a bundle (a header
line, the JSON metadata with the plans and sources, then the cubin) that
``tecomp.runtime.load_module`` restores. On a machine without a GPU everything but
running works; ``simulate`` (on the module ``tecomp.build`` returned) runs the kernels
with the loop-IR interpreter's simulated GPU instead.
"""

from __future__ import annotations

import ctypes
import json
import os
import time
import weakref

import numpy as np

from ..errors import RuntimeCheckError, TecompError
from .abi import ERROR_RECORD_SLOTS, FunctionSignature, eval_size, spec_str
from .args import ArgChecker, ArgumentError, ArgumentTypeError
from .cuda_arrays import device_array
from .cuda_driver import CUDAError, driver
from .cuda_graph import device_memory
from .module import Module, TimingResult, register_loader

#: The key of a call's error record among its temporaries (no buffer name has a NUL).
_RECORD = "\0record"
_RECORD_BYTES = 8 * ERROR_RECORD_SLOTS

#: First line of an exported CUDA module.
BUNDLE_MAGIC = b"TECOMP-CUDA-MODULE 1\n"

_CTYPES = {
    "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint32": ctypes.c_uint32,
    "uint64": ctypes.c_uint64,
}


def _check_alignment(f, step, ptrs) -> None:
    """Refuse a parameter whose address is not a multiple of the bytes the kernel of
    ``step`` reads or writes it with at once (a misaligned vector access would fault)."""
    for b in step["buffers"]:
        align = b.get("align")
        if align and ptrs[b["param"]] % align:
            i = b["param"]
            raise ArgumentError(
                f"argument {i} ({f.signature.params[i].name!r}) of {f.name} is at device "
                f"address {ptrs[i]:#x}, not a multiple of {align} bytes: kernel "
                f"{step['kernel']} reads or writes it {align} bytes at a time; pass an array "
                f"that starts at such an address (a copy: x.clone() in PyTorch, x.copy() in "
                f"CuPy)")


class CUDAFunction:
    """One function of a ``CUDAModule``: argument checks and its launch plan."""

    def __init__(self, signature: FunctionSignature, plan: list, module: CUDAModule):
        self.name = signature.name
        self.signature = signature
        self.plan = plan
        self.checker = ArgChecker(signature)
        self._module = module

    def _bind(self, args) -> tuple:
        """(device pointers per parameter, size env) for device arrays; (None, None)
        for numpy arrays, which the caller copies."""
        views = [device_array(a) for a in args]
        if all(v is None for v in views):
            self.checker.check(args)  # raises naming the argument
            return None, None
        return self._check_device(args, views)

    def _check_device(self, args, views) -> tuple:
        sig = self.signature
        if len(args) != len(sig.params):
            raise ArgumentTypeError(
                f"{self.name} takes {len(sig.params)} arguments ({sig}), got {len(args)}")
        env: dict = {}
        for i, (a, v, p) in enumerate(zip(args, views, sig.params)):
            what = f"argument {i} ({p.name!r}) of {self.name}"
            if v is None:
                raise ArgumentTypeError(
                    f"{what} is a {type(a).__name__}, but other arguments are device arrays; "
                    f"pass all arguments as numpy arrays or all as device arrays")
            if v.dtype != np.dtype(p.dtype):
                raise ArgumentTypeError(f"{what} must have dtype {p.dtype}, got {v.dtype}")
            if len(v.shape) != len(p.shape):
                raise ArgumentError(f"{what} must have {len(p.shape)} dimensions, got "
                                    f"{len(v.shape)} (shape {v.shape})")
            for s, got in zip(p.shape, v.shape):
                if isinstance(s, str) and s not in env:
                    env[s] = got
            if not v.c_contiguous:
                raise ArgumentError(f"{what} must be C-contiguous")
            v.check_device(what)
        for i, (v, p) in enumerate(zip(views, sig.params)):
            for d, (s, got) in enumerate(zip(p.shape, v.shape)):
                want = eval_size(s, env)
                if want != got:
                    size = str(want) if isinstance(s, int) else f"{spec_str(s)} = {want}"
                    raise ArgumentError(
                        f"argument {i} ({p.name!r}) of {self.name} must have size {size} "
                        f"in dimension {d}, got {got}")
        return [v.ptr for v in views], env

    def _sizes(self, args) -> dict:
        return {name: args[i].shape[d]
                for name, (i, d) in zip(self.signature.size_vars,
                                        self.signature.size_sources())}

    def __call__(self, *args) -> None:
        drv = driver()
        ptrs, env = self._bind(args)
        if ptrs is not None:
            self._module._run_plan(drv, self, ptrs, env)
            return
        self._run_numpy(drv, args)

    def prepare(self, *arrays):
        """Host executors pack a kernel's arguments once (``PackedFunction.prepare``); a
        CUDA function's arguments live on the device, so a model built for cuda runs on
        the device executor (``GraphModule(lib)`` returns a ``DeviceGraphModule``)."""
        raise TecompError(
            f"{self.name} is a CUDA function: its arguments live in device memory, so it "
            f"runs in a model through tecomp.graph.GraphModule(lib) (a DeviceGraphModule), "
            f"not through a host function's packed arguments")

    def call_trusted(self, *arrays) -> None:
        """Call with numpy arrays that the caller has already validated against
        ``signature`` (see ``PackedFunction.call_trusted``); they are still copied to the
        device and back."""
        self._run_numpy(driver(), arrays)

    def _run_numpy(self, drv, args) -> None:
        owned = [drv.alloc(a.nbytes) for a in args]
        try:
            for p, a in zip(owned, args):
                drv.to_device(p, np.ascontiguousarray(a))
            failed = None
            try:
                self._module._run_plan(drv, self, owned, self._sizes(args))
            except RuntimeCheckError as err:
                failed = err  # the kernels finished: their outputs come back first
            for p, a, spec in zip(owned, args, self.signature.params):
                if spec.output:
                    drv.to_host(a, p)
            if failed is not None:
                raise failed
        finally:
            for p in owned:
                drv.free(p)

    def __repr__(self):
        return f"<CUDAFunction {self.name}({self.signature})>"


class CUDAModule(Module):
    """Kernels compiled for a CUDA target (see the module docstring).

    Parameters
    ----------
    target : Target or str
    signatures : list of FunctionSignature
    plans : dict of function name -> list of plan steps
    cubin : bytes
    sources : dict of format -> str
        "cuda" (the CUDA C) and "ptx".
    simulator : callable, optional
        ``simulator(name, *arrays)`` runs function ``name`` on the CPU; given by the code
        generator, absent on a loaded module.
    """

    def __init__(self, target, signatures, plans: dict, cubin: bytes, sources: dict,
                 simulator=None):
        super().__init__(target, signatures)
        self.plans = plans
        self.cubin = cubin
        self.sources = sources
        self._simulator = simulator
        self._loaded = None  # (CUmodule, {kernel name: CUfunction}) once on a device
        self._funcs = {s.name: CUDAFunction(s, plans[s.name], self) for s in signatures}

    def get_source(self, fmt: str = "cuda") -> str:
        """The CUDA C ("cuda", "cu") or the PTX ("ptx")."""
        key = {"cu": "cuda"}.get(fmt, fmt)
        if key not in self.sources:
            raise ValueError(f"get_source format {fmt!r} is not supported; allowed: 'cuda', "
                             f"'ptx'")
        return self.sources[key]

    def simulate(self, *arrays, func_name: str | None = None) -> None:
        """Run a function on numpy arrays with its kernels simulated on the CPU
        (``tecomp.ir.gpu_sim``): slow, for checking schedules where no GPU is present."""
        f = self[func_name or self.entry_name]
        if self._simulator is None:
            raise TecompError(
                "this CUDA module was loaded from an exported file, which holds no loop IR "
                "to simulate; simulate the module tecomp.build returns")
        f.checker.check(arrays)
        self._simulator(f.name, *arrays)

    def device_memory(self, simulate: bool | None = None):
        """Where a model of this module's functions keeps its values and runs them: the
        GPU (``CUDAMemory``) or, with ``simulate`` (default: without a usable GPU), the
        simulator (``SimulatedCUDAMemory``); see :mod:`tecomp.runtime.cuda_graph`."""
        return device_memory(self, simulate)

    # ---- running ----------------------------------------------------------------------

    def _load(self, drv):
        """The cubin loaded on this GPU; where the driver refuses it (a GPU of another
        architecture), the PTX, which the driver compiles for any GPU at least as new as
        the architecture it was generated for."""
        try:
            return drv.load_module(self.cubin)
        except CUDAError:
            ptx = self.sources.get("ptx")
            if not ptx:
                raise
            return drv.load_module(ptx.encode() + b"\0")

    def _kernel(self, drv, name: str, shared: int = 0):
        """The loaded kernel ``name``, allowed ``shared`` bytes of dynamic shared memory."""
        if self._loaded is None:
            self._loaded = (self._load(drv), {})
            # Unloaded with the module: a tuning session loads thousands of candidates.
            weakref.finalize(self, drv.unload_module, self._loaded[0])
        mod, kernels = self._loaded
        if name not in kernels:
            func = drv.get_function(mod, name)
            if shared:
                drv.allow_dynamic_shared(func, name, shared)
            kernels[name] = func
        return kernels[name]

    def _run_plan(self, drv, f: CUDAFunction, ptrs: list, env: dict, sync: bool = True,
                  kept: dict | None = None, stream=0):
        """Run ``f``'s plan on ``stream``. Temporaries are allocated before their kernels
        and freed after the last one has finished (freeing waits for the device, so a
        kernel's fault is reported by the synchronization that names it), or, with
        ``kept`` (a dict the caller frees), allocated once and reused: timing measures the
        kernels, not the allocator. Without ``sync`` it only queues: nothing is allocated
        then that ``kept`` does not hold, so a CUDA graph can record it. Returns the address
        of the call's error record (None when its kernels report no run-time checks)."""
        temps: dict = {} if kept is None else kept
        record = None
        try:
            if any(step.get("record") for step in f.plan):
                # The call's error record (tecomp.runtime.abi), zeroed before the kernels.
                if _RECORD not in temps:
                    temps[_RECORD] = drv.alloc(_RECORD_BYTES)
                record = temps[_RECORD]
                drv.zero_async(record, _RECORD_BYTES, stream)
            for step in f.plan:
                op = step["op"]
                if op == "alloc" and step["name"] not in temps:
                    nbytes = eval_size(step["size"], env) * np.dtype(step["dtype"]).itemsize
                    temps[step["name"]] = drv.alloc(nbytes)
                elif op == "launch":
                    _check_alignment(f, step, ptrs)
                    self._launch(drv, step, ptrs, temps, env, record, stream)
            if sync:
                names = ", ".join(s["kernel"] for s in f.plan if s["op"] == "launch")
                drv.synchronize(f"{f.name} (kernels {names})")
                if record is not None:
                    self.check_record(drv, f, record)
        finally:
            if kept is None:
                for p in temps.values():
                    drv.free(p)
        return record if kept is not None else None

    @staticmethod
    def check_record(drv, f: CUDAFunction, record: int) -> None:
        """Raise the run-time check that failed in ``f``'s last run, as its error record
        at device address ``record`` says (the device must be done with it)."""
        got = np.zeros(ERROR_RECORD_SLOTS, np.int64)
        drv.to_host(got, record)
        err = f.signature.check_error([int(x) for x in got])
        if err is not None:
            raise err

    def _launch(self, drv, step, ptrs, temps, env, record=None, stream=0):
        args = [ctypes.c_void_p(ptrs[b["param"]] if "param" in b else temps[b["temp"]])
                for b in step["buffers"]]
        args += [_CTYPES[dtype](env[name]) for name, dtype in step["scalars"]]
        if step.get("record"):
            args.append(ctypes.c_void_p(record))
        grid = [eval_size(g, env) for g in step["grid"]]
        block = [eval_size(b, env) for b in step["block"]]
        if min(grid) <= 0:
            return  # an empty grid (a zero size) has nothing to do
        shared = step.get("shared", 0)
        drv.launch(self._kernel(drv, step["kernel"], shared), step["kernel"], grid, block,
                   args, stream, shared)

    def time_evaluator(self, func_name: str | None = None, number: int = 10, repeat: int = 3,
                       min_repeat_ms: float = 0, warmup_ms: float = 200):
        """A callable timing a function on the GPU with CUDA events (seconds per call per
        repeat, as ``Module.time_evaluator``); arguments are copied to the device and
        temporaries allocated once, before ``warmup_ms`` of untimed runs."""
        if number < 1 or repeat < 1:
            raise ValueError(f"number and repeat must be >= 1, got {number}, {repeat}")
        f = self[func_name or self.entry_name]

        def evaluator(*args) -> TimingResult:
            drv = driver()
            ptrs, env = f._bind(args)
            owned = []
            if ptrs is None:
                owned = [drv.alloc(a.nbytes) for a in args]
                for p, a in zip(owned, args):
                    drv.to_device(p, np.ascontiguousarray(a))
                ptrs, env = owned, f._sizes(args)
            kept: dict = {}
            events = []
            try:
                events += (drv.event(), drv.event())
                start, end = events
                self._run_plan(drv, f, ptrs, env, kept=kept)
                t_end = time.perf_counter() + warmup_ms / 1e3
                while time.perf_counter() < t_end:  # clocks up, caches warm
                    self._run_plan(drv, f, ptrs, env, kept=kept)
                results = []
                for _ in range(repeat):
                    n = number
                    while True:
                        drv.record(start)
                        for _ in range(n):
                            self._run_plan(drv, f, ptrs, env, sync=False, kept=kept)
                        drv.record(end)
                        dt = drv.elapsed_seconds(start, end)
                        if dt * 1e3 >= min_repeat_ms or n >= 1 << 20:
                            break
                        n *= 2
                    results.append(dt / n)
                drv.synchronize(f"timing {f.name}")
            finally:
                for p in owned + list(kept.values()):
                    drv.free(p)
                for e in events:
                    drv.destroy_event(e)
            return TimingResult(results)

        return evaluator

    # ---- export -----------------------------------------------------------------------

    def export_library(self, path: str) -> str:
        """Write the module (cubin, launch plans, argument metadata, sources) to ``path``;
        ``tecomp.runtime.load_module(path)`` restores it."""
        meta = {
            "target": str(self.target),
            "funcs": [f.signature.to_json() for f in self._funcs.values()],
            "plans": self.plans,
            "sources": self.sources,
        }
        path = os.fspath(path)
        with open(path, "wb") as fh:
            fh.write(BUNDLE_MAGIC)
            fh.write(json.dumps(meta).encode() + b"\n")
            fh.write(self.cubin)
        return path


def load_cuda_module(path: str) -> CUDAModule:
    """Read a module ``CUDAModule.export_library`` wrote."""
    with open(path, "rb") as fh:
        data = fh.read()
    head, _, rest = data[len(BUNDLE_MAGIC):].partition(b"\n")
    try:
        meta = json.loads(head)
        sigs = [FunctionSignature.from_json(f) for f in meta["funcs"]]
    except (ValueError, KeyError, TypeError) as err:
        raise TecompError(f"{path!r} is not a readable CUDA module: {err}") from None
    return CUDAModule(meta["target"], sigs, meta["plans"], rest, meta["sources"])


register_loader(BUNDLE_MAGIC, load_cuda_module)
