"""Runners: modules built for another architecture run under qemu-user (or over ssh),
with arguments checked here and outputs brought back; cross export without a linker."""

import os
import stat

import numpy as np
import pytest
from util import target_unavailable

import tecomp
from tecomp import te
from tecomp.errors import RuntimeCheckError
from tecomp.runtime import (ArgumentError, QemuRunner, RemoteModule, RunnerError,
                            SSHRunner, load_module, toolchain)

AARCH64 = "llvm -mtriple=aarch64-linux-gnu"

pytestmark = pytest.mark.usefixtures("needs_llvm")


@pytest.fixture(scope="module")
def qemu():
    reason = target_unavailable(AARCH64)
    if reason:
        pytest.skip(reason)
    with QemuRunner("aarch64") as runner:
        yield runner


def _axpy(target, name="axpy"):
    n = te.var("n")
    x = te.placeholder((n,), name="x")
    y = te.placeholder((n,), name="y")
    out = te.compute((n,), lambda i: x[i] * 2.0 + y[i], name="out")
    s = te.create_schedule(out.op)
    _, xi = s[out].split(out.op.axis[0], factor=4)
    s[out].vectorize(xi)
    return tecomp.build(s, [x, y, out], target=target, name=name)


def test_qemu_runs_aarch64_code_and_brings_outputs_back(qemu, rng):
    mod = _axpy(AARCH64)
    rmod = qemu.load_module(mod)
    assert isinstance(rmod, RemoteModule)
    for n in (7, 33):  # the symbolic size travels with the call
        x, y = (rng.standard_normal(n).astype("float32") for _ in range(2))
        out = np.full(n, np.nan, "float32")
        rmod(x, y, out)
        np.testing.assert_allclose(out, x * 2 + y, rtol=1e-6)
        np.testing.assert_array_equal(x, x.copy())


def test_arguments_are_checked_before_shipping(qemu):
    rmod = qemu.load_module(_axpy(AARCH64))
    x = np.zeros(5, "float32")
    with pytest.raises(ArgumentError, match="argument 1 .'y'. of axpy"):
        rmod["axpy"](x, np.zeros(6, "float32"), np.zeros(5, "float32"))
    with pytest.raises(KeyError, match="has no function 'nope'; it has: axpy"):
        rmod["nope"]


def test_time_evaluator_times_through_the_runner(qemu):
    rmod = qemu.load_module(_axpy(AARCH64))
    arrays = [np.ones(64, "float32"), np.ones(64, "float32"), np.zeros(64, "float32")]
    t = rmod.time_evaluator(number=3, repeat=2, warmup_ms=1)(*arrays)
    assert len(t.results) == 2 and all(r > 0 for r in t.results)
    np.testing.assert_array_equal(arrays[2], 3.0)


def test_library_path_loads_with_its_metadata(qemu, tmp_path, rng):
    path = _axpy(AARCH64, name="saxpy").export_library(str(tmp_path / "saxpy.so"))
    with open(path, "rb") as fh:
        head = fh.read(20)
    assert head[16] == 3 and head[18] == 183  # ET_DYN, EM_AARCH64
    rmod = qemu.load_module(path)
    assert rmod.entry_name == "saxpy"
    x, y = rng.standard_normal(9).astype("float32"), rng.standard_normal(9).astype("float32")
    out = np.empty(9, "float32")
    rmod(x, y, out)
    np.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)
    with pytest.raises(tecomp.TecompError, match="cannot load"):
        load_module(path)  # not on this machine: only through a runner


def test_export_without_cross_linker_writes_object_and_says_what_to_install(
        tmp_path, monkeypatch, qemu):
    monkeypatch.setattr(toolchain, "c_compiler", lambda arch, triple=None: None)
    with pytest.warns(UserWarning, match="apt-get install gcc-aarch64-linux-gnu"):
        path = _axpy(AARCH64).export_library(str(tmp_path / "k.so"))
    with open(path, "rb") as fh:
        assert fh.read(18)[16] == 1  # ET_REL: an object file
    with pytest.raises(tecomp.TecompError, match="not a shared object"):
        load_module(path)
    with pytest.raises(RunnerError, match="not a shared library"):
        qemu.load_module(path)


def test_missing_emulator_is_named_with_the_install_command(monkeypatch):
    monkeypatch.setattr(toolchain, "emulator", lambda arch: None)
    reason = QemuRunner.missing("riscv64")
    assert reason == ("qemu-riscv64 is not installed (apt-get install gcc-riscv64-linux-gnu "
                      "libc6-dev-riscv64-cross qemu-user)")
    with pytest.raises(RunnerError, match="qemu-riscv64 is not installed"):
        QemuRunner("riscv64")


def test_a_failing_call_is_a_runner_error(qemu, tmp_path):
    path = _axpy(AARCH64).export_library(str(tmp_path / "a.so"))
    rmod = qemu.load_module(path)
    os.unlink(path)  # the library is gone when the call runs
    with pytest.raises(RunnerError, match="cannot load"):
        rmod(np.zeros(4, "float32"), np.zeros(4, "float32"), np.zeros(4, "float32"))


_FAKE_SSH = """#!/bin/sh
# ssh stand-in: drops options and the host, runs the command here.
while [ "$#" -gt 1 ]; do case "$1" in -o|-p) shift 2;; *) shift; break;; esac; done
exec sh -c "$1"
"""
_FAKE_SCP = """#!/bin/sh
# scp stand-in: drops options, strips "host:" from paths, copies here.
args=""
while [ "$#" -gt 0 ]; do
  case "$1" in -q) shift;; -o|-P) shift 2;; *) args="$args ${1#*:}"; shift;; esac
done
exec cp $args
"""


def _local_ssh_runner(tmp_path, monkeypatch) -> SSHRunner:
    """An SSHRunner whose ssh and scp are stand-ins running on this machine."""
    if toolchain.c_compiler(toolchain.host_arch()) is None:
        pytest.skip("no C compiler for this machine")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("ssh", _FAKE_SSH), ("scp", _FAKE_SCP)):
        p = bin_dir / name
        p.write_text(text)
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return SSHRunner("board", arch=toolchain.host_arch(), port=2222)


def test_ssh_runner_ships_runs_and_fetches(tmp_path, monkeypatch, rng):
    """Against ssh/scp stand-ins that run on this machine (no sshd here): the files
    travel, the program runs in the remote directory, outputs come back, and the remote
    directory is removed on close."""
    runner = _local_ssh_runner(tmp_path, monkeypatch)
    remote_dir = runner._dir
    assert os.path.isdir(remote_dir)
    rmod = runner.load_module(_axpy("llvm"))
    assert rmod.library.startswith(remote_dir)
    x, y = rng.standard_normal(10).astype("float32"), rng.standard_normal(10).astype("float32")
    out = np.zeros(10, "float32")
    rmod(x, y, out)
    np.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)
    runner.close()
    assert not os.path.exists(remote_dir)


def test_a_failed_check_there_raises_here_with_the_outputs_written(tmp_path, monkeypatch):
    n = te.var("n")
    a = te.placeholder((n,), dtype="int32", name="a")
    b = te.placeholder((n,), dtype="int32", name="b")
    q = te.compute((n,), lambda i: te.truncdiv(a[i], b[i]), name="q")
    mod = tecomp.build(te.create_schedule(q.op), [a, b, q], name="Div_1")
    with _local_ssh_runner(tmp_path, monkeypatch) as runner:
        rmod = runner.load_module(mod)
        out = np.zeros(3, "int32")
        with pytest.raises(RuntimeCheckError,
                           match="^kernel 'Div_1': integer division by zero$"):
            rmod(np.array([7, 8, 9], "int32"), np.array([2, 0, -3], "int32"), out)
        np.testing.assert_array_equal(out[[0, 2]], [3, -3])


def test_ssh_runner_runs_tecomp_run_with_the_thread_settings(tmp_path, monkeypatch):
    runner = _local_ssh_runner(tmp_path, monkeypatch)
    commands = []
    monkeypatch.setattr(runner, "_run", lambda cmd, what: commands.append(cmd) or "")
    runner._execute(["tecomp_run", "lib.so", "f"], {"TECOMP_NUM_THREADS": "2", "X": "1"})
    assert commands[-1][-1] == "env TECOMP_NUM_THREADS=2 X=1 tecomp_run lib.so f"
    runner._execute(["tecomp_run"], {})
    assert commands[-1][-1] == "tecomp_run"
    runner.close()


def test_qemu_runner_passes_the_thread_settings_to_the_emulated_program(qemu, monkeypatch):
    """A parallel kernel runs under qemu with the thread count set here (qemu's -E)."""
    from tecomp.runtime import threads

    commands = []
    run = qemu._run
    monkeypatch.setattr(qemu, "_run", lambda cmd, what: commands.append(cmd) or run(cmd, what))
    monkeypatch.setattr(threads, "thread_environment", lambda: {"TECOMP_NUM_THREADS": "3"})
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    rmod = qemu.load_module(tecomp.build(s, [A, B], target=AARCH64, name="inc"))
    b = np.zeros(64, "float32")
    rmod(np.arange(64, dtype="float32"), b)
    np.testing.assert_array_equal(b, np.arange(64) + 1.0)
    cmd = commands[-1]
    assert cmd[cmd.index("-E") + 1] == "TECOMP_NUM_THREADS=3"
