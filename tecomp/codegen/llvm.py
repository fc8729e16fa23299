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

Loop kinds. ``build_llvm`` first legalizes each function
(``tecomp.ir.transform.legalize``; a no-op for the output of ``tecomp.lower``), so every
loop kind below is one the emitter can honour as written:

- ``vectorized`` (constant extent, a lane-parallel body): the body is emitted once with
  LLVM vector types (``llvm_vector``). Integer index expressions are kept as
  *ramps* (base + stride * lane) while they are affine in the loop variable, so a load
  with stride 1 is one contiguous vector load, stride 0 a scalar (+ broadcast), anything
  else a gather (stores: vector store / scatter). A lane-dependent condition becomes a
  mask (``llvm.masked.load/store/gather/scatter``), which is how split tails stay
  correct.
- ``unrolled`` (constant extent): the body is emitted ``extent`` times with the loop
  variable a constant (register-blocked accumulators then become SSA values).
- ``parallel`` (outermost of its nest): the body is outlined into ``void f.parN(ptr
  closure)`` and run by libgomp ``GOMP_parallel``; each thread takes a static contiguous
  chunk.
- ``serial``: a counted loop; its hint (a vectorize or unroll request legalization could
  not grant as written) becomes ``llvm.loop.vectorize.enable`` / ``llvm.loop.unroll.full``
  metadata, so LLVM's own loop passes may still try.

Modules. This one builds a module (``build_llvm``) and describes its functions for the
runtime (``function_metadata``); ``llvm_emit`` writes the IR text, with one mixin per
concern (``llvm_index``, ``llvm_vector``, ``llvm_memory``, ``llvm_intrinsics``,
``llvm_parallel``) over the loop analyses of ``tecomp.ir.analysis``, the values of
``llvm_ir`` and the types of ``llvm_types``; ``llvm_jit`` owns LLVM: target machines, the
optimization pipeline and the JIT.
"""

from __future__ import annotations

import json

from ..errors import CodegenError, TargetError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.analysis import buffer_key
from ..ir.functor import post_order_visit
from ..ir.transform.legalize import legalize
from ..target import Target, as_target
from .llvm_emit import Emitter
from .llvm_ir import ident
from .llvm_jit import (
    LLVMArtifact,
    _target_machine,  # noqa: F401 - the per-process cache, re-exported
    compile_module,
    libgomp_path,
    target_machine,
)

__all__ = [
    "METADATA_SYMBOL",
    "LLVMArtifact",
    "build_llvm",
    "function_attributes",
    "function_metadata",
    "libgomp_path",
    "symbol_name",
    "target_machine",
]


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
    return "tecomp_" + ident(func_name)


METADATA_SYMBOL = "tecomp_module_metadata"


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
            written.add(buffer_key(n.buffer))

    post_order_visit(f.body, fn)
    size_vars = f.size_vars
    names = [v.name for v in size_vars]
    if len(set(names)) != len(names):
        raise CodegenError(
            f"function {f.name!r} has two different symbolic sizes named alike: {names}"
        )
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
                "output": buffer_key(b) in written,
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
    names = [f.name for f in funcs]
    if len(set(names)) != len(names):
        raise CodegenError(f"two functions share a name in one module: {names}")
    # Lowered functions are legal already; PrimFuncs written by hand may not be.
    funcs = [legalize(f, target) for f in funcs]
    em = Emitter(target, function_attributes(target))
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
    art = compile_module(text, target, tm, metas)
    art.compile_seconds = time.perf_counter() - t0
    return art
