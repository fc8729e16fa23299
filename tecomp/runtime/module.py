"""Runtime modules: call compiled functions on numpy arrays, time them, export them.

A ``Module`` holds one or more compiled functions, each reachable as ``mod[name]``;
``mod(*arrays)`` calls the first. Functions use the packed calling convention of
``tecomp.runtime.abi`` (``int32_t f(void **args, int64_t *sizes)``), so every call is one
ctypes call after validation.

Each code generator returns its own ``Module`` subclass (the LLVM JIT module lives with
the LLVM code generator); ``LibraryModule`` is a library loaded by ``load_module``, which
needs no code generator: this package imports none.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import shutil
import statistics
import time
from dataclasses import dataclass, field

from ..errors import TargetError, TecompError
from ..target import Target
from .abi import (
    CHECK_FAILED,
    ERROR_RECORD_SLOTS,
    METADATA_SYMBOL,
    POOL_AFTER_FORK_SYMBOL,
    POOL_SET_THREADS_SYMBOL,
    RUN_CALLS_SYMBOL,
    FunctionSignature,
    decode_metadata,
)
from .args import ArgChecker, data_pointer
from .threads import attach_pool

_PACKED = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)


@dataclass
class TimingResult:
    """``results``: seconds per call of each repeat; ``mean``/``median``/``std``/``min``
    over repeats."""

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
    """One compiled function: validates arguments against its ``signature``, then calls
    the machine code at ``address`` (None: a function without code here, e.g. built for
    another machine) of ``module``, which it keeps alive."""

    def __init__(self, signature: FunctionSignature, address: int | None, module: Module):
        self.name = signature.name
        self.signature = signature
        self.checker = ArgChecker(signature)
        self._module = module  # keeps the code alive as long as this function
        self._cfunc = _PACKED(address) if address else None
        self._ptr_array = ctypes.c_void_p * max(len(signature.params), 1)
        # The size values, then the call's error record (``tecomp.runtime.abi``): each
        # call packs its own array, so concurrent calls keep their errors apart.
        self._n_sizes = len(signature.size_vars)
        self._size_array = ctypes.c_int64 * (self._n_sizes + ERROR_RECORD_SLOTS)
        #: (argument, dimension) each symbolic size is read from, in the order passed.
        self.size_sources = signature.size_sources()

    def _native(self):
        if self._cfunc is None:
            t = self._module.target
            missing = getattr(t, "missing_host_features", ())
            why = (f"uses {', '.join(missing)}, which this machine's CPU lacks" if missing
                   else "cannot run on this machine")
            raise TargetError(
                f"function {self.name!r} was built for {t} ({t.target_arch}), which {why}; "
                f"build it for 'llvm' (this CPU), or export it with export_library and run it "
                f"where it can run, or call it through a runner (tecomp.runtime.QemuRunner, "
                f"SSHRunner)"
            )
        return self._cfunc

    def _pack(self, args):
        ptrs, sizes = self.checker.check(args)
        return self._ptr_array(*ptrs), self._size_array(*sizes)

    def _call(self, fn, ptrs, sizes) -> None:
        rc = fn(ptrs, sizes)
        if rc != 0:
            self._raise(rc, sizes)

    def _raise(self, rc: int, sizes) -> None:
        """Raise the error a call that returned ``rc`` (not 0) reports in ``sizes``."""
        n = self._n_sizes
        if rc == CHECK_FAILED:
            err = self.signature.check_error(sizes[n:n + ERROR_RECORD_SLOTS])
            sizes[n] = sizes[n + 1] = 0  # a prepared call's next run starts clean
            if err is not None:
                raise err
        raise MemoryError(f"{self.name}: a temporary buffer could not be allocated")

    def __call__(self, *args) -> None:
        fn = self._native()
        self._call(fn, *self._pack(args))

    def prepare(self, *arrays) -> PreparedCall:
        """A call with these arguments, packed once, for a caller that repeats it.

        The same trust as :meth:`call_trusted`: nothing is checked. The call keeps the
        arrays' addresses and sizes, and a reference to each array, so the bytes stay
        alive as long as the call; an array must keep its shape.
        :meth:`PreparedCall.set_pointer` points an argument at new bytes of the same shape
        (an executor's new input). Calling it costs one native call.
        """
        fn = self._native()
        ptrs = self._ptr_array(*[data_pointer(a) for a in arrays])
        sizes = self._size_array(*[arrays[i].shape[d] for i, d in self.size_sources])
        return PreparedCall(self, fn, ptrs, sizes, list(arrays))

    def call_trusted(self, *arrays) -> None:
        """Call without validating the arguments, for a caller that already has.

        An executor that allocates its own arrays from this function's ``signature``
        (dtypes, shapes, C-contiguous, aligned, outputs writable and not overlapping any
        other argument) can skip the per-call checks of ``__call__``; symbolic sizes are
        read from the arrays' shapes. Arguments that break the signature are not
        detected: the generated code then reads or writes out of bounds.

        Examples
        --------
        >>> f = mod.get_function("mm")        # doctest: +SKIP
        >>> f(a, b, c)                         # checked once  # doctest: +SKIP
        >>> for _ in range(1000):              # doctest: +SKIP
        ...     f.call_trusted(a, b, c)
        """
        self.prepare(*arrays)()

    def __repr__(self):
        return f"<PackedFunction {self.name}({self.checker.sig})>"


class PreparedCall:
    """A :class:`PackedFunction` call with its arguments packed (see
    :meth:`PackedFunction.prepare`)."""

    __slots__ = ("function", "sizes", "_fn", "_ptrs", "_arrays")

    def __init__(self, function: PackedFunction, fn, ptrs, sizes, arrays: list):
        self.function = function
        #: The sizes the call passes, one per ``function.size_sources``: an executor whose
        #: buffers keep their addresses at new shapes writes the new sizes here.
        self.sizes = sizes
        self._fn, self._ptrs = fn, ptrs
        # Held so that a caller dropping its arrays cannot leave the call dangling
        # pointers: the generated code would read and write freed memory.
        self._arrays = arrays

    def set_pointer(self, index: int, array, address: int | None = None) -> None:
        """Argument ``index`` reads (or writes) ``array`` from now on; it must have the
        shape and dtype of the array it replaces. ``address``: ``array``'s data pointer,
        when the caller has it already (an input several calls read)."""
        self._ptrs[index] = data_pointer(array) if address is None else address
        self._arrays[index] = array

    def __call__(self) -> None:
        self.function._call(self._fn, self._ptrs, self.sizes)

    @staticmethod
    def run_all(calls) -> None:
        """Run ``calls`` in order (an executor's run of a model's kernels)."""
        for call in calls:
            call.function._call(call._fn, call._ptrs, call.sizes)


_RUN_CALLS = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p,
                              ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


class CallSequence:
    """Prepared calls of one module run in order by one native call: the module's
    runner (``abi.RUN_CALLS_SYMBOL``) walks tables of their entry points, pointer arrays
    and size arrays, so a model's run crosses from Python to native code once instead of
    once per kernel (about a microsecond each) and holds the GIL released throughout.

    The tables hold the addresses of each call's own pointer and size arrays, so a
    ``PreparedCall.set_pointer`` or a new size written into ``call.sizes`` is what the next
    run passes. Calls of several modules, or of a module without a runner (a library
    exported before it existed), run one by one as ``PreparedCall.run_all`` does.
    """

    __slots__ = ("calls", "_runner", "_tables", "_failed")

    def __init__(self, calls):
        self.calls = tuple(calls)
        modules = {id(c.function._module): c.function._module for c in self.calls}
        address = (next(iter(modules.values())).run_calls_address if len(modules) == 1
                   else None)
        self._runner = _RUN_CALLS(address) if address else None
        n = len(self.calls)
        self._tables = (
            (ctypes.c_void_p * n)(*[ctypes.cast(c._fn, ctypes.c_void_p).value
                                    for c in self.calls]),
            (ctypes.c_void_p * n)(*[ctypes.addressof(c._ptrs) for c in self.calls]),
            (ctypes.c_void_p * n)(*[ctypes.addressof(c.sizes) for c in self.calls]),
        ) if self._runner is not None else ()
        self._failed = ctypes.c_int64(0)

    def __call__(self) -> None:
        if self._runner is None:
            PreparedCall.run_all(self.calls)
            return
        fns, ptrs, sizes = self._tables
        rc = self._runner(len(self.calls), fns, ptrs, sizes, ctypes.byref(self._failed))
        if rc != 0:
            call = self.calls[self._failed.value]
            call.function._raise(rc, call.sizes)


class Module:
    """Compiled functions for one target.

    Parameters
    ----------
    target : Target or str
        What the code was built for; a string is parsed when first read (parsing an llvm
        target asks LLVM about CPUs, which calling the functions never needs).
    signatures : list of FunctionSignature
        The functions, the entry function first.
    addresses : dict of name -> int, optional
        Entry-point addresses of the functions that can run in this process.
    run_calls : int, optional
        The address of the module's call-sequence runner (``abi.RUN_CALLS_SYMBOL``) where
        it can run in this process, so that :class:`CallSequence` calls its functions
        with one native call.

    Examples
    --------
    >>> mod = tecomp.build(s, [A, B, C], name="mm")      # doctest: +SKIP
    >>> mod(a, b, c); mod["mm"](a, b, c)                  # doctest: +SKIP
    >>> mod.time_evaluator(number=10, repeat=3)(a, b, c).median   # doctest: +SKIP
    """

    def __init__(self, target, signatures, addresses=None, run_calls: int | None = None):
        self._target = target
        addresses = addresses or {}
        #: The address of the module's call-sequence runner (``abi.RUN_CALLS_SYMBOL``),
        #: where its code runs in this process and has one (libraries exported before it
        #: existed do not).
        self.run_calls_address = run_calls
        self._funcs = {}
        for sig in signatures:
            self._funcs[sig.name] = PackedFunction(sig, addresses.get(sig.name), self)
        self.entry_name = signatures[0].name if signatures else None

    @property
    def target(self) -> Target:
        if not isinstance(self._target, Target):
            self._target = Target(self._target)
        return self._target

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

    def get_function(self, name: str) -> PackedFunction:
        """The function ``name`` (as ``mod[name]``), e.g. for ``call_trusted``."""
        return self[name]

    def __contains__(self, name) -> bool:
        return name in self._funcs

    def __call__(self, *args) -> None:
        if self.entry_name is None:
            raise TecompError("module has no functions")
        self._funcs[self.entry_name](*args)

    # ---- sources ----------------------------------------------------------------------

    def get_source(self, fmt: str = "ll") -> str:
        """The module's source in format ``fmt``; each code generator's module says
        which formats it has."""
        raise TecompError(f"{type(self).__name__} has no source code")

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
            f._call(fn, pa, sa)  # raises a failed check before anything is timed
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

    def export_library(self, path: str) -> str:
        """Write the functions and their metadata to a shared library at ``path``."""
        raise TecompError(f"{type(self).__name__} has no code to export")

    @property
    def signatures(self) -> list:
        """The ``FunctionSignature`` of each function, the entry function first."""
        return [f.signature for f in self._funcs.values()]

    def export_header(self, path: str) -> str:
        """Write the C header of the library ``export_library`` writes.

        It declares each function's entry point and a typed wrapper
        ``tecomp_call_<name>(buffers..., sizes...)``, and the function table the
        library carries (``tecomp.runtime.c_api``), so a C program calls the module
        without Python.

        Parameters
        ----------
        path : str
            Where to write, e.g. ``"mm.h"``; its file name gives the include guard.

        Returns
        -------
        str
            ``path``.

        Examples
        --------
        >>> mod.export_library("mm.so"); mod.export_header("mm.h")   # doctest: +SKIP
        >>> # cc main.c mm.so -o main   (main.c: #include "mm.h" ... tecomp_call_mm(a, b, c))
        """
        # Writing C is export work: a process that only loads and calls libraries never
        # imports the header generator.
        from .c_api import header_text

        path = os.fspath(path)
        guard = "TECOMP_" + os.path.basename(path).replace(".", "_")
        with open(path, "w") as fh:
            fh.write(header_text(self.signatures, str(self._target), guard))
        return path

    def __repr__(self):
        return f"<{type(self).__name__} target={self._target} functions={self.function_names}>"


class LibraryModule(Module):
    """A module loaded from a shared library that ``export_library`` wrote (made by
    :func:`load_module`): the ``target`` string it was built for, its functions'
    ``signatures`` and ``addresses``, the opened ``library`` and its ``path``, and
    ``run_calls``, the address of its call-sequence runner (None in a library exported
    before modules had one)."""

    def __init__(self, target: str, signatures, addresses, library: ctypes.CDLL, path: str,
                 run_calls: int | None = None):
        super().__init__(target, signatures, addresses, run_calls)
        self._library = library  # dlclose'd when the last function is gone
        self.path = path

    def get_source(self, fmt: str = "ll") -> str:
        raise TecompError(
            f"this module was loaded from the shared library {self.path!r}, which holds "
            f"machine code only; get_source({fmt!r}) works on the module tecomp.build returns"
        )

    def export_library(self, path: str) -> str:
        """Copy the library this module was loaded from to ``path``."""
        shutil.copyfile(self.path, path)
        return os.fspath(path)


#: File headers of module formats other than shared libraries -> their loader.
_LOADERS: dict = {}

#: The modules that register the other formats tecomp writes (``register_loader``):
#: ``load_module`` imports them the first time it opens a file that is not a shared
#: library, so loading a shared library imports no CUDA support.
BUILTIN_FORMATS = ("tecomp.runtime.cuda_module",)


def register_loader(magic: bytes, load) -> None:
    """Make ``load_module`` open files starting with ``magic`` with ``load(path)``
    (e.g. exported CUDA modules, ``tecomp.runtime.cuda_module``)."""
    _LOADERS[magic] = load


def _loader_for(head: bytes):
    """The registered loader of files starting with ``head``, or None."""
    return next((load for magic, load in _LOADERS.items() if head.startswith(magic)), None)


def load_module(path: str) -> Module:
    """Load the library at ``path`` written by ``Module.export_library``.

    Loading needs no code generator: it opens the library with the system loader and
    reads the argument metadata (``tecomp.runtime.abi``) it embeds. Files in another
    registered format (``register_loader``: an exported CUDA module) go to their loader.

    Raises
    ------
    TecompError
        If the file is not a shared library tecomp wrote, or is for another machine.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no module file at {path!r}")
    with open(path, "rb") as fh:
        head = fh.read(64)
    load = _loader_for(head)
    if load is None and head[:4] != b"\x7fELF":
        for name in BUILTIN_FORMATS:
            importlib.import_module(name)
        load = _loader_for(head)
    if load is not None:
        return load(path)
    if head[:4] != b"\x7fELF":
        raise TecompError(f"{path!r} is not an ELF shared library")
    if head[16] != 3:
        raise TecompError(
            f"{path!r} is an ELF file of type {head[16]} but not a shared object (ET_DYN); "
            f"an object file for a cross target cannot be loaded here"
        )
    try:
        lib = ctypes.CDLL(os.path.abspath(path))
    except OSError as err:
        raise TecompError(f"cannot load {path!r}: {err}") from None
    try:
        addr = ctypes.addressof(ctypes.c_char.in_dll(lib, METADATA_SYMBOL))
    except ValueError:
        raise TecompError(f"{path!r} was not written by tecomp (no {METADATA_SYMBOL})") from None
    target, signatures = decode_metadata(ctypes.string_at(addr))
    addresses = {sig.name: _symbol_address(lib, sig.symbol) for sig in signatures}
    try:
        run_calls = _symbol_address(lib, RUN_CALLS_SYMBOL)
    except AttributeError:  # exported before modules had one
        run_calls = None
    with contextlib.suppress(AttributeError):  # exported before libraries had a pool
        attach_pool(_symbol_address(lib, POOL_SET_THREADS_SYMBOL),
                    _symbol_address(lib, POOL_AFTER_FORK_SYMBOL))
    return LibraryModule(target, signatures, addresses, lib, os.path.abspath(path),
                         run_calls)


def _symbol_address(lib: ctypes.CDLL, name: str) -> int:
    """The address of ``lib``'s symbol ``name``; AttributeError where it has none."""
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
