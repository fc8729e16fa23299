"""Shape values: small integer tensors the import knows up to the symbolic dimensions.

Exporters compute the shapes they pass to ``Expand``, ``Reshape``, ``ConstantOfShape``,
``Range``, ``Tile`` and ``Slice`` from the inputs' shapes. The TorchScript exporter writes
``x.expand(batch, -1)`` of a dynamic axis as

    Shape -> Gather -> Unsqueeze -> Concat -> Equal(..., -1) -> Where -> Expand

so the target shape is only known if every step of that arithmetic is followed. This module
follows it: the value of each such tensor is a numpy array of *elements*, each an ``int``
or an integer ``te`` expression over the model's symbolic dimensions (``seq``,
``batch * 4``), and every operator below maps its inputs' values to its outputs' values.
Elements are kept simplified with what a dimension is known to obey: it is a size, never
negative (:func:`tecomp.ir.arith.simplify_size`). A comparison is decided with the same
facts by the :class:`tecomp.ir.arith.Analyzer`, so ``Equal(seq, -1)`` is ``False`` and
``Where(Equal(seq, -1), 1, seq)`` is ``seq``; one build then serves every shape.

A value is only carried while every element is decided: a comparison the facts cannot
decide (``Equal(seq, 5)``), a division of a possibly negative expression, or an input that
is data rather than shape arithmetic ends it, and a consumer that needs the value then
raises :class:`~tecomp.frontend.onnx_converters.NeedsConstantError` naming it.

Bool elements are the ints 0 and 1. The import records a symbolic value as the
``content`` of the output's type (:class:`tecomp.graph.ir.TensorType`), where the
converters' :meth:`~tecomp.frontend.onnx_converters.Context.dims_of` reads it, and a
value with no symbol left as a constant.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import onnx

from ..errors import TecompError
from ..graph import dims
from ..graph.infer import MAX_CONTENT
from ..ir import expr as E
from ..ir.arith import prove, size_bounds
from ..topi.transform import slice_bounds
from .onnx_converters import onnx_dtype

#: ``op_type -> rule(inputs, attrs) -> outputs``: ``inputs`` are the values of the node's
#: inputs (numpy object arrays of elements; None for an absent optional input), the result
#: the values of its outputs, or None where the rule cannot give them.
RULES: dict = {}

#: ``op_type -> dtype(input_dtypes, attrs)`` of the output, for the operators whose
#: output's dtype is not their first input's.
OUTPUT_DTYPES: dict = {}

class Undecided(Exception):
    """An element the facts about the dimensions do not decide: the value is unknown."""


def rule(*op_types: str, dtype: Callable | None = None):
    """Register ``fn(inputs, attrs)`` as the shape-value rule of the ONNX ``op_types``;
    ``dtype(input_dtypes, attrs)`` gives the output's dtype where it is not the first
    input's."""

    def deco(fn):
        for op in op_types:
            RULES[op] = fn
            if dtype is not None:
                OUTPUT_DTYPES[op] = dtype
        return fn

    return deco


# ---- elements ---------------------------------------------------------------------------


def element(x):
    """``x`` (int, numpy integer, bool or integer expression) as an element: an ``int``
    when it folds to a constant, else a simplified expression."""
    return dims.normalize(int(x) if isinstance(x, (bool, np.bool_, np.integer)) else x)


def decide(cond) -> int:
    """1 if the comparison ``cond`` of elements holds for every size of its symbols, 0 if
    it never does.

    Raises
    ------
    Undecided
        The facts (every symbol is a size, ``>= 0``) decide neither.
    """
    if isinstance(cond, (bool, np.bool_)):
        return int(cond)
    bounds = size_bounds(cond)
    if prove(cond, bounds):
        return 1
    if prove(E.Not(cond), bounds):
        return 0
    raise Undecided(str(cond))


def _compare(cls, fn):
    def compare(a, b):
        a, b = element(a), element(b)
        if dims.is_static(a) and dims.is_static(b):
            return int(fn(a, b))
        return decide(E.binary(cls, a, b))

    return compare


def _divide(a, b):
    """ONNX integer Div, which truncates toward zero: on symbolic elements only where it
    is floor division (a size divided by a positive constant)."""
    if dims.is_static(a) and dims.is_static(b):
        if b == 0:
            raise Undecided(f"{a} / 0")
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    if dims.is_static(b) and b > 0 and dims.provably_nonnegative(a):
        return element(a // b)
    raise Undecided(f"{a} / {b}")


def _elementwise(fn: Callable, arity: int | None = 2) -> Callable:
    """A rule applying ``fn`` to the broadcast elements of the inputs (all of them when
    ``arity`` is None, as for the variadic Min and Max)."""

    def apply(inputs, attrs):
        args = inputs if arity is None else inputs[:arity]
        if any(a is None for a in args):
            return None
        args = np.broadcast_arrays(*args)
        out = np.empty(args[0].shape, dtype=object)
        for idx in np.ndindex(out.shape):
            out[idx] = element(fn(*(a[idx] for a in args)))
        return [out]

    return apply


def _fold_elements(cls):
    """``min`` or ``max`` of any number of elements."""

    def fold(*xs):
        out = xs[0]
        for x in xs[1:]:
            out = element(E.binary(cls, out, x))
        return out

    return fold


def _where(cond, a, b):
    if not dims.is_static(cond):
        raise Undecided(str(cond))
    return a if cond else b


def _bool(input_dtypes, attrs):
    return "bool"


for _op, _fn, _arity in [
    ("Add", operator.add, 2), ("Sub", operator.sub, 2), ("Mul", operator.mul, 2),
    ("Div", _divide, 2), ("Neg", operator.neg, 1),
    ("Min", _fold_elements(E.Min), None), ("Max", _fold_elements(E.Max), None),
]:
    rule(_op)(_elementwise(_fn, _arity))
rule("Where", dtype=lambda input_dtypes, attrs: input_dtypes[1])(_elementwise(_where, 3))
for _op, _fn, _arity in [
    ("Equal", _compare(E.EQ, operator.eq), 2), ("Less", _compare(E.LT, operator.lt), 2),
    ("LessOrEqual", _compare(E.LE, operator.le), 2),
    ("Greater", _compare(E.GT, operator.gt), 2),
    ("GreaterOrEqual", _compare(E.GE, operator.ge), 2),
    ("Not", lambda a: 1 - a, 1), ("And", operator.and_, 2), ("Or", operator.or_, 2),
]:
    rule(_op, dtype=_bool)(_elementwise(_fn, _arity))


# ---- shapes and layout ---------------------------------------------------------------------


def _attr_or_input(inputs, attrs, index: int, name: str):
    """An integer list given as input ``index`` (newer opsets) or attribute ``name``, as
    ints; None when neither is given or an element is symbolic."""
    if len(inputs) > index and inputs[index] is not None:
        values = [element(x) for x in inputs[index].reshape(-1)]
        if not all(dims.is_static(x) for x in values):
            return None
        return [int(x) for x in values]
    return [int(x) for x in attrs[name]] if name in attrs else None


@rule("Identity")
def _identity(inputs, attrs):
    return [inputs[0]]


def _cast_dtype(input_dtypes, attrs):
    # CastLike takes the second input's dtype; Cast names it.
    if "to" not in attrs:
        return input_dtypes[1]
    return onnx_dtype(attrs["to"], "Cast's 'to'")


@rule("Cast", "CastLike", dtype=_cast_dtype)
def _cast(inputs, attrs):
    # A cast to another integer type keeps a size (sizes fit every index type); to bool
    # it asks whether the element is non-zero; to a float it keeps the integer value.
    if attrs.get("to") == onnx.TensorProto.BOOL:
        return _elementwise(_compare(E.NE, operator.ne))([inputs[0], np.array(0)], attrs)
    return [inputs[0]]


@rule("Unsqueeze")
def _unsqueeze(inputs, attrs):
    axes = _attr_or_input(inputs, attrs, 1, "axes")
    if axes is None:
        return None
    shape = list(inputs[0].shape)
    rank = len(shape) + len(axes)
    for a in sorted(a % rank for a in axes):
        shape.insert(a, 1)
    return [inputs[0].reshape(shape)]


@rule("Squeeze")
def _squeeze(inputs, attrs):
    x = inputs[0]
    axes = _attr_or_input(inputs, attrs, 1, "axes")
    if axes is None:
        return [x.reshape([d for d in x.shape if d != 1])]
    axes = {a % x.ndim for a in axes}
    return [x.reshape([d for i, d in enumerate(x.shape) if i not in axes])]


@rule("Reshape")
def _reshape(inputs, attrs):
    shape = [element(x) for x in inputs[1].reshape(-1)]
    if not all(dims.is_static(d) for d in shape):
        return None
    zero_copies = not attrs.get("allowzero", 0)
    shape = [inputs[0].shape[i] if d == 0 and zero_copies else d for i, d in enumerate(shape)]
    return [inputs[0].reshape(shape)]


@rule("Flatten")
def _flatten(inputs, attrs):
    x = inputs[0]
    axis = int(attrs.get("axis", 1))
    axis = axis + x.ndim if axis < 0 else axis
    return [x.reshape(int(np.prod(x.shape[:axis])), -1)]


def _int64(input_dtypes, attrs):
    return "int64"


@rule("Shape", dtype=_int64)
def _shape(inputs, attrs):
    # Called with the input's shape as its value (see :func:`evaluate`).
    shape = list(inputs[0])
    start = int(attrs.get("start", 0))
    end = attrs.get("end")
    return [np.array(shape[start:None if end is None else int(end)], dtype=object)]


@rule("Size", dtype=_int64)
def _size(inputs, attrs):
    return [np.array(element(dims.product(list(inputs[0]))), dtype=object)]


def _as_array(value) -> np.ndarray:
    # numpy hands back a lone element (not a 0-d array) from indexing an object array.
    if isinstance(value, np.ndarray):
        return value
    out = np.empty((), dtype=object)
    out[()] = value
    return out


@rule("Gather")
def _gather(inputs, attrs):
    data, indices = inputs[0], inputs[1]
    idx = np.array([element(i) for i in indices.reshape(-1)], dtype=object)
    if not all(dims.is_static(i) for i in idx):
        return None
    axis = int(attrs.get("axis", 0)) % data.ndim
    n = data.shape[axis]
    if any(not -n <= i < n for i in idx):
        return None  # the converter names the index that is out of range
    return [_as_array(np.take(data, idx.astype(np.int64).reshape(indices.shape), axis=axis))]


@rule("Concat")
def _concat(inputs, attrs):
    if any(x is None for x in inputs):
        return None
    return [np.concatenate(inputs, axis=int(attrs["axis"]))]


@rule("Slice")
def _slice(inputs, attrs):
    x = inputs[0]
    starts = _attr_or_input(inputs, attrs, 1, "starts")
    ends = _attr_or_input(inputs, attrs, 2, "ends")
    if starts is None or ends is None:
        return None
    axes = _attr_or_input(inputs, attrs, 3, "axes") or list(range(len(starts)))
    steps = _attr_or_input(inputs, attrs, 4, "steps") or [1] * len(starts)
    if 0 in steps:
        return None
    index = [slice(None)] * x.ndim
    for axis, start, end, step in zip(axes, starts, ends, steps):
        index[axis % x.ndim] = np.arange(*slice_bounds(x.shape[axis % x.ndim], start, end,
                                                       step), step)
    return [x[np.ix_(*[np.arange(d) if isinstance(i, slice) else i
                       for d, i in zip(x.shape, index)])]]


@rule("ReduceProd")
def _reduce_prod(inputs, attrs):
    x = inputs[0]
    axes = _attr_or_input(inputs, attrs, 1, "axes")
    keep = bool(attrs.get("keepdims", 1))
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(x.ndim))
    axes = sorted({a % x.ndim for a in axes})
    out = x
    for a in reversed(axes):
        out = np.apply_along_axis(lambda v: element(dims.product(list(v))), a, out)
        out = out.astype(object)
        if keep:
            out = np.expand_dims(out, a)
    return [out]


@rule("Expand")
def _expand(inputs, attrs):
    shape = [element(d) for d in inputs[1].reshape(-1)]
    if not all(dims.is_static(d) for d in shape):
        return None
    return [np.broadcast_to(inputs[0], np.broadcast_shapes(inputs[0].shape, shape)).copy()]


@rule("Tile")
def _tile(inputs, attrs):
    repeats = [element(d) for d in inputs[1].reshape(-1)]
    if not all(dims.is_static(d) for d in repeats):
        return None
    return [np.tile(inputs[0], repeats)]


def _value_dtype(input_dtypes, attrs):
    value = attrs.get("value")
    return "float32" if value is None else str(onnx.numpy_helper.to_array(value).dtype)


@rule("ConstantOfShape", dtype=_value_dtype)
def _constant_of_shape(inputs, attrs):
    shape = [element(d) for d in inputs[0].reshape(-1)]
    value = attrs.get("value")
    value = onnx.numpy_helper.to_array(value).reshape(-1) if value is not None else None
    if not all(dims.is_static(d) for d in shape) or value is None or (
            value.dtype.kind not in "iub"):
        return None
    return [np.full(shape, int(value[0]), dtype=object)]


@rule("Range")
def _range(inputs, attrs):
    start, limit, delta = (element(v.reshape(-1)[0]) for v in inputs[:3])
    if not dims.is_static(delta) or delta == 0:
        return None
    count = element((limit - start + delta - (1 if delta > 0 else -1)) // delta)
    if not dims.is_static(count):
        return None
    return [np.array([element(start + i * delta) for i in range(max(count, 0))],
                     dtype=object)]


# ---- the import's side -----------------------------------------------------------------------


def known(ctx, name: str):
    """The value of ``name`` as an array of elements, or None: a small integer or bool
    constant, or a tensor whose type carries its content."""
    if name in ctx.consts:
        array = np.asarray(ctx.consts[name])
        if array.dtype.kind not in "iub" or array.size > MAX_CONTENT:
            return None
        return np.array([int(x) for x in array.reshape(-1)], dtype=object).reshape(
            array.shape)
    t = ctx.types.get(name)
    # A float tensor's content (a size cast to float) is not followed: float arithmetic
    # is not what the integer rules compute.
    if t is None or t.content is None or not t.dtype.startswith(("int", "uint", "bool")) or (
            not all(dims.is_static(d) for d in t.shape)):
        return None
    return np.array([element(x) for x in t.content], dtype=object).reshape(
        tuple(int(d) for d in t.shape))


def evaluate(ctx, node, attrs) -> list | None:
    """The values of ``node``'s outputs from its inputs' values, or None where a value is
    not known (an input that is data, an element the facts do not decide, an operator
    without a rule). ``Shape`` and ``Size`` read their input's shape instead."""
    fn = RULES.get(node.op_type)
    if fn is None or node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type in ("Shape", "Size"):
        t = ctx.types.get(node.input[0])
        if t is None:
            return None
        inputs = [np.array([element(d) for d in t.shape], dtype=object)]
    else:
        inputs = [known(ctx, i) if i else None for i in node.input]
        if any(v is None and i for v, i in zip(inputs, node.input)):
            return None
    try:
        outputs = fn(inputs, attrs)
    except (Undecided, TecompError, ValueError, IndexError, OverflowError, TypeError):
        # An element the facts do not decide, or an expression the IR cannot form
        # (int64 bounds of a slice against int32 symbols): the value is unknown and the
        # node's converter treats its output as data.
        return None
    if outputs is None or any(o is None for o in outputs):
        return None
    return None if any(o.size > MAX_CONTENT for o in outputs) else outputs


def define(ctx, node, attrs, values: list) -> None:
    """Define ``node``'s outputs by their ``values``, in place of converting the node: a
    value of no symbol as a constant; a symbolic one as a small computation of its elements
    from the sizes (one single-element ``arange`` per element: kernels that run only where
    the value is read as data, as an index offset is), its value carried as the
    ``content`` of its type for the nodes that read it as a shape."""
    input_dtypes = [ctx.types[i].dtype if i else None for i in node.input]
    dtype_of = OUTPUT_DTYPES.get(node.op_type)
    dtype = dtype_of(input_dtypes, attrs) if dtype_of else input_dtypes[0]
    for name, value in zip([o for o in node.output if o], values):
        elements = [element(x) for x in value.reshape(-1)]
        if all(dims.is_static(x) for x in elements):
            ctx.const(np.array(elements, dtype=np.int64).astype(dtype).reshape(value.shape),
                      name=name)
            continue
        pieces = [ctx.emit("arange", [], start=x, limit=element(x + 1), delta=1,
                           dtype="int64") for x in elements]
        flat = pieces[0] if len(pieces) == 1 else ctx.emit("concat", pieces, axis=0)
        if dtype != "int64":
            flat = ctx.emit("cast", [flat], dtype=dtype)
        ctx.emit("reshape", [flat], [name], newshape=value.shape)
        ctx.types[name] = replace(ctx.types[name], content=tuple(elements))
