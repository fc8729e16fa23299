"""Tests of tecomp.ir.arith.interval: every interval operator holds every result of its
operator, checked by brute force over small intervals (negative values included)."""

import itertools

import pytest

from tecomp.ir.arith.interval import (
    iv_add,
    iv_floordiv,
    iv_floormod,
    iv_max,
    iv_min,
    iv_mul,
    iv_scale,
    iv_union,
)

SMALL = [(-5, -2), (-3, 4), (0, 0), (0, 6), (2, 7), (-4, -4)]
DIVISORS = [(1, 3), (2, 2), (-3, -1), (4, 9)]


def _holds(iv, values):
    lo, hi = iv
    return all((lo is None or lo <= v) and (hi is None or v <= hi) for v in values)


def _points(iv):
    return range(iv[0], iv[1] + 1)


@pytest.mark.parametrize("a, b", list(itertools.product(SMALL, SMALL)))
def test_add_mul_min_max_union_hold_every_result(a, b):
    pairs = [(x, y) for x in _points(a) for y in _points(b)]
    assert _holds(iv_add(a, b), [x + y for x, y in pairs])
    assert _holds(iv_mul(a, b), [x * y for x, y in pairs])
    assert _holds(iv_min(a, b), [min(x, y) for x, y in pairs])
    assert _holds(iv_max(a, b), [max(x, y) for x, y in pairs])
    assert _holds(iv_union(a, b), list(_points(a)) + list(_points(b)))
    assert iv_mul(a, b) == (min(x * y for x, y in pairs), max(x * y for x, y in pairs))


@pytest.mark.parametrize("a, d", list(itertools.product(SMALL, DIVISORS)))
def test_floordiv_floormod_hold_every_result(a, d):
    pairs = [(x, y) for x in _points(a) for y in _points(d)]
    assert _holds(iv_floordiv(a, d), [x // y for x, y in pairs])
    assert _holds(iv_floormod(a, d), [x % y for x, y in pairs])


def test_unbounded_sides_and_scale():
    assert iv_add((0, None), (1, 2)) == (1, None)
    assert iv_scale((1, 3), -2) == (-6, -2)
    assert iv_mul((None, -1), (2, 3)) == (None, -2)
    assert iv_floordiv((0, 10), (-1, 1)) == (None, None)  # the divisor may be zero
    assert iv_floormod((None, None), (8, 8)) == (0, 7)
