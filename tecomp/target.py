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

A kind is a ``TargetKind`` record, registered by the kind's package
(``register_target_kind``): its options, how they parse into the target's attributes and
capabilities, its canonical key, and what the core asks of it (the loop-IR passes only
it runs, its loop legality rules, whether it takes a host, binds threads or reports
run-time checks). This module knows no kind by name; the kinds tecomp ships
(``tecomp.codegen.llvm.kind``, ``tecomp.codegen.cuda.kind``) are imported the first time
a target string names a kind not registered yet.
"""

from __future__ import annotations

import importlib
import os
import shlex
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass

from .errors import TargetError

_KINDS: dict[str, TargetKind] = {}


@dataclass(frozen=True)
class TargetKind:
    """Everything the core asks about one kind of target; a kind's package registers it
    (``register_target_kind``) when it is imported, so the core has no list of kinds.

    Parameters
    ----------
    name : str
        The first word of a target string ("llvm", "cuda").
    options : tuple of str
        The options a target string of this kind accepts, without the dash, in the order
        ``str(target)`` prints them.
    parse : callable
        ``parse(target, opts)``: checks the options (``opts`` maps each given option to
        its value) and sets the target's attributes: at least ``keys``, ``mtriple``,
        ``target_arch``, ``is_host`` and ``caps``; raises ``TargetError`` naming a bad
        value.
    canonical_key : callable, optional
        ``canonical_key(target) -> str``: only what changes the generated code (see
        ``Target.canonical_key``); by default the target string as printed.
    attributes : tuple of str
        The attributes only targets of this kind have, for the message when a target of
        another kind is asked for one.
    device : bool
        Its code runs on an accelerator launched from a CPU: a target of this kind takes
        a host target (``host=``, a kind that is not a device), ``"llvm"`` when not given.
    features : callable, optional
        ``features(target) -> tuple of str``: the enabled CPU features (``Target.features``);
        none when not given.
    passes : callable, optional
        ``passes(target) -> tuple of Pass``: the loop-IR passes only this kind runs, after
        the ones every target runs (``tecomp.ir.transform.pipeline.passes``).
    legalize : callable, optional
        ``legalize(func, target) -> PrimFunc``: the loop kinds its code generator honours
        (``tecomp.ir.transform.legalize``); without it loops keep their scheduled kinds.
    run_time_checks : bool
        Its code can report a failed run-time check through the call's error record, so
        a bounds-checking build instruments its functions.
    threads : bool
        Schedules for it bind loops to GPU threads and use shared memory; lowering
        checks its thread-binding rules and per-block limits instead of the CPU rules.
    portable : callable, optional
        ``portable(target) -> str``: a target string that means the same on every
        machine, with what this machine supplies by default spelled out (a builder on
        another machine builds for it); the string as printed when not given.
    timing_unavailable : callable, optional
        ``timing_unavailable(target) -> str or None``: why code built for ``target``
        cannot be timed on this machine (no device, no driver), None when it can; without
        it, it can wherever it runs (a CPU target of another machine is ``not is_host``).
    local_targets : callable, optional
        ``local_targets() -> tuple of str``: the targets of this kind whose code this
        machine runs and times (its CPU, its usable GPUs), which a measuring worker
        offers; none when not given.

    The kind's code generator is registered beside it, from the same package
    (``tecomp.codegen.register_backend``).
    """

    name: str
    options: tuple
    parse: Callable
    canonical_key: Callable | None = None
    attributes: tuple = ()
    device: bool = False
    features: Callable | None = None
    passes: Callable | None = None
    legalize: Callable | None = None
    run_time_checks: bool = False
    threads: bool = False
    portable: Callable | None = None
    timing_unavailable: Callable | None = None
    local_targets: Callable | None = None


def register_target_kind(kind: TargetKind) -> TargetKind:
    """Make target strings of ``kind.name`` parse, lower and build as ``kind`` says.

    Registering a kind again under the same name replaces it.

    Examples
    --------
    >>> register_target_kind(TargetKind("toyc", (), parse_toyc))   # doctest: +SKIP
    """
    if not isinstance(kind, TargetKind):
        raise TargetError(f"register_target_kind takes a TargetKind, got {type(kind).__name__}")
    if not kind.name or not kind.name.isidentifier():
        raise TargetError(f"a target kind's name must be an identifier, got {kind.name!r}")
    _KINDS[kind.name] = kind
    return kind


def _load_builtin_kinds() -> None:
    # The kinds tecomp ships register themselves from their packages, which the package
    # face names (tecomp.BUILTIN_TARGET_KINDS); they load on the first target string
    # that needs them, so importing this module loads no code generator. Another thread
    # importing them meanwhile is waited for; a target parsed while they import in this
    # thread finds the kinds registered so far.
    from . import BUILTIN_TARGET_KINDS

    for package in BUILTIN_TARGET_KINDS:
        importlib.import_module(package)


def target_kinds() -> tuple:
    """The names of the registered target kinds (the built-in ones included), in the order
    they were registered."""
    _load_builtin_kinds()
    return tuple(_KINDS)


def get_target_kind(name: str) -> TargetKind:
    """The ``TargetKind`` registered under ``name``.

    Raises
    ------
    TargetError
        When no kind has that name; the message lists the kinds there are.
    """
    if name not in _KINDS:
        _load_builtin_kinds()
    try:
        return _KINDS[name]
    except KeyError:
        raise TargetError(
            f"unknown target kind {name!r}; allowed kinds: {', '.join(target_kinds())}"
        ) from None


def host_num_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def positive_int_option(opts: dict, key: str, text: str, default: int | None = None):
    """The value of option ``-key`` as a positive int (``default`` when not given).

    Raises
    ------
    TargetError
        When the value is not a positive integer; the message names the option and
        ``text``, the target string.
    """
    if key not in opts:
        return default
    try:
        value = int(opts[key])
    except ValueError:
        value = 0
    if value < 1:
        raise TargetError(f"-{key}={opts[key]!r} in target {text!r} must be a positive integer")
    return value


@dataclass(frozen=True)
class CPUCaps:
    """What a CPU target offers generated code and the schedules written for it."""

    vector_width_bits: int  # widest native vector register (512 for AVX-512, 128 for NEON)
    num_vector_registers: int  # architectural vector registers (register blocking)
    num_cores: int  # threads a parallel loop uses
    # What cache blocking and latency hiding count on (tecomp.topi.cpu_tiling); the
    # defaults are a common core of today (Zen 3, Skylake client, Neoverse N1).
    l1d_bytes: int = 32 << 10  # level-1 data cache of one core
    l2_bytes: int = 512 << 10  # level-2 cache of one core (its share where cores share one)
    fma_chains: int = 8  # independent multiply-add chains that keep the FMA units busy:
    #                      the FMA latency in cycles times the FMAs issued per cycle


@dataclass(frozen=True)
class CUDACaps:
    """The per-block limits of a CUDA target, checked before a kernel is compiled."""

    max_threads_per_block: int
    max_shared_memory_per_block: int  # bytes
    warp_size: int


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
    kind : str, the name of a registered kind ("llvm", "cuda")
    kind_info : TargetKind, the kind's record
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
    arch : str (cuda only, e.g. "sm_90"; ``tecomp.codegen.cuda.DEFAULT_CUDA_ARCH`` when
        not given)

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
            raise TargetError(f"empty target string; allowed kinds: {', '.join(target_kinds())}")
        kind = parts[0]
        if kind not in _KINDS:
            _load_builtin_kinds()
        if kind not in _KINDS:
            raise TargetError(
                f"unknown target kind {kind!r} in {target!r}; allowed kinds: "
                f"{', '.join(target_kinds())}"
            )
        spec = _KINDS[kind]
        self.kind = kind
        opts = {}
        for p in parts[1:]:
            if not p.startswith("-") or "=" not in p:
                raise TargetError(
                    f"malformed option {p!r} in target {target!r}; options look like "
                    f"-name=value, allowed for {kind}: {self._allowed()}"
                )
            key, value = p.lstrip("-").split("=", 1)
            if key not in spec.options:
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
        if spec.device:
            self.host = self._device_host(host)
        elif host is not None:
            raise TargetError(
                f"target {target!r} runs on the CPU itself and takes no host; host= is "
                "for device targets such as 'cuda'"
            )
        else:
            self.host = None
        spec.parse(self, opts)

    def _device_host(self, host) -> "Target":
        host = Target("llvm") if host is None else as_target(host)
        if host.kind_info.device:
            raise TargetError(
                f"the host of target {self._text!r} must be a CPU target such as 'llvm', "
                f"got {host}"
            )
        return host

    @property
    def kind_info(self) -> TargetKind:
        """The registered ``TargetKind`` of this target's kind."""
        return get_target_kind(self.kind)

    def _allowed(self):
        return ", ".join(f"-{o}=" for o in self.kind_info.options)

    def __getattr__(self, name):
        # Reached only for attributes the instance lacks: first the capability record's
        # fields, then a message for attributes of the other kind.
        caps = self.__dict__.get("caps")
        if is_dataclass(caps) and name in {f.name for f in fields(caps)}:
            return getattr(caps, name)
        kind = self.__dict__.get("kind")
        for other, spec in list(_KINDS.items()):
            names = spec.attributes
            if name in names and kind is not None and other != kind:
                raise AttributeError(
                    f"{self!r} is of kind {kind!r}; {name!r} belongs to {other!r} targets "
                    "(see target.caps)"
                )
        raise AttributeError(f"'Target' object has no attribute {name!r}")

    # ---- printing, identity ---------------------------------------------------------

    def __str__(self) -> str:
        order = self.kind_info.options
        parts = [self.kind] + [f"-{k}={self._opts[k]}" for k in order if k in self._opts]
        return " ".join(parts)

    def __repr__(self) -> str:
        if self.host is not None:
            return f"Target({str(self)!r}, host={str(self.host)!r})"
        return f"Target({str(self)!r})"

    def canonical_key(self) -> str:
        """A string of only the attributes that change generated code.

        The kind says which (``TargetKind.canonical_key``; by default the string as
        printed). For llvm: triple (normalised to arch), CPU model, and the
        vector-relevant features that are enabled; for cuda: the architecture, resolved
        (``DEFAULT_CUDA_ARCH`` when the string names none). Thread count and per-block
        limits are left out: they change how fast a schedule runs or whether it fits,
        not the code, and tuning records stay shareable across machines with the same
        processor.
        """
        key = self.kind_info.canonical_key
        return str(self) if key is None else key(self)

    @property
    def features(self) -> tuple:
        """Enabled CPU feature names without the sign (e.g. ("avx2", "avx512f", ...));
        empty for a device target."""
        features = self.kind_info.features
        return () if features is None else tuple(features(self))

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
