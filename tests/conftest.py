"""Shared pytest setup: makes the helpers in ``tests/`` (``util.py``, ``ir_eval.py``,
``ir_strategies.py``) importable and offers common fixtures."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import util


@pytest.fixture
def rng():
    """A seeded generator, so a failure reproduces."""
    return np.random.default_rng(0)


@pytest.fixture(params=util.TEST_TARGETS, ids=util.target_id)
def target(request):
    """The target string an end-to-end test builds for, once per ``util.TEST_TARGETS``;
    skipped where modules for it cannot run."""
    reason = util.target_unavailable(request.param)
    if reason is not None:
        pytest.skip(reason)
    return request.param


@pytest.fixture
def needs_llvm():
    """Skip unless ``tecomp.build`` works (for runtime tests that need a real module)."""
    if not util.llvm_available():
        pytest.skip(util.llvm_status_message())


@pytest.fixture
def cuda_target():
    """"cuda", for tests of CUDA schedules: they build with NVRTC and run on the GPU, or
    simulated on the CPU without one (``util.compile_schedule``); skipped without NVRTC."""
    reason = util.target_unavailable("cuda")
    if reason is not None:
        pytest.skip(reason)
    return "cuda"


@pytest.fixture
def gpu():
    """Skip unless a CUDA GPU is usable (for tests marked ``gpu``)."""
    if not util.gpu_available():
        pytest.skip("no CUDA GPU and driver on this machine")


@pytest.fixture
def planar_layout(monkeypatch):
    """Build graphs without the blocked-layout pass, as on a CPU whose vector of float32
    lanes divides none of the test model's channel counts.

    The block is the host's vector width in float32 lanes (16 with AVX-512, 8 with AVX2),
    so an 8-channel model is blocked on one machine and planar on another; graph tests
    whose subject is not the layout (kernel sharing, concatenations in place, the summary)
    pin the planar graph so they check the same graph on every CPU."""
    from tecomp.graph.passes import PIPELINE

    monkeypatch.setattr(sys.modules["tecomp.graph.build"], "pipeline_for",
                        lambda target: PIPELINE)


def pytest_collection_modifyitems(config, items):
    """Run the fuzzer's tests before all others.

    Its harness tests fork one process per case from this process. The fuzzer refuses to
    fork while the process runs other Python threads, and tests before it leave idle ones
    behind (a tqdm progress bar's monitor, a Dask client's event loop); worker threads that
    native code started (the OpenMP pool of a kernel run in this process, onnxruntime's)
    are not Python threads and deadlock a forked child that runs a kernel. (Its fixed
    budget runs in an interpreter of its own, so it needs no place in this order.)

    Under pytest-xdist (``-n``, whose default ``--dist load`` sends each worker a run of
    consecutive tests) the head of this order goes to the first worker before anything
    else.

    Every test that runs CUDA code (its ``cuda_target`` fixture) is also marked ``cuda``,
    so ``-k cuda`` (benchmarks/gpu_check.sh) selects it on a GPU machine, wherever it is."""
    for item in items:
        if "cuda_target" in getattr(item, "fixturenames", ()):
            item.add_marker("cuda")
    items.sort(key=lambda item: "test_onnx_fuzz.py" not in item.nodeid)  # stable
