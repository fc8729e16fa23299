"""Measuring candidates: build in parallel worker processes, time in an isolated one.

``LocalBuilder`` instantiates and compiles candidates in forked worker processes (a
hang past ``timeout`` kills and replaces the worker). ``LocalRunner`` times built
candidates in a separate Python process (``_runner_worker``); a candidate that
segfaults or hangs costs that process, which is restarted, and one trial.

Every outcome is a ``MeasureResult`` with an error code from the closed enum
``MeasureErrorNo``; nothing here raises for a bad candidate.
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import multiprocessing.connection
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field

from .. import te
from ..build_module import build
from ..codegen.llvm.jit import export_only
from ..errors import TecompError
from ..ir import expr as E
from ..runtime.runner import Runner
from ..runtime.threads import get_num_threads
from ._runner_worker import _arrays
from .disturbance import disturbance
from .result import MeasureErrorNo, MeasureInput, MeasureResult
from .space import FallbackConfigEntity
from .task import Task, _run_with_config


@dataclass(frozen=True)
class BuildResult:
    """A built candidate: the shared object (``filename``), its argument ``specs`` (shape,
    dtype, is_output) and the seconds the build took (``time_cost``); or an error
    (``error_no``, ``error_msg``). ``extra`` carries what a builder adds for its runner."""

    filename: str | None
    specs: tuple = ()
    error_no: MeasureErrorNo = MeasureErrorNo.NO_ERROR
    error_msg: str = ""
    time_cost: float = 0.0
    extra: dict = field(default_factory=dict, compare=False)


def _short(err: BaseException, limit: int = 400) -> str:
    text = f"{type(err).__name__}: {err}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---- a pool of forked workers that survives hangs and crashes -----------------------------


def _worker_loop(conn, parent_pid):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            # Siblings forked later hold copies of this pipe's parent end, so EOF alone
            # does not tell that the parent died: check who the parent is, too.
            while not conn.poll(1.0):
                if os.getppid() != parent_pid:
                    return
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        fn, args = msg
        try:
            reply = ("ok", fn(*args))
        except BaseException as err:  # noqa: BLE001 - everything goes back to the parent
            reply = ("err", _short(err), traceback.format_exc(limit=6))
        try:
            conn.send(reply)
        except Exception:  # noqa: BLE001 - e.g. an unpicklable result
            conn.send(("err", "worker could not send its result", ""))


class _Worker:
    def __init__(self, ctx):
        self._ctx = ctx
        self._start()

    def _start(self):
        self.conn, child = self._ctx.Pipe()
        self.proc = self._ctx.Process(target=_worker_loop, args=(child, os.getpid()),
                                      daemon=True)
        self.proc.start()
        child.close()

    def restart(self):
        self.kill()
        self._start()

    def kill(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)
        self.conn.close()


class ForkPool:
    """``n`` forked workers running module-level functions with a per-job timeout.

    Forking (not spawning) lets a worker use any template registered in the parent,
    including ones defined in a script or a test. A worker that hangs past the timeout
    or dies is replaced; its job reports ``("timeout", msg)`` / ``("crash", msg)``.
    """

    def __init__(self, n: int):
        self._ctx = multiprocessing.get_context("fork")
        self.n = max(1, int(n))
        self._workers = [_Worker(self._ctx) for _ in range(self.n)]

    def map(self, fn, arg_list, timeout: float):
        """Run ``fn(*args)`` for each args; returns one ``(status, value)`` per job in
        order, status "ok", "err", "timeout" or "crash"."""
        results = [None] * len(arg_list)
        pending = list(range(len(arg_list)))[::-1]
        busy = {}  # worker index -> (job index, deadline)
        while pending or busy:
            for w_i, w in enumerate(self._workers):
                if w_i not in busy and pending:
                    j = pending.pop()
                    try:
                        w.conn.send((fn, arg_list[j]))
                    except (BrokenPipeError, OSError):
                        w.restart()
                        w.conn.send((fn, arg_list[j]))
                    busy[w_i] = (j, time.monotonic() + timeout)
            now = time.monotonic()
            wait_s = max(0.0, min(d for _, d in busy.values()) - now)
            handles = {}
            for w_i in busy:
                w = self._workers[w_i]
                handles[w.conn] = w_i
                handles[w.proc.sentinel] = w_i
            ready = multiprocessing.connection.wait(list(handles), timeout=wait_s)
            done = set()
            for h in ready:
                w_i = handles[h]
                if w_i in done:
                    continue
                w = self._workers[w_i]
                j, _ = busy[w_i]
                try:
                    if w.conn.poll():
                        reply = w.conn.recv()
                        results[j] = (reply[0], reply[1:] if reply[0] == "err" else reply[1])
                    else:
                        raise EOFError
                except (EOFError, OSError):
                    w.proc.join(timeout=1)
                    code = w.proc.exitcode
                    results[j] = ("crash", _exit_text(code))
                    w.restart()
                done.add(w_i)
            now = time.monotonic()
            for w_i, (j, deadline) in list(busy.items()):
                if w_i in done:
                    del busy[w_i]
                elif now >= deadline:
                    self._workers[w_i].restart()
                    results[j] = ("timeout", f"exceeded {timeout:g} s")
                    del busy[w_i]
        return results

    def close(self):
        for w in self._workers:
            with contextlib.suppress(BrokenPipeError, OSError):
                w.conn.send(None)
        for w in self._workers:
            w.proc.join(timeout=1)
            w.kill()


def _exit_text(code) -> str:
    if code is None:
        return "worker exited"
    if code < 0:
        try:
            return f"worker killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"worker killed by signal {-code}"
    return f"worker exited with status {code}"


# ---- building ---------------------------------------------------------------------------------

# Tasks seen by this (worker) process, so each task's space is collected once.
_WORKER_TASKS: dict = {}


def _worker_task(name, args, target):
    key = (name, args, target)
    t = _WORKER_TASKS.get(key)
    if t is None:
        t = _WORKER_TASKS[key] = Task(name, args, target)
    return t


def arg_specs(tensors) -> tuple:
    """(shape, dtype, is_output) of each argument tensor, with concrete int shapes."""
    specs = []
    for t in tensors:
        shape = []
        for s in t.shape:
            if not isinstance(s, E.IntImm):
                raise ValueError(f"argument {t.name} has a symbolic shape; tuning needs ints")
            shape.append(int(s.value))
        specs.append((tuple(shape), t.dtype, bool(getattr(t.op, "body", None))))
    return tuple(specs)


def _build_candidate(name, args, target, index, out_dir, build_func):
    """Runs in a builder worker: instantiate config ``index``, compile, export."""
    t0 = time.perf_counter()
    task = _worker_task(name, args, target)
    try:
        cfg = task.config_space.get(index)
        s, tensors = task.instantiate(cfg)
        specs = arg_specs(tensors)
    except Exception as err:  # noqa: BLE001
        return (None, (), int(MeasureErrorNo.INSTANTIATION_ERROR), _short(err),
                time.perf_counter() - t0)
    try:
        if build_func is not None:
            path = build_func(s, tensors, target, out_dir, index)
        else:
            with export_only():  # the runner loads the library; this process never calls it
                mod = build(s, tensors, target=target, name="default_function")
            path = os.path.join(out_dir, f"cand_{index}_{os.getpid()}_{time.time_ns()}.so")
            mod.export_library(path)
    except Exception as err:  # noqa: BLE001
        return (None, specs, int(MeasureErrorNo.COMPILE_ERROR), _short(err),
                time.perf_counter() - t0)
    return (path, specs, 0, "", time.perf_counter() - t0)


class LocalBuilder:
    """Builds candidates in ``n_parallel`` forked worker processes.

    Parameters
    ----------
    timeout : float
        Seconds one build may take; past it the worker is killed and the candidate
        recorded as TIMEOUT.
    n_parallel : int, optional
        Number of build workers (default: the number of CPU cores).
    build_func : callable, optional
        ``f(sch, tensors, target, out_dir, index) -> path`` replacing
        ``tecomp.build(...).export_library(path)``.
    """

    def __init__(self, timeout: float = 10.0, n_parallel: int | None = None, build_func=None):
        self.timeout = float(timeout)
        self.n_parallel = n_parallel or os.cpu_count() or 1
        self.build_func = build_func
        self._pool = None
        self._dir = None

    def _ensure(self):
        if self._pool is None:
            self._pool = ForkPool(self.n_parallel)
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="tecomp_build_")

    def build(self, inputs: list[MeasureInput]) -> list[BuildResult]:
        self._ensure()
        jobs = [
            (inp.task.name, inp.task.args, inp.task.target, int(inp.config.index), self._dir,
             self.build_func)
            for inp in inputs
        ]
        out = []
        for status, value in self._pool.map(_build_candidate, jobs, self.timeout):
            if status == "ok":
                path, specs, err, msg, cost = value
                out.append(BuildResult(path, tuple(specs), MeasureErrorNo(err), msg, cost))
            elif status == "timeout":
                out.append(BuildResult(None, (), MeasureErrorNo.TIMEOUT, f"build {value}",
                                       self.timeout))
            elif status == "crash":
                out.append(BuildResult(None, (), MeasureErrorNo.COMPILE_ERROR,
                                       f"build {value}"))
            else:
                out.append(BuildResult(None, (), MeasureErrorNo.UNKNOWN_ERROR, value[0]))
        return out

    def map(self, fn, arg_list, timeout=None):
        """Run other per-candidate work (e.g. feature extraction) on the build workers."""
        self._ensure()
        return self._pool.map(fn, arg_list, timeout or self.timeout)

    def remove(self, path):
        if path and self._dir and path.startswith(self._dir):
            with contextlib.suppress(OSError):
                os.unlink(path)

    def close(self):
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


# ---- running ------------------------------------------------------------------------------------

#: How many more times a measurement the machine disturbed is taken before it is written
#: with its ``disturbed`` reason: a busy moment passes, a busy machine should not stall
#: tuning.
REMEASURE_DISTURBED = 2


def _until_sound(costs, measure) -> tuple:
    """``(costs, disturbed)``: the measurement ``costs``, or when the machine disturbed it
    (:func:`~tecomp.autotune.disturbance.disturbance`) the first sound one of up to
    :data:`REMEASURE_DISTURBED` more by ``measure()`` (which returns costs, or None when
    it failed); ``disturbed`` is the sign the last one still shows, or ``""``."""
    reason = disturbance(costs)
    for _ in range(REMEASURE_DISTURBED):
        if not reason:
            break
        again = measure()
        if again is None:
            break
        costs, reason = again, disturbance(again)
    return tuple(costs), reason



class _RunnerProcess:
    """The measuring process and its JSON-lines pipe."""

    def __init__(self):
        self._err = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the process)
        env = dict(os.environ)
        # One source of threads per measurement: the candidate's own parallel loops, as
        # many as this process's (TECOMP_NUM_THREADS travels in the environment).
        env.setdefault("OMP_NUM_THREADS", str(get_num_threads()))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tecomp.autotune._runner_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
            env=env, start_new_session=True,
        )
        self._buf = b""
        try:
            ready = self.read(timeout=60.0)
        except EOFError:
            ready = None
        if not ready or not ready.get("ok"):
            raise RuntimeError(f"the measuring process did not start: {self.stderr_tail()}")

    def send(self, obj):
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def read(self, timeout):
        """The next reply; None if ``timeout`` passed; EOFError if the process died."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError("the measuring process closed its pipe")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def stderr_tail(self, n=300) -> str:
        try:
            self._err.seek(0, os.SEEK_END)
            size = self._err.tell()
            self._err.seek(max(0, size - n))
            return self._err.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""

    def death_text(self) -> str:
        code = self.proc.poll()
        if code is None:
            return ""
        return _exit_text(code)

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        for f in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                f.close()
        self._err.close()


class LocalRunner:
    """Times built candidates in a separate process, one at a time.

    Parameters
    ----------
    number : int
        Calls per timed batch (raised to reach ``min_repeat_ms``).
    repeat : int
        Timed batches; the candidate's cost is their median.
    min_repeat_ms : float
        Minimum duration of one batch, so short kernels are timed over many calls.
    timeout : float
        Seconds one candidate may take in all (warm-up, check, batches); past it the
        measuring process is killed and restarted and the candidate is a TIMEOUT.
    warmup_ms : float
        Untimed calls before the batches (see docs/measuring.md).
    enable_cpu_cache_flush : bool
        Time every call with cold weights, as TVM's option of that name: each call reads
        every argument but the first (the data) from its own copy, the copies spanning
        256 MiB, so they come from memory as a model's weights do at batch 1 (a kernel
        timed back to back finds them in cache and ranks configs for a situation a model
        run never meets). ``tecomp tune MODEL.onnx`` turns it on.
    check_correctness : bool
        Compare each candidate's outputs with a reference build (the untransformed
        schedule of the task's compute) and record WRONG_ANSWER when they differ.
    """

    def __init__(self, number: int = 4, repeat: int = 3, min_repeat_ms: float = 0.0,
                 timeout: float = 10.0, warmup_ms: float = 100.0,
                 enable_cpu_cache_flush: bool = False, check_correctness: bool = False):
        self.number = int(number)
        self.repeat = int(repeat)
        self.min_repeat_ms = float(min_repeat_ms)
        self.timeout = float(timeout)
        self.warmup_ms = float(warmup_ms)
        self.flush = bool(enable_cpu_cache_flush)
        self.check_correctness = bool(check_correctness)
        self._proc = None
        self._refs: dict = {}
        self._ref_dir = None

    def _process(self) -> _RunnerProcess:
        if self._proc is None or self._proc.proc.poll() is not None:
            if self._proc is not None:
                self._proc.kill()
            self._proc = _RunnerProcess()
        return self._proc

    def _request(self, req, timeout):
        """Send one request; returns (reply or None, failure text)."""
        proc = self._process()
        try:
            proc.send(req)
        except (BrokenPipeError, OSError):
            self._restart()
            proc = self._process()
            proc.send(req)
        try:
            reply = proc.read(timeout)
        except EOFError:
            reply = None
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.proc.wait(timeout=5)
        if reply is not None:
            return reply, ""
        dead = proc.death_text()
        tail = proc.stderr_tail()
        self._restart()
        if dead:
            return None, f"measuring process crashed ({dead})" + (f": {tail}" if tail else "")
        return None, f"timeout: run exceeded {timeout:g} s"

    def _restart(self):
        if self._proc is not None:
            self._proc.kill()
            self._proc = None

    def _reference(self, task):
        """Path of the reference build of ``task`` (naive schedule of its compute)."""
        key = (task.name, task.args, task.target)
        if key not in self._refs:
            _, tensors = _run_with_config(task.template.func, task.args, FallbackConfigEntity())
            outs = [t for t in tensors if getattr(t.op, "body", None)]
            s = te.create_schedule([t.op for t in outs])
            mod = build(s, list(tensors), target=task.target, name="reference")
            if self._ref_dir is None:
                self._ref_dir = tempfile.mkdtemp(prefix="tecomp_ref_")
            path = os.path.join(self._ref_dir, f"ref_{len(self._refs)}.so")
            mod.export_library(path)
            self._refs[key] = path
        return self._refs[key]

    def _base_request(self):
        return {
            "number": self.number, "repeat": self.repeat, "min_repeat_ms": self.min_repeat_ms,
            "warmup_ms": self.warmup_ms, "flush": self.flush,
            "budget_s": max(0.5, self.timeout / 3.0),
        }

    def run(self, inputs: list[MeasureInput], builds: list[BuildResult]) -> list[MeasureResult]:
        out = []
        for inp, b in zip(inputs, builds):
            t0 = time.perf_counter()
            now = time.time()
            if b.error_no != MeasureErrorNo.NO_ERROR:
                out.append(MeasureResult((), b.error_no, b.error_msg, b.time_cost, now))
                continue
            req = {"cmd": "run", "path": b.filename, "specs": [list(s) for s in b.specs]}
            req.update(self._base_request())
            if self.check_correctness:
                try:
                    req["ref"] = self._reference(inp.task)
                except Exception as err:  # noqa: BLE001 - no oracle: say so, don't guess
                    out.append(MeasureResult((), MeasureErrorNo.UNKNOWN_ERROR,
                                             f"reference build failed: {_short(err)}",
                                             b.time_cost, now))
                    continue
            reply, failure = self._request(req, self.timeout)
            cost = b.time_cost + time.perf_counter() - t0
            if reply is None:
                code = (MeasureErrorNo.TIMEOUT if failure.startswith("timeout")
                        else MeasureErrorNo.RUNTIME_ERROR)
                out.append(MeasureResult((), code, failure, cost, now))
            elif reply.get("ok"):
                costs, disturbed = _until_sound(reply["costs"],
                                                lambda req=req: self._costs_of(req))
                out.append(MeasureResult(costs, MeasureErrorNo.NO_ERROR, "",
                                         b.time_cost + time.perf_counter() - t0, now,
                                         disturbed=disturbed))
            else:
                code = (MeasureErrorNo.WRONG_ANSWER if reply.get("kind") == "wrong"
                        else MeasureErrorNo.RUNTIME_ERROR)
                out.append(MeasureResult((), code, reply.get("msg", ""), cost, now))
                if reply.get("restart"):
                    # A GPU fault may poison the CUDA context: the next candidate runs
                    # in a fresh process (the worker has exited already).
                    self._restart()
        return out

    def _costs_of(self, req) -> list | None:
        """The costs of measuring ``req`` again, None when that failed."""
        reply, _ = self._request(req, self.timeout)
        return reply["costs"] if reply is not None and reply.get("ok") else None

    def remeasure(self, builds: list[BuildResult], rounds: int = 5) -> list[list[float]] | None:
        """Time the built candidates interleaved, ``rounds`` times each; one list of
        per-run seconds per candidate, or None if the process failed."""
        req = {"cmd": "interleave", "paths": [b.filename for b in builds],
               "specs": [[list(s) for s in b.specs] for b in builds], "rounds": int(rounds)}
        req.update(self._base_request())
        req["warmup_ms"] = max(50.0, self.warmup_ms / 2)
        reply, _ = self._request(req, self.timeout * max(1, len(builds)) * 2)
        if reply is None or not reply.get("ok"):
            return None
        return reply["samples"]

    def close(self):
        self._restart()
        if self._ref_dir is not None:
            shutil.rmtree(self._ref_dir, ignore_errors=True)
            self._ref_dir = None
        self._refs.clear()


class OffHostRunner:
    """Times built candidates through a ``tecomp.runtime`` runner: under an emulator
    (``QemuRunner``) or on another machine (``SSHRunner``).

    ``measure_option(runner=QemuRunner("aarch64"))`` wraps the runner in one of these
    with default settings. Under emulation the timings only rank candidates against each
    other (qemu translates the code; it does not model the real chip's speed), so a
    tuning log made this way says which schedule is better, not how fast it is.

    Parameters
    ----------
    runner : tecomp.runtime.Runner
        Where candidates run; it stays open after tuning (its owner closes it).
    number, repeat : int
        Calls per timed batch, and batches; the cost is their median.
    warmup_ms : float
        Untimed calls before the batches.
    """

    def __init__(self, runner, number: int = 4, repeat: int = 3, warmup_ms: float = 20.0):
        self.runner = runner
        self.number = int(number)
        self.repeat = int(repeat)
        self.warmup_ms = float(warmup_ms)

    def _time(self, path, specs, number, repeat, warmup_ms) -> list:
        arrays = _arrays([list(s) for s in specs])
        return self.runner.load_module(path).time_evaluator(
            number=number, repeat=repeat, warmup_ms=warmup_ms)(*arrays).results

    def run(self, inputs: list[MeasureInput], builds: list[BuildResult]) -> list[MeasureResult]:
        out = []
        for b in builds:
            t0 = time.perf_counter()
            now = time.time()
            if b.error_no != MeasureErrorNo.NO_ERROR:
                out.append(MeasureResult((), b.error_no, b.error_msg, b.time_cost, now))
                continue
            try:
                costs = self._time(b.filename, b.specs, self.number, self.repeat,
                                   self.warmup_ms)
            except TecompError as err:
                code = (MeasureErrorNo.TIMEOUT if "took longer" in str(err)
                        else MeasureErrorNo.RUNTIME_ERROR)
                out.append(MeasureResult((), code, _short(err), b.time_cost, now))
                continue
            costs, disturbed = _until_sound(costs, lambda b=b: self._costs_again(b))
            out.append(MeasureResult(costs, MeasureErrorNo.NO_ERROR, "",
                                     b.time_cost + time.perf_counter() - t0, now,
                                     disturbed=disturbed))
        return out

    def _costs_again(self, b: BuildResult) -> list | None:
        try:
            return self._time(b.filename, b.specs, self.number, self.repeat, self.warmup_ms)
        except TecompError:
            return None

    def remeasure(self, builds: list[BuildResult], rounds: int = 5) -> list[list[float]] | None:
        """Time the candidates interleaved, one batch each per round; None on a failure."""
        samples = [[] for _ in builds]
        try:
            for _ in range(rounds):
                for b, acc in zip(builds, samples):
                    acc += self._time(b.filename, b.specs, self.number, 1, self.warmup_ms)
        except TecompError:
            return None
        return samples

    def close(self):
        """Nothing to release: the wrapped runner belongs to the caller."""


def measure_option(builder=None, runner=None) -> dict:
    """The builder and runner a tuner measures with (defaults: ``LocalBuilder()`` and
    ``LocalRunner()``). ``runner`` may also be a ``tecomp.runtime.Runner`` (e.g.
    ``QemuRunner("aarch64")``), which is wrapped in an ``OffHostRunner``; a
    ``DaskBuilder`` and a ``DaskRunner`` together keep built candidates on the cluster."""
    if isinstance(builder, str) or isinstance(runner, str):
        raise TypeError("measure_option takes builder and runner objects (LocalBuilder / "
                        "LocalRunner, DaskBuilder / DaskRunner)")
    if isinstance(runner, Runner):
        runner = OffHostRunner(runner)
    builder, runner = builder or LocalBuilder(), runner or LocalRunner()
    bind = getattr(builder, "bind_runner", None)
    if bind is not None:
        # A builder whose results can stay where they were built (a DaskBuilder's, on
        # the cluster) learns whether the runner can take them there.
        bind(runner)
    return {"builder": builder, "runner": runner}


def gflops(flop: float, cost: float) -> float:
    if not cost or math.isinf(cost):
        return 0.0
    return flop / cost / 1e9
