"""How much of the CPU's multiply-add peak a model reaches: tecomp, ONNX Runtime and OpenVINO
beside the machine's measured FMA peak and a 1024³ matmul, on the same threads.

    python benchmarks/peak_cpu.py resnet50.onnx --input-shape input:1,3,224,224
    python benchmarks/peak_cpu.py resnet50.onnx --input-shape input:1,3,224,224 \\
        --tuning-records resnet50.json --rounds 9

- **The FMA peak** is measured, not taken from a data sheet: a loop of 16 independent
  chains of vector fused multiply-adds as wide as the target's vectors (AVX-512: 16
  floats), compiled by LLVM for this CPU and run on ``--threads`` threads at once. Its
  rate is what the cores' FMA units reach at the clock they hold under that load. It is
  measured before and after the timings, and the run says so when the two differ (a
  virtual machine's cores are sometimes not all its own).
- **A model's multiply-adds** are those of the kernels tecomp tunes (convolutions, dense
  layers, matmuls: ``autotune.extract_tasks``, each task's FLOP count times the number of
  times it runs); elementwise work is left out. Each contender's rate is that count over
  its median time, in paired rounds (``tecomp.timing.paired``).
- **A 1024³ matmul**, numpy's (OpenBLAS on its own kernels, ``fair.py``) and tecomp's
  untuned one (the template's default config): the faster of the two is the practical
  ceiling a dense kernel reaches here.

Run it on an otherwise idle machine; it prints the CPU, the BLAS kernel and the threads.
"""

from __future__ import annotations

import fair  # first: numpy's BLAS must load without OpenBLAS's overrides (fair.py)

import argparse
import contextlib
import ctypes
import statistics
import threading
import time

import numpy as np
import onnx

import tecomp
from tecomp import autotune
from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.testing import models
from tecomp.timing import paired
from tecomp.topi.fused_group import anchor_workload

#: Independent accumulator chains in the peak loop: more than FMA latency x FMA pipes
#: (4 x 2 on the CPUs measured so far), so the loop waits on no result.
CHAINS = 16


def _fma_loop_ir(lanes: int) -> str:
    """LLVM IR of ``fma_loop(n, x, out)``: ``n`` iterations of ``CHAINS`` vector FMAs of
    ``lanes`` floats, ``acc = acc * x + x``; the sum of the chains is stored to ``out``
    so that nothing is left unused."""
    vt = f"<{lanes} x float>"
    lines = [f"declare {vt} @llvm.fma.v{lanes}f32({vt}, {vt}, {vt})",
             "define void @fma_loop(i64 %n, float %s, ptr %out) {",
             "entry:",
             f"  %x0 = insertelement {vt} poison, float %s, i64 0",
             f"  %x = shufflevector {vt} %x0, {vt} poison, <{lanes} x i32> zeroinitializer",
             "  br label %loop", "loop:",
             "  %i = phi i64 [0, %entry], [%i.next, %loop]"]
    for c in range(CHAINS):
        lines.append(f"  %a{c} = phi {vt} [%x, %entry], [%a{c}.next, %loop]")
    for c in range(CHAINS):
        lines.append(f"  %a{c}.next = call {vt} @llvm.fma.v{lanes}f32({vt} %a{c}, "
                     f"{vt} %x, {vt} %x)")
    lines += ["  %i.next = add i64 %i, 1", "  %more = icmp ult i64 %i.next, %n",
              "  br i1 %more, label %loop, label %exit", "exit:"]
    total = "%a0.next"
    for c in range(1, CHAINS):
        lines.append(f"  %s{c} = fadd {vt} {total}, %a{c}.next")
        total = f"%s{c}"
    lines += [f"  store {vt} {total}, ptr %out, align 4", "  ret void", "}"]
    return "\n".join(lines)


def fma_loop(lanes: int):
    """``(fma_loop, engine)``: the loop of :func:`_fma_loop_ir` compiled by LLVM for this CPU,
    as a ctypes function ``(n, x, out)`` (it releases the GIL while it runs); the engine
    owns its code."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = tecomp.Target("llvm")
    machine = llvm.Target.from_triple(target.mtriple).create_target_machine(
        cpu=target.mcpu, features=",".join(target.mattr), opt=3)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(_fma_loop_ir(lanes)), machine)
    engine.finalize_object()
    loop = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p)(
        engine.get_function_address("fma_loop"))
    return loop, engine


def fma_peak_gflops(threads: int, seconds: float = 0.3) -> float:
    """The measured float32 multiply-add rate of ``threads`` cores (GFLOP/s, two per FMA):
    the best of five runs of the peak loop on every thread at once."""
    lanes = max(4, tecomp.Target("llvm").vector_width_bits // 32)
    loop, _engine = fma_loop(lanes)
    out = np.zeros((threads, lanes), "float32")

    def run(n: int) -> float:
        start = threading.Barrier(threads + 1)

        def work(t):
            start.wait()
            loop(n, 0.5, out[t].ctypes.data)  # ctypes releases the GIL for the call

        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        start.wait()
        t0 = time.perf_counter()
        for w in workers:
            w.join()
        return time.perf_counter() - t0

    n = 1 << 20
    while run(n) < seconds / 4:
        n *= 2
    n = int(n * seconds / run(n))
    best = min(run(n) for _ in range(5))
    return threads * n * CHAINS * lanes * 2 / best / 1e9


def model_flop(mod, params) -> float:
    """Multiply-adds (two FLOPs each) of the model's tunable kernels, counted per run:
    of the operator each kernel tunes (a convolution, not the activation fused after
    it)."""
    tasks = autotune.extract_tasks(mod, params, target="llvm")
    return sum(t.weight * autotune.create_task(*anchor_workload(t), t.target).flop
               for t in tasks)


def matmul_gflops(rounds: int) -> dict:
    """numpy's and tecomp's 1024³ float32 matmul (the template's untuned config, or the
    shipped record for this CPU where there is one), GFLOP/s, paired."""
    n = 1024
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype("float32") for _ in range(2))
    s, tensors = autotune.create_task("matmul", (n, n, n, "float32")).instantiate()
    mod = tecomp.build(s, tensors)
    c, ref = np.empty((n, n), "float32"), np.empty((n, n), "float32")
    times = paired({"numpy": lambda: np.matmul(a, b, out=ref), "tecomp": lambda: mod(a, b, c)},
                   rounds=rounds)
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3)
    return {k: 2 * n ** 3 / statistics.median(v) / 1e9 for k, v in times.items()}


def _shape(text: str):
    name, _, dims = text.partition(":")
    try:
        return name, tuple(int(d) for d in dims.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give NAME:D0,D1,... with integer sizes") from None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="an ONNX model")
    p.add_argument("--input-shape", type=_shape, action="append", default=[],
                   metavar="NAME:D0,D1,...", help="fix an input's shape (repeatable)")
    p.add_argument("--tuning-records", default=None, help="a tuning log to build with")
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    fair.add_thread_option(p)
    opts = p.parse_args()
    fair.use_threads(opts.threads)
    fair.print_machine(opts.threads)

    peak_before = fma_peak_gflops(opts.threads)
    matmul = matmul_gflops(opts.rounds)
    model = onnx.load(opts.model)
    shapes = dict(opts.input_shape) or None
    mod, params = from_onnx(model, shape=shapes)
    flop = model_flop(mod, params)
    with (autotune.apply_history_best(opts.tuning_records) if opts.tuning_records
          else contextlib.nullcontext()):
        gm = GraphModule(build(mod, target="llvm", params=params))
    feeds = models.example_inputs(model)
    if shapes:
        feeds.update({k: np.random.default_rng(0).standard_normal(shape).astype("float32")
                      for k, shape in shapes.items()})
    sess = fair.ort_session(model, opts.threads, shapes)
    contenders = {"tecomp" + (" tuned" if opts.tuning_records else " untuned"):
                  lambda: gm(**feeds), "onnxruntime": lambda: sess.run(None, feeds)}
    openvino = fair.openvino_run(model, opts.threads, shapes)
    if openvino is not None:
        contenders["openvino (f32)"] = lambda: openvino(feeds)
    times = paired(contenders, rounds=opts.rounds)
    peak_after = fma_peak_gflops(opts.threads)
    peak = max(peak_before, peak_after)

    print(f"FMA peak ({CHAINS} chains, {opts.threads} threads): {peak:.0f} GFLOP/s "
          f"(before the timings {peak_before:.0f}, after them {peak_after:.0f})")
    if min(peak_before, peak_after) < 0.9 * peak:
        print("the machine's speed changed during the run: the figures are not comparable; "
              "run it again on an idle machine")
    print(f"1024^3 matmul: numpy {matmul['numpy']:.0f} GFLOP/s "
          f"({matmul['numpy'] / peak:.0%} of peak), tecomp untuned {matmul['tecomp']:.0f} "
          f"({matmul['tecomp'] / peak:.0%})")
    print(f"{opts.model}: {flop / 1e9:.2f} GFLOP per run in its convolutions and dense "
          f"layers")
    ceiling = max(matmul.values())
    print(f"{'contender':<20} {'ms':>8} {'GFLOP/s':>8} {'of peak':>8} {'of best matmul':>15}")
    for name, t in times.items():
        rate = flop / statistics.median(t) / 1e9
        print(f"{name:<20} {statistics.median(t) * 1e3:8.2f} {rate:8.0f} {rate / peak:8.0%} "
              f"{rate / ceiling:15.0%}")


if __name__ == "__main__":
    main()
