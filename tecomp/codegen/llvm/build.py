"""``build_llvm``: PrimFuncs -> an ``LLVMModule`` (IR text, metadata, compiled code).

The functions' signatures and exported symbols follow the runtime ABI
(``tecomp.runtime.abi.function_signature``, ``symbol_name``), re-exported here."""

from __future__ import annotations

import time

from ...errors import CodegenError, TargetError
from ...ir import stmt as S
from ...ir.transform.legalize import legalize
from ...runtime.abi import (METADATA_SYMBOL, RUN_CALLS_IR, RUN_CALLS_SYMBOL, encode_metadata,
                            function_signature, symbol_name)
from ...target import Target, as_target
from .ctable import module_info_globals
from .emit import Emitter
from .jit import compile_module, target_machine
from .module import LLVMModule

__all__ = ["build_llvm", "function_attributes", "function_signature", "symbol_name"]


#: LLVM CPU name -> the CPU whose instruction scheduling and tuning LLVM is asked to use
#: instead (the ``"tune-cpu"`` attribute; the instructions allowed stay the target's own).
#: LLVM's Zen 4 scheduling model, which it also uses for Zen 5, has the scheduler before
#: register allocation hoist the loads of a whole unrolled register tile ahead of its
#: multiply-adds, so the tile's accumulators spill: a 1x1 convolution's tile of 2 channel
#: vectors by 8 columns kept 48 stack slots (1.07 ms; 0.90 ms without them). Scheduled
#: with LLVM's generic x86 model, on 2 Zen 4 cores, untuned, in one process: ResNet-50
#: 0.88x the time, Inception-v1 0.91x, DenseNet-121 0.93x, MobileNetV2 0.96x, SqueezeNet
#: 0.95x, the GPT-2-style decoder 0.97x, BERT 1.00x.
TUNE_CPU = dict.fromkeys(("znver4", "znver5"), "generic")


def function_attributes(target: Target) -> str:
    attrs = ["nounwind", f'"target-cpu"="{target.mcpu}"']
    if target.mcpu in TUNE_CPU:
        attrs.append(f'"tune-cpu"="{TUNE_CPU[target.mcpu]}"')
    if target.mattr:
        attrs.append(f'"target-features"="{",".join(target.mattr)}"')
    w = target.vector_width_bits
    if target.keys[1].startswith("x86"):
        # Without these LLVM splits 512-bit vectors in two on CPUs that prefer 256 bits.
        attrs.append(f'"prefer-vector-width"="{w}"')
        attrs.append(f'"min-legal-vector-width"="{w}"')
    return " ".join(attrs)


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
        signatures.append(function_signature(f, em.checks.messages))
    data = encode_metadata(str(target), signatures)
    enc = "".join(f"\\{b:02X}" for b in data)
    em.module.globals.append(
        f'@{METADATA_SYMBOL} = constant [{len(data)} x i8] c"{enc}", align 1'
    )
    em.module.globals += module_info_globals(signatures, str(target), METADATA_SYMBOL)
    em.module.globals.append(RUN_CALLS_IR)
    tm = target_machine(target)
    text = em.module_text(target.mtriple, str(tm.target_data))
    symbols = {s.name: s.symbol for s in signatures}
    art = compile_module(text, target, tm, {**symbols, RUN_CALLS_SYMBOL: RUN_CALLS_SYMBOL})
    return LLVMModule(target, signatures, art, time.perf_counter() - t0)
