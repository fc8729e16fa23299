"""The arithmetic analyzer: one object that simplifies, bounds and proves.

:class:`Analyzer` combines the canonical form (:mod:`.canonical`), constant bounds
(:mod:`.const_int_bound`), the rewrite rules (:mod:`.rewrite_simplify`) and symbolic
intervals (:mod:`.int_set`) over one context: the inclusive constant bounds of variables
(loop ranges, facts of enclosing conditions), changed with :meth:`Analyzer.push_bound` /
:meth:`Analyzer.pop_bound`. The functions below are one-shot entry points that build an
analyzer for one question.

Example
-------
>>> io, ii = Var("io"), Var("ii")
>>> an = Analyzer({ii: (0, 7)})
>>> an.simplify((io * 8 + ii) // 8)      # io
>>> an.can_prove(ii < 8)                 # True
>>> an.bound(ii * 4 + 1)                 # (1, 29)
"""

from __future__ import annotations

from .. import expr as E
from ..expr import IntImm, PrimExpr, Var
from ..functor import collect_vars
from ..structural import structural_equal
from .canonical import CANONICAL_DTYPES, CanonicalSimplifier, SumExpr, const_sum, sum_add
from .const_int_bound import ConstIntBoundAnalyzer
from .int_set import IntSetAnalyzer
from .interval import Bounds, Interval, iv_intersect
from .rewrite_simplify import ChildSimplifier, RewriteSimplifier

_MISSING = object()

#: node class -> its dataclass field names, for interning keys.
_FIELDS: dict = {}


class Analyzer(CanonicalSimplifier, ConstIntBoundAnalyzer, RewriteSimplifier, IntSetAnalyzer):
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
        # with the same Analyzer is a fixed point.
        self._order: dict = {}
        self._declared = 0
        self._div_info: dict = {}  # floordiv/floormod atom -> _DivInfo
        self._div_atom: dict = {}  # (numerator rep, c) -> floordiv atom
        self._vars_of: dict = {}  # atom -> frozenset of Vars it uses
        self._children = ChildSimplifier(self)
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

    def _atom(self, node) -> SumExpr:
        r = self.rep(node)
        self._order_atom(r)
        return SumExpr({(r,): 1}, 0)

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

    # -- simplify and bound ----------------------------------------------------------------

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
            res = self.rewrite(e)
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

    # -- proofs and linear forms -------------------------------------------------------------

    def can_prove(self, cond) -> bool:
        """True only if the bool expression ``cond`` holds for every value of the variables
        within the current bounds; False means \"not proven\", not \"false\"."""
        res = self.simplify(E.as_expr(cond))
        return type(res) is IntImm and res.value != 0

    def linear_coeff(self, e: PrimExpr, v: Var):
        """See :func:`linear_coeff`."""
        e = E.as_expr(e)
        v = v.var if isinstance(v, E.IterVar) else v
        if e.dtype not in CANONICAL_DTYPES:
            if v in collect_vars(e):
                return None
            return E.make_const(0, e.dtype), self.simplify(e)
        s = self.canon(e)
        coeff = const_sum(0)
        base = {}
        for m, k in s.terms.items():
            others = tuple(a for a in m if a is not v)
            if any(v in self._vars(a) for a in others):
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


def simplify(e: PrimExpr, bounds: Bounds | None = None) -> PrimExpr:
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
    return Analyzer(bounds).simplify(E.as_expr(e))


def const_int_bound(e: PrimExpr, bounds: Bounds | None = None) -> Interval:
    """Inclusive constant bounds ``(lo, hi)`` of an integer (or bool) expression.

    Parameters
    ----------
    e : PrimExpr
        The expression. Floats give ``(None, None)``.
    bounds : dict[Var, (int | None, int | None)], optional
        Known inclusive bounds of variables; variables not listed are unbounded.

    Returns
    -------
    (lo, hi) with ``None`` for an unbounded side. Sound, not always tight: ``lo <= e <= hi``
    for every assignment of the variables within ``bounds``.

    Example
    -------
    >>> const_int_bound(io * 8 + ii, {io: (0, 11), ii: (0, 7)})
    (0, 95)
    """
    return Analyzer(bounds).bound(e)


def prove(cond: PrimExpr, bounds: Bounds | None = None) -> bool:
    """True only if the bool expression ``cond`` holds for every assignment of the
    variables within ``bounds``; False means "not proven", not "false"."""
    return Analyzer(bounds).can_prove(cond)


def eval_interval(e: PrimExpr, ranges: dict, bounds: Bounds | None = None) -> tuple:
    """Symbolic interval of ``e`` while the variables of ``ranges`` vary.

    Parameters
    ----------
    e : PrimExpr
        An integer expression.
    ranges : dict[Var, (PrimExpr, PrimExpr)]
        Each variable varies over ``[lo, hi]`` inclusive; ``lo``/``hi`` may use other
        variables (fixed symbols) or, acyclically, other ranged variables.
    bounds : Bounds, optional
        Constant bounds of the fixed symbols (used to decide signs and fold floordiv).

    Returns
    -------
    (lo, hi) : simplified expressions in the fixed symbols only, ``lo <= e <= hi``; a side
    is ``None`` when no bound exists (e.g. a ranged variable times an unbounded symbol of
    unknown sign). Exact for affine expressions (``io*8 + ii`` with ``ii`` in ``[0, 7]`` is
    ``(io*8, io*8 + 7)``); sound over-approximations for floordiv/floormod by constants,
    min/max, select and products.
    """
    return Analyzer(bounds).interval(e, ranges)


def linear_coeff(e: PrimExpr, v: Var) -> tuple | None:
    """``(coeff, base)`` with ``e == coeff * v + base`` where neither uses ``v``, or None
    if ``e`` is not linear in ``v`` (``v`` under a floordiv, min, load, ``v*v``...).

    Both parts are simplified; ``coeff`` is ``IntImm(0)`` when ``e`` does not use ``v``.
    """
    return Analyzer().linear_coeff(e, v)


__all__ = [
    "Analyzer",
    "const_int_bound",
    "eval_interval",
    "linear_coeff",
    "prove",
    "simplify",
]
