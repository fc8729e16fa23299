"""Code generators: loop IR (PrimFunc) -> a runnable ``runtime.Module`` for a target.

Each target kind is one package that registers the kind
(``tecomp.target.register_target_kind``) and its backend (``register_backend``) when
imported; ``tecomp.build`` looks the backend up with ``get_backend``. Built in, imported
here in the order their kinds are listed: ``llvm`` (x86-64, AArch64 through llvmlite)
and ``cuda`` (CUDA C through NVRTC).
"""

from . import llvm, cuda  # the order the kinds are listed in
from .registry import backend_kinds, get_backend, register_backend

__all__ = ["backend_kinds", "cuda", "get_backend", "llvm", "register_backend"]
