"""Selection along an axis (ONNX ``TopK``): the positions of the ``k`` largest or smallest
elements, in order.

The order is ONNX Runtime's: a NaN is greater than every number (first among the
largest, last among the smallest), and equal elements (NaNs among themselves) keep the
lower index first. It is a total order, so each element's place in it — its *rank*, the
number of elements before it — is a permutation of ``0 .. n - 1``, and the ``r``-th
output is the one element of rank ``r``. Both steps are reductions over the axis. Ranking
every element among all costs ``n * n`` comparisons per row; on a long static axis the
elements are first ranked within blocks, and only each block's ``k`` first among each
other (:func:`block_size`), which brings a vocabulary of 32000 with ``k = 50`` from 1e9
comparisons to 2.4e7. A symbolic axis is ranked in one pass.

TopK's values are ``x`` gathered at these positions (``gather_elements``), so the
operator here has one output, the int64 indices; they are sorted whatever ONNX's
``sorted`` says (with ``sorted=0`` the order is the implementation's to choose).
"""

from __future__ import annotations

from .. import te
from ..errors import ShapeError
from ..ir import dtype as dt
from ..ir import expr as E
from ..te.tensor import ComputeOp
from ..te import create_schedule
from .cpu_schedule import (
    as_list,
    const_int,
    inline_injective,
    layout_reduction,
    schedule_injective_stage,
)
from .register import register_llvm
from .transform import normalize_axis

TAG = "comm_reduce"


def comes_before(a, b, ia, ib, largest: bool):
    """Whether element ``a`` at position ``ia`` comes before element ``b`` at ``ib`` in
    TopK's order (a bool expression): the larger first (the smaller with ``largest``
    false), a NaN greater than every number, ties broken by the lower position."""
    first = a > b if largest else a < b
    same = te.equal(a, b)
    if dt.is_float(a.dtype):
        nan_a, nan_b = te.not_equal(a, a), te.not_equal(b, b)
        first = first | ((nan_a & ~nan_b) if largest else (nan_b & ~nan_a))
        same = same | (nan_a & nan_b)
    return first | (same & (ia < ib))


def _with_axis(p, axis: int, i):
    return p[:axis] + (i,) + p[axis + 1:]


def _ranks(shape, axis: int, group, read, largest: bool, name: str):
    """Each candidate's rank among the candidates of its group, the ``group`` consecutive
    positions along ``axis`` it lies in (all of them for ``group=None``): how many valid
    ones come before it. ``read(index) -> (valid, value, position)`` is the candidate at
    an index of ``shape``."""
    u = te.reduce_axis((0, shape[axis] if group is None else group), name="u")

    def body(*p):
        first = 0 if group is None else p[axis] // group * group
        ok, value, position = read(_with_axis(p, axis, first + u))
        _, mine, my_position = read(p)
        # Counted in the summed value, not a where= condition: a reduction split into
        # vector lanes guards its tail around the update, which then holds every read.
        before = ok & comes_before(value, mine, position, my_position, largest)
        return te.sum(before.astype("int32"), axis=u)

    return te.compute(shape, body, name=name, tag=TAG,
                      attrs={"inner_axes": len(shape) - 1 - axis})


def _picks(shape, axis: int, group, per_group, ranks, read, name: str, check=None):
    """Slot ``q`` along ``axis`` holds the position of the candidate of rank ``q %
    per_group`` in group ``q // per_group`` of ``ranks`` (see :func:`_ranks`), or -1
    where the group has fewer valid candidates; ``group=None``: one group, the whole
    axis of ``ranks``. A failed ``check`` (a run-time check) picks nothing."""
    t = te.reduce_axis((0, ranks.shape[axis] if group is None else group), name="t")

    def body(*p):
        q = p[axis]
        at = _with_axis(p, axis, t if group is None else q // per_group * group + t)
        ok, _, position = read(at)
        rank = q if group is None else q % per_group
        hit = ok & te.equal(ranks[at], rank.astype("int32"))
        if check is not None:
            hit = check & hit
        return te.max(te.if_then_else(hit, position, te.const(-1, "int64")), axis=t)

    return te.compute(shape, body, name=name, tag=TAG,
                      attrs={"inner_axes": len(shape) - 1 - axis})


def block_size(n: int, k: int) -> int | None:
    """The block of a first pass that keeps the ``k`` first of every block of the axis
    (``n`` elements), or None where one pass over the axis is cheaper.

    One pass ranks every element among all ``n``: ``n * n`` comparisons. With blocks of
    ``b``, each element is ranked within its block (``n * b``), and only the ``k`` first of
    each block, ``c = ceil(n / b) * min(k, b)`` candidates, among each other (``c * c``):
    every element of the overall ``k`` first is among the ``k`` first of its block. The
    block is the power of two that costs least, if that is under half of one pass: for
    ``n = 32000, k = 50``, 512 (2.4e7 comparisons instead of 1e9)."""
    best, block = n * n // 2, None
    b = 16
    while b < n:
        c = -(-n // b) * min(k, b)
        cost = n * b + c * c + c * k
        if cost < best:
            best, block = cost, b
        b *= 2
    return block


def topk_indices(x, k, axis: int = -1, largest: int = 1, node: str = ""):
    """The int64 positions along ``axis`` of the ``k`` largest (``largest=0``: smallest)
    elements of ``x``, in order (see the module's docstring).

    Parameters
    ----------
    x : Tensor
    k : int or PrimExpr
        How many; at most the axis's length (checked at run time where either is
        symbolic: a :class:`~tecomp.errors.RuntimeCheckError` names ``node``).
    axis : int
        The axis (negative counts from the end).
    largest : int
        1: the largest first; 0: the smallest first.
    node : str
        The graph node, named by the run-time check of ``k``.

    Returns
    -------
    Tensor
        int64, of ``x``'s shape with ``axis`` of length ``k``.

    Raises
    ------
    ShapeError
        ``k`` is less than 1 or larger than a static axis.
    """
    ndim = len(x.shape)
    axis = normalize_axis(axis, ndim)
    n = x.shape[axis]
    k = E.as_expr(k)
    kc, nc = const_int(k), const_int(n)
    if kc is not None and (kc < 1 or (nc is not None and kc > nc)):
        # k = 0 would give empty outputs, and the library builds no zero-size tensor.
        raise ShapeError(f"topk: k={kc} must be in 1 .. {nc if nc is not None else n} (the "
                         f"length of axis {axis})")
    largest = bool(largest)
    block = block_size(nc, kc) if None not in (kc, nc) else None

    def element(p):
        """The element at a position of the axis (past its end where blocks pad it)."""
        i = p[axis]
        if block is None or nc % block == 0:
            return te.const(True, "bool"), x[p], i.astype("int64")
        inside = i < n
        return inside, te.if_then_else(inside, x[p], te.const(0, x.dtype)), i.astype("int64")

    read, group, length = element, None, n
    if block is not None:
        per_block = min(kc, block)
        padded = _with_axis(x.shape, axis, -(-nc // block) * block)
        ranks = _ranks(padded, axis, block, element, largest, "topk.block_rank")
        length = padded[axis] // block * per_block
        firsts = _picks(_with_axis(x.shape, axis, length), axis, block, per_block, ranks,
                        element, "topk.block_firsts")

        def read(p):
            """The candidate at a position of ``firsts``: the element it picked."""
            at = firsts[p]
            ok = at >= te.const(0, "int64")
            value = te.if_then_else(ok, x[_with_axis(p, axis, at.astype("int32"))],
                                    te.const(0, x.dtype))
            return ok, value, at

    ranks = _ranks(_with_axis(x.shape, axis, length), axis, group, read, largest,
                   "topk.rank")
    where = f"node {node!r}: " if node else ""
    k_fits = None if None not in (kc, nc) else te.checked(
        k <= n, k.astype("int64"), f"{where}k={{value}} is larger than axis {axis} of "
                                   f"size {n}")
    return _picks(_with_axis(x.shape, axis, k), axis, None, None, ranks, read,
                  "topk_indices", check=k_fits)


def schedule_topk(cfg, outs):
    """Schedule a TopK group: each reduction (the ranks, the picks) in its own loop nest
    at root, parallel over its outer axes (:func:`layout_reduction`), and any other
    output as an injective stage. The picks read every rank of a row, so computing the
    ranks inside the picks' loop would repeat them for every pick.

    Parameters
    ----------
    cfg : config entity or None
        Unused (the schedule has no knobs).
    outs : Tensor or list of Tensor
        The group's outputs.

    Returns
    -------
    Schedule
    """
    outs = as_list(outs)
    s = create_schedule([t.op for t in outs])
    inline_injective(s, outs)
    for st in list(s.stages):  # in producer order; layout_reduction may add stages
        if isinstance(st.origin_op, ComputeOp) and st.origin_op.is_reduction:
            layout_reduction(s, st.origin_op.output(0))
    for t in outs:
        if not t.op.is_reduction:
            schedule_injective_stage(s, t)
    return s


register_llvm("topk_indices", topk_indices, schedule_topk)
