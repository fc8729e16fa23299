"""Where an ONNX model's time goes: per-kernel times of the built model beside the model
total and ONNX Runtime's total, paired.

    python benchmarks/profile_model.py model.onnx
    python benchmarks/profile_model.py model.onnx --input-shape input_ids:2,128 --top 20
    python benchmarks/profile_model.py model.onnx --tuning-records log.json

The model is built untuned (default schedules, fallback configs and the shipped logs)
unless ``--tuning-records`` gives a log. Each kernel is timed on the arguments a run
gives it (``GraphModule.profile``), inside whole runs (``in_run=True``: it finds the
caches as the kernels before it left them) and alone (its operands warm), and printed
with both medians, the minimum alone (on a busy machine the least disturbed), its share
of the in-run sum, its operators and where its schedule came from. A kernel much slower
in a run than alone waits on memory: its operands were not in cache. Then tecomp's and
ONNX Runtime's model
latency (both on ``--threads`` threads, default 2), as the median of interleaved rounds
and the median of the per-round ratios (see docs/measuring.md). Symbolic input sizes
are 1 unless ``--input-shape`` fixes them, for ONNX Runtime too (free-dimension
overrides). Run it on an idle machine; it prints the CPU it ran on.
"""

from __future__ import annotations

import fair  # first: numpy's BLAS must load without OpenBLAS's overrides (fair.py)

import argparse
import contextlib
import statistics
import time

import numpy as np
import onnx

from tecomp.autotune import apply_history_best
from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build, dims
from tecomp.timing import median_ratio, paired

_NUMPY_DTYPES = {"float32": np.float32, "float64": np.float64, "int64": np.int64,
                 "int32": np.int32, "bool": np.bool_, "float16": np.float16}


def _parse_shapes(items) -> dict:
    shapes = {}
    for item in items or ():
        name, _, dims_ = item.rpartition(":")
        shapes[name] = tuple(int(d) for d in dims_.split(","))
    return shapes


def _inputs(mod, rng) -> dict:
    """Random inputs for the graph's inputs, symbolic sizes bound to 1."""
    feeds = {}
    for name in mod.inputs:
        t = mod.types[name]
        shape = tuple(d if dims.is_static(d) else 1 for d in t.shape)
        if t.dtype.startswith("float"):
            feeds[name] = rng.standard_normal(shape).astype(t.dtype)
        elif t.dtype == "bool":
            feeds[name] = np.ones(shape, bool)
        else:
            # Integer inputs are usually indices (token ids) or masks: small values fit both.
            feeds[name] = rng.integers(0, 2, shape).astype(_NUMPY_DTYPES[t.dtype])
    return feeds


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="an .onnx file")
    parser.add_argument("--input-shape", action="append", metavar="NAME:D0,D1,...",
                        help="fix an input's shape (repeatable)")
    parser.add_argument("--tuning-records", help="a tuning log to build with")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="tecomp's build(precision=...); onnxruntime stays float32")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--top", type=int, default=0, help="print only the N slowest kernels")
    parser.add_argument("--no-ort", action="store_true", help="skip ONNX Runtime")
    fair.add_thread_option(parser)
    args = parser.parse_args(argv)
    fair.use_threads(args.threads)
    fair.print_machine(args.threads)

    shapes = _parse_shapes(args.input_shape)
    t0 = time.perf_counter()
    mod, params = from_onnx(args.model, shape=shapes or None)
    with (apply_history_best(args.tuning_records) if args.tuning_records
          else contextlib.nullcontext()):
        lib = build(mod, target="llvm", params=params, precision=args.precision)
    compile_s = time.perf_counter() - t0
    gm = GraphModule(lib)
    feeds = _inputs(mod, np.random.default_rng(0))
    for name, value in feeds.items():
        gm.set_input(name, value)

    kernels = {k.name: k for k in lib.kernels}
    in_run = gm.profile(number=3, repeat=15, in_run=True)
    alone = gm.profile(number=3, repeat=15)
    times = [(name, run.median, t.median, t.min)
             for (name, run), (_, t) in zip(in_run, alone)]
    total = sum(t[1] for t in times)
    rows = sorted(times, key=lambda t: -t[1]) if args.top else times
    print(f"{args.model}: {len(times)} kernels, built in {compile_s:.1f} s")
    print(f"{'kernel':40s} {'in run ms':>9s} {'alone ms':>9s} {'min ms':>8s} {'share':>6s}  "
          f"schedule          ops")
    for name, run, med, low in rows[:args.top or None]:
        k = kernels[name]
        print(f"{name[:40]:40s} {run * 1e3:9.3f} {med * 1e3:9.3f} {low * 1e3:8.3f} "
              f"{run / total:6.1%}  {k.schedule:17s} {'+'.join(k.ops)}")
    print(f"{'sum of kernels':40s} {total * 1e3:9.3f} {sum(t[2] for t in times) * 1e3:9.3f} "
          f"{sum(t[3] for t in times) * 1e3:8.3f}")

    contenders = {"tecomp": gm.run}
    if not args.no_ort:
        sess = fair.ort_session(args.model, args.threads,
                                {n: v.shape for n, v in feeds.items()})
        names = [i.name for i in sess.get_inputs()]
        ort_feeds = {n: feeds[n] for n in names}
        contenders["onnxruntime"] = lambda: sess.run(None, ort_feeds)
        ours = gm(**feeds)
        theirs = sess.run(None, ort_feeds)
        err = max(float(np.max(np.abs(a.astype(np.float64) - b))) for a, b in zip(ours, theirs)
                  if a.size)
    rounds = paired(contenders, rounds=args.rounds)
    med = {name: statistics.median(t) * 1e3 for name, t in rounds.items()}
    print(f"{'model (tecomp)':40s} {med['tecomp']:9.3f}")
    if not args.no_ort:
        ratio = median_ratio(rounds["tecomp"], rounds["onnxruntime"])
        print(f"{'model (onnxruntime)':40s} {med['onnxruntime']:9.3f}")
        print(f"tecomp / onnxruntime: {ratio:.2f}x (median of {args.rounds} paired rounds, "
              f"{args.threads} threads); max abs error {err:.2e}")
    print(f"onnx {onnx.__version__}, threads {args.threads}")


if __name__ == "__main__":
    main()
