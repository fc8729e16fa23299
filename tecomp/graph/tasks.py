"""The tuning tasks of a model: one per unique tunable workload of its fused groups.

Registered as the task extractor for graphs, so ``autotune.extract_tasks(mod, ...)``
reaches it without the autotuner importing the graph layer.

A model's kernels take their schedules from the records of their anchors' workloads
(``tecomp.graph.build`` looks them up under ``apply_history_best``); the tasks here are
exactly those workloads, so the records of tuning them apply when the model is built.
"""

from __future__ import annotations

from ..autotune.extract import register_task_extractor
from ..autotune.task import Task, create_task
from ..target import Target, as_target
from .build import tunable_workloads
from .ir import Graph


def extract_graph_tasks(mod: Graph, params: dict | None = None, target="llvm") -> list[Task]:
    """The tuning tasks of a graph, each with ``weight`` = how many kernels share it.

    Parameters
    ----------
    mod : Graph
        The graph (``tecomp.frontend.from_onnx``'s first result).
    params : dict, optional
        Weight name -> array, as :func:`tecomp.graph.build` takes them.
    target : str or Target
        The target the model will be built for (records are keyed by it).

    Returns
    -------
    list of Task
        One task per unique ``(template, args)`` of the fused groups' anchors with a
        tuning template and static shapes, in the order of their first kernel. Kernels
        with symbolic shapes or without a template have no task: they use their
        default schedules.

    Raises
    ------
    GraphBuildError
        The graph cannot be optimised or an operator has no implementation.

    Examples
    --------
    >>> mod, params = tecomp.frontend.from_onnx("model.onnx")            # doctest: +SKIP
    >>> tasks = autotune.extract_tasks(mod, params, target="llvm")        # doctest: +SKIP
    >>> [(t.name, t.weight) for t in tasks]                               # doctest: +SKIP
    [('conv2d_packed_kernel', 2), ('dense_packed', 1)]
    """
    target = target if isinstance(target, Target) else as_target(target)
    tasks: dict = {}
    for name, args, count in tunable_workloads(mod, target, params):
        task = create_task(name, args, target)
        # Two workloads may differ only before the template fills in its defaults.
        key = (task.name, task.args)
        if key in tasks:
            tasks[key].weight += count
        else:
            task.weight = count
            tasks[key] = task
    return list(tasks.values())


register_task_extractor(Graph, extract_graph_tasks)
