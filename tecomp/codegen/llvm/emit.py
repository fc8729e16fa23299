"""The LLVM emitter: one LLVM module for a list of PrimFuncs, written as text.

``Emitter`` holds the module and function being emitted, evaluates expressions and emits
statements and loops; what belongs to one concern lives in a mixin of its own module:
index arithmetic (``index``), vector values and vectorized loops (``vector``),
memory access and allocation (``memory``), math calls (``intrinsics``),
parallel loops (``parallel``), block transposes (``transpose``) and run-time checks
with the call's error record (``checks``).
"""

from __future__ import annotations

import itertools

from ...errors import CodegenError, UnsupportedOpError
from ...ir import dtype as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.analysis import SIGNED_INT, buffer_key, has_unsafe, is_pure_int
from ...target import Target
from . import types as T
from .checks import CheckMixin
from .index import IndexMixin
from .intrinsics import MathMixin
from .ir import Fn, Val, ident, quote
from .memory import MemoryMixin
from .parallel import ParallelMixin
from .transpose import TransposeMixin
from .vector import VectorMixin


class Emitter(IndexMixin, VectorMixin, MemoryMixin, MathMixin, ParallelMixin, TransposeMixin,
              CheckMixin):
    """Emits one LLVM module for a list of PrimFuncs."""

    def __init__(self, target: Target, fn_attrs: str):
        self.target = target
        self.fn_attrs = fn_attrs
        self.decls: dict = {}
        self.globals: list = []
        self.md: list = []
        self.md_count = itertools.count(1)
        self.tmp = itertools.count()
        self.functions: list = []
        self.fn: Fn | None = None
        self.lanes = 1
        self.mask: Val | None = None
        self.par_count = itertools.count()
        self.domain = self._new_md('distinct !{{!{id}, !"tecomp.noalias"}}')

    # ---- plumbing -------------------------------------------------------------------

    def _new_md(self, fmt: str) -> str:
        i = next(self.md_count)
        self.md.append(f"!{i} = " + fmt.format(id=i))
        return f"!{i}"

    def emit(self, line: str) -> None:
        self.fn.lines.append("  " + line)

    def val(self, rhs: str, ty: str, lanes: int = 1) -> Val:
        name = f"%t{next(self.tmp)}"
        self.emit(f"{name} = {rhs}")
        return Val(name, ty, lanes)

    def new_label(self, hint: str) -> str:
        return f"{hint}{next(self.tmp)}"

    def start_block(self, label: str) -> None:
        self.fn.lines.append(f"{label}:")
        self.fn.label = label

    def declare(self, name: str, decl: str) -> str:
        self.decls.setdefault(name, decl)
        return name

    def const(self, value, dtype: str, lanes: int = 1) -> Val:
        ty = T.scalar_type(dtype)
        c = T.const(value, dtype)
        if lanes == 1:
            return Val(c, ty)
        return Val("<" + ", ".join([f"{ty} {c}"] * lanes) + ">", ty, lanes)

    def i64(self, value: int) -> Val:
        return Val(str(int(value)), "i64")

    # ---- expressions: value mode ------------------------------------------------------

    def ev(self, e) -> Val:
        """``e`` evaluated in its own dtype (vector when it varies across lanes)."""
        if is_pure_int(e, self.pure_cache) and not isinstance(e, E.IntImm):
            v = self.ev_idx(e)
            return self.int_convert(self.mat(v), "int64", e.dtype)
        m = getattr(self, "ev_" + type(e).__name__, None)
        if m is None:
            raise UnsupportedOpError(
                f"the LLVM code generator cannot compile {type(e).__name__} nodes ({e})"
            )
        return m(e)

    def ev_IntImm(self, e):
        return self.const(e.value, e.dtype)

    def ev_FloatImm(self, e):
        return self.const(e.value, e.dtype)

    def ev_Var(self, e):
        v = self.lookup(e)
        if e.dtype in SIGNED_INT:
            return self.int_convert(self.mat(v), "int64", e.dtype)
        return v

    def lookup(self, var) -> Val:
        try:
            return self.env[var]
        except KeyError:
            raise CodegenError(
                f"variable {var.name!r} is used but never defined (not a loop variable, "
                f"let binding or symbolic size of a parameter)"
            ) from None

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

    def ev_Cast(self, e):
        src, dst = e.value.dtype, e.dtype
        v = self.mat(self.ev(e.value))
        if src == dst:
            return v
        n = v.lanes
        dty = T.scalar_type(dst)
        vt = T.vec(dty, n)
        if not dt.is_float(src) and not dt.is_float(dst):
            return self.int_convert(v, src, dst)
        if dt.is_float(src) and dt.is_float(dst):
            op = "fpext" if dt.bits(dst) > dt.bits(src) else "fptrunc"
            return self.val(f"{op} {v.vty} {v.ref} to {vt}", dty, n)
        if dt.is_float(src):  # float -> int / bool
            if dst == "bool":
                z = self.const(0.0, src, n)
                return self.val(f"fcmp une {v.vty} {v.ref}, {z.ref}", "i1", n)
            op = "fptosi" if dt.is_signed(dst) else "fptoui"
            return self.val(f"{op} {v.vty} {v.ref} to {vt}", dty, n)
        op = "sitofp" if dt.is_signed(src) else "uitofp"
        return self.val(f"{op} {v.vty} {v.ref} to {vt}", dty, n)

    def _arith(self, e, a: Val, b: Val) -> Val:
        a, b = self.unify(a, b)
        d = e.dtype
        t = type(e)
        vt, n = a.vty, a.lanes
        if dt.is_float(d):
            op = {E.Add: "fadd", E.Sub: "fsub", E.Mul: "fmul", E.Div: "fdiv"}.get(t)
            if op is not None:
                # `contract` only permits fusing a*b+c into one FMA (as C compilers do by
                # default); no other fast-math reassociation is allowed.
                return self.val(f"{op} contract {vt} {a.ref}, {b.ref}", a.ty, n)
            if t in (E.Min, E.Max):
                pred = "olt" if t is E.Min else "ogt"
                c = self.val(f"fcmp {pred} {vt} {a.ref}, {b.ref}", "i1", n)
                return self.val(f"select {c.vty} {c.ref}, {vt} {a.ref}, {vt} {b.ref}", a.ty, n)
        else:
            op = {E.Add: "add", E.Sub: "sub", E.Mul: "mul"}.get(t)
            if op is not None:
                return self.val(f"{op} {vt} {a.ref}, {b.ref}", a.ty, n)
            if t in (E.Min, E.Max):
                name = ("s" if dt.is_signed(d) else "u") + ("min" if t is E.Min else "max")
                return self.intrinsic(name, a.ty, n, [a, b])
            if t in (E.FloorDiv, E.FloorMod):
                return self.floordivmod(t is E.FloorDiv, a, b, d, e)
        raise UnsupportedOpError(f"{t.__name__} on {d} is not supported ({e})")

    def floordivmod(self, is_div: bool, a: Val, b: Val, d: str, e) -> Val:
        """Floor division or modulo of ``a`` by ``b`` that cannot trap (``divisor_guard``:
        a zero divisor is a failed run-time check, the most negative value by -1 wraps)."""
        vt, n, ty = a.vty, a.lanes, a.ty
        bc = E.const_value(e.b) if e is not None else None
        b, is_m1 = self.divisor_guard(b, d, e)
        if not dt.is_signed(d):
            return self.val(f"{'udiv' if is_div else 'urem'} {vt} {a.ref}, {b.ref}", ty, n)
        if bc is not None and bc > 0 and e is not None and self.nonneg(e.a):
            return self.val(f"{'udiv' if is_div else 'urem'} {vt} {a.ref}, {b.ref}", ty, n)
        q = self.val(f"sdiv {vt} {a.ref}, {b.ref}", ty, n)
        r = self.val(f"srem {vt} {a.ref}, {b.ref}", ty, n)
        zero = self.const(0, d, n)
        # The truncated result needs fixing when r != 0 and r, b have different signs.
        x = self.val(f"xor {vt} {r.ref}, {b.ref}", ty, n)
        neg = self.val(f"icmp slt {vt} {x.ref}, {zero.ref}", "i1", n)
        nz = self.val(f"icmp ne {vt} {r.ref}, {zero.ref}", "i1", n)
        fix = self.val(f"and {T.vec('i1', n)} {neg.ref}, {nz.ref}", "i1", n)
        if is_div:
            one = self.const(1, d, n)
            qm = self.val(f"sub {vt} {q.ref}, {one.ref}", ty, n)
            q = self.val(f"select {fix.vty} {fix.ref}, {vt} {qm.ref}, {vt} {q.ref}", ty, n)
            if is_m1 is not None:
                # Divided by 1 where the divisor is -1: negate, wrapping (MIN // -1 == MIN).
                neg_a = self.val(f"sub {vt} {zero.ref}, {a.ref}", ty, n)
                q = self.val(f"select {is_m1.vty} {is_m1.ref}, {vt} {neg_a.ref}, {vt} "
                             f"{q.ref}", ty, n)
            return q
        rp = self.val(f"add {vt} {r.ref}, {b.ref}", ty, n)
        return self.val(f"select {fix.vty} {fix.ref}, {vt} {rp.ref}, {vt} {r.ref}", ty, n)

    def _binary(self, e):
        return self._arith(e, self.ev(e.a), self.ev(e.b))

    ev_Add = ev_Sub = ev_Mul = ev_Div = ev_FloorDiv = ev_FloorMod = ev_Min = ev_Max = _binary

    def _cmp(self, e):
        t = type(e)
        d = e.a.dtype
        if t in (E.And, E.Or):
            return self.logical(e)
        if d in SIGNED_INT:
            a, b = self.ev_idx(e.a), self.ev_idx(e.b)
            if (
                (a.ramp is not None) != (b.ramp is not None)
                and max(a.lanes, b.lanes) > 1
                and ((a.ramp is None and a.lanes == 1) or (b.ramp is None and b.lanes == 1))
            ):
                return self.ramp_cmp(t.__name__, a, b)
            a, b = self.unify(a, b)
            d = "int64"
        else:
            a, b = self.unify(self.ev(e.a), self.ev(e.b))
        name = t.__name__
        if dt.is_float(d):
            pred = {"EQ": "oeq", "NE": "une", "LT": "olt", "LE": "ole", "GT": "ogt", "GE": "oge"}
            return self.val(f"fcmp {pred[name]} {a.vty} {a.ref}, {b.ref}", "i1", a.lanes)
        sign = "s" if dt.is_signed(d) else "u"
        pred = {"EQ": "eq", "NE": "ne", "LT": sign + "lt", "LE": sign + "le",
                "GT": sign + "gt", "GE": sign + "ge"}
        return self.val(f"icmp {pred[name]} {a.vty} {a.ref}, {b.ref}", "i1", a.lanes)

    ev_EQ = ev_NE = ev_LT = ev_LE = ev_GT = ev_GE = ev_And = ev_Or = _cmp

    def logical(self, e):
        op = "and" if type(e) is E.And else "or"
        a = self.ev(e.a)
        if not has_unsafe(e.b):
            a, b = self.unify(a, self.ev(e.b))
            return self.val(f"{op} {a.vty} {a.ref}, {b.ref}", "i1", a.lanes)
        # Short-circuit: the right side may only be safe to evaluate given the left.
        if a.lanes > 1:
            cond = a if op == "and" else self.not_(a)
            b = self.with_mask(cond, lambda: self.ev(e.b))
            a, b = self.unify(a, b)
            return self.val(f"{op} {a.vty} {a.ref}, {b.ref}", "i1", a.lanes)
        cond = a if op == "and" else self.not_(a)
        short = self.const(op == "or", "bool")
        return self.branch_value(cond, lambda: self.ev(e.b), lambda: short, self._lanes_of(e))

    def not_(self, v: Val) -> Val:
        t = self.true_mask(v.lanes)
        return self.val(f"xor {v.vty} {v.ref}, {t.ref}", "i1", v.lanes)

    def ev_Not(self, e):
        return self.not_(self.ev(e.a))

    def branch_value(self, cond: Val, then_fn, else_fn, lanes: int = 1) -> Val:
        """if cond then then_fn() else else_fn() (scalar cond), evaluating only the chosen
        side; both sides are widened to ``lanes`` inside their own blocks."""
        lt, lf, lj = self.new_label("sel.t"), self.new_label("sel.f"), self.new_label("sel.j")
        self.emit(f"br i1 {cond.ref}, label %{lt}, label %{lf}")
        self.start_block(lt)
        tv = self.bcast(self.mat(then_fn()), lanes)
        end_t = self.fn.label
        self.emit(f"br label %{lj}")
        self.start_block(lf)
        fv = self.bcast(self.mat(else_fn()), lanes)
        end_f = self.fn.label
        self.emit(f"br label %{lj}")
        self.start_block(lj)
        phi = f"phi {tv.vty} [ {tv.ref}, %{end_t} ], [ {fv.ref}, %{end_f} ]"
        return self.val(phi, tv.ty, lanes)

    def ev_Select(self, e):
        c = self.ev(e.cond)
        unsafe = has_unsafe(e.true_value) or has_unsafe(e.false_value)
        if c.lanes > 1:
            if unsafe:
                tv = self.with_mask(c, lambda: self.ev(e.true_value))
                fv = self.with_mask(self.not_(c), lambda: self.ev(e.false_value))
            else:
                tv, fv = self.ev(e.true_value), self.ev(e.false_value)
            c, tv, fv = self.unify(c, tv, fv)
            return self.val(
                f"select {c.vty} {c.ref}, {tv.vty} {tv.ref}, {fv.vty} {fv.ref}", tv.ty, tv.lanes
            )
        if unsafe:
            return self._branch_select(c, e)
        tv, fv = self.unify(self.ev(e.true_value), self.ev(e.false_value))
        return self.val(f"select i1 {c.ref}, {tv.vty} {tv.ref}, {fv.vty} {fv.ref}", tv.ty, tv.lanes)

    def _branch_select(self, c: Val, e) -> Val:
        return self.branch_value(
            c, lambda: self.ev(e.true_value), lambda: self.ev(e.false_value), self._lanes_of(e)
        )

    def ev_Let(self, e):
        v = self.ev_idx(e.value) if e.var.dtype in SIGNED_INT else self.ev(e.value)
        old = self.env.get(e.var)
        self.env[e.var] = v
        try:
            return self.ev(e.body)
        finally:
            if old is None:
                self.env.pop(e.var, None)
            else:
                self.env[e.var] = old

    # ---- statements ---------------------------------------------------------------------

    def stmt(self, s) -> None:
        m = getattr(self, "st_" + type(s).__name__, None)
        if m is None:
            raise UnsupportedOpError(f"the LLVM code generator cannot compile {type(s).__name__}")
        m(s)

    def st_SeqStmt(self, s):
        for x in s.seq:
            self.stmt(x)

    def st_Store(self, s):
        self.store(s)

    def st_Evaluate(self, s):
        access = S.prefetched(s)
        if access is not None:
            self.prefetch(access)
        # Any other expression is pure: evaluating it has no effect.

    def st_LetStmt(self, s):
        v = self.ev_idx(s.value) if s.var.dtype in SIGNED_INT else self.ev(s.value)
        self.env[s.var] = v
        if s.var.dtype in SIGNED_INT:
            lo = self.lower_bound(s.value)
            if lo is not None:
                self.bounds[s.var] = lo
        self.stmt(s.body)

    def st_IfThenElse(self, s):
        c = self.ev(s.condition)
        if c.lanes > 1 and s.else_case is None and self.mask is None:
            # Tail guard: run the body unmasked when every lane is on (all but the last
            # vector of a split loop), masked otherwise. Masked accesses are cheap on
            # AVX-512 but scalarized on NEON/AVX2, and the mask itself costs work.
            fn = f"@llvm.vector.reduce.and.v{c.lanes}i1"
            self.declare(fn, f"declare i1 {fn}(<{c.lanes} x i1>)")
            allon = self.val(f"call i1 {fn}(<{c.lanes} x i1> {c.ref})", "i1")
            lf, lm, lj = self.new_label("full"), self.new_label("masked"), self.new_label("join")
            self.emit(f"br i1 {allon.ref}, label %{lf}, label %{lm}")
            self.start_block(lf)
            self.stmt(s.then_case)
            self.emit(f"br label %{lj}")
            self.start_block(lm)
            self.with_mask(c, lambda: self.stmt(s.then_case))
            self.emit(f"br label %{lj}")
            self.start_block(lj)
            return
        if c.lanes > 1:
            self.with_mask(c, lambda: self.stmt(s.then_case))
            if s.else_case is not None:
                self.with_mask(self.not_(c), lambda: self.stmt(s.else_case))
            return
        lt, lj = self.new_label("if.t"), self.new_label("if.j")
        lf = self.new_label("if.f") if s.else_case is not None else lj
        self.emit(f"br i1 {c.ref}, label %{lt}, label %{lf}")
        self.start_block(lt)
        self.stmt(s.then_case)
        self.emit(f"br label %{lj}")
        if s.else_case is not None:
            self.start_block(lf)
            self.stmt(s.else_case)
            self.emit(f"br label %{lj}")
        self.start_block(lj)

    def st_For(self, s):
        # The loop kinds are legal here (``tecomp.ir.transform.legalize`` ran): a
        # vectorized loop's body runs lane-parallel, an unrolled loop has a short constant
        # extent, a parallel loop is not inside another one.
        kind = s.kind
        if kind == "thread_binding":
            raise CodegenError(
                f"loop {s.loop_var.name!r} is bound to GPU thread {s.thread_tag!r}; "
                f"thread binding needs a cuda target"
            )
        if kind == "vectorized":
            return self.vector_loop(s, self.const_extent(s))
        if kind == "unrolled":
            return self.unrolled(s, self.const_extent(s))
        if kind == "parallel":
            return self.parallel_loop(s)
        return self.serial_loop(s, hint=s.hint or None)

    @staticmethod
    def const_extent(s) -> int:
        ext = E.const_value(s.extent)
        if ext is None:
            raise CodegenError(
                f"internal: {s.kind} loop {s.loop_var.name!r} has the symbolic extent "
                f"{s.extent}; legalize the function before emitting it"
            )
        return int(ext)

    def bind_loop_var(self, var, v: Val, lo=None):
        self.env[var] = v
        if lo is not None:
            self.bounds[var] = lo
        else:
            self.bounds.pop(var, None)

    def unrolled(self, s, ext: int):
        if self.transposed_copy(s, ext):
            return
        mn = self.ev_idx(s.min)
        lo = self.lower_bound(s.min)
        for k in range(ext):
            self.bind_loop_var(s.loop_var, self.add_i64("add", mn, self.i64(k)), lo)
            self.stmt(s.body)

    def loop_md(self, hint: str | None) -> str:
        if hint is None:
            return ""
        if hint == "vectorize":
            prop = self._new_md('!{{!"llvm.loop.vectorize.enable", i1 true}}')
        elif hint == "unroll":
            prop = self._new_md('!{{!"llvm.loop.unroll.full"}}')
        else:
            raise CodegenError(f"internal: loop hint {hint}")
        node = self._new_md(f"distinct !{{{{!{{id}}, {prop}}}}}")
        return f", !llvm.loop {node}"

    def counted_loop(self, start: Val, end: Val, body_fn, name: str, hint: str | None):
        """for (i = start; i < end; ++i) body_fn(i) with i an i64 SSA value."""
        pre = self.fn.label
        lh, lb, lx = self.new_label("for.h"), self.new_label("for.b"), self.new_label("for.x")
        iv = f"%{ident(name)}.{next(self.tmp)}"
        nxt = f"{iv}.next"
        self.emit(f"br label %{lh}")
        self.start_block(lh)
        phi_at = len(self.fn.lines)
        self.fn.lines.append(None)  # the phi, filled once the latch block is known
        c = self.val(f"icmp slt i64 {iv}, {end.ref}", "i1")
        self.emit(f"br i1 {c.ref}, label %{lb}, label %{lx}")
        self.start_block(lb)
        body_fn(Val(iv, "i64"))
        latch = self.fn.label
        self.emit(f"{nxt} = add nsw i64 {iv}, 1")
        self.emit(f"br label %{lh}{self.loop_md(hint)}")
        self.fn.lines[phi_at] = f"  {iv} = phi i64 [ {start.ref}, %{pre} ], [ {nxt}, %{latch} ]"
        self.start_block(lx)

    def serial_loop(self, s, hint: str | None = None):
        if self.lanes > 1:
            raise CodegenError("internal: serial loop inside a vector body")
        mn = self.ev_idx(s.min)
        ext = self.ev_idx(s.extent)
        end = self.add_i64("add", mn, ext)
        lo = self.lower_bound(s.min)

        def body(iv: Val):
            self.bind_loop_var(s.loop_var, iv, lo)
            self.stmt(s.body)

        self.counted_loop(mn, end, body, s.loop_var.name, hint)

    # ---- functions ----------------------------------------------------------------------

    def func(self, f: S.PrimFunc, symbol: str) -> None:
        self.env, self.bufs, self.bounds = {}, {}, {}
        self.alias, self.scopes, self.pending_noalias = {}, [], []
        self.pure_cache = {}
        self.lanes, self.mask = 1, None
        self.checks = []  # messages of this function's run-time checks, by id - 1
        self.n_sizes = len(f.size_vars)
        fn = Fn(
            symbol,
            f"define i32 @{quote(symbol)}(ptr noalias nocapture readonly %args, "
            f"ptr noalias nocapture readonly %sizes) {self.fn_attrs}",
            is_entry=True,
        )
        self.fn = fn
        for i, b in enumerate(f.params):
            if not hasattr(b, "dtype") or not hasattr(b, "shape"):
                raise CodegenError(f"parameter {i} of {f.name!r} is not a Buffer: {b!r}")
            p = self.val(f"getelementptr inbounds ptr, ptr %args, i64 {i}", "ptr")
            eb = T.elem_bytes(b.dtype)
            v = self.val(f"load ptr, ptr {p.ref}, align 8, !align !{self._align_md(eb)}", "ptr")
            self.bufs[buffer_key(b)] = v.ref
            self.alias_scope(b)
        for j, sv in enumerate(f.size_vars):
            p = self.val(f"getelementptr inbounds i64, ptr %sizes, i64 {j}", "ptr")
            v = self.val(f"load i64, ptr {p.ref}, align 8", "i64")
            if sv.dtype not in SIGNED_INT:
                v = self.int_convert(v, "int64", sv.dtype)
            self.env[sv] = v
            self.bounds[sv] = 0
        self.stmt(f.body)
        self.finish_entry()
        self.functions.append(fn)
        # Now every buffer of this function has a scope: each aliases none of the others.
        for idx, i, scope in self.pending_noalias:
            others = [x for x in self.scopes if x != scope]
            self.md[idx] = f"!{i} = !{{{', '.join(others)}}}" if others else f"!{i} = !{{}}"

    def module_text(self, triple: str, layout: str) -> str:
        parts = [f'target triple = "{triple}"', f'target datalayout = "{layout}"', ""]
        parts += self.globals
        parts += [f.text() for f in self.functions]
        parts += list(self.decls.values())
        parts += [m for m in self.md if m is not None]
        return "\n".join(parts) + "\n"
