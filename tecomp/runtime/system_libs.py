"""The system libraries generated code calls: libm (math) and libgcc_s (the conversions
LLVM leaves to the compiler's runtime, such as ``__truncdfhf2`` for float64 -> float16,
which no CPU instruction does on x86). Found once per process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def libm_path() -> str | None:
    """The name of the C math library as the dynamic loader knows it, or None."""
    return ctypes.util.find_library("m")


@functools.cache
def libgcc_s_path() -> str | None:
    """The name of GCC's runtime library (``libgcc_s``) as the dynamic loader knows it, or
    None. A shared object tecomp links gets these routines from the linker; code compiled
    in process finds them only where this library is loaded."""
    return ctypes.util.find_library("gcc_s")
