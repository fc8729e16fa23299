"""Parallel loops for the LLVM emitter: the body is outlined into ``void f.parN(ptr
closure)`` and run by libgomp's ``GOMP_parallel``; each thread takes a static contiguous
chunk. Legalization leaves no parallel loop inside another one."""

from __future__ import annotations

from ...ir.analysis import free_refs
from .ir import Fn, Val, quote


class ParallelMixin:
    """Outlining and the GOMP calls; mixed into ``emit.Emitter``."""

    def parallel_loop(self, s):
        """Outline the loop into ``void f.parN(ptr closure)`` and run it on libgomp."""
        vars_used, bufs_used = free_refs(s)
        captured_vars = [v for v in vars_used if v in self.env and v is not s.loop_var]
        captured_bufs = [(k, self.bufs[k]) for k in bufs_used if k in self.bufs]
        mn = self.ev_idx(s.min)
        ext = self.ev_idx(s.extent)
        # Closure: err flag ptr, buffers, then variables (i64 or their own type), min, extent.
        fields = [("err", "ptr", self.fn.err_ptr if not self.fn.is_entry else None)]
        fields += [(("buf", k), "ptr", ref) for k, ref in captured_bufs]
        for v in captured_vars:
            val = self.mat(self.env[v])
            fields.append((("var", v), val.vty, val.ref))
        fields += [("min", "i64", mn.ref), ("ext", "i64", ext.ref)]
        sty = "{" + ", ".join(f[1] for f in fields) + "}"
        cl = f"%closure.{next(self.tmp)}"
        alloca_at = len(self.fn.allocas)
        self.fn.allocas.append(f"{cl} = alloca {sty}, align 8")
        err = None
        if self.fn.is_entry:
            err = f"%par.err.{next(self.tmp)}"
            self.fn.allocas.append(f"{err} = alloca i32, align 4")
            self.emit(f"store i32 0, ptr {err}, align 4")
            fields[0] = ("err", "ptr", err)
        for i, (_, ty, ref) in enumerate(fields):
            p = self.val(f"getelementptr inbounds {sty}, ptr {cl}, i32 0, i32 {i}", "ptr")
            self.emit(f"store {ty} {ref}, ptr {p.ref}")
        # Filled in when the body turns out to record a failed check (see below).
        rec_store_at = len(self.fn.lines)
        self.emit("; no error record in the closure")
        outlined = f"{self.fn.name}.par{next(self.par_count)}"
        self.declare(
            "@GOMP_parallel", "declare void @GOMP_parallel(ptr, ptr, i32, i32) nounwind"
        )
        self.emit(f"call void @GOMP_parallel(ptr @{outlined}, ptr {cl}, i32 0, i32 0)")
        if err is not None:
            ev = self.val(f"load i32, ptr {err}, align 4", "i32")
            bad = self.val(f"icmp ne i32 {ev.ref}, 0", "i1")
            self.fail_if(bad, "par")
        # The error record's address, when the body uses it, is one more closure field
        # after the others: a closure without it is laid out exactly as before.
        sty_rec = "{" + ", ".join([f[1] for f in fields] + ["ptr"]) + "}"
        if self.emit_outlined(outlined, s, fields, sty, (sty_rec, len(fields))):
            rec = self.record_ptr()
            self.fn.allocas[alloca_at] = f"{cl} = alloca {sty_rec}, align 8"
            p = f"%closure.rec.{next(self.tmp)}"
            self.fn.lines[rec_store_at] = (
                f"  {p} = getelementptr inbounds {sty_rec}, ptr {cl}, i32 0, i32 {len(fields)}"
                f"\n  store ptr {rec}, ptr {p}")

    def emit_outlined(self, name: str, s, fields, sty: str, rec_slot: tuple) -> bool:
        """Emit the outlined body; whether it uses the error record (``checks``)."""
        saved = (self.fn, self.env, self.bufs, self.bounds)
        fn = Fn(
            name,
            f"define internal void @{quote(name)}(ptr noalias nocapture readonly %cl) "
            f"{self.fn_attrs}",
            is_entry=False,
        )
        fn.rec_slot = rec_slot
        self.fn = fn
        self.env, self.bufs, self.bounds = {}, {}, dict(saved[3])
        try:
            vals = {}
            for i, (key, ty, _) in enumerate(fields):
                p = self.val(f"getelementptr inbounds {sty}, ptr %cl, i32 0, i32 {i}", "ptr")
                vals[i] = self.val(f"load {ty}, ptr {p.ref}", ty)
                if key == "err":
                    fn.err_ptr = vals[i].ref
                elif key[0] == "buf":
                    self.bufs[key[1]] = vals[i].ref
                elif key[0] == "var":
                    lanes = saved[1][key[1]].lanes
                    base_ty = ty.split(" x ")[-1].rstrip(">") if lanes > 1 else ty
                    self.env[key[1]] = Val(vals[i].ref, base_ty, lanes)
            mn, ext = vals[len(fields) - 2], vals[len(fields) - 1]
            self.declare("@omp_get_thread_num", "declare i32 @omp_get_thread_num() nounwind")
            self.declare("@omp_get_num_threads", "declare i32 @omp_get_num_threads() nounwind")
            tid = self.val("call i32 @omp_get_thread_num()", "i32")
            nth = self.val("call i32 @omp_get_num_threads()", "i32")
            tid = self.val(f"sext i32 {tid.ref} to i64", "i64")
            nth = self.val(f"sext i32 {nth.ref} to i64", "i64")
            # Static schedule: thread t runs [t*chunk, min((t+1)*chunk, ext)).
            a = self.val(f"add nsw i64 {ext.ref}, {nth.ref}", "i64")
            a = self.val(f"sub nsw i64 {a.ref}, 1", "i64")
            chunk = self.val(f"sdiv i64 {a.ref}, {nth.ref}", "i64")
            begin = self.val(f"mul nsw i64 {tid.ref}, {chunk.ref}", "i64")
            end = self.val(f"add nsw i64 {begin.ref}, {chunk.ref}", "i64")
            end = self.val(f"call i64 @llvm.smin.i64(i64 {end.ref}, i64 {ext.ref})", "i64")
            self.declare("@llvm.smin.i64", "declare i64 @llvm.smin.i64(i64, i64)")
            lo = self.lower_bound(s.min)

            def body(iv: Val):
                i = self.val(f"add nsw i64 {iv.ref}, {mn.ref}", "i64")
                self.bind_loop_var(s.loop_var, i, lo)
                self.stmt(s.body)

            self.counted_loop(begin, end, body, s.loop_var.name, None)
            self.emit("ret void")
            self.functions.append(fn)
            return fn.rec is not None
        finally:
            self.fn, self.env, self.bufs, self.bounds = saved
