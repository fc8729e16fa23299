"""LLVM type names, constants and intrinsic suffixes for tecomp dtypes.

Registers hold ``bool`` as ``i1``; memory holds it as one byte (``i8``), as numpy does.
Signedness is not part of an LLVM integer type: it is carried by the tecomp dtype and
chosen per instruction (sdiv/udiv, sext/zext, icmp slt/ult). bfloat16 is held as its
bits (``i16``) in registers and memory and converted where it is computed on (see
``bfloat.py``): LLVM legalizes ``bfloat`` vectors of loads, selects and masked memory
intrinsics by promoting them to float, whose way back is a library call per lane on
CPUs without bfloat16 conversions.
"""

from __future__ import annotations

import math
import struct

from ...errors import CodegenError
from ...ir import dtype as dt

_SCALAR = {
    "bool": "i1",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "i8",
    "uint16": "i16",
    "uint32": "i32",
    "uint64": "i64",
    "float16": "half",
    "bfloat16": "i16",
    "float32": "float",
    "float64": "double",
}
# The small types are their codes, one byte (converted by tecomp.topi.small_types).
_SCALAR.update({name: "i8" for name in dt.SMALL})

_SUFFIX = {"half": "f16", "float": "f32", "double": "f64"}


def scalar_type(dtype: str) -> str:
    try:
        return _SCALAR[dtype]
    except KeyError:
        raise CodegenError(
            f"dtype {dtype!r} has no LLVM type; allowed: {', '.join(_SCALAR)}"
        ) from None


def mem_type(dtype: str) -> str:
    """The type of one element in memory (bool is a byte)."""
    return "i8" if dtype == "bool" else scalar_type(dtype)


def vec(t: str, lanes: int) -> str:
    return t if lanes == 1 else f"<{lanes} x {t}>"


def llvm_type(dtype: str, lanes: int = 1) -> str:
    return vec(scalar_type(dtype), lanes)


def elem_bytes(dtype: str) -> int:
    return 1 if dtype == "bool" else dt.bits(dtype) // 8


def suffix(t: str, lanes: int = 1) -> str:
    """Overload suffix of an intrinsic for scalar type ``t`` (``f32``, ``v16f32``, ``i64``)."""
    s = _SUFFIX.get(t, t)
    return s if lanes == 1 else f"v{lanes}{s}"


def float_const(value: float, dtype: str) -> str:
    """An exact textual LLVM constant of a float dtype (hex, so no rounding surprises)."""
    if dtype == "float16":
        try:
            packed = struct.pack("<e", value)
        except OverflowError:
            # Past float16's range (an attribute of 1e30 on a float16 operator): the
            # constant rounds to an infinity, as a cast to float16 does.
            packed = struct.pack("<e", math.copysign(math.inf, value))
        bits = struct.unpack("<H", packed)[0]
        return f"0xH{bits:04X}"
    if dtype == "float32":
        if math.isfinite(value) and abs(value) > 3.4028234663852886e38:
            value = math.copysign(math.inf, value)
        value = struct.unpack("<f", struct.pack("<f", value))[0]
    bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    return f"0x{bits:016X}"


def bfloat16_bits(value: float) -> int:
    """The bits of ``value`` rounded to bfloat16 (to nearest, ties to even; NaN quiet),
    the rounding :func:`round_to_bfloat16` emits."""
    if math.isfinite(value) and abs(value) > 3.4028234663852886e38:
        value = math.copysign(math.inf, value)
    (x,) = struct.unpack("<I", struct.pack("<f", value))
    if math.isnan(value):
        return (x >> 16) | 0x40
    return ((x + 0x7FFF + ((x >> 16) & 1)) >> 16) & 0xFFFF


def const(value, dtype: str) -> str:
    dt.refuse_small(dtype, f"constant {value}")
    if dtype == "bfloat16":
        bits = bfloat16_bits(float(value))
        return str(bits - (1 << 16) if bits >= 1 << 15 else bits)
    if dt.is_float(dtype):
        return float_const(float(value), dtype)
    if dtype == "bool":
        return "true" if value else "false"
    b = dt.bits(dtype)
    v = int(value) & ((1 << b) - 1)
    if v >= 1 << (b - 1):  # print as the signed value LLVM expects
        v -= 1 << b
    return str(v)
