"""Parallel loops for the LLVM emitter: the body is outlined into ``void f.parN(ptr
closure)`` and run by libgomp's ``GOMP_parallel``; each thread takes a static contiguous
chunk. Legalization leaves no parallel loop inside another one.

A loop with little work runs its outlined body on the calling thread instead, as
OpenMP's ``if`` clause does: starting a region costs about a microsecond with the team
spinning and tens of microseconds with it asleep, which the small kernels of a decoding
step (a transpose of the new token's keys, a softmax over one row) cost whole. The work
is estimated at run time from the loop nest's extents (:func:`work_estimate`)."""

from __future__ import annotations

import itertools

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.analysis import free_refs
from .ir import Fn, Val, quote

#: Below this many stores (a vector store counting one; each store of a reduction once
#: per step), a parallel loop runs on the calling thread: about the work of starting a
#: region. On a 2-core AMD EPYC (znver3) a 256-element vector add took 1.0 us on the
#: calling thread and 2.2 us in a region with the team spinning; a GPT-2 decoding step
#: (benchmarks/decoding_cpu.py, its small kernels on one thread) took 0.75x the time of
#: the same build with every loop in a region, both built in one process and run in
#: alternation on a loaded machine.
SERIAL_WORK = 4096


def work_estimate(body, in_scope) -> E.PrimExpr | None:
    """The number of stores one iteration of a loop with ``body`` executes (an int64
    expression): each store once per iteration of the loops around it, a vectorized loop
    counting once; both branches of an if. None where an extent depends on a variable
    ``in_scope(var)`` says is not bound before the loop (an inner loop's)."""
    t = type(body)
    if t is S.Store:
        return E.IntImm(1, "int64")
    if t is S.SeqStmt:
        parts = [work_estimate(x, in_scope) for x in body.seq]
        if any(p is None for p in parts):
            return None
        total = parts[0] if parts else E.IntImm(0, "int64")
        for p in parts[1:]:
            total = E.Add(total, p, "int64")
        return total
    if t is S.For:
        inner = work_estimate(body.body, in_scope)
        if inner is None or body.kind == "vectorized":
            return inner
        extent = body.extent
        if any(not in_scope(v) for v in free_refs(extent)[0]):
            return None
        if extent.dtype != "int64":
            extent = E.Cast("int64", extent)
        return E.Mul(extent, inner, "int64")
    if t is S.IfThenElse:
        parts = [work_estimate(x, in_scope) for x in (body.then_case, body.else_case) if x]
        if any(p is None for p in parts):
            return None
        return parts[0] if len(parts) == 1 else E.Add(parts[0], parts[1], "int64")
    if t in (S.Allocate, S.LetStmt):
        return work_estimate(body.body, in_scope)
    return E.IntImm(0, "int64")


class ParallelLoops:
    """Outlining and the GOMP calls, the ``parallel`` part of ``emit.Emitter``."""

    def __init__(self, emitter):
        self.em = emitter
        self.b = emitter.builder
        self._count = itertools.count()  # numbers the outlined bodies of the module

    def loop(self, s) -> None:
        """Outline the loop into ``void f.parN(ptr closure)`` and run it on libgomp."""
        em, b = self.em, self.b
        fn = b.fn
        vars_used, bufs_used = free_refs(s)
        captured_vars = [v for v in vars_used
                         if em.symbols.value(v) is not None and v is not s.loop_var]
        captured_bufs = em.symbols.buffers_in_scope(bufs_used)
        mn = em.index.ev(s.min)
        ext = em.index.ev(s.extent)
        # Closure: err flag ptr, buffers, then variables (i64 or their own type), min, extent.
        fields = [("err", "ptr", fn.err_ptr if not fn.is_entry else None)]
        fields += [(("buf", k), "ptr", ref) for k, ref in captured_bufs]
        for v in captured_vars:
            val = b.mat(em.symbols.lookup(v))
            fields.append((("var", v), val.vty, val.ref))
        fields += [("min", "i64", mn.ref), ("ext", "i64", ext.ref)]
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
        b.declare(
            "@GOMP_parallel", "declare void @GOMP_parallel(ptr, ptr, i32, i32) nounwind"
        )
        self._run(s, outlined, cl)
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

    def _run(self, s, outlined: str, cl: str) -> None:
        """Call the outlined body: on libgomp's team, or on this thread where the loop's
        estimated work is below :data:`SERIAL_WORK` (the body then runs every iteration,
        as thread 0 of 1)."""
        em, b = self.em, self.b
        per_iteration = work_estimate(s.body, lambda v: em.symbols.value(v) is not None)
        team = f"call void @GOMP_parallel(ptr @{outlined}, ptr {cl}, i32 0, i32 0)"
        if per_iteration is None:
            b.emit(team)
            return
        extent = s.extent if s.extent.dtype == "int64" else E.Cast("int64", s.extent)
        work = em.index.ev(E.Mul(extent, per_iteration, "int64"))
        small = b.val(f"icmp slt i64 {b.mat(work).ref}, {SERIAL_WORK}", "i1")
        lserial, lteam, ldone = (b.new_label(h) for h in ("par.serial", "par.team",
                                                           "par.done"))
        b.emit(f"br i1 {small.ref}, label %{lserial}, label %{lteam}")
        b.start_block(lserial)
        b.emit(f"call void @{quote(outlined)}(ptr {cl})")
        b.emit(f"br label %{ldone}")
        b.start_block(lteam)
        b.emit(team)
        b.emit(f"br label %{ldone}")
        b.start_block(ldone)

    def _outline(self, name: str, s, fields, sty: str, rec_slot: tuple) -> bool:
        """Emit the outlined body; whether it uses the error record (``checks``)."""
        em, b = self.em, self.b
        outer = em.symbols
        fn = Fn(
            name,
            f"define internal void @{quote(name)}(ptr noalias nocapture readonly %cl) "
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
            mn, ext = vals[len(fields) - 2], vals[len(fields) - 1]
            b.declare("@omp_get_thread_num", "declare i32 @omp_get_thread_num() nounwind")
            b.declare("@omp_get_num_threads", "declare i32 @omp_get_num_threads() nounwind")
            tid = b.val("call i32 @omp_get_thread_num()", "i32")
            nth = b.val("call i32 @omp_get_num_threads()", "i32")
            tid = b.val(f"sext i32 {tid.ref} to i64", "i64")
            nth = b.val(f"sext i32 {nth.ref} to i64", "i64")
            # Static schedule: thread t runs [t*chunk, min((t+1)*chunk, ext)).
            a = b.val(f"add nsw i64 {ext.ref}, {nth.ref}", "i64")
            a = b.val(f"sub nsw i64 {a.ref}, 1", "i64")
            chunk = b.val(f"sdiv i64 {a.ref}, {nth.ref}", "i64")
            begin = b.val(f"mul nsw i64 {tid.ref}, {chunk.ref}", "i64")
            end = b.val(f"add nsw i64 {begin.ref}, {chunk.ref}", "i64")
            end = b.val(f"call i64 @llvm.smin.i64(i64 {end.ref}, i64 {ext.ref})", "i64")
            b.declare("@llvm.smin.i64", "declare i64 @llvm.smin.i64(i64, i64)")
            lo = em.index.lower_bound(s.min)

            def body(iv: Val):
                i = b.val(f"add nsw i64 {iv.ref}, {mn.ref}", "i64")
                symbols.bind(s.loop_var, i, lo)
                em.stmt(s.body)

            em.loops.counted(begin, end, body, s.loop_var.name, None)
            b.emit("ret void")
            b.module.add_function(fn)
            return fn.rec is not None
