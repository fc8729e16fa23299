"""How many threads tecomp's parallel loops use, and how their idle threads wait.

A parallel loop of generated code is one libgomp parallel region started with no thread
count of its own (``GOMP_parallel(fn, data, 0, 0)``), so libgomp takes the count from its
``nthreads`` setting. libgomp keeps that setting *per OS thread*: ``omp_set_num_threads``
changes it only for the thread that calls it, and a thread that never called it reads
the value libgomp took from ``OMP_NUM_THREADS`` when it loaded. A process-wide count that
holds for calls from every thread is therefore kept here, and each thread that calls a
kernel brings its own libgomp setting up to date before the call
(:func:`apply_to_calling_thread`, called by ``PackedFunction`` for every call; it costs
one comparison when nothing changed).

The count comes from :func:`set_num_threads`, else from ``TECOMP_NUM_THREADS``, else
libgomp's own default (``OMP_NUM_THREADS``, else every core this process may run on).
:func:`set_num_threads` also writes ``TECOMP_NUM_THREADS`` into the environment, so the
processes tecomp starts afterwards (the autotuner's measuring process, runners) use it.

How idle threads wait is read by libgomp once, when it loads, from ``OMP_WAIT_POLICY``
and ``GOMP_SPINCOUNT``. Its default spins for up to about a millisecond before sleeping;
when another process holds a core, a spinning thread burns its time slice while the
thread its region waits for sits in the run queue, and every kernel pays a scheduler tick
(docs/measuring.md). Importing this module therefore sets a short spin
(:data:`SPIN_COUNT`) before anything of tecomp loads libgomp, unless the user set either
variable.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading

from .system_libs import libgomp_path

#: The environment variable of the thread count, as ``OMP_NUM_THREADS`` is OpenMP's.
ENV_VAR = "TECOMP_NUM_THREADS"

#: libgomp's spin count before an idle thread sleeps, set unless the user chose a wait
#: policy. Its default (300000, about a millisecond) keeps threads awake between kernels
#: on a machine to itself but waits out a scheduler tick per region when another process
#: holds a core; 1000 iterations (tens of microseconds) still bridge the gap between two
#: kernels of a model and yield the core quickly under load; sleeping at once
#: (``OMP_WAIT_POLICY=PASSIVE``) pays a wake-up per region even on an idle machine. The
#: trade-off, measured, is in docs/measuring.md.
SPIN_COUNT = 1000

_WAIT_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def _libgomp_loaded() -> bool:
    """Whether libgomp is mapped into this process already (another library, such as
    xgboost or torch, may have loaded it before tecomp)."""
    try:
        with open("/proc/self/maps") as fh:
            return "libgomp" in fh.read()
    except OSError:
        return False


def _wait_policy_origin() -> str:
    """Set libgomp's wait policy unless the user did; say who decided it."""
    if any(v in os.environ for v in _WAIT_VARS):
        return "user"
    if _libgomp_loaded():
        return "libgomp's default (libgomp was loaded before tecomp could set it)"
    os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    return "tecomp"


_WAIT_POLICY_ORIGIN = _wait_policy_origin()


def wait_policy() -> str:
    """How libgomp's idle threads wait in this process, and who chose it.

    Examples
    --------
    >>> wait_policy()   # doctest: +SKIP
    'GOMP_SPINCOUNT=1000 (set by tecomp)'
    """
    chosen = [f"{v}={os.environ[v]}" for v in _WAIT_VARS if v in os.environ]
    if _WAIT_POLICY_ORIGIN == "user":
        return f"{' '.join(chosen)} (set by the user)"
    if _WAIT_POLICY_ORIGIN == "tecomp":
        return f"{' '.join(chosen)} (set by tecomp)"
    return _WAIT_POLICY_ORIGIN


def _parse_count(value: str, source: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{source}={value!r} is not a thread count: use a positive integer")
    return n


class _Setting:
    """The process-wide count (None: libgomp's default) and its generation, bumped on
    each change so that threads notice they are out of date."""

    def __init__(self):
        self.lock = threading.Lock()
        self.count: int | None = None
        self.source = ""
        self.generation = 0
        self.read_environment = False

    def current(self) -> tuple:
        """(count, generation), reading ``TECOMP_NUM_THREADS`` on first use."""
        if not self.read_environment:
            with self.lock:
                if not self.read_environment:
                    value = os.environ.get(ENV_VAR)
                    if value is not None:
                        self.count = _parse_count(value, ENV_VAR)
                        self.source = ENV_VAR
                        self.generation += 1
                    self.read_environment = True
        return self.count, self.generation


_SETTING = _Setting()


class _Applied(threading.local):
    generation = 0  # the generation this OS thread's libgomp setting reflects


_APPLIED = _Applied()


@functools.cache
def _omp_set_num_threads():
    """libgomp's ``omp_set_num_threads``, or None without libgomp."""
    path = libgomp_path()
    if path is None:
        return None
    fn = ctypes.CDLL(path).omp_set_num_threads
    fn.argtypes, fn.restype = [ctypes.c_int], None
    return fn


def apply_to_calling_thread() -> None:
    """Give the calling thread's libgomp setting the process-wide thread count.

    Called before every kernel call; a no-op (one comparison) while the count has not
    changed since this thread last applied it, or when no count was chosen.
    """
    count, generation = _SETTING.current()
    if _APPLIED.generation == generation:
        return
    if count is not None:
        omp_set_num_threads = _omp_set_num_threads()
        if omp_set_num_threads is not None:
            omp_set_num_threads(count)
    _APPLIED.generation = generation


def set_num_threads(n: int) -> None:
    """Use ``n`` threads in every parallel loop tecomp runs, from any thread.

    Like ``torch.set_num_threads``; takes precedence over ``TECOMP_NUM_THREADS`` and
    ``OMP_NUM_THREADS``. Processes started afterwards inherit it (it is written to
    ``TECOMP_NUM_THREADS``).

    Parameters
    ----------
    n : int
        The number of threads, at least 1.

    Raises
    ------
    ValueError
        When ``n`` is not a positive integer.

    Examples
    --------
    >>> tecomp.runtime.set_num_threads(2)   # doctest: +SKIP
    >>> tecomp.runtime.get_num_threads()    # doctest: +SKIP
    2
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: n must be a positive integer, got {n!r}")
    with _SETTING.lock:
        _SETTING.read_environment = True  # this call replaces TECOMP_NUM_THREADS
        _SETTING.count = n
        _SETTING.source = "set_num_threads"
        _SETTING.generation += 1
        os.environ[ENV_VAR] = str(n)
    apply_to_calling_thread()


def _default_count() -> tuple:
    """libgomp's own count when tecomp sets none, and where it comes from."""
    omp = os.environ.get("OMP_NUM_THREADS", "").split(",")[0]
    if omp.strip():
        return _parse_count(omp, "OMP_NUM_THREADS"), "OMP_NUM_THREADS"
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity masks on this platform
        cores = os.cpu_count() or 1
    return cores, "default: every core"


def get_num_threads() -> int:
    """The number of threads tecomp's parallel loops use.

    Examples
    --------
    >>> tecomp.runtime.get_num_threads()   # doctest: +SKIP
    2
    """
    return thread_count_source()[0]


def thread_count_source() -> tuple:
    """(count, where it comes from): ``set_num_threads``, ``TECOMP_NUM_THREADS``,
    ``OMP_NUM_THREADS`` or the default of every core."""
    count, _ = _SETTING.current()
    if count is None:
        return _default_count()
    return count, _SETTING.source


def libgomp_environment() -> dict:
    """The variables a program run elsewhere (``tecomp_run`` under qemu or over ssh) needs
    for its parallel loops to run as this process's do: the chosen thread count as
    ``OMP_NUM_THREADS`` (none when libgomp's default applies, as the other machine has
    cores of its own) and the wait policy.

    Examples
    --------
    >>> libgomp_environment()   # doctest: +SKIP
    {'OMP_NUM_THREADS': '2', 'GOMP_SPINCOUNT': '1000'}
    """
    count, _ = _SETTING.current()
    env = {} if count is None else {"OMP_NUM_THREADS": str(count)}
    env.update({v: os.environ[v] for v in _WAIT_VARS if v in os.environ})
    return env
