"""Measuring CUDA candidates in the isolated runner process, with the CUDA driver
replaced by a fake one (no GPU here): a kernel that faults on the device is a
RUNTIME_ERROR naming the kernel, costs one trial, and the next candidate runs in a fresh
process (a fresh CUDA context); a healthy one is timed with CUDA events."""

import pytest

from tecomp import autotune
from tecomp.autotune import MeasureErrorNo, MeasureInput

import fake_cuda

@pytest.fixture
def fake_driver(tmp_path, monkeypatch, cuda_target):
    return fake_cuda.install(tmp_path, monkeypatch)


def _measure(n_candidates):
    task = autotune.create_task("matmul.cuda", (16, 8, 16, "float32"), "cuda")
    inputs = [MeasureInput(task, task.config_space.get(i)) for i in range(n_candidates)]
    builder = autotune.LocalBuilder(timeout=60, n_parallel=1)
    runner = autotune.LocalRunner(number=2, repeat=2, timeout=60, warmup_ms=0)
    try:
        builds = builder.build(inputs)
        assert all(b.error_no == MeasureErrorNo.NO_ERROR for b in builds), builds
        return runner.run(inputs, builds)
    finally:
        runner.close()
        builder.close()


def test_faulting_kernel_costs_one_trial_and_the_next_runs_in_a_fresh_process(
        fake_driver, monkeypatch):
    monkeypatch.setenv("TECOMP_TEST_FAULT", "1")
    results = _measure(2)
    assert [r.error_no for r in results] == [MeasureErrorNo.RUNTIME_ERROR] * 2
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in results[0].error_msg
    assert "kernel" in results[0].error_msg
    pids = fake_driver.read_text().split()
    assert len(set(pids)) == 2  # one process per faulting candidate


def test_healthy_kernel_is_timed_with_cuda_events_in_one_process(fake_driver):
    results = _measure(2)
    assert all(r.error_no == MeasureErrorNo.NO_ERROR for r in results)
    # The fake events report 1 ms per batch of ``number`` (2) calls.
    assert all(c == pytest.approx(0.5e-3) for r in results for c in r.costs)
    assert len(set(fake_driver.read_text().split())) == 1
