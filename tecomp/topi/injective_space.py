"""The tuning knobs of injective kernels (elementwise chains, broadcasts, transposes,
layout transforms, concatenations, pads), generated from the group's computes.

An injective kernel does one pass over its output, so what can be chosen is how that pass
is cut up, and the rules that say which choices exist read the computes as Ansor's
sketch rules do:

- the outer data axes (all but the trailing ones a vector needs) are fused into the
  parallel loop: how many of them (``parallel_axes``; 0 fuses the vector chunks too,
  as a small kernel does) and how many iterations one parallel task takes (``grain``);
- the innermost axes are split for vector lanes, one or two registers wide
  (``vectors``);
- the loop around one vector (a middle axis) is unrolled by ``unroll``;
- whether the parallel loop runs on the cores at all (``parallel``: small kernels pay
  more in fork/join than they save);
- a layout transform into a block of lanes (NCHW to NCHW[16]c, perhaps after a channel
  shuffle) is computed in blocks of rows transposed in registers, or vectorized along the
  lanes as written (``transpose``);
- an injective producer read by broadcast (a ``sigmoid`` over ``[N, C, 1, 1]`` that an
  ``[N, C, H, W]`` product reads) is inlined, computing it again for every element, or
  ``materialize`` d once in a loop nest of its own.

:func:`define_injective_knobs` declares the knobs that matter for a group on a config;
every knob's first candidate is the schedule the library had before it was tunable, so
a fallback config (no tuning record) builds what an untuned build always built.
"""

from __future__ import annotations

from dataclasses import dataclass

from .knob_choice import declare_knobs

#: Vector registers in one chunk of the output's vectorized loop.
VECTORS = (1, 2)
#: Iterations of the parallel loop one task runs (a split of that loop; 1: no split).
GRAIN = (1, 2, 4, 8, 16, 32)
#: Unroll factor of the loop around one vector chunk (1: not unrolled).
UNROLL = (1, 2, 4, 8)


@dataclass(frozen=True)
class InjectiveKnobs:
    """One choice of the injective knobs; ``None`` where the untuned rule decides.

    Attributes
    ----------
    vectors : int
        The vectorized chunk, in vector registers of the output's dtype.
    parallel_axes : int or None
        Leading data axes fused into the parallel loop; 0: every axis, the vector chunks
        included, in one loop; None: the untuned rule (all outer axes when there are
        rows enough to share out, else 0).
    grain : int
        The parallel loop is split by this factor, the outer part parallel.
    unroll : int
        The loop around one vector chunk is split by this factor, the inner part
        unrolled.
    parallel : bool or None
        Whether the parallel loop runs on the cores; None: the untuned rule (a kernel of
        at least ``PARALLEL_MIN_ELEMENTS`` elements, or of a symbolic size).
    materialize : bool
        Injective producers read by broadcast are computed once, at root, instead of
        being inlined into every element that reads them.
    transpose : bool
        An output that transposes into its lanes
        (:func:`tecomp.topi.cpu_schedule.transposes_into_lanes`) is computed in blocks of
        rows transposed in registers (the other knobs then do not apply to it).
    """

    vectors: int = VECTORS[0]
    parallel_axes: int | None = None
    grain: int = GRAIN[0]
    unroll: int = UNROLL[0]
    parallel: bool | None = None
    materialize: bool = False
    transpose: bool = False


#: The untuned schedule's choice.
DEFAULT_INJECTIVE_KNOBS = InjectiveKnobs()


def define_injective_knobs(cfg, *, outer_axes: int, rows_rule: bool, parallel_rule: bool,
                           multicore: bool, broadcast_producers: bool,
                           transposing: bool = False,
                           row_axes: int | None = None) -> InjectiveKnobs:
    """Declare the injective knobs that matter for a group on ``cfg``; return its choice.

    Parameters
    ----------
    cfg : ConfigSpace, ConfigEntity, FallbackConfigEntity or None
        The schedule's config in any of the autotuner's modes; ``None`` (a schedule
        called outside the strategy) takes the defaults.
    outer_axes : int
        How many leading data axes of the output lie outside its vector block: the
        candidates of ``parallel_axes`` are ``0 .. outer_axes``.
    rows_rule : bool
        The untuned rule fuses the outer axes alone (there are rows enough to share out):
        ``parallel_axes``'s first candidate is ``row_axes``, else 0.
    parallel_rule : bool
        The untuned rule runs the kernel in parallel: ``parallel``'s first candidate.
    multicore : bool
        The target has more than one core (else ``parallel`` and ``grain`` change
        nothing and are no knobs).
    broadcast_producers : bool
        The group has injective producers read by broadcast: ``materialize`` is a knob.
    transposing : bool
        The group's output transposes into its lanes: ``transpose`` is a knob, true
        untuned.
    row_axes : int, optional
        How many of the outer axes the untuned parallel loop fuses (default: all; a
        resize keeps its output's width serial).

    Returns
    -------
    InjectiveKnobs
        The config's values; a fallback config's are each knob's first candidate, the
        untuned schedule.

    Examples
    --------
    >>> define_injective_knobs(None, outer_axes=2, rows_rule=True, parallel_rule=True,
    ...                        multicore=True, broadcast_producers=False) == InjectiveKnobs()
    True
    """
    if cfg is None:
        return InjectiveKnobs(transpose=transposing)
    default_axes = (outer_axes if row_axes is None else row_axes) if rows_rule else 0
    knobs = {
        "vectors": list(VECTORS),
        "parallel_axes": [default_axes] + [k for k in range(outer_axes, -1, -1)
                                           if k != default_axes],
        "unroll": list(UNROLL),
    }
    if multicore:
        knobs["grain"] = list(GRAIN)
        knobs["parallel"] = [parallel_rule, not parallel_rule]
    if broadcast_producers:
        knobs["materialize"] = [False, True]
    if transposing:
        knobs["transpose"] = [True, False]
    return InjectiveKnobs(**declare_knobs(cfg, knobs))
