"""A model run alone and beside a process that holds a core, under each libgomp wait policy.

    python benchmarks/busy_core.py                          # MobileNetV2, batch 1, 224x224
    python benchmarks/busy_core.py --model resnet18 --rounds 9 --threads 2

The model is built once and exported; each wait policy then runs it in a fresh process
(libgomp reads the policy once, when it loads): tecomp's own (a short spin, then sleep:
``tecomp.runtime.threads.SPIN_COUNT``), libgomp's default (spin about a millisecond,
``GOMP_SPINCOUNT=300000``) and ``OMP_WAIT_POLICY=PASSIVE`` (sleep at once). Each round
times ``--calls`` runs of the model alone, then with a CPU hog beside it (one process
spinning in a loop, started for the batch and ended after it), and prints for each policy
the median milliseconds per run of both and their ratio (beside the hog / alone). A
policy that spins through its time slice while the thread its parallel loop waits for
sits behind the hog pays a scheduler tick per kernel; one that yields degrades by about
the core the hog takes (docs/measuring.md). The model runs on ``--threads`` threads
(default 2). Figures from a machine that other work also loads say how the policies
differ there, not how fast the model is.
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

from tecomp.testing import models

BUILDERS = {"mobilenet_v2": models.mobilenet_v2, "resnet18": models.resnet}

#: Wait policies compared: a name, and the variables set for the run (tecomp's own is
#: what it sets when none is given).
POLICIES = {
    "tecomp (short spin)": {},
    "libgomp default (long spin)": {"GOMP_SPINCOUNT": "300000"},
    "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
}

_HOG = "while True:\n    pass\n"


def _ms_per_run(gm, feeds: dict, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        gm(**feeds)
    return (time.perf_counter() - t0) / calls * 1e3


def measure(library: str, inputs: str, rounds: int, calls: int) -> dict:
    """In this process (started with one wait policy): medians of ms per run alone and
    beside a hog, over ``rounds`` rounds, with the policy libgomp got."""
    from tecomp.graph import GraphModule, load
    from tecomp.runtime import threads

    gm = GraphModule(load(library))
    feeds = dict(np.load(inputs))
    _ms_per_run(gm, feeds, calls)  # warm-up: threads started, caches filled
    alone, busy = [], []
    for _ in range(rounds):
        alone.append(_ms_per_run(gm, feeds, calls))
        hog = subprocess.Popen([sys.executable, "-c", _HOG])
        try:
            time.sleep(0.2)  # the hog is running before timing starts
            busy.append(_ms_per_run(gm, feeds, calls))
        finally:
            hog.kill()
            hog.wait()
    return {"alone": statistics.median(alone), "busy": statistics.median(busy),
            "ratio": statistics.median(b / a for a, b in zip(alone, busy)),
            "policy": threads.wait_policy()}


def _run_policy(env_extra: dict, argv: list) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(env_extra)
    res = subprocess.run([sys.executable, __file__, *argv], env=env, capture_output=True,
                         text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"the measuring process failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(BUILDERS), default="mobilenet_v2")
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=20, help="model runs per timed batch")
    p.add_argument("--measure", nargs=2, metavar=("LIBRARY", "INPUTS"), help=argparse.SUPPRESS)
    fair.add_thread_option(p)
    ns = p.parse_args(argv)
    fair.use_threads(ns.threads)
    if ns.measure:
        print(json.dumps(measure(*ns.measure, ns.rounds, ns.calls)))
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
    print(f"{'libgomp wait':30s} {'alone':>8s} {'beside hog':>11s} {'ratio':>6s}  as set")
    with tempfile.TemporaryDirectory() as tmp:
        library, inputs = os.path.join(tmp, "model.so"), os.path.join(tmp, "inputs.npz")
        lib.export_library(library)
        np.savez(inputs, **feeds)
        child = ["--measure", library, inputs, "--rounds", str(ns.rounds), "--calls",
                 str(ns.calls), "--threads", str(ns.threads)]
        for name, env in POLICIES.items():
            r = _run_policy(env, child)
            print(f"{name:30s} {r['alone']:8.2f} {r['busy']:11.2f} {r['ratio']:6.2f}  "
                  f"{r['policy']}", flush=True)


if __name__ == "__main__":
    main()
