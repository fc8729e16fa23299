"""tecomp.frontend.onnx_pool_indices: MaxPool's indices (row- and column-major, padding,
strides, dilations, ties) against onnxruntime (onnx's reference numbers padded windows
with negative indices under storage_order=1), and 1-D pooling's refused."""

import numpy as np
import onnx_models
import pytest
from onnx import TensorProto
from onnx_node_runs import node_model

import tecomp
from tecomp.errors import UnsupportedOpError
from tecomp.frontend import from_onnx


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "storage_order": 1},
    {"kernel_shape": [2, 3], "dilations": [2, 1], "pads": [0, 1, 1, 0]},
])
def test_max_pool_indices(needs_llvm, rng, attrs):
    x = rng.standard_normal((2, 3, 5, 6)).astype("float32")
    x[0, 0, :2, :2] = 1.0   # a tie: the first in scan order wins
    model = node_model("MaxPool", {"x": x}, 22, outputs=("y", "i"), **attrs)
    for out, elem in zip(model.graph.output, (TensorProto.FLOAT, TensorProto.INT64)):
        out.type.tensor_type.elem_type = elem
    graph, params = from_onnx(model)
    got = tecomp.graph.GraphModule(tecomp.graph.build(graph, target="llvm", params=params))(
        x=x)
    want = onnx_models.run_onnxruntime(model, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_one_d_max_pool_indices_are_refused():
    model = node_model("MaxPool", {"x": np.zeros((1, 2, 8), "float32")}, 22,
                       outputs=("y", "i"), kernel_shape=[2])
    with pytest.raises(UnsupportedOpError, match="indices of 1-D pooling are not supported"):
        from_onnx(model)
