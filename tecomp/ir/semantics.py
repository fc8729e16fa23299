"""What the scalar operators of the IR compute, written once.

Constant folding, the loop-IR interpreter and the runtime's evaluation of symbolic sizes
all take their answers from here, so they agree with each other and with the generated
code:

- ``//`` and ``%`` on integers are floor division and floor modulo (Python's): the
  quotient rounds toward negative infinity and the remainder has the sign of the divisor,
  ``-7 // 2 == -4`` and ``-7 % 2 == 1``. Division by zero has no value: the generated
  code (and the interpreter) records the failed run-time check
  :data:`DIVISION_BY_ZERO` in the call's error record, never traps, and goes on with the
  dividend as the quotient and 0 as the remainder (:func:`divmod_by_zero`); the caller
  then raises ``RuntimeCheckError``. The most negative value divided by -1 wraps like
  every other result: in int32 ``-2**31 // -1 == -2**31`` and ``-2**31 % -1 == 0``.
- Integer ``+ - *`` wrap to the width of their dtype (two's complement), as the machine
  instructions do: in int32, ``2**31 - 1 + 1 == -2**31``.
- Casts: float to integer truncates toward zero, and is undefined when the truncated value
  does not fit (or is NaN or infinite); integer to a narrower integer keeps the low bits;
  anything to bool is ``value != 0``; to a float rounds to the nearest representable value.

A result the target does not define is ``None``: a folder leaves the expression alone, an
evaluator reports it.

Example
-------
>>> floordiv(-7, 2), floormod(-7, 2)
(-4, 1)
>>> int_binary("+", 2**31 - 1, 1, "int32")
-2147483648
>>> cast(-2.7, "int8"), cast(300, "uint8")
(-2, 44)
"""

from __future__ import annotations

import math

import numpy as np

from . import dtype as dt


def wrap_int(value: int, dtype: str) -> int:
    """``value`` as an integer ``dtype`` holds it: the low bits, two's complement for
    signed dtypes; ``0`` or ``1`` for bool."""
    if dtype == "bool":
        return int(value != 0)
    b = dt.bits(dtype)
    value &= (1 << b) - 1
    if dt.is_signed(dtype) and value >= 1 << (b - 1):
        value -= 1 << b
    return value


def floordiv(a: int, b: int) -> int | None:
    """``a // b`` rounding toward negative infinity; ``None`` when ``b`` is zero."""
    return None if b == 0 else a // b


def floormod(a: int, b: int) -> int | None:
    """``a - b * floordiv(a, b)`` (the sign of ``b``); ``None`` when ``b`` is zero."""
    return None if b == 0 else a % b


#: The message of the run-time check that fails where an integer divisor is zero.
DIVISION_BY_ZERO = "integer division by zero"


def divmod_by_zero(a: int, is_div: bool) -> int:
    """What ``a // 0`` (``is_div``) or ``a % 0`` yields once the failure is recorded: ``a``
    and ``0``, the results of dividing by 1 (the divisor code substitutes so nothing
    traps)."""
    return a if is_div else 0


_INT_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": floordiv,
    "%": floormod,
    "min": min,
    "max": max,
}

#: The integer operators :func:`int_binary` knows, by symbol.
INT_OPS = tuple(_INT_OPS)


def int_binary(op: str, a: int, b: int, dtype: str | None = None) -> int | None:
    """The integer operator ``op`` (one of :data:`INT_OPS`) on ``a`` and ``b``.

    Parameters
    ----------
    op : str
        ``"+"``, ``"-"``, ``"*"``, ``"//"``, ``"%"``, ``"min"`` or ``"max"``.
    a, b : int
        The operands, as Python integers.
    dtype : str, optional
        The integer dtype the operation runs in; the result wraps to its width. Without
        one the result is the exact mathematical value.

    Returns
    -------
    int or None
        ``None`` for a division or modulo by zero, or an operator not listed.
    """
    fn = _INT_OPS.get(op)
    if fn is None:
        return None
    r = fn(a, b)
    if r is None or dtype is None:
        return r
    return wrap_int(r, dtype)


def round_float(x: float, dtype: str) -> float:
    """``x`` rounded to the float ``dtype`` (overflow gives an infinity). Rounding the exact
    double result of one ``+ - * /`` to a narrower float gives the correctly rounded narrow
    result, so computing in doubles and rounding once is exact."""
    if dtype == "float64":
        return float(x)
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.dtype(dtype).type(x))


def cast(value, dtype: str):
    """``value`` (a Python bool, int or float) converted to ``dtype``.

    Returns
    -------
    int, float or None
        An int for integer and bool dtypes, a float for float dtypes; ``None`` where the
        conversion is undefined (a float that is not finite or does not fit the integer
        dtype once truncated).
    """
    if dtype == "bool":
        return int(value != 0)
    if dt.is_float(dtype):
        return round_float(float(value), dtype)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        n = int(value)  # truncates toward zero
        if not dt.min_value(dtype) <= n <= dt.max_value(dtype):
            return None
        return n
    return wrap_int(int(value), dtype)


def dot4_u8s8_value(a: int, b: int) -> int:
    """``dot4_u8s8`` (:func:`tecomp.te.intrin.dot4_u8s8`) of two Python integers (their
    low 32 bits)."""
    total = 0
    for i in range(4):
        x = (a >> (8 * i)) & 0xFF
        y = (b >> (8 * i)) & 0xFF
        total += x * (y - 256 if y > 127 else y)
    return total


def dot2_bf16_value(a: int, b: int, acc: float = 0.0) -> float:
    """``acc + dot2_bf16(a, b)`` (:func:`tecomp.te.intrin.dot2_bf16`) of two Python
    integers (their low 32 bits), in float32: the high halves' product added first."""

    def half(word, k):
        return np.array([((word >> (16 * k)) & 0xFFFF) << 16], np.uint32).view(np.float32)[0]

    total = np.float32(acc) + half(a, 1) * half(b, 1)
    return float(np.float32(total + half(a, 0) * half(b, 0)))


__all__ = [
    "DIVISION_BY_ZERO",
    "INT_OPS",
    "divmod_by_zero",
    "cast",
    "floordiv",
    "floormod",
    "int_binary",
    "round_float",
    "wrap_int",
    "dot4_u8s8_value",
    "dot2_bf16_value",
]

