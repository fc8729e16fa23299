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
"""

from __future__ import annotations

from . import types as T
from .ir import Val

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
