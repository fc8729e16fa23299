"""Configuration spaces: knobs, the space they span, and one point of it (a config).

A template declares knobs (``define_split``, ``define_reorder``, ``define_annotate``,
``define_knob``) on the config object that ``get_config()`` returns. Each knob is a
*space* that enumerates its candidates; a chosen candidate is an *entity* that knows how
to ``apply()`` itself to a schedule and how to write itself as JSON.

The space of a template is the product of its knob spaces. A config is addressed by a
single mixed-radix index: the first knob is the least significant digit. The same
template code runs in three modes, told apart by the type of ``cfg``:

- ``ConfigSpace``: collecting the knobs (``define_*`` records them; ``cfg[name]``
  returns the knob's first candidate so the template can run to the end);
- ``ConfigEntity``: one point of the space (``define_*`` does nothing; ``cfg[name]``
  is the chosen candidate);
- ``FallbackConfigEntity``: no tuning record matched; ``define_*`` records the knob and
  picks a sensible default that the template may refine with ``fallback_split`` /
  ``fallback_knob`` (check ``cfg.is_fallback``).
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict

from ..errors import TecompError
from ..ir import expr as E


class ConfigError(TecompError, ValueError):
    """A knob is defined or used in a way that has no meaning (bad policy, unknown name)."""


# ---- knob spaces and entities -------------------------------------------------------------


def _extent_of(axis, what: str) -> int:
    if isinstance(axis, bool):
        raise ConfigError(f"{what}: axis={axis!r} must be an IterVar or an int extent")
    if isinstance(axis, int):
        return axis
    dom = getattr(axis, "dom", None)
    ext = getattr(dom, "extent", None)
    if isinstance(ext, E.IntImm):
        return int(ext.value)
    raise ConfigError(
        f"{what}: axis {axis} has no constant extent; pass an op axis with a constant "
        f"range or the extent as an int"
    )


def _factors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


class SplitEntity:
    """Sizes of the parts of a split, outermost first; ``-1`` means "whatever is left"."""

    __slots__ = ("size",)

    def __init__(self, size):
        self.size = tuple(int(x) for x in size)

    def apply(self, sch, op, axis):
        """Split ``axis`` of ``op``'s stage into ``len(size)`` loops; returns them, outermost
        first. A factor that does not divide the extent is legal: split guards the tail."""
        stage = sch[op]
        parts = []
        for i in range(len(self.size) - 1):
            factor = math.prod(self.size[i + 1:])
            outer, axis = stage.split(axis, factor=factor)
            parts.append(outer)
        return parts + [axis]

    def to_json(self):
        return list(self.size)

    def __eq__(self, other):
        return isinstance(other, SplitEntity) and self.size == other.size

    def __hash__(self):
        return hash(self.size)

    def __repr__(self):
        return f"sp{list(self.size)}"


class SplitSpace:
    """All ways to split an axis of ``extent`` into ``num_outputs`` loops.

    Policies: ``"factors"`` (inner sizes multiply to a divisor of the extent; the outer
    size takes the rest, so no tail), ``"power2"`` (inner sizes are powers of two, the
    outer size is ``-1``: tails are guarded), ``"candidate"`` (the explicit size tuples in
    ``candidate``). ``max_factor`` bounds every inner size.
    """

    kind = "split"

    def __init__(self, extent, num_outputs=2, policy="factors", max_factor=None,
                 candidate=None, filter=None):
        if not 2 <= num_outputs <= 4:
            raise ConfigError(f"define_split: num_outputs={num_outputs} must be 2, 3 or 4")
        self.extent = extent
        self.num_outputs = num_outputs
        self.policy = policy
        max_factor = extent if max_factor is None else int(max_factor)
        if policy == "factors":
            sizes = self._factor_sizes(extent, num_outputs, max_factor)
        elif policy == "power2":
            p2 = [1 << k for k in range(31) if (1 << k) <= min(max_factor, extent)]
            sizes = [
                (-1,) + inner for inner in itertools.product(p2, repeat=num_outputs - 1)
                if math.prod(inner) <= extent
            ]
        elif policy == "candidate":
            if not candidate:
                raise ConfigError("define_split: policy='candidate' needs candidate=[...]")
            sizes = []
            for c in candidate:
                c = tuple(int(x) for x in c)
                if len(c) != num_outputs:
                    raise ConfigError(
                        f"define_split: candidate {list(c)} has {len(c)} sizes, "
                        f"num_outputs={num_outputs}"
                    )
                sizes.append(c)
        else:
            raise ConfigError(
                f"define_split: policy={policy!r}; allowed: 'factors', 'power2', 'candidate'"
            )
        if filter is not None:
            sizes = [s for s in sizes if filter(SplitEntity(s))]
        if not sizes:
            raise ConfigError(f"define_split: no candidate split of extent {extent} remains")
        self.entities = [SplitEntity(s) for s in sizes]

    @staticmethod
    def _factor_sizes(extent, n, max_factor):
        divs = [d for d in _factors(extent) if d <= max_factor]
        out = []

        def rec(prefix, left):
            if len(prefix) == n - 1:
                out.append((left,) + tuple(reversed(prefix)))
                return
            for d in divs:
                if left % d == 0:
                    rec(prefix + [d], left // d)

        rec([], extent)
        out.sort(key=lambda s: s[::-1])
        return out

    def __len__(self):
        return len(self.entities)

    def __repr__(self):
        return (f"Split(policy={self.policy}, extent={self.extent}, n={self.num_outputs}) "
                f"len={len(self)}")


class ReorderEntity:
    """A permutation of a list of axes: ``perm[i]`` is the position of the i-th new loop."""

    __slots__ = ("perm",)

    def __init__(self, perm):
        self.perm = tuple(int(x) for x in perm)

    def apply(self, sch, op, axes):
        ordered = [axes[i] for i in self.perm]
        sch[op].reorder(*ordered)
        return ordered

    def to_json(self):
        return list(self.perm)

    def __eq__(self, other):
        return isinstance(other, ReorderEntity) and self.perm == other.perm

    def __hash__(self):
        return hash(self.perm)

    def __repr__(self):
        return f"re{list(self.perm)}"


class ReorderSpace:
    """Orders of ``n`` axes: ``"all"`` permutations, ``"identity"``, or ``"candidate"``."""

    kind = "reorder"

    def __init__(self, n, policy="all", candidate=None):
        self.policy = policy
        if policy == "all":
            perms = list(itertools.permutations(range(n)))
        elif policy == "identity":
            perms = [tuple(range(n))]
        elif policy == "candidate":
            perms = [tuple(p) for p in candidate or ()]
            for p in perms:
                if sorted(p) != list(range(n)):
                    raise ConfigError(f"define_reorder: {list(p)} is not a permutation of {n}")
            if not perms:
                raise ConfigError("define_reorder: policy='candidate' needs candidate=[...]")
        else:
            raise ConfigError(
                f"define_reorder: policy={policy!r}; allowed: 'all', 'identity', 'candidate'"
            )
        self.entities = [ReorderEntity(p) for p in perms]

    def __len__(self):
        return len(self.entities)

    def __repr__(self):
        return f"Reorder(policy={self.policy}) len={len(self)}"


_ANNOTATIONS = ("none", "unroll", "vec")


class AnnotateEntity:
    """One annotation per axis: ``"none"``, ``"unroll"`` or ``"vec"``."""

    __slots__ = ("anns",)

    def __init__(self, anns):
        self.anns = tuple(str(a) for a in anns)

    def apply(self, sch, op, axes):
        stage = sch[op]
        for ax, ann in zip(axes, self.anns):
            if ann == "unroll":
                stage.unroll(ax)
            elif ann == "vec":
                stage.vectorize(ax)
        return list(axes)

    def to_json(self):
        return list(self.anns)

    def __eq__(self, other):
        return isinstance(other, AnnotateEntity) and self.anns == other.anns

    def __hash__(self):
        return hash(self.anns)

    def __repr__(self):
        return f"an{list(self.anns)}"


class AnnotateSpace:
    """Unroll / vectorize choices over a list of axes.

    Policies: ``"unroll"`` (each axis none|unroll), ``"vec"`` (each axis none|vec),
    ``"unroll_vec"`` (each axis none|unroll, the last also vec), ``"candidate"``
    (explicit tuples of annotations).
    """

    kind = "annotate"

    def __init__(self, n, policy="unroll", candidate=None):
        self.policy = policy
        if policy in ("unroll", "try_unroll"):
            choices = [("none", "unroll")] * n
        elif policy == "vec":
            choices = [("none", "vec")] * n
        elif policy in ("unroll_vec", "try_unroll_vec"):
            choices = [("none", "unroll")] * (n - 1) + [("none", "unroll", "vec")]
        elif policy == "candidate":
            choices = None
            cands = [tuple(c) for c in candidate or ()]
            for c in cands:
                if len(c) != n or any(a not in _ANNOTATIONS for a in c):
                    raise ConfigError(
                        f"define_annotate: candidate {list(c)} must give one of "
                        f"{_ANNOTATIONS} for each of the {n} axes"
                    )
            if not cands:
                raise ConfigError("define_annotate: policy='candidate' needs candidate=[...]")
        else:
            raise ConfigError(
                f"define_annotate: policy={policy!r}; allowed: 'unroll', 'vec', "
                f"'unroll_vec', 'candidate'"
            )
        if choices is not None:
            cands = [tuple(reversed(c)) for c in itertools.product(*reversed(choices))]
        self.entities = [AnnotateEntity(c) for c in cands]

    def __len__(self):
        return len(self.entities)

    def __repr__(self):
        return f"Annotate(policy={self.policy}) len={len(self)}"


class OtherOptionEntity:
    """One value of a ``define_knob``."""

    __slots__ = ("val",)

    def __init__(self, val):
        self.val = val

    def to_json(self):
        return self.val

    def __eq__(self, other):
        return isinstance(other, OtherOptionEntity) and self.val == other.val

    def __hash__(self):
        return hash(repr(self.val))

    def __repr__(self):
        return repr(self.val)


class OtherOptionSpace:
    """An explicit list of values (ints, floats, strings, bools)."""

    kind = "knob"

    def __init__(self, candidates):
        candidates = list(candidates)
        if not candidates:
            raise ConfigError("define_knob: candidates must not be empty")
        for c in candidates:
            if not isinstance(c, (int, float, str, bool)):
                raise ConfigError(
                    f"define_knob: candidate {c!r} must be an int, float, str or bool "
                    f"(it is written to the tuning log as JSON)"
                )
        self.entities = [OtherOptionEntity(c) for c in candidates]

    def __len__(self):
        return len(self.entities)

    def __repr__(self):
        return f"Knob({[e.val for e in self.entities]}) len={len(self)}"


def _entity_from_json(space, value):
    """The entity of ``space`` whose JSON form is ``value`` (None if it has none)."""
    for i, e in enumerate(space.entities):
        if e.to_json() == value:
            return i
    return None


# ---- the space and its points ----------------------------------------------------------------


class _ConfigBase:
    """What ``define_*`` share in every mode: build a knob space and hand it to ``_add``."""

    is_fallback = False

    def define_split(self, name, axis, num_outputs=2, policy="factors", max_factor=None,
                     candidate=None, filter=None):
        """Declare a knob that splits ``axis`` (an op axis or an int extent) into
        ``num_outputs`` loops. See ``SplitSpace`` for the policies."""
        if self._defined(name):
            return
        ext = _extent_of(axis, f"define_split {name!r}")
        self._add(name, SplitSpace(ext, num_outputs, policy, max_factor, candidate, filter))

    def define_reorder(self, name, axes, policy="all", candidate=None):
        """Declare a knob choosing the order of ``axes`` (a list, or their number)."""
        if self._defined(name):
            return
        n = axes if isinstance(axes, int) else len(axes)
        self._add(name, ReorderSpace(n, policy, candidate))

    def define_annotate(self, name, axes, policy="unroll", candidate=None):
        """Declare a knob choosing unroll / vectorize for each of ``axes``."""
        if self._defined(name):
            return
        n = axes if isinstance(axes, int) else len(axes)
        self._add(name, AnnotateSpace(n, policy, candidate))

    def define_knob(self, name, candidates):
        """Declare a knob taking one of ``candidates``; ``cfg[name].val`` is the choice."""
        if self._defined(name):
            return
        self._add(name, OtherOptionSpace(candidates))

    def _defined(self, name):
        return False

    def _add(self, name, space):  # pragma: no cover - each mode overrides
        raise NotImplementedError


class ConfigSpace(_ConfigBase):
    """The knobs of a template and the product space they span.

    ``len(space)`` is the number of configs; ``space.get(i)`` is config ``i``. Printing
    shows each knob with its number of candidates.
    """

    def __init__(self):
        self.space_map: OrderedDict[str, object] = OrderedDict()
        self._entities_by_json = {}

    def _defined(self, name):
        return name in self.space_map

    def _add(self, name, space):
        self.space_map[name] = space

    def __getitem__(self, name):
        # While collecting, the template still has to run to the end: hand it candidate 0.
        if name not in self.space_map:
            raise ConfigError(f"knob {name!r} is not defined; define it before using it")
        return self.space_map[name].entities[0]

    def __len__(self):
        return math.prod(len(s) for s in self.space_map.values())

    @property
    def knob_names(self):
        return list(self.space_map)

    def __contains__(self, name) -> bool:
        """Whether knob ``name`` is declared."""
        return name in self.space_map

    def get(self, index: int) -> ConfigEntity:
        """Config number ``index`` (mixed radix, first knob least significant)."""
        index = int(index)
        if not 0 <= index < len(self):
            raise ConfigError(f"config index {index} is outside the space [0, {len(self)})")
        entity_map = OrderedDict()
        rest = index
        for name, space in self.space_map.items():
            entity_map[name] = space.entities[rest % len(space)]
            rest //= len(space)
        return ConfigEntity(index, entity_map, self)

    def index_of(self, digits) -> int:
        """The index of the config whose knob choices are ``digits`` (one int per knob)."""
        index, radix = 0, 1
        for d, space in zip(digits, self.space_map.values()):
            index += d * radix
            radix *= len(space)
        return index

    def digits_of(self, index: int) -> list[int]:
        out = []
        for space in self.space_map.values():
            out.append(index % len(space))
            index //= len(space)
        return out

    def from_json(self, knobs: dict, index: int | None = None) -> ConfigEntity:
        """The config whose knob values are ``knobs`` (as written by ``to_json``). The
        index is recomputed from the values, so a log survives a reordered space.

        A knob ``knobs`` does not name takes its first candidate: the templates add a
        knob with the schedule they had before it as its first candidate, so a record
        written before the knob existed keeps the schedule it measured."""
        digits = []
        for name, space in self.space_map.items():
            if name not in knobs:
                digits.append(0)
                continue
            i = _entity_from_json(space, knobs[name])
            if i is None:
                raise ConfigError(f"knob {name!r} has no candidate {knobs[name]!r}")
            digits.append(i)
        cfg = self.get(self.index_of(digits))
        if index is not None and index != cfg.index:
            # The knob values are authoritative; the stored index is only a convenience.
            pass
        return cfg

    def __repr__(self):
        lines = [f"ConfigSpace (len={len(self)}):"]
        for i, (name, space) in enumerate(self.space_map.items()):
            lines.append(f"  {i:2d} {name}: {space}")
        return "\n".join(lines)

    __str__ = __repr__


class ConfigEntity(_ConfigBase):
    """One config: a chosen entity per knob. ``cfg[name]`` is the entity (``.apply`` /
    ``.size`` / ``.val``); ``cfg.index`` its index in the ``space``. ``entity_map`` maps
    each knob's name to its entity; configs come from ``ConfigSpace.get(index)``."""

    def __init__(self, index, entity_map, space=None):
        self.index = index
        self._entity_map = entity_map
        self.space = space

    def _defined(self, name):
        return True  # the knob was declared when the space was collected

    def __contains__(self, name) -> bool:
        """Whether the config has knob ``name`` (its template declared it)."""
        return name in self._entity_map

    def __getitem__(self, name):
        try:
            return self._entity_map[name]
        except KeyError:
            raise ConfigError(
                f"knob {name!r} is not in this config (knobs: {list(self._entity_map)})"
            ) from None

    def get_flatten_feature(self) -> list[float]:
        """Knob values as numbers (used by tuners that search the space directly)."""
        out = []
        for e in self._entity_map.values():
            if isinstance(e, SplitEntity):
                out.extend(float(x) for x in e.size)
            elif isinstance(e, ReorderEntity):
                out.extend(float(x) for x in e.perm)
            elif isinstance(e, AnnotateEntity):
                out.extend(float(_ANNOTATIONS.index(a)) for a in e.anns)
            else:
                v = e.val
                out.append(float(v) if isinstance(v, (int, float)) else float(hash(v) % 997))
        return out

    def to_json(self) -> dict:
        return {name: e.to_json() for name, e in self._entity_map.items()}

    def __eq__(self, other):
        return isinstance(other, ConfigEntity) and self.to_json() == other.to_json()

    def __hash__(self):
        return hash(self.index)

    def __repr__(self):
        knobs = ", ".join(f"{k}={v!r}" for k, v in self._entity_map.items())
        return f"Config#{self.index}({knobs})"

    __str__ = __repr__


class FallbackConfigEntity(ConfigSpace):
    """The config used when no tuning record matches: each knob is recorded as it is
    defined and takes a default (a split's innermost part near 16 iterations, the
    identity order, vectorizing the last axis, a knob's first value). Templates refine the
    defaults with ``fallback_split`` / ``fallback_knob`` under ``if cfg.is_fallback``."""

    is_fallback = True

    def __init__(self):
        super().__init__()
        self._choice: dict[str, int] = {}

    def _add(self, name, space):
        super()._add(name, space)
        self._choice[name] = _default_choice(space)

    def __getitem__(self, name):
        if name not in self.space_map:
            raise ConfigError(f"knob {name!r} is not defined; define it before using it")
        return self.space_map[name].entities[self._choice[name]]

    def fallback_split(self, name, constraints):
        """Pick the candidate of split knob ``name`` matching ``constraints`` (one size per
        part, ``-1`` = any) best: every constrained size equal if possible, else the one
        closest to the constraint (in log scale)."""
        space = self.space_map.get(name)
        if not isinstance(space, SplitSpace):
            raise ConfigError(f"fallback_split: {name!r} is not a split knob")
        if len(constraints) != space.num_outputs:
            raise ConfigError(
                f"fallback_split {name!r}: {len(constraints)} constraints for "
                f"{space.num_outputs} parts"
            )

        def distance(e):
            d = 0.0
            for want, got in zip(constraints, e.size):
                if want == -1:
                    continue
                got = got if got > 0 else space.extent
                d += abs(math.log2(max(got, 1)) - math.log2(max(want, 1)))
            return d

        best = min(range(len(space)), key=lambda i: (distance(space.entities[i]), i))
        self._choice[name] = best

    def fallback_knob(self, name, value):
        """Set the fallback value of ``define_knob`` ``name`` (must be a candidate)."""
        space = self.space_map.get(name)
        if space is None:
            raise ConfigError(f"fallback_knob: {name!r} is not defined")
        i = _entity_from_json(space, value)
        if i is None:
            raise ConfigError(f"fallback_knob {name!r}: {value!r} is not a candidate")
        self._choice[name] = i

    def fallback_reorder(self, name, perm):
        space = self.space_map[name]
        i = _entity_from_json(space, list(perm))
        if i is None:
            raise ConfigError(f"fallback_reorder {name!r}: {list(perm)} is not a candidate")
        self._choice[name] = i

    fallback_annotate = fallback_reorder

    @property
    def index(self) -> int:
        return self.index_of([self._choice[n] for n in self.space_map])

    def to_json(self) -> dict:
        return {n: self[n].to_json() for n in self.space_map}

    def __repr__(self):
        knobs = ", ".join(f"{k}={self[k]!r}" for k in self.space_map)
        return f"FallbackConfig({knobs})"

    __str__ = __repr__


def _default_choice(space) -> int:
    if isinstance(space, SplitSpace):
        # Innermost part near 16 iterations (a vector of fp32 lanes, or a short unroll),
        # middle parts 1: a tiling a CPU handles well without knowing anything else.
        def score(e):
            inner = e.size[-1] if e.size[-1] > 0 else space.extent
            mids = e.size[1:-1]
            return (abs(math.log2(inner) - 4.0), sum(mids), e.size)

        return min(range(len(space)), key=lambda i: score(space.entities[i]))
    if isinstance(space, AnnotateSpace):
        want = tuple(["none"] * (len(space.entities[0].anns) - 1) + ["vec"])
        for i, e in enumerate(space.entities):
            if e.anns == want:
                return i
        return 0
    return 0
