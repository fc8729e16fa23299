"""Elementwise unary operators (ONNX semantics), each a ``te.compute`` tagged ``"elemwise"``.

Each function maps one scalar expression to one; :func:`elemwise` lifts it to a tensor.
Float-only operators raise ``DTypeError`` (from ``te``) on integer inputs.
"""

from __future__ import annotations

import math

from .. import te
from ..errors import DTypeError
from ..ir import dtype as dt
from . import small_types
from .cpu_schedule import schedule_injective
from .register import register_llvm

#: The tag of computes that read one input element per output element.
TAG = "elemwise"


def elemwise(x, fscalar, name: str):
    """``out[idx] = fscalar(x[idx])`` over ``x``'s shape, tagged ``"elemwise"``."""
    return te.compute(x.shape, lambda *idx: fscalar(x[idx]), name=name, tag=TAG)


def _float(name, v):
    if not dt.is_float(v.dtype):
        raise DTypeError(f"{name} needs a float tensor, got {v.dtype}")
    return v


def _zero(v):
    return te.const(0, v.dtype)


def _sign(v):
    one, zero = te.const(1, v.dtype), _zero(v)
    if v.dtype == "bool" or (not dt.is_signed(v.dtype) and not dt.is_float(v.dtype)):
        return te.if_then_else(v > zero, one, zero)
    return te.if_then_else(v > zero, one, te.if_then_else(v < zero, -one, zero))


def _softplus(v):
    # log(1 + exp(x)) without overflow: max(x, 0) + log(1 + exp(-|x|)).
    return te.max(v, 0.0) + te.log(te.exp(-te.abs(v)) + 1.0)


def _not(v):
    if v.dtype != "bool":
        raise DTypeError(f"not needs a bool tensor, got {v.dtype}")
    return ~v


def _unary_op(name, fscalar):
    def op(x):
        return elemwise(x, fscalar, name)

    op.__name__ = name
    op.__doc__ = f"Elementwise ONNX ``{name}`` of tensor ``x`` (same shape)."
    return op


abs = _unary_op("abs", te.abs)  # noqa: A001 (the ONNX name)
neg = _unary_op("neg", lambda v: -v)
exp = _unary_op("exp", te.exp)
log = _unary_op("log", te.log)
sqrt = _unary_op("sqrt", te.sqrt)
reciprocal = _unary_op("reciprocal", lambda v: 1.0 / _float("reciprocal", v))
tanh = _unary_op("tanh", te.tanh)
sigmoid = _unary_op("sigmoid", te.sigmoid)
# Max(0, v) is ``0 > v ? 0 : v``, which keeps a NaN (onnxruntime's Relu); ``max(v, 0)``
# gave 0. The same one instruction.
relu = _unary_op("relu", lambda v: te.max(_zero(v), v))
erf = _unary_op("erf", te.erf)
floor = _unary_op("floor", te.floor)
ceil = _unary_op("ceil", te.ceil)
round = _unary_op("round", te.round)  # noqa: A001
sin = _unary_op("sin", te.sin)
cos = _unary_op("cos", te.cos)
sign = _unary_op("sign", _sign)
logical_not = _unary_op("not", _not)
softplus = _unary_op("softplus", lambda v: _softplus(_float("softplus", v)))
softsign = _unary_op("softsign", lambda v: v / (te.abs(_float("softsign", v)) + 1.0))
hard_swish = _unary_op(
    "hard_swish", lambda v: v * te.max(0.0, te.min(1.0, _float("hard_swish", v) / 6.0 + 0.5)))
mish = _unary_op("mish", lambda v: v * te.tanh(_softplus(_float("mish", v))))
isnan = _unary_op(
    "isnan", lambda v: te.not_equal(v, v) if dt.is_float(v.dtype) else te.const(False, "bool"))
identity = _unary_op("identity", lambda v: v)
tan = _unary_op("tan", lambda v: te.sin(v) / te.cos(v))
sinh = _unary_op("sinh", lambda v: (te.exp(v) - te.exp(-v)) * 0.5)
cosh = _unary_op("cosh", lambda v: (te.exp(v) + te.exp(-v)) * 0.5)
asinh = _unary_op("asinh", lambda v: te.log(v + te.sqrt(v * v + 1.0)))
acosh = _unary_op("acosh", lambda v: te.log(v + te.sqrt(v * v - 1.0)))
atanh = _unary_op("atanh", lambda v: te.log((v + 1.0) / (1.0 - v)) * 0.5)


def hard_sigmoid(x, alpha: float = 0.2, beta: float = 0.5):
    """ONNX HardSigmoid: ``max(0, min(1, alpha * x + beta))``."""
    return elemwise(
        x, lambda v: te.max(0.0, te.min(1.0, _float("hard_sigmoid", v) * alpha + beta)),
        "hard_sigmoid")


def leaky_relu(x, alpha: float = 0.01):
    """ONNX LeakyRelu: ``x`` where ``x >= 0``, else ``alpha * x``."""
    return elemwise(x, lambda v: te.if_then_else(v < 0.0, v * alpha, v), "leaky_relu")


def elu(x, alpha: float = 1.0):
    """ONNX Elu: ``x`` where ``x >= 0``, else ``alpha * (exp(x) - 1)``."""
    return elemwise(x, lambda v: te.if_then_else(v < 0.0, (te.exp(v) - 1.0) * alpha, v), "elu")


def selu(x, alpha: float = 1.67326319217681884765625, gamma: float = 1.05070102214813232421875):
    """ONNX Selu: ``gamma * x`` where ``x > 0``, else ``gamma * alpha * (exp(x) - 1)``."""
    return elemwise(
        x, lambda v: te.if_then_else(v > 0.0, v * gamma, (te.exp(v) - 1.0) * (alpha * gamma)),
        "selu")


def gelu(x, approximate: str = "none"):
    """ONNX Gelu: ``x * Phi(x)``, exactly with erf or (``approximate="tanh"``) with tanh.

    ``x`` is halved before it is multiplied by ``1 + erf`` (at most 2), so Gelu of a
    value near the largest float is the value, not an overflow to infinity."""
    if approximate == "none":
        return elemwise(x, lambda v: v * 0.5 * (te.erf(v * (1.0 / math.sqrt(2.0))) + 1.0),
                        "gelu")
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        return elemwise(
            x, lambda v: v * 0.5 * (te.tanh((v + v * v * v * 0.044715) * c) + 1.0), "gelu")
    raise DTypeError(f"gelu: approximate={approximate!r}; allowed: 'none', 'tanh'")


def thresholded_relu(x, alpha: float = 1.0):
    """ONNX ThresholdedRelu: ``x`` where ``x > alpha``, else 0."""
    return elemwise(x, lambda v: te.if_then_else(v > alpha, v, _zero(v)), "thresholded_relu")


def celu(x, alpha: float = 1.0):
    """ONNX Celu: ``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``; a NaN stays NaN."""
    # Max(a, b) is ``a > b ? a : b``: with the zero first a NaN v is kept (as in
    # onnxruntime and the spec's formula), where ``max(v, 0)`` gave 0. float16 is computed
    # in float32, as onnxruntime does: alpha (a float attribute) may exceed float16.

    def f(v):
        w = v.astype("float32") if v.dtype == "float16" else v
        r = te.max(_zero(w), w) + te.min((te.exp(w * (1.0 / alpha)) - 1.0) * alpha, _zero(w))
        return r.astype(v.dtype) if r.dtype != v.dtype else r

    return elemwise(x, f, "celu")


def shrink(x, bias: float = 0.0, lambd: float = 0.5):
    """ONNX Shrink: ``x + bias`` below ``-lambd``, ``x - bias`` above ``lambd``, else 0."""

    def f(v):
        b = te.const(bias, v.dtype)
        return te.if_then_else(v < -lambd, v + b, te.if_then_else(v > lambd, v - b, _zero(v)))

    return elemwise(x, f, "shrink")


def isinf(x, detect_negative: int = 1, detect_positive: int = 1):
    """ONNX IsInf of ``x``: bool, true at +inf (``detect_positive``) and -inf
    (``detect_negative``)."""
    if not dt.is_float(x.dtype):
        return elemwise(x, lambda v: te.const(False, "bool"), "isinf")
    inf = float("inf")
    conds = []
    if detect_positive:
        conds.append(lambda v: te.equal(v, inf))
    if detect_negative:
        conds.append(lambda v: te.equal(v, -inf))
    if not conds:
        return elemwise(x, lambda v: te.const(False, "bool"), "isinf")
    return elemwise(x, lambda v: te.any(*[c(v) for c in conds]), "isinf")


def clip(x, min=None, max=None):  # noqa: A002 (ONNX attribute names)
    """ONNX Clip: ``x`` limited to ``[min, max]``; ``None`` leaves that side unbounded."""

    def f(v):
        # Max(a, b) is ``a > b ? a : b``: with the limit first, a NaN v stays NaN (as in
        # onnxruntime), where ``max(v, lo)`` gave lo. The same one instruction.
        if min is not None:
            v = te.max(te.const(min, x.dtype), v)
        if max is not None:
            v = te.min(te.const(max, x.dtype), v)
        return v

    return elemwise(x, f, "clip")


def cast_scalar(v, dtype: str, saturate: bool = True, round_mode: str = "up"):
    """``v`` converted to ``dtype`` as ONNX Cast does (to bool: ``v != 0``); from or to a
    small type by :func:`.small_types.convert`, which alone reads ``saturate`` and
    ``round_mode``."""
    dtype = dt.check_dtype(dtype, "cast: dtype")
    if dt.is_small(dtype) or dt.is_small(v.dtype):
        return small_types.convert(v, dtype, saturate=saturate, round_mode=round_mode)
    if dtype == "bool" and v.dtype != "bool":
        return te.not_equal(v, te.const(0, v.dtype))
    return v.astype(dtype)


def cast(x, dtype: str, saturate: bool = True, round_mode: str = "up"):
    """ONNX Cast of ``x`` to ``dtype`` (floats to integers truncate toward zero; the small
    types as :mod:`.small_types` says: ``saturate`` clamps a float8 or float4 result past
    the largest finite value to it, ``round_mode`` ("up", "down", "nearest") rounds a
    float8_e8m0fnu result)."""
    return elemwise(x, lambda v: cast_scalar(v, dtype, saturate, round_mode), "cast")


for _name, _fn in [
    ("abs", abs), ("neg", neg), ("exp", exp), ("log", log), ("sqrt", sqrt),
    ("reciprocal", reciprocal), ("tanh", tanh), ("sigmoid", sigmoid), ("relu", relu),
    ("erf", erf), ("floor", floor), ("ceil", ceil), ("round", round), ("sin", sin),
    ("cos", cos), ("sign", sign), ("not", logical_not), ("softplus", softplus),
    ("softsign", softsign), ("hard_swish", hard_swish), ("mish", mish), ("isnan", isnan),
    ("identity", identity), ("hard_sigmoid", hard_sigmoid), ("leaky_relu", leaky_relu),
    ("elu", elu), ("selu", selu), ("gelu", gelu), ("isinf", isinf), ("clip", clip),
    ("cast", cast), ("tan", tan), ("sinh", sinh), ("cosh", cosh), ("asinh", asinh),
    ("acosh", acosh), ("atanh", atanh), ("thresholded_relu", thresholded_relu),
    ("celu", celu), ("shrink", shrink),
]:
    register_llvm(_name, _fn, schedule_injective)
