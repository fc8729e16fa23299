"""Simulated GPU execution of a ``KernelLaunch``, so CUDA schedules are checked against
numpy on machines without a GPU.

Blocks run one after another. Within a block, every thread has its own interpreter
(its block and thread indices, its local buffers) and the block's shared buffers are
common to all; the threads advance phase by phase: each runs until its next barrier,
and only when all have arrived does the next phase start. A barrier that some threads
reach and others do not (divergent control flow) is an error, as it would hang or
corrupt a real GPU.

A warp shuffle (``WarpShuffle``) is a barrier for the 32 threads of one warp: each warp's
threads run until all of them reach the same shuffle, exchange their values, and go on
to the next. A shuffle that some threads of a warp reach and others do not is an error.
The tensor-core statements (``MatrixLoad`` and the others) are warp collectives the same
way, their operands the same in every thread of the warp (checked); a warp's fragments
are the arrays of its first thread, which runs each of them once for the warp, reading
and writing shared memory as that thread.

Within a phase, the order in which threads run is undefined on a GPU, so a shared
element written by one thread and read or written by another in the same phase is a
race: the simulation reports it (naming the kernel, buffer, element and threads) rather
than producing whatever order it happened to pick. A missing barrier is caught this way.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..errors import TecompError
from . import expr as E
from . import stmt as S
from .buffer import buffer_key
from .functor import post_order_visit
from .transform.host_device import DIMS


class RaceError(TecompError):
    """Threads of a simulated GPU block conflict on shared memory between two barriers."""


class _Phase:
    """Who wrote and read each shared element since the last barrier."""

    def __init__(self, kernel: str):
        self.kernel = kernel
        self.thread = None
        self.writer: dict = {}
        self.readers: dict = {}

    def clear(self):
        self.writer.clear()
        self.readers.clear()


class _SharedArray:
    """A block's shared buffer: bounds-checked, every access checked for races."""

    def __init__(self, arr, name: str, phase: _Phase):
        self.arr, self.name, self.phase, self.size = arr, name, phase, arr.size

    def _race(self, i, what, other):
        p = self.phase
        return RaceError(
            f"kernel {p.kernel}: thread {p.thread} {what} {self.name}[{i}], which thread "
            f"{other} accessed since the last barrier; a __syncthreads() is missing "
            f"between them"
        )

    def __getitem__(self, i):
        if not 0 <= i < self.size:
            raise TecompError(f"interpreter: load from {self.name}[{i}] out of bounds")
        p = self.phase
        w = p.writer.get((id(self), i))
        if w is not None and w != p.thread:
            raise self._race(i, "reads", w)
        p.readers.setdefault((id(self), i), set()).add(p.thread)
        return self.arr[i]

    def __setitem__(self, i, v):
        p = self.phase
        key = (id(self), i)
        w = p.writer.get(key)
        if w is not None and w != p.thread:
            raise self._race(i, "writes", w)
        others = p.readers.get(key, set()) - {p.thread}
        if others:
            raise self._race(i, "writes", min(others))
        p.writer[key] = p.thread
        self.arr[i] = v


class _Thread:
    """Runs one thread's part of a kernel body as a generator that stops at barriers
    (yielding None) and at warp collectives (yielding the statement and the thread's
    value or operands; a shuffle's received value is sent back in)."""

    def __init__(self, interp, with_barrier: set, lane: int):
        self.interp = interp
        self.lane = lane
        self.with_barrier = with_barrier  # ids of the nodes that contain a barrier

    def run(self, s):
        it = self.interp
        if id(s) not in self.with_barrier:
            it.stmt(s)
            return
        t = type(s)
        if t is S.Barrier:
            yield
        elif t is S.WarpShuffle:
            it.store(s.buffer, s.index, (yield s, it.expr(s.value)))
        elif t in S.WARP_COLLECTIVES:
            yield s, tuple(it.expr(getattr(s, f)) for f in t.child_fields)
            if self.lane == 0:
                run_matrix(it, s)
        elif t is S.SeqStmt:
            for c in s.seq:
                yield from self.run(c)
        elif t is S.For:
            lo = int(it.expr(s.min))
            idx = it.thread_loop_index(s)
            if idx is not None:
                if idx < int(it.expr(s.extent)):
                    it.env[s.loop_var] = _index(lo + idx, s.loop_var)
                    yield from self.run(s.body)
                return
            for v in range(lo, lo + int(it.expr(s.extent))):
                it.env[s.loop_var] = _index(v, s.loop_var)
                yield from self.run(s.body)
        elif t is S.Allocate:
            if s.buffer.scope != "shared":
                it.mem[s.buffer] = it.allocate(s.buffer)
            yield from self.run(s.body)
        elif t is S.LetStmt:
            it.env[s.var] = it.expr(s.value)
            yield from self.run(s.body)
        elif t is S.IfThenElse:
            if it.expr(s.condition):
                yield from self.run(s.then_case)
            elif s.else_case is not None:
                yield from self.run(s.else_case)
        else:
            raise TecompError(f"interpreter: cannot run {t.__name__} in a kernel")


def _index(v: int, var):
    return np.dtype(var.dtype).type(v)



def _nodes_with_barrier(body) -> set:
    marked: set = set()

    def fn(n):
        if isinstance(n, (S.Barrier, *S.WARP_COLLECTIVES)) or any(
                id(c) in marked for c in _stmt_children(n)):
            marked.add(id(n))

    post_order_visit(body, fn)
    return marked


def _stmt_children(n) -> tuple:
    if isinstance(n, S.SeqStmt):
        return n.seq
    return tuple(getattr(n, f) for f in ("body", "then_case", "else_case")
                 if isinstance(getattr(n, f, None), S.Stmt))


def run_kernel(interp, launch: S.KernelLaunch) -> None:
    """Run ``launch`` with ``interp``'s variables and global buffers (see the module
    docstring).

    Raises
    ------
    RaceError
        When two threads of a block access a shared element between two barriers and
        one of them writes it.
    TecompError
        When some threads of a block reach a barrier and others finish instead, or some
        threads of a warp reach a shuffle and others do not.
    """
    grid = [int(interp.expr(d)) for d in launch.grid]
    block = [int(interp.expr(d)) for d in launch.block]
    with_barrier = _nodes_with_barrier(launch.body)
    shared_bufs = []

    def fn(n):
        if isinstance(n, S.Allocate) and n.buffer.scope == "shared":
            shared_bufs.append(n.buffer)

    post_order_visit(launch.body, fn)
    phase = _Phase(launch.name)
    for bz, by, bx in itertools.product(*(range(g) for g in reversed(grid))):
        # One array per storage: the copies of an allocation that loop partitioning
        # makes share it, as they share one declaration in the CUDA source.
        shared, storage = {}, {}
        for buf in shared_bufs:
            key = buffer_key(buf)
            if key not in storage:
                storage[key] = _SharedArray(interp.allocate(buf).arr, buf.name, phase)
            shared[buf] = storage[key]
        threads = []
        for tz, ty, tx in itertools.product(*(range(b) for b in reversed(block))):
            index = {f"blockIdx.{d}": v for d, v in zip(DIMS, (bx, by, bz))}
            index.update({f"threadIdx.{d}": v for d, v in zip(DIMS, (tx, ty, tz))})
            t = _Thread(interp.fork(index, shared), with_barrier, len(threads) % WARP)
            threads.append(((tx, ty, tz), t.run(launch.body)))
        phase.clear()
        where = f"kernel {launch.name}, block {(bx, by, bz)}"
        while threads:
            waiting, done = [], []
            for first in range(0, len(threads), WARP):
                _run_warp(threads[first:first + WARP], phase, where, waiting, done)
            if waiting and done:
                raise TecompError(
                    f"{where}: {len(waiting)} threads wait at a barrier that {len(done)} "
                    f"others (e.g. thread {done[0]}) never reach; a __syncthreads() under "
                    f"divergent control flow"
                )
            threads = waiting
            phase.clear()


#: Threads per warp: the threads of a block, numbered x fastest, in groups of 32.
WARP = 32


def _run_warp(warp: list, phase: _Phase, where: str, waiting: list, done: list) -> None:
    """Run the (thread index, generator) pairs of one warp to their next barrier or to
    their end, through each warp collective they reach together (exchanging values at a
    shuffle); appends to ``waiting`` those at a barrier, to ``done`` the thread indices of
    those that ended."""
    sent = [None] * len(warp)
    active = list(range(len(warp)))
    while active:
        shuffles = {}
        for lane in active:
            tid, gen = warp[lane]
            phase.thread = tid
            try:
                got = gen.send(sent[lane])
            except StopIteration:
                done.append(tid)
                continue
            if got is None:
                waiting.append((tid, gen))
            else:
                shuffles[lane] = got
        if not shuffles:
            return
        shuffle = next(iter(shuffles.values()))[0]
        what = "warp shuffle" if type(shuffle) is S.WarpShuffle else type(shuffle).__name__
        if len(shuffles) != len(active) or any(s is not shuffle for s, _ in shuffles.values()):
            apart = next(warp[lane][0] for lane in active
                         if lane not in shuffles or shuffles[lane][0] is not shuffle)
            raise TecompError(
                f"{where}: thread {warp[next(iter(shuffles))][0]} reaches a {what} that "
                f"thread {apart} of its warp does not; a warp collective under divergent "
                f"control flow"
            )
        active = list(shuffles)
        if type(shuffle) is not S.WarpShuffle:
            operands = shuffles[active[0]][1]
            odd = next((lane for lane in active if shuffles[lane][1] != operands), None)
            if odd is not None:
                raise TecompError(
                    f"{where}: the threads of a warp run a {what} with different operands "
                    f"(thread {warp[active[0]][0]}: {operands}, thread {warp[odd][0]}: "
                    f"{shuffles[odd][1]}); they must be the same in the whole warp")
            sent = [None] * len(warp)
            continue
        width, offset = shuffle.width, shuffle.offset
        for lane in shuffles:
            source = lane + offset
            if source // width != lane // width:
                source = lane  # past the end of its segment: its own value
            elif source not in shuffles:
                raise TecompError(
                    f"{where}: thread {warp[lane][0]} reads lane {source} of its warp in a "
                    f"shuffle of width {width}, which no thread of the block is"
                )
            sent[lane] = shuffles[source][1]


def _tile(it, buf, index):
    """The 16 x 16 view of fragment number ``index`` of ``buf`` (this thread's array)."""
    arr = it.mem[buf].arr
    size = S.FRAGMENT * S.FRAGMENT
    f = int(it.expr(index))
    if not 0 <= f < arr.size // size:
        raise TecompError(f"interpreter: fragment {buf.name}[{f}] out of range "
                          f"({arr.size // size} fragments)")
    return arr[f * size:(f + 1) * size].reshape(S.FRAGMENT, S.FRAGMENT)


def _block(it, buf, offset, stride):
    """The flat indices of the 16 x 16 tile of ``buf`` at ``offset``, rows ``stride``
    apart; the tile must start 32 bytes and its rows 16 bytes apart from the buffer's
    start (the tensor cores' alignment, which a GPU faults on)."""
    start, step = int(it.expr(offset)), int(it.expr(stride))
    size = np.dtype(buf.dtype).itemsize
    if start * size % 32 or step * size % 16:
        raise TecompError(
            f"interpreter: a tile of {buf.name} at element {start} with rows {step} apart: "
            f"tensor-core tiles start at multiples of 32 bytes and their rows 16 bytes "
            f"apart ({32 // size} and {16 // size} elements of {buf.dtype})")
    n = np.arange(S.FRAGMENT)
    return start + n[:, None] * step + n[None, :]


def run_matrix(it, s) -> None:
    """Run the tensor-core statement ``s`` for a warp, on the fragments of thread ``it``
    (the warp's first): loads and stores go element by element through the buffer, so
    bounds and races are checked as for any access."""
    t = type(s)
    if t is S.MatrixFill:
        _tile(it, s.fragment, s.index)[...] = it.expr(s.value)
    elif t is S.MatrixLoad:
        src = it.mem[s.source]
        idx = _block(it, s.source, s.offset, s.stride)
        if s.layout == "col_major":
            idx = idx.T
        tile = _tile(it, s.fragment, s.index)
        for (r, c), i in np.ndenumerate(idx):
            tile[r, c] = src[int(i)]  # bounds- and race-checked
        if tile.dtype == np.float32:  # TF32 operands: 10 bits of mantissa, nearest, ties away
            bits = tile.view(np.uint32)
            bits[...] = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    elif t is S.MatrixStore:
        tile = _tile(it, s.fragment, s.index)
        for (r, c), i in np.ndenumerate(_block(it, s.dest, s.offset, s.stride)):
            it.store(s.dest, E.IntImm(int(i), "int64"), tile[r, c])
    elif t is S.MatrixMultiplyAdd:
        a = _tile(it, s.a, s.a_index).astype(np.float64)
        b = _tile(it, s.b, s.b_index).astype(np.float64)
        d = _tile(it, s.d, s.d_index)
        d[...] = (a @ b + _tile(it, s.c, s.c_index)).astype(d.dtype)
