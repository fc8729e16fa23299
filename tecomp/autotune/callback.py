"""Callbacks of ``Tuner.tune``: each is called as ``cb(tuner, inputs, results)``; one with
a ``start(tuner)`` method has it called once before the first measurement."""

from __future__ import annotations

import sys
import time

from .measure import gflops
from .result import MeasureErrorNo
from .records import LogWriter, make_record


def log_to_file(path):
    """Append every measured record to the JSON-lines log at ``path``, flushed per
    record, so a killed tuner loses nothing it finished.

    The file is opened when tuning starts (so a path that cannot be written fails before
    anything is measured) and stays open for the tuning run.
    """
    state = {"writer": None}

    def start(tuner):
        if state["writer"] is None:
            state["writer"] = LogWriter(path)

    def callback(tuner, inputs, results):
        start(tuner)
        for inp, res in zip(inputs, results):
            state["writer"].write(make_record(inp.task, inp.config, res))

    callback.start = start
    callback.path = path
    return callback


class _Progress:
    """Trials done, errors and best GFLOPS so far: a tqdm bar on a terminal, else a plain
    line every ``every`` trials (a log file gets no carriage-return redraws)."""

    def __init__(self, total, prefix, file, every=None, **tqdm_kwargs):
        self.total = total
        self.prefix = prefix
        self.file = file
        self.kw = tqdm_kwargs
        self.every = every or max(1, total // 8)
        self.bar = None
        self.tuner = None
        self.started = None
        self.trials = 0
        self.errors = 0
        self.by_kind: dict = {}
        self.first_error: dict = {}
        self.best = 0.0
        self._next_line = 0

    def _out(self):
        return self.file if self.file is not None else sys.stderr

    def start(self, tuner):
        """Called by ``Tuner.tune`` before the first measurement: the bar's clock starts
        here and it counts the trials resumed from a log as done."""
        self.best = tuner.best_flops
        self._open(tuner)

    def _open(self, tuner):
        self.tuner = tuner
        self.started = time.perf_counter()
        self.trials = min(tuner.n_resumed, self.total)
        self._next_line = self.trials + self.every
        out = self._out()
        if hasattr(out, "isatty") and out.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, desc=self.prefix, unit="trial", file=out,
                            initial=self.trials, dynamic_ncols=True, **self.kw)

    def __call__(self, tuner, inputs, results):
        if self.tuner is None:  # called by a loop that has no start hook
            self.start(tuner)
        n = self._count(inputs, results)
        for r in results:
            if r.stage == "trial" and r.ok:
                self.best = max(self.best, gflops(tuner.task.flop, r.cost))
        if not n:  # the final re-measurement
            self.best = tuner.best_flops
            self._show(f"best {self.best:.1f} GFLOPS (re-measured)", force=True)
            return
        self._show(f"errors {self.errors}, best {self.best:.1f} GFLOPS",
                   force=self.trials >= self.total)

    def _count(self, inputs, results) -> int:
        """Count the trials among ``results`` and their errors, advance the bar; returns
        how many trials there were (0 for a final re-measurement)."""
        trials = 0
        for inp, r in zip(inputs, results):
            if r.stage != "trial":
                continue
            trials += 1
            if r.error_no != MeasureErrorNo.NO_ERROR:
                self.errors += 1
                kind = MeasureErrorNo(r.error_no).name
                self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
                self.first_error.setdefault(kind, (inp.config, r.error_msg))
        if trials:
            self.trials = min(self.trials + trials, self.total)
            if self.bar is not None:
                self.bar.update(self.trials - self.bar.n)
        return trials

    def _show(self, status, force=False):
        if self.bar is not None:
            self.bar.set_postfix_str(status)
            self.bar.refresh()
            return
        if not force and self.trials < self._next_line:
            return
        while self._next_line <= self.trials:
            self._next_line += self.every
        elapsed = time.perf_counter() - self.started
        print(f"{self.prefix + ': ' if self.prefix else ''}{self.trials}/{self.total} trials, "
              f"{status}, {elapsed:.0f} s", file=self._out(), flush=True)

    def close(self):
        """Close the bar and, if tuning stopped before its budget, say why."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        reason = getattr(self.tuner, "stop_reason", "")
        if reason and reason != "budget" and self.trials < self.total:
            print(f"{self.prefix + ': ' if self.prefix else ''}stopped after {self.trials} of "
                  f"{self.total} trials: {reason}", file=self._out(), flush=True)


def progress_bar(total: int, prefix: str = "", file=None, every: int | None = None,
                 **tqdm_kwargs):
    """Progress of a tuning run of ``total`` trials: errors and the best GFLOPS so far.

    On a terminal it is a tqdm bar; otherwise (a log file, a pipe) it prints one plain
    line every ``every`` trials (default: an eighth of ``total``). ``.close()`` ends it
    and, when the run stopped early (early stopping, an exhausted space), prints why.
    The callback also counts errors by kind (``.by_kind``) and keeps the first error
    message of each kind (``.first_error``).

    Parameters
    ----------
    total : int
        The trial budget.
    prefix : str, optional
        A label in front of the bar or line.
    file : file-like, optional
        Where to write (default: standard error).
    every : int, optional
        Trials between plain lines when ``file`` is not a terminal.

    Returns
    -------
    callable
        A ``Tuner.tune`` callback with ``start(tuner)`` and ``close()``.
    """
    return _Progress(total, prefix, file, every=every, **tqdm_kwargs)


class _ModelProgress(_Progress):
    """Progress of a ``TaskScheduler``: trials of all tasks and the estimated latency of
    the model's tunable kernels (``TaskScheduler.estimated_latency``)."""

    def start(self, scheduler):
        self._open(scheduler)

    def __call__(self, scheduler, inputs, results):
        if self.tuner is None:
            self.start(scheduler)
        trials = self._count(inputs, results)
        task = inputs[0].task if inputs else None
        latency = scheduler.estimated_latency() * 1e3
        if not trials:
            self._show(f"{task.name} re-measured, tuned kernels {latency:.3f} ms", force=True)
            return
        self._show(f"errors {self.errors}, tuned kernels {latency:.3f} ms (last: "
                   f"{task.name})", force=self.trials >= self.total)


def model_progress_bar(total: int, prefix: str = "", file=None, every: int | None = None,
                       **tqdm_kwargs):
    """Progress of a ``TaskScheduler.tune`` run of ``total`` trials over all tasks: errors
    and the estimated time of the model's tunable kernels, as :func:`progress_bar` shows
    one task's (a tqdm bar on a terminal, else a plain line every ``every`` trials).
    ``prefix`` labels the bar or line, ``file`` is where it writes (default: standard
    error) and ``tqdm_kwargs`` go to tqdm.

    Returns
    -------
    callable
        A ``TaskScheduler.tune`` callback with ``start(scheduler)`` and ``close()``.
    """
    return _ModelProgress(total, prefix, file, every=every, **tqdm_kwargs)
