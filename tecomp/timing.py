"""Paired, interleaved timing for side-by-side comparisons (benchmarks, tutorials, tuning).

The machine drifts by ±20% over seconds and thread pools keep spinning after a call, so
a benchmark never compares two numbers taken at different times: it alternates the
contenders, warms each one up untimed before its timed batch, and reports the median of
the per-round ratios.
"""

from __future__ import annotations

import statistics
import time


def _batch_seconds(fn, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def warm_up(fn, seconds: float) -> None:
    """Call ``fn`` for about ``seconds`` (at least once), untimed: its threads wake, another
    runtime's go quiet, the caches hold its data."""
    end = time.perf_counter() + seconds
    fn()
    while time.perf_counter() < end:
        fn()


def calls_per_batch(fn, target_s: float = 0.05) -> tuple[int, float]:
    """How many calls make a batch of about ``target_s`` seconds (at least one), and the
    seconds one call took."""
    t = _batch_seconds(fn, 1)
    return max(1, int(target_s / max(t, 1e-9))), t


def paired(contenders: dict, rounds: int = 7, warmup_s: float = 0.2, batch_s: float = 0.05):
    """Time each callable in ``contenders`` (name -> fn) in alternation.

    Returns name -> list of per-round seconds per call. A contender slower than a second
    per call runs one call per round and no warm-up beyond that call.
    """
    numbers, slow = {}, {}
    for name, fn in contenders.items():
        numbers[name], one_call = calls_per_batch(fn, batch_s)
        slow[name] = one_call > 1.0
    times = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            if not slow[name]:
                warm_up(fn, warmup_s)
            times[name].append(_batch_seconds(fn, numbers[name]))
    return times


def median_ratio(times_ref: list, times_ours: list) -> float:
    """Median over rounds of t_ref / t_ours (> 1 means ours is faster)."""
    return statistics.median(r / o for r, o in zip(times_ref, times_ours))
