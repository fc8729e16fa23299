"""``tecomp compile`` and ``tecomp run``: an ONNX model to a library, and a library run.

::

    tecomp compile model.onnx -o model.so [--target llvm] [--tuning-records log.json]
                   [--input-shape input:1,3,224,224] [--verbose] [--graph model.svg]
                   [--precision fp32|bf16|tf32]
    tecomp run model.so --inputs in.npz [--outputs out.npz] [--repeat N --print-time]
               [--profile] [--graph run.svg] [--convert-inputs]
    tecomp run model.onnx --target cuda --inputs in.npz ...

``compile`` writes ``model.so`` and its graph sidecar ``model.so.graph.npz``;
``run`` runs such a library, or builds an ONNX model (``.onnx``) for ``--target`` first,
and runs it with ``GraphModule`` on the device the target names (a cuda target without a
GPU: in the simulator, with a note saying so); it reads inputs by name from an ``.npz``
archive and writes the outputs by their graph names. ``--profile`` prints each kernel's
time inside the runs (in run order, each finding the caches as the kernels before it left
them; ``GraphModule.profile(in_run=True)``), on a GPU each kernel's time alone (CUDA
events).
``--graph`` draws the built graph (``tecomp.graph.draw``): each kernel a box with its
operators, layout transforms and concatenations computed in place marked; after ``run
--profile``, each box carries its kernel's time. An input of another dtype than the model
declares is a bad argument unless ``--convert-inputs``. Bad arguments print one line and
exit with status 2.
"""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np

from .autotune import apply_history_best
from .errors import TecompError
from .frontend import from_onnx
from .graph import GraphModule, build, load
from .graph.executor import InputDtypeError
from .target import Target


class ModelUsageError(Exception):
    """A bad argument of compile/run: reported in one line, exit status 2."""


def parse_input_shape(text: str) -> tuple:
    """``"input:1,3,224,224"`` -> ("input", (1, 3, 224, 224)); a dimension that is a
    name stays symbolic under it (``"mask:1,total"`` -> ("mask", (1, "total")))."""
    name, sep, dims_text = text.rpartition(":")
    dims = [d.strip() for d in dims_text.split(",")]
    shape = tuple(int(d) if d.isdigit() else d for d in dims)
    if not sep or not name or not all(
            d >= 1 if isinstance(d, int) else d.isidentifier() for d in shape):
        raise ModelUsageError(f"--input-shape {text!r}: expected NAME:D1,D2,... with each "
                              "dimension a positive size or a name left symbolic, e.g. "
                              "input:1,3,224,224 or attention_mask:1,total")
    return name, shape


def add_parsers(subparsers) -> None:
    """Register ``tecomp compile`` and ``tecomp run`` on the CLI's subparsers."""
    c = subparsers.add_parser("compile", help="compile an ONNX model into a shared library")
    c.add_argument("model", help="the ONNX model")
    c.add_argument("-o", "--output", required=True, help="the library to write (model.so)")
    c.add_argument("--target", default="llvm", help="target string (default: llvm)")
    c.add_argument("--tuning-records", help="a tuning log to take schedules from")
    c.add_argument("--input-shape", action="append", default=[], metavar="NAME:D1,D2,...",
                   help="fix an input's shape (repeat for several inputs); a dimension "
                   "given as a name stays symbolic (attention_mask:1,total)")
    c.add_argument("--verbose", action="store_true",
                   help="print the kernels and the schedule each uses")
    c.add_argument("--precision", choices=("fp32", "bf16", "tf32"), default="fp32",
                   help="bf16: a float32 model's convolutions and matrix products on "
                        "bfloat16-rounded operands, accumulating in float32 (a target "
                        "with AVX512-BF16 or AArch64 BF16); tf32: on TF32 tensor cores "
                        "(a cuda target; default: %(default)s)")
    c.add_argument("--graph", metavar="FILE",
                   help="draw the built graph: kernels as boxes with their operators "
                        "(.svg, .png, .pdf, or .dot; needs the graphviz package and dot)")
    c.set_defaults(func=_reporting_usage_errors(compile_model))
    r = subparsers.add_parser("run", help="run a compiled model on inputs from an .npz file")
    r.add_argument("library", help="the library tecomp compile wrote, or an ONNX model "
                                    "(.onnx) to build for --target and run")
    r.add_argument("--target", help="target string an ONNX model is built for (default: "
                                    "llvm; cuda runs on the GPU, or simulated without one)")
    r.add_argument("--inputs", required=True, help=".npz with one array per input name")
    r.add_argument("--outputs", help=".npz to write the outputs to (by output name)")
    r.add_argument("--repeat", type=int, default=1, help="runs to time (default 1)")
    r.add_argument("--print-time", action="store_true", help="print run times in ms")
    r.add_argument("--profile", action="store_true",
                   help="print each kernel's median time inside --repeat more runs")
    r.add_argument("--graph", metavar="FILE",
                   help="draw the graph, with each kernel's time when --profile is given "
                        "(.svg, .png, .pdf, or .dot; needs the graphviz package and dot)")
    r.add_argument("--convert-inputs", action="store_true",
                   help="convert inputs of another dtype than the model declares (as numpy's "
                        "astype) instead of failing")
    r.set_defaults(func=_reporting_usage_errors(run_model))


def _reporting_usage_errors(command):
    def run(ns, out, err) -> int:
        try:
            return command(ns, out, err)
        except ModelUsageError as e:
            print(f"tecomp: error: {e}", file=err)
            return 2

    return run


def _check_graph_option(path) -> None:
    """Refuse a ``--graph`` path tecomp cannot draw before any work is done."""
    if not path:
        return
    from .graph import draw

    fmt = os.path.splitext(path)[1].lstrip(".").lower()
    if fmt not in draw.FORMATS:
        raise ModelUsageError(f"--graph {path}: the suffix names the picture's format; "
                              f"allowed: {', '.join('.' + f for f in draw.FORMATS)}")
    try:
        draw.require_graphviz(render=fmt != "dot")
    except draw.GraphvizMissingError as e:
        raise ModelUsageError(f"--graph {path}: {e}") from None


def _draw_graph(lib, path, out, profile=None) -> None:
    from .graph import draw

    draw.draw(lib, path, profile=profile)
    print(f"graph drawn to {path}", file=out)


def _parse_target(text: str) -> Target:
    try:
        return Target(text)
    except TecompError as e:
        raise ModelUsageError(str(e)) from None


def _build_model(path: str, target: Target, shapes=None, tuning_records=None,
                 precision: str = "fp32"):
    """The ONNX model at ``path`` imported and built for ``target``."""
    mod, params = from_onnx(path, shape=shapes or None)
    records = apply_history_best(tuning_records) if tuning_records else contextlib.nullcontext()
    with records:
        return build(mod, target=target, params=params, precision=precision)


def compile_model(ns, out, err) -> int:
    """``tecomp compile``."""
    if not os.path.exists(ns.model):
        raise ModelUsageError(f"{ns.model}: no such file")
    _check_graph_option(ns.graph)
    if ns.tuning_records and not os.path.exists(ns.tuning_records):
        raise ModelUsageError(f"--tuning-records {ns.tuning_records}: no such file")
    target = _parse_target(ns.target)
    shapes = dict(parse_input_shape(s) for s in ns.input_shape)
    start = time.perf_counter()
    try:
        lib = _build_model(ns.model, target, shapes, ns.tuning_records, ns.precision)
        if ns.verbose:
            # Before exporting, which refuses a model specialised on first run: the
            # summary says which node made it one.
            print(lib.summary(), file=out)
        lib.export_library(ns.output)
        if ns.graph:
            _draw_graph(lib, ns.graph, out)
    except TecompError as e:
        print(f"tecomp: error: {e}", file=err)
        return 1
    print(f"wrote {ns.output} ({len(lib.kernels)} kernels, "
          f"{time.perf_counter() - start:.1f} s)", file=out)
    return 0


def _print_profile(gm, profile, runs: int, out) -> None:
    """One line per kernel call, in run order: median ms (in a run, or alone where the
    executor times kernels alone), share, operators."""
    ops = {k.name: "+".join(k.ops) for k in gm.run_library.kernels}
    total = sum(t.median for _, t in profile)
    width = max([len(name) for name, _ in profile] + [6])
    how = f"median of {runs} runs" if gm.profiles_in_run else f"median of {runs} calls alone"
    print(f"{'kernel':<{width}} {'ms':>8} {'share':>6}  ops  ({how})", file=out)
    for name, t in profile:
        print(f"{name:<{width}} {t.median * 1e3:8.3f} {t.median / total:6.1%}  {ops[name]}",
              file=out)
    print(f"{'sum':<{width}} {total * 1e3:8.3f}", file=out)


def _library_to_run(ns):
    """``tecomp run``'s library: the one given, loaded, or the ONNX model given, built for
    ``--target``."""
    if not ns.library.endswith(".onnx"):
        if ns.target is not None:
            raise ModelUsageError(f"--target {ns.target}: only for an ONNX model (.onnx), which "
                                  f"run builds first; {ns.library} runs on the target it was "
                                  f"built for")
        return load(ns.library)
    target = _parse_target(ns.target or "llvm")
    if not os.path.exists(ns.library):
        raise ModelUsageError(f"{ns.library}: no such file")
    return _build_model(ns.library, target)


def run_model(ns, out, err) -> int:
    """``tecomp run``."""
    if ns.repeat < 1:
        raise ModelUsageError(f"--repeat {ns.repeat}: must be positive")
    if not os.path.exists(ns.inputs):
        raise ModelUsageError(f"--inputs {ns.inputs}: no such file")
    _check_graph_option(ns.graph)
    try:
        lib = _library_to_run(ns)
        gm = GraphModule(lib, convert_inputs=ns.convert_inputs)
        if gm.simulated:
            if ns.profile:
                raise ModelUsageError(f"--profile: no {lib.target.kind} device here, so the "
                                      f"kernels run in tecomp's simulator, which times "
                                      f"nothing; profile on a machine with the device")
            print(f"note: no {lib.target.kind} device here: the kernels run in tecomp's "
                  f"simulator on the CPU (slow; the outputs are checked, not timed)", file=err)
        with np.load(ns.inputs, allow_pickle=False) as data:
            inputs = {k: data[k] for k in data.files}
        missing = set(gm.input_names) - set(inputs)
        if missing:
            raise ModelUsageError(f"--inputs {ns.inputs} lacks {', '.join(sorted(missing))}; "
                                  f"the model's inputs: {', '.join(gm.input_names)}")
        for name in gm.input_names:
            try:
                gm.set_input(name, inputs[name])
            except InputDtypeError as e:
                raise ModelUsageError(f"--inputs {ns.inputs}: "
                                      f"{e.with_hint('--convert-inputs')}") from None
        times = []
        for _ in range(ns.repeat):
            t0 = time.perf_counter()
            gm.run()
            times.append(time.perf_counter() - t0)
        profile = (gm.profile(number=1, repeat=ns.repeat, in_run=gm.profiles_in_run)
                   if ns.profile else None)
        if ns.graph:
            _draw_graph(gm.run_library, ns.graph, out, profile)
    except (TecompError, FileNotFoundError) as e:
        print(f"tecomp: error: {e}", file=err)
        return 1
    if ns.print_time:
        ms = np.array(times) * 1e3
        print(f"run time (ms) over {ns.repeat} runs: median {np.median(ms):.3f}, "
              f"min {ms.min():.3f}, max {ms.max():.3f}", file=out)
    if profile is not None:
        _print_profile(gm, profile, ns.repeat, out)
    if ns.outputs:
        np.savez(ns.outputs, **{name: gm.get_output(i)
                                for i, name in enumerate(gm.graph.outputs)})
    return 0
