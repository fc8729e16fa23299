"""Run-time checks inside kernels (``te.checked``): the failure is recorded in the call's
error record, the guarded access is skipped, and the runtime raises RuntimeCheckError
naming the kernel, the check and its value, after the kernel finished."""

import threading

import numpy as np
import pytest

import tecomp
from tecomp import te
from tecomp.errors import RuntimeCheckError, TecompError
from tecomp.ir import interpreter
from tecomp.runtime import load_module

pytestmark = pytest.mark.usefixtures("needs_llvm")

N, D = 64, 5
MESSAGE = "index {value} is out of range for axis 0 of size 5"


def _gather(schedule="serial", name="Gather_3"):
    """out[j] = data[idx[j]] with negative indices wrapped and bad ones checked."""
    data = te.placeholder((D,), name="data")
    idx = te.placeholder((N,), dtype="int64", name="idx")

    def f(j):
        i = idx[j]
        ok = te.checked((i >= -D) & (i < D), i, MESSAGE)
        return te.if_then_else(ok, data[te.if_then_else(i < 0, i + D, i)], 0.0)

    out = te.compute((N,), f, name="out")
    s = te.create_schedule(out.op)
    if schedule == "vectorized":
        _, ji = s[out].split(out.op.axis[0], factor=16)
        s[out].vectorize(ji)
    elif schedule == "unrolled":
        _, ji = s[out].split(out.op.axis[0], factor=4)
        s[out].unroll(ji)
    elif schedule == "parallel":
        jo, ji = s[out].split(out.op.axis[0], factor=8)
        s[out].parallel(jo)
        s[out].vectorize(ji)
    return s, [data, idx, out], name


def _indices(bad=()):
    idx = (np.arange(N) % (2 * D) - D).astype("int64")
    for pos, v in bad:
        idx[pos] = v
    return idx


@pytest.mark.parametrize("schedule", ["serial", "vectorized", "unrolled", "parallel"])
def test_good_indices_run_and_bad_ones_raise_naming_kernel_and_value(schedule):
    s, args, name = _gather(schedule)
    mod = tecomp.build(s, args, name=name)
    data = np.arange(1, D + 1, dtype="float32")
    idx = _indices()
    out = np.full(N, np.nan, "float32")
    mod(data, idx, out)
    np.testing.assert_array_equal(out, data[idx])
    # Two bad indices in different threads' chunks: some failure wins, the rest run.
    bad = _indices([(21, 7), (22, -6)]) if schedule != "parallel" else _indices([(21, 7)])
    with pytest.raises(RuntimeCheckError) as info:
        mod(data, bad, out)
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, TecompError)
    assert str(err) == "kernel 'Gather_3': index 7 is out of range for axis 0 of size 5"
    assert (err.kernel, err.check, err.value) == ("Gather_3", MESSAGE, 7)
    good = np.ones(N, bool)
    good[[21, 22]] = False
    np.testing.assert_array_equal(out[good], data[bad[good]])
    assert out[21] == 0 and (schedule == "parallel" or out[22] == 0)
    mod(data, idx, out)  # the next call starts with a clean record
    np.testing.assert_array_equal(out, data[idx])


def test_first_failure_in_iteration_order_wins_in_a_vector():
    s, args, name = _gather("vectorized")
    mod = tecomp.build(s, args, name=name)
    out = np.zeros(N, "float32")
    with pytest.raises(RuntimeCheckError, match="index -9 is out"):
        mod(np.ones(D, "float32"), _indices([(33, -9), (34, 11), (50, 12)]), out)


def test_prepared_calls_report_and_recover():
    s, args, name = _gather("vectorized")
    f = tecomp.build(s, args, name=name)[name]
    data, out = np.ones(D, "float32"), np.zeros(N, "float32")
    idx = _indices()
    call = f.prepare(data, idx, out)
    call()
    idx[3] = 100
    with pytest.raises(RuntimeCheckError, match="index 100 is out"):
        call()
    idx[3] = 0
    call()
    assert out[3] == 1


def test_concurrent_calls_keep_their_errors_apart():
    s, args, name = _gather("vectorized")
    mod = tecomp.build(s, args, name=name)
    data = np.ones(D, "float32")
    results = {}

    def worker(k):
        idx = _indices() if k % 2 else _indices([(5, 100 + k)])
        out = np.zeros(N, "float32")
        got = []
        for _ in range(200):
            try:
                mod(data, idx, out)
                got.append(None)
            except RuntimeCheckError as err:
                got.append(err.value)
        results[k] = got

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, got in results.items():
        assert got == ([None] * 200 if k % 2 else [100 + k] * 200)


def test_an_exported_library_reports_its_checks(tmp_path):
    s, args, name = _gather("parallel")
    path = tecomp.build(s, args, name=name).export_library(str(tmp_path / "g.so"))
    mod = load_module(path)
    assert mod[name].signature.checks == (MESSAGE,)
    with pytest.raises(RuntimeCheckError, match="^kernel 'Gather_3': index 5 is out"):
        mod(np.ones(D, "float32"), _indices([(60, 5)]), np.zeros(N, "float32"))


def test_the_interpreter_records_the_same_failure():
    s, args, name = _gather("vectorized")
    func = tecomp.lower(s, args, name=name)
    out = np.zeros(N, "float32")
    with pytest.raises(RuntimeCheckError, match="^kernel 'Gather_3': index 7 is out"):
        interpreter.run(func, np.ones(D, "float32"), _indices([(21, 7), (40, 8)]), out)
    assert out[21] == 0 and out[40] == 0 and out[20] == 1


def test_kernels_without_checks_list_none_and_keep_their_code():
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), lambda i: A[i] * 2.0, name="B")
    mod = tecomp.build(te.create_schedule(B.op), [A, B], name="double")
    assert mod["double"].signature.checks == ()
    ll = mod.get_source("ll")
    assert "cmpxchg" not in ll and "tecomp.rec" not in ll


def test_checked_validates_its_arguments():
    i = te.var("i")
    with pytest.raises(TecompError, match="must be bool"):
        te.checked(i, i, "x")
    with pytest.raises(TecompError, match="must be an integer dtype"):
        te.checked(i < 3, te.const(1.0), "x")
    assert te.checked(te.const(True), i, "never").value == 1


@pytest.mark.parametrize("schedule", ["serial", "vectorized", "parallel"])
def test_a_guarded_load_is_not_evaluated_where_the_check_fails(schedule):
    # An index of 2**40 elements would fault if it were loaded, even speculatively.
    s, args, name = _gather(schedule)
    mod = tecomp.build(s, args, name=name)
    bad = _indices([(k, 1 << 40) for k in range(0, N, 3)])
    out = np.zeros(N, "float32")
    with pytest.raises(RuntimeCheckError, match=f"index {1 << 40} is out of range"):
        mod(np.ones(D, "float32"), bad, out)
    assert (out[::3] == 0).all() and (np.delete(out, np.s_[::3]) == 1).all()


def test_a_lane_invariant_check_in_a_vector_loop_reports_the_first_lane():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.if_then_else(
        te.checked(n > 4, i, "row {value} of a table shorter than 5"), A[i], 0.0), name="B")
    s = te.create_schedule(B.op)
    _, ii = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(ii)
    mod = tecomp.build(s, [A, B], name="short")
    mod(np.ones(9, "float32"), np.zeros(9, "float32"))
    b = np.full(3, 7, "float32")
    with pytest.raises(RuntimeCheckError, match="^kernel 'short': row 0 of a table"):
        mod(np.ones(3, "float32"), b)
    assert (b == 0).all()
