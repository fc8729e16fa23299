"""Measurements the machine disturbed: how to tell them from a kernel's own speed.

Timings drift by ±20% on a shared machine (docs/measuring.md); that is noise the median
and the interleaved final re-measurement absorb. A disturbed measurement is different: the
kernel waited for the CPU (another process held a core, and the parallel loop's threads
waited out scheduler ticks), and its figure says how long, not how fast the kernel is. One
log showed every kernel of a MobileNetV2 at 7–10 ms in whole milliseconds during the final
re-measurement, among them a dense layer that runs in 0.07 ms. Three signs, each far
outside drift:

- the repeats of one measurement disagree so that their median is more than
  :data:`SPREAD_LIMIT` times the fastest (half of them or more were slowed: one slow batch
  the median absorbs is not a sign);
- a re-measurement is more than :data:`FAR_OFF_LIMIT` times the trial's own figure for the
  same config;
- every repeat is a whole number of scheduler ticks (:data:`TICKS`), while the kernel's
  trial figure is far below one tick, or the repeats sit on different multiples.

:func:`disturbance` names the sign it sees. The runner measures a disturbed candidate
again (a bounded number of times); a measurement still disturbed is written with its
reason (``MeasureResult.disturbed``) and never chosen as a task's best.
"""

from __future__ import annotations

import statistics

#: The median repeat over the fastest beyond which repeats disagree: drift moves them by
#: ±20%, a preempted batch by whole time slices.
SPREAD_LIMIT = 2.0

#: A re-measurement this many times the trial's own figure (or more) was disturbed.
FAR_OFF_LIMIT = 3.0

#: Scheduler tick lengths in seconds: 1 ms (HZ=1000) and 4 ms (HZ=250).
TICKS = (1e-3, 4e-3)

#: How close to a whole number of ticks a repeat must be, as a fraction of the tick
#: (the kernel's own time rides on the ticks it waited).
TICK_TOLERANCE = 0.1

#: A trial figure below this fraction of a tick cannot take whole ticks by itself.
SMALL_KERNEL = 0.25


def _tick_multiples(costs, tick: float) -> list | None:
    """The multiple of ``tick`` each cost sits on, or None when one does not sit on any."""
    multiples = []
    for c in costs:
        k = round(c / tick)
        if k < 1 or abs(c - k * tick) > TICK_TOLERANCE * tick:
            return None
        multiples.append(k)
    return multiples


def disturbance(costs, trial_cost: float | None = None) -> str:
    """Why the repeats ``costs`` (seconds) of one measurement look disturbed, or ``""``.

    Parameters
    ----------
    costs : sequence of float
        The measurement's repeats, seconds per call.
    trial_cost : float, optional
        The trial's own figure for the same config, when ``costs`` re-measure it.

    Returns
    -------
    str
        The sign seen (repeats that disagree, far off the trial, whole ticks), or ``""``.

    Examples
    --------
    >>> disturbance([0.0080, 0.0080, 0.0100, 0.0080, 0.0070], trial_cost=0.00007)
    'whole scheduler ticks: every repeat a multiple of 1 ms while the trial took 0.07 ms'
    >>> disturbance([0.00101, 0.00099, 0.00104])
    ''
    """
    costs = [float(c) for c in costs]
    if not costs or min(costs) <= 0:
        return ""
    trial_small = [t for t in TICKS if trial_cost is not None and trial_cost < SMALL_KERNEL * t]
    for tick in TICKS:
        multiples = _tick_multiples(costs, tick)
        if multiples is None:
            continue
        if tick in trial_small:
            return (f"whole scheduler ticks: every repeat a multiple of {tick * 1e3:g} ms "
                    f"while the trial took {trial_cost * 1e3:.2g} ms")
        if len(set(multiples)) > 1:
            return (f"whole scheduler ticks: the repeats sit on {sorted(set(multiples))} "
                    f"x {tick * 1e3:g} ms")
    spread = statistics.median(costs) / min(costs)
    if spread > SPREAD_LIMIT:
        return f"repeats disagree: the median {spread:.1f}x the fastest"
    if trial_cost is not None and trial_cost > 0:
        off = statistics.median(costs) / trial_cost
        if off > FAR_OFF_LIMIT:
            return f"{off:.1f}x the trial's own figure ({trial_cost * 1e3:.3g} ms)"
    return ""
