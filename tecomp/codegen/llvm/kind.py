"""The "llvm" target kind: CPUs, code generated through LLVM.

A target string ``llvm -mcpu=NAME -mattr=+f1,-f2 -mtriple=TRIPLE -num-cores=N`` names a
CPU: without ``-mtriple`` this machine's architecture, without ``-mcpu`` its CPU (or
"generic" for another architecture), without ``-mattr`` that CPU's features. What LLVM
knows about this machine comes from ``host``. The kind registers itself
(``tecomp.target.register_target_kind``) when this package is imported.
"""

from __future__ import annotations

from dataclasses import fields

from ...errors import TargetError
from ...ir.transform.legalize import legalize_cpu_loops
from ...target import CPUCaps, TargetKind, host_num_cores, positive_int_option
from . import cpu_family, host

# Features that change the code LLVM generates for the loops tecomp emits; the canonical
# key keeps only these so that, e.g., +sha or +rdrnd never split tuning records.
_X86_VECTOR_FEATURES = (
    "sse4.2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512dq",
    "avx512vl",
    "avx512vnni",
    "avx512bf16",
    "avx512fp16",
    "avxvnni",
    "amx-tile",
)
# The extensions of rv64gc, the baseline riscv64 Linux distributions build for.
_RISCV_LINUX_BASE = ("m", "a", "f", "d", "c")

_RISCV_VECTOR_FEATURES = ("v", "zfh", "zfhmin", "zvfh", "zvfhmin")
_ARM_VECTOR_FEATURES = ("neon", "fp-armv8", "fullfp16", "dotprod", "i8mm", "bf16", "sve", "sve2")

# x86 CPU models by widest vector register, for targets given by -mcpu without -mattr.
_X86_512 = (
    "skylake-avx512",
    "cascadelake",
    "cooperlake",
    "cannonlake",
    "icelake-client",
    "icelake-server",
    "tigerlake",
    "sapphirerapids",
    "emeraldrapids",
    "graniterapids",
    "graniterapids-d",
    "diamondrapids",
    "rocketlake",
    "znver4",
    "znver5",
    "x86-64-v4",
    "knl",
    "knm",
)
_X86_256 = (
    "haswell",
    "broadwell",
    "skylake",
    "alderlake",
    "raptorlake",
    "meteorlake",
    "arrowlake",
    "lunarlake",
    "gracemont",
    "znver1",
    "znver2",
    "znver3",
    "x86-64-v3",
    "bdver4",
    "sandybridge",
    "ivybridge",
    "btver2",
)


def parse_llvm(t, opts):
    text = t._text
    t.mtriple = opts.get("mtriple", host.host_triple())
    if t.mtriple.count("-") < 1 or not t.mtriple.split("-")[0]:
        raise TargetError(
            f"-mtriple={t.mtriple!r} in target {text!r} is not a target triple; "
            "expected e.g. x86_64-linux-gnu or aarch64-linux-gnu"
        )
    t.target_arch = _arch_of(t.mtriple)
    same_arch = t.target_arch == _arch_of(host.host_triple())
    mattr = ()
    if "mattr" in opts:
        items = [a.strip() for a in opts["mattr"].split(",") if a.strip()]
        for a in items:
            if a[0] not in "+-" or len(a) < 2:
                raise TargetError(
                    f"-mattr entry {a!r} in target {text!r} must start with + or - "
                    "(e.g. -mattr=+avx2,+fma)"
                )
        mattr = tuple(items)
    if "mcpu" in opts:
        t.mcpu = opts["mcpu"]
    elif same_arch:
        t.mcpu = host.host_cpu()
    else:
        t.mcpu = "generic"
    # Plain "llvm" (or -mcpu naming the host CPU) means all the host's features.
    if same_arch and "mattr" not in opts and t.mcpu == host.host_cpu():
        mattr = host.host_features()
    if t.target_arch == "aarch64" and not any(a.lstrip("+-") == "neon" for a in mattr):
        mattr = mattr + ("+neon",)
    if t.target_arch == "riscv64" and not same_arch:
        # Linux on riscv64 is rv64gc: without these LLVM would call libgcc for
        # multiplication and atomics, and pass floats to libm in integer registers.
        named = {a.lstrip("+-") for a in mattr}
        mattr = mattr + tuple(f"+{e}" for e in _RISCV_LINUX_BASE if e not in named)
    t.mattr = mattr
    unknown = host.unknown_to_llvm(t.mtriple, t.mcpu, ",".join(mattr))
    if unknown:
        raise TargetError(
            f"target {text!r}: LLVM does not know {unknown} for {t.target_arch}; "
            "use a CPU name that clang's -mcpu accepts (e.g. skylake-avx512, znver4, "
            "cortex-a72) and features such as +avx2"
        )
    if "num-cores" in opts:
        num_cores = positive_int_option(opts, "num-cores", text)
    else:
        num_cores = host_num_cores() if same_arch else 1
    if t.target_arch in ("x86_64", "i386", "i686"):
        t.keys = ("cpu", "x86_64" if t.target_arch == "x86_64" else "x86")
    elif t.target_arch in ("aarch64", "arm", "armv7"):
        t.keys = ("cpu", "arm")
    else:
        t.keys = ("cpu", t.target_arch)
    width = _vector_width(t)
    t.missing_host_features = _missing_on_host(t, width) if same_arch else ()
    t.is_host = same_arch and not t.missing_host_features
    t.caps = CPUCaps(
        vector_width_bits=width,
        num_vector_registers=_vector_registers(t, width),
        num_cores=num_cores,
        **_memory_and_fma(t, same_arch),
    )

def _memory_and_fma(t, same_arch: bool) -> dict:
    """Cache sizes and FMA chains of the target's CPU: the caches read from this machine
    when the target is its own CPU, else the CPU family's (:mod:`.cpu_family`); what
    neither knows keeps CPUCaps's defaults."""
    family = cpu_family.family_of(t.mcpu)
    found = dict(family._asdict()) if family else {}
    if same_arch and t.mcpu == host.host_cpu():
        l1d, l2 = cpu_family.host_cache_sizes()
        found.update({k: v for k, v in (("l1d_bytes", l1d), ("l2_bytes", l2)) if v})
    return found

def _enabled(t, feature: str) -> bool:
    state = False
    for a in t.mattr:
        if a[1:] == feature:
            state = a[0] == "+"
    return state

def _vector_width(t) -> int:
    if t.target_arch == "aarch64":
        return 128  # NEON; SVE lengths are not assumed
    if t.target_arch == "riscv64":
        # The V extension guarantees VLEN >= 128 (Zvl128b); without it, no vectors.
        return 128 if _enabled(t, "v") else 64
    if t.target_arch in ("x86_64", "i386", "i686"):
        if _enabled(t, "avx512f"):
            return 512
        if t.mcpu in _X86_512 and not any(a == "-avx512f" for a in t.mattr):
            return 512
        if _enabled(t, "avx") or _enabled(t, "avx2") or t.mcpu in _X86_256:
            return 256
        return 128
    return 128

def _missing_on_host(t, width: int) -> tuple:
    """The features code for this target may use that this machine's CPU lacks: the
    features the target enables, and AVX-512 where its CPU name implies 512-bit
    vectors. Code built for them would stop on an illegal instruction here, so such a
    target does not run on the host (empty when LLVM cannot tell the host's features)."""
    have = {a[1:] for a in host.host_features()}
    if not have:
        return ()
    missing = [f for f in t.features if f not in have]
    if width == 512 and "avx512f" not in have and "avx512f" not in missing:
        missing.append("avx512f")
    return tuple(missing)

def _vector_registers(t, width: int) -> int:
    if t.target_arch in ("aarch64", "riscv64"):
        return 32  # v0-v31
    if t.target_arch == "x86_64":
        return 32 if width == 512 else 16  # zmm0-31 with AVX-512, else xmm/ymm0-15
    if t.target_arch in ("i386", "i686"):
        return 8
    return 16


def canonical_key(t) -> str:
    """Triple (normalised to arch), CPU model, and the vector-relevant features that are
    enabled."""
    relevant = {"arm": _ARM_VECTOR_FEATURES, "riscv64": _RISCV_VECTOR_FEATURES}.get(
        t.keys[1], _X86_VECTOR_FEATURES)
    feats = sorted(f for f in relevant if _enabled(t, f))
    key = f"llvm -arch={t.target_arch} -mcpu={t.mcpu}"
    if feats:
        key += " -mattr=" + ",".join("+" + f for f in feats)
    return key


def features(t) -> tuple:
    return tuple(sorted({a[1:] for a in t.mattr if _enabled(t, a[1:])}))


def portable(t) -> str:
    """Triple, CPU, every feature and the core count spelled out: plain ``llvm`` on
    another machine would mean that machine's CPU."""
    parts = ["llvm", f"-mtriple={t.mtriple}", f"-mcpu={t.mcpu}"]
    if t.mattr:
        parts.append("-mattr=" + ",".join(t.mattr))
    parts.append(f"-num-cores={t.num_cores}")
    return " ".join(parts)


def _arch_of(triple: str) -> str:
    arch = triple.split("-", 1)[0]
    return {"arm64": "aarch64", "amd64": "x86_64"}.get(arch, arch)


def local_targets() -> tuple:
    """This machine's CPU, with all its features."""
    return ("llvm",)


LLVM = TargetKind(
    name="llvm",
    options=("mcpu", "mattr", "mtriple", "num-cores"),
    parse=parse_llvm,
    canonical_key=canonical_key,
    attributes=("mcpu", "mattr", *(f.name for f in fields(CPUCaps))),
    features=features,
    legalize=legalize_cpu_loops,
    run_time_checks=True,
    portable=portable,
    local_targets=local_targets,
)
