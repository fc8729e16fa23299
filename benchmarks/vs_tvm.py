"""tecomp's autotuner beside TVM's MetaSchedule on the same kernels and trial budgets.

    pip install "apache-tvm>=0.27" "apache-tvm-ffi==0.1.14.post1" psutil cloudpickle tornado
    python benchmarks/vs_tvm.py --budgets 64,256 --work-dir /tmp/vs_tvm

(apache-tvm 0.27 with apache-tvm-ffi 0.1.15.post2, what pip picks, crashes when it first
saves an IRModule; 0.1.14.post1 works. MetaSchedule's runner needs psutil, cloudpickle
and tornado, which apache-tvm does not require.)

For each workload and budget both tuners search that many trials from scratch (tecomp's
XGBoost tuner over the template's space; MetaSchedule's evolutionary search with its
XGBoost cost model over the spaces it generates from the compute), each measuring with its
own runner. Then the two best kernels run interleaved in one process on the same input
arrays (the same memory, on a cache line; ``tecomp.timing.paired``) and the script prints
the median of t_tvm / t_tecomp over the rounds (> 1: tecomp is faster). Both sides get
``--threads`` threads: tecomp's pool through ``tecomp.runtime.set_num_threads``, TVM's
through ``TVM_NUM_THREADS`` and the target's ``num-cores``. Both take the same arguments
in the same layouts: the convolution (ResNet-50's 256 -> 256 at 14 x 14) reads NCHW data
and an OIHW weight and writes NCHW; tecomp's ``conv2d`` packs the weight into its blocked
layout on every call, which TVM's kernel does not do. ``conv3x3_packed`` is tecomp's
``conv2d_packed_kernel`` on the same convolution, its weight packed once beforehand (as a
model's build packs a constant weight), beside the same TVM kernel, which reads the OIHW
weight in place.

The softmax and the layer norm read an array and write one of its size with a few
operations per element; a copy of the input (tecomp's elementwise kernel, same threads)
runs in the same rounds, and the script prints each kernel's speed as a fraction of the
copy's: the memory floor both stand on.

Tuning logs and MetaSchedule's databases stay in ``--work-dir``; a second run with the same
directory skips the tuning it finds there. Tuning takes a while: MetaSchedule builds and
runs about one candidate per second on two cores.
"""

from __future__ import annotations

import fair  # first: numpy's BLAS must load without OpenBLAS's overrides (fair.py)

import argparse
import logging
import os
import sys
import time

import numpy as np

import tecomp
from tecomp import autotune, te
from tecomp.runtime import aligned
from tecomp.target import as_target
from tecomp.timing import median_ratio, paired
from tecomp.topi import strategy
from tecomp.topi.cpu_schedule import schedule_injective
from tecomp.topi.conv2d import kernel_blocking, pack_conv2d_kernel

CONV = ((1, 256, 14, 14), (256, 256, 3, 3), (1, 1), (1, 1), (1, 1), "float32")
ROWS = (4096, 1024)

#: name: (tecomp template, its arguments, the arrays' shapes, FLOP)
WORKLOADS = {
    "matmul": ("matmul", (1024, 1024, 1024, "float32"),
               [(1024, 1024), (1024, 1024), (1024, 1024)], 2 * 1024 ** 3),
    "conv3x3": ("conv2d", CONV, [CONV[0], CONV[1], (1, 256, 14, 14)],
                2 * 256 * 256 * 9 * 14 * 14),
    "conv3x3_packed": ("conv2d_packed_kernel", CONV, [CONV[0], CONV[1], (1, 256, 14, 14)],
                       2 * 256 * 256 * 9 * 14 * 14),
    "softmax": ("softmax", None, [ROWS, ROWS], 5 * ROWS[0] * ROWS[1]),
    "layer_norm": ("layer_norm", None, [ROWS, ROWS[1:], ROWS[1:], ROWS],
                   8 * ROWS[0] * ROWS[1]),
}


#: Workloads that read an array and write one of its size, a few operations per element:
#: their floor is a copy of the input, timed beside them.
MEMORY_BOUND = ("softmax", "layer_norm")


def copy_kernel(shape):
    """A copy of a float32 array of ``shape`` into another, tecomp's elementwise schedule
    on every thread: the memory floor of a kernel that reads an array and writes one of
    its size."""
    x = te.placeholder(shape, name="x")
    y = te.compute(shape, lambda *i: x[i], name="y", tag="elemwise")
    return tecomp.build(schedule_injective(None, [y]), [x, y])


def tecomp_args(name):
    template, args, shapes, _ = WORKLOADS[name]
    if args is not None:
        return args
    attrs = {"axis": 1} if name == "softmax" else {"axis": 1, "epsilon": 1e-5}
    return strategy.get_implementation(template, "llvm").workload(
        *shapes[:-1], dtype="float32", **attrs)


def tvm_compute(name):
    """The TVM tensor expression of workload ``name`` (its placeholders and output)."""
    from tvm import te, topi

    shapes = WORKLOADS[name][2]
    if name == "matmul":
        a, b = (te.placeholder(s, name=n) for s, n in zip(shapes, "ab"))
        k = te.reduce_axis((0, shapes[0][1]), "k")
        c = te.compute(shapes[2], lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
        return [a, b, c]
    if name.startswith("conv3x3"):
        x, w = te.placeholder(shapes[0], name="x"), te.placeholder(shapes[1], name="w")
        return [x, w, topi.nn.conv2d_nchw(x, w, CONV[2], CONV[3], CONV[4])]
    if name == "softmax":
        x = te.placeholder(shapes[0], name="x")
        return [x, topi.nn.softmax(x, axis=1)]
    x, g, b = (te.placeholder(s, name=n) for s, n in zip(shapes, "xgb"))
    return [x, g, b, topi.nn.layer_norm(x, g, b, axis=[1], epsilon=1e-5)]


def tune_tecomp(name, trials, log):
    """tecomp's best module for ``name`` after ``trials`` trials logged into ``log``, and
    a function giving its arguments from the workload's arrays (a packed weight)."""
    task = autotune.create_task(WORKLOADS[name][0], tecomp_args(name))
    if not os.path.exists(log):
        t0 = time.perf_counter()
        autotune.XGBTuner(task, seed=0).tune(
            trials, autotune.measure_option(autotune.LocalBuilder(),
                                            autotune.LocalRunner(number=2, repeat=3)),
            callbacks=[autotune.log_to_file(log)])
        print(f"  tecomp tuned {name} ({trials} trials) in {time.perf_counter() - t0:.0f} s")
    with autotune.apply_history_best(log):
        s, tensors = task.instantiate()
    if name != "conv3x3_packed":
        return tecomp.build(s, tensors), list
    blocking = kernel_blocking(tensors[1])
    return tecomp.build(s, tensors), lambda arrays: [
        arrays[0], pack_conv2d_kernel(arrays[1], *blocking), arrays[2]]


def tune_tvm(name, trials, work_dir, threads):
    """TVM's best function for ``name`` after MetaSchedule searched ``trials`` trials."""
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    func = te.create_prim_func(tvm_compute(name))
    target = tvm.target.Target({"kind": "llvm", "mcpu": as_target("llvm").mcpu,
                                "num-cores": threads})
    if not os.path.exists(os.path.join(work_dir, "database_tuning_record.json")):
        t0 = time.perf_counter()
        ms.tune_tir(func, target, work_dir, max_trials_global=trials,
                    num_trials_per_iter=64, seed=0)
        print(f"  TVM tuned {name} ({trials} trials) in {time.perf_counter() - t0:.0f} s")
    database = ms.database.JSONDatabase(work_dir=work_dir)
    sch = ms.tir_integration.compile_tir(database, func, target)
    if sch is None:
        raise SystemExit(f"MetaSchedule measured no valid schedule of {name} in {trials} "
                         f"trials ({work_dir})")
    return tvm.compile(sch.mod, target=target).jit()["main"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help=f"comma-separated, from {','.join(WORKLOADS)}")
    p.add_argument("--budgets", default="64,256", help="trial budgets (default 64,256)")
    p.add_argument("--work-dir", required=True,
                   help="where the tuning logs and MetaSchedule's databases are kept")
    p.add_argument("--rounds", type=int, default=15)
    fair.add_thread_option(p)
    ns = p.parse_args(argv)
    names = [n for n in ns.workloads.split(",") if n]
    bad = [n for n in names if n not in WORKLOADS]
    if bad:
        p.error(f"--workloads: unknown {bad}; choose from {','.join(WORKLOADS)}")
    budgets = [int(b) for b in ns.budgets.split(",") if b]
    # TVM's thread pool reads its size when it starts.
    os.environ["TVM_NUM_THREADS"] = str(ns.threads)
    fair.use_threads(ns.threads)
    import tvm

    # MetaSchedule logs every round of its search; its tuning time is printed here.
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    os.makedirs(ns.work_dir, exist_ok=True)
    fair.print_machine(ns.threads)
    print(f"TVM {tvm.__version__}")
    rows = []
    rng = np.random.default_rng(0)
    for name in names:
        shapes, flop = WORKLOADS[name][2], WORKLOADS[name][3]
        # The same inputs in the same memory for both (on a cache line, as TVM's own
        # arrays are: a 64-byte vector load of numpy's 16-byte aligned data spans two
        # lines); each its own output.
        arrays = [aligned.copy(rng.standard_normal(s).astype(np.float32)) for s in shapes]
        theirs_out = aligned.empty(shapes[-1], np.float32)
        tvm_arrays = [tvm.runtime.from_dlpack(a) for a in arrays[:-1] + [theirs_out]]
        if name in MEMORY_BOUND:
            copy, copy_out = copy_kernel(shapes[0]), aligned.empty(shapes[0], np.float32)
        for budget in budgets:
            tag = f"{name}_{budget}"
            ours, ours_args = tune_tecomp(name, budget,
                                          os.path.join(ns.work_dir, f"tecomp_{tag}.json"))
            # The packed-weight row times the same TVM kernel as the convolution's.
            theirs = tune_tvm(name, budget, os.path.join(
                ns.work_dir, f"tvm_{tag.replace('conv3x3_packed', 'conv3x3')}"), ns.threads)
            ours_arrays = ours_args(arrays)
            ours(*ours_arrays)
            theirs(*tvm_arrays)
            np.testing.assert_allclose(arrays[-1], theirs_out, rtol=1e-3, atol=1e-3)
            contenders = {"tvm": lambda: theirs(*tvm_arrays),
                          "tecomp": lambda: ours(*ours_arrays)}
            if name in MEMORY_BOUND:
                contenders["copy"] = lambda: copy(arrays[0], copy_out)
            t = paired(contenders, rounds=ns.rounds)
            med = {k: sorted(v)[len(v) // 2] for k, v in t.items()}
            rows.append((name, budget, flop / med["tecomp"] / 1e9, flop / med["tvm"] / 1e9,
                         median_ratio(t["tvm"], t["tecomp"])))
            print(f"{name:11s} {budget:5d} trials  tecomp {rows[-1][2]:7.1f} GFLOPS  "
                  f"TVM {rows[-1][3]:7.1f} GFLOPS  t_tvm / t_tecomp {rows[-1][4]:5.2f}")
            if "copy" in med:
                print(f"{'':11s} {'':5s}         a copy of the input {med['copy'] * 1e3:.3f} "
                      f"ms: tecomp at {med['copy'] / med['tecomp']:.2f}, TVM at "
                      f"{med['copy'] / med['tvm']:.2f} of its speed")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
