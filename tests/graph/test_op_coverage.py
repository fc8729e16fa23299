"""Every graph operator has an implementation for each target kind, or a stated reason
why not; and every implementation is of a graph operator or of the operator catalogue
(no list drifts from the other)."""

import pytest

from tecomp.graph.ops import OPS
from tecomp.topi import strategy

#: Graph operators no kernel computes, and where they go instead.
NO_KERNEL = {
    "concat_view": "a concatenation its inputs write in place (tecomp.graph.storage)",
    "shape_of": "rewritten by the graph passes into the sizes it reads",
    "size_of": "rewritten by the graph passes into the sizes it reads",
}


@pytest.mark.parametrize("kind", ["llvm", "cuda"])
def test_every_graph_operator_has_an_implementation_or_a_reason(kind):
    have = set(strategy.registered_ops(kind))
    missing = sorted(op for op in OPS if op not in have and op not in NO_KERNEL
                     and strategy.why_not_implemented(op, kind) is None)
    assert not missing, f"graph operators without a {kind} implementation or a reason"


#: Operators of topi's catalogue (looked up by name, with ONNX's semantics) that tecomp's
#: own graph writes with others: ONNX's variadic Sum, Mean, Max and Min as chains of
#: binary operators, Flatten, Squeeze and Unsqueeze as reshapes, Split as slices.
CATALOGUE_ONLY = {"sum", "mean", "max", "min", "flatten", "squeeze", "unsqueeze", "split"}


@pytest.mark.parametrize("kind", ["llvm", "cuda"])
def test_every_implementation_is_of_a_graph_operator_or_the_catalogue(kind):
    assert sorted(set(strategy.registered_ops(kind)) - set(OPS) - CATALOGUE_ONLY) == []


def test_the_build_names_why_a_kind_leaves_an_operator_out():
    reason = strategy.why_not_implemented("qnn_conv2d", "cuda")
    assert reason and "int8" in reason
    assert strategy.why_not_implemented("conv2d", "cuda") is None
