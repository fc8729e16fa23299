"""Thread control: TECOMP_NUM_THREADS and set_num_threads set the threads of parallel loops
for calls from every Python thread, observed as the workers the thread pool starts; a
forked child starts workers of its own."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tecomp.runtime import get_num_threads, set_num_threads, threads

# Builds a kernel with a parallel loop, then calls it from fresh Python threads. The
# process's pool starts workers as a team first needs them and keeps them: the threads a
# call adds to the process are the workers a larger team needs beyond those it has.
_PROBE = textwrap.dedent("""
    import json, os, sys, threading
    import numpy as np
    import tecomp
    from tecomp import te

    A = te.placeholder((64, 256), name="A")
    B = te.compute((64, 256), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    mod = tecomp.build(s, [A, B], target="llvm", name="double")
    a = np.ones((64, 256), "float32")
    b = np.empty_like(a)

    def started_threads():
        out = {}
        def caller():
            before = set(os.listdir("/proc/self/task"))
            mod(a, b)
            out["n"] = len(set(os.listdir("/proc/self/task")) - before)
        t = threading.Thread(target=caller)
        t.start()
        t.join()
        return out["n"]

    seen = {"first": started_threads()}
    for n in json.loads(sys.argv[1]):
        tecomp.runtime.set_num_threads(n)
        seen[str(n)] = started_threads()
    assert (b == 2.0).all()
    print(json.dumps(seen))
""")


def _probe(env_count=None, counts=()):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", threads.ENV_VAR)}
    if env_count is not None:
        env[threads.ENV_VAR] = env_count
    res = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(list(counts))], env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.usefixtures("needs_llvm")
def test_environment_count_holds_in_every_thread():
    # 3 on any machine: more than the 2 cores here, fewer than the default elsewhere.
    assert _probe(env_count="3") == {"first": 2}


@pytest.mark.usefixtures("needs_llvm")
def test_set_num_threads_holds_for_calls_from_other_threads():
    seen = _probe(counts=(1, 3, 4, 2))
    first = len(os.sched_getaffinity(0)) - 1  # the default: every core
    # Workers are kept: a team of 3 after one of `first + 1` starts what it lacks.
    assert seen == {"first": first, "1": 0, "3": max(2 - first, 0), "4": max(3 - max(first, 2), 0),
                    "2": 0}


@pytest.fixture
def saved_setting(monkeypatch):
    """Keep the process-wide setting, and the pools' counts, as they were."""
    st = threads._SETTING
    before = (st.count, st.source, st.read_environment)
    monkeypatch.delenv(threads.ENV_VAR, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    yield st
    st.count, st.source, st.read_environment = before
    for set_count, _ in st.pools:
        set_count(before[0] or threads._default_count()[0])


def test_set_num_threads_is_reported_and_exported(saved_setting):
    set_num_threads(3)
    assert get_num_threads() == 3
    assert threads.thread_count_source() == (3, "set_num_threads")
    assert os.environ[threads.ENV_VAR] == "3"  # processes started later use it too


def test_environment_count_is_read_once_and_named(saved_setting, monkeypatch):
    monkeypatch.setenv(threads.ENV_VAR, "5")
    saved_setting.read_environment = False
    saved_setting.count = None
    assert threads.thread_count_source() == (5, threads.ENV_VAR)


def test_default_follows_omp_num_threads_then_the_cores(saved_setting, monkeypatch):
    saved_setting.read_environment = True
    saved_setting.count = None
    assert threads.thread_count_source() == (len(os.sched_getaffinity(0)),
                                             "default: every core")
    monkeypatch.setenv("OMP_NUM_THREADS", "4,2")
    assert threads.thread_count_source() == (4, "OMP_NUM_THREADS")


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2", True, None])
def test_set_num_threads_refuses_what_is_not_a_count(bad):
    with pytest.raises(ValueError, match="set_num_threads: n must be a positive integer"):
        set_num_threads(bad)


@pytest.mark.parametrize("bad", ["0", "two", "", "-1"])
def test_bad_environment_count_names_the_variable(saved_setting, monkeypatch, bad):
    monkeypatch.setenv(threads.ENV_VAR, bad)
    saved_setting.read_environment = False
    with pytest.raises(ValueError, match=f"TECOMP_NUM_THREADS={bad!r} is not a thread count"):
        get_num_threads()


def test_set_num_threads_replaces_a_bad_environment_count(saved_setting, monkeypatch):
    monkeypatch.setenv(threads.ENV_VAR, "many")
    saved_setting.read_environment = False
    set_num_threads(2)
    assert threads.thread_count_source() == (2, "set_num_threads")
