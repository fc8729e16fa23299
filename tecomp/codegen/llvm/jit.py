"""LLVM itself: target machines, the optimization pipeline, and the JIT (which puts what
generated code calls into LLVM's symbol table: libm, libgcc_s and one thread pool per
process, :mod:`.thread_pool`)."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from dataclasses import dataclass

from ...errors import CodegenError, TargetError
from ...runtime import threads
from ...runtime.system_libs import libgcc_s_path, libm_path
from ...target import Target, as_target
from .host import llvm_binding
from .thread_pool import AFTER_FORK_SYMBOL, PARALLEL_SYMBOL, SET_THREADS_SYMBOL, thread_pool_ir

_LOCK = threading.Lock()
_EXPORT_ONLY = threading.local()


@contextlib.contextmanager
def export_only():
    """Host builds made inside compile their code to be exported (``export_library``),
    not loaded into this process: no JIT engine, so their functions cannot be called
    here. For processes that only export what they build, such as the autotuner's build
    workers, where loading machine code never run took a tenth of each build."""
    before = getattr(_EXPORT_ONLY, "on", False)
    _EXPORT_ONLY.on = True
    try:
        yield
    finally:
        _EXPORT_ONLY.on = before


@functools.cache
def _load_runtime() -> LLVMArtifact:
    """Make what JIT-compiled code calls resolvable, once per process; returns the thread
    pool's compiled module, which the cache keeps alive (its workers run its code)."""
    llvm = llvm_binding()
    for lib in (libm_path(), libgcc_s_path()):
        # Math calls resolve from the process anyway when libm cannot be loaded by name;
        # libgcc_s's conversions do not (the JIT would call a float64 -> float16
        # conversion at address 0).
        if lib:
            with contextlib.suppress(RuntimeError):
                llvm.load_library_permanently(lib)
    # The process's one thread pool: every JIT module's parallel loops share its workers.
    host = as_target("llvm")
    tm = target_machine(host)
    names = (PARALLEL_SYMBOL, SET_THREADS_SYMBOL, AFTER_FORK_SYMBOL)
    pool = _compile(_with_layout(thread_pool_ir(host.target_arch), host, tm), host, tm,
                    {n: n for n in names}, load=True)
    for name in names:
        llvm.add_symbol(name, pool.addresses[name])
    threads.attach_pool(pool.addresses[SET_THREADS_SYMBOL], pool.addresses[AFTER_FORK_SYMBOL])
    return pool


def _with_layout(text: str, target: Target, tm) -> str:
    return (f'target triple = "{target.mtriple}"\n'
            f'target datalayout = "{tm.target_data}"\n{text}')


@functools.lru_cache(maxsize=8)
def _optimized_pool(target: Target) -> str:
    """The thread pool's IR for ``target``, optimized (linked into exported objects)."""
    llvm = llvm_binding()
    tm = target_machine(target, pic=True)
    mod = llvm.parse_assembly(_with_layout(thread_pool_ir(target.target_arch), target, tm))
    _optimize(mod, tm)
    return str(mod)


def _optimize(mod, tm) -> None:
    """LLVM's -O3 pipeline over ``mod`` for the target machine ``tm``."""
    llvm = llvm_binding()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)


def target_machine(target: Target, pic: bool = False):
    return _target_machine(target.mtriple, target.mcpu, ",".join(target.mattr), pic)


def _new_target_machine(target: Target, pic: bool):
    return _target_machine.__wrapped__(target.mtriple, target.mcpu, ",".join(target.mattr), pic)


@functools.lru_cache(maxsize=64)
def _target_machine(triple: str, cpu: str, features: str, pic: bool):
    llvm = llvm_binding()
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
                llvm_binding().ffi.lib.LLVMPY_ContextDispose(ptr)
        except Exception:  # noqa: BLE001, S110 - never raise from a finalizer
            pass


@dataclass
class LLVMArtifact:
    """What compiling a module produces: optimized IR and, for the host, a JIT engine
    with the entry points' addresses (by function name)."""

    target: Target
    ir_text: str  # optimized
    engine: object = None  # _JitHandle
    addresses: dict = None

    def asm(self) -> str:
        llvm = llvm_binding()
        mod = llvm.parse_assembly(self.ir_text)
        return target_machine(self.target, pic=True).emit_assembly(mod)

    def object_code(self) -> bytes:
        """The module's object code, with a thread pool of its own linked in."""
        llvm = llvm_binding()
        mod = llvm.parse_assembly(self.ir_text)
        mod.link_in(llvm.parse_assembly(_optimized_pool(self.target)))
        return target_machine(self.target, pic=True).emit_object(mod)


def compile_module(text: str, target: Target, tm, symbols: dict) -> LLVMArtifact:
    """Parse and verify module text, optimize it at -O3 for ``tm`` and, when the target is
    this machine (outside ``export_only``), load it into a JIT engine (``symbols``:
    function name -> entry symbol)."""
    load = target.is_host and not getattr(_EXPORT_ONLY, "on", False)
    if load:
        _load_runtime()
    return _compile(text, target, tm, symbols, load)


def _compile(text: str, target: Target, tm, symbols: dict, load: bool) -> LLVMArtifact:
    llvm = llvm_binding()
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
        _optimize(mod, tm)
        ir_text = str(mod)
        art = LLVMArtifact(target, ir_text)
        if load:
            # The engine takes ownership of (and frees) its TargetMachine: never a cached one.
            engine = llvm.create_mcjit_compiler(mod, _new_target_machine(target, False))
            engine.finalize_object()
            art.engine = _JitHandle(engine, ctx)
            art.addresses = {
                name: engine.get_function_address(sym) for name, sym in symbols.items()
            }
        else:
            mod.close()
            ctx.close()
    return art
