"""Tests of tecomp.ir.structural: structural equality, hashing and numbering."""

from hypothesis import given, settings
from ir_strategies import int_exprs

from tecomp.ir.expr import FloatImm, IntImm, Select, Var
from tecomp.ir.structural import StructuralClasses, structural_equal, structural_hash

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


def test_structural_classes_number_equal_trees_alike():
    classes = StructuralClasses()
    a, b = (x + 1) * y, (x + 1) * y
    assert classes.number(a) == classes.number(b)
    assert classes.number(a) != classes.number((x + 2) * y)
    assert classes.number(Var("x") + 1) != classes.number(x + 1)  # distinct vars
    assert classes.number(FloatImm(0.0)) != classes.number(FloatImm(-0.0))
    assert classes.number(IntImm(1, "int32")) != classes.number(IntImm(1, "int64"))
    assert classes.free_vars(Select(x < 3, x + 1, IntImm(0), "int32")) == {x}
    assert classes.free_vars(a) == {x, y} and classes.free_vars(IntImm(2)) == set()


@settings(max_examples=200, deadline=None)
@given(int_exprs(), int_exprs())
def test_structural_classes_agree_with_structural_equal(a, b):
    classes = StructuralClasses()
    assert (classes.number(a) == classes.number(b)) == structural_equal(a, b)
