"""Memory access for the LLVM emitter: loads and stores (scalar, contiguous, masked,
strided spans, gathers and scatters) and prefetches, each access tagged with its buffer's
alias scopes (``alias``)."""

from __future__ import annotations

from ...errors import CodegenError
from ...ir import expr as E
from ...ir import stmt as S
from . import types as T
from .allocate import const_elems
from .ir import Val
from .vector import MAX_LANES

#: The largest constant stride a vector load is emitted for as contiguous loads and a
#: shuffle (``_span_load``); a wider one is a gather (the span would need more loads).
MAX_SPAN_STRIDE = 4

#: Bytes per cache line, the unit a prefetch fetches (64 on the x86 and Arm cores targeted).
CACHE_LINE = 64


class Memory:
    """Loads, stores and prefetches, the ``memory`` part of ``emit.Emitter``. An access
    honours the lane mask of ``vectors``; where every lane of a vector access is inside a
    stack buffer (``allocations``) it is done so that LLVM can keep the buffer in
    registers."""

    def __init__(self, emitter):
        self.em = emitter
        self.b = emitter.builder

    def load(self, e: E.Load) -> Val:
        em, b = self.em, self.b
        mask = em.vectors.mask
        ptr = em.symbols.buffer(e.buffer)
        d = e.dtype
        mt = T.mem_type(d)
        eb = T.elem_bytes(d)
        md = em.aliases.tags(e.buffer)
        idx = em.index.address(e.index)
        if idx.lanes == 1:
            p = b.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {idx.ref}", "ptr")
            if mask is not None:
                p = self._unless_all_lanes_off(p, mask)
            v = b.val(f"load {mt}, ptr {p.ref}, align {eb}{md}", mt)
        elif idx.ramp is not None and idx.ramp[1] == 1:
            n = idx.lanes
            p = b.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {idx.ramp[0].ref}", "ptr")
            vt = T.vec(mt, n)
            if mask is None:
                v = b.val(f"load {vt}, ptr {p.ref}, align {eb}{md}", mt, n)
            elif self._stack_ramp(ptr, idx):
                # Every lane is inside a stack buffer: a plain load keeps it promotable
                # to registers (a masked tail tile's accumulators), disabled lanes as 0.
                v = b.val(f"load {vt}, ptr {p.ref}, align {eb}{md}", mt, n)
                v = b.val(f"select <{n} x i1> {mask.ref}, {vt} {v.ref}, {vt} "
                          f"zeroinitializer", mt, n)
            else:
                fn = f"@llvm.masked.load.{T.suffix(mt, n)}.p0"
                b.declare(fn, f"declare {vt} {fn}(ptr, <{n} x i1>, {vt})")
                v = b.val(
                    f"call {vt} {fn}(ptr align {eb} {p.ref}, <{n} x i1> {mask.ref}, "
                    f"{vt} zeroinitializer){md}",
                    mt,
                    n,
                )
        elif self._stack_ramp(ptr, idx):
            v = self._lanewise_load(mt, ptr, idx, md, eb)
        elif mask is None and idx.ramp is not None and 1 < idx.ramp[1] <= MAX_SPAN_STRIDE:
            v = self._span_load(mt, ptr, idx, md, eb)
        else:
            n = idx.lanes
            ps = self._lane_ptrs(mt, ptr, idx, n, e.buffer)
            m = mask if mask is not None else b.true_mask(n)
            v = self._gather(mt, ps, m, md, eb)
        if d == "bool":
            z = b.const(0, "int8", v.lanes)
            return b.val(f"icmp ne {v.vty} {v.ref}, {z.ref}", "i1", v.lanes)
        return v

    def prefetch(self, e: E.Load, write: bool = False, streaming: bool = False) -> None:
        """``llvm.prefetch`` (read, or ``write``: lines fetched ready to be modified, into
        every cache level; a ``streaming`` read with no temporal locality, which x86
        emits as ``prefetchnta``) of the access ``e``: its element, or a constant-stride
        vector access every cache line from its first lane (a line-aligned vector:
        exactly its lines; a gather's lanes are not announced)."""
        em, b = self.em, self.b
        ptr = em.symbols.buffer(e.buffer)
        mt, eb = T.mem_type(e.dtype), T.elem_bytes(e.dtype)
        idx = em.index.address(e.index)
        if idx.lanes == 1:
            base, offsets = idx, [0]
        elif idx.ramp is not None and idx.ramp[1] >= 0:
            base, step = idx.ramp[0], idx.ramp[1] * eb
            span = (idx.lanes - 1) * step + eb
            offsets = range(0, span, max(step, CACHE_LINE))
        else:
            return
        fn = "@llvm.prefetch.p0"
        locality = 0 if streaming else 3
        b.declare(fn, f"declare void {fn}(ptr, i32, i32, i32)")
        # No ``inbounds``: the address may lie outside the buffer, which a prefetch allows.
        p = b.val(f"getelementptr {mt}, ptr {ptr}, i64 {base.ref}", "ptr")
        for off in offsets:
            q = p if off == 0 else b.val(f"getelementptr i8, ptr {p.ref}, i64 {off}", "ptr")
            b.emit(f"call void {fn}(ptr {q.ref}, i32 {int(write)}, i32 {locality}, i32 1)")

    def store(self, s: S.Store, value: Val | None = None) -> None:
        """The store ``s``, of ``value`` where given (its value already computed), else of
        ``s.value``. The values computed before are not reused after it (they may have
        read what it writes)."""
        self._store(s, value)
        self.em.reuse.forget()

    def _store(self, s: S.Store, value: Val | None) -> None:
        em, b = self.em, self.b
        mask = em.vectors.mask
        ptr = em.symbols.buffer(s.buffer)
        d = s.buffer.dtype
        mt = T.mem_type(d)
        eb = T.elem_bytes(d)
        md = em.aliases.tags(s.buffer)
        v = b.mat(em.ev(s.value) if value is None else value)
        if s.value.dtype != d:
            raise CodegenError(
                f"store of a {s.value.dtype} value into {d} buffer {s.buffer.name!r}"
            )
        idx = em.index.address(s.index)
        if idx.lanes == 1 and v.lanes == 1:
            if d == "bool":
                v = b.val(f"zext i1 {v.ref} to i8", "i8")
            p = b.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {idx.ref}", "ptr")
            if mask is not None:
                raise CodegenError("internal: lane-invariant store in a masked region")
            b.emit(f"store {mt} {v.ref}, ptr {p.ref}, align {eb}{md}")
            return
        n = max(idx.lanes, v.lanes)
        v = b.bcast(v, n)
        if d == "bool":
            v = b.val(f"zext <{n} x i1> {v.ref} to <{n} x i8>", "i8", n)
        vt = T.vec(mt, n)
        if idx.ramp is not None and idx.ramp[1] == 1:
            p = b.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {idx.ramp[0].ref}", "ptr")
            in_stack = mask is not None and self._stack_ramp(ptr, idx)
            if in_stack:
                # Every lane is inside a stack buffer: read, blend and write back, which
                # LLVM promotes to registers as it does an unmasked tile (a masked store
                # intrinsic would keep a tail tile's accumulators in memory).
                old = b.val(f"load {vt}, ptr {p.ref}, align {eb}{md}", mt, n)
                v = b.val(f"select <{n} x i1> {mask.ref}, {vt} {v.ref}, {vt} "
                          f"{old.ref}", mt, n)
            if mask is None or in_stack:
                b.emit(f"store {vt} {v.ref}, ptr {p.ref}, align {eb}{md}")
            else:
                self.masked_store(mt, p, v, mask.ref, eb, md)
            return
        if mask is None and self._stack_ramp(ptr, idx):
            self._lanewise_store(mt, ptr, idx, v, md, eb)
            return
        ps = self._lane_ptrs(mt, ptr, idx, n, s.buffer)
        m = mask if mask is not None else b.true_mask(n)
        fn = f"@llvm.masked.scatter.{T.suffix(mt, n)}.v{n}p0"
        b.declare(fn, f"declare void {fn}({vt}, <{n} x ptr>, <{n} x i1>)")
        b.emit(
            f"call void {fn}({vt} {v.ref}, <{n} x ptr> align {eb} {ps.ref}, "
            f"<{n} x i1> {m.ref}){md}"
        )

    def masked_store(self, mt: str, p: Val, v: Val, mask: str, eb: int, md: str) -> None:
        """Store the lanes of ``v`` whose ``mask`` bit (an ``<n x i1>`` operand) is set
        to consecutive elements from ``p``."""
        b = self.b
        n = v.lanes
        vt = T.vec(mt, n)
        fn = f"@llvm.masked.store.{T.suffix(mt, n)}.p0"
        b.declare(fn, f"declare void {fn}({vt}, ptr, <{n} x i1>)")
        b.emit(f"call void {fn}({vt} {v.ref}, ptr align {eb} {p.ref}, <{n} x i1> {mask}){md}")
        self.em.reuse.forget()

    # ---- kinds of vector access ---------------------------------------------------------

    def _stack_ramp(self, ptr: str, idx: Val) -> bool:
        """Whether a constant-stride vector access at ``idx`` goes to a stack buffer (an
        ``alloca`` of this function) and may be done lane by lane (see ``_lanewise_load``):
        without a lane mask always; under one only where the base is a constant and every
        lane's element is inside the buffer (so no lane can fault)."""
        if idx.ramp is None or not 1 < idx.lanes <= MAX_LANES:
            return False
        elems = self.em.allocations.stack_elems(ptr)
        if elems is None:
            return False
        if self.em.vectors.mask is None:
            return True
        base, stride = idx.ramp
        first = base.int_literal
        if first is None:
            return False
        lo, hi = sorted((first, first + stride * (idx.lanes - 1)))
        return lo >= 0 and hi < elems

    def _unless_all_lanes_off(self, p: Val, mask: Val) -> Val:
        """The address of a lane-invariant load under the lane ``mask``: ``p`` when some
        lane is on, else a scratch slot of the function, so that the load is one scalar
        load (broadcast where it is used) that never faults. A masked gather of the one
        address (the alternative) costs a gather per use in a masked tail tile."""
        b = self.b
        n = mask.lanes
        fn = f"@llvm.vector.reduce.or.v{n}i1"
        b.declare(fn, f"declare i1 {fn}(<{n} x i1>)")
        some_on = b.val(f"call i1 {fn}(<{n} x i1> {mask.ref})", "i1")
        if b.fn.scratch is None:
            b.fn.scratch = f"%scratch.{b.fresh()}"
            b.fn.allocas.append(f"{b.fn.scratch} = alloca [2 x i64], align 16")
        return b.val(f"select i1 {some_on.ref}, ptr {p.ref}, ptr {b.fn.scratch}", "ptr")

    def _lanewise_load(self, mt: str, ptr: str, idx: Val, md: str, eb: int) -> Val:
        """A strided vector load from a stack buffer as scalar loads + ``insertelement``.

        A gather intrinsic on an ``alloca`` keeps SROA from promoting it to registers (the
        accumulator tile of a micro-kernel would be spilled to the stack); scalar loads at
        offsets that are constant after unrolling are promoted, and LLVM turns the
        extracts/inserts into register shuffles (e.g. an in-register transpose). Under a
        lane mask (only with every lane in bounds, see ``_stack_ramp``) the disabled lanes
        read as 0, as from a masked gather."""
        b = self.b
        mask = self.em.vectors.mask
        base, stride = idx.ramp
        n = idx.lanes
        vt = T.vec(mt, n)
        v = Val("poison", mt, n)
        for k in range(n):
            off = b.add_i64("add", base, b.i64(k * stride))
            p = b.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {off.ref}", "ptr")
            x = b.val(f"load {mt}, ptr {p.ref}, align {eb}{md}", mt)
            v = b.val(f"insertelement {vt} {v.ref}, {mt} {x.ref}, i64 {k}", mt, n)
        if mask is not None:
            v = b.val(f"select <{n} x i1> {mask.ref}, {vt} {v.ref}, {vt} "
                      f"zeroinitializer", mt, n)
        return v

    def _span_load(self, mt: str, ptr: str, idx: Val, md: str, eb: int) -> Val:
        """A vector load of stride 2 to :data:`MAX_SPAN_STRIDE` as contiguous vector loads
        covering the elements from its first lane's to its last lane's, and shuffles.

        The loads read nothing outside that span (the last one ends at the last lane's
        element), so nothing is read that the lanes' own elements do not bracket. A gather
        of 16 lanes costs 16 element loads; with 2 loads and a two-source permute per
        vector instead (and its window unrolled), ResNet's 3x3 / 2 max pool at 112x112
        went from 0.161 to 0.106 ms (2 threads, AVX-512)."""
        b = self.b
        base, stride = idx.ramp
        n = idx.lanes
        vt = T.vec(mt, n)
        span = stride * (n - 1) + 1
        starts = [min(j * n, span - n) for j in range(-(-span // n))]
        parts = []
        for start in starts:
            off = b.add_i64("add", base, b.i64(start))
            p = b.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {off.ref}", "ptr")
            parts.append(b.val(f"load {vt}, ptr {p.ref}, align {eb}{md}", mt, n))
        # Lane k reads element k * stride of the span, from the first part holding it;
        # the parts are laid side by side, part j at lanes [j * n, (j + 1) * n). A stride
        # of at most 4 needs 2 to 4 parts: pairs of them are joined into one vector each.
        picks = []
        for k in range(n):
            e = k * stride
            j = next(j for j, start in enumerate(starts) if start <= e < start + n)
            picks.append(j * n + e - starts[j])
        if len(parts) > 2:
            join = list(range(2 * n))
            parts = [b.shuffle(parts[0], parts[1], mt, join),
                     b.shuffle(parts[2], parts[-1], mt, join)]
        return b.shuffle(parts[0], parts[1], mt, picks)

    def _lanewise_store(self, mt: str, ptr: str, idx: Val, v: Val, md: str, eb: int) -> None:
        """A strided vector store into a stack buffer as ``extractelement`` + scalar stores
        (the counterpart of ``_lanewise_load``)."""
        b = self.b
        base, stride = idx.ramp
        for k in range(idx.lanes):
            off = b.add_i64("add", base, b.i64(k * stride))
            p = b.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {off.ref}", "ptr")
            x = b.val(f"extractelement {v.vty} {v.ref}, i64 {k}", mt)
            b.emit(f"store {mt} {x.ref}, ptr {p.ref}, align {eb}{md}")

    def _lane_ptrs(self, mt: str, ptr: str, idx: Val, n: int, buffer) -> Val:
        """The ``<n x ptr>`` of a gather or scatter at element indices ``idx``.

        Where the lanes' offsets fit in 32 bits the vector is one base pointer plus
        ``<n x i32>`` offsets, which x86 lowers to 16-lane ``vgatherdps``/``vscatterdps``
        (64-bit offsets need two 8-lane ``...qps`` instructions per 16 lanes): a ramp with a
        constant stride is the scalar base plus constant offsets ``stride * lane``; any
        other index into a buffer of fewer than 2**31 elements is truncated (an index of
        an enabled lane is in bounds; a disabled lane is never dereferenced)."""
        b = self.b
        if idx.ramp is not None and idx.lanes > 1:
            base, stride = idx.ramp
            if abs(stride) * (n - 1) < 2**31:
                # No ``inbounds``: lane 0 may be a disabled lane whose address is outside
                # the buffer, and the enabled lanes' addresses derive from it.
                p = b.val(f"getelementptr {mt}, ptr {ptr}, i64 {base.ref}", "ptr")
                offs = "<" + ", ".join(f"i32 {k * stride}" for k in range(n)) + ">"
                return b.val(f"getelementptr {mt}, ptr {p.ref}, <{n} x i32> {offs}", "ptr", n)
        idx = b.bcast(b.mat(idx), n)
        elems = const_elems(buffer)
        if idx.lanes > 1 and elems is not None and elems <= 2**31:
            i32 = b.val(f"trunc <{n} x i64> {idx.ref} to <{n} x i32>", "i32", n)
            return b.val(
                f"getelementptr inbounds {mt}, ptr {ptr}, <{n} x i32> {i32.ref}", "ptr", n)
        return b.val(f"getelementptr inbounds {mt}, ptr {ptr}, <{n} x i64> {idx.ref}", "ptr", n)

    def _gather(self, mt, ptrs: Val, mask: Val, md: str, eb: int) -> Val:
        b = self.b
        n = mask.lanes
        ptrs = b.bcast(ptrs, n)
        vt = T.vec(mt, n)
        fn = f"@llvm.masked.gather.{T.suffix(mt, n)}.v{n}p0"
        b.declare(fn, f"declare {vt} {fn}(<{n} x ptr>, <{n} x i1>, {vt})")
        return b.val(
            f"call {vt} {fn}(<{n} x ptr> align {eb} {ptrs.ref}, <{n} x i1> {mask.ref}, "
            f"{vt} zeroinitializer){md}",
            mt,
            n,
        )
