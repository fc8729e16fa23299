"""The main job on a built-in example: tune a matmul, build the best schedule, run it, and
compare its speed with numpy in the same run.

    tecomp demo [--n 1024] [--trials 64] [--log tuning_logs/demo_matmul.json]
"""

from __future__ import annotations

import argparse
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
    with autotune.apply_history_best(log):
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
    out(f"tuning: {trials} trials in {tune_s:.0f} s, log {log}; build of the best: "
        f"{build_s * 1e3:.0f} ms")
    out(f"matmul {n}: tecomp {ours:.1f} GFLOPS, numpy {theirs:.1f} GFLOPS, "
        f"ratio {ratio:.2f}x (median of paired rounds; > 1 means tecomp is faster)")
    return {"gflops": ours, "numpy_gflops": theirs, "ratio": ratio, "log": log}


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
