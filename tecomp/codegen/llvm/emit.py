"""The LLVM emitter: one LLVM module for a list of PrimFuncs, written as text.

:class:`Emitter` evaluates expressions and emits statements; it is made of parts, as
Halide's ``CodeGen_LLVM`` keeps one visitor and helpers and TVM composes its analyzer.
Each part is a class in its own module with its own state and a reference back to the
emitter, through which it reaches the others' public methods:

- ``module`` (:class:`.ModuleText`): the module's globals, declarations, metadata and
  finished functions;
- ``builder`` (:class:`.Builder`): the function being written, its instructions and
  blocks, and values built from values (constants, conversions, vector shuffles);
- ``symbols`` (:class:`.Symbols`): what variables and buffers mean in that function;
- ``index`` (:class:`.IndexArith`): index arithmetic in i64, ramps, lower bounds;
- ``vectors`` (:class:`.VectorLanes`): the lane count and mask, vectorized loops;
- ``loops`` (:class:`.Loops`): serial, unrolled and counted loops;
- ``parallel`` (:class:`.ParallelLoops`): parallel loops outlined onto the thread pool;
- ``transpose`` (:class:`.BlockTranspose`): unrolled nests that are block transposes;
- ``memory`` (:class:`.Memory`) and ``allocations`` (:class:`.Allocations`): loads,
  stores, prefetches; stack and heap buffers;
- ``aliases`` (:class:`.AliasScopes`): the buffers' scoped-noalias metadata;
- ``math`` (:class:`.MathCalls`): math calls;
- ``bfloat`` (:class:`.BFloat16Values`): rounding to bfloat16, its arithmetic in float32;
- ``checks`` (:class:`.RunTimeChecks`): run-time checks and the call's error record;
- ``reuse`` (:class:`.ValueMemo`): the values the statement being emitted has computed,
  reused where an equal expression comes again (a new one for every statement).

The emitter keeps the expression and statement visitors, the floor division the index
arithmetic shares, and the entry point of each function (:meth:`Emitter.func`), which
starts every part's per-function state.
"""

from __future__ import annotations

from contextlib import contextmanager

from ...errors import CodegenError, UnsupportedOpError
from ...ir import dtype as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.analysis import SIGNED_INT, buffer_key, has_unsafe
from ...ir.structural import StructuralClasses
from ...target import Target
from . import types as T
from .alias import AliasScopes
from .allocate import Allocations
from .bfloat import BFloat16Values
from .builder import Builder
from .checks import RunTimeChecks
from .index import IndexArith
from .ir import Fn, Val, quote
from .loops import Loops, const_extent
from .math_calls import DOT_CALL_NAMES, MathCalls
from .memory import Memory
from .module_text import ModuleText
from .parallel import ParallelLoops
from .reuse import ValueMemo
from .symbols import Symbols
from .transpose import BlockTranspose
from .vector import VectorLanes

#: Integer comparisons by node name, for those of two constants.
_COMPARE = {"EQ": int.__eq__, "NE": int.__ne__, "LT": int.__lt__, "LE": int.__le__,
            "GT": int.__gt__, "GE": int.__ge__}


class Emitter:
    """Emits one LLVM module for a list of PrimFuncs (:meth:`func` per function, then
    :meth:`module_text`)."""

    def __init__(self, target: Target, fn_attrs: str):
        self.target = target
        self.fn_attrs = fn_attrs
        self.module = ModuleText()
        # The alias domain is the module's first metadata node.
        self.aliases = AliasScopes(self.module)
        self.builder = Builder(self.module)
        self.symbols = Symbols()
        self.index = IndexArith(self)
        self.vectors = VectorLanes(self)
        self.loops = Loops(self)
        self.parallel = ParallelLoops(self)
        self.transpose = BlockTranspose(self)
        self.memory = Memory(self)
        self.allocations = Allocations(self)
        self.math = MathCalls(self)
        self.bfloat = BFloat16Values(self)
        self.checks = RunTimeChecks(self)
        self.expr_classes = StructuralClasses()
        self.reuse = ValueMemo(self, self.expr_classes)

    @contextmanager
    def writing(self, fn: Fn, symbols: Symbols):
        """Inside the ``with`` block the builder writes ``fn`` with the names ``symbols``;
        the function and names written before are restored after it."""
        saved = (self.builder.fn, self.symbols)
        self.builder.fn, self.symbols = fn, symbols
        try:
            yield
        finally:
            self.builder.fn, self.symbols = saved

    # ---- functions ----------------------------------------------------------------------

    def func(self, f: S.PrimFunc, symbol: str) -> None:
        """Emit ``f`` as the entry point ``symbol`` (``runtime.abi``'s calling convention);
        the messages of its run-time checks are then ``checks.messages``."""
        b = self.builder
        self.aliases.begin_function()
        self.index.begin_function()
        self.vectors.begin_function()
        self.checks.begin_function(len(f.size_vars))
        fn = Fn(
            symbol,
            f"define i32 @{quote(symbol)}(ptr noalias nocapture readonly %args, "
            f"ptr noalias nocapture readonly %sizes) {self.fn_attrs}",
            is_entry=True,
        )
        self.builder.fn, self.symbols = fn, Symbols()
        symbols = self.symbols
        for i, buf in enumerate(f.params):
            if not hasattr(buf, "dtype") or not hasattr(buf, "shape"):
                raise CodegenError(f"parameter {i} of {f.name!r} is not a Buffer: {buf!r}")
            p = b.val(f"getelementptr inbounds ptr, ptr %args, i64 {i}", "ptr")
            align = self.module.align_node(T.elem_bytes(buf.dtype))
            v = b.val(f"load ptr, ptr {p.ref}, align 8, !align {align}", "ptr")
            symbols.bind_buffer(buffer_key(buf), v.ref)
            self.aliases.add(buf)
        for j, sv in enumerate(f.size_vars):
            p = b.val(f"getelementptr inbounds i64, ptr %sizes, i64 {j}", "ptr")
            v = b.val(f"load i64, ptr {p.ref}, align 8", "i64")
            if sv.dtype not in SIGNED_INT:
                v = b.int_convert(v, "int64", sv.dtype)
            symbols.bind(sv, v, 0)
        self.stmt(f.body)
        self.checks.finish_entry()
        self.module.add_function(fn)
        # Now every buffer of this function has a scope: each aliases none of the others.
        self.aliases.finish_function()

    def module_text(self, triple: str, layout: str) -> str:
        """The module's LLVM IR text."""
        return self.module.text(triple, layout)

    # ---- expressions --------------------------------------------------------------------

    def ev(self, e) -> Val:
        """``e`` evaluated in its own dtype (vector when it varies across lanes)."""
        v = self.reuse.get(e)
        if v is not None:
            return v
        if self.index.is_index(e) and not isinstance(e, E.IntImm):
            v = self.index.ev(e)
            v = self.builder.int_convert(self.builder.mat(v), "int64", e.dtype)
        else:
            m = getattr(self, "ev_" + type(e).__name__, None)
            if m is None:
                raise UnsupportedOpError(
                    f"the LLVM code generator cannot compile {type(e).__name__} nodes ({e})"
                )
            v = m(e)
        self.reuse.put(e, v)
        return v

    def _masked(self, cond: Val, fn):
        """``fn()`` under the mask ``cond`` (:meth:`.VectorLanes.with_mask`), in a scope of
        its own for reused values."""
        with self.reuse.scope():
            return self.vectors.with_mask(cond, fn)

    def ev_IntImm(self, e):
        return self.builder.const(e.value, e.dtype)

    def ev_FloatImm(self, e):
        return self.builder.const(e.value, e.dtype)

    def ev_Var(self, e):
        v = self.symbols.lookup(e)
        if e.dtype in SIGNED_INT:
            return self.builder.int_convert(self.builder.mat(v), "int64", e.dtype)
        return v

    def ev_Load(self, e):
        return self.memory.load(e)

    def ev_Call(self, e):
        return self.math.call(e)

    def ev_Check(self, e):
        return self.checks.check(e)

    def ev_Cast(self, e):
        v = self.builder.mat(self.ev(e.value))
        src, dst = e.value.dtype, e.dtype
        for d in (src, dst):
            dt.refuse_small(d, "cast", e)
        # bfloat16 converts through float32 both ways (see bfloat.py).
        if src == "bfloat16" and dst != src:
            v, src = self.bfloat.widen(v), "float32"
        if dst == "bfloat16" and src != dst:
            v = self._convert(v, src, "float64" if src == "float64" else "float32")
            return self.bfloat.narrow(v)
        return self._convert(v, src, dst)

    def _convert(self, v: Val, src: str, dst: str) -> Val:
        """``v`` of dtype ``src`` converted to ``dst`` (neither bfloat16)."""
        b = self.builder
        if src == dst:
            return v
        n = v.lanes
        dty = T.scalar_type(dst)
        vt = T.vec(dty, n)
        if not dt.is_float(src) and not dt.is_float(dst):
            return b.int_convert(v, src, dst)
        if dt.is_float(src) and dt.is_float(dst):
            op = "fpext" if dt.bits(dst) > dt.bits(src) else "fptrunc"
            return b.val(f"{op} {v.vty} {v.ref} to {vt}", dty, n)
        if dt.is_float(src):  # float -> int / bool
            if dst == "bool":
                z = b.const(0.0, src, n)
                return b.val(f"fcmp une {v.vty} {v.ref}, {z.ref}", "i1", n)
            op = "fptosi" if dt.is_signed(dst) else "fptoui"
            return b.val(f"{op} {v.vty} {v.ref} to {vt}", dty, n)
        op = "sitofp" if dt.is_signed(src) else "uitofp"
        return b.val(f"{op} {v.vty} {v.ref} to {vt}", dty, n)

    def arith(self, e, x: Val, y: Val) -> Val:
        """The operation of the binary node ``e`` (its class and dtype) on ``x`` and ``y``."""
        b = self.builder
        x, y = b.unify(x, y)
        d = e.dtype
        t = type(e)
        dt.refuse_small(d, t.__name__, e)
        vt, n = x.vty, x.lanes
        if d == "bfloat16":  # in float32, rounded once
            bf = self.bfloat
            r = self._float_arith(t, bf.widen(x), bf.widen(y))
            if r is not None:
                return bf.narrow(r)
        elif dt.is_float(d):
            r = self._float_arith(t, x, y)
            if r is not None:
                return r
        else:
            op = {E.Add: "add", E.Sub: "sub", E.Mul: "mul"}.get(t)
            if op is not None:
                return b.val(f"{op} {vt} {x.ref}, {y.ref}", x.ty, n)
            if t in (E.Min, E.Max):
                name = ("s" if dt.is_signed(d) else "u") + ("min" if t is E.Min else "max")
                return b.intrinsic(name, x.ty, n, [x, y])
            if t in (E.FloorDiv, E.FloorMod):
                return self.floordivmod(t is E.FloorDiv, x, y, d, e)
        raise UnsupportedOpError(f"{t.__name__} on {d} is not supported ({e})")

    def _float_arith(self, t, x: Val, y: Val) -> Val | None:
        """The float operation ``t`` (an ``E`` node class) of ``x`` and ``y``; None if
        ``t`` is none of + - * / min max."""
        b = self.builder
        vt, n = x.vty, x.lanes
        op = {E.Add: "fadd", E.Sub: "fsub", E.Mul: "fmul", E.Div: "fdiv"}.get(t)
        if op is not None:
            # `contract` only permits fusing a*b+c into one FMA (as C compilers do by
            # default); no other fast-math reassociation is allowed.
            return b.val(f"{op} contract {vt} {x.ref}, {y.ref}", x.ty, n)
        if t in (E.Min, E.Max):
            pred = "olt" if t is E.Min else "ogt"
            c = b.val(f"fcmp {pred} {vt} {x.ref}, {y.ref}", "i1", n)
            return b.val(f"select {c.vty} {c.ref}, {vt} {x.ref}, {vt} {y.ref}", x.ty, n)
        return None

    def floordivmod(self, is_div: bool, x: Val, y: Val, d: str, e) -> Val:
        """Floor division or modulo of ``x`` by ``y`` that cannot trap (``divisor_guard``:
        a zero divisor is a failed run-time check, the most negative value by -1 wraps)."""
        b = self.builder
        vt, n, ty = x.vty, x.lanes, x.ty
        bc = E.const_value(e.b) if e is not None else None
        y, is_m1 = self.checks.divisor_guard(y, d, e)
        if not dt.is_signed(d):
            return b.val(f"{'udiv' if is_div else 'urem'} {vt} {x.ref}, {y.ref}", ty, n)
        if bc is not None and bc > 0 and e is not None and self.index.nonneg(e.a):
            return b.val(f"{'udiv' if is_div else 'urem'} {vt} {x.ref}, {y.ref}", ty, n)
        q = b.val(f"sdiv {vt} {x.ref}, {y.ref}", ty, n)
        r = b.val(f"srem {vt} {x.ref}, {y.ref}", ty, n)
        zero = b.const(0, d, n)
        # The truncated result needs fixing when r != 0 and r, y have different signs.
        s = b.val(f"xor {vt} {r.ref}, {y.ref}", ty, n)
        neg = b.val(f"icmp slt {vt} {s.ref}, {zero.ref}", "i1", n)
        nz = b.val(f"icmp ne {vt} {r.ref}, {zero.ref}", "i1", n)
        fix = b.val(f"and {T.vec('i1', n)} {neg.ref}, {nz.ref}", "i1", n)
        if is_div:
            one = b.const(1, d, n)
            qm = b.val(f"sub {vt} {q.ref}, {one.ref}", ty, n)
            q = b.val(f"select {fix.vty} {fix.ref}, {vt} {qm.ref}, {vt} {q.ref}", ty, n)
            if is_m1 is not None:
                # Divided by 1 where the divisor is -1: negate, wrapping (MIN // -1 == MIN).
                neg_x = b.val(f"sub {vt} {zero.ref}, {x.ref}", ty, n)
                q = b.val(f"select {is_m1.vty} {is_m1.ref}, {vt} {neg_x.ref}, {vt} "
                          f"{q.ref}", ty, n)
            return q
        rp = b.val(f"add {vt} {r.ref}, {y.ref}", ty, n)
        return b.val(f"select {fix.vty} {fix.ref}, {vt} {rp.ref}, {vt} {r.ref}", ty, n)

    def _binary(self, e):
        return self.arith(e, self.ev(e.a), self.ev(e.b))

    def ev_Add(self, e):
        # acc + dot4 (dot2_bf16): one vpdpbusd (vdpbf16ps) where the CPU has it (LLVM
        # does not fold the add).
        for dot, addend in ((e.b, e.a), (e.a, e.b)):
            if type(dot) is E.Call and dot.name in DOT_CALL_NAMES:
                return self.math.dot(dot, addend)
        return self._binary(e)

    ev_Sub = ev_Mul = ev_Div = ev_FloorDiv = ev_FloorMod = ev_Min = ev_Max = _binary

    def _cmp(self, e):
        b = self.builder
        t = type(e)
        d = e.a.dtype
        if t in (E.And, E.Or):
            return self._logical(e)
        dt.refuse_small(d, t.__name__, e)
        if d in SIGNED_INT:
            x, y = self.index.ev(e.a), self.index.ev(e.b)
            if (
                (x.ramp is not None) != (y.ramp is not None)
                and max(x.lanes, y.lanes) > 1
                and ((x.ramp is None and x.lanes == 1) or (y.ramp is None and y.lanes == 1))
            ):
                return self.vectors.ramp_cmp(t.__name__, x, y)
            x, y = b.unify(x, y)
            d = "int64"
        else:
            x, y = b.unify(self.ev(e.a), self.ev(e.b))
            if d == "bfloat16":
                x, y, d = self.bfloat.widen(x), self.bfloat.widen(y), "float32"
        name = t.__name__
        if dt.is_float(d):
            pred = {"EQ": "oeq", "NE": "une", "LT": "olt", "LE": "ole", "GT": "ogt", "GE": "oge"}
            return b.val(f"fcmp {pred[name]} {x.vty} {x.ref}, {y.ref}", "i1", x.lanes)
        if d == "int64" and x.int_literal is not None and y.int_literal is not None:
            # Known while emitting (an unrolled loop's index against a bound): no
            # comparison, and a guard on it no branch (``st_IfThenElse``).
            return b.const(_COMPARE[name](x.int_literal, y.int_literal), "bool")
        sign = "s" if dt.is_signed(d) else "u"
        pred = {"EQ": "eq", "NE": "ne", "LT": sign + "lt", "LE": sign + "le",
                "GT": sign + "gt", "GE": sign + "ge"}
        return b.val(f"icmp {pred[name]} {x.vty} {x.ref}, {y.ref}", "i1", x.lanes)

    ev_EQ = ev_NE = ev_LT = ev_LE = ev_GT = ev_GE = ev_And = ev_Or = _cmp

    def _logical(self, e):
        b, vectors = self.builder, self.vectors
        op = "and" if type(e) is E.And else "or"
        x = self.ev(e.a)
        if x.bool_literal is not None:  # known: the right side decides
            if x.bool_literal == (op == "or"):
                return b.const(op == "or", "bool", vectors.lanes_of(e))
            return self.ev(e.b)
        if not has_unsafe(e.b):
            x, y = b.unify(x, self.ev(e.b))
            return b.val(f"{op} {x.vty} {x.ref}, {y.ref}", "i1", x.lanes)
        # Short-circuit: the right side may only be safe to evaluate given the left.
        if x.lanes > 1:
            cond = x if op == "and" else b.not_(x)
            y = self._masked(cond, lambda: self.ev(e.b))
            x, y = b.unify(x, y)
            return b.val(f"{op} {x.vty} {x.ref}, {y.ref}", "i1", x.lanes)
        cond = x if op == "and" else b.not_(x)
        short = b.const(op == "or", "bool")
        return self._branch_value(cond, lambda: self.ev(e.b), lambda: short,
                                  vectors.lanes_of(e))

    def ev_Not(self, e):
        return self.builder.not_(self.ev(e.a))

    def _branch_value(self, cond: Val, then_fn, else_fn, lanes: int = 1) -> Val:
        """if cond then then_fn() else else_fn() (scalar cond), evaluating only the chosen
        side; both sides are widened to ``lanes`` inside their own blocks."""
        b = self.builder
        lt, lf, lj = b.new_label("sel.t"), b.new_label("sel.f"), b.new_label("sel.j")
        b.emit(f"br i1 {cond.ref}, label %{lt}, label %{lf}")
        b.start_block(lt)
        with self.reuse.scope():
            tv = b.bcast(b.mat(then_fn()), lanes)
        end_t = b.fn.label
        b.emit(f"br label %{lj}")
        b.start_block(lf)
        with self.reuse.scope():
            fv = b.bcast(b.mat(else_fn()), lanes)
        end_f = b.fn.label
        b.emit(f"br label %{lj}")
        b.start_block(lj)
        phi = f"phi {tv.vty} [ {tv.ref}, %{end_t} ], [ {fv.ref}, %{end_f} ]"
        return b.val(phi, tv.ty, lanes)

    def ev_Select(self, e):
        b, vectors = self.builder, self.vectors
        c = self.ev(e.cond)
        unsafe = has_unsafe(e.true_value) or has_unsafe(e.false_value)
        if c.lanes > 1:
            if unsafe:
                tv = self._masked(c, lambda: self.ev(e.true_value))
                fv = self._masked(b.not_(c), lambda: self.ev(e.false_value))
            else:
                tv, fv = self.ev(e.true_value), self.ev(e.false_value)
            c, tv, fv = b.unify(c, tv, fv)
            return b.val(
                f"select {c.vty} {c.ref}, {tv.vty} {tv.ref}, {fv.vty} {fv.ref}", tv.ty, tv.lanes
            )
        if unsafe:
            return self._branch_value(c, lambda: self.ev(e.true_value),
                                      lambda: self.ev(e.false_value), vectors.lanes_of(e))
        tv, fv = b.unify(self.ev(e.true_value), self.ev(e.false_value))
        return b.val(f"select i1 {c.ref}, {tv.vty} {tv.ref}, {fv.vty} {fv.ref}", tv.ty, tv.lanes)

    def ev_Let(self, e):
        v = self.index.ev(e.value) if e.var.dtype in SIGNED_INT else self.ev(e.value)
        with self.symbols.binding(e.var, v):
            return self.ev(e.body)

    # ---- statements ---------------------------------------------------------------------

    def stmt(self, s) -> None:
        m = getattr(self, "st_" + type(s).__name__, None)
        if m is None:
            raise UnsupportedOpError(f"the LLVM code generator cannot compile {type(s).__name__}")
        outer, self.reuse = self.reuse, ValueMemo(self, self.expr_classes)
        try:
            m(s)
        finally:
            self.reuse = outer

    def st_SeqStmt(self, s):
        for x in s.seq:
            self.stmt(x)

    def st_Store(self, s):
        self.memory.store(s)

    def st_Allocate(self, s):
        self.allocations.allocate(s)

    def st_Evaluate(self, s):
        access = S.prefetched(s)
        if access is not None:
            self.memory.prefetch(access, write=S.prefetch_for_write(s),
                                 streaming=S.prefetch_streaming(s))
        # Any other expression is pure: evaluating it has no effect.

    def st_LetStmt(self, s):
        signed = s.var.dtype in SIGNED_INT
        v = self.index.ev(s.value) if signed else self.ev(s.value)
        self.symbols.bind(s.var, v, self.index.lower_bound(s.value) if signed else None)
        self.stmt(s.body)

    def st_IfThenElse(self, s):
        b, vectors = self.builder, self.vectors
        c = self.ev(s.condition)
        if c.lanes > 1 and s.else_case is None and vectors.mask is None:
            # Tail guard: run the body unmasked when every lane is on (all but the last
            # vector of a split loop), masked otherwise. Masked accesses are cheap on
            # AVX-512 but scalarized on NEON/AVX2, and the mask itself costs work.
            fn = f"@llvm.vector.reduce.and.v{c.lanes}i1"
            b.declare(fn, f"declare i1 {fn}(<{c.lanes} x i1>)")
            allon = b.val(f"call i1 {fn}(<{c.lanes} x i1> {c.ref})", "i1")
            lf, lm, lj = b.new_label("full"), b.new_label("masked"), b.new_label("join")
            b.emit(f"br i1 {allon.ref}, label %{lf}, label %{lm}")
            b.start_block(lf)
            self.stmt(s.then_case)
            b.emit(f"br label %{lj}")
            b.start_block(lm)
            vectors.with_mask(c, lambda: self.stmt(s.then_case))
            b.emit(f"br label %{lj}")
            b.start_block(lj)
            return
        if c.lanes > 1:
            vectors.with_mask(c, lambda: self.stmt(s.then_case))
            if s.else_case is not None:
                vectors.with_mask(b.not_(c), lambda: self.stmt(s.else_case))
            return
        if c.bool_literal is not None:  # known while emitting: only the case taken
            case = s.then_case if c.bool_literal else s.else_case
            if case is not None:
                self.stmt(case)
            return
        lt, lj = b.new_label("if.t"), b.new_label("if.j")
        lf = b.new_label("if.f") if s.else_case is not None else lj
        b.emit(f"br i1 {c.ref}, label %{lt}, label %{lf}")
        b.start_block(lt)
        self.stmt(s.then_case)
        b.emit(f"br label %{lj}")
        if s.else_case is not None:
            b.start_block(lf)
            self.stmt(s.else_case)
            b.emit(f"br label %{lj}")
        b.start_block(lj)

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
            return self.vectors.loop(s, const_extent(s))
        if kind == "unrolled":
            return self.loops.unrolled(s, const_extent(s))
        if kind == "parallel":
            return self.parallel.loop(s)
        if kind != "serial":
            raise CodegenError(f"loop {s.loop_var.name!r} has the kind {kind!r}; allowed: "
                               f"{', '.join(S.FOR_KINDS)}")
        return self.loops.serial(s, hint=s.hint or None)
