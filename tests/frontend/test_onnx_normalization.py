"""tecomp.frontend.onnx_normalization: GroupNormalization (per-group and per-channel
scales) and MeanVarianceNormalization against onnx's reference."""

import numpy as np
import pytest
from onnx_node_runs import assert_matches_reference, node_model

from tecomp.errors import UnsupportedOpError
from tecomp.frontend import from_onnx


@pytest.mark.parametrize("opset, shape, groups", [
    (21, (3, 4, 2, 2), 2), (21, (2, 6, 5), 3), (18, (2, 6, 3, 2), 3), (21, (1, 4, 3), 4)])
def test_group_normalization(needs_llvm, rng, opset, shape, groups):
    x = rng.standard_normal(shape).astype("float32")
    n = shape[1] if opset >= 21 else groups
    scale, bias = rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype(
        "float32")
    model = node_model("GroupNormalization", {"x": x}, opset,
                       consts={"scale": scale, "bias": bias}, num_groups=groups,
                       epsilon=1e-2)
    assert_matches_reference(model, {"x": x}, rtol=1e-4, atol=1e-5)


def test_group_normalization_refuses_groups_that_do_not_divide_the_channels():
    model = node_model("GroupNormalization", {"x": np.zeros((1, 5, 2), "float32")}, 21,
                       consts={"scale": np.ones(5, "float32"), "bias": np.zeros(5, "float32")},
                       num_groups=2)
    with pytest.raises(UnsupportedOpError, match="num_groups=2 must divide the channels"):
        from_onnx(model)


@pytest.mark.parametrize("axes", [None, [1], [0, 1, 2, 3]])
def test_mean_variance_normalization(needs_llvm, rng, axes):
    x = rng.standard_normal((2, 3, 4, 5)).astype("float32")
    attrs = {} if axes is None else {"axes": axes}
    model = node_model("MeanVarianceNormalization", {"x": x}, 13, **attrs)
    assert_matches_reference(model, {"x": x}, rtol=1e-4, atol=1e-5)
