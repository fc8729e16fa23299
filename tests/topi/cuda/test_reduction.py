"""Reductions on a GPU: a block of threads per output element over a large constant
extent (partials in shared memory), one thread per output element otherwise; checked
against numpy on the GPU or in the simulator."""

import numpy as np
import pytest

import tecomp
from tecomp import te, topi
from tecomp.topi import strategy
from tecomp.topi.cuda.reduction import (
    CROSS_THREAD_MIN,
    reduced_extent,
    schedule_cross_thread,
    splits_across_threads,
)

import util


def test_which_reductions_split_across_threads():
    wide = te.placeholder((3, CROSS_THREAD_MIN), name="wide")
    narrow = te.placeholder((3, CROSS_THREAD_MIN - 1), name="narrow")
    n = te.var("n")
    symbolic = te.placeholder((3, n), name="symbolic")
    assert splits_across_threads(topi.reduce_sum(wide, axes=[1], keepdims=1).op)
    assert not splits_across_threads(topi.reduce_sum(narrow, axes=[1], keepdims=1).op)
    assert reduced_extent(topi.reduce_sum(symbolic, axes=[1], keepdims=1).op) is None
    assert not splits_across_threads(topi.reduce_sum(symbolic, axes=[1], keepdims=1).op)
    # argmax reduces (value, index) pairs: rfactor cannot split it.
    assert not splits_across_threads(topi.argmax(wide, axis=1, keepdims=1).op)


@pytest.mark.parametrize("shape, axes", [((3, 300), [1]), ((2, 16, 20), [1, 2])])
def test_a_block_per_output_element(shape, axes, cuda_target, rng):
    x = te.placeholder(shape, name="x")
    r = topi.reduce_sum(x, axes=axes, keepdims=1)
    s = te.create_schedule(r.op)
    schedule_cross_thread(s, r)
    source = tecomp.build(s, [x, r], target=cuda_target).get_source("cuda")
    assert "__shared__" in source and "__syncthreads" in source
    data = util.rand(rng, shape)
    util.check_schedule(s, [x, r], [data], [data.sum(axis=tuple(axes), keepdims=True)],
                        rtol=1e-4, target=cuda_target)


@pytest.mark.parametrize("op, ref", [
    ("softmax", lambda x: np.exp(x - x.max(-1, keepdims=True))
     / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)),
    ("reduce_mean", lambda x: x.mean(-1, keepdims=True)),
])
def test_wide_rows_of_the_strategy_schedule(op, ref, cuda_target, rng):
    x = te.placeholder((2, 2 * CROSS_THREAD_MIN), name="x")
    impl = strategy.get_implementation(op, "cuda")
    out = (impl.compute(None, x, axis=-1) if op == "softmax"
           else impl.compute(None, x, axes=[-1], keepdims=1))
    s = impl.schedule(None, [out])
    # One kernel: a block per row computes its statistics, then its elements.
    assert tecomp.build(s, [x, out], target=cuda_target).get_source().count("__global__") == 1
    data = util.rand(rng, (2, 2 * CROSS_THREAD_MIN))
    util.check_schedule(s, [x, out], [data], [ref(data)], rtol=1e-4, target=cuda_target)


def test_layer_norm_has_a_cuda_implementation(cuda_target, rng):
    x = te.placeholder((2, 6), name="x")
    g = te.placeholder((6,), name="g")
    b = te.placeholder((6,), name="b")
    impl = strategy.get_implementation("layer_norm", "cuda")
    out = impl.compute(None, x, g, b, axis=-1, epsilon=1e-5)
    data, gd, bd = util.rand(rng, (2, 6)), util.rand(rng, (6,)), util.rand(rng, (6,))
    mean = data.mean(-1, keepdims=True)
    ref = (data - mean) / np.sqrt(data.var(-1, keepdims=True) + 1e-5) * gd + bd
    util.check_schedule(impl.schedule(None, [out]), [x, g, b, out], [data, gd, bd], [ref],
                        rtol=1e-4, atol=1e-5, target=cuda_target)
