"""Allocations for the LLVM emitter: a buffer of constant size up to
:data:`STACK_LIMIT_BYTES` is an ``alloca`` of the function (which LLVM may promote to
registers); a buffer of symbolic size is allocated on the stack where a call gives it at
most that size (and the stack restored at the end of its scope); any other one is 64-byte
aligned heap memory, freed at the end of its scope and on the function's failure path."""

from __future__ import annotations

from ...errors import CodegenError
from ...ir import expr as E
from ...ir.analysis import buffer_key
from . import types as T
from .ir import ident

#: Largest allocation (bytes) placed on the stack; bigger ones use the heap.
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
        # Symbolic or large: on the stack when the size a call gives it is small (a row
        # buffer inside a parallel loop, one per row: a heap allocation there cost more
        # than the row's softmax), else 64-byte aligned heap memory (aligned_alloc needs
        # a size that is a multiple of 64).
        nbytes = bld.i64(eb)
        for x in b.shape:
            nbytes = bld.add_i64("mul", nbytes, bld.mat(em.index.ev(x)))
        r = bld.add_i64("add", nbytes, bld.i64(63))
        r = bld.val(f"and i64 {r.ref}, -64", "i64")
        r = bld.val(f"call i64 @llvm.umax.i64(i64 {r.ref}, i64 64)", "i64")
        bld.declare("@llvm.umax.i64", "declare i64 @llvm.umax.i64(i64, i64)")
        bld.declare("@aligned_alloc", "declare noalias ptr @aligned_alloc(i64, i64) nounwind")
        bld.declare("@free", "declare void @free(ptr) nounwind")
        stack_ptr = None
        if n_elems is None:
            stack_ptr, p, owned = self._stack_or_heap(r)
        else:
            p = owned = self._heap(r)
        em.symbols.bind_buffer(key, p.ref)
        bld.fn.heap.append(owned.ref)
        em.stmt(s.body)
        bld.fn.heap.pop()
        bld.emit(f"call void @free(ptr {owned.ref})")
        if stack_ptr is not None:
            bld.emit(f"call void @llvm.stackrestore.p0(ptr {stack_ptr.ref})")
        em.symbols.unbind_buffer(key)

    def _stack_or_heap(self, nbytes):
        """A buffer of ``nbytes`` (an i64, a multiple of 64) allocated on the stack up to
        :data:`STACK_LIMIT_BYTES`, else on the heap. Returns ``(stack, buffer, owned)``:
        the stack pointer to restore after the buffer's scope, the buffer, and the heap
        memory to free (null for a stack buffer; ``free`` of null does nothing)."""
        bld = self.b
        bld.declare("@llvm.stacksave.p0", "declare ptr @llvm.stacksave.p0()")
        bld.declare("@llvm.stackrestore.p0", "declare void @llvm.stackrestore.p0(ptr)")
        saved = bld.val("call ptr @llvm.stacksave.p0()", "ptr")
        small = bld.val(f"icmp ule i64 {nbytes.ref}, {STACK_LIMIT_BYTES}", "i1")
        lstack, lheap, ljoin = (bld.new_label(h) for h in ("alloc.stack", "alloc.heap",
                                                          "alloc.join"))
        bld.emit(f"br i1 {small.ref}, label %{lstack}, label %{lheap}")
        bld.start_block(lstack)
        on_stack = bld.val(f"alloca i8, i64 {nbytes.ref}, align 64", "ptr")
        bld.emit(f"br label %{ljoin}")
        bld.start_block(lheap)
        on_heap = self._heap(nbytes)
        heap_end = bld.fn.label
        bld.emit(f"br label %{ljoin}")
        bld.start_block(ljoin)
        p = bld.val(f"phi ptr [ {on_stack.ref}, %{lstack} ], [ {on_heap.ref}, %{heap_end} ]",
                    "ptr")
        owned = bld.val(f"phi ptr [ null, %{lstack} ], [ {on_heap.ref}, %{heap_end} ]", "ptr")
        return saved, p, owned

    def _heap(self, nbytes):
        """64-byte aligned heap memory of ``nbytes`` (an i64, a multiple of 64); the
        function's failure path where there is none."""
        bld = self.b
        p = bld.val(f"call noalias ptr @aligned_alloc(i64 64, i64 {nbytes.ref})", "ptr")
        bld.fail_if(bld.val(f"icmp eq ptr {p.ref}, null", "i1"), "alloc")
        return p
