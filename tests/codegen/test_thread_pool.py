"""tecomp's thread pool: every iteration of a parallel loop runs exactly once whatever the
extent and the team, from one caller or several at once, after ``fork``, and in an
exported library (which carries a pool of its own)."""

import shutil
import subprocess
import sys
import textwrap
import threading

import time

import numpy as np
import pytest
from cg_helpers import buf, build, ld, loop
from hypothesis import given, settings
from hypothesis import strategies as st

import tecomp
from tecomp.codegen.llvm.parallel import SERIAL_WORK
from tecomp.codegen.llvm.thread_pool import thread_pool_ir
from tecomp.ir import FloatImm, PrimFunc, Store, Var
from tecomp.runtime import threads

pytestmark = pytest.mark.usefixtures("needs_llvm")


#: Increments of one iteration of :func:`_count_up`: enough work that a loop of one
#: iteration takes the pool (a smaller loop runs on the calling thread alone).
ROUNDS = SERIAL_WORK


def _count_up(extent):
    """C[i] += ROUNDS over a parallel loop, one at a time: an iteration run twice, or not
    at all, shows."""
    c = buf("C", (extent,), "int32")
    i, j = Var("i"), Var("j")
    return PrimFunc("up", (c,), loop(i, extent, loop(j, ROUNDS, Store(c, ld(c, i) + 1, i)),
                                     "parallel"))


@pytest.fixture
def restore_count():
    before = threads.get_num_threads()
    yield
    threads.set_num_threads(before)


@pytest.mark.usefixtures("restore_count")
@pytest.mark.parametrize("extent", [1, 2, 3, 5, 7, 9, 64, 1001])
def test_every_iteration_runs_once_for_any_team(extent):
    mod = build(_count_up(extent))
    c = np.zeros(extent, np.int32)
    for count in (2, 3, 5, 1):  # more threads than chunks, than cores, and none
        tecomp.runtime.set_num_threads(count)
        mod(c)
    np.testing.assert_array_equal(c, np.full(extent, 4 * ROUNDS, np.int32))


@pytest.mark.parametrize("n", [1, 3, 4, 40000])
def test_a_run_time_extent_of_no_iterations_runs_nothing(n):
    """A parallel loop over n - 3 rows: none (or a negative count) for n <= 3."""
    nv = Var("n")
    c = buf("C", (nv,))
    i = Var("i")
    mod = build(PrimFunc("tail", (c,), loop(i, nv - 3, Store(c, FloatImm(1.0), i + 3),
                                            "parallel")))
    out = np.zeros(n, np.float32)
    mod(out)
    np.testing.assert_array_equal(out, (np.arange(n) >= 3).astype(np.float32))


@pytest.fixture(scope="module")
def rows_up():
    """C[i, j] += 1 over n rows of 64, the rows a parallel loop of run-time size (64
    stores a row: from 256 rows on a run takes the pool's team, below it one thread)."""
    n = Var("n")
    c = buf("C", (n, 64))
    i, j = Var("i"), Var("j")
    body = loop(i, n, loop(j, 64, Store(c, ld(c, i * 64 + j) + FloatImm(1.0), i * 64 + j)),
                "parallel")
    return build(PrimFunc("rows_up", (c,), body))


@pytest.mark.usefixtures("restore_count")
@settings(max_examples=40, deadline=None)
@given(rows=st.integers(0, 1500), count=st.integers(1, 6), calls=st.integers(1, 3))
def test_every_row_runs_once_per_call(rows_up, rows, count, calls):
    tecomp.runtime.set_num_threads(count)
    c = np.zeros((rows, 64), np.float32)
    for _ in range(calls):
        rows_up(c)
    np.testing.assert_array_equal(c, np.full((rows, 64), calls, np.float32))


@pytest.mark.usefixtures("restore_count")
def test_workers_asleep_after_an_idle_gap_wake_for_the_next_loop(rows_up):
    tecomp.runtime.set_num_threads(3)
    c = np.zeros((2000, 64), np.float32)
    for gap in (0.0, 0.02, 0.0, 0.05):  # long enough for idle workers to sleep
        time.sleep(gap)
        rows_up(c)
    np.testing.assert_array_equal(c, np.full((2000, 64), 4.0, np.float32))


def test_calls_from_several_threads_at_once_each_run_whole():
    """One call owns the pool; the others run their loops alone, meanwhile."""
    mod = build(_count_up(1001))
    outs = [np.zeros(1001, np.int32) for _ in range(4)]

    def caller(c):
        for _ in range(200):
            mod(c)

    workers = [threading.Thread(target=caller, args=(c,)) for c in outs]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    for c in outs:
        np.testing.assert_array_equal(c, np.full(1001, 200 * ROUNDS, np.int32))


def test_a_forked_child_starts_workers_of_its_own():
    """The child of a process whose pool has workers runs its loops on new ones (the
    parent's do not exist there), and the parent's pool still works afterwards."""
    script = textwrap.dedent("""
        import os, sys
        import numpy as np
        import tecomp
        from tecomp import te

        tecomp.runtime.set_num_threads(3)
        A = te.placeholder((65536,), name="A")  # above SERIAL_WORK: the pool runs it
        B = te.compute((65536,), lambda i: A[i] + 1.0, name="B")
        s = te.create_schedule(B.op)
        s[B].parallel(B.op.axis[0])
        mod = tecomp.build(s, [A, B], target="llvm", name="inc")
        a = np.arange(65536, dtype="float32")
        b = np.zeros_like(a)
        mod(a, b)
        pid = os.fork()
        if pid == 0:
            before = len(os.listdir("/proc/self/task"))
            b[:] = 0
            mod(a, b)
            started = len(os.listdir("/proc/self/task")) - before
            os._exit(0 if (b == a + 1).all() and started == 2 else 1)
        _, status = os.waitpid(pid, 0)
        b[:] = 0
        mod(a, b)
        print(os.waitstatus_to_exitcode(status), bool((b == a + 1).all()))
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["0", "True"]


@pytest.mark.usefixtures("restore_count")
def test_an_exported_library_has_a_pool_that_takes_the_count(tmp_path):
    mod = build(_count_up(1001))
    path = mod.export_library(str(tmp_path / "up.so"))
    pools = len(threads._SETTING.pools)
    lib = tecomp.runtime.load_module(path)
    assert len(threads._SETTING.pools) == pools + 1
    c = np.zeros(1001, np.int32)
    for count in (3, 1, 2):
        tecomp.runtime.set_num_threads(count)
        lib["up"](c)
    np.testing.assert_array_equal(c, np.full(1001, 3 * ROUNDS, np.int32))
    # Its workers run its code, so dlclose must leave it mapped.
    if shutil.which("readelf"):
        dynamic = subprocess.run(["readelf", "-d", path], capture_output=True, text=True,
                                 check=True).stdout
        assert "NODELETE" in dynamic


@pytest.mark.parametrize("arch", ["x86_64", "aarch64", "riscv64"])
def test_the_pool_is_valid_ir_for_each_architecture(arch):
    from tecomp.codegen.llvm.host import llvm_binding

    llvm_binding().parse_assembly(thread_pool_ir(arch)).verify()


def test_an_architecture_without_a_known_futex_is_refused():
    with pytest.raises(ValueError, match="arch must be one of .*got 'mips'"):
        thread_pool_ir("mips")
