"""The main job on a built-in example: tune a matmul, build the best schedule, run it, and
compare its speed with numpy in the same run.

    tecomp demo [--n 1024] [--trials 64] [--log tuning_logs/demo_matmul.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from . import autotune
from . import topi  # noqa: F401 - registers the built-in matmul template
from .autotune.records import shipped_note
from .build_module import build
from .timing import median_ratio, paired


def run_demo(n: int = 1024, trials: int = 64, log: str | None = None, target: str = "llvm",
             out=print) -> dict:
    """Tune ``matmul`` n x n x n for ``trials`` trials, build the best, check it against
    numpy, and time both in alternation. Returns the figures it printed."""
    log = log or f"tecomp_demo_matmul_{n}.json"
    task = autotune.create_task("matmul", args=(n, n, n, "float32"), target=target)
    out(f"task: {task.name}{task.args}  target: {task.target}")
    out(f"search space: {len(task.config_space)} configurations")
    note = shipped_note(task)
    if note:
        out(note)
    option = autotune.measure_option(
        builder=autotune.LocalBuilder(timeout=20),
        runner=autotune.LocalRunner(number=3, repeat=3, timeout=20),
    )
    tuner = autotune.XGBTuner(task)
    bar = autotune.progress_bar(trials)
    t0 = time.perf_counter()
    wall0 = time.time()
    try:
        tuner.tune(
            n_trial=trials,
            measure_option=option,
            early_stopping=max(trials // 2, 16),
            callbacks=[bar, autotune.log_to_file(log)],
        )
    finally:
        bar.close()
    tune_s = time.perf_counter() - t0
    measured = tuner.n_done - tuner.n_resumed
    history = autotune.apply_history_best(log)
    best = history.best_record(task)
    with history:
        s, args = task.instantiate()
        t1 = time.perf_counter()
        mod = build(s, args, target=target, name="matmul")
        build_s = time.perf_counter() - t1
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    c = np.empty((n, n), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)
    times = paired({"numpy": lambda: a @ b, "tecomp": lambda: mod(a, b, c)}, rounds=7)
    flops = 2.0 * n**3
    ours = flops / statistics.median(times["tecomp"]) / 1e9
    theirs = flops / statistics.median(times["numpy"]) / 1e9
    ratio = median_ratio(times["numpy"], times["tecomp"])
    stopped = "" if measured >= trials or tuner.stop_reason in ("", "budget") else (
        f" (stopped early: {tuner.stop_reason})")
    out(f"tuning: {measured} of {trials} trials in {tune_s:.0f} s{stopped}, log {log}")
    logged = _logged_gflops(best, flops, since=wall0)
    out(f"build: {build_s * 1e3:.0f} ms, {logged['source']}")
    out(f"matmul {n}: tecomp {ours:.1f} GFLOPS, numpy {theirs:.1f} GFLOPS, "
        f"ratio {ratio:.2f}x (median of paired rounds; > 1 means tecomp is faster)")
    note = slowdown_note(ours, logged["gflops"])
    if note:
        out(note)
    blas_note = blas_override_note(os.environ, _numpy_blas())
    if blas_note:
        out(blas_note)
    return {"gflops": ours, "numpy_gflops": theirs, "ratio": ratio, "log": log,
            "trials": measured, "stop_reason": tuner.stop_reason,
            "logged_gflops": logged["gflops"], "slowdown_note": note,
            "blas_note": blas_note}


# A kernel timed again minutes after the search is rarely within a few percent of its
# figure there on a shared machine; below half of it, the machine (not the kernel)
# changed, and the demo says so rather than print two figures that disagree silently.
SLOWDOWN_NOTE_BELOW = 0.5


def _logged_gflops(record, flops: float, since: float) -> dict:
    """GFLOPS of the log's best record (the one the build applied) and where it came
    from: this session's search, or an earlier run's (the demo's log is appended to)."""
    if record is None or not record.ok:
        return {"gflops": None, "source": "no usable record in the log"}
    gf = flops / record.cost / 1e9
    stage = "re-measured" if record.result.stage == "final" else "measured"
    when = "this run" if record.result.timestamp >= since else "an earlier run"
    return {"gflops": gf, "source": f"the log's best record, {stage} at {gf:.1f} GFLOPS "
                                    f"in {when}"}


def slowdown_note(gflops: float, logged: float | None,
                  below: float = SLOWDOWN_NOTE_BELOW) -> str:
    """A line saying so when the kernel ran at less than ``below`` of its tuning log's
    figure, else ``""``.

    Parameters
    ----------
    gflops : float
        GFLOPS measured now, beside numpy.
    logged : float or None
        GFLOPS of the same config in the tuning log (None: no record).
    below : float
        The fraction of ``logged`` under which the gap is reported.
    """
    if logged is None or logged <= 0 or gflops >= below * logged:
        return ""
    load = ""
    if hasattr(os, "getloadavg"):
        load = f"; load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    return (f"note: the same kernel measured {logged:.1f} GFLOPS during tuning and "
            f"{gflops:.1f} now ({gflops / logged:.0%}); a gap this large usually means "
            f"other work shared the cores during one of the two measurements{load} "
            f"(docs/measuring.md)")


#: Variables that hold OpenBLAS to another CPU's kernels and cache size.
BLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def _numpy_blas() -> str:
    """The name of the BLAS numpy was built with, as its build configuration says ("" if
    it does not say)."""
    try:
        return str(np.__config__.CONFIG["Build Dependencies"]["blas"]["name"])
    except (AttributeError, KeyError, TypeError):
        return ""


def blas_override_note(environ, blas: str) -> str:
    """A line saying so when ``environ`` holds OpenBLAS to another CPU's kernels
    (:data:`BLAS_OVERRIDES`) and numpy's BLAS (``blas``, its name) is OpenBLAS, else
    ``""``: numpy's side of the comparison then runs those kernels, not this CPU's own
    (numpy's 1024^3 matmul: 243 GFLOPS with OPENBLAS_CORETYPE=Haswell, 420 without, on
    one Zen 5)."""
    found = [f"{v}={environ[v]}" for v in BLAS_OVERRIDES if v in environ]
    if not found or "openblas" not in blas.lower():
        return ""
    return (f"note: {', '.join(found)} set in this environment: numpy's OpenBLAS runs the "
            f"kernels named there, not this CPU's own; unset them for numpy at its own "
            f"speed (the benchmarks in benchmarks/ do)")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def add_parser(subparsers) -> None:
    """Register ``tecomp demo`` on the CLI's subparsers."""
    p = subparsers.add_parser("demo", help="tune, build and run a matmul; compare with numpy")
    p.add_argument("--n", type=_positive, default=1024, help="matrix size (default 1024)")
    p.add_argument("--trials", type=_positive, default=64, help="tuning trials (default 64)")
    p.add_argument("--log", default=None, help="tuning log to write (JSON lines; default: "
                   "tecomp_demo_matmul_N.json in the current directory; each run appends)")
    p.add_argument("--target", default="llvm", help="target string (default: llvm)")
    p.set_defaults(func=run_from_args)


def run_from_args(opts, out=None, err=None) -> int:
    """Run ``tecomp demo`` with parsed options, printing to ``out`` (default: stdout)."""
    stream = out or sys.stdout
    run_demo(opts.n, opts.trials, opts.log, opts.target,
             out=lambda line: print(line, file=stream, flush=True))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tecomp")
    add_parser(parser.add_subparsers())
    return run_from_args(parser.parse_args(["demo", *(argv or [])]))


if __name__ == "__main__":
    raise SystemExit(main())
