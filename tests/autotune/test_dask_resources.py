"""What a Dask worker advertises and what it runs, without a cluster: resource names of
target keys, the spelled-out target builders get, the forked build processes, the
measuring path and its one-measurement-per-machine lock."""

import os
import signal
import threading
import time

import pytest

from tecomp import autotune, cli
from tecomp.autotune import MeasureErrorNo, MeasureResult
from tecomp.autotune.dask_measure import (
    RESOURCE,
    _build_on_worker,
    _build_reply,
    _ensure_template,
    _in_fork,
    _measure_on_worker,
    _template_ref,
    node_keys,
    portable_target,
    resource_name,
    task_resource,
    worker_resources,
    worker_resources_string,
)
from tecomp.autotune.task import TemplateError
from tecomp.codegen.cuda import kind as cuda_kind
from tecomp.target import Target


def test_a_worker_advertises_its_cpu_key_with_and_without_features():
    host = Target("llvm").canonical_key()
    keys = node_keys()
    assert keys[0] == host
    assert all("-mattr=" not in k for k in keys[1:2])
    res = worker_resources()
    assert res[RESOURCE] == 1 and res[resource_name(host)] == 1
    # The task of plain "llvm" (or the host's -mcpu) asks for the host key's resource...
    assert task_resource("llvm") in res
    assert task_resource(f"llvm -mcpu={Target('llvm').mcpu}") in res
    # ...and a driver on another CPU, naming this one by -mcpu only, has the short key.
    short = " ".join(p for p in host.split() if not p.startswith("-mattr="))
    assert resource_name(short) in res
    assert task_resource("llvm -mcpu=skylake-avx512 -mattr=+avx512f") not in res


@pytest.mark.parametrize("arch, gpu_keys", [(None, []), ("sm_80", ["cuda -arch=sm_80"])])
def test_a_worker_advertises_the_gpu_its_kind_finds(monkeypatch, arch, gpu_keys):
    monkeypatch.setattr(cuda_kind, "device_arch", lambda: arch)
    assert [k for k in node_keys() if k.startswith("cuda")] == gpu_keys
    assert node_keys()[0] == Target("llvm").canonical_key()


def test_resource_names_are_short_stable_and_parse_as_dask_worker_reads_them():
    a = resource_name("llvm -arch=x86_64 -mcpu=znver5 -mattr=+avx2")
    assert a == resource_name("llvm -arch=x86_64 -mcpu=znver5 -mattr=+avx2")
    assert a != resource_name("llvm -arch=x86_64 -mcpu=znver4 -mattr=+avx2")
    assert a.startswith("tecomp-measure-") and len(a) == len("tecomp-measure-") + 12
    text = worker_resources_string(["cuda -arch=sm_90"])
    # `dask worker --resources` splits on commas and spaces, then on "=".
    parsed = dict(pair.split("=") for pair in text.replace(",", " ").split())
    assert parsed == {RESOURCE: "1", resource_name("cuda -arch=sm_90"): "1"}


def test_dask_worker_resources_command(capsys):
    assert cli.main(["dask-worker-resources", "--explain"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == worker_resources_string()
    assert f"# {resource_name(node_keys()[0])}: {node_keys()[0]}" in lines


def test_builders_get_the_target_spelled_out():
    text = portable_target("llvm")
    t = Target(text)
    assert t.canonical_key() == Target("llvm").canonical_key()
    assert f"-mcpu={Target('llvm').mcpu}" in text
    assert f"-num-cores={Target('llvm').num_cores}" in text
    assert portable_target("cuda") == f"cuda -arch={Target('cuda').arch}"
    assert portable_target("cuda -arch=sm_80") == "cuda -arch=sm_80"


def test_forked_build_processes_survive_their_jobs_faults():
    pid_of = _in_fork(os.getpid, (), 10)
    assert pid_of[0] == "ok" and pid_of[1] != os.getpid()
    assert _in_fork(os.getpid, (), 10) == pid_of  # kept for the next job
    assert _in_fork(time.sleep, (5,), 0.3) == ("timeout", "exceeded 0.3 s")
    assert _in_fork(lambda: os.kill(os.getpid(), signal.SIGSEGV), (), 10) == (
        "crash", "worker killed by SIGSEGV")
    status, text = _in_fork(lambda: 1 // 0, (), 10)
    assert status == "err" and "ZeroDivisionError" in text
    assert _in_fork(lambda: 7, (), 10) == ("ok", 7)  # a fresh process after the faults


@pytest.fixture
def small_task():
    return autotune.create_task("matmul", (16, 16, 16), "llvm")


def _build(task, index, workload_hash=None):
    return _build_on_worker(_template_ref(task), task.name, task.args,
                            portable_target(task.target), index,
                            workload_hash or task.workload_hash, 60.0, None)


def test_a_build_returns_the_shared_object_as_bytes(small_task):
    reply = _build(small_task, small_task.default_config.index)
    assert reply["error_no"] == 0 and reply["blob"][:4] == b"\x7fELF"
    assert reply["specs"] == ((((16, 16), "float32", False)), ((16, 16), "float32", False),
                              ((16, 16), "float32", True))


def test_a_worker_whose_template_computes_something_else_says_so(small_task):
    reply = _build(small_task, 0, workload_hash="0" * 16)
    assert reply["error_no"] == MeasureErrorNo.INSTANTIATION_ERROR
    assert "install the same tecomp on every worker" in reply["error_msg"]


def test_an_unknown_template_names_the_module_it_looked_in():
    with pytest.raises(TemplateError, match="no_such_module.*install the same tecomp"):
        _ensure_template(("test/not_registered", "no_such_module", None))


def test_the_worker_measures_a_build_with_its_local_runner(small_task):
    reply = _build(small_task, small_task.default_config.index)
    make = lambda: autotune.LocalRunner(number=1, repeat=2, warmup_ms=0,  # noqa: E731
                                        timeout=60)
    costs, error_no, msg, cost, stamp, node = _measure_on_worker(
        reply, "test-runner", make, None, True)
    assert (error_no, msg) == (0, "")
    assert len(costs) == 2 and min(costs) > 0
    assert node == f"pid {os.getpid()}"
    failed = _build_reply(error_no=MeasureErrorNo.COMPILE_ERROR, msg="boom")
    assert _measure_on_worker(failed, "test-runner", make, None, True)[1:3] == (
        int(MeasureErrorNo.COMPILE_ERROR), "boom")
    from tecomp.autotune.dask_measure import _close_runner

    assert _close_runner("test-runner")


class _Sleeper:
    def run(self, inputs, builds):
        time.sleep(0.3)
        return [MeasureResult((1e-3,), MeasureErrorNo.NO_ERROR) for _ in builds]

    def close(self):
        pass


@pytest.mark.parametrize("one_per_machine, serial", [(True, True), (False, False)])
def test_one_measurement_per_machine(one_per_machine, serial):
    """Two workers' measurements on one machine: one after the other when the machine
    lock is on, at once when it is off (workers that stand in for separate nodes)."""
    reply = _build_reply(b"x", ((), ()))
    threads = [threading.Thread(target=_measure_on_worker,
                                args=(reply, f"sleeper-{i}-{one_per_machine}", _Sleeper,
                                      None, one_per_machine)) for i in range(2)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    assert (took >= 0.6) if serial else (took < 0.55), took
