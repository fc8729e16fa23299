"""The tuning knobs of row-wise kernels: reductions and normalizations (softmax,
log_softmax, layer / RMS / instance norm) scheduled one row of the parallel loop at a time.

A memory-bound kernel has few choices that matter, and all of them are about one row:
how many rows one parallel task takes, how many vector registers of partial results
the reduction over a row keeps (independent accumulators hide the add's latency), how
far the loop over those registers is unrolled, how wide the output's vector chunk is,
whether a row's statistics are computed inside the row loop (the row is still in cache
when the output reads it) or as loop nests of their own before it, how many rows ahead
that row loop fetches its inputs (or leaves them to the hardware's prefetchers), whether
it hints those fetches as streaming (``prefetchnta``: read once, kept out of the outer
caches), whether it also fetches the lines its output will write rows ahead
(``prefetchw``), and whether a reduction vectorized over its output accumulates in a
local buffer (``cache_write``). Which of these pays differs between CPUs (the output's
prefetch made a softmax of 4096 x 1024 1.16x as fast on 2 Zen 5 cores and slower on 2
Zen 4 cores), which is what the tuner is for.

:func:`define_row_knobs` declares them on a config; every knob's first candidate is the
schedule the library had before it was tunable. A fallback config (no tuning record),
like a schedule called without a config, takes those, except for a reduction over the
innermost axis, whose untuned choice is :data:`UNTUNED_INNER_REDUCTION`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .knob_choice import declare_knobs

#: Rows of the fused parallel loop one task runs (a split of that loop; 1: no split).
ROWS_PER_TASK = (1, 2, 4, 8, 16)
#: Vector registers of partial results of a reduction over the innermost axis (the
#: ``rfactor`` lanes are this many times the target's lanes; 8 fits AVX-512's 32
#: registers beside the row's other values, and spills on 16).
REDUCE_VECTORS = (1, 2, 4, 8)
#: Unroll factor of the loop over a row's vectors of partial results.
REDUCE_UNROLL = (1, 2, 4, 8)
#: Vector registers in one chunk of the output's vectorized loop.
OUTPUT_VECTORS = (1, 2, 4, 8)
#: Rows ahead a normalization's row loop fetches the inputs its row buffers read from
#: memory (and its output's lines, with ``prefetch_output``), for rows of at least
#: ``cpu_schedule.PREFETCH_ROW_BYTES``; 0: no software prefetch. The first is the untuned
#: distance: a row is read from memory by its first statistic, computed, then written,
#: and without the hints each phase waits on memory alone, where a streaming kernel
#: overlaps them (softmax 4096 x 1024 on 2 Zen 3 cores: 0.66 -> 0.53 ns per element;
#: layer norm of that shape on 2 Zen 5 cores: 0.48-0.51 -> 0.36 ms).
PREFETCH_ROWS = (2, 1, 4, 8, 0)
#: Whether a normalization's row loop prefetches its output rows ahead for writing.
PREFETCH_OUTPUT = (True, False)
#: Whether its input prefetches are hinted as streaming (``prefetchnta`` on x86).
PREFETCH_STREAMING = (False, True)


@dataclass(frozen=True)
class RowKnobs:
    """One choice of the row knobs (the defaults: the untuned schedule).

    Attributes
    ----------
    rows_per_task : int
        The fused parallel row loop is split by this factor, the outer part parallel.
    reduce_vectors : int
        ``rfactor`` lanes of a reduction over the innermost axis, in vector registers.
    reduce_unroll : int
        Unroll of the loop over those registers (the reduction's outer loop).
    output_vectors : int
        The output's vectorized chunk, in vector registers.
    stats_in_row : bool
        Statistics computed inside the row loop (``compute_at``); else each is a loop
        nest of its own, parallel over its rows, before the output's.
    prefetch_rows : int
        Rows ahead the row loop fetches its inputs (for long rows,
        :data:`.cpu_schedule.PREFETCH_ROW_BYTES`; 0: not at all).
    prefetch_output : bool
        A row loop that fetches its inputs rows ahead also fetches the output's lines
        it will write, as far ahead.
    prefetch_streaming : bool
        The input prefetches are streaming hints (lines read once).
    local_accumulator : bool
        A reduction vectorized over its inner output axes accumulates one vector chunk in
        a local buffer (``cache_write``), copied to the output once the chunk is reduced,
        instead of updating the output in memory at every point of its reduced axes.
    """

    rows_per_task: int = ROWS_PER_TASK[0]
    reduce_vectors: int = REDUCE_VECTORS[0]
    reduce_unroll: int = REDUCE_UNROLL[0]
    output_vectors: int = OUTPUT_VECTORS[0]
    stats_in_row: bool = True
    prefetch_rows: int = PREFETCH_ROWS[0]
    prefetch_output: bool = PREFETCH_OUTPUT[0]
    prefetch_streaming: bool = PREFETCH_STREAMING[0]
    local_accumulator: bool = False


#: The knobs' first candidates.
DEFAULT_ROW_KNOBS = RowKnobs()

#: A fallback config's choice for a kernel reducing over its innermost axis (softmax,
#: layer / RMS norm, a reduction over the last axis): two vectors of partial results,
#: the loop over them unrolled twice (four add chains in flight, where one leaves the
#: adder waiting on its latency at every vector), and output chunks of two vectors.
#: Measured on 2 Zen 3 cores (AVX2), ms, against the first candidates: softmax 4096 x
#: 1024 2.2-2.7 vs 3.1-3.6 (exponentials computed once), 512 x 128 0.040 vs 0.045;
#: layer norm 4096 x 1024 1.34 vs 1.75-1.80.
UNTUNED_INNER_REDUCTION = {"output_vectors": 2, "reduce_vectors": 2, "reduce_unroll": 2}

#: A fallback config's output chunk, in vector registers, where the kernel computes a long
#: chain of dependent instructions per element (an exponential is about 20 deep): four
#: chains in flight keep the FMA units busy where two leave them waiting. Softmax 4096 x
#: 1024, 1 Zen 3 core: 0.95 -> 0.81 ns per element (8 registers spill on AVX2: 0.84).
UNTUNED_LONG_CHAIN_VECTORS = 4

#: A fallback config's choice for a normalization: its output lines are not fetched
#: ahead. On 2 Zen 4 cores (4096 x 1024, paired against the same kernel with them
#: fetched) softmax ran 1.04x and layer norm 1.2-1.3x as fast without, and the output's
#: prefetch alone made the softmax 1.3x as slow (why was not profiled further).
UNTUNED_PREFETCH_OUTPUT = False


def define_row_knobs(cfg, *, rfactor: bool = True, statistics: bool = True,
                     accumulator: bool = False, long_chains: bool = False) -> RowKnobs:
    """Declare the row knobs that matter for a kernel on ``cfg`` and return its choice.

    Parameters
    ----------
    cfg : ConfigSpace, ConfigEntity, FallbackConfigEntity or None
        The schedule's config in any of the autotuner's modes; ``None`` (a schedule
        called outside the strategy) takes what a fallback config takes.
    rfactor : bool
        The kernel has a reduction over its innermost axis (vectorized through
        ``rfactor``): ``reduce_vectors`` and ``reduce_unroll`` are knobs.
    statistics : bool
        An output reads a reduction it could compute in its row loop: ``stats_in_row``,
        ``prefetch_rows``, ``prefetch_output`` (:data:`UNTUNED_PREFETCH_OUTPUT` untuned)
        and ``prefetch_streaming`` are knobs.
    accumulator : bool
        A reduction of the kernel is laid out at root and vectorized over its inner
        output axes (a pool, a reduction over outer axes): ``local_accumulator`` is a knob.
    long_chains : bool
        The kernel's vector loops compute a function that is a long chain of dependent
        instructions (an exponential, tanh, erf): the untuned output chunk is
        :data:`UNTUNED_LONG_CHAIN_VECTORS` registers.

    Returns
    -------
    RowKnobs
        The config's values (the defaults for the knobs not declared); a fallback
        config's are the defaults (each knob's first candidate), but for ``rfactor``
        :data:`UNTUNED_INNER_REDUCTION`'s and for ``long_chains`` the output chunk above.
    """
    untuned = dict(UNTUNED_INNER_REDUCTION) if rfactor else {}
    if long_chains:
        untuned["output_vectors"] = UNTUNED_LONG_CHAIN_VECTORS
    if statistics:
        untuned["prefetch_output"] = UNTUNED_PREFETCH_OUTPUT
    if cfg is None:
        return RowKnobs(**untuned)
    knobs = {"rows_per_task": ROWS_PER_TASK, "output_vectors": OUTPUT_VECTORS}
    if rfactor:
        knobs.update(reduce_vectors=REDUCE_VECTORS, reduce_unroll=REDUCE_UNROLL)
    if statistics:
        knobs["stats_in_row"] = (True, False)
        knobs["prefetch_rows"] = PREFETCH_ROWS
        knobs["prefetch_output"] = PREFETCH_OUTPUT
        knobs["prefetch_streaming"] = PREFETCH_STREAMING
    if accumulator:
        knobs["local_accumulator"] = (False, True)
    chosen = declare_knobs(cfg, knobs)
    if getattr(cfg, "is_fallback", False):
        for name, value in untuned.items():
            cfg.fallback_knob(name, value)
            chosen[name] = value
    return RowKnobs(**chosen)
