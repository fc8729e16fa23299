"""Tuning curves: what ``tecomp tune --plot`` draws (matplotlib, imported when called).

- :func:`plot_operator`: one task's best GFLOPS against trials, with the best candidate's
  figure from the final interleaved re-measurement, which decides the winner;
- :func:`plot_model`: a model's tuning, the expected time of its tunable kernels
  (``sum(weight x best cost)`` over tasks) against trials over all tasks, stacked by task
  so each layer shows what one task contributes and how tuning shrank it.
"""

from __future__ import annotations

import math

from .measure import gflops

__all__ = ["plot_model", "plot_operator"]

# Tasks drawn each in their own colour; the rest share one band, so a model of 50 tasks
# still gives a readable legend.
_MAX_TASKS_DRAWN = 9


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_operator(path, tuner, title: str = "") -> str:
    """Draw the best GFLOPS of ``tuner``'s trials against the trial count into ``path``.

    The axis starts at 0 so that a small gain looks small; the best candidate's figure
    from the final re-measurement is a dashed line (trial peaks may be lucky samples).

    Parameters
    ----------
    path : str
        The image; its suffix names the format (``.png``, ``.svg``, ``.pdf``).
    tuner : Tuner
        A tuner after ``tune`` (its ``history``).
    title : str
        The plot's title.

    Returns
    -------
    str
        ``path``.
    """
    plt = _pyplot()
    flop = tuner.task.flop
    best, xs, ys = 0.0, [], []
    trials = [r for _, r in tuner.history if r.stage == "trial"]
    for i, r in enumerate(trials, 1):
        if r.ok:
            best = max(best, gflops(flop, r.cost))
        xs.append(i)
        ys.append(best)
    final = [r for _, r in tuner.history if r.stage == "final" and r.ok]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, ys, drawstyle="steps-post", label="best measured in a trial")
    if final:
        remeasured = max(gflops(flop, r.cost) for r in final)
        ax.axhline(remeasured, color="tab:red", linestyle="--",
                   label=f"best re-measured at the end: {remeasured:.1f}")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("trial")
    ax.set_ylabel("best GFLOPS")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _task_label(task) -> str:
    args = ", ".join(str(a) for a in task.args if not isinstance(a, str))
    label = f"{task.name}({args})"
    return (label if len(label) <= 48 else label[:45] + "...") + (
        f" x{task.weight}" if task.weight != 1 else "")


def plot_model(path, sched, title: str = "") -> str:
    """Draw a model's tuning into ``path``: the expected time of its tunable kernels
    against trials over all tasks, stacked by task, with the total as a line.

    The curve starts once every task has a measured config (before that the sum would
    leave tasks out). The tasks contributing most at the end are drawn one band each,
    the others as one band; the total after the final re-measurement of every task's
    best candidates is marked at the right, or, when it is far above the curve (other
    work took the cores while it was measured), given in the legend with its ratio to
    the trials' total.

    Parameters
    ----------
    path : str
        The image; its suffix names the format (``.png``, ``.svg``, ``.pdf``).
    sched : TaskScheduler
        A scheduler after ``tune`` (its ``task_curve``).
    title : str
        The plot's title.

    Returns
    -------
    str
        ``path``.
    """
    plt = _pyplot()
    points = sched.task_curve
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if points:
        xs = [n for n, _ in points]
        final = points[-1][1]
        order = sorted(range(len(sched.tasks)), key=lambda i: -final[i])
        shown = order[:_MAX_TASKS_DRAWN]
        bands = [[costs[i] * 1e3 for _, costs in points] for i in shown]
        labels = [_task_label(sched.tasks[i]) for i in shown]
        rest = order[_MAX_TASKS_DRAWN:]
        if rest:
            bands.append([sum(costs[i] for i in rest) * 1e3 for _, costs in points])
            labels.append(f"{len(rest)} other tasks")
        ax.stackplot(xs, bands, labels=labels, step="post", alpha=0.8)
        ax.plot(xs, [sum(costs) * 1e3 for _, costs in points], drawstyle="steps-post",
                color="black", linewidth=1.2, label="total (sum of weight x best cost)")
        top = max(sum(costs) for _, costs in points) * 1e3 * 1.15
        end = sched.estimated_latency()
        if math.isfinite(end) and end > 0:
            label = f"total re-measured at the end: {end * 1e3:.3f} ms"
            if end * 1e3 <= top:
                ax.plot([xs[-1]], [end * 1e3], marker="o", color="tab:red",
                        linestyle="none", label=label)
            else:
                # Far above the trials (a busy machine during the re-measurement): said in
                # the legend rather than drawn, so the curve keeps its scale.
                ratio = end / sum(points[-1][1])
                ax.plot([], [], marker="^", color="tab:red", linestyle="none",
                        label=f"{label}, off the scale: {ratio:.0f}x the trials' total")
        ax.set_ylim(0, top)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("trials (all tasks)")
    ax.set_ylabel("expected time of the tunable kernels, ms")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7, frameon=False)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path
