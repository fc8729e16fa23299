"""tecomp.frontend.onnx_scatter: TensorScatter (linear and circular, positions given at
run time), MaxUnpool (with and without output_shape) and Col2Im (strides, dilations,
pads, 3-D) against onnx's reference."""

import numpy as np
import pytest
from onnx_node_runs import assert_matches_reference, node_model

from tecomp.frontend import from_onnx
from tecomp.frontend.onnx_converters import ModelError


@pytest.mark.parametrize("mode, positions", [("linear", [0, 2]), ("circular", [3, 1])])
def test_tensor_scatter_writes_each_entry_at_its_position(needs_llvm, rng, mode, positions):
    past = rng.standard_normal((2, 3, 5, 4)).astype("float32")
    update = rng.standard_normal((2, 3, 2, 4)).astype("float32")
    inputs = {"past": past, "update": update, "at": np.array(positions, "int64")}
    assert_matches_reference(node_model("TensorScatter", inputs, 24, mode=mode), inputs)


def test_tensor_scatter_on_another_axis_without_positions(needs_llvm, rng):
    past = rng.standard_normal((2, 6, 3)).astype("float32")
    update = rng.standard_normal((2, 2, 3)).astype("float32")
    inputs = {"past": past, "update": update}
    assert_matches_reference(node_model("TensorScatter", inputs, 24, axis=1), inputs)


@pytest.mark.parametrize("output_shape", [None, [1, 2, 5, 6]])
def test_max_unpool_puts_values_back_at_their_indices(needs_llvm, rng, output_shape):
    x = rng.standard_normal((1, 2, 2, 2)).astype("float32")
    # One position per 2 x 2 window of a [1, 2, 4, 4] input, numbered over the whole of it.
    rows, cols = rng.integers(0, 2, (2, 1, 2, 2, 2))
    window = np.arange(2)
    index = (np.arange(2)[:, None, None] * 16 + (2 * window[:, None] + rows) * 4
             + 2 * window[None, :] + cols).astype("int64")
    consts = {} if output_shape is None else {"shape": np.array(output_shape, "int64")}
    model = node_model("MaxUnpool", {"x": x, "i": index}, 22, consts=consts,
                       kernel_shape=[2, 2], strides=[2, 2])
    assert_matches_reference(model, {"x": x, "i": index})


def test_max_unpool_indices_of_another_shape_than_the_input_are_refused(needs_llvm, rng):
    # onnxruntime requires the indices to have the input's shape.
    x = rng.standard_normal((1, 1, 2, 2)).astype("float32")
    index = np.arange(4, dtype="int64").reshape(1, 2, 2)
    model = node_model("MaxUnpool", {"x": x, "i": index}, 22, kernel_shape=[2, 2],
                       strides=[2, 2])
    with pytest.raises(ModelError, match=r"the indices' shape \[1, 2, 2\] must be the "
                                         r"input's \[1, 1, 2, 2\]"):
        from_onnx(model)


@pytest.mark.parametrize("image, block, attrs", [
    ([5, 5], [1, 5], {}), ([5, 5], [2, 2], {"strides": [2, 2]}),
    ([6, 6], [2, 2], {"dilations": [1, 2], "pads": [0, 1, 1, 0]}),
    ([3, 4, 5], [2, 2, 2], {})])
def test_col2im_adds_the_blocks_back(needs_llvm, rng, image, block, attrs):
    k = len(image)
    strides, dil = attrs.get("strides", [1] * k), attrs.get("dilations", [1] * k)
    pads = attrs.get("pads", [0] * 2 * k)
    count = int(np.prod([(image[a] + pads[a] + pads[k + a] - dil[a] * (block[a] - 1) - 1)
                         // strides[a] + 1 for a in range(k)]))
    x = rng.standard_normal((2, 3 * int(np.prod(block)), count)).astype("float32")
    model = node_model("Col2Im", {"x": x}, 18, consts={
        "image": np.array(image, "int64"), "block": np.array(block, "int64")}, **attrs)
    assert_matches_reference(model, {"x": x}, rtol=1e-5, atol=1e-5)
