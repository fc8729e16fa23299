"""Tuned built-in templates beside numpy (matmul) and ONNX Runtime (conv2d), paired.

    python benchmarks/ops_cpu.py                       # shipped / given logs, no tuning
    python benchmarks/ops_cpu.py --tune 200 --log /tmp/ops.json   # tune first (resumable)

For each workload it prints tecomp's GFLOPS, the reference's, and the median over
interleaved rounds of t_reference / t_tecomp (> 1: tecomp is faster); see
shared/MEASURING.md. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import tecomp
from tecomp import autotune
from tecomp.timing import median_ratio, paired

MATMUL = ("matmul", (1024, 1024, 1024, "float32"))
CONVS = [
    ("conv2d", ((1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1), "float32")),
    ("conv2d", ((1, 256, 14, 14), (256, 256, 3, 3), (1, 1), (1, 1), (1, 1), "float32")),
]


def ort_conv(x, w, strides, pads, threads=2):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=list(strides),
                            pads=list(pads) + list(pads))
    graph = helper.make_graph(
        [node], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[onnx.numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, {"x": x})[0]


def tuned_module(name, args, log):
    task = autotune.create_task(name, args)
    ctx = autotune.apply_history_best(log) if log and os.path.exists(log) else None
    if ctx is not None:
        with ctx:
            s, tensors = task.instantiate()
            rec = ctx.best_record(task)
    else:
        s, tensors = task.instantiate()
        rec = None
    return task, tecomp.build(s, tensors), tensors, rec


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log", help="tuning log to apply (default: shipped logs)")
    p.add_argument("--tune", type=int, default=0, metavar="N",
                   help="tune each workload for N trials into --log first")
    p.add_argument("--rounds", type=int, default=9)
    ns = p.parse_args(argv)
    if ns.tune and not ns.log:
        p.error("--tune needs --log")
    if ns.tune:
        for name, args in [MATMUL] + CONVS:
            task = autotune.create_task(name, args)
            bar = autotune.progress_bar(ns.tune, prefix=name)
            autotune.XGBTuner(task, seed=0).tune(
                ns.tune, autotune.measure_option(autotune.LocalBuilder(),
                                                 autotune.LocalRunner(number=2, repeat=3)),
                callbacks=[bar, autotune.log_to_file(ns.log)], resume_from=ns.log)
            bar.close()

    rng = np.random.default_rng(0)
    print(f"{'workload':44s} {'tecomp':>9s} {'reference':>16s} {'ratio':>6s}  config")
    task, mod, tensors, rec = tuned_module(*MATMUL, ns.log)
    a = rng.random((1024, 1024), dtype=np.float32)
    b = rng.random((1024, 1024), dtype=np.float32)
    c = np.empty((1024, 1024), np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3)
    t = paired({"numpy": lambda: a @ b, "tecomp": lambda: mod(a, b, c)}, rounds=ns.rounds)
    _row("matmul 1024 fp32", task.flop, t["tecomp"], "numpy", t["numpy"], rec)

    for name, args in CONVS:
        task, mod, tensors, rec = tuned_module(name, args, ns.log)
        x = rng.uniform(-1, 1, args[0]).astype(np.float32)
        w = rng.uniform(-1, 1, args[1]).astype(np.float32)
        y = np.empty([int(s.value) for s in tensors[-1].shape], np.float32)
        ref = ort_conv(x, w, args[2], args[3])
        mod(x, w, y)
        np.testing.assert_allclose(y, ref(), rtol=1e-3, atol=1e-3)
        t = paired({"ort": ref, "tecomp": lambda: mod(x, w, y)}, rounds=ns.rounds)
        label = f"conv2d {args[1][1]}->{args[1][0]} 3x3 @{args[0][2]}x{args[0][3]}"
        _row(label, task.flop, t["tecomp"], "onnxruntime", t["ort"], rec)


def _row(label, flop, ours, ref_name, ref, rec):
    med = lambda xs: sorted(xs)[len(xs) // 2]
    g_ours, g_ref = flop / med(ours) / 1e9, flop / med(ref) / 1e9
    src = "tuned" if rec is not None else "fallback"
    print(f"{label:44s} {g_ours:7.1f} GF {ref_name:>11s} {g_ref:5.1f} GF "
          f"{median_ratio(ref, ours):5.2f}x  ({src})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
