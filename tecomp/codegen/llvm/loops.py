"""Serial and unrolled loops for the LLVM emitter, and the counted loop every loop kind
is built from (vector strips and parallel chunks too).

A serial loop whose hint legalization could not grant as written (``vectorize``,
``unroll``) carries ``llvm.loop`` metadata asking LLVM's own loop passes to try.
"""

from __future__ import annotations

from ...errors import CodegenError
from ...ir import expr as E
from .ir import Val, ident


def const_extent(s) -> int:
    """The constant extent of the loop ``s`` (a vectorized or unrolled loop has one once
    legalized)."""
    ext = E.const_value(s.extent)
    if ext is None:
        raise CodegenError(
            f"internal: {s.kind} loop {s.loop_var.name!r} has the symbolic extent "
            f"{s.extent}; legalize the function before emitting it"
        )
    return int(ext)


class Loops:
    """Counted, serial and unrolled loops, the ``loops`` part of ``emit.Emitter``."""

    def __init__(self, emitter):
        self.em = emitter
        self.b = emitter.builder

    def unrolled(self, s, ext: int) -> None:
        """The body of ``s`` once per iteration, the loop variable a constant in each
        (or the block transpose the nest is, see ``transpose``)."""
        em, b = self.em, self.b
        if em.transpose.try_emit(s, ext):
            return
        mn = em.index.ev(s.min)
        lo = em.index.lower_bound(s.min)
        for k in range(ext):
            em.symbols.bind(s.loop_var, b.add_i64("add", mn, b.i64(k)), lo)
            em.stmt(s.body)

    def serial(self, s, hint: str | None = None) -> None:
        em, b = self.em, self.b
        if em.vectors.lanes > 1:
            raise CodegenError("internal: serial loop inside a vector body")
        mn = em.index.ev(s.min)
        ext = em.index.ev(s.extent)
        end = b.add_i64("add", mn, ext)
        lo = em.index.lower_bound(s.min)

        def body(iv: Val):
            em.symbols.bind(s.loop_var, iv, lo)
            em.stmt(s.body)

        self.counted(mn, end, body, s.loop_var.name, hint)

    def counted(self, start: Val, end: Val, body_fn, name: str, hint: str | None) -> None:
        """for (i = start; i < end; ++i) body_fn(i) with i an i64 SSA value."""
        b = self.b
        fn = b.fn
        pre = fn.label
        lh, lb, lx = b.new_label("for.h"), b.new_label("for.b"), b.new_label("for.x")
        iv = f"%{ident(name)}.{b.fresh()}"
        nxt = f"{iv}.next"
        b.emit(f"br label %{lh}")
        b.start_block(lh)
        phi_at = len(fn.lines)
        fn.lines.append(None)  # the phi, filled once the latch block is known
        c = b.val(f"icmp slt i64 {iv}, {end.ref}", "i1")
        b.emit(f"br i1 {c.ref}, label %{lb}, label %{lx}")
        b.start_block(lb)
        with self.em.reuse.scope():  # what the body computes stays in it
            body_fn(Val(iv, "i64"))
        latch = b.fn.label
        b.emit(f"{nxt} = add nsw i64 {iv}, 1")
        b.emit(f"br label %{lh}{self._metadata(hint)}")
        fn.lines[phi_at] = f"  {iv} = phi i64 [ {start.ref}, %{pre} ], [ {nxt}, %{latch} ]"
        b.start_block(lx)

    def _metadata(self, hint: str | None) -> str:
        if hint is None:
            return ""
        md = self.b.module
        if hint == "vectorize":
            prop = md.metadata('!{{!"llvm.loop.vectorize.enable", i1 true}}')
        elif hint == "unroll":
            prop = md.metadata('!{{!"llvm.loop.unroll.full"}}')
        else:
            raise CodegenError(f"internal: loop hint {hint}")
        node = md.metadata(f"distinct !{{{{!{{id}}, {prop}}}}}")
        return f", !llvm.loop {node}"
