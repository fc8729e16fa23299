"""
Compile an ONNX model, check it against ONNX Runtime, tune it, compile again
============================================================================

Tutorials 1 and 2 built one operator. Here the input is a whole model: a small ResNet
written with ``onnx.helper`` (``tecomp.testing.models.resnet``, random weights; any
``.onnx`` file works the same way). We import it, build it for this CPU with the operator
library's default schedules, compare its output with ONNX Runtime's, time both, then tune
the model's convolutions and dense layer together, build again with the tuning log and
time it again.

Run it::

    python tutorials/03_compile_onnx_model.py    # 64 trials
    TECOMP_TUTORIAL_QUICK=1 python tutorials/03_compile_onnx_model.py    # CI: 4 trials

A few dozen trials spread over a model's layers move its latency by a few percent at most
(the conv2d fallback is a reasonable point of its space); real tuning budgets are in the
thousands (``tecomp tune model.onnx --trials 2000`` does the same from the command line).
"""

import os
import tempfile

import numpy as np
import onnx
import onnxruntime

import tecomp
from tecomp import autotune
from tecomp.testing import models
from tecomp.timing import median_ratio, paired

QUICK = os.environ.get("TECOMP_TUTORIAL_QUICK", "") not in ("", "0")  # CI: a smoke run
TRIALS = int(os.environ.get("TECOMP_TUTORIAL_TRIALS", "4" if QUICK else "64"))
WIDTH, IMAGE = (16, 32) if QUICK else (32, 112)


def main():
    # 1. A model. Batch 1 here; leave a dimension named (``"batch"``) and it stays
    #    symbolic: one build then runs every batch size.
    model = models.resnet(width=WIDTH, image=IMAGE, classes=100, batch=1)
    path = os.path.join(tempfile.mkdtemp(), "resnet.onnx")
    onnx.save(model, path)
    x = np.random.default_rng(0).standard_normal((1, 3, IMAGE, IMAGE)).astype("float32")

    # 2. Import and build. ``from_onnx`` gives the graph IR and its weights; ``build`` runs
    #    the graph passes (BatchNorm folded into the convolutions, elementwise epilogues
    #    fused into them), picks a schedule per fused kernel and compiles them all into one
    #    module. The summary lists each kernel and where its schedule came from.
    mod, params = tecomp.frontend.from_onnx(path)
    lib = tecomp.graph.build(mod, target="llvm", params=params)
    print(lib.summary())
    gm = tecomp.graph.GraphModule(lib)

    # 3. Run and compare with ONNX Runtime (2 threads, like tecomp on this machine).
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = onnxruntime.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    ref, = sess.run(None, {"input": x})
    y, = gm(input=x)
    np.testing.assert_allclose(y, ref, rtol=1e-3, atol=1e-4)
    print(f"max abs difference from ONNX Runtime: {np.abs(y - ref).max():.2e}")

    # 4. Tune the model. ``extract_tasks`` lists the tunable workloads of its fused
    #    kernels (convolutions, dense layers, pools, softmax and norms: every anchor with a
    #    template and static shapes), each with the number of kernels sharing it; the
    #    task scheduler hands each next batch of trials to the task
    #    expected to cut the model's latency most, and writes one log.
    tasks = autotune.extract_tasks(mod, params, target="llvm")
    for t in tasks:
        print(f"task {t.name}{t.args[:2]}: {t.flop / 1e6:.0f} MFLOP, weight {t.weight}, "
              f"{len(t.config_space)} configs")
    log = os.path.join(tempfile.mkdtemp(), "resnet_log.json")
    option = autotune.measure_option(builder=autotune.LocalBuilder(timeout=10),
                                     runner=autotune.LocalRunner(number=2, repeat=3, timeout=10))
    batch = max(1, TRIALS // (2 * len(tasks)))  # every task gets a first batch
    scheduler = autotune.TaskScheduler(tasks, seed=0, batch_size=batch)
    bar = autotune.model_progress_bar(TRIALS, prefix="tuning")
    scheduler.tune(TRIALS, option, callbacks=[bar, autotune.log_to_file(log)])
    bar.close()
    for t, tuner in zip(tasks, scheduler.tuners):
        print(f"{t.name}: best {tuner.best_flops:.1f} GFLOPS")

    # 5. Build again with the log: every kernel of a tuned workload takes its best record
    #    (the summary says "tuned record"); the other kernels keep their schedules.
    with autotune.apply_history_best(log):
        tuned_lib = tecomp.graph.build(mod, target="llvm", params=params)
    print(tuned_lib.summary())
    tuned = tecomp.graph.GraphModule(tuned_lib)
    y_tuned, = tuned(input=x)
    np.testing.assert_allclose(y_tuned, ref, rtol=1e-3, atol=1e-4)

    # 6. Time all three, interleaved round by round (docs/measuring.md says why).
    times = paired({"onnxruntime": lambda: sess.run(None, {"input": x}),
                    "untuned": lambda: gm(input=x), "tuned": lambda: tuned(input=x)},
                   rounds=3 if QUICK else 9)
    for name, ts in times.items():
        print(f"{name:12s} {sorted(ts)[len(ts) // 2] * 1e3:8.2f} ms")
    for name in ("untuned", "tuned"):
        print(f"{name} / ONNX Runtime: {median_ratio(times[name], times['onnxruntime']):.2f}x "
              f"(< 1 means tecomp is faster)")


if __name__ == "__main__":
    main()
