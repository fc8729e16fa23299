"""How many threads tecomp's parallel loops use.

A parallel loop of generated code runs on tecomp's own thread pool
(``tecomp.codegen.llvm.thread_pool``): one per process for JIT-compiled code, and one in
each exported library. A pool reads its team size once, from ``TECOMP_NUM_THREADS``, else
``OMP_NUM_THREADS``, else the number of cores the process may run on; the count chosen
here (:func:`set_num_threads`) is pushed into every pool this process knows
(:func:`attach_pool`), so it holds for calls from every Python thread at no cost per call.
:func:`set_num_threads` also writes ``TECOMP_NUM_THREADS`` into the environment, so the
processes tecomp starts afterwards (the autotuner's measuring process, runners) use it.

A pool's workers do not survive ``fork``: the child process forgets them before anything
else runs (``os.register_at_fork``) and starts its own on its first parallel loop.
"""

from __future__ import annotations

import ctypes
import os
import threading

#: The environment variable of the thread count, as ``OMP_NUM_THREADS`` is OpenMP's.
ENV_VAR = "TECOMP_NUM_THREADS"

_SET_COUNT = ctypes.CFUNCTYPE(None, ctypes.c_int32)
_AFTER_FORK = ctypes.CFUNCTYPE(None)


def _parse_count(value: str, source: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{source}={value!r} is not a thread count: use a positive integer")
    return n


class _Setting:
    """The process-wide count (None: each pool's own default) and the pools it goes to."""

    def __init__(self):
        self.lock = threading.Lock()
        self.count: int | None = None
        self.source = ""
        self.read_environment = False
        self.pools: list = []  # (set count, after fork) of every pool in this process

    def current(self) -> int | None:
        """The chosen count, reading ``TECOMP_NUM_THREADS`` on first use."""
        if not self.read_environment:
            with self.lock:
                if not self.read_environment:
                    value = os.environ.get(ENV_VAR)
                    if value is not None:
                        self.count = _parse_count(value, ENV_VAR)
                        self.source = ENV_VAR
                    self.read_environment = True
        return self.count


_SETTING = _Setting()


def attach_pool(set_count_address: int, after_fork_address: int) -> None:
    """Let the count chosen in this process reach a thread pool: its entry points
    ``tecomp.set_num_threads`` and ``tecomp.pool_after_fork`` (the JIT's pool, or an
    exported library's as it is loaded)."""
    pool = (_SET_COUNT(set_count_address), _AFTER_FORK(after_fork_address))
    count = _SETTING.current()
    with _SETTING.lock:
        _SETTING.pools.append(pool)
        if count is not None:
            pool[0](count)


def _forget_workers() -> None:
    for _, after_fork in _SETTING.pools:
        after_fork()


os.register_at_fork(after_in_child=_forget_workers)


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
        os.environ[ENV_VAR] = str(n)
        for set_count, _ in _SETTING.pools:
            set_count(n)


def _default_count() -> tuple:
    """A pool's own count when tecomp sets none, and where it comes from."""
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
    count = _SETTING.current()
    if count is None:
        return _default_count()
    return count, _SETTING.source


def thread_environment() -> dict:
    """The variables a program run elsewhere (``tecomp_run`` under qemu or over ssh) needs
    for its parallel loops to run as this process's do: the chosen thread count (none
    when the default applies, as the other machine has cores of its own).

    Examples
    --------
    >>> thread_environment()   # doctest: +SKIP
    {'TECOMP_NUM_THREADS': '2'}
    """
    count = _SETTING.current()
    return {} if count is None else {ENV_VAR: str(count)}
