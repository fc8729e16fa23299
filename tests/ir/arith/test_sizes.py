"""Tests of sizes (tecomp.ir.arith.sizes) and of floor division by a symbolic size."""

from tecomp.ir.arith import simplify, simplify_size, size_factors
from tecomp.ir.expr import FloorDiv, FloorMod, IntImm, Max, Min, Var, binary
from tecomp.ir.structural import structural_equal

x, y, s, b = (Var(name) for name in ("x", "y", "s", "b"))


def test_a_size_treats_its_symbols_as_non_negative():
    assert str(simplify_size(binary(Max, binary(Min, s, IntImm(512)), IntImm(0)))) == "min(s, 512)"
    assert str(simplify_size(IntImm(3) * 4)) == "12"


def test_a_size_rounded_up_to_a_multiple_is_at_least_the_size():
    # (s + 63) // 64 * 64 - s is 63 - (s + 63) % 64, in [0, 63]: min and max decide.
    up = (s + 63) // 64 * 64
    assert str(simplify_size(binary(Min, up - 1, s - 1))) == "s - 1"
    assert structural_equal(simplify_size(binary(Max, up, s)), simplify_size(up))


def test_size_factors_split_a_product_into_coefficient_and_symbols():
    coeff, factors = size_factors(b * 4 * s)
    assert coeff == 4 and len(factors) == 2
    assert {f.name for f in factors} == {"b", "s"}
    coeff, factors = size_factors(binary(Min, s, IntImm(512)) * 2)
    assert coeff == 2 and structural_equal(factors[0], binary(Min, s, IntImm(512)))
    assert size_factors(IntImm(6)) == (6, [])


def test_divmod_by_a_symbolic_size_cancels_when_the_remainder_is_in_range():
    bounds = {x: (0, None), y: (0, 3), s: (4, None)}
    assert str(simplify((x * s + y) // s, bounds)) == "x"
    assert str(simplify((x * s + y) % s, bounds)) == "y"
    # The divisor may be a product: (x * 4s + y) // 4s with y < 4 <= 4s.
    bounds = {x: (0, None), y: (0, 3), s: (1, None)}
    assert str(simplify((x * s * 4 + y) // (s * 4), bounds)) == "x"
    assert str(simplify((x * s * 4 + y + s * 8) % (s * 4), bounds)) == "y"


def test_divmod_by_a_symbolic_size_stays_when_the_remainder_may_leave_the_range():
    # y may reach s (y <= 4, s >= 4): (x*s + s) // s is x + 1, not x.
    too_large = {x: (0, None), y: (0, 4), s: (4, None)}
    # y may be negative: (x*s - 1) // s is x - 1.
    negative = {x: (0, None), y: (-1, 2), s: (4, None)}
    for bounds in (too_large, negative):
        assert isinstance(simplify((x * s + y) // s, bounds), FloorDiv)
        assert isinstance(simplify((x * s + y) % s, bounds), FloorMod)
