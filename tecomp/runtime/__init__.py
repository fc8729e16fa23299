"""Runtime: compiled modules callable on numpy arrays, timing, export and load, C
headers for exported libraries, and runners that call modules built for other machines.

This package is the bottom of the stack: it imports no code generator, so a library
written by ``export_library`` loads and runs (``load_module``) without LLVM. The CUDA
driver and the runners load on first use (``tecomp.runtime.CUDAModule``,
``tecomp.runtime.SSHRunner``; ``load_module`` imports the CUDA loader when it opens a
CUDA module), so a model runtime imports only what runs a shared library.
"""

from .. import lazy_attributes
from .abi import FunctionSignature, ParamSpec
from .args import ArgumentError, ArgumentTypeError
from .module import LibraryModule, Module, PackedFunction, TimingResult, load_module
from .threads import get_num_threads, set_num_threads

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

# The CUDA driver and the runners load on first use.
__getattr__ = lazy_attributes(__name__, {
    name: (f"{__name__}.{module}", name) for module, names in (
        ("cuda_driver", ("CUDAError", "CUDAUnavailableError")),
        ("cuda_module", ("CUDAModule",)),
        ("runner", ("QemuRunner", "RemoteModule", "Runner", "RunnerError", "SSHRunner")),
    ) for name in names})
