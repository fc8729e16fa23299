"""Tensor cores: the intrinsics that put 16 x 16 x 16 tiles of a float16 or bfloat16
product on them
(PTX ``wmma``, sm_70 and later), for ``Stage.tensorize``.

A product on tensor cores is staged as TVM's CUDA tensor-core schedules are: tiles of the
operands in shared memory, copied into fragments (``wmma.matrix_a`` / ``wmma.matrix_b``
stages tensorized by :func:`load_matrix`), multiplied into accumulator fragments (the
``wmma.accumulator`` stage tensorized by :func:`multiply_add`, float32 sums), and the
accumulators stored (:func:`store_matrix`). Each fragment belongs to one warp, so the
stages that touch fragments bind no ``threadIdx.x`` loop: the 32 threads along x are the
warp that runs them together.
"""

from __future__ import annotations

import functools

from ... import te
from ...errors import ScheduleError
from ...ir import dtype as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.stmt import FRAGMENT
from ...te.analysis import ops_of
from ...codegen.cuda.source import STATIC_SHARED_BYTES, async_copies
from ...target import Target
from ..group import CROP_TAG, epilogue_ops, inline_into_output
from .common import BLOCKS_TO_FILL, compute_as_filled, cooperative_load, deal_to_threads

#: The element types the tensor cores multiply here (accumulating in float32); float32
#: operands only where asked, as TF32 (:func:`applies`).
INPUT_DTYPES = ("float16", "bfloat16")
TF32 = "float32"


#: Bytes each thread copies into a shared tile at a time: one 16-byte access where the
#: rows allow (every row starts at a multiple of 16 bytes).
COPY_BYTES = 16


def _unit(stride) -> bool:
    return E.const_value(stride) == 1


def _tile(name: str, dtype: str):
    return te.placeholder((FRAGMENT, FRAGMENT), dtype, name=name)


@functools.cache
def load_matrix(role: str, dtype: str = "float16", transposed: bool = False):
    """The intrinsic copying a 16 x 16 tile into a ``wmma.matrix_a`` (``role`` "a": rows
    are m, columns k) or ``wmma.matrix_b`` (``role`` "b": rows k, columns n; or with
    ``transposed``, rows n and columns k, as a dense layer's weight is stored) fragment.
    The tile's rows must be contiguous in memory."""
    if role not in ("a", "b") or dtype not in (*INPUT_DTYPES, TF32):
        raise ScheduleError(f"load_matrix: role {role!r} with {dtype}; roles 'a' and 'b' of "
                            f"{', '.join((*INPUT_DTYPES, TF32))}")
    x = _tile("x", dtype)
    y = te.compute(x.shape, lambda i, j: x[i, j], name=f"load_{role}")
    layout = "col_major" if transposed else "row_major"

    def implement(ins, outs):
        (src,), (frag,) = ins, outs
        if not _unit(src.strides[1]):
            raise ScheduleError(f"load_matrix: the tile of {src.buffer.name} has rows "
                                f"{src.strides[1]} elements apart along its columns; "
                                f"a tile's rows must be contiguous")
        return S.MatrixLoad(frag.buffer, frag.fragment_index(), src.buffer, src.offset,
                            src.strides[0], layout)

    return te.decl_tensor_intrin(y.op, implement, name=f"wmma_load_{role}_{layout}")


@functools.cache
def multiply_add(dtype: str = "float16", transposed_b: bool = False):
    """The intrinsic ``c[i, j] += sum_k a[i, k] * b[k, j]`` (``b[j, k]`` with
    ``transposed_b``) on 16 x 16 fragments, products of ``dtype`` summed in float32
    (float32 operands multiplied as TF32)."""
    a, b = _tile("a", dtype), _tile("b", dtype)
    k = te.reduce_axis((0, FRAGMENT), name="k")

    def product(i, j):
        right = b[j, k] if transposed_b else b[k, j]
        return te.sum(a[i, k].astype("float32") * right.astype("float32"), axis=k)

    c = te.compute(a.shape, product, name="mma")

    def implement(ins, outs):
        (fa, fb), (fc,) = ins, outs
        acc = (fc.buffer, fc.fragment_index())
        update = S.MatrixMultiplyAdd(*acc, fa.buffer, fa.fragment_index(),
                                     fb.buffer, fb.fragment_index(), *acc)
        reset = S.MatrixFill(*acc, E.FloatImm(0.0, "float32"))
        return S.seq(reset, update), reset, update

    return te.decl_tensor_intrin(c.op, implement,
                                 name="wmma_mma_nt" if transposed_b else "wmma_mma")


@functools.cache
def store_matrix():
    """The intrinsic copying a 16 x 16 float32 accumulator fragment to memory whose rows
    are contiguous."""
    x = _tile("acc", "float32")
    y = te.compute(x.shape, lambda i, j: x[i, j], name="store")

    def implement(ins, outs):
        (frag,), (dst,) = ins, outs
        if not _unit(dst.strides[1]):
            raise ScheduleError(f"store_matrix: {dst.buffer.name}'s tile rows are not "
                                f"contiguous")
        return S.MatrixStore(dst.buffer, dst.offset, dst.strides[0], frag.buffer,
                             frag.fragment_index())

    return te.decl_tensor_intrin(y.op, implement, name="wmma_store")


# ---- products on tensor cores ---------------------------------------------------------------


def applies(dtype: str, *sizes, tf32: bool = False) -> bool:
    """Whether a product of ``dtype`` operands with these (rows, k, columns) sizes runs on
    tensor cores: float16 or bfloat16 (or float32 with ``tf32``), every size a constant
    multiple of 16."""
    return (dtype in INPUT_DTYPES or (tf32 and dtype == TF32)) and all(
        isinstance(n, int) and n > 0 and n % FRAGMENT == 0 for n in sizes)


def _warp_split_ok(e) -> bool:
    _, warps, tiles = e.size
    return warps <= 4 and tiles <= 4 and warps * tiles <= 8


def shared_bytes(block_m: int, block_n: int, depth: int, pad: int, dtype: str,
                 double: bool = False) -> int:
    """Shared memory of a block computing a ``block_m`` x ``block_n`` tile ``depth`` deep
    per step, at most: its operand tiles (rows padded by ``pad``; doubled with ``double``)
    and the float32 tile its accumulators pass through to an epilogue."""
    operands = (block_m + block_n) * (depth + pad) * (dt.bits(dtype) // 8)
    return operands * (2 if double else 1) + block_m * block_n * 4


#: The untuned block layouts, largest first, as ((warps, fragments per warp) along the
#: rows, the same along the columns): 128 x 128 with 4 warps of 64 x 64, then 64 x 64
#: with 4 warps of 32 x 32, then what the sizes divide into. At 4096^3 on an H200 the
#: first ran float16 at 200 TFLOPS, against 177 with 8 warps of 64 x 32 and 126 for the
#: second.
_FALLBACK_WARPS = (((2, 4), (2, 4)), ((2, 2), (2, 2)))


def _cuda_target():
    """The current target where it is a cuda one, else None."""
    target = Target.current()
    return target if target is not None and target.kind == "cuda" else None


def _async_copies() -> bool:
    """Whether the current target copies shared tiles asynchronously (``cp.async``), so a
    doubled tile's copy overlaps the products: 229 against 198 TFLOPS for float16 at
    4096^3 on an H200; without, doubling lost (170 against 177)."""
    target = _cuda_target()
    return target is not None and async_copies(target.arch)


def _fallback_warps(N, M, batch, dtype, depth) -> tuple:
    """The first of :data:`_FALLBACK_WARPS` that divides the output, gives
    :data:`~tecomp.topi.cuda.common.BLOCKS_TO_FILL` blocks and fits the current target's
    shared memory; else, per side, the largest of 2 x 2, 2 x 1, 1 x 2, 1 x 1 that
    divides it."""
    target = _cuda_target()
    limit = target.caps.max_shared_memory_per_block if target else STATIC_SHARED_BYTES
    for rows, cols in _FALLBACK_WARPS:
        bm, bn = (w * t * FRAGMENT for w, t in (rows, cols))
        if (N % bm == 0 and M % bn == 0 and batch * (N // bm) * (M // bn) >= BLOCKS_TO_FILL
                and shared_bytes(bm, bn, depth, 8, dtype, _async_copies()) <= limit):
            return rows, cols
    return tuple(next((w, t) for w, t in ((2, 2), (2, 1), (1, 2), (1, 1))
                      if (n // FRAGMENT) % (w * t) == 0) for n in (N, M))


def define_knobs(cfg, N, K, M, batch=1, dtype="float16") -> None:
    """The knobs of ``batch`` tensor-core products ``[N, K] x [K, M]`` of ``dtype``:
    ``tc_m`` / ``tc_n`` split the 16-row (column) tiles of the output into (blocks, warps,
    fragments per warp), ``tc_k`` the 16-deep steps of k into (steps, per shared tile),
    ``tc_pad`` pads each row of the shared tiles by that many elements (off the 32 banks),
    ``tc_double`` doubles the shared tiles (the next step's copy overlapping this step's
    products). The fallback: the first of :data:`_FALLBACK_WARPS` that fills the GPU
    (:func:`_fallback_warps`), k 32 deep, rows padded by 8, tiles doubled where they are
    copied asynchronously (:func:`_async_copies`)."""
    cfg.define_split("tc_m", N // FRAGMENT, num_outputs=3, filter=_warp_split_ok)
    cfg.define_split("tc_n", M // FRAGMENT, num_outputs=3, filter=_warp_split_ok)
    cfg.define_split("tc_k", K // FRAGMENT, num_outputs=2, filter=lambda e: e.size[1] <= 4)
    cfg.define_knob("tc_pad", [8, 0])
    cfg.define_knob("tc_double", [False, True])
    if cfg.is_fallback:
        steps = 2 if (K // FRAGMENT) % 2 == 0 else 1
        layout = _fallback_warps(N, M, batch, dtype, steps * FRAGMENT)
        for name, (warps, per) in zip(("tc_m", "tc_n"), layout):
            cfg.fallback_split(name, [-1, warps, per])
        cfg.fallback_split("tc_k", [-1, steps])
        cfg.fallback_knob("tc_pad", 8)
        cfg.fallback_knob("tc_double", _async_copies())


def _split_tiles(stage, axes):
    """Split each of ``axes`` into (tiles, 16) and order the tile loops outside the
    element loops, unrolled: a fragment is registers, which only a constant index keeps
    out of local memory. Returns (tile loops, element loops)."""
    pairs = [stage.split(ax, factor=FRAGMENT) for ax in axes]
    stage.reorder(*(p[0] for p in pairs), *(p[1] for p in pairs))
    for tile, _ in pairs:
        stage.unroll(tile)
    return [p[0] for p in pairs], [p[1] for p in pairs]


def schedule_product(cfg, s, out, anchor, operands, transposed_b: bool) -> None:
    """Schedule the product ``anchor`` (float32 sums of 16-bit ``operands``, tagged)
    and its epilogue ending in ``out`` on tensor cores (module docstring).

    Each block computes a ``tc_m`` x ``tc_n`` tile of the output with warps of
    ``16 * fragments`` square: per step of k, the threads copy the operands' tiles into
    shared memory, each warp loads its fragments from there and accumulates; then each
    warp stores its accumulators, to the output directly when the product is the output,
    else to a shared tile that the block's threads read for the epilogue.
    """
    warps = (cfg["tc_m"].size[1], cfg["tc_n"].size[1])
    block = [cfg[n].size[1] * cfg[n].size[2] * FRAGMENT for n in ("tc_m", "tc_n")]
    threads = (*warps, 32)
    product = anchor.output(0)
    inline_into_output(s, epilogue_ops(out, anchor, "tensor-core product",
                                       head=_head(out, anchor)), out)
    shared = [s.cache_read(t, "shared", [product]) for t in operands]
    compute_as_filled(s, operands)
    frags = [s.cache_read(t, scope, [product]) for t, scope in
             zip(shared, ("wmma.matrix_a", "wmma.matrix_b"))]
    acc = s.cache_write(product, "wmma.accumulator")

    def block_loops(stage):
        axes = list(stage.op.axis)
        if len(axes) > product.ndim:  # an image's rows and columns: the pixel columns
            axes[product.ndim - 1:] = [stage.fuse(*axes[product.ndim - 1:])]
        *batch, i, j = axes
        bi, i = stage.split(i, factor=block[0])
        bj, j = stage.split(j, factor=block[1])
        stage.reorder(*batch, bi, bj, i, j)
        if batch:
            stage.bind(stage.fuse(*batch) if len(batch) > 1 else batch[0],
                       te.thread_axis("blockIdx.z"))
        stage.bind(bi, te.thread_axis("blockIdx.y"))
        stage.bind(bj, te.thread_axis("blockIdx.x"))
        return bj, i, j

    stage = s[product]
    if product.op is out.op:
        _, i, j = block_loops(stage)
    else:
        # The accumulators go through a shared tile, read by the epilogue's threads.
        bj, i, j = block_loops(s[out])
        bound, rest = deal_to_threads(s[out], s[out].fuse(i, j), threads)
        s[out].reorder(*bound, rest)
        stage.set_scope("shared")
        stage.compute_at(s[out], bj)
        *_, i, j = stage.op.axis
    wi, i = stage.split(i, factor=block[0] // warps[0])
    wj, j = stage.split(j, factor=block[1] // warps[1])
    stage.reorder(wi, wj, i, j)
    stage.bind(wi, te.thread_axis("threadIdx.z"))
    stage.bind(wj, te.thread_axis("threadIdx.y"))
    _, (first, _) = _split_tiles(stage, [i, j])
    stage.tensorize(first, store_matrix())

    s[acc].compute_at(stage, wj)
    *_, ci, cj = s[acc].op.axis
    ko, ki = s[acc].split(s[acc].op.reduce_axis[0], factor=cfg["tc_k"].size[1] * FRAGMENT)
    kt, kf = s[acc].split(ki, factor=FRAGMENT)
    (ti, tj), (ei, ej) = _split_tiles(s[acc], [ci, cj])
    s[acc].reorder(ko, kt, ti, tj, ei, ej, kf)
    s[acc].unroll(kt)
    dtype = operands[0].dtype
    s[acc].tensorize(ei, multiply_add(dtype, transposed_b))

    for frag, role in zip(frags, "ab"):
        s[frag].compute_at(s[acc], kt)
        _, (first, _) = _split_tiles(s[frag], list(s[frag].op.axis)[-2:])
        s[frag].tensorize(first, load_matrix(role, dtype, transposed_b and role == "b"))
    for t in shared:
        s[t].compute_at(s[acc], ko)
        if cfg["tc_pad"].val:
            row = s[t].op.axis[-2]
            s[t].storage_align(row, FRAGMENT, cfg["tc_pad"].val)
        cooperative_load(s, t, threads, COPY_BYTES * 8 // dt.bits(t.dtype))
        if cfg["tc_double"].val:
            s[t].double_buffer()


def _head(out, anchor):
    """The operation whose shape the epilogue keeps: the product, or the stage that
    reads the product's pixel columns as an image (a convolution's), or that crops its
    rows padded to whole blocks (a symbolic row count's)."""
    readers = [op for op in ops_of([out]) if anchor.output(0) in op.input_tensors]
    if len(readers) == 1 and (len(readers[0].axis) > len(anchor.axis)
                              or getattr(readers[0], "tag", "") == CROP_TAG):
        return readers[0]
    return anchor
