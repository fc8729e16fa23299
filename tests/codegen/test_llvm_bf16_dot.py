"""``dot2_bf16`` in the LLVM code generator: ``acc`` plus the products of two bfloat16
pairs in float32, by ``vdpbf16ps`` where the CPU has AVX512-BF16, by ``bfdot`` on AArch64
with FEAT_BF16 (run under qemu-user where it is installed), and widened to float32
elsewhere (one lane, lane counts no register takes, CPUs without it)."""

import ml_dtypes
import numpy as np
import pytest
from util import callable_module

import tecomp
from tecomp import te
from tecomp.codegen.llvm.bfloat import has_bf16
from tecomp.errors import DTypeError
from tecomp.ir import semantics

#: Built, never run unless this machine is one: a CPU with AVX512-BF16.
ZEN4 = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4"
#: AArch64 with FEAT_BF16 (bfdot, bfcvt).
ARM_BF16 = "llvm -mtriple=aarch64-linux-gnu -mattr=+bf16"


def _accumulate(n, lanes, target):
    a = te.placeholder((n,), "int32", name="a")
    b = te.placeholder((n,), "int32", name="b")
    acc = te.placeholder((n,), "float32", name="acc")
    out = te.compute((n,), lambda i: acc[i] + te.dot2_bf16(a[i], b[i]), name="out")
    s = te.create_schedule(out.op)
    if lanes > 1:
        _, inner = s[out].split(out.op.axis[0], factor=lanes)
        s[out].vectorize(inner)
    return tecomp.build(s, [a, b, acc, out], target)


def _pairs(rng, n):
    """``n`` words of two bfloat16 values, and the values as float32 ``[n, 2]``."""
    halves = rng.standard_normal((n, 2)).astype(ml_dtypes.bfloat16)
    return halves.view(np.int32).ravel(), halves.astype(np.float32)


def _reference(x, y, acc):
    """The high products added first, then the low ones, each sum rounded."""
    high = acc + x[:, 1] * y[:, 1]
    return (high + x[:, 0] * y[:, 0]).astype(np.float32)


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell", ARM_BF16])
@pytest.mark.parametrize("lanes", [1, 4, 8, 12, 16, 32, 48])
def test_dot2_adds_the_products_of_the_pairs(rng, target, lanes):
    n = 48
    (a, x), (b, y) = _pairs(rng, n), _pairs(rng, n)
    acc = rng.standard_normal(n).astype(np.float32)
    out = np.empty(n, np.float32)
    callable_module(_accumulate(n, lanes, target))(a, b, acc, out)
    want = _reference(x, y, acc)
    native = (lanes % 4 == 0 if target == ARM_BF16 else lanes in (4, 8, 16, 32, 48))
    if has_bf16(tecomp.Target(target)) and native:
        # vdpbf16ps / bfdot: products exact, the sums rounded as the CPU does them.
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("lanes, native", [(48, True), (32, True), (16, True), (8, True),
                                           (4, True), (12, False), (1, False)])
def test_vdpbf16ps_takes_whole_registers(lanes, native):
    ll = _accumulate(48, lanes, ZEN4).get_source("ll")
    assert ("llvm.x86.avx512bf16.dpbf16ps" in ll) == native


@pytest.mark.parametrize("lanes, native", [(48, True), (12, True), (4, True), (2, True),
                                           (6, False), (1, False)])
def test_bfdot_takes_whole_registers(lanes, native):
    asm = _accumulate(48, lanes, ARM_BF16).get_source("asm")
    assert ("bfdot" in asm) == native


def test_the_interpreter_agrees(rng):
    (a, x), (b, y) = _pairs(rng, 16), _pairs(rng, 16)
    want = _reference(x, y, np.zeros(16, np.float32))
    got = [semantics.dot2_bf16_value(int(p), int(q)) for p, q in zip(a, b)]
    np.testing.assert_array_equal(np.array(got, np.float32), want)


def test_pairs_are_built_from_bfloat16_and_multiplied_as_int32_words():
    word = te.placeholder((2,), "int32", name="w")
    half = te.placeholder((2,), "bfloat16", name="h")
    single = te.placeholder((2,), "float32", name="f")
    with pytest.raises(DTypeError, match="te.dot2_bf16 needs int32 words"):
        te.dot2_bf16(half[0], word[0])
    with pytest.raises(DTypeError, match="te.bf16_pair needs bfloat16"):
        te.bf16_pair(single[0], half[1])
    assert te.dot2_bf16(te.bf16_pair(half[0], half[1]), word[0]).dtype == "float32"
