"""The measuring process of ``LocalRunner``: loads built candidates and times them.

It runs as ``python -m tecomp.autotune._runner_worker`` and speaks JSON lines: one request
per line on stdin, one reply per line on a private copy of stdout (the real stdout is
pointed at stderr so nothing a candidate prints can corrupt the protocol). A candidate
that crashes kills only this process; the parent notices and starts a new one.

Timing follows ``docs/measuring.md``: an untimed warm-up before each timed batch (so the
previous candidate's spinning threads have gone quiet), then ``repeat`` batches of
``number`` calls, each batch one native call that runs the candidate's prepared calls back
to back as a model run does; the parent ranks by the median batch.

A candidate of a device kind (CUDA) is timed on the device with its events (its module's
``time_evaluator``: inputs copied to the device once, no host copies in the timed
batches). A failure while one runs (an illegal address, a launch failure) can leave the
device's context unusable for every later launch, so the reply asks the parent to start
a fresh process (a fresh context) for the next candidate: a faulting kernel costs one
trial.
"""

from __future__ import annotations

import functools
import json
import math
import os
import signal
import sys
import time

import numpy as np

from ..runtime import aligned, load_module
from ..runtime.module import CallSequence

_MODULES: dict = {}      # path -> loaded module (a candidate is loaded once)
_INPUTS: dict = {}       # arg-spec key -> arrays (inputs random, outputs scratch)
_REFERENCE: dict = {}    # reference path -> expected outputs
_COLD = None             # (argument list, its cold copies), see _cold_sets
_COLD_BYTES = 256 << 20  # more than the weights of the models tuned here
_COLD_MAX_SETS = 1024
#: A timed batch holds at least this much of the warm-up's calls (timed from Python, so
#: a few microseconds each at the least), so that the microseconds of the batch's own
#: call from Python are a small part of it (a batch of 4 calls of a 256-element add read
#: 250 ns a call; the add takes 10).
_MIN_BATCH_S = 1e-3


def _load(path):
    mod = _MODULES.get(path)
    if mod is None:
        mod = _MODULES[path] = load_module(path)
    return mod


def _arrays(specs, seed=0):
    key = json.dumps(specs)
    arrs = _INPUTS.get(key)
    if arrs is None:
        rng = np.random.default_rng(seed)
        arrs = []
        for shape, dtype, is_output in specs:
            dt = np.dtype(dtype)
            if is_output:
                a = np.zeros(shape, dt)
            elif dt.kind == "f":
                a = rng.uniform(-1.0, 1.0, size=shape).astype(dt)
            elif dt.kind == "b":
                a = rng.integers(0, 2, size=shape).astype(dt)
            elif dt.itemsize >= 4:
                # 32- and 64-bit integers are a gather's indices more often than data:
                # 0 is in range for any axis (random ones failed every trial of a kernel
                # gathering from a table of 2 rows, BERT's token types).
                a = np.zeros(shape, dt)
            else:
                a = rng.integers(-4 if dt.kind == "i" else 0, 5, size=shape).astype(dt)
            # As a built model's buffers are: vectors never straddle two cache lines.
            arrs.append(aligned.ascontiguous(a))
        _INPUTS[key] = arrs
    return arrs


def _cold_sets(args):
    """Argument sets for cold-cache timing, as TVM's cache flush: every argument but the
    first (the data, which a model's previous kernel has just written) comes from its own
    copy, and the copies of all sets span ``_COLD_BYTES``, so a set is reused only after
    that much other memory has been touched, as a model run at batch 1 reads its weights
    once per run. The sets of one argument list are kept while its candidates are timed."""
    global _COLD
    if _COLD is not None and _COLD[0] is args:
        return _COLD[1]
    _COLD = None  # free the previous workload's copies first
    rest = sum(a.nbytes for a in args[1:])
    copies = max(2, min(_COLD_MAX_SETS, math.ceil(_COLD_BYTES / max(rest, 1))))
    sets = [args] + [[args[0]] + [aligned.copy(a) for a in args[1:]] for _ in range(copies - 1)]
    _COLD = (args, sets)
    return sets


def _prepared_calls(fn, args, flush) -> list:
    """The calls a candidate is timed with, their arguments packed once: one per argument
    set (:func:`_cold_sets` with ``flush``), taken in turn. The first is checked, so a
    failing check raises before anything is timed."""
    entry = fn[fn.entry_name]
    entry(*args)
    return [entry.prepare(*s) for s in (_cold_sets(args) if flush else [args])]


def _batch(calls, start, number) -> CallSequence:
    """``number`` of ``calls`` in turn from index ``start``, run by one native call as a
    model's kernels are: no Python between two calls, whose overhead (microseconds)
    would be a large part of a short kernel's time and not a part of any model run."""
    return CallSequence([calls[(start + i) % len(calls)] for i in range(number)])


def _time(calls, number, repeat, min_repeat_ms, warmup_ms, budget_s):
    """Seconds per call of ``repeat`` batches of ``number`` of ``calls`` (prepared calls
    taken in turn, see :func:`_prepared_calls`)."""
    # Warm-up: at least one call, and calls until warmup_ms have passed.
    done = 0
    t_start = time.perf_counter()
    one = math.inf
    while done == 0 or time.perf_counter() - t_start < warmup_ms / 1000.0:
        call = calls[done % len(calls)]
        t0 = time.perf_counter()
        call()
        one = min(one, time.perf_counter() - t0)
        done += 1
    number = max(number, math.ceil(max(min_repeat_ms / 1000.0, _MIN_BATCH_S) / max(one, 1e-9)))
    # A slow candidate gets fewer repeats rather than eating the session's time: it will
    # not win, and its rank among the slow ones matters little. (One more batch runs
    # untimed, below.)
    while repeat > 1 and one * number * (repeat + 1) > budget_s:
        if number > 1:
            number = max(1, number // 2)
        else:
            repeat -= 1
    # Each batch goes on where the last call left off, so an argument set comes round
    # again only after all the others. The first runs untimed: a batch's first run pays
    # for what the warm-up's calls from Python did not touch (the native runner's tables,
    # the pool's threads, asleep while the batches were made).
    batches = [_batch(calls, done + b * number, number) for b in range(repeat + 1)]
    batches[0]()
    costs = []
    for batch in batches[1:]:
        t0 = time.perf_counter()
        batch()
        costs.append((time.perf_counter() - t0) / number)
    return costs


def _on_device(mod) -> bool:
    """Whether ``mod``'s code runs on an accelerator (its target's kind is a device kind):
    it times itself with the device's events, and a fault may leave the device's context
    unusable."""
    target = getattr(mod, "target", None)
    return target is not None and target.kind_info.device


def _time_on_device(mod, args, number, repeat, min_repeat_ms, warmup_ms):
    """Seconds per call of each of ``repeat`` batches, measured with the device's events
    (the module's ``time_evaluator``)."""
    return list(mod.time_evaluator(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                                   warmup_ms=warmup_ms)(*args).results)


def _check(fn, args, specs, ref_path):
    expected = _REFERENCE.get(ref_path)
    if expected is None:
        ref = _load(ref_path)
        ref_args = [a.copy() for a in args]
        ref(*ref_args)
        expected = _REFERENCE[ref_path] = [
            a for a, s in zip(ref_args, specs) if s[2]
        ]
    got_args = [a.copy() for a in args]
    for a, s in zip(got_args, specs):
        if s[2] and a.dtype.kind == "f":
            a.fill(np.nan)
    fn(*got_args)
    outs = [a for a, s in zip(got_args, specs) if s[2]]
    for i, (g, e) in enumerate(zip(outs, expected)):
        if e.dtype.kind == "f":
            scale = max(1.0, float(np.max(np.abs(e))) if e.size else 1.0)
            bad = ~np.isclose(g, e, rtol=1e-3, atol=1e-4 * scale, equal_nan=False)
        else:
            bad = g != e
        if bad.any():
            where = tuple(int(x) for x in np.argwhere(bad)[0])
            return (f"output {i} differs from the reference at {list(where)}: "
                    f"got {g[where]!r}, expected {e[where]!r} "
                    f"({int(bad.sum())} of {bad.size} elements)")
    return None


def _handle(req):
    cmd = req["cmd"]
    if cmd == "ping":
        return {"ok": True}
    if cmd == "run":
        specs = req["specs"]
        try:
            fn = _load(req["path"])
        except Exception as err:  # noqa: BLE001 - reported as a runtime error
            return {"ok": False, "kind": "runtime", "msg": f"load: {type(err).__name__}: {err}"}
        args = _arrays(specs)
        try:
            if req.get("ref"):
                msg = _check(fn, args, specs, req["ref"])
                if msg:
                    return {"ok": False, "kind": "wrong", "msg": msg}
            if _on_device(fn):
                costs = _time_on_device(fn, args, req["number"], req["repeat"],
                                        req["min_repeat_ms"], req["warmup_ms"])
            else:
                costs = _time(_prepared_calls(fn, args, req["flush"]), req["number"],
                              req["repeat"], req["min_repeat_ms"], req["warmup_ms"],
                              req["budget_s"])
        except Exception as err:  # noqa: BLE001
            return {"ok": False, "kind": "runtime", "msg": f"{type(err).__name__}: {err}",
                    "restart": _on_device(fn)}
        _MODULES.pop(req["path"], None)  # tuning loads each candidate once
        return {"ok": True, "costs": costs}
    if cmd == "interleave":
        # Re-measure the final candidates A, B, C, A, B, C, ... so drift hits all alike.
        fns = [_load(p) for p in req["paths"]]
        arg_sets = [_arrays(s) for s in req["specs"]]
        timed = []
        for fn, args in zip(fns, arg_sets):
            if _on_device(fn):
                timed.append(functools.partial(_time_on_device, fn, args, req["number"], 1,
                                               req["min_repeat_ms"], req["warmup_ms"]))
            else:
                timed.append(functools.partial(
                    _time, _prepared_calls(fn, args, req["flush"]), req["number"], 1,
                    req["min_repeat_ms"], req["warmup_ms"], req["budget_s"]))
        samples = [[] for _ in fns]
        for _ in range(req["rounds"]):
            for i, time_once in enumerate(timed):
                samples[i].extend(time_once())
        return {"ok": True, "samples": samples}
    return {"ok": False, "kind": "runtime", "msg": f"unknown command {cmd!r}"}


def main():
    # Ctrl-C goes to the whole process group; the parent decides when this worker stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    out.write(json.dumps({"ok": True, "ready": True}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = _handle(json.loads(line))
        out.write(json.dumps(reply) + "\n")
        if reply.get("restart"):
            # The CUDA context may be unusable now; the parent starts a fresh process.
            break


if __name__ == "__main__":
    main()
