"""Which CPU features this machine has, as the operating system reports them (no LLVM).

A library built for CPU features this machine lacks loads fine and stops the process
with an illegal instruction at its first call; a model runtime compares the features a
library was built with (``Target.features``, LLVM's names, recorded when it is exported)
against the flags Linux lists in ``/proc/cpuinfo`` and refuses it first.

Only the features in the tables below are compared: the vector and arithmetic
extensions code generation uses, under the name ``/proc/cpuinfo`` gives each. Other
features (``cx16``, ``xsave``, ...) are not, nor anything where the operating system
lists no flags: there nothing is reported missing.
"""

from __future__ import annotations

import functools
import platform

#: LLVM's x86 feature names -> the ``flags`` entry of ``/proc/cpuinfo``.
_X86_FLAGS = {
    "sse3": "pni",
    "ssse3": "ssse3",
    "sse4.1": "sse4_1",
    "sse4.2": "sse4_2",
    "sse4a": "sse4a",
    "popcnt": "popcnt",
    "avx": "avx",
    "avx2": "avx2",
    "fma": "fma",
    "f16c": "f16c",
    "bmi": "bmi1",
    "bmi2": "bmi2",
    "lzcnt": "abm",
    "movbe": "movbe",
    "aes": "aes",
    "pclmul": "pclmulqdq",
    "vaes": "vaes",
    "vpclmulqdq": "vpclmulqdq",
    "gfni": "gfni",
    "sha": "sha_ni",
    "avxvnni": "avx_vnni",
    "avx512f": "avx512f",
    "avx512cd": "avx512cd",
    "avx512bw": "avx512bw",
    "avx512dq": "avx512dq",
    "avx512vl": "avx512vl",
    "avx512ifma": "avx512ifma",
    "avx512vbmi": "avx512vbmi",
    "avx512vbmi2": "avx512_vbmi2",
    "avx512vnni": "avx512_vnni",
    "avx512bitalg": "avx512_bitalg",
    "avx512vpopcntdq": "avx512_vpopcntdq",
    "avx512bf16": "avx512_bf16",
    "avx512fp16": "avx512_fp16",
    "amx-tile": "amx_tile",
    "amx-int8": "amx_int8",
    "amx-bf16": "amx_bf16",
}

#: LLVM's AArch64 feature names -> the ``Features`` entry of ``/proc/cpuinfo``.
_AARCH64_FLAGS = {
    "neon": "asimd",
    "fullfp16": "asimdhp",
    "dotprod": "asimddp",
    "i8mm": "i8mm",
    "bf16": "bf16",
    "sve": "sve",
    "sve2": "sve2",
    "aes": "aes",
    "sha2": "sha2",
    "crc": "crc32",
    "lse": "atomics",
}

_FLAG_TABLES = {"x86_64": _X86_FLAGS, "amd64": _X86_FLAGS, "aarch64": _AARCH64_FLAGS,
                "arm64": _AARCH64_FLAGS}


def _parse_cpuinfo(text: str) -> frozenset:
    """The flags of the first processor in ``text`` (``/proc/cpuinfo``'s ``flags`` line
    on x86, ``Features`` on AArch64)."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


@functools.cache
def cpu_flags() -> frozenset:
    """This machine's CPU flags as ``/proc/cpuinfo`` lists them; empty where there is no
    such file (not Linux)."""
    try:
        with open("/proc/cpuinfo") as fh:
            return _parse_cpuinfo(fh.read())
    except OSError:
        return frozenset()


def missing_cpu_features(features, machine: str | None = None,
                         flags: frozenset | None = None) -> tuple:
    """The features of ``features`` (LLVM's names, e.g. ``"avx512f"``) that this CPU lacks.

    Parameters
    ----------
    features : iterable of str
        What the code was built with (``Target.features``).
    machine : str, optional
        The CPU architecture (default: ``platform.machine()``), which picks the table of
        flag names.
    flags : frozenset of str, optional
        The CPU's flags (default: :func:`cpu_flags`).

    Returns
    -------
    tuple of str
        The missing features, in the order given; () where the flags are unknown.
    """
    table = _FLAG_TABLES.get(machine or platform.machine(), {})
    flags = cpu_flags() if flags is None else flags
    if not flags:
        return ()
    return tuple(f for f in features if f in table and table[f] not in flags)
