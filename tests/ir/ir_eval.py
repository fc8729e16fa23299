"""A reference evaluator for integer/bool expressions, with Python's // and % (floor)."""

from tecomp.ir import expr as E

_BIN = {
    E.Add: lambda x, y: x + y,
    E.Sub: lambda x, y: x - y,
    E.Mul: lambda x, y: x * y,
    E.FloorDiv: lambda x, y: x // y,
    E.FloorMod: lambda x, y: x % y,
    E.Min: min,
    E.Max: max,
    E.EQ: lambda x, y: int(x == y),
    E.NE: lambda x, y: int(x != y),
    E.LT: lambda x, y: int(x < y),
    E.LE: lambda x, y: int(x <= y),
    E.GT: lambda x, y: int(x > y),
    E.GE: lambda x, y: int(x >= y),
    E.And: lambda x, y: int(bool(x) and bool(y)),
    E.Or: lambda x, y: int(bool(x) or bool(y)),
}


def evaluate(e, env: dict) -> int:
    """The value of ``e`` with variables taken from ``env`` (mathematical integers)."""
    t = type(e)
    if t is E.IntImm:
        return e.value
    if t is E.Var:
        return env[e]
    if t in _BIN:
        return _BIN[t](evaluate(e.a, env), evaluate(e.b, env))
    if t is E.Not:
        return int(not evaluate(e.a, env))
    if t is E.Select:
        return evaluate(e.true_value if evaluate(e.cond, env) else e.false_value, env)
    if t is E.Cast:
        return evaluate(e.value, env)
    raise TypeError(f"cannot evaluate {t.__name__}")
