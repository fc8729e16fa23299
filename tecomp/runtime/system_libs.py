"""The system libraries generated code calls: libgomp (parallel loops), libm (math) and
libgcc_s (the conversions LLVM leaves to the compiler's runtime, such as ``__truncdfhf2``
for float64 -> float16, which no CPU instruction does on x86).

Found once per process. ``libgomp_path`` also loads libgomp with ``RTLD_GLOBAL``, so the
``GOMP_*`` symbols of JIT-compiled code and of loaded libraries resolve.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import subprocess


@functools.cache
def libgomp_path() -> str | None:
    """Where libgomp lives (asked of the C compiler, then ctypes.util), or None.

    The library is loaded into the process (``RTLD_GLOBAL``) as a side effect.

    Examples
    --------
    >>> libgomp_path()   # doctest: +SKIP
    '/usr/lib/gcc/x86_64-linux-gnu/12/libgomp.so.1'
    """
    cands = []
    try:
        out = subprocess.run(
            ["cc", "-print-file-name=libgomp.so.1"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
        if out and os.path.isabs(out):
            cands.append(out)
    except (OSError, subprocess.SubprocessError):
        pass
    found = ctypes.util.find_library("gomp")
    if found:
        cands.append(found)
    cands.append("libgomp.so.1")
    for c in cands:
        try:
            ctypes.CDLL(c, mode=ctypes.RTLD_GLOBAL)
            return c
        except OSError:
            continue
    return None


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
