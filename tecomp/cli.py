"""The ``tecomp`` command.

Subcommands::

    tecomp tune --op matmul --args 1024,1024,1024 --target llvm --trials 200 \\
                --tuner xgb --output mm.json [--resume] [--plot curve.png] [--early-stopping K]
    tecomp tune --list-ops
    tecomp doctor

Errors in the arguments print one line (``tecomp: error: ...``) and exit with status 2;
a tuning run in which every trial failed exits with status 1 after printing the first
error of each kind; Ctrl-C stops tuning with the log intact (status 130).
"""

from __future__ import annotations

import argparse
import ast
import os
import sys

TUNERS = ("xgb", "ga", "random", "grid")


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
    import tecomp.topi  # noqa: F401 - registers the built-in templates
    from tecomp import autotune

    return autotune.TEMPLATES


def _signature(t) -> str:
    import inspect

    try:
        return str(inspect.signature(t.func))
    except (TypeError, ValueError):
        return "(...)"


def _list_ops(out) -> int:
    for name, t in sorted(_templates().items()):
        doc = (t.func.__doc__ or "").strip().splitlines()
        print(f"{name}{_signature(t)}" + (f"  - {doc[0]}" if doc else ""), file=out)
    return 0


def _plot(path, history, flop, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tecomp.autotune.measure import gflops

    best, xs, ys = 0.0, [], []
    trials = [r for _, r in history if r.stage == "trial"]
    for i, r in enumerate(trials, 1):
        if r.ok:
            best = max(best, gflops(flop, r.cost))
        xs.append(i)
        ys.append(best)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, ys, drawstyle="steps-post")
    ax.set_xlabel("trial")
    ax.set_ylabel("best GFLOPS")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _tune(ns, out, err) -> int:
    if ns.list_ops:
        return _list_ops(out)
    if ns.model:
        raise UsageError(
            f"tuning a model ({ns.model}) needs the ONNX frontend, which this installation "
            f"does not have yet; tune single operators with --op NAME --args ..."
        )
    if not ns.op:
        raise UsageError("give --op NAME (see `tecomp tune --list-ops`) or a MODEL.onnx")
    if ns.trials <= 0:
        raise UsageError(f"--trials {ns.trials}: must be a positive number")
    if ns.early_stopping is not None and ns.early_stopping <= 0:
        raise UsageError(f"--early-stopping {ns.early_stopping}: must be positive")
    templates = _templates()
    if ns.op not in templates:
        raise UsageError(
            f"unknown operator {ns.op!r}; available: {', '.join(sorted(templates))}"
        )
    from tecomp import autotune
    from tecomp.errors import TecompError

    try:
        from tecomp.target import Target

        Target(ns.target)
    except TecompError as e:
        raise UsageError(str(e)) from None
    args = parse_op_args(ns.args or "")
    try:
        task = autotune.create_task(ns.op, args, ns.target)
    except (TecompError, TypeError, ValueError) as e:
        raise UsageError(f"--op {ns.op} --args {ns.args!r}: {e}") from None
    output = ns.output or f"{ns.op.replace('/', '_')}.json"
    if ns.resume and not os.path.exists(output):
        print(f"tecomp: --resume: {output} does not exist yet; starting fresh", file=err)
    elif not ns.resume and os.path.exists(output) and os.path.getsize(output) > 0:
        print(f"tecomp: appending to existing log {output} (use --resume to skip its "
              f"configs)", file=err)

    print(f"task {task.name}{task.args} on {task.target}: {len(task.config_space)} configs, "
          f"{task.flop / 1e9:.3f} GFLOP", file=err)
    kw = {"seed": ns.seed}
    tuner = {
        "xgb": autotune.XGBTuner, "ga": autotune.GATuner,
        "random": autotune.RandomTuner, "grid": autotune.GridSearchTuner,
    }[ns.tuner](task, **kw)
    option = autotune.measure_option(
        builder=autotune.LocalBuilder(timeout=ns.timeout),
        runner=autotune.LocalRunner(number=ns.number, repeat=ns.repeat, timeout=ns.timeout,
                                    check_correctness=ns.check_correctness),
    )
    bar = autotune.progress_bar(ns.trials, prefix=ns.op, file=err)
    interrupted = False
    try:
        tuner.tune(ns.trials, option, early_stopping=ns.early_stopping,
                   callbacks=[bar, autotune.log_to_file(output)],
                   resume_from=output if ns.resume and os.path.exists(output) else None)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
    if ns.plot and tuner.history:
        _plot(ns.plot, tuner.history, task.flop, f"{task.name}{task.args}")
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
          f"({len(trials) - len(ok)} of {len(trials)} trials failed"
          + (f"; stopped: {tuner.stop_reason}" if tuner.stop_reason != "budget" else "")
          + f"); log: {output}", file=out)
    return 0


def _doctor(ns, out, err) -> int:
    from .doctor import report

    print(report(), file=out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tecomp", description="tecomp: tensor-expression compiler and autotuner")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    t = sub.add_parser("tune", help="tune an operator template and write a tuning log")
    t.add_argument("model", nargs="?", help="an ONNX model (needs the ONNX frontend)")
    t.add_argument("--op", help="template name, e.g. matmul (see --list-ops)")
    t.add_argument("--args", default="", help="template arguments, e.g. 1024,1024,1024")
    t.add_argument("--target", default="llvm", help="target string (default: llvm)")
    t.add_argument("--trials", type=int, default=200, help="measurement budget")
    t.add_argument("--tuner", choices=TUNERS, default="xgb")
    t.add_argument("--output", "-o", help="tuning log (JSON lines; appended)")
    t.add_argument("--resume", action="store_true",
                   help="continue from --output: its configs count and are not re-measured")
    t.add_argument("--plot", help="write a PNG of best GFLOPS vs trial")
    t.add_argument("--early-stopping", type=int, default=None, metavar="K",
                   help="stop after K trials without improvement")
    t.add_argument("--list-ops", action="store_true", help="list the tunable templates")
    t.add_argument("--number", type=int, default=4, help="calls per timed batch")
    t.add_argument("--repeat", type=int, default=3, help="timed batches per candidate")
    t.add_argument("--timeout", type=float, default=10.0, help="seconds per build / run")
    t.add_argument("--check-correctness", action="store_true",
                   help="compare every candidate's output with a reference build")
    t.add_argument("--seed", type=int, default=None)
    sub.add_parser("doctor", help="report versions, CPU features and toolchain status")
    from .demo import add_parser as add_demo_parser

    add_demo_parser(sub)
    from .model_cli import add_parsers as add_model_parsers

    add_model_parsers(sub)
    return p


def main(argv=None) -> int:
    out, err = sys.stdout, sys.stderr
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.command is None:
        parser.print_help(err)
        return 2
    try:
        if ns.command == "tune":
            return _tune(ns, out, err)
        if ns.command == "doctor":
            return _doctor(ns, out, err)
        if ns.command == "demo":
            return ns.func(ns)
        if ns.command in ("compile", "run"):
            return ns.func(ns, out, err)
    except UsageError as e:
        print(f"tecomp: error: {e}", file=err)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
