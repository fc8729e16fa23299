"""The test helpers really exercise ``tecomp.build``, and building is robust across the
lifetime of modules (checked in subprocesses, where a crash is a failure, not an abort)."""

import subprocess
import sys
import textwrap

import pytest
import util


def test_llvm_backend_works_when_importable():
    """When ``tecomp.build`` exists the suites must run through it, not silently fall
    back to the interpreter because it is broken."""
    try:
        import tecomp.build_module  # noqa: F401
    except ImportError:
        pytest.skip("tecomp.build is not there yet")
    assert util.llvm_available(), util.llvm_status_message()


def _run(code: str):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          check=False,
                          text=True, timeout=120)


def test_build_after_module_freed(needs_llvm):
    """Codegen bug 1 (fixed): a freed JIT engine destroyed a shared TargetMachine."""
    r = _run("""
        import gc
        import numpy as np
        import tecomp
        from tecomp import te
        for n in range(3):
            a = te.placeholder((5 + n,), name="a")
            b = te.compute((5 + n,), lambda i: a[i] + 1.0, name="b")
            mod = tecomp.build(te.create_schedule(b.op), [a, b], target="llvm")
            x = np.arange(5 + n, dtype="float32")
            y = np.zeros(5 + n, "float32")
            mod(x, y)
            assert (y == x + 1).all()
            del mod
            gc.collect()
        print("ok")
    """)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]
