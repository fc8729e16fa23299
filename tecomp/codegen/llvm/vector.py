"""Vector values and vectorized loops for the LLVM emitter.

A vectorized loop with a constant extent is emitted once with LLVM vector types; every
expression of its body is then a vector of ``lanes`` values, a lane-invariant scalar, or a
ramp (an i64 base + stride * lane, see ``index``) whose vector is only built when
needed. A lane-dependent condition becomes a mask that loads and stores honour
(``memory``).
"""

from __future__ import annotations

from ...errors import CodegenError
from ...ir import expr as E
from ...ir.functor import post_order_visit
from . import types as T
from .ir import Val

#: Widest single vector emitted; wider constant vectorized loops are strip-mined.
MAX_LANES = 64
STRIP_LANES = 16

#: The same comparison with its operands swapped (a < b is b > a).
_FLIP = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "EQ": "EQ", "NE": "NE"}


class VectorMixin:
    """Ramps, broadcasts, masks and vector loop bodies; mixed into ``emit.Emitter``."""

    def mat(self, v: Val) -> Val:
        """The materialized vector of a ramp (other values are returned unchanged)."""
        if v.ramp is None:
            return v
        base, stride = v.ramp
        b = self.bcast(base, v.lanes)
        if stride == 0:
            return b
        steps = "<" + ", ".join(f"i64 {k * stride}" for k in range(v.lanes)) + ">"
        return self.val(f"add nsw {b.vty} {b.ref}, {steps}", "i64", v.lanes)

    def bcast(self, v: Val, lanes: int) -> Val:
        if v.lanes == lanes and v.ramp is None:
            return v
        if v.ramp is not None:
            return self.mat(v)
        if v.lanes != 1:
            raise CodegenError(f"internal: lane mismatch {v.lanes} vs {lanes}")
        if lanes == 1:
            return v
        vt = T.vec(v.ty, lanes)
        ins = self.val(f"insertelement {vt} poison, {v.ty} {v.ref}, i64 0", v.ty, lanes)
        return self.val(
            f"shufflevector {vt} {ins.ref}, {vt} poison, <{lanes} x i32> zeroinitializer",
            v.ty,
            lanes,
        )

    def shuffle(self, a: Val, b: Val, mt: str, mask: list) -> Val:
        """``shufflevector`` of ``a`` and ``b`` (vectors of ``mt``, one type): lane ``k`` of
        the result is lane ``mask[k]`` of ``a`` followed by ``b``."""
        vt = T.vec(mt, a.lanes)
        m = ", ".join(f"i32 {i}" for i in mask)
        return self.val(f"shufflevector {vt} {a.ref}, {vt} {b.ref}, <{len(mask)} x i32> <{m}>",
                        mt, len(mask))

    def unify(self, *vals: Val) -> tuple:
        lanes = max(v.lanes for v in vals)
        return tuple(self.bcast(self.mat(v), lanes) for v in vals)

    def true_mask(self, lanes: int) -> Val:
        return self.const(True, "bool", lanes)

    def ramp_cmp(self, name: str, a: Val, b: Val) -> Val:
        """Compare a ramp with a scalar lane-wise in i32: base + s*lane OP x  <=>
        s*lane OP x - base. A tail guard then costs one 32-bit vector compare."""
        if a.ramp is None:
            a, b, name = b, a, _FLIP[name]
        base, stride = a.ramp
        n = a.lanes
        d = self.add_i64("sub", b, base)
        self.declare("@llvm.smin.i64", "declare i64 @llvm.smin.i64(i64, i64)")
        self.declare("@llvm.smax.i64", "declare i64 @llvm.smax.i64(i64, i64)")
        d = self.val(f"call i64 @llvm.smax.i64(i64 {d.ref}, i64 -2147483648)", "i64")
        d = self.val(f"call i64 @llvm.smin.i64(i64 {d.ref}, i64 2147483647)", "i64")
        d = self.val(f"trunc i64 {d.ref} to i32", "i32")
        d = self.bcast(d, n)
        steps = "<" + ", ".join(f"i32 {k * stride}" for k in range(n)) + ">"
        pred = {"EQ": "eq", "NE": "ne", "LT": "slt", "LE": "sle", "GT": "sgt", "GE": "sge"}
        return self.val(f"icmp {pred[name]} <{n} x i32> {steps}, {d.ref}", "i1", n)

    def with_mask(self, cond: Val, fn):
        old = self.mask
        if old is not None:
            cond, m = self.unify(cond, old)
            cond = self.val(f"and {cond.vty} {cond.ref}, {m.ref}", "i1", cond.lanes)
        self.mask = self.bcast(cond, self.lanes) if self.lanes > 1 else None
        try:
            return fn()
        finally:
            self.mask = old

    def _lanes_of(self, e) -> int:
        """Lane count a lazily evaluated sub-expression may produce in this context."""
        return self.lanes if (self.mask is not None or self._varies(e)) else 1

    def _varies(self, e) -> bool:
        if self.lanes == 1:
            return False
        found = False

        def fn(n):
            nonlocal found
            if isinstance(n, E.Var) and n in self.env and self.env[n].lanes > 1:
                found = True

        post_order_visit(e, fn)
        return found

    def vector_loop(self, s, ext: int):
        mn = self.ev_idx(s.min)
        lo = self.lower_bound(s.min)
        if ext <= MAX_LANES:
            return self.vector_body(s, mn, ext, lo)
        # Strip-mine a long vector loop into STRIP_LANES-wide pieces plus one tail piece.
        chunks, tail = divmod(ext, STRIP_LANES)

        def emit_chunk(vo: Val):
            base = self.add_i64("add", mn, self.add_i64("mul", vo, self.i64(STRIP_LANES)))
            self.vector_body(s, base, STRIP_LANES, lo)

        self.counted_loop(self.i64(0), self.i64(chunks), emit_chunk, s.loop_var.name + ".vo", None)
        if tail:
            base = self.add_i64("add", mn, self.i64(chunks * STRIP_LANES))
            self.vector_body(s, base, tail, lo)

    def vector_body(self, s, base: Val, lanes: int, lo):
        old_lanes, old_mask = self.lanes, self.mask
        self.lanes = lanes
        self.mask = None
        self.bind_loop_var(s.loop_var, Val(None, "i64", lanes, (base, 1)), lo)
        try:
            self.stmt(s.body)
        finally:
            self.lanes, self.mask = old_lanes, old_mask
