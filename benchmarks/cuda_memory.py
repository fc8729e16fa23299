"""Does device memory stay flat over a long tuning session? Loads, times and drops many
CUDA modules in one process, as the tuner's measuring process does, and prints the GPU's
free memory before, during and after.

    python benchmarks/cuda_memory.py                 # 10000 trials over 16 candidates
    python benchmarks/cuda_memory.py --trials 2000

The candidates are configs of ``matmul.cuda`` (256^3), built once and exported; each trial
loads one from its file (a module of its own, as a measurement of a new candidate is),
times it with CUDA events (``time_evaluator``) and drops it. Growth by more than a few MiB
over the session means something is not freed (modules, events, temporaries). Needs a GPU.
"""

from __future__ import annotations

import fair  # noqa: F401 - first: numpy's BLAS loads without OpenBLAS's overrides (fair.py)

import argparse
import gc
import os
import sys
import tempfile
import time

import numpy as np

import tecomp
from tecomp import autotune
from tecomp.runtime import load_module
from tecomp.runtime.cuda_driver import device_arch, driver


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=10000)
    p.add_argument("--candidates", type=int, default=16)
    opts = p.parse_args(argv)
    if device_arch() is None:
        print("cuda_memory: no CUDA GPU and driver on this machine; nothing to measure",
              file=sys.stderr)
        return 1
    task = autotune.create_task("matmul.cuda", (256, 256, 256, "float32"), "cuda")
    rng = np.random.default_rng(0)
    paths = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in rng.permutation(len(task.config_space)):
            if len(paths) == opts.candidates:
                break
            try:
                s, args = task.instantiate(task.config_space.get(int(index)))
                mod = tecomp.build(s, args, target="cuda")
            except tecomp.TecompError:
                continue  # a config over the block's limits: a build error
            paths.append(mod.export_library(os.path.join(tmp, f"c{len(paths)}.cubin")))
        arrays = [rng.standard_normal((256, 256)).astype("float32") for _ in range(3)]
        drv = driver()
        before, total = drv.memory_info()

        def trial(index):
            mod = load_module(paths[index % len(paths)])
            mod.time_evaluator(number=1, repeat=1, warmup_ms=0)(*arrays)

        # The first trial's memory is the driver's and the context's own (their first
        # module, launch and events), taken once: growth is counted from after it.
        trial(0)
        free0, _ = drv.memory_info()
        print(f"GPU {device_arch()}: {total / 2**30:.1f} GiB, {before / 2**20:.0f} MiB free "
              f"before, {free0 / 2**20:.0f} MiB after a first trial; {len(paths)} "
              f"candidates, {opts.trials} trials", flush=True)
        t0 = time.perf_counter()
        for index in range(opts.trials):
            trial(index)
            if (index + 1) % (opts.trials // 5 or 1) == 0:
                gc.collect()
                free, _ = drv.memory_info()
                print(f"  after {index + 1:6d} trials: {free / 2**20:.0f} MiB free "
                      f"({(free0 - free) / 2**20:+.1f} MiB used since the first), "
                      f"{time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
