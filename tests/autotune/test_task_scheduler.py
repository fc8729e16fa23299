"""TaskScheduler: trials go where the model gains most, one log for all tasks, resume,
Ctrl-C, the per-task final re-measurement; with a fake builder and runner (no compiling)."""

import io
import time

import pytest
from conftest import FakeBuilder, FakeRunner, fake_cost

from tecomp import autotune
from tecomp.autotune import MeasureErrorNo, MeasureResult, RandomTuner, TaskScheduler
from tecomp.autotune.records import load_from_file


def _tasks(*weights):
    tasks = []
    for k, w in enumerate(weights):
        task = autotune.create_task("test/mm", (32, 32, 16 + 8 * k, "float32"), "llvm")
        task.weight = w
        tasks.append(task)
    return tasks


class ScaledRunner(FakeRunner):
    """``fake_cost`` times a factor per task (keyed by the reduction size)."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def run(self, inputs, builds):
        k = inputs[0].task.args[2]
        self.cost = lambda cfg: self.scale[k] * fake_cost(cfg)
        return super().run(inputs, builds)


def _option(runner=None):
    return {"builder": FakeBuilder(), "runner": runner or FakeRunner()}


def _random(task):
    return RandomTuner(task, seed=0)


def test_more_trials_go_to_the_task_with_more_weight_times_latency():
    tasks = _tasks(1, 6, 1)
    sched = TaskScheduler(tasks, tuner=_random, batch_size=4)
    sched.tune(96, _option(ScaledRunner({16: 1.0, 24: 1.0, 32: 0.2})), remeasure_top=0)
    done = [t.n_done for t in sched.tuners]
    assert sum(done) == 96
    # Every task got its warm-up batch; the heavy one most of the rest.
    assert min(done) >= 4 and done[1] > done[0] + done[2]


def test_one_log_for_all_tasks_and_a_resume_that_continues_it(tmp_path):
    log = str(tmp_path / "model.json")
    first = TaskScheduler(_tasks(2, 1), tuner=_random, batch_size=4)
    first.tune(20, _option(), callbacks=[autotune.log_to_file(log)], remeasure_top=0)
    records = load_from_file(log)
    assert len(records) == 20 and {r.args[2] for r in records} == {16, 24}

    again = TaskScheduler(_tasks(2, 1), tuner=_random, batch_size=4)
    option = _option()
    again.tune(32, option, callbacks=[autotune.log_to_file(log)], resume_from=log,
               remeasure_top=0)
    assert again.n_resumed == 20 and again.n_done == 32
    assert len(option["runner"].runs) == 12
    records = load_from_file(log)
    per_task = {}
    for r in records:
        per_task.setdefault(r.args, []).append(r.config_index)
    assert all(len(set(ix)) == len(ix) for ix in per_task.values())  # nothing measured twice


def test_a_budget_already_spent_measures_nothing(tmp_path):
    log = str(tmp_path / "model.json")
    TaskScheduler(_tasks(1), tuner=_random).tune(8, _option(),
                                                callbacks=[autotune.log_to_file(log)])
    option = _option()
    sched = TaskScheduler(_tasks(1), tuner=_random).tune(8, option, resume_from=log)
    assert option["runner"].runs == [] and option["runner"].remeasured == []
    assert sched.n_done == 8


def test_each_task_measured_ends_with_its_own_final_remeasurement():
    option = _option()
    TaskScheduler(_tasks(1, 1), tuner=_random, batch_size=4).tune(16, option)
    assert len(option["runner"].remeasured) == 2


def test_tasks_that_cannot_go_on_end_the_run_early():
    task = autotune.create_task("test/mm", (4, 4, 4, "float32"), "llvm")
    size = len(task.config_space)
    sched = TaskScheduler([task], tuner=_random, batch_size=8)
    sched.tune(size + 50, _option(), remeasure_top=0)
    assert sched.n_done == size and "exhausted" in sched.stop_reason

    sched = TaskScheduler(_tasks(1, 1), tuner=_random, batch_size=4)
    sched.tune(200, _option(FakeRunner(cost=lambda cfg: 1e-3)), early_stopping=8,
               remeasure_top=0)
    assert [t.n_done for t in sched.tuners] == [12, 12]


def test_ctrl_c_keeps_the_log_and_closes_the_measurers(tmp_path):
    class Interrupting(FakeRunner):
        def run(self, inputs, builds):
            if len(self.runs) >= 8:
                raise KeyboardInterrupt
            return super().run(inputs, builds)

        def close(self):
            self.closed = True

    runner = Interrupting()
    log = str(tmp_path / "model.json")
    with pytest.raises(KeyboardInterrupt):
        TaskScheduler(_tasks(1, 1), tuner=_random, batch_size=4).tune(
            40, _option(runner), callbacks=[autotune.log_to_file(log)])
    assert len(load_from_file(log)) == 8 and runner.closed


def test_the_model_progress_bar_counts_all_tasks_trials():
    out = io.StringIO()
    bar = autotune.model_progress_bar(16, prefix="model", file=out, every=8)
    TaskScheduler(_tasks(1, 1), tuner=_random, batch_size=4).tune(16, _option(),
                                                                 callbacks=[bar])
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("model: 8/16 trials, errors 0, tuned kernels")
    assert any(line.startswith("model: 16/16 trials") for line in lines)


def _with_costs(sched, i, history):
    sched.tuners[i].best_result = MeasureResult((history[-1],), MeasureErrorNo.NO_ERROR, "",
                                                0.0, time.time())
    sched.cost_history[i] = list(history)


def test_the_gradient_scales_with_weight_and_rewards_a_recent_improvement():
    sched = TaskScheduler(_tasks(1, 1), tuner=_random)
    assert sched.gradient(0) == 0.0  # no batch yet: the warm-up round decides
    _with_costs(sched, 0, [1e-3] * 4)
    _with_costs(sched, 1, [1e-3] * 4)
    flat = sched.gradient(0)
    assert flat < 0
    sched.tasks[0].weight = 3
    assert sched.gradient(0) == pytest.approx(3 * flat)
    sched.tasks[0].weight = 1
    _with_costs(sched, 0, [4e-3, 3e-3, 2e-3, 1e-3])
    assert sched.gradient(0) < flat


def test_the_default_tuners_share_one_cost_model_trained_on_every_task():
    tasks = _tasks(1, 1)
    sched = TaskScheduler(tasks, seed=0, batch_size=8)
    assert all(isinstance(t, autotune.EvolutionTuner) for t in sched.tuners)
    assert all(t.model is sched.cost_model for t in sched.tuners)
    sched.tune(48, _option(ScaledRunner({16: 1.0, 24: 2.0})), remeasure_top=0)
    assert sched.cost_model.trained
    assert sched.cost_model.n_tasks == 2 and sched.cost_model.n_samples == 48


def test_invalid_programs_are_counted_over_the_tasks():
    tasks = _tasks(1, 1)
    sched = TaskScheduler(tasks, tuner=_random, batch_size=4)
    sched.tune(24, {"builder": FakeBuilder(fail=range(0, 200, 2)), "runner": FakeRunner()},
               remeasure_top=0)
    assert sched.n_invalid == sum(t.n_invalid for t in sched.tuners) > 0
    assert sched.n_trials == 24 and sched.invalid_rate == sched.n_invalid / 24
    assert sched.cost_model is None, "a tuner of one's own brings its own model"
