"""ONNX RoiAlign (tecomp.topi.roi_align) against onnxruntime: fixed and adaptive sampling,
both modes, both coordinate placements, regions past the map's edges and of no size, one
build for every number of regions; the checks of bad regions and batch indices; and the
same kernel for cuda (on the GPU, or in the simulator)."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from tecomp.errors import OnnxSpecError, RuntimeCheckError
from tecomp.frontend import from_onnx
from tecomp.graph import GraphInputError, GraphModule, build
from tecomp.graph.device_executor import DeviceGraphModule

import onnx_models

#: Regions (x1, y1, x2, y2) of a 10 x 12 map: inside, a thin one, one past every edge,
#: one of no size, one whole.
ROIS = np.array([[0, 5, 4, 9], [2.3, 1.7, 2.4, 1.9], [-3, -2, 14, 13], [1, 1, 1, 1],
                 [0, 0, 11, 9]], "float32")
BATCH = np.array([0, 1, 1, 0, 1], "int64")


def _model(**attrs):
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], **attrs)
    graph = helper.make_graph([node], "roi_align", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 10, 12]),
        helper.make_tensor_value_info("rois", TensorProto.FLOAT, ["R", 4]),
        helper.make_tensor_value_info("batch", TensorProto.INT64, ["R"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])


def _feeds(rng, rois=ROIS, batch=BATCH):
    return {"x": rng.standard_normal((2, 3, 10, 12)).astype("float32"), "rois": rois,
            "batch": batch}


CASES = [
    dict(output_height=3, output_width=4, sampling_ratio=2),
    dict(output_height=3, output_width=2, sampling_ratio=0, spatial_scale=0.5),
    dict(output_height=2, output_width=2, sampling_ratio=0, mode="max"),
    dict(output_height=5, output_width=5, sampling_ratio=1,
         coordinate_transformation_mode="output_half_pixel"),
]


@pytest.mark.parametrize("attrs", CASES, ids=["ratio2", "adaptive", "max", "output_half"])
def test_roi_align_matches_onnxruntime(attrs, needs_llvm, rng):
    model = _model(**attrs)
    mod, params = from_onnx(model)
    gm = GraphModule(build(mod, target="llvm", params=params))
    for count in (5, 2):  # one build for any number of regions
        feeds = _feeds(rng, ROIS[:count], BATCH[:count])
        ref, = onnx_models.run_onnxruntime(model, feeds)
        got, = gm(**feeds)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    assert not np.any(got[3:])  # (the region of no size, when there: zeros)


def test_roi_align_for_cuda(cuda_target, rng):
    model = _model(**CASES[1])
    mod, params = from_onnx(model)
    gm = DeviceGraphModule(build(mod, target="cuda", params=params))
    feeds = _feeds(rng)
    ref, = onnx_models.run_onnxruntime(model, feeds)
    np.testing.assert_allclose(gm(**feeds)[0], ref, rtol=1e-5, atol=1e-6)


def test_bad_regions_and_indices_are_reported(needs_llvm, rng):
    mod, params = from_onnx(_model(**CASES[1]))
    gm = GraphModule(build(mod, target="llvm", params=params))
    with pytest.raises(RuntimeCheckError, match="batch index 2 is out of range for N"):
        gm(**_feeds(rng, batch=np.array([0, 1, 2, 0, 1], "int64")))
    huge = np.array([[0, 0, 400, 9]], "float32")  # 400 x 0.5 / 2: 100 columns a bin
    with pytest.raises(RuntimeCheckError,
                       match="needs 100 points per bin along its width, more than the 13"):
        gm(**_feeds(rng, huge, BATCH[:1]))
    with pytest.raises(GraphInputError, match="batch"):
        gm(**_feeds(rng, batch=BATCH[:4]))
    with pytest.raises(OnnxSpecError, match="mode='median'; allowed in version 16: 'avg'"):
        from_onnx(_model(mode="median"))
    with pytest.raises(OnnxSpecError, match="sampling_ratio=-1; it must be a non-negative"):
        from_onnx(_model(sampling_ratio=-1))


def test_a_region_that_is_not_finite_is_refused(needs_llvm, rng):
    """NaN or infinite coordinates are a run-time error naming the region, as onnxruntime
    refuses them (and no pixel is read at an index computed from them)."""
    for sampling in (0, 2):
        mod, params = from_onnx(_model(output_height=3, output_width=4,
                                       sampling_ratio=sampling))
        gm = GraphModule(build(mod, target="llvm", params=params))
        for bad in (np.nan, np.inf):
            rois = np.array([[0, 0, 4, 4], [0, bad, 4, 4]], "float32")
            with pytest.raises(RuntimeCheckError, match="region 1 has a coordinate that is "
                                                        "not finite"):
                gm(**_feeds(rng, rois, BATCH[:2]))
