"""A fused group: one anchor operator (a reduction such as a matrix product or a
convolution) and the elementwise epilogue computed from its output.

An operator's schedule tiles the group's *output* like the anchor's output and
accumulates the anchor in registers at the tile (``cache_write``); every other stage of
the epilogue (bias adds, activations, a residual read from another input, the unpack of
a blocked layout) is inlined into the output, so the whole group is one loop nest and
one pass over memory.
"""

from __future__ import annotations

from .. import te
from ..errors import ScheduleError
from ..te.analysis import ops_of
from .cpu_schedule import calls_long_chains
from .knob_choice import declare_knobs

#: Tag of the stage that crops a result computed over whole register tiles (a product's
#: rows, a convolution's row of columns) to its size: the head of the epilogue.
CROP_TAG = "tile_crop"


def group_output(outs, what: str) -> te.Tensor:
    """The one output tensor of a group given as a tensor or a one-element list."""
    if isinstance(outs, te.Tensor):
        return outs
    outs = list(outs)
    if len(outs) != 1 or not isinstance(outs[0], te.Tensor):
        raise ScheduleError(f"{what}: schedules a group with one output tensor, got {outs!r}")
    return outs[0]


def crop(t: te.Tensor, shape) -> te.Tensor:
    """``t``, computed over whole register tiles, cropped to ``shape`` (tag
    :data:`CROP_TAG`): the head of the epilogue that :func:`inline_epilogue` tiles."""
    return te.compute(tuple(shape), lambda *idx: t[idx], name=f"{t.op.name}.crop",
                      tag=CROP_TAG)


def find_anchor(out: te.Tensor, tag: str, what: str):
    """The operation tagged ``tag`` that ``out`` is computed from (or ``out``'s own)."""
    found = [op for op in ops_of([out]) if getattr(op, "tag", "") == tag]
    if len(found) != 1:
        raise ScheduleError(
            f"{what}: the group ending in {out.name} must contain exactly one operation "
            f"tagged {tag!r} (from the operator's compute), found {len(found)}"
        )
    return found[0]


def epilogue_ops(out: te.Tensor, anchor, what: str, head=None, beside=()) -> list:
    """Operations of the group computed after ``anchor``: every compute reachable from
    ``out`` that is not ``anchor``, one of its producers or of ``beside`` (operations
    the epilogue reads that are computed before the group's loop, such as a weight's
    sums). Each must be elementwise (no
    reduction) so it can be inlined into the output loop. ``out`` must have the shape of
    ``head``, the operator compute's output (default: the group's :func:`crop`, else the
    anchor's), as it is tiled like it; ``head`` differs from the anchor where the anchor
    computes a blocked layout that ``head`` unpacks, or whole tiles that it crops."""
    producers = {id(op) for op in ops_of([anchor.output(0), *(op.output(0) for op in beside)])}
    ops = [op for op in ops_of([out])
           if id(op) not in producers and getattr(op, "body", None)]
    for op in ops:
        if op.reduce_axis:
            raise ScheduleError(
                f"{what}: the epilogue stage {op.name} is a reduction; only elementwise "
                f"stages can be fused into the operator's output loop"
            )
    if head is None:
        head = next((op for op in ops if getattr(op, "tag", "") == CROP_TAG), anchor)
    out_shape = tuple(str(a.dom.extent) for a in out.op.axis)
    head_shape = tuple(str(a.dom.extent) for a in head.axis)
    if out_shape != head_shape:
        raise ScheduleError(
            f"{what}: the group's output {out.name} has shape ({', '.join(out_shape)}), "
            f"the operator's ({', '.join(head_shape)}); an epilogue must be elementwise"
        )
    return ops


def inline_into_output(s, ops, out: te.Tensor) -> None:
    """Inline the epilogue stages ``ops`` (:func:`epilogue_ops`) but ``out`` into
    ``out``."""
    for op in ops:
        if op is not out.op:
            s[op.output(0)].compute_inline()


def inline_epilogue(s, out: te.Tensor, anchor, what: str, head=None, beside=()):
    """Accumulate ``anchor`` in a local (register) stage and inline every other stage of
    the epilogue but ``out`` into ``out`` (see :func:`epilogue_ops` for ``head`` and
    ``beside``). Returns the local stage's tensor, to be attached at the output's tile."""
    ops = epilogue_ops(out, anchor, what, head, beside)
    local = s.cache_write(anchor.output(0), "local")
    if anchor is not out.op:
        s[anchor.output(0)].compute_inline()
    inline_into_output(s, ops, out)
    return local


def epilogue_place(cfg, out: te.Tensor, anchor, what: str, weights_stay: bool) -> str:
    """``"tile"`` for a group without an epilogue or one that crops the anchor's whole
    tiles (the epilogue is then at the tile); else declare the ``epilogue`` knob and
    return its value:
    ``"tile"`` computes the epilogue at the register tile, on the accumulators as they are
    finished; ``"row"`` stores the tiles of an output row (the group's parallel task) and
    computes the epilogue over that row after them, while it is in L1.

    The untuned choice, the first candidate, is ``"row"`` where the tile's weights stay
    in registers along the row (``weights_stay``: LLVM hoists them out of the tile loop)
    and the epilogue calls ``exp`` or a function of it (a SiLU's sigmoid): weights,
    accumulators and the epilogue's constants then exceed the registers, and the tile
    spills. A config of a template without the knob (the anchor's own, tuned alone)
    takes that first candidate."""
    if anchor is out.op or [str(d) for d in anchor.output(0).shape] != [
            str(d) for d in out.shape]:
        return "tile"
    long_chains = calls_long_chains(epilogue_ops(out, anchor, what))
    candidates = ["row", "tile"] if weights_stay and long_chains else ["tile", "row"]
    return declare_knobs(cfg, {"epilogue": candidates}).get("epilogue", candidates[0])


def cache_row(s, out: te.Tensor, anchor, what: str, task):
    """The ``"row"`` place of :func:`epilogue_place`: the output's loop ``task`` (its
    rows, already split and fused by the caller) runs in parallel with its last axis
    vectorized, the anchor's output is a stage of its own computed at ``task``, and it
    accumulates in a local stage; the other epilogue stages are inlined into ``out``.
    Returns the anchor's output tensor and its local stage's."""
    ops = epilogue_ops(out, anchor, what)
    row = anchor.output(0)
    local = s.cache_write(row, "local")
    inline_into_output(s, ops, out)
    s[out].parallel(task)
    s[out].vectorize(s[out].leaf_iter_vars[-1])
    s[row].compute_at(s[out], task)
    return row, local
