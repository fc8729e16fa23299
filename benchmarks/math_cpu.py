"""Elementwise math (exp, log, tanh, sigmoid, erf over 1M float32) and softmax beside numpy.

    python benchmarks/math_cpu.py [--rounds 9] [--threads 2]

Each operator is the library's (``topi.strategy.get_implementation(op, "llvm")``) with its
default schedule. For each it prints the medians over interleaved rounds (milliseconds
per call) and the median of t_numpy / t_tecomp (> 1: tecomp is faster). numpy has no erf;
scipy's is the reference where scipy is installed. numpy computes each in its cheapest
form: ufuncs writing into arrays they are given, in place where a formula has several
steps, so it allocates nothing per call, as tecomp's kernels do. numpy's ufuncs run on one
thread whatever ``--threads`` says (tecomp's parallel loops take it, default 2): use
``--threads 1`` to compare on equal terms. Run it on an idle machine; it prints the CPU it
ran on.
"""

from __future__ import annotations

import fair  # first: numpy's BLAS must load without OpenBLAS's overrides (fair.py)

import argparse
import statistics

import numpy as np

import tecomp
from tecomp import te
from tecomp.timing import median_ratio, paired
from tecomp.topi import strategy

N = 1 << 20


def _softmax(x, out):
    np.subtract(x, x.max(axis=-1, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=-1, keepdims=True)
    return out


def _sigmoid(x, out):
    np.negative(x, out=out)
    np.exp(out, out=out)
    out += 1
    return np.reciprocal(out, out=out)


def _scipy_erf():
    try:
        from scipy.special import erf
    except ImportError:
        return None
    return erf


def workloads():
    """(operator, input shape, numpy reference ``f(x, out)`` or None)."""
    return [
        ("exp", (N,), np.exp),
        ("log", (N,), np.log),
        ("tanh", (N,), np.tanh),
        ("sigmoid", (N,), _sigmoid),
        ("erf", (N,), _scipy_erf()),
        ("softmax", (64, 1024), _softmax),
    ]


def build(op: str, shape):
    impl = strategy.get_implementation(op, "llvm")
    x = te.placeholder(shape, "float32", name="x")
    y = impl.compute(None, x)
    return tecomp.build(impl.schedule(None, [y]), [x, y], target="llvm", name=op)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=9)
    fair.add_thread_option(p)
    args = p.parse_args(argv)
    fair.use_threads(args.threads)
    fair.print_machine(args.threads)
    rng = np.random.default_rng(0)
    print(f"{'operator':10s} {'shape':>12s} {'tecomp ms':>10s} {'numpy ms':>10s} {'ratio':>6s}")
    for op, shape, ref in workloads():
        x = rng.standard_normal(shape).astype(np.float32) * 3
        if op == "log":
            x = np.abs(x) + 1e-3
        y = np.empty_like(x)
        mod = build(op, shape)
        contenders = {"tecomp": lambda mod=mod, x=x, y=y: mod(x, y)}
        if ref is not None:
            out = np.empty_like(x)
            contenders["numpy"] = lambda: ref(x, out)
        t = paired(contenders, rounds=args.rounds)
        ms = {k: statistics.median(v) * 1e3 for k, v in t.items()}
        if ref is None:
            print(f"{op:10s} {str(shape):>12s} {ms['tecomp']:10.3f} {'-':>10s} {'-':>6s}")
        else:
            ratio = median_ratio(t["numpy"], t["tecomp"])
            print(f"{op:10s} {str(shape):>12s} {ms['tecomp']:10.3f} {ms['numpy']:10.3f} "
                  f"{ratio:6.2f}")


if __name__ == "__main__":
    main()
