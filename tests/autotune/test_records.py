import json
import time
import warnings
from dataclasses import replace

import pytest

import tecomp
from tecomp import autotune
from tecomp.autotune import MeasureErrorNo, MeasureResult
from tecomp.autotune.records import LogWriter, make_record, target_key
from tecomp.autotune.task import dispatch


def _rec(task, index, cost, stage="trial", err=MeasureErrorNo.NO_ERROR, target=None):
    cfg = task.config_space.get(index)
    res = MeasureResult(() if err else (cost, cost), err, "", 0.1, time.time(), stage)
    r = make_record(task, cfg, res)
    if target is not None:
        r = replace(r, target=target, target_key=target_key(target))
    return r


def test_log_round_trips(tmp_path, mm_task):
    path = tmp_path / "log.json"
    w = LogWriter(path)
    recs = [_rec(mm_task, 3, 1e-3), _rec(mm_task, 4, 0, err=MeasureErrorNo.COMPILE_ERROR)]
    for r in recs:
        w.write(r)
    w.close()
    back = autotune.load_from_file(path)
    assert [r.to_json() for r in back] == [r.to_json() for r in recs]
    line = json.loads(path.read_text().splitlines()[0])
    assert line["workload"]["hash"] == mm_task.workload_hash
    assert line["target"]["key"].startswith("llvm")
    assert line["config"]["knobs"]["tile_i"] == list(mm_task.config_space.get(3)["tile_i"].size)
    assert line["result"]["error_kind"] == "NO_ERROR"
    assert "pickle" not in path.read_text()


def test_corrupt_and_truncated_lines_are_skipped(tmp_path, mm_task):
    path = tmp_path / "log.json"
    good = _rec(mm_task, 1, 1e-3).to_line()
    path.write_text(good + "\n{not json\n" + '{"format": 1}\n' + good[: len(good) // 2])
    with pytest.warns(UserWarning, match="skipping corrupt"):
        recs = autotune.load_from_file(path)
    assert len(recs) == 1
    # Appending after a truncated last line must not glue the new record onto it.
    w = LogWriter(path)
    w.write(_rec(mm_task, 2, 1e-3))
    w.close()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        recs = autotune.load_from_file(path)
    assert [r.config_index for r in recs] == [1, 2]


def test_pick_best_prefers_final_measurement(mm_task, tmp_path):
    recs = [_rec(mm_task, 1, 1e-3), _rec(mm_task, 2, 0.5e-3), _rec(mm_task, 3, 2e-3, "final"),
            _rec(mm_task, 2, 3e-3, "final")]
    best = autotune.pick_best(recs, out_file=tmp_path / "best.json")
    assert len(best) == 1 and best[0].config_index == 3
    assert len(autotune.load_from_file(tmp_path / "best.json")) == 1


def test_apply_history_best_picks_best_matching_record(mm_task):
    recs = [_rec(mm_task, 1, 2e-3), _rec(mm_task, 7, 1e-3), _rec(mm_task, 9, 0.1e-3,
                                                                   err=MeasureErrorNo.TIMEOUT)]
    best = str(tecomp.lower(*mm_task.instantiate(mm_task.config_space.get(7))))
    fallback = str(tecomp.lower(*mm_task.instantiate()))
    assert best != fallback
    with autotune.apply_history_best(recs):
        assert dispatch("test/mm", mm_task.args).index == 7
        assert str(tecomp.lower(*mm_task.instantiate())) == best
        # Calling the template directly goes through dispatch too.
        assert str(tecomp.lower(*autotune.TEMPLATES["test/mm"](*mm_task.args))) == best
    assert dispatch("test/mm", mm_task.args).is_fallback
    assert str(tecomp.lower(*mm_task.instantiate())) == fallback


def test_apply_history_best_other_cpu_needs_opt_in(mm_task):
    other = _rec(mm_task, 5, 1e-3, target="llvm -mcpu=sapphirerapids")
    if other.target_key == _rec(mm_task, 5, 1e-3).target_key:
        pytest.skip("this host is a sapphirerapids")
    with autotune.apply_history_best([other]):
        assert dispatch("test/mm", mm_task.args).is_fallback
    with autotune.apply_history_best([other], any_cpu=True):
        assert dispatch("test/mm", mm_task.args).index == 5


def test_stale_records_of_a_changed_compute_are_ignored(mm_task):
    stale = replace(_rec(mm_task, 5, 1e-3), workload_hash="0" * 16)
    with autotune.apply_history_best([stale]), pytest.warns(UserWarning, match="different"):
        assert dispatch("test/mm", mm_task.args).is_fallback


def test_a_record_of_an_older_space_gives_way_to_the_best_that_fits(mm_task):
    # Same compute, but the template's knobs changed: the faster old record names a
    # split the space no longer has, so the best record that fits is applied.
    knobs = dict(_rec(mm_task, 5, 1e-4).knobs, tile_i=[-1, 7, 3])
    old = replace(_rec(mm_task, 5, 1e-4), knobs=knobs, config_index=10**9)
    with autotune.apply_history_best([old, _rec(mm_task, 6, 1e-3)]) as ctx:
        assert dispatch("test/mm", mm_task.args).index == 6
        assert ctx.best_record(mm_task).config_index == 6
    with autotune.apply_history_best([old]):
        assert dispatch("test/mm", mm_task.args).is_fallback


def test_other_workload_falls_back(mm_task):
    with autotune.apply_history_best([_rec(mm_task, 5, 1e-3)]):
        assert dispatch("test/mm", (16, 16, 16, "float32")).is_fallback


def _disturbed(rec, why="whole scheduler ticks"):
    return replace(rec, result=replace(rec.result, disturbed=why))


def test_a_disturbed_record_keeps_its_reason(tmp_path, mm_task):
    path = tmp_path / "log.json"
    w = LogWriter(path)
    w.write(_disturbed(_rec(mm_task, 3, 8e-3, "final")))
    w.write(_rec(mm_task, 4, 1e-3))
    w.close()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0]["result"]["disturbed"] == "whole scheduler ticks"
    assert lines[1]["result"]["disturbed"] == ""
    back = autotune.load_from_file(path)
    assert [r.result.disturbed for r in back] == ["whole scheduler ticks", ""]
    assert [r.result.sound for r in back] == [False, True]


def test_the_shipped_logs_still_read(mm_task):
    from tecomp.autotune.records import shipped_log_dir

    logs = sorted(shipped_log_dir().glob("*.json"))
    assert logs
    recs = [r for p in logs for r in autotune.load_from_file(p)]
    assert recs and all(r.result.disturbed == "" for r in recs)


def test_a_disturbed_final_record_never_wins(mm_task, tmp_path):
    # The busy moment made the final figures of config 3 look best; config 2's sound
    # trial wins, in pick_best and when a template is dispatched.
    recs = [_rec(mm_task, 1, 2e-3), _rec(mm_task, 2, 1e-3),
            _disturbed(_rec(mm_task, 3, 0.1e-3, "final")),
            _disturbed(_rec(mm_task, 4, 0.05e-3))]
    assert [r.config_index for r in autotune.pick_best(recs)] == [2]
    with autotune.apply_history_best(recs) as ctx:
        assert ctx.best_record(mm_task).config_index == 2
        assert dispatch(mm_task.name, mm_task.args).index == 2


def test_only_disturbed_records_leave_the_fallback(mm_task):
    recs = [_disturbed(_rec(mm_task, 3, 0.1e-3, "final"))]
    assert autotune.pick_best(recs) == []
    with autotune.apply_history_best(recs) as ctx:
        assert ctx.best_record(mm_task) is None


def test_a_line_written_before_the_field_reads_sound(tmp_path, mm_task):
    line = _rec(mm_task, 3, 1e-3).to_json()
    del line["result"]["disturbed"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(line) + "\n")
    (back,) = autotune.load_from_file(path)
    assert back.result.disturbed == "" and back.result.sound


def test_a_record_from_before_a_template_grew_a_defaulted_parameter_still_applies(tmp_path):
    """Records logged as matmul.cuda(N, K, M, dtype) keep matching after the template
    took a fifth parameter with a default (tf32=False); ones for tf32=True do not."""
    task = autotune.create_task("matmul.cuda", (64, 64, 64, "float32"), "cuda")
    assert task.args == (64, 64, 64, "float32", False)
    assert task.workload_forms[:2] == ((64, 64, 64, "float32", False),
                                       (64, 64, 64, "float32"))
    config = task.config_space.get(7)
    old = replace(make_record(task, config, MeasureResult((1e-4,), MeasureErrorNo.NO_ERROR)),
                  args=(64, 64, 64, "float32"))
    log = tmp_path / "old.json"
    log.write_text(old.to_line() + "\n")
    with autotune.apply_history_best(str(log)) as ctx:
        assert ctx.best_record(task).config_index == 7
        tf32 = autotune.create_task("matmul.cuda", (64, 64, 64, "float32", True), "cuda")
        assert ctx.best_record(tf32) is None
