"""Index arithmetic for the LLVM emitter: signed-integer expressions in i64, kept as
ramps (base + stride * lane) while they are affine in the lanes, and their constant
lower bounds (a non-negative dividend makes floor division one unsigned division)."""

from __future__ import annotations

from ...ir import expr as E
from ...ir.analysis import SIGNED_INT, is_pure_int
from .ir import Val


class IndexArith:
    """Index-mode evaluation, the ``index`` part of ``emit.Emitter``.

    It remembers, per function, which expressions are pure integer arithmetic (those it
    evaluates in i64 whatever their dtype), and the values it computed for them: an
    expression evaluated again in the same basic block, its variables bound to the same
    values, is the value already there. An unrolled loop emits its body once per
    iteration with the loop variable rebound, so every index part that does not read that
    variable is computed once, not once per iteration (a fully unrolled convolution tile
    of 24,000 loads left LLVM 150,000 redundant integer instructions to remove)."""

    def __init__(self, emitter):
        self.em = emitter
        self.b = emitter.builder
        self.begin_function()

    def begin_function(self) -> None:
        self._pure: dict = {}  # is_pure_int's memo
        # id(expression) -> (expression, function, block label, value, {var: its value})
        self._known: dict = {}
        self._reads: dict | None = None  # the variables the expression being evaluated reads

    def is_index(self, e) -> bool:
        """Whether ``e`` is pure signed-integer arithmetic (evaluated by :meth:`ev`)."""
        return is_pure_int(e, self._pure)

    def ev(self, e) -> Val:
        """A signed-integer expression evaluated in i64; affine lane dependence is kept as
        a ramp so memory accesses can be classified (contiguous / broadcast / gather)."""
        t = type(e)
        if t is E.IntImm:
            return self.b.i64(e.value)
        if not is_pure_int(e, self._pure):
            v = self.b.mat(self.em.ev(e))
            if e.dtype == "int64":
                return v
            return self.b.int_convert(v, e.dtype, "int64")
        if t is E.Var:
            v = self.em.symbols.lookup(e)
            if self._reads is not None:
                self._reads[e] = v
            return v
        fn = self.b.fn
        known = self._known.get(id(e))
        if known is not None and known[0] is e and known[1] is fn and known[2] == fn.label \
                and all(self.em.symbols.value(var) is v for var, v in known[4].items()):
            if self._reads is not None:
                self._reads.update(known[4])
            return known[3]
        outer, self._reads = self._reads, {}
        try:
            v = self._compute(e, t)
        finally:
            reads, self._reads = self._reads, outer
        if outer is not None:
            outer.update(reads)
        self._known[id(e)] = (e, fn, fn.label, v, reads)
        return v

    def address(self, e) -> Val:
        """A memory access's element index in i64, as :meth:`ev`; where its sums and
        products read an integer that is not index arithmetic (a float coordinate cast to
        an integer, an index loaded from memory), that term is evaluated on its own, so the
        lanes' affine part still makes a ramp: a resize's tap ``x[lane + row(h) + 16 *
        clamp(int(floor(...w...)))]`` is a contiguous load where the lanes do not reach
        the cast term, not a gather."""
        t = type(e)
        if (t not in (E.Add, E.Sub, E.Mul) or e.dtype not in SIGNED_INT
                or is_pure_int(e, self._pure)):
            return self.ev(e)
        return self._combine(t, self.address(e.a), self.address(e.b), e)

    def _compute(self, e, t) -> Val:
        """:meth:`ev` of a pure integer expression other than a constant or a variable."""
        if t is E.Cast:
            return self.ev(e.value)
        return self._combine(t, self.ev(e.a), self.ev(e.b), e)

    def _combine(self, t, x: Val, y: Val, e) -> Val:
        """Binary integer node ``e`` (of type ``t``) of operands already evaluated in i64,
        a ramp kept where the result is affine in the lanes."""
        b = self.b
        if t in (E.Add, E.Sub):
            op = "add" if t is E.Add else "sub"
            sgn = 1 if t is E.Add else -1
            if x.lanes == 1 and y.lanes == 1:
                return b.add_i64(op, x, y)
            if (x.ramp or x.lanes == 1) and (y.ramp or y.lanes == 1):
                lanes = max(x.lanes, y.lanes)
                xb, xs = x.ramp if x.ramp else (x, 0)
                yb, ys = y.ramp if y.ramp else (y, 0)
                base = b.add_i64(op, xb, yb)
                return Val(None, "i64", lanes, (base, xs + sgn * ys))
        if t is E.Mul:
            for r, c in ((x, y), (y, x)):
                if r.ramp and c.int_literal is not None:
                    base = b.add_i64("mul", r.ramp[0], c)
                    return Val(None, "i64", r.lanes, (base, r.ramp[1] * c.int_literal))
            if x.lanes == 1 and y.lanes == 1:
                return b.add_i64("mul", x, y)
        if t in (E.Add, E.Sub, E.Mul):
            x, y = b.unify(x, y)
            op = {E.Add: "add", E.Sub: "sub", E.Mul: "mul"}[t]
            return b.val(f"{op} nsw {x.vty} {x.ref}, {y.ref}", "i64", x.lanes)
        x, y = b.unify(x, y)
        if t in (E.Min, E.Max):
            return b.intrinsic("smin" if t is E.Min else "smax", "i64", x.lanes, [x, y])
        return self.em.floordivmod(t is E.FloorDiv, x, y, "int64", e)

    # ---- bounds (for cheaper floor division) ------------------------------------------

    def nonneg(self, e) -> bool:
        lo = self.lower_bound(e)
        return lo is not None and lo >= 0

    def lower_bound(self, e) -> int | None:
        """A constant lower bound of the integer expression ``e`` from its variables' known
        lower bounds, or None."""
        t = type(e)
        if t is E.IntImm:
            return e.value
        if t is E.Var:
            return self.em.symbols.lower_bound(e)
        if t is E.Cast:
            return self.lower_bound(e.value) if e.value.dtype in SIGNED_INT else None
        if t in (E.Add, E.Mul, E.Min, E.Max, E.FloorDiv):
            la, lb = self.lower_bound(e.a), self.lower_bound(e.b)
            if la is None or lb is None:
                if t is E.Max and (la is not None and la >= 0 or lb is not None and lb >= 0):
                    return 0
                return None
            if t is E.Add:
                return la + lb
            if t is E.Mul:
                return la * lb if la >= 0 and lb >= 0 else None
            if t is E.Min:
                return min(la, lb)
            if t is E.Max:
                return max(la, lb)
            return la // lb if la >= 0 and lb > 0 else None
        if t is E.FloorMod:
            bc = E.const_value(e.b)
            return 0 if bc is not None and bc > 0 else None
        return None
