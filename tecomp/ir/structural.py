"""Structural equality and hashing of IR trees.

Two trees are structurally equal when they have the same shape: ``Var``s (and buffers,
tensors, iteration variables) compare by identity, constants by value and dtype, every
other node by class and fields. Nodes themselves compare by identity (``==`` builds no
expression and keeps nodes hashable); these functions are the deep comparison.
"""

from __future__ import annotations

import functools

from .expr import FloatImm, IntImm, Var


@functools.cache
def _field_names(cls) -> tuple:
    return tuple(getattr(cls, "__dataclass_fields__", {}))


def _leaf_key(e):
    """Constants compare by value and dtype (-0.0 and 0.0 differ; NaN equals NaN)."""
    if type(e) is IntImm:
        return ("i", e.value, e.dtype)
    if type(e) is FloatImm:
        return ("f", float(e.value).hex(), e.dtype)
    return None


def structural_equal(a, b) -> bool:
    """Whether two expressions (or statements) are the same tree: ``Var``s (and buffers,
    tensors, iteration variables) by identity, constants by value and dtype, every other
    node by class and fields."""
    memo: set = set()
    return _seq(a, b, memo)


def _seq(a, b, memo) -> bool:
    if a is b:
        return True
    ta = type(a)
    if ta is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_seq(x, y, memo) for x, y in zip(a, b))
    if ta is Var:
        return False
    key = _leaf_key(a)
    if key is not None:
        return key == _leaf_key(b)
    if isinstance(a, (str, int, float, bool)) or a is None:
        return a == b
    names = _field_names(ta)
    if not names or ta.__module__ not in _IR_MODULES:
        return False  # buffers, tensors, reducers: identity only
    pair = (id(a), id(b))
    if pair in memo:
        return True
    ok = all(_seq(getattr(a, n), getattr(b, n), memo) for n in names)
    if ok:
        memo.add(pair)
    return ok


_IR_MODULES = ("tecomp.ir.expr", "tecomp.ir.stmt")


def structural_hash(e) -> int:
    """A hash consistent with :func:`structural_equal` (Vars hash by identity)."""
    return _shash(e, {})


def _shash(e, memo) -> int:
    if isinstance(e, tuple):
        return hash(tuple(_shash(x, memo) for x in e))
    t = type(e)
    if t is Var:
        return hash(("v", id(e)))
    key = _leaf_key(e)
    if key is not None:
        return hash(key)
    if isinstance(e, (str, int, float, bool)) or e is None:
        return hash((t.__name__, e))
    names = _field_names(t)
    if not names or t.__module__ not in _IR_MODULES:
        return hash(("o", id(e)))
    hit = memo.get(id(e))
    if hit is not None:
        return hit
    h = hash((t.__name__,) + tuple(_shash(getattr(e, n), memo) for n in names))
    memo[id(e)] = h
    return h


class StructuralClasses:
    """Numbers trees so that two trees get the same number exactly when they are
    :func:`structural_equal`; each node is numbered once, from its children's numbers, so
    numbering a tree costs its size (where comparing or hashing every subtree of it
    would cost its size at every node). Nodes numbered are kept alive, so their ids stay
    theirs. :meth:`free_vars` gives the ``Var`` nodes a numbered tree reads."""

    def __init__(self):
        self._numbers: dict = {}  # key of a class -> its number
        self._of: dict = {}  # id(node) -> (node, number)
        self._vars: dict = {}  # number -> frozenset of the Vars in the tree

    def number(self, e) -> int:
        """The number of ``e``'s class."""
        hit = self._of.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        t = type(e)
        names = _field_names(t)
        leaf = _leaf_key(e)
        children = ()
        if isinstance(e, tuple):
            children = e
            key = ("t", tuple(self.number(x) for x in e))
        elif t is Var:
            key = ("v", id(e))
        elif leaf is not None:
            key = leaf
        elif isinstance(e, (str, int, float, bool)) or e is None:
            key = (t.__name__, e)
        elif not names or t.__module__ not in _IR_MODULES:
            key = ("o", id(e))
        else:
            children = tuple(getattr(e, n) for n in names)
            key = (t,) + tuple(self.number(x) for x in children)
        n = self._numbers.setdefault(key, len(self._numbers))
        self._of[id(e)] = (e, n)
        if n not in self._vars:
            self._vars[n] = (frozenset((e,)) if t is Var else frozenset().union(
                *(self._vars[self.number(c)] for c in children)))
        return n

    def free_vars(self, e) -> frozenset:
        """The ``Var`` nodes in ``e`` (bound by a ``Let`` inside it or not)."""
        return self._vars[self.number(e)]


__all__ = ["StructuralClasses", "structural_equal", "structural_hash"]
