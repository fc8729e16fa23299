"""Matrix products for CPUs: ``matmul``, ``dense`` and ``batch_matmul``, each a compute,
a schedule of the compute with any elementwise epilogue, and a tunable template.

The schedule is the classic one for CPUs with wide vectors: the right-hand matrix is
packed into ``[ceil(M / bn), K, bn]`` so the ``bn`` output columns a micro-kernel
computes read one contiguous vector per k; the product is accumulated in a ``rows x bn``
local tile (``cache_write``) that LLVM keeps in vector registers; k is split and its
inner part unrolled; tiles are grouped into cache blocks (row tiles by column tiles, one
after the other), and the block loops over (rows, columns) are fused and run in parallel.
An epilogue (bias, activation, a residual read from another input) is computed at the
tile from the accumulators, in the output's loop nest.

A constant weight (an ONNX initializer) can be packed once: ``compute_dense`` also
accepts ``W`` already in the packed layout (:func:`pack_dense_weight` in numpy), and the
``dense_packed`` template tunes that variant.

Workload keys (what a graph produces):

- ``matmul(N, K, M, dtype)``: ``C[N, M] = A[N, K] @ B[K, M]``;
- ``dense(N, K, M, dtype, bias, activation)``: ``Y = X[N, K] @ W[M, K]^T (+ b[M])``,
  then ``activation`` in ``"none"``, ``"relu"``, ``"sigmoid"``, ``"tanh"``
  (ONNX Gemm with transB=1 / MatMul + Add + Relu);
- ``dense_packed(...)``: the same arguments, the weight input packed;
- ``batch_matmul(B, N, K, M, dtype)``: ``C[b] = A[b] @ B[b]``; with a sixth argument
  ``True``, ``C[b] = A[b] @ B[b]^T`` (B is ``[B, M, K]``).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import te
from ..autotune import get_config, template
from ..errors import ShapeError
from ..runtime import aligned
from . import cpu_tiling
from .group import crop, find_anchor, group_output, inline_epilogue
from .strategy import Implementation, register_implementation
from .utils import (
    batch_matmul_workload,
    check_out_dtype,
    dense_epilogue,
    dense_workload,
    matmul_workload,
)


#: The row count whose knobs and fallback a symbolic number of rows gets: every
#: candidate register tile and cache block fits it.
_NOMINAL_ROWS = 128

#: Tags of the packing stage of the right-hand matrix (scheduled apart from the product):
#: a copy of B[K, M] column blocks, or a transpose of W[M, K] row blocks.
PACK_TAG = "matmul_pack"
TRANSPOSE_PACK_TAG = "dense_pack"


def _ceil_div(a, b):
    return (a + b - 1) // b


def _ints(shape):
    return tuple(int(getattr(s, "value", s)) for s in shape)


def _rows(dim):
    """The row count of a product: an int, or the expression of a symbolic size (one
    build serves every batch size)."""
    value = getattr(dim, "value", dim)
    return int(value) if isinstance(value, int) else dim


def _pack(B, bn, k_axis_first=True, name="B.packed"):
    """B[..., K, M] (or W[..., M, K] when not ``k_axis_first``) as
    [..., ceil(M/bn), K, bn], zero-padded past M; leading dims are batch dims. M and the
    batch may be symbolic (a transposed key cache of any length)."""
    batch = tuple(_rows(d) for d in B.shape[:-2])
    K, M = (_rows(d) for d in (B.shape[-2:] if k_axis_first else B.shape[-2:][::-1]))

    def f(*idx):
        *b, x, k, z = idx
        j = x * bn + z
        if isinstance(M, int) and M % bn == 0:
            return B[(*b, k, j)] if k_axis_first else B[(*b, j, k)]
        jc = te.min(j, M - 1)
        value = B[(*b, k, jc)] if k_axis_first else B[(*b, jc, k)]
        return te.if_then_else(j < M, value, te.const(0, B.dtype))

    tag = PACK_TAG if k_axis_first else TRANSPOSE_PACK_TAG
    return te.compute((*batch, _ceil_div(M, bn), K, bn), f, name=name, tag=tag)


def pack_dense_weight(weight: np.ndarray, bn: int) -> np.ndarray:
    """A dense weight ``W[M, K]`` in the layout ``compute_dense`` reads it in,
    ``[ceil(M / bn), K, bn]`` (zero columns past M), as a contiguous numpy copy on a cache line.

    Examples
    --------
    >>> pack_dense_weight(np.ones((5, 3), "float32"), 4).shape
    (2, 3, 4)
    """
    M, K = weight.shape
    Mp = _ceil_div(M, bn) * bn
    padded = np.zeros((Mp, K), weight.dtype)
    padded[:M] = weight
    return aligned.ascontiguous(padded.reshape(Mp // bn, bn, K).transpose(0, 2, 1))


def pack_dense_weight_bf16(weight: np.ndarray, bn: int) -> np.ndarray:
    """A dense weight ``W[M, K]`` (K even; float32, rounded to bfloat16 to nearest even,
    or bfloat16) as the int32 ``[ceil(M / bn), K / 2, bn]`` a bfloat16 ``compute_dense``
    reads: ``[x, p, z]`` holds ``W[x*bn + z, 2p]`` (low half) and ``W[x*bn + z, 2p + 1]``
    (zero columns past M)."""
    halves = pack_dense_weight(np.asarray(weight).astype(ml_dtypes.bfloat16).view(np.uint16),
                               bn)
    blocks, K, _ = halves.shape
    pairs = halves.reshape(blocks, K // 2, 2, bn).transpose(0, 1, 3, 2)
    return aligned.ascontiguous(np.ascontiguousarray(pairs).view(np.int32)
                                .reshape(blocks, K // 2, bn))


def define_product_knobs(cfg, N, K, M):
    """Register the knobs of a product ``[N, K] x [K, M]`` (the computes call this, so
    a compute given a fresh fallback config defines them; a second call changes nothing).

    ``bn`` lanes of accumulators per row, ``tile_y`` (its last factor rows of the register
    tile, its middle factor row tiles per cache block), ``block_x`` (column tiles per cache
    block, run one after the other inside a parallel chunk), ``tile_k`` (inner k
    unrolling), ``order`` (which of rows and columns is outer) and ``unroll_rows``.

    Most of the space is slow (too few or too many accumulators for the registers,
    blocks that overflow the caches, too few parallel chunks for the cores): what a
    learned cost model is for."""
    # A symbolic size is tiled as a large one would be (its tail is guarded).
    rows, K, M = (d if isinstance(d, int) else _NOMINAL_ROWS for d in (N, K, M))
    # x86 (AVX, AVX-512) has the candidates the shipped logs were tuned over; a target
    # with 4 float lanes (NEON, SSE) gets the same range in units of its vectors.
    cfg.define_knob("bn", cpu_tiling.product_block_widths(cpu_tiling.current_caps()))
    cfg.define_split("tile_y", rows, num_outputs=3, policy="candidate",
                     candidate=[[-1, m, r] for m in (1, 2, 4, 8)
                                for r in (1, 2, 3, 4, 6, 8, 12, 16) if m * r <= rows])
    cfg.define_knob("block_x", [1, 2, 4, 8])
    cfg.define_split("tile_k", K, num_outputs=2, policy="candidate",
                     candidate=[[-1, r] for r in (1, 2, 4, 8, 16) if r <= K])
    cfg.define_knob("order", ["ij", "ji"])
    cfg.define_knob("unroll_rows", [True, False])
    if cfg.is_fallback:
        _product_fallback(cfg, rows, K, M)


def _product_fallback(cfg, N, K, M):
    """The register tile from the target's caps
    (:func:`tecomp.topi.cpu_tiling.product_register_tile`): a block of two vectors by as
    many rows as the accumulator target allows (8 with AVX-512, 6 with AVX2), or all of a
    few rows by a wider block when the packed weight stays in L2.

    Measured single-threaded on a Xeon (AVX-512), weight prepacked: 1x256x1024 took 15.7
    us with a 32-lane block, 11.6 us with 64 (numpy 16.8 us); 1x1024x256 23.3, 15.9 and
    11.4 us with 16, 32 and 64; a weight streamed from memory (1x2048x1000, 8 MB) ran the
    same with either width."""
    tile = cpu_tiling.product_register_tile(cpu_tiling.current_caps(), N, K, M)
    cfg.fallback_knob("bn", tile.block)
    if not tile.few_rows:
        # The tutorial's final schedule (01_optimize_matmul_cpu.py) in the target's
        # registers: k unrolled by 4; column blocks outermost so a packed block of B
        # stays in cache across the row tiles. Measured on Zen 5 (n=1024, 8 rows by 32
        # lanes): ~1.0-1.05x the tutorial's schedule, 1.9-2x numpy.
        cfg.fallback_split("tile_y", [-1, 1, tile.rows])
        cfg.fallback_split("tile_k", [-1, 4 if K >= 4 else 1])
    else:
        # A few rows (a classifier head at batch 1): the product streams the weight once.
        # All rows in one tile (each weight vector loaded once for all of them), column
        # blocks in parallel (many chunks for the cores, each reading its own contiguous
        # packed panel), k unrolled. Measured single-threaded with the weight prepacked
        # (Xeon, AVX-512): 1x2048x1000 at 0.9-1.0x numpy (bn=64 or k unrolled by 4 no
        # faster); 4x2048x1000 1.75x faster than one row per tile.
        cfg.fallback_split("tile_y", [-1, 1, N])
        cfg.fallback_split("tile_k", [-1, 8 if K >= 8 else 1])
    cfg.fallback_knob("block_x", 1)
    # Column blocks outside, also with a symbolic row count: the product runs over whole
    # row tiles and column blocks (see _tiled_product), and the simplifier proves a row
    # tile ``f % T`` and column block ``f // T`` of the parallel loop over ``32*T`` chunks
    # in range, so no multiply-add keeps a guard. A packed block of B then stays in cache
    # across the row tiles: a symbolic-row 1000x1000x1000 matmul took 6.6 ms so (numpy
    # 6.7), 10.5 ms with rows outside, which streams all of B once per row tile.
    cfg.fallback_knob("order", "ji")


# ---- computes -------------------------------------------------------------------------


def _tiled_product(cfg, shape, body, name: str, tag: str, pad_cols: bool = True):
    """``te.compute(shape, body)``: the ``[..., N, M]`` product of ``matmul``, ``dense`` or
    ``batch_matmul``, tagged ``tag``.

    A symbolic row count N, or a static one that ``tile_y``'s rows do not divide, is
    rounded up to whole register tiles, the rows past the end reading the last one, and a
    crop back to ``shape`` (tag :data:`CROP_TAG`) follows. The tile's accumulation then
    needs no guard per row: loop partitioning cannot cut the guard out of a loop with
    symbolic bounds, nor the last row tile out of the parallel loop it is fused into, and
    a guard in the reduction keeps the accumulators out of registers (128x256x256 with a
    symbolic 128 rows: 0.42 -> 0.19 ms on one thread, the time of a static 128;
    128x256x1024 in tiles of 6 rows on 2 AVX2 cores: 1.11 -> 0.42 ms). With
    ``pad_cols`` (the right-hand operand read through a zero-padded packed copy) the
    columns go up to whole blocks of ``bn`` as well: the row tile and the column block
    of the parallel loop are then a modulo and a quotient by the symbolic tile count,
    which loop partitioning cannot cut, so a guard on the last block's columns would stay
    in every multiply-add (a symbolic-row 1000x1000x1000 matmul: 10.7 ms with it, numpy
    6.9)."""
    *outer, rows, cols = shape
    tile, bn = cfg["tile_y"].size[-1], cfg["bn"].val
    # Symbolic columns read through a zero-padded copy are padded too: the guard on the
    # last block's columns would stay in every multiply-add (the reason above).
    pad_symbolic = pad_cols and not isinstance(cols, int)
    if isinstance(rows, int) and rows % tile == 0 and not pad_symbolic:
        return te.compute(shape, body, name=name, tag=tag)
    if pad_cols:
        cols = _ceil_div(cols, bn) * bn
    logical = tuple(shape)
    P = te.compute((*outer, _ceil_div(rows, tile) * tile, cols),
                   lambda *idx: body(*idx[:-2], te.min(idx[-2], rows - 1), idx[-1]),
                   name=name, tag=tag,
                   attrs={"flop_shape": logical} if all(isinstance(d, int) for d in logical)
                   else None)
    return crop(P, shape)


def compute_matmul(cfg, A, B):
    """``C[N, M] = A[N, K] @ B[K, M]``, reading B through a packed copy (tag ``"matmul"``).

    Parameters
    ----------
    cfg : config entity
        The schedule config; its ``bn`` is the packed block width.
    A, B : Tensor
        ``[N, K]`` and ``[K, M]``; N may be symbolic.

    Returns
    -------
    Tensor
        ``C``; pass it (or an elementwise epilogue computed from it) to
        :func:`schedule_matmul`.
    """
    N, K = _rows(A.shape[0]), _ints(A.shape[1:])[0]
    K2, M = _ints(B.shape)
    if K2 != K:
        raise ShapeError(f"matmul: A is [{N}, {K}] but B is [{K2}, {M}]; B needs {K} rows")
    define_product_knobs(cfg, N, K, M)
    bn = cfg["bn"].val
    PB = _pack(B, bn)
    k = te.reduce_axis((0, K), name="k")
    return _tiled_product(
        cfg, (N, M), lambda i, j: te.sum(A[i, k] * PB[j // bn, k, j % bn], axis=k), "C",
        "matmul")


def compute_dense(cfg, X, W, b=None, units=None, out_dtype=None):
    """``X[N, K] @ W[M, K]^T (+ b[M])`` (tag ``"dense"`` on the product).

    Parameters
    ----------
    cfg : config entity
        The schedule config; its ``bn`` is the packed block width.
    X : Tensor
        ``[N, K]``; N may be symbolic (a batch size bound at call time). bfloat16 X
        multiplies with a bfloat16 W in pairs of k, summed in float32 (``vdpbf16ps``).
    W : Tensor
        ``[M, K]`` (packed per call), or already packed ``[ceil(M/bn), K, bn]`` for the
        config's ``bn`` (see :func:`pack_dense_weight`), for bfloat16 X the int32
        ``[ceil(M/bn), K/2, bn]`` of :func:`pack_dense_weight_bf16`.
    b : Tensor, optional
        ``[M]``, added to every row (a separate elementwise stage, fused by the schedule).
    units : int, optional
        M; needed only when ``W`` is packed and there is no ``b``.
    out_dtype : str, optional
        float32 for bfloat16 X (the sums' dtype, which it is anyway).

    Returns
    -------
    Tensor
        ``[N, M]``; pass it (or an epilogue computed from it) to :func:`schedule_dense`.
    """
    N, K = _rows(X.shape[0]), _ints(X.shape[1:])[0]
    # bfloat16 X (K even) multiplies pairs of k: the packed weight holds int32 words of
    # two bfloat16 values, one te.dot2_bf16 per vector of columns and pair of k.
    pairs = X.dtype == "bfloat16"
    check_out_dtype("dense", X.dtype, out_dtype)
    if pairs and K % 2:
        raise ShapeError(f"dense: bfloat16 X is [{N}, {K}]; its products take pairs of k, "
                         "so K must be even")
    per_word = 2 if pairs else 1
    packed = len(W.shape) == 3
    if packed:
        M = units if units is not None else (None if b is None else _ints(b.shape)[0])
        if M is None:
            raise ShapeError("dense: a packed weight needs units=M (or a bias b[M])")
        blocks, K2, width = _ints(W.shape)
        K2 *= per_word
    else:
        M, K2 = _ints(W.shape)
    if K2 != K:
        raise ShapeError(f"dense: X is [{N}, {K}] but W has {K2} columns; need {K}")
    steps = K // per_word
    define_product_knobs(cfg, N, steps, M)
    bn = cfg["bn"].val
    if packed and (width, blocks) != (bn, _ceil_div(M, bn)):
        raise ShapeError(f"dense: the packed weight is {list(_ints(W.shape))}; this config "
                         f"reads [{_ceil_div(M, bn)}, {steps}, {bn}] (bn={bn})")
    if packed:
        PW = W
    elif pairs:
        PW = _pack(te.compute((M, steps), lambda j, p: te.bf16_pair(W[j, 2 * p], W[j, 2 * p + 1]),
                              name="W.pairs"),
                   bn, k_axis_first=False, name="W.packed")
    else:
        PW = _pack(W, bn, k_axis_first=False, name="W.packed")
    k = te.reduce_axis((0, steps), name="k")

    def product(i, j):
        if pairs:
            return te.dot2_bf16(te.bf16_pair(X[i, 2 * k], X[i, 2 * k + 1]),
                                PW[j // bn, k, j % bn])
        return X[i, k] * PW[j // bn, k, j % bn]

    P = _tiled_product(cfg, (N, M), lambda i, j: te.sum(product(i, j), axis=k), "P", "dense")
    if b is None:
        return P
    return te.compute((N, M), lambda i, j: P[i, j] + b[j], name="Y")


def compute_batch_matmul(cfg, A, B, transpose_b=False):
    """``C[b, N, M] = A[b, N, K] @ B[b, K, M]``, or ``A[b, N, K] @ B[b, M, K]^T`` with
    ``transpose_b`` (tag ``"batch_matmul"``); ``cfg`` is the operator's config
    (:func:`tecomp.topi.strategy.select_config`).

    Any of the sizes may be symbolic (attention with a dynamic batch and sequence length:
    ``scores[b*h, s, s] = Q[b*h, s, d] @ K^T[b*h, d, s]``). With static K and M, B is read
    through a packed copy; with a symbolic one it is read in place (rows of B are
    contiguous along the output columns a vector computes), since a copy whose blocks
    depend on a run-time size would cost as much as it saves. A transposed B (attention's
    keys, ``[b*h, s, d]``) is always read through the packed copy, as ``dense`` reads its
    weight: the copy is the transpose, made in registers 16 rows at a time, that a
    transpose kernel before the product would otherwise write and the product read back.
    """
    Bt, N, K = (_rows(d) for d in A.shape)
    Bt2, *rest = (_rows(d) for d in B.shape)
    K2, M = rest[::-1] if transpose_b else rest
    if any(isinstance(x, int) and isinstance(y, int) and x != y
           for x, y in ((Bt, Bt2), (K, K2))):
        shape_b = f"[{Bt2}, {M}, {K2}]" if transpose_b else f"[{Bt2}, {K2}, {M}]"
        raise ShapeError(f"batch_matmul: A is [{Bt}, {N}, {K}] but B is {shape_b}"
                         + (" (transposed)" if transpose_b else ""))
    if transpose_b and not isinstance(K, int):
        raise ShapeError(f"batch_matmul: a transposed B needs a static K (the packed "
                         f"copy's rows), got {K}")
    define_product_knobs(cfg, N, K, M)
    bn = cfg["bn"].val
    k = te.reduce_axis((0, K), name="k")
    if transpose_b or (isinstance(K, int) and isinstance(M, int)):
        PB = _pack(B, bn, k_axis_first=not transpose_b)
        return _tiled_product(
            cfg, (Bt, N, M),
            lambda b, i, j: te.sum(A[b, i, k] * PB[b, j // bn, k, j % bn], axis=k), "C",
            "batch_matmul")
    return _tiled_product(
        cfg, (Bt, N, M), lambda b, i, j: te.sum(A[b, i, k] * B[b, k, j], axis=k), "C",
        "batch_matmul", pad_cols=False)


# ---- schedules ------------------------------------------------------------------------


def _schedule_group(cfg, outs, tag):
    what = f"schedule_{tag}"
    out = group_output(outs, what)
    s = te.create_schedule(out.op)
    anchor = find_anchor(out, tag, what)
    # The output is tiled like the operator's result: the crop of a product computed over
    # whole tiles, or the product itself.
    local = inline_epilogue(s, out, anchor, what)
    *outer, i_axis, j_axis = s[out].op.axis
    _schedule_product(s, cfg, local, out, i_axis, j_axis, tuple(outer))
    for t in anchor.input_tensors:
        if getattr(t.op, "tag", "") in (PACK_TAG, TRANSPOSE_PACK_TAG):
            _schedule_pack(s, t)
    return s


def schedule_matmul(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_matmul` and any elementwise
    epilogue computed from it, fused into the product's output loop. ``cfg`` is the
    operator's config (:func:`tecomp.topi.strategy.select_config`)."""
    return _schedule_group(cfg, outs, "matmul")


def schedule_dense(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_dense` (with or without its
    bias) and any elementwise epilogue, fused into the product's output loop.

    Examples
    --------
    >>> Y = te.compute(P.shape, lambda i, j: te.max(compute_dense(cfg, X, W, b)[i, j], 0.0))
    >>> s = schedule_dense(cfg, [Y])
    """
    return _schedule_group(cfg, outs, "dense")


def schedule_batch_matmul(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_batch_matmul` and any
    elementwise epilogue (the batch is fused into the parallel loop). ``cfg`` is the
    operator's config (:func:`tecomp.topi.strategy.select_config`)."""
    return _schedule_group(cfg, outs, "batch_matmul")


def _schedule_product(s, cfg, CL, out, i_axis, j_axis, outer_axes=()):
    """Tile ``out`` over (i, j) in blocks of register tiles, accumulate in ``CL`` at the
    tile, vectorize the lanes; the blocks run in parallel."""
    bn = cfg["bn"].val
    _, rows_per_block, rows = cfg["tile_y"].size
    io, ii = s[out].split(i_axis, factor=rows)
    io, im = s[out].split(io, factor=rows_per_block)
    jo, ji = s[out].split(j_axis, factor=bn)
    jo, jm = s[out].split(jo, factor=cfg["block_x"].val)
    if cfg["order"].val == "ij":
        s[out].reorder(*outer_axes, io, jo, im, jm, ii, ji)
        fused, tile = s[out].fuse(*outer_axes, io, jo), jm
    else:
        s[out].reorder(*outer_axes, jo, io, jm, im, ii, ji)
        fused, tile = s[out].fuse(*outer_axes, jo, io), im
    s[out].parallel(fused)
    s[out].vectorize(ji)
    s[CL].compute_at(s[out], tile)
    axes = s[CL].op.axis
    ci, cj = axes[-2], axes[-1]
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=cfg["tile_k"].size[-1])
    s[CL].reorder(ko, ki, ci, cj)
    s[CL].vectorize(cj)
    if cfg["tile_k"].size[-1] > 1:
        s[CL].unroll(ki)
    if cfg["unroll_rows"].val:
        s[CL].unroll(ci)


def _schedule_pack(s, PB):
    x, k, z = s[PB].op.axis[-3:]
    if PB.op.tag == TRANSPOSE_PACK_TAG:
        # bn lanes from bn rows of W: with 16 k steps unrolled around the lanes, the code
        # generator emits the nest as contiguous row loads and in-register transposes
        # (gathers a row apart otherwise).
        ko, ki = s[PB].split(k, factor=16)
        s[PB].unroll(ki)
    s[PB].vectorize(z)
    s[PB].parallel(s[PB].fuse(*s[PB].op.axis[:-2]) if len(s[PB].op.axis) > 3 else x)


# ---- templates --------------------------------------------------------------------------

#: The dtype a product of two ``dtype`` operands sums in, where it is not ``dtype``.
_SUM_DTYPE = {"bfloat16": "float32"}


@template("matmul")
def matmul(N, K, M, dtype="float32"):
    """Tunable ``C[N, M] = A[N, K] @ B[K, M]``."""
    cfg = get_config()
    A = te.placeholder((N, K), dtype, name="A")
    B = te.placeholder((K, M), dtype, name="B")
    C = compute_matmul(cfg, A, B)
    return schedule_matmul(cfg, [C]), [A, B, C]


def _dense_template(N, K, M, dtype, bias, activation, packed):
    cfg = get_config()
    X = te.placeholder((N, K), dtype, name="X")
    if packed:
        # A bfloat16 weight is packed as words of two k (pack_dense_weight_bf16).
        steps, word = (K // 2, "int32") if dtype == "bfloat16" else (K, dtype)
        define_product_knobs(cfg, N, steps, M)
        bn = cfg["bn"].val
        W = te.placeholder((_ceil_div(M, bn), steps, bn), word, name="W")
    else:
        W = te.placeholder((M, K), dtype, name="W")
    P = compute_dense(cfg, X, W, units=M)
    args = [X, W]
    # Bias and activation as one epilogue stage: the compute (and so its hash, which
    # keys the shipped tuning records) is the one this template has always had.
    b = te.placeholder((M,), _SUM_DTYPE.get(dtype, dtype), name="b") if bias else None
    if bias:
        args.append(b)
    Y = dense_epilogue(P, b, activation)
    return schedule_dense(cfg, [Y]), args + [Y]


@template("dense")
def dense(N, K, M, dtype="float32", bias=True, activation="none"):
    """Tunable ``Y = act(X[N, K] @ W[M, K]^T + b[M])``, W packed on every call."""
    return _dense_template(N, K, M, dtype, bias, activation, packed=False)


@template("dense_packed")
def dense_packed(N, K, M, dtype="float32", bias=True, activation="none"):
    """Tunable ``dense`` whose weight input is already packed: ``W`` is
    ``[ceil(M/bn), K, bn]`` for the config's ``bn`` (read it off ``tensors[1].shape[2]``;
    pack with :func:`pack_dense_weight`), as a graph packs a constant weight once."""
    return _dense_template(N, K, M, dtype, bias, activation, packed=True)


@template("batch_matmul")
def batch_matmul(Bt, N, K, M, dtype="float32", transpose_b=False):
    """Tunable ``C[b, N, M] = A[b, N, K] @ B[b, K, M]`` (``B[b, M, K]^T`` with
    ``transpose_b``)."""
    cfg = get_config()
    A = te.placeholder((Bt, N, K), dtype, name="A")
    B = te.placeholder((Bt, M, K) if transpose_b else (Bt, K, M), dtype, name="B")
    C = compute_batch_matmul(cfg, A, B, transpose_b)
    return schedule_batch_matmul(cfg, [C]), [A, B, C]


# ---- strategies -------------------------------------------------------------------------


def _prepack_dense(cfg, weight, **attrs):
    """The weight in the config's packed layout, a bfloat16 one as words of two k (the
    operator's attributes, given to every prepack, do not change it)."""
    if weight.dtype == ml_dtypes.bfloat16:
        return (pack_dense_weight_bf16(weight, cfg["bn"].val),)
    return (pack_dense_weight(weight, cfg["bn"].val),)


def one_row_config(space, cfg):
    """The config of a product of one row that reads what ``cfg`` packs (its ``bn``):
    ``cfg``'s knobs with a register tile of that one row (``space``: the one-row
    product's knobs). With a symbolic row count the tile is that of many rows (8 by 2
    vectors on AVX-512), rows past the last computing the last one again: a one-row
    step took 2.6 times its own tile's time (dense 1x256x1024 to 1x1024x256 on a Zen
    4), while a smaller tile for all counts ran a prompt of 128 rows 5-17% slower. A
    knob whose value the one-row product has no candidate for (a k loop that is the
    rows' own symbol, one step long there) takes that product's first."""
    knobs = {}
    for name, knob in space.space_map.items():
        values = [e.to_json() for e in knob.entities]
        want = [-1, 1, 1] if name == "tile_y" else cfg[name].to_json()
        knobs[name] = want if want in values else values[0]
    return space.from_json(knobs)


register_implementation(Implementation(
    "matmul", "llvm", compute_matmul, schedule_matmul,
    template="matmul", workload=matmul_workload, one_row_config=one_row_config))
register_implementation(Implementation(
    "dense", "llvm", compute_dense, schedule_dense,
    template="dense_packed", workload=dense_workload,
    prepack=_prepack_dense, packed_inputs=(1,), one_row_config=one_row_config))
register_implementation(Implementation(
    "batch_matmul", "llvm", compute_batch_matmul, schedule_batch_matmul,
    template="batch_matmul", workload=batch_matmul_workload, one_row_config=one_row_config))
