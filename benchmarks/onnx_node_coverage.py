"""Run onnx's whole backend test suite with tecomp's backend and print what passes.

Every test case shipped in the onnx wheel (node, pytorch-converted, pytorch-operator, simple
and real "light" models) runs in a worker process, so a crash ends one case, not the run.
Each case ends in one of:

``pass``      the outputs match onnx's reference data;
``wrong``     the model built and ran but an output differs (or has the wrong shape/type);
``rejected``  a clear tecomp error before or while building (``UnsupportedOpError``,
              ``ModelError`` or another ``TecompError``): what an unsupported model must get;
``error``     another Python exception: a bug, the traceback's last line is printed;
``crash``     the worker process died (a segfault) or ran past ``--timeout``.

Per category it prints the counts, then per operator (node tests, by the operator of the
test's first node other than Constant; a function-expanded test counts under its first
primitive) the cases that do not pass, largest groups first::

    python benchmarks/onnx_node_coverage.py                        # everything
    python benchmarks/onnx_node_coverage.py --kind node --jobs 2   # node tests only
    python benchmarks/onnx_node_coverage.py --filter 'test_conv' --verbose
    python benchmarks/onnx_node_coverage.py --kind node --device CUDA --jobs 16   # on a GPU
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import selectors
import subprocess
import sys
import time
import traceback
import unittest

import onnx
import onnx.backend.test
from onnx.backend.test.loader import load_node_model_tests

import tecomp.frontend.onnx_backend as backend
from tecomp.errors import TecompError

CATEGORIES = {
    "OnnxBackendNodeModelTest": "node",
    "OnnxBackendPyTorchConvertedModelTest": "pytorch-converted",
    "OnnxBackendPyTorchOperatorModelTest": "pytorch-operator",
    "OnnxBackendSimpleModelTest": "simple",
    "OnnxBackendRealModelTest": "real",
}
STATUSES = ("pass", "wrong", "rejected", "error", "crash")


def _test_methods(device: str = "cpu") -> dict:
    """``test name -> (category, bound test method)`` for every case of the suite on
    ``device`` ("cpu" or "cuda": the suite's cases of that name end in it)."""
    suite = onnx.backend.test.BackendTest(backend, __name__)
    suite.include(f"_{device}$")
    methods = {}
    for cls_name, cls in suite.test_cases.items():
        for name in sorted(dir(cls)):
            if name.startswith("test_") and name.endswith(f"_{device}"):
                methods[name] = (CATEGORIES[cls_name], getattr(cls(name), name))
    return methods


def _node_models(device: str = "cpu") -> dict:
    """``test name -> ModelProto`` of the node tests (generated in memory by onnx)."""
    return {f"{case.name}_{device}": case.model for case in load_node_model_tests()}


def _device_of(name: str) -> str:
    return "cuda" if name.endswith("_cuda") else "cpu"


def _run_case(method, model, device: str = "cpu") -> tuple:
    """Run one test method (of the node test ``model`` if given); returns
    ``(status, detail)``."""
    try:
        method()
    except unittest.SkipTest:
        # The runner skips a model whose operators tecomp does not import; prepare must
        # then reject it with one clear error.
        return _reject_check(model, device)
    except AssertionError as e:
        return "wrong", " ".join(str(e).split())[:240] or "mismatch"
    except TecompError as e:
        return "rejected", _one_line(e)
    except Exception as e:  # noqa: BLE001 - every other exception is what this counts
        last = traceback.extract_tb(e.__traceback__)[-1]
        return "error", f"{_one_line(e)[:200]} [{os.path.basename(last.filename)}:{last.lineno}]"
    return "pass", ""


def _reject_check(model, device: str = "cpu") -> tuple:
    """For a case skipped as incompatible: whether ``prepare`` rejects ``model`` (when the
    suite gives it, as for node tests) with one clear error."""
    if model is None:
        return "rejected", "UnsupportedOpError (is_compatible)"
    try:
        backend.prepare(model, device=device.upper())
    except TecompError as e:
        return "rejected", _one_line(e)
    except Exception as e:  # noqa: BLE001 - any other exception is the defect this reports
        return "error", f"prepare of an incompatible model: {_one_line(e)}"
    return "error", "is_compatible said no but prepare built it"


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:240]


def _worker(names: list) -> None:
    """Run ``names`` in order, printing one JSON line per case as it ends."""
    device = _device_of(names[0]) if names else "cpu"
    methods, models = _test_methods(device), _node_models(device)
    for name in names:
        print(json.dumps({"name": name, "start": True}), flush=True)
        status, detail = _run_case(methods[name][1], models.get(name), device)
        print(json.dumps({"name": name, "status": status, "detail": detail}), flush=True)


def _run_all(names: list, jobs: int, timeout: int, verbose: bool) -> dict:
    """Run ``names`` in ``jobs`` worker processes; a worker that dies or hangs marks its
    current case ``crash`` and a new worker goes on with the rest."""
    chunks = [names[i::jobs] for i in range(jobs)]
    results: dict = {}
    running = []
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))

    def start(chunk):
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=env)
        proc.stdin.write("\n".join(chunk))
        proc.stdin.close()
        return proc, list(chunk)

    sel = selectors.DefaultSelector()
    for chunk in chunks:
        if chunk:
            proc, todo = start(chunk)
            state = {"proc": proc, "todo": todo, "current": None, "since": time.time()}
            sel.register(proc.stdout, selectors.EVENT_READ, state)
            running.append(state)
    while running:
        for key, _ in sel.select(timeout=5):
            state = key.data
            line = state["proc"].stdout.readline()
            if line:
                msg = json.loads(line)
                if msg.get("start"):
                    state["current"], state["since"] = msg["name"], time.time()
                    continue
                results[msg["name"]] = (msg["status"], msg["detail"])
                state["todo"].remove(msg["name"])
                state["current"] = None
                if verbose:
                    print(f"{msg['status']:8s} {msg['name']} {msg['detail']}", flush=True)
                continue
            _finish(state, sel, running, results, verbose, "worker died")
            if state["todo"]:
                _restart(state, start, sel, running)
        for state in list(running):
            if state["current"] and time.time() - state["since"] > timeout:
                state["proc"].kill()
                state["proc"].wait()
                _finish(state, sel, running, results, verbose, f"timeout after {timeout} s")
                if state["todo"]:
                    _restart(state, start, sel, running)
    return results


def _finish(state, sel, running, results, verbose, why) -> None:
    """A worker has ended: its current case (if any) crashed."""
    sel.unregister(state["proc"].stdout)
    running.remove(state)
    code = state["proc"].wait()
    if state["current"]:
        results[state["current"]] = ("crash", f"{why} (exit code {code})")
        state["todo"].remove(state["current"])
        if verbose:
            print(f"crash    {state['current']} {why}", flush=True)


def _restart(state, start, sel, running) -> None:
    proc, todo = start(state["todo"])
    new = {"proc": proc, "todo": todo, "current": None, "since": time.time()}
    sel.register(proc.stdout, selectors.EVENT_READ, new)
    running.append(new)


def _report(results: dict, categories: dict, operators: dict) -> None:
    """Print counts per category and the failing node tests grouped by operator."""
    print(f"{'category':18s} {'cases':>6s} " + " ".join(f"{s:>8s}" for s in STATUSES)
          + "   pass %")
    for cat in CATEGORIES.values():
        names = [n for n in results if categories[n] == cat]
        if not names:
            continue
        counts = collections.Counter(results[n][0] for n in names)
        print(f"{cat:18s} {len(names):6d} " + " ".join(f"{counts[s]:8d}" for s in STATUSES)
              + f"   {100 * counts['pass'] / len(names):5.1f}")
    failing = collections.defaultdict(list)
    for name, (status, _) in results.items():
        if categories[name] == "node" and status != "pass":
            failing[operators.get(name, "?")].append((name, status))
    if failing:
        print("\nnode tests that do not pass, per operator (largest first):")
        for op, cases in sorted(failing.items(), key=lambda kv: -len(kv[1])):
            counts = collections.Counter(s for _, s in cases)
            print(f"  {op:32s} {len(cases):4d}  "
                  + ", ".join(f"{s} {c}" for s, c in counts.most_common()))
    bad = [(n, r) for n, r in sorted(results.items()) if r[0] in ("error", "crash")]
    if bad:
        print("\nerrors and crashes (each should be a pass or a clear rejection):")
        for name, (status, detail) in bad:
            print(f"  {status:6s} {name}: {detail}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=sorted(set(CATEGORIES.values())), action="append",
                        help="categories to run (repeatable; default all)")
    parser.add_argument("--filter", default="", help="regular expression on test names")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per case")
    parser.add_argument("--json", help="also write name -> [status, detail] to this file")
    parser.add_argument("--verbose", action="store_true", help="print each case as it ends")
    parser.add_argument("--device", choices=("CPU", "CUDA"), default="CPU",
                        help="run the suite's cases for this device (CUDA: built for and "
                             "run on this machine's GPU)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(sys.stdin.read().split())
        return
    if not backend.supports_device(args.device):
        sys.exit(f"onnx_node_coverage: tecomp's backend cannot run on {args.device} here "
                 f"(no GPU and driver)")
    methods = _test_methods(args.device.lower())
    categories = {n: cat for n, (cat, _) in methods.items()}
    names = [n for n in methods
             if (not args.kind or categories[n] in args.kind)
             and re.search(args.filter, n)]
    t0 = time.time()
    results = _run_all(names, max(1, args.jobs), args.timeout, args.verbose)
    operators = {n: next((node.op_type for node in m.graph.node
                          if node.op_type != "Constant"), "?")
                 for n, m in _node_models(args.device.lower()).items()}
    _report(results, categories, operators)
    print(f"\n{len(results)} cases in {time.time() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=0, sort_keys=True)


if __name__ == "__main__":
    main()
