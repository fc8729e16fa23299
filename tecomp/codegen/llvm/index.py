"""Index arithmetic for the LLVM emitter: signed-integer expressions in i64, kept as
ramps (base + stride * lane) while they are affine in the lanes, and their lower bounds."""

from __future__ import annotations

from ...ir import expr as E
from ...ir.analysis import SIGNED_INT, is_pure_int
from .ir import Val


class IndexMixin:
    """Index-mode evaluation; mixed into ``emit.Emitter``."""

    def ev_idx(self, e) -> Val:
        """A signed-integer expression evaluated in i64; affine lane dependence is kept as
        a ramp so memory accesses can be classified (contiguous / broadcast / gather)."""
        t = type(e)
        if t is E.IntImm:
            return self.i64(e.value)
        if not is_pure_int(e, self.pure_cache):
            v = self.mat(self.ev(e))
            if e.dtype == "int64":
                return v
            return self.int_convert(v, e.dtype, "int64")
        if t is E.Var:
            return self.lookup(e)
        if t is E.Cast:
            return self.ev_idx(e.value)
        a, b = self.ev_idx(e.a), self.ev_idx(e.b)
        if t in (E.Add, E.Sub):
            op = "add" if t is E.Add else "sub"
            sgn = 1 if t is E.Add else -1
            if a.lanes == 1 and b.lanes == 1:
                return self.add_i64(op, a, b)
            if (a.ramp or a.lanes == 1) and (b.ramp or b.lanes == 1):
                lanes = max(a.lanes, b.lanes)
                ab, asd = a.ramp if a.ramp else (a, 0)
                bb, bsd = b.ramp if b.ramp else (b, 0)
                base = self.add_i64(op, ab, bb)
                return Val(None, "i64", lanes, (base, asd + sgn * bsd))
        if t is E.Mul:
            for x, y in ((a, b), (b, a)):
                if x.ramp and y.lanes == 1 and y.ref.lstrip("-").isdigit():
                    c = int(y.ref)
                    base = self.add_i64("mul", x.ramp[0], y)
                    return Val(None, "i64", x.lanes, (base, x.ramp[1] * c))
            if a.lanes == 1 and b.lanes == 1:
                return self.add_i64("mul", a, b)
        if t in (E.Add, E.Sub, E.Mul):
            a, b = self.unify(a, b)
            op = {E.Add: "add", E.Sub: "sub", E.Mul: "mul"}[t]
            return self.val(f"{op} nsw {a.vty} {a.ref}, {b.ref}", "i64", a.lanes)
        a, b = self.unify(a, b)
        if t in (E.Min, E.Max):
            return self.intrinsic("smin" if t is E.Min else "smax", "i64", a.lanes, [a, b])
        return self.floordivmod(t is E.FloorDiv, a, b, "int64", e)

    def add_i64(self, op: str, a: Val, b: Val) -> Val:
        """Scalar i64 arithmetic with constant folding (keeps ramps' bases simple)."""
        if a.ref.lstrip("-").isdigit() and b.ref.lstrip("-").isdigit():
            x, y = int(a.ref), int(b.ref)
            return self.i64({"add": x + y, "sub": x - y, "mul": x * y}[op])
        if op in ("add", "sub") and b.ref == "0":
            return a
        if op == "add" and a.ref == "0":
            return b
        if op == "mul" and (a.ref == "1" or b.ref == "1"):
            return b if a.ref == "1" else a
        return self.val(f"{op} nsw i64 {a.ref}, {b.ref}", "i64")

    # ---- bounds (for cheaper floor division) ------------------------------------------

    def nonneg(self, e) -> bool:
        lo = self.lower_bound(e)
        return lo is not None and lo >= 0

    def lower_bound(self, e):
        t = type(e)
        if t is E.IntImm:
            return e.value
        if t is E.Var:
            return self.bounds.get(e)
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
