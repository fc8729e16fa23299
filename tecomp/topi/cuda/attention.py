"""Attention as one CUDA kernel: ``softmax(scale * Q K^T + mask) V`` without the score
matrix in device memory.

A block computes one query row: its threads compute the row's scores into shared memory
(one key each in turn, a dot product over the head dimension), the row's maximum and the
sum of its exponentials by warp shuffles (:mod:`tecomp.schedule.thread_reduce`), the
exponentials into shared memory, then one output column each: the exponentials times
the values' column, over the keys, divided by the sum. The scores of a row live in
shared memory for the block's life; the whole score matrix is never written, and the
three kernels of the unfused graph (the scores' product, the softmax, the product with
the values) and their round trips through memory become one.

The keys may be given as ``[B, Skv, D]`` or already transposed, ``[B, D, Skv]``; the
mask is added to the scaled scores, broadcast to ``[B, Sq, Skv]``.
"""

from __future__ import annotations

from ... import te
from ...errors import ShapeError
from ...te.analysis import ops_of
from ..group import group_output
from ..strategy import Implementation, register_implementation, register_without_implementation
from ..cpu_schedule import const_int
from .common import deal_to_threads, shape_ints
from .reduction import MAX_THREADS, schedule_cross_thread, splits_across_threads

ATTENTION_TAG = "attention"

#: The most keys a fused attention takes: a query row's scores and weights, float32 in
#: shared memory, then fill 32 KiB of the 48 a block may have.
MAX_KEYS = 4096


def _threads(keys: int) -> int:
    """Threads per block: a power of two from a warp up to :data:`MAX_THREADS`, about
    one per key."""
    threads = 32
    while threads < min(keys, MAX_THREADS):
        threads *= 2
    return threads


def compute_attention(cfg, q, k, v, mask=None, scale=1.0, k_transposed=False):
    """``softmax(scale * q @ k^T + mask, axis=-1) @ v`` for ``q[B, Sq, D]``, ``k[B, Skv,
    D]`` (``[B, D, Skv]`` with ``k_transposed``), ``v[B, Skv, Dv]`` and a ``mask``
    broadcast to ``[B, Sq, Skv]`` (tag ``"attention"`` on the output)."""
    B, Sq, D = q.shape
    Skv = k.shape[2] if k_transposed else k.shape[1]
    Dv = v.shape[2]
    if any(const_int(n) is None for n in (Sq, D, Skv, Dv)) or const_int(Skv) > MAX_KEYS:
        raise ShapeError(f"attention (cuda): needs constant sequence and head sizes, at "
                         f"most {MAX_KEYS} keys; got q {q.shape}, k {k.shape}, v {v.shape}")
    wide = "float32"
    d = te.reduce_axis((0, D), name="d")

    def key(b, j, dd):
        return k[b, dd, j] if k_transposed else k[b, j, dd]

    dot = te.compute((B, Sq, Skv), lambda b, i, j: te.sum(
        q[b, i, d].astype(wide) * key(b, j, d).astype(wide), axis=d), name="scores")

    def scaled(b, i, j):
        value = dot[b, i, j] * te.const(scale, wide)
        if mask is None:
            return value
        index = [b, i, j][3 - len(mask.shape):]  # broadcast from the last axis
        index = [0 if const == 1 else ix for ix, const in zip(index, shape_ints(mask.shape))]
        return value + mask[tuple(index)].astype(wide)

    logits = te.compute((B, Sq, Skv), scaled, name="logits")
    j = te.reduce_axis((0, Skv), name="j")
    top = te.compute((B, Sq), lambda b, i: te.max(logits[b, i, j], axis=j), name="row_max")
    weights = te.compute((B, Sq, Skv), lambda b, i, jj: te.exp(logits[b, i, jj] - top[b, i]),
                         name="weights")
    j2 = te.reduce_axis((0, Skv), name="j")
    total = te.compute((B, Sq), lambda b, i: te.sum(weights[b, i, j2], axis=j2),
                       name="row_sum")
    j3 = te.reduce_axis((0, Skv), name="j")
    mixed = te.compute((B, Sq, Dv), lambda b, i, e: te.sum(
        weights[b, i, j3] * v[b, j3, e].astype(wide), axis=j3), name="mixed")
    return te.compute((B, Sq, Dv), lambda b, i, e: (mixed[b, i, e] / total[b, i]).astype(
        q.dtype), name="attention", tag=ATTENTION_TAG)


def schedule_attention(cfg, outs):
    """Schedule :func:`compute_attention` (see the module docstring): one block per query
    row, the row's scores and exponentials in shared memory."""
    what = "schedule_attention (cuda)"
    out = group_output(outs, what)
    s = te.create_schedule(out.op)
    stages = {op.name: op.output(0) for op in ops_of([out])}
    scores, weights = stages["scores"], stages["weights"]
    top, total, mixed = stages["row_max"], stages["row_sum"], stages["mixed"]
    s[stages["logits"]].compute_inline()  # scaled and masked where read
    keys = int(scores.shape[2])
    threads = _threads(keys)
    b, i, e = s[out].op.axis
    block = s[out].fuse(b, i)
    s[out].bind(block, te.thread_axis("blockIdx.x"))
    bound, turns = deal_to_threads(s[out], e, (threads,))
    s[out].reorder(block, *bound, turns)
    s[mixed].set_scope("local")
    s[mixed].compute_at(s[out], bound[0])
    dot = s.cache_write(scores, "local")  # each score summed in a register
    for row in (scores, weights):  # one key per thread in turn
        s[row].set_scope("shared")
        s[row].compute_at(s[out], block)
        *rows, jj = s[row].op.axis
        bound, turns = deal_to_threads(s[row], jj, (threads,))
        s[row].reorder(*rows, *bound, turns)
        if row is scores:
            s[dot].compute_at(s[row], turns)
    for stat in (top, total):
        if splits_across_threads(stat.op):
            schedule_cross_thread(s, stat, attach=(s[out], block), threads=threads)
        else:  # a short row: thread 0 reduces it
            s[stat].set_scope("shared")
            s[stat].compute_at(s[out], block)
            s[stat].bind(s[stat].op.axis[-1], te.thread_axis("threadIdx.x"))
    return s


register_implementation(Implementation(
    "attention", "cuda", compute_attention, schedule_attention))
register_without_implementation(
    "attention", "llvm", "the fused kernel is CUDA's; a CPU graph is never rewritten to it "
    "(fuse_attention runs for targets with an implementation) and keeps the products and "
    "the softmax, each a tuned kernel of its own")
