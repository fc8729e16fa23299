"""The cuda templates under their fallback config and a few random configs: each builds
with NVRTC and matches numpy, on the GPU where there is one and simulated on the CPU
otherwise. Shapes are small so simulation stays fast."""

import re

import numpy as np
import pytest

import tecomp
from tecomp import autotune, te
from tecomp.topi import strategy

import util


def _inputs(name, args, rng):
    if name in ("matmul.cuda",):
        N, K, M, *_ = args
        a, b = util.rand(rng, (N, K)), util.rand(rng, (K, M))
        return [a, b], [a @ b]
    if name == "dense.cuda":
        N, K, M, _, bias, act, *_ = args
        x, w, b = util.rand(rng, (N, K)), util.rand(rng, (M, K)), util.rand(rng, (M,))
        y = x @ w.T + b
        return [x, w, b], [np.maximum(y, 0) if act == "relu" else y]
    if name == "batch_matmul.cuda":
        Bt, N, K, M, _, transposed, *_ = args
        a = util.rand(rng, (Bt, N, K))
        if transposed:
            b = util.rand(rng, (Bt, M, K))
            return [a, b], [a @ b.transpose(0, 2, 1)]
        b = util.rand(rng, (Bt, K, M))
        return [a, b], [a @ b]
    data_shape, kernel_shape, strides, padding = args[:4]
    d, k = util.rand(rng, data_shape), util.rand(rng, kernel_shape)
    return [d, k], [util.conv2d_reference(d, k, strides[0], padding[0],
                              depthwise=name.startswith("depthwise"))]


CASES = [
    ("matmul.cuda", (32, 16, 32, "float32")),
    ("dense.cuda", (8, 16, 24, "float32", True, "relu")),
    ("batch_matmul.cuda", (2, 16, 8, 16, "float32")),
    ("batch_matmul.cuda", (2, 16, 8, 16, "float32", True)),
    ("conv2d.cuda", ((1, 4, 6, 6), (8, 4, 3, 3), (1, 1), (1, 1), (1, 1), "float32")),
    ("depthwise_conv2d.cuda",
     ((1, 4, 8, 8), (8, 1, 3, 3), (2, 2), (1, 1), (1, 1), "float32")),
]


def _check(task, config, rng, target):
    s, args = task.instantiate(config)
    inputs, expected = _inputs(task.name, task.args, rng)
    util.check_schedule(s, args, inputs, expected, rtol=1e-4, atol=1e-4, target=target)


@pytest.mark.parametrize("name, args", CASES, ids=[c[0] for c in CASES])
def test_fallback_config_matches_numpy(name, args, cuda_target, rng):
    task = autotune.create_task(name, args, cuda_target)
    _check(task, None, rng, cuda_target)


@pytest.mark.parametrize("name, args", CASES, ids=[c[0] for c in CASES])
def test_random_configs_match_numpy(name, args, cuda_target, rng):
    """Two random configs that fit a block's thread limit (the others are build errors,
    one trial each, which test_invalid_config_is_a_build_error covers)."""
    task = autotune.create_task(name, args, cuda_target)
    space = task.config_space
    picked = 0
    for index in rng.permutation(len(space)):
        config = space.get(int(index))
        threads = np.prod([v[-2] for v in config.to_json().values()
                           if isinstance(v, list) and len(v) >= 3])
        if threads > 256:
            continue
        _check(task, config, rng, cuda_target)
        picked += 1
        if picked == 2:
            break
    assert picked == 2


def test_fallback_blocks_threads_and_stages_through_shared_memory(cuda_target):
    task = autotune.create_task("matmul.cuda", (64, 32, 64, "float32"), cuda_target)
    s, args = task.instantiate()
    src = tecomp.build(s, args, target=cuda_target).get_source("cuda")
    assert "__shared__" in src and "__syncthreads()" in src
    assert "float4" in src  # the shared tiles are loaded four lanes at a time
    assert "threadIdx.y" in src and "blockIdx.x" in src


def test_dense_with_symbolic_rows(cuda_target, rng):
    n = te.var("n")
    impl = strategy.get_implementation("dense", "cuda")
    X = te.placeholder((n, 16), name="X")
    W = te.placeholder((8, 16), name="W")
    cfg = strategy.select_config(impl, (4, 16), (8, 16), None, target=cuda_target)
    Y = impl.compute(cfg, X, W)
    s = impl.schedule(cfg, [Y])
    f = util.compile_schedule(s, [X, W, Y], cuda_target)
    w = util.rand(rng, (8, 16))
    for rows in (3, 9):
        x = util.rand(rng, (rows, 16))
        util.run_and_check(f, [X, W, Y], [x, w], [x @ w.T], rtol=1e-4, atol=1e-4)


def test_conv2d_implementation_fuses_an_epilogue(cuda_target, rng):
    impl = strategy.get_implementation("conv2d", "cuda")
    data = te.placeholder((1, 4, 5, 5), name="data")
    kernel = te.placeholder((4, 4, 3, 3), name="kernel")
    bias = te.placeholder((4,), name="bias")
    cfg = strategy.select_config(impl, (1, 4, 5, 5), (4, 4, 3, 3), (1, 1), (1, 1),
                                 target=cuda_target)
    conv = impl.compute(cfg, data, kernel, (1, 1), (1, 1))
    out = te.compute(conv.shape, lambda n, k, y, x: te.max(conv[n, k, y, x] + bias[k], 0.0),
                     name="out")
    s = impl.schedule(cfg, [out])
    d, k, b = util.rand(rng, (1, 4, 5, 5)), util.rand(rng, (4, 4, 3, 3)), util.rand(rng, (4,))
    ref = np.maximum(util.conv2d_reference(d, k, 1, 1) + b[None, :, None, None], 0)
    util.check_schedule(s, [data, kernel, bias, out], [d, k, b], [ref], rtol=1e-4,
                        atol=1e-4, target=cuda_target)


@pytest.mark.parametrize("name, args", [
    ("dense.cuda", (2, 512, 8, "float32", True, "relu")),    # the epilogue after the sum
    ("matmul.cuda", (2, 520, 4, "float32")),                 # parts of unequal depth
    ("batch_matmul.cuda", (2, 2, 512, 4, "float32")),
], ids=lambda v: v if isinstance(v, str) else None)
def test_a_product_split_along_k_sums_its_parts_in_a_second_kernel(name, args, cuda_target,
                                                                   rng):
    task = autotune.create_task(name, args, cuda_target)
    space = task.config_space
    assert [e.val for e in space.space_map["split_k"].entities] == [1, 2, 4, 8]
    assert task.default_config["split_k"].val == 1  # untuned: one part
    # The fallback's tiles, k in four parts.
    digits = space.digits_of(task.default_config.index)
    digits[space.knob_names.index("split_k")] = 2
    config = space.get(space.index_of(digits))
    assert config["split_k"].val == 4
    s, tensors = task.instantiate(config)
    mod = tecomp.build(s, tensors, target=cuda_target)
    # The parts' partial sums: a global temporary between the two kernels.
    assert [step["op"] for step in mod[mod.entry_name].plan] == ["alloc", "launch", "launch"]
    _check(task, config, rng, cuda_target)


def test_a_shallow_product_is_not_split_along_k(cuda_target):
    task = autotune.create_task("matmul.cuda", (32, 256, 32, "float32"), cuda_target)
    assert [e.val for e in task.config_space.space_map["split_k"].entities] == [1]


QNN_CASES = [
    ("qnn_matmul.cuda", (4, 24, 8, "uint8", True)),
    ("qnn_conv2d.cuda", ((1, 3, 6, 6), (4, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), "int8",
                         True)),
]


def _qnn_inputs(name, args, rng):
    def ints(dtype, shape):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max + 1, shape).astype(dtype)

    if name == "qnn_matmul.cuda":
        N, K, M, dtype, _ = args
        a, b = ints(dtype, (N, K)), ints("int8", (K, M))
        za, zb = ints(dtype, ()), ints("int8", (M,))
        want = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)
        return [a, b, za, zb], [want.astype("int32")]
    data_shape, kernel_shape, strides, padding, _, dtype, _ = args
    x, w = ints(dtype, data_shape), ints("int8", kernel_shape)
    zx, zw = ints(dtype, ()), ints("int8", (kernel_shape[0],))
    want = util.conv2d_reference((x.astype(np.int64) - zx).astype("float64"),
                                 (w.astype(np.int64) - zw[:, None, None, None]).astype(
                                     "float64"), strides[0], padding[0])
    return [x, w, zx, zw], [want.astype("int32")]


@pytest.mark.parametrize("name, args", QNN_CASES, ids=[c[0] for c in QNN_CASES])
def test_int8_products_match_numpy_exactly(name, args, cuda_target, rng):
    """The fallback config and two random ones (of at most 256 threads a block)."""
    task = autotune.create_task(name, args, cuda_target)
    space = task.config_space
    configs = [None] + [c for c in map(space.get, rng.permutation(len(space)).tolist())
                        if np.prod([v[-2] for v in c.to_json().values()
                                    if isinstance(v, list) and len(v) >= 3]) <= 256][:2]
    for config in configs:
        s, tensors = task.instantiate(config)
        inputs, expected = _qnn_inputs(name, args, rng)
        util.check_schedule(s, tensors, inputs, expected, rtol=0, atol=0,
                            target=cuda_target)


def test_invalid_config_is_a_build_error():
    """A config whose block has more threads than the target allows fails when it is
    lowered (a build error costs one trial), naming the limit."""
    task = autotune.create_task("matmul.cuda", (1024, 64, 1024, "float32"),
                                "cuda -max-threads-per-block=64")
    space = task.config_space
    config = next(space.get(i) for i in range(len(space))
                  if space.get(i)["tile_y"].size[2] * space.get(i)["tile_x"].size[2] > 64)
    s, args = task.instantiate(config)
    with pytest.raises(tecomp.TecompError, match="max-threads-per-block"):
        tecomp.lower(s, args, target=task.target)


@pytest.mark.parametrize("name, args", [c for c in CASES if c[0] in
                                        ("matmul.cuda", "dense.cuda", "batch_matmul.cuda")],
                         ids=lambda v: v if isinstance(v, str) else None)
def test_double_buffer_knob_doubles_the_tiles_and_matches_numpy(name, args, cuda_target,
                                                                 rng):
    task = autotune.create_task(name, args, cuda_target)
    fallback = task.instantiate()[0]
    assert not any(st.double_buffered for st in fallback.stages)
    space = task.config_space
    # Double buffering with at least two k steps, in a block the thread limit allows.
    config = next(c for c in map(space.get, range(len(space)))
                  if c["double_buffer"].val and c["tile_k"].size[0] >= 2
                  and np.prod([v[-2] for v in c.to_json().values()
                               if isinstance(v, list) and len(v) >= 3]) <= 256)
    s, args = task.instantiate(config)
    shared = [st.name for st in s.stages if st.scope == "shared"]
    assert len(shared) == 2 and all(st.double_buffered for st in s.stages
                                    if st.scope == "shared")
    text = str(tecomp.lower(s, args, target=cuda_target))
    for n in shared:
        assert re.search(rf"{re.escape(n)} = allocate\(float32, \[2, ", text)
    _check(task, config, rng, cuda_target)


@pytest.mark.parametrize("N, M, batch, block", [
    (4096, 4096, 1, (128, 128)),   # plenty of output tiles: the classic SGEMM block
    (1024, 1024, 1, (32, 32)),     # 64 blocks of 128 x 128 would leave most SMs idle
    (128, 768, 1, (16, 32)),       # a transformer's projection: 192 blocks at the least
    (128, 128, 12, (16, 32)),      # attention scores of 12 heads
    (128, 3072, 1, (32, 32)),
])
def test_the_product_fallback_tile_fills_the_gpu(N, M, batch, block):
    from tecomp.topi.cuda.product import _fallback_tiles

    rows, cols = _fallback_tiles(N, M, batch)
    assert (rows[1] * rows[2] * rows[3], cols[1] * cols[2] * cols[3]) == block


@pytest.mark.parametrize("rows, activation", [(1, "relu"), (3, "none")])
def test_an_untuned_dense_of_few_rows_is_a_block_per_output(rows, activation, cuda_target,
                                                             rng):
    """A classifier at batch 1: a block of threads per output element splits k, and the
    bias and activation come from the block's sum."""
    args = (rows, 384, 20, "float32", True, activation)
    s, tensors = autotune.create_task("dense.cuda", args, cuda_target).instantiate()
    mod = tecomp.build(s, tensors, target=cuda_target, name="fc")
    launches = [step for step in mod.plans["fc"] if step["op"] == "launch"]
    assert [step["grid"][0] for step in launches] == [rows * 20]
    x, w, b = (rng.standard_normal(shape).astype("float32")
               for shape in ((rows, 384), (20, 384), (20,)))
    y = np.full((rows, 20), np.nan, "float32")
    (mod if util.gpu_available() else mod.simulate)(x, w, b, y)
    ref = x @ w.T + b
    np.testing.assert_allclose(y, np.maximum(ref, 0) if activation == "relu" else ref,
                               rtol=1e-4, atol=1e-4)
