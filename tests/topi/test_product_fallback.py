"""The fallback configs of the matrix-product templates on the shapes that leave tails: no
tile dividing the extents, batch 1 (the wide block), rows bound at call time."""

import numpy as np
import pytest

import tecomp
from tecomp import autotune, te
from tecomp.autotune.space import FallbackConfigEntity
from tecomp.topi.matmul import compute_matmul, pack_dense_weight, schedule_matmul

X86 = "llvm -mcpu=skylake-avx512"


def _rand(rng, *shape):
    return rng.uniform(-1, 1, shape).astype("float32")


@pytest.mark.parametrize("n, k, m", [(40, 33, 100), (9, 17, 50), (1, 64, 1000)])
def test_matmul_fallback_with_tails(n, k, m):
    task = autotune.create_task("matmul", (n, k, m, "float32"))
    s, args = task.instantiate(task.default_config)
    mod = tecomp.build(s, args)
    rng = np.random.default_rng(0)
    a, b = _rand(rng, n, k), _rand(rng, k, m)
    c = np.full((n, m), np.nan, np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n, k, m", [(1, 96, 200), (1, 40, 1000), (3, 70, 100), (4, 32, 72),
                                     (8, 24, 40)])
def test_prepacked_dense_fallback_with_tails(n, k, m):
    task = autotune.create_task("dense_packed", (n, k, m, "float32", True, "relu"))
    s, args = task.instantiate(task.default_config)
    mod = tecomp.build(s, args)
    bn = int(args[1].shape[2].value)
    rng = np.random.default_rng(1)
    x, w, b = _rand(rng, n, k), _rand(rng, m, k), _rand(rng, m)
    y = np.full((n, m), np.nan, np.float32)
    mod(x, pack_dense_weight(w, bn), b, y)
    np.testing.assert_allclose(y, np.maximum(x @ w.T + b, 0), rtol=1e-4, atol=1e-4)


def test_matmul_fallback_with_symbolic_rows():
    # A graph with a dynamic batch builds the fallback once for every row count.
    with tecomp.Target("llvm"):
        cfg = FallbackConfigEntity()
        A = te.placeholder((te.var("n"), 36), "float32", name="A")
        B = te.placeholder((36, 100), "float32", name="B")
        C = compute_matmul(cfg, A, B)
        s = schedule_matmul(cfg, [C])
    mod = tecomp.build(s, [A, B, C])
    rng = np.random.default_rng(2)
    b = _rand(rng, 36, 100)
    for n in (1, 7, 8, 13):
        a = _rand(rng, n, 36)
        c = np.full((n, 100), np.nan, np.float32)
        mod(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n, k, m, bn", [
    (1, 512, 1000, 64),   # batch 1, a 2 MB weight that stays in cache: 4 chains a row
    (4, 256, 1024, 64),
    (1, 2048, 1000, 32),  # an 8 MB weight streams from memory: the width of old
    (6, 256, 1024, 32),   # more rows than the wide tile's registers allow
    (1, 512, 40, 32),     # narrower than the wide block
    (128, 256, 256, 32),
])
def test_fallback_block_width(n, k, m, bn):
    task = autotune.create_task("dense_packed", (n, k, m, "float32", True, "none"), X86)
    assert task.default_config["bn"].val == bn
