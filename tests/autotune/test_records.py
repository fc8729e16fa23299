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
