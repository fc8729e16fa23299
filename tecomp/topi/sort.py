"""Selection along an axis (ONNX ``TopK``): the positions of the ``k`` largest or smallest
elements, in order.

The order is ONNX Runtime's: a NaN is greater than every number (first among the
largest, last among the smallest), and equal elements (NaNs among themselves) keep the
lower index first. It is a total order, so each element's place in it — its *rank*, the
number of elements before it — is a permutation of ``0 .. n - 1``, and the ``r``-th
output is the one element of rank ``r``. Both steps are reductions over the axis: the
ranks cost ``n * n`` comparisons per row, which suits the short axes TopK sees in models
(detections, beams, a few thousand candidates), not a sort of a long one.

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


def topk_indices(x, k, axis: int = -1, largest: int = 1, node: str = ""):
    """The int64 positions along ``axis`` of the ``k`` largest (``largest=0``: smallest)
    elements of ``x``, in order (see the module's docstring).

    Parameters
    ----------
    x : Tensor
    k : int or PrimExpr
        How many; at most the axis's length (checked at run time where that is
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
    j = te.reduce_axis((0, n), name="j")

    def rank(*p):
        other = p[:axis] + (j,) + p[axis + 1:]
        before = comes_before(x[other], x[p], j.var, p[axis], bool(largest))
        # Counted in the summed value, not a where= condition: a reduction split into
        # vector lanes guards its tail around the update, which then holds every read.
        return te.sum(before.astype("int32"), axis=j)

    inner = {"inner_axes": ndim - 1 - axis}
    ranks = te.compute(x.shape, rank, name="topk.rank", tag=TAG, attrs=inner)
    i = te.reduce_axis((0, n), name="i")
    where = f"node {node!r}: " if node else ""
    k_fits = None if None not in (kc, nc) else te.checked(
        k <= n, k.astype("int64"), f"{where}k={{value}} is larger than axis {axis} of "
                                   f"size {n}")

    def pick(*p):
        at = p[:axis] + (i,) + p[axis + 1:]
        hit = te.equal(ranks[at], p[axis].astype("int32"))
        if k_fits is not None:
            hit = k_fits & hit
        return te.sum(te.if_then_else(hit, i.var.astype("int64"), te.const(0, "int64")),
                      axis=i)

    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return te.compute(shape, pick, name="topk_indices", tag=TAG, attrs=inner)


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
