"""Cross-thread reductions: a reduction whose one reduced axis is bound to
``threadIdx.x``, lowered to warp shuffles, then shared memory.

Each thread of the bound loop holds one value (its rfactor partial, say). The threads of
each warp fold their values into lane 0 by shuffles at offsets 16, 8, ..., 1: five
steps, no memory, no barrier. Where the loop is wider than a warp, the warps' lane 0s
write their results to a small shared array and the first warp folds those the same way
(the barrier between the write and the read is placed by
:func:`tecomp.ir.transform.insert_barriers`). Thread 0 then stores the result, which a
consumer in the same block reads from shared memory after the next barrier.

This replaces what a schedule could say without it: each partial stored to shared
memory and one thread combining all of them, ``T`` dependent steps for ``T`` threads,
with the other threads idle.
"""

from __future__ import annotations

from ..errors import LoweringError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import make_buffer
from ..ir.functor import substitute

WARP = 32


def check_extent(stage_name: str, extent) -> int:
    """The constant number of threads of a cross-thread reduction of ``stage_name``: a
    power of two up to a warp, or whole warps (at most 32 of them)."""
    n = E.const_value(extent)
    whole = n is not None and (n <= WARP and n & (n - 1) == 0
                               or n % WARP == 0 and n <= WARP * WARP)
    if not whole:
        raise LoweringError(
            f"stage {stage_name}: its reduction axis bound to threadIdx.x has extent "
            f"{extent}; a cross-thread reduction needs a constant power of two up to "
            f"{WARP} or a multiple of {WARP} up to {WARP * WARP} (split the axis by such a "
            f"factor and rfactor the rest)"
        )
    return n


def _offsets(lanes: int) -> list:
    """Shuffle offsets that fold ``lanes`` values (padded to a power of two) into the
    first: half the padded count, then halving down to 1."""
    width = 1
    while width < lanes:
        width *= 2
    return [width >> k for k in range(1, width.bit_length())]


def cross_thread_reduce(name: str, combiner, value, buffer, index, thread: E.Var,
                        extent: int) -> S.Stmt:
    """The statement by which the ``extent`` threads of ``thread`` (``threadIdx.x``)
    combine their ``value`` with ``combiner``, and thread 0 stores the result to
    ``buffer[index]``.

    Parameters
    ----------
    name : str
        A prefix for the buffers it allocates.
    combiner : CommReducer
        A single-value reducer (``lhs``, ``rhs``, ``result``, ``identity``).
    value : PrimExpr
        Each thread's value (the reduction's source at the thread's index, with any
        condition already folded in as the identity).
    buffer, index
        Where the result goes.
    """
    dtype = value.dtype
    acc = make_buffer(f"{name}_acc", dtype, (1,), "local")
    got = make_buffer(f"{name}_shfl", dtype, (1,), "local")
    zero = E.IntImm(0, "int32")
    held = E.Load(acc, zero, dtype)

    def fold(lanes: int, width: int) -> list:
        steps = []
        for offset in _offsets(lanes):
            combined = substitute(combiner.result[0], {
                combiner.lhs[0]: held, combiner.rhs[0]: E.Load(got, zero, dtype)})
            steps += [S.WarpShuffle(got, held, zero, offset, width),
                      S.Store(acc, combined, zero)]
        return steps

    t = E.cast("int32", thread)
    body = [S.Store(acc, value, zero), *fold(min(extent, WARP), min(extent, WARP))]
    if extent > WARP:
        warps = extent // WARP
        partials = make_buffer(f"{name}_warps", dtype, (warps,), "shared")
        lane, warp = t % WARP, t // WARP
        first = S.seq(
            S.Store(acc, combiner.identity[0], zero),
            S.IfThenElse(t < warps, S.Store(acc, E.Load(partials, t, dtype), zero)),
            *fold(warps, WARP),
        )
        body = [S.Allocate(partials, S.seq(
            *body,
            S.IfThenElse(E.binary(E.EQ, lane, 0), S.Store(partials, held, warp)),
            S.IfThenElse(t < WARP, first),
        ))]
    body.append(S.IfThenElse(E.binary(E.EQ, t, 0), S.Store(buffer, held, index)))
    return S.Allocate(acc, S.Allocate(got, S.seq(*body)))
