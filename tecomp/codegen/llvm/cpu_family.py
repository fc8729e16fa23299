"""What a CPU's caches and multiply-add units are, for the tile sizes of untuned builds.

A target of this machine's own CPU reads its cache sizes from the machine
(:func:`host_cache_sizes`: Linux's ``/sys/devices/system/cpu/cpu0/cache``, else
``os.sysconf``); a target of another CPU (``-mcpu=NAME``, a cross triple) takes them from
:data:`CPU_FAMILIES`, a small table of the families tecomp is used on, keyed by LLVM's
CPU name. A name the table lacks gets the defaults of :class:`tecomp.target.CPUCaps`
(32 KiB L1d, 512 KiB L2, 8 chains: Zen 3, Skylake client, Neoverse N1), which is also
what ``-mcpu=generic`` means.

``fma_chains`` is the FMA latency in cycles times the vector FMAs a core issues per cycle
(the vendors' optimisation manuals, Agner Fog's instruction tables): the independent
accumulators a register tile needs so that no multiply-add waits for the one before it.
LLVM knows no such number of a CPU, and the machine does not report it, so the host's
comes from the table as well.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import NamedTuple

_KIB = 1 << 10
_MIB = 1 << 20


class CPUFamily(NamedTuple):
    """One core's level-1 data and level-2 caches (bytes) and its ``fma_chains``."""

    l1d_bytes: int
    l2_bytes: int
    fma_chains: int


#: LLVM CPU name -> caches and FMA chains of one core.
CPU_FAMILIES: dict[str, CPUFamily] = {
    # Intel: FMA latency 5 on Haswell/Broadwell, 4 from Skylake on; two FMA ports.
    **dict.fromkeys(("haswell", "broadwell"), CPUFamily(32 * _KIB, 256 * _KIB, 10)),
    "skylake": CPUFamily(32 * _KIB, 256 * _KIB, 8),
    **dict.fromkeys(("skylake-avx512", "cascadelake", "cooperlake"),
                    CPUFamily(32 * _KIB, 1 * _MIB, 8)),
    **dict.fromkeys(("icelake-client", "tigerlake", "rocketlake"),
                    CPUFamily(48 * _KIB, 512 * _KIB, 8)),
    "icelake-server": CPUFamily(48 * _KIB, 1280 * _KIB, 8),
    **dict.fromkeys(("alderlake", "raptorlake", "meteorlake"),
                    CPUFamily(48 * _KIB, 1280 * _KIB, 8)),
    **dict.fromkeys(("sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d"),
                    CPUFamily(48 * _KIB, 2 * _MIB, 8)),
    # AMD: FMA latency 5 on Zen 1/2, 4 from Zen 3 on; two FMA pipes.
    **dict.fromkeys(("znver1", "znver2"), CPUFamily(32 * _KIB, 512 * _KIB, 10)),
    "znver3": CPUFamily(32 * _KIB, 512 * _KIB, 8),
    "znver4": CPUFamily(32 * _KIB, 1 * _MIB, 8),
    "znver5": CPUFamily(48 * _KIB, 1 * _MIB, 8),
    # Arm: FMLA latency 7 on two pipes (Cortex-A72), 4 on two (A76, N1) or four (V1, V2).
    "cortex-a72": CPUFamily(32 * _KIB, 512 * _KIB, 14),
    **dict.fromkeys(("cortex-a76", "neoverse-n1"), CPUFamily(64 * _KIB, 512 * _KIB, 8)),
    "neoverse-n2": CPUFamily(64 * _KIB, 1 * _MIB, 8),
    **dict.fromkeys(("neoverse-v1", "neoverse-v2"), CPUFamily(64 * _KIB, 1 * _MIB, 16)),
    **dict.fromkeys(("apple-m1", "apple-m2"), CPUFamily(128 * _KIB, 4 * _MIB, 16)),
}


def family_of(mcpu: str) -> CPUFamily | None:
    """The table's entry for LLVM CPU name ``mcpu``, None for a name it lacks."""
    return CPU_FAMILIES.get(mcpu)


def _parse_size(text: str) -> int | None:
    """``"32K"``, ``"1024K"``, ``"2M"`` or a byte count as bytes; None when unreadable."""
    text = text.strip().upper()
    scale = {"K": _KIB, "M": _MIB, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if scale != 1 else text
    return int(digits) * scale if digits.isdigit() and int(digits) > 0 else None


def _sysfs_caches(root: Path) -> dict:
    """Sizes of cpu0's level-1 data (``1``) and level-2 (``2``) caches under ``root``."""
    sizes = {}
    for index in sorted(root.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _parse_size((index / "size").read_text())
        except OSError:
            continue
        if size and (level, kind) in (("1", "Data"), ("2", "Unified")):
            sizes[int(level)] = size
    return sizes


def _sysconf_caches() -> dict:
    sizes = {}
    for level, name in ((1, "SC_LEVEL1_DCACHE_SIZE"), (2, "SC_LEVEL2_CACHE_SIZE")):
        try:
            value = os.sysconf(name)
        except (ValueError, OSError):  # a name this libc does not define
            continue
        if value > 0:
            sizes[level] = value
    return sizes


@functools.cache
def host_cache_sizes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> tuple:
    """This machine's ``(l1d_bytes, l2_bytes)``, either None where neither sysfs nor
    ``os.sysconf`` tells it."""
    sizes = _sysfs_caches(Path(root)) or _sysconf_caches()
    return sizes.get(1), sizes.get(2)
