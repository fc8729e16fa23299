"""``LLVMModule``: the runtime module ``build_llvm`` returns, with its IR, its assembly and
a shared-library export."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from ...errors import TecompError
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
        super().__init__(target, signatures, artifact.addresses)
        self._artifact = artifact  # owns the JIT engine the functions' addresses point into
        self.compile_seconds = compile_seconds

    def get_source(self, fmt: str = "ll") -> str:
        """The optimized LLVM IR ("ll") or the target assembly ("asm", "s")."""
        if fmt in ("ll", "llvm", "ir"):
            return self._artifact.ir_text
        if fmt in ("asm", "s"):
            return self._artifact.asm()
        raise ValueError(f"get_source format {fmt!r} is not supported; allowed: 'll', 'asm'")

    def export_library(self, path: str, cc: str | None = None) -> str:
        """Write a shared library (ELF ET_DYN) with the functions and their metadata.

        The argument metadata (names, dtypes, shapes; see ``tecomp.runtime.abi``) is
        embedded as a string symbol, so ``load_module(path)`` needs no side file. For a
        cross target the object is linked with ``<triple>-gcc`` if one is installed;
        otherwise an object file is written to ``path`` (and the path returned).

        Parameters
        ----------
        path : str
        cc : str, optional
            The compiler driver that links; found on PATH when not given.

        Raises
        ------
        TecompError
            When linking fails (the message holds the linker's output).
        """
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
