"""A vectorized reduction axis: the lanes compute the operand together and are combined in
pairs (``tecomp.ir.analysis.lane_reduction``), a tree of shuffles instead of a chain of
one scalar operation per element; results as numpy's."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tecomp
from tecomp import te

REDUCERS = {"sum": (te.sum, np.sum), "prod": (te.prod, np.prod),
            "max": (te.max, np.max), "min": (te.min, np.min)}


def _row_reduction(reducer, n, dtype, rows=3, split=None):
    """``B[i] = reducer(A[i, k])`` over ``n`` with ``k`` (or its inner part, split by
    ``split``) vectorized; the built function, its lowered text and its LLVM IR."""
    a = te.placeholder((rows, n), dtype, name="A")
    k = te.reduce_axis((0, n), name="k")
    b = te.compute((rows,), lambda i: REDUCERS[reducer][0](a[i, k], axis=k), name="B")
    s = te.create_schedule(b.op)
    lanes = k
    if split is not None:
        _, lanes = s[b].split(k, factor=split)
    s[b].vectorize(lanes)
    f = tecomp.build(s, [a, b])
    return f, str(tecomp.lower(s, [a, b])), f.get_source("ll")


def _data(reducer, shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype.startswith("int"):
        return rng.integers(-3, 4 if reducer != "prod" else 2, size=shape).astype(dtype)
    # Near 1 for products, so that a long one neither overflows nor vanishes.
    if reducer == "prod":
        return rng.uniform(0.9, 1.1, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _check(f, reducer, n, dtype, rows=3, seed=0):
    a = _data(reducer, (rows, n), dtype, seed)
    out = np.empty(rows, dtype)
    f(a, out)
    expected = REDUCERS[reducer][1](a.astype(np.float64 if dtype.startswith("f") else dtype),
                                    axis=1)
    if dtype.startswith("int"):
        np.testing.assert_array_equal(out, expected.astype(dtype))
    else:
        tol = 1e-5 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * np.sqrt(n))


@pytest.mark.parametrize("reducer", list(REDUCERS))
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("n", [1, 2, 7, 16, 33, 100])
def test_a_vectorized_reduction_axis_matches_numpy(reducer, dtype, n):
    f, text, _ = _row_reduction(reducer, n, dtype)
    if n > 1:  # a loop of one iteration is none
        assert "# vectorized" in text.split("for k in range")[1]
    _check(f, reducer, n, dtype)


def test_the_lanes_are_combined_in_a_tree():
    _, _, ll = _row_reduction("sum", 32, "float32", rows=1)
    body = ll[ll.index("@tecomp_default_function("):]
    body = body[:body.index("\n}")]
    assert "load <32 x float>" in body
    # 32 lanes halved to 16, 8, 4 and 2, where a chain would add 32 scalars one by one.
    for lanes in (16, 8, 4, 2):
        assert f"fadd contract <{lanes} x float>" in body
    assert body.count("fadd contract float") <= 2  # (the last pair) and the accumulator


def test_a_reduction_axis_that_is_not_one_update_runs_serially():
    # Split by 5 over 33 elements: the inner loop holds a guard, so it is no update the
    # lanes can combine; it stays a serial loop (with the request as a hint), still right.
    f, text, _ = _row_reduction("sum", 33, "float32", split=5)
    assert "serial, vectorize requested" in text
    _check(f, "sum", 33, "float32")


@settings(max_examples=30, deadline=None)
@given(reducer=st.sampled_from(sorted(REDUCERS)), n=st.integers(1, 150),
       split=st.one_of(st.none(), st.sampled_from([2, 4, 8, 16, 64])),
       seed=st.integers(0, 2 ** 16))
def test_vectorized_reductions_of_any_length_and_split(reducer, n, split, seed):
    if split is not None and split > n:
        split = None
    f, _, _ = _row_reduction(reducer, n, "float32", split=split)
    _check(f, reducer, n, "float32", seed=seed)
