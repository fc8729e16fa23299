"""The CUDA code generator: kernels of lowered functions -> CUDA C (``source``) ->
cubin and PTX through NVRTC (``nvrtc``) -> a ``tecomp.runtime.CUDAModule`` (``build``).

The backend is registered for target kind "cuda" (``tecomp.codegen.register_backend``).
"""

from .build import build_cuda, launch_plan
from .nvrtc import compile_cuda, nvrtc_available
from .source import kernel_source
from ..registry import register_backend

register_backend("cuda", build_cuda)

__all__ = ["build_cuda", "compile_cuda", "kernel_source", "launch_plan", "nvrtc_available"]
