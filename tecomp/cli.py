"""The ``tecomp`` command.

Subcommands::

    tecomp tune --op matmul --args 1024,1024,1024 --target llvm --trials 200 \\
                --tuner xgb --output mm.json [--resume] [--plot curve.png] [--early-stopping K]
    tecomp tune MODEL.onnx --trials 2000 --output model.json [--resume] [--plot curve.png]
                [--input-shape input:1,3,224,224]
    tecomp tune ... --cluster tcp://HOST:8786      (build and measure on a Dask cluster)
    tecomp tune --list-ops
    tecomp dask-worker-resources [--explain]
    tecomp demo [--n 1024] [--trials 64]
    tecomp compile MODEL.onnx -o model.so [--graph model.svg]   (tecomp.model_cli)
    tecomp run model.so --inputs in.npz [--profile] [--graph run.svg]
    tecomp doctor

Each subcommand is one ``add_*_parser`` function that registers its arguments and the
function that runs it.

Errors in the arguments print one line (``tecomp: error: ...``) and exit with status 2;
``tecomp tune`` checks its paths (and the plot format), target and ``--args`` before the
first trial, so a bad one never costs a measured batch;
a tuning run in which every trial failed exits with status 1 after printing the first
error of each kind; Ctrl-C stops tuning with the log intact (status 130).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import inspect
import math
import os
import sys

from . import autotune
from . import topi  # noqa: F401 - registers the built-in templates
from .autotune.records import shipped_candidates
from .codegen import backend_kinds
from .demo import add_parser as add_demo_parser
from .doctor import report
from .errors import TecompError
from .frontend import from_onnx
from .graph.tasks import layout_block_tasks
from .model_cli import ModelUsageError, parse_input_shape
from .model_cli import add_parsers as add_model_parsers
from .runtime import QemuRunner, RunnerError
from .target import Target

#: Search strategies by --tuner name: "evo" is the evolutionary search (a model's tasks
#: share its cost model), "xgb" simulated annealing on one task's model.
TUNER_CLASSES = {
    "xgb": autotune.XGBTuner, "evo": autotune.EvolutionTuner, "ga": autotune.GATuner,
    "random": autotune.RandomTuner, "grid": autotune.GridSearchTuner,
}
TUNERS = tuple(TUNER_CLASSES)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"tecomp: error: {message}\n")


class UsageError(Exception):
    """A bad argument: reported in one line, exit status 2."""


def parse_op_args(text: str) -> tuple:
    """``"1024,1024,1024"`` -> (1024, 1024, 1024); nested tuples and words allowed:
    ``"(1,64,56,56),(64,64,3,3),(1,1),(1,1)"`` or ``"64,64,64,float32"``."""
    text = text.strip()
    if not text:
        return ()
    try:
        value = ast.literal_eval(f"({text},)")
        if isinstance(value, tuple):
            return value
    except (ValueError, SyntaxError):
        pass
    out = []
    for tok in text.split(","):
        tok = tok.strip()
        if not tok:
            raise UsageError(f"--args {text!r}: empty item")
        for conv in (int, float):
            try:
                out.append(conv(tok))
                break
            except ValueError:
                continue
        else:
            if tok.lower() in ("true", "false"):
                out.append(tok.lower() == "true")
            elif tok.isidentifier():
                out.append(tok)
            else:
                raise UsageError(f"--args {text!r}: cannot read item {tok!r}")
    return tuple(out)


def _templates():
    return autotune.TEMPLATES


def _signature(t) -> str:
    try:
        return str(inspect.signature(t.func))
    except (TypeError, ValueError):
        return "(...)"


def _list_ops(out) -> int:
    for name, t in sorted(_templates().items()):
        doc = (t.func.__doc__ or "").strip().splitlines()
        print(f"{name}{_signature(t)}" + (f"  - {doc[0]}" if doc else ""), file=out)
    return 0


def _plot(path, tuner, title):
    """Best GFLOPS against trials (``tecomp.autotune.plot.plot_operator``)."""
    from .autotune.plot import plot_operator

    plot_operator(path, tuner, title)


def _check_writable(path: str, flag: str) -> None:
    """Fail now, in one line, unless ``path`` can be written as a file; creates missing
    parent folders (as the log writer would) and leaves no file behind."""
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path}: is a directory; give a file name inside it")
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        existed = os.path.exists(path)
        with open(path, "a"):
            pass
        if not existed:
            os.remove(path)
    except OSError as e:
        raise UsageError(
            f"{flag} {path}: cannot write there ({e.strerror}: {e.filename})"
        ) from None


def _check_plot_path(path: str) -> None:
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = os.path.splitext(path)[1].lstrip(".").lower()
    if suffix not in formats:
        raise UsageError(
            f"--plot {path}: the suffix names the image format; allowed: "
            f"{', '.join('.' + f for f in sorted(formats))}"
        )
    _check_writable(path, "--plot")


def _check_target_runs(target) -> None:
    """Reject a target whose kind has no code generator here: every trial would fail."""
    have = backend_kinds()
    if target.kind not in have:
        raise UsageError(
            f"--target {target}: this installation has no code generator for "
            f"{target.kind} targets, so no template can be tuned for it; "
            f"available: {', '.join(have)}"
        )


def _template_for(op: str, target, templates) -> str:
    """The template ``--op`` names for ``target``: for a target kind with templates of its
    own the one of that kind (``matmul.cuda``), else ``op`` itself, which is for CPUs."""
    own = f"{op}.{target.kind}"
    if own in templates:
        return own
    if op not in templates:
        raise UsageError(f"unknown operator {op!r}; available: {', '.join(sorted(templates))}")
    if "cpu" not in target.keys and "." not in op:
        theirs = sorted(t for t in templates if t.endswith(f".{target.kind}"))
        raise UsageError(
            f"--op {op} --target {target}: {op} is a CPU template with no {target.kind} "
            f"version; {target.kind} templates: {', '.join(theirs) or 'none'}"
        )
    return op


def _measure_runner(ns, target):
    """Where candidates run: in a local process, or (``--runner qemu``) under qemu-user
    for a target of another architecture (timings then only rank candidates)."""
    unavailable = target.kind_info.timing_unavailable
    why = unavailable(target) if unavailable else None
    if why:
        raise UsageError(f"--target {target}: {why}")
    if ns.runner == "local":
        if not target.kind_info.device and not target.is_host:
            raise UsageError(
                f"--target {target} does not run on this machine; add --runner qemu to "
                f"measure candidates under emulation"
            )
        cold = ns.model is not None if ns.cache_flush is None else ns.cache_flush
        return autotune.LocalRunner(number=ns.number, repeat=ns.repeat, timeout=ns.timeout,
                                    check_correctness=ns.check_correctness,
                                    enable_cpu_cache_flush=cold)
    if target.kind_info.device or target.is_host:
        raise UsageError(f"--runner qemu runs CPU code of another architecture; --target "
                         f"{target} runs here (use --runner local)")
    if ns.check_correctness:
        raise UsageError("--check-correctness compares with a reference build run locally; "
                         "it is not available with --runner qemu")
    if ns.cache_flush:
        raise UsageError("--cache-flush times candidates with cold arguments in the local "
                         "measuring process; it is not available with --runner qemu (whose "
                         "timings only rank candidates)")
    try:
        runner = QemuRunner(target.target_arch, timeout=max(ns.timeout, 30.0))
    except RunnerError as e:
        raise UsageError(f"--runner qemu: {e}") from None
    return autotune.OffHostRunner(runner, number=ns.number, repeat=ns.repeat)


def _malformed_arg(template, args) -> str:
    """Which of ``args`` cannot be right for ``template``, and what was expected: a word
    where the parameter takes a number, a tuple or a flag ("" when none is wrong)."""
    try:
        params = list(inspect.signature(template.func).parameters.values())
    except (TypeError, ValueError):
        return ""
    for pos, (param, value) in enumerate(zip(params, args), 1):
        if not isinstance(value, str) or isinstance(param.default, str):
            continue
        if param.default is inspect.Parameter.empty:
            expected = "a number (or a tuple of numbers such as (1,64,56,56))"
        else:
            expected = f"a {type(param.default).__name__} such as {param.default!r}"
        return (f"item {pos}, {value!r}, is the parameter {param.name} of "
                f"{template.name}{_signature(template)}; expected {expected}")
    return ""


def _tune(ns, out, err) -> int:
    if ns.list_ops:
        return _list_ops(out)
    with _cluster_session(ns):
        if ns.model:
            return _tune_model(ns, out, err)
        return _tune_op(ns, out, err)


@contextlib.contextmanager
def _cluster_session(ns):
    """Closes the Dask client that ``--cluster`` opened (if any) when tuning ends."""
    ns.cluster_clients = []
    try:
        yield
    finally:
        for client in ns.cluster_clients:
            with contextlib.suppress(Exception):
                client.close()


def _cluster_option(ns, targets) -> dict:
    """``--cluster ADDRESS``: a DaskBuilder and a DaskRunner on the Dask scheduler there,
    after checking that some worker measures each of ``targets`` (before any trial)."""
    if ns.runner != "local":
        raise UsageError(f"--cluster measures on the cluster's workers; --runner {ns.runner} "
                         f"cannot be combined with it")
    try:
        import distributed
    except ImportError:
        raise UsageError("--cluster needs the `distributed` package: "
                         "pip install 'tecomp[distributed]'") from None
    try:
        client = distributed.Client(ns.cluster, timeout=20)
    except (OSError, TimeoutError, ValueError) as e:
        raise UsageError(f"--cluster {ns.cluster}: cannot reach a Dask scheduler there "
                         f"({type(e).__name__}: {e}); start one with `dask scheduler` and "
                         f"workers with `dask worker {ns.cluster} --nworkers 1 --resources "
                         f"\"$(tecomp dask-worker-resources)\"`") from None
    ns.cluster_clients.append(client)
    cold = ns.model is not None if ns.cache_flush is None else ns.cache_flush
    runner = autotune.DaskRunner(client, number=ns.number, repeat=ns.repeat,
                                 timeout=ns.timeout, check_correctness=ns.check_correctness,
                                 enable_cpu_cache_flush=cold)
    for target in targets:
        try:
            runner.check_target(target)
        except autotune.ClusterError as e:
            raise UsageError(f"--cluster {ns.cluster}: {e}") from None
    return autotune.measure_option(builder=autotune.DaskBuilder(client, timeout=ns.timeout),
                                   runner=runner)


def _tune_op(ns, out, err) -> int:
    """``tecomp tune --op NAME``: one operator template into its log."""
    if not ns.op:
        raise UsageError("give --op NAME (see `tecomp tune --list-ops`) or a MODEL.onnx")
    if ns.layouts:
        raise UsageError("--layouts tunes the layouts of a model's layers; give a "
                         "MODEL.onnx instead of --op")
    target = _check_tune_limits(ns)
    templates = _templates()
    op = _template_for(ns.op, target, templates)
    args = parse_op_args(ns.args or "")
    try:
        task = autotune.create_task(op, args, ns.target)
    except (TecompError, TypeError, ValueError) as e:
        bad = _malformed_arg(templates[op], args)
        raise UsageError(f"--op {ns.op} --args {ns.args!r}: {bad or e}") from None
    output = ns.output or _default_output(op)
    _check_writable(output, "--output")
    if ns.plot:
        _check_plot_path(ns.plot)
    option = _cluster_option(ns, [task.target]) if ns.cluster else None
    runner = None if option else _measure_runner(ns, target)
    batch = {}
    if option:
        # A batch is measured at once over the nodes and the next one is proposed when it
        # ends: four candidates per node keep the nodes busy past the batch's stragglers.
        batch["batch_size"] = max(8, 4 * option["runner"].measure_slots([task.target]))
        if ns.tuner in ("xgb", "evo"):
            batch["plan_size"] = max(32, batch["batch_size"])  # a batch from one plan

    tuner = TUNER_CLASSES[ns.tuner or "xgb"](task, seed=ns.seed, **batch)
    if ns.resume and not os.path.exists(output):
        print(f"tecomp: --resume: {output} does not exist yet; starting fresh", file=err)
    elif ns.resume:
        tuner.load_history(output)
        if tuner.n_resumed >= ns.trials:
            print(f"nothing to do: {tuner.n_resumed} trials already in {output} "
                  f"(raise --trials to tune further)", file=err)
            return 0
    elif os.path.exists(output) and os.path.getsize(output) > 0:
        print(f"tecomp: appending to existing log {output} (use --resume to skip its "
              f"configs)", file=err)

    print(f"task {task.label} on {task.target}: {len(task.config_space)} configs, "
          f"{task.flop / 1e9:.3f} GFLOP", file=err)
    near = shipped_candidates(task)
    if near:
        print(f"measuring first: {len(near)} shipped record(s) of a CPU with this vector "
              f"ISA ({', '.join(_cpu_name(r.target_key) for r in near)})", file=err)
    option = option or autotune.measure_option(
        builder=autotune.LocalBuilder(timeout=ns.timeout),
        runner=runner,
    )
    bar = autotune.progress_bar(ns.trials, prefix=op, file=err)
    interrupted = False
    try:
        tuner.tune(ns.trials, option, early_stopping=ns.early_stopping,
                   callbacks=[bar, autotune.log_to_file(output)])
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
    if ns.plot and tuner.history:
        _plot(ns.plot, tuner, f"{task.label}\n{task.target} on {_cpu_name(target)}")
        print(f"tuning curve written to {ns.plot}", file=err)
    trials = [r for _, r in tuner.history if r.stage == "trial"]
    if interrupted:
        print(f"interrupted after {len(trials)} trials; the log {output} is intact "
              f"(continue with --resume)", file=err)
        return 130
    ok = [r for r in trials if r.ok]
    if not ok:
        print(f"tecomp: every trial failed ({len(trials)} trials); first error of each kind:",
              file=err)
        for kind, (cfg, msg) in bar.first_error.items():
            print(f"  {kind}: {msg}  [{cfg}]", file=err)
        return 1
    print(f"best: {tuner.best_flops:.2f} GFLOPS with {tuner.best_config} "
          f"({len(trials) - len(ok)} of {len(trials)} trials failed); log: {output}", file=out)
    print(_invalid_line(tuner), file=out)
    print(_disturbed_line(tuner.n_disturbed), file=out)
    return 0


def _check_tune_limits(ns) -> Target:
    """The checks of ``--trials``, ``--early-stopping`` and ``--target`` that an operator
    and a model share; returns the target."""
    if ns.trials <= 0:
        raise UsageError(f"--trials {ns.trials}: must be a positive number")
    if ns.early_stopping is not None and ns.early_stopping <= 0:
        raise UsageError(f"--early-stopping {ns.early_stopping}: must be positive")
    try:
        target = Target(ns.target)
    except TecompError as e:
        raise UsageError(str(e)) from None
    _check_target_runs(target)
    return target


def _model_tasks(ns, target, err):
    """The model's tuning tasks and, with ``--layouts``, the keys of those only the layout
    choice reads (its layers in the blocks the untuned choice did not take); None after
    printing why the model cannot be read."""
    if not os.path.exists(ns.model):
        raise UsageError(f"{ns.model}: no such file")
    if ns.layouts and ns.precision != "fp32":
        raise UsageError(f"--layouts weighs the float32 kernels the layout pass chooses "
                         f"between; it cannot be combined with --precision {ns.precision}")
    try:
        shapes = dict(parse_input_shape(s) for s in ns.input_shape)
    except ModelUsageError as e:
        raise UsageError(str(e)) from None
    try:
        mod, params = from_onnx(ns.model, shape=shapes or None)
        tasks = autotune.extract_tasks(mod, params, target, precision=ns.precision)
        known = {(t.name, t.args) for t in tasks}
        layouts = [t for t in (layout_block_tasks(mod, params, target) if ns.layouts else ())
                   if (t.name, t.args) not in known]
    except TecompError as e:
        print(f"tecomp: error: {e}", file=err)
        return None
    return tasks + layouts, {(t.name, t.args) for t in layouts}


def _untuned_cost(tuner) -> float:
    """The measured cost of the task's default (fallback) config, inf if not measured:
    from the final interleaved re-measurement when it took part (the rounds the tuned
    cost comes from), else from its trial."""
    index = tuner.task.default_config.index
    for stage in ("final", "trial"):
        costs = [r.cost for c, r in tuner.history if c.index == index and r.stage == stage]
        if costs:
            return min(costs)
    return float("inf")


def _plot_model(path, sched, title):
    """Expected time of the tunable kernels against trials, stacked by task
    (``tecomp.autotune.plot.plot_model``)."""
    from .autotune.plot import plot_model

    plot_model(path, sched, title)


def _tune_model(ns, out, err) -> int:
    """``tecomp tune MODEL.onnx``: every tunable workload of the model, by the task
    scheduler, into one log."""
    target = _check_tune_limits(ns)
    output = ns.output or _default_output(os.path.splitext(os.path.basename(ns.model))[0])
    _check_writable(output, "--output")
    if ns.plot:
        _check_plot_path(ns.plot)
    found = _model_tasks(ns, target, err)
    if found is None:
        return 1
    tasks, layout_only = found
    if not tasks:
        print(f"{ns.model} has no tunable kernels with static shapes (fix symbolic "
              f"dimensions with --input-shape); nothing to tune", file=err)
        return 0
    option = _cluster_option(ns, [target]) if ns.cluster else None
    runner = None if option else _measure_runner(ns, target)
    for task in tasks:
        role = " (layout candidate)" if (task.name, task.args) in layout_only else ""
        print(f"task {task.label}{role}: weight {task.weight}, "
              f"{len(task.config_space)} configs, {task.flop / 1e9:.4f} GFLOP", file=err)
    # Small budgets still give every task its warm-up batch.
    batch = max(1, min(8, ns.trials // len(tasks)))
    if ns.tuner in (None, "evo"):  # the scheduler's default: one cost model for all tasks
        sched = autotune.TaskScheduler(tasks, seed=ns.seed, batch_size=batch)
    else:
        tuner_class = TUNER_CLASSES[ns.tuner]
        sched = autotune.TaskScheduler(tasks, tuner=lambda t: tuner_class(t, seed=ns.seed),
                                       batch_size=batch)
    resume = None
    if ns.resume and not os.path.exists(output):
        print(f"tecomp: --resume: {output} does not exist yet; starting fresh", file=err)
    elif ns.resume:
        resume = output
    elif os.path.exists(output) and os.path.getsize(output) > 0:
        print(f"tecomp: appending to existing log {output} (use --resume to skip its "
              f"configs)", file=err)
    option = option or autotune.measure_option(
        builder=autotune.LocalBuilder(timeout=ns.timeout), runner=runner)
    name = os.path.basename(ns.model)
    bar = autotune.model_progress_bar(ns.trials, prefix=name, file=err)
    interrupted = False
    try:
        sched.tune(ns.trials, option, callbacks=[bar, autotune.log_to_file(output)],
                   resume_from=resume, early_stopping=ns.early_stopping)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
    if sched.n_done == sched.n_resumed and sched.n_resumed >= ns.trials:
        print(f"nothing to do: {sched.n_resumed} trials already in {output} "
              f"(raise --trials to tune further)", file=err)
        return 0
    if ns.plot and sched.curve:
        _plot_model(ns.plot, sched, f"{name}: {len(tasks)} tasks\n{target} on "
                    f"{_cpu_name(target)}")
        print(f"tuning curve written to {ns.plot}", file=err)
    if interrupted:
        print(f"interrupted after {sched.n_done} trials; the log {output} is intact "
              f"(continue with --resume)", file=err)
        return 130
    if not any(t.best_result is not None for t in sched.tuners):
        print(f"tecomp: every trial failed ({sched.n_done} trials); first error of each "
              f"kind:", file=err)
        for kind, (cfg, msg) in bar.first_error.items():
            print(f"  {kind}: {msg}  [{cfg}]", file=err)
        return 1
    in_model = []
    for i, tuner in enumerate(sched.tuners):
        task = tuner.task
        candidate = (task.name, task.args) in layout_only
        print(f"{task.label} x{task.weight}{' (layout candidate)' if candidate else ''}: "
              f"{tuner.n_done} trials, {_untuned_cost(tuner) * 1e3:.4f} ms untuned -> "
              f"{sched.best_cost(i) * 1e3:.4f} ms", file=out)
        if not candidate:
            in_model.append((task.weight, _untuned_cost(tuner), sched.best_cost(i)))
    untuned = sum(w * before for w, before, _ in in_model)
    tuned = sum(w * after for w, _, after in in_model if math.isfinite(after))
    print(f"tunable kernels (sum of weight x cost): {untuned * 1e3:.4f} ms untuned -> "
          f"{tuned * 1e3:.4f} ms; log: {output}", file=out)
    if layout_only:
        print(f"layout candidates: {len(layout_only)} kernels in the channel blocks (or "
              f"planar) the untuned layout did not take; compiling with this log chooses "
              f"each layer's block by measured times where all of its candidates have "
              f"records", file=out)
    print(_invalid_line(sched), file=out)
    print(_disturbed_line(sched.n_disturbed), file=out)
    return 0


def _invalid_line(tuning) -> str:
    """The summary's count of invalid programs (trials that failed to instantiate, build
    or run) of a tuner or a task scheduler."""
    return (f"invalid programs: {tuning.n_invalid} of {tuning.n_trials} trials "
            f"({tuning.invalid_rate:.1%})")


def _disturbed_line(n: int) -> str:
    """The summary's count of measurements the machine disturbed (docs/measuring.md)."""
    return (f"disturbed measurements: {n} (the machine was busy: repeats disagreed, "
            f"or took whole scheduler ticks; never chosen)" if n else
            "disturbed measurements: none")


def _default_output(op: str) -> str:
    return f"{op.replace('/', '_')}.json"


def _cpu_name(target) -> str:
    """The CPU model of a Target or of a canonical target key."""
    if isinstance(target, str):
        return next((p.split("=", 1)[1] for p in target.split() if p.startswith("-mcpu=")),
                    target)
    return target.mcpu or str(target)


def _doctor(ns, out, err) -> int:
    print(report(), file=out)
    return 0


def add_tune_parser(sub) -> None:
    """``tecomp tune``: tune one operator template and write its tuning log."""
    t = sub.add_parser("tune", help="tune an operator template or an ONNX model and write "
                       "a tuning log",
                       description="Tune an operator template, or every tunable kernel of "
                       "an ONNX model (trials go to the kernel expected to cut the model's "
                       "time most); every measured config is appended to a tuning log "
                       "(JSON lines) that `tecomp compile --tuning-records` reads.")
    t.add_argument("model", nargs="?", help="an ONNX model to tune (instead of --op)")
    t.add_argument("--input-shape", action="append", default=[], metavar="NAME:D1,D2,...",
                   help="fix a model input's shape (repeat for several inputs); kernels "
                   "with symbolic shapes are not tuned")
    t.add_argument("--op", help="template name, e.g. matmul (see --list-ops)")
    t.add_argument("--args", default="",
                   help="template arguments, e.g. 1024,1024,1024 or "
                   "(1,64,56,56),(64,64,3,3),(1,1),(1,1)")
    t.add_argument("--target", default="llvm", help="target string (default: %(default)s)")
    t.add_argument("--precision", choices=("fp32", "bf16", "tf32"), default="fp32",
                   help="with a model: the precision it will be built with (tecomp compile "
                        "--precision); bf16's convolutions are tasks of their own")
    t.add_argument("--layouts", action="store_true",
                   help="with a model: also tune each blocked convolution in every other "
                   "channel block (or planar) it may take, so that compiling with the log "
                   "chooses each layer's layout by measured times, as TVM's graph tuner "
                   "does (more tasks share --trials)")
    t.add_argument("--trials", type=int, default=200,
                   help="measurement budget (default: %(default)s)")
    t.add_argument("--tuner", choices=TUNERS, default=None,
                   help="search strategy (default: xgb) for an operator; a model's "
                   "default is evo, an evolutionary search whose tasks share one cost "
                   "model")
    t.add_argument("--output", "-o",
                   help="tuning log, appended to; missing folders are created "
                   "(default: OP.json in the current directory, e.g. matmul.json, or "
                   "MODEL.json for MODEL.onnx)")
    t.add_argument("--resume", action="store_true",
                   help="continue from --output: its trials count toward --trials and "
                   "are not measured again")
    t.add_argument("--plot", metavar="FILE",
                   help="draw the tuning curve: best GFLOPS vs trial for an operator, the "
                   "expected time of the tunable kernels vs trials, stacked by task, for a "
                   "model; the suffix (.png, .svg, .pdf, ...) picks the format")
    t.add_argument("--early-stopping", type=int, default=None, metavar="K",
                   help="stop after K trials without improvement (default: never)")
    t.add_argument("--list-ops", action="store_true", help="list the tunable templates")
    t.add_argument("--number", type=int, default=4,
                   help="calls per timed batch (default: %(default)s)")
    t.add_argument("--repeat", type=int, default=3,
                   help="timed batches per candidate (default: %(default)s)")
    t.add_argument("--timeout", type=float, default=10.0,
                   help="seconds per build / run (default: %(default)s)")
    t.add_argument("--runner", choices=("local", "qemu"), default="local",
                   help="where candidates run: this machine, or qemu-user for a cross "
                   "target such as aarch64 (emulated timings only rank candidates; "
                   "default: %(default)s)")
    t.add_argument("--check-correctness", action="store_true",
                   help="compare every candidate's output with a reference build")
    t.add_argument("--cache-flush", action=argparse.BooleanOptionalAction, default=None,
                   help="time each call with its weights and outputs (all arguments but "
                   "the first) cold, read from copies spanning 256 MiB, as a model run "
                   "reads them (default: on for MODEL.onnx with the local runner, off otherwise)")
    t.add_argument("--seed", type=int, default=None,
                   help="seed of the tuner's random choices (default: none, a different "
                   "search each run)")
    t.add_argument("--cluster", metavar="tcp://HOST:8786",
                   help="build on the workers of the Dask scheduler at this address and "
                   "measure on those that advertise the target (start each with "
                   "--nworkers 1 --resources \"$(tecomp dask-worker-resources)\"); this "
                   "process alone writes the log (needs the [distributed] extra)")
    t.set_defaults(func=_tune)


def _dask_worker_resources(ns, out, err) -> int:
    from .autotune.dask_measure import node_keys, resource_name, worker_resources_string

    keys = node_keys()
    print(worker_resources_string(keys), file=out)
    if ns.explain:
        print("# tecomp-measure: this worker measures tecomp candidates", file=out)
        for key in keys:
            print(f"# {resource_name(key)}: {key}", file=out)
    return 0


def add_dask_worker_resources_parser(sub) -> None:
    """``tecomp dask-worker-resources``: the ``--resources`` of a Dask worker here."""
    d = sub.add_parser(
        "dask-worker-resources",
        help="print the --resources a Dask worker on this machine advertises for tuning",
        description="Print the Dask resources that say which targets this machine "
        "measures (its CPU's target key, the same without features, its GPU's): "
        "dask worker tcp://HOST:8786 --nworkers 1 --resources \"$(tecomp "
        "dask-worker-resources)\"")
    d.add_argument("--explain", action="store_true",
                   help="also print each resource's target key (as # comment lines)")
    d.set_defaults(func=_dask_worker_resources)


def add_doctor_parser(sub) -> None:
    """``tecomp doctor``: versions and what was detected on this machine."""
    d = sub.add_parser("doctor", help="report versions, CPU features and toolchain status")
    d.set_defaults(func=_doctor)


def build_parser() -> argparse.ArgumentParser:
    """The ``tecomp`` parser: one subparser per subcommand, each with ``func(ns, out,
    err) -> exit status`` as its default."""
    p = _Parser(prog="tecomp", description="tecomp: tensor-expression compiler and autotuner")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    add_tune_parser(sub)
    add_doctor_parser(sub)
    add_dask_worker_resources_parser(sub)
    add_demo_parser(sub)
    add_model_parsers(sub)
    return p


def main(argv=None) -> int:
    """Run the ``tecomp`` command on ``argv`` (default: ``sys.argv[1:]``); returns the
    exit status (2 for a bad argument, 130 after Ctrl-C)."""
    out, err = sys.stdout, sys.stderr
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.command is None:
        parser.print_help(err)
        return 2
    try:
        return ns.func(ns, out, err)
    except UsageError as e:
        print(f"tecomp: error: {e}", file=err)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return 130


if __name__ == "__main__":
    sys.exit(main())
