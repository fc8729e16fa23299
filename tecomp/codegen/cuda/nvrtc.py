"""CUDA C -> cubin and PTX with NVRTC, through NVIDIA's Python bindings
(``cuda.bindings.nvrtc`` from ``cuda-python``/``cuda-bindings``).

Compiling needs neither a GPU nor a driver: the NVRTC library comes as a wheel
(``nvidia-cuda-nvrtc-cu12``, or CUDA 13's ``nvidia-cuda-nvrtc``), and ``cuda_fp16.h`` from
the runtime headers wheel; ``pip install tecomp[cuda]`` brings all three.
"""

from __future__ import annotations

import functools
import os
import re

from ...errors import CodegenError

_INSTALL = 'pip install "tecomp[cuda]"'


@functools.cache
def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        try:
            from cuda import nvrtc  # cuda-python before the cuda.bindings namespace
        except ImportError:
            raise CodegenError(
                f"compiling CUDA needs NVIDIA's NVRTC bindings (cuda-python); install them "
                f"with {_INSTALL}"
            ) from None
    return nvrtc


@functools.cache
def include_dirs() -> tuple:
    """Directories with the CUDA headers the generated code may include (cuda_fp16.h).

    CUDA 12's runtime wheel keeps them in ``nvidia/cuda_runtime/include``, CUDA 13's in
    ``nvidia/cu13/include``; ``cuda.pathfinder`` (a dependency of recent bindings) knows
    both and a local toolkit (``CUDA_HOME``), and the wheel's own package is the fallback
    for bindings without it."""
    found = []
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:
        pass
    else:
        try:
            d = find_nvidia_header_directory("cudart")
        except Exception:  # noqa: BLE001 - a lookup that fails is a directory not found
            d = None
        if d:
            found.append(d)
    try:
        import nvidia.cuda_runtime as rt
    except ImportError:
        pass
    else:
        found += [os.path.join(p, "include") for p in rt.__path__]
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        found.append(os.path.join(home, "include"))
    dirs = []
    for d in found:
        if os.path.isfile(os.path.join(d, "cuda_fp16.h")) and d not in dirs:
            dirs.append(d)
    return tuple(dirs[:1])


def nvrtc_available() -> str | None:
    """None when NVRTC compiles here, else why not (for skipping tests, ``tecomp doctor``)."""
    try:
        nvrtc = _nvrtc()
        err, major, minor = nvrtc.nvrtcVersion()
    except Exception as err:  # noqa: BLE001 - any failure means NVRTC cannot be used
        return f"{type(err).__name__}: {err}"
    if int(err) != 0:
        return f"nvrtcVersion failed: {err}"
    return None


def _check(result, what: str):
    err = result[0]
    if int(err) != 0:
        nvrtc = _nvrtc()
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise CodegenError(f"NVRTC {what} failed: {msg.decode(errors='replace')}")
    return result[1] if len(result) > 1 else None


def _log(nvrtc, prog) -> str:
    size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
    buf = b" " * size
    _check(nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
    return buf.rstrip(b"\0").decode(errors="replace").strip()


def _offending_lines(log: str, source: str, name: str) -> str:
    lines = source.splitlines()
    out = []
    for m in re.finditer(re.escape(name) + r"\((\d+)\)", log):
        n = int(m.group(1))
        if 1 <= n <= len(lines):
            entry = f"  {n:5d} | {lines[n - 1]}"
            if entry not in out:
                out.append(entry)
    return "\n".join(out)


def compile_cuda(source: str, arch: str, name: str = "tecomp_kernels.cu") -> tuple:
    """Compile CUDA C ``source`` for ``arch``.

    Parameters
    ----------
    source : str
    arch : str
        A real architecture such as "sm_90"; the cubin is for it, the PTX for its
        virtual counterpart.
    name : str
        The file name NVRTC reports errors against.

    Returns
    -------
    (bytes, str)
        The cubin and the PTX.

    Raises
    ------
    CodegenError
        When NVRTC is missing or the source does not compile; the message holds NVRTC's
        log and the source lines it points at.
    """
    nvrtc = _nvrtc()
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []),
                  "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}", "--std=c++17", "-default-device"]
        opts += [f"--include-path={d}" for d in include_dirs()]
        opts = [o.encode() for o in opts]
        err = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0]
        if int(err) != 0:
            log = _log(nvrtc, prog)
            raise CodegenError(
                f"NVRTC could not compile the generated CUDA C for {arch}:\n{log}\n"
                f"offending lines:\n{_offending_lines(log, source, name)}"
            )
        size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        cubin = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        size = _check(nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
        ptx = b" " * size
        _check(nvrtc.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return cubin, ptx.rstrip(b"\0").decode()
