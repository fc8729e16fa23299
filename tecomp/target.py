"""Compilation targets: what machine the generated code is for.

A target string names a kind and options, as in TVM::

    "llvm"                                 the host CPU with all its features
    "llvm -mcpu=skylake-avx512"            an x86 CPU model (its features are implied)
    "llvm -mcpu=haswell -mattr=+avx2,+fma" a CPU model plus explicit features
    "llvm -mtriple=aarch64-linux-gnu"      a cross target (build and export only)
    "cuda" / "cuda -arch=sm_90"            NVIDIA GPUs (CUDA C compiled by NVRTC)

Every target parses on every machine; whether it can *run* here is ``Target.is_host``.
``Target.canonical_key()`` keeps only what changes the generated code, so tuning records
made for one target are found again for an equal target written differently.
"""

from __future__ import annotations

import os
import shlex
import threading
from dataclasses import dataclass, fields

from .errors import TargetError

KINDS = ("llvm", "cuda")

#: Options each kind accepts (without the leading dash).
_OPTIONS = {
    "llvm": ("mcpu", "mattr", "mtriple", "num-cores"),
    "cuda": ("arch", "max-threads-per-block", "max-shared-memory-per-block"),
}

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


def _llvm_host():
    # LLVM answers questions about CPUs; imported on first use so that importing this
    # module (or loading an exported library) never loads llvmlite.
    from .codegen.llvm import host

    return host


def host_num_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _positive_int(opts: dict, key: str, text: str, default: int | None = None) -> int | None:
    if key not in opts:
        return default
    try:
        value = int(opts[key])
    except ValueError:
        value = 0
    if value < 1:
        raise TargetError(f"-{key}={opts[key]!r} in target {text!r} must be a positive integer")
    return value


def _arch_of(triple: str) -> str:
    arch = triple.split("-", 1)[0]
    return {"arm64": "aarch64", "amd64": "x86_64"}.get(arch, arch)


@dataclass(frozen=True)
class CPUCaps:
    """What a CPU target offers generated code and the schedules written for it."""

    vector_width_bits: int  # widest native vector register (512 for AVX-512, 128 for NEON)
    num_vector_registers: int  # architectural vector registers (register blocking)
    num_cores: int  # threads a parallel loop uses


@dataclass(frozen=True)
class CUDACaps:
    """The per-block limits of a CUDA target, checked before a kernel is compiled."""

    max_threads_per_block: int
    max_shared_memory_per_block: int  # bytes
    warp_size: int


#: Attributes that only targets of one kind have, for the error on another kind.
_KIND_ATTRIBUTES = {
    "llvm": ("mcpu", "mattr", *(f.name for f in fields(CPUCaps))),
    "cuda": ("arch", *(f.name for f in fields(CUDACaps))),
}

_CAPS_FIELDS = frozenset(f.name for caps in (CPUCaps, CUDACaps) for f in fields(caps))

#: The architecture a "cuda" target without -arch generates code for (Hopper).
DEFAULT_CUDA_ARCH = "sm_90"


class Target:
    """A parsed target string.

    Parameters
    ----------
    target : str or Target
        ``"llvm"``, ``"llvm -mcpu=NAME -mattr=+f1,+f2 -mtriple=TRIPLE -num-cores=N"``,
        ``"cuda"`` or ``"cuda -arch=sm_XY"``.
    host : str or Target, optional
        For a device target (cuda): the CPU target its host code is for; "llvm" when not
        given. A CPU target is its own host and takes none.

    Attributes
    ----------
    kind : "llvm" or "cuda"
    keys : tuple of str, e.g. ("cpu", "x86_64") or ("cuda", "gpu")
    mtriple : str (the host's for llvm when not given; "nvptx64-nvidia-cuda" for cuda)
    is_host : bool, whether code for this target runs on this machine: the same
        architecture, and no feature its code may use that this CPU lacks
    missing_host_features : tuple of str (llvm only), the features that keep a target of
        this machine's architecture from running here (e.g. ("avx512f",) on an AVX2 CPU)
    caps : CPUCaps or CUDACaps, the target's capabilities; their fields read as
        attributes of the target too (``target.vector_width_bits``,
        ``target.max_threads_per_block``)
    host : Target or None, the CPU target of a device target's host code
    mcpu : str (llvm only; the host's CPU when not given)
    mattr : tuple of "+feature" / "-feature" strings (llvm only; the host's for "llvm")
    arch : str (cuda only, e.g. "sm_90"; DEFAULT_CUDA_ARCH when not given)

    Reading an attribute of another kind (``mcpu`` of a cuda target) is an
    AttributeError that says which kind has it.

    Raises
    ------
    TargetError
        When the string has an unknown kind or option or a malformed value, or a host is
        given that is not a CPU target; the message names the bad part and lists what is
        allowed.

    Examples
    --------
    >>> t = Target("llvm -mtriple=aarch64-linux-gnu")
    >>> t.vector_width_bits, t.is_host
    (128, False)
    >>> Target("cuda").canonical_key()
    'cuda -arch=sm_90'
    """

    def __init__(self, target: "str | Target" = "llvm", host: "str | Target | None" = None):
        if isinstance(target, Target):
            if host is None:
                host = target.host
            target = target._text
        if not isinstance(target, str):
            raise TargetError(
                f"a target must be a string such as 'llvm' or 'cuda', got {type(target).__name__}"
            )
        self._text = target.strip()
        try:
            parts = shlex.split(self._text)
        except ValueError as err:
            raise TargetError(f"cannot split target string {target!r}: {err}") from None
        if not parts:
            raise TargetError(f"empty target string; allowed kinds: {', '.join(KINDS)}")
        kind = parts[0]
        if kind not in KINDS:
            raise TargetError(
                f"unknown target kind {kind!r} in {target!r}; allowed kinds: {', '.join(KINDS)}"
            )
        self.kind = kind
        opts = {}
        for p in parts[1:]:
            if not p.startswith("-") or "=" not in p:
                raise TargetError(
                    f"malformed option {p!r} in target {target!r}; options look like "
                    f"-name=value, allowed for {kind}: {self._allowed()}"
                )
            key, value = p.lstrip("-").split("=", 1)
            if key not in _OPTIONS[kind]:
                raise TargetError(
                    f"unknown option -{key} for target kind {kind!r} in {target!r}; "
                    f"allowed: {self._allowed()}"
                )
            if not value:
                raise TargetError(f"option -{key} in target {target!r} has an empty value")
            if key in opts:
                raise TargetError(f"option -{key} is given twice in target {target!r}")
            opts[key] = value
        self._opts = opts
        if kind == "llvm":
            if host is not None:
                raise TargetError(
                    f"target {target!r} runs on the CPU itself and takes no host; host= is "
                    "for device targets such as 'cuda'"
                )
            self.host = None
            self._init_llvm(opts)
        else:
            self.host = self._device_host(host)
            self._init_cuda(opts)

    def _device_host(self, host) -> "Target":
        host = Target("llvm") if host is None else as_target(host)
        if host.kind != "llvm":
            raise TargetError(
                f"the host of target {self._text!r} must be a CPU target such as 'llvm', "
                f"got {host}"
            )
        return host

    @staticmethod
    def _fmt_allowed(kind):
        return ", ".join(f"-{o}=" for o in _OPTIONS[kind])

    def _allowed(self):
        return self._fmt_allowed(self.kind)

    def __getattr__(self, name):
        # Reached only for attributes the instance lacks: first the capability record's
        # fields, then a message for attributes of the other kind.
        caps = self.__dict__.get("caps")
        if caps is not None and name in _CAPS_FIELDS and hasattr(caps, name):
            return getattr(caps, name)
        kind = self.__dict__.get("kind")
        for other, names in _KIND_ATTRIBUTES.items():
            if name in names and kind is not None and other != kind:
                raise AttributeError(
                    f"{self!r} is of kind {kind!r}; {name!r} belongs to {other!r} targets "
                    "(see target.caps)"
                )
        raise AttributeError(f"'Target' object has no attribute {name!r}")

    # ---- llvm -------------------------------------------------------------------------

    def _init_llvm(self, opts):
        text = self._text
        host = _llvm_host()
        self.mtriple = opts.get("mtriple", host.host_triple())
        if self.mtriple.count("-") < 1 or not self.mtriple.split("-")[0]:
            raise TargetError(
                f"-mtriple={self.mtriple!r} in target {text!r} is not a target triple; "
                "expected e.g. x86_64-linux-gnu or aarch64-linux-gnu"
            )
        self.target_arch = _arch_of(self.mtriple)
        same_arch = self.target_arch == _arch_of(host.host_triple())
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
            self.mcpu = opts["mcpu"]
        elif same_arch:
            self.mcpu = host.host_cpu()
        else:
            self.mcpu = "generic"
        # Plain "llvm" (or -mcpu naming the host CPU) means all the host's features.
        if same_arch and "mattr" not in opts and self.mcpu == host.host_cpu():
            mattr = host.host_features()
        if self.target_arch == "aarch64" and not any(a.lstrip("+-") == "neon" for a in mattr):
            mattr = mattr + ("+neon",)
        if self.target_arch == "riscv64" and not same_arch:
            # Linux on riscv64 is rv64gc: without these LLVM would call libgcc for
            # multiplication and atomics, and pass floats to libm in integer registers.
            named = {a.lstrip("+-") for a in mattr}
            mattr = mattr + tuple(f"+{e}" for e in _RISCV_LINUX_BASE if e not in named)
        self.mattr = mattr
        unknown = host.unknown_to_llvm(self.mtriple, self.mcpu, ",".join(mattr))
        if unknown:
            raise TargetError(
                f"target {text!r}: LLVM does not know {unknown} for {self.target_arch}; "
                "use a CPU name that clang's -mcpu accepts (e.g. skylake-avx512, znver4, "
                "cortex-a72) and features such as +avx2"
            )
        if "num-cores" in opts:
            num_cores = _positive_int(opts, "num-cores", text)
        else:
            num_cores = host_num_cores() if same_arch else 1
        if self.target_arch in ("x86_64", "i386", "i686"):
            self.keys = ("cpu", "x86_64" if self.target_arch == "x86_64" else "x86")
        elif self.target_arch in ("aarch64", "arm", "armv7"):
            self.keys = ("cpu", "arm")
        else:
            self.keys = ("cpu", self.target_arch)
        width = self._llvm_vector_width()
        self.missing_host_features = self._missing_on_host(host, width) if same_arch else ()
        self.is_host = same_arch and not self.missing_host_features
        self.caps = CPUCaps(
            vector_width_bits=width,
            num_vector_registers=self._llvm_vector_registers(width),
            num_cores=num_cores,
        )

    def _enabled(self, feature: str) -> bool:
        state = False
        for a in self.mattr:
            if a[1:] == feature:
                state = a[0] == "+"
        return state

    def _llvm_vector_width(self) -> int:
        if self.target_arch == "aarch64":
            return 128  # NEON; SVE lengths are not assumed
        if self.target_arch == "riscv64":
            # The V extension guarantees VLEN >= 128 (Zvl128b); without it, no vectors.
            return 128 if self._enabled("v") else 64
        if self.target_arch in ("x86_64", "i386", "i686"):
            if self._enabled("avx512f"):
                return 512
            if self.mcpu in _X86_512 and not any(a == "-avx512f" for a in self.mattr):
                return 512
            if self._enabled("avx") or self._enabled("avx2") or self.mcpu in _X86_256:
                return 256
            return 128
        return 128

    def _missing_on_host(self, host, width: int) -> tuple:
        """The features code for this target may use that this machine's CPU lacks: the
        features the target enables, and AVX-512 where its CPU name implies 512-bit
        vectors. Code built for them would stop on an illegal instruction here, so such a
        target does not run on the host (empty when LLVM cannot tell the host's features)."""
        have = {a[1:] for a in host.host_features()}
        if not have:
            return ()
        missing = [f for f in self.features if f not in have]
        if width == 512 and "avx512f" not in have and "avx512f" not in missing:
            missing.append("avx512f")
        return tuple(missing)

    def _llvm_vector_registers(self, width: int) -> int:
        if self.target_arch in ("aarch64", "riscv64"):
            return 32  # v0-v31
        if self.target_arch == "x86_64":
            return 32 if width == 512 else 16  # zmm0-31 with AVX-512, else xmm/ymm0-15
        if self.target_arch in ("i386", "i686"):
            return 8
        return 16

    # ---- cuda -------------------------------------------------------------------------

    def _init_cuda(self, opts):
        text = self._text
        arch = opts.get("arch", DEFAULT_CUDA_ARCH)
        digits = arch[3:] if arch.startswith("sm_") else ""
        if not digits[:-1].isdigit() or not (digits.isdigit() or digits[-1] in "af"):
            raise TargetError(
                f"-arch={arch!r} in target {text!r} is not a CUDA architecture; "
                "expected sm_XY such as sm_80 or sm_90"
            )
        self.arch = arch
        self.mtriple = "nvptx64-nvidia-cuda"
        self.target_arch = "nvptx64"
        self.keys = ("cuda", "gpu")
        self.is_host = False
        self.caps = CUDACaps(
            max_threads_per_block=_positive_int(opts, "max-threads-per-block", text, 1024),
            max_shared_memory_per_block=_positive_int(
                opts, "max-shared-memory-per-block", text, 49152
            ),
            warp_size=32,
        )

    # ---- printing, identity ---------------------------------------------------------

    def __str__(self) -> str:
        order = _OPTIONS[self.kind]
        parts = [self.kind] + [f"-{k}={self._opts[k]}" for k in order if k in self._opts]
        return " ".join(parts)

    def __repr__(self) -> str:
        if self.host is not None:
            return f"Target({str(self)!r}, host={str(self.host)!r})"
        return f"Target({str(self)!r})"

    def canonical_key(self) -> str:
        """A string of only the attributes that change generated code.

        For llvm: triple (normalised to arch), CPU model, and the vector-relevant features
        that are enabled; for cuda: the architecture, resolved (``DEFAULT_CUDA_ARCH`` when
        the string names none). Thread count and per-block limits are left out: they
        change how fast a schedule runs or whether it fits, not the code, and tuning
        records stay shareable across machines with the same processor.
        """
        if self.kind == "cuda":
            return f"cuda -arch={self.arch}"
        relevant = {"arm": _ARM_VECTOR_FEATURES, "riscv64": _RISCV_VECTOR_FEATURES}.get(
            self.keys[1], _X86_VECTOR_FEATURES)
        feats = sorted(f for f in relevant if self._enabled(f))
        key = f"llvm -arch={self.target_arch} -mcpu={self.mcpu}"
        if feats:
            key += " -mattr=" + ",".join("+" + f for f in feats)
        return key

    @property
    def features(self) -> tuple:
        """Enabled CPU feature names without the sign (e.g. ("avx2", "avx512f", ...));
        empty for a device target."""
        if self.kind != "llvm":
            return ()
        return tuple(sorted({a[1:] for a in self.mattr if self._enabled(a[1:])}))

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = Target(other)
            except TargetError:
                return False
        return isinstance(other, Target) and self.canonical_key() == other.canonical_key()

    def __hash__(self):
        return hash(self.canonical_key())

    # ---- the current-target scope ------------------------------------------------------

    def __enter__(self) -> "Target":
        _scope().append(self)
        return self

    def __exit__(self, *exc) -> None:
        stack = _scope()
        if stack and stack[-1] is self:
            stack.pop()

    @staticmethod
    def current(allow_none: bool = True) -> "Target | None":
        """The target of the innermost ``with Target(...):`` scope in this thread.

        Parameters
        ----------
        allow_none : bool
            When False and no scope is active, raise instead of returning None.

        Raises
        ------
        TargetError
            No scope is active and ``allow_none`` is False.
        """
        stack = _scope()
        if stack:
            return stack[-1]
        if allow_none:
            return None
        raise TargetError("no target scope is active; use `with tecomp.Target('llvm'):`")


_SCOPES = threading.local()


def _scope() -> list:
    # One stack per thread, so a scope opened in one thread never leaks into another.
    if not hasattr(_SCOPES, "stack"):
        _SCOPES.stack = []
    return _SCOPES.stack


def as_target(target) -> Target:
    """``target`` as a Target (accepts a string or a Target; None means "llvm")."""
    if target is None:
        return Target("llvm")
    return target if isinstance(target, Target) else Target(target)
