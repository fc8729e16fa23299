"""tecomp.frontend.onnx_sampling: AffineGrid and GridSample (every mode and padding mode,
2-D and 3-D, grids reaching past the image) against onnx's reference."""

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator
from onnx_node_runs import assert_matches_reference, node_model

import tecomp
from tecomp.frontend import from_onnx
from tecomp.frontend.onnx_sampling import base_grid


@pytest.mark.parametrize("size, align_corners", [([2, 3, 4, 5], 0), ([1, 1, 3, 2], 1),
                                                 ([2, 1, 2, 3, 4], 0), ([1, 1, 3, 2, 2], 1)])
def test_affine_grid(needs_llvm, rng, size, align_corners):
    k = len(size) - 2
    theta = rng.standard_normal((size[0], k, k + 1)).astype("float32")
    model = node_model("AffineGrid", {"theta": theta}, 20,
                       consts={"size": np.array(size, "int64")}, align_corners=align_corners)
    assert_matches_reference(model, {"theta": theta})


def test_affine_grid_size_must_start_with_thetas_batch(rng):
    # onnxruntime: "size[0] (3) must equal theta batch dimension (2)".
    theta = rng.standard_normal((2, 2, 3)).astype("float32")
    model = node_model("AffineGrid", {"theta": theta}, 20,
                       consts={"size": np.array([3, 1, 4, 5], "int64")})
    with pytest.raises(tecomp.TecompError, match=r"size \[3, 1, 4, 5\] must name theta's "
                                                 "batch of 2 first"):
        from_onnx(model)


def test_base_grid_lists_x_first():
    grid = base_grid([2, 3], align_corners=True)
    assert grid.shape == (6, 3)
    np.testing.assert_allclose(grid[1], [0.0, -1.0, 1.0])   # (row 0, column 1)


@pytest.mark.parametrize("mode, padding_mode, align_corners", [
    ("nearest", "zeros", 0), ("nearest", "reflection", 1), ("linear", "zeros", 1),
    ("linear", "border", 0), ("linear", "reflection", 0), ("cubic", "zeros", 0),
    ("cubic", "border", 1), ("cubic", "reflection", 1)])
def test_grid_sample_2d(needs_llvm, rng, mode, padding_mode, align_corners):
    x = rng.standard_normal((2, 3, 4, 5)).astype("float32")
    grid = rng.uniform(-1.7, 1.7, (2, 3, 6, 2)).astype("float32")
    model = node_model("GridSample", {"x": x, "grid": grid}, 22, mode=mode,
                       padding_mode=padding_mode, align_corners=align_corners)
    assert_matches_reference(model, {"x": x, "grid": grid}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode, padding_mode", [("nearest", "reflection"), ("linear", "zeros")])
def test_grid_sample_3d(needs_llvm, rng, mode, padding_mode):
    x = rng.standard_normal((1, 2, 3, 4, 2)).astype("float32")
    grid = rng.uniform(-1.5, 1.5, (1, 2, 3, 2, 3)).astype("float32")
    model = node_model("GridSample", {"x": x, "grid": grid}, 22, mode=mode,
                       padding_mode=padding_mode)
    assert_matches_reference(model, {"x": x, "grid": grid}, rtol=1e-4, atol=1e-5)


def test_grid_sample_16_takes_the_old_mode_names(needs_llvm, rng):
    # onnx's reference knows only the names of version 20: it runs the same node there.
    x = rng.standard_normal((1, 1, 3, 3)).astype("float32")
    grid = rng.uniform(-1, 1, (1, 2, 2, 2)).astype("float32")
    feeds = {"x": x, "grid": grid}
    graph, params = from_onnx(node_model("GridSample", feeds, 16, mode="bicubic"))
    got, = tecomp.graph.GraphModule(tecomp.graph.build(graph, target="llvm",
                                                       params=params))(**feeds)
    want, = ReferenceEvaluator(node_model("GridSample", feeds, 22, mode="cubic")).run(None,
                                                                                      feeds)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
