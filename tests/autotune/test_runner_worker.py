"""The measuring process's timing loop: batches of prepared calls run by one native call,
warm by default, every call with cold weights (its own copy of all arguments but the
first) when the cache flush is on."""

from types import SimpleNamespace

import numpy as np
import pytest

import tecomp
from tecomp import autotune, te
from tecomp.autotune import _runner_worker as worker
from tecomp.cli import _measure_runner, build_parser
from tecomp.runtime import ArgumentError
from tecomp.target import Target

def _specs(weight_bytes):
    """data [16], weight, output [8]: the arguments of the ``kernel`` fixture."""
    return [((16,), "float32", False), ((weight_bytes // 4,), "float32", False),
            ((8,), "float32", True)]


@pytest.fixture(scope="module")
def kernel():
    def build(n):
        """The output is the data's first half plus the weight's first element."""
        D = te.placeholder((16,), "float32", name="D")
        W = te.placeholder((n,), "float32", name="W")
        Y = te.compute((8,), lambda i: D[i] + W[0], name="Y")
        return tecomp.build(te.create_schedule(Y.op), [D, W, Y], target="llvm")
    return build


def test_warm_timing_runs_one_prepared_call_in_batches(kernel):
    specs = _specs(4096)
    args = worker._arrays(specs)
    calls = worker._prepared_calls(kernel(1024), args, flush=False)
    assert len(calls) == 1
    costs = worker._time(calls, number=3, repeat=2, min_repeat_ms=0, warmup_ms=0,
                         budget_s=10)
    assert len(costs) == 2 and all(c > 0 for c in costs)
    np.testing.assert_allclose(args[2], args[0][:8] + args[1][0])


def test_a_short_kernel_is_timed_in_batches_of_a_millisecond(kernel, monkeypatch):
    """A batch's call from Python is microseconds, a 16-element add nanoseconds: the batch
    grows until the add's calls are most of it, and one batch runs untimed first."""
    sizes = []
    make_batch = worker._batch

    def recording(calls, start, number):
        sizes.append(number)
        return make_batch(calls, start, number)

    monkeypatch.setattr(worker, "_batch", recording)
    specs = _specs(4096)
    calls = worker._prepared_calls(kernel(1024), worker._arrays(specs), flush=False)
    assert len(worker._time(calls, number=1, repeat=2, min_repeat_ms=0, warmup_ms=0,
                            budget_s=10)) == 2
    # A call of the add from Python takes far less than 200 us.
    assert len(sizes) == 3 and sizes[0] > 5 and len(set(sizes)) == 1


def test_a_failing_argument_check_raises_before_anything_is_timed(kernel):
    specs = _specs(4096)
    with pytest.raises(ArgumentError, match="W"):
        worker._prepared_calls(kernel(1000), worker._arrays(specs), flush=False)


def test_cold_timing_reads_all_but_the_first_argument_from_rotating_copies(kernel,
                                                                          monkeypatch):
    monkeypatch.setattr(worker, "_COLD_BYTES", 1 << 20)
    monkeypatch.setattr(worker, "_COLD", None)
    specs = _specs(64 << 10)
    args = worker._arrays(specs)
    calls = worker._prepared_calls(kernel(16 << 10), args, flush=True)
    # 1 MiB of copies of a 64 KiB weight (and its 32-byte output): 16 sets, each a call
    # of its own.
    sets = worker._cold_sets(args)
    assert len(sets) == len(calls) == 16
    for copy in sets[1:]:
        assert copy[0] is args[0]
        np.testing.assert_array_equal(copy[1], args[1])
        assert copy[1] is not args[1] and copy[2] is not args[2]
        assert copy[1].ctypes.data % 64 == 0 and copy[2].ctypes.data % 64 == 0
    # A batch takes the calls in turn from where the last one stopped, round the end.
    assert worker._batch(calls, 14, 4).calls == (calls[14], calls[15], calls[0], calls[1])
    assert len(worker._time(calls, number=40, repeat=2, min_repeat_ms=0, warmup_ms=0,
                            budget_s=10)) == 2


def test_cold_sets_are_made_once_per_argument_list(monkeypatch):
    monkeypatch.setattr(worker, "_COLD_BYTES", 1 << 20)
    args = worker._arrays(_specs(1 << 20))
    assert worker._cold_sets(args) is worker._cold_sets(args)
    other = [a.copy() for a in args]
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
