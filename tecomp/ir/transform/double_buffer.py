"""Double buffering of shared-memory tiles (``Stage.double_buffer``).

A "shared" stage computed at a loop is allocated and filled at the top of each iteration
and read by the rest of it, so the block waits for the load of step ``k`` before it can
compute step ``k``. Doubling the buffer lets the load of step ``k + 1`` go to the half the
compute of step ``k`` does not read::

    for k in range(m, m + n):            buf = allocate([2, ...])
      buf = allocate([...])              fill buf[0] for k = m            # prefetch
      fill buf for k              ->     for k in range(m, m + n):
      compute reading buf                  if k + 1 < m + n:
                                             fill buf[(k + 1 - m) % 2] for k + 1
                                           compute reading buf[(k - m) % 2]

Lowering lists the storage (``buffer_key``) of the double-buffered stages in the
function's ``attrs["double_buffer"]``; the pass rewrites each loop whose body starts with
the allocation and fill of such a buffer (several buffers computed at one loop are
handled together) and lists the doubled storage in ``attrs["double_buffered"]``, for
``insert_barriers``: it tells the halves apart, so a step needs one barrier, before the
fill of the next half (the compute of the previous step read that half).
"""

from __future__ import annotations

import dataclasses

from .. import expr as E
from .. import stmt as S
from ..analysis import buffer_key
from ..buffer import Buffer, make_buffer
from ..functor import IRMutator, post_order_visit, substitute
from .simplify import simplify


def _stores_to(s, key) -> bool:
    found = []

    def fn(n):
        if isinstance(n, S.Store) and buffer_key(n.buffer) == key:
            found.append(n)

    post_order_visit(s, fn)
    return bool(found)


def _peel(body, keys: frozenset) -> tuple:
    """(``[(buffer, fill)]``, rest) for the double-buffered allocations and their fills at
    the top of a loop body, in order; ``([], body)`` when it starts otherwise."""
    tiles = []
    while (isinstance(body, S.Allocate) and buffer_key(body.buffer) in keys
           and isinstance(body.body, S.SeqStmt) and len(body.body.seq) >= 2
           and _stores_to(body.body.seq[0], buffer_key(body.buffer))):
        tiles.append((body.buffer, body.body.seq[0]))
        body = S.seq(*body.body.seq[1:])
    return tiles, body


class _Halves(IRMutator):
    """Accesses of each tile moved to the doubled buffer, in the half ``parity``."""

    def __init__(self, doubled: dict, parity: E.PrimExpr):
        super().__init__()
        self.doubled = doubled
        self.parity = parity

    def _index(self, buf: Buffer, index):
        size = 1
        for d in buf.shape:
            size = size * d
        return self.parity * size + index

    def visit_Load(self, e: E.Load):
        e = self.generic(e)
        new = self.doubled.get(buffer_key(e.buffer))
        if new is None:
            return e
        return dataclasses.replace(e, buffer=new, index=self._index(e.buffer, e.index))

    def visit_Store(self, s: S.Store):
        s = self.generic(s)
        new = self.doubled.get(buffer_key(s.buffer))
        if new is None:
            return s
        return dataclasses.replace(s, buffer=new, index=self._index(s.buffer, s.index))


    def visit_MatrixLoad(self, s: S.MatrixLoad):
        s = self.generic(s)
        new = self.doubled.get(buffer_key(s.source))
        if new is None:
            return s
        return dataclasses.replace(s, source=new, offset=self._index(s.source, s.offset))


class _Injector(IRMutator):
    def __init__(self, keys: frozenset):
        super().__init__()
        self.keys = keys
        self.doubled: set = set()  # the storage of the doubled buffers

    def visit_For(self, s: S.For):
        s = self.generic(s)
        if s.kind in ("thread_binding", "vectorized"):
            return s
        tiles, rest = _peel(s.body, self.keys)
        if not tiles:
            return s
        doubled = {buffer_key(b): make_buffer(b.name, b.dtype, (2, *b.shape), b.scope)
                   for b, _ in tiles}
        self.doubled.update(buffer_key(b) for b in doubled.values())
        k, first, end = s.loop_var, s.min, s.min + s.extent
        fills = S.seq(*[f for _, f in tiles])
        prefetch = _Halves(doubled, E.IntImm(0, k.dtype)).visit(
            substitute(fills, {k: first}))
        following = _Halves(doubled, (k + 1 - first) % 2).visit(
            substitute(fills, {k: k + 1}))
        current = _Halves(doubled, (k - first) % 2).visit(rest)
        loop = dataclasses.replace(
            s, body=S.seq(S.IfThenElse(k + 1 < end, following), current))
        out = S.seq(prefetch, loop)
        for b, _ in reversed(tiles):
            out = S.Allocate(doubled[buffer_key(b)], out)
        return out


def inject_double_buffer(func: S.PrimFunc) -> S.PrimFunc:
    """``func`` with the shared tiles listed in ``func.attrs["double_buffer"]`` doubled
    and alternated by the parity of the loop they are computed at (module docstring).

    Parameters
    ----------
    func : PrimFunc

    Returns
    -------
    PrimFunc
        ``func`` itself when it has no double-buffered tile.

    Examples
    --------
    >>> func = inject_double_buffer(func)   # doctest: +SKIP
    """
    keys = func.attrs.get("double_buffer")
    if not keys:
        return func
    injector = _Injector(frozenset(keys))
    body = injector.visit(func.body)
    if body is func.body:
        return func
    attrs = {k: v for k, v in func.attrs.items() if k != "double_buffer"}
    attrs["double_buffered"] = frozenset(injector.doubled)
    # The fills substituted with the first and the next step fold to plain indices.
    return simplify(S.PrimFunc(func.name, func.params, body, attrs))
