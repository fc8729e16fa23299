"""What names mean while the LLVM emitter writes a function (``tecomp.codegen.llvm.symbols``)."""

import pytest

from tecomp.codegen.llvm.ir import Val
from tecomp.codegen.llvm.symbols import Symbols
from tecomp.errors import CodegenError
from tecomp.ir import Var
from tecomp.ir.analysis import buffer_key
from tecomp.ir.buffer import make_buffer


def test_a_variable_without_a_value_is_an_error_naming_it():
    with pytest.raises(CodegenError, match="variable 'k' is used but never defined"):
        Symbols().lookup(Var("k"))
    assert Symbols().value(Var("k")) is None


def test_binding_sets_or_forgets_the_lower_bound():
    i, s = Var("i"), Symbols()
    s.bind(i, Val("%i", "i64"), 3)
    assert (s.lookup(i).ref, s.lower_bound(i)) == ("%i", 3)
    s.bind(i, Val("%j", "i64"))
    assert (s.lookup(i).ref, s.lower_bound(i)) == ("%j", None)


def test_a_let_binding_restores_the_value_before_it():
    x, y, s = Var("x"), Var("y"), Symbols()
    s.bind(x, Val("%outer", "i64"))
    with s.binding(x, Val("%inner", "i64")), s.binding(y, Val("%y", "i64")):
        assert (s.lookup(x).ref, s.lookup(y).ref) == ("%inner", "%y")
    assert s.lookup(x).ref == "%outer" and s.value(y) is None


def test_buffers_in_scope_and_out_of_it():
    a, b = make_buffer("A", "float32", (4,)), make_buffer("B", "float32", (4,))
    s = Symbols()
    s.bind_buffer(buffer_key(a), "%a")
    assert s.buffer(a) == "%a"
    assert s.buffers_in_scope([buffer_key(b), buffer_key(a)]) == [(buffer_key(a), "%a")]
    s.unbind_buffer(buffer_key(a))
    with pytest.raises(CodegenError, match="buffer 'A' is accessed outside the region"):
        s.buffer(a)


def test_an_outlined_body_keeps_the_lower_bounds_only():
    n, a = Var("n"), make_buffer("A", "float32", (4,))
    s = Symbols()
    s.bind(n, Val("%n", "i64"), 0)
    s.bind_buffer(buffer_key(a), "%a")
    inner = s.for_outlined_body()
    assert inner.lower_bound(n) == 0
    assert inner.value(n) is None and inner.buffers_in_scope([buffer_key(a)]) == []
    inner.bind(n, Val("%m", "i64"), 5)
    assert s.lower_bound(n) == 0  # the enclosing function's table is not changed
