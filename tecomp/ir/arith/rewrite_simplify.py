"""Rewrite rules for the nodes that are not canonical sums.

Floats and narrow integers (only constant-folded, and given the IEEE-exact identities
``x*1.0``, ``x/1.0``, ``x-0.0``, ``x+(-0.0)``; floats are never reassociated), comparisons
(decided from the bounds of ``a - b``, or over the symbolic ranges of loop variables),
logic, select, cast and let. Integer operands of comparisons go through the canonical
form, so ``io*8 + ii < io*8 + 8`` is decided from the bound of ``ii``.

This part keeps no results of its own: a node's children are simplified through the
analyzer's ``simplify`` (whose memo holds them). It reaches its siblings through the
analyzer: ``canonical_simplify`` for integer operands, ``const_int_bound`` and
``int_set`` to decide comparisons, ``atoms`` to compare operands structurally.
"""

from __future__ import annotations

from .. import dtype as dt
from .. import expr as E
from ..expr import IntImm, PrimExpr, Var
from ..functor import IRMutator, substitute
from .canonical import CANONICAL_DTYPES
from .const_fold import const_bool, fold_binary, fold_cast, fold_compare, is_const
from .interval import decide_cmp, iv_add, iv_scale
from .sum_expr import sum_add

#: not (a OP b) == a NEG(OP) b, valid for integers (for floats only EQ/NE: NaN).
_CMP_NEGATE = {E.EQ: E.NE, E.NE: E.EQ, E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT}


def _float_is(e, value: float, negative_zero: bool | None = None) -> bool:
    """Whether ``e`` is the float constant ``value`` (with the given sign of zero)."""
    if type(e) is not E.FloatImm or e.value != value:
        return False
    if negative_zero is None:
        return True
    return str(e.value).startswith("-") == negative_zero


class _ChildSimplifier(IRMutator):
    """Rebuilds a node whose child expressions are simplified by an analyzer."""

    def __init__(self, owner):
        super().__init__()
        self.owner = owner

    def visit(self, node):
        if isinstance(node, PrimExpr):
            return self.owner.simplify(node)
        return super().visit(node)


class RewriteSimplifier:
    """Rules for the node kinds the canonical form treats as atoms, the
    ``rewrite_simplify`` part of :class:`~tecomp.ir.arith.Analyzer`."""

    def __init__(self, analyzer):
        self.analyzer = analyzer
        self._children = _ChildSimplifier(analyzer)

    def rewrite(self, e: PrimExpr) -> PrimExpr:
        """``e`` simplified by the rules for its node kind (children simplified first)."""
        return _VISIT.get(type(e), RewriteSimplifier._visit_generic)(self, e)

    def simplify_children(self, node):
        """``node`` rebuilt with every expression below it simplified (``node`` itself
        when none changed)."""
        return self._children.generic(node)

    def _visit_generic(self, e):
        return self._children.generic(e)

    def _visit_binary(self, e):
        """Arithmetic on floats and non-index integer dtypes: fold and exact identities."""
        an = self.analyzer
        a, b = an.simplify(e.a), an.simplify(e.b)
        t, d = type(e), e.dtype
        if is_const(a) and is_const(b):
            folded = fold_binary(t, a, b, d)
            if folded is not None:
                return folded
        if dt.is_float(d):
            if t is E.Mul and _float_is(b, 1.0) or t is E.Div and _float_is(b, 1.0):
                return a
            if t is E.Mul and _float_is(a, 1.0):
                return b
            if t is E.Sub and _float_is(b, 0.0, negative_zero=False):
                return a  # x - 0.0 == x, also for x == -0.0
            if t is E.Add and _float_is(b, 0.0, negative_zero=True):
                return a  # x + (-0.0) == x, also for x == +0.0
            if t is E.Add and _float_is(a, 0.0, negative_zero=True):
                return b
        elif dt.is_int(d):
            if t in (E.Add, E.Sub) and type(b) is IntImm and b.value == 0:
                return a
            if t is E.Add and type(a) is IntImm and a.value == 0:
                return b
            if t in (E.Mul, E.FloorDiv) and type(b) is IntImm and b.value == 1:
                return a
            if t is E.Mul and type(a) is IntImm and a.value == 1:
                return b
        if t in (E.Min, E.Max) and an.atoms.same(a, b):
            return a
        if a is e.a and b is e.b:
            return e
        return t(a, b, d)

    def _visit_minmax(self, e):
        if e.dtype in CANONICAL_DTYPES:
            # The canonical form decides index min/max from the bounds of a - b.
            canonical = self.analyzer.canonical_simplify
            return canonical.rebuild(canonical.canon(e), e.dtype)
        return self._visit_binary(e)

    def _visit_cmp(self, e):
        an = self.analyzer
        t = type(e)
        if e.a.dtype in CANONICAL_DTYPES:
            canonical = an.canonical_simplify
            sa, sb = canonical.canon(e.a), canonical.canon(e.b)
            diff = sum_add(sa, sb, -1)
            decided = decide_cmp(t, an.const_int_bound.sum_bound(diff))
            if decided is None and an.int_set.sym_ranges:
                decided = an.int_set.decide(t, diff, e.a.dtype)
            if decided is not None:
                return const_bool(decided)
            a, b = canonical.rebuild(sa, e.a.dtype), canonical.rebuild(sb, e.b.dtype)
        else:
            a, b = an.simplify(e.a), an.simplify(e.b)
            if is_const(a) and is_const(b):
                return fold_compare(t, a, b)
            if dt.is_int(a.dtype) or a.dtype == "bool":
                bound = an.const_int_bound.bound
                decided = decide_cmp(t, iv_add(bound(a), iv_scale(bound(b), -1)))
                if decided is not None:
                    return const_bool(decided)
                if t in (E.EQ, E.NE) and an.atoms.same(a, b):
                    return const_bool(t is E.EQ)
        if a is e.a and b is e.b:
            return e
        return t(a, b, e.dtype)

    def _visit_and_or(self, e):
        an = self.analyzer
        is_and = type(e) is E.And
        a = an.simplify(e.a)
        if type(a) is IntImm:
            # Both operands are pure, so short-circuiting changes no behaviour.
            if bool(a.value) != is_and:
                return const_bool(not is_and)
            return an.simplify(e.b)
        b = an.simplify(e.b)
        if type(b) is IntImm:
            return a if bool(b.value) == is_and else const_bool(not is_and)
        if an.atoms.same(a, b):
            return a
        if a is e.a and b is e.b:
            return e
        return type(e)(a, b, e.dtype)

    def _visit_not(self, e):
        an = self.analyzer
        a = an.simplify(e.a)
        if type(a) is IntImm:
            return const_bool(not a.value)
        if type(a) is E.Not:
            return a.a
        t = type(a)
        if t in _CMP_NEGATE and (t in (E.EQ, E.NE) or not dt.is_float(a.a.dtype)):
            return _CMP_NEGATE[t](a.a, a.b, a.dtype)
        return e if a is e.a else E.Not(a, e.dtype)

    def _visit_select(self, e):
        an = self.analyzer
        c = an.simplify(e.cond)
        if type(c) is IntImm:
            return an.simplify(e.true_value if c.value else e.false_value)
        tv, fv = an.simplify(e.true_value), an.simplify(e.false_value)
        if an.atoms.same(tv, fv):
            return tv
        if c is e.cond and tv is e.true_value and fv is e.false_value:
            return e
        return E.Select(c, tv, fv, e.dtype)

    def _visit_cast(self, e):
        an = self.analyzer
        v = an.simplify(e.value)
        d = e.dtype
        if v.dtype == d:
            return v
        folded = fold_cast(v, d)
        if folded is not None:
            return folded
        return e if v is e.value else E.Cast(d, v)

    def _visit_let(self, e):
        an = self.analyzer
        v = an.simplify(e.value)
        if type(v) in (IntImm, E.FloatImm, Var):
            return an.simplify(substitute(e.body, {e.var: v}))
        body = an.simplify(e.body)
        if v is e.value and body is e.body:
            return e
        return E.Let(e.var, v, body, e.dtype)


_VISIT = {
    E.Add: RewriteSimplifier._visit_binary,
    E.Sub: RewriteSimplifier._visit_binary,
    E.Mul: RewriteSimplifier._visit_binary,
    E.Div: RewriteSimplifier._visit_binary,
    E.FloorDiv: RewriteSimplifier._visit_binary,
    E.FloorMod: RewriteSimplifier._visit_binary,
    E.Min: RewriteSimplifier._visit_minmax,
    E.Max: RewriteSimplifier._visit_minmax,
    E.EQ: RewriteSimplifier._visit_cmp,
    E.NE: RewriteSimplifier._visit_cmp,
    E.LT: RewriteSimplifier._visit_cmp,
    E.LE: RewriteSimplifier._visit_cmp,
    E.GT: RewriteSimplifier._visit_cmp,
    E.GE: RewriteSimplifier._visit_cmp,
    E.And: RewriteSimplifier._visit_and_or,
    E.Or: RewriteSimplifier._visit_and_or,
    E.Not: RewriteSimplifier._visit_not,
    E.Select: RewriteSimplifier._visit_select,
    E.Cast: RewriteSimplifier._visit_cast,
    E.Let: RewriteSimplifier._visit_let,
}


__all__ = ["RewriteSimplifier"]
