"""Tensor intrinsics: a small compute declared together with the statements that
implement it on a piece of hardware (a tensor-core tile load, multiply-add or store), for
``Stage.tensorize`` to put in place of the loops that compute the same thing (as TVM's
``te.decl_tensor_intrin``)."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

from ..errors import ScheduleError
from ..ir import expr as E
from ..ir.stmt import FRAGMENT
from .tensor import ComputeOp


@dataclass(frozen=True)
class TileRegion:
    """Where one tensor of an intrinsic lies in the buffer a tensorized stage reads or
    writes: ``base`` (an index per buffer dimension) is the intrinsic's element
    ``(0, ..., 0)``, ``offset`` the same as a flat element index, and ``strides`` the
    flat distance from one element to the next along each of the intrinsic tensor's
    dimensions."""

    buffer: object
    base: tuple
    offset: E.PrimExpr
    strides: tuple

    def fragment_index(self) -> E.PrimExpr:
        """The number of the 16 x 16 fragment at ``base`` in a fragment buffer: tiles
        numbered row-major over its last two dimensions, and on over the leading ones."""
        shape = [E.const_value(d) for d in self.buffer.shape]
        index = E.IntImm(0, "int32")
        for k, (b, n) in enumerate(zip(self.base, shape)):
            tiles = n // FRAGMENT if k >= len(shape) - 2 else n
            step = b // FRAGMENT if k >= len(shape) - 2 else b
            index = index * tiles + E.cast("int32", step)
        return index


@dataclass(frozen=True)
class TensorIntrin:
    """A compute (``op``, over small constant extents) and ``implement``, which gives its
    statements for the regions of its inputs and outputs: called as
    ``implement(ins, outs)`` with a :class:`TileRegion` per input tensor (in the order
    ``op`` reads them first) and per output. For a reduction it returns
    ``(body, reset, update)``: the whole computation, the accumulator's initialization,
    and one accumulation (used when the loops around the tensorized ones go on
    reducing); otherwise one statement. ``name`` names it in errors."""

    op: ComputeOp
    implement: Callable
    name: str

    @property
    def inputs(self) -> list:
        """The input tensors of ``op``, in the order its body first reads them."""
        return list(self.op.input_tensors)


def decl_tensor_intrin(op, implement: Callable, name: str | None = None) -> TensorIntrin:
    """Declare ``implement`` as computing ``op`` (see :class:`TensorIntrin`).

    Parameters
    ----------
    op : ComputeOp
        One output, constant extents.
    implement : callable
        ``implement(ins, outs)`` -> Stmt, or (body, reset, update) for a reduction.
    name : str, optional
        Defaults to the op's name.

    Examples
    --------
    >>> a = te.placeholder((16, 16), "float16", name="a")
    >>> copy = te.compute((16, 16), lambda i, j: a[i, j], name="copy")
    >>> load = te.decl_tensor_intrin(copy.op, lambda ins, outs: S.MatrixLoad(
    ...     outs[0].buffer, outs[0].fragment_index(), ins[0].buffer, ins[0].offset,
    ...     ins[0].strides[0]))
    """
    if not isinstance(op, ComputeOp) or len(op.outputs) != 1:
        raise ScheduleError(f"decl_tensor_intrin: op must be a compute of one output, "
                            f"not {op!r}")
    for iv in [*op.axis, *op.reduce_axis]:
        if E.const_value(iv.dom.extent) is None:
            raise ScheduleError(f"decl_tensor_intrin: axis {iv.name} of {op.name} has the "
                                f"extent {iv.dom.extent}; an intrinsic's extents are constants")
    return TensorIntrin(op, implement, name or op.name)
