"""Tensor expressions: declare *what* to compute (placeholders, computes, reductions)."""

from ..ir.expr import CommReducer, IterVar, PrimExpr, Range, Var
from ..schedule import create_schedule
from .intrin import (
    abs,
    all,
    any,
    ceil,
    checked,
    cos,
    equal,
    erf,
    exp,
    exp2,
    floor,
    floordiv,
    floormod,
    if_then_else,
    log,
    log2,
    log10,
    max,
    max_value,
    min,
    min_value,
    not_equal,
    power,
    round,
    rsqrt,
    sigmoid,
    sin,
    sqrt,
    tanh,
    trunc,
    truncdiv,
)
from .operation import compute, const, placeholder, reduce_axis, size_var, thread_axis, var
from .reduction import comm_reducer, prod, sum
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor
