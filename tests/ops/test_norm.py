"""Multi-stage operators: softmax (max, exp-sum, divide) and layer normalization, under
several schedules, checked against numpy."""

import numpy as np
import pytest
from util import check_schedule, compile_schedule, rand, run_and_check

from tecomp import te


def softmax(b, n, m):
    """Softmax over the last axis of x[b, n, m], in four stages."""
    x = te.placeholder((b, n, m), name="x")
    k1 = te.reduce_axis((0, m), name="k1")
    mx = te.compute((b, n), lambda p, i: te.max(x[p, i, k1], axis=k1), name="mx")
    e = te.compute((b, n, m), lambda p, i, j: te.exp(x[p, i, j] - mx[p, i]), name="e")
    k2 = te.reduce_axis((0, m), name="k2")
    sm = te.compute((b, n), lambda p, i: te.sum(e[p, i, k2], axis=k2), name="sm")
    out = te.compute((b, n, m), lambda p, i, j: e[p, i, j] / sm[p, i], name="softmax")
    return x, (mx, e, sm), out


def ref_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(x.dtype)


def sm_default(s, stages, out):
    pass


def sm_compute_at_row(s, stages, out):
    mx, e, sm = stages
    _p, i, j = out.op.axis
    for st in (mx, e, sm):
        s[st].compute_at(s[out], i)
    _jo, ji = s[out].split(j, factor=4)
    s[out].vectorize(ji)


def sm_inline_exp_parallel_fused(s, stages, out):
    mx, e, sm = stages
    s[e].compute_inline()
    p, i, j = out.op.axis
    f = s[out].fuse(p, i)
    s[out].parallel(f)
    s[mx].compute_at(s[out], f)
    s[sm].compute_at(s[out], f)
    _jo, ji = s[out].split(j, factor=8)  # wider than m: a loop of only a tail
    s[out].vectorize(ji)


def sm_split_reductions(s, stages, out):
    mx, e, sm = stages
    (k1,) = mx.op.reduce_axis
    _ko, _ki = s[mx].split(k1, factor=3)
    (k2,) = sm.op.reduce_axis
    _ko2, ki2 = s[sm].split(k2, nparts=2)
    s[sm].unroll(ki2)
    _p, _i, j = e.op.axis
    _jo, ji = s[e].split(j, factor=3)
    s[e].vectorize(ji)


def sm_rfactor_sum(s, stages, out):
    _mx, e, sm = stages
    (k2,) = sm.op.reduce_axis
    _ko, ki = s[sm].split(k2, factor=2)
    s.rfactor(sm, ki)
    s[e].compute_inline()
    s[out].parallel(out.op.axis[0])


def sm_cache_write(s, stages, out):
    _mx, e, sm = stages
    ol = s.cache_write(out, "local")
    _p, i, _j = s[out].op.axis
    io, _ii = s[out].split(i, factor=2)
    s[ol].compute_at(s[out], io)
    s[sm].compute_at(s[out], io)
    s[e].compute_at(s[out], io)


SM_SCHEDULES = [sm_default, sm_compute_at_row, sm_inline_exp_parallel_fused,
                sm_split_reductions, sm_rfactor_sum, sm_cache_write]


@pytest.mark.parametrize("sched", SM_SCHEDULES)
def test_softmax(sched, rng, target):
    x, stages, out = softmax(2, 3, 7)
    s = te.create_schedule(out.op)
    sched(s, stages, out)
    xv = rand(rng, (2, 3, 7), lo=-5, hi=5)
    check_schedule(s, [x, out], [xv], [ref_softmax(xv)], rtol=1e-5, atol=1e-6, target=target)


def test_softmax_large_inputs_are_stable(rng, target):
    """Subtracting the max keeps exp from overflowing."""
    x, stages, out = softmax(1, 2, 5)
    s = te.create_schedule(out.op)
    sm_compute_at_row(s, stages, out)
    xv = (rand(rng, (1, 2, 5)) * 10 + 200).astype("float32")
    res = check_schedule(s, [x, out], [xv], [ref_softmax(xv)], rtol=1e-5, atol=1e-6,
                         target=target)[0]
    assert np.isfinite(res).all()


@pytest.mark.parametrize("sched", [
    sm_default,
    sm_compute_at_row,
    sm_inline_exp_parallel_fused,  # codegen bug 2 (fixed)
])
def test_softmax_symbolic(sched, rng, target):
    b, n, m = te.var("b"), te.var("n"), te.var("m")
    x, stages, out = softmax(b, n, m)
    s = te.create_schedule(out.op)
    sched(s, stages, out)
    f = compile_schedule(s, [x, out], target=target)
    for shape in [(1, 1, 1), (2, 3, 9), (1, 4, 16)]:
        xv = rand(rng, shape, lo=-3, hi=3)
        run_and_check(f, [x, out], [xv], [ref_softmax(xv)], rtol=1e-5, atol=1e-6)


# ---- layer normalization ----------------------------------------------------------------------


def layer_norm(n, m, eps=1e-5):
    x = te.placeholder((n, m), name="x")
    gamma = te.placeholder((m,), name="gamma")
    beta = te.placeholder((m,), name="beta")
    k1 = te.reduce_axis((0, m), name="k1")
    fm = m.astype("float32") if isinstance(m, te.PrimExpr) else float(m)
    s1 = te.compute((n,), lambda i: te.sum(x[i, k1], axis=k1), name="s1")
    mean = te.compute((n,), lambda i: s1[i] / fm, name="mean")
    k2 = te.reduce_axis((0, m), name="k2")
    var = te.compute((n,), lambda i: te.sum((x[i, k2] - mean[i]) * (x[i, k2] - mean[i]),
                                            axis=k2), name="var")
    out = te.compute(
        (n, m),
        lambda i, j: (x[i, j] - mean[i]) * te.rsqrt(var[i] / fm + eps) * gamma[j] + beta[j],
        name="layer_norm",
    )
    return [x, gamma, beta, out], (s1, mean, var)


def ref_layer_norm(x, g, b, eps=1e-5):
    x64 = x.astype("float64")
    mu = x64.mean(axis=-1, keepdims=True)
    var = ((x64 - mu) ** 2).mean(axis=-1, keepdims=True)
    return ((x64 - mu) / np.sqrt(var + eps) * g + b).astype("float32")


def ln_default(s, stages, out):
    pass


def ln_compute_at_row_vectorize(s, stages, out):
    s1, mean, var = stages
    i, j = out.op.axis
    for st in (s1, mean, var):
        s[st].compute_at(s[out], i)
    _jo, ji = s[out].split(j, factor=4)
    s[out].vectorize(ji)
    s[out].parallel(i)


def ln_inline_mean_split_rows(s, stages, out):
    s1, mean, var = stages
    s[mean].compute_inline()
    i, _j = out.op.axis
    io, _ii = s[out].split(i, factor=3)
    s[s1].compute_at(s[out], io)
    s[var].compute_at(s[out], io)
    (k2,) = var.op.reduce_axis
    _ko, ki = s[var].split(k2, factor=4)
    s[var].unroll(ki)


def ln_cache_write_fused_parallel(s, stages, out):
    _s1, _mean, _var = stages
    ol = s.cache_write(out, "local")
    i, j = s[out].op.axis
    f = s[out].fuse(i, j)
    fo, _fi = s[out].split(f, factor=6)
    s[out].parallel(fo)
    s[ol].compute_at(s[out], fo)


@pytest.mark.parametrize("sched", [ln_default, ln_compute_at_row_vectorize,
                                   ln_inline_mean_split_rows, ln_cache_write_fused_parallel])
def test_layer_norm(sched, rng, target):
    args, stages = layer_norm(5, 11)
    out = args[-1]
    s = te.create_schedule(out.op)
    sched(s, stages, out)
    x, g, b = rand(rng, (5, 11), lo=-2, hi=3), rand(rng, (11,)), rand(rng, (11,))
    check_schedule(s, args, [x, g, b], [ref_layer_norm(x, g, b)], rtol=1e-4, atol=1e-5,
                   target=target)


def test_layer_norm_symbolic(rng, target):
    n, m = te.var("n"), te.var("m")
    args, stages = layer_norm(n, m)
    out = args[-1]
    s = te.create_schedule(out.op)
    ln_compute_at_row_vectorize(s, stages, out)
    f = compile_schedule(s, args, target=target)
    for nn, mm in [(1, 2), (3, 7), (4, 16)]:
        x, g, b = rand(rng, (nn, mm)), rand(rng, (mm,)), rand(rng, (mm,))
        run_and_check(f, args, [x, g, b], [ref_layer_norm(x, g, b)], rtol=1e-4, atol=1e-5)
