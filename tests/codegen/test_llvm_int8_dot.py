"""``dot4_u8s8`` in the LLVM code generator: the exact sum of four uint8 x int8 products
on every lowering (the pair sums of AVX2, with and without the int16 promise, the widened
products elsewhere, one lane), and ``vpdpbusd`` where the CPU has VNNI."""

import numpy as np
import pytest
from cg_helpers import X86_AVX2, X86_AVX512, build, elementwise, split_vectorized
from util import callable_module, target_unavailable

from tecomp import Target, te
from tecomp.codegen.llvm.int8_dot import arm_dot_feature, has_vnni
from tecomp.ir import semantics

#: Built, never run: CPUs with AVX512-VNNI and with AVX-VNNI.
ZEN4 = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4"
ALDER_LAKE = "llvm -mtriple=x86_64-linux-gnu -mcpu=alderlake"
#: Run under qemu-user: usdot, sdot twice, and the widened products.
ARM = ("llvm -mtriple=aarch64-linux-gnu -mattr=+i8mm",
       "llvm -mtriple=aarch64-linux-gnu -mattr=+dotprod",
       "llvm -mtriple=aarch64-linux-gnu")


def _words(rng, n, weight_bound=128):
    a = rng.integers(0, 256, (n, 4)).astype(np.uint8)
    b = rng.integers(-weight_bound, weight_bound, (n, 4)).astype(np.int8)
    # The extremes: every pair at its largest and smallest sum.
    a[:4] = 255
    b[:2] = weight_bound - 1
    b[2:4] = -weight_bound
    return a, b


def _reference(a, b, acc):
    return acc + (a.astype(np.int64) * b.astype(np.int64)).sum(axis=1).astype(np.int32)


def _accumulate(pairs_fit, lanes):
    fn = lambda a, b, c: c + te.dot4_u8s8(a, b, pairs_fit)  # noqa: E731
    if lanes == 1:
        return elementwise(fn, dtype="int32", nin=3)
    return split_vectorized(fn, lanes=lanes, dtype="int32", nin=3)


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=x86-64", *ARM])
@pytest.mark.parametrize("lanes", [1, 4, 8, 16])
@pytest.mark.parametrize("pairs_fit", [False, True])
def test_dot4_is_the_exact_sum_of_four_products(rng, target, lanes, pairs_fit):
    # x86-64 (SSE2) has no vpmaddubsw: the widened products. A promise is only given
    # for weights that keep it (-64 <= w < 64).
    reason = target_unavailable(target)
    if reason:
        pytest.skip(reason)
    a, b = _words(rng, 45, 64 if pairs_fit else 128)
    acc = rng.integers(-(2**20), 2**20, 45).astype(np.int32)
    out = np.empty(45, np.int32)
    f = callable_module(build(_accumulate(pairs_fit, lanes), target))
    f(a.view(np.int32).ravel(), b.view(np.int32).ravel(), acc, out)
    assert np.array_equal(out, _reference(a, b, acc))


@pytest.mark.parametrize("target", ["llvm", ZEN4, ARM[0]])
def test_lane_counts_the_instructions_do_not_take_are_widened(rng, target):
    # 12 lanes: 384 bits, no register of the instructions; the products are widened.
    ll = build(_accumulate(False, 12), target).get_source("ll")
    assert "vpdpbusd" not in ll and "usdot" not in ll
    if target_unavailable(target) is None:
        a, b = _words(rng, 45)
        acc = rng.integers(-(2**20), 2**20, 45).astype(np.int32)
        out = np.empty(45, np.int32)
        callable_module(build(_accumulate(False, 12), target))(
            a.view(np.int32).ravel(), b.view(np.int32).ravel(), acc, out)
        assert np.array_equal(out, _reference(a, b, acc))


def test_the_interpreter_agrees(rng):
    a, b = _words(rng, 16)
    for x, y, wx, wy in zip(a, b, a.view(np.int32).ravel(), b.view(np.int32).ravel()):
        want = int(x.astype(np.int64) @ y.astype(np.int64))
        assert semantics.dot4_u8s8_value(int(wx), int(wy)) == want


def _asm(target, pairs_fit=False, lanes=8):
    return build(_accumulate(pairs_fit, lanes), target).get_source("asm")


def test_vnni_cpus_accumulate_in_one_instruction():
    assert "vpdpbusd" in _asm(ZEN4)
    assert "{vex}" in _asm(ALDER_LAKE) and "vpdpbusd" in _asm(ALDER_LAKE)
    assert "vpmaddubsw" not in _asm(ZEN4)


def test_aarch64_dot_instructions():
    assert "usdot" in _asm(ARM[0], lanes=4)
    dotprod = _asm(ARM[1], lanes=4)
    assert "sdot" in dotprod and "usdot" not in dotprod
    assert "dot" not in _asm(ARM[2], lanes=4)
    assert arm_dot_feature(Target("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1")) == (
        "dotprod")
    assert arm_dot_feature(Target("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1")) == (
        "i8mm")
    assert arm_dot_feature(Target(X86_AVX2)) is None


def test_avx2_pair_sums_take_twice_the_instructions_without_the_promise():
    promised, exact = _asm(X86_AVX2, True), _asm(X86_AVX2, False)
    assert promised.count("vpmaddubsw") >= 1
    assert exact.count("vpmaddubsw") == 2 * promised.count("vpmaddubsw")
    assert "vpdpbusd" not in exact


@pytest.mark.parametrize("target,bits,expected", [
    (ZEN4, 256, True), (ZEN4, 512, True), (ALDER_LAKE, 256, True), (ALDER_LAKE, 512, False),
    (X86_AVX2, 256, False), (X86_AVX512, 512, False),
    ("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell -mattr=+avxvnni", 256, True),
    ("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4 -mattr=-avx512vnni", 512, False),
    ("llvm -mtriple=aarch64-linux-gnu", 128, False)])
def test_which_targets_have_vnni(target, bits, expected):
    assert has_vnni(Target(target), bits) is expected
