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


@pytest.fixture
def check_schedule():
    """``check_schedule(s, args, inputs, expected, rtol=, atol=)``: see tests/util.py."""
    return util.check_schedule


@pytest.fixture
def needs_llvm():
    """Skip unless ``tecomp.build`` works (for runtime tests that need a real module)."""
    if not util.llvm_available():
        pytest.skip(util.llvm_status_message())
