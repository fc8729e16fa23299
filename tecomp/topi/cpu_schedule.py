"""Default CPU schedules of the operator library: injective groups and reductions.

A *group* is what a graph compiler fuses into one kernel: its outputs (``outs``) and
every compute stage they read, back to placeholders. Injective stages that are not
outputs are inlined into their consumers; each output gets one loop nest whose outer
loop is parallel over the target's cores and whose inner loop is vectorized with the
target's vector width. Extents may be symbolic: splits guard their tails, and the
code generator turns a guarded vector loop into masked loads and stores.
"""

from __future__ import annotations

from ..ir import dtype as dt
from ..ir import expr as E
from ..target import Target
from ..te import create_schedule
from ..te.tensor import ComputeOp, Tensor

#: Below this many output elements (a constant shape) a parallel loop costs more in
#: fork/join than it saves, so small kernels run on one thread.
PARALLEL_MIN_ELEMENTS = 16384

# Tags of stages that compute each output element from a fixed set of input elements.
INJECTIVE_TAGS = ("elemwise", "broadcast", "injective")


def current_target() -> Target:
    """The target of the innermost ``with Target(...)`` scope, else the host (``llvm``)."""
    return Target.current() or Target("llvm")


def vector_lanes(dtype: str, target: Target | None = None) -> int:
    """Lanes of ``dtype`` in one native vector register of ``target`` (at least 4)."""
    target = target or current_target()
    bits = max(dt.bits(dtype), 8)
    return max(target.vector_width_bits // bits, 4)


def as_list(outs) -> list:
    """``outs`` (a tensor or a sequence of tensors) as a list of tensors."""
    return [outs] if isinstance(outs, Tensor) else list(outs)


def const_int(e) -> int | None:
    """The value of an integer constant expression, or None for a symbolic one."""
    return e.value if isinstance(e, E.IntImm) else None


def num_elements(shape) -> int | None:
    """The product of a constant shape, or None when a dimension is symbolic."""
    total = 1
    for s in shape:
        v = const_int(s)
        if v is None:
            return None
        total *= v
    return total


def inline_injective(s, outs) -> None:
    """Inline every compute stage of ``s`` that is neither an output nor a reduction."""
    out_ops = {t.op for t in outs}
    for st in s.stages:
        op = st.op
        if (isinstance(op, ComputeOp) and op not in out_ops and not op.is_reduction
                and len(op.outputs) == 1):
            st.compute_inline()


def parallel_vectorize(stage, axes, dtype: str, shape) -> tuple:
    """Lay out ``axes`` (a stage's leading data axes, outermost first) as one parallel
    loop over one vectorized loop of the target's lanes.

    When the innermost axis is a constant multiple of the lanes, only it is split, so
    indices stay affine in the vector lane (broadcast reads along outer axes remain
    lane-invariant); otherwise all axes are fused first and the fused loop is split.

    Returns
    -------
    (outer, inner) : the parallel (or, for a small constant shape, serial) loop and the
    vectorized loop.
    """
    lanes = vector_lanes(dtype)
    last = const_int(axes[-1].dom.extent)
    if last is not None and last % lanes == 0:
        jo, inner = stage.split(axes[-1], factor=lanes)
        outer = stage.fuse(*axes[:-1], jo)
    else:
        outer, inner = stage.split(stage.fuse(*axes), factor=lanes)
    stage.vectorize(inner)
    total = num_elements(shape)
    if total is None or total >= PARALLEL_MIN_ELEMENTS:
        stage.parallel(outer)
    return outer, inner


def schedule_injective_stage(s, tensor) -> None:
    """Parallel + vectorized loops for one output ``tensor`` of an injective group."""
    stage = s[tensor]
    if stage.op.axis:
        parallel_vectorize(stage, list(stage.op.axis), tensor.dtype, tensor.shape)


def schedule_injective(cfg, outs):
    """Schedule a group of elementwise, broadcast and index-remapping stages.

    Parameters
    ----------
    cfg : config entity or None
        Unused (the schedule has no knobs); present for the strategy signature.
    outs : Tensor or list of Tensor
        The group's outputs; every non-output compute stage they read is inlined.

    Returns
    -------
    Schedule
        One loop nest per output: the fused axes split into a parallel loop over a
        vectorized loop of the target's vector width.

    Examples
    --------
    >>> s = schedule_injective(None, [topi.relu(topi.add(a, b))])   # doctest: +SKIP
    """
    outs = as_list(outs)
    s = create_schedule([t.op for t in outs])
    inline_injective(s, outs)
    for t in dict.fromkeys(outs):
        schedule_injective_stage(s, t)
    return s


# ---- reductions ---------------------------------------------------------------------------


def _inner_count(op) -> int:
    """How many trailing output axes of reduction ``op`` run inside its reduced axes in
    the input's layout (recorded by the computes as ``attrs["inner_axes"]``)."""
    return int(op.attrs.get("inner_axes", 0))


def _rfactor_lanes(s, tensor):
    """Vectorize a reduction over its innermost reduced axis with ``rfactor``: per vector
    lane a partial result over a strided slice, then a short reduction of the lanes.

    Returns the partial tensor (its stage still at root), or None where the reduction is
    too short to gain from it or cannot be factored (tuple reductions, ``init=``)."""
    stage = s[tensor]
    op = stage.op
    k = op.reduce_axis[-1]
    lanes = vector_lanes(tensor.dtype)
    ext = const_int(k.dom.extent)
    if len(op.outputs) != 1 or op.body[0].init or (ext is not None and ext < 2 * lanes):
        return None
    _, ki = stage.split(k, factor=lanes)
    rf = s.rfactor(tensor, ki, factor_axis=len(op.axis))
    rst = s[rf]
    lane_axis = rst.op.axis[-1]
    rst.reorder(*rst.op.axis[:-1], *rst.op.reduce_axis, lane_axis)
    rst.vectorize(lane_axis)
    return rf


def layout_reduction(s, tensor, attach=None):
    """Loops of reduction ``tensor``: outer output axes fused (parallel when at root),
    then the reduced axes, then the inner output axes fused and vectorized; a reduction
    over the innermost input axis is vectorized over partial results instead.

    With ``attach`` = ``(stage, axis)`` the reduction is computed inside that loop (it is
    then the producer of an epilogue) and nothing is marked parallel.

    Returns
    -------
    IterVar or None
        The outermost loop of the stage (None for a 0-d output).
    """
    stage = s[tensor]
    op = stage.op
    m = _inner_count(op)
    axes = list(op.axis)
    outer_axes, inner_axes = (axes[:-m], axes[-m:]) if m else (axes, [])
    rf = None
    if inner_axes:
        fi = stage.fuse(*inner_axes)
        fio, fii = stage.split(fi, factor=vector_lanes(tensor.dtype))
        stage.reorder(*outer_axes, fio, *op.reduce_axis, fii)
        stage.vectorize(fii)
        outer = stage.fuse(*outer_axes) if outer_axes else fio
    else:
        rf = _rfactor_lanes(s, tensor)
        outer = stage.fuse(*outer_axes) if outer_axes else None
    if attach is not None:
        stage.compute_at(*attach)
        if rf is not None:
            s[rf].compute_at(*attach)
    elif outer is not None:
        stage.parallel(outer)
        if rf is not None:
            s[rf].compute_at(stage, outer)
    return outer


def schedule_reduce(cfg, outs):
    """Schedule a group ending in a reduction, or in elementwise stages of one.

    Parameters
    ----------
    cfg : config entity or None
        Unused (the schedule has no knobs); present for the strategy signature.
    outs : Tensor or list of Tensor
        The group's outputs: reductions (tag ``"comm_reduce"``) or elementwise epilogues
        computed from one (``reduce_mean``'s division, a following activation).

    Returns
    -------
    Schedule
        Elementwise producers inlined; each reduction parallel over its outer output axes,
        vectorized over the output axes inside the reduced ones (or, when the reduced axis
        is innermost, over lanes of partial results); an epilogue shares the reduction's
        parallel loop.
    """
    outs = as_list(outs)
    s = create_schedule([t.op for t in outs])
    inline_injective(s, outs)
    for t in dict.fromkeys(outs):
        op = s[t].op
        if isinstance(op, ComputeOp) and op.is_reduction:
            layout_reduction(s, t)
            continue
        reductions = _reductions_read(s, op)
        if not reductions or not op.axis:
            schedule_injective_stage(s, t)
            continue
        red = reductions[0]
        m = _inner_count(red.op)
        axes = list(op.axis)
        if m and len(red.op.axis) == len(axes):
            outer, _ = _split_outer_inner(s[t], axes, m, t.dtype)
        else:
            outer = s[t].fuse(*axes)
            s[t].parallel(outer)
        for r in reductions:
            layout_reduction(s, r, attach=(s[t], outer))
    return s


def _split_outer_inner(stage, axes, m, dtype):
    """Outer axes fused and parallel, the ``m`` inner axes fused and vectorized."""
    fi = stage.fuse(*axes[-m:])
    fio, fii = stage.split(fi, factor=vector_lanes(dtype))
    stage.vectorize(fii)
    outer = stage.fuse(*axes[:-m], fio) if len(axes) > m else fio
    stage.parallel(outer)
    return outer, fii


def _reductions_read(s, op) -> list:
    """The reduction tensors of the group that ``op`` reads, directly or through other
    compute stages (a variance reads a mean), one per stage."""
    found, seen, todo = {}, set(), list(op.input_tensors)
    while todo:
        t = todo.pop()
        if t in seen or not isinstance(t.op, ComputeOp):
            continue
        seen.add(t)
        if t.op.is_reduction:
            found.setdefault(t.op, t)
        todo.extend(t.op.input_tensors)
    return list(found.values())


# ---- normalizations (softmax, layer_norm, ...) ---------------------------------------------


def _find_normalized(s, outs):
    """The op of the group that records ``attrs["norm_axes"]`` (start, end)."""
    todo, seen = [t.op for t in outs], set()
    while todo:
        op = todo.pop()
        if op in seen or not isinstance(op, ComputeOp):
            continue
        seen.add(op)
        if "norm_axes" in op.attrs:
            return op
        todo.extend(t.op for t in op.input_tensors)
    return None


def schedule_normalize(cfg, outs):
    """Schedule a normalization over a range of axes as one kernel: softmax, log_softmax,
    layer_norm, rms_norm, instance_norm (and an elementwise epilogue given in ``outs``).

    The normalizing op records ``attrs["norm_axes"] = (start, end)``: its statistics
    (max, sums, means) reduce over axes ``start .. end - 1``. The output's loops are the
    axes before ``start`` (with the axes after ``end-1`` split into vector chunks) fused
    into one parallel loop, and inside it the normalized axes, vectorized where they are
    innermost. Every statistic is computed inside that parallel loop (``compute_at``), for
    the one row it needs, vectorized over lanes of partial results or the inner axes.

    Parameters
    ----------
    cfg : config entity or None
        Unused (the schedule has no knobs).
    outs : Tensor or list of Tensor
        The group's output (the normalization or its elementwise epilogue).

    Returns
    -------
    Schedule
    """
    outs = as_list(outs)
    s = create_schedule([t.op for t in outs])
    norm = _find_normalized(s, outs)
    if norm is None:
        return schedule_injective(cfg, outs)
    inline_injective(s, outs)
    start, end = norm.attrs["norm_axes"]
    for t in dict.fromkeys(outs):
        stage = s[t]
        axes = list(stage.op.axis)
        outer, mid, inner = axes[:start], axes[start:end], axes[end:]
        lanes = vector_lanes(t.dtype)
        if inner:
            fio, fii = stage.split(stage.fuse(*inner), factor=lanes)
            stage.reorder(*outer, fio, *mid, fii)
            po = stage.fuse(*outer, fio)
            stage.vectorize(fii)
        else:
            _, vi = stage.split(stage.fuse(*mid), factor=lanes)
            stage.vectorize(vi)
            po = stage.fuse(*outer) if outer else None
        if po is not None:
            stage.parallel(po)
        for red in _reductions_read(s, stage.op):
            layout_reduction(s, red, attach=None if po is None else (stage, po))
    return s
