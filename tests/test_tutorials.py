"""Every tutorial runs start to finish (at a small size, so the suite stays quick)."""

import os
import pathlib
import subprocess
import sys

import pytest

TUTORIALS = sorted((pathlib.Path(__file__).parent.parent / "tutorials").glob("*.py"))


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_tutorial_runs(path):
    env = dict(os.environ, TECOMP_TUTORIAL_N="128", TECOMP_TUTORIAL_QUICK="1")
    proc = subprocess.run([sys.executable, str(path)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "GFLOPS" in proc.stdout
