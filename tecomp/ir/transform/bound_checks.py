"""Bounds checking: every buffer access checks its index at run time.

``instrument_bound_checks`` guards each load and store of a parameter or an allocation
with a run-time ``Check`` (``tecomp.ir.expr.Check``) of ``0 <= index < elements``: an
access outside the buffer is skipped (a load yields 0), the first one is recorded in the
call's error record, and after the kernel has finished the runtime raises
``RuntimeCheckError``::

    kernel 'f': read of A[7] is out of bounds: A has 5 elements
    kernel 'g': write of out[-1] is out of bounds: out has (n * 4) elements

This is what ``tecomp.build(..., check_bounds=True)`` and ``TECOMP_CHECK_BOUNDS=1`` add
to the pipeline (``tecomp.ir.transform.pipeline``), after every pass that changes
indices, as TVM's ``instrument_bound_checkers`` does. In a vectorized loop each lane
checks its own element, so a vector access is checked over its whole span, lane by lane.
Accesses the loop bounds prove in range (``0 <= i < 64`` over a 64-element buffer, ``i``
below ``n`` over ``n`` elements) are left alone. Prefetch hints are not accesses: they are
never checked.
"""

from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..analysis import buffer_key
from ..arith import const_int_bound, eval_interval, prove
from ..functor import IRMutator, collect_vars
from ..printer import expr_str

#: The attribute an instrumented PrimFunc carries, so the pass runs once per function.
ATTR = "bound_checks"


def _elements(buf, dtype: str | None = None) -> E.PrimExpr:
    """The element count of ``buf`` in ``dtype`` (default: its dimensions' own)."""
    n = None
    for d in buf.shape:
        d = E.cast(dtype, d) if dtype is not None else d
        n = d if n is None else E.binary(E.Mul, n, d)
    return n if n is not None else E.IntImm(1, dtype or "int32")


def _count_text(buf) -> str:
    """The element count as the message shows it: ``20``, ``n * 4``."""
    sizes = [E.const_value(d) for d in buf.shape]
    if None not in sizes:
        total = 1
        for c in sizes:
            total *= int(c)
        return str(total)
    return " * ".join(expr_str(d) for d in buf.shape)


class _Instrument(IRMutator):
    def __init__(self, params):
        super().__init__()
        self.extents: dict = {}  # buffer key -> (buffer, element count)
        self.ranges: dict = {}  # loop variable -> (min, max) expressions, inclusive
        self.bounds: dict = {}  # variable -> constant inclusive bounds
        for b in params:
            self._declare(b)

    def _declare(self, b) -> None:
        self.extents[buffer_key(b)] = b
        for d in b.shape:
            for v in collect_vars(d):
                self.bounds.setdefault(v, (0, None))  # sizes are never negative

    def _in_range(self, idx, n) -> bool:
        """Whether the loop bounds prove ``0 <= idx < n`` (``n`` in ``idx``'s dtype)."""
        lo, hi = const_int_bound(idx, self.bounds)
        nc = E.const_value(n)
        if lo is not None and lo >= 0 and hi is not None and nc is not None and hi < nc:
            return True
        if not self.ranges:
            return bool(lo is not None and lo >= 0 and prove(E.binary(E.LT, idx, n),
                                                                 self.bounds))
        slo, shi = eval_interval(idx, self.ranges, self.bounds)
        if slo is None or shi is None:
            return False
        return (prove(E.binary(E.GE, slo, 0), self.bounds)
                and prove(E.binary(E.LT, shi, n), self.bounds))

    def _check(self, kind: str, buf, index):
        """The checked condition of an access, or None when it is proven in range."""
        alloc = self.extents.get(buffer_key(buf))
        if alloc is None:
            return None  # not a buffer of this function's (a kernel's own view)
        if self._in_range(index, _elements(alloc, index.dtype)):
            return None
        # In int64, so that neither the index nor the count can wrap.
        idx = E.cast("int64", index)
        cond = E.logical(E.And, E.binary(E.GE, idx, E.IntImm(0, "int64")),
                         E.binary(E.LT, idx, _elements(alloc, "int64")))
        message = (f"{kind} of {buf.name}[{{value}}] is out of bounds: {buf.name} has "
                   f"{_count_text(alloc)} elements")
        return E.Check(cond, idx, message)

    def visit_Load(self, e):
        e = self.generic(e)
        ok = self._check("read", e.buffer, e.index)
        if ok is None:
            return e
        return E.Select(ok, e, E.make_const(0, e.dtype) if e.dtype != "handle" else e,
                        e.dtype)

    def visit_Store(self, s):
        s = self.generic(s)
        ok = self._check("write", s.buffer, s.index)
        return s if ok is None else S.IfThenElse(ok, s)

    def visit_Evaluate(self, s):
        return s if S.prefetched(s) is not None else self.generic(s)

    def visit_Allocate(self, s):
        self._declare(s.buffer)
        return self.generic(s)

    def visit_For(self, s):
        mn, ext = self.visit(s.min), self.visit(s.extent)
        v = s.loop_var
        hi = E.binary(E.Sub, E.binary(E.Add, mn, ext), E.make_const(1, mn.dtype))
        lo_c, _ = const_int_bound(mn, self.bounds)
        _, hi_c = const_int_bound(hi, self.bounds)
        old_r, old_b = self.ranges.get(v), self.bounds.get(v)
        self.ranges[v] = (mn, hi)
        self.bounds[v] = (lo_c, hi_c)
        try:
            body = self.visit(s.body)
        finally:
            _restore(self.ranges, v, old_r)
            _restore(self.bounds, v, old_b)
        if mn is s.min and ext is s.extent and body is s.body:
            return s
        return S.For(v, mn, ext, s.kind, body, s.thread_tag, s.hint)


def _restore(d: dict, k, old) -> None:
    if old is None:
        d.pop(k, None)
    else:
        d[k] = old


def instrument_bound_checks(func: S.PrimFunc) -> S.PrimFunc:
    """``func`` with every load and store checked against its buffer's size at run time.

    Parameters
    ----------
    func : PrimFunc
        A lowered function (the pipeline's other passes have run: the indices are
        final).

    Returns
    -------
    PrimFunc
        ``func`` with each access that the loop bounds do not prove in range guarded by
        a ``Check`` (a failed one skips the access, a load yields 0, and the call raises
        ``RuntimeCheckError`` naming the kernel, the buffer, read or write, the index and
        the size). An instrumented function (``attrs["bound_checks"]``) is returned as it
        is.

    Examples
    --------
    >>> f = instrument_bound_checks(tecomp.lower(s, [A, B]))   # doctest: +SKIP
    """
    if func.attrs.get(ATTR):
        return func
    body = _Instrument(func.params).visit(func.body)
    attrs = dict(func.attrs)
    attrs[ATTR] = True
    return S.PrimFunc(func.name, func.params, body, attrs)
