"""The tuning template of a fused group: its anchor's knobs, timed on the whole kernel.

A graph compiler fuses elementwise chains, transposes, layout transforms, concatenations,
pads, ``argmax`` or a ``conv_transpose`` with their epilogues into kernels whose anchor
operator has no hand-written template. Their space is generated from the group's
computes by the anchor's schedule: ``schedule_injective`` declares the knobs of
:mod:`.injective_space` (parallel loop, grain, vector width, unroll, inlining of
broadcast producers), ``schedule_reduce`` / ``schedule_normalize`` the row knobs of
:mod:`.row_space`.

An anchor with a template of its own (a convolution, a product, a row-wise operator)
declares that template's knobs, but its kernel also computes the epilogue fused into it:
a SiLU's sigmoid and multiply, GELU's ``erf``, a squeeze-and-excite gate multiplied over
the whole activation. A tile that wins on the anchor alone can spill once the epilogue
joins it (EfficientNet-B0's first 1x1 expand convolution, 16 -> 96 channels at 112x112 on
a Zen 5: 2 channel blocks by 8 columns took 0.084 ms alone against 0.158 for the
fallback, and 0.42 ms against 0.18 in a model run with its SiLU), and an SE gate's 1x1
convolution over a 1x1 plane times at tens of nanoseconds alone while its kernel's work
is the multiply. So such a group with an epilogue is tuned whole: the anchor's template
declares its knobs (and its fallback) and gives the inputs it reads, weights in their
packed layout; the anchor is computed on them as a build computes it and the epilogue on
its output.

The template ``fused_group`` rebuilds a group from a plain description of it, so a tuning
task, its records and a model's build all see one compute and one schedule:

``fused_group(inputs, nodes, anchor, output)``

- ``inputs``: ``((shape, dtype), ...)``, the group's inputs (values ``0 .. len - 1``);
- ``nodes``: ``((op, ((attribute, value), ...), (value, ...)), ...)``, each node's
  operator, its attributes sorted by name and the values it reads; node ``j`` computes
  value ``len(inputs) + j``;
- ``anchor``: the index of the node whose implementation schedules the group (its
  compute takes the group's config, the others a fallback config, as a build gives
  them); an anchor with a template reads only inputs of the group;
- ``output``: the value the group returns.

Without a record, a group builds what it always built: every generated knob's first
candidate is the library's untuned schedule, and an anchor's template gives its own
fallback.
"""

from __future__ import annotations

from .. import te
from ..autotune import FallbackConfigEntity, get_config, template
from ..autotune.task import TEMPLATES, TemplateError
from ..target import Target
from .strategy import get_implementation, node_workload
from .utils import get_const_tuple

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


def anchor_workload(task) -> tuple:
    """``(template, args)``: the workload whose knobs ``task`` tunes. For a
    ``fused_group`` task whose anchor has a template of its own, that template's workload
    of the anchor (timed here with the epilogue fused after it; its records are the ones
    a build of the kernel falls back to); for any other task, its own.

    Examples
    --------
    >>> [anchor_workload(t)[0] for t in autotune.extract_tasks(mod, params)]  # doctest: +SKIP
    ['conv2d_nchwc', 'conv2d_nchwc', 'reduce_mean', 'fused_group', 'dense_packed']
    """
    if task.name != GROUP_TEMPLATE:
        return task.name, task.args
    anchor = _anchor_seeds(task.args, task.target)
    return anchor[0] if anchor else (task.name, task.args)


def _anchor_seeds(args, target) -> tuple:
    """The template's seeds (:func:`tecomp.autotune.template`): the anchor's own workload
    where it has a template, whose records' configs are points of the group's space."""
    inputs, nodes, anchor, _ = args
    impl = get_implementation(nodes[anchor][0], target)
    return () if impl.template is None else (_anchor_template_args(inputs, nodes, anchor, impl),)


def _anchor_template_args(inputs, nodes, anchor, impl) -> tuple:
    """``(template, args)`` of a description's anchor under its own template (``impl``,
    the anchor's implementation, has one); a TemplateError where the anchor reads a value
    computed in the group (its template's inputs are the group's)."""
    op, attrs, reads = nodes[anchor]
    computed = [v for v in reads if v >= len(inputs)]
    if computed:
        raise TemplateError(f"fused_group: the anchor ({op}) has template {impl.template!r} "
                            f"and reads values {computed} computed in the group; it may "
                            f"read only the group's inputs, 0 .. {len(inputs) - 1}")
    args = node_workload(impl, [inputs[v][0] for v in reads], inputs[reads[0]][1],
                         dict(attrs))
    return impl.template, TEMPLATES[impl.template].full_args(args)


@template(GROUP_TEMPLATE, label=group_label, seeds=_anchor_seeds)
def fused_group(inputs, nodes, anchor, output):
    """Tunable fused group (see :mod:`tecomp.topi.fused_group`): the group's computes
    from the strategy of the current target's kind, scheduled by its anchor's schedule
    under the template's config."""
    _check(inputs, nodes, anchor, output)
    target = Target.current() or Target("llvm")
    cfg = get_config()
    values = [te.placeholder(tuple(shape), dtype, name=f"in{k}")
              for k, (shape, dtype) in enumerate(inputs)]
    anchor_impl = get_implementation(nodes[anchor][0], target)
    if anchor_impl.template is not None:
        _template_inputs(anchor_impl, inputs, nodes, anchor, values)
    for j, (op, attrs, reads) in enumerate(nodes):
        impl = get_implementation(op, target)
        node_cfg = cfg if j == anchor else FallbackConfigEntity()
        values.append(impl.compute(node_cfg, *[values[v] for v in reads], **dict(attrs)))
    out = values[output]
    return anchor_impl.schedule(cfg, [out]), [*values[:len(inputs)], out]


def _template_inputs(impl, inputs, nodes, anchor, values) -> None:
    """Run the anchor's own template on the current config, which declares its knobs and
    fallback there, and put the inputs it reads in ``values`` as its placeholders: the
    anchor's weights in the layout it reads them packed in, as a build packs them."""
    op, _, reads = nodes[anchor]
    name, args = _anchor_template_args(inputs, nodes, anchor, impl)
    _, tensors = TEMPLATES[name].func(*args)
    if len(tensors) != len(reads) + 1:
        raise TemplateError(f"fused_group: the anchor ({op}) reads {len(reads)} values but "
                            f"its template {impl.template!r} takes {len(tensors) - 1}")
    read_elsewhere = {v for j, node in enumerate(nodes) if j != anchor for v in node[2]}
    for v, placeholder in zip(reads, tensors):
        if v in read_elsewhere and get_const_tuple(placeholder.shape) != tuple(inputs[v][0]):
            raise TemplateError(f"fused_group: input {v} is read packed by the anchor "
                                f"({op}) and as it is by another node")
        values[v] = placeholder
