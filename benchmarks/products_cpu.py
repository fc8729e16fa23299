"""Untuned matrix products beside numpy: the fallback configs of ``matmul`` and ``dense``.

A model built without tuning records runs these schedules, so they have to hold their own
on the shapes models use: square matmuls (one whose size no tile divides, and one with a
symbolic row count, as a graph with a dynamic batch builds it), a classifier head or a
projection at batch 1, the BERT-style encoder's projections at sequence length 128, and
the GPT-2-style decoder's with a symbolic row count (its dynamic sequence) bound to 128.
``dense`` reads its weight prepacked and adds a bias, as a built model's does; numpy
computes ``x @ w.T + b`` in its cheapest form (one BLAS call into an array it is given,
then the bias added in place: ``np.matmul(x, w.T, out=y); y += b``). tecomp's kernel is
called as a built model's executor calls it: the arguments checked once, then a prepared
call (``PackedFunction.prepare``, one native call each time), which matters at batch 1,
where a checked call's ~2 us is a tenth of the kernel.

For each shape it prints tecomp's GFLOPS, numpy's measured in alternation with it, and
the median over interleaved rounds of t_numpy / t_tecomp (> 1: tecomp is faster); see
docs/measuring.md. Run it on an idle machine; it prints the CPU it ran on. Both sides
run on ``--threads`` threads (default 2; 1 for a steadier single-thread comparison).

    python benchmarks/products_cpu.py [--rounds 9] [--only dense] [--threads 2]
"""

from __future__ import annotations

import fair  # first: numpy's BLAS must load without OpenBLAS's overrides (fair.py)

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import tecomp
from tecomp import autotune, te
from tecomp.autotune.space import FallbackConfigEntity
from tecomp.runtime import aligned
from tecomp.timing import median_ratio, paired
from tecomp.topi.matmul import (
    compute_dense,
    compute_matmul,
    define_product_knobs,
    pack_dense_weight,
    schedule_dense,
    schedule_matmul,
)

MATMULS = [(1000, 1000, 1000), (1024, 1024, 1024), (512, 512, 512)]
SYMBOLIC_MATMULS = [(1000, 1000, 1000)]
DENSES = [(1, 512, 1000), (1, 2048, 1000), (1, 768, 3072), (1, 256, 1024),
          (128, 256, 256), (128, 256, 1024), (128, 1024, 256)]
#: The projections of the GPT-2-style decoder (hidden 256, vocabulary 1000) built with a
#: dynamic sequence: rows ``batch * seq`` bound at call time, run here at 128.
SYMBOLIC_DENSES = [(128, 256, 768), (128, 256, 256), (128, 256, 1024), (128, 1024, 256),
                   (128, 256, 1000)]


@dataclass
class Case:
    label: str
    flop: float
    ours: Callable[[], object]
    numpy: Callable[[], object]


def _checked_call(mod, arrays: tuple, want: np.ndarray, label: str) -> Callable[[], None]:
    """Run ``mod`` once with argument checks, compare its output (the last array) with
    ``want``, and return the prepared call a model's executor makes."""
    mod(*arrays)
    np.testing.assert_allclose(arrays[-1], want, rtol=1e-3, atol=1e-3, err_msg=label)
    return mod.get_function(mod.entry_name).prepare(*arrays)


def matmul_case(n: int, k: int, m: int, rng) -> Case:
    task = autotune.create_task("matmul", (n, k, m, "float32"))
    s, args = task.instantiate(task.default_config)
    return _matmul_case(f"matmul {n}x{k}x{m}", tecomp.build(s, args), n, k, m, rng)


def symbolic_matmul_case(n: int, k: int, m: int, rng) -> Case:
    """The fallback a graph with a dynamic batch builds: rows bound at call time."""
    with tecomp.Target("llvm"):
        cfg = FallbackConfigEntity()
        A = te.placeholder((te.var("n"), k), "float32", name="A")
        B = te.placeholder((k, m), "float32", name="B")
        C = compute_matmul(cfg, A, B)
        s = schedule_matmul(cfg, [C])
    return _matmul_case(f"matmul n={n}x{k}x{m}", tecomp.build(s, [A, B, C]), n, k, m, rng)


def _matmul_case(label: str, mod, n: int, k: int, m: int, rng) -> Case:
    a = rng.standard_normal((n, k), dtype=np.float32)
    b = rng.standard_normal((k, m), dtype=np.float32)
    want = a @ b
    ours = _checked_call(mod, (aligned.copy(a), aligned.copy(b), aligned.empty((n, m), np.float32)),
                         want, label)
    out = np.empty_like(want)
    return Case(label, 2.0 * n * k * m, ours, lambda: np.matmul(a, b, out=out))


def dense_case(n: int, k: int, m: int, rng) -> Case:
    task = autotune.create_task("dense_packed", (n, k, m, "float32", True, "none"))
    s, args = task.instantiate(task.default_config)
    return _dense_case(f"dense {n}x{k}x{m}", tecomp.build(s, args),
                       int(args[1].shape[2].value), n, k, m, rng)


def symbolic_dense_case(n: int, k: int, m: int, rng) -> Case:
    """The fallback a graph with a dynamic sequence builds: rows bound at call time."""
    with tecomp.Target("llvm"):
        cfg = FallbackConfigEntity()
        rows = te.var("n")
        define_product_knobs(cfg, rows, k, m)
        bn = cfg["bn"].val
        X = te.placeholder((rows, k), "float32", name="X")
        W = te.placeholder(((m + bn - 1) // bn, k, bn), "float32", name="W")
        b = te.placeholder((m,), "float32", name="b")
        Y = compute_dense(cfg, X, W, b)
        s = schedule_dense(cfg, [Y])
    return _dense_case(f"dense n={n}x{k}x{m}", tecomp.build(s, [X, W, b, Y]), bn, n, k, m, rng)


def _dense_case(label: str, mod, bn: int, n: int, k: int, m: int, rng) -> Case:
    x = rng.standard_normal((n, k), dtype=np.float32)
    w = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal(m, dtype=np.float32)
    arrays = (aligned.copy(x), pack_dense_weight(w, bn), aligned.copy(b),
              aligned.empty((n, m), np.float32))
    ours = _checked_call(mod, arrays, x @ w.T + b, label)
    out = np.empty((n, m), np.float32)
    wt = w.T

    def numpy_dense():
        np.matmul(x, wt, out=out)
        np.add(out, b, out=out)

    return Case(label, 2.0 * n * k * m, ours, numpy_dense)


def cases(only: str):
    rng = np.random.default_rng(0)
    if only in ("", "matmul"):
        yield from (matmul_case(*shape, rng) for shape in MATMULS)
        yield from (symbolic_matmul_case(*shape, rng) for shape in SYMBOLIC_MATMULS)
    if only in ("", "dense"):
        yield from (dense_case(*shape, rng) for shape in DENSES)
        yield from (symbolic_dense_case(*shape, rng) for shape in SYMBOLIC_DENSES)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--only", choices=["matmul", "dense"], default="")
    fair.add_thread_option(p)
    opts = p.parse_args()
    fair.use_threads(opts.threads)
    fair.print_machine(opts.threads)
    print(f"target: {tecomp.Target('llvm')}")
    print(f"{'shape':<24} {'GFLOPS':>8} {'numpy':>8} {'ratio':>6}")
    for case in cases(opts.only):
        times = paired({"numpy": case.numpy, "ours": case.ours}, opts.rounds)
        ours, theirs = statistics.median(times["ours"]), statistics.median(times["numpy"])
        ratio = median_ratio(times["numpy"], times["ours"])
        print(f"{case.label:<24} {case.flop / ours / 1e9:8.1f} "
              f"{case.flop / theirs / 1e9:8.1f} {ratio:6.2f}", flush=True)


if __name__ == "__main__":
    main()
