"""Virtual threads: loops bound to ``vthread`` become loops pushed as deep as they go.

A virtual thread is a thread of the schedule that the GPU does not launch: each real
thread runs the iterations of its ``vthread`` loops itself (register tiling, as in TVM).
Running a vthread loop where it stands would repeat the whole nest inside it, with the
shared-memory loads and barriers it contains, once per virtual thread. Instead its
iterations are interleaved at the innermost statements that depend on them:

- a statement that does not use the virtual thread runs once (the shared-memory tiles,
  whose region covers every virtual thread of the block, are loaded once);
- a "local" buffer allocated inside the loop gets one copy per virtual thread, stacked
  (``v * size + index``), so the copies live side by side in registers;
- a loop, ``if`` or ``let`` that does not depend on the virtual thread is kept and the
  virtual thread goes inside it (a vectorized loop stays innermost: it is wrapped);
  elsewhere the statement is wrapped in an unrolled loop.

Virtual threads are independent by definition (they are threads), so this reordering
keeps the result.
"""

from __future__ import annotations

import dataclasses

from .. import expr as E
from .. import stmt as S
from ..buffer import Buffer
from ..functor import IRMutator, post_order_visit, uses_var


class _Rebase(IRMutator):
    """Accesses to ``old`` go to ``new`` at ``offset + index``."""

    def __init__(self, old: Buffer, new: Buffer, offset):
        super().__init__()
        self.old, self.new, self.offset = old, new, offset

    def visit_Load(self, e):
        e = self.generic(e)
        if e.buffer is not self.old:
            return e
        return E.Load(self.new, self.offset + e.index, e.dtype)

    def visit_Store(self, s):
        s = self.generic(s)
        if s.buffer is not self.old:
            return s
        return S.Store(self.new, s.value, self.offset + s.index)


def _size(buf: Buffer):
    n = E.IntImm(1, "int32")
    for d in buf.shape:
        n = n * d
    return n


def _inject(var: E.Var, extent, stmt):
    if not uses_var(stmt, var):
        return stmt
    t = type(stmt)
    if t is S.SeqStmt:
        return S.seq(*[_inject(var, extent, c) for c in stmt.seq])
    if t is S.Allocate:
        buf = stmt.buffer
        if buf.scope == "local":
            size = _size(buf)
            new = Buffer(buf.name, buf.dtype, (extent, *buf.shape), buf.scope,
                         E.Var(buf.name, "handle"))
            body = _Rebase(buf, new, var * size).visit(stmt.body)
            return S.Allocate(new, _inject(var, extent, body))
        return dataclasses.replace(stmt, body=_inject(var, extent, stmt.body))
    if (t is S.For and stmt.kind != "vectorized" and not uses_var(stmt.extent, var)
            and not uses_var(stmt.min, var)):
        return dataclasses.replace(stmt, body=_inject(var, extent, stmt.body))
    if t is S.IfThenElse and not uses_var(stmt.condition, var):
        return dataclasses.replace(
            stmt, then_case=_inject(var, extent, stmt.then_case),
            else_case=None if stmt.else_case is None else _inject(var, extent,
                                                                  stmt.else_case))
    if t is S.LetStmt and not uses_var(stmt.value, var):
        return dataclasses.replace(stmt, body=_inject(var, extent, stmt.body))
    return S.For(var, E.IntImm(0, var.dtype), extent, "unrolled", stmt)


class _Injector(IRMutator):
    def visit_For(self, s: S.For):
        s = self.generic(s)
        if s.kind != "thread_binding" or s.thread_tag != "vthread":
            return s
        return _inject(s.loop_var, s.extent, s.body)


def has_virtual_threads(func: S.PrimFunc) -> bool:
    """Whether ``func`` has a loop bound to ``vthread``."""
    found = False

    def fn(n):
        nonlocal found
        found |= isinstance(n, S.For) and n.thread_tag == "vthread"

    post_order_visit(func.body, fn)
    return found


def inject_virtual_threads(func: S.PrimFunc) -> S.PrimFunc:
    """``func`` with every ``vthread`` loop interleaved into its body (module docstring).

    Parameters
    ----------
    func : PrimFunc

    Returns
    -------
    PrimFunc
        ``func`` itself when it has no virtual threads.

    Examples
    --------
    >>> func = inject_virtual_threads(func)   # doctest: +SKIP
    """
    if not has_virtual_threads(func):
        return func
    return func.with_body(_Injector().visit(func.body))
