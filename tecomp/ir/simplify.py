"""Arithmetic simplification of loop-IR expressions and statements.

Integer index expressions (int32/int64) are put into a canonical *sum of products*

    c + k1 * (a11 * a12 ...) + k2 * (a21 ...) + ...

over *atoms*: variables and the nodes that are not sums (floordiv/floormod that did not
dissolve, min, max, select, loads, casts, calls). Like terms are collected, constants
folded, and the result is rebuilt compactly with terms in atom order: loop variables
outermost first (as :func:`simplify_stmt` declares them), then other atoms by first
appearance, so ``io*512 + ii*64 + j``.

Floor division and modulo by a positive constant ``c`` split the sum into a part whose
coefficients are multiples of ``c`` (which leaves the division exactly) and a remainder
``r``; if the constant bounds of ``r`` lie within one period the division folds. Every
rewrite is exact over the integers for all values, or guarded by a bound proof; nothing is
rewritten on a guess. Floats are only constant-folded (rounded to their dtype) and only
the IEEE-exact identities ``x*1.0``, ``x/1.0``, ``x-0.0``, ``x+(-0.0)`` are applied;
floats are never reassociated.

Statements: :func:`simplify_stmt` walks the tree carrying each loop variable's bounds,
folds decided branches, drops loops of extent 1 (substituting the minimum), substitutes
trivial lets and flattens sequences. Work is memoised per node, and equal subtrees are
hash-consed, so a nest of ~10 loops with a few hundred index expressions takes a few ms.

Integer arithmetic is assumed not to overflow (as in TVM and Halide).
"""

from __future__ import annotations

import math
from math import gcd

from . import dtype as dt
from . import expr as E
from . import stmt as S
from .arith import (
    UNBOUNDED,
    dtype_interval,
    iv_floordiv,
    iv_floormod,
    iv_intersect,
    iv_max,
    iv_min,
    iv_mul,
    iv_scale,
    iv_union,
    structural_equal,
)
from .expr import IntImm, PrimExpr, Var
from .functor import IRMutator, collect_vars, substitute

#: dtypes that get the canonical sum-of-products treatment (index arithmetic).
CANONICAL_DTYPES = frozenset({"int32", "int64"})

_MISSING = object()


# ---- canonical sums ------------------------------------------------------------------------


class _Sum:
    """``const + Σ coeff * Π monomial``: ``terms`` maps a monomial (a tuple of atoms sorted
    by first appearance) to its non-zero integer coefficient. Never mutated once built."""

    __slots__ = ("const", "terms")

    def __init__(self, terms: dict, const: int):
        self.terms = terms
        self.const = const

    def is_const(self) -> bool:
        return not self.terms


_EMPTY: dict = {}


def _const_sum(c: int) -> _Sum:
    return _Sum(_EMPTY, c)


def _add(a: _Sum, b: _Sum, k: int = 1) -> _Sum:
    """a + k*b."""
    if not b.terms:
        return _Sum(a.terms, a.const + k * b.const)
    if not a.terms and k == 1:
        return _Sum(b.terms, a.const + b.const)
    terms = dict(a.terms)
    for m, c in b.terms.items():
        v = terms.get(m, 0) + k * c
        if v:
            terms[m] = v
        else:
            del terms[m]
    return _Sum(terms, a.const + k * b.const)


def _add_const(a: _Sum, c: int) -> _Sum:
    return _Sum(a.terms, a.const + c) if c else a


def _scale(a: _Sum, k: int) -> _Sum:
    if k == 1:
        return a
    if k == 0:
        return _const_sum(0)
    return _Sum({m: c * k for m, c in a.terms.items()}, a.const * k)


class _DivInfo:
    """What a floordiv/floormod-by-constant atom means: ``num // c`` or ``num % c`` with
    ``num`` the canonical numerator (``num_rep`` its interned expression)."""

    __slots__ = ("c", "is_mod", "num", "num_rep")

    def __init__(self, num: _Sum, c: int, num_rep, is_mod: bool):
        self.num, self.c, self.num_rep, self.is_mod = num, c, num_rep, is_mod


# ---- constant folding helpers --------------------------------------------------------------


def _wrap_int(v: int, dtype: str) -> int:
    """``v`` as the dtype holds it (two's complement wrap); index dtypes are not wrapped
    because the canonical form reasons over mathematical integers."""
    if dtype == "bool":
        return int(bool(v))
    if dtype in CANONICAL_DTYPES:
        return v
    b = dt.bits(dtype)
    v &= (1 << b) - 1
    if dt.is_signed(dtype) and v >= 1 << (b - 1):
        v -= 1 << b
    return v


def _round_float(x: float, dtype: str) -> float:
    """``x`` rounded to ``dtype``. Rounding an exact double result of one + - * / to a
    narrower float gives the correctly rounded narrow result, so folding in doubles is
    exact."""
    if dtype == "float64":
        return x
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.dtype(dtype).type(x))


def _fold_float(cls, x: float, y: float):
    if cls is E.Add:
        return x + y
    if cls is E.Sub:
        return x - y
    if cls is E.Mul:
        return x * y
    if cls is E.Div:
        return None if y == 0.0 else x / y
    if cls in (E.Min, E.Max):
        if math.isnan(x) or math.isnan(
            y
        ):  # NaN: target min/max semantics differ, leave it to runtime
            return None
        if x == y:  # min(0.0, -0.0) is target-defined too
            return x if str(x) == str(y) else None
        return min(x, y) if cls is E.Min else max(x, y)
    return None


def _fold_int(cls, x: int, y: int):
    if cls is E.Add:
        return x + y
    if cls is E.Sub:
        return x - y
    if cls is E.Mul:
        return x * y
    if cls is E.FloorDiv:
        return None if y == 0 else x // y
    if cls is E.FloorMod:
        return None if y == 0 else x % y
    if cls is E.Min:
        return min(x, y)
    if cls is E.Max:
        return max(x, y)
    return None


_CMP_FOLD = {
    E.EQ: lambda x, y: x == y,
    E.NE: lambda x, y: x != y,
    E.LT: lambda x, y: x < y,
    E.LE: lambda x, y: x <= y,
    E.GT: lambda x, y: x > y,
    E.GE: lambda x, y: x >= y,
}

#: not (a OP b) == a NEG(OP) b, valid for integers (for floats only EQ/NE: NaN).
_CMP_NEGATE = {E.EQ: E.NE, E.NE: E.EQ, E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT}

_TRUE = IntImm(1, "bool")
_FALSE = IntImm(0, "bool")


def _bool(v: bool) -> IntImm:
    return _TRUE if v else _FALSE


def _is_const(e) -> bool:
    return type(e) is IntImm or type(e) is E.FloatImm


def _float_is(e, value: float, negative_zero: bool | None = None) -> bool:
    """Whether ``e`` is the float constant ``value`` (with the given sign of zero)."""
    if type(e) is not E.FloatImm or e.value != value:
        return False
    if negative_zero is None:
        return True
    return str(e.value).startswith("-") == negative_zero


class _ChildMutator(IRMutator):
    """Rebuilds a node whose children are simplified by the owning Simplifier."""

    def __init__(self, owner: Simplifier):
        super().__init__()
        self.owner = owner

    def visit(self, node):
        if isinstance(node, PrimExpr):
            return self.owner.simplify(node)
        return super().visit(node)


# ---- the engine ----------------------------------------------------------------------------


class Simplifier:
    """Expression simplifier and bound analyser with scoped variable bounds.

    ``bounds`` maps a Var to inclusive ``(lo, hi)`` constants (None: unbounded). Results
    are memoised per node; :meth:`push_bound` / :meth:`pop_bound` change the scope (and
    drop the bound-dependent memo). Structurally equal subtrees are interned, so atoms are
    compared by identity.
    """

    def __init__(self, bounds=None):
        self.bounds: dict = {}
        for v, iv in (bounds or {}).items():
            self.bounds[v if type(v) is Var else v.var] = iv
        self._intern: dict = {}  # structural key -> representative node
        self._rep: dict = {}  # id(node) -> (node, representative)
        # atom -> sort key: declared variables (loops, outermost first), then every other
        # atom in order of first appearance. Deterministic for a given input; re-simplifying
        # with the same Simplifier is a fixed point.
        self._order: dict = {}
        self._declared = 0
        self._div_info: dict = {}  # floordiv/floormod atom -> _DivInfo
        self._div_atom: dict = {}  # (numerator rep, c) -> floordiv atom
        self._vars_of: dict = {}  # atom -> frozenset of Vars it uses
        self._children = _ChildMutator(self)
        self._ranges = None
        #: Loop variables with symbolic ranges [lo, hi] (expressions), used to decide
        #: comparisons that constant bounds cannot (``i < n`` inside ``for i in range(n)``).
        self.sym_ranges: dict = {}
        self._reset()

    # -- scope -----------------------------------------------------------------------------

    def _reset(self) -> None:
        self._canon_memo: dict = {}
        self._simp_memo: dict = {}
        self._atom_bound_memo: dict = {}

    def push_bound(self, v: Var, iv) -> object:
        """Set the bounds of ``v`` (intersected with what is known); returns a token for
        :meth:`pop_bound`."""
        old = self.bounds.get(v, _MISSING)
        new = tuple(iv) if old is _MISSING else iv_intersect(old, iv)
        self.bounds[v] = new
        self._reset()
        return old

    def pop_bound(self, v: Var, token) -> None:
        if token is _MISSING:
            self.bounds.pop(v, None)
        else:
            self.bounds[v] = token
        self._reset()

    def see(self, v: Var) -> None:
        """Give ``v`` its place in the term order (callers declare outer loops first)."""
        if v not in self._order:
            self._order[v] = (0, self._declared)
            self._declared += 1

    # -- interning -------------------------------------------------------------------------

    def rep(self, node):
        """The interned representative of ``node``: structurally equal nodes share one."""
        if type(node) is Var:
            return node
        hit = self._rep.get(id(node))
        if hit is not None:
            return hit[1]
        key = self._key(node)
        r = self._intern.setdefault(key, node)
        self._rep[id(node)] = (node, r)
        return r

    def _key(self, node):
        t = type(node)
        if t is IntImm:
            return ("i", node.value, node.dtype)
        if t is E.FloatImm:
            return ("f", float(node.value).hex(), node.dtype)
        names = _FIELDS.get(t)
        if names is None:
            names = _FIELDS[t] = tuple(getattr(t, "__dataclass_fields__", ()))
        return (t,) + tuple(self._field_key(getattr(node, n)) for n in names)

    def _field_key(self, v):
        if isinstance(v, PrimExpr):
            return id(self.rep(v))
        if isinstance(v, tuple):
            return tuple(self._field_key(x) for x in v)
        if v is None or isinstance(v, (str, int, float)):
            return (type(v), v)
        # Buffers, tensors, iteration variables: identity (they are alive in the node).
        return ("o", id(v))

    def same(self, a, b) -> bool:
        """Structural equality through the intern table."""
        return a is b or self.rep(a) is self.rep(b)

    def _atom(self, node) -> _Sum:
        r = self.rep(node)
        self._order_atom(r)
        return _Sum({(r,): 1}, 0)

    def _order_atom(self, a) -> None:
        if a not in self._order:
            n = len(self._order)
            self._order[a] = (1, n)

    def _vars(self, atom) -> frozenset:
        hit = self._vars_of.get(atom)
        if hit is None:
            hit = frozenset((atom,)) if type(atom) is Var else frozenset(collect_vars(atom))
            self._vars_of[atom] = hit
        return hit

    # -- public entry points ---------------------------------------------------------------

    def simplify(self, e: PrimExpr) -> PrimExpr:
        """The simplified form of ``e``; ``e`` itself when nothing changed."""
        hit = self._simp_memo.get(id(e))
        if hit is not None:
            return hit[1]
        t = type(e)
        if t is Var or t is IntImm or t is E.FloatImm or t is E.StringImm:
            return e
        if e.dtype in CANONICAL_DTYPES:
            res = self.rebuild(self.canon(e), e.dtype)
        else:
            res = _VISIT.get(t, Simplifier._visit_generic)(self, e)
        # Return the input object when the result is the same tree (callers test identity
        # to see whether anything changed). A direct comparison exits at the first
        # difference, which is cheaper than interning both trees.
        if res is not e and structural_equal(res, e):
            res = e
        self._simp_memo[id(e)] = (e, res)
        return res

    def bound(self, e) -> tuple:
        """Inclusive constant bounds of ``e`` under the current scope."""
        e = E.as_expr(e)
        if e.dtype in CANONICAL_DTYPES:
            return self.sum_bound(self.canon(e))
        return self._node_bound(e)

    # -- canonical form --------------------------------------------------------------------

    def canon(self, e: PrimExpr) -> _Sum:
        """The canonical sum of an int32/int64 expression."""
        hit = self._canon_memo.get(id(e))
        if hit is not None:
            return hit[1]
        fn = _CANON.get(type(e), Simplifier._canon_other)
        s = fn(self, e)
        self._canon_memo[id(e)] = (e, s)
        return s

    def _canon_int(self, e) -> _Sum:
        return _const_sum(e.value)

    def _canon_var(self, e) -> _Sum:
        self._order_atom(e)
        return _Sum({(e,): 1}, 0)

    def _canon_add(self, e) -> _Sum:
        return self._merge_divmod(_add(self.canon(e.a), self.canon(e.b)))

    def _canon_sub(self, e) -> _Sum:
        return self._merge_divmod(_add(self.canon(e.a), self.canon(e.b), -1))

    def _canon_mul(self, e) -> _Sum:
        a, b = self.canon(e.a), self.canon(e.b)
        if b.is_const():
            return _scale(a, b.const)
        if a.is_const():
            return _scale(b, a.const)
        prod = self._mul(a, b)
        if prod is not None:
            return prod
        return self._atom(E.Mul(self.rebuild(a, e.dtype), self.rebuild(b, e.dtype), e.dtype))

    def _canon_div(self, e) -> _Sum:
        b = self.canon(e.b)
        if b.is_const() and b.const != 0:
            return self.div_const(self.canon(e.a), b.const, e.dtype)
        return self._divmod_symbolic(e, b)

    def _canon_mod(self, e) -> _Sum:
        b = self.canon(e.b)
        if b.is_const() and b.const != 0:
            return self.mod_const(self.canon(e.a), b.const, e.dtype)
        return self._divmod_symbolic(e, b)

    def _divmod_symbolic(self, e, b: _Sum) -> _Sum:
        """x // y, x % y with a non-constant (or zero) divisor: fold only 0 <= x < y."""
        a = self.canon(e.a)
        if not b.is_const():
            alo = self.sum_bound(a)[0]
            dhi = self.sum_bound(_add(a, b, -1))[1]
            if alo is not None and alo >= 0 and dhi is not None and dhi < 0:
                return a if type(e) is E.FloorMod else _const_sum(0)
        ra, rb = self.rebuild(a, e.dtype), self.rebuild(b, e.dtype)
        return self._atom(type(e)(ra, rb, e.dtype))

    def _canon_minmax(self, e) -> _Sum:
        is_min = type(e) is E.Min
        sa, sb = self.canon(e.a), self.canon(e.b)
        lo, hi = self.sum_bound(_add(sa, sb, -1))
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

    def _canon_other(self, e) -> _Sum:
        res = _VISIT.get(type(e), Simplifier._visit_generic)(self, e)
        t = type(res)
        if t is IntImm:
            return _const_sum(res.value)
        if res is not e and t in _CANON:
            return self.canon(res)
        return self._atom(res)

    def _mul(self, a: _Sum, b: _Sum) -> _Sum | None:
        """Distribute a product of two sums, or None if it would grow too large."""
        if (len(a.terms) + 1) * (len(b.terms) + 1) > 36:
            return None
        order = self._order
        items_a = list(a.terms.items()) + ([((), a.const)] if a.const else [])
        items_b = list(b.terms.items()) + ([((), b.const)] if b.const else [])
        terms: dict = {}
        for ma, ka in items_a:
            for mb, kb in items_b:
                m = tuple(sorted(ma + mb, key=order.__getitem__))
                terms[m] = terms.get(m, 0) + ka * kb
        const = terms.pop((), 0)
        return _Sum({m: k for m, k in terms.items() if k}, const)

    def _merge_divmod(self, s: _Sum) -> _Sum:
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
                return self._merge_divmod(_add(_Sum(terms, s.const), _scale(info.num, k)))
            if k % info.c:
                continue
            # k*(x//c) == (k/c)*(x - x%c)
            kc = k // info.c
            terms = dict(s.terms)
            del terms[m]
            dtype = m[0].dtype
            alt = _add(
                _add(_Sum(terms, s.const), info.num, kc),
                self.mod_const(info.num, info.c, dtype),
                -kc,
            )
            if len(alt.terms) < len(s.terms):
                return self._merge_divmod(alt)
        return s

    def _merge_symbolic_divmod(self, s: _Sum, m: tuple, k: int) -> _Sum | None:
        """``k*(x % y) + k*y*(x // y) -> k*x`` for a variable divisor ``y`` (what fusing
        axes of symbolic extent leaves in an index), or None if ``s`` has no such pair."""
        mod = m[0]
        if type(mod) is not E.FloorMod or type(mod.b) is not Var:
            return None
        div = self.rep(E.FloorDiv(mod.a, mod.b, mod.dtype))
        if div not in self._order or mod.b not in self._order:
            return None
        mono = tuple(sorted((div, mod.b), key=self._order.__getitem__))
        if s.terms.get(mono) != k:
            return None
        terms = dict(s.terms)
        del terms[m]
        del terms[mono]
        return _add(_Sum(terms, s.const), _scale(self.canon(mod.a), k))

    def div_const(self, s: _Sum, c: int, dtype: str) -> _Sum:
        """Canonical ``s // c`` for a non-zero constant ``c`` (floor division)."""
        if c < 0:
            # x // c == (-x) // (-c): both are the floor of the same rational.
            return self.div_const(_scale(s, -1), -c, dtype)
        if c == 1:
            return s
        q_terms, r_terms = {}, {}
        for m, k in s.terms.items():
            if k % c == 0:
                q_terms[m] = k // c
            else:
                r_terms[m] = k
        qc, rc = divmod(s.const, c)
        q = _Sum(q_terms, qc)
        if not r_terms:
            return q  # rc // c == 0 as 0 <= rc < c
        # s == c*q + r exactly, so s // c == q + r // c.
        r = _Sum(r_terms, rc)
        lo, hi = self.sum_bound(r)
        if lo is not None and hi is not None and lo // c == hi // c:
            return _add_const(q, lo // c)
        g = gcd(c, *r_terms.values())
        if g > 1:
            # r == g*r2 + b with 0 <= b < g, hence r // c == r2 // (c/g).
            r2 = _Sum({m: k // g for m, k in r_terms.items()}, rc // g)
            return _add(q, self.div_const(r2, c // g, dtype))
        if len(r_terms) == 1:
            ((m, k),) = r_terms.items()
            info = self._div_info.get(m[0]) if len(m) == 1 and k == 1 else None
            if info is not None and not info.is_mod:
                # (x // c1 + rc) // c == (x + rc*c1) // (c1*c) for c1, c > 0.
                num = _add_const(info.num, rc * info.c)
                return _add(q, self.div_const(num, info.c * c, dtype))
        return _add(q, self._divmod_atom(r, c, dtype, is_mod=False))

    def mod_const(self, s: _Sum, c: int, dtype: str) -> _Sum:
        """Canonical ``s % c`` for a non-zero constant ``c`` (floor modulo: sign of c)."""
        if c < 0:
            # x % c == -((-x) % (-c)) for floor modulo.
            return _scale(self.mod_const(_scale(s, -1), -c, dtype), -1)
        if c == 1:
            return _const_sum(0)
        r_terms = {m: k for m, k in s.terms.items() if k % c}
        rc = s.const % c
        if not r_terms:
            return _const_sum(rc)
        r = _Sum(r_terms, rc)
        lo, hi = self.sum_bound(r)
        if lo is not None and hi is not None and lo // c == hi // c:
            return _add_const(r, -c * (lo // c))
        g = gcd(c, *r_terms.values())
        if g > 1:
            # r == g*r2 + b with 0 <= b < g, hence r % c == g*(r2 % (c/g)) + b.
            r2 = _Sum({m: k // g for m, k in r_terms.items()}, rc // g)
            inner = self.mod_const(r2, c // g, dtype)
            if not self._is_divmod_atom(inner):
                return _add_const(_scale(inner, g), rc % g)
            # Otherwise g*((...) % (c/g)) + b is no simpler than r % c: keep the latter.
        if len(r_terms) == 1:
            ((m, k),) = r_terms.items()
            info = self._div_info.get(m[0]) if len(m) == 1 and k == 1 else None
            if info is not None and info.is_mod and info.c % c == 0:
                # x % c1 == x (mod c) when c divides c1.
                return self.mod_const(_add_const(info.num, rc), c, dtype)
        return self._divmod_atom(r, c, dtype, is_mod=True)

    def _is_divmod_atom(self, s: _Sum) -> bool:
        if s.const or len(s.terms) != 1:
            return False
        ((m, _),) = s.terms.items()
        return len(m) == 1 and m[0] in self._div_info

    def _divmod_atom(self, r: _Sum, c: int, dtype: str, is_mod: bool) -> _Sum:
        num = self.rebuild(r, dtype)
        cls = E.FloorMod if is_mod else E.FloorDiv
        atom = self.rep(cls(num, IntImm(c, dtype), dtype))
        if atom not in self._div_info:
            num_rep = self.rep(num)
            self._div_info[atom] = _DivInfo(r, c, num_rep, is_mod)
            if not is_mod:
                self._div_atom.setdefault((num_rep, c), atom)
        self._order_atom(atom)
        return _Sum({(atom,): 1}, 0)

    def rebuild(self, s: _Sum, dtype: str) -> PrimExpr:
        """An expression for the canonical sum: positive terms first, then the negative ones
        subtracted, then the constant."""
        if not s.terms:
            return IntImm(s.const, dtype)
        order = self._order
        items = sorted(s.terms.items(), key=lambda mk: [order[a] for a in mk[0]])
        pos = [(m, k) for m, k in items if k > 0]
        neg = [(m, -k) for m, k in items if k < 0]
        const = s.const
        res = None
        for m, k in pos:
            t = self._term(m, k, dtype)
            res = t if res is None else E.Add(res, t, dtype)
        if res is None:
            if const > 0:
                res, const = IntImm(const, dtype), 0
            else:
                m, k = neg.pop(0)
                res = E.Mul(self._mono(m, dtype), IntImm(-k, dtype), dtype)
        for m, k in neg:
            res = E.Sub(res, self._term(m, k, dtype), dtype)
        if const > 0:
            res = E.Add(res, IntImm(const, dtype), dtype)
        elif const < 0:
            res = E.Sub(res, IntImm(-const, dtype), dtype)
        return res

    def _mono(self, m: tuple, dtype: str) -> PrimExpr:
        res = m[0]
        for a in m[1:]:
            res = E.Mul(res, a, dtype)
        return res

    def _term(self, m: tuple, k: int, dtype: str) -> PrimExpr:
        res = self._mono(m, dtype)
        return res if k == 1 else E.Mul(res, IntImm(k, dtype), dtype)

    # -- constant bounds -------------------------------------------------------------------

    def sum_bound(self, s: _Sum) -> tuple:
        """Inclusive constant bounds of a canonical sum."""
        lo = hi = s.const
        for m, k in s.terms.items():
            if len(m) == 1:
                b = self._atom_bound(m[0])
            else:
                b = self._atom_bound(m[0])
                for a in m[1:]:
                    b = iv_mul(b, self._atom_bound(a))
            b = iv_scale(b, k)
            lo = None if lo is None or b[0] is None else lo + b[0]
            hi = None if hi is None or b[1] is None else hi + b[1]
            if lo is None and hi is None:
                break
        return lo, hi

    def _atom_bound(self, a) -> tuple:
        hit = self._atom_bound_memo.get(a)
        if hit is not None:
            return hit
        if type(a) is Var:
            b = self.bounds.get(a, UNBOUNDED)
        else:
            info = self._div_info.get(a)
            if info is not None:
                nb = self.sum_bound(info.num)
                c = (info.c, info.c)
                b = iv_floormod(nb, c) if info.is_mod else iv_floordiv(nb, c)
            else:
                b = self._node_bound(a)
        self._atom_bound_memo[a] = b
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
            b = _iv_add2(self.bound(e.a), self.bound(e.b))
        elif t is E.Sub:
            b = _iv_add2(self.bound(e.a), iv_scale(self.bound(e.b), -1))
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
        if narrow != UNBOUNDED and not _within(b, narrow):
            return narrow  # the value may wrap around in a narrow dtype
        return b

    # -- non-canonical nodes ---------------------------------------------------------------

    def _visit_generic(self, e):
        return self._children.generic(e)

    def _visit_binary(self, e):
        """Arithmetic on floats and non-index integer dtypes: fold and exact identities."""
        a, b = self.simplify(e.a), self.simplify(e.b)
        t, d = type(e), e.dtype
        if _is_const(a) and _is_const(b):
            if dt.is_float(d):
                v = _fold_float(t, float(a.value), float(b.value))
                if v is not None:
                    return E.FloatImm(_round_float(v, d), d)
            else:
                v = _fold_int(t, a.value, b.value)
                if v is not None:
                    return IntImm(_wrap_int(v, d), d)
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
        if t in (E.Min, E.Max) and self.same(a, b):
            return a
        if a is e.a and b is e.b:
            return e
        return t(a, b, d)

    def _visit_minmax(self, e):
        if e.dtype in CANONICAL_DTYPES:
            return self.rebuild(self._canon_minmax(e), e.dtype)
        return self._visit_binary(e)

    def _visit_cmp(self, e):
        t = type(e)
        if e.a.dtype in CANONICAL_DTYPES:
            sa, sb = self.canon(e.a), self.canon(e.b)
            diff = _add(sa, sb, -1)
            decided = _decide_cmp(t, self.sum_bound(diff))
            if decided is None and self.sym_ranges:
                decided = self._decide_symbolic(t, diff, e.a.dtype)
            if decided is not None:
                return _bool(decided)
            a, b = self.rebuild(sa, e.a.dtype), self.rebuild(sb, e.b.dtype)
        else:
            a, b = self.simplify(e.a), self.simplify(e.b)
            if _is_const(a) and _is_const(b):
                return _bool(_CMP_FOLD[t](a.value, b.value))
            if dt.is_int(a.dtype) or a.dtype == "bool":
                decided = _decide_cmp(t, _iv_add2(self.bound(a), iv_scale(self.bound(b), -1)))
                if decided is not None:
                    return _bool(decided)
                if t in (E.EQ, E.NE) and self.same(a, b):
                    return _bool(t is E.EQ)
        if a is e.a and b is e.b:
            return e
        return t(a, b, e.dtype)

    def _decide_symbolic(self, t, diff: _Sum, dtype: str):
        """Decide ``diff OP 0`` over the symbolic ranges of the loop variables it uses."""
        used = set()
        for m in diff.terms:
            for a in m:
                used |= self._vars(a)
        if not used & self.sym_ranges.keys():
            return None
        sub = Simplifier(self.bounds)
        sub._order = self._order  # same term order; the table is only ever extended
        lo, hi = sub.interval(self.rebuild(diff, dtype), self.sym_ranges)
        lo_c = None if lo is None else sub.bound(lo)[0]
        hi_c = None if hi is None else sub.bound(hi)[1]
        return _decide_cmp(t, (lo_c, hi_c))

    def _visit_and_or(self, e):
        is_and = type(e) is E.And
        a = self.simplify(e.a)
        if type(a) is IntImm:
            # Both operands are pure, so short-circuiting changes no behaviour.
            if bool(a.value) != is_and:
                return _bool(not is_and)
            return self.simplify(e.b)
        b = self.simplify(e.b)
        if type(b) is IntImm:
            return a if bool(b.value) == is_and else _bool(not is_and)
        if self.same(a, b):
            return a
        if a is e.a and b is e.b:
            return e
        return type(e)(a, b, e.dtype)

    def _visit_not(self, e):
        a = self.simplify(e.a)
        if type(a) is IntImm:
            return _bool(not a.value)
        if type(a) is E.Not:
            return a.a
        t = type(a)
        if t in _CMP_NEGATE and (t in (E.EQ, E.NE) or not dt.is_float(a.a.dtype)):
            return _CMP_NEGATE[t](a.a, a.b, a.dtype)
        return e if a is e.a else E.Not(a, e.dtype)

    def _visit_select(self, e):
        c = self.simplify(e.cond)
        if type(c) is IntImm:
            return self.simplify(e.true_value if c.value else e.false_value)
        tv, fv = self.simplify(e.true_value), self.simplify(e.false_value)
        if self.same(tv, fv):
            return tv
        if c is e.cond and tv is e.true_value and fv is e.false_value:
            return e
        return E.Select(c, tv, fv, e.dtype)

    def _visit_cast(self, e):
        v = self.simplify(e.value)
        d = e.dtype
        if v.dtype == d:
            return v
        folded = _fold_cast(v, d)
        if folded is not None:
            return folded
        return e if v is e.value else E.Cast(d, v)

    def _visit_let(self, e):
        v = self.simplify(e.value)
        if type(v) in (IntImm, E.FloatImm, Var):
            return self.simplify(substitute(e.body, {e.var: v}))
        body = self.simplify(e.body)
        if v is e.value and body is e.body:
            return e
        return E.Let(e.var, v, body, e.dtype)

    # -- symbolic intervals ----------------------------------------------------------------

    def interval(self, e: PrimExpr, ranges: dict) -> tuple:
        """See :func:`tecomp.ir.arith.eval_interval`."""
        e = E.as_expr(e)
        if e.dtype not in CANONICAL_DTYPES:
            b = self.bound(e)
            return tuple(None if x is None else E.make_const(x, e.dtype) for x in b)
        rng = {}
        for v, (lo, hi) in ranges.items():
            v = v.var if isinstance(v, E.IterVar) else v
            rng[v] = (E.as_expr(lo, v.dtype), E.as_expr(hi, v.dtype))
        # Constant bounds of the ranged variables sharpen floordiv and min/max below.
        for v, (lo, hi) in rng.items():
            self.bounds[v] = iv_intersect(
                self.bounds.get(v, UNBOUNDED), (self.bound(lo)[0], self.bound(hi)[1])
            )
            self._reset()
        self._ranges = rng
        self._ranged = frozenset(rng)
        self._iv_memo: dict = {}
        self._expanding: set = set()
        try:
            lo, hi = self._sum_interval(self.canon(e))
        finally:
            self._ranges = None
        d = e.dtype
        return (
            None if lo is None else self.simplify(self.rebuild(lo, d)),
            None if hi is None else self.simplify(self.rebuild(hi, d)),
        )

    def _sum_interval(self, s: _Sum) -> tuple:
        lo = hi = _const_sum(s.const)
        for m, k in s.terms.items():
            if not any(self._vars(a) & self._ranged for a in m):
                t = _Sum({m: k}, 0)
                lo = None if lo is None else _add(lo, t)
                hi = None if hi is None else _add(hi, t)
                continue
            ml, mh = self._mono_interval(m)
            if k < 0:
                ml, mh = mh, ml
            lo = None if lo is None or ml is None else _add(lo, ml, k)
            hi = None if hi is None or mh is None else _add(hi, mh, k)
            if lo is None and hi is None:
                break
        return lo, hi

    def _mono_interval(self, m: tuple) -> tuple:
        res = self._atom_interval(m[0])
        for a in m[1:]:
            res = self._iv_mul_sym(res, self._atom_interval(a))
        if res[0] is None or res[1] is None:
            # Fall back to the constant bounds of the whole product for a lost side.
            cb = self.sum_bound(_Sum({m: 1}, 0))
            res = (
                res[0] if res[0] is not None else (None if cb[0] is None else _const_sum(cb[0])),
                res[1] if res[1] is not None else (None if cb[1] is None else _const_sum(cb[1])),
            )
        return res

    def _expr_interval(self, e) -> tuple:
        if e.dtype in CANONICAL_DTYPES:
            return self._sum_interval(self.canon(e))
        b = self.bound(e)
        return tuple(None if x is None else _const_sum(x) for x in b)

    def _atom_interval(self, a) -> tuple:
        hit = self._iv_memo.get(a)
        if hit is not None:
            return hit
        if not (self._vars(a) & self._ranged):
            res = (_Sum({(a,): 1}, 0),) * 2
        elif type(a) is Var:
            res = self._var_interval(a)
        else:
            res = self._compound_interval(a)
        self._iv_memo[a] = res
        return res

    def _var_interval(self, v: Var) -> tuple:
        lo_e, hi_e = self._ranges[v]
        if v in self._expanding:  # a cyclic range: only constants are safe
            b = self.bounds.get(v, UNBOUNDED)
            return tuple(None if x is None else _const_sum(x) for x in b)
        self._expanding.add(v)
        try:
            lo = self._expr_interval(lo_e)[0]
            hi = self._expr_interval(hi_e)[1]
        finally:
            self._expanding.discard(v)
        return lo, hi

    def _compound_interval(self, a) -> tuple:
        t, d = type(a), a.dtype
        info = self._div_info.get(a)
        if info is not None:
            il, ih = self._sum_interval(info.num)
            c = info.c
            if not info.is_mod:
                # floor(x / c) is non-decreasing in x.
                return (
                    None if il is None else self.div_const(il, c, d),
                    None if ih is None else self.div_const(ih, c, d),
                )
            if il is not None and ih is not None:
                ql, qh = self.div_const(il, c, d), self.div_const(ih, c, d)
                if _add(qh, ql, -1).is_const() and _add(qh, ql, -1).const == 0:
                    # One period: x % c == x - c*q with the same q at both ends.
                    return _add(il, ql, -c), _add(ih, ql, -c)
            return _const_sum(0), _const_sum(c - 1)
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
        b = self._atom_bound(a)
        return tuple(None if x is None else _const_sum(x) for x in b)

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
        return self.canon(cls(self.rebuild(x, d), self.rebuild(y, d), d))

    def _sign(self, s) -> int:
        if s is None:
            return 0
        lo, hi = self.sum_bound(s)
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
        out = []
        for pair in (lo_pair, hi_pair):
            if pair is None or pair[0] is None or pair[1] is None:
                out.append(None)
            else:
                out.append(self._mul(pair[0], pair[1]))
        return tuple(out)

    # -- linear forms ----------------------------------------------------------------------

    def linear_coeff(self, e: PrimExpr, v: Var):
        """See :func:`tecomp.ir.arith.linear_coeff`."""
        e = E.as_expr(e)
        v = v.var if isinstance(v, E.IterVar) else v
        if e.dtype not in CANONICAL_DTYPES:
            if v in collect_vars(e):
                return None
            return E.make_const(0, e.dtype), self.simplify(e)
        s = self.canon(e)
        coeff = _const_sum(0)
        base = {}
        for m, k in s.terms.items():
            others = tuple(a for a in m if a is not v)
            if any(v in self._vars(a) for a in others):
                return None
            n = len(m) - len(others)
            if n == 0:
                base[m] = k
            elif n == 1:
                coeff = _add(coeff, _Sum({others: k}, 0) if others else _const_sum(k))
            else:
                return None
        d = e.dtype
        return self.rebuild(coeff, d), self.rebuild(_Sum(base, s.const), d)


def _within(b: tuple, outer: tuple) -> bool:
    lo_ok = outer[0] is None or (b[0] is not None and b[0] >= outer[0])
    hi_ok = outer[1] is None or (b[1] is not None and b[1] <= outer[1])
    return lo_ok and hi_ok


def _iv_add2(a, b):
    lo = None if a[0] is None or b[0] is None else a[0] + b[0]
    hi = None if a[1] is None or b[1] is None else a[1] + b[1]
    return lo, hi


def _decide_cmp(t, diff: tuple):
    """Decide ``a OP b`` from the bounds of ``a - b``; None if undecided."""
    lo, hi = diff
    if t is E.LT:
        return (
            True if hi is not None and hi < 0 else (False if lo is not None and lo >= 0 else None)
        )
    if t is E.LE:
        return (
            True if hi is not None and hi <= 0 else (False if lo is not None and lo > 0 else None)
        )
    if t is E.GT:
        return (
            True if lo is not None and lo > 0 else (False if hi is not None and hi <= 0 else None)
        )
    if t is E.GE:
        return (
            True if lo is not None and lo >= 0 else (False if hi is not None and hi < 0 else None)
        )
    if t is E.EQ or t is E.NE:
        if lo == 0 and hi == 0:
            return t is E.EQ
        if (lo is not None and lo > 0) or (hi is not None and hi < 0):
            return t is E.NE
    return None


def _fold_cast(v, d: str):
    """A constant cast folded, or None when the target does not define the result."""
    if type(v) is IntImm:
        if dt.is_float(d):
            return E.FloatImm(_round_float(float(v.value), d), d)
        if d == "bool":
            return IntImm(int(v.value != 0), d)
        # A cast really narrows (even between index dtypes): wrap to the target's bits.
        b = dt.bits(d)
        n = v.value & ((1 << b) - 1)
        if dt.is_signed(d) and n >= 1 << (b - 1):
            n -= 1 << b
        return IntImm(n, d)
    if type(v) is E.FloatImm:
        x = v.value
        if dt.is_float(d):
            return E.FloatImm(_round_float(x, d), d)
        if d == "bool":
            return IntImm(int(x != 0.0), d)
        if not math.isfinite(x):
            return None
        n = int(x)  # truncates toward zero, as the cast does
        if dt.min_value(d) <= n <= dt.max_value(d):
            return IntImm(n, d)
    return None


_FIELDS: dict = {}

_CANON = {
    IntImm: Simplifier._canon_int,
    Var: Simplifier._canon_var,
    E.Add: Simplifier._canon_add,
    E.Sub: Simplifier._canon_sub,
    E.Mul: Simplifier._canon_mul,
    E.FloorDiv: Simplifier._canon_div,
    E.FloorMod: Simplifier._canon_mod,
    E.Min: Simplifier._canon_minmax,
    E.Max: Simplifier._canon_minmax,
}

_VISIT = {
    E.Add: Simplifier._visit_binary,
    E.Sub: Simplifier._visit_binary,
    E.Mul: Simplifier._visit_binary,
    E.Div: Simplifier._visit_binary,
    E.FloorDiv: Simplifier._visit_binary,
    E.FloorMod: Simplifier._visit_binary,
    E.Min: Simplifier._visit_minmax,
    E.Max: Simplifier._visit_minmax,
    E.EQ: Simplifier._visit_cmp,
    E.NE: Simplifier._visit_cmp,
    E.LT: Simplifier._visit_cmp,
    E.LE: Simplifier._visit_cmp,
    E.GT: Simplifier._visit_cmp,
    E.GE: Simplifier._visit_cmp,
    E.And: Simplifier._visit_and_or,
    E.Or: Simplifier._visit_and_or,
    E.Not: Simplifier._visit_not,
    E.Select: Simplifier._visit_select,
    E.Cast: Simplifier._visit_cast,
    E.Let: Simplifier._visit_let,
}


# ---- statements ----------------------------------------------------------------------------

#: What a statement simplifies to when it does nothing (callers drop it from sequences).
NOOP = S.Evaluate(IntImm(0))


def _is_noop(s) -> bool:
    return s is NOOP or (type(s) is S.Evaluate and _is_const(s.value))


class _StmtSimplifier:
    """Walks statements, carrying loop-variable bounds into the expression simplifier."""

    def __init__(self, bounds):
        self.an = Simplifier(bounds)
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
            return self.an._children.generic(s)
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
            hi = an.sum_bound(_add_const(_add(smin, an.canon(ext)), -1))[1]
        else:
            lo, hi = an.bound(mn)[0], None
        token = an.push_bound(v, (lo, hi))
        symbolic = smin is not None and not (type(mn) is IntImm and type(ext) is IntImm)
        if symbolic:
            an.sym_ranges[v] = (mn, an.rebuild(_add_const(_add(smin, an.canon(ext)), -1), mn.dtype))
        try:
            body = self.stmt(s.body)
        finally:
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
        """Simplify ``body`` knowing ``cond`` holds (its constant consequences on single
        variables)."""
        facts = self._facts(cond)
        tokens = [(v, self.an.push_bound(v, iv)) for v, iv in facts]
        try:
            return self.stmt(body)
        finally:
            for v, tok in reversed(tokens):
                self.an.pop_bound(v, tok)

    def _facts(self, cond) -> list:
        """(var, interval) pairs implied by ``cond``: from conjunctions of integer
        comparisons ``Σ k_i*v_i + rest <= 0``, each ``v_i`` gets a constant bound."""
        t = type(cond)
        if t is E.And:
            return self._facts(cond.a) + self._facts(cond.b)
        if t not in (E.LT, E.LE, E.GT, E.GE, E.EQ) or cond.a.dtype not in CANONICAL_DTYPES:
            return []
        an = self.an
        d = _add(an.canon(cond.a), an.canon(cond.b), -1)  # a - b
        if t is E.LT:
            forms = [_add_const(d, 1)]
        elif t is E.LE:
            forms = [d]
        elif t is E.GT:
            forms = [_add_const(_scale(d, -1), 1)]
        elif t is E.GE:
            forms = [_scale(d, -1)]
        else:
            forms = [d, _scale(d, -1)]
        out = []
        for f in forms:  # f <= 0
            for m, k in f.terms.items():
                if len(m) != 1 or type(m[0]) is not Var:
                    continue
                rest_lo = an.sum_bound(_add(f, _Sum({m: k}, 0), -1))[0]
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
        if _is_const(v):
            return NOOP
        return s if v is s.value else S.Evaluate(v)


# ---- public API ----------------------------------------------------------------------------


def simplify(e: PrimExpr, bounds=None) -> PrimExpr:
    """Simplify an expression.

    Parameters
    ----------
    e : PrimExpr (or a Python number / IterVar)
    bounds : dict[Var, (int | None, int | None)], optional
        Inclusive constant bounds of variables.

    Returns
    -------
    An equivalent expression (``e`` itself when nothing changed): integer index arithmetic
    in canonical form, floordiv/floormod/min/max/comparisons decided where the bounds
    prove it, constants folded.

    Example
    -------
    >>> simplify((io * 8 + ii) // 8, {ii: (0, 7)})   # io
    """
    return Simplifier(bounds).simplify(E.as_expr(e))


def simplify_stmt(s: S.Stmt, bounds=None) -> S.Stmt:
    """Simplify every expression of a statement, with loop-variable bounds, fold decided
    branches, drop extent-1 loops and trivial lets, flatten sequences. Returns ``s`` itself
    when nothing changed; a statement that does nothing becomes ``Evaluate(0)``."""
    return _StmtSimplifier(bounds).stmt(s)


def simplify_func(f: S.PrimFunc) -> S.PrimFunc:
    """Simplify a function's body; its symbolic sizes (``f.size_vars``) are known >= 1."""
    bounds = {v: (1, None) for v in f.size_vars}
    body = simplify_stmt(f.body, bounds)
    return f if body is f.body else f.with_body(body)


__all__ = ["NOOP", "Simplifier", "simplify", "simplify_func", "simplify_stmt"]
