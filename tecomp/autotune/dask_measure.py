"""Builders and runners on a Dask cluster: tuning past one machine.

``DaskBuilder`` builds candidates as Dask tasks on any worker; the built shared object
comes back as the task's data (bytes), never through a shared filesystem. ``DaskRunner``
times each candidate on a worker that *advertises* the task's target, one measurement at
a time per worker, inside that worker's own ``LocalRunner`` (a separate measuring
process: a candidate that crashes or hangs costs one trial, not the worker). The driver
alone holds the tuner and writes the log.

How a worker advertises what it measures
----------------------------------------
A worker is started with Dask *resources* (``dask worker ... --resources "..."``):

- ``tecomp-measure=1``: it measures tecomp candidates at all;
- ``tecomp-measure-<hash>=1`` for each target key it can measure (``node_keys``): the
  canonical key of its CPU (``llvm -arch=x86_64 -mcpu=znver5 -mattr=+avx2,...``), the
  same key without features (what a target naming only ``-mcpu=znver5`` has on a driver
  of another CPU), and ``cuda -arch=sm_XY`` for its GPU. A key holds ``=`` and ``,``,
  which a resource name cannot, hence the hash (``resource_name``).

``tecomp dask-worker-resources`` prints that string for the machine it runs on (the same
detection as ``tecomp doctor``); ``worker_resources()`` gives it as a dict for
``distributed.LocalCluster(resources=...)``.

A measurement asks for one unit of the task's resource, so Dask places it only on a
matching worker and never runs two on one worker. One worker per machine
(``--nworkers 1``) makes that one measurement per machine; ``DaskRunner``'s
``one_per_machine`` (on by default) also serialises measurements of workers that share a
machine through a lock file, so a machine never times two candidates at once.

Faults
------
A worker that dies while it builds or measures: the Dask scheduler runs the task again on
another worker (``distributed.scheduler.allowed-failures`` times; set it to 1 on the
scheduler for exactly one retry); past that the trial is recorded as a RUNTIME_ERROR and
the session goes on. Every trial yields exactly one result on the driver, which writes
it once: a lost node never loses or duplicates a record.
"""

from __future__ import annotations

import contextlib
import faulthandler
import fcntl
import functools
import hashlib
import importlib
import os
import pickle
import select
import shutil
import signal
import tempfile
import threading
import time
import uuid
import warnings

from ..errors import MeasureError
from ..target import Target, get_target_kind, target_kinds
from .measure import BuildResult, LocalRunner, _build_candidate, _exit_text, _short, _worker_task
from .records import target_key
from .result import MeasureErrorNo, MeasureInput, MeasureResult
from .task import TEMPLATES, TemplateError, template

#: The resource every measuring worker advertises (with amount 1).
RESOURCE = "tecomp-measure"


class ClusterError(MeasureError):
    """The Dask cluster cannot do what tuning asks of it (no worker measures the task's
    target, ``distributed`` is not installed, the scheduler cannot be reached)."""


def _distributed():
    try:
        import distributed
    except ImportError:
        raise ClusterError(
            "tuning on a Dask cluster needs the `distributed` package: "
            "pip install 'tecomp[distributed]'"
        ) from None
    return distributed


# ---- what a node measures ------------------------------------------------------------------


def resource_name(key: str) -> str:
    """The Dask resource of target key ``key``: ``tecomp-measure-`` and 12 hex digits of
    its SHA-256 (a key holds ``=`` and ``,``, which a resource name cannot)."""
    return f"{RESOURCE}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def task_resource(target) -> str:
    """The resource a measurement of a candidate for ``target`` asks for."""
    return resource_name(target_key(target))


def _without_features(key: str) -> str:
    return " ".join(p for p in key.split() if not p.startswith("-mattr="))


def node_keys() -> list[str]:
    """Target keys this machine measures: the canonical key of each target its kinds run
    here (``TargetKind.local_targets``: its CPU, and ``cuda -arch=sm_XY`` where a GPU is
    usable), each followed by the same without CPU features."""
    keys: list[str] = []
    for name in target_kinds():
        local = get_target_kind(name).local_targets
        for text in local() if local else ():
            key = Target(text).canonical_key()
            for k in (key, _without_features(key)):
                if k not in keys:
                    keys.append(k)
    return keys


def worker_resources(keys=None) -> dict[str, int]:
    """The Dask resources a worker on this machine advertises (see the module docstring):
    ``{"tecomp-measure": 1, resource_name(key): 1, ...}`` for ``keys`` (default:
    ``node_keys()``).

    Examples
    --------
    >>> cluster = distributed.LocalCluster(host="127.0.0.1",            # doctest: +SKIP
    ...                                    resources=worker_resources())
    """
    out = {RESOURCE: 1}
    for key in node_keys() if keys is None else keys:
        out[resource_name(key)] = 1
    return out


def worker_resources_string(keys=None) -> str:
    """``worker_resources(keys)`` as ``dask worker --resources`` takes it:
    ``tecomp-measure=1,tecomp-measure-3f2a...=1``."""
    return ",".join(f"{name}={amount}" for name, amount in worker_resources(keys).items())


def portable_target(target) -> str:
    """A target string that means the same on every machine, as the target's kind spells
    it out (``TargetKind.portable``): for a CPU, its triple, CPU, every feature and core
    count (plain ``llvm`` on a worker would mean the worker's CPU, not the driver's); for
    a GPU, its architecture. Builders build for this string.

    Raises
    ------
    ClusterError
        If the spelled-out string does not have ``target``'s canonical key.
    """
    t = target if isinstance(target, Target) else Target(str(target))
    spell = t.kind_info.portable
    if spell is None:
        return str(t)
    text = spell(t)
    if text != str(t) and Target(text).canonical_key() != t.canonical_key():
        raise ClusterError(f"target {t} cannot be spelled out for other machines "
                           f"({text!r} has another key); give -mcpu and -mattr explicitly")
    return text


# ---- on a worker ---------------------------------------------------------------------------

_WORKER_LOCK = threading.Lock()
# Held while this process imports a template's modules or builds a task's space, and
# while it forks a build process: a fork taken while another thread is inside an import
# leaves that module's import lock held forever in the child, whose build then hangs
# until its timeout (two builds arriving together on a freshly restarted worker did).
_IMPORT_OR_FORK_LOCK = threading.RLock()
_RUNNERS: dict = {}          # runner id -> (runner, lock) on this worker process
_HELD_FDS: set = set()       # machine-lock descriptors a forked child must not keep
_DIR: list = []              # this process's scratch folder for candidates


def _scratch() -> str:
    with _WORKER_LOCK:
        if not _DIR:
            _DIR.append(tempfile.mkdtemp(prefix="tecomp_dask_"))
        return _DIR[0]


def _node_name() -> str:
    try:
        return _distributed().get_worker().address
    except Exception:  # noqa: BLE001 - called outside a worker (tests, local use)
        return f"pid {os.getpid()}"


def _template_ref(task) -> tuple:
    """How a worker finds ``task``'s template: its name, the module that registers it
    (imported there), and for a template defined in a script (``__main__``) the function
    itself, which travels by value."""
    func = task.template.func
    module = getattr(func, "__module__", None)
    return (task.name, module, func if module in (None, "__main__") else None)


def _ensure_template(ref) -> None:
    with _IMPORT_OR_FORK_LOCK:
        _register_template(ref)


def _register_template(ref) -> None:
    name, module, func = ref
    if name in TEMPLATES:
        return
    if module and module != "__main__":
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    if name not in TEMPLATES and func is not None:
        template(name)(func)
    if name not in TEMPLATES:
        raise TemplateError(
            f"template {name!r} is not registered on worker {_node_name()}: importing "
            f"{module!r} there did not define it (install the same tecomp and the module "
            f"defining the template on every worker)"
        )


def _send(fd: int, payload) -> None:
    data = pickle.dumps(payload)
    view = memoryview(len(data).to_bytes(8, "little") + data)
    while view:
        view = view[os.write(fd, view):]


def _recv(fd: int, deadline: float | None = None):
    """One length-prefixed pickle from ``fd``; EOFError when the writer is gone,
    TimeoutError past ``deadline`` (monotonic seconds)."""
    buf = b""
    need = 8
    size = None
    while len(buf) < need:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not select.select([fd], [], [], left)[0]:
                continue
        chunk = os.read(fd, max(need - len(buf), 1 << 16))
        if not chunk:
            raise EOFError
        buf += chunk
        if size is None and len(buf) >= 8:
            size = int.from_bytes(buf[:8], "little")
            need = 8 + size
    return pickle.loads(buf[8:need])


def _child_loop(jobs: int, replies: int) -> None:
    """The body of a forked build process: run jobs until its parent closes the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            fn, args = _recv(jobs)
        except (EOFError, OSError):
            return
        try:
            payload = ("ok", fn(*args))
        except BaseException as err:  # noqa: BLE001 - everything goes to the parent
            payload = ("err", _short(err))
        try:
            _send(replies, payload)
        except Exception:  # noqa: BLE001 - e.g. an unpicklable result
            _send(replies, ("err", "the build process could not send its result"))


class _ForkedProcess:
    """A process forked from this worker that runs one job at a time (as ``ForkPool``'s
    workers do); a job past its timeout, or one that kills it, costs the process, which
    the next job replaces. ``os.fork``, not multiprocessing: a Dask worker is a daemonic
    process, which multiprocessing does not let have children. Jobs travel with
    cloudpickle, so a template registered on this worker after the fork (a function of the
    user's script) reaches the child with the job."""

    def __init__(self):
        jobs_r, jobs_w = os.pipe()
        replies_r, replies_w = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork in a threaded process
            pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 0
            try:
                os.close(jobs_w)
                os.close(replies_r)
                # A candidate that crashes the compiler is a recorded trial, not a stack
                # dump in the worker's log.
                faulthandler.disable()
                for fd in list(_HELD_FDS):
                    with contextlib.suppress(OSError):
                        os.close(fd)
                _child_loop(jobs_r, replies_w)
            except BaseException:  # noqa: BLE001
                code = 1
            finally:
                os._exit(code)
        os.close(jobs_r)
        os.close(replies_w)
        self.pid, self.jobs, self.replies = pid, jobs_w, replies_r

    def call(self, fn, args, timeout: float) -> tuple:
        """``("ok", value)``, ``("err", text)``, ``("timeout", text)`` or
        ``("crash", text)``; after the last two the process is gone (``alive`` False)."""
        import cloudpickle

        try:
            view = memoryview(cloudpickle.dumps((fn, args)))
            view = memoryview(len(view).to_bytes(8, "little") + view.tobytes())
            while view:
                view = view[os.write(self.jobs, view):]
            return _recv(self.replies, time.monotonic() + timeout)
        except TimeoutError:
            self.close()
            return ("timeout", f"exceeded {timeout:g} s")
        except (EOFError, OSError):
            return ("crash", self.close())

    @property
    def alive(self) -> bool:
        return self.pid is not None

    def close(self) -> str:
        """Stop the process; how it ended, as ``ForkPool`` words it."""
        if self.pid is None:
            return ""
        for fd in (self.jobs, self.replies):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        try:
            _, status = os.waitpid(self.pid, 0)
        except OSError:
            status = 0
        self.pid = None
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) != signal.SIGKILL:
            return _exit_text(-os.WTERMSIG(status))
        return _exit_text(os.WEXITSTATUS(status) if os.WIFEXITED(status) else None)


_IDLE: list = []  # forked build processes not running a job


def _in_fork(fn, args, timeout: float) -> tuple:
    """Run ``fn(*args)`` in one of this worker's forked build processes (one per thread
    that builds at once, kept between jobs so each forks once, not per build)."""
    with _WORKER_LOCK:
        proc = _IDLE.pop() if _IDLE else None
    if proc is None:
        with _IMPORT_OR_FORK_LOCK:
            proc = _ForkedProcess()
    result = proc.call(fn, args, timeout)
    if proc.alive:
        with _WORKER_LOCK:
            _IDLE.append(proc)
    return result


def _build_child(ref, name, args, target, index, out_dir, build_func):
    _ensure_template(ref)
    path, specs, err, msg, cost = _build_candidate(name, args, target, index, out_dir,
                                                   build_func)
    blob = b""
    if path:
        with open(path, "rb") as f:
            blob = f.read()
        with contextlib.suppress(OSError):
            os.unlink(path)
    return (blob, tuple(specs), err, msg, cost)


def _build_reply(blob=b"", specs=(), error_no=MeasureErrorNo.NO_ERROR, msg="", cost=0.0):
    return {"blob": blob, "specs": tuple(specs), "error_no": int(error_no), "error_msg": msg,
            "time_cost": float(cost)}


def _build_on_worker(ref, name, args, target, index, workload_hash, timeout, build_func):
    """A Dask task: build config ``index`` in a forked child; the shared object's bytes
    (or the error) are the task's result."""
    t0 = time.perf_counter()
    try:
        with _IMPORT_OR_FORK_LOCK:
            _ensure_template(ref)
            task = _worker_task(name, args, target)
            task.config_space  # noqa: B018 - collected here, once per worker, not per fork
            here = task.workload_hash
    except Exception as err:  # noqa: BLE001
        return _build_reply(error_no=MeasureErrorNo.INSTANTIATION_ERROR,
                            msg=f"on {_node_name()}: {_short(err)}",
                            cost=time.perf_counter() - t0)
    if here != workload_hash:
        return _build_reply(
            error_no=MeasureErrorNo.INSTANTIATION_ERROR,
            msg=(f"on {_node_name()}: template {name!r} computes something else there "
                 f"(hash {here}, {workload_hash} on the driver); install the same tecomp "
                 f"on every worker"),
            cost=time.perf_counter() - t0)
    status, value = _in_fork(_build_child, (ref, name, args, target, index, _scratch(),
                                            build_func), timeout)
    if status == "ok":
        blob, specs, err, msg, cost = value
        return _build_reply(blob, specs, err, msg, cost)
    if status == "timeout":
        return _build_reply(error_no=MeasureErrorNo.TIMEOUT, msg=f"build {value}",
                            cost=timeout)
    if status == "crash":
        return _build_reply(error_no=MeasureErrorNo.COMPILE_ERROR, msg=f"build {value}",
                            cost=time.perf_counter() - t0)
    return _build_reply(error_no=MeasureErrorNo.UNKNOWN_ERROR, msg=str(value),
                        cost=time.perf_counter() - t0)


def _job_on_worker(ref, fn, args):
    """A Dask task: ``fn(*args)`` after making sure the task's template is registered
    (``DaskBuilder.map``, e.g. the XGBoost tuner's feature extraction)."""
    if ref is not None:
        _ensure_template(ref)
    return fn(*args)


@contextlib.contextmanager
def _machine_lock(enabled: bool):
    """Held while this process measures, when ``enabled``: one measurement per machine
    even where several workers share it. A lock file, so the kernel releases it when a
    worker dies holding it."""
    if not enabled:
        yield
        return
    path = os.path.join(tempfile.gettempdir(), f"tecomp-measure-{os.getuid()}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    _HELD_FDS.add(fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        _HELD_FDS.discard(fd)
        os.close(fd)


def _worker_runner(runner_id: str, make_runner):
    with _WORKER_LOCK:
        entry = _RUNNERS.get(runner_id)
        if entry is None:
            entry = _RUNNERS[runner_id] = (make_runner(), threading.Lock())
        return entry


def _close_runner(runner_id: str) -> bool:
    """Run on every worker by ``DaskRunner.close``: stop its measuring process."""
    with _WORKER_LOCK:
        entry = _RUNNERS.pop(runner_id, None)
    if entry is not None:
        with entry[1]:
            entry[0].close()
    return entry is not None


def _write_candidate(build: dict) -> str:
    path = os.path.join(_scratch(), f"cand_{uuid.uuid4().hex}.so")
    with open(path, "wb") as f:
        f.write(build["blob"])
    return path


def _measure_on_worker(build, runner_id, make_runner, check, one_per_machine):
    """A Dask task on a matching worker: time one built candidate with this worker's
    runner. ``build`` is ``_build_on_worker``'s result (Dask brings it here);
    ``check`` is ``(template ref, name, args, target)`` for ``check_correctness``."""
    now = time.time()
    if build["error_no"]:
        return ((), build["error_no"], build["error_msg"], build["time_cost"], now,
                _node_name())
    t0 = time.perf_counter()
    task = None
    if check is not None:
        ref, name, args, target = check
        try:
            with _IMPORT_OR_FORK_LOCK:
                _ensure_template(ref)
                task = _worker_task(name, args, target)
        except Exception as err:  # noqa: BLE001
            return ((), int(MeasureErrorNo.UNKNOWN_ERROR),
                    f"reference: {_short(err)}", build["time_cost"], now, _node_name())
    path = _write_candidate(build)
    try:
        runner, lock = _worker_runner(runner_id, make_runner)
        with lock, _machine_lock(one_per_machine):
            res = runner.run([MeasureInput(task, None)],
                             [BuildResult(path, tuple(build["specs"]),
                                          time_cost=build["time_cost"])])[0]
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    cost = build["time_cost"] + time.perf_counter() - t0
    return (tuple(res.costs), int(res.error_no), res.error_msg, cost, res.timestamp or now,
            _node_name())


def _remeasure_on_worker(builds, runner_id, make_runner, rounds, one_per_machine):
    """A Dask task on a matching worker: time the built candidates interleaved; one list
    of seconds per candidate, or None."""
    if any(b["error_no"] for b in builds):
        return None
    paths = [_write_candidate(b) for b in builds]
    try:
        runner, lock = _worker_runner(runner_id, make_runner)
        with lock, _machine_lock(one_per_machine):
            return runner.remeasure([BuildResult(p, tuple(b["specs"]))
                                     for p, b in zip(paths, builds)], rounds=rounds)
    finally:
        for p in paths:
            with contextlib.suppress(OSError):
                os.unlink(p)


def _node_report() -> dict:
    """Run on every worker when no worker matches a target: what it could measure."""
    try:
        return {"keys": node_keys()}
    except Exception as err:  # noqa: BLE001
        return {"keys": [], "error": _short(err)}


# ---- on the driver -------------------------------------------------------------------------


def _workers(client) -> dict:
    return client.scheduler_info(n_workers=-1).get("workers", {})


def _lost_text(err) -> str:
    name = type(err).__name__
    if name == "KilledWorker":
        return f"lost: the workers running it died ({_short(err, 300)})"
    if name == "CancelledError":
        return "cancelled: no worker could take it"
    return f"on the cluster: {_short(err)}"


class DaskBuilder:
    """Builds candidates as Dask tasks on the workers of ``client``'s cluster.

    Any worker builds for any target (the task's target travels spelled out, see
    ``portable_target``); each build runs in a child forked from the worker, so a build
    that hangs past ``timeout`` or crashes the compiler costs one trial. The built shared
    object is the task's result: paired with a ``DaskRunner`` (``measure_option`` pairs
    them) it goes from the building worker to the measuring one as task data, without
    passing the driver; paired with a local runner the driver fetches it into a temporary
    folder.

    Parameters
    ----------
    client : distributed.Client
        A client of the cluster (``distributed.Client("tcp://HOST:8786")``, or a
        cluster object's ``get_client()``); it stays open (its owner closes it).
    timeout : float, optional
        Seconds one build may take on a worker.
    build_func : callable, optional
        As ``LocalBuilder``'s: ``f(sch, tensors, target, out_dir, index) -> path``,
        run on the worker (it must be importable there or defined in the script).
    resources : dict, optional
        Dask resources a build asks for, e.g. ``{"tecomp-build": 1}`` to keep builds
        off the measuring machines (default: none, any worker builds).

    Examples
    --------
    >>> client = distributed.Client("tcp://10.0.0.1:8786")              # doctest: +SKIP
    >>> option = autotune.measure_option(builder=autotune.DaskBuilder(client),
    ...                                  runner=autotune.DaskRunner(client))
    """

    def __init__(self, client, timeout: float = 10.0, build_func=None, resources=None):
        _distributed()
        self.client = client
        self.timeout = float(timeout)
        self.build_func = build_func
        self.resources = dict(resources) if resources else None
        self._lazy = False
        self._live: dict = {}       # "dask:<key>" -> build future
        self._tasks: dict = {}      # (name, args, target) -> (ref, portable target, hash)
        self._refs: dict = {}       # template name -> ref (for map)
        self._dir = None

    @property
    def n_parallel(self) -> int:
        """Workers in the cluster now (how many jobs ``map`` spreads work over)."""
        return max(1, len(_workers(self.client)))

    def bind_runner(self, runner) -> None:
        """Called by ``measure_option``: with a ``DaskRunner`` builds stay on the cluster
        (results are futures), with any other runner they are fetched to local files."""
        self._lazy = isinstance(runner, DaskRunner)

    def _task_info(self, task) -> tuple:
        key = (task.name, task.args, str(task.target))
        info = self._tasks.get(key)
        if info is None:
            ref = _template_ref(task)
            info = self._tasks[key] = (ref, portable_target(task.target), task.workload_hash)
            self._refs[task.name] = ref
        return info

    def submit(self, inputs: list[MeasureInput]) -> list:
        """The build futures of ``inputs`` (one Dask task each), in order."""
        refs, names, args, targets, indices, hashes = [], [], [], [], [], []
        for inp in inputs:
            ref, target, whash = self._task_info(inp.task)
            refs.append(ref)
            names.append(inp.task.name)
            args.append(inp.task.args)
            targets.append(target)
            indices.append(int(inp.config.index))
            hashes.append(whash)
        n = len(inputs)
        return self.client.map(_build_on_worker, refs, names, args, targets, indices, hashes,
                               [self.timeout] * n, [self.build_func] * n, pure=False,
                               resources=self.resources,
                               key=[f"tecomp-build-{uuid.uuid4().hex}" for _ in range(n)])

    def build(self, inputs: list[MeasureInput]) -> list[BuildResult]:
        """Build ``inputs`` on the cluster; see the class docstring for what comes back."""
        futures = self.submit(inputs)
        if self._lazy:
            out = []
            for inp, f in zip(inputs, futures):
                resource = task_resource(inp.task.target)
                name = f"dask:{f.key}"
                self._live[name] = f
                out.append(BuildResult(name, extra={"future": f, "resource": resource}))
            return out
        return [self._to_file(reply) for reply in _gather_all(self.client, futures)]

    def _to_file(self, reply) -> BuildResult:
        if isinstance(reply, BaseException):
            return BuildResult(None, (), MeasureErrorNo.COMPILE_ERROR,
                               f"build {_lost_text(reply)}")
        if reply["error_no"]:
            return BuildResult(None, reply["specs"], MeasureErrorNo(reply["error_no"]),
                               reply["error_msg"], reply["time_cost"])
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="tecomp_dask_build_")
        path = os.path.join(self._dir, f"cand_{uuid.uuid4().hex}.so")
        with open(path, "wb") as f:
            f.write(reply["blob"])
        return BuildResult(path, reply["specs"], time_cost=reply["time_cost"])

    def map(self, fn, arg_list, timeout=None):
        """Run ``fn(*args)`` for each args on the cluster (as ``LocalBuilder.map`` runs it
        on the build workers); one ``("ok", value)`` / ``("err", text)`` per job. A job
        whose first argument names a template this builder has built registers it on
        the worker first."""
        refs = [self._refs.get(a[0]) if a and isinstance(a[0], str) else None
                for a in arg_list]
        futures = self.client.map(_job_on_worker, refs, [fn] * len(arg_list), arg_list,
                                  pure=False, resources=self.resources)
        out = []
        for value in _gather_all(self.client, futures):
            out.append(("err", _lost_text(value)) if isinstance(value, BaseException)
                       else ("ok", value))
        return out

    def remove(self, path) -> None:
        """Forget a built candidate: its bytes leave the cluster (or the local file goes)."""
        if not path:
            return
        future = self._live.pop(path, None)
        if future is not None:
            future.release()
        elif self._dir and str(path).startswith(self._dir):
            with contextlib.suppress(OSError):
                os.unlink(path)

    def close(self) -> None:
        """Cancel builds still on the cluster and remove local files; the client stays
        open."""
        live, self._live = list(self._live.values()), {}
        if live:
            with contextlib.suppress(Exception):
                self.client.cancel(live)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _gather_all(client, futures) -> list:
    """Each future's result, or its exception, in order (waiting for all)."""
    distributed = _distributed()
    if not futures:
        return []
    distributed.wait(futures)
    return _results(client, futures)


def _results(client, futures) -> list:
    ok = [f for f in futures if f.status == "finished"]
    values = dict(zip((f.key for f in ok), client.gather(ok))) if ok else {}
    out = []
    for f in futures:
        if f.key in values:
            out.append(values[f.key])
        else:
            try:
                err = f.exception(timeout=5)
            except Exception as e:  # noqa: BLE001 - cancelled futures raise here
                err = e
            out.append(err if err is not None else RuntimeError(f"task {f.status}"))
    return out


class DaskRunner:
    """Times candidates on the workers of a Dask cluster that advertise the task's
    target (see the module docstring), one at a time per worker, each in that worker's
    own ``LocalRunner`` with the settings given here.

    Before the first trial of a target it checks that some worker advertises it and
    raises ``ClusterError`` naming what the workers measure otherwise.

    Parameters
    ----------
    client : distributed.Client
        A client of the cluster; it stays open (its owner closes it).
    number, repeat, min_repeat_ms, timeout, warmup_ms, enable_cpu_cache_flush, \
check_correctness
        As ``LocalRunner``'s, for the runner each measuring worker starts.
    one_per_machine : bool, optional
        Serialise the measurements of workers that share a machine (a lock file): one
        timed candidate per machine. Turn it off only for workers that stand in for
        separate machines (tests, simulations).
    node_wait : float, optional
        Seconds a trial waits while no worker of its target is in the cluster before it
        is recorded as a RUNTIME_ERROR.
    make_runner : callable, optional
        ``make_runner() -> runner`` run once on each measuring worker, replacing the
        ``LocalRunner`` (e.g. a stand-in that sleeps, to simulate a cluster).
    """

    def __init__(self, client, number: int = 4, repeat: int = 3, min_repeat_ms: float = 0.0,
                 timeout: float = 10.0, warmup_ms: float = 100.0,
                 enable_cpu_cache_flush: bool = False, check_correctness: bool = False,
                 one_per_machine: bool = True, node_wait: float = 60.0, make_runner=None):
        _distributed()
        self.client = client
        self.timeout = float(timeout)
        self.check_correctness = bool(check_correctness)
        self.one_per_machine = bool(one_per_machine)
        self.node_wait = float(node_wait)
        self.make_runner = make_runner or functools.partial(
            LocalRunner, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
            timeout=timeout, warmup_ms=warmup_ms,
            enable_cpu_cache_flush=enable_cpu_cache_flush,
            check_correctness=check_correctness)
        self._id = uuid.uuid4().hex
        self._checked: set = set()
        self._pending: set = set()

    # -- which workers ---------------------------------------------------------------------

    def nodes(self, target) -> list[str]:
        """Addresses of the workers that advertise ``target``'s key now."""
        name = task_resource(target)
        return sorted(addr for addr, w in _workers(self.client).items()
                      if w.get("resources", {}).get(name, 0) >= 1)

    def measure_slots(self, targets) -> int:
        """How many measurements of ``targets`` can run at once: the workers that
        advertise any of them (a ``TaskScheduler`` keeps that many busy)."""
        names = {task_resource(t) for t in targets}
        return sum(1 for w in _workers(self.client).values()
                   if any(w.get("resources", {}).get(n, 0) >= 1 for n in names))

    def check_target(self, target) -> int:
        """The number of workers that measure ``target``.

        Raises
        ------
        ClusterError
            If none does: the message names the target's key and what the cluster's
            workers measure.
        """
        key = target_key(target)
        nodes = self.nodes(target)
        if nodes:
            self._checked.add(key)
            return len(nodes)
        raise ClusterError(self._mismatch(target, key))

    def _mismatch(self, target, key) -> str:
        workers = _workers(self.client)
        head = (f"no worker of the Dask cluster at {self.client.scheduler.address} measures "
                f"target {target} (key {key!r}, resource {resource_name(key)})")
        if not workers:
            return head + "; the cluster has no workers"
        try:
            reports = self.client.run(_node_report, on_error="return")
        except Exception:  # noqa: BLE001
            reports = {}
        have: dict = {}
        plain = []
        for addr, w in sorted(workers.items()):
            resources = w.get("resources", {})
            rep = reports.get(addr)
            keys = rep.get("keys", []) if isinstance(rep, dict) else []
            advertised = [k for k in keys if resources.get(resource_name(k), 0) >= 1]
            if advertised:
                have.setdefault(advertised[0], []).append(addr)
            elif RESOURCE in resources:
                have.setdefault("(keys not readable: " + ", ".join(
                    sorted(n for n in resources if n.startswith(RESOURCE + "-"))) + ")",
                    []).append(addr)
            else:
                plain.append(addr)
        parts = [f"{k!r} ({len(a)} worker{'s' * (len(a) != 1)})" for k, a in have.items()]
        if plain:
            parts.append(f"nothing: {len(plain)} worker{'s' * (len(plain) != 1)} without "
                         f"the {RESOURCE} resource")
        return (head + "; its workers measure: " + "; ".join(parts) + ". Tune for one of "
                "those keys (--target with its -mcpu and -mattr), or start workers on a "
                "matching machine with --resources \"$(tecomp dask-worker-resources)\"")

    # -- measuring -------------------------------------------------------------------------

    def _submit_one(self, inp, build, resource):
        check = None
        if self.check_correctness:
            check = (_template_ref(inp.task), inp.task.name, inp.task.args,
                     portable_target(inp.task.target))
        return self.client.submit(_measure_on_worker, build, self._id, self.make_runner,
                                  check, self.one_per_machine, resources={resource: 1},
                                  pure=False, key=f"tecomp-measure-{uuid.uuid4().hex}")

    @staticmethod
    def _payload(b: BuildResult):
        """What a measuring task takes: the build's future, or a local build's bytes."""
        future = (b.extra or {}).get("future")
        if future is not None:
            return future
        with open(b.filename, "rb") as f:
            blob = f.read()
        return _build_reply(blob, b.specs, b.error_no, b.error_msg, b.time_cost)

    def run(self, inputs: list[MeasureInput], builds: list[BuildResult]) -> list[MeasureResult]:
        """Measure each built candidate on a matching worker; one result per input, in
        order. Raises ``ClusterError`` (nothing measured) if no worker measures a
        target not checked before."""
        for inp in inputs:
            if target_key(inp.task.target) not in self._checked:
                self.check_target(inp.task.target)
        out: list = [None] * len(inputs)
        futures, where = [], []
        for i, (inp, b) in enumerate(zip(inputs, builds)):
            if b.error_no != MeasureErrorNo.NO_ERROR and not (b.extra or {}).get("future"):
                out[i] = MeasureResult((), b.error_no, b.error_msg, b.time_cost, time.time())
                continue
            futures.append(self._submit_one(inp, self._payload(b),
                                            task_resource(inp.task.target)))
            where.append(i)
        targets = {task_resource(inp.task.target) for inp in inputs}
        for i, value in zip(where, self._wait(futures, targets)):
            if isinstance(value, BaseException):
                out[i] = MeasureResult((), MeasureErrorNo.RUNTIME_ERROR, _lost_text(value),
                                       0.0, time.time())
            else:
                costs, error_no, msg, cost, stamp, _node = value
                out[i] = MeasureResult(tuple(costs), MeasureErrorNo(error_no), msg, cost,
                                       stamp)
        return out

    def _wait(self, futures, resources) -> list:
        """Results (or exceptions) of ``futures``, waiting as long as some worker can run
        them; after ``node_wait`` seconds with none, the rest are cancelled."""
        distributed = _distributed()
        if not futures:
            return []
        self._pending.update(futures)
        orphaned_since = None
        try:
            while True:
                try:
                    distributed.wait(futures, timeout=2.0)
                    break
                except (TimeoutError, distributed.TimeoutError):
                    pass
                alive = any(w.get("resources", {}).get(n, 0) >= 1
                            for w in _workers(self.client).values() for n in resources)
                if alive:
                    orphaned_since = None
                    continue
                orphaned_since = orphaned_since or time.monotonic()
                if time.monotonic() - orphaned_since >= self.node_wait:
                    self.client.cancel([f for f in futures if not f.done()])
                    break
            return _results(self.client, futures)
        finally:
            self._pending.difference_update(futures)

    def remeasure(self, builds: list[BuildResult], rounds: int = 5) -> list[list[float]] | None:
        """Time the candidates interleaved on one matching worker (all of a task's final
        candidates on the same machine, so their samples compare); None on a failure."""
        if not builds:
            return None
        resources = {(b.extra or {}).get("resource") for b in builds}
        if None in resources and len(self._checked) == 1:
            # Local builds do not say their target: the one target measured so far.
            resources = {resource_name(next(iter(self._checked)))}
        if len(resources) != 1 or None in resources:
            return None
        resource = resources.pop()
        payload = [self._payload(b) for b in builds]
        fut = self.client.submit(_remeasure_on_worker, payload, self._id, self.make_runner,
                                 int(rounds), self.one_per_machine, resources={resource: 1},
                                 pure=False, key=f"tecomp-remeasure-{uuid.uuid4().hex}")
        value = self._wait([fut], {resource})[0]
        return None if isinstance(value, BaseException) else value

    def close(self) -> None:
        """Cancel measurements still running and stop the measuring processes this runner
        started on the workers; the client stays open."""
        pending, self._pending = list(self._pending), set()
        with contextlib.suppress(Exception):
            if pending:
                self.client.cancel(pending)
            self.client.run(_close_runner, self._id, on_error="ignore")
