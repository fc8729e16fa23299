"""Default CPU schedules of the operator library: injective groups, reductions and
normalizations (softmax, layer_norm, ...).

A *group* is what a graph compiler fuses into one kernel: its outputs (``outs``) and
every compute stage they read, back to placeholders. Injective stages that are not
outputs are inlined into their consumers; each output gets one loop nest whose outer
loop is parallel over the target's cores and whose inner loop is vectorized with the
target's vector width, and the statistics a normalization reads are computed inside
its parallel loop, one row at a time. Extents may be symbolic: splits guard their tails,
and the code generator turns a guarded vector loop into masked loads and stores.
"""

from __future__ import annotations

import math

from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.analysis import linear_coeff
from ..ir.functor import post_order_visit, uses_var
from ..schedule.lower import expand_inline
from ..target import Target
from ..te import create_schedule
from ..te.tensor import ComputeOp, Tensor
from .injective_space import (DEFAULT_INJECTIVE_KNOBS, InjectiveKnobs,
                              define_injective_knobs)
from .row_space import DEFAULT_ROW_KNOBS, RowKnobs, define_row_knobs

#: Below this many output elements (a constant shape) a parallel loop costs more in
#: fork/join than it saves, so small kernels run on one thread.
PARALLEL_MIN_ELEMENTS = 16384


def current_target() -> Target:
    """The target of the innermost ``with Target(...)`` scope, else the host (``llvm``)."""
    return Target.current() or Target("llvm")


def vector_lanes(dtype: str, target: Target | None = None) -> int:
    """Lanes of ``dtype`` in one native vector register of ``target`` (at least 4)."""
    target = target or current_target()
    bits = max(dt.bits(dtype), 8)
    return max(target.vector_width_bits // bits, 4)


def parallel(stage, axis) -> None:
    """Mark ``axis`` of ``stage`` parallel, unless the target has a single core (a
    parallel loop there only adds the runtime's fork/join)."""
    if current_target().num_cores > 1:
        stage.parallel(axis)


def as_list(outs) -> list:
    """``outs`` (a tensor or a sequence of tensors) as a list of tensors."""
    return [outs] if isinstance(outs, Tensor) else list(outs)


def const_int(e) -> int | None:
    """The value of an integer constant expression, or None for a symbolic one."""
    return e.value if isinstance(e, E.IntImm) else None


def same_shape(a, b) -> bool:
    """Whether shapes ``a`` and ``b`` are equal: the same dimensions (constants or the
    same symbolic expressions)."""
    return len(a) == len(b) and all(
        x is y or (const_int(x) is not None and const_int(x) == const_int(y))
        for x, y in zip(a, b))


def num_elements(shape) -> int | None:
    """The product of a constant shape, or None when a dimension is symbolic."""
    total = 1
    for s in shape:
        v = const_int(s)
        if v is None:
            return None
        total *= v
    return total


def inline_injective(s, outs, keep=frozenset()) -> None:
    """Inline every compute stage of ``s`` that is neither an output nor a reduction, nor
    a row buffer (``attrs["row_buffer"]``: computed once and read twice on purpose), nor
    one of the ops in ``keep`` (stages the schedule computes at root)."""
    out_ops = {t.op for t in outs}
    for st in s.stages:
        op = st.op
        if (isinstance(op, ComputeOp) and op not in out_ops and not op.is_reduction
                and len(op.outputs) == 1 and not op.attrs.get("row_buffer")
                and op not in keep):
            st.compute_inline()


def vector_block(axes, lanes: int) -> int:
    """How many trailing ``axes`` form the vectorized loop: the last one when it is
    symbolic or has at least ``lanes`` points, else the shortest suffix that does.

    Fusing only what a vector needs keeps every index affine in the vector lane: a loop
    fused over several axes is split back into them with ``//`` and ``%``, which turns
    contiguous loads into gathers."""
    total = 1
    for k in range(1, len(axes) + 1):
        extent = const_int(axes[-k].dom.extent)
        if extent is None:
            return k
        total *= extent
        if total >= lanes:
            return k
    return len(axes)


def block_layout(stage, outer, inner, middle, lanes: int, npar: int, fuse_inner=True):
    """Loop order ``outer, inner[:-k], chunk, middle, lane`` for data axes ``outer`` and
    ``inner`` of ``stage`` and other leaf axes ``middle`` (reduced or normalized axes):
    the last ``k`` inner axes (:func:`vector_block`) fused and split into vector chunks
    of ``lanes``, the lane loop vectorized.

    The first ``npar`` outer axes are fused into one loop; when that is all of them and
    ``fuse_inner``, the remaining inner axes and the chunk loop join it.

    Returns
    -------
    (fused, chunk) : the fused loop (None when ``npar`` is 0) and the innermost loop
    around one vector chunk (``fused`` itself when the chunk loop joined it).
    """
    k = vector_block(inner, lanes)
    rest = inner[:-k]
    chunk, lane = stage.split(stage.fuse(*inner[-k:]), factor=lanes)
    stage.reorder(*outer, *rest, chunk, *middle, lane)
    stage.vectorize(lane)
    if npar >= len(outer) and fuse_inner:
        loop = stage.fuse(*outer, *rest, chunk)
        return loop, loop
    return (stage.fuse(*outer[:npar]) if npar else None), chunk


def _outer_axes(axes, lanes: int) -> list:
    """The leading ``axes`` outside the vector block of ``lanes`` (:func:`vector_block`)."""
    return axes[:-vector_block(axes, lanes)]


def _rows_rule(outer) -> bool:
    """The untuned choice of the parallel loop: the ``outer`` axes alone when there are
    rows enough to share out (a symbolic count, or four per core), else every axis."""
    n_outer = num_elements([a.dom.extent for a in outer])
    return bool(outer) and (n_outer is None or n_outer >= 4 * current_target().num_cores)


def _row_axes(op, outer) -> list:
    """The ``outer`` axes of injective ``op`` its untuned parallel loop fuses: all, or
    the leading ones its compute records as ``attrs["parallel_axes"]`` (a resize keeps
    the output's width serial inside its rows: what a row's taps share is computed once
    per row, and a fused index would be divided back into the width for every vector)."""
    return outer[:int(op.attrs.get("parallel_axes", len(outer)))]


def _parallel_rule(shape) -> bool:
    """The untuned choice of running a kernel of ``shape`` in parallel."""
    total = num_elements(shape)
    return total is None or total >= PARALLEL_MIN_ELEMENTS


def parallel_vectorize(stage, axes, dtype: str, shape,
                       knobs: InjectiveKnobs = DEFAULT_INJECTIVE_KNOBS):
    """Lay out ``axes`` (a stage's data axes, outermost first) as one parallel loop over
    one vectorized loop of the target's lanes (see :func:`block_layout`); a small
    constant shape stays on one thread. ``knobs`` (:mod:`.injective_space`) choose the
    vector width, the axes and grain of the parallel loop and the unroll of the loop
    around a vector; the defaults are the untuned rules.

    Returns
    -------
    IterVar : the parallel (or serial) loop around the vectorized one.
    """
    lanes = vector_lanes(dtype) * knobs.vectors
    outer = _outer_axes(axes, lanes)
    npar = knobs.parallel_axes
    if npar is None:
        rows = _row_axes(stage.op, outer)
        npar = len(rows) if _rows_rule(rows) else 0
    npar = min(npar, len(outer))
    if npar:
        # Rows to share out: the chunk loop stays a serial loop of constant extent inside
        # each row, which loop partitioning cuts into full chunks and the tail.
        loop, chunk = block_layout(stage, outer, axes[len(outer):], [], lanes, npar,
                                   fuse_inner=False)
    else:
        loop, chunk = block_layout(stage, [], axes, [], lanes, 0)
    if knobs.unroll > 1:
        outer_chunk, unrolled = stage.split(chunk, factor=knobs.unroll)
        stage.unroll(unrolled)
        loop = outer_chunk if chunk is loop else loop
    if knobs.grain > 1:
        loop, _ = stage.split(loop, factor=knobs.grain)
    run_parallel = knobs.parallel
    if run_parallel is None:
        run_parallel = _parallel_rule(shape)
    if run_parallel:
        parallel(stage, loop)
    return loop


#: Rows of the block a transposing layout (:func:`transposes_into_lanes`) is computed in:
#: a native vector of float32 on AVX-512, what the code generator's block transpose
#: takes at most.
TRANSPOSE_ROWS = 16

#: The same for rows of symbolic extent, whose last block is partial and guarded (no
#: register transpose): half a block keeps that part small.
SYMBOLIC_TRANSPOSE_ROWS = 8


def transposes_into_lanes(tensor) -> bool:
    """Whether ``tensor``, its injective producers inlined, is a layout transform into a
    block of lanes: its last axis, at most a vector of the target's lanes, reads no input
    contiguously, while its next-to-last axis reads one contiguously (an NCHW value,
    perhaps shuffled or concatenated along channels, written as NCHW[16]c). Vectorized
    along the lanes as written, every vector is a gather from as many planes; computed
    along the next-to-last axis instead and transposed in registers, every read is a
    contiguous load."""
    op = tensor.op
    if not isinstance(op, ComputeOp) or len(op.axis) < 2:
        return False
    lanes, rows = (const_int(a.dom.extent) for a in op.axis[-1:-3:-1])
    # Rows of symbolic extent (an image's width) are blocks and a guarded last block.
    if lanes is None or (rows is not None and rows < 2) or lanes & (lanes - 1) or not (
            2 <= lanes <= vector_lanes(tensor.dtype)):
        return False
    lane_var, row_var = op.axis[-1].var, op.axis[-2].var
    contiguous = {"lane": False, "row": False}

    def fn(n):
        # Contiguous along ``var``: the last index steps by one with it, no other uses it.
        if not isinstance(n, E.ProducerLoad) or not n.indices:
            return
        *others, last = n.indices
        for key, var in (("lane", lane_var), ("row", row_var)):
            lc = linear_coeff(last, var)
            if lc is not None and const_int(lc[0]) == 1 and not any(
                    uses_var(i, var) for i in others):
                contiguous[key] = True

    s = create_schedule([op])
    inline_injective(s, [tensor])
    for body in expand_inline(s)[s[tensor]]:
        post_order_visit(body, fn)
    return contiguous["row"] and not contiguous["lane"]


def _transposing_layout(stage, tensor) -> None:
    """The loops of a stage :func:`transposes_into_lanes` holds for: rows of the output
    (all axes but the last two) in parallel, then blocks of :data:`TRANSPOSE_ROWS` of the
    next-to-last axis, each an unrolled loop around the vectorized lanes (the nest the
    code generator emits as contiguous loads and a transpose in registers)."""
    *outer, row, lane = stage.op.axis
    # Blocks that divide the rows where a power of two does (56 -> 8): a tail block's
    # guard would keep its rows from the transpose. Where none does, the rows continue
    # into the axis before (14 x 14 in blocks of 4 of the 196 positions). Rows of
    # symbolic extent are blocks of SYMBOLIC_TRANSPOSE_ROWS: loop partitioning leaves
    # the guard to the last, which the others do not wait for.
    rows = const_int(row.dom.extent)
    if rows is None:
        factor = SYMBOLIC_TRANSPOSE_ROWS
    else:
        if outer and rows % 4 != 0 and const_int(outer[-1].dom.extent) is not None:
            rows *= const_int(outer[-1].dom.extent)
            row = stage.fuse(outer.pop(), row)
        factor = next((f for f in (TRANSPOSE_ROWS, 8, 4) if rows % f == 0), TRANSPOSE_ROWS)
    block, in_block = stage.split(row, factor=factor)
    stage.reorder(*outer, block, in_block, lane)
    stage.unroll(in_block)
    stage.vectorize(lane)
    if outer and _parallel_rule(tensor.shape):
        parallel(stage, stage.fuse(*outer))


def schedule_injective_stage(s, tensor, knobs: InjectiveKnobs = DEFAULT_INJECTIVE_KNOBS,
                             transposing: bool | None = None) -> None:
    """Parallel + vectorized loops for one output ``tensor`` of an injective group (a
    layout transform into a block of lanes computed as block transposes; ``transposing``
    says whether it is one where the caller knows, see :func:`transposes_into_lanes`)."""
    stage = s[tensor]
    if not stage.op.axis:
        return
    if transposing is None:
        transposing = knobs.transpose and transposes_into_lanes(tensor)
    if knobs.transpose and transposing:
        _transposing_layout(stage, tensor)
    else:
        parallel_vectorize(stage, list(stage.op.axis), tensor.dtype, tensor.shape, knobs)


def broadcast_producers(s, outs) -> list:
    """The injective compute stages of the group that ``inline_injective`` would inline
    and that have fewer elements than an output reading them (a constant count): inlined,
    each of their elements is computed again for every output element it is broadcast
    to. In producer order."""
    out_ops = {t.op for t in outs}
    sizes = [num_elements(t.shape) for t in outs]
    largest = max((n for n in sizes if n is not None), default=None)
    found = []
    for st in s.stages:
        op = st.op
        if (not isinstance(op, ComputeOp) or op in out_ops or op.is_reduction
                or len(op.outputs) != 1 or op.attrs.get("row_buffer") or not op.axis):
            continue
        n = num_elements(op.output(0).shape)
        if n is not None and largest is not None and n < largest:
            found.append(op)
    return found


def _injective_knobs(cfg, s, outs, materializable, transposing: bool) -> InjectiveKnobs:
    """The knobs of ``cfg`` that matter for the injective group of ``outs``, derived from
    its first output's axes (:func:`.injective_space.define_injective_knobs`) and whether
    it is a transposing layout."""
    first = outs[0]
    axes = list(first.op.axis) if isinstance(first.op, ComputeOp) else []
    outer = _outer_axes(axes, vector_lanes(first.dtype)) if axes else []
    rows = _row_axes(first.op, outer) if axes else []
    return define_injective_knobs(
        cfg, outer_axes=len(outer), row_axes=len(rows), rows_rule=_rows_rule(rows),
        parallel_rule=_parallel_rule(first.shape),
        multicore=current_target().num_cores > 1,
        broadcast_producers=bool(materializable), transposing=transposing)


def schedule_injective(cfg, outs):
    """Schedule a group of elementwise, broadcast and index-remapping stages.

    Parameters
    ----------
    cfg : config entity or None
        Its injective knobs (:func:`.injective_space.define_injective_knobs`; a fallback
        config or None: the untuned rules).
    outs : Tensor or list of Tensor
        The group's outputs; every non-output compute stage they read is inlined, or,
        with the ``materialize`` knob, computed at root where it is read by broadcast.

    Returns
    -------
    Schedule
        One loop nest per output: its rows (all axes but the trailing ones a vector
        needs) fused into a parallel loop, the trailing axes split into chunks of the
        target's vector width, vectorized.

    Examples
    --------
    >>> s = schedule_injective(None, [topi.relu(topi.add(a, b))])   # doctest: +SKIP
    """
    outs = as_list(outs)
    s = create_schedule([t.op for t in outs])
    materializable = broadcast_producers(s, outs)
    # Asked once per output: the test builds a schedule of its own to look through.
    transposing = {t: transposes_into_lanes(t) for t in dict.fromkeys(outs)}
    knobs = _injective_knobs(cfg, s, outs, materializable, transposing[outs[0]])
    keep = set(materializable) if knobs.materialize else set()
    inline_injective(s, outs, keep=keep)
    for st in list(s.stages):
        if st.op in keep:
            schedule_injective_stage(s, st.op.output(0))
    for t, transposes in transposing.items():
        schedule_injective_stage(s, t, knobs, transposes)
    return s


# ---- reductions ---------------------------------------------------------------------------


def _inner_count(op) -> int:
    """How many trailing output axes of reduction ``op`` run inside its reduced axes in
    the input's layout (recorded by the computes as ``attrs["inner_axes"]``)."""
    return int(op.attrs.get("inner_axes", 0))


def _parallel_count(op, n_outer: int) -> int:
    """How many leading output axes of reduction ``op`` form its parallel loop: all outer
    axes unless the compute records fewer as ``attrs["parallel_axes"]`` (pooling keeps
    its output rows a serial loop of constant extent, which loop partitioning can cut
    into border and interior rows)."""
    return min(int(op.attrs.get("parallel_axes", n_outer)), n_outer)


def _rfactor_lanes(s, tensor, knobs: RowKnobs, fetch_ahead: bool = False):
    """Vectorize a reduction over its innermost reduced axis with ``rfactor``: per vector
    lane a partial result over a strided slice (``knobs.reduce_vectors`` registers of
    lanes, their loop unrolled by ``knobs.reduce_unroll``), then the lanes combined in a
    vectorized reduction loop. With ``fetch_ahead`` (the reduction is the first read of a
    row from memory, computed in the row loop) the partial sums' loop over a row's chunks
    prefetches the inputs ``knobs.prefetch_rows`` rows ahead.

    Returns the partial tensor (its stage still at root), or None where the reduction is
    too short to gain from it or cannot be factored (tuple reductions, ``init=``)."""
    stage = s[tensor]
    op = stage.op
    k = op.reduce_axis[-1]
    lanes = vector_lanes(tensor.dtype) * knobs.reduce_vectors
    ext = const_int(k.dom.extent)
    if len(op.outputs) != 1 or op.body[0].init or (ext is not None and ext < 2 * lanes):
        return None
    _, ki = stage.split(k, factor=lanes)
    rf = s.rfactor(tensor, ki, factor_axis=len(op.axis))
    rst = s[rf]
    lane_axis = rst.op.axis[-1]
    reduce_axes = list(rst.op.reduce_axis)
    chunk = reduce_axes[-1]
    if knobs.reduce_unroll > 1:
        chunk, kui = rst.split(chunk, factor=knobs.reduce_unroll)
        reduce_axes[-1:] = [chunk, kui]
        rst.unroll(kui)
    rst.reorder(*rst.op.axis[:-1], *reduce_axes, lane_axis)
    rst.vectorize(lane_axis)
    # A row is every point of the reduced axes: over several (an instance norm's plane),
    # a step of the chunk loop moves through the innermost one, and a row is this many.
    outer_points = [const_int(a.dom.extent) for a in op.reduce_axis[:-1]]
    if fetch_ahead and ext is not None and None not in outer_points:
        chunks_per_row = -(-ext // (lanes * knobs.reduce_unroll)) * math.prod(outer_points)
        _prefetch_rows_ahead(rst, chunk, chunks_per_row, knobs)
    # The lanes' partial results combine in a tree of vector operations, not a chain of
    # one scalar operation per lane (``tecomp.ir.analysis.lane_reduction``).
    s[tensor].vectorize(s[tensor].op.reduce_axis[-1])
    return rf


def _parallel_rows(stage, loop, rows: int):
    """Mark ``loop`` (a stage's fused row loop) parallel in tasks of ``rows`` rows;
    returns the loop over the rows of one task (``loop`` itself for one row a task)."""
    task = loop
    if rows > 1:
        task, loop = stage.split(loop, factor=rows)
    parallel(stage, task)
    return loop


#: A reduction over at most this many points (all extents constant) is unrolled.
UNROLL_WINDOW_POINTS = 16


def _unroll_small_window(stage, reduce_axes) -> None:
    """Unroll the reduced axes of a small constant window (a 3x3 pool): each output vector
    then accumulates in a register, its window's border tests are decided at compile time,
    and no loop over 3 points runs per vector. With strided vector loads, ResNet's 3x3 / 2
    max pool at 112x112 went from 0.161 to 0.106 ms, SqueezeNet's (96 channels at
    111x111) from 0.230 to 0.118 ms."""
    extents = [const_int(ax.dom.extent) for ax in reduce_axes]
    if not extents or None in extents:
        return
    if math.prod(extents) <= UNROLL_WINDOW_POINTS:
        for ax in reduce_axes:
            stage.unroll(ax)


def layout_reduction(s, tensor, attach=None, knobs: RowKnobs = DEFAULT_ROW_KNOBS,
                     fetch_ahead: bool = False):
    """Loops of reduction ``tensor``: outer output axes fused (parallel when at root),
    then the reduced axes, then the inner output axes vectorized (:func:`block_layout`);
    a reduction over the innermost input axis is vectorized over partial results instead.
    ``knobs`` (:mod:`.row_space`) size the vectors and the parallel tasks.

    With ``attach`` = ``(stage, axis)`` the reduction is computed inside that loop (it is
    then the producer of an epilogue) and nothing is marked parallel; ``fetch_ahead``
    then has a reduction over the innermost axis prefetch its inputs rows ahead
    (:func:`_rfactor_lanes`).

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
    if inner_axes and attach is None and knobs.local_accumulator:
        return _layout_local_accumulator(s, tensor, knobs)
    if inner_axes:
        fused, chunk = block_layout(stage, outer_axes, inner_axes, op.reduce_axis,
                                    vector_lanes(tensor.dtype) * knobs.output_vectors,
                                    _parallel_count(op, len(outer_axes)))
        outer = fused if fused is not None else chunk
        _unroll_small_window(stage, op.reduce_axis)
    else:
        rf = _rfactor_lanes(s, tensor, knobs, fetch_ahead and attach is not None)
        outer = stage.fuse(*outer_axes) if outer_axes else None
    if attach is not None:
        stage.compute_at(*attach)
        if rf is not None:
            s[rf].compute_at(*attach)
    elif outer is not None:
        row = _parallel_rows(stage, outer, knobs.rows_per_task)
        if rf is not None:
            s[rf].compute_at(stage, row)
    return outer


def _layout_local_accumulator(s, tensor, knobs: RowKnobs):
    """:func:`layout_reduction` of a reduction at root over its inner output axes, with
    ``cache_write``: each vector chunk of the output is reduced into a local buffer
    computed inside the output's chunk loop (the reduced axes outside the lanes, a small
    window unrolled), then copied out, so the accumulators stay in registers instead of
    being loaded and stored at every point of the reduced axes.

    Returns the output's outermost loop."""
    op = s[tensor].op
    m = _inner_count(op)
    n_outer = len(op.axis) - m
    lanes = vector_lanes(tensor.dtype) * knobs.output_vectors
    cache = s.cache_write(tensor, "local")
    out = s[tensor]
    axes = list(out.op.axis)
    fused, chunk = block_layout(out, axes[:n_outer], axes[n_outer:], [], lanes,
                                _parallel_count(op, n_outer))
    outer = fused if fused is not None else chunk
    row = _parallel_rows(out, outer, knobs.rows_per_task)
    local = s[cache]
    # The chunk loop may be the parallel one, split into tasks: then one chunk is an
    # iteration of the loop inside a task.
    local.compute_at(out, row if chunk is outer else chunk)
    c_axes = list(local.op.axis)
    k = vector_block(c_axes[n_outer:], lanes)
    c_chunk, c_lane = local.split(local.fuse(*c_axes[-k:]), factor=lanes)
    local.reorder(*c_axes[:-k], c_chunk, *local.op.reduce_axis, c_lane)
    local.vectorize(c_lane)
    _unroll_small_window(local, local.op.reduce_axis)
    return outer


def schedule_reduce(cfg, outs):
    """Schedule a group ending in a reduction, or in elementwise stages of one.

    Parameters
    ----------
    cfg : config entity or None
        Its row knobs (:func:`.row_space.define_row_knobs`; None: the defaults).
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
    outs = list(dict.fromkeys(as_list(outs)))
    s = create_schedule([t.op for t in outs])
    knobs = _row_knobs(cfg, s, outs)
    inline_injective(s, outs)
    at_root = _reductions_at_root(s, outs, knobs)
    for t in outs:
        op = t.op
        if op in at_root:
            continue
        reductions = []
        for r in _reductions_read(s, op):
            if r.op in at_root:
                continue
            if same_shape(r.shape, t.shape) and knobs.stats_in_row:
                reductions.append(r)
            else:
                # Read broadcast (x - mean(x)): inside the output's loop it would be
                # recomputed for every element it is broadcast to.
                layout_reduction(s, r, knobs=knobs)
                at_root.add(r.op)
        if not op.axis:
            # A 0-d output (a reduction over every axis, then NaN's rule or a scale):
            # the reduction has no row loop to join; it is laid out at root.
            for r in reductions:
                layout_reduction(s, r, knobs=knobs)
        if not reductions or not op.axis:
            schedule_injective_stage(s, t)
            continue
        red = reductions[0]
        m = _inner_count(red.op)
        axes = list(op.axis)
        if m and len(red.op.axis) == len(axes):
            fused, outer = block_layout(s[t], axes[:-m], axes[-m:], [],
                                        vector_lanes(t.dtype) * knobs.output_vectors,
                                        _parallel_count(red.op, len(axes) - m))
            if fused is not None:
                row = _parallel_rows(s[t], fused, knobs.rows_per_task)
                outer = row if outer is fused else outer
        else:
            outer = _parallel_rows(s[t], s[t].fuse(*axes), knobs.rows_per_task)
        for r in reductions:
            layout_reduction(s, r, attach=(s[t], outer), knobs=knobs)
    return s


def _row_buffers_read(s, op) -> list:
    """The row buffers (stages ``inline_injective`` keeps) that ``op`` reads, directly or
    through other compute stages, one per stage."""
    return _stages_read(op, lambda o: o.attrs.get("row_buffer"))


def _row_knobs(cfg, s, outs) -> RowKnobs:
    """The row knobs of ``cfg`` that matter for the group of ``outs``: the reduction
    vectors only where a reduction runs over its innermost axis, the placement of the
    statistics only where an output reads one."""
    reductions = {r.op for t in outs for r in _reductions_read(s, t.op)}
    reductions |= {t.op for t in outs if isinstance(t.op, ComputeOp) and t.op.is_reduction}
    rfactor = any(_inner_count(op) == 0 and op.reduce_axis for op in reductions)
    statistics = any(not t.op.is_reduction and _reductions_read(s, t.op) for t in outs
                     if isinstance(t.op, ComputeOp))
    # A reduction that is an output is laid out at root; vectorized over its inner axes,
    # it may accumulate in a local buffer.
    accumulator = any(isinstance(t.op, ComputeOp) and t.op.is_reduction
                      and len(t.op.outputs) == 1 and _inner_count(t.op) > 0
                      for t in outs)
    group = [t.op for t in outs if isinstance(t.op, ComputeOp)]
    group += [read.op for t in outs for read in _stages_read(t.op, lambda o: True)]
    return define_row_knobs(cfg, rfactor=rfactor, statistics=statistics,
                            accumulator=accumulator, long_chains=calls_long_chains(group))


#: Intrinsics whose vector code is one long chain of dependent instructions (a range
#: reduction and a polynomial): ``exp`` and the functions computed from it.
LONG_CHAIN_CALLS = frozenset({"exp", "exp2", "tanh", "sigmoid", "erf", "pow"})


def calls_long_chains(ops) -> bool:
    """Whether a body of ``ops`` calls one of :data:`LONG_CHAIN_CALLS`."""
    found = []

    def visit(n):
        if type(n) is E.Call and n.name in LONG_CHAIN_CALLS:
            found.append(n)

    for op in ops:
        for body in op.body:
            post_order_visit(body, visit)
            if found:
                return True
    return False


def _reductions_at_root(s, outs, knobs: RowKnobs) -> set:
    """Lay out at root (each in its own parallel loop nest) the group's reductions that
    are outputs or that more than one output reads (a buffer computed inside one output's
    loop is not visible to another); returns their ops."""
    readers: dict = {}
    for t in outs:
        for r in _reductions_read(s, t.op):
            readers.setdefault(r.op, []).append(t)
    at_root = {op for op, ts in readers.items() if len(ts) > 1}
    at_root |= {t.op for t in outs if isinstance(t.op, ComputeOp) and t.op.is_reduction}
    for st in list(s.stages):  # in producer order; layout_reduction may add stages
        if st.origin_op in at_root:
            layout_reduction(s, st.origin_op.output(0), knobs=knobs)
    return at_root


def _reductions_read(s, op) -> list:
    """The reduction tensors of the group that ``op`` reads, directly or through other
    compute stages (a variance reads a mean), one per stage."""
    return _stages_read(op, lambda o: o.is_reduction)


def _stages_read(op, keep) -> list:
    """The tensors of the compute stages ``op`` reads, directly or through other compute
    stages, whose op satisfies ``keep``; one per stage."""
    found, seen, todo = {}, set(), list(op.input_tensors)
    while todo:
        t = todo.pop()
        if t in seen or not isinstance(t.op, ComputeOp):
            continue
        seen.add(t)
        if keep(t.op):
            found.setdefault(t.op, t)
        todo.extend(t.op.input_tensors)
    return list(found.values())


# ---- normalizations (softmax, layer_norm, ...) ---------------------------------------------


#: A normalization's row loop fetches its inputs (and, where the config says so, its
#: output's lines) ``RowKnobs.prefetch_rows`` rows ahead for rows of at least this many
#: bytes (:data:`.row_space.PREFETCH_ROWS`).
PREFETCH_ROW_BYTES = 2048


def _prefetch_rows_ahead(stage, chunk, chunks_per_row: int, knobs: RowKnobs) -> None:
    """Prefetch, in a row buffer's ``stage`` (laid out as ``chunks_per_row`` iterations of
    ``chunk`` per row), the inputs it reads from memory ``knobs.prefetch_rows`` rows
    ahead, as streaming hints where ``knobs.prefetch_streaming``."""
    for tensor in stage.op.input_tensors:
        if not isinstance(tensor.op, ComputeOp):
            stage.prefetch(tensor, chunk, chunks_per_row * knobs.prefetch_rows,
                           streaming=knobs.prefetch_streaming)


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
        Its row knobs (:func:`.row_space.define_row_knobs`; None: the defaults): rows per
        parallel task, vector widths, and whether the statistics are computed in the row
        loop or before it.
    outs : Tensor or list of Tensor
        The group's output (the normalization or its elementwise epilogue).

    Returns
    -------
    Schedule
    """
    outs = list(dict.fromkeys(as_list(outs)))
    s = create_schedule([t.op for t in outs])
    norm = _find_normalized(s, outs)
    if norm is None:
        return schedule_injective(cfg, outs)
    knobs = _row_knobs(cfg, s, outs)
    inline_injective(s, outs)
    at_root = _reductions_at_root(s, outs, knobs)
    start, end = norm.attrs["norm_axes"]
    for t in outs:
        stage = s[t]
        if t.op in at_root:
            continue
        axes = list(stage.op.axis)
        outer, mid, inner = axes[:start], axes[start:end], axes[end:]
        lanes = vector_lanes(t.dtype) * knobs.output_vectors
        if inner:
            po, _ = block_layout(stage, outer, inner, mid, lanes, len(outer))
        else:
            po, _ = block_layout(stage, outer, mid, [], lanes, len(outer), fuse_inner=False)
        row = None if po is None else _parallel_rows(stage, po, knobs.rows_per_task)
        in_row = row is not None and knobs.stats_in_row
        row_length = None if inner else num_elements([a.dom.extent for a in mid])
        prefetch = (in_row and row_length is not None and knobs.prefetch_rows > 0
                    and row_length * dt.bits(t.dtype) // 8 >= PREFETCH_ROW_BYTES)
        buffers = _row_buffers_read(s, t.op)
        for buf in buffers:
            if in_row:
                s[buf].compute_at(stage, row)
                chunk, _ = block_layout(s[buf], [], list(s[buf].op.axis), [], lanes, 0)
                if prefetch:
                    _prefetch_rows_ahead(s[buf], chunk, -(-row_length // lanes), knobs)
            else:
                parallel_vectorize(s[buf], list(s[buf].op.axis), buf.dtype, buf.shape)
        if prefetch and knobs.prefetch_output:
            stage.prefetch(t, row, knobs.prefetch_rows)
        # Without row buffers (a layer norm's statistics read the input itself), the
        # first statistic is what reads a row from memory, and it prefetches.
        fetch_ahead = prefetch and not buffers
        for red in _reductions_read(s, t.op):
            if red.op not in at_root:
                layout_reduction(s, red, attach=(stage, row) if in_row else None,
                                 knobs=knobs, fetch_ahead=fetch_ahead)
                fetch_ahead = False
    return s
