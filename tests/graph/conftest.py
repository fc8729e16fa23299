"""Fixtures of the graph tests."""

import sys

import pytest

from tecomp.graph.passes import PIPELINE


@pytest.fixture
def planar_layout(monkeypatch):
    """Build graphs without the blocked-layout pass, as on a CPU whose vector of float32
    lanes divides none of the test model's channel counts.

    The block is the host's vector width in float32 lanes (16 with AVX-512, 8 with AVX2),
    so an 8-channel model is blocked on one machine and planar on another; tests whose
    subject is not the layout (kernel sharing, concatenations in place, the summary) pin
    the planar graph so they check the same graph on every CPU."""
    module = sys.modules["tecomp.graph.build"]
    monkeypatch.setattr(module, "pipeline_for", lambda target: PIPELINE)
