"""Tuning curves (tecomp.autotune.plot): a model's expected kernel time against trials,
stacked by task, with the total and its final re-measurement."""

import math
from types import SimpleNamespace

import pytest

from tecomp.autotune import plot

pytest.importorskip("matplotlib")


def _fake_sched(n_tasks):
    tasks = [SimpleNamespace(name=f"conv2d_{i}", args=(1, 64, 56, 56, "float32"),
                             weight=1 + i % 2) for i in range(n_tasks)]
    # Each task's contribution shrinks as trials go on.
    curve = [(8 * (n_tasks + k), tuple(1e-3 / (1 + k * (i + 1) / 10) for i in range(n_tasks)))
             for k in range(12)]
    return SimpleNamespace(tasks=tasks, task_curve=curve,
                           estimated_latency=lambda: 0.9 * sum(curve[-1][1]))


def _axes(monkeypatch, tmp_path, sched):
    from matplotlib.figure import Figure

    saved = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: saved.append(fig))
    plot.plot_model(tmp_path / "c.png", sched, "model on cpu")
    (ax,) = saved[0].axes
    return ax


def test_model_curve_stacks_the_tasks_under_the_total(tmp_path, monkeypatch):
    sched = _fake_sched(3)
    ax = _axes(monkeypatch, tmp_path, sched)
    assert ax.get_ylim()[0] == 0
    labels = ax.get_legend_handles_labels()[1]
    assert sum(lab.startswith("conv2d_") for lab in labels) == 3
    assert any(lab.endswith(" x2") for lab in labels)  # a task's weight is shown
    total = [line for line in ax.get_lines() if line.get_label().startswith("total (")]
    ys = total[0].get_ydata()
    assert math.isclose(ys[-1], sum(sched.task_curve[-1][1]) * 1e3)
    assert list(ys) == sorted(ys, reverse=True)
    assert any("re-measured at the end" in lab for lab in labels)


def test_many_tasks_keep_a_short_legend(tmp_path, monkeypatch):
    ax = _axes(monkeypatch, tmp_path, _fake_sched(20))
    labels = ax.get_legend_handles_labels()[1]
    assert "11 other tasks" in labels
    assert sum(lab.startswith("conv2d_") for lab in labels) == 9


def test_model_curve_writes_an_image(tmp_path):
    path = plot.plot_model(str(tmp_path / "c.png"), _fake_sched(2), "t")
    with open(path, "rb") as fh:
        assert fh.read(4) == b"\x89PNG"


def _fakes():
    """FakeBuilder and FakeRunner of this folder's conftest, loaded by path (another test
    folder's conftest may hold the name ``conftest`` in the same session)."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).with_name("conftest.py")
    spec = importlib.util.spec_from_file_location("autotune_fakes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FakeBuilder, module.FakeRunner


def test_the_scheduler_records_each_task_beside_the_total(tmp_path):
    from tecomp import autotune

    FakeBuilder, FakeRunner = _fakes()

    tasks = []
    for k, w in enumerate((1, 3)):
        task = autotune.create_task("test/mm", (32, 32, 16 + 8 * k, "float32"), "llvm")
        task.weight = w
        tasks.append(task)
    sched = autotune.TaskScheduler(tasks, tuner=lambda t: autotune.RandomTuner(t, seed=0),
                                   batch_size=4)
    sched.tune(32, {"builder": FakeBuilder(), "runner": FakeRunner()}, remeasure_top=0)
    assert sched.task_curve and len(sched.task_curve) == len(sched.curve)
    for (n, total), (m, per_task) in zip(sched.curve, sched.task_curve):
        assert n == m and len(per_task) == 2 and math.isclose(total, sum(per_task))
    path = plot.plot_model(str(tmp_path / "c.svg"), sched, "test")
    with open(path) as fh:
        assert "<svg" in fh.read()


def test_a_final_total_far_above_the_curve_is_said_not_drawn(tmp_path, monkeypatch):
    sched = _fake_sched(2)
    sched.estimated_latency = lambda: 500 * sum(sched.task_curve[-1][1])
    ax = _axes(monkeypatch, tmp_path, sched)
    assert ax.get_ylim()[1] < 3 * sum(sched.task_curve[0][1]) * 1e3
    labels = ax.get_legend_handles_labels()[1]
    assert any("off the scale: 500x the trials' total" in lab for lab in labels), labels
