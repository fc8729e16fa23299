"""examples/c: a C program calls an exported matmul (linked, through the generated
header) and conv2d (dlopen, through the function table) without Python, and its results
match numpy; on this machine, and cross-built for AArch64 under qemu-user."""

import os
import subprocess
import sys

import pytest
from util import target_unavailable

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "examples", "c", "run.sh")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("arch", ["host", "aarch64"])
def test_c_example_matches_numpy(arch, tmp_path):
    if arch != "host":
        reason = target_unavailable(f"llvm -mtriple={arch}-linux-gnu")
        if reason:
            pytest.skip(reason)
    env = dict(os.environ, OUT=str(tmp_path), PYTHONPATH=REPO)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    res = subprocess.run(["bash", SCRIPT, arch], capture_output=True, text=True, env=env,
                         timeout=300, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "mm      3200 values" in res.stdout and "conv2d  3136 values" in res.stdout
    assert res.stdout.count("matches numpy") == 2, res.stdout
    assert (tmp_path / "demo").exists() and (tmp_path / "mm.h").exists()
