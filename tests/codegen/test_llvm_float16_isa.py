"""What float16 arithmetic becomes on each CPU (cross builds, never run): F16C
conversions around float32 arithmetic on x86 without AVX512-FP16, half-precision
vector arithmetic where the target has it (AArch64 +fullfp16, AVX512-FP16)."""

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
