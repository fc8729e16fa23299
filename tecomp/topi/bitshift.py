"""ONNX BitShift on integers, with numpy broadcasting.

The loop IR has no shift instructions, so a shift is the multiplication or division by
``2 ** amount`` it equals: ``exp2`` of the amount in float64 is exact for every amount
below 64. A left shift multiplies in the unsigned type of the same width, whose product
wraps as the shift drops bits (a signed value's bits are kept, as two's complement); a
right shift of a signed value is the floor division by the power of two (arithmetic).
Amounts outside ``0 .. bits - 1`` give 0, or -1 for a negative value shifted right
(ONNX BitShift-28).
"""

from __future__ import annotations

from .. import te
from ..errors import DTypeError
from .broadcast import broadcast_compute
from .cpu_schedule import schedule_injective
from .register import register_llvm

_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64,
         "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


def bitshift(x, amount, direction: str):
    """ONNX BitShift: ``x << amount`` (``direction="LEFT"``) or ``x >> amount``
    (``"RIGHT"``), elementwise with broadcasting; both integers of one dtype."""
    if x.dtype not in _BITS or amount.dtype != x.dtype:
        raise DTypeError(f"bitshift: x ({x.dtype}) and amount ({amount.dtype}) must have one "
                         f"integer dtype; allowed: {', '.join(_BITS)}")
    if direction not in ("LEFT", "RIGHT"):
        raise DTypeError(f"bitshift: direction={direction!r}; allowed: LEFT, RIGHT")
    bits = _BITS[x.dtype]
    signed = not x.dtype.startswith("u")
    unsigned = x.dtype if not signed else f"u{x.dtype}"

    def power_of_two(n, largest, dtype):
        n = te.min(te.max(n, te.const(0, n.dtype)), te.const(largest, n.dtype))
        return te.exp2(n.astype("float64")).astype(dtype)

    def shift(v, n):
        zero = te.const(0, v.dtype)
        in_range = te.all(n >= te.const(0, n.dtype), n < te.const(bits, n.dtype))
        if direction == "LEFT":
            shifted = (v.astype(unsigned) * power_of_two(n, bits - 1, unsigned)).astype(v.dtype)
            return te.if_then_else(in_range, shifted, zero)
        if not signed:
            return te.if_then_else(in_range, te.truncdiv(v, power_of_two(n, bits - 1, v.dtype)),
                                   zero)
        # 2 ** (bits - 1) does not fit the signed type: that shift, like any amount out of
        # range, leaves only the sign.
        sign = te.if_then_else(v < zero, te.const(-1, v.dtype), zero)
        fits = te.all(n >= te.const(0, n.dtype), n < te.const(bits - 1, n.dtype))
        divided = te.floordiv(v, power_of_two(n, bits - 2, v.dtype))
        return te.if_then_else(fits, divided, sign)

    return broadcast_compute(shift, "bitshift", x, amount)


register_llvm("bitshift", bitshift, schedule_injective)
