"""Runtime: compiled modules callable on numpy arrays, timing, export and load, C
headers for exported libraries, and runners that call modules built for other machines.

This package is the bottom of the stack: it imports no code generator, so a library
written by ``export_library`` loads and runs (``load_module``) without LLVM.
"""

# First: the wait policy of libgomp's threads must be in the environment before anything
# loads libgomp (tecomp.runtime.threads).
from .threads import get_num_threads, set_num_threads  # isort: skip
from .abi import FunctionSignature, ParamSpec
from .args import ArgumentError, ArgumentTypeError
from .cuda_driver import CUDAError, CUDAUnavailableError
from .cuda_module import CUDAModule
from .module import LibraryModule, Module, PackedFunction, TimingResult, load_module
from .runner import QemuRunner, RemoteModule, Runner, RunnerError, SSHRunner

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
