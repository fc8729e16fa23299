"""The canonical sum-of-products form of integer index expressions.

Integer index expressions (int32/int64) are put into a canonical *sum of products*
(:class:`.SumExpr`)

    c + k1 * (a11 * a12 ...) + k2 * (a21 ...) + ...

over *atoms*: variables and the nodes that are not sums (floordiv/floormod that did not
dissolve, min, max, select, loads, casts, calls). Like terms are collected, constants
folded, and the result is rebuilt compactly with terms in atom order: loop variables
outermost first (as the statement simplifier declares them), then other atoms by first
appearance, so ``io*512 + ii*64 + j``.

Floor division and modulo by a positive constant ``c`` split the sum into a part whose
coefficients are multiples of ``c`` (which leaves the division exactly) and a remainder
``r``; if the constant bounds of ``r`` lie within one period the division folds. Every
rewrite is exact over the integers for all values, or guarded by a bound proof; nothing
is rewritten on a guess. Integer arithmetic is assumed not to overflow (as in TVM and
Halide).

This part holds the canonical forms met so far (memoised until the scope changes) and
what each floordiv/floormod atom divides. It reaches its siblings through the analyzer:
``atoms`` to intern atoms and order terms, ``const_int_bound`` for the bounds that decide
a division or a min/max, ``rewrite_simplify`` for the nodes that are not sums, and
``int_set`` to decide ``0 <= r < y`` over the symbolic ranges of loop variables.
"""

from __future__ import annotations

from math import gcd

from .. import expr as E
from ..expr import IntImm, PrimExpr, Var
from ..functor import collect_vars
from .sum_expr import SumExpr, const_sum, split_multiple, sum_add, sum_add_const, sum_scale

#: dtypes that get the canonical sum-of-products treatment (index arithmetic).
CANONICAL_DTYPES = frozenset({"int32", "int64"})


class DivInfo:
    """What a floordiv/floormod-by-constant atom means: ``num // c`` or ``num % c`` with
    ``num`` the canonical numerator (``num_rep`` its interned expression)."""

    __slots__ = ("c", "is_mod", "num", "num_rep")

    def __init__(self, num: SumExpr, c: int, num_rep, is_mod: bool):
        self.num, self.c, self.num_rep, self.is_mod = num, c, num_rep, is_mod


class CanonicalSimplifier:
    """Canonical sums, the ``canonical_simplify`` part of
    :class:`~tecomp.ir.arith.Analyzer`: builds, divides and rebuilds them."""

    def __init__(self, analyzer):
        self.analyzer = analyzer
        self._memo: dict = {}  # id(expr) -> (expr, its sum); bounds decide divisions
        self._div_info: dict = {}  # floordiv/floormod atom -> DivInfo
        self._div_atom: dict = {}  # (numerator rep, c) -> floordiv atom

    def drop_memo(self) -> None:
        """Forget the forms computed so far (the bounds in scope changed)."""
        self._memo = {}

    def div_info(self, atom) -> DivInfo | None:
        """What ``atom`` divides, if it is a floordiv/floormod by a constant that this part
        made."""
        return self._div_info.get(atom)

    def canon(self, e: PrimExpr) -> SumExpr:
        """The canonical sum of an int32/int64 expression."""
        hit = self._memo.get(id(e))
        if hit is not None:
            return hit[1]
        fn = _CANON.get(type(e), CanonicalSimplifier._canon_other)
        s = fn(self, e)
        self._memo[id(e)] = (e, s)
        return s

    def _atom(self, node) -> SumExpr:
        atoms = self.analyzer.atoms
        r = atoms.rep(node)
        atoms.place(r)
        return SumExpr({(r,): 1}, 0)

    def _canon_int(self, e) -> SumExpr:
        return const_sum(e.value)

    def _canon_var(self, e) -> SumExpr:
        self.analyzer.atoms.place(e)
        return SumExpr({(e,): 1}, 0)

    def _canon_add(self, e) -> SumExpr:
        return self._merge_divmod(sum_add(self.canon(e.a), self.canon(e.b)))

    def _canon_sub(self, e) -> SumExpr:
        return self._merge_divmod(sum_add(self.canon(e.a), self.canon(e.b), -1))

    def _canon_mul(self, e) -> SumExpr:
        a, b = self.canon(e.a), self.canon(e.b)
        if b.is_const():
            return sum_scale(a, b.const)
        if a.is_const():
            return sum_scale(b, a.const)
        prod = self.multiply(a, b)
        if prod is not None:
            return prod
        return self._atom(E.Mul(self.rebuild(a, e.dtype), self.rebuild(b, e.dtype), e.dtype))

    def _canon_div(self, e) -> SumExpr:
        b = self.canon(e.b)
        if b.is_const() and b.const != 0:
            return self.div_const(self.canon(e.a), b.const, e.dtype)
        return self._divmod_symbolic(e, b)

    def _canon_mod(self, e) -> SumExpr:
        b = self.canon(e.b)
        if b.is_const() and b.const != 0:
            return self.mod_const(self.canon(e.a), b.const, e.dtype)
        return self._divmod_symbolic(e, b)

    def _divmod_symbolic(self, e, b: SumExpr) -> SumExpr:
        """x // y, x % y with a non-constant (or zero) divisor: with ``x == q*y + r`` where
        ``0 <= r < y`` is provable, ``x // y == q`` and ``x % y == r`` (what a flat index
        over an axis of symbolic extent ``y``, ``i*y + j`` with ``j`` in ``[0, y)``, leaves
        when it is split back into its axes)."""
        a = self.canon(e.a)
        split = None if b.is_const() else split_multiple(a, b)
        if split is not None and self._in_divisor_range(split[1], b, e.dtype):
            return split[1] if type(e) is E.FloorMod else split[0]
        ra, rb = self.rebuild(a, e.dtype), self.rebuild(b, e.dtype)
        return self._atom(type(e)(ra, rb, e.dtype))

    def _in_divisor_range(self, r: SumExpr, b: SumExpr, dtype: str) -> bool:
        """Whether ``0 <= r < b`` holds, from constant bounds or the symbolic ranges of
        the loop variables in scope (``j < n`` inside ``for j in range(n)``)."""
        bounds, int_set = self.analyzer.const_int_bound, self.analyzer.int_set
        diff = sum_add(r, b, -1)
        lo = bounds.sum_bound(r)[0]
        nonneg = lo is not None and lo >= 0
        if not nonneg and int_set.sym_ranges:
            nonneg = int_set.decide(E.GE, r, dtype) is True
        hi = bounds.sum_bound(diff)[1]
        below = hi is not None and hi < 0
        if not below and nonneg and int_set.sym_ranges:
            below = int_set.decide(E.LT, diff, dtype) is True
        return nonneg and below

    def _canon_minmax(self, e) -> SumExpr:
        is_min = type(e) is E.Min
        sa, sb = self.canon(e.a), self.canon(e.b)
        lo, hi = self.analyzer.const_int_bound.sum_bound(self._merge_divmod(sum_add(sa, sb, -1)))
        if hi is not None and hi <= 0:
            return sa if is_min else sb
        if lo is not None and lo >= 0:
            return sb if is_min else sa
        a, b = self.rebuild(sa, e.dtype), self.rebuild(sb, e.dtype)
        if type(a) is IntImm:
            a, b = b, a  # constants go to the right
        # min(min(x, c1), c2) -> min(x, min(c1, c2))
        if type(b) is IntImm and type(a) is type(e) and type(a.b) is IntImm:
            c = min(a.b.value, b.value) if is_min else max(a.b.value, b.value)
            return self._atom(type(e)(a.a, IntImm(c, e.dtype), e.dtype))
        return self._atom(type(e)(a, b, e.dtype))

    def _canon_other(self, e) -> SumExpr:
        res = self.analyzer.rewrite_simplify.rewrite(e)
        t = type(res)
        if t is IntImm:
            return const_sum(res.value)
        if res is not e and t in _CANON:
            return self.canon(res)
        return self._atom(res)

    def multiply(self, a: SumExpr, b: SumExpr) -> SumExpr | None:
        """The product of two sums, distributed, or None if it would grow too large."""
        if (len(a.terms) + 1) * (len(b.terms) + 1) > 36:
            return None
        order = self.analyzer.atoms.order
        items_a = list(a.terms.items()) + ([((), a.const)] if a.const else [])
        items_b = list(b.terms.items()) + ([((), b.const)] if b.const else [])
        terms: dict = {}
        for ma, ka in items_a:
            for mb, kb in items_b:
                m = tuple(sorted(ma + mb, key=order.__getitem__))
                terms[m] = terms.get(m, 0) + ka * kb
        const = terms.pop((), 0)
        return SumExpr({m: k for m, k in terms.items() if k}, const)

    def _merge_divmod(self, s: SumExpr) -> SumExpr:
        """Recombine floordiv/floormod pairs: ``(x//c)*c*k + (x%c)*k -> x*k``, and more
        generally use ``(x//c)*c == x - x%c`` whenever that makes the sum shorter (e.g.
        ``(n//8)*8 - n -> -(n%8)``, which then has tight bounds)."""
        if len(s.terms) < 2:
            return s
        for m, k in s.terms.items():
            if len(m) != 1:
                continue
            merged = self._merge_symbolic_divmod(s, m, k)
            if merged is not None:
                return self._merge_divmod(merged)
            info = self._div_info.get(m[0])
            if info is None:
                continue
            if info.is_mod:
                d = self._div_atom.get((info.num_rep, info.c))
                if d is None or s.terms.get((d,)) != k * info.c:
                    continue
                terms = dict(s.terms)
                del terms[m]
                del terms[(d,)]
                return self._merge_divmod(sum_add(SumExpr(terms, s.const), sum_scale(info.num, k)))
            if k % info.c:
                continue
            # k*(x//c) == (k/c)*(x - x%c)
            kc = k // info.c
            terms = dict(s.terms)
            del terms[m]
            dtype = m[0].dtype
            alt = sum_add(
                sum_add(SumExpr(terms, s.const), info.num, kc),
                self.mod_const(info.num, info.c, dtype),
                -kc,
            )
            if len(alt.terms) < len(s.terms):
                return self._merge_divmod(alt)
        return s

    def _merge_symbolic_divmod(self, s: SumExpr, m: tuple, k: int) -> SumExpr | None:
        """``k*(x % y) + k*y*(x // y) -> k*x`` for a variable divisor ``y`` (what fusing
        axes of symbolic extent leaves in an index), or None if ``s`` has no such pair."""
        mod = m[0]
        if type(mod) is not E.FloorMod or type(mod.b) is not Var:
            return None
        atoms = self.analyzer.atoms
        div = atoms.rep(E.FloorDiv(mod.a, mod.b, mod.dtype))
        order = atoms.order
        if div not in order or mod.b not in order:
            return None
        mono = tuple(sorted((div, mod.b), key=order.__getitem__))
        if s.terms.get(mono) != k:
            return None
        terms = dict(s.terms)
        del terms[m]
        del terms[mono]
        return sum_add(SumExpr(terms, s.const), sum_scale(self.canon(mod.a), k))

    def div_const(self, s: SumExpr, c: int, dtype: str) -> SumExpr:
        """Canonical ``s // c`` for a non-zero constant ``c`` (floor division)."""
        if c < 0:
            # x // c == (-x) // (-c): both are the floor of the same rational.
            return self.div_const(sum_scale(s, -1), -c, dtype)
        if c == 1:
            return s
        q_terms, r_terms = {}, {}
        for m, k in s.terms.items():
            if k % c == 0:
                q_terms[m] = k // c
            else:
                r_terms[m] = k
        qc, rc = divmod(s.const, c)
        q = SumExpr(q_terms, qc)
        if not r_terms:
            return q  # rc // c == 0 as 0 <= rc < c
        # s == c*q + r exactly, so s // c == q + r // c.
        r = SumExpr(r_terms, rc)
        lo, hi = self.analyzer.const_int_bound.sum_bound(r)
        if lo is not None and hi is not None and lo // c == hi // c:
            return sum_add_const(q, lo // c)
        g = gcd(c, *r_terms.values())
        if g > 1:
            # r == g*r2 + b with 0 <= b < g, hence r // c == r2 // (c/g).
            r2 = SumExpr({m: k // g for m, k in r_terms.items()}, rc // g)
            return sum_add(q, self.div_const(r2, c // g, dtype))
        if len(r_terms) == 1:
            ((m, k),) = r_terms.items()
            info = self._div_info.get(m[0]) if len(m) == 1 and k == 1 else None
            if info is not None and not info.is_mod:
                # (x // c1 + rc) // c == (x + rc*c1) // (c1*c) for c1, c > 0.
                num = sum_add_const(info.num, rc * info.c)
                return sum_add(q, self.div_const(num, info.c * c, dtype))
        return sum_add(q, self._divmod_atom(r, c, dtype, is_mod=False))

    def mod_const(self, s: SumExpr, c: int, dtype: str) -> SumExpr:
        """Canonical ``s % c`` for a non-zero constant ``c`` (floor modulo: sign of c)."""
        if c < 0:
            # x % c == -((-x) % (-c)) for floor modulo.
            return sum_scale(self.mod_const(sum_scale(s, -1), -c, dtype), -1)
        if c == 1:
            return const_sum(0)
        r_terms = {m: k for m, k in s.terms.items() if k % c}
        rc = s.const % c
        if not r_terms:
            return const_sum(rc)
        r = SumExpr(r_terms, rc)
        lo, hi = self.analyzer.const_int_bound.sum_bound(r)
        if lo is not None and hi is not None and lo // c == hi // c:
            return sum_add_const(r, -c * (lo // c))
        g = gcd(c, *r_terms.values())
        if g > 1:
            # r == g*r2 + b with 0 <= b < g, hence r % c == g*(r2 % (c/g)) + b.
            r2 = SumExpr({m: k // g for m, k in r_terms.items()}, rc // g)
            inner = self.mod_const(r2, c // g, dtype)
            if not self._is_divmod_atom(inner):
                return sum_add_const(sum_scale(inner, g), rc % g)
            # Otherwise g*((...) % (c/g)) + b is no simpler than r % c: keep the latter.
        if len(r_terms) == 1:
            ((m, k),) = r_terms.items()
            info = self._div_info.get(m[0]) if len(m) == 1 and k == 1 else None
            if info is not None and info.is_mod and info.c % c == 0:
                # x % c1 == x (mod c) when c divides c1.
                return self.mod_const(sum_add_const(info.num, rc), c, dtype)
        return self._divmod_atom(r, c, dtype, is_mod=True)

    def _is_divmod_atom(self, s: SumExpr) -> bool:
        if s.const or len(s.terms) != 1:
            return False
        ((m, _),) = s.terms.items()
        return len(m) == 1 and m[0] in self._div_info

    def _divmod_atom(self, r: SumExpr, c: int, dtype: str, is_mod: bool) -> SumExpr:
        atoms = self.analyzer.atoms
        num = self.rebuild(r, dtype)
        cls = E.FloorMod if is_mod else E.FloorDiv
        atom = atoms.rep(cls(num, IntImm(c, dtype), dtype))
        if atom not in self._div_info:
            num_rep = atoms.rep(num)
            self._div_info[atom] = DivInfo(r, c, num_rep, is_mod)
            if not is_mod:
                self._div_atom.setdefault((num_rep, c), atom)
        atoms.place(atom)
        return SumExpr({(atom,): 1}, 0)

    def rebuild(self, s: SumExpr, dtype: str) -> PrimExpr:
        """An expression for the canonical sum: positive terms first, then the negative ones
        subtracted, then the constant."""
        if not s.terms:
            return IntImm(s.const, dtype)
        order = self.analyzer.atoms.order
        items = sorted(s.terms.items(), key=lambda mk: [order[a] for a in mk[0]])
        pos = [(m, k) for m, k in items if k > 0]
        neg = [(m, -k) for m, k in items if k < 0]
        const = s.const
        res = None
        for m, k in pos:
            t = _term(m, k, dtype)
            res = t if res is None else E.Add(res, t, dtype)
        if res is None:
            if const > 0:
                res, const = IntImm(const, dtype), 0
            else:
                m, k = neg.pop(0)
                res = E.Mul(_mono(m, dtype), IntImm(-k, dtype), dtype)
        for m, k in neg:
            res = E.Sub(res, _term(m, k, dtype), dtype)
        if const > 0:
            res = E.Add(res, IntImm(const, dtype), dtype)
        elif const < 0:
            res = E.Sub(res, IntImm(-const, dtype), dtype)
        return res

    def linear_coeff(self, e: PrimExpr, v: Var):
        """See :func:`tecomp.ir.arith.linear_coeff`."""
        an = self.analyzer
        e = E.as_expr(e)
        v = v.var if isinstance(v, E.IterVar) else v
        if e.dtype not in CANONICAL_DTYPES:
            if v in collect_vars(e):
                return None
            return E.make_const(0, e.dtype), an.simplify(e)
        s = self.canon(e)
        vars_of = an.atoms.vars_of
        coeff = const_sum(0)
        base = {}
        for m, k in s.terms.items():
            others = tuple(a for a in m if a is not v)
            if any(v in vars_of(a) for a in others):
                return None
            n = len(m) - len(others)
            if n == 0:
                base[m] = k
            elif n == 1:
                coeff = sum_add(coeff, SumExpr({others: k}, 0) if others else const_sum(k))
            else:
                return None
        d = e.dtype
        return self.rebuild(coeff, d), self.rebuild(SumExpr(base, s.const), d)


def _mono(m: tuple, dtype: str) -> PrimExpr:
    res = m[0]
    for a in m[1:]:
        res = E.Mul(res, a, dtype)
    return res


def _term(m: tuple, k: int, dtype: str) -> PrimExpr:
    res = _mono(m, dtype)
    return res if k == 1 else E.Mul(res, IntImm(k, dtype), dtype)


_CANON = {
    IntImm: CanonicalSimplifier._canon_int,
    Var: CanonicalSimplifier._canon_var,
    E.Add: CanonicalSimplifier._canon_add,
    E.Sub: CanonicalSimplifier._canon_sub,
    E.Mul: CanonicalSimplifier._canon_mul,
    E.FloorDiv: CanonicalSimplifier._canon_div,
    E.FloorMod: CanonicalSimplifier._canon_mod,
    E.Min: CanonicalSimplifier._canon_minmax,
    E.Max: CanonicalSimplifier._canon_minmax,
}


__all__ = ["CANONICAL_DTYPES", "CanonicalSimplifier", "DivInfo"]
