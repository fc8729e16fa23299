"""``build_llvm``: PrimFuncs -> an ``LLVMModule`` (IR text, metadata, compiled code)."""

from __future__ import annotations

import time

from ...errors import CodegenError, TargetError
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.analysis import buffer_key
from ...ir.functor import post_order_visit
from ...ir.transform.legalize import legalize
from ...runtime.abi import METADATA_SYMBOL, FunctionSignature, ParamSpec, encode_metadata
from ...target import Target, as_target
from .ctable import module_info_globals
from .emit import Emitter
from .ir import ident
from .jit import compile_module, target_machine
from .module import LLVMModule


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


_SIZE_OPS = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%",
             E.Min: "min", E.Max: "max"}


def _size_spec(e):
    """A shape expression as a runtime shape entry: an int, a size name, or (op, a, b)."""
    if isinstance(e, E.IntImm):
        return int(e.value)
    if isinstance(e, E.Var):
        return e.name
    op = _SIZE_OPS.get(type(e))
    if op is None:
        raise CodegenError(f"a parameter shape uses {e}, which the runtime cannot evaluate")
    return (op, _size_spec(e.a), _size_spec(e.b))


def function_signature(f: S.PrimFunc, checks=()) -> FunctionSignature:
    """Names, dtypes, shapes (with symbolic names) and written-ness of a function's params,
    and the messages of its run-time ``checks`` (in the order of their ids).

    Raises
    ------
    CodegenError
        When a symbolic size cannot be bound from the arguments' shapes, or two sizes
        share a name.
    """
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
    return FunctionSignature(
        name=f.name,
        symbol=symbol_name(f.name),
        size_vars=tuple(names),
        params=tuple(
            ParamSpec(b.name, b.dtype, tuple(_size_spec(s) for s in b.shape),
                      buffer_key(b) in written)
            for b in f.params
        ),
        checks=tuple(checks),
    )


def build_llvm(funcs, target="llvm") -> LLVMModule:
    """Compile PrimFuncs for an LLVM target.

    Parameters
    ----------
    funcs : PrimFunc or list of PrimFunc
        Lowered functions (``tecomp.lower`` has run the passes).
    target : Target or str

    Returns
    -------
    LLVMModule
        Callable when the target is this machine; exportable in any case.

    Raises
    ------
    CodegenError, UnsupportedOpError
        For IR the generator cannot compile (message names the node/buffer/variable).
    """
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
    signatures = []
    for f in funcs:
        function_signature(f)  # rejects unbindable sizes before any code is emitted
        em.func(f, symbol_name(f.name))
        signatures.append(function_signature(f, em.checks))
    data = encode_metadata(str(target), signatures)
    enc = "".join(f"\\{b:02X}" for b in data)
    em.globals.append(
        f'@{METADATA_SYMBOL} = constant [{len(data)} x i8] c"{enc}", align 1'
    )
    em.globals += module_info_globals(signatures, str(target), METADATA_SYMBOL)
    tm = target_machine(target)
    text = em.module_text(target.mtriple, str(tm.target_data))
    art = compile_module(text, target, tm, {s.name: s.symbol for s in signatures})
    return LLVMModule(target, signatures, art, time.perf_counter() - t0)
