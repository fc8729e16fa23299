"""bfloat16 in the LLVM code generator: its arithmetic is float32 rounded once per
operation, its rounding is numpy's (ml_dtypes), scalar and vectorized, on CPUs with and
without native conversions (which flush subnormal inputs to zero)."""

import ml_dtypes
import numpy as np
import pytest
from cg_helpers import build, elementwise, split_vectorized

from tecomp import Target
from tecomp.codegen.llvm.bfloat import bf16_feature, has_bf16
from tecomp.codegen.llvm.types import bfloat16_bits, const
from tecomp.ir import Cast
from tecomp.ir import expr as E

BF16 = ml_dtypes.bfloat16
#: Built, never run: x86 CPUs with and without AVX512-BF16.
SAPPHIRE_RAPIDS = "llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids"
ZEN3 = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver3"


def _awkward_floats(rng, n=61):
    """float32 values that round in every way: random, ties (even and odd), the largest
    finite bfloat16 and past it, subnormals, infinities and NaN."""
    x = (rng.standard_normal(n) * 10).astype(np.float32)
    ties = np.array([0x3F808000, 0x3F818000, 0x7F7F7FFF, 0x7F7F8000, 0x00008000,
                     0x80018000], np.uint32).view(np.float32)
    special = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, 3.4e38], np.float32)
    return np.concatenate([x, ties, special])


@pytest.mark.parametrize("vectorized", [False, True])
def test_float32_rounds_to_bfloat16_as_numpy(rng, vectorized):
    make = split_vectorized if vectorized else elementwise
    f = make(lambda a: Cast("bfloat16", a), dtype="float32", nin=1, out_dtype="bfloat16")
    x = _awkward_floats(rng)
    out = np.empty(x.shape, BF16)
    build(f)(x, out)
    if has_bf16(Target("llvm")):
        # vcvtneps2bf16 flushes subnormal inputs to zero, keeping the sign.
        tiny = np.abs(x) < np.finfo(np.float32).tiny
        x = np.where(tiny, np.copysign(np.float32(0), x), x)
    ref = x.astype(BF16)
    assert np.array_equal(out.view(np.uint16)[~np.isnan(x)],
                          ref.view(np.uint16)[~np.isnan(x)])
    assert np.isnan(out[np.isnan(x)].astype(np.float32)).all()


@pytest.mark.parametrize("op", ["add", "mul", "div", "max"])
@pytest.mark.parametrize("vectorized", [False, True])
def test_arithmetic_is_float32_rounded_once(rng, op, vectorized):
    fn = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
          "max": lambda a, b: E.Max(a, b, a.dtype)}[op]
    ref_fn = {"add": np.add, "mul": np.multiply, "div": np.divide, "max": np.maximum}[op]
    make = split_vectorized if vectorized else elementwise
    mod = build(make(fn, dtype="bfloat16"))
    a = (rng.standard_normal(45) * 3).astype(BF16)
    b = (rng.standard_normal(45) * 3).astype(BF16)
    out = np.empty_like(a)
    mod(a, b, out)
    ref = ref_fn(a.astype(np.float32), b.astype(np.float32)).astype(BF16)
    assert np.array_equal(out.view(np.uint16), ref.view(np.uint16))


def test_math_comparisons_and_conversions(rng):
    """exp in float32 rounded once; a comparison of bfloat16 values; bfloat16 to float16
    and int32; a constant exactly as ml_dtypes rounds it."""
    x = (rng.standard_normal(40) * 2).astype(BF16)
    third = E.make_const(1 / 3, "bfloat16")
    cases = [
        (lambda a: E.Call("bfloat16", "exp", (a,)), "bfloat16",
         lambda v: np.exp(v.astype(np.float32)).astype(BF16)),
        (lambda a: Cast("float32", E.LT(a, third)), "float32",
         lambda v: (v.astype(np.float32) < np.float32(BF16(1 / 3))).astype(np.float32)),
        (lambda a: Cast("float16", a), "float16", lambda v: v.astype(np.float16)),
        (lambda a: Cast("int32", a * E.make_const(10.0, "bfloat16")), "int32",
         lambda v: (v.astype(np.float32) * 10).astype(BF16).astype(np.int32)),
    ]
    for fn, out_dtype, ref_fn in cases:
        mod = build(split_vectorized(fn, dtype="bfloat16", nin=1, out_dtype=out_dtype))
        out = np.empty(x.shape, out_dtype)
        mod(x, out)
        np.testing.assert_array_equal(out, ref_fn(x))


def test_constants_are_ml_dtypes_bits():
    for v in (1 / 3, -2.5, 1e-40, 3.4e38, 1e39, float("inf")):
        with np.errstate(over="ignore"):  # 1e39 is past float32's range: infinity
            ref = np.array([v], np.float32).astype(BF16).view(np.uint16)[0]
        assert bfloat16_bits(v) == ref
    assert const(-1.0, "bfloat16") == str(0xBF80 - (1 << 16))  # i16, as LLVM prints it


def test_no_library_call_without_native_conversions():
    """On a CPU without AVX512-BF16, rounding is integer instructions: no __truncsfbf2
    (which the JIT cannot resolve) and vector code for a vectorized loop."""
    f = split_vectorized(lambda a, b: a * b + a, dtype="bfloat16", lanes=8)
    asm = build(f, ZEN3).get_source("asm")
    assert "truncsfbf2" not in asm
    assert "vpsrld" in asm and "vcvtneps2bf16" not in asm


@pytest.mark.parametrize("target, instruction", [
    (SAPPHIRE_RAPIDS, "vcvtneps2bf16"),
    ("llvm -mtriple=aarch64-linux-gnu -mattr=+bf16", "bfcvtn"),
])
def test_native_conversion(target, instruction):
    f = split_vectorized(lambda a: Cast("bfloat16", a), dtype="float32", nin=1,
                         out_dtype="bfloat16")
    asm = build(f, target).get_source("asm")
    assert instruction in asm and "truncsfbf2" not in asm


@pytest.mark.parametrize("target, expected", [
    (SAPPHIRE_RAPIDS, True), ("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4", True),
    (ZEN3, False), ("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3 -mattr=+avx512bf16", True),
    (SAPPHIRE_RAPIDS + " -mattr=-avx512bf16", False),
    ("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1 -mattr=+bf16", True),
    ("llvm -mtriple=aarch64-linux-gnu", False),
])
def test_has_bf16(target, expected):
    assert has_bf16(Target(target)) is expected


def test_bf16_feature_names_the_architecture():
    assert bf16_feature(Target(ZEN3)) == "avx512bf16"
    assert bf16_feature(Target("llvm -mtriple=aarch64-linux-gnu")) == "bf16"


def test_compiled_kernel_matches_the_ir_interpreter(rng):
    """A lowered bfloat16 kernel (a float32 product summed into a bfloat16 row, then
    exp) gives the interpreter's bits: ml_dtypes' scalars round once per operation too."""
    from tecomp import lower, te
    from tecomp.ir import interpreter

    n, k = 5, 12
    A = te.placeholder((n, k), dtype="bfloat16", name="A")
    W = te.placeholder((k,), dtype="float32", name="W")
    r = te.reduce_axis((0, k), name="r")
    S = te.compute((n,), lambda i: te.sum(A[i, r] * W[r].astype("bfloat16"), axis=r),
                   name="S")
    Y = te.compute((n,), lambda i: te.exp(S[i] / te.const(4.0, "bfloat16")), name="Y")
    s = te.create_schedule(Y.op)
    func = lower(s, [A, W, Y], name="row_exp")
    a = rng.standard_normal((n, k)).astype(BF16)
    w = rng.standard_normal(k).astype(np.float32)
    got, want = np.empty(n, BF16), np.empty(n, BF16)
    build(func)(a, w, got)
    interpreter.run(func, a, w, want)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
