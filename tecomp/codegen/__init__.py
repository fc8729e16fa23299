"""Code generators: loop IR (PrimFunc) -> a runnable ``runtime.Module`` for a target.

Backends are registered by target kind (``register_backend``); ``tecomp.build`` looks
them up with ``get_backend``. Built in: ``llvm`` (x86-64, AArch64 through llvmlite) and
``cuda`` (CUDA C through NVRTC).
"""

from . import cuda, llvm
from .registry import backend_kinds, get_backend, register_backend

__all__ = ["backend_kinds", "cuda", "get_backend", "llvm", "register_backend"]
