"""Constant folding: an operator applied to constants, computed as the target computes it.

The values come from :mod:`tecomp.ir.semantics` (floor division, wrapping integer
arithmetic, casts), so a folded constant is what the generated code would have computed.
Where the target leaves a result undefined or target-specific (division by zero, a float
cast that does not fit, ``min`` of NaN or of ``0.0`` and ``-0.0``) nothing is folded.
Float results are computed in doubles and rounded once to their dtype, which is exact for
one ``+ - * /``.
"""

from __future__ import annotations

import math

from .. import dtype as dt
from .. import expr as E
from .. import semantics
from ..expr import FloatImm, IntImm, PrimExpr

_TRUE = IntImm(1, "bool")
_FALSE = IntImm(0, "bool")


def const_bool(v: bool) -> IntImm:
    """The bool constant ``v``."""
    return _TRUE if v else _FALSE


def is_const(e) -> bool:
    """Whether ``e`` is an integer, bool or float constant."""
    return type(e) is IntImm or type(e) is FloatImm


def _float_binary(cls, x: float, y: float):
    if cls is E.Add:
        return x + y
    if cls is E.Sub:
        return x - y
    if cls is E.Mul:
        return x * y
    if cls is E.Div:
        return None if y == 0.0 else x / y
    if cls in (E.Min, E.Max):
        if math.isnan(x) or math.isnan(y):  # NaN: target min/max semantics differ
            return None
        if x == y:  # min(0.0, -0.0) is target-defined too
            return x if str(x) == str(y) else None
        return min(x, y) if cls is E.Min else max(x, y)
    return None


def fold_binary(cls, a: PrimExpr, b: PrimExpr, dtype: str) -> PrimExpr | None:
    """``cls(a, b)`` of two constants of ``dtype`` as a constant, or None when the result
    is not defined (or not the same on every target)."""
    if dt.is_float(dtype):
        v = _float_binary(cls, float(a.value), float(b.value))
        return None if v is None else FloatImm(semantics.round_float(v, dtype), dtype)
    v = semantics.int_binary(E.OP_SYMBOL.get(cls.__name__, ""), a.value, b.value, dtype)
    return None if v is None else IntImm(v, dtype)


_CMP = {
    E.EQ: lambda x, y: x == y,
    E.NE: lambda x, y: x != y,
    E.LT: lambda x, y: x < y,
    E.LE: lambda x, y: x <= y,
    E.GT: lambda x, y: x > y,
    E.GE: lambda x, y: x >= y,
}


def fold_compare(cls, a: PrimExpr, b: PrimExpr) -> IntImm:
    """The comparison ``cls(a, b)`` of two constants, as a bool constant."""
    return const_bool(_CMP[cls](a.value, b.value))


def fold_cast(v: PrimExpr, dtype: str) -> PrimExpr | None:
    """The constant ``v`` cast to ``dtype``, or None when ``v`` is not a constant or the
    target does not define the result."""
    if not is_const(v):
        return None
    r = semantics.cast(v.value, dtype)
    if r is None:
        return None
    return E.make_const(r, dtype)


__all__ = ["const_bool", "fold_binary", "fold_cast", "fold_compare", "is_const"]
