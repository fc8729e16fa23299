"""A model run alone and beside a process that holds a core, by tecomp and by ONNX Runtime.

    python benchmarks/busy_core.py                          # MobileNetV2, batch 1, 224x224
    python benchmarks/busy_core.py --model resnet18 --rounds 9 --threads 2

The model is built once and exported; each runtime then runs it in a fresh process of its
own (neither's idle threads disturb the other): tecomp's exported library, with the
thread pool it carries, and an ONNX Runtime session of the same ONNX model at the same
fixed shapes. Each round times ``--calls`` runs of the model alone, then with a CPU hog
beside it (one process spinning in a loop, started for the batch and ended after it), and
prints for each runtime the median milliseconds per run of both and their ratio (beside
the hog / alone). A thread pool whose caller waits for a worker stuck behind the hog pays
a scheduler tick per parallel loop; one whose caller takes the work no worker has claimed
degrades by about the core the hog takes (docs/measuring.md). Both run on ``--threads``
threads (default 2). Figures from a machine that other work also loads say how the
runtimes differ there, not how fast the model is.
"""

from __future__ import annotations

import fair  # first: numpy's BLAS must load without OpenBLAS's overrides (fair.py)

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

from tecomp.testing import models

BUILDERS = {"mobilenet_v2": models.mobilenet_v2, "resnet18": models.resnet}

#: The runtimes compared, each measured in a process of its own.
RUNTIMES = ("tecomp", "onnxruntime")

_HOG = "while True:\n    pass\n"


def _ms_per_run(run, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - t0) / calls * 1e3


def _runner(runtime: str, files: dict, threads: int):
    """A no-argument call that runs the model once in ``runtime``."""
    feeds = dict(np.load(files["inputs"]))
    if runtime == "tecomp":
        from tecomp.graph import GraphModule, load

        gm = GraphModule(load(files["library"]))
        return lambda: gm(**feeds)
    sess = fair.ort_session(files["model"], threads, {k: v.shape for k, v in feeds.items()})
    return lambda: sess.run(None, feeds)


def measure(runtime: str, files: dict, rounds: int, calls: int, threads: int) -> dict:
    """In this process: medians of ms per run alone and beside a hog, over ``rounds``."""
    run = _runner(runtime, files, threads)
    _ms_per_run(run, calls)  # warm-up: threads started, caches filled
    alone, busy = [], []
    for _ in range(rounds):
        alone.append(_ms_per_run(run, calls))
        hog = subprocess.Popen([sys.executable, "-c", _HOG])
        try:
            time.sleep(0.2)  # the hog is running before timing starts
            busy.append(_ms_per_run(run, calls))
        finally:
            hog.kill()
            hog.wait()
    return {"alone": statistics.median(alone), "busy": statistics.median(busy),
            "ratio": statistics.median(b / a for a, b in zip(alone, busy))}


def _run_measuring_process(argv: list) -> dict:
    res = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True,
                         check=False)
    if res.returncode != 0:
        raise SystemExit(f"the measuring process failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(BUILDERS), default="mobilenet_v2")
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=20, help="model runs per timed batch")
    p.add_argument("--measure", nargs=2, metavar=("RUNTIME", "FILES"), help=argparse.SUPPRESS)
    fair.add_thread_option(p)
    ns = p.parse_args(argv)
    fair.use_threads(ns.threads)
    if ns.measure:
        runtime, files = ns.measure
        print(json.dumps(measure(runtime, json.loads(files), ns.rounds, ns.calls, ns.threads)))
        return

    from tecomp.frontend import from_onnx
    from tecomp.graph import build

    fair.print_machine(ns.threads)
    model = BUILDERS[ns.model](image=ns.image)
    feeds = models.example_inputs(model, batch=1)
    mod, params = from_onnx(model, shape={k: v.shape for k, v in feeds.items()})
    lib = build(mod, params=params)
    print(f"{ns.model} batch 1 {ns.image}x{ns.image}: {len(lib.kernels)} kernels; "
          f"{ns.rounds} rounds of {ns.calls} runs, medians (ms per run)")
    print(f"{'runtime':12s} {'alone':>8s} {'beside hog':>11s} {'ratio':>6s}")
    with tempfile.TemporaryDirectory() as tmp:
        files = {k: os.path.join(tmp, name) for k, name in
                 (("library", "model.so"), ("inputs", "inputs.npz"), ("model", "model.onnx"))}
        lib.export_library(files["library"])
        np.savez(files["inputs"], **feeds)
        onnx.save(model, files["model"])
        for runtime in RUNTIMES:
            r = _run_measuring_process(["--measure", runtime, json.dumps(files), "--rounds",
                                        str(ns.rounds), "--calls", str(ns.calls),
                                        "--threads", str(ns.threads)])
            print(f"{runtime:12s} {r['alone']:8.2f} {r['busy']:11.2f} {r['ratio']:6.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
