"""Constant integer bounds of expressions under bounds of their variables.

The bound of a canonical sum is the sum of its terms' bounds; an atom's bound comes from
its variables' bounds (loop ranges, facts of enclosing conditions) or, for a node that is
not a sum, from its children through the interval arithmetic of :mod:`.interval`. Bounds
are sound, not always tight. A narrow integer dtype's value may wrap, so an expression of
one is never bounded tighter than its dtype unless its children fit.

This part holds the variable bounds of the analyzer's scope. It reaches its siblings
through the analyzer: ``canonical_simplify`` for the canonical sum of an index
expression and what a floordiv/floormod atom divides.
"""

from __future__ import annotations

from .. import dtype as dt
from .. import expr as E
from ..expr import IntImm, Var
from .canonical import CANONICAL_DTYPES
from .interval import (
    UNBOUNDED,
    dtype_interval,
    iv_add,
    iv_floordiv,
    iv_floormod,
    iv_intersect,
    iv_max,
    iv_min,
    iv_mul,
    iv_scale,
    iv_union,
    within,
)
from .sum_expr import SumExpr

_MISSING = object()


class ConstIntBoundAnalyzer:
    """Constant bounds, the ``const_int_bound`` part of :class:`~tecomp.ir.arith.Analyzer`.

    ``bounds`` maps a Var to its inclusive ``(lo, hi)`` constants (None: unbounded) in the
    current scope; atoms' bounds are memoised until the scope changes.
    """

    def __init__(self, analyzer, bounds=None):
        self.analyzer = analyzer
        self.bounds: dict = {}
        for v, iv in (bounds or {}).items():
            self.bounds[v if type(v) is Var else v.var] = iv
        self._atom_memo: dict = {}

    # -- scope -----------------------------------------------------------------------------

    def push(self, v: Var, iv) -> object:
        """Bound ``v`` by ``iv`` too (intersected with what is known); returns a token
        for :meth:`pop`."""
        old = self.bounds.get(v, _MISSING)
        self.bounds[v] = tuple(iv) if old is _MISSING else iv_intersect(old, iv)
        self._atom_memo = {}
        return old

    def pop(self, v: Var, token) -> None:
        """Restore the bounds of ``v`` from before the :meth:`push` that gave ``token``."""
        if token is _MISSING:
            self.bounds.pop(v, None)
        else:
            self.bounds[v] = token
        self._atom_memo = {}

    # -- bounds ----------------------------------------------------------------------------

    def bound(self, e) -> tuple:
        """Inclusive constant bounds of ``e`` under the current scope."""
        e = E.as_expr(e)
        if e.dtype in CANONICAL_DTYPES:
            return self.sum_bound(self.analyzer.canonical_simplify.canon(e))
        return self._node_bound(e)

    def sum_bound(self, s: SumExpr) -> tuple:
        """Inclusive constant bounds of a canonical sum."""
        lo = hi = s.const
        for m, k in s.terms.items():
            if len(m) == 1:
                b = self.atom_bound(m[0])
            else:
                b = self.atom_bound(m[0])
                for a in m[1:]:
                    b = iv_mul(b, self.atom_bound(a))
            b = iv_scale(b, k)
            lo = None if lo is None or b[0] is None else lo + b[0]
            hi = None if hi is None or b[1] is None else hi + b[1]
            if lo is None and hi is None:
                break
        return lo, hi

    def atom_bound(self, a) -> tuple:
        """Inclusive constant bounds of an atom of a canonical sum."""
        hit = self._atom_memo.get(a)
        if hit is not None:
            return hit
        if type(a) is Var:
            b = self.bounds.get(a, UNBOUNDED)
        else:
            info = self.analyzer.canonical_simplify.div_info(a)
            if info is not None:
                nb = self.sum_bound(info.num)
                c = (info.c, info.c)
                b = iv_floormod(nb, c) if info.is_mod else iv_floordiv(nb, c)
            else:
                b = self._node_bound(a)
        self._atom_memo[a] = b
        return b

    def _node_bound(self, e) -> tuple:
        """Bounds of a node from the bounds of its children (never through its own
        canonical form, which may be this very node as an atom)."""
        t = type(e)
        if t is IntImm:
            return e.value, e.value
        if t is Var:
            return self.bounds.get(e, UNBOUNDED)
        d = e.dtype
        if d == "bool":
            return 0, 1
        if not (dt.is_int(d)):
            return UNBOUNDED
        narrow = dtype_interval(d)
        if t is E.Add:
            b = iv_add(self.bound(e.a), self.bound(e.b))
        elif t is E.Sub:
            b = iv_add(self.bound(e.a), iv_scale(self.bound(e.b), -1))
        elif t is E.Mul:
            b = iv_mul(self.bound(e.a), self.bound(e.b))
        elif t is E.FloorDiv:
            b = iv_floordiv(self.bound(e.a), self.bound(e.b))
        elif t is E.FloorMod:
            b = iv_floormod(self.bound(e.a), self.bound(e.b))
        elif t is E.Min:
            b = iv_min(self.bound(e.a), self.bound(e.b))
        elif t is E.Max:
            b = iv_max(self.bound(e.a), self.bound(e.b))
        elif t is E.Select:
            b = iv_union(self.bound(e.true_value), self.bound(e.false_value))
        elif t is E.Cast:
            src = e.value.dtype
            b = self.bound(e.value) if (dt.is_int(src) or src == "bool") else narrow
        elif t is E.Let:
            b = self.bound(e.body)
        else:
            return narrow
        if narrow != UNBOUNDED and not within(b, narrow):
            return narrow  # the value may wrap around in a narrow dtype
        return b


__all__ = ["ConstIntBoundAnalyzer"]
