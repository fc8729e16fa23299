"""Two versions of tecomp on the same models, paired: did a change cost time?

    python benchmarks/compare_trees.py --base /path/to/old/checkout --models resnet18,bert_encoder

Each version runs in a worker process of its own (``PYTHONPATH`` set to its checkout; the
current checkout is the default for ``--head``) that builds every model once, with fixed
shapes (or with ``--dynamic``, with its symbolic axes, an image's height and width made
symbolic too: one build for every shape), and then waits. The driver asks the two
workers in turn to time a batch of runs of one model, alternating which goes first, so
both meet the same drift of a shared machine
(see docs/measuring.md); the figure for each model is the median over rounds of
t_head / t_base (< 1: the head is faster) with the range of the per-round ratios beside
it. Both workers run on ``--threads`` threads (``OMP_NUM_THREADS``, which every version
of tecomp honours) and are never timed at the same time. The outputs of the two builds
are compared too. Only the oldest API is used (``from_onnx``, ``graph.build``,
``GraphModule``, ``tecomp.testing.models``), so any checkout from the last weeks runs.
"""

from __future__ import annotations

import fair  # noqa: F401 - first: numpy's BLAS loads without OpenBLAS's overrides (fair.py)

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

WORKER = r"""
import json, sys, time
import numpy as np
import onnx
from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.testing import models

builders = {"bert_encoder": models.bert_encoder, "gpt2_decoder": models.gpt2_decoder,
            "mobilenet_v2": models.mobilenet_v2, "resnet18": models.resnet,
            "yolo_detector": models.yolo_detector, "unet": models.unet}
batch, seq, dynamic = int(sys.argv[1]), int(sys.argv[2]), sys.argv[4] == "dynamic"
image = {"image": int(sys.argv[5])} if sys.argv[5] != "-" else {}
built = {}
for name in sys.argv[3].split(","):
    model = (builders[name](**(image if name not in ("bert_encoder", "gpt2_decoder") else {}))
             if name in builders else onnx.load(name) if name.endswith(".onnx")
             else onnx.load(models.light_model_path(name.removeprefix("light_"))))
    feeds = models.example_inputs(model, batch=batch, seq=seq)
    images = [i for i in model.graph.input if len(i.type.tensor_type.shape.dim) == 4]
    if dynamic and images:
        # One build for every image size: the height and width symbolic too, and the
        # outputs' shapes left to the import.
        for i in images:
            for k, d in enumerate(i.type.tensor_type.shape.dim[2:]):
                d.dim_param = f"{i.name}_{('height', 'width')[k]}"
        for o in model.graph.output:
            o.type.tensor_type.ClearField("shape")
    mod, params = from_onnx(model, shape=None if dynamic else
                            {k: v.shape for k, v in feeds.items()})
    gm = GraphModule(build(mod, target="llvm", params=params))
    gm(**feeds)
    built[name] = (gm, feeds)
print(json.dumps("ready"), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "outputs":
        gm, feeds = built[request["model"]]
        np.savez(request["path"], *gm(**feeds))
        print(json.dumps("saved"), flush=True)
        continue
    gm, feeds = built[request["model"]]
    times = []
    for _ in range(request["runs"]):
        t0 = time.perf_counter()
        gm(**feeds)
        times.append(time.perf_counter() - t0)
    print(json.dumps(sorted(times)[len(times) // 2]), flush=True)
"""


class Worker:
    """One tecomp checkout in a process of its own, answering timing requests."""

    def __init__(self, tree: str, args, threads: int):
        env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), OMP_NUM_THREADS=str(threads),
                   TECOMP_NUM_THREADS=str(threads))
        self.tree = tree
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, *args], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     cwd=os.path.abspath(tree))

    def ask(self, request: dict | None = None):
        if request is not None:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the worker for {self.tree} ended (its error is above)")
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def cpu_name() -> str:
    """The CPU's model name as /proc/cpuinfo gives it."""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def revision(tree: str) -> str:
    out = subprocess.run(["git", "-C", tree, "log", "-1", "--format=%h %s"],
                         capture_output=True, text=True)
    return out.stdout.strip()[:80] or tree


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="checkout of the version to compare against")
    p.add_argument("--head", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   help="checkout of the version measured (default: this one)")
    p.add_argument("--models", default="resnet18,mobilenet_v2,bert_encoder,gpt2_decoder",
                   help="tecomp.testing.models builders, light_<name> for the onnx "
                        "wheel's models, or paths of .onnx files")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--runs", type=int, default=20, help="runs timed per round (median kept)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dynamic", action="store_true",
                   help="keep the models' symbolic axes, and make an image's height and "
                        "width symbolic (one build for every shape); default: build for "
                        "the shapes timed")
    p.add_argument("--image", type=int, default=None,
                   help="image size of the image builders (default: each one's own)")
    opts = p.parse_args()
    names = [n for n in opts.models.split(",") if n]
    args = [str(opts.batch), str(opts.seq), ",".join(names),
            "dynamic" if opts.dynamic else "fixed",
            "-" if opts.image is None else str(opts.image)]
    t0 = time.perf_counter()
    base, head = Worker(opts.base, args, opts.threads), Worker(opts.head, args, opts.threads)
    for worker in (base, head):
        worker.ask()
    print(f"cpu: {cpu_name()}; {opts.threads} threads; "
          f"built both in {time.perf_counter() - t0:.0f} s")
    print(f"base: {revision(opts.base)}\nhead: {revision(opts.head)}")
    print(f"{'model':<20} {'base ms':>9} {'head ms':>9} {'head/base':>10} {'range':>13} "
          f"{'max |diff|':>11}")
    for name in names:
        outs = []
        for worker, tag in ((base, "base"), (head, "head")):
            path = f"/tmp/compare_trees_{os.getpid()}_{tag}.npz"
            worker.ask({"op": "outputs", "model": name, "path": path})
            with np.load(path) as saved:
                outs.append([saved[k] for k in saved.files])
            os.unlink(path)
        diff = max(float(np.max(np.abs(a - b), initial=0.0)) for a, b in zip(*outs))
        t_base, t_head, ratios = [], [], []
        for r in range(opts.rounds):
            order = (base, head) if r % 2 == 0 else (head, base)
            got = {id(w): w.ask({"op": "time", "model": name, "runs": opts.runs}) for w in order}
            t_base.append(got[id(base)])
            t_head.append(got[id(head)])
            ratios.append(got[id(head)] / got[id(base)])
        print(f"{name:<20} {statistics.median(t_base) * 1e3:9.3f} "
              f"{statistics.median(t_head) * 1e3:9.3f} {statistics.median(ratios):10.3f} "
              f"{min(ratios):6.3f}-{max(ratios):.3f} {diff:11.2e}", flush=True)
    base.close()
    head.close()


if __name__ == "__main__":
    main()
