"""Readable text for expressions, statements and functions (what ``tecomp.lower`` prints).

The node classes sit below this module (it reads them), so it is the printer that gives
them their text form: importing :mod:`tecomp.ir` installs ``str`` of expressions and
``str``/``repr`` of statements and functions.
"""

from __future__ import annotations

from . import expr as E
from . import stmt as S
from .functor import children

_INFIX = {
    E.Add: "+",
    E.Sub: "-",
    E.Mul: "*",
    E.Div: "/",
    E.FloorDiv: "//",
    E.FloorMod: "%",
    E.EQ: "==",
    E.NE: "!=",
    E.LT: "<",
    E.LE: "<=",
    E.GT: ">",
    E.GE: ">=",
    E.And: "&&",
    E.Or: "||",
}

_PRECEDENCE = {
    E.Or: 1,
    E.And: 2,
    E.EQ: 3,
    E.NE: 3,
    E.LT: 4,
    E.LE: 4,
    E.GT: 4,
    E.GE: 4,
    E.Add: 5,
    E.Sub: 5,
    E.Mul: 6,
    E.Div: 6,
    E.FloorDiv: 6,
    E.FloorMod: 6,
}


# Var -> printed name while a function is printed: distinct variables that share a name
# (the same axis name in two stages) get numbered suffixes so the text stays unambiguous.
_NAMES: dict = {}


def expr_str(e, parent_prec: int = 0) -> str:
    t = type(e)
    if t is E.Var:
        return _NAMES.get(e, e.name)
    if t is E.IntImm:
        if e.dtype == "bool":
            return "True" if e.value else "False"
        return str(e.value) if e.dtype in ("int32", "int64") else f"{e.dtype}({e.value})"
    if t is E.FloatImm:
        return repr(e.value) if e.dtype == "float32" else f"{e.dtype}({e.value!r})"
    if t is E.StringImm:
        return repr(e.value)
    if t in _INFIX:
        p = _PRECEDENCE[t]
        # Left-associative: the right operand needs parentheses at equal precedence.
        s = f"{expr_str(e.a, p)} {_INFIX[t]} {expr_str(e.b, p + 1)}"
        return f"({s})" if p < parent_prec else s
    if t in (E.Min, E.Max):
        return f"{t.__name__.lower()}({expr_str(e.a)}, {expr_str(e.b)})"
    if t is E.Not:
        return f"!{expr_str(e.a, 9)}"
    if t is E.Cast:
        return f"{e.dtype}({expr_str(e.value)})"
    if t is E.Select:
        return (
            f"select({expr_str(e.cond)}, {expr_str(e.true_value)}, {expr_str(e.false_value)})"
        )
    if t is E.Let:
        return f"(let {e.var.name} = {expr_str(e.value)} in {expr_str(e.body)})"
    if t is E.Call:
        return f"{e.name}({', '.join(expr_str(a) for a in e.args)})"
    if t is E.Load:
        return f"{e.buffer.name}[{expr_str(e.index)}]"
    if t is E.Check:
        return f"checked({expr_str(e.cond)}, {expr_str(e.value)}, {e.message!r})"
    if t is E.ProducerLoad:
        return f"{e.tensor.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if t is E.Reduce:
        src = ", ".join(expr_str(s) for s in e.source)
        axes = ", ".join(a.var.name for a in e.axis)
        cond = "" if _is_true(e.condition) else f", where={expr_str(e.condition)}"
        idx = f"[{e.value_index}]" if len(e.source) > 1 else ""
        return f"{e.combiner.name}({src}, axis=[{axes}]{cond}){idx}"
    if isinstance(e, E.IterVar):
        return e.var.name
    return f"<{t.__name__}>"


def _is_true(e) -> bool:
    return isinstance(e, E.IntImm) and e.dtype == "bool" and e.value == 1


def _for_header(s: S.For) -> str:
    kind = "" if s.kind == "serial" else f"  # {s.kind}"
    if s.kind == "thread_binding":
        kind = f"  # bound to {s.thread_tag}"
    elif s.hint:
        kind = f"  # serial, {s.hint} requested"
    lo = expr_str(s.min)
    if lo == "0":
        rng = expr_str(s.extent)
    else:
        rng = f"{lo}, {expr_str(E.binary(E.Add, s.min, s.extent))}"
    return f"for {expr_str(s.loop_var)} in range({rng}):{kind}"


def stmt_lines(s, indent: int, out: list) -> None:
    pad = "  " * indent
    t = type(s)
    if t is S.SeqStmt:
        for c in s.seq:
            stmt_lines(c, indent, out)
    elif t is S.For:
        out.append(pad + _for_header(s))
        stmt_lines(s.body, indent + 1, out)
    elif t is S.Store:
        out.append(f"{pad}{s.buffer.name}[{expr_str(s.index)}] = {expr_str(s.value)}")
    elif t is S.Allocate:
        shape = ", ".join(expr_str(x) for x in s.buffer.shape)
        buf = s.buffer
        out.append(f"{pad}{buf.name} = allocate({buf.dtype}, [{shape}], {buf.scope})")
        stmt_lines(s.body, indent, out)
    elif t is S.LetStmt:
        out.append(f"{pad}{expr_str(s.var)} = {expr_str(s.value)}")
        stmt_lines(s.body, indent, out)
    elif t is S.IfThenElse:
        out.append(f"{pad}if {expr_str(s.condition)}:")
        stmt_lines(s.then_case, indent + 1, out)
        if s.else_case is not None:
            out.append(f"{pad}else:")
            stmt_lines(s.else_case, indent + 1, out)
    elif t is S.Evaluate:
        out.append(pad + expr_str(s.value))
    elif t is S.Barrier:
        out.append(pad + "barrier()")
    elif t is S.WarpShuffle:
        out.append(f"{pad}{s.buffer.name}[{expr_str(s.index)}] = shuffle_down("
                   f"{expr_str(s.value)}, {s.offset}, width={s.width})")
    elif t is S.MatrixFill:
        out.append(f"{pad}{s.fragment.name}[{expr_str(s.index)}] = fill({expr_str(s.value)})")
    elif t is S.MatrixLoad:
        out.append(f"{pad}{s.fragment.name}[{expr_str(s.index)}] = load_matrix("
                   f"{s.source.name}, {expr_str(s.offset)}, stride={expr_str(s.stride)}, "
                   f"{s.layout})")
    elif t is S.MatrixStore:
        out.append(f"{pad}store_matrix({s.dest.name}, {expr_str(s.offset)}, "
                   f"stride={expr_str(s.stride)}, {s.fragment.name}[{expr_str(s.index)}])")
    elif t is S.MatrixMultiplyAdd:
        out.append(f"{pad}{s.d.name}[{expr_str(s.d_index)}] = mma({s.a.name}"
                   f"[{expr_str(s.a_index)}], {s.b.name}[{expr_str(s.b_index)}], "
                   f"{s.c.name}[{expr_str(s.c_index)}])")
    elif t is S.KernelLaunch:
        dims = ", ".join(f"{d}=({', '.join(expr_str(x) for x in getattr(s, d))})"
                         for d in ("grid", "block"))
        out.append(f"{pad}launch {s.name}({dims}):")
        stmt_lines(s.body, indent + 1, out)
    else:
        out.append(f"{pad}<{t.__name__}>")


def stmt_str(s) -> str:
    out: list = []
    stmt_lines(s, 0, out)
    return "\n".join(out)


def _unique_names(f) -> dict:
    taken: dict = {}
    names = {}

    def name_of(v):
        if v in names:
            return
        base = v.name
        count = taken.get(base, 0)
        taken[base] = count + 1
        names[v] = base if count == 0 else f"{base}_{count}"

    for v in f.size_vars:
        name_of(v)

    stack = [f.body]  # pre-order, so outer loops keep the plain names
    while stack:
        n = stack.pop()
        if isinstance(n, S.For):
            name_of(n.loop_var)
        elif isinstance(n, (S.LetStmt, E.Let)):
            name_of(n.var)
        if isinstance(n, S.Stmt):
            stack.extend(reversed(children(n)))
    return names


def func_str(f) -> str:
    global _NAMES
    _NAMES = _unique_names(f)
    try:
        return _func_str(f)
    finally:
        _NAMES = {}


def _func_str(f) -> str:
    params = ", ".join(
        f"{b.name}: {b.dtype}[{', '.join(expr_str(x) for x in b.shape)}]" for b in f.params
    )
    out = [f"def {f.name}({params}):"]
    stmt_lines(f.body, 1, out)
    return "\n".join(out)


E.PrimExpr.__str__ = expr_str
S.Stmt.__str__ = S.Stmt.__repr__ = stmt_str
S.PrimFunc.__str__ = S.PrimFunc.__repr__ = func_str
