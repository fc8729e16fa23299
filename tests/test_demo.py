"""``tecomp demo`` prints what happened: the trials it measured, why it stopped, a word
when the kernel runs far below its tuning figure, and one when numpy's OpenBLAS is held to
another CPU's kernels."""

import json

from tecomp import demo


def _trial_lines(path):
    with open(path) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    return [r for r in recs if r["result"].get("stage", "trial") == "trial"]


def test_counts_are_the_trials_measured(tmp_path):
    log = tmp_path / "d.json"
    lines = []
    fig = demo.run_demo(n=16, trials=10, log=str(log), out=lines.append)
    measured = len(_trial_lines(log))
    assert fig["trials"] == measured
    tuning = [line for line in lines if line.startswith("tuning: ")]
    assert len(tuning) == 1, lines
    assert tuning[0].startswith(f"tuning: {measured} of 10 trials in "), tuning
    if measured < 10:
        assert f"(stopped early: {fig['stop_reason']})" in tuning[0]
    else:
        assert "stopped early" not in tuning[0]
    build = [line for line in lines if line.startswith("build: ")]
    assert len(build) == 1 and "in this run" in build[0], lines


def test_slowdown_note_only_when_far_below_the_search():
    assert demo.slowdown_note(200.0, 208.0) == ""
    assert demo.slowdown_note(120.0, 208.0) == ""
    assert demo.slowdown_note(97.0, None) == ""
    note = demo.slowdown_note(97.0, 208.0)
    assert "208.0 GFLOPS during tuning and 97.0 now (47%)" in note
    assert "other work shared the cores" in note and "docs/measuring.md" in note


def test_blas_override_note_when_openblas_is_held_to_other_kernels():
    held = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512", "HOME": "/root"}
    note = demo.blas_override_note(held, "scipy-openblas")
    assert note.startswith("note: OPENBLAS_CORETYPE=Haswell, OPENBLAS_L2_SIZE=512 set")
    assert "not this CPU's own" in note
    assert demo.blas_override_note({"HOME": "/root"}, "scipy-openblas") == ""
    assert demo.blas_override_note(held, "accelerate") == ""


def test_the_demo_says_when_numpy_runs_another_cpus_kernels(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setattr(demo, "_numpy_blas", lambda: "scipy-openblas")
    lines = []
    fig = demo.run_demo(n=16, trials=2, log=str(tmp_path / "d.json"), out=lines.append)
    assert fig["blas_note"] and lines[-1] == fig["blas_note"]
    assert "OPENBLAS_CORETYPE=Haswell" in fig["blas_note"]
