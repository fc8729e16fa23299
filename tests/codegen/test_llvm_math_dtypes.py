"""Math intrinsics against numpy, and storage of float16 / int8 / uint8 / bool."""

import math

import numpy as np
import pytest
from cg_helpers import build, elementwise, split_vectorized

from tecomp.ir import Cast, Select
from tecomp.ir import expr as E

_NP = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "fabs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
    "sin": np.sin, "cos": np.cos, "exp2": np.exp2, "log2": np.log2, "log10": np.log10,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "rsqrt": lambda x: 1 / np.sqrt(x),
    "erf": np.vectorize(math.erf),
}
_POSITIVE = {"log", "sqrt", "log2", "log10", "rsqrt"}


@pytest.mark.parametrize("name", sorted(_NP))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("vectorized", [False, True])
def test_unary_intrinsic_matches_numpy(rng, name, dtype, vectorized):
    make = split_vectorized if vectorized else elementwise
    mod = build(make(lambda a: E.Call(a.dtype, name, (a,)), dtype=dtype, nin=1))
    x = rng.random(37) * 6 - 3
    if name in _POSITIVE:
        x = np.abs(x) + 0.1
    if name == "round":
        x = np.concatenate([x, [0.5, 1.5, 2.5, -0.5, -2.5]])  # ties go to even, like numpy
    x = x.astype(dtype)
    out = np.empty_like(x)
    mod(x, out)
    tol = 2e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out, _NP[name](x.astype(np.float64)).astype(dtype), rtol=tol,
                               atol=tol)


def test_pow_intrinsic(rng):
    mod = build(split_vectorized(lambda a, b: E.Call("float32", "pow", (a, b))))
    a = rng.random(20, dtype=np.float32) + 0.5
    b = rng.random(20, dtype=np.float32) * 3
    c = np.empty(20, np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a ** b, rtol=2e-6)


def test_unknown_intrinsic_is_unsupported():
    import tecomp

    with pytest.raises(tecomp.UnsupportedOpError, match="frobnicate"):
        build(elementwise(lambda a: E.Call("float32", "frobnicate", (a,)), nin=1))


@pytest.mark.parametrize("vectorized", [False, True])
def test_float16_storage_and_arithmetic(rng, vectorized):
    make = split_vectorized if vectorized else elementwise
    mod = build(make(lambda a, b: a * b + a, dtype="float16"))
    a = (rng.random(40) * 4).astype(np.float16)
    b = (rng.random(40) * 4).astype(np.float16)
    c = np.empty(40, np.float16)
    mod(a, b, c)
    np.testing.assert_allclose(c.astype(np.float32), (a * b + a).astype(np.float32), rtol=2e-3)
    up = build(make(lambda a: Cast("float32", a) * 2.0, dtype="float16", nin=1,
                    out_dtype="float32"))
    d = np.empty(40, np.float32)
    up(a, d)
    np.testing.assert_array_equal(d, a.astype(np.float32) * 2)


@pytest.mark.parametrize("vectorized", [False, True])
def test_int8_wraps_like_numpy(rng, vectorized):
    make = split_vectorized if vectorized else elementwise
    mod = build(make(lambda a, b: a * b + a, dtype="int8"))
    a = rng.integers(-128, 128, 50).astype(np.int8)
    b = rng.integers(-128, 128, 50).astype(np.int8)
    c = np.empty(50, np.int8)
    mod(a, b, c)
    np.testing.assert_array_equal(c, a * b + a)


@pytest.mark.parametrize("vectorized", [False, True])
def test_bool_storage(rng, vectorized):
    make = split_vectorized if vectorized else elementwise
    mod = build(make(lambda a, b: E.binary(E.GT, a, b), out_dtype="bool"))
    a, b = rng.random(30, dtype=np.float32), rng.random(30, dtype=np.float32)
    c = np.zeros(30, bool)
    mod(a, b, c)
    np.testing.assert_array_equal(c, a > b)
    assert set(c.view(np.uint8)) <= {0, 1}
    neg = build(make(lambda a, b: E.And(a, E.Not(b)), dtype="bool"))
    x, y = rng.random(30) > 0.5, rng.random(30) > 0.5
    z = np.zeros(30, bool)
    neg(x, y, z)
    np.testing.assert_array_equal(z, x & ~y)


def test_uint8_division_and_max(rng):
    mod = build(elementwise(lambda a, b: E.binary(E.Max, E.binary(E.FloorDiv, a, b), a),
                            dtype="uint8"))
    a = rng.integers(0, 256, 40).astype(np.uint8)
    b = rng.integers(1, 256, 40).astype(np.uint8)
    c = np.empty(40, np.uint8)
    mod(a, b, c)
    np.testing.assert_array_equal(c, np.maximum(a // b, a))


def test_float_min_max_and_select(rng):
    f = split_vectorized(lambda a, b: Select(E.binary(E.LT, a, 0.5), E.binary(E.Max, a, b),
                                             E.binary(E.Min, a, b), "float32"))
    mod = build(f)
    a, b = rng.random(33, dtype=np.float32), rng.random(33, dtype=np.float32)
    c = np.empty(33, np.float32)
    mod(a, b, c)
    np.testing.assert_array_equal(c, np.where(a < 0.5, np.maximum(a, b), np.minimum(a, b)))
