"""Constant integer intervals: inclusive ``(lo, hi)`` pairs of Python ints, where ``None``
on a side means unbounded (-inf below, +inf above), the arithmetic on them, and the
comparisons an interval decides (``a < b`` when ``a - b`` lies in ``(None, -1)``).

These are the sound building blocks of the constant-bound analysis
(:mod:`.const_int_bound`): each function returns an interval holding every result of the
operator for operands in the given intervals. ``//`` and ``%`` are floor division and
floor modulo.

Example
-------
>>> iv_mul((0, 7), (-2, 3))
(-14, 21)
"""

from __future__ import annotations

import math

from .. import dtype as dt
from .. import expr as E

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


# ---- comparisons decided by the interval of a difference ----------------------------------


def decide_cmp(t, diff: Interval) -> bool | None:
    """Decide ``a OP b`` (``t`` the comparison's node class, ``E.LT``...) from the bounds
    ``diff`` of ``a - b``; None if undecided."""
    lo, hi = diff
    if t is E.LT:
        return (
            True if hi is not None and hi < 0 else (False if lo is not None and lo >= 0 else None)
        )
    if t is E.LE:
        return (
            True if hi is not None and hi <= 0 else (False if lo is not None and lo > 0 else None)
        )
    if t is E.GT:
        return (
            True if lo is not None and lo > 0 else (False if hi is not None and hi <= 0 else None)
        )
    if t is E.GE:
        return (
            True if lo is not None and lo >= 0 else (False if hi is not None and hi < 0 else None)
        )
    if t is E.EQ or t is E.NE:
        if lo == 0 and hi == 0:
            return t is E.EQ
        if (lo is not None and lo > 0) or (hi is not None and hi < 0):
            return t is E.NE
    return None


# ---- the values of a dtype ----------------------------------------------------------------


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


def within(b: Interval, outer: Interval) -> bool:
    """Whether ``b`` lies inside ``outer``."""
    lo_ok = outer[0] is None or (b[0] is not None and b[0] >= outer[0])
    hi_ok = outer[1] is None or (b[1] is not None and b[1] <= outer[1])
    return lo_ok and hi_ok


__all__ = [
    "UNBOUNDED",
    "Bounds",
    "Interval",
    "decide_cmp",
    "dtype_interval",
    "iv_add",
    "iv_floordiv",
    "iv_floormod",
    "iv_intersect",
    "iv_max",
    "iv_min",
    "iv_mul",
    "iv_scale",
    "iv_union",
    "within",
]
