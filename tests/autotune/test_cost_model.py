"""The cost models: one task's ranking model, and the model shared by a model's tasks."""

import threading

import numpy as np
import pytest
from conftest import fake_cost
from scipy.stats import spearmanr

from tecomp import autotune
from tecomp.autotune import features as F
from tecomp.autotune.cost_model import SharedCostModel, XGBoostCostModel


def _measured(task, indices=None):
    """Indices, feature rows and ``fake_cost`` throughputs of configs of ``task``."""
    space = task.config_space
    idx = list(range(len(space))) if indices is None else list(indices)
    xs = np.stack([F.candidate_features(task, space.get(i)) for i in idx])
    ys = np.array([1.0 / fake_cost(space.get(i)) for i in idx])
    return idx, xs, ys


@pytest.fixture(scope="module")
def two_tasks():
    """Two shapes of one template whose costs follow the same rule (``fake_cost``)."""
    return (autotune.create_task("test/mm", (32, 32, 16, "float32"), "llvm"),
            autotune.create_task("test/mm", (64, 48, 16, "float32"), "llvm"))


def test_a_task_with_one_measurement_is_ranked_by_what_the_other_taught(two_tasks):
    a, b = two_tasks
    model = SharedCostModel(min_train=8)
    assert model.observe(("a",), *_measured(a)), "min_train measurements: the first fit"
    idx_b, xs_b, ys_b = _measured(b)
    assert not model.observe(("b",), idx_b[:1], xs_b[:1], ys_b[:1])
    assert model.n_tasks == 2 and model.n_samples == len(a.config_space) + 1
    # Loop-IR features are comparable across shapes: b's configs are ordered as their
    # real throughputs although b has one measurement (a ranking group of one).
    rho = spearmanr(model.predict(xs_b), ys_b).statistic
    assert rho > 0.5, rho


def test_refits_after_refit_every_new_measurements_of_any_task(two_tasks):
    a, b = two_tasks
    idx_a, xs_a, ys_a = _measured(a, range(12))
    idx_b, xs_b, ys_b = _measured(b, range(12))
    model = SharedCostModel(refit_every=8, min_train=4)
    assert not model.trained and model.version == 0
    assert model.observe("a", idx_a[:4], xs_a[:4], ys_a[:4]) and model.version == 1
    assert not model.observe("b", idx_b[:5], xs_b[:5], ys_b[:5])
    assert model.observe("a", idx_a[4:7], xs_a[4:7], ys_a[4:7]) and model.version == 2
    model.observe("a", idx_a[:2], xs_a[:2], ys_a[:2])  # measured again: replaces
    assert model.n_samples == 7 + 5


def test_a_failed_config_is_the_worst_of_its_task(two_tasks):
    a, _ = two_tasks
    idx, xs, ys = _measured(a)
    # Unrolled configs fail to build or run (a reason the features can see).
    failed = np.array([bool(a.config_space.get(i)["unroll"].val) for i in idx])
    ys[failed] = 0.0
    model = SharedCostModel(min_train=2)
    model.observe("a", idx, xs, ys)
    scores = model.predict(xs)
    # Ranked below the typical working config (an unroll of a loop of one iteration
    # leaves the program, and its features, those of a working one).
    assert np.mean(scores[failed] < np.median(scores[~failed])) > 0.8


def test_observing_from_threads_keeps_every_measurement(two_tasks):
    a, b = two_tasks
    model = SharedCostModel(refit_every=6, min_train=6)
    data = {"a": _measured(a, range(24)), "b": _measured(b, range(24))}

    def feed(key):
        idx, xs, ys = data[key]
        for k in range(0, 24, 4):
            model.observe(key, idx[k:k + 4], xs[k:k + 4], ys[k:k + 4])

    threads = [threading.Thread(target=feed, args=(k,)) for k in data]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert model.n_samples == 48 and model.trained


def test_fit_groups_ranks_within_each_group(two_tasks):
    a, b = two_tasks
    _, xs_a, ys_a = _measured(a)
    _, xs_b, ys_b = _measured(b)
    model = XGBoostCostModel()
    model.fit_groups([(xs_a, ys_a), (xs_b[:1], ys_b[:1])])  # a group of one teaches nothing
    assert model.trained
    assert spearmanr(model.predict(xs_a), ys_a).statistic > 0.8


def test_bad_arguments_are_named(two_tasks):
    with pytest.raises(ValueError, match="refit_every=0"):
        SharedCostModel(refit_every=0)
    idx, xs, ys = _measured(two_tasks[0], range(3))
    with pytest.raises(ValueError, match="3 indices, 2 feature rows and 3 throughputs"):
        SharedCostModel().observe("a", idx, xs[:2], ys)
    with pytest.raises(ValueError, match="features have shape"):
        SharedCostModel().observe("a", idx, xs[:, :5], ys)
