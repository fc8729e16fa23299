"""rfactor: turn part of a reduction into a data-parallel axis of a new stage.

For ``T[i] = sum(X[i, k], k)`` with ``k`` split into (ko, ki), ``rfactor(T, ki)`` gives
``TF[ki, i] = sum(X[i, ko * f + ki], ko)`` and ``T[i] = sum(TF[r, i], r)``: the partial
sums over ``ko`` are independent for each ``ki``, so that axis can be vectorized or
parallelized, and the final reduction over ``r`` is short.
"""

from __future__ import annotations

from ..errors import ScheduleError
from ..ir import expr as E
from ..ir.functor import substitute
from ..te.tensor import ComputeOp
from .relations import pass_down_extents, pass_up_values, split_guards


def rfactor(sch, tensor, axis, factor_axis: int = 0):
    """Factor the reduction of ``tensor`` over leaf ``axis`` into a new stage (see module)."""
    st = sch[tensor]
    op = st.op

    def fail(msg):
        return ScheduleError(f"rfactor on stage {st.name}: {msg}")

    if not isinstance(op, ComputeOp) or not op.is_reduction:
        raise fail("the stage is not a reduction")
    if len(op.outputs) != 1:
        raise fail("multi-output reductions are not supported")
    st._check_leaf("rfactor", axis)
    if axis.iter_type != "reduce":
        raise fail(f"axis {axis.name} is not a reduction axis")
    if any(rel.outer.iter_type != "reduce" for rel in st.relations):
        raise fail("split/fuse the data axes after rfactor, not before")
    if op.body[0].init:
        raise fail("a reduction with init= cannot be factored (each part would add it)")
    ndata = len(op.axis)
    if not isinstance(factor_axis, int) or not 0 <= factor_axis <= ndata:
        raise fail(f"factor_axis={factor_axis!r} must be an integer in [0, {ndata}]")
    red = op.body[0]

    root_ext = {iv: iv.dom.extent for iv in op.reduce_axis}
    extents = pass_down_extents(root_ext, st.relations)
    leaves = [iv for iv in st.leaf_iter_vars if iv.iter_type == "reduce"]
    values = pass_up_values({iv: iv.var for iv in leaves}, st.relations, extents)
    guards = split_guards(st.relations, values, extents)

    # The new stage: data axes of T plus the factored axis; reduce over the other leaves.
    new_data = [E.IterVar(a.dom, E.Var(a.name, a.var.dtype), "data_par") for a in op.axis]
    fax = E.IterVar(E.Range(E.IntImm(0), extents[axis]), E.Var(axis.name + ".rf"), "data_par")
    tf_axes = new_data[:factor_axis] + [fax] + new_data[factor_axis:]
    new_reduce = {
        iv: E.IterVar(E.Range(E.IntImm(0), extents[iv]), E.Var(iv.name), "reduce")
        for iv in leaves if iv is not axis
    }
    vmap = {a.var: n.var for a, n in zip(op.axis, new_data)}
    leaf_vars = {axis.var: fax.var}
    leaf_vars.update({iv.var: n.var for iv, n in new_reduce.items()})
    for iv in op.reduce_axis:
        v = values[iv]
        vmap[iv.var] = substitute(iv.dom.min + v, leaf_vars)
    cond = substitute(red.condition, vmap)
    for g in guards:
        cond = E.logical(E.And, substitute(g, leaf_vars), cond)
    src = tuple(substitute(x, vmap) for x in red.source)
    if not new_reduce:
        raise fail(
            f"axis {axis.name} is the only reduction loop left; split the reduction first"
        )
    tf_body = E.Reduce(red.combiner, src, tuple(new_reduce.values()), cond, 0, red.dtype,
                       red.init)
    tf_op = ComputeOp(f"{op.name}.rf", tf_axes, (tf_body,), op.tag, op.attrs)
    tf = tf_op.output(0)

    # T now reduces the partial results over a fresh axis of the factored extent.
    rk = E.IterVar(E.Range(E.IntImm(0), extents[axis]), E.Var(axis.name + ".v"), "reduce")
    idx = [a.var for a in op.axis]
    idx.insert(factor_axis, rk.var)
    final = E.Reduce(red.combiner, (tf(*idx),), (rk,), E.IntImm(1, "bool"), 0, red.dtype)
    new_op = ComputeOp(op.name, op.axis, (final,), op.tag, op.attrs,
                       output_names=[op.outputs[0].name])
    sch._add_stage_before(st, tf_op)
    sch._replace_op(st, new_op)
    return tf
