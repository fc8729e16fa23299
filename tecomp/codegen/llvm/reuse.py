"""Values the LLVM emitter reuses within one statement: an expression that comes again,
equal in structure, is not computed again.

Lowering inlines producers into their consumers, so one statement may hold the same
subtree many times: a relative position computed once in the model reaches a T5
attention bias through an absolute value, a clamp, a logarithm and a gather's index
normalisation, and there is no ``Let`` for it. LLVM removes such repeats in straight-line
code, but not where they sit on both sides of a branch or under different vector masks,
which is where the emitter puts the lazily evaluated sides of ``Select``, ``And`` and
``Or``; there each repeat is computed again (ten logarithms for one).

A value is reused only where it is certain to hold: in the function and vector context
it was computed in, while every variable it reads still has the value it had
(:meth:`ValueMemo.get`), and from the scope it was computed in or one nested inside it,
so a value computed on one side of a branch or under a mask (:meth:`ValueMemo.scope`) is
never used outside it. A new memo starts with every statement, and a store forgets every
value (:meth:`ValueMemo.forget`), so no value is reused across a store that may change
what it read.
"""

from __future__ import annotations

from contextlib import contextmanager

from ...ir import expr as E
from ...ir.structural import StructuralClasses
from .ir import Val

#: Nodes evaluated as they are (a constant, a variable's value): nothing to reuse.
_LEAVES = (E.Var, E.IntImm, E.FloatImm, E.StringImm)


class ValueMemo:
    """The values of the expressions one statement has evaluated, by structure
    (``classes`` numbers the expressions)."""

    def __init__(self, emitter, classes: StructuralClasses):
        self.em = emitter
        self._classes = classes  # shared by the memos of a module: numbering is pure
        self._scopes: list[dict] = [{}]  # class number -> (Val, context, variable values)

    def _context(self) -> tuple:
        em = self.em
        return em.builder.fn, em.symbols, em.vectors.lanes

    def get(self, e) -> Val | None:
        """The value of ``e`` computed before where it still holds, else None."""
        if isinstance(e, _LEAVES):
            return None
        n = self._classes.number(e)
        for scope in reversed(self._scopes):
            hit = scope.get(n)
            if hit is None:
                continue
            v, context, values = hit
            symbols = self.em.symbols
            if all(a is b for a, b in zip(context, self._context())) and all(
                    symbols.value(var) is val for var, val in values):
                return v
            return None
        return None

    def put(self, e, v: Val) -> None:
        """Remember ``v`` as the value of ``e`` in the current scope."""
        if isinstance(e, _LEAVES):
            return
        symbols = self.em.symbols
        values = tuple((var, symbols.value(var)) for var in self._classes.free_vars(e))
        self._scopes[-1][self._classes.number(e)] = (v, self._context(), values)

    def forget(self) -> None:
        """Forget every value: a store was emitted, which may change what they read."""
        for scope in self._scopes:
            scope.clear()

    @contextmanager
    def scope(self):
        """Inside the ``with`` block values are computed on one side of a branch or under a
        mask: they are forgotten after it; those computed before stay usable in it."""
        self._scopes.append({})
        try:
            yield
        finally:
            self._scopes.pop()
