"""Block transposes for the LLVM emitter.

A micro-kernel that keeps its accumulators with output channels in the vector lanes
writes them back to an NCHW tensor along output columns::

    for k in range(E_k):                # unrolled
        for x in range(E_x):            # vectorized
            dst[a + k * s_k + x] = src[b + k + x * s_x]

Emitted as written, every stored vector collects one lane from each of ``E_x`` source
rows, and LLVM builds each of the ``E_k`` vectors on its own (several hundred shuffles for
an 8 x 32 tile). Recognised here, the nest becomes ``E_x`` contiguous row loads of
``E_k`` lanes, a transpose network of ``log2(P)`` rounds of ``P`` two-source shuffles
(``P`` = ``E_x`` rounded up to a power of two), and ``E_k`` contiguous row stores.

The network: the ``P x E_k`` rows, read as one flat array, are perfectly shuffled
``log2(P)`` times (row ``m`` zipped with row ``m + P/2``, low and high halves). One
perfect shuffle rotates the bits of every element's flat address left by one, so after
``log2(P)`` of them the element of row ``j``, lane ``i`` sits at flat address
``i * P + j``: output row ``i`` is ``P`` consecutive lanes.
"""

from __future__ import annotations

from ..ir import expr as E
from ..ir import stmt as S
from ..ir.arith import linear_coeff
from ..ir.functor import substitute
from . import llvm_types as T
from .llvm_analysis import buffer_key
from .llvm_ir import Val
from .llvm_vector import MAX_LANES


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _coeff(index, var):
    """``(c, rest)`` with ``index == c * var + rest`` and ``c`` a constant, else None."""
    lc = linear_coeff(index, var)
    if lc is None:
        return None
    c = E.const_value(lc[0])
    return None if c is None else (int(c), lc[1])


def transpose_nest(s: S.For, ext: int):
    """The ``(store, inner loop, s_k, s_x)`` of a transposing copy nest (module docstring)
    rooted at the unrolled loop ``s`` of extent ``ext``, else None."""
    inner = s.body
    if not (isinstance(inner, S.For) and inner.kind == "vectorized"):
        return None
    ex = E.const_value(inner.extent)
    store = inner.body
    if ex is None or not isinstance(store, S.Store) or not isinstance(store.value, E.Load):
        return None
    load = store.value
    p = 1 << (int(ex) - 1).bit_length()
    if (
        not 2 <= ex <= MAX_LANES
        or not 2 <= ext <= MAX_LANES
        or not _pow2(ext)
        or p > 2 * ext
        or load.dtype != store.buffer.dtype
        or load.dtype == "bool"
        or buffer_key(load.buffer) == buffer_key(store.buffer)
    ):
        return None
    k, x = s.loop_var, inner.loop_var
    lk = _coeff(load.index, k)
    lx = lk and _coeff(lk[1], x)
    sx = _coeff(store.index, x)
    sk = sx and _coeff(sx[1], k)
    if not (lk and lx and sx and sk) or lk[0] != 1 or sx[0] != 1 or lx[0] == 0:
        return None
    return store, inner, sk[0], lx[0]


class TransposeMixin:
    """Transposing copy nests as row loads, a shuffle network and row stores; mixed into
    ``llvm_emit.Emitter``."""

    def transposed_copy(self, s: S.For, ext: int) -> bool:
        """Emit the unrolled loop ``s`` as a block transpose if it is one (see the module
        docstring); False (nothing emitted) otherwise."""
        if self.lanes != 1 or self.mask is not None:
            return False
        nest = transpose_nest(s, ext)
        if nest is None:
            return False
        store, inner, step_k, step_x = nest
        load = store.value
        ex = int(E.const_value(inner.extent))
        at_min = {s.loop_var: s.min, inner.loop_var: inner.min}
        src_base = self.ev_idx(substitute(load.index, at_min))
        dst_base = self.ev_idx(substitute(store.index, at_min))
        mt = T.mem_type(load.dtype)
        eb = T.elem_bytes(load.dtype)
        src, dst = self.buf(load.buffer), self.buf(store.buffer)
        rows = [
            self._row_load(mt, src, self.add_i64("add", src_base, self.i64(j * step_x)), ext,
                           self.alias_md(load.buffer), eb)
            for j in range(ex)
        ]
        flat = self._transpose_rows(rows, mt, ext)
        dst_md = self.alias_md(store.buffer)
        for i in range(ext):
            v = self._row_of(flat, mt, ext, i, ex)
            off = self.add_i64("add", dst_base, self.i64(i * step_k))
            self._row_store(mt, dst, off, v, ex, dst_md, eb)
        return True

    def _row_load(self, mt: str, ptr: str, off: Val, n: int, md: str, eb: int) -> Val:
        p = self.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {off.ref}", "ptr")
        return self.val(f"load {T.vec(mt, n)}, ptr {p.ref}, align {eb}{md}", mt, n)

    def _shuffle(self, a: Val, b: Val, mt: str, mask: list) -> Val:
        vt = T.vec(mt, a.lanes)
        m = ", ".join(f"i32 {i}" for i in mask)
        return self.val(f"shufflevector {vt} {a.ref}, {vt} {b.ref}, <{len(mask)} x i32> <{m}>",
                        mt, len(mask))

    def _transpose_rows(self, rows: list, mt: str, n: int) -> list:
        """``log2(P)`` perfect shuffles of ``P`` rows of ``n`` lanes (missing rows poison);
        the result read as one flat array is the transpose (module docstring)."""
        p = 1 << (len(rows) - 1).bit_length()
        rows = rows + [Val("poison", mt, n)] * (p - len(rows))
        lo = [t // 2 + (n if t % 2 else 0) for t in range(n)]
        hi = [n // 2 + i for i in lo]
        for _ in range(p.bit_length() - 1):
            pairs = [(rows[m], rows[m + p // 2]) for m in range(p // 2)]
            rows = [self._shuffle(a, b, mt, mask) for a, b in pairs for mask in (lo, hi)]
        return rows

    def _row_of(self, flat: list, mt: str, n: int, i: int, width: int) -> Val:
        """Lanes ``[i * P, i * P + width)`` of the flat array ``flat`` (``P`` = its row
        count), which lie in at most two of its vectors of ``n`` lanes."""
        p = len(flat)
        first, lane = divmod(i * p, n)
        a = flat[first]
        b = flat[first + 1] if lane + width > n else Val("poison", mt, n)
        return self._shuffle(a, b, mt, [lane + t for t in range(width)])

    def _row_store(self, mt: str, ptr: str, off: Val, v: Val, n: int, md: str, eb: int):
        """Store ``n`` lanes of ``v`` contiguously. With AVX-512 a width that is not a power
        of two is one masked store of the next power of two (LLVM would split it into
        power-of-two pieces)."""
        p = self.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {off.ref}", "ptr")
        w = 1 << (n - 1).bit_length()
        if w == n or not self.cheap_masked_store():
            self.emit(f"store {T.vec(mt, n)} {v.ref}, ptr {p.ref}, align {eb}{md}")
            return
        wide = self._shuffle(v, Val("poison", mt, n), mt, list(range(n)) + [n] * (w - n))
        vt = T.vec(mt, w)
        fn = f"@llvm.masked.store.{T.suffix(mt, w)}.p0"
        self.declare(fn, f"declare void {fn}({vt}, ptr, <{w} x i1>)")
        mask = ", ".join("i1 true" if k < n else "i1 false" for k in range(w))
        self.emit(f"call void {fn}({vt} {wide.ref}, ptr align {eb} {p.ref}, <{w} x i1> <{mask}>)"
                  f"{md}")

    def cheap_masked_store(self) -> bool:
        """Whether a masked vector store is one instruction on the target (AVX-512)."""
        return self.target.target_arch == "x86_64" and self.target.vector_width_bits >= 512
