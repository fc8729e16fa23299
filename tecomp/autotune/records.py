"""Tuning logs: one JSON object per line, append-only, each line self-contained.

A line looks like (wrapped here)::

    {"format": 1, "tecomp": "0.1.0",
     "workload": {"name": "matmul", "args": [64, 64, 64, "float32"], "hash": "3f2a..."},
     "target": {"string": "llvm -mcpu=znver5", "key": "llvm -arch=x86_64 -mcpu=znver5 ..."},
     "config": {"index": 17, "knobs": {"tile_y": [-1, 8], "unroll_k": 4}},
     "result": {"costs": [0.0012, 0.0011], "error_no": 0, "error_kind": "NO_ERROR",
                "error_msg": "", "all_cost": 0.41, "timestamp": 1730000000.0,
                "stage": "trial", "disturbed": ""}}

``result.disturbed`` is ``""``, or for a measurement the machine disturbed
(``tecomp.autotune.disturbance``) the sign seen; logs written before have no such field
and read as sound.

``workload.hash`` is a structural hash of the compute: a record whose hash differs from
the operator's current one is stale and never applied. ``target.key`` is the target's
canonical key (only attributes that change generated code). ``result.stage`` is
``"trial"`` for a tuning measurement and ``"final"`` for the interleaved re-measurement
of the best few candidates at the end of a tuning run; ``pick_best`` trusts final
measurements over trial ones and never picks a disturbed one. Nothing here uses pickle.
"""

from __future__ import annotations

import json
import os
import statistics
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..target import Target
from .context import pop_context, push_context
from .result import MeasureErrorNo, MeasureResult

FORMAT_VERSION = 1


def _tuplify(v):
    if isinstance(v, list):
        return tuple(_tuplify(x) for x in v)
    return v


def _listify(v):
    if isinstance(v, tuple):
        return [_listify(x) for x in v]
    return v


@dataclass(frozen=True)
class Record:
    """One line of a tuning log: ``name`` and ``args`` of the template (the workload),
    ``workload_hash`` of its compute, the ``target`` string and its canonical
    ``target_key``, the config (``config_index`` and ``knobs``, the knob values), the
    measurement ``result`` (a :class:`MeasureResult`) and the tecomp ``version`` that
    wrote it. ``make_record`` builds one; ``to_json`` / ``from_json`` are its line."""

    name: str
    args: tuple
    workload_hash: str
    target: str
    target_key: str
    config_index: int
    knobs: dict = field(hash=False)
    result: MeasureResult = field(hash=False)
    version: str = ""

    @property
    def workload(self) -> tuple:
        return (self.name, self.args)

    @property
    def ok(self) -> bool:
        return self.result.error_no == MeasureErrorNo.NO_ERROR

    @property
    def cost(self) -> float:
        """Median of the measured costs (inf for failed candidates)."""
        return self.result.cost

    def to_json(self) -> dict:
        r = self.result
        return {
            "format": FORMAT_VERSION,
            "tecomp": self.version or __version__,
            "workload": {"name": self.name, "args": _listify(self.args),
                         "hash": self.workload_hash},
            "target": {"string": self.target, "key": self.target_key},
            "config": {"index": self.config_index, "knobs": self.knobs},
            "result": {
                "costs": list(r.costs),
                "error_no": int(r.error_no),
                "error_kind": MeasureErrorNo(r.error_no).name,
                "error_msg": r.error_msg,
                "all_cost": r.all_cost,
                "timestamp": r.timestamp,
                "stage": r.stage,
                "disturbed": r.disturbed,
            },
        }

    def to_line(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_json(cls, obj: dict) -> Record:
        if obj.get("format") != FORMAT_VERSION:
            raise ValueError(f"unsupported record format {obj.get('format')!r}")
        wl, tg, cf, rs = obj["workload"], obj["target"], obj["config"], obj["result"]
        result = MeasureResult(
            costs=tuple(float(c) for c in rs["costs"]),
            error_no=MeasureErrorNo(int(rs["error_no"])),
            error_msg=str(rs.get("error_msg", "")),
            all_cost=float(rs.get("all_cost", 0.0)),
            timestamp=float(rs.get("timestamp", 0.0)),
            stage=str(rs.get("stage", "trial")),
            disturbed=str(rs.get("disturbed", "")),
        )
        if not isinstance(cf["knobs"], dict):
            raise ValueError("config.knobs must be an object")
        return cls(
            name=str(wl["name"]),
            args=_tuplify(wl["args"]),
            workload_hash=str(wl["hash"]),
            target=str(tg["string"]),
            target_key=str(tg["key"]),
            config_index=int(cf["index"]),
            knobs=cf["knobs"],
            result=result,
            version=str(obj.get("tecomp", "")),
        )


def make_record(task, config, result: MeasureResult) -> Record:
    """The record of measuring ``config`` of ``task``."""
    return Record(
        name=task.name,
        args=task.args,
        workload_hash=task.workload_hash,
        target=str(task.target),
        target_key=target_key(task.target),
        config_index=int(config.index),
        knobs=config.to_json(),
        result=result,
        version=__version__,
    )


_KEY_CACHE: dict = {}


def target_key(target) -> str:
    """The canonical key of ``target`` (a Target or a target string): only the attributes
    that change generated code."""
    text = str(target)
    if text not in _KEY_CACHE:
        _KEY_CACHE[text] = Target(text).canonical_key()
    return _KEY_CACHE[text]


def _kind_arch(key: str) -> tuple:
    """(kind, arch) of a canonical key: what must still agree when any CPU is accepted."""
    parts = key.split()
    arch = next((p.split("=", 1)[1] for p in parts if p.startswith("-arch=")), "")
    return (parts[0] if parts else "", arch)


def _features_of(key: str) -> frozenset:
    """The vector features a canonical key lists (``-mattr=+avx2,+fma`` -> {avx2, fma})."""
    for part in key.split():
        if part.startswith("-mattr="):
            return frozenset(f.lstrip("+") for f in part.split("=", 1)[1].split(","))
    return frozenset()


def _cpu_of(key: str) -> str:
    return next((p.split("=", 1)[1] for p in key.split() if p.startswith("-mcpu=")), "")


# From widest to narrowest; the first level whose features a key has names its vector ISA.
_VECTOR_LEVELS = (
    ("avx512", frozenset({"avx512f"})),
    ("avx2", frozenset({"avx2"})),
    ("avx", frozenset({"avx"})),
    ("sve", frozenset({"sve"})),
    ("neon", frozenset({"neon"})),
)


def vector_isa(key: str) -> tuple:
    """(kind, arch, widest vector extension) of a canonical key, e.g. ``("llvm", "x86_64",
    "avx512")``: what two CPUs must share for a schedule tuned on one to be a good first
    guess on the other (the same register width and lane count, so the same tile shapes
    make sense)."""
    feats = _features_of(key)
    widest = next((name for name, need in _VECTOR_LEVELS if need <= feats), "")
    return (*_kind_arch(key), widest)


def target_matches(record_key: str, wanted_key: str, any_cpu: bool = False) -> bool:
    """Whether a record made for ``record_key`` applies to ``wanted_key``: the same
    canonical key, or with ``any_cpu`` only the same kind and architecture."""
    if record_key == wanted_key:
        return True
    return any_cpu and _kind_arch(record_key) == _kind_arch(wanted_key)


# ---- reading and writing -----------------------------------------------------------------


def load_from_file(path) -> list[Record]:
    """All records of the log at ``path``, in file order. A corrupt or truncated line is
    skipped with a warning naming the file and line; a missing file is an error."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                out.append(Record.from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError, AttributeError) as err:
                warnings.warn(
                    f"{path}:{lineno}: skipping corrupt tuning record "
                    f"({type(err).__name__}: {err})",
                    stacklevel=2,
                )
    return out


def _as_records(source) -> list[Record]:
    if isinstance(source, (str, os.PathLike)):
        return load_from_file(source)
    out = []
    for item in source:
        if isinstance(item, Record):
            out.append(item)
        elif isinstance(item, (str, os.PathLike)):
            out.extend(load_from_file(item))
        else:
            raise TypeError(f"expected a log path or Records, got {type(item).__name__}")
    return out


class LogWriter:
    """Appends records to a log, one flushed line each. A log whose last line was cut
    off (the tuner was killed mid-write) gets a newline first, so the new records stay
    readable and only the cut line is lost."""

    def __init__(self, path):
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a+b")  # noqa: SIM115 - kept open for the session
        self._file.seek(0, os.SEEK_END)
        if self._file.tell() > 0:
            self._file.seek(-1, os.SEEK_END)
            if self._file.read(1) != b"\n":
                self._file.write(b"\n")
        self._file.seek(0, os.SEEK_END)

    def write(self, record: Record):
        self._file.write(record.to_line().encode() + b"\n")
        self._file.flush()

    def close(self):
        self._file.close()


# ---- choosing the best -------------------------------------------------------------------


def _rank(records: list[Record]) -> list[Record]:
    """Sound records, best first. Final (interleaved re-)measurements outrank trial
    measurements: trial medians of a drifting machine are what they correct. A disturbed
    measurement times the machine, not the kernel, and never ranks."""
    ok = [r for r in records if r.result.sound]
    return sorted(ok, key=lambda r: (r.result.stage != "final", r.cost, -r.result.timestamp))


def pick_best(source, out_file=None) -> list[Record]:
    """The best record per (workload, workload hash, target key) of ``source`` (a log
    path, or Records). With ``out_file``, also write them there as a log."""
    groups: dict = {}
    for r in _as_records(source):
        groups.setdefault((r.name, r.args, r.workload_hash, r.target_key), []).append(r)
    best = []
    for recs in groups.values():
        ranked = _rank(recs)
        if ranked:
            best.append(ranked[0])
    if out_file is not None:
        with open(out_file, "w", encoding="utf-8") as f:
            for r in best:
                f.write(r.to_line() + "\n")
    return best


class ApplyHistoryBest:
    """Context manager: templates called inside it get the best recorded config for
    their workload and target (made by :func:`apply_history_best`, whose ``source`` and
    ``any_cpu`` arguments it takes)."""

    def __init__(self, source, any_cpu: bool = False):
        self.any_cpu = any_cpu
        self._by_workload: dict = {}
        for r in _as_records(source):
            self._by_workload.setdefault((r.name, r.args), []).append(r)
        self.fallbacks: list = []
        self._stale_warned: set = set()

    def has_workload(self, name, args) -> bool:
        return (name, tuple(args)) in self._by_workload

    def task_records(self, task) -> list[Record]:
        """Every record of ``task``'s workload, whatever its target, also those logged
        before its template grew parameters with defaults (``task.workload_forms``)."""
        return [r for args in task.workload_forms
                for r in self._by_workload.get((task.name, args), ())]

    def best_record(self, task, target=None) -> Record | None:
        """The best record for ``task`` on ``target`` (default: the task's target)."""
        recs = self.task_records(task)
        if not recs:
            return None
        want = target_key(target or task.target)
        matching = [r for r in recs if target_matches(r.target_key, want, self.any_cpu)]
        fresh = [r for r in matching if r.workload_hash == task.workload_hash]
        if matching and not fresh and (task.name, task.args) not in self._stale_warned:
            self._stale_warned.add((task.name, task.args))
            warnings.warn(
                f"tuning records for {task.name}{task.args} were made for a different "
                f"compute (hash {matching[0].workload_hash}, now {task.workload_hash}); "
                f"ignoring them",
                stacklevel=3,
            )
        # A record whose knobs the template no longer offers (its space changed while
        # the compute did not) does not apply; the best one that does is used.
        ranked = [r for r in _rank(fresh) if _config_of(task, r) is not None]
        # Prefer an exact target match over one accepted only through any_cpu.
        exact = [r for r in ranked if r.target_key == want]
        return (exact or ranked or [None])[0]

    def query(self, task, target=None):
        """The config of the best matching record, or None."""
        rec = self.best_record(task, target)
        return None if rec is None else _config_of(task, rec)

    def note_fallback(self, name, args):
        if (name, args) not in self.fallbacks:
            self.fallbacks.append((name, args))

    def __enter__(self):
        push_context(self)
        return self

    def __exit__(self, *exc):
        pop_context(self)
        return False


def _config_of(task, record):
    """``record``'s config in ``task``'s space, or None if the space has no such config."""
    try:
        return task.config_space.from_json(record.knobs, record.config_index)
    except Exception:  # noqa: BLE001 - a record of an older space: not applicable
        return None


def apply_history_best(records, any_cpu: bool = False) -> ApplyHistoryBest:
    """Use the best config of ``records`` (a log path, a list of paths or Records) for
    every template called inside the ``with`` block.

    A record applies to a call when its template name, arguments and compute hash match
    and its target has the same canonical key as the current target (``any_cpu=True``
    also accepts records made for another CPU of the same kind and architecture). With no
    matching record, the template uses its fallback config.

    Examples
    --------
    >>> with autotune.apply_history_best("mm.json"):
    ...     s, args = task.instantiate()
    """
    return ApplyHistoryBest(records, any_cpu=any_cpu)


# ---- shipped logs ------------------------------------------------------------------------

_SHIPPED = {"loaded": False, "ctx": None, "enabled": None}


def shipped_log_dir() -> Path | None:
    """Where the tuning logs shipped with tecomp are: ``tecomp/tuning_logs`` in an
    installed package, else ``tuning_logs/`` beside the package in a source checkout."""
    here = Path(__file__).resolve().parent.parent
    for cand in (here / "tuning_logs", here.parent / "tuning_logs"):
        if cand.is_dir():
            return cand
    return None


def use_shipped_logs(enabled: bool = True) -> None:
    """Turn the automatic use of shipped tuning logs on (``enabled``) or off for this
    process (also: environment variable ``TECOMP_NO_SHIPPED_LOGS=1``)."""
    _SHIPPED["enabled"] = bool(enabled)


def shipped_history() -> ApplyHistoryBest | None:
    enabled = _SHIPPED["enabled"]
    if enabled is None:
        enabled = os.environ.get("TECOMP_NO_SHIPPED_LOGS", "") in ("", "0")
    if not enabled:
        return None
    if not _SHIPPED["loaded"]:
        _SHIPPED["loaded"] = True
        d = shipped_log_dir()
        files = sorted(d.glob("*.json")) if d else []
        if files:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _SHIPPED["ctx"] = ApplyHistoryBest(pick_best(files))
    return _SHIPPED["ctx"]


def shipped_candidates(task) -> list[Record]:
    """Shipped records of ``task``'s workload made on a CPU of the same vector ISA as the
    task's target (see ``vector_isa``), nearest target first: the task's own target,
    then the one sharing the most vector features. A tuning session measures their
    configs first, as candidates; they are never applied untested to another CPU.
    Empty when shipped logs are turned off."""
    shipped = shipped_history()
    if shipped is None:
        return []
    want = target_key(task.target)
    isa, feats = vector_isa(want), _features_of(want)
    recs = [
        r for r in shipped.task_records(task)
        if r.workload_hash == task.workload_hash and vector_isa(r.target_key) == isa
    ]

    def distance(r):
        theirs = _features_of(r.target_key)
        return (r.target_key != want, len(feats ^ theirs), r.target_key)

    return sorted(recs, key=distance)


def shipped_note(task) -> str:
    """One line on what the shipped logs offer ``task`` on this CPU, or "" when a shipped
    record applies (or shipped logs are off)."""
    shipped = shipped_history()
    if shipped is None or shipped.best_record(task) is not None:
        return ""
    cpu = _cpu_of(target_key(task.target)) or task.target
    line = (f"no shipped records for {cpu}; using fallback configs "
            f"(`tecomp tune` to tune for this CPU)")
    near = shipped_candidates(task)
    if near:
        line += (f"; tuning measures the shipped {_cpu_of(near[0].target_key)} "
                 f"records first")
    return line


def median(xs) -> float:
    return statistics.median(xs) if xs else float("inf")
