"""Run-time checks in CUDA kernels: the kernels that have them take the call's error
record last, their launches say so in the plan, the source compiles with NVRTC, the
simulator reports as the CPU does, and on a GPU the call raises RuntimeCheckError."""

import numpy as np
import pytest

import tecomp
from tecomp import te
from tecomp.errors import RuntimeCheckError

N = 100


def _bound(s, t, factor=32):
    bx, tx = s[t].split(t.op.axis[0], factor)
    s[t].bind(bx, te.thread_axis("blockIdx.x"))
    s[t].bind(tx, te.thread_axis("threadIdx.x"))


def _div_and_gather():
    """q = a / b (truncating, ONNX Div) and g = data[idx] with a checked index."""
    n = te.var("n")
    a = te.placeholder((n,), "int32", name="a")
    b = te.placeholder((n,), "int32", name="b")
    data = te.placeholder((5,), name="data")
    q = te.compute((n,), lambda i: te.truncdiv(a[i], b[i]), name="q")

    def gather(i):
        ok = te.checked((b[i] >= 0) & (b[i] < 5), b[i],
                        "index {value} is out of range for axis 0 of size 5")
        return te.if_then_else(ok, data[b[i]], 0.0)

    g = te.compute((n,), gather, name="g")
    s = te.create_schedule([q.op, g.op])
    _bound(s, q)
    _bound(s, g)
    return s, [a, b, data, q, g]


def _build(cuda_target):
    s, args = _div_and_gather()
    return tecomp.build(s, args, target=cuda_target, name="Div_2")


def test_checked_kernels_take_the_record_and_say_so_in_the_plan(cuda_target):
    mod = _build(cuda_target)
    src = mod.get_source("cuda")
    assert src.count("unsigned long long* __restrict__ tc_rec") == 2
    assert "tc_floordiv_chk<int>" in src and "tc_check(" in src
    assert [step.get("record") for step in mod.plans["Div_2"]] == [True, True]
    assert mod["Div_2"].signature.checks == (
        "integer division by zero", "index {value} is out of range for axis 0 of size 5")


def test_kernels_without_checks_are_unchanged(cuda_target):
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), lambda i: A[i] * 2.0 + A[i] // 3.0, name="B")
    s = te.create_schedule(B.op)
    _bound(s, B)
    mod = tecomp.build(s, [A, B], target=cuda_target, name="f")
    assert "tc_rec" not in mod.get_source("cuda")
    assert all("record" not in step for step in mod.plans["f"])


def _inputs(bad: bool):
    a = np.arange(-50, 50, dtype="int32")
    b = (np.arange(N) % 4 + 1).astype("int32")
    if bad:
        b[[30, 70]] = [0, 9]
    return a, b, np.arange(1, 6, dtype="float32")


def _check_outputs(a, b, data, q, g):
    good = (b > 0) & (b < 5)
    np.testing.assert_array_equal(q[good], np.trunc(a[good] / b[good]).astype("int32"))
    np.testing.assert_array_equal(g[good], data[b[good]])
    if b[70] == 9:  # the out-of-range index reads nothing
        assert g[70] == 0


def test_the_simulator_reports_like_the_cpu(cuda_target):
    mod = _build(cuda_target)
    a, b, data = _inputs(True)
    q, g = np.zeros(N, "int32"), np.zeros(N, "float32")
    with pytest.raises(RuntimeCheckError, match="^kernel 'Div_2': "):
        mod.simulate(a, b, data, q, g)


@pytest.mark.gpu
def test_on_the_gpu_a_failed_check_raises_after_the_kernels(cuda_target, gpu, tmp_path):
    mod = _build(cuda_target)
    a, b, data = _inputs(False)
    q, g = np.zeros(N, "int32"), np.zeros(N, "float32")
    mod(a, b, data, q, g)
    _check_outputs(a, b, data, q, g)
    a, b, data = _inputs(True)
    for m in (mod, tecomp.runtime.load_module(mod.export_library(str(tmp_path / "d.cubin")))):
        q, g = np.zeros(N, "int32"), np.zeros(N, "float32")
        with pytest.raises(RuntimeCheckError, match="^kernel 'Div_2': (integer division by "
                                                    "zero|index 9 is out of range)"):
            m(a, b, data, q, g)
        _check_outputs(a, b, data, q, g)
    a, b, data = _inputs(False)
    mod(a, b, data, q, g)  # a clean record for the next call
