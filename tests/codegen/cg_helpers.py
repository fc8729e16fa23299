"""Small builders of hand-written PrimFuncs for code generator tests."""

from __future__ import annotations

import tecomp
from tecomp import te
from tecomp.ir import For, IfThenElse, IntImm, Load, PrimFunc, Store, Var
from tecomp.ir.buffer import make_buffer

F32 = "float32"

#: Explicit x86-64 CPUs, so machine-code checks hold on any machine (built, never run).
X86_AVX512 = "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512"
X86_AVX2 = "llvm -mtriple=x86_64-linux-gnu -mcpu=haswell"


def buf(name, shape, dtype=F32, scope="global"):
    return make_buffer(name, dtype, shape, scope)


def loop(var, extent, body, kind="serial", start=0):
    ext = IntImm(extent) if isinstance(extent, int) else extent
    return For(var, IntImm(start), ext, kind, body)


def ld(b, idx):
    return Load(b, idx, b.dtype)


def elementwise(fn, dtype=F32, kind="serial", nin=2, out_dtype=None, name="ew"):
    """C[i] = fn(A[i], B[i], ...) over a symbolic n, loop of ``kind``."""
    n = Var("n")
    ins = [buf(chr(ord("A") + k), (n,), dtype) for k in range(nin)]
    out = buf("C", (n,), out_dtype or dtype)
    i = Var("i")
    body = loop(i, n, Store(out, fn(*[ld(b, i) for b in ins]), i), kind)
    return PrimFunc(name, tuple(ins) + (out,), body)


def split_vectorized(fn, lanes=16, dtype=F32, nin=2, out_dtype=None, name="vec"):
    """C[i] = fn(A[i], ...) with i split by ``lanes``, the inner loop vectorized and a
    tail guard ``io*lanes + ii < n`` (what lowering emits for a non-dividing split)."""
    n = Var("n")
    ins = [buf(chr(ord("A") + k), (n,), dtype) for k in range(nin)]
    out = buf("C", (n,), out_dtype or dtype)
    io, ii = Var("io"), Var("ii")
    idx = io * lanes + ii
    body = loop(
        io,
        (n + (lanes - 1)) // lanes,
        loop(ii, lanes, IfThenElse(idx < n, Store(out, fn(*[ld(b, idx) for b in ins]), idx)),
             "vectorized"),
    )
    return PrimFunc(name, tuple(ins) + (out,), body)


def vectorized(out, axis: int, lanes: int):
    """A schedule of the compute ``out`` with its ``axis`` split by ``lanes``, the inner
    part vectorized."""
    s = te.create_schedule(out.op)
    _, inner = s[out].split(out.op.axis[axis], factor=lanes)
    s[out].vectorize(inner)
    return s


def build(f, target="llvm"):
    return tecomp.build(f, target=target)
