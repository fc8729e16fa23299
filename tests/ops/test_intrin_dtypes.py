"""Math intrinsics against numpy (scalar, vectorized and tail lanes), casts and the
listed dtypes (float16 storage, int8, uint8, int64, float64, bool)."""

import math

import numpy as np
import pytest
from util import check_schedule, rand

from tecomp import te

N = 19  # vectorized by 8: two full vectors and a tail of 3

_erf = np.vectorize(math.erf, otypes=["float64"])

# name -> (te builder, numpy reference on float64, input range)
UNARY = {
    "exp": (te.exp, np.exp, (-5, 5)),
    "log": (te.log, np.log, (0.01, 10)),
    "sqrt": (te.sqrt, np.sqrt, (0, 10)),
    "rsqrt": (te.rsqrt, lambda x: 1 / np.sqrt(x), (0.05, 10)),
    "tanh": (te.tanh, np.tanh, (-4, 4)),
    "sigmoid": (te.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-8, 8)),
    "erf": (te.erf, _erf, (-3, 3)),
    "abs": (te.abs, np.abs, (-3, 3)),
    "floor": (te.floor, np.floor, (-3, 3)),
    "ceil": (te.ceil, np.ceil, (-3, 3)),
    "round": (te.round, np.rint, (-3, 3)),
}


def _schedule(s, out, how):
    if how == "vectorize_tail":
        xo, xi = s[out].split(out.op.axis[0], factor=8)
        s[out].vectorize(xi)
    elif how == "unroll_parallel":
        xo, xi = s[out].split(out.op.axis[0], factor=4)
        s[out].unroll(xi)
        s[out].parallel(xo)


@pytest.mark.parametrize("how", ["scalar", "vectorize_tail", "unroll_parallel"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_intrinsic(name, dtype, how, rng, target):
    fn, ref, (lo, hi) = UNARY[name]
    x = te.placeholder((N,), dtype=dtype, name="x")
    out = te.compute((N,), lambda i: fn(x[i]), name=name)
    s = te.create_schedule(out.op)
    _schedule(s, out, how)
    xv = rand(rng, (N,), dtype, lo, hi)
    if name in ("floor", "ceil", "round", "abs"):
        # exact halves, integers, negative zero: where rounding modes differ
        xv[:8] = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 2.0], dtype)
    expected = ref(xv.astype("float64")).astype(dtype)
    tol = 1e-6 if dtype == "float32" else 1e-12
    check_schedule(s, [x, out], [xv], [expected], rtol=tol * 4, atol=tol, target=target)


@pytest.mark.parametrize("how", ["scalar", "vectorize_tail"])
def test_power(how, rng, target):
    x = te.placeholder((N,), name="x")
    y = te.placeholder((N,), name="y")
    out = te.compute((N,), lambda i: te.power(x[i], y[i]) + x[i] ** 2.0, name="pow")
    s = te.create_schedule(out.op)
    _schedule(s, out, how)
    xv, yv = rand(rng, (N,), lo=0.1, hi=3), rand(rng, (N,), lo=-2, hi=2)
    ref = (np.power(xv.astype("float64"), yv) + xv.astype("float64") ** 2).astype("float32")
    check_schedule(s, [x, y, out], [xv, yv], [ref], rtol=1e-5, atol=1e-6, target=target)


def test_intrinsics_special_values(target):
    """IEEE semantics: inf, nan and signed zero pass through as numpy has them."""
    x = te.placeholder((8,), name="x")
    e = te.compute((8,), lambda i: te.exp(x[i]), name="e")
    lg = te.compute((8,), lambda i: te.log(x[i]), name="lg")
    sq = te.compute((8,), lambda i: te.sqrt(x[i]), name="sq")
    th = te.compute((8,), lambda i: te.tanh(x[i]), name="th")
    s = te.create_schedule([e.op, lg.op, sq.op, th.op])
    xv = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 100.0], "float32")
    with np.errstate(all="ignore"):
        refs = [np.exp(xv), np.log(xv), np.sqrt(xv), np.tanh(xv)]
    outs = check_schedule(s, [x, e, lg, sq, th], [xv], refs, rtol=1e-6, atol=0, target=target)
    assert np.signbit(outs[2][1]), "sqrt(-0.0) is -0.0"


def test_float16_elementwise_direct(rng, target):
    """float16 arithmetic computed in float16 (result rounded to float16 per operation)."""
    a = te.placeholder((N,), dtype="float16", name="a")
    b = te.placeholder((N,), dtype="float16", name="b")
    out = te.compute((N,), lambda i: a[i] * b[i] + a[i], name="out")
    s = te.create_schedule(out.op)
    _schedule(s, out, "vectorize_tail")
    av, bv = rand(rng, (N,), "float16", -4, 4), rand(rng, (N,), "float16", -4, 4)
    ref = (av.astype("float32") * bv + av).astype("float16")
    check_schedule(s, [a, b, out], [av, bv], [ref], rtol=2e-3, atol=2e-3, target=target)


def test_float16_to_float32_exp_and_back(rng, target):
    a = te.placeholder((N,), dtype="float16", name="a")
    out = te.compute((N,), lambda i: te.exp(a[i].astype("float32")).astype("float16"),
                     name="out")
    s = te.create_schedule(out.op)
    _schedule(s, out, "vectorize_tail")
    av = rand(rng, (N,), "float16", -3, 3)
    ref = np.exp(av.astype("float32")).astype("float16")
    check_schedule(s, [a, out], [av], [ref], rtol=1e-3, atol=1e-3, target=target)


def test_float16_sum_accumulates_in_float32(rng, target):
    """A long float16 sum accumulated in float32 stays accurate."""
    a = te.placeholder((4, 300), dtype="float16", name="a")
    k = te.reduce_axis((0, 300), name="k")
    acc = te.compute((4,), lambda i: te.sum(a[i, k].astype("float32"), axis=k), name="acc")
    out = te.compute((4,), lambda i: acc[i].astype("float16"), name="out")
    s = te.create_schedule(out.op)
    s[acc].compute_at(s[out], out.op.axis[0])
    av = rand(rng, (4, 300), "float16", 0, 1)
    ref = av.astype("float32").sum(axis=1).astype("float16")
    check_schedule(s, [a, out], [av], [ref], rtol=1e-3, target=target)


CASTS = [
    ("float32", "int32", [-2.7, -0.5, 0.0, 0.5, 1.9, 100.2, -100.9, 7.0]),  # truncation
    ("int32", "float32", [-5, 0, 3, 1 << 20, -(1 << 20), 7, 8, 9]),
    ("int8", "int32", [-128, -1, 0, 1, 127, 5, -5, 64]),
    ("int32", "int8", [300, -300, 127, 128, -129, 0, 255, 256]),  # wraps like numpy
    ("uint8", "float32", [0, 1, 127, 128, 200, 255, 3, 4]),
    ("float32", "uint8", [0.0, 1.5, 127.9, 128.0, 200.2, 255.0, 3.0, 4.0]),
    ("int64", "float64", [-(1 << 40), 0, 1 << 40, 3, 5, 7, 9, 11]),
    ("float64", "float32", [1e-3, 1.0 / 3, 2.0, -7.5, 1e30, -1e-30, 0.0, 3.25]),
    ("float32", "float16", [1.0 / 3, 65504.0, -2.0, 1e-4, 0.0, 7.0, -0.125, 3.1]),
    ("int32", "int64", [-(1 << 31), (1 << 31) - 1, 0, 1, -1, 5, 6, 7]),
]


@pytest.mark.parametrize("src,dst,values", CASTS, ids=[f"{s}-{d}" for s, d, _ in CASTS])
def test_cast(src, dst, values, target):
    x = te.placeholder((8,), dtype=src, name="x")
    out = te.compute((8,), lambda i: x[i].astype(dst), name="out")
    s = te.create_schedule(out.op)
    _xo, xi = s[out].split(out.op.axis[0], factor=4)
    s[out].vectorize(xi)
    xv = np.array(values, dtype=src)
    with np.errstate(all="ignore"):
        ref = xv.astype(dst)
    check_schedule(s, [x, out], [xv], [ref], rtol=0, atol=0, target=target)


def test_bool_output_from_comparison(rng, target):
    x = te.placeholder((N,), name="x")
    out = te.compute((N,), lambda i: x[i] > 0.0, name="pos")
    assert out.dtype == "bool"
    s = te.create_schedule(out.op)
    _schedule(s, out, "vectorize_tail")
    xv = rand(rng, (N,))
    check_schedule(s, [x, out], [xv], [xv > 0], target=target)


def test_bool_input_select(rng, target):
    m = te.placeholder((N,), dtype="bool", name="mask")
    x = te.placeholder((N,), name="x")
    out = te.compute((N,), lambda i: te.if_then_else(m[i], x[i], -x[i]), name="out")
    s = te.create_schedule(out.op)
    _schedule(s, out, "vectorize_tail")
    mv, xv = rand(rng, (N,), "bool"), rand(rng, (N,))
    check_schedule(s, [m, x, out], [mv, xv], [np.where(mv, xv, -xv)], target=target)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64"])
def test_integer_arith_wraps_like_numpy(dtype, rng, target):
    x = te.placeholder((N,), dtype=dtype, name="x")
    y = te.placeholder((N,), dtype=dtype, name="y")
    out = te.compute((N,), lambda i: x[i] * y[i] + x[i] - y[i], name="out")
    s = te.create_schedule(out.op)
    _schedule(s, out, "vectorize_tail")
    info = np.iinfo(dtype)
    xv = rng.integers(info.min, info.max, size=N, endpoint=True).astype(dtype)
    yv = rng.integers(info.min, info.max, size=N, endpoint=True).astype(dtype)
    with np.errstate(all="ignore"):
        ref = xv * yv + xv - yv
    check_schedule(s, [x, y, out], [xv, yv], [ref], target=target)


@pytest.mark.parametrize("dtype", ["int8", "int32", "float32", "float64"])
def test_max_min_value_constants(dtype, target):
    x = te.placeholder((4,), dtype=dtype, name="x")
    out = te.compute((4,), lambda i: te.min(te.max(x[i], te.min_value(dtype)),
                                            te.max_value(dtype)), name="out")
    s = te.create_schedule(out.op)
    info = np.finfo(dtype) if dtype.startswith("float") else np.iinfo(dtype)
    xv = np.array([info.min, info.max, 0, 1], dtype)
    check_schedule(s, [x, out], [xv], [xv], target=target)
