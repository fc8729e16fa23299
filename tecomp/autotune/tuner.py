"""Tuners: which configs to measure next, and the loop that measures them.

Every tuner proposes batches of configs it has not proposed before (``next_batch``) and
learns from results (``update``); ``Tuner.tune`` runs the loop:

1. load earlier records (``resume_from``): their configs count as measured, never again;
2. measure the task's default (fallback) config first, so tuning never returns
   something slower than no tuning, and with it the configs of the shipped records made
   for a CPU of the same vector ISA (``records.shipped_candidates``): a good start on a
   CPU near the one they were tuned on, but only ever used once measured here; a fused
   kernel's task also measures the configs its anchor's records give (``Task.seed_tasks``);
3. build each batch in parallel, time it, pass the results to the tuner and callbacks;
4. stop after ``n_trial`` measurements, when the space is exhausted, or when
   ``early_stopping`` trials brought no improvement;
5. if this session measured anything, re-measure the best few candidates and the
   default config interleaved (``docs/measuring.md``) and declare the best from those
   measurements; they are logged with ``stage = "final"``.

A measurement the machine disturbed (``disturbance``: repeats that disagree, whole
scheduler ticks, a re-measurement far off the trial's own figure) is measured again a
bounded number of times, then kept with its reason: it teaches the cost model nothing
worse than a slow config, but it never becomes the task's best. ``n_disturbed`` counts
them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time

import numpy as np

from . import features as F
from .cost_model import SharedCostModel, XGBoostCostModel
from .disturbance import disturbance
from .evolution import REFUSED, evolve
from .measure import REMEASURE_DISTURBED, gflops
from .measure import measure_option as _default_option
from .records import _as_records, shipped_candidates, target_key
from .result import MeasureErrorNo, MeasureInput, MeasureResult
from .sa import anneal, neighbour
from .task import Task

logger = logging.getLogger("tecomp.autotune")


class Tuner:
    """Base class: bookkeeping and the measurement loop.

    Parameters
    ----------
    task : Task
    seed : int, optional
        Seed of the tuner's random choices.
    batch_size : int, optional
        Configs measured per round (default 8).
    """

    def __init__(self, task, seed: int | None = None, batch_size: int = 8):
        self.task = task
        self.space = task.config_space
        self.rng = np.random.default_rng(seed)
        self.batch_size = max(1, int(batch_size))
        self.visited: set[int] = set()  # proposed or measured: never proposed again
        self.measured: set[int] = set()
        self.best_config = None
        self.best_flops = 0.0
        self.best_result = None
        self.history: list = []  # (config, result) measured by this tuner (all sessions)
        self.n_resumed = 0
        self.n_done = 0  # trials of this task, resumed ones included
        self.stop_reason = ""
        self._pending: list = []  # first candidates not measured yet
        # The builds of the candidates the final re-measurement will time (config index
        # -> BuildResult), kept from their trials so that they are not compiled twice.
        self._kept: dict = {}
        self._keep_top = 0

    @property
    def n_trials(self) -> int:
        """Trials in ``history``: this session's and resumed ones, not final ones."""
        return sum(1 for _c, r in self.history if r.stage == "trial")

    @property
    def n_invalid(self) -> int:
        """Trials in ``history`` whose program failed to instantiate, build or run:
        invalid programs, as opposed to slow ones."""
        return sum(1 for _c, r in self.history if r.stage == "trial" and not r.ok)

    @property
    def invalid_rate(self) -> float:
        """``n_invalid`` over ``n_trials`` (0 before any)."""
        return self.n_invalid / self.n_trials if self.n_trials else 0.0

    @property
    def n_disturbed(self) -> int:
        """Measurements in ``history`` (trials and final ones) the machine disturbed even
        after re-measuring: kept with their reason, never the best."""
        return sum(1 for _c, r in self.history if r.disturbed)

    # -- to override -------------------------------------------------------------------------

    def next_batch(self, n: int) -> list:
        """Up to ``n`` configs not measured before."""
        raise NotImplementedError

    def update(self, inputs, results) -> None:
        """Learn from measured ``inputs`` / ``results``."""

    def has_next(self) -> bool:
        return len(self.visited) < len(self.space)

    # -- shared helpers ----------------------------------------------------------------------

    def _random_unvisited(self, n: int, taken: set) -> list[int]:
        size = len(self.space)
        out: list[int] = []
        blocked = self.visited | taken
        if size - len(blocked) <= 4 * n or size <= 4096:
            free = [i for i in range(size) if i not in blocked] if size <= 1 << 20 else []
            if free:
                pick = self.rng.choice(len(free), size=min(n, len(free)), replace=False)
                return [free[int(i)] for i in pick]
        tries = 0
        while len(out) < n and tries < 100 * n:
            i = int(self.rng.integers(size))
            tries += 1
            if i not in blocked:
                blocked.add(i)
                out.append(i)
        return out

    def _record(self, config, result) -> None:
        self.visited.add(config.index)
        if result.stage == "trial":
            self.measured.add(config.index)
        self.history.append((config, result))
        if result.sound:
            fl = gflops(self.task.flop, result.cost)
            if fl > self.best_flops:
                self.best_flops, self.best_config, self.best_result = fl, config, result

    def load_history(self, records) -> int:
        """Take in earlier records of this task (a log path or Records): their configs
        count as measured and feed ``update``. Returns how many were taken."""
        mine = self._records_of_task(_as_records(records))
        inputs, results = [], []
        for r in mine:
            try:
                cfg = self.space.from_json(r.knobs, r.config_index)
            except Exception:  # noqa: BLE001 - a record of an older space
                continue
            if r.result.stage != "trial" or cfg.index in self.measured:
                continue
            self._record(cfg, r.result)
            inputs.append(MeasureInput(self.task, cfg))
            results.append(r.result)
        if inputs:
            self.update(inputs, results)
        self.n_resumed += len(inputs)
        return len(inputs)

    def _records_of_task(self, records) -> list:
        key = target_key(self.task.target)
        return [
            r for r in records
            if r.name == self.task.name and r.args in self.task.workload_forms
            and r.workload_hash == self.task.workload_hash and r.target_key == key
        ]

    # -- the loop ----------------------------------------------------------------------------

    def tune(self, n_trial: int, measure_option: dict | None = None,
             early_stopping: int | None = None, callbacks=(), resume_from=None,
             remeasure_top: int = 3, remeasure_rounds: int = 5):
        """Measure up to ``n_trial`` configs; see the module docstring for the steps.

        With ``resume_from`` (a log), records of this task in it count toward
        ``n_trial`` and are never measured again; a session that finds its budget
        already spent measures nothing, not even the final re-measurement.
        ``callbacks`` are called as ``cb(tuner, inputs, results)`` after each batch (and
        for the final re-measurement); a callback with a ``start(tuner)`` method has it
        called once before the first measurement. Returns ``self``; the winner is
        ``best_config`` / ``best_flops``; ``stop_reason`` says why the loop ended.
        Ctrl-C stops the loop; records written so far stay.
        """
        option = measure_option or _default_option()
        builder, runner = option["builder"], option["runner"]
        if resume_from is not None:
            with contextlib.suppress(FileNotFoundError):
                self.load_history(resume_from)
        n_trial = int(n_trial)
        try:
            self.start(builder, callbacks, remeasure_top)
            while self.n_done < n_trial and self.measure_batch(
                    min(self.batch_size, n_trial - self.n_done), builder, runner, callbacks,
                    early_stopping):
                pass
            self.finish(builder, runner, callbacks, remeasure_top, remeasure_rounds)
        finally:
            builder.close()
            runner.close()
        return self

    def start(self, builder, callbacks=(), remeasure_top: int = 3) -> None:
        """Begin a session (after any ``load_history``): call the callbacks' ``start``
        hooks and queue the first candidates (see ``_first_candidates``). ``tune`` calls
        it; a scheduler that interleaves several tuners calls it once per tuner. The
        builds of the ``remeasure_top`` best trials and the default config's are kept
        for ``finish`` to re-measure."""
        self._builder = builder
        self._keep_top = remeasure_top if remeasure_top and remeasure_top > 1 else 0
        self.n_done = self.n_resumed
        self._best_at = self.n_done
        self._last_best = self.best_flops
        self.stop_reason = "budget"
        for cb in callbacks:
            if hasattr(cb, "start"):
                cb.start(self)
        self._pending = self._first_candidates()
        self.visited.update(c.index for c in self._pending)  # so no tuner proposes them

    def measure_batch(self, n: int, builder, runner, callbacks=(),
                      early_stopping: int | None = None) -> bool:
        """Measure up to ``n`` configs not measured before (queued first candidates
        first), learn from them and call the callbacks; ``n_done`` counts them.

        Returns False when the tuner should stop (``stop_reason`` says why: the space is
        exhausted, or ``early_stopping`` trials brought no improvement), else True.
        """
        if not self.has_next() and not self._pending:
            self.stop_reason = "space exhausted"
            return False
        configs = self._pending[:n]
        del self._pending[:n]
        seen = {c.index for c in configs}
        for c in self.next_batch(n - len(configs)):
            c = self.space.get(c) if isinstance(c, (int, np.integer)) else c
            if c.index in seen or c.index in self.measured:
                continue  # defensive: a tuner must not propose a config twice
            seen.add(c.index)
            configs.append(c)
        if not configs:
            self.stop_reason = "space exhausted"
            return False
        inputs = [MeasureInput(self.task, c) for c in configs]
        builds = builder.build(inputs)
        try:
            results = [_flag_disturbed(r) for r in runner.run(inputs, builds)]
        except BaseException:
            for b in builds:
                builder.remove(b.filename)
            raise
        for inp, res in zip(inputs, results):
            self._record(inp.config, res)
        self._keep_finalists(builder, inputs, builds)
        self.n_done += len(inputs)
        self.update(inputs, results)
        for cb in callbacks:
            cb(self, inputs, results)
        if self.best_flops > self._last_best:
            self._last_best, self._best_at = self.best_flops, self.n_done
        if early_stopping is not None and self.n_done - self._best_at >= early_stopping:
            self.stop_reason = f"no improvement in {early_stopping} trials"
            return False
        return True

    def finish(self, builder, runner, callbacks=(), remeasure_top: int = 3,
               remeasure_rounds: int = 5) -> None:
        """End a session: if it measured anything, re-measure the best ``remeasure_top``
        candidates and the default config interleaved and declare the winner from those
        samples."""
        if remeasure_top and remeasure_top > 1 and self.n_done > self.n_resumed:
            self._remeasure(builder, runner, remeasure_top, remeasure_rounds, callbacks)

    def _first_candidates(self) -> list:
        """Configs measured before any the tuner proposes: the default (fallback) config,
        then those of the shipped records of the nearest target of the same vector ISA,
        then for each seed task (a fused kernel's anchor, :meth:`Task.seed_tasks`) the
        config its records give it and its shipped candidates; each only if not measured
        yet and a point of this task's space."""
        knobs = [rec.knobs for rec in shipped_candidates(self.task)]
        for seed in self.task.seed_tasks():
            knobs.append(seed.best_config().to_json())
            knobs += [rec.knobs for rec in shipped_candidates(seed)]
        out = [self.task.default_config]
        for values in knobs:
            with contextlib.suppress(Exception):  # a record of an older space
                out.append(self.space.from_json(values))
        unique = {c.index: c for c in out if c.index not in self.measured}
        return list(unique.values())

    def _keep_finalists(self, builder, inputs, builds) -> None:
        """Keep the builds of this batch that are among the final re-measurement's
        candidates (``_finalists``); remove the others, and kept ones that dropped out."""
        wanted = ({c.index for c in self._finalists(self._keep_top)} if self._keep_top
                  else set())
        for inp, b in zip(inputs, builds):
            if inp.config.index in wanted and b.filename:
                self._kept[inp.config.index] = b
            else:
                builder.remove(b.filename)
        for index in [i for i in self._kept if i not in wanted]:
            builder.remove(self._kept.pop(index).filename)

    def _finalists(self, top: int) -> list:
        """The configs the final re-measurement times: the ``top`` best sound trials
        (disturbed ones after the sound), and the default config if it was measured."""
        # A disturbed trial may take part after the sound ones: side by side it shows
        # its real speed (and its own figure is no reference for that).
        ok = [(c, r) for c, r in self.history if r.ok and r.costs and r.stage == "trial"]
        ok.sort(key=lambda cr: (bool(cr[1].disturbed), cr[1].cost))
        picked, seen = [], set()
        for c, _r in ok:
            if c.index not in seen:
                seen.add(c.index)
                picked.append(c)
            if len(picked) == top:
                break
        default = self.task.default_config.index
        if default not in seen and any(c.index == default for c, _r in ok):
            picked.append(self.task.default_config)
        return picked

    def _remeasure(self, builder, runner, top: int, rounds: int, callbacks):
        """Re-time the best ``top`` candidates interleaved, and the default config beside
        them; the median of those samples decides the winner (a lucky trial sample never
        wins).

        The default runs in the same rounds because trials minutes apart are not
        comparable on a drifting machine: tuning ResNet-50 (2000 trials, 17 minutes),
        the best trial of 10 of its 25 kernels re-measured slower than the default's trial
        had, and the model built from the log ran 3% slower than untuned. Compared in the
        same rounds, a candidate that is not faster than the default loses to it."""
        picked = self._finalists(top)
        if len(picked) < 2:
            picked = []
        kept, self._kept = self._kept, {}
        # config index -> its build: kept from its trial, or (below) built now
        build_of = {c.index: kept.pop(c.index) for c in picked if c.index in kept}
        for b in kept.values():
            builder.remove(b.filename)
        if not picked:
            return
        trial_cost: dict = {}  # each candidate's best sound trial
        for c, r in self.history:
            if r.stage == "trial" and r.sound:
                trial_cost[c.index] = min(r.cost, trial_cost.get(c.index, r.cost))
        inputs = [MeasureInput(self.task, c) for c in picked]
        # Candidates whose trial build was not kept (resumed ones, a larger ``top``)
        # are built now.
        missing = [i for i in inputs if i.config.index not in build_of]
        build_of.update(zip((i.config.index for i in missing),
                          builder.build(missing) if missing else []))
        builds = [build_of[i.config.index] for i in inputs]
        good = [(i, b) for i, b in zip(inputs, builds) if b.filename]


        def reasons_of(samples):
            return [disturbance(s, trial_cost.get(i.config.index))
                    for (i, _b), s in zip(good, samples)]

        try:
            samples = runner.remeasure([b for _, b in good], rounds=rounds) if good else None
            reasons = reasons_of(samples) if samples else []
            # Samples far off a config's own trial are the machine's (a busy moment that
            # tick-quantised every kernel of a model): the rounds run again, a few times.
            for _ in range(REMEASURE_DISTURBED):
                if not any(reasons):
                    break
                again = runner.remeasure([b for _, b in good], rounds=rounds)
                if not again:
                    break
                samples, reasons = again, reasons_of(again)
        finally:
            for b in builds:
                builder.remove(b.filename)
        if not samples:
            return
        now = time.time()
        final_inputs, final_results = [], []
        for (inp, b), costs, reason in zip(good, samples, reasons):
            final_inputs.append(inp)
            final_results.append(MeasureResult(tuple(costs), MeasureErrorNo.NO_ERROR, "",
                                               b.time_cost, now, stage="final",
                                               disturbed=reason))
        sound = [ir for ir in zip(final_inputs, final_results) if ir[1].sound]
        if sound:  # else the best trial stands: no disturbed figure decides
            best = min(sound, key=lambda ir: ir[1].cost)
            self.best_config, self.best_result = best[0].config, best[1]
            self.best_flops = gflops(self.task.flop, best[1].cost)
        self.history.extend((i.config, r) for i, r in zip(final_inputs, final_results))
        for cb in callbacks:
            cb(self, final_inputs, final_results)


def _flag_disturbed(result: MeasureResult) -> MeasureResult:
    """``result`` with the disturbance its costs show, for runners that do not judge
    (a Dask cluster's, a user's own); LocalRunner's come judged and re-measured."""
    if not result.ok or result.disturbed:
        return result
    why = disturbance(result.costs)
    return dataclasses.replace(result, disturbed=why) if why else result


class RandomTuner(Tuner):
    """Configs of ``task`` in random order, without repetition; ``seed`` and
    ``batch_size`` are those of :class:`Tuner`."""

    def next_batch(self, n):
        picks = self._random_unvisited(n, set())
        for i in picks:
            self.visited.add(i)
        return [self.space.get(i) for i in picks]


class GridSearchTuner(Tuner):
    """Configs of ``task`` in index order, skipping measured ones; other keywords are
    those of :class:`Tuner`."""

    def __init__(self, task, **kw):
        super().__init__(task, **kw)
        self._next = 0

    def next_batch(self, n):
        out = []
        while len(out) < n and self._next < len(self.space):
            if self._next not in self.visited:
                self.visited.add(self._next)
                out.append(self.space.get(self._next))
            self._next += 1
        return out

    def has_next(self):
        return self._next < len(self.space) and len(self.visited) < len(self.space)


class GATuner(Tuner):
    """A genetic algorithm over knob choices: fitness-proportional selection of parents,
    one-point crossover of their knob digits, per-knob mutation, elitism.

    Parameters
    ----------
    task : Task
        The task to tune.
    pop_size : int
        Genes per generation.
    elite_num : int
        Best genes carried into the next generation's parents unchanged.
    mutation_prob : float
        Probability that a knob of a child is replaced by a random choice.
    **kw
        ``seed``, ``batch_size``: see :class:`Tuner`.
    """

    def __init__(self, task, pop_size: int = 32, elite_num: int = 3,
                 mutation_prob: float = 0.1, **kw):
        super().__init__(task, **kw)
        self.pop_size = min(pop_size, len(self.space))
        self.elite_num = min(elite_num, self.pop_size)
        self.mutation_prob = mutation_prob
        self._queue: list[int] = []
        self._fitness: dict[int, float] = {}

    def update(self, inputs, results):
        for inp, res in zip(inputs, results):
            self._fitness[inp.config.index] = gflops(self.task.flop, res.cost)

    def _breed(self, n):
        scored = sorted(self._fitness.items(), key=lambda kv: -kv[1])
        parents = [i for i, _ in scored[: max(self.pop_size, 2)]]
        if len(parents) < 2:
            return self._random_unvisited(n, set(self._queue))
        fit = np.array([self._fitness[i] for i in parents], dtype=np.float64)
        prob = fit / fit.sum() if fit.sum() > 0 else np.full(len(fit), 1.0 / len(fit))
        sizes = [len(s) for s in self.space.space_map.values()]
        out, taken = [], set(self._queue)
        tries = 0
        while len(out) < n and tries < 50 * n:
            tries += 1
            a, b = self.rng.choice(len(parents), size=2, replace=True, p=prob)
            da = self.space.digits_of(parents[a])
            db = self.space.digits_of(parents[b])
            cut = int(self.rng.integers(len(sizes) + 1))
            child = da[:cut] + db[cut:]
            for k, size in enumerate(sizes):
                if size > 1 and self.rng.random() < self.mutation_prob:
                    child[k] = int(self.rng.integers(size))
            idx = self.space.index_of(child)
            if idx not in self.visited and idx not in taken:
                taken.add(idx)
                out.append(idx)
        if len(out) < n:
            out += self._random_unvisited(n - len(out), taken)
        return out

    def next_batch(self, n):
        while len(self._queue) < n:
            more = self._breed(max(n, self.pop_size) - len(self._queue))
            if not more:
                break
            self._queue.extend(more)
        out = []
        while self._queue and len(out) < n:
            i = self._queue.pop(0)
            if i not in self.visited:
                self.visited.add(i)
                out.append(self.space.get(i))
        return out


class XGBTuner(Tuner):
    """Model-based tuning: an XGBoost ranking model on loop-IR features proposes, by
    simulated annealing over the space, the configs it predicts fastest; with
    probability ``epsilon`` a slot is filled at random instead (exploration). Before the
    model has its first ``min_train`` results, half the proposals are random and half
    change one knob of the best config measured so far (the fallback config at first).

    Parameters
    ----------
    task : Task
        The task to tune.
    plan_size : int
        Trials between refits of the model (and fresh annealing plans).
    epsilon : float
        Probability that a proposed config is random rather than the model's pick.
    min_train : int
        Measurements before the first fit (unless earlier records warm-start it).
    sa_chains, sa_steps : int
        Size of the annealing search per plan.
    num_boost_round : int
        Boosting rounds of each fit of the XGBoost model.
    **kw
        ``seed``, ``batch_size``: see :class:`Tuner`.
    """

    def __init__(self, task, plan_size: int = 32, epsilon: float = 0.05,
                 min_train: int = 16, sa_chains: int = 32, sa_steps: int = 24,
                 num_boost_round: int = 60, **kw):
        super().__init__(task, **kw)
        self.model = XGBoostCostModel(num_boost_round=num_boost_round,
                                      seed=int(self.rng.integers(1 << 30)))
        self.plan_size = plan_size
        self.epsilon = epsilon
        self.min_train = min_train
        self.sa_chains, self.sa_steps = sa_chains, sa_steps
        self._feat: dict[int, np.ndarray] = {}
        self._ys: dict[int, float] = {}
        self._plan: list[int] = []
        self._fitted_at = -1
        self._builder = None
        self.fit_seconds = 0.0
        self.plan_seconds = 0.0  # making plans, the features they needed included
        self.feature_seconds = 0.0  # lowering candidates for their features

    # features ------------------------------------------------------------------------------

    def features(self, indices) -> np.ndarray:
        """Feature rows of configs ``indices`` (cached; computed on the build workers
        when there are many)."""
        missing = [i for i in dict.fromkeys(int(i) for i in indices) if i not in self._feat]
        if missing:
            t0 = time.perf_counter()
            pool = self._builder
            if pool is not None and len(missing) >= 8 and getattr(pool, "n_parallel", 1) > 1:
                chunks = np.array_split(np.array(missing), pool.n_parallel * 2)
                jobs = [(self.task.name, self.task.args, self.task.target,
                         [int(x) for x in c]) for c in chunks if len(c)]
                res = pool.map(F._features_job, jobs, timeout=120)
                for (_, _, _, idx), (status, value) in zip(jobs, res):
                    for i, row in zip(idx, value if status == "ok" else []):
                        self._feat[i] = np.asarray(row, dtype=np.float32)
            for i in missing:
                if i not in self._feat:
                    self._feat[i] = F.candidate_features(self.task, self.space.get(i))
            self.feature_seconds += time.perf_counter() - t0
        return np.stack([self._feat[int(i)] for i in indices]) if len(indices) else \
            np.zeros((0, F.FEATURE_LENGTH), np.float32)

    # learning ------------------------------------------------------------------------------

    def update(self, inputs, results):
        for inp, res in zip(inputs, results):
            self._ys[inp.config.index] = gflops(self.task.flop, res.cost)
        n = len(self._ys)
        ready = n >= self.min_train or (self.model._base_xs and n >= 2)
        if ready and (self._fitted_at < 0 or n - self._fitted_at >= self.plan_size
                      or not self._plan):
            self._refit()

    def _refit(self):
        idx = list(self._ys)
        t0 = time.perf_counter()
        self.model.fit(self.features(idx), np.array([self._ys[i] for i in idx]))
        self.fit_seconds += time.perf_counter() - t0
        self._fitted_at = len(self._ys)
        self._make_plan()

    def _make_plan(self):
        if not self.model.trained:
            return
        t0 = time.perf_counter()
        best = sorted(self._ys, key=lambda i: -self._ys[i])[: self.sa_chains // 4]
        seeds = best + [neighbour(self.space, b, self.rng) for b in best]

        def score(points):
            return self.model.predict(self.features(points))

        self._plan = anneal(self.space, score, self.plan_size, self.visited, self.rng,
                            n_chains=self.sa_chains, n_steps=self.sa_steps, seeds=seeds)
        self.plan_seconds += time.perf_counter() - t0

    def next_batch(self, n):
        out: list[int] = []
        taken: set = set()
        while len(out) < n:
            pick = None
            if self.model.trained and self.rng.random() >= self.epsilon:
                while self._plan:
                    cand = self._plan.pop(0)
                    if cand not in self.visited and cand not in taken:
                        pick = cand
                        break
            if pick is None and not self.model.trained and self.rng.random() < 0.5:
                pick = self._near_best(taken)
            if pick is None:
                r = self._random_unvisited(1, taken)
                if not r:
                    break
                pick = r[0]
            taken.add(pick)
            out.append(pick)
        for i in out:
            self.visited.add(i)
        return [self.space.get(i) for i in out]

    def _near_best(self, taken: set, tries: int = 8) -> int | None:
        """An unvisited config one knob away from the best measured one (the template's
        fallback before any result: a hand-picked point that is usually good), or None.
        Until the model is trained, half the proposals come from here: the model then
        learns what separates good configs from better ones, not only bad from good."""
        anchor = (max(self._ys, key=self._ys.get) if self._ys
                  else self.task.default_config.index)
        for _ in range(tries):
            cand = neighbour(self.space, anchor, self.rng)
            if cand not in self.visited and cand not in taken:
                return cand
        return None

    # transfer learning ---------------------------------------------------------------------

    def load_history(self, records, max_per_task: int = 200) -> int:
        """Records of this task resume it (see ``Tuner.load_history``); records of other
        tasks of the same template warm-start the cost model (transfer learning)."""
        records = _as_records(records)
        taken = super().load_history(records)
        groups = [(xs, ys) for _task, _idx, xs, ys in
                  self._other_tasks(records, max_per_task)]
        if groups:
            self.model.fit_log(groups)
            if self._ys:
                self._refit()
            else:
                self._make_plan()
        return taken

    def _other_tasks(self, records, max_per_task: int) -> list:
        """``(task, config indices, feature rows, throughputs)`` of each other task of
        this template in ``records`` (its ``max_per_task`` latest trials) that still
        instantiates and has at least two usable records."""
        others: dict = {}
        for r in records:
            if r.name == self.task.name and r.args != self.task.args and r.result.stage == "trial":
                others.setdefault((r.args, r.target), []).append(r)
        out = []
        for (args, target), recs in others.items():
            try:
                other = Task(self.task.name, args, target)
                space = other.config_space
            except Exception:  # noqa: BLE001 - a task that no longer instantiates
                continue
            idx, xs, ys = [], [], []
            for r in recs[-max_per_task:]:
                try:
                    cfg = space.from_json(r.knobs)
                except Exception:  # noqa: BLE001
                    continue
                idx.append(cfg.index)
                xs.append(F.candidate_features(other, cfg))
                ys.append(gflops(other.flop, r.cost) if r.ok else 0.0)
            if len(xs) >= 2:
                out.append((other, idx, np.stack(xs), np.array(ys)))
        return out


class EvolutionTuner(XGBTuner):
    """Model-guided evolutionary search, as Ansor's: each plan breeds a population seeded
    from the best measured configs plus random ones by mutation and crossover
    (``evolution.evolve``), the cost model's predicted score selecting who survives; the
    ``plan_size`` best predicted configs not measured yet are proposed, and with
    probability ``epsilon`` a slot is filled at random instead (exploration). Until the
    model is first trained, proposals are as :class:`XGBTuner`'s.

    The cost model may be shared by the tuners of several tasks (``model``, a
    :class:`~tecomp.autotune.cost_model.SharedCostModel`; ``TaskScheduler`` shares one):
    each measurement is added to it, and a task with few measurements is searched with
    what the others taught it. A config that fails to instantiate or lower scores
    ``-inf`` and is never bred nor proposed; one that fails to build or run when measured
    enters the model as the worst of its task. ``invalid_rate`` says how many trials
    failed.

    Parameters
    ----------
    task : Task
        The task to tune.
    model : SharedCostModel, optional
        The cost model (default: one of this task alone).
    population : int
        Configs per generation, and children bred per generation.
    generations : int
        Rounds of breeding per plan.
    mutation_prob : float
        Probability that a child is a mutant rather than a crossover of two parents.
    plan_size, epsilon, min_train, num_boost_round :
        As :class:`XGBTuner`'s; ``min_train`` and ``num_boost_round`` configure the
        default model only.
    **kw
        ``seed``, ``batch_size``: see :class:`Tuner`.
    """

    def __init__(self, task, model: SharedCostModel | None = None, population: int = 32,
                 generations: int = 4, mutation_prob: float = 0.85, plan_size: int = 32,
                 epsilon: float = 0.05, min_train: int = 16, num_boost_round: int = 60, **kw):
        super().__init__(task, plan_size=plan_size, epsilon=epsilon, min_train=min_train,
                         num_boost_round=num_boost_round, **kw)
        if population < 1 or generations < 0:
            raise ValueError(f"EvolutionTuner: population={population} must be at least 1 "
                             f"and generations={generations} at least 0")
        self.model = model if model is not None else SharedCostModel(
            num_boost_round=num_boost_round, refit_every=plan_size, min_train=min_train,
            seed=int(self.rng.integers(1 << 30)))
        self.population, self.generations = population, generations
        self.mutation_prob = mutation_prob
        self._plan_version = -1  # the model's version the plan was made with
        self._planned_at = 0  # trials of this task when the plan was made

    def update(self, inputs, results):
        idx = [inp.config.index for inp in inputs]
        ys = [gflops(self.task.flop, res.cost) for res in results]  # 0 when it failed
        self._ys.update(zip(idx, ys))
        if idx:
            self.model.observe(_task_key(self.task), idx, self.features(idx), ys)

    def load_history(self, records, max_per_task: int = 200) -> int:
        """Records of this task resume it (see ``Tuner.load_history``); records of other
        tasks of the same template are added to the cost model."""
        records = _as_records(records)
        taken = Tuner.load_history(self, records)
        for other, idx, xs, ys in self._other_tasks(records, max_per_task):
            self.model.observe(_task_key(other), idx, xs, ys)
        return taken

    def _plan_is_stale(self, n: int) -> bool:
        """A new plan is due when this one cannot fill a batch, or when the model was
        refit and this task has measured half a plan since: replanning at every refit
        (one per ``refit_every`` trials of all tasks) would spend the search on plans
        hardly used."""
        if len(self._plan) < n:
            return True
        return (self.model.version != self._plan_version
                and len(self._ys) - self._planned_at >= self.plan_size // 2)

    def next_batch(self, n):
        if self.model.trained and self._plan_is_stale(n):
            self._make_plan()
        return super().next_batch(n)

    def _make_plan(self):
        if not self.model.trained:
            return
        t0 = time.perf_counter()
        good = sorted((i for i, y in self._ys.items() if y > 0), key=lambda i: -self._ys[i])

        def score(points):
            xs = self.features(points)
            out = np.asarray(self.model.predict(xs), dtype=np.float64)
            out[~xs.any(axis=1)] = REFUSED  # it did not instantiate or lower
            return out

        self._plan = evolve(self.space, score, self.plan_size, self.visited, self.rng,
                            seeds=good[: max(1, self.population // 4)],
                            population=self.population, generations=self.generations,
                            mutation_prob=self.mutation_prob)
        self._plan_version = self.model.version
        self._planned_at = len(self._ys)
        self.plan_seconds += time.perf_counter() - t0


def _task_key(task) -> tuple:
    """What names a task in a shared cost model: template, arguments and target."""
    return (task.name, task.args, str(task.target))
