"""Tests of graph dimensions (tecomp.graph.dims): simplified as the operators simplify the
sizes they compute (one rule, tecomp.ir.arith.simplify_size), products divided by
cancelling symbolic factors."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tecomp import te
from tecomp.errors import TecompError
from tecomp.graph import dims
from tecomp.ir.arith import simplify
from tecomp.ir.functor import substitute
from tecomp.ir import expr as E
from tecomp.ir.arith import simplify_size
from tecomp.ir.structural import structural_equal
from tecomp.topi import transform

seq, batch = te.var("seq"), te.var("batch")


def test_a_dimension_is_the_size_the_operator_computes():
    # Range(0, seq, 1) in the graph and in the kernel: both ``seq``, not ``max(seq, 0)``.
    length = transform.range_length(0, seq, 1)
    assert dims.to_text(dims.normalize(length)) == "seq"
    assert structural_equal(dims.normalize(length), simplify_size(length))
    out = transform.arange(0, seq, 1)
    assert structural_equal(out.shape[0], dims.normalize(length))
    assert dims.to_text(dims.normalize(te.max(te.min(seq, 512), 0))) == "min(seq, 512)"
    assert dims.normalize(te.max(te.min(seq, 512), 0) - te.min(seq, 512) + 6) == 6


def test_quotient_cancels_symbolic_factors():
    assert dims.quotient([batch, seq, 256], [seq * batch, 4]) == 64
    assert dims.to_text(dims.quotient([batch * 4, seq], [4])) in ("batch * seq", "seq * batch")
    assert dims.quotient([batch, 6], [seq]) is None
    assert dims.quotient([batch, 6], [4]) is None


def _dim_expressions():
    """Dimension expressions over two symbols: + - * // % min max of symbols and
    constants (a divisor or modulus is a positive constant, as the operators write)."""
    leaves = st.one_of(st.just(seq), st.just(batch),
                       st.integers(0, 9).map(lambda n: E.IntImm(n, seq.dtype)))

    def extend(children):
        binary = st.sampled_from([lambda a, b: a + b, lambda a, b: a - b,
                                  lambda a, b: a * b, te.min, te.max])
        by_constant = st.sampled_from([lambda a, k: a // k, lambda a, k: a % k])
        return st.one_of(st.builds(lambda f, a, b: f(a, b), binary, children, children),
                         st.builds(lambda f, a, k: f(a, k), by_constant, children,
                                   st.integers(1, 7)))

    return st.recursive(leaves, extend, max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(d=_dim_expressions(), s=st.integers(1, 300), b=st.integers(1, 16))
def test_a_dimension_evaluates_as_substituting_and_simplifying_does(d, s, b):
    bindings = {seq: s, batch: b}
    slow = simplify(substitute(d, {v: E.IntImm(n, v.dtype) for v, n in bindings.items()}))
    assert dims.evaluate(d, bindings) == int(slow.value)


@settings(max_examples=100, deadline=None)
@given(shape=st.lists(_dim_expressions(), min_size=1, max_size=4), s=st.integers(1, 300),
       b=st.integers(1, 16))
def test_shapes_evaluate_at_once_as_each_dimension_does(shape, s, b):
    bindings = {seq: s, batch: b}
    evaluator = dims.shapes_evaluator([tuple(shape), (3, seq)])
    assert evaluator(bindings) == [tuple(dims.evaluate(d, bindings) for d in shape), (3, s)]


@settings(max_examples=100, deadline=None)
@given(shape=st.lists(_dim_expressions(), min_size=0, max_size=4), s=st.integers(1, 300),
       b=st.integers(1, 16))
def test_sizes_evaluate_as_the_products_of_the_shapes(shape, s, b):
    bindings = {seq: s, batch: b}
    shapes = [tuple(shape), (3, seq), ()]
    sizes = dims.sizes_evaluator(shapes)(bindings)
    assert sizes == [math.prod(x) for x in dims.shapes_evaluator(shapes)(bindings)]
    with pytest.raises(TecompError, match="unbound symbols"):
        dims.sizes_evaluator([(batch, seq)])({seq: 5})


def test_a_shape_with_an_unbound_symbol_names_it():
    evaluator = dims.shapes_evaluator([(batch, seq * 2)])
    assert evaluator({seq: 5, batch: 2}) == [(2, 10)]
    with pytest.raises(TecompError, match="unbound symbols"):
        evaluator({seq: 5})


def test_shapes_evaluate_without_the_ir_when_every_node_is_arithmetic(monkeypatch):
    # Constants inside expressions included: the generated function does all the work.
    evaluator = dims.shapes_evaluator([(batch * 4, seq // 2 + 1, te.min(seq, 512) % 7)])

    def refuse(*_):
        raise AssertionError("evaluated through the IR")

    monkeypatch.setattr(dims, "evaluate", refuse)
    assert evaluator({seq: 600, batch: 3}) == [(12, 301, 512 % 7)]
