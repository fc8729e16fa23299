"""The tensor-core statements of the loop IR: their meaning in the GPU simulator (a
warp collective run once per warp), the verifier's rules for fragments, and the PTX
the CUDA code generator writes for them (compiled by NVRTC)."""

import numpy as np
import pytest

from tecomp.codegen.cuda import compile_cuda
from tecomp.codegen.cuda.source import kernel_source
from tecomp.errors import IRVerifyError, TecompError
from tecomp.ir import expr as E
from tecomp.ir import stmt as S
from tecomp.ir.buffer import make_buffer
from tecomp.ir.interpreter import run
from tecomp.ir.verify import verify


def i32(v):
    return E.IntImm(v, "int32")


def _kernel(body_of, threads=32, b_shape=(32, 16), dtype="float16"):
    """A one-block kernel over A [16, 32] and B (``b_shape``) of ``dtype`` into C [16, 16]
    float32, whose body ``body_of(A, B, C, fa, fb, fc, tx)`` is run by ``threads``
    threads inside the fragments' allocations."""
    A = make_buffer("A", dtype, (16, 32))
    B = make_buffer("B", dtype, b_shape)
    C = make_buffer("C", "float32", (16, 16))
    fa = make_buffer("fa", dtype, (16, 32), "wmma.matrix_a")
    fb = make_buffer("fb", dtype, (32, 16), "wmma.matrix_b")
    fc = make_buffer("fc", "float32", (16, 16), "wmma.accumulator")
    tx = E.Var("tx", "int32")
    body = S.Allocate(fa, S.Allocate(fb, S.Allocate(fc, body_of(A, B, C, fa, fb, fc, tx))))
    launch = S.KernelLaunch("mm_kernel0", (A, B, C), (), (i32(1),) * 3,
                            (i32(threads), i32(1), i32(1)),
                            S.For(tx, i32(0), i32(threads), "thread_binding", body,
                                  "threadIdx.x"))
    return S.PrimFunc("mm", (A, B, C), launch)


def _product(A, B, C, fa, fb, fc, tx, layout="row_major"):
    """C = A @ B over two k steps of 16; B read as [k, n] rows, or as [n, k] rows
    (``col_major``)."""
    b_at = (lambda step: i32(step * 256)) if layout == "row_major" else \
        (lambda step: i32(step * 16))
    return S.seq(
        S.MatrixFill(fc, i32(0), E.FloatImm(0.0, "float32")),
        *(S.MatrixLoad(fa, i32(k), A, i32(16 * k), i32(32)) for k in range(2)),
        *(S.MatrixLoad(fb, i32(k), B, b_at(k), i32(16 if layout == "row_major" else 32),
                       layout) for k in range(2)),
        *(S.MatrixMultiplyAdd(fc, i32(0), fa, i32(k), fb, i32(k), fc, i32(0))
          for k in range(2)),
        S.MatrixStore(C, i32(0), i32(16), fc, i32(0)),
    )


@pytest.mark.parametrize("layout", ["row_major", "col_major"])
def test_simulated_fragments_multiply_like_numpy(layout, rng):
    b_shape = (32, 16) if layout == "row_major" else (16, 32)
    f = _kernel(lambda *a: _product(*a, layout=layout), b_shape=b_shape)
    verify(f)
    a = rng.uniform(-1, 1, (16, 32)).astype("float16")
    b = rng.uniform(-1, 1, b_shape).astype("float16")
    c = np.zeros((16, 16), "float32")
    run(f, a, b, c)
    right = b if layout == "row_major" else b.T
    np.testing.assert_allclose(c, a.astype("float32") @ right.astype("float32"), rtol=1e-5,
                               atol=1e-5)


def test_a_collective_some_lanes_skip_is_an_error():
    def body(A, B, C, fa, fb, fc, tx):
        return S.IfThenElse(E.binary(E.LT, tx, i32(8)),
                            S.MatrixFill(fc, i32(0), E.FloatImm(0.0, "float32")))

    with pytest.raises(TecompError, match=r"reaches a MatrixFill that thread \(8, 0, 0\) of "
                                          r"its warp does not"):
        run(_kernel(body), *(np.zeros(s, d) for s, d in (((16, 32), "float16"),
                                                         ((32, 16), "float16"),
                                                         ((16, 16), "float32"))))


def test_a_misaligned_tile_is_an_error():
    def body(A, B, C, fa, fb, fc, tx):
        return S.MatrixLoad(fa, i32(0), A, i32(8), i32(32))

    with pytest.raises(TecompError, match=r"a tile of A at element 8 with rows 32 apart: "
                                          r"tensor-core tiles start at multiples of 32 bytes"):
        run(_kernel(body), *(np.zeros(s, d) for s, d in (((16, 32), "float16"),
                                                         ((32, 16), "float16"),
                                                         ((16, 16), "float32"))))


def test_operands_that_differ_across_the_warp_are_an_error():
    def body(A, B, C, fa, fb, fc, tx):
        return S.MatrixLoad(fa, i32(0), A, tx % 2 * 16, i32(32))

    with pytest.raises(TecompError, match=r"run a MatrixLoad with different operands"):
        run(_kernel(body), *(np.zeros(s, d) for s, d in (((16, 32), "float16"),
                                                         ((32, 16), "float16"),
                                                         ((16, 16), "float32"))))


@pytest.mark.parametrize("make, message", [
    (lambda A, B, C, fa, fb, fc, tx: S.MatrixFill(fa, i32(0), E.FloatImm(0.0, "float16")),
     r"MatrixFill uses 'fa' \(wmma.matrix_a\) where a wmma.accumulator fragment goes"),
    (lambda A, B, C, fa, fb, fc, tx: S.Store(C, E.Load(fc, i32(0), "float32"), i32(0)),
     r"Load of 'fc', a wmma.accumulator fragment, which only the Matrix\* statements"),
    (lambda A, B, C, fa, fb, fc, tx: S.MatrixMultiplyAdd(fc, i32(0), fb, i32(0), fa, i32(0),
                                                         fc, i32(0)),
     r"uses 'fb' \(wmma.matrix_b\) where a wmma.matrix_a fragment goes"),
    (lambda A, B, C, fa, fb, fc, tx: S.MatrixLoad(fa, i32(0), A, i32(0), i32(32), "diagonal"),
     r"layout 'diagonal'; allowed: row_major, col_major"),
])
def test_verifier_rules_for_fragments(make, message):
    with pytest.raises(IRVerifyError, match=rf"\[fragment\].*{message}"):
        verify(_kernel(make))


def test_a_fragment_holds_whole_tiles():
    odd = make_buffer("odd", "float32", (16, 8), "wmma.accumulator")
    tx = E.Var("tx", "int32")
    launch = S.KernelLaunch("k0", (), (), (i32(1),) * 3, (i32(32), i32(1), i32(1)),
                            S.For(tx, i32(0), i32(32), "thread_binding",
                                  S.Allocate(odd, S.MatrixFill(odd, i32(0), E.FloatImm(
                                      0.0, "float32"))), "threadIdx.x"))
    with pytest.raises(IRVerifyError, match=r"fragment 'odd' has the shape \[16, 8\]: a "
                                            r"constant number of 16 x 16 tiles"):
        verify(S.PrimFunc("f", (), launch))


def test_ptx_wmma_instructions_compile(cuda_target):
    f = _kernel(lambda *a: _product(*a, layout="col_major"), b_shape=(16, 32))
    src = kernel_source([f.body])
    assert "unsigned fa[2][8];" in src and "float fc[1][8];" in src
    assert "wmma.load.b.sync.aligned.col.m16n16k16.f16" in src
    # The accumulator is read and written in place: c is the same registers as d.
    assert ("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%0, %1, %2, %3, %4, %5, %6, "
            "%7}, {%8,") in src and "{%16, %17, %18, %19, %20, %21, %22, %23}, {%0," in src
    assert 'float* __restrict__ C' in src and '"memory");' in src
    compile_cuda(src, "sm_90")


def test_float32_fragments_multiply_as_tf32(cuda_target, rng):
    f = _kernel(lambda *a: _product(*a, layout="col_major"), b_shape=(16, 32),
                dtype="float32")
    verify(f)
    a = rng.uniform(-1, 1, (16, 32)).astype("float32")
    b = rng.uniform(-1, 1, (16, 32)).astype("float32")
    c = np.zeros((16, 16), "float32")
    run(f, a, b, c)

    def tf32(x):
        bits = x.view(np.uint32)
        return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)

    np.testing.assert_allclose(c, tf32(a) @ tf32(b).T, rtol=1e-5, atol=1e-5)
    src = kernel_source([f.body])
    # Each 16-deep tile: two 8-deep TF32 fragments, each register rounded after its load.
    assert src.count("wmma.load.a.sync.aligned.row.m16n16k8.tf32") == 4
    assert src.count("cvt.rna.tf32.f32") == 4 * 2 * 4  # 4 tiles, 2 steps, 4 registers
    assert src.count("m16n16k8.f32.tf32.tf32.f32") == 4
    compile_cuda(src, "sm_90")
