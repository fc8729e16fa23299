"""tecomp.frontend.onnx_rotary: RotaryEmbedding (opset 23) lowered to the library's
operators, built once with symbolic batch and sequence and run against onnxruntime (4-D and
3-D inputs, position ids or per-token caches, halves or interleaved pairs, a partial
rotation), and the nodes it refuses."""

import numpy as np
import onnx_models
import pytest
from onnx import TensorProto, helper

import tecomp
from tecomp.frontend import ModelError, from_onnx

HEADS, HEAD_SIZE, MAX_POS = 2, 8, 32


def _rotary(x_shape, cache_shape, position_ids=True, **attrs):
    inputs = ["x", "cos", "sin"] + (["pos"] if position_ids else [])
    node = helper.make_node("RotaryEmbedding", inputs, ["y"], name="rope", **attrs)
    vis = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape),
           helper.make_tensor_value_info("cos", TensorProto.FLOAT, cache_shape),
           helper.make_tensor_value_info("sin", TensorProto.FLOAT, cache_shape)]
    if position_ids:
        vis.append(helper.make_tensor_value_info("pos", TensorProto.INT64, ["b", "s"]))
    graph = helper.make_graph([node], "g", vis,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


# (x's shape, the caches' shape, position ids given, attributes)
CASES = {
    "4d": (["b", HEADS, "s", HEAD_SIZE], [MAX_POS, HEAD_SIZE // 2], True, {}),
    "3d": (["b", "s", HEADS * HEAD_SIZE], [MAX_POS, HEAD_SIZE // 2], True,
           {"num_heads": HEADS}),
    "interleaved": (["b", HEADS, "s", HEAD_SIZE], [MAX_POS, HEAD_SIZE // 2], True,
                    {"interleaved": 1}),
    "partial": (["b", HEADS, "s", HEAD_SIZE], [MAX_POS, 2], True, {"rotary_embedding_dim": 4}),
    "partial_interleaved_3d": (["b", "s", HEADS * HEAD_SIZE], [MAX_POS, 2], True,
                               {"rotary_embedding_dim": 4, "interleaved": 1,
                                "num_heads": HEADS}),
    "per_token_caches": (["b", HEADS, "s", HEAD_SIZE], ["b", "s", HEAD_SIZE // 2], False, {}),
}


@pytest.mark.parametrize("case", CASES)
def test_rotary_embedding_matches_onnxruntime(needs_llvm, rng, case):
    x_shape, cache_shape, position_ids, attrs = CASES[case]
    model = _rotary(x_shape, cache_shape, position_ids, **attrs)
    mod, params = from_onnx(model)
    run = tecomp.graph.GraphModule(tecomp.graph.build(mod, target="llvm", params=params))
    for batch, seq in ((1, 5), (3, 2)):
        size = {"b": batch, "s": seq}
        feeds = {name: rng.standard_normal([size.get(d, d) for d in shape]).astype("float32")
                 for name, shape in (("x", x_shape), ("cos", cache_shape),
                                     ("sin", cache_shape))}
        if position_ids:
            feeds["pos"] = rng.integers(0, MAX_POS, (batch, seq)).astype("int64")
        want, = onnx_models.run_onnxruntime(model, feeds)
        got, = run(**feeds)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_rotation_is_elementwise_around_the_gathers():
    mod, _ = from_onnx(_rotary(*CASES["4d"][:3]))
    assert {n.op for n in mod.nodes} <= {"gather", "reshape", "slice", "multiply", "add",
                                         "subtract", "concat"}


@pytest.mark.parametrize("x_shape, cache_shape, attrs, match", [
    (["b", "s", 16], [MAX_POS, 4], {}, r"a 3-D input .* needs the num_heads attribute"),
    (["b", "s", 15], [MAX_POS, 4], {"num_heads": 2},
     r"the hidden size 15 of input X is not a multiple of num_heads=2"),
    (["b", 2, "s", 8], [MAX_POS, 4], {"rotary_embedding_dim": 3},
     r"rotary_embedding_dim=3 must be even and at most the head size 8"),
    (["b", 2, "s", 8], [MAX_POS, 2], {}, r"cos_cache has 2 angles a position; the rotation "
                                         r"needs 4"),
    (["b", 2, "s", 8], ["b", "s", 4], {}, r"cos_cache with position_ids must be 2-D"),
])
def test_malformed_nodes_are_refused_naming_the_argument(x_shape, cache_shape, attrs, match):
    with pytest.raises(ModelError, match=r"node 'rope': " + match):
        from_onnx(_rotary(x_shape, cache_shape, **attrs))
