"""Attention as one CUDA kernel: ``softmax(scale * Q K^T + mask) V`` tiled, with an
online softmax, and no score matrix in device memory (FlashAttention's scheme).

A block computes a tile of query rows (:func:`_plan`). It walks the keys a tile of
:data:`KEY_TILE` at a time; per key tile it copies the keys and values into shared
memory, computes the rows' scores for those keys (shared), each row's maximum, the
exponentials of the scores less that maximum (shared), their sum, and each thread's
part of the product of the exponentials with the values (registers). A thread then
folds the tile into its running ``(maximum, sum, output)`` triple per output element,
rescaling the older part by ``exp(m_old - m_new)`` (the *online softmax*, a reduction
over the key tiles with its own combiner, :data:`ONLINE_SOFTMAX`), and divides by the
sum at the end. Only one key tile's scores ever exist, so any number of keys fits, and
the sequence lengths may be symbolic.

A few query rows over many keys (a decoding step) would give each row's block all the
keys and leave most of the GPU idle. Then the keys are split into parts
(:func:`key_parts`, as flash-decoding does): a first kernel runs a block per row tile and
part, folding that part's key tiles into a partial triple, and a second folds the parts'
triples by the same online softmax and divides.

The keys may be given as ``[B, Skv, D]`` or already transposed, ``[B, D, Skv]``; the
mask is added to the scaled scores, broadcast to ``[B, Sq, Skv]``.
"""

from __future__ import annotations

from ... import te
from ...errors import ShapeError
from ...te.analysis import ops_of
from ..cpu_schedule import const_int
from ..group import group_output
from ..strategy import Implementation, register_implementation, register_without_implementation
from .common import BLOCKS_TO_FILL, cooperative_load, deal_to_threads

ATTENTION_TAG = "attention"

#: Keys per tile: a warp's width, so one row of a tile's scores is one warp's work.
KEY_TILE = 32

#: Threads per block.
THREADS = 128

#: Threads along the value columns at most; each takes ``Dv / that`` adjacent columns.
_COLUMN_THREADS = 16

#: Parts the keys are split into at most, and the key tiles a part takes at least.
MAX_KEY_PARTS = 16
MIN_TILES_PER_PART = 4

#: The batch size (batch x heads) a symbolic one is taken to be when choosing the parts.
_NOMINAL_BATCH = 16


def _online_combine(old, new):
    """Fold ``new = (tile maximum, tile sum, tile output)`` into ``old``, both rescaled
    to the larger maximum. A tile's maximum starts from the lowest float32, not -inf, so
    it is finite even where every score is masked to -inf (those exponentials are then
    0), and the running maximum is finite from the first tile on: ``exp(-inf - -inf)``
    never arises."""
    m_old, l_old, o_old = old
    m_new, l_new, o_new = new
    m = te.max(m_old, m_new)
    keep, take = te.exp(m_old - m), te.exp(m_new - m)
    return m, l_old * keep + l_new * take, o_old * keep + o_new * take


#: The online softmax as a reducer over key tiles: (running maximum, running sum of
#: exponentials, running sum of values weighted by them), from (-inf, 0, 0).
ONLINE_SOFTMAX = te.comm_reducer(
    _online_combine, lambda dm, dl, do: (-float("inf"), 0.0, 0.0), name="online_softmax")


def _plan(rows, columns: int) -> tuple:
    """(query rows per block, rows per thread, threads along the value columns) for
    ``rows`` query rows (an int, or symbolic) and ``columns`` value columns. Each thread
    holds a small tile of the output, adjacent columns, so its registers stay few and its
    part of every stage is a constant range; the thread counts are powers of two, so a
    block's rows times a key tile deal out evenly to its :data:`THREADS` threads (a tail
    of columns is guarded)."""
    column_threads = 2
    while column_threads < min(columns, _COLUMN_THREADS):
        column_threads *= 2
    row_threads = THREADS // column_threads
    per_row = 2
    if isinstance(rows, int) and rows <= row_threads:
        per_row = 1  # a decoder's few rows: one each, the other threads only copy
    return row_threads * per_row, per_row, column_threads


def key_parts(B, Sq, Skv, Dv) -> int:
    """How many parts the keys are split into, each a block of its own: 1 where the
    query rows' tiles give :data:`~tecomp.topi.cuda.common.BLOCKS_TO_FILL` blocks or
    more, or where a row tile is more than one block's rows; else enough parts to fill the
    GPU, at most :data:`MAX_KEY_PARTS`, each at least :data:`MIN_TILES_PER_PART` key tiles
    where the keys are a constant number (a symbolic batch counts as
    :data:`_NOMINAL_BATCH`)."""
    rows = _plan(const_int(Sq) or Sq, Dv)[0]
    sq = const_int(Sq)
    if sq is None or sq > rows:
        return 1
    blocks = const_int(B) or _NOMINAL_BATCH
    parts = min(MAX_KEY_PARTS, -(-BLOCKS_TO_FILL // blocks))
    skv = const_int(Skv)
    if skv is not None:
        parts = min(parts, -(-skv // (KEY_TILE * MIN_TILES_PER_PART)))
    return max(parts, 1)


def compute_attention(cfg, q, k, v, mask=None, scale=1.0, k_transposed=False,
                      mask_heads=1, zero_empty_rows=False):
    """``softmax(scale * q @ k^T + mask, axis=-1) @ v`` for ``q[B, Sq, D]``, ``k[B, Skv,
    D]`` (``[B, D, Skv]`` with ``k_transposed``), ``v[B, Skv, Dv]`` and a ``mask``
    broadcast to ``[B, Sq, Skv]``, or with ``mask_heads = H`` a ``[B / H, Sq, Skv]`` one
    read at batch ``b // H`` (heads sharing their sequence's mask); tag ``"attention"``
    on the output. A row whose every score is masked to -inf is NaN, as the softmax
    makes it, or with ``zero_empty_rows`` zeros (``where(isnan(p), 0, p)`` over the
    probabilities, as torch's exporter writes a masked attention). The keys are taken
    in tiles of :data:`KEY_TILE` keys folded by :data:`ONLINE_SOFTMAX`. The sequence
    lengths may be symbolic; the head sizes are constants."""
    B, Sq, D = q.shape
    Skv = k.shape[2] if k_transposed else k.shape[1]
    Dv = v.shape[2]
    if const_int(D) is None or const_int(Dv) is None:
        raise ShapeError(f"attention (cuda): needs constant head sizes; got q {q.shape}, "
                         f"k {k.shape}, v {v.shape}")
    wide = "float32"
    T = KEY_TILE
    tiles = (Skv + (T - 1)) // T
    d = te.reduce_axis((0, D), name="d")

    def key(b, j, dd):
        return k[b, dd, j] if k_transposed else k[b, j, dd]

    dot = te.compute((B, Sq, Skv), lambda b, i, j: te.sum(
        q[b, i, d].astype(wide) * key(b, j, d).astype(wide), axis=d), name="scores")

    def scaled(b, i, j):
        value = dot[b, i, j] * te.const(scale, wide)
        if mask is None:
            return value
        batch = b // mask_heads if mask_heads != 1 else b
        index = [batch, i, j][3 - len(mask.shape):]  # broadcast from the last axis
        index = [0 if const_int(n) == 1 else ix for ix, n in zip(index, mask.shape)]
        return value + mask[tuple(index)].astype(wide)

    logits = te.compute((B, Sq, Skv), scaled, name="logits")

    def over_tile(name):
        jj = te.reduce_axis((0, T), name=name)
        return jj, lambda t: t * T + jj < Skv  # the last tile may be partial

    jj, valid = over_tile("jj")
    top = te.compute((B, Sq, tiles), lambda b, i, t: te.max(
        logits[b, i, t * T + jj], axis=jj, where=valid(t), init=te.min_value(wide)),
        name="tile_max")
    weights = te.compute((B, Sq, Skv), lambda b, i, j: te.exp(
        logits[b, i, j] - top[b, i, j // T]), name="weights")
    jj, valid = over_tile("jj")
    total = te.compute((B, Sq, tiles), lambda b, i, t: te.sum(
        weights[b, i, t * T + jj], axis=jj, where=valid(t)), name="tile_sum")
    jj, valid = over_tile("jj")
    mixed = te.compute((B, Sq, tiles, Dv), lambda b, i, t, e: te.sum(
        weights[b, i, t * T + jj] * v[b, t * T + jj, e].astype(wide), axis=jj,
        where=valid(t)), name="tile_out")
    parts = key_parts(B, Sq, Skv, int(Dv))
    if parts == 1:
        t = te.reduce_axis((0, tiles), name="t")
        _, running_sum, running_out = te.compute((B, Sq, Dv), lambda b, i, e: ONLINE_SOFTMAX(
            (top[b, i, t], total[b, i, t], mixed[b, i, t, e]), axis=t), name="online")
    else:
        # Part c folds tiles [c * per_part, (c + 1) * per_part); a part past the last
        # tile stays (-inf, 0, 0), which the second fold takes as nothing.
        per_part = (tiles + (parts - 1)) // parts
        t = te.reduce_axis((0, per_part), name="t")
        partial = te.compute((B, Sq, parts, Dv), lambda b, i, c, e: ONLINE_SOFTMAX(
            (top[b, i, c * per_part + t], total[b, i, c * per_part + t],
             mixed[b, i, c * per_part + t, e]), axis=t, where=c * per_part + t < tiles),
            name="online_part")
        c = te.reduce_axis((0, parts), name="c")
        _, running_sum, running_out = te.compute((B, Sq, Dv), lambda b, i, e: ONLINE_SOFTMAX(
            tuple(x[b, i, c, e] for x in partial), axis=c), name="online")

    def normalized(b, i, e):
        value = running_out[b, i, e] / running_sum[b, i, e]
        if zero_empty_rows:  # no allowed key: every exponential, so the sum, is 0
            value = te.if_then_else(running_sum[b, i, e] > te.const(0.0, wide), value,
                                    te.const(0.0, wide))
        return value.astype(q.dtype)

    return te.compute((B, Sq, Dv), normalized, name="attention", tag=ATTENTION_TAG)


def _rows_and_columns(stage, rows: int, per_row: int, column_threads: int):
    """Lay ``stage`` (axes: batch, query row, [key part,] value column) out as a block
    per tile of ``rows`` query rows (and part) and a thread per ``per_row`` rows times
    ``1 / column_threads`` of the columns. Returns (block loop, thread loop)."""
    b, i, *part, e = stage.op.axis
    tile, i = stage.split(i, factor=rows)
    if part:
        stage.reorder(b, tile, *part, i)
    block = stage.fuse(b, tile, *part)
    stage.bind(block, te.thread_axis("blockIdx.x"))
    i, ii = stage.split(i, factor=per_row)
    e, ee = stage.split(e, nparts=column_threads)
    stage.reorder(block, i, e, ii, ee)
    thread = stage.fuse(i, e)
    stage.bind(thread, te.thread_axis("threadIdx.x"))
    return block, thread


def schedule_attention(cfg, outs):
    """Schedule :func:`compute_attention` (see the module docstring): a block per tile of
    query rows (and part of the keys), the key tiles in turn, each thread's output
    elements in registers; with the keys in parts, a second kernel folds the parts, a
    thread per output element."""
    what = "schedule_attention (cuda)"
    out = group_output(outs, what)
    s = te.create_schedule(out.op)
    stages = {op.name: op for op in ops_of([out])}
    scores, weights = stages["scores"].output(0), stages["weights"].output(0)
    top, total = stages["tile_max"].output(0), stages["tile_sum"].output(0)
    mixed, online = stages["tile_out"].output(0), stages["online"]
    q, k = scores.op.input_tensors[:2]
    v = next(x for x in mixed.op.input_tensors if x is not weights)
    s[stages["logits"]].compute_inline()  # scaled and masked where read
    B, Sq, Dv = out.shape
    rows, per_row, column_threads = _plan(const_int(Sq) or Sq, int(Dv))
    threads = (THREADS,)

    s[online].set_scope("local")
    partial = stages.get("online_part")
    if partial is None:
        # The output: a block per tile of rows, the running triple of each thread's
        # elements in registers, folded over the key tiles (the loop outermost, so each
        # tile's stages are computed once for all of the thread's elements).
        block, thread = _rows_and_columns(s[out], rows, per_row, column_threads)
        folding = online
        s[online].compute_at(s[out], thread)
        step = s[online].op.reduce_axis[0]
        s[online].reorder(step, *s[online].op.axis)
    else:
        # The parts' triples in device memory, a block per tile of rows and part; the
        # output a thread per element, folding the parts in registers.
        element = s[out].fuse(*s[out].op.axis)
        bx, tx = s[out].split(element, factor=THREADS)
        s[out].bind(bx, te.thread_axis("blockIdx.x"))
        s[out].bind(tx, te.thread_axis("threadIdx.x"))
        s[online].compute_at(s[out], tx)
        block, thread = _rows_and_columns(s[partial], rows, per_row, column_threads)
        folding = partial
        step = s[partial].op.reduce_axis[0]
        inner = [x for x in s[partial].leaf_iter_vars if x not in (block, thread, step)]
        s[partial].reorder(block, thread, step, *inner)
    s[mixed].set_scope("local")
    s[mixed].compute_at(s[folding], step)
    jj = s[mixed].op.reduce_axis[0]
    s[mixed].reorder(jj, *s[mixed].op.axis)  # an outer product per key

    # Per key tile, in shared memory: the keys and values, the scores, the weights.
    q_tile = s.cache_read(q, "shared", [scores])
    k_tile = s.cache_read(k, "shared", [scores])
    v_tile = s.cache_read(v, "shared", [mixed])
    s[q_tile].compute_at(s[out] if partial is None else s[partial], block)
    for copy in (k_tile, v_tile):
        s[copy].compute_at(s[folding], step)
    for copy in (q_tile, k_tile, v_tile):
        cooperative_load(s, copy, threads, 1)
    s[k_tile].storage_align(s[k_tile].op.axis[1], 32, 1)  # a warp reads down a column
    dot = s.cache_write(scores, "local")  # each score summed in a register
    for stage in (scores, weights):
        s[stage].set_scope("shared")
        s[stage].compute_at(s[folding], step)
        _, row, key = s[stage].op.axis
        s[stage].storage_align(row, 32, 1)  # a thread per row reads down the columns
        bound, turns = deal_to_threads(s[stage], s[stage].fuse(row, key), threads)
        s[stage].reorder(*bound, turns)
        if stage is scores:
            s[dot].compute_at(s[stage], turns)
    for stat in (top, total):  # a thread per row (at most THREADS rows: see _plan)
        s[stat].set_scope("shared")
        s[stat].compute_at(s[folding], step)
        s[stat].bind(s[stat].op.axis[1], te.thread_axis("threadIdx.x"))
    return s


register_implementation(Implementation(
    "attention", "cuda", compute_attention, schedule_attention))
register_without_implementation(
    "attention", "llvm", "the fused kernel is CUDA's; a CPU graph is never rewritten to it "
    "(fuse_attention runs for targets with an implementation) and keeps the products and "
    "the softmax, each a tuned kernel of its own")
