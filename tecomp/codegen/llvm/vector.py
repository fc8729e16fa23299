"""Vector lanes for the LLVM emitter: vectorized loops, the lane mask, and comparisons of
ramps.

A vectorized reduction loop (``tecomp.ir.analysis.lane_reduction``: ``acc = acc + v``)
computes ``v`` for every lane at once, combines the lanes in pairs (``log2(lanes)``
shuffles and operations, where a serial loop chains one operation per lane), and folds the
result into the accumulator.

A vectorized loop with a constant extent is emitted once with LLVM vector types; every
expression of its body is then a vector of ``lanes`` values, a lane-invariant scalar, or a
ramp (an i64 base + stride * lane, see ``index``) whose vector is only built when
needed. A lane-dependent condition becomes a mask that loads and stores honour
(``memory``).
"""

from __future__ import annotations

import functools
from contextlib import contextmanager

from ...errors import CodegenError
from ...ir import expr as E
from ...ir.analysis import lane_reduction
from ...ir.functor import post_order_visit
from .ir import Val

#: Widest single vector emitted; wider constant vectorized loops are strip-mined.
MAX_LANES = 64
STRIP_LANES = 16

#: The same comparison with its operands swapped (a < b is b > a).
_FLIP = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "EQ": "EQ", "NE": "NE"}


class VectorLanes:
    """The lane context, the ``vectors`` part of ``emit.Emitter``: ``lanes``, the width of
    the vector body being emitted (1 outside one), and ``mask``, the ``<lanes x i1>`` of
    the lanes a guarded region runs in (None: every lane). Read them; change them only
    through :meth:`with_mask` and :meth:`lanes_of_body`."""

    def __init__(self, emitter):
        self.em = emitter
        self.b = emitter.builder
        self.begin_function()

    def begin_function(self) -> None:
        self.lanes = 1
        self.mask: Val | None = None

    @contextmanager
    def lanes_of_body(self, lanes: int):
        """Inside the ``with`` block a vector body of ``lanes`` is emitted, with every lane
        on; the lane context is restored after it."""
        old_lanes, old_mask = self.lanes, self.mask
        self.lanes = lanes
        self.mask = None
        try:
            yield
        finally:
            self.lanes, self.mask = old_lanes, old_mask

    def with_mask(self, cond: Val, fn):
        """``fn()`` with the lanes where ``cond`` holds (and the enclosing mask) on."""
        b = self.b
        old = self.mask
        if old is not None:
            cond, m = b.unify(cond, old)
            cond = b.val(f"and {cond.vty} {cond.ref}, {m.ref}", "i1", cond.lanes)
        self.mask = b.bcast(cond, self.lanes) if self.lanes > 1 else None
        try:
            return fn()
        finally:
            self.mask = old

    def lanes_of(self, e) -> int:
        """Lane count a lazily evaluated sub-expression may produce in this context."""
        return self.lanes if (self.mask is not None or self._varies(e)) else 1

    def _varies(self, e) -> bool:
        if self.lanes == 1:
            return False
        symbols = self.em.symbols
        found = False

        def fn(n):
            nonlocal found
            if isinstance(n, E.Var):
                v = symbols.value(n)
                if v is not None and v.lanes > 1:
                    found = True

        post_order_visit(e, fn)
        return found

    def ramp_cmp(self, name: str, a: Val, b: Val) -> Val:
        """Compare a ramp with a scalar lane-wise in i32: base + s*lane OP x  <=>
        s*lane OP x - base. A tail guard then costs one 32-bit vector compare."""
        bld = self.b
        if a.ramp is None:
            a, b, name = b, a, _FLIP[name]
        base, stride = a.ramp
        n = a.lanes
        d = bld.add_i64("sub", b, base)
        bld.declare("@llvm.smin.i64", "declare i64 @llvm.smin.i64(i64, i64)")
        bld.declare("@llvm.smax.i64", "declare i64 @llvm.smax.i64(i64, i64)")
        d = bld.val(f"call i64 @llvm.smax.i64(i64 {d.ref}, i64 -2147483648)", "i64")
        d = bld.val(f"call i64 @llvm.smin.i64(i64 {d.ref}, i64 2147483647)", "i64")
        d = bld.val(f"trunc i64 {d.ref} to i32", "i32")
        d = bld.bcast(d, n)
        steps = "<" + ", ".join(f"i32 {k * stride}" for k in range(n)) + ">"
        pred = {"EQ": "eq", "NE": "ne", "LT": "slt", "LE": "sle", "GT": "sgt", "GE": "sge"}
        return bld.val(f"icmp {pred[name]} <{n} x i32> {steps}, {d.ref}", "i1", n)

    def loop(self, s, ext: int) -> None:
        """The vectorized loop ``s`` of constant extent ``ext``: one vector body, or
        bodies of :data:`STRIP_LANES` in a loop plus a tail body when it is wider than
        :data:`MAX_LANES`."""
        b = self.b
        mn = self.em.index.ev(s.min)
        lo = self.em.index.lower_bound(s.min)
        red = lane_reduction(s.body, s.loop_var)
        body = self._body if red is None else functools.partial(self._reduce, red)
        if ext <= MAX_LANES:
            return body(s, mn, ext, lo)
        chunks, tail = divmod(ext, STRIP_LANES)

        def emit_chunk(vo: Val):
            base = b.add_i64("add", mn, b.add_i64("mul", vo, b.i64(STRIP_LANES)))
            body(s, base, STRIP_LANES, lo)

        self.em.loops.counted(b.i64(0), b.i64(chunks), emit_chunk, s.loop_var.name + ".vo",
                              None)
        if tail:
            base = b.add_i64("add", mn, b.i64(chunks * STRIP_LANES))
            body(s, base, tail, lo)

    def _body(self, s, base: Val, lanes: int, lo) -> None:
        with self.lanes_of_body(lanes):
            self.em.symbols.bind(s.loop_var, _lane_indices(base, lanes), lo)
            self.em.stmt(s.body)

    def _reduce(self, red, s, base: Val, lanes: int, lo) -> None:
        """``lanes`` iterations, from ``base``, of the reduction loop ``s`` (``red``, its
        :class:`~tecomp.ir.analysis.LaneReduction`): the operand of every lane in one
        vector, its lanes combined in pairs, the result folded into the accumulator."""
        em, b = self.em, self.b
        if self.lanes != 1:
            raise CodegenError(f"internal: reduction loop {s.loop_var.name!r} inside a "
                               f"vector body")
        with self.lanes_of_body(lanes):
            em.symbols.bind(s.loop_var, _lane_indices(base, lanes), lo)
            v = b.bcast(b.mat(em.ev(red.operand)), lanes)
        v = self._combine_lanes(red.combiner, v)
        upd = red.combiner
        acc_first = upd.b is red.operand
        acc = em.ev(upd.a if acc_first else upd.b)
        em.memory.store(red.store, em.arith(upd, acc, v) if acc_first else em.arith(upd, v, acc))

    def _combine_lanes(self, combiner, v: Val) -> Val:
        """The lanes of vector ``v`` combined by ``combiner`` (a binary node) in pairs: the
        lower half with the upper half until one lane is left (an odd lane out is kept for
        the end)."""
        b, em = self.b, self.em

        def lane(k):
            return b.val(f"extractelement {v.vty} {v.ref}, i32 {k}", v.ty)

        odd = []
        while v.lanes > 1:
            half = v.lanes // 2
            if v.lanes % 2:
                odd.append(lane(v.lanes - 1))
            if half == 1:
                v = em.arith(combiner, lane(0), lane(1))
            else:
                v = em.arith(combiner, b.shuffle(v, v, v.ty, list(range(half))),
                             b.shuffle(v, v, v.ty, list(range(half, 2 * half))))
        for x in odd:
            v = em.arith(combiner, v, x)
        return v


def _lane_indices(base: Val, lanes: int) -> Val:
    """The loop variable of a vector body of ``lanes`` from ``base``: the ramp ``base +
    lane`` (a body of one lane, a strip-mined loop's tail, is scalar: ``base``)."""
    return base if lanes == 1 else Val(None, "i64", lanes, (base, 1))
