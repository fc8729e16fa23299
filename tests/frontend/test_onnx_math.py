"""tecomp.frontend.onnx_math: Asin, Acos and Atan against onnx's reference, including the
ends of their domains and NaN outside them."""

import numpy as np
import pytest
from onnx_node_runs import assert_matches_reference, node_model


@pytest.mark.parametrize("op", ["Asin", "Acos", "Atan"])
@pytest.mark.parametrize("dtype, opset", [("float32", 22), ("float64", 7), ("float16", 22)])
def test_inverse_trigonometric_matches_the_reference(needs_llvm, rng, op, dtype, opset):
    x = np.concatenate([rng.uniform(-1, 1, 61), [-1.0, 1.0, 0.0, 1.5, -7.0, np.inf]])
    x = x.astype(dtype)
    tol = 1e-3 if dtype == "float16" else 1e-6
    assert_matches_reference(node_model(op, {"x": x}, opset), {"x": x}, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape, axis, exclusive, reverse", [
    ((5,), 0, 0, 0), ((5,), 0, 1, 0), ((5,), 0, 0, 1), ((5,), 0, 1, 1),
    ((2, 3), 1, 0, 0), ((2, 3), -2, 1, 0), ((3, 4, 2), 1, 0, 1)])
@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_cumprod_matches_the_reference(needs_llvm, rng, shape, axis, exclusive, reverse, dtype):
    x = rng.integers(-3, 4, shape).astype(dtype)
    model = node_model("CumProd", {"x": x}, 26, consts={"axis": np.array(axis, "int64")},
                       exclusive=exclusive, reverse=reverse)
    assert_matches_reference(model, {"x": x})
