"""``LLVMModule``: the runtime module ``build_llvm`` returns, with its IR, its assembly and
a shared-library export."""

from __future__ import annotations

import os
import tempfile
import warnings

from ...runtime import toolchain
from ...runtime.abi import RUN_CALLS_SYMBOL
from ...runtime.module import Module
from .jit import LLVMArtifact


class LLVMModule(Module):
    """Functions compiled by LLVM for a CPU target: JIT-loaded and callable when the target
    is this machine, exportable as a shared library (or an object file) in any case.

    Attributes
    ----------
    compile_seconds : float
        Wall time ``build_llvm`` took, from loop IR to loaded machine code.
    """

    def __init__(self, target, signatures, artifact: LLVMArtifact, compile_seconds: float):
        addresses = artifact.addresses or {}
        super().__init__(target, signatures, addresses, addresses.get(RUN_CALLS_SYMBOL))
        self._artifact = artifact  # owns the JIT engine the functions' addresses point into
        self.compile_seconds = compile_seconds

    def get_source(self, fmt: str = "ll") -> str:
        """The optimized LLVM IR ("ll") or the target assembly ("asm", "s")."""
        if fmt in ("ll", "llvm", "ir"):
            return self._artifact.ir_text
        if fmt in ("asm", "s"):
            return self._artifact.asm()
        raise ValueError(f"get_source format {fmt!r} is not supported; allowed: 'll', 'asm'")

    def export_library(self, path: str, cc: str | None = None, sources=()) -> str:
        """Write a shared library (ELF ET_DYN) with the functions and their metadata.

        The argument metadata (names, dtypes, shapes; see ``tecomp.runtime.abi``) is
        embedded as a string symbol, so ``load_module(path)`` needs no side file, and the
        C function table (``tecomp.runtime.c_api``) beside it, so C programs can call the
        functions without Python. For a cross target the object is linked with the cross
        compiler ``tecomp.runtime.toolchain.c_compiler`` finds (e.g.
        ``aarch64-linux-gnu-gcc``); when there is none, the object file is written to
        ``path`` instead, with a warning that says what to install.

        Parameters
        ----------
        path : str
        cc : str, optional
            The compiler driver that links; found on PATH when not given.
        sources : sequence of str, optional
            C files compiled (``-O2 -fPIC``) and linked into the library beside the
            functions, such as a graph's model entry point (``tecomp.graph.c_model``).
            They are not part of the object file written when no compiler links.

        Returns
        -------
        str
            ``path``.

        Raises
        ------
        TecompError
            When linking fails (the message holds the linker's output).

        Examples
        --------
        >>> t = "llvm -mtriple=aarch64-linux-gnu"                    # doctest: +SKIP
        >>> mod = tecomp.build(s, [A, B, C], target=t)               # doctest: +SKIP
        >>> mod.export_library("mm.so"); mod.export_header("mm.h")  # doctest: +SKIP
        """
        obj = self._artifact.object_code()
        path = os.fspath(path)
        compiler = cc or toolchain.c_compiler(self.target.target_arch, self.target.mtriple)
        if compiler is None:
            with open(path, "wb") as fh:
                fh.write(obj)
            arch = self.target.target_arch
            warnings.warn(
                f"no C compiler links {arch} libraries here, so {path} is an object file "
                f"(link it with -shared -pthread -lm -Wl,-z,nodelete); to get a shared "
                f"library install a cross compiler: {toolchain.install_hint(arch)}",
                stacklevel=2,
            )
            return path
        with tempfile.TemporaryDirectory() as tmp:
            o = os.path.join(tmp, "mod.o")
            with open(o, "wb") as fh:
                fh.write(obj)
            # The soname lets programs linked against the library find it by file name
            # (with an rpath) wherever it is deployed.
            soname = f"-Wl,-soname,{os.path.basename(path)}"
            # nodelete: dlclose must not unmap the code the thread pool's workers run.
            toolchain.compile_c(compiler, ["-shared", "-O2", "-fPIC", soname, "-Wl,-z,nodelete",
                                           "-o", path, o, *sources, "-pthread", "-lm"], path)
        return path
