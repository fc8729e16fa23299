"""Vector float32 math as LLVM IR: exp, exp2, log, log2, log10, tanh, sigmoid, erf, pow.

LLVM lowers a vector ``llvm.exp`` (and every math intrinsic without a vector instruction)
to one libm call per lane. These functions are instead written out as range reduction
plus polynomial, the method of Cephes (S. L. Moshier, *Methods and Programs for
Mathematical Functions*, 1989) that SLEEF, Eigen and XNNPACK also follow: every step is
an IEEE operation on whole vectors, with ``llvm.fmuladd`` where a step is a multiply-add
(one FMA instruction on targets that have it, a multiply and an add elsewhere).

Each function is emitted once per module and lane count as an internal, always-inlined
LLVM function (``definition``). Special values are those of C99 / numpy: NaN in, NaN out;
exp overflows to inf and underflows through the denormals to 0; log of 0 is -inf and of a
negative number NaN; tanh, sigmoid and erf saturate to +-1 (0 and 1 for sigmoid); pow
follows C99 powf (signed zeros and infinities for odd integer powers, pow(x, 0) = 1).
The error bounds in the docstrings hold against a float64 reference on random bit
patterns, dense sweeps and edge values, with and without FMA
(``tests/codegen/test_llvm_vmath.py`` asserts them).
"""

from __future__ import annotations

import inspect
import itertools
import math

from . import types as T
from .bfloat import feature_state

#: float32 constants of the reductions.
_LOG2E = 1.4426950408889634
_LN2_HI = 0.693359375  # 9 significant bits: n * _LN2_HI is exact for |n| < 2**15
_LN2_LO = -2.12194440e-4  # ln 2 - _LN2_HI
_SQRT_HALF = 0.70710678118654752
_FLT_MIN = 1.17549435e-38  # smallest normal float32

#: exp(r) = 1 + r + r**2 * Q(r) for |r| <= ln2 / 2: Q's coefficients, lowest first, a
#: near-minimax fit of the relative error (reweighted least squares on Chebyshev nodes,
#: rounded to float32). Degree 6 in all, one below Cephes expf's: the polynomial's own
#: error is 0.8 ulp on this interval, and the exponential's, with its last roundings, 1.02.
_EXP_Q = tuple(float.fromhex(c) for c in ("0x1.fffffcp-2", "0x1.555492p-3", "0x1.5558f2p-5",
                                          "0x1.1239d4p-7", "0x1.6a244ap-10"))
#: Cephes logf: log(1 + f) = f - f**2 / 2 + f**3 * P(f) for sqrt(1/2) - 1 <= f < sqrt(2) - 1.
_LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
          1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
          3.3333331174e-1)
#: Cephes tanhf: tanh(x) = x + x**3 * P(x**2) for |x| <= 0.625.
_TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
           -3.33332819422e-1)
_TANH_SMALL = 0.625
#: erf(x) = x + x * P(x**2) for |x| < 1: a least-squares fit (weighted by the float32
#: ulp of erf) on Chebyshev nodes.
_ERF_SMALL_P = (7.890639244578779e-05, -0.0008022611727938056, 0.005189926829189062,
                -0.026854779571294785, 0.11283612251281738, -0.3761262893676758,
                0.12837916612625122)
#: erf(x) = 1 - exp(Q(x)) for 1 <= x <= 4, Q fitted to log(erfc(x)) the same way (the
#: form SLEEF's erff uses); float32 erf(x) rounds to 1 from x = 3.92 on.
_ERF_LARGE_Q = (-2.1793563064420596e-05, 0.0004426450759638101, -0.004211295396089554,
                0.025227107107639313, -0.10844959318637848, -0.633189857006073,
                -1.1295942068099976, 0.00019154998881276697)
_ERF_CLAMP = 4.0


#: Per float type: its dtype, the integer type of its bits, and 1.5 * 2**(mantissa bits)
#: (adding it rounds |v| < 2**(mantissa bits - 1) to an integer).
_FLOAT_TYPES = {
    "float": ("float32", "i32", 1.5 * 2.0**23),
    "double": ("float64", "i64", 1.5 * 2.0**52),
}


class _Body:
    """The instructions of one vector function over ``<lanes x ty>`` values (``ty``:
    float or double).

    Methods take and return SSA names (or constant vectors); ``f`` / ``i`` are splat
    constants of the float type and of the integer type of its bits."""

    def __init__(self, lanes: int, ty: str = "float", scalef: bool = False):
        self.lanes = lanes
        self.ty = ty
        self.scalef = scalef and ty == "float"
        self.dtype, ity, self.round_magic = _FLOAT_TYPES[ty]
        self.lines: list = []
        self.count = itertools.count()
        self.intrinsics: dict = {}
        self.fty = T.vec(ty, lanes)
        self.ity = T.vec(ity, lanes)
        self.bty = T.vec("i1", lanes)

    def view(self, ty: str) -> _Body:
        """The same function body, with values of float type ``ty``."""
        other = _Body(self.lanes, ty)
        other.lines, other.count, other.intrinsics = self.lines, self.count, self.intrinsics
        return other

    def convert(self, x: str, to: _Body) -> str:
        """x converted to ``to``'s float type (fpext / fptrunc, rounding to nearest)."""
        op = "fpext" if to.ty == "double" else "fptrunc"
        return self._v(f"{op} {self.fty} {x} to {to.fty}")

    def _v(self, rhs: str) -> str:
        name = f"%v{next(self.count)}"
        self.lines.append(f"  {name} = {rhs}")
        return name

    def f(self, value: float) -> str:
        c = T.float_const(value, self.dtype)
        return "<" + ", ".join([f"{self.ty} {c}"] * self.lanes) + ">"

    def i(self, value: int) -> str:
        ity = _FLOAT_TYPES[self.ty][1]
        return "<" + ", ".join([f"{ity} {int(value)}"] * self.lanes) + ">"

    def fop(self, op: str, a: str, b: str) -> str:
        return self._v(f"{op} {self.fty} {a}, {b}")

    def add(self, a, b):
        return self.fop("fadd", a, b)

    def sub(self, a, b):
        return self.fop("fsub", a, b)

    def mul(self, a, b):
        return self.fop("fmul", a, b)

    def div(self, a, b):
        return self.fop("fdiv", a, b)

    def neg(self, a: str) -> str:
        return self._v(f"fneg {self.fty} {a}")

    def int_to_float(self, a: str) -> str:
        return self._v(f"sitofp {self.ity} {a} to {self.fty}")

    def iop(self, op: str, a: str, b: str) -> str:
        return self._v(f"{op} {self.ity} {a}, {b}")

    def call(self, name: str, *args: str) -> str:
        """A float vector intrinsic ``llvm.<name>``."""
        fn = f"@llvm.{name}.{T.suffix(self.ty, self.lanes)}"
        params = ", ".join([self.fty] * len(args))
        self.intrinsics[fn] = f"declare {self.fty} {fn}({params})"
        return self._v(f"call {self.fty} {fn}({', '.join(f'{self.fty} {a}' for a in args)})")

    def fma(self, a, b, c):
        """a * b + c, fused where the target has FMA."""
        return self.call("fmuladd", a, b, c)

    def scale(self, p: str, n: str) -> str:
        """``p * 2**n`` for integral float ``n``, by AVX-512's ``vscalefps`` (the body was
        made with ``scalef``): overflow to inf and underflow through the denormals to 0,
        rounded once, in one instruction. Vectors wider than 16 lanes go as 16-lane
        pieces."""
        width = min(self.lanes, 16)
        ty = T.vec("float", width)
        fn = f"@llvm.x86.avx512.mask.scalef.ps.{32 * width}"
        # (a, b, passthrough, lane mask[, rounding: 4, the current mode]); the 512-bit
        # form alone takes a rounding operand.
        if width == 16:
            params, extra = f"{ty}, {ty}, {ty}, i16, i32", "i16 -1, i32 4"
        else:
            params, extra = f"{ty}, {ty}, {ty}, i8", "i8 -1"
        self.intrinsics[fn] = f"declare {ty} {fn}({params})"

        def piece(v: str, start: int) -> str:
            if width == self.lanes:
                return v
            lanes = ", ".join(f"i32 {k}" for k in range(start, start + width))
            return self._v(f"shufflevector {self.fty} {v}, {self.fty} poison, "
                           f"<{width} x i32> <{lanes}>")

        pieces = [self._v(f"call {ty} {fn}({ty} {piece(p, s)}, {ty} {piece(n, s)}, "
                          f"{ty} poison, {extra})")
                  for s in range(0, self.lanes, width)]
        while len(pieces) > 1:  # concatenate pairwise: 16 + 16 lanes, then 32 + 32, ...
            size = width * (self.lanes // width // len(pieces))
            both = ", ".join(f"i32 {k}" for k in range(2 * size))
            pieces = [self._v(f"shufflevector {T.vec('float', size)} {a}, "
                              f"{T.vec('float', size)} {c}, <{2 * size} x i32> <{both}>")
                      for a, c in zip(pieces[::2], pieces[1::2])]
        return pieces[0]

    def poly(self, x: str, coeffs) -> str:
        """Horner's scheme, highest coefficient first."""
        p = self.f(coeffs[0])
        for c in coeffs[1:]:
            p = self.fma(p, x, self.f(c))
        return p

    def cmp(self, pred: str, a: str, b: str) -> str:
        return self._v(f"fcmp {pred} {self.fty} {a}, {b}")

    def logic(self, op: str, a: str, b: str) -> str:
        """``and`` / ``or`` of two lane masks."""
        return self._v(f"{op} {self.bty} {a}, {b}")

    def select(self, c: str, a: str, b: str, ty: str | None = None) -> str:
        ty = ty or self.fty
        return self._v(f"select {self.bty} {c}, {ty} {a}, {ty} {b}")

    def bits(self, x: str) -> str:
        return self._v(f"bitcast {self.fty} {x} to {self.ity}")

    def from_bits(self, x: str) -> str:
        return self._v(f"bitcast {self.ity} {x} to {self.fty}")

    def clamp(self, x: str, lo: float | None, hi: float) -> str:
        """x limited to [lo, hi] (lo None: not limited below); NaN stays NaN (ordered
        compares are false for it)."""
        x = self.select(self.cmp("ogt", x, self.f(hi)), self.f(hi), x)
        if lo is None:
            return x
        return self.select(self.cmp("olt", x, self.f(lo)), self.f(lo), x)


def _round(b: _Body, v: str, scale: float | None = None) -> tuple:
    """(n as an integer, n as a float) for n = v (times ``scale``, in the same FMA, exact
    before rounding) rounded to nearest even, |n| < 2**22 (float) or 2**51 (double). The
    integer comes from the bits of v + 1.5 * 2**23 (2**52), so a NaN lane gives a
    defined (unused) n."""
    magic = b.f(b.round_magic)
    t = b.add(v, magic) if scale is None else b.fma(v, b.f(scale), magic)
    n_int = b.iop("sub", b.bits(t), b.bits(magic))
    return n_int, b.sub(t, magic)


def _exp_reduced(b: _Body, n_int: str, n: str, r: str, normal: bool) -> str:
    """2**n * exp(r) for |r| <= ln2 / 2 and -151 <= n <= 129 (``n_int`` and ``n``: n as
    an integer and as a float). With AVX-512 the scale is one ``vscalefps``. Otherwise,
    unless the caller knows the result is ``normal`` (-125 <= n <= 127: one multiply by
    2**n), it is applied as two halves, 2**(n >> 1) then 2**(n - (n >> 1)), each a
    normal float: either way the result overflows to inf only when it really does, and a
    denormal result is rounded once.

    Q is evaluated by Estrin's scheme, ``(q0 + q1 r) + r**2 ((q2 + q3 r) + q4 r**2)``:
    as many FMAs as Horner's but a chain two shorter. The whole exponential is one long
    dependency chain, and a vector loop of them runs as fast as the core overlaps
    chains; every step off it is throughput."""
    q0, q1, q2, q3, q4 = _EXP_Q
    r2 = b.mul(r, r)
    low = b.fma(r, b.f(q1), b.f(q0))
    high = b.fma(r2, b.f(q4), b.fma(r, b.f(q3), b.f(q2)))
    p = b.fma(r2, b.fma(r2, high, low), r)
    p = b.add(p, b.f(1.0))
    if b.scalef:
        return b.scale(p, n)
    if normal:
        halves = (n_int,)
    else:
        n1 = b.iop("ashr", n_int, b.i(1))
        halves = (n1, b.iop("sub", n_int, n1))
    for n in halves:
        e = b.iop("shl", b.iop("add", n, b.i(127)), b.i(23))
        p = b.mul(p, b.from_bits(e))
    return p


def _exp(b: _Body, x: str, lo: float | None = -104.0, hi: float = 89.0) -> str:
    """e**x for x clamped to [lo, hi]: the full float32 range by default (beyond it the
    result is 0 or inf anyway); a narrower range known to the caller saves work.
    ``x * log2(e)`` is rounded to an integer n in the FMA that adds the rounding constant
    (exact before rounding, so |r| <= ln2 / 2 holds to the last bit)."""
    x = b.clamp(x, lo, hi)
    n_int, n = _round(b, x, _LOG2E)
    r = b.fma(n, b.f(-_LN2_HI), x)
    r = b.fma(n, b.f(-_LN2_LO), r)
    normal = lo is not None and lo >= -86.0 and hi <= 88.0
    return _exp_reduced(b, n_int, n, r, normal)


def exp(b: _Body, x: str) -> str:
    """e**x with n = round(x / ln2), r = x - n * ln2 in two parts (Cody and Waite).
    Max error 1.02 ulp."""
    return _exp(b, x)


def exp2(b: _Body, x: str) -> str:
    """2**x with n = round(x), r = (x - n) * ln2 (x - n is exact). Max error 1 ulp."""
    x = b.clamp(x, -151.0, 129.0)
    n_int, n = _round(b, x)
    r = b.mul(b.sub(x, n), b.f(math.log(2.0)))
    return _exp_reduced(b, n_int, n, r, normal=False)


def _log_parts(b: _Body, x: str) -> tuple:
    """(e, f, y) with log(x) = e * ln2 + f + y for positive finite x: x = m * 2**e
    with sqrt(1/2) <= m < sqrt(2), f = m - 1 and y = log(1 + f) - f."""
    # Denormals are scaled by 2**23 first so that their exponent field is meaningful.
    tiny = b.cmp("olt", x, b.f(_FLT_MIN))
    xs = b.select(tiny, b.mul(x, b.f(2.0**23)), x)
    bits = b.bits(xs)
    e = b.iop("sub", b.iop("lshr", bits, b.i(23)), b.i(126))
    e = b.iop("sub", e, b.select(tiny, b.i(23), b.i(0), b.ity))
    m = b.from_bits(b.iop("or", b.iop("and", bits, b.i(0x007FFFFF)), b.i(0x3F000000)))
    # m is in [1/2, 1); below sqrt(1/2) use 2m and e - 1 so that |f| stays small.
    low = b.cmp("olt", m, b.f(_SQRT_HALF))
    e = b.iop("sub", e, b.select(low, b.i(1), b.i(0), b.ity))
    f = b.sub(b.select(low, b.add(m, m), m), b.f(1.0))
    z = b.mul(f, f)
    y = b.mul(b.mul(b.poly(f, _LOG_P), f), z)
    y = b.fma(b.f(-0.5), z, y)
    return b.int_to_float(e), f, y


def _log_specials(b: _Body, x: str, r: str) -> str:
    """r where x is positive and finite; log's values elsewhere (x = inf: inf,
    x = +-0: -inf, x < 0 or NaN: NaN)."""
    r = b.select(b.cmp("oeq", x, b.f(math.inf)), b.f(math.inf), r)
    r = b.select(b.cmp("oeq", x, b.f(0.0)), b.f(-math.inf), r)
    return b.select(b.cmp("ult", x, b.f(0.0)), b.f(math.nan), r)


def log(b: _Body, x: str) -> str:
    """Natural logarithm (Cephes logf): log(x) = e * ln2 + log(1 + f), ln2 in two parts.
    Max error 1 ulp."""
    e, f, y = _log_parts(b, x)
    y = b.fma(e, b.f(_LN2_LO), y)
    r = b.fma(e, b.f(_LN2_HI), b.add(f, y))
    return _log_specials(b, x, r)


def log2(b: _Body, x: str) -> str:
    """Base-2 logarithm (Cephes log2f): e + (f + y) * log2(e), the constant split as
    1 + 0.4426950... so the large part of the product is exact. Max error 1.5 ulp."""
    e, f, y = _log_parts(b, x)
    frac = b.f(_LOG2E - 1.0)
    r = b.fma(y, frac, b.fma(f, frac, y))
    r = b.add(b.add(r, f), e)
    return _log_specials(b, x, r)


def log10(b: _Body, x: str) -> str:
    """Base-10 logarithm (Cephes log10f): (f + y) * log10(e) + e * log10(2), both
    constants split in a short head and a tail. Max error 2 ulp."""
    e, f, y = _log_parts(b, x)
    l10e_hi, l10e_lo = 4.3359375e-1, 7.00731903251827651129e-4
    l102_hi, l102_lo = 3.0078125e-1, 2.48745663981195213739e-4
    r = b.mul(y, b.f(l10e_lo))
    r = b.fma(f, b.f(l10e_lo), r)
    r = b.fma(e, b.f(l102_lo), r)
    r = b.fma(y, b.f(l10e_hi), r)
    r = b.fma(f, b.f(l10e_hi), r)
    r = b.fma(e, b.f(l102_hi), r)
    return _log_specials(b, x, r)


def tanh(b: _Body, x: str) -> str:
    """Hyperbolic tangent (Cephes tanhf): x + x**3 * P(x**2) for |x| <= 0.625, else
    sign(x) * (1 - 2 / (exp(2|x|) + 1)), which saturates to +-1. Max error 2 ulp."""
    ax = b.call("fabs", x)
    # tanh(x) rounds to 1 from |x| = 9.01 on: exp(2|x|) may stop at exp(20).
    s = _exp(b, b.add(ax, ax), 0.0, 20.0)
    big = b.sub(b.f(1.0), b.div(b.f(2.0), b.add(s, b.f(1.0))))
    z = b.mul(x, x)
    small = b.fma(b.mul(b.poly(z, _TANH_P), z), x, x)
    # The sign of x, also for x = -0, where the polynomial's sum gives +0.
    return b.call("copysign", b.select(b.cmp("ogt", ax, b.f(_TANH_SMALL)), big, small), x)


def sigmoid(b: _Body, x: str) -> str:
    """1 / (1 + exp(-x)), computed from e = exp(-|x|) as 1 / (1 + e) for x >= 0 and
    e / (1 + e) for x < 0, so that it decays through the denormals instead of flushing to
    0 where exp(-x) overflows. Max error 2.5 ulp."""
    e = exp(b, b.neg(b.call("fabs", x)))
    num = b.select(b.cmp("olt", x, b.f(0.0)), e, b.f(1.0))
    return b.div(num, b.add(b.f(1.0), e))


def erf(b: _Body, x: str) -> str:
    """Error function: x + x * P(x**2) for |x| < 1, sign(x) * (1 - exp(Q(|x|))) for
    1 <= |x| (|x| clamped to 4, where float32 erf is 1). Max error 2 ulp."""
    ax = b.call("fabs", x)
    small = b.fma(x, b.poly(b.mul(x, x), _ERF_SMALL_P), x)
    a = b.clamp(ax, 1.0, _ERF_CLAMP)
    # Q is within [-17.5, -1.8] on [1, 4].
    big = b.sub(b.f(1.0), _exp(b, b.poly(a, _ERF_LARGE_Q), -18.0, 0.0))
    big = b.call("copysign", big, x)
    return b.select(b.cmp("olt", ax, b.f(1.0)), small, big)


def _log2_wide(d: _Body, x: str) -> str:
    """log2(x) in double for positive finite x: x = m * 2**e with sqrt(1/2) <= m < sqrt(2),
    log(m) = 2 atanh(s) = 2 (s + s**3 / 3 + ... + s**13 / 13) for s = (m - 1) / (m + 1),
    |s| < 0.172 (the series' remainder is below 2**-42)."""
    bits = d.bits(x)
    e = d.iop("sub", d.iop("lshr", bits, d.i(52)), d.i(1022))
    m = d.from_bits(d.iop("or", d.iop("and", bits, d.i((1 << 52) - 1)), d.i(0x3FE << 52)))
    low = d.cmp("olt", m, d.f(_SQRT_HALF))
    e = d.iop("sub", e, d.select(low, d.i(1), d.i(0), d.ity))
    m = d.select(low, d.add(m, m), m)
    sv = d.div(d.sub(m, d.f(1.0)), d.add(m, d.f(1.0)))
    series = d.poly(d.mul(sv, sv), [1.0 / k for k in range(13, 0, -2)])
    ln_m = d.mul(d.mul(sv, d.f(2.0)), series)
    return d.fma(ln_m, d.f(_LOG2E), d.int_to_float(e))


def _exp2_wide(d: _Body, t: str) -> str:
    """2**t in double to about 2**-40 relative error for |t| <= 200 (clamped there, where
    float32 results are 0 or inf): 2**n * exp(r * ln2) with n = round(t), the exponential
    a degree-11 Taylor polynomial (|r * ln2| <= 0.35)."""
    t = d.clamp(t, -200.0, 200.0)
    n_int, n = _round(d, t)
    r = d.mul(d.sub(t, n), d.f(math.log(2.0)))
    p = d.poly(r, [1.0 / math.factorial(k) for k in range(11, -1, -1)])
    scale = d.iop("shl", d.iop("add", n_int, d.i(1023)), d.i(52))
    return d.mul(p, d.from_bits(scale))


def power(b: _Body, x: str, y: str) -> str:
    """x ** y with C99 powf's special cases: 2**(y * log2|x|) in double, so that the float32
    result is rounded once from a value accurate to about 2**-35. Negative x needs an
    integer y (the sign then follows its parity; otherwise NaN); y = 0, x = 1 and
    (x = -1, y = +-inf) give 1. Max error 0.51 ulp."""
    d = b.view("double")
    ax = b.call("fabs", x)
    axd = b.convert(ax, d)
    lg = _log2_wide(d, axd)
    lg = d.select(d.cmp("oeq", axd, d.f(math.inf)), d.f(math.inf), lg)
    lg = d.select(d.cmp("oeq", axd, d.f(0.0)), d.f(-math.inf), lg)
    lg = d.select(d.cmp("uno", axd, axd), axd, lg)
    r = d.convert(_exp2_wide(d, d.mul(b.convert(y, d), lg)), b)
    is_int = b.cmp("oeq", b.call("trunc", y), y)  # also +-inf
    half = b.mul(y, b.f(0.5))
    odd = b.logic("and", is_int, b.cmp("une", b.call("trunc", half), half))
    r = b.select(odd, b.call("copysign", r, x), r)
    neg_finite = b.logic("and", b.cmp("olt", x, b.f(0.0)), b.cmp("ogt", x, b.f(-math.inf)))
    not_int = b.cmp("une", b.call("trunc", y), y)
    r = b.select(b.logic("and", neg_finite, not_int), b.f(math.nan), r)
    one = b.logic("or", b.cmp("oeq", y, b.f(0.0)), b.cmp("oeq", x, b.f(1.0)))
    unit_inf = b.logic("and", b.cmp("oeq", ax, b.f(1.0)),
                       b.cmp("oeq", b.call("fabs", y), b.f(math.inf)))
    return b.select(b.logic("or", one, unit_inf), b.f(1.0), r)


#: The functions this module implements, by the name of the tecomp intrinsic.
FUNCTIONS = {
    "exp": exp, "exp2": exp2, "log": log, "log2": log2, "log10": log10, "tanh": tanh,
    "sigmoid": sigmoid, "erf": erf, "pow": power,
}


def symbol(name: str, lanes: int) -> str:
    return f"@tecomp.vmath.{name}.{T.suffix('float', lanes)}"


def has_scalef(target, lanes: int) -> bool:
    """Whether ``<lanes x float>`` functions for ``target`` may scale by ``vscalefps``:
    an x86 target with 512-bit vectors (AVX-512F), and AVX-512VL for 4 or 8 lanes; a
    power-of-two number of lanes (wider vectors go as 16-lane pieces)."""
    if getattr(target, "target_arch", "") not in ("x86_64", "i386", "i686") or \
            target.vector_width_bits != 512 or lanes & (lanes - 1) or lanes < 4:
        return False
    return lanes >= 16 or bool(feature_state(target, "avx512vl"))


def definition(name: str, lanes: int, fn_attrs: str, scalef: bool = False) -> tuple:
    """The LLVM text of vector function ``name`` on ``<lanes x float>``: (its definition,
    the intrinsic declarations it needs as name -> declaration). ``fn_attrs`` are the
    caller's attributes (target CPU and features), which inlining requires to match;
    ``scalef``: the target has ``vscalefps`` for these lanes (:func:`has_scalef`)."""
    b = _Body(lanes, scalef=scalef)
    fn = FUNCTIONS[name]
    params = [f"%x{k}" for k in range(len(inspect.signature(fn).parameters) - 1)]
    r = fn(b, *params)
    head = (f"define internal {b.fty} {symbol(name, lanes)}"
            f"({', '.join(f'{b.fty} {p}' for p in params)}) alwaysinline {fn_attrs} {{")
    text = "\n".join([head, "entry:", *b.lines, f"  ret {b.fty} {r}", "}", ""])
    return text, b.intrinsics
