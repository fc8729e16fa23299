"""Parallel loops (tecomp's thread pool) and the machine code of vectorized loops."""

import numpy as np
import pytest
from cg_helpers import X86_AVX2, X86_AVX512, buf, build, ld, loop, split_vectorized

import tecomp
from tecomp.ir import Allocate, FloatImm, PrimFunc, Store, Var, seq


def _matmul(kind_i, kind_k="serial", n=None):
    n = n or Var("n")
    A, B, C = buf("A", (n, 32)), buf("B", (32, 16)), buf("C", (n, 16))
    i, j, k = Var("i"), Var("j"), Var("k")
    body = loop(i, n, seq(
        loop(j, 16, Store(C, FloatImm(0.0), i * 16 + j), "vectorized"),
        loop(k, 32, loop(j, 16, Store(C, ld(C, i * 16 + j) + ld(A, i * 32 + k) * ld(B, k * 16 + j),
                                      i * 16 + j), "vectorized"), kind_k)), kind_i)
    return PrimFunc("mm", (A, B, C), body)


@pytest.mark.parametrize("rows", [1, 2, 3, 57])
def test_parallel_loop_results(rng, rows):
    mod = build(_matmul("parallel"))
    a, b = rng.random((rows, 32), dtype=np.float32), rng.random((32, 16), dtype=np.float32)
    c = np.empty((rows, 16), np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def _team_size(ll):
    """The ``threads`` operand of the loop's call of the thread pool."""
    return ll.split("call void @tecomp.parallel(", 1)[1].split("\n")[0].split(", ")[3]


def test_parallel_loop_calls_the_thread_pool():
    ll = build(_matmul("parallel")).get_source("ll")
    assert "call void @tecomp.parallel(ptr " in ll
    assert "@omp_get" not in ll and "@GOMP" not in ll


def test_a_small_loop_takes_one_thread(rng):
    """A row of the product is 16 + 32 * 16 = 528 steps: below SERIAL_WORK (16384) steps,
    31 rows, the loop runs on the calling thread (a team of one), decided by each run for
    a run-time row count and when the module is built for a constant one."""
    ll = build(_matmul("parallel")).get_source("ll")
    assert _team_size(ll).startswith("i32 %")  # decided per run: n * 528 < SERIAL_WORK
    assert _team_size(build(_matmul("parallel", n=64)).get_source("ll")) == "i32 0)"
    assert _team_size(build(_matmul("parallel", n=31)).get_source("ll")) == "i32 1)"
    mod = build(_matmul("parallel"))
    for rows in (1, 31, 32, 200):  # on both sides of the threshold
        a, b = rng.random((rows, 32), dtype=np.float32), rng.random((32, 16), dtype=np.float32)
        c = np.empty((rows, 16), np.float32)
        mod(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_a_loop_whose_work_divides_by_a_run_time_size_is_not_sized_ahead():
    """Sizing the loop before it runs would divide by k where the loop may never have
    (no rows, and k = 0): such a loop keeps the pool's count, and the run is clean."""
    n, m, k = Var("n"), Var("m"), Var("k")
    A, B, C = buf("A", (n, m)), buf("B", (k,)), buf("C", (n,))
    i, j = Var("i"), Var("j")
    body = loop(i, n, loop(j, m // k, Store(C, ld(A, i * m + j), i)), "parallel")
    mod = build(PrimFunc("p", (A, B, C), body))
    assert _team_size(mod.get_source("ll")) == "i32 0)"
    mod(np.zeros((0, 5), np.float32), np.zeros(0, np.float32), np.zeros(0, np.float32))


def test_parallel_inside_parallel_runs_serially(rng):
    mod = build(_matmul("parallel", kind_k="parallel"))
    assert mod.get_source("ll").count("call void @tecomp.parallel") == 1
    a, b = rng.random((9, 32), dtype=np.float32), rng.random((32, 16), dtype=np.float32)
    c = np.empty((9, 16), np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_parallel_loop_with_heap_temporary(rng):
    n = Var("n")
    A, C = buf("A", (n, 8)), buf("C", (n,))
    T = buf("T", (n,), scope="global")  # symbolic size: heap, allocated per thread/iteration
    i, j = Var("i"), Var("j")
    body = loop(i, 6, Allocate(T, seq(
        loop(j, 8, Store(T, ld(A, i * 8 + j) * 2.0, j)),
        Store(C, ld(T, Var_const(0)) + ld(T, Var_const(7)), i))), "parallel")
    mod = build(PrimFunc("p", (A, C), body))
    a = rng.random((8, 8), dtype=np.float32)
    c = np.zeros(8, np.float32)
    mod(a, c)
    np.testing.assert_allclose(c[:6], 2 * (a[:6, 0] + a[:6, 7]), rtol=1e-6)


def Var_const(v):
    from tecomp.ir import IntImm

    return IntImm(v)


def test_avx512_vector_loop_uses_zmm():
    asm = build(split_vectorized(lambda a, b: a * b + a), target=X86_AVX512).get_source("asm")
    assert "zmm" in asm
    assert "vfmadd" in asm  # a*b+a contracts into one FMA


def test_avx2_vector_loop_uses_ymm_only():
    asm = build(split_vectorized(lambda a, b: a * b + a), target=X86_AVX2).get_source("asm")
    assert "ymm" in asm and "zmm" not in asm
    assert "vfmadd" in asm


def test_explicit_mattr_avx2_uses_ymm_only():
    target = "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64 -mattr=+avx2,+fma"
    asm = build(split_vectorized(lambda a, b: a * b, lanes=8), target=target).get_source("asm")
    assert "ymm" in asm and "zmm" not in asm


def test_aarch64_cross_build_shows_neon_and_cannot_run(tmp_path):
    mod = build(split_vectorized(lambda a, b: a * b + a, lanes=4),
                target="llvm -mtriple=aarch64-linux-gnu")
    asm = mod.get_source("asm")
    assert "fmla" in asm and ".4s" in asm
    with pytest.raises(tecomp.TecompError, match="cannot run on this machine"):
        mod(np.zeros(3, np.float32), np.zeros(3, np.float32), np.zeros(3, np.float32))
    out = mod.export_library(str(tmp_path / "k.so"))
    with open(out, "rb") as fh:
        head = fh.read(20)
    assert head[:4] == b"\x7fELF" and head[18] == 183  # EM_AARCH64


def test_aarch64_parallel_builds():
    mod = build(_matmul("parallel"), target="llvm -mtriple=aarch64-linux-gnu")
    assert "tecomp.parallel" in mod.get_source("asm")


@pytest.mark.slow
def test_parallel_speedup_on_all_cores(rng):
    """A compute-bound loop nest scales with the cores (>= 1.7x on 2 cores). Timing test:
    run alone (-m slow); candidates are interleaved and the median ratio is used."""
    import os

    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        pytest.skip("needs at least 2 cores")
    N = 512
    A, B, C = buf("A", (N, N)), buf("B", (N, N)), buf("C", (N, N))
    i, j, k = Var("i"), Var("j"), Var("k")

    def f(kind):
        body = loop(i, N, seq(
            loop(j, N, Store(C, FloatImm(0.0), i * N + j), "vectorized"),
            loop(k, N, loop(j, N, Store(C, ld(C, i * N + j) + ld(A, i * N + k) * ld(B, k * N + j),
                                        i * N + j), "vectorized"))), kind)
        return build(PrimFunc("mm_" + kind, (A, B, C), body))

    ser, par = f("serial"), f("parallel")
    a, b = rng.random((N, N), dtype=np.float32), rng.random((N, N), dtype=np.float32)
    c = np.empty((N, N), np.float32)
    par(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)
    ratios = []
    for _ in range(5):
        ts = ser.time_evaluator(number=5, repeat=3)(a, b, c).median
        tp = par.time_evaluator(number=5, repeat=3)(a, b, c).median
        ratios.append(ts / tp)
    want = 1.7 if cores == 2 else 0.85 * cores
    assert sorted(ratios)[2] >= want, ratios
