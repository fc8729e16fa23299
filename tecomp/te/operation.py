"""The te constructors: ``var``, ``placeholder``, ``compute``, ``reduce_axis``, ``thread_axis``."""

from __future__ import annotations

import inspect

from ..errors import ShapeError, TecompError
from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.functor import post_order_visit
from .tensor import ComputeOp, PlaceholderOp, Tensor


def var(name: str = "v", dtype: str = "int32") -> E.Var:
    """A symbolic scalar named ``name`` (typically a size). Sizes are int32 unless
    ``dtype`` says else."""
    return E.Var(name, dt.check_dtype(dtype))


def size_var(name: str = "n", dtype: str = "int32") -> E.Var:
    """A symbolic size named ``name``: :func:`var` with TVM's name for it (``dtype``
    int32 by default)."""
    return var(name, dtype)


def const(value, dtype: str | None = None) -> E.PrimExpr:
    """The constant ``value``; ``dtype`` defaults to int32 for ints, float32 for floats."""
    if dtype is not None:
        return E.make_const(value, dt.check_dtype(dtype))
    return E.as_expr(value)


def _shape(shape, what: str) -> tuple:
    if isinstance(shape, (int, E.PrimExpr, E.IterVar)):
        shape = (shape,)
    try:
        items = tuple(shape)
    except TypeError as err:
        raise ShapeError(f"{what}: shape={shape!r} must be a tuple of sizes") from err
    out = []
    for i, s in enumerate(items):
        if isinstance(s, (bool, float)):
            raise ShapeError(f"{what}: shape[{i}]={s!r} must be an integer or te.var")
        try:
            e = E.as_expr(s)
        except TypeError as err:
            raise ShapeError(f"{what}: shape[{i}]={s!r} must be an integer or te.var") from err
        if not dt.is_int(e.dtype):
            raise ShapeError(f"{what}: shape[{i}]={s} has dtype {e.dtype}; sizes are integers")
        if isinstance(e, E.IntImm) and e.value <= 0:
            raise ShapeError(f"{what}: shape[{i}]={e.value}; sizes must be positive")
        out.append(e)
    return tuple(out)


def placeholder(shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of ``shape`` (ints or ``te.var`` sizes) and ``dtype``, called ``name``
    in the loop IR and in a built function's signature."""
    shape = _shape(shape, f"placeholder {name}")
    return PlaceholderOp(name, shape, dt.check_dtype(dtype, f"placeholder {name}: dtype")).output(0)


def _range(dom, name: str) -> E.Range:
    if isinstance(dom, E.Range):
        return dom
    if isinstance(dom, (tuple, list)) and len(dom) == 2:
        lo, hi = E.as_expr(dom[0]), E.as_expr(dom[1])
        return E.Range(lo, E.binary(E.Sub, hi, lo))
    if isinstance(dom, (int, E.PrimExpr)):
        return E.Range(E.IntImm(0), E.as_expr(dom))
    raise ShapeError(f"axis {name}: dom={dom!r} must be (lo, hi) or an extent")


def reduce_axis(dom, name: str = "rv") -> E.IterVar:
    """A reduction axis named ``name`` over ``dom`` = (lo, hi) (half-open) or an extent."""
    r = _range(dom, name)
    if isinstance(r.extent, E.IntImm) and r.extent.value <= 0:
        raise ShapeError(f"reduce_axis {name}: empty range {dom}")
    iv = E.IterVar(r, E.Var(name), "reduce")
    _REDUCE_VARS.add(iv.var)
    return iv


# Variables made by reduce_axis, so that one used outside its reduction can be reported.
# Vars are tiny and never reused, so keeping them is harmless.
_REDUCE_VARS: set = set()


_THREAD_TAGS = (
    "blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z",
    "vthread",
)


def thread_axis(tag: str = "", name: str = "", dom=None) -> E.IterVar:
    """A GPU thread or block index to ``bind`` a loop to (CUDA targets only).

    Parameters
    ----------
    tag : str
        ``"blockIdx.x"`` (``.y``, ``.z``), ``"threadIdx.x"`` (``.y``, ``.z``) or
        ``"vthread"``; passed as the first argument, it may also stand in ``dom``'s place.
    name : str
        The variable's name in the loop IR (default: the tag).
    dom : int or (lo, hi), optional
        A fixed extent; by default it is the extent of the loop bound to it.
    """
    if isinstance(dom, str) and not tag:
        dom, tag = None, dom
    if tag not in _THREAD_TAGS:
        raise TecompError(f"thread_axis tag={tag!r} is not one of {', '.join(_THREAD_TAGS)}")
    r = None if dom is None else _range(dom, tag)
    return E.IterVar(r, E.Var(name or tag), "thread", tag)


def _check_no_nested_reduce(name: str, e) -> None:
    """A Reduce may only be the whole body of a compute, never part of an expression."""

    def fn(n):
        if isinstance(n, E.Reduce):
            raise TecompError(
                f"compute {name}: a reduction ({n.combiner.name}) must be the whole "
                f"body, not part of a larger expression; compute it in its own stage"
            )

    post_order_visit(e, fn)


def compute(shape, fcompute, name: str = "compute", tag: str = "", attrs=None):
    """A tensor whose element at index (i, j, ...) is ``fcompute(i, j, ...)``.

    Parameters
    ----------
    shape : tuple of int or PrimExpr
        The output's shape; symbolic sizes (``te.var``) are allowed.
    fcompute : callable
        ``fcompute(i, j, ...)`` gives the element at that index; its parameter names name
        the axes (``op.axis``). It may return one expression or a tuple (a multi-output
        compute; then a list of tensors is returned).
    name : str
        The tensor's name in the loop IR.
    tag : str
        A label schedules can dispatch on (the operator library tags its operators).
    attrs : dict, optional
        Extra attributes kept on the operation.
    """
    shape = _shape(shape, f"compute {name}")
    params = list(inspect.signature(fcompute).parameters.values())
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        arg_names = [f"i{k}" for k in range(len(shape))]
    else:
        arg_names = [p.name for p in params]
        if len(arg_names) != len(shape):
            raise ShapeError(
                f"compute {name}: the lambda takes {len(arg_names)} indices but the shape "
                f"has {len(shape)} dimensions"
            )
    axis = tuple(
        E.IterVar(E.Range(E.IntImm(0, s.dtype), s), E.Var(n, s.dtype), "data_par")
        for n, s in zip(arg_names, shape)
    )
    result = fcompute(*[a.var for a in axis])
    multi = isinstance(result, (tuple, list))
    body = tuple(E.as_expr(r) for r in (result if multi else (result,)))
    _check_body(name, axis, body)
    op = ComputeOp(name, axis, body, tag, attrs)
    return list(op.outputs) if multi else op.output(0)


def _check_body(name, axis, body):
    reductions = [b for b in body if isinstance(b, E.Reduce)]
    if reductions and len(reductions) != len(body):
        raise TecompError(
            f"compute {name}: either every output is a reduction or none is"
        )
    if len(reductions) > 1 and any(
        r.combiner is not reductions[0].combiner or r.axis != reductions[0].axis
        for r in reductions
    ):
        raise TecompError(f"compute {name}: outputs must come from one tuple reduction")
    data_vars = {a.var for a in axis}
    for b in body:
        allowed = set(data_vars)
        if isinstance(b, E.Reduce):
            for part in b.source + (b.condition,):
                _check_no_nested_reduce(name, part)
            allowed |= {a.var for a in b.axis}
        else:
            _check_no_nested_reduce(name, b)
        _check_reduce_vars(name, b, allowed)


def _check_reduce_vars(name, body, allowed):
    """A reduce axis used outside its reduction is an error (its value is undefined there)."""
    stray = []

    def fn(n):
        if isinstance(n, E.Var) and n in _REDUCE_VARS and n not in allowed:
            stray.append(n)

    post_order_visit(body, fn)
    if stray:
        raise TecompError(
            f"compute {name}: reduce axis {stray[0].name} is used outside a reduction over it; "
            f"wrap the expression in te.sum(..., axis={stray[0].name}) (or another reducer)"
        )
