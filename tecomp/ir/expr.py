"""Expression nodes, shared by tensor expressions (``te``) and the loop IR.

Every node is an immutable dataclass compared by identity (so nodes are hashable and
Python's ``==`` keeps identity semantics; ``te.equal`` builds an equality expression).
Arithmetic operators on expressions build new nodes; a Python number in an expression
takes the dtype of the other operand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import DTypeError, TecompError
from . import dtype as dt
from . import semantics


class Node:
    """Base class of IR nodes (expressions and statements).

    ``child_fields`` names, in order, the fields that hold the node's child expressions or
    statements (or tuples of them); visitors and mutators walk exactly these. Other fields
    (a loop's variable, a load's buffer, a reduction's axes) are not children.
    """

    __slots__ = ()
    child_fields: tuple = ()


class ExprOp:
    """Operator overloads shared by expressions, iteration variables and tensors.

    An operand that is not a :class:`PrimExpr` (an iteration variable, a tensor of ``te``)
    defines ``_as_scalar()``: the scalar expression it stands for in arithmetic.
    """

    __slots__ = ()

    def __add__(self, other):
        return binary(Add, self, other)

    def __radd__(self, other):
        return binary(Add, other, self)

    def __sub__(self, other):
        return binary(Sub, self, other)

    def __rsub__(self, other):
        return binary(Sub, other, self)

    def __mul__(self, other):
        return binary(Mul, self, other)

    def __rmul__(self, other):
        return binary(Mul, other, self)

    def __truediv__(self, other):
        return binary(Div, self, other)

    def __rtruediv__(self, other):
        return binary(Div, other, self)

    def __floordiv__(self, other):
        return binary(FloorDiv, self, other)

    def __rfloordiv__(self, other):
        return binary(FloorDiv, other, self)

    def __mod__(self, other):
        return binary(FloorMod, self, other)

    def __rmod__(self, other):
        return binary(FloorMod, other, self)

    def __pow__(self, other):
        a, b = match_dtypes(self, other, "**")
        return Call(a.dtype, "pow", (a, b))

    def __rpow__(self, other):
        a, b = match_dtypes(other, self, "**")
        return Call(a.dtype, "pow", (a, b))

    def __neg__(self):
        e = as_expr(self)
        return binary(Sub, make_const(0, e.dtype), e)

    def __lt__(self, other):
        return binary(LT, self, other)

    def __le__(self, other):
        return binary(LE, self, other)

    def __gt__(self, other):
        return binary(GT, self, other)

    def __ge__(self, other):
        return binary(GE, self, other)

    def __and__(self, other):
        return logical(And, self, other)

    def __rand__(self, other):
        return logical(And, other, self)

    def __or__(self, other):
        return logical(Or, self, other)

    def __ror__(self, other):
        return logical(Or, other, self)

    def __invert__(self):
        e = as_expr(self)
        if e.dtype != "bool":
            raise DTypeError(f"~ needs a bool expression, got {e.dtype}")
        return Not(e)

    def __bool__(self):
        raise TecompError(
            "an expression has no truth value while the program is being built; "
            "use te.if_then_else / te.all instead of Python 'if' / 'and'"
        )

    def astype(self, dtype):
        return cast(dt.check_dtype(dtype), self)

    __hash__ = object.__hash__


class PrimExpr(ExprOp, Node):
    """Base class of scalar expressions. ``dtype`` names the value type. Their text form
    (``str``) comes from :mod:`tecomp.ir.printer`."""

    __slots__ = ()
    dtype: str

    def __repr__(self):
        return f"<{type(self).__name__} {self}>"

    def __int__(self):
        raise TypeError(
            f"int() of the expression {self} ({self.dtype}): only an integer constant has "
            f"a Python value; a symbolic size is known when the function is called"
        )


def _node(cls):
    """Decorate an IR node class: frozen, compared by identity, with slots."""
    return dataclass(frozen=True, eq=False, repr=False, slots=True)(cls)


# ---- leaves -------------------------------------------------------------------------------


@_node
class Var(PrimExpr):
    """A scalar variable called ``name`` of ``dtype`` (loop variable, symbolic size, let
    binding); variables compare by identity, not by name."""

    name: str
    dtype: str = "int32"


@_node
class IntImm(PrimExpr):
    """An integer or bool constant; ``int()`` and indexing take its value."""

    value: int
    dtype: str = "int32"

    def __int__(self):
        return int(self.value)

    def __index__(self):
        return int(self.value)


@_node
class FloatImm(PrimExpr):
    """A floating point constant; ``float()`` takes its value."""

    value: float
    dtype: str = "float32"

    def __float__(self):
        return float(self.value)


@_node
class StringImm(PrimExpr):
    """A string constant (only as an argument of intrinsic calls)."""

    value: str
    dtype: str = "handle"


# ---- unary / binary ------------------------------------------------------------------------


@_node
class Cast(PrimExpr):
    """Convert ``value`` to ``dtype`` (float->int truncates toward zero, as in C)."""

    child_fields = ("value",)

    dtype: str
    value: PrimExpr


@_node
class BinaryOp(PrimExpr):
    """Base class of the arithmetic operators on ``a`` and ``b``."""

    child_fields = ("a", "b")

    a: PrimExpr
    b: PrimExpr
    dtype: str


@_node
class Add(BinaryOp):
    """a + b (integers wrap)."""


@_node
class Sub(BinaryOp):
    """a - b."""


@_node
class Mul(BinaryOp):
    """a * b."""


@_node
class Div(BinaryOp):
    """a / b, floating point only."""


@_node
class FloorDiv(BinaryOp):
    """Integer division rounding toward negative infinity (Python's //)."""


@_node
class FloorMod(BinaryOp):
    """a - b * floor(a / b): the result has the sign of b (Python's %)."""


@_node
class Min(BinaryOp):
    """The smaller of a and b."""


@_node
class Max(BinaryOp):
    """The larger of a and b."""


@_node
class CmpOp(PrimExpr):
    """Base class of comparisons and logical operators on ``a`` and ``b``."""

    child_fields = ("a", "b")

    a: PrimExpr
    b: PrimExpr
    dtype: str = "bool"


@_node
class EQ(CmpOp):
    """a == b."""


@_node
class NE(CmpOp):
    """a != b."""


@_node
class LT(CmpOp):
    """a < b."""


@_node
class LE(CmpOp):
    """a <= b."""


@_node
class GT(CmpOp):
    """a > b."""


@_node
class GE(CmpOp):
    """a >= b."""


@_node
class And(CmpOp):
    """Logical and of two bools."""


@_node
class Or(CmpOp):
    """Logical or of two bools."""


@_node
class Not(PrimExpr):
    """Logical not of a bool."""

    child_fields = ("a",)

    a: PrimExpr
    dtype: str = "bool"


@_node
class Select(PrimExpr):
    """``true_value`` if ``cond`` else ``false_value``; only the chosen branch is evaluated,
    so a branch may read memory that is only valid when it is chosen (padding)."""

    child_fields = ("cond", "true_value", "false_value")

    cond: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: str


@_node
class Let(PrimExpr):
    """``body`` with ``var`` bound to ``value``."""

    child_fields = ("value", "body")

    var: Var
    value: PrimExpr
    body: PrimExpr
    dtype: str


@_node
class Call(PrimExpr):
    """A pure math intrinsic by name: exp, log, sqrt, rsqrt, tanh, sigmoid, erf, fabs,
    floor, ceil, round, pow, trunc."""

    child_fields = ("args",)

    dtype: str
    name: str
    args: tuple


@_node
class Check(PrimExpr):
    """``cond`` (a bool), checked at run time: where it is false, the call's error record
    gets ``message`` with ``{value}`` replaced by ``value`` (an integer), unless an earlier
    failure of the same call holds it, and the result is false. Evaluating a ``Check`` has
    this effect, so it is never evaluated speculatively (like a load)."""

    child_fields = ("cond", "value")

    cond: PrimExpr
    value: PrimExpr
    message: str
    dtype: str = "bool"


# ---- memory (loop IR) ----------------------------------------------------------------------


@_node
class Load(PrimExpr):
    """Element ``index`` of the flat buffer ``buffer``."""

    child_fields = ("index",)

    buffer: Any  # tecomp.ir.buffer.Buffer
    index: PrimExpr
    dtype: str


# ---- tensor expressions (te) ---------------------------------------------------------------


@_node
class Range:
    """The half-open interval [min, min + extent)."""

    min: PrimExpr
    extent: PrimExpr

    def __str__(self):
        return f"range(min={self.min}, ext={self.extent})"


@_node
class IterVar(ExprOp):
    """An iteration variable of a computation: a data-parallel axis, a reduction axis or a
    GPU thread index. ``var`` is the variable it binds; ``dom`` its range (None for thread
    axes, whose range comes from the loop they are bound to); ``iter_type`` is
    ``"data_par"``, ``"reduce"`` or ``"thread"``, and ``thread_tag`` names the thread index
    (``"threadIdx.x"``, ...)."""

    dom: Range | None
    var: Var
    iter_type: str  # "data_par" | "reduce" | "thread"
    thread_tag: str = ""

    @property
    def name(self):
        return self.var.name

    @property
    def dtype(self):
        return self.var.dtype

    def _as_scalar(self) -> Var:
        return self.var

    def __str__(self):
        return self.var.name

    def __repr__(self):
        return f"IterVar({self.var.name}, {self.dom}, {self.iter_type})"


@_node
class CommReducer:
    """A commutative reducer called ``name``: ``result`` combines ``lhs`` (accumulator)
    with ``rhs``; ``identity`` are the starting values (``te.comm_reducer`` makes one)."""

    lhs: tuple
    rhs: tuple
    result: tuple
    identity: tuple
    name: str = "reduce"


@_node
class Reduce(PrimExpr):
    """Reduction of ``source`` over ``axis`` with ``combiner``; ``value_index`` picks the
    output of a multi-value (tuple) reduction. ``condition`` masks the reduced points."""

    child_fields = ("source", "condition", "init")

    combiner: CommReducer
    source: tuple
    axis: tuple
    condition: PrimExpr
    value_index: int
    dtype: str
    init: tuple = ()


@_node
class ProducerLoad(PrimExpr):
    """Read of a tensor element ``tensor[indices]`` inside a te compute body."""

    child_fields = ("indices",)

    tensor: Any  # a producer's output with .name (te's Tensor)
    indices: tuple
    dtype: str


# ---- construction helpers ------------------------------------------------------------------


def make_const(value, dtype: str) -> PrimExpr:
    """A constant of ``dtype`` (bool, integer or float)."""
    if dt.is_float(dtype):
        return FloatImm(float(value), dtype)
    if dtype == "bool":
        return IntImm(int(bool(value)), "bool")
    return IntImm(int(value), dtype)


def as_expr(value, dtype: str | None = None) -> PrimExpr:
    """Convert a Python number, bool or iteration variable to an expression.

    A Python int becomes int32 (int64 if it does not fit) unless ``dtype`` is given.
    """
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, ExprOp):
        return value._as_scalar()
    if isinstance(value, bool):
        return IntImm(int(value), dtype or "bool")
    if isinstance(value, int) or _is_numpy_int(value):
        value = int(value)
        if dtype is None:
            dtype = "int32" if -(2**31) <= value < 2**31 else "int64"
        return make_const(value, dtype)
    if isinstance(value, float) or _is_numpy_float(value):
        return FloatImm(float(value), dtype or "float32")
    raise TypeError(f"cannot use {value!r} of type {type(value).__name__} as an expression")


def _is_numpy_int(v):
    return type(v).__module__ == "numpy" and "int" in type(v).__name__


def _is_numpy_float(v):
    return type(v).__module__ == "numpy" and "float" in type(v).__name__


def _is_python_number(v):
    return isinstance(v, (int, float, bool)) or _is_numpy_int(v) or _is_numpy_float(v)


def match_dtypes(a, b, op: str):
    """Convert both operands to expressions of one dtype, or raise a DTypeError.

    A Python number takes the other side's dtype (a Python float on an integer side is an
    error, it would truncate). Integers of different widths widen to the wider one; any
    other mix (int with float, float16 with float32) needs an explicit ``astype``.
    """
    if _is_python_number(a) and not _is_python_number(b):
        b = as_expr(b)
        return _const_like(a, b.dtype, op), b
    if _is_python_number(b) and not _is_python_number(a):
        a = as_expr(a)
        return a, _const_like(b, a.dtype, op)
    a, b = as_expr(a), as_expr(b)
    if a.dtype == b.dtype:
        return a, b
    if dt.is_int(a.dtype) and dt.is_int(b.dtype):
        wide = a.dtype if dt.bits(a.dtype) >= dt.bits(b.dtype) else b.dtype
        return cast(wide, a), cast(wide, b)
    raise DTypeError(
        f"operands of '{op}' have different dtypes {a.dtype} ({a}) and {b.dtype} ({b}); "
        f"convert one explicitly with .astype(...)"
    )


def _const_like(value, dtype: str, op: str) -> PrimExpr:
    if (isinstance(value, float) or _is_numpy_float(value)) and not dt.is_float(dtype):
        raise DTypeError(
            f"'{op}' mixes the float constant {value} with a {dtype} expression, which "
            f"would truncate it; convert the expression with .astype('float32') first"
        )
    if dtype == "bool" and not isinstance(value, bool):
        raise DTypeError(f"'{op}' mixes the number {value} with a bool expression")
    return make_const(value, dtype)


def binary(cls, a, b) -> PrimExpr:
    """Build ``cls(a, b)`` with dtype checks and folding of integer constants (to the value
    the generated code computes, see :mod:`tecomp.ir.semantics`)."""
    name = cls.__name__
    a, b = match_dtypes(a, b, _OP_SYMBOL.get(name, name))
    d = a.dtype
    if issubclass(cls, CmpOp):
        if d == "bool" and cls not in (EQ, NE):
            raise DTypeError(f"'{_OP_SYMBOL[name]}' compares bools; use te.equal / & / | instead")
        return cls(a, b)
    if d == "bool":
        raise DTypeError(f"arithmetic '{_OP_SYMBOL.get(name, name)}' on bool expressions")
    if cls is Div and not dt.is_float(d):
        raise DTypeError(
            f"'/' on {d} expressions ({a} / {b}); use // for floor division or convert "
            f"to float with .astype('float32')"
        )
    if cls in (FloorDiv, FloorMod) and not dt.is_int(d):
        if cls is FloorMod:
            raise DTypeError(f"'%' needs integer operands, got {d}")
        return Call(d, "floor", (Div(a, b, d),))
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        folded = semantics.int_binary(_OP_SYMBOL[name], a.value, b.value, d)
        if folded is not None:
            return IntImm(folded, d)
    if dt.is_int(d):
        if cls is Add:
            if _is_const(a, 0):
                return b
            if _is_const(b, 0):
                return a
        elif cls is Sub and _is_const(b, 0):
            return a
        elif cls is Mul:
            if _is_const(a, 1):
                return b
            if _is_const(b, 1):
                return a
            if _is_const(a, 0) or _is_const(b, 0):
                return make_const(0, d)
        elif cls is FloorDiv and _is_const(b, 1):
            return a
        elif cls is FloorMod and _is_const(b, 1):
            return make_const(0, d)
    return cls(a, b, d)


def logical(cls, a, b) -> PrimExpr:
    a, b = as_expr(a), as_expr(b)
    if a.dtype != "bool" or b.dtype != "bool":
        sym = "&" if cls is And else "|"
        raise DTypeError(f"'{sym}' needs bool operands, got {a.dtype} and {b.dtype}")
    return cls(a, b)


def cast(dtype: str, value) -> PrimExpr:
    value = as_expr(value)
    if value.dtype == dtype:
        return value
    if isinstance(value, IntImm) and not dt.is_float(dtype):
        return make_const(value.value, dtype)
    if isinstance(value, (IntImm, FloatImm)) and dt.is_float(dtype):
        return make_const(value.value, dtype)
    return Cast(dtype, value)


def _is_const(e, v) -> bool:
    return isinstance(e, IntImm) and e.value == v


def const_value(e):
    """The Python value of a constant expression, or None."""
    if isinstance(e, (IntImm, FloatImm)):
        return e.value
    return None


_OP_SYMBOL = {
    "Add": "+",
    "Sub": "-",
    "Mul": "*",
    "Div": "/",
    "FloorDiv": "//",
    "FloorMod": "%",
    "Min": "min",
    "Max": "max",
    "EQ": "==",
    "NE": "!=",
    "LT": "<",
    "LE": "<=",
    "GT": ">",
    "GE": ">=",
    "And": "&&",
    "Or": "||",
}

OP_SYMBOL = _OP_SYMBOL

__all__ = [
    n
    for n in dir()
    if not n.startswith("_") and n not in ("annotations", "field", "Any", "semantics")
]
