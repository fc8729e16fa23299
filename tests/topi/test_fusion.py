"""Each operator's compute + schedule with an elementwise epilogue chain (bias, an
activation, a residual read from another input, broadcasts) fused into its output loop,
under the fallback config and sampled configs, against numpy."""

import re

import numpy as np
import pytest

import tecomp
from tecomp import autotune, te
from tecomp.autotune import FallbackConfigEntity
from tecomp.errors import ScheduleError
from tecomp.ir import stmt as S
from tecomp.ir.functor import post_order_visit
from tecomp.topi import strategy
from tecomp.topi.cpu_tiling import product_register_tile
from tecomp.topi.matmul import define_product_knobs

RNG = np.random.default_rng(7)


def _rand(*shape):
    return RNG.uniform(-1, 1, shape).astype("float32")


def _configs(template, args, k=3):
    """The fallback config and ``k`` sampled points of the template's space."""
    space = autotune.create_task(template, args).config_space
    picks = np.random.default_rng(len(space)).choice(len(space), size=k, replace=False)
    return [FallbackConfigEntity()] + [space.get(int(i)) for i in picks]


def _run(s, tensors, arrays):
    out = np.full([int(d.value) for d in tensors[-1].shape], np.nan, "float32")
    tecomp.build(s, tensors)(*arrays, out)
    return out


def _dense_group(cfg, x, w, b, r, packed):
    impl = strategy.get_implementation("dense", "llvm")
    X = te.placeholder(x.shape, name="X")
    b_t = te.placeholder(b.shape, name="b")
    R = te.placeholder(r.shape, name="R")
    if packed:
        cfg = strategy.select_config(impl, x.shape, w.shape, b.shape, dtype="float32")
        (w,) = impl.prepack(cfg, w)
    W = te.placeholder(w.shape, name="W")
    D = impl.compute(cfg, X, W, b_t)
    relu = te.compute(D.shape, lambda i, j: te.max(D[i, j], 0.0), name="relu")
    Y = te.compute(D.shape, lambda i, j: relu[i, j] + R[i, j] * 0.5, name="res")
    return impl.schedule(cfg, [Y]), [X, W, b_t, R, Y], [x, w, b, r]


@pytest.mark.parametrize("N", [1, 5])
@pytest.mark.parametrize("packed", [False, True], ids=["W", "W.packed"])
def test_dense_bias_relu_residual(N, packed):
    K, M = 24, 40
    x, w, b, r = _rand(N, K), _rand(M, K), _rand(M), _rand(N, M)
    ref = np.maximum(x @ w.T + b, 0) + 0.5 * r
    configs = [None] if packed else _configs("dense", (N, K, M, "float32", True, "none"))
    for cfg in configs:
        s, tensors, arrays = _dense_group(cfg, x, w, b, r, packed)
        np.testing.assert_allclose(_run(s, tensors, arrays), ref, rtol=1e-4, atol=1e-4,
                                   err_msg=str(cfg))


def test_dense_packed_template_matches_numpy():
    args = (3, 20, 37, "float32", True, "sigmoid")
    task = autotune.create_task("dense_packed", args)
    x, w, b = _rand(3, 20), _rand(37, 20), _rand(37)
    for cfg in [task.default_config] + _configs("dense_packed", args)[1:]:
        s, tensors = task.instantiate(cfg)
        bn = int(tensors[1].shape[2].value)
        out = _run(s, tensors, [x, tecomp.topi.pack_dense_weight(w, bn), b])
        np.testing.assert_allclose(out, 1 / (1 + np.exp(-(x @ w.T + b))), rtol=1e-4,
                                   atol=1e-4)


def test_matmul_broadcast_bias_sigmoid_scale():
    N, K, M = 9, 16, 35
    a, bm, bias = _rand(N, K), _rand(K, M), _rand(M)
    ref = 2.0 / (1 + np.exp(-(a @ bm + bias)))
    impl = strategy.get_implementation("matmul", "llvm")
    for cfg in _configs("matmul", (N, K, M, "float32")):
        A, B, bias_t = (te.placeholder(v.shape, name=n) for v, n in
                        ((a, "A"), (bm, "B"), (bias, "bias")))
        C = impl.compute(cfg, A, B)
        Z = te.compute(C.shape, lambda i, j: C[i, j] + bias_t[j], name="z")
        Y = te.compute(C.shape, lambda i, j: te.sigmoid(Z[i, j]) * 2.0, name="y")
        out = _run(impl.schedule(cfg, [Y]), [A, B, bias_t, Y], [a, bm, bias])
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4, err_msg=str(cfg))


def test_batch_matmul_residual_relu():
    Bt, N, K, M = 2, 6, 16, 20
    a, bm, res = _rand(Bt, N, K), _rand(Bt, K, M), _rand(Bt, N, M)
    ref = np.maximum(a @ bm + res, 0) - 1.0
    impl = strategy.get_implementation("batch_matmul", "llvm")
    for cfg in _configs("batch_matmul", (Bt, N, K, M, "float32")):
        A, B, R = (te.placeholder(v.shape, name=n) for v, n in
                   ((a, "A"), (bm, "B"), (res, "R")))
        C = impl.compute(cfg, A, B)
        Z = te.compute(C.shape, lambda b, i, j: te.max(C[b, i, j] + R[b, i, j], 0.0))
        Y = te.compute(C.shape, lambda b, i, j: Z[b, i, j] - 1.0, name="y")
        out = _run(impl.schedule(cfg, [Y]), [A, B, R, Y], [a, bm, res])
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4, err_msg=str(cfg))


def _conv_ref(x, w, pad, groups=1):
    N, C, H, W = x.shape
    K, Cg, R, S_ = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    OH, OW = H + 2 * pad - R + 1, W + 2 * pad - S_ + 1
    out = np.zeros((N, K, OH, OW))
    per = K // groups
    for k in range(K):
        g = k // per
        for r in range(R):
            for s in range(S_):
                patch = xp[:, g * Cg:(g + 1) * Cg, r:r + OH, s:s + OW]
                out[:, k] += np.einsum("nchw,c->nhw", patch, w[k, :, r, s])
    return out


def _conv_epilogue(out, bias, R):
    """out + bias[k] -> relu -> + R[n, k, y, x] (three stages)."""
    z = te.compute(out.shape, lambda n, k, y, x: out[n, k, y, x] + bias[k], name="z")
    a = te.compute(out.shape, lambda n, k, y, x: te.max(z[n, k, y, x], 0.0), name="a")
    return te.compute(out.shape, lambda n, k, y, x: a[n, k, y, x] + R[n, k, y, x], name="y")


@pytest.mark.parametrize("packed", [False, True], ids=["OIHW", "blocked"])
def test_conv2d_bias_relu_residual(packed):
    x, w, bias = _rand(1, 8, 9, 10), _rand(16, 8, 3, 3), _rand(16)
    res = _rand(1, 16, 9, 10)
    ref = np.maximum(_conv_ref(x, w, 1) + bias[:, None, None], 0) + res
    impl = strategy.get_implementation("conv2d", "llvm")
    args = (x.shape, w.shape, (1, 1), (1, 1), (1, 1), "float32")
    for cfg in _configs("conv2d", args):
        if packed:
            cfg = cfg if not cfg.is_fallback else strategy.select_config(
                impl, x.shape, w.shape, (1, 1), (1, 1), (1, 1), dtype="float32")
            (wk,) = impl.prepack(cfg, w)
        else:
            wk = w
        X, Wt, B, R = (te.placeholder(v.shape, name=n) for v, n in
                       ((x, "data"), (wk, "kernel"), (bias, "bias"), (res, "res")))
        Y = _conv_epilogue(impl.compute(cfg, X, Wt, (1, 1), (1, 1), (1, 1)), B, R)
        out = _run(impl.schedule(cfg, [Y]), [X, Wt, B, R, Y], [x, wk, bias, res])
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4, err_msg=str(cfg))


def test_depthwise_conv2d_bias_relu_residual():
    x, w, bias, res = _rand(1, 6, 9, 11), _rand(6, 1, 3, 3), _rand(6), _rand(1, 6, 9, 11)
    ref = np.maximum(_conv_ref(x, w, 1, groups=6) + bias[:, None, None], 0) + res
    impl = strategy.get_implementation("depthwise_conv2d", "llvm")
    args = (x.shape, w.shape, (1, 1), (1, 1), (1, 1), "float32")
    for cfg in _configs("depthwise_conv2d", args):
        X, Wt, B, R = (te.placeholder(v.shape, name=n) for v, n in
                       ((x, "data"), (w, "kernel"), (bias, "bias"), (res, "res")))
        Y = _conv_epilogue(impl.compute(cfg, X, Wt, (1, 1), (1, 1), (1, 1)), B, R)
        out = _run(impl.schedule(cfg, [Y]), [X, Wt, B, R, Y], [x, w, bias, res])
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4, err_msg=str(cfg))


def _nodes(func, cls):
    out = []
    post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


def test_fused_dense_bias_relu_is_one_loop_nest():
    x, w, b, r = _rand(4, 64), _rand(48, 64), _rand(48), _rand(4, 48)
    with tecomp.Target("llvm -mcpu=haswell -num-cores=2"):  # AVX2's fallback tile
        s, tensors, _ = _dense_group(None, x, w, b, r, packed=True)
    func = tecomp.lower(s, tensors)
    # One parallel nest writes Y straight from the accumulators: no stage of the
    # epilogue (bias, relu, residual) has a buffer or a loop nest of its own.
    assert [f.kind for f in _nodes(func, S.For) if f.kind == "parallel"] == ["parallel"]
    assert {n.buffer.name for n in _nodes(func, S.Allocate)} == {"P.local"}
    assert {n.buffer.name for n in _nodes(func, S.Store)} == {"P.local", "res"}


def test_an_epilogue_reduction_is_refused():
    impl = strategy.get_implementation("dense", "llvm")
    X, W = te.placeholder((4, 8), name="X"), te.placeholder((16, 8), name="W")
    D = impl.compute(FallbackConfigEntity(), X, W)
    k = te.reduce_axis((0, 16), name="k")
    row = te.compute((4, 1), lambda i, j: te.sum(D[i, k], axis=k), name="rowsum")
    with pytest.raises(ScheduleError, match="rowsum is a reduction"):
        impl.schedule(FallbackConfigEntity(), [row])


def test_dense_with_a_symbolic_batch_runs_every_batch_size():
    # One build for any number of rows (an ONNX batch dimension left symbolic): the
    # fallback tiles the rows as a large batch would, with the tail guarded.
    n = te.var("n")
    cfg = FallbackConfigEntity()
    define_product_knobs(cfg, n, 64, 40)
    # Column blocks outer, as with a static batch: a packed block stays in cache across
    # the row tiles.
    assert cfg["order"].val == "ji"
    impl = strategy.get_implementation("dense", "llvm")
    w, b = _rand(40, 64), _rand(40)
    (wp,) = impl.prepack(cfg, w)
    X = te.placeholder((n, 64), name="X")
    W = te.placeholder(wp.shape, name="W")
    B = te.placeholder((40,), name="b")
    D = impl.compute(cfg, X, W, B)
    Y = te.compute(D.shape, lambda i, j: te.max(D[i, j], 0.0), name="relu")
    sch = impl.schedule(cfg, [Y])
    # The product runs over whole row tiles (the last real row read again past n) and
    # whole column blocks (the packed weight's zero columns past 40), and the row tile
    # and column block of the parallel loop are proved in range, so only the store is
    # guarded (its row and its column), not the multiply-adds of the reduction.
    text = str(tecomp.lower(sch, [X, W, B, Y], target="llvm"))
    guards = [line for line in text.splitlines() if line.strip().startswith("if")]
    row_guards = [line for line in guards if re.search(r"< n:$", line)]
    assert len(row_guards) == 1 and len(guards) == 2, guards
    assert text.rfind("X[") < text.find(guards[0])
    mod = tecomp.build(sch, [X, W, B, Y])
    for rows in (1, 3, 8, 17):
        x = _rand(rows, 64)
        y = np.full((rows, 40), np.nan, "float32")
        mod(x, wp, b, y)
        np.testing.assert_allclose(y, np.maximum(x @ w.T + b, 0), rtol=1e-4, atol=1e-4)


def test_batch_matmul_with_symbolic_sizes_runs_every_size():
    # Attention with a dynamic batch and sequence: scores[b*h, s, s] = Q @ K^T and
    # context[b*h, s, d] = P @ V, one build each for every (batch, sequence).
    impl = strategy.get_implementation("batch_matmul", "llvm")
    bh, s_ = te.var("bh"), te.var("s")
    for a_shape, b_shape in (((bh, s_, 16), (bh, 16, s_)), ((bh, s_, s_), (bh, s_, 16))):
        cfg = FallbackConfigEntity()
        A = te.placeholder(a_shape, name="A")
        B = te.placeholder(b_shape, name="B")
        C = impl.compute(cfg, A, B)
        Y = te.compute(C.shape, lambda b, i, j: C[b, i, j] * 0.5, name="scale")
        sch = impl.schedule(cfg, [Y])
        # The rows run over whole register tiles (the last real row read again past s):
        # no multiply-add tests its row; only the scores' columns (B read in place, s of
        # them) keep a guard.
        text = str(tecomp.lower(sch, [A, B, Y], target="llvm"))
        # The host's register tile rows (8 with AVX-512, 6 with AVX2), the tiling model's.
        r = product_register_tile(tecomp.Target("llvm").caps, 128, 128, 128).rows
        tail = f"% ((s + {r - 1}) // {r}) * {r}"
        row_guards = [line.strip() for line in text.splitlines()
                      if line.strip().startswith("if") and tail in line]
        # One row guard, at the store of the tile's rows (the accumulators' loop is .c).
        assert len(row_guards) == 1 and ".inner +" in row_guards[0], row_guards
        mod = tecomp.build(sch, [A, B, Y])
        for batch, seq in ((1, 1), (3, 37)):
            sizes = {"bh": batch, "s": seq}
            a = _rand(*[sizes.get(getattr(d, "name", None), d) for d in a_shape])
            b = _rand(*[sizes.get(getattr(d, "name", None), d) for d in b_shape])
            y = np.full((batch, a.shape[1], b.shape[2]), np.nan, "float32")
            mod(a, b, y)
            np.testing.assert_allclose(y, 0.5 * (a @ b), rtol=1e-4, atol=1e-4)
