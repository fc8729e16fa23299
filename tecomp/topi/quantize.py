"""Linear quantization (ONNX QuantizeLinear / DequantizeLinear), tagged ``"broadcast"``.

``scale`` and ``zero_point`` are per tensor (a scalar or one element), per axis (1-D,
one value per element of ``x``'s axis ``axis``) or blocked (``block_size`` > 0: ``x``'s
rank, with ``ceil(n / block_size)`` values along ``axis``, each for ``block_size``
consecutive elements there).

The quantized types are the 8- and 16-bit integers and the small types but
``float8_e8m0fnu`` (:data:`QUANTIZED_TYPES`); the small ones convert through
:mod:`.small_types`. A float8 type's zero point must be 0 and is not read (ONNX); a
``float4_e2m1fn`` zero point is a value, added and subtracted as ONNX's formulas say
(onnx's reference evaluator leaves it out of DequantizeLinear).
"""

from __future__ import annotations

from .. import te
from ..errors import DTypeError, ShapeError
from ..ir import dtype as dt
from . import small_types
from .cpu_schedule import const_int, schedule_injective
from .register import register_llvm
from .transform import normalize_axis

#: Integer types a quantization rounds to, with their ranges.
_INTEGER_RANGES = {
    "uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
    **{name: ((-1 << (f.bits - 1), (1 << (f.bits - 1)) - 1) if f.signed
              else (0, (1 << f.bits) - 1)) for name, f in small_types.INTEGERS.items()},
}
#: Float8 types, whose zero point is 0 and not read.
_UNREAD_ZERO = tuple(d for d in small_types.FLOATS if d != "float4_e2m1fn")
#: The dtypes ``quantize_linear`` writes and ``dequantize_linear`` reads (the latter also
#: int32, ONNX's quantized bias).
QUANTIZED_TYPES = tuple(_INTEGER_RANGES) + tuple(small_types.FLOATS)


def _param_reader(t, x, axis, name, block_size=0):
    """``read(idx)`` of a per-tensor, per-axis or blocked parameter ``t`` of ``x``."""
    if block_size:
        axis = normalize_axis(axis, len(x.shape))
        if len(t.shape) != len(x.shape):
            raise ShapeError(f"{name}: blocked {t.name} must have {x.name}'s rank "
                             f"{len(x.shape)}, got {len(t.shape)}")

        def read_block(idx):
            return t[tuple(i // block_size if k == axis else i for k, i in enumerate(idx))]

        return read_block
    if len(t.shape) == 0:
        return lambda idx: t[()]
    if len(t.shape) != 1:
        raise ShapeError(f"{name}: {t.name} must be a scalar or 1-D, got rank {len(t.shape)}")
    n = const_int(t.shape[0])
    if n == 1:
        return lambda idx: t[0]
    axis = normalize_axis(axis, len(x.shape))
    if n is not None and const_int(x.shape[axis]) not in (n, None):
        raise ShapeError(f"{name}: {t.name} has {n} values but axis {axis} of {x.name} has "
                         f"{x.shape[axis]}")
    return lambda idx: t[idx[axis]]


def _value(v):
    """A quantized element's value: decoded if of a small type."""
    return small_types.decode(v) if dt.is_small(v.dtype) else v


def quantize_linear(x, scale, zero_point=None, axis: int = 1, dtype: str = "uint8",
                    saturate: bool = True, block_size: int = 0):
    """ONNX QuantizeLinear: ``x / scale`` (in float32) rounded into the dtype of
    ``zero_point`` (``dtype`` when there is none).

    To an integer type, ``saturate(round(x / scale) + zero_point)``, ties to even; to a
    float8 type, ``x / scale`` rounded as Cast rounds with ``saturate``; to
    ``float4_e2m1fn``, ``x / scale + zero_point`` rounded (saturating). ``scale`` and
    ``zero_point`` are per tensor, per axis (``axis``) or blocked (``block_size``
    consecutive elements along ``axis`` share one; 0: not blocked; the module text).
    """
    out = zero_point.dtype if zero_point is not None else dt.check_dtype(dtype)
    if out not in QUANTIZED_TYPES:
        raise DTypeError(f"quantize_linear: output dtype {out}; allowed: "
                         f"{', '.join(QUANTIZED_TYPES)}")
    read_scale = _param_reader(scale, x, axis, "quantize_linear", block_size)
    read_zero = (_param_reader(zero_point, x, axis, "quantize_linear", block_size)
                 if zero_point is not None else None)

    def body(*idx):
        v = x[idx].astype("float32") / read_scale(idx).astype("float32")
        if out in small_types.FLOATS:
            if read_zero is not None and out not in _UNREAD_ZERO:
                v = v + _value(read_zero(idx))
            return small_types.encode(v, out, saturate=saturate)
        v = te.round(v)
        if read_zero is not None:
            v = v + _value(read_zero(idx)).astype("float32")
        lo, hi = _INTEGER_RANGES[out]
        v = te.min(te.max(v, float(lo)), float(hi))
        if dt.is_small(out):
            return small_types.encode(v.astype("int32"), out)
        return v.astype(out)

    return te.compute(x.shape, body, name="quantize_linear", tag="broadcast")


def dequantize_linear(x, scale, zero_point=None, axis: int = 1, block_size: int = 0):
    """ONNX DequantizeLinear: ``(x - zero_point) * scale``, computed in float32 (float64
    for a float64 scale) and given in ``scale``'s dtype; a float8 ``x``'s zero point is
    not read (it is 0). ``scale`` and ``zero_point`` are per tensor, per axis (``axis``)
    or blocked (``block_size`` consecutive elements along ``axis`` share one; 0: not
    blocked; the module text)."""
    if x.dtype not in QUANTIZED_TYPES + ("int32",):
        raise DTypeError(f"dequantize_linear: x is {x.dtype}; allowed: "
                         f"{', '.join(QUANTIZED_TYPES + ('int32',))}")
    read_scale = _param_reader(scale, x, axis, "dequantize_linear", block_size)
    read_zero = (_param_reader(zero_point, x, axis, "dequantize_linear", block_size)
                 if zero_point is not None and x.dtype not in _UNREAD_ZERO else None)
    wide = "float64" if scale.dtype == "float64" else "float32"

    def body(*idx):
        v = _value(x[idx])
        if read_zero is not None:
            zero = _value(read_zero(idx))
            # Integers subtract exactly in int32 (an int32 x has a zero point of 0).
            v = v - zero if dt.is_float(v.dtype) else v.astype("int32") - zero.astype("int32")
        return (v.astype(wide) * read_scale(idx).astype(wide)).astype(scale.dtype)

    return te.compute(x.shape, body, name="dequantize_linear", tag="broadcast")


register_llvm("quantize_linear", quantize_linear, schedule_injective)
register_llvm("dequantize_linear", dequantize_linear, schedule_injective)
