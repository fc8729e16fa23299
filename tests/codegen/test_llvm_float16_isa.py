"""What float16 arithmetic becomes on each CPU (cross builds, never run): F16C
conversions around float32 arithmetic on x86 without AVX512-FP16, half-precision
vector arithmetic where the target has it (AArch64 +fullfp16, AVX512-FP16); and the
float64 -> float16 conversion, which x86 leaves to a runtime routine, run on the host."""

import re

import pytest
from cg_helpers import build, split_vectorized


def _asm(target):
    f = split_vectorized(lambda a, b: a * b + a, dtype="float16", lanes=8)
    return build(f, target).get_source("asm")


#: Arithmetic on half-precision lanes: AVX512-FP16's ``v...ph``, AArch64's ``.8h``.
HALF_ARITHMETIC = re.compile(r"\bv(fmadd\d*|mul|add)ph\b|\bf(mla|mul|add)\s+v\d+\.8h")


def test_x86_with_f16c_converts_and_computes_in_float32():
    asm = _asm("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3")
    assert "vcvtph2ps" in asm and "vcvtps2ph" in asm
    assert not HALF_ARITHMETIC.search(asm)


@pytest.mark.parametrize("target", [
    "llvm -mtriple=aarch64-linux-gnu -mattr=+fullfp16",
    "llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids",
])
def test_native_half_arithmetic(target):
    asm = _asm(target)
    assert HALF_ARITHMETIC.search(asm)
    assert "fcvtl" not in asm and "vcvtph2ps" not in asm


def test_aarch64_without_fullfp16_widens_to_float32():
    asm = _asm("llvm -mtriple=aarch64-linux-gnu")
    assert "fcvtl" in asm and "fcvtn" in asm
    assert not HALF_ARITHMETIC.search(asm)


@pytest.mark.parametrize("lanes", [1, 8])
def test_float64_to_float16_runs_on_the_host(lanes):
    # No x86 instruction narrows float64 to float16: LLVM calls libgcc's __truncdfhf2,
    # which the JIT must find (it was called at address 0).
    import numpy as np

    import tecomp
    from tecomp import te

    x = te.placeholder((16,), "float64", name="x")
    y = te.compute((16,), lambda i: x[i].astype("float16"), name="y")
    s = te.create_schedule(y.op)
    if lanes > 1:
        _, inner = s[y].split(y.op.axis[0], factor=lanes)
        s[y].vectorize(inner)
    f = tecomp.build(s, [x, y], target="llvm")
    a = np.array([0, 1 / 3, -2.5, 65504, 65520, 1e-8, 6e-8, np.inf, -np.inf, np.nan,
                  1 + 2**-11, 1 + 3 * 2**-11, 2049, -0.0, 1e300, 5.96e-8])
    b = np.zeros(16, "float16")
    f(a, b)
    with np.errstate(over="ignore"):
        expected = a.astype("float16")
    np.testing.assert_array_equal(b, expected)
