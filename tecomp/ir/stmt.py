"""Statement nodes of the loop IR, and PrimFunc, the unit that code generators compile."""

from __future__ import annotations

from dataclasses import dataclass, field

from .buffer import Buffer
from .expr import Call, IntImm, Load, Node, PrimExpr, Var
from .functor import collect_vars


class Stmt(Node):
    """Base class of statements. Their text form (``str``, ``repr``) comes from
    :mod:`tecomp.ir.printer`."""

    __slots__ = ()


def _node(cls):
    return dataclass(frozen=True, eq=False, repr=False, slots=True)(cls)


#: Loop kinds. "serial" runs in order; "parallel" splits iterations across CPU threads;
#: "vectorized" runs the iterations as lanes of one vector; "unrolled" repeats the body
#: extent times; "thread_binding" maps the loop to a GPU thread/block index (thread_tag).
FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread_binding")


@_node
class For(Stmt):
    """for (loop_var = min; loop_var < min + extent; ++loop_var) body.

    ``hint`` names what the schedule asked of a loop that legalization made ``serial``
    because it cannot run that way as written ("vectorize" or "unroll"); a backend may
    pass it on to its own optimizer, which decides by other means."""

    child_fields = ("min", "extent", "body")

    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: str
    body: Stmt
    thread_tag: str = ""
    hint: str = ""


@_node
class Store(Stmt):
    """buffer[index] = value."""

    child_fields = ("value", "index")

    buffer: Buffer
    value: PrimExpr
    index: PrimExpr


@_node
class Allocate(Stmt):
    """Storage for ``buffer`` that lives while ``body`` runs (stack or heap by size)."""

    child_fields = ("body",)

    buffer: Buffer
    body: Stmt


@_node
class LetStmt(Stmt):
    """``body`` with ``var`` bound to ``value`` (evaluated once)."""

    child_fields = ("value", "body")

    var: Var
    value: PrimExpr
    body: Stmt


@_node
class IfThenElse(Stmt):
    """if (condition) then_case else else_case (else_case may be None)."""

    child_fields = ("condition", "then_case", "else_case")

    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None


@_node
class SeqStmt(Stmt):
    """The statements of ``seq`` in order."""

    child_fields = ("seq",)

    seq: tuple


@_node
class Evaluate(Stmt):
    """Evaluate ``value`` for its side effects (a no-op for pure expressions)."""

    child_fields = ("value",)

    value: PrimExpr


@_node
class Barrier(Stmt):
    """Every thread of a GPU block waits here until all have arrived, and their writes to
    ``scope`` memory before it are visible to all after it (``__syncthreads()``)."""

    child_fields = ()

    scope: str = "shared"


@_node
class WarpShuffle(Stmt):
    """``buffer[index] = `` the ``value`` of the thread ``offset`` lanes further on in the
    same segment of ``width`` lanes of its warp (32 consecutive threads of the block, x
    fastest), or its own ``value`` where that lane is past the segment's end
    (``__shfl_down_sync``). Every thread of a warp that runs it runs it together: it is
    a collective, like a barrier for one warp."""

    child_fields = ("value", "index")

    buffer: Buffer
    value: PrimExpr
    index: PrimExpr
    offset: int
    width: int = 32


#: Scopes of a warp's matrix fragments for the tensor cores (CUDA's ``wmma``): a buffer in
#: one holds tiles of ``FRAGMENT`` x ``FRAGMENT`` elements that only the ``Matrix*``
#: statements below read and write, each tile spread over the registers of one warp.
#: Operand fragments (``matrix_a``, ``matrix_b``) are float16, bfloat16 or float32; a
#: float32 one holds TF32 values (the loaded elements rounded to 10 bits of mantissa, to
#: nearest with ties away from zero). Accumulators are float32.
FRAGMENT_SCOPES = ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")

#: The side of a fragment: m = n = k = 16.
FRAGMENT = 16


@_node
class MatrixFill(Stmt):
    """Set every element of the accumulator fragment number ``index`` of ``fragment`` to
    ``value`` (``wmma::fill_fragment``). Like every ``Matrix*`` statement, a collective of the 32
    threads of a warp, whose operands are the same in all of them."""

    child_fields = ("index", "value")

    fragment: Buffer
    index: PrimExpr
    value: PrimExpr


@_node
class MatrixLoad(Stmt):
    """Fragment number ``index`` of ``fragment`` = the 16 x 16 tile of ``source`` whose
    element (0, 0) is at ``offset``, its rows ``stride`` elements apart (``layout``
    "row_major"), or its columns (``layout`` "col_major": the tile read transposed)
    (``wmma::load_matrix_sync``)."""

    child_fields = ("index", "offset", "stride")

    fragment: Buffer
    index: PrimExpr
    source: Buffer
    offset: PrimExpr
    stride: PrimExpr
    layout: str = "row_major"


@_node
class MatrixStore(Stmt):
    """The 16 x 16 tile of ``dest`` at ``offset``, rows ``stride`` elements apart, =
    fragment number ``index`` of the accumulator ``fragment`` (``wmma::store_matrix_sync``)."""

    child_fields = ("offset", "stride", "index")

    dest: Buffer
    offset: PrimExpr
    stride: PrimExpr
    fragment: Buffer
    index: PrimExpr


@_node
class MatrixMultiplyAdd(Stmt):
    """Accumulator fragment ``d[d_index]`` = ``a[a_index] @ b[b_index] + c[c_index]``, the
    products exact and the sums in the accumulator's type (``wmma::mma_sync``)."""

    child_fields = ("d_index", "a_index", "b_index", "c_index")

    d: Buffer
    d_index: PrimExpr
    a: Buffer
    a_index: PrimExpr
    b: Buffer
    b_index: PrimExpr
    c: Buffer
    c_index: PrimExpr


#: The statements one warp runs together.
WARP_COLLECTIVES = (WarpShuffle, MatrixFill, MatrixLoad, MatrixStore, MatrixMultiplyAdd)


def accessed_buffers(n) -> tuple:
    """The buffers node ``n`` itself reads or writes (its children's aside): a load's,
    a store's or a shuffle's buffer, a tensor-core statement's fragments and memory."""
    t = type(n)
    if t is Load or t is Store or t is WarpShuffle:
        return (n.buffer,)
    if t is MatrixFill:
        return (n.fragment,)
    if t is MatrixLoad:
        return (n.fragment, n.source)
    if t is MatrixStore:
        return (n.dest, n.fragment)
    if t is MatrixMultiplyAdd:
        return (n.d, n.a, n.b, n.c)
    return ()


def written_buffer(n):
    """The buffer node ``n`` itself writes in memory a kernel or function parameter may
    be (a store's, a shuffle's, a tensor-core store's tile), or None; the fragments the
    other tensor-core statements write are registers."""
    t = type(n)
    if t is Store or t is WarpShuffle:
        return n.buffer
    if t is MatrixStore:
        return n.dest
    return None


@_node
class KernelLaunch(Stmt):
    """Run ``body`` on a GPU as the kernel ``name``: a grid of ``grid`` (x, y, z) blocks of
    ``block`` (x, y, z) threads.

    Inside ``body`` a ``For`` of kind ``thread_binding`` does not loop: its variable is the
    thread's (or block's) index along its tag, and threads whose index reaches the loop's
    extent skip its body. ``params`` are the global buffers and ``scalars`` the size
    variables the kernel reads, in the kernel's parameter order.
    """

    child_fields = ("grid", "block", "body")

    name: str
    params: tuple
    scalars: tuple
    grid: tuple
    block: tuple
    body: Stmt


def seq(*stmts) -> Stmt:
    """A statement running ``stmts`` in order, flattening nested sequences, dropping None."""
    flat = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(tuple(flat))


#: The intrinsic of a prefetch hint: ``Evaluate(Call(PREFETCH, (Load(buffer, index),)))``.
PREFETCH = "prefetch"


def prefetch(buffer: Buffer, index: PrimExpr, write: bool = False,
             streaming: bool = False) -> Evaluate:
    """A hint that ``buffer[index]`` (a vector index: every lane) will be read soon, or
    with ``write``, written soon (its lines fetched ready to be modified); a
    ``streaming`` read is one whose lines are used once, soon, and need not displace
    what the outer caches hold (``prefetchnta`` on x86).

    It has no effect on results: nothing is read, and an index outside the buffer is
    allowed (code generators emit an instruction that cannot fault, or nothing). The
    flags follow the access as ints, and only where set: ``(load,)`` a read, ``(load,
    1)`` a write, ``(load, 0, 1)`` a streaming read."""
    if write and streaming:
        raise ValueError("prefetch: a streaming hint is for reads; write=True takes "
                         "streaming=False")
    flags = (1,) if write else (0, 1) if streaming else ()
    args = (Load(buffer, index, buffer.dtype),) + tuple(IntImm(f, "int32") for f in flags)
    return Evaluate(Call(buffer.dtype, PREFETCH, args))


def prefetched(s: Stmt) -> Load | None:
    """The access a :func:`prefetch` statement announces, or None for any other statement."""
    if type(s) is Evaluate and type(s.value) is Call and s.value.name == PREFETCH:
        return s.value.args[0]
    return None


def prefetch_for_write(s: Stmt) -> bool:
    """Whether the :func:`prefetch` statement ``s`` announces a write."""
    return len(s.value.args) > 1 and s.value.args[1].value == 1


def prefetch_streaming(s: Stmt) -> bool:
    """Whether the :func:`prefetch` statement ``s`` announces a streaming read."""
    return len(s.value.args) > 2 and s.value.args[2].value == 1


@dataclass(frozen=True, eq=False, repr=False)
class PrimFunc:
    """A function over buffers: the unit of code generation.

    ``params`` are the argument buffers in call order. Symbolic sizes are the free ``Var``s
    of the parameter shapes (``size_vars``, in order of first appearance); the runtime binds
    them from the shapes of the arrays it is called with. Its text form comes from
    :mod:`tecomp.ir.printer`.
    """

    name: str
    params: tuple
    body: Stmt
    attrs: dict = field(default_factory=dict)

    @property
    def size_vars(self) -> tuple:
        seen = {}
        for b in self.params:
            for s in b.shape:
                for v in collect_vars(s):
                    seen.setdefault(v, None)
        return tuple(seen)

    def with_body(self, body: Stmt) -> PrimFunc:
        return PrimFunc(self.name, self.params, body, dict(self.attrs))

