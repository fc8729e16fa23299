"""Tutorial 3: compile an ONNX model, check it against ONNX Runtime, tune it, compile again.

Tutorials 1 and 2 built one operator. Here the input is a whole model: a small ResNet
written with ``onnx.helper`` (``tecomp.testing.models.resnet``, random weights; any
``.onnx`` file works the same way). We import it, build it for this CPU with the operator
library's default schedules, compare its output with ONNX Runtime's, time both, then tune
the model's heaviest convolution, build again with the tuning log and time it again.

Run it:  python tutorials/03_compile_onnx_model.py                  (64 trials)
         TECOMP_TUTORIAL_QUICK=1 python tutorials/03_compile_onnx_model.py   (CI: 4 trials)

Tuning one layer for a few dozen trials moves the model's latency by a few percent at
most (the other kernels keep their schedules, and the conv2d fallback is a reasonable
point of its space); ``tecomp tune model.onnx`` tunes every layer of a model.
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


def heaviest_conv_workload(model):
    """The (data, kernel, strides, padding, dilation, dtype) workload of the dense (not
    grouped) Conv with the most multiply-adds, read from ONNX shape inference: the
    arguments of the ``conv2d_packed_kernel`` template that builds it."""
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim)
              for v in list(inferred.graph.value_info) + list(inferred.graph.input)}
    shapes.update({i.name: tuple(i.dims) for i in model.graph.initializer})
    best, best_macs = None, 0
    for node in model.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type != "Conv" or attrs.get("group", 1) != 1:
            continue
        data, kernel, out = shapes[node.input[0]], shapes[node.input[1]], shapes[node.output[0]]
        macs = int(np.prod(out)) * int(np.prod(kernel[1:]))
        if macs > best_macs:
            best_macs = macs
            best = (data, kernel, tuple(attrs.get("strides", (1, 1))),
                    tuple(attrs.get("pads", (0, 0, 0, 0))),
                    tuple(attrs.get("dilations", (1, 1))), "float32")
    return best


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

    # 4. Tune the heaviest convolution: a task of the conv2d template on its workload,
    #    tuned as in tutorial 2, every measurement written to the log.
    workload = heaviest_conv_workload(model)
    task = autotune.create_task("conv2d_packed_kernel", workload, target="llvm")
    print(f"tuning conv2d {workload[0]} * {workload[1]}: {task.flop / 1e6:.0f} MFLOP, "
          f"{len(task.config_space)} configs, {TRIALS} trials")
    log = os.path.join(tempfile.mkdtemp(), "resnet_log.json")
    option = autotune.measure_option(builder=autotune.LocalBuilder(timeout=10),
                                     runner=autotune.LocalRunner(number=2, repeat=3, timeout=10))
    tuner = autotune.XGBTuner(task, seed=0)
    bar = autotune.progress_bar(TRIALS, prefix="tuning")
    tuner.tune(TRIALS, option, callbacks=[bar, autotune.log_to_file(log)])
    bar.close()
    print(f"best config: {tuner.best_config} ({tuner.best_flops:.1f} GFLOPS, re-measured)")

    # 5. Build again with the log: every kernel running this workload takes the best
    #    record; the other kernels keep their schedules.
    with autotune.apply_history_best(log):
        tuned_lib = tecomp.graph.build(mod, target="llvm", params=params)
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
