"""tecomp.frontend.onnx_batch_norm: BatchNormalization in training mode, Y and the updated
running statistics, against onnx's reference."""

import pytest
from onnx_node_runs import assert_matches_reference, node_model


@pytest.mark.parametrize("shape, momentum, outputs", [
    ((2, 3, 4, 5), 0.9, ("y", "mean", "var")), ((4, 2), 0.5, ("y",)),
    ((2, 3, 6), 0.1, ("y", "", "var"))])
def test_training_mode_normalises_by_the_batch(needs_llvm, rng, shape, momentum, outputs):
    c = shape[1]
    x = rng.standard_normal(shape).astype("float32")
    stats = {n: rng.standard_normal(c).astype("float32") for n in ("s", "b", "m")}
    stats["v"] = rng.uniform(0.5, 2, c).astype("float32")
    inputs = {"x": x, **stats}
    model = node_model("BatchNormalization", inputs, 15, outputs=outputs, training_mode=1,
                       momentum=momentum, epsilon=1e-3)
    assert_matches_reference(model, inputs, rtol=1e-4, atol=1e-5)
