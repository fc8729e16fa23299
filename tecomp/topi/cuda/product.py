"""Matrix products for NVIDIA GPUs: ``matmul``, ``dense`` and ``batch_matmul``, each a
compute, a schedule of the compute with any elementwise epilogue, and a tunable template
(``matmul.cuda``, ``dense.cuda``, ``batch_matmul.cuda``).

The schedule is the classic shared-memory tiling of TVM's CUDA matmul: a block computes
a tile of the output (``tile_y`` x ``tile_x``: block, virtual threads, threads, registers
per thread); the threads accumulate in registers (``cache_write`` "local"), each also
running ``vthread`` interleaved sub-tiles, so a warp's accesses stay contiguous while
every thread holds several accumulators; per step of k (``tile_k``) the block loads the
tiles of both operands into shared memory cooperatively (``vec``-wide vector loads, the
copy spread over all threads of the block, optionally double-buffered so the load of the
next step overlaps the compute of this one), and each thread copies the values it needs
into registers. An epilogue (bias, activation, residual) is computed from the
accumulators in the output's loop nest.

Unlike the CPU computes, the operands are read in their own layout: the coalesced
shared-memory copy replaces the packing pass.
"""

from __future__ import annotations

from ... import te
from ...autotune import get_config, template
from ...errors import ShapeError
from ..cpu_schedule import const_int
from ..group import (
    CROP_TAG,
    epilogue_ops,
    find_anchor,
    group_output,
    inline_epilogue,
    inline_into_output,
)
from ..strategy import Implementation, register_implementation
from ..utils import batch_matmul_workload, dense_epilogue, dense_workload, matmul_workload
from ...ir.stmt import FRAGMENT
from . import tensor_core
from .common import (
    BLOCKS_TO_FILL,
    bind_block,
    compute_as_filled,
    cooperative_load,
    define_tile,
)
from .reduction import block_per_element, schedule_cross_thread, splits_across_threads


#: The extent whose knobs a symbolic size (rows, columns or k) is tiled for (its tail is
#: guarded).
_NOMINAL_SIZE = 128


def _size(dim):
    """A dimension as an int, or the symbolic expression it is."""
    value = getattr(dim, "value", dim)
    return int(value) if isinstance(value, int) else dim


def _differ(a, b) -> bool:
    """Whether two sizes are known to differ (symbolic ones are the graph's to match)."""
    return isinstance(a, int) and isinstance(b, int) and a != b


def _nominal(n):
    return n if isinstance(n, int) else _NOMINAL_SIZE


#: Fallback block tiles, largest first: (rows, columns) splits as (blocks, virtual
#: threads, threads, per thread). 128 x 128 is the classic SGEMM tile (256 threads of 8 x 8
#: accumulators); the smaller ones keep a product with few output tiles spread over the
#: GPU instead of leaving most multiprocessors idle.
_FALLBACK_TILES = (
    ([-1, 2, 16, 4], [-1, 2, 16, 4]),   # 128 x 128
    ([-1, 2, 8, 4], [-1, 2, 8, 4]),     # 64 x 64
    ([-1, 2, 8, 2], [-1, 2, 8, 2]),     # 32 x 32
    ([-1, 1, 8, 2], [-1, 2, 8, 2]),     # 16 x 32
)


def _fallback_tiles(N, M, batch) -> tuple:
    """The largest of :data:`_FALLBACK_TILES` whose blocks over ``batch`` products of
    ``N`` x ``M`` outputs fill the GPU (the smallest where none does)."""
    for rows, cols in _FALLBACK_TILES:
        per_row = rows[1] * rows[2] * rows[3]
        per_col = cols[1] * cols[2] * cols[3]
        if batch * -(-N // per_row) * -(-M // per_col) >= BLOCKS_TO_FILL:
            return rows, cols
    return _FALLBACK_TILES[-1]


def _on_tensor_cores(dtype, N, K, M, tf32) -> bool:
    """Whether the product runs on tensor cores (:func:`tensor_core.applies`): a
    symbolic row count is padded to whole blocks (:func:`_padded_rows`), so the columns
    and the depth decide."""
    return tensor_core.applies(dtype, _nominal(N), K, M, tf32=tf32)


def _padded_rows(cfg, A, axis: int):
    """``(A, None)``, or for a product on tensor cores whose row count (``A``'s ``axis``)
    is symbolic, ``A`` with its rows padded with zeros to whole blocks of the config's
    row tile and the real row count: the product is then computed over whole blocks
    (the fragments need whole 16 x 16 tiles) and cropped."""
    rows = _size(A.shape[axis])
    if isinstance(rows, int) or "tc_m" not in cfg:
        return A, None
    block = cfg["tc_m"].size[1] * cfg["tc_m"].size[2] * FRAGMENT
    shape = list(A.shape)
    shape[axis] = (rows + (block - 1)) // block * block
    zero = te.const(0, A.dtype)
    padded = te.compute(tuple(shape), lambda *i: te.if_then_else(i[axis] < rows, A[i], zero),
                        name=f"{A.op.name}_rows")
    return padded, rows


#: The least depth whose products may be split along k (``split_k``).
_SPLIT_K_MIN_DEPTH = 512


def define_product_knobs(cfg, N, K, M, batch=1, dtype="float32", tf32=False):
    """Register the knobs of ``batch`` products ``[N, K] x [K, M]`` (a second call
    changes nothing). Where the product runs on tensor cores
    (:func:`tensor_core.applies`; float32 ones with ``tf32``), those are
    :func:`tensor_core.define_knobs`; otherwise:

    ``tile_y`` / ``tile_x``: rows / columns as (blocks, virtual threads, threads, per
    thread); ``tile_k``: k as (steps, per step: the depth of the shared tiles); ``vec``:
    lanes of the shared-memory loads; ``unroll_k``: unroll the inner k loop;
    ``double_buffer``: double the shared tiles (``Stage.double_buffer``); ``split_k``:
    compute k in that many parts, summed by a second kernel (:func:`_split_k`; depths of
    at least :data:`_SPLIT_K_MIN_DEPTH`). The fallback
    block tile is the largest of :data:`_FALLBACK_TILES` that still gives
    :data:`~tecomp.topi.cuda.common.BLOCKS_TO_FILL` blocks (the nearest the shape's
    divisors allow), k in steps of 16 for the largest tile and 8 for the others, single
    shared tiles. A symbolic size is tiled as if it were ``_NOMINAL_SIZE``, its tail
    guarded, and read one element per load.
    """
    if _on_tensor_cores(dtype, N, K, M, tf32):
        tensor_core.define_knobs(cfg, _nominal(N), K, M, _nominal(batch), dtype)
        return
    define_tile(cfg, "tile_y", _nominal(N))
    define_tile(cfg, "tile_x", _nominal(M))
    cfg.define_split("tile_k", _nominal(K), num_outputs=2, filter=lambda e: e.size[-1] <= 32)
    cfg.define_knob("vec", [1, 2, 4])
    cfg.define_knob("unroll_k", [True, False])
    cfg.define_knob("double_buffer", [False, True])
    cfg.define_knob("split_k", [1, 2, 4, 8] if _nominal(K) >= _SPLIT_K_MIN_DEPTH else [1])
    if cfg.is_fallback:
        rows, cols = _fallback_tiles(_nominal(N), _nominal(M), _nominal(batch))
        cfg.fallback_split("tile_y", rows)
        cfg.fallback_split("tile_x", cols)
        # The 128 x 128 tile reads k 16 deep per step (28.9 against 22.8 TFLOPS for
        # 8 at 4096^3 on an H100); the smaller ones 8.
        cfg.fallback_split("tile_k", [-1, 16 if rows is _FALLBACK_TILES[0][0] else 8])
        aligned = all(isinstance(n, int) and n % 4 == 0 for n in (K, M))
        cfg.fallback_knob("vec", 4 if aligned else 1)
        cfg.fallback_knob("unroll_k", True)
        cfg.fallback_knob("double_buffer", False)
        cfg.fallback_knob("split_k", 1)


# ---- computes -------------------------------------------------------------------------


def _product(shape, dtype, term, reduce_axis, name, tag, transposed_b=False, tf32=False,
             rows=None):
    """The product ``sum(term(*index, cast))`` over ``reduce_axis``, tagged ``tag`` (its
    attributes: ``transposed_b``, the second operand is read ``[..., j, k]``; ``tf32``,
    float32 operands may be multiplied as TF32 on tensor cores): float16 and bfloat16
    operands are multiplied and summed in float32 (as the tensor cores and cuBLAS do),
    the result rounded back by an epilogue stage. With ``rows``, ``shape``'s rows are
    padded ones (:func:`_padded_rows`), cropped to ``rows`` by that stage (tag
    :data:`~tecomp.topi.group.CROP_TAG`)."""
    attrs = {"transposed_b": transposed_b, "tf32": tf32}
    narrow = dtype in ("float16", "bfloat16")
    cast = (lambda x: x.astype("float32")) if narrow else (lambda x: x)
    wide = te.compute(shape, lambda *i: te.sum(term(*i, cast), axis=reduce_axis),
                      name=name, tag=tag, attrs=attrs)
    if rows is None and not narrow:
        return wide
    out_shape = shape if rows is None else (*shape[:-2], rows, shape[-1])
    return te.compute(out_shape,
                      lambda *i: wide(*i).astype(dtype) if narrow else wide(*i),
                      name=f"{name}_narrow" if narrow else f"{name}.crop",
                      tag=CROP_TAG if rows is not None else "")



def compute_matmul(cfg, A, B, tf32=False):
    """``C[N, M] = A[N, K] @ B[K, M]`` (tag ``"matmul"``); any size may be symbolic. With
    ``tf32``, float32 operands are multiplied as TF32 on tensor cores (sizes allowing)."""
    N, K = (_size(d) for d in A.shape)
    K2, M = (_size(d) for d in B.shape)
    if _differ(K2, K):
        raise ShapeError(f"matmul: A is [{N}, {K}] but B is [{K2}, {M}]; B needs {K} rows")
    define_product_knobs(cfg, N, K, M, dtype=A.dtype, tf32=tf32)
    A, rows = _padded_rows(cfg, A, 0)
    k = te.reduce_axis((0, K), name="k")
    return _product((A.shape[0], M), A.dtype, lambda i, j, c: c(A[i, k]) * c(B[k, j]), k,
                    "C", "matmul", tf32=tf32, rows=rows)


def compute_dense(cfg, X, W, b=None, units=None, tf32=False):
    """``X[N, K] @ W[M, K]^T (+ b[M])`` (tag ``"dense"`` on the product); any size may
    be symbolic. The bias is a separate elementwise stage the schedule fuses. ``units``
    (the graph's output count, which the CPU compute needs for its packed weight) must
    be W's rows: W is read in its own layout here. ``tf32``: as for
    :func:`compute_matmul`."""
    N, K = (_size(d) for d in X.shape)
    M, K2 = (_size(d) for d in W.shape)
    if _differ(K2, K):
        raise ShapeError(f"dense: X is [{N}, {K}] but W has {K2} columns; need {K}")
    if units is not None and _differ(_size(units), M):
        raise ShapeError(f"dense: units={units} but W [{M}, {K}] has {M} rows")
    define_product_knobs(cfg, N, K, M, dtype=X.dtype, tf32=tf32)
    X, rows = _padded_rows(cfg, X, 0)
    k = te.reduce_axis((0, K), name="k")
    P = _product((X.shape[0], M), X.dtype, lambda i, j, c: c(X[i, k]) * c(W[j, k]), k, "P",
                 "dense", transposed_b=True, tf32=tf32, rows=rows)
    if b is None:
        return P
    return te.compute((N, M), lambda i, j: P[i, j] + b[j], name="Y")


def compute_batch_matmul(cfg, A, B, transpose_b=False, tf32=False):
    """``C[b, N, M] = A[b, N, K] @ B[b, K, M]``, or ``@ B[b, M, K]^T`` with
    ``transpose_b`` (tag ``"batch_matmul"``); ``tf32`` as for :func:`compute_matmul`."""
    Bt, N, K = (_size(d) for d in A.shape)
    Bt2, *rest = (_size(d) for d in B.shape)
    K2, M = rest[::-1] if transpose_b else rest
    if _differ(Bt2, Bt) or _differ(K2, K):
        raise ShapeError(f"batch_matmul: A is [{Bt}, {N}, {K}] but B is "
                         f"[{Bt2}, {', '.join(map(str, rest))}]"
                         + (" (transposed)" if transpose_b else ""))
    define_product_knobs(cfg, N, K, M, Bt, A.dtype, tf32)
    A, rows = _padded_rows(cfg, A, 1)
    k = te.reduce_axis((0, K), name="k")

    def b_at(b, k, j):
        return B[b, j, k] if transpose_b else B[b, k, j]

    return _product((Bt, A.shape[1], M), A.dtype,
                    lambda b, i, j, c: c(A[b, i, k]) * c(b_at(b, k, j)),
                    k, "C", "batch_matmul", transpose_b, tf32, rows)


# ---- schedules ------------------------------------------------------------------------


#: A dense product with at most this many rows (a classifier at batch 1, a decoder's
#: step) is computed as matrix-vector products when untuned (:func:`_matrix_vector`).
_FEW_ROWS = 4


def _is_matrix_vector(cfg, anchor, tag) -> bool:
    rows = const_int(anchor.output(0).shape[0])
    return (tag == "dense" and cfg.is_fallback and rows is not None and rows <= _FEW_ROWS
            and splits_across_threads(anchor))


def _matrix_vector(s, out, anchor, what):
    """A block per output element whose threads split k, reading the weight's row
    coalesced, the partials combined in shared memory (``schedule_cross_thread``); the
    epilogue is computed from the sum by the block. The tiled schedule would give a
    one-row product a few dozen blocks, each thread walking all of k alone."""
    inline_into_output(s, epilogue_ops(out, anchor, what), out)
    attach = None if anchor is out.op else (s[out], block_per_element(s[out]))
    schedule_cross_thread(s, anchor.output(0), attach)
    return s


def _schedule_product(cfg, outs, tag):
    what = f"schedule_{tag} (cuda)"
    out = group_output(outs, what)
    s = te.create_schedule(out.op)
    anchor = find_anchor(out, tag, what)
    if _is_matrix_vector(cfg, anchor, tag):
        return _matrix_vector(s, out, anchor, what)
    operands = list(anchor.input_tensors)
    *_, N, M = (_size(d) for d in anchor.output(0).shape)
    K = _size(anchor.reduce_axis[0].dom.extent)
    if _on_tensor_cores(operands[0].dtype, N, K, M, anchor.attrs.get("tf32", False)):
        tensor_core.schedule_product(cfg, s, out, anchor, operands,
                                     anchor.attrs.get("transposed_b", False))
        return s
    if cfg["split_k"].val > 1:
        _split_k(cfg, s, out, anchor, what)
    else:
        _tile_product(cfg, s, out, anchor, what)
    return s


def _split_k(cfg, s, out, anchor, what) -> None:
    """The product's k in ``split_k`` parts: one kernel computes each part's partial sums
    as its own tiled product (the parts a grid dimension, as the batch is), a second sums
    the parts of each output element, one thread each, with the epilogue. A product with
    few output tiles and a long k (a transformer's down-projection: 128 x 768 outputs over
    k = 3072) otherwise runs few blocks, each walking all of k."""
    inline_into_output(s, epilogue_ops(out, anchor, what), out)
    product = anchor.output(0)
    stage = s[product]
    part, _ = stage.split(stage.op.reduce_axis[0], nparts=cfg["split_k"].val)
    partial = s.rfactor(product, part)
    _tile_product(cfg, s, partial, partial.op, what)
    fused = s[out].fuse(*s[out].op.axis)
    block, thread = s[out].split(fused, factor=_SUM_THREADS)
    s[out].bind(block, te.thread_axis("blockIdx.x"))
    s[out].bind(thread, te.thread_axis("threadIdx.x"))
    if product.op is not out.op:
        s[product].compute_at(s[out], thread)


#: Threads per block of the kernel summing a split product's parts.
_SUM_THREADS = 256


def _tile_product(cfg, s, out, anchor, what) -> None:
    """The tiled product ``anchor`` and its epilogue ending in ``out`` (module
    docstring); axes before the last two (a batch, a split product's parts) are the
    grid's z dimension."""
    operands = list(anchor.input_tensors)
    CL = inline_epilogue(s, out, anchor, what)
    shared = [s.cache_read(t, "shared", [CL]) for t in operands]
    compute_as_filled(s, operands)
    local = [s.cache_read(t, "local", [CL]) for t in shared]

    *outer, i, j = s[out].op.axis
    by, vy, ty, yi = cfg["tile_y"].apply(s, out, i)
    bx, vx, tx, xi = cfg["tile_x"].apply(s, out, j)
    s[out].reorder(*outer, by, bx, vy, vx, ty, tx, yi, xi)
    bind_block(s[out], [s[out].fuse(*outer)] if outer else [], by, bx)
    s[out].bind(vy, te.thread_axis("vthread"))
    s[out].bind(vx, te.thread_axis("vthread"))
    s[out].bind(ty, te.thread_axis("threadIdx.y"))
    s[out].bind(tx, te.thread_axis("threadIdx.x"))

    s[CL].compute_at(s[out], tx)
    *_, ci, cj = s[CL].op.axis
    ko, ki = cfg["tile_k"].apply(s, CL, s[CL].op.reduce_axis[0])
    s[CL].reorder(ko, ki, ci, cj)
    if cfg["unroll_k"].val:
        s[CL].unroll(ki)
    threads = (cfg["tile_y"].size[2], cfg["tile_x"].size[2])
    for sh, lo in zip(shared, local):
        s[sh].compute_at(s[CL], ko)
        s[lo].compute_at(s[CL], ki)
        cooperative_load(s, sh, threads, cfg["vec"].val)
        if cfg["double_buffer"].val:
            s[sh].double_buffer()


def schedule_matmul(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_matmul` and any elementwise
    epilogue, computed from the register accumulators."""
    return _schedule_product(cfg, outs, "matmul")


def schedule_dense(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_dense` (with or without its
    bias) and any elementwise epilogue.

    Examples
    --------
    >>> Y = te.compute(P.shape, lambda i, j: te.max(compute_dense(cfg, X, W, b)[i, j], 0.0))
    >>> s = schedule_dense(cfg, [Y])
    """
    return _schedule_product(cfg, outs, "dense")


def schedule_batch_matmul(cfg, outs):
    """Schedule the group ending in ``outs``: a :func:`compute_batch_matmul` and any
    elementwise epilogue (the batch is the grid's z dimension)."""
    return _schedule_product(cfg, outs, "batch_matmul")


# ---- templates --------------------------------------------------------------------------


@template("matmul.cuda")
def matmul(N, K, M, dtype="float32", tf32=False):
    """Tunable ``C[N, M] = A[N, K] @ B[K, M]`` on a GPU (float32 operands as TF32 on
    tensor cores with ``tf32``)."""
    cfg = get_config()
    A = te.placeholder((N, K), dtype, name="A")
    B = te.placeholder((K, M), dtype, name="B")
    C = compute_matmul(cfg, A, B, tf32)
    return schedule_matmul(cfg, [C]), [A, B, C]


@template("dense.cuda")
def dense(N, K, M, dtype="float32", bias=True, activation="none", tf32=False):
    """Tunable ``Y = act(X[N, K] @ W[M, K]^T + b[M])`` on a GPU (``tf32`` as for
    :func:`matmul`)."""
    cfg = get_config()
    X = te.placeholder((N, K), dtype, name="X")
    W = te.placeholder((M, K), dtype, name="W")
    P = compute_dense(cfg, X, W, tf32=tf32)
    args = [X, W]
    b = te.placeholder((M,), dtype, name="b") if bias else None
    if bias:
        args.append(b)
    Y = dense_epilogue(P, b, activation)
    return schedule_dense(cfg, [Y]), args + [Y]


@template("batch_matmul.cuda")
def batch_matmul(Bt, N, K, M, dtype="float32", transpose_b=False, tf32=False):
    """Tunable ``C[b, N, M] = A[b, N, K] @ B[b, K, M]`` (``B[b, M, K]^T`` with
    ``transpose_b``) on a GPU (``tf32`` as for :func:`matmul`)."""
    cfg = get_config()
    A = te.placeholder((Bt, N, K), dtype, name="A")
    B = te.placeholder((Bt, M, K) if transpose_b else (Bt, K, M), dtype, name="B")
    C = compute_batch_matmul(cfg, A, B, transpose_b, tf32)
    return schedule_batch_matmul(cfg, [C]), [A, B, C]


# ---- strategies -------------------------------------------------------------------------


register_implementation(Implementation(
    "matmul", "cuda", compute_matmul, schedule_matmul,
    template="matmul.cuda", workload=matmul_workload))
register_implementation(Implementation(
    "dense", "cuda", compute_dense, schedule_dense,
    template="dense.cuda", workload=dense_workload))
register_implementation(Implementation(
    "batch_matmul", "cuda", compute_batch_matmul, schedule_batch_matmul,
    template="batch_matmul.cuda", workload=batch_matmul_workload))
