"""A learned cost model: gradient-boosted trees ranking candidates by throughput.

The model answers one question — which of these candidates is likely fastest — so it is
trained with a ranking objective (``rank:pairwise``) on loop-IR features, one query group
per task: throughputs of different tasks are not comparable, their orderings are.
Labels are throughput normalised by the group's best; failed candidates enter with zero
throughput. xgboost is used only through ``xgb.DMatrix`` and ``xgb.train``.

The protocol is three methods, as in AutoTVM: ``fit(xs, ys)``, ``predict(xs)`` and
``fit_log`` (warm-starting from records of earlier tasks).
"""

from __future__ import annotations

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
        import xgboost as xgb

        groups_x = list(self._base_xs)
        groups_y = [self._labels(y) for y in self._base_ys]
        if len(xs):
            groups_x.append(self._check(xs))
            groups_y.append(self._labels(ys))
        groups = [(x, y) for x, y in zip(groups_x, groups_y) if len(x) >= 2]
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
