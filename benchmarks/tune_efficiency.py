"""Tuning efficiency on matmul 1024: best GFLOPS vs trials, RandomTuner vs XGBTuner.

    python benchmarks/tune_efficiency.py --trials 200 --seeds 3

Prints, per tuner and seed, the best (trial-median) GFLOPS after 25/50/100/.../N trials
and the loop's trials per minute; then, per seed, how many trials XGBTuner needs to
reach 95% of its final best and how many RandomTuner needs to reach that same level
(the target: XGB needs at most half), with the median over seeds. Run on an idle
machine (shared/MEASURING.md); the two tuners run one after the other, per seed.
"""

from __future__ import annotations

import argparse
import statistics
import time

from tecomp import autotune
from tecomp.autotune.measure import gflops


def curve(tuner_cls, seed, trials, task):
    tuner = tuner_cls(task, seed=seed)
    t0 = time.perf_counter()
    tuner.tune(trials, autotune.measure_option(autotune.LocalBuilder(timeout=10),
                                               autotune.LocalRunner(number=2, repeat=3)),
               remeasure_top=0)
    minutes = (time.perf_counter() - t0) / 60
    best, out = 0.0, []
    for _, r in tuner.history:
        if r.stage != "trial":
            continue
        if r.ok:
            best = max(best, gflops(task.flop, r.cost))
        out.append(best)
    return out, len(out) / minutes


def first_reaching(c, level):
    for i, v in enumerate(c, 1):
        if v >= level:
            return i
    return float("inf")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--seeds", type=int, default=3)
    ns = p.parse_args(argv)
    task = autotune.create_task("matmul", (1024, 1024, 1024, "float32"))
    marks = [m for m in (25, 50, 100, 150, 200, 300, 400) if m < ns.trials] + [ns.trials]
    print(f"matmul 1024 fp32, space of {len(task.config_space)} configs")
    print(f"{'tuner':8s} {'seed':>4s} " + " ".join(f"{m:>6d}" for m in marks) + "  trials/min")
    ratios = []
    for seed in range(ns.seeds):
        curves = {}
        for name, cls in (("random", autotune.RandomTuner), ("xgb", autotune.XGBTuner)):
            c, rate = curve(cls, seed, ns.trials, task)
            curves[name] = c
            print(f"{name:8s} {seed:4d} " + " ".join(f"{c[min(m, len(c)) - 1]:6.1f}"
                                                     for m in marks) + f"  {rate:9.1f}")
        level = 0.95 * curves["xgb"][-1]
        n_xgb = first_reaching(curves["xgb"], level)
        n_rand = first_reaching(curves["random"], level)
        ratios.append(n_xgb / n_rand)
        print(f"  seed {seed}: 95% of XGB's best ({level:.1f} GFLOPS): XGB after {n_xgb}, "
              f"random after {n_rand} trials (ratio {n_xgb / n_rand:.2f})")
    print(f"median ratio XGB/random trials to 95%: {statistics.median(ratios):.2f} "
          f"(target <= 0.5)")


if __name__ == "__main__":
    main()
