"""Buffers: named, typed, C-contiguous regions of memory that loop IR reads and writes."""

from __future__ import annotations

from dataclasses import dataclass

from .expr import IntImm, PrimExpr, Var, as_expr


@dataclass(frozen=True, eq=False, slots=True)
class Buffer:
    """A C-contiguous array of ``dtype`` with logical ``shape`` living in ``scope``.

    ``scope`` is "global" (function arguments and heap temporaries), "local" (private to
    one thread: registers/stack) or "shared" (GPU shared memory). Loop IR addresses it
    with one flat element index, computed from ``shape`` in row-major order.
    """

    name: str
    dtype: str
    shape: tuple
    scope: str = "global"
    data: Var = None  # the pointer variable; set by ``make_buffer``

    def __str__(self):
        return self.name

    def __repr__(self):
        shape = ", ".join(map(str, self.shape))
        return f"Buffer({self.name}, {self.dtype}, [{shape}], {self.scope})"

    def flat_index(self, indices) -> PrimExpr:
        """Row-major element offset of ``indices``."""
        idx = None
        for _i, (ix, ext) in enumerate(zip(indices, self.shape)):
            idx = ix if idx is None else idx * ext + ix
        return IntImm(0) if idx is None else idx


def make_buffer(name: str, dtype: str, shape, scope: str = "global") -> Buffer:
    return Buffer(name, dtype, tuple(as_expr(s) for s in shape), scope, Var(name, "handle"))


def buffer_key(buf: Buffer):
    """What identifies a buffer's storage: its data variable when it has one (views of
    one allocation share it), else the buffer itself."""
    return buf.data if buf.data is not None else buf
