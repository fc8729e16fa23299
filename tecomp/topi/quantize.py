"""Linear quantization (ONNX QuantizeLinear / DequantizeLinear), tagged ``"broadcast"``.

``scale`` and ``zero_point`` are per tensor (a scalar or one element) or per axis (1-D,
one value per element of ``x``'s axis ``axis``).
"""

from __future__ import annotations

from .. import te
from ..errors import DTypeError, ShapeError
from ..ir import dtype as dt
from .cpu_schedule import const_int, schedule_injective
from .register import register_llvm
from .transform import normalize_axis


def _param_reader(t, x, axis, name):
    """``read(idx)`` of a per-tensor or per-axis parameter ``t`` of ``x``."""
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


def quantize_linear(x, scale, zero_point=None, axis: int = 1, dtype: str = "uint8"):
    """ONNX QuantizeLinear: ``saturate(round(x / scale) + zero_point)`` in the dtype of
    ``zero_point`` (``dtype`` when there is none: uint8 or int8); ties round to even.
    ``scale`` and ``zero_point`` are scalars or 1-D along ``axis`` of ``x``."""
    out = zero_point.dtype if zero_point is not None else dt.check_dtype(dtype)
    if out not in ("uint8", "int8"):
        raise DTypeError(f"quantize_linear: output dtype {out}; allowed: uint8, int8")
    read_scale = _param_reader(scale, x, axis, "quantize_linear")
    read_zero = (_param_reader(zero_point, x, axis, "quantize_linear")
                 if zero_point is not None else None)
    lo, hi = float(dt.min_value(out)), float(dt.max_value(out))

    def body(*idx):
        v = te.round(x[idx].astype("float32") / read_scale(idx).astype("float32"))
        if read_zero is not None:
            v = v + read_zero(idx).astype("float32")
        return te.min(te.max(v, lo), hi).astype(out)

    return te.compute(x.shape, body, name="quantize_linear", tag="broadcast")


def dequantize_linear(x, scale, zero_point=None, axis: int = 1):
    """ONNX DequantizeLinear: ``(x - zero_point) * scale`` in ``scale``'s dtype;
    ``scale`` and ``zero_point`` are scalars or 1-D along ``axis`` of ``x``."""
    read_scale = _param_reader(scale, x, axis, "dequantize_linear")
    read_zero = (_param_reader(zero_point, x, axis, "dequantize_linear")
                 if zero_point is not None else None)

    def body(*idx):
        v = x[idx].astype("int32")
        if read_zero is not None:
            v = v - read_zero(idx).astype("int32")
        return v.astype(scale.dtype) * read_scale(idx)

    return te.compute(x.shape, body, name="dequantize_linear", tag="broadcast")


register_llvm("quantize_linear", quantize_linear, schedule_injective)
register_llvm("dequantize_linear", dequantize_linear, schedule_injective)
