"""Tensor dimensions of the graph IR: a Python ``int`` or a symbolic ``te`` expression.

A symbolic dimension is an integer expression over ``te.var`` symbols (``batch``,
``seq``, ``batch * seq``). Dimensions are kept simplified, so a dimension that folds to
a constant is always an ``int`` and two equal symbolic dimensions print the same.
"""

from __future__ import annotations

import math
import operator

from ..errors import TecompError
from ..ir import expr as E
from ..ir.structural import structural_equal
from ..ir.functor import collect_vars, substitute
from ..ir.arith import product_factors, remove_factors, simplify, simplify_size, size_bounds
from ..ir.arith.analyzer import prove


def normalize(d):
    """``d`` (int, numpy integer or integer expression) simplified, its symbols taken as
    non-negative sizes (:func:`tecomp.ir.arith.simplify_size`): an ``int`` when it folds
    to a constant, else a simplified expression."""
    if isinstance(d, E.PrimExpr):
        s = simplify_size(d)
        return int(s.value) if isinstance(s, E.IntImm) else s
    return int(d)


def provably_nonnegative(d) -> bool:
    """Whether dimension ``d`` is ``>= 0`` for every non-negative value of its symbols."""
    d = normalize(d)
    return d >= 0 if is_static(d) else prove(d >= 0, size_bounds(d))


def is_static(d) -> bool:
    """Whether dimension ``d`` is a known integer."""
    return not isinstance(d, E.PrimExpr)


def equal(a, b) -> bool:
    """Whether two dimensions are provably the same (structurally, after simplification)."""
    a, b = normalize(a), normalize(b)
    if is_static(a) and is_static(b):
        return a == b
    if is_static(a) or is_static(b):
        return False
    return structural_equal(a, b)


def same_shape(a, b) -> bool:
    """Whether shapes ``a`` and ``b`` have the same rank and provably equal dimensions."""
    return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))


def broadcasts_to(shape, target) -> bool:
    """Whether ``shape`` broadcasts to ``target`` (numpy's rules, aligned at the end):
    no more axes, and each of its axes 1 or provably ``target``'s."""
    return len(shape) <= len(target) and all(
        equal(a, 1) or equal(a, b) for a, b in zip(reversed(shape), reversed(target)))


def may_equal(a, b) -> bool:
    """Whether two symbolic dimensions that are not provably equal are still taken to be
    equal, checked when the sizes are known (``tecomp.graph.checks``): they share a
    symbol and do not differ by a constant, as ``seq`` and ``min(seq, 512)`` (a
    position table sliced to the sequence) do, equal while ``seq <= 512``. Dimensions of
    unrelated symbols (``batch`` and ``seq``) are not: a model combining them is reported
    at compile time."""
    a, b = normalize(a), normalize(b)
    if is_static(a) or is_static(b) or is_static(normalize(a - b)):
        return False
    return any(v is u for v in collect_vars(a) for u in collect_vars(b))


def symbols(shape) -> list:
    """The ``te.var`` symbols the dimensions of ``shape`` use, each once, in order."""
    out: list = []
    for d in shape:
        if not is_static(d):
            for v in collect_vars(d):
                if not any(v is u for u in out):
                    out.append(v)
    return out


class _NotArithmetic(Exception):
    """A dimension holds a node :func:`_value` does not evaluate."""


#: The integer operators of dimensions: each node class's function and its Python form.
_INTEGER_OPS = {E.Add: (operator.add, "({} + {})"), E.Sub: (operator.sub, "({} - {})"),
                E.Mul: (operator.mul, "({} * {})"),
                E.FloorDiv: (operator.floordiv, "({} // {})"),
                E.FloorMod: (operator.mod, "({} % {})"), E.Min: (min, "min({}, {})"),
                E.Max: (max, "max({}, {})")}


def _bound(bindings: dict, v) -> int | None:
    """The value ``bindings`` gives symbol ``v``, or None. By identity: two symbols may
    share a name, and == on IR builds an expression."""
    return next((int(n) for u, n in bindings.items() if u is v), None)


def _value(d, bindings: dict) -> int:
    """``d`` evaluated on Python integers: a run with new input shapes evaluates every
    value's shape (a decoder's every step), and substituting and simplifying IR took
    milliseconds a step where this takes microseconds."""
    if isinstance(d, E.IntImm):
        return int(d.value)
    if isinstance(d, E.Var):
        n = _bound(bindings, d)
        if n is None:
            raise _NotArithmetic(d)
        return n
    if type(d) not in _INTEGER_OPS:
        raise _NotArithmetic(d)
    return _INTEGER_OPS[type(d)][0](_value(d.a, bindings), _value(d.b, bindings))


def shapes_evaluator(shapes: list):
    """``f(bindings) -> list of int tuples``: every shape of ``shapes`` evaluated at once,
    as :func:`evaluate` evaluates one dimension, by a Python function generated from the
    dimensions (an executor evaluates every value's shape for each new binding; a
    decoder's every step has one)."""
    return _evaluator(shapes, lambda dims: "(" + "".join(f"{d}, " for d in dims) + ")",
                      lambda bindings: [tuple(evaluate(d, bindings) for d in shape)
                                        for shape in shapes])


def sizes_evaluator(shapes: list):
    """``f(bindings) -> list of ints``: the number of elements of every shape of
    ``shapes``, as :func:`shapes_evaluator` evaluates the shapes."""
    return _evaluator(shapes, lambda dims: "(" + " * ".join(dims or ["1"]) + ")",
                      lambda bindings: [math.prod(evaluate(d, bindings) for d in shape)
                                        for shape in shapes])


def _evaluator(shapes: list, row, slow):
    """A function of the bindings returning ``[row(dims) for each shape]``, generated
    from the dimensions' Python forms (``row`` joins one shape's), or ``slow`` where a
    dimension is not integer arithmetic, a symbol is unbound or a size divides by zero
    (the slow path names what is wrong)."""
    symbols_used = symbols([d for shape in shapes for d in shape])
    names = {id(v): f"s{k}" for k, v in enumerate(symbols_used)}

    def source(d) -> str:
        if is_static(d):
            return str(int(d))
        if isinstance(d, E.IntImm):
            return str(int(d.value))
        if isinstance(d, E.Var):
            return names[id(d)]
        if type(d) not in _INTEGER_OPS:
            raise _NotArithmetic(d)
        return _INTEGER_OPS[type(d)][1].format(source(d.a), source(d.b))

    try:
        rows = ", ".join(row([source(d) for d in shape]) for shape in shapes)
    except _NotArithmetic:
        return slow
    namespace: dict = {}
    exec(f"def f({', '.join(names.values())}):\n    return [{rows}]", namespace)  # noqa: S102
    fast = namespace["f"]

    def evaluator(bindings):
        values = [_bound(bindings, v) for v in symbols_used]
        if None in values:
            return slow(bindings)  # the slow path names the unbound symbol
        try:
            return fast(*values)
        except ZeroDivisionError:
            return slow(bindings)

    return evaluator


def evaluate(d, bindings: dict) -> int:
    """The integer value of dimension ``d`` with the symbols bound by ``bindings``
    (``Var -> int``).

    Raises
    ------
    TecompError
        A symbol of ``d`` has no binding.
    """
    if is_static(d):
        return int(d)
    try:
        return _value(d, bindings)
    except (_NotArithmetic, ZeroDivisionError):
        pass
    s = simplify(substitute(d, {v: E.IntImm(int(n), v.dtype) for v, n in bindings.items()}))
    if not isinstance(s, E.IntImm):
        raise TecompError(f"dimension {d} has unbound symbols (bound: "
                          f"{', '.join(v.name for v in bindings) or 'none'})")
    return int(s.value)


def to_text(d) -> str:
    """A dimension as printed in the graph IR: ``3``, ``batch``, ``batch * 4``."""
    return str(d)


_BINARY = {cls.__name__: cls for cls in (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod,
                                         E.Min, E.Max)}


def to_json(d):
    """A dimension as JSON data: an int, ``{"var": name}`` or ``[op, a, b]``.

    Raises
    ------
    TecompError
        The expression uses a node other than integer arithmetic on symbols.
    """
    if is_static(d):
        return int(d)
    if isinstance(d, E.Var):
        return {"var": d.name}
    if isinstance(d, E.IntImm):
        return int(d.value)
    name = type(d).__name__
    if name not in _BINARY:
        raise TecompError(f"dimension {d}: {name} cannot be saved; allowed are symbols, "
                          f"integers and {', '.join(sorted(_BINARY))}")
    return [name, to_json(d.a), to_json(d.b)]


def from_json(data, symbols_by_name: dict):
    """The dimension :func:`to_json` wrote; ``symbols_by_name`` maps names to the ``te.var``
    each name stands for and gains the ones it did not hold yet."""
    if isinstance(data, int):
        return data
    if isinstance(data, dict):
        name = data["var"]
        if name not in symbols_by_name:
            symbols_by_name[name] = E.Var(name, "int32")
        return symbols_by_name[name]
    op, a, b = data
    return normalize(E.binary(_BINARY[op], from_json(a, symbols_by_name),
                              from_json(b, symbols_by_name)))


def quotient(numerator, denominator):
    """``prod(numerator) / prod(denominator)`` as a dimension, cancelling equal symbolic
    factors (``(b * s * 64) / (b * s) = 64``), or None when it does not divide exactly."""
    num_c, num_f = product_factors(numerator)
    den_c, den_f = product_factors(denominator)
    num_f, missing = remove_factors(num_f, den_f)
    if missing or den_c == 0 or num_c % den_c:
        return None
    out = num_c // den_c
    for f in num_f:
        out = f * out if not is_static(out) or out != 1 else f
    return normalize(out)


def product(shape):
    """The number of elements of ``shape`` as a dimension."""
    out = 1
    for d in shape:
        out = normalize(d * out) if not is_static(d) else (
            out * d if is_static(out) else normalize(out * d))
    return out
