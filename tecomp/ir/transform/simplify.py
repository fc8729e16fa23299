"""The statement simplifier, a pass ``PrimFunc -> PrimFunc``.

It walks the statements carrying each loop variable's bounds into the arithmetic
:class:`~tecomp.ir.arith.Analyzer` (declaring loop variables outermost first, which gives
index expressions their term order ``io*512 + ii*64 + j``), simplifies every expression,
folds decided branches (and simplifies each branch knowing its condition), drops loops of
extent 1 (substituting the minimum), substitutes trivial lets and flattens sequences.
Work is memoised per node and equal subtrees are hash-consed, so a nest of ~10 loops with
a few hundred index expressions takes a few ms.
"""

from __future__ import annotations

from .. import dtype as dt
from .. import expr as E
from .. import stmt as S
from ..arith import Analyzer, Bounds
from ..arith.canonical import CANONICAL_DTYPES
from ..arith.const_fold import is_const
from ..arith.sum_expr import SumExpr, sum_add, sum_add_const, sum_scale
from ..expr import IntImm, Var
from ..functor import collect_vars, substitute
from ..stmt import PrimFunc

#: What a statement simplifies to when it does nothing (callers drop it from sequences).
NOOP = S.Evaluate(IntImm(0))


def _is_noop(s) -> bool:
    return s is NOOP or (type(s) is S.Evaluate and is_const(s.value))


#: Operations under which a loop extent grows with its size variable (constants >= 0).
_MONOTONE = (E.Add, E.Mul, E.FloorDiv, E.Min, E.Max)


def _grows_with(e, v: Var) -> bool:
    if e is v:
        return True
    if type(e) is IntImm:
        return e.value >= 0
    return type(e) in _MONOTONE and _grows_with(e.a, v) and _grows_with(e.b, v)


def _factors(e) -> list:
    return _factors(e.a) + _factors(e.b) if type(e) is E.Mul else [e]


def _push_nonempty(an: Analyzer, ext) -> list:
    """Inside a loop its extent is at least 1, and so is each factor of it (the factors
    of a size are never negative): where a factor grows with one size variable (``n``,
    ``(n + 5) // 6``), bound that variable below by the least value giving 1, as the
    loop's body runs only then (a size may be 0 outside it). Returns the
    ``(variable, token)`` pairs for :meth:`Analyzer.pop_bound`."""
    pushed = []
    for factor in _factors(ext):
        sizes = collect_vars(factor)
        if len(sizes) != 1 or not _grows_with(factor, sizes[0]):
            continue
        v = sizes[0]
        lo = an.bound(v)[0]
        lo = 0 if lo is None or lo < 0 else lo
        for least in range(lo, lo + 64):
            value = an.simplify(substitute(factor, {v: IntImm(least, v.dtype)}))
            if type(value) is IntImm and value.value >= 1:
                if least > lo:
                    pushed.append((v, an.push_bound(v, (least, None))))
                break
    return pushed


class _StmtSimplifier:
    """Walks statements, carrying loop-variable bounds into the expression simplifier."""

    def __init__(self, bounds):
        self.an = Analyzer(bounds)
        self._table = {
            S.For: self._for,
            S.Store: self._store,
            S.IfThenElse: self._if,
            S.LetStmt: self._let,
            S.SeqStmt: self._seq,
            S.Allocate: self._allocate,
            S.Evaluate: self._evaluate,
        }

    def stmt(self, s):
        fn = self._table.get(type(s))
        if fn is None:
            return self.an.simplify_children(s)
        return fn(s)

    def _for(self, s: S.For):
        an = self.an
        mn, ext = an.simplify(s.min), an.simplify(s.extent)
        v = s.loop_var
        if type(ext) is IntImm:
            if ext.value <= 0:
                return NOOP
            # A thread-bound loop names a launch dimension, so it stays even at extent 1.
            if ext.value == 1 and s.kind != "thread_binding":
                return self.stmt(substitute(s.body, {v: mn}))
        an.see(v)
        smin = an.canon(mn) if mn.dtype in CANONICAL_DTYPES else None
        if smin is not None:
            lo = an.sum_bound(smin)[0]
            hi = an.sum_bound(sum_add_const(sum_add(smin, an.canon(ext)), -1))[1]
        else:
            lo, hi = an.bound(mn)[0], None
        token = an.push_bound(v, (lo, hi))
        nonempty = _push_nonempty(an, ext)
        symbolic = smin is not None and not (type(mn) is IntImm and type(ext) is IntImm)
        if symbolic:
            an.sym_ranges[v] = (
                mn,
                an.rebuild(sum_add_const(sum_add(smin, an.canon(ext)), -1), mn.dtype),
            )
        try:
            body = self.stmt(s.body)
        finally:
            for size, size_token in reversed(nonempty):
                an.pop_bound(size, size_token)
            an.pop_bound(v, token)
            if symbolic:
                del an.sym_ranges[v]
        if _is_noop(body):
            return NOOP
        if mn is s.min and ext is s.extent and body is s.body:
            return s
        return S.For(v, mn, ext, s.kind, body, s.thread_tag)

    def _store(self, s: S.Store):
        value, index = self.an.simplify(s.value), self.an.simplify(s.index)
        if value is s.value and index is s.index:
            return s
        return S.Store(s.buffer, value, index)

    def _if(self, s: S.IfThenElse):
        an = self.an
        c = an.simplify(s.condition)
        if type(c) is IntImm:
            taken = s.then_case if c.value else s.else_case
            return NOOP if taken is None else self.stmt(taken)
        then = self._under(c, s.then_case)
        els = None
        if s.else_case is not None:
            els = self._under(an.simplify(E.Not(c)), s.else_case)
            if _is_noop(els):
                els = None
        if _is_noop(then):
            if els is None:
                return NOOP  # the condition is pure
            return S.IfThenElse(an.simplify(E.Not(c)), els, None)
        if c is s.condition and then is s.then_case and els is s.else_case:
            return s
        return S.IfThenElse(c, then, els)

    def _under(self, cond, body):
        """Simplify ``body`` knowing ``cond`` holds: its constant consequences on single
        variables, and a symbolic end for a loop variable it compares with an expression
        (``v < height - 1`` in a loop over ``v``)."""
        facts = self._facts(cond)
        tokens = [(v, self.an.push_bound(v, iv)) for v, iv in facts]
        ranges = self.an.sym_ranges
        narrowed = self._symbolic_facts(cond)
        saved = [(v, ranges[v]) for v, _ in narrowed]
        for v, rng in narrowed:
            ranges[v] = rng
        try:
            return self.stmt(body)
        finally:
            for v, rng in reversed(saved):
                ranges[v] = rng
            for v, tok in reversed(tokens):
                self.an.pop_bound(v, tok)

    def _symbolic_facts(self, cond) -> list:
        """``(v, (lo, hi))`` for each conjunct of ``cond`` comparing a loop variable ``v``
        of symbolic range with an expression free of it: the range with that end
        replaced (the bound taken alone covers the values ``v`` then has, so proofs over
        it stay sound)."""
        if type(cond) is E.And:
            out = self._symbolic_facts(cond.a)
            seen = {v for v, _ in out}
            return out + [f for f in self._symbolic_facts(cond.b) if f[0] not in seen]
        t = type(cond)
        if t not in (E.LT, E.LE, E.GT, E.GE):
            return []
        a, b = cond.a, cond.b
        if type(b) is Var and b in self.an.sym_ranges and type(a) is not Var:
            a, b = b, a
            t = {E.LT: E.GT, E.LE: E.GE, E.GT: E.LT, E.GE: E.LE}[t]
        if type(a) is not Var or a not in self.an.sym_ranges or a in collect_vars(b):
            return []
        lo, hi = self.an.sym_ranges[a]
        one = IntImm(1, b.dtype)
        if t in (E.LT, E.LE):
            hi = self.an.simplify(b - one if t is E.LT else b)
        else:
            lo = self.an.simplify(b + one if t is E.GT else b)
        return [(a, (lo, hi))]

    def _facts(self, cond) -> list:
        """(var, interval) pairs implied by ``cond``: from conjunctions of integer
        comparisons ``Σ k_i*v_i + rest <= 0``, each ``v_i`` gets a constant bound."""
        t = type(cond)
        if t is E.And:
            return self._facts(cond.a) + self._facts(cond.b)
        if t not in (E.LT, E.LE, E.GT, E.GE, E.EQ) or cond.a.dtype not in CANONICAL_DTYPES:
            return []
        an = self.an
        d = sum_add(an.canon(cond.a), an.canon(cond.b), -1)  # a - b
        if t is E.LT:
            forms = [sum_add_const(d, 1)]
        elif t is E.LE:
            forms = [d]
        elif t is E.GT:
            forms = [sum_add_const(sum_scale(d, -1), 1)]
        elif t is E.GE:
            forms = [sum_scale(d, -1)]
        else:
            forms = [d, sum_scale(d, -1)]
        out = []
        for f in forms:  # f <= 0
            for m, k in f.terms.items():
                if len(m) != 1 or type(m[0]) is not Var:
                    continue
                rest_lo = an.sum_bound(sum_add(f, SumExpr({m: k}, 0), -1))[0]
                if rest_lo is None:
                    continue
                # k*v <= -rest <= -rest_lo
                if k > 0:
                    out.append((m[0], (None, (-rest_lo) // k)))
                else:
                    # (-k)*v >= rest_lo, so v >= ceil(rest_lo / -k)
                    out.append((m[0], (-((-rest_lo) // (-k)), None)))
        return out

    def _let(self, s: S.LetStmt):
        an = self.an
        v = an.simplify(s.value)
        if type(v) in (IntImm, E.FloatImm, Var):
            return self.stmt(substitute(s.body, {s.var: v}))
        token = None
        if dt.is_int(v.dtype):
            token = an.push_bound(s.var, an.bound(v))
        try:
            body = self.stmt(s.body)
        finally:
            if token is not None:
                an.pop_bound(s.var, token)
        if _is_noop(body):
            return NOOP  # the value is pure
        if v is s.value and body is s.body:
            return s
        return S.LetStmt(s.var, v, body)

    def _seq(self, s: S.SeqStmt):
        out = []
        changed = False
        for c in s.seq:
            n = self.stmt(c)
            changed |= n is not c
            if type(n) is S.SeqStmt:
                out.extend(n.seq)
                changed = True
            elif _is_noop(n):
                changed = True
            else:
                out.append(n)
        if not changed:
            return s
        if not out:
            return NOOP
        return out[0] if len(out) == 1 else S.SeqStmt(tuple(out))

    def _allocate(self, s: S.Allocate):
        body = self.stmt(s.body)
        if _is_noop(body):
            return NOOP
        return s if body is s.body else S.Allocate(s.buffer, body)

    def _evaluate(self, s: S.Evaluate):
        v = self.an.simplify(s.value)
        if is_const(v):
            return NOOP
        return s if v is s.value else S.Evaluate(v)


def simplify_stmt(s: S.Stmt, bounds: Bounds | None = None) -> S.Stmt:
    """Simplify every expression of a statement, with loop-variable bounds, fold decided
    branches, drop extent-1 loops and trivial lets, flatten sequences.

    Parameters
    ----------
    s : Stmt
    bounds : dict[Var, (int | None, int | None)], optional
        Inclusive constant bounds of the free variables of ``s``.

    Returns
    -------
    Stmt
        ``s`` itself when nothing changed; a statement that does nothing becomes
        :data:`NOOP`.
    """
    return _StmtSimplifier(bounds).stmt(s)


def simplify(func: PrimFunc) -> PrimFunc:
    """The pass: ``func`` with its body simplified (see the module docstring).

    Its symbolic sizes (``func.size_vars``) are known to be at least 0 (a tensor may
    have no element), and at least 1 inside a loop over them.

    Parameters
    ----------
    func : PrimFunc

    Returns
    -------
    PrimFunc
        ``func`` itself when nothing changed.

    Example
    -------
    >>> simplify(tecomp.lower(s, [A, B]))   # doctest: +SKIP
    """
    bounds = {v: (0, None) for v in func.size_vars}
    body = simplify_stmt(func.body, bounds)
    return func if body is func.body else func.with_body(body)


__all__ = ["NOOP", "simplify", "simplify_stmt"]
