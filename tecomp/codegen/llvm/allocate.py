"""Allocations for the LLVM emitter: a buffer of constant size up to
:data:`STACK_LIMIT_BYTES` is an ``alloca`` of the function (which LLVM may promote to
registers), any other one 64-byte aligned heap memory, freed at the end of its scope and
on the function's failure path."""

from __future__ import annotations

from ...errors import CodegenError
from ...ir import expr as E
from ...ir.analysis import buffer_key
from . import types as T
from .ir import ident

#: Largest constant-size allocation (bytes) placed on the stack; bigger ones use the heap.
STACK_LIMIT_BYTES = 32 * 1024


def const_elems(buffer) -> int | None:
    """The number of elements of ``buffer`` when its shape is constant, else None."""
    n = 1
    for x in buffer.shape:
        c = E.const_value(x)
        if c is None:
            return None
        n *= int(c)
    return n


class Allocations:
    """``Allocate`` statements, the ``allocations`` part of ``emit.Emitter``; it knows
    which pointers are stack buffers, and their sizes."""

    def __init__(self, emitter):
        self.em = emitter
        self.b = emitter.builder
        self._stack_elems: dict = {}  # alloca name -> elements

    def stack_elems(self, ptr: str) -> int | None:
        """The number of elements of the stack buffer ``ptr``; None for any other
        pointer."""
        return self._stack_elems.get(ptr)

    def allocate(self, s) -> None:
        """The ``Allocate`` statement ``s``: its buffer, its body, then the buffer freed."""
        em, bld = self.em, self.b
        b = s.buffer
        if b.scope == "shared":
            raise CodegenError(
                f"buffer {b.name!r} has scope 'shared', which only CUDA targets support; "
                f"allowed on llvm: 'global', 'local'"
            )
        mt = T.mem_type(b.dtype)
        eb = T.elem_bytes(b.dtype)
        n_elems = const_elems(b)
        key = buffer_key(b)
        em.aliases.add(b)
        if n_elems is not None and n_elems * eb <= STACK_LIMIT_BYTES:
            name = f"%buf.{ident(b.name)}.{bld.fresh()}"
            bld.fn.allocas.append(f"{name} = alloca {mt}, i64 {max(n_elems, 1)}, align 64")
            self._stack_elems[name] = n_elems
            em.symbols.bind_buffer(key, name)
            em.stmt(s.body)
            return
        # Heap: symbolic or large. aligned_alloc needs a size that is a multiple of 64.
        nbytes = bld.i64(eb)
        for x in b.shape:
            nbytes = bld.add_i64("mul", nbytes, bld.mat(em.index.ev(x)))
        r = bld.add_i64("add", nbytes, bld.i64(63))
        r = bld.val(f"and i64 {r.ref}, -64", "i64")
        r = bld.val(f"call i64 @llvm.umax.i64(i64 {r.ref}, i64 64)", "i64")
        bld.declare("@llvm.umax.i64", "declare i64 @llvm.umax.i64(i64, i64)")
        bld.declare("@aligned_alloc", "declare noalias ptr @aligned_alloc(i64, i64) nounwind")
        bld.declare("@free", "declare void @free(ptr) nounwind")
        p = bld.val(f"call noalias ptr @aligned_alloc(i64 64, i64 {r.ref})", "ptr")
        isnull = bld.val(f"icmp eq ptr {p.ref}, null", "i1")
        bld.fail_if(isnull, "alloc")
        em.symbols.bind_buffer(key, p.ref)
        bld.fn.heap.append(p.ref)
        em.stmt(s.body)
        bld.fn.heap.pop()
        bld.emit(f"call void @free(ptr {p.ref})")
        em.symbols.unbind_buffer(key)
