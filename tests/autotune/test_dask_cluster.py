"""Tuning on a real Dask cluster on this machine: a scheduler and two worker processes,
every one bound to 127.0.0.1. An operator and a tiny model are tuned through it, a worker
is killed in the middle of a session, and the driver's log is checked each time."""

import json
import os
import signal
import sys
import threading
import time

import pytest

distributed = pytest.importorskip("distributed")
import dask  # noqa: E402 - distributed is what the tests need; dask comes with it

from tecomp import autotune, cli, te  # noqa: E402
from tecomp.autotune.dask_measure import resource_name  # noqa: E402
from tecomp.topi.fused_group import anchor_workload  # noqa: E402
from tecomp.autotune.records import target_key  # noqa: E402
from tecomp.target import Target  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
import onnx_models  # noqa: E402



@autotune.template("test/dask_matmul")
def dask_matmul(n):
    """A matmul whose three loop orders differ several-fold in speed, so the winner does
    not depend on timing noise. Workers import this module to find it."""
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    cfg = autotune.get_config()
    cfg.define_knob("loops", ["ijk", "jki", "ikj-vector"])
    i, j = s[C].op.axis
    if cfg["loops"].val == "jki":
        s[C].reorder(j, k, i)
    if cfg["loops"].val == "ikj-vector":
        s[C].reorder(i, k, j)
        _, ji = s[C].split(j, factor=8)
        s[C].vectorize(ji)
    return s, [A, B, C]


@pytest.fixture(scope="module")
def cluster():
    # One retry on another worker for a measurement whose worker died, then an error;
    # quiet workers (no profiler, health checks once a second) on a busy machine.
    with dask.config.set({"distributed.scheduler.allowed-failures": 1,
                          "distributed.worker.profile.enabled": False,
                          "distributed.admin.tick.interval": "1s",
                          "distributed.admin.system-monitor.interval": "1s",
                          "distributed.worker.memory.monitor-interval": "1s"}):
        cluster = distributed.LocalCluster(
            host="127.0.0.1", n_workers=2, threads_per_worker=2, processes=True,
            dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0",
            resources=autotune.worker_resources(), silence_logs=50)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def client(cluster):
    client = distributed.Client(cluster.scheduler_address, timeout=30)
    client.wait_for_workers(2, timeout=60)
    try:
        yield client
    finally:
        client.close()


def _trials(path):
    return [r for r in autotune.load_from_file(path) if r.result.stage == "trial"]


def _tune_cli(argv, capsys):
    code = cli.main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured


def test_cluster_tunes_a_matmul_to_the_local_runners_best_config(cluster, tmp_path, capsys):
    """Same seed, grid tuner: the cluster's log has the local one's form, the same
    trials and the same winner."""
    common = ["tune", "--op", "test/dask_matmul", "--args", "96", "--trials", "3",
              "--tuner", "grid", "--seed", "0", "--number", "2", "--repeat", "3"]
    local, remote = tmp_path / "local.json", tmp_path / "cluster.json"
    out_local = _tune_cli(common + ["-o", str(local)], capsys).out
    out_remote = _tune_cli(common + ["-o", str(remote), "--cluster",
                                     cluster.scheduler_address], capsys).out
    lines_local = [json.loads(x) for x in local.read_text().splitlines()]
    lines_remote = [json.loads(x) for x in remote.read_text().splitlines()]

    def shape(obj):
        if isinstance(obj, dict):
            return tuple((k, shape(v)) for k, v in obj.items())
        return type(obj).__name__

    assert {shape(x) for x in lines_remote} == {shape(x) for x in lines_local}
    assert lines_remote[0]["target"] == lines_local[0]["target"]
    assert lines_remote[0]["workload"] == lines_local[0]["workload"]
    trials_local, trials_remote = _trials(local), _trials(remote)
    assert len(trials_remote) == 3 and all(r.ok for r in trials_remote)
    assert ([r.config_index for r in trials_remote]
            == [r.config_index for r in trials_local])
    best_local = autotune.pick_best(str(local))[0]
    best_remote = autotune.pick_best(str(remote))[0]
    assert best_remote.result.stage == best_local.result.stage == "final"
    assert best_remote.knobs == best_local.knobs == {"loops": "ikj-vector"}
    assert out_remote.split(" with ")[1].split(" (")[0] == "Config#2(loops='ikj-vector')"
    assert out_local.split(" with ")[1].split(" (")[0] == "Config#2(loops='ikj-vector')"


def test_a_target_no_worker_measures_is_refused_before_the_first_trial(cluster, client,
                                                                       tmp_path, capsys):
    other = "llvm -mcpu=skylake-avx512"
    runner = autotune.DaskRunner(client)
    with pytest.raises(autotune.ClusterError) as info:
        runner.check_target(other)
    text = str(info.value)
    assert "skylake-avx512" in text and resource_name(target_key(other)) in text
    assert f"its workers measure: {Target('llvm').canonical_key()!r} (2 workers)" in text

    log = tmp_path / "refused.json"
    code = cli.main(["tune", "--op", "matmul", "--args", "16,16,16", "--trials", "2",
                     "--target", other, "--cluster", cluster.scheduler_address,
                     "-o", str(log)])
    err = capsys.readouterr().err
    assert code == 2
    assert "no worker of the Dask cluster" in err and "dask-worker-resources" in err
    assert not log.exists() or log.read_text() == ""

    # Through the API the tuner raises before it writes anything.
    task = autotune.create_task("matmul", (16, 16, 16), other)
    option = autotune.measure_option(builder=autotune.DaskBuilder(client),
                                     runner=autotune.DaskRunner(client))
    with pytest.raises(autotune.ClusterError):
        autotune.GridSearchTuner(task).tune(2, option, callbacks=[autotune.log_to_file(
            str(log))])
    assert not log.exists() or log.read_text() == ""


def test_cluster_builds_measured_here_and_features_computed_there(client, tmp_path):
    """A DaskBuilder with a local runner fetches the shared objects; its ``map`` runs the
    XGBoost tuner's feature extraction on the workers with the same rows as here."""
    from tecomp.autotune import features as F

    task = autotune.create_task("matmul", (16, 16, 16), "llvm")
    builder = autotune.DaskBuilder(client)
    option = autotune.measure_option(builder=builder, runner=autotune.LocalRunner(
        number=1, repeat=1, warmup_ms=0))
    log = tmp_path / "here.json"
    autotune.GridSearchTuner(task).tune(2, option, callbacks=[autotune.log_to_file(str(log))],
                                        remeasure_top=0)
    trials = _trials(log)
    assert len(trials) == 2 and all(r.ok for r in trials)

    rows = builder.map(F._features_job, [(task.name, task.args, task.target, [0, 5])])
    assert rows[0][0] == "ok"
    here = [F.candidate_features(task, task.config_space.get(i)).tolist() for i in (0, 5)]
    assert rows[0][1] == here


class _CountingRunner(autotune.DaskRunner):
    """A DaskRunner that notes how many of its ``run`` calls overlap."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self.now = self.peak = 0

    def run(self, inputs, builds):
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            return super().run(inputs, builds)
        finally:
            with self._lock:
                self.now -= 1


def test_a_tiny_model_keeps_both_workers_busy_and_writes_one_log(client, tmp_path):
    import onnx

    from tecomp.frontend import from_onnx

    path = tmp_path / "m.onnx"
    onnx.save(onnx_models.conv_bn_relu_pool_gemm(batch=1), str(path))
    mod, params = from_onnx(str(path))
    # The convolution and the dense (the pools' tasks left out): two batches in flight.
    tasks = [t for t in autotune.extract_tasks(mod, params, "llvm")
             if anchor_workload(t)[0] in ("conv2d_packed_kernel", "dense_packed")]
    assert len(tasks) == 2
    runner = _CountingRunner(client, number=1, repeat=1, min_repeat_ms=50, warmup_ms=0,
                             timeout=60, one_per_machine=False)
    option = autotune.measure_option(builder=autotune.DaskBuilder(client), runner=runner)
    log = tmp_path / "m.json"
    sched = autotune.TaskScheduler(tasks, tuner=lambda t: autotune.RandomTuner(t, seed=0),
                                   batch_size=1)
    assert sched._in_flight(None, runner) == 2
    sched.tune(4, option, callbacks=[autotune.log_to_file(str(log))], remeasure_top=0)
    assert runner.peak == 2  # the two tasks' batches were measured at once
    trials = _trials(log)
    assert len(trials) == 4 and sched.n_done == 4
    assert {r.workload for r in trials} == {t.workload for t in tasks}
    keys = [(r.workload, r.config_index) for r in trials]
    assert len(set(keys)) == len(keys)
    assert [r.result.error_msg for r in trials if not r.ok] == []


# Last: the killed worker's replacement may take long to start on a busy machine, and no
# test after this one waits for it.
def _kill_a_measuring_worker(client, killed: list, stop: threading.Event):
    """Kill (SIGKILL) the process of a worker while it runs a measurement."""
    pids = client.run(os.getpid)
    while not stop.is_set():
        for addr, keys in client.processing().items():
            if any(str(k).startswith("tecomp-measure-") for k in keys) and addr in pids:
                time.sleep(0.1)  # well inside the measurement (min_repeat_ms below)
                os.kill(pids[addr], signal.SIGKILL)
                killed.append(addr)
                return
        time.sleep(0.02)


def test_killing_a_worker_mid_session_loses_and_duplicates_no_record(client, tmp_path):
    task = autotune.create_task("matmul", (16, 16, 16), "llvm")
    log = tmp_path / "killed.json"

    def option():
        return autotune.measure_option(
            builder=autotune.DaskBuilder(client, timeout=30),
            runner=autotune.DaskRunner(client, number=1, repeat=2, min_repeat_ms=150,
                                       warmup_ms=0, timeout=20, one_per_machine=False))

    killed, stop = [], threading.Event()
    killer = threading.Thread(target=_kill_a_measuring_worker, args=(client, killed, stop))
    killer.start()
    try:
        tuner = autotune.GridSearchTuner(task, batch_size=3)
        tuner.tune(6, option(), callbacks=[autotune.log_to_file(str(log))], remeasure_top=0)
    finally:
        stop.set()
        killer.join()
    assert killed, "no worker was killed during the session"
    trials = _trials(log)
    indices = [r.config_index for r in trials]
    assert len(indices) == 6 and len(set(indices)) == 6
    assert set(indices) == {c.index for c, _ in tuner.history}
    # The killed measurement was run again on the other worker, or recorded as lost.
    for r in trials:
        assert r.ok or r.result.error_msg.startswith("lost:"), r.result.error_msg
    assert sum(r.ok for r in trials) >= 5

    # Resuming continues the same log: the next grid points, nothing measured twice.
    resumed = autotune.GridSearchTuner(task, batch_size=3)
    resumed.tune(8, option(), callbacks=[autotune.log_to_file(str(log))],
                 resume_from=str(log), remeasure_top=0)
    indices = [r.config_index for r in _trials(log)]
    assert len(indices) == 8 and len(set(indices)) == 8
