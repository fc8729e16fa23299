"""The tuning tasks of a model: one per unique tunable workload of its fused groups.

Registered as the task extractor for graphs, so ``autotune.extract_tasks(mod, ...)``
reaches it without the autotuner importing the graph layer.

A model's kernels take their schedules from the records of their workloads
(``tecomp.graph.build`` looks them up under ``apply_history_best``); the tasks here are
exactly those workloads, so the records of tuning them apply when the model is built. A
group is tuned whole by the ``fused_group`` template (:mod:`tecomp.topi.fused_group`): in
its anchor's template's space where the anchor has one (a convolution, a product, a
row-wise operator), timed with the epilogue fused after it, else in a space its anchor's
schedule generates from the group's computes. A group that is its anchor alone is tuned by
the anchor's template.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..autotune.extract import register_task_extractor
from ..autotune.task import Task, create_task
from ..target import Target, as_target
from .build import bind_params, kernel_workloads
from .ir import Graph
from .passes import optimize, pipeline_for
from .passes.alter_layout import graph_layers, keeps_depthwise_planar
from .passes.precision import apply_precision


@dataclass(frozen=True)
class KernelSpace:
    """The tuning task of one fused group of a model, or why it has none.

    Attributes
    ----------
    group : str
        The fused group's name (``fused_<k>_<ops>``).
    task : Task or None
        The task whose records its build applies (shared by the groups of one workload).
    reason : str
        Why ``task`` is None (empty otherwise).
    """

    group: str
    task: Task | None
    reason: str = ""


def kernel_spaces(mod: Graph, params: dict | None = None, target="llvm",
                  precision: str = "fp32") -> list[KernelSpace]:
    """Every fused group of a graph with the task that tunes it, or why none does.

    A group has no task when a shape is symbolic, when its description cannot be written
    to a tuning log, or when its space has one config (its schedule declares no knobs, or
    the shape leaves each knob one candidate: a blocked 1x1 convolution of one channel
    block on a 1x1 plane, as a squeeze-and-excite block's).

    Parameters
    ----------
    mod : Graph
        The graph (``tecomp.frontend.from_onnx``'s first result).
    params : dict, optional
        Weight name -> array, as :func:`tecomp.graph.build` takes them.
    target : str or Target
        The target the model will be built for.
    precision : {"fp32", "bf16"}
        The precision it will be built with (:func:`tecomp.graph.build`).

    Returns
    -------
    list of KernelSpace
        One per group, in graph order; a task's ``weight`` is how many groups share it.

    Examples
    --------
    >>> [k.group for k in kernel_spaces(mod, params) if k.task is None]  # doctest: +SKIP
    []
    """
    target = target if isinstance(target, Target) else as_target(target)
    tasks: dict = {}
    spaces = []
    for group, name, args, reason in kernel_workloads(mod, target, params, precision):
        if name is None:
            spaces.append(KernelSpace(group, None, reason))
            continue
        task = create_task(name, args, target)
        # Two workloads may differ only before the template fills in its defaults.
        key = (task.name, task.args)
        if key in tasks:
            task = tasks[key]
            task.weight += 1
        else:
            task.weight = 1
            tasks[key] = task
        if len(task.config_space) < 2:
            why = ("its knobs have one candidate each at this shape" if
                   task.config_space.knob_names else "its schedule declares no knobs")
            spaces.append(KernelSpace(group, None, f"{name}: {why}: a space of one config"))
        else:
            spaces.append(KernelSpace(group, task))
    return spaces


def extract_graph_tasks(mod: Graph, params: dict | None = None, target="llvm",
                        precision: str = "fp32") -> list[Task]:
    """The tuning tasks of a graph, each with ``weight`` = how many kernels share it.

    Parameters
    ----------
    mod : Graph
        The graph (``tecomp.frontend.from_onnx``'s first result).
    params : dict, optional
        Weight name -> array, as :func:`tecomp.graph.build` takes them.
    target : str or Target
        The target the model will be built for (records are keyed by it).
    precision : {"fp32", "bf16"}
        The precision it will be built with (:func:`tecomp.graph.build`).

    Returns
    -------
    list of Task
        One task per unique ``(template, args)`` of the fused groups with static shapes
        and a space of more than one config, in the order of their first kernel:
        ``fused_group`` for a group that computes more than its anchor (in the anchor's
        template's space where it has one: :func:`tecomp.topi.fused_group.anchor_workload`),
        else the anchor's own template.
        :func:`kernel_spaces` says why a group has no task; such a group builds with
        its default schedule.

    Raises
    ------
    GraphBuildError
        The graph cannot be optimised or an operator has no implementation.

    Examples
    --------
    >>> mod, params = tecomp.frontend.from_onnx("model.onnx")            # doctest: +SKIP
    >>> tasks = autotune.extract_tasks(mod, params, target="llvm")        # doctest: +SKIP
    >>> [(anchor_workload(t)[0], t.weight) for t in tasks]                # doctest: +SKIP
    [('conv2d_nchwc', 2), ('dense_packed', 1), ('fused_group', 3)]
    """
    tasks = [k.task for k in kernel_spaces(mod, params, target, precision)
             if k.task is not None]
    return list({id(t): t for t in tasks}.values())


def layout_block_tasks(mod: Graph, params: dict | None = None, target="llvm") -> list[Task]:
    """The tasks of every channel block each blocked convolution of a graph may take, so
    that tuning them lets the layout pass choose blocks by measured times.

    :func:`extract_graph_tasks` lists the workloads of the blocks the untuned choice
    made; the layout pass (:func:`tecomp.graph.passes.alter_conv_layout`) weighs a
    layer's records only where every candidate block of it has one
    (:mod:`tecomp.graph.passes.layout_choice`). These tasks, tuned beside the graph's,
    give it those records; a layer only half a vector divides also has its planar
    kernel's, and a MobileNet's blocked depthwise layers are among them. Empty on a target
    without the blocked layout, or for a graph the pass keeps planar.

    Examples
    --------
    >>> tasks = autotune.extract_tasks(mod, params)                     # doctest: +SKIP
    >>> tasks += layout_block_tasks(mod, params)                        # doctest: +SKIP
    """
    target = target if isinstance(target, Target) else as_target(target)
    passes = pipeline_for(target)
    names = [name for name, _ in passes]
    if "alter_conv_layout" not in names:
        return []
    layout = passes[names.index("alter_conv_layout")][1]
    graph = optimize(apply_precision(bind_params(mod, params), target, "fp32"),
                     passes=passes[:names.index("alter_conv_layout")])
    # The layers the layout pass weighs: a MobileNet's depthwise ones too, unless it keeps
    # the graph planar.
    if keeps_depthwise_planar(graph, target, layout.keywords["block"],
                              layout.keywords.get("blocked_depthwise")):
        return []
    found: dict = {}
    for layer in graph_layers(graph, layout.keywords["block"]):
        for name, args in layer.workloads:
            task = create_task(name, args, target)
            key = (task.name, task.args)
            if key in found:
                found[key].weight += 1
            else:
                task.weight = 1
                found[key] = task
    return list(found.values())


register_task_extractor(Graph, extract_graph_tasks)
