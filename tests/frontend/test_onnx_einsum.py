"""tecomp.frontend.onnx_einsum: parsing equations, and Einsum models lowered to the
library's operators, built and run against onnxruntime (symbolic sizes, broadcasting,
diagonals, three operands)."""

import numpy as np
import onnx_models
import pytest
from onnx import TensorProto, helper

import tecomp
from tecomp.errors import UnsupportedOpError
from tecomp.frontend import ModelError, from_onnx
from tecomp.frontend.onnx_einsum import EquationError, parse_equation


@pytest.mark.parametrize("equation, ranks, terms, out", [
    ("bij, bjk -> bik", [3, 3], ["bij", "bjk"], "bik"),
    ("ij,jk", [2, 2], ["ij", "jk"], "ik"),           # implicit: the letters used once
    ("i,i", [1, 1], ["i", "i"], ""),
    ("ba", [2], ["ba"], "ab"),                        # implicit: alphabetical
    ("Ab,bA", [2, 2], ["Ab", "bA"], ""),
    ("...ii->...i", [4], ["01ii"], "01i"),
    ("...ij,j...->...i", [3, 2], ["0ij", "j0"], "0i"),  # ellipses aligned from the right
    ("...ij,jk", [2, 2], ["ij", "jk"], "ik"),         # an ellipsis of no axes
    ("->", [0], [""], ""),
])
def test_parse_equation(equation, ranks, terms, out):
    labels, output = parse_equation(equation, ranks)
    assert ["".join(t) for t in labels] == terms and "".join(output) == out


@pytest.mark.parametrize("equation, ranks, match", [
    ("ij,jk->ik", [2], "2 operand terms for 1 inputs"),
    ("ij->ij", [3], "does not fit an operand of rank 3"),
    ("i1->i", [2], "must be letters"),
    ("ij->ik", [2], "only axes of the operands"),
    ("ij->ii", [2], "each axis once"),
])
def test_malformed_equations_are_refused_naming_them(equation, ranks, match):
    with pytest.raises(EquationError, match=match):
        parse_equation(equation, ranks)


def _einsum(equation, shapes, opset=12):
    names = [f"x{k}" for k in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], name="es", equation=equation)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                      for n, s in zip(names, shapes)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


# (equation, symbolic input shapes, the sizes each symbol takes in two runs)
CASES = [
    ("bij,bjk->bik", [["b", "i", 5], ["b", 5, "k"]], [dict(b=1, i=3, k=4), dict(b=3, i=7, k=2)]),
    ("bhqd,bhkd->bhqk", [["b", 4, "s", 8], ["b", 4, "s", 8]], [dict(b=1, s=5), dict(b=2, s=9)]),
    ("bhqk,bhkd->bhqd", [["b", 2, "s", "s"], ["b", 2, "s", 6]], [dict(b=2, s=3)]),
    ("i,j->ij", [["i"], ["j"]], [dict(i=3, j=5), dict(i=1, j=2)]),
    ("ij->ji", [[3, "j"]], [dict(j=4)]),
    ("ij->i", [["i", 6]], [dict(i=2)]),
    ("bij->", [[2, 3, "n"]], [dict(n=4)]),
    ("ij,ij->ij", [["i", 5], ["i", 5]], [dict(i=3)]),
    ("ij,kj->ik", [["i", 7], ["k", 7]], [dict(i=2, k=3)]),   # symbolic columns
    ("ij,jk->ik", [[3, 4], [4, 5]], [{}]),
    ("bn,anm,bm->ba", [["b", 4], [3, 4, 5], ["b", 5]], [dict(b=2)]),
    ("...ij,...jk->...ik", [[2, 1, 3, 4], [1, 5, 4, 6]], [{}]),   # broadcast batch axes
    ("b...i,b...i->b...", [["b", 3, 4], ["b", 1, 4]], [dict(b=2)]),
    ("ij,jk,kl->il", [[2, 3], [3, 4], [4, 5]], [{}]),
    ("...ii->...i", [[3, 5, 5]], [{}]),
    ("ii", [[4, 4]], [{}]),                                      # the trace
    ("iij,jk->ik", [[3, 3, 2], [2, 4]], [{}]),
    ("i,i", [[5], [5]], [{}]),
]


@pytest.mark.parametrize("equation, shapes, runs", CASES, ids=[c[0] for c in CASES])
def test_einsum_matches_onnxruntime(needs_llvm, rng, equation, shapes, runs):
    model = _einsum(equation, shapes)
    mod, params = from_onnx(model)
    run = tecomp.graph.GraphModule(tecomp.graph.build(mod, target="llvm", params=params))
    for sizes in runs:
        feeds = {f"x{k}": rng.standard_normal([sizes.get(d, d) for d in s]).astype("float32")
                 for k, s in enumerate(shapes)}
        want, = onnx_models.run_onnxruntime(model, feeds)
        got, = run(**feeds)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_attention_scores_are_one_batched_matmul():
    mod, _ = from_onnx(_einsum("bhqd,bhkd->bhqk", [["b", 4, "s", 8], ["b", 4, "s", 8]]))
    ops = [n.op for n in mod.nodes]
    assert ops.count("matmul") == 1 and "reduce_sum" not in ops and "multiply" not in ops


def test_errors_name_the_node_and_the_equation():
    with pytest.raises(ModelError, match=r"node 'es': equation 'ij,jk->ik' has 2 operand "
                                         r"terms for 1 inputs"):
        from_onnx(_einsum("ij,jk->ik", [[2, 3]]))
    with pytest.raises(ModelError, match=r"axes labelled 'j' have sizes 3 and 4"):
        from_onnx(_einsum("ij,jk->ik", [[2, 3], [4, 5]]))
    with pytest.raises(UnsupportedOpError, match=r"node 'es': Einsum 'ii->i' takes a diagonal "
                                                 r"over axes of sizes n and n"):
        from_onnx(_einsum("ii->i", [["n", "n"]]))
