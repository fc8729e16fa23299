"""A learned cost model: gradient-boosted trees ranking candidates by throughput.

The model answers one question — which of these candidates is likely fastest — so it is
trained with a ranking objective (``rank:pairwise``) on loop-IR features, one query group
per task: throughputs of different tasks are not comparable, their orderings are.
Labels are throughput normalised by the group's best; failed candidates enter with zero
throughput. xgboost is used only through ``xgb.DMatrix`` and ``xgb.train``.

The protocol is three methods, as in AutoTVM: ``fit(xs, ys)``, ``predict(xs)`` and
``fit_log`` (warm-starting from records of earlier tasks). ``SharedCostModel`` is one
model for all the tasks of a model, fed by their tuners as measurements arrive (as
Ansor's is): the features are loop-IR features, comparable across tasks, so a task with
few measurements is ranked by what the others taught it.
"""

from __future__ import annotations

import threading

import numpy as np

from . import features as F


class XGBoostCostModel:
    """Ranks feature vectors (see ``features``) by predicted throughput.

    Parameters
    ----------
    num_boost_round : int
        Trees per fit.
    nthread : int, optional
        Threads for xgboost (default: all cores; tuning is idle while it trains).
    seed : int
    """

    def __init__(self, num_boost_round: int = 60, nthread: int | None = None, seed: int = 0):
        self.num_boost_round = num_boost_round
        self.params = {
            "objective": "rank:pairwise",
            "max_depth": 6,
            "eta": 0.3,
            "gamma": 1e-4,
            "min_child_weight": 1,
            "subsample": 1.0,
            "lambda": 1.0,
            "alpha": 0.0,
            "tree_method": "hist",
            "verbosity": 0,
            "seed": seed,
        }
        if nthread:
            self.params["nthread"] = nthread
        self.booster = None
        self.feature_version = F.FEATURE_VERSION
        self._base_xs: list[np.ndarray] = []  # transfer-learning groups (other tasks)
        self._base_ys: list[np.ndarray] = []

    @staticmethod
    def _labels(ys: np.ndarray) -> np.ndarray:
        ys = np.asarray(ys, dtype=np.float64)
        top = ys.max() if ys.size else 0.0
        return ys / top if top > 0 else np.zeros_like(ys)

    def _check(self, xs):
        xs = np.asarray(xs, dtype=np.float32)
        if xs.ndim != 2 or xs.shape[1] != F.FEATURE_LENGTH:
            raise ValueError(
                f"features have shape {xs.shape}; this model takes rows of "
                f"{F.FEATURE_LENGTH} (feature schema v{self.feature_version})"
            )
        return xs

    def fit(self, xs, ys) -> None:
        """Train on this task's candidates ``xs`` with throughputs ``ys`` (0 = failed),
        plus any groups from ``fit_log``."""
        groups = list(zip(self._base_xs, self._base_ys))
        if len(xs):
            groups.append((xs, ys))
        self.fit_groups(groups)

    def fit_groups(self, groups) -> None:
        """Train on ``groups``, a list of ``(xs, ys)`` of one task each (throughputs, 0 =
        failed), labelled relative to each group's best; groups of fewer than two rows
        teach a ranking nothing and are left out. Nothing changes if none is left."""
        import xgboost as xgb

        groups = [(self._check(x), self._labels(y)) for x, y in groups if len(x) >= 2]
        if not groups:
            return
        x = np.concatenate([g[0] for g in groups])
        y = np.concatenate([g[1] for g in groups])
        dtrain = xgb.DMatrix(x, label=y)
        dtrain.set_group([len(g[0]) for g in groups])
        self.booster = xgb.train(self.params, dtrain, num_boost_round=self.num_boost_round)

    def fit_log(self, groups) -> None:
        """Warm-start from earlier tasks: ``groups`` is a list of ``(xs, ys)``, one per
        task. They stay in the training set of every later ``fit``."""
        for xs, ys in groups:
            if len(xs) >= 2:
                self._base_xs.append(self._check(xs))
                self._base_ys.append(np.asarray(ys, dtype=np.float64))
        self.fit(np.zeros((0, F.FEATURE_LENGTH), np.float32), np.zeros(0))

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def predict(self, xs) -> np.ndarray:
        """A score per row: higher means predicted faster (only the order is meaningful)."""
        import xgboost as xgb

        xs = self._check(xs)
        if self.booster is None:
            return np.zeros(len(xs))
        return self.booster.predict(xgb.DMatrix(xs))


class SharedCostModel:
    """One cost model for all the tasks of a model, trained as their measurements arrive.

    Features are read from each candidate's loop IR, so a tile that wastes the cache
    looks alike in a convolution and in a dense layer: trained on every task's data
    (one ranking group per task, labels relative to the task's best, as Ansor
    normalises them), the model ranks the configs of a task with few measurements by
    what the others taught it. The tuners of a ``TaskScheduler`` share one; it is safe to
    share between threads (a cluster measures several tasks at once).

    Parameters
    ----------
    num_boost_round : int
        Trees per fit.
    refit_every : int
        New measurements (over all tasks) between two fits.
    min_train : int
        Measurements (over all tasks) before the first fit.
    nthread : int, optional
        Threads for xgboost (default: all cores).
    seed : int

    Examples
    --------
    >>> model = SharedCostModel()                                          # doctest: +SKIP
    >>> TaskScheduler(tasks, tuner=lambda t: EvolutionTuner(t, model=model))  # doctest: +SKIP
    """

    def __init__(self, num_boost_round: int = 60, refit_every: int = 32, min_train: int = 16,
                 nthread: int | None = None, seed: int = 0):
        if refit_every < 1 or min_train < 2:
            raise ValueError(f"SharedCostModel: refit_every={refit_every} must be at least 1 "
                             f"and min_train={min_train} at least 2")
        self.refit_every = refit_every
        self.min_train = min_train
        self._model = XGBoostCostModel(num_boost_round, nthread, seed)
        # task key -> config index -> (feature row, throughput); a config measured again
        # (a resumed log) replaces its row.
        self._data: dict = {}
        self._unfitted = 0
        self._lock = threading.Lock()
        #: Fits so far: a tuner whose plan came from an older version makes a new one.
        self.version = 0

    @property
    def trained(self) -> bool:
        return self._model.trained

    @property
    def n_samples(self) -> int:
        """Measurements the model holds, over all tasks."""
        return sum(len(rows) for rows in self._data.values())

    @property
    def n_tasks(self) -> int:
        """Tasks with at least one measurement."""
        return sum(1 for rows in self._data.values() if rows)

    def observe(self, key, indices, xs, ys) -> bool:
        """Add measurements of task ``key`` (any hashable naming the task): configs
        ``indices`` with feature rows ``xs`` and throughputs ``ys`` (0 = failed). Refits
        when ``refit_every`` new measurements have come in since the last fit (or, before
        the first fit, once ``min_train`` have). Returns whether it refit."""
        xs = self._model._check(xs) if len(xs) else np.zeros((0, F.FEATURE_LENGTH), np.float32)
        if not len(indices) == len(xs) == len(ys):
            raise ValueError(f"observe: {len(indices)} indices, {len(xs)} feature rows and "
                             f"{len(ys)} throughputs; they must match")
        with self._lock:
            rows = self._data.setdefault(key, {})
            for i, x, y in zip(indices, xs, ys):
                rows[int(i)] = (x, float(y))
            self._unfitted += len(indices)
            due = (self._unfitted >= self.refit_every if self.trained
                   else self.n_samples >= self.min_train)
            if due:
                self._fit_locked()
            return due

    def _fit_locked(self) -> None:
        """Train on every task's measurements (the caller holds the lock)."""
        groups = [(np.stack([x for x, _ in rows.values()]),
                   np.array([y for _, y in rows.values()]))
                  for rows in self._data.values() if len(rows) >= 2]
        before = self._model.booster
        self._model.fit_groups(groups)
        self._unfitted = 0
        if self._model.booster is not before:
            self.version += 1

    def predict(self, xs) -> np.ndarray:
        """A score per row: higher means predicted faster (only the order within a task
        is meaningful); zeros before the first fit."""
        return self._model.predict(xs)
