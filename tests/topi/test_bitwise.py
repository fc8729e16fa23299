"""tecomp.topi.bitwise and trigonometry: the bitwise operators, BitCast and the inverse
trigonometric functions against numpy, built by LLVM and run by the interpreter (the two
implementations of the new intrinsics), and the dtype errors."""

import numpy as np
import pytest
import util

from tecomp import te, topi
from tecomp.errors import DTypeError


def _run(fn, arrays, backend):
    args = [te.placeholder(a.shape, a.dtype, name=f"a{i}") for i, a in enumerate(arrays)]
    out = fn(*args)
    s = te.create_schedule(out.op)
    f = util.compile_schedule(s, args + [out], "llvm", backend)
    result = np.empty([int(d) for d in out.shape], out.dtype)
    f(*arrays, result)
    return result


@pytest.mark.parametrize("backend", ["llvm", "interp"])
@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "uint64"])
def test_bitwise_operators_match_numpy(needs_llvm, rng, backend, dtype):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (3, 5), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, (5,), dtype=dtype, endpoint=True)
    for fn, ref in ((topi.bitwise_and, np.bitwise_and), (topi.bitwise_or, np.bitwise_or),
                    (topi.bitwise_xor, np.bitwise_xor)):
        np.testing.assert_array_equal(_run(fn, [a, b], backend), ref(a, b))
    np.testing.assert_array_equal(_run(topi.bitwise_not, [a], backend), np.invert(a))


@pytest.mark.parametrize("backend", ["llvm", "interp"])
@pytest.mark.parametrize("src, dst", [("float32", "int32"), ("int64", "float64"),
                                      ("float16", "uint16"), ("bool", "uint8"),
                                      ("uint8", "bool"), ("int8", "uint8")])
def test_bitcast_keeps_the_bits(needs_llvm, backend, src, dst):
    x = np.array([0, 1, 3, 64, 127], "uint8").astype(src)
    if np.dtype(src).kind == "f":
        x = np.array([1.5, -0.0, np.inf, -2.25, 1e-3], src)
    got = _run(lambda t: topi.bitcast(t, dst), [x], backend)
    want = x.view("uint8").astype(bool) if dst == "bool" else x.view(dst)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", ["llvm", "interp"])
def test_inverse_trigonometric_functions(needs_llvm, backend):
    x = np.array([-1.0, -0.5, 0.0, 0.25, 1.0, 3.0], "float32")
    for fn, ref in ((topi.asin, np.arcsin), (topi.acos, np.arccos), (topi.atan, np.arctan)):
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(_run(fn, [x], backend), ref(x), rtol=1e-6)


def test_misuse_is_a_dtype_error():
    f = te.placeholder((4,), "float32", name="f")
    i8, i16 = (te.placeholder((4,), d, name=d) for d in ("int8", "int16"))
    with pytest.raises(DTypeError, match="must have one integer dtype"):
        topi.bitwise_and(f, f)
    with pytest.raises(DTypeError, match="must have one integer dtype"):
        topi.bitwise_or(i8, i16)
    with pytest.raises(DTypeError, match="float32 \\(32 bits\\) cannot be read as int64"):
        topi.bitcast(f, "int64")
    with pytest.raises(DTypeError, match="te.asin needs a float expression"):
        topi.asin(i8)
