"""Every tutorial runs start to finish (at a small size, so the suite stays quick)."""

import os
import pathlib
import subprocess
import sys

import pytest

TUTORIALS = sorted((pathlib.Path(__file__).parent.parent / "tutorials").glob("*.py"))


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_tutorial_runs(path, tmp_path):
    env = dict(os.environ, TECOMP_TUTORIAL_N="128", TECOMP_TUTORIAL_QUICK="1")
    # In a directory of its own: a tutorial may write its tuning log where it runs (the
    # CUDA one does, on a GPU), and tests run side by side in parallel workers.
    proc = subprocess.run([sys.executable, str(path)], env=env, capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "GFLOPS" in proc.stdout
