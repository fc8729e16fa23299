"""Scalar data types, named as numpy names them ("float32", "int8", "bool", ...).

``bfloat16`` (8 exponent bits like float32, 7 fraction bits) is numpy's through the
``ml_dtypes`` package, which onnx depends on too, and so are the small types of
:data:`SMALL`: 8- and 4-bit floats and 4- and 2-bit integers. A kernel holds each of
those as its code in one byte (ml_dtypes' layout) and computes nothing in them: it
converts from and to them with :mod:`tecomp.topi.small_types`."""

from __future__ import annotations

from ..errors import DTypeError

#: dtype name -> (kind, bits); kind is "float", "int", "uint" or "bool".
_DTYPES = {
    "bool": ("bool", 1),
    "int8": ("int", 8),
    "int16": ("int", 16),
    "int32": ("int", 32),
    "int64": ("int", 64),
    "uint8": ("uint", 8),
    "uint16": ("uint", 16),
    "uint32": ("uint", 32),
    "uint64": ("uint", 64),
    "float16": ("float", 16),
    "bfloat16": ("float", 16),
    "float32": ("float", 32),
    "float64": ("float", 64),
}

#: The small types (kind "small", 8 bits in memory): ml_dtypes' names, ONNX's
#: FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ, FLOAT8E8M0, FLOAT4E2M1,
#: INT4, UINT4, INT2, UINT2.
SMALL = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
         "float8_e8m0fnu", "float4_e2m1fn", "int4", "uint4", "int2", "uint2")
_DTYPES.update({name: ("small", 8) for name in SMALL})

SUPPORTED = tuple(_DTYPES)


def check_dtype(dtype, what: str = "dtype") -> str:
    """Return ``dtype`` as a canonical name, or raise naming ``what`` and the allowed names."""
    name = getattr(dtype, "name", dtype)  # numpy dtypes and types
    if isinstance(dtype, type):
        try:
            import numpy as np

            name = np.dtype(dtype).name
        except TypeError:
            name = str(dtype)
    if not isinstance(name, str) or name not in _DTYPES:
        raise DTypeError(f"{what}={dtype!r} is not supported; allowed: {', '.join(SUPPORTED)}")
    if name == "bfloat16" or name in SMALL:
        import ml_dtypes  # noqa: F401  (gives numpy the names "bfloat16", "int4", ...)
    return name


def kind(dtype: str) -> str:
    return _DTYPES[dtype][0]


def bits(dtype: str) -> int:
    """The bits of one element in memory (8 for a small type, whatever its code's width)."""
    return _DTYPES[dtype][1]


def is_small(dtype: str) -> bool:
    """One of the :data:`SMALL` types: held as its code, converted, never computed on."""
    return _DTYPES[dtype][0] == "small"


def is_float(dtype: str) -> bool:
    return _DTYPES[dtype][0] == "float"


def is_int(dtype: str) -> bool:
    """Signed or unsigned integer (not bool)."""
    return _DTYPES[dtype][0] in ("int", "uint")


def is_signed(dtype: str) -> bool:
    return _DTYPES[dtype][0] == "int"


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def refuse_small(dtype: str, what: str, subject=None) -> None:
    """Raise a ``DTypeError`` naming ``what`` (and ``subject``, an expression printed only
    then: code generators call this for every operation) where ``dtype`` is a small type:
    a kernel holds those as codes, with no constants, conversions or arithmetic of their
    own."""
    if is_small(dtype):
        if subject is not None:
            what = f"{what} {subject}"
        raise DTypeError(f"{what}: {dtype} is a small type, held as its code: a kernel has "
                         f"no constants, casts or arithmetic of it; convert with "
                         f"tecomp.topi.small_types")


def max_value(dtype: str):
    refuse_small(dtype, "max_value")
    k, b = _DTYPES[dtype]
    if dtype == "bfloat16":
        return 3.3895313892515355e38  # float32's exponent range, 8 significant bits
    if k == "float":
        return {16: 65504.0, 32: 3.4028234663852886e38, 64: 1.7976931348623157e308}[b]
    if k == "int":
        return (1 << (b - 1)) - 1
    if k == "uint":
        return (1 << b) - 1
    return True


def min_value(dtype: str):
    refuse_small(dtype, "min_value")
    k, b = _DTYPES[dtype]
    if k == "float":
        return -max_value(dtype)
    if k == "int":
        return -(1 << (b - 1))
    if k == "uint":
        return 0
    return False


def is_float16_storage(dtype: str) -> bool:
    """float16 or bfloat16: a 16-bit float that CPUs without native arithmetic for it
    load, compute in float32 and round on store."""
    return dtype in ("float16", "bfloat16")


def numpy_dtype(dtype: str):
    import numpy as np

    if dtype == "bfloat16" or dtype in SMALL:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, dtype))
    return np.dtype(dtype)
