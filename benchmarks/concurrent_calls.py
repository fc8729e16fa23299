"""One loaded model called by 1 and by 2 threads at once: throughput and its ratio.

    python benchmarks/concurrent_calls.py                      # ResNet-18, batch 1, 224x224
    python benchmarks/concurrent_calls.py --model mobilenet_v2 --rounds 9
    python benchmarks/concurrent_calls.py --threads 1          # one kernel thread per caller

An inference server calls one loaded model from several threads (``gm(**inputs)`` is safe
to call so: each call runs on a memory plan of its own). This measures what a second
concurrent caller adds. Each round times the two contenders in alternation, each after an
untimed warm-up of its own: for ``--window`` seconds, 1 thread (or 2 threads) call the
model in a loop on their own inputs; calls/s is the calls finished over the time from the
start until the last caller stops. It prints each contender's median calls/s, the median
over rounds of the per-round ratio (calls/s of 2 callers / 1 caller: above 1 the second
caller adds throughput), the CPU seconds the process used per second (above 1 the
calls ran on several cores at once; on a machine shared with other work, the share it got)
and checks every result of every call against the serial result,
bit for bit.

Each call's parallel loops use ``--threads`` threads (default 2) when they find tecomp's
thread pool free; a loop started while another caller's loop owns the pool runs on its
caller alone (docs/measuring.md). Run it on an otherwise idle machine; it prints the CPU it ran on.
"""

from __future__ import annotations

import fair  # first: numpy's BLAS must load without OpenBLAS's overrides (fair.py)

import argparse
import os
import statistics
import threading
import time

import numpy as np

from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.testing import models

BUILDERS = {"resnet18": models.resnet, "mobilenet_v2": models.mobilenet_v2}


def _callers(gm, feeds: list, refs: list, callers: int, window_s: float) -> tuple:
    """``callers`` threads call ``gm`` on ``feeds`` (each its own share, in turn) until
    ``window_s`` seconds have passed; returns (calls finished, seconds, wrong results,
    CPU seconds the process used per second)."""
    start = threading.Barrier(callers + 1)
    counts, wrong = [0] * callers, [0] * callers
    deadline = [0.0]

    def caller(k):
        mine = list(range(k, len(feeds), callers))
        start.wait()
        i = 0
        while time.perf_counter() < deadline[0]:
            j = mine[i % len(mine)]
            out = gm(**feeds[j])
            wrong[k] += not all(np.array_equal(o, r) for o, r in zip(out, refs[j]))
            counts[k] += 1
            i += 1

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(callers)]
    for t in threads:
        t.start()
    t0, cpu0 = time.perf_counter(), time.process_time()
    deadline[0] = t0 + window_s
    start.wait()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    return sum(counts), seconds, sum(wrong), (time.process_time() - cpu0) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=sorted(BUILDERS), default="resnet18")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--image", type=int, default=224)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--window", type=float, default=0.5,
                        help="seconds per timed batch (at least 10 serial calls' time)")
    parser.add_argument("--warmup", type=float, default=0.2, help="seconds untimed before")
    parser.add_argument("--inputs", type=int, default=8, help="distinct inputs")
    fair.add_thread_option(parser)
    args = parser.parse_args()
    fair.use_threads(args.threads)
    fair.print_machine(args.threads)

    model = BUILDERS[args.model](image=args.image)
    t0 = time.perf_counter()
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, params=params))
    build_s = time.perf_counter() - t0
    feeds = [models.example_inputs(model, batch=args.batch, seed=s) for s in range(args.inputs)]
    refs = [gm(**f) for f in feeds]
    call_times = []
    for f in feeds:
        t0 = time.perf_counter()
        gm(**f)
        call_times.append(time.perf_counter() - t0)
    call_s = statistics.median(call_times)
    # A window of a few calls only would count whole calls too coarsely.
    window_s = max(args.window, 10 * call_s)

    print(f"{args.model} batch {args.batch} {args.image}x{args.image}, built in "
          f"{build_s:.1f} s; {os.cpu_count()} cores, {args.threads} threads per call; one "
          f"call {call_s * 1e3:.1f} ms")
    rates, cores = {1: [], 2: []}, {1: [], 2: []}
    wrong = total = 0
    for _ in range(args.rounds):
        for callers in rates:
            _callers(gm, feeds, refs, callers, args.warmup)
            calls, seconds, bad, cpu = _callers(gm, feeds, refs, callers, window_s)
            rates[callers].append(calls / seconds)
            cores[callers].append(cpu)
            wrong, total = wrong + bad, total + calls
    ratio = statistics.median(two / one for one, two in zip(rates[1], rates[2]))
    for callers, r in rates.items():
        print(f"{callers} caller{'s' if callers > 1 else ' '}: {statistics.median(r):8.1f} "
              f"calls/s, {statistics.median(cores[callers]):.2f} CPU s per s "
              f"(median of {args.rounds} rounds of {window_s:.2f} s)")
    print(f"2 callers / 1 caller: {ratio:.2f}x (median of per-round ratios)")
    print(f"results equal to the serial ones: {total - wrong} of {total}")


if __name__ == "__main__":
    main()
