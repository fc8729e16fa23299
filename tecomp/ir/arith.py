"""Integer arithmetic analysis: constant bounds, proofs, symbolic intervals, linear forms,
and structural equality of expressions.

All integer reasoning here is over mathematical integers: index arithmetic is assumed
not to overflow its dtype (as in TVM and Halide). ``//`` and ``%`` are floor division
and floor modulo, as in Python.

The rewriting engine (canonical sum-of-products form, bound-driven rules) lives in
:mod:`tecomp.ir.simplify`; the functions here are thin, documented entry points to it,
plus the pure interval helpers the engine uses.

Example
-------
>>> io, ii = Var("io"), Var("ii")
>>> eval_interval(io * 8 + ii, {ii: (IntImm(0), IntImm(7))})   # (io*8, io*8 + 7)
"""

from __future__ import annotations

import math

from . import dtype as dt
from .expr import FloatImm, IntImm, PrimExpr, Var, as_expr

#: Inclusive constant bounds per variable; ``None`` on a side means unbounded.
Bounds = dict  # dict[Var, tuple[int | None, int | None]]

Interval = tuple  # tuple[int | None, int | None], inclusive, None = infinite

UNBOUNDED: Interval = (None, None)


# ---- constant interval arithmetic (None = -inf on the low side, +inf on the high side) ----


def iv_add(a: Interval, b: Interval) -> Interval:
    """[a] + [b]."""
    lo = None if a[0] is None or b[0] is None else a[0] + b[0]
    hi = None if a[1] is None or b[1] is None else a[1] + b[1]
    return lo, hi


def iv_scale(a: Interval, k: int) -> Interval:
    """[a] * k for a constant k."""
    if k == 0:
        return 0, 0
    lo = None if a[0] is None else a[0] * k
    hi = None if a[1] is None else a[1] * k
    return (lo, hi) if k > 0 else (hi, lo)


def _ext(x, side: int):
    """None as -inf (side 0) or +inf (side 1), so corner products can be taken."""
    if x is None:
        return -math.inf if side == 0 else math.inf
    return x


def _mul_ext(x, y):
    # 0 * inf is 0 here: the finite side really is exactly zero.
    if x == 0 or y == 0:
        return 0
    return x * y


def _unext(x):
    return None if isinstance(x, float) else x


def iv_mul(a: Interval, b: Interval) -> Interval:
    """[a] * [b] (all four corners)."""
    xs = (_ext(a[0], 0), _ext(a[1], 1))
    ys = (_ext(b[0], 0), _ext(b[1], 1))
    corners = [_mul_ext(x, y) for x in xs for y in ys]
    return _unext(min(corners)), _unext(max(corners))


def iv_min(a: Interval, b: Interval) -> Interval:
    """Bounds of min(x, y) for x in [a], y in [b]."""
    lo = None if a[0] is None or b[0] is None else min(a[0], b[0])
    if a[1] is None:
        hi = b[1]
    elif b[1] is None:
        hi = a[1]
    else:
        hi = min(a[1], b[1])
    return lo, hi


def iv_max(a: Interval, b: Interval) -> Interval:
    """Bounds of max(x, y) for x in [a], y in [b]."""
    hi = None if a[1] is None or b[1] is None else max(a[1], b[1])
    if a[0] is None:
        lo = b[0]
    elif b[0] is None:
        lo = a[0]
    else:
        lo = max(a[0], b[0])
    return lo, hi


def iv_union(a: Interval, b: Interval) -> Interval:
    """The smallest interval holding both [a] and [b]."""
    lo = None if a[0] is None or b[0] is None else min(a[0], b[0])
    hi = None if a[1] is None or b[1] is None else max(a[1], b[1])
    return lo, hi


def iv_intersect(a: Interval, b: Interval) -> Interval:
    """[a] ∩ [b] (may come out empty, lo > hi, when the two facts contradict)."""
    lo = a[0] if b[0] is None else (b[0] if a[0] is None else max(a[0], b[0]))
    hi = a[1] if b[1] is None else (b[1] if a[1] is None else min(a[1], b[1]))
    return lo, hi


def iv_floordiv(a: Interval, b: Interval) -> Interval:
    """Bounds of x // y for x in [a] and y in [b]; unbounded unless y is known non-zero
    with one sign."""
    if b[0] is not None and b[0] > 0:
        pos = b
    elif b[1] is not None and b[1] < 0:
        # x // y == (-x) // (-y) for y < 0
        return iv_floordiv(iv_scale(a, -1), iv_scale(b, -1))
    else:
        return UNBOUNDED
    bl, bh = pos
    # Floor division by a positive number is monotone in x; in y it pulls values toward
    # zero-ish from below, so the extreme quotient uses the smallest or largest divisor.
    if a[0] is None:
        lo = None
    elif a[0] >= 0:
        lo = a[0] // bh if bh is not None else 0
    else:
        lo = a[0] // bl
    if a[1] is None:
        hi = None
    elif a[1] >= 0:
        hi = a[1] // bl
    else:
        hi = a[1] // bh if bh is not None else -1
    return lo, hi


def iv_floormod(a: Interval, b: Interval) -> Interval:
    """Bounds of x % y (floor modulo: the sign of y) for x in [a] and y in [b]."""
    if b[0] is not None and b[0] > 0:
        hi = None if b[1] is None else b[1] - 1
        if a[0] is not None and a[0] >= 0:
            # A non-negative x smaller than every divisor is its own remainder.
            hi = a[1] if hi is None else (hi if a[1] is None else min(hi, a[1]))
        return 0, hi
    if b[1] is not None and b[1] < 0:
        return (None if b[0] is None else b[0] + 1), 0
    return UNBOUNDED


def dtype_interval(dtype: str) -> Interval:
    """The values a narrow integer or bool dtype can hold. 32/64-bit integers and floats
    count as unbounded: index arithmetic is reasoned about over mathematical integers."""
    if dtype == "bool":
        return 0, 1
    if dt.is_int(dtype) and dt.bits(dtype) < 32:
        return dt.min_value(dtype), dt.max_value(dtype)
    if dt.is_int(dtype) and not dt.is_signed(dtype):
        return 0, None
    return UNBOUNDED


# ---- structural equality and hashing -------------------------------------------------------


def _field_names(cls) -> tuple:
    return tuple(getattr(cls, "__dataclass_fields__", {}))


def _leaf_key(e):
    """Constants compare by value and dtype (-0.0 and 0.0 differ; NaN equals NaN)."""
    if type(e) is IntImm:
        return ("i", e.value, e.dtype)
    if type(e) is FloatImm:
        return ("f", float(e.value).hex(), e.dtype)
    return None


def structural_equal(a, b) -> bool:
    """Whether two expressions (or statements) are the same tree: ``Var``s (and buffers,
    tensors, iteration variables) by identity, constants by value and dtype, every other
    node by class and fields."""
    memo: set = set()
    return _seq(a, b, memo)


def _seq(a, b, memo) -> bool:
    if a is b:
        return True
    ta = type(a)
    if ta is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_seq(x, y, memo) for x, y in zip(a, b))
    if ta is Var:
        return False
    key = _leaf_key(a)
    if key is not None:
        return key == _leaf_key(b)
    if isinstance(a, (str, int, float, bool)) or a is None:
        return a == b
    names = _field_names(ta)
    if not names or ta.__module__ not in _IR_MODULES:
        return False  # buffers, tensors, reducers: identity only
    pair = (id(a), id(b))
    if pair in memo:
        return True
    ok = all(_seq(getattr(a, n), getattr(b, n), memo) for n in names)
    if ok:
        memo.add(pair)
    return ok


_IR_MODULES = ("tecomp.ir.expr", "tecomp.ir.stmt")


def structural_hash(e) -> int:
    """A hash consistent with :func:`structural_equal` (Vars hash by identity)."""
    return _shash(e, {})


def _shash(e, memo) -> int:
    if isinstance(e, tuple):
        return hash(tuple(_shash(x, memo) for x in e))
    t = type(e)
    if t is Var:
        return hash(("v", id(e)))
    key = _leaf_key(e)
    if key is not None:
        return hash(key)
    if isinstance(e, (str, int, float, bool)) or e is None:
        return hash((t.__name__, e))
    names = _field_names(t)
    if not names or t.__module__ not in _IR_MODULES:
        return hash(("o", id(e)))
    hit = memo.get(id(e))
    if hit is not None:
        return hit
    h = hash((t.__name__,) + tuple(_shash(getattr(e, n), memo) for n in names))
    memo[id(e)] = h
    return h


# ---- public analysis API -------------------------------------------------------------------


def _engine(bounds):
    # The engine builds on the canonical form in simplify.py, which itself uses the
    # interval helpers above; importing here keeps the two modules free of an import cycle.
    from .simplify import Simplifier

    return Simplifier(bounds)


def const_int_bound(e: PrimExpr, bounds: Bounds | None = None) -> Interval:
    """Inclusive constant bounds ``(lo, hi)`` of an integer (or bool) expression.

    Parameters
    ----------
    e : PrimExpr
        The expression. Floats give ``(None, None)``.
    bounds : dict[Var, (int | None, int | None)], optional
        Known inclusive bounds of variables; variables not listed are unbounded.

    Returns
    -------
    (lo, hi) with ``None`` for an unbounded side. Sound, not always tight: ``lo <= e <= hi``
    for every assignment of the variables within ``bounds``.

    Example
    -------
    >>> const_int_bound(io * 8 + ii, {io: (0, 11), ii: (0, 7)})
    (0, 95)
    """
    return _engine(bounds).bound(e)


def prove(cond: PrimExpr, bounds: Bounds | None = None) -> bool:
    """True only if the bool expression ``cond`` holds for every assignment of the
    variables within ``bounds``; False means "not proven", not "false"."""
    res = _engine(bounds).simplify(as_expr(cond))
    return type(res) is IntImm and res.value != 0


def eval_interval(e: PrimExpr, ranges: dict, bounds: Bounds | None = None) -> tuple:
    """Symbolic interval of ``e`` while the variables of ``ranges`` vary.

    Parameters
    ----------
    e : PrimExpr
        An integer expression.
    ranges : dict[Var, (PrimExpr, PrimExpr)]
        Each variable varies over ``[lo, hi]`` inclusive; ``lo``/``hi`` may use other
        variables (fixed symbols) or, acyclically, other ranged variables.
    bounds : Bounds, optional
        Constant bounds of the fixed symbols (used to decide signs and fold floordiv).

    Returns
    -------
    (lo, hi) : simplified expressions in the fixed symbols only, ``lo <= e <= hi``; a side
    is ``None`` when no bound exists (e.g. a ranged variable times an unbounded symbol of
    unknown sign). Exact for affine expressions (``io*8 + ii`` with ``ii`` in ``[0, 7]`` is
    ``(io*8, io*8 + 7)``); sound over-approximations for floordiv/floormod by constants,
    min/max, select and products.
    """
    return _engine(bounds).interval(e, ranges)


def linear_coeff(e: PrimExpr, v: Var) -> tuple | None:
    """``(coeff, base)`` with ``e == coeff * v + base`` where neither uses ``v``, or None
    if ``e`` is not linear in ``v`` (``v`` under a floordiv, min, load, ``v*v``...).

    Both parts are simplified; ``coeff`` is ``IntImm(0)`` when ``e`` does not use ``v``.
    """
    return _engine(None).linear_coeff(e, v)


__all__ = [
    "Bounds",
    "const_int_bound",
    "dtype_interval",
    "eval_interval",
    "iv_add",
    "iv_floordiv",
    "iv_floormod",
    "iv_max",
    "iv_min",
    "iv_mul",
    "iv_scale",
    "iv_union",
    "linear_coeff",
    "prove",
    "structural_equal",
    "structural_hash",
]
