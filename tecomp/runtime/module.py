"""Runtime modules: call compiled functions on numpy arrays, time them, export them.

A ``Module`` holds one or more compiled functions, each reachable as ``mod[name]``;
``mod(*arrays)`` calls the first. Functions use the packed convention of
``tecomp.codegen.llvm`` (``i32 f(void **args, int64_t *sizes)``), so every call is one
ctypes call after validation.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from ..errors import TargetError, TecompError
from .ndarray import ArgChecker

_PACKED = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)


@dataclass
class TimingResult:
    """Seconds per call of each repeat; ``mean``/``median``/``std``/``min`` over repeats."""

    results: list = field(default_factory=list)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.results) if len(self.results) > 1 else 0.0

    @property
    def min(self) -> float:
        return min(self.results)

    def __str__(self):
        return (
            f"mean {self.mean * 1e3:.4f} ms, median {self.median * 1e3:.4f} ms, "
            f"std {self.std * 1e3:.4f} ms over {len(self.results)} repeats"
        )


class PackedFunction:
    """One compiled function: validates arguments, then calls the machine code."""

    def __init__(self, meta: dict, address: int | None, module: "Module"):
        self.name = meta["name"]
        self.meta = meta
        self.checker = ArgChecker(meta)
        self._module = module  # keeps the code alive as long as this function
        self._cfunc = _PACKED(address) if address else None
        self._ptr_array = ctypes.c_void_p * max(len(meta["params"]), 1)
        self._size_array = ctypes.c_int64 * max(len(meta["size_vars"]), 1)

    def _native(self):
        if self._cfunc is None:
            t = self._module.target
            raise TargetError(
                f"function {self.name!r} was built for {t} ({t.target_arch}), which cannot "
                f"run on this machine; export it with export_library and run it there"
            )
        return self._cfunc

    def _pack(self, args):
        ptrs, sizes = self.checker.check(args)
        return self._ptr_array(*ptrs), self._size_array(*sizes)

    def __call__(self, *args) -> None:
        fn = self._native()
        pa, sa = self._pack(args)
        rc = fn(pa, sa)
        if rc != 0:
            raise MemoryError(f"{self.name}: a temporary buffer could not be allocated")

    def __repr__(self):
        return f"<PackedFunction {self.name}({self.checker.sig})>"


class Module:
    """Compiled functions for one target.

    Examples
    --------
    >>> mod = tecomp.build(s, [A, B, C], name="mm")      # doctest: +SKIP
    >>> mod(a, b, c); mod["mm"](a, b, c)                  # doctest: +SKIP
    >>> mod.time_evaluator(number=10, repeat=3)(a, b, c).median   # doctest: +SKIP
    """

    def __init__(self, target, funcs_meta, addresses=None, artifact=None, library=None,
                 ir_text=None):
        self.target = target
        self._artifact = artifact  # LLVMArtifact (JIT) or None for a loaded library
        self._library = library  # ctypes.CDLL for a loaded .so
        self._ir_text = ir_text
        addresses = addresses or {}
        self._funcs = {}
        for m in funcs_meta:
            self._funcs[m["name"]] = PackedFunction(m, addresses.get(m["name"]), self)
        self.entry_name = funcs_meta[0]["name"] if funcs_meta else None

    # ---- calling ----------------------------------------------------------------------

    @property
    def function_names(self) -> list:
        return list(self._funcs)

    def __getitem__(self, name: str) -> PackedFunction:
        try:
            return self._funcs[name]
        except KeyError:
            raise KeyError(
                f"module has no function {name!r}; it has: {', '.join(self._funcs)}"
            ) from None

    def __contains__(self, name) -> bool:
        return name in self._funcs

    def __call__(self, *args) -> None:
        if self.entry_name is None:
            raise TecompError("module has no functions")
        self._funcs[self.entry_name](*args)

    # ---- sources ----------------------------------------------------------------------

    def get_source(self, fmt: str = "ll") -> str:
        """The optimized LLVM IR ("ll") or the target assembly ("asm", "s")."""
        if fmt in ("ll", "llvm", "ir"):
            if self._artifact is not None:
                return self._artifact.ir_text
            if self._ir_text is not None:
                return self._ir_text
            raise TecompError("this module was loaded from a shared library; it has no IR")
        if fmt in ("asm", "s"):
            if self._artifact is not None:
                return self._artifact.asm()
            raise TecompError("this module was loaded from a shared library; it has no asm")
        raise ValueError(f"get_source format {fmt!r} is not supported; allowed: 'll', 'asm'")

    # ---- timing -----------------------------------------------------------------------

    def time_evaluator(self, func_name: str | None = None, number: int = 10, repeat: int = 3,
                       min_repeat_ms: float = 0, warmup_ms: float = 200):
        """A callable that times ``func_name`` (default: the entry function).

        Arguments are validated once; then the function runs untimed for ``warmup_ms``
        (so other thread pools go quiet and caches warm up, see docs/measuring.md), then
        ``repeat`` batches of ``number`` calls (more while a batch is shorter than
        ``min_repeat_ms``). Each result is seconds per call of one batch.
        """
        if number < 1 or repeat < 1:
            raise ValueError(f"number and repeat must be >= 1, got {number}, {repeat}")
        f = self[func_name or self.entry_name]

        def evaluator(*args) -> TimingResult:
            fn = f._native()
            pa, sa = f._pack(args)
            rc = fn(pa, sa)
            if rc != 0:
                raise MemoryError(f"{f.name}: a temporary buffer could not be allocated")
            t_end = time.perf_counter() + warmup_ms / 1e3
            while time.perf_counter() < t_end:
                fn(pa, sa)
            out = []
            perf = time.perf_counter
            for _ in range(repeat):
                n = number
                while True:
                    t0 = perf()
                    for _ in range(n):
                        fn(pa, sa)
                    dt = perf() - t0
                    if dt * 1e3 >= min_repeat_ms or n >= 1 << 30:
                        break
                    # Grow the batch to reach min_repeat_ms, as TVM does.
                    scale = (min_repeat_ms / max(dt * 1e3, 1e-6)) * 1.2
                    n = max(n * 2, int(n * scale))
                out.append(dt / n)
            return TimingResult(out)

        return evaluator

    # ---- export -----------------------------------------------------------------------

    def export_library(self, path: str, cc: str | None = None) -> str:
        """Write a shared library (ELF ET_DYN) with the functions and their metadata.

        The argument metadata (names, dtypes, shapes) is embedded as a string symbol, so
        ``load_module(path)`` needs no side file. For a cross target the object is linked
        with ``<triple>-gcc`` if one is installed; otherwise an object file is written
        to ``path`` (and the path returned).
        """
        if self._artifact is None:
            if self._library is not None and getattr(self, "_path", None):
                shutil.copyfile(self._path, path)
                return path
            raise TecompError("this module has no code to export")
        obj = self._artifact.object_code()
        path = os.fspath(path)
        with tempfile.TemporaryDirectory() as tmp:
            o = os.path.join(tmp, "mod.o")
            with open(o, "wb") as fh:
                fh.write(obj)
            compiler = cc or self._linker()
            if compiler is None:
                shutil.copyfile(o, path)
                return path
            cmd = [compiler, "-shared", "-o", path, o, "-lgomp", "-lm"]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                raise TecompError(
                    f"linking {path} failed ({' '.join(cmd)}):\n{res.stderr.strip()}"
                )
        return path

    def _linker(self) -> str | None:
        if self.target.is_host:
            return shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        arch = self.target.target_arch
        for name in (f"{self.target.mtriple}-gcc", f"{arch}-linux-gnu-gcc"):
            if shutil.which(name):
                return name
        return None

    def __repr__(self):
        return f"<tecomp.runtime.Module target={self.target} functions={self.function_names}>"


def load_module(path: str) -> Module:
    """Load a library written by ``Module.export_library``.

    Raises
    ------
    TecompError
        If the file is not a shared library tecomp wrote, or is for another machine.
    """
    from ..codegen.llvm import METADATA_SYMBOL, libgomp_path
    from ..target import Target

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no module file at {path!r}")
    with open(path, "rb") as fh:
        head = fh.read(20)
    if head[:4] != b"\x7fELF":
        raise TecompError(f"{path!r} is not an ELF shared library")
    if head[16] != 3:
        raise TecompError(
            f"{path!r} is an ELF file of type {head[16]} but not a shared object (ET_DYN); "
            f"an object file for a cross target cannot be loaded here"
        )
    libgomp_path()  # make GOMP_* resolvable before dlopen
    try:
        lib = ctypes.CDLL(os.path.abspath(path))
    except OSError as err:
        raise TecompError(f"cannot load {path!r}: {err}") from None
    try:
        addr = ctypes.addressof(ctypes.c_char.in_dll(lib, METADATA_SYMBOL))
    except ValueError:
        raise TecompError(f"{path!r} was not written by tecomp (no {METADATA_SYMBOL})") from None
    meta = json.loads(ctypes.string_at(addr).decode())
    addresses = {}
    for m in meta["funcs"]:
        addresses[m["name"]] = ctypes.cast(getattr(lib, m["symbol"]), ctypes.c_void_p).value
    target = Target(meta["target"])
    mod = Module(target, meta["funcs"], addresses, library=lib)
    mod._path = os.path.abspath(path)
    return mod
