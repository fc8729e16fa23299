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


def run_stmt(s, env: dict, mem: dict) -> None:
    """Interpret a statement: stores go to ``mem[(buffer name, index)]``."""
    from tecomp.ir import stmt as S

    t = type(s)
    if t is S.For:
        lo = evaluate(s.min, env)
        for v in range(lo, lo + evaluate(s.extent, env)):
            run_stmt(s.body, {**env, s.loop_var: v}, mem)
    elif t is S.Store:
        mem[(s.buffer.name, evaluate(s.index, env))] = evaluate(s.value, env)
    elif t is S.IfThenElse:
        if evaluate(s.condition, env):
            run_stmt(s.then_case, env, mem)
        elif s.else_case is not None:
            run_stmt(s.else_case, env, mem)
    elif t is S.LetStmt:
        run_stmt(s.body, {**env, s.var: evaluate(s.value, env)}, mem)
    elif t is S.SeqStmt:
        for c in s.seq:
            run_stmt(c, env, mem)
    elif t is S.Evaluate:
        pass
    else:
        raise TypeError(f"cannot run {t.__name__}")
