"""bfloat16 in the LLVM emitter: which targets convert to it natively, and the emitter's
``bfloat`` part, which converts between its bits and float32.

A bfloat16 value is held as its 16 bits (``i16``, see ``types.py``); it is computed on
in float32, rounded once per operation (the value each operation has in the IR). The
way in is exact (the bits shifted up). The way back is ``fptrunc`` to ``bfloat`` where
the target converts natively (``vcvtneps2bf16``, AArch64's ``bfcvt``); elsewhere LLVM's
``fptrunc`` would call ``__truncsfbf2`` per lane (scalar, and not resolvable in the JIT),
so the part rounds with integer instructions, which vectorize: to nearest, ties to
even, NaN kept quiet, as ``vcvtneps2bf16`` and ml_dtypes do (``vcvtneps2bf16`` also
flushes subnormal inputs and results to zero).

It also emits ``dot2_bf16`` calls (:func:`tecomp.te.intrin.dot2_bf16`), with the addend
as the instruction's accumulator: ``vdpbf16ps`` on vectors of 4, 8 or 16 lanes (one per
16 lanes of a wider multiple of 16) where the target has AVX512-BF16; AArch64's ``bfdot``
on 2 or 4 lanes (one per 4 lanes of a wider multiple of 4) where it has FEAT_BF16, which
adds the two products before the addend and rounds the inner sum to odd, so its results
can differ from ``vdpbf16ps``'s in the last bit; elsewhere each word's halves widened to
float32 and the products added, the high one first, as ``vdpbf16ps`` does.
"""

from __future__ import annotations

from . import types as T
from .ir import Val

#: The name of the call of two bfloat16 pairs' dot product (``tecomp.te.dot2_bf16``).
BF16_DOT_CALL = "dot2_bf16"

#: x86 CPUs (LLVM's names) with AVX512-BF16: ``vcvtneps2bf16`` and ``vdpbf16ps``.
X86_BF16_CPUS = frozenset({
    "cooperlake", "sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d",
    "diamondrapids", "znver4", "znver5",
})


def feature_state(target, feature: str):
    """True/False where the target's -mattr turns ``feature`` on/off; None otherwise."""
    state = None
    for a in getattr(target, "mattr", ()):
        if a[1:] == feature:
            state = a[0] == "+"
    return state


def bf16_feature(target) -> str:
    """The name of the CPU feature that gives ``target`` bfloat16 conversions and dot
    products: ``avx512bf16`` on x86, ``bf16`` on AArch64."""
    return "bf16" if getattr(target, "target_arch", "") == "aarch64" else "avx512bf16"


def has_bf16(target) -> bool:
    """Whether ``target`` (an llvm target) converts float32 to bfloat16 and multiplies
    bfloat16 pairs into float32 in hardware: AVX512-BF16 (``vcvtneps2bf16``,
    ``vdpbf16ps``) on x86, FEAT_BF16 (``bfcvt``, ``bfdot``) on AArch64. Named by
    ``-mattr`` or implied by ``-mcpu``."""
    feature = bf16_feature(target)
    state = feature_state(target, feature)
    if state is not None:
        return state
    return feature == "avx512bf16" and getattr(target, "mcpu", "") in X86_BF16_CPUS


class BFloat16Values:
    """Conversions to and from ``bfloat`` values, the ``bfloat`` part of ``emit.Emitter``."""

    def __init__(self, emitter):
        self.b = emitter.builder
        self.native = has_bf16(emitter.target)
        # The lane counts one dot-product instruction takes: vdpbf16ps (x86), bfdot
        # (AArch64), or none where the target has no bfloat16 arithmetic.
        self.dot_lanes = () if not self.native else (
            (4, 8, 16) if bf16_feature(emitter.target) == "avx512bf16" else (2, 4))

    def widen(self, v: Val) -> Val:
        """``v`` (bfloat16 bits) as float, exactly."""
        b, n = self.b, v.lanes
        i32 = T.vec("i32", n)
        wide = b.val(f"zext {v.vty} {v.ref} to {i32}", "i32", n)
        high = b.val(f"shl {i32} {wide.ref}, {b.const(16, 'int32', n).ref}", "i32", n)
        return b.val(f"bitcast {i32} {high.ref} to {T.vec('float', n)}", "float", n)

    def narrow(self, v: Val) -> Val:
        """``v`` (float or double) rounded to bfloat16 bits; a double is rounded to float
        first (the two roundings differ from one only where a double lies within 2^-40
        of a tie; numpy's conversion goes through float32 too)."""
        b, n = self.b, v.lanes
        if v.ty == "double":
            v = b.val(f"fptrunc {v.vty} {v.ref} to {T.vec('float', n)}", "float", n)
        i32, i16 = T.vec("i32", n), T.vec("i16", n)
        if self.native:
            r = b.val(f"fptrunc {v.vty} {v.ref} to {T.vec('bfloat', n)}", "bfloat", n)
            return b.val(f"bitcast {r.vty} {r.ref} to {i16}", "i16", n)

        def c(value):
            return b.const(value, "int32", n).ref

        x = b.val(f"bitcast {v.vty} {v.ref} to {i32}", "i32", n)
        high = b.val(f"lshr {i32} {x.ref}, {c(16)}", "i32", n)
        odd = b.val(f"and {i32} {high.ref}, {c(1)}", "i32", n)
        bias = b.val(f"add {i32} {odd.ref}, {c(0x7FFF)}", "i32", n)
        rounded = b.val(f"add {i32} {x.ref}, {bias.ref}", "i32", n)
        kept = b.val(f"lshr {i32} {rounded.ref}, {c(16)}", "i32", n)
        quiet = b.val(f"or {i32} {high.ref}, {c(0x40)}", "i32", n)
        nan = b.val(f"fcmp uno {v.vty} {v.ref}, {v.ref}", "i1", n)
        bits = b.val(f"select {nan.vty} {nan.ref}, {i32} {quiet.ref}, {i32} {kept.ref}",
                     "i32", n)
        return b.val(f"trunc {i32} {bits.ref} to {i16}", "i16", n)

    def dot(self, a: Val, b: Val, acc: Val | None = None) -> Val:
        """``acc + dot2_bf16(a, b)`` of int32 words ``a`` and ``b`` (two bfloat16 each, one
        vector of lanes each) and a float ``acc`` (None: 0)."""
        b_, n = self.b, a.lanes
        widest = max(self.dot_lanes, default=0)
        if widest and n > widest and n % widest == 0:
            # Wider than a register (a 32-lane block): one instruction per register.
            joined = None
            for start in range(0, n, widest):
                mask = list(range(start, start + widest))
                part_a, part_b = (b_.shuffle(v, v, "i32", mask) for v in (a, b))
                part_acc = None if acc is None else b_.shuffle(acc, acc, "float", mask)
                part = self.dot(part_a, part_b, part_acc)
                if joined is None:
                    joined = part
                    continue
                # Both operands of a shuffle have one type: the part is widened first.
                width = joined.lanes
                wide = b_.shuffle(part, part, "float",
                                  list(range(widest)) + [0] * (width - widest))
                joined = b_.shuffle(joined, wide, "float",
                                    list(range(width)) + list(range(width, width + widest)))
            return joined
        if n in self.dot_lanes:
            acc = acc or b_.const(0.0, "float32", n)
            pairs = T.vec("bfloat", 2 * n)
            fname = (f"@llvm.x86.avx512bf16.dpbf16ps.{32 * n}" if widest == 16 else
                     f"@llvm.aarch64.neon.bfdot.v{n}f32.v{2 * n}bf16")
            b_.declare(fname, f"declare {acc.vty} {fname}({acc.vty}, {pairs}, {pairs})")
            x, y = (b_.val(f"bitcast {v.vty} {v.ref} to {pairs}", "bfloat", 2 * n)
                    for v in (a, b))
            return b_.val(f"call {acc.vty} {fname}({acc.vty} {acc.ref}, {pairs} {x.ref}, "
                          f"{pairs} {y.ref})", "float", n)
        total = acc
        for half in (1, 0):
            x, y = (self._half(v, half) for v in (a, b))
            product = b_.val(f"fmul {x.vty} {x.ref}, {y.ref}", "float", n)
            total = product if total is None else b_.val(
                f"fadd {x.vty} {total.ref}, {product.ref}", "float", n)
        return total

    def _half(self, word: Val, half: int) -> Val:
        """The bfloat16 in the low (0) or high (1) half of int32 ``word``, as float."""
        b, n = self.b, word.lanes
        i32 = T.vec("i32", n)
        bits = (b.val(f"shl {i32} {word.ref}, {b.const(16, 'int32', n).ref}", "i32", n)
                if half == 0 else
                b.val(f"and {i32} {word.ref}, {b.const(-65536, 'int32', n).ref}", "i32", n))
        return b.val(f"bitcast {i32} {bits.ref} to {T.vec('float', n)}", "float", n)
