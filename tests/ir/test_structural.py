"""Tests of tecomp.ir.structural: structural equality and hashing."""

from tecomp.ir.expr import FloatImm, IntImm, Select, Var
from tecomp.ir.structural import structural_equal, structural_hash

x, y = Var("x"), Var("y")


def test_structural_equal_and_hash():
    a, b = x * 4 + y, x * 4 + y
    assert a is not b and structural_equal(a, b)
    assert structural_hash(a) == structural_hash(b)
    assert not structural_equal(x * 4 + y, y * 4 + x)
    assert not structural_equal(Var("x") + 1, Var("x") + 1)  # distinct vars
    assert structural_equal(FloatImm(0.0), FloatImm(0.0))
    assert not structural_equal(FloatImm(0.0), FloatImm(-0.0))
    assert not structural_equal(IntImm(1, "int32"), IntImm(1, "int64"))
    s1 = Select(x < 3, x, y, "int32")
    s2 = Select(x < 3, x, y, "int32")
    assert structural_equal(s1, s2)
