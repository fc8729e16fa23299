"""What the names of a function mean while the LLVM emitter writes it: the value of each
variable in scope, a constant lower bound of each signed integer variable where one is
known (it makes floor division cheaper), and the pointer of each buffer in scope.

A parallel loop's outlined body starts from a table of its own (its values and buffers
arrive through its closure) that keeps the lower bounds of the enclosing function.
"""

from __future__ import annotations

from contextlib import contextmanager

from ...errors import CodegenError
from ...ir.analysis import buffer_key
from .ir import Val


class Symbols:
    """Variables' values and lower bounds, and buffers' pointers (by ``buffer_key``)."""

    def __init__(self, lower_bounds: dict | None = None):
        self._values: dict = {}
        self._lower: dict = dict(lower_bounds or {})
        self._buffers: dict = {}

    def for_outlined_body(self) -> Symbols:
        """A table for a body outlined from this function: no values or buffers yet, the
        same lower bounds."""
        return Symbols(self._lower)

    # ---- variables ----------------------------------------------------------------------

    def lookup(self, var) -> Val:
        """The value of ``var``; a ``CodegenError`` when it has none."""
        try:
            return self._values[var]
        except KeyError:
            raise CodegenError(
                f"variable {var.name!r} is used but never defined (not a loop variable, "
                f"let binding or symbolic size of a parameter)"
            ) from None

    def value(self, var) -> Val | None:
        """The value of ``var``, None when it has none."""
        return self._values.get(var)

    def bind(self, var, v: Val, lower=None) -> None:
        """Give ``var`` the value ``v`` and the lower bound ``lower`` (None: unknown)."""
        self._values[var] = v
        if lower is not None:
            self._lower[var] = lower
        else:
            self._lower.pop(var, None)

    @contextmanager
    def binding(self, var, v: Val):
        """``var`` has the value ``v`` inside the ``with`` block (a ``Let`` expression),
        the value it had before after it."""
        old = self._values.get(var)
        self._values[var] = v
        try:
            yield
        finally:
            if old is None:
                self._values.pop(var, None)
            else:
                self._values[var] = old

    def lower_bound(self, var) -> int | None:
        """The known constant lower bound of ``var``, or None."""
        return self._lower.get(var)

    # ---- buffers ------------------------------------------------------------------------

    def buffer(self, buffer) -> str:
        """The pointer of ``buffer``; a ``CodegenError`` outside its scope."""
        try:
            return self._buffers[buffer_key(buffer)]
        except KeyError:
            raise CodegenError(
                f"buffer {buffer.name!r} is accessed outside the region where it is allocated "
                f"(not a parameter of the function, nor inside its Allocate)"
            ) from None

    def bind_buffer(self, key, ptr: str) -> None:
        """Give the buffer with ``buffer_key`` ``key`` the pointer ``ptr``."""
        self._buffers[key] = ptr

    def unbind_buffer(self, key) -> None:
        """End the scope of the buffer with ``buffer_key`` ``key``."""
        del self._buffers[key]

    def buffers_in_scope(self, keys) -> list:
        """``(key, pointer)`` of those of ``keys`` whose buffers are in scope, in order."""
        return [(k, self._buffers[k]) for k in keys if k in self._buffers]
