"""Search that matters: trials each tuner needs to reach 95% of the best of N random trials.

    python benchmarks/tune_efficiency.py --random-trials 1000 --seeds 3
    python benchmarks/tune_efficiency.py --random-trials 16 --seeds 1 --tasks softmax  # a check

For each task (a 3x3 convolution, a 1x1 stride-2 convolution, a depthwise convolution, a
softmax over 4096x1024, a layer norm of that shape; ``--tasks`` picks some) and seed,
RandomTuner measures ``--random-trials`` (N) configs and XGBTuner and EvolutionTuner up to
``--budget`` (default N/4) each; the level is 95% of the best of the N random trials, and
each tuner's count is the trial at which it first measured a config at that level
(">B" if never). Printed per seed, then the median over seeds against the target (within
N/4 trials). The space of each task is printed with its size: the target is set for
spaces of at least 10^4 configs, and a smaller one is marked.

Then the cost of each guided search without any measurement: the seconds a tuner spends
per batch proposing configs and learning from results when builds and runs cost nothing,
and the part of it spent lowering candidates for their loop-IR features (the rest is the
search itself and the cost model's fits). Whatever it costs comes off the tuning
throughput (trials/min). Features are computed in this process here (a LocalBuilder
computes them on its workers), so this is an upper bound.

Run on an idle machine (docs/measuring.md): at full size it takes minutes per task and
seed. It prints the CPU it ran on; candidates run on ``--threads`` threads (default 2).
The machine's speed drifts by 10-20% over minutes, more than the 5% the comparison
resolves, so no number in it comes from a single trial sample:

- the tuners of a seed take turns, one batch each, so drift hits all alike;
- after tuning, every config any tuner measured within 10% of the best sample of the
  seed (the only ones that could reach the level) is built again and re-measured in one
  interleaved pass (``tecomp.timing.paired``, median of rounds): the counts use these
  consistent figures;
- the counts are of the configs each tuner's *search* proposed: every tuner first
  measures the template's fallback config (the same hand-picked point for all), so
  counting it would make every seed where it clears the level a tie at trial 1 that
  says nothing about the search. Its re-measured GFLOPS is printed beside each seed.
"""

from __future__ import annotations

import fair  # first: numpy's BLAS must load without OpenBLAS's overrides (fair.py)

import argparse
import statistics
import threading
import time

import numpy as np

import tecomp
from tecomp import autotune
from tecomp.autotune.measure import BuildResult, gflops
from tecomp.autotune.result import MeasureErrorNo, MeasureResult
from tecomp.timing import paired
from tecomp.topi.strategy import get_implementation

#: Configs whose trial sample is within this fraction of the seed's best sample are
#: re-measured.
NEAR_BEST = 0.9
#: A space this large or larger is one the target is set for.
LARGE_SPACE = 10_000
GUIDED = {"xgb": autotune.XGBTuner, "evo": autotune.EvolutionTuner}


def _row_task(op, shapes, attrs):
    impl = get_implementation(op, "llvm")
    return autotune.create_task(op, impl.workload(*shapes, dtype="float32", **attrs))


#: name -> (what it is, a function making the task).
TASKS = {
    "conv3x3": ("conv2d 3x3 64->64 56x56", lambda: autotune.create_task(
        "conv2d", ((1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1)))),
    "conv1x1s2": ("conv2d 1x1 stride 2 256->512 56x56", lambda: autotune.create_task(
        "conv2d", ((1, 256, 56, 56), (512, 256, 1, 1), (2, 2), (0, 0)))),
    "depthwise": ("depthwise_conv2d 3x3 144 56x56", lambda: autotune.create_task(
        "depthwise_conv2d", ((1, 144, 56, 56), (144, 1, 3, 3), (1, 1), (1, 1)))),
    "softmax": ("softmax 4096x1024", lambda: _row_task(
        "softmax", [(4096, 1024)], {"axis": 1})),
    "layer_norm": ("layer_norm 4096x1024", lambda: _row_task(
        "layer_norm", [(4096, 1024), (1024,), (1024,)], {"axis": 1})),
}


class Turns:
    """Lets tuners running in threads take turns, one batch each: the machine's speed
    drifts over minutes (docs/measuring.md), so tuners run one after the other would be
    compared in different weather. A tuner waits for its turn, measures a batch, passes."""

    def __init__(self, names):
        self.names = list(names)
        self.turn = 0
        self.done: set = set()
        self.busy = dict.fromkeys(names, 0.0)  # seconds each one held the turn
        self._since = 0.0
        self._cv = threading.Condition()

    def wait(self, name):
        with self._cv:
            self._cv.wait_for(lambda: self.names[self.turn] == name)
            self._since = time.perf_counter()

    def _advance(self, name):
        self.busy[name] += time.perf_counter() - self._since
        for _ in self.names:
            self.turn = (self.turn + 1) % len(self.names)
            if self.names[self.turn] not in self.done:
                break
        self._cv.notify_all()

    def pass_turn(self, name):
        with self._cv:
            self._advance(name)
        self.wait(name)

    def finish(self, name):
        with self._cv:
            self.done.add(name)
            self._advance(name)


def search_trials(tuner, task):
    """(config, sample GFLOPS) of each trial, in order, and the default config's entry."""
    trials, default = [], None
    for c, r in tuner.history:
        if r.stage != "trial":
            continue
        entry = (c, gflops(task.flop, r.cost) if r.ok else 0.0)
        if c.index == task.default_config.index:
            default = entry
        else:
            trials.append(entry)
    return trials, default


def remeasure(task, configs) -> dict:
    """Config index -> GFLOPS, all ``configs`` built and timed in one interleaved pass."""
    rng = np.random.default_rng(0)
    fns, arrays = {}, None
    for c in configs:
        s, args = task.instantiate(c)
        mod = tecomp.build(s, args)
        if arrays is None:
            arrays = [rng.random([int(d.value) for d in a.shape], dtype=np.float32)
                      for a in args]
        fns[c.index] = lambda mod=mod: mod(*arrays)
    times = paired(fns, rounds=5, warmup_s=0.05)
    return {i: task.flop / statistics.median(t) / 1e9 for i, t in times.items()}


def curve(trials, remeasured) -> list:
    """Best re-measured GFLOPS among the configs measured by each trial."""
    best, out = 0.0, []
    for c, _ in trials:
        best = max(best, remeasured.get(c.index, 0.0))
        out.append(best)
    return out


def tune_in_turns(tuners: dict, budgets: dict) -> Turns:
    """Run ``tuners`` (name -> tuner) for ``budgets[name]`` trials each, taking turns
    batch by batch."""
    turns = Turns(tuners)

    def run(name, tuner):
        turns.wait(name)
        try:
            tuner.tune(budgets[name], autotune.measure_option(
                autotune.LocalBuilder(timeout=10), autotune.LocalRunner(number=2, repeat=3)),
                callbacks=[lambda *_: turns.pass_turn(name)], remeasure_top=0)
        finally:
            turns.finish(name)

    threads = [threading.Thread(target=run, args=item) for item in tuners.items()]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return turns


def first_reaching(c, level):
    """The trial at which curve ``c`` reaches ``level``, or None if it never does."""
    for i, v in enumerate(c, 1):
        if v >= level:
            return i
    return None


def _count(n, budget) -> str:
    return f"{n:>6d}" if n is not None else f"{'>' + str(budget):>6s}"


def compare(task, seed: int, n_random: int, budget: int) -> dict:
    """Trials each tuner needs to reach 95% of the best of ``n_random`` random trials
    (None: not within its budget), for one seed; prints the seed's line."""
    tuners = {"random": autotune.RandomTuner(task, seed=seed),
              **{name: cls(task, seed=seed) for name, cls in GUIDED.items()}}
    budgets = {"random": n_random + 1, **dict.fromkeys(GUIDED, budget + 1)}  # + default
    turns = tune_in_turns(tuners, budgets)
    runs = {name: search_trials(tuner, task) for name, tuner in tuners.items()}
    top = max(g for trials, _ in runs.values() for _, g in trials)
    default = runs["random"][1][0]
    picked = {c.index: c for trials, _ in runs.values() for c, g in trials
              if g >= NEAR_BEST * top}
    # Each tuner's best sample too: the level comes from random's best, re-measured.
    picked.update((c.index, c) for c, _ in (max(t, key=lambda cg: cg[1])
                                            for t, _ in runs.values() if t))
    picked[default.index] = default
    remeasured = remeasure(task, list(picked.values()))
    curves = {name: curve(trials, remeasured) for name, (trials, _) in runs.items()}
    level = 0.95 * curves["random"][-1]
    reached = {name: first_reaching(c, level) for name, c in curves.items()}
    rates = {name: len(runs[name][0]) / max(turns.busy[name] / 60, 1e-9) for name in runs}
    print(f"  seed {seed}: level {level:.2f} GFLOPS (default {remeasured[default.index]:.2f})"
          + "".join(f", {name} {_count(reached[name], budgets[name] - 1).strip()}"
                    f" ({rates[name]:.0f} trials/min)" for name in runs))
    return reached


class _NoBuilder:
    """A builder that builds nothing (for timing a tuner's search alone)."""

    n_parallel = 1

    def build(self, inputs):
        return [BuildResult(f"none:{i.config.index}", (), time_cost=0.0) for i in inputs]

    def map(self, fn, jobs, timeout=None):
        return [("ok", fn(*job)) for job in jobs]

    def remove(self, path):
        pass

    def close(self):
        pass


class _MadeUpRunner:
    """Runs nothing: a config's cost is a fixed pseudo-random function of its index."""

    def run(self, inputs, builds):
        now = time.time()
        out = []
        for inp in inputs:
            c = 1e-3 * (1.0 + (inp.config.index * 2654435761 % 1000) / 1000.0)
            out.append(MeasureResult((c, c, c), MeasureErrorNo.NO_ERROR, "", 0.0, now))
        return out

    def close(self):
        pass


def search_cost(task, cls, trials: int) -> str:
    """Seconds ``cls``'s tuner spends per batch of 8 proposing and learning over
    ``trials`` trials whose builds and runs cost nothing, and how much of it went to
    lowering candidates for their features."""
    tuner = cls(task, seed=0)
    t0 = time.perf_counter()
    tuner.tune(trials, {"builder": _NoBuilder(), "runner": _MadeUpRunner()}, remeasure_top=0)
    batches = max(1, tuner.n_done / tuner.batch_size)
    return (f"{(time.perf_counter() - t0) / batches:.2f} s/batch (features of "
            f"{len(tuner._feat) / batches:.0f} configs: {tuner.feature_seconds / batches:.2f} s)")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default=",".join(TASKS),
                   help=f"comma-separated, of {', '.join(TASKS)} (default: all)")
    p.add_argument("--random-trials", type=int, default=1000,
                   help="N: the random trials whose best sets the level (default: 1000)")
    p.add_argument("--budget", type=int, default=None,
                   help="trials of each guided tuner (default: N/4)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--search-trials", type=int, default=64,
                   help="trials of the search-cost measurement (default: 64; 0: skip it)")
    fair.add_thread_option(p)
    ns = p.parse_args(argv)
    names = [t.strip() for t in ns.tasks.split(",") if t.strip()]
    unknown = [t for t in names if t not in TASKS]
    if unknown or not names:
        p.error(f"--tasks {ns.tasks!r}: unknown {unknown}; allowed: {', '.join(TASKS)}")
    if ns.random_trials < 1 or ns.seeds < 1 or (ns.budget is not None and ns.budget < 1):
        p.error("--random-trials, --budget and --seeds must be positive")
    budget = ns.budget or max(1, ns.random_trials // 4)
    fair.use_threads(ns.threads)
    fair.print_machine(ns.threads)
    print(f"trials to reach 95% of the best of {ns.random_trials} random trials "
          f"(guided tuners: up to {budget}; target: within {ns.random_trials // 4})")
    for name in names:
        what, make = TASKS[name]
        task = make()
        size = len(task.config_space)
        mark = "" if size >= LARGE_SPACE else f"  (under {LARGE_SPACE}: not a target space)"
        print(f"{name}: {what}, {size} configs{mark}")
        per_seed = [compare(task, seed, ns.random_trials, budget) for seed in range(ns.seeds)]
        cells = []
        for tuner in ("random", *GUIDED):
            counts = [r[tuner] for r in per_seed]
            cap = ns.random_trials if tuner == "random" else budget
            # A tuner that never reached the level counts as one trial past its budget.
            med = statistics.median(c if c is not None else cap + 1 for c in counts)
            cells.append(f"{tuner} {med:g}{'+' if med > cap else ''}")
        print(f"  median over {ns.seeds} seed(s): " + ", ".join(cells))
        if ns.search_trials:
            for tuner, cls in GUIDED.items():
                print(f"  {tuner} search without measuring: "
                      f"{search_cost(task, cls, ns.search_trials)}")


if __name__ == "__main__":
    main()
