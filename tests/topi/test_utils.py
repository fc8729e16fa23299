import pytest

from tecomp import te
from tecomp.errors import ShapeError
from tecomp.topi.utils import get_const_tuple


def test_get_const_tuple_gives_python_ints():
    A = te.placeholder((4, 64), name="A")
    shape = get_const_tuple(A.shape)
    assert shape == (4, 64)
    assert all(type(d) is int for d in shape)
    assert get_const_tuple((3, 5)) == (3, 5)


def test_get_const_tuple_names_a_symbolic_dimension():
    n = te.var("n")
    A = te.placeholder((64, n), name="A")
    with pytest.raises(ShapeError, match=r"dimension 1 .*Var n.* not a constant"):
        get_const_tuple(A.shape)
