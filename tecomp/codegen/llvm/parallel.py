"""Parallel loops for the LLVM emitter: the body is outlined into ``void f.parN(ptr
closure, i64 begin, i64 end)`` and run by tecomp's thread pool
(:mod:`.thread_pool`), which hands each thread chunks of the iteration space.
Legalization leaves no parallel loop inside another one.

A loop runs on the calling thread alone when its work is small (:data:`SERIAL_WORK`),
decided when the module is built for a loop of constant size, and by each run for one
whose size is known only then (a symbolic sequence length): a schedule marks the outer
loop of most kernels ``parallel`` whatever their size, and a decoder's one-token step or
a model's small kernels (a slice of a few hundred elements) would otherwise wake the other
threads for less work than waking them costs.
"""

from __future__ import annotations

import itertools

from ...ir import expr as E
from ...ir.analysis import free_refs, has_unsafe, is_pure_int, work_of
from .ir import Fn, Val, quote
from .thread_pool import PARALLEL_SYMBOL

#: Below this many elementary steps (stores and calls, :func:`~tecomp.ir.analysis.work_of`)
#: a parallel loop of run-time size runs on one thread: waking and joining the others costs
#: a few microseconds, about what one thread takes for this much work.
SERIAL_WORK = 16384


class ParallelLoops:
    """Outlining and the pool's calls, the ``parallel`` part of ``emit.Emitter``."""

    def __init__(self, emitter):
        self.em = emitter
        self.b = emitter.builder
        self._count = itertools.count()  # numbers the outlined bodies of the module

    def loop(self, s) -> None:
        """Outline the loop into ``void f.parN(ptr closure, i64 begin, i64 end)`` and run
        it on the thread pool."""
        em, b = self.em, self.b
        fn = b.fn
        vars_used, bufs_used = free_refs(s)
        captured_vars = [v for v in vars_used
                         if em.symbols.value(v) is not None and v is not s.loop_var]
        captured_bufs = em.symbols.buffers_in_scope(bufs_used)
        mn = em.index.ev(s.min)
        ext = em.index.ev(s.extent)
        # Closure: err flag ptr, buffers, then variables (i64 or their own type), min.
        fields = [("err", "ptr", fn.err_ptr if not fn.is_entry else None)]
        fields += [(("buf", k), "ptr", ref) for k, ref in captured_bufs]
        for v in captured_vars:
            val = b.mat(em.symbols.lookup(v))
            fields.append((("var", v), val.vty, val.ref))
        fields.append(("min", "i64", mn.ref))
        sty = "{" + ", ".join(f[1] for f in fields) + "}"
        cl = f"%closure.{b.fresh()}"
        alloca_at = len(fn.allocas)
        fn.allocas.append(f"{cl} = alloca {sty}, align 8")
        err = None
        if fn.is_entry:
            err = f"%par.err.{b.fresh()}"
            fn.allocas.append(f"{err} = alloca i32, align 4")
            b.emit(f"store i32 0, ptr {err}, align 4")
            fields[0] = ("err", "ptr", err)
        for i, (_, ty, ref) in enumerate(fields):
            p = b.val(f"getelementptr inbounds {sty}, ptr {cl}, i32 0, i32 {i}", "ptr")
            b.emit(f"store {ty} {ref}, ptr {p.ref}")
        # Filled in when the body turns out to record a failed check (see below).
        rec_store_at = len(fn.lines)
        b.emit("; no error record in the closure")
        outlined = f"{fn.name}.par{next(self._count)}"
        pool = f"@{PARALLEL_SYMBOL}"
        b.declare(pool, f"declare void {pool}(ptr, ptr, i64, i32) nounwind")
        threads = self._thread_count(s)
        b.emit(f"call void {pool}(ptr @{outlined}, ptr {cl}, i64 {ext.ref}, i32 {threads})")
        if err is not None:
            ev = b.val(f"load i32, ptr {err}, align 4", "i32")
            bad = b.val(f"icmp ne i32 {ev.ref}, 0", "i1")
            b.fail_if(bad, "par")
        # The error record's address, when the body uses it, is one more closure field
        # after the others: a closure without it is laid out exactly as before.
        sty_rec = "{" + ", ".join([f[1] for f in fields] + ["ptr"]) + "}"
        if self._outline(outlined, s, fields, sty, (sty_rec, len(fields))):
            rec = em.checks.record_ptr()
            fn.allocas[alloca_at] = f"{cl} = alloca {sty_rec}, align 8"
            p = f"%closure.rec.{b.fresh()}"
            fn.lines[rec_store_at] = (
                f"  {p} = getelementptr inbounds {sty_rec}, ptr {cl}, i32 0, i32 {len(fields)}"
                f"\n  store ptr {rec}, ptr {p}")

    def _thread_count(self, s) -> str:
        """The ``threads`` operand of the loop's pool call: 1 (the caller alone) when the
        loop's work is below :data:`SERIAL_WORK`, else 0 (the pool's count); for a loop of
        run-time size, a value each run computes."""
        work = work_of(s)
        if isinstance(work, E.IntImm):
            return "1" if work.value < SERIAL_WORK else "0"
        vars_used, _ = free_refs(work)
        # Evaluated before the loop, where its body might never have run: only index
        # arithmetic that cannot fault (no load, no division by a run-time size).
        if not is_pure_int(work, {}) or has_unsafe(work) or any(
                v is s.loop_var or self.em.symbols.value(v) is None for v in vars_used):
            return "0"
        w = self.em.index.ev(work)
        small = self.b.val(f"icmp slt i64 {w.ref}, {SERIAL_WORK}", "i1")
        return self.b.val(f"select i1 {small.ref}, i32 1, i32 0", "i32").ref

    def _outline(self, name: str, s, fields, sty: str, rec_slot: tuple) -> bool:
        """Emit the outlined body; whether it uses the error record (``checks``)."""
        em, b = self.em, self.b
        outer = em.symbols
        fn = Fn(
            name,
            f"define internal void @{quote(name)}(ptr noalias nocapture readonly %cl, "
            f"i64 %begin, i64 %end) "
            f"{em.fn_attrs}",
            is_entry=False,
        )
        fn.rec_slot = rec_slot
        with em.writing(fn, outer.for_outlined_body()):
            symbols = em.symbols
            vals = {}
            for i, (key, ty, _) in enumerate(fields):
                p = b.val(f"getelementptr inbounds {sty}, ptr %cl, i32 0, i32 {i}", "ptr")
                vals[i] = b.val(f"load {ty}, ptr {p.ref}", ty)
                if key == "err":
                    fn.err_ptr = vals[i].ref
                elif key[0] == "buf":
                    symbols.bind_buffer(key[1], vals[i].ref)
                elif key[0] == "var":
                    lanes = outer.lookup(key[1]).lanes
                    base_ty = ty.split(" x ")[-1].rstrip(">") if lanes > 1 else ty
                    symbols.bind(key[1], Val(vals[i].ref, base_ty, lanes),
                                 outer.lower_bound(key[1]))
            mn = vals[len(fields) - 1]
            begin, end = Val("%begin", "i64"), Val("%end", "i64")
            lo = em.index.lower_bound(s.min)

            def body(iv: Val):
                i = b.val(f"add nsw i64 {iv.ref}, {mn.ref}", "i64")
                symbols.bind(s.loop_var, i, lo)
                em.stmt(s.body)

            em.loops.counted(begin, end, body, s.loop_var.name, None)
            b.emit("ret void")
            b.module.add_function(fn)
            return fn.rec is not None
