"""CUDA schedules end to end: built with NVRTC, then run on the GPU where there is one
and simulated on the CPU otherwise (threads phase by phase between barriers, shared
memory per block), and compared with numpy. The ``gpu`` variants insist on a real GPU."""

import numpy as np
import pytest

import tecomp

import cuda_schedules
import util


def _check(s, args, inputs, expected, target, rtol=1e-5, atol=1e-6):
    util.check_schedule(s, args, inputs, expected, rtol=rtol, atol=atol, target=target)


def test_matmul_with_shared_tiles_virtual_threads_and_vector_loads(cuda_target, rng):
    s, args = cuda_schedules.matmul_shared()
    a = util.rand(rng, (32, 16))
    b = util.rand(rng, (16, 32))
    _check(s, args, [a, b], [a @ b], cuda_target, rtol=1e-5, atol=1e-5)


def test_matmul_larger_tiles_and_more_steps(cuda_target, rng):
    s, args = cuda_schedules.matmul_shared(M=32, N=64, K=32, block=32, threads=4,
                                           vthreads=2, step=4)
    a = util.rand(rng, (32, 32))
    b = util.rand(rng, (32, 64))
    _check(s, args, [a, b], [a @ b], cuda_target, rtol=1e-5, atol=1e-5)


def test_matmul_whose_rows_do_not_fill_the_last_block(cuda_target, rng):
    s, args = cuda_schedules.matmul_shared(M=40, N=32, K=16)
    a = util.rand(rng, (40, 16))
    b = util.rand(rng, (16, 32))
    _check(s, args, [a, b], [a @ b], cuda_target, rtol=1e-5, atol=1e-5)


def test_conv2d_with_padded_input_tiles_in_shared_memory(cuda_target, rng):
    s, args = cuda_schedules.conv2d_shared()
    a = util.rand(rng, (1, 4, 8, 8))
    w = util.rand(rng, (8, 4, 3, 3))
    ap = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(ap[0], (3, 3), axis=(1, 2))
    ref = np.einsum("cyxij,kcij->kyx", windows, w)[None]
    _check(s, args, [a, w], [ref.astype("float32")], cuda_target, rtol=1e-5, atol=1e-5)


def test_reduction_into_a_register(cuda_target, rng):
    s, args = cuda_schedules.row_sum()
    a = util.rand(rng, (8, 32))
    _check(s, args, [a], [a.sum(axis=1)], cuda_target, rtol=1e-5, atol=1e-5)


def test_stencil_reads_neighbours_loaded_by_other_threads(cuda_target, rng):
    s, args = cuda_schedules.stencil_shared()
    a = util.rand(rng, (66,))
    _check(s, args, [a], [a[:-2] + a[1:-1] + a[2:]], cuda_target, rtol=1e-5, atol=1e-6)


def test_two_kernels_through_a_global_temporary(cuda_target, rng):
    s, args = cuda_schedules.two_kernels()
    a = util.rand(rng, (48,))
    _check(s, args, [a], [np.exp(a) + 1], cuda_target, rtol=1e-6)


def test_producer_computed_inside_each_thread(cuda_target, rng):
    s, args = cuda_schedules.producer_per_thread()
    mod = tecomp.build(s, args, target=cuda_target)
    assert "float B[1];" in mod.get_source("cuda")  # one element per thread, a register
    a = util.rand(rng, (64,))
    _check(s, args, [a], [a * 2 + 1], cuda_target)


def test_symbolic_size_at_several_values(cuda_target):
    s, args = cuda_schedules.elementwise(threads=32)
    f = util.compile_schedule(s, args, cuda_target)
    for n in (5, 32, 70):
        x = np.linspace(-1, 1, n, dtype="float32")
        util.run_and_check(f, args, [x], [x * 2])


@pytest.mark.gpu
@pytest.mark.parametrize("make,shapes,ref", [
    (cuda_schedules.matmul_shared, [(32, 16), (16, 32)], lambda a, b: a @ b),
    (cuda_schedules.stencil_shared, [(66,)], lambda a: a[:-2] + a[1:-1] + a[2:]),
    (cuda_schedules.two_kernels, [(48,)], lambda a: np.exp(a) + 1),
])
def test_on_the_gpu(make, shapes, ref, gpu, rng):
    s, args = make()
    mod = tecomp.build(s, args, target="cuda")
    inputs = [util.rand(rng, sh) for sh in shapes]
    out = ref(*inputs)
    got = np.zeros_like(out)
    mod(*inputs, got)
    np.testing.assert_allclose(got, out, rtol=1e-5, atol=1e-5)
