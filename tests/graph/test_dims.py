"""Tests of graph dimensions (tecomp.graph.dims): simplified as the operators simplify the
sizes they compute (one rule, tecomp.ir.arith.simplify_size), products divided by
cancelling symbolic factors."""

from tecomp import te
from tecomp.graph import dims
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
