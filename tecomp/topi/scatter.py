"""Scatter operators (ONNX ``ScatterElements``, ``ScatterND``): a copy of ``data`` with
``updates`` written at the positions ``indices`` name, or combined with what is there.

Each output element is a reduction over the updates that may land on it, started from
the data element (``init=``) and taking those whose index names it (``where=``), in the
order the updates come: along the axis (ScatterElements), row after row of the
flattened index rows (ScatterND). ONNX Runtime applies updates one after the other, so
that order decides duplicates: with ``reduction="none"`` the last update wins, ``add``
and ``mul`` accumulate left to right, and ``max``/``min`` compare as its
``acc > u ? acc : u`` does (a NaN stays until the next update replaces it, a NaN update
replaces the value so far). The reduction therefore must not be split into partial
results: a reduction with ``init=`` cannot be factored (``Schedule.rfactor`` refuses
it), so the schedule keeps its loop in order.

Every index is checked once per call, in a pass over the indices before the output's
loops (:func:`te.checked`): one outside ``[-dim, dim)`` makes the call raise
:class:`~tecomp.errors.RuntimeCheckError` naming ``node`` and the first bad index, and
no update is taken. Negative indices count from the end.

Cost: each output element scans the updates that can reach it: ScatterElements the
indices along the axis (``numel(data) * indices.shape[axis]``), ScatterND every index
row (``numel(data) * rows``), which suits the cache writes and masks models scatter
with, not a permutation of a large tensor.
"""

from __future__ import annotations

from .. import te
from ..errors import ShapeError
from ..ir import expr as E
from .cpu_schedule import const_int, schedule_reduce
from .register import register_llvm
from .transform import _checked_index, normalize_axis
from .utils import shape_text

TAG = "comm_reduce"


def _last(acc, update):
    return update


#: How an update combines with the value so far, per ONNX ``reduction``: each reducer
#: takes ``(acc, update)`` in that order (``te.max``'s ``Max(acc, u)`` is ``acc > u ? acc
#: : u``, the comparison ONNX Runtime makes).
REDUCERS = {
    "none": te.comm_reducer(_last, lambda dtype: E.make_const(0, dtype), name="scatter"),
    "add": te.sum,
    "mul": te.prod,
    "max": te.max,
    "min": te.min,
}


def _reducer(reduction: str, op: str):
    if reduction not in REDUCERS:
        raise ShapeError(f"{op}: reduction={reduction!r} is not supported; allowed: "
                         f"{', '.join(REDUCERS)}")
    return REDUCERS[reduction]


def _same_dim(a, b) -> bool:
    """Whether dimensions ``a`` and ``b`` are known to be equal (equal constants, or the
    same symbolic expression)."""
    return a is b or (const_int(a) is not None and const_int(a) == const_int(b))


def _position(i, dim):
    """Where ONNX index ``i`` points in an axis of ``dim`` elements (a negative one counts
    from the end), in the index's dtype: an int64 index is not cut to 32 bits."""
    d = E.as_expr(dim).astype(i.dtype)
    return te.if_then_else(i < te.const(0, i.dtype), i + d, i)


def _indices_fit(op: str, node: str, rows, fits, conditions=()):
    """A one-element stage that checks every index once per call, before the output's
    loops: 1 where they all fit, else 0 and a failed run-time check naming ``node`` and
    the first bad index. ``fits(row) -> bool expression`` checks the indices of one
    position of ``rows`` (:func:`_checked_index`); ``conditions`` are shape conditions
    ``(cond, value, message)`` only the run can decide.

    Checking here rather than in each output element costs one read per index, and also
    rejects indices into data without elements (an axis of size 0), where the output's
    loops run no iteration. It is a reduction so that the schedule keeps it a stage of its
    own, computed once, rather than inlining it into every output element."""
    axes = [te.reduce_axis((0, d), name=f"c{j}") for j, d in enumerate(rows)] or [
        te.reduce_axis((0, 1), name="c")]
    where = f"node {node!r}: " if node else ""

    def body(_):
        ok = fits(tuple(axes[:len(rows)]))
        for cond, value, message in conditions:
            ok = te.checked(cond, value, where + message) & ok
        return te.min(ok.astype("int32"), axis=axes)

    return te.compute((1,), body, name=f"{op}.indices_fit", tag=TAG)


def scatter_elements(data, indices, updates, axis: int = 0, reduction: str = "none",
                     node: str = ""):
    """ONNX ScatterElements: ``out = data``, then for every position ``p`` of
    ``indices``, ``out[p with p[axis] = indices[p]]`` combined with ``updates[p]``.

    Parameters
    ----------
    data : Tensor
    indices : Tensor
        Integer, of ``data``'s rank; no larger than ``data`` on the axes other than
        ``axis`` (where a size is symbolic, a run-time check naming ``node``).
    updates : Tensor
        Of ``indices``' shape and ``data``'s dtype.
    axis : int
        The axis the indices index (negative counts from the end).
    reduction : str
        ``"none"`` (the last update wins), ``"add"``, ``"mul"``, ``"max"`` or ``"min"``.
    node : str
        The graph node, named by a failed index check.

    Returns
    -------
    Tensor
        Of ``data``'s shape and dtype.

    Raises
    ------
    ShapeError
        The ranks or shapes do not fit, or ``reduction`` is not one of the above.
    """
    reducer = _reducer(reduction, "scatter_elements")
    ndim = len(data.shape)
    axis = normalize_axis(axis, ndim)
    if len(indices.shape) != ndim or len(updates.shape) != ndim:
        raise ShapeError(f"scatter_elements: data {shape_text(data.shape)}, indices "
                         f"{shape_text(indices.shape)} and updates "
                         f"{shape_text(updates.shape)} must have the same rank")
    for d, (di, du, dd) in enumerate(zip(indices.shape, updates.shape, data.shape)):
        if None not in (const_int(di), const_int(du)) and const_int(di) != const_int(du):
            raise ShapeError(f"scatter_elements: updates {shape_text(updates.shape)} must "
                             f"have the shape of indices {shape_text(indices.shape)}")
        if d != axis and None not in (const_int(di), const_int(dd)) and (
                const_int(di) > const_int(dd)):
            raise ShapeError(f"scatter_elements: indices {shape_text(indices.shape)} are "
                             f"larger than data {shape_text(data.shape)} on axis {d}")
    k = te.reduce_axis((0, indices.shape[axis]), name="k")
    # Output positions past the indices' extent on another axis receive no update; where
    # the extents may differ, the index is read only inside them.
    bounded = [d for d in range(ndim)
               if d != axis and not _same_dim(indices.shape[d], data.shape[d])]
    fit = _indices_fit(
        "scatter_elements", node, indices.shape,
        lambda q: _checked_index(indices[q], data.shape[axis], axis, node)[0],
        [(E.as_expr(indices.shape[d]) <= data.shape[d], E.as_expr(indices.shape[d]),
          f"indices have {{value}} elements on axis {d}, more than the data's "
          f"{data.shape[d]}") for d in bounded])

    def body(*p):
        at = p[:axis] + (k,) + p[axis + 1:]
        i = indices[at]
        hit = te.equal(_position(i, data.shape[axis]), p[axis].astype(i.dtype))
        if bounded:
            inside = te.all(*[p[d] < indices.shape[d] for d in bounded])
            hit = te.if_then_else(inside, hit, te.const(False, "bool"))
        return reducer(updates[at], axis=k, where=(fit[0] > 0) & hit, init=data[p])

    return te.compute(data.shape, body, name="scatter_elements", tag=TAG,
                      attrs={"inner_axes": ndim - 1 - axis})


def scatter_nd(data, indices, updates, reduction: str = "none", node: str = ""):
    """ONNX ScatterND: ``out = data``, then for every row ``r`` of ``indices`` (all axes
    but the last), ``out[indices[r]]`` (a position, or the slice at a position of the
    leading axes) combined with ``updates[r]``.

    Parameters
    ----------
    data : Tensor
        Of rank ``n``.
    indices : Tensor
        Integer, of shape ``rows + (k,)`` with a static ``k`` in ``1 .. n``.
    updates : Tensor
        Of shape ``rows + data.shape[k:]`` and ``data``'s dtype.
    reduction : str
        ``"none"`` (the last row wins), ``"add"``, ``"mul"``, ``"max"`` or ``"min"``.
    node : str
        The graph node, named by a failed index check.

    Returns
    -------
    Tensor
        Of ``data``'s shape and dtype.

    Raises
    ------
    ShapeError
        The shapes do not fit, or ``reduction`` is not one of the above.
    """
    reducer = _reducer(reduction, "scatter_nd")
    ndim = len(data.shape)
    if not indices.shape:
        raise ShapeError("scatter_nd: indices must have rank 1 or more")
    k = const_int(indices.shape[-1])
    if k is None or not 1 <= k <= ndim:
        raise ShapeError(f"scatter_nd: the last axis of indices {shape_text(indices.shape)} "
                         f"must have a static size in 1 .. {ndim} (data's rank)")
    rows = tuple(indices.shape[:-1])
    want = rows + tuple(data.shape[k:])
    if len(updates.shape) != len(want) or not all(
            const_int(a) is None or const_int(b) is None or const_int(a) == const_int(b)
            for a, b in zip(updates.shape, want)):
        raise ShapeError(f"scatter_nd: updates {shape_text(updates.shape)} must have the "
                         f"shape {shape_text(want)} (indices' rows, then data's axes from "
                         f"{k})")
    # One index row of a 1-D ``indices`` still takes a (one-point) reduction axis.
    red = [te.reduce_axis((0, d), name=f"r{j}") for j, d in enumerate(rows)] or [
        te.reduce_axis((0, 1), name="r")]
    row = tuple(red[:len(rows)])

    fit = _indices_fit("scatter_nd", node, rows, lambda q: te.all(*[
        _checked_index(indices[q + (j,)], data.shape[j], j, node)[0] for j in range(k)]))

    def body(*p):
        at = [indices[row + (j,)] for j in range(k)]
        hit = te.all(*[te.equal(_position(i, data.shape[j]), p[j].astype(i.dtype))
                       for j, i in enumerate(at)])
        return reducer(updates[row + p[k:]], axis=red, where=(fit[0] > 0) & hit,
                       init=data[p])

    return te.compute(data.shape, body, name="scatter_nd", tag=TAG,
                      attrs={"inner_axes": ndim - k})


for _name, _fn in [("scatter_elements", scatter_elements), ("scatter_nd", scatter_nd)]:
    register_llvm(_name, _fn, schedule_reduce)
