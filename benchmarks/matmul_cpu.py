"""Matmul: numpy (OpenBLAS) against every schedule of tutorial 1, in one run.

For n = 512, 1024, 2048 it prints each schedule's GFLOPS, numpy's GFLOPS measured in
alternation with it, their median paired ratio, and the wall time of lower + build.
Both run on ``--threads`` threads (default 2); numpy writes into an array it is given
(``np.matmul(a, b, out=c)``), as tecomp's kernel does, so neither allocates per call.
Run it on an otherwise idle machine (docs/measuring.md); it prints the CPU it ran on.

    python benchmarks/matmul_cpu.py [--sizes 512,1024,2048] [--rounds 7] [--steps parallel]
"""

from __future__ import annotations

import fair  # first: numpy's BLAS must load without OpenBLAS's overrides (fair.py)

import argparse
import importlib.util
import pathlib
import statistics
import time

import numpy as np

import tecomp
from tecomp.timing import median_ratio, paired

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load_tutorial():
    path = ROOT / "tutorials" / "01_optimize_matmul_cpu.py"
    spec = importlib.util.spec_from_file_location("tutorial01", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="512,1024,2048")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", default="", help="comma-separated step names (default: all)")
    fair.add_thread_option(p)
    opts = p.parse_args()
    fair.use_threads(opts.threads)
    fair.print_machine(opts.threads)
    tut = load_tutorial()
    steps = tut.STEPS
    if opts.steps:
        wanted = set(opts.steps.split(","))
        steps = [(t, f) for t, f in steps if t in wanted or f.__name__ in wanted]
    print(f"target: {tecomp.Target('llvm')}")
    print(f"{'n':>5} {'schedule':<18} {'GFLOPS':>8} {'numpy':>8} {'ratio':>6} {'build ms':>9}")
    for n in [int(x) for x in opts.sizes.split(",")]:
        rng = np.random.default_rng(0)
        a = rng.random((n, n), dtype=np.float32)
        b = rng.random((n, n), dtype=np.float32)
        ref = a @ b
        out = np.empty_like(ref)
        flops = 2.0 * n**3
        for title, make in steps:
            t0 = time.perf_counter()
            s, args = make(n)
            mod = tecomp.build(s, args, target="llvm", name="matmul")
            build_ms = (time.perf_counter() - t0) * 1e3
            c = np.empty((n, n), "float32")
            mod(a, b, c)
            np.testing.assert_allclose(c, ref, rtol=1e-3)
            t_one = time.perf_counter()
            mod(a, b, c)
            rounds = opts.rounds if time.perf_counter() - t_one < 1.0 else 1
            times = paired({"numpy": lambda: np.matmul(a, b, out=out),
                            "ours": lambda: mod(a, b, c)}, rounds)
            ours = statistics.median(times["ours"])
            theirs = statistics.median(times["numpy"])
            ratio = median_ratio(times["numpy"], times["ours"])
            print(
                f"{n:>5} {title:<18} {flops / ours / 1e9:8.1f} {flops / theirs / 1e9:8.1f} "
                f"{ratio:6.2f} {build_ms:9.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
