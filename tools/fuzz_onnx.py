"""Fuzz tecomp's ONNX frontend and compiler with mutated models and inputs, compared with
onnxruntime (:mod:`tecomp.testing.onnx_fuzz`), and print how the cases ended.

Each case is a seed (an onnx backend test case or a small generated model) with one
mutation, run in its own forked process under a time and memory limit; case ``i`` of
``--seed S`` is the same case on every run, so any line of the report replays::

    python tools/fuzz_onnx.py --cases 5000 --seed 0 --check-bounds --out fuzz.json
    python tools/fuzz_onnx.py --seed 0 --replay 1234               # one case, isolated
    python tools/fuzz_onnx.py --seed 0 --replay 1234 --in-process  # ... with a traceback
    python tools/fuzz_onnx.py --seed 0 --replay 1234 --save case/  # model.onnx, inputs.npz
    python tools/fuzz_onnx.py --cases 300 --jobs 2 --seeds node,generated --skip-slow \
        --check-bounds                                 # the budget tests/testing runs

The table counts the cases per class; below it, per class that needs attention, the cases
grouped by operator and mutation kind with the first few of each (index, seed case,
mutation, message). ``--out`` writes JSON lines as the run goes: a header (the command,
seed, options), one line per case (its class, message, seed case, mutation) and a last line
with the counts; ``--rerun`` runs again the cases of such a file that needed attention::

    python tools/fuzz_onnx.py --seed 0 --check-bounds --rerun fuzz.json --out again.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

import numpy as np
import onnx

from tecomp.testing import onnx_fuzz


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=5000, help="how many cases (default 5000)")
    p.add_argument("--start", type=int, default=0, help="index of the first case")
    p.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="cases run at a time (default 1)")
    p.add_argument("--timeout", type=float, default=20.0,
                   help="CPU seconds a case may use, and seconds it may go without using "
                   "any, before it counts as a hang (default 20)")
    p.add_argument("--memory-mb", type=int, default=2048,
                   help="memory a case may allocate (default 2048)")
    p.add_argument("--check-bounds", action="store_true",
                   help="build with TECOMP_CHECK_BOUNDS=1: kernels check every access")
    p.add_argument("--seeds", default="node,generated,simple,pytorch-operator,"
                   "pytorch-converted", help="kinds of seed models, comma-separated")
    p.add_argument("--include-expanded", action="store_true",
                   help="also the function-expanded node tests as seeds")
    p.add_argument("--skip-slow", action="store_true",
                   help="leave out the seeds of operators that take seconds to compile "
                   f"({', '.join(onnx_fuzz.SLOW_OPS)}), as the test's budget does")
    p.add_argument("--examples", type=int, default=3,
                   help="cases shown per operator and mutation kind (default 3)")
    p.add_argument("--out", help="write the results to this file as JSON lines")
    p.add_argument("--rerun", metavar="REPORT",
                   help="run only the cases of an --out file that needed attention")
    p.add_argument("--replay", type=int, metavar="INDEX", help="run only case INDEX")
    p.add_argument("--in-process", action="store_true",
                   help="with --replay: run in this process and print tecomp's traceback")
    p.add_argument("--save", metavar="DIR",
                   help="with --replay: write the case's model.onnx and inputs.npz to DIR")
    return p


def _replay(ns, seeds) -> int:
    case = onnx_fuzz.make_case(seeds, ns.seed, ns.replay)
    print(f"case #{case.index} (seed {case.fuzz_seed}): {case.seed_name} [{case.op}]")
    print(f"  mutation {case.kind}: {case.detail}")
    if ns.save:
        os.makedirs(ns.save, exist_ok=True)
        onnx.save(case.model, os.path.join(ns.save, "model.onnx"))
        np.savez(os.path.join(ns.save, "inputs.npz"), **case.feeds)
        print(f"  saved {ns.save}/model.onnx and {ns.save}/inputs.npz")
    if ns.in_process:
        cls, message, ort_message, trace = onnx_fuzz.run_here(case,
                                                              check_bounds=ns.check_bounds)
    else:
        r, = onnx_fuzz.run_cases(seeds, seed=ns.seed, indices=[ns.replay], timeout=ns.timeout,
                                 memory_mb=ns.memory_mb, check_bounds=ns.check_bounds)
        cls, message, ort_message, trace = r.cls, r.message, r.ort_message, r.trace
    print(f"  {cls}: {message}")
    print(f"  onnxruntime: {ort_message or 'ran it'}")
    if trace:
        print(trace)
    return 0 if cls in onnx_fuzz.CLEAN_CLASSES else 1


def main(argv=None) -> int:
    ns = _parser().parse_args(argv)
    t0 = time.monotonic()
    seeds = onnx_fuzz.load_seeds(ns.seeds.split(","), include_expanded=ns.include_expanded,
                                 skip_ops=onnx_fuzz.SLOW_OPS if ns.skip_slow else ())
    print(f"{len(seeds)} seed models ({time.monotonic() - t0:.1f} s)", file=sys.stderr)
    if ns.replay is not None:
        return _replay(ns, seeds)

    if ns.rerun:
        with open(ns.rerun) as fh:
            indices = [r["index"] for r in map(json.loads, fh)
                       if r.get("cls") not in (None, *onnx_fuzz.CLEAN_CLASSES)]
        which = f"{len(indices)} cases that needed attention in {ns.rerun}"
    else:
        indices = list(range(ns.start, ns.start + ns.cases))
        which = f"indices {ns.start}..{ns.start + ns.cases - 1}"
    command = "python " + " ".join(shlex.quote(a) for a in
                                   ["tools/fuzz_onnx.py", *(argv or sys.argv[1:])])
    out = open(ns.out, "w") if ns.out else None  # noqa: SIM115 - written as the run goes
    if out:
        _write(out, {"command": command, "seed": ns.seed, "cases": len(indices),
                     "check_bounds": ns.check_bounds, "seeds": len(seeds),
                     "onnx": onnx.__version__})
    done = []
    t1 = time.monotonic()

    def progress(result):
        done.append(result)
        if out:
            _write(out, result.to_json())
        if len(done) % 100 == 0 or len(done) == len(indices):
            rate = len(done) / (time.monotonic() - t1)
            bad = sum(r.cls not in onnx_fuzz.CLEAN_CLASSES for r in done)
            print(f"  {len(done)}/{len(indices)} cases, {rate:.1f}/s, {bad} need attention",
                  file=sys.stderr, flush=True)

    results = onnx_fuzz.run_cases(seeds, seed=ns.seed, indices=indices, jobs=ns.jobs,
                                  timeout=ns.timeout, memory_mb=ns.memory_mb,
                                  check_bounds=ns.check_bounds, on_result=progress)
    elapsed = time.monotonic() - t0
    print(f"{command}\n{len(results)} cases ({which}, seed {ns.seed}) from {len(seeds)} "
          f"seeds in {elapsed:.0f} s, check_bounds={'on' if ns.check_bounds else 'off'}, "
          f"onnx {onnx.__version__}\n")
    print(onnx_fuzz.summary_table(results, examples=ns.examples))
    if out:
        _write(out, {"counts": onnx_fuzz.counts(results), "seconds": round(elapsed, 1)})
        out.close()
    return 0 if all(r.cls in onnx_fuzz.CLEAN_CLASSES for r in results) else 1


def _write(fh, record: dict) -> None:
    fh.write(json.dumps(record) + "\n")
    fh.flush()


if __name__ == "__main__":
    sys.exit(main())
