"""Tuned built-in templates beside numpy (matmul) and ONNX Runtime (conv2d), paired.

    python benchmarks/ops_cpu.py                       # shipped / given logs, no tuning
    python benchmarks/ops_cpu.py --tune 200 --log /tmp/ops.json   # tune first (resumable)

For each workload it prints tecomp's GFLOPS, the reference's, and the median over
interleaved rounds of t_reference / t_tecomp (> 1: tecomp is faster); see
docs/measuring.md. Every contender runs on ``--threads`` threads (default 2); numpy's
matmul writes into an array it is given (``np.matmul(a, b, out=c)``), as tecomp's kernel
does. Run it on an idle machine; it prints the CPU it ran on.

Each conv2d layer has two rows. ``conv2d`` takes the OIHW weight and repacks it on every
call. ``conv2d_packed_kernel`` takes the weight already in the template's blocked layout:
the benchmark packs it once, outside the timed region, exactly as ONNX Runtime prepacks
its initializer weights once at session creation (and as the graph compiler constant-folds
the packing of an initializer). ``--ops`` picks the rows (and what ``--tune`` tunes).

``softmax`` and ``layer_norm`` (4096 x 1024, the last axis) are memory-bound kernels tuned
through their row knobs (``tecomp.topi.row_space``); ONNX Runtime runs the one-node model
with scale and bias as initializers.
"""

from __future__ import annotations

import fair  # first: numpy's BLAS must load without OpenBLAS's overrides (fair.py)

import argparse
import os
import sys

import numpy as np

import tecomp
from tecomp import autotune
from tecomp.autotune.records import shipped_history
from tecomp.timing import median_ratio, paired
from tecomp.topi import strategy
from tecomp.topi.conv2d import kernel_blocking, pack_conv2d_kernel

MATMUL = ("matmul", (1024, 1024, 1024, "float32"))
CONVS = [
    ("conv2d", ((1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1), "float32")),
    ("conv2d", ((1, 256, 14, 14), (256, 256, 3, 3), (1, 1), (1, 1), (1, 1), "float32")),
]

CONV_OPS = ["conv2d", "conv2d_packed_kernel"]
# operator: (ONNX op type, input shapes, attributes); inputs after the first are
# initializers (scale, bias).
ROW_OPS = {
    "softmax": ("Softmax", [(4096, 1024)], {"axis": 1}),
    "layer_norm": ("LayerNormalization", [(4096, 1024), (1024,), (1024,)],
                   {"axis": 1, "epsilon": 1e-5}),
}
OPS = ["matmul"] + CONV_OPS + list(ROW_OPS)


def ort_node(op_type, x, weights, threads, opset=13, **attrs):
    """A function running the one-node model ``op_type(x, *weights)`` in ONNX Runtime
    (``weights`` as initializers)."""
    import onnx
    from onnx import TensorProto, helper

    names = [f"w{i}" for i in range(len(weights))]
    node = helper.make_node(op_type, ["x", *names], ["y"], **attrs)
    graph = helper.make_graph(
        [node], op_type,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[onnx.numpy_helper.from_array(w, n) for w, n in zip(weights, names)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    sess = fair.ort_session(model, threads)
    return lambda: sess.run(None, {"x": x})[0]


def ort_conv(x, w, strides, pads, threads):
    return ort_node("Conv", x, [w], threads, strides=list(strides),
                    pads=list(pads) + list(pads))


def row_workload(op):
    """The template arguments of row operator ``op`` of ``ROW_OPS``."""
    _, shapes, attrs = ROW_OPS[op]
    return strategy.get_implementation(op, "llvm").workload(*shapes, dtype="float32",
                                                            **attrs)


def tuned_module(name, args, log):
    task = autotune.create_task(name, args)
    ctx = autotune.apply_history_best(log) if log and os.path.exists(log) else None
    if ctx is not None:
        with ctx:
            s, tensors = task.instantiate()
            rec = ctx.best_record(task)
    else:
        # No log given: the template applies the shipped records, if any match.
        s, tensors = task.instantiate()
        shipped = shipped_history()
        rec = shipped.best_record(task) if shipped is not None else None
    return task, tecomp.build(s, tensors), tensors, rec


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log", help="tuning log to apply (default: shipped logs)")
    p.add_argument("--tune", type=int, default=0, metavar="N",
                   help="tune each workload for N trials into --log first")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--ops", default=",".join(OPS),
                   help=f"comma-separated rows to run (default: all of {','.join(OPS)})")
    p.add_argument("--layers", default="0,1",
                   help="which conv2d layers (0: 64->64 @56x56, 1: 256->256 @14x14)")
    fair.add_thread_option(p)
    ns = p.parse_args(argv)
    fair.use_threads(ns.threads)
    if ns.tune and not ns.log:
        p.error("--tune needs --log")
    ops = [o for o in ns.ops.split(",") if o]
    bad = [o for o in ops if o not in OPS]
    if bad:
        p.error(f"--ops: unknown {bad}; choose from {','.join(OPS)}")
    convs = [CONVS[int(i)][1] for i in ns.layers.split(",") if i]
    workloads = ([MATMUL] if "matmul" in ops else []) + [
        (op, args) for args in convs for op in CONV_OPS if op in ops] + [
        (op, row_workload(op)) for op in ROW_OPS if op in ops]
    if ns.tune:
        for name, args in workloads:
            task = autotune.create_task(name, args)
            bar = autotune.progress_bar(ns.tune, prefix=name)
            autotune.XGBTuner(task, seed=0).tune(
                ns.tune, autotune.measure_option(autotune.LocalBuilder(),
                                                 autotune.LocalRunner(number=2, repeat=3)),
                callbacks=[bar, autotune.log_to_file(ns.log)], resume_from=ns.log)
            bar.close()

    rng = np.random.default_rng(0)
    fair.print_machine(ns.threads)
    print(f"{'workload':52s} {'tecomp':>9s} {'reference':>16s} {'ratio':>6s}  config")
    if "matmul" in ops:
        task, mod, tensors, rec = tuned_module(*MATMUL, ns.log)
        a = rng.random((1024, 1024), dtype=np.float32)
        b = rng.random((1024, 1024), dtype=np.float32)
        c = np.empty((1024, 1024), np.float32)
        mod(a, b, c)
        ref = a @ b
        np.testing.assert_allclose(c, ref, rtol=1e-3)
        t = paired({"numpy": lambda: np.matmul(a, b, out=ref), "tecomp": lambda: mod(a, b, c)},
                   rounds=ns.rounds)
        _row("matmul 1024 fp32", task.flop, t["tecomp"], "numpy", t["numpy"], rec)

    for args in convs:
        x = rng.uniform(-1, 1, args[0]).astype(np.float32)
        w = rng.uniform(-1, 1, args[1]).astype(np.float32)
        ref = ort_conv(x, w, args[2], args[3], ns.threads)
        expect = ref()
        for name in [op for op in CONV_OPS if op in ops]:
            task, mod, tensors, rec = tuned_module(name, args, ns.log)
            y = np.empty([int(s.value) for s in tensors[-1].shape], np.float32)
            if name == "conv2d_packed_kernel":
                # Once, before timing: what ORT does to its initializer at session creation.
                wk = pack_conv2d_kernel(w, *kernel_blocking(tensors[1]))
                how = "weights packed once"
            else:
                wk, how = w, "packs weights per call"
            mod(x, wk, y)
            np.testing.assert_allclose(y, expect, rtol=1e-3, atol=1e-3)
            t = paired({"ort": ref, "tecomp": lambda mod=mod, wk=wk, y=y: mod(x, wk, y)},
                       rounds=ns.rounds)
            label = (f"conv2d {args[1][1]}->{args[1][0]} 3x3 @{args[0][2]}x{args[0][3]} "
                     f"({how})")
            _row(label, task.flop, t["tecomp"], "onnxruntime", t["ort"], rec)

    for op in [op for op in ROW_OPS if op in ops]:
        op_type, shapes, attrs = ROW_OPS[op]
        x, *weights = (rng.standard_normal(s).astype(np.float32) for s in shapes)
        ref = ort_node(op_type, x, weights, ns.threads, opset=17, **attrs)
        task, mod, tensors, rec = tuned_module(op, row_workload(op), ns.log)
        y = np.empty(shapes[0], np.float32)
        mod(x, *weights, y)
        np.testing.assert_allclose(y, ref(), rtol=1e-4, atol=1e-5)
        t = paired({"ort": ref, "tecomp": lambda mod=mod, w=weights, y=y: mod(x, *w, y)},
                   rounds=ns.rounds)
        _row(f"{op} {' x '.join(map(str, shapes[0]))} (last axis)", task.flop,
             t["tecomp"], "onnxruntime", t["ort"], rec)


def _row(label, flop, ours, ref_name, ref, rec):
    def med(xs):
        return sorted(xs)[len(xs) // 2]

    g_ours, g_ref = flop / med(ours) / 1e9, flop / med(ref) / 1e9
    src = "tuned" if rec is not None else "fallback"
    print(f"{label:52s} {g_ours:7.1f} GF {ref_name:>11s} {g_ref:5.1f} GF "
          f"{median_ratio(ref, ours):5.2f}x  ({src})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
