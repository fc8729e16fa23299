"""The runners measure a disturbed candidate again, a bounded number of times, and write
what is still disturbed with its reason (synthetic costs, no timing)."""

from tecomp.autotune import MeasureErrorNo, MeasureInput
from tecomp.autotune.measure import REMEASURE_DISTURBED, BuildResult, OffHostRunner, _until_sound

TICKS = [8e-3, 8e-3, 1e-2, 7e-3]   # a busy machine: whole milliseconds
SOUND = [1.0e-4, 1.1e-4, 1.0e-4]


def _measures(*answers):
    calls = []

    def measure():
        calls.append(1)
        return answers[len(calls) - 1]
    return measure, calls


def test_a_sound_measurement_is_kept_as_it_is():
    measure, calls = _measures()
    assert _until_sound(SOUND, measure) == (tuple(SOUND), "")
    assert calls == []


def test_a_disturbed_one_is_replaced_by_the_first_sound_remeasure():
    measure, calls = _measures(TICKS, SOUND, TICKS)
    assert _until_sound(TICKS, measure) == (tuple(SOUND), "")
    assert len(calls) == 2


def test_a_machine_busy_throughout_gives_a_flagged_measurement_after_a_bound():
    measure, calls = _measures(*[TICKS] * 10)
    costs, why = _until_sound(TICKS, measure)
    assert costs == tuple(TICKS) and why.startswith("whole scheduler ticks")
    assert len(calls) == REMEASURE_DISTURBED


def test_a_failed_remeasure_keeps_the_flagged_one():
    measure, calls = _measures(None)
    costs, why = _until_sound(TICKS, measure)
    assert costs == tuple(TICKS) and why and len(calls) == 1


def test_off_host_runner_writes_the_reason(mm_task, monkeypatch):
    runner = OffHostRunner(runner=None, number=1, repeat=4)
    answers = iter([TICKS] * (1 + REMEASURE_DISTURBED))
    monkeypatch.setattr(runner, "_time", lambda *a: next(answers))
    inp = MeasureInput(mm_task, mm_task.config_space.get(0))
    (res,) = runner.run([inp], [BuildResult("lib.so", ())])
    assert res.error_no == MeasureErrorNo.NO_ERROR and res.costs == tuple(TICKS)
    assert res.disturbed.startswith("whole scheduler ticks") and not res.sound
