"""Buffers for the LLVM emitter: their pointers and alias scopes, loads and stores
(contiguous, masked, gather/scatter), and allocations on the stack or the heap."""

from __future__ import annotations

from ...errors import CodegenError
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.analysis import buffer_key
from . import types as T
from .ir import Val, ident
from .vector import MAX_LANES

#: The largest constant stride a vector load is emitted for as contiguous loads and a
#: shuffle (``span_load``); a wider one is a gather (the span would need more loads).
MAX_SPAN_STRIDE = 4

#: Largest constant-size allocation (bytes) placed on the stack; bigger ones use the heap.
STACK_LIMIT_BYTES = 32 * 1024



def const_elems(buffer) -> int | None:
    """The number of elements of ``buffer`` when its shape is constant, else None."""
    n = 1
    for x in buffer.shape:
        c = E.const_value(x)
        if c is None:
            return None
        n *= int(c)
    return n

#: Bytes per cache line, the unit a prefetch fetches (64 on the x86 and Arm cores targeted).
CACHE_LINE = 64


class MemoryMixin:
    """Memory access and allocation; mixed into ``emit.Emitter``."""

    def buf(self, buffer):
        key = buffer_key(buffer)
        try:
            return self.bufs[key]
        except KeyError:
            raise CodegenError(
                f"buffer {buffer.name!r} is accessed outside the region where it is allocated "
                f"(not a parameter of the function, nor inside its Allocate)"
            ) from None

    def alias_md(self, buffer) -> str:
        info = self.alias.get(buffer_key(buffer))
        if info is None:
            return ""
        return f", !alias.scope {info[0]}, !noalias {info[1]}"

    def ev_Load(self, e):
        ptr = self.buf(e.buffer)
        d = e.dtype
        mt = T.mem_type(d)
        eb = T.elem_bytes(d)
        md = self.alias_md(e.buffer)
        idx = self.ev_idx(e.index)
        if idx.lanes == 1:
            p = self.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {idx.ref}", "ptr")
            if self.mask is not None:
                p = self.unless_all_lanes_off(p)
            v = self.val(f"load {mt}, ptr {p.ref}, align {eb}{md}", mt)
        elif idx.ramp is not None and idx.ramp[1] == 1:
            n = idx.lanes
            p = self.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {idx.ramp[0].ref}", "ptr")
            vt = T.vec(mt, n)
            if self.mask is None:
                v = self.val(f"load {vt}, ptr {p.ref}, align {eb}{md}", mt, n)
            elif self.stack_ramp(ptr, idx):
                # Every lane is inside a stack buffer: a plain load keeps it promotable
                # to registers (a masked tail tile's accumulators), disabled lanes as 0.
                v = self.val(f"load {vt}, ptr {p.ref}, align {eb}{md}", mt, n)
                v = self.val(f"select <{n} x i1> {self.mask.ref}, {vt} {v.ref}, {vt} "
                             f"zeroinitializer", mt, n)
            else:
                fn = f"@llvm.masked.load.{T.suffix(mt, n)}.p0"
                self.declare(fn, f"declare {vt} {fn}(ptr, <{n} x i1>, {vt})")
                v = self.val(
                    f"call {vt} {fn}(ptr align {eb} {p.ref}, <{n} x i1> {self.mask.ref}, "
                    f"{vt} zeroinitializer){md}",
                    mt,
                    n,
                )
        elif self.stack_ramp(ptr, idx):
            v = self.lanewise_load(mt, ptr, idx, md, eb)
        elif self.mask is None and idx.ramp is not None and 1 < idx.ramp[1] <= MAX_SPAN_STRIDE:
            v = self.span_load(mt, ptr, idx, md, eb)
        else:
            n = idx.lanes
            ps = self.lane_ptrs(mt, ptr, idx, n, e.buffer)
            m = self.mask if self.mask is not None else self.true_mask(n)
            v = self.gather(mt, ps, m, md, eb)
        if d == "bool":
            z = self.const(0, "int8", v.lanes)
            return self.val(f"icmp ne {v.vty} {v.ref}, {z.ref}", "i1", v.lanes)
        return v

    def prefetch(self, e: E.Load) -> None:
        """``llvm.prefetch`` (read, into every cache level) of the access ``e``: its
        element, or a constant-stride vector access every cache line from its first lane
        (a line-aligned vector: exactly its lines; a gather's lanes are not announced)."""
        ptr = self.buf(e.buffer)
        mt, eb = T.mem_type(e.dtype), T.elem_bytes(e.dtype)
        idx = self.ev_idx(e.index)
        if idx.lanes == 1:
            base, offsets = idx, [0]
        elif idx.ramp is not None and idx.ramp[1] >= 0:
            base, step = idx.ramp[0], idx.ramp[1] * eb
            span = (idx.lanes - 1) * step + eb
            offsets = range(0, span, max(step, CACHE_LINE))
        else:
            return
        fn = "@llvm.prefetch.p0"
        self.declare(fn, f"declare void {fn}(ptr, i32, i32, i32)")
        # No ``inbounds``: the address may lie outside the buffer, which a prefetch allows.
        p = self.val(f"getelementptr {mt}, ptr {ptr}, i64 {base.ref}", "ptr")
        for off in offsets:
            q = p if off == 0 else self.val(f"getelementptr i8, ptr {p.ref}, i64 {off}", "ptr")
            self.emit(f"call void {fn}(ptr {q.ref}, i32 0, i32 3, i32 1)")

    def stack_ramp(self, ptr: str, idx: Val) -> bool:
        """Whether a constant-stride vector access at ``idx`` goes to a stack buffer (an
        ``alloca`` of this function) and may be done lane by lane (see ``lanewise_load``):
        without a lane mask always; under one only where the base is a constant and every
        lane's element is inside the buffer (so no lane can fault)."""
        if idx.ramp is None or not 1 < idx.lanes <= MAX_LANES:
            return False
        elems = getattr(self, "_stack_elems", {}).get(ptr)
        if elems is None:
            return False
        if self.mask is None:
            return True
        base, stride = idx.ramp
        if not base.ref.lstrip("-").isdigit():
            return False
        lo, hi = sorted((int(base.ref), int(base.ref) + stride * (idx.lanes - 1)))
        return lo >= 0 and hi < elems

    def unless_all_lanes_off(self, p: Val) -> Val:
        """The address of a lane-invariant load under the current lane mask: ``p`` when
        some lane is on, else a scratch slot of the function, so that the load is one
        scalar load (broadcast where it is used) that never faults. A masked gather of the
        one address (the alternative) costs a gather per use in a masked tail tile."""
        n = self.mask.lanes
        fn = f"@llvm.vector.reduce.or.v{n}i1"
        self.declare(fn, f"declare i1 {fn}(<{n} x i1>)")
        some_on = self.val(f"call i1 {fn}(<{n} x i1> {self.mask.ref})", "i1")
        if self.fn.scratch is None:
            self.fn.scratch = f"%scratch.{next(self.tmp)}"
            self.fn.allocas.append(f"{self.fn.scratch} = alloca [2 x i64], align 16")
        return self.val(f"select i1 {some_on.ref}, ptr {p.ref}, ptr {self.fn.scratch}", "ptr")

    def lanewise_load(self, mt: str, ptr: str, idx: Val, md: str, eb: int) -> Val:
        """A strided vector load from a stack buffer as scalar loads + ``insertelement``.

        A gather intrinsic on an ``alloca`` keeps SROA from promoting it to registers (the
        accumulator tile of a micro-kernel would be spilled to the stack); scalar loads at
        offsets that are constant after unrolling are promoted, and LLVM turns the
        extracts/inserts into register shuffles (e.g. an in-register transpose). Under a
        lane mask (only with every lane in bounds, see ``stack_ramp``) the disabled lanes
        read as 0, as from a masked gather."""
        base, stride = idx.ramp
        n = idx.lanes
        vt = T.vec(mt, n)
        v = Val("poison", mt, n)
        for k in range(n):
            off = self.add_i64("add", base, self.i64(k * stride))
            p = self.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {off.ref}", "ptr")
            x = self.val(f"load {mt}, ptr {p.ref}, align {eb}{md}", mt)
            v = self.val(f"insertelement {vt} {v.ref}, {mt} {x.ref}, i64 {k}", mt, n)
        if self.mask is not None:
            v = self.val(f"select <{n} x i1> {self.mask.ref}, {vt} {v.ref}, {vt} "
                         f"zeroinitializer", mt, n)
        return v

    def span_load(self, mt: str, ptr: str, idx: Val, md: str, eb: int) -> Val:
        """A vector load of stride 2 to :data:`MAX_SPAN_STRIDE` as contiguous vector loads
        covering the elements from its first lane's to its last lane's, and shuffles.

        The loads read nothing outside that span (the last one ends at the last lane's
        element), so nothing is read that the lanes' own elements do not bracket. A gather
        of 16 lanes costs 16 element loads; with 2 loads and a two-source permute per
        vector instead (and its window unrolled), ResNet's 3x3 / 2 max pool at 112x112
        went from 0.161 to 0.106 ms (2 threads, AVX-512)."""
        base, stride = idx.ramp
        n = idx.lanes
        vt = T.vec(mt, n)
        span = stride * (n - 1) + 1
        starts = [min(j * n, span - n) for j in range(-(-span // n))]
        parts = []
        for start in starts:
            off = self.add_i64("add", base, self.i64(start))
            p = self.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {off.ref}", "ptr")
            parts.append(self.val(f"load {vt}, ptr {p.ref}, align {eb}{md}", mt, n))
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
            parts = [self.shuffle(parts[0], parts[1], mt, join),
                     self.shuffle(parts[2], parts[-1], mt, join)]
        return self.shuffle(parts[0], parts[1], mt, picks)

    def lanewise_store(self, mt: str, ptr: str, idx: Val, v: Val, md: str, eb: int) -> None:
        """A strided vector store into a stack buffer as ``extractelement`` + scalar stores
        (the counterpart of ``lanewise_load``)."""
        base, stride = idx.ramp
        for k in range(idx.lanes):
            off = self.add_i64("add", base, self.i64(k * stride))
            p = self.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {off.ref}", "ptr")
            x = self.val(f"extractelement {v.vty} {v.ref}, i64 {k}", mt)
            self.emit(f"store {mt} {x.ref}, ptr {p.ref}, align {eb}{md}")

    def lane_ptrs(self, mt: str, ptr: str, idx: Val, n: int, buffer) -> Val:
        """The ``<n x ptr>`` of a gather or scatter at element indices ``idx``.

        Where the lanes' offsets fit in 32 bits the vector is one base pointer plus
        ``<n x i32>`` offsets, which x86 lowers to 16-lane ``vgatherdps``/``vscatterdps``
        (64-bit offsets need two 8-lane ``...qps`` instructions per 16 lanes): a ramp with a
        constant stride is the scalar base plus constant offsets ``stride * lane``; any
        other index into a buffer of fewer than 2**31 elements is truncated (an index of
        an enabled lane is in bounds; a disabled lane is never dereferenced)."""
        if idx.ramp is not None and idx.lanes > 1:
            base, stride = idx.ramp
            if abs(stride) * (n - 1) < 2**31:
                # No ``inbounds``: lane 0 may be a disabled lane whose address is outside
                # the buffer, and the enabled lanes' addresses derive from it.
                p = self.val(f"getelementptr {mt}, ptr {ptr}, i64 {base.ref}", "ptr")
                offs = "<" + ", ".join(f"i32 {k * stride}" for k in range(n)) + ">"
                return self.val(f"getelementptr {mt}, ptr {p.ref}, <{n} x i32> {offs}", "ptr", n)
        idx = self.bcast(self.mat(idx), n)
        elems = const_elems(buffer)
        if idx.lanes > 1 and elems is not None and elems <= 2**31:
            i32 = self.val(f"trunc <{n} x i64> {idx.ref} to <{n} x i32>", "i32", n)
            return self.val(
                f"getelementptr inbounds {mt}, ptr {ptr}, <{n} x i32> {i32.ref}", "ptr", n)
        return self.val(f"getelementptr inbounds {mt}, ptr {ptr}, <{n} x i64> {idx.ref}", "ptr", n)

    def gather(self, mt, ptrs: Val, mask: Val, md: str, eb: int) -> Val:
        n = mask.lanes
        ptrs = self.bcast(ptrs, n)
        vt = T.vec(mt, n)
        fn = f"@llvm.masked.gather.{T.suffix(mt, n)}.v{n}p0"
        self.declare(fn, f"declare {vt} {fn}(<{n} x ptr>, <{n} x i1>, {vt})")
        return self.val(
            f"call {vt} {fn}(<{n} x ptr> align {eb} {ptrs.ref}, <{n} x i1> {mask.ref}, "
            f"{vt} zeroinitializer){md}",
            mt,
            n,
        )

    def store(self, s: S.Store) -> None:
        ptr = self.buf(s.buffer)
        d = s.buffer.dtype
        mt = T.mem_type(d)
        eb = T.elem_bytes(d)
        md = self.alias_md(s.buffer)
        v = self.mat(self.ev(s.value))
        if s.value.dtype != d:
            raise CodegenError(
                f"store of a {s.value.dtype} value into {d} buffer {s.buffer.name!r}"
            )
        idx = self.ev_idx(s.index)
        if idx.lanes == 1 and v.lanes == 1:
            if d == "bool":
                v = self.val(f"zext i1 {v.ref} to i8", "i8")
            p = self.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {idx.ref}", "ptr")
            if self.mask is not None:
                raise CodegenError("internal: lane-invariant store in a masked region")
            self.emit(f"store {mt} {v.ref}, ptr {p.ref}, align {eb}{md}")
            return
        n = max(idx.lanes, v.lanes)
        v = self.bcast(v, n)
        if d == "bool":
            v = self.val(f"zext <{n} x i1> {v.ref} to <{n} x i8>", "i8", n)
        vt = T.vec(mt, n)
        if idx.ramp is not None and idx.ramp[1] == 1:
            p = self.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {idx.ramp[0].ref}", "ptr")
            in_stack = self.mask is not None and self.stack_ramp(ptr, idx)
            if in_stack:
                # Every lane is inside a stack buffer: read, blend and write back, which
                # LLVM promotes to registers as it does an unmasked tile (a masked store
                # intrinsic would keep a tail tile's accumulators in memory).
                old = self.val(f"load {vt}, ptr {p.ref}, align {eb}{md}", mt, n)
                v = self.val(f"select <{n} x i1> {self.mask.ref}, {vt} {v.ref}, {vt} "
                             f"{old.ref}", mt, n)
            if self.mask is None or in_stack:
                self.emit(f"store {vt} {v.ref}, ptr {p.ref}, align {eb}{md}")
            else:
                self.masked_store(mt, p, v, self.mask.ref, eb, md)
            return
        if self.mask is None and self.stack_ramp(ptr, idx):
            self.lanewise_store(mt, ptr, idx, v, md, eb)
            return
        ps = self.lane_ptrs(mt, ptr, idx, n, s.buffer)
        m = self.mask if self.mask is not None else self.true_mask(n)
        fn = f"@llvm.masked.scatter.{T.suffix(mt, n)}.v{n}p0"
        self.declare(fn, f"declare void {fn}({vt}, <{n} x ptr>, <{n} x i1>)")
        self.emit(
            f"call void {fn}({vt} {v.ref}, <{n} x ptr> align {eb} {ps.ref}, "
            f"<{n} x i1> {m.ref}){md}"
        )

    def masked_store(self, mt: str, p: Val, v: Val, mask: str, eb: int, md: str) -> None:
        """Store the lanes of ``v`` whose ``mask`` bit (an ``<n x i1>`` operand) is set
        to consecutive elements from ``p``."""
        n = v.lanes
        vt = T.vec(mt, n)
        fn = f"@llvm.masked.store.{T.suffix(mt, n)}.p0"
        self.declare(fn, f"declare void {fn}({vt}, ptr, <{n} x i1>)")
        self.emit(f"call void {fn}({vt} {v.ref}, ptr align {eb} {p.ref}, <{n} x i1> {mask}){md}")

    def st_Allocate(self, s):
        b = s.buffer
        if b.scope == "shared":
            raise CodegenError(
                f"buffer {b.name!r} has scope 'shared', which only CUDA targets support; "
                f"allowed on llvm: 'global', 'local'"
            )
        mt = T.mem_type(b.dtype)
        eb = T.elem_bytes(b.dtype)
        n_elems = const_elems(b)
        key = buffer_key(b)
        self.alias_scope(b)
        if n_elems is not None and n_elems * eb <= STACK_LIMIT_BYTES:
            name = f"%buf.{ident(b.name)}.{next(self.tmp)}"
            self.fn.allocas.append(f"{name} = alloca {mt}, i64 {max(n_elems, 1)}, align 64")
            if not hasattr(self, "_stack_elems"):
                self._stack_elems = {}
            self._stack_elems[name] = n_elems
            self.bufs[key] = name
            self.stmt(s.body)
            return
        # Heap: symbolic or large. aligned_alloc needs a size that is a multiple of 64.
        nbytes = self.i64(eb)
        for x in b.shape:
            nbytes = self.add_i64("mul", nbytes, self.mat(self.ev_idx(x)))
        r = self.add_i64("add", nbytes, self.i64(63))
        r = self.val(f"and i64 {r.ref}, -64", "i64")
        r = self.val(f"call i64 @llvm.umax.i64(i64 {r.ref}, i64 64)", "i64")
        self.declare("@llvm.umax.i64", "declare i64 @llvm.umax.i64(i64, i64)")
        self.declare("@aligned_alloc", "declare noalias ptr @aligned_alloc(i64, i64) nounwind")
        self.declare("@free", "declare void @free(ptr) nounwind")
        p = self.val(f"call noalias ptr @aligned_alloc(i64 64, i64 {r.ref})", "ptr")
        isnull = self.val(f"icmp eq ptr {p.ref}, null", "i1")
        self.fail_if(isnull, "alloc")
        self.bufs[key] = p.ref
        self.fn.heap.append(p.ref)
        self.stmt(s.body)
        self.fn.heap.pop()
        self.emit(f"call void @free(ptr {p.ref})")
        del self.bufs[key]

    def fail_if(self, cond: Val, hint: str) -> None:
        """Take the failure path when ``cond`` (a scalar i1) holds; go on otherwise."""
        lfail, lok = self.new_label(f"{hint}.fail"), self.new_label(f"{hint}.ok")
        self.emit(f"br i1 {cond.ref}, label %{lfail}, label %{lok}")
        self.start_block(lfail)
        self.fail_path()
        self.start_block(lok)

    def fail_path(self) -> None:
        """Free live heap buffers of this function and report failure."""
        for p in reversed(self.fn.heap):
            self.emit(f"call void @free(ptr {p})")
        if self.fn.is_entry:
            self.emit("ret i32 -1")
        else:
            self.emit(f"store atomic i32 1, ptr {self.fn.err_ptr} monotonic, align 4")
            self.emit("ret void")

    def alias_scope(self, b) -> None:
        key = buffer_key(b)
        if key in self.alias:
            return
        scope = self._new_md(f'distinct !{{{{!{{id}}, {self.domain}, !"{ident(b.name)}"}}}}')
        self.scopes.append(scope)
        slist = self._new_md(f"!{{{{{scope}}}}}")
        # The noalias list is filled in when the whole function is known.
        idx = len(self.md)
        i = next(self.md_count)
        self.md.append(None)
        self.alias[key] = (slist, f"!{i}")
        self.pending_noalias.append((idx, i, scope))

    def _align_md(self, n: int) -> str:
        key = f"align{n}"
        if not hasattr(self, "_align_nodes"):
            self._align_nodes = {}
        if key not in self._align_nodes:
            self._align_nodes[key] = self._new_md(f"!{{{{i64 {n}}}}}")[1:]
        return self._align_nodes[key]
