"""Helpers to run a schedule on numpy arrays and compare with a numpy reference.

``compile_schedule`` builds for a target with ``tecomp.build`` when the code generator
is available and otherwise runs the loop IR lowered for that target through the
interpreter (``tecomp.ir.interpreter``), so the same tests check lowering before codegen
exists and the whole pipeline after. A cuda target is always built (its kernels compile
with NVRTC) and runs on the GPU, or simulated on the CPU where there is none.
``TECOMP_TEST_BACKEND=llvm|interp`` forces one backend for CPU targets.

End-to-end tests take the target from the ``target`` fixture (tests/conftest.py), whose
parameters are ``TEST_TARGETS``; one that cannot run on this machine is skipped with the
reason ``target_unavailable`` gives.
"""

from __future__ import annotations

import functools
import os
import warnings

import ml_dtypes
import numpy as np
import pytest

import tecomp
from tecomp import te
from tecomp.runtime import QemuRunner, RunnerError

BACKENDS = ("llvm", "interp")

#: The targets end-to-end tests run on: this machine, and AArch64 and RISC-V 64 with the
#: vector extension under qemu-user (``tecomp.runtime.QemuRunner``) where it is installed.
TEST_TARGETS = ("llvm", "llvm -mtriple=aarch64-linux-gnu",
                "llvm -mtriple=riscv64-linux-gnu -mattr=+v")


def target_id(target: str) -> str:
    """A short test id for a target string: ``llvm``, ``aarch64``, ``riscv64+v``."""
    t = tecomp.Target(target)
    if t.is_host:
        return "llvm"
    return t.target_arch + ("+v" if "+v" in t.mattr else "")


@functools.cache
def _llvm_status() -> tuple[bool, str]:
    """Whether ``tecomp.build`` exists and compiles and runs a trivial kernel correctly."""
    try:
        build = tecomp.build
    except (ImportError, AttributeError) as err:
        return False, f"tecomp.build is not importable ({err})"
    try:
        a = te.placeholder((5,), name="a")
        b = te.compute((5,), lambda i: a[i] + 1.0, name="b")
        mod = build(te.create_schedule(b.op), [a, b], target="llvm")
        x = np.arange(5, dtype="float32")
        y = np.zeros(5, "float32")
        mod(x, y)
        if not np.array_equal(y, x + 1):
            return False, f"tecomp.build gave {y} for {x} + 1"
    except Exception as err:  # noqa: BLE001 - any failure means the backend is unusable
        return False, f"tecomp.build fails on a trivial kernel: {type(err).__name__}: {err}"
    return True, ""


def llvm_available() -> bool:
    return _llvm_status()[0]


def llvm_status_message() -> str:
    return _llvm_status()[1]


@functools.cache
def gpu_available() -> bool:
    """Whether a CUDA GPU and its driver are usable in this process."""
    from tecomp.runtime.cuda_driver import device_arch

    return device_arch() is not None


def target_unavailable(target: str) -> str | None:
    """Why modules built for ``target`` cannot run on this machine, or None if they can:
    here, under qemu-user, or for a cuda target on the GPU where there is one and simulated
    on the CPU otherwise (``CUDAModule.simulate``) — either way its kernels must compile,
    so a cuda target is unavailable only without NVRTC."""
    t = tecomp.Target(target)
    if t.is_host:
        return None
    if t.kind == "cuda":
        from tecomp.codegen.cuda import nvrtc_available

        reason = nvrtc_available()
        return None if reason is None else f"NVRTC is not usable here ({reason})"
    reason = QemuRunner.missing(t.target_arch)
    return f"target {target!r} cannot run here: {reason}" if reason else None


@functools.cache
def qemu_runner(arch: str) -> QemuRunner:
    """One runner per architecture for the whole test session."""
    return QemuRunner(arch)


#: Failures of the emulation toolchain itself (not of tecomp's code), by a piece of the
#: error they give: a test that hits one is an expected failure naming the cause.
#: Debian 12 ships both; newer versions of either fix them and the tests then pass.
KNOWN_TOOLCHAIN_FAILURES = {
    "undefined symbol: __truncsfhf2": "riscv64 libgcc before GCC 13 has no float16 "
    "conversion routines (__truncsfhf2/__extendhfsf2) for code without Zfh",
    "undefined symbol: __extendhfsf2": "riscv64 libgcc before GCC 13 has no float16 "
    "conversion routines (__truncsfhf2/__extendhfsf2) for code without Zfh",
    "decode_save_opc: Assertion": "qemu-riscv64 before 8.0 aborts translating the RVV "
    "float-to-integer conversion vfcvt.rtz (QEMU issue 1441)",
}


class _RemoteCall:
    """Calls a module through a runner, turning a known toolchain failure into an
    expected failure that names it."""

    def __init__(self, module):
        self.module = module

    def __call__(self, *arrays):
        try:
            self.module(*arrays)
        except RunnerError as err:
            for marker, cause in KNOWN_TOOLCHAIN_FAILURES.items():
                if marker in str(err):
                    pytest.xfail(cause)
            raise


def default_backend() -> str:
    forced = os.environ.get("TECOMP_TEST_BACKEND")
    if forced:
        if forced not in BACKENDS:
            raise ValueError(f"TECOMP_TEST_BACKEND={forced!r} must be one of {BACKENDS}")
        return forced
    if llvm_available():
        return "llvm"
    warnings.warn(f"running tests through the loop-IR interpreter: {llvm_status_message()}",
                  stacklevel=2)
    return "interp"


def callable_module(mod):
    """``mod``, a CPU module, as a callable on numpy arrays: itself for this machine, run
    under qemu-user for another architecture."""
    if mod.target.is_host:
        return mod
    return _RemoteCall(qemu_runner(mod.target.target_arch).load_module(mod))


def compile_schedule(s, args, target: str = "llvm", backend: str | None = None,
                     name: str = "default_function"):
    """A callable ``f(*arrays)`` running schedule ``s`` with parameters ``args``, built for
    ``target`` (``backend`` "llvm") or lowered for it and interpreted ("interp")."""
    if tecomp.Target(target).kind == "cuda":
        mod = tecomp.build(s, args, target=target, name=name)
        return mod if gpu_available() else mod.simulate
    backend = backend or default_backend()
    if backend == "llvm":
        return callable_module(tecomp.build(s, args, target=target, name=name))
    from tecomp.ir.interpreter import run

    func = tecomp.lower(s, args, name=name, target=target)

    def call(*arrays):
        run(func, *arrays)

    call.func = func
    return call


def _sentinel_like(ref: np.ndarray) -> np.ndarray:
    """An output buffer prefilled with a value no kernel produces, so that elements the
    kernel forgets to write show up as mismatches."""
    ref = np.asarray(ref)
    if ref.dtype.kind == "f" or ref.dtype == ml_dtypes.bfloat16:
        return np.full(ref.shape, np.nan, ref.dtype)
    if ref.dtype.kind == "b":
        return np.array(~ref)
    info = np.iinfo(ref.dtype)
    return np.full(ref.shape, info.min + 3, ref.dtype)


def assert_close(actual, expected, rtol=1e-5, atol=1e-6, what="output"):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    if expected.dtype.kind in "iub":
        np.testing.assert_array_equal(actual, expected, err_msg=what)
    else:
        np.testing.assert_allclose(
            actual.astype("float64"), expected.astype("float64"), rtol=rtol, atol=atol,
            err_msg=what,
        )


def check_schedule(s, args, inputs, expected, rtol=1e-5, atol=1e-6, backend=None,
                   target="llvm"):
    """Run ``s`` with ``args`` = inputs followed by outputs, built for ``target``, and
    compare with numpy.

    ``inputs`` are arrays for the first ``len(inputs)`` args; ``expected`` the reference
    values of the remaining args (their shapes and dtypes size the output buffers, which
    also binds symbolic sizes). Returns the computed outputs.
    """
    f = compile_schedule(s, args, target, backend)
    return run_and_check(f, args, inputs, expected, rtol, atol)


def run_and_check(f, args, inputs, expected, rtol=1e-5, atol=1e-6):
    """Call a compiled schedule ``f`` (see ``compile_schedule``) and compare with numpy.

    Lets one build be checked at several values of its symbolic sizes."""
    # (ascontiguousarray would make a 0-d array, such as a zero point, 1-d)
    inputs = [np.asarray(x) if np.ndim(x) == 0 else np.ascontiguousarray(x) for x in inputs]
    expected = [np.asarray(e) for e in expected]
    assert len(inputs) + len(expected) == len(args), "one array per argument"
    outs = [_sentinel_like(e) for e in expected]
    f(*inputs, *outs)
    for t, o, e in zip(args[len(inputs):], outs, expected):
        assert_close(o, e, rtol, atol, what=f"tensor {t.name}")
    return outs


def conv2d_reference(data, kernel, stride, pad, depthwise=False):
    """NCHW convolution (or depthwise, channel multiplier K / C) in float32 with square
    stride and padding: the reference of the cuda convolution templates."""
    N, C, H, W = data.shape
    K, _, R, S = kernel.shape
    padded = np.pad(data, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    OH = (H + 2 * pad - R) // stride + 1
    OW = (W + 2 * pad - S) // stride + 1
    out = np.zeros((N, K, OH, OW), "float32")
    for r in range(R):
        for c in range(S):
            win = padded[:, :, r:r + stride * OH:stride, c:c + stride * OW:stride]
            if depthwise:
                out += win[:, np.arange(K) // (K // C)] * kernel[None, :, 0, r, c, None, None]
            else:
                out += np.einsum("nchw,kc->nkhw", win, kernel[:, :, r, c])
    return out


def rand(rng, shape, dtype="float32", lo=-1.0, hi=1.0):
    """Random test data: uniform floats in [lo, hi), or small integers for int dtypes."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.uniform(lo, hi, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100) + 1, size=shape).astype(dtype)


