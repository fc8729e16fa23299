"""NonMaxSuppression and Unique, whose output sizes their input values decide: computed at
import from known values, the model specialised on the small inputs they come from; a
larger input is refused, naming it."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

import tecomp
from tecomp.frontend import from_onnx
from tecomp.graph.specialise import SpecialisationError

pytestmark = pytest.mark.usefixtures("needs_llvm")


def _nms_model(boxes: int):
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "limit", "iou"],
                              ["selected"]),
             helper.make_node("Unique", ["selected"], ["classes_and_boxes"], sorted=1)]
    inputs = [helper.make_tensor_value_info("boxes", T.FLOAT, [1, boxes, 4]),
              helper.make_tensor_value_info("scores", T.FLOAT, [1, 1, boxes])]
    inits = [helper.make_tensor("limit", T.INT64, [1], [3]),
             helper.make_tensor("iou", T.FLOAT, [1], [0.5])]
    graph = helper.make_graph(nodes, "nms", inputs,
                              [helper.make_tensor_value_info("selected", T.INT64, None),
                               helper.make_tensor_value_info("classes_and_boxes", T.INT64,
                                                             None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model, feeds):
    mod, params = from_onnx(model)
    gm = tecomp.graph.GraphModule(tecomp.graph.build(mod, target="llvm", params=params))
    return gm(**feeds)


def test_selections_follow_the_input_values(rng):
    model = _nms_model(6)
    for _ in range(2):  # a build per input values
        boxes = rng.random((1, 6, 4), dtype=np.float32)
        boxes[..., 2:] += boxes[..., :2]
        scores = rng.random((1, 1, 6), dtype=np.float32)
        got = _run(model, {"boxes": boxes, "scores": scores})
        want = ReferenceEvaluator(model).run(None, {"boxes": boxes, "scores": scores})
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_boxes_of_a_large_input_are_refused(rng):
    boxes = rng.random((1, 100, 4), dtype=np.float32)
    scores = rng.random((1, 1, 100), dtype=np.float32)
    with pytest.raises(SpecialisationError, match=r"input 'boxes', given with 400 elements"):
        _run(_nms_model(100), {"boxes": boxes, "scores": scores})
