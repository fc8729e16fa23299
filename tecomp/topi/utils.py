"""Helpers for writing operators: reading constant shapes out of tensor expressions."""

from __future__ import annotations

from ..errors import ShapeError
from ..ir.expr import IntImm


def get_const_tuple(shape) -> tuple[int, ...]:
    """The dimensions of ``shape`` as Python ints, as TVM's ``topi.utils.get_const_tuple``.

    Parameters
    ----------
    shape : sequence of IntImm or int
        A ``Tensor.shape`` (or any sequence of constant extents).

    Returns
    -------
    tuple of int

    Raises
    ------
    ShapeError
        A dimension is symbolic (a ``te.var``) or not a constant; the message names its
        position and expression.

    Examples
    --------
    >>> A = te.placeholder((4, 64), name="A")
    >>> get_const_tuple(A.shape)
    (4, 64)
    """
    out = []
    for pos, dim in enumerate(shape):
        if isinstance(dim, IntImm):
            out.append(int(dim.value))
        elif isinstance(dim, int) and not isinstance(dim, bool):
            out.append(dim)
        else:
            raise ShapeError(
                f"dimension {pos} of shape {tuple(shape)} is {dim!r}, not a constant; "
                f"get_const_tuple needs every dimension to be an integer constant "
                f"(a symbolic size such as te.var('n') has no value until the call binds it)"
            )
    return tuple(out)
