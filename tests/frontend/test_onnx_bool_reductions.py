"""ReduceMax and ReduceMin of bool tensors (any and all), empty axes included, against
onnx's reference."""

import numpy as np
import pytest
from onnx_node_runs import assert_matches_reference, node_model


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("shape, axes, keepdims", [((3, 4), [1], 1), ((2, 3, 4), [0, 2], 0),
                                                   ((2, 0, 3), [1], 1)])
def test_bool_reductions_are_any_and_all(needs_llvm, rng, op, shape, axes, keepdims):
    x = rng.integers(0, 2, shape).astype(bool)
    model = node_model(op, {"x": x}, 20, consts={"axes": np.array(axes, "int64")},
                       keepdims=keepdims)
    assert_matches_reference(model, {"x": x})
