"""Tensor expressions: declare *what* to compute (placeholders, computes, reductions)."""

from types import ModuleType as _ModuleType

from .. import lazy_attributes as _lazy_attributes
from ..ir.expr import CommReducer, IterVar, PrimExpr, Range, Var
from .intrin import (
    abs,
    all,
    any,
    bf16_pair,
    ceil,
    checked,
    cos,
    dot2_bf16,
    dot4_u8s8,
    equal,
    erf,
    exp,
    exp2,
    floor,
    floordiv,
    floormod,
    fmod,
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
from .tensor_intrin import TensorIntrin, TileRegion, decl_tensor_intrin

# The schedule layer sits above te (a schedule is made of te operations), so te offers
# create_schedule, the step after declaring computes, without importing that layer when
# te loads: te imports nothing above it.
_FROM_SCHEDULE = {"create_schedule": ("tecomp.schedule", "create_schedule")}

__all__ = [name for name, value in globals().items()
           if not name.startswith("_") and not isinstance(value, _ModuleType)]
__all__ += list(_FROM_SCHEDULE)
__getattr__ = _lazy_attributes(__name__, _FROM_SCHEDULE)


def __dir__():
    return sorted(set(globals()) | set(_FROM_SCHEDULE))
