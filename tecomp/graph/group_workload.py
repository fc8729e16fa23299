"""The ``fused_group`` workload of a fused group: one whose anchor has no tuning template,
or one whose anchor has one and an epilogue fused after it.

:mod:`tecomp.topi.fused_group` tunes such a group (an elementwise chain, a transpose, a
concatenation, an ``argmax``, a convolution with its SiLU...) from a plain description of
it: its inputs' types, its nodes' operators, attributes and wiring, its anchor and its
output. This module writes
that description from the graph, for the tasks a model is tuned with
(:mod:`tecomp.graph.tasks`) and for the build that applies their records
(:mod:`tecomp.graph.build`), so both name a group by the same arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..autotune.task import TemplateError, canonical_args, create_task, has_tuned_record
from ..topi.fused_group import GROUP_TEMPLATE
from ..topi.strategy import get_implementation
from . import dims
from .ir import Graph
from .passes.fuse import anchor_of


@dataclass(frozen=True)
class GroupWorkload:
    """The ``fused_group`` arguments of one fused group, or why it has none.

    Attributes
    ----------
    args : tuple or None
        ``(inputs, nodes, anchor, output)`` as :func:`tecomp.topi.fused_group.fused_group`
        takes them; None when the group cannot be described.
    reason : str
        Why ``args`` is None (empty otherwise).
    """

    args: tuple | None
    reason: str = ""


def group_workload(body: Graph, target) -> GroupWorkload:
    """The ``fused_group`` workload of the fused group ``body`` for ``target``.

    Parameters
    ----------
    body : Graph
        A fused node's body (``node.attrs["body"]``).
    target : Target
        The target whose implementations compute the group.

    Returns
    -------
    GroupWorkload
        Its arguments, or None with the reason: an anchor with a template and nothing
        fused after it or a group computing what it reads (its own template tunes the
        group), a tunable node besides the anchor, a symbolic shape (a record is for one
        shape), or an attribute that is not a plain value (a tuning log cannot hold it).
    """
    anchor = anchor_of(body)
    for n in body.nodes:
        template = get_implementation(n.op, target).template
        if template is None:
            continue
        if n is not anchor:
            return GroupWorkload(None, f"node {n.name or n.op!r} ({n.op}) is tuned by its "
                                       f"template {template!r}")
        if len(body.nodes) == 1:
            return GroupWorkload(None, f"its anchor ({n.op}) is all it computes: its "
                                       f"template {template!r} tunes it")
        if not set(n.inputs) <= set(body.inputs):
            return GroupWorkload(None, f"its anchor ({n.op}) reads a value the group "
                                       f"computes: its template {template!r} tunes it")
    values = body.inputs + tuple(n.outputs[0] for n in body.nodes)
    if not all(dims.is_static(d) for v in values for d in body.types[v].shape):
        return GroupWorkload(None, "a shape is symbolic (records are for static shapes)")
    position = {name: k for k, name in enumerate(values)}
    unread = [i for n in body.nodes for i in n.inputs if i not in position]
    if unread:
        return GroupWorkload(None, f"a node reads {unread[0]!r}, a second output of a node")
    inputs = tuple((tuple(int(d) for d in body.types[i].shape), body.types[i].dtype)
                   for i in body.inputs)
    try:
        nodes = tuple((n.op, canonical_args(tuple(sorted(n.attrs.items()))),
                       tuple(position[i] for i in n.inputs)) for n in body.nodes)
    except TemplateError as err:
        return GroupWorkload(None, f"an attribute is not a plain value: {err}")
    anchor_index = next(j for j, n in enumerate(body.nodes) if n is anchor)
    return GroupWorkload((inputs, nodes, anchor_index, position[body.outputs[0]]))


def tuned_group_config(workload: GroupWorkload, target):
    """The config of the tuned ``fused_group`` record of a group's ``workload``
    (:func:`group_workload`) for ``target`` under the active ``apply_history_best``
    contexts (and the shipped logs), or None without one (the group then builds with its
    anchor's config: a record of the anchor's own template, else its untuned
    schedule)."""
    if workload.args is None or not has_tuned_record(GROUP_TEMPLATE, workload.args, target):
        return None
    return create_task(GROUP_TEMPLATE, workload.args, target).best_config()
