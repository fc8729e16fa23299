"""Expression building: dtype rules, constant folding, printing, identity semantics."""

import pytest

from tecomp import te
from tecomp.errors import DTypeError, TecompError
from tecomp.ir import expr as E


def test_python_number_takes_the_other_dtype():
    x = te.var("x", "float16")
    assert (x + 1).dtype == "float16"
    assert (x * 2.5).dtype == "float16"
    i = te.var("i", "int64")
    assert (i + 1).dtype == "int64"


def test_integers_widen():
    a, b = te.var("a", "int32"), te.var("b", "int64")
    e = a + b
    assert e.dtype == "int64"
    assert isinstance(e.a, E.Cast)


@pytest.mark.parametrize("build", [
    lambda i, f: i * 0.5,
    lambda i, f: i + f,
    lambda i, f: f + te.var("h", "float16"),
    lambda i, f: i / 2,
    lambda i, f: f % 2.0,
])
def test_silent_conversions_are_errors(build):
    i, f = te.var("i"), te.var("f", "float32")
    with pytest.raises(DTypeError) as err:
        build(i, f)
    assert "astype" in str(err.value) or "//" in str(err.value) or "%" in str(err.value)


def test_floor_semantics_of_integer_constants():
    assert (te.const(-7) // 2).value == -4
    assert (te.const(-7) % 2).value == 1


def test_float_floordiv_is_floor_of_division():
    f = te.var("f", "float32")
    e = f // 2.0
    assert isinstance(e, E.Call) and e.name == "floor"


def test_python_eq_is_identity_and_te_equal_builds_an_expression():
    i = te.var("i")
    assert (i == i) is True
    assert (i == te.var("i")) is False
    e = te.equal(i, 3)
    assert isinstance(e, E.EQ) and e.dtype == "bool"
    assert {i: 1}[i] == 1  # hashable


def test_expression_has_no_truth_value():
    i = te.var("i")
    with pytest.raises(TecompError, match="truth value"):
        bool(i < 3)


def test_printing_respects_precedence():
    i, j = te.var("i"), te.var("j")
    assert str((i + j) * 4 - (i - j)) == "(i + j) * 4 - (i - j)"
    assert str(te.max(i, j) // 2 % 3) == "max(i, j) // 2 % 3"


def test_intrinsics_need_floats():
    with pytest.raises(DTypeError, match="te.exp"):
        te.exp(te.var("i"))
    f = te.var("f")
    f = f.astype("float32")
    assert te.exp(f).dtype == "float32"
    assert te.abs(te.var("k")).dtype == "int32"


def test_if_then_else_checks_condition_dtype():
    i = te.var("i")
    with pytest.raises(DTypeError, match="condition"):
        te.if_then_else(i, 1, 2)
    e = te.if_then_else(i < 3, 1.0, 2.0)
    assert e.dtype == "float32"


def test_max_min_value():
    assert te.max_value("int8").value == 127
    assert te.min_value("uint8").value == 0
    assert te.max_value("float16").value == 65504.0
