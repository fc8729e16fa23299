"""Canonical sums as values: ``SumExpr`` and its exact algebra.

A canonical sum is ``c + k1 * (a11 * a12 ...) + k2 * (a21 ...) + ...`` over *atoms*
(variables and the nodes that are not sums, interned by :class:`.AtomTable`, so compared
by identity). The functions here add, scale and split sums; they know nothing of bounds
or of an analyzer's state, and every one is exact over the integers.
"""

from __future__ import annotations


class SumExpr:
    """``const + Σ coeff * Π monomial``: ``terms`` maps a monomial (a tuple of atoms sorted
    by first appearance) to its non-zero integer coefficient. Never mutated once built."""

    __slots__ = ("const", "terms")

    def __init__(self, terms: dict, const: int):
        self.terms = terms
        self.const = const

    def is_const(self) -> bool:
        return not self.terms


_EMPTY: dict = {}


def const_sum(c: int) -> SumExpr:
    """The constant ``c`` as a sum."""
    return SumExpr(_EMPTY, c)


def sum_add(a: SumExpr, b: SumExpr, k: int = 1) -> SumExpr:
    """a + k*b."""
    if not b.terms:
        return SumExpr(a.terms, a.const + k * b.const)
    if not a.terms and k == 1:
        return SumExpr(b.terms, a.const + b.const)
    terms = dict(a.terms)
    for m, c in b.terms.items():
        v = terms.get(m, 0) + k * c
        if v:
            terms[m] = v
        else:
            del terms[m]
    return SumExpr(terms, a.const + k * b.const)


def sum_add_const(a: SumExpr, c: int) -> SumExpr:
    """a + c."""
    return SumExpr(a.terms, a.const + c) if c else a


def sum_scale(a: SumExpr, k: int) -> SumExpr:
    """k*a."""
    if k == 1:
        return a
    if k == 0:
        return const_sum(0)
    return SumExpr({m: c * k for m, c in a.terms.items()}, a.const * k)


def split_multiple(a: SumExpr, b: SumExpr) -> tuple | None:
    """``(q, r)`` with ``a == q*b + r``, where ``q`` takes every term of ``a`` that is a
    multiple of the single-term divisor ``b`` (its factors and a multiple of its
    coefficient) and ``r`` the rest; None when ``b`` is not one positive term.

    Example: ``a = i*n*2 + j + 3``, ``b = n`` gives ``q = i*2``, ``r = j + 3``.
    """
    if b.const or len(b.terms) != 1:
        return None
    (mb, kb), = b.terms.items()
    if kb <= 0:
        return None
    q_terms, r_terms = {}, {}
    for m, k in a.terms.items():
        rest = without_factors(m, mb)
        if rest is not None and k % kb == 0:
            q_terms[rest] = q_terms.get(rest, 0) + k // kb
        else:
            r_terms[m] = k
    q_const = q_terms.pop((), 0)
    return SumExpr(q_terms, q_const), SumExpr(r_terms, a.const)


def without_factors(m: tuple, factors: tuple) -> tuple | None:
    """Monomial ``m`` with each atom of ``factors`` removed once (atoms are interned, so
    compared by identity), or None when ``m`` lacks one of them."""
    rest = list(m)
    for f in factors:
        k = next((k for k, a in enumerate(rest) if a is f), None)
        if k is None:
            return None
        rest.pop(k)
    return tuple(rest)


__all__ = [
    "SumExpr",
    "const_sum",
    "split_multiple",
    "sum_add",
    "sum_add_const",
    "sum_scale",
    "without_factors",
]
