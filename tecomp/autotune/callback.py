"""Callbacks of ``Tuner.tune``: each is called as ``cb(tuner, inputs, results)``."""

from __future__ import annotations

from .measure import MeasureErrorNo, gflops
from .records import LogWriter, make_record


def log_to_file(path):
    """Append every measured record to the JSON-lines log at ``path``, flushed per
    record, so a killed tuner loses nothing it finished.

    The file is opened on the first batch and stays open for the tuning run.
    """
    state = {"writer": None}

    def callback(tuner, inputs, results):
        if state["writer"] is None:
            state["writer"] = LogWriter(path)
        for inp, res in zip(inputs, results):
            state["writer"].write(make_record(inp.task, inp.config, res))

    callback.path = path
    return callback


class _Progress:
    """A tqdm bar: trials done, errors, best GFLOPS so far (and ETA from tqdm)."""

    def __init__(self, total, prefix, file, **tqdm_kwargs):
        self.total = total
        self.prefix = prefix
        self.file = file
        self.kw = tqdm_kwargs
        self.bar = None
        self.trials = 0
        self.errors = 0
        self.by_kind: dict = {}
        self.first_error: dict = {}
        self.best = 0.0

    def __call__(self, tuner, inputs, results):
        from tqdm.auto import tqdm

        if self.bar is None:
            self.bar = tqdm(total=self.total, desc=self.prefix, unit="trial", file=self.file,
                            initial=min(tuner.n_resumed, self.total), dynamic_ncols=True,
                            **self.kw)
            self.best = tuner.best_flops
        trials = [r for r in results if r.stage == "trial"]
        for inp, r in zip(inputs, results):
            if r.stage != "trial":
                continue
            if r.error_no != MeasureErrorNo.NO_ERROR:
                self.errors += 1
                kind = MeasureErrorNo(r.error_no).name
                self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
                self.first_error.setdefault(kind, (inp.config, r.error_msg))
            else:
                self.best = max(self.best, gflops(tuner.task.flop, r.cost))
        self.trials += len(trials)
        if not trials:  # the final re-measurement
            self.best = tuner.best_flops
            self.bar.set_postfix_str(f"best {self.best:.1f} GFLOPS (re-measured)")
            self.bar.refresh()
            return
        self.bar.update(min(len(trials), self.total - self.bar.n))
        self.bar.set_postfix_str(f"errors {self.errors}, best {self.best:.1f} GFLOPS")

    def close(self):
        if self.bar is not None:
            self.bar.close()


def progress_bar(total: int, prefix: str = "", file=None, **tqdm_kwargs):
    """A progress bar (tqdm) of ``total`` trials showing errors and the best GFLOPS.

    The returned callback also counts errors by kind (``.by_kind``) and keeps the first
    error message of each kind (``.first_error``), and has ``.close()``.
    """
    return _Progress(total, prefix, file, **tqdm_kwargs)
