"""A tuning session as a user sees it: resuming, callbacks' start, progress output, and
the shipped records of a nearby CPU measured first."""

import io
import time

import pytest
from conftest import FakeBuilder, FakeRunner

from tecomp import autotune
from tecomp.autotune import records
from tecomp.autotune.records import ApplyHistoryBest, make_record, target_key


def _option():
    return {"builder": FakeBuilder(), "runner": FakeRunner()}


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_resume_with_budget_spent_measures_and_appends_nothing(tmp_path, mm_task):
    log = tmp_path / "log.json"
    autotune.RandomTuner(mm_task, seed=0).tune(
        12, _option(), callbacks=[autotune.log_to_file(str(log))], remeasure_top=3)
    before = log.read_text()
    assert '"stage":"final"' in before
    option = _option()
    tuner = autotune.RandomTuner(mm_task, seed=1)
    tuner.tune(12, option, callbacks=[autotune.log_to_file(str(log))],
               resume_from=str(log), remeasure_top=3)
    assert tuner.n_resumed == 12
    assert option["builder"].built == [], "nothing new to build"
    assert option["runner"].remeasured == [], "no final re-measurement without new trials"
    assert log.read_text() == before


def test_resume_with_new_trials_still_remeasures(tmp_path, mm_task):
    log = tmp_path / "log.json"
    autotune.RandomTuner(mm_task, seed=0).tune(
        8, _option(), callbacks=[autotune.log_to_file(str(log))], remeasure_top=0)
    option = _option()
    autotune.RandomTuner(mm_task, seed=1).tune(12, option, resume_from=str(log),
                                               remeasure_top=3)
    # 4 new trials, then the 3 best and the default config re-measured: those measured
    # in the earlier session are built again, those of this one kept from their trials.
    trials = option["builder"].built[:4]
    (finalists,) = option["runner"].remeasured
    final = [int(f.split(":")[1]) for f in finalists]
    assert len(final) == 4 and final[-1] == mm_task.default_config.index
    assert option["builder"].built[4:] == [i for i in final if i not in trials]


def test_the_final_candidates_are_not_built_twice(mm_task):
    option = _option()
    autotune.RandomTuner(mm_task, seed=0).tune(24, option, remeasure_top=3)
    builder = option["builder"]
    assert len(builder.built) == 24, "the finalists' trial builds are re-measured"
    (finalists,) = option["runner"].remeasured
    assert len(finalists) == 4
    # Every build is removed once, the finalists' after the final re-measurement.
    assert sorted(builder.removed) == sorted(f"fake:{i}" for i in builder.built)
    assert builder.removed[-4:] == finalists


def test_start_hook_runs_before_the_first_measurement(mm_task):
    option = _option()
    seen = []

    class Hooked:
        def start(self, tuner):
            seen.append(("start", len(option["builder"].built)))

        def __call__(self, tuner, inputs, results):
            seen.append(("batch", len(inputs)))

    autotune.RandomTuner(mm_task, seed=0).tune(16, option, callbacks=[Hooked()],
                                               remeasure_top=0)
    assert seen[0] == ("start", 0)
    assert [k for k, _ in seen].count("start") == 1


def test_log_to_file_fails_before_anything_is_measured(tmp_path, mm_task):
    option = _option()
    with pytest.raises(IsADirectoryError):
        autotune.RandomTuner(mm_task, seed=0).tune(
            8, option, callbacks=[autotune.log_to_file(str(tmp_path))])
    assert option["builder"].built == []


def test_progress_bar_exists_and_runs_its_clock_while_the_first_batch_is_measured(mm_task):
    bar = autotune.progress_bar(16, file=_Terminal())
    during = {}

    class SlowRunner(FakeRunner):
        def run(self, inputs, builds):
            if not during:
                during["bar"] = bar.bar
                time.sleep(0.2)
            return super().run(inputs, builds)

    autotune.RandomTuner(mm_task, seed=0).tune(
        16, {"builder": FakeBuilder(), "runner": SlowRunner()}, callbacks=[bar],
        remeasure_top=0)
    assert during["bar"] is not None, "the bar is created before the first measurement"
    assert during["bar"].format_dict["elapsed"] >= 0.2, "its clock includes the first batch"
    bar.close()


def test_progress_off_a_terminal_prints_a_few_plain_lines(mm_task):
    out = io.StringIO()
    bar = autotune.progress_bar(64, prefix="mm", file=out)
    autotune.RandomTuner(mm_task, seed=0).tune(64, _option(), callbacks=[bar],
                                               remeasure_top=3)
    bar.close()
    text = out.getvalue()
    assert "\r" not in text
    lines = text.strip().splitlines()
    assert 3 <= len(lines) <= 10, lines
    assert lines[0].startswith("mm: 8/64 trials")
    assert any(line.startswith("mm: 64/64 trials") for line in lines)
    assert "re-measured" in lines[-1]


def test_progress_says_why_tuning_stopped_early(mm_task):
    out = io.StringIO()
    bar = autotune.progress_bar(60, file=out)
    option = {"builder": FakeBuilder(), "runner": FakeRunner(cost=lambda cfg: 1e-3)}
    autotune.RandomTuner(mm_task, seed=0, batch_size=4).tune(
        60, option, early_stopping=8, callbacks=[bar], remeasure_top=0)
    bar.close()
    assert "stopped after 12 of 60 trials: no improvement in 8 trials" in out.getvalue()


# ---- shipped records of another CPU ------------------------------------------------------


def _record_for(task, index, key):
    from dataclasses import replace

    res = autotune.MeasureResult((1e-3,), autotune.MeasureErrorNo.NO_ERROR, "", 0.1,
                                 time.time(), "final")
    return replace(make_record(task, task.config_space.get(index), res), target_key=key)


def _with_cpu(key, cpu):
    return " ".join(f"-mcpu={cpu}" if p.startswith("-mcpu=") else p for p in key.split())


@pytest.fixture
def shipped(monkeypatch):
    """Replace the shipped logs with the given records for the test."""

    def install(recs):
        monkeypatch.setitem(records._SHIPPED, "enabled", True)
        monkeypatch.setitem(records._SHIPPED, "loaded", True)
        monkeypatch.setitem(records._SHIPPED, "ctx", ApplyHistoryBest(recs))

    return install


def test_shipped_records_of_a_same_isa_cpu_are_measured_first(mm_task, shipped):
    here = target_key(mm_task.target)
    near = _record_for(mm_task, 41, _with_cpu(here, "othercpu"))
    arch = next(p for p in here.split() if p.startswith("-arch="))
    other_arch = _record_for(mm_task, 42, here.replace(arch, "-arch=riscv64"))
    shipped([near, other_arch])
    assert [r.config_index for r in records.shipped_candidates(mm_task)] == [41]
    option = _option()
    autotune.RandomTuner(mm_task, seed=0).tune(8, option, remeasure_top=0)
    built = option["builder"].built
    assert built[0] == mm_task.default_config.index
    assert built[1] == 41, "the nearby CPU's record is a candidate of the first batch"
    assert built.count(41) == 1 and 42 not in built[:2]
    # ...and it is never applied untested to this CPU
    assert records.shipped_history().best_record(mm_task) is None


def test_shipped_candidates_nearest_target_first(mm_task, shipped):
    here = target_key(mm_task.target)
    exact = _record_for(mm_task, 7, here)
    near = _record_for(mm_task, 9, _with_cpu(here, "othercpu"))
    shipped([near, exact])
    assert [r.config_index for r in records.shipped_candidates(mm_task)] == [7, 9]


def test_shipped_note_names_this_cpu_only_when_nothing_applies(mm_task, shipped):
    here = target_key(mm_task.target)
    cpu = next(p.split("=", 1)[1] for p in here.split() if p.startswith("-mcpu="))
    shipped([_record_for(mm_task, 9, _with_cpu(here, "othercpu"))])
    note = records.shipped_note(mm_task)
    assert note.startswith(f"no shipped records for {cpu}; using fallback configs")
    assert "othercpu" in note and "\n" not in note
    shipped([_record_for(mm_task, 9, here)])
    assert records.shipped_note(mm_task) == ""


def test_vector_isa_groups_cpus_by_widest_vector_extension():
    a = "llvm -arch=x86_64 -mcpu=znver4 -mattr=+avx,+avx2,+avx512f,+fma"
    b = "llvm -arch=x86_64 -mcpu=znver5 -mattr=+avx,+avx2,+avx512f,+avxvnni,+fma"
    c = "llvm -arch=x86_64 -mcpu=haswell -mattr=+avx,+avx2,+fma"
    assert records.vector_isa(a) == records.vector_isa(b) == ("llvm", "x86_64", "avx512")
    assert records.vector_isa(c) == ("llvm", "x86_64", "avx2")


def test_a_fused_kernel_measures_its_anchors_records_first(shipped):
    """A dense with its ReLU is tuned whole; the configs of its dense's records (of this
    CPU, from a log applied, and of a nearby CPU, shipped) are in its first batch."""
    from tecomp.topi.fused_group import GROUP_TEMPLATE, anchor_workload

    group = ((((4, 32), "float32"), ((16, 32), "float32")),
             (("dense", (("units", 16),), (0, 1)), ("relu", (), (2,))), 0, 3)
    task = autotune.create_task(GROUP_TEMPLATE, group)
    dense = autotune.create_task(*anchor_workload(task))
    assert [t.workload for t in task.seed_tasks()] == [dense.workload]
    assert dense.name == "dense_packed"
    assert task.config_space.knob_names == dense.config_space.knob_names
    here = target_key(task.target)
    shipped([_record_for(dense, 3, _with_cpu(here, "othercpu"))])
    option = {"builder": FakeBuilder(), "runner": FakeRunner(lambda cfg: 1e-3)}
    with autotune.apply_history_best([_record_for(dense, 5, here)]):
        autotune.RandomTuner(task, seed=0).tune(8, option, remeasure_top=0)
    assert option["builder"].built[:3] == [task.default_config.index, 5, 3]
