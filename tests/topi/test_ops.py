import numpy as np
import pytest

import tecomp
from tecomp import autotune
from tecomp.errors import ShapeError
from tecomp.topi.matmul import pack_dense_weight_bf16


def _run(task, index):
    s, args = task.instantiate(task.config_space.get(index))
    mod = tecomp.build(s, args)
    rng = np.random.default_rng(index)
    arrs = [rng.uniform(-1, 1, [int(x.value) for x in t.shape]).astype("float32") for t in args]
    arrs[-1][...] = np.nan
    mod(*arrs)
    return arrs


def _indices(task):
    n = len(task.config_space)
    return sorted({task.default_config.index, 0, n - 1, n // 3})


def conv_ref(x, w, stride, pad, groups=1):
    N, C, H, W = x.shape
    K, Cg, R, S = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    OH = (H + 2 * pad[0] - R) // stride[0] + 1
    OW = (W + 2 * pad[1] - S) // stride[1] + 1
    out = np.zeros((N, K, OH, OW), np.float64)
    per = K // groups
    for k in range(K):
        g = k // per
        for r in range(R):
            for s_ in range(S):
                patch = xp[:, g * Cg:(g + 1) * Cg, r:r + stride[0] * OH:stride[0],
                           s_:s_ + stride[1] * OW:stride[1]]
                out[:, k] += np.einsum("nchw,c->nhw", patch, w[k, :, r, s_])
    return out


@pytest.mark.parametrize("args", [(33, 40, 50, "float32"), (8, 16, 64, "float32")])
def test_matmul(args):
    task = autotune.create_task("matmul", args)
    assert task.flop == 2 * args[0] * args[1] * args[2]
    for i in _indices(task):
        a, b, c = _run(task, i)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bias, act", [(True, "relu"), (False, "none"), (True, "sigmoid")])
def test_dense(bias, act):
    task = autotune.create_task("dense", (7, 24, 40, "float32", bias, act))
    for i in _indices(task):
        arrs = _run(task, i)
        ref = arrs[0] @ arrs[1].T + (arrs[2] if bias else 0)
        ref = {"relu": np.maximum(ref, 0), "none": ref,
               "sigmoid": 1 / (1 + np.exp(-ref))}[act]
        np.testing.assert_allclose(arrs[-1], ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("template", ["dense", "dense_packed"])
@pytest.mark.parametrize("shape", [(7, 24, 40), (1, 34, 33), (130, 64, 96)])
def test_bfloat16_dense_multiplies_pairs_of_k(template, shape):
    """bfloat16 X and W summed in float32 (vdpbf16ps where the CPU has it): the weight
    packed by the compute as words of two k, or prepacked (pack_dense_weight_bf16), over
    a sample of the space; a symbolic-free row count past the tile (130)."""
    N, K, M = shape
    task = autotune.create_task(template, (N, K, M, "bfloat16", True, "relu"))
    rng = np.random.default_rng(N)
    x = rng.uniform(-1, 1, (N, K)).astype("bfloat16")
    w = rng.uniform(-1, 1, (M, K)).astype("bfloat16")
    b = rng.uniform(-1, 1, M).astype("float32")
    ref = np.maximum(x.astype("float32") @ w.astype("float32").T + b, 0)
    for i in _indices(task):
        s, args = task.instantiate(task.config_space.get(i))
        weight = w
        if template == "dense_packed":
            weight = pack_dense_weight_bf16(w, int(args[1].shape[2].value))
        y = np.full((N, M), np.nan, "float32")
        tecomp.build(s, args)(x, weight, b, y)
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_bfloat16_dense_refuses_an_odd_k():
    with pytest.raises(ShapeError, match="K must be even"):
        autotune.create_task("dense_packed", (4, 33, 16, "bfloat16", False, "none"))


def test_batch_matmul():
    task = autotune.create_task("batch_matmul", (2, 9, 16, 35, "float32"))
    for i in _indices(task):
        a, b, c = _run(task, i)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_batch_matmul_with_transposed_b():
    # B is [b, M, K] (attention's keys); M = 35 leaves a padded last block of columns.
    task = autotune.create_task("batch_matmul", (2, 9, 16, 35, "float32", True))
    assert [int(d.value) for d in task.instantiate()[1][1].shape] == [2, 35, 16]
    for i in _indices(task):
        a, b, c = _run(task, i)
        np.testing.assert_allclose(c, a @ b.transpose(0, 2, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows", [1, 5])
def test_batch_matmul_with_transposed_b_of_symbolic_length(rows):
    # A key cache of any length: one build, its packed copy padded to whole blocks.
    from tecomp import te
    from tecomp.autotune.space import FallbackConfigEntity
    from tecomp.topi.matmul import compute_batch_matmul, schedule_batch_matmul

    length = te.var("length")
    cfg = FallbackConfigEntity()
    A = te.placeholder((3, rows, 64), "float32", name="A")
    B = te.placeholder((3, length, 64), "float32", name="B")
    C = compute_batch_matmul(cfg, A, B, transpose_b=True)
    mod = tecomp.build(schedule_batch_matmul(cfg, [C]), [A, B, C])
    rng = np.random.default_rng(rows)
    for m in (1, 17, 64, 241):
        a = rng.uniform(-1, 1, (3, rows, 64)).astype("float32")
        b = rng.uniform(-1, 1, (3, m, 64)).astype("float32")
        c = np.full((3, rows, m), np.nan, np.float32)
        mod(a, b, c)
        np.testing.assert_allclose(c, a @ b.transpose(0, 2, 1), rtol=1e-4, atol=1e-4)


def test_batch_matmul_with_transposed_b_names_the_shapes_that_disagree():
    from tecomp import te
    from tecomp.autotune.space import FallbackConfigEntity
    from tecomp.topi.matmul import compute_batch_matmul

    A = te.placeholder((2, 4, 8), "float32", name="A")
    with pytest.raises(ShapeError, match=r"B is \[2, 5, 6\] \(transposed\)"):
        compute_batch_matmul(FallbackConfigEntity(), A, te.placeholder((2, 5, 6), "float32"),
                             transpose_b=True)
    with pytest.raises(ShapeError, match="needs a static K"):
        k = te.var("k")
        compute_batch_matmul(FallbackConfigEntity(), te.placeholder((2, 4, k), "float32"),
                             te.placeholder((2, 5, k), "float32"), transpose_b=True)


@pytest.mark.parametrize("args", [
    ((1, 5, 9, 11), (6, 5, 3, 3), (1, 1), (1, 1), (1, 1), "float32"),
    ((2, 4, 10, 10), (8, 4, 3, 3), (2, 2), (0, 0), (1, 1), "float32"),
    ((1, 3, 7, 7), (4, 3, 1, 1), (1, 1), (0, 0), (1, 1), "float32"),
])
def test_conv2d(args):
    task = autotune.create_task("conv2d", args)
    for i in _indices(task):
        x, w, y = _run(task, i)
        np.testing.assert_allclose(y, conv_ref(x, w, args[2], args[3]), rtol=1e-4, atol=1e-4)


def test_depthwise_conv2d():
    args = ((1, 6, 9, 11), (6, 1, 3, 3), (1, 1), (1, 1), (1, 1), "float32")
    task = autotune.create_task("depthwise_conv2d", args)
    for i in _indices(task):
        x, w, y = _run(task, i)
        np.testing.assert_allclose(y, conv_ref(x, w, (1, 1), (1, 1), groups=6),
                                   rtol=1e-4, atol=1e-4)


def test_fallback_schedule_is_tiled_and_vectorized():
    task = autotune.create_task("matmul", (64, 64, 64, "float32"))
    s, args = task.instantiate()  # no records: fallback
    text = str(tecomp.lower(s, args))
    assert "vectorized" in text and "parallel" in text and "local" in text


def test_workload_keys_fill_defaults():
    a = autotune.create_task("matmul", (16, 16, 16))
    b = autotune.create_task("matmul", (16, 16, 16, "float32"))
    assert a.args == b.args and a.workload_hash == b.workload_hash


def test_product_lanes_follow_the_target():
    # x86 keeps the space the shipped logs were tuned over; a 4-lane NEON target gets
    # the same range in its own vectors, and a fallback of two of them.
    x86 = autotune.create_task("matmul", (64, 64, 64), "llvm -mcpu=znver4")
    arm = autotune.create_task("matmul", (64, 64, 64), "llvm -mtriple=aarch64-linux-gnu")
    assert [e.val for e in x86.config_space.space_map["bn"].entities] == [8, 16, 32, 48, 64]
    assert [e.val for e in arm.config_space.space_map["bn"].entities] == [4, 8, 16, 32, 48]
    assert x86.default_config["bn"].val == 32
    assert arm.default_config["bn"].val == 8


def test_small_batch_fallback_takes_all_rows_in_one_tile():
    task = autotune.create_task("dense_packed", (4, 256, 100, "float32", True, "none"))
    cfg = task.default_config
    assert cfg["tile_y"].size[-1] == 4 and cfg["order"].val == "ji"
    s, args = task.instantiate()
    text = str(tecomp.lower(s, args))
    assert "W.packed" not in text and "parallel" in text and "vectorized" in text
