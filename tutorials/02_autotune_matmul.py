"""
Let the autotuner find the schedule
===================================

Tutorial 1 picked tile sizes by hand. Here we write the same matmul as a *template*: a
schedule with knobs (tile sizes, the packing width, unrolling) whose values the tuner
chooses by measuring candidates. We tune it with the XGBoost-guided tuner, keep the
measurements in a tuning log, apply the best record at build time and compare the
result with numpy, interleaved round by round (docs/measuring.md says why).

Run it::

    python tutorials/02_autotune_matmul.py    # n = 1024: all 48 configs of the space
    TECOMP_TUTORIAL_N=256 TECOMP_TUTORIAL_TRIALS=16 python tutorials/02_autotune_matmul.py

The space is small on purpose (3 x 4 x 4 = 48 configs), so the default run measures all of
it, unless 24 trials in a row bring no improvement: then early stopping ends the session
and the progress output says so. The template's fallback (bn=16, 8 rows, tile_k 8) is
already a good point of this space, so tuning may find nothing faster; the last lines
say how the two compare. ``tecomp tune --op matmul`` tunes the built-in
template, whose larger space leaves the tuner more to find.
"""

import os
import tempfile

import numpy as np

import tecomp
from tecomp import autotune, te
from tecomp.timing import median_ratio, paired

N = int(os.environ.get("TECOMP_TUTORIAL_N", "1024"))
QUICK = os.environ.get("TECOMP_TUTORIAL_QUICK", "") not in ("", "0")  # CI: a smoke run
# Trials: the whole space by default (48 configs), 8 in the CI smoke run.
TRIALS = int(os.environ.get("TECOMP_TUTORIAL_TRIALS", "8" if QUICK else "0")) or None


# 1. A template. The compute is the algorithm; each `cfg.define_*` declares a knob, and
#    `cfg[...]` reads the value chosen for the candidate being built. Outside tuning,
#    with no matching record, the template runs with its fallback values (below).
@autotune.template("tutorial/matmul")
def matmul(n, dtype="float32"):
    cfg = autotune.get_config()
    cfg.define_knob("bn", [16, 32, 64])                 # packed columns = vector lanes
    cfg.define_split("tile_i", n, num_outputs=2, policy="candidate",
                     candidate=[[-1, r] for r in (2, 4, 6, 8)])
    cfg.define_split("tile_k", n, num_outputs=2, policy="candidate",
                     candidate=[[-1, r] for r in (1, 2, 4, 8)])
    if cfg.is_fallback:
        cfg.fallback_split("tile_i", [-1, 8])
    bn = cfg["bn"].val

    A = te.placeholder((n, n), dtype, name="A")
    B = te.placeholder((n, n), dtype, name="B")
    # B packed as [n / bn, n, bn]: the inner loop reads bn contiguous floats per k.
    PB = te.compute((n // bn, n, bn), lambda x, k, z: B[k, x * bn + z], name="PB")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * PB[j // bn, k, j % bn], axis=k),
                   name="C")

    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")                       # accumulate in registers
    io, ii = cfg["tile_i"].apply(s, C, C.op.axis[0])
    jo, ji = s[C].split(C.op.axis[1], factor=bn)
    s[C].reorder(io, jo, ii, ji)
    fused = s[C].fuse(io, jo)
    s[C].parallel(fused)
    s[C].vectorize(ji)
    s[CL].compute_at(s[C], fused)
    ci, cj = s[CL].op.axis
    ko, ki = cfg["tile_k"].apply(s, CL, s[CL].op.reduce_axis[0])
    s[CL].reorder(ko, ki, ci, cj)
    s[CL].vectorize(cj)
    s[CL].unroll(ki)
    s[CL].unroll(ci)
    x, _, z = s[PB].op.axis
    s[PB].vectorize(z)
    s[PB].parallel(x)
    return s, [A, B, C]


def main():
    # 2. A task: the template, its arguments and the target. Its FLOP count comes from
    #    the compute, and its space is the product of the knobs.
    task = autotune.create_task("tutorial/matmul", (N, "float32"), target="llvm")
    print(task.config_space)
    print(f"{task.flop / 1e9:.2f} GFLOP per call")

    # 3. Tune: candidates are built in parallel worker processes and timed in a separate
    #    process (a crashing candidate costs one trial, not the session). Every record is
    #    appended to the log as soon as it is measured.
    log = os.path.join(tempfile.mkdtemp(), "matmul.json")
    option = autotune.measure_option(
        builder=autotune.LocalBuilder(timeout=10),
        runner=autotune.LocalRunner(number=2, repeat=3, timeout=10),
    )
    tuner = autotune.XGBTuner(task, seed=0)
    n_trial = min(TRIALS or len(task.config_space), len(task.config_space))
    print(f"tuning {n_trial} of {len(task.config_space)} configs")
    bar = autotune.progress_bar(n_trial, prefix="tuning")
    tuner.tune(n_trial, option, early_stopping=max(20, n_trial // 2),
               callbacks=[bar, autotune.log_to_file(log)])
    bar.close()  # says why, if the session stopped before n_trial
    print(f"best config: {tuner.best_config} ({tuner.best_flops:.1f} GFLOPS, re-measured)")

    # 4. Build with the best record. Inside apply_history_best, calling the template
    #    (or task.instantiate()) picks the best config for this workload and target.
    with autotune.apply_history_best(log):
        s, args = matmul(N, "float32")
    tuned = tecomp.build(s, args, target="llvm")
    s, args = task.instantiate()   # outside: the fallback config, for comparison
    fallback = tecomp.build(s, args, target="llvm")

    a = np.random.rand(N, N).astype("float32")
    b = np.random.rand(N, N).astype("float32")
    c = np.empty((N, N), "float32")
    tuned(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3)

    # 5. Compare with numpy, interleaved, and report the median ratio of the rounds.
    times = paired({"numpy": lambda: a @ b, "tuned": lambda: tuned(a, b, c),
                    "fallback": lambda: fallback(a, b, c)}, rounds=1 if QUICK else 7)
    for name, ts in times.items():
        print(f"{name:9s} {task.flop / sorted(ts)[len(ts) // 2] / 1e9:7.1f} GFLOPS")
    print(f"tuned vs numpy: {median_ratio(times['numpy'], times['tuned']):.2f}x "
          f"(> 1 means faster than numpy)")
    gain = median_ratio(times["fallback"], times["tuned"])
    print(f"tuned vs fallback: {gain:.2f}x")
    # The fallback was measured as the first candidate, so the tuned config is the
    # fallback itself or one that re-measured faster; a ratio near 1 means the fallback
    # was already (about) the best this small space offers, or the difference is within
    # the machine's noise (docs/measuring.md).
    if gain < 1.03:
        print("tuning did not beat the fallback by more than the noise here: the fallback "
              "is a good point of this small space (see the top of this file)")


if __name__ == "__main__":
    main()
