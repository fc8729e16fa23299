"""The IR verifier: whether a ``PrimFunc`` is well formed.

A pass that builds a malformed loop nest would otherwise be found, if at all, by LLVM or
by a wrong answer. ``verify`` walks the function once and raises ``IRVerifyError`` at the
first node that breaks one of these rules (the rule's name in brackets):

- ``[var-defined]`` every variable is defined where it is used: a symbolic size of the
  parameters, or the variable of an enclosing loop or let. Inside a ``KernelLaunch`` only
  the kernel's ``scalars`` and what the kernel itself binds are defined (the kernel cannot
  see the host's loops and lets).
- ``[var-bound-once]`` no variable is bound again inside its own scope (a loop or let
  over a size, a loop variable reused by a loop inside that loop). Two sibling loops may
  share their variable: partitioning cuts one loop into several, and each binds the
  variable afresh; code generators give each binding its own value.
- ``[buffer-allocated]`` every load and store reaches a parameter, or a buffer allocated
  by an enclosing ``Allocate`` (by storage: ``buffer_key``); no storage is allocated again
  inside its own allocation; a kernel reaches global buffers only through its ``params``.
- ``[buffer-scope]`` a buffer's scope is "global", "local" or "shared"; parameters are
  global; once a function has kernels, shared memory is allocated inside one.
- ``[loop-annotation]`` a loop's kind is one of ``FOR_KINDS``; a thread tag only on a
  ``thread_binding`` loop, a hint (``"vectorize"``, ``"unroll"``) only on a serial one;
  the loop variable is an integer, and its minimum and extent have its dtype.
- ``[thread-annotation]`` a ``thread_binding`` loop names a block, thread or virtual
  thread index; inside a kernel, it is no wider than the kernel's launch along it; a block
  or thread index is not bound inside a vectorized or parallel loop; once a function has
  kernels, every block and thread index is bound inside one, and kernels do not nest.
  Loops bound to one index may nest: they are the same index (a cooperative fetch bound
  inside its consumer's thread loops).
- ``[dtype]`` operands agree with each other and with their node: both sides of an
  arithmetic operator and its result, both sides of a comparison, bool conditions and
  logical operands, a load's and a stored value's dtype and their buffer's, integer
  indices, a let's variable and its value.
- ``[barrier-uniform]`` a barrier stands in a kernel, where every thread of the block
  reaches it: not under an ``if`` or a loop bound that depends on the thread index, not
  in a vectorized loop, not in a thread loop narrower than the block.
- ``[warp-shuffle]`` a warp shuffle stands in a kernel, its width a power of two up to
  32 and its offset within it; what it stores obeys the rules of a ``Store``.
- ``[fragment]`` a buffer in a fragment scope (``wmma.*``) is allocated in a kernel, holds
  whole 16 x 16 tiles and is read and written only by the ``Matrix*`` statements, each
  fragment in the scope its role needs (``a`` a ``wmma.matrix_a``, ``b`` a
  ``wmma.matrix_b``, the rest ``wmma.accumulator``), operands float16, bfloat16 or
  float32 (TF32), both of one type, accumulators float32; those statements stand in
  kernels.
- ``[loop-ir]`` no tensor-expression node (a reduction, a tensor read) is left.

``tecomp.ir.transform.pipeline`` runs it before the first pass and after each one when
``TECOMP_VERIFY_IR=1``, and the error names the pass that produced the malformed IR.
"""

from __future__ import annotations

from ..errors import IRVerifyError
from . import dtype as dt
from . import expr as E
from . import stmt as S
from .analysis import buffer_key

__all__ = ["RULES", "verify"]

#: The rules ``verify`` checks, by the name its errors give (module docstring).
RULES = ("var-defined", "var-bound-once", "buffer-allocated", "buffer-scope",
         "loop-annotation", "thread-annotation", "dtype", "barrier-uniform", "warp-shuffle",
         "fragment", "loop-ir")

SCOPES = ("global", "local", "shared", *S.FRAGMENT_SCOPES)

#: The fragments of each tensor-core statement and the scopes each may have.
_FRAGMENT_ROLES = {
    S.MatrixFill: (("fragment", ("wmma.accumulator",)),),
    S.MatrixLoad: (("fragment", ("wmma.matrix_a", "wmma.matrix_b")),),
    S.MatrixStore: (("fragment", ("wmma.accumulator",)),),
    S.MatrixMultiplyAdd: (("a", ("wmma.matrix_a",)), ("b", ("wmma.matrix_b",)),
                          ("c", ("wmma.accumulator",)), ("d", ("wmma.accumulator",))),
}
THREAD_TAGS = tuple(f"{k}.{d}" for k in ("blockIdx", "threadIdx") for d in "xyz") + ("vthread",)
HINTS = {"vectorize", "unroll"}


def _show(node, limit: int = 6) -> str:
    """The printed form of ``node``, cut to its first ``limit`` lines."""
    try:
        text = str(node)
    except Exception:  # a node malformed past printing still gets named
        text = f"<{type(node).__name__}>"
    lines = text.splitlines() or [text]
    if len(lines) > limit:
        lines = lines[:limit] + ["  ..."]
    return "\n".join(lines)


class _Fail(Exception):
    def __init__(self, rule: str, detail: str, node):
        super().__init__(rule)
        self.rule, self.detail, self.node = rule, detail, node


def _fail(rule, detail, node):
    raise _Fail(rule, detail, node)


def _has_kernels(s) -> bool:
    stack = [s]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is S.KernelLaunch:
            return True
        if t is S.SeqStmt:
            stack.extend(n.seq)
        elif t in (S.Allocate, S.LetStmt, S.For):
            stack.append(n.body)
        elif t is S.IfThenElse:
            stack.append(n.then_case)
            if n.else_case is not None:
                stack.append(n.else_case)
    return False


_ARITH = (E.Add, E.Sub, E.Mul, E.Div, E.FloorDiv, E.FloorMod, E.Min, E.Max)
_COMPARE = (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE)
_TE_NODES = (E.Reduce, E.ProducerLoad)


class _Verifier:
    def __init__(self, func: S.PrimFunc):
        self.func = func
        self.defined: set = set()  # variables in scope
        self.buffers: set = set()  # storage (buffer_key) in scope
        self.kernel: S.KernelLaunch | None = None
        self.has_kernels = _has_kernels(func.body)
        self.lane_loops = 0  # enclosing vectorized / parallel loops
        self.gpu_loops = 0  # enclosing loops bound to a block or thread index
        self.thread_vars: set = set()  # variables that differ between threads of a block
        self.divergent: object = None  # the innermost statement threads may not all run
        self.current = None  # the statement being checked, which an error prints

    # ---- expressions ------------------------------------------------------------------

    def expr(self, e) -> None:
        # One walk per expression tree; a sub-tree shared inside it is checked once.
        seen: set = set()
        stack = [e]
        while stack:
            n = stack.pop()
            t = type(n)
            if t is E.IntImm or t is E.FloatImm:
                continue
            if t is E.Var:
                if n not in self.defined:
                    where = " in this kernel (not among its scalars)" if self.kernel else ""
                    _fail("var-defined", f"variable {n.name!r} is used where it is not "
                          f"defined{where}", e)
                continue
            if t is E.StringImm or id(n) in seen:
                continue
            seen.add(id(n))
            if t is E.Let:
                self._dtype(n.var.dtype == n.value.dtype, n,
                            f"let variable {n.var.name!r} is {n.var.dtype}, its value "
                            f"{n.value.dtype}")
                self.expr(n.value)
                self._bind(n.var, n)
                try:
                    self.expr(n.body)
                finally:
                    self.defined.discard(n.var)
                continue
            self._expr_node(t, n)
            stack.extend(_expr_children(n))

    def _expr_node(self, t, n) -> None:
        if t in _ARITH:
            self._dtype(n.a.dtype == n.b.dtype == n.dtype, n,
                        f"operands {n.a.dtype} and {n.b.dtype}, result {n.dtype}")
        elif t in _COMPARE:
            self._dtype(n.a.dtype == n.b.dtype and n.dtype == "bool", n,
                        f"compares {n.a.dtype} with {n.b.dtype}, result {n.dtype}")
        elif t is E.And or t is E.Or or t is E.Not:
            ops = (n.a,) if t is E.Not else (n.a, n.b)
            self._dtype(all(o.dtype == "bool" for o in ops) and n.dtype == "bool", n,
                        f"logical operands {', '.join(o.dtype for o in ops)}, result "
                        f"{n.dtype}")
        elif t is E.Select:
            self._dtype(n.cond.dtype == "bool", n, f"condition is {n.cond.dtype}")
            self._dtype(n.true_value.dtype == n.false_value.dtype == n.dtype, n,
                        f"values {n.true_value.dtype} and {n.false_value.dtype}, result "
                        f"{n.dtype}")
        elif t is E.Load:
            self._access(n.buffer, n, n.index)
            self._dtype(n.dtype == n.buffer.dtype, n,
                        f"loads {n.dtype} from the {n.buffer.dtype} buffer {n.buffer.name!r}")
        elif t is E.Check:
            self._dtype(n.cond.dtype == "bool" and dt.is_int(n.value.dtype), n,
                        f"check of a {n.cond.dtype} condition with a {n.value.dtype} value")
        elif t is E.Cast:
            self._valid_dtype(n.dtype, n)
        elif t in _TE_NODES or isinstance(n, (E.IterVar, E.Range)):
            _fail("loop-ir", f"a tensor-expression node ({t.__name__}) in loop IR", n)

    def _dtype(self, ok: bool, node, detail: str) -> None:
        if not ok:
            _fail("dtype", detail, node)

    def _valid_dtype(self, dtype, node) -> None:
        if dtype not in dt.SUPPORTED:
            _fail("dtype", f"unknown dtype {dtype!r}", node)

    # ---- buffers ------------------------------------------------------------------------

    def _access(self, buf, node, index) -> None:
        if buf.scope in S.FRAGMENT_SCOPES and type(node) not in S.WARP_COLLECTIVES:
            _fail("fragment", f"{type(node).__name__} of {buf.name!r}, a {buf.scope} "
                  f"fragment, which only the Matrix* statements read and write", node)
        if buffer_key(buf) not in self.buffers:
            where = (" in this kernel (not among its params)"
                     if self.kernel is not None and buf.scope == "global" else "")
            _fail("buffer-allocated", f"buffer {buf.name!r} is accessed where it is not "
                  f"allocated{where}", node)
        if not dt.is_int(index.dtype):
            _fail("dtype", f"index of {buf.name!r} is {index.dtype}", node)

    # ---- statements ---------------------------------------------------------------------

    def _bind(self, var, node) -> None:
        if var in self.defined:
            _fail("var-bound-once", f"variable {var.name!r} is bound again inside its "
                  f"own scope", node)
        self.defined.add(var)

    def stmt(self, s) -> None:
        self.current = s
        t = type(s)
        if t is S.SeqStmt:
            for c in s.seq:
                self.stmt(c)
        elif t is S.Store:
            self.expr(s.index)
            self.expr(s.value)
            self._access(s.buffer, s, s.index)
            self._dtype(s.value.dtype == s.buffer.dtype, s,
                        f"stores {s.value.dtype} into the {s.buffer.dtype} buffer "
                        f"{s.buffer.name!r}")
        elif t is S.For:
            self.loop(s)
        elif t is S.LetStmt:
            self.expr(s.value)
            self._dtype(s.var.dtype == s.value.dtype, s,
                        f"let variable {s.var.name!r} is {s.var.dtype}, its value "
                        f"{s.value.dtype}")
            self._bind(s.var, s)
            thread = self.kernel is not None and self._thread_dependent(s.value)
            if thread:
                self.thread_vars.add(s.var)
            try:
                self.stmt(s.body)
            finally:
                self.defined.discard(s.var)
                self.thread_vars.discard(s.var)
        elif t is S.IfThenElse:
            self.expr(s.condition)
            self._dtype(s.condition.dtype == "bool", s,
                        f"condition is {s.condition.dtype}")
            saved = self.divergent
            if self.kernel is not None and self._thread_dependent(s.condition):
                self.divergent = s
            try:
                self.stmt(s.then_case)
                if s.else_case is not None:
                    self.stmt(s.else_case)
            finally:
                self.divergent = saved
        elif t is S.Allocate:
            self.allocate(s)
        elif t is S.Evaluate:
            pre = S.prefetched(s)
            if pre is not None:  # a prefetch reads nothing; its index only needs defining
                self.expr(pre.index)
                self._access(pre.buffer, s, pre.index)
            else:
                self.expr(s.value)
        elif t is S.Barrier:
            self.barrier(s)
        elif t is S.WarpShuffle:
            self.stmt(S.Store(s.buffer, s.value, s.index))
            self.warp_shuffle(s)
        elif t in S.WARP_COLLECTIVES:
            self.matrix(s)
        elif t is S.KernelLaunch:
            self.launch(s)
        else:
            _fail("loop-ir", f"{t.__name__} is not a loop IR statement", s)

    def allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        if buf.scope not in SCOPES:
            _fail("buffer-scope", f"buffer {buf.name!r} has the scope {buf.scope!r}; "
                  f"allowed: {', '.join(SCOPES)}", s)
        if buf.scope == "shared" and self.has_kernels and self.kernel is None:
            _fail("buffer-scope", f"shared buffer {buf.name!r} is allocated outside every "
                  f"kernel", s)
        if buf.scope in S.FRAGMENT_SCOPES:
            if not self._on_gpu():
                _fail("fragment", f"fragment {buf.name!r} is allocated outside every "
                      f"kernel", s)
            size = 1
            for d in buf.shape:
                size = None if size is None or E.const_value(d) is None else \
                    size * E.const_value(d)
            kinds = ("float32",) if buf.scope == "wmma.accumulator" else \
                ("float16", "bfloat16", "float32")
            if buf.dtype not in kinds:
                _fail("fragment", f"fragment {buf.name!r} is {buf.dtype}; a {buf.scope} "
                      f"fragment is {' or '.join(kinds)}", s)
            if size is None or size % (S.FRAGMENT * S.FRAGMENT):
                shape = ", ".join(str(d) for d in buf.shape)
                _fail("fragment", f"fragment {buf.name!r} has the shape [{shape}]: a "
                      f"constant number of 16 x 16 tiles", s)
        self._valid_dtype(buf.dtype, s)
        for d in buf.shape:
            self.expr(d)
        key = buffer_key(buf)
        if key in self.buffers:
            _fail("buffer-allocated", f"buffer {buf.name!r} is allocated again inside its "
                  f"own allocation", s)
        self.buffers.add(key)
        try:
            self.stmt(s.body)
        finally:
            self.buffers.discard(key)

    def loop(self, s: S.For) -> None:
        if s.kind not in S.FOR_KINDS:
            _fail("loop-annotation", f"loop kind {s.kind!r}; allowed: "
                  f"{', '.join(S.FOR_KINDS)}", s)
        if s.kind == "thread_binding":
            if s.thread_tag not in THREAD_TAGS:
                _fail("thread-annotation", f"thread tag {s.thread_tag!r}; allowed: "
                      f"{', '.join(THREAD_TAGS)}", s)
        elif s.thread_tag:
            _fail("loop-annotation", f"a {s.kind} loop has the thread tag {s.thread_tag!r}",
                  s)
        if s.hint and (s.kind != "serial" or s.hint not in HINTS):
            _fail("loop-annotation", f"a {s.kind} loop has the hint {s.hint!r} (a hint "
                  f"names what a serial loop was asked to be: "
                  f"{', '.join(sorted(HINTS))})", s)
        v = s.loop_var
        if not dt.is_int(v.dtype) or s.min.dtype != v.dtype or s.extent.dtype != v.dtype:
            _fail("loop-annotation", f"loop variable {v.name!r} is {v.dtype}, its minimum "
                  f"{s.min.dtype} and its extent {s.extent.dtype}", s)
        self.expr(s.min)
        self.expr(s.extent)
        tag = s.thread_tag if s.kind == "thread_binding" else ""
        gpu_index = tag and tag != "vthread"
        # A loop inside another bound to the same index is the same index (a cooperative
        # fetch inside a consumer's thread loops), so nesting is no error; a launch
        # narrower than the loop is: the iterations past the launch would never run.
        if gpu_index and self.kernel is not None:
            launch = self._launch_extent(tag)
            if launch is not None and E.const_value(s.extent) is not None \
                    and E.const_value(s.extent) > launch:
                _fail("thread-annotation", f"{tag} is bound to a loop of {s.extent} "
                      f"iterations in a kernel launched with {launch} along it", s)
        if gpu_index and self.lane_loops:
            _fail("thread-annotation", f"{tag} is bound inside a vectorized or parallel loop",
                  s)
        if gpu_index and self.has_kernels and self.kernel is None:
            _fail("thread-annotation", f"{tag} is bound outside every kernel", s)
        saved = self.divergent
        if self.kernel is not None and (
                s.kind == "vectorized" or (not gpu_index and (
                    self._thread_dependent(s.min) or self._thread_dependent(s.extent)))
                or (gpu_index and not self._full_width(s))):
            self.divergent = s
        self._bind(v, s)
        lanes = s.kind in ("vectorized", "parallel")
        self.lane_loops += lanes
        self.gpu_loops += bool(gpu_index)
        if tag.startswith("threadIdx") and self.kernel is not None:
            self.thread_vars.add(v)
        try:
            self.stmt(s.body)
        finally:
            self.defined.discard(v)
            self.thread_vars.discard(v)
            self.gpu_loops -= bool(gpu_index)
            self.lane_loops -= lanes
            self.divergent = saved

    def _launch_extent(self, tag: str) -> int | None:
        """The kernel's constant launch extent along ``tag``, or None when symbolic."""
        dims = self.kernel.grid if tag.startswith("blockIdx") else self.kernel.block
        return E.const_value(dims["xyz".index(tag[-1])])

    def _full_width(self, s: S.For) -> bool:
        """Whether the thread loop ``s`` covers its kernel's launch extent (every thread of
        the block runs its body); the same test ``insert_barriers`` places barriers by."""
        if not s.thread_tag.startswith("threadIdx"):
            return True  # block indices are uniform within a block
        full = self.kernel.block["xyz".index(s.thread_tag[-1])]
        return full is s.extent or (E.const_value(full) is not None
                                    and E.const_value(full) == E.const_value(s.extent))

    def _thread_dependent(self, e) -> bool:
        if not self.thread_vars:
            return False
        stack, seen = [e], set()
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            if type(n) is E.Var and n in self.thread_vars:
                return True
            stack.extend(_expr_children(n))
        return False

    def barrier(self, s: S.Barrier) -> None:
        if self.kernel is None:
            _fail("barrier-uniform", "a barrier outside every kernel", s)
        if self.divergent is not None:
            _fail("barrier-uniform", "a barrier that not every thread of the block reaches, "
                  f"under:\n{_show(self.divergent, 1)}", s)

    def _on_gpu(self) -> bool:
        """Whether the statement at hand runs on GPU threads: in a kernel, or before the
        host/device split inside a loop bound to a block or thread index."""
        return self.kernel is not None or (not self.has_kernels and self.gpu_loops > 0)

    def warp_shuffle(self, s: S.WarpShuffle) -> None:
        if not self._on_gpu():
            _fail("warp-shuffle", "a warp shuffle outside every kernel", s)
        width = s.width
        if width not in (1, 2, 4, 8, 16, 32) or not 0 < s.offset < width:
            _fail("warp-shuffle", f"a shuffle by {s.offset} lanes in segments of {width}; "
                  f"the width is a power of two up to 32 and the offset in [1, width)", s)

    def matrix(self, s) -> None:
        if not self._on_gpu():
            _fail("fragment", f"a {type(s).__name__} outside every kernel", s)
        for f in type(s).child_fields:
            self.expr(getattr(s, f))
        t = type(s)
        for field, scopes in _FRAGMENT_ROLES[t]:
            buf = getattr(s, field)
            if buf.scope not in scopes:
                _fail("fragment", f"{t.__name__} uses {buf.name!r} ({buf.scope}) where a "
                      f"{' or '.join(scopes)} fragment goes", s)
            self._access(buf, s, E.IntImm(0, "int32"))
        if t is S.MatrixMultiplyAdd and s.a.dtype != s.b.dtype:
            _fail("fragment", f"MatrixMultiplyAdd multiplies {s.a.dtype} by {s.b.dtype}; "
                  f"its operands are of one type", s)
        memory = getattr(s, "source", None) or getattr(s, "dest", None)
        if memory is not None:
            if memory.scope in S.FRAGMENT_SCOPES:
                _fail("fragment", f"{t.__name__} moves a tile between two fragments "
                      f"({memory.name!r}); one side is shared or global memory", s)
            self._access(memory, s, s.offset)
        if t is S.MatrixLoad and s.layout not in ("row_major", "col_major"):
            _fail("fragment", f"layout {s.layout!r}; allowed: row_major, col_major", s)

    def launch(self, s: S.KernelLaunch) -> None:
        if self.kernel is not None:
            _fail("thread-annotation", f"kernel {s.name!r} is launched inside the kernel "
                  f"{self.kernel.name!r}", s)
        if len(s.grid) != 3 or len(s.block) != 3:
            _fail("thread-annotation", f"kernel {s.name!r} has a grid of {len(s.grid)} and a "
                  f"block of {len(s.block)} dimensions (3 each)", s)
        for d in s.grid + s.block:
            self.expr(d)
        for v in s.scalars:
            if v not in self.defined:
                _fail("var-defined", f"kernel {s.name!r} takes the scalar {v.name!r}, "
                      f"which is not defined where it is launched", s)
        for b in s.params:
            if buffer_key(b) not in self.buffers:
                _fail("buffer-allocated", f"kernel {s.name!r} takes the buffer {b.name!r}, "
                      f"which is not allocated where it is launched", s)
        saved = self.defined, self.buffers, self.thread_vars, self.divergent
        self.defined = set(s.scalars)
        self.buffers = {buffer_key(b) for b in s.params}
        self.thread_vars, self.divergent, self.kernel = set(), None, s
        try:
            self.stmt(s.body)
        finally:
            self.defined, self.buffers, self.thread_vars, self.divergent = saved
            self.kernel = None

    def run(self) -> None:
        func = self.func
        self.defined.update(func.size_vars)
        for b in func.params:
            if b.scope != "global":
                _fail("buffer-scope", f"parameter {b.name!r} has the scope {b.scope!r} "
                      f"(parameters are global)", b)
            self.buffers.add(buffer_key(b))
        self.stmt(func.body)


#: Expression class -> a function giving its children (built on first use).
_CHILDREN: dict = {}


def _expr_children(n):
    get = _CHILDREN.get(type(n))
    if get is None:
        names = type(n).child_fields
        if names == ("a", "b"):
            def get(x):
                return (x.a, x.b)
        else:
            def get(x, names=names):
                out = []
                for f in names:
                    v = getattr(x, f)
                    if type(v) is tuple:
                        out.extend(v)
                    elif v is not None:
                        out.append(v)
                return out
        _CHILDREN[type(n)] = get
    return get(n)


def verify(func: S.PrimFunc, after: str | None = None) -> None:
    """Check that ``func`` is well formed (module docstring: the rules).

    Parameters
    ----------
    func : PrimFunc
    after : str, optional
        The pass that produced ``func``, named in the error.

    Raises
    ------
    IRVerifyError
        At the first node that breaks a rule; ``rule``, ``node`` and ``pass_name`` say
        which, and the message prints the node.

    Examples
    --------
    >>> verify(tecomp.lower(s, [A, B]))   # doctest: +SKIP
    """
    v = _Verifier(func)
    try:
        v.run()
    except _Fail as f:
        origin = f" after the pass {after!r}" if after else ""
        where = ""
        if isinstance(f.node, E.PrimExpr) and v.current is not None:
            # An expression is shown with the statement it belongs to (a loop by its header).
            where = f"\nin:\n{_show(v.current, 1)}"
        raise IRVerifyError(
            f"malformed IR in {func.name!r}{origin} [{f.rule}]: {f.detail}\n"
            f"at:\n{_show(f.node)}{where}",
            rule=f.rule, node=f.node, pass_name=after) from None
