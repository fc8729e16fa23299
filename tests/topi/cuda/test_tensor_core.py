"""Products on tensor cores: float16 matmul, dense and batch_matmul with sizes in
multiples of 16 on wmma fragments, under the fallback config and random configs of
their space, against numpy (simulated without a GPU, on the GPU where there is one)."""

import re

import numpy as np
import pytest

import tecomp
from tecomp import autotune
from tecomp.ir import dtype as dt
from tecomp.topi.cuda import tensor_core

import util

CONV = ("conv2d.cuda", ((2, 5, 7, 7), (24, 5, 3, 3), (2, 2), (1, 1), (1, 1), "float16"))
CASES = [
    ("matmul.cuda", (32, 64, 48, "float16")),
    ("matmul.cuda", (32, 48, 64, "bfloat16")),
    ("dense.cuda", (32, 48, 64, "float16", True, "relu")),
    ("batch_matmul.cuda", (2, 32, 32, 16, "float16", True)),
    ("batch_matmul.cuda", (2, 16, 32, 32, "float16")),
    CONV,
]


def _inputs(name, args, rng):
    dtype = next(a for a in args if a in tensor_core.INPUT_DTYPES)

    def half(shape):
        return util.rand(rng, shape, "float32").astype(dt.numpy_dtype(dtype))

    if name == "matmul.cuda":
        N, K, M, *_ = args
        a, b = half((N, K)), half((K, M))
        return [a, b], a.astype("float32") @ b.astype("float32")
    if name == "dense.cuda":
        N, K, M, *_ = args
        x, w, bias = half((N, K)), half((M, K)), half((M,))
        y = x.astype("float32") @ w.astype("float32").T + bias.astype("float32")
        return [x, w, bias], np.maximum(y, 0)
    if name == "conv2d.cuda":
        data, kernel = half(args[0]), half(args[1])
        return [data, kernel], util.conv2d_reference(
            data.astype("float32"), kernel.astype("float32"), args[2][0], args[3][0])
    Bt, N, K, M, _, *rest = args
    a = half((Bt, N, K))
    if rest and rest[0]:
        b = half((Bt, M, K))
        return [a, b], a.astype("float32") @ b.astype("float32").transpose(0, 2, 1)
    b = half((Bt, K, M))
    return [a, b], a.astype("float32") @ b.astype("float32")


def _check(task, config, rng, target):
    s, args = task.instantiate(config)
    inputs, expected = _inputs(task.name, task.args, rng)
    # Products and sums in float32 as numpy's; the result rounded to 16 bits once.
    tol = 2e-3 if args[-1].dtype == "float16" else 1.6e-2
    util.check_schedule(s, args, inputs, [expected.astype(dt.numpy_dtype(args[-1].dtype))],
                        rtol=tol, atol=tol, target=target)
    return s, args


@pytest.mark.parametrize("name, args", CASES, ids=[c[0] for c in CASES])
def test_fallback_config_runs_on_fragments(name, args, cuda_target, rng):
    task = autotune.create_task(name, args, cuda_target)
    assert {"tc_m", "tc_n", "tc_k", "tc_pad", "tc_double"} <= set(task.config_space.space_map)
    bf16 = "bfloat16" in args
    s, tensors = _check(task, None, rng, cuda_target)
    source = tecomp.build(s, tensors, target=cuda_target).get_source("cuda")
    assert "wmma.mma.sync.aligned.row." in source
    assert "__shared__ __align__(32) " in source
    assert ("m16n16k16.f32.bf16.bf16.f32" in source) is bf16
    assert ("#include <cuda_bf16.h>" in source) is bf16


@pytest.mark.parametrize("name, args", CASES[:4], ids=[c[0] for c in CASES[:4]])
def test_random_configs_match_numpy(name, args, cuda_target, rng):
    task = autotune.create_task(name, args, cuda_target)
    space = task.config_space
    for index in rng.choice(len(space), size=min(3, len(space)), replace=False):
        _check(task, space.get(int(index)), rng, cuda_target)


def test_doubled_shared_tiles_alternate_halves(cuda_target, rng):
    task = autotune.create_task(*CASES[0], cuda_target)
    space = task.config_space
    config = next(c for c in map(space.get, range(len(space)))
                  if c["tc_double"].val and c["tc_k"].size[0] > 1 and c["tc_m"].size[1] > 1)
    s, args = _check(task, config, rng, cuda_target)
    f = tecomp.lower(s, args, target=cuda_target)
    assert f.attrs.get("double_buffered")
    # One barrier per step of k (before the fill of the other half), not two.
    assert str(f).count("barrier()") <= 3
    # From sm_80 on the fills are cp.async copies, which each barrier first waits for.
    source = tecomp.build(s, args, target="cuda -arch=sm_80").get_source("cuda")
    fills = re.findall(r"tc_copy_async<16>\((\w+)_shared", source)
    assert sorted(fills) == ["A", "A", "B", "B"]  # the first step's fills, then the next's
    assert source.count("tc_copies_wait();\n") == source.count("__syncthreads();") == 3
    older = tecomp.build(s, args, target="cuda -arch=sm_75").get_source("cuda")
    assert "cp.async" not in older and "*(uint4*)(" in older


def test_a_dense_weight_is_loaded_column_major(cuda_target):
    task = autotune.create_task("dense.cuda", CASES[2][1], cuda_target)
    s, args = task.instantiate(None)
    source = tecomp.build(s, args, target=cuda_target).get_source("cuda")
    assert "wmma.load.b.sync.aligned.col.m16n16k16.f16" in source
    assert "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32" in source


@pytest.mark.parametrize("dtype, sizes, applies", [
    ("float16", (64, 32, 16), True),
    ("bfloat16", (16, 16, 16), True),
    ("float16", (64, 40, 16), False),      # k not a multiple of 16
    ("float32", (64, 32, 16), False),
])
def test_which_products_use_tensor_cores(dtype, sizes, applies):
    assert tensor_core.applies(dtype, *sizes) is applies


def test_other_float16_products_sum_in_float32_without_tensor_cores(cuda_target, rng):
    task = autotune.create_task("matmul.cuda", (24, 40, 8, "float16"), cuda_target)
    s, args = task.instantiate(None)
    assert "wmma" not in tecomp.build(s, args, target=cuda_target).get_source("cuda")
    inputs, expected = _inputs("matmul.cuda", task.args, rng)
    util.check_schedule(s, args, inputs, [expected.astype("float16")], rtol=2e-3, atol=2e-3,
                        target=cuda_target)


@pytest.mark.gpu
def test_a_tensor_core_product_on_the_gpu(gpu, rng):
    task = autotune.create_task("matmul.cuda", (256, 256, 256, "float16"), "cuda")
    s, args = task.instantiate(None)
    mod = tecomp.build(s, args, target="cuda")
    inputs, expected = _inputs("matmul.cuda", task.args, rng)
    out = np.zeros((256, 256), "float16")
    mod(*inputs, out)
    np.testing.assert_allclose(out.astype("float32"), expected, rtol=2e-3, atol=2e-3)


def _tf32(x):
    """``x`` rounded to TF32: 10 bits of mantissa, to nearest, ties away from zero."""
    bits = np.ascontiguousarray(x, "float32").view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


@pytest.mark.parametrize("name, args", [
    ("matmul.cuda", (64, 48, 32, "float32", True)),
    ("dense.cuda", (32, 32, 48, "float32", True, "relu", True)),
    ("batch_matmul.cuda", (2, 16, 32, 16, "float32", True, True)),
], ids=["matmul", "dense", "batch_matmul"])
def test_float32_products_asked_for_tf32_run_on_tensor_cores(name, args, cuda_target, rng):
    task = autotune.create_task(name, args, cuda_target)
    s, tensors = task.instantiate(None)
    mod = tecomp.build(s, tensors, target=cuda_target)
    source = mod.get_source("cuda")
    # A 16-deep tile is two TF32 fragments 8 deep, rounded to nearest on load.
    assert "wmma.mma.sync.aligned.row.col.m16n16k8.f32.tf32.tf32.f32" in source or \
        "wmma.mma.sync.aligned.row.row.m16n16k8.f32.tf32.tf32.f32" in source
    assert "cvt.rna.tf32.f32" in source
    # The accumulator is stored with the shape that summed it.
    assert "wmma.store.d.sync.aligned.row.m16n16k8.f32" in source
    assert "m16n16k16" not in source
    # The output is written by tensor-core stores alone (no epilogue) for matmul and
    # batch_matmul: the signature still says it is written, so a call with numpy arrays
    # copies it back from the GPU (it came back unwritten, NaN, on an H200).
    assert [p.output for p in mod[mod.entry_name].signature.params] == \
        [False] * (len(tensors) - 1) + [True]
    ins = [util.rand(rng, [int(d) for d in t.shape]) for t in tensors[:-1]]
    a, b = _tf32(ins[0]), _tf32(ins[1])
    if name == "dense.cuda":
        expected = np.maximum(a @ b.T + ins[2], 0)
    else:
        expected = a @ (np.swapaxes(b, -1, -2) if name == "batch_matmul.cuda" else b)
    # Products of TF32 values are exact in float32: only the order of the sums differs.
    util.check_schedule(s, tensors, ins, [expected], rtol=1e-5, atol=1e-5,
                        target=cuda_target)


def test_float32_products_stay_off_tensor_cores_unless_asked(cuda_target):
    task = autotune.create_task("matmul.cuda", (64, 48, 32, "float32"), cuda_target)
    s, tensors = task.instantiate(None)
    assert "wmma" not in tecomp.build(s, tensors, target=cuda_target).get_source("cuda")


@pytest.mark.parametrize("op, dtype", [("dense", "float16"), ("matmul", "bfloat16"),
                                       ("batch_matmul", "float16"), ("matmul", "float32")])
def test_a_symbolic_row_count_is_padded_to_whole_blocks_on_tensor_cores(op, dtype,
                                                                       cuda_target, rng):
    """A transformer exported with dynamic axes has products of a symbolic row count
    (batch x sequence): their rows are padded with zeros to whole blocks, multiplied on
    tensor cores and cropped; one build serves every count (float32 here as TF32)."""
    from tecomp import te
    from tecomp.autotune import FallbackConfigEntity
    from tecomp.topi import strategy

    n = te.var("n")
    impl = strategy.get_implementation(op, "cuda")
    batch = (2,) if op == "batch_matmul" else ()
    A = te.placeholder((*batch, n, 32), dtype, name="A")
    B = te.placeholder((*batch, 48, 32) if op == "dense" else (*batch, 32, 48), dtype,
                       name="B")
    with tecomp.Target(cuda_target):
        cfg = FallbackConfigEntity()
        out = impl.compute(cfg, A, B, tf32=True)
        s = impl.schedule(cfg, [out])
    assert "tc_m" in cfg
    source = tecomp.build(s, [A, B, out], target=cuda_target).get_source("cuda")
    assert "wmma.mma.sync" in source
    f = util.compile_schedule(s, [A, B, out], cuda_target)
    wide = dt.numpy_dtype(dtype)
    b = util.rand(rng, [int(d) for d in B.shape]).astype(wide)
    for rows in (5, 40):
        a = util.rand(rng, (*batch, rows, 32)).astype(wide)
        a32, b32 = a.astype("float32"), b.astype("float32")
        if dtype == "float32":
            a32, b32 = _tf32(a32), _tf32(b32)
        want = a32 @ (np.swapaxes(b32, -1, -2) if op == "dense" else b32)
        tol = 1e-5 if dtype == "float32" else 2e-3 if dtype == "float16" else 1.6e-2
        util.run_and_check(f, [A, B, out], [a, b], [want.astype(wide)], rtol=tol, atol=tol)
