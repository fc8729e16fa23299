"""The arithmetic analyzer: one object that simplifies, bounds and proves.

:class:`Analyzer` is made of parts, as TVM composes its ``arith::Analyzer``. Each part is
a class in its own module with its own state and a reference back to the analyzer,
through which it calls its siblings' public methods:

- ``atoms`` (:class:`.AtomTable`): interned atoms and the order terms are written in;
- ``const_int_bound`` (:class:`.ConstIntBoundAnalyzer`): the constant bounds of the
  variables in scope (loop ranges, facts of enclosing conditions) and of expressions;
- ``canonical_simplify`` (:class:`.CanonicalSimplifier`): the canonical sums of index
  expressions;
- ``rewrite_simplify`` (:class:`.RewriteSimplifier`): rules for the other node kinds;
- ``int_set`` (:class:`.IntSetAnalyzer`): symbolic intervals, and comparisons decided
  over the symbolic ranges of loop variables.

The analyzer keeps what belongs to no one part: the memo of :meth:`Analyzer.simplify`
(which picks the canonical form or the rules by dtype) and the scope, changed with
:meth:`Analyzer.push_bound` / :meth:`Analyzer.pop_bound`, which tells each part whose
results depend on it. The functions below are one-shot entry points that build an
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
from ..structural import structural_equal
from .atoms import AtomTable
from .canonical import CANONICAL_DTYPES, CanonicalSimplifier
from .const_int_bound import ConstIntBoundAnalyzer
from .int_set import IntSetAnalyzer
from .interval import Bounds, Interval
from .rewrite_simplify import RewriteSimplifier
from .sum_expr import SumExpr


class Analyzer:
    """Expression simplifier and bound analyser with scoped variable bounds.

    ``bounds`` maps a Var to inclusive ``(lo, hi)`` constants (None: unbounded). Results
    are memoised per node; :meth:`push_bound` / :meth:`pop_bound` change the scope (and
    drop the bound-dependent memos). Structurally equal subtrees are interned, so atoms
    are compared by identity.
    """

    def __init__(self, bounds=None):
        self.atoms = AtomTable()
        self.const_int_bound = ConstIntBoundAnalyzer(self, bounds)
        self.canonical_simplify = CanonicalSimplifier(self)
        self.rewrite_simplify = RewriteSimplifier(self)
        self.int_set = IntSetAnalyzer(self)
        self._memo: dict = {}  # id(expr) -> (expr, simplified)

    def fork(self) -> Analyzer:
        """A fresh analyzer over the variable bounds in scope (copied), writing terms in
        this one's order; no memo, no symbolic ranges."""
        sub = type(self)(self.const_int_bound.bounds)
        sub.atoms.share_order(self.atoms)
        return sub

    # -- scope -----------------------------------------------------------------------------

    def push_bound(self, v: Var, iv) -> object:
        """Set the bounds of ``v`` (intersected with what is known); returns a token for
        :meth:`pop_bound`."""
        token = self.const_int_bound.push(v, iv)
        self._scope_changed()
        return token

    def pop_bound(self, v: Var, token) -> None:
        """Restore the bounds of ``v`` from before the :meth:`push_bound` that gave
        ``token``."""
        self.const_int_bound.pop(v, token)
        self._scope_changed()

    def _scope_changed(self) -> None:
        # Bounds decide divisions and comparisons, so simplified and canonical forms go.
        self._memo = {}
        self.canonical_simplify.drop_memo()

    def see(self, v: Var) -> None:
        """Give ``v`` its place in the term order (callers declare outer loops first)."""
        self.atoms.declare(v)

    @property
    def sym_ranges(self) -> dict:
        """Loop variables with symbolic ranges ``[lo, hi]`` (expressions), used to decide
        comparisons that constant bounds cannot (``i < n`` inside ``for i in range(n)``);
        callers add and remove entries as they enter and leave loops."""
        return self.int_set.sym_ranges

    # -- simplify and bound ----------------------------------------------------------------

    def simplify(self, e: PrimExpr) -> PrimExpr:
        """The simplified form of ``e``; ``e`` itself when nothing changed."""
        hit = self._memo.get(id(e))
        if hit is not None:
            return hit[1]
        t = type(e)
        if t is Var or t is IntImm or t is E.FloatImm or t is E.StringImm:
            return e
        if e.dtype in CANONICAL_DTYPES:
            canonical = self.canonical_simplify
            res = canonical.rebuild(canonical.canon(e), e.dtype)
        else:
            res = self.rewrite_simplify.rewrite(e)
        # Return the input object when the result is the same tree (callers test identity
        # to see whether anything changed). A direct comparison exits at the first
        # difference, which is cheaper than interning both trees.
        if res is not e and structural_equal(res, e):
            res = e
        self._memo[id(e)] = (e, res)
        return res

    def bound(self, e) -> tuple:
        """Inclusive constant bounds of ``e`` under the current scope."""
        return self.const_int_bound.bound(e)

    def can_prove(self, cond) -> bool:
        """True only if the bool expression ``cond`` holds for every value of the variables
        within the current bounds; False means \"not proven\", not \"false\"."""
        res = self.simplify(E.as_expr(cond))
        return type(res) is IntImm and res.value != 0

    def interval(self, e: PrimExpr, ranges: dict) -> tuple:
        """See :func:`eval_interval`."""
        return self.int_set.interval(e, ranges)

    def linear_coeff(self, e: PrimExpr, v: Var):
        """See :func:`linear_coeff`."""
        return self.canonical_simplify.linear_coeff(e, v)

    # -- the canonical form, for the statement simplifier ----------------------------------

    def canon(self, e: PrimExpr) -> SumExpr:
        """The canonical sum of an int32/int64 expression."""
        return self.canonical_simplify.canon(e)

    def rebuild(self, s: SumExpr, dtype: str) -> PrimExpr:
        """An expression for the canonical sum ``s``."""
        return self.canonical_simplify.rebuild(s, dtype)

    def sum_bound(self, s: SumExpr) -> tuple:
        """Inclusive constant bounds of a canonical sum."""
        return self.const_int_bound.sum_bound(s)

    def simplify_children(self, node):
        """``node`` rebuilt with every expression below it simplified (``node`` itself
        when none changed)."""
        return self.rewrite_simplify.simplify_children(node)


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
