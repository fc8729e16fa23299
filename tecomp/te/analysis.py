"""Facts derived from a compute DAG: its operations in dependency order, its FLOP count
and a structural hash.

These read only the tensor expressions (no schedule): the autotuner keys tuning records
by :func:`structural_hash` and reports throughput from :func:`count_flop`, and operator
schedules walk a fused group with :func:`ops_of`.
"""

from __future__ import annotations

import hashlib
import math

from ..errors import ShapeError
from ..ir import expr as E


def ops_of(tensors) -> list:
    """Operations reachable from ``tensors``, inputs before the ops that read them.

    Parameters
    ----------
    tensors : sequence of Tensor
        The outputs (and optionally inputs) of the DAG; items without ``.op`` are skipped.

    Returns
    -------
    list of Operation
        Each operation once, in a depth-first post-order from ``tensors`` in the order
        given (so the order is deterministic).
    """
    order, seen = [], set()

    def visit(op):
        if id(op) in seen:
            return
        seen.add(id(op))
        for t in op.input_tensors:
            visit(t.op)
        order.append(op)

    for t in tensors:
        if hasattr(t, "op"):
            visit(t.op)
    return order


_ARITH = (E.Add, E.Sub, E.Mul, E.Div, E.FloorDiv, E.FloorMod, E.Min, E.Max, E.Call)


def _arith_count(expr) -> int:
    """Arithmetic operations computing a value: index expressions of tensor reads and the
    conditions of selects (padding, bounds) are addressing, not work."""
    if isinstance(expr, (E.ProducerLoad, E.IntImm, E.FloatImm, E.Var)):
        return 0
    if isinstance(expr, E.Select):
        return max(_arith_count(expr.true_value), _arith_count(expr.false_value))
    if isinstance(expr, E.Reduce):
        return _arith_count(expr.source[expr.value_index]) + 1  # one combine per point
    n = 1 if isinstance(expr, _ARITH) else 0
    if isinstance(expr, E.Cast):
        return _arith_count(expr.value)
    for field in ("a", "b", "value", "body"):
        sub = getattr(expr, field, None)
        if isinstance(sub, E.PrimExpr):
            n += _arith_count(sub)
    if isinstance(expr, E.Call):
        n += sum(_arith_count(a) for a in expr.args)
    return n


def _const_int(e, what) -> int:
    if isinstance(e, E.IntImm):
        return int(e.value)
    raise ShapeError(f"{what} has the symbolic extent {e}; counting FLOPs needs concrete "
                     f"shapes")


def count_flop(tensors) -> float:
    """Floating point operations of computing ``tensors`` once (a multiply-add is 2).

    Parameters
    ----------
    tensors : sequence of Tensor
        The DAG's tensors; every compute reachable from them is counted once.

    Returns
    -------
    float
        Arithmetic operations per point times the points of each compute (those of its
        ``flop_shape`` attribute where it has one: a compute padded to whole tiles counts
        the points it is cropped to); a reduction counts its source and one combine per
        reduction point.

    Raises
    ------
    ShapeError
        If a compute has a symbolic extent.

    Examples
    --------
    >>> A = te.placeholder((4, 8)); B = te.placeholder((8, 2)); k = te.reduce_axis((0, 8))
    >>> C = te.compute((4, 2), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k))
    >>> count_flop([C])
    128.0
    """
    total = 0
    for op in ops_of(tensors):
        body = getattr(op, "body", None)
        if not body:
            continue
        # A compute padded to whole tiles names the shape whose points count.
        counted = getattr(op, "attrs", {}).get("flop_shape")
        points = math.prod(counted) if counted else math.prod(
            _const_int(a.dom.extent, f"compute {op.name}") for a in op.axis)
        red = math.prod(
            _const_int(a.dom.extent, f"compute {op.name}") for a in op.reduce_axis
        )
        total += points * red * _arith_count(body[0]) if op.reduce_axis else (
            points * sum(_arith_count(b) for b in body)
        )
    return float(total)


def structural_hash(tensors) -> str:
    """A hash of the compute DAG of ``tensors``: shapes, dtypes, expressions with variables
    renamed by position. Names and tags of tensors and axes do not matter; structure does.

    Parameters
    ----------
    tensors : sequence of Tensor
        The DAG's tensors in a fixed order (a template's argument list); the order of the
        outputs is part of the hash.

    Returns
    -------
    str
        16 hex digits of a SHA-256 of the DAG's canonical text. Tuning records store it,
        so the text must not change for an unchanged compute.
    """
    ops = ops_of(tensors)
    op_id = {id(op): i for i, op in enumerate(ops)}
    parts = []
    for op in ops:
        names: dict = {}

        def var_name(v):
            if v not in names:
                names[v] = f"v{len(names)}"
            return names[v]

        if not getattr(op, "body", None):
            parts.append(f"P({_shape_str(op.shape)},{op.dtype})")
            continue
        for a in op.axis:
            var_name(a.var)
        for a in op.reduce_axis:
            var_name(a.var)
        shape = _shape_str(tuple(a.dom.extent for a in op.axis))
        red = _shape_str(tuple(a.dom.extent for a in op.reduce_axis))
        bodies = ";".join(_expr_key(b, var_name, op_id) for b in op.body)
        parts.append(f"C({shape}|{red}|{bodies})")
    parts.append("out:" + ",".join(f"{op_id[id(t.op)]}.{t.value_index}"
                                   for t in tensors if hasattr(t, "op")))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _shape_str(shape) -> str:
    return ",".join(str(s) for s in shape)


def _expr_key(e, var_name, op_id) -> str:
    if isinstance(e, E.Var):
        return var_name(e)
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return f"{e.value!r}:{e.dtype}"
    if isinstance(e, E.StringImm):
        return repr(e.value)
    if isinstance(e, E.ProducerLoad):
        idx = ",".join(_expr_key(i, var_name, op_id) for i in e.indices)
        return f"T{op_id.get(id(e.tensor.op), '?')}.{e.tensor.value_index}[{idx}]"
    if isinstance(e, E.Reduce):
        src = ",".join(_expr_key(s, var_name, op_id) for s in e.source)
        comb = ",".join(_expr_key(r, var_name, op_id) for r in e.combiner.result)
        for v in e.combiner.lhs + e.combiner.rhs:
            var_name(v)
        cond = _expr_key(e.condition, var_name, op_id)
        return f"R[{comb}]({src}|{cond}|{e.value_index})"
    if isinstance(e, E.Call):
        return f"{e.name}:{e.dtype}(" + ",".join(_expr_key(a, var_name, op_id)
                                                 for a in e.args) + ")"
    if isinstance(e, E.Check):
        return (f"Check({_expr_key(e.cond, var_name, op_id)},"
                f"{_expr_key(e.value, var_name, op_id)},{e.message!r})")
    fields = []
    for f in ("a", "b", "cond", "true_value", "false_value", "value", "var", "body"):
        sub = getattr(e, f, None)
        if isinstance(sub, E.PrimExpr):
            fields.append(_expr_key(sub, var_name, op_id))
    return f"{type(e).__name__}:{e.dtype}(" + ",".join(fields) + ")"
