"""Default CUDA schedules of the operator library's elementwise, broadcast, transform
and reduction operators, and their registration for target kind ``cuda``.

These operators have one compute for every target (registered for ``llvm`` by their
modules); for ``cuda`` the same compute is registered with the schedules below. A group's
injective stages that are not outputs are inlined; each output is one kernel of
``THREADS``-thread blocks, one output element per thread. A reduction over a small or
symbolic extent is computed by the thread of its output element, serially over the
reduced axes into a register; over a large constant extent, by a block of threads per
output element (:mod:`.reduction`). One read by a single output of its own shape
(``reduce_mean``'s division, an activation) runs inside that output's thread (block),
any other in a kernel of its own: TopK's ranks, and the statistics of a normalization
(softmax's maximum and sum, layer norm's mean and variance) over narrow rows, are
kernels before the one that reads them; a normalization of wide rows is one kernel, a
block per row (:func:`.reduction.schedule_rows`).
"""

from __future__ import annotations

from ... import te
from ...errors import ScheduleError
from ...te.analysis import ops_of
# The operator modules register their llvm implementations when imported; the cuda ones
# below are made from those, so they must be registered first.
from .. import (  # noqa: F401
    broadcast, cpu_schedule, elemwise, nn, quantize, reduction, resize, scatter, sort, transform)
from ..cpu_schedule import as_list, inline_injective, num_elements, same_shape
from ..strategy import Implementation, implementations, register_implementation
from .reduction import (
    block_per_element,
    schedule_cross_thread,
    schedule_rows,
    splits_across_threads,
)

#: Threads per block of an elementwise kernel: enough warps to hide memory latency,
#: few enough that small tensors still spread over several multiprocessors.
THREADS = 256


def _bind_elements(stage, tensor):
    """One thread per element of ``tensor``: its axes fused and split into blocks of
    ``THREADS`` (fewer for a smaller constant size). Returns the thread loop."""
    axes = list(stage.op.axis)
    if not axes:
        raise ScheduleError(
            f"cuda schedule of {tensor.name}: a 0-d result has no loop to bind to GPU "
            f"threads; give it shape (1,) (keepdims) to compute it on a GPU")
    total = num_elements(tensor.shape)
    threads = THREADS if total is None else max(1, min(THREADS, total))
    fused = stage.fuse(*axes) if len(axes) > 1 else axes[0]
    bx, tx = stage.split(fused, factor=threads)
    stage.bind(bx, te.thread_axis("blockIdx.x"))
    stage.bind(tx, te.thread_axis("threadIdx.x"))
    return tx


def schedule_injective(cfg, outs):
    """Schedule a group of elementwise, broadcast and index-remapping stages for a GPU.

    Parameters
    ----------
    cfg : config entity or None
        Unused (the schedule has no knobs); present for the strategy signature.
    outs : Tensor or list of Tensor
        The group's outputs; every non-output compute stage they read is inlined.

    Returns
    -------
    Schedule
        One kernel per output, one thread per element (see the module docstring).

    Raises
    ------
    ScheduleError
        An output has no axes (a 0-d tensor has no loop to bind to threads).

    Examples
    --------
    >>> s = schedule_injective(None, [topi.relu(topi.add(a, b))])   # doctest: +SKIP
    """
    outs = list(dict.fromkeys(as_list(outs)))
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s, outs)
    for t in outs:
        _bind_elements(s[t], t)
    return s


def schedule_reduce(cfg, outs):
    """Schedule a group ending in reductions, or in elementwise stages of one, for a GPU.

    Parameters
    ----------
    cfg : config entity or None
        Unused; present for the strategy signature.
    outs : Tensor or list of Tensor
        The group's outputs: reductions or elementwise epilogues computed from them.

    Returns
    -------
    Schedule
        One kernel per output (and per reduction that cannot run inside one), one thread
        per output element, each reduction accumulated in a register, or a block of
        threads per output element for a large constant reduced extent.

    Raises
    ------
    ScheduleError
        An output has no axes (a 0-d tensor has no loop to bind to threads).
    """
    outs = list(dict.fromkeys(as_list(outs)))
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s, outs)
    out_ops = {t.op for t in outs}
    reductions = [st.op for st in s.stages
                  if getattr(st.op, "reduce_axis", None) and st.attach_type != "inline"]
    readers = {op: [t for t in outs if op in ops_of([t]) and t.op is not op]
               for op in reductions}
    if len(outs) == 1 and schedule_rows(s, outs[0], reductions):
        return s  # a normalization of wide rows: one kernel, a block per row
    nested = {op for r in reductions for op in ops_of([r.output(0)]) if op is not r}
    inside = {}  # reduction op -> the output whose loop computes it
    for op in reductions:
        users = readers[op]
        if op not in out_ops and len(users) == 1 and op not in nested and (
                same_shape(op.output(0).shape, users[0].shape)
                # a 0-d statistic read by one element (a loss's mean, computed as (1,)):
                # the element's thread computes it, as it has no loop of its own to bind
                or (not op.output(0).shape and num_elements(users[0].shape) == 1)):
            inside[op] = users[0]
    wide = {op for op in reductions if splits_across_threads(op)}
    for t in outs:
        if t.op in wide:
            schedule_cross_thread(s, t)
        elif any(u is t and op in wide for op, u in inside.items()):
            block = block_per_element(s[t])
            for op, u in inside.items():
                if u is t:
                    schedule_cross_thread(s, op.output(0), attach=(s[t], block))
        else:
            thread = _bind_elements(s[t], t)
            for op, u in inside.items():
                if u is t:
                    s[op.output(0)].compute_at(s[t], thread)
    for op in reductions:
        if op in out_ops or op in inside:
            continue
        if op in wide:
            schedule_cross_thread(s, op.output(0))
        else:
            _bind_elements(s[op.output(0)], op.output(0))
    return s


def _register_shared_computes():
    """A ``cuda`` implementation, with the schedules above, of every operator whose
    ``llvm`` implementation is the default injective or reduction schedule."""
    # Normalizations and TopK are groups of reductions and elementwise stages: their
    # statistics (ranks) become kernels of their own, as schedule_reduce lays them out.
    cuda_schedule = {cpu_schedule.schedule_injective: schedule_injective,
                     cpu_schedule.schedule_reduce: schedule_reduce,
                     cpu_schedule.schedule_normalize: schedule_reduce,
                     sort.schedule_topk: schedule_reduce}
    for impl in implementations("llvm"):
        schedule = cuda_schedule.get(impl.schedule)
        # A tunable llvm implementation's config (its row knobs) is the llvm
        # schedule's; the cuda schedule takes none.
        if schedule is not None:
            register_implementation(Implementation(impl.op, "cuda", impl.compute, schedule))


_register_shared_computes()
