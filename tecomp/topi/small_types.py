"""Conversions from and to the small types: 8- and 4-bit floats, 4- and 2-bit integers.

A kernel holds a value of a small type (``tecomp.ir.dtype.SMALL``) as its code in one
byte, as ml_dtypes lays out its arrays (a 4-bit integer's code is its two's complement in
the low bits: ``int4`` -1 is the byte 15). Nothing computes in these types; every
operator that reads or writes one converts here, with integer operations on the bits, so
Cast, QuantizeLinear and DequantizeLinear round alike:

- **decode** (:func:`decode`): a code to the float32 value it denotes (every small float
  is exactly a float32) or to the int32 value of a small integer. NaN codes decode to the
  quiet NaN of their sign bit, as ml_dtypes does.
- **encode** (:func:`encode`): a float, integer or bool to a code, as ONNX Cast-25 and
  its reference define it:

  * floats (``float8_e4m3fn``, ``float8_e4m3fnuz``, ``float8_e5m2``,
    ``float8_e5m2fnuz``, ``float4_e2m1fn``) round to nearest, ties to even. A magnitude
    past the largest finite value is that value with ``saturate`` (ONNX's default;
    infinities too), and otherwise the type's overflow code: infinity for ``e5m2``, NaN for
    the others. ``fnuz`` types have no -0 (a negative value that rounds to zero is +0) and
    one NaN, ``0x80``. ``float4_e2m1fn`` has neither infinity nor NaN: it always
    saturates, and NaN becomes a zero of the opposite sign (ml_dtypes' rule).
  * ``float8_e8m0fnu`` (a power of two, ``2 ** (code - 127)``; ``0xFF`` is NaN) keeps the
    float32 exponent and rounds the fraction by ``round_mode`` as ONNX's reference does:
    ``"up"`` (the default) adds one to the exponent when any fraction bit is set,
    ``"down"`` drops the fraction, ``"nearest"`` adds one when the fraction is at least a
    half (below the normal range: more than a half). The sign is ignored; NaN and
    infinity give ``0xFF``; with ``saturate`` the exponent stops at ``0xFE``.
  * integers (``int4``, ``uint4``, ``int2``, ``uint2``) keep the low bits (they wrap, as
    numpy's and ml_dtypes' casts do); a float is truncated toward zero first, a NaN or
    infinity (or a float beyond int64) giving 0.

Sources of float64 and 64-bit integers round once, from float64's bits; the other sources
are exact in float32 and round from its bits.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import te
from ..errors import DTypeError
from ..ir import dtype as dt
from ..te.intrin import bitwise, reinterpret

__all__ = ["FLOATS", "INTEGERS", "ROUND_MODES", "FloatFormat", "IntFormat", "convert",
           "decode", "encode"]

#: How ``float8_e8m0fnu`` rounds a fraction (ONNX Cast's ``round_mode``).
ROUND_MODES = ("up", "down", "nearest")


@dataclass(frozen=True)
class FloatFormat:
    """A small float: ``sign | exponent | mantissa``, value ``2 ** (e - bias) * 1.m``
    (``0.m * 2 ** (1 - bias)`` where ``e`` is 0). ``overflow`` is the magnitude code a
    value past the largest finite one gets without saturation; ``nan`` the magnitude
    code of NaN (None: the type has none); ``fnuz``: no -0, and NaN is the code ``0x80``;
    ``inf``: the largest exponent field with a zero mantissa is infinity."""

    exponent_bits: int
    mantissa_bits: int
    bias: int
    max_code: int
    overflow: int
    nan: int | None
    fnuz: bool = False
    inf: bool = False

    @property
    def sign_weight(self) -> int:
        return 1 << (self.exponent_bits + self.mantissa_bits)


@dataclass(frozen=True)
class IntFormat:
    """A small integer of ``bits`` bits, two's complement where ``signed``."""

    bits: int
    signed: bool


#: The small floats but ``float8_e8m0fnu`` (its own rules, see the module text).
FLOATS = {
    "float8_e4m3fn": FloatFormat(4, 3, 7, max_code=0x7E, overflow=0x7F, nan=0x7F),
    "float8_e4m3fnuz": FloatFormat(4, 3, 8, max_code=0x7F, overflow=0x80, nan=0x80,
                                   fnuz=True),
    "float8_e5m2": FloatFormat(5, 2, 15, max_code=0x7B, overflow=0x7C, nan=0x7E, inf=True),
    "float8_e5m2fnuz": FloatFormat(5, 2, 16, max_code=0x7F, overflow=0x80, nan=0x80,
                                   fnuz=True),
    "float4_e2m1fn": FloatFormat(2, 1, 1, max_code=0x7, overflow=0x7, nan=None),
}
E8M0 = "float8_e8m0fnu"
INTEGERS = {"int4": IntFormat(4, True), "uint4": IntFormat(4, False),
            "int2": IntFormat(2, True), "uint2": IntFormat(2, False)}

#: A source float's bits: (unsigned and signed integer of its width, mantissa bits, bias).
_SOURCE_BITS = {"float32": ("uint32", "int32", 23, 127), "float64": ("uint64", "int64", 52, 1023)}
_QUIET_NAN32 = 0x7FC00000
_INF32 = 0x7F800000


def _u32(value: int):
    return te.const(value, "uint32")


def _code(v):
    """The code of small-typed ``v`` as a uint32."""
    return reinterpret(v, "uint8").astype("uint32")


def _from_code(code, dtype: str):
    """The value of small type ``dtype`` whose code is ``code`` (an integer below 256)."""
    return reinterpret(code.astype("uint8"), dtype)


def decode(v):
    """The value of ``v``, an expression of a small type: float32 for a small float
    (exact), int32 for a small integer."""
    d = v.dtype
    if d in INTEGERS:
        fmt = INTEGERS[d]
        code = bitwise("bitwise_and", _code(v), _u32((1 << fmt.bits) - 1)).astype("int32")
        if not fmt.signed:
            return code
        half = 1 << (fmt.bits - 1)
        return te.if_then_else(code >= half, code - (1 << fmt.bits), code)
    if d == E8M0:
        code = _code(v)
        # 2 ** (code - 127): the float32 exponent field, but code 0 is float32's
        # subnormal 2 ** -127 and 0xFF is NaN.
        bits = te.if_then_else(te.equal(code, 0), _u32(1 << 22), code * (1 << 23))
        bits = te.if_then_else(te.equal(code, 0xFF), _u32(_QUIET_NAN32), bits)
        return reinterpret(bits, "float32")
    if d not in FLOATS:
        raise DTypeError(f"decode: {v} is {d}; allowed: {', '.join(dt.SMALL)}")
    fmt = FLOATS[d]
    m_bits = fmt.mantissa_bits
    code = _code(v)
    sign = code // fmt.sign_weight
    magnitude = code % fmt.sign_weight
    exponent = magnitude // (1 << m_bits)
    mantissa = magnitude % (1 << m_bits)
    normal = (exponent + (127 - fmt.bias)) * (1 << 23) + mantissa * (1 << (23 - m_bits))
    # 0.m * 2 ** (1 - bias): exact in float32, its bits taken from the float.
    subnormal = reinterpret(mantissa.astype("float32")
                            * te.const(2.0 ** (1 - fmt.bias - m_bits), "float32"), "uint32")
    bits = te.if_then_else(te.equal(exponent, 0), subnormal, normal)
    top = (1 << fmt.exponent_bits) - 1
    if fmt.inf:
        bits = te.if_then_else(te.equal(exponent, top),
                               te.if_then_else(te.equal(mantissa, 0), _u32(_INF32),
                                               _u32(_QUIET_NAN32)), bits)
    elif fmt.fnuz:
        bits = te.if_then_else(te.equal(code, 0x80), _u32(_QUIET_NAN32), bits)
    elif fmt.nan is not None:
        bits = te.if_then_else(te.equal(magnitude, fmt.nan), _u32(_QUIET_NAN32), bits)
    return reinterpret(bits + sign * (1 << 31), "float32")


def _source_float(v):
    """``v`` as the float whose bits the encoders round: float64 for float64 and 64-bit
    integers, float32 for everything else (exact)."""
    if v.dtype in dt.SMALL:
        v = decode(v)
    if v.dtype in ("float64", "int64", "uint64"):
        return v.astype("float64")
    return v.astype("float32")


def _encode_float(v, fmt: FloatFormat, saturate: bool):
    """The code (uint32) of the small float ``fmt`` nearest to float ``v``."""
    f = v.dtype
    unsigned, signed, m_src, bias_src = _SOURCE_BITS[f]
    width = dt.bits(f)
    bits = reinterpret(v, unsigned)
    sign = bits // (1 << (width - 1))
    magnitude = bits % (1 << (width - 1))
    inf_bits = ((1 << (width - m_src - 1)) - 1) << m_src
    is_nan = magnitude > inf_bits
    m = fmt.mantissa_bits
    # Past 2 ** (emax + 2) every value overflows: clamping there keeps the scaling below
    # in range (infinity included).
    emax = (1 << fmt.exponent_bits) - 1 - fmt.bias
    clamped = te.min(magnitude, te.const((bias_src + emax + 2) << m_src, unsigned))
    # The exponent of the value (a subnormal source's is the smallest normal one), and
    # that of the target's unit in the last place there (its subnormals share one).
    exponent = te.max(((clamped // (1 << m_src)).astype(signed)), 1) - bias_src
    ulp = te.max(exponent, 1 - fmt.bias) - m
    # Scaled by 2 ** -ulp (exact: a power of two, no overflow after the clamp), the value
    # rounds to nearest even by roundeven: the target's significand, implicit bit included.
    scale = reinterpret(((bias_src - ulp) * (1 << m_src)).astype(unsigned), f)
    significand = te.round(reinterpret(clamped, f) * scale).astype(signed)
    # A carry out of the significand moves into the exponent field, as it should.
    code = te.max(exponent + (fmt.bias - 1), 0) * (1 << m) + significand
    past = _u32(fmt.max_code if saturate else fmt.overflow)
    code = te.if_then_else(code > fmt.max_code, past, code.astype("uint32"))
    if fmt.nan is None:
        # No NaN: ml_dtypes gives a zero of the opposite sign.
        return te.if_then_else(is_nan, (1 - sign).astype("uint32") * fmt.sign_weight,
                               code + sign.astype("uint32") * fmt.sign_weight)
    code = te.if_then_else(is_nan, _u32(fmt.nan), code)
    signed_code = code + sign.astype("uint32") * fmt.sign_weight
    if fmt.fnuz:
        # One zero and one NaN (0x80), whatever the sign.
        return te.if_then_else(te.any(te.equal(code, 0), te.equal(code, 0x80)), code,
                               signed_code)
    return signed_code


def _encode_e8m0(v, saturate: bool, round_mode: str):
    """The ``float8_e8m0fnu`` code (uint32) of float ``v`` (through float32, as ONNX's
    reference converts)."""
    bits = reinterpret(v.astype("float32"), "uint32")
    exponent = (bits // (1 << 23)) % 256
    fraction = bits % (1 << 23)
    if round_mode == "up":
        up = fraction > 0
    elif round_mode == "nearest":
        # The reference's rule: the first dropped bit set, and (for a normal value) any
        # other bit or, below the normal range, a further dropped bit.
        half = fraction >= (1 << 22)
        up = te.all(half, te.any(exponent > 0, fraction % (1 << 22) > 0))
    else:
        up = None
    if up is not None and saturate:
        up = te.all(up, exponent < 0xFE)
    code = exponent if up is None else exponent + te.if_then_else(up, _u32(1), _u32(0))
    return te.if_then_else(te.equal(exponent, 0xFF), _u32(0xFF), te.min(code, _u32(0xFF)))


def _encode_int(v, fmt: IntFormat):
    """The code (uint32) of the small integer ``fmt`` that wraps integer, bool or float
    ``v``."""
    if dt.is_float(v.dtype):
        wide = v.astype("float64") if v.dtype != "float64" else v
        finite = te.abs(wide) < te.const(2.0 ** 63, "float64")  # false for NaN
        v = te.if_then_else(finite, wide, te.const(0.0, "float64")).astype("int64")
    elif v.dtype == "bool":
        v = v.astype("int32")
    return te.floormod(v, 1 << fmt.bits).astype("uint32")


def encode(v, dtype: str, *, saturate: bool = True, round_mode: str = "up"):
    """``v`` (any dtype, small ones included) converted to the small type ``dtype``, as ONNX
    Cast with ``saturate`` and ``round_mode`` does (see the module text)."""
    if round_mode not in ROUND_MODES:
        raise DTypeError(f"round_mode={round_mode!r}; allowed: {', '.join(ROUND_MODES)}")
    if v.dtype == dtype:
        return v
    if dtype in INTEGERS:
        src = decode(v) if v.dtype in dt.SMALL else v
        return _from_code(_encode_int(src, INTEGERS[dtype]), dtype)
    if dtype == E8M0:
        return _from_code(_encode_e8m0(_source_float(v), saturate, round_mode), dtype)
    if dtype not in FLOATS:
        raise DTypeError(f"encode: dtype={dtype!r}; allowed: {', '.join(dt.SMALL)}")
    return _from_code(_encode_float(_source_float(v), FLOATS[dtype], saturate), dtype)


def convert(v, dtype: str, *, saturate: bool = True, round_mode: str = "up"):
    """ONNX Cast of ``v`` to ``dtype`` where either is a small type: :func:`encode` to a
    small type; from one, its value (:func:`decode`) converted as Cast converts a float32
    or int32 (to bool: not zero)."""
    dtype = dt.check_dtype(dtype, "convert: dtype")
    if dtype in dt.SMALL:
        return encode(v, dtype, saturate=saturate, round_mode=round_mode)
    if v.dtype not in dt.SMALL:
        raise DTypeError(f"convert: neither {v.dtype} nor {dtype} is a small type; allowed: "
                         f"{', '.join(dt.SMALL)}")
    value = decode(v)
    if dtype == "bool":
        return te.not_equal(value, te.const(0, value.dtype))
    return value.astype(dtype)
