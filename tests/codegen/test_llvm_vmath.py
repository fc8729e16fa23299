"""Vector math (``codegen.llvm.vmath``) against a float64 reference, in ulps of float32."""

import math
import platform

import numpy as np
import pytest
from cg_helpers import X86_AVX512, build, elementwise, split_vectorized
from util import callable_module

from tecomp import te
from tecomp.ir import expr as E


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x < 0, e, 1.0) / (1.0 + e)


#: name -> (float64 reference, the ulp bound stated in vmath's docstring, sweep range).
_FUNCS = {
    "exp": (np.exp, 1.02, (-110.0, 95.0)),
    "exp2": (np.exp2, 1.0, (-155.0, 130.0)),
    "log": (np.log, 1.0, (0.0, 100.0)),
    "log2": (np.log2, 1.5, (0.0, 100.0)),
    "log10": (np.log10, 2.0, (0.0, 100.0)),
    "tanh": (np.tanh, 2.0, (-12.0, 12.0)),
    "sigmoid": (_sigmoid, 2.5, (-110.0, 110.0)),
    "erf": (np.vectorize(math.erf, otypes=[np.float64]), 2.0, (-5.0, 5.0)),
}

_EDGES = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-40, -1e-40,
     1.1754942e-38, 1.1754944e-38, 1.0, -1.0, 0.5, 2.0, 0.625, 0.62500006, -0.625,
     88.72283, 88.72284, 89.0, -87.33655, -87.34, -103.27893, -103.972, -104.0, -150.0,
     -149.0, 127.99999, 128.0, 3.92, 4.0, -4.0, 1e30, -1e30, 3.4028235e38, -3.4028235e38],
    np.float32,
)

_X86 = platform.machine().lower() in ("x86_64", "amd64")
#: The host with all its features (FMA where it has it), and plain x86-64 (no FMA).
_TARGETS = ["llvm", pytest.param("llvm -mcpu=x86-64", marks=pytest.mark.skipif(
    not _X86, reason="a baseline x86-64 CPU runs only on an x86-64 host"))]


def _inputs(lo, hi, rng):
    bits = rng.integers(0, 2**32, 1 << 18, dtype=np.uint64).astype(np.uint32).view(np.float32)
    sweep = np.linspace(lo, hi, 400_001, dtype=np.float64).astype(np.float32)
    return np.concatenate([_EDGES, bits, sweep])


def _ulp_errors(out, ref):
    """|out - ref| in ulps of float32 at ref; 0 where out is ref correctly rounded, or
    both are NaN (infinite results are exact or wrong, never close)."""
    with np.errstate(over="ignore"):
        r32 = ref.astype(np.float32)
    exact = (out == r32) | (np.isnan(out) & np.isnan(ref))
    with np.errstate(invalid="ignore"):
        err = np.abs(out.astype(np.float64) - ref) / np.spacing(np.abs(r32)).astype(np.float64)
    return np.where(exact, 0.0, np.nan_to_num(err, nan=np.inf))


def _vector_call(name, dtype="float32", target="llvm", lanes=16):
    return build(split_vectorized(lambda a: E.Call(a.dtype, name, (a,)), lanes=lanes,
                                  dtype=dtype, nin=1), target)


@pytest.mark.parametrize("target", _TARGETS)
@pytest.mark.parametrize("name", sorted(_FUNCS))
def test_vector_math_ulp_error(rng, name, target):
    ref_fn, bound, (lo, hi) = _FUNCS[name]
    x = _inputs(lo, hi, rng)
    out = np.empty_like(x)
    _vector_call(name, target=target)(x, out)
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64))
    err = _ulp_errors(out, ref)
    k = int(np.argmax(err))
    assert err[k] <= bound, f"{name}({x[k]!r}) = {out[k]!r}, exact {ref[k]!r}: {err[k]} ulp"


@pytest.mark.parametrize("name", sorted(_FUNCS))
def test_vector_math_special_values_are_exact(name):
    ref_fn = _FUNCS[name][0]
    x = _EDGES
    out = np.empty_like(x)
    _vector_call(name)(x, out)
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64)).astype(np.float32)
    special = ~np.isfinite(x) | (x == 0) | ~np.isfinite(ref) | (ref == 0) | (np.abs(ref) == 1)
    np.testing.assert_array_equal(out[special], ref[special])
    # Signed zeros and infinities (a NaN's sign means nothing).
    signed = special & ~np.isnan(ref)
    np.testing.assert_array_equal(np.signbit(out[signed]), np.signbit(ref[signed]))


def test_vector_pow_ulp_error_and_special_values(rng):
    mod = build(split_vectorized(lambda a, b: E.Call(a.dtype, "pow", (a, b))))
    n = 1 << 17
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    bases = np.concatenate([np.abs(bits), rng.random(n).astype(np.float32) * 4,
                            -rng.random(n).astype(np.float32) * 3])
    exps = np.concatenate([(rng.random(n) * 8 - 4).astype(np.float32),
                           (rng.random(n) * 200 - 100).astype(np.float32),
                           np.round(rng.random(n) * 20 - 10).astype(np.float32)])
    special = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, np.inf, -np.inf,
                        np.nan, 1e-45, 1e38, 2.0**24 + 2], np.float32)
    sx, sy = np.meshgrid(special, special)
    x = np.concatenate([bases, sx.ravel()])
    y = np.concatenate([exps, sy.ravel()])
    out = np.empty_like(x)
    mod(x, y, out)
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(np.float64), y.astype(np.float64))
    err = _ulp_errors(out, ref)
    k = int(np.argmax(err))
    assert err[k] <= 0.51, f"pow({x[k]!r}, {y[k]!r}) = {out[k]!r}, exact {ref[k]!r}"
    # Signs of zero and infinite results (odd integer powers of negative bases).
    signed = ~np.isnan(ref) & ((ref == 0) | np.isinf(ref))
    np.testing.assert_array_equal(np.signbit(out[signed]), np.signbit(ref[signed]))


@pytest.mark.parametrize("lanes", [4, 8, 32, 64])
def test_exp_within_its_bound_at_any_lane_count(rng, lanes):
    """On AVX-512 hosts 4 and 8 lanes scale by the 128- and 256-bit ``vscalefps``, 32
    and 64 lanes by 16-lane pieces put back together."""
    ref_fn, bound, (lo, hi) = _FUNCS["exp"]
    x = _inputs(lo, hi, rng)
    out = np.empty_like(x)
    _vector_call("exp", lanes=lanes)(x, out)
    with np.errstate(all="ignore"):
        err = _ulp_errors(out, ref_fn(x.astype(np.float64)))
    assert err.max() <= bound, x[int(np.argmax(err))]


def test_avx512_scales_by_vscalef_and_avx2_by_exponent_bits():
    assert "vscalefps" in _vector_call("exp", target=X86_AVX512).get_source("asm")
    assert "vscalef" not in _vector_call("exp", target="llvm -mcpu=haswell").get_source("asm")


@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_vector_math_any_lane_count_and_tail(rng, lanes):
    x = (rng.random(53) * 20 - 10).astype(np.float32)
    out = np.empty_like(x)
    _vector_call("tanh", lanes=lanes)(x, out)
    np.testing.assert_allclose(out, np.tanh(x.astype(np.float64)), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["exp", "tanh", "erf", "log"])
def test_float16_vector_math_goes_through_float32(name):
    x = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    out = np.empty_like(x)
    _vector_call(name, dtype="float16")(x, out)
    with np.errstate(all="ignore"):
        ref = _FUNCS[name][0](x.astype(np.float64)).astype(np.float16)
    same = (out == ref) | (np.isnan(out) & np.isnan(ref))
    # float32 is accurate to well under one float16 ulp, so only double rounding differs.
    off = ~same
    with np.errstate(invalid="ignore"):
        ulps = np.abs(out[off].astype(np.float64) - ref[off]) / np.spacing(np.abs(ref[off]))
    assert np.all(ulps <= 1), x[off][np.argmax(ulps)]


def test_vectorized_exp_is_inline_zmm_code_without_libm():
    asm = _vector_call("exp", target=X86_AVX512).get_source("asm")
    assert "expf" not in asm
    assert "zmm" in asm
    assert "vfmadd" in asm  # the polynomial uses the target's FMA


def test_scalar_exp_keeps_libm():
    ll = build(elementwise(lambda a: E.Call(a.dtype, "exp", (a,)), nin=1)).get_source("ll")
    assert "tecomp.vmath" not in ll


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("vectorized", [False, True], ids=["scalar", "vector"])
def test_fmod_is_c_fmod_on_every_target(dtype, vectorized, target):
    # LLVM's frem is C's fmod (libm's, lane by lane for vectors): exact for every
    # quotient, the dividend's sign, a finite x by an infinite y is x.
    fn = lambda a, b: te.fmod(a, b)  # noqa: E731
    f = (split_vectorized(fn, lanes=8, dtype=dtype) if vectorized
         else elementwise(fn, dtype=dtype))
    big = float(np.finfo(dtype).max)
    x = np.array([-big, big, 5.5, -5.5, 7.0, 1.0, -0.0, np.inf, 3.0, np.nan, 1e4], dtype)
    y = np.array([2.1, -0.3, 2.0, 2.0, np.inf, -np.inf, 1.0, 2.0, 0.0, 1.0, 3.3], dtype)
    out = np.empty_like(x)
    callable_module(build(f, target))(x, y, out)
    with np.errstate(invalid="ignore"):
        ref = np.fmod(x, y)
    np.testing.assert_array_equal(out, ref)
    numbers = ~np.isnan(ref)  # a NaN's sign is the machine's
    assert np.array_equal(np.signbit(out[numbers]), np.signbit(ref[numbers]))
