"""A task carries its target: templates run inside its scope, records keep its string."""

import os
import subprocess
import sys
import time

import pytest

from tecomp import autotune, te
from tecomp.autotune import MeasureErrorNo, MeasureResult
from tecomp.autotune.records import make_record
from tecomp.autotune.task import TemplateError, has_tuned_record
from tecomp.target import Target

AARCH64 = "llvm -mtriple=aarch64-linux-gnu"

#: (str(Target.current()), config index or None) of each run of the probe template.
SEEN = []


@autotune.template("test/target_probe")
def probe(n):
    cfg = autotune.get_config()
    cfg.define_knob("lanes", [1, 2, 4, 8])
    cur = Target.current()
    index = None if cfg.is_fallback else getattr(cfg, "index", None)  # a space has none
    SEEN.append((None if cur is None else str(cur), index))
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    return te.create_schedule(B.op), [A, B]


def _record(task, index, cost):
    res = MeasureResult((cost, cost), MeasureErrorNo.NO_ERROR, "", 0.1, time.time())
    return make_record(task, task.config_space.get(index), res)


def test_task_keeps_a_target_and_logs_its_string():
    task = autotune.create_task("test/target_probe", (8,), AARCH64)
    assert isinstance(task.target, Target)
    assert task.target.target_arch == "aarch64"
    assert _record(task, 1, 1e-3).target == AARCH64
    assert autotune.create_task("test/target_probe", (8,)).target == Target("llvm")
    assert _record(autotune.create_task("test/target_probe", (8,)), 1, 1e-3).target == "llvm"


def test_templates_run_inside_the_task_target_scope():
    task = autotune.create_task("test/target_probe", (8,), AARCH64)
    SEEN.clear()
    task.instantiate(2)
    task.instantiate()
    assert [t for t, _ in SEEN] == [AARCH64, AARCH64]
    assert Target.current() is None


def test_apply_history_best_under_a_target_scope_uses_that_target_records():
    arm = autotune.create_task("test/target_probe", (8,), AARCH64)
    host = autotune.create_task("test/target_probe", (8,), "llvm")
    records = [_record(arm, 2, 1e-3), _record(host, 3, 1e-4)]
    with autotune.apply_history_best(records):
        SEEN.clear()
        probe(8)
        with Target(AARCH64):
            probe(8)
        arm.instantiate()
    # Outside a scope, the host's record; inside the aarch64 scope, aarch64's (the
    # fallback runs that compute each task's hash are left out).
    assert [seen for seen in SEEN if seen[1] is not None] == [(None, 3), (AARCH64, 2), (AARCH64, 2)]


def test_has_tuned_record_answers_for_the_records_of_the_target():
    arm = autotune.create_task("test/target_probe", (8,), AARCH64)
    with autotune.apply_history_best([_record(arm, 2, 1e-3)]) as history:
        assert has_tuned_record("test/target_probe", (8,), AARCH64)
        assert has_tuned_record("test/target_probe", [8], Target(AARCH64))
        with Target(AARCH64):
            assert has_tuned_record("test/target_probe", (8,))
        assert not has_tuned_record("test/target_probe", (8,))  # the host has none
        assert not has_tuned_record("test/target_probe", (16,), AARCH64)
    # As a call of the template would, the answers without a record note a fallback.
    assert history.fallbacks == [("test/target_probe", (8,)), ("test/target_probe", (16,))]
    with pytest.raises(TemplateError, match="no template named 'test/none'; registered:"):
        has_tuned_record("test/none", (8,))
    with pytest.raises(TemplateError, match="bad arguments"):
        has_tuned_record("test/target_probe", (8, 9))


def _python(code):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize("imports", ["import tecomp.autotune as autotune",
                                     "from tecomp import autotune",
                                     "import tecomp.topi\nfrom tecomp import autotune"])
def test_importing_the_autotuner_registers_the_built_in_templates(imports):
    # tecomp.topi registers its templates with the autotuner; the autotune package imports
    # it by name (tecomp.BUILTIN_TEMPLATES), so every way of importing finds them.
    assert _python(f"{imports}\n"
                   "print(autotune.create_task('matmul', (8, 8, 8), 'llvm').name)") == "matmul"


def test_a_task_label_is_its_template_label_or_name_and_args():
    from tecomp.topi.fused_group import GROUP_TEMPLATE

    assert autotune.create_task("matmul", (64, 48, 32)).label == "matmul(64, 48, 32, 'float32')"
    group = ((((1, 8, 4), "float32"), ((1, 8, 1), "float32")),
             (("multiply", (), (0, 1)), ("relu", (), (2,))), 0, 3)
    task = autotune.create_task(GROUP_TEMPLATE, group)
    assert task.label == "fused_group[multiply,relu] of float32 1x8x4, 1x8x1"
