"""Converters of ONNX's mathematical operators beyond the elementwise basics of
:mod:`tecomp.frontend.onnx_converters`: the inverse trigonometric functions Asin, Acos,
Atan (:mod:`tecomp.topi.trigonometry`), CumProd (:mod:`tecomp.topi.cumulative`) and Det
of small matrices. Importing the module registers them."""

from __future__ import annotations

import itertools

import numpy as np

from ..graph import dims
from .onnx_converters import converter

#: The largest matrix Det expands (by Leibniz's formula: n! products of n elements).
DET_MAX_SIZE = 5

_TRIGONOMETRY = {"Asin": "asin", "Acos": "acos", "Atan": "atan"}


@converter("Asin", 7, 22)
@converter("Acos", 7, 22)
@converter("Atan", 7, 22)
def _inverse_trigonometric(ctx, node, attrs):
    ctx.emit(_TRIGONOMETRY[node.op_type], node.input[:1], node.output)


@converter("CumProd", 26)
def _cumprod(ctx, node, attrs):
    # The axis is a scalar input (a value the model is specialised on where it is one).
    axis = int(ctx.value_of(node.input[1], "axis").reshape(-1)[0])
    ctx.emit("cumprod", [node.input[0]], node.output, axis=axis,
             exclusive=int(attrs.get("exclusive", 0)), reverse=int(attrs.get("reverse", 0)))


def permutation_terms(n: int) -> tuple:
    """``(columns, signs)`` of Leibniz's formula for an ``n x n`` determinant: for each
    permutation p of ``0..n-1``, the flat indices ``i * n + p(i)`` of its elements and
    its sign."""
    perms = list(itertools.permutations(range(n)))
    columns = np.array([[i * n + p[i] for i in range(n)] for p in perms], dtype="int64")
    inversions = [sum(p[i] > p[j] for i in range(n) for j in range(i + 1, n)) for p in perms]
    return columns, np.array([(-1.0) ** k for k in inversions])


@converter("Det", 11, 22)
def _det(ctx, node, attrs):
    # sum over permutations p of sign(p) * prod_i x[i, p(i)]: one gather of the n! * n
    # elements, a product over each permutation's n, a signed sum. Exact in the sense of
    # no pivoting, and n! grows fast: matrices up to DET_MAX_SIZE.
    x = node.input[0]
    t = ctx.type_of(x)
    n = t.shape[-1] if len(t.shape) >= 2 else None
    if n is None or not dims.is_static(n) or not dims.equal(t.shape[-2], n):
        ctx.fail(f"the input {list(t.shape)} must end in a square matrix of a size known at "
                 "import")
    if not 1 <= n <= DET_MAX_SIZE:
        ctx.fail(f"a {n} x {n} determinant is not supported; allowed: 1 to {DET_MAX_SIZE}")
    columns, signs = permutation_terms(int(n))
    batch = tuple(t.shape[:-2])
    flat = ctx.emit("reshape", [x], newshape=batch + (int(n) * int(n),))
    elements = ctx.emit("gather", [flat, ctx.const(columns, "permutations")],
                        axis=len(batch), node=ctx.node_name)
    terms = ctx.emit("reduce_prod", [elements], axes=(-1,), keepdims=0)
    signed = ctx.emit("multiply", [terms, ctx.const(signs.astype(t.dtype), "signs")])
    ctx.emit("reduce_sum", [signed], node.output[:1], axes=(-1,), keepdims=0)
