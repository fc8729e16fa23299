"""Run-time checks for the LLVM emitter: the call's error record, ``Check`` nodes and
integer division that cannot trap.

The error record is the two ``i64`` slots after the size values in the entry point's
``sizes`` argument (``tecomp.runtime.abi``). A function touches it only when it has a
check: it then clears the record on entry, records a failure with a compare-and-swap of
slot 0 from 0 to the check's id (the first failure wins, also across the threads of a
parallel loop, whose outlined bodies get the record's address through their closure),
stores the value in slot 1, and returns ``CHECK_FAILED`` at the end when slot 0 is set.
Functions without checks are emitted exactly as before.
"""

from __future__ import annotations

from ...ir import dtype as dt
from ...ir import expr as E
from ...ir.analysis import SIGNED_INT
from ...ir.semantics import DIVISION_BY_ZERO
from ...runtime.abi import CHECK_FAILED
from .ir import Val


class RunTimeChecks:
    """The error record, ``Check`` and guarded division, the ``checks`` part of
    ``emit.Emitter``. ``messages`` are the messages of the entry point's checks, by id - 1
    (``runtime.abi.function_signature`` describes them to the runtime)."""

    def __init__(self, emitter):
        self.em = emitter
        self.b = emitter.builder
        self.begin_function(0)

    def begin_function(self, n_sizes: int) -> None:
        """Start the checks of an entry point whose ``sizes`` argument holds ``n_sizes``
        values before the record."""
        self.messages: list = []
        self._n_sizes = n_sizes

    # ---- the record -------------------------------------------------------------------

    def _check_id(self, message: str) -> int:
        """The id (1 + index in ``messages``) of the check ``message``."""
        try:
            return self.messages.index(message) + 1
        except ValueError:
            self.messages.append(message)
            return len(self.messages)

    def record_ptr(self) -> str:
        """The address of this call's error record, set up on first use: in the entry
        point, after the sizes (and cleared); in an outlined parallel body, read from an
        extra closure field (``parallel``) that the caller fills once it sees the use."""
        fn = self.b.fn
        if fn.rec is None:
            fn.rec = "%tecomp.rec"
            if fn.is_entry:
                fn.prologue += [
                    f"%tecomp.rec = getelementptr inbounds i64, ptr %sizes, i64 {self._n_sizes}",
                    "%tecomp.rec.value = getelementptr inbounds i64, ptr %tecomp.rec, i64 1",
                    "store i64 0, ptr %tecomp.rec, align 8",
                    "store i64 0, ptr %tecomp.rec.value, align 8",
                ]
            else:
                sty, k = fn.rec_slot
                fn.prologue += [
                    f"%tecomp.rec.cl = getelementptr inbounds {sty}, ptr %cl, i32 0, i32 {k}",
                    "%tecomp.rec = load ptr, ptr %tecomp.rec.cl, align 8",
                ]
        return fn.rec

    def finish_entry(self) -> None:
        """The entry point's return: 0, or ``CHECK_FAILED`` when its record is set."""
        b = self.b
        fn = b.fn
        if fn.rec is None:
            b.emit("ret i32 0")
            return
        # The sizes are written now, so the parameter is no longer read-only.
        fn.header = fn.header.replace(
            "ptr noalias nocapture readonly %sizes", "ptr nocapture %sizes")
        cid = b.val(f"load atomic i64, ptr {fn.rec} monotonic, align 8", "i64")
        bad = b.val(f"icmp ne i64 {cid.ref}, 0", "i1")
        rc = b.val(f"select i1 {bad.ref}, i32 {CHECK_FAILED}, i32 0", "i32")
        b.emit(f"ret i32 {rc.ref}")

    def record(self, fail: Val, value: Val, message: str) -> None:
        """Record the check ``message`` as failed where ``fail`` (i1, scalar or one per
        lane) holds, in a lane the current mask has on, with ``value`` (i64, scalar or
        per lane) of the first failing lane; go on in any case."""
        b = self.b
        cid = self._check_id(message)
        rec = self.record_ptr()
        if self.em.vectors.mask is not None:
            m = self.em.vectors.mask
            if fail.lanes == 1:
                n = m.lanes
                fn = f"@llvm.vector.reduce.or.v{n}i1"
                b.declare(fn, f"declare i1 {fn}(<{n} x i1>)")
                m = b.val(f"call i1 {fn}(<{n} x i1> {m.ref})", "i1")
            else:
                fail, m = b.unify(fail, m)
            fail = b.val(f"and {fail.vty} {fail.ref}, {m.ref}", "i1", fail.lanes)
        lanes = fail.lanes
        if lanes > 1:
            bits = b.val(f"bitcast <{lanes} x i1> {fail.ref} to i{lanes}", f"i{lanes}")
            any_ = b.val(f"icmp ne i{lanes} {bits.ref}, 0", "i1")
        else:
            any_ = fail
        lf, lw, lok = (b.new_label("chk.fail"), b.new_label("chk.first"),
                       b.new_label("chk.ok"))
        b.emit(f"br i1 {any_.ref}, label %{lf}, label %{lok}")
        b.start_block(lf)
        v = value
        if v.lanes > 1 and lanes == 1:
            # The condition is the same in every lane: report the first lane's value.
            v = b.val(f"extractelement {v.vty} {v.ref}, i32 0", "i64")
        elif v.lanes > 1:
            # The first failing lane is the earliest iteration: the one a serial loop
            # would have reported.
            fn = f"@llvm.cttz.i{lanes}"
            b.declare(fn, f"declare i{lanes} {fn}(i{lanes}, i1)")
            lane = b.val(f"call i{lanes} {fn}(i{lanes} {bits.ref}, i1 true)", f"i{lanes}")
            v = b.val(f"extractelement {v.vty} {v.ref}, i{lanes} {lane.ref}", "i64")
        old = b.val(f"cmpxchg ptr {rec}, i64 0, i64 {cid} monotonic monotonic", "{i64, i1}")
        won = b.val(f"extractvalue {{i64, i1}} {old.ref}, 1", "i1")
        b.emit(f"br i1 {won.ref}, label %{lw}, label %{lok}")
        b.start_block(lw)
        vp = b.val(f"getelementptr inbounds i64, ptr {rec}, i64 1", "ptr")
        b.emit(f"store i64 {v.ref}, ptr {vp.ref}, align 8")
        b.emit(f"br label %{lok}")
        b.start_block(lok)

    def check(self, e: E.Check) -> Val:
        """The ``Check`` expression ``e``: its condition, recorded as failed where false."""
        em, b = self.em, self.b
        c = em.ev(e.cond)
        if isinstance(e.cond, E.IntImm) and e.cond.value:
            return c
        if e.value.dtype in SIGNED_INT:
            v = b.mat(em.index.ev(e.value))
        else:
            v = b.int_convert(b.mat(em.ev(e.value)), e.value.dtype, "int64")
        self.record(b.not_(c), v, e.message)
        return c

    # ---- division -----------------------------------------------------------------------

    def divisor_guard(self, divisor: Val, d: str, e) -> tuple:
        """How a division by ``divisor`` (``e.b``, of dtype ``d``) is kept from trapping:
        ``(value to divide by, lanes where the divisor is -1 or None)``.

        A constant other than 0 and -1, or a divisor provably >= 1, needs nothing (index
        arithmetic stays as it was); one provably >= 0 (a size, a loop variable) is
        clamped to 1, as a zero there is an empty dimension whose quotients nothing
        uses; any other divisor records the failed check "integer division by zero"
        where it is zero and divides by 1 there, and by 1 where it is -1 (the caller
        negates, so the most negative value wraps instead of trapping)."""
        b = self.b
        vt, n, ty, ref = divisor.vty, divisor.lanes, divisor.ty, divisor.ref
        bc = E.const_value(e.b) if e is not None else None
        signed = dt.is_signed(d)
        if bc is not None and bc != 0 and not (signed and bc == -1):
            return divisor, None
        lo = self.em.index.lower_bound(e.b) if e is not None and signed and bc is None else None
        if lo is not None and lo >= 1:
            return divisor, None
        one = b.const(1, d, n)
        if lo is not None and lo >= 0:
            return b.intrinsic("smax", ty, n, [divisor, one]), None
        zero = b.const(0, d, n)
        isz = b.val(f"icmp eq {vt} {ref}, {zero.ref}", "i1", n)
        self.record(isz, b.i64(0), DIVISION_BY_ZERO)
        if not signed:
            return b.val(f"select {isz.vty} {isz.ref}, {vt} {one.ref}, {vt} {ref}", ty, n), None
        m1 = b.const(-1, d, n)
        ism1 = b.val(f"icmp eq {vt} {ref}, {m1.ref}", "i1", n)
        bad = b.val(f"or {isz.vty} {isz.ref}, {ism1.ref}", "i1", n)
        bs = b.val(f"select {bad.vty} {bad.ref}, {vt} {one.ref}, {vt} {ref}", ty, n)
        return bs, ism1
