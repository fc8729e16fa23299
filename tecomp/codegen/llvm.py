"""LLVM code generation: loop IR (PrimFunc) -> LLVM IR text -> optimized machine code.

We write LLVM IR as text and hand it to llvmlite's parser. Text gives direct access to
everything the generated code needs (function attributes, loop and alias metadata,
masked/gather intrinsics with their current signatures) and is several times faster to
produce than llvmlite's IR builder, which matters when the autotuner builds thousands
of candidates.

Calling convention. Every PrimFunc ``f`` becomes one exported entry point::

    i32 @f(ptr %args, ptr %sizes)   ; args: one pointer per buffer param, in order
                                    ; sizes: one i64 per symbolic size (PrimFunc.size_vars)

returning 0, or -1 when a heap allocation failed. The runtime validates every argument
before the call, so generated code never checks bounds.

Aliasing assumption. Parameter buffers are distinct, non-overlapping arrays (the
runtime rejects an output that overlaps another argument), so each access carries
scoped-noalias metadata saying it aliases no other parameter. This survives outlining of
parallel loops, where parameter pointers travel through a closure struct.

Loop kinds:

- ``vectorized`` with a constant extent: the body is emitted once with LLVM vector types
  (``llvm_vectorize``-style lane emission below). Integer index expressions are kept as
  *ramps* (base + stride * lane) while they are affine in the loop variable, so a load
  with stride 1 is one contiguous vector load, stride 0 a scalar (+ broadcast), anything
  else a gather (stores: vector store / scatter). A lane-dependent condition becomes a
  mask (``llvm.masked.load/store/gather/scatter``), which is how split tails stay
  correct. A body that cannot be vectorized safely (inner serial loops, allocations,
  stores to a lane-invariant address) is emitted as a scalar loop tagged with
  ``llvm.loop.vectorize.enable``.
- ``unrolled`` with a constant extent: the body is emitted ``extent`` times with the loop
  variable a constant (register-blocked accumulators then become SSA values).
- ``parallel``: the body is outlined into ``void f.parN(ptr closure)`` and run by libgomp
  ``GOMP_parallel``; each thread takes a static contiguous chunk. A parallel loop inside
  a parallel region runs serially.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import sys
import threading
from dataclasses import dataclass

from ..errors import CodegenError, TargetError, UnsupportedOpError
from ..ir import dtype as dt
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.functor import post_order_visit
from ..target import Target, as_target
from . import llvm_types as T

#: Largest constant-size allocation (bytes) placed on the stack; bigger ones use the heap.
STACK_LIMIT_BYTES = 32 * 1024
#: Widest single vector emitted; wider constant vectorized loops are strip-mined.
MAX_LANES = 64
STRIP_LANES = 16
#: Unrolled loops longer than this become loops with llvm.loop.unroll.full metadata.
MAX_UNROLL = 512

_SIGNED_INT = ("int8", "int16", "int32", "int64")


# ---- values ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Val:
    """An LLVM value: ``ref`` (an SSA name or constant), its scalar LLVM type ``ty`` and
    ``lanes``. ``ramp`` = (base Val, stride) marks an i64 vector base + stride * lane whose
    vector form is built only when needed (``ref`` is then None)."""

    ref: str | None
    ty: str
    lanes: int = 1
    ramp: tuple | None = None

    @property
    def vty(self) -> str:
        return T.vec(self.ty, self.lanes)


# ---- analysis helpers -----------------------------------------------------------------


def _is_pure_int(e, cache) -> bool:
    """Whether ``e`` is signed-integer arithmetic over variables and constants only (index
    arithmetic), which we evaluate in i64."""
    r = cache.get(id(e))
    if r is not None:
        return r
    t = type(e)
    if e.dtype not in _SIGNED_INT:
        r = False
    elif t in (E.Var, E.IntImm):
        r = True
    elif t in (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max):
        r = _is_pure_int(e.a, cache) and _is_pure_int(e.b, cache)
    elif t is E.Cast:
        r = e.value.dtype in _SIGNED_INT and _is_pure_int(e.value, cache)
    else:
        r = False
    cache[id(e)] = r
    return r


def _has_unsafe(e) -> bool:
    """Whether evaluating ``e`` could fault when it should not have been evaluated."""
    found = False

    def fn(n):
        nonlocal found
        if isinstance(n, E.Load) or (
            isinstance(n, (E.FloorDiv, E.FloorMod)) and not isinstance(n.b, E.IntImm)
        ):
            found = True

    post_order_visit(e, fn)
    return found


def _skey(e):
    """A structural key of an expression (variables by identity)."""
    t = type(e)
    if t is E.Var:
        return ("v", id(e))
    if t in (E.IntImm, E.FloatImm):
        return ("c", e.value, e.dtype)
    if t is E.Load:
        return ("L", id(e.buffer), _skey(e.index))
    parts = [t.__name__, getattr(e, "dtype", None)]
    for f in ("a", "b", "value", "cond", "true_value", "false_value", "body", "var"):
        if hasattr(e, f):
            parts.append(_skey(getattr(e, f)))
    if t is E.Call:
        parts.append(e.name)
        parts.extend(_skey(a) for a in e.args)
    return tuple(parts)


def _buffer_key(buf):
    return buf.data if buf.data is not None else buf


def _vectorizable(body, loop_var) -> bool:
    """Whether a vectorized loop body can be emitted lane-parallel, preserving the serial
    semantics: only stores/ifs/lets/unrolled loops, every store address varies with the
    lane, and a stored buffer is only read at an address it is also stored to."""
    varying = {loop_var}
    ok = True
    stores: dict = {}
    loads: list = []

    def uses_varying(e):
        found = False

        def fn(n):
            nonlocal found
            if isinstance(n, E.Var) and n in varying:
                found = True

        post_order_visit(e, fn)
        return found

    def collect_loads(e):
        def fn(n):
            if isinstance(n, E.Load):
                loads.append(n)
            elif isinstance(n, E.Let) and uses_varying(n.value):
                varying.add(n.var)

        post_order_visit(e, fn)

    def walk(s):
        nonlocal ok
        if not ok:
            return
        t = type(s)
        if t is S.SeqStmt:
            for x in s.seq:
                walk(x)
        elif t is S.Store:
            collect_loads(s.value)
            collect_loads(s.index)
            if not uses_varying(s.index):
                ok = False
                return
            stores.setdefault(_buffer_key(s.buffer), set()).add(_skey(s.index))
        elif t is S.IfThenElse:
            collect_loads(s.condition)
            walk(s.then_case)
            if s.else_case is not None:
                walk(s.else_case)
        elif t is S.LetStmt:
            collect_loads(s.value)
            if uses_varying(s.value):
                varying.add(s.var)
            walk(s.body)
        elif t is S.Evaluate:
            pass
        elif t is S.For:
            ext = E.const_value(s.extent)
            if s.kind != "unrolled" or ext is None or ext > MAX_UNROLL:
                ok = False
                return
            collect_loads(s.min)
            walk(s.body)
        else:
            ok = False

    walk(body)
    if not ok:
        return False
    for ld in loads:
        keys = stores.get(_buffer_key(ld.buffer))
        if keys is not None and _skey(ld.index) not in keys:
            return False
    return True


# ---- per-function emission state -------------------------------------------------------


class _Fn:
    def __init__(self, name: str, header: str, is_entry: bool, err_ptr: str | None = None):
        self.name = name
        self.header = header
        self.lines: list = ["entry:"]
        self.allocas: list = []
        self.label = "entry"
        self.is_entry = is_entry  # returns i32 (entry point) or void (outlined body)
        self.err_ptr = err_ptr  # outlined bodies report allocation failure through this
        self.heap: list = []  # live heap pointers, freed on the failure path

    def text(self) -> str:
        body = [self.lines[0]] + ["  " + a for a in self.allocas] + self.lines[1:]
        return self.header + " {\n" + "\n".join(body) + "\n}\n"


class _Emitter:
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
        self.fn: _Fn | None = None
        self.lanes = 1
        self.mask: Val | None = None
        self.par_depth = 0
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

    # ---- vectors ----------------------------------------------------------------------

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
        lanes = max(v.lanes for v in vals)
        return tuple(self.bcast(self.mat(v), lanes) for v in vals)

    def true_mask(self, lanes: int) -> Val:
        return self.const(True, "bool", lanes)

    # ---- expressions: value mode ------------------------------------------------------

    def ev(self, e) -> Val:
        """``e`` evaluated in its own dtype (vector when it varies across lanes)."""
        if _is_pure_int(e, self.pure_cache) and not isinstance(e, E.IntImm):
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
        if e.dtype in _SIGNED_INT:
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
        st, dty = T.scalar_type(src), T.scalar_type(dst)
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
        vt, n, ty = a.vty, a.lanes, a.ty
        bc = E.const_value(e.b) if e is not None else None
        if self.mask is not None and bc is None and b.lanes == self.mask.lanes:
            # Masked-off lanes may hold garbage divisors; make them 1 so nothing traps.
            one = self.const(1, d, n)
            b = self.val(f"select {self.mask.vty} {self.mask.ref}, {vt} {b.ref}, {vt} {one.ref}", ty, n)
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
            return self.val(f"select {fix.vty} {fix.ref}, {vt} {qm.ref}, {vt} {q.ref}", ty, n)
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
        if d in _SIGNED_INT:
            a, b = self.ev_idx(e.a), self.ev_idx(e.b)
            if (a.ramp is not None) != (b.ramp is not None) and max(a.lanes, b.lanes) > 1:
                if (a.ramp is None and a.lanes == 1) or (b.ramp is None and b.lanes == 1):
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

    _FLIP = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "EQ": "EQ", "NE": "NE"}

    def ramp_cmp(self, name: str, a: Val, b: Val) -> Val:
        """Compare a ramp with a scalar lane-wise in i32: base + s*lane OP x  <=>
        s*lane OP x - base. A tail guard then costs one 32-bit vector compare."""
        if a.ramp is None:
            a, b, name = b, a, self._FLIP[name]
        base, stride = a.ramp
        n = a.lanes
        d = self.add_i64("sub", b, base)
        self.declare("@llvm.smin.i64", "declare i64 @llvm.smin.i64(i64, i64)")
        self.declare("@llvm.smax.i64", "declare i64 @llvm.smax.i64(i64, i64)")
        d = self.val(f"call i64 @llvm.smax.i64(i64 {d.ref}, i64 -2147483648)", "i64")
        d = self.val(f"call i64 @llvm.smin.i64(i64 {d.ref}, i64 2147483647)", "i64")
        d = self.val(f"trunc i64 {d.ref} to i32", "i32")
        d = self.bcast(d, n)
        steps = "<" + ", ".join(f"i32 {k * stride}" for k in range(n)) + ">"
        pred = {"EQ": "eq", "NE": "ne", "LT": "slt", "LE": "sle", "GT": "sgt", "GE": "sge"}
        return self.val(f"icmp {pred[name]} <{n} x i32> {steps}, {d.ref}", "i1", n)

    ev_EQ = ev_NE = ev_LT = ev_LE = ev_GT = ev_GE = ev_And = ev_Or = _cmp

    def logical(self, e):
        op = "and" if type(e) is E.And else "or"
        a = self.ev(e.a)
        if not _has_unsafe(e.b):
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

    def with_mask(self, cond: Val, fn):
        old = self.mask
        if old is not None:
            cond, m = self.unify(cond, old)
            cond = self.val(f"and {cond.vty} {cond.ref}, {m.ref}", "i1", cond.lanes)
        self.mask = self.bcast(cond, self.lanes) if self.lanes > 1 else None
        try:
            return fn()
        finally:
            self.mask = old

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
        return self.val(f"phi {tv.vty} [ {tv.ref}, %{end_t} ], [ {fv.ref}, %{end_f} ]", tv.ty, lanes)

    def _lanes_of(self, e) -> int:
        """Lane count a lazily evaluated sub-expression may produce in this context."""
        return self.lanes if (self.mask is not None or self._varies(e)) else 1

    def ev_Select(self, e):
        c = self.ev(e.cond)
        unsafe = _has_unsafe(e.true_value) or _has_unsafe(e.false_value)
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

    def _varies(self, e) -> bool:
        if self.lanes == 1:
            return False
        found = False

        def fn(n):
            nonlocal found
            if isinstance(n, E.Var) and n in self.env and self.env[n].lanes > 1:
                found = True

        post_order_visit(e, fn)
        return found

    def ev_Let(self, e):
        v = self.ev_idx(e.value) if e.var.dtype in _SIGNED_INT else self.ev(e.value)
        old = self.env.get(e.var)
        self.env[e.var] = v
        try:
            return self.ev(e.body)
        finally:
            if old is None:
                self.env.pop(e.var, None)
            else:
                self.env[e.var] = old

    # ---- math intrinsics --------------------------------------------------------------

    _LLVM_MATH = {
        "exp": "exp", "log": "log", "sqrt": "sqrt", "fabs": "fabs", "floor": "floor",
        "ceil": "ceil", "round": "roundeven", "trunc": "trunc", "pow": "pow", "sin": "sin",
        "cos": "cos", "exp2": "exp2", "log2": "log2", "log10": "log10", "tanh": "tanh",
    }
    _LIBM = {"erf": ("erff", "erf")}

    def intrinsic(self, name: str, ty: str, lanes: int, args) -> Val:
        sfx = T.suffix(ty, lanes)
        fname = f"@llvm.{name}.{sfx}"
        vt = T.vec(ty, lanes)
        self.declare(fname, f"declare {vt} {fname}({', '.join([vt] * len(args))})")
        argl = ", ".join(f"{vt} {a.ref}" for a in args)
        return self.val(f"call {vt} {fname}({argl})", ty, lanes)

    def ev_Call(self, e):
        name = e.name
        d = e.dtype
        if not dt.is_float(d):
            raise UnsupportedOpError(f"intrinsic {name} on {d} is not supported ({e})")
        args = self.unify(*[self.ev(a) for a in e.args])
        n = args[0].lanes
        ty = args[0].ty
        if name == "sigmoid":  # 1 / (1 + exp(-x)), IEEE (no fast-math)
            x = args[0]
            neg = self.val(f"fneg {x.vty} {x.ref}", ty, n)
            ex = self.intrinsic("exp", ty, n, [neg])
            one = self.const(1.0, d, n)
            den = self.val(f"fadd {x.vty} {one.ref}, {ex.ref}", ty, n)
            return self.val(f"fdiv {x.vty} {one.ref}, {den.ref}", ty, n)
        if name == "rsqrt":
            x = args[0]
            s = self.intrinsic("sqrt", ty, n, [x])
            one = self.const(1.0, d, n)
            return self.val(f"fdiv {x.vty} {one.ref}, {s.ref}", ty, n)
        if name in self._LLVM_MATH:
            return self.intrinsic(self._LLVM_MATH[name], ty, n, list(args))
        if name in self._LIBM:
            return self.libm_call(self._LIBM[name], d, args)
        raise UnsupportedOpError(
            f"intrinsic {name!r} is not supported by the LLVM code generator; supported: "
            f"{', '.join(sorted(set(self._LLVM_MATH) | set(self._LIBM) | {'sigmoid', 'rsqrt'}))}"
        )

    def libm_call(self, names, d: str, args) -> Val:
        """Call a libm function lane by lane (float16 goes through float)."""
        fname, dname = names
        use = dname if d == "float64" else fname
        cty = "double" if d == "float64" else "float"
        self.declare(f"@{use}", f"declare {cty} @{use}({', '.join([cty] * len(args))}) nounwind readnone")
        n = args[0].lanes
        ty = args[0].ty
        out = None
        for k in range(n):
            lane_args = []
            for a in args:
                x = a if n == 1 else self.val(f"extractelement {a.vty} {a.ref}, i64 {k}", ty)
                if ty != cty:
                    x = self.val(f"fpext {ty} {x.ref} to {cty}", cty)
                lane_args.append(x)
            r = self.val(f"call {cty} @{use}({', '.join(f'{cty} {x.ref}' for x in lane_args)})", cty)
            if ty != cty:
                r = self.val(f"fptrunc {cty} {r.ref} to {ty}", ty)
            if n == 1:
                return r
            base = "poison" if out is None else out.ref
            out = self.val(f"insertelement {T.vec(ty, n)} {base}, {ty} {r.ref}, i64 {k}", ty, n)
        return out

    # ---- expressions: index mode (i64, ramps) -----------------------------------------

    def ev_idx(self, e) -> Val:
        """A signed-integer expression evaluated in i64; affine lane dependence is kept as
        a ramp so memory accesses can be classified (contiguous / broadcast / gather)."""
        t = type(e)
        if t is E.IntImm:
            return self.i64(e.value)
        if not _is_pure_int(e, self.pure_cache):
            v = self.mat(self.ev(e))
            if e.dtype == "int64":
                return v
            return self.int_convert(v, e.dtype, "int64")
        if t is E.Var:
            return self.lookup(e)
        if t is E.Cast:
            return self.ev_idx(e.value)
        a, b = self.ev_idx(e.a), self.ev_idx(e.b)
        if t in (E.Add, E.Sub):
            op = "add" if t is E.Add else "sub"
            sgn = 1 if t is E.Add else -1
            if a.lanes == 1 and b.lanes == 1:
                return self.add_i64(op, a, b)
            if (a.ramp or a.lanes == 1) and (b.ramp or b.lanes == 1):
                lanes = max(a.lanes, b.lanes)
                ab, asd = a.ramp if a.ramp else (a, 0)
                bb, bsd = b.ramp if b.ramp else (b, 0)
                base = self.add_i64(op, ab, bb)
                return Val(None, "i64", lanes, (base, asd + sgn * bsd))
        if t is E.Mul:
            for x, y in ((a, b), (b, a)):
                if x.ramp and y.lanes == 1 and y.ref.lstrip("-").isdigit():
                    c = int(y.ref)
                    base = self.add_i64("mul", x.ramp[0], y)
                    return Val(None, "i64", x.lanes, (base, x.ramp[1] * c))
            if a.lanes == 1 and b.lanes == 1:
                return self.add_i64("mul", a, b)
        if t in (E.Add, E.Sub, E.Mul):
            a, b = self.unify(a, b)
            op = {E.Add: "add", E.Sub: "sub", E.Mul: "mul"}[t]
            return self.val(f"{op} nsw {a.vty} {a.ref}, {b.ref}", "i64", a.lanes)
        a, b = self.unify(a, b)
        if t in (E.Min, E.Max):
            return self.intrinsic("smin" if t is E.Min else "smax", "i64", a.lanes, [a, b])
        return self.floordivmod(t is E.FloorDiv, a, b, "int64", e)

    def add_i64(self, op: str, a: Val, b: Val) -> Val:
        """Scalar i64 arithmetic with constant folding (keeps ramps' bases simple)."""
        if a.ref.lstrip("-").isdigit() and b.ref.lstrip("-").isdigit():
            x, y = int(a.ref), int(b.ref)
            return self.i64({"add": x + y, "sub": x - y, "mul": x * y}[op])
        if op in ("add", "sub") and b.ref == "0":
            return a
        if op == "add" and a.ref == "0":
            return b
        if op == "mul" and (a.ref == "1" or b.ref == "1"):
            return b if a.ref == "1" else a
        return self.val(f"{op} nsw i64 {a.ref}, {b.ref}", "i64")

    # ---- bounds (for cheaper floor division) ------------------------------------------

    def nonneg(self, e) -> bool:
        lo = self.lower_bound(e)
        return lo is not None and lo >= 0

    def lower_bound(self, e):
        t = type(e)
        if t is E.IntImm:
            return e.value
        if t is E.Var:
            return self.bounds.get(e)
        if t is E.Cast:
            return self.lower_bound(e.value) if e.value.dtype in _SIGNED_INT else None
        if t in (E.Add, E.Mul, E.Min, E.Max, E.FloorDiv):
            la, lb = self.lower_bound(e.a), self.lower_bound(e.b)
            if la is None or lb is None:
                if t is E.Max and (la is not None and la >= 0 or lb is not None and lb >= 0):
                    return 0
                return None
            if t is E.Add:
                return la + lb
            if t is E.Mul:
                return la * lb if la >= 0 and lb >= 0 else None
            if t is E.Min:
                return min(la, lb)
            if t is E.Max:
                return max(la, lb)
            return la // lb if la >= 0 and lb > 0 else None
        if t is E.FloorMod:
            bc = E.const_value(e.b)
            return 0 if bc is not None and bc > 0 else None
        return None

    # ---- memory -------------------------------------------------------------------------

    def buf(self, buffer):
        key = _buffer_key(buffer)
        try:
            return self.bufs[key]
        except KeyError:
            raise CodegenError(
                f"buffer {buffer.name!r} is accessed outside the region where it is allocated "
                f"(not a parameter of the function, nor inside its Allocate)"
            ) from None

    def alias_md(self, buffer) -> str:
        info = self.alias.get(_buffer_key(buffer))
        if info is None:
            return ""
        return f", !alias.scope {info[0]}, !noalias {info[1]}"

    def ev_Load(self, e):
        ptr = self.buf(e.buffer)
        d = e.dtype
        mt = T.mem_type(d)
        eb = T.elem_bytes(d)
        md = self.alias_md(e.buffer)
        idx = self.ev_idx(e.index)
        if idx.lanes == 1:
            p = self.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {idx.ref}", "ptr")
            if self.mask is not None:
                # A lane-invariant load under a lane mask: only load if some lane is on.
                v = self.gather(mt, Val(p.ref, "ptr"), self.mask, md, eb)
            else:
                v = self.val(f"load {mt}, ptr {p.ref}, align {eb}{md}", mt)
        elif idx.ramp is not None and idx.ramp[1] == 1:
            n = idx.lanes
            p = self.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {idx.ramp[0].ref}", "ptr")
            vt = T.vec(mt, n)
            if self.mask is None:
                v = self.val(f"load {vt}, ptr {p.ref}, align {eb}{md}", mt, n)
            else:
                fn = f"@llvm.masked.load.{T.suffix(mt, n)}.p0"
                self.declare(fn, f"declare {vt} {fn}(ptr, <{n} x i1>, {vt})")
                v = self.val(
                    f"call {vt} {fn}(ptr align {eb} {p.ref}, <{n} x i1> {self.mask.ref}, "
                    f"{vt} zeroinitializer){md}",
                    mt,
                    n,
                )
        else:
            idx = self.mat(idx)
            n = idx.lanes
            ps = self.val(
                f"getelementptr inbounds {mt}, ptr {ptr}, <{n} x i64> {idx.ref}", "ptr", n
            )
            m = self.mask if self.mask is not None else self.true_mask(n)
            v = self.gather(mt, ps, m, md, eb)
        if d == "bool":
            z = self.const(0, "int8", v.lanes)
            return self.val(f"icmp ne {v.vty} {v.ref}, {z.ref}", "i1", v.lanes)
        return v

    def gather(self, mt, ptrs: Val, mask: Val, md: str, eb: int) -> Val:
        n = mask.lanes
        ptrs = self.bcast(ptrs, n)
        vt = T.vec(mt, n)
        fn = f"@llvm.masked.gather.{T.suffix(mt, n)}.v{n}p0"
        self.declare(fn, f"declare {vt} {fn}(<{n} x ptr>, <{n} x i1>, {vt})")
        return self.val(
            f"call {vt} {fn}(<{n} x ptr> align {eb} {ptrs.ref}, <{n} x i1> {mask.ref}, "
            f"{vt} zeroinitializer){md}",
            mt,
            n,
        )

    def store(self, s: S.Store) -> None:
        ptr = self.buf(s.buffer)
        d = s.buffer.dtype
        mt = T.mem_type(d)
        eb = T.elem_bytes(d)
        md = self.alias_md(s.buffer)
        v = self.mat(self.ev(s.value))
        if s.value.dtype != d:
            raise CodegenError(
                f"store of a {s.value.dtype} value into {d} buffer {s.buffer.name!r}"
            )
        idx = self.ev_idx(s.index)
        if idx.lanes == 1 and v.lanes == 1:
            if d == "bool":
                v = self.val(f"zext i1 {v.ref} to i8", "i8")
            p = self.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {idx.ref}", "ptr")
            if self.mask is not None:
                raise CodegenError("internal: lane-invariant store in a masked region")
            self.emit(f"store {mt} {v.ref}, ptr {p.ref}, align {eb}{md}")
            return
        n = max(idx.lanes, v.lanes)
        v = self.bcast(v, n)
        if d == "bool":
            v = self.val(f"zext <{n} x i1> {v.ref} to <{n} x i8>", "i8", n)
        vt = T.vec(mt, n)
        if idx.ramp is not None and idx.ramp[1] == 1:
            p = self.val(f"getelementptr inbounds {mt}, ptr {ptr}, i64 {idx.ramp[0].ref}", "ptr")
            if self.mask is None:
                self.emit(f"store {vt} {v.ref}, ptr {p.ref}, align {eb}{md}")
            else:
                fn = f"@llvm.masked.store.{T.suffix(mt, n)}.p0"
                self.declare(fn, f"declare void {fn}({vt}, ptr, <{n} x i1>)")
                self.emit(
                    f"call void {fn}({vt} {v.ref}, ptr align {eb} {p.ref}, "
                    f"<{n} x i1> {self.mask.ref}){md}"
                )
            return
        idx = self.bcast(self.mat(idx), n)
        ps = self.val(f"getelementptr inbounds {mt}, ptr {ptr}, <{n} x i64> {idx.ref}", "ptr", n)
        m = self.mask if self.mask is not None else self.true_mask(n)
        fn = f"@llvm.masked.scatter.{T.suffix(mt, n)}.v{n}p0"
        self.declare(fn, f"declare void {fn}({vt}, <{n} x ptr>, <{n} x i1>)")
        self.emit(
            f"call void {fn}({vt} {v.ref}, <{n} x ptr> align {eb} {ps.ref}, "
            f"<{n} x i1> {m.ref}){md}"
        )

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
        pass  # expressions are pure

    def st_LetStmt(self, s):
        v = self.ev_idx(s.value) if s.var.dtype in _SIGNED_INT else self.ev(s.value)
        self.env[s.var] = v
        if s.var.dtype in _SIGNED_INT:
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

    def st_Allocate(self, s):
        b = s.buffer
        if b.scope == "shared":
            raise CodegenError(
                f"buffer {b.name!r} has scope 'shared', which only CUDA targets support; "
                f"allowed on llvm: 'global', 'local'"
            )
        mt = T.mem_type(b.dtype)
        eb = T.elem_bytes(b.dtype)
        const_elems = 1
        for x in b.shape:
            c = E.const_value(x)
            if c is None:
                const_elems = None
                break
            const_elems *= int(c)
        key = _buffer_key(b)
        self.alias_scope(b)
        if const_elems is not None and const_elems * eb <= STACK_LIMIT_BYTES:
            name = f"%buf.{_ident(b.name)}.{next(self.tmp)}"
            self.fn.allocas.append(f"{name} = alloca {mt}, i64 {max(const_elems, 1)}, align 64")
            self.bufs[key] = name
            self.stmt(s.body)
            return
        # Heap: symbolic or large. aligned_alloc needs a size that is a multiple of 64.
        nbytes = self.i64(eb)
        for x in b.shape:
            nbytes = self.add_i64("mul", nbytes, self.mat(self.ev_idx(x)))
        r = self.add_i64("add", nbytes, self.i64(63))
        r = self.val(f"and i64 {r.ref}, -64", "i64")
        r = self.val(f"call i64 @llvm.umax.i64(i64 {r.ref}, i64 64)", "i64")
        self.declare("@llvm.umax.i64", "declare i64 @llvm.umax.i64(i64, i64)")
        self.declare("@aligned_alloc", "declare noalias ptr @aligned_alloc(i64, i64) nounwind")
        self.declare("@free", "declare void @free(ptr) nounwind")
        p = self.val(f"call noalias ptr @aligned_alloc(i64 64, i64 {r.ref})", "ptr")
        isnull = self.val(f"icmp eq ptr {p.ref}, null", "i1")
        lfail, lok = self.new_label("alloc.fail"), self.new_label("alloc.ok")
        self.emit(f"br i1 {isnull.ref}, label %{lfail}, label %{lok}")
        self.start_block(lfail)
        self.fail_path()
        self.start_block(lok)
        self.bufs[key] = p.ref
        self.fn.heap.append(p.ref)
        self.stmt(s.body)
        self.fn.heap.pop()
        self.emit(f"call void @free(ptr {p.ref})")
        del self.bufs[key]

    def fail_path(self) -> None:
        """Free live heap buffers of this function and report failure."""
        for p in reversed(self.fn.heap):
            self.emit(f"call void @free(ptr {p})")
        if self.fn.is_entry:
            self.emit("ret i32 -1")
        else:
            self.emit(f"store atomic i32 1, ptr {self.fn.err_ptr} monotonic, align 4")
            self.emit("ret void")

    def alias_scope(self, b) -> None:
        key = _buffer_key(b)
        if key in self.alias:
            return
        scope = self._new_md(f'distinct !{{{{!{{id}}, {self.domain}, !"{_ident(b.name)}"}}}}')
        self.scopes.append(scope)
        slist = self._new_md(f"!{{{{{scope}}}}}")
        # The noalias list is filled in when the whole function is known.
        idx = len(self.md)
        i = next(self.md_count)
        self.md.append(None)
        self.alias[key] = (slist, f"!{i}")
        self.pending_noalias.append((idx, i, scope))

    def st_For(self, s):
        kind = s.kind
        ext = E.const_value(s.extent)
        if kind == "thread_binding":
            raise CodegenError(
                f"loop {s.loop_var.name!r} is bound to GPU thread {s.thread_tag!r}; "
                f"thread binding needs a cuda target"
            )
        if kind == "vectorized":
            if ext is not None and self.lanes == 1 and ext >= 1:
                if _vectorizable(s.body, s.loop_var):
                    return self.vector_loop(s, int(ext))
            return self.serial_loop(s, hint="vectorize")
        if kind == "unrolled":
            if ext is not None and ext <= MAX_UNROLL:
                return self.unrolled(s, int(ext))
            return self.serial_loop(s, hint="unroll")
        if kind == "parallel" and self.par_depth == 0 and self.lanes == 1:
            return self.parallel_loop(s)
        return self.serial_loop(s)

    def bind_loop_var(self, var, v: Val, lo=None):
        self.env[var] = v
        if lo is not None:
            self.bounds[var] = lo
        else:
            self.bounds.pop(var, None)

    def unrolled(self, s, ext: int):
        mn = self.ev_idx(s.min)
        lo = self.lower_bound(s.min)
        for k in range(ext):
            self.bind_loop_var(s.loop_var, self.add_i64("add", mn, self.i64(k)), lo)
            self.stmt(s.body)

    def vector_loop(self, s, ext: int):
        mn = self.ev_idx(s.min)
        lo = self.lower_bound(s.min)
        if ext <= MAX_LANES:
            return self.vector_body(s, mn, ext, lo)
        # Strip-mine a long vector loop into STRIP_LANES-wide pieces plus one tail piece.
        chunks, tail = divmod(ext, STRIP_LANES)

        def emit_chunk(vo: Val):
            base = self.add_i64("add", mn, self.add_i64("mul", vo, self.i64(STRIP_LANES)))
            self.vector_body(s, base, STRIP_LANES, lo)

        self.counted_loop(self.i64(0), self.i64(chunks), emit_chunk, s.loop_var.name + ".vo", None)
        if tail:
            base = self.add_i64("add", mn, self.i64(chunks * STRIP_LANES))
            self.vector_body(s, base, tail, lo)

    def vector_body(self, s, base: Val, lanes: int, lo):
        old_lanes, old_mask = self.lanes, self.mask
        self.lanes = lanes
        self.mask = None
        self.bind_loop_var(s.loop_var, Val(None, "i64", lanes, (base, 1)), lo)
        try:
            self.stmt(s.body)
        finally:
            self.lanes, self.mask = old_lanes, old_mask

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
        iv = f"%{_ident(name)}.{next(self.tmp)}"
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

    # ---- parallel -----------------------------------------------------------------------

    def parallel_loop(self, s):
        """Outline the loop into ``void f.parN(ptr closure)`` and run it on libgomp."""
        vars_used, bufs_used = _free_refs(s)
        captured_vars = [v for v in vars_used if v in self.env and v is not s.loop_var]
        captured_bufs = [(k, self.bufs[k]) for k in bufs_used if k in self.bufs]
        mn = self.ev_idx(s.min)
        ext = self.ev_idx(s.extent)
        # Closure: err flag ptr, buffers, then variables (i64 or their own type), min, extent.
        fields = [("err", "ptr", self.fn.err_ptr if not self.fn.is_entry else None)]
        fields += [(("buf", k), "ptr", ref) for k, ref in captured_bufs]
        for v in captured_vars:
            val = self.mat(self.env[v])
            fields.append((("var", v), val.vty, val.ref))
        fields += [("min", "i64", mn.ref), ("ext", "i64", ext.ref)]
        sty = "{" + ", ".join(f[1] for f in fields) + "}"
        cl = f"%closure.{next(self.tmp)}"
        self.fn.allocas.append(f"{cl} = alloca {sty}, align 8")
        err = None
        if self.fn.is_entry:
            err = f"%par.err.{next(self.tmp)}"
            self.fn.allocas.append(f"{err} = alloca i32, align 4")
            self.emit(f"store i32 0, ptr {err}, align 4")
            fields[0] = ("err", "ptr", err)
        for i, (_, ty, ref) in enumerate(fields):
            p = self.val(f"getelementptr inbounds {sty}, ptr {cl}, i32 0, i32 {i}", "ptr")
            self.emit(f"store {ty} {ref}, ptr {p.ref}")
        outlined = f"{self.fn.name}.par{next(self.par_count)}"
        self.declare(
            "@GOMP_parallel", "declare void @GOMP_parallel(ptr, ptr, i32, i32) nounwind"
        )
        self.emit(f"call void @GOMP_parallel(ptr @{outlined}, ptr {cl}, i32 0, i32 0)")
        if err is not None:
            ev = self.val(f"load i32, ptr {err}, align 4", "i32")
            bad = self.val(f"icmp ne i32 {ev.ref}, 0", "i1")
            lfail, lok = self.new_label("par.fail"), self.new_label("par.ok")
            self.emit(f"br i1 {bad.ref}, label %{lfail}, label %{lok}")
            self.start_block(lfail)
            self.fail_path()
            self.start_block(lok)
        self.emit_outlined(outlined, s, fields, sty)

    def emit_outlined(self, name: str, s, fields, sty: str):
        saved = (self.fn, self.env, self.bufs, self.bounds)
        fn = _Fn(
            name,
            f"define internal void @{_quote(name)}(ptr noalias nocapture readonly %cl) "
            f"{self.fn_attrs}",
            is_entry=False,
        )
        self.fn = fn
        self.env, self.bufs, self.bounds = {}, {}, dict(saved[3])
        self.par_depth += 1
        try:
            vals = {}
            for i, (key, ty, _) in enumerate(fields):
                p = self.val(f"getelementptr inbounds {sty}, ptr %cl, i32 0, i32 {i}", "ptr")
                vals[i] = self.val(f"load {ty}, ptr {p.ref}", ty)
                if key == "err":
                    fn.err_ptr = vals[i].ref
                elif key[0] == "buf":
                    self.bufs[key[1]] = vals[i].ref
                elif key[0] == "var":
                    lanes = saved[1][key[1]].lanes
                    base_ty = ty.split(" x ")[-1].rstrip(">") if lanes > 1 else ty
                    self.env[key[1]] = Val(vals[i].ref, base_ty, lanes)
            mn, ext = vals[len(fields) - 2], vals[len(fields) - 1]
            self.declare("@omp_get_thread_num", "declare i32 @omp_get_thread_num() nounwind")
            self.declare("@omp_get_num_threads", "declare i32 @omp_get_num_threads() nounwind")
            tid = self.val("call i32 @omp_get_thread_num()", "i32")
            nth = self.val("call i32 @omp_get_num_threads()", "i32")
            tid = self.val(f"sext i32 {tid.ref} to i64", "i64")
            nth = self.val(f"sext i32 {nth.ref} to i64", "i64")
            # Static schedule: thread t runs [t*chunk, min((t+1)*chunk, ext)).
            a = self.val(f"add nsw i64 {ext.ref}, {nth.ref}", "i64")
            a = self.val(f"sub nsw i64 {a.ref}, 1", "i64")
            chunk = self.val(f"sdiv i64 {a.ref}, {nth.ref}", "i64")
            begin = self.val(f"mul nsw i64 {tid.ref}, {chunk.ref}", "i64")
            end = self.val(f"add nsw i64 {begin.ref}, {chunk.ref}", "i64")
            end = self.val(f"call i64 @llvm.smin.i64(i64 {end.ref}, i64 {ext.ref})", "i64")
            self.declare("@llvm.smin.i64", "declare i64 @llvm.smin.i64(i64, i64)")
            lo = self.lower_bound(s.min)

            def body(iv: Val):
                i = self.val(f"add nsw i64 {iv.ref}, {mn.ref}", "i64")
                self.bind_loop_var(s.loop_var, i, lo)
                self.stmt(s.body)

            self.counted_loop(begin, end, body, s.loop_var.name, None)
            self.emit("ret void")
            self.functions.append(fn)
        finally:
            self.par_depth -= 1
            self.fn, self.env, self.bufs, self.bounds = saved

    # ---- functions ----------------------------------------------------------------------

    def func(self, f: S.PrimFunc, symbol: str) -> None:
        self.env, self.bufs, self.bounds = {}, {}, {}
        self.alias, self.scopes, self.pending_noalias = {}, [], []
        self.pure_cache = {}
        self.lanes, self.mask, self.par_depth = 1, None, 0
        fn = _Fn(
            symbol,
            f"define i32 @{_quote(symbol)}(ptr noalias nocapture readonly %args, "
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
            self.bufs[_buffer_key(b)] = v.ref
            self.alias_scope(b)
        for j, sv in enumerate(f.size_vars):
            p = self.val(f"getelementptr inbounds i64, ptr %sizes, i64 {j}", "ptr")
            v = self.val(f"load i64, ptr {p.ref}, align 8", "i64")
            if sv.dtype not in _SIGNED_INT:
                v = self.int_convert(v, "int64", sv.dtype)
            self.env[sv] = v
            self.bounds[sv] = 0
        self.stmt(f.body)
        self.emit("ret i32 0")
        self.functions.append(fn)
        # Now every buffer of this function has a scope: each aliases none of the others.
        for idx, i, scope in self.pending_noalias:
            others = [x for x in self.scopes if x != scope]
            self.md[idx] = f"!{i} = !{{{', '.join(others)}}}" if others else f"!{i} = !{{}}"

    def _align_md(self, n: int) -> str:
        key = f"align{n}"
        if not hasattr(self, "_align_nodes"):
            self._align_nodes = {}
        if key not in self._align_nodes:
            self._align_nodes[key] = self._new_md(f"!{{{{i64 {n}}}}}")[1:]
        return self._align_nodes[key]

    def module_text(self, triple: str, layout: str) -> str:
        parts = [f'target triple = "{triple}"', f'target datalayout = "{layout}"', ""]
        parts += self.globals
        parts += [f.text() for f in self.functions]
        parts += list(self.decls.values())
        parts += [m for m in self.md if m is not None]
        return "\n".join(parts) + "\n"


def _free_refs(s):
    """Variables and buffer keys a statement refers to (including allocation shapes)."""
    vars_, bufs = {}, {}

    def fn(n):
        if isinstance(n, E.Var):
            vars_.setdefault(n, None)
        elif isinstance(n, (E.Load, S.Store)):
            bufs.setdefault(_buffer_key(n.buffer), None)
        elif isinstance(n, S.Allocate):
            for x in n.buffer.shape:
                post_order_visit(x, fn)

    post_order_visit(s, fn)
    return list(vars_), list(bufs)


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._" else "_" for c in name) or "v"


def _quote(name: str) -> str:
    if all(c.isalnum() or c in "._$" for c in name) and not name[0].isdigit():
        return name
    return '"' + name.replace("\\", "\\5C").replace('"', "\\22") + '"'


# ---- target machines, optimization, JIT -------------------------------------------------

_LOCK = threading.Lock()


@functools.lru_cache(maxsize=None)
def _llvm():
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


@functools.lru_cache(maxsize=None)
def libgomp_path() -> str | None:
    """Where libgomp lives (found through ctypes.util or the C compiler), or None."""
    import ctypes.util
    import subprocess

    cands = []
    try:
        out = subprocess.run(
            ["cc", "-print-file-name=libgomp.so.1"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        if out and os.path.isabs(out):
            cands.append(out)
    except (OSError, subprocess.SubprocessError):
        pass
    found = ctypes.util.find_library("gomp")
    if found:
        cands.append(found)
    cands.append("libgomp.so.1")
    import ctypes

    for c in cands:
        try:
            ctypes.CDLL(c, mode=ctypes.RTLD_GLOBAL)
            return c
        except OSError:
            continue
    return None


@functools.lru_cache(maxsize=None)
def _load_runtime_libs() -> None:
    llvm = _llvm()
    path = libgomp_path()
    if path is not None:
        llvm.load_library_permanently(path)
    import ctypes.util

    libm = ctypes.util.find_library("m")
    if libm:
        try:
            llvm.load_library_permanently(libm)
        except RuntimeError:
            pass


def target_machine(target: Target, pic: bool = False):
    return _target_machine(target.mtriple, target.mcpu, ",".join(target.mattr), pic)


def _new_target_machine(target: Target, pic: bool):
    return _target_machine.__wrapped__(target.mtriple, target.mcpu, ",".join(target.mattr), pic)


@functools.lru_cache(maxsize=64)
def _target_machine(triple: str, cpu: str, features: str, pic: bool):
    llvm = _llvm()
    try:
        t = llvm.Target.from_triple(triple)
    except RuntimeError as err:
        raise TargetError(f"LLVM has no backend for triple {triple!r}: {err}") from None
    return t.create_target_machine(
        cpu=cpu,
        features=features,
        opt=3,
        reloc="pic" if pic else "default",
        codemodel="default" if pic else "jitdefault",
    )


# A TargetMachine made before a fork crashes the child's next compile (SIGSEGV or "LLVM
# ERROR: out of memory" in forked build workers), so each process makes its own.
os.register_at_fork(after_in_child=_target_machine.cache_clear)


def function_attributes(target: Target) -> str:
    attrs = ["nounwind", f'"target-cpu"="{target.mcpu}"']
    if target.mattr:
        attrs.append(f'"target-features"="{",".join(target.mattr)}"')
    w = target.vector_width_bits
    if target.keys[1].startswith("x86"):
        # Without these LLVM splits 512-bit vectors in two on CPUs that prefer 256 bits.
        attrs.append(f'"prefer-vector-width"="{w}"')
        attrs.append(f'"min-legal-vector-width"="{w}"')
    return " ".join(attrs)


def symbol_name(func_name: str) -> str:
    """Exported symbol of a PrimFunc's entry point (prefixed so it cannot clash with libc)."""
    return "tecomp_" + _ident(func_name)


METADATA_SYMBOL = "tecomp_module_metadata"


class _JitHandle:
    """Owns a JIT engine and the LLVM context its module lives in.

    The context must be disposed after the engine. Both are often freed by the cyclic
    garbage collector (modules and their functions reference each other), which runs
    finalizers in no particular order, so the context's own finalizer is disabled and the
    context is disposed here, after closing the engine (closing twice is a no-op)."""

    def __init__(self, engine, context):
        self.engine = engine
        self.context = context
        self._ctx_ptr = context._ptr
        context._owned = True  # its __del__ must not dispose it

    def __del__(self):
        if sys.is_finalizing():
            return
        engine = self.__dict__.pop("engine", None)
        ptr = self.__dict__.pop("_ctx_ptr", None)
        try:
            if engine is not None:
                engine.close()
            if ptr is not None:
                _llvm().ffi.lib.LLVMPY_ContextDispose(ptr)
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


@dataclass
class LLVMArtifact:
    """What ``build_llvm`` produces: optimized IR, function metadata and, for the host, a
    JIT engine with the entry points' addresses."""

    target: Target
    ir_text: str  # optimized
    funcs: list  # per-function metadata dicts (see function_metadata)
    engine: object = None  # _JitHandle
    addresses: dict = None
    compile_seconds: float = 0.0

    def asm(self) -> str:
        llvm = _llvm()
        mod = llvm.parse_assembly(self.ir_text)
        return target_machine(self.target, pic=True).emit_assembly(mod)

    def object_code(self) -> bytes:
        llvm = _llvm()
        mod = llvm.parse_assembly(self.ir_text)
        return target_machine(self.target, pic=True).emit_object(mod)


def _expr_json(e):
    """A size expression as JSON: an int, a variable name, or [op, a, b]."""
    if isinstance(e, E.IntImm):
        return int(e.value)
    if isinstance(e, E.Var):
        return e.name
    ops = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%",
           E.Min: "min", E.Max: "max"}
    op = ops.get(type(e))
    if op is None:
        raise CodegenError(f"a parameter shape uses {e}, which the runtime cannot evaluate")
    return [op, _expr_json(e.a), _expr_json(e.b)]


def function_metadata(f: S.PrimFunc) -> dict:
    """Names, dtypes, shapes (with symbolic names) and written-ness of a function's params."""
    written = set()

    def fn(n):
        if isinstance(n, S.Store):
            written.add(_buffer_key(n.buffer))

    post_order_visit(f.body, fn)
    size_vars = f.size_vars
    names = [v.name for v in size_vars]
    if len(set(names)) != len(names):
        raise CodegenError(f"function {f.name!r} has two different symbolic sizes named alike: {names}")
    bare = {s for b in f.params for s in b.shape if isinstance(s, E.Var)}
    for v in size_vars:
        if v not in bare:
            raise CodegenError(
                f"symbolic size {v.name!r} of {f.name!r} never appears alone as a dimension "
                f"of a parameter, so it cannot be bound from the arguments' shapes"
            )
    return {
        "name": f.name,
        "symbol": symbol_name(f.name),
        "size_vars": names,
        "params": [
            {
                "name": b.name,
                "dtype": b.dtype,
                "shape": [_expr_json(s) for s in b.shape],
                "output": _buffer_key(b) in written,
            }
            for b in f.params
        ],
    }


def build_llvm(funcs, target="llvm") -> LLVMArtifact:
    """Compile PrimFuncs for an LLVM target.

    Parameters
    ----------
    funcs : list of PrimFunc
    target : Target or str

    Returns
    -------
    LLVMArtifact
        Optimized IR, per-function argument metadata and, when the target runs on this
        machine, a JIT engine with entry-point addresses (``i32 sym(ptr args, ptr sizes)``).

    Raises
    ------
    CodegenError, UnsupportedOpError
        For IR the generator cannot compile (message names the node/buffer/variable).
    """
    import time

    t0 = time.perf_counter()
    target = as_target(target)
    if target.kind != "llvm":
        raise TargetError(f"build_llvm needs an llvm target, got {target}")
    if isinstance(funcs, S.PrimFunc):
        funcs = [funcs]
    llvm = _llvm()
    names = [f.name for f in funcs]
    if len(set(names)) != len(names):
        raise CodegenError(f"two functions share a name in one module: {names}")
    em = _Emitter(target, function_attributes(target))
    metas = []
    for f in funcs:
        metas.append(function_metadata(f))
        em.func(f, symbol_name(f.name))
    meta_json = json.dumps({"version": 1, "target": str(target), "funcs": metas})
    data = meta_json.encode() + b"\0"
    enc = "".join(f"\\{b:02X}" for b in data)
    em.globals.append(
        f'@{METADATA_SYMBOL} = constant [{len(data)} x i8] c"{enc}", align 1'
    )
    tm = target_machine(target)
    text = em.module_text(target.mtriple, str(tm.target_data))
    with _LOCK:
        # A context per build: LLVM never frees constants uniqued in a context, so a
        # shared one would grow with every candidate the autotuner compiles.
        ctx = llvm.create_context()
        try:
            mod = llvm.parse_assembly(text, context=ctx)
            mod.verify()
        except RuntimeError as err:
            if os.environ.get("TECOMP_DUMP_LL"):
                with open(os.environ["TECOMP_DUMP_LL"], "w") as fh:
                    fh.write(text)
            raise CodegenError(f"internal error: generated LLVM IR is invalid: {err}") from None
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        ir_text = str(mod)
        art = LLVMArtifact(target, ir_text, metas)
        if target.is_host:
            _load_runtime_libs()
            # The engine takes ownership of (and frees) its TargetMachine: never a cached one.
            engine = llvm.create_mcjit_compiler(mod, _new_target_machine(target, False))
            engine.finalize_object()
            art.engine = _JitHandle(engine, ctx)
            art.addresses = {m["name"]: engine.get_function_address(m["symbol"]) for m in metas}
        else:
            mod.close()
            ctx.close()
    art.compile_seconds = time.perf_counter() - t0
    return art
