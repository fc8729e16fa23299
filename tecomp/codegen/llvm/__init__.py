"""LLVM code generation: loop IR (PrimFunc) -> LLVM IR text -> optimized machine code.

We write LLVM IR as text and hand it to llvmlite's parser. Text gives direct access to
everything the generated code needs (function attributes, loop and alias metadata,
masked/gather intrinsics with their current signatures) and is several times faster to
produce than llvmlite's IR builder, which matters when the autotuner builds thousands
of candidates.

Calling convention. Every PrimFunc ``f`` becomes one exported entry point::

    i32 @f(ptr %args, ptr %sizes)   ; args: one pointer per buffer param, in order
                                    ; sizes: one i64 per symbolic size (PrimFunc.size_vars)

returning 0, or -1 when a heap allocation failed (``tecomp.runtime.abi``). The runtime
validates every argument before the call, so generated code never checks bounds.

Aliasing assumption. Parameter buffers are distinct, non-overlapping arrays (the
runtime rejects an output that overlaps another argument), so each access carries
scoped-noalias metadata saying it aliases no other parameter. This survives outlining of
parallel loops, where parameter pointers travel through a closure struct.

Loop kinds. ``build_llvm`` first legalizes each function
(``tecomp.ir.transform.legalize``; a no-op for the output of ``tecomp.lower``), so every
loop kind below is one the emitter can honour as written:

- ``vectorized`` (constant extent, a lane-parallel body): the body is emitted once with
  LLVM vector types (``vector``). Integer index expressions are kept as *ramps*
  (base + stride * lane) while they are affine in the loop variable, so a load with
  stride 1 is one contiguous vector load, stride 0 a scalar (+ broadcast), anything else
  a gather (stores: vector store / scatter). A lane-dependent condition becomes a mask
  (``llvm.masked.load/store/gather/scatter``), which is how split tails stay correct.
- ``unrolled`` (constant extent): the body is emitted ``extent`` times with the loop
  variable a constant (register-blocked accumulators then become SSA values).
- ``parallel`` (outermost of its nest): the body is outlined into ``void f.parN(ptr
  closure, i64 begin, i64 end)`` and run by tecomp's thread pool (``thread_pool``), which
  hands each thread chunks of the iteration space.
- ``serial``: a counted loop; its hint (a vectorize or unroll request legalization could
  not grant as written) becomes ``llvm.loop.vectorize.enable`` / ``llvm.loop.unroll.full``
  metadata, so LLVM's own loop passes may still try.

Modules. ``build`` builds a module (``build_llvm``) and describes its functions for the
runtime (``tecomp.runtime.abi.function_signature``); ``kind`` is the target kind "llvm"
(its options, capabilities and loop legality rules); ``emit`` writes the IR text: its
``Emitter`` is made of parts, one class per concern in its own module, each reached
through the emitter (``module_text``, ``builder``, ``symbols``, ``index``, ``vector``,
``loops``, ``parallel``, ``transpose``, ``memory``, ``allocate``, ``alias``,
``math_calls``, ``checks``; ``vmath`` writes the vector math functions), over the loop
analyses of ``tecomp.ir.analysis``, the values of ``ir`` and the types of ``types``;
``jit`` owns LLVM: target machines, the optimization pipeline and the JIT; ``module``
is the runtime module it returns (``LLVMModule``); ``host`` is what LLVM says about
this machine's CPU, which ``tecomp.target`` asks when it parses an llvm target.

The kind (``tecomp.target.register_target_kind``) and its code generator
(``tecomp.codegen.register_backend``) are registered when this package is imported.
"""

from ...target import register_target_kind
from ..registry import register_backend
from .build import build_llvm, function_signature, symbol_name
from .kind import LLVM
from .module import LLVMModule

register_target_kind(LLVM)
register_backend("llvm", build_llvm)

__all__ = ["LLVMModule", "build_llvm", "function_signature", "symbol_name"]
