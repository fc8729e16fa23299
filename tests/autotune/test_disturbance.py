"""Disturbed measurements told from a kernel's own speed, on synthetic cost lists."""

import pytest

from tecomp.autotune.disturbance import FAR_OFF_LIMIT, SPREAD_LIMIT, disturbance


@pytest.mark.parametrize("costs, trial", [
    ([1.0e-3, 1.1e-3, 0.95e-3, 1.2e-3], None),          # drift of ±20%
    ([8.01e-3, 7.99e-3, 8.03e-3], None),                  # a real 8 ms kernel
    ([8.01e-3, 7.99e-3, 8.03e-3], 7.5e-3),                # ... and its own trial
    ([7e-5, 7.2e-5, 6.9e-5], 7e-5),                       # a 0.07 ms dense as tuned
    ([2.0e-4, 2.6e-4], 1.0e-4),                           # 2.3x its trial: drift and cache
    ([], None),
])
def test_sound_measurements_pass(costs, trial):
    assert disturbance(costs, trial) == ""


def test_the_logged_mobilenet_dense_is_whole_ticks_beside_its_trial():
    # The final re-measurement of a 1x1280x1000 dense that runs in 0.07 ms.
    why = disturbance([0.0080, 0.0080, 0.0100, 0.0080, 0.0070], trial_cost=7e-5)
    assert why == ("whole scheduler ticks: every repeat a multiple of 1 ms while the trial "
                   "took 0.07 ms")


def test_ticks_on_different_multiples_need_no_trial():
    assert disturbance([0.0080, 0.0080, 0.0100, 0.0070]) == (
        "whole scheduler ticks: the repeats sit on [7, 8, 10] x 1 ms")


def test_four_millisecond_ticks():
    # 4.2, 8.1 ms are not whole milliseconds but are whole 4 ms ticks (HZ=250).
    assert disturbance([4.2e-3, 8.1e-3, 4.1e-3]) == (
        "whole scheduler ticks: the repeats sit on [1, 2] x 4 ms")
    assert disturbance([4.2e-3, 4.1e-3], trial_cost=5e-4) == (
        "whole scheduler ticks: every repeat a multiple of 4 ms while the trial took 0.5 ms")


def test_repeats_that_disagree():
    slow = 1e-4 * (SPREAD_LIMIT + 0.5)
    assert disturbance([1e-4, slow, slow * 1.1]) == (
        "repeats disagree: the median 2.5x the fastest")


def test_one_slow_batch_the_median_absorbs_is_no_sign():
    assert disturbance([6.4e-4, 6.35e-4, 8.71e-3]) == ""


def test_far_off_the_trials_own_figure():
    trial = 1e-4
    assert disturbance([trial * (FAR_OFF_LIMIT + 1)] * 3, trial) == (
        "4.0x the trial's own figure (0.1 ms)")
    # Faster than its trial is not the machine's doing: the trial was the unlucky one.
    assert disturbance([trial / 5] * 3, trial) == ""
