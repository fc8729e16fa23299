"""Symbolic intervals: the range of an expression while some variables vary.

``io*8 + ii`` with ``ii`` in ``[0, 7]`` ranges over ``[io*8, io*8 + 7]``: the interval's
ends are expressions in the variables that stay fixed. This is what bound inference needs
to size a consumer's region of a producer. Affine expressions get exact intervals;
floordiv/floormod by constants, min/max, select and products get sound
over-approximations, falling back to constant bounds where a symbolic end is unknown.

This part holds the symbolic ranges of the loop variables in scope (``sym_ranges``), with
which it decides comparisons that constant bounds cannot (``i < n`` inside
``for i in range(n)``), and the state of one :meth:`IntSetAnalyzer.interval` query. It
reaches its siblings through the analyzer: ``canonical_simplify`` for the sums whose
intervals it takes, ``const_int_bound`` for signs and lost ends, ``atoms`` for the
variables of an atom.
"""

from __future__ import annotations

from .. import expr as E
from ..expr import PrimExpr, Var
from .canonical import CANONICAL_DTYPES
from .interval import UNBOUNDED, decide_cmp
from .sum_expr import SumExpr, const_sum, split_multiple, sum_add


class IntSetAnalyzer:
    """Symbolic intervals, the ``int_set`` part of :class:`~tecomp.ir.arith.Analyzer`."""

    def __init__(self, analyzer):
        self.analyzer = analyzer
        #: Loop variables with symbolic ranges [lo, hi] (expressions), used to decide
        #: comparisons that constant bounds cannot (``i < n`` inside ``for i in range(n)``).
        self.sym_ranges: dict = {}
        self._ranges = None  # the ranges of the query under way

    def interval(self, e: PrimExpr, ranges: dict) -> tuple:
        """See :func:`tecomp.ir.arith.eval_interval`. The constant bounds of the ranged
        variables join the analyzer's scope and stay there."""
        an = self.analyzer
        e = E.as_expr(e)
        if e.dtype not in CANONICAL_DTYPES:
            b = an.bound(e)
            return tuple(None if x is None else E.make_const(x, e.dtype) for x in b)
        rng = {}
        for v, (lo, hi) in ranges.items():
            v = v.var if isinstance(v, E.IterVar) else v
            rng[v] = (E.as_expr(lo, v.dtype), E.as_expr(hi, v.dtype))
        # Constant bounds of the ranged variables sharpen floordiv and min/max below.
        for v, (lo, hi) in rng.items():
            an.push_bound(v, (an.bound(lo)[0], an.bound(hi)[1]))
        self._ranges = rng
        self._ranged = frozenset(rng)
        self._iv_memo: dict = {}
        self._expanding: set = set()
        canonical = an.canonical_simplify
        try:
            lo, hi = self._sum_interval(canonical.canon(e))
        finally:
            self._ranges = None
        d = e.dtype
        return (
            None if lo is None else an.simplify(canonical.rebuild(lo, d)),
            None if hi is None else an.simplify(canonical.rebuild(hi, d)),
        )

    def decide(self, t, diff: SumExpr, dtype: str) -> bool | None:
        """Decide ``diff OP 0`` (``t`` the comparison's node class) over the symbolic
        ranges of the loop variables it uses; None if undecided."""
        an = self.analyzer
        used = set()
        for m in diff.terms:
            for a in m:
                used |= an.atoms.vars_of(a)
        if not used & self.sym_ranges.keys():
            return None
        # On a fork: a query adds the ranged variables' bounds to its analyzer's scope,
        # which must not leak into this one (nor disturb a query it is in the middle of).
        sub = an.fork()
        lo, hi = sub.interval(an.canonical_simplify.rebuild(diff, dtype), self.sym_ranges)
        lo_c = None if lo is None else sub.bound(lo)[0]
        hi_c = None if hi is None else sub.bound(hi)[1]
        return decide_cmp(t, (lo_c, hi_c))

    def _sum_interval(self, s: SumExpr) -> tuple:
        vars_of = self.analyzer.atoms.vars_of
        lo = hi = const_sum(s.const)
        for m, k in s.terms.items():
            if not any(vars_of(a) & self._ranged for a in m):
                t = SumExpr({m: k}, 0)
                lo = None if lo is None else sum_add(lo, t)
                hi = None if hi is None else sum_add(hi, t)
                continue
            ml, mh = self._mono_interval(m)
            if k < 0:
                ml, mh = mh, ml
            lo = None if lo is None or ml is None else sum_add(lo, ml, k)
            hi = None if hi is None or mh is None else sum_add(hi, mh, k)
            if lo is None and hi is None:
                break
        return lo, hi

    def _mono_interval(self, m: tuple) -> tuple:
        res = self._atom_interval(m[0])
        for a in m[1:]:
            res = self._iv_mul_sym(res, self._atom_interval(a))
        if res[0] is None or res[1] is None:
            # Fall back to the constant bounds of the whole product for a lost side.
            cb = self.analyzer.const_int_bound.sum_bound(SumExpr({m: 1}, 0))
            res = (
                res[0] if res[0] is not None else (None if cb[0] is None else const_sum(cb[0])),
                res[1] if res[1] is not None else (None if cb[1] is None else const_sum(cb[1])),
            )
        return res

    def _expr_interval(self, e) -> tuple:
        an = self.analyzer
        if e.dtype in CANONICAL_DTYPES:
            return self._sum_interval(an.canonical_simplify.canon(e))
        b = an.bound(e)
        return tuple(None if x is None else const_sum(x) for x in b)

    def _atom_interval(self, a) -> tuple:
        hit = self._iv_memo.get(a)
        if hit is not None:
            return hit
        if not (self.analyzer.atoms.vars_of(a) & self._ranged):
            res = (SumExpr({(a,): 1}, 0),) * 2
        elif type(a) is Var:
            res = self._var_interval(a)
        else:
            res = self._compound_interval(a)
        self._iv_memo[a] = res
        return res

    def _var_interval(self, v: Var) -> tuple:
        lo_e, hi_e = self._ranges[v]
        if v in self._expanding:  # a cyclic range: only constants are safe
            b = self.analyzer.const_int_bound.bounds.get(v, UNBOUNDED)
            return tuple(None if x is None else const_sum(x) for x in b)
        self._expanding.add(v)
        try:
            lo = self._expr_interval(lo_e)[0]
            hi = self._expr_interval(hi_e)[1]
        finally:
            self._expanding.discard(v)
        return lo, hi

    def _compound_interval(self, a) -> tuple:
        canonical = self.analyzer.canonical_simplify
        t, d = type(a), a.dtype
        info = canonical.div_info(a)
        if info is not None:
            il, ih = self._sum_interval(info.num)
            c = info.c
            if not info.is_mod:
                # floor(x / c) is non-decreasing in x.
                return (
                    None if il is None else canonical.div_const(il, c, d),
                    None if ih is None else canonical.div_const(ih, c, d),
                )
            if il is not None and ih is not None:
                ql, qh = canonical.div_const(il, c, d), canonical.div_const(ih, c, d)
                if sum_add(qh, ql, -1).is_const() and sum_add(qh, ql, -1).const == 0:
                    # One period: x % c == x - c*q with the same q at both ends.
                    return sum_add(il, ql, -c), sum_add(ih, ql, -c)
            return const_sum(0), const_sum(c - 1)
        if t in (E.FloorDiv, E.FloorMod):
            res = self._divmod_symbolic_interval(a)
            if res is not None:
                return res
        if t in (E.Min, E.Max):
            (al, ah), (bl, bh) = self._expr_interval(a.a), self._expr_interval(a.b)
            if t is E.Min:
                return self._sym_minmax(E.Min, al, bl, True), self._sym_minmax(E.Min, ah, bh, False)
            return self._sym_minmax(E.Max, al, bl, True), self._sym_minmax(E.Max, ah, bh, False)
        if t is E.Select:
            (tl, th), (fl, fh) = (
                self._expr_interval(a.true_value),
                self._expr_interval(a.false_value),
            )
            return self._sym_minmax(E.Min, tl, fl, True), self._sym_minmax(E.Max, th, fh, False)
        if t is E.Mul:
            return self._iv_mul_sym(self._expr_interval(a.a), self._expr_interval(a.b))
        b = self.analyzer.const_int_bound.atom_bound(a)
        return tuple(None if x is None else const_sum(x) for x in b)

    def _divmod_symbolic_interval(self, a) -> tuple | None:
        """``x // y`` and ``x % y`` for a divisor ``y`` that stays fixed and is at least 1
        (a tile count such as ``(n + 7) // 8``): ``x % y`` lies in ``[0, y - 1]``, and an
        end ``q*y + r`` of ``x`` (r constant) gives ``q + r // y``, which for ``y >= 1``
        lies in ``[q + min(r, 0), q + max(r, -1)]``. So a loop over ``32*y`` chunks split
        as ``f // y`` and ``f % y`` has its parts in ``[0, 31]`` and ``[0, y - 1]``. None
        when the divisor varies or may be below 1."""
        an = self.analyzer
        if an.atoms.vars_of(a.b) & self._ranged:
            return None
        canonical = an.canonical_simplify
        y = canonical.canon(a.b)
        lo_b = an.bound(a.b)[0]
        if lo_b is None or lo_b < 1:
            return self._below_divisor_interval(a, y)
        if type(a) is E.FloorMod:
            return const_sum(0), sum_add(y, const_sum(1), -1)
        ends = []
        for end, low in zip(self._sum_interval(canonical.canon(a.a)), (True, False)):
            split = None if end is None else split_multiple(end, y)
            if split is None or not split[1].is_const():
                return None
            q, r = split[0], split[1].const
            ends.append(sum_add(q, const_sum(min(r, 0) if low else max(r, -1))))
        return tuple(ends)

    def _below_divisor_interval(self, a, y: SumExpr) -> tuple | None:
        """``x // y`` and ``x % y`` for a divisor that may be 0 (a tile count of a size
        that may be 0, such as ``(n - 1) // 64 + 1``), where ``x`` is known to lie in
        ``[0, y - 1]``: ``x`` then takes a value only where ``y >= 1``, so the quotient is
        0 and the remainder ``x``. A chunk loop of ``y`` iterations split by its own
        extent has its parts in ``[0, 0]`` and ``[0, y - 1]``. None otherwise."""
        bounds = self.analyzer.const_int_bound
        lo, hi = self._sum_interval(self.analyzer.canonical_simplify.canon(a.a))
        if lo is None or hi is None:
            return None
        lo_c, hi_past = bounds.sum_bound(lo)[0], bounds.sum_bound(sum_add(hi, y, -1))[1]
        if lo_c is None or lo_c < 0 or hi_past is None or hi_past >= 0:
            return None
        if type(a) is E.FloorMod:
            return lo, hi
        return const_sum(0), const_sum(0)

    def _sym_minmax(self, cls, x, y, low_side: bool):
        """min/max of two interval ends (None = infinite towards ``low_side``)."""
        if x is None or y is None:
            # min of a -inf low end is -inf; min of a +inf high end is the other end.
            keep_other = (cls is E.Min) != low_side
            if not keep_other:
                return None
            return y if x is None else x
        d = (
            "int64"
            if any(getattr(a, "dtype", "int32") == "int64" for m in x.terms for a in m)
            else "int32"
        )
        canonical = self.analyzer.canonical_simplify
        return canonical.canon(cls(canonical.rebuild(x, d), canonical.rebuild(y, d), d))

    def _sign(self, s) -> int:
        if s is None:
            return 0
        lo, hi = self.analyzer.const_int_bound.sum_bound(s)
        if lo is not None and lo >= 0:
            return 1
        if hi is not None and hi <= 0:
            return -1
        return 0

    def _iv_mul_sym(self, a: tuple, b: tuple) -> tuple:
        """[al, ah] * [bl, bh] for symbolic ends whose signs are known; ends with unknown
        sign give None (the caller then uses constant bounds)."""
        al, ah = a
        bl, bh = b
        b_nonneg, b_nonpos = self._sign(bl) > 0, self._sign(bh) < 0
        if not (b_nonneg or b_nonpos):
            if self._sign(al) > 0 or self._sign(ah) < 0:
                return self._iv_mul_sym(b, a)
            return None, None
        # With y of one sign, x*y is monotone in x, so each end of the product comes from
        # one end of x; which end of y it pairs with depends on that x end's own sign.
        if b_nonneg:
            lo_pair = {1: (al, bl), -1: (al, bh)}.get(self._sign(al))
            hi_pair = {1: (ah, bh), -1: (ah, bl)}.get(self._sign(ah))
        else:
            lo_pair = {1: (ah, bl), -1: (ah, bh)}.get(self._sign(ah))
            hi_pair = {1: (al, bh), -1: (al, bl)}.get(self._sign(al))
        multiply = self.analyzer.canonical_simplify.multiply
        out = []
        for pair in (lo_pair, hi_pair):
            if pair is None or pair[0] is None or pair[1] is None:
                out.append(None)
            else:
                out.append(multiply(pair[0], pair[1]))
        return tuple(out)


__all__ = ["IntSetAnalyzer"]
