"""Reductions on a GPU: one thread per output element where the reduced extent is small
(or symbolic), a block of threads per output element where it is large.

The cross-thread form, for a reduction over ``R`` elements (a constant, at least
:data:`CROSS_THREAD_MIN`): the reduced axes are fused and split by ``T`` threads
(``T`` a power of two, at most :data:`MAX_THREADS`), and ``rfactor`` makes each thread's
partial result over its strided share of the elements (reads coalesced: neighbouring
threads read neighbouring elements) a register; the reduction over the ``T`` partials,
its axis bound to ``threadIdx.x``, is lowered to warp shuffles and, across warps, a few
words of shared memory (:mod:`tecomp.schedule.thread_reduce`).
Reductions ``rfactor`` cannot split (tuple reductions such as argmax, those with an
``init``) stay one thread per output element.

A normalization (softmax, layer or RMS norm: an elementwise output of rows, reading
statistics of each row) whose rows are wide is one kernel (:func:`schedule_rows`): a
block per row computes the row's statistics that way, one after the other in shared
memory, then its threads write the row's elements.
"""

from __future__ import annotations

from ... import te
from ...te.tensor import ComputeOp
from ..cpu_schedule import const_int, num_elements, same_shape

#: The smallest reduced extent a block of threads shares: below it, one thread per output
#: element reads the elements itself (a global pool over 7 x 7, a 3 x 3 window).
CROSS_THREAD_MIN = 128

#: The most threads sharing one reduction.
MAX_THREADS = 256


def reduced_extent(op) -> int | None:
    """The number of elements ``op`` reduces per output element, or None when symbolic."""
    total = 1
    for iv in op.reduce_axis:
        n = const_int(iv.dom.extent)
        if n is None:
            return None
        total *= n
    return total


def splits_across_threads(op) -> bool:
    """Whether :func:`schedule_cross_thread` applies to ``op``: a single-output reduction
    without ``init``, with output axes, over a constant extent of at least
    :data:`CROSS_THREAD_MIN`."""
    if not (isinstance(op, ComputeOp) and op.is_reduction) or len(op.outputs) != 1:
        return False
    if op.body[0].init or not op.axis:
        return False
    extent = reduced_extent(op)
    return extent is not None and extent >= CROSS_THREAD_MIN


def _threads_for(extent: int) -> int:
    """The power of two of threads sharing ``extent`` elements: at most
    :data:`MAX_THREADS`, and each thread gets at least two elements."""
    threads = 32
    while threads * 2 <= min(MAX_THREADS, extent // 2):
        threads *= 2
    return threads


def _fused(stage, axes):
    return stage.fuse(*axes) if len(axes) > 1 else axes[0]


def block_per_element(stage):
    """Give each output element of ``stage`` a block (``blockIdx.x``) whose thread 0
    computes it (the element's loop of extent one bound to ``threadIdx.x``: the other
    threads skip it); returns the block loop, for the block's other stages to attach at."""
    block, one = stage.split(_fused(stage, list(stage.op.axis)), factor=1)
    stage.bind(block, te.thread_axis("blockIdx.x"))
    stage.bind(one, te.thread_axis("threadIdx.x"))
    return block


def schedule_cross_thread(s, tensor, attach=None, threads=None) -> None:
    """Compute reduction ``tensor`` with a block of threads per output element.

    Parameters
    ----------
    s : Schedule
    tensor : Tensor
        A reduction for which :func:`splits_across_threads` holds.
    attach : (Stage, IterVar), optional
        Compute it inside this block loop of a consumer of the same shape (the block that
        reads it, one output element per block): the result is then one element of
        shared memory. Without it, the reduction is a kernel of its own, one block per
        output element.
    threads : int, optional
        The threads sharing it: the block's, where other stages of the block bind more
        than :func:`_threads_for` the extent would (the shuffles need the whole block).
    """
    op = tensor.op
    stage = s[tensor]
    threads = threads or _threads_for(reduced_extent(op))
    _, lanes = stage.split(_fused(stage, list(stage.op.reduce_axis)), factor=threads)
    partial = s.rfactor(tensor, lanes, factor_axis=len(op.axis))
    # Each thread accumulates its partial in a register; the threads then combine them
    # by warp shuffles (the reduction axis over the partials bound to threadIdx.x).
    s[partial].set_scope("local")
    stage = s[tensor]
    if attach is None:
        stage.bind(_fused(stage, list(stage.op.axis)), te.thread_axis("blockIdx.x"))
    else:
        stage.set_scope("shared")
        stage.compute_at(*attach)
    lane = stage.op.reduce_axis[0]
    stage.bind(lane, te.thread_axis("threadIdx.x"))
    s[partial].compute_at(stage, lane)


def _row_axes(shape, stat_shapes, extent: int) -> int | None:
    """The number of leading axes of ``shape`` that index rows of ``extent`` elements,
    when every statistic shape is those axes followed by ones (or by nothing)."""
    for k in range(1, len(shape)):
        if num_elements(shape[k:]) != extent:
            continue
        if all(len(r) >= k and same_shape(r[:k], shape[:k])
               and all(const_int(d) == 1 for d in r[k:]) for r in stat_shapes):
            return k
    return None


def schedule_rows(s, out, reductions) -> bool:
    """Schedule ``out``, an elementwise output reading the statistics ``reductions``
    (ops, in producer order) of each of its rows, as one kernel of a block per row:
    each statistic by :func:`schedule_cross_thread` into shared memory, then the row's
    elements, neighbouring threads writing neighbouring elements.

    Returns
    -------
    bool
        Whether it applied: every statistic splits across threads, all reduce rows of
        one extent and are indexed by ``out``'s leading axes. Otherwise ``s`` is left as
        it was.
    """
    if not reductions or out.op in reductions:
        return False
    if not all(splits_across_threads(op) for op in reductions):
        return False
    extents = {reduced_extent(op) for op in reductions}
    if len(extents) != 1:
        return False
    extent = extents.pop()
    rows = _row_axes(out.shape, [op.output(0).shape for op in reductions], extent)
    if rows is None:
        return False
    stage = s[out]
    axes = list(stage.op.axis)
    block = _fused(stage, axes[:rows])
    steps, lane = stage.split(_fused(stage, axes[rows:]), factor=_threads_for(extent))
    stage.reorder(block, lane, steps)
    stage.bind(block, te.thread_axis("blockIdx.x"))
    stage.bind(lane, te.thread_axis("threadIdx.x"))
    for op in reductions:
        schedule_cross_thread(s, op.output(0), attach=(stage, block))
    return True
