"""Dot products of 8-bit quads for the LLVM emitter: ``dot4_u8s8`` calls (see
:func:`tecomp.te.intrin.dot4_u8s8`), each lane the sum of four uint8 x int8 products of
the bytes of two 32-bit words.

The instruction depends on the CPU (LLVM does not form any of them from a loop nest):

- **VNNI** (AVX512-VNNI, AVX-VNNI): ``vpdpbusd`` multiplies and accumulates the four
  products in one instruction, exactly; an ``acc + dot4`` takes ``acc`` as its addend.
- **x86 with SSSE3 / AVX2 / AVX512-BW**: ``vpmaddubsw`` adds the products in pairs,
  *saturating* to int16, and ``vpmaddwd`` with ones adds the pairs into int32. Where the
  call promises that every pair fits in int16 (``dot4_u8s8_pairs_fit_int16``: weights
  of at most 64 in magnitude, as onnxruntime's ``reduce_range`` writes them) that is
  the result. Otherwise the unsigned operand is split into its nibbles, whose pairs
  always fit (15 * 128 * 2 < 2**15), and the high half's sums are scaled by 16 in the
  ``vpmaddwd``: exact at twice the instructions.
- **AArch64**: ``usdot`` (FEAT_I8MM) adds the four products to each lane of four, as
  ``vpdpbusd`` does; with only ``sdot`` (FEAT_DotProd, signed x signed) the uint8 bytes
  are flipped to int8 (their value minus 128) and the 128 times the int8 bytes' sum that
  this takes away is added back by a second ``sdot``.
- **Elsewhere** (RISC-V, x86 without SSSE3, a single lane): the products widened to 32
  bits and each quad summed with shuffles, which LLVM schedules as it can.
"""

from __future__ import annotations

from . import types as T
from .bfloat import feature_state
from .ir import Val

#: The dot-product calls, by name: whether the caller promises pairs that fit in int16.
DOT_CALLS = {"dot4_u8s8": False, "dot4_u8s8_pairs_fit_int16": True}

#: x86 CPUs (LLVM's names) with ``vpdpbusd``: AVX512-VNNI or AVX-VNNI.
X86_VNNI_CPUS = frozenset({
    "cascadelake", "cooperlake", "icelake-client", "icelake-server", "tigerlake",
    "rocketlake", "sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d",
    "diamondrapids", "alderlake", "raptorlake", "meteorlake", "arrowlake", "arrowlake-s",
    "lunarlake", "pantherlake", "gracemont", "sierraforest", "grandridge",
    "clearwaterforest", "znver4", "znver5",
})

#: AArch64 CPUs (LLVM's names) with FEAT_DotProd (``sdot``) and with FEAT_I8MM
#: (``usdot``, which implies the former here).
ARM_DOTPROD_CPUS = frozenset({
    "cortex-a55", "cortex-a65", "cortex-a75", "cortex-a76", "cortex-a77", "cortex-a78",
    "cortex-x1", "neoverse-n1", "neoverse-e1", "apple-a13", "apple-m1",
})
ARM_I8MM_CPUS = frozenset({
    "neoverse-v1", "neoverse-n2", "neoverse-v2", "neoverse-v3", "neoverse-n3",
    "cortex-a510", "cortex-a710", "cortex-a715", "cortex-a720", "cortex-x2", "cortex-x3",
    "cortex-x4", "apple-m2", "apple-m3", "apple-m4", "grace",
})

#: (vpmaddubsw, vpmaddwd) by the bits of the vector.
_PAIR_SUMS = {
    128: ("llvm.x86.ssse3.pmadd.ub.sw.128", "llvm.x86.sse2.pmadd.wd"),
    256: ("llvm.x86.avx2.pmadd.ub.sw", "llvm.x86.avx2.pmadd.wd"),
    512: ("llvm.x86.avx512.pmaddubs.w.512", "llvm.x86.avx512.pmaddw.d.512"),
}


def has_vnni(target, bits: int) -> bool:
    """Whether ``target`` has ``vpdpbusd`` on ``bits``-bit vectors: AVX512-VNNI, or
    AVX-VNNI below 512 bits, named by ``-mattr`` or implied by ``-mcpu``."""
    if getattr(target, "target_arch", "") not in ("x86_64", "i386", "i686"):
        return False
    wide = target.vector_width_bits == 512
    by_cpu = getattr(target, "mcpu", "") in X86_VNNI_CPUS
    avx512 = feature_state(target, "avx512vnni")
    avx512 = by_cpu and wide if avx512 is None else avx512 and wide
    if bits == 512:
        return avx512
    avx = feature_state(target, "avxvnni")
    return avx512 or (by_cpu and not wide if avx is None else avx)


def arm_dot_feature(target) -> str | None:
    """``"i8mm"`` (``usdot``), ``"dotprod"`` (``sdot``) or None: what an AArch64
    ``target`` has for four-byte dot products, named by ``-mattr`` or implied by
    ``-mcpu``."""
    if getattr(target, "target_arch", "") != "aarch64":
        return None
    cpu = getattr(target, "mcpu", "")
    for feature, cpus in (("i8mm", ARM_I8MM_CPUS), ("dotprod", ARM_DOTPROD_CPUS | ARM_I8MM_CPUS)):
        state = feature_state(target, feature)
        if state or (state is None and cpu in cpus):
            return feature
    return None


def _has_pair_sums(target, bits: int) -> bool:
    """Whether ``target`` has ``vpmaddubsw`` and ``vpmaddwd`` on ``bits``-bit vectors
    (SSSE3 for 128 bits; AVX2 and AVX512-BW imply it)."""
    arch = getattr(target, "target_arch", "")
    if arch not in ("x86_64", "i386", "i686") or bits not in _PAIR_SUMS:
        return False
    if bits == 128 and target.vector_width_bits < 256:
        return bool(feature_state(target, "ssse3"))
    return bits <= target.vector_width_bits


def product_instructions(target) -> str:
    """The instructions ``dot4_u8s8`` takes on ``target``'s full vectors, as
    :meth:`Int8Dot.dot` chooses them (``tecomp doctor`` prints it)."""
    arm = arm_dot_feature(target)
    if arm is not None:
        return {"i8mm": "usdot", "dotprod": "sdot"}[arm]
    bits = target.vector_width_bits
    if has_vnni(target, bits):
        return "vpdpbusd (VNNI)"
    if _has_pair_sums(target, bits):
        return "vpmaddubsw + vpmaddwd (no VNNI)"
    return "widened to 32 bits"


class Int8Dot:
    """``dot4_u8s8`` calls, the ``int8`` part of ``emit.Emitter``."""

    def __init__(self, emitter):
        self.em = emitter
        self.b = emitter.builder
        self.target = emitter.target

    def dot(self, name: str, a: Val, b: Val, acc: Val | None = None) -> Val:
        """The call ``name`` of the int32 words ``a`` (uint8 bytes) and ``b`` (int8
        bytes), one vector of lanes each, plus ``acc`` (None: 0)."""
        lanes = a.lanes
        bits = 32 * lanes
        # The instructions take whole registers: 128, 256 or 512 bits (ARM: quarters of
        # a power-of-two vector, joined again pairwise); other lane counts are widened.
        if bits in _PAIR_SUMS and has_vnni(self.target, bits):
            return self._vnni(a, b, acc)
        arm = arm_dot_feature(self.target)
        if arm is not None and lanes >= 4 and lanes & (lanes - 1) == 0:
            return self._by_quads_of_lanes(lambda *v: self._arm(arm, *v), a, b, acc)
        if lanes > 1 and _has_pair_sums(self.target, bits):
            r = self._pair_sums(a, b, DOT_CALLS[name])
        else:
            r = self._widened(a, b)
        return r if acc is None else self.b.val(f"add {r.vty} {acc.ref}, {r.ref}", "i32", lanes)

    def _bytes(self, v: Val) -> Val:
        n = 4 * v.lanes
        return self.b.val(f"bitcast {v.vty} {v.ref} to {T.vec('i8', n)}", "i8", n)

    def _call(self, fname: str, ret: str, lanes: int, args) -> Val:
        """A call of the LLVM intrinsic ``fname`` returning ``<lanes x ret>``."""
        params = ", ".join(a.vty for a in args)
        rty = T.vec(ret, lanes)
        self.b.declare(f"@{fname}", f"declare {rty} @{fname}({params})")
        argl = ", ".join(f"{a.vty} {a.ref}" for a in args)
        return self.b.val(f"call {rty} @{fname}({argl})", ret, lanes)

    def _vnni(self, a: Val, b: Val, acc: Val | None) -> Val:
        lanes = a.lanes
        acc = acc or self.b.const(0, "int32", lanes)
        return self._call(f"llvm.x86.avx512.vpdpbusd.{32 * lanes}", "i32", lanes,
                          [acc, self._bytes(a), self._bytes(b)])

    def _by_quads_of_lanes(self, dot, a: Val, b: Val, acc: Val | None) -> Val:
        """``dot(a, b, acc)`` on each 128-bit quarter (four lanes) of operands of a
        power-of-two number of lanes, the results joined again pairwise."""
        b_ = self.b
        lanes = a.lanes
        if lanes == 4:
            return dot(a, b, acc)
        parts = []
        for start in range(0, lanes, 4):
            mask = list(range(start, start + 4))
            part = [b_.shuffle(v, v, "i32", mask) if v is not None else None
                    for v in (a, b, acc)]
            parts.append(dot(*part))
        while len(parts) > 1:
            parts = [b_.shuffle(x, y, "i32", list(range(2 * x.lanes)))
                     for x, y in zip(parts[::2], parts[1::2])]
        return parts[0]

    def _arm(self, feature: str, a: Val, b: Val, acc: Val | None) -> Val:
        """Four lanes by ``usdot``, or by two ``sdot`` on the flipped uint8 bytes."""
        b_ = self.b
        acc = acc or b_.const(0, "int32", 4)
        ab, wb = self._bytes(a), self._bytes(b)
        if feature == "i8mm":
            return self._call("llvm.aarch64.neon.usdot.v4i32.v16i8", "i32", 4, [acc, ab, wb])
        sdot = "llvm.aarch64.neon.sdot.v4i32.v16i8"
        top = b_.const(-128, "int8", 16)
        flipped = b_.val(f"xor {ab.vty} {ab.ref}, {top.ref}", "i8", 16)
        shifted = self._call(sdot, "i32", 4, [acc, flipped, wb])
        # sum(-128 * b) is -128 times the bytes' sum: subtracting it adds 128 * sum(b).
        lost = self._call(sdot, "i32", 4, [b_.const(0, "int32", 4), top, wb])
        return b_.val(f"sub <4 x i32> {shifted.ref}, {lost.ref}", "i32", 4)

    def _pair_sums(self, a: Val, b: Val, pairs_fit: bool) -> Val:
        """``vpmaddubsw`` then ``vpmaddwd``; without ``pairs_fit``, once per nibble of
        ``a``, the high nibbles' pair sums weighted by 16."""
        b_ = self.b
        lanes = a.lanes
        bits = 32 * lanes
        ubsw, wd = _PAIR_SUMS[bits]
        wb = self._bytes(b)
        if pairs_fit:
            pairs = self._call(ubsw, "i16", 2 * lanes, [self._bytes(a), wb])
            return self._weighted(wd, pairs, 1)
        ab = self._bytes(a)
        n = ab.lanes
        low_mask = b_.const(15, "uint8", n)
        low = b_.val(f"and {ab.vty} {ab.ref}, {low_mask.ref}", "i8", n)
        four = b_.const(4, "uint8", n)
        high = b_.val(f"lshr {ab.vty} {ab.ref}, {four.ref}", "i8", n)
        lo = self._weighted(wd, self._call(ubsw, "i16", 2 * lanes, [low, wb]), 1)
        hi = self._weighted(wd, self._call(ubsw, "i16", 2 * lanes, [high, wb]), 16)
        return b_.val(f"add {lo.vty} {lo.ref}, {hi.ref}", "i32", lanes)

    def _weighted(self, wd: str, pairs: Val, weight: int) -> Val:
        """``vpmaddwd`` of int16 ``pairs`` with ``weight`` in every lane: the sums of
        adjacent pairs, times ``weight``, in int32."""
        weights = self.b.const(weight, "int16", pairs.lanes)
        return self._call(wd, "i32", pairs.lanes // 2, [pairs, weights])

    def _widened(self, a: Val, b: Val) -> Val:
        """The products in int32 lanes and each quad summed (any target)."""
        b_ = self.b
        lanes = a.lanes
        n = 4 * lanes
        wide = T.vec("i32", n)
        x = b_.val(f"zext {T.vec('i8', n)} {self._bytes(a).ref} to {wide}", "i32", n)
        y = b_.val(f"sext {T.vec('i8', n)} {self._bytes(b).ref} to {wide}", "i32", n)
        products = b_.val(f"mul {wide} {x.ref}, {y.ref}", "i32", n)
        total = None
        for k in range(4):
            if lanes == 1:
                part = b_.val(f"extractelement {wide} {products.ref}, i32 {k}", "i32")
            else:
                part = b_.shuffle(products, products, "i32", [4 * i + k for i in range(lanes)])
            total = part if total is None else b_.val(
                f"add {part.vty} {total.ref}, {part.ref}", "i32", lanes)
        return total
