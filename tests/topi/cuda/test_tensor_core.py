"""Products on tensor cores: float16 matmul, dense and batch_matmul with sizes in
multiples of 16 on wmma fragments, under the fallback config and random configs of
their space, against numpy (simulated without a GPU, on the GPU where there is one)."""

import numpy as np
import pytest

import tecomp
from tecomp import autotune
from tecomp.topi.cuda import tensor_core

import util

CASES = [
    ("matmul.cuda", (64, 64, 64, "float16")),
    ("dense.cuda", (32, 48, 64, "float16", True, "relu")),
    ("batch_matmul.cuda", (2, 32, 32, 16, "float16", True)),
    ("batch_matmul.cuda", (2, 16, 32, 32, "float16")),
]


def _inputs(name, args, rng):
    def half(shape):
        return util.rand(rng, shape, "float16")

    if name == "matmul.cuda":
        N, K, M, _ = args
        a, b = half((N, K)), half((K, M))
        return [a, b], a.astype("float32") @ b.astype("float32")
    if name == "dense.cuda":
        N, K, M, *_ = args
        x, w, bias = half((N, K)), half((M, K)), half((M,))
        y = x.astype("float32") @ w.astype("float32").T + bias.astype("float32")
        return [x, w, bias], np.maximum(y, 0)
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
    # Products and sums in float32 as numpy's; the result rounded to float16 once.
    util.check_schedule(s, args, inputs, [expected.astype("float16")], rtol=2e-3,
                        atol=2e-3, target=target)
    return s, args


@pytest.mark.parametrize("name, args", CASES, ids=[c[0] for c in CASES])
def test_fallback_config_runs_on_fragments(name, args, cuda_target, rng):
    task = autotune.create_task(name, args, cuda_target)
    assert {"tc_m", "tc_n", "tc_k", "tc_pad"} <= set(task.config_space.space_map)
    s, args = _check(task, None, rng, cuda_target)
    source = tecomp.build(s, args, target=cuda_target).get_source("cuda")
    assert "wmma.mma.sync.aligned.row." in source
    assert "__shared__ __align__(32) half" in source


@pytest.mark.parametrize("name, args", CASES[:3], ids=[c[0] for c in CASES[:3]])
def test_random_configs_match_numpy(name, args, cuda_target, rng):
    task = autotune.create_task(name, args, cuda_target)
    space = task.config_space
    for index in rng.choice(len(space), size=min(3, len(space)), replace=False):
        _check(task, space.get(int(index)), rng, cuda_target)


def test_a_dense_weight_is_loaded_column_major(cuda_target):
    task = autotune.create_task("dense.cuda", CASES[1][1], cuda_target)
    s, args = task.instantiate(None)
    source = tecomp.build(s, args, target=cuda_target).get_source("cuda")
    assert "wmma.load.b.sync.aligned.col.m16n16k16.f16" in source
    assert "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32" in source


@pytest.mark.parametrize("dtype, sizes, applies", [
    ("float16", (64, 32, 16), True),
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
