"""topi.small_types against ml_dtypes and ONNX's reference: every code of each small type
decoded, and floats encoded at the boundaries (ties, the largest finite value and past
it, subnormals, zeros of both signs, infinities, NaN) and over hypothesis' float32 and
float64 sweeps. Results compare as codes, bit for bit."""

import functools

import ml_dtypes
import numpy as np
import onnx.numpy_helper
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tecomp
from tecomp import te
from tecomp.errors import DTypeError
from tecomp.ir import dtype as dt
from tecomp.topi import small_types

import util

FLOATS = list(small_types.FLOATS)
INTEGERS = list(small_types.INTEGERS)


@functools.cache
def _kernel(src: str, fn_key: tuple):
    """A vectorized kernel of ``n`` elements applying ``fn_key``'s conversion, built once
    per key (hypothesis runs many examples through one build)."""
    kind, *args = fn_key
    fn = {"decode": lambda v: small_types.decode(v),
          "encode": lambda v: small_types.encode(v, args[0], saturate=args[1],
                                                 round_mode=args[2]),
          "convert": lambda v: small_types.convert(v, args[0])}[kind]
    n = te.var("n")
    a = te.placeholder((n,), dtype=src, name="a")
    b = te.compute((n,), lambda i: fn(a[i]), name="b")
    s = te.create_schedule(b.op)
    _, inner = s[b].split(b.op.axis[0], factor=8)
    s[b].vectorize(inner)
    return tecomp.build(s, [a, b], target="llvm"), b.dtype


def _run(fn_key: tuple, a: np.ndarray) -> np.ndarray:
    mod, out = _kernel(dt.check_dtype(a.dtype), fn_key)
    b = np.empty(a.shape, dt.numpy_dtype(out))
    mod(a, b)
    return b


def _encode(a, dtype, saturate=True, round_mode="up"):
    return _run(("encode", dtype, saturate, round_mode), a)


def _codes(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8)


def _onnx_cast(x: np.ndarray, dtype: str, saturate: bool) -> np.ndarray:
    """ONNX Cast's reference: saturate_cast for the float8 types, else numpy's astype."""
    if saturate and dtype.startswith("float8"):
        return onnx.numpy_helper.saturate_cast(x, np.dtype(dt.numpy_dtype(dtype)))
    return x.astype(dt.numpy_dtype(dtype))


def _code_range(dtype: str) -> np.ndarray:
    width = small_types.INTEGERS[dtype].bits if dtype in INTEGERS else (
        4 if dtype == "float4_e2m1fn" else 8)
    return np.arange(1 << width, dtype=np.uint8).view(dt.numpy_dtype(dtype))


@pytest.mark.parametrize("dtype", dt.SMALL)
def test_every_code_decodes_as_ml_dtypes_does(dtype):
    a = _code_range(dtype)
    got = _run(("decode",), a)
    want = a.astype(got.dtype)
    view = np.uint32 if got.dtype == np.float32 else got.dtype
    np.testing.assert_array_equal(got.view(view), want.view(view))  # NaNs' signs too


def _boundaries(dtype: str) -> np.ndarray:
    """Every value of ``dtype`` and the float32 values around each midpoint between
    neighbours (the tie itself, one float32 ulp either side), past the largest finite
    value, and the float32 specials."""
    values = np.unique(np.abs(_code_range(dtype).astype(np.float32)))
    values = values[np.isfinite(values)]
    largest = float(ml_dtypes.finfo(dt.numpy_dtype(dtype)).max)
    mids = ((values[1:] + values[:-1]) / 2).astype(np.float32)
    mids = np.concatenate([mids, [largest * 1.0625, largest * 1.125, largest * 1.5,
                                  largest * 2, largest * 4]]).astype(np.float32)
    around = np.concatenate([np.nextafter(mids, np.float32(0)), mids,
                             np.nextafter(mids, np.float32(np.inf))])
    specials = np.array([np.inf, np.nan, 1e-45, 1e-40, 1.1754944e-38, 3.4028235e38, 1e30],
                        np.float32)
    x = np.concatenate([values, around, specials]).astype(np.float32)
    return np.concatenate([x, -x])


@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("dtype", FLOATS)
def test_float32_boundaries_round_as_onnx_cast(dtype, saturate):
    x = _boundaries(dtype)
    got = _encode(x, dtype, saturate)
    want = _onnx_cast(x, dtype, saturate)
    bad = _codes(got) != _codes(want)
    assert not bad.any(), (x[bad][:8], _codes(got)[bad][:8], _codes(want)[bad][:8])


@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("dtype", FLOATS)
def test_float16_and_float64_sources_round_once(dtype, saturate):
    x32 = _boundaries(dtype)
    for x in (x32.astype(np.float64), x32[np.abs(x32) < 65504].astype(np.float16)):
        got = _encode(x, dtype, saturate)
        want = _onnx_cast(x, dtype, saturate)
        np.testing.assert_array_equal(_codes(got), _codes(want))
    # A float64 just past a float32 tie rounds up, where a detour through float32
    # would land on the tie and round to even.
    tie = float(np.float32(1.0625))  # halfway between e4m3fn's 1.0 and 1.125
    x = np.array([tie + 2.0 ** -40, tie - 2.0 ** -40, tie], np.float64)
    np.testing.assert_array_equal(_codes(_encode(x, "float8_e4m3fn")), [0x39, 0x38, 0x38])


float32_arrays = hnp.arrays(np.float32, st.integers(1, 64),
                            elements=st.floats(width=32, allow_nan=True, allow_infinity=True))
float64_arrays = hnp.arrays(np.float64, st.integers(1, 64),
                            elements=st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=60, deadline=None)
@given(x=float32_arrays, dtype=st.sampled_from(FLOATS), saturate=st.booleans())
def test_float32_sweep_rounds_as_onnx_cast(x, dtype, saturate):
    np.testing.assert_array_equal(_codes(_encode(x, dtype, saturate)),
                                  _codes(_onnx_cast(x, dtype, saturate)))


@settings(max_examples=40, deadline=None)
@given(x=float64_arrays, dtype=st.sampled_from(FLOATS), saturate=st.booleans())
def test_float64_sweep_rounds_as_ml_dtypes(x, dtype, saturate):
    np.testing.assert_array_equal(_codes(_encode(x, dtype, saturate)),
                                  _codes(_onnx_cast(x, dtype, saturate)))


def _e8m0_boundaries() -> np.ndarray:
    powers = np.ldexp(np.float32(1), np.arange(-149, 128)).astype(np.float32)
    x = np.concatenate([powers, powers * np.float32(1.5), np.nextafter(powers * 1.5, 0),
                        np.nextafter(powers * 1.5, np.inf), np.nextafter(powers, 0),
                        np.nextafter(powers, np.inf), powers * np.float32(1.25),
                        [0.0, np.inf, np.nan, 3.4028235e38, 1.7014118e38 * 1.5]])
    x = x.astype(np.float32)
    return np.concatenate([x, -x])


@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("round_mode", small_types.ROUND_MODES)
def test_e8m0_rounds_as_onnx_reference(round_mode, saturate):
    x = _e8m0_boundaries()
    got = _encode(x, "float8_e8m0fnu", saturate, round_mode)
    want = onnx.numpy_helper.to_float8e8m0(x, saturate, round_mode)
    bad = _codes(got) != _codes(want)
    assert not bad.any(), (x[bad][:8], _codes(got)[bad][:8], _codes(want)[bad][:8])


@settings(max_examples=40, deadline=None)
@given(x=float32_arrays, round_mode=st.sampled_from(small_types.ROUND_MODES),
       saturate=st.booleans())
def test_e8m0_sweep(x, round_mode, saturate):
    np.testing.assert_array_equal(
        _codes(_encode(x, "float8_e8m0fnu", saturate, round_mode)),
        _codes(onnx.numpy_helper.to_float8e8m0(x, saturate, round_mode)))


@pytest.mark.parametrize("dtype", INTEGERS)
def test_integers_wrap_as_ml_dtypes(dtype):
    x = np.array([-9.0, -8.5, -2.5, -0.7, 0.0, 0.7, 2.5, 7.9, 8.0, 20.0, 1e9], np.float32)
    np.testing.assert_array_equal(_codes(_encode(x, dtype)),
                                  _codes(x.astype(dt.numpy_dtype(dtype))))
    # NaN, infinities and floats past int64 have no integer: 0 (ml_dtypes' choice).
    odd = np.array([np.nan, np.inf, -np.inf, 1e30], np.float32)
    np.testing.assert_array_equal(_codes(_encode(odd, dtype)), [0, 0, 0, 0])
    for src in ("int8", "int64", "uint16", "bool"):
        i = np.arange(-40, 40).astype(src)
        np.testing.assert_array_equal(_codes(_encode(i, dtype)),
                                      _codes(i.astype(dt.numpy_dtype(dtype))))


@pytest.mark.parametrize("src", ["float8_e5m2", "int4", "float4_e2m1fn"])
@pytest.mark.parametrize("dst", ["float32", "float16", "int8", "bool", "float8_e4m3fn",
                                 "uint2"])
def test_convert_between_a_small_type_and_another(src, dst):
    a = _code_range(src)
    got = _run(("convert", dst), a)
    value = a.astype(np.float32)
    if dst == "bool":
        want = value != 0
    elif dst in INTEGERS:
        want = _onnx_cast(value[np.isfinite(value)], dst, True)
        got = got[np.isfinite(value)]
    elif dt.is_small(dst):
        want = _onnx_cast(value, dst, True)
    else:
        # A float's integer is defined where it fits (ONNX; C and LLVM alike).
        ok = dt.is_float(dst) or (np.abs(value) <= np.iinfo(dst).max)
        want = value.astype(dst)
        got, want = got[ok], want[ok]
    np.testing.assert_array_equal(got.view(np.uint8) if got.dtype.itemsize == 1
                                  else got, want.view(np.uint8) if want.dtype.itemsize == 1
                                  else want)


def test_misuse_is_a_clear_error():
    x = te.placeholder((4,), dtype="float32", name="x")
    with pytest.raises(DTypeError, match="round_mode='odd'; allowed: up, down, nearest"):
        small_types.encode(x[0], "float8_e8m0fnu", round_mode="odd")
    with pytest.raises(DTypeError, match="neither float32 nor int8 is a small type"):
        small_types.convert(x[0], "int8")
    with pytest.raises(DTypeError, match="allowed: float8_e4m3fn"):
        small_types.decode(x[0])
    with pytest.raises(DTypeError, match="max_value: int4 is a small type, held as its code"):
        te.max_value("int4")
    # A plain cast, a constant or arithmetic of a small type is refused by the code
    # generator, naming the way.
    q = te.placeholder((4,), dtype="float8_e4m3fn", name="q")
    for what, body in [("cast", lambda i: q[i].astype("float32")),
                       ("constant 1", lambda i: te.if_then_else(i > 0, q[i],
                                                                te.const(1, q.dtype))),
                       ("Add", lambda i: q[i] + q[3 - i])]:
        y = te.compute((4,), body, name="y")
        with pytest.raises(DTypeError, match=f"{what}.*float8_e4m3fn is a small type, held"):
            tecomp.build(te.create_schedule(y.op), [q, y], target="llvm")


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2fnuz", "float8_e8m0fnu",
                                   "int4"])
def test_cuda_kernels_encode_and_decode(dtype, cuda_target):
    """Compiled by NVRTC, run on the GPU or simulated without one."""
    n = 256
    a = te.placeholder((n,), dtype="float32", name="a")
    q = te.compute((n,), lambda i: small_types.encode(a[i], dtype, saturate=False), name="q")
    b = te.compute((n,), lambda i: small_types.decode(q[i]), name="b")
    s = te.create_schedule(b.op)
    for t in (q, b):
        blocks, threads = s[t].split(t.op.axis[0], factor=64)
        s[t].bind(blocks, te.thread_axis("blockIdx.x"))
        s[t].bind(threads, te.thread_axis("threadIdx.x"))
    run = util.compile_schedule(s, [a, q, b], target=cuda_target)
    x = (np.random.default_rng(0).standard_normal(n) * 100).astype(np.float32)
    x[:4] = [np.nan, np.inf, -0.0, 1e6]
    got_q, got_b = np.empty(n, dt.numpy_dtype(dtype)), np.empty(n, b.dtype)
    run(x, got_q, got_b)
    want = (onnx.numpy_helper.to_float8e8m0(x, False, "up") if dtype == "float8_e8m0fnu"
            else _onnx_cast(x, dtype, False))
    np.testing.assert_array_equal(_codes(got_q), _codes(want))
    np.testing.assert_array_equal(got_b, want.astype(b.dtype))


def test_cuda_refuses_a_plain_cast_of_a_small_type(cuda_target):
    q = te.placeholder((64,), dtype="int4", name="q")
    y = te.compute((64,), lambda i: q[i].astype("int32"), name="y")
    s = te.create_schedule(y.op)
    s[y].bind(y.op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(DTypeError, match="is a small type, held as its code"):
        tecomp.build(s, [q, y], target=cuda_target)
