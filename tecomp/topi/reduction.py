"""Reductions (ONNX ``Reduce*``, ``ArgMax``/``ArgMin``, ``CumSum``), tagged ``"comm_reduce"``.

Each reduction records in ``op.attrs["inner_axes"]`` how many trailing output axes lie
inside the reduced axes in the input's layout: ``schedule_reduce`` vectorizes over those
(contiguous in memory) and parallelizes over the others. Operators with a final step
(``reduce_mean``'s division, ``reduce_l2``'s square root) compute it in an elementwise
stage after the reduction, which the schedule fuses into the reduction's loop; that
stage is tagged ``"comm_reduce"`` too, since it is the operator's output.
"""

from __future__ import annotations

from .. import te
from ..ir import dtype as dt
from ..ir import expr as E
from .cpu_schedule import schedule_reduce
from .reduce_templates import register_row_operator
from .register import register_llvm
from .transform import normalize_axis

TAG = "comm_reduce"


def reduce_axes(ndim: int, axes, noop_with_empty_axes: int = 0) -> list:
    """The sorted, non-negative axes an ONNX reduction reduces (all for None / empty,
    none for empty with ``noop_with_empty_axes``)."""
    if axes is None or len(axes) == 0:
        return [] if noop_with_empty_axes else list(range(ndim))
    return sorted({normalize_axis(a, ndim, "axes") for a in axes})


def reduce_compute(x, axes, keepdims, fsource, reducer, name: str):
    """``out = reducer(fsource(x[...]), over axes)`` with ONNX ``keepdims``.

    Parameters
    ----------
    x : Tensor
    axes : list of int
        Normalized reduced axes (see :func:`reduce_axes`); non-empty.
    keepdims : int
        Keep the reduced axes with size 1.
    fsource : callable
        Maps the read element (an expression) to the reduced value.
    reducer : callable
        ``te.sum`` / ``te.max`` / ``te.min`` / ``te.prod`` or a ``comm_reducer``.
    """
    ndim = len(x.shape)
    raxes = {a: te.reduce_axis((0, x.shape[a]), name=f"k{a}") for a in axes}
    kept = [a for a in range(ndim) if a not in raxes]
    shape = tuple(E.IntImm(1) if a in raxes else x.shape[a]
                  for a in range(ndim) if keepdims or a not in raxes)
    inner = sum(1 for a in kept if a > axes[-1])

    def body(*idx):
        out_pos = iter(idx)
        full = []
        for a in range(ndim):
            if a in raxes:
                if keepdims:
                    next(out_pos)
                full.append(raxes[a])
            else:
                full.append(next(out_pos))
        return reducer(fsource(x[tuple(full)]), axis=list(raxes.values()))

    return te.compute(shape, body, name=name, tag=TAG, attrs={"inner_axes": inner})


def _skipping_nan(better, name: str, empty: float):
    """A reducer keeping the value ``better`` prefers, where a NaN never replaces a number:
    the result does not depend on where a NaN is, nor on the order of the reduction.

    onnxruntime skips a NaN in MaxPool, GlobalMaxPool and, past a row's first element, in
    ReduceMax/ArgMax; a NaN taking part in a plain ``max(acc, x)`` (``acc > x ? acc : x``)
    replaced the maximum so far and was itself replaced by the next element, so it won
    only where it came last.

    ``x`` replaces the accumulator only where ``better(x, acc)`` holds, which a NaN never
    does; the identity is ``empty`` (-inf for a maximum, as ONNX's ReduceMax gives over no
    elements), so a NaN never enters at all and no value has to be tested for NaN: the
    same one instruction as before (``maxps``) with its operands swapped. Of NaN only
    the result is ``empty``; ReduceMax and ReduceMin then give NaN, as any region whose
    first element is NaN (``nan_first`` of their operators: onnxruntime's rule), where
    MaxPool keeps ``empty`` (onnxruntime: NaN or the lowest finite value, by its kernel).
    """

    def combine(acc, x):
        # Max(a, b) is ``a > b ? a : b`` (``tecomp.ir.expr.Max``): with x first, a NaN x
        # keeps acc. Both operands are plain values, so no lane needs masking.
        return te.max(x, acc) if better is _greater else te.min(x, acc)

    def identity(dtype):
        if dt.is_float(dtype):
            return E.make_const(empty, dtype)
        worst = dt.min_value(dtype) if better is _greater else dt.max_value(dtype)
        return E.make_const(worst, dtype)

    return te.comm_reducer(combine, identity, name=name)


def _greater(a, b):
    return a > b


def _less(a, b):
    return a < b


#: Reducers (``nanmax(expr, axis=k)``) taking the largest / smallest value and skipping
#: NaN (see :func:`_skipping_nan`); -inf / inf over no elements.
nanmax = _skipping_nan(_greater, "nanmax", float("-inf"))
nanmin = _skipping_nan(_less, "nanmin", float("inf"))


def _count(x, axes, dtype):
    n = E.IntImm(1)
    for a in axes:
        n = n * x.shape[a]
    return n.astype(dtype)


def _first_of_region(x, axes, keepdims, idx):
    """The element of ``x`` that output ``idx`` of a reduction over ``axes`` starts its
    region with: every reduced index 0."""
    out_pos = iter(idx)
    full = []
    for a in range(len(x.shape)):
        if a in axes:
            if keepdims:
                next(out_pos)
            full.append(E.IntImm(0))
        else:
            full.append(next(out_pos))
    return x[tuple(full)]


def _reduction(name, fsource, reducer, fepilogue=None, fsingle=None, nan_first=False):
    """An ONNX reduction: ``fepilogue(reducer(fsource(x)))``. Over no axes
    (``noop_with_empty_axes``) each element is reduced alone, as the spec's reference
    does: ``fsingle(x)``, by default the source and epilogue of the one element
    (ReduceL1 gives ``|x|``, ReduceLogSum ``log(x)``). With ``nan_first`` a float region
    whose first element is NaN gives NaN (onnxruntime's ReduceMax/Min, which start from
    the first element and replace it only by a better one)."""

    def single(x, ax):
        def f(*i):
            if fsingle is not None:
                return fsingle(x[i])
            v = fsource(x[i])
            return v if fepilogue is None else fepilogue(v, x, ax)

        return f

    def op(x, axes=None, keepdims: int = 1, noop_with_empty_axes: int = 0):
        ax = reduce_axes(len(x.shape), axes, noop_with_empty_axes)
        if not ax:
            return te.compute(x.shape, single(x, ax), name=name, tag="elemwise")
        r = reduce_compute(x, ax, keepdims, fsource, reducer, name)
        if nan_first and dt.is_float(x.dtype):
            # An empty region has no first element to read (its result is the
            # reducer's identity).
            nonempty = _count(x, ax, "int64") > 0

            def first_or_r(*i):
                first = _first_of_region(x, ax, keepdims, i)
                return te.if_then_else(te.all(nonempty, te.not_equal(first, first)), first,
                                       r[i])

            return te.compute(r.shape, first_or_r, name=f"{name}.out", tag=TAG)
        if fepilogue is None:
            return r
        return te.compute(r.shape, lambda *i: fepilogue(r[i], x, ax), name=f"{name}.out",
                          tag=TAG)

    op.__name__ = name
    op.__doc__ = (f"ONNX ``{name}`` of ``x`` over ``axes`` (None or empty: all, unless "
                  f"``noop_with_empty_axes``), keeping them with size 1 if ``keepdims``.")
    return op


def _mean(v, x, axes):
    n = _count(x, axes, v.dtype)
    return v / n if dt.is_float(v.dtype) else te.truncdiv(v, n)


reduce_sum = _reduction("reduce_sum", lambda v: v, te.sum)
reduce_mean = _reduction("reduce_mean", lambda v: v, te.sum, _mean)
reduce_max = _reduction("reduce_max", lambda v: v, nanmax, nan_first=True)
reduce_min = _reduction("reduce_min", lambda v: v, nanmin, nan_first=True)
reduce_prod = _reduction("reduce_prod", lambda v: v, te.prod)
reduce_l1 = _reduction("reduce_l1", te.abs, te.sum)
reduce_l2 = _reduction("reduce_l2", lambda v: v * v, te.sum, lambda v, x, a: te.sqrt(v))
reduce_sum_square = _reduction("reduce_sum_square", lambda v: v * v, te.sum)
reduce_log_sum = _reduction("reduce_log_sum", lambda v: v, te.sum, lambda v, x, a: te.log(v))
# log(exp(x)) of one element is x itself (onnxruntime's), without exp's overflow.
reduce_log_sum_exp = _reduction("reduce_log_sum_exp", te.exp, te.sum,
                                lambda v, x, a: te.log(v), fsingle=lambda v: v)


def _arg_reducer(better, select_last: bool, name: str):
    """A (index, value) reducer keeping the value ``better`` prefers and, on ties, the
    first (or last) index; commutative, so any reduction order gives the same answer.

    NaN as in onnxruntime, which scans the axis from its first element and replaces
    the best so far only by a better one: a NaN first element (index 0) wins, a NaN
    elsewhere loses to every number (NaNs tie with each other, but a row of NaN starts
    with one)."""

    def combine(lhs, rhs):
        (i0, v0), (i1, v1) = lhs, rhs
        tie_wins = i1 > i0 if select_last else i1 < i0
        same = te.equal(v1, v0)
        wins = better(v1, v0)
        first1 = te.const(False, "bool")
        if dt.is_float(v0.dtype):
            nan0, nan1 = te.not_equal(v0, v0), te.not_equal(v1, v1)
            same = same | (nan0 & nan1)
            first0, first1 = nan0 & te.equal(i0, 0), nan1 & te.equal(i1, 0)
            wins = (wins | (nan0 & ~nan1)) & ~first0
            tie_wins = tie_wins & ~first0
        # Index -1 marks the identity: it loses to any element, even one equal to it
        # (an all -inf row still gives index 0).
        take = (i1 >= 0) & ((i0 < 0) | first1 | wins | (same & tie_wins))
        return te.if_then_else(take, i1, i0), te.if_then_else(take, v1, v0)

    def identity(index_dtype, value_dtype):
        worst = float("-inf") if better is _greater else float("inf")
        if not dt.is_float(value_dtype):
            worst = dt.min_value(value_dtype) if better is _greater else dt.max_value(
                value_dtype)
        return E.make_const(-1, index_dtype), E.make_const(worst, value_dtype)

    return te.comm_reducer(combine, identity, name=name)


_ARG_REDUCERS = {
    (better, last): _arg_reducer(better, last, f"arg{'max' if better is _greater else 'min'}")
    for better in (_greater, _less) for last in (False, True)
}


def _arg(name, better):
    def op(x, axis: int = 0, keepdims: int = 1, select_last_index: int = 0):
        axis = normalize_axis(axis, len(x.shape))
        reducer = _ARG_REDUCERS[better, bool(select_last_index)]
        k = te.reduce_axis((0, x.shape[axis]), name=f"k{axis}")
        ndim = len(x.shape)
        shape = tuple(E.IntImm(1) if a == axis else x.shape[a]
                      for a in range(ndim) if keepdims or a != axis)

        def body(*idx):
            full = list(idx)
            if keepdims:
                full[axis] = k
            else:
                full.insert(axis, k)
            return reducer((k.var.astype("int64"), x[tuple(full)]), axis=k)

        index, _ = te.compute(shape, body, name=f"{name}.red", tag=TAG,
                              attrs={"inner_axes": ndim - 1 - axis})
        # The (index, value) pair is one stage with two outputs; this copy of the index
        # is the operator's single output, so the pair stays internal to the kernel.
        return te.compute(shape, lambda *i: index[i], name=name, tag=TAG)

    op.__name__ = name
    op.__doc__ = (f"ONNX ``{name}``: the int64 index of the {name[3:]}imum of ``x`` along "
                  f"``axis`` (ties: the first, or the last with ``select_last_index``); "
                  f"``keepdims`` keeps ``axis`` with size 1.")
    return op


argmax = _arg("argmax", _greater)
argmin = _arg("argmin", _less)


def cumulative(x, reducer, name: str, axis: int = 0, exclusive: int = 0, reverse: int = 0):
    """``reducer`` (``te.sum``, ``te.prod``) of the elements of ``x`` along ``axis`` up to
    each one (``exclusive`` leaves itself out; ``reverse`` takes those after it instead).

    Every output element is its own masked reduction over the axis (quadratic in the
    axis length), which suits the short axes CumSum and CumProd see in models (positions,
    masks).
    """
    ndim = len(x.shape)
    axis = normalize_axis(axis, ndim)
    k = te.reduce_axis((0, x.shape[axis]), name="k")

    def body(*idx):
        i = idx[axis]
        if reverse:
            cond = k.var > i if exclusive else k.var >= i
        else:
            cond = k.var < i if exclusive else k.var <= i
        return reducer(x[idx[:axis] + (k,) + idx[axis + 1:]], axis=k, where=cond)

    return te.compute(x.shape, body, name=name, tag=TAG,
                      attrs={"inner_axes": ndim - 1 - axis})


def cumsum(x, axis: int = 0, exclusive: int = 0, reverse: int = 0):
    """ONNX CumSum of ``x`` along ``axis``: each element sums the elements before it (``exclusive``
    leaves itself out; ``reverse`` sums those after it instead); see :func:`cumulative`."""
    return cumulative(x, te.sum, "cumsum", axis, exclusive, reverse)


for _name, _fn in [
    ("reduce_sum", reduce_sum), ("reduce_mean", reduce_mean), ("reduce_max", reduce_max),
    ("reduce_min", reduce_min), ("reduce_prod", reduce_prod), ("reduce_l1", reduce_l1),
    ("reduce_l2", reduce_l2), ("reduce_sum_square", reduce_sum_square),
    ("reduce_log_sum", reduce_log_sum), ("reduce_log_sum_exp", reduce_log_sum_exp),
]:
    register_row_operator(_name, _fn, schedule_reduce, axes=None, keepdims=1,
                          noop_with_empty_axes=0)
# Tuple reductions (an index and a value) cannot be factored into vector lanes, and a
# cumulative sum is one masked reduction per element: the row knobs leave them as they are.
for _name, _fn in [("argmax", argmax), ("argmin", argmin), ("cumsum", cumsum)]:
    register_llvm(_name, _fn, schedule_reduce)
