"""Several threads calling one ``GraphModule`` at once, as an inference server calls one
loaded model: every result equals the serial one, bit for bit (each run holds a memory plan
of its own; kernels release the GIL, so the runs really overlap)."""

import threading

import numpy as np
import pytest
import util

from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build, executor
from tecomp.testing import models

THREADS, CALLS = 8, 50


@pytest.fixture(scope="module")
def resnet():
    """A small ResNet (basic blocks, projection shortcuts, dynamic batch) and its library."""
    if not util.llvm_available():
        pytest.skip(util.llvm_status_message())
    model = models.resnet(depths=(1, 1), width=8, image=32, classes=10)
    mod, params = from_onnx(model)
    return build(mod, params=params)


def _images(count: int, batch=lambda i: 1) -> list:
    rng = np.random.default_rng(1)
    return [rng.standard_normal((batch(i), 3, 32, 32)).astype("float32") for i in range(count)]


def _in_threads(work, threads: int = THREADS) -> None:
    """Run ``work(k)`` for k in range(threads), each in its own thread, started together;
    re-raise the first error one of them met."""
    start, errors = threading.Barrier(threads), []

    def run(k):
        start.wait()
        try:
            work(k)
        except BaseException as e:  # reported in the test's thread
            errors.append(e)

    pool = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        raise errors[0]


def _serial(gm, xs) -> list:
    return [gm(input=x)[0] for x in xs]


def test_eight_threads_of_fifty_calls_give_the_serial_results(resnet):
    gm = GraphModule(resnet)
    xs = _images(THREADS * CALLS)
    want = _serial(gm, xs)
    got = [None] * len(xs)

    def work(k):
        for i in range(k, len(xs), THREADS):
            got[i], = gm(input=xs[i])

    _in_threads(work)
    wrong = [i for i, (g, w) in enumerate(zip(got, want)) if not np.array_equal(g, w)]
    assert not wrong, f"{len(wrong)} of {len(xs)} results differ from the serial ones"
    # One pool of plans for the one input shape, no bigger than the calls in flight.
    pool, = gm._plans.values()
    assert 1 <= len(pool.free) <= THREADS


def test_concurrent_calls_of_different_batch_sizes(resnet):
    gm = GraphModule(resnet)
    batches = (1, 2, 3, 4)
    xs = _images(len(batches) * 10, batch=lambda i: batches[i % len(batches)])
    want = _serial(gm, xs)
    got = [None] * len(xs)

    def work(k):
        # Each thread cycles through every batch size, so the shapes in flight mix.
        for i in range(k, len(xs), THREADS):
            got[i], = gm(input=xs[i])

    _in_threads(work)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    # Batches 3 and 4 share the pool laid out for 4 (size_bucket).
    assert sorted(dict(key[1:]).popitem()[1] for key in gm._plans) == [1, 2, 4]


def test_set_input_run_get_output_are_per_thread(resnet):
    gm = GraphModule(resnet)
    xs = _images(THREADS * 10)
    want = _serial(gm, xs)
    got = [None] * len(xs)

    def work(k):
        for i in range(k, len(xs), THREADS):
            gm.set_input("input", xs[i])
            gm.run()
            got[i] = gm.get_output(0).copy()

    _in_threads(work)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


def test_a_thread_sees_only_its_own_inputs_and_outputs(resnet):
    gm = GraphModule(resnet)
    x, = _images(1)
    gm.set_input("input", x)
    gm.run()
    want = gm.get_output(0).copy()
    seen = {}

    def other(_):
        seen["run"] = _raises(gm.run)  # this thread set nothing
        seen["get_output"] = _raises(lambda: gm.get_output(0))
        gm(input=x * 2)  # a call keeps nothing, and uses another plan than ours

    _in_threads(other, threads=1)
    assert "inputs input are not set" in seen["run"]
    assert "before run()" in seen["get_output"]
    np.testing.assert_array_equal(gm.get_output(0), want)


def _raises(fn) -> str:
    try:
        fn()
    except Exception as e:
        return str(e)
    return ""


def test_calls_one_after_another_reuse_one_plan(resnet):
    gm = GraphModule(resnet)
    xs = _images(3)
    gm(input=xs[0])
    arena = gm._plan.arena
    for x in xs[1:]:
        gm(input=x)
        assert gm._plan.arena is arena  # taken from the pool and given back: no allocation
    # A run holds its thread's plan until the next run; calls beside it take another.
    gm.set_input("input", xs[0])
    gm.run()
    held = gm._plan
    gm(input=xs[1])
    assert gm._plan is not held
    pool, = gm._plans.values()
    assert len(pool.free) == 1 and pool.free[0] is not held


def test_one_plan_serves_every_size_of_its_bucket(resnet):
    # Batches 5 to 8 round up to 8: one pool, one plan and arena laid out for 8, its views
    # and calls made again for each batch; the results as a fresh module's.
    gm = GraphModule(resnet)
    xs = _images(4, batch=lambda i: 8 - i)
    results = [gm(input=x)[0] for x in xs]
    arena = gm._plan.arena
    assert len(gm._plans) == 1 and gm._plan.pool_key[0] == "bucket"
    for x, got in zip(xs, results):
        np.testing.assert_array_equal(got, GraphModule(resnet)(input=x)[0])
        np.testing.assert_array_equal(gm(input=x)[0], got)
        assert gm._plan.arena is arena


def test_the_pools_used_last_are_kept_and_a_dropped_arena_is_reused(resnet, monkeypatch):
    # A decoder's every step has new sizes: the module keeps PLAN_SHAPES_KEPT pools, and
    # a new plan takes a dropped plan's arena where it is large enough.
    monkeypatch.setattr(executor, "PLAN_SHAPES_KEPT", 2)
    gm = GraphModule(resnet)
    arenas = []
    for x in _images(3, batch=lambda i: 4 >> i):  # batches 4, 2, 1: three buckets
        gm(input=x)
        arenas.append(gm._plan.arena)
    assert [dict(key[1:]).popitem()[1] for key in gm._plans] == [2, 1]
    assert arenas[2] is arenas[0]  # batch 4's arena, dropped with its pool
    x, = _images(1, batch=lambda i: 3)
    np.testing.assert_array_equal(gm(input=x)[0], GraphModule(resnet)(input=x)[0])


def test_a_call_that_fails_gives_its_plan_back(resnet):
    gm = GraphModule(resnet)
    x, = _images(1)
    gm(input=x)

    def fail(plan, inputs):
        raise RuntimeError("a kernel failed")

    gm._execute = fail
    with pytest.raises(RuntimeError, match="a kernel failed"):
        gm(input=x)
    pool, = gm._plans.values()
    assert len(pool.free) == 1  # and the next call takes it


def test_a_call_returns_arrays_of_its_own_that_later_runs_leave_alone(resnet):
    """A call's outputs are the caller's: the next call and set_input / run / get_output
    (the plan's own outputs) write elsewhere."""
    gm = GraphModule(resnet)
    x0, x1 = _images(2)
    first = gm(input=x0)[0]
    kept = first.copy()
    second = gm(input=x1)[0]
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, kept)
    gm.set_input("input", x1)
    gm.run()
    np.testing.assert_array_equal(gm.get_output(0), second)
    assert not np.shares_memory(gm.get_output(0), second)
    np.testing.assert_array_equal(gm(input=x0)[0], kept)
    np.testing.assert_array_equal(first, kept)


def test_an_output_read_by_later_kernels_listed_twice_or_passed_through():
    """Outputs: y = relu(x), which a later kernel reads; z = y + 1; y again; x itself."""
    from onnx import TensorProto, helper

    if not util.llvm_available():
        pytest.skip(util.llvm_status_message())
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"]),
         helper.make_node("Add", ["y", "one"], ["z"])],
        "outputs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info(v, TensorProto.FLOAT, ["n", 4])
         for v in ("y", "z", "y", "x")],
        [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])])
    mod, params = from_onnx(helper.make_model(graph))
    gm = GraphModule(build(mod, params=params))
    for n in (3, 5, 3):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype("float32")
        y, z, y2, x2 = gm(x=x)
        np.testing.assert_array_equal(y, np.maximum(x, 0))
        np.testing.assert_array_equal(z, np.maximum(x, 0) + 1)
        np.testing.assert_array_equal(y2, y)
        np.testing.assert_array_equal(x2, x)
        assert not np.shares_memory(y, y2) and not np.shares_memory(x2, x)
