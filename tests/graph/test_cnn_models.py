"""The MobileNetV2-style and ResNet-style CNNs of ``tecomp.testing.models`` (small widths
and images, so CI stays quick), compared with onnxruntime, one build for every batch."""

import numpy as np
import onnx_models
import pytest

from tecomp.frontend import from_onnx
from tecomp.graph import GraphModule, build
from tecomp.testing import models

RTOL, ATOL = 1e-3, 1e-4
SMALL = {
    "mobilenet_v2": lambda: models.mobilenet_v2(width=0.35, image=64, classes=100),
    "resnet18": lambda: models.resnet(width=16, image=64, classes=100),
}


FULL = {"mobilenet_v2": models.mobilenet_v2, "resnet18": models.resnet}


def _check_batches(model, gm, batches):
    for batch in batches:
        feeds = models.example_inputs(model, batch=batch)
        ref, = onnx_models.run_onnxruntime(model, feeds)
        got, = gm(**feeds)
        np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_dynamic_batch_matches_onnxruntime_from_one_build(needs_llvm, name):
    model = SMALL[name]()
    mod, params = from_onnx(model)
    lib = build(mod, params=params)
    # BatchNorm is folded and the convolutions run on convolution templates (channel-
    # blocked ones from the first layer on, which reads the image planar).
    ops = {op for k in lib.kernels for op in k.ops}
    assert "batch_norm" not in ops
    assert {k.anchor for k in lib.kernels} & {"conv2d_nchwc", "depthwise_conv2d_nchwc"}
    _check_batches(model, GraphModule(lib), (1, 3))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FULL))
def test_full_size_models_run_batch_1_3_8_from_one_build(needs_llvm, name):
    model = FULL[name]()
    mod, params = from_onnx(model)
    _check_batches(model, GraphModule(build(mod, params=params)), (1, 3, 8))


def test_mobilenet_v2_has_the_torchvision_layer_count():
    model = models.mobilenet_v2()
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    depthwise = [n for n in convs if any(a.name == "group" and a.i > 1 for a in n.attribute)]
    assert (len(convs), len(depthwise)) == (52, 17)
    assert sum(n.op_type == "Add" for n in model.graph.node) == 10
