"""Math calls for the LLVM emitter: vector math of our own (``vmath``) for float32 and
float16 vectors, LLVM intrinsics (``Builder.intrinsic``), the few functions composed from
them, and libm calls lane by lane where LLVM has no intrinsic."""

from __future__ import annotations

from ...errors import UnsupportedOpError
from ...ir import dtype as dt
from . import types as T
from . import vmath
from .bfloat import BF16_DOT_CALL
from .int8_dot import DOT_CALLS, Int8Dot
from .ir import Val

#: The dot-product calls, whose ``acc +`` is the instruction's accumulator.
DOT_CALL_NAMES = frozenset(DOT_CALLS) | {BF16_DOT_CALL}

#: Calls that are one LLVM intrinsic (``llvm.<name>.<type>``).
_LLVM_MATH = {
    "exp": "exp", "log": "log", "sqrt": "sqrt", "fabs": "fabs", "floor": "floor",
    "ceil": "ceil", "round": "roundeven", "trunc": "trunc", "pow": "pow", "sin": "sin",
    "cos": "cos", "exp2": "exp2", "log2": "log2", "log10": "log10", "tanh": "tanh",
}
#: Calls with no LLVM intrinsic: the libm functions (float, double) that compute them.
_LIBM = {"erf": ("erff", "erf"), "asin": ("asinf", "asin"), "acos": ("acosf", "acos"),
         "atan": ("atanf", "atan")}
#: Integer calls that are one LLVM instruction (``bitwise_not`` is ``xor`` with all ones).
_BITWISE = {"bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor",
            "bitwise_not": "xor"}


class MathCalls:
    """``Call`` expressions, the ``math`` part of ``emit.Emitter``."""

    def __init__(self, emitter):
        self.em = emitter
        self.b = emitter.builder
        self.int8 = Int8Dot(emitter)

    def dot(self, e, addend=None) -> Val:
        """The ``dot4_u8s8`` or ``dot2_bf16`` call ``e``, plus ``addend`` (an expression,
        or None)."""
        a, b = self.b.unify(*[self.em.ev(x) for x in e.args])
        acc = None
        if addend is not None:
            acc, a, b = self.b.unify(self.em.ev(addend), a, b)
        if e.name == BF16_DOT_CALL:
            return self.em.bfloat.dot(a, b, acc)
        return self.int8.dot(e.name, a, b, acc)

    def call(self, e) -> Val:
        """The math call ``e`` (a float dtype; vectors of float32 and float16 by ``vmath``
        where it has the function)."""
        name = e.name
        d = e.dtype
        if name == "reinterpret":
            return self._reinterpret(e)
        if name in DOT_CALL_NAMES:
            return self.dot(e)
        if name in _BITWISE and dt.is_int(d):
            return self._bitwise(name, d, self.b.unify(*[self.em.ev(a) for a in e.args]))
        if not dt.is_float(d):
            raise UnsupportedOpError(f"intrinsic {name} on {d} is not supported ({e})")
        args = self.b.unify(*[self.em.ev(a) for a in e.args])
        if d == "bfloat16":  # computed in float32, rounded once
            bf = self.em.bfloat
            return bf.narrow(self._call(name, "float32", [bf.widen(a) for a in args]))
        return self._call(name, d, args)

    def _bitwise(self, name: str, d: str, args) -> Val:
        b = self.b
        x = args[0]
        # All ones is -1 in every width (types.const prints an unsigned value signed).
        y = args[1] if len(args) > 1 else b.const(-1, d, x.lanes)
        return b.val(f"{_BITWISE[name]} {x.vty} {x.ref}, {y.ref}", x.ty, x.lanes)

    def _reinterpret(self, e) -> Val:
        """The bits of the operand as ``e.dtype``: a ``bitcast`` between types of one width;
        a ``bool`` register (``i1``) widens to its byte, and a byte is a ``bool`` that is
        true where it is not zero."""
        b = self.b
        src, dst = e.args[0].dtype, e.dtype
        x = b.mat(self.em.ev(e.args[0]))
        to = T.llvm_type(dst, x.lanes)
        ty = T.scalar_type(dst)
        if src == "bool":
            return b.val(f"zext {x.vty} {x.ref} to {to}", ty, x.lanes)
        if dst == "bool":
            return b.int_convert(x, src, "bool")
        if x.ty == ty:
            return Val(x.ref, ty, x.lanes)
        return b.val(f"bitcast {x.vty} {x.ref} to {to}", ty, x.lanes)

    def _call(self, name: str, d: str, args) -> Val:
        b = self.b
        n = args[0].lanes
        ty = args[0].ty
        # LLVM would call libm once per lane for these; scalar calls keep libm.
        if n > 1 and ty in ("float", "half") and name in vmath.FUNCTIONS:
            return self._vector_math(name, args)
        if name == "sigmoid":  # 1 / (1 + exp(-x)), IEEE (no fast-math)
            x = args[0]
            neg = b.val(f"fneg {x.vty} {x.ref}", ty, n)
            ex = b.intrinsic("exp", ty, n, [neg])
            one = b.const(1.0, d, n)
            den = b.val(f"fadd {x.vty} {one.ref}, {ex.ref}", ty, n)
            return b.val(f"fdiv {x.vty} {one.ref}, {den.ref}", ty, n)
        if name == "fmod":  # exact, as C's fmod (LLVM calls libm's per lane for vectors)
            x, y = args
            return b.val(f"frem {x.vty} {x.ref}, {y.ref}", ty, n)
        if name == "rsqrt":
            x = args[0]
            s = b.intrinsic("sqrt", ty, n, [x])
            one = b.const(1.0, d, n)
            return b.val(f"fdiv {x.vty} {one.ref}, {s.ref}", ty, n)
        if name in _LLVM_MATH:
            return b.intrinsic(_LLVM_MATH[name], ty, n, list(args))
        if name in _LIBM:
            return self._libm_call(_LIBM[name], d, args)
        raise UnsupportedOpError(
            f"intrinsic {name!r} is not supported by the LLVM code generator; supported: "
            f"{', '.join(sorted(set(_LLVM_MATH) | set(_LIBM) | {'sigmoid', 'rsqrt', 'fmod'}))}"
        )

    def _vector_math(self, name: str, args) -> Val:
        """``name`` of float32 vectors by the module's own ``vmath`` function (float16
        computes through float32)."""
        b = self.b
        n = args[0].lanes
        f32 = T.vec("float", n)
        half = args[0].ty == "half"
        if half:
            args = [b.val(f"fpext {x.vty} {x.ref} to {f32}", "float", n) for x in args]
        fn = vmath.symbol(name, n)
        if not b.module.declares(fn):
            text, intrinsics = vmath.definition(name, n, self.em.fn_attrs,
                                                vmath.has_scalef(self.em.target, n))
            for decl_name, decl in intrinsics.items():
                b.declare(decl_name, decl)
            b.declare(fn, text)
        argl = ", ".join(f"{f32} {x.ref}" for x in args)
        r = b.val(f"call {f32} {fn}({argl})", "float", n)
        if half:
            r = b.val(f"fptrunc {f32} {r.ref} to {T.vec('half', n)}", "half", n)
        return r

    def _libm_call(self, names, d: str, args) -> Val:
        """Call a libm function lane by lane (float16 goes through float)."""
        b = self.b
        fname, dname = names
        use = dname if d == "float64" else fname
        cty = "double" if d == "float64" else "float"
        params = ", ".join([cty] * len(args))
        b.declare(f"@{use}", f"declare {cty} @{use}({params}) nounwind readnone")
        n = args[0].lanes
        ty = args[0].ty
        out = None
        for k in range(n):
            lane_args = []
            for a in args:
                x = a if n == 1 else b.val(f"extractelement {a.vty} {a.ref}, i64 {k}", ty)
                if ty != cty:
                    x = b.val(f"fpext {ty} {x.ref} to {cty}", cty)
                lane_args.append(x)
            call_args = ", ".join(f"{cty} {x.ref}" for x in lane_args)
            r = b.val(f"call {cty} @{use}({call_args})", cty)
            if ty != cty:
                r = b.val(f"fptrunc {cty} {r.ref} to {ty}", ty)
            if n == 1:
                return r
            base = "poison" if out is None else out.ref
            out = b.val(f"insertelement {T.vec(ty, n)} {base}, {ty} {r.ref}, i64 {k}", ty, n)
        return out
