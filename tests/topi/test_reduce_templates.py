"""Templates of the row-wise kernels: every config of their spaces builds and matches a
reference on awkward shapes, the fallback config is the untuned schedule, and the
workloads say what they accept."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tecomp
from tecomp import autotune, te
from tecomp.errors import TecompError
from tecomp.topi import strategy
from tecomp.topi.cpu_schedule import schedule_normalize, schedule_reduce

ROW_OPERATORS = ["softmax", "log_softmax", "layer_norm", "rms_norm", "instance_norm",
                 "reduce_sum", "reduce_mean", "reduce_max", "max_pool2d", "avg_pool2d",
                 "global_avg_pool", "global_max_pool"]


def _softmax(a, axis):
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _layer_norm(a, gamma, beta):
    mean = a.mean(-1, keepdims=True)
    var = ((a - mean) ** 2).mean(-1, keepdims=True)
    return (a - mean) / np.sqrt(var + 1e-5) * gamma + beta


def _rms_norm(a, gamma):
    return a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-5) * gamma


def _windows_2x2(a):
    n, c, h, w = a.shape
    return a[:, :, :h // 2 * 2, :w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2)


def _instance_norm(a, gamma, beta):
    mean = a.mean(-1, keepdims=True)
    var = ((a - mean) ** 2).mean(-1, keepdims=True)
    return (a - mean) / np.sqrt(var + 1e-5) * gamma[:, None] + beta[:, None]


# (operator, input shapes from (rows, width), attributes, numpy reference of the inputs)
CASES = {
    "softmax": (lambda r, w: [(r, w)], {"axis": 1}, lambda a: _softmax(a, 1)),
    "softmax_outer_axis": (lambda r, w: [(w, r, 3)], {"axis": 0}, lambda a: _softmax(a, 0)),
    "log_softmax": (lambda r, w: [(r, w)], {"axis": 1}, lambda a: np.log(_softmax(a, 1))),
    "layer_norm": (lambda r, w: [(r, w), (w,), (w,)], {"axis": 1}, _layer_norm),
    "rms_norm": (lambda r, w: [(r, w), (w,)], {"axis": 1}, _rms_norm),
    "reduce_mean": (lambda r, w: [(r, w)], {"axes": [1]}, lambda a: a.mean(1, keepdims=True)),
    "reduce_sum": (lambda r, w: [(w, r, 2)], {"axes": [0], "keepdims": 0},
                   lambda a: a.sum(0)),
    "instance_norm": (lambda r, w: [(1, r, w), (r,), (r,)], {}, _instance_norm),
    "max_pool2d": (lambda r, w: [(1, r, 5, w)], {"kernel": [2, 2], "strides": [2, 2]},
                   lambda a: _windows_2x2(a).max((3, 5))),
    "avg_pool2d": (lambda r, w: [(1, r, 5, w)], {"kernel": [2, 2], "strides": [2, 2]},
                   lambda a: _windows_2x2(a).mean((3, 5))),
}


def _task(op, shapes, attrs):
    impl = strategy.get_implementation(op, "llvm")
    return autotune.create_task(op, impl.workload(*shapes, dtype="float32", **attrs), "llvm")


def _run(task, cfg, arrays):
    s, args = task.instantiate(cfg)
    mod = tecomp.build(s, args, target="llvm")
    out = np.full([int(d.value) for d in args[-1].shape], np.nan, "float32")
    mod(*arrays, out)
    return out


@pytest.mark.parametrize("op", ROW_OPERATORS)
def test_each_row_operator_is_tunable_with_its_own_template(op):
    impl = strategy.get_implementation(op, "llvm")
    assert impl.template == op and impl.workload is not None
    # The cuda implementation shares the compute and keeps its own schedule.
    assert strategy.get_implementation(op, "cuda").template is None


# Rows 1 (one task), a prime number of rows (no split divides it), widths below one
# vector and past several.
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(sorted(CASES)), rows=st.sampled_from([1, 2, 7, 19]),
       width=st.sampled_from([1, 3, 16, 37, 130]), data=st.data())
def test_every_config_builds_and_matches_numpy(case, rows, width, data):
    op, attrs = case.removesuffix("_outer_axis"), CASES[case][1]
    shapes = CASES[case][0](rows, width)
    if op.endswith("pool2d") and width < 2:
        return  # no 2x2 window fits
    task = _task(op, shapes, attrs)
    index = data.draw(st.integers(0, len(task.config_space) - 1), label="config")
    rng = np.random.default_rng(index)
    arrays = [rng.standard_normal(s).astype("float32") for s in shapes]
    got = _run(task, task.config_space.get(index), arrays)
    np.testing.assert_allclose(got, CASES[case][2](*arrays), rtol=2e-5, atol=2e-5)


def test_the_space_declares_only_the_knobs_the_kernel_has():
    softmax = _task("softmax", [(8, 64)], {"axis": 1})
    assert softmax.config_space.knob_names == [
        "exp_once", "rows_per_task", "output_vectors", "reduce_vectors", "reduce_unroll",
        "stats_in_row", "prefetch_rows", "prefetch_output", "prefetch_streaming"]
    # A pool reduces no innermost axis and has no statistics to place; it is vectorized
    # over its output columns, which may accumulate in a local buffer.
    pool = _task("max_pool2d", [(1, 4, 8, 8)], {"kernel": [2, 2]})
    assert pool.config_space.knob_names == ["rows_per_task", "output_vectors",
                                            "local_accumulator"]


def _lowered(s, tensors):
    return str(tecomp.lower(s, tensors, target="llvm"))


@pytest.mark.parametrize("op, shapes, attrs, schedule", [
    ("softmax", [(9, 100)], {"axis": 1}, schedule_normalize),
    ("softmax", [(5, 7, 9)], {"axis": 1}, schedule_normalize),
    ("layer_norm", [(9, 100), (100,), (100,)], {"axis": 1}, schedule_normalize),
    ("reduce_mean", [(9, 100)], {"axes": [1]}, schedule_reduce),
    ("max_pool2d", [(1, 3, 12, 12)], {"kernel": [3, 3], "strides": [2, 2],
                                      "pads": [1, 1, 1, 1]}, schedule_reduce),
])
def test_the_fallback_config_lowers_to_the_untuned_schedule(op, shapes, attrs, schedule):
    task = _task(op, shapes, attrs)
    s, tensors = task.instantiate(autotune.FallbackConfigEntity())
    inputs = [te.placeholder(shape, "float32", name=f"in{i}") for i, shape in enumerate(shapes)]
    # The untuned softmax computes each exponential once (the fallback of its knob).
    knobs = {"exp_once": True} if op == "softmax" else {}
    out = strategy.get_implementation(op, "llvm").compute(None, *inputs, **attrs, **knobs)
    assert _lowered(s, tensors) == _lowered(schedule(None, [out]), [*inputs, out])


def test_a_tuned_config_changes_the_loops():
    task = _task("softmax", [(64, 256)], {"axis": 1})
    space = task.config_space
    # 4 rows a task, statistics first
    cfg = space.get(space.index_of([0, 2, 1, 1, 1, 1]))
    s, tensors = task.instantiate(cfg)
    default, default_tensors = task.instantiate(autotune.FallbackConfigEntity())
    roots = {st.op.name for st in s.stages if st.attach_type == "root"}
    assert {"softmax.max", "softmax.sum"} <= roots
    assert _lowered(s, tensors) != _lowered(default, default_tensors)


@pytest.mark.parametrize("stats_in_row", [True, False])
def test_a_softmax_computing_each_exponential_once_keeps_them_in_a_buffer(stats_in_row, rng):
    task = _task("softmax", [(19, 37)], {"axis": 1})
    space = task.config_space
    cfg = space.get(space.index_of([1, 0, 0, 0, 0, int(not stats_in_row), 0]))
    s, _ = task.instantiate(cfg)
    exp = next(st for st in s.stages if st.op.name == "softmax.exp")
    assert exp.attach_type == ("scope" if stats_in_row else "root")
    a = rng.standard_normal((19, 37)).astype("float32")
    np.testing.assert_allclose(_run(task, cfg, [a]), _softmax(a, 1), rtol=1e-5, atol=1e-6)


def test_a_workload_names_an_unknown_attribute_and_the_allowed_ones():
    impl = strategy.get_implementation("softmax", "llvm")
    with pytest.raises(TecompError, match=r"softmax workload: unknown attribute\(s\) "
                                          r"\['axes'\]; allowed: \['axis'\]"):
        impl.workload((4, 8), dtype="float32", axes=[1])


def test_a_workload_is_the_same_for_lists_and_tuples():
    impl = strategy.get_implementation("reduce_mean", "llvm")
    assert impl.workload((4, 8), axes=[1]) == impl.workload((4, 8), axes=(1,))
