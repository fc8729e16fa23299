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
