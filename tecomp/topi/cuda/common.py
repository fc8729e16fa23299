"""Pieces the CUDA schedules share: tile knobs, binding a block's loops, and the
cooperative copy of a tile into shared memory."""

from __future__ import annotations

from ... import te
from ...te.analysis import ops_of
from ...te.tensor import ComputeOp

#: Blocks a kernel's untuned layout should give at least to fill a GPU: two per
#: multiprocessor of an H100 or H200 (132).
BLOCKS_TO_FILL = 264

#: Thread index names for 1, 2 or 3 thread dimensions, outermost first.
_THREAD_TAGS = {1: ("threadIdx.x",), 2: ("threadIdx.y", "threadIdx.x"),
                3: ("threadIdx.z", "threadIdx.y", "threadIdx.x")}


def shape_ints(shape) -> tuple:
    """A constant shape as a tuple of ints."""
    return tuple(int(getattr(d, "value", d)) for d in shape)


def define_tile(cfg, name: str, extent: int, vthreads: bool = True) -> None:
    """A split knob of an output axis into (blocks, virtual threads, threads, per thread),
    or (blocks, threads, per thread) without ``vthreads``: at most 8 virtual threads, 32
    threads and 8 values per thread along one axis, so a block stays within 1024 threads
    over two axes and a thread's accumulators within its registers. Over three axes (a
    direct convolution's channels, rows and columns) a few configs pass 1024 threads
    (1-3% of a convolution's space); the GPU schedule check refuses them when they are
    built, and they cost a trial."""
    limits = (8, 32, 8) if vthreads else (32, 8)
    cfg.define_split(name, extent, num_outputs=len(limits) + 1,
                     filter=lambda e: all(f <= m for f, m in zip(e.size[1:], limits)))


def bind_block(stage, z_axes, by, bx) -> None:
    """Bind ``by`` / ``bx`` to blockIdx.y / blockIdx.x and the (fused, at most one) loop
    in ``z_axes`` to blockIdx.z."""
    for ax in z_axes:
        stage.bind(ax, te.thread_axis("blockIdx.z"))
    stage.bind(by, te.thread_axis("blockIdx.y"))
    stage.bind(bx, te.thread_axis("blockIdx.x"))


def cooperative_load(s, T, threads, vec: int) -> None:
    """Schedule the copy ``T`` (a "shared" stage attached inside a block) over the
    block's threads: its last axis split into ``vec``-wide vector loads, the chunks (all
    axes fused) dealt out round-robin to the ``threads`` (extents, outermost first, as
    bound in the block), so neighbouring threads load neighbouring chunks (coalesced).
    The lanes split from the last axis alone keep each vector inside one row, so a row
    padded by ``storage_align`` still starts its vectors at aligned addresses."""
    stage = s[T]
    *outer, last = stage.op.axis
    chunk, lanes = stage.split(last, factor=vec)
    bound, rest = deal_to_threads(stage, stage.fuse(*outer, chunk) if outer else chunk,
                                  threads)
    stage.reorder(*bound, rest, lanes)
    if vec > 1:
        stage.vectorize(lanes)


def compute_as_filled(s, operands) -> None:
    """Inline the computes ``operands`` are made by (a convolution's gathered columns, an
    int8 operand widened with its zero point taken off, rows padded to whole blocks), so
    they are computed as their shared tiles are filled: call after ``cache_read``."""
    for op in ops_of(operands):
        if isinstance(op, ComputeOp):
            s[op.output(0)].compute_inline()


def deal_to_threads(stage, axis, threads) -> tuple:
    """Deal the iterations of ``axis`` out round-robin to the block's ``threads``
    (extents, outermost first), neighbouring threads taking neighbouring iterations:
    returns (the loops bound to the thread indices, the loop of each thread's turns),
    for the caller to order (bound ones outside)."""
    bound = []
    for n in reversed(threads):
        axis, t = stage.split(axis, factor=n)
        bound.insert(0, t)
    for ax, tag in zip(bound, _THREAD_TAGS[len(threads)]):
        stage.bind(ax, te.thread_axis(tag))
    return bound, axis
