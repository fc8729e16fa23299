"""Fault isolation: candidates that crash, hang, fail to compile or compute wrong values
each cost one trial, recorded under its error code; the tuning run finishes its budget."""

import os
import signal
import subprocess
import sys
import textwrap
import time

from tecomp import autotune, te
from tecomp.autotune import MeasureErrorNo
from tecomp.ir import expr as E

FAULTS = ["none", "segfault", "hang", "compile_error", "wrong", "raise"]


@autotune.template("test/faulty")
def faulty(n):
    cfg = autotune.get_config()
    cfg.define_knob("fault", FAULTS)
    cfg.define_knob("scale", [1, 2])  # a second healthy knob, so "none" has neighbours
    fault = cfg["fault"].val
    A = te.placeholder((n,), name="A")
    if fault == "segfault":
        # Reads ~8 GiB past the end of A: an unmapped address.
        B = te.compute((n,), lambda i: A[i + (1 << 31) - 1 - n] + A[i], name="B")
    elif fault == "hang":
        k = te.reduce_axis((0, (1 << 31) - 1), name="k")
        B = te.compute((n,), lambda i: te.sum(A[(i + k) % n] * 1.0001, axis=k), name="B")
    elif fault == "compile_error":
        B = te.compute((n,), lambda i: E.Call("float32", "no_such_intrinsic", (A[i],)), name="B")
    elif fault == "wrong":
        B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
    else:
        if fault == "raise":
            raise ValueError("this config is invalid")
        B = te.compute((n,), lambda i: A[i] + A[i], name="B")
    s = te.create_schedule(B.op)
    return s, [A, B]


def test_every_fault_is_recorded_and_the_budget_finishes(tmp_path):
    task = autotune.create_task("test/faulty", (64,))
    assert len(task.config_space) == 12
    option = autotune.measure_option(
        builder=autotune.LocalBuilder(timeout=20, n_parallel=2),
        runner=autotune.LocalRunner(number=1, repeat=1, timeout=3, warmup_ms=0,
                                    check_correctness=True),
    )
    log = tmp_path / "faults.json"
    tuner = autotune.GridSearchTuner(task)
    tuner.tune(12, option, callbacks=[autotune.log_to_file(str(log))], remeasure_top=0)
    by_fault = {}
    for r in autotune.load_from_file(log):
        by_fault.setdefault(r.knobs["fault"], set()).add(MeasureErrorNo(r.result.error_no))
    assert by_fault["none"] == {MeasureErrorNo.NO_ERROR}
    assert by_fault["segfault"] == {MeasureErrorNo.RUNTIME_ERROR}
    assert by_fault["hang"] == {MeasureErrorNo.TIMEOUT}
    assert by_fault["compile_error"] == {MeasureErrorNo.COMPILE_ERROR}
    assert by_fault["wrong"] == {MeasureErrorNo.WRONG_ANSWER}
    assert by_fault["raise"] == {MeasureErrorNo.INSTANTIATION_ERROR}
    assert len(tuner.measured) == 12
    assert tuner.best_config["fault"].val == "none"


KILLED_SCRIPT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {here!r})
    from conftest import FakeBuilder, FakeRunner, fake_cost
    from tecomp import autotune

    def slow(cfg):
        time.sleep(0.05)
        return fake_cost(cfg)

    task = autotune.create_task("test/mm", (32, 32, 16, "float32"))
    autotune.RandomTuner(task, seed=3, batch_size=2).tune(
        60, {{"builder": FakeBuilder(), "runner": FakeRunner(cost=slow)}},
        callbacks=[autotune.log_to_file({log!r})], remeasure_top=0)
""")


def test_sigkill_then_resume_loses_no_record(tmp_path, mm_task):
    log = tmp_path / "killed.json"
    script = tmp_path / "tune.py"
    script.write_text(KILLED_SCRIPT.format(here=os.path.dirname(__file__), log=str(log)))
    proc = subprocess.Popen([sys.executable, str(script)])
    deadline = time.time() + 60
    while time.time() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= 10:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    lines = [ln for ln in log.read_text().splitlines() if ln.strip()]
    assert 10 <= len(lines) < 60
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the last line may be cut mid-write
        before = autotune.load_from_file(log)
    assert len(before) >= len(lines) - 1

    from conftest import FakeBuilder, FakeRunner

    builder = FakeBuilder()
    tuner = autotune.RandomTuner(mm_task, seed=4)
    tuner.tune(len(before) + 10, {"builder": builder, "runner": FakeRunner()},
               callbacks=[autotune.log_to_file(str(log))], resume_from=str(log),
               remeasure_top=0)
    assert len(builder.built) == 10
    assert not {r.config_index for r in before} & set(builder.built)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        after = autotune.load_from_file(log)
    assert [r.to_json() for r in after[: len(before)]] == [r.to_json() for r in before]
    assert len(after) == len(before) + 10
