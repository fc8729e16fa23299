"""How tuning on a Dask cluster scales: trials per minute and the driver's cost per trial
at 1, 2, 4 and 8 measuring nodes.

The nodes are simulated: worker processes on this machine, each advertising the host's
target, whose runner is a stand-in that sleeps a fixed time per measurement (0.5 s by
default) instead of timing the candidate, so eight of them fit on two cores. Builds go
through the real path (a Dask task per candidate, the template instantiated in a child
forked from the worker, the artifact's bytes carried to the measuring worker as task
data); only the compiler is replaced by a stand-in that writes a small file, since the
point is what the cluster and the driver cost, not how long LLVM takes.

Printed per node count: trials, wall time, trials/min, speed-up over one node, and the
driver's CPU time per trial (its process time over the run, every thread of the driver
included: the tuner, the Dask client, the log writer). Every scheduler and worker binds
to 127.0.0.1.

    python benchmarks/dask_tuning_scale.py [--nodes 1,2,4,8] [--latency 0.5]
                                           [--seconds 20] [--tuner random|xgb]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import distributed

from tecomp import autotune
from tecomp.autotune import MeasureErrorNo, MeasureResult
from tecomp.autotune.dask_measure import (
    _build_on_worker,
    _template_ref,
    portable_target,
    worker_resources_string,
)


class StandInRunner:
    """Sleeps ``latency`` seconds per candidate and reports a cost made up from the
    config's index (every candidate is a success)."""

    latency = 0.5

    def run(self, inputs, builds):
        out = []
        for b in builds:
            time.sleep(self.latency)
            cost = 1e-3 * (1 + (hash(b.filename) % 97) / 97)
            out.append(MeasureResult((cost,), MeasureErrorNo.NO_ERROR, "", self.latency,
                                     time.time()))
        return out

    def remeasure(self, builds, rounds=5):
        time.sleep(self.latency * len(builds))
        return [[1e-3] * rounds for _ in builds]

    def close(self):
        pass


def stand_in_build(sch, tensors, target, out_dir, index):
    """Instead of compiling: a 4 KiB file (what travels to the measuring worker)."""
    path = os.path.join(out_dir, f"standin_{index}_{os.getpid()}_{time.time_ns()}.so")
    with open(path, "wb") as f:
        f.write(os.urandom(4096))
    return path


def make_runner(latency):
    runner = StandInRunner()
    runner.latency = latency
    return runner


TASK = ("matmul", (256, 256, 256), "llvm")


def warm_up(client):
    """One build on every worker: its imports and the task's config space happen before
    the timed run, which then measures the steady state."""
    task = autotune.create_task(*TASK)
    client.run(_build_on_worker, _template_ref(task), task.name, task.args,
               portable_target(task.target), 0, task.workload_hash, 120.0, stand_in_build)


def tune_once(client, nodes, latency, seconds, tuner_name, log):
    task = autotune.create_task(*TASK)
    runner = autotune.DaskRunner(client, one_per_machine=False,
                                 make_runner=functools.partial(make_runner, latency))
    builder = autotune.DaskBuilder(client, timeout=60, build_func=stand_in_build)
    option = autotune.measure_option(builder=builder, runner=runner)
    assert runner.measure_slots([task.target]) == nodes
    n_trial = max(8, int(seconds / latency) * nodes)
    batch = max(8, 4 * nodes)  # as `tecomp tune --cluster` sizes its batches
    tuner_cls = {"random": autotune.RandomTuner, "xgb": autotune.XGBTuner}[tuner_name]
    tuner = tuner_cls(task, seed=0, batch_size=batch)
    task.default_config  # noqa: B018 - the driver's one-off work, not per trial
    cpu0, main0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
    tuner.tune(n_trial, option, callbacks=[autotune.log_to_file(log)], remeasure_top=0)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    main = time.thread_time() - main0
    trials = sum(1 for _, r in tuner.history if r.stage == "trial")
    ok = sum(1 for _, r in tuner.history if r.stage == "trial" and r.ok)
    return trials, ok, wall, cpu, main


#: Dask settings for measuring workers (docs/distributed_tuning.md): no statistical profiler
#: sampling the worker every 10 ms, and the event loop's health check, system monitor and
#: memory monitor once a second instead of 50, 2 and 10 times. Idle, eight workers then use
#: about a fifth of the CPU time they use by default.
QUIET = {
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "1s",
    "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s",
}


class _Processes:
    """A ``dask scheduler`` and ``dask worker`` processes started by this script, each
    bound to 127.0.0.1; ``close`` stops each one by its process id."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []
        file = os.path.join(tmp, "scheduler.json")
        # Every listening socket on 127.0.0.1, the HTTP ones (dashboard, health) too.
        self._start(["dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
                     "--dashboard-address", "127.0.0.1:0", "--scheduler-file", file])
        deadline = time.monotonic() + 120
        while not os.path.exists(file) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.2)
        with open(file) as f:
            self.address = json.load(f)["address"]

    def _start(self, argv):
        log = open(os.path.join(self.tmp, f"proc{len(self.procs)}.log"), "wb")  # noqa: SIM115
        self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                           env={**os.environ, **QUIET}))

    def add_worker(self):
        self._start(["dask", "worker", self.address, "--host", "127.0.0.1", "--nworkers", "1",
                     "--nthreads", "2", "--dashboard-address", "127.0.0.1:0",
                     "--resources", worker_resources_string()])

    def cpu_seconds(self) -> tuple:
        """CPU seconds used so far by the scheduler, and by the workers (their nannies
        and the children they forked included)."""
        import psutil

        def total(pid):
            try:
                p = psutil.Process(pid)
                t = p.cpu_times()
                s = t.user + t.system + t.children_user + t.children_system
                return s + sum(total(c.pid) for c in p.children())
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                return 0.0

        return total(self.procs[0].pid), sum(total(p.pid) for p in self.procs[1:])

    def close(self):
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", default="1,2,4,8")
    p.add_argument("--latency", type=float, default=0.5,
                   help="seconds the stand-in runner sleeps per measurement")
    p.add_argument("--seconds", type=float, default=20.0,
                   help="measuring time per node count (trials = seconds / latency x nodes)")
    p.add_argument("--tuner", choices=("random", "xgb"), default="random")
    ns = p.parse_args(argv)
    counts = [int(x) for x in ns.nodes.split(",")]
    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f
                    if line.startswith("model name")), platform.processor())
    print(f"# {cpu}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"stand-in runner {ns.latency:g} s per measurement; tuner {ns.tuner}; "
          f"distributed {distributed.__version__}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        procs = _Processes(tmp)
        client = None
        try:
            client = distributed.Client(procs.address, timeout=60)
            for n in counts:
                while len(procs.procs) - 1 < n:
                    procs.add_worker()
                client.wait_for_workers(n, timeout=300)
                warm_up(client)
                sched0, workers0 = procs.cpu_seconds()
                trials, ok, wall, cpu_s, main_s = tune_once(
                    client, n, ns.latency, ns.seconds, ns.tuner, os.path.join(tmp, f"{n}.json"))
                sched1, workers1 = procs.cpu_seconds()
                rows.append((n, trials, ok, wall, cpu_s))
                base = rows[0][1] / rows[0][3]
                print(f"nodes {n}: {trials} trials ({ok} ok) in {wall:.1f} s = "
                      f"{60 * trials / wall:.0f} trials/min, x{trials / wall / base:.2f} of "
                      f"{rows[0][0]} node(s); driver CPU {1e3 * cpu_s / trials:.2f} ms/trial "
                      f"({1e3 * main_s / trials:.2f} in the tuner's thread); scheduler CPU "
                      f"{1e3 * (sched1 - sched0) / trials:.2f} ms/trial, workers CPU "
                      f"{1e3 * (workers1 - workers0) / trials:.2f} ms/trial", flush=True)
        finally:
            if client is not None:
                client.close()
            procs.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
