"""Tensor cores: the intrinsics that put 16 x 16 x 16 tiles of a float16 product on them
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
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.stmt import FRAGMENT

#: The element types the tensor cores multiply here (accumulating in float32).
INPUT_DTYPES = ("float16",)


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
    if role not in ("a", "b") or dtype not in INPUT_DTYPES:
        raise ScheduleError(f"load_matrix: role {role!r} with {dtype}; roles 'a' and 'b' of "
                            f"{', '.join(INPUT_DTYPES)}")
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
    ``transposed_b``) on 16 x 16 fragments, products of ``dtype`` summed in float32."""
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
