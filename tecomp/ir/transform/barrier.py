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
"""

from __future__ import annotations

import dataclasses

from .. import expr as E
from .. import stmt as S
from ..functor import IRMutator, post_order_visit, uses_var
from .host_device import DIMS


@dataclasses.dataclass(frozen=True)
class _State:
    """Shared buffers read and written since the last barrier."""

    reads: frozenset = frozenset()
    writes: frozenset = frozenset()

    def conflicts(self, other: _State) -> bool:
        # Two cooperative writes of one buffer write distinct elements (each thread its
        # share), so only read-after-write and write-after-read need a barrier.
        return bool(other.reads & self.writes or other.writes & self.reads)

    def __or__(self, other: _State) -> _State:
        return _State(self.reads | other.reads, self.writes | other.writes)


def _accesses(s) -> _State:
    reads, writes = set(), set()

    def fn(n):
        if isinstance(n, E.Load) and n.buffer.scope == "shared":
            reads.add(n.buffer)
        elif isinstance(n, S.Store) and n.buffer.scope == "shared":
            writes.add(n.buffer)

    post_order_visit(s, fn)
    return _State(frozenset(reads), frozenset(writes))


class _Planner:
    def __init__(self, launch: S.KernelLaunch):
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
        acc = _accesses(s)
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
        body, after = self.sync(s.body, state | after_one)
        return dataclasses.replace(s, body=body), after


class _Inserter(IRMutator):
    def visit_KernelLaunch(self, s: S.KernelLaunch):
        body, _ = _Planner(s).sync(s.body, _State())
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
    body = _Inserter().visit(func.body)
    return func if body is func.body else func.with_body(body)
