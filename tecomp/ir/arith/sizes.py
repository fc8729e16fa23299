"""Sizes: integer expressions over symbols that stand for tensor dimensions.

A symbol in a size (``batch``, ``seq``) is a dimension, so it is never negative: a clamp
such as ``max(min(seq, 512), 0)`` simplifies to ``min(seq, 512)``. The graph IR types
its tensors with sizes simplified this way, and the operators compute their output
shapes the same way, so both name one dimension by one expression.
"""

from __future__ import annotations

from .. import expr as E
from ..functor import collect_vars
from ..structural import structural_equal
from .analyzer import simplify
from .interval import Bounds


def size_bounds(size: E.PrimExpr) -> Bounds:
    """Every symbol of ``size`` bounded below by 0."""
    return {v: (0, None) for v in collect_vars(size)}


def simplify_size(size) -> E.PrimExpr:
    """``size`` (an int or an integer expression) simplified with its symbols taken as
    non-negative sizes."""
    size = E.as_expr(size)
    return simplify(size, size_bounds(size))


def size_factors(size) -> tuple[int, list]:
    """``(coefficient, symbolic factors)`` of ``size`` as a product after simplification:
    ``batch * seq * 4`` is ``(4, [batch, seq])``, a constant ``c`` is ``(c, [])``; a factor
    that is not a product (``min(seq, 512)``, ``seq + 1``) stays whole."""
    return _factors_of(simplify_size(size))


def product_factors(sizes) -> tuple[int, list]:
    """``(coefficient, symbolic factors)`` of the product of ``sizes`` (see
    :func:`size_factors`)."""
    coeff, factors = 1, []
    for size in sizes:
        c, f = size_factors(size)
        coeff, factors = coeff * c, factors + f
    return coeff, factors


def remove_factors(factors: list, removed: list) -> tuple[list, list]:
    """``factors`` less ``removed``, as multisets of structurally equal expressions:
    ``(what is left of factors, the factors of removed that factors lacks)``."""
    rest, missing = list(factors), []
    for f in removed:
        k = next((k for k, g in enumerate(rest) if structural_equal(f, g)), None)
        if k is None:
            missing.append(f)
        else:
            rest.pop(k)
    return rest, missing


def prefer_unclamped(sizes: list):
    """The size a broadcast of ``sizes`` (equal, or checked equal when bound) takes: the
    first that is not a clamp (``seq`` before ``min(seq, 512)``, a table sliced to the
    sequence), else the first."""
    return next((d for d in sizes if not isinstance(d, (E.Min, E.Max))), sizes[0])


def _factors_of(size: E.PrimExpr) -> tuple[int, list]:
    if isinstance(size, E.IntImm):
        return int(size.value), []
    if isinstance(size, E.Mul):
        ca, fa = _factors_of(size.a)
        cb, fb = _factors_of(size.b)
        return ca * cb, fa + fb
    return 1, [size]


__all__ = ["prefer_unclamped", "product_factors", "remove_factors", "simplify_size",
           "size_bounds", "size_factors"]
