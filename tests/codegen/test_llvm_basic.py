"""LLVM code generation of hand-built PrimFuncs, checked against numpy."""

import numpy as np
import pytest
from cg_helpers import F32, buf, build, elementwise, ld, loop, split_vectorized

import tecomp
from tecomp.codegen.llvm.build import function_attributes
from tecomp.codegen.llvm.emit import Emitter
from tecomp.ir import (
    Allocate,
    Cast,
    FloatImm,
    IfThenElse,
    IntImm,
    Let,
    LetStmt,
    PrimFunc,
    Select,
    Store,
    Var,
    seq,
)
from tecomp.ir import expr as E
from tecomp.ir.transform.legalize import legalize


def test_elementwise_add_symbolic_sizes(rng):
    mod = build(elementwise(lambda a, b: a + b))
    for n in (0, 1, 7, 100):
        a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
        c = np.zeros(n, np.float32)
        mod(a, b, c)
        np.testing.assert_allclose(c, a + b)


def test_row_sum_reduction(rng):
    n, m = Var("n"), Var("m")
    A, C = buf("A", (n, m)), buf("C", (n,))
    i, k = Var("i"), Var("k")
    body = loop(i, n, seq(Store(C, FloatImm(0.0), i),
                          loop(k, m, Store(C, ld(C, i) + ld(A, i * m + k), i))))
    mod = build(PrimFunc("rowsum", (A, C), body))
    a = rng.random((13, 29), dtype=np.float32)
    c = np.empty(13, np.float32)
    mod(a, c)
    np.testing.assert_allclose(c, a.sum(1), rtol=1e-5)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 33, 64, 100])
def test_vectorized_tail_is_masked_and_correct(rng, n):
    mod = build(split_vectorized(lambda a, b: a * b + a))
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    c = np.full(n + 1, -1.0, np.float32)  # the extra element must stay untouched
    mod(a, b, c[:n])
    np.testing.assert_allclose(c[:n], a * b + a, rtol=1e-6)
    assert c[n] == -1.0
    ll = mod.get_source("ll")
    assert "llvm.masked.load" in ll and "llvm.masked.store" in ll


def test_vectorized_constant_extent_no_tail(rng):
    A, C = buf("A", (64,)), buf("C", (64,))
    i = Var("i")
    mod = build(PrimFunc("v", (A, C), loop(i, 64, Store(C, ld(A, i) * 3.0, i), "vectorized")))
    a = rng.random(64, dtype=np.float32)
    c = np.empty(64, np.float32)
    mod(a, c)
    np.testing.assert_allclose(c, a * 3)
    assert "<16 x float>" in mod.get_source("ll") or "<64 x float>" in mod.get_source("ll")


def test_gather_by_index_buffer_and_stride(rng):
    n = Var("n")
    A, Idx, C, D = buf("A", (n,)), buf("I", (n,), "int32"), buf("C", (n,)), buf("D", (n,))
    io, ii = Var("io"), Var("ii")
    idx = io * 8 + ii
    half = idx // 2
    body = loop(io, (n + 7) // 8, loop(ii, 8, IfThenElse(idx < n, seq(
        Store(C, Load_(A, ld(Idx, idx)), idx),
        Store(D, ld(A, half * 2), idx))), "vectorized"))
    mod = build(PrimFunc("g", (A, Idx, C, D), body))
    for size in (5, 8, 21):
        a = rng.random(size, dtype=np.float32)
        ix = rng.integers(0, size, size).astype(np.int32)
        c, d = np.empty(size, np.float32), np.empty(size, np.float32)
        mod(a, ix, c, d)
        np.testing.assert_array_equal(c, a[ix])
        np.testing.assert_array_equal(d, a[(np.arange(size) // 2) * 2])
    assert "llvm.masked.gather" in mod.get_source("ll")


def Load_(b, idx):
    return E.Load(b, idx, b.dtype)


def test_scatter_stride_two(rng):
    A, C = buf("A", (16,)), buf("C", (32,))
    i = Var("i")
    mod = build(PrimFunc("s", (A, C), loop(i, 16, Store(C, ld(A, i), i * 2), "vectorized")))
    a = rng.random(16, dtype=np.float32)
    c = np.zeros(32, np.float32)
    mod(a, c)
    np.testing.assert_array_equal(c[::2], a)
    np.testing.assert_array_equal(c[1::2], 0)


def test_uniform_load_broadcasts(rng):
    A, C = buf("A", (4,)), buf("C", (4, 16))
    i, j = Var("i"), Var("j")
    body = loop(i, 4, loop(j, 16, Store(C, ld(A, i) + ld(C, i * 16 + j), i * 16 + j), "vectorized"))
    mod = build(PrimFunc("b", (A, C), body))
    a = rng.random(4, dtype=np.float32)
    c = np.ones((4, 16), np.float32)
    mod(a, c)
    np.testing.assert_allclose(c, np.broadcast_to(1 + a[:, None], (4, 16)))


def test_vectorized_reduction_axis_falls_back_to_scalar(rng):
    # C[0] += A[k] over a "vectorized" k: the store address does not depend on the lane,
    # so lanes are not independent; the loop must still give the serial result.
    A, C = buf("A", (37,)), buf("C", (1,))
    k = Var("k")
    body = seq(Store(C, FloatImm(0.0), IntImm(0)),
               loop(k, 37, Store(C, ld(C, IntImm(0)) + ld(A, k), IntImm(0)), "vectorized"))
    mod = build(PrimFunc("r", (A, C), body))
    a = rng.random(37, dtype=np.float32)
    c = np.zeros(1, np.float32)
    mod(a, c)
    np.testing.assert_allclose(c[0], np.cumsum(a, dtype=np.float32)[-1], rtol=1e-6)


def _rows_sum(kind_i):
    n = Var("n")
    A, C = buf("A", (n, 4)), buf("C", (n,))
    i, k = Var("i"), Var("k")
    body = loop(i, 8, seq(Store(C, FloatImm(0.0), i),
                          loop(k, 4, Store(C, ld(C, i) + ld(A, i * 4 + k), i))), kind_i)
    return PrimFunc("fb", (A, C), body)


def test_vectorized_with_inner_serial_loop_falls_back(rng):
    mod = build(_rows_sum("vectorized"))
    a = rng.random((8, 4), dtype=np.float32)
    c = np.empty(8, np.float32)
    mod(a, c)
    np.testing.assert_allclose(c, a.sum(1), rtol=1e-6)


def _emitted_text(f, target):
    """The LLVM IR text the emitter writes for ``f`` (before LLVM optimizes it, which
    drops loop metadata)."""
    em = Emitter(target, function_attributes(target))
    em.func(f, f.name)
    return em.module_text(target.mtriple, "")


def test_serial_loop_hint_becomes_loop_metadata():
    target = tecomp.Target("llvm")
    legal = legalize(_rows_sum("vectorized"), target)
    assert legal.body.kind == "serial"
    assert "llvm.loop.vectorize.enable" in _emitted_text(legal, target)
    assert "llvm.loop.vectorize.enable" not in _emitted_text(_rows_sum("serial"), target)


@pytest.mark.parametrize("n", [100, 81, 1])  # tails of 4 lanes and of one; one lane only
def test_long_vectorized_loop_is_strip_mined(rng, n):
    A, C = buf("A", (n,)), buf("C", (n,))
    i = Var("i")
    mod = build(PrimFunc("l", (A, C), loop(i, n, Store(C, ld(A, i) + 1.0, i), "vectorized")))
    a = rng.random(n, dtype=np.float32)
    c = np.empty(n, np.float32)
    mod(a, c)
    np.testing.assert_allclose(c, a + 1)


def test_unrolled_register_accumulators(rng):
    # C[i, j] = sum_k A[i, k] * B[k, j]: a 4x16 local accumulator tile, unrolled over
    # rows, vectorized over columns; the accumulator must live in registers (no alloca).
    M, K, N = 4, 32, 16
    A, B, C = buf("A", (M, K)), buf("B", (K, N)), buf("C", (M, N))
    acc = buf("acc", (M, N), scope="local")
    i, j, k = Var("i"), Var("j"), Var("k")
    init = loop(i, M, loop(j, N, Store(acc, FloatImm(0.0), i * N + j), "vectorized"), "unrolled")
    upd = loop(k, K, loop(i, M, loop(j, N, Store(
        acc, ld(acc, i * N + j) + ld(A, i * K + k) * ld(B, k * N + j), i * N + j),
        "vectorized"), "unrolled"))
    out = loop(i, M, loop(j, N, Store(C, ld(acc, i * N + j), i * N + j), "vectorized"), "unrolled")
    f = PrimFunc("mm", (A, B, C), Allocate(acc, seq(init, upd, out)))
    mod = build(f)
    a, b = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
    c = np.empty((M, N), np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    assert "alloca" not in mod.get_source("ll")


def test_floordiv_floormod_match_python(rng):
    def fdm(a, b):
        return E.binary(E.FloorDiv, a, b) * 1000 + E.binary(E.FloorMod, a, b)

    mod = build(elementwise(fdm, dtype="int32"))
    a = rng.integers(-50, 50, 200).astype(np.int32)
    b = rng.integers(1, 9, 200).astype(np.int32) * rng.choice([-1, 1], 200).astype(np.int32)
    c = np.empty(200, np.int32)
    mod(a, b, c)
    np.testing.assert_array_equal(c, (a // b) * 1000 + a % b)
    modc = build(elementwise(lambda a: E.binary(E.FloorDiv, a, 4) + E.binary(E.FloorMod, a, 4),
                             dtype="int32", nin=1))
    a = np.arange(-20, 20, dtype=np.int32)
    c = np.empty_like(a)
    modc(a, c)
    np.testing.assert_array_equal(c, a // 4 + a % 4)


def test_select_is_lazy_padding(rng):
    # C[i] = A[i - 2] if 2 <= i < n + 2 else 0: the false branch would read out of bounds.
    n = Var("n")
    A, C = buf("A", (n,)), buf("C", (n + 4,))
    i = Var("i")
    cond = E.And(E.binary(E.GE, i, 2), E.binary(E.LT, i, n + 2))
    val = Select(cond, ld(A, i - 2), FloatImm(0.0), F32)
    for kind in ("serial", "vectorized"):
        ext = n + 4 if kind == "serial" else IntImm(12)
        f = PrimFunc("pad", (A, C), loop(i, ext, Store(C, val, i), kind))
        mod = build(f)
        a = rng.random(8, dtype=np.float32)
        c = np.empty(12, np.float32)
        mod(a, c)
        np.testing.assert_array_equal(c, np.pad(a, 2))


def test_let_and_letstmt(rng):
    n = Var("n")
    A, C = buf("A", (n,)), buf("C", (n,))
    i, t, u = Var("i"), Var("t", F32), Var("u")
    body = loop(i, n, LetStmt(u, i + 0, Store(C, Let(t, ld(A, u) * 2.0, t * t + t, F32), u)))
    mod = build(PrimFunc("let", (A, C), body))
    a = rng.random(9, dtype=np.float32)
    c = np.empty(9, np.float32)
    mod(a, c)
    np.testing.assert_allclose(c, (2 * a) ** 2 + 2 * a, rtol=1e-6)


@pytest.mark.parametrize("n_elems", [50, 9000])  # the symbolic buffer: 200 B, 36 kB
def test_allocate_stack_and_heap(rng, n_elems):
    n = Var("n")
    A, C = buf("A", (n,)), buf("C", (n,))
    i = Var("i")
    small = buf("T", (n,), scope="global")  # symbolic: the stack up to 32 kB, else the heap
    big = buf("Big", (20000,), scope="global")  # 80 kB: heap
    loc = buf("L", (16,), scope="local")  # stack
    body = Allocate(small, Allocate(big, Allocate(loc, seq(
        loop(i, n, Store(small, ld(A, i) + 1.0, i)),
        loop(i, IntImm(20000), Store(big, ld(small, i % n) * 2.0, i)),
        loop(i, n, Store(C, ld(big, i) - 1.0, i)),
    ))))
    mod = build(PrimFunc("al", (A, C), body))
    a = rng.random(n_elems, dtype=np.float32)
    c = np.empty(n_elems, np.float32)
    mod(a, c)
    np.testing.assert_allclose(c, (a + 1) * 2 - 1, rtol=1e-6)
    ll = mod.get_source("ll")
    assert "aligned_alloc" in ll and "@free" in ll
    assert "@llvm.stacksave.p0" in ll and "@llvm.stackrestore.p0" in ll


def test_symbolic_buffer_in_a_loop_gives_its_stack_back():
    # 32 kB on the stack per iteration: 3 GB without the stack restored at each end.
    n = Var("n")
    A, C = buf("A", (n,)), buf("C", (IntImm(1),))
    T = buf("T", (n,), scope="global")
    i, j = Var("i"), Var("j")
    body = seq(Store(C, FloatImm(0.0), IntImm(0)), loop(i, 100_000, Allocate(T, seq(
        loop(j, n, Store(T, ld(A, j), j)),
        Store(C, ld(C, IntImm(0)) + ld(T, i % n), IntImm(0))))))
    mod = build(PrimFunc("loop_alloc", (A, C), body))
    a = np.full(8000, 0.5, np.float32)
    c = np.empty(1, np.float32)
    mod(a, c)
    assert c[0] == 50_000.0


def test_casts_between_dtypes(rng):
    mod = build(elementwise(lambda a: Cast("int32", a * 10.0), nin=1, out_dtype="int32"))
    a = rng.random(20, dtype=np.float32) * 3 - 1.5
    c = np.empty(20, np.int32)
    mod(a, c)
    np.testing.assert_array_equal(c, (a * np.float32(10)).astype(np.int32))
    mod = build(elementwise(lambda a: Cast("float64", a), dtype="uint8", nin=1,
                            out_dtype="float64"))
    a = np.arange(250, 256, dtype=np.uint8)
    c = np.empty(6, np.float64)
    mod(a, c)
    np.testing.assert_array_equal(c, a.astype(np.float64))


def test_thread_binding_is_a_codegen_error():
    A = buf("A", (4,))
    i = Var("i")
    f = PrimFunc("t", (A,), E_for_thread(i, Store(A, FloatImm(1.0), i)))
    with pytest.raises(tecomp.CodegenError, match="threadIdx.x"):
        build(f)


def E_for_thread(i, body):
    from tecomp.ir import For

    return For(i, IntImm(0), IntImm(4), "thread_binding", body, "threadIdx.x")


def test_shared_scope_is_a_codegen_error():
    A = buf("A", (4,))
    S = buf("S", (4,), scope="shared")
    i = Var("i")
    f = PrimFunc("s", (A,), Allocate(S, loop(i, 4, Store(A, ld(S, i), i))))
    with pytest.raises(tecomp.CodegenError, match="shared"):
        build(f)


def test_undefined_variable_is_named():
    A = buf("A", (4,))
    i, z = Var("i"), Var("zz")
    f = PrimFunc("u", (A,), loop(i, 4, Store(A, FloatImm(1.0), i + z)))
    with pytest.raises(tecomp.CodegenError, match="zz"):
        build(f)


def test_several_functions_in_one_module(rng):
    f1 = elementwise(lambda a, b: a + b, name="add")
    f2 = elementwise(lambda a, b: a - b, name="sub")
    mod = tecomp.build([f1, f2])
    a, b, c = np.ones(3, np.float32), np.ones(3, np.float32), np.empty(3, np.float32)
    mod["sub"](a, b, c)
    np.testing.assert_array_equal(c, 0)
    mod(a, b, c)  # the first function is the entry
    np.testing.assert_array_equal(c, 2)
