"""CUDA C generation and NVRTC compilation (no GPU needed): what the source holds, that
it compiles to a cubin for the requested architecture, and how errors read."""

import re
import sys
from math import erf

import numpy as np
import pytest

import tecomp
from tecomp import te
from tecomp.codegen.cuda import compile_cuda
from tecomp.errors import CodegenError

import cuda_schedules
import util


@pytest.fixture(autouse=True)
def _needs_nvrtc(cuda_target):
    return cuda_target


def test_matmul_source_is_readable_cuda_with_the_schedule_in_it():
    s, args = cuda_schedules.matmul_shared()
    mod = tecomp.build(s, args, target="cuda", name="mm")
    src = mod.get_source("cuda")
    assert 'extern "C" __global__ void __launch_bounds__(16) mm_kernel0(' in src
    assert "const float* __restrict__ A, const float* __restrict__ B, " \
           "float* __restrict__ C" in src
    assert "__shared__ float A_shared[128];" in src
    assert src.count("__syncthreads();") == 2
    assert "(int)blockIdx.y" in src and "(int)threadIdx.x" in src
    assert "float C_local[16];" in src
    # A's tile rows are 2 floats per thread and B's 4: one vector access each.
    assert re.search(r"\*\(float2\*\)\(A_shared \+ .*\*\(const float2\*\)\(A \+", src)
    assert re.search(r"\*\(float4\*\)\(B_shared \+ .*\*\(const float4\*\)\(B \+", src)
    assert "#pragma unroll" in src


def test_cubin_and_ptx_for_the_target_architecture():
    s, args = cuda_schedules.elementwise(n=256)
    mod = tecomp.build(s, args, target="cuda")
    assert ".target sm_90" in mod.get_source("ptx")
    assert mod.cubin[:4] == b"\x7fELF"
    mod80 = tecomp.build(s, args, target="cuda -arch=sm_80")
    assert ".target sm_80" in mod80.get_source("ptx")
    with pytest.raises(ValueError, match="'cuda', 'ptx'"):
        mod.get_source("ll")


def test_symbolic_size_guards_the_last_block():
    s, args = cuda_schedules.elementwise(threads=64)
    mod = tecomp.build(s, args, target="cuda")
    assert "int n)" in mod.get_source("cuda")
    assert re.search(r"if \(\(\(\(i_outer \* 64\) \+ i_inner\) < n\)\)", mod.get_source("cuda"))
    f = util.compile_schedule(s, args, "cuda")
    for n in (1, 63, 100):
        util.run_and_check(f, args, [np.arange(n, dtype="float32")],
                           [np.arange(n, dtype="float32") * 2])


def test_tensors_named_as_cpp_keywords_get_other_names(rng):
    """ONNX names a Not node's output "not": an alternative token in C++, so the parameter
    is renamed (as "and", "xor" and the keywords are) and the kernel compiles."""
    x = te.placeholder((16,), dtype="bool", name="and")
    y = te.compute((16,), lambda i: ~x[i], name="not")
    s = te.create_schedule(y.op)
    outer, inner = s[y].split(y.op.axis[0], factor=8)
    s[y].bind(outer, te.thread_axis("blockIdx.x"))
    s[y].bind(inner, te.thread_axis("threadIdx.x"))
    src = tecomp.build(s, [x, y], target="cuda").get_source("cuda")
    assert "const bool* __restrict__ and_1, bool* __restrict__ not_1)" in src
    a = rng.random(16) < 0.5
    util.check_schedule(s, [x, y], [a], [~a], target="cuda")


def test_tensors_named_as_the_generators_own_helpers_get_other_names():
    x = te.placeholder((16,), name="tc_copy_async")
    y = te.compute((16,), lambda i: x[i] * 2.0, name="tc_copies_wait")
    s = te.create_schedule(y.op)
    outer, inner = s[y].split(y.op.axis[0], factor=8)
    s[y].bind(outer, te.thread_axis("blockIdx.x"))
    s[y].bind(inner, te.thread_axis("threadIdx.x"))
    src = tecomp.build(s, [x, y], target="cuda").get_source("cuda")
    assert "const float* __restrict__ tc_copy_async_1, float* __restrict__ " \
           "tc_copies_wait_1)" in src


@pytest.mark.parametrize("dtype,fns", [
    ("float32", ["expf(", "logf(", "sqrtf(", "tanhf(", "erff("]),
    ("float64", ["exp(", "log(", "sqrt(", "tanh(", "erf("]),
])
def test_math_intrinsics_map_to_cuda_functions(dtype, fns, rng):
    def f(x):
        return te.exp(x) + te.log(te.abs(x) + 1.0) + te.sqrt(te.abs(x)) + te.tanh(x) + te.erf(x)

    s, args = cuda_schedules.elementwise(n=64, threads=32, fn=f, dtype=dtype)
    mod = tecomp.build(s, args, target="cuda")
    for fn in fns:
        assert fn in mod.get_source("cuda")
    x = util.rand(rng, (64,), dtype)
    ref = np.exp(x) + np.log(np.abs(x) + 1) + np.sqrt(np.abs(x)) + np.tanh(x) + \
        np.vectorize(erf)(x).astype(dtype)
    util.check_schedule(s, args, [x], [ref.astype(dtype)], rtol=1e-5, atol=1e-5,
                        target="cuda")


def test_int8_dot_products_compile_to_dp4a(rng):
    # uint8 x int8 quads: two signed __dp4a (the unsigned bytes flipped, 128 * sum added).
    n = 64
    A = te.placeholder((n,), "int32", name="A")
    B = te.placeholder((n,), "int32", name="B")
    C = te.compute((n,), lambda i: te.dot4_u8s8(A[i], B[i]), name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=32)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    assert tecomp.build(s, [A, B, C], target="cuda").get_source("cuda").count("__dp4a(") == 2
    a = rng.integers(0, 256, (n, 4)).astype(np.uint8)
    b = rng.integers(-128, 128, (n, 4)).astype(np.int8)
    want = (a.astype(np.int32) * b.astype(np.int32)).sum(axis=1).astype(np.int32)
    util.check_schedule(s, [A, B, C], [a.view(np.int32).ravel(), b.view(np.int32).ravel()],
                        [want], target="cuda")


def test_float16_through_cuda_fp16(rng):
    s, args = cuda_schedules.elementwise(n=64, threads=32, fn=lambda x: te.exp(x) * x + 1.0,
                                         dtype="float16")
    mod = tecomp.build(s, args, target="cuda")
    src = mod.get_source("cuda")
    assert "#include <cuda_fp16.h>" in src
    assert "const half* __restrict__ A" in src and "__half2float(" in src
    x = util.rand(rng, (64,), "float16")
    ref = (np.exp(x.astype("float32")).astype("float16") * x + np.float16(1)).astype("float16")
    util.check_schedule(s, args, [x], [ref], rtol=1e-2, atol=1e-2, target="cuda")


def test_nvrtc_error_carries_the_log_and_the_offending_line():
    src = 'extern "C" __global__ void k(float* a) {\n  a[0] = undefined_name;\n}\n'
    with pytest.raises(CodegenError) as info:
        compile_cuda(src, "sm_90", name="bad.cu")
    msg = str(info.value)
    assert "NVRTC could not compile" in msg and "undefined_name" in msg
    assert "2 |   a[0] = undefined_name;" in msg


def test_building_without_nvrtc_says_what_to_install(monkeypatch):
    from tecomp.codegen.cuda import nvrtc

    # The bindings are not importable (None in sys.modules makes an import fail).
    monkeypatch.delattr("cuda.bindings.nvrtc", raising=False)
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", None)
    monkeypatch.setitem(sys.modules, "cuda.nvrtc", None)
    nvrtc._nvrtc.cache_clear()
    try:
        s, args = cuda_schedules.elementwise(n=64)
        with pytest.raises(CodegenError, match=r'NVRTC bindings.*pip install "tecomp\[cuda\]"'):
            tecomp.build(s, args, target="cuda")
    finally:
        nvrtc._nvrtc.cache_clear()


def test_vectorized_elementwise_loop_is_one_vector_load_and_store(rng):
    s, args = cuda_schedules.vector_elementwise(bias=True)
    src = tecomp.build(s, args, target="cuda").get_source("cuda")
    assert re.search(r"float4 A_v0 = \*\(const float4\*\)\(A \+ ", src)
    assert "B_v.w = ((A_v0.w * 2.0f) + Bias[0]);" in src
    assert re.search(r"\*\(float4\*\)\(B \+ .*\) = B_v;", src)
    a, bias = util.rand(rng, (256,)), util.rand(rng, (1,))
    util.check_schedule(s, args, [a, bias], [a * 2 + bias[0]], target="cuda")


def test_unaligned_vectorized_loop_stays_a_loop():
    A = te.placeholder((66,), name="A")
    B = te.compute((64,), lambda i: A[i + 1], name="B")
    s = te.create_schedule(B.op)
    rest, v = s[B].split(B.op.axis[0], factor=4)
    s[B].bind(rest, te.thread_axis("threadIdx.x"))
    s[B].vectorize(v)
    src = tecomp.build(s, [A, B], target="cuda").get_source("cuda")
    assert "float4" not in src and "#pragma unroll" in src


def test_partitioned_loop_declares_its_shared_tiles_once(rng):
    # K = 20 is not a multiple of the k step (8): partitioning copies the k loop body,
    # with the allocations of the tiles in it, for the last, guarded step.
    s, args = cuda_schedules.matmul_shared(K=20)
    assert str(tecomp.lower(s, args, target="cuda")).count("A.shared = allocate") == 2
    mod = tecomp.build(s, args, target="cuda")
    src = mod.get_source("cuda")
    assert src.count("__shared__ float A_shared[128];") == 1
    assert src.count("__shared__ float B_shared[128];") == 1
    a = rng.random((32, 20), dtype="float32")
    b = rng.random((20, 32), dtype="float32")
    c = np.zeros((32, 32), "float32")
    mod.simulate(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_a_prefetch_hint_is_left_out_of_cuda_source():
    s, args = cuda_schedules.matmul_shared()
    stage = next(st for st in s.stages if st.op.name == "C.local")
    reduce_axis = next(iv for iv in stage.leaf_iter_vars if iv.iter_type == "reduce")
    stage.prefetch(stage.op.input_tensors[0], reduce_axis, 1)
    src = tecomp.build(s, args, target="cuda", name="mm").get_source("cuda")
    assert "prefetch" not in src and src.count("__syncthreads();") == 2


def test_shared_tiles_over_48_kb_are_dynamic_shared_memory_given_at_launch():
    # Two 128 x 64 float tiles: 64 KB, over what a kernel may declare statically (the
    # GPU runs it in tests/runtime/test_cuda_module.py).
    s, args = cuda_schedules.matmul_shared(M=128, N=128, K=64, block=128, threads=8, step=64)
    mod = tecomp.build(s, args, target="cuda", name="mm")
    src = mod.get_source("cuda")
    assert "__shared__ float" not in src
    assert "extern __shared__ __align__(128) unsigned char tc_dynamic_shared[];" in src
    offsets = re.findall(r"float\* ([AB])_shared = reinterpret_cast<float\*>\("
                         r"tc_dynamic_shared \+ (\d+)\);", src)
    assert sorted(int(at) for _, at in offsets) == [0, 32768]
    (launch,) = mod["mm"].plan
    assert launch["shared"] == 65536


def test_shared_memory_over_the_architectures_limit_is_refused():
    s, args = cuda_schedules.matmul_shared(M=128, N=128, K=64, block=128, threads=8, step=64)
    with pytest.raises(tecomp.errors.ScheduleError,
                       match=r"65536 bytes of shared memory .*max-shared-memory-per-block "
                             r"\(49152\)"):
        tecomp.build(s, args, target="cuda -arch=sm_61")
