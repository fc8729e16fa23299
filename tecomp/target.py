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

import functools
import os
import shlex
import threading

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


@functools.cache
def _llvm():
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


@functools.cache
def _unknown_to_llvm(triple: str, cpu: str, features: str) -> str:
    """What of ``cpu`` / ``features`` LLVM's backend for ``triple`` does not recognise, as
    text ("" when all is known). LLVM only warns on stderr and then ignores them, which
    later aborts the process (e.g. 64-bit code on a CPU without it), so the warning is
    read here, where it can still become an error."""
    import os
    import tempfile

    llvm = _llvm()
    try:
        backend = llvm.Target.from_triple(triple)
    except RuntimeError:
        return ""  # no backend for the triple: reported when code is generated
    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            backend.create_target_machine(cpu=cpu, features=features)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        text = err.read().decode(errors="replace")
    found = []
    for line in text.splitlines():
        if "is not a recognized" in line:
            name = line.split("'")[1] if line.count("'") >= 2 else line
            kind = "processor" if "processor" in line else "feature"
            if f"{kind} {name!r}" not in found:
                found.append(f"{kind} {name!r}")
    return ", ".join(found)


@functools.cache
def host_triple() -> str:
    return _llvm().get_process_triple()


@functools.cache
def host_cpu() -> str:
    return _llvm().get_host_cpu_name()


@functools.cache
def host_features() -> tuple:
    """The host CPU's enabled features as ``("+avx2", "+fma", ...)`` (disabled ones dropped)."""
    try:
        fmap = _llvm().get_host_cpu_features()
    except RuntimeError:  # LLVM cannot query this host
        return ()
    return tuple(sorted(f"+{k}" for k, on in fmap.items() if on))


def host_num_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _arch_of(triple: str) -> str:
    arch = triple.split("-", 1)[0]
    return {"arm64": "aarch64", "amd64": "x86_64"}.get(arch, arch)


class Target:
    """A parsed target string.

    Parameters
    ----------
    target : str or Target
        ``"llvm"``, ``"llvm -mcpu=NAME -mattr=+f1,+f2 -mtriple=TRIPLE -num-cores=N"``,
        ``"cuda"`` or ``"cuda -arch=sm_XY"``.

    Attributes
    ----------
    kind : "llvm" or "cuda"
    mtriple, mcpu : str (llvm; resolved to the host's when not given)
    mattr : tuple of "+feature" / "-feature" strings (llvm; the host's for plain "llvm")
    arch : str or None (cuda, e.g. "sm_90")
    keys : tuple of str, e.g. ("cpu", "x86_64") or ("cuda", "gpu")
    vector_width_bits : int, widest native vector register (512 for AVX-512, 128 for NEON)
    num_cores : int, threads a parallel loop uses
    is_host : bool, whether code for this target runs on this machine

    Raises
    ------
    TargetError
        When the string has an unknown kind or option or a malformed value; the message
        names the bad part and lists what is allowed.

    Examples
    --------
    >>> t = Target("llvm -mtriple=aarch64-linux-gnu")
    >>> t.vector_width_bits, t.is_host
    (128, False)
    """

    def __init__(self, target: "str | Target" = "llvm"):
        if isinstance(target, Target):
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
            self._init_llvm(opts)
        else:
            self._init_cuda(opts)

    @staticmethod
    def _fmt_allowed(kind):
        return ", ".join(f"-{o}=" for o in _OPTIONS[kind])

    def _allowed(self):
        return self._fmt_allowed(self.kind)

    # ---- llvm -------------------------------------------------------------------------

    def _init_llvm(self, opts):
        text = self._text
        self.arch = None
        self.mtriple = opts.get("mtriple", host_triple())
        if self.mtriple.count("-") < 1 or not self.mtriple.split("-")[0]:
            raise TargetError(
                f"-mtriple={self.mtriple!r} in target {text!r} is not a target triple; "
                "expected e.g. x86_64-linux-gnu or aarch64-linux-gnu"
            )
        self.target_arch = _arch_of(self.mtriple)
        host_arch = _arch_of(host_triple())
        same_arch = self.target_arch == host_arch
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
            self.mcpu = host_cpu()
        else:
            self.mcpu = "generic"
        # Plain "llvm" (or -mcpu naming the host CPU) means all the host's features.
        if same_arch and "mattr" not in opts and self.mcpu == host_cpu():
            mattr = host_features()
        if self.target_arch == "aarch64" and not any(a.lstrip("+-") == "neon" for a in mattr):
            mattr = mattr + ("+neon",)
        self.mattr = mattr
        unknown = _unknown_to_llvm(self.mtriple, self.mcpu, ",".join(mattr))
        if unknown:
            raise TargetError(
                f"target {text!r}: LLVM does not know {unknown} for {self.target_arch}; "
                "use a CPU name that clang's -mcpu accepts (e.g. skylake-avx512, znver4, "
                "cortex-a72) and features such as +avx2"
            )
        if "num-cores" in opts:
            try:
                self.num_cores = int(opts["num-cores"])
                if self.num_cores < 1:
                    raise ValueError
            except ValueError:
                raise TargetError(
                    f"-num-cores={opts['num-cores']!r} in target {text!r} must be a "
                    "positive integer"
                ) from None
        else:
            self.num_cores = host_num_cores() if same_arch else 1
        self.is_host = same_arch
        if self.target_arch in ("x86_64", "i386", "i686"):
            self.keys = ("cpu", "x86_64" if self.target_arch == "x86_64" else "x86")
        elif self.target_arch in ("aarch64", "arm", "armv7"):
            self.keys = ("cpu", "arm")
        else:
            self.keys = ("cpu", self.target_arch)
        self.vector_width_bits = self._llvm_vector_width()

    def _enabled(self, feature: str) -> bool:
        state = False
        for a in self.mattr:
            if a[1:] == feature:
                state = a[0] == "+"
        return state

    def _llvm_vector_width(self) -> int:
        if self.target_arch == "aarch64":
            return 128  # NEON; SVE lengths are not assumed
        if self.target_arch in ("x86_64", "i386", "i686"):
            if self._enabled("avx512f"):
                return 512
            if self.mcpu in _X86_512 and not any(a == "-avx512f" for a in self.mattr):
                return 512
            if self._enabled("avx") or self._enabled("avx2") or self.mcpu in _X86_256:
                return 256
            return 128
        return 128

    # ---- cuda -------------------------------------------------------------------------

    def _init_cuda(self, opts):
        text = self._text
        arch = opts.get("arch")
        if arch is not None:
            digits = arch[3:] if arch.startswith("sm_") else ""
            if not digits[:-1].isdigit() or not (digits.isdigit() or digits[-1] in "af"):
                raise TargetError(
                    f"-arch={arch!r} in target {text!r} is not a CUDA architecture; "
                    "expected sm_XY such as sm_80 or sm_90"
                )
        self.arch = arch
        self.mtriple = "nvptx64-nvidia-cuda"
        self.target_arch = "nvptx64"
        self.mcpu = arch or ""
        self.mattr = ()
        self.keys = ("cuda", "gpu")
        self.vector_width_bits = 128  # widest per-thread load (float4)
        self.num_cores = 1
        self.is_host = False

        def _int(key, default):
            if key not in opts:
                return default
            try:
                v = int(opts[key])
                if v <= 0:
                    raise ValueError
                return v
            except ValueError:
                raise TargetError(
                    f"-{key}={opts[key]!r} in target {text!r} must be a positive integer"
                ) from None

        self.max_threads_per_block = _int("max-threads-per-block", 1024)
        self.max_shared_memory_per_block = _int("max-shared-memory-per-block", 49152)
        self.warp_size = 32

    # ---- printing, identity ---------------------------------------------------------

    def __str__(self) -> str:
        order = _OPTIONS[self.kind]
        parts = [self.kind] + [f"-{k}={self._opts[k]}" for k in order if k in self._opts]
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    def canonical_key(self) -> str:
        """A string of only the attributes that change generated code.

        For llvm: triple (normalised to arch), CPU model, and the vector-relevant features
        that are enabled; for cuda: the architecture. Thread count is left out: it changes
        how fast a schedule runs, not the code, and tuning records stay shareable across
        machines with the same CPU.
        """
        if self.kind == "cuda":
            return f"cuda -arch={self.arch or 'default'}"
        relevant = _ARM_VECTOR_FEATURES if self.keys[1] == "arm" else _X86_VECTOR_FEATURES
        feats = sorted(f for f in relevant if self._enabled(f))
        key = f"llvm -arch={self.target_arch} -mcpu={self.mcpu}"
        if feats:
            key += " -mattr=" + ",".join("+" + f for f in feats)
        return key

    @property
    def features(self) -> tuple:
        """Enabled feature names without the sign (e.g. ("avx2", "avx512f", ...))."""
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
