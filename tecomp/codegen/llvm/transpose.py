"""Block transposes for the LLVM emitter.

A micro-kernel that keeps its accumulators with output channels in the vector lanes
writes them back to an NCHW tensor along output columns, and a channel-blocked copy of
an NCHW input is the same nest the other way round::

    for k in range(E_k):                # unrolled
        for x in range(E_x):            # vectorized
            dst[a + k * s_k + x] = f(src[b + k + x * s_x], ...)

Emitted as written, every stored vector collects one lane from each of ``E_x`` source
rows, and LLVM builds each of the ``E_k`` vectors on its own (several hundred shuffles for
an 8 x 32 tile; scalar loads for a copy from global memory). Recognised here, the nest
is cut into blocks of at most 16 x 16 elements; in each, the value is evaluated once per
row ``x`` as a vector along ``k`` (``src`` rows are contiguous loads; conditions such as
padding become lane masks), the rows go through a transpose network of ``log2(P)``
rounds of ``P`` two-source shuffles (``P`` = the rows rounded up to a power of two), and
the block's ``k`` rows are stored contiguously.

The network: the ``P x E_k`` rows, read as one flat array, are perfectly shuffled
``log2(P)`` times (row ``m`` zipped with row ``m + P/2``, low and high halves). One
perfect shuffle rotates the bits of every element's flat address left by one, so after
``log2(P)`` of them the element of row ``j``, lane ``i`` sits at flat address
``i * P + j``: output row ``i`` is ``P`` consecutive lanes.
"""

from __future__ import annotations

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.analysis import buffer_key, const_stride
from ...ir.functor import post_order_visit, uses_var
from . import types as T
from .ir import Val
from .vector import MAX_LANES


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _transposing_load(value, store, k, x) -> bool:
    """Whether ``value`` reads some buffer contiguously along ``k`` at a place that
    depends on ``x`` (what makes the nest a transpose: a row ``x`` apart, perhaps clamped
    to the last row, as a packed copy of a matrix of symbolic rows reads), and never reads
    the stored buffer. A block evaluates the value one row ``x`` at a time, so how the
    place depends on ``x`` does not matter to what it computes."""
    key = buffer_key(store.buffer)
    found, clash = False, False

    def fn(n):
        nonlocal found, clash
        if isinstance(n, E.Load):
            if buffer_key(n.buffer) == key:
                clash = True
            lk = const_stride(n.index, k)
            if lk and lk[0] == 1 and uses_var(lk[1], x):
                found = True

    post_order_visit(value, fn)
    return found and not clash


def transpose_nest(s: S.For, ext: int):
    """``(store, inner loop, s_k)`` of a transposing nest (module docstring) rooted at
    the unrolled loop ``s`` of extent ``ext``, else None."""
    inner = s.body
    # A vectorized loop is legal (legalization ran), so its store runs lane-parallel.
    if not (isinstance(inner, S.For) and inner.kind == "vectorized"):
        return None
    ex = E.const_value(inner.extent)
    store = inner.body
    if ex is None or not isinstance(store, S.Store):
        return None
    if (
        not 2 <= ex <= MAX_LANES
        or not 2 <= ext <= MAX_LANES
        or not _pow2(ext)
        or store.value.dtype != store.buffer.dtype
        or store.buffer.dtype == "bool"
    ):
        return None
    k, x = s.loop_var, inner.loop_var
    sx = const_stride(store.index, x)
    sk = sx and const_stride(sx[1], k)
    if not (sx and sk) or sx[0] != 1 or not _transposing_load(store.value, store, k, x):
        return None
    return store, inner, sk[0]


class BlockTranspose:
    """Transposing nests as vector rows along ``k``, a shuffle network and row stores, the
    ``transpose`` part of ``emit.Emitter``."""

    def __init__(self, emitter):
        self.em = emitter
        self.b = emitter.builder
        # An unrolled loop inside another is emitted once per outer iteration: each loop
        # is analysed once (keyed by identity; the loop is kept alive beside its answer).
        self._nests: dict = {}

    def try_emit(self, s: S.For, ext: int) -> bool:
        """Emit the unrolled loop ``s`` as a block transpose if it is one (see the module
        docstring); False (nothing emitted) otherwise. The nest is cut into blocks of at
        most one native vector along ``k`` by ``2 x`` that many rows (16 x 16 for float32
        on AVX-512) so a block's rows stay in registers."""
        em, b = self.em, self.b
        if em.vectors.lanes != 1 or em.vectors.mask is not None:
            return False
        if id(s) not in self._nests:
            self._nests[id(s)] = (s, transpose_nest(s, ext))
        nest = self._nests[id(s)][1]
        if nest is None:
            return False
        store, inner, step_k = nest
        ex = int(E.const_value(inner.extent))
        bits = T.elem_bytes(store.buffer.dtype) * 8
        kb = min(ext, max(2, em.target.vector_width_bits // bits))
        xb = min(16, 2 * kb)
        k_min, x_min = em.index.ev(s.min), em.index.ev(inner.min)
        k_lo, x_lo = em.index.lower_bound(s.min), em.index.lower_bound(inner.min)
        for k0 in range(0, ext, kb):
            for x0 in range(0, ex, xb):
                self._block(store, s.loop_var, inner.loop_var, step_k,
                            b.add_i64("add", k_min, b.i64(k0)), k_lo, kb,
                            b.add_i64("add", x_min, b.i64(x0)), x_lo, min(xb, ex - x0))
        return True

    def _block(self, store, k, x, step_k, k_at, k_lo, kb, x_at, x_lo, xb):
        """Rows ``x_at + j`` (``j < xb``) of the value as vectors along ``k`` (``kb`` lanes
        from ``k_at``), transposed, stored as ``kb`` rows of ``xb`` lanes."""
        em, b = self.em, self.b
        symbols = em.symbols
        rows = []
        with em.vectors.lanes_of_body(kb):
            symbols.bind(k, Val(None, "i64", kb, (k_at, 1)), k_lo)
            for j in range(xb):
                symbols.bind(x, b.add_i64("add", x_at, b.i64(j)), x_lo)
                rows.append(b.bcast(b.mat(em.ev(store.value)), kb))
        mt = T.mem_type(store.buffer.dtype)
        flat = self._transpose_rows(rows, mt, kb)
        symbols.bind(k, k_at, k_lo)
        symbols.bind(x, x_at, x_lo)
        dst_base = em.index.ev(store.index)
        dst, md = symbols.buffer(store.buffer), em.aliases.tags(store.buffer)
        eb = T.elem_bytes(store.buffer.dtype)
        for i in range(kb):
            v = self._row_of(flat, mt, kb, i, xb)
            off = b.add_i64("add", dst_base, b.i64(i * step_k))
            self._row_store(mt, dst, off, v, xb, md, eb)

    def _transpose_rows(self, rows: list, mt: str, n: int) -> list:
        """``log2(P)`` perfect shuffles of ``P`` rows of ``n`` lanes (missing rows poison);
        the result read as one flat array is the transpose (module docstring)."""
        p = 1 << (len(rows) - 1).bit_length()
        rows = rows + [Val("poison", mt, n)] * (p - len(rows))
        lo = [t // 2 + (n if t % 2 else 0) for t in range(n)]
        hi = [n // 2 + i for i in lo]
        for _ in range(p.bit_length() - 1):
            pairs = [(rows[m], rows[m + p // 2]) for m in range(p // 2)]
            rows = [self.b.shuffle(a, b, mt, mask) for a, b in pairs for mask in (lo, hi)]
        return rows

    def _row_of(self, flat: list, mt: str, n: int, i: int, width: int) -> Val:
        """Lanes ``[i * P, i * P + width)`` of the flat array ``flat`` (``P`` = its row
        count), which lie in at most two of its vectors of ``n`` lanes."""
        p = len(flat)
        first, lane = divmod(i * p, n)
        a = flat[first]
        b = flat[first + 1] if lane + width > n else Val("poison", mt, n)
        return self.b.shuffle(a, b, mt, [lane + t for t in range(width)])

    def _row_store(self, mt: str, ptr: str, off: Val, v: Val, n: int, md: str, eb: int):
        """Store ``n`` lanes of ``v`` contiguously. With AVX-512 a width that is not a power
        of two is one masked store of the next power of two (LLVM would split it into
        power-of-two pieces)."""
        b = self.b
        p = b.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {off.ref}", "ptr")
        w = 1 << (n - 1).bit_length()
        if w == n or not self._cheap_masked_store():
            b.emit(f"store {T.vec(mt, n)} {v.ref}, ptr {p.ref}, align {eb}{md}")
            return
        wide = b.shuffle(v, Val("poison", mt, n), mt, list(range(n)) + [n] * (w - n))
        mask = ", ".join("i1 true" if k < n else "i1 false" for k in range(w))
        self.em.memory.masked_store(mt, p, wide, f"<{mask}>", eb, md)

    def _cheap_masked_store(self) -> bool:
        """Whether a masked vector store is one instruction on the target (AVX-512)."""
        target = self.em.target
        return target.target_arch == "x86_64" and target.vector_width_bits >= 512
