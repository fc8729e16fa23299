"""Tests of Python conversions of constants: int(), indexing and float() as in TVM."""

import pytest

from tecomp import te
from tecomp.ir.expr import FloatImm, IntImm, Var


def test_int_and_index_of_int_constants():
    assert int(IntImm(7)) == 7 and int(IntImm(-3, "int64")) == -3
    assert [10, 11, 12][IntImm(2)] == 12
    assert list(range(IntImm(3))) == [0, 1, 2]
    A = te.placeholder((4, 5), name="A")
    assert int(A.shape[0]) == 4
    assert [int(d) for d in A.shape] == [4, 5]


def test_float_of_float_constants():
    assert float(FloatImm(0.5)) == 0.5
    assert float(FloatImm(2.0, "float64")) == 2.0


def test_int_of_a_non_constant_names_the_expression():
    n = Var("n")
    with pytest.raises(TypeError, match=r"n \* 2"):
        int(n * 2)
    A = te.placeholder((n, 3), name="A")
    with pytest.raises(TypeError, match="int\\(\\) of the expression n"):
        [int(d) for d in A.shape]
