"""Runtime: compiled modules callable on numpy arrays, timing, export and load, C
headers for exported libraries, and runners that call modules built for other machines.

This package is the bottom of the stack: it imports no code generator, so a library
written by ``export_library`` loads and runs (``load_module``) without LLVM. The CUDA
driver and the runners load on first use (``tecomp.runtime.CUDAModule``,
``tecomp.runtime.SSHRunner``; ``load_module`` imports the CUDA loader when it opens a
CUDA module), so a model runtime imports only what runs a shared library.
"""

import importlib

# First: the wait policy of libgomp's threads must be in the environment before anything
# loads libgomp (tecomp.runtime.threads).
from .threads import get_num_threads, set_num_threads  # isort: skip
from .abi import FunctionSignature, ParamSpec
from .args import ArgumentError, ArgumentTypeError
from .module import LibraryModule, Module, PackedFunction, TimingResult, load_module

__all__ = [
    "CUDAError",
    "CUDAModule",
    "CUDAUnavailableError",
    "FunctionSignature",
    "LibraryModule",
    "Module",
    "PackedFunction",
    "ParamSpec",
    "QemuRunner",
    "RemoteModule",
    "Runner",
    "RunnerError",
    "SSHRunner",
    "TimingResult",
    "get_num_threads",
    "load_module",
    "set_num_threads",
    "ArgumentError",
    "ArgumentTypeError",
]

#: Names loaded on first use -> the module of this package that defines them.
_LAZY = {
    "CUDAError": "cuda_driver",
    "CUDAUnavailableError": "cuda_driver",
    "CUDAModule": "cuda_module",
    "QemuRunner": "runner",
    "RemoteModule": "runner",
    "Runner": "runner",
    "RunnerError": "runner",
    "SSHRunner": "runner",
}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'tecomp.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value
