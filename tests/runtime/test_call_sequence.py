"""CallSequence: a module's prepared calls run in order by its native runner."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "codegen"))

from cg_helpers import buf, ld, loop  # noqa: E402

import tecomp  # noqa: E402
from tecomp.errors import RuntimeCheckError  # noqa: E402
from tecomp.ir import FloorDiv, PrimFunc, Store, Var  # noqa: E402
from tecomp.runtime import load_module  # noqa: E402
from tecomp.runtime.module import CallSequence  # noqa: E402

I32 = "int32"


@pytest.fixture(scope="module")
def module():
    """double(X) -> Y and div(Y, Z) -> W, int32 of a symbolic length, in one module."""
    n, i = Var("n"), Var("i")
    X, Y = buf("X", (n,), I32), buf("Y", (n,), I32)
    Z, W = buf("Z", (n,), I32), buf("W", (n,), I32)
    double = PrimFunc("double", (X, Y), loop(i, n, Store(Y, ld(X, i) * 2, i)))
    div = PrimFunc("div", (Y, Z, W), loop(i, n, Store(W, FloorDiv(ld(Y, i), ld(Z, i), I32), i)))
    return tecomp.build([double, div], target="llvm")


def _calls(mod, x, z):
    y, w = np.zeros_like(x), np.full_like(x, -7)
    return mod["double"].prepare(x, y), mod["div"].prepare(y, z, w), y, w


def test_the_calls_run_in_order_with_the_arguments_they_point_at_now(module):
    assert module.run_calls_address is not None
    x, z = np.arange(1, 6, dtype=I32), np.full(5, 3, I32)
    first, second, y, w = _calls(module, x, z)
    run = CallSequence([first, second])
    run()
    np.testing.assert_array_equal(w, (2 * x) // 3)
    x2 = np.arange(10, 15, dtype=I32)
    first.set_pointer(0, x2)  # the tables hold the call's own arrays: no rebuild
    run()
    np.testing.assert_array_equal(w, (2 * x2) // 3)


def test_a_failing_call_stops_the_run_and_is_reported_by_name(module):
    x, z = np.arange(1, 6, dtype=I32), np.array([1, 1, 0, 1, 1], I32)
    first, second, y, w = _calls(module, x, z)
    after, _, y_after, _ = _calls(module, x, np.ones(5, I32))
    with pytest.raises(RuntimeCheckError, match="div.*division by zero"):
        CallSequence([first, second, after])()
    np.testing.assert_array_equal(y, 2 * x)  # the first call ran ...
    np.testing.assert_array_equal(y_after, 0)  # ... the one after the failure did not
    # The failure is cleared: the same calls run again once the divisor is fixed.
    z[2] = 1
    CallSequence([first, second])()
    np.testing.assert_array_equal(w, 2 * x)


def test_an_exported_library_runs_its_calls_natively(module, tmp_path):
    loaded = load_module(module.export_library(str(tmp_path / "m.so")))
    assert loaded.run_calls_address is not None
    x, z = np.arange(1, 6, dtype=I32), np.full(5, 2, I32)
    first, second, y, w = _calls(loaded, x, z)
    CallSequence([first, second])()
    np.testing.assert_array_equal(w, x)
