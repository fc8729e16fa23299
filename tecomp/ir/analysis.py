"""Questions about loop IR that do not depend on a target: which expressions are index
arithmetic, which could fault when evaluated speculatively, the constant stride of an
index along a loop, whether a loop body can run its iterations as lanes of one vector
(elementwise, or as a reduction combined across the lanes), and what a statement refers
to.

Legalization (``tecomp.ir.transform.legalize``) decides loop kinds with these, and code
generators use them to choose how to emit what legalization kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import expr as E
from . import stmt as S
from .arith import linear_coeff
from .buffer import buffer_key
from .functor import post_order_visit, uses_var

SIGNED_INT = ("int8", "int16", "int32", "int64")


def is_pure_int(e, cache: dict) -> bool:
    """Whether ``e`` is signed-integer arithmetic over variables and constants only (index
    arithmetic, which a backend may evaluate in a wider integer type).

    Parameters
    ----------
    e : PrimExpr
    cache : dict
        Results by ``id`` of the sub-expressions seen so far; pass the same dict for the
        expressions of one function so shared sub-trees are visited once.
    """
    r = cache.get(id(e))
    if r is not None:
        return r
    t = type(e)
    if e.dtype not in SIGNED_INT:
        r = False
    elif t in (E.Var, E.IntImm):
        r = True
    elif t in (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max):
        r = is_pure_int(e.a, cache) and is_pure_int(e.b, cache)
    elif t is E.Cast:
        r = e.value.dtype in SIGNED_INT and is_pure_int(e.value, cache)
    else:
        r = False
    cache[id(e)] = r
    return r


def has_unsafe(e) -> bool:
    """Whether evaluating ``e`` could fault or have an effect when it should not have
    been evaluated (a load, a division by a non-constant, a run-time ``Check``)."""
    found = False

    def fn(n):
        nonlocal found
        if isinstance(n, (E.Load, E.Check)) or (
            isinstance(n, (E.FloorDiv, E.FloorMod)) and not isinstance(n.b, E.IntImm)
        ):
            found = True

    post_order_visit(e, fn)
    return found


def const_stride(index, var) -> tuple | None:
    """``(c, rest)`` with ``index == c * var + rest``, ``c`` an ``int`` and ``rest`` free of
    ``var``; None when ``index`` is not linear in ``var`` or ``c`` is not a constant."""
    lc = linear_coeff(index, var)
    if lc is None:
        return None
    c = E.const_value(lc[0])
    return None if c is None else (int(c), lc[1])


def _skey(e):
    """A structural key of an expression (variables by identity)."""
    t = type(e)
    if t is E.Var:
        return ("v", id(e))
    if t in (E.IntImm, E.FloatImm):
        return ("c", e.value, e.dtype)
    if t is E.Load:
        return ("L", id(e.buffer), _skey(e.index))
    parts = [t.__name__, getattr(e, "dtype", None)]
    for f in ("a", "b", "value", "cond", "true_value", "false_value", "body", "var"):
        if hasattr(e, f):
            parts.append(_skey(getattr(e, f)))
    if t is E.Call:
        parts.append(e.name)
        parts.extend(_skey(a) for a in e.args)
    return tuple(parts)


def vectorizable(body, loop_var) -> bool:
    """Whether the iterations of a loop over ``loop_var`` with body ``body`` can run as
    lanes of one vector, preserving the serial semantics.

    The body may hold only stores, ifs, lets and ``unrolled`` loops with a constant
    extent; every store address must vary with the lane, and a stored buffer may only be
    read at an address it is also stored to (so no lane reads what another lane writes).
    """
    varying = {loop_var}
    ok = True
    stores: dict = {}
    loads: list = []

    def uses_varying(e):
        found = False

        def fn(n):
            nonlocal found
            if isinstance(n, E.Var) and n in varying:
                found = True

        post_order_visit(e, fn)
        return found

    def collect_loads(e):
        def fn(n):
            if isinstance(n, E.Load):
                loads.append(n)
            elif isinstance(n, E.Let) and uses_varying(n.value):
                varying.add(n.var)

        post_order_visit(e, fn)

    def walk(s):
        nonlocal ok
        if not ok:
            return
        t = type(s)
        if t is S.SeqStmt:
            for x in s.seq:
                walk(x)
        elif t is S.Store:
            collect_loads(s.value)
            collect_loads(s.index)
            if not uses_varying(s.index):
                ok = False
                return
            stores.setdefault(buffer_key(s.buffer), set()).add(_skey(s.index))
        elif t is S.IfThenElse:
            collect_loads(s.condition)
            walk(s.then_case)
            if s.else_case is not None:
                walk(s.else_case)
        elif t is S.LetStmt:
            collect_loads(s.value)
            if uses_varying(s.value):
                varying.add(s.var)
            walk(s.body)
        elif t is S.Evaluate:
            pass
        elif t is S.For:
            if s.kind != "unrolled" or E.const_value(s.extent) is None:
                ok = False
                return
            collect_loads(s.min)
            walk(s.body)
        else:
            ok = False

    walk(body)
    if not ok:
        return False
    for ld in loads:
        keys = stores.get(buffer_key(ld.buffer))
        if keys is not None and _skey(ld.index) not in keys:
            return False
    return True


#: How a reduction loop's lanes may be combined when its loop is vectorized: in pairs, a
#: tree of ``log2(lanes)`` steps. For floats this reassociates the sum (as ``rfactor`` did
#: for the partial sums the loop combines): vectorizing a reduction loop asks for that.
LANE_COMBINERS = (E.Add, E.Mul, E.Min, E.Max)


@dataclass(frozen=True)
class LaneReduction:
    """A loop body ``buf[i] = buf[i] op v`` whose lanes fold ``v`` into one element:
    ``store`` the update, ``combiner`` its ``op`` node (its class and dtype say how two
    values combine), ``operand`` the ``v`` each iteration folds in."""

    store: S.Store
    combiner: E.PrimExpr
    operand: E.PrimExpr


def lane_reduction(body, loop_var) -> LaneReduction | None:
    """The reduction a loop over ``loop_var`` with body ``body`` computes, where its
    iterations can run as lanes of one vector whose values are then combined: one store
    ``buf[i] = buf[i] op v`` (or ``v op buf[i]``) with ``i`` the same in every iteration,
    ``op`` one of :data:`LANE_COMBINERS`, and ``v`` not reading ``buf``. None otherwise.
    """
    if type(body) is not S.Store or uses_var(body.index, loop_var):
        return None
    upd = body.value
    if type(upd) not in LANE_COMBINERS or upd.dtype != body.buffer.dtype:
        return None
    key = buffer_key(body.buffer)

    def accumulator(e) -> bool:
        return (type(e) is E.Load and buffer_key(e.buffer) == key
                and _skey(e.index) == _skey(body.index))

    for acc, v in ((upd.a, upd.b), (upd.b, upd.a)):
        if accumulator(acc) and key not in free_refs(v)[1]:
            return LaneReduction(body, upd, v)
    return None


def free_refs(s) -> tuple[list, list]:
    """Variables and buffer keys (``buffer_key``) a statement refers to, including those
    of allocation shapes, each once, in order of first reference."""
    vars_, bufs = {}, {}

    def fn(n):
        for buf in S.accessed_buffers(n):
            bufs.setdefault(buffer_key(buf), None)
        if isinstance(n, E.Var):
            vars_.setdefault(n, None)
        elif isinstance(n, S.Allocate):
            for x in n.buffer.shape:
                post_order_visit(x, fn)

    post_order_visit(s, fn)
    return list(vars_), list(bufs)


def work_of(s) -> E.PrimExpr:
    """How many elementary steps ``s`` takes, as an int64 expression: each store or
    evaluated call is one, a loop takes its extent times its body, both branches of a
    condition count. An upper bound on the stores and calls a run of ``s`` makes, which
    says whether it is worth sharing among threads; it may name variables ``s`` binds
    (an inner loop's extent that depends on an outer one)."""
    if isinstance(s, S.For):
        return E.cast("int64", s.extent) * work_of(s.body)
    if isinstance(s, S.SeqStmt):
        total = E.IntImm(0, "int64")
        for x in s.seq:
            total = total + work_of(x)
        return total
    if isinstance(s, S.IfThenElse):
        return work_of(s.then_case) + (work_of(s.else_case) if s.else_case is not None
                                       else E.IntImm(0, "int64"))
    if isinstance(s, (S.LetStmt, S.Allocate)):
        return work_of(s.body)
    if isinstance(s, (S.Store, S.Evaluate)):
        return E.IntImm(1, "int64")
    return E.IntImm(0, "int64")
