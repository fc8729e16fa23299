"""``tecomp doctor``: what this installation and this machine can do.

Every probe is defensive: a missing or broken optional component is reported as such,
never raised, so the report is useful exactly when something is wrong.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import platform
import sys

from . import __version__
from .codegen.llvm import thread_pool
from .codegen.llvm.bfloat import bf16_feature, has_bf16
from .codegen.llvm.build import TUNE_CPU
from .codegen.llvm.int8_dot import product_instructions
from .runtime import threads, toolchain
from .target import Target


def _version(module: str) -> str:
    try:
        from importlib import metadata

        return metadata.version(module)
    except Exception:  # noqa: BLE001 - any failure means "not installed" for the report
        pass
    try:
        mod = __import__(module)
        return getattr(mod, "__version__", "installed (version unknown)")
    except Exception:  # noqa: BLE001
        return "not installed"


def _llvm_line() -> str:
    try:
        import llvmlite
        import llvmlite.binding as llvm

        v = ".".join(map(str, llvm.llvm_version_info))
        return f"{llvmlite.__version__} (LLVM {v})"
    except Exception as err:  # noqa: BLE001
        return f"not usable ({type(err).__name__}: {err})"


def _cpu_lines() -> list:
    try:
        t = Target("llvm")
        interesting = ("sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw",
                       "avx512vl", "avx512vnni", "avx512bf16", "avx512fp16", "amx-tile",
                       "neon", "sve")
        feats = [f for f in interesting if f in t.features]
        return [
            f"host cpu        : {t.mcpu} ({t.mtriple})",
            f"vector features : {', '.join(feats) or 'none detected'}",
            f"vector width    : {t.vector_width_bits} bits",
            f"cores           : {t.num_cores} usable (os.cpu_count()={os.cpu_count()})",
            f"target key      : {t.canonical_key()}",
            "scheduled as    : " + (
                f"{TUNE_CPU[t.mcpu]} (LLVM's {t.mcpu} model spills register tiles)"
                if t.mcpu in TUNE_CPU else f"{t.mcpu} (its own model)"),
            f"int8 products   : {product_instructions(t)}",
            "bf16 precision  : " + (
                f"yes ({'bfdot' if bf16_feature(t) == 'bf16' else 'vdpbf16ps'})"
                if has_bf16(t) else f"no (needs {bf16_feature(t)})"),
        ]
    except Exception as err:  # noqa: BLE001
        return [f"host cpu        : unknown ({type(err).__name__}: {err})"]


def host_cpu_line() -> str:
    """The report's host cpu line alone (benchmarks print it beside their ratios)."""
    return _cpu_lines()[0]


def _thread_lines() -> list:
    try:
        count, source = threads.thread_count_source()
        return [f"threads         : {count} ({source})",
                f"idle threads    : spin {thread_pool.SPIN_ROUNDS} rounds, then sleep "
                f"(tecomp's thread pool)"]
    except Exception as err:  # noqa: BLE001 - a bad TECOMP_NUM_THREADS is reported here
        return [f"threads         : unknown ({type(err).__name__}: {err})"]


#: Architectures whose cross toolchain the report looks for.
CROSS_ARCHS = ("aarch64", "riscv64")


def _cross_lines() -> list:
    """For each cross architecture: the linker export_library uses and whether its
    modules can run here under qemu-user (what to install when not)."""
    lines = []
    for arch in CROSS_ARCHS:
        if arch == toolchain.host_arch():
            continue
        try:
            cc = toolchain.c_compiler(arch)
            emu = toolchain.emulator(arch)
            root = toolchain.sysroot(arch)
            missing = [what for what, have in (("cross compiler", cc), ("qemu-user", emu),
                                               ("sysroot", root)) if not have]
            link = cc or "NOT FOUND (export writes an object file)"
            lines.append(f"{arch + ' link':<16}: {link}")
            lines.append(
                f"{arch + ' run':<16}: "
                + (f"{emu} -L {root}" if not missing else
                   f"no ({', '.join(missing)} missing: {toolchain.install_hint(arch)})")
            )
        except Exception as err:  # noqa: BLE001
            lines.append(f"{arch:<16}: unknown ({type(err).__name__}: {err})")
    return lines


def _try_cdll(names) -> str | None:
    for n in names:
        try:
            ctypes.CDLL(n)
            return n
        except OSError:
            continue
    return None


def _nvrtc() -> str:
    # The nvidia-cuda-nvrtc wheel puts libnvrtc under site-packages/nvidia/cuda_nvrtc/lib.
    cands = []
    try:
        import nvidia.cuda_nvrtc as pkg  # type: ignore

        for base in list(getattr(pkg, "__path__", [])):
            cands += sorted(glob.glob(os.path.join(base, "lib", "libnvrtc.so*")))
    except Exception:  # noqa: BLE001
        pass
    found = ctypes.util.find_library("nvrtc")
    if found:
        cands.append(found)
    cands += ["libnvrtc.so", "libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc.so.11.2"]
    lib = _try_cdll(cands)
    if lib is None:
        return "not found"
    try:
        h = ctypes.CDLL(lib)
        major, minor = ctypes.c_int(), ctypes.c_int()
        if h.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0:
            return f"{lib} (NVRTC {major.value}.{minor.value})"
    except Exception:  # noqa: BLE001
        pass
    return lib


def _cuda_headers() -> str:
    """Where NVRTC finds cuda_fp16.h (kernels on float16 include it)."""
    from .codegen.cuda.nvrtc import include_dirs

    dirs = include_dirs()
    return dirs[0] if dirs else ('not found: float16 kernels will not compile '
                                 '(pip install "tecomp[cuda]", or set CUDA_HOME)')


def _cuda_driver_and_gpus() -> tuple:
    lib = _try_cdll(["libcuda.so.1", "libcuda.so"])
    if lib is None:
        return "not found", "none (no CUDA driver)"
    try:
        h = ctypes.CDLL(lib)
        if h.cuInit(0) != 0:
            return lib, "none usable (cuInit failed)"
        ver = ctypes.c_int()
        h.cuDriverGetVersion(ctypes.byref(ver))
        count = ctypes.c_int()
        if h.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return f"{lib} (CUDA {ver.value // 1000}.{ver.value % 1000 // 10})", "unknown"
        names = []
        for i in range(count.value):
            dev = ctypes.c_int()
            h.cuDeviceGet(ctypes.byref(dev), i)
            buf = ctypes.create_string_buffer(256)
            h.cuDeviceGetName(buf, 256, dev)
            cc_major, cc_minor = ctypes.c_int(), ctypes.c_int()
            h.cuDeviceGetAttribute(ctypes.byref(cc_major), 75, dev)  # COMPUTE_CAPABILITY_MAJOR
            h.cuDeviceGetAttribute(ctypes.byref(cc_minor), 76, dev)  # COMPUTE_CAPABILITY_MINOR
            name = buf.value.decode(errors="replace")
            names.append(f"{name} (sm_{cc_major.value}{cc_minor.value})")
        driver = f"{lib} (CUDA {ver.value // 1000}.{ver.value % 1000 // 10})"
        return driver, ", ".join(names) if names else "none"
    except Exception as err:  # noqa: BLE001
        return lib, f"unknown ({type(err).__name__}: {err})"


def report() -> str:
    """A multi-line report of versions, host CPU capabilities, and optional components.

    Examples
    --------
    >>> print(tecomp.doctor.report())   # doctest: +SKIP
    """
    driver, gpus = _cuda_driver_and_gpus()
    lines = [
        f"tecomp          : {__version__}",
        f"python          : {sys.version.split()[0]} ({platform.platform()})",
        f"numpy           : {_version('numpy')}",
        f"llvmlite        : {_llvm_line()}",
        f"xgboost         : {_version('xgboost')}",
        f"onnx            : {_version('onnx')}",
        f"onnxruntime     : {_version('onnxruntime')}",
        *_cpu_lines(),
        *_thread_lines(),
        *_cross_lines(),
        f"NVRTC           : {_nvrtc()}",
        f"cuda-bindings   : {_version('cuda-bindings')}",
        f"CUDA headers    : {_cuda_headers()}",
        f"CUDA driver     : {driver}",
        f"GPUs            : {gpus}",
    ]
    return "\n".join(lines)


def main() -> int:
    print(report())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
