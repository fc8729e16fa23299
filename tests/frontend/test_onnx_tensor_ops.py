"""tecomp.frontend.onnx_tensor_ops: CenterCropPad, ReverseSequence, EyeLike, Upsample and
SwiGLU against onnx's reference."""

import numpy as np
import pytest
from onnx import TensorProto
from onnx_node_runs import assert_matches_reference, node_model

from tecomp.frontend import ModelError, from_onnx


@pytest.mark.parametrize("shape, target, axes", [
    ((20, 10, 3), [10, 7, 3], None),      # crop, the odd difference cut at the end
    ((10, 7, 3), [20, 10, 3], None),      # pad, the odd difference padded at the end
    ((20, 8, 3), [10, 10], [0, -2]),      # crop one axis, pad another
])
def test_center_crop_pad(needs_llvm, rng, shape, target, axes):
    x = rng.standard_normal(shape).astype("float32")
    attrs = {} if axes is None else {"axes": axes}
    model = node_model("CenterCropPad", {"x": x}, 18,
                       consts={"shape": np.array(target, "int64")}, **attrs)
    assert_matches_reference(model, {"x": x})


@pytest.mark.parametrize("batch_axis, time_axis", [(0, 1), (1, 0)])
def test_reverse_sequence_reverses_each_prefix(needs_llvm, rng, batch_axis, time_axis):
    x = rng.standard_normal((4, 5, 3)).astype("float32")
    lengths = np.array([4, 0, 2, 1, 3], "int64")[:x.shape[batch_axis]]
    model = node_model("ReverseSequence", {"x": x}, 10, consts={"lens": lengths},
                       batch_axis=batch_axis, time_axis=time_axis)
    assert_matches_reference(model, {"x": x})


def test_reverse_sequence_refuses_a_length_past_the_steps():
    x = np.zeros((2, 3), "float32")
    model = node_model("ReverseSequence", {"x": x}, 10,
                       consts={"lens": np.array([4, 1], "int64")}, batch_axis=0, time_axis=1)
    with pytest.raises(ModelError, match=r"sequence_lens \[4, 1\] must lie in 0..3"):
        from_onnx(model)


@pytest.mark.parametrize("shape, attrs", [((4, 5), {"k": 1, "dtype": TensorProto.FLOAT}),
                                          ((3, 4), {"k": -2}), ((4, 4), {})])
def test_eye_like(needs_llvm, shape, attrs):
    x = np.zeros(shape, "int32")
    assert_matches_reference(node_model("EyeLike", {"x": x}, 22, **attrs), {"x": x})


def test_upsample_nearest_repeats_each_element(needs_llvm, rng):
    x = rng.standard_normal((1, 2, 2, 3)).astype("float32")
    model = node_model("Upsample", {"x": x}, 9,
                       consts={"scales": np.array([1, 1, 2, 3], "float32")}, mode="nearest")
    assert_matches_reference(model, {"x": x})


@pytest.mark.parametrize("dtype, alpha", [("float32", 1.0), ("float32", 0.5),
                                          ("float16", 1.0)])
def test_swiglu(needs_llvm, rng, dtype, alpha):
    a, b = (rng.standard_normal((3, 8)).astype(dtype) for _ in range(2))
    model = node_model("SwiGLU", {"a": a, "b": b}, 28, alpha=alpha)
    tol = 2e-3 if dtype == "float16" else 1e-5
    assert_matches_reference(model, {"a": a, "b": b}, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape, condition, axis", [
    ((3, 4), [True, False, True], 0), ((3, 4), [False, True, True, False], -1),
    ((2, 3), [0, 1, 1, 0, 1], None)])
def test_compress_keeps_the_selected_positions(needs_llvm, rng, shape, condition, axis):
    x = rng.standard_normal(shape).astype("float32")
    attrs = {} if axis is None else {"axis": axis}
    model = node_model("Compress", {"x": x}, 11,
                       consts={"c": np.array(condition).astype(bool)}, **attrs)
    assert_matches_reference(model, {"x": x})


def test_compress_refuses_a_position_past_the_axis():
    model = node_model("Compress", {"x": np.zeros((2, 2), "float32")}, 11,
                       consts={"c": np.array([0, 0, 1], bool)}, axis=0)
    with pytest.raises(ModelError, match="selects position 2 of an axis of 2"):
        from_onnx(model)
