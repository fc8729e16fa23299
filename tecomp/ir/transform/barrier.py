"""Barrier insertion: ``__syncthreads()`` where threads of a block hand data to each other
through shared memory, and nowhere else.

Within a kernel, threads fill a shared buffer cooperatively (each thread writes some
elements) and then read it (each thread reads elements others wrote). A barrier is
needed between a write and a later read of the same shared buffer (the data must be
complete), and between a read and a later write (the next tile must not overwrite data
still being read, e.g. from one iteration of a reduction loop to the next). Local and
global buffers never get one.

The pass walks each kernel body in program order, tracking the shared buffers read and
written since the last barrier, and puts a barrier before the first statement that
conflicts with them. It places barriers only where every thread of the block reaches
them: inside sequences, allocations, lets, ``if``s and loops whose condition or extent
does not depend on the thread index (block indices are uniform), and loops bound to a
thread index whose extent is the launch extent. A statement under any other control flow
(an ``if`` on the thread index, a thread loop narrower than the block) gets its barrier
before it as a whole. A loop whose body conflicts with its own
next iteration gets a barrier at the top of its body.

A double-buffered tile (``double_buffer``, listed in the function's
``attrs["double_buffered"]``) is tracked per half where an access names its half by the
parity of a loop variable (``(k + c) % 2 * half_size + offset``): the fill of the next
half and the compute on the current one do not conflict, and from one iteration of the
loop over ``k`` to the next the halves swap, so one barrier per step suffices.
"""

from __future__ import annotations

import dataclasses

from .. import expr as E
from .. import stmt as S
from ..analysis import buffer_key
from ..functor import IRMutator, post_order_visit, uses_var
from .host_device import DIMS


@dataclasses.dataclass(frozen=True)
class _Access:
    """A shared buffer's storage (``buffer_key``: the copies of an allocation that loop
    partitioning makes are one storage), or one half of a double-buffered one: the half
    ``(var + parity) % 2``, for every value of ``var`` (``var`` None: the whole
    buffer)."""

    buffer: object
    var: E.Var | None = None
    parity: int = 0

    def overlaps(self, other: _Access) -> bool:
        if self.buffer is not other.buffer:
            return False
        return (self.var is None or other.var is None or self.var is not other.var
                or self.parity == other.parity)

    def next_iteration(self, var: E.Var) -> _Access:
        """This access as the next iteration of the loop over ``var`` sees it (the half
        ``(var + p) % 2`` of one iteration is ``(var + p + 1) % 2`` of the next)."""
        if self.var is not var:
            return self
        return dataclasses.replace(self, parity=1 - self.parity)


def _any_overlap(xs, ys) -> bool:
    return any(x.overlaps(y) for x in xs for y in ys)


@dataclasses.dataclass(frozen=True)
class _State:
    """Shared accesses (``_Access``) read and written since the last barrier."""

    reads: frozenset = frozenset()
    writes: frozenset = frozenset()

    def conflicts(self, other: _State) -> bool:
        # Two cooperative writes of one buffer write distinct elements (each thread its
        # share), so only read-after-write and write-after-read need a barrier.
        return _any_overlap(other.reads, self.writes) or _any_overlap(other.writes, self.reads)

    def __or__(self, other: _State) -> _State:
        return _State(self.reads | other.reads, self.writes | other.writes)

    def next_iteration(self, var: E.Var) -> _State:
        return _State(frozenset(a.next_iteration(var) for a in self.reads),
                      frozenset(a.next_iteration(var) for a in self.writes))


def _terms(e):
    if isinstance(e, E.Add):
        return _terms(e.a) + _terms(e.b)
    return [e]


def _half(index, half_size: int):
    """(var, parity) when ``index`` has a term ``(var + c) % 2 * half_size``, else None."""
    for term in _terms(index):
        if not isinstance(term, E.Mul):
            continue
        mod, size = (term.a, term.b) if isinstance(term.a, E.FloorMod) else (term.b, term.a)
        if not (isinstance(mod, E.FloorMod) and E.const_value(mod.b) == 2
                and E.const_value(size) == half_size):
            continue
        x = mod.a
        if isinstance(x, E.Var):
            return x, 0
        if isinstance(x, (E.Add, E.Sub)) and isinstance(x.a, E.Var) \
                and E.const_value(x.b) is not None:
            return x.a, E.const_value(x.b) % 2
    return None


def _access(buf, index, doubled: frozenset) -> _Access:
    key = buffer_key(buf)
    if key in doubled:
        half_size = 1
        for d in buf.shape[1:]:
            half_size *= E.const_value(d)
        half = _half(index, half_size)
        if half is not None:
            return _Access(key, *half)
    return _Access(key)


def _accesses(s, doubled: frozenset) -> _State:
    reads, writes = set(), set()

    def fn(n):
        if isinstance(n, E.Load) and n.buffer.scope == "shared":
            reads.add(_access(n.buffer, n.index, doubled))
        elif isinstance(n, S.Store) and n.buffer.scope == "shared":
            writes.add(_access(n.buffer, n.index, doubled))
        elif isinstance(n, S.MatrixLoad) and n.source.scope == "shared":
            reads.add(_access(n.source, n.offset, doubled))
        elif isinstance(n, S.MatrixStore) and n.dest.scope == "shared":
            writes.add(_access(n.dest, n.offset, doubled))

    post_order_visit(s, fn)
    return _State(frozenset(reads), frozenset(writes))


class _Planner:
    def __init__(self, launch: S.KernelLaunch, doubled: frozenset):
        self.doubled = doubled
        self.extent = {f"threadIdx.{d}": e for d, e in zip(DIMS, launch.block)}
        self.extent.update({f"blockIdx.{d}": e for d, e in zip(DIMS, launch.grid)})
        self.thread_vars: set = set()

    def uniform(self, s) -> bool:
        """Whether every thread of the block runs ``s``'s body the same number of times."""
        if isinstance(s, S.IfThenElse):
            return not uses_var(s.condition, self.thread_vars)
        if isinstance(s, S.For):
            if s.kind == "thread_binding":
                full = self.extent.get(s.thread_tag)
                return full is s.extent or (
                    full is not None and E.const_value(full) is not None
                    and E.const_value(full) == E.const_value(s.extent))
            return s.kind != "vectorized" and not uses_var(s.extent, self.thread_vars) \
                and not uses_var(s.min, self.thread_vars)
        return False

    def sync(self, s, state: _State) -> tuple:
        """(``s`` with barriers, the state after it)."""
        if isinstance(s, S.SeqStmt):
            out = []
            for c in s.seq:
                c, state = self.sync(c, state)
                out.append(c)
            return S.seq(*out), state
        if isinstance(s, (S.Allocate, S.LetStmt)):
            body, state = self.sync(s.body, state)
            return dataclasses.replace(s, body=body), state
        acc = _accesses(s, self.doubled)
        barrier = state.conflicts(acc)
        if barrier:
            state = _State()
        if isinstance(s, S.For) and self.uniform(s):
            s, state = self.sync_loop(s, state)
        elif isinstance(s, S.IfThenElse) and self.uniform(s):
            then, after_then = self.sync(s.then_case, state)
            other, after_else = (None, state) if s.else_case is None else \
                self.sync(s.else_case, state)
            s = dataclasses.replace(s, then_case=then, else_case=other)
            state = after_then | after_else
        else:
            state = state | acc
        return (S.seq(S.Barrier(), s) if barrier else s), state

    def sync_loop(self, s: S.For, state: _State) -> tuple:
        if s.kind == "thread_binding":
            if s.thread_tag.startswith("threadIdx"):
                # Block indices are the same for every thread of a block: conditions on
                # them do not diverge.
                self.thread_vars.add(s.loop_var)
            body, state = self.sync(s.body, state)
            return dataclasses.replace(s, body=body), state
        _, after_one = self.sync(s.body, state)
        # The second iteration starts with what the first left pending.
        body, after = self.sync(s.body, state | after_one.next_iteration(s.loop_var))
        return dataclasses.replace(s, body=body), after


class _Inserter(IRMutator):
    def __init__(self, doubled: frozenset):
        super().__init__()
        self.doubled = doubled

    def visit_KernelLaunch(self, s: S.KernelLaunch):
        body, _ = _Planner(s, self.doubled).sync(s.body, _State())
        return s if body is s.body else dataclasses.replace(s, body=body)


def insert_barriers(func: S.PrimFunc) -> S.PrimFunc:
    """``func`` with a barrier in each kernel wherever shared memory passes between
    threads (module docstring).

    Parameters
    ----------
    func : PrimFunc
        After ``split_host_device``.

    Returns
    -------
    PrimFunc

    Examples
    --------
    >>> func = insert_barriers(split_host_device(func))   # doctest: +SKIP
    """
    body = _Inserter(frozenset(func.attrs.get("double_buffered", ()))).visit(func.body)
    return func if body is func.body else func.with_body(body)
