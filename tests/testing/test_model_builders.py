"""tecomp.testing.models without a compiler: the models are valid ONNX that onnxruntime
runs, their inputs follow the symbolic dimensions, and the light models are found."""

import os

import numpy as np
import onnx_models
import pytest

from tecomp.testing import models


@pytest.mark.parametrize("make, out_shape", [
    (lambda: models.bert_encoder(layers=1), (2, 5, 256)),
    (lambda: models.gpt2_decoder(layers=1), (2, 5, 1000)),
    (lambda: models.mobilenet_v2(width=0.35, image=32, classes=10), (2, 10)),
    (lambda: models.resnet(width=8, image=32, classes=10), (2, 10)),
    # 64 box channels and 3 classes at 21 anchors per 32x32 cell (strides 8, 16, 32).
    (lambda: models.yolo_detector(width=4, image=64, classes=3), (2, 67, 84)),
    (lambda: models.unet(width=4, levels=3, image=32), (2, 2, 32, 32)),
    (lambda: models.unet(width=4, levels=3, image=32, upsample="bilinear"), (2, 2, 32, 32)),
])
def test_models_run_in_onnxruntime_at_any_batch_and_sequence(make, out_shape):
    model = make()
    y, = onnx_models.run_onnxruntime(model, models.example_inputs(model, batch=2, seq=5))
    assert y.shape == out_shape
    assert np.isfinite(y).all() and y.std() > 1e-3


def test_example_inputs_follow_symbolic_dims_and_dtypes():
    feeds = models.example_inputs(models.bert_encoder(layers=1, vocab=50), batch=3, seq=7)
    assert {k: (v.shape, v.dtype) for k, v in feeds.items()} == {
        "input_ids": ((3, 7), np.int64), "attention_mask": ((3, 7), np.int64)}
    assert feeds["input_ids"].max() < 50
    assert set(np.unique(feeds["attention_mask"])) <= {0, 1}
    assert (feeds["attention_mask"][:, 0] == 1).all()


def test_resnet18_has_the_torchvision_layer_count():
    model = models.resnet()
    assert sum(n.op_type == "Conv" for n in model.graph.node) == 20  # 17 + 3 shortcuts
    resnet34 = models.resnet(depths=(3, 4, 6, 3))
    assert sum(n.op_type == "Conv" for n in resnet34.graph.node) == 36


def test_yolo_detector_and_unet_have_their_layers():
    def count(model, op):
        return sum(n.op_type == op for n in model.graph.node)

    yolo = models.yolo_detector()
    # YOLOv8n's convolutions but the distribution-focal decoding's fixed one.
    assert count(yolo, "Conv") == 63
    assert (count(yolo, "Resize"), count(yolo, "MaxPool"), count(yolo, "Split")) == (2, 3, 8)
    unet = models.unet()
    assert (count(unet, "ConvTranspose"), count(unet, "Concat")) == (3, 3)
    bilinear = models.unet(upsample="bilinear")
    assert (count(bilinear, "ConvTranspose"), count(bilinear, "Resize")) == (0, 3)
    with pytest.raises(ValueError, match="upsample='nearest'; allowed: 'transpose'"):
        models.unet(upsample="nearest")


def test_light_models_are_found_by_name():
    for name in models.LIGHT_MODELS:
        assert os.path.exists(models.light_model_path(name))
    with pytest.raises(ValueError, match="no light model 'resnet18'.*squeezenet"):
        models.light_model_path("resnet18")
