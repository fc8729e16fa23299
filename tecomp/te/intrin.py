"""Math intrinsics and small expression builders of the te namespace."""

from __future__ import annotations

from ..errors import DTypeError
from ..ir import dtype as dt
from ..ir import expr as E
from . import reduction

#: Intrinsics that code generators must implement, each float -> float of the same dtype.
FLOAT_INTRINSICS = (
    "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "floor", "ceil", "round",
    "trunc", "fabs", "pow", "fmod", "sin", "cos", "exp2", "log2", "log10", "asin", "acos",
    "atan",
)
#: Intrinsics on the bits of integers, each of the operands' dtype: ``bitwise_and``,
#: ``bitwise_or``, ``bitwise_xor`` (two operands) and ``bitwise_not`` (one).
BITWISE_INTRINSICS = ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not")


def _float_arg(name: str, x) -> E.PrimExpr:
    e = E.as_expr(x)
    if not dt.is_float(e.dtype):
        raise DTypeError(
            f"te.{name} needs a float expression, got {e.dtype} ({e}); convert it with "
            f".astype('float32')"
        )
    return e


def _unary(name):
    def f(x):
        e = _float_arg(name, x)
        return E.Call(e.dtype, name, (e,))

    f.__name__ = name
    f.__doc__ = (f"Elementwise {name} of ``x``, a float expression (a ``DTypeError`` for "
                 f"another dtype: convert it with ``.astype``).")
    return f


exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
erf = _unary("erf")
sin = _unary("sin")
cos = _unary("cos")
asin = _unary("asin")
acos = _unary("acos")
atan = _unary("atan")
exp2 = _unary("exp2")
log2 = _unary("log2")
log10 = _unary("log10")
trunc = _unary("trunc")


def _rounding(name):
    def f(x):
        e = E.as_expr(x)
        if dt.is_int(e.dtype):
            return e
        return E.Call(_float_arg(name, e).dtype, name, (e,))

    f.__name__ = name
    f.__doc__ = f"{name} of ``x``, a float expression (an integer ``x`` is returned unchanged)."
    return f


floor = _rounding("floor")
ceil = _rounding("ceil")
round = _rounding("round")


def abs(x):
    """Absolute value of ``x`` (integers and floats; unsigned and bool ``x`` unchanged)."""
    e = E.as_expr(x)
    if dt.is_float(e.dtype):
        return E.Call(e.dtype, "fabs", (e,))
    if e.dtype == "bool" or not dt.is_signed(e.dtype):
        return e
    return E.Select(E.binary(E.GE, e, 0), e, -e, e.dtype)


def power(x, y):
    """x ** y for floats."""
    a, b = E.match_dtypes(x, y, "power")
    _float_arg("power", a)
    return E.Call(a.dtype, "pow", (a, b))


def fmod(x, y):
    """C's ``fmod(x, y)`` for floats: ``x - n * y`` with ``n`` the quotient ``x / y``
    rounded toward zero, computed exactly (the result has the sign of ``x``; a finite
    ``x`` by an infinite ``y`` is ``x``; an infinite ``x``, a zero ``y`` or a NaN give
    NaN)."""
    a, b = E.match_dtypes(x, y, "fmod")
    _float_arg("fmod", a)
    return E.Call(a.dtype, "fmod", (a, b))


def _integer_arg(name: str, e: E.PrimExpr) -> E.PrimExpr:
    if not dt.is_int(e.dtype):
        raise DTypeError(f"te.{name} needs integer expressions, got {e.dtype} ({e})")
    return e


def bitwise(name: str, *args) -> E.PrimExpr:
    """The bitwise operation ``name`` (one of :data:`BITWISE_INTRINSICS`) of integer
    expressions of one dtype, two's complement for signed ones: ``bitwise_not(x)`` is
    ``~x``, ``bitwise_and(a, b)`` is ``a & b``; the result has the operands' dtype."""
    arity = 1 if name == "bitwise_not" else 2
    if name not in BITWISE_INTRINSICS or len(args) != arity:
        raise DTypeError(f"te.bitwise: {name!r} with {len(args)} operands; allowed: "
                         f"bitwise_not of one, bitwise_and/or/xor of two")
    es = (E.match_dtypes(*args, name) if arity == 2 else (E.as_expr(args[0]),))
    for e in es:
        _integer_arg(name, e)
    return E.Call(es[0].dtype, name, tuple(es))


def reinterpret(x, dtype: str) -> E.PrimExpr:
    """The bits of ``x`` read as ``dtype``, of the same width (``float32`` <-> ``int32``);
    a ``bool`` is one byte, 0 or 1, so it reinterprets to and from 8-bit integers (a
    byte other than 0 is true)."""
    e = E.as_expr(x)
    dtype = dt.check_dtype(dtype, "te.reinterpret: dtype")
    width = {d: 8 if d == "bool" else dt.bits(d) for d in (e.dtype, dtype)}
    if width[e.dtype] != width[dtype]:
        raise DTypeError(f"te.reinterpret: {e.dtype} ({width[e.dtype]} bits) cannot be read "
                         f"as {dtype} ({width[dtype]} bits); the widths must agree")
    if e.dtype == dtype:
        return e
    return E.Call(dtype, "reinterpret", (e,))


def dot4_u8s8(a, b, pairs_fit_int16: bool = False) -> E.PrimExpr:
    """The sum of the four products of the bytes of ``a`` and ``b``, int32 expressions
    each holding four 8-bit values (byte ``i`` is bits ``8i`` to ``8i + 7``), those of
    ``a`` read as uint8 and those of ``b`` as int8: ``sum_i u8(a, i) * s8(b, i)``,
    exact in int32. It is one instruction on CPUs with VNNI (``vpdpbusd``) and two on
    other x86 CPUs where ``pairs_fit_int16`` promises that the sums of bytes 0-1 and
    2-3 fit in int16 for every ``a`` (``|b's bytes| <= 64``); without the promise they
    are computed exactly there at twice the cost. Breaking the promise gives an
    unspecified value."""
    ea, eb = E.as_expr(a), E.as_expr(b)
    for e in (ea, eb):
        if e.dtype != "int32":
            raise DTypeError(f"te.dot4_u8s8 needs int32 words of four bytes, got {e.dtype} "
                             f"({e})")
    name = "dot4_u8s8_pairs_fit_int16" if pairs_fit_int16 else "dot4_u8s8"
    return E.Call("int32", name, (ea, eb))


def dot2_bf16(a, b) -> E.PrimExpr:
    """The float32 sum of the two products of the bfloat16 halves of ``a`` and ``b``,
    int32 expressions each holding two bfloat16 values (the low half is the first):
    ``f32(a.hi) * f32(b.hi) + f32(a.lo) * f32(b.lo)``. Each product is exact in float32;
    an ``acc + dot2_bf16(a, b)`` adds the high product to ``acc`` first, then the low
    one, each sum rounded to nearest. It is one instruction per vector on CPUs with
    AVX512-BF16 (``vdpbf16ps``, which also flushes subnormal operands and results to
    zero) or AArch64's FEAT_BF16 (``bfdot``, which adds the two products first, their
    sum rounded to odd, so a result may differ in the last bit) and four elsewhere."""
    ea, eb = E.as_expr(a), E.as_expr(b)
    for e in (ea, eb):
        if e.dtype != "int32":
            raise DTypeError(f"te.dot2_bf16 needs int32 words of two bfloat16, got {e.dtype} "
                             f"({e})")
    return E.Call("float32", "dot2_bf16", (ea, eb))


def bf16_pair(low, high) -> E.PrimExpr:
    """The int32 word holding two bfloat16 expressions: what :func:`dot2_bf16`
    multiplies. Two adjacent elements of a bfloat16 tensor, read as a pair, are one
    32-bit load.

    Parameters
    ----------
    low, high : PrimExpr
        bfloat16 expressions: the word's low and high halves.
    """
    halves = []
    for e in (E.as_expr(low), E.as_expr(high)):
        if e.dtype != "bfloat16":
            raise DTypeError(f"te.bf16_pair needs bfloat16 expressions, got {e.dtype} ({e})")
        halves.append(reinterpret(e, "uint16").astype("uint32"))
    return reinterpret(halves[0] + halves[1] * (1 << 16), "int32")


def floordiv(a, b):
    """``a // b`` rounding toward negative infinity, as Python's ``//`` (what ``//`` on
    integer expressions builds)."""
    return E.binary(E.FloorDiv, a, b)


def floormod(a, b):
    """``a % b`` with the sign of ``b``, as Python's ``%`` (what ``%`` on integer
    expressions builds)."""
    return E.binary(E.FloorMod, a, b)


def truncdiv(a, b):
    """``a / b`` on integers rounding toward zero, as C's ``/``."""
    a, b = E.match_dtypes(a, b, "truncdiv")
    q = E.binary(E.FloorDiv, a, b)
    # floor and trunc differ when the remainder is non-zero and the signs differ.
    fix = E.And(E.binary(E.NE, E.binary(E.FloorMod, a, b), 0),
                E.binary(E.NE, E.binary(E.LT, a, 0), E.binary(E.LT, b, 0)))
    return E.Select(fix, q + 1, q, q.dtype)


def equal(a, b):
    """The bool expression ``a == b`` (Python's ``==`` on expressions compares identity,
    so that nodes stay hashable)."""
    return E.binary(E.EQ, a, b)


def not_equal(a, b):
    """The bool expression ``a != b`` (see :func:`equal`)."""
    return E.binary(E.NE, a, b)


def _binary_or_reduce(name: str, node, a, b, axis, where, init):
    if axis is not None:
        return getattr(reduction, f"_{name}_reducer")(a, axis, where, init)
    if b is None:
        raise TypeError(f"te.{name} takes two expressions, or one expression and axis=")
    return E.binary(node, a, b)


def max(a, b=None, axis=None, where=None, init=None):
    """``max(a, b)`` elementwise, or ``max(expr, axis=k)`` as a reduction.

    Parameters
    ----------
    a, b : PrimExpr
        Two expressions; or ``a`` alone, reduced over ``axis``.
    axis : IterVar or list of IterVar, optional
        Reduce axes (``te.reduce_axis``): ``a`` is reduced over them.
    where : PrimExpr, optional
        A bool condition: the reduction takes only the points where it holds.
    init : PrimExpr, optional
        The value the reduction starts from instead of ``-inf`` (floats) or the
        dtype's smallest value (integers).
    """
    return _binary_or_reduce("max", E.Max, a, b, axis, where, init)


def min(a, b=None, axis=None, where=None, init=None):
    """``min(a, b)`` elementwise, or ``min(expr, axis=k)`` as a reduction.

    Parameters are those of :func:`max`: ``a``, ``b``, ``axis``, ``where`` (the points
    reduced) and ``init`` (the start instead of ``inf`` or the dtype's largest value).
    """
    return _binary_or_reduce("min", E.Min, a, b, axis, where, init)


def if_then_else(cond, t, f):
    """``t`` where ``cond`` holds, else ``f``; only the chosen branch is evaluated."""
    if isinstance(cond, bool):
        # ``i % 2 == 0`` on expressions is Python's identity comparison, i.e. False.
        raise DTypeError(
            f"if_then_else: condition is the Python bool {cond}, not an expression; "
            f"'==' / '!=' on expressions compare identity: use te.equal / te.not_equal")
    c = E.as_expr(cond)
    if c.dtype != "bool":
        raise DTypeError(f"if_then_else: condition {c} has dtype {c.dtype}, must be bool")
    a, b = E.match_dtypes(t, f, "if_then_else")
    return E.Select(c, a, b, a.dtype)


def checked(cond, value, message: str) -> E.PrimExpr:
    """``cond``, checked while the kernel runs: a failure is reported after the call.

    Where ``cond`` is false the kernel records the failure in its call's error record (the
    first failure of a call wins, also across the threads of a parallel loop) and the
    expression is false; where it holds the expression is true. After the kernel
    finishes, the runtime raises :class:`~tecomp.errors.RuntimeCheckError` with
    ``message``, ``{value}`` in it replaced by the int64 ``value`` of the failing point,
    prefixed by the kernel's name. Guard what must not run where the check fails with
    the result, e.g. a load under :func:`if_then_else`, which is evaluated only where its
    condition holds (also in vectorized loops, whose lanes are masked).

    Parameters
    ----------
    cond : PrimExpr
        A bool expression: what must hold.
    value : PrimExpr or int
        An integer expression reported with a failure (the offending index).
    message : str
        What failed, e.g. ``"index {value} is out of range for axis 0 of size 5"``.

    Returns
    -------
    PrimExpr
        A bool expression: ``cond``, with the failure recorded where it is false.

    Raises
    ------
    DTypeError
        If ``cond`` is not a bool expression or ``value`` not an integer one.

    Examples
    --------
    >>> ok = te.checked((i >= -5) & (i < 5), i,
    ...                 "index {value} is out of range for axis 0 of size 5")  # doctest: +SKIP
    >>> te.if_then_else(ok, data[te.if_then_else(i < 0, i + 5, i)], 0.0)        # doctest: +SKIP
    """
    c = E.as_expr(cond)
    if c.dtype != "bool":
        raise DTypeError(f"checked: condition {c} has dtype {c.dtype}, must be bool")
    v = E.as_expr(value)
    if not dt.is_int(v.dtype) or v.dtype == "bool":
        raise DTypeError(f"checked: value {v} has dtype {v.dtype}, must be an integer dtype")
    if not isinstance(message, str):
        raise TypeError(f"checked: message must be a str, got {type(message).__name__}")
    if isinstance(c, E.IntImm) and c.value:
        return c  # holds everywhere: nothing to check
    return E.Check(c, E.cast("int64", v), message)


def all(*conds):
    """Logical and of bool expressions."""
    out = E.as_expr(conds[0])
    for c in conds[1:]:
        out = E.logical(E.And, out, c)
    return out


def any(*conds):
    """Logical or of bool expressions."""
    out = E.as_expr(conds[0])
    for c in conds[1:]:
        out = E.logical(E.Or, out, c)
    return out


def max_value(dtype: str) -> E.PrimExpr:
    """The largest finite value of ``dtype``, as a constant expression of that dtype."""
    d = dt.check_dtype(dtype)
    return E.make_const(dt.max_value(d), d)


def min_value(dtype: str) -> E.PrimExpr:
    """The smallest finite value of ``dtype``, as a constant expression of that dtype."""
    d = dt.check_dtype(dtype)
    return E.make_const(dt.min_value(d), d)
