"""fuse_attention: the chain batch_matmul -> scale -> mask -> softmax -> batch_matmul
becomes one attention node where a target has a fused implementation (CUDA), and stays
as it is where an intermediate is read elsewhere or a head size is symbolic."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.graph.passes import optimize, pipeline_for
from tecomp.graph.passes.attention import fuse_attention
from tecomp.target import Target

import onnx_models


def _model(extra_output=False, seq=4, head=8, nan_guard=False):
    """q[2, seq, head] @ k[2, head, seq] / 2 + mask[seq] -> softmax -> @ v[2, seq, 6];
    with ``nan_guard`` the probabilities pass through ``where(isnan(p), 0, p)``."""
    guard = [helper.make_node("IsNaN", ["p"], ["nan"]),
             helper.make_node("Where", ["nan", "zero", "p"], ["p_guarded"])]
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"]),
             helper.make_node("Div", ["s", "two"], ["scaled"]),
             helper.make_node("Add", ["scaled", "mask"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
             *(guard if nan_guard else []),
             helper.make_node("MatMul", ["p_guarded" if nan_guard else "p", "v"], ["y"])]

    def vi(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    inputs = [vi("q", [2, seq, head]), vi("k", [2, head, seq]), vi("v", [2, seq, 6]),
              vi("mask", [seq])]
    outputs = [vi("y", [2, seq, 6])] + ([vi("p", [2, seq, seq])] if extra_output else [])
    consts = [numpy_helper.from_array(np.array(c, "float32"), name)
              for c, name in ((2.0, "two"), (0.0, "zero"))]
    graph = helper.make_graph(nodes, "attention", inputs, outputs, consts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _optimized(model, target="cuda"):
    """The model after the passes before fusion (which would group its nodes)."""
    mod, params = from_onnx(model)
    passes = pipeline_for(Target(target))
    return optimize(mod, passes=passes[:[n for n, _ in passes].index("fuse_operators")])


def test_the_chain_becomes_one_attention_node_on_cuda():
    graph = _optimized(_model())
    ops = [n.op for n in graph.nodes]
    assert ops.count("attention") == 1 and "softmax" not in ops
    node = next(n for n in graph.nodes if n.op == "attention")
    assert node.attrs == {"scale": 0.5, "k_transposed": True}
    assert node.inputs == ("q", "k", "v", "mask") and node.outputs == ("y",)


def test_probabilities_guarded_against_nan_are_fused_with_empty_rows_zero(cuda_target, rng):
    """torch's exporter writes ``where(isnan(p), 0, p)`` after a masked softmax: fused,
    a row whose every key is masked gives zeros, as the guarded chain does."""
    model = _model(nan_guard=True)
    graph = _optimized(model)
    ops = [n.op for n in graph.nodes]
    assert ops.count("attention") == 1 and not {"softmax", "isnan", "where"} & set(ops)
    assert next(n for n in graph.nodes if n.op == "attention").attrs["zero_empty_rows"]
    feeds = {"q": rng.standard_normal((2, 4, 8)).astype("float32"),
             "k": rng.standard_normal((2, 8, 4)).astype("float32"),
             "v": rng.standard_normal((2, 4, 6)).astype("float32"),
             "mask": np.full(4, -np.inf, "float32")}
    mod, params = from_onnx(model)
    (got,) = GraphModule(build(mod, target=cuda_target, params=params))(**feeds)
    np.testing.assert_array_equal(got, np.zeros((2, 4, 6), "float32"))


def test_a_guard_read_elsewhere_keeps_the_chain():
    model = _model(nan_guard=True)
    model.graph.output.append(helper.make_tensor_value_info("nan", TensorProto.BOOL,
                                                            [2, 4, 4]))
    assert "attention" not in [n.op for n in _optimized(model).nodes]


def test_cpu_pipelines_keep_the_chain():
    assert "fuse_attention" not in [name for name, _ in pipeline_for(Target("llvm"))]
    assert "attention" not in [n.op for n in _optimized(_model(), "llvm").nodes]


def test_a_probability_read_elsewhere_keeps_the_chain():
    mod, _ = from_onnx(_model(extra_output=True))
    assert "attention" not in [n.op for n in fuse_attention(mod).nodes]


def test_a_symbolic_sequence_is_fused_and_a_symbolic_head_size_keeps_the_chain():
    assert "attention" in [n.op for n in _optimized(_model(seq="n")).nodes]
    assert "attention" not in [n.op for n in _optimized(_model(head="d")).nodes]


def test_a_four_dimensional_chain_with_a_mask_per_key():
    """As torch exports attention: products of [B, H, S, D], the mask [B, 1, 1, S] added
    after the scaling; with B = 1 the mask is read as its last axes."""
    graph = _optimized(onnx_models.attention_4d())
    node = next(n for n in graph.nodes if n.op == "attention")
    assert node.attrs["scale"] == 0.125
    assert tuple(graph.types[node.inputs[3]].shape) in ((4,), (1, 4))


def test_a_padding_mask_per_sequence_is_shared_by_its_heads():
    """BERT's mask [B, 1, 1, S] over scores [B, H, S, S] with a symbolic batch: read as
    [B, 1, S] at batch b // H."""
    graph = _optimized(onnx_models.attention_block(hidden=8, heads=2))
    node = next(n for n in graph.nodes if n.op == "attention")
    assert node.attrs["mask_heads"] == 2
    assert len(graph.types[node.inputs[3]].shape) == 3


@pytest.mark.parametrize("causal", [True, False])
def test_onnx_attention_with_a_mask_or_a_causal_frontier_is_fused(causal, cuda_target, rng):
    """ONNX ``Attention`` is imported with the rows its bias masks whole set to zeros after
    the softmax (``where(equal(reduce_max(bias), -inf), 0, p)``): fused, with the same
    zeros, as onnxruntime (the mask's row 1 allows no key)."""
    f = TensorProto.FLOAT
    names = ["Q", "K", "V"] + ([] if causal else ["mask"])
    node = helper.make_node("Attention", names, ["Y"], **({"is_causal": 1} if causal else {}))
    inputs = [helper.make_tensor_value_info(n, f, [1, 2, 4, 8]) for n in "QKV"]
    if not causal:
        inputs.append(helper.make_tensor_value_info("mask", f, [4, 4]))
    graph = helper.make_graph([node], "a", inputs, [helper.make_tensor_value_info("Y", f,
                                                                                  None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    attention = next(n for n in _optimized(model).nodes if n.op == "attention")
    assert attention.attrs["zero_empty_rows"]
    feeds = {n: rng.standard_normal((1, 2, 4, 8)).astype("float32") for n in "QKV"}
    if not causal:
        feeds["mask"] = np.where(rng.random((4, 4)) < 0.3, -np.inf, 0).astype("float32")
        feeds["mask"][1] = -np.inf
    mod, params = from_onnx(model)
    (got,) = GraphModule(build(mod, target=cuda_target, params=params))(**feeds)
    np.testing.assert_allclose(got, onnx_models.run_onnxruntime(model, feeds)[0], rtol=1e-5,
                               atol=1e-6)
