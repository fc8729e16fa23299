"""Matmul, batch matmul, dense + bias + relu, and int8 -> int32 matmul under several
schedules, checked against numpy."""

import numpy as np
import pytest
from util import check_schedule, compile_schedule, rand, run_and_check

from tecomp import te

# Odd sizes, so every split below leaves a tail.
N, K, M = 13, 11, 9


def matmul(n=N, k=K, m=M, dtype="float32", acc=None):
    a = te.placeholder((n, k), dtype=dtype, name="A")
    b = te.placeholder((k, m), dtype=dtype, name="B")
    r = te.reduce_axis((0, k), name="k")
    if acc is None:
        c = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    else:
        c = te.compute(
            (n, m), lambda i, j: te.sum(a[i, r].astype(acc) * b[r, j].astype(acc), axis=r),
            name="C",
        )
    return a, b, c


def mm_default(s, c):
    pass


def mm_tile_tails(s, c):
    io, jo, ii, ji = s[c].tile(*c.op.axis, 4, 4)
    ko, ki = s[c].split(c.op.reduce_axis[0], factor=4)
    s[c].reorder(io, jo, ko, ii, ki, ji)
    s[c].vectorize(ji)


def mm_cache_write_compute_at(s, c):
    cl = s.cache_write(c, "local")
    io, jo, _ii, ji = s[c].tile(*c.op.axis, 4, 8)
    s[cl].compute_at(s[c], jo)
    ci, cj = s[cl].op.axis
    ko, ki = s[cl].split(s[cl].op.reduce_axis[0], factor=3)
    s[cl].reorder(ko, ci, ki, cj)
    s[cl].unroll(ki)
    s[cl].vectorize(cj)
    s[c].vectorize(ji)
    s[c].parallel(io)


def mm_fuse_parallel(s, c):
    i, j = c.op.axis
    f = s[c].fuse(i, j)
    fo, _fi = s[c].split(f, factor=16)
    s[c].parallel(fo)


def mm_nparts_reorder(s, c):
    i, j = c.op.axis
    (k,) = c.op.reduce_axis
    io, ii = s[c].split(i, nparts=3)
    ko, ki = s[c].split(k, nparts=2)
    s[c].reorder(ko, io, j, ki, ii)
    s[c].unroll(ii)


def mm_cache_read(s, c):
    a, b = c.op.input_tensors
    al = s.cache_read(a, "local", [c])
    bl = s.cache_read(b, "local", [c])
    io, ii = s[c].split(c.op.axis[0], factor=4)
    ko, ki = s[c].split(c.op.reduce_axis[0], factor=4)
    s[c].reorder(io, ko, ii, c.op.axis[1], ki)
    s[al].compute_at(s[c], ko)
    s[bl].compute_at(s[c], ko)


def mm_rfactor(s, c):
    _ko, ki = s[c].split(c.op.reduce_axis[0], factor=4)
    cf = s.rfactor(c, ki)
    s[cf].vectorize(s[cf].op.axis[0])  # the factored axis is data-parallel now
    s[c].parallel(c.op.axis[0])


MM_SCHEDULES = {
    "default": mm_default,
    "tile_tails": mm_tile_tails,
    "cache_write_compute_at": mm_cache_write_compute_at,
    "fuse_parallel": mm_fuse_parallel,
    "nparts_reorder": mm_nparts_reorder,
    "cache_read": mm_cache_read,
    "rfactor": mm_rfactor,
}


@pytest.mark.parametrize("name", MM_SCHEDULES)
def test_matmul(name, rng, target):
    a, b, c = matmul()
    s = te.create_schedule(c.op)
    MM_SCHEDULES[name](s, c)
    x, y = rand(rng, (N, K)), rand(rng, (K, M))
    check_schedule(s, [a, b, c], [x, y], [x @ y], rtol=1e-5, atol=1e-5, target=target)


@pytest.mark.parametrize("name", ["default", "tile_tails", "cache_write_compute_at",
                                  "fuse_parallel", "cache_read"])
def test_matmul_symbolic(name, rng, target):
    n, k, m = te.var("n"), te.var("k"), te.var("m")
    a, b, c = matmul(n, k, m)
    s = te.create_schedule(c.op)
    MM_SCHEDULES[name](s, c)
    f = compile_schedule(s, [a, b, c], target=target)
    for nn, kk, mm in [(1, 1, 1), (5, 3, 8), (9, 7, 10)]:
        x, y = rand(rng, (nn, kk)), rand(rng, (kk, mm))
        run_and_check(f, [a, b, c], [x, y], [x @ y], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["default", "tile_tails", "cache_write_compute_at", "rfactor"])
def test_matmul_int8_int32(name, rng, target):
    """int8 inputs, int32 accumulation through astype; values large enough that an int8
    accumulator would overflow."""
    a, b, c = matmul(dtype="int8", acc="int32")
    assert c.dtype == "int32"
    s = te.create_schedule(c.op)
    MM_SCHEDULES[name](s, c)
    x = rng.integers(-128, 128, size=(N, K)).astype("int8")
    y = rng.integers(-128, 128, size=(K, M)).astype("int8")
    x[0, :] = 127
    y[:, 0] = 127
    ref = x.astype("int32") @ y.astype("int32")
    check_schedule(s, [a, b, c], [x, y], [ref], target=target)


@pytest.mark.parametrize("name", ["default", "tile_tails", "cache_write_compute_at"])
def test_matmul_float16_storage_float32_accumulation(name, rng, target):
    """float16 in and out, accumulation in float32: C16 = C32.astype(float16)."""
    a, b, c32 = matmul(dtype="float16", acc="float32")
    c = te.compute(c32.shape, lambda i, j: c32[i, j].astype("float16"), name="C16")
    s = te.create_schedule(c.op)
    MM_SCHEDULES[name](s, c32)
    _io, ii = s[c].split(c.op.axis[1], factor=4)
    s[c].vectorize(ii)
    x, y = rand(rng, (N, K), "float16"), rand(rng, (K, M), "float16")
    ref = (x.astype("float32") @ y.astype("float32")).astype("float16")
    out = check_schedule(s, [a, b, c], [x, y], [ref], rtol=1e-3, atol=1e-3, target=target)[0]
    assert out.dtype == np.float16


def batch_matmul(bsz=3, n=5, k=6, m=7):
    a = te.placeholder((bsz, n, k), name="A")
    b = te.placeholder((bsz, k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((bsz, n, m), lambda bb, i, j: te.sum(a[bb, i, r] * b[bb, r, j], axis=r),
                   name="C")
    return a, b, c


def bmm_fuse_parallel(s, c):
    bb, i, j = c.op.axis
    f = s[c].fuse(bb, i)
    s[c].parallel(f)
    _jo, ji = s[c].split(j, factor=4)
    s[c].vectorize(ji)


def bmm_cache_write(s, c):
    cl = s.cache_write(c, "local")
    _bb, i, _j = s[c].op.axis
    io, _ii = s[c].split(i, factor=2)
    s[cl].compute_at(s[c], io)
    _, _, cj = s[cl].op.axis
    ko, ki = s[cl].split(s[cl].op.reduce_axis[0], factor=4)
    s[cl].reorder(ko, ki, cj)


def bmm_split_k_reorder(s, c):
    bb, i, j = c.op.axis
    (k,) = c.op.reduce_axis
    ko, ki = s[c].split(k, factor=4)
    s[c].reorder(bb, ko, i, ki, j)
    s[c].unroll(ki)


@pytest.mark.parametrize("sched", [mm_default, bmm_fuse_parallel, bmm_cache_write,
                                   bmm_split_k_reorder])
def test_batch_matmul(sched, rng, target):
    a, b, c = batch_matmul()
    s = te.create_schedule(c.op)
    sched(s, c)
    x, y = rand(rng, (3, 5, 6)), rand(rng, (3, 6, 7))
    check_schedule(s, [a, b, c], [x, y], [x @ y], rtol=1e-5, atol=1e-5, target=target)


def test_batch_matmul_symbolic_batch(rng, target):
    bsz = te.var("batch")
    a, b, c = batch_matmul(bsz=bsz)
    s = te.create_schedule(c.op)
    bmm_fuse_parallel(s, c)
    f = compile_schedule(s, [a, b, c], target=target)
    for nb in (1, 2, 4):
        x, y = rand(rng, (nb, 5, 6)), rand(rng, (nb, 6, 7))
        run_and_check(f, [a, b, c], [x, y], [x @ y], rtol=1e-5, atol=1e-5)


# ---- dense + bias + relu ----------------------------------------------------------------------


def dense_bias_relu(batch=6, cin=10, cout=9):
    x = te.placeholder((batch, cin), name="X")
    w = te.placeholder((cout, cin), name="W")
    bias = te.placeholder((cout,), name="bias")
    r = te.reduce_axis((0, cin), name="k")
    d = te.compute((batch, cout), lambda i, j: te.sum(x[i, r] * w[j, r], axis=r), name="dense")
    bb = te.compute((batch, cout), lambda i, j: d[i, j] + bias[j], name="bias_add")
    out = te.compute((batch, cout), lambda i, j: te.max(bb[i, j], 0.0), name="relu")
    return [x, w, bias, out], d, bb


def dbr_inline_compute_at(s, d, bb, out):
    s[bb].compute_inline()
    _i, j = out.op.axis
    jo, ji = s[out].split(j, factor=4)
    s[d].compute_at(s[out], jo)
    s[out].vectorize(ji)


def dbr_cache_write(s, d, bb, out):
    s[bb].compute_inline()
    dl = s.cache_write(d, "local")
    s[d].compute_inline()
    io, jo, _ii, ji = s[out].tile(*out.op.axis, 4, 4)
    s[dl].compute_at(s[out], jo)
    s[out].parallel(io)
    s[out].vectorize(ji)
    ko, ki = s[dl].split(s[dl].op.reduce_axis[0], factor=3)
    s[dl].reorder(ko, *s[dl].op.axis, ki)


def dbr_compute_at_all(s, d, bb, out):
    i, j = out.op.axis
    f = s[out].fuse(i, j)
    fo, _fi = s[out].split(f, factor=5)
    s[out].parallel(fo)
    s[bb].compute_at(s[out], fo)
    s[d].compute_at(s[bb], s[bb].op.axis[1])


def dbr_default(s, d, bb, out):
    pass


@pytest.mark.parametrize("sched", [dbr_default, dbr_inline_compute_at, dbr_cache_write,
                                   dbr_compute_at_all])
def test_dense_bias_relu(sched, rng, target):
    args, d, bb = dense_bias_relu()
    out = args[-1]
    s = te.create_schedule(out.op)
    sched(s, d, bb, out)
    x, w, bias = rand(rng, (6, 10)), rand(rng, (9, 10)), rand(rng, (9,))
    ref = np.maximum(x @ w.T + bias, 0)
    assert (ref == 0).any() and (ref > 0).any()
    check_schedule(s, args, [x, w, bias], [ref], rtol=1e-5, atol=1e-5, target=target)


def test_dense_bias_relu_symbolic_batch(rng, target):
    n = te.var("n")
    args, d, bb = dense_bias_relu(batch=n)
    out = args[-1]
    s = te.create_schedule(out.op)
    dbr_cache_write(s, d, bb, out)
    f = compile_schedule(s, args, target=target)
    for nb in (1, 3, 6, 9):
        x, w, bias = rand(rng, (nb, 10)), rand(rng, (9, 10)), rand(rng, (9,))
        run_and_check(f, args, [x, w, bias], [np.maximum(x @ w.T + bias, 0)], 1e-5, 1e-5)
