"""Lowering of ``Stage.tensorize``: the loops from the tensorized axis inwards are
replaced by a tensor intrinsic's statements.

The match, as TVM's: each root axis of the stage either stays put inside the tensorized
loops or advances with exactly one of them (``base + loop``); the moving data axes, in
order, are the intrinsic's axes and the moving reduction axes its reduction axes, with
the same extents; and the stage's body, with each moving axis written as its base plus
the intrinsic's axis and each tensor read made relative to its base, is the intrinsic's
body (same operations, casts and reads). Each tensor the stage reads then lies in its
buffer as a :class:`~tecomp.te.TileRegion` (the element at the base, the strides of the
dimensions that move), and so does the stage's output, and the intrinsic's
implementation turns those regions into statements.
"""

from __future__ import annotations

from ..errors import LoweringError
from ..ir import expr as E
from ..ir.arith import simplify
from ..ir.functor import IRMutator, substitute
from ..ir.structural import structural_equal
from ..te.tensor_intrin import TileRegion


def _strides(buf) -> list:
    out, step = [], E.IntImm(1, "int64")
    for d in reversed(buf.shape):
        out.append(step)
        step = simplify(step * d)
    return out[::-1]


class _Relative(IRMutator):
    """Each tensor read made a read of the intrinsic's matching input, indexed relative
    to its base (the dimensions that do not move dropped); records each tensor's base
    and moving dimensions."""

    def __init__(self, stage_name, intrin, moving_vars):
        super().__init__()
        self.stage_name = stage_name
        self.inputs = intrin.inputs
        self.zero = {v: E.IntImm(0, v.dtype) for v in moving_vars}
        self.tensors: list = []      # the stage's tensors, in order of first read
        self.regions: dict = {}      # tensor -> (base indices, moving dims)

    def visit_ProducerLoad(self, e):
        base = [simplify(substitute(i, self.zero)) for i in e.indices]
        rel = [simplify(i - b) for i, b in zip(e.indices, base)]
        dims = [d for d, r in enumerate(rel) if not (isinstance(r, E.IntImm) and r.value == 0)]
        if e.tensor not in self.regions:
            self.tensors.append(e.tensor)
            self.regions[e.tensor] = (base, dims)
        elif not all(structural_equal(a, b) for a, b in zip(self.regions[e.tensor][0], base)):
            raise LoweringError(f"tensorize on stage {self.stage_name}: {e.tensor.name} is "
                                f"read at two places in one tile; an intrinsic reads each "
                                f"input once")
        k = self.tensors.index(e.tensor)
        if k >= len(self.inputs):
            return e
        return E.ProducerLoad(self.inputs[k], tuple(rel[d] for d in dims), e.dtype)


def _moving(st, ivs, intrin_ivs, root_vals, inner, extents, what):
    """(root IterVar -> base, [(root IterVar, inner leaf)]) of ``ivs``, checked against
    the intrinsic's ``intrin_ivs``."""
    leaf_of = {iv.var: iv for iv in inner}
    zero = {v: E.IntImm(0, v.dtype) for v in leaf_of}
    base, moving = {}, []
    for iv in ivs:
        value = root_vals[iv]
        base[iv] = simplify(substitute(value, zero))
        step = simplify(value - base[iv])
        if isinstance(step, E.IntImm) and step.value == 0:
            continue
        if not (isinstance(step, E.Var) and step in leaf_of):
            raise LoweringError(
                f"tensorize on stage {st.name}: axis {iv.name} advances inside the "
                f"tensorized loops as {step}, not as one loop of them (split it so that "
                f"one inner loop covers the intrinsic's axis)")
        moving.append((iv, leaf_of[step]))
    if len(moving) != len(intrin_ivs) or any(
            E.const_value(extents[leaf]) != E.const_value(jv.dom.extent)
            for (_, leaf), jv in zip(moving, intrin_ivs)):
        have = ", ".join(f"{iv.name}: {extents[leaf]}" for iv, leaf in moving) or "none"
        want = ", ".join(f"{jv.name}: {jv.dom.extent}" for jv in intrin_ivs) or "none"
        raise LoweringError(
            f"tensorize on stage {st.name}: its {what} axes inside the tensorized loops "
            f"({have}) are not the intrinsic's ({want})")
    return base, moving


def lower_tensorized(st, info, inner, root_vals, buffer_of, out_buf, store_idx) -> tuple:
    """The statements in place of the tensorized loops ``inner`` (leaves) of ``st``.

    Parameters
    ----------
    root_vals : dict
        Root IterVar -> its value in the stage's leaf variables.
    buffer_of : callable
        Tensor -> (its buffer, the offset of its region or None).
    out_buf, store_idx
        The stage's output buffer and the index (per dimension) it stores at.

    Returns
    -------
    (body, reset, update)
        For a reduction, the implementation's three statements; otherwise
        ``(stmt, None, None)``.
    """
    _, intrin = st.tensorized
    iop = intrin.op
    dbase, dmoving = _moving(st, st.op.axis, iop.axis, root_vals, inner, info.extents, "data")
    rbase, rmoving = _moving(st, st.op.reduce_axis, iop.reduce_axis, root_vals, inner,
                             info.extents, "reduction")
    vmap = {iv.var: b for iv, b in {**dbase, **rbase}.items()}
    for (iv, _), jv in zip(dmoving + rmoving, [*iop.axis, *iop.reduce_axis]):
        vmap[iv.var] = simplify(vmap[iv.var] + E.cast(vmap[iv.var].dtype, jv.var))
    intrin_vars = [jv.var for jv in [*iop.axis, *iop.reduce_axis]]
    relative = _Relative(st.name, intrin, intrin_vars)
    body = substitute(info.body[0], vmap)
    mine, theirs = body, iop.body[0]
    if isinstance(mine, E.Reduce) != isinstance(theirs, E.Reduce):
        which = ("the intrinsic reduces and the stage does not"
                 if isinstance(theirs, E.Reduce) else "the stage reduces and the intrinsic "
                 "does not")
        raise LoweringError(f"tensorize on stage {st.name} with {intrin.name}: {which}")
    if isinstance(mine, E.Reduce):
        if mine.combiner.name != theirs.combiner.name or not (
                isinstance(mine.condition, E.IntImm) and mine.condition.value == 1):
            raise LoweringError(f"tensorize on stage {st.name}: its reduction "
                                f"({mine.combiner.name}) is not the intrinsic's "
                                f"({theirs.combiner.name}), or has a condition")
        mine, theirs = mine.source[0], theirs.source[0]
    mine = relative.visit(mine)
    if len(relative.tensors) != len(intrin.inputs) or not structural_equal(mine, theirs):
        raise LoweringError(f"tensorize on stage {st.name}: its body\n  {body}\nis not the "
                            f"intrinsic {intrin.name}'s\n  {iop.body[0]}")
    ins = []
    for tensor in relative.tensors:
        base, dims = relative.regions[tensor]
        buf, offset = buffer_of(tensor)
        if offset is not None:
            base = [simplify(b - o) for b, o in zip(base, offset)]
        strides = _strides(buf)
        ins.append(TileRegion(buf, tuple(base), simplify(buf.flat_index(base)),
                              tuple(strides[d] for d in dims)))
    zero = {iv.var: E.IntImm(0, iv.var.dtype) for iv in inner}
    out_base = [simplify(substitute(i, zero)) for i in store_idx]
    out_dims = [list(st.op.axis).index(iv) for iv, _ in dmoving]
    strides = _strides(out_buf)
    outs = [TileRegion(out_buf, tuple(out_base), simplify(out_buf.flat_index(out_base)),
                       tuple(strides[d] for d in out_dims))]
    result = intrin.implement(ins, outs)
    if isinstance(iop.body[0], E.Reduce):
        if not (isinstance(result, tuple) and len(result) == 3):
            raise LoweringError(f"tensorize: the intrinsic {intrin.name} reduces, so its "
                                f"implementation returns (body, reset, update), not "
                                f"{type(result).__name__}")
        return result
    return result, None, None
