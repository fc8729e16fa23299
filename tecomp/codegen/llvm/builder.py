"""The instruction writer of the LLVM emitter: it appends instructions and blocks to the
function being emitted and builds values from values (constants, integer conversions,
i64 arithmetic folded where both sides are constants, vector broadcasts and shuffles,
intrinsic calls), as LLVM's ``IRBuilder`` does.

Every fresh name of the module (SSA values, labels, stack buffers) takes the next number
of one counter, so names are unique across the functions of a module.
"""

from __future__ import annotations

import itertools

from ...errors import CodegenError
from ...ir import dtype as dt
from . import types as T
from .ir import Fn, Val
from .module_text import ModuleText


class Builder:
    """Writes into ``fn``, the function being emitted (set by the emitter); declares the
    functions it calls in ``module``."""

    def __init__(self, module: ModuleText):
        self.module = module
        self.fn: Fn | None = None
        self._count = itertools.count()

    # ---- names, instructions and blocks -------------------------------------------------

    def fresh(self) -> int:
        """The next number of the module's name counter."""
        return next(self._count)

    def emit(self, line: str) -> None:
        self.fn.lines.append("  " + line)

    def val(self, rhs: str, ty: str, lanes: int = 1) -> Val:
        """A new SSA value ``%tN = rhs`` of scalar type ``ty``."""
        name = f"%t{self.fresh()}"
        self.emit(f"{name} = {rhs}")
        return Val(name, ty, lanes)

    def new_label(self, hint: str) -> str:
        return f"{hint}{self.fresh()}"

    def start_block(self, label: str) -> None:
        self.fn.lines.append(f"{label}:")
        self.fn.label = label

    def declare(self, name: str, decl: str) -> str:
        return self.module.declare(name, decl)

    # ---- constants and scalar values ----------------------------------------------------

    @staticmethod
    def const(value, dtype: str, lanes: int = 1) -> Val:
        """The constant ``value`` of ``dtype``, splat over ``lanes``."""
        ty = T.scalar_type(dtype)
        c = T.const(value, dtype)
        if lanes == 1:
            return Val(c, ty)
        return Val("<" + ", ".join([f"{ty} {c}"] * lanes) + ">", ty, lanes)

    @staticmethod
    def i64(value: int) -> Val:
        return Val(str(int(value)), "i64")

    def add_i64(self, op: str, a: Val, b: Val) -> Val:
        """Scalar i64 ``add``/``sub``/``mul`` with constant folding (keeps ramps' bases
        simple)."""
        x, y = a.int_literal, b.int_literal
        if x is not None and y is not None:
            return self.i64({"add": x + y, "sub": x - y, "mul": x * y}[op])
        if op in ("add", "sub") and b.ref == "0":
            return a
        if op == "add" and a.ref == "0":
            return b
        if op == "mul" and (a.ref == "1" or b.ref == "1"):
            return b if a.ref == "1" else a
        return self.val(f"{op} nsw i64 {a.ref}, {b.ref}", "i64")

    def int_convert(self, v: Val, src: str, dst: str) -> Val:
        """Convert between integer dtypes (and from bool)."""
        dty = T.scalar_type(dst)
        if dst == "bool":
            z = self.const(0, src, v.lanes)
            return self.val(f"icmp ne {v.vty} {v.ref}, {z.ref}", "i1", v.lanes)
        sb = 1 if src == "bool" else dt.bits(src)
        db = dt.bits(dst)
        if sb == db:
            return Val(v.ref, dty, v.lanes)
        vt = T.vec(dty, v.lanes)
        if sb > db:
            return self.val(f"trunc {v.vty} {v.ref} to {vt}", dty, v.lanes)
        op = "sext" if dt.is_signed(src) else "zext"
        return self.val(f"{op} {v.vty} {v.ref} to {vt}", dty, v.lanes)

    def intrinsic(self, name: str, ty: str, lanes: int, args) -> Val:
        """A call of ``llvm.<name>`` overloaded on ``<lanes x ty>``, declared on first use."""
        sfx = T.suffix(ty, lanes)
        fname = f"@llvm.{name}.{sfx}"
        vt = T.vec(ty, lanes)
        self.declare(fname, f"declare {vt} {fname}({', '.join([vt] * len(args))})")
        argl = ", ".join(f"{vt} {a.ref}" for a in args)
        return self.val(f"call {vt} {fname}({argl})", ty, lanes)

    # ---- vectors ------------------------------------------------------------------------

    def mat(self, v: Val) -> Val:
        """The materialized vector of a ramp (other values are returned unchanged)."""
        if v.ramp is None:
            return v
        base, stride = v.ramp
        b = self.bcast(base, v.lanes)
        if stride == 0:
            return b
        steps = "<" + ", ".join(f"i64 {k * stride}" for k in range(v.lanes)) + ">"
        return self.val(f"add nsw {b.vty} {b.ref}, {steps}", "i64", v.lanes)

    def bcast(self, v: Val, lanes: int) -> Val:
        """``v`` as a vector of ``lanes`` (a scalar is splat, a ramp materialized)."""
        if v.lanes == lanes and v.ramp is None:
            return v
        if v.ramp is not None:
            return self.mat(v)
        if v.lanes != 1:
            raise CodegenError(f"internal: lane mismatch {v.lanes} vs {lanes}")
        if lanes == 1:
            return v
        vt = T.vec(v.ty, lanes)
        ins = self.val(f"insertelement {vt} poison, {v.ty} {v.ref}, i64 0", v.ty, lanes)
        return self.val(
            f"shufflevector {vt} {ins.ref}, {vt} poison, <{lanes} x i32> zeroinitializer",
            v.ty,
            lanes,
        )

    def unify(self, *vals: Val) -> tuple:
        """The values as vectors of one lane count (the widest)."""
        lanes = max(v.lanes for v in vals)
        return tuple(self.bcast(self.mat(v), lanes) for v in vals)

    def shuffle(self, a: Val, b: Val, mt: str, mask: list) -> Val:
        """``shufflevector`` of ``a`` and ``b`` (vectors of ``mt``, one type): lane ``k`` of
        the result is lane ``mask[k]`` of ``a`` followed by ``b``."""
        vt = T.vec(mt, a.lanes)
        m = ", ".join(f"i32 {i}" for i in mask)
        return self.val(f"shufflevector {vt} {a.ref}, {vt} {b.ref}, <{len(mask)} x i32> <{m}>",
                        mt, len(mask))

    def true_mask(self, lanes: int) -> Val:
        return self.const(True, "bool", lanes)

    def not_(self, v: Val) -> Val:
        t = self.true_mask(v.lanes)
        return self.val(f"xor {v.vty} {v.ref}, {t.ref}", "i1", v.lanes)

    # ---- leaving the function on failure ------------------------------------------------

    def fail_if(self, cond: Val, hint: str) -> None:
        """Take the failure path when ``cond`` (a scalar i1) holds; go on otherwise."""
        lfail, lok = self.new_label(f"{hint}.fail"), self.new_label(f"{hint}.ok")
        self.emit(f"br i1 {cond.ref}, label %{lfail}, label %{lok}")
        self.start_block(lfail)
        self._fail_path()
        self.start_block(lok)

    def _fail_path(self) -> None:
        """Free live heap buffers of this function and report failure."""
        for p in reversed(self.fn.heap):
            self.emit(f"call void @free(ptr {p})")
        if self.fn.is_entry:
            self.emit("ret i32 -1")
        else:
            self.emit(f"store atomic i32 1, ptr {self.fn.err_ptr} monotonic, align 4")
            self.emit("ret void")
