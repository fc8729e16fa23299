import math

import pytest
from conftest import FakeBuilder, FakeRunner

from tecomp import autotune, te
from tecomp.autotune.result import MeasureResult

TUNERS = [autotune.RandomTuner, autotune.GridSearchTuner, autotune.GATuner, autotune.XGBTuner,
          autotune.EvolutionTuner]
MODEL_TUNERS = (autotune.XGBTuner, autotune.EvolutionTuner)


@pytest.mark.parametrize("cls", TUNERS)
def test_never_repeats_and_respects_budget(cls, mm_task):
    option = {"builder": FakeBuilder(), "runner": FakeRunner()}
    kw = {"min_train": 8, "plan_size": 8} if cls in MODEL_TUNERS else {}
    tuner = cls(mm_task, seed=1, **kw)
    tuner.tune(30, option)
    built = option["builder"].built
    trials = built[:30]
    assert len(trials) == 30
    assert len(set(trials)) == 30, "a config was measured twice"
    assert trials[0] == mm_task.default_config.index, "the default config goes first"
    assert tuner.best_config is not None


@pytest.mark.parametrize("cls", TUNERS)
def test_exhausts_a_small_space_without_repeats(cls):
    task = autotune.create_task("test/mm", (4, 2, 2, "float32"))
    n = len(task.config_space)
    option = {"builder": FakeBuilder(), "runner": FakeRunner()}
    kw = {"min_train": 4, "plan_size": 4} if cls in MODEL_TUNERS else {}
    tuner = cls(task, seed=0, **kw)
    tuner.tune(n + 10, option, remeasure_top=0)
    assert sorted(option["builder"].built) == list(range(n))


def test_xgb_explores_around_the_fallback_before_its_model_is_trained(mm_task):
    option = {"builder": FakeBuilder(), "runner": FakeRunner()}
    tuner = autotune.XGBTuner(mm_task, seed=0, min_train=16, plan_size=8)
    tuner.tune(16, option, remeasure_top=0)
    space = mm_task.config_space
    default = space.digits_of(mm_task.default_config.index)
    first = option["builder"].built[1:16]  # after the default config itself
    one_knob_away = [i for i in first
                     if sum(a != b for a, b in zip(space.digits_of(i), default)) == 1]
    # Half the early proposals change one knob of the best config so far (the fallback
    # before any result); random picks in a space of this size rarely do.
    assert len(one_knob_away) >= 3, first


def test_early_stopping_stops(mm_task):
    option = {"builder": FakeBuilder(), "runner": FakeRunner(cost=lambda cfg: 1e-3)}
    tuner = autotune.RandomTuner(mm_task, seed=0, batch_size=4)
    tuner.tune(60, option, early_stopping=8, remeasure_top=0)
    assert len(option["builder"].built) <= 12
    assert "no improvement" in tuner.stop_reason


def test_failed_configs_count_and_default_is_measured(mm_task):
    bad = set(range(0, 72, 2))
    option = {"builder": FakeBuilder(fail=bad), "runner": FakeRunner()}
    tuner = autotune.XGBTuner(mm_task, seed=0, min_train=8, plan_size=8)
    tuner.tune(20, option, remeasure_top=0)
    assert sum(1 for _, r in tuner.history if not r.ok) > 0
    assert tuner.best_result.ok
    # failed configs are in the model's training data with zero throughput
    assert any(v == 0.0 for v in tuner._ys.values())


def test_final_remeasure_decides_best(mm_task):
    runner = FakeRunner()
    option = {"builder": FakeBuilder(), "runner": runner}
    tuner = autotune.RandomTuner(mm_task, seed=0)
    recorded = []
    tuner.tune(16, option, callbacks=[lambda t, i, r: recorded.extend(r)], remeasure_top=3)
    # the 3 best trials, and the default config (whose trial was not among them)
    assert len(runner.remeasured) == 1 and len(runner.remeasured[0]) == 4
    assert f"fake:{mm_task.default_config.index}" in runner.remeasured[0]
    finals = [r for r in recorded if r.stage == "final"]
    assert len(finals) == 4
    assert tuner.best_result.stage == "final"


class _DriftingRunner(FakeRunner):
    """Trials look fast for every config but the default (measured first, while the
    machine was slow); interleaved, the default is the fastest."""

    def run(self, inputs, builds):
        results = super().run(inputs, builds)
        return [r if i.config.index == self.default else
                MeasureResult((5e-4,) * 3, r.error_no, "", 0.0, r.timestamp)
                for i, r in zip(inputs, results)]

    def remeasure(self, builds, rounds=5):
        self.remeasured.append([b.filename for b in builds])
        return [[1e-3 if b.filename == f"fake:{self.default}" else 2e-3] * rounds
                for b in builds]


def test_final_remeasure_keeps_the_default_when_nothing_beats_it_side_by_side(mm_task):
    runner = _DriftingRunner()
    runner.default = mm_task.default_config.index
    tuner = autotune.RandomTuner(mm_task, seed=0)
    tuner.tune(16, {"builder": FakeBuilder(), "runner": runner}, remeasure_top=3)
    assert f"fake:{runner.default}" in runner.remeasured[0]
    assert len(runner.remeasured[0]) == 4
    assert tuner.best_config.index == runner.default
    assert tuner.best_result.stage == "final"


@pytest.mark.parametrize("cls", MODEL_TUNERS)
def test_resume_measures_nothing_twice(tmp_path, mm_task, cls):
    log = tmp_path / "log.json"
    b1 = FakeBuilder()
    autotune.RandomTuner(mm_task, seed=0).tune(
        12, {"builder": b1, "runner": FakeRunner()},
        callbacks=[autotune.log_to_file(str(log))], remeasure_top=0)
    b2 = FakeBuilder()
    t2 = cls(mm_task, seed=5, min_train=4, plan_size=4)
    t2.tune(30, {"builder": b2, "runner": FakeRunner()},
            callbacks=[autotune.log_to_file(str(log))], resume_from=str(log),
            remeasure_top=0)
    assert len(b2.built) == 30 - 12, "the resumed trials count toward the budget"
    assert not set(b1.built) & set(b2.built)
    trials = [r for r in autotune.load_from_file(log) if r.result.stage == "trial"]
    idx = [r.config_index for r in trials]
    assert len(idx) == len(set(idx)) == 30


@pytest.mark.parametrize("cls", MODEL_TUNERS)
def test_transfer_learning_warm_starts_model(tmp_path, cls):
    small = autotune.create_task("test/mm", (16, 16, 8, "float32"))
    log = tmp_path / "log.json"
    autotune.RandomTuner(small, seed=0).tune(
        24, {"builder": FakeBuilder(), "runner": FakeRunner()},
        callbacks=[autotune.log_to_file(str(log))], remeasure_top=0)
    big = autotune.create_task("test/mm", (32, 32, 16, "float32"))
    tuner = cls(big, seed=0)
    assert tuner.load_history(str(log)) == 0  # none of them is this task's
    assert tuner.model.trained, "records of another task warm-start the model"
    assert len(tuner.next_batch(4)) == 4 and tuner._plan, "the warm model plans at once"


def test_features_have_fixed_length_and_version(mm_task):
    import numpy as np

    from tecomp.autotune import features as F

    rows = [F.candidate_features(mm_task, mm_task.config_space.get(i)) for i in (0, 5, 40, 71)]
    assert all(r.shape == (F.FEATURE_LENGTH,) for r in rows)
    assert F.FEATURE_VERSION >= 1
    assert len({r.tobytes() for r in rows}) == 4, "different configs, different features"
    assert np.isfinite(np.stack(rows)).all()
    from tecomp.autotune.cost_model import XGBoostCostModel

    with pytest.raises(ValueError, match="feature schema"):
        XGBoostCostModel().fit(np.zeros((3, 5)), np.zeros(3))


class _BusyFinalRunner(FakeRunner):
    """Trials as FakeRunner measures them; the final rounds land on a busy machine:
    every candidate waits out whole 1 ms scheduler ticks for its first ``busy`` calls."""

    def __init__(self, busy: int):
        super().__init__(cost=lambda cfg: 5e-5 * (1 + cfg.index % 7))
        self.busy = busy

    def remeasure(self, builds, rounds=5):
        self.remeasured.append([b.filename for b in builds])
        if len(self.remeasured) <= self.busy:
            return [[8e-3, 8e-3, 1e-2, 8e-3, 7e-3][:rounds] for _ in builds]
        return [[5e-5 * (1 + int(b.filename[5:]) % 7)] * rounds for b in builds]


def test_a_busy_final_remeasure_is_taken_again_and_then_counts(mm_task):
    from tecomp.autotune.measure import REMEASURE_DISTURBED

    runner = _BusyFinalRunner(busy=1)
    tuner = autotune.RandomTuner(mm_task, seed=0)
    recorded = []
    tuner.tune(16, {"builder": FakeBuilder(), "runner": runner},
               callbacks=[lambda t, i, r: recorded.extend(r)], remeasure_top=3)
    assert len(runner.remeasured) == 2 <= REMEASURE_DISTURBED + 1
    finals = [r for r in recorded if r.stage == "final"]
    assert finals and all(r.sound for r in finals)
    assert tuner.best_result.stage == "final" and tuner.n_disturbed == 0


def test_a_final_remeasure_busy_throughout_is_flagged_and_never_wins(mm_task):
    from tecomp.autotune.measure import REMEASURE_DISTURBED

    runner = _BusyFinalRunner(busy=100)
    tuner = autotune.RandomTuner(mm_task, seed=0)
    recorded = []
    tuner.tune(16, {"builder": FakeBuilder(), "runner": runner},
               callbacks=[lambda t, i, r: recorded.extend(r)], remeasure_top=3)
    assert len(runner.remeasured) == 1 + REMEASURE_DISTURBED  # bounded
    finals = [r for r in recorded if r.stage == "final"]
    assert len(finals) >= 3
    assert all(r.disturbed.startswith("whole scheduler ticks") for r in finals)
    assert tuner.n_disturbed == len(finals)
    # The best trial stands: no figure of the busy rounds decides.
    assert tuner.best_result.stage == "trial"
    assert tuner.best_result.cost == min(r.cost for r in recorded if r.stage == "trial")


def test_a_disturbed_trial_is_never_the_best(mm_task):
    class _OneBusyTrial(FakeRunner):
        def run(self, inputs, builds):
            return [MeasureResult((1e-6, 1e-3, 1e-6), r.error_no, "", 0.0, r.timestamp,
                                  disturbed="repeats disagree")
                    if i.config.index == 5 else r
                    for i, r in zip(inputs, super().run(inputs, builds))]

    tuner = autotune.RandomTuner(mm_task, seed=0)
    tuner.tune(len(mm_task.config_space), {"builder": FakeBuilder(), "runner": _OneBusyTrial()},
               remeasure_top=0)
    assert tuner.best_config.index != 5
    assert tuner.n_disturbed == 1


def test_disturbed_trials_take_part_in_the_final_rounds_after_the_sound_ones(mm_task):
    class _BusyTrials(FakeRunner):
        def run(self, inputs, builds):
            return [MeasureResult(r.costs, r.error_no, "", 0.0, r.timestamp,
                                  disturbed="" if i.config.index == self.default
                                  else "repeats disagree")
                    for i, r in zip(inputs, super().run(inputs, builds))]

    runner = _BusyTrials()
    runner.default = mm_task.default_config.index
    tuner = autotune.RandomTuner(mm_task, seed=0)
    tuner.tune(6, {"builder": FakeBuilder(), "runner": runner}, remeasure_top=3)
    assert len(runner.remeasured) == 1 and len(runner.remeasured[0]) == 3
    assert runner.remeasured[0][0] == f"fake:{runner.default}"  # the sound one first
    assert tuner.best_result.stage == "final"


def test_a_runner_that_does_not_judge_gets_its_trials_judged(mm_task):
    class _Unjudging(FakeRunner):
        def run(self, inputs, builds):
            return [MeasureResult((8e-3, 1e-2, 7e-3), r.error_no, "", 0.0, r.timestamp)
                    if i.config.index == 3 else r
                    for i, r in zip(inputs, super().run(inputs, builds))]

    tuner = autotune.RandomTuner(mm_task, seed=0)
    recorded = []
    tuner.tune(len(mm_task.config_space), {"builder": FakeBuilder(), "runner": _Unjudging()},
               callbacks=[lambda t, i, r: recorded.extend(zip(i, r))], remeasure_top=0)
    (flagged,) = [r for i, r in recorded if i.config.index == 3]
    assert flagged.disturbed == "whole scheduler ticks: the repeats sit on [7, 8, 10] x 1 ms"
    assert tuner.n_disturbed == 1


# -- the evolutionary search ---------------------------------------------------------------


@autotune.template("test/mm_tiled3")
def mm_tiled3_template(n, m, k, dtype="float32"):
    """A matmul with three-level tiles of both spatial axes: thousands of configs."""
    A = te.placeholder((n, k), dtype, name="A")
    B = te.placeholder((k, m), dtype, name="B")
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    cfg = autotune.get_config()
    i, j = s[C].op.axis
    cfg.define_split("tile_i", i, num_outputs=3)
    cfg.define_split("tile_j", j, num_outputs=3)
    cfg.define_split("tile_k", r, num_outputs=2)
    cfg.define_knob("unroll", [0, 1])
    io, im, ii = cfg["tile_i"].apply(s, C, i)
    jo, jm, ji = cfg["tile_j"].apply(s, C, j)
    ko, ki = cfg["tile_k"].apply(s, C, r)
    s[C].reorder(io, jo, im, jm, ko, ki, ii, ji)
    if cfg["unroll"].val:
        s[C].unroll(ki)
    return s, [A, B, C]


def tiled_cost(cfg) -> float:
    """A known cost of the knobs, best at one point: inner tiles of 16 columns and 4 rows,
    middle tiles of 4 and 2, a reduction tile of 8, no unrolling."""
    ti, tj, tk = cfg["tile_i"].size, cfg["tile_j"].size, cfg["tile_k"].size
    off = (abs(math.log2(tj[2]) - 4) + abs(math.log2(ti[2]) - 2)
           + 0.5 * abs(math.log2(ti[1]) - 2) + 0.5 * abs(math.log2(tj[1]) - 1)
           + 0.5 * abs(math.log2(tk[1]) - 3) + 0.3 * cfg["unroll"].val)
    return 1e-3 * (1 + off)


def _trials_to_optimum(tuner, n_trial) -> int:
    """Trials ``tuner`` takes to measure the config of least ``tiled_cost``."""
    space = tuner.task.config_space
    best = min(tiled_cost(space.get(i)) for i in range(len(space)))
    builder = FakeBuilder()
    tuner.tune(n_trial, {"builder": builder, "runner": FakeRunner(tiled_cost)},
               remeasure_top=0)
    for n, i in enumerate(builder.built, 1):
        if tiled_cost(space.get(i)) <= best:
            return n
    return n_trial + 1


def test_evolution_finds_the_optimum_in_fewer_trials_than_random():
    task = autotune.create_task("test/mm_tiled3", (32, 32, 32, "float32"), "llvm")
    assert len(task.config_space) >= 5000
    evo = _trials_to_optimum(autotune.EvolutionTuner(task, seed=0), 120)
    rand = _trials_to_optimum(autotune.RandomTuner(task, seed=0), 120)
    assert evo <= 120 and evo < rand, (evo, rand)


def test_evolution_learns_to_avoid_configs_that_fail(mm_task):
    # Unrolling breaks the build (an invalid program) unless the tile is tiny.
    fail = {i for i in range(len(mm_task.config_space))
            if mm_task.config_space.get(i)["unroll"].val
            and mm_task.config_space.get(i)["tile_i"].size[-1] > 1}

    def late_invalid(tuner):
        builder = FakeBuilder(fail=fail)
        tuner.tune(40, {"builder": builder, "runner": FakeRunner()}, remeasure_top=0)
        assert tuner.n_invalid == sum(i in fail for i in builder.built)
        assert tuner.invalid_rate == tuner.n_invalid / 40
        return sum(i in fail for i in builder.built[16:])  # once the model is trained

    evo = late_invalid(autotune.EvolutionTuner(mm_task, seed=0, min_train=16, plan_size=8))
    rand = late_invalid(autotune.RandomTuner(mm_task, seed=0))
    assert 3 * evo < 2 * rand, (evo, rand)


def test_a_config_that_does_not_instantiate_is_never_proposed_by_the_plan(mm_task):
    tuner = autotune.EvolutionTuner(mm_task, seed=0, min_train=8, plan_size=8, epsilon=0.0)
    refused = {i for i in range(len(mm_task.config_space)) if i % 5 == 0}
    features = tuner.features

    def zero_if_refused(indices):  # what candidate_features gives when lowering raises
        rows = features(indices)
        rows[[i in refused for i in indices]] = 0.0
        return rows

    tuner.features = zero_if_refused
    builder = FakeBuilder()
    tuner.tune(32, {"builder": builder, "runner": FakeRunner()}, remeasure_top=0)
    assert tuner.model.trained
    # The first batch trains the model; every later proposal comes from its plans.
    assert not set(builder.built[8:]) & refused


def test_evolution_tuner_names_bad_arguments(mm_task):
    with pytest.raises(ValueError, match="population=0"):
        autotune.EvolutionTuner(mm_task, population=0)
