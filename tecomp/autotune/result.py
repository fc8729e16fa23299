"""What measuring one candidate gives: the closed error enum, the input and the result.

These are plain records shared by the measurement machinery (``measure``), the tuning
log (``records``) and the tuners, so they live below all three.
"""

from __future__ import annotations

import enum
import statistics
from dataclasses import dataclass


class MeasureErrorNo(enum.IntEnum):
    """Outcome of measuring one candidate (written to logs by value and name)."""

    NO_ERROR = 0
    INSTANTIATION_ERROR = 1   # the template raised for this config
    COMPILE_ERROR = 2         # lowering or code generation failed
    RUNTIME_ERROR = 3         # the candidate crashed (e.g. segfault) or raised when run
    WRONG_ANSWER = 4          # check_correctness: output differs from the reference
    TIMEOUT = 5               # build or run exceeded its timeout (message says which)
    UNKNOWN_ERROR = 6


@dataclass(frozen=True)
class MeasureInput:
    """What to measure: a task and one config of its space."""

    task: object
    config: object

    @property
    def target(self) -> str:
        return self.task.target


@dataclass(frozen=True)
class MeasureResult:
    """How it went. ``costs`` are seconds per run, one per timed batch (empty on error);
    ``error_no`` is a :class:`MeasureErrorNo` and ``error_msg`` its message; ``all_cost``
    is the wall time of building and measuring, ``timestamp`` when it was measured (Unix
    seconds); ``stage`` is "trial" or "final" (the interleaved re-measurement at the end
    of tuning); ``disturbed`` says why the machine, not the kernel, set its costs (the
    sign :func:`tecomp.autotune.disturbance.disturbance` saw after the runner re-measured
    it), ``""`` for a sound measurement."""

    costs: tuple
    error_no: MeasureErrorNo
    error_msg: str = ""
    all_cost: float = 0.0
    timestamp: float = 0.0
    stage: str = "trial"
    disturbed: str = ""

    @property
    def ok(self) -> bool:
        return self.error_no == MeasureErrorNo.NO_ERROR

    @property
    def sound(self) -> bool:
        """Succeeded, and its costs are the kernel's own (may be chosen as a best)."""
        return self.ok and bool(self.costs) and not self.disturbed

    @property
    def cost(self) -> float:
        """Median cost in seconds (inf when the candidate failed)."""
        if not self.ok or not self.costs:
            return float("inf")
        return statistics.median(self.costs)
