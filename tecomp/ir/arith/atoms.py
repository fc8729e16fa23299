"""The atoms of canonical sums: one representative per structurally equal node, the
order terms are written in, and the variables each atom uses.

This part knows no bounds and calls no sibling; the other parts of the
:class:`~tecomp.ir.arith.Analyzer` reach it as ``analyzer.atoms``. Interning is what
lets a canonical sum compare atoms by identity: ``(i + 1) // 8`` met twice is one key of
a sum's terms, however many times the tree was rebuilt.
"""

from __future__ import annotations

from .. import expr as E
from ..expr import IntImm, PrimExpr, Var
from ..functor import collect_vars

#: node class -> its dataclass field names, for interning keys.
_FIELDS: dict = {}


class AtomTable:
    """Interned atoms, their term order and their variables.

    ``order`` maps an atom to its sort key: declared variables (loops, outermost first),
    then every other atom in order of first appearance. Deterministic for a given input;
    re-simplifying with the same analyzer is a fixed point. The table only ever grows:
    nothing in it depends on the bounds in scope.
    """

    def __init__(self):
        self._intern: dict = {}  # structural key -> representative node
        self._rep: dict = {}  # id(node) -> (node, representative)
        self._vars_of: dict = {}  # atom -> frozenset of Vars it uses
        self.order: dict = {}
        self._declared = 0

    # -- term order ------------------------------------------------------------------------

    def declare(self, v: Var) -> None:
        """Give ``v`` its place among the declared variables (callers declare outer loops
        first)."""
        if v not in self.order:
            self.order[v] = (0, self._declared)
            self._declared += 1

    def place(self, atom) -> None:
        """Give ``atom`` a place after every atom seen so far, unless it has one."""
        if atom not in self.order:
            self.order[atom] = (1, len(self.order))

    def share_order(self, other: AtomTable) -> None:
        """Write terms in ``other``'s order from now on (both tables then extend one order,
        so sums rebuilt by either read alike)."""
        self.order = other.order

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

    def same(self, a, b) -> bool:
        """Structural equality through the intern table."""
        return a is b or self.rep(a) is self.rep(b)

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

    # -- variables -------------------------------------------------------------------------

    def vars_of(self, atom) -> frozenset:
        """The variables ``atom`` uses."""
        hit = self._vars_of.get(atom)
        if hit is None:
            hit = frozenset((atom,)) if type(atom) is Var else frozenset(collect_vars(atom))
            self._vars_of[atom] = hit
        return hit


__all__ = ["AtomTable"]
