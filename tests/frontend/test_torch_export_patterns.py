"""Node patterns that ``torch.onnx.export`` (the ``torch.export`` based exporter, opset 18)
writes for torchvision and Hugging Face models, rebuilt with ``onnx.helper``, imported,
built and compared with onnxruntime (1e-3 relative, 1e-4 absolute)."""

import numpy as np
import onnx_models
import pytest
from onnx import TensorProto, helper, numpy_helper

from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build

RTOL, ATOL = 1e-3, 1e-4


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _i64(name, values):
    return numpy_helper.from_array(np.array(values, "int64"), name)


def _build_and_compare(model, feeds, shape=None):
    mod, params = from_onnx(model, shape=shape)
    got = GraphModule(build(mod, params=params))(**feeds)
    for g, r in zip(got, onnx_models.run_onnxruntime(model, feeds)):
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL)


def _padding_mask_model():
    """Hugging Face's padding mask, ``mask[batch_idx[:, None], kv_idx[None, :]]``: a
    GatherND of the boolean attention mask with (batch, position) index pairs built by
    Range, Unsqueeze, Expand and Concat, selecting 0 or the dtype's minimum to add to the
    attention scores before the softmax."""
    nodes = [
        helper.make_node("Cast", ["attention_mask"], ["mask_bool"], to=TensorProto.BOOL),
        helper.make_node("Shape", ["attention_mask"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
        helper.make_node("Range", ["zero", "batch", "one"], ["batch_range"]),
        helper.make_node("Range", ["zero", "seq", "one"], ["seq_range"]),
        helper.make_node("Unsqueeze", ["batch_range", "axis1"], ["batch_col"]),
        helper.make_node("Unsqueeze", ["seq_range", "axis0"], ["seq_row"]),
        helper.make_node("Expand", ["batch_col", "shape"], ["batch_idx"]),
        helper.make_node("Expand", ["seq_row", "shape"], ["seq_idx"]),
        helper.make_node("Unsqueeze", ["batch_idx", "last"], ["batch_idx3"]),
        helper.make_node("Unsqueeze", ["seq_idx", "last"], ["seq_idx3"]),
        helper.make_node("Concat", ["batch_idx3", "seq_idx3"], ["pairs"], axis=-1),
        helper.make_node("GatherND", ["mask_bool", "pairs"], ["keep"], batch_dims=0),
        helper.make_node("Where", ["keep", "zero_f", "min_f"], ["bias"]),
        helper.make_node("Unsqueeze", ["bias", "axes12"], ["bias4"]),
        helper.make_node("Add", ["scores", "bias4"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
    ]
    inits = [_i64("zero", 0), _i64("one", 1), _i64("axis0", [0]), _i64("axis1", [1]),
             _i64("last", [-1]), _i64("axes12", [1, 2]),
             numpy_helper.from_array(np.array(0, "float32"), "zero_f"),
             numpy_helper.from_array(np.array(np.finfo("float32").min, "float32"), "min_f")]
    inputs = [helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                            ["batch", "seq"]),
              helper.make_tensor_value_info("scores", TensorProto.FLOAT,
                                            ["batch", 4, "seq", "seq"])]
    outputs = [helper.make_tensor_value_info("probs", TensorProto.FLOAT, None)]
    return _model(nodes, inputs, outputs, inits)


def test_padding_mask_gather_nd_matches_onnxruntime(needs_llvm, rng):
    mask = np.array([[1, 1, 0, 1, 0, 0], [1, 0, 1, 1, 1, 0]], "int64")
    scores = rng.standard_normal((2, 4, 6, 6)).astype("float32")
    feeds = {"attention_mask": mask, "scores": scores}
    _build_and_compare(_padding_mask_model(), feeds, shape={k: v.shape for k, v in feeds.items()})


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd_of_a_graph_input(needs_llvm, rng, batch_dims):
    nodes = [helper.make_node("GatherND", ["x", "idx"], ["y"], batch_dims=batch_dims)]
    inits = [_i64("idx", [[[0, 2], [1, -1]], [[1, 0], [0, -3]]])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    _build_and_compare(model, {"x": rng.standard_normal((2, 3, 4, 5)).astype("float32")})
