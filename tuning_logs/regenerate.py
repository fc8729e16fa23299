"""Regenerate the tuning logs shipped with tecomp for this machine's CPU.

The one command (run on an otherwise idle machine, see docs/measuring.md)::

    python tuning_logs/regenerate.py --trials 300

tunes every workload in ``WORKLOADS`` with the XGB tuner and writes the best record of
each (its interleaved final re-measurement) to ``tuning_logs/<canonical cpu>.json``;
the full logs go to ``tuning_logs/full/`` (not shipped). Records carry the target's
canonical key, so they are applied only on the same CPU (``apply_history_best`` with
``any_cpu=True`` to override; ``TECOMP_NO_SHIPPED_LOGS=1`` to opt out); on another CPU
of the same vector ISA a tuning session measures them first, as candidates.
"""

from __future__ import annotations

import argparse
import os
import sys

WORKLOADS = [
    ("matmul", (1024, 1024, 1024, "float32")),
    ("conv2d", ((1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1), "float32")),
    ("conv2d", ((1, 256, 14, 14), (256, 256, 3, 3), (1, 1), (1, 1), (1, 1), "float32")),
    ("conv2d_packed_kernel",
     ((1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1), "float32")),
    ("conv2d_packed_kernel",
     ((1, 256, 14, 14), (256, 256, 3, 3), (1, 1), (1, 1), (1, 1), "float32")),
    ("depthwise_conv2d", ((1, 144, 56, 56), (144, 1, 3, 3), (1, 1), (1, 1), (1, 1), "float32")),
    ("dense", (1, 2048, 1000, "float32", True, "none")),
]


def main(argv=None):
    from tecomp import autotune
    from tecomp.target import Target

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=300)
    p.add_argument("--target", default="llvm")
    p.add_argument("--only", help="substring of the template names to tune")
    ns = p.parse_args(argv)
    here = os.path.dirname(os.path.abspath(__file__))
    full_dir = os.path.join(here, "full")
    os.makedirs(full_dir, exist_ok=True)
    cpu = Target(ns.target).mcpu
    out = os.path.join(here, f"x86_{cpu}.json")
    logs = []
    tuned = set()
    for i, (name, args) in enumerate(WORKLOADS):
        if ns.only and ns.only not in name:
            continue
        task = autotune.create_task(name, args, ns.target)
        tuned.add((task.name, task.args))
        log = os.path.join(full_dir, f"{cpu}_{i}_{name}.json")
        tuner = autotune.XGBTuner(task, seed=0)
        bar = autotune.progress_bar(ns.trials, prefix=f"{name}{args}")
        tuner.tune(ns.trials, autotune.measure_option(
            autotune.LocalBuilder(timeout=10), autotune.LocalRunner(number=2, repeat=3)),
            callbacks=[bar, autotune.log_to_file(log)],
            resume_from=log if os.path.exists(log) else None)
        bar.close()
        print(f"{name}{args}: {tuner.best_flops:.1f} GFLOPS", file=sys.stderr)
        logs.append(log)
    # The records of the workloads tuned now replace the shipped ones (whose compute may
    # have changed since); the others are kept.
    kept = [r for r in (autotune.load_from_file(out) if os.path.exists(out) else [])
            if (r.name, r.args) not in tuned]
    best = autotune.pick_best(kept + logs, out_file=out)
    print(f"wrote {len(best)} records to {out}")


if __name__ == "__main__":
    main()
