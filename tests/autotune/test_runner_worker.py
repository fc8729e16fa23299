"""The measuring process's timing loop: warm by default, every call with cold weights
(its own copy of all arguments but the first) when the cache flush is on."""

from types import SimpleNamespace

import numpy as np
import pytest

from tecomp import autotune
from tecomp.autotune import _runner_worker as worker
from tecomp.cli import _measure_runner, build_parser
from tecomp.target import Target


def _recording():
    seen = []

    def fn(*args):
        seen.append(tuple(id(a) for a in args))
    return fn, seen


def _args(weight_bytes):
    data = np.arange(16, dtype="float32")
    weight = np.random.default_rng(0).random(weight_bytes // 4).astype("float32")
    out = np.zeros(8, "float32")
    return [data, weight, out]


def test_warm_timing_calls_with_the_same_arrays():
    fn, seen = _recording()
    args = _args(4096)
    costs = worker._time(fn, args, number=3, repeat=2, min_repeat_ms=0, warmup_ms=0,
                         flush=False, budget_s=10)
    assert len(costs) == 2
    assert set(seen) == {tuple(id(a) for a in args)}


def test_cold_timing_reads_all_but_the_first_argument_from_rotating_copies(monkeypatch):
    monkeypatch.setattr(worker, "_COLD_BYTES", 1 << 20)
    fn, seen = _recording()
    args = _args(64 << 10)
    worker._time(fn, args, number=40, repeat=2, min_repeat_ms=0, warmup_ms=0, flush=True,
                 budget_s=10)
    assert {s[0] for s in seen} == {id(args[0])}
    sets = worker._cold_sets(args)
    # 1 MiB of copies of a 64 KiB weight (and its 32-byte output): 16 sets, each used in
    # turn, so a weight is read again only after the 15 others.
    assert len(sets) == 16
    assert len({s[1] for s in seen[:16]}) == 16
    assert seen[16][1] == seen[0][1]
    for copy in sets[1:]:
        assert copy[0] is args[0]
        np.testing.assert_array_equal(copy[1], args[1])
        assert copy[1] is not args[1] and copy[2] is not args[2]
        assert copy[1].ctypes.data % 64 == 0 and copy[2].ctypes.data % 64 == 0


def test_cold_sets_are_made_once_per_argument_list(monkeypatch):
    monkeypatch.setattr(worker, "_COLD_BYTES", 1 << 20)
    args = _args(1 << 20)
    assert worker._cold_sets(args) is worker._cold_sets(args)
    other = _args(1 << 20)
    assert worker._cold_sets(other)[0] is other
    # At least one copy even when one set already spans the budget.
    assert len(worker._cold_sets(other)) == 2


@pytest.mark.parametrize("argv, cold", [
    (["tune", "model.onnx"], True),
    (["tune", "model.onnx", "--no-cache-flush"], False),
    (["tune", "--op", "matmul"], False),
    (["tune", "--op", "matmul", "--cache-flush"], True),
])
def test_tune_times_a_model_with_cold_weights_by_default(argv, cold):
    ns = build_parser().parse_args(argv)
    runner = _measure_runner(ns, Target("llvm"))
    assert isinstance(runner, autotune.LocalRunner)
    assert runner.flush is cold


@pytest.mark.parametrize("target, on_device", [("llvm", False), ("cuda", True), (None, False)])
def test_a_candidate_is_timed_on_its_device_where_its_kind_is_a_device(target, on_device):
    module = SimpleNamespace(target=None if target is None else Target(target))
    assert worker._on_device(module) is on_device


def test_measured_arrays_start_on_a_cache_line():
    """As a built model's buffers do (numpy puts a large array 16 bytes past a page)."""
    specs = [((1000, 1000), "float32", False), ((3, 5), "int64", False),
             ((1000, 1000), "float32", True)]
    arrays = worker._arrays(specs, seed=3)
    assert [a.shape for a in arrays] == [(1000, 1000), (3, 5), (1000, 1000)]
    assert all(a.ctypes.data % 64 == 0 and a.flags.c_contiguous for a in arrays)
    assert np.abs(arrays[0]).max() <= 1.0 and arrays[0].std() > 0.1
    assert not arrays[2].any()


def test_wide_integer_inputs_are_indices_in_range_of_any_axis():
    """A kernel gathering from a table of 2 rows must not fail every trial on its random
    inputs: 32- and 64-bit integers are zeros, narrower ones (quantized data) vary."""
    specs = [((2, 4), "int64", False), ((7,), "int32", False), ((64,), "int8", False)]
    wide, narrow, data = worker._arrays(specs, seed=1)
    assert not wide.any() and not narrow.any()
    assert len(np.unique(data)) > 1
