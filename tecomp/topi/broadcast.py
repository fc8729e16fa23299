"""Binary and ternary operators with numpy broadcasting (ONNX semantics), tagged
``"broadcast"``.

Shapes are aligned at their last dimension; a dimension that is the constant 1 stretches
to the other operand's. Two different symbolic dimensions are taken to be equal (ONNX
requires them to be equal or 1, and a symbolic 1 cannot be told apart at compile time).
"""

from __future__ import annotations

from .. import te
from ..errors import DTypeError, ShapeError
from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.arith import prefer_unclamped
from .cpu_schedule import const_int, schedule_injective
from .register import register_llvm

TAG = "broadcast"


def broadcast_shape(*shapes) -> tuple:
    """The numpy broadcast of ``shapes`` (tuples of ints / expressions).

    Raises
    ------
    ShapeError
        Two constant dimensions differ and neither is 1.
    """
    ndim = max(len(s) for s in shapes)
    out = []
    for pos in range(ndim):
        dims = [s[len(s) - ndim + pos] for s in shapes if len(s) - ndim + pos >= 0]
        dims = [E.as_expr(d) for d in dims]
        big = [d for d in dims if const_int(d) != 1]
        if not big:
            out.append(dims[0])
            continue
        consts = {const_int(d) for d in big if const_int(d) is not None}
        if len(consts) > 1:
            raise ShapeError(
                f"shapes {[tuple(str(d) for d in s) for s in shapes]} do not broadcast: "
                f"dimension {pos - ndim} is {sorted(consts)}; each must be equal or 1")
        const = [d for d in big if const_int(d) is not None]
        # A clamped size (``min(seq, 512)``: a table sliced to the sequence) broadcasts with
        # the size it is checked equal to at run time; the output takes the unclamped one,
        # as the graph types it (``tecomp.graph.ops.broadcast_shapes``).
        out.append(const[0] if const else prefer_unclamped(big))
    return tuple(out)


def broadcast_index(tensor, out_shape, idx) -> tuple:
    """The index of ``tensor`` read at output index ``idx`` under broadcasting."""
    off = len(out_shape) - len(tensor.shape)
    return tuple(
        E.IntImm(0, i.dtype) if const_int(d) == 1 and const_int(out_shape[off + k]) != 1
        else i
        for k, (d, i) in enumerate(zip(tensor.shape, idx[off:]))
    )


def broadcast_compute(fscalar, name: str, *tensors, tag: str = TAG):
    """``out[idx] = fscalar(t0[idx'], t1[idx''], ...)`` over the broadcast shape."""
    shape = broadcast_shape(*[t.shape for t in tensors])

    def body(*idx):
        return fscalar(*[t[broadcast_index(t, shape, idx)] for t in tensors])

    return te.compute(shape, body, name=name, tag=tag)


def _same_dtype(name, a, b):
    if a.dtype != b.dtype:
        raise DTypeError(
            f"{name}: operands have dtypes {a.dtype} and {b.dtype}; ONNX requires one dtype "
            f"(insert a cast)")


def _binary_op(name, fscalar, doc):
    def op(a, b):
        _same_dtype(name, a, b)
        return broadcast_compute(fscalar, name, a, b)

    op.__name__ = name
    op.__doc__ = f"ONNX ``{name}`` with numpy broadcasting: {doc}"
    return op


def _divide(x, y):
    if dt.is_float(x.dtype):
        return x / y
    return te.truncdiv(x, y)  # ONNX integer Div truncates, as C does


def _bool_args(name, fscalar):
    def f(x, y):
        if x.dtype != "bool":
            raise DTypeError(f"{name} needs bool tensors, got {x.dtype}")
        return fscalar(x, y)

    return f


add = _binary_op("add", lambda x, y: x + y, "a + b.")
subtract = _binary_op("subtract", lambda x, y: x - y, "a - b.")
multiply = _binary_op("multiply", lambda x, y: x * y, "a * b.")
divide = _binary_op("divide", _divide, "a / b (integers truncate toward zero).")
def _propagating_nan(better, fplain):
    """``better``'s choice of two values where a NaN in either wins (onnxruntime's Max and
    Min); a plain float ``max(a, b)`` is ``a > b ? a : b``, which drops a NaN in ``a``."""

    def f(x, y):
        if not dt.is_float(x.dtype):
            return fplain(x, y)
        # The operands are bound to variables first: a select between two loads would
        # mask each load by its condition in a vector loop.
        a, b = E.Var("a", x.dtype), E.Var("b", y.dtype)
        pick = te.if_then_else(better(a, b) | te.not_equal(a, a), a, b)
        return E.Let(a, x, E.Let(b, y, pick, pick.dtype), pick.dtype)

    return f


_max = _propagating_nan(lambda x, y: x > y, te.max)
_min = _propagating_nan(lambda x, y: x < y, te.min)

maximum = _binary_op("maximum", _max, "the larger of a and b (NaN if either is).")
minimum = _binary_op("minimum", _min, "the smaller of a and b (NaN if either is).")
equal = _binary_op("equal", te.equal, "a == b (bool).")
less = _binary_op("less", lambda x, y: x < y, "a < b (bool).")
greater = _binary_op("greater", lambda x, y: x > y, "a > b (bool).")
less_equal = _binary_op("less_equal", lambda x, y: x <= y, "a <= b (bool).")
greater_equal = _binary_op("greater_equal", lambda x, y: x >= y, "a >= b (bool).")
logical_and = _binary_op("logical_and", _bool_args("logical_and", lambda x, y: x & y),
                         "a and b.")
logical_or = _binary_op("logical_or", _bool_args("logical_or", lambda x, y: x | y), "a or b.")
logical_xor = _binary_op("logical_xor", _bool_args("logical_xor", te.not_equal),
                         "a xor b.")


def power(a, b):
    """ONNX Pow with broadcasting: ``a ** b`` in ``a``'s dtype (``b`` may differ).

    An integer base is raised in float64 and the result truncated toward zero, as
    onnxruntime converts it (``[2, 3, 10] ** [-0.12, 0.5, 0.3]`` is ``[0, 1, 1]``);
    an integer result below 2**53 is exact in float64, so truncating it loses nothing.
    """

    def f(x, y):
        if dt.is_float(x.dtype):
            return te.power(x, y.astype(x.dtype))
        return te.trunc(te.power(x.astype("float64"), y.astype("float64"))).astype(x.dtype)

    return broadcast_compute(f, "power", a, b)


def mod(a, b, fmod: int = 0):
    """ONNX Mod of ``a`` by ``b`` with broadcasting: the remainder has the divisor's sign
    (``fmod=0``, integers only) or the dividend's (``fmod=1``, C's fmod: a finite ``a``
    by an infinite ``b`` is ``a``)."""
    _same_dtype("mod", a, b)
    if dt.is_float(a.dtype) and not fmod:
        raise DTypeError("mod: float tensors need fmod=1 (ONNX); fmod=0 is for integers")

    def f(x, y):
        if not fmod:
            return x % y
        if dt.is_float(x.dtype):
            return te.fmod(x, y)
        return x - te.truncdiv(x, y) * y

    return broadcast_compute(f, "mod", a, b)


def prelu(x, slope):
    """ONNX PRelu: ``x`` where ``x >= 0``, else ``slope * x`` (``slope`` broadcasts to x)."""
    _same_dtype("prelu", x, slope)
    return broadcast_compute(
        lambda v, s: te.if_then_else(v < te.const(0, v.dtype), v * s, v), "prelu", x, slope)


def where(cond, x, y):
    """ONNX Where: ``x`` where ``cond`` holds, else ``y``, all three broadcast."""
    if cond.dtype != "bool":
        raise DTypeError(f"where: the condition has dtype {cond.dtype}; it must be bool")
    _same_dtype("where", x, y)
    return broadcast_compute(te.if_then_else, "where", cond, x, y)


def _variadic(name, fcombine, doc):
    def op(*tensors):
        if not tensors:
            raise ShapeError(f"{name} needs at least one tensor")
        for t in tensors[1:]:
            _same_dtype(name, tensors[0], t)

        def f(*vals):
            acc = vals[0]
            for v in vals[1:]:
                acc = fcombine(acc, v)
            return acc

        if name != "mean":
            return broadcast_compute(f, name, *tensors)
        if not dt.is_float(tensors[0].dtype):
            raise DTypeError(f"mean needs float tensors, got {tensors[0].dtype}")
        return broadcast_compute(lambda *v: f(*v) * (1.0 / len(v)), name, *tensors)

    op.__name__ = name
    op.__doc__ = f"ONNX ``{name.capitalize()}`` of any number of tensors, broadcast: {doc}"
    return op


sum_n = _variadic("sum", lambda x, y: x + y, "their sum.")
mean_n = _variadic("mean", lambda x, y: x + y, "their mean.")
max_n = _variadic("max", _max, "the largest (NaN if any is).")
min_n = _variadic("min", _min, "the smallest (NaN if any is).")


for _name, _fn in [
    ("add", add), ("subtract", subtract), ("multiply", multiply), ("divide", divide),
    ("maximum", maximum), ("minimum", minimum), ("equal", equal), ("less", less),
    ("greater", greater), ("less_equal", less_equal), ("greater_equal", greater_equal),
    ("logical_and", logical_and), ("logical_or", logical_or), ("logical_xor", logical_xor),
    ("power", power), ("mod", mod), ("prelu", prelu), ("where", where), ("sum", sum_n),
    ("mean", mean_n), ("max", max_n), ("min", min_n),
]:
    register_llvm(_name, _fn, schedule_injective)
