"""tecomp.frontend.onnx_math: Asin, Acos and Atan against onnx's reference, including the
ends of their domains and NaN outside them."""

import numpy as np
import pytest
from onnx_node_runs import assert_matches_reference, node_model

from tecomp.errors import UnsupportedOpError
from tecomp.frontend import from_onnx


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


@pytest.mark.parametrize("shape", [(2, 2), (3, 3, 3), (2, 4, 4), (1, 1), (5, 5)])
def test_det_matches_the_reference(needs_llvm, rng, shape):
    x = rng.standard_normal(shape).astype("float32")
    assert_matches_reference(node_model("Det", {"x": x}, 22), {"x": x}, rtol=1e-4, atol=1e-5)


def test_det_of_a_large_matrix_is_refused_naming_the_limit():
    model = node_model("Det", {"x": np.zeros((6, 6), "float32")}, 22)
    with pytest.raises(UnsupportedOpError, match=r"a 6 x 6 determinant is not supported; "
                                                  r"allowed: 1 to 5"):
        from_onnx(model)
