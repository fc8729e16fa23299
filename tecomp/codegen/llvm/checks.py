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


class CheckMixin:
    """The error record, ``Check`` and guarded division; mixed into ``emit.Emitter``."""

    # ---- the record -------------------------------------------------------------------

    def check_id(self, message: str) -> int:
        """The id (1 + index in the function's ``checks``) of the check ``message``."""
        try:
            return self.checks.index(message) + 1
        except ValueError:
            self.checks.append(message)
            return len(self.checks)

    def record_ptr(self) -> str:
        """The address of this call's error record, set up on first use: in the entry
        point, after the sizes (and cleared); in an outlined parallel body, read from an
        extra closure field (``parallel``) that the caller fills once it sees the use."""
        fn = self.fn
        if fn.rec is None:
            fn.rec = "%tecomp.rec"
            if fn.is_entry:
                fn.prologue += [
                    f"%tecomp.rec = getelementptr inbounds i64, ptr %sizes, i64 {self.n_sizes}",
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
        if self.fn.rec is None:
            self.emit("ret i32 0")
            return
        # The sizes are written now, so the parameter is no longer read-only.
        self.fn.header = self.fn.header.replace(
            "ptr noalias nocapture readonly %sizes", "ptr nocapture %sizes")
        cid = self.val(f"load atomic i64, ptr {self.fn.rec} monotonic, align 8", "i64")
        bad = self.val(f"icmp ne i64 {cid.ref}, 0", "i1")
        rc = self.val(f"select i1 {bad.ref}, i32 {CHECK_FAILED}, i32 0", "i32")
        self.emit(f"ret i32 {rc.ref}")

    def record_check(self, fail: Val, value: Val, message: str) -> None:
        """Record the check ``message`` as failed where ``fail`` (i1, scalar or one per
        lane) holds, in a lane the current mask has on, with ``value`` (i64, scalar or
        per lane) of the first failing lane; go on in any case."""
        cid = self.check_id(message)
        rec = self.record_ptr()
        if self.mask is not None:
            m = self.mask
            if fail.lanes == 1:
                n = m.lanes
                fn = f"@llvm.vector.reduce.or.v{n}i1"
                self.declare(fn, f"declare i1 {fn}(<{n} x i1>)")
                m = self.val(f"call i1 {fn}(<{n} x i1> {m.ref})", "i1")
            else:
                fail, m = self.unify(fail, m)
            fail = self.val(f"and {fail.vty} {fail.ref}, {m.ref}", "i1", fail.lanes)
        lanes = fail.lanes
        if lanes > 1:
            bits = self.val(f"bitcast <{lanes} x i1> {fail.ref} to i{lanes}", f"i{lanes}")
            any_ = self.val(f"icmp ne i{lanes} {bits.ref}, 0", "i1")
        else:
            any_ = fail
        lf, lw, lok = (self.new_label("chk.fail"), self.new_label("chk.first"),
                       self.new_label("chk.ok"))
        self.emit(f"br i1 {any_.ref}, label %{lf}, label %{lok}")
        self.start_block(lf)
        v = value
        if v.lanes > 1 and lanes == 1:
            # The condition is the same in every lane: report the first lane's value.
            v = self.val(f"extractelement {v.vty} {v.ref}, i32 0", "i64")
        elif v.lanes > 1:
            # The first failing lane is the earliest iteration: the one a serial loop
            # would have reported.
            fn = f"@llvm.cttz.i{lanes}"
            self.declare(fn, f"declare i{lanes} {fn}(i{lanes}, i1)")
            lane = self.val(f"call i{lanes} {fn}(i{lanes} {bits.ref}, i1 true)", f"i{lanes}")
            v = self.val(f"extractelement {v.vty} {v.ref}, i{lanes} {lane.ref}", "i64")
        old = self.val(f"cmpxchg ptr {rec}, i64 0, i64 {cid} monotonic monotonic", "{i64, i1}")
        won = self.val(f"extractvalue {{i64, i1}} {old.ref}, 1", "i1")
        self.emit(f"br i1 {won.ref}, label %{lw}, label %{lok}")
        self.start_block(lw)
        vp = self.val(f"getelementptr inbounds i64, ptr {rec}, i64 1", "ptr")
        self.emit(f"store i64 {v.ref}, ptr {vp.ref}, align 8")
        self.emit(f"br label %{lok}")
        self.start_block(lok)

    def ev_Check(self, e):
        c = self.ev(e.cond)
        if isinstance(e.cond, E.IntImm) and e.cond.value:
            return c
        if e.value.dtype in SIGNED_INT:
            v = self.mat(self.ev_idx(e.value))
        else:
            v = self.int_convert(self.mat(self.ev(e.value)), e.value.dtype, "int64")
        self.record_check(self.not_(c), v, e.message)
        return c

    # ---- division -----------------------------------------------------------------------

    def divisor_guard(self, b: Val, d: str, e) -> tuple:
        """How a division by ``b`` (``e.b``, of dtype ``d``) is kept from trapping:
        ``(b to divide by, lanes where the divisor is -1 or None)``.

        A constant other than 0 and -1, or a divisor provably >= 1, needs nothing (index
        arithmetic stays as it was); one provably >= 0 (a size, a loop variable) is
        clamped to 1, as a zero there is an empty dimension whose quotients nothing
        uses; any other divisor records the failed check "integer division by zero"
        where it is zero and divides by 1 there, and by 1 where it is -1 (the caller
        negates, so the most negative value wraps instead of trapping)."""
        vt, n, ty = b.vty, b.lanes, b.ty
        bc = E.const_value(e.b) if e is not None else None
        signed = dt.is_signed(d)
        if bc is not None and bc != 0 and not (signed and bc == -1):
            return b, None
        lo = self.lower_bound(e.b) if e is not None and signed and bc is None else None
        if lo is not None and lo >= 1:
            return b, None
        one = self.const(1, d, n)
        if lo is not None and lo >= 0:
            return self.intrinsic("smax", ty, n, [b, one]), None
        zero = self.const(0, d, n)
        isz = self.val(f"icmp eq {vt} {b.ref}, {zero.ref}", "i1", n)
        self.record_check(isz, self.i64(0), DIVISION_BY_ZERO)
        if not signed:
            return self.val(f"select {isz.vty} {isz.ref}, {vt} {one.ref}, {vt} {b.ref}",
                            ty, n), None
        m1 = self.const(-1, d, n)
        ism1 = self.val(f"icmp eq {vt} {b.ref}, {m1.ref}", "i1", n)
        bad = self.val(f"or {isz.vty} {isz.ref}, {ism1.ref}", "i1", n)
        bs = self.val(f"select {bad.vty} {bad.ref}, {vt} {one.ref}, {vt} {b.ref}", ty, n)
        return bs, ism1
