"""Every graph operator has an implementation for each target kind, or a stated reason
why not; and every implementation is of a graph operator or of the operator catalogue
(no list drifts from the other): both read off the one registry, tecomp.operators."""

import pytest

from tecomp import operators
from tecomp.topi import strategy

KINDS = ["llvm", "cuda"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_graph_operator_has_an_implementation_or_a_reason(kind):
    assert operators.missing_implementations(kind) == [], \
        f"graph operators without a {kind} implementation or a reason"


def test_the_operators_no_kernel_computes_say_where_they_go():
    kernel_free = {name: op.no_kernel for name, op in operators.graph_operators().items()
                   if op.no_kernel}
    assert sorted(kernel_free) == ["concat_view", "shape_of", "size_of"]
    assert all(not operators.lookup(name).implementations for name in kernel_free)


#: Operators of topi's catalogue (looked up by name, with ONNX's semantics) that tecomp's
#: own graph writes with others: ONNX's variadic Sum, Mean, Max and Min as chains of
#: binary operators, Flatten, Squeeze and Unsqueeze as reshapes, Split as slices.
CATALOGUE_ONLY = {"sum", "mean", "max", "min", "flatten", "squeeze", "unsqueeze", "split"}


@pytest.mark.parametrize("kind", KINDS)
def test_every_implementation_is_of_a_graph_operator_or_the_catalogue(kind):
    library = operators.library_operators(kind)
    assert sorted(name for name, op in library.items() if not op.in_graph) == \
        sorted(CATALOGUE_ONLY)


def test_one_entry_holds_an_operators_rule_pattern_and_implementations():
    softmax = operators.lookup("softmax")
    assert softmax.pattern == "reduce" and softmax.rule is not None
    assert strategy.get_implementation("softmax", "llvm") is softmax.implementations["llvm"]
    assert set(softmax.implementations) >= {"llvm", "cuda"}


def test_the_build_names_why_a_kind_leaves_an_operator_out():
    reason = strategy.why_not_implemented("qnn_conv2d_nchwc", "cuda")
    assert reason and "CPU layout" in reason
    assert strategy.why_not_implemented("conv2d", "cuda") is None
    assert strategy.why_not_implemented("qnn_conv2d", "cuda") is None
