"""The tuning template of any fused group whose anchor has no template of its own.

A graph compiler fuses elementwise chains, transposes, layout transforms, concatenations,
pads, ``argmax`` or a ``conv_transpose`` with their epilogues into kernels whose anchor
operator has no hand-written template. Their space is generated from the group's
computes by the anchor's schedule: ``schedule_injective`` declares the knobs of
:mod:`.injective_space` (parallel loop, grain, vector width, unroll, inlining of
broadcast producers), ``schedule_reduce`` / ``schedule_normalize`` the row knobs of
:mod:`.row_space`. The template ``fused_group`` rebuilds a group from a plain
description of it, so a tuning task, its records and a model's build all see one compute
and one schedule:

``fused_group(inputs, nodes, anchor, output)``

- ``inputs``: ``((shape, dtype), ...)``, the group's inputs (values ``0 .. len - 1``);
- ``nodes``: ``((op, ((attribute, value), ...), (value, ...)), ...)``, each node's
  operator, its attributes sorted by name and the values it reads; node ``j`` computes
  value ``len(inputs) + j``;
- ``anchor``: the index of the node whose implementation schedules the group (its
  compute takes the group's config, the others a fallback config, as a build gives
  them);
- ``output``: the value the group returns.

Every knob's first candidate is the library's untuned schedule, so a group without a
record builds what it always built.
"""

from __future__ import annotations

from .. import te
from ..autotune import FallbackConfigEntity, get_config, template
from ..autotune.task import TemplateError
from ..target import Target
from .strategy import get_implementation

#: The template's name, under which the records of tuning a group are written.
GROUP_TEMPLATE = "fused_group"


def _check(inputs, nodes, anchor, output) -> None:
    """Raise a TemplateError naming the argument of a malformed group description."""
    n_values = len(inputs) + len(nodes)
    for k, item in enumerate(inputs):
        if len(item) != 2 or not all(isinstance(d, int) and d >= 0 for d in item[0]):
            raise TemplateError(f"fused_group: inputs[{k}] = {item!r} must be (shape, dtype) "
                                f"with a constant shape of non-negative ints")
    for j, node in enumerate(nodes):
        if len(node) != 3 or not isinstance(node[0], str):
            raise TemplateError(f"fused_group: nodes[{j}] = {node!r} must be (op, "
                                f"attributes, values read)")
        bad = [v for v in node[2] if not 0 <= v < len(inputs) + j]
        if bad:
            raise TemplateError(f"fused_group: nodes[{j}] ({node[0]}) reads values {bad}; "
                                f"allowed: the inputs and earlier nodes, 0 .. "
                                f"{len(inputs) + j - 1}")
    if not 0 <= anchor < len(nodes):
        raise TemplateError(f"fused_group: anchor={anchor} must index a node, 0 .. "
                            f"{len(nodes) - 1}")
    if not len(inputs) <= output < n_values:
        raise TemplateError(f"fused_group: output={output} must be a node's value, "
                            f"{len(inputs)} .. {n_values - 1}")


def group_label(args) -> str:
    """``fused_group[transpose,add,relu] of float32 1x64x56x56, 1x64x1x1``: the group's
    operators in order and its inputs, where the whole description would fill a screen."""
    inputs, nodes, _, _ = args
    ops = ",".join(op for op, _, _ in nodes)
    shapes = ", ".join("x".join(map(str, shape)) or "scalar" for shape, _ in inputs)
    dtypes = "/".join(sorted({dtype for _, dtype in inputs}))
    return f"{GROUP_TEMPLATE}[{ops}] of {dtypes} {shapes}"


@template(GROUP_TEMPLATE, label=group_label)
def fused_group(inputs, nodes, anchor, output):
    """Tunable fused group (see :mod:`tecomp.topi.fused_group`): the group's computes
    from the strategy of the current target's kind, scheduled by its anchor's schedule
    under the template's config."""
    _check(inputs, nodes, anchor, output)
    target = Target.current() or Target("llvm")
    cfg = get_config()
    values = [te.placeholder(tuple(shape), dtype, name=f"in{k}")
              for k, (shape, dtype) in enumerate(inputs)]
    for j, (op, attrs, reads) in enumerate(nodes):
        impl = get_implementation(op, target)
        node_cfg = cfg if j == anchor else FallbackConfigEntity()
        values.append(impl.compute(node_cfg, *[values[v] for v in reads], **dict(attrs)))
    schedule = get_implementation(nodes[anchor][0], target).schedule
    out = values[output]
    return schedule(cfg, [out]), [*values[:len(inputs)], out]
