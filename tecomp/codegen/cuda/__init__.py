"""The CUDA code generator: kernels of lowered functions -> CUDA C (``source``) ->
cubin and PTX through NVRTC (``nvrtc``) -> a ``tecomp.runtime.CUDAModule`` (``build``).

Everything the target kind "cuda" needs, its options, capabilities, device passes and
code generator, is registered from here (``kind`` with
``tecomp.target.register_target_kind``, ``build`` with ``tecomp.codegen.register_backend``).
"""

from ...target import register_target_kind
from ..registry import register_backend
from .build import build_cuda, launch_plan
from .kind import CUDA, DEFAULT_CUDA_ARCH
from .nvrtc import compile_cuda, nvrtc_available
from .source import kernel_source

register_target_kind(CUDA)
register_backend("cuda", build_cuda)

__all__ = ["DEFAULT_CUDA_ARCH", "build_cuda", "compile_cuda", "kernel_source", "launch_plan",
           "nvrtc_available"]
