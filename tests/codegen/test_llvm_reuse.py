"""The LLVM emitter computes an expression that comes again in one statement once
(tecomp.codegen.llvm.reuse): across the masked sides of a lazy select and its scalar
branches, never across a store, a branch it was computed in, or a new value of a
variable it reads."""

import numpy as np
import pytest
from cg_helpers import F32, buf, build, elementwise, ld, loop, split_vectorized
from hypothesis import given, settings
from hypothesis import strategies as st

from tecomp.codegen.llvm.emit import Emitter
from tecomp.ir import IntImm, PrimFunc, Select, Store, Var
from tecomp.ir import expr as E


def _log(x):
    return E.Call(F32, "log", (x,))


def _bias(a, b):
    # log(a) is computed unconditionally, then again on both lazily evaluated sides of a
    # select whose sides read memory (so they are masked or branched on).
    return _log(a) * 0.5 + Select(a > 1.0, _log(a) * b, _log(a) + b, F32)


def _reference(a, b):
    la = np.log(a)
    return la * 0.5 + np.where(a > 1.0, la * b, la + b)


@pytest.fixture
def logs_emitted(monkeypatch):
    count = {"log": 0}
    call = Emitter.ev_Call

    def counting(self, e):
        count["log"] += e.name == "log"
        return call(self, e)

    monkeypatch.setattr(Emitter, "ev_Call", counting)
    return count


@pytest.mark.parametrize("make", [split_vectorized, elementwise], ids=["vector", "scalar"])
def test_a_repeated_expression_is_computed_once(make, logs_emitted, rng):
    mod = build(make(_bias))
    # Vector code: the main body and the tail guard's masked body; scalar code: one body.
    assert logs_emitted["log"] == (2 if make is split_vectorized else 1)
    a = rng.uniform(0.1, 3.0, 37).astype(F32)
    b = rng.standard_normal(37).astype(F32)
    c = np.empty(37, F32)
    mod(a, b, c)
    np.testing.assert_allclose(c, _reference(a, b), rtol=1e-5, atol=1e-6)


def test_a_value_computed_under_a_mask_is_not_used_outside_it(logs_emitted, rng):
    # log(a) first appears on one side of the select: the other occurrence, after it,
    # computes it again (the masked value has no lanes where the condition is false).
    def f(a, b):
        return Select(a > 1.0, _log(a) * b, b, F32) + _log(a)

    mod = build(split_vectorized(f))
    assert logs_emitted["log"] == 4
    a = rng.uniform(0.1, 3.0, 40).astype(F32)
    b = rng.standard_normal(40).astype(F32)
    c = np.empty(40, F32)
    mod(a, b, c)
    np.testing.assert_allclose(c, np.where(a > 1.0, np.log(a) * b, b) + np.log(a), rtol=1e-5)


def test_unrolled_iterations_read_their_own_values(rng):
    # One statement per iteration, each reading the value the one before stored.
    A, C = buf("A", (IntImm(8),)), buf("C", (IntImm(8),))
    i = Var("i")
    prev = ld(C, i - 1)
    body = loop(i, 7, Store(C, Select(ld(A, i) > 0.0, prev * 2.0, prev - 1.0, F32) + prev, i),
                "unrolled", start=1)
    mod = build(PrimFunc("chain", (A, C), body))
    a = rng.standard_normal(8).astype(F32)
    c = np.ones(8, F32)
    mod(a, c)
    want = np.ones(8, F32)
    for k in range(1, 8):
        want[k] = (want[k - 1] * 2 if a[k] > 0 else want[k - 1] - 1) + want[k - 1]
    np.testing.assert_allclose(c, want)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 70), st.floats(0.2, 2.5), st.sampled_from([1, 16, 64]))
def test_repeats_under_masks_and_tails_match_numpy(n, threshold, lanes):
    def f(a, b):
        inner = Select(a > threshold, _log(a) * b, b - _log(a), F32)
        return Select(b > 0.0, inner + _log(a), inner * b, F32) + inner

    mod = build(split_vectorized(f, lanes=lanes))
    rng = np.random.default_rng(n)
    a = rng.uniform(0.1, 3.0, n).astype(F32)
    b = rng.standard_normal(n).astype(F32)
    c = np.empty(n, F32)
    mod(a, b, c)
    la = np.log(a)
    inner = np.where(a > threshold, la * b, b - la)
    want = np.where(b > 0, inner + la, inner * b) + inner
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
